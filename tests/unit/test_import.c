/*
** tests/unit/test_import.c: what every import shares: the profile set
** (dedup of each table, the checks the engine would make, label joining and
** sanitizing, writing through a transaction with repeats summed), gunzip
** (members, truncation, damage, the size limit that stops gzip bombs) and
** format detection.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"
#include "ingest/pset.h"
#include "common/testutil.h"

#define TYPE "process_cpu:samples:count:cpu:nanoseconds:delta"

/* ---- the profile set --------------------------------------------------------- */

static void test_pset_dedup(void **state)
{
    em_pset s = { 0 };
    ember_mapping m = { .start = 0x1000, .limit = 0x2000, .file = "/bin/a",
                        .build_id = "abc" };
    ember_function f = { .name = "main", .file = "a.c", .start_line = 3 };
    ember_function g = { .name = "main", .file = "b.c", .start_line = 3 };
    uint32_t m1, m2, f1, f2, f3, l1, l2, l3, s1, s2, s3;
    em_pset_line lines[2];
    uint32_t stack[2];

    (void)state;
    assert_int_equal(em_pset_mapping(&s, &m, &m1), EMBER_OK);
    m.file = "/bin/a";              /* same content, another pointer */
    assert_int_equal(em_pset_mapping(&s, &m, &m2), EMBER_OK);
    assert_int_equal(m1, m2);
    assert_int_equal(em_pset_function(&s, &f, &f1), EMBER_OK);
    assert_int_equal(em_pset_function(&s, &f, &f2), EMBER_OK);
    assert_int_equal(em_pset_function(&s, &g, &f3), EMBER_OK);
    assert_int_equal(f1, f2);
    assert_int_not_equal(f1, f3);
    lines[0] = (em_pset_line){ f1, 10 };
    lines[1] = (em_pset_line){ f3, 20 };
    assert_int_equal(em_pset_location(&s, m1 + 1, 0x1234, lines, 2, &l1), 0);
    assert_int_equal(em_pset_location(&s, m1 + 1, 0x1234, lines, 2, &l2), 0);
    assert_int_equal(em_pset_location(&s, m1 + 1, 0x1234, lines, 1, &l3), 0);
    assert_int_equal(l1, l2);
    assert_int_not_equal(l1, l3);
    stack[0] = l1;
    stack[1] = l3;
    assert_int_equal(em_pset_stack(&s, stack, 2, &s1), EMBER_OK);
    assert_int_equal(em_pset_stack(&s, stack, 2, &s2), EMBER_OK);
    assert_int_equal(em_pset_stack(&s, stack, 1, &s3), EMBER_OK);
    assert_int_equal(s1, s2);
    assert_int_not_equal(s1, s3);
    assert_int_equal(s.nmappings, 1);
    assert_int_equal(s.nfunctions, 2);
    assert_int_equal(s.nlocs, 2);
    assert_int_equal(s.nstacks, 2);
    assert_int_equal(s.max_depth, 2);
    /* references that do not exist */
    lines[0].function = 7;
    assert_int_equal(em_pset_location(&s, 0, 1, lines, 1, &l1), EMBER_EINVAL);
    assert_int_equal(em_pset_location(&s, 5, 1, NULL, 0, &l1), EMBER_EINVAL);
    stack[0] = 9;
    assert_int_equal(em_pset_stack(&s, stack, 1, &s1), EMBER_EINVAL);
    em_pset_free(&s);
}

static void test_pset_many(void **state)
{
    em_pset s = { 0 };
    char name[32];

    (void)state;
    /* enough entries to grow every index several times */
    for (uint32_t i = 0; i < 20000; i++) {
        ember_function f = { .name = name };
        em_pset_line line;
        uint32_t fi, li, si, again;
        snprintf(name, sizeof name, "fn%u", i % 5000);
        assert_int_equal(em_pset_function(&s, &f, &fi), EMBER_OK);
        line = (em_pset_line){ fi, (int64_t)(i % 7) };
        assert_int_equal(em_pset_location(&s, 0, i % 3, &line, 1, &li), 0);
        assert_int_equal(em_pset_stack(&s, &li, 1, &si), EMBER_OK);
        assert_int_equal(em_pset_stack(&s, &li, 1, &again), EMBER_OK);
        assert_int_equal(si, again);
    }
    assert_int_equal(s.nfunctions, 5000);
    assert_int_equal(s.nlocs, s.nstacks);
    em_pset_free(&s);
}

static void test_pset_profile_checks(void **state)
{
    em_pset s = { 0 };
    char big[402];
    ember_label ok[] = { { "zone", "b" }, { "app", "a" }, { "gone", "" } };
    ember_label bad_name[] = { { "1x", "a" } };
    ember_label twice[] = { { "a", "1" }, { "a", "2" } };
    ember_label long_value[] = { { "a", big } };
    uint32_t p;

    (void)state;
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(em_pset_profile_add(&s, TYPE, ok, 3, 1, 2, 3, &p), 0);
    assert_int_equal(s.profiles[p].nlabels, 2);    /* "" means absent */
    assert_string_equal(s.profiles[p].labels[0].name, "app");
    assert_string_equal(s.profiles[p].labels[1].name, "zone");
    assert_int_equal(em_pset_profile_find(&s, TYPE, ok, 3), (long)p);
    assert_int_equal(em_pset_profile_find(&s, TYPE, ok, 1), -1);
    assert_int_equal(em_pset_profile_add(&s, "cpu", NULL, 0, 0, 0, 0, &p),
                     EMBER_EINVAL);
    assert_int_equal(em_pset_profile_add(&s, TYPE, bad_name, 1, 0, 0, 0, &p),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(NULL), "1x"));
    assert_int_equal(em_pset_profile_add(&s, TYPE, twice, 2, 0, 0, 0, &p),
                     EMBER_EINVAL);
    assert_int_equal(em_pset_profile_add(&s, TYPE, long_value, 1, 0, 0, 0,
                                         &p), EMBER_ELIMIT);
    assert_int_equal(em_pset_sample(&s, 5, 0, 1), EMBER_EINVAL);
    em_pset_free(&s);
}

