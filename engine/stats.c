/*
** engine/stats.c: what a database holds and what it costs on disk. Counts of
** interned records come from the tables' sizes; profiles, samples and chunk
** bytes from the counters every write txn keeps in meta; sizes from LMDB's
** page counts per sub-database; the chunk cache's counters from the handle.
*/
#include <stdio.h>
#include <sys/stat.h>

#include "engine/store.h"

static int table_stats(em_rtxn *r, ember_stats *out)
{
    MDB_stat st;

    out->ntables = 0;
    for (int d = 0; d < EM_D_COUNT && d < EMBER_STATS_MAX_TABLES; d++) {
        ember_table_stats *t;
        int mrc;
        if (d == EM_D_BLOCK && r->db->no_catalog)
            continue;
        t = &out->tables[out->ntables++];
        mrc = mdb_stat(r->txn, r->db->dbi[d], &st);
        if (mrc != MDB_SUCCESS)
            return em_lmdb(mrc, em_dbi_names[d]);
        snprintf(t->name, sizeof t->name, "%s", em_dbi_names[d]);
        t->entries = st.ms_entries;
        t->bytes = (uint64_t)(st.ms_branch_pages + st.ms_leaf_pages +
                              st.ms_overflow_pages) * st.ms_psize;
        if (d == EM_D_CHUNK)
            out->chunks = st.ms_entries;
    }
    return EMBER_OK;
}

/* Head chunks are the sum of the head summaries. */
static int head_count(em_rtxn *r, uint64_t *n)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int rc = EMBER_OK, mrc = mdb_cursor_open(r->txn, r->db->dbi[EM_D_HEAD],
                                             &cur);

    *n = 0;
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "head cursor");
    for (mrc = em_val_cursor(r->db, EM_D_HEAD, cur, &k, &d, MDB_FIRST, &rc);
         mrc == MDB_SUCCESS;
         mrc = em_val_cursor(r->db, EM_D_HEAD, cur, &k, &d, MDB_NEXT, &rc)) {
        em_head h;
        if (d.mv_size == sizeof h) {
            memcpy(&h, d.mv_data, sizeof h);
            *n += h.nchunks;
        }
    }
    mdb_cursor_close(cur);
    if (rc != EMBER_OK)
        return rc;
    return mrc == MDB_NOTFOUND ? EMBER_OK : em_lmdb(mrc, "head scan");
}

static void file_stats(ember_db *db, ember_stats *out)
{
    char path[4096];
    struct stat st;
    MDB_envinfo info;
    MDB_stat est;

    snprintf(path, sizeof path, "%s/data.mdb", db->dir);
    if (stat(path, &st) == 0)
        out->file_bytes = (uint64_t)st.st_blocks * 512;
    if (mdb_env_info(db->env, &info) == 0 && mdb_env_stat(db->env, &est) == 0)
        out->used_bytes = (uint64_t)(info.me_last_pgno + 1) * est.ms_psize;
}

static void cache_stats(ember_db *db, ember_stats *out)
{
    em_ccache_info ci;

    em_ccache_stats(db->ccache, &ci);
    out->cache_hits = ci.hits;
    out->cache_misses = ci.misses;
    out->cache_bytes = ci.bytes;
    out->cache_entries = ci.entries;
    em_blocks_memory(db, &out->blocks_open, &out->blocks_open_bytes);
}

static int block_stats(void *ctx, const em_catalog_rec *rec)
{
    ember_stats *out = ctx;

    out->blocks++;
    out->block_bytes += rec->file_size;
    out->block_series += rec->nseries;
    out->block_profiles += rec->nprofiles;
    out->block_samples += rec->nsamples;
    out->block_stacks += rec->nnodes;
    return EMBER_OK;
}

/* Fills the whole current struct; the caller gets the part its sz covers. */
static int stats_fill(ember_db *db, ember_stats *out)
{
    em_counters c;
    em_rtxn r;
    int rc = em_rtxn_begin_head(db, &r);

    if (rc != EMBER_OK)
        return rc;
    rc = em_counters_load(r.txn, db, &c);
    if (rc == EMBER_OK)
        rc = em_catalog_walk(r.txn, db, block_stats, out);
    if (rc == EMBER_OK)
        rc = table_stats(&r, out);
    if (rc == EMBER_OK)
        rc = head_count(&r, &out->head_chunks);
    em_rtxn_end(&r);
    if (rc != EMBER_OK)
        return rc;
    out->series = c.next[EM_T_SERIES];
    out->stacks = c.next[EM_T_STACK];
    out->locations = c.next[EM_T_LOCATION];
    out->functions = c.next[EM_T_FUNCTION];
    out->mappings = c.next[EM_T_MAPPING];
    out->strings = c.next[EM_T_STRING];
    out->profiles = c.profiles + out->block_profiles;
    out->samples = c.samples + out->block_samples;
    out->chunk_bytes = c.chunk_bytes;
    out->chunks -= out->head_chunks;
    out->format_version = db->format;
    out->lockless = db->nolock;
    file_stats(db, out);
    cache_stats(db, out);
    return EMBER_OK;
}

EMBER_API int ember_stats_get(ember_db *db, ember_stats *out)
{
    ember_stats full;
    size_t sz;
    int rc;

    em_err_clear();
    if (db == NULL || out == NULL || out->sz == 0)
        return em_err(EMBER_EINVAL, "ember_stats_get: NULL argument or sz 0");
    sz = out->sz < sizeof full ? out->sz : sizeof full;
    memset(&full, 0, sizeof full);
    rc = stats_fill(db, &full);
    if (rc != EMBER_OK)
        return rc;
    full.sz = sz;
    memcpy(out, &full, sz);
    return EMBER_OK;
}
