/*
** engine/read.c: the read path. Matchers give series ids through the
** postings (ANDed with the caller's series ids when it gives some); for
** each series the chunks overlapping [from, to] are found by seeking its
** chunk keys from (series, from - widest chunk span); each chunk is checked
** (checksum) and decoded, only the columns the question needs.
**
** Focus and ignore become one dense bitset over stack ids (the stacks to
** keep), made once per question from the function postings, so that the
** per-stack test in the inner loops is a bit test, not a bitmap search.
**
** Merge sums into a dense array indexed by stack id (ids are dense, so this
** is a column add with no hashing) plus a bitmap of the stacks seen, which
** also yields the result in stack order for free. Each merged profile's
** header (time, duration, period) is folded into the span pprof's merge
** computes, once per profile. A corrupt chunk fails the
** query; it is never skipped, so a query never returns wrong numbers.
**
** The query layer reads through an em_reader: one snapshot for the whole
** query, and one merge accumulator reused by every merge it makes (a merge
** by a label makes one per group), emptied by clearing only the stacks it
** touched.
*/
#include <stdlib.h>

#include "engine/store.h"

/* Calls FN for each chunk of SERIES overlapping [from, to]. */
typedef int (*chunk_fn)(void *ctx, uint32_t series, const em_chunk *c);

typedef struct scan {
    em_rtxn *r;
    int64_t from, to;
    unsigned cols;
    chunk_fn fn;
    void *ctx;
} scan;

static int64_t sat_sub(int64_t a, uint64_t b)
{
    if (b > (uint64_t)INT64_MAX || a < INT64_MIN + (int64_t)b)
        return INT64_MIN;
    return a - (int64_t)b;
}

