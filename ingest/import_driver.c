/*
** ingest/import_driver.c: the public import calls. ember_import decodes one
** buffer and writes it in one transaction (em_import); ember_import_files is
** the driver `ember import`, the server and embedders share: it walks paths
** (ingest/walk.c), reads each file whole, decodes it into a profile set and
** writes it into the batch's transaction.
**
** Why batches: importing thousands of small pprof files costs thousands of
** fsyncs with one transaction per file, so good files go many to a
** transaction. Each file is written into the batch's transaction as soon as
** it is decoded and its set is reset, so memory stays small and warm
** (holding a batch of decoded sets touched fresh pages for every file).
** Decoding already refused what the engine would refuse, so a write fails
** only for out-of-memory or I/O; should one fail, or the commit, the batch
** is dropped and each of its files decoded and written again alone, so one
** file's failure never takes the others down and each file stays
** all-or-nothing. Directories are walked recursively in name order so that
** imports are reproducible.
**
** Options are checked whole (labels, type, format, flags) before any file is
** read: a bad -l must not be reported once per file, after reading them.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

#define BATCH_MAX_FILES 4096                /* files per transaction */
#define BATCH_MAX_BYTES (64ull << 20)       /* decoded input per transaction */
/* A set of more stacks drops its indexes before it is written, a third of
** its memory at the peak of a big import (docs/ingest.md, "Memory"); a
** smaller one keeps them for the next file (em_pset_reset). */
#define TRIM_STACKS (1u << 18)

_Static_assert(EMBER_FORMAT_AUTO == (int)EM_FORMAT_AUTO &&
               EMBER_FORMAT_PPROF == (int)EM_FORMAT_PPROF &&
               EMBER_FORMAT_COLLAPSED == (int)EM_FORMAT_COLLAPSED &&
               EMBER_FORMAT_PERF == (int)EM_FORMAT_PERF,
               "public and internal format numbers agree");

typedef struct import_run {
    ember_db *db;
    em_import_opts opts;            /* normalized; origin, time per file */
    bool fixed_time;                /* EMBER_IMPORT_TIME: opts.time_ms holds */
    ember_import_hooks hooks;
    ember_import_stats st;
    ember_txn *txn;                 /* the open batch, or NULL */
    char **batch;                   /* its files' paths, for a retry */
    size_t nbatch;
    uint64_t batch_bytes;
    em_pset_counts batch_counts;    /* written in the batch, not committed */
    bool batch_failed;              /* a write failed: retry file by file */
    em_pset set;                    /* each file's, reset between files */
    int first_rc;                   /* the first failure, for the result */
    char *first_msg;                /* its message (NULL: none, or no memory) */
} import_run;

/* ---- options and stats ------------------------------------------------------ */

/* Checks the public OPTS (NULL: defaults) and makes the normalized internal
** options *O of them; *FLAGS gets opts->flags. Nothing is read yet. */
static int opts_convert(const ember_import_opts *opts, em_import_opts *o,
                        unsigned *flags)
{
    ember_import_opts p = { 0 };
    em_import_opts raw = { .sz = sizeof raw };
    int rc;

    if (opts != NULL) {
        if (opts->sz == 0)
            return em_err(EMBER_EINVAL, "import options: sz is not set");
        memcpy(&p, opts, opts->sz < sizeof p ? opts->sz : sizeof p);
    }
    if (p.format < EMBER_FORMAT_AUTO || p.format > EMBER_FORMAT_PERF)
        return em_err(EMBER_EINVAL, "import options: format %d is not known",
                      p.format);
    if ((p.flags & ~(unsigned)(EMBER_IMPORT_TIME | EMBER_IMPORT_COMM |
                               EMBER_IMPORT_NUMERIC_LABELS)) != 0)
        return em_err(EMBER_EINVAL, "import options: unknown flags %#x",
                      p.flags);
    rc = em_labels_check(p.labels, p.nlabels);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "import options");
    raw.origin = p.origin;
    raw.type = p.type;
    raw.name = p.name;
    raw.labels = p.labels;
    raw.nlabels = p.nlabels;
    raw.time_ms = p.time_ms;
    raw.window_ms = p.window_ms;
    raw.max_bytes = p.max_bytes;
    raw.format = (em_format)p.format;
    raw.comm_prefix = (p.flags & EMBER_IMPORT_COMM) != 0;
    raw.numeric_labels = (p.flags & EMBER_IMPORT_NUMERIC_LABELS) != 0;
    *flags = p.flags;
    return em_import_opts_norm(&raw, o);
}

