/*
** tests/unit/test_query_exec.c: the planner and executor through the public
** ember_query, on real imported pprof files (tests/data/pprof) and on
** synthetic series appended at chosen times and labels. Every answer is
** checked against the engine calls it must equal: a merge against
** ember_merge, a merge by against merges with the label pinned, a diff
** against two merges, focus and ignore against filtering a full merge by
** function names, totals against ember_totals_get; then time modifiers,
** series functions, metadata, caret errors and allocation failure at every
** point of complex queries.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "proto/profile.pb-c.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/pprof"
#define SYN_D "syn:cpu:nanoseconds:cpu:nanoseconds:delta"
#define SYN_C "syn:alloc:bytes:space:bytes"
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
#define HEAP "memory:inuse_space:bytes:space:bytes"
#define GOR "goroutine:goroutine:count:goroutine:count"
#define T0 INT64_C(1700000000000)
#define STEP_MS 10000               /* synthetic profiles every 10 s */
#define NPOINTS 12
#define NPODS 5
#define NSTACKS 6

typedef struct fixture {
    char *dir;
    ember_db *db;
    uint32_t st[NSTACKS];
} fixture;

static fixture fx;

/* ---- the data -------------------------------------------------------------------- */

static const char *const stack_names[NSTACKS][4] = {
    { "leaf_a", "mid_x", "main", NULL },
    { "leaf_b", "mid_x", "main", NULL },
    { "leaf_c", "mid_y", "main", NULL },
    { "leaf_a", "mid_y", "main", NULL },
    { "leaf_d", "main", NULL, NULL },
    { "gc", "runtime_main", NULL, NULL },
};

static const char *const pods[NPODS] = { "p0", "p1", "p2", "p3", "p4" };
static const char *const zones[NPODS] = { "a", "a", "b", "b", NULL };

/* Pod P's value for stack S in its K-th profile. */
static int64_t syn_value(int p, int k, int s)
{
    if ((p + k + s) % 7 == 3)
        return 0;                       /* some stacks skip some profiles */
    return (p + 1) * 100 + k * 10 + s + 1;
}

static void append_delta(void)
{
    for (int p = 0; p < NPODS; p++) {
        ember_label l[2] = { { "pod", pods[p] }, { "zone", zones[p] } };
        for (int k = 0; k < NPOINTS; k++) {
            ember_sample smp[NSTACKS];
            size_t n = 0;
            for (int s = 0; s < NSTACKS; s++)
                if (syn_value(p, k, s) != 0)
                    smp[n++] = (ember_sample){ fx.st[s], syn_value(p, k, s) };
            ember_profile pr = tu_profile(SYN_D, l, zones[p] ? 2 : 1,
                                          T0 + k * STEP_MS, smp, n);
            assert_int_equal(ember_append(fx.db, &pr), EMBER_OK);
        }
    }
}

/* Cumulative values of pod c<P> at point K: c1 resets after point 2. */
static const int64_t cum_values[2][5] = { { 100, 150, 230, 300, 390 },
                                          { 100, 150, 230, 40, 90 } };

static void append_cumulative(void)
{
    for (int p = 0; p < 2; p++) {
        ember_label l[2] = { { "pod", p == 0 ? "c0" : "c1" },
                             { "zone", "a" } };
        for (int k = 0; k < 5; k++) {
            ember_sample smp[2] = { { fx.st[0], cum_values[p][k] - 10 },
                                    { fx.st[5], 10 } };
            ember_profile pr = tu_profile(SYN_C, l, 2, T0 + k * STEP_MS,
                                          smp, 2);
            assert_int_equal(ember_append(fx.db, &pr), EMBER_OK);
        }
    }
}

static void import_file(const char *name, const char *source)
{
    char path[256];
    size_t len = 0;
    char *buf;
    ember_label l = { "source", source };
    /* numeric labels as series, so merge by (bytes) has groups to make */
    em_import_opts o = { .sz = sizeof o, .origin = name, .labels = &l,
                         .nlabels = 1, .numeric_labels = true };
    int rc;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    buf = tu_read_file(path, &len);
    assert_non_null(buf);
    rc = em_import(fx.db, buf, len, &o, NULL);
    if (rc != EMBER_OK)
        fail_msg("import %s: %s", name, ember_errmsg(fx.db));
    free(buf);
}

static int setup(void **state)
{
    (void)state;
    fx.dir = tu_tmpdir("query-exec");
    fx.db = tu_open(fx.dir, 0);
    for (int s = 0; s < NSTACKS; s++) {
        size_t n = 0;
        while (n < 4 && stack_names[s][n] != NULL)
            n++;
        fx.st[s] = tu_stack(fx.db, stack_names[s], n);
    }
    append_delta();
    append_cumulative();
    import_file("cpu.pb.gz", "cpu");
    import_file("heap.pb.gz", "heap");
    import_file("goroutine.pb.gz", "goroutine");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ember_close(fx.db);
    tu_rmdir(fx.dir);
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------- */

static ember_result *query_opts(const char *text, const ember_query_opts *o)
{
    ember_result *r = NULL;
    int rc = ember_query(fx.db, text, o, &r);

    if (rc != EMBER_OK)
        fail_msg("%s: %s", text, ember_errmsg(fx.db));
    assert_non_null(r);
    return r;
}

static ember_result *query(const char *text)
{
    return query_opts(text, NULL);
}

/* The query's error message (it must fail with RC). */
static const char *query_fails(const char *text, int rc)
{
    ember_result *r = NULL;
    int got = ember_query(fx.db, text, NULL, &r);

    if (got != rc)
        fail_msg("%s: got %d, want %d (%s)", text, got, rc,
                 ember_errmsg(fx.db));
    assert_null(r);
    return ember_errmsg(fx.db);
}

static ember_merged *merge_range(const char *type, const ember_matcher *m,
                                 size_t nm, int64_t from, int64_t to,
                                 const char *focus, const char *ignore)
{
    ember_selector sel = { .sz = sizeof sel, .type = type, .matchers = m,
                           .nmatchers = nm, .from_ms = from, .to_ms = to,
                           .focus = focus, .ignore = ignore };
    ember_merged *out = NULL;

    assert_int_equal(ember_merge(fx.db, &sel, &out), EMBER_OK);
    return out;
}

static ember_merged *merge_of(const char *type, const ember_matcher *m,
                              size_t nm)
{
    return merge_range(type, m, nm, 0, 0, NULL, NULL);
}

static void assert_merged_equal(const ember_merged *a, const ember_merged *b)
{
    const uint32_t *sa, *sb;
    const int64_t *va, *vb;
    size_t na = ember_merged_samples(a, &sa, &va);
    size_t nb = ember_merged_samples(b, &sb, &vb);
    size_t i = 0, j = 0;

    /* equal up to zero-valued stacks, which the result may leave out */
    while (i < na || j < nb) {
        if (i < na && va[i] == 0) {
            i++;
            continue;
        }
        if (j < nb && vb[j] == 0) {
            j++;
            continue;
        }
        assert_true(i < na && j < nb);
        assert_int_equal(sa[i], sb[j]);
        assert_int_equal(va[i], vb[j]);
        i++;
        j++;
    }
}

/* "leaf;mid;main" for stack I of P. */
static const char *stack_key(const em_rprofile *p, size_t i, char *buf,
                             size_t cap)
{
    const em_rstack *s = &p->stacks[i];
    size_t n = 0;

    buf[0] = '\0';
    for (size_t j = 0; j < s->nframes && n < cap; j++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", j ? ";" : "",
                              em_strtab_get(&p->names,
                                            p->frames[s->first + j].fn));
    return buf;
}

/* The value of the stack named KEY in P (0 when absent). */
static int64_t key_value(const em_rprofile *p, const char *key)
{
    char buf[4096];
    int64_t v = 0;

    for (size_t i = 0; i < p->nstacks; i++)
        if (strcmp(stack_key(p, i, buf, sizeof buf), key) == 0)
            v += p->stacks[i].value;
    return v;
}

static void build(const ember_merged *m, const char *type, em_rprofile *p)
{
    assert_int_equal(em_rprofile_build(fx.db, m, type, NULL, p), EMBER_OK);
}

/* P and Q hold the same stacks with the same values, in the same order. */
static void assert_prof_equal(const em_rprofile *p, const em_rprofile *q)
{
    char a[4096], b[4096];

    assert_int_equal(p->nstacks, q->nstacks);
    for (size_t i = 0; i < p->nstacks; i++) {
        assert_string_equal(stack_key(p, i, a, sizeof a),
                            stack_key(q, i, b, sizeof b));
        assert_int_equal(p->stacks[i].value, q->stacks[i].value);
        assert_int_equal(p->stacks[i].base, q->stacks[i].base);
    }
}

static const char *label_of(const ember_label *l, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].name, name) == 0)
            return l[i].value;
    return NULL;
}

/* ---- merge ---------------------------------------------------------------------- */

static void check_merge(const char *text, const char *type,
                        const ember_matcher *m, size_t nm)
{
    ember_result *r = query(text);
    ember_merged *want = merge_of(type, m, nm);
    em_rprofile p;
    uint64_t ns, np;

    assert_int_equal(ember_result_kind(r), EMBER_RESULT_PROFILE);
    assert_string_equal(ember_result_type(r), type);
    assert_int_equal(ember_result_groups(r), 1);
    assert_int_equal(r->groups[0].nlabels, 0);
    assert_merged_equal(r->groups[0].merged, want);
    ember_merged_info(want, &ns, &np);
    assert_int_equal(r->groups[0].nseries, ns);
    assert_int_equal(r->groups[0].nprofiles, np);
    build(want, type, &p);
    assert_prof_equal(&r->groups[0].prof, &p);
    em_rprofile_free(&p);
    ember_merged_free(want);
    ember_result_free(r);
}

static void test_merge(void **state)
{
    ember_matcher cpu = { "source", "cpu", EMBER_MATCH_EQ };
    ember_matcher a = { "zone", "a", EMBER_MATCH_EQ };

    (void)state;
    check_merge(SYN_D, SYN_D, NULL, 0);
    check_merge("merge(" SYN_D ")", SYN_D, NULL, 0);
    check_merge("merge(merge(" SYN_D "{zone=\"a\"}))", SYN_D, &a, 1);
    check_merge(CPU "{source=\"cpu\"}", CPU, &cpu, 1);
    check_merge("{__type__=\"" HEAP "\"}", HEAP, NULL, 0);
    /* the type is found from the matchers when they pin one */
    check_merge("{source=\"goroutine\"}", "goroutine:goroutine:count:"
                "goroutine:count", NULL, 0);
}

