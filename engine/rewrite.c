/*
** engine/rewrite.c: blocks into one new block. What compaction does to
** blocks is one operation with options: merge several blocks (level-0
** blocks of a day into one), keep only what retention keeps (whole series
** or their old profiles dropped), and downsample (a series' profiles per
** bucket into one). The output holds only the symbols its kept profiles
** name, so every rewrite also collects the garbage.
**
** Each input's ids are mapped into the output through arrays indexed by
** input id (made on first need: a node is mapped with its parents, a
** location with its mapping and functions), so a record is read once.
** The output goes series by series: a series' chunks from every input,
** in time order, decoded, mapped, filtered, then bucketed or not, and
** encoded into chunks as blocks keep them (em_bbuild_series_chunks).
** A first pass over the same chunks maps only the nodes their kept
** profiles name, and the output's tree is renumbered depth-first before
** any chunk is written (nodes_first).
** Memory: the
** symbols of the inputs and output, and of the series being written, the
** profiles no later input chunk can reach are written out once it holds
** REWRITE_HOLD samples: a series costs that much and one input chunk
** more, whatever its length (inputs overlapping in time hold more).
*/
#include <stdio.h>
#include <stdlib.h>

#include "engine/compact.h"

/* Samples of one output series held before the profiles no later input
** chunk can reach are written out (about 64 MB with their profiles). */
#define REWRITE_HOLD (1u << 22)

/* One input block and its ids mapped into the output. */
typedef struct rin {
    em_block *b;
    const em_block_syms *y;
    const em_block_info *in;
    uint32_t *str, *map, *fn, *loc, *node, *ser;    /* UINT32_MAX: not yet */
} rin;

typedef struct rw {
    em_bbuild *out;
    em_codec *codec;
    rin *in;
    size_t nin;
    const em_rewrite_opts *o;
    uint32_t *chain;                /* scratch: a node's unmapped parents */
    size_t ncap;
    bool nodes_pass;                /* the first pass: map the nodes of the
                                    ** kept profiles only (nodes_first) */
} rw;

static int rin_init(rin *r, em_block *b)
{
    const em_block_info *in = em_block_get_info(b);
    uint32_t n[6] = { in->nstrings, in->nmappings, in->nfunctions,
                      in->nlocations, in->nnodes, in->nseries };
    uint32_t **a[6] = { &r->str, &r->map, &r->fn, &r->loc, &r->node,
                        &r->ser };
    int rc = em_block_symbols(b, &r->y);

    r->b = b;
    r->in = in;
    for (int i = 0; i < 6 && rc == EMBER_OK; i++) {
        if ((*a[i] = em_malloc(((size_t)n[i] + 1) * sizeof **a[i])) == NULL)
            return em_err(EMBER_ENOMEM, "rewrite: %u ids", n[i]);
        memset(*a[i], 0xff, ((size_t)n[i] + 1) * sizeof **a[i]);
    }
    return rc;
}

static void rin_free(rin *r)
{
    em_free(r->str);
    em_free(r->map);
    em_free(r->fn);
    em_free(r->loc);
    em_free(r->node);
    em_free(r->ser);
}

/* ---- symbols ------------------------------------------------------------------ */

static int map_str(rw *w, rin *r, uint32_t id, uint32_t *out)
{
    const em_block_syms *y = r->y;
    int rc;

    if ((*out = r->str[id]) != UINT32_MAX)
        return EMBER_OK;
    rc = em_bbuild_string(w->out, y->str_bytes + y->str_off[id],
                          y->str_off[id + 1] - y->str_off[id] - 1, out);
    if (rc == EMBER_OK)
        r->str[id] = *out;
    return rc;
}

static int map_mapping(rw *w, rin *r, uint32_t id, uint32_t *out)
{
    const em_bmapping *m = &r->y->mappings[id];
    uint32_t file, build;
    int rc;

    if ((*out = r->map[id]) != UINT32_MAX)
        return EMBER_OK;
    rc = map_str(w, r, m->file, &file);
    if (rc == EMBER_OK)
        rc = map_str(w, r, m->build_id, &build);
    if (rc == EMBER_OK)
        rc = em_bbuild_mapping(w->out, m->start, m->limit, m->offset, file,
                               build, out);
    if (rc == EMBER_OK)
        r->map[id] = *out;
    return rc;
}