static void test_label_names(void **state)
{
    char out[EM_LABEL_NAME_BUF];
    char longname[100];

    (void)state;
    em_label_name_sanitize("http.route", 10, out);
    assert_string_equal(out, "http_route");
    em_label_name_sanitize("trace-id", 8, out);
    assert_string_equal(out, "trace_id");
    em_label_name_sanitize("9lives", 6, out);
    assert_string_equal(out, "_9lives");
    em_label_name_sanitize("", 0, out);
    assert_string_equal(out, "_");
    memset(longname, 'x', sizeof longname);
    em_label_name_sanitize(longname, sizeof longname, out);
    assert_int_equal(strlen(out), 64);
    assert_int_equal(em_label_name_check(out), EMBER_OK);
}

static void test_labels_join(void **state)
{
    em_pset s = { 0 };
    ember_label base[] = { { "service", "api" }, { "pod", "p1" } };
    ember_label extra[] = { { "worker", "w" }, { "service", "inner" },
                            { "exported_service", "x" } };
    ember_label out[5];
    size_t n;

    (void)state;
    assert_int_equal(em_labels_join(&s, base, 2, extra, 3, out, &n), 0);
    assert_int_equal(n, 5);
    assert_string_equal(out[0].name, "service");
    assert_string_equal(out[0].value, "api");
    assert_string_equal(out[2].name, "worker");
    assert_string_equal(out[3].name, "exported_service");
    assert_string_equal(out[3].value, "inner");
    assert_string_equal(out[4].name, "exported_exported_service");
    em_pset_free(&s);
}

static void test_labels_join_edges(void **state)
{
    em_pset s = { 0 };
    char longname[65];
    ember_label base[] = { { "k", "1" } };
    ember_label extra[2];
    ember_label out[3];
    size_t n;

    (void)state;
    memset(longname, 'k', 64);
    longname[64] = '\0';
    base[0].name = longname;
    extra[0] = (ember_label){ longname, "2" };     /* clash at 64 bytes */
    extra[1] = (ember_label){ "__type__", "3" };   /* the engine's own */
    assert_int_equal(em_labels_join(&s, base, 1, extra, 2, out, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(strlen(out[1].name), 64);
    assert_memory_equal(out[1].name, "exported_kkk", 12);
    assert_int_equal(em_label_name_check(out[1].name), EMBER_OK);
    assert_string_equal(out[2].name, "exported___type__");
    em_pset_free(&s);
}

/* Builds a set of two profiles sharing symbols, with a repeated sample. */
static void build_set(em_pset *s)
{
    ember_mapping m = { .start = 0x400000, .limit = 0x500000, .file = "/bin/x",
                        .build_id = "b1d" };
    ember_function fa = { .name = "leaf", .file = "x.c", .start_line = 1 };
    ember_function fb = { .name = "main", .file = "x.c", .start_line = 9 };
    ember_label l1[] = { { "pid", "1" } }, l2[] = { { "pid", "2" } };
    uint32_t mi, a, b, la, lb, st1, st2, p1, p2, locs[2];
    em_pset_line line;

    assert_int_equal(em_pset_mapping(s, &m, &mi), 0);
    assert_int_equal(em_pset_function(s, &fa, &a), 0);
    assert_int_equal(em_pset_function(s, &fb, &b), 0);
    line = (em_pset_line){ a, 4 };
    assert_int_equal(em_pset_location(s, mi + 1, 0x401000, &line, 1, &la), 0);
    line = (em_pset_line){ b, 12 };
    assert_int_equal(em_pset_location(s, mi + 1, 0x402000, &line, 1, &lb), 0);
    locs[0] = la;
    locs[1] = lb;
    assert_int_equal(em_pset_stack(s, locs, 2, &st1), 0);
    assert_int_equal(em_pset_stack(s, &lb, 1, &st2), 0);
    assert_int_equal(em_pset_profile_add(s, TYPE, l1, 1, 1000, 10, 1, &p1), 0);
    assert_int_equal(em_pset_profile_add(s, TYPE, l2, 1, 1000, 10, 1, &p2), 0);
    assert_int_equal(em_pset_sample(s, p1, st1, 5), 0);
    assert_int_equal(em_pset_sample(s, p1, st2, 2), 0);
    assert_int_equal(em_pset_sample(s, p1, st1, 3), 0);    /* repeat: sums */
    assert_int_equal(em_pset_sample(s, p2, st2, 7), 0);
}

static void test_pset_write(void **state)
{
    char *dir = tu_tmpdir("pset");
    ember_db *db = tu_open(dir, 1);
    em_pset s = { 0 };
    em_pset_counts c;
    ember_txn *txn;
    ember_merged *m;
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };
    ember_matcher pid1 = { "pid", "1", EMBER_MATCH_EQ };
    const int64_t *values;
    const uint32_t *stacks;
    ember_stats st = { .sz = sizeof st };

    (void)state;
    build_set(&s);
    assert_int_equal(ember_txn_begin(db, &txn), 0);
    assert_int_equal(em_pset_write(txn, &s, &c), 0);
    assert_int_equal(ember_txn_commit(txn), 0);
    assert_int_equal(c.profiles, 2);
    assert_int_equal(c.samples, 3);
    /* a trimmed set refuses adds and still writes the same */
    {
        ember_function f = { .name = "late" };
        uint32_t idx;
        em_pset_trim(&s);
        assert_int_equal(em_pset_function(&s, &f, &idx), EMBER_EINVAL);
        assert_int_equal(ember_txn_begin(db, &txn), 0);
        assert_int_equal(em_pset_write(txn, &s, &c), 0);
        assert_int_equal(ember_txn_commit(txn), 0);
        assert_int_equal(c.samples, 3);
    }
    sel.matchers = &pid1;
    sel.nmatchers = 1;
    assert_int_equal(ember_merge(db, &sel, &m), 0);
    assert_int_equal(ember_merged_samples(m, &stacks, &values), 2);
    assert_int_equal(values[0] + values[1], 20);       /* written twice */
    assert_true(values[0] == 16 || values[1] == 16);
    ember_merged_free(m);
    assert_int_equal(ember_stats_get(db, &st), 0);
    assert_int_equal(st.series, 2);
    assert_int_equal(st.functions, 2);
    assert_int_equal(st.locations, 2);
    assert_int_equal(st.mappings, 2);       /* the unknown one and ours */
    assert_int_equal(tu_verify(db), 0);
    em_pset_free(&s);
    ember_close(db);
    tu_rmdir(dir);
}

/* An explicit transaction keeps its profiles until commit and writes each
** series' as head chunks then, sealing where appending one by one would
** have: windows and the profile limit cut the same heads, and every
** sample is read back. */
static void test_txn_heads(void **state)
{
    char *dir = tu_tmpdir("txnheads");
    ember_open_opts oo = { .sz = sizeof oo, .sync = EMBER_SYNC_NONE,
                           .chunk_window_ms = 1000,
                           .chunk_max_profiles = 7 };
    ember_db *db = NULL;
    const char *names[] = { "leaf", "main" };
    ember_label la = { "s", "a" }, lb = { "s", "b" };
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };
    ember_stats st = { .sz = sizeof st };
    ember_txn *txn;
    ember_merged *m;
    ember_iter *it;
    ember_point pt;
    const int64_t *values;
    uint64_t points = 0;
    int64_t want = 0;
    uint32_t stack;

    (void)state;
    assert_int_equal(ember_open(dir, &oo, &db), EMBER_OK);
    stack = tu_stack(db, names, 2);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(ember_txn_begin(db, &txn), EMBER_OK);
        for (int i = 0; i < 40; i++) {
            ember_sample smp = { stack, i + 1 };
            ember_profile p = { .sz = sizeof p, .type = TYPE,
                                .labels = i % 3 ? &la : &lb, .nlabels = 1,
                                .time_ms = round * 4000 + i * 150,
                                .samples = &smp, .nsamples = 1 };
            assert_int_equal(ember_txn_append(txn, &p), EMBER_OK);
            want += i + 1;
        }
        assert_int_equal(ember_txn_commit(txn), EMBER_OK);
    }
    assert_int_equal(tu_verify(db), 0);
    assert_int_equal(ember_stats_get(db, &st), 0);
    assert_int_equal(st.profiles, 80);
    assert_true(st.chunks > 0);             /* windows sealed heads */
    assert_true(st.head_chunks > 0);
    assert_int_equal(ember_merge(db, &sel, &m), 0);
    assert_int_equal(ember_merged_samples(m, NULL, &values), 1);
    assert_int_equal(values[0], want);
    ember_merged_free(m);
    assert_int_equal(ember_select(db, &sel, &it), 0);
    while (ember_iter_next(it, &pt) == EMBER_OK)
        points++;
    ember_iter_free(it);
    assert_int_equal(points, 80);
    assert_int_equal(ember_seal(db), EMBER_OK);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

