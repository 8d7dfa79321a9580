/*
** tests/unit/test_matchers.c: label matchers and postings against a brute
** force reference. ~500 random series (1 to 5 labels from a few names,
** values that share prefixes or hold regex metacharacters, several profile
** types; one profile each), then thousands of random selectors of 0 to 3
** matchers of all four operators, with and without a type. The engine's
** answer (the series ember_totals_get returns) must equal the reference's:
** each matcher evaluated on each series in plain C, a missing label being
** "" (PromQL), =~ and !~ through em_regex_match (fully anchored). Label
** names and label values under random selectors are checked the same way.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "engine/engine.h"
#include "tests/unit/common/testutil.h"

#define T0 1732170000000LL
#define NSERIES 500
#define NSELECTORS 3000
#define NLABELQ 600
#define NNAMES 5
#define TYPE_NAME "__type__"

static const char *const names[NNAMES] = {
    "service", "pod", "zone", "env", "version",
};

/* "" (a label given with an empty value) must act as if it were absent. */
static const char *const values[] = {
    "api", "api-1", "api-12", "api-2", "api-", "a.b", "axb", "a", "ab",
    "db", "cache", "db-cache", "x.y.z", "x", "\xc3\xa9t\xc3\xa9", "API",
    "v1.2", "",
};

static const char *const types[] = {
    "process_cpu:samples:count:cpu:nanoseconds:delta",
    "memory:inuse_space:bytes:space:bytes",
    "memory:alloc_objects:count:space:bytes",
};

/* Names matchers may use: the real ones, the type, and one no series has. */
static const char *const matcher_names[] = {
    "service", "pod", "zone", "env", "version", "service", "pod",
    TYPE_NAME, "nolabel",
};

static const char *const eq_values[] = {
    "api", "api-1", "api-12", "a.b", "axb", "db", "cache", "x", "",
    "\xc3\xa9t\xc3\xa9", "nope", "api-1.*",
    "memory:inuse_space:bytes:space:bytes",
};

static const char *const regexes[] = {
    "api-.*", "a.b", "a\\.b", "(db|cache)", ".*", "", ".+", "api",
    "api-1.*", "api-\\d+", "[a-c].*", "api-1?2?", "(?i)api", "db|cache",
    ".*-.*", "\xc3\xa9.*", "\xc3\xa9t\xc3\xa9", "x\\.y\\..", "a|",
    "api-12|a.b", "a.*b", "[^a].*", "(api|db)(-.+)?", "api-?", "v1\\.2",
    ".*1.*", "memory:.*", "(?:x|a)", "a{1,2}", "api-1{2}",
};

/* One series of the reference: its type and each name's value ("" when
** absent). */
typedef struct rseries {
    int type;
    const char *val[NNAMES];
} rseries;

typedef struct world {
    char *dir;
    ember_db *db;
    rseries s[NSERIES];
    em_regex *re[sizeof regexes / sizeof regexes[0]];
    uint64_t rng;
} world;

static world W;

static uint32_t rnd(uint32_t n)
{
    W.rng ^= W.rng << 13;
    W.rng ^= W.rng >> 7;
    W.rng ^= W.rng << 17;
    return (uint32_t)((W.rng >> 11) % n);
}

#define PICK(a) ((a)[rnd((uint32_t)(sizeof(a) / sizeof((a)[0])))])

/* ---- the data ----------------------------------------------------------- */

static bool same_series(const rseries *a, const rseries *b)
{
    if (a->type != b->type)
        return false;
    for (int i = 0; i < NNAMES; i++)
        if (strcmp(a->val[i], b->val[i]) != 0)
            return false;
    return true;
}

/* A random series unlike the first N. */
static void random_series(int n, rseries *out)
{
    for (;;) {
        int nl = 1 + (int)rnd(5);
        bool dup = false;
        out->type = (int)rnd(3);
        for (int i = 0; i < NNAMES; i++)
            out->val[i] = "";
        for (int k = 0; k < nl; k++)
            out->val[rnd(NNAMES)] = PICK(values);
        for (int j = 0; j < n && !dup; j++)
            dup = same_series(&W.s[j], out);
        if (!dup)
            return;
    }
}

/* Appends series I's one profile (labels in a shuffled order, "" kept). */
static ember_profile series_profile(int i, ember_label *l,
                                    const ember_sample *smp)
{
    size_t n = 0;
    int start = (int)rnd(NNAMES);

    for (int k = 0; k < NNAMES; k++) {
        int j = (start + k) % NNAMES;
        if (W.s[i].val[j][0] != '\0' || rnd(4) == 0)
            l[n++] = (ember_label){ names[j], W.s[i].val[j] };
    }
    return tu_profile(types[W.s[i].type], l, n, T0 + i * 1000LL, smp, 1);
}

