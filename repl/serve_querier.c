/*
** repl/serve_querier.c: the part of Pyroscope's querier that Grafana's
** Pyroscope data source calls, as Connect unary calls with protobuf bodies
** (POST /querier.v1.QuerierService/METHOD; docs/protocol.md):
** ProfileTypes, LabelNames, LabelValues, Series, SelectMergeStacktraces
** (the flame graph as levels), SelectMergeProfile (the merge as pprof),
** SelectSeries (totals over time) and Diff (two flame graphs in one).
**
** Pyroscope names a type by five parts, without Ember's ":delta": an ID is
** resolved to the stored type it names, the delta one when both exist.
** Matchers are selectors of Ember's query language; Pyroscope's own
** __profile_type__ and __name__ matchers select by type. Each call becomes
** one of Ember's own: a query (ember_query, rendered by em_levels_build
** for flame graphs) or a metadata call on a selector.
*/
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "query/query.h"
#include "repl/serve.h"
#include "proto/pyroscope/querier.pb-c.h"

#define MAX_NODES_DEFAULT 8192          /* Pyroscope's */
#define MAX_NODES_MAX (1 << 20)
#define MAX_MATCHERS 32

/* ---- types ------------------------------------------------------------- */

/* The first five parts of TYPE (Pyroscope's ID) into BUF. */
static void type_id(const char *type, char *buf, size_t cap)
{
    const char *p = type;

    for (int colons = 0; *p != '\0'; p++)
        if (*p == ':' && ++colons == 5)
            break;
    snprintf(buf, cap, "%.*s", (int)(p - type), type);
}

/* The stored type Pyroscope's ID names (*OUT, em_free it), the delta one
** when both exist; NULL when none is stored. */
static int type_resolve(ember_db *db, const char *id, char **out)
{
    ember_strlist *l = NULL;
    char buf[512];
    int rc = ember_profile_types(db, NULL, &l);

    *out = NULL;
    for (size_t i = 0; rc == EMBER_OK && i < ember_strlist_count(l); i++) {
        const char *t = ember_strlist_get(l, i);
        type_id(t, buf, sizeof buf);
        if (strcmp(buf, id) != 0 || (*out != NULL && strstr(t, ":delta") ==
                                                         NULL))
            continue;
        em_free(*out);
        if ((*out = em_strdup(t)) == NULL)
            rc = em_err(EMBER_ENOMEM, "out of memory");
    }
    ember_strlist_free(l);
    return rc;
}

/* ---- matchers ------------------------------------------------------------ */

/* A parsed selector, and what Pyroscope's own matchers turned into. */
typedef struct sel_parse {
    em_node *node;
    ember_matcher m[EM_MAX_CLI_LABELS];
    char *type;                 /* resolved __profile_type__, owned */
    char *name_re;              /* "NAME:.*" for __name__, owned */
    ember_selector sel;
} sel_parse;

static void sel_free(sel_parse *s)
{
    em_node_free(s->node);
    em_free(s->type);
    em_free(s->name_re);
    memset(s, 0, sizeof *s);
}

/* Matcher M of Pyroscope's own, made Ember's; false when it is not one. */
static bool sel_own(ember_db *db, sel_parse *s, const ember_matcher *m,
                    int *rc)
{
    if (strcmp(m->name, "__profile_type__") == 0 && m->op == EMBER_MATCH_EQ) {
        *rc = type_resolve(db, m->value, &s->type);
        if (*rc == EMBER_OK && s->type == NULL)     /* none: match nothing */
            *rc = (s->type = em_strdup("none:none:none:none:none")) != NULL
                  ? EMBER_OK : EMBER_ENOMEM;
        return true;
    }
    if (strcmp(m->name, "__name__") == 0 && m->op == EMBER_MATCH_EQ) {
        if (asprintf(&s->name_re, "%s:.*", m->value) < 0)
            *rc = em_err(EMBER_ENOMEM, "out of memory");
        s->m[s->sel.nmatchers++] = (ember_matcher){ "__type__", s->name_re,
                                                    EMBER_MATCH_RE };
        return true;
    }
    return false;
}

