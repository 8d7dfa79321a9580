/*
** engine/icache.c: the writer's intern cache, record bytes -> id per table,
** in front of the tables' hash indexes. Importing many files interns the
** same functions, locations and stacks again and again; each is a B-tree
** walk in LMDB, where the cache is one probe and one memcmp.
**
** Safe because a committed record never changes id and is never deleted.
** What a transaction interns is cached at once, so the cache may hold ids
** of a transaction that later aborts: every abort, and every failed
** commit, clears it (em_icache_clear; aborts are rare). Only the thread
** holding the writer lock uses it.
**
** Best effort: when it cannot grow it stops caching or starts over, never
** fails. It allocates with malloc, not em_malloc, so that the tests that
** fail every em_malloc in turn walk only the failure points that matter.
*/
#include <stdlib.h>

#include "engine/engine.h"
#include "engine/store.h"

#define ICACHE_MAX_ENTRIES (1u << 20)
#define ICACHE_MAX_BYTES (64u << 20)
#define ICACHE_MAX_REC 4096             /* longer records are not cached */
#define ICACHE_INITIAL 4096             /* slots */
#define LFN_MAX_LOCS (1u << 24)         /* location ids cached at most */
#define LFN_MAX_FNS (1u << 25)          /* function ids cached at most */
#define LFN_COUNT_BITS 11               /* EM_MAX_LINES fits */

struct em_icache_slot {
    uint64_t hash;
    uint32_t off;                       /* of the record in bytes */
    uint32_t len;
    uint32_t id;
    uint32_t table1;                    /* table + 1; 0: a free slot */
};

/* What a probe compares a slot with: the record and where records live. */
typedef struct icache_key {
    const uint8_t *bytes;               /* the cache's record bytes */
    uint32_t table1;
    const uint8_t *rec;
    size_t len;
} icache_key;

/* Slots from malloc, not em_malloc (the header says why); when they cannot
** grow, em_icache_put does not cache. */
#define EM_HT_NAME ictab
#define EM_HT_TABLE em_icache_tab
#define EM_HT_ENTRY struct em_icache_slot
#define EM_HT_KEY const icache_key *
#define EM_HT_IS_FREE(e) ((e)->table1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_MATCH(e, h, k)                                                 \
    ((e)->hash == (h) && (e)->table1 == (k)->table1 &&                       \
     (e)->len == (k)->len &&                                                 \
     memcmp((k)->bytes + (e)->off, (k)->rec, (k)->len) == 0)
#define EM_HT_WHAT "intern cache"
#define EM_HT_INITIAL ICACHE_INITIAL
#define EM_HT_ALLOC(n) malloc(n)
#define EM_HT_RELEASE(p) free(p)
#include "engine/htab.h"

void em_icache_clear(em_icache *c)
{
    ictab_clear(&c->tab);
    c->nbytes = 0;
    if (c->nlfn > 0)
        memset(c->lfn, 0, c->nlfn * sizeof *c->lfn);
    c->nfns = 0;
}

void em_icache_free(em_icache *c)
{
    ictab_free(&c->tab);
    free(c->bytes);
    free(c->lfn);
    free(c->fns);
    memset(c, 0, sizeof *c);
}

bool em_icache_get(const em_icache *c, int table, uint64_t h,
                   const uint8_t *rec, size_t len, uint32_t *id)
{
    icache_key k = { c->bytes, (uint32_t)table + 1, rec, len };
    const struct em_icache_slot *s = ictab_find(&c->tab, h, &k);

    if (s != NULL)
        *id = s->id;
    return s != NULL;
}

/* Makes room for LEN more record bytes; false when out of memory. By hand,
** not em_grow: em_grow allocates through em_realloc, whose test hook would
** make every record cached a failure point of the OOM tests. */
static bool icache_room(em_icache *c, size_t len)
{
    size_t cap = c->cap != 0 ? c->cap : 65536;
    uint8_t *nb;

    /* bytes even for an empty first record: memcmp takes no NULL */
    if (c->bytes != NULL && c->nbytes + len <= c->cap)
        return true;
    while (cap < c->nbytes + len)
        cap *= 2;
    nb = realloc(c->bytes, cap);
    if (nb == NULL)
        return false;
    c->bytes = nb;
    c->cap = cap;
    return true;
}

void em_icache_put(em_icache *c, int table, uint64_t h, const uint8_t *rec,
                   size_t len, uint32_t id)
{
    icache_key k = { c->bytes, (uint32_t)table + 1, rec, len };
    struct em_icache_slot *s;
    bool found;

    if (len > ICACHE_MAX_REC)
        return;
    if (c->tab.count >= ICACHE_MAX_ENTRIES ||
        c->nbytes + len > ICACHE_MAX_BYTES)
        em_icache_clear(c);         /* start over rather than evict */
    if (!icache_room(c, len))
        return;
    k.bytes = c->bytes;
    if ((s = ictab_insert(&c->tab, h, &k, &found)) == NULL || found)
        return;                     /* could not grow, or already cached */
    if (len > 0)
        memcpy(c->bytes + c->nbytes, rec, len);
    *s = (struct em_icache_slot){ h, (uint32_t)c->nbytes, (uint32_t)len, id,
                                  (uint32_t)table + 1 };
    c->nbytes += len;
}

/* ---- location functions -------------------------------------------------- */

/* Makes lfn cover LOC and fns hold N more; false when it cannot. By hand,
** as icache_room is. */
static bool lfn_room(em_icache *c, uint32_t loc, size_t n)
{
    if (loc >= LFN_MAX_LOCS || c->nfns + n > LFN_MAX_FNS)
        return false;
    if (loc >= c->nlfn) {
        size_t cap = c->nlfn != 0 ? c->nlfn : 4096;
        uint64_t *nl;
        while (cap <= loc)
            cap *= 2;
        if ((nl = realloc(c->lfn, cap * sizeof *nl)) == NULL)
            return false;
        memset(nl + c->nlfn, 0, (cap - c->nlfn) * sizeof *nl);
        c->lfn = nl;
        c->nlfn = cap;
    }
    if (c->nfns + n > c->capfns) {
        size_t cap = c->capfns != 0 ? c->capfns : 16384;
        uint32_t *nf;
        while (cap < c->nfns + n)
            cap *= 2;
        if ((nf = realloc(c->fns, cap * sizeof *nf)) == NULL)
            return false;
        c->fns = nf;
        c->capfns = cap;
    }
    return true;
}

void em_icache_put_lfn(em_icache *c, uint32_t loc, const uint32_t *fns,
                       size_t n)
{
    if (n >= (1u << LFN_COUNT_BITS) || !lfn_room(c, loc, n) ||
        c->lfn[loc] != 0)
        return;
    if (n > 0)
        memcpy(c->fns + c->nfns, fns, n * sizeof *fns);
    c->lfn[loc] = ((uint64_t)c->nfns + 1) << LFN_COUNT_BITS | n;
    c->nfns += n;
}

bool em_icache_get_lfn(const em_icache *c, uint32_t loc,
                       const uint32_t **fns, size_t *n)
{
    uint64_t e = loc < c->nlfn ? c->lfn[loc] : 0;

    if (e == 0)
        return false;
    *fns = c->fns + ((e >> LFN_COUNT_BITS) - 1);
    *n = (size_t)(e & ((1u << LFN_COUNT_BITS) - 1));
    return true;
}
