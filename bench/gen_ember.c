/*
** bench/gen_ember.c: the generator's outputs: interning its symbols into an
** Ember database through the public API (whole pool at once, or per profile
** as an ingest pipeline does), and collapsed text ("root;...;leaf value").
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gen_int.h"

static int intern_mapping(gen *g, ember_txn *txn, uint32_t m, uint32_t *id)
{
    const gmap *gm = &g->maps[m];
    ember_mapping em = { gm->start, gm->limit, 0, gm->file, gm->build_id };
    return ember_intern_mapping(txn, &em, id);
}

static int intern_function(gen *g, ember_txn *txn, uint32_t f, uint32_t *id)
{
    const gfunc *gf = &g->funcs[f];
    ember_function ef = { gf->name, gf->name, gf->file, gf->line };
    return ember_intern_function(txn, &ef, id);
}

static int intern_location(ember_txn *txn, const gloc *l, uint32_t map_id,
                           uint32_t func_id, uint32_t *id)
{
    ember_line line = { func_id, l->line };
    ember_location el = { map_id, l->addr, &line, 1 };
    return ember_intern_location(txn, &el, id);
}

static int intern_stack(gen *g, ember_txn *txn, uint32_t s, const uint32_t *loc_ids,
                        uint32_t *id)
{
    uint32_t ids[GEN_WALK_MAX + 8];
    size_t n;
    const uint32_t *locs = gen_stack(g, s, &n);

    for (size_t k = 0; k < n; k++)
        ids[k] = loc_ids[locs[k]];
    return ember_intern_stack(txn, ids, n, id);
}

/* Runs FN over [0, n) in write transactions of BATCH items each. */
typedef int (*intern_fn)(gen *g, ember_txn *txn, uint32_t i);

