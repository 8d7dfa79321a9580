/*
** query/render_graph.c: pprof's call graph at the granularity of a
** profile's names (report.newGraph, graph.New), which top, peek and list
** read: a node per name, its flat and cum, and the call edges between
** nodes with their weights.
**
** - Walking a sample from root to leaf, every node on it gets the value
**   added to cum once per sample, however often it recurses; the last node
**   (the innermost inline frame of the leaf location) gets it added to
**   flat. Zero-valued samples are skipped; nodes left with flat == cum ==
**   0 (a diff whose parts cancel) are not rows.
** - An edge joins a node to the next kept node below it on a sample (a
**   node never to itself), weighed once per sample. It is inlined when
**   every occurrence was an inlined call (the callee's frame inlined into
**   its caller's location).
** - The graph may be rebuilt over a subset of its nodes (em_graph_keep),
**   as pprof rebuilds it after trimming: a caller that was dropped passes
**   its edge to the next kept caller.
** - Rows sort by |flat| descending, then name (bytewise); by |cum| then
**   name with cum (pprof's FlatNameOrder and CumNameOrder, whose last key
**   never decides here: names are unique per node).
*/
#include <stdio.h>
#include <stdlib.h>

#include "query/render_int.h"

static int edge_add(em_graph *g, uint32_t src, uint32_t dst, int64_t w,
                    bool inlined, size_t stamp)
{
    uint64_t key = (uint64_t)src << 32 | dst, ix;
    em_graph_edge *e;

    if (em_map64_get(&g->edge_ix, key, &ix)) {
        e = &g->edges[ix];
        if (e->stamp == stamp)      /* once per sample, as cum */
            return EMBER_OK;
        e->weight = em_add_wrap(e->weight, w);
        e->inlined = e->inlined && inlined;
        e->stamp = stamp;
        return EMBER_OK;
    }
    if (g->nedges == g->cap_edges) {
        em_graph_edge *n = em_grow(g->edges, &g->cap_edges, g->nedges + 1,
                                   sizeof *n);
        if (n == NULL)
            return em_err(EMBER_ENOMEM, "graph: %zu edges", g->nedges + 1);
        g->edges = n;
    }
    g->edges[g->nedges] = (em_graph_edge){ src, dst, w, inlined, stamp };
    return em_map64_put(&g->edge_ix, key, g->nedges++);
}

/* Adds stack S (stamp STAMP) root to leaf: pprof's graph.newGraph loop. */
static int stack_walk(em_graph *g, const em_rstack *s, size_t stamp)
{
    const em_rframe *fr = g->p->frames + s->first;
    bool have_parent = false, residual = false;
    uint32_t parent = 0;
    int rc;

    for (size_t i = s->nframes; i-- > 0;) {
        uint32_t n = fr[i].fn;
        if (!g->kept[n]) {
            residual = true;
            continue;
        }
        if (g->seen[n] != stamp) {
            g->seen[n] = stamp;
            g->cum[n] = em_add_wrap(g->cum[n], s->value);
        }
        if (have_parent && n != parent &&
            (rc = edge_add(g, parent, n, s->value,
                           (fr[i].flags & EM_RFRAME_INLINED) != 0,
                           stamp)) != EMBER_OK)
            return rc;
        parent = n;
        have_parent = true;
        residual = false;
    }
    if (have_parent && !residual)
        g->flat[parent] = em_add_wrap(g->flat[parent], s->value);
    return EMBER_OK;
}

int em_graph_build(em_graph *g)
{
    int rc;

    memset(g->flat, 0, g->nfn * sizeof *g->flat);
    memset(g->cum, 0, g->nfn * sizeof *g->cum);
    memset(g->seen, 0, g->nfn * sizeof *g->seen);
    em_map64_free(&g->edge_ix);
    g->nedges = 0;
    for (size_t i = 0; i < g->p->nstacks; i++)
        if (g->p->stacks[i].value != 0 &&
            (rc = stack_walk(g, &g->p->stacks[i], i + 1)) != EMBER_OK)
            return rc;
    g->nrows = 0;
    for (uint32_t fn = 0; fn < g->nfn; fn++) {
        if (!g->kept[fn] || (g->flat[fn] == 0 && g->cum[fn] == 0))
            continue;
        g->rows[g->nrows++] = (em_graph_row){ .fn = fn, .flat = g->flat[fn],
            .cum = g->cum[fn], .name = em_strtab_get(&g->p->names, fn) };
    }
    return EMBER_OK;
}

