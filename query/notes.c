/*
** query/notes.c: what a query says to a person beside its result (issue
** 12, "silence where a user needs a word"), in two passes around the
** planner and the executor:
**
**   - before planning, types: a selector's short type name (`cpu`,
**     `inuse_space`, `alloc_objects`: a sample type, as pprof's
**     -sample_index names them) becomes the one stored type with that
**     sample type, narrowed by the selector's matchers when several are
**     stored (still several: an error listing them); a selector without a
**     type where one profile is needed takes the one CPU type among the
**     types it matches, with a note saying which. Full names are left as
**     written, so a parsed query prints the same;
**   - after running, when the result is empty (or one side of a diff is),
**     why: an unknown type, label name or value (each with "did you mean"
**     when one is close), matchers that select nothing together, a range
**     that misses every stored profile (with the stored span), and a
**     stack filter's regex (focus, ignore, hide, show, callers, callees)
**     that matches no function name.
**
** Every note goes to the result (ember_result_notes); none is an error:
** an empty answer is still an answer.
*/
#include <stdio.h>

#include "query/plan.h"

/* ---- names -------------------------------------------------------------- */

/* The sample type of TYPE ("process_cpu:cpu:nanoseconds:..." -> "cpu"),
** as *LEN bytes at the returned pointer; NULL when TYPE has no second
** field. */
static const char *sample_type(const char *type, size_t *len)
{
    const char *a = strchr(type, ':'), *b;

    if (a == NULL)
        return NULL;
    b = strchr(++a, ':');
    *len = b != NULL ? (size_t)(b - a) : strlen(a);
    return a;
}

static bool sample_type_is(const char *type, const char *name)
{
    size_t len;
    const char *st = sample_type(type, &len);

    return st != NULL && len == strlen(name) && memcmp(st, name, len) == 0;
}

static bool listed(const ember_strlist *l, const char *s)
{
    for (size_t i = 0; i < ember_strlist_count(l); i++)
        if (strcmp(ember_strlist_get(l, i), s) == 0)
            return true;
    return false;
}

/* How far S is from C: from C itself, and for a profile type also from
** its sample type, so that `cpuu` is near process_cpu:cpu:... */
static size_t distance(const char *s, const char *c, bool type)
{
    size_t len, d = em_edit_distance(s, strlen(s), c, strlen(c), false);
    const char *st = type ? sample_type(c, &len) : NULL;

    if (st != NULL) {
        size_t e = em_edit_distance(s, strlen(s), st, len, false);
        d = e < d ? e : d;
    }
    return d;
}

/* The entry of L closest to S, or NULL: within one edit for names of up to
** 4 bytes, two for longer (the parser's rule for function names). */
static const char *closest(const ember_strlist *l, const char *s, bool type)
{
    const char *best = NULL;
    size_t best_d = strlen(s) <= 4 ? 2 : 3;

    for (size_t i = 0; i < ember_strlist_count(l); i++) {
        size_t d = distance(s, ember_strlist_get(l, i), type);
        if (d < best_d) {
            best_d = d;
            best = ember_strlist_get(l, i);
        }
    }
    return best;
}

/* " (did you mean X?)" into BUF, or "" when nothing is close. */
static const char *did_you_mean(const char *near, bool quote, char *buf,
                                size_t cap)
{
    buf[0] = '\0';
    if (near != NULL)
        snprintf(buf, cap, " (did you mean %s%s%s?)", quote ? "\"" : "",
                 near, quote ? "\"" : "");
    return buf;
}

/* "a, b, c" of at most 8 entries of L (those with KEEP[i], all when NULL),
** into BUF. */
static const char *list_of(const ember_strlist *l, const bool *keep,
                           char *buf, size_t cap)
{
    size_t n = 0, shown = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < ember_strlist_count(l) && n < cap; i++) {
        if (keep != NULL && !keep[i])
            continue;
        if (shown++ == 8) {
            snprintf(buf + n, cap - n, ", ...");
            break;
        }
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", shown > 1 ? ", " : "",
                              ember_strlist_get(l, i));
    }
    return buf;
}

/* ---- before planning: types ------------------------------------------------ */

typedef struct tctx {
    ember_db *db;
    const char *text;
    ember_result *notes;
    ember_strlist *all;             /* every stored type, read once */
} tctx;

/* The types among those selected by SEL's matchers (its type ignored). */
static int matched_types(tctx *c, const em_sel *sel, ember_strlist **out)
{
    ember_selector view;

    em_sel_view(sel, 0, 0, &view);
    view.type = NULL;
    return ember_profile_types(c->db, &view, out);
}

