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
} scan;

/* A chunk as a scan hands it out: the decoded arrays and what keeps them
** alive, a held cache entry and (or) an allocation of the reader's own. */
typedef struct chunk_ref {
    em_chunk c;                     /* c.mem unused */
    em_cent *ent;
    void *own;
    uint32_t crc;                   /* the stored checksum */
} chunk_ref;

static int64_t sat_sub(int64_t a, uint64_t b)
{
    if (b > (uint64_t)INT64_MAX || a < INT64_MIN + (int64_t)b)
        return INT64_MIN;
    return a - (int64_t)b;
}

static void chunk_unref(em_rtxn *r, chunk_ref *ref)
{
    em_ccache_release(r->db->ccache, ref->ent);
    em_free(ref->own);
    memset(ref, 0, sizeof *ref);
}

/* Looks a stored chunk up in the cache (sealed chunks only; a hit needs no
** checksum: the entry was decoded from bytes that passed it, and its key
** holds their stored checksum), else checks the checksum. REF->c.h is the
** chunk's header either way. */
static int chunk_find(em_rtxn *r, const MDB_val *k, const MDB_val *d,
                      chunk_ref *ref)
{
    em_ccache *cc = r->db->ccache;
    int rc = em_chunk_header_peek(d->mv_data, d->mv_size, &ref->c.h,
                                  &ref->crc);

    if (rc != EMBER_OK)     /* say what a full check would have said */
        return em_chunk_header_read(d->mv_data, d->mv_size, &ref->c.h);
    if (cc != NULL && !(ref->c.h.flags & EM_CHUNK_HEAD))
        ref->ent = em_ccache_get(cc, k->mv_data, ref->crc, d->mv_size,
                                 r->epoch, &ref->c);
    if (ref->ent == NULL)
        rc = em_chunk_crc_check(d->mv_data, d->mv_size);
    return rc;
}

/* Decodes the parts of WANT that REF lacks and offers them to the cache:
** added to REF's entry, or a new entry for a sealed chunk, or else kept as
** REF's own allocation. */
static int chunk_complete(em_rtxn *r, const MDB_val *k, const MDB_val *d,
                          unsigned want, chunk_ref *ref)
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
    ** read again, so they are checked again (once per part added). */
    if (ref->ent != NULL)
        rc = em_chunk_crc_check(d->mv_data, d->mv_size);
    if (rc == EMBER_OK)
        rc = em_chunk_decode_parts(r->codec, d->mv_data, d->mv_size, want,
                                   &ref->c, &mem, &bytes);
    if (rc != EMBER_OK)
        return rc;
    added = em_chunk_parts(&ref->c) & ~have;
    if (ref->ent != NULL)
        kept = em_ccache_extend(cc, ref->ent, r->epoch, &ref->c, added, mem,
                                bytes);
    else if (cc != NULL && !(ref->c.h.flags & EM_CHUNK_HEAD))
        kept = (ref->ent = em_ccache_put(cc, k->mv_data, ref->crc,
                                         d->mv_size, r->epoch, &ref->c, mem,
                                         bytes)) != NULL;
    if (!kept)
        ref->own = mem;
    return EMBER_OK;
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

/* Finds and decodes what the scan needs of one stored chunk into REF;
** *SKIP when it lies outside the range. */
static int scan_load(scan *s, const MDB_val *k, const MDB_val *d,
                     chunk_ref *ref, bool *skip)
{
    const em_chunk_header *h = &ref->c.h;
    bool whole;
    int rc = chunk_find(s->r, k, d, ref);

    *skip = rc == EMBER_OK && (h->max_time < s->from || h->min_time > s->to);
    if (rc != EMBER_OK || *skip)
        return rc;
    whole = h->min_time >= s->from && h->max_time <= s->to;
    rc = chunk_complete(s->r, k, d, s->parts | (whole ? 0 : s->partial), ref);
    if (rc == EMBER_OK && ref->c.stacks != NULL && h->nstacks > 0 &&
        ref->c.stacks[h->nstacks - 1] >= s->r->next[EM_T_STACK])
        rc = EM_CORRUPT("stack id %u beyond the stack table",
                        ref->c.stacks[h->nstacks - 1]);
    return rc;
}

