/*
** query/render_json.c: `-o json`, one JSON document per result, the shape
** a web front-end wants (docs/output-formats.md has the schema):
**
**   profile/diff  {"kind":"profile"|"diff","query":..,"type":..,"unit":..,
**                  "from_ms":..,"to_ms":..,"groups":[GROUP,...]}
**     GROUP       {"labels":{..},"series":N,"profiles":N,"total":N,
**                  ["base_total":N,] "root":NODE}
**     NODE        {"name":"main","value":TOTAL,"self":SELF,
**                  [diff: "base":B,"base_self":BS,"delta":TOTAL-B,]
**                  ["children":[NODE,...]]}
**   series        {"kind":"series",..,"step_ms":..,"series":[
**                  {"labels":{..},"points":[[t_ms,v],...]},...]}
**   table         {"kind":"table","column":"label","rows":["a",...]}
**
** And a profile or a diff as the flame graph "levels" of
** query/render_levels.c (em_render_levels_json; the server's
** format=levels, the compact shape the web page draws on a canvas):
**
**   {"kind":"profile"|"diff","type":T,"unit":U,"sample_type":S,"total":N,
**    "whole":N,"max_self":N,["base_total":N,"target_total":N,]
**    "names":["total",...],"levels":[[x,total,self,name, ...],...]}
**
** one array per depth, root first, four integers a node (x from the end of
** the node before it in the level), seven for a diff (base x, total, self,
** then target x, total, self, then the name). "whole" is the total before
** focus or ignore (the denominator of percentages, as pprof's).
**
** A profile is its call tree (em_ctree), not a list of stacks: shared
** prefixes are written once, and the node shape ({name, value, children},
** value inclusive) is what d3-flame-graph loads as is; its differential
** mode reads "delta". Children are ordered by |value| descending, then
** name, and "children" is left out of leaves. Numbers: sample values are
** integers; series values are the shortest decimal that reads back to the
** same double, null for NaN and infinities.
**
** Strings are valid JSON whatever the bytes: '"', '\' and control
** characters are escaped (\n, \t, \r, \b, \f, others as \u00XX), valid
** UTF-8 passes through, and a byte that is not part of valid UTF-8 becomes
** U+FFFD. Each group, series or row sits on its own line, so that
** line-oriented tools and diffs of golden files stay readable.
**
** The tree is written depth first with an explicit stack, so stack depth
** in C never follows stack depth in the profile, through a buffer of its
** own (stdio's per-call cost would dominate on millions of nodes).
*/
#include <inttypes.h>
#include <stdio.h>

#include "query/render_int.h"

/* ---- a buffered writer ---------------------------------------------------------- */

/* Output goes through a 64 KiB buffer: a profile's tree is millions of
** small pieces, and stdio's per-call locking would dominate. */
#define JW_CAP 65536

typedef struct jw {
    FILE *f;
    size_t len;
    char buf[JW_CAP];
} jw;

static void jw_flush(jw *w)
{
    if (w->len > 0)
        fwrite(w->buf, 1, w->len, w->f);
    w->len = 0;
}