/* Series I reads back as its type, then its non-empty labels by name. */
static void check_series_labels(int i)
{
    ember_strlist *l = NULL;
    size_t want = 1;
    const char *prev = "";

    for (int j = 0; j < NNAMES; j++)
        want += W.s[i].val[j][0] != '\0' ? 2 : 0;
    assert_int_equal(ember_series_labels(W.db, (uint32_t)i, &l), EMBER_OK);
    assert_int_equal(ember_strlist_count(l), want);
    assert_string_equal(ember_strlist_get(l, 0), types[W.s[i].type]);
    for (size_t k = 1; k < want; k += 2) {
        const char *name = ember_strlist_get(l, k);
        int j = 0;
        while (j < NNAMES && strcmp(names[j], name) != 0)
            j++;
        assert_true(j < NNAMES);
        assert_true(strcmp(prev, name) < 0);
        assert_string_equal(ember_strlist_get(l, k + 1), W.s[i].val[j]);
        prev = name;
    }
    ember_strlist_free(l);
}

static int setup(void **state)
{
    uint32_t st;
    ember_sample smp[50];

    (void)state;
    memset(&W, 0, sizeof W);
    W.rng = 0x9e3779b97f4a7c15ull;
    W.dir = tu_tmpdir("matchers");
    W.db = tu_open(W.dir, 0);
    st = tu_synthetic_stack(W.db, 1);
    for (size_t i = 0; i < sizeof regexes / sizeof regexes[0]; i++)
        if (em_regex_compile(regexes[i], &W.re[i]) != EMBER_OK)
            fail_msg("regex /%s/: %s", regexes[i], ember_errmsg(NULL));
    for (int i = 0; i < NSERIES; i += 50) {
        ember_label l[50][NNAMES];
        ember_profile ps[50];
        for (int j = 0; j < 50; j++)
            random_series(i + j, &W.s[i + j]);
        for (int j = 0; j < 50; j++) {
            smp[j] = (ember_sample){ st, i + j + 1 };   /* id + 1 */
            ps[j] = series_profile(i + j, l[j], &smp[j]);
        }
        assert_int_equal(ember_append_batch(W.db, ps, 50), EMBER_OK);
    }
    for (int i = 0; i < NSERIES; i++)
        check_series_labels(i);
    assert_int_equal(tu_verify(W.db), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof regexes / sizeof regexes[0]; i++)
        em_regex_free(W.re[i]);
    ember_close(W.db);
    tu_rmdir(W.dir);
    return 0;
}

/* ---- the reference ------------------------------------------------------ */

typedef struct rsel {
    ember_selector sel;
    ember_matcher m[3];
    const em_regex *re[3];
} rsel;

static const char *value_of(const rseries *s, const char *name)
{
    if (strcmp(name, TYPE_NAME) == 0)
        return types[s->type];
    for (int i = 0; i < NNAMES; i++)
        if (strcmp(name, names[i]) == 0)
            return s->val[i];
    return "";
}

static bool ref_matches(const rsel *q, const rseries *s)
{
    if (q->sel.type != NULL && strcmp(q->sel.type, types[s->type]) != 0)
        return false;
    for (size_t i = 0; i < q->sel.nmatchers; i++) {
        const ember_matcher *m = &q->m[i];
        const char *v = value_of(s, m->name);
        bool yes;
        switch (m->op) {
        case EMBER_MATCH_EQ:
            yes = strcmp(v, m->value) == 0;
            break;
        case EMBER_MATCH_NEQ:
            yes = strcmp(v, m->value) != 0;
            break;
        case EMBER_MATCH_RE:
            yes = em_regex_match(q->re[i], v, strlen(v));
            break;
        default:
            yes = !em_regex_match(q->re[i], v, strlen(v));
            break;
        }
        if (!yes)
            return false;
    }
    return true;
}

static void random_selector(rsel *q)
{
    memset(q, 0, sizeof *q);
    q->sel.sz = sizeof q->sel;
    q->sel.nmatchers = rnd(4);
    q->sel.matchers = q->m;
    switch (rnd(5)) {
    case 0:
    case 1:
        q->sel.type = types[rnd(3)];
        break;
    case 2:
        q->sel.type = "nope:a:b:c:d";
        break;
    default:
        break;
    }
    for (size_t i = 0; i < q->sel.nmatchers; i++) {
        ember_matcher *m = &q->m[i];
        m->name = PICK(matcher_names);
        m->op = (int)rnd(4);
        if (m->op == EMBER_MATCH_EQ || m->op == EMBER_MATCH_NEQ) {
            m->value = PICK(eq_values);
        } else {
            uint32_t k = rnd((uint32_t)(sizeof regexes / sizeof regexes[0]));
            m->value = regexes[k];
            q->re[i] = W.re[k];
        }
    }
}

