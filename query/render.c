/*
** query/render.c: em_render_result, the one entry point `ember query -o` and
** the REPL share. A table of formats says which result kinds each renders
** and how; profile formats that draw one profile at a time run once per
** group, each group after a header line naming its labels:
**
**     # {pod="api-1", zone="eu"}
**
** written when the result has several groups or its one group has labels
** (a plain merge has none, so its output is exactly the single-profile
** renderer's). Groups are separated by a blank line, except in collapsed
** output, where the '#' line is the comment `ember import` skips. pprof and
** svg hold one profile: a result with several groups is refused with the
** count.
**
** max_lines cuts text output (every format but pprof) after that many
** lines, then writes
**
**     ... 1234 more rows (use .limit or -o FORMAT > file)
**
** counting the lines left out. The cut is a FILE (fopencookie) in front of
** the caller's, so renderers stream and never know about it.
**
** The file also holds the text helpers the renderers share (render_int.h).
*/
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "query/render_int.h"

/* Result kinds as bits, for the table. */
#define K_PROFILE (1u << EMBER_RESULT_PROFILE)
#define K_DIFF (1u << EMBER_RESULT_DIFF)
#define K_SERIES (1u << EMBER_RESULT_SERIES)
#define K_TABLE (1u << EMBER_RESULT_TABLE)
#define K_PROFILES (K_PROFILE | K_DIFF)

typedef int (*render_fn)(FILE *f, const ember_result *r,
                         const em_render_opts *o);

typedef struct render_format {
    const char *name;
    unsigned kinds;             /* K_* it renders */
    bool binary;                /* bytes, never cut or shown on a terminal */
    render_fn profile_fn;       /* PROFILE and DIFF */
    render_fn series_fn;        /* SERIES */
    render_fn table_fn;         /* TABLE */
} render_format;

/* ---- one profile at a time ------------------------------------------------- */

/* Draws one profile; R gives result-wide settings (top_limit). */
typedef int (*group_fn)(FILE *f, const em_rprofile *p, const ember_result *r,
                        const em_render_opts *o);

static size_t row_limit(const ember_result *r, const em_render_opts *o)
{
    return o->limit != 0 ? o->limit : r->top_limit;
}

/* A row limit is pprof's -nodecount, which comes with pprof's default
** trimming (-nodefraction=0.005, -edgefraction=0.001): top(P, N) prints
** what `go tool pprof -top -nodecount=N` prints. Without one every
** function is listed (-nodefraction=0). */
static int group_top(FILE *f, const em_rprofile *p, const ember_result *r,
                     const em_render_opts *o)
{
    size_t limit = row_limit(r, o);
    em_top_opts t = { .sz = sizeof t, .cum_sort = o->cum_sort,
                      .limit = limit, .unit = o->unit, .color = o->color,
                      .node_fraction = limit > 0 ? 0.005 : 0,
                      .edge_fraction = limit > 0 ? 0.001 : 0,
                      .relative = o->relative };

    if (r->view == EM_VIEW_PEEK)        /* peek(P, "re") is shown so */
        return em_render_peek(f, p, o, r->view_re);
    if (r->view == EM_VIEW_LIST)
        return em_render_list(f, p, o, r->view_re);
    return em_render_top(f, p, &t);
}

static int group_tree(FILE *f, const em_rprofile *p, const ember_result *r,
                      const em_render_opts *o)
{
    return em_render_tree(f, p, o, row_limit(r, o));
}

static int group_flame(FILE *f, const em_rprofile *p, const ember_result *r,
                       const em_render_opts *o)
{
    EM_UNUSED(r);
    return em_render_flame(f, p, o);
}

static int group_collapsed(FILE *f, const em_rprofile *p,
                           const ember_result *r, const em_render_opts *o)
{
    EM_UNUSED(r);
    EM_UNUSED(o);
    return em_render_collapsed(f, p);
}

