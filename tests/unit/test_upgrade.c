/*
** tests/unit/test_upgrade.c: format 1 databases (issue 15, point 5). The
** fixture tests/fixtures/v1db/data.mdb was written by Ember before format
** 2 (its README says how), with the answers of a few queries recorded
** beside it. A copy of it must:
**  - opened read-only, read as format 1 (no checksums), give the recorded
**    answers, pass verify, and stay the same byte for byte;
**  - opened for writing, be upgraded in place to format 2 and give the
**    same answers, before and after reopening, pass verify and take new
**    profiles;
**  - when the upgrade fails half way (an allocation of its write txn, or
**    the process killed at a random moment), still be a format 1 database
**    with the same answers, or the finished format 2 one: LMDB rolls the
**    txn back.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "engine/engine.h"
#include "tests/unit/common/testutil.h"

#define FIXTURE "tests/fixtures/v1db"
#define KILL_ROUNDS 24

/* The recorded queries: the file holding the answer, the format, the
** query (a file may hold several answers, one after the other). */
static const struct {
    const char *file, *format, *query;
} queries[] = {
    { "top.txt", "top", "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{}" },
    { "collapsed.txt", "collapsed",
      "collapsed:samples:count:samples:count:delta{service=\"demo\"}" },
    { "totals.csv", "csv",
      "total(process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{})" },
    { "totals.csv", "csv",
      "total(collapsed:samples:count:samples:count:delta{})" },
};

/* A fresh copy of the fixture's data.mdb in a new directory. */
static char *fixture_copy(void)
{
    char *dir = tu_tmpdir("upgrade"), path[512];
    size_t n;
    char *bytes = tu_read_file(FIXTURE "/data.mdb", &n);
    FILE *f;

    assert_non_null(bytes);
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(bytes);
    return dir;
}

static ember_db *open_as(const char *dir, bool rdonly)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE,
                          .flags = rdonly ? EMBER_OPEN_RDONLY : 0 };
    ember_db *db = NULL;
    int rc = ember_open(dir, &o, &db);

    if (rc != EMBER_OK)
        fail_msg("open %s: %s", dir, ember_errmsg(db));
    return db;
}

static unsigned format_of(ember_db *db)
{
    ember_stats st = { .sz = sizeof st };

    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    return st.format_version;
}

/* The answers of every query of FILE, rendered as ember query prints them,
** must be that file's recorded bytes. */
static void answers_match(ember_db *db, const char *file)
{
    char path[256], *want;
    size_t wlen, at = 0;

    snprintf(path, sizeof path, FIXTURE "/%s", file);
    want = tu_read_file(path, &wlen);
    assert_non_null(want);
    for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
        ember_render_opts ro = { .sz = sizeof ro };
        ember_result *r = NULL;
        char *out = NULL;
        size_t len = 0;
        if (strcmp(queries[i].file, file) != 0)
            continue;
        if (ember_query(db, queries[i].query, NULL, &r) != EMBER_OK)
            fail_msg("%s: %s", queries[i].query, ember_errmsg(db));
        assert_int_equal(ember_result_render(db, r, queries[i].format, &ro,
                                             &out, &len), EMBER_OK);
        if (len > wlen - at || memcmp(want + at, out, len) != 0)
            fail_msg("%s answers differently from %s:\n%s", queries[i].query,
                     path, out);
        at += len;
        ember_free(out);
        ember_result_free(r);
    }
    assert_int_equal(at, wlen);
    free(want);
}

/* Every recorded answer, and verify finds nothing. */
static void all_match(ember_db *db)
{
    answers_match(db, "top.txt");
    answers_match(db, "collapsed.txt");
    answers_match(db, "totals.csv");
    assert_int_equal(tu_verify(db), 0);
}

