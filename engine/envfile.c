/*
** engine/envfile.c: what Ember checks of LMDB's files itself, where LMDB's
** own answer names the wrong cause (issue 12):
**  - data.mdb before LMDB maps it. LMDB 0.9 trusts its meta pages: an empty
**    file is taken for a new environment (a read-only open then fails
**    writing the first meta page, "Bad file descriptor"), a page size of 0
**    divides by zero, a damaged last page sizes a map of exabytes ("out of
**    memory") and a file cut short faults (SIGBUS) on the first read past
**    its end.
**  - A failed write. LMDB returns EIO for a short write, which is what a
**    write that fills the file system returns (mdb_page_flush: "short
**    write, filesystem full?"; mdb_env_write_meta and mdb_env_init_meta
**    the same), so the free space decides what to say.
**  - lock.mdb, which LMDB makes sparse (ftruncate) and writes through a
**    shared map: on a full tmpfs the first store is a SIGBUS. A lock file
**    Ember creates gets its blocks first, so a full disk is ENOSPC.
**  - A refused open: which of the directory and its two files this user
**    may not read or write.
**  - A database that went back in time (issue 15): LMDB opens the meta
**    page with the greater txn id, so a flipped high bit of the older
**    one's id made it open an older snapshot (empty, in the issue) with
**    nothing to say so. LMDB writes commit N to meta page N & 1, and a
**    commit that changes nothing takes no id: the two ids of a healthy
**    file are one apart, the even one in page 0, or both 0 (a new file).
**    kill -9 keeps that (the page cache has every write); so do a full
**    disk (LMDB writes the old meta back) and mdb_copy (ids 0 and 1).
**
** The meta page is LMDB 0.9's, which lmdb.h does not publish. With P the
** size of a pointer (8 on the hosts Ember supports): a page header of
** P + 8 bytes, then MDB_meta: magic u32 0xBEEFC0DE, data version u32 (1),
** address (P), map size (P), two MDB_db of 8 + 5P bytes (the free list's,
** whose first u32 is the page size, then the main database's; each ends
** with its root page, P), the last page number (P), the txn id (P). Page
** 0 and page 1 (at the page size) each hold one; LMDB uses the one with
** the greater txn id.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine/store.h"

#define P sizeof(size_t)
#define META_AT (P + 8)                     /* after the page header */
#define META_MAGIC (META_AT)
#define META_VERSION (META_AT + 4)
#define META_MAPSIZE (META_AT + 8 + P)
#define META_PSIZE (META_AT + 8 + 2 * P)    /* the free list's md_pad */
#define META_FREE_ROOT (META_PSIZE + 8 + 4 * P)
#define META_MAIN_ROOT (META_FREE_ROOT + 8 + 5 * P)
#define META_LAST (META_AT + 8 + 2 * P + 2 * (8 + 5 * P))
#define META_TXNID (META_LAST + P)
#define META_END (META_TXNID + P)

#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
/* No map larger than this can be mapped: 47 bits is x86-64's user address
** space, and the common arm64 one (48) is not much more. */
#define EM_MAP_MAX (1ull << 47)
/* A failed write with less than this free is taken for a full file system:
** after a short write the kernel leaves less than a block. */
#define EM_SPACE_LOW (1ull << 20)
/* Reads of the meta pages before a txn id out of sequence is damage: a
** writer may commit between the reads of the two pages, but not thrice. */
#define EM_META_READS 3
#define P_INVALID UINT64_MAX                /* LMDB's root of an empty db */

typedef struct envmeta {
    uint32_t magic, version, psize;
    uint64_t mapsize, last, txnid;
    uint64_t root[2];                       /* free list, main database */
} envmeta;

static uint64_t get_word(const uint8_t *p)
{
    size_t v;
    memcpy(&v, p, sizeof v);                /* host order, as LMDB wrote it */
    return v;
}