static int group_svg(FILE *f, const em_rprofile *p, const ember_result *r,
                     const em_render_opts *o)
{
    EM_UNUSED(r);
    return em_render_svg(f, p, o);
}

static bool group_header_needed(const ember_result *r)
{
    return r->ngroups > 1 || (r->ngroups == 1 && r->groups[0].nlabels > 0);
}

/* An empty result still draws: an empty profile of the result's type. */
static int each_group_empty(FILE *f, const ember_result *r,
                            const em_render_opts *o, group_fn fn)
{
    em_rprofile p;
    int rc = em_rprofile_init(&p, r->type);

    p.diff = r->kind == EMBER_RESULT_DIFF;
    if (rc == EMBER_OK)
        rc = fn(f, &p, r, o);
    em_rprofile_free(&p);
    return rc;
}

static int each_group(FILE *f, const ember_result *r, const em_render_opts *o,
                      group_fn fn, bool blank_between)
{
    bool header = group_header_needed(r);
    int rc = EMBER_OK;

    if (r->ngroups == 0)
        return each_group_empty(f, r, o, fn);
    for (size_t g = 0; rc == EMBER_OK && g < r->ngroups; g++) {
        if (g > 0 && blank_between)
            fputc('\n', f);
        if (header) {
            fputs("# ", f);
            em_render_labels(f, r->groups[g].labels, r->groups[g].nlabels);
            fputc('\n', f);
        }
        rc = fn(f, &r->groups[g].prof, r, o);
    }
    return rc;
}

static int profile_top(FILE *f, const ember_result *r,
                       const em_render_opts *o)
{
    return each_group(f, r, o, group_top, true);
}

static int profile_tree(FILE *f, const ember_result *r,
                        const em_render_opts *o)
{
    return each_group(f, r, o, group_tree, true);
}

static int profile_flame(FILE *f, const ember_result *r,
                         const em_render_opts *o)
{
    return each_group(f, r, o, group_flame, true);
}

static int profile_collapsed(FILE *f, const ember_result *r,
                             const em_render_opts *o)
{
    return each_group(f, r, o, group_collapsed, false);
}

/* pprof and svg hold one profile. */
static int one_group(const ember_result *r, const char *format)
{
    if (r->ngroups <= 1)
        return EMBER_OK;
    return em_err(EMBER_EINVAL, "-o %s holds one profile but the result has "
                  "%zu groups: drop the `by` grouping, or select one group "
                  "with a matcher", format, r->ngroups);
}

static int profile_svg(FILE *f, const ember_result *r,
                       const em_render_opts *o)
{
    int rc = one_group(r, "svg");

    if (rc != EMBER_OK || r->ngroups == 0)
        return rc != EMBER_OK ? rc : each_group_empty(f, r, o, group_svg);
    /* no "# {labels}" line: the file must start with the XML declaration */
    return group_svg(f, &r->groups[0].prof, r, o);
}

static int pprof_write(FILE *f, const void *buf, size_t len)
{
    if (fwrite(buf, 1, len, f) != len)
        return em_err(EMBER_EIO, "-o pprof: write failed: %s",
                      strerror(errno));
    return EMBER_OK;
}

/* The pprof a query run for it encoded in its snapshot; else an encode
** through the snapshot the merge holds (compaction renumbers stacks, so
** only the query's snapshot reads its ids right), or, for a result built
** by hand, through o->db. */
static int profile_pprof(FILE *f, const ember_result *r,
                         const em_render_opts *o)
{
    const em_pgroup *g = r->ngroups == 1 ? &r->groups[0] : NULL;
    ember_db *db = r->db != NULL ? r->db : o->db;
    void *buf = NULL;
    size_t len = 0;
    int rc = one_group(r, "pprof");

    if (rc == EMBER_OK && g == NULL)
        rc = em_err(EMBER_ENOTFOUND, "-o pprof: the result holds no "
                    "profile: nothing to write");
    if (rc == EMBER_OK && g->pprof != NULL)
        return pprof_write(f, g->pprof, g->pprof_len);
    if (rc == EMBER_OK && (g->merged == NULL || db == NULL ||
                           r->type == NULL))
        rc = em_err(EMBER_EINVAL, "-o pprof: this result kept no stack ids "
                    "(or no database or type was given) to encode");
    if (rc == EMBER_OK)
        rc = ember_pprof_encode(db, g->merged, r->type, EMBER_PPROF_GZIP,
                                &buf, &len);
    if (rc == EMBER_OK)
        rc = pprof_write(f, buf, len);
    ember_free(buf);
    return rc;
}

