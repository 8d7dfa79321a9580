/*
** query/render_top.c: the `top` renderer, `go tool pprof -top` at its
** default granularity (functions), reproduced from pprof's report and graph
** packages so that numbers and order match what users know:
**
** - A node is a function name. Walking a sample from root to leaf, every
**   node on it gets the value added to cum once per sample, however often it
**   recurses; the last node (the innermost inline frame of the leaf location)
**   gets it added to flat. Zero-valued samples are skipped; nodes left with
**   flat == cum == 0 (a diff whose parts cancel) are not shown.
** - total, the base of every percentage, is the sum of |value| over all
**   samples; sum% runs over |flat| down the rows. After focus or ignore it
**   is the total before them (p->whole), as pprof computes its report's
**   total before those filters, unless the caller asks for relative
**   percentages (pprof's -relative_percentages). The node and edge
**   cutoffs stay shares of the graph's summed flat while the "Dropped"
**   line names node_fraction of that total: pprof's quirk, kept.
** - Rows sort by |flat| descending, then name (bytewise), then |cum|; with
**   cum_sort, by |cum|, then name, then |flat| (pprof's FlatNameOrder and
**   CumNameOrder: the name comes before the other value).
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

typedef struct top_edge {
    uint32_t src, dst;          /* caller and callee name ids */
    int64_t weight;
    bool inlined;               /* every occurrence was an inlined call */
    size_t stamp;               /* last stack that added to it */
} top_edge;

typedef struct top_row {
    uint32_t fn;
    int64_t flat, cum;
    const char *name;
    unsigned in;                /* IN_INLINE | IN_CALL: kinds of in-edges */
} top_row;

#define IN_INLINE 1u
#define IN_CALL 2u

typedef struct top {
    const em_rprofile *p;
    uint32_t nfn;
    int64_t *flat, *cum;        /* per name id */
    size_t *seen;               /* per name id: stamp of its last stack */
    uint8_t *kept;              /* per name id: in the graph */
    em_map64 edge_ix;           /* src << 32 | dst -> index in edges */
    top_edge *edges;
    size_t nedges, cap_edges;
    top_row *rows;              /* the graph's nodes, sorted */
    size_t nrows;
} top;

/* ---- building the graph ---------------------------------------------------- */

static int edge_add(top *t, uint32_t src, uint32_t dst, int64_t w,
                    bool inlined, size_t stamp)
{
    uint64_t key = (uint64_t)src << 32 | dst, ix;
    top_edge *e;

    if (em_map64_get(&t->edge_ix, key, &ix)) {
        e = &t->edges[ix];
        if (e->stamp == stamp)      /* once per sample, as cum */
            return EMBER_OK;
        e->weight = em_add_wrap(e->weight, w);
        e->inlined = e->inlined && inlined;
        e->stamp = stamp;
        return EMBER_OK;
    }
    if (t->nedges == t->cap_edges) {
        top_edge *g = em_grow(t->edges, &t->cap_edges, t->nedges + 1,
                              sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "top: %zu edges", t->nedges + 1);
        t->edges = g;
    }
    t->edges[t->nedges] = (top_edge){ src, dst, w, inlined, stamp };
    return em_map64_put(&t->edge_ix, key, t->nedges++);
}

/* Adds stack S (stamp STAMP) root to leaf: pprof's graph.newGraph loop. */
static int stack_walk(top *t, const em_rstack *s, size_t stamp)
{
    const em_rframe *fr = t->p->frames + s->first;
    bool have_parent = false, residual = false;
    uint32_t parent = 0;
    int rc;

    for (size_t i = s->nframes; i-- > 0;) {
        uint32_t n = fr[i].fn;
        if (!t->kept[n]) {
            residual = true;
            continue;
        }
        if (t->seen[n] != stamp) {
            t->seen[n] = stamp;
            t->cum[n] = em_add_wrap(t->cum[n], s->value);
        }
        if (have_parent && n != parent &&
            (rc = edge_add(t, parent, n, s->value,
                           (fr[i].flags & EM_RFRAME_INLINED) != 0,
                           stamp)) != EMBER_OK)
            return rc;
        parent = n;
        have_parent = true;
        residual = false;
    }
    if (have_parent && !residual)
        t->flat[parent] = em_add_wrap(t->flat[parent], s->value);
    return EMBER_OK;
}