/* Reads one stored chunk and hands it to the scan's FN, unless it lies
** outside the range. A query's budget (em_budget) has its deadline checked
** here, once per chunk, and does not count the decoded chunk: it belongs
** to the handle's cache, whose bytes cache_bytes bounds. */
static int scan_one(scan *s, uint32_t series, const MDB_val *k,
                    const MDB_val *d)
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
    rc = scan_load(s, k, d, &ref, &skip);
    em_budget_swap(b);
    if (rc == EMBER_OK && !skip && s->keep != NULL)
        rc = chunk_kept(s, &ref, &nkept);
    if (rc == EMBER_OK && !skip)
        rc = s->fn(s->ctx, series, &ref.c, s->keep != NULL ? s->kept : NULL,
                   nkept);
    b = em_budget_swap(NULL);
    chunk_unref(s->r, &ref);
    em_budget_swap(b);
    return rc;
}

static int scan_series(scan *s, uint32_t series)
{
    uint8_t key[EM_CHUNK_KEY_LEN];
    MDB_val k = { sizeof key, key }, d;
    MDB_cursor *cur;
    int rc = EMBER_OK;
    int mrc = mdb_cursor_open(s->r->txn, s->r->db->dbi[EM_D_CHUNK], &cur);

    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "chunk cursor");
    em_chunk_key(key, series, sat_sub(s->from, s->r->max_span), 0);
    for (mrc = em_val_cursor(s->r->db, EM_D_CHUNK, cur, &k, &d,
                             MDB_SET_RANGE, &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(s->r->db, EM_D_CHUNK, cur, &k, &d, MDB_NEXT,
                             &rc)) {
        uint32_t sid, seq;
        int64_t t;
        if (k.mv_size != EM_CHUNK_KEY_LEN) {
            rc = EM_CORRUPT("chunk key of %zu bytes", k.mv_size);
            break;
        }
        em_chunk_key_parse(k.mv_data, &sid, &t, &seq);
        if (sid != series || t > s->to)
            break;
        rc = scan_one(s, series, &k, &d);
        if (rc != EMBER_OK)
            em_err_prefix(rc, "chunk (series %u, t=%lld, seq %u)", series,
                          (long long)t, seq);
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "chunk scan");
    return rc;
}

/* Runs S over every series in SERIES. */
static int scan_all(scan *s, const roaring_bitmap_t *series)
{
    roaring_uint32_iterator_t *it = roaring_create_iterator(series);
    int rc = EMBER_OK;

    if (it == NULL)
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

/* A read: snapshot, selected series and the stacks to keep. */
typedef struct query {
    em_rtxn own;                    /* the snapshot, when not borrowed */
    em_rtxn *r;                     /* own, or the reader's */
    roaring_bitmap_t *series;
    const uint64_t *keep;           /* dense bitset over stack ids; NULL:
                                    ** every stack (no focus, no ignore) */
    uint64_t keep_id;               /* its id in the keep cache */
    uint64_t *own_keep;             /* keep, when the query made it */
    int64_t from, to;
} query;

static inline bool query_keeps(const query *q, uint32_t st)
{
    return q->keep == NULL || (q->keep[st >> 6] >> (st & 63) & 1);
}

static void query_end(query *q)
{
    if (q->series != NULL)
        roaring_bitmap_free(q->series);
    em_free(q->own_keep);
    em_rtxn_end(&q->own);
}

/* ANDs the selector's own series ids into the query's series. */
static int series_restrict(const ember_selector *sel, query *q)
{
    roaring_bitmap_t *ids;

    if (sel == NULL || sel->series == NULL)
        return EMBER_OK;
    ids = roaring_bitmap_of_ptr(sel->nseries, sel->series);
    if (ids == NULL)
        return em_err(EMBER_ENOMEM, "selector: %zu series ids", sel->nseries);
    roaring_bitmap_and_inplace(q->series, ids);
    roaring_bitmap_free(ids);
    return EMBER_OK;
}

/* Starts a query on R (NULL: a snapshot of its own). KEEP, when not NULL,
** is a bitset the caller made for SEL's focus and ignore already, with
** its keep-cache id KEEP_ID. */
static int query_begin_on(ember_db *db, em_rtxn *r, const ember_selector *sel,
                          const uint64_t *keep, uint64_t keep_id, query *q)
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
    if (rc == EMBER_OK)
        rc = em_select_series(r, sel, &q->series);
    if (rc == EMBER_OK)
        rc = series_restrict(sel, q);
    if (rc == EMBER_OK && keep == NULL && sel != NULL)
        rc = em_keep_get(r, sel->focus, sel->ignore, &q->own_keep,
                         &keep_id);
    q->keep = keep != NULL ? keep : q->own_keep;
    q->keep_id = keep_id;
    range_of(sel, &q->from, &q->to);
    if (rc != EMBER_OK)
        query_end(q);
    return rc;
}