/* ---- the format table ---------------------------------------------------------- */

static const render_format formats[] = {
    { "top", K_PROFILES, false, profile_top, NULL, NULL },
    { "tree", K_PROFILES, false, profile_tree, NULL, NULL },
    { "flame", K_PROFILES, false, profile_flame, NULL, NULL },
    { "collapsed", K_PROFILES, false, profile_collapsed, NULL, NULL },
    { "pprof", K_PROFILES, true, profile_pprof, NULL, NULL },
    { "json", K_PROFILES | K_SERIES | K_TABLE, false, em_render_json,
      em_render_json, em_render_json },
    { "svg", K_PROFILES, false, profile_svg, NULL, NULL },
    { "table", K_SERIES | K_TABLE, false, NULL, em_render_series_table,
      em_render_rows_table },
    { "csv", K_SERIES | K_TABLE, false, NULL, em_render_series_csv,
      em_render_rows_csv },
    { "spark", K_SERIES, false, NULL, em_render_series_spark, NULL },
};

static const render_format *format_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < EM_ARRAY_LEN(formats); i++)
        if (strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

static unsigned kind_bit(int kind)
{
    return kind >= EMBER_RESULT_PROFILE && kind <= EMBER_RESULT_TABLE ?
           1u << kind : 0;
}

static const char *kind_name(int kind)
{
    static const char *const names[] = { "?", "profile", "diff", "series",
                                         "table" };
    return kind_bit(kind) != 0 ? names[kind] : "unknown";
}

/* "top, tree, flame or json": the formats whose kinds meet KINDS. */
static void format_list(unsigned kinds, char *buf, size_t cap)
{
    size_t n = 0, k = 0, len = 0;

    for (size_t i = 0; i < EM_ARRAY_LEN(formats); i++)
        n += (formats[i].kinds & kinds) != 0;
    buf[0] = '\0';
    for (size_t i = 0; i < EM_ARRAY_LEN(formats) && len < cap; i++) {
        if ((formats[i].kinds & kinds) == 0)
            continue;
        k++;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                k == 1 ? "" : k == n ? " or " : ", ",
                                formats[i].name);
    }
}

const char *em_render_default(int kind)
{
    return kind == EMBER_RESULT_PROFILE || kind == EMBER_RESULT_DIFF ?
           "top" : "table";
}

bool em_render_fits(int kind, const char *format)
{
    const render_format *fmt = format_find(format);
    return fmt != NULL && (fmt->kinds & kind_bit(kind)) != 0;
}

bool em_render_binary(const char *format)
{
    const render_format *fmt = format_find(format);
    return fmt != NULL && fmt->binary;
}

/* ---- cutting long output ------------------------------------------------------- */

typedef struct cut {
    FILE *out;                  /* the caller's FILE */
    size_t max;                 /* lines let through */
    size_t lines;               /* newlines let through so far */
    size_t more;                /* lines left out (started) */
    bool bol;                   /* the next byte left out starts a line */
} cut;

static ssize_t cut_write(void *cookie, const char *buf, size_t n)
{
    cut *c = cookie;
    size_t pass = 0;

    while (pass < n && c->lines < c->max) {
        const char *nl = memchr(buf + pass, '\n', n - pass);
        if (nl == NULL) {
            pass = n;
            break;
        }
        pass = (size_t)(nl - buf) + 1;
        c->lines++;
    }
    if (pass > 0 && fwrite(buf, 1, pass, c->out) != pass)
        return -1;
    for (size_t i = pass; i < n; i++) {
        c->more += c->bol;
        c->bol = buf[i] == '\n';
    }
    return (ssize_t)n;
}

