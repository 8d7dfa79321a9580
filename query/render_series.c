/*
** query/render_series.c: series results (values over time) as a table, CSV
** or sparklines, and table results (one column of strings) as a column or
** CSV. docs/output-formats.md shows each.
**
** table: when a line of one time column and one value column per series
** fits the width (o->width, else 100), a wide table: a legend naming each
** series "#1 {labels}", then one row per distinct time of any series,
** "-" where a series has no point. Otherwise one block per series: its
** labels, then "  time  value" rows, blocks separated by a blank line.
** Times are UTC RFC 3339; values are scaled for reading (em_render_value).
**
** csv: the long format, one row per point, RFC 4180 quoting (a field with
** ',', '"', CR or LF is quoted, '"' doubled), LF line ends:
**     time,<label names of all series, __type__ first, then bytewise>,value
** time is RFC 3339 as above, value the raw number (em_render_number; empty
** for NaN), a label a series lacks is empty.
**
** spark: one line per series: its labels (up to 40 columns), a sparkline
** of ▁▂▃▄▅▆▇█, then min, avg, max and last. Cells stand for times: with no
** more distinct times (over all series) than cells, one cell per distinct
** time, so that the series line up; else the time range is cut into equal
** cells and a cell shows the mean of its points. Blocks scale from the
** series' lowest to its highest cell; ' ' is a cell without points. The
** sparkline gets the width left after the labels and 60 columns of
** statistics, at least 10 cells. With o->color it is cyan.
*/
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "query/render_int.h"

#define WIDTH_DEFAULT 100u
#define TIME_COL 24             /* "2024-11-21T06:20:00.500Z" */
#define VALUE_COL 12
#define SPARK_LABELS_MAX 40u
#define SPARK_STATS 60u
#define SPARK_MIN 10u

static unsigned opt_width(const em_render_opts *o)
{
    return o->width == 0 ? WIDTH_DEFAULT : o->width;
}

static const char *result_unit(const ember_result *r)
{
    return r->unit != NULL ? r->unit : "count";
}

/* ---- distinct times ------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* *OUT gets the sorted distinct times of all series (em_free it). */
static int times_union(const ember_result *r, int64_t **out, size_t *n)
{
    size_t total = 0, k = 0;
    int64_t *t;

    for (size_t i = 0; i < r->nseries; i++)
        total += r->series[i].n;
    *n = 0;
    *out = t = em_malloc((total == 0 ? 1 : total) * sizeof *t);
    if (t == NULL)
        return em_err(EMBER_ENOMEM, "series: %zu points", total);
    for (size_t i = 0; i < r->nseries; i++) {
        memcpy(t + k, r->series[i].times, r->series[i].n * sizeof *t);
        k += r->series[i].n;
    }
    qsort(t, total, sizeof *t, cmp_i64);
    for (size_t i = 0; i < total; i++)
        if (*n == 0 || t[*n - 1] != t[i])
            t[(*n)++] = t[i];
    return EMBER_OK;
}

/* Index of T in the sorted distinct TIMES (present by construction). */
static size_t time_index(const int64_t *times, size_t n, int64_t t)
{
    const int64_t *hit = bsearch(&t, times, n, sizeof *times, cmp_i64);
    return hit != NULL ? (size_t)(hit - times) : 0;
}

/* ---- table ------------------------------------------------------------------------------ */

static void series_legend(FILE *f, const ember_result *r)
{
    for (size_t i = 0; i < r->nseries; i++) {
        fprintf(f, "#%zu ", i + 1);
        em_render_labels(f, r->series[i].labels, r->series[i].nlabels);
        fputc('\n', f);
    }
}

