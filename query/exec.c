/*
** query/exec.c: the executor. Runs a checked plan (query/plan.h) on one
** engine reader, a single snapshot for the whole query, and fills a struct
** ember_result. This file does profiles and diffs; exec_series.c does series
** and tables. A query run for -o pprof encodes its answer inside that
** snapshot too (group_pprof).
**
** A profile chain runs as: resolve its type (a selector must mean one),
** then one engine merge per group (the engine applies the pushed focus and
** ignore through the function postings, and the groups share one
** accumulator), then resolve: a lone group directly, several groups (and
** both sides of a diff) by resolving the union of their stacks once and
** copying each group's frames from it, so a stack shared by thirteen pods
** costs one lookup, not thirteen; then the remaining stack filters run in
** order on the resolved stacks. Each group keeps the total it had before
** its first focus or ignore (pprof's -top percentages are of it): from the
** engine's stored per-profile totals when the engine applied the filter,
** else summed just before filtering. Groups of a merge by are found from the
** selected series' labels once; each group's merge is handed its series
** ids, so no matcher runs twice. `@ T` without a range picks per source
** (the series' labels without those an import took from a file's content)
** the one time nearest T from the series' totals, then merges exactly the
** profiles of that time (em_nearest_times).
**
** Diffs pair the two sides' groups by equal labels and join their stacks
** by stack id (both sides are in stack id order), copying frames from the
** resolved sides.
**
** Invariant of a working group: prof.stacks[i] came from engine stack
** ids[i], ids ascending; `merged` is the engine's answer as long as no
** filter ran after the engine (filtered false), else it is rebuilt from
** ids and the values at the end.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "query/exec_int.h"

/* A profile group while it is worked on (see the invariant above). */
typedef struct wgroup {
    ember_label *labels;            /* owned, sorted by name */
    size_t nlabels;
    em_rprofile prof;
    uint32_t *ids;                  /* engine stack id of prof.stacks[i] */
    ember_merged *merged;           /* the engine's merge (span source) */
    bool filtered;                  /* merged no longer matches prof */
    bool reframed;                  /* hide, show, callers or callees
                                    ** changed frames: no merged can
                                    ** stand for prof */
    bool has_whole;                 /* a filter removed stacks */
    int64_t whole;                  /* the total before they did, which
                                    ** percentages are of (see chain_take) */
    uint64_t nseries, nprofiles;
} wgroup;

typedef struct gset {
    wgroup *v;
    size_t n, cap;
    char *type;                     /* owned; NULL: nothing matched */
} gset;

/* ---- labels ------------------------------------------------------------------------- */

int em_labels_cmp(const ember_label *a, size_t na, const ember_label *b,
                  size_t nb)
{
    for (size_t i = 0; i < na && i < nb; i++) {
        int c = strcmp(a[i].name, b[i].name);
        if (c == 0)
            c = strcmp(a[i].value, b[i].value);
        if (c != 0)
            return c;
    }
    return (na > nb) - (na < nb);
}

/* Value of label NAME in the series' labels L (sorted by name), "" when
** absent; __type__ is the series' TYPE. */
const char *em_label_get(const ember_label *l, size_t n, const char *type,
                         const char *name)
{
    size_t lo = 0, hi = n;

    if (strcmp(name, "__type__") == 0)
        return type != NULL ? type : "";
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l[mid].name, name);
        if (c == 0)
            return l[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return "";
}

