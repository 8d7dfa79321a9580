/*
** tests/unit/test_staged.c: the postings staging table (engine/postings.c)
** on its own: keys of several lengths through several growths, ids of a
** key gathered into its bitmap, lookup, iteration, clearing, and each
** allocation failing in turn (the table stays whole and leaks nothing).
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/store.h"

/* Key I: "k" and I in decimal, so that lengths differ. */
static size_t key_of(uint32_t i, char buf[16])
{
    return (size_t)snprintf(buf, 16, "k%u", i);
}

/* Counts the entries em_staged_each visits and their ids. */
static int count_each(void *ctx, const void *key, size_t klen,
                      const roaring_bitmap_t *bm)
{
    uint64_t *n = ctx;

    (void)key;
    (void)klen;
    n[0]++;
    n[1] += roaring_bitmap_get_cardinality(bm);
    return EMBER_OK;
}

static void test_add_find(void **state)
{
    enum { N = 5000 };
    em_staged s;
    uint64_t n[2] = { 0, 0 };
    char buf[16];

    (void)state;
    memset(&s, 0, sizeof s);
    assert_null(em_staged_find(&s, "k1", 2));
    for (uint32_t i = 0; i < N; i++) {
        size_t len = key_of(i, buf);
        assert_int_equal(em_staged_add(&s, buf, len, i), EMBER_OK);
        assert_int_equal(em_staged_add(&s, buf, len, i + N), EMBER_OK);
        assert_int_equal(em_staged_add(&s, buf, len, i + N), EMBER_OK);
    }
    assert_int_equal(s.count, N);
    for (uint32_t i = 0; i < N; i++) {
        size_t len = key_of(i, buf);
        const roaring_bitmap_t *bm = em_staged_find(&s, buf, len);
        assert_non_null(bm);
        assert_int_equal(roaring_bitmap_get_cardinality(bm), 2);
        assert_true(roaring_bitmap_contains(bm, i));
        assert_true(roaring_bitmap_contains(bm, i + N));
        len = key_of(i + N, buf);           /* never added */
        assert_null(em_staged_find(&s, buf, len));
    }
    assert_int_equal(em_staged_each(&s, count_each, n), EMBER_OK);
    assert_int_equal(n[0], N);
    assert_int_equal(n[1], 2 * N);
    em_staged_clear(&s);
    assert_int_equal(s.count, 0);
    assert_null(em_staged_find(&s, "k1", 2));
    assert_int_equal(em_staged_add(&s, "k1", 2, 9), EMBER_OK);
    assert_non_null(em_staged_find(&s, "k1", 2));
    em_staged_free(&s);
    em_staged_free(&s);                 /* twice is harmless */
}

/* Adds keys 0..N-1 with the Nth allocation from the start failing, for
** every N until none fails: each failure is EMBER_ENOMEM and leaves the
** keys added so far in the table, whole. */
static void test_oom(void **state)
{
    enum { N = 200 };
    char buf[16];

    (void)state;
    for (uint64_t fail = 1;; fail++) {
        em_staged s;
        uint32_t added = 0;
        uint64_t n[2] = { 0, 0 };
        int rc = EMBER_OK;

        memset(&s, 0, sizeof s);
        em_alloc_fail_at(fail);
        while (added < N &&
               (rc = em_staged_add(&s, buf, key_of(added, buf), added)) ==
                   EMBER_OK)
            added++;
        em_alloc_fail_at(0);
        /* the failing key may be in, with no ids, when its first id
        ** could not be staged */
        assert_true(s.count == added || s.count == added + 1);
        assert_int_equal(em_staged_each(&s, count_each, n), EMBER_OK);
        assert_int_equal(n[0], s.count);
        assert_int_equal(n[1], added);
        for (uint32_t i = 0; i < added; i++)
            assert_non_null(em_staged_find(&s, buf, key_of(i, buf)));
        em_staged_free(&s);
        if (added == N)
            break;
        assert_int_equal(rc, EMBER_ENOMEM);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
