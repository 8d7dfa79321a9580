/*
** engine/db.c: opening and closing a database directory, the LMDB
** environment and its sub-databases, read and write transactions, growing
** the map, the format version check (and the upgrade of format 1, in
** engine/lmdbval.c), the interval syncer, and the caches a handle's
** readers share (decoded chunks, focus sets, merge buffers).
**
** Invariants: every LMDB txn of this process is taken under resize_lock
** shared, so that em_map_grow (exclusive) runs with none active, as
** mdb_env_set_mapsize requires. A write txn is begun only by the holder of
** db->wlock; LMDB's own lock serializes writers across processes.
*/
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/store.h"

#define EM_DEFAULT_MAP (1ull << 30)
#define EM_MAP_HEADROOM (64ull << 20)   /* grow when less than this is free */
#define EM_GROW_WAIT_S 30
#define EM_DEFAULT_CACHE (256ull << 20)
#define EM_DEFAULT_BLOCK_CACHE (256ull << 20)
#define EM_MAX_READERS 1024

const char *const em_dbi_names[EM_D_COUNT] = {
    "str", "map", "fn", "loc", "stk", "ser",
    "strh", "maph", "fnh", "loch", "stkh", "serh",
    "meta", "post", "fpost", "chunk", "head", "block",
};

const char *const em_table_names[EM_T_COUNT] = {
    "string", "mapping", "function", "location", "stack", "series",
};

int em_lmdb(int mrc, const char *what)
{
    switch (mrc) {
    case MDB_SUCCESS:
        return EMBER_OK;
    case ENOMEM:
        return em_err(EMBER_ENOMEM, "%s: out of memory", what);
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_BAD_DBI:
        return EM_CORRUPT("%s: %s", what, mdb_strerror(mrc));
    case MDB_VERSION_MISMATCH:
        return em_err(EMBER_EFORMAT, "%s: %s", what, mdb_strerror(mrc));
    case MDB_NOTFOUND:
        return em_err(EMBER_ENOTFOUND, "%s: not found", what);
    case MDB_MAP_FULL:
        return em_err(EM_EMAPFULL, "%s: the map is full", what);
    case MDB_TXN_FULL:
    case MDB_READERS_FULL:
    case MDB_DBS_FULL:
        return em_err(EMBER_ELIMIT, "%s: %s", what, mdb_strerror(mrc));
    case EAGAIN:
    case EBUSY:
        return em_err(EMBER_EBUSY, "%s: %s", what, mdb_strerror(mrc));
    default:
        return em_err(EMBER_EIO, "%s: %s", what, mdb_strerror(mrc));
    }
}

/* ---- transactions --------------------------------------------------------- */

/* Begins an LMDB txn, adopting a map another process grew (MAP_RESIZED). */
static int txn_begin_raw(ember_db *db, MDB_txn *parent, unsigned flags,
                         MDB_txn **txn)
{
    int mrc = mdb_txn_begin(db->env, parent, flags, txn);
    if (mrc == MDB_MAP_RESIZED) {
        /* Only safe with no txn active here: drop our share, adopt, retry.
        ** A thread that holds another snapshot would wait for itself, so
        ** the wait is bounded. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += EM_GROW_WAIT_S;
        pthread_rwlock_unlock(&db->resize_lock);
        if (pthread_rwlock_timedwrlock(&db->resize_lock, &until) != 0) {
            pthread_rwlock_rdlock(&db->resize_lock);
            return em_err(EMBER_EBUSY, "another process grew the map and "
                          "this process kept transactions open for %d s",
                          EM_GROW_WAIT_S);
        }
        mrc = mdb_env_set_mapsize(db->env, 0);
        if (mrc == MDB_SUCCESS)
            em_val_map_locate(db);  /* the map moved */
        pthread_rwlock_unlock(&db->resize_lock);
        pthread_rwlock_rdlock(&db->resize_lock);
        if (mrc == MDB_SUCCESS)
            mrc = mdb_txn_begin(db->env, parent, flags, txn);
    }
    return em_lmdb(mrc, "begin transaction");
}

static int table_sizes(MDB_txn *txn, ember_db *db, bool lax,
                       uint32_t next[EM_T_COUNT]);

