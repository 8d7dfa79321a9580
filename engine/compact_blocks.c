/*
** engine/compact_blocks.c: what compaction does to blocks once they exist.
**
**   merge       the blocks of a whole merge window (a day by default, past
**               the cut) become one level-1 block; late data that landed
**               in a window already merged joins it at the next run;
**   downsample  each merged block gets a copy per configured resolution,
**               made from it (the catalog notes which: made_from), so
**               that a query may read the copy instead (engine/read.c);
**   retention   a block goes when its resolution's keep passes, and the
**               series a retention rule no longer keeps are dropped from
**               a block once the rule has passed the whole block (so data
**               goes up to a block's span late, and never in part).
**
** Every step writes its new blocks first (engine/rewrite.c), then commits
** them and the removal of what they replace in one write transaction, so
** a snapshot sees the old blocks or the new. A removed block's file stays
** until no reader could still open it: the commit notes its txn id under
** meta gone_ID, and the file goes once every reader is past it (here,
** right after the commit, or at the next sweep).
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/compact.h"

/* The catalog as a list. */
typedef struct cat {
    em_catalog_rec *v;
    size_t n, cap;
} cat;

static int cat_add(void *ctx, const em_catalog_rec *rec)
{
    cat *c = ctx;

    if (c->n == c->cap) {
        em_catalog_rec *g = em_grow(c->v, &c->cap, c->n + 1, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "catalog: %zu blocks", c->n + 1);
        c->v = g;
    }
    c->v[c->n++] = *rec;
    return EMBER_OK;
}

static int cat_read(em_cjob *j, cat *c, uint64_t *seq)
{
    em_rtxn r;
    int rc = em_rtxn_begin_head(j->db, &r);

    memset(c, 0, sizeof *c);
    if (rc == EMBER_OK && seq != NULL)
        rc = em_meta_get_u64(r.txn, j->db, "block_seq", seq);
    if (rc == EMBER_OK)
        rc = em_catalog_walk(r.txn, j->db, cat_add, c);
    em_rtxn_end(&r);
    return rc;
}

static const em_catalog_rec *cat_find(const cat *c, uint64_t id)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == id)
            return &c->v[i];
    return NULL;
}

/* ---- removing files ------------------------------------------------------------- */

static void gone_key(char *key, size_t n, uint64_t id)
{
    snprintf(key, n, "gone_%016llx", (unsigned long long)id);
}

static void block_unlink(em_cjob *j, uint64_t id)
{
    char path[4400];

    em_block_path(j->db, id, path, sizeof path);
    unlink(path);
}

