/*
** engine/write.c: the write path. Profiles go to their series' head: each
** appended profile is stored at once as a small head chunk (so an
** acknowledged append is durable with no separate log: LMDB is the log), and
** a series' head chunks are sealed into one compressed chunk when the window
** of the next profile differs, when the head holds chunk_max_profiles, or on
** ember_seal.
**
** Group commit: concurrent ember_append_batch callers queue requests; the
** first becomes the leader, takes the whole queue, and runs every request in
** a nested LMDB txn of one parent txn, so one fsync covers them all while a
** failing request is rolled back alone. A full map aborts the group, grows
** the map and runs the group again: callers never see it.
*/
#include <stdio.h>
#include <stdlib.h>

#include "engine/store.h"

#define EM_HEAD_LEVEL 1             /* zstd level of one-profile heads */
#define EM_MAX_SAMPLES (1u << 24)   /* per profile */

struct em_req {
    const ember_profile *ps;
    size_t n;
    int rc;
    bool done;
    char msg[512];
    em_req *next;
};

/* A profile appended in an explicit transaction, written at commit. */
typedef struct pend_prof {
    uint32_t series;
    uint32_t n;                     /* canonical samples at s */
    size_t seq;                     /* append order */
    int64_t time, duration, period;
    ember_sample *s;
} pend_prof;

struct ember_txn {
    ember_db *db;
    em_wtxn w;
    bool failed;                    /* only abort is left */
    pend_prof *pend;                /* appended, not yet in head chunks */
    size_t npend, cap_pend;
};

/* ---- chunk keys ---------------------------------------------------------------- */

void em_chunk_key(uint8_t k[EM_CHUNK_KEY_LEN], uint32_t series, int64_t time,
                  uint32_t seq)
{
    uint64_t t = (uint64_t)time ^ (1ull << 63);   /* signed order as bytes */

    for (int i = 0; i < 4; i++)
        k[i] = (uint8_t)(series >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        k[4 + i] = (uint8_t)(t >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        k[12 + i] = (uint8_t)(seq >> (24 - 8 * i));
}

void em_chunk_key_parse(const uint8_t k[EM_CHUNK_KEY_LEN], uint32_t *series,
                        int64_t *time, uint32_t *seq)
{
    uint32_t s = 0, q = 0;
    uint64_t t = 0;

    for (int i = 0; i < 4; i++)
        s = (s << 8) | k[i];
    for (int i = 0; i < 8; i++)
        t = (t << 8) | k[4 + i];
    for (int i = 0; i < 4; i++)
        q = (q << 8) | k[12 + i];
    *series = s;
    *time = (int64_t)(t ^ (1ull << 63));
    *seq = q;
}

/* Stores chunk bytes BUF under a fresh key of SERIES at TIME. */
static int chunk_put(em_wtxn *w, uint32_t series, int64_t time,
                     const em_buf *buf)
{
    uint8_t key[EM_CHUNK_KEY_LEN];
    MDB_val k = { sizeof key, key };
    int mrc;

    em_chunk_key(key, series, time, ++w->c.chunk_seq);
    mrc = em_val_put(w->txn, w->db, EM_D_CHUNK, &k, buf->p, buf->len,
                     MDB_NOOVERWRITE);
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "chunk put");
    w->c.chunk_bytes += buf->len;
    return EMBER_OK;
}

/* Stores the chunk encoded in w->chunk under its earliest time, widening
** the span readers look back over when it is the widest yet. */
int em_chunk_store(em_wtxn *w, uint32_t series)
{
    em_chunk_header hd;
    int rc = em_chunk_header_read(w->chunk.p, w->chunk.len, &hd);

    if (rc == EMBER_OK && (uint64_t)(hd.max_time - hd.min_time) >
        w->c.max_span)
        w->c.max_span = (uint64_t)(hd.max_time - hd.min_time);
    return rc == EMBER_OK ? chunk_put(w, series, hd.min_time, &w->chunk) : rc;
}

/* ---- heads ---------------------------------------------------------------------- */

/* The head summary in the N bytes at P, of the head of SERIES. */
static int head_read(uint32_t series, const uint8_t *p, size_t n, em_head *h)
{
    if (n != sizeof *h)
        return EM_CORRUPT("head of series %u: %zu bytes", series, n);
    memcpy(h, p, sizeof *h);
    return EMBER_OK;
}

static int head_get(em_wtxn *w, uint32_t series, em_head *h, bool *found)
{
    MDB_val k = { sizeof series, &series }, d;
    const uint8_t *p;
    size_t n;
    int rc, mrc = mdb_get(w->txn, w->db->dbi[EM_D_HEAD], &k, &d);

    *found = mrc == MDB_SUCCESS;
    if (mrc == MDB_NOTFOUND)
        return EMBER_OK;
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "head get");
    rc = em_val_get(w->db, EM_D_HEAD, &k, &d, &p, &n);
    return rc == EMBER_OK ? head_read(series, p, n, h) : rc;
}

static int head_put(em_wtxn *w, uint32_t series, const em_head *h)
{
    MDB_val k = { sizeof series, &series };
    int mrc = em_val_put(w->txn, w->db, EM_D_HEAD, &k, h, sizeof *h, 0);
    return em_lmdb(mrc, "head put");
}

static int64_t window_of(int64_t t, int64_t win)
{
    return t / win - (t % win < 0);     /* floor division */
}