/* Parses TEXT ("{k="v", ...}", or NULL for all) into S's selector. */
static int sel_parse_text(ember_db *db, const char *text, int64_t from,
                          int64_t to, sel_parse *s)
{
    int rc = EMBER_OK;
    const em_sel *q;

    memset(s, 0, sizeof *s);
    s->sel = (ember_selector){ .sz = sizeof s->sel, .from_ms = from,
                               .to_ms = to, .matchers = s->m };
    if (text == NULL || text[0] == '\0')
        return EMBER_OK;
    if ((rc = em_query_parse(text, &s->node)) != EMBER_OK)
        return rc;
    if (s->node->kind != EM_NODE_SELECTOR)
        return em_err(EMBER_EINVAL, "matcher %s: not a selector", text);
    q = &s->node->u.sel;
    if (q->nmatchers > EM_MAX_CLI_LABELS)
        return em_err(EMBER_ELIMIT, "matcher %s: more than %d matchers",
                      text, EM_MAX_CLI_LABELS);
    for (size_t i = 0; i < q->nmatchers && rc == EMBER_OK; i++)
        if (!sel_own(db, s, &q->matchers[i], &rc))
            s->m[s->sel.nmatchers++] = q->matchers[i];
    s->sel.type = s->type != NULL ? s->type : q->type;
    return rc;
}

/* ---- answers ------------------------------------------------------------- */

static int reply(em_resp *rs, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);

    if (em_buf_reserve(&rs->body, n + 1) != EMBER_OK)
        return em_connect_error(rs, "unavailable", "out of memory");
    rs->body.len = protobuf_c_message_pack(m, rs->body.p);
    rs->ctype = "application/proto";
    return EMBER_OK;
}

/* ---- ProfileTypes ---------------------------------------------------------- */

/* Splits TYPE's parts into P (the strings point into BUF). */
static void type_parts(const char *type, char *buf, size_t cap,
                       Types__V1__ProfileType *p)
{
    char *f[6] = { 0 }, *save = NULL;
    int n = 0;

    snprintf(buf, cap, "%s", type);
    for (char *t = strtok_r(buf, ":", &save); t != NULL && n < 6;
         t = strtok_r(NULL, ":", &save))
        f[n++] = t;
    p->name = f[0] != NULL ? f[0] : "";
    p->sample_type = f[1] != NULL ? f[1] : "";
    p->sample_unit = f[2] != NULL ? f[2] : "";
    p->period_type = f[3] != NULL ? f[3] : "";
    p->period_unit = f[4] != NULL ? f[4] : "";
}

static int types_reply(em_resp *rs, em_strset *ids)
{
    Querier__V1__ProfileTypesResponse r = QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    Types__V1__ProfileType *t = em_calloc(ids->n + 1, sizeof *t);
    Types__V1__ProfileType **tp = em_calloc(ids->n + 1, sizeof *tp);
    char (*bufs)[512] = em_calloc(ids->n + 1, sizeof *bufs);
    int rc;

    if (t == NULL || tp == NULL || bufs == NULL) {
        rc = em_connect_error(rs, "unavailable", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ids->n; i++) {
        types__v1__profile_type__init(&t[i]);
        t[i].id = ids->v[i];
        type_parts(ids->v[i], bufs[i], sizeof bufs[i], &t[i]);
        tp[i] = &t[i];
    }
    r.n_profile_types = ids->n;
    r.profile_types = tp;
    rc = reply(rs, &r.base);
done:
    em_free(t);
    em_free(tp);
    em_free(bufs);
    return rc;
}

static int q_profile_types(em_req *rq, em_resp *rs, const uint8_t *p,
                           size_t n)
{
    Querier__V1__ProfileTypesRequest *r =
        querier__v1__profile_types_request__unpack(NULL, n, p);
    ember_strlist *l = NULL;
    em_strset ids = { 0 };
    char id[512];
    int rc;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "ProfileTypesRequest: "
                                "not a valid message");
    querier__v1__profile_types_request__free_unpacked(r, NULL);
    rc = ember_profile_types(rq->srv->db, NULL, &l);
    for (size_t i = 0; rc == EMBER_OK && i < ember_strlist_count(l); i++) {
        type_id(ember_strlist_get(l, i), id, sizeof id);
        rc = em_strset_add(&ids, id);
    }
    ember_strlist_free(l);
    em_strset_sort(&ids);
    rc = rc == EMBER_OK ? types_reply(rs, &ids) : em_connect_ember(rs, rc);
    em_strset_free(&ids);
    return rc;
}

/* ---- LabelNames, LabelValues ---------------------------------------------- */

/* Adds to OUT the label names (NAME NULL) or NAME's values among what
** matcher TEXT selects. */
static int labels_of(ember_db *db, const char *text, const char *name,
                     em_strset *out)
{
    sel_parse s;
    ember_strlist *l = NULL;
    int rc = sel_parse_text(db, text, 0, 0, &s);

    if (rc == EMBER_OK && name == NULL)
        rc = ember_label_names(db, &s.sel, &l);
    else if (rc == EMBER_OK && strcmp(name, "__name__") == 0)
        rc = ember_profile_types(db, &s.sel, &l);
    else if (rc == EMBER_OK)
        rc = ember_label_values(db, name, &s.sel, &l);
    for (size_t i = 0; rc == EMBER_OK && i < ember_strlist_count(l); i++) {
        const char *v = ember_strlist_get(l, i);
        char buf[512];
        if (name != NULL && strcmp(name, "__name__") == 0) {
            snprintf(buf, sizeof buf, "%.*s", (int)strcspn(v, ":"), v);
            v = buf;
        }
        rc = em_strset_add(out, v);
    }
    ember_strlist_free(l);
    sel_free(&s);
    return rc;
}

