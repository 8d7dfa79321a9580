/*
** repl/cmd_query.c: `ember query`. Runs one query of the language
** (ember_query: parse, plan, execute on one snapshot) and writes its result
** with the renderers the REPL uses (em_render_result). The format is -o's,
** or the one that suits the result's kind (top for profiles, table for
** series and tables); a format that does not fit the kind is refused with
** the list of those that do, and binary formats never go to a terminal.
** With --server the query runs on `ember serve` (ember_client_query) and
** its result renders here with the very same renderers.
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

enum { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER };

typedef struct query_args {
    em_source_args src;         /* -d DIR or --server URL */
    const char *from, *to, *text;
    const char *output_file;    /* NULL: stdout */
    const char *unit;           /* top's --unit; NULL: pprof's "minimum" */
    const char *format;         /* -o; NULL: by the result's kind */
    int64_t step_ms;            /* --step; 0: none */
    size_t limit;               /* --limit; 0: all (or top(P, N)'s N) */
    unsigned width;             /* --width; 0: the terminal's, else 100 */
    int color;                  /* COLOR_* */
    bool cum;
} query_args;

/* A count option: digits only, so that "-5" or "ten" is a usage error
** instead of a huge or zero limit. */
static int parse_count(const char *opt, const char *s, uint64_t max,
                       uint64_t *out)
{
    char *end;

    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        goto bad;
    *out = strtoull(s, &end, 10);
    if (errno == 0 && *end == '\0' && *out <= max)
        return 0;
bad:
    return em_cli_fail(2, "query", "%s %s: expected a number up to %llu",
                       opt, s, (unsigned long long)max);
}

static int parse_color(const char *s, int *out)
{
    static const char *const names[] = { "auto", "always", "never" };

    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return em_cli_fail(2, "query", "--color %s: expected auto, always or "
                       "never", s);
}

static int parse_step(const char *s, int64_t *out)
{
    if (em_duration_parse(s, out) == EMBER_OK && *out > 0)
        return 0;
    return em_cli_fail(2, "query", "--step %s: expected a duration such as "
                       "30s, 5m or 1h", s);
}

/* Handles one option of getopt_long's; 0 or the exit status. */
static int query_option(query_args *a, int c, const char *arg)
{
    uint64_t n = 0;
    int st = 0;

    if (em_source_option(&a->src, c, arg))
        return 0;
    switch (c) {
    case 'F': a->from = arg; break;
    case 'T': a->to = arg; break;
    case 'o': a->format = arg; break;
    case 'O': a->output_file = arg; break;
    case 'u': a->unit = arg; break;
    case 'c': a->cum = true; break;
    case 's': st = parse_step(arg, &a->step_ms); break;
    case 'C': st = parse_color(arg, &a->color); break;
    case 'n':
        if ((st = parse_count("--limit", arg, SIZE_MAX, &n)) == 0)
            a->limit = (size_t)n;
        break;
    case 'w':
        if ((st = parse_count("--width", arg, 100000, &n)) == 0)
            a->width = (unsigned)n;
        break;
    default: return em_cli_bad_option("query", c);
    }
    return st;
}

/* Checks what the command line alone can tell; the result's kind settles
** the rest (query_check_kind). */
static int query_check_args(const query_args *a)
{
    char list[160];

    if (a->format != NULL && !em_cli_format_known(a->format))
        return em_cli_fail(2, "query", "-o %s: expected %s", a->format,
                           em_cli_format_list(0, list, sizeof list));
    if (a->unit != NULL && a->format != NULL && strcmp(a->format, "top") != 0)
        return em_cli_fail(2, "query", "--unit applies to -o top only");
    if (a->unit != NULL && a->unit[0] == '\0')
        return em_cli_fail(2, "query", "--unit: empty unit");
    if (a->format != NULL && em_render_binary(a->format) &&
        a->output_file == NULL && isatty(STDOUT_FILENO))
        return em_cli_fail(2, "query", "-o %s writes binary data; refusing "
                           "to write it to a terminal: redirect it "
                           "(> out.pb.gz) or use --output-file FILE",
                           a->format);
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
        { "step", required_argument, NULL, 's' },
        { "color", required_argument, NULL, 'C' },
        { "width", required_argument, NULL, 'w' },
        { "server", required_argument, NULL, EM_OPT_SERVER },
        { "token-file", required_argument, NULL, EM_OPT_TOKEN_FILE },
        { "ca-file", required_argument, NULL, EM_OPT_CA_FILE },
        { NULL, 0, NULL, 0 },
    };
    int c, st;

    memset(a, 0, sizeof *a);
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:o:", longs, NULL)) != -1)
        if ((st = query_option(a, c, optarg)) != 0)
            return st;
    if ((st = em_source_check("query", &a->src)) != 0 ||
        (st = em_cli_args("query", a->src.server != NULL ? a->src.server
                                                         : a->src.dir,
                          argc, argv, 1, 1)) != 0)
        return st;
    a->text = argv[optind];
    return query_check_args(a);
}