/* Adds the values of M into SUM (indexed by stack id). */
static void sum_into(int64_t *sum, size_t cap, const ember_merged *m)
{
    const uint32_t *s;
    const int64_t *v;
    size_t n = ember_merged_samples(m, &s, &v);

    for (size_t i = 0; i < n; i++) {
        assert_true(s[i] < cap);
        sum[s[i]] += v[i];
    }
}

/* The groups of TEXT (grouped by LABEL over TYPE) add up to the plain
** merge, and each equals the merge with LABEL pinned to its value. */
static void check_merge_by(const char *text, const char *type,
                           const char *label, size_t want_groups)
{
    ember_result *r = query(text);
    ember_merged *all = merge_of(type, NULL, 0);
    ember_stats st = { .sz = sizeof st };
    int64_t *sum, *want;

    assert_int_equal(ember_stats_get(fx.db, &st), EMBER_OK);
    sum = calloc(st.stacks + 1, sizeof *sum);
    want = calloc(st.stacks + 1, sizeof *want);
    if (want_groups != 0)
        assert_int_equal(ember_result_groups(r), want_groups);
    for (size_t g = 0; g < r->ngroups; g++) {
        const em_pgroup *pg = &r->groups[g];
        const char *v = label_of(pg->labels, pg->nlabels, label);
        ember_matcher m = { label, v != NULL ? v : "", EMBER_MATCH_EQ };
        ember_merged *one = merge_of(type, &m, 1);
        em_rprofile p;
        assert_true(pg->nlabels <= 1);
        assert_merged_equal(pg->merged, one);
        build(one, type, &p);           /* resolved once for all groups */
        assert_prof_equal(&pg->prof, &p);
        em_rprofile_free(&p);
        sum_into(sum, st.stacks + 1, pg->merged);
        if (g > 0) {        /* groups come sorted by their labels */
            const char *prev = label_of(r->groups[g - 1].labels,
                                        r->groups[g - 1].nlabels, label);
            assert_true(strcmp(prev != NULL ? prev : "", m.value) < 0);
        }
        ember_merged_free(one);
    }
    sum_into(want, st.stacks + 1, all);
    assert_memory_equal(sum, want, (st.stacks + 1) * sizeof *sum);
    free(sum);
    free(want);
    ember_merged_free(all);
    ember_result_free(r);
}

static void test_merge_by(void **state)
{
    ember_result *r;

    (void)state;
    check_merge_by("merge by (zone) (" SYN_D ")", SYN_D, "zone", 3);
    check_merge_by("merge without (pod) (" SYN_D ")", SYN_D, "zone", 3);
    check_merge_by("merge(" SYN_D ") by (pod)", SYN_D, "pod", NPODS);
    check_merge_by("merge by (worker) (" CPU ")", CPU, "worker", 0);
    check_merge_by("merge by (bytes) (" HEAP ")", HEAP, "bytes", 0);
    /* the missing label is "" and sorts first: the group without labels */
    r = query("merge by (zone) (" SYN_D ")");
    assert_int_equal(r->groups[0].nlabels, 0);
    assert_string_equal(r->groups[1].labels[0].value, "a");
    assert_int_equal(r->groups[1].nseries, 2);
    assert_int_equal(r->groups[1].nprofiles, 2 * NPOINTS);
    ember_result_free(r);
    /* by a label no series has: one group, the plain merge */
    r = query("merge by (nothing) (" SYN_D ")");
    assert_int_equal(ember_result_groups(r), 1);
    assert_int_equal(r->groups[0].nlabels, 0);
    ember_result_free(r);
    /* groups of series with nothing in range are left out */
    {
        ember_query_opts o = { .sz = sizeof o, .from_ms = 1, .to_ms = 2 };
        r = query_opts("merge by (zone) (" SYN_D ")", &o);
        assert_int_equal(ember_result_groups(r), 0);
        ember_result_free(r);
        r = query_opts(SYN_D, &o);                 /* a plain merge answers */
        assert_int_equal(ember_result_groups(r), 1);
        assert_int_equal(r->groups[0].prof.nstacks, 0);
        ember_result_free(r);
    }
}

/* ---- diff ------------------------------------------------------------------------- */

/* Checks diff group G against merges BASE and TARGET (either may be NULL). */
static void check_diff_group(const em_pgroup *g, const ember_merged *base,
                             const ember_merged *target, const char *type)
{
    em_rprofile b, t;
    char key[4096];
    size_t nonzero = 0;

    build(base, type, &b);
    build(target, type, &t);
    assert_true(g->prof.diff);
    for (size_t i = 0; i < g->prof.nstacks; i++) {
        stack_key(&g->prof, i, key, sizeof key);
        assert_int_equal(g->prof.stacks[i].base, key_value(&b, key));
        assert_int_equal(g->prof.stacks[i].value, key_value(&t, key));
    }
    /* every stack of either side is there */
    for (size_t i = 0; i < b.nstacks; i++)
        nonzero += b.stacks[i].value != 0;
    for (size_t i = 0; i < t.nstacks; i++) {
        stack_key(&t, i, key, sizeof key);
        nonzero += t.stacks[i].value != 0 && key_value(&b, key) == 0;
    }
    assert_int_equal(g->prof.nstacks, nonzero);
    /* merged is target minus base, by stack id */
    {
        const uint32_t *s, *sb, *st;
        const int64_t *v, *vb, *vt;
        size_t n = ember_merged_samples(g->merged, &s, &v);
        size_t nb = ember_merged_samples(base, &sb, &vb);
        size_t nt = ember_merged_samples(target, &st, &vt);
        for (size_t i = 0; i < n; i++) {
            int64_t want = 0;
            for (size_t k = 0; k < nt; k++)
                want += st[k] == s[i] ? vt[k] : 0;
            for (size_t k = 0; k < nb; k++)
                want -= sb[k] == s[i] ? vb[k] : 0;
            assert_int_equal(v[i], want);
            assert_int_not_equal(v[i], 0);
        }
    }
    em_rprofile_free(&b);
    em_rprofile_free(&t);
}

static void test_diff(void **state)
{
    ember_matcher za = { "zone", "a", EMBER_MATCH_EQ };
    ember_matcher zb = { "zone", "b", EMBER_MATCH_EQ };
    ember_merged *a = merge_of(SYN_D, &za, 1), *b = merge_of(SYN_D, &zb, 1);
    ember_merged *none = merge_range(SYN_D, NULL, 0, 1, 2, NULL, NULL);
    ember_result *r;
    int64_t v, base;
    size_t nf;
    const ember_frame *f;

    (void)state;
    r = query("diff(" SYN_D "{zone=\"a\"}, " SYN_D "{zone=\"b\"})");
    assert_int_equal(ember_result_kind(r), EMBER_RESULT_DIFF);
    assert_int_equal(ember_result_groups(r), 1);
    check_diff_group(&r->groups[0], a, b, SYN_D);
    assert_int_equal(r->groups[0].nseries, 4);
    assert_int_equal(ember_result_stack(r, 0, 0, &f, &nf, &v, &base), 0);
    assert_int_equal(v, r->groups[0].prof.stacks[0].value);
    assert_int_equal(base, r->groups[0].prof.stacks[0].base);
    ember_result_free(r);

    /* groups pair by labels; an unpaired group diffs against nothing */
    r = query("diff(merge by (zone) (" SYN_D "{zone=\"a\"}), "
              "merge by (zone) (" SYN_D "{zone!=\"\"}))");
    assert_int_equal(ember_result_groups(r), 2);
    assert_string_equal(r->groups[0].labels[0].value, "a");
    assert_string_equal(r->groups[1].labels[0].value, "b");
    check_diff_group(&r->groups[0], a, a, SYN_D);
    check_diff_group(&r->groups[1], none, b, SYN_D);
    assert_int_equal(r->groups[0].merged ? ember_merged_samples(
                         r->groups[0].merged, NULL, NULL) : 1, 0);
    ember_result_free(r);

    /* a diff of a side with nothing: every stack against 0 */
    r = query("diff(" SYN_D "{pod=\"nobody\"}, " SYN_D "{zone=\"a\"})");
    check_diff_group(&r->groups[0], none, a, SYN_D);
    ember_result_free(r);
    ember_merged_free(a);
    ember_merged_free(b);
    ember_merged_free(none);
}

/* ---- focus, ignore, top ----------------------------------------------------------- */

static bool through(const em_rprofile *p, size_t i, const em_regex *re)
{
    const em_rstack *s = &p->stacks[i];

    for (size_t j = 0; j < s->nframes; j++) {
        const char *n = em_strtab_get(&p->names, p->frames[s->first + j].fn);
        if (em_regex_match(re, n, strlen(n)))
            return true;
    }
    return false;
}

/* RE compiled as focus and ignore match it: anywhere in a name. */
static void compile_within(const char *re, em_regex **out)
{
    char buf[256];

    snprintf(buf, sizeof buf, ".*(?:%s).*", re);
    assert_int_equal(em_regex_compile(buf, out), EMBER_OK);
}

/* TEXT (a filter over TYPE) equals the full merge of TYPE{M} filtered:
** stacks through every FOCUS regex and through no IGNORE regex (each
** matching anywhere in a function name, as pprof's -focus). */
static void check_filter(const char *text, const char *type,
                         const ember_matcher *m, size_t nm,
                         const char *const *focus, size_t nfocus,
                         const char *const *ignore, size_t nignore)
{
    ember_result *r = query(text);
    ember_merged *all = merge_of(type, m, nm);
    em_rprofile full, *got = &r->groups[0].prof;
    em_regex *fre[4], *ire[4];
    char a[4096], b[4096];
    size_t k = 0;

    build(all, type, &full);
    for (size_t i = 0; i < nfocus; i++)
        compile_within(focus[i], &fre[i]);
    for (size_t i = 0; i < nignore; i++)
        compile_within(ignore[i], &ire[i]);
    assert_int_equal(ember_result_groups(r), 1);
    for (size_t i = 0; i < full.nstacks; i++) {
        bool keep = true;
        for (size_t j = 0; j < nfocus; j++)
            keep &= through(&full, i, fre[j]);
        for (size_t j = 0; j < nignore; j++)
            keep &= !through(&full, i, ire[j]);
        if (!keep)
            continue;
        assert_true(k < got->nstacks);
        assert_string_equal(stack_key(got, k, a, sizeof a),
                            stack_key(&full, i, b, sizeof b));
        assert_int_equal(got->stacks[k++].value, full.stacks[i].value);
    }
    assert_int_equal(k, got->nstacks);
    assert_true(k > 0);
    assert_true(k < full.nstacks);
    for (size_t i = 0; i < nfocus; i++)
        em_regex_free(fre[i]);
    for (size_t i = 0; i < nignore; i++)
        em_regex_free(ire[i]);
    em_rprofile_free(&full);
    ember_merged_free(all);
    ember_result_free(r);
}

