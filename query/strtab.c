/*
** query/strtab.c: interned strings with dense ids, the string table of a
** resolved profile. Renderers compare function ids, not names, and read a
** name only to print or sort it. All strings live in one growing byte array
** (offsets, not pointers, so growth never invalidates an id); the index is
** a table of engine/htab.h whose slots hold an id and the string's hash,
** so that growing it reads no string and a probe compares only strings
** whose hashes are equal.
*/
#include "query/query_int.h"

#define STRTAB_MAX_IDS (1u << 31)

struct em_strtab_slot {
    uint32_t hash;              /* low half of em_hash64: 2^32 slots at most */
    uint32_t id1;               /* id + 1; 0: a free slot */
};

/* What a probe compares a slot with: the LEN bytes at S, in table T. */
typedef struct strtab_key {
    const em_strtab *t;
    const char *s;
    size_t len;
} strtab_key;

/* Whether string ID is the LEN bytes at S. */
static bool tab_equal(const em_strtab *t, uint32_t id, const char *s,
                      size_t len)
{
    const char *have = t->bytes + t->off[id];
    return strncmp(have, s, len) == 0 && have[len] == '\0';
}

#define EM_HT_NAME strix
#define EM_HT_TABLE struct em_strtab_index
#define EM_HT_ENTRY struct em_strtab_slot
#define EM_HT_KEY const strtab_key *
#define EM_HT_IS_FREE(e) ((e)->id1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_MATCH(e, h, k)                                                 \
    ((e)->hash == (h) && tab_equal((k)->t, (e)->id1 - 1, (k)->s, (k)->len))
#define EM_HT_WHAT "string table"
#include "engine/htab.h"

/* Makes room for one more string of LEN bytes, so that adding it, once
** the index has handed out its slot, cannot fail. */
static int tab_room(em_strtab *t, size_t len)
{
    size_t *off = em_grow(t->off, &t->cap_ids, (size_t)t->count + 1,
                          sizeof *off);
    char *bytes;

    if (off == NULL)
        return em_err(EMBER_ENOMEM, "string table: %u ids", t->count + 1);
    t->off = off;
    bytes = em_grow(t->bytes, &t->cap, t->len + len + 1, 1);
    if (bytes == NULL)
        return em_err(EMBER_ENOMEM, "string table: %zu bytes",
                      t->len + len + 1);
    t->bytes = bytes;
    return EMBER_OK;
}

int em_strtab_intern(em_strtab *t, const char *s, size_t len, uint32_t *id)
{
    uint32_t h = (uint32_t)em_hash64(s, len, 0x5eed);
    strtab_key k = { t, s, len };
    struct em_strtab_slot *e;
    bool found;
    int rc;

    if (t->count >= STRTAB_MAX_IDS)
        return em_err(EMBER_ELIMIT, "string table: more than %u strings",
                      STRTAB_MAX_IDS);
    if ((rc = tab_room(t, len)) != EMBER_OK)
        return rc;
    if ((e = strix_insert(&t->index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;        /* strix_insert said why */
    if (!found) {
        memcpy(t->bytes + t->len, s, len);
        t->bytes[t->len + len] = '\0';
        t->off[t->count] = t->len;
        t->len += len + 1;
        *e = (struct em_strtab_slot){ h, t->count + 1 };
        t->count++;
    }
    *id = e->id1 - 1;
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
    strix_free(&t->index);
    memset(t, 0, sizeof *t);
}
