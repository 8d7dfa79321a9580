/*
** tests/unit/test_spool.c: the pusher's on-disk spool (client/spool.c):
** windows read back oldest first as written; the bound (the oldest
** dropped and counted, never the window being sent, a window larger than
** the bound refused); a restart (windows, cursors and the bound kept, tmp
** files deleted); damaged files of every kind deleted and counted, never
** read past; each failure path (bad arguments, an unusable directory,
** every allocation failing in turn). And the pusher over it without a
** server: bad URLs and options, windows kept while nothing answers; and an
** agent's profile set pushed (em_push_pset), read back from the spool as
** the requests a server would get: targets and pprof bodies.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ember.h"
#include "engine/engine.h"
#include "proto/profile.pb-c.h"
#include "client/push.h"
#include "client/spool.h"
#include "tests/unit/common/testutil.h"

/* A window of N requests "t<k>" with bodies of BODY bytes of 'a' + k. */
static uint64_t put_window(em_spool *s, size_t n, size_t body, int want)
{
    em_spool_req r[8];
    char t[8][24];
    char *b[8];
    uint64_t dropped = 99;

    assert_true(n <= 8);
    for (size_t k = 0; k < n; k++) {
        snprintf(t[k], sizeof t[k], "t%zu", k);
        b[k] = malloc(body + 1);
        memset(b[k], 'a' + (int)k, body);
        r[k] = (em_spool_req){ t[k], strlen(t[k]), b[k], body };
    }
    assert_int_equal(em_spool_put(s, r, n, &dropped), want);
    for (size_t k = 0; k < n; k++)
        free(b[k]);
    return dropped;
}

/* The size of a window of N requests with bodies of BODY bytes. */
static uint64_t win_size(size_t n, size_t body)
{
    return EM_SPOOL_HEAD + n * (8 + 2 + body);
}

static void check_window(const em_spool_win *w, size_t n, size_t body)
{
    assert_int_equal(w->count, n);
    for (size_t k = 0; k < n; k++) {
        char t[24];
        snprintf(t, sizeof t, "t%zu", k);
        assert_int_equal(w->reqs[k].tlen, strlen(t));
        assert_memory_equal(w->reqs[k].target, t, strlen(t));
        assert_int_equal(w->reqs[k].blen, body);
        for (size_t i = 0; i < body; i++)
            assert_int_equal(((const char *)w->reqs[k].body)[i], 'a' + (int)k);
    }
}

static void test_put_read(void **state)
{
    char *dir = tu_tmpdir("spool");
    em_spool *s;
    em_spool_win w;
    em_spool_stats st;

    (void)state;
    assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_DONE);
    assert_int_equal(put_window(s, 2, 10, EMBER_OK), 0);
    assert_int_equal(put_window(s, 3, 0, EMBER_OK), 0);
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 2);
    assert_int_equal(st.bytes, win_size(2, 10) + win_size(3, 0));
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    check_window(&w, 2, 10);
    assert_int_equal(w.sent, 0);
    assert_int_equal(em_spool_mark(s, &w, 1), EMBER_OK);
    assert_int_equal(em_spool_done(s, &w), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    check_window(&w, 3, 0);
    assert_int_equal(em_spool_done(s, &w), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_DONE);
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.dropped_windows + st.damaged_windows, 0);
    em_spool_close(s);
    tu_rmdir(dir);
}

/* Room for three windows of one 100-byte request: the fourth drops the
** oldest; a window over the whole bound is refused and counted. */
static void test_bound(void **state)
{
    char *dir = tu_tmpdir("spool");
    uint64_t one = win_size(1, 100);
    em_spool *s;
    em_spool_win w;
    em_spool_stats st;

    (void)state;
    assert_int_equal(em_spool_open(dir, 3 * one + 10, &s), EMBER_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(put_window(s, 1, 100, EMBER_OK), 0);
    assert_int_equal(put_window(s, 2, 100, EMBER_OK), 2);  /* two oldest */
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 2);
    assert_int_equal(st.dropped_windows, 2);
    assert_int_equal(st.dropped_bytes, 2 * one);
    assert_int_equal(put_window(s, 8, 100, EMBER_ELIMIT), 1);
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 2);            /* nothing else dropped */
    assert_int_equal(st.dropped_windows, 3);
    assert_int_equal(st.dropped_bytes, 2 * one + win_size(8, 100));
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    check_window(&w, 1, 100);                   /* the third put */
    em_spool_win_free(&w);
    em_spool_close(s);
    tu_rmdir(dir);
}