/* True when the head must be sealed before a profile at TIME with N
** samples joins it: another window, or the sealed chunk would pass the
** chunk limits. */
static bool head_full(const ember_db *db, const em_head *h, int64_t time,
                      uint32_t n)
{
    int64_t win = db->opts.chunk_window_ms;
    return window_of(time, win) != window_of(h->min_time, win) ||
           h->nprofiles >= db->opts.chunk_max_profiles ||
           h->nsamples + n > EM_CHUNK_MAX_SAMPLES / 2;
}

/* ---- sealing ---------------------------------------------------------------------- */

typedef struct seal_set {
    em_chunk_profile **profs;       /* transposed head chunks */
    uint32_t *nprof;                /* profiles in each */
    uint8_t (*keys)[EM_CHUNK_KEY_LEN];
    size_t n, cap;
    size_t nprofiles;
    uint64_t bytes;                 /* stored bytes of the head chunks */
} seal_set;

static void seal_set_free(seal_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        em_free(s->profs[i]);
    em_free(s->nprof);
    em_free(s->profs);
    em_free(s->keys);
}

/* Grows the three parallel arrays alike: each em_grow starts from the same
** capacity, so each reaches the same one. */
static int seal_set_grow(seal_set *s)
{
    size_t c1 = s->cap, c2 = s->cap, c3 = s->cap;
    uint32_t *c = em_grow(s->nprof, &c1, s->n + 1, sizeof *c);
    em_chunk_profile **p = c ? em_grow(s->profs, &c2, s->n + 1, sizeof *p)
                             : NULL;
    uint8_t (*k)[EM_CHUNK_KEY_LEN] = p ? em_grow(s->keys, &c3, s->n + 1,
                                                 sizeof *k) : NULL;
    if (c != NULL)
        s->nprof = c;
    if (p != NULL)
        s->profs = p;
    if (k == NULL)
        return em_err(EMBER_ENOMEM, "seal: %zu chunks", s->n + 1);
    s->keys = k;
    s->cap = c3;
    return EMBER_OK;
}

/* Decodes one head chunk into S. */
static int seal_take(em_wtxn *w, seal_set *s, const MDB_val *k,
                     const MDB_val *d)
{
    em_chunk c;
    int rc = s->n == s->cap ? seal_set_grow(s) : EMBER_OK;

    if (rc != EMBER_OK)
        return rc;
    rc = em_chunk_decode(w->db->wcodec, d->mv_data, d->mv_size, EM_COL_ALL,
                         &c);
    if (rc != EMBER_OK)
        return rc;
    rc = em_chunk_transpose(&c, &s->profs[s->n]);
    s->nprof[s->n] = c.h.nprofiles;
    em_chunk_release(&c);
    if (rc != EMBER_OK)
        return rc;
    memcpy(s->keys[s->n], k->mv_data, EM_CHUNK_KEY_LEN);
    s->nprofiles += s->nprof[s->n];
    s->bytes += d->mv_size;
    s->n++;
    return EMBER_OK;
}

/* Collects the head chunks of SERIES within the head's span. */
static int seal_collect(em_wtxn *w, uint32_t series, const em_head *h,
                        seal_set *s)
{
    uint8_t start[EM_CHUNK_KEY_LEN];
    MDB_val k = { sizeof start, start }, d;
    MDB_cursor *cur;
    int rc = EMBER_OK, mrc;

    em_chunk_key(start, series, h->min_time, 0);
    mrc = mdb_cursor_open(w->txn, w->db->dbi[EM_D_CHUNK], &cur);
    if (mrc == MDB_SUCCESS)
        mrc = em_val_cursor(w->db, EM_D_CHUNK, cur, &k, &d, MDB_SET_RANGE,
                            &rc);
    while (mrc == MDB_SUCCESS && rc == EMBER_OK) {
        uint32_t sid, seq;
        int64_t t;
        em_chunk_header hd;
        em_chunk_key_parse(k.mv_data, &sid, &t, &seq);
        if (k.mv_size != EM_CHUNK_KEY_LEN || sid != series || t > h->max_time)
            break;
        rc = em_chunk_header_read(d.mv_data, d.mv_size, &hd);
        if (rc == EMBER_OK && (hd.flags & EM_CHUNK_HEAD))
            rc = seal_take(w, s, &k, &d);
        if (rc != EMBER_OK)
            em_err_prefix(rc, "sealing series %u, chunk at t=%lld", series,
                          (long long)t);
        mrc = em_val_cursor(w->db, EM_D_CHUNK, cur, &k, &d, MDB_NEXT, &rc);
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "seal scan");
    return rc;
}

/* Encodes every profile of S into one sealed chunk and stores it. */
static int seal_write(em_wtxn *w, uint32_t series, seal_set *s)
{
    em_chunk_profile *all = em_malloc(s->nprofiles * sizeof *all + 1);
    size_t k = 0;
    int rc;

    if (all == NULL)
        return em_err(EMBER_ENOMEM, "seal: %zu profiles", s->nprofiles);
    for (size_t i = 0; i < s->n; i++)
        for (uint32_t j = 0; j < s->nprof[i]; j++)
            all[k++] = s->profs[i][j];
    w->chunk.len = 0;
    rc = em_chunk_encode(w->db->wcodec, all, k, 0, w->db->opts.zstd_level,
                         &w->chunk);
    if (rc == EMBER_OK && k > 0)
        rc = em_chunk_store(w, series);
    em_free(all);
    return rc;
}