/* Table sizes and max_span of R's snapshot; LAX: damaged table ends and
** meta values are left to verify, which reports them. */
static int rtxn_sizes(em_rtxn *r, bool lax)
{
    int rc = table_sizes(r->txn, r->db, lax, r->next);

    if (rc == EMBER_OK &&
        (rc = em_meta_get_u64(r->txn, r->db, "max_span", &r->max_span)) ==
        EMBER_ECORRUPT && lax)
        rc = EMBER_OK;
    return rc;
}

/* em_rtxn_begin; LAX: without the sizes (em_rtxn_sizes); BLOCKS: with
** the blocks of the catalog as sources. */
static int rtxn_begin(ember_db *db, em_rtxn *r, bool lax, bool blocks)
{
    int rc;

    memset(r, 0, sizeof *r);
    r->db = db;
    pthread_rwlock_rdlock(&db->resize_lock);
    rc = txn_begin_raw(db, NULL, MDB_RDONLY, &r->txn);
    em_val_map_refresh(db);
    if (rc == EMBER_OK && db->format < EM_FORMAT_VERSION)
        rc = em_val_format_same(r->txn, db);
    if (rc == EMBER_OK && !lax)
        rc = rtxn_sizes(r, false);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(r->txn, db, "head_gen", &r->head_gen);
    if (rc == EMBER_OK)
        rc = em_codec_new(&r->codec);
    if (rc == EMBER_OK)
        rc = em_sources_open(r, blocks);
    if (rc != EMBER_OK)
        em_rtxn_end(r);
    else
        r->epoch = em_ccache_epoch(db->ccache);
    return rc;
}

int em_rtxn_begin(ember_db *db, em_rtxn *r)
{
    return rtxn_begin(db, r, false, true);
}

int em_rtxn_begin_head(ember_db *db, em_rtxn *r)
{
    return rtxn_begin(db, r, false, false);
}

int em_rtxn_begin_lax(ember_db *db, em_rtxn *r)
{
    return rtxn_begin(db, r, true, false);
}

int em_rtxn_sizes(em_rtxn *r)
{
    int rc = rtxn_sizes(r, true);

    if (rc == EMBER_OK && r->nsrc > 0)      /* the head's source too */
        memcpy(r->src[0].n, r->next, sizeof r->next);
    return rc;
}

void em_rtxn_end(em_rtxn *r)
{
    if (r->db == NULL)
        return;
    em_sources_close(r);
    if (r->txn != NULL) {
        mdb_txn_abort(r->txn);
        r->txn = NULL;
    }
    pthread_rwlock_unlock(&r->db->resize_lock);
    em_codec_free(r->codec);
    r->codec = NULL;
    r->db = NULL;
}

/* True when less than the headroom is left in the map. */
static bool map_nearly_full(ember_db *db)
{
    MDB_envinfo info;
    MDB_stat st;
    uint64_t used;

    if (mdb_env_info(db->env, &info) != 0 || mdb_env_stat(db->env, &st) != 0)
        return false;
    used = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
    return used + EM_MAP_HEADROOM > info.me_mapsize ||
           used > info.me_mapsize / 2;
}

int em_map_grow(ember_db *db)
{
    struct timespec until;
    MDB_envinfo info;
    int mrc;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += EM_GROW_WAIT_S;
    if (pthread_rwlock_timedwrlock(&db->resize_lock, &until) != 0)
        return em_err(EMBER_EBUSY, "growing the map: readers of this "
                      "process kept transactions open for %d s",
                      EM_GROW_WAIT_S);
    mrc = mdb_env_info(db->env, &info);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_set_mapsize(db->env, (size_t)info.me_mapsize * 2);
    if (mrc == MDB_SUCCESS)
        em_val_map_locate(db);      /* the map moved */
    pthread_rwlock_unlock(&db->resize_lock);
    return em_lmdb(mrc, "growing the map");
}

