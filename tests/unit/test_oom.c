/*
** tests/unit/test_oom.c: allocation failure. For each operation, fail its
** 1st allocation, then its 2nd, and so on (em_alloc_fail_at: the Nth
** allocation from now fails, and every one after it) until the operation
** succeeds with the hook set, i.e. the hook lies past its last allocation.
** Each run must return EMBER_OK or EMBER_ENOMEM, nothing else, and must
** not crash or leak (the sanitizer build checks leaks). A write that failed
** must have changed nothing: the same counts in ember_stats_get, and
** ember_verify clean. A read that succeeded must give the right answer.
**
** Only Ember's own allocations (em_malloc and friends, zstd's through its
** custom allocator) can be failed this way: LMDB and CRoaring call malloc
** themselves, so their out-of-memory paths are not exercised here.
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

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"
#define MEM "memory:inuse_space:bytes:space:bytes"
#define T0 1732170000000LL
#define HOUR (3600 * 1000LL)
#define NSTACKS 8
#define MAX_STEPS 200000            /* no operation allocates this often */

typedef struct fixture {
    char *dir;
    ember_db *db;
    uint32_t stacks[NSTACKS];
} fixture;

/* An operation under test: returns an Ember code. */
typedef int (*op_fn)(fixture *f, void *ctx);

/* ---- the database ------------------------------------------------------- */

/* Appends profiles of three series over two windows (sealed and head). */
static void fill(fixture *f)
{
    static const char *const svc[] = { "api", "db", "cache" };

    for (int k = 0; k < 24; k++) {
        ember_label l[] = { { "service", svc[k % 3] }, { "zone", "z1" } };
        ember_sample s[] = { { f->stacks[k % NSTACKS], k + 1 },
                             { f->stacks[(k + 3) % NSTACKS], 2 } };
        int64_t t = T0 + (k < 12 ? 0 : 2 * HOUR) + k * 1000LL;
        ember_profile p = tu_profile(k % 2 ? CPU : MEM, l, 2, t, s, 2);
        assert_int_equal(ember_append(f->db, &p), EMBER_OK);
        if (k == 11)
            assert_int_equal(ember_seal(f->db), EMBER_OK);
    }
}

/* Profiles of service=big carry every stack with wide values, so that
** their columns are long enough to go through zstd. */
static ember_profile big_profile(fixture *f, ember_sample *s, int64_t t,
                                 uint64_t seed)
{
    static ember_label l[] = { { "service", "big" }, { "zone", "z2" } };

    for (int i = 0; i < NSTACKS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        s[i].stack = f->stacks[i];
        s[i].value = (int64_t)(seed >> 8);
    }
    return tu_profile(CPU, l, 2, t, s, NSTACKS);
}