static int map_function(rw *w, rin *r, uint32_t id, uint32_t *out)
{
    const em_bfunction *f = &r->y->functions[id];
    uint32_t s[3];
    int rc;

    if ((*out = r->fn[id]) != UINT32_MAX)
        return EMBER_OK;
    rc = map_str(w, r, f->name, &s[0]);
    if (rc == EMBER_OK)
        rc = map_str(w, r, f->system_name, &s[1]);
    if (rc == EMBER_OK)
        rc = map_str(w, r, f->file, &s[2]);
    if (rc == EMBER_OK)
        rc = em_bbuild_function(w->out, s[0], s[1], s[2], f->start_line,
                                out);
    if (rc == EMBER_OK)
        r->fn[id] = *out;
    return rc;
}

static int map_location(rw *w, rin *r, uint32_t id, uint32_t *out)
{
    const em_blocation *l = &r->y->locations[id];
    uint32_t fns[EM_MAX_LINES], mapping;
    int64_t lines[EM_MAX_LINES];
    int rc;

    if ((*out = r->loc[id]) != UINT32_MAX)
        return EMBER_OK;
    if (l->n > EM_MAX_LINES)
        return EM_CORRUPT("rewrite: location %u has %u lines", id, l->n);
    rc = map_mapping(w, r, l->mapping, &mapping);
    for (uint32_t i = 0; i < l->n && rc == EMBER_OK; i++) {
        lines[i] = r->y->lines[l->first + i].line;
        rc = map_function(w, r, r->y->lines[l->first + i].function, &fns[i]);
    }
    if (rc == EMBER_OK)
        rc = em_bbuild_location(w->out, mapping, l->address, fns, lines,
                                l->n, out);
    if (rc == EMBER_OK)
        r->loc[id] = *out;
    return rc;
}

/* Node ID with every parent it lacks, outermost first: the unmapped
** chain is collected into W's scratch, then mapped down from its top. */
static int map_node(rw *w, rin *r, uint32_t id, uint32_t *out)
{
    size_t k = 0;
    int rc = EMBER_OK;

    if ((*out = r->node[id]) != UINT32_MAX)
        return EMBER_OK;
    for (uint32_t x = id; x != EM_BLOCK_ROOT && r->node[x] == UINT32_MAX;
         x = r->y->parent[x]) {
        if (k == w->ncap) {
            uint32_t *g = em_grow(w->chain, &w->ncap, k + 1, sizeof *g);
            if (g == NULL)
                return em_err(EMBER_ENOMEM, "rewrite: a stack of %zu", k);
            w->chain = g;
        }
        w->chain[k++] = x;
    }
    while (k-- > 0 && rc == EMBER_OK) {
        uint32_t x = w->chain[k], p = r->y->parent[x], loc = EM_BLOCK_NOLOC;
        uint32_t op = p == EM_BLOCK_ROOT ? EM_BLOCK_ROOT : r->node[p];
        if (r->y->loc[x] != EM_BLOCK_NOLOC)   /* else the empty stack */
            rc = map_location(w, r, r->y->loc[x], &loc);
        if (rc == EMBER_OK)
            rc = em_bbuild_node(w->out, op, loc, &r->node[x]);
    }
    *out = r->node[id];
    return rc;
}

static int map_series(rw *w, rin *r, uint32_t id, uint32_t *out)
{
    const em_bseries *s = &r->y->series[id];
    uint32_t names[EM_MAX_LABELS], values[EM_MAX_LABELS], type;
    int rc;

    if ((*out = r->ser[id]) != UINT32_MAX)
        return EMBER_OK;
    if (s->n > EM_MAX_LABELS)
        return EM_CORRUPT("rewrite: series %u has %u labels", id, s->n);
    rc = map_str(w, r, s->type, &type);
    for (uint32_t i = 0; i < s->n && rc == EMBER_OK; i++) {
        rc = map_str(w, r, r->y->label_names[s->first + i], &names[i]);
        if (rc == EMBER_OK)
            rc = map_str(w, r, r->y->label_values[s->first + i], &values[i]);
    }
    if (rc == EMBER_OK)
        rc = em_bbuild_series(w->out, type, names, values, s->n, out);
    if (rc == EMBER_OK)
        r->ser[id] = *out;
    return rc;
}

/* ---- series: the inputs' series with the same labels, as groups --------------- */

typedef struct member {
    uint64_t h;                     /* of the labels */
    uint32_t in, local;
} member;

