/*
** query/map64.c: a uint64 -> uint64 hash map, a table of engine/htab.h
** whose slots hold key and value. Keys are mixed with em_mix64 because the
** keys here (ids, id pairs) are small dense integers that would otherwise
** cluster.
*/
#include "query/query_int.h"

/* The key that marks a free slot. A map holding it as a key keeps it out of
** the slots, so that one array of key-value pairs is all a probe reads:
** one cache line, where separate key, value and used arrays were three. */
#define EM_MAP64_FREE UINT64_MAX

#define EM_HT_NAME map64
#define EM_HT_TABLE em_map64
#define EM_HT_ENTRY em_map64_slot
#define EM_HT_KEY uint64_t
#define EM_HT_IS_FREE(e) ((e)->key == EM_MAP64_FREE)
#define EM_HT_HASH(e) em_mix64((e)->key)
#define EM_HT_MATCH(e, h, k) ((e)->key == (k))
#define EM_HT_WHAT "hash map"
#define EM_HT_FREE_BYTE 0xff            /* every key EM_MAP64_FREE */
#include "engine/htab.h"

bool em_map64_get(const em_map64 *m, uint64_t key, uint64_t *val)
{
    const em_map64_slot *s;

    if (key == EM_MAP64_FREE) {
        if (m->has_free_key && val != NULL)
            *val = m->free_key_val;
        return m->has_free_key;
    }
    s = map64_find(m, em_mix64(key), key);
    if (s != NULL && val != NULL)
        *val = s->val;
    return s != NULL;
}

int em_map64_put(em_map64 *m, uint64_t key, uint64_t val)
{
    em_map64_slot *s;
    bool found;

    if (key == EM_MAP64_FREE) {
        m->has_free_key = true;
        m->free_key_val = val;
        return EMBER_OK;
    }
    /* NULL: out of memory, or past SIZE_MAX / 4 entries, which is as good
    ** as out of memory; the message says which */
    if ((s = map64_insert(m, em_mix64(key), key, &found)) == NULL)
        return EMBER_ENOMEM;
    s->key = key;
    s->val = val;
    return EMBER_OK;
}

void em_map64_free(em_map64 *m)
{
    map64_free(m);
    memset(m, 0, sizeof *m);
}