static int names_reply(em_resp *rs, const em_strset *set, bool values)
{
    Types__V1__LabelNamesResponse a = TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
    Types__V1__LabelValuesResponse b = TYPES__V1__LABEL_VALUES_RESPONSE__INIT;

    a.n_names = b.n_names = set->n;
    a.names = b.names = set->v;
    return reply(rs, values ? &b.base : &a.base);
}

/* The union over MATCHERS (all series when none). */
static int labels_union(em_req *rq, em_resp *rs, char **matchers, size_t nm,
                        const char *name)
{
    em_strset set = { 0 };
    int rc = EMBER_OK;

    if (nm > MAX_MATCHERS)
        return em_connect_error(rs, "invalid_argument", "more than 32 "
                                "matchers");
    for (size_t i = 0; i < (nm > 0 ? nm : 1) && rc == EMBER_OK; i++)
        rc = labels_of(rq->srv->db, nm > 0 ? matchers[i] : NULL, name, &set);
    em_strset_sort(&set);
    rc = rc == EMBER_OK ? names_reply(rs, &set, name != NULL)
                        : em_connect_ember(rs, rc);
    em_strset_free(&set);
    return rc;
}

static int q_label_names(em_req *rq, em_resp *rs, const uint8_t *p, size_t n)
{
    Types__V1__LabelNamesRequest *r =
        types__v1__label_names_request__unpack(NULL, n, p);
    int rc;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "LabelNamesRequest: "
                                "not a valid message");
    rc = labels_union(rq, rs, r->matchers, r->n_matchers, NULL);
    types__v1__label_names_request__free_unpacked(r, NULL);
    return rc;
}

static int q_label_values(em_req *rq, em_resp *rs, const uint8_t *p,
                          size_t n)
{
    Types__V1__LabelValuesRequest *r =
        types__v1__label_values_request__unpack(NULL, n, p);
    int rc;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "LabelValuesRequest: "
                                "not a valid message");
    rc = r->name[0] == '\0'
         ? em_connect_error(rs, "invalid_argument", "LabelValuesRequest: "
                            "no name")
         : labels_union(rq, rs, r->matchers, r->n_matchers, r->name);
    types__v1__label_values_request__free_unpacked(r, NULL);
    return rc;
}

/* ---- Series ------------------------------------------------------------------ */

/* Whether label NAME is asked for (all when none are named). */
static bool wanted(const Querier__V1__SeriesRequest *r, const char *name)
{
    for (size_t i = 0; i < r->n_label_names; i++)
        if (strcmp(r->label_names[i], name) == 0)
            return true;
    return r->n_label_names == 0;
}

/* Appends "NAME\1VALUE\1" (VALUE's first N bytes) to K. */
static int key_put(em_buf *k, const char *name, const char *value, size_t n)
{
    if (em_buf_put(k, name, strlen(name)) || em_buf_put(k, "\1", 1) ||
        em_buf_put(k, value, n) || em_buf_put(k, "\1", 1))
        return em_err(EMBER_ENOMEM, "out of memory");
    return EMBER_OK;
}

/* One label set as a key "n\1v\1n\1v..." (sorted by name, as stored), so
** that a set of keys holds distinct label sets. */
static int series_key(ember_db *db, uint32_t id,
                      const Querier__V1__SeriesRequest *r, em_strset *out)
{
    ember_strlist *l = NULL;
    em_buf k = { 0 };
    char tid[512];
    int rc = ember_series_labels(db, id, &l);

    if (rc == EMBER_OK && ember_strlist_count(l) > 0) {
        const char *type = ember_strlist_get(l, 0);
        type_id(type, tid, sizeof tid);
        if (wanted(r, "__name__"))
            rc = key_put(&k, "__name__", type, strcspn(type, ":"));
        if (rc == EMBER_OK && wanted(r, "__profile_type__"))
            rc = key_put(&k, "__profile_type__", tid, strlen(tid));
    }
    for (size_t i = 1; rc == EMBER_OK && i + 1 < ember_strlist_count(l);
         i += 2)
        if (wanted(r, ember_strlist_get(l, i)))
            rc = key_put(&k, ember_strlist_get(l, i),
                         ember_strlist_get(l, i + 1),
                         strlen(ember_strlist_get(l, i + 1)));
    if (rc == EMBER_OK && (rc = em_buf_put(&k, "", 1)) == EMBER_OK)
        rc = em_strset_add(out, (const char *)k.p);
    em_buf_free(&k);
    ember_strlist_free(l);
    return rc;
}

