/*
** tests/unit/test_engine.c: the storage engine through the public API:
** append, merge, totals, the iterator, dedup and reopen, sealing, ranges,
** label metadata, focus through function postings (past the postings
** stage's pending limit too), map growth, failed
** batches, concurrent readers and writers.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tests/unit/common/testutil.h"

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"
#define MEM "memory:inuse_space:bytes:space:bytes"
#define T0 1732170000000LL

static int64_t merged_value(const ember_merged *m, uint32_t stack)
{
    const uint32_t *st;
    const int64_t *v;
    size_t n = ember_merged_samples(m, &st, &v);

    for (size_t i = 0; i < n; i++)
        if (st[i] == stack)
            return v[i];
    return INT64_MIN;
}

static ember_merged *merge(ember_db *db, const char *type, int64_t from,
                           int64_t to, const char *focus)
{
    ember_selector s = { .sz = sizeof s, .type = type, .from_ms = from,
                         .to_ms = to, .focus = focus };
    ember_merged *m = NULL;
    int rc = ember_merge(db, &s, &m);

    if (rc != EMBER_OK)
        fprintf(stderr, "merge: %s\n", ember_errmsg(db));
    assert_int_equal(rc, EMBER_OK);
    return m;
}

static void test_open_empty(void **state)
{
    char *dir = tu_tmpdir("empty");
    ember_db *db = tu_open(dir, 0);
    ember_stats st = { .sz = sizeof st };
    ember_merged *m;

    (void)state;
    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    assert_int_equal(st.series, 0);
    assert_int_equal(st.profiles, 0);
    assert_int_equal(st.strings, 1);        /* "" */
    assert_int_equal(st.mappings, 1);       /* the unknown mapping */
    assert_int_equal(tu_verify(db), 0);
    m = merge(db, NULL, 0, 0, NULL);
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 0);
    ember_merged_free(m);
    ember_close(db);
    db = tu_open(dir, 0);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_append_merge(void **state)
{
    char *dir = tu_tmpdir("append");
    ember_db *db = tu_open(dir, 0);
    const char *a[] = { "leaf_a", "mid", "main" };
    const char *b[] = { "leaf_b", "mid", "main" };
    uint32_t sa = tu_stack(db, a, 3), sb = tu_stack(db, b, 3);
    ember_label l[] = { { "service", "api" }, { "pod", "api-1" } };
    ember_sample s[] = { { sa, 5 }, { sb, 7 }, { sa, 3 } };  /* sa twice */
    ember_profile p = tu_profile(CPU, l, 2, T0, s, 3);
    ember_merged *m;
    uint64_t nseries, nprof;

    (void)state;
    assert_int_not_equal(sa, sb);
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    p.time_ms += 10000;
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    m = merge(db, CPU, 0, 0, NULL);
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 2);
    assert_int_equal(merged_value(m, sa), 16);
    assert_int_equal(merged_value(m, sb), 14);
    ember_merged_info(m, &nseries, &nprof);
    assert_int_equal(nseries, 1);
    assert_int_equal(nprof, 2);
    ember_merged_free(m);
    m = merge(db, MEM, 0, 0, NULL);     /* another type: nothing */
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 0);
    ember_merged_free(m);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_totals_and_iterator(void **state)
{
    char *dir = tu_tmpdir("totals");
    ember_db *db = tu_open(dir, 0);
    uint32_t st[4];
    ember_label l[] = { { "service", "api" } };
    ember_selector sel = { .sz = sizeof sel, .type = CPU };
    ember_totals *t;
    ember_iter *it;
    ember_point pt;
    const int64_t *times, *vals;
    size_t n, count = 0;
    int64_t last_t = INT64_MIN;
    uint32_t series;
    int rc;

    (void)state;
    for (uint32_t i = 0; i < 4; i++)
        st[i] = tu_synthetic_stack(db, i);
    for (int k = 9; k >= 0; k--) {      /* appended newest first */
        ember_sample s[] = { { st[k % 4], k + 1 }, { st[(k + 1) % 4], 100 } };
        ember_profile p = tu_profile(CPU, l, 1, T0 + k * 10000, s, 2);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
    }
    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    assert_int_equal(ember_totals_count(t), 1);
    ember_totals_series(t, 0, &series, &times, &vals, &n);
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(times[i], T0 + (int64_t)i * 10000);
        assert_int_equal(vals[i], (int64_t)i + 1 + 100);
    }
    ember_totals_free(t);
    assert_int_equal(ember_select(db, &sel, &it), EMBER_OK);
    while ((rc = ember_iter_next(it, &pt)) == EMBER_OK) {
        assert_true(pt.time_ms >= last_t);
        last_t = pt.time_ms;
        count++;
    }
    assert_int_equal(rc, EMBER_DONE);
    assert_int_equal(count, 20);
    ember_iter_free(it);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_dedup_and_reopen(void **state)
{
    char *dir = tu_tmpdir("dedup");
    ember_db *db = tu_open(dir, 0);
    uint32_t ids[20], again;
    ember_label l[] = { { "service", "db" } };
    ember_sample s[20];
    ember_profile p;
    ember_merged *m;

    (void)state;
    for (uint32_t i = 0; i < 20; i++) {
        ids[i] = tu_synthetic_stack(db, i);
        s[i].stack = ids[i];
        s[i].value = i * 3 + 1;
    }
    p = tu_profile(CPU, l, 1, T0, s, 20);
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    for (uint32_t i = 0; i < 20; i++)
        assert_int_equal(tu_synthetic_stack(db, i), ids[i]);
    assert_int_equal(ember_append(db, &p), EMBER_OK);   /* same data again */
    ember_close(db);
    db = tu_open(dir, 0);
    for (uint32_t i = 0; i < 20; i++) {
        again = tu_synthetic_stack(db, i);
        assert_int_equal(again, ids[i]);
    }
    m = merge(db, CPU, 0, 0, NULL);
    for (uint32_t i = 0; i < 20; i++)
        assert_int_equal(merged_value(m, ids[i]), 2 * (i * 3 + 1));
    ember_merged_free(m);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

/* Appends NP profiles of 2 series across several hours, then checks that
** sealing changes no answer. */
static void test_seal_same_answers(void **state)
{
    char *dir = tu_tmpdir("seal");
    ember_db *db = tu_open(dir, 0);
    ember_label la[] = { { "service", "a" } }, lb[] = { { "service", "b" } };
    uint32_t st[30];
    ember_merged *before, *after, *part;
    uint64_t nsamples = 0;
    ember_stats stats = { .sz = sizeof stats };
    const int64_t from = T0 + 3600 * 1000, to = T0 + 2 * 3600 * 1000 + 5000;

    (void)state;
    for (uint32_t i = 0; i < 30; i++)
        st[i] = tu_synthetic_stack(db, i);
    for (int k = 0; k < 1500; k++) {
        ember_sample s[3] = { { st[k % 30], k }, { st[(k * 7) % 30], -k },
                              { st[(k * 11) % 30], INT64_MAX / 2048 } };
        ember_profile p = tu_profile(CPU, k % 2 ? la : lb, 1,
                                     T0 + (int64_t)k * 10000, s, 3);
        nsamples += 1 + (s[1].stack != s[0].stack) +
                    (s[2].stack != s[0].stack && s[2].stack != s[1].stack);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
    }
    before = merge(db, CPU, 0, 0, NULL);
    part = merge(db, CPU, from, to, NULL);
    assert_int_equal(ember_stats_get(db, &stats), EMBER_OK);
    assert_true(stats.chunks > 0);      /* windows closed: sealed already */
    assert_true(stats.head_chunks > 0);
    assert_int_equal(ember_seal(db), EMBER_OK);
    assert_int_equal(ember_stats_get(db, &stats), EMBER_OK);
    assert_int_equal(stats.head_chunks, 0);
    assert_int_equal(stats.profiles, 1500);
    assert_int_equal(stats.samples, nsamples);
    after = merge(db, CPU, 0, 0, NULL);
    assert_int_equal(ember_merged_samples(before, NULL, NULL),
                     ember_merged_samples(after, NULL, NULL));
    for (uint32_t i = 0; i < 30; i++)
        assert_true(merged_value(before, st[i]) == merged_value(after, st[i]));
    ember_merged_free(after);
    after = merge(db, CPU, from, to, NULL);
    for (uint32_t i = 0; i < 30; i++)
        assert_true(merged_value(part, st[i]) == merged_value(after, st[i]));
    ember_merged_free(after);
    ember_merged_free(before);
    ember_merged_free(part);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_ranges(void **state)
{
    char *dir = tu_tmpdir("range");
    ember_db *db = tu_open(dir, 0);
    uint32_t s0 = tu_synthetic_stack(db, 0);
    ember_label l[] = { { "service", "r" } };
    ember_merged *m;

    (void)state;
    for (int k = 0; k < 100; k++) {
        ember_sample s[] = { { s0, 1LL << (k % 40) } };
        ember_profile p = tu_profile(CPU, l, 1, T0 + k * 1000, s, 1);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
        if (k == 50)
            assert_int_equal(ember_seal(db), EMBER_OK);
    }
    for (int a = 0; a < 100; a += 7)
        for (int b = a; b < 100; b += 13) {
            int64_t want = 0;
            for (int k = a; k <= b; k++)
                want += 1LL << (k % 40);
            m = merge(db, CPU, T0 + a * 1000, T0 + b * 1000, NULL);
            assert_true(merged_value(m, s0) == want);
            ember_merged_free(m);
        }
    m = merge(db, CPU, T0 - 5000, T0 - 1, NULL);
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 0);
    ember_merged_free(m);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_labels(void **state)
{
    char *dir = tu_tmpdir("labels");
    ember_db *db = tu_open(dir, 0);
    uint32_t s0 = tu_synthetic_stack(db, 0);
    ember_sample s[] = { { s0, 1 } };
    ember_label l1[] = { { "service", "api" }, { "pod", "api-1" } };
    ember_label l2[] = { { "service", "db" }, { "zone", "" } };
    ember_label bad[] = { { "9bad", "x" } };
    ember_label dup[] = { { "a", "x" }, { "a", "y" } };
    ember_matcher mt = { "service", "db", EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .matchers = &mt, .nmatchers = 1 };
    ember_profile p;
    ember_strlist *names, *vals, *types, *sl;

    (void)state;
    p = tu_profile(CPU, l1, 2, T0, s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    p = tu_profile(MEM, l2, 2, T0, s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    p = tu_profile(MEM, bad, 1, T0, s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_EINVAL);
    p = tu_profile(MEM, dup, 2, T0, s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_EINVAL);
    p = tu_profile("cpu:samples", l1, 2, T0, s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_EINVAL);
    assert_int_equal(ember_label_names(db, NULL, &names), EMBER_OK);
    assert_int_equal(ember_strlist_count(names), 2);    /* zone="" dropped */
    assert_string_equal(ember_strlist_get(names, 0), "pod");
    assert_string_equal(ember_strlist_get(names, 1), "service");
    assert_int_equal(ember_label_values(db, "service", NULL, &vals), EMBER_OK);
    assert_int_equal(ember_strlist_count(vals), 2);
    assert_int_equal(ember_profile_types(db, &sel, &types), EMBER_OK);
    assert_int_equal(ember_strlist_count(types), 1);
    assert_string_equal(ember_strlist_get(types, 0), MEM);
    assert_int_equal(ember_series_labels(db, 0, &sl), EMBER_OK);
    assert_int_equal(ember_strlist_count(sl), 5);
    assert_string_equal(ember_strlist_get(sl, 0), CPU);
    assert_string_equal(ember_strlist_get(sl, 1), "pod");
    assert_string_equal(ember_strlist_get(sl, 4), "api");
    ember_strlist_free(names);
    ember_strlist_free(vals);
    ember_strlist_free(types);
    ember_strlist_free(sl);
    assert_int_equal(ember_label_names(db, &sel, &names), EMBER_OK);
    assert_int_equal(ember_strlist_count(names), 1);
    ember_strlist_free(names);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_focus(void **state)
{
    char *dir = tu_tmpdir("focus");
    ember_db *db = tu_open(dir, 0);
    const char *a[] = { "leaf", "parse_json", "main" };
    const char *b[] = { "leaf", "render", "main" };
    const char *c[] = { "parse_json", "main" };
    uint32_t sa = tu_stack(db, a, 3), sb = tu_stack(db, b, 3);
    uint32_t sc = tu_stack(db, c, 2);
    ember_sample s[] = { { sa, 10 }, { sb, 20 }, { sc, 30 } };
    ember_label l[] = { { "service", "f" } };
    ember_profile p = tu_profile(CPU, l, 1, T0, s, 3);
    ember_merged *m;

    (void)state;
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    m = merge(db, CPU, 0, 0, "parse_.*");
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 2);
    assert_int_equal(merged_value(m, sa), 10);
    assert_int_equal(merged_value(m, sc), 30);
    ember_merged_free(m);
    m = merge(db, CPU, 0, 0, "parse");      /* anchored: no match */
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 0);
    ember_merged_free(m);
    m = merge(db, CPU, 0, 0, "main");
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 3);
    ember_merged_free(m);
    ember_close(db);
    tu_rmdir(dir);
}

/* A location interned by an aborted transaction gets its id reused by the
** next one: the writer's cache of location functions must not stage the
** old location's functions for a stack of the new one. */
static uint32_t intern_fn_loc(ember_txn *t, const char *name)
{
    ember_function f = { .name = name };
    ember_line ln = { 0 };
    ember_location l = { .lines = &ln, .nlines = 1 };
    uint32_t id;

    assert_int_equal(ember_intern_function(t, &f, &ln.function), EMBER_OK);
    assert_int_equal(ember_intern_location(t, &l, &id), EMBER_OK);
    return id;
}

static void test_focus_after_abort(void **state)
{
    char *dir = tu_tmpdir("focusabort");
    ember_db *db = tu_open(dir, 0);
    ember_txn *t = NULL;
    uint32_t l1, l2, st;
    ember_sample s = { 0, 5 };
    ember_profile p = tu_profile(CPU, NULL, 0, T0, &s, 1);
    ember_function other = { .name = "other_fn" };
    uint32_t fid;
    ember_merged *m;

    (void)state;
    assert_int_equal(ember_txn_begin(db, &t), EMBER_OK);
    l1 = intern_fn_loc(t, "gone_fn");
    ember_txn_abort(t);
    assert_int_equal(ember_txn_begin(db, &t), EMBER_OK);
    assert_int_equal(ember_intern_function(t, &other, &fid), EMBER_OK);
    l2 = intern_fn_loc(t, "kept_fn");       /* another function id */
    assert_int_equal(l1, l2);               /* the id was reused */
    assert_int_equal(ember_intern_stack(t, &l2, 1, &st), EMBER_OK);
    s.stack = st;
    assert_int_equal(ember_txn_append(t, &p), EMBER_OK);
    assert_int_equal(ember_txn_commit(t), EMBER_OK);
    m = merge(db, CPU, 0, 0, "kept_fn");
    assert_int_equal(merged_value(m, st), 5);
    ember_merged_free(m);
    m = merge(db, CPU, 0, 0, "gone_fn");
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 0);
    ember_merged_free(m);
    ember_close(db);
    tu_rmdir(dir);
}

/* One transaction making more stacks through one function than the
** postings stage holds pending (STAGED_PEND_MAX, 1024), each naming that
** function twice (recursion): focus finds every stack and verify agrees
** with the stored postings. */
static void test_focus_many_stacks(void **state)
{
    enum { N = 3000 };
    char *dir = tu_tmpdir("focusmany");
    ember_db *db = tu_open(dir, 0);
    static ember_sample s[N];
    ember_profile p = tu_profile(CPU, NULL, 0, T0, s, N);
    ember_txn *t = NULL;
    uint32_t hot, locs[3];
    ember_merged *m;
    char name[32];

    (void)state;
    assert_int_equal(ember_txn_begin(db, &t), EMBER_OK);
    hot = intern_fn_loc(t, "hot_fn");
    for (uint32_t k = 0; k < N; k++) {
        snprintf(name, sizeof name, "leaf_%u", k);
        locs[0] = intern_fn_loc(t, name);
        locs[1] = locs[2] = hot;
        assert_int_equal(ember_intern_stack(t, locs, 3, &s[k].stack),
                         EMBER_OK);
        s[k].value = k + 1;
    }
    assert_int_equal(ember_txn_append(t, &p), EMBER_OK);
    assert_int_equal(ember_txn_commit(t), EMBER_OK);
    m = merge(db, CPU, 0, 0, "hot_fn");
    assert_int_equal(ember_merged_samples(m, NULL, NULL), N);
    ember_merged_free(m);
    m = merge(db, CPU, 0, 0, "leaf_2999");
    assert_int_equal(ember_merged_samples(m, NULL, NULL), 1);
    assert_int_equal(merged_value(m, s[N - 1].stack), N);
    ember_merged_free(m);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_failed_batch_leaves_nothing(void **state)
{
    char *dir = tu_tmpdir("atomic");
    ember_db *db = tu_open(dir, 0);
    uint32_t s0 = tu_synthetic_stack(db, 0);
    ember_sample good[] = { { s0, 1 } }, bad[] = { { s0 + 1000, 1 } };
    ember_label l1[] = { { "service", "new1" } }, l2[] = { { "service", "x" } };
    ember_profile ps[2];
    ember_stats before = { .sz = sizeof before }, after = { .sz = sizeof after };
    ember_strlist *vals;

    (void)state;
    ps[0] = tu_profile(CPU, l1, 1, T0, good, 1);
    ps[1] = tu_profile(CPU, l2, 1, T0, bad, 1);
    assert_int_equal(ember_stats_get(db, &before), EMBER_OK);
    assert_int_equal(ember_append_batch(db, ps, 2), EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(db), "does not exist"));
    assert_int_equal(ember_stats_get(db, &after), EMBER_OK);
    assert_int_equal(after.series, before.series);
    assert_int_equal(after.profiles, before.profiles);
    assert_int_equal(after.strings, before.strings);
    assert_int_equal(ember_label_values(db, "service", NULL, &vals), EMBER_OK);
    assert_int_equal(ember_strlist_count(vals), 0);
    ember_strlist_free(vals);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_map_growth(void **state)
{
    char *dir = tu_tmpdir("grow");
    ember_db *db = tu_open(dir, 1);     /* 1 MiB map */
    uint32_t st[200];
    ember_label l[] = { { "service", "grow" } };
    ember_stats stats = { .sz = sizeof stats };

    (void)state;
    for (uint32_t i = 0; i < 200; i++)
        st[i] = tu_synthetic_stack(db, i);
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < 600; k++) {
        ember_sample s[200];
        for (int i = 0; i < 200; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;   /* incompressible */
            s[i].stack = st[i];
            s[i].value = (int64_t)(x >> 16);   /* sums fit in int64 */
        }
        ember_profile p = tu_profile(CPU, l, 1, T0 + k * 10000, s, 200);
        int rc = ember_append(db, &p);
        if (rc != EMBER_OK)
            fprintf(stderr, "append %d: %s\n", k, ember_errmsg(db));
        assert_int_equal(rc, EMBER_OK);
    }
    assert_int_equal(ember_stats_get(db, &stats), EMBER_OK);
    assert_true(stats.used_bytes > (1u << 20));
    assert_int_equal(stats.profiles, 600);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- threads: readers during writes, and group commit ----------------------- */

typedef struct thr {
    ember_db *db;
    uint32_t *stacks;
    int id, n;
    int failures;
} thr;

static void *writer_main(void *arg)
{
    thr *t = arg;
    char pod[16];
    ember_label l[] = { { "pod", pod } };

    snprintf(pod, sizeof pod, "w%d", t->id);
    for (int k = 0; k < t->n; k++) {
        ember_sample s[] = { { t->stacks[k % 8], 1 } };
        ember_profile p = tu_profile(CPU, l, 1, T0 + k * 1000, s, 1);
        if (ember_append(t->db, &p) != EMBER_OK)
            t->failures++;
    }
    return NULL;
}

static void *reader_main(void *arg)
{
    thr *t = arg;
    ember_selector sel = { .sz = sizeof sel, .type = CPU };

    for (int k = 0; k < t->n; k++) {
        ember_merged *m = NULL;
        const int64_t *v;
        int64_t sum = 0;
        size_t n;
        if (ember_merge(t->db, &sel, &m) != EMBER_OK) {
            t->failures++;
            continue;
        }
        n = ember_merged_samples(m, NULL, &v);
        for (size_t i = 0; i < n; i++)
            sum += v[i];
        if (sum < 0)
            t->failures++;
        ember_merged_free(m);
    }
    return NULL;
}

static void test_threads(void **state)
{
    char *dir = tu_tmpdir("threads");
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_FULL };
    ember_db *db = NULL;
    uint32_t st[8];
    pthread_t th[6];
    thr t[6];
    ember_merged *m;
    const int64_t *v;
    int64_t sum = 0;
    size_t n;

    (void)state;
    assert_int_equal(ember_open(dir, &o, &db), EMBER_OK);
    for (uint32_t i = 0; i < 8; i++)
        st[i] = tu_synthetic_stack(db, i);
    for (int i = 0; i < 6; i++) {
        t[i] = (thr){ db, st, i, i < 4 ? 60 : 40, 0 };
        pthread_create(&th[i], NULL, i < 4 ? writer_main : reader_main, &t[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].failures, 0);
    }
    m = merge(db, CPU, 0, 0, NULL);
    n = ember_merged_samples(m, NULL, &v);
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    assert_int_equal(sum, 4 * 60);
    ember_merged_free(m);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

static void test_second_handle(void **state)
{
    char *dir = tu_tmpdir("two");
    ember_db *a = tu_open(dir, 0), *b = tu_open(dir, 0);
    uint32_t sa = tu_synthetic_stack(a, 1), sb = tu_synthetic_stack(b, 1);
    uint32_t sc = tu_synthetic_stack(b, 2), sd = tu_synthetic_stack(a, 2);
    ember_open_opts ro = { .sz = sizeof ro, .flags = EMBER_OPEN_RDONLY };
    ember_db *r = NULL;
    ember_label l[] = { { "service", "x" } };
    ember_sample s[] = { { sa, 1 } };
    ember_profile p = tu_profile(CPU, l, 1, T0, s, 1);

    (void)state;
    assert_int_equal(sa, sb);
    assert_int_equal(sc, sd);
    assert_int_equal(ember_open(dir, &ro, &r), EMBER_OK);
    assert_int_equal(ember_append(r, &p), EMBER_EINVAL);
    assert_int_equal(ember_append(b, &p), EMBER_OK);
    assert_int_equal(tu_verify(r), 0);
    ember_close(r);
    ember_close(a);
    ember_close(b);
    tu_rmdir(dir);
}

/* ---- foreign LMDB environments -------------------------------------------- */

/* One key-value pair of a foreign environment, in sub-database DB (NULL:
** the main database). */
typedef struct fkv {
    const char *db, *key, *val;
} fkv;

/* Makes DIR an LMDB environment holding KV[N] and nothing of Ember's, as
** another program would. */
static void foreign_env(const char *dir, const fkv *kv, size_t n,
                        unsigned dbflags)
{
    MDB_env *env;
    MDB_txn *txn;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 1 << 20), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0600), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    for (size_t i = 0; i < n; i++) {
        MDB_dbi dbi;
        MDB_val k = { strlen(kv[i].key), (void *)kv[i].key };
        MDB_val d = { strlen(kv[i].val), (void *)kv[i].val };
        assert_int_equal(mdb_dbi_open(txn, kv[i].db, kv[i].db ?
                                      MDB_CREATE | dbflags : 0, &dbi), 0);
        assert_int_equal(mdb_put(txn, dbi, &k, &d, 0), 0);
    }
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Opening DIR, read-only or not, must fail with EMBER_EFORMAT naming
** NEEDLE, and leave data.mdb as it was, byte for byte. */
static void foreign_refused(const char *dir, const char *needle)
{
    ember_open_opts ro = { .sz = sizeof ro, .flags = EMBER_OPEN_RDONLY };
    char path[512];
    size_t n0, n1;
    char *before, *after;

    snprintf(path, sizeof path, "%s/data.mdb", dir);
    before = tu_read_file(path, &n0);
    for (int i = 0; i < 2; i++) {
        ember_db *db = NULL;
        int rc = ember_open(dir, i == 0 ? NULL : &ro, &db);
        if (rc != EMBER_EFORMAT || strstr(ember_errmsg(db), needle) == NULL)
            fail_msg("open %d: rc %d, \"%s\", wanted EFORMAT naming \"%s\"",
                     i, rc, ember_errmsg(db), needle);
        ember_close(db);
    }
    after = tu_read_file(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
}

static void test_foreign_env(void **state)
{
    static const fkv main_keys[] = {
        { NULL, "key1", "value1" }, { NULL, "key2", "value2" },
    };
    static const fkv named[] = {
        { "users", "ann", "1" }, { "orders", "17", "ann" },
    };
    static const fkv collide[] = {      /* Ember's names, a stranger's data */
        { "chunk", "c1", "not a chunk" }, { "meta", "version", "7" },
    };
    static const fkv mixed[] = {
        { "str", "s", "t" }, { "zzz", "k", "v" },
    };
    char *dir;

    (void)state;
    dir = tu_tmpdir("foreign-main");
    foreign_env(dir, main_keys, 2, 0);
    foreign_refused(dir, "holds \"key1\"");
    tu_rmdir(dir);
    dir = tu_tmpdir("foreign-named");
    foreign_env(dir, named, 2, 0);
    foreign_refused(dir, "holds \"orders\"");
    tu_rmdir(dir);
    dir = tu_tmpdir("foreign-collide");
    foreign_env(dir, collide, 2, 0);
    foreign_refused(dir, "holds \"chunk\" with content");
    tu_rmdir(dir);
    dir = tu_tmpdir("foreign-mixed");
    foreign_env(dir, mixed, 2, MDB_INTEGERKEY);
    foreign_refused(dir, "not an Ember database");
    tu_rmdir(dir);
}

/* An empty environment becomes a database, and so does one whose creation
** stopped after its (empty) tables were made, before its first records. */
static void test_empty_env(void **state)
{
    static const char *const names[] = {
        "str", "map", "fn", "loc", "stk", "ser", "strh", "maph", "fnh",
        "loch", "stkh", "serh", "meta", "post", "fpost", "chunk", "head",
    };
    char *dir = tu_tmpdir("empty-env");
    MDB_env *env;
    MDB_txn *txn;
    ember_db *db;

    (void)state;
    foreign_env(dir, NULL, 0, 0);
    db = tu_open(dir, 0);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);

    dir = tu_tmpdir("cut-env");
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 32), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0600), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        unsigned f = i < 6 ? MDB_INTEGERKEY : i < 12 ? MDB_INTEGERKEY |
                     MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP :
                     i == 14 || i == 16 ? MDB_INTEGERKEY : 0;
        MDB_dbi dbi;
        assert_int_equal(mdb_dbi_open(txn, names[i], MDB_CREATE | f, &dbi), 0);
    }
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    db = tu_open(dir, 0);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

