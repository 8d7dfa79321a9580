/*
** engine/compact_head.c: the head's old data into level-0 blocks. Every
** profile of the head's sealed chunks older than the cut goes into the
** block of its window (windows of em_compact_opts' block span, aligned
** to the epoch); a window's block holds every series with profiles there,
** one chunk per series (split when a chunk's limits are near).
**
** This runs on a read snapshot, writing only block files: ingest goes on.
** It notes every head chunk it read (key, length, checksum) so that the
** commit (engine/compact.c) can check, in its write transaction, that
** none changed meanwhile, and then drop them from the head, re-storing the
** profiles of a chunk that straddles the cut. Head chunks still open
** (flagged HEAD) are left alone: ember_seal runs first.
**
** Head ids are mapped to block ids through one array per table (head id
** -> block id, made on first need), so every head record is read once
** per block whatever the number of stacks that name it.
*/
#include <stdlib.h>

#include "engine/block.h"
#include "engine/compact.h"

/* Head id -> block id per table, for the block being built. */
typedef struct idmap {
    uint32_t *m[EM_T_COUNT];        /* UINT32_MAX: not yet in the block */
} idmap;

typedef struct cut {
    em_rtxn *r;
    em_bbuild *b;
    idmap map;
    em_codec *codec;
    const em_compact_opts *o;
} cut;

static void idmap_free(idmap *m)
{
    for (int t = 0; t < EM_T_COUNT; t++)
        em_free(m->m[t]);
    memset(m, 0, sizeof *m);
}

static int idmap_init(idmap *m, const em_rtxn *r)
{
    for (int t = 0; t < EM_T_COUNT; t++) {
        size_t n = (size_t)r->next[t] + 1;
        if ((m->m[t] = em_malloc(n * sizeof *m->m[t])) == NULL) {
            idmap_free(m);
            return em_err(EMBER_ENOMEM, "compact: %zu %s ids", n,
                          em_table_names[t]);
        }
        memset(m->m[t], 0xff, n * sizeof *m->m[t]);
    }
    return EMBER_OK;
}

static int head_rec(cut *c, int table, uint32_t id, const uint8_t **p,
                    size_t *len)
{
    int rc;

    if (id >= c->r->next[table])
        return EM_CORRUPT("a record names %s %u past the table's %u",
                          em_table_names[table], id, c->r->next[table]);
    rc = em_table_get(c->r->txn, c->r->db, table, id, p, len);
    if (rc == EMBER_ENOTFOUND)
        rc = EM_CORRUPT("%s %u is missing", em_table_names[table], id);
    return rc;
}

static int map_string(cut *c, uint32_t id, uint32_t *out)
{
    const uint8_t *p;
    size_t len;
    int rc;

    if (id < c->r->next[EM_T_STRING] &&
        (*out = c->map.m[EM_T_STRING][id]) != UINT32_MAX)
        return EMBER_OK;
    if ((rc = head_rec(c, EM_T_STRING, id, &p, &len)) == EMBER_OK &&
        (rc = em_bbuild_string(c->b, (const char *)p, len, out)) == EMBER_OK)
        c->map.m[EM_T_STRING][id] = *out;
    return rc;
}

static int map_mapping(cut *c, uint32_t id, uint32_t *out)
{
    const uint8_t *p;
    size_t len;
    uint64_t f[3];
    uint32_t file, build;
    int rc;

    if (id < c->r->next[EM_T_MAPPING] &&
        (*out = c->map.m[EM_T_MAPPING][id]) != UINT32_MAX)
        return EMBER_OK;
    rc = head_rec(c, EM_T_MAPPING, id, &p, &len);
    if (rc == EMBER_OK)
        rc = em_mapping_decode(p, len, f, &file, &build);
    if (rc == EMBER_OK)
        rc = map_string(c, file, &file);
    if (rc == EMBER_OK)
        rc = map_string(c, build, &build);
    if (rc == EMBER_OK)
        rc = em_bbuild_mapping(c->b, f[0], f[1], f[2], file, build, out);
    if (rc == EMBER_OK)
        c->map.m[EM_T_MAPPING][id] = *out;
    return em_err_prefix(rc, "mapping %u", id);
}

