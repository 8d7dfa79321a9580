/*
** engine/lmdbval.c: every value Ember keeps in LMDB is written with its
** checksum and checked before any byte of it is used (issue 15, point 4;
** docs/file-format.md, section 15). LMDB keeps no checksums and trusts its
** pages: a flipped bit in a node's size made it hand out a "record" of 1 GiB
** running past the end of the file (SIGBUS on the first read), a flipped
** page number a value of another page, a flipped byte a record that still
** decoded. So, in this one place:
**  - format 2: a value is its payload, then the CRC-32 (zlib's) of the
**    sub-database's name, the key and the payload, little-endian, so that a
**    value moved under another key or table fails too. A chunk carries its
**    own CRC of its bytes: its value's covers the name and the key only.
**    The hash indexes' u32 duplicates carry none: every hit is confirmed
**    by comparing the record it names, so a damaged one can only miss.
**  - every key and value LMDB hands back must lie inside the file's pages
**    as mapped, and within its page (a leaf's node) or its run of overflow
**    pages, before it is read (em_val_get, em_val_key); a leaf page's
**    nodes are checked too, the first time a txn meets the page
**    (engine/lmdbtree.c). lmdb.h does not say where the file is mapped:
**    em_val_map_locate finds it in /proc/self/maps.
**  - a format 1 database (no checksums) is read as such when opened
**    read-only, and upgraded in place, in one write txn, when opened for
**    writing (em_val_upgrade).
** Pages a write txn of this thread changed live in LMDB's private memory,
** outside the map: a writer's reads of them (and of pages it spilled past
** the last committed one) are checked by checksum only.
*/
#include <stdio.h>

#include "engine/store.h"

/* LMDB 0.9's page header (lmdb's mdb.c, MDB_page): page number (P
** bytes), pad u16, flags u16, then lower and upper u16, or for the first
** page of an overflow run its number of pages, u32. */
#define PAGE_FLAGS (sizeof(size_t) + 2)
#define PAGE_NPAGES (sizeof(size_t) + 4)
#define PAGE_HDR (sizeof(size_t) + 8)
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_LEAF2 0x20
#define LEAF_CACHE 512              /* leaf pages a thread remembers sound,
                                    ** by page number, direct-mapped */

/* The db whose write txn this thread runs, if any: see the header. */
static _Thread_local const ember_db *tls_writer;

/* The leaf pages this thread found sound since a txn began (map.gen). */
static _Thread_local struct leaf_seen {
    uintptr_t page;
    uint64_t gen;
} tls_leaf[LEAF_CACHE];

void em_val_writer(const ember_db *db)
{
    tls_writer = db;
}

/* Whether sub-database D's values carry a checksum (not a hash index). */
static bool val_summed(const ember_db *db, int d)
{
    return db->format >= 2 && (d < EM_T_COUNT || d >= 2 * EM_T_COUNT);
}

/* The CRC-32 of each sub-database's name, where every value's starts. */
static uint32_t name_crc[EM_D_COUNT];
static pthread_once_t name_crc_once = PTHREAD_ONCE_INIT;

static void name_crc_init(void)
{
    for (int d = 0; d < EM_D_COUNT; d++)
        name_crc[d] = em_crc32(0, em_dbi_names[d], strlen(em_dbi_names[d]));
}

/* The checksum of payload P[N] stored under KEY in sub-database D. */
static uint32_t val_crc(int d, const MDB_val *key, const void *p, size_t n)
{
    uint32_t c;

    pthread_once(&name_crc_once, name_crc_init);
    c = em_crc32(name_crc[d], key->mv_data, key->mv_size);
    if (d != EM_D_CHUNK)            /* a chunk has its own over its bytes */
        c = em_crc32(c, p, n);
    return c;
}

/* ---- messages ---------------------------------------------------------------- */

/* Printable bytes as they are, others as \xNN, a NUL as '=' (postings). */
static void bytes_text(const uint8_t *p, size_t n, bool nul_eq, char *out,
                       size_t cap)
{
    size_t k = 0, i;

    for (i = 0; i < n && k + 8 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, nul_eq && p[i] == 0 ? "="
                              : p[i] >= 0x20 && p[i] < 0x7f ? "%c"
                              : "\\x%02x", p[i]);
    snprintf(out + k, cap - k, "%s", i < n ? "..." : "");
}

