/*
** repl/cmd_query.c: `ember query`. Parses the selector, merges what it
** matches over the range and writes it in one of the formats of a table:
** top and collapsed resolve stacks to names (query/), pprof encodes the
** merged profile with every symbol (ember_pprof_encode) as gzip'd protobuf.
** A merge only makes sense within one profile type, so a selector that
** matches several types is refused with their names.
*/
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

typedef struct query_format query_format;

typedef struct query_args {
    const char *dir, *from, *to, *text;
    const char *output_file;    /* NULL: stdout */
    const char *unit;           /* top's --unit; NULL: pprof's "minimum" */
    const query_format *format;
    size_t limit;
    bool cum;
} query_args;

/* Writes merged profile M (of TYPE) to F. */
typedef int (*query_render_fn)(const query_args *a, ember_db *db,
                               const ember_merged *m, const char *type,
                               FILE *f);

struct query_format {
    const char *name;
    query_render_fn render;
    bool binary;                /* never written to a terminal */
};

static const query_format *query_format_find(const char *name);

/* Checks what only the whole command line can tell. */
static int query_check_args(const query_args *a)
{
    if (a->unit != NULL && strcmp(a->format->name, "top") != 0)
        return em_cli_fail(2, "query", "--unit applies to -o top only");
    if (a->unit != NULL && a->unit[0] == '\0')
        return em_cli_fail(2, "query", "--unit: empty unit");
    if (a->format->binary && a->output_file == NULL &&
        isatty(STDOUT_FILENO))
        return em_cli_fail(2, "query", "-o %s writes binary data; refusing "
                           "to write it to a terminal: redirect it "
                           "(> out.pb.gz) or use --output-file FILE",
                           a->format->name);
    return 0;
}

static int query_parse_args(query_args *a, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "from", required_argument, NULL, 'F' },
        { "to", required_argument, NULL, 'T' },
        { "output", required_argument, NULL, 'o' },
        { "output-file", required_argument, NULL, 'O' },
        { "unit", required_argument, NULL, 'u' },
        { "limit", required_argument, NULL, 'n' },
        { "cum", no_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    const char *format = "top";
    int c;

    memset(a, 0, sizeof *a);
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:o:", longs, NULL)) != -1) {
        switch (c) {
        case 'd': a->dir = optarg; break;
        case 'F': a->from = optarg; break;
        case 'T': a->to = optarg; break;
        case 'o': format = optarg; break;
        case 'O': a->output_file = optarg; break;
        case 'u': a->unit = optarg; break;
        case 'n': a->limit = (size_t)strtoull(optarg, NULL, 10); break;
        case 'c': a->cum = true; break;
        default: return em_cli_usage("query");
        }
    }
    if (a->dir == NULL || optind != argc - 1)
        return em_cli_usage("query");
    if ((a->format = query_format_find(format)) == NULL)
        return em_cli_fail(2, "query", "-o %s: expected top, collapsed or "
                           "pprof", format);
    a->text = argv[optind];
    return query_check_args(a);
}

/* The one profile type SEL covers, or an error naming them all. */
static int query_type(ember_db *db, const ember_selector *sel, char **type)
{
    ember_strlist *types = NULL;
    int rc = ember_profile_types(db, sel, &types);

    *type = NULL;
    if (rc == EMBER_OK && ember_strlist_count(types) > 1) {
        char list[1024] = "";
        for (size_t i = 0; i < ember_strlist_count(types) && i < 8; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, ember_strlist_get(types, i),
                    sizeof list - strlen(list) - 1);
        }
        rc = em_err(EMBER_EINVAL, "the selector matches %zu profile types "
                    "(%s); name one, e.g. '%s{...}'",
                    ember_strlist_count(types), list,
                    ember_strlist_get(types, 0));
    } else if (rc == EMBER_OK && ember_strlist_count(types) == 1) {
        *type = em_strdup(ember_strlist_get(types, 0));
        if (*type == NULL)
            rc = em_err(EMBER_ENOMEM, "type name");
    }
    ember_strlist_free(types);
    return rc;
}

static int query_range(const query_args *a, int64_t *from, int64_t *to)
{
    int64_t now = em_cli_now_ms();
    int rc = EMBER_OK;

    *from = 0;
    *to = 0;
    if (a->from == NULL && a->to == NULL)
        return EMBER_OK;
    *from = INT64_MIN;
    *to = INT64_MAX;
    if (a->from != NULL)
        rc = em_time_parse(a->from, now, from);
    if (rc == EMBER_OK && a->to != NULL)
        rc = em_time_parse(a->to, now, to);
    if (rc == EMBER_OK && *from > *to)
        rc = em_err(EMBER_EINVAL, "--from is after --to");
    return rc;
}

/* ---- the formats -------------------------------------------------------- */