/* Renders through a FILE that stops after o->max_lines lines. */
static int render_cut(FILE *f, const ember_result *r, const em_render_opts *o,
                      render_fn fn)
{
    cookie_io_functions_t io = { .write = cut_write };
    cut c = { .out = f, .max = o->max_lines, .bol = true };
    FILE *w = fopencookie(&c, "w", io);
    int rc;

    if (w == NULL)
        return em_err(EMBER_ENOMEM, "render: output stream");
    rc = fn(w, r, o);
    if (fclose(w) != 0 && rc == EMBER_OK)
        rc = em_err(EMBER_EIO, "render: write failed: %s", strerror(errno));
    if (rc == EMBER_OK && c.more > 0)
        fprintf(f, "... %zu more rows (use .limit or -o FORMAT > file)\n",
                c.more);
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "render: write failed");
    return rc;
}

int em_render_result(FILE *f, const ember_result *r, const char *format,
                     const em_render_opts *opts)
{
    em_render_opts o = { .sz = sizeof o };
    const render_format *fmt = format_find(format);
    render_fn fn = NULL;
    char list[160];
    int rc;

    if (opts != NULL)
        memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
    if (r == NULL || kind_bit(r->kind) == 0)
        return em_err(EMBER_EINVAL, "render: no result of a known kind");
    format_list(kind_bit(r->kind), list, sizeof list);
    if (fmt == NULL)
        return em_err(EMBER_EINVAL, "unknown output format \"%s\": for a "
                      "%s result, expected %s", format != NULL ? format : "",
                      kind_name(r->kind), list);
    if ((fmt->kinds & kind_bit(r->kind)) == 0)
        return em_err(EMBER_EINVAL, "-o %s does not render a %s result: "
                      "expected %s", format, kind_name(r->kind), list);
    if (r->ids_only && fmt->profile_fn != profile_pprof)
        return em_err(EMBER_EINVAL, "-o %s: this result was run for pprof "
                      "output and holds no function names", format);
    fn = r->kind == EMBER_RESULT_SERIES ? fmt->series_fn :
         r->kind == EMBER_RESULT_TABLE ? fmt->table_fn : fmt->profile_fn;
    if (o.max_lines > 0 && !fmt->binary)
        return render_cut(f, r, &o, fn);
    rc = fn(f, r, &o);
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "render: write failed");
    return rc;
}

/* ---- shared text helpers ---------------------------------------------------------- */

/* Appends label value V with '"' and '\' escaped, newlines as \n. */
static int label_value_put(em_buf *b, const char *v)
{
    int rc = EMBER_OK;

    for (; rc == EMBER_OK && v != NULL && *v != '\0'; v++) {
        if (*v == '\n')
            rc = em_buf_put(b, "\\n", 2);
        else if (*v == '"' || *v == '\\')
            rc = em_buf_put(b, (char[2]){ '\\', *v }, 2);
        else
            rc = em_buf_put(b, v, 1);
    }
    return rc;
}

int em_render_labels_buf(em_buf *b, const ember_label *labels, size_t n)
{
    int rc = em_buf_put(b, "{", 1);

    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        if (i > 0)
            rc = em_buf_put(b, ", ", 2);
        if (rc == EMBER_OK)
            rc = em_buf_put(b, labels[i].name, strlen(labels[i].name));
        if (rc == EMBER_OK)
            rc = em_buf_put(b, "=\"", 2);
        if (rc == EMBER_OK)
            rc = label_value_put(b, labels[i].value);
        if (rc == EMBER_OK)
            rc = em_buf_put(b, "\"", 1);
    }
    return rc == EMBER_OK ? em_buf_put(b, "}", 1) : rc;
}