/* Copies ST into the caller's OUT (NULL: nowhere), as much as its sz says. */
static void stats_put(ember_import_stats *out, const ember_import_stats *st)
{
    size_t sz;

    if (out == NULL)
        return;
    sz = out->sz < sizeof *st ? out->sz : sizeof *st;
    memcpy(out, st, sz);
    out->sz = sz;
}

/* The limits an input meets before it is decoded: EM_IMPORT_MAX_FILE for
** what is read whole, and O's max_bytes for input that is not gzipped
** (gzipped input meets it as it inflates), so that the limit means the
** same for both. */
static int input_check(const em_import_opts *o, const void *buf, size_t len)
{
    if (len > EM_IMPORT_MAX_FILE)
        return em_err(EMBER_ELIMIT, "%s: larger than %llu bytes", o->origin,
                      (unsigned long long)EM_IMPORT_MAX_FILE);
    if (!em_is_gzip(buf, len) && len > o->max_bytes)
        return em_err(EMBER_ELIMIT, "%s: %zu bytes, more than the limit of "
                      "%llu", o->origin, len,
                      (unsigned long long)o->max_bytes);
    return EMBER_OK;
}

static int64_t clock_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ember_import and ember_txn_import: into TXN when it is not NULL, else
** into DB in a transaction of its own. */
static int import_one(ember_db *db, ember_txn *txn, const void *buf,
                      size_t len, const ember_import_opts *opts,
                      ember_import_stats *stats)
{
    ember_import_stats st = { .sz = sizeof st, .files = 1 };
    em_import_stats es;
    em_import_opts o;
    unsigned flags = 0;
    int rc;

    if (stats != NULL && stats->sz == 0)
        return em_err(EMBER_EINVAL, "import: stats sz is not set");
    if ((db == NULL && txn == NULL) || (buf == NULL && len > 0))
        rc = em_err(EMBER_EINVAL, "import: no %s", buf == NULL && len > 0
                    ? "buffer" : "database");
    else
        rc = opts_convert(opts, &o, &flags);
    if (rc == EMBER_OK)
        rc = input_check(&o, buf, len);
    if (rc == EMBER_OK && (flags & EMBER_IMPORT_TIME) == 0)
        o.time_ms = clock_ms();
    if (rc == EMBER_OK)
        rc = txn != NULL ? em_import_txn(txn, buf, len, &o, &es)
                         : em_import(db, buf, len, &o, &es);
    if (rc == EMBER_OK) {
        st.profiles = es.profiles;
        st.samples = es.samples;
        st.bytes = st.read_bytes = es.bytes;
        st.read_samples = es.lines;
    } else {
        st.failed = 1;
    }
    stats_put(stats, &st);
    return rc;
}

EMBER_API int ember_import(ember_db *db, const void *buf, size_t len,
                           const ember_import_opts *opts,
                           ember_import_stats *stats)
{
    return import_one(db, NULL, buf, len, opts, stats);
}

EMBER_API int ember_txn_import(ember_txn *txn, const void *buf, size_t len,
                               const ember_import_opts *opts,
                               ember_import_stats *stats)
{
    return import_one(NULL, txn, buf, len, opts, stats);
}

/* ---- reporting ---------------------------------------------------------------- */

static void progress(import_run *r)
{
    if (r->hooks.progress != NULL)
        r->hooks.progress(r->hooks.ctx, &r->st);
}

/* PATH failed with RC, the thread's message saying why: the message is made
** to start with PATH (ingest messages mostly do already), kept when it is
** the first failure, and handed to the hook. */
static void report(import_run *r, const char *path, int rc)
{
    const char *msg = em_errmsg();

    if (strncmp(msg, path, strlen(path)) != 0)
        em_err_prefix(rc, "%s", path);
    msg = em_errmsg();
    if (r->first_rc == EMBER_OK) {
        r->first_rc = rc;
        r->first_msg = em_strdup(msg);
    }
    if (r->hooks.failed != NULL)
        r->hooks.failed(r->hooks.ctx, path, rc, msg);
}