/* Replaces SEL's type by TYPE. */
static int set_type(em_sel *sel, const char *type)
{
    char *t = em_strdup(type);

    if (t == NULL)
        return em_err(EMBER_ENOMEM, "query: type");
    em_free(sel->type);
    sel->type = t;
    return EMBER_OK;
}

/* A short type name (no ':'): the one stored type of that sample type;
** ambiguous, the one among them SEL's matchers select; else an error. */
static int short_type(tctx *c, em_sel *sel)
{
    size_t n = ember_strlist_count(c->all), k = 0, only = 0;
    bool *cand = em_calloc(n + 1, sizeof *cand);
    ember_strlist *mt = NULL;
    char list[512];
    int rc = EMBER_OK;

    if (cand == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu types", n);
    for (size_t i = 0; i < n; i++)
        if ((cand[i] = sample_type_is(ember_strlist_get(c->all, i),
                                      sel->type)))
            k++, only = i;
    if (k > 1 && (rc = matched_types(c, sel, &mt)) == EMBER_OK) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (cand[i] && listed(mt, ember_strlist_get(c->all, i)))
                m++, only = i;
        if (m == 1)
            k = 1;
    }
    if (rc == EMBER_OK && k == 1)
        rc = set_type(sel, ember_strlist_get(c->all, only));
    else if (rc == EMBER_OK && k > 1)
        rc = em_query_error(c->text, sel->type_pos, "profile type \"%s\" is "
                            "ambiguous: %zu stored types have that sample "
                            "type (%s); write one in full", sel->type, k,
                            list_of(c->all, cand, list, sizeof list));
    ember_strlist_free(mt);
    em_free(cand);
    return rc;
}

/* A selector without a type where one profile is needed: when it matches
** several types of which exactly one samples CPU time, that one. */
static int pick_cpu(tctx *c, const em_node *n, em_sel *sel)
{
    ember_strlist *mt = NULL;
    size_t k = 0, only = 0;
    int rc = matched_types(c, sel, &mt);

    for (size_t i = 0; rc == EMBER_OK && i < ember_strlist_count(mt); i++)
        if (sample_type_is(ember_strlist_get(mt, i), "cpu"))
            k++, only = i;
    if (rc == EMBER_OK && ember_strlist_count(mt) > 1 && k == 1) {
        rc = set_type(sel, ember_strlist_get(mt, only));
        if (rc == EMBER_OK)
            rc = em_result_note(c->notes, "%.*s names no profile type: "
                                "using %s, the one CPU type of the %zu it "
                                "matches (profile_types() lists them)",
                                (int)(n->end - n->pos), c->text + n->pos,
                                sel->type, ember_strlist_count(mt));
    }
    ember_strlist_free(mt);
    return rc;
}

static int resolve_node(tctx *c, em_node *n, bool profile);

static int resolve_sel(tctx *c, em_node *n, bool profile)
{
    em_sel *sel = &n->u.sel;
    int rc = EMBER_OK;

    if (sel->type != NULL && strchr(sel->type, ':') != NULL)
        return EMBER_OK;                /* a full name: as written */
    if (sel->type == NULL && !profile)
        return EMBER_OK;                /* series and tables span types */
    if (c->all == NULL && (rc = ember_profile_types(c->db, NULL, &c->all)) !=
        EMBER_OK)
        return rc;
    if (sel->type == NULL)
        return pick_cpu(c, n, sel);
    if (listed(c->all, sel->type))
        return EMBER_OK;                /* a stored type without ':' */
    return short_type(c, sel);
}

/* PROFILE: N's value feeds a merge (one type needed). */
static int resolve_node(tctx *c, em_node *n, bool profile)
{
    int rc = EMBER_OK;

    if (n->kind == EM_NODE_SELECTOR)
        return resolve_sel(c, n, profile);
    if (n->kind != EM_NODE_CALL)
        return EMBER_OK;
    switch (n->u.call.fn) {
    case EM_FN_MERGE:
    case EM_FN_DIFF:
    case EM_FN_NORMALIZE:
        profile = true;
        break;
    case EM_FN_FOCUS:
    case EM_FN_IGNORE:
    case EM_FN_HIDE:
    case EM_FN_SHOW:
    case EM_FN_CALLERS:
    case EM_FN_CALLEES:
    case EM_FN_PEEK:
    case EM_FN_LIST:
    case EM_FN_GRANULARITY:
    case EM_FN_TOP:
        break;                          /* as their argument's user */
    default:
        profile = false;
    }
    for (size_t i = 0; i < n->u.call.nargs && rc == EMBER_OK; i++)
        rc = resolve_node(c, n->u.call.args[i], profile);
    return rc;
}

