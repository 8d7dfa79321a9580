/*
** tests/unit/test_limits.c: the bounds an import keeps on hostile or merely
** large input (issue 12): the memory of a pprof import is a small multiple
** of its size (counted through Ember's allocator, so no timing and no
** machine's RSS enters), a gzip bomb is refused before its output is
** allocated, and values whose sums do not fit in 64 bits are refused at
** import and fail a query that would add them, never wrapped.
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

/* docs/ingest.md, "Memory": what em_import holds through Ember's
** allocator, at most, per byte of (decoded) pprof. */
#define IMPORT_BUDGET 10

/* ---- memory ------------------------------------------------------------------ */

/* A pprof of 300k samples, each its own stack (as in Go's profiles, which
** aggregate equal stacks): imported whole, what Ember's allocator held at
** the peak stays within the budget. It held 22.5 times the input when
** protobuf-c unpacked the whole message (the samples alone took 10). */
static void test_pprof_import_memory(void **state)
{
    char *dir = tu_tmpdir("limits");
    ember_db *db = tu_open(dir, 0);
    em_import_opts o = { .sz = sizeof o, .origin = "big.pb" };
    em_import_stats st;
    size_t len;
    uint8_t *buf = tu_pprof_synth(300000, 2000, 6, 11, &len);
    uint64_t peak;
    int rc;

    (void)state;
    em_alloc_count(true);
    rc = em_import(db, buf, len, &o, &st);
    peak = em_alloc_peak();
    em_alloc_count(false);
    if (rc != EMBER_OK)
        fprintf(stderr, "import: %s\n", em_errmsg());
    assert_int_equal(rc, EMBER_OK);
    assert_int_equal(st.lines, 600000);     /* two values per sample */
    fprintf(stderr, "input %zu bytes, peak %llu bytes held (%.2fx, %.0f "
            "per sample)\n", len, (unsigned long long)peak,
            (double)peak / (double)len, (double)peak / 300000);
    assert_true(peak <= (uint64_t)IMPORT_BUDGET * len);
    free(buf);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- gzip ----------------------------------------------------------------------- */

/* N bytes of zeros, gzip'd (one member; its trailer tells the truth). */
static uint8_t *gzip_zeros(size_t n, size_t *len)
{
    z_stream z = { 0 };
    uint8_t *in = calloc(1, 1 << 20);
    size_t cap = n / 500 + 4096;
    uint8_t *out = malloc(cap);

    assert_non_null(in);
    assert_non_null(out);
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9,
                                  Z_DEFAULT_STRATEGY), Z_OK);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    for (size_t left = n; left > 0;) {
        size_t k = left < (1u << 20) ? left : (1u << 20);
        left -= k;
        z.next_in = in;
        z.avail_in = (uInt)k;
        assert_int_not_equal(deflate(&z, left == 0 ? Z_FINISH : Z_NO_FLUSH),
                             Z_STREAM_ERROR);
        assert_int_equal(z.avail_in, 0);
    }
    *len = cap - z.avail_out;
    deflateEnd(&z);
    free(in);
    return out;
}

/* 64 MiB of zeros against a 16 MiB limit: refused, having held no more
** than a small scratch (the output buffer grew to the limit before). */
static void test_gzip_bomb_memory(void **state)
{
    size_t len, plen;
    uint8_t *gz = gzip_zeros(64u << 20, &len);
    void *plain = NULL;
    uint64_t peak;
    int rc;

    (void)state;
    em_alloc_count(true);
    rc = em_gunzip(gz, len, 16u << 20, &plain, &plen);
    peak = em_alloc_peak();
    em_alloc_count(false);
    assert_int_equal(rc, EMBER_ELIMIT);
    assert_non_null(strstr(em_errmsg(), "gzip bomb"));
    assert_null(plain);
    fprintf(stderr, "bomb of %zu bytes: peak %llu bytes held\n", len,
            (unsigned long long)peak);
    assert_true(peak < (1u << 20));
    free(gz);
}

