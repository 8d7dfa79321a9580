/*
** repl/serve_api.c: the routes of `ember serve` and Ember's own endpoints
** (docs/protocol.md), one table as Redis's command table is: the path, the
** methods, the handler. Each handler is a thin adapter from HTTP to the
** public API: it reads its parameters, calls ember_query, ember_import or
** ember_stats_get on the server's handle, and writes what they give; the
** status and the metrics add the background compaction's counts.
** Answers follow Prometheus' HTTP API: {"status":"success","data":...} or
** {"status":"error","errorType":...,"error":...}.
*/
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "query/query.h"
#include "repl/serve.h"

#define MAX_MATCH 32                /* match[] selectors in one request */

static int64_t now_ms(void)
{
    return em_cli_now_ms();
}

/* ---- parameters -------------------------------------------------------------- */

/* A time parameter (RFC 3339, unix s or ms, now, -1h); 0 when absent. */
static int param_time(em_req *rq, em_resp *rs, const char *name,
                      int64_t *out, bool *bad)
{
    const char *v = em_req_param(rq, name);

    *out = 0;
    if (v == NULL || v[0] == '\0')
        return EMBER_OK;
    if (em_time_parse(v, now_ms(), out) == EMBER_OK)
        return EMBER_OK;
    *bad = true;
    return em_resp_error(rs, 400, "bad_data", "%s=%s: expected a time "
                         "(RFC 3339, unix seconds or ms, now, -1h)", name, v);
}

/* A count parameter; DEF when absent. */
static int param_count(em_req *rq, em_resp *rs, const char *name,
                       uint64_t max, uint64_t def, uint64_t *out, bool *bad)
{
    const char *v = em_req_param(rq, name);
    char *end;

    *out = def;
    if (v == NULL)
        return EMBER_OK;
    errno = 0;
    if (v[0] >= '0' && v[0] <= '9') {
        *out = strtoull(v, &end, 10);
        if (errno == 0 && *end == '\0' && *out <= max)
            return EMBER_OK;
    }
    *bad = true;
    return em_resp_error(rs, 400, "bad_data", "%s=%s: expected a number up "
                         "to %" PRIu64, name, v, max);
}

/* ---- answers ----------------------------------------------------------------- */

static int json_begin(em_resp *rs)
{
    rs->ctype = "application/json";
    return em_resp_text(rs, "{\"status\":\"success\",\"data\":");
}

static int json_end(em_resp *rs)
{
    return em_resp_text(rs, "}\n");
}

/* The content type of a rendered format. */
static const char *format_ctype(const char *format)
{
    if (strcmp(format, "json") == 0)
        return "application/json";
    if (strcmp(format, "svg") == 0)
        return "image/svg+xml";
    if (strcmp(format, "levels") == 0)
        return "application/json";
    if (strcmp(format, "csv") == 0)
        return "text/csv; charset=utf-8";
    if (em_render_binary(format))
        return "application/octet-stream";
    return "text/plain; charset=utf-8";
}

/* ---- /healthz, /readyz ------------------------------------------------------- */

static int h_health(em_req *rq, em_resp *rs)
{
    (void)rq;
    return em_resp_text(rs, "ok\n");
}

static int h_ready(em_req *rq, em_resp *rs)
{
    if (atomic_load(&rq->srv->stopping))
        return em_resp_error(rs, 503, "unavailable", "the server is "
                             "stopping");
    return em_resp_text(rs, "ready\n");
}

/* ---- /api/v1/query ------------------------------------------------------------- */

/* A request's own timeout: the `timeout` parameter (a duration), else on
** a Connect route the Connect-Timeout-Ms header; 0 when none. */
static int request_timeout(em_req *rq, int64_t *ms)
{
    const char *v = em_req_param(rq, "timeout");
    char *end;

    *ms = 0;
    if (v == NULL && rq->route != NULL && rq->route->connect &&
        (v = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                         "Connect-Timeout-Ms")) != NULL) {
        errno = 0;
        *ms = (int64_t)strtoll(v, &end, 10);
        return errno == 0 && end != v && *end == '\0' && *ms > 0
               ? EMBER_OK : EMBER_EINVAL;
    }
    if (v == NULL)
        return EMBER_OK;
    return em_duration_parse(v, ms) == EMBER_OK && *ms > 0 ? EMBER_OK
                                                           : EMBER_EINVAL;
}

int em_serve_query_limits(em_req *rq, em_resp *rs, ember_query_opts *o,
                          bool *bad)
{
    const em_serve_opts *so = &rq->srv->opts;
    int64_t ms;

    o->timeout_ms = so->query_timeout_ms;
    o->max_bytes = so->query_max_bytes;
    if (request_timeout(rq, &ms) != EMBER_OK) {
        *bad = true;
        if (rq->route != NULL && rq->route->connect)
            return em_connect_error(rs, "invalid_argument", "timeout: "
                                    "expected a positive duration");
        return em_resp_error(rs, 400, "bad_data", "timeout=%s: expected a "
                             "duration such as 500ms or 10s",
                             em_req_param(rq, "timeout"));
    }
    if (ms > 0 && (o->timeout_ms == 0 || ms < o->timeout_ms))
        o->timeout_ms = ms;             /* less than the server's, not more */
    return EMBER_OK;
}

