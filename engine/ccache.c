/*
** engine/ccache.c: the decoded-chunk cache of a database handle (a block
** cache, as RocksDB's and Prometheus' chunk caches keep). Decoding a chunk
** (zstd, then a varint per sample) is most of what a warm query costs;
** sealed chunks never change, so what one query decoded serves the next.
**
** Keys: the source and place of a chunk (EM_CCACHE_KEY_LEN) plus its
** stored CRC-32 and length, all read from the stored bytes without checking them
** (LMDB is mapped, so this costs a header's worth of reads). A chunk
** rewritten under the same key has another checksum, so a cached entry is
** never served for bytes it was not decoded from. Head (unsealed) chunks
** are not cached (the reader decides): they live only until their window
** seals.
**
** Entries: a decoded em_chunk whose parts (EM_PART_*) grow as readers need
** them (a merge of whole chunks needs no profile indexes; a later narrower
** query may add them), each part set in its own allocation, plus a memo of
** the stacks one focus or ignore set keeps (engine/read.c). Arrays never
** change once published, so a reader copies the entry's pointers under the
** lock and reads them without it. Entries are reference-counted: eviction
** unlinks an entry and the last holder frees it.
**
** Admission: a chunk is kept on its second miss (see admit()).
**
** Budget: LRU over the bytes of the decoded arrays plus each entry's
** header. A read context (an em_rtxn: one query) carries an epoch; making
** room never evicts an entry the same epoch used, so a query that reads
** more than the budget keeps the first budget's worth cached and decodes
** the rest without caching it, instead of evicting its own entries in a
** loop (LRU's worst case: a repeated scan larger than the cache would
** never hit).
*/
#include "engine/store.h"

#define CC_MIN_BUCKETS 1024u
#define CC_GHOST_PER (16u << 10)    /* a ghost slot per this many bytes */
#define CC_GHOST_MIN 1024u
#define CC_GHOST_MAX (1u << 20)
#define CC_MAX_MEMS 5               /* one per part at most */

struct em_cent {
    uint8_t key[EM_CCACHE_KEY_LEN];
    uint32_t crc;                   /* the stored checksum */
    uint64_t len;                   /* the stored length */
    uint64_t hash;
    em_chunk view;                  /* h and the parts decoded so far */
    void *mem[CC_MAX_MEMS];         /* the allocations behind view */
    unsigned nmem;
    uint64_t bytes;                 /* charged to the budget */
    uint64_t epoch;                 /* the read context that used it last */
    uint64_t memo_id;               /* the keep set memo answers for */
    em_kept *memo;                  /* the stacks it keeps */
    uint32_t nmemo;
    unsigned refs;                  /* holders outside the cache */
    bool dead;                      /* evicted while held */
    em_cent *hnext;                 /* hash chain */
    em_cent *prev, *next;           /* LRU list, head most recent */
};

struct em_ccache {
    pthread_mutex_t mu;
    uint64_t budget, used;          /* bytes */
    uint64_t *ghost;                /* hashes of chunks missed once */
    size_t ghost_mask;
    em_cent **buckets;
    size_t nbuckets, n;
    em_cent *head, *tail;
    uint64_t epoch;                 /* last handed out */
    uint64_t hits, misses, evictions;
};

static uint64_t cent_hash(const uint8_t *key, uint32_t crc, uint64_t len)
{
    return em_hash64(key, EM_CCACHE_KEY_LEN, ((uint64_t)crc << 32) ^ len);
}

static bool cent_is(const em_cent *e, uint64_t h, const uint8_t *key,
                    uint32_t crc, uint64_t len)
{
    return e->hash == h && e->crc == crc && e->len == len &&
           memcmp(e->key, key, EM_CCACHE_KEY_LEN) == 0;
}

static void cent_free(em_cent *e)
{
    for (unsigned i = 0; i < e->nmem; i++)
        em_free(e->mem[i]);
    em_free(e->memo);
    em_free(e);
}

