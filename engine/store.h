/*
** engine/store.h: private to the storage engine. The ember_db handle, the
** LMDB sub-databases, the interned tables, write and read contexts.
**
** On disk (docs/file-format.md): one LMDB environment in the database
** directory with these named sub-databases:
**   meta       "format" -> u32 version, counters (u64, native endian)
**   str/strh   string id -> bytes + NUL; content hash -> ids (dups)
**   map/maph   mapping id -> record; hash -> ids        (and so on for)
**   fn/fnh     functions, loc/loch locations, stk/stkh stacks,
**   ser/serh   series (type + sorted labels)
**   post       "name\0value" -> roaring bitmap of series ids
**   fpost      function id -> roaring bitmap of stack ids
**   chunk      (series BE32, time BE64 sign-flipped, seq BE32) -> chunk
**   head       series id -> head summary (the unsealed chunks of a series)
** Ids are dense uint32, assigned in order, never reused. From format 2 on,
** every value but the hash indexes' ends in a CRC-32 of the sub-database's
** name, its key and itself (engine/lmdbval.c).
*/
#ifndef EM_STORE_H
#define EM_STORE_H

#include <lmdb.h>
#include <pthread.h>
#include <roaring/roaring.h>

#include "engine/chunk.h"
#include "engine/engine.h"

#define EM_FORMAT_VERSION 2u
#define EM_TYPE_LABEL "__type__"            /* the profile type as a label */
#define EM_MAX_LABELS 64
/* Postings keys are "name\0value" and LMDB keys hold at most 511 bytes. */
#define EM_MAX_LABEL_NAME 64
#define EM_MAX_LABEL_VALUE 400
#define EM_MAX_STACK_DEPTH 65536
#define EM_MAX_LINES 1024
#define EM_MAX_STRING (1u << 20)

/* Internal result: LMDB's map is full. Write runners grow the map and run
** again; it never crosses ember.h. */
#define EM_EMAPFULL (-100)

/* Interned tables, in dependency order. */
enum { EM_T_STRING, EM_T_MAPPING, EM_T_FUNCTION, EM_T_LOCATION, EM_T_STACK,
       EM_T_SERIES, EM_T_COUNT };

/* Sub-database handles: the forward table of T is dbi[T], its reverse
** (hash) index dbi[EM_T_COUNT + T]; then the others. */
enum { EM_D_META = 2 * EM_T_COUNT, EM_D_POST, EM_D_FPOST, EM_D_CHUNK,
       EM_D_HEAD, EM_D_BLOCK, EM_D_COUNT };

extern const char *const em_dbi_names[EM_D_COUNT];
extern const char *const em_table_names[EM_T_COUNT];

typedef struct em_req em_req;       /* a queued append (engine/write.c) */

/* The writer's intern cache (engine/icache.c): record bytes -> id. */
typedef EM_HTAB_TYPE(struct em_icache_slot) em_icache_tab;
typedef struct em_icache {
    em_icache_tab tab;              /* hash, record, id (engine/htab.h) */
    uint8_t *bytes;
    size_t nbytes, cap;
    /* Location id -> its lines' function ids, so that staging a new
    ** stack's function postings needs no location read: lfn[id] is 0
    ** (unknown) or (offset in fns + 1) << 11 | count. */
    uint64_t *lfn;
    size_t nlfn;
    uint32_t *fns;
    size_t nfns, capfns;
} em_icache;

/* The icache's key space of functions by their strings (a "table" after
** the real ones): one probe finds a known function, where interning its
** three strings and then its record takes four. */
#define EM_IC_FUNCTION_TEXT EM_T_COUNT

/* *ID of TABLE's record REC (hash H), when cached. */
bool em_icache_get(const em_icache *c, int table, uint64_t h,
                   const uint8_t *rec, size_t len, uint32_t *id);
/* Caches it; best effort, never fails. */
void em_icache_put(em_icache *c, int table, uint64_t h, const uint8_t *rec,
                   size_t len, uint32_t id);
/* Remembers location LOC's N function ids; best effort, never fails. */
void em_icache_put_lfn(em_icache *c, uint32_t loc, const uint32_t *fns,
                       size_t n);
/* True with *FNS, *N set when LOC's functions are cached. */
bool em_icache_get_lfn(const em_icache *c, uint32_t loc,
                       const uint32_t **fns, size_t *n);
/* Forgets everything: after any abort, whose ids are gone. */
void em_icache_clear(em_icache *c);
void em_icache_free(em_icache *c);

/* The decoded-chunk cache (engine/ccache.c). Its keys name a stored chunk
** for as long as it exists: 8 bytes of source (0: the head; else a block
** id, big-endian) and 16 of place (the head's chunk key; a block's file
** offset, big-endian, and 8 zero bytes). Neither ever names another
** chunk: chunk sequence numbers and block ids are never reused. */
#define EM_CCACHE_KEY_LEN 24
typedef struct em_ccache em_ccache;
typedef struct em_cent em_cent;     /* one cached chunk, held by a reader */

typedef struct em_ccache_info {
    uint64_t hits, misses;          /* lookups that found an entry or not */
    uint64_t evictions;
    uint64_t bytes, entries;        /* held now */
    uint64_t budget;
} em_ccache_info;