static void file_failed(import_run *r, const char *path, int rc)
{
    r->st.failed++;
    report(r, path, rc);
}

static void path_failed(import_run *r, const char *path, int rc)
{
    r->st.bad_paths++;
    report(r, path, rc);
}

/* ---- reading a file ------------------------------------------------------------- */

/* The time of a file whose content has none: the options' fixed time, else
** its name's or mtime (em_walk_file_time). */
static int64_t file_time(const import_run *r, const char *path,
                         const struct stat *st)
{
    return r->fixed_time ? r->opts.time_ms : em_walk_file_time(path, st);
}

/* Decodes the file open at FD (PATH, ST its fstat) into *SET, empty (zeroed
** or em_pset_reset); em_pset_free it, also on failure. */
static int decode_fd(import_run *r, const char *path, int fd,
                     const struct stat *st, em_pset *set)
{
    em_import_opts o = r->opts;
    char *buf = NULL;
    size_t len = 0;
    int rc;

    o.origin = path;
    o.time_ms = file_time(r, path, st);
    rc = em_walk_read(fd, st, &buf, &len);
    if (rc == EMBER_OK)
        rc = input_check(&o, buf, len);
    if (rc == EMBER_OK)
        rc = em_decode(buf, len, &o, set);
    em_free(buf);
    return rc;
}

/* Opens PATH and decodes it into *SET, as decode_fd. */
static int decode_path(import_run *r, const char *path, em_pset *set)
{
    struct stat st;
    int fd = em_walk_open(AT_FDCWD, path, &st), rc;

    memset(set, 0, sizeof *set);
    if (fd < 0)
        return em_err(EMBER_EIO, "%s", strerror(errno));
    rc = decode_fd(r, path, fd, &st, set);
    close(fd);
    return rc;
}

/* ---- batches ---------------------------------------------------------------------- */

static void count_written(import_run *r, const em_pset_counts *c,
                          uint64_t bytes)
{
    r->st.profiles += c->profiles;
    r->st.samples += c->samples;
    r->st.bytes += bytes;
}

/* Writes PATH alone in its own transaction, decoding it again. */
static void write_alone(import_run *r, const char *path)
{
    em_pset set;
    em_pset_counts c = { 0 };
    ember_txn *txn = NULL;
    int rc = decode_path(r, path, &set);

    if (rc == EMBER_OK)
        rc = ember_txn_begin(r->db, &txn);
    if (rc == EMBER_OK && (rc = em_pset_write(txn, &set, &c)) != EMBER_OK)
        ember_txn_abort(txn);
    else if (rc == EMBER_OK)
        rc = ember_txn_commit(txn);
    if (rc == EMBER_OK)
        count_written(r, &c, set.bytes_in);
    else
        file_failed(r, path, rc);
    em_pset_free(&set);
}

/* Commits the batch, or after a failure writes each of its files alone. */
static void batch_flush(import_run *r)
{
    int rc = EMBER_OK;

    if (r->nbatch == 0)
        return;
    if (r->batch_failed)
        ember_txn_abort(r->txn);
    else
        rc = ember_txn_commit(r->txn);
    r->txn = NULL;
    if (!r->batch_failed && rc == EMBER_OK) {
        count_written(r, &r->batch_counts, r->batch_bytes);
    } else {
        for (size_t i = 0; i < r->nbatch; i++)
            write_alone(r, r->batch[i]);
    }
    for (size_t i = 0; i < r->nbatch; i++)
        em_free(r->batch[i]);
    r->nbatch = 0;
    r->batch_bytes = 0;
    r->batch_counts = (em_pset_counts){ 0 };
    r->batch_failed = false;
    progress(r);
}

/* Writes SET (decoded from PATH) into the batch's transaction. */
static int batch_add(import_run *r, const char *path, const em_pset *set)
{
    em_pset_counts c = { 0 };
    char *copy = em_strdup(path);
    int rc = copy != NULL ? EMBER_OK : em_err(EMBER_ENOMEM, "file name");

    if (rc == EMBER_OK && r->txn == NULL && !r->batch_failed)
        rc = ember_txn_begin(r->db, &r->txn);
    if (rc != EMBER_OK) {
        em_free(copy);
        return rc;
    }
    r->batch[r->nbatch++] = copy;
    r->batch_bytes += set->bytes_in;
    if (!r->batch_failed && em_pset_write(r->txn, set, &c) != EMBER_OK)
        r->batch_failed = true;     /* batch_flush retries file by file */
    r->batch_counts.profiles += c.profiles;
    r->batch_counts.samples += c.samples;
    return EMBER_OK;
}

