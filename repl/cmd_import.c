/*
** repl/cmd_import.c: `ember import`. Each file is read whole, gunzipped when
** gzip'd, its format told by content (or --format), and decoded in memory
** into a profile set; a bad file is reported and skipped before anything is
** written, the others go on, and the exit status says whether any failed.
**
** Good files are written in batches, one transaction (so one fsync) per
** batch: importing thousands of small pprof files costs thousands of
** fsyncs otherwise. Each file is written into the batch's transaction as
** soon as it is decoded and its set freed, so memory stays small and warm
** (holding a batch of decoded sets touched fresh pages for every file).
** Decoding already refused what the engine would refuse, so a write fails
** only for out-of-memory or I/O; should one fail, or the commit, the batch
** is dropped and each of its files decoded and written again alone, so one
** file's failure never takes the others down and each file stays
** all-or-nothing. Directories are walked recursively in name order so
** that imports are reproducible.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "repl/cli.h"

#define IMPORT_MAX_FILE (1ull << 30)        /* bytes read from one file */
#define BATCH_MAX_FILES 4096                /* files per transaction */
#define BATCH_MAX_BYTES (64ull << 20)       /* decoded input per transaction */
#define PROGRESS_MS 250                     /* progress line refresh */
/* A set of more stacks drops its indexes before it is written, a third of
** its memory at the peak of a big import (docs/ingest.md, "Memory"); a
** smaller one keeps them for the next file (em_pset_reset). */
#define TRIM_STACKS (1u << 18)


typedef struct import_run {
    ember_db *db;
    em_import_opts opts;            /* shared by every file; origin, time per file */
    ember_label labels[EM_MAX_CLI_LABELS];
    const char *time;               /* --time, or NULL */
    int64_t now_ms, started_ms, shown_ms;
    bool progress;                  /* stderr is a terminal */
    ember_txn *txn;                 /* the open batch, or NULL */
    char *batch[BATCH_MAX_FILES];   /* its files, for a retry */
    size_t nbatch;
    uint64_t batch_bytes;
    em_pset_counts batch_counts;    /* written in the batch, not committed */
    bool batch_failed;              /* a write failed: retry file by file */
    em_pset set;                    /* each file's, reset between files */
    uint64_t files, failed, profiles, samples, bytes;
    uint64_t bad_paths;             /* named or found, yet neither a file we
                                       tried nor a directory we could walk */
    uint64_t read_samples, read_bytes;  /* decoded, written or not yet */
} import_run;

