/*
** tests/unit/test_compact.c: compaction (issue 15).
**  - answers: two databases get the same profiles, one is compacted at
**    several points (its old data in blocks, its head rebuilt); every
**    query answers the same on both, whatever the mix of head and blocks;
**  - ids: an id interned before a compaction is refused after it, never
**    taken for another stack;
**  - leftovers: temporary and unnamed block files are removed; a block
**    file newer than every block the database made is reported;
**  - concurrency: appends and queries run while compactions run; a query
**    over data that no longer changes answers the same throughout;
**  - kill -9: a child appends batches and compacts, killed at random; no
**    acknowledged batch is lost, none is there in part, verify is clean.
**    EMBER_TEST_KILL_ROUNDS sets the rounds (200 by default; 1000 is the
**    long mode of `make test-long`).
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "engine/store.h"
#include "tests/unit/common/testutil.h"

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"
#define MEM "memory:inuse_space:bytes:space:bytes"
#define T0 1732170000000LL          /* 2024-11-21T06:20:00Z */
#define MIN_MS 60000LL
#define HOUR_MS (60 * MIN_MS)

/* ---- a deterministic feed ---------------------------------------------- */

/* Appends minute M's profiles in transaction X: a CPU profile for each of
** three services and a MEM profile on synthetic stacks drawn from the
** minute, and every fifth minute a profile on a stack of its own. */
static int feed_minute(ember_txn *x, uint32_t m)
{
    static const char *const svc[3] = { "api", "db", "web" };
    int64_t t = T0 + (int64_t)m * MIN_MS;
    int rc = EMBER_OK;

    for (int s = 0; s < 4 && rc == EMBER_OK; s++) {
        ember_label l[2] = { { "service", svc[s % 3] },
                             { "zone", m % 2 ? "a" : "b" } };
        ember_sample smp[4];
        for (int k = 0; k < 4 && rc == EMBER_OK; k++) {
            smp[k].value = (int64_t)(m % 17 + 1) * (k + 1);
            rc = tu_txn_synthetic_stack(x, (m * 7 + (uint32_t)s * 13 +
                                            (uint32_t)k * 3) % 90,
                                        &smp[k].stack);
        }
        ember_profile p = tu_profile(s == 3 ? MEM : CPU, l, 2, t, smp, 4);
        if (rc == EMBER_OK)
            rc = ember_txn_append(x, &p);
    }
    if (rc == EMBER_OK && m % 7 == 0) {     /* the empty stack, as an
                                            ** agent's own counters */
        ember_sample smp = { 0, 11 };
        ember_label l = { "service", "agent" };
        ember_profile p = tu_profile(CPU, &l, 1, t + 2, &smp, 1);
        rc = ember_intern_stack(x, NULL, 0, &smp.stack);
        if (rc == EMBER_OK)
            rc = ember_txn_append(x, &p);
    }
    if (rc == EMBER_OK && m % 5 == 0) {
        char name[32];
        ember_function f = { .name = name, .file = "own.go" };
        ember_line line = { 0, 7 };
        ember_location loc = { 0, 0x9000 + m, &line, 1 };
        uint32_t lid = 0;
        ember_sample smp = { 0, 5 };
        ember_label l = { "service", "api" };
        ember_profile p = tu_profile(CPU, &l, 1, t + 1, &smp, 1);
        snprintf(name, sizeof name, "own_%u", m % 3);
        rc = ember_intern_function(x, &f, &line.function);
        if (rc == EMBER_OK)
            rc = ember_intern_location(x, &loc, &lid);
        if (rc == EMBER_OK)
            rc = ember_intern_stack(x, &lid, 1, &smp.stack);
        if (rc == EMBER_OK)
            rc = ember_txn_append(x, &p);
    }
    return rc;
}

/* Appends the profiles of minutes [FROM, TO), one transaction a minute;
** the first failure's code. */
static int feed_rc(ember_db *db, uint32_t from, uint32_t to)
{
    int rc = EMBER_OK;

    for (uint32_t m = from; m < to && rc == EMBER_OK; m++) {
        ember_txn *x;
        if ((rc = ember_txn_begin(db, &x)) != EMBER_OK)
            break;
        if ((rc = feed_minute(x, m)) == EMBER_OK)
            rc = ember_txn_commit(x);
        else
            ember_txn_abort(x);
    }
    return rc;
}

static void feed(ember_db *db, uint32_t from, uint32_t to)
{
    int rc = feed_rc(db, from, to);

    if (rc != EMBER_OK)
        fail_msg("feed: %s", ember_errmsg(db));
}

/* ---- answers ------------------------------------------------------------ */