static int table_wide(FILE *f, const ember_result *r)
{
    size_t *next = em_calloc(r->nseries, sizeof *next), nt = 0;
    int64_t *times = NULL;
    char tb[40], vb[64], head[24];
    int rc = next == NULL ? em_err(EMBER_ENOMEM, "series: table") :
             times_union(r, &times, &nt);

    if (rc != EMBER_OK)
        goto out;
    series_legend(f, r);
    fprintf(f, "%-*s", TIME_COL, "time");
    for (size_t i = 0; i < r->nseries; i++) {
        snprintf(head, sizeof head, "#%zu", i + 1);
        fprintf(f, " %*s", VALUE_COL, head);
    }
    fputc('\n', f);
    for (size_t k = 0; k < nt; k++) {
        fprintf(f, "%-*s", TIME_COL, em_render_time(times[k], tb));
        for (size_t i = 0; i < r->nseries; i++) {
            const em_series *s = &r->series[i];
            const char *v = "-";
            if (next[i] < s->n && s->times[next[i]] == times[k])
                v = em_render_value(s->values[next[i]++], result_unit(r), vb);
            fprintf(f, " %*s", VALUE_COL, v);
        }
        fputc('\n', f);
    }
out:
    em_free(next);
    em_free(times);
    return rc;
}

static void table_blocks(FILE *f, const ember_result *r)
{
    char tb[40], vb[64];

    for (size_t i = 0; i < r->nseries; i++) {
        const em_series *s = &r->series[i];
        if (i > 0)
            fputc('\n', f);
        em_render_labels(f, s->labels, s->nlabels);
        fputc('\n', f);
        for (size_t k = 0; k < s->n; k++)
            fprintf(f, "  %-*s %*s\n", TIME_COL, em_render_time(s->times[k],
                    tb), VALUE_COL, em_render_value(s->values[k],
                                                    result_unit(r), vb));
    }
}

int em_render_series_table(FILE *f, const ember_result *r,
                           const em_render_opts *o)
{
    int rc = EMBER_OK;

    if (r->nseries == 0)
        fputs("(no series)\n", f);
    else if (TIME_COL + r->nseries * (VALUE_COL + 1) <= opt_width(o))
        rc = table_wide(f, r);
    else
        table_blocks(f, r);
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "table: write failed");
    return rc;
}

/* ---- csv --------------------------------------------------------------------------------- */

static void csv_field(FILE *f, const char *s)
{
    if (s == NULL || strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s != NULL ? s : "", f);
        return;
    }
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int cmp_label_name(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    bool tx = strcmp(x, "__type__") == 0, ty = strcmp(y, "__type__") == 0;
    return tx != ty ? (tx ? -1 : 1) : strcmp(x, y);
}

/* *OUT gets the distinct label names of all series (em_free the array;
** the names belong to R). */
static int label_columns(const ember_result *r, const char ***out, size_t *n)
{
    size_t total = 0, k = 0;
    const char **names;

    for (size_t i = 0; i < r->nseries; i++)
        total += r->series[i].nlabels;
    *n = 0;
    *out = names = em_malloc((total == 0 ? 1 : total) * sizeof *names);
    if (names == NULL)
        return em_err(EMBER_ENOMEM, "csv: %zu labels", total);
    for (size_t i = 0; i < r->nseries; i++)
        for (size_t j = 0; j < r->series[i].nlabels; j++)
            names[k++] = r->series[i].labels[j].name;
    qsort(names, total, sizeof *names, cmp_label_name);
    for (size_t i = 0; i < total; i++)
        if (*n == 0 || strcmp(names[*n - 1], names[i]) != 0)
            names[(*n)++] = names[i];
    return EMBER_OK;
}

static const char *label_get(const em_series *s, const char *name)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return s->labels[i].value;
    return "";
}

/* The label fields of series S, each with its ',' before. */
static void csv_labels(FILE *f, const em_series *s, const char **cols,
                       size_t ncols)
{
    for (size_t c = 0; c < ncols; c++) {
        fputc(',', f);
        csv_field(f, label_get(s, cols[c]));
    }
}

int em_render_series_csv(FILE *f, const ember_result *r,
                         const em_render_opts *o)
{
    const char **cols = NULL;
    size_t ncols = 0;
    char tb[40], nb[40];
    int rc = label_columns(r, &cols, &ncols);

    EM_UNUSED(o);
    if (rc != EMBER_OK)
        goto out;
    fputs("time", f);
    for (size_t c = 0; c < ncols; c++) {
        fputc(',', f);
        csv_field(f, cols[c]);
    }
    fputs(",value\n", f);
    for (size_t i = 0; i < r->nseries; i++) {
        const em_series *s = &r->series[i];
        for (size_t k = 0; k < s->n; k++) {
            fputs(em_render_time(s->times[k], tb), f);
            csv_labels(f, s, cols, ncols);
            fprintf(f, ",%s\n", em_render_number(s->values[k], nb));
        }
    }
    if (ferror(f))
        rc = em_err(EMBER_EIO, "csv: write failed");
out:
    em_free(cols);
    return rc;
}

