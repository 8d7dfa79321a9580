/*
** tests/unit/test_crash.c: crash safety. A child process appends batches
** and reports each acknowledged batch number on a pipe; the parent kills it
** with SIGKILL at a random moment, reopens the database and checks:
**  - ember_verify finds no problem;
**  - every acknowledged batch is there, whole, with its exact values;
**  - every batch that is there is whole (the one in flight may be there or
**    not, never in part), and nothing the child never started is there.
** Both with EMBER_SYNC_FULL and EMBER_SYNC_NONE: a process kill leaves the
** OS page cache intact, so neither may lose an acknowledged write.
**
** Batch n (deterministic from n, all at time T(n) = T0 + 10 s * n):
**   profile 0  CPU  service=svc<n%4>        two samples on base stacks
**   profile 1  CPU  service=svc<(n+1)%4>    one sample
**   profile 2  MEM  batch=<n>               one sample, plus, when n % 5 is
**              0, a sample on a stack interned in the same txn whose leaf
**              function is "batch_leaf_<n>" (ember_txn: intern + append).
** chunk_max_profiles is small so that the child seals heads all the time,
** every 25th batch is followed by ember_seal (many series, several txns),
** and the map starts at 1 MiB so that it grows while the child may die.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "tests/unit/common/testutil.h"

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"
#define MEM "memory:inuse_space:bytes:space:bytes"
#define T0 1732170000000LL
#define STEP_MS 10000
#define NBASE 8
#define NSVC 4
#define ROUNDS 30
#define MAX_BATCHES (1u << 20)
#define ALL_PARTS 7u                /* the three profiles of a batch */

static uint32_t base[NBASE];        /* base stacks, made before the rounds */

static int64_t batch_time(uint32_t n)
{
    return T0 + (int64_t)n * STEP_MS;
}

static bool has_txn_stack(uint32_t n)
{
    return n % 5 == 0;
}

/* The expected total of profile PART of batch N. */
static int64_t part_total(uint32_t n, int part)
{
    switch (part) {
    case 0:
        return (int64_t)n + 1 + 2;
    case 1:
        return 3 * (int64_t)n + 7;
    default:
        return 2 * (int64_t)n + 1 + (has_txn_stack(n) ? 1000 + n : 0);
    }
}

/* ---- the child ---------------------------------------------------------- */

typedef struct batch_buf {
    char svc[2][16], num[16];
    ember_label l0[1], l1[1], l2[1];
    ember_sample s0[2], s1[1], s2[2];
    ember_profile ps[3];
} batch_buf;

/* Fills B with batch N; the txn stack (if any) is filled in later. */
static void batch_build(batch_buf *b, uint32_t n)
{
    int64_t t = batch_time(n);

    snprintf(b->svc[0], sizeof b->svc[0], "svc%u", n % NSVC);
    snprintf(b->svc[1], sizeof b->svc[1], "svc%u", (n + 1) % NSVC);
    snprintf(b->num, sizeof b->num, "%u", n);
    b->l0[0] = (ember_label){ "service", b->svc[0] };
    b->l1[0] = (ember_label){ "service", b->svc[1] };
    b->l2[0] = (ember_label){ "batch", b->num };
    b->s0[0] = (ember_sample){ base[n % NBASE], (int64_t)n + 1 };
    b->s0[1] = (ember_sample){ base[(n + 3) % NBASE], 2 };
    b->s1[0] = (ember_sample){ base[(n + 1) % NBASE], 3 * (int64_t)n + 7 };
    b->s2[0] = (ember_sample){ base[n % NBASE], 2 * (int64_t)n + 1 };
    b->s2[1] = (ember_sample){ 0, 1000 + (int64_t)n };
    b->ps[0] = tu_profile(CPU, b->l0, 1, t, b->s0, 2);
    b->ps[1] = tu_profile(CPU, b->l1, 1, t, b->s1, 1);
    b->ps[2] = tu_profile(MEM, b->l2, 1, t, b->s2, has_txn_stack(n) ? 2 : 1);
}