int em_wtxn_begin(ember_db *db, em_wtxn *w)
{
    uint64_t gen = 0;
    int rc;

    memset(w, 0, sizeof *w);
    w->db = db;
    if (db->rdonly)
        return em_err(EMBER_EINVAL, "%s: opened read-only", db->dir);
    if (map_nearly_full(db) && (rc = em_map_grow(db)) != EMBER_OK)
        return rc;
    pthread_rwlock_rdlock(&db->resize_lock);
    rc = txn_begin_raw(db, NULL, 0, &w->txn);
    em_val_map_refresh(db);
    em_val_writer(db);
    if (rc == EMBER_OK)
        rc = em_counters_load(w->txn, db, &w->c);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(w->txn, db, "head_gen", &gen);
    if (rc != EMBER_OK) {
        em_wtxn_abort(w);
        return rc;
    }
    if (gen != db->icache_gen) {    /* a compaction renumbered the head,
                                    ** maybe in another process */
        em_icache_clear(&db->icache);
        db->icache_gen = gen;
    }
    return EMBER_OK;
}

static void wtxn_release(em_wtxn *w)
{
    if (w->db == NULL)
        return;
    em_val_writer(NULL);
    pthread_rwlock_unlock(&w->db->resize_lock);
    em_staged_free(&w->post);
    em_staged_free(&w->fpost);
    em_buf_free(&w->rec);
    em_buf_free(&w->chunk);
    w->db = NULL;
}

int em_wtxn_commit(em_wtxn *w)
{
    int rc = em_staged_flush(w, &w->post, w->db->dbi[EM_D_POST]);

    if (rc == EMBER_OK)
        rc = em_staged_flush(w, &w->fpost, w->db->dbi[EM_D_FPOST]);
    if (rc == EMBER_OK)
        rc = em_counters_store(w);
    if (rc == EMBER_OK) {
        rc = em_envfile_write_err(w->db->dir, mdb_txn_commit(w->txn),
                                  "commit");
        w->txn = NULL;          /* commit frees the txn, success or not */
    }
    if (w->txn != NULL) {
        mdb_txn_abort(w->txn);
        w->txn = NULL;
    }
    if (rc != EMBER_OK && w->db != NULL)
        em_icache_clear(&w->db->icache);    /* its ids are gone */
    wtxn_release(w);
    return rc;
}

int em_write_run(ember_db *db, int (*fn)(em_wtxn *w, void *ctx), void *ctx)
{
    em_wtxn w;
    int rc;

    pthread_mutex_lock(&db->wlock);
    for (;;) {
        rc = em_wtxn_begin(db, &w);
        if (rc == EMBER_OK)
            rc = fn(&w, ctx);
        if (rc == EMBER_OK)
            rc = em_wtxn_commit(&w);
        else if (w.txn != NULL)
            em_wtxn_abort(&w);
        if (rc != EM_EMAPFULL || (rc = em_map_grow(db)) != EMBER_OK)
            break;
    }
    pthread_mutex_unlock(&db->wlock);
    return rc;
}

void em_wtxn_abort(em_wtxn *w)
{
    if (w->txn != NULL) {
        mdb_txn_abort(w->txn);
        w->txn = NULL;
    }
    if (w->db != NULL)
        em_icache_clear(&w->db->icache);
    wtxn_release(w);
}

/* ---- meta ------------------------------------------------------------------- */

int em_meta_get_u64(MDB_txn *txn, ember_db *db, const char *key, uint64_t *v)
{
    MDB_val k = { strlen(key), (void *)key }, d;
    const uint8_t *p;
    size_t n;
    int rc, mrc = mdb_get(txn, db->dbi[EM_D_META], &k, &d);

    *v = 0;
    if (mrc == MDB_NOTFOUND)
        return EMBER_OK;
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "meta");
    rc = em_val_get(db, EM_D_META, &k, &d, &p, &n);
    if (rc == EMBER_OK && n != sizeof *v)
        rc = EM_CORRUPT("meta \"%s\": %zu bytes, expected 8", key, n);
    if (rc == EMBER_OK)
        memcpy(v, p, sizeof *v);
    return rc;
}

int em_meta_put_u64(MDB_txn *txn, ember_db *db, const char *key, uint64_t v)
{
    MDB_val k = { strlen(key), (void *)key };
    return em_lmdb(em_val_put(txn, db, EM_D_META, &k, &v, sizeof v, 0),
                   "meta put");
}