static void meta_parse(const uint8_t *pg, envmeta *m)
{
    memcpy(&m->magic, pg + META_MAGIC, 4);
    memcpy(&m->version, pg + META_VERSION, 4);
    memcpy(&m->psize, pg + META_PSIZE, 4);
    m->mapsize = get_word(pg + META_MAPSIZE);
    m->last = get_word(pg + META_LAST);
    m->txnid = get_word(pg + META_TXNID);
    m->root[0] = get_word(pg + META_FREE_ROOT);
    m->root[1] = get_word(pg + META_MAIN_ROOT);
    if (P < 8) {                            /* P_INVALID is ~(pgno_t)0 */
        for (int i = 0; i < 2; i++)
            if (m->root[i] == (uint64_t)(size_t)-1)
                m->root[i] = P_INVALID;
    }
}

/* Magic and version of meta page I (EMBER_EFORMAT: not LMDB's). */
static int meta_ident(const char *path, int i, const envmeta *m)
{
    if (m->magic != LMDB_MAGIC)
        return em_err(EMBER_EFORMAT, "%s: not an LMDB file (meta page %d: "
                      "magic %#x, LMDB writes %#x on a host of this byte "
                      "order)", path, i, m->magic, LMDB_MAGIC);
    if (m->version != LMDB_DATA_VERSION)
        return em_err(EMBER_EFORMAT, "%s: LMDB data version %u, this LMDB "
                      "reads version %u", path, m->version,
                      LMDB_DATA_VERSION);
    return EMBER_OK;
}

/* The current meta page (I, M) against the SIZE bytes of the file. */
static int meta_check(const char *path, int i, const envmeta *m, off_t size)
{
    if (m->last < 1 || m->last >= (uint64_t)size / m->psize)
        return EM_CORRUPT("%s: damaged meta page %d (txn %llu), or a "
                          "truncated file: its last page is %llu (%#llx), "
                          "the file's %lld bytes hold pages 0 to %llu of %u "
                          "bytes", path, i, (unsigned long long)m->txnid,
                          (unsigned long long)m->last,
                          (unsigned long long)m->last, (long long)size,
                          (unsigned long long)((uint64_t)size / m->psize) - 1,
                          m->psize);
    if (m->mapsize > EM_MAP_MAX)
        return EM_CORRUPT("%s: damaged meta page %d (txn %llu): map size "
                          "%llu bytes (%#llx), more than an address space "
                          "holds", path, i, (unsigned long long)m->txnid,
                          (unsigned long long)m->mapsize,
                          (unsigned long long)m->mapsize);
    for (int r = 0; r < 2; r++)
        if (m->root[r] != P_INVALID && (m->root[r] < 2 ||
                                        m->root[r] > m->last))
            return EM_CORRUPT("%s: damaged meta page %d (txn %llu): the %s "
                              "root is page %llu (%#llx), past its last "
                              "page %llu", path, i,
                              (unsigned long long)m->txnid,
                              r == 0 ? "free list's" : "main database's",
                              (unsigned long long)m->root[r],
                              (unsigned long long)m->root[r],
                              (unsigned long long)m->last);
    return EMBER_OK;
}

/* NULL when the txn ids of meta pages M[0] and M[1] are in LMDB's
** sequence (the header), else which rule they break, and in *PAGE the
** page that breaks it, or the one LMDB would open. */
static const char *metas_sequence(const envmeta m[2], int *page)
{
    uint64_t a = m[0].txnid, b = m[1].txnid;

    *page = b > a;
    if (a == 0 && b == 0)
        return NULL;                        /* a new file */
    if (a % 2 != 0) {
        *page = 0;
        return "page 0 holds an odd one";
    }
    if (b % 2 != 1) {
        *page = 1;
        return "page 1 holds an even one";
    }
    if ((a > b ? a - b : b - a) != 1)
        return "they are not one apart";
    return NULL;
}