/* Decodes the file open at FD (PATH, ST its fstat) and writes it into the
** batch; a bad file is reported here. */
static void import_file(import_run *r, const char *path, int fd,
                        const struct stat *st)
{
    em_pset *set = &r->set;
    int rc = decode_fd(r, path, fd, st, set);

    r->st.files++;
    if (rc == EMBER_OK) {
        r->st.read_bytes += set->bytes_in;
        r->st.read_samples += set->nsamples;
        if (set->nstacks > TRIM_STACKS)     /* see TRIM_STACKS */
            em_pset_trim(set);
        rc = batch_add(r, path, set);
    }
    em_pset_reset(set);
    if (rc != EMBER_OK) {
        file_failed(r, path, rc);
        return;
    }
    if (r->nbatch == BATCH_MAX_FILES || r->batch_bytes >= BATCH_MAX_BYTES)
        batch_flush(r);
    progress(r);
}

/* ---- walking paths (ingest/walk.c) -------------------------------------------- */

static void on_file(void *ctx, const char *path, int fd, const struct stat *st)
{
    import_file(ctx, path, fd, st);
}

static void on_failed(void *ctx, const char *path, int rc, bool file)
{
    import_run *r = ctx;

    if (file) {
        r->st.files++;              /* a file we may not read: it failed */
        file_failed(r, path, rc);
    } else {
        path_failed(r, path, rc);
    }
}

/* ---- the driver ---------------------------------------------------------------------- */

/* Fills R from the caller's arguments; nothing is read yet. */
static int run_init(import_run *r, ember_db *db, const ember_import_opts *opts,
                    const ember_import_hooks *hooks)
{
    unsigned flags = 0;
    int rc;

    r->db = db;
    r->st.sz = sizeof r->st;
    if (db == NULL)
        return em_err(EMBER_EINVAL, "import: no database");
    if (hooks != NULL) {
        if (hooks->sz == 0)
            return em_err(EMBER_EINVAL, "import hooks: sz is not set");
        memcpy(&r->hooks, hooks, hooks->sz < sizeof r->hooks
                                     ? hooks->sz : sizeof r->hooks);
    }
    if ((rc = opts_convert(opts, &r->opts, &flags)) != EMBER_OK)
        return rc;
    r->fixed_time = (flags & EMBER_IMPORT_TIME) != 0;
    r->batch = em_calloc(BATCH_MAX_FILES, sizeof *r->batch);
    if (r->batch == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for a batch of files");
    return EMBER_OK;
}

EMBER_API int ember_import_files(ember_db *db, const char *const *paths,
                                 size_t n, const ember_import_opts *opts,
                                 const ember_import_hooks *hooks,
                                 ember_import_stats *stats)
{
    import_run r = { 0 };
    int rc;

    if (stats != NULL && stats->sz == 0)
        return em_err(EMBER_EINVAL, "import: stats sz is not set");
    rc = run_init(&r, db, opts, hooks);
    if (rc == EMBER_OK && n > 0 && paths == NULL)
        rc = em_err(EMBER_EINVAL, "import: %zu paths but no path array", n);
    if (rc == EMBER_OK)
        em_walk_paths(&(em_walk_hooks){ .ctx = &r, .file = on_file,
                                        .failed = on_failed }, paths, n);
    if (rc == EMBER_OK) {
        batch_flush(&r);
        rc = r.first_rc;
    }
    if (rc != EMBER_OK && r.first_msg != NULL) {
        uint64_t more = r.st.failed + r.st.bad_paths - 1;
        if (more > 0)
            em_err(rc, "%s (and %llu more)", r.first_msg,
                   (unsigned long long)more);
        else
            em_err(rc, "%s", r.first_msg);
    }
    stats_put(stats, &r.st);
    em_free(r.first_msg);
    em_free(r.batch);
    em_pset_free(&r.set);
    return rc;
}