static void test_focus_ignore(void **state)
{
    const char *mid_x[] = { "mid_x" }, *leaf_a[] = { "leaf_a" };
    const char *main_[] = { "main" }, *two[] = { "main", "leaf_a" };
    const char *mid_y[] = { "mid_y" }, *ign2[] = { "mid_y", "leaf_d" };
    const char *go_main[] = { "main\\..*" }, *runtime[] = { "runtime\\..*" };
    ember_matcher cpu = { "source", "cpu", EMBER_MATCH_EQ };

    (void)state;
    check_filter("focus(" SYN_D ", \"mid_x\")", SYN_D, NULL, 0, mid_x, 1,
                 NULL, 0);
    check_filter("ignore(" SYN_D ", \"leaf_a\")", SYN_D, NULL, 0, NULL, 0,
                 leaf_a, 1);
    check_filter("ignore(focus(" SYN_D ", \"main\"), \"mid_y\")", SYN_D,
                 NULL, 0, main_, 1, mid_y, 1);
    /* beyond one focus and one ignore: applied on the resolved stacks */
    check_filter("focus(focus(" SYN_D ", \"main\"), \"leaf_a\")", SYN_D,
                 NULL, 0, two, 2, NULL, 0);
    check_filter("ignore(ignore(" SYN_D ", \"mid_y\"), \"leaf_d\")", SYN_D,
                 NULL, 0, NULL, 0, ign2, 2);
    check_filter("merge(focus(" SYN_D ", \"mid_x\"))", SYN_D, NULL, 0,
                 mid_x, 1, NULL, 0);
    check_filter("focus(" CPU "{source=\"cpu\"}, \"main\\\\..*\")", CPU,
                 &cpu, 1, go_main, 1, NULL, 0);
    check_filter("ignore(" CPU "{source=\"cpu\"}, \"runtime\\\\..*\")", CPU,
                 &cpu, 1, NULL, 0, runtime, 1);
}

static void test_focus_diff_and_groups(void **state)
{
    ember_matcher za = { "zone", "a", EMBER_MATCH_EQ };
    ember_matcher zb = { "zone", "b", EMBER_MATCH_EQ };
    ember_merged *a = merge_range(SYN_D, &za, 1, 0, 0, "mid_x", NULL);
    ember_merged *b = merge_range(SYN_D, &zb, 1, 0, 0, "mid_x", NULL);
    ember_result *r;

    (void)state;
    /* focus on a diff filters both sides */
    r = query("focus(diff(" SYN_D "{zone=\"a\"}, " SYN_D "{zone=\"b\"}), "
              "\"mid_x\")");
    check_diff_group(&r->groups[0], a, b, SYN_D);
    ember_result_free(r);
    r = query("diff(focus(" SYN_D "{zone=\"a\"}, \"mid_x\"), focus(" SYN_D
              "{zone=\"b\"}, \"mid_x\"))");
    check_diff_group(&r->groups[0], a, b, SYN_D);
    ember_result_free(r);
    ember_merged_free(a);
    ember_merged_free(b);
    /* focus commutes with grouping */
    r = query("focus(merge by (zone) (" SYN_D "), \"leaf_b\")");
    for (size_t g = 0; g < r->ngroups; g++) {
        const char *z = label_of(r->groups[g].labels, r->groups[g].nlabels,
                                 "zone");
        ember_matcher m = { "zone", z ? z : "", EMBER_MATCH_EQ };
        ember_merged *want = merge_range(SYN_D, &m, 1, 0, 0, "leaf_b", NULL);
        assert_merged_equal(r->groups[g].merged, want);
        ember_merged_free(want);
    }
    ember_result_free(r);
}

/* The sum of |value| over M: what top's percentages are of. */
static int64_t abs_sum(const ember_merged *m)
{
    const int64_t *v;
    size_t n = ember_merged_samples(m, NULL, &v);
    int64_t sum = 0;

    for (size_t i = 0; i < n; i++)
        sum += v[i] < 0 ? -v[i] : v[i];
    return sum;
}

/* TEXT's one group carries WHOLE, the total before its focus and ignore,
** and keeps fewer stacks than that. */
static void check_whole(const char *text, int64_t whole)
{
    ember_result *r = query(text);
    const em_rprofile *p = &r->groups[0].prof;

    assert_int_equal(ember_result_groups(r), 1);
    assert_true(p->has_whole);
    assert_int_equal(p->whole, whole);
    assert_true(abs_sum(r->groups[0].merged) < whole);
    ember_result_free(r);
}

/* The "Showing nodes accounting for A, P of Z total" line of TEXT as top
** (RELATIVE: pprof's -relative_percentages) into LINE. */
static void top_showing(const char *text, bool relative, char *line,
                        size_t cap)
{
    ember_result *r = query(text);
    em_render_opts o = { .sz = sizeof o, .relative = relative };
    char buf[16384];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    const char *l;

    assert_non_null(f);
    assert_int_equal(em_render_result(f, r, "top", &o), EMBER_OK);
    fclose(f);
    l = strstr(buf, "Showing nodes accounting for ");
    assert_non_null(l);
    snprintf(line, cap, "%.*s", (int)strcspn(l, "\n"), l);
    ember_result_free(r);
}

/* focus and ignore keep the total of what they filtered as pprof's -focus
** and -ignore do, pushed into the engine (from its stored totals) or run
** on the resolved stacks; a grouped or nearest (@) merge per group. */
static void test_focus_whole(void **state)
{
    ember_matcher za = { "zone", "a", EMBER_MATCH_EQ };
    ember_merged *all = merge_of(SYN_D, NULL, 0);
    ember_merged *at = merge_range(SYN_D, &za, 1, T0 + 30000, T0 + 30000,
                                   NULL, NULL);
    int64_t whole = abs_sum(all);
    ember_result *r;
    char a[256], b[256];

    (void)state;
    /* pushed into the engine; then a second one on the resolved stacks */
    check_whole("focus(" SYN_D ", \"mid_x\")", whole);
    check_whole("ignore(focus(" SYN_D ", \"main\"), \"leaf_a\")", whole);
    check_whole("focus(focus(" SYN_D ", \"mid_\"), \"leaf_a\")", whole);
    check_whole("ignore(ignore(" SYN_D ", \"mid_y\"), \"leaf_d\")", whole);
    /* not pushed (after a show or a top): summed before filtering */
    check_whole("focus(show(" SYN_D ", \".\"), \"mid_x\")", whole);
    check_whole("focus(top(" SYN_D ", 2), \"mid_x\")", whole);
    check_whole("focus(" SYN_D "{zone=\"a\"} @ 1700000026000, \"mid_x\")",
                abs_sum(at));
    /* per group, whether the focus is inside the merge by or outside */
    for (int inside = 0; inside < 2; inside++) {
        r = query(inside ? "merge by (zone) (focus(" SYN_D ", \"leaf_b\"))"
                         : "focus(merge by (zone) (" SYN_D "), \"leaf_b\")");
        assert_true(r->ngroups > 1);
        for (size_t g = 0; g < r->ngroups; g++) {
            const char *z = label_of(r->groups[g].labels,
                                     r->groups[g].nlabels, "zone");
            ember_matcher m = { "zone", z ? z : "", EMBER_MATCH_EQ };
            ember_merged *want = merge_of(SYN_D, &m, 1);
            assert_true(r->groups[g].prof.has_whole);
            assert_int_equal(r->groups[g].prof.whole, abs_sum(want));
            ember_merged_free(want);
        }
        ember_result_free(r);
    }
    /* nothing filtered, or a diff (changes against the base): no whole */
    r = query(SYN_D);
    assert_false(r->groups[0].prof.has_whole);
    ember_result_free(r);
    r = query("focus(diff(" SYN_D "{zone=\"a\"}, " SYN_D "{zone=\"b\"}), "
              "\"mid_x\")");
    assert_false(r->groups[0].prof.has_whole);
    ember_result_free(r);
    /* top: "of Z total" is the whole selection's; relative: of the kept */
    top_showing(SYN_D, false, a, sizeof a);
    top_showing("focus(" SYN_D ", \"mid_x\")", false, b, sizeof b);
    assert_string_equal(strstr(a, " of "), strstr(b, " of "));
    assert_null(strstr(b, " 100% of "));
    top_showing("focus(" SYN_D ", \"mid_x\")", true, b, sizeof b);
    assert_non_null(strstr(b, " 100% of "));
    assert_string_not_equal(strstr(a, " of "), strstr(b, " of "));
    ember_merged_free(at);
    ember_merged_free(all);
}

/* TEXT (a top of WANT's query) keeps every stack of WANT and limits rows
** to N: top(P, N) changes how many rows top and tree show, never P. */
static void check_top(const char *text, const char *want, size_t n)
{
    ember_result *r = query(text), *w = query(want);

    assert_int_equal(r->top_limit, n);
    assert_int_equal(ember_result_kind(r), ember_result_kind(w));
    assert_int_equal(r->ngroups, w->ngroups);
    for (size_t g = 0; g < r->ngroups; g++) {
        assert_prof_equal(&r->groups[g].prof, &w->groups[g].prof);
        assert_merged_equal(r->groups[g].merged, w->groups[g].merged);
    }
    ember_result_free(w);
    ember_result_free(r);
}

/* The rows of R rendered as top: the lines after the column header. */
static size_t top_rows(const ember_result *r, char *buf, size_t cap)
{
    FILE *f = fmemopen(buf, cap, "w");
    const char *l;
    size_t rows = 0;

    assert_non_null(f);
    assert_int_equal(em_render_result(f, r, "top", NULL), EMBER_OK);
    fclose(f);
    l = strstr(buf, " flat%   sum%");
    assert_non_null(l);
    for (l = strchr(l, '\n'); l != NULL && l[1] != '\0';
         l = strchr(l + 1, '\n'))
        rows++;
    return rows;
}