/* Appends to OUT the answer to Q rendered as FMT, or the error: callers
** compare texts (and the queriers run on threads, where cmocka cannot
** fail a test). */
static void answer(ember_db *db, const char *q, const char *fmt,
                   int64_t step, FILE *out)
{
    ember_query_opts o = { .sz = sizeof o, .from_ms = T0 - HOUR_MS,
                           .to_ms = T0 + 48 * HOUR_MS, .step_ms = step,
                           .now_ms = T0 + 48 * HOUR_MS };
    ember_result *r = NULL;
    char *text = NULL;
    size_t len;
    int rc = ember_query(db, q, &o, &r);

    if (rc == EMBER_OK)
        rc = ember_result_render(db, r, fmt, NULL, &text, &len);
    if (rc == EMBER_OK)
        fprintf(out, "== %s -o %s\n%s\n", q, fmt, text);
    else
        fprintf(out, "== %s -o %s\nERROR %s\n", q, fmt, ember_errmsg(db));
    ember_free(text);
    ember_result_free(r);
}

/* Everything the comparison asks, as one text. */
static char *answers(ember_db *db)
{
    static const char *const q[] = {
        "merge(" CPU ")",
        "merge by (service) (" CPU ")",
        "focus(merge(" CPU "), \"fn_1\")",
        "ignore(merge(" CPU "), \"leaf_1.*\")",
        "merge(" MEM "{zone=\"a\"})",
        "merge(" CPU "{service=~\"a.*|w.*\"})",
        "diff(merge(" CPU "[1h] @ 1732173600), "
        "merge(" CPU "[1h] @ 1732191600))",
    };
    tu_out o;

    tu_out_open(&o);
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        answer(db, q[i], "top", 0, o.f);
        answer(db, q[i], "collapsed", 0, o.f);
    }
    answer(db, "merge(" CPU ")", "tree", 0, o.f);
    answer(db, "total(" CPU ")", "csv", 10 * MIN_MS, o.f);
    answer(db, "sum by (service) (total(" CPU "))", "csv", HOUR_MS, o.f);
    answer(db, "total(focus(" CPU ", \"fn_1\"))", "csv", 10 * MIN_MS, o.f);
    answer(db, "total(" CPU ")", "csv", 0, o.f);
    answer(db, "label_values(service)", "csv", 0, o.f);
    answer(db, "label_names()", "csv", 0, o.f);
    answer(db, "profile_types()", "csv", 0, o.f);
    tu_out_close(&o);
    return o.text;
}

static void compact_at(ember_db *db, int64_t now, int64_t head_ms,
                       ember_compact_report *rep)
{
    ember_compact_opts o = { .sz = sizeof o, .now_ms = now,
                             .head_ms = head_ms, .block_ms = 2 * HOUR_MS };
    ember_compact_report r = { .sz = sizeof r };
    int rc = ember_compact(db, &o, rep != NULL ? rep : &r);

    if (rc != EMBER_OK)
        fail_msg("compact: %s", ember_errmsg(db));
}

static void same_answers(ember_db *a, ember_db *b)
{
    char *x = answers(a), *y = answers(b);

    if (strcmp(x, y) != 0) {
        FILE *f = fopen("/tmp/ember-compact-a.txt", "w");
        FILE *g = fopen("/tmp/ember-compact-b.txt", "w");
        if (f != NULL) {
            fputs(x, f);
            fclose(f);
        }
        if (g != NULL) {
            fputs(y, g);
            fclose(g);
        }
        fail_msg("answers differ: /tmp/ember-compact-{a,b}.txt");
    }
    free(x);
    free(y);
}

/* Two databases, one compacted between feeds: the same answers. */
static void test_same_answers(void **state)
{
    char *da = tu_tmpdir("compact_a"), *dbd = tu_tmpdir("compact_b");
    ember_db *a = tu_open(da, 0), *b = tu_open(dbd, 0);
    ember_compact_report rep = { .sz = sizeof rep };
    ember_stats st = { .sz = sizeof st };

    (void)state;
    feed(a, 0, 300);
    feed(b, 0, 300);
    same_answers(a, b);
    compact_at(b, T0 + 300 * MIN_MS, HOUR_MS, &rep);    /* 4 h to blocks */
    assert_true(rep.blocks_written >= 2);
    assert_int_equal(tu_verify(b), 0);
    same_answers(a, b);
    /* late data into windows already in blocks, and new data */
    feed(a, 30, 40);
    feed(b, 30, 40);
    feed(a, 300, 420);
    feed(b, 300, 420);
    same_answers(a, b);
    compact_at(b, T0 + 420 * MIN_MS, HOUR_MS, NULL);
    assert_int_equal(tu_verify(b), 0);
    same_answers(a, b);
    compact_at(b, T0 + 420 * MIN_MS, 0, NULL);          /* all of it */
    assert_int_equal(ember_stats_get(b, &st), EMBER_OK);
    assert_int_equal(st.profiles - st.block_profiles, 0);
    assert_int_equal(st.stacks, 0);         /* the head holds nothing */
    assert_int_equal(tu_verify(b), 0);
    same_answers(a, b);
    ember_close(b);         /* and read-only, from a fresh handle */
    {
        ember_open_opts ro = { .sz = sizeof ro, .flags = EMBER_OPEN_RDONLY };
        assert_int_equal(ember_open(dbd, &ro, &b), EMBER_OK);
    }
    same_answers(a, b);
    ember_close(a);
    ember_close(b);
    tu_rmdir(da);
    tu_rmdir(dbd);
}

