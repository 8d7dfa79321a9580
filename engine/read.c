/*
** engine/read.c: the read path. Matchers give series ids through the
** postings (ANDed with the caller's series ids when it gives some); for
** each series the chunks overlapping [from, to] are found by seeking its
** chunk keys from (series, from - widest chunk span). Each chunk comes
** from the handle's decoded-chunk cache (engine/ccache.c) when it is
** there; otherwise its checksum is checked and only the parts the question
** needs are decoded (a merge of a chunk wholly inside the range needs no
** profile indexes, a total no samples), then offered to the cache.
**
** Focus and ignore become one dense bitset over stack ids (the stacks to
** keep; engine/postings.c keeps it per handle under an id). Per chunk, the
** scan lists the chunk's stacks the set keeps, once per chunk and set (a
** memo in the cache entry), and the merge sums only their sample runs:
** chunks are stack-major, so the other stacks' samples are never read.
**
** Merge sums into a dense array indexed by stack id (ids are dense, so this
** is a column add with no hashing) plus a bitmap of the stacks seen, which
** also yields the result in stack order for free; the arrays are pooled on
** the handle. Each merged profile's header (time, duration, period) is
** folded into the span pprof's merge computes, once per profile. A corrupt
** chunk fails the query; it is never skipped, so a query never returns
** wrong numbers.
**
** The query layer reads through an em_reader: one snapshot for the whole
** query, and one merge accumulator reused by every merge it makes (a merge
** by a label makes one per group), emptied by clearing only the stacks it
** touched.
*/
#include <stdlib.h>
#include <sys/mman.h>

#include "engine/block.h"
#include "engine/store.h"

/* Called for each chunk of a series overlapping [from, to]. KEPT lists
** the chunk's stacks the query keeps (ids and sample runs), NKEPT of them,
** or is NULL when it keeps every stack (no focus, no ignore). */
typedef int (*chunk_fn)(void *ctx, uint32_t series, const em_chunk *c,
                        const em_kept *kept, uint32_t nkept);

typedef struct scan {
    em_rtxn *r;
    int64_t from, to;
    unsigned parts;                 /* EM_PART_* FN needs of every chunk */
    unsigned partial;               /* ... and more of a chunk that is not
                                    ** wholly inside [from, to] */
    chunk_fn fn;
    void *ctx;
    const uint64_t *keep;           /* dense bitset of stacks to keep; NULL:
                                    ** all (then FN gets no kept list) */
    uint64_t keep_id;               /* its id in the keep cache, 0: none */
    em_kept *kept;                  /* scratch: one chunk's kept list */
    uint32_t kept_cap;
    /* Called as each source's scan begins, for each of its intervals
    ** (from, to set in the scan); NULL: nothing to do. */
    int (*source_fn)(void *ctx, uint32_t src, int64_t from, int64_t to);
    uint32_t src;                   /* the source being read */
    /* A block series' chunks in the range from the one being read on,
    ** asked from disk in one request at the first the cache misses: a
    ** warm scan asks for nothing (block_read.c maps without read-ahead). */
    em_block *ahead;                /* NULL: not reading a block */
    const em_bchunk *ahead_c;
    size_t ahead_n;
    bool ahead_asked;
} scan;

/* A chunk as a scan hands it out: the decoded arrays and what keeps them
** alive, a held cache entry and (or) an allocation of the reader's own. */
typedef struct chunk_ref {
    em_chunk c;                     /* c.mem unused */
    em_cent *ent;
    void *own[2];                   /* parts not in the cache: a focus
                                    ** decodes a chunk in two steps */
    uint32_t crc;                   /* the stored checksum */
    bool checked;                   /* this scan checked it just now */
} chunk_ref;

static void chunk_unref(em_rtxn *r, chunk_ref *ref)
{
    em_ccache_release(r->db->ccache, ref->ent);
    em_free(ref->own[0]);
    em_free(ref->own[1]);
    memset(ref, 0, sizeof *ref);
}

void em_willneed(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(EM_PAGE_GUESS - 1);

    (void)madvise((void *)a, (uintptr_t)p + len - a, MADV_WILLNEED);
}

/* Looks a stored chunk up in the cache (sealed chunks only; a hit needs no
** checksum: the entry was decoded from bytes that passed it, and its key
** holds their stored checksum), else checks the checksum. REF->c.h is the
** chunk's header either way. */
static int chunk_find(scan *s, const uint8_t *key, const uint8_t *buf,
                      size_t len, chunk_ref *ref)
{
    em_rtxn *r = s->r;
    em_ccache *cc = r->db->ccache;
    int rc = em_chunk_header_peek(buf, len, &ref->c.h, &ref->crc);

    if (rc != EMBER_OK)     /* say what a full check would have said */
        return em_chunk_header_read(buf, len, &ref->c.h);
    if (cc != NULL && !(ref->c.h.flags & EM_CHUNK_HEAD))
        ref->ent = em_ccache_get(cc, key, ref->crc, len, r->epoch, &ref->c);
    if (ref->ent == NULL) {
        if (s->ahead != NULL) {
            if (!s->ahead_asked)
                em_block_prefetch(s->ahead, s->ahead_c, s->ahead_n);
            s->ahead_asked = true;
        } else if (len > EM_PAGE_GUESS) {  /* one read, not a fault a page */
            em_willneed(buf, len);
        }
        rc = em_chunk_crc_check(buf, len);
        ref->checked = rc == EMBER_OK;
    }
    return rc;
}

/* Decodes the parts of WANT that REF lacks and offers them to the cache:
** added to REF's entry, or a new entry for a sealed chunk, or else kept as
** REF's own allocation. */
static int chunk_decode_cached(em_rtxn *r, const uint8_t *key,
                               const uint8_t *buf, size_t len, unsigned want,
                               chunk_ref *ref)
{
    em_ccache *cc = r->db->ccache;
    unsigned have = em_chunk_parts(&ref->c), added;
    void *mem = NULL;
    size_t bytes = 0;
    bool kept = false;
    int rc = EMBER_OK;

    if ((want & ~have) == 0)
        return EMBER_OK;
    /* An entry's bytes passed the checksum when it was made; these are
    ** read again, so they are checked again (once per part added), unless
    ** this scan checked them a moment ago. */
    if (ref->ent != NULL && !ref->checked)
        rc = em_chunk_crc_check(buf, len);
    ref->checked = rc == EMBER_OK;
    if (rc == EMBER_OK)
        rc = em_chunk_decode_parts(r->codec, buf, len, want, &ref->c, &mem,
                                   &bytes);
    if (rc != EMBER_OK)
        return rc;
    added = em_chunk_parts(&ref->c) & ~have;
    if (ref->ent != NULL)
        kept = em_ccache_extend(cc, ref->ent, r->epoch, &ref->c, added, mem,
                                bytes);
    else if (cc != NULL && !(ref->c.h.flags & EM_CHUNK_HEAD) &&
             ref->own[0] == NULL)   /* an entry must not name REF's own */
        kept = (ref->ent = em_ccache_put(cc, key, ref->crc, len, r->epoch,
                                         &ref->c, mem, bytes)) != NULL;
    if (!kept)
        ref->own[ref->own[0] != NULL] = mem;
    return EMBER_OK;
}

/* chunk_decode_cached with the handle's memory, not the query's: the
** decoded chunk belongs to the cache, whose bytes cache_bytes bounds. */
static int chunk_complete(em_rtxn *r, const uint8_t *key, const uint8_t *buf,
                          size_t len, unsigned want, chunk_ref *ref)
{
    em_budget *b = em_budget_swap(NULL);
    int rc = chunk_decode_cached(r, key, buf, len, want, ref);

    em_budget_swap(b);
    return rc;
}

/* Lists in S->kept REF's stacks that S keeps, with their sample runs: the
** chunk's sorted stacks against the keep bitset, once per chunk and keep
** set (a memo in the cache entry), so that a focus reads only its stacks'
** samples and, warm, not even the other stacks' ids and starts. */
static int chunk_kept(scan *s, const chunk_ref *ref, uint32_t *n)
{
    em_ccache *cc = s->r->db->ccache;
    const em_chunk *c = &ref->c;
    bool memo = ref->ent != NULL && s->keep_id != 0;

    *n = 0;
    if (c->stacks == NULL)
        return EMBER_OK;
    if (c->h.nstacks > s->kept_cap) {
        em_kept *k = em_realloc(s->kept, c->h.nstacks * sizeof *k);
        if (k == NULL)
            return em_err(EMBER_ENOMEM, "focus: %u stacks", c->h.nstacks);
        s->kept = k;
        s->kept_cap = c->h.nstacks;
    }
    if (memo && em_ccache_memo_get(cc, ref->ent, s->keep_id, s->kept, n))
        return EMBER_OK;
    for (uint32_t i = 0; i < c->h.nstacks; i++) {
        uint32_t st = c->stacks[i];
        s->kept[*n] = (em_kept){ st, (uint32_t)c->stack_start[i],
                                 (uint32_t)(c->stack_start[i + 1] -
                                            c->stack_start[i]) };
        *n += (uint32_t)(s->keep[st >> 6] >> (st & 63) & 1);
    }
    if (memo) {                 /* the cache's memory, not a query's */
        em_budget *b = em_budget_swap(NULL);
        em_ccache_memo_put(cc, ref->ent, s->keep_id, s->kept, *n);
        em_budget_swap(b);
    }
    return EMBER_OK;
}

/* A chunk naming a stack past its source's table is damaged. */
static int stacks_check(const scan *s, const em_chunk *c)
{
    uint32_t nstacks = s->r->src[s->src].n[EM_T_STACK];

    if (c->stacks != NULL && c->h.nstacks > 0 &&
        c->stacks[c->h.nstacks - 1] >= nstacks)
        return EM_CORRUPT("stack id %u beyond the stack table",
                          c->stacks[c->h.nstacks - 1]);
    return EMBER_OK;
}

/* The samples of the NKEPT runs S->kept of a chunk the cache did not keep
** (a first read, or no room): decoded for this read alone, the other
** stacks' varints skipped, as a cold focus reads a few stacks a chunk. */
static int chunk_kept_only(scan *s, const uint8_t *buf, size_t len,
                           unsigned want, chunk_ref *ref, uint32_t nkept)
{
    const unsigned samples = EM_PART_VALUES | EM_PART_PROFILES;
    unsigned add = want & samples & ~em_chunk_parts(&ref->c);
    void *mem = NULL;
    size_t bytes;
    int rc = EMBER_OK;

    if (add == 0)
        return EMBER_OK;
    if (!ref->checked)
        rc = em_chunk_crc_check(buf, len);
    ref->checked = rc == EMBER_OK;
    if (rc == EMBER_OK) {
        em_budget *b = em_budget_swap(NULL);
        rc = em_chunk_decode_kept(s->r->codec, buf, len, add, &ref->c,
                                  s->kept, nkept, &mem, &bytes);
        em_budget_swap(b);
    }
    if (rc == EMBER_OK)
        ref->own[ref->own[0] != NULL] = mem;
    return rc;
}

/* Decodes what the scan needs of one stored chunk, found (chunk_find)
** into REF; *SKIP when it lies outside the range. With a focus or ignore,
** *NKEPT stacks of it are kept (S->kept): the chunk's stack ids come
** first, and a chunk that holds none of the kept stacks is read no
** further (its profiles' times and totals still count: a focus's total
** before it). */
static int scan_load(scan *s, const uint8_t *key, const uint8_t *buf,
                     size_t len, chunk_ref *ref, bool *skip, uint32_t *nkept)
{
    const unsigned samples = EM_PART_VALUES | EM_PART_PROFILES;
    const em_chunk_header *h = &ref->c.h;
    unsigned want = s->parts;
    int rc;

    *nkept = 0;
    *skip = h->max_time < s->from || h->min_time > s->to;
    if (*skip)
        return EMBER_OK;
    if (h->min_time < s->from || h->max_time > s->to)
        want |= s->partial;
    if (s->keep == NULL) {
        rc = chunk_complete(s->r, key, buf, len, want, ref);
        return rc == EMBER_OK ? stacks_check(s, &ref->c) : rc;
    }
    rc = chunk_complete(s->r, key, buf, len, (want & ~samples) | EM_PART_STACKS,
                        ref);
    if (rc == EMBER_OK)
        rc = stacks_check(s, &ref->c);
    if (rc == EMBER_OK)
        rc = chunk_kept(s, ref, nkept);
    if (rc == EMBER_OK && *nkept > 0)
        rc = ref->ent == NULL ? chunk_kept_only(s, buf, len, want, ref, *nkept)
                              : chunk_complete(s->r, key, buf, len, want, ref);
    return rc;
}