static int in_batches(gen *g, ember_db *db, uint32_t n, size_t batch, intern_fn fn)
{
    for (uint32_t i = 0; i < n;) {
        ember_txn *txn = NULL;
        int rc = ember_txn_begin(db, &txn);
        for (size_t k = 0; rc == EMBER_OK && k < batch && i < n; k++, i++)
            rc = fn(g, txn, i);
        if (rc != EMBER_OK) {
            ember_txn_abort(txn);
            return rc;
        }
        rc = ember_txn_commit(txn);
        if (rc != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}

static int one_mapping(gen *g, ember_txn *txn, uint32_t i)
{
    return intern_mapping(g, txn, i, &g->em_map[i]);
}

static int one_function(gen *g, ember_txn *txn, uint32_t i)
{
    return intern_function(g, txn, i, &g->em_func[i]);
}

static int one_location(gen *g, ember_txn *txn, uint32_t i)
{
    const gloc *l = &g->locs[i];
    return intern_location(txn, l, g->em_map[l->mapping], g->em_func[l->func],
                           &g->em_loc[i]);
}

static int one_stack(gen *g, ember_txn *txn, uint32_t i)
{
    return intern_stack(g, txn, i, g->em_loc, &g->em_stack[i]);
}

int gen_intern_stacks(gen *g, ember_db *db, size_t batch)
{
    int rc;

    if (batch == 0)
        batch = 1000;
    free(g->em_map);
    free(g->em_func);
    free(g->em_loc);
    free(g->em_stack);
    g->em_map = gen_xcalloc(g->nmaps, sizeof *g->em_map);
    g->em_func = gen_xcalloc(g->nfuncs, sizeof *g->em_func);
    g->em_loc = gen_xcalloc(g->nlocs, sizeof *g->em_loc);
    g->em_stack = gen_xcalloc(g->nstacks, sizeof *g->em_stack);
    rc = in_batches(g, db, g->nmaps, batch, one_mapping);
    if (rc == EMBER_OK)
        rc = in_batches(g, db, g->nfuncs, batch, one_function);
    if (rc == EMBER_OK)
        rc = in_batches(g, db, g->nlocs, batch, one_location);
    if (rc == EMBER_OK)
        rc = in_batches(g, db, g->nstacks, batch, one_stack);
    if (rc == EMBER_OK)
        gen_set_stack_ids(g, g->em_stack);
    return rc;
}

const uint32_t *gen_stack_ids(const gen *g)
{
    return g->stack_map == g->em_stack ? g->em_stack : NULL;
}

/* ---- per-profile interning -------------------------------------------------- */

void gen_intern_reset(gen *g)
{
    if (g->c_loc_stamp == NULL) {
        g->c_map_stamp = gen_xcalloc(g->nmaps, sizeof *g->c_map_stamp);
        g->c_func_stamp = gen_xcalloc(g->nfuncs, sizeof *g->c_func_stamp);
        g->c_loc_stamp = gen_xcalloc(g->nlocs, sizeof *g->c_loc_stamp);
        g->c_map = gen_xcalloc(g->nmaps, sizeof *g->c_map);
        g->c_func = gen_xcalloc(g->nfuncs, sizeof *g->c_func);
        g->c_loc = gen_xcalloc(g->nlocs, sizeof *g->c_loc);
    }
    if (++g->c_stamp == 0) {
        memset(g->c_map_stamp, 0, g->nmaps * sizeof *g->c_map_stamp);
        memset(g->c_func_stamp, 0, g->nfuncs * sizeof *g->c_func_stamp);
        memset(g->c_loc_stamp, 0, g->nlocs * sizeof *g->c_loc_stamp);
        g->c_stamp = 1;
    }
}

static int cached_location(gen *g, ember_txn *txn, uint32_t l)
{
    const gloc *loc = &g->locs[l];
    int rc = EMBER_OK;

    if (g->c_loc_stamp[l] == g->c_stamp)
        return EMBER_OK;
    if (g->c_map_stamp[loc->mapping] != g->c_stamp) {
        rc = intern_mapping(g, txn, loc->mapping, &g->c_map[loc->mapping]);
        g->c_map_stamp[loc->mapping] = g->c_stamp;
    }
    if (rc == EMBER_OK && g->c_func_stamp[loc->func] != g->c_stamp) {
        rc = intern_function(g, txn, loc->func, &g->c_func[loc->func]);
        g->c_func_stamp[loc->func] = g->c_stamp;
    }
    if (rc == EMBER_OK)
        rc = intern_location(txn, loc, g->c_map[loc->mapping], g->c_func[loc->func],
                             &g->c_loc[l]);
    if (rc == EMBER_OK)
        g->c_loc_stamp[l] = g->c_stamp;
    return rc;
}

int gen_intern_one(gen *g, ember_txn *txn, uint32_t s, uint32_t *id)
{
    size_t n;
    const uint32_t *locs = gen_stack(g, s, &n);

    if (g->c_loc_stamp == NULL)
        gen_intern_reset(g);
    for (size_t k = 0; k < n; k++) {
        int rc = cached_location(g, txn, locs[k]);
        if (rc != EMBER_OK)
            return rc;
    }
    return intern_stack(g, txn, s, g->c_loc, id);
}

/* ---- collapsed text ----------------------------------------------------------- */

int gen_write_collapsed(const gen *g, const ember_profile *p, FILE *f)
{
    for (size_t i = 0; i < p->nsamples; i++) {
        size_t n;
        const uint32_t *locs;
        if (p->samples[i].stack >= g->nstacks) {
            errno = EINVAL;
            return -1;
        }
        locs = gen_stack(g, p->samples[i].stack, &n);
        for (size_t k = n; k-- > 0;) {
            fputs(g->funcs[g->locs[locs[k]].func].name, f);
            putc(k ? ';' : ' ', f);
        }
        fprintf(f, "%lld\n", (long long)p->samples[i].value);
    }
    return ferror(f) ? -1 : 0;
}