static int map_function(cut *c, uint32_t id, uint32_t *out)
{
    const uint8_t *p;
    size_t len;
    uint32_t s[3];
    int64_t start;
    int rc;

    if (id < c->r->next[EM_T_FUNCTION] &&
        (*out = c->map.m[EM_T_FUNCTION][id]) != UINT32_MAX)
        return EMBER_OK;
    rc = head_rec(c, EM_T_FUNCTION, id, &p, &len);
    if (rc == EMBER_OK)
        rc = em_function_decode(p, len, s, &start);
    for (int i = 0; i < 3 && rc == EMBER_OK; i++)
        rc = map_string(c, s[i], &s[i]);
    if (rc == EMBER_OK)
        rc = em_bbuild_function(c->b, s[0], s[1], s[2], start, out);
    if (rc == EMBER_OK)
        c->map.m[EM_T_FUNCTION][id] = *out;
    return em_err_prefix(rc, "function %u", id);
}

static int map_location(cut *c, uint32_t id, uint32_t *out)
{
    uint32_t fn[EM_MAX_LINES], mapping;
    int64_t line[EM_MAX_LINES];
    uint64_t address;
    const uint8_t *p;
    size_t len, nl;
    int rc;

    if (id < c->r->next[EM_T_LOCATION] &&
        (*out = c->map.m[EM_T_LOCATION][id]) != UINT32_MAX)
        return EMBER_OK;
    rc = head_rec(c, EM_T_LOCATION, id, &p, &len);
    if (rc == EMBER_OK)
        rc = em_location_decode(p, len, &mapping, &address, fn, line,
                                EM_MAX_LINES, &nl);
    if (rc == EMBER_OK)
        rc = map_mapping(c, mapping, &mapping);
    for (size_t i = 0; i < nl && rc == EMBER_OK; i++)
        rc = map_function(c, fn[i], &fn[i]);
    if (rc == EMBER_OK)
        rc = em_bbuild_location(c->b, mapping, address, fn, line, nl, out);
    if (rc == EMBER_OK)
        c->map.m[EM_T_LOCATION][id] = *out;
    return em_err_prefix(rc, "location %u", id);
}

static int map_stack(cut *c, uint32_t id, uint32_t *out)
{
    const uint8_t *p, *q;
    uint64_t depth = 0;
    uint32_t *locs = NULL;
    size_t len, n = 0;
    int rc;

    if (id < c->r->next[EM_T_STACK] &&
        (*out = c->map.m[EM_T_STACK][id]) != UINT32_MAX)
        return EMBER_OK;
    rc = head_rec(c, EM_T_STACK, id, &p, &len);
    q = p;
    if (rc == EMBER_OK && (em_varint_get(&q, p + len, &depth) != 0 ||
                           depth > len))
        rc = EM_CORRUPT("stack %u: record of %zu bytes does not decode", id,
                        len);
    if (rc == EMBER_OK &&
        (locs = em_malloc((size_t)depth * sizeof *locs + 1)) == NULL)
        rc = em_err(EMBER_ENOMEM, "stack of %llu",
                    (unsigned long long)depth);
    if (rc == EMBER_OK)
        rc = em_stack_decode(p, len, locs, (size_t)depth, &n);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = map_location(c, locs[i], &locs[i]);
    if (rc == EMBER_OK)
        rc = em_bbuild_stack(c->b, locs, n, out);
    if (rc == EMBER_OK)
        c->map.m[EM_T_STACK][id] = *out;
    em_free(locs);
    return em_err_prefix(rc, "stack %u", id);
}

static int map_series(cut *c, uint32_t id, uint32_t *out)
{
    em_series_rec s;
    const uint8_t *p;
    size_t len;
    int rc;

    if (id < c->r->next[EM_T_SERIES] &&
        (*out = c->map.m[EM_T_SERIES][id]) != UINT32_MAX)
        return EMBER_OK;
    rc = head_rec(c, EM_T_SERIES, id, &p, &len);
    if (rc == EMBER_OK)
        rc = em_series_decode(p, len, &s);
    if (rc == EMBER_OK)
        rc = map_string(c, s.type, &s.type);
    for (uint32_t i = 0; i < s.nlabels && rc == EMBER_OK; i++) {
        rc = map_string(c, s.names[i], &s.names[i]);
        if (rc == EMBER_OK)
            rc = map_string(c, s.values[i], &s.values[i]);
    }
    if (rc == EMBER_OK)
        rc = em_bbuild_series(c->b, s.type, s.names, s.values, s.nlabels,
                              out);
    if (rc == EMBER_OK)
        c->map.m[EM_T_SERIES][id] = *out;
    return em_err_prefix(rc, "series %u", id);
}