static int member_cmp(const void *a, const void *b)
{
    const member *x = a, *y = b;

    if (x->h != y->h)
        return (x->h > y->h) - (x->h < y->h);
    if (x->in != y->in)
        return (x->in > y->in) - (x->in < y->in);
    return (x->local > y->local) - (x->local < y->local);
}

static const char *ystr(const em_block_syms *y, uint32_t id)
{
    return y->str_bytes + y->str_off[id];
}

static uint64_t series_hash(const rin *r, uint32_t id)
{
    const em_bseries *s = &r->y->series[id];
    const char *t = ystr(r->y, s->type);
    uint64_t h = em_hash64(t, strlen(t) + 1, 0x5e);

    for (uint32_t i = 0; i < s->n; i++) {
        const char *a = ystr(r->y, r->y->label_names[s->first + i]);
        const char *b = ystr(r->y, r->y->label_values[s->first + i]);
        h = em_hash64(a, strlen(a) + 1, h);
        h = em_hash64(b, strlen(b) + 1, h);
    }
    return h;
}

static bool series_same(const rw *w, const member *x, const member *y)
{
    const rin *a = &w->in[x->in], *b = &w->in[y->in];
    const em_bseries *s = &a->y->series[x->local];
    const em_bseries *t = &b->y->series[y->local];

    if (s->n != t->n || strcmp(ystr(a->y, s->type), ystr(b->y, t->type)))
        return false;
    for (uint32_t i = 0; i < s->n; i++)
        if (strcmp(ystr(a->y, a->y->label_names[s->first + i]),
                   ystr(b->y, b->y->label_names[t->first + i])) ||
            strcmp(ystr(a->y, a->y->label_values[s->first + i]),
                   ystr(b->y, b->y->label_values[t->first + i])))
            return false;
    return true;
}

/* ---- one output series ----------------------------------------------------------- */

/* A series' profiles waiting to be written, in output ids. */
typedef struct pend {
    em_chunk_profile *p;
    size_t n, cap;
    uint32_t *st;                   /* the profiles' arrays, one pool */
    int64_t *v;
    size_t ns, caps;
} pend;

typedef struct cref {
    uint32_t in;
    const em_bchunk *c;
} cref;

static int cref_cmp(const void *a, const void *b)
{
    int64_t x = ((const cref *)a)->c->min_time;
    int64_t y = ((const cref *)b)->c->min_time;
    return (x > y) - (x < y);
}

typedef struct spair {
    uint32_t st;
    int64_t v;
} spair;

static int spair_cmp(const void *a, const void *b)
{
    uint32_t x = ((const spair *)a)->st, y = ((const spair *)b)->st;
    return (x > y) - (x < y);
}

/* Appends profile P (in input R's node ids) to D in output ids. The pool
** may move, so profiles keep offsets into it until the flush. */
static int pend_add(rw *w, rin *r, pend *d, const em_chunk_profile *p)
{
    spair *t = em_malloc((size_t)p->n * sizeof *t + 1);
    int rc = t == NULL ? em_err(EMBER_ENOMEM, "rewrite: %u samples", p->n)
                       : EMBER_OK;

    for (uint32_t i = 0; i < p->n && rc == EMBER_OK; i++) {
        t[i].v = p->values[i];
        rc = map_node(w, r, p->stacks[i], &t[i].st);
    }
    if (rc == EMBER_OK && d->ns + p->n > d->caps) {
        size_t c1 = d->caps, c2 = d->caps;
        uint32_t *st = em_grow(d->st, &c1, d->ns + p->n, sizeof *st);
        int64_t *v = st != NULL ? em_grow(d->v, &c2, d->ns + p->n, sizeof *v)
                                : NULL;
        if (st != NULL)
            d->st = st;
        if (v == NULL)
            rc = em_err(EMBER_ENOMEM, "rewrite: %zu samples", d->ns + p->n);
        else {
            d->v = v;
            d->caps = c2;
        }
    }
    if (rc == EMBER_OK && d->n == d->cap) {
        em_chunk_profile *g = em_grow(d->p, &d->cap, d->n + 1, sizeof *g);
        rc = g == NULL ? em_err(EMBER_ENOMEM, "rewrite: profiles") : rc;
        d->p = g != NULL ? g : d->p;
    }
    if (rc == EMBER_OK) {
        qsort(t, p->n, sizeof *t, spair_cmp);
        for (uint32_t i = 0; i < p->n; i++) {
            d->st[d->ns + i] = t[i].st;
            d->v[d->ns + i] = t[i].v;
        }
        d->p[d->n++] = (em_chunk_profile){ p->time_ms, p->duration_ns,
                                           p->period,
                                           (const uint32_t *)(uintptr_t)d->ns,
                                           NULL, p->n };
        d->ns += p->n;
    }
    em_free(t);
    return rc;
}