static void jw_put(jw *w, const char *s, size_t n)
{
    if (w->len + n > JW_CAP)
        jw_flush(w);
    if (n > JW_CAP) {
        fwrite(s, 1, n, w->f);
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void jw_str(jw *w, const char *s)
{
    jw_put(w, s, strlen(s));
}

static void jw_i64(jw *w, int64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = em_abs64(v);

    do
        *--p = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        *--p = '-';
    jw_put(w, p, (size_t)(tmp + sizeof tmp - p));
}

static void jw_u64(jw *w, uint64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;

    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    jw_put(w, p, (size_t)(tmp + sizeof tmp - p));
}

/* ---- strings ----------------------------------------------------------------------- */

static void jw_put_fn(void *ctx, const char *s, size_t n)
{
    jw_put(ctx, s, n);
}

static void jw_string(jw *w, const char *str)
{
    em_json_string(str, jw_put_fn, w);
}

static void jw_labels(jw *w, const ember_label *labels, size_t n)
{
    jw_put(w, "{", 1);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            jw_put(w, ",", 1);
        jw_string(w, labels[i].name);
        jw_put(w, ":", 1);
        jw_string(w, labels[i].value);
    }
    jw_put(w, "}", 1);
}

static void jw_number(jw *w, double v)
{
    char buf[40];

    em_render_number(v, buf);
    jw_str(w, buf[0] != '\0' ? buf : "null");
}

/* {"kind":K,"query":..,"type":..,"unit":..,"from_ms":..,"to_ms":.. */
static void json_head(jw *w, const ember_result *r, const char *kind,
                      const em_render_opts *o)
{
    jw_str(w, "{\"kind\":\"");
    jw_str(w, kind);
    jw_str(w, "\",\"query\":");
    if (o->query != NULL)
        jw_string(w, o->query);
    else
        jw_str(w, "null");
    jw_str(w, ",\"type\":");
    if (r->type != NULL)
        jw_string(w, r->type);
    else
        jw_str(w, "null");
    jw_str(w, ",\"unit\":");
    jw_string(w, r->unit != NULL ? r->unit : "count");
    jw_str(w, ",\"from_ms\":");
    jw_i64(w, r->from_ms);
    jw_str(w, ",\"to_ms\":");
    jw_i64(w, r->to_ms);
}

/* ---- profiles ------------------------------------------------------------------------- */

static void jw_field(jw *w, const char *name, int64_t v)
{
    jw_str(w, name);
    jw_i64(w, v);
}

/* Opens node IX: its fields, and "children":[ when it has any. */
static void node_open(jw *w, const em_ctree *t, uint32_t ix)
{
    const em_cnode *c = &t->nodes[ix];

    jw_str(w, "{\"name\":");
    jw_string(w, em_ctree_name(t, ix));
    jw_field(w, ",\"value\":", c->total);
    jw_field(w, ",\"self\":", c->self);
    if (t->p->diff) {
        jw_field(w, ",\"base\":", c->base_total);
        jw_field(w, ",\"base_self\":", c->base_self);
        jw_field(w, ",\"delta\":", em_sub_wrap(c->total, c->base_total));
    }
    if (c->nkids > 0)
        jw_str(w, ",\"children\":[");
}

/* Writes the tree depth first; STACK holds (node, next child) pairs. */
static void tree_write(jw *w, const em_ctree *t, uint32_t *stack)
{
    size_t n = 0;

    node_open(w, t, 0);
    stack[n++] = 0;
    stack[n++] = 0;
    while (n > 0) {
        const em_cnode *c = &t->nodes[stack[n - 2]];
        uint32_t k = stack[n - 1];
        if (k < c->nkids) {
            uint32_t kid = t->kids[c->first_kid + k];
            stack[n - 1] = k + 1;
            if (k > 0)
                jw_put(w, ",", 1);
            node_open(w, t, kid);
            if (t->nodes[kid].nkids > 0) {
                stack[n++] = kid;
                stack[n++] = 0;
            } else {
                jw_put(w, "}", 1);
            }
            continue;
        }
        jw_str(w, c->nkids > 0 ? "]}" : "}");
        n -= 2;
    }
}

static void group_open(jw *w, const em_pgroup *g)
{
    jw_str(w, "{\"labels\":");
    jw_labels(w, g->labels, g->nlabels);
    jw_str(w, ",\"series\":");
    jw_u64(w, g->nseries);
    jw_str(w, ",\"profiles\":");
    jw_u64(w, g->nprofiles);
}

/* A group of a view (peek): its total, the total its percentages are
** of, and the view's members in place of the tree. */
static int view_write(jw *w, const ember_result *r, const em_pgroup *g,
                      const em_render_opts *o)
{
    int64_t total = 0;
    int rc;

    for (size_t i = 0; i < g->prof.nstacks; i++)
        total = em_add_wrap(total, g->prof.stacks[i].value);
    group_open(w, g);
    jw_field(w, ",\"total\":", total);
    jw_field(w, ",\"whole\":", em_graph_total(&g->prof, o->relative));
    jw_put(w, ",", 1);
    jw_flush(w);
    rc = em_render_view_json(w->f, r, g, o);
    jw_put(w, "}", 1);
    return rc;
}

static int group_write(jw *w, const ember_result *r, const em_pgroup *g,
                       const em_render_opts *o)
{
    const em_rprofile *p = &g->prof;
    uint32_t *stack = NULL;
    em_ctree t;
    int rc;

    if (r->view != EM_VIEW_NONE)
        return view_write(w, r, g, o);
    rc = em_ctree_build(&t, p, EM_CTREE_BY_TOTAL);

    if (rc == EMBER_OK &&
        (stack = em_malloc(2 * (t.n + 1) * sizeof *stack)) == NULL)
        rc = em_err(EMBER_ENOMEM, "json: %zu nodes", t.n);
    if (rc == EMBER_OK) {
        group_open(w, g);
        jw_field(w, ",\"total\":", t.nodes[0].total);
        if (p->diff)
            jw_field(w, ",\"base_total\":", t.nodes[0].base_total);
        jw_str(w, ",\"root\":");
        tree_write(w, &t, stack);
        jw_put(w, "}", 1);
    }
    em_free(stack);
    em_ctree_free(&t);
    return rc;
}

static int json_profiles(jw *w, const ember_result *r,
                         const em_render_opts *o)
{
    int rc = EMBER_OK;

    json_head(w, r, r->kind == EMBER_RESULT_DIFF ? "diff" : "profile", o);
    if (r->view != EM_VIEW_NONE) {
        jw_str(w, ",\"view\":\"");
        jw_str(w, em_render_view_name(r->view));
        jw_str(w, "\",\"regex\":");
        jw_string(w, r->view_re);
    }
    jw_str(w, ",\"groups\":[");
    for (size_t g = 0; rc == EMBER_OK && g < r->ngroups; g++) {
        jw_str(w, g > 0 ? ",\n" : "\n");
        rc = group_write(w, r, &r->groups[g], o);
    }
    jw_str(w, r->ngroups > 0 ? "\n]}\n" : "]}\n");
    return rc;
}

/* ---- series and tables ------------------------------------------------------------------ */

static void json_series(jw *w, const ember_result *r,
                        const em_render_opts *o)
{
    json_head(w, r, "series", o);
    jw_field(w, ",\"step_ms\":", r->step_ms);
    jw_str(w, ",\"series\":[");
    for (size_t i = 0; i < r->nseries; i++) {
        const em_series *s = &r->series[i];
        jw_str(w, i > 0 ? ",\n{\"labels\":" : "\n{\"labels\":");
        jw_labels(w, s->labels, s->nlabels);
        jw_str(w, ",\"points\":[");
        for (size_t k = 0; k < s->n; k++) {
            jw_str(w, k > 0 ? ",[" : "[");
            jw_i64(w, s->times[k]);
            jw_put(w, ",", 1);
            jw_number(w, s->values[k]);
            jw_put(w, "]", 1);
        }
        jw_str(w, "]}");
    }
    jw_str(w, r->nseries > 0 ? "\n]}\n" : "]}\n");
}

static void json_table(jw *w, const ember_result *r)
{
    jw_str(w, "{\"kind\":\"table\",\"column\":");
    jw_string(w, r->column != NULL ? r->column : "value");
    jw_str(w, ",\"rows\":[");
    for (size_t i = 0; i < r->nrows; i++) {
        jw_str(w, i > 0 ? ",\n" : "\n");
        jw_string(w, r->rows[i]);
    }
    jw_str(w, r->nrows > 0 ? "\n]}\n" : "]}\n");
}

int em_render_json(FILE *f, const ember_result *r, const em_render_opts *o)
{
    jw *w = em_malloc(sizeof *w);
    int rc = EMBER_OK;

    if (w == NULL)
        return em_err(EMBER_ENOMEM, "json: output buffer");
    w->f = f;
    w->len = 0;
    if (r->kind == EMBER_RESULT_PROFILE || r->kind == EMBER_RESULT_DIFF)
        rc = json_profiles(w, r, o);
    else if (r->kind == EMBER_RESULT_SERIES)
        json_series(w, r, o);
    else
        json_table(w, r);
    jw_flush(w);
    em_free(w);
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "json: write failed");
    return rc;
}