/* The ids of meta's gone_ keys whose commit every reader is past. */
static int gone_ready(em_cjob *j, uint64_t **ids, size_t *n)
{
    MDB_val k = { 5, (void *)"gone_" }, d;
    MDB_cursor *cur = NULL;
    uint64_t oldest;
    size_t cap = 0;
    em_rtxn r;
    int mrc, rc = em_readers_oldest(j->db, &oldest);

    *ids = NULL;
    *n = 0;
    if (rc == EMBER_OK)
        rc = em_rtxn_begin_head(j->db, &r);
    if (rc != EMBER_OK)
        return rc;
    mrc = mdb_cursor_open(r.txn, j->db->dbi[EM_D_META], &cur);
    for (mrc = mrc ? mrc : em_val_cursor(j->db, EM_D_META, cur, &k, &d,
                                         MDB_SET_RANGE, &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK && k.mv_size == 21 &&
         memcmp(k.mv_data, "gone_", 5) == 0;
         mrc = em_val_cursor(j->db, EM_D_META, cur, &k, &d, MDB_NEXT,
                             &rc)) {
        char hex[17];
        uint64_t t;
        if (d.mv_size != sizeof t)
            break;
        memcpy(&t, d.mv_data, sizeof t);
        memcpy(hex, (const char *)k.mv_data + 5, 16);
        hex[16] = '\0';
        if (oldest != UINT64_MAX && oldest < t)
            continue;               /* a reader may still open it */
        uint64_t *g = em_grow(*ids, &cap, *n + 1, sizeof *g);
        if (g == NULL) {
            rc = em_err(EMBER_ENOMEM, "compact: removed blocks");
            break;
        }
        *ids = g;
        (*ids)[(*n)++] = strtoull(hex, NULL, 16);
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    em_rtxn_end(&r);
    return rc;
}

typedef struct gone_ctx {
    const uint64_t *ids;
    size_t n;
} gone_ctx;

static int gone_txn(em_wtxn *w, void *ctx)
{
    gone_ctx *g = ctx;
    int rc = EMBER_OK;

    for (size_t i = 0; i < g->n && rc == EMBER_OK; i++) {
        char key[32];
        MDB_val k = { 21, key };
        gone_key(key, sizeof key, g->ids[i]);
        rc = em_lmdb(mdb_del(w->txn, w->db->dbi[EM_D_META], &k, NULL),
                     "compact: gone key");
    }
    return rc;
}

/* Removes the files of dropped blocks no reader can open any more, then
** their gone_ keys. */
static int gone_remove(em_cjob *j)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    gone_ctx g;
    int rc = gone_ready(j, &ids, &n);

    if (rc != EMBER_OK || n == 0) {
        em_free(ids);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        block_unlink(j, ids[i]);
    g.ids = ids;
    g.n = n;
    rc = em_write_run(j->db, gone_txn, &g);
    em_free(ids);
    return rc;
}

/* Files of blocks no commit named (a compaction cut short), and temporary
** ones; a block file past block_seq is the database gone back in time. */
static int leftovers_remove(em_cjob *j)
{
    struct dirent *e;
    uint64_t seq = 0, id;
    bool tmp;
    cat c;
    DIR *d;
    int rc = cat_read(j, &c, &seq);

    if (rc == EMBER_OK && (d = opendir(j->blocks)) != NULL) {
        while (rc == EMBER_OK && (e = readdir(d)) != NULL) {
            char path[4400], key[32];
            uint64_t t;
            em_rtxn r;
            if (!em_block_file_id(e->d_name, &id, &tmp))
                continue;
            if (!tmp && id > seq) {
                rc = EM_CORRUPT("%s/%s: a block newer than every block this "
                                "database made (block_seq %llu): its "
                                "catalog went back in time", j->blocks,
                                e->d_name, (unsigned long long)seq);
                break;
            }
            if (!tmp && cat_find(&c, id) != NULL)
                continue;
            /* dropped by a commit: gone_remove decides when */
            gone_key(key, sizeof key, id);
            if ((rc = em_rtxn_begin_head(j->db, &r)) != EMBER_OK)
                break;
            rc = em_meta_get_u64(r.txn, j->db, key, &t);
            em_rtxn_end(&r);
            if (rc == EMBER_OK && (tmp || t == 0)) {
                snprintf(path, sizeof path, "%s/%s", j->blocks, e->d_name);
                unlink(path);
            }
        }
        closedir(d);
    }
    em_free(c.v);
    return rc;
}

int em_blocks_sweep(em_cjob *j)
{
    int rc = leftovers_remove(j);

    return rc == EMBER_OK ? gone_remove(j) : rc;
}

/* ---- committing ------------------------------------------------------------------- */

typedef struct commit_ctx {
    const em_block_info *add;
    const uint64_t *made, *del;
    size_t nadd, ndel;
} commit_ctx;

static int commit_txn(em_wtxn *w, void *ctx)
{
    commit_ctx *c = ctx;
    int rc = EMBER_OK;

    for (size_t i = 0; i < c->nadd && rc == EMBER_OK; i++)
        rc = em_catalog_put(w, &c->add[i], c->made[i]);
    for (size_t i = 0; i < c->ndel && rc == EMBER_OK; i++) {
        char key[32];
        gone_key(key, sizeof key, c->del[i]);
        rc = em_catalog_del(w, c->del[i]);
        if (rc == EMBER_OK)
            rc = em_meta_put_u64(w->txn, w->db, key, mdb_txn_id(w->txn));
    }
    return rc;
}

/* In one transaction: the blocks ADD (each made from MADE[i]) enter the
** catalog, the blocks DEL leave it (noted gone at this commit). */
static int blocks_commit(em_cjob *j, const em_block_info *add,
                         const uint64_t *made, size_t nadd,
                         const uint64_t *del, size_t ndel)
{
    commit_ctx c = { add, made, del, nadd, ndel };
    int rc = em_write_run(j->db, commit_txn, &c);

    if (rc == EMBER_OK)
        j->rep->blocks_removed += ndel;
    return rc == EMBER_OK ? gone_remove(j) : rc;
}

/* ---- catalog records of version 1 ------------------------------------------------- */

/* Each such record put again as version 2, all in one commit. */
int em_blocks_upgrade(em_cjob *j)
{
    struct {
        em_block_info *info;
        uint64_t *made;
        size_t n;
    } u = { 0 };
    cat c;
    int rc = cat_read(j, &c, NULL);

    if (rc == EMBER_OK && c.n > 0 &&
        ((u.info = em_calloc(c.n, sizeof *u.info)) == NULL ||
         (u.made = em_calloc(c.n, sizeof *u.made)) == NULL))
        rc = em_err(EMBER_ENOMEM, "compact: %zu catalog records", c.n);
    for (size_t i = 0; i < c.n && rc == EMBER_OK; i++) {
        char path[4400];
        em_block *b = NULL;
        if (c.v[i].sized)
            continue;
        em_block_path(j->db, c.v[i].id, path, sizeof path);
        rc = em_block_open(path, &b);
        if (rc == EMBER_OK && !em_catalog_agrees(&c.v[i], em_block_get_info(b),
                                                 true))
            rc = EM_CORRUPT("block %016llx: the file is not the block the "
                            "catalog names", (unsigned long long)c.v[i].id);
        if (rc == EMBER_OK) {
            u.info[u.n] = *em_block_get_info(b);
            u.made[u.n++] = c.v[i].made_from;
        }
        em_block_close(b);
        if (rc != EMBER_OK)
            em_err_prefix(rc, "compact: upgrading the catalog");
    }
    if (rc == EMBER_OK && u.n > 0) {
        commit_ctx put = { u.info, u.made, NULL, u.n, 0 };
        rc = em_write_run(j->db, commit_txn, &put);
    }
    em_free(u.info);
    em_free(u.made);
    em_free(c.v);
    return rc;
}

/* ---- one rewrite: blocks in, a block out ------------------------------------------ */

typedef struct opened {
    em_block **b;
    size_t n;
} opened;

static void opened_close(opened *o)
{
    for (size_t i = 0; i < o->n; i++)
        em_block_close(o->b[i]);
    em_free(o->b);
}

static int open_all(em_cjob *j, const uint64_t *ids, size_t n, opened *o)
{
    int rc = EMBER_OK;

    o->n = 0;
    if ((o->b = em_calloc(n + 1, sizeof *o->b)) == NULL)
        return em_err(EMBER_ENOMEM, "compact: %zu blocks", n);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        char path[4400];
        em_block_path(j->db, ids[i], path, sizeof path);
        if ((rc = em_block_open(path, &o->b[i])) == EMBER_OK) {
            em_block_will_scan(o->b[i]);
            o->n++;
        }
    }
    return rc;
}

/* Rewrites blocks IDS into a new block as RO says (its id is taken here),
** then commits it in their place, with DEL removed too; *WROTE 1 when a
** block came out (nothing kept: the inputs just go). MADE: what the new
** block downsamples (0: none). */
static int rewrite_commit(em_cjob *j, const uint64_t *ids, size_t n,
                          em_rewrite_opts *ro, uint64_t made,
                          const uint64_t *del, size_t ndel, uint64_t *wrote)
{
    opened o = { 0 };
    em_block_info out;
    int rc = em_cjob_ids(j, 1, &ro->id);

    if (rc == EMBER_OK)
        rc = open_all(j, ids, n, &o);
    ro->dir = j->blocks;
    ro->zstd_level = ro->level == 0 ? j->o.cut_zstd_level : j->o.zstd_level;
    if (rc == EMBER_OK)
        rc = em_rewrite(o.b, o.n, ro, &out);
    opened_close(&o);
    if (rc == EMBER_OK && out.nseries == 0) {
        block_unlink(j, ro->id);
        return blocks_commit(j, NULL, NULL, 0, del, ndel);
    }
    if (rc == EMBER_OK)
        rc = blocks_commit(j, &out, &made, 1, del, ndel);
    if (rc != EMBER_OK)
        block_unlink(j, ro->id);
    else
        (*wrote)++;
    return rc;
}

static int64_t floor_to(int64_t t, int64_t span)
{
    return (t / span - (t % span < 0)) * span;
}

/* The blocks made from any of IDS, appended to OUT. */
static int derived_of(const cat *c, const uint64_t *ids, size_t n,
                      uint64_t **out, size_t *nout, size_t *cap)
{
    for (size_t i = 0; i < c->n; i++)
        for (size_t k = 0; k < n; k++)
            if (c->v[i].made_from == ids[k]) {
                uint64_t *g = em_grow(*out, cap, *nout + 1, sizeof *g);
                if (g == NULL)
                    return em_err(EMBER_ENOMEM, "compact: blocks");
                *out = g;
                (*out)[(*nout)++] = c->v[i].id;
            }
    return EMBER_OK;
}

/* ---- merge ---------------------------------------------------------------------------- */

/* Merges the raw blocks of the merge window starting at W0, when it is
** whole and holds more than one block or a level-0 one. */
static int merge_window(em_cjob *j, const cat *c, int64_t w0, uint64_t *n)
{
    int64_t w1 = w0 + j->o.merge_ms;
    uint64_t *ids = NULL, *del = NULL;
    size_t k = 0, nd = 0, cap = 0, capd = 0;
    bool level0 = false;
    int rc = EMBER_OK;

    for (size_t i = 0; i < c->n && rc == EMBER_OK; i++) {
        const em_catalog_rec *b = &c->v[i];
        if (b->resolution_ms != 0 || b->min_time < w0 || b->max_time >= w1)
            continue;
        uint64_t *g = em_grow(ids, &cap, k + 1, sizeof *g);
        if (g == NULL) {
            rc = em_err(EMBER_ENOMEM, "compact: blocks");
            break;
        }
        ids = g;
        ids[k++] = b->id;
        level0 |= b->level == 0;
    }
    if (rc == EMBER_OK && (k > 1 || level0)) {
        em_rewrite_opts ro = { .level = 1, .from = INT64_MIN,
                               .to = INT64_MAX };
        rc = derived_of(c, ids, k, &del, &nd, &capd);
        for (size_t i = 0; i < k && rc == EMBER_OK; i++) {
            uint64_t *g = em_grow(del, &capd, nd + 1, sizeof *g);
            if (g == NULL)
                rc = em_err(EMBER_ENOMEM, "compact: blocks");
            else
                (del = g)[nd++] = ids[i];
        }
        if (rc == EMBER_OK)
            rc = rewrite_commit(j, ids, k, &ro, 0, del, nd, n);
    }
    em_free(ids);
    em_free(del);
    return rc;
}

int em_blocks_merge(em_cjob *j, uint64_t *n)
{
    cat c;
    int rc = cat_read(j, &c, NULL);
    int64_t done = INT64_MIN;

    *n = 0;
    /* windows by the raw blocks' starts, each once, whole ones only */
    for (size_t i = 0; i < c.n && rc == EMBER_OK; i++) {
        int64_t w0 = floor_to(c.v[i].min_time, j->o.merge_ms);
        if (c.v[i].resolution_ms != 0 || w0 + j->o.merge_ms > j->o.cut ||
            w0 == done)
            continue;
        bool seen = false;
        for (size_t k = 0; k < i; k++)
            seen |= c.v[k].resolution_ms == 0 &&
                    floor_to(c.v[k].min_time, j->o.merge_ms) == w0;
        if (seen)
            continue;
        done = w0;
        em_cjob_progress(j, "merge", i, c.n);
        if (!j->in_dry)
            rc = merge_window(j, &c, w0, n);
        else
            (*n)++;
    }
    em_free(c.v);
    return rc;
}

/* ---- downsample ------------------------------------------------------------------------- */

static bool has_copy(const cat *c, uint64_t id, int64_t res)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].made_from == id && c->v[i].resolution_ms == res)
            return true;
    return false;
}