/* The number of records of table T: one past the last id. The last
** record's checksum covers its key, so a damaged size fails, unless LAX
** (verify, which reports the record), where only its key is checked. */
static int table_size(MDB_txn *txn, ember_db *db, int t, bool lax,
                      uint32_t *next)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int rc = EMBER_OK, mrc = mdb_cursor_open(txn, db->dbi[t], &cur);

    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "table size");
    mrc = em_val_cursor(db, t, cur, &k, &d, MDB_LAST, &rc);
    mdb_cursor_close(cur);
    if (rc != EMBER_OK && lax && (rc = em_val_key(db, t, &k)) == EMBER_OK)
        mrc = MDB_SUCCESS;
    *next = 0;
    if (rc != EMBER_OK || mrc == MDB_NOTFOUND)
        return rc;
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, em_table_names[t]);
    if (k.mv_size != sizeof(uint32_t))
        return EM_CORRUPT("%s table: key of %zu bytes", em_table_names[t],
                          k.mv_size);
    memcpy(next, k.mv_data, sizeof *next);
    if (*next == UINT32_MAX)
        return em_err(EMBER_ELIMIT, "%s table is full", em_table_names[t]);
    (*next)++;
    return EMBER_OK;
}

static int table_sizes(MDB_txn *txn, ember_db *db, bool lax,
                       uint32_t next[EM_T_COUNT])
{
    int rc = EMBER_OK;

    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK; t++)
        rc = table_size(txn, db, t, lax, &next[t]);
    return rc;
}

int em_counters_load(MDB_txn *txn, ember_db *db, em_counters *c)
{
    uint64_t seq = 0;
    int rc;

    memset(c, 0, sizeof *c);
    rc = table_sizes(txn, db, false, c->next);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(txn, db, "profiles", &c->profiles);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(txn, db, "samples", &c->samples);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(txn, db, "chunk_bytes", &c->chunk_bytes);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(txn, db, "max_span", &c->max_span);
    if (rc == EMBER_OK)
        rc = em_meta_get_u64(txn, db, "chunk_seq", &seq);
    c->chunk_seq = (uint32_t)seq;
    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK; t++) {
        char key[32];
        snprintf(key, sizeof key, "id_base_%s", em_table_names[t]);
        rc = em_meta_get_u64(txn, db, key, &seq);
        c->base[t] = (uint32_t)seq;
    }
    return rc;
}

int em_counters_store(em_wtxn *w)
{
    MDB_txn *t = w->txn;
    ember_db *db = w->db;
    int rc = em_meta_put_u64(t, db, "profiles", w->c.profiles);

    if (rc == EMBER_OK)
        rc = em_meta_put_u64(t, db, "samples", w->c.samples);
    if (rc == EMBER_OK)
        rc = em_meta_put_u64(t, db, "chunk_bytes", w->c.chunk_bytes);
    if (rc == EMBER_OK)
        rc = em_meta_put_u64(t, db, "max_span", w->c.max_span);
    if (rc == EMBER_OK)
        rc = em_meta_put_u64(t, db, "chunk_seq", w->c.chunk_seq);
    return rc;
}

/* ---- open and close ----------------------------------------------------------- */

static void opts_defaults(ember_db *db, const ember_open_opts *in)
{
    ember_open_opts *o = &db->opts;

    memset(o, 0, sizeof *o);
    if (in != NULL)
        memcpy(o, in, in->sz < sizeof *o ? in->sz : sizeof *o);
    o->sz = sizeof *o;
    if (o->sync_interval_ms == 0)
        o->sync_interval_ms = 100;
    if (o->map_size == 0)
        o->map_size = EM_DEFAULT_MAP;
    if (o->chunk_window_ms <= 0)
        o->chunk_window_ms = 15 * 60 * 1000;
    if (o->chunk_max_profiles == 0)
        o->chunk_max_profiles = 720;
    if (o->chunk_max_profiles > EM_CHUNK_MAX_PROFILES)
        o->chunk_max_profiles = EM_CHUNK_MAX_PROFILES;
    if (o->zstd_level == 0)
        o->zstd_level = 3;
    if (o->cache_bytes == 0)
        o->cache_bytes = EM_DEFAULT_CACHE;
    if (o->block_cache_bytes == 0)
        o->block_cache_bytes = EM_DEFAULT_BLOCK_CACHE;
    else if (o->block_cache_bytes == EMBER_CACHE_OFF)
        o->block_cache_bytes = 0;   /* keep no idle block */
}