/* ---- one series' profiles of a window ------------------------------------------ */

/* Profiles gathered for one series, their stacks in block ids. */
typedef struct gather {
    em_chunk_profile *p;
    size_t n, cap;
    void **mem;                     /* the arrays behind them */
    size_t nmem, capmem;
    uint64_t nsamples;
} gather;

static void gather_clear(gather *g)
{
    for (size_t i = 0; i < g->nmem; i++)
        em_free(g->mem[i]);
    g->n = g->nmem = 0;
    g->nsamples = 0;
}

static void gather_free(gather *g)
{
    gather_clear(g);
    em_free(g->p);
    em_free(g->mem);
    memset(g, 0, sizeof *g);
}

typedef struct pair {
    uint32_t st;
    int64_t v;
} pair;

static int pair_cmp(const void *a, const void *b)
{
    uint32_t x = ((const pair *)a)->st, y = ((const pair *)b)->st;
    return (x > y) - (x < y);
}

/* Adds profile P (head stack ids) to G, its stacks mapped into the block
** and sorted again. */
static int gather_add(cut *c, gather *g, const em_chunk_profile *p)
{
    pair *t = em_malloc((size_t)p->n * sizeof *t + 1);
    uint8_t *mem = em_malloc((size_t)p->n * (sizeof(uint32_t) +
                                             sizeof(int64_t)) + 8);
    uint32_t *st = (uint32_t *)(mem + (size_t)p->n * sizeof(int64_t));
    int64_t *v = (int64_t *)mem;
    int rc = t == NULL || mem == NULL
             ? em_err(EMBER_ENOMEM, "compact: profile of %u samples", p->n)
             : EMBER_OK;

    for (uint32_t i = 0; i < p->n && rc == EMBER_OK; i++) {
        t[i].v = p->values[i];
        rc = map_stack(c, p->stacks[i], &t[i].st);
    }
    if (rc == EMBER_OK && g->n == g->cap) {
        em_chunk_profile *q = em_grow(g->p, &g->cap, g->n + 1, sizeof *q);
        rc = q == NULL ? em_err(EMBER_ENOMEM, "compact: profiles") : rc;
        g->p = q != NULL ? q : g->p;
    }
    if (rc == EMBER_OK && g->nmem == g->capmem) {
        void **q = em_grow(g->mem, &g->capmem, g->nmem + 1, sizeof *q);
        rc = q == NULL ? em_err(EMBER_ENOMEM, "compact: profiles") : rc;
        g->mem = q != NULL ? q : g->mem;
    }
    if (rc != EMBER_OK) {
        em_free(t);
        em_free(mem);
        return rc;
    }
    qsort(t, p->n, sizeof *t, pair_cmp);
    for (uint32_t i = 0; i < p->n; i++) {
        st[i] = t[i].st;
        v[i] = t[i].v;
    }
    em_free(t);
    g->mem[g->nmem++] = mem;
    g->p[g->n++] = (em_chunk_profile){ p->time_ms, p->duration_ns,
                                       p->period, st, v, p->n };
    g->nsamples += p->n;
    return EMBER_OK;
}

static int prof_time_cmp(const void *a, const void *b)
{
    int64_t x = ((const em_chunk_profile *)a)->time_ms;
    int64_t y = ((const em_chunk_profile *)b)->time_ms;
    return (x > y) - (x < y);
}

/* Writes G's profiles as block series SERIES's chunks, in time order. */
static int gather_flush(cut *c, gather *g, uint32_t series)
{
    int rc;

    qsort(g->p, g->n, sizeof *g->p, prof_time_cmp);
    rc = em_bbuild_series_chunks(c->b, c->codec, series, g->p, g->n);
    gather_clear(g);
    return rc;
}

/* ---- a window --------------------------------------------------------------------- */