static void fill_big(fixture *f)
{
    for (int k = 0; k < 12; k++) {
        ember_sample s[NSTACKS];
        int64_t t = T0 + (k < 6 ? 0 : 2 * HOUR) + k * 1000LL;
        ember_profile p = big_profile(f, s, t, (uint64_t)k);
        assert_int_equal(ember_append(f->db, &p), EMBER_OK);
    }
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    f->dir = tu_tmpdir("oom");
    f->db = tu_open(f->dir, 0);
    for (uint32_t i = 0; i < NSTACKS; i++)
        f->stacks[i] = tu_synthetic_stack(f->db, i);
    fill(f);
    fill_big(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    em_alloc_fail_at(0);
    ember_close(f->db);
    tu_rmdir(f->dir);
    free(f);
    return 0;
}

/* ---- the loop ----------------------------------------------------------- */

static void stats(fixture *f, ember_stats *st)
{
    memset(st, 0, sizeof *st);
    st->sz = sizeof *st;
    assert_int_equal(ember_stats_get(f->db, st), EMBER_OK);
}

/* The counts a failed write must leave as they were. */
static void same_stats(const ember_stats *a, const ember_stats *b)
{
    assert_int_equal(a->series, b->series);
    assert_int_equal(a->profiles, b->profiles);
    assert_int_equal(a->samples, b->samples);
    assert_int_equal(a->strings, b->strings);
    assert_int_equal(a->stacks, b->stacks);
    assert_int_equal(a->locations, b->locations);
    assert_int_equal(a->functions, b->functions);
    assert_int_equal(a->chunks, b->chunks);
    assert_int_equal(a->head_chunks, b->head_chunks);
    assert_int_equal(a->chunk_bytes, b->chunk_bytes);
}

/* Runs OP with the Nth allocation failing, N = 1, 2, ..., until it
** succeeds. Returns how many runs failed. */
static uint64_t oom_loop(fixture *f, const char *what, op_fn op, void *ctx,
                         bool write)
{
    ember_stats before, after;
    uint64_t n;

    stats(f, &before);
    for (n = 1; n < MAX_STEPS; n++) {
        int rc;
        em_alloc_fail_at(n);
        rc = op(f, ctx);
        em_alloc_fail_at(0);
        if (rc == EMBER_OK)
            break;
        if (rc != EMBER_ENOMEM)
            fail_msg("%s, allocation %llu failing: %s (%d): %s", what,
                     (unsigned long long)n, ember_strerror(rc), rc,
                     ember_errmsg(f->db));
        if (ember_errmsg(f->db)[0] == '\0')
            fail_msg("%s, allocation %llu failing: ENOMEM without a message",
                     what, (unsigned long long)n);
        if (write) {
            stats(f, &after);
            same_stats(&before, &after);
            assert_int_equal(tu_verify(f->db), 0);
        }
    }
    assert_true(n < MAX_STEPS);
    assert_int_equal(tu_verify(f->db), 0);
    fprintf(stderr, "  %s: ENOMEM at each of its %llu allocations\n", what,
            (unsigned long long)(n - 1));
    return n - 1;
}

/* ---- writes ------------------------------------------------------------- */

/* A batch with a new series (new strings, staged postings), an existing
** series and a profile that closes a head's window (a seal on the way). */
static int op_append(fixture *f, void *ctx)
{
    int *round = ctx;
    char val[32];
    ember_label fresh[] = { { "service", val }, { "region", "eu-west" } };
    ember_label old[] = { { "service", "api" }, { "zone", "z1" } };
    ember_sample s[] = { { f->stacks[1], 5 }, { f->stacks[2], 6 },
                         { f->stacks[1], 7 } };
    ember_profile ps[3];

    snprintf(val, sizeof val, "new-%d", *round);
    ps[0] = tu_profile(CPU, fresh, 2, T0 + 5 * HOUR, s, 3);
    ps[1] = tu_profile(MEM, old, 2, T0 + 2 * HOUR + 500, s, 2);
    ps[2] = tu_profile(CPU, old, 2, T0 + (6 + *round) * HOUR, s, 1);
    return ember_append_batch(f->db, ps, 3);
}

static void test_append(void **state)
{
    fixture *f = *state;
    ember_stats a, b;
    int round = 0;

    stats(f, &a);
    assert_true(oom_loop(f, "append", op_append, &round, true) > 0);
    stats(f, &b);
    assert_int_equal(b.profiles, a.profiles + 3);
    assert_int_equal(b.series, a.series + 1);
    round = 1;      /* again: the new series' strings exist by now */
    oom_loop(f, "append", op_append, &round, true);
}

/* A txn that interns new symbols, then appends a profile using them. */
static int op_txn(fixture *f, void *ctx)
{
    const int *round = ctx;
    char name[32], file[32];
    ember_function fn = { .name = name, .file = file };
    ember_line line = { 0, 42 };
    ember_location loc = { 0, 0x9000, &line, 1 };
    ember_label l[] = { { "service", "txn" }, { "zone", file } };
    uint32_t locs[2], str;
    ember_sample s[] = { { 0, 11 }, { f->stacks[0], 3 } };
    ember_profile p;
    ember_txn *t = NULL;
    int rc;

    snprintf(name, sizeof name, "oom_fn_%d", *round);
    snprintf(file, sizeof file, "oom_%d.c", *round);
    rc = ember_txn_begin(f->db, &t);
    if (rc != EMBER_OK)
        return rc;
    rc = ember_intern_string(t, "oom string", 10, &str);
    if (rc == EMBER_OK)
        rc = ember_intern_function(t, &fn, &line.function);
    if (rc == EMBER_OK)
        rc = ember_intern_location(t, &loc, &locs[0]);
    locs[1] = locs[0];
    if (rc == EMBER_OK)
        rc = ember_intern_stack(t, locs, 2, &s[0].stack);
    p = tu_profile(CPU, l, 2, T0 + 3 * HOUR, s, 2);
    if (rc == EMBER_OK)
        rc = ember_txn_append(t, &p);
    if (rc != EMBER_OK) {
        ember_txn_abort(t);
        return rc;
    }
    return ember_txn_commit(t);
}

static void test_txn(void **state)
{
    fixture *f = *state;
    ember_stats a, b;
    int round = 0;

    stats(f, &a);
    assert_true(oom_loop(f, "txn", op_txn, &round, true) > 0);
    stats(f, &b);
    assert_int_equal(b.profiles, a.profiles + 1);
    assert_int_equal(b.stacks, a.stacks + 1);
    assert_int_equal(b.functions, a.functions + 1);
}

/* A second handle (a codec of its own, with no zstd context yet) appends
** a profile that goes through zstd, and closes. */
static int op_fresh_handle(fixture *f, void *ctx)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE };
    ember_sample s[NSTACKS];
    ember_profile p = big_profile(f, s, T0 + 9 * HOUR, 77);
    ember_db *db = NULL;
    int rc = ember_open(f->dir, &o, &db);

    (void)ctx;
    if (rc == EMBER_OK)
        rc = ember_append(db, &p);
    ember_close(db);
    return rc;
}

