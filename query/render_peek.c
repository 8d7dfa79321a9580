/*
** query/render_peek.c: the peek view, `go tool pprof -peek=re` (pprof's
** tree report restricted to the nodes whose name matches re), as text for
** `-o top` and as JSON for a page's table. For each matching node of the
** profile's graph (render_graph.c), in top's row order, its callers with
** the weight of their call edge, the node's own flat and cum, then its
** callees:
**
**     Type: cpu
**     Showing nodes accounting for 800ms, 100% of 800ms total
**     ----------------------------------------------------------+-------------
**           flat  flat%   sum%        cum   cum%   calls calls% + context
**     ----------------------------------------------------------+-------------
**                                                  180ms 56.25% |   main.work.func1
**          250ms 31.25% 31.25%      320ms 40.00%                | main.fib
**                                                   70ms 21.88% |   runtime.asyncPreempt
**     ----------------------------------------------------------+-------------
**
** As pprof does for -peek: no trimming (every node and edge, whatever a
** row limit says), sum% runs over the matching rows only, an edge's calls%
** is of the node's cum, edges sort by |weight| descending then the other
** end's name, a recursive call (a node to itself) is no edge, an inlined
** call is marked " (inline)", one output unit for the report (pprof's
** "minimum", or o->unit), percentages of the whole profile as top's. The
** legend line ends in pprof's own tabs and spaces, byte for byte.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "query/render_int.h"

#define PEEK_SEP "----------------------------------------------------------+" \
                 "-------------\n"
#define PEEK_LEGEND "      flat  flat%   sum%        cum   cum%   calls " \
                    "calls% + context \t \t \n"

/* A node's edges one way: edge indices grouped by node (a counting sort),
** each group sorted when its node is shown. */
typedef struct adj {
    uint32_t *idx;              /* edge indices, grouped by node */
    size_t *start;              /* node n's: idx[start[n] .. start[n+1]) */
} adj;

typedef struct peek {
    em_graph g;
    em_regex *re;
    adj in, out;                /* by callee, by caller */
    const char *unit, *out_unit;
    int64_t total;
} peek;

/* qsort takes no context: the graph and the side being sorted. */
static _Thread_local const em_graph *sort_graph;
static _Thread_local bool sort_in;

/* By |weight| descending, then the other end's name. */
static int edge_cmp(const void *a, const void *b)
{
    const em_graph_edge *x = &sort_graph->edges[*(const uint32_t *)a];
    const em_graph_edge *y = &sort_graph->edges[*(const uint32_t *)b];
    uint64_t wx = em_abs64(x->weight), wy = em_abs64(y->weight);

    if (x->weight != y->weight && wx != wy)
        return wx > wy ? -1 : 1;
    return strcmp(em_strtab_get(&sort_graph->p->names,
                                sort_in ? x->src : x->dst),
                  em_strtab_get(&sort_graph->p->names,
                                sort_in ? y->src : y->dst));
}

/* Groups G's edges by callee (IN) or caller into A. */
static int adj_build(adj *a, const em_graph *g, bool in)
{
    a->idx = em_malloc(g->nedges * sizeof *a->idx + 1);
    a->start = em_calloc((size_t)g->nfn + 2, sizeof *a->start);
    if (a->idx == NULL || a->start == NULL)
        return em_err(EMBER_ENOMEM, "peek: %zu edges", g->nedges);
    for (size_t i = 0; i < g->nedges; i++)
        a->start[(in ? g->edges[i].dst : g->edges[i].src) + 2]++;
    for (size_t n = 2; n < (size_t)g->nfn + 2; n++)
        a->start[n] += a->start[n - 1];
    for (size_t i = 0; i < g->nedges; i++)  /* start[n + 1]: n's next slot */
        a->idx[a->start[(in ? g->edges[i].dst : g->edges[i].src) + 1]++] =
            (uint32_t)i;
    return EMBER_OK;
}

/* Node FN's edges in A, sorted for showing: *N of them. */
static const uint32_t *adj_sorted(const adj *a, const em_graph *g, bool in,
                                  uint32_t fn, size_t *n)
{
    uint32_t *v = a->idx + a->start[fn];

    *n = a->start[fn + 1] - a->start[fn];
    sort_graph = g;
    sort_in = in;
    if (*n > 1)
        qsort(v, *n, sizeof *v, edge_cmp);
    sort_graph = NULL;
    return v;
}

/* The graph of P, its rows sorted, its edges grouped both ways, and the
** view's regex RE compiled. */
static int peek_init(peek *k, const em_rprofile *p, const em_render_opts *o,
                     const char *re)
{
    int rc;

    memset(k, 0, sizeof *k);
    if ((rc = em_graph_init(&k->g, p)) != EMBER_OK ||
        (rc = em_render_view_regex(re, &k->re)) != EMBER_OK ||
        (rc = adj_build(&k->in, &k->g, true)) != EMBER_OK ||
        (rc = adj_build(&k->out, &k->g, false)) != EMBER_OK)
        return rc;
    em_graph_sort(&k->g, o->cum_sort);
    k->unit = p->unit;
    k->total = em_graph_total(p, o->relative);
    k->out_unit = o->unit == NULL || strcmp(o->unit, "minimum") == 0 ?
                  em_graph_unit(&k->g, k->total) : o->unit;
    return EMBER_OK;
}