/* KEY of sub-database D as its messages name it: "1234", "\"format\"",
** "(series 3, t=1732170000000, seq 5)", "service=api". */
static const char *key_text(int d, const MDB_val *key, char *out,
                            size_t cap)
{
    uint32_t u32, series, seq;
    uint64_t u64;
    int64_t t;

    if (key->mv_size == sizeof u32 && d != EM_D_META && d != EM_D_POST) {
        memcpy(&u32, key->mv_data, sizeof u32);
        snprintf(out, cap, "%u", u32);
    } else if (key->mv_size == sizeof u64 && d >= EM_T_COUNT &&
               d < 2 * EM_T_COUNT) {
        memcpy(&u64, key->mv_data, sizeof u64);
        snprintf(out, cap, "%#llx", (unsigned long long)u64);
    } else if (key->mv_size == EM_CHUNK_KEY_LEN && d == EM_D_CHUNK) {
        em_chunk_key_parse(key->mv_data, &series, &t, &seq);
        snprintf(out, cap, "(series %u, t=%lld, seq %u)", series,
                 (long long)t, seq);
    } else {
        char b[200];
        bytes_text(key->mv_data, key->mv_size, d == EM_D_POST, b, sizeof b);
        snprintf(out, cap, d == EM_D_META ? "\"%s\"" : "%s", b);
    }
    return out;
}

/* ---- bounds ------------------------------------------------------------------- */

static uintptr_t map_end(const em_map *m)
{
    return __atomic_load_n(&m->end, __ATOMIC_ACQUIRE);
}

/* NULL when PAGE, the leaf page a key or value of sub-database D lies
** on, holds sound nodes (engine/lmdbtree.c), else why not. A thread checks
** a page once per txn begun (map.gen): a cursor then steps only onto nodes
** checked, where LMDB follows a damaged node's flags (to a NULL pointer). */
static const char *leaf_sound(const ember_db *db, int d, uintptr_t page)
{
    uint64_t gen = __atomic_load_n(&db->map.gen, __ATOMIC_RELAXED);
    struct leaf_seen *seen = &tls_leaf[page / db->map.psize % LEAF_CACHE];
    static _Thread_local char why[160];
    const char *bad = NULL;
    uint16_t flags;

    if (seen->page == page && seen->gen == gen)
        return NULL;
    memcpy(&flags, (const void *)(page + PAGE_FLAGS), sizeof flags);
    if (!(flags & P_LEAF))
        bad = "a page that is not a leaf";
    else if (!(flags & P_LEAF2))    /* LEAF2: duplicates, no nodes */
        bad = em_tree_leaf_ok((const uint8_t *)page, db->map.psize,
                              d >= EM_T_COUNT && d < 2 * EM_T_COUNT, false);
    if (bad != NULL) {
        snprintf(why, sizeof why, "on a damaged leaf page (%s)", bad);
        return why;
    }
    *seen = (struct leaf_seen){ page, gen };
    return NULL;
}

/* NULL when [P, P + N), a key or value of sub-database D, lies inside the
** mapped file and within the sound leaf page it starts on, or the run of
** overflow pages it starts (right after the header of the run's first
** page); else why not. */
static const char *val_bounds(const ember_db *db, int d, const void *p,
                              size_t n)
{
    const em_map *m = &db->map;
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)m->base, end, page, lim;
    uint16_t flags = 0;
    uint32_t pages;
    bool over;

    if (m->base == NULL || n == 0)
        return NULL;                /* nothing to check, nothing read */
    if (a - base >= m->len)         /* wraps below the base too */
        return tls_writer == db ? NULL : "outside the database's map";
    end = map_end(m);
    if (a >= end)
        return tls_writer == db ? NULL : "past the end of the file";
    page = a - ((a - base) & (m->psize - 1));
    lim = page + m->psize;
    if (a - page == PAGE_HDR)       /* a leaf's node never starts there */
        memcpy(&flags, (const void *)(page + PAGE_FLAGS), sizeof flags);
    over = a - page == PAGE_HDR && (flags & P_OVERFLOW);
    if (over) {
        memcpy(&pages, (const void *)(page + PAGE_NPAGES), sizeof pages);
        if (pages == 0 || pages > (end - page) / m->psize)
            return "on a run of overflow pages past the end of the file";
        lim = page + (uintptr_t)pages * m->psize;
    }
    if (n > lim - a)
        return over ? "runs past its overflow pages" : "runs past its page";
    return over ? NULL : leaf_sound(db, d, page);
}