static void test_top(void **state)
{
    ember_result *r;
    char out[16384];

    (void)state;
    check_top("top(" SYN_D ", 1)", SYN_D, 1);
    check_top("top(" SYN_D ", 2)", SYN_D, 2);
    check_top("top(" SYN_D ", 100)", SYN_D, 100);
    check_top("top(" CPU "{source=\"cpu\"}, 5)", CPU "{source=\"cpu\"}", 5);
    check_top("top(merge by (zone) (" SYN_D "), 2)",
              "merge by (zone) (" SYN_D ")", 2);
    /* nested: the smallest limit wins, filters still filter */
    check_top("top(top(" SYN_D ", 5), 3)", SYN_D, 3);
    check_top("top(top(" SYN_D ", 3), 5)", SYN_D, 3);
    check_top("focus(top(" SYN_D ", 3), \"mid_x\")",
              "focus(" SYN_D ", \"mid_x\")", 3);
    check_top("ignore(top(focus(" SYN_D ", \"main\"), 4), \"leaf_a\")",
              "ignore(focus(" SYN_D ", \"main\"), \"leaf_a\")", 4);
    /* on a diff: the whole diff, the N largest changes shown */
    check_top("top(diff(" SYN_D "{pod=\"p0\"}, " SYN_D "{pod=\"p3\"}), 2)",
              "diff(" SYN_D "{pod=\"p0\"}, " SYN_D "{pod=\"p3\"})", 2);
    check_top("diff(top(" SYN_D "{pod=\"p0\"}, 3), " SYN_D "{pod=\"p3\"})",
              "diff(" SYN_D "{pod=\"p0\"}, " SYN_D "{pod=\"p3\"})", 3);
    /* the renderer shows N rows of the whole profile: 100% is its total */
    r = query("top(" SYN_D ", 2)");
    assert_int_equal(top_rows(r, out, sizeof out), 2);
    if (strstr(out, "Showing top 2 nodes out of 9\n") == NULL)
        fail_msg("top(P, 2):\n%s", out);
    ember_result_free(r);
    r = query(SYN_D);
    assert_int_equal(top_rows(r, out, sizeof out), 9);
    ember_result_free(r);
}

#define WIDE "wide:samples:count:samples:count"

/* A collapsed profile of N stacks ending in "hot", each a distinct path of
** a and b frames below main (few names, many stacks), plus "main;cold 7"
** and "main;a;warm 5": imported into a new database at DIR. */
static ember_db *wide_db(const char *dir, size_t n)
{
    ember_db *db = tu_open(dir, 0);
    size_t cap = n * 48 + 64, len = 0;
    char *buf = malloc(cap);
    em_import_opts o = { .sz = sizeof o, .origin = "wide.txt",
                         .type = WIDE, .format = EM_FORMAT_COLLAPSED };

    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(buf + len, cap - len, "main");
        for (size_t b = i; b > 0; b >>= 1)
            len += (size_t)snprintf(buf + len, cap - len, ";%c",
                                    b & 1 ? 'b' : 'a');
        len += (size_t)snprintf(buf + len, cap - len, ";hot 1\n");
    }
    len += (size_t)snprintf(buf + len, cap - len, "main;cold 7\n"
                            "main;a;warm 5\n");
    if (em_import(db, buf, len, &o, NULL) != EMBER_OK)
        fail_msg("import: %s", ember_errmsg(db));
    free(buf);
    return db;
}

/* top(P, 1) over N stacks sharing one leaf (past 256 and 65,536 of them
** the old per-leaf counter wrapped and wrote past its array): the whole
** profile, and one row, hot's, of the whole total. */
static void check_wide(size_t n, const char *head, const char *row)
{
    char *dir = tu_tmpdir("query-top");
    ember_db *db = wide_db(dir, n);
    ember_result *r = NULL, *all = NULL;
    char out[4096], text[128];

    assert_int_equal(ember_query(db, "top(merge(" WIDE "), 1)", NULL, &r),
                     EMBER_OK);
    assert_int_equal(ember_query(db, WIDE, NULL, &all), EMBER_OK);
    assert_int_equal(r->top_limit, 1);
    assert_int_equal(r->groups[0].prof.nstacks, n + 2);
    assert_prof_equal(&r->groups[0].prof, &all->groups[0].prof);
    assert_int_equal(top_rows(r, out, sizeof out), 1);
    snprintf(text, sizeof text, "%s\n", row);
    if (strstr(out, head) == NULL || strstr(out, text) == NULL)
        fail_msg("top(P, 1) over %zu stacks: no '%s' and row '%s' in:\n%s",
                 n, head, row, out);
    ember_result_free(r);
    ember_result_free(all);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_top_wide(void **state)
{
    (void)state;
    check_wide(3000, "for 3000, 99.60% of 3012 total\n",
               "      3000 99.60% 99.60%       3000 99.60%  hot");
    /* 99.98% prints as 100%, as pprof rounds */
    check_wide(70000, "for 70000, 100% of 70012 total\n",
               "     70000   100%   100%      70000   100%  hot");
}

/* ---- @ T: one instant per source ------------------------------------------------- */

typedef Perftools__Profiles__Profile pb_profile;

/* tests/data/pprof/NAME unpacked (its bytes in *RAW, em_free them). */
static pb_profile *pb_read(const char *name, void **raw)
{
    char path[256];
    size_t len = 0, plain_len = 0;
    char *gz;
    pb_profile *p;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    gz = tu_read_file(path, &len);
    assert_non_null(gz);
    assert_int_equal(em_gunzip(gz, len, 1u << 30, raw, &plain_len), 0);
    free(gz);
    p = perftools__profiles__profile__unpack(NULL, plain_len, *raw);
    assert_non_null(p);
    return p;
}

/* Imports P (its first N samples) at TIME_MS with label service=SVC, its
** numeric labels as series too, so that a heap file splits as a goroutine
** file with string labels does. */
static void pb_import(ember_db *db, pb_profile *p, size_t n, int64_t time_ms,
                      const char *svc)
{
    size_t all = p->n_sample, len;
    uint8_t *buf;
    ember_label l = { "service", svc };
    em_import_opts o = { .sz = sizeof o, .origin = "part.pb", .labels = &l,
                         .nlabels = 1, .numeric_labels = true };

    p->n_sample = n;
    p->time_nanos = time_ms * 1000000;
    len = perftools__profiles__profile__get_packed_size(p);
    buf = malloc(len + 1);
    assert_non_null(buf);
    perftools__profiles__profile__pack(p, buf);
    p->n_sample = all;
    if (em_import(db, buf, len, &o, NULL) != EMBER_OK)
        fail_msg("import at %lld: %s", (long long)time_ms, ember_errmsg(db));
    free(buf);
}

/* Moves P's samples without labels first; returns how many there are. */
static size_t pb_unlabelled_first(pb_profile *p)
{
    size_t k = 0;

    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i]->n_label == 0) {
            Perftools__Profiles__Sample *t = p->sample[k];
            p->sample[k++] = p->sample[i];
            p->sample[i] = t;
        }
    return k;
}

/* The sum of M's values. */
static int64_t merged_sum(const ember_merged *m)
{
    const int64_t *v;
    size_t n = ember_merged_samples(m, NULL, &v);
    int64_t sum = 0;

    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return sum;
}

static ember_result *query_db(ember_db *db, const char *text)
{
    ember_result *r = NULL;

    if (ember_query(db, text, NULL, &r) != EMBER_OK)
        fail_msg("%s: %s", text, ember_errmsg(db));
    return r;
}

/* The merge of TYPE{service=SVC} over exactly [AT, AT], not empty. */
static ember_merged *merge_at(ember_db *db, const char *type, const char *svc,
                             int64_t at)
{
    ember_matcher m = { "service", svc, EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .type = type, .matchers = &m,
                           .nmatchers = 1, .from_ms = at, .to_ms = at };
    ember_merged *want = NULL;

    assert_int_equal(ember_merge(db, &sel, &want), EMBER_OK);
    assert_true(merged_sum(want) > 0);
    return want;
}

/* One `@ T` case: TYPE{service=SVC} @ AT (unix ms, or seconds when
** SECONDS) is the merge of that source's profiles at exactly WANT. */
typedef struct at_case {
    const char *type, *svc;
    int64_t at;
    bool seconds;
    int64_t want;
} at_case;

static void check_at(ember_db *db, const at_case *c)
{
    ember_merged *want = merge_at(db, c->type, c->svc, c->want);
    ember_result *r;
    char q[256];

    snprintf(q, sizeof q, "%s{service=\"%s\"} @ %lld", c->type, c->svc,
             (long long)(c->seconds ? c->at / 1000 : c->at));
    r = query_db(db, q);
    assert_int_equal(r->ngroups, 1);
    if (merged_sum(r->groups[0].merged) != merged_sum(want))
        fail_msg("%s: %lld, the file at %lld holds %lld", q,
                 (long long)merged_sum(r->groups[0].merged),
                 (long long)c->want, (long long)merged_sum(want));
    assert_merged_equal(r->groups[0].merged, want);
    ember_result_free(r);
    ember_merged_free(want);
}

/* The sum of every point of total(QUERY) on DB, and its point count. */
static int64_t total_at(ember_db *db, const char *query, size_t *points)
{
    ember_result *r = query_db(db, query);
    int64_t sum = 0;

    *points = 0;
    for (size_t i = 0; i < r->nseries; i++)
        for (size_t j = 0; j < r->series[i].n; j++) {
            sum += (int64_t)r->series[i].values[j];
            (*points)++;
        }
    ember_result_free(r);
    return sum;
}