/* Interns batch N's own stack and appends the batch, all in one txn. */
static int child_txn_batch(ember_db *db, batch_buf *b, uint32_t n)
{
    char name[32];
    ember_function f = { .name = name, .file = "crash.c" };
    ember_line line = { 0, 1 };
    ember_location loc = { 0, 0x4000 + n, &line, 1 };
    uint32_t locs[2] = { 0, 0 };
    ember_txn *t;
    int rc = ember_txn_begin(db, &t);

    snprintf(name, sizeof name, "batch_leaf_%u", n);
    if (rc != EMBER_OK)
        return rc;
    rc = ember_intern_function(t, &f, &line.function);
    if (rc == EMBER_OK)
        rc = ember_intern_location(t, &loc, &locs[0]);
    if (rc == EMBER_OK)     /* leaf first; location 0 came with base[] */
        rc = ember_intern_stack(t, locs, 2, &b->s2[1].stack);
    for (int i = 0; i < 3 && rc == EMBER_OK; i++)
        rc = ember_txn_append(t, &b->ps[i]);
    if (rc != EMBER_OK) {
        ember_txn_abort(t);
        return rc;
    }
    return ember_txn_commit(t);
}

/* Appends batches FIRST, FIRST+1, ... until killed; never returns. */
static void child_main(const char *dir, int sync, uint32_t first, int fd)
{
    ember_open_opts o = { .sz = sizeof o, .sync = sync, .map_size = 1u << 20,
                          .chunk_max_profiles = 6 };
    ember_db *db = NULL;
    int rc = ember_open(dir, &o, &db);

    if (rc != EMBER_OK) {
        fprintf(stderr, "child: open: %s\n", ember_errmsg(db));
        _exit(2);
    }
    for (uint32_t n = first; n < MAX_BATCHES; n++) {
        batch_buf b;
        batch_build(&b, n);
        rc = has_txn_stack(n) ? child_txn_batch(db, &b, n)
                              : ember_append_batch(db, b.ps, 3);
        if (rc != EMBER_OK) {
            fprintf(stderr, "child: batch %u: %s\n", n, ember_errmsg(db));
            _exit(3);
        }
        if (write(fd, &n, sizeof n) != (ssize_t)sizeof n)
            _exit(4);
        if (n % 25 == 24 && ember_seal(db) != EMBER_OK) {
            fprintf(stderr, "child: seal: %s\n", ember_errmsg(db));
            _exit(5);
        }
    }
    _exit(0);
}

/* ---- the parent's check ------------------------------------------------- */

typedef struct seen {
    uint8_t *parts;                 /* [MAX_BATCHES]: ALL_PARTS bits */
    uint32_t max;                   /* one past the highest batch seen */
} seen;

/* What series SID holds: *svc the service number (CPU series), or *batch
** the batch number (MEM series); the other is set to UINT32_MAX. */
static void series_kind(ember_db *db, uint32_t sid, uint32_t *svc,
                        uint32_t *batch)
{
    ember_strlist *l = NULL;
    const char *type, *name, *value;

    *svc = *batch = UINT32_MAX;
    assert_int_equal(ember_series_labels(db, sid, &l), EMBER_OK);
    assert_int_equal(ember_strlist_count(l), 3);
    type = ember_strlist_get(l, 0);
    name = ember_strlist_get(l, 1);
    value = ember_strlist_get(l, 2);
    if (strcmp(type, CPU) == 0 && strcmp(name, "service") == 0 &&
        strncmp(value, "svc", 3) == 0)
        *svc = (uint32_t)strtoul(value + 3, NULL, 10);
    else if (strcmp(type, MEM) == 0 && strcmp(name, "batch") == 0)
        *batch = (uint32_t)strtoul(value, NULL, 10);
    else
        fail_msg("series %u: unexpected labels %s %s=%s", sid, type, name,
                 value);
    ember_strlist_free(l);
}

