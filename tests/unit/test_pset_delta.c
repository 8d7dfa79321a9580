/*
** tests/unit/test_pset_delta.c: cumulative profiles made deltas
** (ingest/pset_delta.c, em_pset_delta and em_import_delta), on two
** successive heap and mutex profiles of one Go process (tests/go/cumgen,
** tests/data/pprof_cum).
**
** The expected deltas are computed here from the protobuf as protobuf-c
** unpacks it, apart from the decoder: per sample type, a stack is its
** chain of location addresses (one process, so an address names one
** place), its value cur minus prev, kept where positive. The decoded,
** subtracted set must hold exactly those, under the type with ":delta",
** and the other types as the current file holds them. Allocation failure
** at every point gives ENOMEM and leaks nothing (the sanitizer build).
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"
#include "ingest/pset.h"
#include "proto/profile.pb-c.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/pprof_cum"

typedef Perftools__Profiles__Profile pb_profile;

/* Reads DATA_DIR/NAME whole and gunzips it; skips the test when the data
** is not there (not run from the repository root). */
static uint8_t *read_profile(const char *name, size_t *len)
{
    char path[256], *raw;
    void *plain = NULL;
    size_t n = 0;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    if ((raw = tu_read_file(path, &n)) == NULL)
        skip();
    assert_true(n > 0);
    assert_int_equal(em_gunzip(raw, n, 1u << 30, &plain, len), 0);
    free(raw);
    return plain;                       /* em_free it */
}

static void decode_file(const char *name, em_pset *s, pb_profile **p)
{
    em_import_opts o = { .sz = sizeof o, .origin = name };
    size_t len;
    uint8_t *buf = read_profile(name, &len);
    int rc;

    memset(s, 0, sizeof *s);
    rc = em_pprof_decode(buf, len, &o, s);
    if (rc != EMBER_OK)
        fail_msg("%s: %d %s", name, rc, em_errmsg());
    *p = perftools__profiles__profile__unpack(NULL, len, buf);
    assert_non_null(*p);
    em_free(buf);
}

/* ---- the expected figures, from the protobuf ------------------------------ */

#define MAXD 64

/* A stack as its location addresses, leaf first, and a value. */
typedef struct chain {
    uint64_t addr[MAXD];
    size_t n;
    int64_t value;
} chain;

static uint64_t loc_addr(const pb_profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i]->address;
    fail_msg("location %llu is missing", (unsigned long long)id);
    return 0;
}

static bool chain_eq(const chain *a, const chain *b)
{
    return a->n == b->n && memcmp(a->addr, b->addr, a->n * sizeof *a->addr)
                           == 0;
}

/* Adds SIGN times each sample's value J of P to the chains at C (*N). */
static void chains_add(chain *c, size_t *n, size_t cap, const pb_profile *p,
                       size_t j, int sign)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        chain k = { .n = s->n_location_id };
        size_t at;
        assert_true(k.n <= MAXD);
        for (size_t d = 0; d < k.n; d++)
            k.addr[d] = loc_addr(p, s->location_id[d]);
        for (at = 0; at < *n && !chain_eq(&c[at], &k); at++)
            ;
        if (at == *n) {
            assert_true(*n < cap);
            c[(*n)++] = k;
        }
        c[at].value += sign * s->value[j];
    }
}

/* The sample type field of a pset type, in BUF. */
static const char *type_field(const char *type, char *buf, size_t cap)
{
    const char *st = strchr(type, ':') + 1;
    size_t n = strcspn(st, ":");

    assert_true(n < cap);
    memcpy(buf, st, n);
    buf[n] = '\0';
    return buf;
}

/* The value S holds for chain K in profile PI (its repeats summed), and
** how many of S's samples of PI it matched. */
static int64_t set_value(const em_pset *s, size_t pi, const chain *k,
                         size_t *hits)
{
    int64_t v = 0;

    for (size_t i = 0; i < s->nsamples; i++) {
        const em_pset_stack_ent *st = &s->stacks[s->samples[i].stack];
        chain c = { .n = st->n };
        if (s->samples[i].profile != pi || st->n != k->n)
            continue;
        for (size_t d = 0; d < c.n; d++)
            c.addr[d] = s->locs[s->pool[st->off + d]].address;
        if (chain_eq(&c, k)) {
            v += s->samples[i].value;
            (*hits)++;
        }
    }
    return v;
}

/* Checks profile PI of S (sample type J of the files) against cur minus
** prev (CUMULATIVE) or cur. */
static void check_profile(const em_pset *s, size_t pi, const pb_profile *cur,
                          const pb_profile *prev, size_t j, bool cumulative)
{
    enum { CAP = 4096 };
    chain *c = calloc(CAP, sizeof *c);
    size_t n = 0, want = 0, hits = 0, got = 0;

    assert_non_null(c);
    chains_add(c, &n, CAP, cur, j, 1);
    if (cumulative)
        chains_add(c, &n, CAP, prev, j, -1);
    for (size_t i = 0; i < n; i++) {
        size_t h = 0;
        int64_t v = set_value(s, pi, &c[i], &h);
        bool kept = cumulative ? c[i].value > 0 : true;
        if (kept && !(cumulative || c[i].value != 0))
            kept = h > 0;       /* a 0 sample may be stored or not */
        if (kept) {
            assert_int_equal(v, c[i].value);
            want++;
        } else {
            assert_int_equal(h, 0);
        }
        hits += h;
    }
    for (size_t i = 0; i < s->nsamples; i++)
        got += s->samples[i].profile == pi;
    assert_int_equal(hits, got);        /* nothing else is there */
    assert_true(want > 0);
    free(c);
}