/* Builds a one-sample set and writes it in one transaction of DB. */
static int small_import(ember_db *db)
{
    em_pset s = { 0 };
    ember_txn *txn = NULL;
    ember_mapping m = { .file = "/bin/x" };
    ember_function f = { .name = "leaf" };
    ember_label l = { "pid", "1" };
    uint32_t mi = 0, fi = 0, li = 0, si = 0, pi = 0;
    em_pset_line line;
    int rc = em_pset_mapping(&s, &m, &mi);

    if (rc == EMBER_OK)
        rc = em_pset_function(&s, &f, &fi);
    line = (em_pset_line){ fi, 1 };
    if (rc == EMBER_OK)
        rc = em_pset_location(&s, mi + 1, 1, &line, 1, &li);
    if (rc == EMBER_OK)
        rc = em_pset_stack(&s, &li, 1, &si);
    if (rc == EMBER_OK)
        rc = em_pset_profile_add(&s, TYPE, &l, 1, 5, 0, 0, &pi);
    if (rc == EMBER_OK)
        rc = em_pset_sample(&s, pi, si, 3);
    if (rc == EMBER_OK)
        rc = ember_txn_begin(db, &txn);
    if (rc == EMBER_OK)
        rc = em_pset_write(txn, &s, NULL);
    if (rc == EMBER_OK)
        rc = ember_txn_commit(txn);
    else
        ember_txn_abort(txn);
    em_pset_free(&s);
    return rc;
}