/* The series ids matcher TEXT selects over [FROM, TO], their keys to OUT. */
static int series_of(ember_db *db, const char *text, int64_t from,
                     int64_t to, const Querier__V1__SeriesRequest *r,
                     em_strset *out)
{
    sel_parse s;
    ember_totals *t = NULL;
    int rc = sel_parse_text(db, text, from, to, &s);

    if (rc == EMBER_OK)
        rc = ember_totals_get(db, &s.sel, &t);
    for (size_t i = 0; rc == EMBER_OK && i < ember_totals_count(t); i++) {
        uint32_t id;
        const int64_t *times, *values;
        size_t n;
        ember_totals_series(t, i, &id, &times, &values, &n);
        rc = series_key(db, id, r, out);
    }
    ember_totals_free(t);
    sel_free(&s);
    return rc;
}

/* KEY ("n\1v\1...", modified) as a Labels message; its pairs in PAIRS. */
static void key_labels(char *key, Types__V1__Labels *l,
                       Types__V1__LabelPair *pairs, Types__V1__LabelPair **pp,
                       size_t max)
{
    char *save = NULL, *name = NULL;
    size_t n = 0;

    types__v1__labels__init(l);
    for (char *f = strtok_r(key, "\1", &save); f != NULL && n < max;
         f = strtok_r(NULL, "\1", &save)) {
        if (name == NULL) {
            name = f;
            continue;
        }
        types__v1__label_pair__init(&pairs[n]);
        pairs[n].name = name;
        pairs[n].value = f;
        pp[n] = &pairs[n];
        n++;
        name = NULL;
    }
    l->labels = pp;
    l->n_labels = n;
}

static int series_reply(em_resp *rs, em_strset *keys)
{
    enum { MAXL = EM_MAX_CLI_LABELS + 2 };
    Querier__V1__SeriesResponse r = QUERIER__V1__SERIES_RESPONSE__INIT;
    Types__V1__Labels *ls = em_calloc(keys->n + 1, sizeof *ls);
    Types__V1__Labels **lp = em_calloc(keys->n + 1, sizeof *lp);
    Types__V1__LabelPair *pairs = em_calloc((keys->n + 1) * MAXL,
                                            sizeof *pairs);
    Types__V1__LabelPair **pp = em_calloc((keys->n + 1) * MAXL, sizeof *pp);
    int rc;

    if (ls == NULL || lp == NULL || pairs == NULL || pp == NULL) {
        rc = em_connect_error(rs, "unavailable", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < keys->n; i++) {
        key_labels(keys->v[i], &ls[i], pairs + i * MAXL, pp + i * MAXL, MAXL);
        lp[i] = &ls[i];
    }
    r.n_labels_set = keys->n;
    r.labels_set = lp;
    rc = reply(rs, &r.base);
done:
    em_free(ls);
    em_free(lp);
    em_free(pairs);
    em_free(pp);
    return rc;
}

static int q_series(em_req *rq, em_resp *rs, const uint8_t *p, size_t n)
{
    Querier__V1__SeriesRequest *r =
        querier__v1__series_request__unpack(NULL, n, p);
    em_strset keys = { 0 };
    int rc = EMBER_OK;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "SeriesRequest: not "
                                "a valid message");
    if (r->n_matchers > MAX_MATCHERS)
        rc = em_err(EMBER_EINVAL, "more than %d matchers", MAX_MATCHERS);
    for (size_t i = 0; rc == EMBER_OK &&
         i < (r->n_matchers > 0 ? r->n_matchers : 1); i++)
        rc = series_of(rq->srv->db, r->n_matchers > 0 ? r->matchers[i] : NULL,
                       r->start, r->end, r, &keys);
    querier__v1__series_request__free_unpacked(r, NULL);
    em_strset_sort(&keys);
    rc = rc == EMBER_OK ? series_reply(rs, &keys) : em_connect_ember(rs, rc);
    em_strset_free(&keys);
    return rc;
}

/* ---- SelectMergeStacktraces: the flame graph ------------------------------- */

/* The options of a query run for RQ: the server's limits (lowered by the
** request's Connect-Timeout-Ms) over [FROM, TO]. False when the request's
** timeout is malformed: RS holds the answer then. */
static bool query_opts(em_req *rq, em_resp *rs, int64_t from, int64_t to,
                       ember_query_opts *o)
{
    bool bad = false;

    *o = (ember_query_opts){ .sz = sizeof *o, .from_ms = from, .to_ms = to };
    em_serve_query_limits(rq, rs, o, &bad);
    return !bad;
}

