/*
** query/render_list.c: the list view, `go tool pprof -list=re` (pprof's
** annotated source), as text for `-o top` and as JSON for a page. The
** profile is at granularity lines (the planner makes it so, as pprof's
** -list does), so its graph's nodes (render_graph.c) are pprof's: one per
** function, file and line, with flat and cum.
**
**     Total: 800ms
**     ROUTINE ======================== main.fib in /src/main.go
**          250ms      570ms (flat, cum) 71.25% of Total
**              .          .     50:
**           90ms      130ms     51:func fib(n int) int {
**
** Functions whose name matches the regex (anywhere, as pprof's) come in
** name order, each once per source file (by file name); a function with no
** file has "No source information for NAME". The header sums the lines'
** flat and cum (pprof's: a sample through two lines counts twice in cum).
** The lines shown run from the function's first line (else 5 before the
** first line with samples) to 5 after the last, stopping at the end of the
** file; each value is scaled on its own ("." for 0), unless o->unit
** fixes one. The source is found as pprof finds it (source_open) and its
** lines are written as they are, but control characters other than tabs,
** which become spaces. When it cannot be read (or o->source_path is NULL:
** a server reads no files that profiles name), pprof's " Error: ..." line
** follows the header, then the lines with samples, without text.
**
** Where pprof's choice of the range would depend on the order of its
** graph's nodes (a function some of whose lines know its first line and
** some do not), this takes the widest range.
*/
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "query/render_int.h"

#define LIST_MARGIN 5               /* lines shown around those sampled */
#define SOURCE_MAX (64u << 20)      /* a larger source file is not read */

/* ---- source files --------------------------------------------------------------- */

typedef struct srcfile {
    char *path;                     /* as the profile names it */
    char *text;                     /* the file, NULL when unreadable */
    size_t *line;                   /* offset of line i + 1 in text */
    size_t nlines;
    char *error;                    /* why it is unreadable */
} srcfile;

typedef struct srccache {
    srcfile *v;
    size_t n, cap;
} srccache;

/* pprof's trimPath before a search: past "/<base of a search dir>/"
** when the path holds it, then past a /proc/self/cwd/ prefix. */
static const char *source_trim(const char *path, const char *search)
{
    for (const char *d = search; ; d = strchr(d, ':') + 1) {
        size_t n = strchr(d, ':') != NULL ? (size_t)(strchr(d, ':') - d)
                                          : strlen(d);
        char want[4096];
        size_t b = n;
        while (b > 1 && d[b - 1] == '/')
            b--;
        size_t a = b;
        while (a > 0 && d[a - 1] != '/')
            a--;
        if (b > a && b - a + 2 < sizeof want) {
            snprintf(want, sizeof want, "/%.*s/", (int)(b - a), d + a);
            if (strstr(path, want) != NULL)
                return strstr(path, want) + strlen(want);
        }
        if (strchr(d, ':') == NULL)
            break;
    }
    if (strncmp(path, "/proc/self/cwd/./", 17) == 0)
        return path + 17;
    if (strncmp(path, "/proc/self/cwd/", 15) == 0)
        return path + 15;
    return path;
}

/* Opens PATH as pprof's openSourceFile: an absolute path as it is, a
** relative one under each search directory or one of its parents. */
static FILE *source_open(const char *path, const char *search, char *why,
                         size_t cap)
{
    char cwd[4096], dir[4096], name[8192];
    const char *p;
    FILE *f;

    if (search[0] == '\0' && getcwd(cwd, sizeof cwd) != NULL)
        search = cwd;                   /* pprof's default: the cwd */
    p = source_trim(path, search);
    if (p[0] == '/') {
        if ((f = fopen(p, "rb")) == NULL)
            snprintf(why, cap, "open %s: %s", p, strerror(errno));
        return f;
    }
    for (const char *d = search; d != NULL; d = strchr(d, ':')) {
        d += d[0] == ':';
        snprintf(dir, sizeof dir, "%.*s", (int)strcspn(d, ":"), d);
        for (;;) {
            snprintf(name, sizeof name, "%s/%s", dir, p);
            if ((f = fopen(name, "rb")) != NULL)
                return f;
            if (strrchr(dir, '/') == NULL || strcmp(dir, "/") == 0)
                break;
            *strrchr(dir, '/') = '\0';  /* the parent, up to the root */
            if (dir[0] == '\0')
                strcpy(dir, "/");
        }
    }
    snprintf(why, cap, "could not find file %s on path %s", p, search);
    return NULL;
}