/* Decodes one stored chunk and hands it to the scan's FN. */
static int scan_one(scan *s, uint32_t series, const MDB_val *d)
{
    em_chunk_header h;
    em_chunk c;
    int rc = em_chunk_header_read(d->mv_data, d->mv_size, &h);

    if (rc != EMBER_OK || h.max_time < s->from || h.min_time > s->to)
        return rc;
    rc = em_chunk_decode(s->r->codec, d->mv_data, d->mv_size,
                         s->cols | EM_COL_CRC_DONE, &c);
    if (rc != EMBER_OK)
        return rc;
    if ((s->cols & EM_COL_SAMPLES) && c.h.nstacks > 0 &&
        c.stacks[c.h.nstacks - 1] >= s->r->next[EM_T_STACK])
        rc = EM_CORRUPT("stack id %u beyond the stack table",
                        c.stacks[c.h.nstacks - 1]);
    if (rc == EMBER_OK)
        rc = s->fn(s->ctx, series, &c);
    em_chunk_release(&c);
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
    for (mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        uint32_t sid, seq;
        int64_t t;
        if (k.mv_size != EM_CHUNK_KEY_LEN) {
            rc = EM_CORRUPT("chunk key of %zu bytes", k.mv_size);
            break;
        }
        em_chunk_key_parse(k.mv_data, &sid, &t, &seq);
        if (sid != series || t > s->to)
            break;
        rc = scan_one(s, series, &d);
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

/* Sets in the dense bitset KEEP (words for the snapshot's stacks) the bits
** of BM, or clears them when CLEAR. */
static void keep_apply(uint64_t *keep, uint32_t nstacks,
                       const roaring_bitmap_t *bm, bool clear)
{
    roaring_uint32_iterator_t it;

    roaring_init_iterator(bm, &it);
    for (; it.has_value && it.current_value < nstacks;
         roaring_advance_uint32_iterator(&it)) {
        uint32_t st = it.current_value;
        if (clear)
            keep[st >> 6] &= ~(1ull << (st & 63));
        else
            keep[st >> 6] |= 1ull << (st & 63);
    }
}

/* The stacks to keep under FOCUS and IGNORE (either may be NULL): through
** a FOCUS function and through no IGNORE function. *OUT is NULL when both
** are NULL (keep everything), else a new bitset of nstacks bits. */
static int keep_build(em_rtxn *r, const char *focus, const char *ignore,
                      uint64_t **out)
{
    uint32_t nstacks = r->next[EM_T_STACK];
    size_t words = (size_t)nstacks / 64 + 1;
    roaring_bitmap_t *bm = NULL;
    uint64_t *keep;
    int rc = EMBER_OK;

    *out = NULL;
    if (focus == NULL && ignore == NULL)
        return EMBER_OK;
    keep = em_calloc(words, sizeof *keep);
    if (keep == NULL)
        return em_err(EMBER_ENOMEM, "focus: %u stacks", nstacks);
    if (focus != NULL && (rc = em_focus_stacks(r, focus, &bm)) == EMBER_OK)
        keep_apply(keep, nstacks, bm, false);
    else if (focus == NULL)
        memset(keep, 0xff, words * sizeof *keep);
    if (rc != EMBER_OK) {
        em_err_prefix(rc, "focus");
    } else if (ignore != NULL) {
        if (bm != NULL)
            roaring_bitmap_free(bm);
        bm = NULL;
        if ((rc = em_focus_stacks(r, ignore, &bm)) == EMBER_OK)
            keep_apply(keep, nstacks, bm, true);
        else
            em_err_prefix(rc, "ignore");
    }
    if (bm != NULL)
        roaring_bitmap_free(bm);
    if (rc != EMBER_OK) {
        em_free(keep);
        return rc;
    }
    *out = keep;
    return EMBER_OK;
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
** is a bitset the caller made for SEL's focus and ignore already. */
static int query_begin_on(ember_db *db, em_rtxn *r, const ember_selector *sel,
                          const uint64_t *keep, query *q)
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
        rc = keep_build(r, sel->focus, sel->ignore, &q->own_keep);
    q->keep = keep != NULL ? keep : q->own_keep;
    range_of(sel, &q->from, &q->to);
    if (rc != EMBER_OK)
        query_end(q);
    return rc;
}

static int query_begin(ember_db *db, const ember_selector *sel, query *q)
{
    return query_begin_on(db, NULL, sel, NULL, q);
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
    int64_t *sum;                   /* [nstacks] */
    uint64_t *seen;                 /* bitmap [nstacks / 64] */
    uint8_t *in;                    /* scratch: profile in range */
    uint32_t in_cap;
    uint32_t last_series;
    uint64_t nseries, nprofiles;
    merge_span span;                /* valid once nprofiles > 0 */
    span_key *keys;                 /* per profile merged, for duration */
    size_t nkeys, cap_keys;
    size_t nstacks;                 /* of the snapshot: sum's length */
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

/* Sums one stack's samples; IN NULL means every profile is in range. */
static void merge_stack(merge_acc *m, const em_chunk *c, uint32_t i,
                        const uint8_t *in)
{
    uint32_t st = c->stacks[i];
    uint64_t a = c->stack_start[i], b = c->stack_start[i + 1];
    uint64_t sum = 0;
    bool any = in == NULL && a < b;

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
    if (any) {
        m->sum[st] = em_add_wrap(m->sum[st], (int64_t)sum);
        m->seen[st >> 6] |= 1ull << (st & 63);
    }
}

/* Folds the headers of C's profiles in range (IN NULL: all) into the
** span, which starts out empty (min INT64_MAX, max and period INT64_MIN),
** and keeps each one's (time, duration) for merge_span_duration. Per
** profile, never per sample, so merge speed is unchanged. */
static int merge_span_add(merge_acc *m, const em_chunk *c, const uint8_t *in)
{
    merge_span *sp = &m->span;

    if (m->nkeys + c->h.nprofiles > m->cap_keys) {
        size_t cap = m->cap_keys == 0 ? 256 : m->cap_keys * 2;
        span_key *k;
        while (cap < m->nkeys + c->h.nprofiles)
            cap *= 2;
        if ((k = em_realloc(m->keys, cap * sizeof *k)) == NULL)
            return em_err(EMBER_ENOMEM, "merge: %zu profile headers", cap);
        m->keys = k;
        m->cap_keys = cap;
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
        m->keys[m->nkeys++] = (span_key){ c->time_ms[p], c->duration_ns[p] };
    }
    return EMBER_OK;
}

static int span_key_cmp(const void *a, const void *b)
{
    const span_key *x = a, *y = b;

    if (x->time_ms != y->time_ms)
        return (x->time_ms > y->time_ms) - (x->time_ms < y->time_ms);
    return (x->duration_ns > y->duration_ns) -
           (x->duration_ns < y->duration_ns);
}

/* The summed duration over distinct (time, duration) pairs (wrapping). */
static int64_t merge_span_duration(merge_acc *m)
{
    int64_t sum = 0;

    if (m->nkeys > 1)
        qsort(m->keys, m->nkeys, sizeof *m->keys, span_key_cmp);
    for (size_t i = 0; i < m->nkeys; i++)
        if (i == 0 || span_key_cmp(&m->keys[i - 1], &m->keys[i]) != 0)
            sum = em_add_wrap(sum, m->keys[i].duration_ns);
    return sum;
}

static int merge_chunk(void *ctx, uint32_t series, const em_chunk *c)
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
    for (uint32_t i = 0; i < c->h.nstacks; i++)
        if (query_keeps(q, c->stacks[i]))
            merge_stack(m, c, i, whole ? NULL : m->in);
    if ((rc = merge_span_add(m, c, whole ? NULL : m->in)) != EMBER_OK)
        return rc;
    m->nprofiles += n;
    if (m->nseries == 0 || m->last_series != series)
        m->nseries++;
    m->last_series = series;
    return EMBER_OK;
}

/* Sizes an empty accumulator for NSTACKS stack ids. */
static int merge_acc_init(merge_acc *m, size_t nstacks)
{
    memset(m, 0, sizeof *m);
    m->span = (merge_span){ INT64_MAX, INT64_MIN, 0, INT64_MIN };
    m->nstacks = nstacks;
    m->sum = em_calloc(nstacks + 1, sizeof *m->sum);
    m->seen = em_calloc(nstacks / 64 + 1, sizeof *m->seen);
    if (m->sum == NULL || m->seen == NULL)
        return em_err(EMBER_ENOMEM, "merge: %zu stacks", nstacks);
    return EMBER_OK;
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
    m->nkeys = 0;
    m->span = (merge_span){ INT64_MAX, INT64_MIN, 0, INT64_MIN };
}

static void merge_acc_free(merge_acc *m)
{
    em_free(m->sum);
    em_free(m->seen);
    em_free(m->in);
    em_free(m->keys);
}

/* Adds what Q selects to M. */
static int merge_acc_run(merge_acc *m, query *q)
{
    scan s = { q->r, q->from, q->to, EM_COL_TIMES | EM_COL_SAMPLES,
               merge_chunk, m };

    m->q = q;
    m->last_series = UINT32_MAX;
    return scan_all(&s, q->series);
}

/* Turns the accumulator into the result, in stack order, and empties it. */
static int merge_finish(merge_acc *m, ember_merged **out)
{
    ember_merged *r = em_calloc(1, sizeof *r);
    size_t nstacks = m->nstacks, n = 0, k = 0;

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
        }
    r->n = n;
    r->nseries = m->nseries;
    r->nprofiles = m->nprofiles;
    if (m->nprofiles > 0) {
        r->span = m->span;
        r->span.duration_ns = merge_span_duration(m);
    }
    merge_acc_reset(m);
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
    rc = merge_acc_init(&m, q.r->next[EM_T_STACK]);
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

static int tot_reserve(ember_totals *t, size_t np)
{
    size_t cap = t->pcap ? t->pcap : 256;
    int64_t **arrays[3] = { &t->times, &t->values, &t->durations };

    if (t->np + np <= t->pcap)
        return EMBER_OK;
    while (cap < t->np + np)
        cap *= 2;
    for (int i = 0; i < 3; i++) {
        int64_t *a = em_realloc(*arrays[i], cap * sizeof *a);
        if (a == NULL)
            return em_err(EMBER_ENOMEM, "totals: %zu points", cap);
        *arrays[i] = a;
    }
    t->pcap = cap;
    return EMBER_OK;
}

static int tot_series_start(ember_totals *t, uint32_t series)
{
    if (t->ns > 0 && t->s[t->ns - 1].series == series)
        return EMBER_OK;
    if (t->ns == t->scap) {
        size_t cap = t->scap ? t->scap * 2 : 16;
        tot_series *s = em_realloc(t->s, cap * sizeof *s);
        if (s == NULL)
            return em_err(EMBER_ENOMEM, "totals: %zu series", cap);
        t->s = s;
        t->scap = cap;
    }
    t->s[t->ns].series = series;
    t->s[t->ns].off = t->np;
    t->s[t->ns++].n = 0;
    return EMBER_OK;
}

/* Per-profile sums over the stacks kept (focus, ignore) only. */
static void tot_focus(const query *q, const em_chunk *c, int64_t *sums)
{
    memset(sums, 0, c->h.nprofiles * sizeof *sums);
    for (uint32_t i = 0; i < c->h.nstacks; i++) {
        if (!query_keeps(q, c->stacks[i]))
            continue;
        for (uint64_t j = c->stack_start[i]; j < c->stack_start[i + 1]; j++)
            sums[c->sample_profile[j]] = em_add_wrap(
                sums[c->sample_profile[j]], c->sample_value[j]);
    }
}

static int tot_chunk(void *ctx, uint32_t series, const em_chunk *c)
{
    tot_acc *a = ctx;
    ember_totals *t = a->t;
    const int64_t *vals = c->total;
    int rc = tot_series_start(t, series);

    if (rc == EMBER_OK)
        rc = tot_reserve(t, c->h.nprofiles);
    if (rc != EMBER_OK)
        return rc;
    if (a->q->keep != NULL) {
        tot_focus(a->q, c, t->values + t->np);
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
                   EM_COL_TIMES | (q->keep ? EM_COL_SAMPLES : EM_COL_TOTALS),
                   tot_chunk, &a };
        rc = scan_all(&s, q->series);
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
            size_t cap = s->pcap ? s->pcap * 2 : 64;
            em_chunk_profile **o = em_realloc(s->order, cap * sizeof *o);
            if (o == NULL)
                return em_err(EMBER_ENOMEM, "iterator: %zu profiles", cap);
            s->order = o;
            s->pcap = cap;
        }
        s->order[s->np++] = &tp[p];
    }
    return EMBER_OK;
}

