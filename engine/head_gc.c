/*
** engine/head_gc.c: the head rebuilt with only what its chunks name. Once
** compaction has moved old profiles into blocks, the head's tables still
** hold every stack, location, function, mapping, string and series those
** profiles named, and its postings still list them. Nothing is removed
** record by record (ids would be sparse, and every array indexed by id
** would grow with history): the head is rebuilt, in one write transaction,
** with its live records renumbered densely from 0, in the order of the
** old ids, and its chunks and head summaries rewritten under the new ids.
** Snapshots older than the commit keep reading the old tables (LMDB's
** MVCC); newer ones see the new. The meta counter head_gen goes up, so
** that caches keyed by head ids (the writer's intern cache in every
** process, the focus sets) know theirs are stale.
**
** Cost: the remaining head is read whole into memory (decoded chunks and
** the live records) and written again; the old tables are dropped page by
** page. Both grow with the head, not with the database.
*/
#include <stdio.h>
#include <stdlib.h>

#include "engine/compact.h"

/* A live head chunk, decoded, waiting to be written again. */
typedef struct gc_chunk {
    uint32_t series;
    uint8_t flags;
    em_chunk_profile *p;            /* transposed (one allocation) */
    uint32_t np;
} gc_chunk;

typedef struct gc_head {
    uint32_t series;
    em_head h;
} gc_head;

typedef struct gc {
    em_wtxn *w;
    uint32_t old[EM_T_COUNT];       /* table sizes before */
    uint32_t *map[EM_T_COUNT];      /* old id -> new id, UINT32_MAX: dead */
    gc_chunk *ch;
    size_t nch, capch;
    gc_head *heads;
    size_t nheads, capheads;
} gc;

static void gc_free(gc *g)
{
    for (int t = 0; t < EM_T_COUNT; t++)
        em_free(g->map[t]);
    for (size_t i = 0; i < g->nch; i++)
        em_free(g->ch[i].p);
    em_free(g->ch);
    em_free(g->heads);
}

/* ---- what is live ---------------------------------------------------------------- */

static int gc_take_chunk(gc *g, const MDB_val *k, const MDB_val *d)
{
    em_chunk c;
    em_chunk_profile *tp = NULL;
    uint32_t series, seq;
    int64_t t;
    int rc;

    if (k->mv_size != EM_CHUNK_KEY_LEN)
        return EM_CORRUPT("chunk key of %zu bytes", k->mv_size);
    em_chunk_key_parse(k->mv_data, &series, &t, &seq);
    if (series >= g->old[EM_T_SERIES])
        return EM_CORRUPT("chunk of series %u past the table", series);
    if (g->nch == g->capch) {
        gc_chunk *n = em_grow(g->ch, &g->capch, g->nch + 1, sizeof *n);
        if (n == NULL)
            return em_err(EMBER_ENOMEM, "head gc: %zu chunks", g->nch + 1);
        g->ch = n;
    }
    rc = em_chunk_decode(g->w->db->wcodec, d->mv_data, d->mv_size,
                         EM_COL_ALL, &c);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "chunk (series %u, t=%lld)", series,
                             (long long)t);
    for (uint32_t i = 0; i < c.h.nstacks; i++)
        if (c.stacks[i] >= g->old[EM_T_STACK])
            rc = EM_CORRUPT("chunk (series %u): stack %u past the table",
                            series, c.stacks[i]);
        else
            g->map[EM_T_STACK][c.stacks[i]] = 0;
    if (rc == EMBER_OK)
        rc = em_chunk_transpose(&c, &tp);
    if (rc == EMBER_OK) {
        g->ch[g->nch++] = (gc_chunk){ series, c.h.flags, tp, c.h.nprofiles };
        g->map[EM_T_SERIES][series] = 0;
    }
    em_chunk_release(&c);
    return rc;
}

static int gc_scan(gc *g, int dbi, bool chunks)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int rc = EMBER_OK;
    int mrc = mdb_cursor_open(g->w->txn, g->w->db->dbi[dbi], &cur);

    for (mrc = mrc ? mrc : em_val_cursor(g->w->db, dbi, cur, &k, &d,
                                         MDB_FIRST, &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(g->w->db, dbi, cur, &k, &d, MDB_NEXT, &rc)) {
        gc_head *h;
        if (chunks) {
            rc = gc_take_chunk(g, &k, &d);
            continue;
        }
        if (k.mv_size != sizeof(uint32_t) || d.mv_size != sizeof(em_head)) {
            rc = EM_CORRUPT("head table: entry of %zu/%zu bytes", k.mv_size,
                            d.mv_size);
            break;
        }
        if (g->nheads == g->capheads) {
            h = em_grow(g->heads, &g->capheads, g->nheads + 1, sizeof *h);
            if (h == NULL) {
                rc = em_err(EMBER_ENOMEM, "head gc: heads");
                break;
            }
            g->heads = h;
        }
        h = &g->heads[g->nheads++];
        memcpy(&h->series, k.mv_data, sizeof h->series);
        memcpy(&h->h, d.mv_data, sizeof h->h);
        if (h->series >= g->old[EM_T_SERIES])
            rc = EM_CORRUPT("head of series %u past the table", h->series);
        else
            g->map[EM_T_SERIES][h->series] = 0;
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "head gc: scan");
    return rc;
}