bool em_str_same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool name_listed(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static int label_cmp_name(const void *a, const void *b)
{
    const ember_label *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* The grouping key of a series (labels L sorted by name, type TYPE) under
** GROUPING and NAMES, written to KEY (room for max(n, nnames) + 1): BY
** gives the listed labels in their order, "" when absent; WITHOUT all
** labels but the listed ones. TYPED keeps __type__ in a WITHOUT key (series
** keep their types apart; merges drop it). Returns the key's length. */
size_t em_group_key(int grouping, char **names, size_t nnames,
                    const ember_label *l, size_t n, const char *type,
                    bool typed, ember_label *key)
{
    size_t k = 0;

    if (grouping == EM_GROUP_BY) {
        for (size_t i = 0; i < nnames; i++)
            key[k++] = (ember_label){ names[i],
                                      em_label_get(l, n, type, names[i]) };
        return k;
    }
    if (grouping != EM_GROUP_WITHOUT)
        return 0;
    if (typed && type != NULL && !name_listed(names, nnames, "__type__"))
        key[k++] = (ember_label){ "__type__", type };
    for (size_t i = 0; i < n; i++)
        if (!name_listed(names, nnames, l[i].name))
            key[k++] = l[i];
    return k;
}

/* A group's output labels from its KEY: those with a value, sorted by
** name, each name once. */
int em_group_labels(const ember_label *key, size_t n, ember_label **out,
                    size_t *nout)
{
    ember_label *tmp = em_malloc(n * sizeof *tmp + 1);
    size_t k = 0, w = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    if (tmp == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu group labels", n);
    for (size_t i = 0; i < n; i++)
        if (key[i].value[0] != '\0')
            tmp[k++] = key[i];
    em_sort(tmp, k, sizeof *tmp, label_cmp_name);
    for (size_t i = 0; i < k; i++)             /* by (a, a): one a */
        if (w == 0 || strcmp(tmp[i].name, tmp[w - 1].name) != 0)
            tmp[w++] = tmp[i];
    rc = em_labels_dup(tmp, w, out);
    *nout = rc == EMBER_OK ? w : 0;
    em_free(tmp);
    return rc;
}

/* ---- reading helpers ------------------------------------------------------------- */

/* The engine's view of chain CH's selector with TYPE (may be NULL), over
** its range, with its pushed filters. */
void em_chain_view(const em_pchain *ch, const char *type,
                   ember_selector *out)
{
    em_sel_view(&ch->sel.node->u.sel, ch->sel.from, ch->sel.to, out);
    out->type = type;
    out->focus = ch->focus;
    out->ignore = ch->ignore;
    out->resolution_ms = -1;        /* a merge is exact over any buckets */
}

/* Notes a selector's range in the result's evaluated range. */
void em_exec_range(ectx *e, const em_psel *ps)
{
    if (ps->from == 0 && ps->to == 0) {
        e->all_time = true;
        return;
    }
    if (!e->any_range || ps->from < e->from)
        e->from = ps->from;
    if (!e->any_range || ps->to > e->to)
        e->to = ps->to;
    e->any_range = true;
}

/* *TYPE: the one profile type chain CH's selector means (owned, NULL when
** it matches no series), or a caret error listing the types it matches. */
static int chain_type(ectx *e, const em_pchain *ch, char **type)
{
    const em_sel *sel = &ch->sel.node->u.sel;
    ember_selector view;
    ember_strlist *types = NULL;
    size_t n;
    int rc;

    *type = NULL;
    if (sel->type != NULL) {
        *type = em_strdup(sel->type);
        return *type != NULL ? EMBER_OK : em_err(EMBER_ENOMEM, "query: type");
    }
    em_sel_view(sel, 0, 0, &view);
    if ((rc = ember_profile_types(e->db, &view, &types)) != EMBER_OK)
        return rc;
    n = ember_strlist_count(types);
    if (n == 1 && (*type = em_strdup(ember_strlist_get(types, 0))) == NULL)
        rc = em_err(EMBER_ENOMEM, "query: type");
    if (n > 1) {
        char list[1024] = "";
        for (size_t i = 0; i < n && i < 8; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, ember_strlist_get(types, i),
                    sizeof list - strlen(list) - 1);
        }
        rc = em_query_error(e->text, ch->sel.node->pos, "the selector "
                            "matches %zu profile types (%s%s); name one, "
                            "e.g. '%s{...}'", n, list, n > 8 ? ", ..." : "",
                            ember_strlist_get(types, 0));
    }
    ember_strlist_free(types);
    return rc;
}

/* ---- @ T: one instant per source --------------------------------------------------- */

/* A selected series while `@ T` picks its source's instant. */
typedef struct nitem {
    uint32_t id;
    const char *type;
    const ember_label *key;         /* its labels but the split ones */
    size_t nkey;
    const int64_t *ts;              /* its profile times, ascending */
    size_t np;
} nitem;

static int nitem_cmp(const void *a, const void *b)
{
    const nitem *x = a, *y = b;
    int c = strcmp(x->type != NULL ? x->type : "",
                   y->type != NULL ? y->type : "");

    return c != 0 ? c : em_labels_cmp(x->key, x->nkey, y->key, y->nkey);
}

/* The first index of TS (N, ascending) whose time is at least AT. */
static size_t time_lower(const int64_t *ts, size_t n, int64_t at)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* True when T is nearer AT than BEST (unless HAVE, there is no BEST yet);
** ties: the earlier time. */
static bool time_nearer(int64_t t, int64_t best, bool have, int64_t at)
{
    uint64_t dt = em_abs64(em_sub_wrap(t, at));
    uint64_t db = em_abs64(em_sub_wrap(best, at));

    return !have || dt < db || (dt == db && t < best);
}

/* The time nearest AT over the items [a, b) (each with a profile). */
static int64_t group_nearest(const nitem *it, size_t a, size_t b, int64_t at)
{
    int64_t best = 0;
    bool have = false;

    for (size_t i = a; i < b; i++) {
        size_t j = time_lower(it[i].ts, it[i].np, at);
        if (j < it[i].np && time_nearer(it[i].ts[j], best, have, at)) {
            best = it[i].ts[j];
            have = true;
        }
        if (j > 0 && time_nearer(it[i].ts[j - 1], best, have, at)) {
            best = it[i].ts[j - 1];
            have = true;
        }
    }
    return best;
}

/* The labels of series SI without the SPLIT names, into KEY. */
static size_t source_key(const em_series_info *si, const ember_strlist *split,
                         ember_label *key)
{
    size_t k = 0;

    for (size_t i = 0; i < si->nlabels; i++) {
        bool drop = false;
        for (size_t j = 0; j < ember_strlist_count(split) && !drop; j++)
            drop = strcmp(si->labels[i].name,
                          ember_strlist_get(split, j)) == 0;
        if (!drop)
            key[k++] = si->labels[i];
    }
    return k;
}

static int nitem_id_cmp(const void *a, const void *b)
{
    const nitem *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Fills *ITEMS (and the KEYS behind them) with the series of SET that
** have a profile in T, keyed by source, sorted by source. */
static int nearest_items(ectx *e, const em_series_set *set,
                         const ember_totals *t, nitem **items,
                         ember_label **keys, size_t *n)
{
    size_t nt = ember_totals_count(t), used = 0;
    ember_strlist *split = NULL;
    int rc = em_reader_split_labels(e->rd, &split);

    *n = 0;
    *items = em_malloc(nt * sizeof **items + 1);
    *keys = em_malloc(set->nlabels * sizeof **keys + 1);
    if (rc == EMBER_OK && (*items == NULL || *keys == NULL))
        rc = em_err(EMBER_ENOMEM, "query: sources of %zu series", nt);
    for (size_t i = 0; rc == EMBER_OK && i < nt; i++) {
        nitem *it = &(*items)[*n];
        size_t lo = 0, hi = set->n;
        ember_totals_series(t, i, &it->id, &it->ts, NULL, &it->np);
        while (lo < hi) {                   /* the set is by series id */
            size_t mid = lo + (hi - lo) / 2;
            if (set->v[mid].id < it->id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (it->np == 0 || lo == set->n || set->v[lo].id != it->id)
            continue;
        it->type = set->v[lo].type;
        it->key = *keys + used;
        it->nkey = source_key(&set->v[lo], split, *keys + used);
        used += it->nkey;
        (*n)++;
    }
    if (rc == EMBER_OK)
        em_sort(*items, *n, sizeof **items, nitem_cmp);
    ember_strlist_free(split);
    return rc;
}

int em_nearest_times(ectx *e, const em_series_set *set,
                     const ember_totals *t, int64_t at, uint32_t **ids,
                     int64_t **times, size_t *n)
{
    nitem *it = NULL;
    ember_label *keys = NULL;
    size_t ni = 0, k = 0;
    int rc = nearest_items(e, set, t, &it, &keys, &ni);

    *ids = NULL;
    *times = NULL;
    *n = 0;
    for (size_t a = 0, b; rc == EMBER_OK && a < ni; a = b) {
        int64_t best;
        for (b = a + 1; b < ni && nitem_cmp(&it[a], &it[b]) == 0; b++)
            ;
        best = group_nearest(it, a, b, at);
        for (size_t i = a; i < b; i++) {        /* at exactly that instant */
            size_t j = time_lower(it[i].ts, it[i].np, best);
            if (j < it[i].np && it[i].ts[j] == best)
                it[k++] = (nitem){ .id = it[i].id, .ts = &it[i].ts[j] };
        }
    }
    em_sort(it, k, sizeof *it, nitem_id_cmp);
    if (rc == EMBER_OK && ((*ids = em_malloc(k * sizeof **ids + 1)) == NULL ||
                           (*times = em_malloc(k * sizeof **times + 1)) ==
                           NULL))
        rc = em_err(EMBER_ENOMEM, "query: %zu nearest profiles", k);
    for (size_t i = 0; rc == EMBER_OK && i < k; i++) {
        (*ids)[i] = it[i].id;
        (*times)[i] = it[i].ts[0];
    }
    if (rc == EMBER_OK)
        *n = k;
    else {
        em_free(*ids);
        em_free(*times);
        *ids = NULL;
        *times = NULL;
    }
    em_free(it);
    em_free(keys);
    return rc;
}

/* em_nearest_times for the series SET of SEL, over all time. */
static int nearest_times(ectx *e, const ember_selector *sel,
                         const em_series_set *set, int64_t at,
                         uint32_t **ids, int64_t **times, size_t *n)
{
    ember_selector all = *sel;
    ember_totals *t = NULL;
    int rc;

    *ids = NULL;
    *times = NULL;
    *n = 0;
    all.from_ms = all.to_ms = 0;
    all.focus = all.ignore = NULL;
    if ((rc = em_reader_totals(e->rd, &all, &t)) == EMBER_OK)
        rc = em_nearest_times(e, set, t, at, ids, times, n);
    ember_totals_free(t);
    return rc;
}

/* True when the engine applies a focus or an ignore to SEL and the total
** before them is wanted (pprof output, EM_QUERY_IDS_ONLY, shows no
** percentages). */
static bool whole_wanted(const ectx *e, const ember_selector *sel)
{
    return (sel->focus != NULL || sel->ignore != NULL) &&
           (e->flags & EM_QUERY_IDS_ONLY) == 0;
}

/* Adds series ID's profiles at exactly time T to the reader's merge. */
static int merge_add_at(ectx *e, const ember_selector *base, uint32_t id,
                        int64_t t)
{
    ember_selector one = { .sz = sizeof one, .focus = base->focus,
                           .ignore = base->ignore, .series = &id,
                           .nseries = 1, .from_ms = t, .to_ms = t };

    if (t == 0)             /* [0, 0] would mean all time to the engine */
        one.from_ms = -1;
    return em_reader_merge_add(e->rd, &one);
}

/* ---- working groups --------------------------------------------------------------- */

static void wgroup_free(wgroup *g)
{
    em_labels_free(g->labels, g->nlabels);
    em_rprofile_free(&g->prof);
    em_free(g->ids);
    ember_merged_free(g->merged);
    memset(g, 0, sizeof *g);
}

static void gset_free(gset *s)
{
    for (size_t i = 0; i < s->n; i++)
        wgroup_free(&s->v[i]);
    em_free(s->v);
    em_free(s->type);
    memset(s, 0, sizeof *s);
}

/* A new zeroed group at the end of S. */
static int gset_push(gset *s, wgroup **g)
{
    wgroup *v = em_grow(s->v, &s->cap, s->n + 1, sizeof *v);

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu groups", s->n + 1);
    s->v = v;
    *g = &s->v[s->n++];
    memset(*g, 0, sizeof **g);
    return EMBER_OK;
}

/* Resolves G's merged profile into G->prof and the stack id of each. */
static int group_resolve(ectx *e, const char *type, wgroup *g)
{
    const uint32_t *stacks;
    const int64_t *values;
    size_t n = ember_merged_samples(g->merged, &stacks, &values), k = 0;
    int rc;

    rc = em_rprofile_build_at(e->db, g->merged, type,
                              em_reader_snapshot(e->rd), e->build_gran,
                              &g->prof);
    if (rc != EMBER_OK)
        return rc;
    g->ids = em_malloc(g->prof.nstacks * sizeof *g->ids + 1);
    if (g->ids == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu stack ids", g->prof.nstacks);
    /* em_rprofile_build adds the non-zero stacks in the merge's order */
    for (size_t i = 0; i < n && k < g->prof.nstacks; i++)
        if (values[i] != 0)
            g->ids[k++] = stacks[i];
    if (k != g->prof.nstacks)
        return em_err(EMBER_EINVAL, "query: %zu stacks resolved, %zu merged",
                      g->prof.nstacks, k);
    return EMBER_OK;
}

/* ---- stack filters on resolved profiles ----------------------------------------- */

/* One regex matched against a profile's function names, each name once. */
typedef struct fmatch {
    const em_rprofile *p;
    const em_regex *re;
    uint8_t *seen;                  /* per name id: 0 not yet, 1 no, 2 yes */
} fmatch;

static int fmatch_init(fmatch *m, const em_rprofile *p, const em_regex *re)
{
    m->p = p;
    m->re = re;
    m->seen = em_calloc(p->names.count + 1, 1);
    return m->seen != NULL ? EMBER_OK
                           : em_err(EMBER_ENOMEM, "query: %u names",
                                    p->names.count);
}

/* True when function name FN matches. */
static bool fmatch_name(fmatch *m, uint32_t fn)
{
    if (m->seen[fn] == 0) {
        const char *name = em_rprofile_fname(m->p, fn);
        m->seen[fn] = em_regex_match(m->re, name, strlen(name)) ? 2 : 1;
    }
    return m->seen[fn] == 2;
}

/* Keeps the stacks of G whose KEEP flag is set, in order. */
static void group_compact(wgroup *g, const bool *keep)
{
    size_t w = 0;

    for (size_t i = 0; i < g->prof.nstacks; i++) {
        if (!keep[i])
            continue;
        g->prof.stacks[w] = g->prof.stacks[i];
        g->ids[w++] = g->ids[i];
    }
    if (w != g->prof.nstacks)
        g->filtered = true;
    g->prof.nstacks = w;
}

/* The stacks no longer match their engine ids (pprof output would show
** the frames a filter took away), so merged is dropped. */
static void group_reframed(wgroup *g)
{
    ember_merged_free(g->merged);
    g->merged = NULL;
    g->reframed = true;
}

/* focus (FOCUS true) or ignore with RE on G's function names. */
static int filter_regex(wgroup *g, const em_regex *re, bool focus)
{
    em_rprofile *p = &g->prof;
    bool *keep = em_malloc(p->nstacks * sizeof *keep + 1);
    fmatch m;
    int rc = fmatch_init(&m, p, re);

    if (rc == EMBER_OK && keep == NULL)
        rc = em_err(EMBER_ENOMEM, "query: filter of %zu stacks", p->nstacks);
    for (size_t i = 0; rc == EMBER_OK && i < p->nstacks; i++) {
        const em_rframe *f = p->frames + p->stacks[i].first;
        bool through = false;
        for (size_t j = 0; j < p->stacks[i].nframes && !through; j++)
            through = fmatch_name(&m, f[j].fn);
        keep[i] = through == focus;
    }
    if (rc == EMBER_OK)
        group_compact(g, keep);
    em_free(m.seen);
    em_free(keep);
    return rc;
}

/* hide (SHOW false) or show with RE: drops the frames whose function
** matches (hide) or does not (show), as pprof's -hide and -show do per
** inline line. A stack left without frames keeps its value as an empty
** stack, so totals and percentages stay those of the whole profile, as
** pprof's -top reports them. */
static int filter_frames(wgroup *g, const em_regex *re, bool show)
{
    em_rprofile *p = &g->prof;
    fmatch m;
    int rc = fmatch_init(&m, p, re);

    for (size_t i = 0; rc == EMBER_OK && i < p->nstacks; i++) {
        em_rframe *f = p->frames + p->stacks[i].first;
        size_t w = 0, loc = 0;          /* loc: where f[w]'s location began */
        for (size_t j = 0; j < p->stacks[i].nframes; j++) {
            bool inl = (f[j].flags & EM_RFRAME_INLINED) != 0;
            if (fmatch_name(&m, f[j].fn) == show)
                f[w++] = f[j];
            else if (!inl && w > loc)   /* its inner lines end the location */
                f[w - 1].flags &= ~EM_RFRAME_INLINED;
            if (!inl)
                loc = w;
        }
        p->stacks[i].nframes = w;
    }
    if (rc == EMBER_OK)
        group_reframed(g);
    em_free(m.seen);
    return rc;
}

/* Where stack S is cut for callers (CALLERS) or callees: the index of its
** innermost matching frame or of its outermost; S->nframes when none. */
static size_t cut_at(fmatch *m, const em_rstack *s, bool callers)
{
    const em_rframe *f = m->p->frames + s->first;
    size_t hit = s->nframes;

    for (size_t j = 0; j < s->nframes; j++)
        if (fmatch_name(m, f[j].fn)) {
            hit = j;
            if (callers)
                break;
        }
    return hit;
}

/* callers (CALLERS true) or callees with RE: keeps the stacks through a
** matching function, cut there. Callees cut above the outermost match,
** which becomes the root (all it called, however deep it recursed);
** callers cut below the innermost, which becomes the leaf (every path
** that reached it). Each sample through a match stays once, so each side
** totals the matching functions' cum, as pprof's -peek counts it. A root
** inlined into a caller that was cut off is the outermost frame of its
** location now, as hide leaves it. */
static int filter_cut(wgroup *g, const em_regex *re, bool callers)
{
    em_rprofile *p = &g->prof;
    bool *keep = em_malloc(p->nstacks * sizeof *keep + 1);
    fmatch m;
    int rc = fmatch_init(&m, p, re);

    if (rc == EMBER_OK && keep == NULL)
        rc = em_err(EMBER_ENOMEM, "query: cut of %zu stacks", p->nstacks);
    for (size_t i = 0; rc == EMBER_OK && i < p->nstacks; i++) {
        em_rstack *s = &p->stacks[i];
        size_t hit = cut_at(&m, s, callers);
        keep[i] = hit < s->nframes;
        if (!keep[i])
            continue;
        if (callers) {
            s->first += hit;
            s->nframes -= hit;
        } else {
            s->nframes = hit + 1;
            p->frames[s->first + hit].flags &= ~EM_RFRAME_INLINED;
        }
    }
    if (rc == EMBER_OK) {
        group_compact(g, keep);
        group_reframed(g);
    }
    em_free(m.seen);
    em_free(keep);
    return rc;
}

/* Notes G's total before its first focus, ignore, callers or callees, as
** the renderers sum it (|value|; hide and show keep every value). A diff
** is left out: its renderers show changes against the base, not shares of
** a total. */
static void group_whole(wgroup *g)
{
    uint64_t sum = 0;

    if (g->has_whole || g->prof.diff)
        return;
    for (size_t i = 0; i < g->prof.nstacks; i++)
        sum += em_abs64(g->prof.stacks[i].value);
    g->whole = (int64_t)sum;            /* wraps as render_top's sum does */
    g->has_whole = true;
}

/* Applies the filters the engine did not apply, in order. */
static int group_filter(wgroup *g, const em_pop *ops, size_t nops)
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < nops && rc == EMBER_OK; i++) {
        int op = ops[i].op;
        /* a top keeps every stack: it only limits rows (top_limit) */
        if (ops[i].pushed || op == EM_OP_TOP)
            continue;
        if (op == EM_OP_HIDE || op == EM_OP_SHOW) {
            rc = filter_frames(g, ops[i].re, op == EM_OP_SHOW);
            continue;
        }
        group_whole(g);
        if (op == EM_OP_CALLERS || op == EM_OP_CALLEES)
            rc = filter_cut(g, ops[i].re, op == EM_OP_CALLERS);
        else
            rc = filter_regex(g, ops[i].re, op == EM_OP_FOCUS);
    }
    return rc;
}

/* Rebuilds G's merged profile from its (filtered) stacks: the values, or
** for a diff TARGET minus BASE, zero changes left out. */
static int group_remerge(wgroup *g)
{
    size_t n = g->prof.nstacks, k = 0;
    int64_t *vals = em_malloc(n * sizeof *vals + 1);
    uint32_t *ids = em_malloc(n * sizeof *ids + 1);
    ember_merged *m = NULL;
    int rc = EMBER_OK;

    if (vals == NULL || ids == NULL)
        rc = em_err(EMBER_ENOMEM, "query: %zu stacks", n);
    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        int64_t v = em_sub_wrap(g->prof.stacks[i].value,
                                g->prof.stacks[i].base);
        if (v == 0)
            continue;
        ids[k] = g->ids[i];
        vals[k++] = v;
    }
    if (rc == EMBER_OK)
        rc = em_merged_make(ids, vals, k, g->merged, &m);
    if (rc == EMBER_OK) {
        ember_merged_free(g->merged);
        g->merged = m;
        g->filtered = false;
    }
    em_free(vals);
    em_free(ids);
    return rc;
}

/* ---- chains ---------------------------------------------------------------------- */

/* Takes the reader's merge as a new group of S with a copy of LABELS (not
** resolved yet: see groups_resolve). KEEP_EMPTY keeps a group that merged
** no profile (a plain merge always answers). WHOLE: keep the merge's
** total before the engine's focus and ignore, which pprof takes its
** percentages of (the engine sums the profiles' stored totals as it
** merges; the stored totals sum signed values where a renderer sums
** |value|, which differ only for a profile with negative samples). */
static int chain_take(ectx *e, gset *s, const ember_label *labels,
                      size_t nlabels, bool keep_empty, bool whole)
{
    ember_merged *m = NULL;
    uint64_t np = 0;
    wgroup *g = NULL;
    int64_t before = em_reader_merge_whole(e->rd);
    int rc = em_reader_merge_take(e->rd, &m);

    if (rc != EMBER_OK)
        return rc;
    ember_merged_info(m, NULL, &np);
    if (np == 0 && !keep_empty) {
        ember_merged_free(m);
        return EMBER_OK;
    }
    if ((rc = gset_push(s, &g)) != EMBER_OK) {
        ember_merged_free(m);
        return rc;
    }
    g->merged = m;
    g->has_whole = whole;
    g->whole = whole ? before : 0;
    ember_merged_info(m, &g->nseries, &g->nprofiles);
    if ((rc = em_labels_dup(labels, nlabels, &g->labels)) == EMBER_OK)
        g->nlabels = nlabels;
    return rc;
}

/* One series of a grouped chain, with its key. */
typedef struct gitem {
    const em_series_info *si;
    ember_label *key;
    size_t nkey;
} gitem;

static int gitem_cmp(const void *a, const void *b)
{
    const gitem *x = a, *y = b;
    int c = em_labels_cmp(x->key, x->nkey, y->key, y->nkey);

    return c != 0 ? c : (x->si->id > y->si->id) - (x->si->id < y->si->id);
}

/* Sorts the series of SET into items by their group key under CH's
** grouping (KEYS: storage for the keys, freed by the caller). */
static int group_items(const em_pchain *ch, const em_series_set *set,
                       gitem **items, ember_label **keys)
{
    size_t width = ch->nlabels + EM_KEY_SERIES_LABELS;

    *items = em_malloc(set->n * sizeof **items + 1);
    *keys = em_malloc(set->n * width * sizeof **keys + 1);
    if (*items == NULL || *keys == NULL)
        return em_err(EMBER_ENOMEM, "query: keys of %zu series", set->n);
    for (size_t i = 0; i < set->n; i++) {
        gitem *it = &(*items)[i];
        it->si = &set->v[i];
        it->key = *keys + i * width;
        it->nkey = em_group_key(ch->grouping, ch->labels, ch->nlabels,
                                it->si->labels, it->si->nlabels,
                                it->si->type, false, it->key);
    }
    em_sort(*items, set->n, sizeof **items, gitem_cmp);
    return EMBER_OK;
}

/* Finds ID in the ascending IDS (N of them); its index or N. */
static size_t id_find(const uint32_t *ids, size_t n, uint32_t id)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] == id)
            return mid;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return n;
}