/* Reads meta pages 0 and 1 of FD (SIZE bytes) into M and checks them. */
static int metas_read(const char *path, int fd, off_t size, envmeta m[2])
{
    uint8_t pg[META_END];
    int rc;

    for (int i = 0; i < 2; i++) {
        off_t at = i == 0 ? 0 : (off_t)m[0].psize;
        if (pread(fd, pg, sizeof pg, at) != (ssize_t)sizeof pg)
            return EM_CORRUPT("%s: truncated to %lld bytes: LMDB's meta "
                              "page %d needs %lld", path, (long long)size, i,
                              (long long)(at + (off_t)sizeof pg));
        meta_parse(pg, &m[i]);
        if ((rc = meta_ident(path, i, &m[i])) != EMBER_OK)
            return rc;
        if (m[i].psize < 512 || m[i].psize > 65536 ||
            (m[i].psize & (m[i].psize - 1)) != 0)
            return EM_CORRUPT("%s: damaged meta page %d: page size %u",
                              path, i, m[i].psize);
    }
    if (m[1].psize != m[0].psize)
        return EM_CORRUPT("%s: damaged meta page 1: page size %u, meta page "
                          "0 says %u", path, m[1].psize, m[0].psize);
    return EMBER_OK;
}

/* Reads both meta pages of FD (PATH) into M, again while their txn ids
** are out of sequence (a writer may have committed between the reads),
** and fails naming both ids when they stay so. */
static int metas_check(const char *path, int fd, envmeta m[2])
{
    const char *why = NULL;
    struct stat st;
    int rc = EMBER_OK, page = 0;

    for (int i = 0; i < EM_META_READS && rc == EMBER_OK; i++) {
        if (fstat(fd, &st) != 0)
            return em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
        rc = metas_read(path, fd, st.st_size, m);
        if (rc == EMBER_OK && (why = metas_sequence(m, &page)) == NULL)
            return EMBER_OK;
    }
    if (rc != EMBER_OK)
        return rc;
    return EM_CORRUPT("%s: damaged meta page %d, or a database that went "
                      "back in time: meta page 0 holds txn %llu (%#llx), "
                      "meta page 1 txn %llu (%#llx), and %s (LMDB writes "
                      "txn N to page N %% 2, the two one txn apart)", path,
                      page, (unsigned long long)m[0].txnid,
                      (unsigned long long)m[0].txnid,
                      (unsigned long long)m[1].txnid,
                      (unsigned long long)m[1].txnid, why);
}

int em_envfile_check(const char *dir, bool rdonly)
{
    char path[4096];
    envmeta m[2];
    struct stat st;
    int fd, rc, cur;

    snprintf(path, sizeof path, "%s/data.mdb", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return rdonly ? em_err(EMBER_ENOTFOUND, "%s: no database here (no "
                               "data.mdb)", dir) : EMBER_OK;
    if (fd < 0)
        return errno == EACCES ? em_envfile_denied(dir, rdonly)
               : em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        rc = em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = em_err(EMBER_EFORMAT, "%s: not a regular file", path);
    } else if (st.st_size == 0) {
        /* LMDB makes a new environment of an empty file: fine for a
        ** writer, which would create one anyway; nothing for a reader. */
        rc = rdonly ? em_err(EMBER_EFORMAT, "%s: empty file (0 bytes): no "
                             "database was ever written here, or the file "
                             "was truncated", path) : EMBER_OK;
    } else {
        rc = metas_check(path, fd, m);
        /* The size after the meta: a writer extends the file before it
        ** writes the meta page that counts the new pages. */
        if (rc == EMBER_OK && fstat(fd, &st) != 0)
            rc = em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
        cur = rc == EMBER_OK && m[1].txnid > m[0].txnid;
        if (rc == EMBER_OK)
            rc = meta_check(path, cur, &m[cur], st.st_size);
    }
    close(fd);
    return rc;
}

/* "12.0 KiB": N bytes for a message. */
static const char *bytes_text(uint64_t n, char *out, size_t cap)
{
    static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)n;
    size_t u = 0;

    while (v >= 1024 && u + 1 < EM_ARRAY_LEN(unit)) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%llu bytes", (unsigned long long)n);
    else
        snprintf(out, cap, "%.1f %s", v, unit[u]);
    return out;
}