/* A data.mdb of 0 bytes: nothing to read (it said "Bad file descriptor");
** a writer makes a database of it. */
static void test_empty_data_file(void **state)
{
    ember_open_opts ro = { .sz = sizeof ro, .flags = EMBER_OPEN_RDONLY };
    char *dir = tu_tmpdir("empty-file");
    char path[512];
    ember_db *db = NULL;
    FILE *f;

    (void)state;
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(ember_open(dir, &ro, &db), EMBER_EFORMAT);
    if (strstr(ember_errmsg(db), "empty file (0 bytes)") == NULL)
        fail_msg("message: %s", ember_errmsg(db));
    ember_close(db);
    db = tu_open(dir, 0);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_empty),
        cmocka_unit_test(test_append_merge),
        cmocka_unit_test(test_totals_and_iterator),
        cmocka_unit_test(test_dedup_and_reopen),
        cmocka_unit_test(test_seal_same_answers),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_focus),
        cmocka_unit_test(test_focus_after_abort),
        cmocka_unit_test(test_focus_many_stacks),
        cmocka_unit_test(test_failed_batch_leaves_nothing),
        cmocka_unit_test(test_map_growth),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_second_handle),
        cmocka_unit_test(test_foreign_env),
        cmocka_unit_test(test_empty_env),
        cmocka_unit_test(test_empty_data_file),
    };
    return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