static int seal_delete(em_wtxn *w, uint32_t series, const seal_set *s)
{
    MDB_val hk = { sizeof series, &series };
    int mrc = MDB_SUCCESS;

    for (size_t i = 0; i < s->n && mrc == MDB_SUCCESS; i++) {
        MDB_val k = { EM_CHUNK_KEY_LEN, s->keys[i] };
        mrc = mdb_del(w->txn, w->db->dbi[EM_D_CHUNK], &k, NULL);
    }
    if (mrc == MDB_SUCCESS)
        mrc = mdb_del(w->txn, w->db->dbi[EM_D_HEAD], &hk, NULL);
    if (mrc == MDB_NOTFOUND)
        mrc = MDB_SUCCESS;
    w->c.chunk_bytes -= s->bytes;
    return em_lmdb(mrc, "seal delete");
}

int em_seal_series(em_wtxn *w, uint32_t series, const em_head *h)
{
    seal_set s;
    int rc;

    memset(&s, 0, sizeof s);
    rc = seal_collect(w, series, h, &s);
    if (rc == EMBER_OK)
        rc = seal_write(w, series, &s);
    if (rc == EMBER_OK)
        rc = seal_delete(w, series, &s);
    seal_set_free(&s);
    return rc;
}

/* ---- appending one profile ---------------------------------------------------------- */

static int sample_cmp(const void *a, const void *b)
{
    uint32_t x = ((const ember_sample *)a)->stack;
    uint32_t y = ((const ember_sample *)b)->stack;
    return (x > y) - (x < y);
}

/* Copies P's samples sorted by stack, duplicates summed, into OUT. */
static int samples_canon(const em_wtxn *w, const ember_profile *p,
                         ember_sample **out, uint32_t *nout)
{
    ember_sample *s = em_malloc(p->nsamples * sizeof *s + 1);
    uint32_t n = 0;

    if (s == NULL)
        return em_err(EMBER_ENOMEM, "append: %zu samples", p->nsamples);
    memcpy(s, p->samples, p->nsamples * sizeof *s);
    qsort(s, p->nsamples, sizeof *s, sample_cmp);
    for (size_t i = 0; i < p->nsamples; i++) {
        if (!em_public_ok(&w->c, EM_T_STACK, s[i].stack)) {
            int rc = em_public_bad(&w->c, EM_T_STACK, "a sample",
                                   s[i].stack);
            em_free(s);
            return rc;
        }
        if (n > 0 && s[n - 1].stack == s[i].stack)  /* fits: values_check */
            s[n - 1].value += s[i].value;
        else
            s[n++] = s[i];
    }
    *out = s;
    *nout = n;
    return EMBER_OK;
}

/* P's values must sum within int64 (em_sum_add; issue 12: repeats were
** summed wrapping), so that no sum of them, its total or any part, wraps
** when it is read back. */
static int values_check(const ember_profile *p, size_t i)
{
    int64_t pos = 0, neg = 0;

    for (size_t k = 0; k < p->nsamples; k++)
        if (!em_sum_add(&pos, &neg, p->samples[k].value))
            return em_err(EMBER_ELIMIT, "profile %zu: its values sum past "
                          "the 64-bit range (at sample %zu)", i, k);
    return EMBER_OK;
}

static int profile_check(const ember_profile *p, size_t i)
{
    if (p == NULL || p->sz < sizeof *p)
        return em_err(EMBER_EINVAL, "profile %zu: sz is not "
                      "sizeof(ember_profile)", i);
    if (p->nsamples > EM_MAX_SAMPLES)
        return em_err(EMBER_ELIMIT, "profile %zu: %zu samples (limit %u)", i,
                      p->nsamples, EM_MAX_SAMPLES);
    if (p->nsamples > 0 && p->samples == NULL)
        return em_err(EMBER_EINVAL, "profile %zu: samples is NULL", i);
    if (p->nlabels > 0 && p->labels == NULL)
        return em_err(EMBER_EINVAL, "profile %zu: labels is NULL", i);
    if (values_check(p, i) != EMBER_OK)
        return EMBER_ELIMIT;
    return em_profile_type_check(p->type);
}

/* Writes SERIES' new head chunk holding P's canonical samples S[N]. */
static int head_append(em_wtxn *w, uint32_t series, const ember_profile *p,
                       const ember_sample *s, uint32_t n)
{
    uint32_t *stacks = em_malloc(((size_t)n + 1) * sizeof *stacks);
    int64_t *values = em_malloc(((size_t)n + 1) * sizeof *values);
    em_chunk_profile cp = { p->time_ms, p->duration_ns, p->period, stacks,
                            values, n };
    int rc = stacks && values ? EMBER_OK
             : em_err(EMBER_ENOMEM, "append: %u samples", n);

    for (uint32_t i = 0; rc == EMBER_OK && i < n; i++) {
        stacks[i] = s[i].stack - w->c.base[EM_T_STACK];     /* checked */
        values[i] = s[i].value;
    }
    w->chunk.len = 0;
    if (rc == EMBER_OK)
        rc = em_chunk_encode(w->db->wcodec, &cp, 1, EM_CHUNK_HEAD,
                             EM_HEAD_LEVEL, &w->chunk);
    if (rc == EMBER_OK)
        rc = chunk_put(w, series, p->time_ms, &w->chunk);
    em_free(stacks);
    em_free(values);
    return rc;
}