/* A cache of BUDGET bytes (decoded arrays plus entry headers). */
int em_ccache_new(uint64_t budget, em_ccache **out);
/* Frees every entry; no reader may hold one. NULL: no-op. */
void em_ccache_free(em_ccache *c);
/* A new epoch for a read context: entries it used are not evicted to make
** room for what it adds. 0 when C is NULL. */
uint64_t em_ccache_epoch(em_ccache *c);
/* The entry for the chunk stored under KEY with checksum CRC and LEN bytes,
** held (em_ccache_release), its header and parts copied into *VIEW (whose
** mem is NULL: the arrays belong to the entry); NULL when absent. */
em_cent *em_ccache_get(em_ccache *c, const uint8_t *key, uint32_t crc,
                       uint64_t len, uint64_t epoch, em_chunk *view);
/* Offers a chunk whose checksum was verified and which is decoded into
** VIEW's arrays, all inside MEM (BYTES bytes): the new entry, held and now
** owning MEM; or NULL (out of room or memory, or another reader was first)
** and the caller keeps MEM. Never fails otherwise. */
em_cent *em_ccache_put(em_ccache *c, const uint8_t *key, uint32_t crc,
                       uint64_t len, uint64_t epoch, const em_chunk *view,
                       void *mem, uint64_t bytes);
/* Adds PARTS, decoded into VIEW's arrays inside MEM (BYTES bytes), to the
** held entry E: true when E took them and MEM; false when E is evicted,
** already has one of them, or there is no room (the caller keeps MEM). */
bool em_ccache_extend(em_ccache *c, em_cent *e, uint64_t epoch,
                      em_chunk *view, unsigned parts, void *mem,
                      uint64_t bytes);
/* Copies into OUT (room for the chunk's nstacks) E's memo for keep set
** KEEP_ID: the chunk's stacks that the set keeps; true with *N set when E
** has it. */
bool em_ccache_memo_get(em_ccache *c, em_cent *e, uint64_t keep_id,
                        em_kept *out, uint32_t *n);
/* Makes LIST (N stacks) E's memo for KEEP_ID, replacing any other; best
** effort. */
void em_ccache_memo_put(em_ccache *c, em_cent *e, uint64_t keep_id,
                        const em_kept *list, uint32_t n);
/* Drops a hold; the last one on an evicted entry frees it. NULL: no-op. */
void em_ccache_release(em_ccache *c, em_cent *e);
/* Counters and sizes; all 0 when C is NULL (the cache is off). */
void em_ccache_stats(em_ccache *c, em_ccache_info *out);

/* Focus and ignore as the dense bitsets of stacks to keep, per handle
** (engine/postings.c), for the snapshots with the same table sizes: tables
** only grow, so equal sizes mean equal answers. Each set made gets a new
** id, never reused, which names it in the chunk cache's memos. A focus
** over a month of blocks and their downsampled copies needs a set per
** block, each query in the same order (fewer slots than blocks and the
** least recently used is always the next one needed): the slots are many,
** found through a hash of their source, and their bitsets' bytes are
** bounded. */
#define EM_KCACHE_BITS 10
#define EM_KCACHE_SLOTS (1 << EM_KCACHE_BITS)
#define EM_KCACHE_BYTES (64u << 20)
typedef struct em_kslot {
    char *focus, *ignore;           /* what it was made for; NULL: none */
    uint32_t nfunctions, nstacks;   /* the snapshot's table sizes */
    uint64_t *bits;                 /* nstacks / 64 + 1 words; NULL: empty
                                    ** slot */
    uint64_t id;
    uint64_t used;                  /* tick of the last use, for LRU */
    uint64_t owner;                 /* its source: 0 the head, else a
                                    ** block's id */
    uint16_t next;                  /* the next slot of its owner's bucket,
                                    ** + 1; 0: none */
} em_kslot;

typedef struct em_kcache {
    pthread_mutex_t mu;
    em_kslot slot[EM_KCACHE_SLOTS];
    uint16_t head[EM_KCACHE_SLOTS]; /* per bucket of owners: a slot + 1 */
    uint64_t tick, last_id;
    size_t bytes;                   /* of the slots' bitsets */
} em_kcache;

void em_kcache_init(em_kcache *k);
void em_kcache_free(em_kcache *k);

/* Buffers a merge keeps between queries (engine/read.c): the handle pools
** a few, so that a query sums into memory a previous query mapped and left
** zeroed instead of faulting in a fresh array over every stack id. */
typedef struct em_mscratch {
    int64_t *sum;                   /* [cap + 1], all 0 */
    uint64_t *seen;                 /* [cap / 64 + 1], all 0 */
    size_t cap;                     /* stack ids they cover */
    void *keys, *tmp_keys;          /* span keys, cap_keys and cap_tmp */
    size_t cap_keys, cap_tmp;
} em_mscratch;

/* A block's dense merge sums, idle: all zero, covering CAP stack ids. */
typedef struct em_bsums {
    int64_t *sum;                   /* [cap + 1] */
    uint64_t *seen;                 /* [cap / 64 + 1] */
    size_t cap;
} em_bsums;