/* The zstd level of merged blocks changes their bytes, never an answer;
** a level zstd does not have is refused. */
static void test_zstd_level(void **state)
{
    char *d1 = tu_tmpdir("level_1"), *d19 = tu_tmpdir("level_19");
    ember_db *a = tu_open(d1, 0), *b = tu_open(d19, 0);
    ember_compact_opts o = { .sz = sizeof o, .now_ms = T0 + 50 * HOUR_MS,
                             .head_ms = HOUR_MS, .merge_ms = 24 * HOUR_MS,
                             .zstd_level = 23 };
    ember_stats sa = { .sz = sizeof sa }, sb = { .sz = sizeof sb };

    (void)state;
    feed(a, 0, 48 * 60);
    feed(b, 0, 48 * 60);
    assert_int_equal(ember_compact(a, &o, NULL), EMBER_EINVAL);
    o.zstd_level = 1;
    assert_int_equal(ember_compact(a, &o, NULL), EMBER_OK);
    o.zstd_level = 19;
    assert_int_equal(ember_compact(b, &o, NULL), EMBER_OK);
    assert_int_equal(tu_verify(a), 0);
    assert_int_equal(tu_verify(b), 0);
    same_answers(a, b);
    assert_int_equal(ember_stats_get(a, &sa), EMBER_OK);
    assert_int_equal(ember_stats_get(b, &sb), EMBER_OK);
    assert_int_equal(sa.block_profiles, sb.block_profiles);
    assert_true(sb.block_bytes < sa.block_bytes);
    ember_close(a);
    ember_close(b);
    tu_rmdir(d1);
    tu_rmdir(d19);
}

/* An id from before a compaction is refused after it. */
/* The stack appended at T0 (now in a block) and again at T0 + 1 min (in
** the head): merges of each minute on one snapshot name it by one id. */
static void same_ids(ember_db *db)
{
    ember_selector a = { .sz = sizeof a, .type = CPU, .from_ms = T0,
                         .to_ms = T0 }, b = a;
    ember_snapshot *snap;
    ember_merged *ma, *mb;
    const uint32_t *sa, *sb;

    b.from_ms = b.to_ms = T0 + MIN_MS;
    assert_int_equal(ember_snapshot_begin(db, &snap), EMBER_OK);
    assert_int_equal(ember_snapshot_merge(snap, &b, &mb), EMBER_OK);
    assert_int_equal(ember_snapshot_merge(snap, &a, &ma), EMBER_OK);
    ember_snapshot_end(snap);           /* the merges hold it */
    assert_int_equal(ember_merged_samples(ma, &sa, NULL), 1);
    assert_int_equal(ember_merged_samples(mb, &sb, NULL), 1);
    assert_int_equal(sa[0], sb[0]);
    ember_merged_free(ma);
    ember_merged_free(mb);
}

static void test_stale_ids(void **state)
{
    char *dir = tu_tmpdir("compact_ids");
    ember_db *db = tu_open(dir, 0);
    const char *names[2] = { "leaf", "main" };
    uint32_t old = tu_stack(db, names, 2), fresh;
    ember_sample s = { old, 3 };
    ember_label l = { "service", "x" };
    ember_profile p = tu_profile(CPU, &l, 1, T0, &s, 1);

    (void)state;
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    compact_at(db, T0 + HOUR_MS, 0, NULL);
    assert_int_equal(ember_append(db, &p), EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(db), "compaction"));
    fresh = tu_stack(db, names, 2);
    assert_int_not_equal(fresh, old);
    s.stack = fresh;
    p = tu_profile(CPU, &l, 1, T0 + MIN_MS, &s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    assert_int_equal(tu_verify(db), 0);
    same_ids(db);
    ember_close(db);
    tu_rmdir(dir);
}

