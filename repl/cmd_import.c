/*
** repl/cmd_import.c: `ember import`. Each file becomes one profile, written
** atomically (a bad file writes nothing and the others go on; the exit
** status says whether any failed). A directory is walked recursively in name
** order so that imports are reproducible.
*/
#include <dirent.h>
#include <errno.h>
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

#define IMPORT_MAX_FILE (1ull << 30)   /* bytes read from one file */

typedef struct import_run {
    ember_db *db;
    const char *type;
    ember_label labels[EM_MAX_CLI_LABELS];
    size_t nlabels;
    const char *time;               /* --time, or NULL */
    int64_t now_ms;
    uint64_t files, failed, samples, bytes;
    int64_t started_ms;
} import_run;

/* Reads all of PATH into a new buffer (*buf, em_free it). */
static int file_read(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    size_t n;
    int rc = EMBER_OK;

    *buf = NULL;
    if (f == NULL || fstat(fileno(f), &st) != 0) {
        rc = em_err(EMBER_EIO, "%s", strerror(errno));
        goto out;
    }
    if ((uint64_t)st.st_size > IMPORT_MAX_FILE) {
        rc = em_err(EMBER_ELIMIT, "larger than %llu bytes",
                    (unsigned long long)IMPORT_MAX_FILE);
        goto out;
    }
    *buf = em_malloc((size_t)st.st_size + 1);
    if (*buf == NULL) {
        rc = em_err(EMBER_ENOMEM, "%lld bytes", (long long)st.st_size);
        goto out;
    }
    n = fread(*buf, 1, (size_t)st.st_size, f);
    if (n != (size_t)st.st_size || ferror(f))
        rc = em_err(EMBER_EIO, "short read");
    *len = n;
out:
    if (f != NULL)
        fclose(f);
    return rc;
}

/* The profile time: --time, else a unix-ms file name, else the mtime. */
static int file_time(const import_run *r, const char *path, int64_t *ms)
{
    const char *base = strrchr(path, '/');
    struct stat st;
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
    if (stat(path, &st) != 0)
        return em_err(EMBER_EIO, "%s", strerror(errno));
    *ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    return EMBER_OK;
}

static void import_file(import_run *r, const char *path)
{
    em_import_opts o = { .sz = sizeof o, .origin = path, .type = r->type,
                         .labels = r->labels, .nlabels = r->nlabels };
    em_import_stats st;
    char *buf = NULL;
    size_t len = 0;
    int rc = file_time(r, path, &o.time_ms);

    if (rc == EMBER_OK)
        rc = file_read(path, &buf, &len);
    if (rc == EMBER_OK)
        rc = em_import_collapsed(r->db, buf, len, &o, &st);
    em_free(buf);
    r->files++;
    if (rc != EMBER_OK) {
        r->failed++;
        /* ingest messages start with the file name already */
        if (strncmp(em_errmsg(), path, strlen(path)) == 0)
            em_cli_fail(0, "import", "%s", em_errmsg());
        else
            em_cli_fail(0, "import", "%s: %s", path, em_errmsg());
        return;
    }
    r->samples += st.stacks;
    r->bytes += len;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void import_path(import_run *r, const char *path, int depth);

/* Imports every entry of directory PATH, in name order. */
static void import_dir(import_run *r, const char *path, int depth)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;

    if (d == NULL) {
        r->failed++;
        em_cli_fail(0, "import", "%s: %s", path, strerror(errno));
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char *full;
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *nn);
            if (nn == NULL)
                break;
            names = nn;
        }
        if (asprintf(&full, "%s%s%s", path,
                     path[strlen(path) - 1] == '/' ? "" : "/", e->d_name) >= 0)
            names[n++] = full;
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        import_path(r, names[i], depth + 1);
        free(names[i]);
    }
    free(names);
}

static void import_path(import_run *r, const char *path, int depth)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        r->failed++;
        em_cli_fail(0, "import", "%s: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        if (depth < 64)
            import_dir(r, path, depth);
    } else {
        import_file(r, path);
    }
}

static void import_summary(const import_run *r)
{
    double secs = (double)(em_cli_now_ms() - r->started_ms) / 1000.0;

    if (secs <= 0)
        secs = 0.001;
    fprintf(stderr, "imported %llu of %llu files: %llu samples, %.1f MB in "
            "%.2f s (%.0f samples/s)\n",
            (unsigned long long)(r->files - r->failed),
            (unsigned long long)r->files, (unsigned long long)r->samples,
            (double)r->bytes / 1e6, secs, (double)r->samples / secs);
}

static int import_args(import_run *r, int argc, char **argv, const char **dir)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "format", required_argument, NULL, 'f' },
        { "type", required_argument, NULL, 't' },
        { "label", required_argument, NULL, 'l' },
        { "time", required_argument, NULL, 'T' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "d:l:", longs, NULL)) != -1) {
        if (c == 'd')
            *dir = optarg;
        else if (c == 't')
            r->type = optarg;
        else if (c == 'T')
            r->time = optarg;
        else if (c == 'f' && strcmp(optarg, "collapsed") != 0 &&
                 strcmp(optarg, "auto") != 0)
            return em_cli_fail(2, "import", "--format %s: this version reads "
                               "collapsed stacks only", optarg);
        else if (c == 'l' && (r->nlabels == EM_MAX_CLI_LABELS ||
                              em_cli_label(optarg, &r->labels[r->nlabels++])))
            return em_cli_fail(2, "import", "-l %s: expected name=value "
                               "(at most %d)", optarg, EM_MAX_CLI_LABELS);
        else if (c == '?')
            return em_cli_usage("import");
    }
    if (*dir == NULL || optind >= argc)
        return em_cli_usage("import");
    return 0;
}

int em_cmd_import(int argc, char **argv)
{
    import_run r;
    const char *dir = NULL;
    int st;

    memset(&r, 0, sizeof r);
    r.now_ms = r.started_ms = em_cli_now_ms();
    st = import_args(&r, argc, argv, &dir);
    if (st != 0)
        return st;
    if (em_cli_open("import", dir, 0, &r.db) != EMBER_OK)
        return 1;
    for (int i = optind; i < argc; i++)
        import_path(&r, argv[i], 0);
    ember_close(r.db);
    import_summary(&r);
    return r.failed > 0 ? 1 : 0;
}
