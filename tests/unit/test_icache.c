/*
** tests/unit/test_icache.c: the writer's intern cache (engine/icache.c)
** on its own: records of several tables, equal bytes in two tables,
** growth well past the first slot array, records too long to cache,
** clearing, and the location -> functions side table.
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

/* Record I of the test: its bytes in BUF (length returned) and hash. */
static size_t rec_of(uint32_t i, uint8_t buf[32], uint64_t *h)
{
    size_t n = (size_t)snprintf((char *)buf, 32, "record-%u", i);

    *h = em_hash64(buf, n, 0);
    return n;
}

static void test_put_get(void **state)
{
    enum { N = 20000 };                 /* several growths from 4096 slots */
    em_icache c;
    uint8_t buf[32] = { 0 };
    uint64_t h;
    uint32_t id;

    (void)state;
    memset(&c, 0, sizeof c);
    assert_false(em_icache_get(&c, 0, 1, buf, 0, &id));
    for (uint32_t i = 0; i < N; i++) {
        size_t n = rec_of(i, buf, &h);
        em_icache_put(&c, (int)(i % 3), h, buf, n, i * 10);
    }
    for (uint32_t i = 0; i < N; i++) {
        size_t n = rec_of(i, buf, &h);
        assert_true(em_icache_get(&c, (int)(i % 3), h, buf, n, &id));
        assert_int_equal(id, i * 10);
        /* the same bytes in another table are another record */
        assert_false(em_icache_get(&c, (int)(i % 3) + 1, h, buf, n, &id));
        /* a prefix with the same hash is not the record */
        assert_false(em_icache_get(&c, (int)(i % 3), h, buf, n - 1, &id));
    }
    em_icache_clear(&c);
    rec_of(7, buf, &h);
    assert_false(em_icache_get(&c, 1, h, buf, strlen((char *)buf), &id));
    em_icache_put(&c, 1, h, buf, strlen((char *)buf), 77);
    assert_true(em_icache_get(&c, 1, h, buf, strlen((char *)buf), &id));
    assert_int_equal(id, 77);
    em_icache_free(&c);
    em_icache_free(&c);                 /* twice is harmless */
}

static void test_long_and_empty(void **state)
{
    static uint8_t big[5000];
    em_icache c;
    uint32_t id;

    (void)state;
    memset(&c, 0, sizeof c);
    em_icache_put(&c, 0, 5, big, sizeof big, 1);       /* too long */
    assert_false(em_icache_get(&c, 0, 5, big, sizeof big, &id));
    em_icache_put(&c, 0, 6, big, 0, 2);                 /* empty is fine */
    assert_true(em_icache_get(&c, 0, 6, big, 0, &id));
    assert_int_equal(id, 2);
    em_icache_free(&c);
}

static void test_lfn(void **state)
{
    const uint32_t fns[] = { 4, 5, 6 };
    const uint32_t *got;
    em_icache c;
    size_t n;

    (void)state;
    memset(&c, 0, sizeof c);
    assert_false(em_icache_get_lfn(&c, 9, &got, &n));
    em_icache_put_lfn(&c, 9, fns, 3);
    em_icache_put_lfn(&c, 10000, fns + 1, 2);           /* lfn grows */
    assert_true(em_icache_get_lfn(&c, 9, &got, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(got, fns, sizeof fns);
    assert_true(em_icache_get_lfn(&c, 10000, &got, &n));
    assert_int_equal(n, 2);
    assert_int_equal(got[0], 5);
    em_icache_clear(&c);
    assert_false(em_icache_get_lfn(&c, 9, &got, &n));
    em_icache_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_long_and_empty),
        cmocka_unit_test(test_lfn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