/* Reads F whole into S, its lines indexed (a trailing CR dropped, as Go's
** bufio.Scanner drops it). */
static int source_read(FILE *f, srcfile *s)
{
    size_t len = 0, cap = 0, nl = 0;
    char buf[65536];
    size_t n;

    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        char *g = em_grow(s->text, &cap, len + n + 1, 1);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "list: %s", s->path);
        s->text = g;
        if (len + n > SOURCE_MAX)
            return EMBER_ELIMIT;
        memcpy(s->text + len, buf, n);
        len += n;
    }
    if (s->text == NULL && (s->text = em_malloc(1)) == NULL)
        return em_err(EMBER_ENOMEM, "list: %s", s->path);
    s->text[len] = '\0';
    for (size_t i = 0; i < len; i++)
        nl += s->text[i] == '\n';
    if ((s->line = em_malloc((nl + 2) * sizeof *s->line)) == NULL)
        return em_err(EMBER_ENOMEM, "list: %zu lines", nl + 1);
    for (size_t i = 0, at = 0; i <= len; i++)
        if (i == len || s->text[i] == '\n') {
            if (i > at || i < len)
                s->line[s->nlines++] = at;
            if (i > at && s->text[i - 1] == '\r')
                s->text[i - 1] = '\0';
            s->text[i] = '\0';
            at = i + 1;
        }
    return EMBER_OK;
}

/* Loads PATH into S (unreadable: S->error says why). */
static int source_load(srcfile *s, const char *path, const char *search)
{
    char why[8400] = "not reading source files here";
    FILE *f = search != NULL ? source_open(path, search, why, sizeof why)
                             : NULL;
    int rc = EMBER_OK;

    memset(s, 0, sizeof *s);
    if ((s->path = em_strdup(path)) == NULL)
        return em_err(EMBER_ENOMEM, "list: %s", path);
    if (f != NULL) {
        bool failed;
        rc = source_read(f, s);
        failed = ferror(f) != 0;
        if (rc == EMBER_OK && failed)
            snprintf(why, sizeof why, "read %s: %s", path, strerror(errno));
        if (rc == EMBER_ELIMIT)
            snprintf(why, sizeof why, "%s: larger than %u MiB", path,
                     SOURCE_MAX >> 20);
        fclose(f);
        if (rc == EMBER_OK && !failed)
            return EMBER_OK;
    }
    if (rc != EMBER_OK && rc != EMBER_ELIMIT)
        return rc;
    em_free(s->text);
    em_free(s->line);
    s->text = NULL;
    s->line = NULL;
    s->nlines = 0;
    if ((s->error = em_strdup(why)) == NULL)
        return em_err(EMBER_ENOMEM, "list: %s", path);
    return EMBER_OK;
}

/* PATH's file from the cache, read the first time. */
static int source_get(srccache *c, const char *path, const char *search,
                      srcfile **out)
{
    srcfile *v;
    int rc;

    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].path, path) == 0) {
            *out = &c->v[i];
            return EMBER_OK;
        }
    if ((v = em_grow(c->v, &c->cap, c->n + 1, sizeof *v)) == NULL)
        return em_err(EMBER_ENOMEM, "list: %zu files", c->n + 1);
    c->v = v;
    if ((rc = source_load(&c->v[c->n], path, search)) != EMBER_OK) {
        em_free(c->v[c->n].path);
        em_free(c->v[c->n].text);
        em_free(c->v[c->n].line);
        return rc;
    }
    *out = &c->v[c->n++];
    return EMBER_OK;
}

static void source_free(srccache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        em_free(c->v[i].path);
        em_free(c->v[i].text);
        em_free(c->v[i].line);
        em_free(c->v[i].error);
    }
    em_free(c->v);
}

/* Line L (1-based) of S, or NULL past its end. */
static const char *source_line(const srcfile *s, int64_t l)
{
    return l >= 1 && (uint64_t)l <= s->nlines && s->text != NULL
           ? s->text + s->line[l - 1] : NULL;
}

