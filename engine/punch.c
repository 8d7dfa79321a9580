/*
** engine/punch.c: free pages given back to the file system. LMDB never
** shrinks its file: pages a transaction frees go to its free list, to be
** reused by later writes, and count on disk forever. Once compaction has
** moved the head's old data into blocks, most of the file is free pages.
** This punches holes (fallocate PUNCH_HOLE, the file's size unchanged) in
** the free pages no reader can see, so that `du` counts what is used.
**
** Safe because of how LMDB reuses a page: it takes a page number from the
** free list and writes a whole new page there from memory, never reading
** what was on disk (Ember does not map the file writable). A page freed by
** transaction T may still be read by a snapshot older than T, so only the
** free-list records of transactions older than every reader's snapshot
** are punched, LMDB's own rule for reuse (mdb_find_oldest), and this runs
** while holding a write transaction, so no writer takes pages meanwhile. Readers
** opened without the lock file (a user who may not write it) are not in
** the reader table and are not protected; docs/getting-started.md says so.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/compact.h"

typedef struct oldest {
    uint64_t txnid;
} oldest;

/* mdb_reader_list's callback: one line per reader slot, "pid thread
** txnid", txnid "-" for a slot with no snapshot. */
static int reader_line(const char *msg, void *ctx)
{
    oldest *o = ctx;
    unsigned long long pid, txn;
    char thread[64];

    if (sscanf(msg, "%llu %63s %llu", &pid, thread, &txn) == 3 &&
        txn < o->txnid)
        o->txnid = txn;
    return 0;
}

/* Punches the run of N pages from page PG; adds its bytes to *BYTES. */
static int punch_run(int fd, size_t psize, uint64_t pg, uint64_t n,
                     uint64_t *bytes)
{
    if (n == 0)
        return EMBER_OK;
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  (off_t)(pg * psize), (off_t)(n * psize)) != 0) {
        if (errno == EOPNOTSUPP)    /* a file system without holes */
            return EMBER_DONE;
        return em_err(EMBER_EIO, "punch: pages %llu..%llu: %s",
                      (unsigned long long)pg,
                      (unsigned long long)(pg + n - 1), strerror(errno));
    }
    *bytes += n * psize;
    return EMBER_OK;
}

/* Punches the pages of one free-list record: a count, then page numbers
** in descending order (LMDB's IDL), merged into runs. */
static int punch_record(int fd, size_t psize, const MDB_val *d,
                        uint64_t *bytes)
{
    const size_t *ids = d->mv_data;
    size_t n = d->mv_size / sizeof *ids;
    uint64_t start = 0, len = 0;
    int rc = EMBER_OK;

    if (n == 0 || ids[0] != n - 1)
        return EM_CORRUPT("LMDB free list: a record of %zu ids says %zu", n,
                          n ? ids[0] : 0);
    for (size_t i = n - 1; i >= 1 && rc == EMBER_OK; i--) {
        uint64_t pg = ids[i];
        if (len > 0 && pg == start + len) {
            len++;
            continue;
        }
        rc = punch_run(fd, psize, start, len, bytes);
        start = pg;
        len = 1;
    }
    return rc == EMBER_OK ? punch_run(fd, psize, start, len, bytes) : rc;
}

/* Punches what RTXN's free list holds for transactions older than every
** reader; the caller holds the write transaction WTXN meanwhile. */
int em_readers_oldest(ember_db *db, uint64_t *txnid)
{
    oldest o = { UINT64_MAX };
    int dead = 0, mrc = mdb_reader_check(db->env, &dead);

    if (mrc == MDB_SUCCESS && mdb_reader_list(db->env, reader_line, &o) < 0)
        mrc = EIO;
    *txnid = o.txnid;
    return em_lmdb(mrc, "reader table");
}

static int punch_txn(ember_db *db, MDB_txn *wtxn, MDB_txn *txn,
                     uint64_t *bytes)
{
    oldest o = { mdb_txn_id(wtxn) - 1 };  /* the last commit */
    MDB_cursor *cur = NULL;
    MDB_stat st;
    MDB_val k, d;
    uint64_t readers;
    int fd = -1, rc = em_readers_oldest(db, &readers), mrc = MDB_SUCCESS;

    if (rc != EMBER_OK)
        return rc;
    o.txnid = readers < o.txnid ? readers : o.txnid;
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_stat(db->env, &st);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_env_get_fd(db->env, &fd);
    if (mrc == MDB_SUCCESS)
        mrc = mdb_cursor_open(txn, 0, &cur);    /* 0: LMDB's free list */
    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        size_t freed_by;
        if (k.mv_size != sizeof freed_by) {
            rc = EM_CORRUPT("LMDB free list: key of %zu bytes", k.mv_size);
            break;
        }
        memcpy(&freed_by, k.mv_data, sizeof freed_by);
        /* snapshot S reads no page freed by S or before; ascending keys:
        ** the rest are newer */
        if (freed_by > o.txnid)
            break;
        rc = punch_record(fd, st.ms_psize, &d, bytes);
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == EMBER_DONE)
        rc = EMBER_OK;
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "punch: free list");
    return rc;
}

int em_punch_free(ember_db *db, uint64_t *bytes)
{
    em_wtxn w;
    int rc;

    *bytes = 0;
    pthread_mutex_lock(&db->wlock);
    rc = em_wtxn_begin(db, &w);
    if (rc == EMBER_OK) {
        /* LMDB reads its free list only in a read transaction; begun
        ** while this holds the writer's lock, it sees the last commit,
        ** which no writer changes meanwhile (MDB_NOTLS allows both) */
        MDB_txn *r = NULL;
        rc = em_lmdb(mdb_txn_begin(db->env, NULL, MDB_RDONLY, &r),
                     "punch: begin");
        if (rc == EMBER_OK)
            rc = punch_txn(db, w.txn, r, bytes);
        if (r != NULL)
            mdb_txn_abort(r);
        em_wtxn_abort(&w);          /* nothing was written */
    }
    pthread_mutex_unlock(&db->wlock);
    return rc;
}