static int prof_cmp(const void *a, const void *b)
{
    const em_chunk_profile *x = a, *y = b;

    if (x->time_ms != y->time_ms)
        return (x->time_ms > y->time_ms) - (x->time_ms < y->time_ms);
    return ((uintptr_t)x->stacks > (uintptr_t)y->stacks) -
           ((uintptr_t)x->stacks < (uintptr_t)y->stacks);   /* stable */
}

static int64_t bucket_of(int64_t t, int64_t r)
{
    return (t / r - (t % r < 0)) * r;
}

/* Sums the profiles [A, B) of D (sorted, one bucket) into D's profile A
** (delta types: counts add up): stacks merged, durations summed, the
** largest period; the values sum within int64 since the stored profiles'
** do (issue 12's rule) for any series of one sign, and a bucket is a
** series' profiles. */
static int bucket_sum(pend *d, size_t a, size_t b, int64_t start)
{
    size_t total = 0, k = 0;
    spair *t;
    em_chunk_profile *o = &d->p[a];
    int64_t dur = 0, period = INT64_MIN;

    for (size_t i = a; i < b; i++)
        total += d->p[i].n;
    if ((t = em_malloc(total * sizeof *t + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "rewrite: a bucket of %zu", total);
    for (size_t i = a; i < b; i++) {
        const em_chunk_profile *p = &d->p[i];
        size_t off = (size_t)(uintptr_t)p->stacks;
        for (uint32_t j = 0; j < p->n; j++)
            t[k++] = (spair){ d->st[off + j], d->v[off + j] };
        dur = em_add_sat(dur, p->duration_ns);
        period = p->period > period ? p->period : period;
    }
    qsort(t, total, sizeof *t, spair_cmp);
    k = 0;
    for (size_t i = 0; i < total; i++) {    /* into the first's slots: the
                                            ** bucket has at least as many */
        if (k > 0 && t[k - 1].st == t[i].st)
            t[k - 1].v = em_add_wrap(t[k - 1].v, t[i].v);
        else
            t[k++] = t[i];
    }
    /* the merged stacks go after the pool: the pool grows */
    if (d->ns + k > d->caps) {
        size_t c1 = d->caps, c2 = d->caps;
        uint32_t *st = em_grow(d->st, &c1, d->ns + k, sizeof *st);
        int64_t *v = st != NULL ? em_grow(d->v, &c2, d->ns + k, sizeof *v)
                                : NULL;
        if (st != NULL)
            d->st = st;
        if (v == NULL) {
            em_free(t);
            return em_err(EMBER_ENOMEM, "rewrite: a bucket of %zu", k);
        }
        d->v = v;
        d->caps = c2;
    }
    for (size_t i = 0; i < k; i++) {
        d->st[d->ns + i] = t[i].st;
        d->v[d->ns + i] = t[i].v;
    }
    *o = (em_chunk_profile){ start, dur, period,
                             (const uint32_t *)(uintptr_t)d->ns, NULL,
                             (uint32_t)k };
    d->ns += k;
    em_free(t);
    return EMBER_OK;
}

/* Downsamples D's first N profiles (sorted) in place: per bucket of the
** resolution, the sum (DELTA) or the last profile (a gauge or a running
** total keeps what it read last), stamped at the bucket's start; *N
** becomes the buckets. */
static int pend_bucket(pend *d, size_t *n, int64_t res, bool delta)
{
    size_t w = 0;
    int rc = EMBER_OK;

    for (size_t i = 0; i < *n && rc == EMBER_OK;) {
        int64_t b = bucket_of(d->p[i].time_ms, res);
        size_t j = i;
        while (j < *n && bucket_of(d->p[j].time_ms, res) == b)
            j++;
        if (delta) {
            rc = bucket_sum(d, i, j, b);
            d->p[w++] = d->p[i];
        } else {
            d->p[w] = d->p[j - 1];
            d->p[w++].time_ms = b;
        }
        i = j;
    }
    *n = w;
    return rc;
}

/* Writes D's first N profiles (sorted by time, possibly bucketed) as
** output series SERIES's chunks. */
static int pend_write(rw *w, pend *d, size_t n, uint32_t series)
{
    em_chunk_profile *ps = em_malloc(n * sizeof *ps + 1);
    int rc = ps == NULL ? em_err(EMBER_ENOMEM, "rewrite: %zu profiles", n)
                        : EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        size_t off = (size_t)(uintptr_t)d->p[i].stacks;
        ps[i] = d->p[i];
        ps[i].stacks = d->st + off;
        ps[i].values = d->v + off;
    }
    if (rc == EMBER_OK)
        rc = em_bbuild_series_chunks(w->out, w->codec, series, ps, n);
    em_free(ps);
    return rc;
}

static int off_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const em_chunk_profile *)a)->stacks;
    uintptr_t y = (uintptr_t)((const em_chunk_profile *)b)->stacks;
    return (x > y) - (x < y);
}