/* Runs "PRE TYPE SELECTOR POST" under O as Ember's own query: the
** selector alone for a flame graph, wrapped in sum by (...) (total(...))
** for SelectSeries. *R is NULL when no stored type has the ID. */
static int select_query(ember_db *db, const char *id, const char *selector,
                        const char *pre, const char *post,
                        const ember_query_opts *o, ember_result **r)
{
    char *type = NULL, *text = NULL;
    int rc = type_resolve(db, id, &type);

    *r = NULL;
    if (rc != EMBER_OK || type == NULL)
        return rc;
    if (selector == NULL || selector[0] == '\0')
        selector = "{}";
    if (asprintf(&text, "%s%s%s%s", pre, type, selector, post) < 0)
        rc = em_err(EMBER_ENOMEM, "out of memory");
    else
        rc = ember_query(db, text, o, r);
    free(text);
    em_free(type);
    return rc;
}

/* LV's levels as messages: *LP points at each of *LS (free both). */
static int level_msgs(const em_levels *lv, Querier__V1__Level **ls,
                      Querier__V1__Level ***lp)
{
    *ls = em_calloc(lv->nlevels + 1, sizeof **ls);
    *lp = em_calloc(lv->nlevels + 1, sizeof **lp);
    if (*ls == NULL || *lp == NULL)
        return EMBER_ENOMEM;
    for (size_t i = 0; i < lv->nlevels; i++) {
        querier__v1__level__init(&(*ls)[i]);
        (*ls)[i].values = lv->levels[i].values;
        (*ls)[i].n_values = lv->levels[i].n;
        (*lp)[i] = &(*ls)[i];
    }
    return EMBER_OK;
}

static int flame_reply(em_resp *rs, const em_levels *lv)
{
    Querier__V1__SelectMergeStacktracesResponse r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    Querier__V1__FlameGraph fg = QUERIER__V1__FLAME_GRAPH__INIT;
    Querier__V1__Level *ls, **lp;
    int rc;

    if (level_msgs(lv, &ls, &lp) != EMBER_OK) {
        rc = em_connect_error(rs, "unavailable", "out of memory");
        goto done;
    }
    fg.names = (char **)lv->names;
    fg.n_names = lv->nnames;
    fg.levels = lp;
    fg.n_levels = lv->nlevels;
    fg.total = lv->total;
    fg.max_self = lv->max_self;
    r.flamegraph = &fg;
    rc = reply(rs, &r.base);
done:
    em_free(ls);
    em_free(lp);
    return rc;
}

/* The levels of R's one group; an empty profile when there is none. */
static int flame_of(em_resp *rs, const ember_result *r, int64_t max_nodes)
{
    em_rprofile empty = { 0 };
    em_levels lv;
    int rc;

    if (r != NULL && r->kind != EMBER_RESULT_PROFILE)
        return em_connect_error(rs, "invalid_argument", "the selector does "
                                "not select a profile");
    rc = em_levels_build(r != NULL && r->ngroups > 0 ? &r->groups[0].prof
                                                      : &empty,
                         max_nodes, &lv);
    if (rc != EMBER_OK)
        return em_connect_ember(rs, rc);
    rc = flame_reply(rs, &lv);
    em_levels_free(&lv);
    return rc;
}

static int q_merge_stacktraces(em_req *rq, em_resp *rs, const uint8_t *p,
                               size_t n)
{
    Querier__V1__SelectMergeStacktracesRequest *r =
        querier__v1__select_merge_stacktraces_request__unpack(NULL, n, p);
    ember_result *res = NULL;
    ember_query_opts o;
    int64_t max_nodes = MAX_NODES_DEFAULT;
    int rc = EMBER_OK;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "SelectMerge"
                                "StacktracesRequest: not a valid message");
    if (r->max_nodes > 0)
        max_nodes = r->max_nodes < MAX_NODES_MAX ? r->max_nodes
                                                 : MAX_NODES_MAX;
    if (r->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE)
        rc = em_connect_error(rs, "unimplemented", "the tree format is not "
                              "served: ask for the flame graph");
    else if (!query_opts(rq, rs, r->start, r->end, &o))
        ;                               /* answered */
    else if ((rc = select_query(rq->srv->db, r->profile_typeid,
                                r->label_selector, "", "", &o, &res)) ==
             EMBER_OK)
        rc = flame_of(rs, res, max_nodes);
    else
        rc = em_connect_ember(rs, rc);
    ember_result_free(res);
    querier__v1__select_merge_stacktraces_request__free_unpacked(r, NULL);
    return rc;
}

/* ---- SelectMergeProfile: the merge as pprof ---------------------------------- */