/* The format for a result of KIND: -o's when it fits, else 2 with the
** list of those that do. */
static int query_check_kind(const query_args *a, int kind, const char **fmt)
{
    char list[160];

    *fmt = a->format != NULL ? a->format : em_render_default(kind);
    if (!em_render_fits(kind, *fmt))
        return em_cli_fail(2, "query", "-o %s does not fit a %s result; "
                           "use -o %s", *fmt, em_cli_kind_name(kind),
                           em_cli_format_list(kind, list, sizeof list));
    if (a->unit != NULL && strcmp(*fmt, "top") != 0)
        return em_cli_fail(2, "query", "--unit applies to -o top only, "
                           "and this %s result renders as %s",
                           em_cli_kind_name(kind), *fmt);
    return 0;
}

static void query_render_opts(const query_args *a, ember_db *db, FILE *f,
                              em_render_opts *o)
{
    unsigned cols, rows;

    em_cli_term_size(fileno(f), &cols, &rows);
    memset(o, 0, sizeof *o);
    o->sz = sizeof *o;
    o->db = db;
    o->cum_sort = a->cum;
    o->limit = a->limit;
    o->unit = a->unit;
    o->color = a->color == COLOR_ALWAYS ||
               (a->color == COLOR_AUTO && em_cli_color_auto(f));
    o->width = a->width != 0 ? a->width : cols;
    o->query = a->text;
    o->source_path = "";                /* list: sources as pprof finds them */
}

/* Renders to stdout or to the output file, which is only created once the
** query succeeded and is removed again when rendering fails. */
static int query_output(const query_args *a, ember_db *db,
                        const ember_result *r, const char *fmt)
{
    const char *path = a->output_file;
    FILE *f = path != NULL ? fopen(path, "wb") : stdout;
    em_render_opts o;
    int rc;

    if (f == NULL)
        return em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
    query_render_opts(a, db, f, &o);
    rc = em_render_result(f, r, fmt, &o);
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

/* Runs the query and writes it; returns the exit status. */
static int query_run(const query_args *a, em_source *src)
{
    ember_db *db = src->db;
    ember_query_opts qo = { .sz = sizeof qo, .step_ms = a->step_ms };
    ember_result *r = NULL;
    const char *fmt;
    int rc, st;

    rc = em_cli_range(a->from, a->to, em_cli_now_ms(), &qo.from_ms,
                      &qo.to_ms);
    /* pprof reads the symbols itself: resolving names would be wasted */
    if (rc == EMBER_OK)
        rc = em_source_query(src, a->text, &qo,
                          a->format != NULL && strcmp(a->format, "pprof") == 0
                              ? EM_QUERY_IDS_ONLY : 0, &r);
    if (rc != EMBER_OK) {
        st = em_cli_fail(1, "query", "%s", ember_errmsg(db));
        goto out;
    }
    st = query_check_kind(a, ember_result_kind(r), &fmt);
    if (st != 0)
        goto out;
    for (size_t i = 0; i < ember_result_notes(r); i++)
        fprintf(stderr, "ember query: note: %s\n", ember_result_note(r, i));
    em_cli_note_sums("ember query", r);
    if (query_output(a, db, r, fmt) != EMBER_OK)
        st = em_cli_fail(1, "query", "%s", ember_errmsg(db));
out:
    ember_result_free(r);
    return st;
}

int em_cmd_query(int argc, char **argv)
{
    query_args a;
    em_source src;
    int st = query_parse_args(&a, argc, argv);

    if (st != 0)
        return st;
    if (em_source_open("query", &a.src, 1, &src) != EMBER_OK)
        return 1;
    st = query_run(&a, &src);
    em_source_close(&src);
    return st;
}