/* (Re)builds flat, cum and edges over the kept nodes, then the rows. */
static int graph_build(top *t)
{
    int rc;

    memset(t->flat, 0, t->nfn * sizeof *t->flat);
    memset(t->cum, 0, t->nfn * sizeof *t->cum);
    memset(t->seen, 0, t->nfn * sizeof *t->seen);
    em_map64_free(&t->edge_ix);
    t->nedges = 0;
    for (size_t i = 0; i < t->p->nstacks; i++)
        if (t->p->stacks[i].value != 0 &&
            (rc = stack_walk(t, &t->p->stacks[i], i + 1)) != EMBER_OK)
            return rc;
    t->nrows = 0;
    for (uint32_t fn = 0; fn < t->nfn; fn++) {
        if (!t->kept[fn] || (t->flat[fn] == 0 && t->cum[fn] == 0))
            continue;
        t->rows[t->nrows++] = (top_row){ .fn = fn, .flat = t->flat[fn],
            .cum = t->cum[fn], .name = em_strtab_get(&t->p->names, fn) };
    }
    return EMBER_OK;
}

/* Keeps only the nodes in rows[0..n) and rebuilds the graph over them. */
static int graph_keep(top *t, size_t n)
{
    memset(t->kept, 0, t->nfn);
    for (size_t i = 0; i < n; i++)
        t->kept[t->rows[i].fn] = 1;
    return graph_build(t);
}

/* ---- ordering ---------------------------------------------------------------- */

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a > b ? -1 : a < b;
}

/* Names are unique per node, so pprof's last keys never decide here. */
static int row_cmp_flat(const void *a, const void *b)
{
    const top_row *x = a, *y = b;
    int c = cmp_u64_desc(em_abs64(x->flat), em_abs64(y->flat));
    return c != 0 ? c : strcmp(x->name, y->name);
}

static int row_cmp_cum(const void *a, const void *b)
{
    const top_row *x = a, *y = b;
    int c = cmp_u64_desc(em_abs64(x->cum), em_abs64(y->cum));
    return c != 0 ? c : strcmp(x->name, y->name);
}

static void rows_sort(top *t, bool cum)
{
    if (t->nrows > 1)
        qsort(t->rows, t->nrows, sizeof *t->rows,
              cum ? row_cmp_cum : row_cmp_flat);
}

/* The signed sum of flat over the graph: pprof's base for the cutoffs. */
static int64_t rows_flat_sum(const top *t)
{
    int64_t sum = 0;
    for (size_t i = 0; i < t->nrows; i++)
        sum = em_add_wrap(sum, t->rows[i].flat);
    return sum;
}

static int64_t cutoff(int64_t base, double fraction)
{
    double c = (double)base * fraction;
    if (c != c || c >= 9.2e18 || c <= -9.2e18)     /* NaN or out of range */
        return 0;
    return (int64_t)em_abs64((int64_t)c);
}

/* Marks each row with the kinds of its in-edges that survive EDGE_CUT. */
static void rows_mark_inline(top *t, int64_t edge_cut)
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

/* pprof's selectOutputUnit: from the smallest non-zero node magnitude. */
static const char *output_unit(const top *t, int64_t total)
{
    int64_t minv = 0;

    if (t->nrows == 0)
        return "minimum";
    for (size_t i = 0; i < t->nrows; i++) {
        int64_t v = t->rows[i].flat != 0 ? t->rows[i].flat : t->rows[i].cum;
        uint64_t a = em_abs64(v);
        if (a > 0 && a <= INT64_MAX && (minv == 0 || (int64_t)a < minv))
            minv = (int64_t)a;
    }
    if (minv == 0)
        minv = total;
    return em_unit_pick(minv, total, t->p->unit);
}

typedef struct top_print {
    const char *unit, *out_unit;
    int64_t total;
} top_print;

static const char *fmt_value(const top_print *pr, int64_t v,
                             char buf[EM_VALUE_MAX])
{
    return em_format_value_as(v, pr->unit, pr->out_unit, buf);
}

