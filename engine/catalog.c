/*
** engine/catalog.c: the catalog, the LMDB table "block" that names the
** blocks a database holds. A block is in the database exactly when the
** catalog names it: compaction writes a block file under a temporary
** name, fsyncs it, renames it, and only then enters it here, in the same
** write transaction that removes what it replaces; a file the catalog
** does not name is not part of the database (a leftover of a compaction
** cut short, removed by the next one).
**
** Key: the block id, 8 bytes big-endian (ids ascend in the order blocks
** were made, and are never reused). Value, little-endian:
**   0  u8  record version (2)     1  u8  level     2  u16  reserved (0)
**   4  u32 the block's footer CRC (em_block_info.footer_crc)
**   8  u64 file size             16  i64 min_time  24  i64 max_time
**  32  i64 resolution_ms         40  u64 profiles  48  u64 samples
**  56  u32 series                60  u32 stack nodes
**  64  u64 made from: the block this one downsamples (0: none, it holds
**      profiles as stored)
**  72  u32 strings  76  u32 mappings  80  u32 functions  84  u32 locations
**  88  end
** Version 1 records end at 72: without the table sizes a snapshot cannot
** lay out the block's ids before opening it, so it opens such a block when
** it begins; with them it opens a block only when a question reads it.
** The catalog record and the block's own footer must agree on id, footer
** checksum, size and table sizes: a snapshot refuses a block that does
** not.
*/
#include <stdio.h>
#include <stdlib.h>

#include "engine/block.h"
#include "engine/store.h"

#define CAT_REC_LEN 88
#define CAT_REC_V1_LEN 72
#define CAT_REC_VERSION 2

static void catalog_key(uint8_t k[8], uint64_t id)
{
    em_put_be64(k, id);
}

static uint64_t key_id(const uint8_t k[8])
{
    return em_get_be64(k);
}

static void catalog_encode(const em_block_info *b, uint64_t made_from,
                           uint8_t out[CAT_REC_LEN])
{
    memset(out, 0, CAT_REC_LEN);
    out[0] = CAT_REC_VERSION;
    out[1] = (uint8_t)b->level;
    em_put_le32(out + 4, b->footer_crc);
    em_put_le64(out + 8, b->file_size);
    em_put_le64(out + 16, (uint64_t)b->min_time);
    em_put_le64(out + 24, (uint64_t)b->max_time);
    em_put_le64(out + 32, (uint64_t)b->resolution_ms);
    em_put_le64(out + 40, b->nprofiles);
    em_put_le64(out + 48, b->nsamples);
    em_put_le32(out + 56, b->nseries);
    em_put_le32(out + 60, b->nnodes);
    em_put_le64(out + 64, made_from);
    em_put_le32(out + 72, b->nstrings);
    em_put_le32(out + 76, b->nmappings);
    em_put_le32(out + 80, b->nfunctions);
    em_put_le32(out + 84, b->nlocations);
}

static int catalog_decode(const uint8_t *k, size_t klen, const uint8_t *v,
                      size_t vlen, em_catalog_rec *out)
{
    if (klen != 8 || vlen == 0)
        return EM_CORRUPT("catalog: a record of %zu/%zu bytes", klen, vlen);
    if (v[0] != 1 && v[0] != CAT_REC_VERSION)
        return em_err(EMBER_EFORMAT, "catalog: record version %u", v[0]);
    if (vlen != (v[0] == 1 ? CAT_REC_V1_LEN : CAT_REC_LEN))
        return EM_CORRUPT("catalog: a version %u record of %zu bytes", v[0],
                          vlen);
    if (v[2] != 0 || v[3] != 0 || v[1] > 63)
        return EM_CORRUPT("catalog: block %016llx: bad level or reserved "
                          "bytes", (unsigned long long)key_id(k));
    out->id = key_id(k);
    out->level = v[1];
    out->footer_crc = em_get_le32(v + 4);
    out->file_size = em_get_le64(v + 8);
    out->min_time = (int64_t)em_get_le64(v + 16);
    out->max_time = (int64_t)em_get_le64(v + 24);
    out->resolution_ms = (int64_t)em_get_le64(v + 32);
    out->nprofiles = em_get_le64(v + 40);
    out->nsamples = em_get_le64(v + 48);
    out->nseries = em_get_le32(v + 56);
    out->nnodes = em_get_le32(v + 60);
    out->made_from = em_get_le64(v + 64);
    out->sized = v[0] >= 2;
    out->nstrings = out->sized ? em_get_le32(v + 72) : 0;
    out->nmappings = out->sized ? em_get_le32(v + 76) : 0;
    out->nfunctions = out->sized ? em_get_le32(v + 80) : 0;
    out->nlocations = out->sized ? em_get_le32(v + 84) : 0;
    if (out->min_time > out->max_time || out->resolution_ms < 0 ||
        (out->made_from != 0) != (out->resolution_ms > 0) ||
        out->made_from >= out->id)
        return EM_CORRUPT("catalog: block %016llx: times %lld..%lld, "
                          "resolution %lld", (unsigned long long)out->id,
                          (long long)out->min_time, (long long)out->max_time,
                          (long long)out->resolution_ms);
    return EMBER_OK;
}