/* ---- spark -------------------------------------------------------------------------------- */

typedef struct spark {
    int64_t *times;             /* distinct times of all series */
    size_t ntimes;
    size_t cells;
    double *sum;                /* per cell */
    size_t *count;
    em_buf line;
} spark;

static size_t spark_cell(const spark *sp, int64_t t)
{
    int64_t lo = sp->times[0], hi = sp->times[sp->ntimes - 1];

    if (sp->ntimes <= sp->cells)
        return time_index(sp->times, sp->ntimes, t);
    return (size_t)((long double)((uint64_t)t - (uint64_t)lo) * sp->cells /
                    ((long double)((uint64_t)hi - (uint64_t)lo) + 1));
}

static const char *const blocks[8] = { "\xe2\x96\x81", "\xe2\x96\x82",
    "\xe2\x96\x83", "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
    "\xe2\x96\x87", "\xe2\x96\x88" };

/* Fills the cells of S and draws them into sp->line. */
static int spark_draw(spark *sp, const em_series *s)
{
    double lo = INFINITY, hi = -INFINITY;
    size_t used = sp->ntimes <= sp->cells ? sp->ntimes : sp->cells;
    int rc;

    memset(sp->sum, 0, sp->cells * sizeof *sp->sum);
    memset(sp->count, 0, sp->cells * sizeof *sp->count);
    for (size_t k = 0; k < s->n; k++) {
        size_t c = spark_cell(sp, s->times[k]);
        if (isnan(s->values[k]))
            continue;
        sp->sum[c] += s->values[k];
        sp->count[c]++;
    }
    for (size_t c = 0; c < used; c++) {
        if (sp->count[c] == 0)
            continue;
        sp->sum[c] /= (double)sp->count[c];
        lo = sp->sum[c] < lo ? sp->sum[c] : lo;
        hi = sp->sum[c] > hi ? sp->sum[c] : hi;
    }
    sp->line.len = 0;
    if ((rc = em_buf_reserve(&sp->line, 3 * used + 1)) != EMBER_OK)
        return rc;
    for (size_t c = 0; c < used; c++) {
        size_t level = hi > lo ? (size_t)((sp->sum[c] - lo) / (hi - lo) *
                                          7.0 + 0.5) : hi != 0 ? 3 : 0;
        if (sp->count[c] == 0) {
            sp->line.p[sp->line.len++] = ' ';
            continue;
        }
        memcpy(sp->line.p + sp->line.len, blocks[level > 7 ? 7 : level], 3);
        sp->line.len += 3;
    }
    return EMBER_OK;
}

/* min, avg, max and last of S's points, NaN skipped. */
static void spark_stats(FILE *f, const em_series *s, const char *unit)
{
    double lo = INFINITY, hi = -INFINITY, sum = 0, last = NAN;
    size_t n = 0;
    char a[64], b[64], c[64], d[64];

    for (size_t k = 0; k < s->n; k++) {
        double v = s->values[k];
        if (isnan(v))
            continue;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        last = v;
        n++;
    }
    if (n == 0) {
        fputs("  (no points)", f);
        return;
    }
    fprintf(f, "  min %s  avg %s  max %s  last %s", em_render_value(lo, unit,
            a), em_render_value(sum / (double)n, unit, b),
            em_render_value(hi, unit, c), em_render_value(last, unit, d));
}

/* Display columns of S's label set as em_render_labels writes it. */
static int labels_cols(const em_series *s, em_buf *text, size_t *cols)
{
    int rc;

    text->len = 0;
    if ((rc = em_render_labels_buf(text, s->labels, s->nlabels)) ==
        EMBER_OK && (rc = em_buf_put(text, "", 1)) == EMBER_OK)
        *cols = em_render_cols((const char *)text->p);
    return rc;
}