/* The merge of what R selects as pprof's bytes, not gzipped: a Connect
** answer is the bare message. An unknown type is an empty profile. */
static int merge_pprof(ember_db *db,
                       const Querier__V1__SelectMergeProfileRequest *r,
                       const ember_query_opts *o, void **out, size_t *len)
{
    ember_result *res = NULL;
    char *type = NULL, *text = NULL;
    const char *sel = r->label_selector[0] != '\0' ? r->label_selector
                                                   : "{}";
    int rc = type_resolve(db, r->profile_typeid, &type);

    *out = NULL;
    *len = 0;
    if (rc == EMBER_OK && asprintf(&text, "%s%s",
                                   type != NULL ? type
                                   : "none:none:none:none:none", sel) < 0)
        rc = em_err(EMBER_ENOMEM, "out of memory");
    if (rc == EMBER_OK)
        rc = em_query_run(db, text, o, EM_QUERY_IDS_ONLY, &res);
    if (rc == EMBER_OK && res->kind != EMBER_RESULT_PROFILE)
        rc = em_err(EMBER_EINVAL, "the selector does not select a profile");
    if (rc == EMBER_OK && res->ngroups == 1 && res->groups[0].pprof != NULL)
        rc = em_gunzip(res->groups[0].pprof, res->groups[0].pprof_len,
                       SIZE_MAX, out, len);
    ember_result_free(res);
    free(text);
    em_free(type);
    return rc;
}

static int q_merge_profile(em_req *rq, em_resp *rs, const uint8_t *p,
                           size_t n)
{
    Querier__V1__SelectMergeProfileRequest *r =
        querier__v1__select_merge_profile_request__unpack(NULL, n, p);
    ember_query_opts o;
    void *pb = NULL;
    size_t len = 0;
    int rc;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "SelectMergeProfile"
                                "Request: not a valid message");
    if (!query_opts(rq, rs, r->start, r->end, &o)) {
        querier__v1__select_merge_profile_request__free_unpacked(r, NULL);
        return EMBER_OK;                /* answered */
    }
    rc = merge_pprof(rq->srv->db, r, &o, &pb, &len);
    querier__v1__select_merge_profile_request__free_unpacked(r, NULL);
    if (rc != EMBER_OK)
        return em_connect_ember(rs, rc);
    em_buf_free(&rs->body);
    rs->body = (em_buf){ pb, len, len };
    rs->ctype = "application/proto";
    return EMBER_OK;
}

/* ---- Diff: two flame graphs in one ----------------------------------------------- */

/* One side of a diff as Ember's selector of R's range, "TYPE{...}[Dms] @
** END", into W; an unknown type selects nothing. */
static int diff_side(ember_db *db,
                     const Querier__V1__SelectMergeStacktracesRequest *r,
                     const char *side, em_buf *w)
{
    char *type = NULL, *text = NULL;
    int rc;

    if (r == NULL)
        return em_err(EMBER_EINVAL, "%s: missing", side);
    if (r->end <= r->start)
        return em_err(EMBER_EINVAL, "%s: end %lld is not after start %lld",
                      side, (long long)r->end, (long long)r->start);
    if ((rc = type_resolve(db, r->profile_typeid, &type)) != EMBER_OK)
        return rc;
    if (asprintf(&text, "%s%s[%lldms] @ %lld",
                 type != NULL ? type : "none:none:none:none:none",
                 r->label_selector[0] != '\0' ? r->label_selector : "{}",
                 (long long)(r->end - r->start), (long long)r->end) < 0)
        rc = em_err(EMBER_ENOMEM, "out of memory");
    else
        rc = em_buf_put(w, text, strlen(text));
    free(text);
    em_free(type);
    return rc;
}

static int diff_reply(em_resp *rs, const em_levels *lv)
{
    Querier__V1__DiffResponse r = QUERIER__V1__DIFF_RESPONSE__INIT;
    Querier__V1__FlameGraphDiff fg = QUERIER__V1__FLAME_GRAPH_DIFF__INIT;
    Querier__V1__Level *ls, **lp;
    int rc;

    if (level_msgs(lv, &ls, &lp) != EMBER_OK) {
        rc = em_connect_error(rs, "unavailable", "out of memory");
        goto done;
    }
    fg.names = (char **)lv->names;
    fg.n_names = lv->nnames;
    fg.levels = lp;
    fg.n_levels = lv->nlevels;
    fg.total = lv->total;
    fg.max_self = lv->max_self;
    fg.leftticks = lv->base_total;
    fg.rightticks = lv->target_total;
    r.flamegraph = &fg;
    rc = reply(rs, &r.base);
done:
    em_free(ls);
    em_free(lp);
    return rc;
}

