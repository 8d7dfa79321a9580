/*
** query/map64.c: a uint64 -> uint64 hash map with open addressing and
** linear probing, kept at most half full so probes stay short. Keys are
** mixed with a 64-bit finalizer because the keys here (ids, id pairs) are
** small dense integers that would otherwise cluster.
*/
#include "query/query_int.h"

static size_t map_slot(uint64_t key, size_t cap)
{
    key ^= key >> 33;               /* murmur3's fmix64 */
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

bool em_map64_get(const em_map64 *m, uint64_t key, uint64_t *val)
{
    if (m->cap == 0)
        return false;
    for (size_t i = map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->used[i])
            return false;
        if (m->keys[i] == key) {
            if (val != NULL)
                *val = m->vals[i];
            return true;
        }
    }
}

/* Places KEY without growing; the caller guarantees a free slot. */
static void map_place(em_map64 *m, uint64_t key, uint64_t val)
{
    size_t i = map_slot(key, m->cap);

    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->used[i]) {
        m->used[i] = 1;
        m->keys[i] = key;
        m->count++;
    }
    m->vals[i] = val;
}

static int map_grow(em_map64 *m)
{
    size_t cap = m->cap == 0 ? 64 : m->cap * 2;
    em_map64 n = { 0 };

    if (cap > SIZE_MAX / 2 / sizeof(uint64_t))
        return em_err(EMBER_ELIMIT, "hash map: too many entries");
    n.keys = em_malloc(cap * sizeof *n.keys);
    n.vals = em_malloc(cap * sizeof *n.vals);
    n.used = em_calloc(cap, 1);
    n.cap = cap;
    if (n.keys == NULL || n.vals == NULL || n.used == NULL) {
        em_map64_free(&n);
        return em_err(EMBER_ENOMEM, "hash map: %zu slots", cap);
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i])
            map_place(&n, m->keys[i], m->vals[i]);
    em_map64_free(m);
    *m = n;
    return EMBER_OK;
}

int em_map64_put(em_map64 *m, uint64_t key, uint64_t val)
{
    if ((m->count + 1) * 2 > m->cap) {
        int rc = map_grow(m);
        if (rc != EMBER_OK)
            return rc;
    }
    map_place(m, key, val);
    return EMBER_OK;
}

void em_map64_free(em_map64 *m)
{
    em_free(m->keys);
    em_free(m->vals);
    em_free(m->used);
    memset(m, 0, sizeof *m);
}