/* Seals SERIES' head when P cannot join it, then records P in the head. */
static int head_update(em_wtxn *w, uint32_t series, int64_t time,
                       uint32_t n)
{
    em_head h;
    bool found;
    int rc = head_get(w, series, &h, &found);

    if (rc == EMBER_OK && found && head_full(w->db, &h, time, n)) {
        rc = em_seal_series(w, series, &h);
        found = false;
    }
    if (rc != EMBER_OK)
        return rc;
    if (!found) {
        memset(&h, 0, sizeof h);
        h.min_time = h.max_time = time;
    }
    h.nchunks++;
    h.nprofiles++;
    h.nsamples += n;
    h.min_time = time < h.min_time ? time : h.min_time;
    h.max_time = time > h.max_time ? time : h.max_time;
    return head_put(w, series, &h);
}

/* True when P's samples are already canonical (stack ids strictly rising,
** each existing), as em_pset_write hands them over: then they are written
** from where they are, without a copy as big as the profile. */
static bool samples_canonical(const em_wtxn *w, const ember_profile *p)
{
    for (size_t i = 0; i < p->nsamples; i++)
        if ((i > 0 && p->samples[i].stack <= p->samples[i - 1].stack) ||
            !em_public_ok(&w->c, EM_T_STACK, p->samples[i].stack))
            return false;
    return true;
}

static int write_profile(em_wtxn *w, const ember_profile *p, size_t i)
{
    ember_sample *s = NULL;
    const ember_sample *use = NULL;
    uint32_t series, n = 0;
    int rc = profile_check(p, i);

    if (rc == EMBER_OK)
        rc = em_series_intern(w, p->type, p->labels, p->nlabels, &series);
    if (rc == EMBER_OK && samples_canonical(w, p)) {
        use = p->samples;
        n = (uint32_t)p->nsamples;
    } else if (rc == EMBER_OK && (rc = samples_canon(w, p, &s, &n)) == 0) {
        use = s;
    }
    if (rc == EMBER_OK)
        rc = head_update(w, series, p->time_ms, n);
    if (rc == EMBER_OK)
        rc = head_append(w, series, p, use, n);
    if (rc == EMBER_OK) {
        w->c.profiles++;
        w->c.samples += n;
    }
    em_free(s);
    return rc;
}

/* ---- profiles appended in an explicit transaction ---------------------------------- */

/* Why deferred: an explicit transaction typically carries a batch of files,
** so the same series gets many profiles in it. Written as they come, each
** would be one head chunk (an LMDB put, a head update); kept until commit,
** each series' profiles go into one head chunk per head, and the head
** record is read and written once. A large profile gains nothing from the
** wait and would hold 16 bytes per sample until commit, a third of a big
** pprof import's peak (issue 12): it is written at once, after what is
** pending. */
#define EM_PEND_MAX_SAMPLES 65536

static void pend_free(ember_txn *t)
{
    for (size_t i = 0; i < t->npend; i++)
        em_free(t->pend[i].s);
    em_free(t->pend);
    t->pend = NULL;
    t->npend = t->cap_pend = 0;
}

/* Interns P's series and keeps its canonical samples until commit; P
** passed append_check. */
static int pend_append(ember_txn *t, const ember_profile *p)
{
    em_wtxn *w = &t->w;
    pend_prof *e;
    ember_sample *s = NULL;
    uint32_t series, n = 0;
    int rc = em_series_intern(w, p->type, p->labels, p->nlabels, &series);

    if (rc == EMBER_OK && t->npend == t->cap_pend) {
        pend_prof *np = em_grow(t->pend, &t->cap_pend, t->npend + 1,
                                sizeof *np);
        if (np == NULL)
            return em_err(EMBER_ENOMEM, "append: %zu pending profiles",
                          t->npend + 1);
        t->pend = np;
    }
    if (rc == EMBER_OK)
        rc = samples_canon(w, p, &s, &n);
    if (rc != EMBER_OK)
        return rc;
    e = &t->pend[t->npend];
    *e = (pend_prof){ series, n, t->npend, p->time_ms, p->duration_ns,
                      p->period, s };
    t->npend++;
    w->c.profiles++;
    w->c.samples += n;
    return EMBER_OK;
}