/* Every allocation failure while building and writing gives ENOMEM and
** leaves the database as it was. */
static void test_pset_oom(void **state)
{
    char *dir = tu_tmpdir("psetoom");
    ember_db *db = tu_open(dir, 1);
    int rc = EMBER_ENOMEM;

    (void)state;
    for (uint64_t n = 1; rc == EMBER_ENOMEM && n < 10000; n++) {
        ember_stats st = { .sz = sizeof st };
        em_alloc_fail_at(n);
        rc = small_import(db);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
        assert_int_equal(ember_stats_get(db, &st), 0);
        assert_int_equal(st.profiles, rc == EMBER_OK ? 1 : 0);
    }
    assert_int_equal(rc, EMBER_OK);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- gunzip -------------------------------------------------------------------- */

/* Gzips LEN bytes at P into a malloc'd buffer. */
static uint8_t *gzip_bytes(const void *p, size_t len, size_t *out_len)
{
    z_stream z = { 0 };
    size_t cap = compressBound((uLong)len) + 64;
    uint8_t *out = malloc(cap);

    assert_non_null(out);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
                                  Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

static void test_gunzip(void **state)
{
    const char text[] = "main;work 12\nmain;idle 3\n";
    size_t zlen, n2, outlen;
    uint8_t *z = gzip_bytes(text, sizeof text - 1, &zlen);
    uint8_t *two;
    void *out;

    (void)state;
    assert_true(em_is_gzip(z, zlen));
    assert_false(em_is_gzip(text, sizeof text - 1));
    assert_int_equal(em_gunzip(z, zlen, 1 << 20, &out, &outlen), EMBER_OK);
    assert_int_equal(outlen, sizeof text - 1);
    assert_memory_equal(out, text, outlen);
    assert_int_equal(((char *)out)[outlen], '\0');
    em_free(out);
    /* two members, as `cat a.gz b.gz` makes */
    two = malloc(zlen * 2);
    memcpy(two, z, zlen);
    memcpy(two + zlen, z, zlen);
    n2 = zlen * 2;
    assert_int_equal(em_gunzip(two, n2, 1 << 20, &out, &outlen), EMBER_OK);
    assert_int_equal(outlen, 2 * (sizeof text - 1));
    em_free(out);
    /* every truncation is an error, never a crash */
    for (size_t cut = 0; cut < zlen; cut++) {
        int rc = em_gunzip(z, cut, 1 << 20, &out, &outlen);
        assert_int_equal(rc, EMBER_EINVAL);
        assert_null(out);
    }
    /* damage in the deflate data or the trailer */
    two[12] ^= 0xff;
    assert_int_equal(em_gunzip(two, zlen, 1 << 20, &out, &outlen),
                     EMBER_EINVAL);
    memcpy(two, z, zlen);
    two[zlen - 5] ^= 0x01;          /* CRC32 */
    assert_int_equal(em_gunzip(two, zlen, 1 << 20, &out, &outlen),
                     EMBER_EINVAL);
    /* exactly at the limit passes, one byte over does not */
    assert_int_equal(em_gunzip(z, zlen, sizeof text - 1, &out, &outlen), 0);
    em_free(out);
    assert_int_equal(em_gunzip(z, zlen, sizeof text - 2, &out, &outlen),
                     EMBER_ELIMIT);
    free(two);
    free(z);
}

static void test_gunzip_bomb(void **state)
{
    size_t big = 64u << 20, zlen, outlen;
    uint8_t *zeros = calloc(1, big);
    uint8_t *z = gzip_bytes(zeros, big, &zlen);
    void *out;

    (void)state;
    assert_true(zlen < big / 500);          /* a real bomb: ~1000:1 */
    assert_int_equal(em_gunzip(z, zlen, 1 << 20, &out, &outlen),
                     EMBER_ELIMIT);
    assert_non_null(strstr(ember_errmsg(NULL), "gzip bomb"));
    assert_null(out);
    free(zeros);
    free(z);
}

static void test_gunzip_oom(void **state)
{
    const char text[] = "main;work 12\n";
    size_t zlen, outlen;
    uint8_t *z = gzip_bytes(text, sizeof text - 1, &zlen);
    int rc = EMBER_ENOMEM;

    (void)state;
    for (uint64_t n = 1; rc == EMBER_ENOMEM; n++) {
        void *out = NULL;
        em_alloc_fail_at(n);
        rc = em_gunzip(z, zlen, 1 << 20, &out, &outlen);
        em_alloc_fail_at(0);
        em_free(out);
    }
    assert_int_equal(rc, EMBER_OK);
    free(z);
}

/* ---- format detection ---------------------------------------------------------- */

static void test_detect(void **state)
{
    const uint8_t pprof[] = { 0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x12, 0x00 };
    const char *perf = "hot  5963  2875.701812:    1001001 cpu-clock: \n"
                       "\t    118e hot+0x1e (/tmp/hot)\n\n";
    const char *perf_tid = "java 12/14 [001] 100.000001: cycles:u:\n"
                           "\t 1 f (/x)\n";
    const char *collapsed = "# comment\n\nmain;work 12\n";
    const char *neg = "main;work -3\r\n";
    const char *prose = "Hello, this is not a profile.\n";
    /* perf script --header without -g, its command line run on in a line
    ** without '#' (issue 15), and a collapsed file's "# ========" */
    const char *perf_hdr = "# ========\n# captured on    : Fri Nov 27 "
                           "10:36:44 2026\n# cmdline : sh -c true\necho a\n"
                           "# ========\n#\nsh  3909 70044.240730:    "
                           "1001001 cpu-clock:  163a0 [unknown] (/x)\n";
    const char *ruled = "# ========\n# title\n# ========\nmain;work 12\n";
    em_format f;

    (void)state;
    assert_int_equal(em_format_detect(pprof, sizeof pprof), EM_FORMAT_PPROF);
    assert_int_equal(em_format_detect(perf, strlen(perf)), EM_FORMAT_PERF);
    assert_int_equal(em_format_detect(perf_tid, strlen(perf_tid)),
                     EM_FORMAT_PERF);
    assert_int_equal(em_format_detect(collapsed, strlen(collapsed)),
                     EM_FORMAT_COLLAPSED);
    assert_int_equal(em_format_detect(neg, strlen(neg)), EM_FORMAT_COLLAPSED);
    assert_int_equal(em_format_detect(prose, strlen(prose)), EM_FORMAT_AUTO);
    assert_int_equal(em_format_detect(perf_hdr, strlen(perf_hdr)),
                     EM_FORMAT_PERF);
    assert_int_equal(em_format_detect(ruled, strlen(ruled)),
                     EM_FORMAT_COLLAPSED);
    assert_int_equal(em_format_detect("", 0), EM_FORMAT_AUTO);
    assert_int_equal(em_format_parse("perf", &f), EMBER_OK);
    assert_int_equal(f, EM_FORMAT_PERF);
    assert_string_equal(em_format_name(EM_FORMAT_PPROF), "pprof");
    assert_int_equal(em_format_parse("json", &f), EMBER_EINVAL);
}

/* Decodes TEXT (LEN bytes) as origin NAME by detection, expecting EINVAL
** and a message "NAME: not a profile: WHY ...". */
static void refused(const char *text, size_t len, const char *name,
                    const char *why)
{
    em_pset s = { 0 };
    em_import_opts o = { .sz = sizeof o, .origin = name };
    char want[256];

    snprintf(want, sizeof want, "%s: not a profile: %s", name, why);
    assert_int_equal(em_decode(text, len, &o, &s), EMBER_EINVAL);
    if (strncmp(ember_errmsg(NULL), want, strlen(want)) != 0)
        fail_msg("got \"%s\", wanted \"%s ...\"", ember_errmsg(NULL), want);
    assert_int_equal(s.nprofiles, 0);
    em_pset_free(&s);
}

/* Issue 12: a tab-separated table was taken as collapsed stacks (6.7e12
** "samples") and an empty file as an empty profile. Detection refuses what
** is not a profile, naming the file; perf script shapes without a time
** stamp on their first line are perf by their TAB-led call chains. */
static void test_detect_refuses(void **state)
{
    static const char tsv[] = "1732170000\t3350000000000\n"
                              "1732170060\t3350000000000\n";
    static const char table[] = "host\tbytes in\t12\nweb-1\tfoo bar\t40\n";
    static const char numbers[] = "1 2 3\n4 5 6\n7 8 9\n";
    static const char notime[] = "hot 25742 \n"
                                 "\t            1211 hot (/tmp/hot)\n\n";
    uint8_t *z = NULL;
    size_t zlen = 0;

    (void)state;
    refused("", 0, "empty.txt", "empty");
    refused("\n  \n# just a comment\n", 21, "blank.txt", "empty");
    refused(tsv, strlen(tsv), "t.tsv", "a table of tab-separated columns");
    refused(table, strlen(table), "t2.tsv", "a table of tab-separated");
    refused(numbers, strlen(numbers), "n.txt", "columns of numbers");
    z = gzip_bytes("", 0, &zlen);          /* an empty file, gzip'd */
    refused((const char *)z, zlen, "e.pb.gz", "empty");
    free(z);
    assert_int_equal(em_format_detect(notime, strlen(notime)),
                     EM_FORMAT_PERF);
    /* still collapsed: stacks with ';', a TAB before the value, and one
    ** frame per line with spaces before the value */
    assert_int_equal(em_format_detect("a;b\t3\nc\t4\n", 10),
                     EM_FORMAT_COLLAPSED);
    assert_int_equal(em_format_detect("main 3\nfoo(int) 4\n", 18),
                     EM_FORMAT_COLLAPSED);
    assert_int_equal(em_format_detect("[unknown] 3\n", 12),
                     EM_FORMAT_COLLAPSED);
}

static void test_decode_unknown(void **state)
{
    em_pset s = { 0 };
    em_import_opts o = { .sz = sizeof o, .origin = "notes.txt" };
    const char *prose = "Hello, this is not a profile.\n";

    (void)state;
    assert_int_equal(em_decode(prose, strlen(prose), &o, &s), EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(NULL), "notes.txt"));
    assert_non_null(strstr(ember_errmsg(NULL), "--format"));
    em_pset_free(&s);
    o.sz = 0;
    assert_int_equal(em_decode(prose, strlen(prose), &o, &s), EMBER_EINVAL);
}


/* ---- ember_import: the public door ------------------------------------------- */

#define T0 1732170000000LL
#define MEMTYPE "memory:inuse_space:bytes:space:bytes"

/* What must not change after a refused import. */
static void db_counts(ember_db *db, uint64_t c[5])
{
    ember_stats st = { .sz = sizeof st };

    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    c[0] = st.profiles;
    c[1] = st.series;
    c[2] = st.strings;
    c[3] = st.stacks;
    c[4] = st.functions;
}

static void assert_untouched(ember_db *db, const uint64_t before[5])
{
    uint64_t now[5];

    db_counts(db, now);
    assert_memory_equal(now, before, sizeof now);
}

/* A fresh database in DIR/db (tu_rmdir DIR removes it). */
static ember_db *open_in(const char *dir)
{
    char path[512];

    snprintf(path, sizeof path, "%s/db", dir);
    return tu_open(path, 1);
}

/* Imports LEN bytes at BUF with OPTS (NULL: defaults) into a new database,
** asserting it worked, and returns its stats. */
static ember_import_stats import_new(const void *buf, size_t len,
                                     const ember_import_opts *opts)
{
    char *dir = tu_tmpdir("emimp");
    ember_db *db = open_in(dir);
    ember_import_stats st = { .sz = sizeof st };
    ember_stats ds = { .sz = sizeof ds };

    assert_int_equal(ember_import(db, buf, len, opts, &st), EMBER_OK);
    assert_int_equal(ember_stats_get(db, &ds), EMBER_OK);
    assert_int_equal(ds.profiles, st.profiles);
    assert_int_equal(ds.samples, st.samples);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
    return st;
}

/* Each format, gzipped or not, told by content or named, gives the same. */
static void test_ember_import_formats(void **state)
{
    ember_import_opts o = { .sz = sizeof o };
    ember_import_stats a, b;
    size_t zlen, plen, tlen, clen;
    char *z = tu_read_file("tests/data/pprof/cpu.pb.gz", &zlen);
    char *perf = tu_read_file("tests/data/perf/hot.txt", &tlen);
    char *col = tu_read_file("tests/data/collapsed/1732170000000.txt", &clen);
    void *plain;

    (void)state;
    assert_non_null(z);
    assert_non_null(perf);
    assert_non_null(col);
    assert_int_equal(em_gunzip(z, zlen, 1 << 30, &plain, &plen), EMBER_OK);
    a = import_new(z, zlen, NULL);
    assert_int_equal(a.files, 1);
    assert_int_equal(a.failed, 0);
    assert_true(a.profiles >= 2 && a.samples > 0);
    assert_int_equal(a.bytes, plen);
    b = import_new(plain, plen, &o);
    assert_memory_equal(&a, &b, sizeof a);
    o.format = EMBER_FORMAT_PPROF;
    b = import_new(z, zlen, &o);
    assert_memory_equal(&a, &b, sizeof a);

    o.format = EMBER_FORMAT_AUTO;
    a = import_new(perf, tlen, &o);
    assert_true(a.profiles > 0 && a.samples > 0);
    o.format = EMBER_FORMAT_PERF;
    b = import_new(perf, tlen, &o);
    assert_memory_equal(&a, &b, sizeof a);

    o.format = EMBER_FORMAT_AUTO;
    a = import_new(col, clen, &o);
    assert_int_equal(a.profiles, 1);
    assert_true(a.samples > 0);
    o.format = EMBER_FORMAT_COLLAPSED;
    b = import_new(col, clen, &o);
    assert_memory_equal(&a, &b, sizeof a);
    em_free(plain);
    free(z);
    free(perf);
    free(col);
}

/* Series of a Go heap profile imported into a new database with FLAGS. */
static uint64_t heap_series(unsigned flags)
{
    ember_import_opts o = { .sz = sizeof o, .flags = flags };
    char *dir = tu_tmpdir("emimp");
    ember_db *db = open_in(dir);
    ember_stats ds = { .sz = sizeof ds };
    size_t zlen;
    char *z = tu_read_file("tests/data/pprof/heap.pb.gz", &zlen);

    assert_non_null(z);
    assert_int_equal(ember_import(db, z, zlen, &o, NULL), EMBER_OK);
    assert_int_equal(ember_stats_get(db, &ds), EMBER_OK);
    ember_close(db);
    tu_rmdir(dir);
    free(z);
    return ds.series;
}

/* Numeric pprof labels (Go's "bytes") stay out of the series unless the
** embedder asks, as ember import --numeric-labels series does: one series
** per type, not one per allocation size. */
static void test_ember_import_numeric_labels(void **state)
{
    uint64_t plain, split;

    (void)state;
    plain = heap_series(0);
    split = heap_series(EMBER_IMPORT_NUMERIC_LABELS);
    assert_int_equal(plain, 4);         /* the heap profile's four types */
    assert_true(split > 10 * plain);
}

/* A named format is taken at its word: collapsed text named pprof, or
** pprof named collapsed, is refused and writes nothing. */
static void test_ember_import_named_wrong(void **state)
{
    char *dir = tu_tmpdir("emwrong");
    ember_db *db = open_in(dir);
    ember_import_opts o = { .sz = sizeof o, .origin = "in.txt",
                            .format = EMBER_FORMAT_PPROF };
    const char *text = "main;work 12\nmain;idle 3\n";
    size_t zlen;
    char *z = tu_read_file("tests/data/pprof/cpu.pb.gz", &zlen);
    uint64_t before[5];

    (void)state;
    db_counts(db, before);
    assert_int_not_equal(ember_import(db, text, strlen(text), &o, NULL),
                         EMBER_OK);
    assert_non_null(strstr(ember_errmsg(db), "in.txt"));
    o.format = EMBER_FORMAT_COLLAPSED;
    assert_int_not_equal(ember_import(db, z, zlen, &o, NULL), EMBER_OK);
    assert_untouched(db, before);
    free(z);
    ember_close(db);
    tu_rmdir(dir);
}

/* Labels, type and time from the options reach what is stored; without a
** time, the clock gives it. */
static void test_ember_import_opts(void **state)
{
    char *dir = tu_tmpdir("emopts");
    ember_db *db = open_in(dir);
    ember_label l[] = { { "service", "api" }, { "zone", "z1" } };
    ember_import_opts o = { .sz = sizeof o, .type = MEMTYPE, .labels = l,
                            .nlabels = 2, .flags = EMBER_IMPORT_TIME,
                            .time_ms = T0 };
    ember_matcher m = { "service", "api", EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .type = MEMTYPE,
                           .matchers = &m, .nmatchers = 1 };
    const char *text = "main;a 3\nmain;b 4\nmain;a 1\n";
    ember_import_stats st = { .sz = sizeof st };
    ember_totals *t;
    ember_strlist *sl;
    const int64_t *times, *values;
    uint32_t series;
    size_t n;
    int64_t before;

    (void)state;
    assert_int_equal(ember_import(db, text, strlen(text), &o, &st), 0);
    assert_int_equal(st.profiles, 1);
    assert_int_equal(st.samples, 2);          /* main;a summed */
    assert_int_equal(st.read_samples, 3);
    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    assert_int_equal(ember_totals_count(t), 1);
    ember_totals_series(t, 0, &series, &times, &values, &n);
    assert_int_equal(n, 1);
    assert_int_equal(times[0], T0);
    assert_int_equal(values[0], 8);
    ember_totals_free(t);
    assert_int_equal(ember_label_values(db, "zone", NULL, &sl), EMBER_OK);
    assert_int_equal(ember_strlist_count(sl), 1);
    assert_string_equal(ember_strlist_get(sl, 0), "z1");
    ember_strlist_free(sl);

    /* no EMBER_IMPORT_TIME: the clock, not 0 nor time_ms */
    o.flags = 0;
    o.time_ms = 5;
    l[0].value = "clock";
    m.value = "clock";
    before = T0 + 365LL * 86400000;     /* surely in the past */
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL), 0);
    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    ember_totals_series(t, 0, &series, &times, &values, &n);
    assert_int_equal(n, 1);
    assert_true(times[0] > before);
    ember_totals_free(t);
    ember_close(db);
    tu_rmdir(dir);
}

