/*
** query/render_tree.c: the call tree (em_ctree) that the tree, flame and
** json renderers draw, and the `tree` renderer itself.
**
** The call tree merges stacks by their path from the root. The stacks are
** sorted root first by name id, so stacks sharing a path are neighbours and
** one pass creates the nodes where a stack leaves its predecessor's path:
** no hashing, O(frames) after an O(stacks log stacks) sort. Recursion makes
** deeper nodes, never counts twice. Each node's children are then a slice
** of `kids` (a counting sort by parent), each slice ordered on its own,
** names compared through their precomputed bytewise rank.
**
** `tree` prints the nodes depth first from the root's children, one row
** each, indented two spaces per level:
**
**       Type: cpu
**       Total: 1.56s
**       Dropped 3 nodes (cum < 7.80ms)
**              cum   cum%       flat  function
**            1.56s   100%          0  main
**            1.20s 76.92%      1.20s    work
**
** cum is the node's total, flat its self value, cum% of the sum of |value|
** over all stacks (top's total: after focus or ignore the total before
** them, and the header says "Total: KEPT of WHOLE"); each value is scaled to its own unit
** (o->unit, when given, fixes one as top's -unit does). Children sort by |cum| descending, then
** name. A node whose |cum| is below 0.5% of the total (pprof's default
** -nodefraction) is dropped with its subtree; the limit keeps the first
** rows. A diff prints, per node, base cum, target cum, the change and the
** change relative to the base (em_render_change_pct), red for growth and
** green for shrinking when colored; its children sort by the larger of
** |base| and |target| and the 0.5% is of the larger side's total.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "query/render_int.h"

#define TREE_NODE_FRACTION 0.005    /* pprof's -nodefraction default */
#define TREE_INDENT 2

/* ---- building ------------------------------------------------------------------ */

/* qsort takes no context: the profile or tree being sorted, per thread. */
static _Thread_local const em_rprofile *sort_prof;
static _Thread_local const em_ctree *sort_tree;

/* Stacks compared root first by name id, shorter first on a tie. */
static int stack_cmp(const void *a, const void *b)
{
    const em_rstack *x = &sort_prof->stacks[*(const size_t *)a];
    const em_rstack *y = &sort_prof->stacks[*(const size_t *)b];
    const em_rframe *fx = sort_prof->frames + x->first + x->nframes;
    const em_rframe *fy = sort_prof->frames + y->first + y->nframes;
    size_t n = x->nframes < y->nframes ? x->nframes : y->nframes;

    for (size_t i = 1; i <= n; i++)
        if (fx[-(ptrdiff_t)i].fn != fy[-(ptrdiff_t)i].fn)
            return fx[-(ptrdiff_t)i].fn < fy[-(ptrdiff_t)i].fn ? -1 : 1;
    return (x->nframes > y->nframes) - (x->nframes < y->nframes);
}

static int node_new(em_ctree *t, uint32_t parent, uint32_t fn, uint32_t *ix)
{
    if (t->n >= UINT32_MAX - 1)
        return em_err(EMBER_ELIMIT, "call tree: more than 2^32 nodes");
    if (t->n == t->cap) {
        em_cnode *g = em_grow(t->nodes, &t->cap, t->n + 1, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "call tree: %zu nodes", t->n + 1);
        t->nodes = g;
    }
    t->nodes[t->n] = (em_cnode){ .fn = fn, .parent = parent,
        .depth = t->n == 0 ? 0 : t->nodes[parent].depth + 1 };
    *ix = (uint32_t)t->n++;
    return EMBER_OK;
}

static void node_add(em_cnode *c, const em_rstack *s)
{
    c->total = em_add_wrap(c->total, s->value);
    c->base_total = em_add_wrap(c->base_total, s->base);
    c->size += em_abs64(s->value);
}

/* Frames stack S shares, root first, with stack PREV (NULL: none). */
static size_t common_prefix(const em_rprofile *p, const em_rstack *prev,
                            const em_rstack *s)
{
    const em_rframe *fa, *fb;
    size_t n, i;

    if (prev == NULL)
        return 0;
    fa = p->frames + prev->first + prev->nframes;
    fb = p->frames + s->first + s->nframes;
    n = prev->nframes < s->nframes ? prev->nframes : s->nframes;
    for (i = 0; i < n && fa[-1 - (ptrdiff_t)i].fn == fb[-1 - (ptrdiff_t)i].fn;
         i++)
        ;
    return i;
}

