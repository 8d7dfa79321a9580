/*
** query/exec_series.c: the executor's series and tables (exec.c has the
** entry point and profiles). Semantics: docs/query-language.md, "Series".
**
**   total(SEL)   one series per selected series: per profile (time, value
**                summed), from the engine's per-profile totals (chunk
**                columns, no stack is read unless a focus or ignore asks);
**                with a step, points summed per bucket
**                floor((t - from) / step) * step + from;
**   rate(S)      per second: over a total, each profile's increase (a
**                delta profile's value; a cumulative type's rise since the
**                previous profile, a drop being a counter reset) over its
**                width (the step, else the profile's duration, else the gap
**                to the previous profile); over other series, the same on
**                their points;
**   sum, avg, max, min, count [by|without]   across series per time;
**   topk, bottomk   the K series with the largest / smallest sum.
**
** While series are worked on their type is kept beside their labels, not
** among them; __type__ becomes a label (first) only in a result whose
** series span several types.
*/
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "query/exec_int.h"

typedef struct wser {
    ember_label *labels;            /* owned, sorted by name, no __type__ */
    size_t nlabels;
    const char *type;               /* in the snapshot; NULL: several */
    int64_t *times;                 /* owned, ascending */
    double *values;
    int64_t *durs;                  /* profile durations (ns); NULL once
                                    ** points are no longer profiles */
    size_t n;
} wser;

typedef struct sset {
    wser *v;
    size_t n, cap;
} sset;

static void wser_free(wser *s)
{
    em_labels_free(s->labels, s->nlabels);
    em_free(s->times);
    em_free(s->values);
    em_free(s->durs);
    memset(s, 0, sizeof *s);
}

static void sset_free(sset *s)
{
    for (size_t i = 0; i < s->n; i++)
        wser_free(&s->v[i]);
    em_free(s->v);
    memset(s, 0, sizeof *s);
}

/* A new zeroed series at the end of S with room for N points. */
static int sset_push(sset *s, size_t n, bool durs, wser **out)
{
    wser *v = em_grow(s->v, &s->cap, s->n + 1, sizeof *v), *w;

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu series", s->n + 1);
    s->v = v;
    w = &s->v[s->n++];
    memset(w, 0, sizeof *w);
    w->times = em_malloc(n * sizeof *w->times + 1);
    w->values = em_malloc(n * sizeof *w->values + 1);
    if (durs)
        w->durs = em_malloc(n * sizeof *w->durs + 1);
    if (w->times == NULL || w->values == NULL || (durs && w->durs == NULL))
        return em_err(EMBER_ENOMEM, "query: series of %zu points", n);
    *out = w;
    return EMBER_OK;
}

static int wser_cmp(const void *a, const void *b)
{
    const wser *x = a, *y = b;
    int c = em_labels_cmp(x->labels, x->nlabels, y->labels, y->nlabels);

    if (c == 0 && x->type != y->type)
        c = x->type == NULL ? -1 : y->type == NULL ? 1
            : strcmp(x->type, y->type);
    return c;
}

/* ---- buckets ------------------------------------------------------------------ */

static int64_t bucket_of(int64_t t, int64_t from, int64_t step)
{
    int64_t d = em_sub_wrap(t, from), q = d / step;

    if (d % step < 0)
        q--;
    return em_add_wrap(from, q * step);
}

/* Adds the point (B, V, D) as S's point *K, or into point *K - 1 when it
** is bucket B too (D ignored without durations). */
static void bucket_add(wser *s, size_t *k, int64_t b, double v, int64_t d)
{
    if (*k > 0 && s->times[*k - 1] == b) {
        s->values[*k - 1] += v;
        if (s->durs != NULL)
            s->durs[*k - 1] = em_add_wrap(s->durs[*k - 1], d);
        return;
    }
    s->times[*k] = b;
    s->values[*k] = v;
    if (s->durs != NULL)
        s->durs[*k] = d;
    (*k)++;
}