int em_notes_types(ember_db *db, const char *text, em_node *tree,
                   ember_result *notes)
{
    tctx c = { db, text, notes, NULL };
    int rc = resolve_node(&c, tree, true);

    ember_strlist_free(c.all);
    return rc;
}

/* ---- after running: why nothing matched ------------------------------------ */

typedef struct xctx {
    ember_db *db;
    const char *text;
    ember_result *r;
    em_reader *rd;
    bool empty;                     /* the result holds nothing */
} xctx;

/* How many series VIEW selects (0 or more). */
static int count_series(xctx *c, const ember_selector *view, size_t *n)
{
    em_series_set set = { 0 };
    int rc = em_reader_series(c->rd, view, &set);

    *n = set.n;
    em_series_set_free(&set);
    return rc;
}

/* The label names, and the values of M's label, among the series of
** TYPE (__type__'s values are the stored types). */
static int label_lists(xctx *c, const char *type, const ember_matcher *m,
                       ember_strlist **names, ember_strlist **values)
{
    ember_selector tv = { .sz = sizeof tv, .type = type };
    bool is_type = strcmp(m->name, "__type__") == 0;
    int rc;

    *names = NULL;
    *values = NULL;
    rc = ember_label_names(c->db, &tv, names);
    if (rc != EMBER_OK || (!is_type && !listed(*names, m->name)))
        return rc;
    if (is_type)
        return ember_profile_types(c->db, &tv, values);
    return ember_label_values(c->db, m->name, &tv, values);
}

/* Why matcher M of a selector of TYPE selects nothing on its own, as a
** note about the selector WHAT. */
static int why_matcher(xctx *c, const char *what, const char *type,
                       const ember_matcher *m)
{
    ember_strlist *names = NULL, *values = NULL;
    const char *of = type != NULL ? type : "any type";
    const char *op = m->op == EMBER_MATCH_RE ? "=~" : m->op ==
                     EMBER_MATCH_NRE ? "!~" : "!=";
    char hint[256];
    int rc = label_lists(c, type, m, &names, &values);

    if (rc == EMBER_OK && values == NULL)
        rc = em_result_note(c->r, "%s matches nothing: no series of %s has "
                            "a label %s%s", what, of, m->name,
                            did_you_mean(closest(names, m->name, false),
                                         false, hint, sizeof hint));
    else if (rc == EMBER_OK && m->op == EMBER_MATCH_EQ)
        rc = em_result_note(c->r, "%s matches nothing: no series of %s has "
                            "%s=\"%s\"%s", what, of, m->name, m->value,
                            did_you_mean(closest(values, m->value, false),
                                         true, hint, sizeof hint));
    else if (rc == EMBER_OK)
        rc = em_result_note(c->r, "%s matches nothing: %s%s\"%s\" leaves "
                            "none of the %zu values of %s", what, m->name,
                            op, m->value, ember_strlist_count(values),
                            m->name);
    ember_strlist_free(names);
    ember_strlist_free(values);
    return rc;
}

/* Why selector S (its type and matchers) selects no series. */
static int why_no_series(xctx *c, const char *what, const em_sel *s)
{
    ember_strlist *all = NULL;
    char hint[256];
    int rc = EMBER_OK;

    if (s->type != NULL) {
        if ((rc = ember_profile_types(c->db, NULL, &all)) != EMBER_OK)
            return rc;
        if (!listed(all, s->type)) {
            rc = em_result_note(c->r, "%s matches nothing: no profile type "
                                "\"%s\" is stored%s; profile_types() lists "
                                "the %zu stored", what, s->type,
                                did_you_mean(closest(all, s->type, true),
                                             false, hint, sizeof hint),
                                ember_strlist_count(all));
            ember_strlist_free(all);
            return rc;
        }
        ember_strlist_free(all);
    }
    for (size_t i = 0; i < s->nmatchers; i++) {
        ember_selector one = { .sz = sizeof one, .type = s->type,
                               .matchers = &s->matchers[i], .nmatchers = 1 };
        size_t n;
        if ((rc = count_series(c, &one, &n)) != EMBER_OK || n == 0)
            return rc != EMBER_OK ? rc : why_matcher(c, what, s->type,
                                                     &s->matchers[i]);
    }
    return em_result_note(c->r, "%s matches nothing: each of its matchers "
                          "selects series, but no series satisfies all of "
                          "them", what);
}