static void test_fresh_handle(void **state)
{
    fixture *f = *state;
    ember_stats a, b;

    stats(f, &a);
    assert_true(oom_loop(f, "fresh handle", op_fresh_handle, NULL, true) > 0);
    stats(f, &b);
    assert_int_equal(b.profiles, a.profiles + 1);
}

/* ember_import of a real Go CPU profile (gzipped pprof, two types). */
static int op_import(fixture *f, void *ctx)
{
    ember_label l[] = { { "service", "imported" } };
    ember_import_opts o = { .sz = sizeof o, .labels = l, .nlabels = 1 };
    const tu_out *in = ctx;

    return ember_import(f->db, in->text, in->len, &o, NULL);
}

static void test_import(void **state)
{
    fixture *f = *state;
    tu_out in = { 0 };
    ember_stats a, b;

    in.text = tu_read_file("tests/data/pprof/cpu.pb.gz", &in.len);
    assert_non_null(in.text);
    stats(f, &a);
    assert_true(oom_loop(f, "import", op_import, &in, true) > 0);
    stats(f, &b);
    assert_true(b.profiles > a.profiles);
    free(in.text);
}

/* ember_import_files of a directory holding one collapsed file: the walk,
** the batch and its commit. One file, so a failure leaves nothing behind.
** (These two run after the seal test: the series they add would make its
** seal take more than one batch.) */
static int op_import_files(fixture *f, void *ctx)
{
    const char *const *paths = ctx;
    ember_import_opts o = { .sz = sizeof o, .flags = EMBER_IMPORT_TIME,
                            .time_ms = T0 + 7 * HOUR };

    return ember_import_files(f->db, paths, 1, &o, NULL, NULL);
}