/* *AVAIL, the bytes this user may still write on DIR's file system, and
** "N free of M" in OUT; false when the file system does not say. */
static bool space_of(const char *dir, uint64_t *avail, char *out, size_t cap)
{
    struct statvfs vfs;
    char a[32], b[32];

    if (statvfs(dir, &vfs) != 0)
        return false;
    /* f_bavail, not f_bfree: even root meets ENOSPC on ext4 with its
    ** reserved clusters still counted free. */
    *avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    snprintf(out, cap, "%s free of %s", bytes_text(*avail, a, sizeof a),
             bytes_text((uint64_t)vfs.f_blocks * vfs.f_frsize, b, sizeof b));
    return true;
}

int em_envfile_write_err(const char *dir, int mrc, const char *what)
{
    char space[80];
    uint64_t avail;

    if (mrc == EDQUOT)
        return em_err(EMBER_EIO, "%s: %s: disk quota exceeded", dir, what);
    if ((mrc != EIO && mrc != ENOSPC) ||
        !space_of(dir, &avail, space, sizeof space))
        return em_err_prefix(em_lmdb(mrc, what), "%s", dir);
    if (mrc == ENOSPC || avail < EM_SPACE_LOW)
        return em_err(EMBER_EIO, "%s: %s: no space left on device (%s on "
                      "its file system)", dir, what, space);
    return em_err(EMBER_EIO, "%s: %s: Input/output error (a device or file "
                  "system fault: %s, so the file system is not full)", dir,
                  what, space);
}

int em_envfile_lock_prepare(const char *dir, unsigned maxreaders)
{
    /* LMDB's lock file: two 64-byte cache lines of header, then one line
    ** per reader slot past the first (sizeof MDB_txninfo, MDB_reader). */
    uint64_t bytes = (uint64_t)(maxreaders + 2) * 64, avail;
    char path[4096], need[32], space[80] = "";
    int fd, e = 0;

    snprintf(path, sizeof path, "%s/lock.mdb", dir);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return EMBER_OK;    /* it exists, or LMDB will say why it cannot */
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) != 0)
        e = errno;
    close(fd);
    if (e != ENOSPC && e != EDQUOT)
        return EMBER_OK;    /* done, or a file system without fallocate */
    unlink(path);
    if (e == EDQUOT || !space_of(dir, &avail, space, sizeof space))
        return em_envfile_write_err(dir, e, "open: lock.mdb");
    return em_err(EMBER_EIO, "%s: open: no space left on device: LMDB's "
                  "lock file, lock.mdb, needs %s (%s on its file system)",
                  dir, bytes_text(bytes, need, sizeof need), space);
}

/* 0 when this process (its effective ids) may access DIR/NAME (DIR
** itself when NAME is "") in MODE, else the errno: ENOENT, EACCES. */
static int access_of(const char *dir, const char *name, int mode)
{
    char path[4096];

    snprintf(path, sizeof path, "%s%s%s", dir, *name ? "/" : "", name);
    return faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0 ? 0 : errno;
}

/* Whether FILE of DIR can be opened in MODE: as it is, or created. */
static bool file_ok(const char *dir, const char *file, int mode)
{
    int e = access_of(dir, file, mode);
    return e == 0 || (e == ENOENT && access_of(dir, "", W_OK) == 0);
}

int em_envfile_denied(const char *dir, bool rdonly)
{
    if (access_of(dir, "", X_OK) != 0)
        return em_err(EMBER_EIO, "%s: this user may not enter the directory "
                      "(Permission denied)", dir);
    if (!file_ok(dir, "data.mdb", rdonly ? R_OK : R_OK | W_OK))
        return em_err(EMBER_EIO, "%s/data.mdb: this user may not %s it "
                      "(Permission denied)", dir, rdonly ? "read" : "write");
    if (!rdonly && !file_ok(dir, "lock.mdb", R_OK | W_OK))
        return em_err(EMBER_EIO, "%s/lock.mdb: this user may not write "
                      "LMDB's lock file (Permission denied): writing to a "
                      "database needs write access to data.mdb, lock.mdb "
                      "and their directory; reading needs only read access",
                      dir);
    return em_err(EMBER_EIO, "%s: Permission denied", dir);
}