static void test_read_only_v1(void **state)
{
    char *dir = fixture_copy(), path[512];
    size_t n1, n2;
    char *before, *after;
    ember_db *db;

    (void)state;
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    before = tu_read_file(path, &n1);
    db = open_as(dir, true);
    assert_int_equal(format_of(db), 1);
    all_match(db);
    ember_close(db);
    after = tu_read_file(path, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(before, after, n1);
    free(before);
    free(after);
    tu_rmdir(dir);
}

static void test_upgrade(void **state)
{
    char *dir = fixture_copy();
    ember_sample s = { 0, 5 };
    ember_label l = { "service", "demo" };
    ember_profile p = tu_profile("collapsed:samples:count:samples:count:delta",
                                 &l, 1, 1732180000000LL, &s, 1);
    ember_db *db;

    (void)state;
    db = open_as(dir, false);
    assert_int_equal(format_of(db), 2);
    all_match(db);
    ember_close(db);
    db = open_as(dir, true);
    assert_int_equal(format_of(db), 2);
    all_match(db);
    ember_close(db);
    db = open_as(dir, false);               /* already format 2: as is */
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    assert_int_equal(ember_seal(db), EMBER_OK);
    assert_int_equal(tu_verify(db), 0);
    answers_match(db, "top.txt");
    ember_close(db);
    tu_rmdir(dir);
}

/* After an upgrade that stopped anywhere: format 1 with every answer, or
** the finished format 2 with every answer. */
static void whole_either_way(const char *dir)
{
    ember_db *db = open_as(dir, true);
    unsigned f = format_of(db);

    assert_true(f == 1 || f == 2);
    all_match(db);
    ember_close(db);
}

/* Each allocation of an open for writing failed in turn. */
static void test_upgrade_fails_cleanly(void **state)
{
    char *dir = NULL;
    int rc = EMBER_ENOMEM;

    (void)state;
    for (uint64_t n = 1; rc != EMBER_OK && n < 10000; n++) {
        ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE };
        ember_db *db = NULL;
        tu_rmdir(dir);
        dir = fixture_copy();
        em_alloc_fail_at(n);
        rc = ember_open(dir, &o, &db);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
        ember_close(db);
        whole_either_way(dir);
    }
    assert_int_equal(rc, EMBER_OK);
    tu_rmdir(dir);
}

/* Opens a copy of the fixture for writing in a child process, killed
** after DELAY_NS (never when negative); returns how long it ran, in ns. */
static int64_t open_in_child(const char *dir, int64_t delay_ns)
{
    struct timespec t0, t1, ts = { delay_ns / 1000000000,
                                   delay_ns % 1000000000 };
    int status;
    pid_t pid;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ember_open_opts o = { .sz = sizeof o };
        ember_db *db = NULL;
        _exit(ember_open(dir, &o, &db) == EMBER_OK ? 0 : 1);
    }
    if (delay_ns >= 0) {
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (delay_ns < 0)
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return (t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec;
}

/* The process opening for writing killed at moments spread over the time
** an open that upgrades takes. */
static void test_upgrade_killed(void **state)
{
    unsigned seen[3] = { 0, 0, 0 };
    char *dir = fixture_copy();
    int64_t span = open_in_child(dir, -1);

    (void)state;
    tu_rmdir(dir);
    for (int i = 0; i < KILL_ROUNDS; i++) {
        ember_db *db;
        dir = fixture_copy();
        open_in_child(dir, span * i / (KILL_ROUNDS - 4));
        db = open_as(dir, true);
        seen[format_of(db)]++;
        ember_close(db);
        whole_either_way(dir);
        tu_rmdir(dir);
    }
    fprintf(stderr, "an upgrading open takes %lld us; killed in it: %u left "
            "format 1, %u format 2\n", (long long)span / 1000, seen[1],
            seen[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_only_v1),
        cmocka_unit_test(test_upgrade),
        cmocka_unit_test(test_upgrade_fails_cleanly),
        cmocka_unit_test(test_upgrade_killed),
    };
    return cmocka_run_group_tests_name("upgrade", tests, NULL, NULL);
}