/* Drops D's first M profiles (written) and packs the rest to the front of
** the pool, in pool order, which keeps ties in the order they came. */
static void pend_drop(pend *d, size_t m)
{
    size_t at = 0;

    memmove(d->p, d->p + m, (d->n - m) * sizeof *d->p);
    d->n -= m;
    if (d->n > 0)
        qsort(d->p, d->n, sizeof *d->p, off_cmp);
    for (size_t i = 0; i < d->n; i++) {
        size_t off = (size_t)(uintptr_t)d->p[i].stacks;
        memmove(d->st + at, d->st + off, d->p[i].n * sizeof *d->st);
        memmove(d->v + at, d->v + off, d->p[i].n * sizeof *d->v);
        d->p[i].stacks = (const uint32_t *)(uintptr_t)at;
        at += d->p[i].n;
    }
    d->ns = at;
}

/* An output series being written: where its profiles go, how they are
** bucketed. */
typedef struct gout {
    const member *g;
    uint32_t series;
    bool mapped, delta;
} gout;

/* Writes D's profiles before LIMIT (INT64_MAX: all), which no later input
** chunk can add to (their chunks start at LIMIT or after), bucketed if
** the rewrite downsamples, then drops them. */
static int pend_flush(rw *w, gout *o, pend *d, int64_t limit)
{
    int64_t res = w->o->resolution_ms;
    size_t m = 0, nb;
    int rc = EMBER_OK;

    if (d->n == 0)
        return EMBER_OK;
    qsort(d->p, d->n, sizeof *d->p, prof_cmp);
    if (res > 0 && limit != INT64_MAX)
        limit = bucket_of(limit, res);      /* its bucket is not whole yet */
    while (m < d->n && (limit == INT64_MAX || d->p[m].time_ms < limit))
        m++;
    nb = m;
    if (m > 0 && res > 0)
        rc = pend_bucket(d, &nb, res, o->delta);
    if (rc == EMBER_OK && m > 0 && !o->mapped) {
        rc = map_series(w, &w->in[o->g->in], o->g->local, &o->series);
        o->mapped = rc == EMBER_OK;
    }
    if (rc == EMBER_OK && m > 0)
        rc = pend_write(w, d, nb, o->series);
    if (rc == EMBER_OK)
        pend_drop(d, m);
    return rc;
}

static void pend_free(pend *d)
{
    em_free(d->p);
    em_free(d->st);
    em_free(d->v);
    memset(d, 0, sizeof *d);
}

/* The oldest time kept of member M's series: the rewrite's own bound and
** what retention keeps of it. */
static int64_t keep_from(rw *w, const member *m)
{
    const rin *r = &w->in[m->in];
    const em_bseries *s = &r->y->series[m->local];
    ember_label l[EM_MAX_LABELS];
    int64_t from = w->o->from;

    if (w->o->keep_from == NULL)
        return from;
    for (uint32_t i = 0; i < s->n && i < EM_MAX_LABELS; i++)
        l[i] = (ember_label){ ystr(r->y, r->y->label_names[s->first + i]),
                             ystr(r->y, r->y->label_values[s->first + i]) };
    int64_t k = w->o->keep_from(w->o->ctx, ystr(r->y, s->type), l, s->n);
    return k > from ? k : from;
}