/* Reads one stored chunk and hands it to the scan's FN, unless it lies
** outside the range. A query's budget (em_budget) has its deadline checked
** here, once per chunk, and does not count the decoded chunk: it belongs
** to the handle's cache, whose bytes cache_bytes bounds. */
static int scan_one(scan *s, uint32_t series, const uint8_t *key,
                    const uint8_t *buf, size_t len)
{
    chunk_ref ref;
    uint32_t nkept = 0;
    bool skip = false;
    em_budget *b;
    int rc = em_budget_step(EM_STEP_CHUNK, 1);

    if (rc != EMBER_OK)
        return rc;
    memset(&ref, 0, sizeof ref);
    b = em_budget_swap(NULL);
    rc = chunk_find(s, key, buf, len, &ref);
    em_budget_swap(b);
    if (rc == EMBER_OK)
        rc = scan_load(s, key, buf, len, &ref, &skip, &nkept);
    if (rc == EMBER_OK && !skip)
        rc = s->fn(s->ctx, series, &ref.c, s->keep != NULL ? s->kept : NULL,
                   nkept);
    b = em_budget_swap(NULL);
    chunk_unref(s->r, &ref);
    em_budget_swap(b);
    return rc;
}

typedef struct head_walk {
    scan *s;
    uint32_t series;                /* canonical id */
} head_walk;

static int head_one(void *ctx, const MDB_val *k, const MDB_val *d)
{
    head_walk *w = ctx;
    uint8_t key[EM_CCACHE_KEY_LEN] = { 0 };

    memcpy(key + 8, k->mv_data, EM_CHUNK_KEY_LEN);
    return scan_one(w->s, w->series, key, d->mv_data, d->mv_size);
}

/* Scans the head's chunks of its series LOCAL (canonical id SERIES) that
** may overlap the range. */
static int scan_head(scan *s, uint32_t local, uint32_t series)
{
    head_walk w = { s, series };

    return em_head_chunks(s->r, local, s->from, s->to, head_one, &w);
}

/* Scans the chunks of block series LOCAL that overlap the range: its
** index lists them in time order, without overlaps. */
static int scan_block(scan *s, uint32_t local, uint32_t series)
{
    em_src *src = &s->r->src[s->src];
    uint8_t key[EM_CCACHE_KEY_LEN] = { 0 };
    const em_bchunk *cs = NULL;
    em_block *b;
    size_t n = 0, i0 = 0, i1;
    int rc = em_src_block(src, &b);

    if (rc == EMBER_OK)
        rc = em_block_chunks(b, local, &cs, &n);
    while (i0 < n && cs[i0].max_time < s->from)
        i0++;
    for (i1 = i0; i1 < n && cs[i1].min_time <= s->to; i1++)
        ;
    s->ahead = b;
    s->ahead_asked = false;
    for (size_t i = i0; i < i1 && rc == EMBER_OK; i++) {
        const uint8_t *buf;
        s->ahead_c = cs + i;
        s->ahead_n = i1 - i;
        em_put_be64(key, src->id);
        em_put_be64(key + 8, cs[i].offset);
        rc = em_block_chunk_bytes(b, &cs[i], &buf);
        if (rc == EMBER_OK)
            rc = scan_one(s, series, key, buf, (size_t)cs[i].len);
        if (rc != EMBER_OK)
            em_err_prefix(rc, "block %016llx: chunk at %llu (series %u)",
                          (unsigned long long)src->id,
                          (unsigned long long)cs[i].offset, local);
    }
    s->ahead = NULL;
    return rc;
}

static int scan_series(scan *s, uint32_t local)
{
    uint32_t series;
    int rc = em_src_canon_series(s->r, s->src, local, &series);

    if (rc != EMBER_OK)
        return rc;
    if (s->r->src[s->src].kind == EM_SRC_HEAD)
        return scan_head(s, local, series);
    return scan_block(s, local, series);
}

/* Runs S over every series in SERIES, of source SRC. */
static int scan_src(scan *s, uint32_t src, const roaring_bitmap_t *series)
{
    roaring_uint32_iterator_t *it;
    int rc = EMBER_OK;

    s->src = src;
    if (s->source_fn != NULL &&
        (rc = s->source_fn(s->ctx, src, s->from, s->to)) != EMBER_OK)
        return rc;
    if ((it = roaring_create_iterator(series)) == NULL)
        return em_err(EMBER_ENOMEM, "series iterator");
    for (; it->has_value && rc == EMBER_OK; roaring_advance_uint32_iterator(it))
        rc = scan_series(s, it->current_value);
    roaring_free_uint32_iterator(it);
    return rc;
}

static void range_of(const ember_selector *sel, int64_t *from, int64_t *to)
{
    *from = INT64_MIN;
    *to = INT64_MAX;
    if (sel != NULL && (sel->from_ms != 0 || sel->to_ms != 0)) {
        *from = sel->from_ms;
        *to = sel->to_ms;
    }
}

/* What a read takes from one source: its selected series (local ids;
** NULL: the source is skipped, its time range misses the query's) and
** the stacks to keep there. */
#define QSRC_MAX_IV 4

typedef struct qsrc {
    roaring_bitmap_t *series;
    const uint64_t *keep;           /* dense bitset over the source's local
                                    ** stacks; NULL: every stack */
    uint64_t keep_id;               /* its id in the keep cache */
    uint64_t *own_keep;             /* keep, when the query made it */
    int64_t iv[QSRC_MAX_IV][2];     /* the times read here, inclusive: the
                                    ** range, or the parts of it this
                                    ** source stands for (engine/plan of
                                    ** resolutions below) */
    int niv;
} qsrc;

/* Gives *KEEP, *ID the keep set of source SRC for a read whose focus and
** ignore its caller has cached (the reader): CTX is the caller's. */
typedef int (*keep_fn)(void *ctx, uint32_t src, const uint64_t **keep,
                       uint64_t *id);

/* A read: snapshot, and per source the selected series and the stacks to
** keep. */
typedef struct query {
    em_rtxn own;                    /* the snapshot, when not borrowed */
    em_rtxn *r;                     /* own, or the reader's */
    qsrc *qs;                       /* [r->nsrc] */
    bool filtered;                  /* a focus or an ignore applies */
    int64_t from, to;
} query;

static void query_end(query *q)
{
    for (uint32_t i = 0; q->qs != NULL && i < q->r->nsrc; i++) {
        if (q->qs[i].series != NULL)
            roaring_bitmap_free(q->qs[i].series);
        em_free(q->qs[i].own_keep);
    }
    em_free(q->qs);
    q->qs = NULL;
    em_rtxn_end(&q->own);
}

/* Keeps in *SERIES (local ids of source SRC) those whose canonical ids
** the selector lists, when it lists some. */
static int series_restrict(em_rtxn *r, uint32_t src, const ember_selector *sel,
                           roaring_bitmap_t *series)
{
    roaring_bitmap_t *ids, *keep;
    roaring_uint32_iterator_t it;
    int rc = EMBER_OK;

    if (sel == NULL || sel->series == NULL)
        return EMBER_OK;
    ids = roaring_bitmap_of_ptr(sel->nseries, sel->series);
    keep = r->nsrc > 1 ? roaring_bitmap_create() : NULL;
    if (ids == NULL || (r->nsrc > 1 && keep == NULL)) {
        if (ids != NULL)
            roaring_bitmap_free(ids);
        return em_err(EMBER_ENOMEM, "selector: %zu series ids", sel->nseries);
    }
    if (keep == NULL) {             /* one source: local ids are canonical */
        roaring_bitmap_and_inplace(series, ids);
        roaring_bitmap_free(ids);
        return EMBER_OK;
    }
    roaring_init_iterator(series, &it);
    for (; it.has_value && rc == EMBER_OK; roaring_advance_uint32_iterator(&it)) {
        uint32_t vid;
        rc = em_src_canon_series(r, src, it.current_value, &vid);
        if (rc == EMBER_OK && roaring_bitmap_contains(ids, vid))
            roaring_bitmap_add(keep, it.current_value);
    }
    if (rc == EMBER_OK)
        roaring_bitmap_and_inplace(series, keep);
    roaring_bitmap_free(keep);
    roaring_bitmap_free(ids);
    return rc;
}

/* Selects in source SRC of Q what SEL asks for. */
static int query_src(query *q, uint32_t src, const ember_selector *sel,
                     keep_fn kf, void *kctx)
{
    qsrc *qs = &q->qs[src];
    int rc = em_src_select(q->r, src, sel, &qs->series);

    if (rc == EMBER_OK)
        rc = series_restrict(q->r, src, sel, qs->series);
    if (rc != EMBER_OK || !q->filtered ||
        roaring_bitmap_is_empty(qs->series))
        return rc;
    if (kf != NULL)
        return kf(kctx, src, &qs->keep, &qs->keep_id);
    rc = em_src_keep(q->r, src, sel->focus, sel->ignore, &qs->own_keep,
                     &qs->keep_id);
    qs->keep = qs->own_keep;
    return rc;
}

/* ---- resolutions: which source reads which times ---------------------------- */

/* Compaction keeps downsampled copies of a block beside it (a family: the
** block and the copies made from it, or the copies alone once retention
** dropped the block). A query reads each family once: the coarsest copy
** the caller allows over the whole buckets inside the range, finer ones
** over what is left at the edges, the block's stored profiles over the
** rest; the finest member takes whatever the coarser ones left. So a
** merge's sums equal the stored profiles' at bucket boundaries and read
** far fewer profiles; bucket widths divide each other (ember_compact
** checks), so each member gets at most two intervals. */

static int64_t floor_to(int64_t t, int64_t r)
{
    return (t / r - (t % r < 0)) * r;
}

static bool res_allowed(int64_t res, int64_t cap)
{
    return res == 0 || cap == -1 || (cap > 0 && cap % res == 0);
}

/* Adds interval [A, B] to source S's reads (the finest falls back when
** more would not fit: it reads them all). */
static bool iv_add(qsrc *s, int64_t a, int64_t b)
{
    if (a > b)
        return true;
    if (s->niv == QSRC_MAX_IV)
        return false;
    s->iv[s->niv][0] = a;
    s->iv[s->niv++][1] = b;
    return true;
}

/* Plans the family whose members are the sources M[0..N), sorted by
** resolution, coarsest first. */
static void plan_family(query *q, const uint32_t *m, size_t n, int64_t cap)
{
    const em_rtxn *r = q->r;
    int64_t p[2 * QSRC_MAX_IV + 2][2], lo = INT64_MAX, hi = INT64_MIN;
    int64_t top = r->src[m[0]].resolution_ms;
    size_t np = 0;

    for (size_t i = 0; i < n; i++) {
        lo = r->src[m[i]].min_time < lo ? r->src[m[i]].min_time : lo;
        hi = r->src[m[i]].max_time > hi ? r->src[m[i]].max_time : hi;
    }
    if (top > 0) {                  /* the family's whole span, aligned */
        lo = floor_to(lo, top);
        hi = floor_to(hi, top) + top - 1;
    }
    p[np][0] = q->from > lo ? q->from : lo;
    p[np++][1] = q->to < hi ? q->to : hi;
    for (size_t i = 0; i < n && np > 0; i++) {
        qsrc *s = &q->qs[m[i]];
        int64_t res = r->src[m[i]].resolution_ms;
        int64_t left[2 * QSRC_MAX_IV + 2][2];
        size_t nl = 0;
        bool last = i + 1 == n, fit = true;
        if (!last && !res_allowed(res, cap))
            continue;
        for (size_t k = 0; k < np; k++) {
            int64_t a = p[k][0], b = p[k][1], A = a, B = b;
            if (!last && res > 0) {
                A = floor_to(a, res) + (floor_to(a, res) < a ? res : 0);
                B = floor_to(b - res + 1, res) + res - 1;   /* whole buckets */
                if (b - res + 1 < a || A > B) {
                    left[nl][0] = a;
                    left[nl++][1] = b;
                    continue;
                }
                if (a < A) {
                    left[nl][0] = a;
                    left[nl++][1] = A - 1;
                }
                if (B < b) {
                    left[nl][0] = B + 1;
                    left[nl++][1] = b;
                }
            }
            fit &= iv_add(s, A, B);
        }
        if (!fit) {                 /* never with dividing widths: read
                                    ** everything from the finest */
            for (size_t k = 0; k < n; k++)
                q->qs[m[k]].niv = 0;
            iv_add(&q->qs[m[n - 1]], q->from, q->to);
            return;
        }
        memcpy(p, left, nl * sizeof *left);
        np = nl;
    }
}