/* A result made before a compaction renders the same pprof after it: it
** holds the snapshot its stack ids belong to. */
static void test_result_outlives(void **state)
{
    char *dir = tu_tmpdir("compact_result");
    ember_db *db = tu_open(dir, 0);
    ember_result *r = NULL;
    char *a = NULL, *b = NULL;
    size_t la, lb;

    (void)state;
    feed(db, 0, 30);
    assert_int_equal(ember_query(db, "merge(" CPU ")", NULL, &r), EMBER_OK);
    assert_int_equal(ember_result_render(db, r, "pprof", NULL, &a, &la),
                     EMBER_OK);
    compact_at(db, T0 + HOUR_MS, 0, NULL);
    feed(db, 30, 40);       /* the head reuses the ids the result holds */
    assert_int_equal(ember_result_render(db, r, "pprof", NULL, &b, &lb),
                     EMBER_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    ember_free(a);
    ember_free(b);
    ember_result_free(r);
    ember_close(db);
    tu_rmdir(dir);
}

static void touch(const char *dir, const char *name)
{
    char path[512];
    int fd;

    snprintf(path, sizeof path, "%s/blocks/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
}

static bool exists(const char *dir, const char *name)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof path, "%s/blocks/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Leftovers go; a block from the future is damage. */
static void test_leftovers(void **state)
{
    char *dir = tu_tmpdir("compact_left");
    ember_db *db = tu_open(dir, 0);
    ember_compact_opts o = { .sz = sizeof o, .now_ms = T0 + 100 * MIN_MS,
                             .head_ms = 0 };
    ember_stats st = { .sz = sizeof st };
    uint64_t problems = 0;

    (void)state;
    feed(db, 0, 10);
    compact_at(db, T0 + 100 * MIN_MS, 0, NULL);        /* block 1 */
    touch(dir, "0000000000000001.block.tmp");
    touch(dir, "0000000000000000.block");               /* never named */
    feed(db, 10, 20);
    compact_at(db, T0 + 100 * MIN_MS, 0, NULL);
    assert_false(exists(dir, "0000000000000001.block.tmp"));
    assert_false(exists(dir, "0000000000000000.block"));
    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    assert_true(st.blocks >= 1);
    assert_int_equal(tu_verify(db), 0);
    touch(dir, "00000000000000ff.block");               /* the future */
    assert_int_equal(ember_verify(db, NULL, NULL, &problems),
                     EMBER_ECORRUPT);
    assert_int_equal(problems, 1);
    assert_int_equal(ember_compact(db, &o, NULL), EMBER_ECORRUPT);
    assert_non_null(strstr(ember_errmsg(db), "back in time"));
    assert_true(exists(dir, "00000000000000ff.block"));    /* kept */
    ember_close(db);
    tu_rmdir(dir);
}

/* The answer to Q over [FROM, TO] as collapsed stacks, or "ERROR msg". */
static char *answer_in(ember_db *db, const char *q, int64_t from, int64_t to)
{
    tu_out o;
    ember_query_opts qo = { .sz = sizeof qo, .from_ms = from, .to_ms = to,
                            .now_ms = to };
    ember_result *r = NULL;
    char *text = NULL;
    size_t len;
    int rc = ember_query(db, q, &qo, &r);

    if (rc == EMBER_OK)
        rc = ember_result_render(db, r, "collapsed", NULL, &text, &len);
    tu_out_open(&o);
    fprintf(o.f, "%s", rc == EMBER_OK ? text : "ERROR ");
    if (rc != EMBER_OK)
        fprintf(o.f, "%s", ember_errmsg(db));
    tu_out_close(&o);
    ember_free(text);
    ember_result_free(r);
    return o.text;
}

/* Compacts DB into blocks of 2 h that stay apart (merged per 2 h). */
static void compact_apart(ember_db *db, int64_t now)
{
    ember_compact_opts o = { .sz = sizeof o, .now_ms = now, .head_ms = 0,
                             .block_ms = 2 * HOUR_MS,
                             .merge_ms = 2 * HOUR_MS };

    if (ember_compact(db, &o, NULL) != EMBER_OK)
        fail_msg("compact: %s", ember_errmsg(db));
}

/* The lowest block id of DIR/blocks: the first window compaction cut. */
static uint64_t first_block(const char *dir)
{
    char path[512];
    uint64_t low = UINT64_MAX;
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof path, "%s/blocks", dir);
    assert_non_null(d = opendir(path));
    while ((e = readdir(d)) != NULL) {
        char *end;
        uint64_t id = strtoull(e->d_name, &end, 16);
        if (end == e->d_name + 16 && strcmp(end, ".block") == 0 && id < low)
            low = id;
    }
    closedir(d);
    assert_true(low != UINT64_MAX);
    return low;
}

/* A snapshot opens a block only when a question reads it: with the file
** of the first window gone, a query of the last hours answers as before,
** one that reaches the first window fails naming the block, and verify
** reports it. */
static void test_lazy_open(void **state)
{
    char *dir = tu_tmpdir("compact_lazy");
    ember_db *db = tu_open(dir, 0);
    const char *q = "merge(" CPU ")";
    int64_t late = T0 + 6 * HOUR_MS, end = T0 + 8 * HOUR_MS;
    char from[512], to[512], id[17];
    char *before, *after, *all;
    uint64_t problems = 0;

    (void)state;
    feed(db, 0, 8 * 60);
    compact_apart(db, end + HOUR_MS);
    ember_close(db);
    db = tu_open(dir, 0);
    before = answer_in(db, q, late, end);
    assert_null(strstr(before, "ERROR"));
    ember_close(db);
    snprintf(id, sizeof id, "%016llx", (unsigned long long)first_block(dir));
    snprintf(from, sizeof from, "%s/blocks/%s.block", dir, id);
    snprintf(to, sizeof to, "%s/blocks/%s.moved", dir, id);
    assert_int_equal(rename(from, to), 0);
    db = tu_open(dir, 0);
    after = answer_in(db, q, late, end);
    all = answer_in(db, q, T0, end);
    assert_string_equal(before, after);
    assert_non_null(strstr(all, "ERROR"));
    assert_non_null(strstr(all, id));
    assert_int_equal(ember_verify(db, NULL, NULL, &problems),
                     EMBER_ECORRUPT);
    assert_true(problems >= 1);
    free(before);
    free(after);
    free(all);
    ember_close(db);
    tu_rmdir(dir);
}

/* A handle keeps the blocks no query reads within its budget, dropping
** the least recently read first, and answers the same whatever it kept:
** no budget keeps every block read, EMBER_CACHE_OFF none, one of about a
** block and a half keeps at least one and stays within it. */
static void test_block_budget(void **state)
{
    char *dir = tu_tmpdir("compact_budget");
    ember_db *db = tu_open(dir, 0);
    const char *q[] = { "merge(" CPU ")", "focus(merge(" CPU "), \"fn_1\")" };
    uint64_t budgets[3] = { 0, EMBER_CACHE_OFF, 0 }, per_block = 0;
    char *want[2];

    (void)state;
    feed(db, 0, 8 * 60);
    compact_apart(db, T0 + 9 * HOUR_MS);
    for (int i = 0; i < 2; i++)
        want[i] = answer_in(db, q[i], T0, T0 + 8 * HOUR_MS);
    ember_close(db);
    for (int k = 0; k < 3; k++) {
        ember_open_opts o = { .sz = sizeof o,
                              .block_cache_bytes = budgets[k] };
        ember_stats st = { .sz = sizeof st };
        assert_int_equal(ember_open(dir, &o, &db), EMBER_OK);
        for (int round = 0; round < 2; round++)
            for (int i = 0; i < 2; i++) {
                char *got = answer_in(db, q[i], T0, T0 + 8 * HOUR_MS);
                assert_string_equal(got, want[i]);
                free(got);
            }
        assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
        assert_true(st.blocks >= 4);
        if (k == 0) {
            assert_int_equal(st.blocks_open, st.blocks);
            assert_true(st.blocks_open_bytes > 0);
            per_block = st.blocks_open_bytes / st.blocks_open;
            budgets[2] = per_block + per_block / 2;
        } else if (k == 1) {
            assert_int_equal(st.blocks_open, 0);
            assert_int_equal(st.blocks_open_bytes, 0);
        } else {
            assert_true(st.blocks_open >= 1);
            assert_true(st.blocks_open < st.blocks);
            assert_true(st.blocks_open_bytes <= budgets[2]);
        }
        ember_close(db);
    }
    free(want[0]);
    free(want[1]);
    tu_rmdir(dir);
}

/* The catalog's records of version 1 (72 bytes, no table sizes), as
** databases compacted before version 2 hold them. */
static int v1_collect(void *ctx, const em_catalog_rec *rec)
{
    em_catalog_rec **v = ctx;
    size_t n = 0;

    while ((*v)[n].id != 0)
        n++;
    (*v)[n] = *rec;
    return EMBER_OK;
}

static int v1_put(em_wtxn *w, void *ctx)
{
    const em_catalog_rec *v = ctx;
    int rc = EMBER_OK;

    for (size_t i = 0; v[i].id != 0 && rc == EMBER_OK; i++) {
        uint8_t key[8], val[72] = { 1, (uint8_t)v[i].level };
        MDB_val k = { sizeof key, key };
        for (int b = 0; b < 8; b++)
            key[b] = (uint8_t)(v[i].id >> (56 - 8 * b));
        em_put_le32(val + 4, v[i].footer_crc);
        em_put_le64(val + 8, v[i].file_size);
        em_put_le64(val + 16, (uint64_t)v[i].min_time);
        em_put_le64(val + 24, (uint64_t)v[i].max_time);
        em_put_le64(val + 32, (uint64_t)v[i].resolution_ms);
        em_put_le64(val + 40, v[i].nprofiles);
        em_put_le64(val + 48, v[i].nsamples);
        em_put_le32(val + 56, v[i].nseries);
        em_put_le32(val + 60, v[i].nnodes);
        em_put_le64(val + 64, v[i].made_from);
        rc = em_lmdb(em_val_put(w->txn, w->db, EM_D_BLOCK, &k, val,
                                sizeof val, 0), "v1 record");
    }
    return rc;
}

/* How many of DB's catalog records carry table sizes (version 2). */
static size_t sized_records(ember_db *db, size_t *n)
{
    em_catalog_rec v[64] = { 0 }, *p = v;
    size_t k = 0;
    em_rtxn r;

    assert_int_equal(em_rtxn_begin_head(db, &r), EMBER_OK);
    assert_int_equal(em_catalog_walk(r.txn, db, v1_collect, &p), EMBER_OK);
    em_rtxn_end(&r);
    for (*n = 0; v[*n].id != 0; (*n)++)
        k += v[*n].sized;
    return k;
}

/* A database whose catalog holds version 1 records answers as before
** (its blocks opened when a snapshot begins), and the next compaction
** rewrites them as version 2 without changing an answer. */
static void test_catalog_v1(void **state)
{
    char *dir = tu_tmpdir("compact_cat1");
    ember_db *db = tu_open(dir, 0);
    em_catalog_rec v[64] = { 0 }, *p = v;
    em_rtxn r;
    char *a, *b, *c;
    size_t n, k;

    (void)state;
    feed(db, 0, 6 * 60);
    compact_apart(db, T0 + 8 * HOUR_MS);
    a = answers(db);
    k = sized_records(db, &n);
    assert_int_equal(k, n);
    assert_true(n >= 2 && n < 64);
    assert_int_equal(em_rtxn_begin_head(db, &r), EMBER_OK);
    assert_int_equal(em_catalog_walk(r.txn, db, v1_collect, &p), EMBER_OK);
    em_rtxn_end(&r);
    assert_int_equal(em_write_run(db, v1_put, v), EMBER_OK);
    ember_close(db);
    db = tu_open(dir, 0);
    assert_int_equal(sized_records(db, &n), 0);
    b = answers(db);
    assert_string_equal(a, b);
    assert_int_equal(tu_verify(db), 0);
    compact_apart(db, T0 + 8 * HOUR_MS);
    k = sized_records(db, &n);
    assert_int_equal(k, n);
    c = answers(db);
    assert_string_equal(a, c);
    assert_int_equal(tu_verify(db), 0);
    free(a);
    free(b);
    free(c);
    ember_close(db);
    tu_rmdir(dir);
}

/* Downsampled copies answer merges and stepped totals as the stored
** profiles do at bucket boundaries; retention drops by resolution and by
** rule, in whole blocks. */
static void test_downsample(void **state)
{
    static const ember_resolution res[3] = {
        { 0, 36 * HOUR_MS }, { MIN_MS * 10, 0 }, { HOUR_MS, 0 } };
    static const ember_retention keep[2] = {
        { "memory:*", NULL, 0, 40 * HOUR_MS }, { NULL, NULL, 0, 0 } };
    char *da = tu_tmpdir("down_a"), *dbd = tu_tmpdir("down_b");
    ember_db *a = tu_open(da, 0), *b = tu_open(dbd, 0);
    ember_compact_opts o = { .sz = sizeof o, .now_ms = T0 + 50 * HOUR_MS,
                             .head_ms = HOUR_MS, .block_ms = 2 * HOUR_MS,
                             .merge_ms = 24 * HOUR_MS, .resolutions = res,
                             .nresolutions = 3 };
    ember_compact_report rep = { .sz = sizeof rep };
    char *x, *y;
    tu_out oa, ob;

    (void)state;
    feed(a, 0, 72 * 60);            /* three days, a profile a minute */
    feed(b, 0, 72 * 60);
    assert_int_equal(ember_compact(b, &o, &rep), EMBER_OK);
    assert_int_equal(tu_verify(b), 0);
    /* whole hours: the hourly copies stand in, the sums agree */
    for (int k = 0; k < 2; k++) {
        tu_out *t = k ? &ob : &oa;
        ember_db *d = k ? b : a;
        tu_out_open(t);
        answer(d, "merge(" CPU "[20h] @ 1732194000)", "collapsed", 0, t->f);
        answer(d, "merge(" CPU "[3h] @ 1732201234)", "collapsed", 0, t->f);
        answer(d, "total(" CPU "[30h] @ 1732230000)", "csv", HOUR_MS, t->f);
        answer(d, "total(" CPU "[5h] @ 1732230000)", "csv", 30 * MIN_MS,
               t->f);
        tu_out_close(t);
    }
    if (strcmp(oa.text, ob.text) != 0)
        fail_msg("downsampled answers differ:\n%s\n---\n%s", oa.text,
                 ob.text);
    free(oa.text);
    free(ob.text);
    /* two days on: the stored profiles of the first day and its memory
    ** profiles go; the copies still answer the hours */
    o.now_ms = T0 + 74 * HOUR_MS;
    o.retention = keep;
    o.nretention = 2;
    assert_int_equal(ember_compact(b, &o, &rep), EMBER_OK);
    assert_true(rep.blocks_removed > 0);
    assert_int_equal(tu_verify(b), 0);
    tu_out_open(&oa);
    tu_out_open(&ob);
    answer(a, "merge(" CPU "[12h] @ 1732190399)", "collapsed", 0, oa.f);
    answer(b, "merge(" CPU "[12h] @ 1732190399)", "collapsed", 0, ob.f);
    answer(b, "merge(" MEM "[12h] @ 1732190399)", "collapsed", 0, ob.f);
    tu_out_close(&oa);
    tu_out_close(&ob);
    x = oa.text;
    y = ob.text;
    assert_memory_equal(x, y, strlen(x));   /* CPU: the hours agree */
    assert_null(strstr(y + strlen(x), ";"));    /* memory: gone */
    free(x);
    free(y);
    ember_close(a);
    ember_close(b);
    tu_rmdir(da);
    tu_rmdir(dbd);
}

/* ---- concurrency ---------------------------------------------------------- */

typedef struct conc {
    ember_db *db;
    const char *want;               /* the answer over the settled range */
    volatile bool stop;
    int queries, bad, feed_rc;
    char *first_bad;
} conc;

static char *settled_answer(ember_db *db)
{
    tu_out o;

    tu_out_open(&o);
    answer(db, "merge(" CPU "[3h] @ 1732180800)", "collapsed", 0, o.f);
    answer(db, "total(" CPU "[3h] @ 1732180800)", "csv", 30 * MIN_MS,
           o.f);
    tu_out_close(&o);
    return o.text;
}

static void *querier(void *arg)
{
    conc *c = arg;

    while (!c->stop) {
        char *got = settled_answer(c->db);
        c->queries++;
        if (strcmp(got, c->want) != 0) {
            if (c->bad++ == 0)
                c->first_bad = got;
            else
                free(got);
            continue;
        }
        free(got);
    }
    return NULL;
}

static void *appender(void *arg)
{
    conc *c = arg;

    for (uint32_t m = 400; !c->stop && m < 4000 && c->feed_rc == 0; m++)
        c->feed_rc = feed_rc(c->db, m, m + 1);  /* after the settled range */
    return NULL;
}

static void test_concurrent(void **state)
{
    char *dir = tu_tmpdir("compact_conc");
    conc c = { .db = NULL };
    pthread_t q, a;

    (void)state;
    c.db = tu_open(dir, 0);
    feed(c.db, 0, 400);
    c.want = settled_answer(c.db);
    assert_int_equal(pthread_create(&q, NULL, querier, &c), 0);
    assert_int_equal(pthread_create(&a, NULL, appender, &c), 0);
    for (int i = 0; i < 6; i++)
        compact_at(c.db, T0 + (int64_t)(200 + 40 * i) * MIN_MS, HOUR_MS,
                   NULL);
    c.stop = true;
    pthread_join(q, NULL);
    pthread_join(a, NULL);
    if (c.bad > 0)
        fail_msg("%d of %d answers differed; first:\n%s\nwanted:\n%s",
                 c.bad, c.queries, c.first_bad, c.want);
    assert_true(c.queries > 0);
    assert_int_equal(c.feed_rc, EMBER_OK);
    assert_int_equal(tu_verify(c.db), 0);
    free((char *)c.want);
    ember_close(c.db);
    tu_rmdir(dir);
}

/* ---- kill -9 during compaction ---------------------------------------------- */

#define KSTEP_MS 10000LL

/* Batch N: one CPU profile at T0 + N * 10 s, service svc<N%3>, valued
** N + 1 on a stack interned in the same transaction, leaf "k<N%50>". */
static int kill_batch(ember_db *db, uint32_t n)
{
    char name[16], svc[8];
    ember_function f = { .name = name };
    ember_line line = { 0, 1 };
    ember_location loc = { 0, 0x1000 + n % 50, &line, 1 };
    ember_label l = { "service", svc };
    ember_sample s = { 0, (int64_t)n + 1 };
    ember_profile p;
    uint32_t lid;
    ember_txn *x;
    int rc;

    snprintf(name, sizeof name, "k%u", n % 50);
    snprintf(svc, sizeof svc, "svc%u", n % 3);
    p = tu_profile(CPU, &l, 1, T0 + (int64_t)n * KSTEP_MS, &s, 1);
    if ((rc = ember_txn_begin(db, &x)) != EMBER_OK)
        return rc;
    rc = ember_intern_function(x, &f, &line.function);
    if (rc == EMBER_OK)
        rc = ember_intern_location(x, &loc, &lid);
    if (rc == EMBER_OK)
        rc = ember_intern_stack(x, &lid, 1, &s.stack);
    if (rc == EMBER_OK)
        rc = ember_txn_append(x, &p);
    if (rc != EMBER_OK) {
        ember_txn_abort(x);
        return rc;
    }
    return ember_txn_commit(x);
}

static void kill_child(const char *dir, uint32_t first, int fd)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE,
                          .map_size = 1u << 20, .chunk_max_profiles = 8 };
    ember_db *db = NULL;

    if (ember_open(dir, &o, &db) != EMBER_OK)
        _exit(2);
    for (uint32_t n = first;; n++) {
        if (kill_batch(db, n) != EMBER_OK) {
            fprintf(stderr, "child: batch %u: %s\n", n, ember_errmsg(db));
            _exit(3);
        }
        if (write(fd, &n, sizeof n) != (ssize_t)sizeof n)
            _exit(4);
        if (n % 7 == 6) {           /* the cut trails the newest by 2 min */
            static const ember_resolution res[2] = { { 0, 0 },
                                                     { MIN_MS, 0 } };
            ember_compact_opts co = { .sz = sizeof co,
                                      .now_ms = T0 + (int64_t)n * KSTEP_MS,
                                      .head_ms = 2 * MIN_MS,
                                      .block_ms = 5 * MIN_MS,
                                      .merge_ms = 15 * MIN_MS,
                                      .resolutions = res,
                                      .nresolutions = 2 };
            if (ember_compact(db, &co, NULL) != EMBER_OK) {
                fprintf(stderr, "child: compact: %s\n", ember_errmsg(db));
                _exit(5);
            }
        }
    }
}

