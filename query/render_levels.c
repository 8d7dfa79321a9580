/*
** query/render_levels.c: a profile as Pyroscope's flame graph "levels",
** the shape its querier answers and Grafana's flame graph panel draws
** (docs/protocol.md, SelectMergeStacktraces):
**
**   names   distinct function names, "total" first (the root)
**   levels  one array per depth, root first; each node four integers:
**           x offset (from the end of the node before it in the level, or
**           from 0), total, self, index into names
**
** Nodes are laid out as the flame renderer lays them out: children at
** their parent's left edge, in bytewise order of name (em_ctree's
** EM_CTREE_BY_NAME). With MAX_NODES (> 0), the nodes whose total is below
** the MAX_NODES-th largest are cut, and what they held goes to one node
** "other" at the end of their parent's children, as Pyroscope truncates.
**
** A diff's levels (Pyroscope's FlameGraphDiff, for its Diff call) carry
** both sides in one tree: seven integers a node, base x offset, total and
** self, then target x offset, total and self, then the name's index; each
** side's offsets count from the end of that side's node before.
*/
#include <stdlib.h>

#include "query/render_int.h"

typedef struct lv_build {
    const em_ctree *t;
    em_levels *out;
    int64_t min_total;          /* nodes below it are cut */
    uint32_t *name_ix;          /* name id -> index in out->names, + 1 */
    uint32_t other_ix;          /* index of "other" + 1; 0: none yet */
    size_t *level_cap;          /* per level */
    size_t cap_levels;
} lv_build;

static int name_add(lv_build *b, const char *name, uint32_t *ix)
{
    em_levels *o = b->out;
    const char **v = em_grow(o->names, &o->cap_names, o->nnames + 1,
                             sizeof *v);

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "levels: %zu names", o->nnames + 1);
    o->names = v;
    v[o->nnames] = name;
    *ix = (uint32_t)o->nnames++;
    return EMBER_OK;
}

/* The names index of node I's function; the root is "total", index 0. */
static int node_name(lv_build *b, uint32_t i, uint32_t *ix)
{
    uint32_t fn = b->t->nodes[i].fn;
    int rc;

    if (i == 0) {
        *ix = 0;
        return EMBER_OK;
    }
    if (b->name_ix[fn] != 0) {
        *ix = b->name_ix[fn] - 1;
        return EMBER_OK;
    }
    if ((rc = name_add(b, em_ctree_name(b->t, i), ix)) == EMBER_OK)
        b->name_ix[fn] = *ix + 1;
    return rc;
}

/* A node's numbers: target (or the profile's) and a diff's base. */
typedef struct lv_node {
    int64_t x, total, self;
    int64_t xb, base_total, base_self;
    uint32_t name;
} lv_node;

/* Level DEPTH, made if it is not there yet. */
static em_level *level_at(lv_build *b, size_t depth)
{
    em_levels *o = b->out;

    if (depth >= o->nlevels) {
        em_level *v = em_grow(o->levels, &b->cap_levels, depth + 1,
                              sizeof *v);
        size_t *c = v != NULL ? em_realloc(b->level_cap,
                                           b->cap_levels * sizeof *c) : NULL;
        if (v != NULL)
            o->levels = v;
        if (c == NULL) {
            em_err(EMBER_ENOMEM, "levels: %zu levels", depth + 1);
            return NULL;
        }
        b->level_cap = c;
        for (; o->nlevels <= depth; o->nlevels++) {
            o->levels[o->nlevels] = (em_level){ 0 };
            c[o->nlevels] = 0;
        }
    }
    return &o->levels[depth];
}

/* Appends node N's four numbers (a diff's seven) to level DEPTH. */
static int level_put(lv_build *b, size_t depth, const lv_node *n)
{
    em_levels *o = b->out;
    em_level *l = level_at(b, depth);
    size_t w = o->diff ? 7 : 4;
    int64_t *v;

    if (l == NULL)
        return EMBER_ENOMEM;
    if ((l->values = em_grow(l->values, &b->level_cap[depth], l->n + w,
                             sizeof *l->values)) == NULL)
        return em_err(EMBER_ENOMEM, "levels: level %zu", depth);
    v = l->values + l->n;
    l->n += w;
    if (o->diff) {
        *v++ = n->xb - l->end_base;     /* the offset from the last end */
        *v++ = n->base_total;
        *v++ = n->base_self;
        l->end_base = n->xb + n->base_total;
    }
    *v++ = n->x - l->end;
    *v++ = n->total;
    *v++ = n->self;
    *v = n->name;
    l->end = n->x + n->total;
    if (n->self > o->max_self)
        o->max_self = n->self;
    if (n->base_self > o->max_self)
        o->max_self = n->base_self;
    return EMBER_OK;
}

/* A node being laid out: its children left to right, from KX (a diff's
** base side from KXB). */
typedef struct lv_frame {
    uint32_t node, next_kid;
    int64_t kx, other;          /* the next child's x; cut children's sum */
    int64_t kxb, other_base;
} lv_frame;