/* The labels of S in exactly COLS columns; TEXT and FIT are scratch. */
static int spark_labels(FILE *f, const em_series *s, size_t cols,
                        em_buf *text, em_buf *fit)
{
    int rc;

    text->len = 0;
    fit->len = 0;
    if ((rc = em_render_labels_buf(text, s->labels, s->nlabels)) ==
        EMBER_OK && (rc = em_buf_put(text, "", 1)) == EMBER_OK &&
        (rc = em_render_fit(fit, (const char *)text->p, cols)) == EMBER_OK)
        fwrite(fit->p, 1, fit->len, f);
    return rc;
}

static int spark_alloc(spark *sp, const ember_result *r, size_t label_cols,
                       unsigned width)
{
    size_t room = width > label_cols + SPARK_STATS ?
                  width - label_cols - SPARK_STATS : 0;
    int rc = times_union(r, &sp->times, &sp->ntimes);

    sp->cells = room < SPARK_MIN ? SPARK_MIN : room;
    sp->sum = em_calloc(sp->cells, sizeof *sp->sum);
    sp->count = em_calloc(sp->cells, sizeof *sp->count);
    if (rc == EMBER_OK && (sp->sum == NULL || sp->count == NULL))
        rc = em_err(EMBER_ENOMEM, "spark: %zu cells", sp->cells);
    return rc;
}

int em_render_series_spark(FILE *f, const ember_result *r,
                           const em_render_opts *o)
{
    spark sp = { 0 };
    em_buf text = { 0 }, fit = { 0 };
    size_t lc = 0;

    int rc = EMBER_OK;

    for (size_t i = 0; rc == EMBER_OK && i < r->nseries; i++) {
        size_t cols = 0;
        rc = labels_cols(&r->series[i], &text, &cols);
        lc = cols > lc ? cols : lc;
    }
    lc = lc > SPARK_LABELS_MAX ? SPARK_LABELS_MAX : lc;
    if (rc == EMBER_OK)
        rc = spark_alloc(&sp, r, lc, opt_width(o));
    if (rc == EMBER_OK && r->nseries == 0)
        fputs("(no series)\n", f);
    for (size_t i = 0; rc == EMBER_OK && i < r->nseries; i++) {
        const em_series *s = &r->series[i];
        if ((rc = spark_labels(f, s, lc, &text, &fit)) != EMBER_OK ||
            (rc = (s->n > 0 ? spark_draw(&sp, s) : EMBER_OK)) != EMBER_OK)
            break;
        fprintf(f, "  %s", o->color ? EM_SGR_CYAN : "");
        if (s->n > 0)
            fwrite(sp.line.p, 1, sp.line.len, f);
        fputs(o->color ? EM_SGR_RESET : "", f);
        spark_stats(f, s, result_unit(r));
        fputc('\n', f);
    }
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "spark: write failed");
    em_free(sp.times);
    em_free(sp.sum);
    em_free(sp.count);
    em_buf_free(&sp.line);
    em_buf_free(&text);
    em_buf_free(&fit);
    return rc;
}

/* ---- tables ------------------------------------------------------------------------------- */

int em_render_rows_table(FILE *f, const ember_result *r,
                         const em_render_opts *o)
{
    const char *col = r->column != NULL ? r->column : "value";
    size_t w = em_render_cols(col);

    EM_UNUSED(o);
    for (size_t i = 0; i < r->nrows; i++)
        if (em_render_cols(r->rows[i]) > w)
            w = em_render_cols(r->rows[i]);
    fprintf(f, "%s\n", col);
    for (size_t i = 0; i < w; i++)
        fputc('-', f);
    fputc('\n', f);
    for (size_t i = 0; i < r->nrows; i++)
        fprintf(f, "%s\n", r->rows[i]);
    fprintf(f, "(%zu row%s)\n", r->nrows, r->nrows == 1 ? "" : "s");
    return ferror(f) ? em_err(EMBER_EIO, "table: write failed") : EMBER_OK;
}

int em_render_rows_csv(FILE *f, const ember_result *r,
                       const em_render_opts *o)
{
    EM_UNUSED(o);
    csv_field(f, r->column != NULL ? r->column : "value");
    fputc('\n', f);
    for (size_t i = 0; i < r->nrows; i++) {
        csv_field(f, r->rows[i]);
        fputc('\n', f);
    }
    return ferror(f) ? em_err(EMBER_EIO, "csv: write failed") : EMBER_OK;
}