int em_blocks_downsample(em_cjob *j, uint64_t *n)
{
    cat c;
    int rc = cat_read(j, &c, NULL);

    *n = 0;
    for (size_t i = 0; i < c.n && rc == EMBER_OK; i++) {
        const em_catalog_rec *b = &c.v[i];
        if (b->resolution_ms != 0 || b->level == 0)
            continue;
        for (size_t r = 0; r < j->o.nres && rc == EMBER_OK; r++) {
            int64_t res = j->o.res[r].resolution_ms;
            em_rewrite_opts ro = { .level = b->level, .resolution_ms = res,
                                   .from = INT64_MIN, .to = INT64_MAX };
            if (res <= 0 || has_copy(&c, b->id, res))
                continue;
            em_cjob_progress(j, "downsample", i, c.n);
            if (j->in_dry)
                (*n)++;
            else
                rc = rewrite_commit(j, &b->id, 1, &ro, b->id, NULL, 0, n);
        }
    }
    em_free(c.v);
    return rc;
}

/* ---- retention -------------------------------------------------------------------------- */

static bool glob_match(const char *p, const char *s)
{
    if (*p == '\0')
        return *s == '\0';
    if (*p == '*')
        return glob_match(p + 1, s) || (*s != '\0' && glob_match(p, s + 1));
    return *s == *p && glob_match(p + 1, s + 1);
}