#define EM_MPOOL_SLOTS 4
/* Idle block sums a handle keeps between merges, in bytes: a merge of
** every series over a month of day blocks sums 94 blocks of 141k stacks
** (108 MB), and allocating them anew per query faults every page in. */
#define EM_BSUMS_BYTES (128u << 20)
typedef struct em_mpool {
    pthread_mutex_t mu;
    em_mscratch s[EM_MPOOL_SLOTS];
    size_t n;
    em_bsums *bs;                   /* [nbs]: idle block sums */
    size_t nbs, capbs;
    size_t bsbytes;                 /* theirs, at most EM_BSUMS_BYTES */
} em_mpool;

void em_mpool_init(em_mpool *p);
void em_mpool_free(em_mpool *p);

/* ---- sources: what one snapshot reads (engine/source.c) ------------------ */

/* A snapshot reads the head (the LMDB tables) and the blocks the catalog
** names. Each source numbers its strings, stacks, series, ... from 0; the
** snapshot gives each source a range of every table's virtual ids, the
** head first (base 0, so that with no block a virtual id is a head id):
** virtual id = base + local id. The same content may live in several
** sources under several ids; a merge maps them onto one (engine/canon.c). */
enum { EM_SRC_HEAD = 0, EM_SRC_BLOCK = 1 };

typedef struct em_bhold em_bhold;   /* a block the handle holds open */
typedef struct em_block em_block;   /* engine/block.h */

typedef struct em_src {
    int kind;                       /* EM_SRC_* */
    em_bhold *hold;                 /* BLOCK: the handle's open block, NULL
                                    ** until a question reads the block
                                    ** (em_src_block) */
    em_block *blk;
    ember_db *db;                   /* BLOCK: whose file to open */
    uint64_t id;                    /* BLOCK: its catalog id */
    uint32_t footer_crc;            /* BLOCK: the catalog's footer CRC */
    uint64_t file_size;             /* and size, checked at the open */
    uint32_t n[EM_T_COUNT];         /* local table sizes (STACK: nodes) */
    uint32_t base[EM_T_COUNT];      /* virtual id = base + local id */
    int64_t min_time, max_time;     /* head: INT64_MIN, INT64_MAX */
    int64_t resolution_ms;          /* 0: profiles as stored */
    uint64_t made_from;             /* the block this downsamples, 0: none */
    uint32_t level;
    uint32_t *scanon;               /* [n[SERIES]]: local series -> its
                                    ** canonical virtual id, UINT32_MAX
                                    ** until asked; made on first use */
} em_src;

/* Canonical series: labels (a hash, confirmed by comparing) -> the virtual
** id under which a snapshot first met them. */
typedef EM_HTAB_TYPE(struct em_canon_slot) em_canon_tab;

/* A 128-bit content hash (engine/canon.c). */
typedef struct em_h128 {
    uint64_t a, b;
} em_h128;

/* Canonical stacks of a snapshot (engine/canon.c). */
typedef struct em_canon em_canon;
typedef EM_HTAB_TYPE(struct canon_ent) em_ctab;
/* Where LMDB mapped data.mdb, so that every key and value it hands back is
** checked to lie in the file's pages before it is read (engine/lmdbval.c).
** Set when no txn of the process is active; END only rises, atomically. */
typedef struct em_map {
    const uint8_t *base;            /* NULL: not known, checksums only */
    size_t len;                     /* the map size */
    size_t psize;                   /* LMDB's page size, a power of two */
    uintptr_t end;                  /* past the last page written */
    uint64_t gen;                   /* txns begun: a leaf page is checked
                                    ** once per txn (atomic) */
} em_map;

struct ember_db {
    MDB_env *env;
    MDB_dbi dbi[EM_D_COUNT];
    char *dir;
    ember_open_opts opts;           /* with defaults filled in */
    bool rdonly;
    bool no_catalog;                /* read-only, of a database written
                                    ** before blocks: it has none */
    bool nolock;                    /* read-only without lock.mdb (the
                                    ** user may not write it) */
    pthread_rwlock_t resize_lock;   /* every txn holds it shared; growing
                                    ** the map holds it exclusive */
    pthread_mutex_t wlock;          /* this process's one writer */
    pthread_mutex_t qmu;            /* group commit queue */
    pthread_cond_t qcond;
    em_req *qhead, *qtail;
    bool leader;                    /* a thread is committing a group */
    em_codec *wcodec;               /* the writer's codec (under wlock) */
    em_icache icache;               /* the writer's intern cache (wlock) */
    uint64_t icache_gen;            /* the head_gen its ids belong to */
    pthread_t syncer;               /* EMBER_SYNC_INTERVAL thread */
    bool syncer_running, stopping;
    pthread_mutex_t smu;
    pthread_cond_t scond;
    em_ccache *ccache;              /* decoded chunks; NULL: off */
    em_kcache kcache;               /* focus and ignore stack sets */
    em_mpool mpool;                 /* idle merge buffers */
    pthread_mutex_t bmu;            /* the blocks held open: */
    em_bhold *bopen;                /* a list, by catalog id */
    uint64_t btick;                 /* counts blocks going idle (LRU) */
    unsigned format;                /* the file's format version: 1 only
                                    ** read-only (no checksums), else 2 */
    em_map map;                     /* data.mdb in memory (lmdbval.c) */
};