static int pend_cmp(const void *a, const void *b)
{
    const pend_prof *x = a, *y = b;

    if (x->series != y->series)
        return x->series < y->series ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Writes the N profiles at P (one head of SERIES) as one head chunk. */
static int pend_chunk(em_wtxn *w, uint32_t series, const pend_prof *p,
                      size_t n)
{
    em_chunk_profile *cp = em_calloc(n + 1, sizeof *cp);
    size_t total = 0;
    uint32_t *stacks = NULL;
    int64_t *values = NULL;
    int rc = EMBER_OK;

    for (size_t i = 0; i < n; i++)
        total += p[i].n;
    if (cp != NULL) {
        stacks = em_malloc((total + 1) * sizeof *stacks);
        values = em_malloc((total + 1) * sizeof *values);
    }
    if (cp == NULL || stacks == NULL || values == NULL)
        rc = em_err(EMBER_ENOMEM, "append: a head of %zu profiles", n);
    for (size_t i = 0, k = 0; rc == EMBER_OK && i < n; i++) {
        cp[i] = (em_chunk_profile){ p[i].time, p[i].duration, p[i].period,
                                    stacks + k, values + k, p[i].n };
        for (uint32_t j = 0; j < p[i].n; j++, k++) {
            stacks[k] = p[i].s[j].stack - w->c.base[EM_T_STACK];
            values[k] = p[i].s[j].value;
        }
    }
    w->chunk.len = 0;
    if (rc == EMBER_OK)
        rc = em_chunk_encode(w->db->wcodec, cp, n, EM_CHUNK_HEAD,
                             EM_HEAD_LEVEL, &w->chunk);
    if (rc == EMBER_OK)
        rc = em_chunk_store(w, series);
    em_free(cp);
    em_free(stacks);
    em_free(values);
    return rc;
}

/* Writes the N profiles of SERIES at P, in append order, sealing the head
** wherever one profile by one (head_update) would have. */
static int pend_series(em_wtxn *w, uint32_t series, const pend_prof *p,
                       size_t n)
{
    em_head h;
    bool found;
    size_t g = 0;                   /* first profile of the open group */
    int rc = head_get(w, series, &h, &found);

    for (size_t k = 0; rc == EMBER_OK && k < n; k++) {
        if (found && head_full(w->db, &h, p[k].time, p[k].n)) {
            if (k > g) {
                h.nchunks++;
                rc = pend_chunk(w, series, p + g, k - g);
            }
            if (rc == EMBER_OK)
                rc = em_seal_series(w, series, &h);
            found = false;
            g = k;
        }
        if (!found) {
            memset(&h, 0, sizeof h);
            h.min_time = h.max_time = p[k].time;
            found = true;
        }
        h.nprofiles++;
        h.nsamples += p[k].n;
        h.min_time = p[k].time < h.min_time ? p[k].time : h.min_time;
        h.max_time = p[k].time > h.max_time ? p[k].time : h.max_time;
    }
    if (rc == EMBER_OK && n > g) {
        h.nchunks++;
        rc = pend_chunk(w, series, p + g, n - g);
    }
    if (rc == EMBER_OK && n > 0)
        rc = head_put(w, series, &h);
    return rc;
}

/* Writes every pending profile of T into head chunks, series by series. */
static int pend_flush(ember_txn *t)
{
    size_t a = 0;
    int rc = EMBER_OK;

    if (t->npend > 1)
        qsort(t->pend, t->npend, sizeof *t->pend, pend_cmp);
    while (rc == EMBER_OK && a < t->npend) {
        size_t b = a + 1;
        while (b < t->npend && t->pend[b].series == t->pend[a].series)
            b++;
        rc = pend_series(&t->w, t->pend[a].series, t->pend + a, b - a);
        a = b;
    }
    pend_free(t);
    return rc;
}

/* ---- nested requests ------------------------------------------------------------------ */

/* Runs FN inside a nested txn of W: on failure only its effects vanish. */
static int nested(em_wtxn *w, int (*fn)(em_wtxn *, void *), void *ctx)
{
    MDB_txn *parent = w->txn, *child;
    em_counters saved = w->c;
    int rc, mrc = mdb_txn_begin(w->db->env, parent, 0, &child);

    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "nested begin");
    w->txn = child;
    rc = fn(w, ctx);
    if (rc == EMBER_OK)
        rc = em_staged_flush(w, &w->post, w->db->dbi[EM_D_POST]);
    if (rc == EMBER_OK)
        rc = em_staged_flush(w, &w->fpost, w->db->dbi[EM_D_FPOST]);
    if (rc == EMBER_OK) {
        mrc = mdb_txn_commit(child);
        rc = em_lmdb(mrc, "nested commit");
    } else {
        mdb_txn_abort(child);
    }
    if (rc != EMBER_OK) {
        em_icache_clear(&w->db->icache);    /* the child's ids are gone */
        w->c = saved;
        em_staged_clear(&w->post);
        em_staged_clear(&w->fpost);
    }
    w->txn = parent;
    return rc;
}

static int request_fn(em_wtxn *w, void *ctx)
{
    em_req *q = ctx;
    int rc = EMBER_OK;

    for (size_t i = 0; i < q->n && rc == EMBER_OK; i++)
        rc = write_profile(w, &q->ps[i], i);
    return rc;
}

/* Runs the group LIST in one txn; EM_EMAPFULL means grow and run again. */
static int group_try(ember_db *db, em_req *list)
{
    em_wtxn w;
    int rc = em_wtxn_begin(db, &w);

    for (em_req *q = list; q != NULL && rc == EMBER_OK; q = q->next) {
        q->rc = nested(&w, request_fn, q);
        if (q->rc == EM_EMAPFULL)
            rc = EM_EMAPFULL;
        else if (q->rc != EMBER_OK)
            snprintf(q->msg, sizeof q->msg, "%s", em_errmsg());
    }
    if (rc == EMBER_OK)
        rc = em_wtxn_commit(&w);
    else
        em_wtxn_abort(&w);
    return rc;
}

static void group_run(ember_db *db, em_req *list)
{
    int rc;

    while ((rc = group_try(db, list)) == EM_EMAPFULL) {
        if ((rc = em_map_grow(db)) != EMBER_OK)
            break;
    }
    for (em_req *q = list; q != NULL && rc != EMBER_OK; q = q->next) {
        if (q->rc == EMBER_OK || q->rc == EM_EMAPFULL)
            q->rc = rc;
        snprintf(q->msg, sizeof q->msg, "%s", em_errmsg());
    }
}

/* Leads groups until the caller's own request Q is done. */
static void group_wait(ember_db *db, em_req *q)
{
    pthread_mutex_lock(&db->qmu);
    if (db->qtail != NULL)
        db->qtail->next = q;
    else
        db->qhead = q;
    db->qtail = q;
    while (!q->done) {
        em_req *list;
        if (db->leader) {
            pthread_cond_wait(&db->qcond, &db->qmu);
            continue;
        }
        db->leader = true;
        list = db->qhead;
        db->qhead = db->qtail = NULL;
        pthread_mutex_unlock(&db->qmu);
        pthread_mutex_lock(&db->wlock);
        group_run(db, list);
        pthread_mutex_unlock(&db->wlock);
        pthread_mutex_lock(&db->qmu);
        for (em_req *r = list, *next; r != NULL; r = next) {
            next = r->next;
            r->done = true;         /* R's owner may return once we unlock */
        }
        db->leader = false;
        pthread_cond_broadcast(&db->qcond);
    }
    pthread_mutex_unlock(&db->qmu);
}