/* Creates DIR unless it exists or the options forbid it. */
static int dir_prepare(ember_db *db, const char *dir)
{
    struct stat st;

    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? EMBER_OK
               : em_err(EMBER_EINVAL, "%s: not a directory", dir);
    if (errno != ENOENT)
        return em_err(EMBER_EIO, "%s: %s", dir, strerror(errno));
    if (db->rdonly || (db->opts.flags & EMBER_OPEN_NOCREATE))
        return em_err(EMBER_ENOTFOUND, "%s: no such database directory", dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return em_err(EMBER_EIO, "%s: cannot create: %s", dir,
                      strerror(errno));
    return EMBER_OK;
}

/* mdb_env_open of a fresh handle with FLAGS and our sizes. */
static int env_open_flags(ember_db *db, unsigned flags)
{
    int mrc = mdb_env_create(&db->env);

    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_set_maxdbs(db->env, EM_D_COUNT + 4);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_set_maxreaders(db->env, EM_MAX_READERS);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_set_mapsize(db->env, (size_t)db->opts.map_size);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_set_userctx(db->env, db);     /* em_val_db */
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_open(db->env, db->dir, flags, 0600);
    if (mrc != MDB_SUCCESS && db->env != NULL) {
        mdb_env_close(db->env);     /* a failed open leaves it unusable */
        db->env = NULL;
    }
    return mrc;
}

static int env_open(ember_db *db)
{
    unsigned flags = MDB_NOTLS | MDB_NORDAHEAD;
    int mrc, rc = em_envfile_check(db->dir, db->rdonly);

    if (rc == EMBER_OK && !db->rdonly)
        rc = em_envfile_lock_prepare(db->dir, EM_MAX_READERS);
    if (rc != EMBER_OK)
        return rc;
    if (db->rdonly)
        flags |= MDB_RDONLY;
    if (db->opts.sync != EMBER_SYNC_FULL)
        flags |= MDB_NOSYNC;
    mrc = env_open_flags(db, flags);
    if (mrc == EACCES && db->rdonly) {
        /* lock.mdb is not ours to write: read without LMDB's lock, as it
        ** does itself on a read-only file system. Nothing then stops a
        ** writer from reusing the pages of our snapshot (see
        ** docs/getting-started.md). */
        mrc = env_open_flags(db, flags | MDB_NOLOCK);
        db->nolock = mrc == MDB_SUCCESS;
    }
    if (mrc == EACCES)
        return em_envfile_denied(db->dir, db->rdonly);
    if (mrc == EAGAIN || mrc == EBUSY)
        return em_err(EMBER_EBUSY, "%s: cannot lock: %s", db->dir,
                      mdb_strerror(mrc));
    if (mrc != MDB_SUCCESS && !db->rdonly)     /* it may have written */
        return em_envfile_write_err(db->dir, mrc, "open");
    if (mrc != MDB_SUCCESS)
        return em_err_prefix(em_lmdb(mrc, "open"), "%s", db->dir);
    return EMBER_OK;
}

static unsigned dbi_flags(int d)
{
    if (d < EM_T_COUNT)
        return MDB_INTEGERKEY;
    if (d < 2 * EM_T_COUNT)
        return MDB_INTEGERKEY | MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP;
    if (d == EM_D_FPOST || d == EM_D_HEAD)
        return MDB_INTEGERKEY;
    return 0;
}

/* Writes the empty string and the unknown mapping so ids 0 mean them. */
static int db_init_content(em_wtxn *w)
{
    uint8_t rec[8];
    uint32_t id;
    size_t n = 0;
    int rc = em_intern_str(w, "", 0, &id);

    for (int i = 0; i < 5; i++)
        n += em_varint_put(rec + n, 0);
    if (rc == EMBER_OK)
        rc = em_table_intern(w, EM_T_MAPPING, rec, n, &id, NULL);
    if (rc == EMBER_OK)
        rc = em_meta_put_u64(w->txn, w->db, "format", EM_FORMAT_VERSION);
    return rc;
}

/* ---- what the environment holds (docs/file-format.md, section 2) ------------ */

enum { ENV_NEW, ENV_EMBER };

static int dbi_index(const MDB_val *name)
{
    for (int d = 0; d < EM_D_COUNT; d++)
        if (strlen(em_dbi_names[d]) == name->mv_size &&
            memcmp(em_dbi_names[d], name->mv_data, name->mv_size) == 0)
            return d;
    return -1;
}

/* KEY for a message: printable bytes as they are, others as \xNN. */
static const char *key_text(const MDB_val *key, char *out, size_t cap)
{
    const uint8_t *p = key->mv_data;
    size_t n = 0, i;

    for (i = 0; i < key->mv_size && n + 8 < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, p[i] >= 0x20 && p[i] < 0x7f &&
                              p[i] != '"' && p[i] != '\\' ? "%c" : "\\x%02x",
                              p[i]);
    snprintf(out + n, cap - n, "%s", i < key->mv_size ? "..." : "");
    return out;
}

/* Whether the main database's entry KEY may be part of a database under
** creation: one of Ember's sub-databases, still empty. */
static int creation_part(ember_db *db, MDB_txn *txn, const MDB_val *key)
{
    char text[64];
    MDB_dbi dbi;
    MDB_stat st;
    int d = dbi_index(key), mrc;

    if (d < 0)
        return em_err(EMBER_EFORMAT, "%s: not an Ember database: its LMDB "
                      "environment holds \"%s\", which Ember never writes "
                      "(Ember makes its tables only in an empty environment)",
                      db->dir, key_text(key, text, sizeof text));
    mrc = mdb_dbi_open(txn, em_dbi_names[d], 0, &dbi);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_stat(txn, dbi, &st);
    if (mrc == MDB_INCOMPATIBLE || (mrc == MDB_SUCCESS && st.ms_entries > 0))
        return em_err(EMBER_EFORMAT, "%s: not an Ember database: its LMDB "
                      "environment holds \"%s\" with content but no Ember "
                      "format version (another program's; Ember makes its "
                      "tables only in an empty environment)", db->dir,
                      em_dbi_names[d]);
    return em_lmdb(mrc, em_dbi_names[d]);
}

/* ENV_EMBER when the environment's meta table has a format version, else
** ENV_NEW when it holds nothing or only the empty tables of a creation cut
** short (before db_init); anything else is another program's database:
** EMBER_EFORMAT, and the caller writes nothing. */
static int env_kind(ember_db *db, MDB_txn *txn, int *kind)
{
    MDB_val k = { 6, "format" }, d;
    MDB_cursor *cur = NULL;
    MDB_dbi dbi, main;
    unsigned flags = 0;
    int rc = EMBER_OK, mrc = mdb_dbi_open(txn, NULL, 0, &main);

    if (mrc == MDB_SUCCESS)
        mrc = mdb_dbi_flags(txn, main, &flags);
    if (mrc == MDB_SUCCESS && flags != 0)   /* Ember's holds table names */
        return em_err(EMBER_EFORMAT, "%s: not an Ember database: its LMDB "
                      "environment's main database has flags %#x", db->dir,
                      flags);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_dbi_open(txn, "meta", 0, &dbi);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_get(txn, dbi, &k, &d);
    *kind = mrc == MDB_SUCCESS ? ENV_EMBER : ENV_NEW;
    if (mrc == MDB_SUCCESS || (mrc != MDB_NOTFOUND &&
                               mrc != MDB_INCOMPATIBLE))
        return em_lmdb(mrc, "open: meta");
    mrc = mdb_cursor_open(txn, main, &cur);
    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
        rc = creation_part(db, txn, &k);
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "open: main database");
    return rc;
}

