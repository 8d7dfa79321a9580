/*
** query/render_top.c: the `top` renderer, `go tool pprof -top` at its
** default granularity (functions), reproduced from pprof's report and graph
** packages so that numbers and order match what users know:
**
** - Nodes, flat, cum and call edges are pprof's graph (render_graph.c):
**   a node per function name, cum once per sample however often it
**   recurses, flat at the innermost inline frame of the leaf location.
** - total, the base of every percentage, is the sum of |value| over all
**   samples; sum% runs over |flat| down the rows. After focus or ignore it
**   is the total before them (p->whole), as pprof computes its report's
**   total before those filters, unless the caller asks for relative
**   percentages (pprof's -relative_percentages). The node and edge
**   cutoffs stay shares of the graph's summed flat while the "Dropped"
**   line names node_fraction of that total: pprof's quirk, kept.
** - Rows sort by |flat| descending, then name (bytewise); with cum_sort,
**   by |cum|, then name (pprof's FlatNameOrder and CumNameOrder).
** - Trimming: node_fraction drops nodes whose |cum| is below that share of
**   the summed flat (pprof's -nodefraction); limit keeps the first rows
**   (-nodecount). Each rebuilds the graph over the kept nodes, as pprof does,
**   which only changes call edges: a caller that was dropped passes its
**   edge to the next kept caller.
** - Edges decide the suffix: a function whose incoming edges (weight at
**   least edge_fraction of the summed flat) are all inlined calls is printed
**   "name (inline)", some of them "name (partial-inline)".
** - One output unit for the whole report (pprof's "minimum" unit), unless
**   the caller names one (pprof's -unit), which every value is printed in.
**
** A diff profile (p->diff) gets its own table, one row per function:
**
**     Type: cpu
**     Diff: base 1.56s, target 1.80s, change +0.24s (+15.38%)
**     Showing 3 of 3 functions, sorted by |flat change|
**       base flat target flat      change  change%  function
**           1.20s       1.50s      +0.30s  +25.00%  work
**
** base and target are the function's flat values on each side (with
** cum_sort: its cum values, as pprof counts them, and the sort is by |cum
** change|); change is target - base; change% is change relative to the
** base value ("new" when the base is 0). Rows sort by |change| descending,
** then name; functions whose shown value is 0 on both sides are left out;
** limit keeps the first rows; node and edge fractions do not apply. Each
** value is scaled to its own unit unless the caller names one. With
** color, change and change% are red for growth and green for shrinking.
*/
#include <stdio.h>
#include <stdlib.h>

#include "query/render_int.h"

#define IN_INLINE 1u
#define IN_CALL 2u

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a > b ? -1 : a < b;
}

static int64_t cutoff(int64_t base, double fraction)
{
    double c = (double)base * fraction;
    if (c != c || c >= 9.2e18 || c <= -9.2e18)     /* NaN or out of range */
        return 0;
    return (int64_t)em_abs64((int64_t)c);
}

/* Marks each row with the kinds of its in-edges that survive EDGE_CUT. */
static void rows_mark_inline(em_graph *t, int64_t edge_cut)
{
    uint8_t *in = t->kept;      /* reused as per-name in-edge kinds */

    memset(in, 0, t->nfn);
    for (size_t i = 0; i < t->nedges; i++)
        if (em_abs64(t->edges[i].weight) >= (uint64_t)edge_cut)
            in[t->edges[i].dst] |= t->edges[i].inlined ? IN_INLINE : IN_CALL;
    for (size_t i = 0; i < t->nrows; i++)
        t->rows[i].in = in[t->rows[i].fn];
}

/* ---- printing ------------------------------------------------------------------ */

typedef struct top_print {
    const char *unit, *out_unit;
    int64_t total;
} top_print;

static const char *fmt_value(const top_print *pr, int64_t v,
                             char buf[EM_VALUE_MAX])
{
    return em_format_value_as(v, pr->unit, pr->out_unit, buf);
}

static void print_labels(FILE *f, const em_graph *t, const top_print *pr,
                         size_t dropped, int64_t drop_at, size_t orig)
{
    char a[EM_VALUE_MAX];

    em_graph_header(f, t, pr->out_unit, pr->total);
    if (pr->total == 0)
        return;
    if (dropped > 0)
        fprintf(f, "Dropped %zu node%s (cum <= %s)\n", dropped,
                dropped > 1 ? "s" : "", fmt_value(pr, drop_at, a));
    if (t->nrows > 0 && t->nrows < orig)
        fprintf(f, "Showing top %zu nodes out of %zu\n", t->nrows, orig);
}