EMBER_API int ember_append_batch(ember_db *db, const ember_profile *ps,
                                 size_t n)
{
    em_req q;

    em_err_clear();
    if (db == NULL || (ps == NULL && n > 0))
        return em_err(EMBER_EINVAL, "ember_append_batch: NULL argument");
    if (db->rdonly)
        return em_err(EMBER_EINVAL, "%s: opened read-only", db->dir);
    memset(&q, 0, sizeof q);
    q.ps = ps;
    q.n = n;
    group_wait(db, &q);
    if (q.rc != EMBER_OK)
        return em_err(q.rc, "%s", q.msg);
    return EMBER_OK;
}

EMBER_API int ember_append(ember_db *db, const ember_profile *p)
{
    return ember_append_batch(db, p, 1);
}

/* ---- explicit transactions -------------------------------------------------------------- */

/* Public face of an internal code: a full map inside an explicit txn. */
static int txn_result(ember_txn *t, int rc)
{
    if (rc == EM_EMAPFULL) {
        t->failed = true;
        return em_err(EMBER_ELIMIT, "transaction outgrew the free map space "
                      "and was rolled back; commit smaller transactions");
    }
    if (rc != EMBER_OK && rc != EMBER_EINVAL && rc != EMBER_ELIMIT)
        t->failed = true;
    return rc;
}

static int txn_usable(const ember_txn *t)
{
    if (t == NULL)
        return em_err(EMBER_EINVAL, "NULL transaction");
    if (t->failed)
        return em_err(EMBER_EINVAL, "transaction failed earlier; abort it");
    return EMBER_OK;
}

EMBER_API int ember_txn_begin(ember_db *db, ember_txn **out)
{
    ember_txn *t;
    int rc;

    em_err_clear();
    if (db == NULL || out == NULL)
        return em_err(EMBER_EINVAL, "ember_txn_begin: NULL argument");
    *out = NULL;
    t = em_calloc(1, sizeof *t);
    if (t == NULL)
        return em_err(EMBER_ENOMEM, "transaction handle");
    t->db = db;
    pthread_mutex_lock(&db->wlock);
    rc = em_wtxn_begin(db, &t->w);
    if (rc != EMBER_OK) {
        pthread_mutex_unlock(&db->wlock);
        em_free(t);
        return rc;
    }
    *out = t;
    return EMBER_OK;
}

EMBER_API int ember_txn_commit(ember_txn *t)
{
    int rc;

    em_err_clear();
    if (t == NULL)
        return em_err(EMBER_EINVAL, "NULL transaction");
    if (t->failed) {
        em_wtxn_abort(&t->w);
        rc = em_err(EMBER_EINVAL, "transaction failed earlier; rolled back");
    } else if ((rc = pend_flush(t)) != EMBER_OK) {
        em_wtxn_abort(&t->w);
        rc = txn_result(t, rc);
    } else {
        rc = txn_result(t, em_wtxn_commit(&t->w));
    }
    pend_free(t);
    pthread_mutex_unlock(&t->db->wlock);
    em_free(t);
    return rc;
}

EMBER_API void ember_txn_abort(ember_txn *t)
{
    if (t == NULL)
        return;
    em_wtxn_abort(&t->w);
    pend_free(t);
    pthread_mutex_unlock(&t->db->wlock);
    em_free(t);
}

EMBER_API int ember_intern_string(ember_txn *t, const char *s, size_t len,
                                  uint32_t *id)
{
    int rc;

    em_err_clear();
    rc = txn_usable(t);
    if (rc == EMBER_OK && (id == NULL || (s == NULL && len > 0)))
        rc = em_err(EMBER_EINVAL, "ember_intern_string: NULL argument");
    if (rc != EMBER_OK)
        return rc;
    return txn_result(t, em_public_id(&t->w.c, EM_T_STRING,
                                      em_intern_str(&t->w, s == NULL ? "" : s,
                                                    len, id), id));
}

static const char *nz(const char *s)
{
    return s == NULL ? "" : s;
}

EMBER_API int ember_intern_mapping(ember_txn *t, const ember_mapping *m,
                                   uint32_t *id)
{
    uint32_t file, build;
    int rc;

    em_err_clear();
    rc = txn_usable(t);
    if (rc == EMBER_OK && (m == NULL || id == NULL))
        rc = em_err(EMBER_EINVAL, "ember_intern_mapping: NULL argument");
    if (rc == EMBER_OK)
        rc = em_intern_str(&t->w, nz(m->file), strlen(nz(m->file)), &file);
    if (rc == EMBER_OK)
        rc = em_intern_str(&t->w, nz(m->build_id), strlen(nz(m->build_id)),
                           &build);
    if (rc != EMBER_OK)
        return txn_result(t, rc);
    return txn_result(t, em_public_id(&t->w.c, EM_T_MAPPING,
                                      em_mapping_intern(&t->w, m->start,
                                                        m->limit, m->offset,
                                                        file, build, id),
                                      id));
}

