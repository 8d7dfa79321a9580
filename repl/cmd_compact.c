/*
** repl/cmd_compact.c: `ember compact`, the nightly job, over ember_compact:
** its options (parsed by repl/compact_opts.c, which serve and agent share),
** a progress line on a terminal, and what each step did.
*/
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "repl/cli.h"

typedef struct compact_args {
    const char *dir;
    em_compact_args c;
} compact_args;

static int compact_option(compact_args *a, int c, const char *name,
                          char *arg)
{
    switch (c) {
    case 'd': a->dir = arg; return 0;
    case EM_OPT_COMPACT: return em_compact_opt("compact", name, arg, &a->c);
    case 'n': a->c.o.dry_run = 1; return 0;
    default: return em_cli_bad_option("compact", c);
    }
}

static int compact_argv(compact_args *a, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        EM_COMPACT_LONGOPTS(""),
        { "dry-run", no_argument, NULL, 'n' },
        { NULL, 0, NULL, 0 },
    };
    int c, st, li = 0;

    a->dir = NULL;
    em_compact_args_init(&a->c);
    while ((c = getopt_long(argc, argv, ":d:", longs, &li)) != -1)
        if ((st = compact_option(a, c, longs[li].name, optarg)) != 0)
            return st;
    return em_cli_args("compact", a->dir, argc, argv, 0, 0);
}

/* On a terminal: one line, rewritten as the step goes. */
static void show_progress(void *ctx, const char *what, uint64_t done,
                          uint64_t total)
{
    (void)ctx;
    fprintf(stderr, "\r%s: %llu of %llu ", what, (unsigned long long)done,
            (unsigned long long)total);
    fflush(stderr);
}

static void mib(char *buf, size_t n, uint64_t bytes)
{
    snprintf(buf, n, "%.2f MiB", (double)bytes / (1024.0 * 1024.0));
}

static void report_print(const ember_compact_report *r, int dry)
{
    char a[32], b[32], line[256];

    for (unsigned i = 0; i < r->nsteps; i++) {
        const ember_compact_step *s = &r->steps[i];
        mib(a, sizeof a, s->bytes_before);
        mib(b, sizeof b, s->bytes_after);
        printf("%-10s %12s -> %12s  %10llu %-15s %6lld ms\n", s->name, a, b,
               (unsigned long long)s->items,
               strcmp(s->name, "cut") == 0 ? (dry ? "windows" : "blocks")
               : strcmp(s->name, "gc") == 0 ? "records dropped"
               : strcmp(s->name, "punch") == 0 ? "bytes freed"
               : strcmp(s->name, "seal") == 0 ? "" : "blocks",
               (long long)s->elapsed_ms);
    }
    em_compact_summary(r, dry, line, sizeof line);
    printf("%s\n", line);
}

int em_cmd_compact(int argc, char **argv)
{
    ember_compact_report r = { .sz = sizeof r };
    compact_args a;
    ember_db *db = NULL;
    int rc = compact_argv(&a, argc, argv);

    if (rc != 0) {
        em_compact_args_free(&a.c);
        return rc;              /* it said why */
    }
    if (em_cli_open("compact", a.dir, 0, &db) != EMBER_OK) {
        em_compact_args_free(&a.c);
        return 1;
    }
    if (isatty(STDERR_FILENO))
        a.c.o.progress = show_progress;
    rc = ember_compact(db, &a.c.o, &r);
    if (a.c.o.progress != NULL)
        fputs("\r\033[K", stderr);
    if (rc == EMBER_OK)
        report_print(&r, a.c.o.dry_run);
    else
        em_cli_fail(1, "compact", "%s", ember_errmsg(db));
    ember_close(db);
    em_compact_args_free(&a.c);
    return rc == EMBER_OK ? 0 : 1;
}