/* Which part of batch N a point at T in a series of that kind is; -1 if
** it cannot be one. */
static int point_part(uint32_t svc, uint32_t batch, int64_t t, uint32_t *n)
{
    if (t < T0 || (t - T0) % STEP_MS != 0 ||
        (t - T0) / STEP_MS >= MAX_BATCHES)
        return -1;
    *n = (uint32_t)((t - T0) / STEP_MS);
    if (batch != UINT32_MAX)
        return batch == *n ? 2 : -1;
    return svc == *n % NSVC ? 0 : svc == (*n + 1) % NSVC ? 1 : -1;
}

/* Records every stored profile in S, checking its value. */
static void collect(ember_db *db, seen *s)
{
    ember_totals *t = NULL;
    int rc = ember_totals_get(db, NULL, &t);

    if (rc != EMBER_OK)
        fprintf(stderr, "totals: %s\n", ember_errmsg(db));
    assert_int_equal(rc, EMBER_OK);
    for (size_t i = 0; i < ember_totals_count(t); i++) {
        const int64_t *times, *vals;
        uint32_t sid, svc, batch, n = 0;
        size_t np;
        ember_totals_series(t, i, &sid, &times, &vals, &np);
        series_kind(db, sid, &svc, &batch);
        for (size_t j = 0; j < np; j++) {
            int part = point_part(svc, batch, times[j], &n);
            if (part < 0)
                fail_msg("series %u: unexpected point at t=%lld", sid,
                         (long long)times[j]);
            if (s->parts[n] & (1u << part))
                fail_msg("batch %u part %d stored twice", n, part);
            if (vals[j] != part_total(n, part))
                fail_msg("batch %u part %d: total %lld, expected %lld", n,
                         part, (long long)vals[j],
                         (long long)part_total(n, part));
            s->parts[n] |= (uint8_t)(1u << part);
            if (n + 1 > s->max)
                s->max = n + 1;
        }
    }
    ember_totals_free(t);
}

/* Batch N's own stack: present, valued, with its leaf "batch_leaf_N". */
static void check_txn_stack(ember_db *db, uint32_t n)
{
    char num[16], want[32];
    ember_matcher m = { "batch", num, EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .matchers = &m, .nmatchers = 1 };
    ember_merged *mg = NULL;
    ember_snapshot *snap = NULL;
    const uint32_t *st, *locs;
    const int64_t *v;
    ember_location loc;
    ember_function f;
    size_t ns, depth;

    snprintf(num, sizeof num, "%u", n);
    snprintf(want, sizeof want, "batch_leaf_%u", n);
    assert_int_equal(ember_merge(db, &sel, &mg), EMBER_OK);
    ns = ember_merged_samples(mg, &st, &v);
    assert_int_equal(ns, 2);
    assert_int_equal(ember_snapshot_begin(db, &snap), EMBER_OK);
    for (size_t i = 0; i < ns; i++) {
        if (st[i] == base[n % NBASE]) {
            assert_int_equal(v[i], 2 * (int64_t)n + 1);
            continue;
        }
        assert_int_equal(v[i], 1000 + (int64_t)n);
        assert_int_equal(ember_snapshot_stack(snap, st[i], &locs, &depth),
                         EMBER_OK);
        assert_int_equal(depth, 2);
        assert_int_equal(ember_snapshot_location(snap, locs[0], &loc),
                         EMBER_OK);
        assert_int_equal(loc.nlines, 1);
        assert_int_equal(ember_snapshot_function(snap, loc.lines[0].function,
                                                 &f), EMBER_OK);
        assert_string_equal(f.name, want);
    }
    ember_snapshot_end(snap);
    ember_merged_free(mg);
}