/* F's strings, each with its NUL, then its start line: the icache key of
** F's content (EM_IC_FUNCTION_TEXT), in W's record scratch. */
static int function_text(em_wtxn *w, const char *const s[3], const size_t
                         len[3], int64_t start_line)
{
    em_buf *b = &w->rec;
    int rc;

    b->len = 0;
    for (int i = 0; i < 3; i++)
        if ((rc = em_buf_put(b, s[i], len[i] + 1)) != EMBER_OK)
            return rc;
    return em_buf_varint(b, em_zigzag(start_line));
}

EMBER_API int ember_intern_function(ember_txn *t, const ember_function *f,
                                    uint32_t *id)
{
    em_icache *ic;
    const char *s[3];
    size_t len[3];
    uint32_t sid[3];
    uint64_t h;
    int rc;

    em_err_clear();
    rc = txn_usable(t);
    if (rc == EMBER_OK && (f == NULL || id == NULL))
        rc = em_err(EMBER_EINVAL, "ember_intern_function: NULL argument");
    if (rc != EMBER_OK)
        return rc;
    ic = &t->w.db->icache;
    s[0] = nz(f->name);
    s[1] = nz(f->system_name);
    s[2] = nz(f->file);
    for (int i = 0; i < 3; i++)
        len[i] = strlen(s[i]);
    if ((rc = function_text(&t->w, s, len, f->start_line)) != EMBER_OK)
        return txn_result(t, rc);
    h = em_hash64(t->w.rec.p, t->w.rec.len, EM_IC_FUNCTION_TEXT);
    if (em_icache_get(ic, EM_IC_FUNCTION_TEXT, h, t->w.rec.p, t->w.rec.len,
                      id))
        return em_public_id(&t->w.c, EM_T_FUNCTION, EMBER_OK, id);
    for (int i = 0; i < 3 && rc == EMBER_OK; i++)
        rc = em_intern_str(&t->w, s[i], len[i], &sid[i]);
    if (rc == EMBER_OK)
        rc = em_function_intern(&t->w, sid, f->start_line, id);
    /* the key is still in the scratch: interning leaves it be */
    if (rc == EMBER_OK)
        em_icache_put(ic, EM_IC_FUNCTION_TEXT, h, t->w.rec.p, t->w.rec.len,
                      *id);
    return txn_result(t, em_public_id(&t->w.c, EM_T_FUNCTION, rc, id));
}

/* Interns L (public ids, checked) as the head's own ids, and remembers
** its functions for em_stack_intern's postings. */
static int location_own(em_wtxn *w, const ember_location *l, uint32_t *id)
{
    ember_line lines[EM_MAX_LINES];
    uint32_t fns[EM_MAX_LINES];
    ember_location own = { em_public_own(&w->c, EM_T_MAPPING, l->mapping),
                           l->address, lines, l->nlines };
    int rc;

    for (size_t i = 0; i < l->nlines; i++) {
        fns[i] = em_public_own(&w->c, EM_T_FUNCTION, l->lines[i].function);
        lines[i] = (ember_line){ fns[i], l->lines[i].line };
    }
    rc = em_location_intern(w, &own, id);
    if (rc == EMBER_OK)
        em_icache_put_lfn(&w->db->icache, *id, fns, l->nlines);
    return rc;
}

EMBER_API int ember_intern_location(ember_txn *t, const ember_location *l,
                                    uint32_t *id)
{
    int rc;

    em_err_clear();
    rc = txn_usable(t);
    if (rc == EMBER_OK && (l == NULL || id == NULL ||
                           (l->nlines > 0 && l->lines == NULL)))
        rc = em_err(EMBER_EINVAL, "ember_intern_location: NULL argument");
    if (rc == EMBER_OK && l->nlines > EM_MAX_LINES)
        rc = em_err(EMBER_ELIMIT, "location with %zu lines (limit %d)",
                    l->nlines, EM_MAX_LINES);
    if (rc == EMBER_OK && !em_public_ok(&t->w.c, EM_T_MAPPING, l->mapping))
        rc = em_public_bad(&t->w.c, EM_T_MAPPING, "location", l->mapping);
    for (size_t i = 0; rc == EMBER_OK && i < l->nlines; i++)
        if (!em_public_ok(&t->w.c, EM_T_FUNCTION, l->lines[i].function))
            rc = em_public_bad(&t->w.c, EM_T_FUNCTION, "location line",
                               l->lines[i].function);
    if (rc != EMBER_OK)
        return rc;
    return txn_result(t, em_public_id(&t->w.c, EM_T_LOCATION,
                                      location_own(&t->w, l, id), id));
}