/* Opens NAME (relative to the directory AT, or AT_FDCWD) read-only and
** fstats it into *ST: one path walk per file instead of a stat, an open
** and stdio's own fstat. Returns the descriptor, or -1 with errno set. */
static int path_open(int at, const char *name, struct stat *st)
{
    int fd = openat(at, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);

    if (fd >= 0 && fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Reads all of FD (ST its fstat) into a new buffer (*buf, em_free it),
** NUL-terminated after the *LEN bytes. */
static int fd_read(int fd, const struct stat *st, char **buf, size_t *len)
{
    size_t want = (size_t)st->st_size, n = 0;

    *buf = NULL;
    if ((uint64_t)st->st_size > IMPORT_MAX_FILE)
        return em_err(EMBER_ELIMIT, "larger than %llu bytes",
                      (unsigned long long)IMPORT_MAX_FILE);
    *buf = em_malloc(want + 1);
    if (*buf == NULL)
        return em_err(EMBER_ENOMEM, "%zu bytes", want);
    while (n < want) {
        ssize_t k = read(fd, *buf + n, want - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return em_err(EMBER_EIO, "%s", strerror(errno));
        if (k == 0)
            return em_err(EMBER_EIO, "short read");
        n += (size_t)k;
    }
    (*buf)[n] = '\0';
    *len = n;
    return EMBER_OK;
}

static int64_t mtime_ms_of(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

/* The time of a file whose content has none: --time, else a unix-ms file
** name, else MTIME_MS. */
static int file_time(const import_run *r, const char *path, int64_t mtime_ms,
                     int64_t *ms)
{
    const char *base = strrchr(path, '/');
    char *end;
    long long v;

    if (r->time != NULL)
        return em_time_parse(r->time, r->now_ms, ms);
    base = base != NULL ? base + 1 : path;
    errno = 0;
    v = strtoll(base, &end, 10);
    if (errno == 0 && end - base >= 12 && end - base <= 13 &&
        (*end == '\0' || *end == '.')) {
        *ms = v;
        return EMBER_OK;
    }
    *ms = mtime_ms;
    return EMBER_OK;
}

/* Prints why PATH failed; ingest messages start with the path already. */
static void report_failure(import_run *r, const char *path)
{
    const char *msg = em_errmsg();

    r->failed++;
    if (r->progress)
        fputs("\r\033[K", stderr);
    if (strncmp(msg, path, strlen(path)) == 0)
        em_cli_fail(0, "import", "%s", msg);
    else
        em_cli_fail(0, "import", "%s: %s", path, msg);
}

static void progress_show(import_run *r, bool force)
{
    int64_t now = em_cli_now_ms();
    double secs = (double)(now - r->started_ms) / 1000.0;

    if (!r->progress || (!force && now - r->shown_ms < PROGRESS_MS))
        return;
    r->shown_ms = now;
    if (secs <= 0)
        secs = 0.001;
    fprintf(stderr, "\r\033[K%llu files, %llu samples read, %llu profiles "
            "written (%.0f samples/s, %.1f MB/s)",
            (unsigned long long)r->files,
            (unsigned long long)r->read_samples,
            (unsigned long long)r->profiles,
            (double)r->read_samples / secs,
            (double)r->read_bytes / 1e6 / secs);
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
    rc = fd_read(fd, st, &buf, &len);
    if (rc == EMBER_OK)
        rc = file_time(r, path, mtime_ms_of(st), &o.time_ms);
    if (rc == EMBER_OK)
        rc = em_decode(buf, len, &o, set);
    em_free(buf);
    return rc;
}

/* Opens PATH and decodes it into *SET, as decode_fd. */
static int decode_path(import_run *r, const char *path, em_pset *set)
{
    struct stat st;
    int fd = path_open(AT_FDCWD, path, &st), rc;

    memset(set, 0, sizeof *set);
    if (fd < 0)
        return em_err(EMBER_EIO, "%s", strerror(errno));
    rc = decode_fd(r, path, fd, &st, set);
    close(fd);
    return rc;
}

static void count_written(import_run *r, const em_pset_counts *c,
                          uint64_t bytes)
{
    r->profiles += c->profiles;
    r->samples += c->samples;
    r->bytes += bytes;
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
        report_failure(r, path);
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
        free(r->batch[i]);
    r->nbatch = 0;
    r->batch_bytes = 0;
    r->batch_counts = (em_pset_counts){ 0 };
    r->batch_failed = false;
    progress_show(r, false);
}

/* Writes SET (decoded from PATH) into the batch's transaction. */
static int batch_add(import_run *r, const char *path, const em_pset *set)
{
    em_pset_counts c = { 0 };
    char *copy = strdup(path);
    int rc = copy != NULL ? EMBER_OK : em_err(EMBER_ENOMEM, "file name");

    if (rc == EMBER_OK && r->txn == NULL && !r->batch_failed)
        rc = ember_txn_begin(r->db, &r->txn);
    if (rc != EMBER_OK) {
        free(copy);
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

    r->files++;
    if (rc == EMBER_OK) {
        r->read_bytes += set->bytes_in;
        r->read_samples += set->nsamples;
        if (set->nstacks > TRIM_STACKS)     /* see TRIM_STACKS */
            em_pset_trim(set);
        rc = batch_add(r, path, set);
    }
    em_pset_reset(set);
    if (rc != EMBER_OK) {
        report_failure(r, path);
        return;
    }
    if (r->nbatch == BATCH_MAX_FILES || r->batch_bytes >= BATCH_MAX_BYTES)
        batch_flush(r);
    progress_show(r, false);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void import_at(import_run *r, int at, const char *name,
                      const char *path, int depth);

/* The names in D but dot files, sorted (free each and the array); *N
** gets their count. */
static char **dir_names(DIR *d, size_t *n)
{
    struct dirent *e;
    char **names = NULL;
    size_t cap = 0;

    *n = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *nn);
            if (nn == NULL)
                break;
            names = nn;
        }
        if ((names[*n] = strdup(e->d_name)) != NULL)
            (*n)++;
    }
    if (*n > 0)
        qsort(names, *n, sizeof *names, name_cmp);
    return names;
}

/* Imports every entry of the directory open at FD (PATH), in name order;
** takes FD. Entries are opened relative to it, named by PATH/name. */
static void import_dir(import_run *r, const char *path, int fd, int depth)
{
    DIR *d = fdopendir(fd);
    char **names;
    size_t n;
    bool slash = path[strlen(path) - 1] == '/';

    if (d == NULL) {
        r->bad_paths++;
        em_cli_fail(0, "import", "%s: %s", path, strerror(errno));
        close(fd);
        return;
    }
    names = dir_names(d, &n);
    for (size_t i = 0; i < n; i++) {
        char *full;
        if (asprintf(&full, "%s%s%s", path, slash ? "" : "/", names[i]) >= 0) {
            import_at(r, dirfd(d), names[i], full, depth + 1);
            free(full);
        }
        free(names[i]);
    }
    free(names);
    closedir(d);
}

/* Imports NAME (relative to the directory AT), called PATH in messages:
** a directory recursively, a file as one import. */
static void import_at(import_run *r, int at, const char *name,
                      const char *path, int depth)
{
    struct stat st;
    int fd = path_open(at, name, &st);

    if (fd < 0) {
        int e = errno;
        if (fstatat(at, name, &st, 0) == 0 && !S_ISDIR(st.st_mode)) {
            r->files++;             /* a file we may not read: it failed */
            em_err(EMBER_EIO, "%s", strerror(e));
            report_failure(r, path);
            return;
        }
        r->bad_paths++;
        em_cli_fail(0, "import", "%s: %s", path, strerror(e));
    } else if (S_ISDIR(st.st_mode)) {
        if (depth < 64) {
            import_dir(r, path, fd, depth);
        } else {
            r->bad_paths++;
            em_cli_fail(0, "import", "%s: more than 64 directories deep, "
                        "not read", path);
            close(fd);
        }
    } else {
        import_file(r, path, fd, &st);
        close(fd);
    }
}

static void import_summary(import_run *r)
{
    double secs = (double)(em_cli_now_ms() - r->started_ms) / 1000.0;

    if (r->progress)
        fputs("\r\033[K", stderr);
    if (secs <= 0)
        secs = 0.001;
    fprintf(stderr, "imported %llu of %llu files: %llu profiles, %llu "
            "samples, %.1f MB in %.2f s (%.0f samples/s, %.1f MB/s)\n",
            (unsigned long long)(r->files - r->failed),
            (unsigned long long)r->files, (unsigned long long)r->profiles,
            (unsigned long long)r->samples, (double)r->bytes / 1e6, secs,
            (double)r->samples / secs, (double)r->bytes / 1e6 / secs);
}

/* Parses "512M", "2G", "1000000" into bytes. */
static int size_parse(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || v == 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    *out = v;
    return *end == '\0' ? 0 : -1;
}

/* Handles one option C (with OPTARG); 0, or the exit status of a misuse. */
static int import_opt(import_run *r, int c, const char **dir)
{
    em_import_opts *o = &r->opts;

    switch (c) {
    case 'd': *dir = optarg; return 0;
    case 't': o->type = optarg; return 0;
    case 'N': o->name = optarg; return 0;
    case 'T': r->time = optarg; return 0;
    case 'C': o->comm_prefix = true; return 0;
    case 'f':
        if (em_format_parse(optarg, &o->format) != EMBER_OK)
            return em_cli_fail(2, "import", "--format %s: expected auto, "
                               "pprof, collapsed or perf", optarg);
        return 0;
    case 'w':
        if (em_duration_parse(optarg, &o->window_ms) != EMBER_OK ||
            o->window_ms <= 0)
            return em_cli_fail(2, "import", "--window %s: expected a "
                               "duration such as 10s or 1m", optarg);
        return 0;
    case 'M':
        if (size_parse(optarg, &o->max_bytes) != 0)
            return em_cli_fail(2, "import", "--max-size %s: expected bytes "
                               "such as 512M or 2G", optarg);
        return 0;
    case 'l':
        if (o->nlabels == EM_MAX_CLI_LABELS ||
            em_cli_label(optarg, &r->labels[o->nlabels]) != 0)
            return em_cli_fail(2, "import", "-l %s: expected name=value (at "
                               "most %d)", optarg, EM_MAX_CLI_LABELS);
        o->nlabels++;
        return 0;
    default:
        return em_cli_usage("import");
    }
}

static int import_args(import_run *r, int argc, char **argv, const char **dir)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "format", required_argument, NULL, 'f' },
        { "type", required_argument, NULL, 't' },
        { "name", required_argument, NULL, 'N' },
        { "label", required_argument, NULL, 'l' },
        { "time", required_argument, NULL, 'T' },
        { "window", required_argument, NULL, 'w' },
        { "comm", no_argument, NULL, 'C' },
        { "max-size", required_argument, NULL, 'M' },
        { NULL, 0, NULL, 0 },
    };
    int c, st;

    r->opts.sz = sizeof r->opts;
    r->opts.labels = r->labels;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:l:", longs, NULL)) != -1)
        if ((st = import_opt(r, c, dir)) != 0)
            return st;
    if (*dir == NULL || optind >= argc)
        return em_cli_usage("import");
    if (r->opts.type != NULL && em_profile_type_check(r->opts.type) != 0)
        return em_cli_fail(2, "import", "--type: %s", em_errmsg());
    if (r->time != NULL && em_time_parse(r->time, r->now_ms, &(int64_t){ 0 }))
        return em_cli_fail(2, "import", "--time: %s", em_errmsg());
    return 0;
}

int em_cmd_import(int argc, char **argv)
{
    import_run *r = calloc(1, sizeof *r);
    const char *dir = NULL;
    int st;

    if (r == NULL)
        return em_cli_fail(1, "import", "out of memory");
    r->now_ms = r->started_ms = em_cli_now_ms();
    r->progress = isatty(STDERR_FILENO);
    st = import_args(r, argc, argv, &dir);
    if (st == 0 && em_cli_open("import", dir, 0, &r->db) != EMBER_OK)
        st = 1;
    if (st == 0) {
        for (int i = optind; i < argc; i++)
            import_at(r, AT_FDCWD, argv[i], argv[i], 0);
        batch_flush(r);
        import_summary(r);
        st = r->failed > 0 || r->bad_paths > 0 ? 1 : 0;
    }
    ember_close(r->db);
    em_pset_free(&r->set);
    free(r);
    return st;
}