/* ---- the routines ------------------------------------------------------------------ */

/* One node of the listing: a graph row of a matching function. */
typedef struct lnode {
    const char *fn;                 /* the function's name ("" unnamed) */
    const char *file;               /* NULL: no file */
    int64_t line, start;            /* its line, the function's first */
    int64_t flat, cum;
} lnode;

typedef struct listing {
    em_graph g;
    em_regex *re;
    lnode *nodes;                   /* sorted by function, file, line */
    size_t n;
    int64_t total;
    const char *unit, *out_unit;
    srccache src;
} listing;

static int lnode_cmp(const void *a, const void *b)
{
    const lnode *x = a, *y = b;
    int c = strcmp(x->fn, y->fn);

    if (c == 0)
        c = strcmp(x->file != NULL ? x->file : "",
                   y->file != NULL ? y->file : "");
    if (c == 0)
        c = (x->line > y->line) - (x->line < y->line);
    return c;
}

/* The graph's nodes whose function matches, sorted. */
static int nodes_collect(listing *l)
{
    const em_rprofile *p = l->g.p;

    l->nodes = em_malloc(l->g.nrows * sizeof *l->nodes + 1);
    if (l->nodes == NULL)
        return em_err(EMBER_ENOMEM, "list: %zu lines", l->g.nrows);
    for (size_t i = 0; i < l->g.nrows; i++) {
        const em_graph_row *r = &l->g.rows[i];
        const em_rsite *s = &p->sites[r->fn];
        const char *fn = (s->flags & EM_RSITE_NAMED) ?
                         em_strtab_get(&p->srcs, s->fn) : "";
        if (!em_regex_match(l->re, fn, strlen(fn)))
            continue;
        l->nodes[l->n++] = (lnode){ fn, s->file != EM_RSITE_NONE ?
            em_strtab_get(&p->srcs, s->file) : NULL, s->line, s->start,
            r->flat, r->cum };
    }
    if (l->n > 1)
        qsort(l->nodes, l->n, sizeof *l->nodes, lnode_cmp);
    return EMBER_OK;
}

static int listing_init(listing *l, const em_rprofile *p,
                        const em_render_opts *o, const char *re)
{
    int rc;

    memset(l, 0, sizeof *l);
    if ((rc = em_graph_init(&l->g, p)) != EMBER_OK ||
        (rc = em_render_view_regex(re, &l->re)) != EMBER_OK)
        return rc;
    if (p->sites == NULL && p->names.count > 0)
        return em_err(EMBER_EINVAL, "list: the profile knows no source "
                      "lines (it was not resolved at granularity lines)");
    l->unit = p->unit;
    l->total = em_graph_total(p, o->relative);
    l->out_unit = o->unit != NULL && strcmp(o->unit, "minimum") != 0 ?
                  o->unit : "auto";
    return nodes_collect(l);
}

static void listing_free(listing *l)
{
    em_graph_free(&l->g);
    em_regex_free(l->re);
    em_free(l->nodes);
    source_free(&l->src);
}

/* The end of the routine (function, file) that starts at node A. */
static size_t routine_end(const listing *l, size_t a)
{
    size_t b = a + 1;

    while (b < l->n && strcmp(l->nodes[b].fn, l->nodes[a].fn) == 0 &&
           (l->nodes[b].file == l->nodes[a].file ||
            (l->nodes[b].file != NULL && l->nodes[a].file != NULL &&
             strcmp(l->nodes[b].file, l->nodes[a].file) == 0)))
        b++;
    return b;
}

/* True when routine [A, B) has no file but its function has one in
** another routine: pprof lists only the files then. */
static bool routine_skipped(const listing *l, size_t a, size_t b)
{
    return l->nodes[a].file == NULL && b < l->n &&
           strcmp(l->nodes[b].fn, l->nodes[a].fn) == 0;
}

