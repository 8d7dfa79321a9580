/*
** query/plan.c: the planner, from the syntax tree to a checked plan
** (query/plan.h). It owns every static rule of the language
** (docs/query-language.md, "Kinds"):
**
**   - each function's arguments have the right count and kind (a profile, a
**     diff, a series, a table, a selector, a number, a string), with a caret
**     under the offending argument: `focus expects a profile and a regex
**     string: argument 2 is a number`;
**   - regexes (matchers, focus, ignore) compile, with a caret under the
**     string, so that no bad regex reaches the engine;
**   - times resolve: `[range]` ends at the query's end (or now), `offset`
**     shifts back, `@ T` pins the end or asks for the nearest profile;
**   - profile expressions flatten into chains (a selector, a grouping, stack
**     filters in order) and a chain's first focus and first ignore before
**     any top are pushed down to the engine, which finds their stacks
**     through the function postings instead of filtering resolved stacks.
**
** A bare selector is merge(SELECTOR) at the top and in profile arguments,
** total(SELECTOR) in series arguments (PromQL's instant vector habit).
*/
#include <math.h>
#include <stdio.h>

#include "query/plan.h"

typedef struct pctx {
    const em_plan_ctx *o;
    const char *text;
} pctx;

/* ---- functions: kinds and arguments (the catalogue: query/functions.c) ----- */

static int call_kind(const em_node *n)
{
    const em_fn_info *f = em_fn_get(n->u.call.fn);
    return f != NULL ? f->kind : 0;
}

/* "a number", "a series", ... for "argument 2 is ...". */
static const char *node_desc(const em_node *n)
{
    switch (n->kind) {
    case EM_NODE_SELECTOR: return "a selector";
    case EM_NODE_NUMBER: return "a number";
    case EM_NODE_STRING: return "a string";
    case EM_NODE_CALL: break;
    }
    switch (call_kind(n)) {
    case EMBER_RESULT_PROFILE: return "a profile";
    case EMBER_RESULT_DIFF: return "a diff";
    case EMBER_RESULT_SERIES: return "a series";
    case EMBER_RESULT_TABLE: return "a table";
    }
    return "an unknown function";
}

/* The caret error for argument I (0-based) of call N. */
static int arg_error(pctx *c, const em_node *n, size_t i, const char *why)
{
    const em_fn_info *f = em_fn_get(n->u.call.fn);
    const em_node *a = n->u.call.args[i];

    return em_query_error(c->text, a->pos, "%s expects %s: argument %zu %s%s",
                          f->name, f->args, i + 1, why != NULL ? why : "is ",
                          why != NULL ? "" : node_desc(a));
}

/* Checks call N's argument count and grouping against its signature. */
static int call_check(pctx *c, const em_node *n)
{
    const em_call *call = &n->u.call;
    const em_fn_info *f = em_fn_get(call->fn);

    if (f == NULL)
        return em_query_error(c->text, call->name_pos, "unknown function");
    if (call->nargs < f->min_args || call->nargs > f->max_args) {
        size_t at = call->nargs > f->max_args ? call->args[f->max_args]->pos
                                         : call->name_pos;
        return em_query_error(c->text, at, "%s expects %s: got %zu "
                              "argument%s", f->name, f->args, call->nargs,
                              call->nargs == 1 ? "" : "s");
    }
    if (call->grouping != EM_GROUP_NONE && !f->grouping)
        return em_query_error(c->text, call->name_pos, "%s takes no by or "
                              "without: only merge, sum, avg, max, min, "
                              "count, topk and bottomk group", f->name);
    return EMBER_OK;
}

static bool is_profile_arg(const em_node *n)
{
    if (n->kind == EM_NODE_SELECTOR)
        return true;
    return n->kind == EM_NODE_CALL &&
           (call_kind(n) == EMBER_RESULT_PROFILE ||
            call_kind(n) == EMBER_RESULT_DIFF);
}