static void test_import_files(void **state)
{
    fixture *f = *state;
    char *dir = tu_tmpdir("oomfiles"), path[512];
    const char *paths[] = { dir };
    size_t len;
    char *buf = tu_read_file("tests/data/collapsed/1732170000000.txt", &len);
    ember_stats a, b;
    FILE *out;

    assert_non_null(buf);
    snprintf(path, sizeof path, "%s/stacks.txt", dir);
    assert_non_null(out = fopen(path, "wb"));
    assert_int_equal(fwrite(buf, 1, len, out), len);
    fclose(out);
    stats(f, &a);
    assert_true(oom_loop(f, "import files", op_import_files, paths, true) > 0);
    stats(f, &b);
    assert_true(b.profiles > a.profiles);
    free(buf);
    tu_rmdir(dir);
}

/* ember_result_render of a query result as -o top: the same text each
** time it succeeds. */
static int op_render(fixture *f, void *ctx)
{
    char **ref = ctx, *out = NULL;
    ember_result *r = NULL;
    size_t len;
    int rc = ember_query(f->db, "top(merge(" CPU "), 5)", NULL, &r);

    if (rc == EMBER_OK)
        rc = ember_result_render(f->db, r, "top", NULL, &out, &len);
    ember_result_free(r);
    if (rc != EMBER_OK) {
        assert_null(out);
        return rc;
    }
    assert_int_equal(len, strlen(out));
    if (*ref == NULL)
        *ref = out;                     /* the reference run */
    else {
        assert_string_equal(out, *ref);
        ember_free(out);
    }
    return EMBER_OK;
}

static void test_render(void **state)
{
    fixture *f = *state;
    char *ref = NULL;

    assert_int_equal(op_render(f, &ref), EMBER_OK);
    assert_non_null(strstr(ref, "Showing"));
    assert_true(oom_loop(f, "render", op_render, &ref, false) > 0);
    ember_free(ref);
}

static int op_seal(fixture *f, void *ctx)
{
    (void)ctx;
    return ember_seal(f->db);
}

static void test_seal(void **state)
{
    fixture *f = *state;
    ember_stats a, b;

    stats(f, &a);
    assert_true(a.head_chunks > 0);
    assert_true(oom_loop(f, "seal", op_seal, NULL, true) > 0);
    stats(f, &b);
    assert_int_equal(b.head_chunks, 0);
    assert_int_equal(b.profiles, a.profiles);
}

/* ---- reads -------------------------------------------------------------- */

/* A query and the answer it gave without the hook. */
typedef struct query_ref {
    ember_selector sel;
    ember_matcher m[2];
    const char *label;              /* for label_values */
    int64_t sum;                    /* merged values / totals / points */
    size_t count;                   /* stacks / points / samples / values */
    char first[64];                 /* first label value */
} query_ref;

static void ref_init(query_ref *q, int64_t from, int64_t to,
                     const char *focus)
{
    memset(q, 0, sizeof *q);
    q->m[0] = (ember_matcher){ "service", "(api|db|big)", EMBER_MATCH_RE };
    q->m[1] = (ember_matcher){ "zone", "", EMBER_MATCH_NEQ };
    q->sel = (ember_selector){ .sz = sizeof q->sel, .matchers = q->m,
                               .nmatchers = 2, .from_ms = from,
                               .to_ms = to, .focus = focus };
    q->label = "service";
}

static int op_merge(fixture *f, void *ctx)
{
    query_ref *q = ctx;
    ember_merged *m = NULL;
    const int64_t *v;
    int64_t sum = 0;
    size_t n;
    int rc = ember_merge(f->db, &q->sel, &m);

    if (rc != EMBER_OK) {
        assert_null(m);
        return rc;
    }
    n = ember_merged_samples(m, NULL, &v);
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    ember_merged_free(m);
    if (q->count == 0 && q->sum == 0) {     /* the reference run */
        q->count = n;
        q->sum = sum;
    }
    assert_int_equal(n, q->count);
    assert_int_equal(sum, q->sum);
    return EMBER_OK;
}

