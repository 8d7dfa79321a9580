/*
** repl/cmd_compact.c: `ember compact`, the nightly job, over ember_compact:
** its options, a progress line on a terminal, and what each step did.
*/
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "query/query.h"
#include "repl/cli.h"

static int duration_opt(const char *opt, const char *arg, int64_t *out)
{
    *out = 0;
    if (strcmp(arg, "0") == 0)
        return 0;
    if (em_duration_parse(arg, out) != EMBER_OK || *out <= 0)
        return em_cli_fail(2, "compact", "%s %s: expected a duration such "
                           "as 1h or 2d, or 0", opt, arg);
    return 0;
}

#define MAX_RULES 32

typedef struct compact_args {
    const char *dir;
    ember_compact_opts o;
    ember_retention rules[MAX_RULES];
    em_node *trees[MAX_RULES];      /* the rules' parsed matchers */
    char *types[MAX_RULES];
    ember_resolution res[8];
} compact_args;

static void args_free(compact_args *a)
{
    for (size_t i = 0; i < MAX_RULES; i++) {
        em_node_free(a->trees[i]);
        free(a->types[i]);
    }
}

/* Splits S at the commas outside braces and quotes: *N items into ITEMS
** (pointers into S, which is modified), at most CAP. */
static int split_items(char *s, char **items, size_t cap, size_t *n)
{
    int depth = 0;
    bool quoted = false;

    *n = 0;
    items[(*n)++] = s;
    for (char *p = s; *p != '\0'; p++) {
        if (quoted && *p == '\\' && p[1] != '\0')
            p++;
        else if (*p == '"')
            quoted = !quoted;
        else if (!quoted && (*p == '{' || *p == '}'))
            depth += *p == '{' ? 1 : -1;
        else if (!quoted && depth == 0 && *p == ',') {
            *p = '\0';
            if (*n == cap)
                return -1;
            items[(*n)++] = p + 1;
        }
    }
    return 0;
}

/* One retention rule: "[TYPE][{MATCHERS}]=DURATION" or "DURATION". */
static int rule_parse(compact_args *a, size_t i, char *item)
{
    ember_retention *r = &a->rules[i];
    char *eq = strrchr(item, '='), *brace;

    memset(r, 0, sizeof *r);
    if (eq == NULL || eq[1] == '\0' || strchr(eq, '"') != NULL ||
        strchr(eq, '}') != NULL)
        eq = NULL;                  /* a bare duration: everything */
    if (duration_opt("--retention", eq != NULL ? eq + 1 : item,
                     &r->keep_ms) != 0)
        return 2;
    if (eq == NULL)
        return 0;
    *eq = '\0';
    if ((brace = strchr(item, '{')) != NULL) {
        if (em_query_parse(brace, &a->trees[i]) != EMBER_OK ||
            a->trees[i]->kind != EM_NODE_SELECTOR)
            return em_cli_fail(2, "compact", "--retention %s: expected "
                               "{label=\"value\", ...}: %s", brace,
                               ember_errmsg(NULL));
        r->matchers = a->trees[i]->u.sel.matchers;
        r->nmatchers = a->trees[i]->u.sel.nmatchers;
        *brace = '\0';
    }
    if (item[0] != '\0' && (a->types[i] = strdup(item)) == NULL)
        return em_cli_fail(1, "compact", "out of memory");
    r->type = a->types[i];
    return 0;
}

static int retention_opt(compact_args *a, char *arg)
{
    char *items[MAX_RULES];
    size_t n;

    if (split_items(arg, items, MAX_RULES, &n) != 0)
        return em_cli_fail(2, "compact", "--retention: at most %d rules",
                           MAX_RULES);
    for (size_t i = 0; i < n; i++)
        if (rule_parse(a, i, items[i]) != 0)
            return 2;
    a->o.retention = a->rules;
    a->o.nretention = n;
    return 0;
}