/* Interns the stack of public location ids LOCS; *ID public. */
static int stack_own(em_wtxn *w, const uint32_t *locs, size_t n,
                     uint32_t *id)
{
    uint32_t base = w->c.base[EM_T_LOCATION], *own;
    int rc = EMBER_OK;

    if (base == 0)              /* never compacted: public ids are own */
        return em_public_id(&w->c, EM_T_STACK,
                            em_stack_intern(w, locs, n, id), id);
    if (n > EM_MAX_STACK_DEPTH)
        return em_err(EMBER_ELIMIT, "stack of depth %zu (limit %d)", n,
                      EM_MAX_STACK_DEPTH);
    if ((own = em_malloc(n * sizeof *own + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "stack of %zu", n);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        if (!em_public_ok(&w->c, EM_T_LOCATION, locs[i]))
            rc = em_public_bad(&w->c, EM_T_LOCATION, "stack frame", locs[i]);
        own[i] = em_public_own(&w->c, EM_T_LOCATION, locs[i]);
    }
    if (rc == EMBER_OK)
        rc = em_public_id(&w->c, EM_T_STACK, em_stack_intern(w, own, n, id),
                          id);
    em_free(own);
    return rc;
}

EMBER_API int ember_intern_stack(ember_txn *t, const uint32_t *locs,
                                 size_t n, uint32_t *id)
{
    int rc;

    em_err_clear();
    rc = txn_usable(t);
    if (rc == EMBER_OK && (id == NULL || (n > 0 && locs == NULL)))
        rc = em_err(EMBER_EINVAL, "ember_intern_stack: NULL argument");
    if (rc != EMBER_OK)
        return rc;
    return txn_result(t, stack_own(&t->w, locs, n, id));
}

/* Everything of P that an append could refuse as EINVAL or ELIMIT, checked
** before anything is written: after it, a failure is the store's. */
static int append_check(const em_wtxn *w, const ember_profile *p)
{
    int rc = profile_check(p, 0);

    if (rc == EMBER_OK)
        rc = em_series_check(p->labels, p->nlabels);
    for (size_t i = 0; rc == EMBER_OK && i < p->nsamples; i++)
        if (!em_public_ok(&w->c, EM_T_STACK, p->samples[i].stack))
            rc = em_public_bad(&w->c, EM_T_STACK, "a sample",
                               p->samples[i].stack);
    return rc;
}

/* No nested transaction per append: input that would be refused is found
** by append_check first, so a failure while writing is the store's
** (ENOMEM, EIO, a full map) and ends the transaction anyway. This keeps an
** append as cheap as in a batch, and the postings staged for the whole
** transaction are merged once, at commit (a nested transaction per append
** copied LMDB's dirty page list and rewrote the same bitmaps per append). */
EMBER_API int ember_txn_append(ember_txn *t, const ember_profile *p)
{
    int rc;

    em_err_clear();
    rc = txn_usable(t);
    if (rc == EMBER_OK)
        rc = append_check(&t->w, p);
    if (rc != EMBER_OK)
        return rc;
    if (p->nsamples < EM_PEND_MAX_SAMPLES) {
        rc = pend_append(t, p);
    } else {    /* after what is pending, so each series keeps its order */
        rc = pend_flush(t);
        if (rc == EMBER_OK)
            rc = write_profile(&t->w, p, 0);
    }
    if (rc != EMBER_OK && rc != EM_EMAPFULL)
        t->failed = true;
    return txn_result(t, rc);
}

int em_txn_note_split_label(ember_txn *t, const char *name)
{
    char key[sizeof EM_SPLIT_LABEL_PREFIX + EM_MAX_LABEL_NAME];
    uint64_t v = 0;
    int rc = txn_usable(t);

    if (rc == EMBER_OK && (name == NULL || name[0] == '\0' ||
                           strlen(name) > EM_MAX_LABEL_NAME))
        rc = em_err(EMBER_EINVAL, "split label: bad name");
    if (rc != EMBER_OK)
        return rc;
    snprintf(key, sizeof key, "%s%s", EM_SPLIT_LABEL_PREFIX, name);
    rc = em_meta_get_u64(t->w.txn, t->db, key, &v);
    if (rc == EMBER_OK && v == 0)       /* a lookup: most are known */
        rc = em_meta_put_u64(t->w.txn, t->db, key, 1);
    return txn_result(t, rc);
}

/* ---- sealing every head ------------------------------------------------------------------ */

#define EM_SEAL_BATCH 64            /* series sealed per txn */

/* Seals up to EM_SEAL_BATCH heads in one txn; *more when some remain. */
static int seal_some(ember_db *db, bool *more)
{
    em_wtxn w;
    MDB_cursor *cur = NULL;
    MDB_val k, d;
    int n = 0, mrc, rc = em_wtxn_begin(db, &w);

    *more = false;
    if (rc != EMBER_OK)
        return rc;
    mrc = mdb_cursor_open(w.txn, db->dbi[EM_D_HEAD], &cur);
    while (rc == EMBER_OK && mrc == MDB_SUCCESS && n < EM_SEAL_BATCH &&
           (mrc = em_val_cursor(db, EM_D_HEAD, cur, &k, &d, MDB_FIRST,
                                &rc)) == MDB_SUCCESS) {
        uint32_t series;
        em_head h;
        if (k.mv_size != sizeof series || d.mv_size != sizeof h) {
            rc = EM_CORRUPT("head table: entry of %zu/%zu bytes", k.mv_size,
                            d.mv_size);
            break;
        }
        memcpy(&series, k.mv_data, sizeof series);
        memcpy(&h, d.mv_data, sizeof h);
        rc = em_seal_series(&w, series, &h);    /* deletes the head */
        n++;
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "seal");
    *more = rc == EMBER_OK && mrc == MDB_SUCCESS;
    if (rc == EMBER_OK)
        return em_wtxn_commit(&w);
    em_wtxn_abort(&w);
    return rc;
}

EMBER_API int ember_seal(ember_db *db)
{
    bool more = true;
    int rc = EMBER_OK;

    em_err_clear();
    if (db == NULL)
        return em_err(EMBER_EINVAL, "ember_seal: NULL database");
    pthread_mutex_lock(&db->wlock);
    while (more && rc == EMBER_OK) {
        rc = seal_some(db, &more);
        if (rc == EM_EMAPFULL) {
            rc = em_map_grow(db);
            more = true;
        }
    }
    pthread_mutex_unlock(&db->wlock);
    return rc;
}