/* The lines routine [A, B) shows: pprof's range around its samples. */
static void routine_range(const listing *l, size_t a, size_t b,
                          int64_t *start, int64_t *end)
{
    *start = INT64_MAX;
    *end = INT64_MIN;
    for (size_t i = a; i < b; i++) {
        const lnode *n = &l->nodes[i];
        int64_t s = n->start != 0 ? n->start : n->line - LIST_MARGIN;
        if (s < *start)
            *start = s;
        if (n->line + LIST_MARGIN > *end)
            *end = n->line + LIST_MARGIN;
    }
    if (*start < 1)
        *start = 1;
}

/* The flat and cum sums of routine [A, B), and from node *AT on those of
** line LINE (advancing *AT past them). */
static void routine_sums(const listing *l, size_t a, size_t b,
                         int64_t *flat, int64_t *cum)
{
    *flat = *cum = 0;
    for (size_t i = a; i < b; i++) {
        *flat = em_add_wrap(*flat, l->nodes[i].flat);
        *cum = em_add_wrap(*cum, l->nodes[i].cum);
    }
}

static void line_sums(const listing *l, size_t *at, size_t b, int64_t line,
                      int64_t *flat, int64_t *cum)
{
    *flat = *cum = 0;
    while (*at < b && l->nodes[*at].line < line)
        (*at)++;
    for (; *at < b && l->nodes[*at].line == line; (*at)++) {
        *flat = em_add_wrap(*flat, l->nodes[*at].flat);
        *cum = em_add_wrap(*cum, l->nodes[*at].cum);
    }
}

/* ---- text -------------------------------------------------------------------------- */

static const char *value_or_dot(const listing *l, int64_t v,
                                char buf[EM_VALUE_MAX])
{
    return v == 0 ? "." : em_format_value_as(v, l->unit, l->out_unit, buf);
}

/* Source text as it is, but control characters other than tabs. */
static void text_print(FILE *f, const char *s)
{
    for (; *s != '\0'; s++)
        fputc((unsigned char)*s < 0x20 && *s != '\t' ? ' ' : *s, f);
}

static void lines_print(FILE *f, const listing *l, const srcfile *s,
                        size_t a, size_t b)
{
    char x[EM_VALUE_MAX], y[EM_VALUE_MAX];
    int64_t start, end, flat, cum;
    size_t at = a;

    routine_range(l, a, b, &start, &end);
    for (int64_t ln = start; s->error == NULL && ln <= end; ln++) {
        const char *text = source_line(s, ln);
        if (text == NULL)
            break;                      /* the end of the file */
        line_sums(l, &at, b, ln, &flat, &cum);
        fprintf(f, "%10s %10s %6" PRId64 ":", value_or_dot(l, flat, x),
                value_or_dot(l, cum, y), ln);
        text_print(f, text);
        fputc('\n', f);
    }
    for (size_t i = a; s->error != NULL && i < b; i = at) {
        at = i;
        line_sums(l, &at, b, l->nodes[i].line, &flat, &cum);
        fprintf(f, "%10s %10s %6" PRId64 "\n", value_or_dot(l, flat, x),
                value_or_dot(l, cum, y), l->nodes[i].line);
    }
}

static int routine_print(FILE *f, listing *l, const em_render_opts *o,
                         size_t a, size_t b)
{
    char x[EM_VALUE_MAX], y[EM_VALUE_MAX], pct[16];
    const lnode *n = &l->nodes[a];
    srcfile *s;
    int64_t flat, cum;
    int rc;

    if (n->file == NULL) {
        fputs("No source information for ", f);
        em_render_name(f, n->fn);
        fputc('\n', f);
        return EMBER_OK;
    }
    if ((rc = source_get(&l->src, n->file, o->source_path, &s)) != EMBER_OK)
        return rc;
    routine_sums(l, a, b, &flat, &cum);
    fputs("ROUTINE ======================== ", f);
    em_render_name(f, n->fn);
    fputs(" in ", f);
    em_render_name(f, n->file);
    fprintf(f, "\n%10s %10s (flat, cum) %s of Total\n",
            em_format_value_as(flat, l->unit, l->out_unit, x),
            em_format_value_as(cum, l->unit, l->out_unit, y),
            em_format_percent(cum, l->total, pct));
    if (s->error != NULL) {
        fputs(" Error: ", f);
        em_render_name(f, s->error);
        fputc('\n', f);
    }
    lines_print(f, l, s, a, b);
    return EMBER_OK;
}