/* Bad options fail before anything is read or written. */
static void test_ember_import_bad_opts(void **state)
{
    char *dir = tu_tmpdir("embad");
    ember_db *db = open_in(dir);
    const char *text = "main;a 3\n";
    ember_label bad[] = { { "1x", "v" } }, twice[] = { { "a", "1" },
                                                       { "a", "2" } };
    ember_label reserved[] = { { "__type__", "v" } };
    ember_import_opts o = { .sz = sizeof o };
    ember_import_stats st = { .sz = sizeof st };
    uint64_t before[5];

    (void)state;
    db_counts(db, before);
    o.labels = bad;
    o.nlabels = 1;
    assert_int_equal(ember_import(db, text, strlen(text), &o, &st),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(db), "1x"));
    assert_int_equal(st.failed, 1);
    o.labels = twice;
    o.nlabels = 2;
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                     EMBER_EINVAL);
    o.labels = reserved;
    o.nlabels = 1;
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                     EMBER_EINVAL);
    o = (ember_import_opts){ .sz = sizeof o, .format = 9 };
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                     EMBER_EINVAL);
    o = (ember_import_opts){ .sz = sizeof o, .flags = 1u << 9 };
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                     EMBER_EINVAL);
    o = (ember_import_opts){ .sz = sizeof o, .type = "cpu" };
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                     EMBER_EINVAL);
    o = (ember_import_opts){ 0 };
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                     EMBER_EINVAL);
    st.sz = 0;
    assert_int_equal(ember_import(db, text, strlen(text), NULL, &st),
                     EMBER_EINVAL);
    assert_int_equal(ember_import(NULL, text, strlen(text), NULL, NULL),
                     EMBER_EINVAL);
    assert_untouched(db, before);
    ember_close(db);
    tu_rmdir(dir);
}