/* Adds stack S, sorted after PREV: the path they share is PATH[1..l], the
** rest gets new nodes. PATH[0] is the root; PATH[d] the node at depth d. */
static int stack_add(em_ctree *t, uint32_t *path, const em_rstack *prev,
                     const em_rstack *s)
{
    const em_rframe *fr = t->p->frames + s->first;
    size_t l = common_prefix(t->p, prev, s);
    int rc;

    for (size_t d = l + 1; d <= s->nframes; d++)
        if ((rc = node_new(t, path[d - 1], fr[s->nframes - d].fn,
                           &path[d])) != EMBER_OK)
            return rc;
    for (size_t d = 0; d <= s->nframes; d++)
        node_add(&t->nodes[path[d]], s);
    t->nodes[path[s->nframes]].self =
        em_add_wrap(t->nodes[path[s->nframes]].self, s->value);
    t->nodes[path[s->nframes]].base_self =
        em_add_wrap(t->nodes[path[s->nframes]].base_self, s->base);
    return EMBER_OK;
}

/* The non-zero stacks of P in root-first order; *N gets their count and
** *DEPTH the most frames of one. NULL when out of memory. */
static size_t *stacks_sorted(const em_rprofile *p, size_t *n, size_t *depth)
{
    size_t *ix = em_malloc((p->nstacks == 0 ? 1 : p->nstacks) * sizeof *ix);

    *n = *depth = 0;
    if (ix == NULL)
        return NULL;
    for (size_t i = 0; i < p->nstacks; i++) {
        if (p->stacks[i].value == 0 && p->stacks[i].base == 0)
            continue;
        ix[(*n)++] = i;
        if (p->stacks[i].nframes > *depth)
            *depth = p->stacks[i].nframes;
    }
    sort_prof = p;
    qsort(ix, *n, sizeof *ix, stack_cmp);
    sort_prof = NULL;
    return ix;
}

/* Builds the nodes: one pass over the stacks in root-first order, so that
** stacks sharing a path are neighbours and no lookup is needed. */
static int nodes_build(em_ctree *t)
{
    const em_rprofile *p = t->p;
    size_t n, depth;
    size_t *ix = stacks_sorted(p, &n, &depth);
    uint32_t *path = em_malloc((depth + 1) * sizeof *path);
    int rc = ix == NULL || path == NULL ?
             em_err(EMBER_ENOMEM, "call tree: %zu stacks", p->nstacks) :
             node_new(t, 0, UINT32_MAX, &path[0]);

    for (size_t i = 0; rc == EMBER_OK && i < n; i++)
        rc = stack_add(t, path, i > 0 ? &p->stacks[ix[i - 1]] : NULL,
                       &p->stacks[ix[i]]);
    em_free(ix);
    em_free(path);
    return rc;
}

/* ---- ordering children ------------------------------------------------------------ */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(em_strtab_get(&sort_prof->names, *(const uint32_t *)a),
                  em_strtab_get(&sort_prof->names, *(const uint32_t *)b));
}

/* rank[name id] = its place in bytewise order, so that ordering children
** by name compares integers. */
static int names_rank(em_ctree *t)
{
    uint32_t n = t->p->names.count;
    uint32_t *order = em_malloc((n == 0 ? 1 : n) * sizeof *order);

    t->rank = em_malloc((n == 0 ? 1 : n) * sizeof *t->rank);
    if (order == NULL || t->rank == NULL) {
        em_free(order);
        return em_err(EMBER_ENOMEM, "call tree: %u names", n);
    }
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    sort_prof = t->p;
    qsort(order, n, sizeof *order, name_cmp);
    sort_prof = NULL;
    for (uint32_t i = 0; i < n; i++)
        t->rank[order[i]] = i;
    em_free(order);
    return EMBER_OK;
}

static uint64_t node_weight(const em_ctree *t, const em_cnode *c)
{
    uint64_t a = em_abs64(c->total), b = em_abs64(c->base_total);
    return t->p->diff && b > a ? b : a;
}

static int kid_cmp_total(const void *x, const void *y)
{
    const em_cnode *a = &sort_tree->nodes[*(const uint32_t *)x];
    const em_cnode *b = &sort_tree->nodes[*(const uint32_t *)y];
    uint64_t wa = node_weight(sort_tree, a), wb = node_weight(sort_tree, b);

    if (wa != wb)
        return wa > wb ? -1 : 1;
    return (sort_tree->rank[a->fn] > sort_tree->rank[b->fn]) -
           (sort_tree->rank[a->fn] < sort_tree->rank[b->fn]);
}

static int kid_cmp_name(const void *x, const void *y)
{
    const em_cnode *a = &sort_tree->nodes[*(const uint32_t *)x];
    const em_cnode *b = &sort_tree->nodes[*(const uint32_t *)y];

    return (sort_tree->rank[a->fn] > sort_tree->rank[b->fn]) -
           (sort_tree->rank[a->fn] < sort_tree->rank[b->fn]);
}