int em_ccache_new(uint64_t budget, em_ccache **out)
{
    em_ccache *c = em_calloc(1, sizeof *c);

    *out = NULL;
    if (c == NULL)
        return em_err(EMBER_ENOMEM, "chunk cache");
    c->buckets = em_calloc(CC_MIN_BUCKETS, sizeof *c->buckets);
    if (c->buckets == NULL) {
        em_free(c);
        return em_err(EMBER_ENOMEM, "chunk cache: %u buckets",
                      CC_MIN_BUCKETS);
    }
    c->nbuckets = CC_MIN_BUCKETS;
    c->budget = budget;
    c->ghost_mask = CC_GHOST_MIN;
    while (c->ghost_mask < CC_GHOST_MAX &&
           c->ghost_mask < budget / CC_GHOST_PER)
        c->ghost_mask *= 2;
    c->ghost = em_calloc(c->ghost_mask, sizeof *c->ghost);
    c->ghost_mask--;
    if (c->ghost == NULL) {
        em_free(c->buckets);
        em_free(c);
        return em_err(EMBER_ENOMEM, "chunk cache: ghost table");
    }
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return EMBER_OK;
}

void em_ccache_free(em_ccache *c)
{
    if (c == NULL)
        return;
    for (em_cent *e = c->head, *next; e != NULL; e = next) {
        next = e->next;
        cent_free(e);       /* no reader is left: the handle is closing */
    }
    pthread_mutex_destroy(&c->mu);
    em_free(c->buckets);
    em_free(c->ghost);
    em_free(c);
}

uint64_t em_ccache_epoch(em_ccache *c)
{
    uint64_t e;

    if (c == NULL)
        return 0;
    pthread_mutex_lock(&c->mu);
    e = ++c->epoch;
    pthread_mutex_unlock(&c->mu);
    return e;
}

/* ---- the list and the table (under the lock) ---------------------------- */

static void lru_unlink(em_ccache *c, em_cent *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push(em_ccache *c, em_cent *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head != NULL)
        c->head->prev = e;
    c->head = e;
    if (c->tail == NULL)
        c->tail = e;
}

static em_cent **bucket_of(em_ccache *c, uint64_t h)
{
    return &c->buckets[h & (c->nbuckets - 1)];
}

