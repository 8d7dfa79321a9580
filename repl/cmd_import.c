/*
** repl/cmd_import.c: `ember import`: the options, a progress line and the
** summary over ember_import_files (ingest/import_driver.c), which walks the
** paths, decodes each file and writes them in batches, as it does for every
** embedder. Every option, -l included, is checked before any file is read
** or the database opened: a usage error exits 2 having touched nothing.
** With --server each file goes to `ember serve` (ember_client_import_files)
** and the same summary is printed.
*/
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "repl/cli.h"

#define PROGRESS_MS 250                     /* progress line refresh */

typedef struct import_cli {
    ember_import_opts opts;
    ember_label labels[EM_MAX_CLI_LABELS];
    int64_t started_ms, shown_ms;
    bool progress;                  /* stderr is a terminal */
} import_cli;

/* ember_import_hooks.failed: one line per path that failed. */
static void on_failed(void *ctx, const char *path, int rc, const char *msg)
{
    import_cli *c = ctx;

    (void)path;
    (void)rc;
    if (c->progress)
        fputs("\r\033[K", stderr);
    em_cli_fail(0, "import", "%s", msg);
}

/* ember_import_hooks.progress: redraws the line at most every PROGRESS_MS. */
static void on_progress(void *ctx, const ember_import_stats *st)
{
    import_cli *c = ctx;
    int64_t now = em_cli_now_ms();
    double secs = (double)(now - c->started_ms) / 1000.0;

    if (!c->progress || now - c->shown_ms < PROGRESS_MS)
        return;
    c->shown_ms = now;
    if (secs <= 0)
        secs = 0.001;
    fprintf(stderr, "\r\033[Kember import: %llu files, %llu samples read, "
            "%llu profiles written (%.0f samples/s, %.1f MB/s)",
            (unsigned long long)st->files,
            (unsigned long long)st->read_samples,
            (unsigned long long)st->profiles,
            (double)st->read_samples / secs,
            (double)st->read_bytes / 1e6 / secs);
}

static void import_summary(const import_cli *c, const ember_import_stats *st)
{
    double secs = (double)(em_cli_now_ms() - c->started_ms) / 1000.0;

    if (c->progress)
        fputs("\r\033[K", stderr);
    if (secs <= 0)
        secs = 0.001;
    fprintf(stderr, "ember import: imported %llu of %llu files: %llu "
            "profiles, %llu samples, %.1f MB in %.2f s (%.0f samples/s, "
            "%.1f MB/s)\n",
            (unsigned long long)(st->files - st->failed),
            (unsigned long long)st->files, (unsigned long long)st->profiles,
            (unsigned long long)st->samples, (double)st->bytes / 1e6, secs,
            (double)st->samples / secs, (double)st->bytes / 1e6 / secs);
}

/* -l ARG: one more label, checked alone here and with the others after
** the last option. */
static int label_opt(import_cli *c, char *arg)
{
    ember_import_opts *o = &c->opts;
    ember_label *l = &c->labels[o->nlabels];

    if (o->nlabels == EM_MAX_CLI_LABELS || em_cli_label(arg, l) != 0)
        return em_cli_fail(2, "import", "-l %s: expected name=value (at "
                           "most %d)", arg, EM_MAX_CLI_LABELS);
    if (em_labels_check(l, 1) != EMBER_OK)
        return em_cli_fail(2, "import", "-l %s: %s", l->name, em_errmsg());
    o->nlabels++;
    return 0;
}