/* ---- the rebuild: live records, interned again in old-id order -------------- */

static int gc_rec(gc *g, int table, uint32_t id, const uint8_t **p,
                  size_t *len)
{
    int rc = em_table_get(g->w->txn, g->w->db, table, id, p, len);

    if (rc == EMBER_ENOTFOUND)
        rc = EM_CORRUPT("%s %u is missing", em_table_names[table], id);
    return rc;
}

/* The rebuild reads the old records through a copy taken before the drop:
** LMDB frees the dropped pages in the same transaction. */
typedef struct oldrecs {
    uint8_t **rec[EM_T_COUNT];      /* old id -> copy of its record */
    size_t *len[EM_T_COUNT];
} oldrecs;

static void oldrecs_free(oldrecs *o, const uint32_t old[EM_T_COUNT])
{
    for (int t = 0; t < EM_T_COUNT; t++) {
        for (uint32_t i = 0; o->rec[t] != NULL && i < old[t]; i++)
            em_free(o->rec[t][i]);
        em_free(o->rec[t]);
        em_free(o->len[t]);
    }
}

/* Marks what the live stacks and series name, table by table downwards,
** copying each live record. */
static int gc_mark_copy(gc *g, oldrecs *o, int table, uint32_t id);

static int gc_mark(gc *g, oldrecs *o, int table, uint32_t id)
{
    if (id >= g->old[table])
        return EM_CORRUPT("%s %u past the table", em_table_names[table], id);
    if (o->rec[table][id] != NULL)
        return EMBER_OK;
    return gc_mark_copy(g, o, table, id);
}

static int gc_mark_refs(gc *g, oldrecs *o, int table, const uint8_t *p,
                        size_t len)
{
    uint32_t ids[EM_MAX_LINES > 2 * EM_MAX_LABELS + 1 ? EM_MAX_LINES
                                                      : 2 * EM_MAX_LABELS + 1];
    int64_t lines[EM_MAX_LINES], start;
    uint64_t f[3], addr;
    uint32_t a, b, s[3];
    em_series_rec sr;
    size_t n = 0;
    int rc = EMBER_OK;

    switch (table) {
    case EM_T_MAPPING:
        if ((rc = em_mapping_decode(p, len, f, &a, &b)) == EMBER_OK &&
            (rc = gc_mark(g, o, EM_T_STRING, a)) == EMBER_OK)
            rc = gc_mark(g, o, EM_T_STRING, b);
        return rc;
    case EM_T_FUNCTION:
        rc = em_function_decode(p, len, s, &start);
        for (int i = 0; i < 3 && rc == EMBER_OK; i++)
            rc = gc_mark(g, o, EM_T_STRING, s[i]);
        return rc;
    case EM_T_LOCATION:
        rc = em_location_decode(p, len, &a, &addr, ids, lines, EM_MAX_LINES,
                                &n);
        if (rc == EMBER_OK)
            rc = gc_mark(g, o, EM_T_MAPPING, a);
        for (size_t i = 0; i < n && rc == EMBER_OK; i++)
            rc = gc_mark(g, o, EM_T_FUNCTION, ids[i]);
        return rc;
    case EM_T_SERIES:
        rc = em_series_decode(p, len, &sr);
        if (rc == EMBER_OK)
            rc = gc_mark(g, o, EM_T_STRING, sr.type);
        for (uint32_t i = 0; i < sr.nlabels && rc == EMBER_OK; i++)
            if ((rc = gc_mark(g, o, EM_T_STRING, sr.names[i])) == EMBER_OK)
                rc = gc_mark(g, o, EM_T_STRING, sr.values[i]);
        return rc;
    default:
        return EMBER_OK;
    }
}