/* The slow path (two members, so the fast one declines) still gives the
** whole output, and exactly at the limit is not over it. */
static void test_gzip_members_exact(void **state)
{
    size_t len, plen;
    uint8_t *gz = gzip_zeros(3u << 20, &len);
    uint8_t *two = malloc(2 * len);
    void *plain = NULL;
    uint64_t peak;

    (void)state;
    assert_non_null(two);
    memcpy(two, gz, len);
    memcpy(two + len, gz, len);
    em_alloc_count(true);
    assert_int_equal(em_gunzip(two, 2 * len, 6u << 20, &plain, &plen),
                     EMBER_OK);
    peak = em_alloc_peak();
    em_alloc_count(false);
    assert_int_equal(plen, 6u << 20);
    for (size_t i = 0; i < plen; i++)
        if (((uint8_t *)plain)[i] != 0)
            fail_msg("byte %zu is not zero", i);
    assert_true(peak < (6u << 20) + (1u << 20));    /* no doubling */
    em_free(plain);
    assert_int_equal(em_gunzip(two, 2 * len, (6u << 20) - 1, &plain, &plen),
                     EMBER_ELIMIT);
    free(two);
    free(gz);
}

/* ---- sums that do not fit --------------------------------------------------- */

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"

/* The file: two lines of one stack whose sum is past INT64_MAX.
** It was stored as -9.22e18 with exit 0; now it is refused, naming the
** line, and nothing is written. So is a file whose distinct stacks only
** add up past the range (its total, and -o top's, could not be shown). */
static void test_collapsed_sum_refused(void **state)
{
    static const char *const bad[] = {
        "main;a 9223372036854775807\nmain;a 1\n",
        "main;a 9223372036854775807\nmain;b 9223372036854775807\n",
        "main;a -9223372036854775807\nmain;b -9223372036854775807\n",
    };
    const char *ok = "main;a 9223372036854775807\nmain;b -5\n";
    char *dir = tu_tmpdir("limits");
    ember_db *db = tu_open(dir, 0);
    em_import_opts o = { .sz = sizeof o, .origin = "big.txt" };
    em_import_stats st;
    ember_stats es = { .sz = sizeof es };

    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(bad); i++) {
        assert_int_equal(em_import_collapsed(db, bad[i], strlen(bad[i]), &o,
                                             &st), EMBER_ELIMIT);
        assert_non_null(strstr(em_errmsg(), "big.txt:2"));
        assert_non_null(strstr(em_errmsg(), "64-bit range"));
    }
    assert_int_equal(ember_stats_get(db, &es), EMBER_OK);
    assert_int_equal(es.profiles, 0);
    assert_int_equal(em_import_collapsed(db, ok, strlen(ok), &o, &st),
                     EMBER_OK);
    assert_int_equal(st.total, INT64_MAX - 5);
    ember_close(db);
    tu_rmdir(dir);
}

/* The engine refuses such a profile from an embedder too, before writing. */
static void test_append_sum_refused(void **state)
{
    char *dir = tu_tmpdir("limits");
    ember_db *db = tu_open(dir, 0);
    uint32_t a = tu_synthetic_stack(db, 1), b = tu_synthetic_stack(db, 2);
    ember_sample s[] = { { a, INT64_MAX }, { b, 1 } };
    ember_profile p = tu_profile(CPU, NULL, 0, 1000, s, 2);

    (void)state;
    assert_int_equal(ember_append(db, &p), EMBER_ELIMIT);
    assert_non_null(strstr(ember_errmsg(db), "64-bit range"));
    ember_close(db);
    tu_rmdir(dir);
}

/* Three profiles, each valid alone, whose merge does not fit: in one stack
** (the engine's merge) and over two stacks (the result's total). The query
** fails with a message instead of printing wrapped sums. */
static void test_merge_sum_fails(void **state)
{
    char *dir = tu_tmpdir("limits");
    ember_db *db = tu_open(dir, 0);
    uint32_t a = tu_synthetic_stack(db, 1), b = tu_synthetic_stack(db, 2);
    ember_label one = { "job", "one" }, two = { "job", "two" };
    ember_result *r = NULL;
    ember_merged *m = NULL;
    ember_selector sel = { .sz = sizeof sel, .type = CPU };

    (void)state;
    for (int k = 0; k < 3; k++) {
        ember_sample s[] = { { a, INT64_MAX / 2 } };
        ember_profile p = tu_profile(CPU, &one, 1, 1000 + k * 1000, s, 1);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
    }
    for (int k = 0; k < 2; k++) {
        ember_sample s[] = { { k == 0 ? a : b, INT64_MAX / 2 + 2 } };
        ember_profile p = tu_profile(CPU, &two, 1, 1000 + k * 1000, s, 1);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
    }
    assert_int_equal(ember_query(db, CPU "{job=\"one\"}", NULL, &r),
                     EMBER_ELIMIT);
    assert_null(r);
    assert_non_null(strstr(ember_errmsg(db), "64-bit range"));
    assert_int_equal(ember_query(db, CPU "{job=\"two\"}", NULL, &r),
                     EMBER_ELIMIT);
    assert_non_null(strstr(ember_errmsg(db), "64-bit range"));
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_ELIMIT);
    assert_null(m);
    ember_close(db);
    tu_rmdir(dir);
}

