/*
** engine/head_chunks.c: the walk over one series' chunks in the head that
** every reader of them shares (queries, the compaction's cut). Chunk keys
** sort by (series, time of the chunk's first profile, seq), so the chunks
** that may hold a profile at FROM start at FROM less the widest span a
** chunk of the snapshot has (r->max_span), and the walk ends at the first
** key past TO.
*/
#include "engine/store.h"

static int64_t sat_sub(int64_t a, uint64_t b)
{
    if (b > (uint64_t)INT64_MAX || a < INT64_MIN + (int64_t)b)
        return INT64_MIN;
    return a - (int64_t)b;
}

int em_head_chunks(em_rtxn *r, uint32_t series, int64_t from, int64_t to,
                   em_head_chunk_fn fn, void *ctx)
{
    uint8_t start[EM_CHUNK_KEY_LEN];
    MDB_val k = { sizeof start, start }, d;
    MDB_cursor *cur;
    int rc = EMBER_OK;
    int mrc = mdb_cursor_open(r->txn, r->db->dbi[EM_D_CHUNK], &cur);

    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "chunk cursor");
    em_chunk_key(start, series, sat_sub(from, r->max_span), 0);
    for (mrc = em_val_cursor(r->db, EM_D_CHUNK, cur, &k, &d, MDB_SET_RANGE, &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(r->db, EM_D_CHUNK, cur, &k, &d, MDB_NEXT, &rc)) {
        uint32_t sid, seq;
        int64_t t;
        if (k.mv_size != EM_CHUNK_KEY_LEN) {
            rc = EM_CORRUPT("chunk key of %zu bytes", k.mv_size);
            break;
        }
        em_chunk_key_parse(k.mv_data, &sid, &t, &seq);
        if (sid != series || t > to)
            break;
        if ((rc = fn(ctx, &k, &d)) != EMBER_OK)
            em_err_prefix(rc, "chunk (series %u, t=%lld, seq %u)", series,
                          (long long)t, seq);
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "chunk scan");
    return rc;
}