/* Checks every batch below ACKED is there once with its value, ACKED
** maybe, none above; returns one past the highest there. */
static uint32_t kill_check(const char *dir, uint32_t acked)
{
    ember_db *db = tu_open(dir, 1);
    ember_totals *t = NULL;
    uint8_t *have = calloc(acked + 2, 1);
    uint32_t max = 0;

    assert_non_null(have);
    assert_int_equal(tu_verify(db), 0);
    assert_int_equal(ember_totals_get(db, NULL, &t), EMBER_OK);
    for (size_t i = 0; i < ember_totals_count(t); i++) {
        const int64_t *ts, *vs;
        size_t np;
        ember_totals_series(t, i, NULL, &ts, &vs, &np);
        for (size_t j = 0; j < np; j++) {
            uint32_t n = (uint32_t)((ts[j] - T0) / KSTEP_MS);
            if (n > acked)
                fail_msg("batch %u there, the child never began it", n);
            if (have[n]++)
                fail_msg("batch %u there twice", n);
            if (vs[j] != (int64_t)n + 1)
                fail_msg("batch %u: total %lld", n, (long long)vs[j]);
            max = n + 1 > max ? n + 1 : max;
        }
    }
    for (uint32_t n = 0; n < acked; n++)
        if (!have[n])
            fail_msg("acknowledged batch %u lost", n);
    ember_totals_free(t);
    ember_close(db);
    free(have);
    return max > acked ? max : acked;
}