static int op_totals(fixture *f, void *ctx)
{
    query_ref *q = ctx;
    ember_totals *t = NULL;
    int64_t sum = 0;
    size_t points = 0;
    int rc = ember_totals_get(f->db, &q->sel, &t);

    if (rc != EMBER_OK) {
        assert_null(t);
        return rc;
    }
    for (size_t i = 0; i < ember_totals_count(t); i++) {
        const int64_t *v;
        size_t n;
        ember_totals_series(t, i, NULL, NULL, &v, &n);
        for (size_t j = 0; j < n; j++)
            sum += v[j];
        points += n;
    }
    ember_totals_free(t);
    if (q->count == 0 && q->sum == 0) {
        q->count = points;
        q->sum = sum;
    }
    assert_int_equal(points, q->count);
    assert_int_equal(sum, q->sum);
    return EMBER_OK;
}

static int op_iterate(fixture *f, void *ctx)
{
    query_ref *q = ctx;
    ember_iter *it = NULL;
    ember_point pt;
    int64_t sum = 0;
    size_t n = 0;
    int rc = ember_select(f->db, &q->sel, &it);

    if (rc != EMBER_OK) {
        assert_null(it);
        return rc;
    }
    while ((rc = ember_iter_next(it, &pt)) == EMBER_OK) {
        sum += pt.value;
        n++;
    }
    ember_iter_free(it);
    if (rc != EMBER_DONE)
        return rc;
    if (q->count == 0 && q->sum == 0) {
        q->count = n;
        q->sum = sum;
    }
    assert_int_equal(n, q->count);
    assert_int_equal(sum, q->sum);
    return EMBER_OK;
}

/* Label values (or names, when q->label is NULL) under the selector. */
static int op_labels(fixture *f, void *ctx)
{
    query_ref *q = ctx;
    ember_strlist *l = NULL;
    int rc = q->label ? ember_label_values(f->db, q->label, &q->sel, &l)
                      : ember_label_names(f->db, &q->sel, &l);

    if (rc != EMBER_OK) {
        assert_null(l);
        return rc;
    }
    if (q->count == 0) {
        q->count = ember_strlist_count(l);
        snprintf(q->first, sizeof q->first, "%s", ember_strlist_get(l, 0));
    }
    assert_int_equal(ember_strlist_count(l), q->count);
    assert_string_equal(ember_strlist_get(l, 0), q->first);
    ember_strlist_free(l);
    return EMBER_OK;
}

/* Runs OP once without the hook (the reference), then under the loop. */
static void read_case(fixture *f, const char *what, op_fn op, query_ref *q)
{
    assert_int_equal(op(f, q), EMBER_OK);
    assert_true(q->count > 0);
    assert_true(oom_loop(f, what, op, q, false) > 0);
}

static void test_merge(void **state)
{
    query_ref q;

    ref_init(&q, 0, 0, NULL);
    read_case(*state, "merge", op_merge, &q);
    ref_init(&q, T0 + 5000, T0 + 2 * HOUR + 14000, NULL);   /* partial */
    read_case(*state, "merge range", op_merge, &q);
    ref_init(&q, 0, 0, "fn_.*");                            /* focus */
    read_case(*state, "merge focus", op_merge, &q);
}

static void test_totals(void **state)
{
    query_ref q;

    ref_init(&q, 0, 0, NULL);
    read_case(*state, "totals", op_totals, &q);
    ref_init(&q, T0 + 5000, T0 + 2 * HOUR + 14000, "leaf_.*");
    read_case(*state, "totals focus", op_totals, &q);
}

static void test_iterate(void **state)
{
    query_ref q;

    ref_init(&q, 0, 0, NULL);
    read_case(*state, "iterate", op_iterate, &q);
    ref_init(&q, T0 + 5000, T0 + 2 * HOUR + 14000, "fn_.*");
    read_case(*state, "iterate focus", op_iterate, &q);
}

