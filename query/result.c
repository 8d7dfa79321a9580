/*
** query/result.c: the public query API (ember_query and ember_result_*)
** and the result's ownership. ember_query is the pipeline in one call:
** em_query_parse (syntax), em_plan_build (kinds, regexes, times),
** em_exec (one engine snapshot); each step's failure is the query's, with
** its message. A result owns everything it points to (labels, resolved
** profiles, merged stack ids, points, rows), so it outlives the snapshot;
** pointers handed out by the accessors live until ember_result_free,
** except ember_result_stack's frame array, which the next call on the
** result reuses. Its merges hold the snapshot the query ran on, whose
** symbols `-o pprof` reads (see query/render.c), so like every object
** made from a handle it must not be used after ember_close.
*/
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "query/plan.h"

/* ---- ownership --------------------------------------------------------------------- */

void em_labels_free(ember_label *l, size_t n)
{
    for (size_t i = 0; l != NULL && i < n; i++) {
        em_free((char *)l[i].name);
        em_free((char *)l[i].value);
    }
    em_free(l);
}

int em_labels_dup(const ember_label *src, size_t n, ember_label **out)
{
    ember_label *l = em_calloc(n + 1, sizeof *l);

    *out = NULL;
    if (l == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu labels", n);
    for (size_t i = 0; i < n; i++) {
        l[i].name = em_strdup(src[i].name);
        l[i].value = em_strdup(src[i].value);
        if (l[i].name == NULL || l[i].value == NULL) {
            em_labels_free(l, i + 1);
            return em_err(EMBER_ENOMEM, "query: label %s", src[i].name);
        }
    }
    *out = l;
    return EMBER_OK;
}

void em_result_free(ember_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; r->groups != NULL && i < r->ngroups; i++) {
        em_labels_free(r->groups[i].labels, r->groups[i].nlabels);
        em_rprofile_free(&r->groups[i].prof);
        ember_merged_free(r->groups[i].merged);
        em_free(r->groups[i].pprof);
    }
    for (size_t i = 0; r->series != NULL && i < r->nseries; i++) {
        em_labels_free(r->series[i].labels, r->series[i].nlabels);
        em_free(r->series[i].times);
        em_free(r->series[i].values);
    }
    for (size_t i = 0; r->rows != NULL && i < r->nrows; i++)
        em_free(r->rows[i]);
    em_free(r->groups);
    em_free(r->series);
    em_free(r->rows);
    em_free(r->column);
    em_free(r->view_re);
    em_free(r->type);
    em_free(r->unit);
    for (size_t i = 0; i < r->nnotes; i++)
        em_free(r->notes[i]);
    em_free(r->notes);
    em_free(r->frames);
    em_free(r);
}

int em_result_note(ember_result *r, const char *fmt, ...)
{
    char buf[1024];
    char **v;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < r->nnotes; i++)
        if (strcmp(r->notes[i], buf) == 0)
            return EMBER_OK;    /* diff(x, x) explains x once */
    v = em_realloc(r->notes, (r->nnotes + 1) * sizeof *v);
    if (v == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu notes", r->nnotes + 1);
    r->notes = v;
    if ((v[r->nnotes] = em_strdup(buf)) == NULL)
        return em_err(EMBER_ENOMEM, "query: note of %zu bytes", strlen(buf));
    r->nnotes++;
    return EMBER_OK;
}

/* ---- running a query ---------------------------------------------------------------- */

static int64_t clock_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The size of ember_query_opts before its limits: callers built then get
** none (their sz is this). */
#define OPTS_V1_SZ offsetof(ember_query_opts, timeout_ms)

/* Checks IN (NULL: defaults) and copies it whole into OUT, the fields an
** older caller's struct lacks left 0. */
static int opts_read(const ember_query_opts *in, ember_query_opts *o)
{
    memset(o, 0, sizeof *o);
    if (in == NULL)
        return EMBER_OK;
    if (in->sz < OPTS_V1_SZ)
        return em_err(EMBER_EINVAL, "query options: sz is not "
                      "sizeof(ember_query_opts)");
    memcpy(o, in, in->sz < sizeof *o ? in->sz : sizeof *o);
    if (o->step_ms < 0)
        return em_err(EMBER_EINVAL, "query options: negative step %lld ms",
                      (long long)o->step_ms);
    if ((o->from_ms != 0 || o->to_ms != 0) && o->from_ms > o->to_ms)
        return em_err(EMBER_EINVAL, "query options: from %lld is after to "
                      "%lld", (long long)o->from_ms, (long long)o->to_ms);
    if (o->timeout_ms < 0)
        return em_err(EMBER_EINVAL, "query options: negative timeout %lld "
                      "ms", (long long)o->timeout_ms);
    return EMBER_OK;
}