/* Handles one option C (with OPTARG); 0, or the exit status of a misuse. */
static int import_opt(import_cli *c, int ch, em_source_args *src,
                      const char **time)
{
    ember_import_opts *o = &c->opts;
    em_format f;
    int64_t window;

    if (em_source_option(src, ch, optarg))
        return 0;
    switch (ch) {
    case 't': o->type = optarg; return 0;
    case 'N': o->name = optarg; return 0;
    case 'T': *time = optarg; return 0;
    case 'C': o->flags |= EMBER_IMPORT_COMM; return 0;
    case 'L':
        if (strcmp(optarg, "series") != 0 && strcmp(optarg, "drop") != 0)
            return em_cli_fail(2, "import", "--numeric-labels %s: expected "
                               "drop or series", optarg);
        if (strcmp(optarg, "series") == 0)
            o->flags |= EMBER_IMPORT_NUMERIC_LABELS;
        else
            o->flags &= ~(unsigned)EMBER_IMPORT_NUMERIC_LABELS;
        return 0;
    case 'f':
        if (em_format_parse(optarg, &f) != EMBER_OK)
            return em_cli_fail(2, "import", "--format %s: expected auto, "
                               "pprof, collapsed or perf", optarg);
        o->format = (int)f;
        return 0;
    case 'w':
        if (em_duration_parse(optarg, &window) != EMBER_OK || window <= 0)
            return em_cli_fail(2, "import", "--window %s: expected a "
                               "duration such as 10s or 1m", optarg);
        o->window_ms = window;
        return 0;
    case 'M':
        if (em_cli_size(optarg, &o->max_bytes) != 0)
            return em_cli_fail(2, "import", "--max-size %s: expected bytes "
                               "such as 512M or 2G", optarg);
        return 0;
    case 'l':
        return label_opt(c, optarg);
    default:
        return em_cli_bad_option("import", ch);
    }
}

static int import_args(import_cli *c, int argc, char **argv,
                       em_source_args *src)
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
        { "numeric-labels", required_argument, NULL, 'L' },
        { "server", required_argument, NULL, EM_OPT_SERVER },
        { "token-file", required_argument, NULL, EM_OPT_TOKEN_FILE },
        { "ca-file", required_argument, NULL, EM_OPT_CA_FILE },
        { NULL, 0, NULL, 0 },
    };
    const char *time = NULL;
    int ch, st;

    c->opts.sz = sizeof c->opts;
    c->opts.labels = c->labels;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":d:l:", longs, NULL)) != -1)
        if ((st = import_opt(c, ch, src, &time)) != 0)
            return st;
    if ((st = em_source_check("import", src)) != 0 ||
        (st = em_cli_args("import", src->server != NULL ? src->server
                                                        : src->dir,
                          argc, argv, 1, argc)) != 0)
        return st;
    if (em_labels_check(c->labels, c->opts.nlabels) != EMBER_OK)
        return em_cli_fail(2, "import", "-l: %s", em_errmsg());
    if (c->opts.type != NULL && em_profile_type_check(c->opts.type) != 0)
        return em_cli_fail(2, "import", "--type: %s", em_errmsg());
    if (time != NULL) {
        if (em_time_parse(time, c->started_ms, &c->opts.time_ms) != EMBER_OK)
            return em_cli_fail(2, "import", "--time: %s", em_errmsg());
        c->opts.flags |= EMBER_IMPORT_TIME;
    }
    return 0;
}

/* ember_import_files on the directory or the server. */
static int import_run(import_cli *c, em_source *src, char **paths, int n,
                      const ember_import_hooks *hooks,
                      ember_import_stats *st)
{
    if (src->client != NULL)
        return ember_client_import_files(src->client,
                                         (const char *const *)paths,
                                         (size_t)n, &c->opts, hooks, st);
    return ember_import_files(src->db, (const char *const *)paths, (size_t)n,
                              &c->opts, hooks, st);
}

int em_cmd_import(int argc, char **argv)
{
    import_cli *c = calloc(1, sizeof *c);
    ember_import_hooks hooks = { .sz = sizeof hooks, .failed = on_failed,
                                 .progress = on_progress };
    ember_import_stats st = { .sz = sizeof st };
    em_source_args a = { 0 };
    em_source src = { 0 };
    int status, rc;

    if (c == NULL)
        return em_cli_fail(1, "import", "out of memory");
    c->started_ms = em_cli_now_ms();
    c->progress = isatty(STDERR_FILENO);
    hooks.ctx = c;
    status = import_args(c, argc, argv, &a);
    if (status == 0 && em_source_open("import", &a, 0, &src) != EMBER_OK)
        status = 1;
    if (status == 0) {
        rc = import_run(c, &src, argv + optind, argc - optind, &hooks, &st);
        if (rc != EMBER_OK && st.failed == 0 && st.bad_paths == 0)
            status = em_cli_fail(1, "import", "%s", ember_errmsg(src.db));
        else
            import_summary(c, &st);
        if (status == 0)
            status = rc != EMBER_OK ? 1 : 0;
    }
    em_source_close(&src);
    free(c);
    return status;
}