/* The merged value of stack ST in M (0: absent). */
static int64_t merged_value(const ember_merged *m, uint32_t st)
{
    const uint32_t *stacks;
    const int64_t *values;
    size_t n = ember_merged_samples(m, &stacks, &values);

    for (size_t i = 0; i < n; i++)
        if (stacks[i] == st)
            return values[i];
    return 0;
}

/* Values around 2^31, where the merge leaves its fast wrapping sum for
** 128 bits, and large ones of both signs, merge exactly, over every
** profile and over a range that cuts the chunk (the in-range path). */
static void test_merge_sum_exact(void **state)
{
    static const int64_t v[] = { 2147483647, -2147483648LL, 2147483648LL,
                                 -2147483649LL, 1LL << 40, -3, 5,
                                 -(1LL << 40), 1LL << 62, -(1LL << 62) };
    const size_t nv = sizeof v / sizeof *v;
    char *dir = tu_tmpdir("limits");
    ember_db *db = tu_open(dir, 0);
    uint32_t a = tu_synthetic_stack(db, 1), b = tu_synthetic_stack(db, 2);
    ember_label one = { "job", "one" };
    ember_selector sel = { .sz = sizeof sel, .type = CPU };
    ember_merged *m = NULL;
    int64_t all_a = 0, cut_a = 0, all_b = 0;

    (void)state;
    for (size_t k = 0; k < nv; k++) {
        /* b holds small values only: the fast path alone */
        ember_sample s[] = { { a, v[k] }, { b, (int64_t)k - 4 } };
        ember_profile p = tu_profile(CPU, &one, 1, 1000 + (int64_t)k * 1000,
                                     s, 2);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
        all_a += v[k];
        all_b += (int64_t)k - 4;
        if (k >= 2 && k < 8)
            cut_a += v[k];
    }
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_OK);
    assert_int_equal(merged_value(m, a), all_a);
    assert_int_equal(merged_value(m, b), all_b);
    ember_merged_free(m);
    sel.from_ms = 3000;                 /* profiles 2 to 7 */
    sel.to_ms = 8000;
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_OK);
    assert_int_equal(merged_value(m, a), cut_a);
    ember_merged_free(m);
    ember_close(db);
    tu_rmdir(dir);
}

/* A chunk of large values (128-bit sums) then, 20 minutes later, a chunk of
** small ones (64-bit run sums): the add across them is checked too, exact
** when it fits and refused when it does not. */
static void test_merge_sum_across_chunks(void **state)
{
    char *dir = tu_tmpdir("limits");
    ember_db *db = tu_open(dir, 0);
    uint32_t a = tu_synthetic_stack(db, 1);
    ember_label fits = { "job", "fits" }, over = { "job", "over" };
    ember_selector sel = { .sz = sizeof sel, .type = CPU };
    ember_matcher mt = { "job", "fits", EMBER_MATCH_EQ };
    ember_merged *m = NULL;

    (void)state;
    for (int k = 0; k < 2; k++) {
        int64_t t = 1000 + k * 20 * 60000;
        ember_sample s1[] = { { a, k == 0 ? INT64_MAX - 20 : 10 } };
        ember_sample s2[] = { { a, k == 0 ? INT64_MAX - 5 : 10 } };
        ember_profile p1 = tu_profile(CPU, &fits, 1, t, s1, 1);
        ember_profile p2 = tu_profile(CPU, &over, 1, t, s2, 1);
        assert_int_equal(ember_append(db, &p1), EMBER_OK);
        assert_int_equal(ember_append(db, &p2), EMBER_OK);
    }
    sel.matchers = &mt;
    sel.nmatchers = 1;
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_OK);
    assert_int_equal(merged_value(m, a), INT64_MAX - 10);
    ember_merged_free(m);
    mt.value = "over";
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_ELIMIT);
    assert_null(m);
    ember_close(db);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pprof_import_memory),
        cmocka_unit_test(test_gzip_bomb_memory),
        cmocka_unit_test(test_gzip_members_exact),
        cmocka_unit_test(test_collapsed_sum_refused),
        cmocka_unit_test(test_append_sum_refused),
        cmocka_unit_test(test_merge_sum_fails),
        cmocka_unit_test(test_merge_sum_exact),
        cmocka_unit_test(test_merge_sum_across_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