/* Groups the nodes but the root by parent into kids (a counting sort),
** then orders each group. Siblings have distinct names, so the orders are
** total. */
static int kids_order(em_ctree *t, int order)
{
    size_t n = t->n - 1, at = 0;

    t->kids = em_malloc((n == 0 ? 1 : n) * sizeof *t->kids);
    if (t->kids == NULL)
        return em_err(EMBER_ENOMEM, "call tree: %zu children", n);
    for (size_t i = 1; i < t->n; i++)
        t->nodes[t->nodes[i].parent].nkids++;
    for (size_t i = 0; i < t->n; i++) {
        t->nodes[i].first_kid = (uint32_t)at;
        at += t->nodes[i].nkids;
        t->nodes[i].nkids = 0;
    }
    for (size_t i = 1; i < t->n; i++) {
        em_cnode *parent = &t->nodes[t->nodes[i].parent];
        t->kids[parent->first_kid + parent->nkids++] = (uint32_t)i;
    }
    sort_tree = t;
    for (size_t i = 0; i < t->n; i++)
        if (t->nodes[i].nkids > 1)
            qsort(t->kids + t->nodes[i].first_kid, t->nodes[i].nkids,
                  sizeof *t->kids,
                  order == EM_CTREE_BY_NAME ? kid_cmp_name : kid_cmp_total);
    sort_tree = NULL;
    return EMBER_OK;
}

int em_ctree_build(em_ctree *t, const em_rprofile *p, int order)
{
    int rc;

    memset(t, 0, sizeof *t);
    t->p = p;
    if ((rc = nodes_build(t)) == EMBER_OK &&
        (rc = names_rank(t)) == EMBER_OK)
        rc = kids_order(t, order);
    return rc;
}

void em_ctree_free(em_ctree *t)
{
    if (t == NULL)
        return;
    em_free(t->nodes);
    em_free(t->kids);
    em_free(t->rank);
    memset(t, 0, sizeof *t);
}

const char *em_ctree_name(const em_ctree *t, size_t i)
{
    return i == 0 ? "root" : em_strtab_get(&t->p->names, t->nodes[i].fn);
}

/* ---- the tree renderer ------------------------------------------------------------ */

typedef struct tree_print {
    const em_ctree *t;
    const em_render_opts *o;
    const char *unit, *out_unit;
    int64_t total;              /* sum of |value| (diff: the larger side) */
    int64_t pct_total;          /* cum%'s base: total, or p->whole */
    uint64_t cut;               /* nodes weighing less are dropped */
    uint32_t *stack;            /* depth-first walk */
    size_t nstack;
} tree_print;