/* Counters a write transaction keeps in memory and stores in meta. */
typedef struct em_counters {
    uint32_t next[EM_T_COUNT];      /* next id per table */
    /* What the public intern and append calls add to the head's own ids:
    ** raised past every id handed out whenever compaction renumbers the
    ** head (engine/head_gc.c), so that an id from before is refused, never
    ** taken for another record (meta id_base_<table>). */
    uint32_t base[EM_T_COUNT];
    uint64_t profiles, samples;     /* stored so far */
    uint64_t chunk_bytes;           /* payload bytes of every chunk */
    uint64_t max_span;              /* widest chunk, max - min time */
    uint32_t chunk_seq;             /* last chunk sequence number */
} em_counters;

/* Postings staged in a write transaction, flushed (OR-ed into the stored
** bitmaps) at the end of each request so that a failed request drops them
** with its nested LMDB transaction. */
typedef EM_HTAB_TYPE(struct em_staged_ent) em_staged;  /* engine/htab.h */

/* A write context: an LMDB write txn plus the state it changes. */
typedef struct em_wtxn {
    ember_db *db;
    MDB_txn *txn;
    em_counters c;
    em_staged post;                 /* "name\0value" -> new series ids */
    em_staged fpost;                /* function id -> new stack ids */
    em_buf rec;                     /* scratch: record encoding */
    em_buf chunk;                   /* scratch: chunk encoding */
} em_wtxn;

/* A read context: one LMDB read txn (a snapshot). */
typedef struct em_rtxn {
    ember_db *db;
    MDB_txn *txn;
    uint32_t next[EM_T_COUNT];      /* table sizes in this snapshot */
    uint64_t max_span;
    em_codec *codec;
    uint64_t epoch;                 /* in the chunk cache (em_ccache_epoch) */
    em_src *src;                    /* [nsrc]: the head, then blocks */
    uint32_t nsrc;
    uint32_t nsrc_stacks;           /* sources holding any stack: with one,
                                    ** no stack needs matching by content */
    uint32_t vnext[EM_T_COUNT];     /* virtual table sizes, all sources */
    em_canon_tab scanon;            /* canonical series (engine/source.c) */
    em_canon *canon;                /* canonical stacks, made on first use */
    uint64_t head_gen;              /* meta head_gen: bumped whenever the
                                    ** head is renumbered (engine/head_gc.c) */
} em_rtxn;

/* ---- db.c ---------------------------------------------------------------- */

/* Translates an LMDB code into an Ember code with "WHAT: lmdb message". */
int em_lmdb(int mrc, const char *what);
int em_rtxn_begin(ember_db *db, em_rtxn *r);
/* The same with the head as the only source: for verify and stats, which
** look at each block on its own (a damaged block fails em_rtxn_begin). */
int em_rtxn_begin_head(ember_db *db, em_rtxn *r);
/* The same for verify, in two steps: the txn and the codec alone, then,
** once verify found LMDB's trees sound (em_tree_check), the table sizes
** and max_span from em_rtxn_sizes, where a damaged last record of a table
** (its key still gives the size) or meta value does not stop it. */
int em_rtxn_begin_lax(ember_db *db, em_rtxn *r);
int em_rtxn_sizes(em_rtxn *r);
void em_rtxn_end(em_rtxn *r);
/* Begins the LMDB write txn of W (growing the map first when it is nearly
** full) and loads the counters. The caller holds db->wlock. */
int em_wtxn_begin(ember_db *db, em_wtxn *w);
/* Commits (FLUSH first) or aborts W's txn; frees its scratch. */
int em_wtxn_commit(em_wtxn *w);
void em_wtxn_abort(em_wtxn *w);
/* Runs FN(W, CTX) in a write txn of its own under DB's writer lock and
** commits it; a full map is grown and FN run again from the start (so FN
** must not keep state between tries); FN's error aborts it. */
int em_write_run(ember_db *db, int (*fn)(em_wtxn *w, void *ctx), void *ctx);
/* Grows the map (doubling); call with no txn of this thread active. */
int em_map_grow(ember_db *db);
int em_meta_get_u64(MDB_txn *txn, ember_db *db, const char *key,
                    uint64_t *v);
int em_meta_put_u64(MDB_txn *txn, ember_db *db, const char *key, uint64_t v);

/* ---- envfile.c: LMDB's files, checked where LMDB would mislead ---------- */

/* Checks DIR/data.mdb before LMDB maps it: absent (EMBER_ENOTFOUND when
** RDONLY), empty (EMBER_EFORMAT when RDONLY), not LMDB's (EMBER_EFORMAT),
** or meta pages that are damaged or count pages past the end of the file
** (EMBER_ECORRUPT, naming the page and the value). */
int em_envfile_check(const char *dir, bool rdonly);
/* The message for MRC, the failure of WHAT, a write to DIR's environment:
** LMDB reports a short write as EIO, so a full file system is told apart
** by its free space. Returns the Ember code. */
int em_envfile_write_err(const char *dir, int mrc, const char *what);
/* Creates DIR/lock.mdb with its blocks allocated for MAXREADERS when it
** does not exist yet, so that a full disk is an error (EMBER_EIO, "no
** space left on device") and not a fault when LMDB first writes to it. */
int em_envfile_lock_prepare(const char *dir, unsigned maxreaders);
/* The message for a refused open of DIR: which directory or file this user
** may not read or write, and what a writer needs. Returns EMBER_EIO. */
int em_envfile_denied(const char *dir, bool rdonly);