typedef struct query_params {
    const char *text, *format, *unit;
    ember_query_opts q;
    em_render_opts r;
} query_params;

static int query_params_read(em_req *rq, em_resp *rs, query_params *p,
                             bool *bad)
{
    uint64_t limit, width;
    const char *step = em_req_param(rq, "step");
    int rc;

    p->text = em_req_param(rq, "query");
    p->format = em_req_param(rq, "format");
    p->q = (ember_query_opts){ .sz = sizeof p->q };
    p->r = (em_render_opts){ .sz = sizeof p->r, .query = p->text,
                             .source_path = rq->srv->opts.source_path };
    if (p->text == NULL || p->text[0] == '\0') {
        *bad = true;
        return em_resp_error(rs, 400, "bad_data", "query: the parameter "
                             "is missing");
    }
    if (p->format == NULL || p->format[0] == '\0')
        p->format = "json";
    if ((rc = param_time(rq, rs, "from", &p->q.from_ms, bad)) || *bad ||
        (rc = param_time(rq, rs, "to", &p->q.to_ms, bad)) || *bad ||
        (rc = param_count(rq, rs, "limit", SIZE_MAX, 0, &limit, bad)) ||
        *bad ||
        (rc = param_count(rq, rs, "width", 100000, 0, &width, bad)) || *bad ||
        (rc = em_serve_query_limits(rq, rs, &p->q, bad)) || *bad)
        return rc;
    if (step != NULL && (em_duration_parse(step, &p->q.step_ms) != EMBER_OK
                         || p->q.step_ms <= 0)) {
        *bad = true;
        return em_resp_error(rs, 400, "bad_data", "step=%s: expected a "
                             "duration such as 30s, 5m or 1h", step);
    }
    p->r.limit = (size_t)limit;
    p->r.width = (unsigned)width;
    p->r.unit = em_req_param(rq, "unit");
    p->r.cum_sort = em_req_param(rq, "cum") != NULL;
    return EMBER_OK;
}

/* What a streamed query answer renders: the result and how, owned (the
** strings copied: the request's parameters die with the request, which
** may end before the stream does). */
typedef struct query_render {
    ember_result *r;
    char *format, *text, *unit;
    em_render_opts o;
} query_render;

static void query_render_free(void *ctx)
{
    query_render *qr = ctx;

    ember_result_free(qr->r);
    em_free(qr->format);
    em_free(qr->text);
    em_free(qr->unit);
    em_free(qr);
}

static int query_render_run(void *ctx, FILE *f)
{
    const query_render *qr = ctx;

    if (strcmp(qr->format, "levels") == 0)  /* the page's (render_json.c) */
        return em_render_levels_json(f, qr->r, (int64_t)qr->o.limit);
    return em_render_result(f, qr->r, qr->format, &qr->o);
}

/* What renders R (taken; freed on failure too) as P says, in *OUT. */
static int query_render_new(const query_params *p, ember_result *r,
                            query_render **out)
{
    query_render *qr = em_calloc(1, sizeof *qr);

    *out = NULL;
    if (qr == NULL) {
        ember_result_free(r);
        return em_err(EMBER_ENOMEM, "query: out of memory for its answer");
    }
    qr->r = r;
    qr->o = p->r;
    qr->format = em_strdup(p->format);
    qr->text = em_strdup(p->text);
    qr->unit = p->r.unit != NULL ? em_strdup(p->r.unit) : NULL;
    qr->o.query = qr->text;
    qr->o.unit = qr->unit;
    if (qr->format == NULL || qr->text == NULL ||
        (p->r.unit != NULL && qr->unit == NULL)) {
        query_render_free(qr);
        return em_err(EMBER_ENOMEM, "query: out of memory for its answer");
    }
    *out = qr;
    return EMBER_OK;
}

/* Results of at most this many frames, points or rows render inline:
** their answers are small (some hundreds of KiB at most), and a render
** thread's start and hand-offs would cost more than rendering them. */
#define INLINE_ITEMS 16384

/* The frames, points or rows R holds (a pprof's bytes / 16). */
static size_t query_items(const ember_result *r)
{
    size_t n = r->nrows;

    for (size_t g = 0; g < r->ngroups; g++)
        n += r->groups[g].prof.nframes + r->groups[g].pprof_len / 16;
    for (size_t i = 0; i < r->nseries; i++)
        n += r->series[i].n;
    return n;
}

/* Renders QR (taken) into RS: inline when small; else through a stream,
** whole when it fits the stream's buffer, else streamed (RS's stream). */
static int query_answer(em_resp *rs, query_render *qr)
{
    bool ended = false;
    int rc;

    if (query_items(qr->r) <= INLINE_ITEMS) {
        rc = em_stream_render_whole(query_render_run, qr, &rs->body);
        query_render_free(qr);
        return rc;
    }
    if ((rc = em_stream_new(query_render_run, query_render_free, qr,
                            &rs->stream)) != EMBER_OK) {
        query_render_free(qr);
        return rc;
    }
    rc = em_stream_begin(rs->stream, &rs->body, &ended);
    if (ended) {                /* a buffer's answer, as any other */
        em_stream_unref(rs->stream);
        rs->stream = NULL;
    }
    return rc;
}

