/*
** repl/compact_opts.c: the options of one compaction as the command line
** gives them, one home for the three commands that take them: `ember
** compact` (--head, --block, --merge, --retention, --downsample,
** --zstd-level), and
** `ember serve` and `ember agent`, whose background runs take the same
** with "compact-" before them (repl/compact_sched.c). An em_compact_args
** owns everything its ember_compact_opts points to: the retention rules,
** their parsed matchers and types, the resolutions.
**
** Formats: a duration is em_duration_parse's ("0" where the option allows
** none); --retention is rules "[TYPE glob][{matchers}]=D" or a bare "D"
** (everything), split at the commas outside braces and quotes, the first
** rule that selects a series deciding; --downsample is "raw:2d,1m:14d,1h",
** each resolution (raw: as stored) and how long it is kept (none: as long
** as retention keeps data).
*/
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

/* "0" or a positive duration into *OUT; OPT names it in a message. */
static int duration_opt(const char *cmd, const char *opt, const char *arg,
                        int64_t *out)
{
    *out = 0;
    if (strcmp(arg, "0") == 0)
        return 0;
    if (em_duration_parse(arg, out) != EMBER_OK || *out <= 0)
        return em_cli_fail(2, cmd, "%s %s: expected a duration such as 1h "
                           "or 2d, or 0", opt, arg);
    return 0;
}

/* A zstd level, 1 to 22, into *OUT. */
static int level_opt(const char *cmd, const char *opt, const char *arg,
                     int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);

    if (end == arg || *end != '\0' || v < 1 || v > 22)
        return em_cli_fail(2, cmd, "%s %s: expected a zstd level, 1 to 22",
                           opt, arg);
    *out = (int)v;
    return 0;
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

/* Rule I of --retention (OPT): "[TYPE][{MATCHERS}]=DURATION" or
** "DURATION". */
static int rule_parse(const char *cmd, const char *opt, em_compact_args *a,
                      size_t i, char *item)
{
    ember_retention *r = &a->rules[i];
    char *eq = strrchr(item, '='), *brace;

    memset(r, 0, sizeof *r);
    if (eq == NULL || eq[1] == '\0' || strchr(eq, '"') != NULL ||
        strchr(eq, '}') != NULL)
        eq = NULL;                  /* a bare duration: everything */
    if (duration_opt(cmd, opt, eq != NULL ? eq + 1 : item, &r->keep_ms))
        return 2;
    if (eq == NULL)
        return 0;
    *eq = '\0';
    if ((brace = strchr(item, '{')) != NULL) {
        if (em_query_parse(brace, &a->trees[i]) != EMBER_OK ||
            a->trees[i]->kind != EM_NODE_SELECTOR)
            return em_cli_fail(2, cmd, "%s %s: expected {label=\"value\", "
                               "...}: %s", opt, brace, ember_errmsg(NULL));
        r->matchers = a->trees[i]->u.sel.matchers;
        r->nmatchers = a->trees[i]->u.sel.nmatchers;
        *brace = '\0';
    }
    if (item[0] != '\0' && (a->types[i] = em_strdup(item)) == NULL)
        return em_cli_fail(1, cmd, "out of memory");
    r->type = a->types[i];
    return 0;
}

static int retention_opt(const char *cmd, const char *opt,
                         em_compact_args *a, char *arg)
{
    char *items[EM_COMPACT_MAX_RULES];
    size_t n;

    em_compact_args_free(a);        /* a repeated option: the last wins */
    if (split_items(arg, items, EM_COMPACT_MAX_RULES, &n) != 0)
        return em_cli_fail(2, cmd, "%s: at most %d rules", opt,
                           EM_COMPACT_MAX_RULES);
    for (size_t i = 0; i < n; i++)
        if (rule_parse(cmd, opt, a, i, items[i]) != 0)
            return 2;
    a->o.retention = a->rules;
    a->o.nretention = n;
    return 0;
}

static int downsample_opt(const char *cmd, const char *opt,
                          em_compact_args *a, char *arg)
{
    char *items[EM_COMPACT_MAX_RES];
    size_t n;

    if (split_items(arg, items, EM_COMPACT_MAX_RES, &n) != 0)
        return em_cli_fail(2, cmd, "%s: at most %d resolutions", opt,
                           EM_COMPACT_MAX_RES);
    for (size_t i = 0; i < n; i++) {
        char *colon = strchr(items[i], ':');
        ember_resolution *r = &a->res[i];
        if (colon != NULL)
            *colon = '\0';
        r->resolution_ms = 0;
        if (strcmp(items[i], "raw") != 0 &&
            duration_opt(cmd, opt, items[i], &r->resolution_ms) != 0)
            return 2;
        r->keep_ms = 0;
        if (colon != NULL &&
            duration_opt(cmd, opt, colon + 1, &r->keep_ms) != 0)
            return 2;
    }
    a->o.resolutions = a->res;
    a->o.nresolutions = n;
    return 0;
}

void em_compact_args_init(em_compact_args *a)
{
    memset(a, 0, sizeof *a);
    a->o.sz = sizeof a->o;
    a->o.head_ms = -1;              /* ember_compact's default */
}

void em_compact_args_free(em_compact_args *a)
{
    for (size_t i = 0; i < EM_COMPACT_MAX_RULES; i++) {
        em_node_free(a->trees[i]);
        em_free(a->types[i]);
        a->trees[i] = NULL;
        a->types[i] = NULL;
    }
    a->o.retention = NULL;
    a->o.nretention = 0;
}

int em_compact_opt(const char *cmd, const char *name, char *arg,
                   em_compact_args *a)
{
    const char *base = strncmp(name, "compact-", 8) == 0 ? name + 8 : name;
    char opt[32];

    snprintf(opt, sizeof opt, "--%s", name);
    if (strcmp(base, "head") == 0)
        return duration_opt(cmd, opt, arg, &a->o.head_ms);
    if (strcmp(base, "merge") == 0)
        return duration_opt(cmd, opt, arg, &a->o.merge_ms);
    if (strcmp(base, "retention") == 0)
        return retention_opt(cmd, opt, a, arg);
    if (strcmp(base, "downsample") == 0)
        return downsample_opt(cmd, opt, a, arg);
    if (strcmp(base, "zstd-level") == 0)
        return level_opt(cmd, opt, arg, &a->o.zstd_level);
    if (strcmp(base, "block") != 0)
        return em_cli_fail(2, cmd, "%s: not a compaction option", opt);
    if (duration_opt(cmd, opt, arg, &a->o.block_ms) != 0)
        return 2;
    return a->o.block_ms > 0 ? 0 : em_cli_fail(2, cmd, "%s 0: a block spans "
                                               "time", opt);
}

static void mib(char *buf, size_t n, uint64_t bytes)
{
    snprintf(buf, n, "%.2f MiB", (double)bytes / (1024.0 * 1024.0));
}

void em_compact_summary(const ember_compact_report *r, bool dry, char *buf,
                        size_t n)
{
    char a[32], b[32];

    mib(a, sizeof a, r->bytes_before);
    mib(b, sizeof b, r->bytes_after);
    snprintf(buf, n, "%s: %s -> %s on disk; %llu blocks cut from the head, "
             "%llu profiles moved out of it, %llu blocks removed",
             dry ? "dry run" : "compacted", a, b,
             (unsigned long long)r->blocks_written,
             (unsigned long long)r->profiles_moved,
             (unsigned long long)r->blocks_removed);
}