static int iter_chunk(void *ctx, uint32_t series, const em_chunk *c)
{
    struct ember_iter *it = ctx;
    iter_series *s = &it->cur;
    int rc;

    EM_UNUSED(series);
    if (s->nch == s->chcap) {
        size_t cap = s->chcap ? s->chcap * 2 : 8;
        em_chunk_profile **tp = em_realloc(s->tp, cap * sizeof *tp);
        if (tp == NULL)
            return em_err(EMBER_ENOMEM, "iterator: %zu chunks", cap);
        s->tp = tp;
        s->chcap = cap;
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
    scan s = { it->q.r, it->q.from, it->q.to, EM_COL_ALL, iter_chunk, it };
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
    if (rd == NULL)
        return;
    if (rd->m_ready)
        merge_acc_free(&rd->m);
    em_free(rd->focus);
    em_free(rd->ignore);
    em_free(rd->keep);
    ember_snapshot_end(rd->snap);
    em_free(rd);
}

ember_snapshot *em_reader_snapshot(em_reader *rd)
{
    return rd->snap;
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
    uint64_t *k = NULL;
    int rc;

    if (!rd->keep_valid || !str_same(focus, rd->focus) ||
        !str_same(ignore, rd->ignore)) {
        if ((focus != NULL && (f = em_strdup(focus)) == NULL) ||
            (ignore != NULL && (g = em_strdup(ignore)) == NULL)) {
            em_free(f);
            return em_err(EMBER_ENOMEM, "focus");
        }
        if ((rc = keep_build(rd->r, focus, ignore, &k)) != EMBER_OK) {
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
    return query_begin_on(NULL, rd->r, sel, keep, q);
}

int em_reader_merge_add(em_reader *rd, const ember_selector *sel)
{
    query q;
    int rc;

    if (!rd->m_ready) {
        rc = merge_acc_init(&rd->m, rd->r->next[EM_T_STACK]);
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

int em_reader_merge_take(em_reader *rd, ember_merged **out)
{
    int rc;

    *out = NULL;
    if (!rd->m_ready) {             /* nothing added: an empty merge */
        if ((rc = merge_acc_init(&rd->m, rd->r->next[EM_T_STACK])) !=
            EMBER_OK) {
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
        size_t c = *cap ? *cap * 2 : 256;
        ember_label *l;
        while (c < s->nlabels + rec.nlabels)
            c *= 2;
        if ((l = em_realloc(s->labels, c * sizeof *l)) == NULL)
            return em_err(EMBER_ENOMEM, "series: %zu labels", c);
        s->labels = l;
        *cap = c;
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