/* ---- public ids: the head's own plus its base ----------------------------- */

/* True when public id ID of TABLE names a head record. */
static inline bool em_public_ok(const em_counters *c, int table, uint32_t id)
{
    if (id == 0 && (table == EM_T_STRING || table == EM_T_MAPPING))
        return true;                /* "" and the unknown mapping: always 0 */
    return id >= c->base[table] && id - c->base[table] < c->next[table];
}

/* The head's own id of public id ID (em_public_ok). */
static inline uint32_t em_public_own(const em_counters *c, int table,
                                     uint32_t id)
{
    if (id == 0 && (table == EM_T_STRING || table == EM_T_MAPPING))
        return 0;
    return id - c->base[table];
}

/* The error for public id ID of TABLE that names nothing, from WHAT. */
int em_public_bad(const em_counters *c, int table, const char *what,
                  uint32_t id);

/* *ID (the head's own) made public when RC is EMBER_OK; returns RC. */
static inline int em_public_id(const em_counters *c, int table, int rc,
                               uint32_t *id)
{
    if (rc == EMBER_OK &&
        !(*id == 0 && (table == EM_T_STRING || table == EM_T_MAPPING)))
        *id += c->base[table];
    return rc;
}
/* ---- lmdbval.c: every value in LMDB, checked before use ------------------ */

#define EM_VAL_CRC_LEN 4            /* the checksum after a value's payload */

/* Checks RAW, the value LMDB handed out for KEY of sub-database D: inside
** the mapped file and its page, then (format 2) its checksum. *PAYLOAD and
** *LEN: the value without its checksum, valid until the txn ends.
** EMBER_ECORRUPT naming the sub-database and key ("stk 1234: checksum
** mismatch"). */
int em_val_get(const ember_db *db, int d, const MDB_val *key,
               const MDB_val *raw, const uint8_t **payload, size_t *len);
/* Checks that KEY, which LMDB handed out for D, lies in its page. */
int em_val_key(const ember_db *db, int d, const MDB_val *key);
/* mdb_cursor_get, then em_val_key and em_val_get on what it found: V gets
** the payload. Returns LMDB's code, or MDB_CORRUPTED with the error in *RC;
** when *RC already holds an error, MDB_NOTFOUND and nothing else, so that
** loops of the form for (mrc = ...; mrc == 0 && rc == 0; mrc = ...) keep
** their body's error. */
int em_val_cursor(const ember_db *db, int d, MDB_cursor *cur, MDB_val *k,
                  MDB_val *v, MDB_cursor_op op, int *rc);
/* Puts LEN bytes of PAYLOAD and its checksum under KEY of D (not a hash
** index) with mdb_put's FLAGS; returns LMDB's code. */
int em_val_put(MDB_txn *txn, const ember_db *db, int d, const MDB_val *key,
               const void *payload, size_t len, unsigned flags);
/* The same in two steps: reserves room for LEN bytes and the checksum in
** *P (MDB_RESERVE), then, once the caller filled them, em_val_seal. */
int em_val_reserve(MDB_txn *txn, const ember_db *db, int d,
                   const MDB_val *key, size_t len, unsigned flags, void **p);
void em_val_seal(int d, const MDB_val *key, void *p, size_t len);
/* This thread runs a write txn of DB (NULL: none any more): pages it
** changed are outside the map, checked by checksum only. */
void em_val_writer(const ember_db *db);
/* Finds the map of DB's file (after open and after every remap, with no
** txn of the process active), then em_val_map_refresh. */
void em_val_map_locate(ember_db *db);
/* Raises the end of the checked pages to the last page committed: at the
** start of every txn. */
void em_val_map_refresh(ember_db *db);
/* The meta value "format" in TXN, of any version (0: none). */
int em_val_format_read(MDB_txn *txn, const ember_db *db, uint64_t *fmt);
/* EMBER_EFORMAT when TXN's format differs from DB's (a read-only handle of
** a format 1 database that another process upgraded). */
int em_val_format_same(MDB_txn *txn, const ember_db *db);
/* Rewrites a format 1 database as format 2 in one write txn. */
int em_val_upgrade(ember_db *db);
/* The handle whose environment TXN is of (its LMDB user context), and the
** sub-database of its handle DBI (-1: none of the 17), for the calls that
** get only a txn or a cursor. */
ember_db *em_val_db(MDB_txn *txn);
int em_val_dbi(const ember_db *db, MDB_dbi dbi);

/* ---- lmdbtree.c: LMDB's B-trees, checked before LMDB walks them -------- */

/* NULL when the leaf page PG (SIZE bytes) holds well-formed nodes: within
** the page, with flags a table of DUPSORT (or the MAIN database, of table
** names) may have; else what is wrong. */
const char *em_tree_leaf_ok(const uint8_t *pg, size_t size, bool dupsort,
                            bool main);
/* For verify: walks every tree of R's snapshot (the free list, the main
** database, the 17 tables) from its root, page by page, without LMDB, and
** reports each damaged page to FN; *NPROBLEMS gets their count. Only
** EMBER_ENOMEM fails it. */
int em_tree_check(em_rtxn *r, ember_problem_fn fn, void *ctx,
                  uint64_t *nproblems);