/* Checks the database after a kill. FIRST: the first batch of this round;
** every batch below ACKED must be there (acknowledged in this round, or
** seen after an earlier kill), batch ACKED was in flight and may be there,
** none above it may. Returns one past the highest batch present. */
static uint32_t check_after_kill(const char *dir, uint32_t first,
                                 uint32_t acked)
{
    ember_db *db = tu_open(dir, 1);
    ember_stats st = { .sz = sizeof st };
    seen s = { calloc(MAX_BATCHES, 1), 0 };
    uint64_t whole = 0, samples = 0;

    assert_non_null(s.parts);
    assert_int_equal(tu_verify(db), 0);
    collect(db, &s);
    for (uint32_t n = 0; n < s.max || n < acked; n++) {
        bool must = n < acked;
        if (s.parts[n] != 0 && s.parts[n] != ALL_PARTS)
            fail_msg("batch %u is partial: parts %#x", n, s.parts[n]);
        if (must && s.parts[n] != ALL_PARTS)
            fail_msg("acknowledged batch %u lost (parts %#x)", n, s.parts[n]);
        if (s.parts[n] == ALL_PARTS && n > acked)
            fail_msg("batch %u present, but the child never began it", n);
        whole += s.parts[n] == ALL_PARTS;
        samples += s.parts[n] == ALL_PARTS ? 4 + has_txn_stack(n) : 0;
        if (s.parts[n] == ALL_PARTS && has_txn_stack(n) && n >= first)
            check_txn_stack(db, n);
    }
    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    assert_int_equal(st.profiles, 3 * whole);
    assert_int_equal(st.samples, samples);
    ember_close(db);
    free(s.parts);
    return s.max > acked ? s.max : acked;
}

/* Reads acknowledged batch numbers from NEXT on until EOF; returns the
** last + 1 and adds their number to *COUNT. */
static uint32_t read_acks(int fd, uint32_t next, uint32_t *count)
{
    uint32_t n;
    ssize_t r;

    while ((r = read(fd, &n, sizeof n)) == (ssize_t)sizeof n) {
        assert_int_equal(n, next);      /* in order, none skipped */
        next = n + 1;
        (*count)++;
    }
    assert_true(r == 0);
    return next;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* One kill round: fork, let the child append (in WAIT rounds, wait for
** its first acknowledgement before the clock starts), kill it, check. */
static uint32_t crash_round(const char *dir, int sync, uint32_t first,
                            bool wait, unsigned *rng, uint32_t *nacks)
{
    int fds[2], status;
    pid_t pid;
    uint32_t acked = first, n;

    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_main(dir, sync, first, fds[1]);
    }
    close(fds[1]);
    *nacks = 0;
    if (wait && read(fds[0], &n, sizeof n) == (ssize_t)sizeof n) {
        assert_int_equal(n, first);
        acked = first + 1;
        (*nacks)++;
    }
    sleep_ms(1 + (long)(rand_r(rng) % 50));
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
        fail_msg("child exited by itself (status %d): see its message",
                 WEXITSTATUS(status));
    acked = read_acks(fds[0], acked, nacks);
    close(fds[0]);
    return check_after_kill(dir, first, acked);
}

static void crash_rounds(int sync, const char *tag)
{
    char *dir = tu_tmpdir(tag);
    ember_db *db = tu_open(dir, 1);     /* 1 MiB: the child grows the map */
    ember_stats st = { .sz = sizeof st };
    unsigned rng = 12345u + (unsigned)sync;
    uint32_t next = 0, total = 0, nacks;

    for (uint32_t i = 0; i < NBASE; i++)
        base[i] = tu_synthetic_stack(db, i);
    ember_close(db);            /* the child must not inherit an open env */
    for (int round = 0; round < ROUNDS; round++) {
        next = crash_round(dir, sync, next, round % 2 == 1, &rng, &nacks);
        total += nacks;
    }
    db = tu_open(dir, 1);
    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    ember_close(db);
    fprintf(stderr, "%s: %d rounds, %u batches acknowledged, %u stored, "
            "%llu KiB used\n", tag, ROUNDS, total, next,
            (unsigned long long)(st.used_bytes >> 10));
    assert_true(total > 0);
    tu_rmdir(dir);
}

static void test_crash_sync_full(void **state)
{
    (void)state;
    crash_rounds(EMBER_SYNC_FULL, "crash-full");
}

static void test_crash_sync_none(void **state)
{
    (void)state;
    crash_rounds(EMBER_SYNC_NONE, "crash-none");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_sync_full),
        cmocka_unit_test(test_crash_sync_none),
    };
    return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