/* A Go heap profile (a numeric sample label, bytes) and a goroutine
** profile (string labels, worker) imported at three times, the middle one
** holding only part of the samples (some label sets, so series, absent),
** plus a second source (service=db) at other times: `@ T` takes, per
** source, the profiles of the one instant nearest T, never a series'
** nearest profile from another file. */
static void test_nearest_sources(void **state)
{
    char *dir = tu_tmpdir("query-at");
    ember_db *db = tu_open(dir, 0);
    void *hraw = NULL, *graw = NULL;
    pb_profile *heap = pb_read("heap.pb.gz", &hraw);
    pb_profile *gor = pb_read("goroutine.pb.gz", &graw);
    const int64_t t[3] = { T0, T0 + 10000, T0 + 20000 };
    const at_case cases[] = {
        /* at, near and around the middle file: the middle file alone */
        { HEAP, "api", t[1], true, t[1] },
        { HEAP, "api", t[1] + 4000, false, t[1] },
        { GOR, "api", t[1] + 4000, false, t[1] },
        { GOR, "api", t[1] + 5000, false, t[1] },    /* a tie: the earlier */
        { HEAP, "api", t[2] + 60000, false, t[2] },
        { HEAP, "db", t[1] + 1000, false, t[1] + 3000 },
    };
    size_t half = heap->n_sample / 2, plain = pb_unlabelled_first(gor);
    size_t points, want_points;
    ember_strlist *split = NULL;
    em_reader *rd = NULL;
    ember_result *r;
    char q[256];
    int64_t sum;

    (void)state;
    assert_true(plain > 0 && plain < gor->n_sample);
    for (int i = 0; i < 3; i++) {
        pb_import(db, heap, i == 1 ? half : heap->n_sample, t[i], "api");
        pb_import(db, gor, i == 1 ? plain : gor->n_sample, t[i], "api");
        pb_import(db, heap, heap->n_sample, t[i] + 3000, "db");
    }
    /* the files' labels were noted as such, the import's own not */
    assert_int_equal(em_reader_open(db, &rd), EMBER_OK);
    assert_int_equal(em_reader_split_labels(rd, &split), EMBER_OK);
    assert_int_equal(ember_strlist_count(split), 2);
    assert_string_equal(ember_strlist_get(split, 0), "bytes");
    assert_string_equal(ember_strlist_get(split, 1), "worker");
    ember_strlist_free(split);
    em_reader_close(rd);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_at(db, &cases[i]);
    /* each source its own instant: api at t[1], db at t[1] + 3000 */
    snprintf(q, sizeof q, "merge by (service) (" HEAP " @ %lld)",
             (long long)t[1] + 1000);
    r = query_db(db, q);
    assert_int_equal(r->ngroups, 2);
    for (size_t g = 0; g < r->ngroups; g++) {
        const char *svc = label_of(r->groups[g].labels,
                                   r->groups[g].nlabels, "service");
        ember_merged *want = merge_at(db, HEAP, svc, strcmp(svc, "db") == 0 ?
                                      t[1] + 3000 : t[1]);
        assert_merged_equal(r->groups[g].merged, want);
        ember_merged_free(want);
    }
    ember_result_free(r);
    /* series: the points of the one instant, summing to the file's */
    snprintf(q, sizeof q, "total(" HEAP "{service=\"api\"} @ %lld)",
             (long long)t[1] + 4000);
    sum = total_at(db, q, &points);
    snprintf(q, sizeof q, "total(" HEAP "{service=\"api\"}[1ms] @ %lld)",
             (long long)t[1]);
    assert_int_equal(sum, total_at(db, q, &want_points));
    assert_int_equal(points, want_points);
    perftools__profiles__profile__free_unpacked(heap, NULL);
    perftools__profiles__profile__free_unpacked(gor, NULL);
    em_free(hraw);
    em_free(graw);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- time ------------------------------------------------------------------------- */

/* TEXT merges the profiles of SYN_D{pod="p0"} in [FROM, TO], NP of them. */
static void check_window(const char *text, const ember_query_opts *o,
                         int64_t from, int64_t to, uint64_t np)
{
    ember_matcher m = { "pod", "p0", EMBER_MATCH_EQ };
    ember_result *r = query_opts(text, o);
    ember_merged *want = merge_range(SYN_D, &m, 1, from, to, NULL, NULL);

    assert_int_equal(r->groups[0].nprofiles, np);
    assert_merged_equal(r->groups[0].merged, want);
    assert_int_equal(r->from_ms, from);
    assert_int_equal(r->to_ms, to);
    ember_merged_free(want);
    ember_result_free(r);
}

/* TEXT (an @ without range on SYN_D{pod="p0"}) merges the profile at T. */
static void check_nearest(const char *text, int64_t t)
{
    ember_matcher m = { "pod", "p0", EMBER_MATCH_EQ };
    ember_result *r = query(text);
    ember_merged *w = merge_range(SYN_D, &m, 1, t, t, NULL, NULL);

    assert_int_equal(r->groups[0].nprofiles, 1);
    assert_merged_equal(r->groups[0].merged, w);
    ember_merged_free(w);
    ember_result_free(r);
}

static void test_time(void **state)
{
    int64_t end = T0 + (NPOINTS - 1) * STEP_MS;
    ember_query_opts o = { .sz = sizeof o, .from_ms = T0, .to_ms = end };
    ember_query_opts now = { .sz = sizeof now, .now_ms = end + 5000 };
    ember_result *r;

    (void)state;
    check_window(SYN_D "{pod=\"p0\"}[30s]", &o, end - 30000, end, 4);
    check_window(SYN_D "{pod=\"p0\"}[30s] offset 50s", &o, end - 80000,
                 end - 50000, 4);
    check_window(SYN_D "{pod=\"p0\"} offset 20s", &o, T0 - 20000,
                 end - 20000, NPOINTS - 2);
    /* all-time queries: [range] ends at now */
    check_window(SYN_D "{pod=\"p0\"}[20s]", &now, end - 15000, end + 5000, 2);
    /* @ with a range: [T - range, T]; with offset: T - offset */
    check_window(SYN_D "{pod=\"p0\"}[20s] @ 1700000050000", NULL,
                 T0 + 30000, T0 + 50000, 3);
    check_window(SYN_D "{pod=\"p0\"}[20s] @ 1700000050 offset 10s", NULL,
                 T0 + 20000, T0 + 40000, 3);
    check_window(SYN_D "{pod=\"p0\"}[20s] offset 10s @ "
                 "\"2023-11-14T22:14:10Z\"", NULL, T0 + 20000, T0 + 40000, 3);
    /* @ without a range: the nearest profile; a tie takes the earlier */
    check_nearest(SYN_D "{pod=\"p0\"} @ 1700000005000", T0);
    check_nearest(SYN_D "{pod=\"p0\"} @ 1700000006000", T0 + STEP_MS);
    check_nearest(SYN_D "{pod=\"p0\"} @ 1700000016000 offset 11s", T0);
    check_nearest(SYN_D "{pod=\"p0\"} @ 1900000000", T0 + 110000);
    /* far before all data: the first profile; per series, summed */
    r = query(SYN_D " @ 1600000000");
    {
        ember_merged *w = merge_range(SYN_D, NULL, 0, T0, T0, NULL, NULL);
        assert_merged_equal(r->groups[0].merged, w);
        assert_int_equal(r->groups[0].nprofiles, NPODS);
        ember_merged_free(w);
    }
    ember_result_free(r);
    /* nearest, grouped */
    r = query("merge by (zone) (" SYN_D " @ 1700000026000)");
    assert_int_equal(ember_result_groups(r), 3);
    {
        ember_matcher m = { "zone", "b", EMBER_MATCH_EQ };
        ember_merged *w = merge_range(SYN_D, &m, 1, T0 + 30000, T0 + 30000,
                                      NULL, NULL);
        assert_merged_equal(r->groups[2].merged, w);
        assert_int_equal(r->groups[2].nprofiles, 2);
        ember_merged_free(w);
    }
    ember_result_free(r);
    /* total at a time: one point per series */
    r = query("total(" SYN_D "{pod=\"p0\"} @ 1700000005000)");
    assert_int_equal(ember_result_series_count(r), 1);
    assert_int_equal(r->series[0].n, 1);
    assert_int_equal(r->series[0].times[0], T0);
    ember_result_free(r);
}

/* ---- series ----------------------------------------------------------------------- */

/* The summed value of pod P's K-th profile. */
static int64_t syn_total(int p, int k)
{
    int64_t v = 0;

    for (int s = 0; s < NSTACKS; s++)
        v += syn_value(p, k, s);
    return v;
}

static int pod_index(const em_series *s)
{
    const char *pod = label_of(s->labels, s->nlabels, "pod");

    assert_non_null(pod);
    return pod[1] - '0';
}

static void test_total(void **state)
{
    ember_query_opts o = { .sz = sizeof o, .from_ms = T0,
                           .to_ms = T0 + 110000, .step_ms = 30000 };
    ember_query_opts all = { .sz = sizeof all, .step_ms = 60000 };
    ember_selector sel = { .sz = sizeof sel, .type = SYN_D };
    ember_totals *t;
    ember_result *r;

    (void)state;
    r = query("total(" SYN_D ")");
    assert_int_equal(ember_result_kind(r), EMBER_RESULT_SERIES);
    assert_string_equal(ember_result_type(r), SYN_D);
    assert_string_equal(r->unit, "nanoseconds");
    assert_int_equal(ember_result_series_count(r), NPODS);
    assert_int_equal(ember_totals_get(fx.db, &sel, &t), EMBER_OK);
    for (size_t i = 0; i < r->nseries; i++) {
        const em_series *s = &r->series[i];
        const int64_t *ts, *vs;
        size_t n;
        int p = pod_index(s);
        assert_int_equal(p, (int)i);    /* sorted by labels */
        ember_totals_series(t, i, NULL, &ts, &vs, &n);
        assert_int_equal(s->n, n);
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(s->times[k], ts[k]);
            assert_true(s->values[k] == (double)vs[k]);
            assert_true(s->values[k] == (double)syn_total(p, (int)k));
        }
        assert_string_equal(s->labels[0].name, "pod");
    }
    ember_totals_free(t);
    ember_result_free(r);
    /* bucketed from the range's start */
    r = query_opts("total(" SYN_D "{pod=\"p1\"})", &o);
    assert_int_equal(r->step_ms, 30000);
    assert_int_equal(r->series[0].n, 4);
    for (int b = 0; b < 4; b++) {
        double want = 0;
        for (int k = 3 * b; k < 3 * b + 3; k++)
            want += (double)syn_total(1, k);
        assert_int_equal(r->series[0].times[b], T0 + b * 30000);
        assert_true(r->series[0].values[b] == want);
    }
    ember_result_free(r);
    /* all time: buckets at epoch multiples of the step */
    r = query_opts("total(" SYN_D "{pod=\"p1\"})", &all);
    {
        double sum = 0, want = 0;
        for (size_t b = 0; b < r->series[0].n; b++) {
            assert_int_equal(r->series[0].times[b] % 60000, 0);
            sum += r->series[0].values[b];
        }
        for (int k = 0; k < NPOINTS; k++)
            want += (double)syn_total(1, k);
        assert_true(sum == want);
        assert_int_equal(r->series[0].times[0], T0 - T0 % 60000);
    }
    ember_result_free(r);
    /* several types: __type__ is the first label and the type is NULL */
    r = query("total({pod=~\"p0|c0\"})");
    assert_int_equal(r->nseries, 2);
    assert_null(ember_result_type(r));
    for (size_t i = 0; i < r->nseries; i++)
        assert_string_equal(r->series[i].labels[0].name, "__type__");
    ember_result_free(r);
    /* focus inside total: the per-profile sums through the function */
    r = query("total(focus(" SYN_D "{pod=\"p2\"}, \"leaf_d\"))");
    for (size_t k = 0; k < r->series[0].n; k++)
        assert_true(r->series[0].values[k] == (double)syn_value(2, (int)k, 4));
    ember_result_free(r);
}

