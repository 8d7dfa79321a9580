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

void em_icache_clear(em_icache *c)
{
    if (c->used > 0)
        memset(c->slots, 0, (c->mask + 1) * sizeof *c->slots);
    c->used = 0;
    c->nbytes = 0;
    if (c->nlfn > 0)
        memset(c->lfn, 0, c->nlfn * sizeof *c->lfn);
    c->nfns = 0;
}

void em_icache_free(em_icache *c)
{
    free(c->slots);
    free(c->bytes);
    free(c->lfn);
    free(c->fns);
    memset(c, 0, sizeof *c);
}

bool em_icache_get(const em_icache *c, int table, uint64_t h,
                   const uint8_t *rec, size_t len, uint32_t *id)
{
    if (c->slots == NULL)
        return false;
    for (size_t j = (size_t)h & c->mask; c->slots[j].table1 != 0;
         j = (j + 1) & c->mask) {
        const struct em_icache_slot *s = &c->slots[j];
        if (s->hash == h && s->table1 == (uint32_t)table + 1 &&
            s->len == len && memcmp(c->bytes + s->off, rec, len) == 0) {
            *id = s->id;
            return true;
        }
    }
    return false;
}

/* Doubles the slots, rehashing by the stored hashes; false when out of
** memory. */
static bool icache_grow(em_icache *c)
{
    size_t n = c->slots == NULL ? ICACHE_INITIAL : (c->mask + 1) * 2;
    struct em_icache_slot *ns = calloc(n, sizeof *ns);

    if (ns == NULL)
        return false;
    for (size_t i = 0; c->slots != NULL && i <= c->mask; i++) {
        size_t j = (size_t)c->slots[i].hash & (n - 1);
        if (c->slots[i].table1 == 0)
            continue;
        while (ns[j].table1 != 0)
            j = (j + 1) & (n - 1);
        ns[j] = c->slots[i];
    }
    free(c->slots);
    c->slots = ns;
    c->mask = n - 1;
    return true;
}

/* Makes room for LEN more record bytes; false when out of memory. */
static bool icache_room(em_icache *c, size_t len)
{
    size_t cap = c->cap != 0 ? c->cap : 65536;
    uint8_t *nb;

    if (c->nbytes + len <= c->cap)
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
    size_t j;

    if (len > ICACHE_MAX_REC)
        return;
    if (c->used >= ICACHE_MAX_ENTRIES || c->nbytes + len > ICACHE_MAX_BYTES)
        em_icache_clear(c);         /* start over rather than evict */
    if ((c->slots == NULL || (c->used + 1) * 2 > c->mask + 1) &&
        !icache_grow(c))
        return;
    if (!icache_room(c, len))
        return;
    for (j = (size_t)h & c->mask; c->slots[j].table1 != 0;
         j = (j + 1) & c->mask)
        ;
    if (len > 0)
        memcpy(c->bytes + c->nbytes, rec, len);
    c->slots[j] = (struct em_icache_slot){ h, (uint32_t)c->nbytes,
                                           (uint32_t)len, id,
                                           (uint32_t)table + 1 };
    c->nbytes += len;
    c->used++;
}

/* ---- location functions -------------------------------------------------- */

/* Makes lfn cover LOC and fns hold N more; false when it cannot. */
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
