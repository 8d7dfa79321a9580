/*
** query/strtab.c: interned strings with dense ids, the string table of a
** resolved profile. Renderers compare function ids, not names, and read a
** name only to print or sort it. All strings live in one growing byte array
** (offsets, not pointers, so growth never invalidates an id); the index is
** open addressing over ids, hashed with the engine's content hash.
*/
#include "query/query_int.h"

#define STRTAB_MAX_IDS (1u << 31)

static uint32_t tab_slot(const char *s, size_t len, uint32_t nslots)
{
    return (uint32_t)em_hash64(s, len, 0x5eed) & (nslots - 1);
}

static bool tab_equal(const em_strtab *t, uint32_t id, const char *s,
                      size_t len)
{
    const char *have = t->bytes + t->off[id];
    return strncmp(have, s, len) == 0 && have[len] == '\0';
}

/* Rebuilds the index at twice the size: keeps the load under one half. */
static int tab_rehash(em_strtab *t)
{
    uint32_t n = t->nslots == 0 ? 64 : t->nslots * 2;
    uint32_t *slots = em_calloc(n, sizeof *slots);

    if (slots == NULL)
        return em_err(EMBER_ENOMEM, "string table: %u slots", n);
    for (uint32_t id = 0; id < t->count; id++) {
        const char *s = t->bytes + t->off[id];
        uint32_t i = tab_slot(s, strlen(s), n);
        while (slots[i] != 0)
            i = (i + 1) & (n - 1);
        slots[i] = id + 1;
    }
    em_free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return EMBER_OK;
}

/* Appends the string's bytes and its offset; the index is updated by the
** caller. */
static int tab_append(em_strtab *t, const char *s, size_t len)
{
    if (t->count == t->cap_ids) {
        uint32_t cap = t->cap_ids == 0 ? 64 : t->cap_ids * 2;
        size_t *off = em_realloc(t->off, cap * sizeof *off);
        if (off == NULL)
            return em_err(EMBER_ENOMEM, "string table: %u ids", cap);
        t->off = off;
        t->cap_ids = cap;
    }
    if (len + 1 > t->cap - t->len) {
        size_t cap = t->cap == 0 ? 4096 : t->cap;
        char *bytes;
        while (cap - t->len < len + 1) {
            if (cap > SIZE_MAX / 2)
                return em_err(EMBER_ELIMIT, "string table: too large");
            cap *= 2;
        }
        bytes = em_realloc(t->bytes, cap);
        if (bytes == NULL)
            return em_err(EMBER_ENOMEM, "string table: %zu bytes", cap);
        t->bytes = bytes;
        t->cap = cap;
    }
    memcpy(t->bytes + t->len, s, len);
    t->bytes[t->len + len] = '\0';
    t->off[t->count] = t->len;
    t->len += len + 1;
    return EMBER_OK;
}

int em_strtab_intern(em_strtab *t, const char *s, size_t len, uint32_t *id)
{
    uint32_t i;
    int rc;

    if (t->count >= STRTAB_MAX_IDS)
        return em_err(EMBER_ELIMIT, "string table: more than %u strings",
                      STRTAB_MAX_IDS);
    if ((t->count + 1) * 2 > t->nslots && (rc = tab_rehash(t)) != EMBER_OK)
        return rc;
    for (i = tab_slot(s, len, t->nslots); t->slots[i] != 0;
         i = (i + 1) & (t->nslots - 1)) {
        if (tab_equal(t, t->slots[i] - 1, s, len)) {
            *id = t->slots[i] - 1;
            return EMBER_OK;
        }
    }
    if ((rc = tab_append(t, s, len)) != EMBER_OK)
        return rc;
    t->slots[i] = t->count + 1;
    *id = t->count++;
    return EMBER_OK;
}

const char *em_strtab_get(const em_strtab *t, uint32_t id)
{
    return t->bytes + t->off[id];
}

void em_strtab_free(em_strtab *t)
{
    em_free(t->bytes);
    em_free(t->off);
    em_free(t->slots);
    memset(t, 0, sizeof *t);
}