static int res_cmp(const void *a, const void *b, void *ctx)
{
    const em_rtxn *r = ctx;
    int64_t x = r->src[*(const uint32_t *)a].resolution_ms;
    int64_t y = r->src[*(const uint32_t *)b].resolution_ms;
    return (x < y) - (x > y);       /* coarsest first */
}

/* Gives each source of Q the times it reads. CAP: the selector's
** resolution_ms. */
static int plan_resolutions(query *q, int64_t cap)
{
    const em_rtxn *r = q->r;
    uint32_t *m = em_malloc((size_t)r->nsrc * sizeof *m + 1);
    uint8_t *done = em_calloc(r->nsrc + 1, 1);
    int rc = m == NULL || done == NULL
             ? em_err(EMBER_ENOMEM, "query: %u sources", r->nsrc) : EMBER_OK;

    for (uint32_t i = 0; i < r->nsrc && rc == EMBER_OK; i++) {
        const em_src *s = &r->src[i];
        uint64_t root = s->made_from != 0 ? s->made_from : s->id;
        size_t n = 0;
        if (done[i])
            continue;
        if (s->kind == EM_SRC_HEAD) {
            if (em_src_overlaps(s, q->from, q->to))
                iv_add(&q->qs[i], q->from, q->to);
            continue;
        }
        for (uint32_t k = i; k < r->nsrc; k++) {
            const em_src *t = &r->src[k];
            if (!done[k] && t->kind == EM_SRC_BLOCK &&
                (t->made_from != 0 ? t->made_from : t->id) == root) {
                m[n++] = k;
                done[k] = 1;
            }
        }
        qsort_r(m, n, sizeof *m, res_cmp, (void *)r);
        plan_family(q, m, n, cap);
    }
    em_free(m);
    em_free(done);
    return rc;
}

/* Starts a query on R (NULL: a snapshot of its own). KF, when not NULL,
** gives each source's keep set for SEL's focus and ignore. */
static int query_begin_on(ember_db *db, em_rtxn *r, const ember_selector *sel,
                          keep_fn kf, void *kctx, query *q)
{
    int rc;

    memset(q, 0, sizeof *q);
    em_err_clear();
    if (db == NULL && r == NULL)
        return em_err(EMBER_EINVAL, "NULL database");
    rc = em_selector_check(sel);
    if (rc == EMBER_OK && r == NULL) {
        rc = em_rtxn_begin(db, &q->own);
        r = &q->own;
    }
    q->r = r;
    range_of(sel, &q->from, &q->to);
    q->filtered = sel != NULL && (sel->focus != NULL || sel->ignore != NULL);
    if (rc == EMBER_OK &&
        (q->qs = em_calloc(r->nsrc, sizeof *q->qs)) == NULL)
        rc = em_err(EMBER_ENOMEM, "query: %u sources", r->nsrc);
    if (rc == EMBER_OK)
        rc = plan_resolutions(q, sel != NULL ? sel->resolution_ms : 0);
    for (uint32_t i = 0; rc == EMBER_OK && i < r->nsrc; i++)
        if (q->qs[i].niv > 0)
            rc = query_src(q, i, sel, kf, kctx);
    if (rc != EMBER_OK)
        query_end(q);
    return rc;
}

static int query_begin(ember_db *db, const ember_selector *sel, query *q)
{
    return query_begin_on(db, NULL, sel, NULL, NULL, q);
}

/* Runs S over every source and series Q selected. */
static int scan_all(scan *s, const query *q)
{
    int rc = EMBER_OK;

    for (uint32_t i = 0; i < q->r->nsrc && rc == EMBER_OK; i++) {
        if (q->qs[i].series == NULL)
            continue;
        s->keep = q->qs[i].keep;
        s->keep_id = q->qs[i].keep_id;
        for (int k = 0; k < q->qs[i].niv && rc == EMBER_OK; k++) {
            s->from = q->qs[i].iv[k][0];
            s->to = q->qs[i].iv[k][1];
            rc = scan_src(s, i, q->qs[i].series);
        }
    }
    return rc;
}

/* The profiles of C in [FROM, TO], ranks [*R0, *R1); returns how many. */
static uint32_t profiles_in_range(const em_chunk *c, int64_t from, int64_t to,
                                  uint32_t *r0, uint32_t *r1)
{
    uint32_t a = 0, b = c->h.nprofiles;

    /* a chunk's times do not decrease: the profiles in range are ranks
    ** [a, b) */
    while (a < b && c->time_ms[a] < from)
        a++;
    while (b > a && c->time_ms[b - 1] > to)
        b--;
    *r0 = a;
    *r1 = b;
    return b - a;
}

/* ---- merge --------------------------------------------------------------------- */

/* The span fields are pprof's merged header (profile.Merge's
** combineHeaders): earliest time, latest time, summed duration, largest
** period over the profiles merged. pprof sums durations per file; an
** import splits one file into one profile per sample label set, all with
** the file's time and duration, so profiles that share both count once. */
typedef struct merge_span {
    int64_t min_time, max_time;     /* unix ms */
    int64_t duration_ns;            /* sum over distinct (time, duration) */
    int64_t period;                 /* max */
} merge_span;

typedef struct span_key {
    int64_t time_ms, duration_ns;
} span_key;

struct ember_merged {
    size_t n;
    uint32_t *stacks;
    int64_t *values;
    uint64_t nseries, nprofiles;
    merge_span span;                /* all 0 when nothing was merged */
    ember_snapshot *snap;           /* what the ids name, held: compaction
                                    ** renumbers, so a later snapshot may
                                    ** name other stacks by them */
};

/* A block source's sums come in pages of 64 stacks, made when a merge
** first sums one of their stacks: a merge over many blocks then zeroes
** what it sums, not every block's whole stack table (a focus over a
** month of blocks spent half its time zeroing sums it never used). */
typedef struct sum_page {
    uint64_t seen;                  /* bit k: sum[k] was summed */
    int64_t sum[64];
} sum_page;

/* The sums of one block source: its stacks are numbered apart. */
typedef struct macc_src {
    int64_t *sum;                   /* [cap + 1] and */
    uint64_t *seen;                 /* [cap / 64 + 1]: a merge without a
                                    ** focus sums most stacks */
    size_t cap;                     /* sum's ids: n, or more when pooled */
    sum_page **page;                /* else [n / 64 + 1], NULL until used */
    uint32_t *made;                 /* the pages made, by index (sorted
                                    ** before they are collected) */
    size_t nmade, cap_made;
    size_t n;
} macc_src;

typedef struct page_slab {          /* pages are carved from slabs */
    struct page_slab *next;
    uint32_t used;
    sum_page p[];
} page_slab;

#define SLAB_PAGES 120              /* about 62 KiB a slab */

typedef struct merge_acc {
    query *q;                       /* the read running, while it runs */
    em_rtxn *r;                     /* the snapshot its ids belong to */
    ember_db *db;                   /* whose pool the buffers go back to */
    int64_t *sum;                   /* the head's sums, [cap + 1] */
    uint64_t *seen;                 /* bitmap [cap / 64 + 1] */
    size_t cap;                     /* stack ids sum and seen cover */
    macc_src *bs;                   /* [nbs]: each block source's, made when
                                    ** it is first read (index 0 unused) */
    uint32_t nbs;
    page_slab *slab;                /* where the block sources' pages are */
    bool sparse;                    /* a focus or ignore: pages from slabs */
    uint32_t csrc;                  /* the source being read, */
    int64_t *csum;                  /* its sums and seen bits when dense */
    uint64_t *cseen;
    int64_t from, to;               /* the interval being read */
    uint32_t last_series;
    roaring_bitmap_t *sseen;        /* canonical series merged, when a
                                    ** snapshot has several sources */
    uint64_t nseries, nprofiles;
    merge_span span;                /* valid once nprofiles > 0 */
    span_key *keys;                 /* per profile merged, for duration */
    size_t nkeys, cap_keys;
    span_key *tmp_keys;             /* scratch for merging runs of keys */
    size_t cap_tmp;
    size_t nbreaks;                 /* keys lower than the one before */
    int64_t dur_run;                /* the duration while nbreaks is 0 */
    size_t nstacks;                 /* of the snapshot: sum's length */
    int64_t whole;                  /* with a focus or ignore: the stored
                                    ** totals of the profiles merged, what
                                    ** they were before it (saturating) */
} merge_acc;

/* Profile ranks [r0, r1) of a chunk: those a merge reads. */
typedef struct rank_range {
    uint32_t r0, r1;
} rank_range;

