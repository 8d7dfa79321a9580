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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