/* Opens every sub-database of an Ember database, or creates them all in a
** new one; returns 1 when the database still needs its content. */
static int dbis_open(ember_db *db)
{
    MDB_txn *txn = NULL;
    uint64_t fmt = 0;
    int kind = ENV_NEW, rc;

    rc = em_lmdb(mdb_txn_begin(db->env, NULL, db->rdonly ? MDB_RDONLY : 0,
                               &txn), "open: begin");
    if (rc == EMBER_OK && !db->rdonly)
        em_val_writer(db);
    if (rc == EMBER_OK)
        rc = env_kind(db, txn, &kind);
    if (rc == EMBER_OK && kind == ENV_NEW && db->rdonly)
        rc = em_err(EMBER_EFORMAT, "%s: not an Ember database: an empty "
                    "LMDB environment", db->dir);
    for (int d = 0; rc == EMBER_OK && d < EM_D_COUNT; d++) {
        unsigned f = dbi_flags(d) | (kind == ENV_NEW ? MDB_CREATE : 0), have;
        int mrc;
        /* The catalog came after the other tables: a writer adds it to an
        ** older database; a reader of one finds no blocks. */
        if (d == EM_D_BLOCK && !db->rdonly)
            f |= MDB_CREATE;
        mrc = mdb_dbi_open(txn, em_dbi_names[d], f, &db->dbi[d]);
        if (d == EM_D_BLOCK && mrc == MDB_NOTFOUND) {
            db->no_catalog = true;
            continue;
        }
        if (mrc == MDB_SUCCESS)
            mrc = mdb_dbi_flags(txn, db->dbi[d], &have);
        if (mrc == MDB_NOTFOUND || mrc == MDB_INCOMPATIBLE)
            rc = em_err(EMBER_EFORMAT, "%s: not an Ember database (no "
                        "\"%s\" table)", db->dir, em_dbi_names[d]);
        else if (mrc == MDB_SUCCESS && have != dbi_flags(d))
            rc = em_err(EMBER_EFORMAT, "%s: not an Ember database (table "
                        "\"%s\" has LMDB flags %#x, Ember's has %#x)",
                        db->dir, em_dbi_names[d], have, dbi_flags(d));
        else
            rc = em_lmdb(mrc, em_dbi_names[d]);
    }
    if (rc == EMBER_OK)
        rc = em_val_format_read(txn, db, &fmt);
    if (rc == EMBER_OK && kind == ENV_EMBER && (fmt < 1 ||
                                                fmt > EM_FORMAT_VERSION))
        rc = em_err(EMBER_EFORMAT, "%s: format version %llu, this Ember "
                    "reads versions 1 to %u", db->dir,
                    (unsigned long long)fmt, EM_FORMAT_VERSION);
    db->format = kind == ENV_EMBER ? (unsigned)fmt : EM_FORMAT_VERSION;
    if (rc == EMBER_OK)
        rc = em_envfile_write_err(db->dir, mdb_txn_commit(txn),
                                  "open: commit");
    else if (txn != NULL)
        mdb_txn_abort(txn);
    em_val_writer(NULL);
    return rc == EMBER_OK && kind == ENV_NEW ? 1 : rc; /* 1: needs content */
}