void em_render_labels(FILE *f, const ember_label *labels, size_t n)
{
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s%s=\"", i > 0 ? ", " : "", labels[i].name);
        for (const char *s = labels[i].value; s != NULL && *s != '\0'; s++) {
            if (*s == '"' || *s == '\\')
                fputc('\\', f);
            if (*s == '\n')
                fputs("\\n", f);
            else
                fputc(*s, f);
        }
        fputc('"', f);
    }
    fputc('}', f);
}

/* Howard Hinnant's civil_from_days: days since 1970-01-01 to y-m-d. */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    int64_t era, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    yoe = z - era * 146097;
    yoe = (yoe - yoe / 1460 + yoe / 36524 - yoe / 146096) / 365;
    doy = z - era * 146097 - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    *m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

const char *em_render_time(int64_t ms, char buf[40])
{
    int64_t sec = ms / 1000, frac = ms % 1000, days, rem, y;
    unsigned mo, d;

    if (frac < 0) {             /* floor, so that times before 1970 work */
        frac += 1000;
        sec--;
    }
    days = sec / 86400;
    rem = sec % 86400;
    if (rem < 0) {
        rem += 86400;
        days--;
    }
    civil_from_days(days, &y, &mo, &d);
    if (frac != 0)
        snprintf(buf, 40, "%04" PRId64 "-%02u-%02uT%02d:%02d:%02d.%03dZ", y,
                 mo, d, (int)(rem / 3600), (int)(rem / 60 % 60),
                 (int)(rem % 60), (int)frac);
    else
        snprintf(buf, 40, "%04" PRId64 "-%02u-%02uT%02d:%02d:%02dZ", y, mo,
                 d, (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60));
    return buf;
}

