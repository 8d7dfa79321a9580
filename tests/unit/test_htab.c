/*
** tests/unit/test_htab.c: engine/htab.h, the one hash table template, in
** two instantiations of the two shapes the house uses: a map whose slots
** hold key and value (a free key marks a free slot, filled with 0xff), and
** an index whose slots hold a hash and an index into the caller's array,
** compared through a key struct. Growth, colliding hashes, clear, iteration
** and allocation failure.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* ---- a u64 -> u64 map --------------------------------------------------- */

typedef struct kv { uint64_t key, val; } kv;
typedef EM_HTAB_TYPE(kv) kv_table;

#define EM_HT_NAME kvt
#define EM_HT_TABLE kv_table
#define EM_HT_ENTRY kv
#define EM_HT_KEY uint64_t
#define EM_HT_IS_FREE(e) ((e)->key == UINT64_MAX)
#define EM_HT_HASH(e) em_mix64((e)->key)
#define EM_HT_MATCH(e, h, k) ((e)->key == (k))
#define EM_HT_WHAT "test map"
#define EM_HT_FREE_BYTE 0xff
#include "engine/htab.h"

static void test_map(void **state)
{
    kv_table t = { 0 };
    const size_t n = 100000;
    size_t i = 0, seen = 0;
    bool found;
    kv *e;

    (void)state;
    assert_null(kvt_find(&t, em_mix64(1), 1));
    for (uint64_t k = 0; k < n; k++) {
        e = kvt_insert(&t, em_mix64(k * 7), k * 7, &found);
        assert_non_null(e);
        assert_false(found);
        e->key = k * 7;
        e->val = k;
    }
    assert_int_equal(t.count, n);
    assert_true((t.mask + 1) / 2 >= n);         /* at most half full */
    for (uint64_t k = 0; k < n; k++) {
        e = kvt_find(&t, em_mix64(k * 7), k * 7);
        assert_non_null(e);
        assert_int_equal(e->val, k);
        assert_null(kvt_find(&t, em_mix64(k * 7 + 1), k * 7 + 1));
    }
    e = kvt_insert(&t, em_mix64(14), 14, &found);
    assert_true(found);
    assert_int_equal(e->val, 2);
    assert_int_equal(t.count, n);
    while ((e = kvt_next(&t, &i)) != NULL) {
        assert_int_equal(e->key, e->val * 7);
        seen++;
    }
    assert_int_equal(seen, n);
    kvt_clear(&t);
    assert_int_equal(t.count, 0);
    assert_null(kvt_find(&t, em_mix64(14), 14));
    i = 0;
    assert_null(kvt_next(&t, &i));
    kvt_free(&t);
    assert_null(t.slots);
    kvt_free(&t);                               /* twice is harmless */
}

/* ---- an index over the caller's strings --------------------------------- */

typedef struct slot { uint64_t hash; uint32_t idx1; } slot;
typedef EM_HTAB_TYPE(slot) str_index;
typedef struct probe { const char *const *strs; const char *s; } probe;

#define EM_HT_NAME sidx
#define EM_HT_TABLE str_index
#define EM_HT_ENTRY slot
#define EM_HT_KEY const probe *
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_MATCH(e, h, k) \
    ((e)->hash == (h) && strcmp((k)->strs[(e)->idx1 - 1], (k)->s) == 0)
#define EM_HT_WHAT "test index"
#define EM_HT_INITIAL 4
#include "engine/htab.h"

/* Every string hashes to one of two values: probes must walk chains of
** equal hashes and compare content. */
static uint64_t bad_hash(const char *s)
{
    return strlen(s) % 2;
}

static void test_index_collisions(void **state)
{
    enum { N = 500 };
    char *strs[N];
    str_index ix = { 0 };

    (void)state;
    for (int i = 0; i < N; i++) {
        char buf[16];
        probe p;
        bool found;
        slot *s;
        snprintf(buf, sizeof buf, "s%d", i);
        strs[i] = strdup(buf);
        p = (probe){ (const char *const *)strs, strs[i] };
        s = sidx_insert(&ix, bad_hash(strs[i]), &p, &found);
        assert_non_null(s);
        assert_false(found);
        *s = (slot){ bad_hash(strs[i]), (uint32_t)i + 1 };
    }
    for (int i = 0; i < N; i++) {
        probe p = { (const char *const *)strs, strs[i] };
        slot *s = sidx_find(&ix, bad_hash(strs[i]), &p);
        assert_non_null(s);
        assert_int_equal(s->idx1, i + 1);
    }
    {
        probe p = { (const char *const *)strs, "absent" };
        assert_null(sidx_find(&ix, bad_hash("absent"), &p));
    }
    sidx_free(&ix);
    for (int i = 0; i < N; i++)
        free(strs[i]);
}

/* reserve makes room ahead; a refused growth leaves the table whole. */
static void test_reserve(void **state)
{
    str_index ix = { 0 };
    const char *strs[] = { "a", "b" };
    probe p = { strs, "a" };
    bool found;
    slot *s;

    (void)state;
    assert_int_equal(sidx_reserve(&ix, 1000), EMBER_OK);
    assert_true(ix.mask + 1 >= 2000);
    assert_int_equal(sidx_reserve(&ix, SIZE_MAX / 2), EMBER_ELIMIT);
    s = sidx_insert(&ix, 1, &p, &found);
    *s = (slot){ 1, 1 };
    assert_int_equal(sidx_reserve(&ix, SIZE_MAX / 8), EMBER_ELIMIT);
    assert_non_null(sidx_find(&ix, 1, &p));
    sidx_free(&ix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_index_collisions),
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
