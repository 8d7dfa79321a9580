/*
** repl/repl_dot.c: the REPL's dot commands, in the sqlite3 and psql habit.
** One table (em_dot_cmds) drives their dispatch, `.help` and tab
** completion (what each one's first argument is), so a command cannot
** exist without its help. Settings shown with no argument, changed with
** one; a failure says why on stderr and counts as a failed statement.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

/* ---- small helpers ----------------------------------------------------- */

static const char *skip_blank(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static size_t word_len(const char *s)
{
    return strcspn(s, " \t");
}

/* Replaces the string *SLOT with a copy of S (NULL: none). */
static int set_str(em_repl *r, char **slot, const char *s)
{
    char *copy = NULL;

    if (s != NULL && (copy = em_strdup(s)) == NULL)
        return em_repl_fail(r, "out of memory");
    em_free(*slot);
    *slot = copy;
    return 0;
}

/* How many lines a list may print to stdout before it is cut: the
** terminal's height, unless .limit is set or output goes to a file. */
static size_t list_room(const em_repl *r)
{
    unsigned cols, rows;

    if (r->out != NULL || r->limit != 0)
        return r->limit;
    em_cli_term_size(STDOUT_FILENO, &cols, &rows);
    return rows > 4 ? rows - 2 : rows > 0 ? 2 : 0;
}

/* Prints L one item a line where output goes, cut as list_room says. */
static int list_print(em_repl *r, const ember_strlist *l)
{
    FILE *f = r->out != NULL ? r->out : stdout;
    size_t n = ember_strlist_count(l), room = list_room(r);
    size_t show = room != 0 && n > room ? room - 1 : n;

    for (size_t i = 0; i < show; i++)
        fprintf(f, "%s\n", ember_strlist_get(l, i));
    if (show < n)
        fprintf(f, "... %zu more rows (use .limit or .output FILE)\n",
                n - show);
    if (fflush(f) != 0)
        return em_repl_fail(r, "%s: %s", r->out_path ? r->out_path : "stdout",
                            strerror(errno));
    return 0;
}

/* Parses SEL_TEXT ("" for none) as a selector over the .range into
** *SEL, keeping the tree in *NODE for the selector's pointers. */
static int parse_selector(em_repl *r, const char *text, em_node **node,
                          ember_selector *sel, bool *given)
{
    int64_t from, to;
    int rc;

    *node = NULL;
    *given = text[0] != '\0';
    if (!*given)
        return 0;
    rc = em_cli_range(r->from, r->to, em_cli_now_ms(), &from, &to);
    if (rc == EMBER_OK)
        rc = em_query_parse(text, node);
    if (rc != EMBER_OK)
        return em_repl_fail(r, "%s", ember_errmsg(r->db));
    if ((*node)->kind != EM_NODE_SELECTOR)
        return em_repl_fail(r, "%s: expected a selector such as "
                            "{service=\"api\"} or a profile type", text);
    em_sel_view(&(*node)->u.sel, from, to, sel);
    return 0;
}

/* ---- the commands ------------------------------------------------------- */

static int dot_help(em_repl *r, const char *args);

static int dot_range(em_repl *r, const char *args)
{
    char a[40], b[40], *from = NULL;
    const char *to;
    int64_t f, t;
    int st;

    if (args[0] == '\0') {
        if (r->from == NULL && r->to == NULL) {
            printf("range: all time\n");
        } else if (em_cli_range(r->from, r->to, em_cli_now_ms(), &f, &t) ==
                   EMBER_OK) {
            printf("range: %s .. %s, now %s .. %s\n",
                   r->from ? r->from : "the epoch", r->to ? r->to : "now",
                   em_time_format(f, a), em_time_format(t, b));
        }
        return 0;
    }
    if (strcmp(args, "all") == 0 || strcmp(args, "off") == 0)
        return set_str(r, &r->from, NULL) | set_str(r, &r->to, NULL);
    if ((from = em_strndup(args, word_len(args))) == NULL)
        return em_repl_fail(r, "out of memory");
    to = skip_blank(args + word_len(args));
    if (em_cli_range(from, to[0] ? to : NULL, em_cli_now_ms(), &f, &t) !=
        EMBER_OK)
        st = em_repl_fail(r, ".range: %s", ember_errmsg(r->db));
    else
        st = set_str(r, &r->from, from) |
             set_str(r, &r->to, to[0] ? to : NULL);
    em_free(from);
    return st;
}

static int dot_step(em_repl *r, const char *args)
{
    int64_t ms;

    if (args[0] == '\0') {
        if (r->step_ms == 0)
            printf("step: off\n");
        else
            printf("step: %lld ms\n", (long long)r->step_ms);
        return 0;
    }
    if (strcmp(args, "off") == 0 || strcmp(args, "0") == 0) {
        r->step_ms = 0;
        return 0;
    }
    if (em_duration_parse(args, &ms) != EMBER_OK || ms <= 0)
        return em_repl_fail(r, ".step %s: expected a duration such as 30s, "
                            "5m or 1h, or off", args);
    r->step_ms = ms;
    return 0;
}

static int dot_format(em_repl *r, const char *args)
{
    char list[160];

    if (args[0] == '\0') {
        printf("format: %s\n", r->format ? r->format :
               "auto (top for profiles, spark for series, table for tables)");
        return 0;
    }
    if (strcmp(args, "auto") == 0)
        return set_str(r, &r->format, NULL);
    if (!em_cli_format_known(args))
        return em_repl_fail(r, ".format %s: expected auto, %s", args,
                            em_cli_format_list(0, list, sizeof list));
    if (em_render_binary(args) && r->out == NULL)
        return em_repl_fail(r, ".format %s writes binary data: send it to "
                            "a file first with .output FILE", args);
    return set_str(r, &r->format, args);
}

static int dot_types(em_repl *r, const char *args)
{
    ember_strlist *l = NULL;
    int st;

    if (args[0] != '\0')
        return em_repl_fail(r, ".types takes no argument");
    if (em_source_types(&r->src, NULL, NULL, &l) != EMBER_OK)
        return em_repl_fail(r, "%s", ember_errmsg(r->db));
    st = list_print(r, l);
    ember_strlist_free(l);
    return st;
}

static int dot_labels(em_repl *r, const char *args)
{
    ember_strlist *l = NULL;
    ember_selector sel;
    em_node *n = NULL;
    bool given;
    int st = parse_selector(r, args, &n, &sel, &given);

    if (st == 0 && em_source_label_names(&r->src, given ? args : NULL,
                                         given ? &sel : NULL, &l) != EMBER_OK)
        st = em_repl_fail(r, "%s", ember_errmsg(r->db));
    if (st == 0)
        st = list_print(r, l);
    ember_strlist_free(l);
    em_node_free(n);
    return st;
}

static int dot_values(em_repl *r, const char *args)
{
    ember_strlist *l = NULL;
    ember_selector sel;
    em_node *n = NULL;
    char *name = em_strndup(args, word_len(args));
    const char *match = NULL;   /* the selector's text, for a server */
    bool given;
    int st;

    if (name == NULL)
        return em_repl_fail(r, "out of memory");
    if (name[0] == '\0')
        st = em_repl_fail(r, ".values needs a label name: .values NAME "
                          "[SELECTOR]");
    else
        st = parse_selector(r, match = skip_blank(args + strlen(name)), &n,
                            &sel, &given);
    if (st == 0 && strcmp(name, "__type__") == 0)
        st = em_source_types(&r->src, given ? match : NULL,
                             given ? &sel : NULL, &l);
    else if (st == 0)
        st = em_source_label_values(&r->src, name, given ? match : NULL,
                                    given ? &sel : NULL, &l);
    if (st < 0)
        st = em_repl_fail(r, "%s", ember_errmsg(r->db));
    if (st == 0)
        st = list_print(r, l);
    ember_strlist_free(l);
    em_node_free(n);
    em_free(name);
    return st;
}

static int dot_timing(em_repl *r, const char *args)
{
    if (args[0] == '\0')
        printf("timing: %s\n", r->timing ? "on" : "off");
    else if (strcmp(args, "on") == 0 || strcmp(args, "off") == 0)
        r->timing = strcmp(args, "on") == 0;
    else
        return em_repl_fail(r, ".timing %s: expected on or off", args);
    return 0;
}

/* sqlite3's .output: a file until the next .output; none is stdout. */
static int dot_output(em_repl *r, const char *args)
{
    FILE *f = NULL;

    if (args[0] != '\0' && strcmp(args, "stdout") != 0 &&
        (f = fopen(args, "w")) == NULL)
        return em_repl_fail(r, ".output %s: %s", args, strerror(errno));
    if (r->out != NULL && fclose(r->out) != 0)
        fprintf(stderr, "note: closing %s: %s\n", r->out_path,
                strerror(errno));
    r->out = f;
    if (set_str(r, &r->out_path, f != NULL ? args : NULL) != 0)
        return 1;
    if (f == NULL && r->format != NULL && em_render_binary(r->format))
        set_str(r, &r->format, NULL);   /* binary never to a terminal */
    return 0;
}

static int dot_limit(em_repl *r, const char *args)
{
    char *end;
    unsigned long long n;

    if (args[0] == '\0') {
        if (r->limit == 0)
            printf("limit: off (long output is cut at the terminal's "
                   "height)\n");
        else
            printf("limit: %zu rows\n", r->limit);
        return 0;
    }
    if (strcmp(args, "off") == 0) {
        r->limit = 0;
        return 0;
    }
    errno = 0;
    n = strtoull(args, &end, 10);
    if (args[0] < '0' || args[0] > '9' || *end != '\0' || errno != 0 ||
        n > SIZE_MAX)
        return em_repl_fail(r, ".limit %s: expected a number of rows or "
                            "off", args);
    r->limit = (size_t)n;
    return 0;
}

static int dot_show(em_repl *r, const char *args)
{
    if (args[0] != '\0')
        return em_repl_fail(r, ".show takes no argument");
    dot_range(r, "");
    dot_step(r, "");
    dot_format(r, "");
    dot_limit(r, "");
    dot_timing(r, "");
    printf("output: %s\n", r->out_path ? r->out_path : "stdout");
    return 0;
}

static int dot_reload(em_repl *r, const char *args)
{
    if (args[0] != '\0')
        return em_repl_fail(r, ".reload takes no argument");
    em_repl_cache_drop(r);
    return 0;
}

static int dot_quit(em_repl *r, const char *args)
{
    EM_UNUSED(args);
    r->quit = true;
    return 0;
}

const em_dot_cmd em_dot_cmds[] = {
    { ".help", "[COMMAND]", "list the commands, or tell about one",
      dot_help, EM_COMPLETE_DOT },
    { ".range", "[FROM [TO]|all]", "time range of queries (RFC 3339, unix, "
      "now, -1h)", dot_range, EM_COMPLETE_NONE },
    { ".step", "[DURATION|off]", "bucket series points by DURATION (30s, "
      "5m, 1h)", dot_step, EM_COMPLETE_OFF },
    { ".format", "[FORMAT|auto]", "top tree flame collapsed json svg pprof "
      "table csv spark", dot_format, EM_COMPLETE_FORMAT },
    { ".types", "", "list the profile types", dot_types, EM_COMPLETE_NONE },
    { ".labels", "[SELECTOR]", "list label names (of the series SELECTOR "
      "matches)", dot_labels, EM_COMPLETE_QUERY },
    { ".values", "NAME [SELECTOR]", "list the values of label NAME",
      dot_values, EM_COMPLETE_LABEL },
    { ".timing", "[on|off]", "print how long each query takes", dot_timing,
      EM_COMPLETE_ONOFF },
    { ".output", "[FILE|stdout]", "write results to FILE; none: back to "
      "stdout", dot_output, EM_COMPLETE_NONE },
    { ".limit", "[N|off]", "rows of top and tree; off: cut at the screen's "
      "height", dot_limit, EM_COMPLETE_OFF },
    { ".show", "", "show every setting", dot_show, EM_COMPLETE_NONE },
    { ".reload", "", "forget the names cached for completion", dot_reload,
      EM_COMPLETE_NONE },
    { ".quit", "", "leave (so does ^D)", dot_quit, EM_COMPLETE_NONE },
    { ".exit", "", "leave", dot_quit, EM_COMPLETE_NONE },
};
const size_t em_ndot_cmds = EM_ARRAY_LEN(em_dot_cmds);

static void help_line(const em_dot_cmd *c)
{
    char head[40];

    snprintf(head, sizeof head, "%s %s", c->name, c->args);
    printf("%-24s %s\n", head, c->help);
}

static const em_dot_cmd *dot_find(em_repl *r, const char *name, size_t n);

static int dot_help(em_repl *r, const char *args)
{
    const em_dot_cmd *c;

    if (args[0] != '\0') {
        c = dot_find(r, args, strlen(args));
        if (c == NULL)
            return 1;
        help_line(c);
        return 0;
    }
    for (size_t i = 0; i < em_ndot_cmds; i++)
        help_line(&em_dot_cmds[i]);
    printf("\nAnything else is a query, e.g. merge(TYPE{label=\"value\"}); "
           "it goes on\nover lines while brackets or quotes are open. "
           "docs/repl.md tells more.\n");
    return 0;
}

/* The command named by the N bytes at NAME ('.' optional), or a unique
** prefix of one, as sqlite3 takes ".h" for ".help". */
static const em_dot_cmd *dot_find(em_repl *r, const char *name, size_t n)
{
    const em_dot_cmd *hit = NULL;
    size_t nhits = 0;

    if (n > 0 && name[0] == '.') {
        name++;
        n--;
    }
    for (size_t i = 0; i < em_ndot_cmds; i++) {
        const char *cn = em_dot_cmds[i].name + 1;
        if (strlen(cn) == n && memcmp(cn, name, n) == 0)
            return &em_dot_cmds[i];
        if (n > 0 && strncmp(cn, name, n) == 0) {
            hit = &em_dot_cmds[i];
            nhits++;
        }
    }
    if (nhits == 1)
        return hit;
    em_repl_fail(r, "%s .%.*s: .help lists the commands",
                 nhits > 1 ? "ambiguous command" : "no command",
                 (int)n, name);
    return NULL;
}

int em_repl_dot(em_repl *r, const char *line)
{
    const char *p = skip_blank(line);
    size_t n = word_len(p), end;
    const em_dot_cmd *c = dot_find(r, p, n);
    char *args;
    int st;

    if (c == NULL)
        return 1;
    p = skip_blank(p + n);
    end = strlen(p);
    while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t' ||
                       p[end - 1] == '\r'))
        end--;
    if ((args = em_strndup(p, end)) == NULL)
        return em_repl_fail(r, "out of memory");
    st = c->run(r, args);
    em_free(args);
    return st;
}