static void test_label_values(void **state)
{
    query_ref q;

    ref_init(&q, 0, 0, NULL);
    read_case(*state, "label values", op_labels, &q);
    ref_init(&q, 0, 0, NULL);
    q.label = NULL;
    read_case(*state, "label names", op_labels, &q);
}

/* ---- verify, snapshots, open -------------------------------------------- */

/* Verify must say ENOMEM when memory fails, never report damage. */
static int op_verify(fixture *f, void *ctx)
{
    uint64_t n = 0;
    int rc = ember_verify(f->db, NULL, NULL, &n);

    (void)ctx;
    if (rc == EMBER_OK)
        assert_int_equal(n, 0);
    return rc;
}

static void test_verify(void **state)
{
    assert_true(oom_loop(*state, "verify", op_verify, NULL, false) > 0);
}

/* Looks up every stack's frames through a snapshot. */
static int op_snapshot(fixture *f, void *ctx)
{
    ember_snapshot *s = NULL;
    int rc = ember_snapshot_begin(f->db, &s);

    (void)ctx;
    for (uint32_t i = 0; i < NSTACKS && rc == EMBER_OK; i++) {
        const uint32_t *locs;
        size_t n;
        rc = ember_snapshot_stack(s, f->stacks[i], &locs, &n);
        for (size_t j = 0; j < n && rc == EMBER_OK; j++) {
            ember_location loc;
            ember_function fn;
            ember_mapping m;
            rc = ember_snapshot_location(s, locs[j], &loc);
            if (rc == EMBER_OK)
                rc = ember_snapshot_function(s, loc.lines[0].function, &fn);
            if (rc == EMBER_OK)
                rc = ember_snapshot_mapping(s, loc.mapping, &m);
            if (rc == EMBER_OK && j == 0)
                assert_non_null(strstr(fn.name, "leaf_"));
        }
    }
    ember_snapshot_end(s);
    return rc;
}

static void test_snapshot(void **state)
{
    assert_true(oom_loop(*state, "snapshot", op_snapshot, NULL, false) > 0);
}

static int op_open(fixture *f, void *ctx)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE };
    ember_db *db = NULL;
    int rc = ember_open(f->dir, &o, &db);

    (void)ctx;
    if (rc == EMBER_OK) {           /* the hook is still set: may fail */
        ember_stats st = { .sz = sizeof st };
        rc = ember_stats_get(db, &st);
        assert_true(rc != EMBER_OK || st.profiles > 0);
    }
    ember_close(db);
    return rc;
}

/* Opens a second handle; and creates a new database. */
static void test_open(void **state)
{
    fixture *f = *state;
    fixture g;

    assert_true(oom_loop(f, "open", op_open, NULL, false) > 0);
    memset(&g, 0, sizeof g);
    g.dir = tu_tmpdir("oom-create");
    for (uint64_t n = 1;; n++) {
        ember_db *db = NULL;
        int rc;
        em_alloc_fail_at(n);
        rc = ember_open(g.dir, NULL, &db);
        em_alloc_fail_at(0);
        if (rc != EMBER_OK && rc != EMBER_ENOMEM)
            fail_msg("create, allocation %llu failing: %d: %s",
                     (unsigned long long)n, rc, ember_errmsg(db));
        if (rc == EMBER_OK)
            assert_int_equal(tu_verify(db), 0);
        ember_close(db);
        if (rc == EMBER_OK)
            break;
    }
    tu_rmdir(g.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append),
        cmocka_unit_test(test_txn),
        cmocka_unit_test(test_fresh_handle),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_totals),
        cmocka_unit_test(test_iterate),
        cmocka_unit_test(test_label_values),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_seal),
        cmocka_unit_test(test_open),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_import),
        cmocka_unit_test(test_import_files),
    };
    return cmocka_run_group_tests_name("oom", tests, setup, teardown);
}