/* format=result: R (taken) whole, as the client decodes it (query/
** result_wire.c), not a rendering of it. */
static int query_result(em_resp *rs, ember_result *r)
{
    void *out = NULL;
    size_t len = 0;
    int rc = em_result_encode(r, &out, &len);

    ember_result_free(r);
    if (rc != EMBER_OK)
        return em_resp_ember(rs, rc);
    rs->ctype = EM_RESULT_WIRE_CTYPE;
    rs->body = (em_buf){ .p = out, .len = len, .cap = len + 1 };
    return EMBER_OK;
}

/* Runs the query, then streams its answer as it renders: the status is
** decided once the query has run (a timeout is 504, a memory limit 422,
** a format that does not fit the result's kind 400), so that only what
** renders is streamed; an answer that fits the stream's buffer goes whole,
** with its length. */
static int h_query(em_req *rq, em_resp *rs)
{
    query_params p;
    ember_result *r = NULL;
    query_render *qr = NULL;
    bool bad = false;
    int rc = query_params_read(rq, rs, &p, &bad);

    if (rc != EMBER_OK || bad)
        return rc;
    /* pprof reads the symbols itself, as `ember query -o pprof` does */
    rc = em_query_run(rq->srv->db, p.text, &p.q,
                      strcmp(p.format, "pprof") == 0 ? EM_QUERY_IDS_ONLY : 0,
                      &r);
    if (rc == EMBER_OK && strcmp(p.format, "result") == 0)
        return query_result(rs, r);         /* the client's, whole */
    if (rc == EMBER_OK && strcmp(p.format, "levels") == 0)
        rc = em_render_levels_fits(r);
    else if (rc == EMBER_OK &&
               !em_render_fits(ember_result_kind(r), p.format)) {
        char *out = NULL;       /* says which formats fit, as the CLI */
        size_t len;
        rc = ember_result_render(NULL, r, p.format, NULL, &out, &len);
        em_free(out);
        rc = rc != EMBER_OK ? rc : em_err(EMBER_EINVAL, "format %s",
                                          p.format);
    }
    if (rc == EMBER_OK)
        rc = query_render_new(&p, r, &qr);
    else
        ember_result_free(r);
    if (rc == EMBER_OK && (rc = query_answer(rs, qr)) == EMBER_OK)
        rs->ctype = format_ctype(p.format);
    return rc == EMBER_OK ? EMBER_OK : em_resp_ember(rs, rc);
}

/* ---- metadata: labels, values, types, series ------------------------------------ */

void em_strset_free(em_strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        em_free(s->v[i]);
    em_free(s->v);
    memset(s, 0, sizeof *s);
}