static bool is_series_arg(const em_node *n)
{
    return n->kind == EM_NODE_SELECTOR ||
           (n->kind == EM_NODE_CALL && call_kind(n) == EMBER_RESULT_SERIES);
}

/* ---- selectors and times ------------------------------------------------------ */

/* Compiles each regex matcher of SEL so that a bad one is a caret error
** at its value, not an engine message without a place. */
static int sel_regexes(pctx *c, const em_sel *sel)
{
    for (size_t i = 0; i < sel->nmatchers; i++) {
        const ember_matcher *m = &sel->matchers[i];
        em_regex *re = NULL;
        char why[256];
        if (m->op != EMBER_MATCH_RE && m->op != EMBER_MATCH_NRE)
            continue;
        int rc = em_regex_compile(m->value, &re);
        em_regex_free(re);
        if (rc == EMBER_OK)
            continue;
        if (rc != EMBER_EINVAL)
            return rc;
        snprintf(why, sizeof why, "%s", em_errmsg());
        return em_query_error(c->text, sel->value_pos[i], "bad regex for "
                              "label %s: %s", m->name, why);
    }
    return EMBER_OK;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    if (b > 0 && a < INT64_MIN + b)
        return INT64_MIN;
    if (b < 0 && a > INT64_MAX + b)
        return INT64_MAX;
    return a - b;
}

/* Resolves the times of selector N: see em_psel and issue4-semantics.md
** ("Time"). */
static int sel_times(pctx *c, const em_node *n, em_psel *ps)
{
    const em_sel *sel = &n->u.sel;
    bool all = c->o->from == 0 && c->o->to == 0;
    int64_t end = all ? c->o->now : c->o->to, at;
    int rc;

    if (sel->at != NULL) {
        if ((rc = em_time_parse(sel->at, c->o->now, &at)) != EMBER_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", em_errmsg());
            return em_query_error(c->text, sel->at_pos, "%s", why);
        }
        ps->at = sat_sub(at, sel->offset_ms);
        if (sel->range_ms == 0) {
            ps->nearest = true;
            ps->from = ps->to = ps->bucket_from = ps->at;
            return EMBER_OK;
        }
        end = ps->at;
    } else if (sel->range_ms == 0) {
        /* the query's own range, shifted back by the offset */
        if (all && sel->offset_ms == 0)
            return EMBER_OK;
        ps->from = all ? INT64_MIN : sat_sub(c->o->from, sel->offset_ms);
        ps->to = sat_sub(end, sel->offset_ms);
        ps->bucket_from = all ? 0 : ps->from;
        return EMBER_OK;
    } else {
        end = sat_sub(end, sel->offset_ms);
    }
    ps->to = end;
    ps->from = sat_sub(end, sel->range_ms);
    ps->bucket_from = ps->from;
    if (ps->from == 0 && ps->to == 0)   /* [0, 0] is not "all time" */
        ps->to = 1;
    return EMBER_OK;
}

static int sel_resolve(pctx *c, const em_node *n, em_psel *ps)
{
    int rc = sel_regexes(c, &n->u.sel);

    memset(ps, 0, sizeof *ps);
    ps->node = n;
    if (rc == EMBER_OK)
        rc = sel_times(c, n, ps);
    return rc;
}

/* ---- profile chains ------------------------------------------------------------ */

/* True for a filter that changes which frames later filters see in a way
** the engine cannot apply first (hide, show, callers, callees). A top
** keeps every stack: it only limits the rows a renderer shows. */
static bool op_reshapes(int op)
{
    return op == EM_OP_HIDE || op == EM_OP_SHOW || op == EM_OP_CALLERS ||
           op == EM_OP_CALLEES;
}

static bool chain_reshaped(const em_pop *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (op_reshapes(ops[i].op))
            return true;
    return false;
}