/* ---- table.c: interned tables ------------------------------------------- */

int em_counters_load(MDB_txn *txn, ember_db *db, em_counters *c);
int em_counters_store(em_wtxn *w);
int em_table_intern(em_wtxn *w, int table, const uint8_t *rec, size_t len,
                    uint32_t *id, bool *created);
/* Finds REC in TABLE without inserting; ENOTFOUND when absent. */
int em_table_find(MDB_txn *txn, ember_db *db, int table, const uint8_t *rec,
                  size_t len, uint32_t *id);
/* The stored record of ID; ENOTFOUND or ECORRUPT. Pointer into the map:
** valid until the txn ends. */
int em_table_get(MDB_txn *txn, ember_db *db, int table, uint32_t id,
                 const uint8_t **rec, size_t *len);
/* The same through CUR, a cursor on TABLE: LMDB's cursor first looks at
** the leaf page it is on, so ids looked up in ascending order (a merged
** profile's stacks) mostly skip the walk down from the root. */
int em_table_get_at(MDB_cursor *cur, int table, uint32_t id,
                    const uint8_t **rec, size_t *len);
/* The same when CUR is on ID - 1: the next record is ID's when the ids
** around it are dense, as they are in an intern table; else a lookup. */
int em_table_next(MDB_cursor *cur, int table, uint32_t id,
                  const uint8_t **rec, size_t *len);
int em_intern_str(em_wtxn *w, const char *s, size_t len, uint32_t *id);
/* What em_series_intern would refuse before writing anything: the labels
** (names, lengths, repeats). */
int em_series_check(const ember_label *labels, size_t n);
/* Series: type and labels to id; new series get their postings staged.
** TYPE was checked by the caller (em_profile_type_check): every append
** checks it once, not once per step. */
int em_series_intern(em_wtxn *w, const char *type, const ember_label *labels,
                     size_t n, uint32_t *id);
/* Mappings, functions (string ids S: name, system name, file) and
** locations (ids checked by the caller): their records interned. */
int em_mapping_intern(em_wtxn *w, uint64_t start, uint64_t limit,
                      uint64_t offset, uint32_t file, uint32_t build,
                      uint32_t *id);
int em_function_intern(em_wtxn *w, const uint32_t s[3], int64_t start_line,
                       uint32_t *id);
int em_location_intern(em_wtxn *w, const ember_location *l, uint32_t *id);
/* Stacks: validated and interned; new ones stage function postings. */
int em_stack_intern(em_wtxn *w, const uint32_t *locs, size_t n,
                    uint32_t *id);

/* Decoded records. Decoders check every field and reference. */
typedef struct em_series_rec {
    uint32_t type;                  /* string id */
    uint32_t nlabels;
    uint32_t names[EM_MAX_LABELS], values[EM_MAX_LABELS];  /* string ids */
} em_series_rec;

int em_series_decode(const uint8_t *p, size_t len, em_series_rec *s);
int em_mapping_decode(const uint8_t *p, size_t len, uint64_t f[3],
                      uint32_t *file, uint32_t *build_id);
int em_function_decode(const uint8_t *p, size_t len, uint32_t s[3],
                       int64_t *start_line);
/* Location: mapping, address and NLINES lines written to FN/LINE (up to
** CAP; *nlines gets the true count). */
int em_location_decode(const uint8_t *p, size_t len, uint32_t *mapping,
                       uint64_t *address, uint32_t *fn, int64_t *line,
                       size_t cap, size_t *nlines);
/* Stack: up to CAP location ids into LOCS, *n the true depth. */
int em_stack_decode(const uint8_t *p, size_t len, uint32_t *locs, size_t cap,
                    size_t *n);

/* ---- postings.c ----------------------------------------------------------- */

int em_staged_add(em_staged *s, const void *key, size_t klen, uint32_t id);
void em_staged_clear(em_staged *s);
void em_staged_free(em_staged *s);
/* The staged bitmap of KEY, or NULL; and a walk over every entry. Both
** bring an entry's bitmap up to date with its pending ids first. */
const roaring_bitmap_t *em_staged_find(em_staged *s, const void *key,
                                       size_t klen);
int em_staged_each(em_staged *s,
                   int (*fn)(void *ctx, const void *key, size_t klen,
                             const roaring_bitmap_t *bm),
                   void *ctx);
/* ORs every staged bitmap into DBI and clears S. */
int em_staged_flush(em_wtxn *w, em_staged *s, MDB_dbi dbi);
/* The bitmap of the N stored bytes at P (engine/bitmap.c); NULL when they
** are not one valid portable bitmap, or when memory runs out (CRoaring
** does not tell them apart). */
roaring_bitmap_t *em_bitmap_decode(const void *p, size_t n);
/* Loads a stored bitmap (NULL-safe key); *out NULL when absent. */
int em_bitmap_get(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen,
                  roaring_bitmap_t **out);
/* Checks the shape of a caller's selector (NULL is fine: everything). */
int em_selector_check(const ember_selector *sel);
/* The series SEL's type and matchers select, ignoring its range. */
int em_select_series(em_rtxn *r, const ember_selector *sel,
                     roaring_bitmap_t **out);