/* Decodes NAME-cur and NAME-prev, subtracts with CUM (NULL: defaults), and
** checks every profile; returns the number of cumulative ones. */
static size_t run_pair(const char *name, const char *const *cum, size_t ncum)
{
    char f1[64], f2[64], field[64];
    em_pset cur, prev;
    pb_profile *pc, *pp;
    size_t ncumulative = 0;

    snprintf(f1, sizeof f1, "%s-cur.pb.gz", name);
    snprintf(f2, sizeof f2, "%s-prev.pb.gz", name);
    decode_file(f1, &cur, &pc);
    decode_file(f2, &prev, &pp);
    if (cum == NULL)
        cum = em_delta_default_types, ncum = em_delta_ndefault_types;
    assert_int_equal(em_pset_delta(&cur, &prev, cum, ncum), EMBER_OK);
    assert_int_equal(cur.nprofiles, pc->n_sample_type);
    for (size_t pi = 0; pi < cur.nprofiles; pi++) {
        const char *t = cur.profiles[pi].type, *st;
        bool c = false;
        size_t j;
        st = type_field(t, field, sizeof field);
        for (size_t i = 0; i < ncum; i++)
            c |= strcmp(cum[i], st) == 0;
        for (j = 0; j < pc->n_sample_type; j++)
            if (strcmp(pc->string_table[pc->sample_type[j]->type], st) == 0)
                break;
        assert_true(j < pc->n_sample_type);
        assert_int_equal(strstr(t, ":delta") != NULL, c);
        check_profile(&cur, pi, pc, pp, j, c);
        ncumulative += c;
    }
    perftools__profiles__profile__free_unpacked(pc, NULL);
    perftools__profiles__profile__free_unpacked(pp, NULL);
    em_pset_free(&cur);
    em_pset_free(&prev);
    return ncumulative;
}

static void test_heap_defaults(void **state)
{
    (void)state;
    assert_int_equal(run_pair("heap", NULL, 0), 2);     /* alloc_* */
}

static void test_mutex_defaults(void **state)
{
    (void)state;
    assert_int_equal(run_pair("mutex", NULL, 0), 2);
}

static void test_heap_config(void **state)
{
    static const char *const cum[] = { "inuse_space", "alloc_space" };

    (void)state;
    assert_int_equal(run_pair("heap", cum, 2), 2);
}

/* A profile minus itself: its cumulative profiles are empty. */
static void test_self(void **state)
{
    em_pset a, b;
    pb_profile *pa, *pb;
    uint64_t kept = 0, before[16];

    (void)state;
    decode_file("heap-cur.pb.gz", &a, &pa);
    decode_file("heap-cur.pb.gz", &b, &pb);
    assert_true(a.nprofiles <= 16);
    for (size_t i = 0; i < a.nprofiles; i++)
        before[i] = a.profiles[i].nsamples;
    assert_int_equal(em_pset_delta(&a, &b, em_delta_default_types,
                                   em_delta_ndefault_types), EMBER_OK);
    for (size_t i = 0; i < a.nprofiles; i++) {
        bool c = strstr(a.profiles[i].type, "alloc_") != NULL;
        assert_true(c ? a.profiles[i].nsamples == 0
                      : a.profiles[i].nsamples == before[i]);
        kept += a.profiles[i].nsamples;
    }
    assert_int_equal(kept, a.nsamples);
    perftools__profiles__profile__free_unpacked(pa, NULL);
    perftools__profiles__profile__free_unpacked(pb, NULL);
    em_pset_free(&a);
    em_pset_free(&b);
}