/* Adds the profiles of one input chunk that the rewrite keeps. */
static int chunk_take(rw *w, const cref *c, int64_t from, pend *d)
{
    rin *r = &w->in[c->in];
    const uint8_t *bytes;
    em_chunk_profile *tp = NULL;
    em_chunk ch;
    int rc = em_block_chunk_bytes(r->b, c->c, &bytes);

    if (rc == EMBER_OK)
        rc = em_chunk_decode(w->codec, bytes, (size_t)c->c->len, EM_COL_ALL,
                             &ch);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "block %016llx",
                             (unsigned long long)r->in->id);
    for (uint32_t i = 0; i < ch.h.nstacks; i++)
        if (ch.stacks[i] >= r->in->nnodes)
            rc = EM_CORRUPT("block %016llx: a chunk names node %u",
                            (unsigned long long)r->in->id, ch.stacks[i]);
    if (rc == EMBER_OK)
        rc = em_chunk_transpose(&ch, &tp);
    for (uint32_t i = 0; i < ch.h.nprofiles && rc == EMBER_OK; i++)
        if (tp[i].time_ms >= from && tp[i].time_ms <= w->o->to)
            rc = pend_add(w, r, d, &tp[i]);
    em_free(tp);
    em_chunk_release(&ch);
    return rc;
}

/* Maps every node a kept profile of one input chunk names (the first
** pass): a chunk wholly kept needs only its stack column. */
static int chunk_nodes(rw *w, const cref *c, int64_t from)
{
    rin *r = &w->in[c->in];
    bool whole = c->c->min_time >= from && c->c->max_time <= w->o->to;
    unsigned parts = whole ? EM_PART_STACKS : EM_PART_TIMES | EM_PART_PROFILES;
    const uint8_t *bytes;
    em_chunk ch = { 0 };
    void *mem = NULL;
    size_t nb, len = (size_t)c->c->len;
    int rc = em_block_chunk_bytes(r->b, c->c, &bytes);

    if (rc == EMBER_OK)
        rc = em_chunk_header_read(bytes, len, &ch.h);
    if (rc == EMBER_OK)
        rc = em_chunk_decode_parts(w->codec, bytes, len, parts, &ch, &mem,
                                   &nb);
    for (uint32_t i = 0; i < ch.h.nstacks && rc == EMBER_OK && mem != NULL;
         i++) {
        bool kept = whole;
        uint32_t out;
        for (uint64_t j = ch.stack_start[i];
             !kept && j < ch.stack_start[i + 1]; j++) {
            int64_t t = ch.time_ms[ch.sample_profile[j]];
            kept = t >= from && t <= w->o->to;
        }
        if (ch.stacks[i] >= r->in->nnodes)
            rc = EM_CORRUPT("a chunk names node %u", ch.stacks[i]);
        else if (kept)
            rc = map_node(w, r, ch.stacks[i], &out);
    }
    em_free(mem);
    return rc == EMBER_OK ? rc : em_err_prefix(rc, "block %016llx",
                                               (unsigned long long)r->in->id);
}

/* Writes the output series of the group G (N members with equal labels). */
static int group_write(rw *w, const member *g, size_t n, pend *d)
{
    const rin *r0 = &w->in[g[0].in];
    gout o = { g, 0, false,
               em_type_is_delta(ystr(r0->y, r0->y->series[g[0].local].type)) };
    cref *cs = NULL;
    size_t nc = 0, cap = 0;
    int64_t from = keep_from(w, &g[0]);
    uint64_t hold = w->o->hold_samples > 0 ? w->o->hold_samples : REWRITE_HOLD;
    int rc = EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        const em_bchunk *c;
        size_t k;
        rc = em_block_chunks(w->in[g[i].in].b, g[i].local, &c, &k);
        for (size_t j = 0; j < k && rc == EMBER_OK; j++) {
            if (c[j].max_time < from || c[j].min_time > w->o->to)
                continue;
            if (nc == cap) {
                cref *x = em_grow(cs, &cap, nc + 1, sizeof *x);
                if (x == NULL) {
                    rc = em_err(EMBER_ENOMEM, "rewrite: chunks");
                    break;
                }
                cs = x;
            }
            cs[nc++] = (cref){ g[i].in, &c[j] };
        }
    }
    if (rc == EMBER_OK && nc > 0)
        qsort(cs, nc, sizeof *cs, cref_cmp);
    for (size_t i = 0; i < nc && rc == EMBER_OK && w->nodes_pass; i++)
        rc = chunk_nodes(w, &cs[i], from);
    for (size_t i = 0; i < nc && rc == EMBER_OK && !w->nodes_pass; i++) {
        rc = chunk_take(w, &cs[i], from, d);
        if (rc == EMBER_OK && (i + 1 == nc || d->ns >= hold))
            rc = pend_flush(w, &o, d,
                            i + 1 == nc ? INT64_MAX : cs[i + 1].c->min_time);
    }
    em_free(cs);
    d->n = d->ns = 0;
    return rc;
}