int em_strset_add(em_strset *s, const char *str)
{
    char **v = em_grow(s->v, &s->cap, s->n + 1, sizeof *v);

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for %zu strings", s->n);
    s->v = v;
    if ((v[s->n] = em_strdup(str)) == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for a string");
    s->n++;
    return EMBER_OK;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void em_strset_sort(em_strset *s)
{
    size_t k = 0;

    if (s->n > 0)
        qsort(s->v, s->n, sizeof *s->v, str_cmp);
    for (size_t i = 0; i < s->n; i++) {
        if (k > 0 && strcmp(s->v[k - 1], s->v[i]) == 0)
            em_free(s->v[i]);
        else
            s->v[k++] = s->v[i];
    }
    s->n = k;
}

/* The success answer whose data is SET, sorted, as a JSON array: of
** strings, or of SET's own JSON texts when RAW. */
static int set_answer(em_resp *rs, em_strset *set, bool raw)
{
    int rc;

    em_strset_sort(set);
    rc = json_begin(rs);
    for (size_t i = 0; i < set->n && rc == EMBER_OK; i++)
        rc = em_resp_text(rs, i == 0 ? "[" : ",") ||
             (raw ? em_resp_text(rs, set->v[i])
                  : em_buf_json(&rs->body, set->v[i])) ? EMBER_ENOMEM
                                                       : EMBER_OK;
    if (rc == EMBER_OK)
        rc = em_resp_text(rs, set->n == 0 ? "[]" : "]");
    return rc == EMBER_OK ? json_end(rs) : rc;
}

/* Adds the rows of the table query FN(NAME, SEL) to SET: SEL is a selector
** of the query language (match[]); one that does not parse, or that is
** more than a selector, is refused by the query's own checks. */
static int table_rows(ember_db *db, const char *fn, const char *sel,
                      const char *name, const ember_query_opts *o,
                      em_strset *set)
{
    char *text = NULL;
    ember_result *r = NULL;
    int rc;

    if (asprintf(&text, "%s(%s%s%s)", fn, name != NULL ? name : "",
                 name != NULL && sel != NULL ? ", " : "",
                 sel != NULL ? sel : "") < 0)
        return em_err(EMBER_ENOMEM, "out of memory for a query");
    rc = ember_query(db, text, o, &r);
    if (rc == EMBER_OK && ember_result_kind(r) != EMBER_RESULT_TABLE)
        rc = em_err(EMBER_EINVAL, "match[]=%s: not a selector", sel);
    for (size_t i = 0; rc == EMBER_OK && i < ember_result_rows(r); i++)
        rc = em_strset_add(set, ember_result_row(r, i));
    ember_result_free(r);
    free(text);
    return rc;
}

/* Runs the table query FN for each match[] (or once without one) and
** writes the union of the rows, sorted, as a JSON array. */
static int table_union(em_req *rq, em_resp *rs, const char *fn,
                       const char *name)
{
    const char *match[MAX_MATCH];
    size_t nmatch = em_req_params(rq, "match[]", match, MAX_MATCH);
    ember_query_opts o = { .sz = sizeof o };
    em_strset set = { 0 };
    bool bad = false;
    int rc = em_serve_query_limits(rq, rs, &o, &bad);

    if (rc != EMBER_OK || bad)
        return rc;
    if (name != NULL && em_label_name_check(name) != EMBER_OK)
        return em_resp_ember(rs, EMBER_EINVAL);
    for (size_t i = 0; i < (nmatch > 0 ? nmatch : 1) && rc == EMBER_OK; i++)
        rc = table_rows(rq->srv->db, fn, nmatch > 0 ? match[i] : NULL, name,
                        &o, &set);
    rc = rc == EMBER_OK ? set_answer(rs, &set, false) : rc;
    em_strset_free(&set);
    return rc == EMBER_OK ? EMBER_OK : em_resp_ember(rs, rc);
}

static int h_labels(em_req *rq, em_resp *rs)
{
    return table_union(rq, rs, "label_names", NULL);
}

static int h_label_values(em_req *rq, em_resp *rs)
{
    return table_union(rq, rs, "label_values", rq->seg);
}

static int h_types(em_req *rq, em_resp *rs)
{
    return table_union(rq, rs, "profile_types", NULL);
}

/* ---- /api/v1/series --------------------------------------------------------- */

/* Series I of R as one JSON object into K: its labels, and "__type__"
** first when they lack it (the series do not differ in it). */
static int series_object(const ember_result *r, size_t i, em_buf *k)
{
    const ember_label *l;
    const int64_t *times;
    const double *values;
    size_t nl, n;
    const char *type = ember_result_type(r);
    int rc = em_buf_put(k, "{", 1);

    ember_result_series(r, i, &l, &nl, &times, &values, &n);
    for (size_t j = 0; j < nl; j++)
        if (strcmp(l[j].name, "__type__") == 0)
            type = NULL;                /* the series carry their own */
    if (type != NULL && (em_buf_json(k, "__type__") ||
                         em_buf_put(k, ":", 1) || em_buf_json(k, type)))
        rc = EMBER_ENOMEM;
    for (size_t j = 0; j < nl && rc == EMBER_OK; j++)
        if (em_buf_put(k, j == 0 && type == NULL ? "" : ",",
                       j == 0 && type == NULL ? 0 : 1) ||
            em_buf_json(k, l[j].name) || em_buf_put(k, ":", 1) ||
            em_buf_json(k, l[j].value))
            rc = EMBER_ENOMEM;
    if (rc == EMBER_OK)
        rc = em_buf_put(k, "}", 2);     /* and a NUL */
    return rc == EMBER_OK ? EMBER_OK : em_err(EMBER_ENOMEM, "out of memory");
}

/* Adds to SET the label sets of the series MATCH selects in [FROM, TO]:
** the series of total(MATCH), one per stored series. */
static int series_rows(ember_db *db, const char *match,
                       const ember_query_opts *o, em_strset *set)
{
    ember_result *r = NULL;
    em_buf k = { 0 };
    char *text = NULL;
    int rc = EMBER_OK;

    if (asprintf(&text, "total(%s)", match) < 0)
        return em_err(EMBER_ENOMEM, "out of memory for a query");
    if ((rc = ember_query(db, text, o, &r)) != EMBER_OK)
        rc = em_err_prefix(rc, "match[]=%s", match);
    for (size_t i = 0; rc == EMBER_OK && i < ember_result_series_count(r);
         i++) {
        k.len = 0;
        if ((rc = series_object(r, i, &k)) == EMBER_OK)
            rc = em_strset_add(set, (const char *)k.p);
    }
    em_buf_free(&k);
    ember_result_free(r);
    free(text);
    return rc;
}

static int h_series(em_req *rq, em_resp *rs)
{
    const char *match[MAX_MATCH];
    size_t nmatch = em_req_params(rq, "match[]", match, MAX_MATCH);
    ember_query_opts o = { .sz = sizeof o };
    bool bad = false;
    em_strset set = { 0 };
    int rc = EMBER_OK;

    if ((rc = param_time(rq, rs, "start", &o.from_ms, &bad)) != EMBER_OK ||
        bad ||
        (rc = param_time(rq, rs, "end", &o.to_ms, &bad)) != EMBER_OK || bad ||
        (rc = em_serve_query_limits(rq, rs, &o, &bad)) != EMBER_OK || bad)
        return rc;
    if (nmatch == 0)
        return em_resp_error(rs, 400, "bad_data", "match[]: at least one "
                             "selector is needed");
    for (size_t i = 0; i < nmatch && rc == EMBER_OK; i++)
        rc = series_rows(rq->srv->db, match[i], &o, &set);
    rc = rc == EMBER_OK ? set_answer(rs, &set, true) : rc;
    em_strset_free(&set);
    return rc == EMBER_OK ? EMBER_OK : em_resp_ember(rs, rc);
}

/* ---- /api/v1/status ------------------------------------------------------------ */

static int status_json(em_resp *rs, const em_server *s, const ember_stats *st)
{
    return em_resp_printf(rs, "{\"version\":\"%s\",\"uptime_s\":%.3f,"
        "\"format_version\":%u,\"series\":%" PRIu64 ",\"profiles\":%" PRIu64
        ",\"samples\":%" PRIu64 ",\"stacks\":%" PRIu64 ",\"locations\":%"
        PRIu64 ",\"functions\":%" PRIu64 ",\"mappings\":%" PRIu64
        ",\"strings\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"head_chunks\":%"
        PRIu64 ",\"chunk_bytes\":%" PRIu64 ",\"file_bytes\":%" PRIu64
        ",\"used_bytes\":%" PRIu64 ",\"open_connections\":%u"
        ",\"requests_in_flight\":%u",
        EMBER_VERSION_STRING, (double)(now_ms() - s->started_ms) / 1000.0,
        st->format_version, st->series, st->profiles, st->samples,
        st->stacks, st->locations, st->functions, st->mappings, st->strings,
        st->chunks, st->head_chunks, st->chunk_bytes, st->file_bytes,
        st->used_bytes, atomic_load(&s->open_conns),
        atomic_load(&s->active));
}

/* What compaction made: the blocks, as `ember stats` prints them. */
static int status_blocks(em_resp *rs, const ember_stats *st)
{
    return em_resp_printf(rs, ",\"blocks\":%" PRIu64 ",\"block_bytes\":%"
        PRIu64 ",\"block_series\":%" PRIu64 ",\"block_profiles\":%" PRIu64
        ",\"block_samples\":%" PRIu64 ",\"block_stacks\":%" PRIu64,
        st->blocks, st->block_bytes, st->block_series, st->block_profiles,
        st->block_samples, st->block_stacks);
}

/* A unix ms time as a JSON string, or null for 0. */
static int json_time(em_resp *rs, int64_t ms)
{
    char buf[40];

    if (ms == 0)
        return em_resp_text(rs, "null");
    return em_resp_printf(rs, "\"%s\"", em_time_format(ms, buf));
}

/* The background compaction's last run: null before the first. */
static int status_last_run(em_resp *rs, const em_compact_sched_stats *c)
{
    const ember_compact_report *r = &c->last;
    int rc;

    if (c->runs == 0)
        return em_resp_text(rs, ",\"last\":null");
    if ((rc = em_resp_text(rs, ",\"last\":{\"time\":")) ||
        (rc = json_time(rs, c->last_ms)) ||
        (rc = em_resp_printf(rs, ",\"result\":\"%s\",\"error\":",
                             c->last_rc == EMBER_OK ? "ok"
                             : c->last_rc == EMBER_EBUSY ? "busy"
                             : "failed")))
        return rc;
    rc = c->last_rc == EMBER_OK ? em_resp_text(rs, "null")
                                : em_buf_json(&rs->body, c->last_error);
    return rc ? rc : em_resp_printf(rs, ",\"ms\":%" PRId64 ",\"bytes_before\":%"
        PRIu64 ",\"bytes_after\":%" PRIu64 ",\"blocks_written\":%" PRIu64
        ",\"profiles_moved\":%" PRIu64 ",\"blocks_removed\":%" PRIu64 "}",
        c->last_elapsed_ms, r->bytes_before, r->bytes_after,
        r->blocks_written, r->profiles_moved, r->blocks_removed);
}

/* "compaction": the background runs (every_s 0: none). */
static int status_compaction(em_resp *rs, em_server *s)
{
    em_compact_sched_stats c;
    int rc;

    em_compact_sched_stats_get(s->compact, &c);
    if ((rc = em_resp_printf(rs, ",\"compaction\":{\"every_s\":%g,"
            "\"running\":%s,\"runs\":%" PRIu64 ",\"failed\":%" PRIu64
            ",\"busy\":%" PRIu64 ",\"freed_bytes\":%" PRIu64
            ",\"blocks_written\":%" PRIu64 ",\"blocks_removed\":%" PRIu64
            ",\"next\":", (double)c.every_ms / 1000.0,
            c.running ? "true" : "false", c.runs, c.failed, c.busy,
            c.freed_bytes, c.blocks_written, c.blocks_removed)) ||
        (rc = json_time(rs, c.next_ms)) ||
        (rc = status_last_run(rs, &c)))
        return rc;
    return em_resp_text(rs, "}");
}

/* The per-table figures `ember stats` prints, and the object's end. */
static int status_tables(em_resp *rs, const ember_stats *st)
{
    int rc = em_resp_text(rs, ",\"tables\":[");

    for (unsigned i = 0; i < st->ntables && rc == EMBER_OK; i++) {
        rc = em_resp_text(rs, i == 0 ? "{\"name\":" : ",{\"name\":");
        if (rc == EMBER_OK)
            rc = em_buf_json(&rs->body, st->tables[i].name);
        if (rc == EMBER_OK)
            rc = em_resp_printf(rs, ",\"entries\":%" PRIu64 ",\"bytes\":%"
                                PRIu64 "}", st->tables[i].entries,
                                st->tables[i].bytes);
    }
    return rc == EMBER_OK ? em_resp_text(rs, "]}") : rc;
}

static int h_status(em_req *rq, em_resp *rs)
{
    ember_stats st = { .sz = sizeof st };
    int rc = ember_stats_get(rq->srv->db, &st);

    if (rc != EMBER_OK)
        return em_resp_ember(rs, rc);
    if ((rc = json_begin(rs)) || (rc = status_json(rs, rq->srv, &st)) ||
        (rc = status_blocks(rs, &st)) ||
        (rc = status_compaction(rs, rq->srv)) ||
        (rc = status_tables(rs, &st)) || (rc = json_end(rs)))
        return rc;
    return EMBER_OK;
}

/* ---- /api/v1/import ------------------------------------------------------------ */

static int import_format(const char *s, int *out)
{
    static const char *const names[] = { "auto", "pprof", "collapsed",
                                         "perf" };

    for (int i = 0; i < 4; i++)
        if (s == NULL || strcmp(s, names[i]) == 0) {
            *out = s == NULL ? EMBER_FORMAT_AUTO : i;
            return EMBER_OK;
        }
    return EMBER_EINVAL;
}

/* Splits each label=k=v parameter into LABELS (pointers into copies held
** by COPIES); the count, or -1 with the answer written. */
static int import_labels(em_req *rq, em_resp *rs, ember_label *labels,
                         char **copies)
{
    const char *vals[EM_MAX_CLI_LABELS + 1];
    size_t n = em_req_params(rq, "label", vals, EM_MAX_CLI_LABELS + 1);

    if (n > EM_MAX_CLI_LABELS) {
        em_resp_error(rs, 400, "bad_data", "more than %d label parameters",
                      EM_MAX_CLI_LABELS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if ((copies[i] = em_strdup(vals[i])) == NULL ||
            em_cli_label(copies[i], &labels[i]) != 0) {
            em_resp_error(rs, 400, "bad_data", "label=%s: expected k=v",
                          vals[i]);
            return -1;
        }
    }
    return (int)n;
}

/* What `ember import` has as --comm, --numeric-labels and --max-size:
** comm=1, numeric_labels=series|drop, max_size=BYTES (at most the 1 GiB
** an import may hold after gunzip: a request may lower it only). */
static int import_flags(em_req *rq, em_resp *rs, ember_import_opts *o,
                        bool *bad)
{
    const char *comm = em_req_param(rq, "comm");
    const char *num = em_req_param(rq, "numeric_labels");
    const char *max = em_req_param(rq, "max_size");

    *bad = true;
    if (comm != NULL && strcmp(comm, "1") != 0 && strcmp(comm, "0") != 0)
        return em_resp_error(rs, 400, "bad_data", "comm=%s: expected 1 or "
                             "0", comm);
    if (num != NULL && strcmp(num, "series") != 0 && strcmp(num, "drop"))
        return em_resp_error(rs, 400, "bad_data", "numeric_labels=%s: "
                             "expected series or drop", num);
    if (max != NULL && (em_cli_size(max, &o->max_bytes) != 0 ||
                        o->max_bytes == 0 || o->max_bytes > (1u << 30)))
        return em_resp_error(rs, 400, "bad_data", "max_size=%s: expected "
                             "bytes up to 1G, such as 512M", max);
    if (comm != NULL && strcmp(comm, "1") == 0)
        o->flags |= EMBER_IMPORT_COMM;
    if (num != NULL && strcmp(num, "series") == 0)
        o->flags |= EMBER_IMPORT_NUMERIC_LABELS;
    *bad = false;
    return EMBER_OK;
}

static int import_opts(em_req *rq, em_resp *rs, ember_import_opts *o,
                       bool *bad)
{
    const char *fmt = em_req_param(rq, "format");
    const char *window = em_req_param(rq, "window");
    int64_t t = 0;
    int rc;

    o->origin = em_req_param(rq, "origin");     /* a file's name: pprof */
    if (o->origin == NULL)                      /* contention types read */
        o->origin = "request body";             /* "mutex" in it */
    o->type = em_req_param(rq, "type");
    o->name = em_req_param(rq, "name");
    if (import_format(fmt, &o->format) != EMBER_OK) {
        *bad = true;
        return em_resp_error(rs, 400, "bad_data", "format=%s: expected "
                             "auto, pprof, collapsed or perf", fmt);
    }
    if ((rc = param_time(rq, rs, "time", &t, bad)) != EMBER_OK || *bad)
        return rc;
    if (em_req_param(rq, "time") != NULL) {
        o->flags |= EMBER_IMPORT_TIME;
        o->time_ms = t;
    }
    if (window != NULL && (em_duration_parse(window, &o->window_ms) !=
                           EMBER_OK || o->window_ms <= 0)) {
        *bad = true;
        return em_resp_error(rs, 400, "bad_data", "window=%s: expected a "
                             "duration", window);
    }
    return import_flags(rq, rs, o, bad);
}

static int import_answer(em_resp *rs, const ember_import_stats *st)
{
    int rc = json_begin(rs);

    if (rc == EMBER_OK)
        rc = em_resp_printf(rs, "{\"profiles\":%" PRIu64 ",\"samples\":%"
                            PRIu64 ",\"bytes\":%" PRIu64 "}", st->profiles,
                            st->samples, st->bytes);
    return rc == EMBER_OK ? json_end(rs) : rc;
}

static int h_import(em_req *rq, em_resp *rs)
{
    ember_import_opts o = { .sz = sizeof o };
    ember_import_stats st = { .sz = sizeof st };
    ember_label labels[EM_MAX_CLI_LABELS];
    char *copies[EM_MAX_CLI_LABELS] = { 0 };
    const em_buf *body = em_req_body(rq);
    bool bad = false;
    int rc = import_opts(rq, rs, &o, &bad), n = 0;

    if (rc == EMBER_OK && !bad && (n = import_labels(rq, rs, labels,
                                                      copies)) >= 0) {
        o.labels = labels;
        o.nlabels = (size_t)n;
        rc = ember_import(rq->srv->db, body->p != NULL ? body->p : (void *)"",
                          body->len, &o, &st);
        rc = rc == EMBER_OK ? import_answer(rs, &st) : em_resp_ember(rs, rc);
        if (rs->status == 422)
            rs->status = 413;       /* an import's limits are its size's */
    }
    for (int i = 0; i < EM_MAX_CLI_LABELS; i++)
        em_free(copies[i]);
    return rc;
}

/* ---- /metrics ---------------------------------------------------------------- */

static int metrics_route(em_resp *rs, const em_route *r,
                         const em_route_stats *st)
{
    uint64_t cum = 0;
    int rc = EMBER_OK;

    for (int c = 1; c <= 5 && rc == EMBER_OK; c++)
        rc = em_resp_printf(rs, "ember_http_requests_total{path=\"%s\","
                            "code=\"%dxx\"} %" PRIu64 "\n", r->path, c,
                            atomic_load(&st->by_class[c]));
    for (int b = 0; b <= EM_SERVE_NBUCKETS && rc == EMBER_OK; b++) {
        char le[32];
        cum += atomic_load(&st->buckets[b]);
        if (b < EM_SERVE_NBUCKETS)
            snprintf(le, sizeof le, "%g", em_serve_buckets[b]);
        else
            snprintf(le, sizeof le, "+Inf");
        rc = em_resp_printf(rs, "ember_http_request_duration_seconds_bucket"
                            "{path=\"%s\",le=\"%s\"} %" PRIu64 "\n", r->path,
                            le, cum);
    }
    if (rc == EMBER_OK)
        rc = em_resp_printf(rs,
            "ember_http_request_duration_seconds_sum{path=\"%s\"} %.6f\n"
            "ember_http_request_duration_seconds_count{path=\"%s\"} %" PRIu64
            "\nember_http_request_body_bytes_total{path=\"%s\"} %" PRIu64
            "\nember_http_response_body_bytes_total{path=\"%s\"} %" PRIu64
            "\n", r->path, (double)atomic_load(&st->micros) / 1e6, r->path,
            cum, r->path, atomic_load(&st->bytes_in), r->path,
            atomic_load(&st->bytes_out));
    return rc;
}

static const char metrics_help[] =
    "# HELP ember_http_requests_total Requests answered, by route and "
    "status class.\n# TYPE ember_http_requests_total counter\n"
    "# HELP ember_http_request_duration_seconds Time from the request's "
    "headers to its completion.\n"
    "# TYPE ember_http_request_duration_seconds histogram\n"
    "# HELP ember_http_request_body_bytes_total Request body bytes read.\n"
    "# TYPE ember_http_request_body_bytes_total counter\n"
    "# HELP ember_http_response_body_bytes_total Response body bytes sent.\n"
    "# TYPE ember_http_response_body_bytes_total counter\n";

static int metrics_db(em_resp *rs, const em_server *s)
{
    ember_stats st = { .sz = sizeof st };
    int rc = ember_stats_get(s->db, &st);

    if (rc != EMBER_OK)
        return rc;
    return em_resp_printf(rs,
        "# TYPE ember_http_open_connections gauge\n"
        "ember_http_open_connections %u\n"
        "# TYPE ember_http_requests_in_flight gauge\n"
        "ember_http_requests_in_flight %u\n"
        "# TYPE ember_http_connections_total counter\n"
        "ember_http_connections_total %" PRIu64 "\n"
        "# TYPE ember_db_file_bytes gauge\nember_db_file_bytes %" PRIu64 "\n"
        "# TYPE ember_db_used_bytes gauge\nember_db_used_bytes %" PRIu64 "\n"
        "# TYPE ember_db_series gauge\nember_db_series %" PRIu64 "\n"
        "# TYPE ember_db_profiles gauge\nember_db_profiles %" PRIu64 "\n"
        "# TYPE ember_db_samples gauge\nember_db_samples %" PRIu64 "\n"
        "# TYPE ember_db_blocks gauge\nember_db_blocks %" PRIu64 "\n"
        "# TYPE ember_db_block_bytes gauge\nember_db_block_bytes %" PRIu64
        "\n", atomic_load(&s->open_conns), atomic_load(&s->active),
        atomic_load(&s->conns_total), st.file_bytes, st.used_bytes, st.series,
        st.profiles, st.samples, st.blocks, st.block_bytes);
}

/* The background compaction (docs/protocol.md, section 9): counters of
** the runs that ended since the server started. */
static int metrics_compaction(em_resp *rs, const em_server *s)
{
    em_compact_sched_stats c;

    em_compact_sched_stats_get(s->compact, &c);
    return em_resp_printf(rs,
        "# TYPE ember_compactions_total counter\n"
        "ember_compactions_total %" PRIu64 "\n"
        "# TYPE ember_compactions_failed_total counter\n"
        "ember_compactions_failed_total %" PRIu64 "\n"
        "# TYPE ember_compactions_busy_total counter\n"
        "ember_compactions_busy_total %" PRIu64 "\n"
        "# TYPE ember_compaction_freed_bytes_total counter\n"
        "ember_compaction_freed_bytes_total %" PRIu64 "\n"
        "# TYPE ember_compaction_blocks_written_total counter\n"
        "ember_compaction_blocks_written_total %" PRIu64 "\n"
        "# TYPE ember_compaction_blocks_removed_total counter\n"
        "ember_compaction_blocks_removed_total %" PRIu64 "\n"
        "# TYPE ember_compaction_running gauge\n"
        "ember_compaction_running %d\n"
        "# TYPE ember_compaction_last_success_timestamp_seconds gauge\n"
        "ember_compaction_last_success_timestamp_seconds %.3f\n",
        c.runs, c.failed, c.busy, c.freed_bytes, c.blocks_written,
        c.blocks_removed, c.running ? 1 : 0, (double)c.last_ok_ms / 1000.0);
}

static int h_metrics(em_req *rq, em_resp *rs)
{
    int rc = em_resp_text(rs, metrics_help);

    rs->ctype = "text/plain; version=0.0.4; charset=utf-8";
    for (size_t i = 0; i < em_nroutes && rc == EMBER_OK; i++)
        rc = metrics_route(rs, &em_routes[i], &rq->srv->stats[i]);
    if (rc == EMBER_OK)
        rc = metrics_db(rs, rq->srv);
    if (rc == EMBER_OK)
        rc = metrics_compaction(rs, rq->srv);
    return rc == EMBER_OK ? EMBER_OK : em_resp_ember(rs, rc);
}

/* ---- the table ------------------------------------------------------------------ */

const em_route em_routes[] = {
    { "/api/v1/query", EM_GET | EM_POST, h_query, false, EM_BODY_FORM,
      false },
    { "/api/v1/labels", EM_GET | EM_POST, h_labels, false, EM_BODY_FORM,
      false },
    { "/api/v1/label/*/values", EM_GET, h_label_values, false,
      EM_BODY_FORM, false },
    { "/api/v1/types", EM_GET | EM_POST, h_types, false, EM_BODY_FORM,
      false },
    { "/api/v1/series", EM_GET | EM_POST, h_series, false, EM_BODY_FORM,
      false },
    { "/api/v1/import", EM_POST, h_import, false, EM_BODY_RAW, false },
    { "/api/v1/status", EM_GET, h_status, false, EM_BODY_FORM, false },
    { "/ingest", EM_POST, em_h_ingest, false, EM_BODY_RAW_OR_MULTIPART,
      false },
    { "/push.v1.PusherService/Push", EM_POST, em_h_push, false, EM_BODY_RAW,
      true },
    { "/querier.v1.QuerierService/*", EM_POST, em_h_querier, false,
      EM_BODY_RAW, true },
    { "/metrics", EM_GET, h_metrics, false, EM_BODY_FORM, false },
    { "/healthz", EM_GET, h_health, true, EM_BODY_FORM, false },
    /* the page holds no data (it asks the API, with the token): open */
    { "/", EM_GET, em_h_web, true, EM_BODY_FORM, false },
    { "/ui/*", EM_GET, em_h_web, true, EM_BODY_FORM, false },
    { "/readyz", EM_GET, h_ready, true, EM_BODY_FORM, false },
};
const size_t em_nroutes = sizeof em_routes / sizeof em_routes[0];