/* "raw:2d,1m:14d,1h": each resolution (raw: as stored) and how long it is
** kept (none: as long as retention keeps data). */
static int downsample_opt(compact_args *a, char *arg)
{
    char *items[8];
    size_t n;

    if (split_items(arg, items, 8, &n) != 0)
        return em_cli_fail(2, "compact", "--downsample: at most 8 "
                           "resolutions");
    for (size_t i = 0; i < n; i++) {
        char *colon = strchr(items[i], ':');
        ember_resolution *r = &a->res[i];
        if (colon != NULL)
            *colon = '\0';
        r->resolution_ms = 0;
        if (strcmp(items[i], "raw") != 0 &&
            duration_opt("--downsample", items[i], &r->resolution_ms) != 0)
            return 2;
        r->keep_ms = 0;
        if (colon != NULL &&
            duration_opt("--downsample", colon + 1, &r->keep_ms) != 0)
            return 2;
    }
    a->o.resolutions = a->res;
    a->o.nresolutions = n;
    return 0;
}

static int compact_option(compact_args *a, int c, char *arg)
{
    switch (c) {
    case 'r': return retention_opt(a, arg);
    case 's': return downsample_opt(a, arg);
    case 'm': return duration_opt("--merge", arg, &a->o.merge_ms);
    case 'd': a->dir = arg; return 0;
    case 'H': return duration_opt("--head", arg, &a->o.head_ms);
    case 'B':
        if (duration_opt("--block", arg, &a->o.block_ms) != 0)
            return 2;
        return a->o.block_ms > 0 ? 0
               : em_cli_fail(2, "compact", "--block 0: a block spans time");
    case 'n': a->o.dry_run = 1; return 0;
    default: return em_cli_bad_option("compact", c);
    }
}

static int compact_argv(compact_args *a, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "head", required_argument, NULL, 'H' },
        { "block", required_argument, NULL, 'B' },
        { "dry-run", no_argument, NULL, 'n' },
        { "retention", required_argument, NULL, 'r' },
        { "downsample", required_argument, NULL, 's' },
        { "merge", required_argument, NULL, 'm' },
        { NULL, 0, NULL, 0 },
    };
    int c, st;

    memset(a, 0, sizeof *a);
    a->o.sz = sizeof a->o;
    a->o.head_ms = -1;
    while ((c = getopt_long(argc, argv, ":d:", longs, NULL)) != -1)
        if ((st = compact_option(a, c, optarg)) != 0)
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
    char a[32], b[32];

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
    mib(a, sizeof a, r->bytes_before);
    mib(b, sizeof b, r->bytes_after);
    printf("%s: %s -> %s on disk; %llu blocks cut from the head, %llu "
           "profiles moved out of it, %llu blocks removed\n",
           dry ? "dry run" : "compacted", a, b,
           (unsigned long long)r->blocks_written,
           (unsigned long long)r->profiles_moved,
           (unsigned long long)r->blocks_removed);
}

int em_cmd_compact(int argc, char **argv)
{
    ember_compact_report r = { .sz = sizeof r };
    compact_args a;
    ember_db *db = NULL;
    int rc = compact_argv(&a, argc, argv);

    if (rc != 0) {
        args_free(&a);
        return rc;              /* it said why */
    }
    if (em_cli_open("compact", a.dir, 0, &db) != EMBER_OK) {
        args_free(&a);
        return 1;
    }
    if (isatty(STDERR_FILENO))
        a.o.progress = show_progress;
    rc = ember_compact(db, &a.o, &r);
    if (a.o.progress != NULL)
        fputs("\r\033[K", stderr);
    if (rc == EMBER_OK)
        report_print(&r, a.o.dry_run);
    else
        em_cli_fail(1, "compact", "%s", ember_errmsg(db));
    ember_close(db);
    args_free(&a);
    return rc == EMBER_OK ? 0 : 1;
}