static void test_rate(void **state)
{
    ember_query_opts o = { .sz = sizeof o, .from_ms = T0,
                           .to_ms = T0 + 110000, .step_ms = 30000 };
    ember_result *r;

    (void)state;
    /* delta: each profile over its duration (10 s) */
    r = query("rate(" SYN_D "{pod=\"p2\"})");
    assert_string_equal(r->unit, "nanoseconds/s");
    assert_int_equal(r->series[0].n, NPOINTS);
    for (int k = 0; k < NPOINTS; k++)
        assert_true(fabs(r->series[0].values[k] -
                         (double)syn_total(2, k) / 10.0) < 1e-9);
    ember_result_free(r);
    /* delta with a step: the bucket's sum over the step */
    r = query_opts("rate(" SYN_D "{pod=\"p2\"})", &o);
    assert_int_equal(r->series[0].n, 4);
    for (int b = 0; b < 4; b++) {
        double want = 0;
        for (int k = 3 * b; k < 3 * b + 3; k++)
            want += (double)syn_total(2, k);
        assert_true(fabs(r->series[0].values[b] - want / 30.0) < 1e-9);
    }
    ember_result_free(r);
    /* cumulative: the rise since the previous profile, resets counted */
    r = query("rate(" SYN_C "{pod=\"c1\"})");
    assert_string_equal(r->unit, "bytes/s");
    assert_int_equal(r->series[0].n, 4);
    {
        const double want[4] = { 5.0, 8.0, 4.0, 5.0 };  /* 40 after 230 */
        for (int k = 0; k < 4; k++) {
            assert_int_equal(r->series[0].times[k], T0 + (k + 1) * STEP_MS);
            assert_true(fabs(r->series[0].values[k] - want[k]) < 1e-9);
        }
    }
    ember_result_free(r);
    /* over an aggregation: between its points */
    r = query("rate(sum(" SYN_C "))");
    assert_int_equal(r->series[0].n, 4);
    assert_true(fabs(r->series[0].values[0] - 10.0) < 1e-9);  /* 200->300 */
    ember_result_free(r);
}

static void test_aggregations(void **state)
{
    ember_result *r;
    const em_fn fns[] = { EM_FN_SUM, EM_FN_AVG, EM_FN_MAX, EM_FN_MIN,
                          EM_FN_COUNT };
    const char *names[] = { "sum", "avg", "max", "min", "count" };

    (void)state;
    for (size_t f = 0; f < 5; f++) {
        char text[256];
        snprintf(text, sizeof text, "%s by (zone) (" SYN_D ")", names[f]);
        r = query(text);
        assert_int_equal(r->nseries, 3);        /* {}, zone=a, zone=b */
        assert_int_equal(r->series[0].nlabels, 0);
        assert_string_equal(r->series[1].labels[0].value, "a");
        assert_string_equal(r->unit, fns[f] == EM_FN_COUNT ? "count"
                                                           : "nanoseconds");
        for (int k = 0; k < NPOINTS; k++) {
            double a = (double)syn_total(0, k), b = (double)syn_total(1, k);
            double want[5] = { a + b, (a + b) / 2, a > b ? a : b,
                               a < b ? a : b, 2 };
            assert_int_equal(r->series[1].times[k], T0 + k * STEP_MS);
            assert_true(r->series[1].values[k] == want[f]);
            assert_true(r->series[0].values[k] ==
                        (fns[f] == EM_FN_COUNT ? 1 : syn_total(4, k)));
        }
        ember_result_free(r);
    }
    r = query("sum(" SYN_D ")");
    assert_int_equal(r->nseries, 1);
    assert_int_equal(r->series[0].nlabels, 0);
    for (int k = 0; k < NPOINTS; k++) {
        double want = 0;
        for (int p = 0; p < NPODS; p++)
            want += (double)syn_total(p, k);
        assert_true(r->series[0].values[k] == want);
    }
    ember_result_free(r);
    r = query("sum without (pod) (" SYN_D ")");
    assert_int_equal(r->nseries, 3);
    assert_string_equal(ember_result_type(r), SYN_D);
    assert_string_equal(r->series[2].labels[0].name, "zone");
    ember_result_free(r);
    /* by (__type__) over several types keeps them apart */
    r = query("count by (__type__) ({zone=\"a\"})");
    assert_int_equal(r->nseries, 2);
    assert_null(ember_result_type(r));
    assert_string_equal(r->series[0].labels[0].name, "__type__");
    ember_result_free(r);
}

static void test_topk(void **state)
{
    ember_result *r;

    (void)state;
    r = query("topk(2, " SYN_D ")");
    assert_int_equal(r->nseries, 2);
    assert_int_equal(pod_index(&r->series[0]), 4);
    assert_int_equal(pod_index(&r->series[1]), 3);
    assert_int_equal(r->series[0].n, NPOINTS);
    ember_result_free(r);
    r = query("bottomk(1, total(" SYN_D "))");
    assert_int_equal(r->nseries, 1);
    assert_int_equal(pod_index(&r->series[0]), 0);
    ember_result_free(r);
    r = query("topk by (zone) (1, " SYN_D ")");
    assert_int_equal(r->nseries, 3);
    assert_int_equal(pod_index(&r->series[0]), 4);     /* zone "" */
    assert_int_equal(pod_index(&r->series[1]), 1);     /* zone a */
    assert_int_equal(pod_index(&r->series[2]), 3);     /* zone b */
    ember_result_free(r);
    r = query("topk(0, " SYN_D ")");
    assert_int_equal(r->nseries, 0);
    ember_result_free(r);
}

/* ---- metadata ---------------------------------------------------------------------- */

