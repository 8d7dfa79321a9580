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

/* The key that marks a free slot. A map holding it as a key keeps it out of
** the slots, so that one array of key-value pairs is all a probe reads:
** one cache line, where separate key, value and used arrays were three. */
#define EM_MAP64_FREE UINT64_MAX

bool em_map64_get(const em_map64 *m, uint64_t key, uint64_t *val)
{
    if (key == EM_MAP64_FREE) {
        if (m->has_free_key && val != NULL)
            *val = m->free_key_val;
        return m->has_free_key;
    }
    if (m->cap == 0)
        return false;
    for (size_t i = map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        const em_map64_slot *s = &m->slots[i];
        if (s->key == key) {
            if (val != NULL)
                *val = s->val;
            return true;
        }
        if (s->key == EM_MAP64_FREE)
            return false;
    }
}

/* Places KEY (not EM_MAP64_FREE) without growing; the caller guarantees a
** free slot. */
static void map_place(em_map64 *m, uint64_t key, uint64_t val)
{
    size_t i = map_slot(key, m->cap);

    while (m->slots[i].key != EM_MAP64_FREE && m->slots[i].key != key)
        i = (i + 1) & (m->cap - 1);
    if (m->slots[i].key == EM_MAP64_FREE) {
        m->slots[i].key = key;
        m->count++;
    }
    m->slots[i].val = val;
}

static int map_grow(em_map64 *m)
{
    size_t cap = m->cap == 0 ? 64 : m->cap * 2;
    em_map64_slot *ns;

    if (cap > SIZE_MAX / 2 / sizeof *ns)
        return em_err(EMBER_ELIMIT, "hash map: too many entries");
    ns = em_malloc(cap * sizeof *ns);
    if (ns == NULL)
        return em_err(EMBER_ENOMEM, "hash map: %zu slots", cap);
    memset(ns, 0xff, cap * sizeof *ns);     /* every key EM_MAP64_FREE */
    for (size_t i = 0; i < m->cap; i++) {
        const em_map64_slot *o = &m->slots[i];
        size_t j = map_slot(o->key, cap);
        if (o->key == EM_MAP64_FREE)
            continue;
        while (ns[j].key != EM_MAP64_FREE)
            j = (j + 1) & (cap - 1);
        ns[j] = *o;
    }
    em_free(m->slots);
    m->slots = ns;
    m->cap = cap;
    return EMBER_OK;
}

int em_map64_put(em_map64 *m, uint64_t key, uint64_t val)
{
    if (key == EM_MAP64_FREE) {
        m->has_free_key = true;
        m->free_key_val = val;
        return EMBER_OK;
    }
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
    em_free(m->slots);
    memset(m, 0, sizeof *m);
}