/* Doubles the table when it holds more entries than buckets; best effort:
** without memory the chains just grow longer. */
static void table_grow(em_ccache *c)
{
    size_t nb = c->nbuckets * 2;
    em_cent **b;

    if (c->n <= c->nbuckets || (b = em_calloc(nb, sizeof *b)) == NULL)
        return;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (em_cent *e = c->buckets[i], *next; e != NULL; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    em_free(c->buckets);
    c->buckets = b;
    c->nbuckets = nb;
}

static void evict(em_ccache *c, em_cent *e)
{
    em_cent **p = bucket_of(c, e->hash);

    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    lru_unlink(c, e);
    c->used -= e->bytes;
    c->n--;
    c->evictions++;
    if (e->refs == 0)
        cent_free(e);
    else
        e->dead = true;     /* its last holder frees it */
}

/* Evicts least recently used entries until NEED more bytes fit, except
** those EPOCH used: false (having evicted some perhaps) when they do not
** fit without those. */
static bool make_room(em_ccache *c, uint64_t need, uint64_t epoch)
{
    if (need > c->budget)
        return false;
    while (c->used + need > c->budget) {
        if (c->tail == NULL || c->tail->epoch == epoch)
            return false;
        evict(c, c->tail);
    }
    return true;
}

/* ---- lookups and inserts ------------------------------------------------ */

em_cent *em_ccache_get(em_ccache *c, const uint8_t *key, uint32_t crc,
                       uint64_t len, uint64_t epoch, em_chunk *view)
{
    uint64_t h = cent_hash(key, crc, len);
    em_cent *e;

    pthread_mutex_lock(&c->mu);
    for (e = *bucket_of(c, h); e != NULL && !cent_is(e, h, key, crc, len);
         e = e->hnext)
        ;
    if (e != NULL) {
        e->refs++;
        e->epoch = epoch;
        lru_unlink(c, e);
        lru_push(c, e);
        *view = e->view;
        view->mem = NULL;
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return e;
}

/* True when the chunk of hash H missed before, recently: a chunk is kept
** on its second miss only. Filling the cache costs a page fault per 4 KiB
** of new memory, which made a one-shot query (a CLI call) half again as
** slow; the ghost table lets only a repeated read pay it. It is 4-way
** set-associative (a direct-mapped one kept two chunks of one slot from
** ever being admitted, each forgetting the other) and forgets at random
** when a set is full. */
static bool admit(em_ccache *c, uint64_t h)
{
    uint64_t *set = &c->ghost[h & c->ghost_mask & ~(uint64_t)3];
    int empty = -1;
    bool again = false;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < 4 && !again; i++) {
        again = set[i] == h;
        if (again)
            set[i] = 0;
        else if (set[i] == 0 && empty < 0)
            empty = i;
    }
    if (!again)
        set[empty >= 0 ? empty : (int)(h >> 62)] = h;
    pthread_mutex_unlock(&c->mu);
    return again;
}

em_cent *em_ccache_put(em_ccache *c, const uint8_t *key, uint32_t crc,
                       uint64_t len, uint64_t epoch, const em_chunk *view,
                       void *mem, uint64_t bytes)
{
    uint64_t h = cent_hash(key, crc, len);
    em_cent *e, *o;

    if (!admit(c, h) || (e = em_calloc(1, sizeof *e)) == NULL)
        return NULL;                /* best effort: the caller keeps MEM */
    memcpy(e->key, key, EM_CCACHE_KEY_LEN);
    e->crc = crc;
    e->len = len;
    e->hash = h;
    e->view = *view;
    e->view.mem = NULL;
    e->mem[0] = mem;
    e->nmem = mem != NULL;
    e->bytes = bytes + sizeof *e;
    e->epoch = epoch;
    e->refs = 1;
    pthread_mutex_lock(&c->mu);
    for (o = *bucket_of(c, h); o != NULL && !cent_is(o, h, key, crc, len);
         o = o->hnext)
        ;
    if (o != NULL || !make_room(c, e->bytes, epoch)) {
        pthread_mutex_unlock(&c->mu);   /* another reader was first, or no
                                        ** room: decoded, not kept */
        em_free(e);
        return NULL;
    }
    e->hnext = *bucket_of(c, h);
    *bucket_of(c, h) = e;
    lru_push(c, e);
    c->used += e->bytes;
    c->n++;
    table_grow(c);
    pthread_mutex_unlock(&c->mu);
    return e;
}

bool em_ccache_extend(em_ccache *c, em_cent *e, uint64_t epoch,
                      em_chunk *view, unsigned parts, void *mem,
                      uint64_t bytes)
{
    bool ok;

    pthread_mutex_lock(&c->mu);
    ok = !e->dead && e->nmem < CC_MAX_MEMS &&
         (em_chunk_parts(&e->view) & parts) == 0;
    e->epoch = epoch;
    /* E itself is safe from make_room: EPOCH just used it. */
    if (ok && (ok = make_room(c, bytes, epoch))) {
        em_chunk_adopt(&e->view, view, parts);
        e->mem[e->nmem++] = mem;
        e->bytes += bytes;
        c->used += bytes;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

bool em_ccache_memo_get(em_ccache *c, em_cent *e, uint64_t keep_id,
                        em_kept *out, uint32_t *n)
{
    bool ok;

    pthread_mutex_lock(&c->mu);
    ok = e->memo != NULL && e->memo_id == keep_id;
    if (ok) {
        memcpy(out, e->memo, e->nmemo * sizeof *out);
        *n = e->nmemo;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void em_ccache_memo_put(em_ccache *c, em_cent *e, uint64_t keep_id,
                        const em_kept *list, uint32_t n)
{
    em_kept *m = em_malloc((size_t)n * sizeof *m + 1), *old;
    uint64_t bytes = (uint64_t)n * sizeof *m;

    if (m == NULL)
        return;
    memcpy(m, list, (size_t)n * sizeof *m);
    pthread_mutex_lock(&c->mu);
    old = e->memo;
    /* a memo is charged like the arrays: past the budget (evicting what
    ** other readers used, never E, which EPOCH used) it is not kept */
    if (!e->dead && n > e->nmemo &&
        !make_room(c, (uint64_t)(n - e->nmemo) * sizeof *m, e->epoch)) {
        pthread_mutex_unlock(&c->mu);
        em_free(m);
        return;
    }
    bytes -= (uint64_t)e->nmemo * sizeof *m;    /* wraps when smaller */
    e->memo = m;
    e->nmemo = n;
    e->memo_id = keep_id;
    e->bytes += bytes;
    if (!e->dead)
        c->used += bytes;
    pthread_mutex_unlock(&c->mu);
    em_free(old);
}

void em_ccache_release(em_ccache *c, em_cent *e)
{
    bool gone;

    if (e == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    gone = --e->refs == 0 && e->dead;
    pthread_mutex_unlock(&c->mu);
    if (gone)
        cent_free(e);
}

void em_ccache_stats(em_ccache *c, em_ccache_info *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->bytes = c->used;
    out->entries = c->n;
    out->budget = c->budget;
    pthread_mutex_unlock(&c->mu);
}