/* The first sample of [A, B) whose profile rank is at least R: a stack's
** ranks ascend, so the samples of profiles in range are a run of its own
** (a query's edges read a few profiles of a chunk of thousands). */
static uint64_t rank_seek(const em_chunk *c, uint64_t a, uint64_t b,
                          uint32_t r)
{
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        if (c->sample_profile[mid] < r)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

/* Narrows the samples [*A, *B) of one stack to the profiles of IN (NULL:
** all of them are in range). */
static inline void rank_narrow(const em_chunk *c, const rank_range *in,
                               uint64_t *a, uint64_t *b)
{
    if (in == NULL || *a == *b)
        return;
    if (c->sample_profile[*a] < in->r0)
        *a = rank_seek(c, *a, *b, in->r0);
    if (*a < *b && c->sample_profile[*b - 1] >= in->r1)
        *b = rank_seek(c, *a, *b, in->r1);
}

/* A zeroed page for the sums of page W of block source B, carved from
** M's slabs; W goes on B's list of pages made. */
__attribute__((noinline))
static sum_page *page_new(merge_acc *m, macc_src *b, size_t w)
{
    page_slab *s = m->slab;

    if (s == NULL || s->used == SLAB_PAGES) {
        s = em_malloc(sizeof *s + SLAB_PAGES * sizeof s->p[0]);
        if (s == NULL)
            return NULL;
        s->next = m->slab;
        s->used = 0;
        m->slab = s;
    }
    if (b->nmade == b->cap_made) {
        uint32_t *g = em_grow(b->made, &b->cap_made, b->nmade + 1,
                              sizeof *g);
        if (g == NULL)
            return NULL;
        b->made = g;
    }
    b->made[b->nmade++] = (uint32_t)w;
    memset(&s->p[s->used], 0, sizeof s->p[0]);
    return &s->p[s->used++];
}

/* Where stack ST of source SRC keeps its sum; *SEEN gets the word holding
** its seen bit (bit ST % 64). NULL when a page cannot be made. */
static inline int64_t *sum_slot(merge_acc *m, uint32_t src, uint32_t st,
                                uint64_t **seen)
{
    sum_page **pp;

    if (src == 0) {
        *seen = &m->seen[st >> 6];
        return &m->sum[st];
    }
    if (m->bs[src].sum != NULL) {
        *seen = &m->bs[src].seen[st >> 6];
        return &m->bs[src].sum[st];
    }
    pp = &m->bs[src].page[st >> 6];
    if (__builtin_expect(*pp == NULL, 0) &&
        (*pp = page_new(m, &m->bs[src], st >> 6)) == NULL)
        return NULL;
    *seen = &(*pp)->seen;
    return &(*pp)->sum[st & 63];
}

/* Word W of source SRC's seen bits and the 64 sums it covers; NULL when
** the source summed none of them. */
static inline int64_t *sum_word(const merge_acc *m, uint32_t src,
                                size_t w, uint64_t **seen)
{
    sum_page *p;

    if (src == 0) {
        *seen = m->seen + w;
        return m->sum != NULL ? m->sum + w * 64 : NULL;
    }
    if (m->bs == NULL)
        return NULL;
    if (m->bs[src].sum != NULL) {
        *seen = &m->bs[src].seen[w];
        return m->bs[src].sum + w * 64;
    }
    if (m->bs[src].page == NULL || (p = m->bs[src].page[w]) == NULL)
        return NULL;
    *seen = &p->seen;
    return p->sum;
}

/* Stack ids source SRC's sums cover. */
static size_t sum_count(const merge_acc *m, uint32_t src)
{
    return src == 0 ? m->nstacks : m->bs[src].n;
}

/* How many words of source SRC's seen bits a walk visits: a sparse block
** source's pages made, else all of them. */
static inline size_t sum_nwords(const merge_acc *m, uint32_t src)
{
    if (src > 0 && m->bs[src].page != NULL)
        return m->bs[src].nmade;
    return (sum_count(m, src) + 63) / 64;
}

/* The X-th word of those (read anew each time: making a page may move
** the list). */
static inline size_t sum_word_at(const merge_acc *m, uint32_t src,
                                 size_t x)
{
    return src > 0 && m->bs[src].page != NULL ? m->bs[src].made[x] : x;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Puts each sparse source's pages made in id order, for the collect. */
static void sum_words_sort(merge_acc *m)
{
    for (uint32_t i = 1; i < m->nbs; i++)
        if (m->bs[i].page != NULL && m->bs[i].nmade > 1)
            qsort(m->bs[i].made, m->bs[i].nmade, sizeof *m->bs[i].made,
                  u32_cmp);
}

static int merge_nomem(uint32_t st)
{
    return em_err(EMBER_ENOMEM, "merge: the sums of stack %u", st);
}

/* The chunk scan prefixes the chunk (series, time), so this names the
** stack only. */
static int merge_overflow(uint32_t st)
{
    return em_err(EMBER_ELIMIT, "merge: the values of stack %u sum past the "
                  "64-bit range (merge fewer profiles)", st);
}

/* Adds SUM, the run of stack ST, to its sum in the source being read. */
static inline int merge_add(merge_acc *m, uint32_t st, int64_t sum)
{
    uint64_t *seen;
    int64_t *slot;

    if (m->csum != NULL) {
        slot = &m->csum[st];
        seen = &m->cseen[st >> 6];
    } else if ((slot = sum_slot(m, m->csrc, st, &seen)) == NULL)
        return merge_nomem(st);
    *seen |= 1ull << (st & 63);
    return __builtin_add_overflow(*slot, sum, slot) ? merge_overflow(st)
                                                     : EMBER_OK;
}

/* merge_run for a chunk with large values: the run summed in 128 bits,
** which no run can leave, out of line so that merge_run keeps its
** registers. */
__attribute__((noinline))
static int merge_run_wide(merge_acc *m, const em_chunk *c, uint32_t st,
                          uint64_t a, uint64_t b)
{
    __int128 sum = 0;

    for (uint64_t j = a; j < b; j++)
        sum += c->sample_value[j];
    if (sum < INT64_MIN || sum > INT64_MAX)
        return merge_overflow(st);
    return merge_add(m, st, (int64_t)sum);
}

/* Sums the samples [A, B) of stack ST that profiles IN (NULL: all) hold.
** An error when the stack's sum leaves the int64 range (issue 12: it
** wrapped). A chunk of small values (em_chunk.small_values: the usual
** case) sums its run in 64 bits, which cannot wrap, and checks only the
** add to the stack's sum; any other goes through 128 bits. */
static int merge_run(merge_acc *m, const em_chunk *c, uint32_t st,
                     uint64_t a, uint64_t b, const rank_range *in)
{
    uint64_t sum = 0;

    rank_narrow(c, in, &a, &b);
    if (a == b)
        return EMBER_OK;
    if (!c->small_values)
        return merge_run_wide(m, c, st, a, b);
    for (uint64_t j = a; j < b; j++)
        sum += (uint64_t)c->sample_value[j];
    return merge_add(m, st, (int64_t)sum);
}

static int span_key_cmp(const span_key *x, const span_key *y)
{
    if (x->time_ms != y->time_ms)
        return (x->time_ms > y->time_ms) - (x->time_ms < y->time_ms);
    return (x->duration_ns > y->duration_ns) -
           (x->duration_ns < y->duration_ns);
}

/* Appends K, and while the keys ascend sums the durations of the distinct
** ones, so that the usual merge (one run: one series whose chunks come in
** time order) has its duration without another pass. */
static inline void span_key_add(merge_acc *m, span_key k)
{
    int cmp = m->nkeys == 0 ? 1 : span_key_cmp(&k, &m->keys[m->nkeys - 1]);

    if (cmp > 0)
        m->dur_run = em_add_sat(m->dur_run, k.duration_ns);  /* shown only */
    m->nbreaks += cmp < 0;
    m->keys[m->nkeys++] = k;
}

/* Folds the headers of C's profiles in range (IN NULL: all) into the
** span, which starts out empty (min INT64_MAX, max and period INT64_MIN),
** and keeps each one's (time, duration) for merge_span_duration. Per
** profile, never per sample, so merge speed is unchanged. */
static int merge_span_add(merge_acc *m, const em_chunk *c,
                          const rank_range *in)
{
    merge_span *sp = &m->span;

    if (m->nkeys + c->h.nprofiles > m->cap_keys) {
        size_t need = m->nkeys + c->h.nprofiles;
        span_key *k = em_grow(m->keys, &m->cap_keys, need, sizeof *k);
        if (k == NULL)
            return em_err(EMBER_ENOMEM, "merge: %zu profile headers", need);
        m->keys = k;
    }
    for (uint32_t p = in ? in->r0 : 0; p < (in ? in->r1 : c->h.nprofiles);
         p++) {
        if (c->time_ms[p] < sp->min_time)
            sp->min_time = c->time_ms[p];
        if (c->time_ms[p] > sp->max_time)
            sp->max_time = c->time_ms[p];
        if (c->period[p] > sp->period)
            sp->period = c->period[p];
        span_key_add(m, (span_key){ c->time_ms[p], c->duration_ns[p] });
    }
    return EMBER_OK;
}

/* Merges the ascending runs A (NA keys) and B (NB) into OUT, dropping
** repeats; returns the keys written. */
static size_t span_merge2(const span_key *a, size_t na, const span_key *b,
                          size_t nb, span_key *out)
{
    size_t i = 0, j = 0, n = 0;

    while (i < na || j < nb) {
        const span_key *x;
        if (j == nb || (i < na && span_key_cmp(&a[i], &b[j]) <= 0))
            x = &a[i++];
        else
            x = &b[j++];
        if (n == 0 || span_key_cmp(x, &out[n - 1]) != 0)
            out[n++] = *x;
    }
    return n;
}

/* Merges the NR runs in SRC (run r is [at[r], at[r + 1])) pairwise into
** DST, leaving (NR + 1) / 2 runs described in AT. */
static size_t span_merge_round(const span_key *src, span_key *dst,
                               size_t *at, size_t nr)
{
    size_t w = 0, r = 0, k = 0;

    for (; r < nr; r += 2, k++) {
        size_t a = at[r], b = at[r + 1], e = r + 2 <= nr ? at[r + 2] : b;
        at[k] = w;          /* at[r] was read: k <= r */
        w += span_merge2(src + a, b - a, src + b, e - b, dst + w);
    }
    at[k] = w;
    return k;
}

/* The summed duration over distinct (time, duration) pairs (wrapping).
** Keys come in ascending runs (a chunk's profiles are in time order, a
** series' chunks mostly too: one run per series), so runs are merged in
** pairs, dropping repeats as they meet: series on the same time grid
** shrink to one grid's worth at the first round. No sort. */
static int merge_span_duration(merge_acc *m, int64_t *out)
{
    span_key *src = m->keys, *dst;
    size_t nr = m->nbreaks + 1, r = 0, *at;

    *out = m->dur_run;
    if (m->nbreaks == 0)            /* one run: span_key_add summed it */
        return EMBER_OK;
    *out = 0;
    if (m->tmp_keys == NULL || m->cap_tmp < m->nkeys) {
        em_free(m->tmp_keys);
        m->cap_tmp = 0;
        if ((m->tmp_keys = em_malloc(m->nkeys * sizeof *src)) == NULL)
            return em_err(EMBER_ENOMEM, "merge: %zu profiles", m->nkeys);
        m->cap_tmp = m->nkeys;
    }
    if ((at = em_malloc((nr + 1) * sizeof *at)) == NULL)
        return em_err(EMBER_ENOMEM, "merge: %zu runs of profiles", nr);
    for (size_t i = 0; i < m->nkeys; i++)
        if (i == 0 || span_key_cmp(&src[i], &src[i - 1]) < 0)
            at[r++] = i;
    at[nr] = m->nkeys;
    for (dst = m->tmp_keys; nr > 1; dst = dst == m->keys ? m->tmp_keys
                                                         : m->keys) {
        nr = span_merge_round(src, dst, at, nr);
        src = dst;
    }
    for (size_t i = 0; nr == 1 && i < at[1]; i++)
        if (i == 0 || span_key_cmp(&src[i], &src[i - 1]) != 0)
            *out = em_add_sat(*out, src[i].duration_ns);
    em_free(at);
    return EMBER_OK;
}

/* Adds the stored totals of C's profiles in range (IN, NULL: all) to
** M's whole: a focus reads only its stacks' samples, and the total before
** it comes from the chunk's totals column in the same pass. */
static void merge_whole_add(merge_acc *m, const em_chunk *c,
                            const rank_range *in)
{
    for (uint32_t p = in ? in->r0 : 0; p < (in ? in->r1 : c->h.nprofiles);
         p++)
        m->whole = em_add_sat(m->whole, c->total[p]);
}

static int merge_chunk(void *ctx, uint32_t series, const em_chunk *c,
                       const em_kept *kept, uint32_t nkept)
{
    merge_acc *m = ctx;
    bool whole = c->h.min_time >= m->from && c->h.max_time <= m->to;
    rank_range part, *in = whole ? NULL : &part;
    uint32_t n = c->h.nprofiles;
    int rc;

    if (!whole)
        n = profiles_in_range(c, m->from, m->to, &part.r0, &part.r1);
    if (n == 0)
        return EMBER_OK;
    if (kept == NULL) {
        for (uint32_t i = 0; i < c->h.nstacks; i++)
            if ((rc = merge_run(m, c, c->stacks[i], c->stack_start[i],
                                c->stack_start[i + 1], in)) != EMBER_OK)
                return rc;
    } else {
        merge_whole_add(m, c, in);
        for (uint32_t k = 0; k < nkept; k++) {
            if (k + 4 < nkept)  /* a focus's runs are scattered */
                __builtin_prefetch(&c->sample_value[kept[k + 4].at]);
            if ((rc = merge_run(m, c, kept[k].stack, kept[k].at,
                                (uint64_t)kept[k].at + kept[k].n, in)) !=
                EMBER_OK)
                return rc;
        }
    }
    if ((rc = merge_span_add(m, c, in)) != EMBER_OK)
        return rc;
    m->nprofiles += n;
    if (m->sseen != NULL)           /* a series may be in several sources */
        roaring_bitmap_add(m->sseen, series);
    else if (m->nseries == 0 || m->last_series != series)
        m->nseries++;
    m->last_series = series;
    return EMBER_OK;
}

void em_mpool_init(em_mpool *p)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
}

static void mscratch_free(em_mscratch *s)
{
    em_free(s->sum);
    em_free(s->seen);
    em_free(s->keys);
    em_free(s->tmp_keys);
}

void em_mpool_free(em_mpool *p)
{
    for (size_t i = 0; i < p->n; i++)
        mscratch_free(&p->s[i]);
    for (size_t i = 0; i < p->nbs; i++) {
        em_free(p->bs[i].sum);
        em_free(p->bs[i].seen);
    }
    em_free(p->bs);
    pthread_mutex_destroy(&p->mu);
}

static size_t bsums_bytes(size_t cap)
{
    return (cap + 1) * sizeof(int64_t) + (cap / 64 + 1) * sizeof(uint64_t);
}

/* Idle block sums of P covering at least N ids, the smallest that do, into
** *OUT; false when there are none. */
static bool bsums_take(em_mpool *p, size_t n, em_bsums *out)
{
    size_t best = SIZE_MAX;

    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->nbs; i++)
        if (p->bs[i].cap >= n &&
            (best == SIZE_MAX || p->bs[i].cap < p->bs[best].cap))
            best = i;
    if (best != SIZE_MAX) {
        *out = p->bs[best];
        p->bs[best] = p->bs[--p->nbs];
        p->bsbytes -= bsums_bytes(out->cap);
    }
    pthread_mutex_unlock(&p->mu);
    if (best == SIZE_MAX)
        return false;
    em_budget_hold(out->sum, true);     /* the query's while it holds them */
    em_budget_hold(out->seen, true);
    return true;
}