static int db_init(ember_db *db)
{
    em_wtxn w;
    int rc = em_wtxn_begin(db, &w);

    while (rc == EMBER_OK) {
        uint64_t fmt;
        rc = em_val_format_read(w.txn, db, &fmt);
        if (rc == EMBER_OK && fmt == 0)   /* another process may have won */
            rc = db_init_content(&w);
        if (rc == EMBER_OK)
            rc = em_wtxn_commit(&w);
        else
            em_wtxn_abort(&w);
        if (rc != EM_EMAPFULL)
            break;
        rc = em_map_grow(db);
        if (rc == EMBER_OK)
            rc = em_wtxn_begin(db, &w);
    }
    return rc;
}

static void *syncer_main(void *arg)
{
    ember_db *db = arg;
    struct timespec until;

    pthread_mutex_lock(&db->smu);
    while (!db->stopping) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(db->opts.sync_interval_ms % 1000) * 1000000;
        until.tv_sec += db->opts.sync_interval_ms / 1000 +
                        until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&db->scond, &db->smu, &until);
        pthread_mutex_unlock(&db->smu);
        mdb_env_sync(db->env, 1);
        pthread_mutex_lock(&db->smu);
    }
    pthread_mutex_unlock(&db->smu);
    return NULL;
}

static int db_new(const char *dir, const ember_open_opts *opts,
                  ember_db **out)
{
    ember_db *db = em_calloc(1, sizeof *db);

    *out = db;
    if (db == NULL)
        return em_err(EMBER_ENOMEM, "open: handle");
    opts_defaults(db, opts);
    db->rdonly = (db->opts.flags & EMBER_OPEN_RDONLY) != 0;
    pthread_rwlock_init(&db->resize_lock, NULL);
    pthread_mutex_init(&db->wlock, NULL);
    pthread_mutex_init(&db->qmu, NULL);
    pthread_cond_init(&db->qcond, NULL);
    pthread_mutex_init(&db->smu, NULL);
    pthread_cond_init(&db->scond, NULL);
    em_kcache_init(&db->kcache);
    em_mpool_init(&db->mpool);
    pthread_mutex_init(&db->bmu, NULL);
    db->dir = em_strdup(dir);
    if (db->dir == NULL)
        return em_err(EMBER_ENOMEM, "open: directory name");
    if (db->opts.cache_bytes != EMBER_CACHE_OFF)
        return em_ccache_new(db->opts.cache_bytes, &db->ccache);
    return EMBER_OK;
}

