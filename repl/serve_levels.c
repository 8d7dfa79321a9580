/*
** repl/serve_levels.c: /api/v1/query?format=levels, a profile or a diff as
** the flame graph "levels" of query/render_levels.c written as JSON: the
** compact shape the web page (web/flame.js) draws on a canvas, and the one
** Pyroscope's querier answers in protobuf (docs/protocol.md):
**
**   {"kind":"profile","type":T,"unit":U,"sample_type":S,"total":N,
**    "whole":N,"max_self":N,"names":["total",...],
**    "levels":[[x,total,self,name, ...],...]}
**
** one array per depth, root first, four integers a node (x from the end of
** the node before it in the level); a diff ("kind":"diff") has seven a node
** (base x, total, self, then target x, total, self, then the name) and
** "base_total", "target_total". "whole" is the total before focus or ignore
** (the denominator of percentages, as pprof's), else "total".
**
** A server format, not an `ember query -o` one: only the page asks for it,
** and its numbers are those of em_levels_build, which the querier already
** serves. One group at most, as svg and pprof.
*/
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "query/query.h"
#include "repl/serve.h"

/* Numbers go through a buffer of their own: a 100,000-node graph is
** 400,000 integers, and fprintf's per-call cost would dominate. */
typedef struct lw {
    FILE *f;
    size_t len;
    char buf[1 << 15];
} lw;

static void lw_flush(lw *w)
{
    if (w->len > 0)
        fwrite(w->buf, 1, w->len, w->f);
    w->len = 0;
}

static void lw_put(void *ctx, const char *s, size_t n)
{
    lw *w = ctx;

    if (w->len + n > sizeof w->buf)
        lw_flush(w);
    if (n > sizeof w->buf) {
        fwrite(s, 1, n, w->f);
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void lw_str(lw *w, const char *s)
{
    lw_put(w, s, strlen(s));
}

static void lw_i64(lw *w, int64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

    do
        *--p = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        *--p = '-';
    lw_put(w, p, (size_t)(tmp + sizeof tmp - p));
}

/* ,"KEY":V */
static void lw_field(lw *w, const char *key, int64_t v)
{
    lw_str(w, ",\"");
    lw_str(w, key);
    lw_str(w, "\":");
    lw_i64(w, v);
}

static void lw_field_str(lw *w, const char *key, const char *v)
{
    lw_str(w, ",\"");
    lw_str(w, key);
    lw_str(w, "\":");
    if (v == NULL)
        lw_str(w, "null");
    else
        em_json_string(v, lw_put, w);
}

static void levels_head(lw *w, const ember_result *r, const em_rprofile *p,
                        const em_levels *lv)
{
    lw_str(w, lv->diff ? "{\"kind\":\"diff\"" : "{\"kind\":\"profile\"");
    lw_field_str(w, "type", r->type);
    lw_field_str(w, "unit", p->unit);
    lw_field_str(w, "sample_type", p->sample_type);
    lw_field(w, "total", lv->diff ? lv->target_total : lv->total);
    lw_field(w, "whole", p->has_whole ? p->whole
             : lv->diff ? lv->target_total : lv->total);
    if (lv->diff) {
        lw_field(w, "base_total", lv->base_total);
        lw_field(w, "target_total", lv->target_total);
    }
    lw_field(w, "max_self", lv->max_self);
}

static void levels_body(lw *w, const em_levels *lv)
{
    lw_str(w, ",\n\"names\":[");
    for (size_t i = 0; i < lv->nnames; i++) {
        if (i > 0)
            lw_put(w, ",", 1);
        em_json_string(lv->names[i], lw_put, w);
    }
    lw_str(w, "],\n\"levels\":[");
    for (size_t d = 0; d < lv->nlevels; d++) {
        const em_level *l = &lv->levels[d];
        lw_str(w, d > 0 ? ",\n[" : "\n[");
        for (size_t i = 0; i < l->n; i++) {
            if (i > 0)
                lw_put(w, ",", 1);
            lw_i64(w, l->values[i]);
        }
        lw_put(w, "]", 1);
    }
    lw_str(w, "]}\n");
}

int em_serve_levels_fits(const ember_result *r)
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

int em_serve_levels(FILE *f, const ember_result *r, int64_t max_nodes)
{
    em_rprofile empty = { 0 };
    const em_rprofile *p = &empty;
    em_levels lv;
    lw *w;
    int rc;

    if ((rc = em_serve_levels_fits(r)) != EMBER_OK)
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
        lw_flush(w);
        em_levels_free(&lv);
    }
    em_free(w);
    em_rprofile_free(&empty);
    return rc == EMBER_OK && ferror(f) ? em_err(EMBER_EIO, "format=levels: "
                                                "write failed") : rc;
}