static void print_rows(FILE *f, const em_graph *t, const top_print *pr)
{
    char fl[EM_VALUE_MAX], cu[EM_VALUE_MAX], p1[16], p2[16], p3[16];
    int64_t sum = 0;

    fprintf(f, "%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum",
            "cum");
    for (size_t i = 0; i < t->nrows; i++) {
        const em_graph_row *r = &t->rows[i];
        const char *suffix = r->in == (IN_INLINE | IN_CALL) ?
                             " (partial-inline)" :
                             r->in == IN_INLINE ? " (inline)" : "";
        sum = em_add_wrap(sum, r->flat);
        fprintf(f, "%10s %s %s %10s %s  %s%s\n", fmt_value(pr, r->flat, fl),
                em_format_percent(r->flat, pr->total, p1),
                em_format_percent(sum, pr->total, p2),
                fmt_value(pr, r->cum, cu),
                em_format_percent(r->cum, pr->total, p3), r->name, suffix);
    }
}

/* ---- the report ------------------------------------------------------------------ */

/* Drops nodes whose |cum| is under CUT; *DROPPED gets how many. */
static int trim_nodes(em_graph *t, int64_t cut, size_t *dropped)
{
    size_t n = 0;

    *dropped = 0;
    if (cut <= 0)
        return EMBER_OK;
    for (size_t i = 0; i < t->nrows; i++)
        if (em_abs64(t->rows[i].cum) >= (uint64_t)cut)
            t->rows[n++] = t->rows[i];
    *dropped = t->nrows - n;
    return *dropped > 0 ? em_graph_keep(t, n) : EMBER_OK;
}

/* ---- diffs ------------------------------------------------------------------------ */

/* A diff's function: flat and cum on each side (pprof's semantics on each
** side: cum once per stack however often the function recurses). */
typedef struct diff_fn {
    int64_t flat_base, flat, cum_base, cum;
    size_t seen;                /* stamp of its last stack */
} diff_fn;

typedef struct diff_row {
    const char *name;
    int64_t base, target;       /* flat or cum, as sorted */
} diff_row;

static void diff_stack(diff_fn *fns, const em_rprofile *p,
                       const em_rstack *s, size_t stamp)
{
    const em_rframe *fr = p->frames + s->first;

    if (s->nframes > 0) {
        diff_fn *leaf = &fns[fr[0].fn];
        leaf->flat_base = em_add_wrap(leaf->flat_base, s->base);
        leaf->flat = em_add_wrap(leaf->flat, s->value);
    }
    for (size_t i = 0; i < s->nframes; i++) {
        diff_fn *d = &fns[fr[i].fn];
        if (d->seen == stamp)
            continue;
        d->seen = stamp;
        d->cum_base = em_add_wrap(d->cum_base, s->base);
        d->cum = em_add_wrap(d->cum, s->value);
    }
}