/* em_import_delta: a prev that is no profile is refused by name, and
** every allocation failure gives ENOMEM (leaks: the sanitizer build). */
static void test_import_errors(void **state)
{
    size_t lc, lp;
    uint8_t *cur = read_profile("heap-cur.pb.gz", &lc);
    uint8_t *prev = read_profile("heap-prev.pb.gz", &lp);
    em_pset a = { 0 }, b = { 0 };
    int rc = EMBER_ENOMEM;

    (void)state;
    char *dir = tu_tmpdir("delta");
    ember_db *db = tu_open(dir, 1);
    em_import_opts io = { .sz = sizeof io, .labels = &(ember_label){
                          "service_name", "t" }, .nlabels = 1 };
    em_import_stats st;

    assert_int_equal(em_import_delta(db, cur, lc, "junk", 4, "prev_profile",
                                     NULL, 0, &io, &st), EMBER_EINVAL);
    assert_non_null(strstr(em_errmsg(), "prev_profile"));
    assert_int_equal(st.samples, 0);
    assert_int_equal(em_import_delta(db, cur, lc, prev, lp, "prev_profile",
                                     NULL, 0, &io, &st), EMBER_OK);
    assert_true(st.profiles == 4 && st.samples > 0);
    ember_close(db);
    tu_rmdir(dir);
    for (unsigned n = 1; rc == EMBER_ENOMEM && n < 100000; n++) {
        em_import_opts o = { .sz = sizeof o };
        assert_int_equal(em_pprof_decode(cur, lc, &o, &a), EMBER_OK);
        assert_int_equal(em_pprof_decode(prev, lp, &o, &b), EMBER_OK);
        em_err_clear();
        em_alloc_fail_at(n);
        rc = em_pset_delta(&a, &b, em_delta_default_types,
                           em_delta_ndefault_types);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
        if (rc == EMBER_ENOMEM)
            assert_true(em_errmsg()[0] != '\0');
        em_pset_free(&a);
        em_pset_free(&b);
    }
    assert_int_equal(rc, EMBER_OK);
    em_free(cur);
    em_free(prev);
}

/* Builds a set by hand: for each of N samples, profile type T with label
** worker=W[i], a stack of the function F[i] (two frames: F[i] at an
** address of its name, main), and value V[i]. */
static void build(em_pset *s, const char *t, const char *const *w,
                  const char *const *f, const int64_t *v, size_t n)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        ember_label l = { "worker", w[i] };
        ember_function fn = { .name = f[i] }, fm = { .name = "main" };
        em_pset_line ln[2] = { { 0, 10 }, { 0, 20 } };
        uint32_t loc[2], st, pr;
        long at = em_pset_profile_find(s, t, &l, 1);
        assert_int_equal(em_pset_function(s, &fn, &ln[0].function), 0);
        assert_int_equal(em_pset_function(s, &fm, &ln[1].function), 0);
        assert_int_equal(em_pset_location(s, 0, 0x10 * (uint8_t)f[i][0],
                                          &ln[0], 1, &loc[0]), 0);
        assert_int_equal(em_pset_location(s, 0, 0x1000, &ln[1], 1, &loc[1]),
                         0);
        assert_int_equal(em_pset_stack(s, loc, 2, &st), 0);
        if (at < 0)
            assert_int_equal(em_pset_profile_add(s, t, &l, 1, 0, 0, 0, &pr),
                             0);
        else
            pr = (uint32_t)at;
        assert_int_equal(em_pset_sample(s, pr, st, v[i]), 0);
    }
}

/* Labels tell stacks apart; a value that fell is dropped; repeats sum;
** stacks are matched by content, not by their order in the sets. */
static void test_labels_and_resets(void **state)
{
    static const char *const cum[] = { "alloc_objects" };
    const char *t = "memory:alloc_objects:count:space:bytes";
    const char *const wc[] = { "a", "b", "a", "a", "a" };
    const char *const fc[] = { "f", "f", "g", "h", "h" };
    const int64_t vc[] = { 10, 7, 3, 2, 2 };
    const char *const wp[] = { "a", "a", "a" };
    const char *const fp[] = { "h", "g", "f" };
    const int64_t vp[] = { 1, 5, 4 };
    em_pset cur, prev;
    int64_t got[3] = { 0 };     /* f/a, f/b, h/a */

    (void)state;
    build(&cur, t, wc, fc, vc, 5);
    build(&prev, t, wp, fp, vp, 3);
    assert_int_equal(em_pset_delta(&cur, &prev, cum, 1), EMBER_OK);
    assert_int_equal(cur.nsamples, 3);      /* g fell: dropped */
    for (size_t i = 0; i < cur.nsamples; i++) {
        const em_pset_profile *p = &cur.profiles[cur.samples[i].profile];
        const em_pset_stack_ent *st = &cur.stacks[cur.samples[i].stack];
        const em_pset_loc *l = &cur.locs[cur.pool[st->off]];
        const char *fn = cur.functions[cur.lines[l->first].function].name;
        bool b = strcmp(p->labels[0].value, "b") == 0;
        assert_string_equal(p->type, "memory:alloc_objects:count:space:"
                                     "bytes:delta");
        got[fn[0] == 'f' ? (b ? 1 : 0) : 2] += cur.samples[i].value;
    }
    assert_int_equal(got[0], 6);            /* 10 - 4 */
    assert_int_equal(got[1], 7);            /* no prev under worker=b */
    assert_int_equal(got[2], 3);            /* 2 + 2 - 1 */
    assert_int_equal(cur.profiles[0].pos + cur.profiles[1].pos, 16);
    em_pset_free(&cur);
    em_pset_free(&prev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_defaults),
        cmocka_unit_test(test_mutex_defaults),
        cmocka_unit_test(test_heap_config),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_import_errors),
        cmocka_unit_test(test_labels_and_resets),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