/* Sum of |value| and of |base| over the stacks: percentages' base. */
static int64_t profile_total(const em_rprofile *p)
{
    uint64_t v = 0, b = 0;

    for (size_t i = 0; i < p->nstacks; i++) {
        v += em_abs64(p->stacks[i].value);
        b += em_abs64(p->stacks[i].base);
    }
    v = p->diff && b > v ? b : v;
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Walks the kept nodes depth first; VISIT (may be NULL) sees each in
** order. Returns how many there are. */
static size_t tree_walk(tree_print *pr, size_t limit,
                        void (*visit)(void *, tree_print *, uint32_t),
                        void *ctx)
{
    const em_ctree *t = pr->t;
    size_t seen = 0;

    pr->nstack = 0;
    for (uint32_t k = t->nodes[0].nkids; k-- > 0;)
        pr->stack[pr->nstack++] = t->kids[t->nodes[0].first_kid + k];
    while (pr->nstack > 0) {
        uint32_t ix = pr->stack[--pr->nstack];
        const em_cnode *c = &t->nodes[ix];
        if (node_weight(t, c) < pr->cut)
            continue;               /* children weigh less: skip them too */
        if (visit != NULL && (limit == 0 || seen < limit))
            visit(ctx, pr, ix);
        seen++;
        for (uint32_t k = c->nkids; k-- > 0;)
            pr->stack[pr->nstack++] = t->kids[c->first_kid + k];
    }
    return seen;
}

static void row_visit(void *ctx, tree_print *pr, uint32_t ix)
{
    FILE *f = ctx;
    const em_cnode *c = &pr->t->nodes[ix];
    char a[EM_VALUE_MAX], b[EM_VALUE_MAX], d[EM_VALUE_MAX], pct[24];
    int64_t change = em_sub_wrap(c->total, c->base_total);
    const char *on = "", *off = "";
    int indent = (int)((c->depth - 1) * TREE_INDENT);

    if (!pr->t->p->diff) {
        fprintf(f, "%10s %s %10s  %*s",
                em_format_value_as(c->total, pr->unit, pr->out_unit, a),
                em_format_percent(c->total, pr->pct_total, pct),
                em_format_value_as(c->self, pr->unit, pr->out_unit, b),
                indent, "");
    } else {
        if (pr->o->color && change != 0) {
            on = change > 0 ? EM_SGR_RED : EM_SGR_GREEN;
            off = EM_SGR_RESET;
        }
        fprintf(f, "%10s %10s %s%10s %8s%s  %*s",
                em_format_value_as(c->base_total, pr->unit, pr->out_unit, a),
                em_format_value_as(c->total, pr->unit, pr->out_unit, b), on,
                em_render_signed(change, pr->unit, pr->out_unit, d),
                em_render_change_pct(change, c->base_total, pct), off, indent,
                "");
    }
    em_render_name(f, em_ctree_name(pr->t, ix));
    fputc('\n', f);
}

static void tree_header(FILE *f, const tree_print *pr, size_t kept,
                        size_t shown)
{
    const em_cnode *root = &pr->t->nodes[0];
    char a[EM_VALUE_MAX], b[EM_VALUE_MAX], c[EM_VALUE_MAX], pct[24];

    if (pr->t->p->sample_type[0] != '\0')
        fprintf(f, "Type: %s\n", pr->t->p->sample_type);
    if (pr->t->p->diff)
        fprintf(f, "Total: base %s, target %s, change %s (%s)\n",
                em_format_value_as(root->base_total, pr->unit, pr->out_unit,
                                   a),
                em_format_value_as(root->total, pr->unit, pr->out_unit, b),
                em_render_signed(em_sub_wrap(root->total, root->base_total),
                                 pr->unit, pr->out_unit, c),
                em_render_change_pct(em_sub_wrap(root->total,
                                                 root->base_total),
                                     root->base_total, pct));
    else if (pr->pct_total != pr->total)
        fprintf(f, "Total: %s of %s\n",
                em_format_value_as(root->total, pr->unit, pr->out_unit, a),
                em_format_value_as(pr->pct_total, pr->unit, pr->out_unit, b));
    else
        fprintf(f, "Total: %s\n",
                em_format_value_as(root->total, pr->unit, pr->out_unit, a));
    if (kept + 1 < pr->t->n)
        fprintf(f, "Dropped %zu nodes (cum < %s)\n", pr->t->n - 1 - kept,
                em_format_value_as((int64_t)pr->cut, pr->unit, pr->out_unit,
                                   a));
    if (shown < kept)
        fprintf(f, "Showing %zu of %zu rows\n", shown, kept);
    if (pr->t->p->diff)
        fprintf(f, "%10s %10s %10s %8s  %s\n", "base", "target", "change",
                "change%", "function");
    else
        fprintf(f, "%10s %6s %10s  %s\n", "cum", "cum%", "flat", "function");
}

static uint64_t tree_cut(int64_t total)
{
    double c = (double)total * TREE_NODE_FRACTION;
    return c >= 1.8e19 ? UINT64_MAX : (uint64_t)c;
}

int em_render_tree(FILE *f, const em_rprofile *p, const em_render_opts *o,
                   size_t limit)
{
    tree_print pr = { .o = o, .unit = p->unit };
    size_t kept, shown;
    em_ctree t;
    int rc = em_ctree_build(&t, p, EM_CTREE_BY_TOTAL);

    pr.t = &t;
    pr.total = profile_total(p);
    pr.pct_total = p->has_whole && !o->relative && !p->diff ? p->whole :
                   pr.total;
    pr.cut = tree_cut(pr.total);    /* pprof's cutoff: of what is shown */
    if (rc == EMBER_OK && (pr.stack = em_malloc(t.n * sizeof *pr.stack)) ==
        NULL)
        rc = em_err(EMBER_ENOMEM, "tree: %zu nodes", t.n);
    if (rc != EMBER_OK)
        goto out;
    kept = tree_walk(&pr, 0, NULL, NULL);
    shown = limit != 0 && limit < kept ? limit : kept;
    /* each value scaled on its own: a tree spans many magnitudes */
    pr.out_unit = o->unit != NULL && strcmp(o->unit, "minimum") != 0 ?
                  o->unit : "auto";
    tree_header(f, &pr, kept, shown);
    tree_walk(&pr, limit, row_visit, f);
    if (ferror(f))
        rc = em_err(EMBER_EIO, "tree: write failed");
out:
    em_free(pr.stack);
    em_ctree_free(&t);
    return rc;
}