/* Whether rule R (its regexes RX) selects the series TYPE, L. */
static bool rule_selects(const ember_retention *r, struct em_regex **rx,
                         const char *type, const ember_label *l, size_t n)
{
    if (r->type != NULL && !glob_match(r->type, type))
        return false;
    for (size_t m = 0; m < r->nmatchers; m++) {
        const ember_matcher *mt = &r->matchers[m];
        const char *v = "";
        bool yes;
        for (size_t i = 0; i < n; i++)
            if (strcmp(l[i].name, mt->name) == 0)
                v = l[i].value;
        if (mt->op == EMBER_MATCH_EQ || mt->op == EMBER_MATCH_NEQ)
            yes = strcmp(v, mt->value) == 0;
        else
            yes = em_regex_match(rx[m], v, strlen(v));
        if (yes != (mt->op == EMBER_MATCH_EQ || mt->op == EMBER_MATCH_RE))
            return false;
    }
    return true;
}

/* How long the series TYPE, L is kept: the first rule's keep; 0 forever. */
static int64_t keep_of(const em_compact_opts *o, const char *type,
                       const ember_label *l, size_t n)
{
    for (size_t i = 0; i < o->nretention; i++)
        if (rule_selects(&o->retention[i], o->rx[i], type, l, n))
            return o->retention[i].keep_ms;
    return 0;
}