/* Merges the items [a, b) (one group) into the reader's accumulator. */
static int group_merge(ectx *e, const ember_selector *view, const gitem *it,
                       size_t a, size_t b, const uint32_t *nids,
                       const int64_t *ntimes, size_t nn, bool nearest)
{
    ember_selector sel = { .sz = sizeof sel, .from_ms = view->from_ms,
                           .to_ms = view->to_ms, .focus = view->focus,
                           .ignore = view->ignore,
                           .resolution_ms = view->resolution_ms };
    uint32_t *ids;
    int rc = EMBER_OK;

    if (nearest) {
        for (size_t i = a; i < b && rc == EMBER_OK; i++) {
            size_t k = id_find(nids, nn, it[i].si->id);
            if (k < nn)
                rc = merge_add_at(e, view, nids[k], ntimes[k]);
        }
        return rc;
    }
    if ((ids = em_malloc((b - a) * sizeof *ids + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu series", b - a);
    for (size_t i = a; i < b; i++)
        ids[i - a] = it[i].si->id;
    sel.series = ids;
    sel.nseries = b - a;
    rc = em_reader_merge_add(e->rd, &sel);
    em_free(ids);
    return rc;
}

/* A merge by/without, or a nearest (@) merge: from the selected series. */
static int chain_grouped(ectx *e, const em_pchain *ch,
                         const ember_selector *view, gset *s)
{
    em_series_set set = { 0 };
    gitem *items = NULL;
    ember_label *keys = NULL, *glabels = NULL;
    uint32_t *nids = NULL;
    int64_t *ntimes = NULL;
    bool pushed = whole_wanted(e, view);
    size_t nn = 0, ng = 0;
    int rc = em_reader_series(e->rd, view, &set);

    if (rc == EMBER_OK && ch->sel.nearest)
        rc = nearest_times(e, view, &set, ch->sel.at, &nids, &ntimes, &nn);
    if (rc == EMBER_OK)
        rc = group_items(ch, &set, &items, &keys);
    for (size_t a = 0, b; rc == EMBER_OK && a < set.n; a = b) {
        for (b = a + 1; b < set.n && em_labels_cmp(items[a].key,
             items[a].nkey, items[b].key, items[b].nkey) == 0; b++)
            ;
        rc = group_merge(e, view, items, a, b, nids, ntimes, nn,
                         ch->sel.nearest);
        if (rc == EMBER_OK)
            rc = em_group_labels(items[a].key, items[a].nkey, &glabels, &ng);
        if (rc == EMBER_OK)
            rc = chain_take(e, s, glabels, ng,
                            ch->grouping == EM_GROUP_NONE, pushed);
        em_labels_free(glabels, ng);
        glabels = NULL;
        ng = 0;
    }
    if (rc == EMBER_OK && s->n == 0 && ch->grouping == EM_GROUP_NONE)
        rc = chain_take(e, s, NULL, 0, true, pushed);   /* nothing near */
    em_free(items);
    em_free(keys);
    em_free(nids);
    em_free(ntimes);
    em_series_set_free(&set);
    return rc;
}

/* Merges chain CH into groups S (S->type set, or NULL: nothing matched),
** not resolved yet. */
static int chain_merge(ectx *e, const em_pchain *ch, gset *s)
{
    ember_selector view;
    int rc;

    memset(s, 0, sizeof *s);
    em_exec_range(e, &ch->sel);
    if ((rc = chain_type(e, ch, &s->type)) != EMBER_OK || s->type == NULL)
        return rc;
    em_chain_view(ch, s->type, &view);
    if (ch->grouping != EM_GROUP_NONE || ch->sel.nearest)
        rc = chain_grouped(e, ch, &view, s);
    else if ((rc = em_reader_merge_add(e->rd, &view)) == EMBER_OK)
        rc = chain_take(e, s, NULL, 0, true, whole_wanted(e, &view));
    return rc;
}

/* ---- resolving every group's stacks once ------------------------------------------ */

/* Copies resolved stacks out of SRC into other profiles, re-interning each
** name once per destination. */
typedef struct copier {
    const em_rprofile *src;
    uint32_t *map;                  /* SRC name id -> the destination's, or
                                    ** UINT32_MAX: not interned there yet */
    em_rframe *scratch;             /* the stack being copied */
    size_t cap;
} copier;

static int copier_init(copier *c, const em_rprofile *src)
{
    memset(c, 0, sizeof *c);
    c->src = src;
    c->map = em_malloc(src->names.count * sizeof *c->map + 1);
    if (c->map == NULL)
        return em_err(EMBER_ENOMEM, "query: map of %u names",
                      src->names.count);
    memset(c->map, 0xff, src->names.count * sizeof *c->map);
    return EMBER_OK;
}

/* Starts copying into another profile. */
static void copier_reset(copier *c)
{
    memset(c->map, 0xff, c->src->names.count * sizeof *c->map);
}

static void copier_free(copier *c)
{
    em_free(c->map);
    em_free(c->scratch);
}

/* Stack I of the source, its names interned into DST, into c->scratch. */
static int copier_frames(copier *c, em_rprofile *dst, size_t i)
{
    const em_rstack *st = &c->src->stacks[i];
    int rc;

    if (st->nframes > c->cap) {
        em_rframe *f = em_realloc(c->scratch, st->nframes * sizeof *f);
        if (f == NULL)
            return em_err(EMBER_ENOMEM, "query: %zu frames", st->nframes);
        c->scratch = f;
        c->cap = st->nframes;
    }
    for (size_t j = 0; j < st->nframes; j++) {
        em_rframe f = c->src->frames[st->first + j];
        if (c->map[f.fn] == UINT32_MAX &&
            (rc = em_rprofile_copy_name(dst, c->src, f.fn, &c->map[f.fn])) !=
            EMBER_OK)
            return rc;
        f.fn = c->map[f.fn];
        c->scratch[j] = f;
    }
    return EMBER_OK;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The distinct stack ids with a non-zero value in any group of SETS,
** ascending, into a new *IDS of *N. */
static int union_ids(gset *const *sets, size_t nsets, uint32_t **ids,
                     size_t *n)
{
    size_t total = 0, k = 0;

    for (size_t i = 0; i < nsets; i++)
        for (size_t g = 0; g < sets[i]->n; g++)
            total += ember_merged_samples(sets[i]->v[g].merged, NULL, NULL);
    if ((*ids = em_malloc(total * sizeof **ids + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu stack ids", total);
    for (size_t i = 0; i < nsets; i++)
        for (size_t g = 0; g < sets[i]->n; g++) {
            const uint32_t *st;
            const int64_t *v;
            size_t m = ember_merged_samples(sets[i]->v[g].merged, &st, &v);
            for (size_t j = 0; j < m; j++)
                if (v[j] != 0)
                    (*ids)[k++] = st[j];
        }
    em_sort(*ids, k, sizeof **ids, u32_cmp);
    *n = 0;
    for (size_t j = 0; j < k; j++)
        if (*n == 0 || (*ids)[*n - 1] != (*ids)[j])
            (*ids)[(*n)++] = (*ids)[j];
    return EMBER_OK;
}

/* G's profile copied from C's source, whose stack i is stack UIDS[i]. */
static int group_copy(copier *c, const char *type, const uint32_t *uids,
                      size_t nu, wgroup *g)
{
    const uint32_t *st;
    const int64_t *v;
    size_t m = ember_merged_samples(g->merged, &st, &v), k = 0, nf = 0;
    int rc = em_rprofile_init(&g->prof, type);

    if (rc == EMBER_OK && (g->ids = em_malloc(m * sizeof *g->ids + 1)) ==
        NULL)
        rc = em_err(EMBER_ENOMEM, "query: %zu stack ids", m);
    for (size_t j = 0; j < m && rc == EMBER_OK; j++) {  /* sized first */
        size_t i = v[j] != 0 ? id_find(uids, nu, st[j]) : nu;
        if (i < nu) {
            k++;
            nf += c->src->stacks[i].nframes;
        }
    }
    if (rc == EMBER_OK)
        rc = em_rprofile_reserve(&g->prof, k, nf);
    k = 0;
    copier_reset(c);
    for (size_t j = 0; j < m && rc == EMBER_OK; j++) {
        size_t i = v[j] != 0 ? id_find(uids, nu, st[j]) : nu;
        if (i == nu)
            continue;
        rc = copier_frames(c, &g->prof, i);
        if (rc == EMBER_OK)
            rc = em_rprofile_add(&g->prof, c->scratch,
                                 c->src->stacks[i].nframes, v[j]);
        g->ids[k++] = st[j];
    }
    return rc;
}

/* Resolves the groups of SETS: one group alone directly; several through
** one resolution of all their stacks, copied into each (a stack shared by
** groups and diff sides is looked up once). */
static int groups_resolve(ectx *e, const char *type, gset *const *sets,
                          size_t nsets)
{
    size_t ngroups = 0, nu = 0;
    uint32_t *uids = NULL;
    int64_t *ones = NULL;
    ember_merged *u = NULL;
    em_rprofile all = { 0 };
    copier c = { 0 };
    int rc;

    for (size_t i = 0; i < nsets; i++)
        ngroups += sets[i]->n;
    for (size_t i = 0; ngroups == 1 && i < nsets; i++)
        if (sets[i]->n == 1)
            return group_resolve(e, type, &sets[i]->v[0]);
    if (ngroups == 0)
        return EMBER_OK;
    rc = union_ids(sets, nsets, &uids, &nu);
    if (rc == EMBER_OK && (ones = em_malloc(nu * sizeof *ones + 1)) == NULL)
        rc = em_err(EMBER_ENOMEM, "query: %zu stacks", nu);
    for (size_t i = 0; rc == EMBER_OK && i < nu; i++)
        ones[i] = 1;
    if (rc == EMBER_OK)
        rc = em_merged_make(uids, ones, nu, NULL, &u);
    if (rc == EMBER_OK)
        rc = em_rprofile_build_at(e->db, u, type, em_reader_snapshot(e->rd),
                                  e->build_gran, &all);
    if (rc == EMBER_OK && all.nstacks != nu)    /* stack i is uids[i] */
        rc = em_err(EMBER_EINVAL, "query: %zu stacks resolved of %zu",
                    all.nstacks, nu);
    if (rc == EMBER_OK)
        rc = copier_init(&c, &all);
    for (size_t i = 0; rc == EMBER_OK && i < nsets; i++)
        for (size_t g = 0; rc == EMBER_OK && g < sets[i]->n; g++)
            rc = group_copy(&c, type, uids, nu, &sets[i]->v[g]);
    copier_free(&c);
    em_rprofile_free(&all);
    ember_merged_free(u);
    em_free(ones);
    em_free(uids);
    return rc;
}

/* Applies chain CH's remaining filters to every group of S. */
static int groups_filter(gset *s, const em_pchain *ch)
{
    int rc = EMBER_OK;

    for (size_t g = 0; g < s->n && rc == EMBER_OK; g++)
        rc = group_filter(&s->v[g], ch->ops, ch->nops);
    return rc;
}

/* ---- diffs ----------------------------------------------------------------------- */

/* What side G's samples summed to before its filters, signed (pprof's
** -normalize sums them as it reads the files, before any filter). */
static int64_t side_total(const wgroup *g)
{
    int64_t sum = 0;

    if (g == NULL)
        return 0;
    if (g->has_whole)
        return g->whole;
    for (size_t i = 0; i < g->prof.nstacks; i++)
        sum = em_add_wrap(sum, g->prof.stacks[i].value);
    return sum;
}

/* normalize(D): the ratio that brings target T's total to base B's, 0
** when the target has none (pprof's Profile.Normalize). */
static double norm_ratio(const wgroup *b, const wgroup *t)
{
    int64_t tt = side_total(t);

    return tt == 0 ? 0 : (double)side_total(b) / (double)tt;
}

/* V times R, rounded half away from zero (Go's math.Round, as pprof's
** ScaleN rounds each sample), kept within int64. */
static int64_t scale_value(int64_t v, double r)
{
    double x = round((double)v * r);

    if (x >= 9.2233720368547758e18)
        return INT64_MAX;
    if (x <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)x;
}

/* Joins base B and target T (either may be NULL: empty) by stack id into
** the diff group G, the target's values times RATIO (1: as they are). */
static int diff_join(const char *type, const wgroup *b, const wgroup *t,
                     double ratio, wgroup *g)
{
    size_t nb = b != NULL ? b->prof.nstacks : 0;
    size_t nt = t != NULL ? t->prof.nstacks : 0, i = 0, j = 0, k = 0;
    static const em_rprofile none;
    copier cb = { 0 }, ct = { 0 };
    int rc = em_rprofile_init(&g->prof, type);

    g->prof.diff = true;
    if (rc == EMBER_OK)
        rc = copier_init(&cb, b != NULL ? &b->prof : &none);
    if (rc == EMBER_OK)
        rc = copier_init(&ct, t != NULL ? &t->prof : &none);
    if (rc == EMBER_OK && (g->ids = em_malloc((nb + nt) * sizeof *g->ids +
                                              1)) == NULL)
        rc = em_err(EMBER_ENOMEM, "diff: %zu stacks", nb + nt);
    while (rc == EMBER_OK && (i < nb || j < nt)) {
        uint32_t ib = i < nb ? b->ids[i] : UINT32_MAX;
        uint32_t it = j < nt ? t->ids[j] : UINT32_MAX;
        int64_t vb = i < nb && ib <= it ? b->prof.stacks[i].value : 0;
        int64_t vt = j < nt && it <= ib ? t->prof.stacks[j].value : 0;
        copier *c = j < nt && it <= ib ? &ct : &cb;  /* target's frames */
        if (ratio != 1)
            vt = scale_value(vt, ratio);
        size_t from = c == &ct ? j : i;
        rc = copier_frames(c, &g->prof, from);
        if (rc == EMBER_OK)
            rc = em_rprofile_add_diff(&g->prof, c->scratch,
                                      c->src->stacks[from].nframes, vb, vt);
        g->ids[k++] = ib < it ? ib : it;
        i += i < nb && ib <= it;
        j += j < nt && it <= ib;
    }
    copier_free(&cb);
    copier_free(&ct);
    return rc;
}

static int wgroup_cmp(const void *a, const void *b)
{
    const wgroup *x = a, *y = b;
    return em_labels_cmp(x->labels, x->nlabels, y->labels, y->nlabels);
}

/* The diff group of base B and target T (one may be NULL), at the end of
** OUT, with the post-diff filters applied. */
static int diff_group(const em_plan *p, const char *type, const wgroup *b,
                      const wgroup *t, gset *out)
{
    const wgroup *side = t != NULL ? t : b;
    wgroup *g = NULL;
    int rc = gset_push(out, &g);

    if (rc != EMBER_OK)
        return rc;
    g->filtered = true;                 /* merged: target minus base */
    g->nseries = (b ? b->nseries : 0) + (t ? t->nseries : 0);
    g->nprofiles = (b ? b->nprofiles : 0) + (t ? t->nprofiles : 0);
    rc = em_labels_dup(side->labels, side->nlabels, &g->labels);
    if (rc == EMBER_OK)
        g->nlabels = side->nlabels;
    if (rc == EMBER_OK)
        rc = diff_join(type, b, t, p->normalize ? norm_ratio(b, t) : 1, g);
    if (rc == EMBER_OK)
        rc = em_merged_make(NULL, NULL, 0, side->merged, &g->merged);
    if (rc == EMBER_OK)
        rc = group_filter(g, p->post, p->npost);
    return rc;
}

/* diff(BASE, TARGET): groups paired by labels, the unpaired against empty. */
static int exec_diff(ectx *e, const em_plan *p, gset *out)
{
    gset sb, st;
    int rc = chain_merge(e, &p->a, &sb);

    memset(out, 0, sizeof *out);
    memset(&st, 0, sizeof st);
    if (rc == EMBER_OK)
        rc = chain_merge(e, &p->b, &st);
    if (rc == EMBER_OK && sb.type != NULL && st.type != NULL &&
        strcmp(sb.type, st.type) != 0)
        rc = em_query_error(e->text, p->b.sel.node->pos, "diff needs one "
                            "profile type on both sides: the base is %s, "
                            "the target %s", sb.type, st.type);
    if (rc == EMBER_OK && (out->type = em_strdup(st.type ? st.type : sb.type
                                                 ? sb.type : "")) == NULL)
        rc = em_err(EMBER_ENOMEM, "diff: type");
    if (rc == EMBER_OK)
        rc = groups_resolve(e, out->type, (gset *[]){ &sb, &st }, 2);
    if (rc == EMBER_OK)
        rc = groups_filter(&sb, &p->a);
    if (rc == EMBER_OK)
        rc = groups_filter(&st, &p->b);
    if (rc == EMBER_OK) {
        em_sort(sb.v, sb.n, sizeof *sb.v, wgroup_cmp);
        em_sort(st.v, st.n, sizeof *st.v, wgroup_cmp);
    }
    for (size_t i = 0, j = 0; rc == EMBER_OK && (i < sb.n || j < st.n);) {
        int c = i == sb.n ? 1 : j == st.n ? -1
                : wgroup_cmp(&sb.v[i], &st.v[j]);
        rc = diff_group(p, out->type, c <= 0 ? &sb.v[i] : NULL,
                        c >= 0 ? &st.v[j] : NULL, out);
        i += c <= 0;
        j += c >= 0;
    }
    if (rc == EMBER_OK && out->type[0] == '\0') {
        em_free(out->type);             /* neither side matched a series */
        out->type = NULL;
    }
    gset_free(&sb);
    gset_free(&st);
    return rc;
}

/* ---- into the result ------------------------------------------------------------- */

/* Moves the groups of S into R (S is left empty). */
static int groups_move(gset *s, ember_result *r)
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < s->n && rc == EMBER_OK; i++)
        if (s->v[i].filtered && !s->v[i].reframed)
            rc = group_remerge(&s->v[i]);
    if (rc != EMBER_OK)
        return rc;
    r->groups = em_calloc(s->n + 1, sizeof *r->groups);
    if (r->groups == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu groups", s->n);
    for (size_t i = 0; i < s->n; i++) {
        wgroup *g = &s->v[i];
        em_pgroup *o = &r->groups[i];
        o->labels = g->labels;
        o->nlabels = g->nlabels;
        o->prof = g->prof;
        o->prof.has_whole = g->has_whole;
        o->prof.whole = g->whole;
        o->merged = g->merged;
        o->nseries = g->nseries;
        o->nprofiles = g->nprofiles;
        em_free(g->ids);
        memset(g, 0, sizeof *g);
    }
    r->ngroups = s->n;
    s->n = 0;
    r->type = s->type;
    s->type = NULL;
    return EMBER_OK;
}

int em_type_unit(const char *type, char **unit)
{
    em_rprofile tmp;
    int rc = em_rprofile_init(&tmp, type);

    *unit = NULL;
    if (rc == EMBER_OK) {
        *unit = tmp.unit;
        tmp.unit = NULL;
    }
    em_rprofile_free(&tmp);
    return rc;
}

/* True when chain CH's groups may stay unresolved: the caller asked for
** stack ids only and no filter left after the engine's needs names (a top
** filters nothing). */
static bool ids_only(const ectx *e, const em_pchain *ch)
{
    for (size_t i = 0; i < ch->nops; i++)
        if (!ch->ops[i].pushed && ch->ops[i].op != EM_OP_TOP)
            return false;
    return (e->flags & EM_QUERY_IDS_ONLY) != 0;
}

/* The smallest N of the tops in OPS, or LIMIT when smaller (0: none). */
static size_t ops_top_limit(const em_pop *ops, size_t nops, size_t limit)
{
    for (size_t i = 0; i < nops; i++)
        if (ops[i].op == EM_OP_TOP && (limit == 0 || ops[i].n < limit))
            limit = ops[i].n;
    return limit;
}

/* The row limit of P's result: top(top(P, 5), 3) shows 3 rows, and so
** does top(top(P, 3), 5); a top on either side of a diff limits the diff. */
static size_t plan_top_limit(const em_plan *p)
{
    size_t limit = ops_top_limit(p->a.ops, p->a.nops, 0);

    limit = ops_top_limit(p->post, p->npost, limit);
    if (p->kind == EMBER_RESULT_DIFF)
        limit = ops_top_limit(p->b.ops, p->b.nops, limit);
    return limit;
}

/* Gives each group of S an empty profile of S's type in place of its
** resolved stacks, and marks R as holding ids only. */
static int groups_unresolved(gset *s, ember_result *r)
{
    int rc = EMBER_OK;

    for (size_t g = 0; g < s->n && rc == EMBER_OK; g++)
        rc = em_rprofile_init(&s->v[g].prof, s->type);
    r->ids_only = true;
    return rc;
}

/* For -o pprof (EM_QUERY_IDS_ONLY), R's lone group as pprof, encoded here
** inside the query's snapshot: rendering it later reads no database, and
** a write in between cannot reach it. Nothing for other results. */
static int group_pprof(ectx *e, ember_result *r)
{
    em_pgroup *g = r->ngroups == 1 ? &r->groups[0] : NULL;

    if ((e->flags & EM_QUERY_IDS_ONLY) == 0 || g == NULL ||
        g->merged == NULL || r->type == NULL)
        return EMBER_OK;
    return em_pprof_encode(em_reader_snapshot(e->rd), g->merged, r->type,
                           EMBER_PPROF_GZIP, &g->pprof, &g->pprof_len);
}

/* The granularity P's profiles are shown at: lines for a list, as pprof's
** -list forces them. */
static int plan_gran(const em_plan *p)
{
    return p->view.op == EM_VIEW_LIST ? EM_GRAN_LINES : p->granularity;
}

/* Renames every group's frames to GRAN, now that the filters, which
** match functions, have run (pprof aggregates after filtering). */
static int groups_regranulate(gset *s, int gran)
{
    int rc = EMBER_OK;

    for (size_t g = 0; g < s->n && rc == EMBER_OK; g++)
        rc = em_rprofile_regranulate(&s->v[g].prof, gran);
    return rc;
}

static int exec_profiles(ectx *e, const em_plan *p, ember_result *r)
{
    gset s;
    int rc;

    e->build_gran = plan_gran(p) != EM_GRAN_FUNCTIONS ? EM_GRAN_ADDRESSES
                                                      : EM_GRAN_FUNCTIONS;
    if (p->kind == EMBER_RESULT_DIFF) {
        rc = exec_diff(e, p, &s);
    } else {
        rc = chain_merge(e, &p->a, &s);
        if (rc == EMBER_OK && s.type != NULL && ids_only(e, &p->a))
            rc = groups_unresolved(&s, r);
        else if (rc == EMBER_OK && s.type != NULL)
            rc = groups_resolve(e, s.type, (gset *[]){ &s }, 1);
        if (rc == EMBER_OK)
            rc = groups_filter(&s, &p->a);
    }
    if (rc == EMBER_OK)
        rc = groups_regranulate(&s, plan_gran(p));
    if (rc == EMBER_OK)
        rc = groups_move(&s, r);
    if (rc == EMBER_OK)
        rc = group_pprof(e, r);
    if (rc == EMBER_OK)
        rc = em_type_unit(r->type, &r->unit);
    if (rc == EMBER_OK && p->view.op != EM_VIEW_NONE &&
        (r->view_re = em_strdup(p->view.text)) == NULL)
        rc = em_err(EMBER_ENOMEM, "query: view");
    r->view = rc == EMBER_OK ? p->view.op : EM_VIEW_NONE;
    r->top_limit = plan_top_limit(p);
    gset_free(&s);
    return rc;
}

int em_exec(ember_db *db, const char *text, const em_plan *plan,
            int64_t step_ms, unsigned flags, ember_result **out)
{
    ectx e = { .db = db, .text = text, .step = step_ms, .flags = flags };
    ember_result *r = em_calloc(1, sizeof *r);
    int rc;

    *out = NULL;
    if (r == NULL)
        return em_err(EMBER_ENOMEM, "query: result");
    r->kind = plan->kind;
    r->db = db;
    rc = em_reader_open(db, &e.rd);
    if (rc == EMBER_OK) {
        if (plan->kind == EMBER_RESULT_SERIES)
            rc = em_exec_series(&e, plan, r);
        else if (plan->kind == EMBER_RESULT_TABLE)
            rc = em_exec_table(&e, plan, r);
        else
            rc = exec_profiles(&e, plan, r);
    }
    em_reader_close(e.rd);
    if (rc != EMBER_OK) {
        em_result_free(r);
        return rc;
    }
    if (!e.all_time && e.any_range) {
        r->from_ms = e.from;
        r->to_ms = e.to;
    }
    r->step_ms = plan->kind == EMBER_RESULT_SERIES ? step_ms : 0;
    *out = r;
    return EMBER_OK;
}