EMBER_API int ember_query(ember_db *db, const char *text,
                          const ember_query_opts *opts, ember_result **out)
{
    return em_query_run(db, text, opts, 0, out);
}

/* Parses, plans and runs TEXT (em_query_run's work, under the budget the
** caller made the thread's). */
static int query_steps(ember_db *db, const char *text,
                       const ember_query_opts *o, unsigned flags,
                       ember_result **out)
{
    em_plan_ctx ctx = { .text = text, .from = o->from_ms, .to = o->to_ms,
                        .now = o->now_ms != 0 ? o->now_ms : clock_ms() };
    ember_result *pre = em_calloc(1, sizeof *pre);  /* notes before exec */
    em_node *tree = NULL;
    em_plan *plan = NULL;
    int rc = pre != NULL ? EMBER_OK : em_err(EMBER_ENOMEM, "query: result");

    if (rc == EMBER_OK)
        rc = em_query_parse(text, &tree);
    if (rc == EMBER_OK)
        rc = em_notes_types(db, text, tree, pre);
    if (rc == EMBER_OK)
        rc = em_plan_build(&ctx, tree, &plan);
    if (rc == EMBER_OK)
        rc = em_exec(db, text, plan, o->step_ms, flags, out);
    if (rc == EMBER_OK) {       /* the type notes come first */
        (*out)->notes = pre->notes;
        (*out)->nnotes = pre->nnotes;
        pre->notes = NULL;
        pre->nnotes = 0;
        rc = em_notes_explain(db, text, plan, *out);
    }
    if (rc != EMBER_OK) {
        em_result_free(*out);
        *out = NULL;
    }
    em_result_free(pre);
    em_plan_free(plan);
    em_node_free(tree);
    return rc;
}

/* The message of a query stopped by budget B (RC as it failed): how far
** it got in time, or what asked for memory past the limit. Other
** failures keep their own. */
static int limit_msg(int rc, const em_budget *b, const char *text)
{
    char what[512];
    int n = (int)strlen(text);

    if (rc == EMBER_ENOMEM && b->refused != 0) {
        snprintf(what, sizeof what, "%s", em_errmsg());
        return em_err(EMBER_ELIMIT, "query memory limit of %llu bytes "
                      "exceeded in %s (%llu held, %llu more asked)",
                      (unsigned long long)b->max_bytes, what,
                      (unsigned long long)b->refused_held,
                      (unsigned long long)b->refused);
    }
    if (rc != EMBER_ETIMEOUT)
        return rc;
    return em_err(rc, "query time limit of %lld ms exceeded after %.1f ms, "
                  "having read %llu chunks, built %llu series and resolved "
                  "%llu stacks: %.*s%s",
                  (long long)((b->deadline_ns - b->start_ns) / 1000000),
                  (double)(em_mono_ns() - b->start_ns) / 1e6,
                  (unsigned long long)b->steps[EM_STEP_CHUNK],
                  (unsigned long long)b->steps[EM_STEP_SERIES],
                  (unsigned long long)b->steps[EM_STEP_STACK],
                  n > 200 ? 200 : n, text, n > 200 ? "..." : "");
}

int em_query_run(ember_db *db, const char *text, const ember_query_opts *opts,
                 unsigned flags, ember_result **out)
{
    ember_query_opts o;
    em_budget b = { 0 }, *old;
    int rc;

    em_err_clear();
    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_query: NULL result");
    *out = NULL;
    if (db == NULL || text == NULL)
        return em_err(EMBER_EINVAL, "ember_query: NULL %s",
                      db == NULL ? "database" : "query");
    if ((rc = opts_read(opts, &o)) != EMBER_OK)
        return rc;
    b.start_ns = em_mono_ns();
    b.max_bytes = o.max_bytes;
    if (o.timeout_ms > 0)
        b.deadline_ns = b.start_ns + (o.timeout_ms > INT64_MAX / 2000000
                                      ? INT64_MAX / 2 : o.timeout_ms * 1000000);
    old = em_budget_swap(o.timeout_ms > 0 || o.max_bytes > 0 ? &b : NULL);
    rc = query_steps(db, text, &o, flags, out);
    em_budget_swap(old);
    return limit_msg(rc, &b, text);
}

EMBER_API void ember_result_free(ember_result *r)
{
    em_result_free(r);
}