EMBER_API int ember_open(const char *dir, const ember_open_opts *opts,
                         ember_db **out)
{
    ember_db *db;
    int rc;

    em_err_clear();
    if (out != NULL)
        *out = NULL;
    if (dir == NULL || out == NULL)
        return em_err(EMBER_EINVAL, "ember_open: NULL argument");
    rc = db_new(dir, opts, &db);
    *out = db;
    if (rc == EMBER_OK)
        rc = dir_prepare(db, dir);
    if (rc == EMBER_OK)
        rc = env_open(db);
    if (rc == EMBER_OK)
        rc = dbis_open(db);
    if (rc == 1)
        rc = db_init(db);
    if (rc == EMBER_OK)
        em_val_map_locate(db);
    if (rc == EMBER_OK && db->format < EM_FORMAT_VERSION && !db->rdonly)
        rc = em_val_upgrade(db);
    if (rc == EMBER_OK && !db->rdonly)
        rc = em_codec_new(&db->wcodec);
    if (rc == EMBER_OK && !db->rdonly &&
        db->opts.sync == EMBER_SYNC_INTERVAL) {
        if (pthread_create(&db->syncer, NULL, syncer_main, db) != 0)
            rc = em_err(EMBER_EIO, "open: cannot start the syncer thread");
        else
            db->syncer_running = true;
    }
    return rc;
}

EMBER_API void ember_close(ember_db *db)
{
    if (db == NULL)
        return;
    if (db->syncer_running) {
        pthread_mutex_lock(&db->smu);
        db->stopping = true;
        pthread_cond_signal(&db->scond);
        pthread_mutex_unlock(&db->smu);
        pthread_join(db->syncer, NULL);
    }
    if (db->env != NULL) {
        if (!db->rdonly)
            mdb_env_sync(db->env, 1);
        mdb_env_close(db->env);
    }
    em_blocks_release(db);
    pthread_mutex_destroy(&db->bmu);
    em_codec_free(db->wcodec);
    em_icache_free(&db->icache);
    em_ccache_free(db->ccache);
    em_kcache_free(&db->kcache);
    em_mpool_free(&db->mpool);
    pthread_rwlock_destroy(&db->resize_lock);
    pthread_mutex_destroy(&db->wlock);
    pthread_mutex_destroy(&db->qmu);
    pthread_cond_destroy(&db->qcond);
    pthread_mutex_destroy(&db->smu);
    pthread_cond_destroy(&db->scond);
    em_free(db->dir);
    em_free(db);
}

EMBER_API int ember_sync(ember_db *db)
{
    em_err_clear();
    if (db == NULL)
        return em_err(EMBER_EINVAL, "ember_sync: NULL database");
    if (db->rdonly)
        return EMBER_OK;
    return em_envfile_write_err(db->dir, mdb_env_sync(db->env, 1), "sync");
}