/* Writes the groups of the run M[0..N) of one label hash: members with
** the same labels go together (a hash collision makes two groups). */
static int run_write(rw *w, member *m, size_t n, pend *d)
{
    member *g = em_malloc(n * sizeof *g + 1);
    uint8_t *done = em_calloc(n + 1, 1);
    int rc = g == NULL || done == NULL
             ? em_err(EMBER_ENOMEM, "rewrite: %zu series", n) : EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        size_t k = 0;
        if (done[i])
            continue;
        for (size_t a = i; a < n; a++)
            if (!done[a] && series_same(w, &m[i], &m[a])) {
                g[k++] = m[a];
                done[a] = 1;
            }
        rc = group_write(w, g, k, d);
    }
    em_free(g);
    em_free(done);
    return rc;
}

/* Every input series, grouped by labels, written group by group in the
** order of their hashes. */
static int series_all(rw *w)
{
    member *m;
    size_t n = 0, k = 0;
    pend d = { 0 };
    int rc = EMBER_OK;

    for (size_t i = 0; i < w->nin; i++)
        n += w->in[i].in->nseries;
    if ((m = em_malloc(n * sizeof *m + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "rewrite: %zu series", n);
    for (uint32_t i = 0; i < w->nin; i++)
        for (uint32_t s = 0; s < w->in[i].in->nseries; s++)
            m[k++] = (member){ series_hash(&w->in[i], s), i, s };
    qsort(m, n, sizeof *m, member_cmp);
    for (size_t i = 0; i < n && rc == EMBER_OK;) {
        size_t j = i + 1;
        while (j < n && m[j].h == m[i].h)
            j++;
        rc = run_write(w, m + i, j - i, &d);
        i = j;
    }
    pend_free(&d);
    em_free(m);
    return rc;
}

/* The first pass: every node the kept profiles name is mapped, then the
** output's nodes are renumbered depth-first and the inputs' maps with
** them, before any chunk is written. A block's stacks in tree order make
** the stacks through a frame one range of ids, and the nodes of a
** subtree neighbours in the node sections. */
static int nodes_first(rw *w)
{
    uint32_t *perm = NULL;
    int rc;

    w->nodes_pass = true;
    rc = series_all(w);
    w->nodes_pass = false;
    if (rc == EMBER_OK)
        rc = em_bbuild_nodes_dfs(w->out, &perm);
    for (size_t i = 0; i < w->nin && rc == EMBER_OK; i++) {
        rin *r = &w->in[i];
        for (uint32_t x = 0; x < r->in->nnodes; x++)
            if (r->node[x] != UINT32_MAX)
                r->node[x] = perm[r->node[x]];
    }
    em_free(perm);
    return rc;
}

int em_rewrite(em_block *const *in, size_t nin, const em_rewrite_opts *o,
               em_block_info *out)
{
    char name[64];
    rw w = { .o = o, .nin = nin };
    em_block_info info = { .id = o->id, .level = o->level,
                           .resolution_ms = o->resolution_ms };
    int rc;

    snprintf(name, sizeof name, "%016llx.block", (unsigned long long)o->id);
    w.in = em_calloc(nin + 1, sizeof *w.in);
    rc = w.in == NULL ? em_err(EMBER_ENOMEM, "rewrite") : EMBER_OK;
    for (size_t i = 0; i < nin && rc == EMBER_OK; i++)
        rc = rin_init(&w.in[i], in[i]);
    if (rc == EMBER_OK)
        rc = em_codec_new(&w.codec);
    if (rc == EMBER_OK)
        rc = em_bbuild_new(o->dir, name, o->zstd_level, &w.out);
    if (rc == EMBER_OK)
        rc = nodes_first(&w);
    if (rc == EMBER_OK)
        rc = series_all(&w);
    if (rc == EMBER_OK)
        rc = em_bbuild_finish(w.out, &info, out);
    em_bbuild_free(w.out);
    em_codec_free(w.codec);
    for (size_t i = 0; w.in != NULL && i < nin; i++)
        rin_free(&w.in[i]);
    em_free(w.in);
    em_free(w.chain);
    return rc;
}