static void describe(const rsel *q, char *out, size_t cap)
{
    static const char *const ops[] = { "=", "!=", "=~", "!~" };
    size_t n = (size_t)snprintf(out, cap, "type=%s {",
                                q->sel.type ? q->sel.type : "(any)");

    for (size_t i = 0; i < q->sel.nmatchers && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s%s\"%s\"", i ? ", " : "",
                              q->m[i].name, ops[q->m[i].op], q->m[i].value);
    if (n < cap)
        snprintf(out + n, cap - n, "}");
}

/* ---- the checks --------------------------------------------------------- */

/* The series the engine selects, as flags [NSERIES]; its count. */
static size_t engine_series(const rsel *q, bool *in)
{
    ember_totals *t = NULL;
    size_t n;
    int rc = ember_totals_get(W.db, &q->sel, &t);

    if (rc != EMBER_OK)
        fail_msg("totals: %s", ember_errmsg(W.db));
    memset(in, 0, NSERIES * sizeof *in);
    n = ember_totals_count(t);
    for (size_t i = 0; i < n; i++) {
        uint32_t id;
        const int64_t *times, *vals;
        size_t np;
        ember_totals_series(t, i, &id, &times, &vals, &np);
        assert_true(id < NSERIES);
        assert_false(in[id]);
        assert_int_equal(np, 1);
        assert_int_equal(times[0], T0 + (int64_t)id * 1000);
        assert_int_equal(vals[0], (int64_t)id + 1);
        in[id] = true;
    }
    ember_totals_free(t);
    return n;
}

static void test_selectors(void **state)
{
    static bool in[NSERIES];
    size_t nonempty = 0, partial = 0;

    (void)state;
    for (int k = 0; k < NSELECTORS; k++) {
        rsel q;
        size_t want = 0;
        random_selector(&q);
        engine_series(&q, in);
        for (int i = 0; i < NSERIES; i++) {
            bool ref = ref_matches(&q, &W.s[i]);
            if (ref != in[i]) {
                char d[512];
                describe(&q, d, sizeof d);
                fail_msg("selector %d %s: series %d: engine %s, reference "
                         "%s", k, d, i, in[i] ? "yes" : "no",
                         ref ? "yes" : "no");
            }
            want += ref;
        }
        nonempty += want > 0;
        partial += want > 0 && want < NSERIES;
    }
    /* The random selectors must not be all trivial. */
    assert_true(nonempty > NSELECTORS / 4);
    assert_true(partial > NSELECTORS / 4);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts and dedups V[N] in place; returns the count left. */
static size_t sort_uniq(const char **v, size_t n)
{
    size_t k = 0;

    qsort(v, n, sizeof *v, cmp_str);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || strcmp(v[k - 1], v[i]) != 0)
            v[k++] = v[i];
    return k;
}

static void same_list(const ember_strlist *l, const char **want, size_t n,
                      const rsel *q, const char *what)
{
    bool same = ember_strlist_count(l) == n;

    for (size_t i = 0; same && i < n; i++)
        same = strcmp(ember_strlist_get(l, i), want[i]) == 0;
    if (!same) {
        char d[512];
        describe(q, d, sizeof d);
        for (size_t i = 0; i < ember_strlist_count(l); i++)
            fprintf(stderr, "  engine: %s\n", ember_strlist_get(l, i));
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "  reference: %s\n", want[i]);
        fail_msg("%s under %s differ", what, d);
    }
}

/* Label values of a random name (the type included) and label names. */
static void test_label_lists(void **state)
{
    static const char *want[NSERIES * NNAMES];

    (void)state;
    for (int k = 0; k < NLABELQ; k++) {
        rsel q;
        const char *name = k % 7 == 0 ? TYPE_NAME : names[rnd(NNAMES)];
        const ember_selector *sel = k % 5 == 0 ? NULL : &q.sel;
        ember_strlist *l = NULL;
        size_t n = 0, nn = 0;
        random_selector(&q);
        for (int i = 0; i < NSERIES; i++) {
            const char *v = value_of(&W.s[i], name);
            if ((sel == NULL || ref_matches(&q, &W.s[i])) && v[0] != '\0')
                want[n++] = v;
        }
        n = sort_uniq(want, n);
        assert_int_equal(ember_label_values(W.db, name, sel, &l), EMBER_OK);
        same_list(l, want, n, &q, name);
        ember_strlist_free(l);

        for (int i = 0; i < NSERIES; i++)
            for (int j = 0; j < NNAMES; j++)
                if ((sel == NULL || ref_matches(&q, &W.s[i])) &&
                    W.s[i].val[j][0] != '\0')
                    want[nn++] = names[j];
        nn = sort_uniq(want, nn);
        assert_int_equal(ember_label_names(W.db, sel, &l), EMBER_OK);
        same_list(l, want, nn, &q, "label names");
        ember_strlist_free(l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selectors),
        cmocka_unit_test(test_label_lists),
    };
    return cmocka_run_group_tests_name("matchers", tests, setup, teardown);
}