/* diff(LEFT, RIGHT) run as Ember's own query, laid out as levels. */
static int diff_run(ember_db *db, const Querier__V1__DiffRequest *r,
                    const ember_query_opts *o, em_resp *rs)
{
    em_buf text = { 0 };
    ember_result *res = NULL;
    em_rprofile empty = { .diff = true };
    em_levels lv;
    int64_t max_nodes = MAX_NODES_DEFAULT;
    int rc = em_buf_put(&text, "diff(", 5);

    if (rc == EMBER_OK)
        rc = diff_side(db, r->left, "left", &text);
    if (rc == EMBER_OK && (rc = em_buf_put(&text, ", ", 2)) == EMBER_OK)
        rc = diff_side(db, r->right, "right", &text);
    if (rc == EMBER_OK)
        rc = em_buf_put(&text, ")", 2);         /* and its NUL */
    if (rc == EMBER_OK)
        rc = ember_query(db, (const char *)text.p, o, &res);
    if (rc == EMBER_OK && r->left->max_nodes > 0)
        max_nodes = r->left->max_nodes < MAX_NODES_MAX ? r->left->max_nodes
                                                       : MAX_NODES_MAX;
    if (rc == EMBER_OK)
        rc = em_levels_build(res->ngroups > 0 ? &res->groups[0].prof
                                              : &empty, max_nodes, &lv);
    em_buf_free(&text);
    if (rc == EMBER_OK) {               /* names point into RES */
        rc = diff_reply(rs, &lv);
        em_levels_free(&lv);
    } else {
        rc = em_connect_ember(rs, rc);
    }
    ember_result_free(res);
    return rc;
}

static int q_diff(em_req *rq, em_resp *rs, const uint8_t *p, size_t n)
{
    Querier__V1__DiffRequest *r = querier__v1__diff_request__unpack(NULL, n,
                                                                    p);
    ember_query_opts o;
    int rc = EMBER_OK;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "DiffRequest: not a "
                                "valid message");
    if (query_opts(rq, rs, 0, 0, &o))   /* each side has its own range */
        rc = diff_run(rq->srv->db, r, &o, rs);
    querier__v1__diff_request__free_unpacked(r, NULL);
    return rc;
}

/* ---- SelectSeries: totals over time ------------------------------------------- */

/* "sum by (a, b) (total(": what goes before type and selector. */
static int series_wrap(const Querier__V1__SelectSeriesRequest *r, em_buf *w)
{
    bool avg = r->aggregation ==
        TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE;
    int rc = em_buf_put(w, avg ? "avg" : "sum", 3);

    for (size_t i = 0; rc == EMBER_OK && i < r->n_group_by; i++) {
        if ((rc = em_label_name_check(r->group_by[i])) != EMBER_OK)
            return rc;
        rc = em_buf_put(w, i == 0 ? " by (" : ", ", i == 0 ? 5 : 2);
        if (rc == EMBER_OK)
            rc = em_buf_put(w, r->group_by[i], strlen(r->group_by[i]));
    }
    if (rc == EMBER_OK && r->n_group_by > 0)
        rc = em_buf_put(w, ")", 1);
    if (rc == EMBER_OK)
        rc = em_buf_put(w, " (total(", 8);
    return rc;
}

static double series_sum(const em_series *s)
{
    double t = 0;

    for (size_t i = 0; i < s->n; i++)
        t += s->values[i];
    return t;
}