/* A bad input writes nothing at all, even after many good records. */
static void test_ember_import_all_or_nothing(void **state)
{
    char *dir = tu_tmpdir("emaon");
    ember_db *db = open_in(dir);
    ember_import_opts o = { .sz = sizeof o, .origin = "late.txt",
                            .format = EMBER_FORMAT_COLLAPSED };
    ember_import_stats st = { .sz = sizeof st, .profiles = 99 };
    size_t cap = 1 << 20, n = 0, zlen;
    char *text = malloc(cap);
    char *z = tu_read_file("tests/data/pprof/heap.pb.gz", &zlen);
    uint64_t before[5];

    (void)state;
    assert_non_null(text);
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(text + n, cap - n, "main;f%d;g%d %d\n", i,
                              i % 7, i + 1);
    n += (size_t)snprintf(text + n, cap - n, "main;;broken 1\n");
    db_counts(db, before);
    assert_int_equal(ember_import(db, text, n, &o, &st), EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(db), "late.txt:2001"));
    assert_int_equal(st.profiles, 0);
    assert_int_equal(st.failed, 1);
    /* a pprof file cut anywhere in its body */
    o = (ember_import_opts){ .sz = sizeof o };
    for (size_t cut = 1; cut < zlen; cut += zlen / 17)
        assert_int_not_equal(ember_import(db, z, cut, &o, NULL), EMBER_OK);
    assert_untouched(db, before);
    assert_int_equal(tu_verify(db), 0);
    free(text);
    free(z);
    ember_close(db);
    tu_rmdir(dir);
}