static int render_resolved(const query_args *a, ember_db *db,
                           const ember_merged *m, const char *type, FILE *f)
{
    em_top_opts o = { .sz = sizeof o, .cum_sort = a->cum, .limit = a->limit,
                      .unit = a->unit };
    em_rprofile p;
    int rc = em_rprofile_build(db, m, type, NULL, &p);

    if (rc != EMBER_OK)
        return rc;
    if (strcmp(a->format->name, "collapsed") == 0)
        rc = em_render_collapsed(f, &p);
    else
        rc = em_render_top(f, &p, &o);
    em_rprofile_free(&p);
    return rc;
}

static int render_pprof(const query_args *a, ember_db *db,
                        const ember_merged *m, const char *type, FILE *f)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = ember_pprof_encode(db, m, type, EMBER_PPROF_GZIP, &buf, &len);

    EM_UNUSED(a);
    if (rc == EMBER_OK && fwrite(buf, 1, len, f) != len)
        rc = em_err(EMBER_EIO, "writing pprof: %s", strerror(errno));
    ember_free(buf);
    return rc;
}

static const query_format query_formats[] = {
    { "top", render_resolved, false },
    { "collapsed", render_resolved, false },
    { "pprof", render_pprof, true },
};

static const query_format *query_format_find(const char *name)
{
    for (size_t i = 0; i < EM_ARRAY_LEN(query_formats); i++)
        if (strcmp(query_formats[i].name, name) == 0)
            return &query_formats[i];
    return NULL;
}

/* Renders to stdout or to the output file, which is only created once
** the merge succeeded and is removed again when rendering fails. */
static int query_output(const query_args *a, ember_db *db,
                        const ember_merged *m, const char *type)
{
    const char *path = a->output_file;
    FILE *f = path != NULL ? fopen(path, "wb") : stdout;
    int rc;

    if (f == NULL)
        return em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
    rc = a->format->render(a, db, m, type, f);
    if (fflush(f) != 0 && rc == EMBER_OK)
        rc = em_err(EMBER_EIO, "%s: %s", path ? path : "stdout",
                    strerror(errno));
    if (path != NULL) {
        if (fclose(f) != 0 && rc == EMBER_OK)
            rc = em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
        if (rc != EMBER_OK)
            remove(path);
    }
    return rc;
}

/* pprof needs a type even when nothing matched: the selector's own, which
** gives a valid empty profile; without one there is nothing to write. */
static int query_pprof_type(const query_args *a, const em_sel *sel,
                            char **type)
{
    if (*type != NULL || a->format->render != render_pprof)
        return EMBER_OK;
    if (sel->type == NULL)
        return em_err(EMBER_ENOTFOUND, "the selector matches no profile "
                      "and names no type: no pprof to write");
    *type = em_strdup(sel->type);
    return *type != NULL ? EMBER_OK : em_err(EMBER_ENOMEM, "type name");
}

/* Summing several profiles of one series is right for delta types (each
** covers its own time) but adds up snapshots for gauges (inuse_space,
** goroutine) and totals since process start (alloc_*, mutex, block): say
** so, as the answer is still what `go tool pprof` gives over those files. */
static void query_note_cumulative(const ember_merged *m, const char *type)
{
    size_t len = strlen(type);
    uint64_t nseries = 0, nprofiles = 0;

    if (len >= 6 && strcmp(type + len - 6, ":delta") == 0)
        return;
    ember_merged_info(m, &nseries, &nprofiles);
    if (nprofiles > nseries)
        fprintf(stderr, "ember query: note: %s is not a delta type; %llu "
                "profiles of %llu series were summed, as go tool pprof sums "
                "files. For one point in time narrow --from/--to "
                "(docs/ingest.md).\n", type, (unsigned long long)nprofiles,
                (unsigned long long)nseries);
}

static int query_run(const query_args *a, ember_db *db)
{
    ember_selector sel;
    ember_merged *m = NULL;
    em_node *n = NULL;
    int64_t from, to;
    char *type = NULL;
    int rc = query_range(a, &from, &to);

    if (rc == EMBER_OK)
        rc = em_query_parse(a->text, &n);
    if (rc == EMBER_OK) {
        em_sel_view(&n->u.sel, from, to, &sel);
        rc = query_type(db, &sel, &type);
    }
    if (rc == EMBER_OK)
        rc = query_pprof_type(a, &n->u.sel, &type);
    if (rc == EMBER_OK && type != NULL) {
        sel.type = type;
        rc = ember_merge(db, &sel, &m);
    }
    if (rc == EMBER_OK && m != NULL) {
        query_note_cumulative(m, type);
        rc = query_output(a, db, m, type);
    }
    ember_merged_free(m);
    em_node_free(n);
    em_free(type);
    return rc;
}

int em_cmd_query(int argc, char **argv)
{
    query_args a;
    ember_db *db = NULL;
    int rc, st = query_parse_args(&a, argc, argv);

    if (st != 0)
        return st;
    if (em_cli_open("query", a.dir, 1, &db) != EMBER_OK)
        return 1;
    rc = query_run(&a, db);
    if (rc != EMBER_OK)
        em_cli_fail(1, "query", "%s", ember_errmsg(db));
    ember_close(db);
    return rc == EMBER_OK ? 0 : 1;
}