/* The series of R, the LIMIT largest by their sum (0: all), as a reply. */
static int series_points_reply(em_resp *rs, const ember_result *r,
                               int64_t limit)
{
    Querier__V1__SelectSeriesResponse out =
        QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
    size_t ns = r != NULL ? r->nseries : 0, np = 0, k = 0;
    Types__V1__Series *s = em_calloc(ns + 1, sizeof *s);
    Types__V1__Series **sp = em_calloc(ns + 1, sizeof *sp);
    Types__V1__LabelPair *pairs, **pp;
    Types__V1__Point *pts, **ptp;
    int rc = EMBER_OK;

    for (size_t i = 0; i < ns; i++)
        np += r->series[i].n;
    pairs = em_calloc(ns * EM_MAX_CLI_LABELS + 1, sizeof *pairs);
    pp = em_calloc(ns * EM_MAX_CLI_LABELS + 1, sizeof *pp);
    pts = em_calloc(np + 1, sizeof *pts);
    ptp = em_calloc(np + 1, sizeof *ptp);
    if (s == NULL || sp == NULL || pairs == NULL || pp == NULL ||
        pts == NULL || ptp == NULL) {
        rc = em_connect_error(rs, "unavailable", "out of memory");
        goto done;
    }
    for (size_t i = 0, pi = 0, li = 0; i < ns; i++) {
        const em_series *e = &r->series[i];
        types__v1__series__init(&s[i]);
        s[i].labels = pp + li;
        for (size_t j = 0; j < e->nlabels && j < EM_MAX_CLI_LABELS; j++) {
            if (strcmp(e->labels[j].name, "__type__") == 0)
                continue;
            types__v1__label_pair__init(&pairs[li]);
            pairs[li].name = (char *)e->labels[j].name;
            pairs[li].value = (char *)e->labels[j].value;
            pp[li] = &pairs[li];
            li++;
            s[i].n_labels++;
        }
        s[i].points = ptp + pi;
        s[i].n_points = e->n;
        for (size_t j = 0; j < e->n; j++, pi++) {
            types__v1__point__init(&pts[pi]);
            pts[pi].value = e->values[j];
            pts[pi].timestamp = e->times[j];
            ptp[pi] = &pts[pi];
        }
        sp[k++] = &s[i];
    }
    if (limit > 0 && (size_t)limit < k) {   /* the largest LIMIT, in order */
        for (size_t i = 0; i < (size_t)limit; i++)
            for (size_t j = i + 1; j < k; j++)
                if (series_sum(&r->series[sp[j] - s]) >
                    series_sum(&r->series[sp[i] - s])) {
                    Types__V1__Series *t = sp[i];
                    sp[i] = sp[j];
                    sp[j] = t;
                }
        k = (size_t)limit;
    }
    out.series = sp;
    out.n_series = k;
    rc = reply(rs, &out.base);
done:
    em_free(s);
    em_free(sp);
    em_free(pairs);
    em_free(pp);
    em_free(pts);
    em_free(ptp);
    return rc;
}

static int q_select_series(em_req *rq, em_resp *rs, const uint8_t *p,
                           size_t n)
{
    Querier__V1__SelectSeriesRequest *r =
        querier__v1__select_series_request__unpack(NULL, n, p);
    ember_result *res = NULL;
    ember_query_opts o;
    em_buf wrap = { 0 };
    int rc;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "SelectSeriesRequest: "
                                "not a valid message");
    if (!query_opts(rq, rs, r->start, r->end, &o)) {
        querier__v1__select_series_request__free_unpacked(r, NULL);
        return EMBER_OK;                /* answered */
    }
    rc = series_wrap(r, &wrap);
    if (rc == EMBER_OK)
        rc = em_buf_put(&wrap, "", 1);
    if (rc == EMBER_OK && !(r->step >= 0.001 && r->step <= 1e9))
        rc = em_err(EMBER_EINVAL, "step %g: expected seconds, at least "
                    "0.001", r->step);
    if (rc == EMBER_OK) {
        o.step_ms = (int64_t)(r->step * 1000);
        rc = select_query(rq->srv->db, r->profile_typeid, r->label_selector,
                          (const char *)wrap.p, "))", &o, &res);
    }
    rc = rc == EMBER_OK ? series_points_reply(rs, res,
                                              r->limit)
                        : em_connect_ember(rs, rc);
    ember_result_free(res);
    em_buf_free(&wrap);
    querier__v1__select_series_request__free_unpacked(r, NULL);
    return rc;
}

/* ---- dispatch ---------------------------------------------------------------- */

#define METHOD(name, in, out, run) \
    { name, &in##__descriptor, &out##__descriptor, run }

static const em_connect_method methods[] = {
    METHOD("ProfileTypes", querier__v1__profile_types_request,
           querier__v1__profile_types_response, q_profile_types),
    METHOD("LabelNames", types__v1__label_names_request,
           types__v1__label_names_response, q_label_names),
    METHOD("LabelValues", types__v1__label_values_request,
           types__v1__label_values_response, q_label_values),
    METHOD("Series", querier__v1__series_request,
           querier__v1__series_response, q_series),
    METHOD("SelectMergeStacktraces",
           querier__v1__select_merge_stacktraces_request,
           querier__v1__select_merge_stacktraces_response,
           q_merge_stacktraces),
    METHOD("SelectMergeProfile", querier__v1__select_merge_profile_request,
           perftools__profiles__profile, q_merge_profile),
    METHOD("SelectSeries", querier__v1__select_series_request,
           querier__v1__select_series_response, q_select_series),
    METHOD("Diff", querier__v1__diff_request, querier__v1__diff_response,
           q_diff),
};

int em_h_querier(em_req *rq, em_resp *rs)
{
    for (size_t i = 0; i < EM_ARRAY_LEN(methods); i++)
        if (strcmp(rq->seg, methods[i].name) == 0)
            return em_connect_call(rq, rs, &methods[i]);
    return em_connect_error(rs, "unimplemented", "querier.v1.QuerierService: "
                            "this method is not served");
}