static void check_rows(const char *text, const char *column,
                       const char *const *rows, size_t n)
{
    ember_result *r = query(text);

    assert_int_equal(ember_result_kind(r), EMBER_RESULT_TABLE);
    assert_string_equal(ember_result_column(r), column);
    assert_int_equal(ember_result_rows(r), n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(ember_result_row(r, i), rows[i]);
    assert_null(ember_result_row(r, n));
    assert_null(ember_result_type(r));
    ember_result_free(r);
}

static void test_metadata(void **state)
{
    const char *types[] = { SYN_C, SYN_D };
    const char *names[] = { "pod", "zone" };
    const char *pods_a[] = { "c0", "c1", "p0", "p1" };
    const char *zonev[] = { "a", "b" };
    ember_result *r;

    (void)state;
    check_rows("profile_types({pod=~\".+\"})", "type", types, 2);
    check_rows("label_names(" SYN_D ")", "label", names, 2);
    check_rows("label_values(pod, {zone=\"a\"})", "value", pods_a, 4);
    check_rows("label_values(\"zone\")", "value", zonev, 2);
    check_rows("label_values(zone, " SYN_D "{pod=\"p4\"})", "value", NULL, 0);
    r = query("profile_types()");
    assert_int_equal(ember_result_rows(r), 7 + 2);  /* imported + ours */
    ember_result_free(r);
}

/* ---- errors ----------------------------------------------------------------------- */

static void test_errors(void **state)
{
    const char *m;
    ember_result *g;

    (void)state;
    m = query_fails("focus(" SYN_D ", 3)", EMBER_EINVAL);
    assert_string_equal(m, "parse error at column 50: focus expects a "
                        "profile and a regex string: argument 2 is a "
                        "number\n  focus(" SYN_D ", 3)\n  "
                        "                                                 ^");
    m = query_fails("sum(merge(" SYN_D "))", EMBER_EINVAL);
    assert_non_null(strstr(m, "sum expects a series: argument 1 is a "
                           "profile"));
    m = query_fails("{source=\"heap\"}", EMBER_EINVAL);
    assert_non_null(strstr(m, "the selector matches 4 profile types ("
                           "memory:alloc_objects:count:space:bytes, "));
    m = query_fails("diff(" SYN_D ", " SYN_C ")", EMBER_EINVAL);
    assert_non_null(strstr(m, "diff needs one profile type on both sides"));
    m = query_fails("focus(" SYN_D ", \"(\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "column 50: bad regex"));
    m = query_fails(SYN_D "{pod=~\"[\"}", EMBER_EINVAL);
    assert_non_null(strstr(m, "column 48: bad regex for label pod"));
    m = query_fails("top(" SYN_D ", 1.5)", EMBER_EINVAL);
    assert_non_null(strstr(m, "argument 2 must be a whole number"));
    m = query_fails("total(merge(" SYN_D "))", EMBER_EINVAL);
    assert_non_null(strstr(m, "total expects a selector: argument 1 is a "
                           "profile"));
    m = query_fails("merge(diff(" SYN_D ", " SYN_D "))", EMBER_EINVAL);
    assert_non_null(strstr(m, "argument 1 is a diff"));
    m = query_fails("merge(focus(diff(" SYN_D ", " SYN_D "), \"a\"))",
                    EMBER_EINVAL);
    assert_non_null(strstr(m, "argument 1 is a diff"));
    m = query_fails("diff(" SYN_D ")", EMBER_EINVAL);
    assert_non_null(strstr(m, "diff expects two profiles (base, target): "
                           "got 1 argument"));
    /* a top keeps every stack, so grouping what it kept is a plain
    ** merge by with a row limit (it was refused while top cut stacks) */
    g = query("merge by (zone) (top(" SYN_D ", 2))");
    assert_int_equal(g->top_limit, 2);
    assert_int_equal(ember_result_groups(g), 3);     /* a, b and none */
    ember_result_free(g);
    m = query_fails("label_values(\"a-b\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "is not a label name"));
    m = query_fails("profile_types(total(" SYN_D "))", EMBER_EINVAL);
    assert_non_null(strstr(m, "argument 1 is a series"));
    m = query_fails(SYN_D " @ \"soon\"", EMBER_EINVAL);
    assert_non_null(strstr(m, "bad time \"soon\""));
    m = query_fails("\"just a string\"", EMBER_EINVAL);
    assert_non_null(strstr(m, "not a string"));
    /* API misuse */
    {
        ember_result *r = (ember_result *)&fx;
        ember_query_opts bad = { .sz = 1 };
        ember_query_opts neg = { .sz = sizeof neg, .step_ms = -1 };
        assert_int_equal(ember_query(fx.db, SYN_D, NULL, NULL), EMBER_EINVAL);
        assert_int_equal(ember_query(NULL, SYN_D, NULL, &r), EMBER_EINVAL);
        assert_null(r);
        assert_int_equal(ember_query(fx.db, NULL, NULL, &r), EMBER_EINVAL);
        assert_int_equal(ember_query(fx.db, SYN_D, &bad, &r), EMBER_EINVAL);
        assert_int_equal(ember_query(fx.db, SYN_D, &neg, &r), EMBER_EINVAL);
    }
}

/* ---- notes, short type names, hide and show (issue 12) ------------------------ */

/* The note of R holding PART, or NULL. */
static const char *note_of(const ember_result *r, const char *part)
{
    for (size_t i = 0; i < ember_result_notes(r); i++)
        if (strstr(ember_result_note(r, i), part) != NULL)
            return ember_result_note(r, i);
    return NULL;
}

/* TEXT answers (over O's range) with a note holding PART. */
static void assert_note(const char *text, const ember_query_opts *o,
                        const char *part)
{
    ember_result *r = query_opts(text, o);

    if (note_of(r, part) == NULL)
        fail_msg("%s: no note holds \"%s\"; the first of %zu: %s", text,
                 part, ember_result_notes(r),
                 ember_result_notes(r) ? ember_result_note(r, 0) : "-");
    ember_result_free(r);
}

static void test_notes(void **state)
{
    /* 1990-01-01 and 02, long before the synthetic profiles of T0 */
    ember_query_opts old = { .sz = sizeof old,
                             .from_ms = INT64_C(631152000000),
                             .to_ms = INT64_C(631238400000) };
    ember_result *r;

    (void)state;
    r = query(SYN_D);                   /* an answer needs no word */
    assert_int_equal(ember_result_notes(r), 0);
    assert_null(ember_result_note(r, 0));
    ember_result_free(r);
    assert_note("cpux{source=\"cpu\"}", NULL, "cpux{source=\"cpu\"} matches "
                "nothing: no profile type \"cpux\" is stored (did you mean "
                CPU "?)");
    assert_note(CPU "{sorce=\"cpu\"}", NULL, "matches nothing: no series of "
                CPU " has a label sorce (did you mean source?)");
    assert_note(CPU "{source=\"cpv\"}", NULL, "no series of " CPU " has "
                "source=\"cpv\" (did you mean \"cpu\"?)");
    assert_note(SYN_D "{pod=~\"q.*\"}", NULL, "pod=~\"q.*\" leaves none of "
                "the 5 values of pod");
    assert_note(SYN_D "{pod=\"p1\", zone=\"b\"}", NULL, "each of its "
                "matchers selects series, but no series satisfies all");
    assert_note(SYN_D, &old, SYN_D " holds no profile from "
                "1990-01-01T00:00:00Z to 1990-01-02T00:00:00Z: its profiles "
                "are stored from 2023-11-14T22:13:20Z to "
                "2023-11-14T22:15:10Z");
    assert_note("focus(" SYN_D ", \"leaf_q\")", NULL, "focus(..., "
                "\"leaf_q\") matches no function name (did you mean leaf_");
    /* a diff answers with one side empty: that side is named */
    assert_note("diff(" SYN_D "{pod=\"p0\"}, " SYN_D "{pod=\"p9\"})", NULL,
                SYN_D "{pod=\"p9\"} matches nothing: no series of " SYN_D
                " has pod=\"p9\" (did you mean \"p0\"?)");
    assert_note("sum(total(" SYN_D "{zone=\"c\"}))", NULL, "has zone=\"c\"");
    assert_note("label_values(pod, {zone=\"c\"})", NULL, "{zone=\"c\"} "
                "matches nothing: no series of any type has zone=\"c\"");
}

static void test_short_types(void **state)
{
    ember_matcher cpu = { "source", "cpu", EMBER_MATCH_EQ };
    ember_matcher za = { "zone", "a", EMBER_MATCH_EQ };
    ember_result *r;
    const char *m;

    (void)state;
    /* a sample type names the one stored type that has it */
    check_merge("inuse_space", HEAP, NULL, 0);
    check_merge("alloc{pod=\"c0\"}", SYN_C, (ember_matcher[]){ { "pod", "c0",
                EMBER_MATCH_EQ } }, 1);
    /* two have cpu: the matchers choose, or it is an error naming both */
    check_merge("cpu{source=\"cpu\"}", CPU, &cpu, 1);
    check_merge("merge(samples{source=\"cpu\"})",
                "process_cpu:samples:count:cpu:nanoseconds:delta", &cpu, 1);
    m = query_fails("top(cpu, 3)", EMBER_EINVAL);
    assert_non_null(strstr(m, "column 5: profile type \"cpu\" is ambiguous: "
                           "2 stored types have that sample type (" CPU ", "
                           SYN_D "); write one in full"));
    /* no type: the one CPU type among those matched, said in a note */
    check_merge("{zone=\"a\"}", SYN_D, &za, 1);
    assert_note("{zone=\"a\"}", NULL, "{zone=\"a\"} names no profile type: "
                "using " SYN_D ", the one CPU type of the 2 it matches");
    /* series and tables still span types */
    r = query("total({zone=\"a\"})");
    assert_null(ember_result_type(r));
    assert_int_equal(ember_result_notes(r), 0);
    ember_result_free(r);
}

/* Queries A and B give the same stacks, and some. */
static void focus_same(const char *a, const char *b)
{
    ember_result *x = query(a), *y = query(b);

    assert_prof_equal(&x->groups[0].prof, &y->groups[0].prof);
    assert_true(x->groups[0].prof.nstacks > 0);
    ember_result_free(x);
    ember_result_free(y);
}

static void test_focus_anywhere(void **state)
{
    ember_result *r;

    (void)state;
    /* anywhere in the name, as pprof's -focus; ^...$ anchors */
    focus_same("focus(" SYN_D ", \"id_x\")", "focus(" SYN_D ", \"^mid_x$\")");
    focus_same("ignore(" SYN_D ", \"eaf_\")", "focus(" SYN_D ", \"^gc$\")");
    focus_same("focus(top(" SYN_D ", 6), \"id_\")", "focus(top(" SYN_D
               ", 6), \"^mid_[xy]$\")");
    r = query("focus(" SYN_D ", \"main\")");
    assert_true(key_value(&r->groups[0].prof, "gc;runtime_main") > 0);
    ember_result_free(r);
    r = query("focus(" SYN_D ", \"^main$\")");
    assert_int_equal(key_value(&r->groups[0].prof, "gc;runtime_main"), 0);
    ember_result_free(r);
}

/* The -o top text of TEXT (every row). */
static char *top_text(const char *text)
{
    ember_result *r = query(text);
    em_render_opts o = { .sz = sizeof o, .db = fx.db };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    assert_int_equal(em_render_result(f, r, "top", &o), EMBER_OK);
    fclose(f);
    ember_result_free(r);
    return buf;
}

/* TEXT's top table holds each of the N lines of WANT. */
static void top_holds(const char *text, const char *const *want, size_t n)
{
    char *got = top_text(text);

    for (size_t i = 0; i < n; i++)
        if (strstr(got, want[i]) == NULL)
            fail_msg("%s: no line \"%s\" in\n%s", text, want[i], got);
    free(got);
}

static void test_hide_show(void **state)
{
    /* go tool pprof -top -sample_index=cpu -show='sort\.|main\.fib'
    ** tests/data/pprof/cpu.pb.gz (go 1.19) */
    static const char *const show[] = {
        "Showing nodes accounting for 420ms, 52.50% of 800ms total\n",
        "     320ms 40.00% 40.00%      320ms 40.00%  main.fib\n",
        "      50ms  6.25% 46.25%       70ms  8.75%  sort.partition\n",
        "         0     0% 52.50%      100ms 12.50%  sort.Ints\n",
    };
    /* ... -hide='fib|sort' */
    static const char *const hide[] = {
        "Showing nodes accounting for 800ms, 100% of 800ms total\n",
        "     150ms 18.75% 18.75%      150ms 18.75%  runtime.asyncPreempt\n",
        "     120ms 15.00% 50.00%      230ms 28.75%  main.work.func1\n",
    };
    /* ... -hide='^main\.mix$': what was inlined into it stays inline */
    static const char *const mix[] = {
        "         0     0%   100%       10ms  1.25%  main.sq (inline)\n",
        "         0     0%   100%      100ms 12.50%  sort.Ints (inline)\n",
    };
    /* ... -hide='^main\.fib$' -show='main\.' */
    static const char *const both[] = {
        "Showing nodes accounting for 780ms, 97.50% of 800ms total\n",
        "     180ms 22.50% 22.50%      230ms 28.75%  main.work.func1\n",
        "     100ms 12.50% 52.50%      100ms 12.50%  main.mapWork\n",
    };
    ember_result *r, *all;
    int64_t sum = 0, full = 0;

    (void)state;
    top_holds("show(" CPU "{source=\"cpu\"}, \"sort\\\\.|main\\\\.fib\")",
              show, EM_ARRAY_LEN(show));
    top_holds("hide(" CPU "{source=\"cpu\"}, \"fib|sort\")", hide,
              EM_ARRAY_LEN(hide));
    top_holds("hide(" CPU "{source=\"cpu\"}, \"^main\\\\.mix$\")", mix,
              EM_ARRAY_LEN(mix));
    top_holds("show(hide(" CPU "{source=\"cpu\"}, \"^main\\\\.fib$\"), "
              "\"main\\\\.\")", both, EM_ARRAY_LEN(both));
    /* frames go, samples stay: the mids hidden, leaf;main sums both */
    all = query(SYN_D);
    r = query("hide(" SYN_D ", \"mid_\")");
    assert_int_equal(key_value(&r->groups[0].prof, "leaf_a;main"),
                     key_value(&all->groups[0].prof, "leaf_a;mid_x;main") +
                     key_value(&all->groups[0].prof, "leaf_a;mid_y;main"));
    for (size_t i = 0; i < r->groups[0].prof.nstacks; i++)
        sum += r->groups[0].prof.stacks[i].value;
    for (size_t i = 0; i < all->groups[0].prof.nstacks; i++)
        full += all->groups[0].prof.stacks[i].value;
    assert_int_equal(sum, full);
    ember_result_free(r);
    /* a stack with every frame hidden keeps its value, frameless, so the
    ** total stays the profile's (pprof's -top total) */
    r = query("show(" SYN_D ", \"^main$\")");
    assert_int_equal(key_value(&r->groups[0].prof, ""),
                     key_value(&all->groups[0].prof, "gc;runtime_main"));
    ember_result_free(all);
    /* the frames no longer match stored stacks: no pprof export */
    assert_null(r->groups[0].merged);
    ember_result_free(r);
}

/* ---- the API's walk ---------------------------------------------------------------- */

static void test_walk(void **state)
{
    ember_result *r = query("merge by (worker) (" CPU "{source=\"cpu\"})");
    const ember_label *labels;
    const ember_frame *f;
    size_t nl, ns, nf, inlined = 0;
    int64_t v, base;

    (void)state;
    assert_true(ember_result_groups(r) > 1);
    ember_result_group(r, 1, &labels, &nl, &ns);
    assert_int_equal(nl, 1);
    assert_string_equal(labels[0].name, "worker");
    for (size_t g = 0; g < ember_result_groups(r); g++) {
        ember_result_group(r, g, NULL, NULL, &ns);
        for (size_t j = 0; j < ns; j++) {
            assert_int_equal(ember_result_stack(r, g, j, &f, &nf, &v, &base),
                             EMBER_OK);
            assert_int_equal(base, 0);
            assert_true(v != 0);
            for (size_t k = 0; k < nf; k++) {
                assert_non_null(f[k].name);
                inlined += (f[k].flags & EMBER_FRAME_INLINED) != 0;
            }
        }
        assert_int_equal(ember_result_stack(r, g, ns, &f, &nf, &v, &base),
                         EMBER_EINVAL);
    }
    assert_true(inlined > 0);           /* main.mix inside main.hashWork */
    ember_result_group(r, 999, &labels, &nl, &ns);
    assert_null(labels);
    assert_int_equal(ns, 0);
    assert_int_equal(ember_result_series_count(r), 0);
    assert_int_equal(ember_result_rows(r), 0);
    assert_null(ember_result_column(r));
    ember_result_free(r);
    ember_result_free(NULL);
    assert_int_equal(ember_result_kind(NULL), 0);
    r = query("total(" SYN_D ")");
    {
        const int64_t *ts;
        const double *vs;
        size_t n;
        ember_result_series(r, 0, &labels, &nl, &ts, &vs, &n);
        assert_int_equal(n, NPOINTS);
        assert_string_equal(labels[0].value, "p0");
        assert_int_equal(ember_result_groups(r), 0);
        ember_result_series(r, NPODS, &labels, &nl, &ts, &vs, &n);
        assert_null(ts);
        assert_int_equal(n, 0);
    }
    ember_result_free(r);
}

/* ---- the engine's selector: ignore and series ids ---------------------------------- */

/* The id of the series of POD under SYN_D. */
static uint32_t pod_series(const char *pod)
{
    ember_matcher m = { "pod", pod, EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .type = SYN_D, .matchers = &m,
                           .nmatchers = 1 };
    ember_totals *t;
    uint32_t id;

    assert_int_equal(ember_totals_get(fx.db, &sel, &t), EMBER_OK);
    assert_int_equal(ember_totals_count(t), 1);
    ember_totals_series(t, 0, &id, NULL, NULL, NULL);
    ember_totals_free(t);
    return id;
}

static void test_selector_ignore_series(void **state)
{
    ember_matcher za = { "zone", "a", EMBER_MATCH_EQ };
    ember_matcher p0 = { "pod", "p0", EMBER_MATCH_EQ };
    uint32_t ids[2] = { pod_series("p2"), pod_series("p0") };
    ember_selector sel = { .sz = sizeof sel, .type = SYN_D,
                           .ignore = "leaf_a|gc" };
    ember_merged *got, *want, *all = merge_of(SYN_D, NULL, 0);
    ember_totals *t;
    ember_iter *it;
    ember_point pt;
    const uint32_t *s;
    const int64_t *v;
    size_t n;
    int rc;

    (void)state;
    /* ignore drops exactly the stacks through a matching function */
    assert_int_equal(ember_merge(fx.db, &sel, &got), EMBER_OK);
    n = ember_merged_samples(got, &s, &v);
    assert_int_equal(n, NSTACKS - 3);
    for (size_t i = 0; i < n; i++)
        assert_true(s[i] != fx.st[0] && s[i] != fx.st[3] &&
                    s[i] != fx.st[5]);
    ember_merged_free(got);
    /* with focus: through focus, not through ignore */
    sel.focus = "mid_y";
    assert_int_equal(ember_merge(fx.db, &sel, &got), EMBER_OK);
    n = ember_merged_samples(got, &s, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(s[0], fx.st[2]);
    ember_merged_free(got);
    /* totals and the iterator honour it too */
    sel.focus = NULL;
    sel.ignore = "main";
    assert_int_equal(ember_totals_get(fx.db, &sel, &t), EMBER_OK);
    for (size_t i = 0; i < ember_totals_count(t); i++) {
        const int64_t *tv;
        size_t np;
        ember_totals_series(t, i, NULL, NULL, &tv, &np);
        for (size_t k = 0; k < np; k++)
            assert_int_equal(tv[k], syn_value((int)i, (int)k, 5));
    }
    ember_totals_free(t);
    assert_int_equal(ember_select(fx.db, &sel, &it), EMBER_OK);
    while ((rc = ember_iter_next(it, &pt)) == EMBER_OK)
        assert_int_equal(pt.stack, fx.st[5]);
    assert_int_equal(rc, EMBER_DONE);
    ember_iter_free(it);
    /* series ids: ANDed with the matchers; an empty list selects nothing */
    sel.ignore = NULL;
    sel.series = ids;
    sel.nseries = 2;
    sel.matchers = &za;
    sel.nmatchers = 1;
    assert_int_equal(ember_merge(fx.db, &sel, &got), EMBER_OK);
    want = merge_of(SYN_D, &p0, 1);
    assert_merged_equal(got, want);
    ember_merged_free(got);
    ember_merged_free(want);
    sel.nseries = 0;
    assert_int_equal(ember_merge(fx.db, &sel, &got), EMBER_OK);
    assert_int_equal(ember_merged_samples(got, NULL, NULL), 0);
    ember_merged_free(got);
    sel.series = NULL;
    sel.nmatchers = 0;
    assert_int_equal(ember_merge(fx.db, &sel, &got), EMBER_OK);
    assert_merged_equal(got, all);
    ember_merged_free(got);
    /* a bad regex is the caller's error */
    sel.ignore = "(";
    assert_int_equal(ember_merge(fx.db, &sel, &got), EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(fx.db), "ignore"));
    ember_merged_free(all);
}

/* ---- allocation failure ------------------------------------------------------------- */

static void fail_each(const char *text, const ember_query_opts *o)
{
    tu_query_fail_each(fx.db, text, o);
}

static void test_out_of_memory(void **state)
{
    ember_query_opts o = { .sz = sizeof o, .step_ms = 30000 };

    (void)state;
    fail_each("top(ignore(focus(merge by (zone) (" SYN_D "), \"main\"), "
              "\"leaf_c\"), 2)", NULL);
    fail_each("focus(focus(diff(merge by (zone) (" SYN_D "), " SYN_D
              "{zone=\"a\"} @ 1700000026000), \"main\"), \"mid_x\")", NULL);
    fail_each("topk by (zone) (2, rate(sum without (pod) (" SYN_D ")))", &o);
    fail_each("avg(total(" SYN_D "{pod=\"p1\"}[1h] offset 1m @ "
              "1700000100))", &o);
    fail_each("label_values(pod, " SYN_D ")", NULL);
    fail_each("merge by (worker) (" CPU ")", NULL);
    /* short types, the CPU pick, hide and show, and the notes' paths */
    fail_each("show(hide(cpu{source=\"cpu\"}, \"^main\\\\.fib$\"), "
              "\"main\")", NULL);
    fail_each("hide({zone=\"a\"}, \"mid\")", NULL);
    fail_each("diff(" SYN_D "{pod=\"p0\"}, " SYN_D "{pod=\"p9\", "
              "zone=~\"q\"})", NULL);
    fail_each("focus(" SYN_D "{sorce=\"x\"}, \"leaf_q\")", NULL);
    fail_each("focus(cpux, \"leaf_q\")", NULL);
    fail_each("focus(" SYN_D ", \"leaf_q\")", NULL);
    o.step_ms = 0;
    o.from_ms = 1000;                   /* before every stored profile */
    o.to_ms = 2000;
    fail_each(SYN_D, &o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_by),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_focus_ignore),
        cmocka_unit_test(test_focus_diff_and_groups),
        cmocka_unit_test(test_focus_whole),
        cmocka_unit_test(test_top),
        cmocka_unit_test(test_top_wide),
        cmocka_unit_test(test_nearest_sources),
        cmocka_unit_test(test_time),
        cmocka_unit_test(test_total),
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_aggregations),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_selector_ignore_series),
        cmocka_unit_test(test_notes),
        cmocka_unit_test(test_short_types),
        cmocka_unit_test(test_focus_anywhere),
        cmocka_unit_test(test_hide_show),
        cmocka_unit_test(test_out_of_memory),
    };

    return cmocka_run_group_tests_name("query_exec", tests, setup, teardown);
}