bool em_catalog_agrees(const em_catalog_rec *rec, const em_block_info *in,
                       bool all)
{
    if (in->id != rec->id || in->footer_crc != rec->footer_crc ||
        in->file_size != rec->file_size)
        return false;
    if (rec->sized &&
        (in->nstrings != rec->nstrings || in->nmappings != rec->nmappings ||
         in->nfunctions != rec->nfunctions ||
         in->nlocations != rec->nlocations || in->nnodes != rec->nnodes ||
         in->nseries != rec->nseries))
        return false;
    return !all ||
           (in->min_time == rec->min_time && in->max_time == rec->max_time &&
            in->nprofiles == rec->nprofiles && in->nsamples == rec->nsamples &&
            in->resolution_ms == rec->resolution_ms &&
            in->level == rec->level);
}

int em_catalog_walk(MDB_txn *txn, ember_db *db,
                    int (*fn)(void *ctx, const em_catalog_rec *rec),
                    void *ctx)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int mrc, rc = EMBER_OK;

    if (db->no_catalog)
        return EMBER_OK;
    if ((mrc = mdb_cursor_open(txn, db->dbi[EM_D_BLOCK], &cur)) !=
        MDB_SUCCESS)
        return em_lmdb(mrc, "catalog cursor");
    for (mrc = em_val_cursor(db, EM_D_BLOCK, cur, &k, &d, MDB_FIRST, &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(db, EM_D_BLOCK, cur, &k, &d, MDB_NEXT, &rc)) {
        em_catalog_rec rec;
        rc = catalog_decode(k.mv_data, k.mv_size, d.mv_data, d.mv_size,
                               &rec);
        if (rc == EMBER_OK)
            rc = fn(ctx, &rec);
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "catalog walk");
    return rc;
}

typedef struct each_ctx {
    em_rtxn *r;
    size_t *cap;
} each_ctx;

static int each_block(void *ctx, const em_catalog_rec *rec)
{
    each_ctx *e = ctx;

    return em_sources_add_block(e->r, e->cap, rec);
}

int em_catalog_each(em_rtxn *r, size_t *cap)
{
    each_ctx e = { r, cap };

    return em_catalog_walk(r->txn, r->db, each_block, &e);
}

int em_catalog_put(em_wtxn *w, const em_block_info *b, uint64_t made_from)
{
    uint8_t key[8], val[CAT_REC_LEN];
    MDB_val k = { sizeof key, key };

    catalog_key(key, b->id);
    catalog_encode(b, made_from, val);
    return em_lmdb(em_val_put(w->txn, w->db, EM_D_BLOCK, &k, val,
                              sizeof val, 0), "catalog put");
}

int em_catalog_del(em_wtxn *w, uint64_t id)
{
    uint8_t key[8];
    MDB_val k = { sizeof key, key };
    int mrc;

    catalog_key(key, id);
    mrc = mdb_del(w->txn, w->db->dbi[EM_D_BLOCK], &k, NULL);
    if (mrc == MDB_NOTFOUND)
        return em_err(EMBER_ENOTFOUND, "catalog: no block %016llx",
                      (unsigned long long)id);
    return em_lmdb(mrc, "catalog del");
}

void em_block_path(const ember_db *db, uint64_t id, char *buf, size_t n)
{
    snprintf(buf, n, "%s/blocks/%016llx.block", db->dir,
             (unsigned long long)id);
}

bool em_block_file_id(const char *name, uint64_t *id, bool *tmp)
{
    char *end;
    size_t n = strlen(name);

    if ((n != 22 && n != 26) || strspn(name, "0123456789abcdef") != 16)
        return false;
    *id = strtoull(name, &end, 16);
    *tmp = strcmp(end, ".block.tmp") == 0;
    return *tmp || strcmp(end, ".block") == 0;
}