static void test_kill(void **state)
{
    const char *env = getenv("EMBER_TEST_KILL_ROUNDS");
    int rounds = env != NULL ? atoi(env) : 200;
    char *dir = tu_tmpdir("compact_kill");
    uint32_t next = 0;
    unsigned seed = 15;

    (void)state;
    for (int r = 0; r < rounds; r++) {
        int fds[2];
        pid_t pid;
        uint32_t n, acked = next;
        struct timespec ts = { 0, (long)(rand_r(&seed) % 40) * 1000000L };
        assert_int_equal(pipe(fds), 0);
        if ((pid = fork()) == 0) {
            close(fds[0]);
            kill_child(dir, next, fds[1]);
        }
        close(fds[1]);
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        while (read(fds[0], &n, sizeof n) == (ssize_t)sizeof n)
            acked = n + 1;
        close(fds[0]);
        next = kill_check(dir, acked);
    }
    print_message("%d rounds, %u batches\n", rounds, next);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_answers),
        cmocka_unit_test(test_stale_ids),
        cmocka_unit_test(test_result_outlives),
        cmocka_unit_test(test_leftovers),
        cmocka_unit_test(test_downsample),
        cmocka_unit_test(test_zstd_level),
        cmocka_unit_test(test_lazy_open),
        cmocka_unit_test(test_block_budget),
        cmocka_unit_test(test_catalog_v1),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_kill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