/* The first and last stored profile times of the series VIEW selects;
** *ANY false when they hold none. */
static int stored_span(xctx *c, const ember_selector *view, int64_t *first,
                       int64_t *last, bool *any)
{
    ember_totals *t = NULL;
    int rc = em_reader_totals(c->rd, view, &t);

    *any = false;
    for (size_t i = 0; rc == EMBER_OK && i < ember_totals_count(t); i++) {
        const int64_t *ts;
        size_t n;
        ember_totals_series(t, i, NULL, &ts, NULL, &n);
        if (n == 0)
            continue;
        if (!*any || ts[0] < *first)
            *first = ts[0];
        if (!*any || ts[n - 1] > *last)
            *last = ts[n - 1];
        *any = true;
    }
    ember_totals_free(t);
    return rc;
}

/* Selector PS selects series: a note when its range holds none of their
** profiles, with the span they are stored over. */
static int why_no_profiles(xctx *c, const char *what, const em_psel *ps,
                           const ember_selector *view)
{
    char a[40], b[40], f[40], l[40];
    int64_t first = 0, last = 0;
    bool any;
    int rc;

    if ((ps->from == 0 && ps->to == 0) || ps->nearest)
        return EMBER_OK;                /* all time, or the nearest one */
    if ((rc = stored_span(c, view, &first, &last, &any)) != EMBER_OK)
        return rc;
    if (!any)
        return em_result_note(c->r, "%s selects series that hold no "
                              "profiles", what);
    if (last >= ps->from && first <= ps->to)
        return EMBER_OK;                /* not the range: a filter */
    return em_result_note(c->r, "%s holds no profile from %s to %s: its "
                          "profiles are stored from %s to %s", what,
                          ps->from == INT64_MIN ? "the start" :
                          em_time_format(ps->from, a), em_time_format(ps->to, b),
                          em_time_format(first, f), em_time_format(last, l));
}

/* Explains selector PS when it selects nothing (no series, or no profile
** in its range). */
static int explain_sel(xctx *c, const em_psel *ps)
{
    const em_node *n = ps->node;
    const em_sel *s = &n->u.sel;
    ember_selector view;
    char what[200];
    size_t ns;
    int rc;

    snprintf(what, sizeof what, "%.*s", (int)(n->end - n->pos),
             c->text + n->pos);
    em_sel_view(s, 0, 0, &view);
    if ((rc = count_series(c, &view, &ns)) != EMBER_OK)
        return rc;
    if (ns == 0)
        return why_no_series(c, what, s);
    return c->empty ? why_no_profiles(c, what, ps, &view) : EMBER_OK;
}

/* True when RE matches a function name of a result group. */
static bool result_names_match(const ember_result *r, const em_regex *re)
{
    for (size_t g = 0; g < r->ngroups; g++) {
        const em_strtab *t = &r->groups[g].prof.names;
        for (uint32_t i = 0; i < t->count; i++) {
            const char *s = em_strtab_get(t, i);
            if (em_regex_match(re, s, strlen(s)))
                return true;
        }
    }
    return false;
}

/* True when the regex of VIEW matches what the view matches in R's
** groups: names as shown (peek, pprof's -peek), functions (list, as pprof's
** -list matches them at granularity lines). */
static bool view_matches(const ember_result *r, const em_pop *view)
{
    if (view->op != EM_VIEW_LIST)
        return result_names_match(r, view->re);
    for (size_t g = 0; g < r->ngroups; g++) {
        const em_rprofile *p = &r->groups[g].prof;
        for (uint32_t i = 0; i < p->names.count; i++) {
            const char *s = em_rprofile_fname(p, i);
            if (em_regex_match(view->re, s, strlen(s)))
                return true;
        }
    }
    return false;
}

/* Whether OP's regex matches a stored function name (or system name); when
** none does, the stored name nearest the pattern into *NEAR (a literal
** pattern only, owned by the snapshot). */
static int function_match(xctx *c, const em_pop *op, bool *yes,
                          const char **near)
{
    ember_snapshot *snap = em_reader_snapshot(c->rd);
    size_t plen = strlen(op->text), best_d = plen <= 4 ? 2 : 3;
    bool literal = strpbrk(op->text, "\\.*+?()[]{}|^$") == NULL;
    uint32_t nloc, nfn, nmap;
    int rc = EMBER_OK;

    *yes = false;
    *near = NULL;
    em_snapshot_bounds(snap, &nloc, &nfn, &nmap);
    for (uint32_t id = 0; id < nfn && !*yes && rc == EMBER_OK; id++) {
        ember_function f;
        const char *names[2];
        if ((rc = ember_snapshot_function(snap, id, &f)) != EMBER_OK)
            break;
        names[0] = f.name != NULL ? f.name : "";
        names[1] = f.system_name != NULL ? f.system_name : "";
        for (int k = 0; k < 2 && !*yes; k++) {
            size_t len = strlen(names[k]), d;
            *yes = em_regex_match(op->re, names[k], len);
            d = literal ? em_edit_distance(op->text, plen, names[k], len,
                                           true) : SIZE_MAX;
            if (d < best_d) {
                best_d = d;
                *near = names[k];
            }
        }
    }
    return rc;
}