int em_graph_keep(em_graph *g, size_t n)
{
    memset(g->kept, 0, g->nfn);
    for (size_t i = 0; i < n; i++)
        g->kept[g->rows[i].fn] = 1;
    return em_graph_build(g);
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a > b ? -1 : a < b;
}

static int row_cmp_flat(const void *a, const void *b)
{
    const em_graph_row *x = a, *y = b;
    int c = cmp_u64_desc(em_abs64(x->flat), em_abs64(y->flat));
    return c != 0 ? c : strcmp(x->name, y->name);
}

static int row_cmp_cum(const void *a, const void *b)
{
    const em_graph_row *x = a, *y = b;
    int c = cmp_u64_desc(em_abs64(x->cum), em_abs64(y->cum));
    return c != 0 ? c : strcmp(x->name, y->name);
}

void em_graph_sort(em_graph *g, bool cum)
{
    if (g->nrows > 1)
        qsort(g->rows, g->nrows, sizeof *g->rows,
              cum ? row_cmp_cum : row_cmp_flat);
}

int64_t em_graph_flat_sum(const em_graph *g)
{
    int64_t sum = 0;

    for (size_t i = 0; i < g->nrows; i++)
        sum = em_add_wrap(sum, g->rows[i].flat);
    return sum;
}

const char *em_graph_unit(const em_graph *g, int64_t total)
{
    int64_t minv = 0;

    if (g->nrows == 0)
        return "minimum";
    for (size_t i = 0; i < g->nrows; i++) {
        int64_t v = g->rows[i].flat != 0 ? g->rows[i].flat : g->rows[i].cum;
        uint64_t a = em_abs64(v);
        if (a > 0 && a <= INT64_MAX && (minv == 0 || (int64_t)a < minv))
            minv = (int64_t)a;
    }
    if (minv == 0)
        minv = total;
    return em_unit_pick(minv, total, g->p->unit);
}

void em_graph_header(FILE *f, const em_graph *g, const char *out_unit,
                     int64_t total)
{
    char a[EM_VALUE_MAX], b[EM_VALUE_MAX], pct[16];
    int64_t shown = em_graph_flat_sum(g);
    const char *p = em_format_percent(shown, total, pct);

    if (g->p->sample_type[0] != '\0')
        fprintf(f, "Type: %s\n", g->p->sample_type);
    fprintf(f, "Showing nodes accounting for %s, %s of %s total\n",
            em_format_value_as(shown, g->p->unit, out_unit, a),
            p + strspn(p, " "),
            em_format_value_as(total, g->p->unit, out_unit, b));
}

int64_t em_graph_total(const em_rprofile *p, bool relative)
{
    int64_t total = 0;

    if (p->has_whole && !relative)
        return p->whole;
    for (size_t i = 0; i < p->nstacks; i++)
        total = em_add_wrap(total, (int64_t)em_abs64(p->stacks[i].value));
    return total;
}

int em_graph_init(em_graph *g, const em_rprofile *p)
{
    size_t n;

    memset(g, 0, sizeof *g);
    g->p = p;
    g->nfn = p->names.count;
    n = g->nfn == 0 ? 1 : g->nfn;
    g->flat = em_calloc(n, sizeof *g->flat);
    g->cum = em_calloc(n, sizeof *g->cum);
    g->seen = em_calloc(n, sizeof *g->seen);
    g->kept = em_malloc(n);
    g->rows = em_calloc(n, sizeof *g->rows);
    if (g->flat == NULL || g->cum == NULL || g->seen == NULL ||
        g->kept == NULL || g->rows == NULL)
        return em_err(EMBER_ENOMEM, "graph: %u functions", g->nfn);
    memset(g->kept, 1, n);
    return em_graph_build(g);
}

void em_graph_free(em_graph *g)
{
    em_free(g->flat);
    em_free(g->cum);
    em_free(g->seen);
    em_free(g->kept);
    em_free(g->rows);
    em_free(g->edges);
    em_map64_free(&g->edge_ix);
    memset(g, 0, sizeof *g);
}