/* ANDs matcher M into ACC, the series of a source (ALL: every one). */
typedef int (*em_match_fn)(void *ctx, const ember_matcher *m,
                           const roaring_bitmap_t *all,
                           roaring_bitmap_t *acc);
/* The series, of NSERIES in a source, that SEL's type and matchers
** select, each matcher applied by APPLY(CTX, ...). */
int em_select_with(uint32_t nseries, const ember_selector *sel,
                   em_match_fn apply, void *ctx, roaring_bitmap_t **out);
/* The stacks through any function whose name matches REGEX (a literal
** compares string ids, the others run over every function name). */
int em_focus_stacks(em_rtxn *r, const char *regex, roaring_bitmap_t **out);
/* The stacks to keep under FOCUS and IGNORE (either may be NULL): through
** a FOCUS function and through no IGNORE function, as a new dense bitset
** *BITS of R's stack count (NULL when both are NULL: keep everything) and
** its id *ID in the handle's keep cache (0 with *BITS NULL): made once per
** table sizes, since a regex runs over every function name. */
int em_keep_get(em_rtxn *r, const char *focus, const char *ignore,
                uint64_t **bits, uint64_t *id);
/* The keep cache behind em_keep_get, for any source: the set for FOCUS
** and IGNORE over the NSTACKS stacks of source OWNER (0: the head, else a
** block id) with NFUNCTIONS functions, made by BUILD(CTX, ...) when not
** cached. */
typedef int (*em_keep_build_fn)(void *ctx, const char *focus,
                                const char *ignore, uint64_t **bits);
int em_keep_cached(ember_db *db, uint64_t owner, uint32_t nfunctions,
                   uint32_t nstacks, const char *focus, const char *ignore,
                   em_keep_build_fn build, void *ctx, uint64_t **bits,
                   uint64_t *id);
/* Checks a matcher's name and operator (EINVAL naming it). */
int em_matcher_check(const ember_matcher *m);

/* ---- meta.c ---------------------------------------------------------------- */

/* The read txn behind snapshot S, for the engine's own reads on it (the
** query layer's em_reader, engine/read.c). */
em_rtxn *em_snapshot_rtxn(ember_snapshot *s);

/* Meta keys "split_label:NAME" (section 12 of docs/file-format.md): the
** label names an import took from a file's content. */
#define EM_SPLIT_LABEL_PREFIX "split_label:"
/* The names noted under EM_SPLIT_LABEL_PREFIX in R's snapshot, sorted, as
** a new *OUT (ember_strlist_free). */
int em_split_labels_read(em_rtxn *r, ember_strlist **out);

/* ---- chunk keys (write.c, read.c) ------------------------------------------ */

#define EM_CHUNK_KEY_LEN 16
void em_chunk_key(uint8_t k[EM_CHUNK_KEY_LEN], uint32_t series, int64_t time,
                  uint32_t seq);
void em_chunk_key_parse(const uint8_t k[EM_CHUNK_KEY_LEN], uint32_t *series,
                        int64_t *time, uint32_t *seq);

/* Visits head series SERIES's chunks that may hold a profile in [FROM,
** TO] (head_chunks.c): FN gets each one's key and stored bytes, in key
** order; its error ends the walk, prefixed with the chunk's key. */
typedef int (*em_head_chunk_fn)(void *ctx, const MDB_val *key,
                                const MDB_val *data);
int em_head_chunks(em_rtxn *r, uint32_t series, int64_t from, int64_t to,
                   em_head_chunk_fn fn, void *ctx);

/* Head summary of a series: its unsealed chunks span [min, max]. */
typedef struct em_head {
    uint32_t nchunks, nprofiles;
    int64_t min_time, max_time;
    uint64_t nsamples;              /* bounds what one seal encodes */
} em_head;

int em_seal_series(em_wtxn *w, uint32_t series, const em_head *h);
/* Stores the chunk encoded in W's chunk scratch as a chunk of SERIES,
** under its earliest time and a new sequence number. */
int em_chunk_store(em_wtxn *w, uint32_t series);

/* ---- source.c: the snapshot's sources ------------------------------------ */

/* Gives R (whose LMDB txn has begun) its sources: the head, then (BLOCKS)
** every block of the catalog, opened through the handle (kept open across
** snapshots); sets the bases and R->vnext. */
int em_sources_open(em_rtxn *r, bool blocks);
void em_sources_close(em_rtxn *r);
/* Closes every block the handle holds (at ember_close). */
void em_blocks_release(ember_db *db);
/* The blocks the handle holds open, and the bytes of their decoded tables
** and content hashes (ember_stats). */
void em_blocks_memory(ember_db *db, uint64_t *open, uint64_t *bytes);
/* The source *SRC and local id *LOCAL of virtual id VID of TABLE;
** EMBER_ENOTFOUND past every source. */
int em_src_find(const em_rtxn *r, int table, uint32_t vid, uint32_t *src,
                uint32_t *local);
/* True when source S may hold profiles in [FROM, TO]. */
bool em_src_overlaps(const em_src *s, int64_t from, int64_t to);
/* Block source S's file, opened (and checked against the catalog) the
** first time a question reads it; the snapshot holds it from then on. */
int em_src_block(em_src *s, em_block **out);
/* The local series of source SRC that SEL's type and matchers select
** (its range and series ids play no part), as a new bitmap. */
int em_src_select(em_rtxn *r, uint32_t src, const ember_selector *sel,
                  roaring_bitmap_t **out);