/* Zeroes the sums S's seen bits mark and pools S in P, or frees it when
** the pool would pass EM_BSUMS_BYTES. */
static void bsums_give(em_mpool *p, em_bsums s)
{
    bool kept = false;

    for (size_t w = 0; w < s.cap / 64 + 1; w++) {
        for (uint64_t bits = s.seen[w]; bits != 0; bits &= bits - 1)
            s.sum[w * 64 + (size_t)__builtin_ctzll(bits)] = 0;
        s.seen[w] = 0;
    }
    pthread_mutex_lock(&p->mu);
    if (p->bsbytes + bsums_bytes(s.cap) <= EM_BSUMS_BYTES) {
        em_bsums *g = p->nbs < p->capbs ? p->bs
                      : em_grow(p->bs, &p->capbs, p->nbs + 1, sizeof *g);
        if (g != NULL) {
            p->bs = g;
            p->bs[p->nbs++] = s;
            p->bsbytes += bsums_bytes(s.cap);
            kept = true;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (kept) {
        em_budget_hold(s.sum, false);   /* the pool's now */
        em_budget_hold(s.seen, false);
    } else {
        em_free(s.sum);
        em_free(s.seen);
    }
}

/* Gives M the buffers of an idle accumulator of the pool, if any. */
static void mpool_take(em_mpool *p, merge_acc *m)
{
    em_mscratch s = { 0 };

    pthread_mutex_lock(&p->mu);
    if (p->n > 0)
        s = p->s[--p->n];
    pthread_mutex_unlock(&p->mu);
    m->sum = s.sum;
    m->seen = s.seen;
    m->cap = s.cap;
    m->keys = s.keys;
    m->cap_keys = s.cap_keys;
    m->tmp_keys = s.tmp_keys;
    m->cap_tmp = s.cap_tmp;
    /* pooled buffers count for the query that holds them */
    em_budget_hold(m->sum, true);
    em_budget_hold(m->seen, true);
    em_budget_hold(m->keys, true);
    em_budget_hold(m->tmp_keys, true);
}

/* Pools M's buffers, zeroed, or frees them when the pool is full. */
static void mpool_give(em_mpool *p, merge_acc *m)
{
    em_mscratch s = { .sum = m->sum, .seen = m->seen, .cap = m->cap,
                      .keys = m->keys, .tmp_keys = m->tmp_keys,
                      .cap_keys = m->cap_keys, .cap_tmp = m->cap_tmp };

    pthread_mutex_lock(&p->mu);
    if (p->n < EM_MPOOL_SLOTS && s.sum != NULL && s.seen != NULL) {
        p->s[p->n++] = s;
        em_budget_hold(s.sum, false);   /* the pool's now, not the query's */
        em_budget_hold(s.seen, false);
        em_budget_hold(s.keys, false);
        em_budget_hold(s.tmp_keys, false);
        s = (em_mscratch){ 0 };
    }
    pthread_mutex_unlock(&p->mu);
    mscratch_free(&s);
}

/* Makes sum and seen cover NSTACKS ids, all zero. On failure cap stays
** below NSTACKS, so that merge_acc_free drops the buffers. */
static int merge_acc_size(merge_acc *m, size_t nstacks)
{
    size_t words = nstacks / 64 + 1, oldw = m->cap / 64 + 1;
    int64_t *sum;
    uint64_t *seen;

    m->nstacks = nstacks;
    if (m->sum == NULL) {           /* calloc maps zero pages lazily */
        m->sum = em_calloc(nstacks + 1, sizeof *m->sum);
        m->seen = em_calloc(words, sizeof *m->seen);
        if (m->sum == NULL || m->seen == NULL)
            return em_err(EMBER_ENOMEM, "merge: %zu stacks", nstacks);
        m->cap = nstacks;
        return EMBER_OK;
    }
    if (nstacks <= m->cap)
        return EMBER_OK;
    if ((sum = em_realloc(m->sum, (nstacks + 1) * sizeof *sum)) != NULL)
        m->sum = sum;
    if (sum == NULL ||
        (seen = em_realloc(m->seen, words * sizeof *seen)) == NULL)
        return em_err(EMBER_ENOMEM, "merge: %zu stacks", nstacks);
    m->seen = seen;
    memset(sum + m->cap + 1, 0, (nstacks - m->cap) * sizeof *sum);
    memset(seen + oldw, 0, (words - oldw) * sizeof *seen);
    m->cap = nstacks;
    return EMBER_OK;
}

/* Sizes an empty accumulator for NSTACKS stack ids, with buffers from
** DB's pool when it has some. */
static int merge_acc_init(merge_acc *m, em_rtxn *r)
{
    memset(m, 0, sizeof *m);
    m->r = r;
    m->db = r->db;
    m->span = (merge_span){ INT64_MAX, INT64_MIN, 0, INT64_MIN };
    mpool_take(&r->db->mpool, m);
    if (r->nsrc > 1) {
        m->bs = em_calloc(r->nsrc, sizeof *m->bs);
        m->nbs = r->nsrc;
        m->sseen = roaring_bitmap_create();
        if (m->bs == NULL || m->sseen == NULL)
            return em_err(EMBER_ENOMEM, "merge: %u sources", r->nsrc);
    }
    return merge_acc_size(m, r->next[EM_T_STACK]);
}

/* Zeroes the sums of source SRC: the head's that its seen bits mark (its
** buffers are pooled), a block source's dense sums as they go back to the
** handle's pool (bsums_give), its pages by freeing them. */
static void sums_clear(merge_acc *m, uint32_t src)
{
    size_t n = sum_count(m, src);

    if (src > 0) {          /* made again when read again */
        macc_src *b = &m->bs[src];
        em_free(b->page);
        em_free(b->made);
        if (b->sum != NULL)
            bsums_give(&m->db->mpool,
                       (em_bsums){ b->sum, b->seen, b->cap });
        *b = (macc_src){ 0 };
        return;
    }
    for (size_t w = 0; m->sum != NULL && w < (n + 63) / 64; w++) {
        for (uint64_t bits = m->seen[w]; bits != 0; bits &= bits - 1)
            m->sum[w * 64 + (size_t)__builtin_ctzll(bits)] = 0;
        m->seen[w] = 0;
    }
}

static void slabs_free(merge_acc *m)
{
    while (m->slab != NULL) {
        page_slab *next = m->slab->next;
        em_free(m->slab);
        m->slab = next;
    }
}

/* Empties M for the next merge, touching only the stacks it summed. */
static void merge_acc_reset(merge_acc *m)
{
    for (uint32_t i = 0; i < (m->nbs > 0 ? m->nbs : 1); i++)
        sums_clear(m, i);
    slabs_free(m);
    m->csrc = 0;            /* the scan names its source before a chunk */
    m->csum = m->sum;
    m->cseen = m->seen;
    if (m->sseen != NULL)
        roaring_bitmap_clear(m->sseen);
    m->nseries = m->nprofiles = 0;
    m->nkeys = m->nbreaks = 0;
    m->dur_run = 0;
    m->whole = 0;
    m->span = (merge_span){ INT64_MAX, INT64_MIN, 0, INT64_MIN };
}

/* Hands M's buffers back to the pool, emptied (a failed merge may have
** left sums behind); a block source's are freed. */
static void merge_acc_free(merge_acc *m)
{
    if (m->sum != NULL && m->seen != NULL && m->cap >= m->nstacks) {
        merge_acc_reset(m);
    } else {                /* a failed sizing: not worth pooling */
        em_free(m->sum);
        m->sum = NULL;
    }
    for (uint32_t i = 1; i < m->nbs; i++)
        sums_clear(m, i);
    slabs_free(m);
    em_free(m->bs);
    if (m->sseen != NULL)
        roaring_bitmap_free(m->sseen);
    m->bs = NULL;
    m->sseen = NULL;
    mpool_give(&m->db->mpool, m);
}

/* Whether block source SRC sums in pages: with a focus or ignore, and
** when the read selects few of its series (under 1 in SPARSE_SHARE): a
** series of a day block names a few thousand of its 141k stacks, and
** dense sums would zero (and fault in) 1.1 MB per block a month of
** blocks reads. Dense sums serve reads of most series, where pages cost
** a lookup per stack for nothing, and the sources that receive the sums
** moved to their canonical stacks after the read (M->q NULL; a diff's
** second merge moves most of its sums to the first one's sources). */
#define SPARSE_SHARE 32
static bool src_sparse(const merge_acc *m, uint32_t src)
{
    const roaring_bitmap_t *sel;

    if (m->sparse)
        return true;
    if (m->q == NULL)
        return false;
    sel = m->q->qs[src].series;
    return sel != NULL && roaring_bitmap_get_cardinality(sel) * SPARSE_SHARE <
                              m->r->src[src].n[EM_T_SERIES];
}

/* Makes source SRC's page table (its sums are made as they are used). */
static int merge_src_pages(merge_acc *m, uint32_t src)
{
    macc_src *b = &m->bs[src];
    size_t n = m->r->src[src].n[EM_T_STACK];

    if (src == 0 || b->page != NULL || b->sum != NULL)
        return EMBER_OK;
    if (src_sparse(m, src)) {
        b->page = em_calloc(n / 64 + 1, sizeof *b->page);
    } else {
        em_bsums pooled;
        if (bsums_take(&m->db->mpool, n, &pooled)) {
            b->sum = pooled.sum;
            b->seen = pooled.seen;
            b->cap = pooled.cap;
        } else {            /* calloc maps zero pages lazily */
            b->sum = em_calloc(n + 1, sizeof *b->sum);
            b->seen = em_calloc(n / 64 + 1, sizeof *b->seen);
            b->cap = n;
        }
        if (b->sum == NULL || b->seen == NULL) {
            em_free(b->sum);
            em_free(b->seen);
            b->sum = NULL;
        }
    }
    if (b->page == NULL && b->sum == NULL)
        return em_err(EMBER_ENOMEM, "merge: %zu stacks", n);
    b->n = n;
    return EMBER_OK;
}

/* Makes SRC the source being read, over [FROM, TO]. */
static int merge_source(void *ctx, uint32_t src, int64_t from, int64_t to)
{
    merge_acc *m = ctx;
    int rc;

    m->from = from;
    m->to = to;
    m->csrc = src;
    if ((rc = merge_src_pages(m, src)) != EMBER_OK)
        return rc;
    m->csum = src == 0 ? m->sum : m->bs[src].sum;
    m->cseen = src == 0 ? m->seen : m->bs[src].seen;
    return EMBER_OK;
}

/* Adds what Q selects to M. */
static int merge_acc_run(merge_acc *m, query *q)
{
    scan s = { q->r, q->from, q->to,
               EM_PART_TIMES | EM_PART_STACKS | EM_PART_VALUES |
               (q->filtered ? EM_PART_TOTALS : 0),
               EM_PART_PROFILES, merge_chunk, m, NULL, 0, NULL, 0,
               merge_source, 0, NULL, NULL, 0, false };
    int rc;

    m->q = q;
    m->sparse |= q->filtered;
    m->last_series = UINT32_MAX;
    rc = scan_all(&s, q);
    em_free(s.kept);
    m->q = NULL;                    /* the caller ends Q */
    return rc;
}

/* Lists in *LOCAL (grown, *CAP of room, three arrays of it: the ids, then
** room for em_canon_stacks' two answers) the stacks source SRC summed;
** *N of them. */
static int canon_list(merge_acc *m, uint32_t src, uint32_t **local,
                      size_t *cap, size_t *n)
{
    *n = 0;
    for (size_t x = 0; x < sum_nwords(m, src); x++) {
        uint64_t *seen;
        if (sum_word(m, src, sum_word_at(m, src, x), &seen) != NULL)
            *n += (size_t)__builtin_popcountll(*seen);
    }
    if (*n > *cap) {
        uint32_t *l = em_realloc(*local, *n * 3 * sizeof *l);
        if (l == NULL)
            return em_err(EMBER_ENOMEM, "merge: %zu stacks", *n);
        *local = l;
        *cap = *n;
    }
    *n = 0;
    for (size_t x = 0; x < sum_nwords(m, src); x++) {
        size_t w = sum_word_at(m, src, x);
        uint64_t *seen;
        if (sum_word(m, src, w, &seen) == NULL)
            continue;
        for (uint64_t bits = *seen; bits != 0; bits &= bits - 1)
            (*local)[(*n)++] = (uint32_t)(w * 64) +
                               (uint32_t)__builtin_ctzll(bits);
    }
    return EMBER_OK;
}

/* Moves the sum of stack LOCAL of source SRC to its canonical id, stack
** VLOCAL of source VSRC. */
static int canon_move(merge_acc *m, uint32_t src, uint32_t local,
                      uint32_t vsrc, uint32_t vlocal)
{
    uint64_t *seen = NULL, *tseen;
    int64_t *sum, *to;
    uint32_t k = local & 63;
    int rc = merge_src_pages(m, vsrc);

    if (rc != EMBER_OK)
        return rc;
    if ((sum = sum_word(m, src, local / 64, &seen)) == NULL)
        return EMBER_OK;            /* canon_list found it: not reached */
    if ((to = sum_slot(m, vsrc, vlocal, &tseen)) == NULL)
        return merge_nomem(vlocal);
    /* sums of one sign's values fit: no part of them overflows */
    *to = em_add_wrap(*to, sum[k]);
    *tseen |= 1ull << (vlocal & 63);
    sum[k] = 0;
    *seen &= ~(1ull << k);
    return EMBER_OK;
}

/* Moves every sum to its stack's canonical id (engine/canon.c): where the
** same stack was summed in several sources, the sums meet in the source
** the snapshot first met it in, so the result has each stack once and,
** collected source by source, stays in id order with no sort. A source's
** stacks are hashed in one batch. */
static int merge_canon(merge_acc *m)
{
    em_rtxn *r = m->r;
    uint32_t *local = NULL;
    size_t cap = 0, n = 0;
    int rc = EMBER_OK;

    for (uint32_t i = 0; i < m->nbs && rc == EMBER_OK; i++) {
        uint32_t base = r->src[i].base[EM_T_STACK], *vid, *vsrc;
        rc = canon_list(m, i, &local, &cap, &n);
        if (rc != EMBER_OK || n == 0)
            continue;
        vid = local + cap;
        vsrc = local + 2 * cap;
        rc = em_canon_stacks(r, i, local, n, vid, vsrc);
        for (size_t j = 0; j < n && rc == EMBER_OK; j++)
            if (vid[j] != base + local[j])
                rc = canon_move(m, i, local[j], vsrc[j],
                                vid[j] - r->src[vsrc[j]].base[EM_T_STACK]);
    }
    em_free(local);
    return rc;
}

/* The stacks M summed: how many, and (OUT not NULL) each virtual id and
** sum, by source then id, with the sums' check (issue 12). */
static size_t merge_collect(merge_acc *m, uint32_t *ids, int64_t *vals,
                            bool *ovf)
{
    const em_rtxn *r = m->r;
    int64_t pos = 0, neg = 0;
    size_t k = 0;

    for (uint32_t i = 0; i < (m->nbs > 0 ? m->nbs : 1); i++) {
        uint32_t base = r->src[i].base[EM_T_STACK];
        for (size_t x = 0; x < sum_nwords(m, i); x++) {
            size_t w = sum_word_at(m, i, x);
            uint64_t *seen;
            const int64_t *sum = sum_word(m, i, w, &seen);
            if (sum == NULL)
                continue;
            if (ids == NULL) {
                k += (size_t)__builtin_popcountll(*seen);
                continue;
            }
            for (uint64_t bits = *seen; bits != 0; bits &= bits - 1) {
                size_t b = (size_t)__builtin_ctzll(bits);
                ids[k] = base + (uint32_t)(w * 64 + b);
                vals[k++] = sum[b];
                *ovf |= !em_sum_add(&pos, &neg, sum[b]);
            }
        }
    }
    return k;
}

/* Turns the accumulator into the result, in stack order, and empties it.
** Its values must sum within int64 (em_sum_add): then every sum a
** renderer or a query makes of them (a total, a function's flat and cum,
** a group) fits too, and none wraps. Stacks stored in several sources are
** one stack (engine/canon.c), under the id the snapshot gave it first. */
static int merge_finish(merge_acc *m, ember_merged **out)
{
    ember_merged *r;
    size_t n;
    bool ovf = false;
    int rc = EMBER_OK;

    if (m->r->nsrc_stacks > 1 &&    /* else every id is its stack's own */
        (rc = merge_canon(m)) != EMBER_OK) {
        merge_acc_reset(m);
        return rc;
    }
    sum_words_sort(m);
    r = em_calloc(1, sizeof *r);
    n = merge_collect(m, NULL, NULL, NULL);

    if (r != NULL) {
        r->stacks = em_malloc(n * sizeof *r->stacks + 1);
        r->values = em_malloc(n * sizeof *r->values + 1);
    }
    if (r == NULL || r->stacks == NULL || r->values == NULL) {
        ember_merged_free(r);
        merge_acc_reset(m);
        return em_err(EMBER_ENOMEM, "merge result of %zu stacks", n);
    }
    r->n = merge_collect(m, r->stacks, r->values, &ovf);
    if (ovf)
        rc = em_err(EMBER_ELIMIT, "merge: the values of its %zu stacks sum "
                    "past the 64-bit range (merge fewer profiles)", n);
    r->nseries = m->sseen != NULL ?
                 roaring_bitmap_get_cardinality(m->sseen) : m->nseries;
    r->nprofiles = m->nprofiles;
    if (rc == EMBER_OK && m->nprofiles > 0) {
        r->span = m->span;
        rc = merge_span_duration(m, &r->span.duration_ns);
    }
    merge_acc_reset(m);
    if (rc != EMBER_OK) {
        ember_merged_free(r);
        return rc;
    }
    *out = r;
    return EMBER_OK;
}

EMBER_API int ember_snapshot_merge(ember_snapshot *snap,
                                   const ember_selector *sel,
                                   ember_merged **out)
{
    merge_acc m;
    query q;
    int rc;

    if (out == NULL || snap == NULL)
        return em_err(EMBER_EINVAL, "ember_snapshot_merge: NULL %s",
                      out == NULL ? "result" : "snapshot");
    *out = NULL;
    rc = query_begin_on(NULL, em_snapshot_rtxn(snap), sel, NULL, NULL, &q);
    if (rc != EMBER_OK)
        return rc;
    rc = merge_acc_init(&m, q.r);
    if (rc == EMBER_OK)
        rc = merge_acc_run(&m, &q);
    if (rc == EMBER_OK)
        rc = merge_finish(&m, out);
    merge_acc_free(&m);
    query_end(&q);
    if (rc == EMBER_OK)
        (*out)->snap = em_snapshot_ref(snap);
    return rc;
}

EMBER_API int ember_merge(ember_db *db, const ember_selector *sel,
                          ember_merged **out)
{
    ember_snapshot *snap = NULL;
    int rc;

    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_merge: NULL result");
    *out = NULL;
    if ((rc = ember_snapshot_begin(db, &snap)) != EMBER_OK)
        return rc;
    rc = ember_snapshot_merge(snap, sel, out);
    ember_snapshot_end(snap);
    return rc;
}

ember_snapshot *em_merged_snapshot(const ember_merged *m)
{
    return m != NULL ? m->snap : NULL;
}

int em_merged_make(const uint32_t *stacks, const int64_t *values, size_t n,
                   const ember_merged *span_of, ember_merged **out)
{
    ember_merged *r = em_calloc(1, sizeof *r);

    *out = NULL;
    if (r != NULL) {
        r->stacks = em_malloc(n * sizeof *r->stacks + 1);
        r->values = em_malloc(n * sizeof *r->values + 1);
    }
    if (r == NULL || r->stacks == NULL || r->values == NULL) {
        ember_merged_free(r);
        return em_err(EMBER_ENOMEM, "merged profile of %zu stacks", n);
    }
    if (n > 0) {
        memcpy(r->stacks, stacks, n * sizeof *stacks);
        memcpy(r->values, values, n * sizeof *values);
    }
    r->n = n;
    if (span_of != NULL) {
        r->nseries = span_of->nseries;
        r->nprofiles = span_of->nprofiles;
        r->span = span_of->span;
        r->snap = em_snapshot_ref(span_of->snap);
    }
    *out = r;
    return EMBER_OK;
}

EMBER_API size_t ember_merged_samples(const ember_merged *m,
                                      const uint32_t **stacks,
                                      const int64_t **values)
{
    if (stacks != NULL)
        *stacks = m != NULL ? m->stacks : NULL;
    if (values != NULL)
        *values = m != NULL ? m->values : NULL;
    return m != NULL ? m->n : 0;
}

EMBER_API void ember_merged_info(const ember_merged *m, uint64_t *nseries,
                                 uint64_t *nprofiles)
{
    if (nseries != NULL)
        *nseries = m != NULL ? m->nseries : 0;
    if (nprofiles != NULL)
        *nprofiles = m != NULL ? m->nprofiles : 0;
}

EMBER_API void ember_merged_span(const ember_merged *m, int64_t *min_time_ms,
                               int64_t *max_time_ms, int64_t *duration_ns,
                               int64_t *period)
{
    static const merge_span none;
    const merge_span *sp = m != NULL ? &m->span : &none;

    if (min_time_ms != NULL)
        *min_time_ms = sp->min_time;
    if (max_time_ms != NULL)
        *max_time_ms = sp->max_time;
    if (duration_ns != NULL)
        *duration_ns = sp->duration_ns;
    if (period != NULL)
        *period = sp->period;
}

EMBER_API void ember_merged_free(ember_merged *m)
{
    em_budget *b;

    if (m == NULL)
        return;
    b = em_budget_swap(NULL);       /* the snapshot is the handle's */
    ember_snapshot_end(m->snap);
    em_budget_swap(b);
    em_free(m->stacks);
    em_free(m->values);
    em_free(m);
}

/* ---- totals ------------------------------------------------------------------------ */

/* Points are gathered in fixed segments and copied once, in their final
** order, into the three arrays the caller sees: arrays grown by doubling
** were copied at each growth and once more to join a series met in several
** sources, and in a fresh process every copy faulted in new pages (a
** service's month of totals, 561k points: 78-98 ms, against 9.6 ms in a
** process whose heap other queries had grown). */
enum { TOT_SEG = 8192 };            /* points per segment */

typedef struct tot_seg {
    int64_t time[TOT_SEG], value[TOT_SEG], duration[TOT_SEG];
} tot_seg;

/* The points of one series from one source: points [off, off + n) in
** gathering order. */
typedef struct tot_series {
    uint32_t series;
    size_t off, n;
} tot_series;

struct ember_totals {
    tot_series *s;
    size_t ns, scap;
    int64_t *times, *values;
    int64_t *durations;             /* each profile's duration_ns */
    size_t np;
    tot_seg **seg;                  /* while gathering: point i is in
                                    ** seg[i / TOT_SEG] */
    size_t nseg, segcap;
    int64_t *sums;                  /* a focus's per-profile sums */
    size_t sumcap;
};

typedef struct tot_acc {
    query *q;
    ember_totals *t;
    int64_t from, to;               /* the interval being read */
} tot_acc;

/* Room for point T->np: a new segment when the last is full. */
static int tot_room(ember_totals *t)
{
    tot_seg *g;

    if (t->np < t->nseg * TOT_SEG)
        return EMBER_OK;
    if (t->nseg == t->segcap) {
        tot_seg **a = em_grow(t->seg, &t->segcap, t->nseg + 1, sizeof *a);
        if (a == NULL)
            return em_err(EMBER_ENOMEM, "totals: %zu points", t->np + 1);
        t->seg = a;
    }
    g = em_malloc(sizeof *g);
    if (g == NULL)
        return em_err(EMBER_ENOMEM, "totals: %zu points", t->np + 1);
    t->seg[t->nseg++] = g;
    return EMBER_OK;
}

static int tot_series_start(ember_totals *t, uint32_t series)
{
    if (t->ns > 0 && t->s[t->ns - 1].series == series)
        return EMBER_OK;
    if (t->ns == t->scap) {
        tot_series *s = em_grow(t->s, &t->scap, t->ns + 1, sizeof *s);
        if (s == NULL)
            return em_err(EMBER_ENOMEM, "totals: %zu series", t->ns + 1);
        t->s = s;
    }
    t->s[t->ns].series = series;
    t->s[t->ns].off = t->np;
    t->s[t->ns++].n = 0;
    return EMBER_OK;
}

/* Per-profile sums over the NKEPT stacks KEPT (focus, ignore) only, in
** T->sums. Each is a part of one profile's values, so it fits
** (values_check in engine/write.c) and the wrapping add never wraps for
** what this version writes. */
static int tot_focus(ember_totals *t, const em_chunk *c, const em_kept *kept,
                     uint32_t nkept)
{
    int64_t *sums = t->sums;

    if (c->h.nprofiles > t->sumcap) {
        sums = em_grow(t->sums, &t->sumcap, c->h.nprofiles, sizeof *sums);
        if (sums == NULL)
            return em_err(EMBER_ENOMEM, "totals: %u profiles", c->h.nprofiles);
        t->sums = sums;
    }
    memset(sums, 0, c->h.nprofiles * sizeof *sums);
    for (uint32_t k = 0; k < nkept; k++) {
        uint64_t e = (uint64_t)kept[k].at + kept[k].n;
        for (uint64_t j = kept[k].at; j < e; j++)
            sums[c->sample_profile[j]] = em_add_wrap(
                sums[c->sample_profile[j]], c->sample_value[j]);
    }
    return EMBER_OK;
}

static int tot_chunk(void *ctx, uint32_t series, const em_chunk *c,
                     const em_kept *kept, uint32_t nkept)
{
    tot_acc *a = ctx;
    ember_totals *t = a->t;
    const int64_t *vals = c->total;
    int rc = tot_series_start(t, series);

    if (rc == EMBER_OK && kept != NULL) {
        rc = tot_focus(t, c, kept, nkept);
        vals = t->sums;
    }
    for (uint32_t p = 0; rc == EMBER_OK && p < c->h.nprofiles; p++) {
        tot_seg *g;
        size_t i;
        if (c->time_ms[p] < a->from || c->time_ms[p] > a->to)
            continue;
        rc = tot_room(t);
        if (rc != EMBER_OK)
            break;
        g = t->seg[t->np / TOT_SEG];
        i = t->np++ % TOT_SEG;
        g->time[i] = c->time_ms[p];
        g->duration[i] = c->duration_ns[p];
        g->value[i] = vals[p];
        t->s[t->ns - 1].n++;
    }
    return rc;
}

/* The time of gathered point I. */
static int64_t tot_time(const ember_totals *t, size_t i)
{
    return t->seg[i / TOT_SEG]->time[i % TOT_SEG];
}

/* Entry X goes before Y: by series, then by first time, so that the
** parts of a series joined are in time order but where sources overlap. */
static bool tot_before(const ember_totals *t, const tot_series *x,
                       const tot_series *y)
{
    if (x->series != y->series)
        return x->series < y->series;
    if (x->n == 0 || y->n == 0)
        return false;
    return tot_time(t, x->off) < tot_time(t, y->off);
}

static int tot_source(void *ctx, uint32_t src, int64_t from, int64_t to)
{
    tot_acc *a = ctx;

    EM_UNUSED(src);
    a->from = from;
    a->to = to;
    return EMBER_OK;
}

/* Orders the entries by series, stably, when several sources were read
** (a series stored in several sources is met once per source, the first
** entry's place in series order kept); one source's come in series order. */
static void tot_order(ember_totals *t)
{
    tot_series *s = t->s;

    for (size_t i = 1; i < t->ns; i++) {
        tot_series x = s[i];
        size_t k = i;
        for (; k > 0 && tot_before(t, &x, &s[k - 1]); k--)
            s[k] = s[k - 1];
        s[k] = x;
    }
}

/* Copies the gathered points [from, from + n) to the final arrays at AT. */
static void tot_copy(ember_totals *t, size_t from, size_t n, size_t at)
{
    while (n > 0) {
        const tot_seg *g = t->seg[from / TOT_SEG];
        size_t i = from % TOT_SEG, k = TOT_SEG - i < n ? TOT_SEG - i : n;
        memcpy(t->times + at, g->time + i, k * sizeof *t->times);
        memcpy(t->values + at, g->value + i, k * sizeof *t->values);
        memcpy(t->durations + at, g->duration + i, k * sizeof *t->durations);
        from += k;
        at += k;
        n -= k;
    }
}

static void tot_segs_free(ember_totals *t)
{
    for (size_t i = 0; i < t->nseg; i++)
        em_free(t->seg[i]);
    em_free(t->seg);
    t->seg = NULL;
    t->nseg = t->segcap = 0;
}

/* Moves the gathered points into the final arrays, the entries of one
** series joined into one. */
static int tot_finish(ember_totals *t)
{
    size_t w = 0, at = 0;

    t->times = em_malloc(t->np * sizeof *t->times + 8);
    t->values = em_malloc(t->np * sizeof *t->values + 8);
    t->durations = em_malloc(t->np * sizeof *t->durations + 8);
    if (t->times == NULL || t->values == NULL || t->durations == NULL)
        return em_err(EMBER_ENOMEM, "totals: %zu points", t->np);
    tot_order(t);
    for (size_t i = 0; i < t->ns; i++) {
        tot_series x = t->s[i];     /* s[w] may be s[i] */
        if (w == 0 || t->s[w - 1].series != x.series)
            t->s[w++] = (tot_series){ x.series, at, 0 };
        tot_copy(t, x.off, x.n, at);
        at += x.n;
        t->s[w - 1].n += x.n;
    }
    t->ns = w;
    tot_segs_free(t);
    em_free(t->sums);
    t->sums = NULL;
    return EMBER_OK;
}

/* Sorts each series' points by time (chunks may overlap), stably. */
static int tot_sort(ember_totals *t)
{
    for (size_t i = 0; i < t->ns; i++) {
        int64_t *ts = t->times + t->s[i].off, *vs = t->values + t->s[i].off;
        int64_t *ds = t->durations + t->s[i].off;
        for (size_t j = 1; j < t->s[i].n; j++) {     /* nearly sorted */
            int64_t tj = ts[j], vj = vs[j], dj = ds[j];
            size_t k = j;
            for (; k > 0 && ts[k - 1] > tj; k--) {
                ts[k] = ts[k - 1];
                vs[k] = vs[k - 1];
                ds[k] = ds[k - 1];
            }
            ts[k] = tj;
            vs[k] = vj;
            ds[k] = dj;
        }
    }
    return EMBER_OK;
}

/* Runs a totals question Q into a new *OUT. */
static int totals_run(query *q, ember_totals **out)
{
    ember_totals *t = em_calloc(1, sizeof *t);
    tot_acc a = { q, t, 0, 0 };
    int rc = EMBER_OK;

    if (t == NULL)
        return em_err(EMBER_ENOMEM, "totals");
    if (rc == EMBER_OK) {
        scan s = { q->r, q->from, q->to,
                   EM_PART_TIMES | (q->filtered ? EM_PART_STACKS |
                   EM_PART_VALUES | EM_PART_PROFILES : EM_PART_TOTALS), 0,
                   tot_chunk, &a, NULL, 0, NULL, 0, tot_source, 0, NULL,
                   NULL, 0, false };
        rc = scan_all(&s, q);
        em_free(s.kept);
    }
    if (rc == EMBER_OK)
        rc = tot_finish(t);
    if (rc == EMBER_OK)
        rc = tot_sort(t);
    if (rc != EMBER_OK) {
        ember_totals_free(t);
        return rc;
    }
    *out = t;
    return EMBER_OK;
}

EMBER_API int ember_totals_get(ember_db *db, const ember_selector *sel,
                               ember_totals **out)
{
    query q;
    int rc;

    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_totals_get: NULL result");
    *out = NULL;
    rc = query_begin(db, sel, &q);
    if (rc != EMBER_OK)
        return rc;
    rc = totals_run(&q, out);
    query_end(&q);
    return rc;
}

EMBER_API size_t ember_totals_count(const ember_totals *t)
{
    return t != NULL ? t->ns : 0;
}

EMBER_API void ember_totals_series(const ember_totals *t, size_t i,
                                   uint32_t *series, const int64_t **times,
                                   const int64_t **values, size_t *n)
{
    const tot_series *s = t != NULL && i < t->ns ? &t->s[i] : NULL;

    if (series != NULL)
        *series = s ? s->series : 0;
    if (times != NULL)
        *times = s ? t->times + s->off : NULL;
    if (values != NULL)
        *values = s ? t->values + s->off : NULL;
    if (n != NULL)
        *n = s ? s->n : 0;
}

EMBER_API void ember_totals_free(ember_totals *t)
{
    if (t == NULL)
        return;
    tot_segs_free(t);
    em_free(t->sums);
    em_free(t->s);
    em_free(t->times);
    em_free(t->values);
    em_free(t->durations);
    em_free(t);
}

/* ---- the sample iterator ---------------------------------------------------------- */

/* A profile in range and the source it came from. */
typedef struct iter_prof {
    em_chunk_profile *p;
    uint32_t src;
} iter_prof;

/* One series' profiles in range, decoded, in time order. */
typedef struct iter_series {
    em_chunk_profile **tp;          /* transposed chunks (own allocations) */
    size_t nch, chcap;
    iter_prof *order;               /* profiles in range, by time */
    size_t np, pcap;
} iter_series;

/* A series of one source, under its canonical id. */
typedef struct iter_part {
    uint32_t canon, src, local;
} iter_part;

struct ember_iter {
    query q;
    iter_part *parts;               /* by canonical id, then source */
    size_t nparts, pi_next;
    uint32_t series;                /* canonical id of cur */
    iter_series cur;
    size_t pi;                      /* profile within cur */
    uint32_t k;                     /* sample within that profile */
    uint32_t src;                   /* the source being loaded */
    int64_t from, to;               /* and the interval */
};

static void iter_series_clear(iter_series *s)
{
    for (size_t i = 0; i < s->nch; i++)
        em_free(s->tp[i]);
    s->nch = 0;
    s->np = 0;
}

static int iter_take(iter_series *s, em_chunk_profile *tp, uint32_t n,
                     uint32_t src, int64_t from, int64_t to)
{
    for (uint32_t p = 0; p < n; p++) {
        if (tp[p].time_ms < from || tp[p].time_ms > to)
            continue;
        if (s->np == s->pcap) {
            iter_prof *o = em_grow(s->order, &s->pcap, s->np + 1, sizeof *o);
            if (o == NULL)
                return em_err(EMBER_ENOMEM, "iterator: %zu profiles",
                              s->np + 1);
            s->order = o;
        }
        s->order[s->np++] = (iter_prof){ &tp[p], src };
    }
    return EMBER_OK;
}

static int iter_chunk(void *ctx, uint32_t series, const em_chunk *c,
                      const em_kept *kept, uint32_t nkept)
{
    struct ember_iter *it = ctx;
    iter_series *s = &it->cur;
    int rc;

    EM_UNUSED(series);
    EM_UNUSED(kept);        /* the scan gets no keep set: next_point tests */
    EM_UNUSED(nkept);
    if (s->nch == s->chcap) {
        em_chunk_profile **tp = em_grow(s->tp, &s->chcap, s->nch + 1,
                                        sizeof *tp);
        if (tp == NULL)
            return em_err(EMBER_ENOMEM, "iterator: %zu chunks", s->nch + 1);
        s->tp = tp;
    }
    rc = em_chunk_transpose(c, &s->tp[s->nch]);
    if (rc != EMBER_OK)
        return rc;
    s->nch++;
    return iter_take(s, s->tp[s->nch - 1], c->h.nprofiles, it->src,
                     it->from, it->to);
}

static int order_cmp(const void *a, const void *b)
{
    const iter_prof *x = a, *y = b;

    if (x->p->time_ms != y->p->time_ms)
        return (x->p->time_ms > y->p->time_ms) -
               (x->p->time_ms < y->p->time_ms);
    if (x->src != y->src)
        return (x->src > y->src) - (x->src < y->src);
    return (x->p > y->p) - (x->p < y->p);   /* stable: chunks were taken in
                                            ** key order */
}

static int part_cmp(const void *a, const void *b)
{
    const iter_part *x = a, *y = b;

    if (x->canon != y->canon)
        return (x->canon > y->canon) - (x->canon < y->canon);
    return (x->src > y->src) - (x->src < y->src);
}

/* Loads the next series with something in range; EMBER_DONE at the end. */
static int iter_load(struct ember_iter *it)
{
    scan s = { it->q.r, it->q.from, it->q.to, EM_PART_ALL, 0, iter_chunk,
               it, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0, false };
    int rc = EMBER_OK;

    iter_series_clear(&it->cur);
    while (it->cur.np == 0 && rc == EMBER_OK) {
        if (it->pi_next == it->nparts)
            return EMBER_DONE;
        iter_series_clear(&it->cur);
        it->series = it->parts[it->pi_next].canon;
        for (; rc == EMBER_OK && it->pi_next < it->nparts &&
             it->parts[it->pi_next].canon == it->series; it->pi_next++) {
            const qsrc *qs = &it->q.qs[it->parts[it->pi_next].src];
            s.src = it->src = it->parts[it->pi_next].src;
            for (int k = 0; k < qs->niv && rc == EMBER_OK; k++) {
                s.from = it->from = qs->iv[k][0];
                s.to = it->to = qs->iv[k][1];
                rc = scan_series(&s, it->parts[it->pi_next].local);
            }
        }
    }
    if (rc == EMBER_OK)
        qsort(it->cur.order, it->cur.np, sizeof *it->cur.order, order_cmp);
    it->pi = 0;
    it->k = 0;
    return rc;
}

/* Lists every selected series of every source under its canonical id. */
static int iter_parts(struct ember_iter *it)
{
    query *q = &it->q;
    size_t n = 0;
    int rc = EMBER_OK;

    for (uint32_t i = 0; i < q->r->nsrc; i++)
        if (q->qs[i].series != NULL)
            n += (size_t)roaring_bitmap_get_cardinality(q->qs[i].series);
    if ((it->parts = em_malloc(n * sizeof *it->parts + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "iterator: %zu series", n);
    for (uint32_t i = 0; i < q->r->nsrc && rc == EMBER_OK; i++) {
        roaring_uint32_iterator_t r;
        if (q->qs[i].series == NULL)
            continue;
        roaring_init_iterator(q->qs[i].series, &r);
        for (; r.has_value && rc == EMBER_OK;
             roaring_advance_uint32_iterator(&r)) {
            iter_part *p = &it->parts[it->nparts++];
            p->src = i;
            p->local = r.current_value;
            rc = em_src_canon_series(q->r, i, p->local, &p->canon);
        }
    }
    if (rc == EMBER_OK)
        qsort(it->parts, it->nparts, sizeof *it->parts, part_cmp);
    return rc;
}

EMBER_API int ember_select(ember_db *db, const ember_selector *sel,
                           ember_iter **out)
{
    struct ember_iter *it;
    int rc;

    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_select: NULL result");
    *out = NULL;
    it = em_calloc(1, sizeof *it);
    if (it == NULL)
        return em_err(EMBER_ENOMEM, "iterator");
    rc = query_begin(db, sel, &it->q);
    if (rc != EMBER_OK) {
        em_free(it);
        return rc;
    }
    if ((rc = iter_parts(it)) != EMBER_OK) {
        ember_iter_free(it);            /* after the message: it names it */
        return rc;
    }
    *out = it;
    return EMBER_OK;
}

/* Whether the query keeps local stack ST of source SRC. */
static inline bool query_keeps(const query *q, uint32_t src, uint32_t st)
{
    const uint64_t *keep = q->qs[src].keep;

    return keep == NULL || (keep[st >> 6] >> (st & 63) & 1);
}

EMBER_API int ember_iter_next(ember_iter *it, ember_point *p)
{
    em_err_clear();
    if (it == NULL || p == NULL)
        return em_err(EMBER_EINVAL, "ember_iter_next: NULL argument");
    for (;;) {
        if (it->pi < it->cur.np) {
            iter_prof *ip = &it->cur.order[it->pi];
            em_chunk_profile *cp = ip->p;
            if (it->k < cp->n) {
                uint32_t st = cp->stacks[it->k];
                int64_t v = cp->values[it->k++];
                if (!query_keeps(&it->q, ip->src, st))
                    continue;
                p->series = it->series;
                p->time_ms = cp->time_ms;
                p->stack = it->q.r->src[ip->src].base[EM_T_STACK] + st;
                p->value = v;
                return EMBER_OK;
            }
            it->pi++;
            it->k = 0;
            continue;
        }
        int rc = iter_load(it);
        if (rc != EMBER_OK)
            return rc;
    }
}

EMBER_API void ember_iter_free(ember_iter *it)
{
    if (it == NULL)
        return;
    iter_series_clear(&it->cur);
    em_free(it->cur.tp);
    em_free(it->cur.order);
    em_free(it->parts);
    query_end(&it->q);
    em_free(it);
}

/* ---- the query layer's reader ------------------------------------------------------ */

/* The keep sets of one focus and ignore, per source, made as sources are
** first read. */
typedef struct rkeep {
    uint64_t *bits;
    uint64_t id;
    bool made;
} rkeep;

struct em_reader {
    ember_snapshot *snap;
    em_rtxn *r;                     /* the snapshot's txn */
    merge_acc m;                    /* made on the first merge */
    bool m_ready;
    char *focus, *ignore;           /* what keep was made for */
    rkeep *keep;                    /* [r->nsrc] */
    bool keep_valid;
};

int em_reader_open(ember_db *db, em_reader **out)
{
    em_reader *rd;
    int rc;

    *out = NULL;
    em_err_clear();
    if (db == NULL)
        return em_err(EMBER_EINVAL, "NULL database");
    rd = em_calloc(1, sizeof *rd);
    if (rd == NULL)
        return em_err(EMBER_ENOMEM, "reader");
    rc = ember_snapshot_begin(db, &rd->snap);
    if (rc != EMBER_OK) {
        em_free(rd);
        return rc;
    }
    rd->r = em_snapshot_rtxn(rd->snap);
    *out = rd;
    return EMBER_OK;
}

static void reader_keep_drop(em_reader *rd)
{
    for (uint32_t i = 0; rd->keep != NULL && i < rd->r->nsrc; i++)
        em_free(rd->keep[i].bits);
    em_free(rd->keep);
    em_free(rd->focus);
    em_free(rd->ignore);
    rd->keep = NULL;
    rd->focus = rd->ignore = NULL;
    rd->keep_valid = false;
}

void em_reader_close(em_reader *rd)
{
    em_budget *b;

    if (rd == NULL)
        return;
    if (rd->m_ready)
        merge_acc_free(&rd->m);
    reader_keep_drop(rd);
    b = em_budget_swap(NULL);       /* its decoder is the chunks' (scan_one) */
    ember_snapshot_end(rd->snap);
    em_budget_swap(b);
    em_free(rd);
}

ember_snapshot *em_reader_snapshot(em_reader *rd)
{
    return rd->snap;
}

int em_reader_split_labels(em_reader *rd, ember_strlist **out)
{
    return em_split_labels_read(rd->r, out);
}

static bool str_same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Makes the reader's keep sets those of SEL's focus and ignore, made once
** for a run of questions that share them (the groups of a merge by). */
static int reader_keep(em_reader *rd, const ember_selector *sel)
{
    const char *focus = sel != NULL ? sel->focus : NULL;
    const char *ignore = sel != NULL ? sel->ignore : NULL;

    if (rd->keep_valid && str_same(focus, rd->focus) &&
        str_same(ignore, rd->ignore))
        return EMBER_OK;
    reader_keep_drop(rd);
    if ((focus != NULL && (rd->focus = em_strdup(focus)) == NULL) ||
        (ignore != NULL && (rd->ignore = em_strdup(ignore)) == NULL) ||
        (rd->keep = em_calloc(rd->r->nsrc, sizeof *rd->keep)) == NULL) {
        reader_keep_drop(rd);
        return em_err(EMBER_ENOMEM, "focus");
    }
    rd->keep_valid = true;
    return EMBER_OK;
}

/* keep_fn: source SRC's keep set, made on first need. */
static int reader_keep_src(void *ctx, uint32_t src, const uint64_t **keep,
                           uint64_t *id)
{
    em_reader *rd = ctx;
    rkeep *k = &rd->keep[src];
    int rc = EMBER_OK;

    if (!k->made &&
        (rc = em_src_keep(rd->r, src, rd->focus, rd->ignore, &k->bits,
                          &k->id)) == EMBER_OK)
        k->made = true;
    *keep = k->bits;
    *id = k->id;
    return rc;
}

/* Starts a question on the reader's snapshot. */
static int reader_query(em_reader *rd, const ember_selector *sel, query *q)
{
    int rc;

    memset(q, 0, sizeof *q);
    rc = em_selector_check(sel);
    if (rc == EMBER_OK)
        rc = reader_keep(rd, sel);
    if (rc != EMBER_OK)
        return rc;
    return query_begin_on(NULL, rd->r, sel, reader_keep_src, rd, q);
}

static int reader_merge_ready(em_reader *rd)
{
    int rc;

    if (rd->m_ready)
        return EMBER_OK;
    if ((rc = merge_acc_init(&rd->m, rd->r)) != EMBER_OK) {
        merge_acc_free(&rd->m);
        return rc;
    }
    rd->m_ready = true;
    return EMBER_OK;
}

int em_reader_merge_add(em_reader *rd, const ember_selector *sel)
{
    query q;
    int rc = reader_merge_ready(rd);

    if (rc != EMBER_OK)
        return rc;
    rc = reader_query(rd, sel, &q);
    if (rc != EMBER_OK)
        return rc;
    rc = merge_acc_run(&rd->m, &q);
    query_end(&q);
    if (rc != EMBER_OK)
        merge_acc_reset(&rd->m);
    return rc;
}

int64_t em_reader_merge_whole(const em_reader *rd)
{
    return rd->m_ready ? rd->m.whole : 0;
}

int em_reader_merge_take(em_reader *rd, ember_merged **out)
{
    int rc = reader_merge_ready(rd);   /* nothing added: an empty merge */

    *out = NULL;
    if (rc == EMBER_OK)
        rc = merge_finish(&rd->m, out);
    if (rc == EMBER_OK)
        (*out)->snap = em_snapshot_ref(rd->snap);
    return rc;
}

int em_reader_totals(em_reader *rd, const ember_selector *sel,
                     ember_totals **out)
{
    query q;
    int rc;

    *out = NULL;
    rc = reader_query(rd, sel, &q);
    if (rc != EMBER_OK)
        return rc;
    rc = totals_run(&q, out);
    query_end(&q);
    return rc;
}

const int64_t *em_totals_durations(const ember_totals *t, size_t i)
{
    return t != NULL && i < t->ns ? t->durations + t->s[i].off : NULL;
}

/* Appends series LOCAL of source SRC, canonical id ID, to S as V. */
static int reader_series_one(em_reader *rd, uint32_t src, uint32_t local,
                             uint32_t id, em_series_set *s, size_t *cap,
                             em_series_info *v)
{
    ember_label l[EM_MAX_LABELS];
    size_t n;
    int rc = em_src_series(rd->r, src, local, &v->type, l, &n);

    if (rc != EMBER_OK)
        return rc;
    if (s->nlabels + n > *cap) {
        size_t need = s->nlabels + n;
        ember_label *g = em_grow(s->labels, cap, need, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "series: %zu labels", need);
        s->labels = g;
    }
    v->id = id;
    v->nlabels = n;
    v->first = s->nlabels;
    if (n > 0)                      /* a series may have no labels */
        memcpy(s->labels + s->nlabels, l, n * sizeof *l);
    s->nlabels += n;
    return EMBER_OK;
}

/* The selected series of source SRC not met yet (SEEN, by canonical id),
** appended to OUT. */
static int reader_series_src(em_reader *rd, uint32_t src,
                             const ember_selector *sel, roaring_bitmap_t *seen,
                             em_series_set *out, size_t *vcap, size_t *lcap)
{
    roaring_bitmap_t *ids = NULL;
    roaring_uint32_iterator_t it;
    int rc = em_src_select(rd->r, src, sel, &ids);

    if (rc == EMBER_OK)
        rc = series_restrict(rd->r, src, sel, ids);
    if (rc == EMBER_OK)
        roaring_init_iterator(ids, &it);
    for (; rc == EMBER_OK && it.has_value;
         roaring_advance_uint32_iterator(&it)) {
        uint32_t id;
        if ((rc = em_src_canon_series(rd->r, src, it.current_value, &id)) !=
            EMBER_OK || !roaring_bitmap_add_checked(seen, id))
            continue;
        if (out->n == *vcap) {
            em_series_info *g = em_grow(out->v, vcap, out->n + 1, sizeof *g);
            if (g == NULL) {
                rc = em_err(EMBER_ENOMEM, "series: %zu", out->n + 1);
                break;
            }
            out->v = g;
        }
        rc = reader_series_one(rd, src, it.current_value, id, out, lcap,
                               &out->v[out->n]);
        out->n += rc == EMBER_OK;
    }
    if (ids != NULL)
        roaring_bitmap_free(ids);
    return rc;
}

static int info_cmp(const void *a, const void *b)
{
    uint32_t x = ((const em_series_info *)a)->id;
    uint32_t y = ((const em_series_info *)b)->id;
    return (x > y) - (x < y);
}

int em_reader_series(em_reader *rd, const ember_selector *sel,
                     em_series_set *out)
{
    roaring_bitmap_t *seen = roaring_bitmap_create();
    size_t vcap = 0, lcap = 0;
    int rc = seen == NULL ? em_err(EMBER_ENOMEM, "series") : EMBER_OK;

    memset(out, 0, sizeof *out);
    if (rc == EMBER_OK)
        rc = em_selector_check(sel);
    for (uint32_t i = 0; i < rd->r->nsrc && rc == EMBER_OK; i++)
        rc = reader_series_src(rd, i, sel, seen, out, &vcap, &lcap);
    if (rc == EMBER_OK && out->v == NULL &&
        (out->v = em_calloc(1, sizeof *out->v)) == NULL)
        rc = em_err(EMBER_ENOMEM, "series");
    if (rc == EMBER_OK)
        qsort(out->v, out->n, sizeof *out->v, info_cmp);
    for (size_t i = 0; rc == EMBER_OK && i < out->n; i++)
        out->v[i].labels = out->labels + out->v[i].first;
    if (seen != NULL)
        roaring_bitmap_free(seen);
    if (rc != EMBER_OK)
        em_series_set_free(out);
    return rc;
}

void em_series_set_free(em_series_set *s)
{
    em_free(s->v);
    em_free(s->labels);
    memset(s, 0, sizeof *s);
}