/* The CLI's limits: 1 GiB before gunzip, max_bytes after, for gzipped and
** plain input alike; a gzip bomb stops at the limit. */
static void test_ember_import_limits(void **state)
{
    char *dir = tu_tmpdir("emlim");
    ember_db *db = open_in(dir);
    ember_import_opts o = { .sz = sizeof o, .max_bytes = 1 << 20 };
    size_t big = 64u << 20, zlen, huge = (size_t)EM_IMPORT_MAX_FILE + 1;
    uint8_t *zeros = calloc(1, big);
    uint8_t *bomb;
    char *text = malloc((1 << 20) + 16);
    void *map;
    uint64_t before[5];

    (void)state;
    assert_non_null(zeros);
    assert_non_null(text);
    memcpy(zeros, "main;a 1\n", 9);     /* a valid profile, were it whole */
    bomb = gzip_bytes(zeros, big, &zlen);
    db_counts(db, before);
    assert_int_equal(ember_import(db, bomb, zlen, &o, NULL), EMBER_ELIMIT);
    assert_non_null(strstr(ember_errmsg(db), "gzip bomb"));
    /* plain input over max_bytes; at it, it passes */
    for (size_t i = 0; i < 1001 * 9; i += 9)
        memcpy(text + i, "main;a 1\n", 9);
    o.max_bytes = 1000 * 9;
    assert_int_equal(ember_import(db, text, 1001 * 9, &o, NULL),
                     EMBER_ELIMIT);
    assert_non_null(strstr(ember_errmsg(db), "more than the limit"));
    assert_untouched(db, before);
    assert_int_equal(ember_import(db, text, 1000 * 9, &o, NULL), EMBER_OK);
    db_counts(db, before);
    /* over 1 GiB: refused before a byte is read (the pages are never
    ** touched, so they cost nothing) */
    map = mmap(NULL, huge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
               MAP_NORESERVE, -1, 0);
    assert_true(map != MAP_FAILED);
    o.max_bytes = 0;
    assert_int_equal(ember_import(db, map, huge, &o, NULL), EMBER_ELIMIT);
    assert_non_null(strstr(ember_errmsg(db), "larger than"));
    munmap(map, huge);
    assert_untouched(db, before);
    free(zeros);
    free(bomb);
    free(text);
    ember_close(db);
    tu_rmdir(dir);
}

/* Every allocation failure gives ENOMEM and writes nothing. */
static void test_ember_import_oom(void **state)
{
    char *dir = tu_tmpdir("emoom");
    ember_db *db = open_in(dir);
    size_t zlen;
    char *z = tu_read_file("tests/data/pprof/cpu.pb.gz", &zlen);
    int rc = EMBER_ENOMEM;
    uint64_t n;

    (void)state;
    for (n = 1; rc == EMBER_ENOMEM && n < 100000; n++) {
        ember_stats st = { .sz = sizeof st };
        em_alloc_fail_at(n);
        rc = ember_import(db, z, zlen, NULL, NULL);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
        assert_int_equal(ember_stats_get(db, &st), 0);
        assert_true(rc == EMBER_OK ? st.profiles > 0 : st.profiles == 0);
    }
    assert_int_equal(rc, EMBER_OK);
    assert_true(n > 10);
    assert_int_equal(tu_verify(db), 0);
    free(z);
    ember_close(db);
    tu_rmdir(dir);
}