static int note_read(em_cut_list *l, const MDB_val *k, const MDB_val *d,
                     bool straddles)
{
    em_cut_chunk *e;

    /* a chunk across a window's edge is noted once per window; the
    ** commit drops the repeats */
    if (l->n == l->cap) {
        em_cut_chunk *g = em_grow(l->v, &l->cap, l->n + 1, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "compact: %zu chunks", l->n + 1);
        l->v = g;
    }
    e = &l->v[l->n++];
    memcpy(e->key, k->mv_data, EM_CHUNK_KEY_LEN);
    e->len = d->mv_size;
    e->crc = em_get_le32((const uint8_t *)d->mv_data + 8);
    e->straddles = straddles;
    return EMBER_OK;
}

/* Adds to G the profiles in [W0, W1) of one stored chunk, noting it. */
static int window_chunk(cut *c, gather *g, const MDB_val *k,
                        const MDB_val *d, int64_t w0, int64_t w1,
                        em_cut_list *read)
{
    em_chunk ch;
    em_chunk_profile *tp = NULL;
    int rc = em_chunk_decode(c->codec, d->mv_data, d->mv_size, EM_COL_ALL,
                             &ch);

    if (rc != EMBER_OK)
        return rc;
    rc = em_chunk_transpose(&ch, &tp);
    for (uint32_t i = 0; i < ch.h.nprofiles && rc == EMBER_OK; i++)
        if (tp[i].time_ms >= w0 && tp[i].time_ms < w1)
            rc = gather_add(c, g, &tp[i]);
    if (rc == EMBER_OK)
        rc = note_read(read, k, d, ch.h.max_time >= c->o->cut);
    em_free(tp);
    em_chunk_release(&ch);
    return rc;
}

typedef struct window_walk {
    cut *c;
    gather *g;
    int64_t w0, w1;
    em_cut_list *read;
} window_walk;

/* The sealed chunks reaching into [w0, w1) go to the window's profiles. */
static int window_one(void *ctx, const MDB_val *k, const MDB_val *d)
{
    window_walk *w = ctx;
    em_chunk_header h;
    int rc = em_chunk_header_read(d->mv_data, d->mv_size, &h);

    if (rc == EMBER_OK && !(h.flags & EM_CHUNK_HEAD) && h.max_time >= w->w0)
        rc = window_chunk(w->c, w->g, k, d, w->w0, w->w1, w->read);
    return rc;
}

/* Gathers head series SERIES's profiles in [W0, W1) and writes them. */
static int window_series(cut *c, gather *g, uint32_t series, int64_t w0,
                         int64_t w1, em_cut_list *read)
{
    window_walk w = { c, g, w0, w1, read };
    uint32_t bs;
    int rc = em_head_chunks(c->r, series, w0, w1 - 1, window_one, &w);

    if (rc == EMBER_OK && g->n > 0 &&
        (rc = map_series(c, series, &bs)) == EMBER_OK)
        rc = gather_flush(c, g, bs);
    gather_clear(g);
    return rc;
}

int em_cut_window(em_rtxn *r, const em_compact_opts *o, int64_t w0,
                  uint64_t block_id, em_cut_list *read, em_block_info *out)
{
    char name[64];
    gather g = { 0 };
    cut c = { r, NULL, { { 0 } }, NULL, o };
    int64_t w1 = w0 + o->block_ms < o->cut ? w0 + o->block_ms : o->cut;
    em_block_info info = { .id = block_id, .level = 0 };
    int rc;

    snprintf(name, sizeof name, "%016llx.block",
             (unsigned long long)block_id);
    rc = idmap_init(&c.map, r);
    if (rc == EMBER_OK)
        rc = em_codec_new(&c.codec);
    if (rc == EMBER_OK)
        rc = em_bbuild_new(o->blocks_dir, name, o->cut_zstd_level, &c.b);
    for (uint32_t s = 0; s < r->next[EM_T_SERIES] && rc == EMBER_OK; s++)
        rc = window_series(&c, &g, s, w0, w1, read);
    if (rc == EMBER_OK)
        rc = em_bbuild_finish(c.b, &info, out);
    em_bbuild_free(c.b);
    em_codec_free(c.codec);
    gather_free(&g);
    idmap_free(&c.map);
    return rc;
}