/* Sums S's points per bucket of STEP ms from FROM (points stay in order). */
static void bucket_sum(wser *s, int64_t from, int64_t step)
{
    size_t k = 0;

    for (size_t i = 0; i < s->n; i++)   /* k <= i: in place */
        bucket_add(s, &k, bucket_of(s->times[i], from, step), s->values[i],
                   s->durs != NULL ? s->durs[i] : 0);
    s->n = k;
}

/* ---- total ------------------------------------------------------------------------ */

/* Field 3 of TYPE (the sample unit) and its length; NULL when absent. */
static const char *unit_field(const char *type, size_t *len)
{
    const char *u = type;

    for (int i = 0; i < 2 && u != NULL; i++)
        u = strchr(u, ':') != NULL ? strchr(u, ':') + 1 : NULL;
    *len = u != NULL ? strcspn(u, ":") : 0;
    return u;
}

/* Notes TYPE among the types of the series read, for the result's unit. */
static void unit_note(ectx *e, const char *type)
{
    const char *a, *b;
    size_t la, lb;

    if (e->unit == NULL) {
        e->unit = type;
        return;
    }
    a = unit_field(e->unit, &la);
    b = unit_field(type, &lb);
    if (a == NULL || b == NULL)
        e->units_mixed |= a != b;
    else if (la != lb || strncasecmp(a, b, la) != 0)
        e->units_mixed = true;
}

/* Index in SET (by id) of series ID, or SET->n. */
static size_t set_find(const em_series_set *set, uint32_t id)
{
    size_t lo = 0, hi = set->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set->v[mid].id == id)
            return mid;
        if (set->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return set->n;
}

/* Series I of totals T as a new series of OUT (INFO: its labels); AT
** (`@ T`: its source's instant, else NULL) keeps the points at that time.
** With STEP > 0 the points are summed per bucket of STEP ms from FROM as
** they are copied, not after: of the new arrays only the buckets' pages
** are written, and so faulted in. */
static int total_series(ectx *e, const ember_totals *t, size_t i,
                        const em_series_info *info, const int64_t *at,
                        int64_t step, int64_t from, sset *out)
{
    const int64_t *ts, *vs, *ds = em_totals_durations(t, i);
    size_t n, first = 0;
    wser *w;
    int rc;

    ember_totals_series(t, i, NULL, &ts, &vs, &n);
    if (at != NULL) {
        while (first < n && ts[first] < *at)
            first++;
        while (n > first && ts[n - 1] > *at)
            n--;
        n -= first;
    }
    if ((rc = sset_push(out, n, true, &w)) != EMBER_OK)
        return rc;
    w->type = info->type;
    unit_note(e, info->type);
    for (size_t j = first; j < first + n; j++) {
        if (step > 0) {
            bucket_add(w, &w->n, bucket_of(ts[j], from, step), (double)vs[j],
                       ds[j]);
            continue;
        }
        w->times[w->n] = ts[j];     /* a point per profile, equal times too */
        w->values[w->n] = (double)vs[j];
        w->durs[w->n++] = ds[j];
    }
    if ((rc = em_labels_dup(info->labels, info->nlabels, &w->labels)) ==
        EMBER_OK)
        w->nlabels = info->nlabels;
    return rc;
}