/* What ember_import wrote comes back through ember_query and
** ember_result_render as the collapsed input summed per stack. */
static void test_ember_import_render(void **state)
{
    char *dir = tu_tmpdir("emrender");
    ember_db *db = open_in(dir);
    const char *text = "main;b 4\nmain;a 3\nmain;a 1\n";
    ember_import_opts o = { .sz = sizeof o, .type = TYPE };
    ember_render_opts ro = { .sz = sizeof ro, .relative = 1 };
    ember_result *r = NULL;
    char *out;
    size_t len;

    (void)state;
    assert_int_equal(ember_import(db, text, strlen(text), &o, NULL), 0);
    assert_int_equal(ember_query(db, "merge(" TYPE ")", NULL, &r), 0);
    assert_int_equal(ember_result_render(db, r, "collapsed", NULL, &out,
                                         &len), EMBER_OK);
    assert_string_equal(out, "main;a 4\nmain;b 4\n");
    assert_int_equal(len, strlen(out));
    ember_free(out);
    assert_int_equal(ember_result_render(db, r, "csv", NULL, &out, &len),
                     EMBER_EINVAL);
    assert_null(out);
    ember_result_free(r);
    /* after a focus, percentages are of the whole selection (8), unless
    ** relative asks for pprof's -relative_percentages (of the 4 kept) */
    assert_int_equal(ember_query(db, "focus(" TYPE ", \"^a$\")", NULL, &r), 0);
    assert_int_equal(ember_result_render(db, r, "top", NULL, &out, &len), 0);
    assert_non_null(strstr(out, "4, 50.00% of 8 total"));
    ember_free(out);
    assert_int_equal(ember_result_render(db, r, "top", &ro, &out, &len), 0);
    assert_non_null(strstr(out, "4, 100% of 4 total"));
    ember_free(out);
    ember_result_free(r);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- ember_import_files: the driver `ember import` runs ---------------------- */

typedef struct hook_log {
    char failed[8][512];
    int rcs[8];
    size_t nfailed, nprogress;
    uint64_t last_files;
} hook_log;

static void log_failed(void *ctx, const char *path, int rc, const char *msg)
{
    hook_log *h = ctx;

    assert_true(strncmp(msg, path, strlen(path)) == 0);
    if (h->nfailed < 8) {
        snprintf(h->failed[h->nfailed], sizeof h->failed[0], "%s", msg);
        h->rcs[h->nfailed] = rc;
    }
    h->nfailed++;
}

static void log_progress(void *ctx, const ember_import_stats *st)
{
    hook_log *h = ctx;

    assert_true(st->files >= h->last_files);
    h->last_files = st->files;
    h->nprogress++;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A directory of good files and a bad one, and a missing path: the good
** are written, each failure reported once naming its path, the result is
** the first failure. A file named by unix ms is timed by its name. */
static void test_import_files(void **state)
{
    char *dir = tu_tmpdir("emfiles");
    ember_db *db = open_in(dir);
    char in[512], sub[512], missing[512];
    const char *paths[2] = { in, missing };
    hook_log h = { 0 };
    ember_import_hooks hooks = { .sz = sizeof hooks, .ctx = &h,
                                 .failed = log_failed,
                                 .progress = log_progress };
    ember_import_stats st = { .sz = sizeof st };
    ember_selector sel = { .sz = sizeof sel };
    ember_totals *t;
    const int64_t *times, *values;
    uint32_t series;
    size_t n;

    (void)state;
    snprintf(in, sizeof in, "%s/in", dir);
    snprintf(sub, sizeof sub, "%s/in/sub", dir);
    snprintf(missing, sizeof missing, "%s/nope.txt", dir);
    assert_int_equal(mkdir(in, 0755), 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    write_file(in, "1732170000000.txt", "main;a 5\n");
    write_file(in, "b.txt", "main;;bad 1\n");
    write_file(sub, "c.txt", "main;c 7\n");
    write_file(in, ".hidden", "not even read\n");
    assert_int_equal(ember_import_files(db, paths, 2, NULL, &hooks, &st),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(db), "b.txt"));
    assert_non_null(strstr(ember_errmsg(db), "(and 1 more)"));
    assert_int_equal(st.files, 3);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.bad_paths, 1);
    assert_int_equal(st.profiles, 2);
    assert_int_equal(h.nfailed, 2);
    assert_non_null(strstr(h.failed[0], "/in/b.txt"));
    assert_int_equal(h.rcs[0], EMBER_EINVAL);
    assert_non_null(strstr(h.failed[1], "nope.txt"));
    assert_true(h.nprogress >= 3);
    assert_int_equal(h.last_files, 3);
    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    assert_int_equal(ember_totals_count(t), 1);
    ember_totals_series(t, 0, &series, &times, &values, &n);
    assert_int_equal(n, 2);
    assert_int_equal(times[0], T0);             /* from the name */
    assert_int_equal(values[0], 5);
    assert_int_equal(values[1], 7);
    ember_totals_free(t);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

/* Bad options fail before any path is looked at: no hook runs, although
** the path does not exist. */
static void test_import_files_opts_first(void **state)
{
    char *dir = tu_tmpdir("emfopts");
    ember_db *db = open_in(dir);
    const char *paths[] = { "/nonexistent/file.txt" };
    ember_label bad[] = { { "1x", "v" } };
    ember_import_opts o = { .sz = sizeof o, .labels = bad, .nlabels = 1 };
    hook_log h = { 0 };
    ember_import_hooks hooks = { .sz = sizeof hooks, .ctx = &h,
                                 .failed = log_failed,
                                 .progress = log_progress };
    ember_import_stats st = { .sz = sizeof st };

    (void)state;
    assert_int_equal(ember_import_files(db, paths, 1, &o, &hooks, &st),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(db), "1x"));
    assert_int_equal(h.nfailed + h.nprogress, 0);
    assert_int_equal(st.files + st.bad_paths, 0);
    hooks.sz = 0;
    assert_int_equal(ember_import_files(db, paths, 1, NULL, &hooks, NULL),
                     EMBER_EINVAL);
    ember_close(db);
    tu_rmdir(dir);
}

/* Allocation failures anywhere in a batch of three files: whatever fails,
** each file is written whole or not at all (a failed batch is retried file
** by file), and the counts say which. */
static void test_import_files_oom(void **state)
{
    char *dir = tu_tmpdir("emfoom");
    ember_db *db = open_in(dir);
    char in[512];
    const char *paths[] = { in };
    int rc = EMBER_ENOMEM;
    uint64_t n, written = 0;

    (void)state;
    snprintf(in, sizeof in, "%s/in", dir);
    assert_int_equal(mkdir(in, 0755), 0);
    write_file(in, "a.txt", "main;a 1\nmain;b 2\n");
    write_file(in, "b.txt", "main;a;x 3\n");
    write_file(in, "c.txt", "main;c 4\nmain;a 5\n");
    for (n = 1; rc != EMBER_OK && n < 100000; n++) {
        ember_import_stats st = { .sz = sizeof st };
        ember_stats ds = { .sz = sizeof ds };
        em_alloc_fail_at(n);
        rc = ember_import_files(db, paths, 1, NULL, NULL, &st);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
        if (rc != EMBER_OK)
            assert_true(ember_errmsg(db)[0] != '\0');
        written += st.profiles;
        assert_int_equal(ember_stats_get(db, &ds), EMBER_OK);
        assert_int_equal(ds.profiles, written);     /* one per file */
    }
    assert_int_equal(rc, EMBER_OK);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pset_dedup),
        cmocka_unit_test(test_pset_many),
        cmocka_unit_test(test_pset_profile_checks),
        cmocka_unit_test(test_label_names),
        cmocka_unit_test(test_labels_join),
        cmocka_unit_test(test_labels_join_edges),
        cmocka_unit_test(test_pset_write),
        cmocka_unit_test(test_pset_oom),
        cmocka_unit_test(test_txn_heads),
        cmocka_unit_test(test_gunzip),
        cmocka_unit_test(test_gunzip_bomb),
        cmocka_unit_test(test_gunzip_oom),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_detect_refuses),
        cmocka_unit_test(test_decode_unknown),
        cmocka_unit_test(test_ember_import_formats),
        cmocka_unit_test(test_ember_import_numeric_labels),
        cmocka_unit_test(test_ember_import_named_wrong),
        cmocka_unit_test(test_ember_import_opts),
        cmocka_unit_test(test_ember_import_bad_opts),
        cmocka_unit_test(test_ember_import_all_or_nothing),
        cmocka_unit_test(test_ember_import_limits),
        cmocka_unit_test(test_ember_import_oom),
        cmocka_unit_test(test_ember_import_render),
        cmocka_unit_test(test_import_files),
        cmocka_unit_test(test_import_files_opts_first),
        cmocka_unit_test(test_import_files_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