static int diff_row_cmp(const void *a, const void *b)
{
    const diff_row *x = a, *y = b;
    int c = cmp_u64_desc(em_abs64(em_sub_wrap(x->target, x->base)),
                         em_abs64(em_sub_wrap(y->target, y->base)));
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* The rows with a non-zero side, sorted by |change|; *N gets their count. */
static diff_row *diff_rows(const em_rprofile *p, const diff_fn *fns,
                           bool cum, size_t *n)
{
    diff_row *rows = em_calloc(p->names.count == 0 ? 1 : p->names.count,
                               sizeof *rows);

    *n = 0;
    if (rows == NULL)
        return NULL;
    for (uint32_t fn = 0; fn < p->names.count; fn++) {
        int64_t b = cum ? fns[fn].cum_base : fns[fn].flat_base;
        int64_t t = cum ? fns[fn].cum : fns[fn].flat;
        if (b != 0 || t != 0)
            rows[(*n)++] = (diff_row){ em_strtab_get(&p->names, fn), b, t };
    }
    if (*n > 1)
        qsort(rows, *n, sizeof *rows, diff_row_cmp);
    return rows;
}

static void diff_print(FILE *f, const em_rprofile *p, const em_top_opts *o,
                       const diff_row *rows, size_t shown, size_t n,
                       const char *out)
{
    char a[EM_VALUE_MAX], b[EM_VALUE_MAX], c[EM_VALUE_MAX], pct[24];
    const char *kind = o->cum_sort ? "cum" : "flat";
    char hb[16], ht[16];
    int64_t base = 0, target = 0;

    for (size_t i = 0; i < p->nstacks; i++) {
        base = em_add_wrap(base, p->stacks[i].base);
        target = em_add_wrap(target, p->stacks[i].value);
    }
    if (p->sample_type[0] != '\0')
        fprintf(f, "Type: %s\n", p->sample_type);
    fprintf(f, "Diff: base %s, target %s, change %s (%s)\n",
            em_format_value_as(base, p->unit, out, a),
            em_format_value_as(target, p->unit, out, b),
            em_render_signed(em_sub_wrap(target, base), p->unit, out, c),
            em_render_change_pct(em_sub_wrap(target, base), base, pct));
    fprintf(f, "Showing %zu of %zu functions, sorted by |%s change|\n",
            shown, n, kind);
    snprintf(hb, sizeof hb, "base %s", kind);
    snprintf(ht, sizeof ht, "target %s", kind);
    fprintf(f, "%11s %11s %11s %8s  %s\n", hb, ht, "change", "change%",
            "function");
    for (size_t i = 0; i < shown; i++) {
        int64_t ch = em_sub_wrap(rows[i].target, rows[i].base);
        bool paint = o->color && ch != 0;
        fprintf(f, "%11s %11s %s%11s %8s%s  ",
                em_format_value_as(rows[i].base, p->unit, out, a),
                em_format_value_as(rows[i].target, p->unit, out, b),
                paint ? (ch > 0 ? EM_SGR_RED : EM_SGR_GREEN) : "",
                em_render_signed(ch, p->unit, out, c),
                em_render_change_pct(ch, rows[i].base, pct),
                paint ? EM_SGR_RESET : "");
        em_render_name(f, rows[i].name);
        fputc('\n', f);
    }
}

/* The top of a diff profile: see the file comment of em_render_top. */
static int diff_top(FILE *f, const em_rprofile *p, const em_top_opts *o)
{
    diff_fn *fns = em_calloc(p->names.count == 0 ? 1 : p->names.count,
                             sizeof *fns);
    diff_row *rows = NULL;
    size_t n = 0, shown;
    const char *out;
    int rc = EMBER_OK;

    for (size_t i = 0; fns != NULL && i < p->nstacks; i++) {
        const em_rstack *s = &p->stacks[i];
        if (s->value != 0 || s->base != 0)
            diff_stack(fns, p, s, i + 1);
    }
    if (fns == NULL || (rows = diff_rows(p, fns, o->cum_sort, &n)) == NULL) {
        rc = em_err(EMBER_ENOMEM, "top: %u functions", p->names.count);
        goto out;
    }
    shown = o->limit > 0 && o->limit < n ? o->limit : n;
    /* each value scaled on its own: changes span many magnitudes */
    out = o->unit != NULL && strcmp(o->unit, "minimum") != 0 ? o->unit :
          "auto";
    diff_print(f, p, o, rows, shown, n, out);
    if (ferror(f))
        rc = em_err(EMBER_EIO, "top: write failed");
out:
    em_free(fns);
    em_free(rows);
    return rc;
}

/* ---- the entry point ------------------------------------------------------------- */

int em_render_top(FILE *f, const em_rprofile *p, const em_top_opts *opts)
{
    em_top_opts o = { .sz = sizeof o };
    top_print pr = { .unit = p->unit };
    int64_t base, drop_at;
    size_t dropped = 0, orig;
    em_graph t;
    int rc;

    if (opts != NULL)
        memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
    if (p->diff)
        return diff_top(f, p, &o);
    pr.total = em_graph_total(p, o.relative);
    drop_at = cutoff(pr.total, o.node_fraction);
    if ((rc = em_graph_init(&t, p)) != EMBER_OK)
        goto out;
    base = em_graph_flat_sum(&t);   /* pprof's cutoffs use the first graph */
    rc = trim_nodes(&t, cutoff(base, o.node_fraction), &dropped);
    if (rc != EMBER_OK)
        goto out;
    orig = t.nrows;
    em_graph_sort(&t, o.cum_sort);
    if (o.limit > 0 && o.limit < t.nrows) {
        if ((rc = em_graph_keep(&t, o.limit)) != EMBER_OK)
            goto out;
        em_graph_sort(&t, o.cum_sort);
    }
    rows_mark_inline(&t, cutoff(base, o.edge_fraction));
    pr.out_unit = o.unit == NULL || strcmp(o.unit, "minimum") == 0 ?
                  em_graph_unit(&t, pr.total) : o.unit;
    print_labels(f, &t, &pr, dropped, drop_at, orig);
    print_rows(f, &t, &pr);
    if (ferror(f))
        rc = em_err(EMBER_EIO, "top: write failed");
out:
    em_graph_free(&t);
    return rc;
}