/* Series LOCAL of source SRC: its type and labels (sorted by name; up to
** EM_MAX_LABELS into LABELS, *N of them), strings living as long as R. */
int em_src_series(em_rtxn *r, uint32_t src, uint32_t local,
                  const char **type, ember_label *labels, size_t *n);
/* The canonical virtual id of series LOCAL of source SRC: the first
** virtual id R met with the same type and labels. */
int em_src_canon_series(em_rtxn *r, uint32_t src, uint32_t local,
                        uint32_t *vid);
/* The keep set of FOCUS and IGNORE over source SRC's local stacks (a new
** bitset, NULL when both are NULL) and its id in the keep cache. */
int em_src_keep(em_rtxn *r, uint32_t src, const char *focus,
                const char *ignore, uint64_t **bits, uint64_t *id);
/* String, mapping, function, location, stack of block source S by local
** id, with every id they name made virtual. ARENA allocates memory that
** lives as long as the caller's snapshot (lines, stacks). */
typedef void *(*em_arena_fn)(void *ctx, size_t n);
int em_bsrc_string(em_src *s, uint32_t id, const char **str, size_t *len);
int em_bsrc_mapping(em_src *s, uint32_t id, ember_mapping *out);
int em_bsrc_function(em_src *s, uint32_t id, ember_function *out);
int em_bsrc_location(em_src *s, uint32_t id, em_arena_fn arena, void *ctx,
                     ember_location *out);
int em_bsrc_stack(em_src *s, uint32_t id, em_arena_fn arena, void *ctx,
                  const uint32_t **locs, size_t *n);

/* The content hashes of nodes LOCAL[0..N) of block source S into OUT,
** each made on first need and kept with the open block (engine/canon.c's
** em_bhash_node). */
int em_src_node_hashes(em_src *s, const uint32_t *local, size_t n,
                       em_h128 *out);

/* ---- canon.c: one stack, one id, across sources ---------------------------- */

struct em_block_syms;
struct em_block_info;
/* One open block's content hashes, made on first need (*MEMO, NULL at
** first, freed with em_bhash_free); *OUT gets node NODE's. Not thread-safe:
** the caller serializes calls on one memo. */
typedef struct em_bhash em_bhash;
int em_bhash_node(em_bhash **memo, const struct em_block_syms *y,
                  const struct em_block_info *in, uint32_t node, em_h128 *out);
void em_bhash_free(em_bhash *b);
/* Bytes B holds (0 for NULL), for the handle's budget of open blocks. */
size_t em_bhash_memory(const em_bhash *b);
/* The canonical virtual ids of stacks LOCAL[0..N) of source SRC: each
** the virtual id under which R first met its content, into VID, and the
** source it is in, into VSRC. */
int em_canon_stacks(em_rtxn *r, uint32_t src, const uint32_t *local,
                    size_t n, uint32_t *vid, uint32_t *vsrc);
void em_canon_free(em_canon *c);

/* ---- catalog.c: the blocks a database holds ------------------------------ */

/* One catalog record (docs/file-format.md: the block table). */
typedef struct em_catalog_rec {
    uint64_t id;
    uint32_t level, footer_crc;
    uint64_t file_size;
    int64_t min_time, max_time, resolution_ms;
    uint64_t nprofiles, nsamples;
    uint32_t nseries, nnodes;
    uint64_t made_from;             /* the block it downsamples; 0: none */
    bool sized;                     /* a version 2 record: the sizes below
                                    ** are the block's (0 in version 1) */
    uint32_t nstrings, nmappings, nfunctions, nlocations;
} em_catalog_rec;

struct em_block_info;
/* Whether block IN is the one REC names: its id, footer checksum and size,
** and its table sizes when REC has them; with ALL, its times, counts,
** resolution and level too (what verify compares). */
bool em_catalog_agrees(const em_catalog_rec *rec,
                       const struct em_block_info *in, bool all);
/* Calls FN for every record of TXN's catalog, by ascending id. */
int em_catalog_walk(MDB_txn *txn, ember_db *db,
                    int (*fn)(void *ctx, const em_catalog_rec *rec),
                    void *ctx);
/* Adds every block of R's catalog to R's sources (CAP: their capacity). */
int em_catalog_each(em_rtxn *r, size_t *cap);
/* Adds the block REC names to R's sources, not yet opened; a version 1
** record, which lacks the table sizes, has its block opened now. */
int em_sources_add_block(em_rtxn *r, size_t *cap, const em_catalog_rec *rec);
/* Enters block B (what its footer says; MADE_FROM: the block it
** downsamples, or 0) in W's catalog, or removes ID. */
int em_catalog_put(em_wtxn *w, const struct em_block_info *b,
                   uint64_t made_from);
int em_catalog_del(em_wtxn *w, uint64_t id);
/* DIR/blocks/ID.block, the file of block ID, into BUF (N bytes). */
void em_block_path(const ember_db *db, uint64_t id, char *buf, size_t n);
/* Whether NAME (in DIR/blocks) is a block's file: *ID, and *TMP for one
** still being written (ID.block.tmp). */
bool em_block_file_id(const char *name, uint64_t *id, bool *tmp);

#endif /* EM_STORE_H */