int em_val_key(const ember_db *db, int d, const MDB_val *key)
{
    const char *why = val_bounds(db, d, key->mv_data, key->mv_size);

    if (why == NULL)
        return EMBER_OK;
    return EM_CORRUPT("%s: a key of %zu bytes %s", em_dbi_names[d],
                      key->mv_size, why);
}

/* ---- values ---------------------------------------------------------------------- */

/* em_val_get with SUMMED saying whether the value carries a checksum. */
static int val_check(const ember_db *db, int d, const MDB_val *key,
                     const MDB_val *raw, bool summed, const uint8_t **payload,
                     size_t *len)
{
    const char *why = val_bounds(db, d, raw->mv_data, raw->mv_size);
    char kt[256];
    size_t n = raw->mv_size;

    *payload = NULL;
    *len = 0;
    if (why != NULL)
        return EM_CORRUPT("%s %s: a value of %zu bytes %s", em_dbi_names[d],
                          key_text(d, key, kt, sizeof kt), n, why);
    if (summed) {
        if (n < EM_VAL_CRC_LEN)
            return EM_CORRUPT("%s %s: a value of %zu bytes, too short for "
                              "its checksum", em_dbi_names[d],
                              key_text(d, key, kt, sizeof kt), n);
        n -= EM_VAL_CRC_LEN;
        if (em_get_le32((const uint8_t *)raw->mv_data + n) !=
            val_crc(d, key, raw->mv_data, n))
            return EM_CORRUPT("%s %s: checksum mismatch", em_dbi_names[d],
                              key_text(d, key, kt, sizeof kt));
    }
    *payload = raw->mv_data;
    *len = n;
    return EMBER_OK;
}

int em_val_get(const ember_db *db, int d, const MDB_val *key,
               const MDB_val *raw, const uint8_t **payload, size_t *len)
{
    return val_check(db, d, key, raw, val_summed(db, d), payload, len);
}

int em_val_cursor(const ember_db *db, int d, MDB_cursor *cur, MDB_val *k,
                  MDB_val *v, MDB_cursor_op op, int *rc)
{
    const uint8_t *p;
    size_t n;
    int mrc, vrc;

    if (*rc != EMBER_OK)
        return MDB_NOTFOUND;        /* the caller's loop is ending */
    mrc = mdb_cursor_get(cur, k, v, op);
    if (mrc != MDB_SUCCESS)
        return mrc;
    vrc = em_val_key(db, d, k);
    if (vrc == EMBER_OK)
        vrc = em_val_get(db, d, k, v, &p, &n);
    if (vrc != EMBER_OK) {
        *rc = vrc;
        return MDB_CORRUPTED;
    }
    v->mv_data = (void *)p;
    v->mv_size = n;
    return MDB_SUCCESS;
}

int em_val_reserve(MDB_txn *txn, const ember_db *db, int d,
                   const MDB_val *key, size_t len, unsigned flags, void **p)
{
    MDB_val k = *key, v = { len + EM_VAL_CRC_LEN, NULL };
    int mrc = mdb_put(txn, db->dbi[d], &k, &v, flags | MDB_RESERVE);

    *p = mrc == MDB_SUCCESS ? v.mv_data : NULL;
    return mrc;
}

void em_val_seal(int d, const MDB_val *key, void *p, size_t len)
{
    em_put_le32((uint8_t *)p + len, val_crc(d, key, p, len));
}

int em_val_put(MDB_txn *txn, const ember_db *db, int d, const MDB_val *key,
               const void *payload, size_t len, unsigned flags)
{
    void *p;
    int mrc = em_val_reserve(txn, db, d, key, len, flags, &p);

    if (mrc == MDB_SUCCESS) {
        memcpy(p, payload, len);
        em_val_seal(d, key, p, len);
    }
    return mrc;
}