static int gc_mark_copy(gc *g, oldrecs *o, int table, uint32_t id)
{
    const uint8_t *p;
    size_t len;
    int rc = gc_rec(g, table, id, &p, &len);

    if (rc != EMBER_OK)
        return rc;
    if ((o->rec[table][id] = em_malloc(len + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "head gc: a record of %zu bytes", len);
    memcpy(o->rec[table][id], p, len);
    o->rec[table][id][len] = 0;     /* strings are C strings again */
    o->len[table][id] = len;
    if (table == EM_T_STACK) {
        uint32_t *locs = NULL;
        uint64_t depth = 0;
        const uint8_t *q = p;
        size_t n = 0;
        if (em_varint_get(&q, p + len, &depth) != 0 || depth > len)
            return EM_CORRUPT("stack %u does not decode", id);
        if ((locs = em_malloc((size_t)depth * sizeof *locs + 1)) == NULL)
            return em_err(EMBER_ENOMEM, "head gc: stack");
        rc = em_stack_decode(p, len, locs, (size_t)depth, &n);
        for (size_t i = 0; i < n && rc == EMBER_OK; i++)
            rc = gc_mark(g, o, EM_T_LOCATION, locs[i]);
        em_free(locs);
        return rc;
    }
    return gc_mark_refs(g, o, table, p, len);
}

static int gc_copy_live(gc *g, oldrecs *o, bool *all_live)
{
    int rc = EMBER_OK;

    for (int t = 0; t < EM_T_COUNT; t++) {
        o->rec[t] = em_calloc((size_t)g->old[t] + 1, sizeof *o->rec[t]);
        o->len[t] = em_calloc((size_t)g->old[t] + 1, sizeof *o->len[t]);
        if (o->rec[t] == NULL || o->len[t] == NULL)
            return em_err(EMBER_ENOMEM, "head gc: %u %s", g->old[t],
                          em_table_names[t]);
    }
    /* what a new database holds from the start stays */
    if (g->old[EM_T_STRING] > 0)
        rc = gc_mark(g, o, EM_T_STRING, 0);
    if (rc == EMBER_OK && g->old[EM_T_MAPPING] > 0)
        rc = gc_mark(g, o, EM_T_MAPPING, 0);
    for (int t = EM_T_STACK; t <= EM_T_SERIES && rc == EMBER_OK; t++)
        for (uint32_t i = 0; i < g->old[t] && rc == EMBER_OK; i++)
            if (g->map[t][i] == 0)
                rc = gc_mark(g, o, t, i);
    *all_live = true;
    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK; t++)
        for (uint32_t i = 0; i < g->old[t]; i++)
            if (o->rec[t][i] == NULL)
                *all_live = false;
    return rc;
}

static int gc_drop(gc *g)
{
    static const int dbis[] = { EM_T_STRING, EM_T_MAPPING, EM_T_FUNCTION,
                                EM_T_LOCATION, EM_T_STACK, EM_T_SERIES,
                                EM_T_COUNT + EM_T_STRING,
                                EM_T_COUNT + EM_T_MAPPING,
                                EM_T_COUNT + EM_T_FUNCTION,
                                EM_T_COUNT + EM_T_LOCATION,
                                EM_T_COUNT + EM_T_STACK,
                                EM_T_COUNT + EM_T_SERIES, EM_D_POST,
                                EM_D_FPOST, EM_D_CHUNK, EM_D_HEAD };
    int rc = EMBER_OK;

    for (size_t i = 0; i < EM_ARRAY_LEN(dbis) && rc == EMBER_OK; i++)
        rc = em_lmdb(mdb_drop(g->w->txn, g->w->db->dbi[dbis[i]], 0),
                     em_dbi_names[dbis[i]]);
    memset(g->w->c.next, 0, sizeof g->w->c.next);
    g->w->c.chunk_bytes = 0;
    return rc;
}

static uint32_t nid(const gc *g, int table, uint32_t old)
{
    return g->map[table][old];
}

/* Interns old record ID of TABLE (a copy in O) with its ids renumbered. */
static int gc_intern(gc *g, const oldrecs *o, int table, uint32_t id,
                     uint32_t *out)
{
    const uint8_t *p = o->rec[table][id];
    size_t len = o->len[table][id], n = 0;
    ember_line lines[EM_MAX_LINES];
    uint32_t ids[EM_MAX_LINES], a, b, s[3];
    int64_t ln[EM_MAX_LINES], start;
    uint64_t f[3], addr;
    int rc = EMBER_OK;

    switch (table) {
    case EM_T_STRING:
        return em_intern_str(g->w, (const char *)p, len, out);
    case EM_T_MAPPING:
        rc = em_mapping_decode(p, len, f, &a, &b);
        return rc != EMBER_OK ? rc :
               em_mapping_intern(g->w, f[0], f[1], f[2],
                                 nid(g, EM_T_STRING, a),
                                 nid(g, EM_T_STRING, b), out);
    case EM_T_FUNCTION:
        if ((rc = em_function_decode(p, len, s, &start)) != EMBER_OK)
            return rc;
        for (int i = 0; i < 3; i++)
            s[i] = nid(g, EM_T_STRING, s[i]);
        return em_function_intern(g->w, s, start, out);
    case EM_T_LOCATION: {
        rc = em_location_decode(p, len, &a, &addr, ids, ln, EM_MAX_LINES,
                                &n);
        ember_location l = { nid(g, EM_T_MAPPING, a), addr, lines, n };
        for (size_t i = 0; i < n; i++)
            lines[i] = (ember_line){ nid(g, EM_T_FUNCTION, ids[i]), ln[i] };
        return rc != EMBER_OK ? rc : em_location_intern(g->w, &l, out);
    }
    default:
        return EMBER_OK;
    }
}

static int gc_stack(gc *g, const oldrecs *o, uint32_t id, uint32_t *out)
{
    const uint8_t *p = o->rec[EM_T_STACK][id], *q = p;
    size_t len = o->len[EM_T_STACK][id], n = 0;
    uint64_t depth = 0;
    uint32_t *locs;
    int rc;

    if (em_varint_get(&q, p + len, &depth) != 0 || depth > len)
        return EM_CORRUPT("stack %u does not decode", id);
    if ((locs = em_malloc((size_t)depth * sizeof *locs + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "head gc: stack");
    rc = em_stack_decode(p, len, locs, (size_t)depth, &n);
    for (size_t i = 0; i < n; i++)
        locs[i] = nid(g, EM_T_LOCATION, locs[i]);
    if (rc == EMBER_OK)
        rc = em_stack_intern(g->w, locs, n, out);
    em_free(locs);
    return rc;
}

static int gc_series(gc *g, const oldrecs *o, uint32_t id, uint32_t *out)
{
    const uint8_t *const *str = (const uint8_t *const *)o->rec[EM_T_STRING];
    ember_label l[EM_MAX_LABELS];
    em_series_rec s;
    int rc = em_series_decode(o->rec[EM_T_SERIES][id],
                              o->len[EM_T_SERIES][id], &s);

    if (rc != EMBER_OK)
        return rc;
    for (uint32_t i = 0; i < s.nlabels; i++)
        l[i] = (ember_label){ (const char *)str[s.names[i]],
                              (const char *)str[s.values[i]] };
    return em_series_intern(g->w, (const char *)str[s.type], l, s.nlabels,
                            out);
}

/* Interns every live record again, table by table in old-id order. */
static int gc_reintern(gc *g, const oldrecs *o)
{
    int rc = EMBER_OK;

    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK; t++)
        for (uint32_t i = 0; i < g->old[t] && rc == EMBER_OK; i++) {
            uint32_t id = UINT32_MAX;
            if (o->rec[t][i] == NULL)
                continue;
            rc = t == EM_T_STACK ? gc_stack(g, o, i, &id)
                 : t == EM_T_SERIES ? gc_series(g, o, i, &id)
                 : gc_intern(g, o, t, i, &id);
            g->map[t][i] = id;
            if (rc != EMBER_OK)
                em_err_prefix(rc, "head gc: %s %u", em_table_names[t], i);
        }
    return rc;
}

typedef struct gc_pair {
    uint32_t st;
    int64_t v;
} gc_pair;

static int gc_pair_cmp(const void *a, const void *b)
{
    uint32_t x = ((const gc_pair *)a)->st, y = ((const gc_pair *)b)->st;
    return (x > y) - (x < y);
}

/* Writes chunk C again, its stacks and series renumbered. */
static int gc_rechunk(gc *g, gc_chunk *c)
{
    em_wtxn *w = g->w;
    int rc = EMBER_OK;

    for (uint32_t i = 0; i < c->np && rc == EMBER_OK; i++) {
        em_chunk_profile *p = &c->p[i];
        gc_pair *t = em_malloc((size_t)p->n * sizeof *t + 1);
        if (t == NULL)
            return em_err(EMBER_ENOMEM, "head gc: profile");
        for (uint32_t k = 0; k < p->n; k++)
            t[k] = (gc_pair){ nid(g, EM_T_STACK, p->stacks[k]),
                              p->values[k] };
        qsort(t, p->n, sizeof *t, gc_pair_cmp);
        /* the profile's arrays are the transposition's own: rewrite them */
        for (uint32_t k = 0; k < p->n; k++) {
            ((uint32_t *)p->stacks)[k] = t[k].st;
            ((int64_t *)p->values)[k] = t[k].v;
        }
        em_free(t);
    }
    w->chunk.len = 0;
    rc = em_chunk_encode(w->db->wcodec, c->p, c->np, c->flags,
                         c->flags & EM_CHUNK_HEAD ? 1
                                                  : w->db->opts.zstd_level,
                         &w->chunk);
    if (rc == EMBER_OK)
        rc = em_chunk_store(w, nid(g, EM_T_SERIES, c->series));
    return rc;
}

static int gc_rewrite(gc *g)
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < g->nch && rc == EMBER_OK; i++)
        rc = gc_rechunk(g, &g->ch[i]);
    for (size_t i = 0; i < g->nheads && rc == EMBER_OK; i++) {
        uint32_t s = nid(g, EM_T_SERIES, g->heads[i].series);
        MDB_val k = { sizeof s, &s }, d = { sizeof g->heads[i].h,
                                             &g->heads[i].h };
        rc = em_lmdb(em_val_put(g->w->txn, g->w->db, EM_D_HEAD, &k, d.mv_data,
                                d.mv_size, 0), "head gc: head put");
    }
    return rc;
}