int em_render_list(FILE *f, const em_rprofile *p, const em_render_opts *o,
                   const char *re)
{
    char v[EM_VALUE_MAX];
    listing l;
    int rc = listing_init(&l, p, o, re);

    if (rc == EMBER_OK)
        fprintf(f, "Total: %s\n", em_format_value_as(l.total, l.unit,
                                                     l.out_unit, v));
    for (size_t a = 0, b; rc == EMBER_OK && a < l.n; a = b) {
        b = routine_end(&l, a);
        if (!routine_skipped(&l, a, b))
            rc = routine_print(f, &l, o, a, b);
    }
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "list: write failed");
    listing_free(&l);
    return rc;
}

/* ---- json -------------------------------------------------------------------------- */

static void json_put(void *ctx, const char *s, size_t n)
{
    fwrite(s, 1, n, ctx);
}

/* One line: {"line":N,"flat":F,"cum":C[,"text":"..."]}. */
static void line_json(FILE *f, bool first, int64_t ln, int64_t flat,
                      int64_t cum, const char *text)
{
    fprintf(f, "%s{\"line\":%" PRId64 ",\"flat\":%" PRId64 ",\"cum\":%"
            PRId64, first ? "" : ",", ln, flat, cum);
    if (text != NULL) {
        fputs(",\"text\":", f);
        em_json_string(text, json_put, f);
    }
    fputc('}', f);
}

static void lines_json(FILE *f, const listing *l, const srcfile *s,
                       size_t a, size_t b)
{
    int64_t start, end, flat, cum;
    size_t at = a, k = 0;

    routine_range(l, a, b, &start, &end);
    for (int64_t ln = start; s != NULL && s->error == NULL && ln <= end;
         ln++) {
        const char *text = source_line(s, ln);
        if (text == NULL)
            break;
        line_sums(l, &at, b, ln, &flat, &cum);
        line_json(f, k++ == 0, ln, flat, cum, text);
    }
    for (size_t i = a; (s == NULL || s->error != NULL) && i < b; i = at) {
        at = i;
        line_sums(l, &at, b, l->nodes[i].line, &flat, &cum);
        line_json(f, k++ == 0, l->nodes[i].line, flat, cum, NULL);
    }
}

static int routine_json(FILE *f, listing *l, const em_render_opts *o,
                        size_t a, size_t b, bool first)
{
    const lnode *n = &l->nodes[a];
    srcfile *s = NULL;
    int64_t flat, cum;
    int rc;

    if (n->file != NULL &&
        (rc = source_get(&l->src, n->file, o->source_path, &s)) != EMBER_OK)
        return rc;
    routine_sums(l, a, b, &flat, &cum);
    fputs(first ? "\n{\"name\":" : ",\n{\"name\":", f);
    em_json_string(n->fn, json_put, f);
    fputs(",\"file\":", f);
    if (n->file != NULL)
        em_json_string(n->file, json_put, f);
    else
        fputs("null", f);
    fprintf(f, ",\"flat\":%" PRId64 ",\"cum\":%" PRId64 ",\"source\":%s",
            flat, cum, s != NULL && s->error == NULL ? "true" : "false");
    if (s != NULL && s->error != NULL) {
        fputs(",\"error\":", f);
        em_json_string(s->error, json_put, f);
    }
    fputs(",\"lines\":[", f);
    if (n->file != NULL)
        lines_json(f, l, s, a, b);
    fputs("]}", f);
    return EMBER_OK;
}

int em_render_list_json(FILE *f, const em_rprofile *p,
                        const em_render_opts *o, const char *re)
{
    listing l;
    size_t shown = 0;
    int rc = listing_init(&l, p, o, re);

    if (rc == EMBER_OK)
        fputs("\"list\":[", f);
    for (size_t a = 0, b; rc == EMBER_OK && a < l.n; a = b) {
        b = routine_end(&l, a);
        if (!routine_skipped(&l, a, b))
            rc = routine_json(f, &l, o, a, b, shown++ == 0);
    }
    if (rc == EMBER_OK)
        fputs(shown > 0 ? "\n]" : "]", f);
    listing_free(&l);
    return rc;
}