static int ops_push(em_pop **ops, size_t *n, const em_pop *op)
{
    em_pop *a = em_realloc(*ops, (*n + 1) * sizeof *a);

    if (a == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu stack filters", *n + 1);
    a[(*n)++] = *op;
    *ops = a;
    return EMBER_OK;
}

static void op_free(em_pop *op)
{
    em_regex_free(op->re);
    em_free(op->pattern);
}

/* Appends OP to chain CH (taking its regex), pushing a focus or ignore
** down to the engine when it is the chain's first before any top, hide
** or show. */
static int chain_add(em_pchain *ch, em_pop op)
{
    bool first = !chain_reshaped(ch->ops, ch->nops);
    int rc;

    if (op.op == EM_OP_FOCUS && first && ch->focus == NULL) {
        op.pushed = true;
        ch->focus = op.pattern;
    } else if (op.op == EM_OP_IGNORE && first && ch->ignore == NULL) {
        op.pushed = true;
        ch->ignore = op.pattern;
    }
    if ((rc = ops_push(&ch->ops, &ch->nops, &op)) != EMBER_OK)
        op_free(&op);
    return rc;
}

static void ops_free(em_pop *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        op_free(&ops[i]);
    em_free(ops);
}

static void chain_free(em_pchain *ch)
{
    ops_free(ch->ops, ch->nops);
    ch->ops = NULL;
    ch->nops = 0;
}

/* Compiles the regex of a stack filter (argument 2 of N: focus, ignore,
** hide, show, callers, callees) into OP, with a caret at it when it is
** bad. They match anywhere in a function name, as pprof's -focus does:
** the engine's regexes are anchored (Prometheus' matchers), so the pattern
** is wrapped as .*(?:re).*, which leaves ^ and $ to anchor where a user
** wants it. */
static int op_regex(pctx *c, const em_node *n, em_pop *op)
{
    const em_node *s = n->u.call.args[1];
    char why[256];
    size_t len;
    int rc;

    if (s->kind != EM_NODE_STRING)
        return arg_error(c, n, 1, NULL);
    len = strlen(s->u.str);
    if ((op->pattern = em_malloc(len + 9)) == NULL)
        return em_err(EMBER_ENOMEM, "query: regex of %zu bytes", len);
    snprintf(op->pattern, len + 9, ".*(?:%s).*", s->u.str);
    op->text = s->u.str;
    rc = em_regex_compile(s->u.str, &op->re);     /* the caret's column */
    em_regex_free(op->re);
    op->re = NULL;
    if (rc == EMBER_OK)
        rc = em_regex_compile(op->pattern, &op->re);
    if (rc == EMBER_OK)
        return rc;
    em_free(op->pattern);
    op->pattern = NULL;
    if (rc != EMBER_EINVAL)
        return rc;
    snprintf(why, sizeof why, "%s", em_errmsg());
    return em_query_error(c->text, s->pos, "bad regex: %s", why);
}

/* top's N: a whole number >= 1. */
static int op_count(pctx *c, const em_node *n, size_t *out)
{
    const em_node *a = n->u.call.args[1];

    if (a->kind != EM_NODE_NUMBER)
        return arg_error(c, n, 1, NULL);
    if (!(a->u.num >= 1) || a->u.num > 1e9 || a->u.num != floor(a->u.num))
        return arg_error(c, n, 1, "must be a whole number from 1 to 1e9");
    *out = (size_t)a->u.num;
    return EMBER_OK;
}

static int plan_pexpr(pctx *c, const em_node *n, em_plan *p);
static int plan_granularity(pctx *c, const em_node *n, em_plan *p);
static int plan_normalize(pctx *c, const em_node *n, em_plan *p);

/* Adds stack filter OP (a focus, ignore, hide, show or top over P) to P:
** to its chain, or for a diff to both sides while that commutes (a focus
** or ignore before any other filter on the diff), else after the diff. */
static int pexpr_add_op(pctx *c, const em_node *n, em_plan *p, em_pop op)
{
    int rc;

    if (p->kind == EMBER_RESULT_PROFILE)
        return chain_add(&p->a, op);
    if (op.op == EM_OP_TOP || op_reshapes(op.op) || p->npost > 0) {
        if ((rc = ops_push(&p->post, &p->npost, &op)) != EMBER_OK)
            op_free(&op);
        return rc;
    }
    if ((rc = chain_add(&p->a, op)) != EMBER_OK)
        return rc;
    op.re = NULL;                       /* the target gets its own */
    op.pattern = NULL;
    if ((rc = op_regex(c, n, &op)) != EMBER_OK)
        return rc;
    return chain_add(&p->b, op);
}

static int filter_op(em_fn fn)
{
    switch (fn) {
    case EM_FN_FOCUS: return EM_OP_FOCUS;
    case EM_FN_IGNORE: return EM_OP_IGNORE;
    case EM_FN_HIDE: return EM_OP_HIDE;
    case EM_FN_SHOW: return EM_OP_SHOW;
    case EM_FN_CALLERS: return EM_OP_CALLERS;
    case EM_FN_CALLEES: return EM_OP_CALLEES;
    default: return EM_OP_TOP;
    }
}

/* focus, ignore, hide, show, callers or callees (P, "re"), top(P, N). */
static int plan_filter(pctx *c, const em_node *n, em_plan *p)
{
    const em_node *arg = n->u.call.args[0];
    em_pop op = { .op = filter_op(n->u.call.fn) };
    int rc;

    if (!is_profile_arg(arg))
        return arg_error(c, n, 0, NULL);
    if (op.op == EM_OP_TOP)
        rc = op_count(c, n, &op.n);
    else
        rc = op_regex(c, n, &op);
    if (rc != EMBER_OK)
        return rc;
    if ((rc = plan_pexpr(c, arg, p)) != EMBER_OK) {
        op_free(&op);
        return rc;
    }
    return pexpr_add_op(c, n, p, op);
}

static bool labels_same(char **a, size_t na, char **b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

/* merge [by|without (l...)] (P): P's profile, regrouped. Filters commute
** with summing profiles, and a top only limits rows, so any may sit below. */
static int plan_merge(pctx *c, const em_node *n, em_plan *p)
{
    const em_call *call = &n->u.call;
    const em_node *arg = call->args[0];
    bool same;
    int rc;

    if (!is_profile_arg(arg) || call_kind(arg) == EMBER_RESULT_DIFF)
        return arg_error(c, n, 0, NULL);
    if ((rc = plan_pexpr(c, arg, p)) != EMBER_OK)
        return rc;
    if (p->kind == EMBER_RESULT_DIFF)
        return arg_error(c, n, 0, "is a diff");
    same = call->grouping == p->a.grouping &&
           labels_same(call->labels, call->nlabels, p->a.labels,
                       p->a.nlabels);
    if (same || (call->grouping == EM_GROUP_NONE &&
                 p->a.grouping == EM_GROUP_NONE))
        return EMBER_OK;
    p->a.grouping = call->grouping;
    p->a.labels = call->labels;
    p->a.nlabels = call->nlabels;
    return EMBER_OK;
}

/* diff(BASE, TARGET): two chains. */
static int plan_diff(pctx *c, const em_node *n, em_plan *p)
{
    em_plan side[2];
    int rc = EMBER_OK;

    memset(side, 0, sizeof side);
    for (size_t i = 0; i < 2 && rc == EMBER_OK; i++) {
        const em_node *arg = n->u.call.args[i];
        if (!is_profile_arg(arg) || call_kind(arg) == EMBER_RESULT_DIFF)
            rc = arg_error(c, n, i, NULL);
        else
            rc = plan_pexpr(c, arg, &side[i]);
        if (rc == EMBER_OK && side[i].kind == EMBER_RESULT_DIFF)
            rc = arg_error(c, n, i, "is a diff");
    }
    if (rc != EMBER_OK) {
        for (size_t i = 0; i < 2; i++) {
            chain_free(&side[i].a);
            chain_free(&side[i].b);
            ops_free(side[i].post, side[i].npost);
        }
        return rc;
    }
    p->kind = EMBER_RESULT_DIFF;
    p->a = side[0].a;
    p->b = side[1].a;
    if (side[0].gran_given && side[1].gran_given &&
        side[0].granularity != side[1].granularity)
        return em_query_error(c->text, n->pos, "diff's sides have different "
                              "granularities: %s and %s",
                              em_gran_name(side[0].granularity),
                              em_gran_name(side[1].granularity));
    p->gran_given = side[0].gran_given || side[1].gran_given;
    p->granularity = side[0].gran_given ? side[0].granularity
                                        : side[1].granularity;
    return EMBER_OK;
}

/* granularity(P, "g"): P's names at pprof's granularity g, for the whole
** expression (both sides of a diff: their stacks are joined by name). */
static int plan_granularity(pctx *c, const em_node *n, em_plan *p)
{
    const em_node *arg = n->u.call.args[0], *g = n->u.call.args[1];
    int gran;
    int rc;

    if (!is_profile_arg(arg))
        return arg_error(c, n, 0, NULL);
    if (g->kind != EM_NODE_STRING)
        return arg_error(c, n, 1, NULL);
    if ((gran = em_gran_parse(g->u.str)) < 0)
        return arg_error(c, n, 1, "is not one of them");
    if ((rc = plan_pexpr(c, arg, p)) != EMBER_OK)
        return rc;
    if (p->gran_given)
        return em_query_error(c->text, n->pos, "the granularity is given "
                              "twice: write one granularity(P, \"...\")");
    p->granularity = gran;
    p->gran_given = true;
    return EMBER_OK;
}

/* normalize(D): D with its target scaled to its base's total, pprof's
** -normalize, which scales before any filter (so wherever it is written
** around the diff, the totals are those of the whole sides). */
static int plan_normalize(pctx *c, const em_node *n, em_plan *p)
{
    const em_node *arg = n->u.call.args[0];
    int rc;

    if (!is_profile_arg(arg))
        return arg_error(c, n, 0, NULL);
    if ((rc = plan_pexpr(c, arg, p)) != EMBER_OK)
        return rc;
    if (p->kind != EMBER_RESULT_DIFF)
        return arg_error(c, n, 0, "is a profile: normalize scales a diff's "
                         "target to its base's total");
    p->normalize = true;
    return EMBER_OK;
}

/* A profile-valued expression N into P (zeroed by the caller). */
static int plan_pexpr(pctx *c, const em_node *n, em_plan *p)
{
    int rc;

    p->fn = EM_FN_MERGE;
    p->node = n;
    if (n->kind == EM_NODE_SELECTOR) {
        p->kind = EMBER_RESULT_PROFILE;
        return sel_resolve(c, n, &p->a.sel);
    }
    if ((rc = call_check(c, n)) != EMBER_OK)
        return rc;
    switch (n->u.call.fn) {
    case EM_FN_MERGE:
        return plan_merge(c, n, p);
    case EM_FN_DIFF:
        return plan_diff(c, n, p);
    case EM_FN_FOCUS:
    case EM_FN_IGNORE:
    case EM_FN_HIDE:
    case EM_FN_SHOW:
    case EM_FN_CALLERS:
    case EM_FN_CALLEES:
    case EM_FN_TOP:
        return plan_filter(c, n, p);
    case EM_FN_GRANULARITY:
        return plan_granularity(c, n, p);
    case EM_FN_NORMALIZE:
        return plan_normalize(c, n, p);
    case EM_FN_PEEK:
    case EM_FN_LIST:
        return em_query_error(c->text, n->pos, "%s shows a profile as "
                              "pprof's -%s does: it is the whole query, "
                              "not an argument", em_fn_name(n->u.call.fn),
                              em_fn_name(n->u.call.fn));
    default:
        return em_query_error(c->text, n->pos, "expected a profile: %s "
                              "is %s", em_fn_get(n->u.call.fn)->name,
                              node_desc(n));
    }
}

/* ---- series and tables --------------------------------------------------------- */

static em_plan *plan_new(const em_node *n, int kind, em_fn fn)
{
    em_plan *p = em_calloc(1, sizeof *p);

    if (p == NULL) {
        em_err(EMBER_ENOMEM, "query: plan");
        return NULL;
    }
    p->node = n;
    p->kind = kind;
    p->fn = fn;
    return p;
}

/* total's argument: a selector, possibly inside focus and ignore that the
** engine applies (the per-profile sums through a function). */
static int plan_total_arg(pctx *c, const em_node *call, const em_node *arg,
                          em_plan *p)
{
    em_plan tmp;
    int rc;

    if (arg->kind == EM_NODE_SELECTOR)
        return sel_resolve(c, arg, &p->a.sel);
    if (arg->kind != EM_NODE_CALL || (arg->u.call.fn != EM_FN_FOCUS &&
                                      arg->u.call.fn != EM_FN_IGNORE))
        return arg_error(c, call, 0, NULL);
    memset(&tmp, 0, sizeof tmp);
    rc = plan_pexpr(c, arg, &tmp);
    for (size_t i = 0; rc == EMBER_OK && i < tmp.a.nops; i++)
        if (!tmp.a.ops[i].pushed || tmp.a.grouping != EM_GROUP_NONE)
            rc = arg_error(c, call, 0, "may hold one focus and one ignore "
                           "around a selector, nothing else");
    if (rc == EMBER_OK && tmp.kind != EMBER_RESULT_PROFILE)
        rc = arg_error(c, call, 0, NULL);
    if (rc == EMBER_OK) {
        p->a = tmp.a;
    } else {
        chain_free(&tmp.a);
        chain_free(&tmp.b);
        ops_free(tmp.post, tmp.npost);
    }
    return rc;
}

static int plan_series(pctx *c, const em_node *n, em_plan **out);

/* A series function call N into *OUT. */
static int plan_series_call(pctx *c, const em_node *n, em_plan *p)
{
    const em_call *call = &n->u.call;
    const em_node *last = call->args[call->nargs - 1];

    p->grouping = call->grouping;
    p->labels = call->labels;
    p->nlabels = call->nlabels;
    if (call->fn == EM_FN_TOTAL)
        return plan_total_arg(c, n, call->args[0], p);
    if (call->fn == EM_FN_TOPK || call->fn == EM_FN_BOTTOMK) {
        const em_node *k = call->args[0];
        if (k->kind != EM_NODE_NUMBER)
            return arg_error(c, n, 0, NULL);
        if (!(k->u.num >= 0) || k->u.num > 1e9)
            return arg_error(c, n, 0, "must be a number from 0 to 1e9");
        p->k = floor(k->u.num);
    }
    if (!is_series_arg(last))
        return arg_error(c, n, call->nargs - 1, NULL);
    return plan_series(c, last, &p->arg);
}

/* A series-valued expression N (a selector is total(N)) into *OUT. */
static int plan_series(pctx *c, const em_node *n, em_plan **out)
{
    em_plan *p;
    int rc;

    *out = NULL;
    if (n->kind == EM_NODE_CALL && (rc = call_check(c, n)) != EMBER_OK)
        return rc;
    p = plan_new(n, EMBER_RESULT_SERIES,
                 n->kind == EM_NODE_CALL ? n->u.call.fn : EM_FN_TOTAL);
    if (p == NULL)
        return EMBER_ENOMEM;
    if (n->kind == EM_NODE_SELECTOR)
        rc = sel_resolve(c, n, &p->a.sel);
    else
        rc = plan_series_call(c, n, p);
    if (rc != EMBER_OK) {
        em_plan_free(p);
        return rc;
    }
    *out = p;
    return EMBER_OK;
}

/* profile_types([SEL]), label_names([SEL]), label_values(NAME [, SEL]). */
static int plan_table(pctx *c, const em_node *n, em_plan *p)
{
    const em_call *call = &n->u.call;
    size_t first = 0;
    int rc;

    if (call->fn == EM_FN_LABEL_VALUES) {
        const em_node *name = call->args[0];
        if (name->kind != EM_NODE_STRING)
            return arg_error(c, n, 0, NULL);
        if (strcmp(name->u.str, "__type__") != 0 &&
            em_label_name_check(name->u.str) != EMBER_OK)
            return arg_error(c, n, 0, "is not a label name ([a-zA-Z_]"
                             "[a-zA-Z0-9_]*)");
        p->name = name->u.str;
        first = 1;
    }
    if (call->nargs == first)
        return EMBER_OK;
    if (call->args[first]->kind != EM_NODE_SELECTOR)
        return arg_error(c, n, first, NULL);
    rc = sel_resolve(c, call->args[first], &p->a.sel);
    p->has_sel = rc == EMBER_OK;
    return rc;
}

/* ---- views ------------------------------------------------------------------------ */

static bool is_view(const em_node *n)
{
    return n->kind == EM_NODE_CALL && (n->u.call.fn == EM_FN_PEEK ||
                                       n->u.call.fn == EM_FN_LIST);
}

/* peek or list (P, "re"), the whole query: P's plan with the view and its
** regex. */
static int plan_view(pctx *c, const em_node *n, em_plan *p)
{
    const em_node *arg = n->u.call.args[0];
    int rc;

    if ((rc = call_check(c, n)) != EMBER_OK)
        return rc;
    if (!is_profile_arg(arg))
        return arg_error(c, n, 0, NULL);
    if ((rc = plan_pexpr(c, arg, p)) != EMBER_OK)
        return rc;
    if (p->kind == EMBER_RESULT_DIFF)
        return arg_error(c, n, 0, "is a diff: compare its sides' views");
    if ((rc = op_regex(c, n, &p->view)) != EMBER_OK)
        return rc;
    p->view.op = n->u.call.fn == EM_FN_PEEK ? EM_VIEW_PEEK : EM_VIEW_LIST;
    return EMBER_OK;
}

/* ---- the query ------------------------------------------------------------------- */

int em_plan_build(const em_plan_ctx *ctx, const em_node *tree,
                  em_plan **out)
{
    pctx c = { ctx, ctx->text };
    int kind = 0;
    em_plan *p = NULL;
    int rc;

    *out = NULL;
    if (tree->kind == EM_NODE_NUMBER || tree->kind == EM_NODE_STRING)
        return em_query_error(c.text, tree->pos, "a query is a selector or "
                              "a function call, not %s", node_desc(tree));
    if (tree->kind == EM_NODE_CALL) {
        if ((rc = call_check(&c, tree)) != EMBER_OK)
            return rc;
        kind = call_kind(tree);
    }
    if (kind == EMBER_RESULT_SERIES)
        return plan_series(&c, tree, out);
    p = plan_new(tree, kind == EMBER_RESULT_TABLE ? kind
                 : EMBER_RESULT_PROFILE, tree->kind == EM_NODE_CALL ?
                 tree->u.call.fn : EM_FN_MERGE);
    if (p == NULL)
        return EMBER_ENOMEM;
    if (kind == EMBER_RESULT_TABLE)
        rc = plan_table(&c, tree, p);
    else if (is_view(tree))
        rc = plan_view(&c, tree, p);
    else
        rc = plan_pexpr(&c, tree, p);
    if (rc != EMBER_OK) {
        em_plan_free(p);
        return rc;
    }
    *out = p;
    return EMBER_OK;
}

void em_plan_free(em_plan *p)
{
    if (p == NULL)
        return;
    chain_free(&p->a);
    chain_free(&p->b);
    ops_free(p->post, p->npost);
    op_free(&p->view);
    em_plan_free(p->arg);
    em_free(p);
}