/* ---- flame graph levels (the page's format=levels) ------------------------------ */

/* ,"KEY":V and ,"KEY":"V" (null for NULL) */
static void lv_field(jw *w, const char *key, int64_t v)
{
    jw_str(w, ",\"");
    jw_str(w, key);
    jw_str(w, "\":");
    jw_i64(w, v);
}

static void lv_field_str(jw *w, const char *key, const char *v)
{
    jw_str(w, ",\"");
    jw_str(w, key);
    jw_str(w, "\":");
    if (v == NULL)
        jw_str(w, "null");
    else
        jw_string(w, v);
}

static void levels_head(jw *w, const ember_result *r, const em_rprofile *p,
                        const em_levels *lv)
{
    jw_str(w, lv->diff ? "{\"kind\":\"diff\"" : "{\"kind\":\"profile\"");
    lv_field_str(w, "type", r->type);
    lv_field_str(w, "unit", p->unit);
    lv_field_str(w, "sample_type", p->sample_type);
    lv_field(w, "total", lv->diff ? lv->target_total : lv->total);
    lv_field(w, "whole", p->has_whole ? p->whole
             : lv->diff ? lv->target_total : lv->total);
    if (lv->diff) {
        lv_field(w, "base_total", lv->base_total);
        lv_field(w, "target_total", lv->target_total);
    }
    lv_field(w, "max_self", lv->max_self);
}

