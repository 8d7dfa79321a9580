/*
** client/push_pset.c: em_push_pset (client/push.h), a profile set pushed
** as one window: each profile with a non-zero sample becomes one gzipped
** pprof, written by the library's one pprof encoder (query/pprof_out.c)
** reading the set's own tables through an em_pprof_src. The set's ids
** fit the encoder as they are: mapping indexes plus one, with 0 for the
** unknown mapping, as Ember's mapping ids.
**
** One pprof per profile, not one per series with several sample types:
** the encoder writes one value per sample, and Pyroscope's /ingest and
** Ember's both store each sample type of a pprof as its own profile
** anyway. The profile type's name part is the server's to guess from the
** sample and period types (ingest/pprof_type.c): /ingest carries no name.
*/
#include <string.h>

#include "engine/engine.h"
#include "query/query.h"
#include "client/push.h"

/* The symbol source over a set; lines is scratch for one location. */
typedef struct set_src {
    const em_pset *s;
    ember_line *lines;
    size_t cap;
} set_src;

static int src_stack(void *ctx, uint32_t id, const uint32_t **locs,
                     size_t *n)
{
    const em_pset *s = ((set_src *)ctx)->s;

    if (id >= s->nstacks)
        return em_err(EMBER_EINVAL, "push: stack %u of %zu", id, s->nstacks);
    *locs = s->pool + s->stacks[id].off;
    *n = s->stacks[id].n;
    return EMBER_OK;
}

static int src_location(void *ctx, uint32_t id, ember_location *out)
{
    set_src *c = ctx;
    const em_pset_loc *l = id < c->s->nlocs ? &c->s->locs[id] : NULL;
    ember_line *ln;

    if (l == NULL)
        return em_err(EMBER_EINVAL, "push: location %u of %zu", id,
                      c->s->nlocs);
    ln = em_grow(c->lines, &c->cap, l->nlines + 1, sizeof *ln);
    if (ln == NULL)
        return em_err(EMBER_ENOMEM, "push: %zu lines", l->nlines);
    c->lines = ln;
    for (size_t i = 0; i < l->nlines; i++)
        ln[i] = (ember_line){ c->s->lines[l->first + i].function,
                              c->s->lines[l->first + i].line };
    *out = (ember_location){ l->mapping, l->address, ln, l->nlines };
    return EMBER_OK;
}

static int src_function(void *ctx, uint32_t id, ember_function *out)
{
    const em_pset *s = ((set_src *)ctx)->s;

    if (id >= s->nfunctions)
        return em_err(EMBER_EINVAL, "push: function %u of %zu", id,
                      s->nfunctions);
    *out = s->functions[id];
    return EMBER_OK;
}

static int src_mapping(void *ctx, uint32_t id, ember_mapping *out)
{
    const em_pset *s = ((set_src *)ctx)->s;

    if (id == 0 || id > s->nmappings)
        return em_err(EMBER_EINVAL, "push: mapping %u of %zu", id,
                      s->nmappings);
    *out = s->mappings[id - 1];
    return EMBER_OK;
}

/* The set's samples grouped by profile: profile i's are at
** [off[i], off[i + 1]) of stacks and values. */
typedef struct by_profile {
    size_t *off;
    uint32_t *stacks;
    int64_t *values;
} by_profile;

static int group(const em_pset *s, by_profile *g)
{
    size_t *at;

    g->off = em_calloc(s->nprofiles + 1, sizeof *g->off);
    g->stacks = em_malloc(s->nsamples * sizeof *g->stacks + 1);
    g->values = em_malloc(s->nsamples * sizeof *g->values + 1);
    at = em_malloc(s->nprofiles * sizeof *at + 1);
    if (g->off == NULL || g->stacks == NULL || g->values == NULL ||
        at == NULL) {
        em_free(at);
        return em_err(EMBER_ENOMEM, "push: %zu samples", s->nsamples);
    }
    for (size_t i = 0; i < s->nsamples; i++)
        g->off[s->samples[i].profile + 1]++;
    for (size_t i = 0; i < s->nprofiles; i++) {
        g->off[i + 1] += g->off[i];
        at[i] = g->off[i];
    }
    for (size_t i = 0; i < s->nsamples; i++) {
        size_t k = at[s->samples[i].profile]++;
        g->stacks[k] = s->samples[i].stack;
        g->values[k] = s->samples[i].value;
    }
    em_free(at);
    return EMBER_OK;
}