/* total(SEL): P->a is a selector with at most a pushed focus and ignore. */
/* The downsampled copies points bucketed by STEP from FROM may read: those
** whose buckets fall whole into one step, that is whose width divides
** both the step and FROM (their gcd); none without a step, where a point
** is a profile. */
static int64_t copy_cap(int64_t step, int64_t from)
{
    int64_t a = step, b;

    if (step <= 0)
        return 0;
    b = from % step;
    b = b < 0 ? -b : b;
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int exec_total(ectx *e, const em_plan *p, int64_t step, sset *out)
{
    const em_pchain *ch = &p->a;
    em_series_set set = { 0 };
    ember_totals *t = NULL;
    ember_selector view;
    uint32_t *nids = NULL;
    int64_t *ntimes = NULL;
    size_t nn = 0;
    int rc;

    em_exec_range(e, &ch->sel);
    em_chain_view(ch, ch->sel.node->u.sel.type, &view);
    view.resolution_ms = copy_cap(step, ch->sel.bucket_from);
    if (ch->sel.nearest) {          /* instants: profiles as stored */
        view.from_ms = view.to_ms = 0;
        view.resolution_ms = 0;
    }
    rc = em_reader_series(e->rd, &view, &set);
    if (rc == EMBER_OK)
        rc = em_reader_totals(e->rd, &view, &t);
    if (rc == EMBER_OK && ch->sel.nearest)
        rc = em_nearest_times(e, &set, t, ch->sel.at, &nids, &ntimes, &nn);
    for (size_t i = 0; rc == EMBER_OK && i < ember_totals_count(t); i++) {
        uint32_t id;
        size_t k, n, j = 0, hi = nn;
        ember_totals_series(t, i, &id, NULL, NULL, &n);
        if (n == 0 || (k = set_find(&set, id)) == set.n)
            continue;
        while (j < hi) {                    /* nids ascending */
            size_t mid = j + (hi - j) / 2;
            if (nids[mid] < id)
                j = mid + 1;
            else
                hi = mid;
        }
        if (ch->sel.nearest && (j == nn || nids[j] != id))
            continue;                       /* nothing at its instant */
        if ((rc = em_budget_step(EM_STEP_SERIES, 1)) != EMBER_OK)
            break;
        rc = total_series(e, t, i, &set.v[k],
                          ch->sel.nearest ? &ntimes[j] : NULL, step,
                          ch->sel.bucket_from, out);
    }
    if (rc == EMBER_OK)
        em_sort(out->v, out->n, sizeof *out->v, wser_cmp);
    em_free(nids);
    em_free(ntimes);
    ember_totals_free(t);
    em_series_set_free(&set);
    return rc;
}

/* ---- rate ------------------------------------------------------------------------- */

/* The per-second rate of S's points in place. RAW: S's points are
** profiles (durations known) and, with STEP, the increases are summed per
** bucket from FROM before dividing by the step. */
static void rate_series(wser *s, bool raw, int64_t step, int64_t from)
{
    bool delta = em_type_is_delta(s->type);
    double step_s = (double)step / 1000.0;
    int64_t prev_t = 0;
    double prev_v = 0;
    size_t k = 0;

    for (size_t i = 0; i < s->n; i++) {
        int64_t t = s->times[i];
        double v = s->values[i], inc = v, width = 0;
        bool have_prev = i > 0 && t > prev_t;
        if (!delta)
            inc = v >= prev_v ? v - prev_v : v;     /* a drop: a reset */
        if (delta && step > 0)
            width = step_s;
        else if (delta && raw && s->durs[i] > 0)
            width = (double)s->durs[i] / 1e9;
        else if (have_prev)
            width = (double)(t - prev_t) / 1000.0;
        prev_t = t;
        prev_v = v;
        if ((!delta && !have_prev) || (width <= 0 && !(raw && step > 0)))
            continue;
        s->times[k] = t;
        s->values[k++] = raw && step > 0 ? inc : inc / width;
    }
    s->n = k;
    em_free(s->durs);
    s->durs = NULL;
    if (raw && step > 0) {
        bucket_sum(s, from, step);
        for (size_t i = 0; i < s->n; i++)
            s->values[i] /= step_s;
    }
}

static int series_eval(ectx *e, const em_plan *p, bool bucket, sset *out);

/* rate(S): over a total, from the profiles themselves (then bucketed);
** over anything else, from its (bucketed) points. */
static int exec_rate(ectx *e, const em_plan *p, bool bucket, sset *out)
{
    const em_plan *a = p->arg;
    bool raw = a->fn == EM_FN_TOTAL;
    int64_t step = bucket ? e->step : 0;
    int rc = series_eval(e, a, raw ? false : bucket, out);

    for (size_t i = 0; rc == EMBER_OK && i < out->n; i++)
        rate_series(&out->v[i], raw, step, raw ? a->a.sel.bucket_from : 0);
    return rc;
}

/* ---- aggregation across series ------------------------------------------------------ */

/* A series of an aggregation's input with its group key. */
typedef struct sitem {
    size_t idx;                     /* in the input set */
    ember_label *key;
    size_t nkey;
    double sum;                     /* topk, bottomk: the series' sum */
} sitem;

static int sitem_cmp(const void *a, const void *b)
{
    const sitem *x = a, *y = b;
    int c = em_labels_cmp(x->key, x->nkey, y->key, y->nkey);

    return c != 0 ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Keys of IN's series under P's grouping, sorted (KEYS: their storage). */
static int series_keys(const em_plan *p, const sset *in, sitem **items,
                       ember_label **keys)
{
    size_t width = p->nlabels + EM_KEY_SERIES_LABELS;

    *items = em_malloc(in->n * sizeof **items + 1);
    *keys = em_malloc(in->n * width * sizeof **keys + 1);
    if (*items == NULL || *keys == NULL)
        return em_err(EMBER_ENOMEM, "query: keys of %zu series", in->n);
    for (size_t i = 0; i < in->n; i++) {
        const wser *s = &in->v[i];
        sitem *it = &(*items)[i];
        it->idx = i;
        it->key = *keys + i * width;
        it->nkey = em_group_key(p->grouping, p->labels, p->nlabels,
                                s->labels, s->nlabels, s->type, true,
                                it->key);
        it->sum = 0;
        for (size_t j = 0; j < s->n; j++)
            it->sum += s->values[j];
    }
    em_sort(*items, in->n, sizeof **items, sitem_cmp);
    return EMBER_OK;
}

/* The end of the group of items starting at A. */
static size_t group_end(const sitem *it, size_t n, size_t a)
{
    size_t b = a + 1;

    while (b < n && em_labels_cmp(it[a].key, it[a].nkey, it[b].key,
                                  it[b].nkey) == 0)
        b++;
    return b;
}

typedef struct tpoint {
    int64_t t;
    double v;
    size_t src;                     /* for a stable order */
} tpoint;

static int tpoint_cmp(const void *a, const void *b)
{
    const tpoint *x = a, *y = b;

    if (x->t != y->t)
        return (x->t > y->t) - (x->t < y->t);
    return (x->src > y->src) - (x->src < y->src);
}

/* Aggregates the points P[0..n) (by time) with FN into W. */
static void agg_points(em_fn fn, const tpoint *p, size_t n, wser *w)
{
    size_t k = 0;

    for (size_t a = 0, b; a < n; a = b) {
        double acc = p[a].v;
        for (b = a + 1; b < n && p[b].t == p[a].t; b++) {
            if (fn == EM_FN_MAX)
                acc = p[b].v > acc ? p[b].v : acc;
            else if (fn == EM_FN_MIN)
                acc = p[b].v < acc ? p[b].v : acc;
            else
                acc += p[b].v;
        }
        if (fn == EM_FN_AVG)
            acc /= (double)(b - a);
        else if (fn == EM_FN_COUNT)
            acc = (double)(b - a);
        w->times[k] = p[a].t;
        w->values[k++] = acc;
    }
    w->n = k;
}

/* The group IT[a..b) of IN aggregated into a new series of OUT. */
static int agg_group(const em_plan *p, const sset *in, const sitem *it,
                     size_t a, size_t b, sset *out)
{
    size_t np = 0, k = 0;
    tpoint *pts;
    wser *w;
    int rc;

    for (size_t i = a; i < b; i++)
        np += in->v[it[i].idx].n;
    if ((pts = em_malloc(np * sizeof *pts + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu points", np);
    for (size_t i = a; i < b; i++) {
        const wser *s = &in->v[it[i].idx];
        for (size_t j = 0; j < s->n; j++)
            pts[k++] = (tpoint){ s->times[j], s->values[j], i };
    }
    em_sort(pts, np, sizeof *pts, tpoint_cmp);
    rc = sset_push(out, np, false, &w);
    if (rc == EMBER_OK) {
        agg_points(p->fn, pts, np, w);
        w->type = in->v[it[a].idx].type;
        for (size_t i = a + 1; i < b && w->type != NULL; i++)
            if (!em_str_same(w->type, in->v[it[i].idx].type))
                w->type = NULL;
        rc = em_group_labels(it[a].key, it[a].nkey, &w->labels, &w->nlabels);
    }
    if (rc == EMBER_OK)                 /* the type is kept beside */
        for (size_t i = 0; i < w->nlabels; i++)
            if (strcmp(w->labels[i].name, "__type__") == 0) {
                em_free((char *)w->labels[i].name);
                em_free((char *)w->labels[i].value);
                memmove(&w->labels[i], &w->labels[i + 1],
                        (w->nlabels - i - 1) * sizeof *w->labels);
                w->nlabels--;
                break;
            }
    em_free(pts);
    return rc;
}

/* sum, avg, max, min, count [by|without] (S). */
static int exec_agg(ectx *e, const em_plan *p, bool bucket, sset *out)
{
    sset in = { 0 };
    sitem *items = NULL;
    ember_label *keys = NULL;
    int rc = series_eval(e, p->arg, bucket, &in);

    if (rc == EMBER_OK)
        rc = series_keys(p, &in, &items, &keys);
    for (size_t a = 0, b; rc == EMBER_OK && a < in.n; a = b) {
        b = group_end(items, in.n, a);
        rc = agg_group(p, &in, items, a, b, out);
    }
    if (rc == EMBER_OK)
        em_sort(out->v, out->n, sizeof *out->v, wser_cmp);
    em_free(items);
    em_free(keys);
    sset_free(&in);
    return rc;
}

static int rank_desc(const void *a, const void *b)
{
    const sitem *x = a, *y = b;

    if (x->sum != y->sum)
        return x->sum < y->sum ? 1 : -1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int rank_asc(const void *a, const void *b)
{
    const sitem *x = a, *y = b;

    if (x->sum != y->sum)
        return x->sum > y->sum ? 1 : -1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* topk / bottomk [by|without] (K, S): per group the K series of largest /
** smallest sum, in that order, moved from the input. */
static int exec_topk(ectx *e, const em_plan *p, bool bucket, sset *out)
{
    sset in = { 0 };
    sitem *items = NULL;
    ember_label *keys = NULL;
    int rc = series_eval(e, p->arg, bucket, &in);

    if (rc == EMBER_OK)
        rc = series_keys(p, &in, &items, &keys);
    if (rc == EMBER_OK && (out->v = em_calloc(in.n + 1, sizeof *out->v)) ==
        NULL)
        rc = em_err(EMBER_ENOMEM, "query: %zu series", in.n);
    out->cap = in.n + 1;
    for (size_t a = 0, b; rc == EMBER_OK && a < in.n; a = b) {
        b = group_end(items, in.n, a);
        em_sort(items + a, b - a, sizeof *items,
              p->fn == EM_FN_TOPK ? rank_desc : rank_asc);
        for (size_t i = a; i < b && (double)(i - a) < p->k; i++) {
            out->v[out->n++] = in.v[items[i].idx];
            memset(&in.v[items[i].idx], 0, sizeof in.v[0]);
        }
    }
    em_free(items);
    em_free(keys);
    sset_free(&in);
    return rc;
}

/* ---- dispatch and the result ----------------------------------------------------- */

static int series_eval(ectx *e, const em_plan *p, bool bucket, sset *out)
{
    memset(out, 0, sizeof *out);
    switch (p->fn) {
    case EM_FN_TOTAL:
        return exec_total(e, p, bucket ? e->step : 0, out);
    case EM_FN_RATE:
        return exec_rate(e, p, bucket, out);
    case EM_FN_TOPK:
    case EM_FN_BOTTOMK:
        return exec_topk(e, p, bucket, out);
    default:
        return exec_agg(e, p, bucket, out);
    }
}

/* The unit of P's values given BASE, the samples' unit: count() counts,
** rate() is per second. Returns a new string. */
static char *plan_unit(const em_plan *p, const char *base)
{
    char *u, *r;

    if (p->fn == EM_FN_TOTAL)
        return em_strdup(base);
    if (p->fn == EM_FN_COUNT)
        return em_strdup("count");
    if ((u = plan_unit(p->arg, base)) == NULL || p->fn != EM_FN_RATE)
        return u;
    r = em_malloc(strlen(u) + 3);
    if (r != NULL)
        snprintf(r, strlen(u) + 3, "%s/s", u);
    em_free(u);
    return r;
}

/* Puts __type__=TYPE first among W's labels. */
static int label_type_first(wser *w)
{
    ember_label *l = em_realloc(w->labels, (w->nlabels + 1) * sizeof *l);
    char *name = em_strdup("__type__"), *value = em_strdup(w->type);

    if (l != NULL)
        w->labels = l;
    if (l == NULL || name == NULL || value == NULL) {
        em_free(name);
        em_free(value);
        return em_err(EMBER_ENOMEM, "query: type label");
    }
    memmove(l + 1, l, w->nlabels * sizeof *l);
    l[0] = (ember_label){ name, value };
    w->nlabels++;
    return EMBER_OK;
}

/* Types and units of the series S into R: one type for all, or __type__
** labels on each series when they span several. */
static int series_types(ectx *e, const em_plan *p, sset *s, ember_result *r)
{
    bool one = s->n > 0 && s->v[0].type != NULL;
    char *base = NULL;
    int rc = EMBER_OK;

    for (size_t i = 1; i < s->n && one; i++)
        one = em_str_same(s->v[i].type, s->v[0].type);
    if (one && (r->type = em_strdup(s->v[0].type)) == NULL)
        return em_err(EMBER_ENOMEM, "query: type");
    for (size_t i = 0; !one && i < s->n && rc == EMBER_OK; i++)
        if (s->v[i].type != NULL)
            rc = label_type_first(&s->v[i]);
    if (rc != EMBER_OK)
        return rc;
    if (e->units_mixed)
        base = em_strdup("");
    else if ((rc = em_type_unit(e->unit, &base)) != EMBER_OK)
        return rc;
    if (base != NULL)
        r->unit = plan_unit(p, base);
    em_free(base);
    return r->unit != NULL ? EMBER_OK : em_err(EMBER_ENOMEM, "query: unit");
}

int em_exec_series(ectx *e, const em_plan *plan, ember_result *r)
{
    sset s = { 0 };
    int rc = series_eval(e, plan, e->step > 0, &s);

    if (rc == EMBER_OK)
        rc = series_types(e, plan, &s, r);
    if (rc == EMBER_OK && (r->series = em_calloc(s.n + 1,
                                                 sizeof *r->series)) == NULL)
        rc = em_err(EMBER_ENOMEM, "query: %zu series", s.n);
    for (size_t i = 0; rc == EMBER_OK && i < s.n; i++) {
        wser *w = &s.v[i];
        r->series[i] = (em_series){ w->labels, w->nlabels, w->times,
                                    w->values, w->n };
        em_free(w->durs);
        memset(w, 0, sizeof *w);
        r->nseries = i + 1;
    }
    sset_free(&s);
    return rc;
}

/* ---- tables ------------------------------------------------------------------------- */

int em_exec_table(ectx *e, const em_plan *plan, ember_result *r)
{
    ember_selector view, *sel = NULL;
    ember_strlist *l = NULL;
    const char *column;
    size_t n;
    int rc;

    if (plan->has_sel) {
        em_sel_view(&plan->a.sel.node->u.sel, 0, 0, &view);
        sel = &view;
    }
    if (plan->fn == EM_FN_PROFILE_TYPES) {
        column = "type";
        rc = ember_profile_types(e->db, sel, &l);
    } else if (plan->fn == EM_FN_LABEL_NAMES) {
        column = "label";
        rc = ember_label_names(e->db, sel, &l);
    } else {
        column = "value";
        rc = ember_label_values(e->db, plan->name, sel, &l);
    }
    n = ember_strlist_count(l);
    if (rc == EMBER_OK && ((r->column = em_strdup(column)) == NULL ||
                           (r->rows = em_calloc(n + 1, sizeof *r->rows)) ==
                           NULL))
        rc = em_err(EMBER_ENOMEM, "query: table of %zu rows", n);
    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        if ((r->rows[i] = em_strdup(ember_strlist_get(l, i))) == NULL)
            rc = em_err(EMBER_ENOMEM, "query: table row");
        r->nrows = i + 1;
    }
    ember_strlist_free(l);
    return rc;
}