/* ---- walking a result ------------------------------------------------------------- */

EMBER_API int ember_result_kind(const ember_result *r)
{
    return r != NULL ? r->kind : 0;
}

EMBER_API const char *ember_result_type(const ember_result *r)
{
    return r != NULL && r->kind != EMBER_RESULT_TABLE ? r->type : NULL;
}

static bool has_groups(const ember_result *r)
{
    return r != NULL && (r->kind == EMBER_RESULT_PROFILE ||
                         r->kind == EMBER_RESULT_DIFF);
}

EMBER_API size_t ember_result_groups(const ember_result *r)
{
    return has_groups(r) ? r->ngroups : 0;
}

EMBER_API void ember_result_group(const ember_result *r, size_t g,
                                  const ember_label **labels, size_t *nlabels,
                                  size_t *nstacks)
{
    const em_pgroup *p = has_groups(r) && g < r->ngroups ? &r->groups[g]
                                                         : NULL;

    if (labels != NULL)
        *labels = p != NULL && p->nlabels > 0 ? p->labels : NULL;
    if (nlabels != NULL)
        *nlabels = p != NULL ? p->nlabels : 0;
    if (nstacks != NULL)
        *nstacks = p != NULL ? p->prof.nstacks : 0;
}

EMBER_API int ember_result_stack(ember_result *r, size_t g, size_t j,
                                 const ember_frame **frames, size_t *nframes,
                                 int64_t *value, int64_t *base)
{
    const em_rprofile *p;
    const em_rstack *st;

    em_err_clear();
    if (!has_groups(r) || g >= r->ngroups ||
        j >= r->groups[g].prof.nstacks)
        return em_err(EMBER_EINVAL, "ember_result_stack: no stack %zu of "
                      "group %zu", j, g);
    p = &r->groups[g].prof;
    st = &p->stacks[j];
    if (st->nframes > r->cap_frames) {
        ember_frame *f = em_realloc(r->frames, st->nframes * sizeof *f);
        if (f == NULL)
            return em_err(EMBER_ENOMEM, "result: %zu frames", st->nframes);
        r->frames = f;
        r->cap_frames = st->nframes;
    }
    for (size_t i = 0; i < st->nframes; i++) {
        const em_rframe *f = &p->frames[st->first + i];
        r->frames[i].name = em_strtab_get(&p->names, f->fn);
        r->frames[i].flags = f->flags & EM_RFRAME_INLINED ?
                             EMBER_FRAME_INLINED : 0;
    }
    if (frames != NULL)
        *frames = r->frames;
    if (nframes != NULL)
        *nframes = st->nframes;
    if (value != NULL)
        *value = st->value;
    if (base != NULL)
        *base = p->diff ? st->base : 0;
    return EMBER_OK;
}

EMBER_API size_t ember_result_series_count(const ember_result *r)
{
    return r != NULL && r->kind == EMBER_RESULT_SERIES ? r->nseries : 0;
}

EMBER_API void ember_result_series(const ember_result *r, size_t i,
                                   const ember_label **labels,
                                   size_t *nlabels, const int64_t **times,
                                   const double **values, size_t *n)
{
    const em_series *s = r != NULL && r->kind == EMBER_RESULT_SERIES &&
                         i < r->nseries ? &r->series[i] : NULL;

    if (labels != NULL)
        *labels = s != NULL ? s->labels : NULL;
    if (nlabels != NULL)
        *nlabels = s != NULL ? s->nlabels : 0;
    if (times != NULL)
        *times = s != NULL ? s->times : NULL;
    if (values != NULL)
        *values = s != NULL ? s->values : NULL;
    if (n != NULL)
        *n = s != NULL ? s->n : 0;
}

EMBER_API const char *ember_result_column(const ember_result *r)
{
    return r != NULL && r->kind == EMBER_RESULT_TABLE ? r->column : NULL;
}

EMBER_API size_t ember_result_rows(const ember_result *r)
{
    return r != NULL && r->kind == EMBER_RESULT_TABLE ? r->nrows : 0;
}

EMBER_API const char *ember_result_row(const ember_result *r, size_t i)
{
    return r != NULL && r->kind == EMBER_RESULT_TABLE && i < r->nrows
           ? r->rows[i] : NULL;
}

EMBER_API size_t ember_result_notes(const ember_result *r)
{
    return r != NULL ? r->nnotes : 0;
}

EMBER_API const char *ember_result_note(const ember_result *r, size_t i)
{
    return r != NULL && i < r->nnotes ? r->notes[i] : NULL;
}