static void levels_body(jw *w, const em_levels *lv)
{
    jw_str(w, ",\n\"names\":[");
    for (size_t i = 0; i < lv->nnames; i++) {
        if (i > 0)
            jw_put(w, ",", 1);
        jw_string(w, lv->names[i]);
    }
    jw_str(w, "],\n\"levels\":[");
    for (size_t d = 0; d < lv->nlevels; d++) {
        const em_level *l = &lv->levels[d];
        jw_str(w, d > 0 ? ",\n[" : "\n[");
        for (size_t i = 0; i < l->n; i++) {
            if (i > 0)
                jw_put(w, ",", 1);
            jw_i64(w, l->values[i]);
        }
        jw_put(w, "]", 1);
    }
    jw_str(w, "]}\n");
}

int em_render_levels_fits(const ember_result *r)
{
    if (r->kind != EMBER_RESULT_PROFILE && r->kind != EMBER_RESULT_DIFF)
        return em_err(EMBER_EINVAL, "format=levels renders profiles and "
                      "diffs, not this query's %s result",
                      r->kind == EMBER_RESULT_SERIES ? "series" : "table");
    if (r->ngroups > 1)
        return em_err(EMBER_EINVAL, "format=levels holds one profile but "
                      "the result has %zu groups: drop the `by` grouping",
                      r->ngroups);
    return EMBER_OK;
}

int em_render_levels_json(FILE *f, const ember_result *r, int64_t max_nodes)
{
    em_rprofile empty = { 0 };
    const em_rprofile *p = &empty;
    em_levels lv;
    jw *w;
    int rc;

    if ((rc = em_render_levels_fits(r)) != EMBER_OK)
        return rc;
    if (r->ngroups == 1)
        p = &r->groups[0].prof;
    else if ((rc = em_rprofile_init(&empty, r->type)) != EMBER_OK)
        return rc;
    empty.diff = r->kind == EMBER_RESULT_DIFF;
    if ((w = em_malloc(sizeof *w)) == NULL) {
        em_rprofile_free(&empty);
        return em_err(EMBER_ENOMEM, "format=levels: a write buffer");
    }
    w->f = f;
    w->len = 0;
    rc = em_levels_build(p, max_nodes, &lv);
    if (rc == EMBER_OK) {
        levels_head(w, r, p, &lv);
        levels_body(w, &lv);
        jw_flush(w);
        em_levels_free(&lv);
    }
    em_free(w);
    em_rprofile_free(&empty);
    return rc == EMBER_OK && ferror(f) ? em_err(EMBER_EIO, "format=levels: "
                                                "write failed") : rc;
}