/* Emits node I at X (base XB) and makes it the top of the walk. */
static int node_open(lv_build *b, lv_frame **st, size_t *n, size_t *cap,
                     uint32_t i, int64_t x, int64_t xb)
{
    const em_cnode *c = &b->t->nodes[i];
    lv_frame *v = em_grow(*st, cap, *n + 1, sizeof *v);
    lv_node ln = { x, c->total, i == 0 ? 0 : c->self,
                   xb, c->base_total, i == 0 ? 0 : c->base_self, 0 };
    int rc;

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "levels: depth %zu", *n + 1);
    *st = v;
    v[(*n)++] = (lv_frame){ i, 0, x, 0, xb, 0 };
    if ((rc = node_name(b, i, &ln.name)) != EMBER_OK)
        return rc;          /* the root's self (empty stacks) is not shown */
    return level_put(b, c->depth, &ln);
}

/* Closes the top node: what its cut children held becomes "other". */
static int node_close(lv_build *b, const lv_frame *f)
{
    lv_node ln = { f->kx, f->other, f->other,
                   f->kxb, f->other_base, f->other_base, 0 };
    int rc = EMBER_OK;

    if (f->other == 0 && f->other_base == 0)
        return EMBER_OK;
    if (b->other_ix == 0 && (rc = name_add(b, "other", &ln.name)) ==
        EMBER_OK)
        b->other_ix = ln.name + 1;
    ln.name = b->other_ix - 1;
    return rc != EMBER_OK ? rc
         : level_put(b, b->t->nodes[f->node].depth + 1, &ln);
}

/* What a node weighs against MAX_NODES: a diff's larger side. */
static int64_t node_weight(const em_cnode *c, bool diff)
{
    return diff && c->base_total > c->total ? c->base_total : c->total;
}

/* The whole tree, depth first with a stack of our own: a profile's depth
** (up to EM_MAX_STACK_DEPTH frames) never becomes C stack depth. */
static int tree_put(lv_build *b)
{
    lv_frame *st = NULL;
    size_t n = 0, cap = 0;
    int rc = node_open(b, &st, &n, &cap, 0, 0, 0);

    while (rc == EMBER_OK && n > 0) {
        lv_frame *f = &st[n - 1];
        const em_cnode *p = &b->t->nodes[f->node], *kid;
        uint32_t c;
        if (f->next_kid == p->nkids) {
            rc = node_close(b, f);
            n--;
            continue;
        }
        c = b->t->kids[p->first_kid + f->next_kid++];
        kid = &b->t->nodes[c];
        if (node_weight(kid, b->out->diff) < b->min_total) {
            f->other += kid->total;
            f->other_base += kid->base_total;
            continue;
        }
        f->kx += kid->total;
        f->kxb += kid->base_total;
        rc = node_open(b, &st, &n, &cap, c, f->kx - kid->total,
                       f->kxb - kid->base_total);
    }
    em_free(st);
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* The total of the MAX-th largest node: below it a node is cut. */
static int min_total(const em_ctree *t, int64_t max, bool diff,
                     int64_t *out)
{
    int64_t *tot;

    *out = INT64_MIN;
    if (max <= 0 || (size_t)max >= t->n)
        return EMBER_OK;
    if ((tot = em_malloc(t->n * sizeof *tot)) == NULL)
        return em_err(EMBER_ENOMEM, "levels: %zu nodes", t->n);
    for (size_t i = 0; i < t->n; i++)
        tot[i] = node_weight(&t->nodes[i], diff);
    qsort(tot, t->n, sizeof *tot, cmp_desc);
    *out = tot[max - 1];
    em_free(tot);
    return EMBER_OK;
}

int em_levels_build(const em_rprofile *p, int64_t max_nodes, em_levels *out)
{
    em_ctree t;
    lv_build b = { .t = &t, .out = out };
    uint32_t root;
    int rc;

    memset(out, 0, sizeof *out);
    out->diff = p->diff;
    rc = em_ctree_build(&t, p, EM_CTREE_BY_NAME);
    if (rc == EMBER_OK && (b.name_ix = em_calloc(p->names.count + 1,
                                                 sizeof *b.name_ix)) == NULL)
        rc = em_err(EMBER_ENOMEM, "levels: %u names", p->names.count);
    if (rc == EMBER_OK)
        rc = min_total(&t, max_nodes, p->diff, &b.min_total);
    if (rc == EMBER_OK)
        rc = name_add(&b, "total", &root);
    if (rc == EMBER_OK && t.n > 0)
        rc = tree_put(&b);
    out->target_total = t.n > 0 ? t.nodes[0].total : 0;
    out->base_total = t.n > 0 ? t.nodes[0].base_total : 0;
    out->total = out->target_total + out->base_total;
    em_free(b.name_ix);
    em_free(b.level_cap);
    em_ctree_free(&t);
    if (rc != EMBER_OK)
        em_levels_free(out);
    return rc;
}

void em_levels_free(em_levels *l)
{
    for (size_t i = 0; i < l->nlevels; i++)
        em_free(l->levels[i].values);
    em_free(l->levels);
    em_free(l->names);
    memset(l, 0, sizeof *l);
}