static int query_begin(ember_db *db, const ember_selector *sel, query *q)
{
    return query_begin_on(db, NULL, sel, NULL, 0, q);
}

/* Marks which profiles of C fall in [from, to]; returns how many. */
static uint32_t profiles_in_range(const em_chunk *c, int64_t from, int64_t to,
                                  uint8_t *in)
{
    uint32_t n = 0;

    for (uint32_t p = 0; p < c->h.nprofiles; p++) {
        in[p] = c->time_ms[p] >= from && c->time_ms[p] <= to;
        n += in[p];
    }
    return n;
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
};

typedef struct merge_acc {
    query *q;
    ember_db *db;                   /* whose pool the buffers go back to */
    int64_t *sum;                   /* [cap + 1] */
    uint64_t *seen;                 /* bitmap [cap / 64 + 1] */
    size_t cap;                     /* stack ids sum and seen cover */
    uint8_t *in;                    /* scratch: profile in range */
    uint32_t in_cap;
    uint32_t last_series;
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

static int merge_scratch(merge_acc *m, uint32_t n)
{
    uint8_t *in;

    if (n <= m->in_cap)
        return EMBER_OK;
    in = em_realloc(m->in, n);
    if (in == NULL)
        return em_err(EMBER_ENOMEM, "merge: %u profile flags", n);
    m->in = in;
    m->in_cap = n;
    return EMBER_OK;
}

/* merge_run for a chunk with large values: the run summed in 128 bits,
** which no run can leave, out of line so that merge_run keeps its
** registers. */
__attribute__((noinline))
static bool merge_run_wide(merge_acc *m, const em_chunk *c, uint32_t st,
                           uint64_t a, uint64_t b, const uint8_t *in)
{
    __int128 sum = m->sum[st];
    bool any = false;

    for (uint64_t j = a; j < b; j++)
        if (in == NULL || in[c->sample_profile[j]]) {
            sum += c->sample_value[j];
            any = true;
        }
    if (!any)
        return true;
    m->seen[st >> 6] |= 1ull << (st & 63);
    m->sum[st] = (int64_t)sum;
    return sum >= INT64_MIN && sum <= INT64_MAX;
}

/* Sums the samples [A, B) of stack ST; IN NULL means every profile is in
** range. False when the stack's sum leaves the int64 range (issue 12: it
** wrapped). A chunk of small values (em_chunk.small_values: the usual
** case) sums its run in 64 bits, which cannot wrap, and checks only the
** add to the stack's sum; any other goes through 128 bits. */
static bool merge_run(merge_acc *m, const em_chunk *c, uint32_t st,
                      uint64_t a, uint64_t b, const uint8_t *in)
{
    uint64_t sum = 0;
    bool any = in == NULL && a < b;

    if (!c->small_values)
        return merge_run_wide(m, c, st, a, b, in);
    if (in == NULL) {
        for (uint64_t j = a; j < b; j++)
            sum += (uint64_t)c->sample_value[j];
    } else {
        for (uint64_t j = a; j < b; j++) {
            uint8_t f = in[c->sample_profile[j]];
            sum += f ? (uint64_t)c->sample_value[j] : 0;
            any |= f;
        }
    }
    if (!any)
        return true;
    m->seen[st >> 6] |= 1ull << (st & 63);
    return !__builtin_add_overflow(m->sum[st], (int64_t)sum, &m->sum[st]);
}

/* The chunk scan prefixes the chunk (series, time), so this names the
** stack only. */
static int merge_overflow(uint32_t st)
{
    return em_err(EMBER_ELIMIT, "merge: the values of stack %u sum past the "
                  "64-bit range (merge fewer profiles)", st);
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
static int merge_span_add(merge_acc *m, const em_chunk *c, const uint8_t *in)
{
    merge_span *sp = &m->span;

    if (m->nkeys + c->h.nprofiles > m->cap_keys) {
        size_t need = m->nkeys + c->h.nprofiles;
        span_key *k = em_grow(m->keys, &m->cap_keys, need, sizeof *k);
        if (k == NULL)
            return em_err(EMBER_ENOMEM, "merge: %zu profile headers", need);
        m->keys = k;
    }
    for (uint32_t p = 0; p < c->h.nprofiles; p++) {
        if (in != NULL && !in[p])
            continue;
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
                            const uint8_t *in)
{
    for (uint32_t p = 0; p < c->h.nprofiles; p++)
        if (in == NULL || in[p])
            m->whole = em_add_sat(m->whole, c->total[p]);
}

static int merge_chunk(void *ctx, uint32_t series, const em_chunk *c,
                       const em_kept *kept, uint32_t nkept)
{
    merge_acc *m = ctx;
    query *q = m->q;
    bool whole = c->h.min_time >= q->from && c->h.max_time <= q->to;
    uint32_t n = c->h.nprofiles;
    int rc;

    if (!whole) {
        if ((rc = merge_scratch(m, n)) != EMBER_OK)
            return rc;
        n = profiles_in_range(c, q->from, q->to, m->in);
    }
    if (n == 0)
        return EMBER_OK;
    if (kept == NULL) {
        for (uint32_t i = 0; i < c->h.nstacks; i++)
            if (!merge_run(m, c, c->stacks[i], c->stack_start[i],
                           c->stack_start[i + 1], whole ? NULL : m->in))
                return merge_overflow(c->stacks[i]);
    } else {
        merge_whole_add(m, c, whole ? NULL : m->in);
        for (uint32_t k = 0; k < nkept; k++) {
            if (k + 4 < nkept)  /* a focus's runs are scattered */
                __builtin_prefetch(&c->sample_value[kept[k + 4].at]);
            if (!merge_run(m, c, kept[k].stack, kept[k].at,
                           (uint64_t)kept[k].at + kept[k].n,
                           whole ? NULL : m->in))
                return merge_overflow(kept[k].stack);
        }
    }
    if ((rc = merge_span_add(m, c, whole ? NULL : m->in)) != EMBER_OK)
        return rc;
    m->nprofiles += n;
    if (m->nseries == 0 || m->last_series != series)
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
    em_free(s->in);
}

void em_mpool_free(em_mpool *p)
{
    for (size_t i = 0; i < p->n; i++)
        mscratch_free(&p->s[i]);
    pthread_mutex_destroy(&p->mu);
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
    m->in = s.in;
    m->in_cap = s.in_cap;
    /* pooled buffers count for the query that holds them */
    em_budget_hold(m->sum, true);
    em_budget_hold(m->seen, true);
    em_budget_hold(m->keys, true);
    em_budget_hold(m->tmp_keys, true);
    em_budget_hold(m->in, true);
}

/* Pools M's buffers, zeroed, or frees them when the pool is full. */
static void mpool_give(em_mpool *p, merge_acc *m)
{
    em_mscratch s = { .sum = m->sum, .seen = m->seen, .cap = m->cap,
                      .keys = m->keys, .tmp_keys = m->tmp_keys,
                      .cap_keys = m->cap_keys, .cap_tmp = m->cap_tmp,
                      .in = m->in, .in_cap = m->in_cap };

    pthread_mutex_lock(&p->mu);
    if (p->n < EM_MPOOL_SLOTS && s.sum != NULL && s.seen != NULL) {
        p->s[p->n++] = s;
        em_budget_hold(s.sum, false);   /* the pool's now, not the query's */
        em_budget_hold(s.seen, false);
        em_budget_hold(s.keys, false);
        em_budget_hold(s.tmp_keys, false);
        em_budget_hold(s.in, false);
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
static int merge_acc_init(merge_acc *m, ember_db *db, size_t nstacks)
{
    memset(m, 0, sizeof *m);
    m->db = db;
    m->span = (merge_span){ INT64_MAX, INT64_MIN, 0, INT64_MIN };
    mpool_take(&db->mpool, m);
    return merge_acc_size(m, nstacks);
}

/* Empties M for the next merge, touching only the stacks it summed. */
static void merge_acc_reset(merge_acc *m)
{
    for (size_t w = 0; w < (m->nstacks + 63) / 64; w++) {
        for (uint64_t bits = m->seen[w]; bits != 0; bits &= bits - 1)
            m->sum[w * 64 + (size_t)__builtin_ctzll(bits)] = 0;
        m->seen[w] = 0;
    }
    m->nseries = m->nprofiles = 0;
    m->nkeys = m->nbreaks = 0;
    m->dur_run = 0;
    m->whole = 0;
    m->span = (merge_span){ INT64_MAX, INT64_MIN, 0, INT64_MIN };
}

/* Hands M's buffers back to the pool, emptied (a failed merge may have
** left sums behind). */
static void merge_acc_free(merge_acc *m)
{
    if (m->sum != NULL && m->seen != NULL && m->cap >= m->nstacks) {
        merge_acc_reset(m);
    } else {                /* a failed sizing: not worth pooling */
        em_free(m->sum);
        m->sum = NULL;
    }
    mpool_give(&m->db->mpool, m);
}

/* Adds what Q selects to M. */
static int merge_acc_run(merge_acc *m, query *q)
{
    scan s = { q->r, q->from, q->to,
               EM_PART_TIMES | EM_PART_STACKS | EM_PART_VALUES |
               (q->keep != NULL ? EM_PART_TOTALS : 0),
               EM_PART_PROFILES, merge_chunk, m, q->keep, q->keep_id, NULL,
               0 };
    int rc;

    m->q = q;
    m->last_series = UINT32_MAX;
    rc = scan_all(&s, q->series);
    em_free(s.kept);
    return rc;
}

/* Turns the accumulator into the result, in stack order, and empties it.
** Its values must sum within int64 (em_sum_add): then every sum a
** renderer or a query makes of them (a total, a function's flat and cum,
** a group) fits too, and none wraps. */
static int merge_finish(merge_acc *m, ember_merged **out)
{
    ember_merged *r = em_calloc(1, sizeof *r);
    size_t nstacks = m->nstacks, n = 0, k = 0;
    int64_t pos = 0, neg = 0;
    bool ovf = false;
    int rc = EMBER_OK;

    for (size_t w = 0; w < (nstacks + 63) / 64; w++)
        n += (size_t)__builtin_popcountll(m->seen[w]);
    if (r != NULL) {
        r->stacks = em_malloc(n * sizeof *r->stacks + 1);
        r->values = em_malloc(n * sizeof *r->values + 1);
    }
    if (r == NULL || r->stacks == NULL || r->values == NULL) {
        ember_merged_free(r);
        merge_acc_reset(m);
        return em_err(EMBER_ENOMEM, "merge result of %zu stacks", n);
    }
    for (size_t w = 0; w < (nstacks + 63) / 64; w++)
        for (uint64_t bits = m->seen[w]; bits != 0; bits &= bits - 1) {
            uint32_t st = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
            r->stacks[k] = st;
            r->values[k++] = m->sum[st];
            ovf |= !em_sum_add(&pos, &neg, m->sum[st]);
        }
    r->n = n;
    if (ovf)
        rc = em_err(EMBER_ELIMIT, "merge: the values of its %zu stacks sum "
                    "past the 64-bit range (merge fewer profiles)", n);
    r->nseries = m->nseries;
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

EMBER_API int ember_merge(ember_db *db, const ember_selector *sel,
                          ember_merged **out)
{
    merge_acc m;
    query q;
    int rc;

    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_merge: NULL result");
    *out = NULL;
    rc = query_begin(db, sel, &q);
    if (rc != EMBER_OK)
        return rc;
    rc = merge_acc_init(&m, q.r->db, q.r->next[EM_T_STACK]);
    if (rc == EMBER_OK)
        rc = merge_acc_run(&m, &q);
    if (rc == EMBER_OK)
        rc = merge_finish(&m, out);
    merge_acc_free(&m);
    query_end(&q);
    return rc;
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
    if (m == NULL)
        return;
    em_free(m->stacks);
    em_free(m->values);
    em_free(m);
}

/* ---- totals ------------------------------------------------------------------------ */

typedef struct tot_series {
    uint32_t series;
    size_t off, n;
} tot_series;

struct ember_totals {
    tot_series *s;
    size_t ns, scap;
    int64_t *times, *values;
    int64_t *durations;             /* each profile's duration_ns */
    size_t np, pcap;
};

typedef struct tot_acc {
    query *q;
    ember_totals *t;
} tot_acc;

/* Grows the three parallel point arrays alike: each em_grow starts from
** the same capacity, so each reaches the same one. */
static int tot_reserve(ember_totals *t, size_t np)
{
    int64_t **arrays[3] = { &t->times, &t->values, &t->durations };
    size_t cap = t->pcap;

    if (t->np + np <= t->pcap)
        return EMBER_OK;
    for (int i = 0; i < 3; i++) {
        size_t c = t->pcap;
        int64_t *a = em_grow(*arrays[i], &c, t->np + np, sizeof *a);
        if (a == NULL)
            return em_err(EMBER_ENOMEM, "totals: %zu points", t->np + np);
        *arrays[i] = a;
        cap = c;
    }
    t->pcap = cap;
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

/* Per-profile sums over the NKEPT stacks KEPT (focus, ignore) only. Each
** is a part of one profile's values, so it fits (values_check in
** engine/write.c) and the wrapping add never wraps for what this version
** writes. */
static void tot_focus(const em_chunk *c, const em_kept *kept,
                      uint32_t nkept, int64_t *sums)
{
    memset(sums, 0, c->h.nprofiles * sizeof *sums);
    for (uint32_t k = 0; k < nkept; k++) {
        uint64_t e = (uint64_t)kept[k].at + kept[k].n;
        for (uint64_t j = kept[k].at; j < e; j++)
            sums[c->sample_profile[j]] = em_add_wrap(
                sums[c->sample_profile[j]], c->sample_value[j]);
    }
}

static int tot_chunk(void *ctx, uint32_t series, const em_chunk *c,
                     const em_kept *kept, uint32_t nkept)
{
    tot_acc *a = ctx;
    ember_totals *t = a->t;
    const int64_t *vals = c->total;
    int rc = tot_series_start(t, series);

    if (rc == EMBER_OK)
        rc = tot_reserve(t, c->h.nprofiles);
    if (rc != EMBER_OK)
        return rc;
    if (kept != NULL) {
        tot_focus(c, kept, nkept, t->values + t->np);
        vals = t->values + t->np;
    }
    for (uint32_t p = 0; p < c->h.nprofiles; p++) {
        if (c->time_ms[p] < a->q->from || c->time_ms[p] > a->q->to)
            continue;
        t->times[t->np] = c->time_ms[p];
        t->durations[t->np] = c->duration_ns[p];
        t->values[t->np++] = vals[p];   /* in place: np <= p's slot */
        t->s[t->ns - 1].n++;
    }
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
    tot_acc a = { q, t };
    int rc = EMBER_OK;

    if (t == NULL)
        return em_err(EMBER_ENOMEM, "totals");
    if (rc == EMBER_OK) {
        scan s = { q->r, q->from, q->to,
                   EM_PART_TIMES | (q->keep ? EM_PART_STACKS |
                   EM_PART_VALUES | EM_PART_PROFILES : EM_PART_TOTALS), 0,
                   tot_chunk, &a, q->keep, q->keep_id, NULL, 0 };
        rc = scan_all(&s, q->series);
        em_free(s.kept);
    }
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
    em_free(t->s);
    em_free(t->times);
    em_free(t->values);
    em_free(t->durations);
    em_free(t);
}

/* ---- the sample iterator ---------------------------------------------------------- */

/* One series' profiles in range, decoded, in time order. */
typedef struct iter_series {
    em_chunk_profile **tp;          /* transposed chunks (own allocations) */
    size_t nch, chcap;
    em_chunk_profile **order;       /* profiles in range, by time */
    size_t np, pcap;
} iter_series;

struct ember_iter {
    query q;
    uint32_t *sids;
    size_t nsids, si;
    iter_series cur;
    size_t pi;                      /* profile within cur */
    uint32_t k;                     /* sample within that profile */
};

static void iter_series_clear(iter_series *s)
{
    for (size_t i = 0; i < s->nch; i++)
        em_free(s->tp[i]);
    s->nch = 0;
    s->np = 0;
}

static int iter_take(iter_series *s, em_chunk_profile *tp, uint32_t n,
                     int64_t from, int64_t to)
{
    for (uint32_t p = 0; p < n; p++) {
        if (tp[p].time_ms < from || tp[p].time_ms > to)
            continue;
        if (s->np == s->pcap) {
            em_chunk_profile **o = em_grow(s->order, &s->pcap, s->np + 1,
                                           sizeof *o);
            if (o == NULL)
                return em_err(EMBER_ENOMEM, "iterator: %zu profiles",
                              s->np + 1);
            s->order = o;
        }
        s->order[s->np++] = &tp[p];
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
    return iter_take(s, s->tp[s->nch - 1], c->h.nprofiles, it->q.from,
                     it->q.to);
}

static int order_cmp(const void *a, const void *b)
{
    const em_chunk_profile *x = *(em_chunk_profile *const *)a;
    const em_chunk_profile *y = *(em_chunk_profile *const *)b;
    if (x->time_ms != y->time_ms)
        return (x->time_ms > y->time_ms) - (x->time_ms < y->time_ms);
    return (x > y) - (x < y);   /* stable: chunks were taken in key order */
}

/* Loads the next series with something in range; EMBER_DONE at the end. */
static int iter_load(struct ember_iter *it)
{
    scan s = { it->q.r, it->q.from, it->q.to, EM_PART_ALL, 0, iter_chunk,
               it, NULL, 0, NULL, 0 };
    int rc = EMBER_OK;

    iter_series_clear(&it->cur);
    while (it->cur.np == 0 && rc == EMBER_OK) {
        if (it->si == it->nsids)
            return EMBER_DONE;
        iter_series_clear(&it->cur);
        rc = scan_series(&s, it->sids[it->si++]);
    }
    if (rc == EMBER_OK)
        qsort(it->cur.order, it->cur.np, sizeof *it->cur.order, order_cmp);
    it->pi = 0;
    it->k = 0;
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
    it->nsids = (size_t)roaring_bitmap_get_cardinality(it->q.series);
    it->sids = em_malloc(it->nsids * sizeof *it->sids + 1);
    if (it->sids == NULL) {
        rc = em_err(EMBER_ENOMEM, "iterator: %zu series", it->nsids);
        ember_iter_free(it);            /* after the message: it names it */
        return rc;
    }
    roaring_bitmap_to_uint32_array(it->q.series, it->sids);
    *out = it;
    return EMBER_OK;
}

EMBER_API int ember_iter_next(ember_iter *it, ember_point *p)
{
    em_err_clear();
    if (it == NULL || p == NULL)
        return em_err(EMBER_EINVAL, "ember_iter_next: NULL argument");
    for (;;) {
        if (it->pi < it->cur.np) {
            em_chunk_profile *cp = it->cur.order[it->pi];
            if (it->k < cp->n) {
                uint32_t st = cp->stacks[it->k];
                int64_t v = cp->values[it->k++];
                if (!query_keeps(&it->q, st))
                    continue;
                p->series = it->sids[it->si - 1];
                p->time_ms = cp->time_ms;
                p->stack = st;
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
    em_free(it->sids);
    query_end(&it->q);
    em_free(it);
}

/* ---- the query layer's reader ------------------------------------------------------ */

struct em_reader {
    ember_snapshot *snap;
    em_rtxn *r;                     /* the snapshot's txn */
    merge_acc m;                    /* made on the first merge */
    bool m_ready;
    char *focus, *ignore;           /* what keep was made for */
    uint64_t *keep;
    uint64_t keep_id;
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

void em_reader_close(em_reader *rd)
{
    em_budget *b;

    if (rd == NULL)
        return;
    if (rd->m_ready)
        merge_acc_free(&rd->m);
    em_free(rd->focus);
    em_free(rd->ignore);
    em_free(rd->keep);
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

/* The keep bitset of SEL's focus and ignore, made once for a run of
** questions that share them (the groups of a merge by). */
static int reader_keep(em_reader *rd, const ember_selector *sel,
                       const uint64_t **keep)
{
    const char *focus = sel != NULL ? sel->focus : NULL;
    const char *ignore = sel != NULL ? sel->ignore : NULL;
    char *f = NULL, *g = NULL;
    uint64_t *k = NULL, id = 0;
    int rc;

    if (!rd->keep_valid || !str_same(focus, rd->focus) ||
        !str_same(ignore, rd->ignore)) {
        if ((focus != NULL && (f = em_strdup(focus)) == NULL) ||
            (ignore != NULL && (g = em_strdup(ignore)) == NULL)) {
            em_free(f);
            return em_err(EMBER_ENOMEM, "focus");
        }
        if ((rc = em_keep_get(rd->r, focus, ignore, &k, &id)) != EMBER_OK) {
            em_free(f);
            em_free(g);
            return rc;
        }
        em_free(rd->focus);
        em_free(rd->ignore);
        em_free(rd->keep);
        rd->focus = f;
        rd->ignore = g;
        rd->keep = k;
        rd->keep_id = id;
        rd->keep_valid = true;
    }
    *keep = rd->keep;
    return EMBER_OK;
}

/* Starts a question on the reader's snapshot. */
static int reader_query(em_reader *rd, const ember_selector *sel, query *q)
{
    const uint64_t *keep = NULL;
    int rc;

    memset(q, 0, sizeof *q);
    rc = em_selector_check(sel);
    if (rc == EMBER_OK)
        rc = reader_keep(rd, sel, &keep);
    if (rc != EMBER_OK)
        return rc;
    return query_begin_on(NULL, rd->r, sel, keep, rd->keep_id, q);
}

int em_reader_merge_add(em_reader *rd, const ember_selector *sel)
{
    query q;
    int rc;

    if (!rd->m_ready) {
        rc = merge_acc_init(&rd->m, rd->r->db, rd->r->next[EM_T_STACK]);
        if (rc != EMBER_OK) {
            merge_acc_free(&rd->m);
            return rc;
        }
        rd->m_ready = true;
    }
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
    int rc;

    *out = NULL;
    if (!rd->m_ready) {             /* nothing added: an empty merge */
        rc = merge_acc_init(&rd->m, rd->r->db, rd->r->next[EM_T_STACK]);
        if (rc != EMBER_OK) {
            merge_acc_free(&rd->m);
            return rc;
        }
        rd->m_ready = true;
    }
    return merge_finish(&rd->m, out);
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

/* String ID of the snapshot as a C string (records end with a NUL). */
static int reader_str(em_reader *rd, uint32_t id, const char **out)
{
    const uint8_t *str;
    size_t len;
    int rc = em_table_get(rd->r->txn, rd->r->db, EM_T_STRING, id, &str,
                          &len);

    if (rc == EMBER_ENOTFOUND)
        rc = EM_CORRUPT("a series names missing string %u", id);
    *out = (const char *)str;
    return rc;
}

/* Decodes series ID into V, its labels appended to S's label storage. */
static int reader_series_one(em_reader *rd, uint32_t id, em_series_set *s,
                             size_t *cap, em_series_info *v)
{
    em_series_rec rec;
    const uint8_t *p;
    size_t len;
    int rc = em_table_get(rd->r->txn, rd->r->db, EM_T_SERIES, id, &p, &len);

    if (rc == EMBER_OK)
        rc = em_series_decode(p, len, &rec);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "series %u", id);
    if (s->nlabels + rec.nlabels > *cap) {
        size_t need = s->nlabels + rec.nlabels;
        ember_label *l = em_grow(s->labels, cap, need, sizeof *l);
        if (l == NULL)
            return em_err(EMBER_ENOMEM, "series: %zu labels", need);
        s->labels = l;
    }
    v->id = id;
    v->nlabels = rec.nlabels;
    v->first = s->nlabels;
    rc = reader_str(rd, rec.type, &v->type);
    for (uint32_t i = 0; i < rec.nlabels && rc == EMBER_OK; i++) {
        ember_label *l = &s->labels[s->nlabels++];
        rc = reader_str(rd, rec.names[i], &l->name);
        if (rc == EMBER_OK)
            rc = reader_str(rd, rec.values[i], &l->value);
    }
    return rc;
}

int em_reader_series(em_reader *rd, const ember_selector *sel,
                     em_series_set *out)
{
    roaring_bitmap_t *ids = NULL;
    roaring_uint32_iterator_t it;
    query q = { .r = rd->r };
    size_t cap = 0;
    int rc;

    memset(out, 0, sizeof *out);
    rc = em_selector_check(sel);
    if (rc == EMBER_OK)
        rc = em_select_series(rd->r, sel, &q.series);
    if (rc == EMBER_OK)
        rc = series_restrict(sel, &q);
    ids = q.series;
    if (rc == EMBER_OK) {
        out->n = (size_t)roaring_bitmap_get_cardinality(ids);
        out->v = em_calloc(out->n + 1, sizeof *out->v);
        if (out->v == NULL)
            rc = em_err(EMBER_ENOMEM, "series: %zu", out->n);
    }
    if (rc == EMBER_OK)
        roaring_init_iterator(ids, &it);
    for (size_t i = 0; rc == EMBER_OK && it.has_value;
         i++, roaring_advance_uint32_iterator(&it))
        rc = reader_series_one(rd, it.current_value, out, &cap, &out->v[i]);
    for (size_t i = 0; rc == EMBER_OK && i < out->n; i++)
        out->v[i].labels = out->labels + out->v[i].first;
    if (ids != NULL)
        roaring_bitmap_free(ids);
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