typedef struct keepctx {
    const em_compact_opts *o;
    int64_t block_max;
    size_t dropped, kept;
} keepctx;

/* em_rewrite_opts.keep_from: a series goes from a block whole, once its
** rule has passed the block's newest profile. */
static int64_t keep_whole(void *ctx, const char *type,
                          const ember_label *l, size_t n)
{
    keepctx *k = ctx;
    int64_t keep = keep_of(k->o, type, l, n);

    if (keep > 0 && k->block_max < k->o->now - keep) {
        k->dropped++;
        return INT64_MAX;
    }
    k->kept++;
    return INT64_MIN;
}

/* The keep of block B's resolution (0: forever). */
static int64_t res_keep(const em_compact_opts *o, const em_catalog_rec *b)
{
    for (size_t i = 0; i < o->nres; i++)
        if (o->res[i].resolution_ms == b->resolution_ms)
            return o->res[i].keep_ms;
    return 0;
}

/* The shortest retention rule, 0 when there is none. */
static int64_t rule_min(const em_compact_opts *o)
{
    int64_t m = 0;

    for (size_t i = 0; i < o->nretention; i++)
        if (o->retention[i].keep_ms > 0 &&
            (m == 0 || o->retention[i].keep_ms < m))
            m = o->retention[i].keep_ms;
    return m;
}