/* The window being sent is never dropped to make room. */
static void test_busy_kept(void **state)
{
    char *dir = tu_tmpdir("spool");
    uint64_t one = win_size(1, 100);
    em_spool *s;
    em_spool_win w, w2;
    em_spool_stats st;

    (void)state;
    assert_int_equal(em_spool_open(dir, 2 * one, &s), EMBER_OK);
    assert_int_equal(put_window(s, 1, 100, EMBER_OK), 0);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);     /* busy */
    assert_int_equal(put_window(s, 1, 100, EMBER_OK), 0);
    assert_int_equal(put_window(s, 1, 100, EMBER_OK), 1);   /* the 2nd */
    /* only the busy one left to drop: the new window does not fit */
    assert_int_equal(put_window(s, 1, 150, EMBER_ELIMIT), 1);
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 2);
    assert_int_equal(st.dropped_windows, 2);
    assert_int_equal(em_spool_done(s, &w), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w2), EMBER_OK);
    check_window(&w2, 1, 100);
    assert_int_equal(em_spool_done(s, &w2), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w2), EMBER_DONE);
    em_spool_close(s);
    tu_rmdir(dir);
}

static void touch(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_non_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *dir, const char *name)
{
    char path[512];

    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* A spool left by a previous run: its windows in order, the cursor of the
** one partly sent, tmp files gone, other files untouched, new windows
** after the old, and a smaller bound dropping the oldest. */
static void test_restart(void **state)
{
    char *dir = tu_tmpdir("spool");
    uint64_t one = win_size(2, 50);
    em_spool *s;
    em_spool_win w;
    em_spool_stats st;

    (void)state;
    assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
    for (int i = 0; i < 3; i++)
        put_window(s, 2, 50, EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    assert_int_equal(em_spool_mark(s, &w, 1), EMBER_OK);
    em_spool_win_free(&w);
    em_spool_close(s);
    touch(dir, "0000000000000009.tmp", "half a window");
    touch(dir, "notes.txt", "not ours");

    assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
    assert_false(exists(dir, "0000000000000009.tmp"));
    assert_true(exists(dir, "notes.txt"));
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 3);
    assert_int_equal(st.bytes, 3 * one);
    put_window(s, 1, 7, EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    assert_int_equal(w.sent, 1);
    check_window(&w, 2, 50);
    em_spool_win_free(&w);
    em_spool_close(s);

    assert_int_equal(em_spool_open(dir, 2 * one, &s), EMBER_OK);
    em_spool_stats_get(s, &st);
    assert_int_equal(st.windows, 2);            /* 2 oldest of 4 dropped */
    assert_int_equal(st.dropped_windows, 2);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    assert_int_equal(w.sent, 0);
    check_window(&w, 2, 50);
    assert_int_equal(em_spool_done(s, &w), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    check_window(&w, 1, 7);
    assert_int_equal(em_spool_done(s, &w), EMBER_OK);
    em_spool_close(s);
    tu_rmdir(dir);
}

/* Writes BYTES as window file 1 of DIR. */
static void write_win(const char *dir, const uint8_t *bytes, size_t n)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/0000000000000001.win", dir);
    assert_non_null(f = fopen(path, "wb"));
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

/* A valid file of one request ("ab", body "xyz"), then DAMAGE applied; the
** hash is computed again when REHASH, so that only the structure fails. */
static size_t make_file(uint8_t *b, void (*damage)(uint8_t *, size_t *),
                        bool rehash)
{
    size_t n = EM_SPOOL_HEAD + 8 + 2 + 3;

    memset(b, 0, 256);
    memcpy(b, "EMSPOOL1", 8);
    em_put_le32(b + 8, 1);
    em_put_le32(b + EM_SPOOL_HEAD, 2);
    em_put_le32(b + EM_SPOOL_HEAD + 4, 3);
    memcpy(b + EM_SPOOL_HEAD + 8, "abxyz", 5);
    em_put_le64(b + 16, em_hash64(b + EM_SPOOL_HEAD, n - EM_SPOOL_HEAD, 0));
    if (damage != NULL)
        damage(b, &n);
    if (rehash)
        em_put_le64(b + 16, em_hash64(b + EM_SPOOL_HEAD,
                                      n - EM_SPOOL_HEAD, 0));
    return n;
}

static void d_magic(uint8_t *b, size_t *n) { (void)n; b[0] = 'X'; }
static void d_flip(uint8_t *b, size_t *n) { b[*n - 1] ^= 1; }
static void d_short(uint8_t *b, size_t *n) { (void)b; *n = 10; }
static void d_count0(uint8_t *b, size_t *n) { (void)n; em_put_le32(b + 8, 0); }
static void d_count_huge(uint8_t *b, size_t *n)
{
    (void)n;
    em_put_le32(b + 8, 0xffffffffu);
}
static void d_sent(uint8_t *b, size_t *n) { (void)n; em_put_le32(b + 12, 2); }
static void d_count2(uint8_t *b, size_t *n) { (void)n; em_put_le32(b + 8, 2); }
static void d_blen(uint8_t *b, size_t *n)
{
    (void)n;
    em_put_le32(b + EM_SPOOL_HEAD + 4, 0xfffffff0u);
}
static void d_tlen(uint8_t *b, size_t *n)
{
    (void)n;
    em_put_le32(b + EM_SPOOL_HEAD, EM_SPOOL_MAX_TARGET + 1);
}
static void d_tail(uint8_t *b, size_t *n) { b[(*n)++] = 0; }
static void d_cut(uint8_t *b, size_t *n) { (void)b; *n = EM_SPOOL_HEAD + 5; }

/* Each damaged file: ECORRUPT, deleted, counted; the next window is read. */
static void test_damaged(void **state)
{
    static const struct {
        void (*damage)(uint8_t *, size_t *);
        bool rehash;
    } cases[] = {
        { d_magic, false }, { d_flip, false }, { d_short, false },
        { d_count0, false }, { d_count_huge, false }, { d_sent, false },
        { d_count2, true }, { d_blen, true }, { d_tlen, true },
        { d_tail, true }, { d_cut, true },
    };
    uint8_t b[256];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = tu_tmpdir("spool");
        em_spool *s;
        em_spool_win w;
        em_spool_stats st;
        size_t n = make_file(b, cases[i].damage, cases[i].rehash);

        write_win(dir, b, n);
        assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
        put_window(s, 1, 4, EMBER_OK);          /* window 2 */
        if (em_spool_oldest(s, &w) != EMBER_ECORRUPT)
            fail_msg("case %zu: not refused", i);
        assert_non_null(strstr(em_errmsg(), "spool"));
        assert_false(exists(dir, "0000000000000001.win"));
        em_spool_stats_get(s, &st);
        assert_int_equal(st.damaged_windows, 1);
        assert_int_equal(st.windows, 1);
        assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
        check_window(&w, 1, 4);
        assert_int_equal(em_spool_done(s, &w), EMBER_OK);
        em_spool_close(s);
        tu_rmdir(dir);
    }
    /* the undamaged file reads */
    {
        char *dir = tu_tmpdir("spool");
        em_spool *s;
        em_spool_win w;
        write_win(dir, b, make_file(b, NULL, false));
        assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
        assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
        assert_int_equal(w.reqs[0].blen, 3);
        assert_memory_equal(w.reqs[0].body, "xyz", 3);
        em_spool_win_free(&w);
        em_spool_close(s);
        tu_rmdir(dir);
    }
}

static void test_errors(void **state)
{
    char *dir = tu_tmpdir("spool");
    char path[512], *big;
    em_spool *s = NULL;
    em_spool_req r = { "t", 1, "b", 1 };

    (void)state;
    assert_int_equal(em_spool_open("", 100, &s), EMBER_EINVAL);
    assert_null(s);
    snprintf(path, sizeof path, "%s/file", dir);
    touch(dir, "file", "x");
    assert_int_equal(em_spool_open(path, 100, &s), EMBER_EIO);
    snprintf(path, sizeof path, "%s/file/below", dir);
    assert_int_equal(em_spool_open(path, 100, &s), EMBER_EIO);
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    assert_int_equal(em_spool_open(path, 1000, &s), EMBER_OK);  /* mkdir -p */
    assert_int_equal(em_spool_put(s, &r, 0, NULL), EMBER_EINVAL);
    big = calloc(1, EM_SPOOL_MAX_TARGET + 2);
    r.target = big;
    r.tlen = EM_SPOOL_MAX_TARGET + 1;
    assert_int_equal(em_spool_put(s, &r, 1, NULL), EMBER_ELIMIT);
    free(big);
    /* a spool directory that cannot be written */
    if (geteuid() != 0) {
        chmod(path, 0500);
        r = (em_spool_req){ "t", 1, "b", 1 };
        assert_int_equal(em_spool_put(s, &r, 1, NULL), EMBER_EIO);
        chmod(path, 0700);
    }
    em_spool_close(s);
    em_spool_close(NULL);
    tu_rmdir(dir);
}

/* Every allocation of open, put, oldest and done failing in turn. */
static void test_oom(void **state)
{
    (void)state;
    for (uint64_t n = 1; n < 100; n++) {
        char *dir = tu_tmpdir("spool");
        em_spool *s = NULL;
        em_spool_win w;
        em_spool_req r = { "target", 6, "body", 4 };
        int rc;

        /* one window queued by a run that did not fail */
        assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
        assert_int_equal(em_spool_put(s, &r, 1, NULL), EMBER_OK);
        em_spool_close(s);
        em_alloc_fail_at(n);
        rc = em_spool_open(dir, 1 << 20, &s);
        if (rc == EMBER_OK)
            rc = em_spool_put(s, &r, 1, NULL);
        if (rc == EMBER_OK && (rc = em_spool_oldest(s, &w)) == EMBER_OK)
            rc = em_spool_done(s, &w);
        em_alloc_fail_at(0);
        em_spool_close(s);
        tu_rmdir(dir);
        if (rc == EMBER_OK)
            return;
        assert_int_equal(rc, EMBER_ENOMEM);
    }
    fail_msg("still failing after 100 allocations");
}

/* ---- the pusher without a server ----------------------------------------- */

static void test_pusher_args(void **state)
{
    char *dir = tu_tmpdir("push");
    ember_pusher_opts o = { .sz = sizeof o, .spool_dir = dir };
    ember_pusher *p = (ember_pusher *)1;

    (void)state;
    assert_int_equal(ember_pusher_open("ftp://x", &o, &p), EMBER_EINVAL);
    assert_null(p);
    assert_int_equal(ember_pusher_open("unix:", &o, &p), EMBER_EINVAL);
    assert_int_equal(ember_pusher_open(NULL, &o, &p), EMBER_EINVAL);
    o.sz = 8;
    assert_int_equal(ember_pusher_open("http://127.0.0.1:9", &o, &p),
                     EMBER_EINVAL);
    o.sz = sizeof o;
    o.spool_dir = NULL;
    assert_int_equal(ember_pusher_open("http://127.0.0.1:9", &o, &p),
                     EMBER_EINVAL);
    o.spool_dir = dir;
    o.backoff_min_ms = -1;
    assert_int_equal(ember_pusher_open("http://127.0.0.1:9", &o, &p),
                     EMBER_EINVAL);
    ember_pusher_close(NULL);
    tu_rmdir(dir);
}

static void log_count(void *ctx, const char *line)
{
    (void)line;
    (*(int *)ctx)++;
}

/* Nothing listens: the windows stay queued, retried with backoff, and a
** second pusher on the same spool finds them; a bad profile is refused. */
static void test_pusher_outage(void **state)
{
    char *dir = tu_tmpdir("push"), sock[512];
    int logs = 0;
    ember_pusher_opts o = { .sz = sizeof o, .spool_dir = dir,
                            .backoff_min_ms = 5, .backoff_max_ms = 20,
                            .log = log_count, .log_ctx = &logs };
    ember_label l[2] = { { "pod", "a,b" }, { "empty", "" } };
    ember_push_profile pr = { "app", l, 2, 1700000000000, 10000000000,
                              "pprof", 5 };
    ember_pusher_stats st = { .sz = sizeof st };
    ember_pusher *p;

    (void)state;
    snprintf(sock, sizeof sock, "unix:%s/nobody.sock", dir);
    assert_int_equal(ember_pusher_open(sock, &o, &p), EMBER_OK);
    assert_int_equal(ember_pusher_send(p, &pr, 1), EMBER_OK);
    assert_int_equal(ember_pusher_send(p, &pr, 1), EMBER_OK);
    assert_int_equal(ember_pusher_send(p, NULL, 0), EMBER_OK);
    pr.app = "";
    assert_int_equal(ember_pusher_send(p, &pr, 1), EMBER_EINVAL);
    pr.app = "app";
    l[0].name = "bad name";
    assert_int_equal(ember_pusher_send(p, &pr, 1), EMBER_EINVAL);
    /* a bounded poll for the first failed attempt, not a timing */
    for (int i = 0; i < 1000 && st.retries == 0; i++) {
        assert_int_equal(ember_pusher_flush(p, 10), EMBER_DONE);
        ember_pusher_stats_get(p, &st);
    }
    assert_int_equal(st.queued_windows, 2);
    assert_int_equal(st.sent_windows, 0);
    assert_true(st.retries >= 1);
    assert_int_equal(ember_pusher_flush(p, 60000), EMBER_DONE);  /* at once */
    ember_pusher_close(p);
    assert_int_equal(logs, 1);                  /* the outage, once */

    assert_int_equal(ember_pusher_open(sock, &o, &p), EMBER_OK);
    ember_pusher_stats_get(p, &st);
    assert_int_equal(st.queued_windows, 2);
    ember_pusher_close(p);
    tu_rmdir(dir);
}

/* ---- a profile set pushed ------------------------------------------------ */

#define PTYPE "t:samples:count:cpu:nanoseconds:delta"

/* Leaf first: leaf (inlined into main's frame), a bare address, main. */
static void pset_fill(em_pset *s)
{
    ember_mapping m = { 0x1000, 0x2000, 0, "/bin/app", "b1d" };
    ember_function fl = { "leaf", "", "app.c", 3 }, fm = { "main", "", "", 0 };
    em_pset_line ln[2];
    uint32_t map, loc[3], stack, empty, prof;
    ember_label l1[3] = { { "service_name", "svc" }, { "pid", "1" },
                          { "comm", "a,b" } };
    ember_label l2[1] = { { "pid", "2" } }, l3[1] = { { "pid", "3" } };

    assert_int_equal(em_pset_mapping(s, &m, &map), EMBER_OK);
    assert_int_equal(em_pset_function(s, &fl, &ln[0].function), EMBER_OK);
    assert_int_equal(em_pset_function(s, &fm, &ln[1].function), EMBER_OK);
    ln[0].line = 7;
    ln[1].line = 20;
    assert_int_equal(em_pset_location(s, map + 1, 0x1010, ln, 2, &loc[0]),
                     EMBER_OK);
    assert_int_equal(em_pset_location(s, 0, 0x20, NULL, 0, &loc[1]), EMBER_OK);
    assert_int_equal(em_pset_location(s, map + 1, 0x1100, &ln[1], 1,
                                      &loc[2]), EMBER_OK);
    assert_int_equal(em_pset_stack(s, loc, 3, &stack), EMBER_OK);
    assert_int_equal(em_pset_stack(s, loc, 0, &empty), EMBER_OK);
    assert_int_equal(em_pset_profile_add(s, PTYPE, l1, 3, 1700000000000,
                                         10000000000, 1000, &prof), EMBER_OK);
    assert_int_equal(em_pset_sample(s, prof, stack, 5), EMBER_OK);
    assert_int_equal(em_pset_profile_add(s, PTYPE, l2, 1, 1700000000000,
                                         10000000000, 1000, &prof), EMBER_OK);
    assert_int_equal(em_pset_sample(s, prof, empty, 0), EMBER_OK);
    assert_int_equal(em_pset_profile_add(s, PTYPE, l3, 1, 1700000000000,
                                         10000000000, 1000, &prof), EMBER_OK);
    assert_int_equal(em_pset_sample(s, prof, empty, 7), EMBER_OK);
}

/* The pprof of request R, gunzipped and unpacked. */
static Perftools__Profiles__Profile *body_profile(const em_spool_req *r)
{
    static uint8_t out[1 << 16];
    z_stream z;

    memset(&z, 0, sizeof z);
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)r->body;
    z.avail_in = (uInt)r->blen;
    z.next_out = out;
    z.avail_out = sizeof out;
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    inflateEnd(&z);
    return perftools__profiles__profile__unpack(NULL, z.total_out, out);
}

static const char *pstr(const Perftools__Profiles__Profile *p, int64_t i)
{
    assert_true(i >= 0 && (size_t)i < p->n_string_table);
    return p->string_table[i];
}

/* The first request: stack leaf, bare address, main, value 5. */
static void check_first(const em_spool_win *w)
{
    static const char want[] = "ingest?name=svc%7Bcomm%3Da_b%2Cpid%3D1%7D"
                               "&from=1700000000&until=1700000010"
                               "&format=pprof&spyName=ember";
    Perftools__Profiles__Profile *p = body_profile(&w->reqs[0]);
    const Perftools__Profiles__Location *bare;

    assert_int_equal(w->reqs[0].tlen, strlen(want));
    assert_memory_equal(w->reqs[0].target, want, strlen(want));
    assert_non_null(p);
    assert_string_equal(pstr(p, p->sample_type[0]->type), "samples");
    assert_string_equal(pstr(p, p->period_type->unit), "nanoseconds");
    assert_int_equal(p->period, 1000);
    assert_int_equal(p->time_nanos, 1700000000000000000LL);
    assert_int_equal(p->n_sample, 1);
    assert_int_equal(p->sample[0]->value[0], 5);
    assert_int_equal(p->sample[0]->n_location_id, 3);
    assert_int_equal(p->n_location, 3);
    assert_int_equal(p->location[0]->n_line, 2);
    assert_string_equal(pstr(p, p->function[p->location[0]->line[0]
                                            ->function_id - 1]->name), "leaf");
    bare = p->location[p->sample[0]->location_id[1] - 1];
    assert_int_equal(bare->n_line, 0);
    assert_int_equal(bare->mapping_id, 0);
    assert_int_equal(bare->address, 0x20);
    assert_int_equal(p->n_mapping, 1);
    assert_string_equal(pstr(p, p->mapping[0]->filename), "/bin/app");
    perftools__profiles__profile__free_unpacked(p, NULL);
}

/* Profiles of the set to the spool: the all-zero one left out, the empty
** stack kept, the labels in the name. */
static void test_push_pset(void **state)
{
    char *dir = tu_tmpdir("push"), url[512];
    ember_pusher_opts o = { .sz = sizeof o, .spool_dir = dir,
                            .backoff_min_ms = 60000 };
    em_pset set = { 0 };
    em_push_counts c;
    ember_pusher *p;
    em_spool *s;
    em_spool_win w;
    Perftools__Profiles__Profile *pp;

    (void)state;
    pset_fill(&set);
    snprintf(url, sizeof url, "unix:%s/nobody.sock", dir);
    assert_int_equal(ember_pusher_open(url, &o, &p), EMBER_OK);
    assert_int_equal(em_push_pset(p, &set, "app", &c), EMBER_OK);
    assert_int_equal(c.profiles, 2);
    ember_pusher_close(p);
    assert_int_equal(em_spool_open(dir, 1 << 20, &s), EMBER_OK);
    assert_int_equal(em_spool_oldest(s, &w), EMBER_OK);
    assert_int_equal(w.count, 2);
    assert_int_equal(c.bytes, w.reqs[0].blen + w.reqs[1].blen);
    check_first(&w);
    assert_non_null(strstr(w.reqs[1].target, "name=app%7Bpid%3D3%7D&"));
    pp = body_profile(&w.reqs[1]);
    assert_int_equal(pp->n_sample, 1);
    assert_int_equal(pp->sample[0]->n_location_id, 0);
    assert_int_equal(pp->sample[0]->value[0], 7);
    perftools__profiles__profile__free_unpacked(pp, NULL);
    em_spool_win_free(&w);
    em_spool_close(s);
    em_pset_free(&set);
    tu_rmdir(dir);
}

/* Every allocation of em_push_pset failing in turn: ENOMEM, nothing
** queued, nothing leaked. */
static void test_push_pset_oom(void **state)
{
    char *dir = tu_tmpdir("push"), url[512];
    ember_pusher_opts o = { .sz = sizeof o, .spool_dir = dir,
                            .backoff_min_ms = 60000 };
    em_pset set = { 0 };
    ember_pusher_stats st = { .sz = sizeof st };
    ember_pusher *p;
    int rc = EMBER_ENOMEM;

    (void)state;
    pset_fill(&set);
    snprintf(url, sizeof url, "unix:%s/nobody.sock", dir);
    assert_int_equal(ember_pusher_open(url, &o, &p), EMBER_OK);
    for (uint64_t n = 1; n < 200 && rc != EMBER_OK; n++) {
        em_alloc_fail_at(n);
        rc = em_push_pset(p, &set, "app", NULL);
        em_alloc_fail_at(0);
        ember_pusher_stats_get(p, &st);
        if (rc != EMBER_OK) {
            assert_int_equal(rc, EMBER_ENOMEM);
            assert_int_equal(st.queued_windows, 0);
        }
    }
    assert_int_equal(rc, EMBER_OK);
    assert_int_equal(st.queued_windows, 1);
    ember_pusher_close(p);
    em_pset_free(&set);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_read),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_busy_kept),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_damaged),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_pusher_args),
        cmocka_unit_test(test_pusher_outage),
        cmocka_unit_test(test_push_pset),
        cmocka_unit_test(test_push_pset_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