static void print_labels(FILE *f, const top *t, const top_print *pr,
                         size_t dropped, int64_t drop_at, size_t orig)
{
    char a[EM_VALUE_MAX], b[EM_VALUE_MAX], pct[16];
    int64_t shown = rows_flat_sum(t);
    const char *p = em_format_percent(shown, pr->total, pct);

    if (t->p->sample_type[0] != '\0')
        fprintf(f, "Type: %s\n", t->p->sample_type);
    fprintf(f, "Showing nodes accounting for %s, %s of %s total\n",
            fmt_value(pr, shown, a), p + strspn(p, " "),
            fmt_value(pr, pr->total, b));
    if (pr->total == 0)
        return;
    if (dropped > 0)
        fprintf(f, "Dropped %zu node%s (cum <= %s)\n", dropped,
                dropped > 1 ? "s" : "", fmt_value(pr, drop_at, a));
    if (t->nrows > 0 && t->nrows < orig)
        fprintf(f, "Showing top %zu nodes out of %zu\n", t->nrows, orig);
}

static void print_rows(FILE *f, const top *t, const top_print *pr)
{
    char fl[EM_VALUE_MAX], cu[EM_VALUE_MAX], p1[16], p2[16], p3[16];
    int64_t sum = 0;

    fprintf(f, "%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum",
            "cum");
    for (size_t i = 0; i < t->nrows; i++) {
        const top_row *r = &t->rows[i];
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

static int top_alloc(top *t, const em_rprofile *p)
{
    size_t n;

    memset(t, 0, sizeof *t);
    t->p = p;
    t->nfn = p->names.count;
    n = t->nfn == 0 ? 1 : t->nfn;
    t->flat = em_calloc(n, sizeof *t->flat);
    t->cum = em_calloc(n, sizeof *t->cum);
    t->seen = em_calloc(n, sizeof *t->seen);
    t->kept = em_malloc(n);
    t->rows = em_calloc(n, sizeof *t->rows);
    if (t->flat == NULL || t->cum == NULL || t->seen == NULL ||
        t->kept == NULL || t->rows == NULL)
        return em_err(EMBER_ENOMEM, "top: %u functions", t->nfn);
    memset(t->kept, 1, n);
    return EMBER_OK;
}

static void top_free(top *t)
{
    em_free(t->flat);
    em_free(t->cum);
    em_free(t->seen);
    em_free(t->kept);
    em_free(t->rows);
    em_free(t->edges);
    em_map64_free(&t->edge_ix);
}

/* Drops nodes whose |cum| is under CUT; *DROPPED gets how many. */
static int trim_nodes(top *t, int64_t cut, size_t *dropped)
{
    size_t n = 0;

    *dropped = 0;
    if (cut <= 0)
        return EMBER_OK;
    for (size_t i = 0; i < t->nrows; i++)
        if (em_abs64(t->rows[i].cum) >= (uint64_t)cut)
            t->rows[n++] = t->rows[i];
    *dropped = t->nrows - n;
    return *dropped > 0 ? graph_keep(t, n) : EMBER_OK;
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
    top t;
    int rc;

    if (opts != NULL)
        memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
    if (p->diff)
        return diff_top(f, p, &o);
    for (size_t i = 0; i < p->nstacks; i++)
        pr.total = em_add_wrap(pr.total, (int64_t)em_abs64(p->stacks[i].value));
    if (p->has_whole && !o.relative)
        pr.total = p->whole;
    drop_at = cutoff(pr.total, o.node_fraction);
    if ((rc = top_alloc(&t, p)) != EMBER_OK ||
        (rc = graph_build(&t)) != EMBER_OK)
        goto out;
    base = rows_flat_sum(&t);   /* pprof's cutoffs use the first graph */
    rc = trim_nodes(&t, cutoff(base, o.node_fraction), &dropped);
    if (rc != EMBER_OK)
        goto out;
    orig = t.nrows;
    rows_sort(&t, o.cum_sort);
    if (o.limit > 0 && o.limit < t.nrows) {
        if ((rc = graph_keep(&t, o.limit)) != EMBER_OK)
            goto out;
        rows_sort(&t, o.cum_sort);
    }
    rows_mark_inline(&t, cutoff(base, o.edge_fraction));
    pr.out_unit = o.unit == NULL || strcmp(o.unit, "minimum") == 0 ?
                  output_unit(&t, pr.total) : o.unit;
    print_labels(f, &t, &pr, dropped, drop_at, orig);
    print_rows(f, &t, &pr);
    if (ferror(f))
        rc = em_err(EMBER_EIO, "top: write failed");
out:
    top_free(&t);
    return rc;
}