static const char *op_name(int op)
{
    switch (op) {
    case EM_OP_FOCUS: return "focus";
    case EM_OP_IGNORE: return "ignore";
    case EM_OP_HIDE: return "hide";
    case EM_OP_CALLERS: return "callers";
    case EM_OP_CALLEES: return "callees";
    default: return "show";
    }
}

/* A note when the regex of OP matches no function name. */
static int explain_op(xctx *c, const em_pop *op)
{
    const char *near = NULL;
    char hint[256];
    bool yes = false;
    int rc;

    if (op->re == NULL || result_names_match(c->r, op->re))
        return EMBER_OK;
    if ((rc = function_match(c, op, &yes, &near)) != EMBER_OK || yes)
        return rc;
    return em_result_note(c->r, "%s(..., \"%s\") matches no function name%s",
                          op_name(op->op), op->text,
                          did_you_mean(near, false, hint, sizeof hint));
}

static int explain_ops(xctx *c, const em_pop *ops, size_t n)
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = explain_op(c, &ops[i]);
    return rc;
}

static int explain_chain(xctx *c, const em_pchain *ch)
{
    int rc = ch->sel.node != NULL ? explain_sel(c, &ch->sel) : EMBER_OK;

    return rc != EMBER_OK ? rc : explain_ops(c, ch->ops, ch->nops);
}

static int explain_plan(xctx *c, const em_plan *p)
{
    int rc = EMBER_OK;

    switch (p->kind) {
    case EMBER_RESULT_DIFF:             /* the base, the target, then post */
        if ((rc = explain_chain(c, &p->a)) == EMBER_OK &&
            (rc = explain_chain(c, &p->b)) == EMBER_OK)
            rc = explain_ops(c, p->post, p->npost);
        return rc;
    case EMBER_RESULT_PROFILE:
        return explain_chain(c, &p->a);
    case EMBER_RESULT_SERIES:
        return p->arg != NULL ? explain_plan(c, p->arg)
                              : explain_chain(c, &p->a);
    default:
        return p->has_sel ? explain_chain(c, &p->a) : EMBER_OK;
    }
}

/* A note when the view's regex (peek) matches none of the result's
** names: pprof's "no matches found for regexp", which it fails with. */
static int explain_view(xctx *c, const em_pop *view)
{
    const char *near = NULL;
    char hint[256];
    bool yes = false;
    int rc = function_match(c, view, &yes, &near);

    if (rc != EMBER_OK)
        return rc;
    return em_result_note(c->r, "%s(..., \"%s\") matches no function of "
                          "the profile%s", em_fn_name(view->op == EM_VIEW_PEEK
                          ? EM_FN_PEEK : EM_FN_LIST),
                          view->text, yes ? "" : did_you_mean(near, false,
                          hint, sizeof hint));
}

/* True when R holds no stack, point or row. */
static bool result_empty(const ember_result *r)
{
    for (size_t g = 0; g < r->ngroups; g++)
        for (size_t i = 0; i < r->groups[g].prof.nstacks; i++)
            if (r->groups[g].prof.stacks[i].value != 0 ||
                r->groups[g].prof.stacks[i].base != 0)
                return false;
    for (size_t i = 0; i < r->nseries; i++)
        if (r->series[i].n > 0)
            return false;
    if (r->ids_only)
        for (size_t g = 0; g < r->ngroups; g++)
            if (ember_merged_samples(r->groups[g].merged, NULL, NULL) > 0)
                return false;
    return r->nrows == 0;
}

int em_notes_explain(ember_db *db, const char *text, const em_plan *plan,
                     ember_result *r)
{
    xctx c = { .db = db, .text = text, .r = r, .empty = result_empty(r) };
    bool view = plan->view.op != EM_VIEW_NONE &&
                !view_matches(r, &plan->view);
    bool why = c.empty || plan->kind == EMBER_RESULT_DIFF;
    int rc;

    if (!why && !view)
        return EMBER_OK;                /* a diff's one side may be empty */
    if ((rc = em_reader_open(db, &c.rd)) == EMBER_OK && why)
        rc = explain_plan(&c, plan);
    if (rc == EMBER_OK && view)
        rc = explain_view(&c, &plan->view);
    em_reader_close(c.rd);
    return rc;
}