ember_db *em_val_db(MDB_txn *txn)
{
    return mdb_env_get_userctx(mdb_txn_env(txn));
}

int em_val_dbi(const ember_db *db, MDB_dbi dbi)
{
    for (int d = 0; d < EM_D_COUNT; d++)
        if (db->dbi[d] == dbi)
            return d;
    return -1;
}

/* ---- the map -------------------------------------------------------------------- */

/* The start and end of the mapping in /proc/self/maps that holds P when
** it maps a file from its start (offset 0); false when none does. */
static bool mapping_of(const void *p, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    bool start = true, found = false;

    if (f == NULL)
        return false;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        unsigned long a, b, off;
        bool whole = strchr(line, '\n') != NULL;
        /* a line longer than the buffer: only its start is parsed */
        if (start && sscanf(line, "%lx-%lx %*s %lx", &a, &b, &off) == 3 &&
            a <= (uintptr_t)p && (uintptr_t)p < b) {
            *lo = a;
            *hi = b;
            found = off == 0;
            break;
        }
        start = whole;
    }
    fclose(f);
    return found;
}

void em_val_map_refresh(ember_db *db)
{
    em_map *m = &db->map;
    MDB_envinfo info;
    uintptr_t end, have;

    if (m->base == NULL || mdb_env_info(db->env, &info) != MDB_SUCCESS)
        return;
    end = (uintptr_t)m->base + ((uintptr_t)info.me_last_pgno + 1) * m->psize;
    /* Only ever raised: a snapshot begun earlier may hold pages up to a
    ** later last page another thread saw (the file never shrinks). */
    have = __atomic_load_n(&m->end, __ATOMIC_RELAXED);
    while (end > have &&
           !__atomic_compare_exchange_n(&m->end, &have, end, false,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    __atomic_fetch_add(&m->gen, 1, __ATOMIC_RELAXED);
}

/* A pointer into the map: the first key of the main database (the name of
** a sub-database), as a read txn sees it; NULL when there is none. */
static const void *map_sample(MDB_txn *txn)
{
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    MDB_dbi main;
    const void *p = NULL;

    if (mdb_dbi_open(txn, NULL, 0, &main) == MDB_SUCCESS &&
        mdb_cursor_open(txn, main, &cur) == MDB_SUCCESS &&
        mdb_cursor_get(cur, &k, &v, MDB_FIRST) == MDB_SUCCESS)
        p = k.mv_data;
    if (cur != NULL)
        mdb_cursor_close(cur);
    return p;
}

void em_val_map_locate(ember_db *db)
{
    em_map *m = &db->map;
    MDB_envinfo info;
    MDB_stat st;
    MDB_txn *txn;
    uintptr_t lo, hi;
    const void *p;

    /* lmdb.h has no call for the map's address (mdb_env_info's is the
    ** fixed address, 0 without MDB_FIXEDMAP): find the mapping of the
    ** file that holds a pointer LMDB handed out. */
    memset(m, 0, sizeof *m);
    if (mdb_env_info(db->env, &info) != MDB_SUCCESS ||
        mdb_env_stat(db->env, &st) != MDB_SUCCESS ||
        mdb_txn_begin(db->env, NULL, MDB_RDONLY, &txn) != MDB_SUCCESS)
        return;
    p = map_sample(txn);
    if (p != NULL && mapping_of(p, &lo, &hi) && hi - lo == info.me_mapsize &&
        (st.ms_psize & (st.ms_psize - 1)) == 0) {
        m->base = (const uint8_t *)lo;
        m->len = hi - lo;
        m->psize = st.ms_psize;
    }
    mdb_txn_abort(txn);
    em_val_map_refresh(db);
}

/* ---- format 1 and its upgrade ------------------------------------------------------ */

int em_val_format_read(MDB_txn *txn, const ember_db *db, uint64_t *fmt)
{
    MDB_val k = { 6, (void *)"format" }, raw;
    const uint8_t *p;
    size_t n;
    int rc, mrc = mdb_get(txn, db->dbi[EM_D_META], &k, &raw);

    *fmt = 0;
    if (mrc == MDB_NOTFOUND)
        return EMBER_OK;
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "meta \"format\"");
    /* The one value whose size says whether values carry a checksum:
    ** version 1 wrote it as 8 bytes, version 2 and later with 4 more. */
    rc = val_check(db, EM_D_META, &k, &raw, raw.mv_size == sizeof *fmt +
                   EM_VAL_CRC_LEN, &p, &n);
    if (rc == EMBER_OK && n != sizeof *fmt)
        rc = EM_CORRUPT("meta \"format\": %zu bytes, expected 8", n);
    if (rc == EMBER_OK)
        memcpy(fmt, p, sizeof *fmt);
    if (rc == EMBER_OK && (*fmt < 2) != (raw.mv_size == sizeof *fmt))
        rc = EM_CORRUPT("meta \"format\": version %llu in a value of %zu "
                        "bytes", (unsigned long long)*fmt, raw.mv_size);
    return rc;
}

int em_val_format_same(MDB_txn *txn, const ember_db *db)
{
    uint64_t fmt;
    int rc = em_val_format_read(txn, db, &fmt);

    if (rc == EMBER_OK && fmt != db->format)
        rc = em_err(EMBER_EFORMAT, "%s: another process upgraded the "
                    "database from format %u to %llu since it was opened "
                    "read-only: open it again", db->dir, db->format,
                    (unsigned long long)fmt);
    return rc;
}

/* Rewrites every value of sub-database D in W's txn with its checksum:
** a copy of the key and value in W's scratch, put back over the value. */
static int upgrade_table(em_wtxn *w, int d)
{
    ember_db *db = w->db;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    em_buf *b = &w->rec;
    int rc = EMBER_OK, mrc = mdb_cursor_open(w->txn, db->dbi[d], &cur);

    for (mrc = mrc ? mrc : em_val_cursor(db, d, cur, &k, &v, MDB_FIRST, &rc);
         mrc == MDB_SUCCESS;
         mrc = em_val_cursor(db, d, cur, &k, &v, MDB_NEXT, &rc)) {
        MDB_val key, val;
        b->len = 0;
        rc = em_buf_reserve(b, k.mv_size + v.mv_size + EM_VAL_CRC_LEN);
        if (rc != EMBER_OK)
            break;
        memcpy(b->p, k.mv_data, k.mv_size);
        memcpy(b->p + k.mv_size, v.mv_data, v.mv_size);
        key = (MDB_val){ k.mv_size, b->p };
        val = (MDB_val){ v.mv_size + EM_VAL_CRC_LEN, b->p + k.mv_size };
        em_val_seal(d, &key, val.mv_data, v.mv_size);
        /* the cursor stays on the entry, so NEXT goes on after it */
        mrc = mdb_cursor_put(cur, &key, &val, MDB_CURRENT);
        if (mrc != MDB_SUCCESS) {
            rc = em_lmdb(mrc, em_dbi_names[d]);
            break;
        }
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, em_dbi_names[d]);
    return rc;
}

/* The upgrade in one write txn: every value, then the format. */
static int upgrade_try(ember_db *db)
{
    em_wtxn w;
    uint64_t fmt = 0;
    int rc = em_wtxn_begin(db, &w);

    if (rc != EMBER_OK)
        return rc;
    rc = em_val_format_read(w.txn, db, &fmt);
    for (int d = 0; rc == EMBER_OK && fmt == 1 && d < EM_D_COUNT; d++)
        if (d < EM_T_COUNT || d >= 2 * EM_T_COUNT)   /* not hash indexes */
            rc = upgrade_table(&w, d);
    if (rc == EMBER_OK && fmt == 1)
        rc = em_meta_put_u64(w.txn, db, "format", EM_FORMAT_VERSION);
    if (rc == EMBER_OK && fmt == 1)
        return em_wtxn_commit(&w);
    em_wtxn_abort(&w);          /* fmt 2: another process was first */
    return rc;
}

int em_val_upgrade(ember_db *db)
{
    int rc;

    pthread_mutex_lock(&db->wlock);
    while ((rc = upgrade_try(db)) == EM_EMAPFULL)
        if ((rc = em_map_grow(db)) != EMBER_OK)
            break;
    pthread_mutex_unlock(&db->wlock);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "%s: upgrading format 1 to %u", db->dir,
                             EM_FORMAT_VERSION);
    db->format = EM_FORMAT_VERSION;
    return EMBER_OK;
}