/* Whether every series of block B goes, or some: counted through K by a
** pass over its series. */
static int block_series_kept(em_cjob *j, const em_catalog_rec *b,
                             keepctx *k)
{
    char path[4400];
    em_block *blk = NULL;
    const em_block_syms *y;
    int rc;

    em_block_path(j->db, b->id, path, sizeof path);
    rc = em_block_open(path, &blk);
    if (rc == EMBER_OK)                 /* labels alone: no stack tree */
        rc = em_block_names(blk, &y);
    for (uint32_t s = 0; rc == EMBER_OK && s < b->nseries; s++) {
        const em_bseries *se = &y->series[s];
        ember_label l[EM_MAX_LABELS];
        for (uint32_t i = 0; i < se->n && i < EM_MAX_LABELS; i++)
            l[i] = (ember_label){ y->str_bytes +
                                  y->str_off[y->label_names[se->first + i]],
                                  y->str_bytes +
                                  y->str_off[y->label_values[se->first + i]] };
        keep_whole(k, y->str_bytes + y->str_off[se->type], l, se->n);
    }
    em_block_close(blk);
    return rc;
}

static int retain_block(em_cjob *j, const cat *c, const em_catalog_rec *b,
                        uint64_t *n)
{
    int64_t keep = res_keep(&j->o, b), min = rule_min(&j->o);
    keepctx k = { &j->o, b->max_time, 0, 0 };
    em_rewrite_opts ro = { .level = b->level,
                           .resolution_ms = b->resolution_ms,
                           .from = INT64_MIN, .to = INT64_MAX,
                           .keep_from = keep_whole, .ctx = &k };
    int rc;

    uint64_t *del = NULL;
    size_t nd = 0, cap = 0;

    if (keep > 0 && b->max_time < j->o.now - keep)
        k.kept = 0;                 /* its resolution's time is up */
    else if (min == 0 || b->max_time >= j->o.now - min)
        return EMBER_OK;            /* no rule has passed the block */
    else if ((rc = block_series_kept(j, b, &k)) != EMBER_OK ||
             k.dropped == 0)
        return rc;
    if (j->in_dry) {
        (*n)++;
        return EMBER_OK;
    }
    /* a raw block's copies go with it: the downsample step makes them
    ** again from what is kept, so a family never holds two versions */
    rc = b->resolution_ms == 0 && k.kept > 0
         ? derived_of(c, &b->id, 1, &del, &nd, &cap) : EMBER_OK;
    if (rc == EMBER_OK && (del = em_grow(del, &cap, nd + 1, sizeof *del)))
        del[nd++] = b->id;
    else if (rc == EMBER_OK)
        rc = em_err(EMBER_ENOMEM, "compact: blocks");
    if (rc == EMBER_OK && k.kept == 0) {
        rc = blocks_commit(j, NULL, NULL, 0, del, nd);
        *n += rc == EMBER_OK;
    } else if (rc == EMBER_OK) {
        k.dropped = k.kept = 0;
        rc = rewrite_commit(j, &b->id, 1, &ro, b->made_from, del, nd, n);
    }
    em_free(del);
    return rc;
}

int em_blocks_retention(em_cjob *j, uint64_t *n)
{
    cat c;
    int rc = cat_read(j, &c, NULL);

    *n = 0;
    for (size_t i = 0; i < c.n && rc == EMBER_OK; i++) {
        em_cjob_progress(j, "retention", i, c.n);
        rc = retain_block(j, &c, &c.v[i], n);
    }
    em_free(c.v);
    return rc;
}