static void group_free(by_profile *g)
{
    em_free(g->off);
    em_free(g->stacks);
    em_free(g->values);
}

static bool any_value(const by_profile *g, size_t i)
{
    for (size_t k = g->off[i]; k < g->off[i + 1]; k++)
        if (g->values[k] != 0)
            return true;
    return false;
}

/* Profile I as OUT, its labels but service_name copied to LABELS. */
static int profile_encode(const em_pset *s, const em_pprof_src *src,
                          const by_profile *g, size_t i, const char *app,
                          ember_label *labels, ember_push_profile *out)
{
    const em_pset_profile *p = &s->profiles[i];
    em_pprof_in in = { g->stacks + g->off[i], g->values + g->off[i],
                       g->off[i + 1] - g->off[i], p->time_ms,
                       p->duration_ns, p->period };
    void *buf = NULL;
    size_t len = 0, n = 0;
    int rc = em_pprof_encode_src(src, &in, p->type, EMBER_PPROF_GZIP, &buf,
                                 &len);

    if (rc != EMBER_OK)
        return em_err_prefix(rc, "push: profile %zu", i);
    *out = (ember_push_profile){ .app = app, .labels = labels,
                                 .time_ms = p->time_ms,
                                 .duration_ns = p->duration_ns,
                                 .pprof = buf, .len = len };
    for (size_t k = 0; k < p->nlabels; k++) {
        if (strcmp(p->labels[k].name, "service_name") == 0)
            out->app = p->labels[k].value;
        else
            labels[n++] = p->labels[k];
    }
    out->nlabels = n;
    return EMBER_OK;
}

/* Encodes the profiles worth sending into PRS (*N of them). */
static int encode_all(const em_pset *s, const char *app, const by_profile *g,
                      ember_label *labels, ember_push_profile *prs,
                      size_t *n)
{
    set_src c = { s, NULL, 0 };
    em_pprof_src src = { &c, src_stack, src_location, src_function,
                         src_mapping };
    int rc = EMBER_OK;

    *n = 0;
    for (size_t i = 0; rc == EMBER_OK && i < s->nprofiles; i++) {
        if (!any_value(g, i))
            continue;           /* pprof drops zeros: it would be empty */
        rc = profile_encode(s, &src, g, i, app, labels, &prs[*n]);
        if (rc == EMBER_OK) {
            labels += s->profiles[i].nlabels;
            (*n)++;
        }
    }
    em_free(c.lines);
    return rc;
}

int em_push_pset(ember_pusher *p, const em_pset *set, const char *app,
                 em_push_counts *out)
{
    by_profile g = { 0 };
    ember_push_profile *prs = NULL;
    ember_label *labels = NULL;
    size_t n = 0, nlabels = 0;
    int rc = group(set, &g);

    if (out != NULL)
        *out = (em_push_counts){ 0 };
    for (size_t i = 0; i < set->nprofiles; i++)
        nlabels += set->profiles[i].nlabels;
    prs = em_calloc(set->nprofiles + 1, sizeof *prs);
    labels = em_calloc(nlabels + 1, sizeof *labels);
    if (rc == EMBER_OK && (prs == NULL || labels == NULL))
        rc = em_err(EMBER_ENOMEM, "push: %zu profiles", set->nprofiles);
    if (rc == EMBER_OK)
        rc = encode_all(set, app, &g, labels, prs, &n);
    if (rc == EMBER_OK && n > 0)
        rc = ember_pusher_send(p, prs, n);
    for (size_t i = 0; i < n; i++) {
        if (out != NULL && rc == EMBER_OK) {
            out->profiles++;
            out->bytes += prs[i].len;
        }
        em_free((void *)prs[i].pprof);
    }
    em_free(prs);
    em_free(labels);
    group_free(&g);
    return rc;
}