static void peek_free(peek *k)
{
    em_graph_free(&k->g);
    em_regex_free(k->re);
    em_free(k->in.idx);
    em_free(k->in.start);
    em_free(k->out.idx);
    em_free(k->out.start);
}

static bool row_matches(const peek *k, const em_graph_row *r)
{
    return em_regex_match(k->re, r->name, strlen(r->name));
}

/* ---- text ------------------------------------------------------------------------ */

static void edges_print(FILE *f, const peek *k, bool in,
                        const em_graph_row *r)
{
    char v[EM_VALUE_MAX], pct[16];
    size_t n;
    const uint32_t *order = adj_sorted(in ? &k->in : &k->out, &k->g, in,
                                       r->fn, &n);

    for (size_t i = 0; i < n; i++) {
        const em_graph_edge *e = &k->g.edges[order[i]];
        fprintf(f, "%50s %s |   ",
                em_format_value_as(e->weight, k->unit, k->out_unit, v),
                em_format_percent(e->weight, r->cum, pct));
        em_render_name(f, em_strtab_get(&k->g.p->names,
                                        in ? e->src : e->dst));
        fputs(e->inlined ? " (inline)\n" : "\n", f);
    }
}

static void node_print(FILE *f, const peek *k, const em_graph_row *r,
                       int64_t sum)
{
    char fl[EM_VALUE_MAX], cu[EM_VALUE_MAX], p1[16], p2[16], p3[16];

    fprintf(f, "%10s %s %s %10s %s                | ",
            em_format_value_as(r->flat, k->unit, k->out_unit, fl),
            em_format_percent(r->flat, k->total, p1),
            em_format_percent(sum, k->total, p2),
            em_format_value_as(r->cum, k->unit, k->out_unit, cu),
            em_format_percent(r->cum, k->total, p3));
    em_render_name(f, r->name);
    fputc('\n', f);
}

int em_render_peek(FILE *f, const em_rprofile *p, const em_render_opts *o,
                   const char *re)
{
    peek k;
    int64_t sum = 0;
    int rc = peek_init(&k, p, o, re);

    if (rc != EMBER_OK)
        goto out;
    em_graph_header(f, &k.g, k.out_unit, k.total);
    fputs(PEEK_SEP PEEK_LEGEND, f);
    for (size_t i = 0; i < k.g.nrows; i++) {
        const em_graph_row *r = &k.g.rows[i];
        if (!row_matches(&k, r))
            continue;
        sum = em_add_wrap(sum, r->flat);
        fputs(PEEK_SEP, f);
        edges_print(f, &k, true, r);
        node_print(f, &k, r, sum);
        edges_print(f, &k, false, r);
    }
    if (k.g.nrows > 0)
        fputs(PEEK_SEP, f);
    if (ferror(f))
        rc = em_err(EMBER_EIO, "peek: write failed");
out:
    peek_free(&k);
    return rc;
}

/* ---- json -------------------------------------------------------------------------- */

static void json_put(void *ctx, const char *s, size_t n)
{
    fwrite(s, 1, n, ctx);
}

static void edges_json(FILE *f, const peek *k, bool in,
                       const em_graph_row *r)
{
    size_t n;
    const uint32_t *order = adj_sorted(in ? &k->in : &k->out, &k->g, in,
                                       r->fn, &n);

    fputs(in ? ",\"callers\":[" : ",\"callees\":[", f);
    for (size_t i = 0; i < n; i++) {
        const em_graph_edge *e = &k->g.edges[order[i]];
        fputs(i > 0 ? ",{\"name\":" : "{\"name\":", f);
        em_json_string(em_strtab_get(&k->g.p->names, in ? e->src : e->dst),
                       json_put, f);
        fprintf(f, ",\"value\":%" PRId64 ",\"inline\":%s}", e->weight,
                e->inlined ? "true" : "false");
    }
    fputc(']', f);
}

int em_render_peek_json(FILE *f, const em_rprofile *p,
                        const em_render_opts *o, const char *re)
{
    peek k;
    size_t shown = 0;
    int rc = peek_init(&k, p, o, re);

    if (rc != EMBER_OK)
        goto out;
    fputs("\"peek\":[", f);
    for (size_t i = 0; i < k.g.nrows; i++) {
        const em_graph_row *r = &k.g.rows[i];
        if (!row_matches(&k, r))
            continue;
        fputs(shown++ > 0 ? ",\n{\"name\":" : "\n{\"name\":", f);
        em_json_string(r->name, json_put, f);
        fprintf(f, ",\"flat\":%" PRId64 ",\"cum\":%" PRId64, r->flat, r->cum);
        edges_json(f, &k, true, r);
        edges_json(f, &k, false, r);
        fputc('}', f);
    }
    fputs(shown > 0 ? "\n]" : "]", f);
out:
    peek_free(&k);
    return rc;
}