const char *em_render_number(double v, char buf[40])
{
    if (!isfinite(v)) {
        buf[0] = '\0';
        return buf;
    }
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, 40, "%.0f", v == 0 ? 0.0 : v);   /* no "-0" */
        return buf;
    }
    for (int digits = 15; digits <= 17; digits++) {     /* the shortest */
        snprintf(buf, 40, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

const char *em_render_value(double v, const char *unit, char buf[64])
{
    char base[32], tmp[EM_VALUE_MAX];
    size_t n = strlen(unit);
    bool per_s = n > 2 && strcmp(unit + n - 2, "/s") == 0;

    snprintf(base, sizeof base, "%.*s", (int)(per_s ? n - 2 : n), unit);
    if (isnan(v))
        return strcpy(buf, "NaN");
    /* a unit pprof does not scale prints bare: keep the fraction then */
    if (strcmp(em_format_value(1, base, tmp), "1") == 0 || fabs(v) >= 9e18) {
        if (v == floor(v) && fabs(v) < 1e15)
            snprintf(tmp, sizeof tmp, "%.0f", v == 0 ? 0.0 : v);
        else
            snprintf(tmp, sizeof tmp, fabs(v) >= 1000 ? "%.0f" : "%.4g", v);
    } else if (fabs(v) < 100 && v != floor(v)) {
        /* a fraction of the smallest unit: "0.525ns", not "1ns" */
        em_format_value(1, base, tmp);
        snprintf(buf, 64, "%.4g%s%s", v, tmp + 1, per_s ? "/s" : "");
        return buf;
    } else {
        em_format_value((int64_t)llround(v), base, tmp);
    }
    snprintf(buf, 64, "%s%s", tmp, per_s ? "/s" : "");
    return buf;
}

void em_render_name(FILE *f, const char *name)
{
    const char *run = name;

    for (; *name != '\0'; name++) {
        if ((unsigned char)*name >= 0x20 && *name != 0x7f)
            continue;
        fwrite(run, 1, (size_t)(name - run), f);
        fputc(' ', f);
        run = name + 1;
    }
    fwrite(run, 1, (size_t)(name - run), f);
}

size_t em_render_cols(const char *name)
{
    return em_utf8_count(name, strlen(name));
}

/* Appends up to COLS characters of NAME; returns how many it wrote. */
static size_t fit_chars(em_buf *b, const unsigned char *s, size_t cols)
{
    const unsigned char *end = s + strlen((const char *)s);
    size_t done = 0;
    uint32_t cp;

    for (; s < end && done < cols; done++) {
        size_t n = em_utf8_decode(s, (size_t)(end - s), &cp);
        if (n == 1 && (s[0] < 0x20 || s[0] >= 0x7f))
            b->p[b->len++] = s[0] >= 0x80 ? '?' : ' ';
        else
            for (size_t i = 0; i < n; i++)
                b->p[b->len++] = s[i];
        s += n;
    }
    return done;
}

int em_render_fit(em_buf *b, const char *name, size_t cols)
{
    size_t have = em_render_cols(name), keep = have <= cols ? have :
                  cols >= 3 ? cols - 2 : cols, done;
    int rc = em_buf_reserve(b, 4 * cols + 2);

    if (rc != EMBER_OK)
        return rc;
    done = fit_chars(b, (const unsigned char *)name, keep);
    if (have > cols && cols >= 3) {
        memcpy(b->p + b->len, "..", 2);
        b->len += 2;
        done += 2;
    }
    for (; done < cols; done++)
        b->p[b->len++] = ' ';
    return EMBER_OK;
}

const char *em_render_change_pct(int64_t change, int64_t base, char buf[24])
{
    double ratio;
    char sign = change > 0 ? '+' : '-';

    if (change == 0)
        return strcpy(buf, "0%");
    if (base == 0)
        return strcpy(buf, "new");
    /* em_format_percent's precision, on magnitudes that may be 2^63 */
    ratio = (double)em_abs64(change) / (double)em_abs64(base) * 100;
    if (ratio >= 99.95 && ratio <= 100.05)
        snprintf(buf, 24, "%c100%%", sign);
    else if (ratio >= 1.0)
        snprintf(buf, 24, "%c%.2f%%", sign, ratio);
    else
        snprintf(buf, 24, "%c%.2g%%", sign, ratio);
    return buf;
}

int em_render_view_regex(const char *text, em_regex **re)
{
    size_t len = text != NULL ? strlen(text) : 0;
    char *pattern = em_malloc(len + 9);
    int rc;

    *re = NULL;
    if (pattern == NULL)
        return em_err(EMBER_ENOMEM, "view: regex of %zu bytes", len);
    snprintf(pattern, len + 9, ".*(?:%s).*", text != NULL ? text : "");
    rc = em_regex_compile(pattern, re);
    em_free(pattern);
    return rc;
}

const char *em_render_view_name(int view)
{
    return view == EM_VIEW_PEEK ? "peek" : view == EM_VIEW_LIST ? "list"
                                                                : "";
}

int em_render_view_json(FILE *f, const ember_result *r, const em_pgroup *g,
                        const em_render_opts *o)
{
    switch (r->view) {
    case EM_VIEW_PEEK:
        return em_render_peek_json(f, &g->prof, o, r->view_re);
    case EM_VIEW_LIST:
        return em_render_list_json(f, &g->prof, o, r->view_re);
    default:
        return em_err(EMBER_EINVAL, "json: unknown view %d", r->view);
    }
}

const char *em_render_signed(int64_t v, const char *unit,
                             const char *out_unit, char buf[EM_VALUE_MAX])
{
    char tmp[EM_VALUE_MAX];
    size_t n;

    em_format_value_as(v, unit, out_unit, tmp);
    n = strlen(tmp);
    n = n > EM_VALUE_MAX - 2 ? EM_VALUE_MAX - 2 : n;  /* never: values are
                                                       ** short */
    buf[0] = '+';
    memcpy(buf + 1, tmp, n);
    buf[n + 1] = '\0';
    return v > 0 ? buf : buf + 1;
}