/* Public ids move past every id handed out before, so that an id kept
** across the rebuild is refused rather than read as another record; far
** enough along (2^31) they start from 0 again. */
static int gc_bases(gc *g)
{
    int rc = EMBER_OK;

    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK; t++) {
        char key[32];
        uint64_t b = (uint64_t)g->w->c.base[t] + g->old[t];
        if (b + g->w->c.next[t] > (1ull << 31))
            b = 0;
        g->w->c.base[t] = (uint32_t)b;
        snprintf(key, sizeof key, "id_base_%s", em_table_names[t]);
        rc = em_meta_put_u64(g->w->txn, g->w->db, key, b);
    }
    return rc;
}

static int gc_run(gc *g, uint64_t *dropped)
{
    oldrecs o;
    bool all_live = false;
    uint64_t gen = 0;
    int rc = EMBER_OK;

    memset(&o, 0, sizeof o);
    memcpy(g->old, g->w->c.next, sizeof g->old);
    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK; t++) {
        g->map[t] = em_malloc(((size_t)g->old[t] + 1) * sizeof *g->map[t]);
        if (g->map[t] == NULL)
            rc = em_err(EMBER_ENOMEM, "head gc: %u %s", g->old[t],
                        em_table_names[t]);
        else
            memset(g->map[t], 0xff, ((size_t)g->old[t] + 1) *
                   sizeof *g->map[t]);
    }
    if (rc == EMBER_OK)
        rc = gc_scan(g, EM_D_CHUNK, true);
    if (rc == EMBER_OK)
        rc = gc_scan(g, EM_D_HEAD, false);
    if (rc == EMBER_OK)
        rc = gc_copy_live(g, &o, &all_live);
    for (int t = 0; rc == EMBER_OK && !all_live && t < EM_T_COUNT; t++)
        for (uint32_t i = 0; i < g->old[t]; i++)
            *dropped += o.rec[t][i] == NULL;
    if (rc == EMBER_OK && !all_live) {
        em_icache_clear(&g->w->db->icache);
        rc = gc_drop(g);
        if (rc == EMBER_OK)
            rc = gc_reintern(g, &o);
        if (rc == EMBER_OK)
            rc = gc_rewrite(g);
        if (rc == EMBER_OK)
            rc = gc_bases(g);
        if (rc == EMBER_OK)
            rc = em_meta_get_u64(g->w->txn, g->w->db, "head_gen", &gen);
        if (rc == EMBER_OK)
            rc = em_meta_put_u64(g->w->txn, g->w->db, "head_gen", gen + 1);
    }
    oldrecs_free(&o, g->old);
    return rc == EMBER_OK && all_live ? EMBER_DONE : rc;
}

int em_head_gc(ember_db *db, uint64_t *dropped)
{
    em_wtxn w;
    int rc;

    *dropped = 0;
    pthread_mutex_lock(&db->wlock);
    for (;;) {
        gc g = { .w = &w };
        *dropped = 0;
        rc = em_wtxn_begin(db, &w);
        if (rc == EMBER_OK)
            rc = gc_run(&g, dropped);
        if (rc == EMBER_OK) {
            rc = em_wtxn_commit(&w);
        } else if (w.txn != NULL) {
            em_wtxn_abort(&w);
        }
        gc_free(&g);
        if (rc == EMBER_DONE) {         /* everything was live */
            rc = EMBER_OK;
            break;
        }
        if (rc != EM_EMAPFULL || (rc = em_map_grow(db)) != EMBER_OK)
            break;
    }
    pthread_mutex_unlock(&db->wlock);
    return rc;
}
