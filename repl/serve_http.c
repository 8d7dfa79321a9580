/*
** repl/serve_http.c: one request's life in `ember serve`.
**
** libmicrohttpd calls em_http_on_request first when the headers are in:
** the request is routed through em_routes, its token checked and its
** declared length held against the body limit, so that a refusal needs no
** body (413, 401, 404, 405 go out at once and the connection closes). Then
** once per piece of body: a form (url-encoded or multipart) goes through
** libmicrohttpd's post processor into parameters, anything else into one
** buffer; past the limit the request is refused with 413. Last, with no
** more body, the handler runs and its answer is queued: a buffer, or a
** stream (serve_stream.c) that sends it chunked as it is written. The
** completion callback writes the access log line, counts the metrics (a
** stream's bytes as far as they went) and frees the request, whatever way
** it ended.
*/
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "repl/serve.h"

/* Body bytes read and dropped after a refusal before the connection is
** cut instead. */
#define DISCARD_MAX (64u << 20)

/* Prometheus' default latency buckets, seconds. */
const double em_serve_buckets[EM_SERVE_NBUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- answers -------------------------------------------------------------- */

int em_resp_text(em_resp *rs, const char *s)
{
    return em_buf_put(&rs->body, s, strlen(s));
}

int em_resp_printf(em_resp *rs, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return EMBER_EINVAL;
    if ((size_t)n < sizeof tmp)
        return em_buf_put(&rs->body, tmp, (size_t)n);
    if (em_buf_reserve(&rs->body, (size_t)n + 1) != EMBER_OK)
        return EMBER_ENOMEM;
    va_start(ap, fmt);
    vsnprintf((char *)rs->body.p + rs->body.len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rs->body.len += (size_t)n;
    return EMBER_OK;
}

static int resp_error_msg(em_resp *rs, unsigned status, const char *type,
                          const char *msg)
{
    rs->body.len = 0;
    rs->status = status;
    rs->ctype = "application/json";
    if (em_resp_text(rs, "{\"status\":\"error\",\"errorType\":") ||
        em_buf_json(&rs->body, type) || em_resp_text(rs, ",\"error\":") ||
        em_buf_json(&rs->body, msg) || em_resp_text(rs, "}\n"))
        return EMBER_ENOMEM;
    return EMBER_OK;
}

int em_resp_error(em_resp *rs, unsigned status, const char *type,
                  const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return resp_error_msg(rs, status, type, msg);
}

/* The status and error type an Ember code answers with. */
static unsigned status_of(int rc, const char **type)
{
    switch (rc) {
    case EMBER_EINVAL: *type = "bad_data"; return 400;
    case EMBER_ENOTFOUND: *type = "not_found"; return 404;
    case EMBER_ELIMIT: *type = "limit"; return 422;
    case EMBER_ETIMEOUT: *type = "timeout"; return 504;
    case EMBER_EBUSY: *type = "unavailable"; return 503;
    case EMBER_ENOMEM: *type = "unavailable"; return 503;
    default: *type = "internal"; return 500;
    }
}

int em_resp_ember(em_resp *rs, int rc)
{
    const char *type;
    unsigned status = status_of(rc, &type);
    const char *msg = ember_errmsg(NULL);

    return resp_error_msg(rs, status, type,
                          msg[0] != '\0' ? msg : ember_strerror(rc));
}

/* ---- parameters ---------------------------------------------------------------- */

static em_param *param_add(em_req *rq, const char *name)
{
    em_param *p;

    if (rq->nparams >= EM_SERVE_MAX_PARAMS)
        return NULL;
    p = em_grow(rq->params, &rq->cap_params, rq->nparams + 1, sizeof *p);
    if (p == NULL)
        return NULL;
    rq->params = p;
    p = &rq->params[rq->nparams];
    *p = (em_param){ .name = em_strdup(name) };
    if (p->name == NULL)
        return NULL;
    rq->nparams++;
    return p;
}

/* Appends N bytes to P's value, keeping a NUL after them. */
static int param_put(em_param *p, const char *data, size_t n)
{
    if (em_buf_reserve(&p->value, n + 1) != EMBER_OK)
        return EMBER_ENOMEM;
    if (n > 0)
        memcpy(p->value.p + p->value.len, data, n);
    p->value.len += n;
    p->value.p[p->value.len] = '\0';
    return EMBER_OK;
}

const char *em_req_param(const em_req *rq, const char *name)
{
    const char *v = NULL;

    return em_req_params(rq, name, &v, 1) > 0 ? v : NULL;
}

size_t em_req_params(const em_req *rq, const char *name, const char **out,
                     size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < rq->nparams && n < max; i++)
        if (strcmp(rq->params[i].name, name) == 0)
            out[n++] = rq->params[i].value.p != NULL
                       ? (const char *)rq->params[i].value.p : "";
    return n;
}

const em_buf *em_req_field(const em_req *rq, const char *name)
{
    for (size_t i = 0; rq->form && i < rq->nparams; i++)
        if (strcmp(rq->params[i].name, name) == 0)
            return &rq->params[i].value;
    return NULL;
}

const em_buf *em_req_body(const em_req *rq)
{
    const em_buf *b = em_req_field(rq, "profile");

    return b != NULL ? b : &rq->body;
}

static enum MHD_Result arg_take(void *cls, enum MHD_ValueKind kind,
                                const char *key, const char *value)
{
    em_req *rq = cls;
    em_param *p = param_add(rq, key);

    (void)kind;
    if (p == NULL || param_put(p, value != NULL ? value : "",
                               value != NULL ? strlen(value) : 0))
        rq->form_failed = true;
    return rq->form_failed ? MHD_NO : MHD_YES;
}

/* The post processor's callback: a field's bytes, in pieces at OFF. */
static enum MHD_Result form_take(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *filename,
                                 const char *ctype, const char *encoding,
                                 const char *data, uint64_t off, size_t size)
{
    em_req *rq = cls;
    em_param *p = rq->nparams > 0 ? &rq->params[rq->nparams - 1] : NULL;

    (void)kind, (void)ctype, (void)encoding;
    if (key == NULL)            /* a part with no name: a malformed form */
        return MHD_NO;
    if (off == 0 || p == NULL || strcmp(p->name, key) != 0)
        p = param_add(rq, key);
    if (p == NULL || (filename == NULL &&
                      p->value.len + size > EM_SERVE_MAX_PARAM_BYTES) ||
        param_put(p, data, size) != EMBER_OK) {
        rq->form_failed = true;
        return MHD_NO;
    }
    return MHD_YES;
}

/* ---- routing ------------------------------------------------------------------- */

/* Whether PATH matches PATTERN, where a '*' segment of PATTERN matches one
** non-empty segment, copied to SEG. */
static bool path_match(const char *pattern, const char *path, char *seg,
                       size_t segcap)
{
    while (*pattern != '\0') {
        if (*pattern == '*') {
            size_t n = strcspn(path, "/");
            if (n == 0 || n >= segcap)
                return false;
            memcpy(seg, path, n);
            seg[n] = '\0';
            path += n;
            pattern++;
            continue;
        }
        if (*pattern++ != *path++)
            return false;
    }
    return *path == '\0';
}

/* The route of RQ's path, or the status that refuses it (404, 405). */
static unsigned route_find(em_req *rq)
{
    bool path_known = false;
    unsigned m = strcmp(rq->method, "GET") == 0 ? EM_GET
               : strcmp(rq->method, "HEAD") == 0 ? EM_GET
               : strcmp(rq->method, "POST") == 0 ? EM_POST : 0;

    for (size_t i = 0; i < em_nroutes; i++) {
        if (!path_match(em_routes[i].path, rq->path, rq->seg,
                        sizeof rq->seg))
            continue;
        path_known = true;
        if ((em_routes[i].methods & m) != 0) {
            rq->route = &em_routes[i];
            rq->route_ix = i;
            return 0;
        }
    }
    return path_known ? 405 : 404;
}

/* Constant time in the token's length, so that timing tells nothing of
** how much of a guess was right. */
static bool token_ok(const em_server *s, const char *auth)
{
    static const char bearer[] = "Bearer ";
    unsigned char diff;
    size_t n;

    if (auth == NULL || strncasecmp(auth, bearer, sizeof bearer - 1) != 0)
        return false;
    auth += sizeof bearer - 1;
    n = strlen(auth);
    diff = n != s->token_len;
    for (size_t i = 0; i < s->token_len; i++)
        diff |= (unsigned char)(s->token[i] ^ (i < n ? auth[i] : 0));
    return diff == 0;
}

static void refuse(em_req *rq, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void refuse(em_req *rq, unsigned status, const char *fmt, ...)
{
    va_list ap;

    rq->early = status;
    va_start(ap, fmt);
    vsnprintf(rq->early_msg, sizeof rq->early_msg, fmt, ap);
    va_end(ap);
}


/* The mark of a connection opened past --max-connections (its socket
** context; NULL for the others). */
static const char conn_over_mark = 1;

static bool conn_over(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci != NULL && ci->socket_context == &conn_over_mark;
}
/* What the headers alone decide: route, token, connections, length. */
static void req_check(em_req *rq)
{
    em_server *s = rq->srv;
    const char *len = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                                  MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *auth = MHD_lookup_connection_value(
        rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    unsigned st = route_find(rq);

    if (st != 0)
        refuse(rq, st, st == 404 ? "no such endpoint: %s"
               : "%s does not take %s", rq->path, rq->method);
    else if (atomic_load(&s->stopping) && !rq->route->open)
        refuse(rq, 503, "the server is stopping");
    else if (s->token != NULL && !rq->route->open && !token_ok(s, auth))
        refuse(rq, 401, "a bearer token is needed "
               "(Authorization: Bearer TOKEN)");
    else if (conn_over(rq->conn))
        refuse(rq, 503, "too many connections (the limit is %u)",
               s->opts.max_conns);
    else if (len != NULL && strtoull(len, NULL, 10) > s->opts.max_body)
        refuse(rq, 413, "the body of %s bytes is over the limit of %"
               PRIu64 " bytes", len, s->opts.max_body);
}

/* Starts the post processor when the body is a form. */
static void req_form(em_req *rq)
{
    const char *ct = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);

    bool urlenc = ct != NULL &&
        strncasecmp(ct, MHD_HTTP_POST_ENCODING_FORM_URLENCODED,
                    strlen(MHD_HTTP_POST_ENCODING_FORM_URLENCODED)) == 0;
    bool multipart = ct != NULL &&
        strncasecmp(ct, MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA,
                    strlen(MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA)) == 0;

    if (rq->route->body == EM_BODY_RAW || (!urlenc && !multipart) ||
        (rq->route->body == EM_BODY_RAW_OR_MULTIPART && !multipart))
        return;
    rq->pp = MHD_create_post_processor(rq->conn, 64 * 1024, form_take, rq);
    if (rq->pp == NULL)
        refuse(rq, 400, "a form body without a boundary");
    rq->form = rq->pp != NULL;
}

static em_req *req_new(em_server *s, struct MHD_Connection *c,
                       const char *url, const char *method)
{
    em_req *rq = em_calloc(1, sizeof *rq);

    if (rq == NULL)
        return NULL;
    rq->srv = s;
    rq->conn = c;
    rq->start_ns = mono_ns();
    rq->method = em_strdup(method);
    rq->path = em_strdup(url);
    if (rq->method == NULL || rq->path == NULL) {
        em_free(rq->method);
        em_free(rq->path);
        em_free(rq);
        return NULL;
    }
    atomic_fetch_add(&s->active, 1);
    req_check(rq);
    if (rq->early == 0)
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, arg_take, rq);
    if (rq->early == 0 && rq->form_failed)
        refuse(rq, 400, "more than %u parameters", EM_SERVE_MAX_PARAMS);
    if (rq->early == 0 && strcmp(rq->method, "POST") == 0)
        req_form(rq);
    return rq;
}

/* One piece of the body. */
static void req_feed(em_req *rq, const char *data, size_t n)
{
    em_server *s = rq->srv;

    rq->bytes_in += n;
    if (rq->bytes_in > s->opts.max_body) {
        refuse(rq, 413, "the body is over the limit of %" PRIu64 " bytes",
               s->opts.max_body);
        return;
    }
    if (rq->form) {
        if (MHD_post_process(rq->pp, data, n) == MHD_YES)
            return;
        if (rq->form_failed)
            refuse(rq, 413, "a form field is over %u bytes, or more than "
                   "%u fields", EM_SERVE_MAX_PARAM_BYTES,
                   EM_SERVE_MAX_PARAMS);
        else
            refuse(rq, 400, "a malformed form body");
        return;
    }
    if (em_buf_put(&rq->body, data, n) != EMBER_OK)
        refuse(rq, 503, "out of memory for a body of %" PRIu64 " bytes",
               rq->bytes_in);
}

/* ---- answering -------------------------------------------------------------- */

static void free_body(void *p)
{
    em_free(p);
}

/* RS's body as a response, which owns it from now on; NULL when out of
** memory (RS's body freed). */
static struct MHD_Response *resp_make(em_req *rq, em_resp *rs)
{
    struct MHD_Response *r;
    size_t len = rs->body.len;

    if (rs->stream != NULL) {   /* the request keeps a hold for the log */
        r = em_stream_response(rs->stream, rq->conn);
        rq->stream = rs->stream;
        rs->stream = NULL;
        em_buf_free(&rs->body);
        return r;
    }
    r = MHD_create_response_from_buffer_with_free_callback(
            len, len > 0 ? rs->body.p : NULL, free_body);
    if (r == NULL || len == 0)
        em_buf_free(&rs->body);
    rs->body = (em_buf){ 0 };
    rq->bytes_out = len;
    return r;
}

static enum MHD_Result queue(em_req *rq, em_resp *rs)
{
    struct MHD_Response *r = resp_make(rq, rs);
    enum MHD_Result ok;

    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            rs->ctype != NULL ? rs->ctype : "text/plain");
    if (rq->early != 0 && rq->early != 404 && rq->early != 405)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (rs->status == 401)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer");
    for (size_t i = 0; i < rs->nheaders; i++)
        MHD_add_response_header(r, rs->headers[i][0], rs->headers[i][1]);
    rq->status = rs->status;
    ok = MHD_queue_response(rq->conn, rs->status, r);
    MHD_destroy_response(r);
    return ok;
}

static const char *early_type(unsigned status)
{
    switch (status) {
    case 401: return "unauthorized";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 413: return "too_large";
    case 503: return "unavailable";
    default: return "bad_data";
    }
}

static enum MHD_Result req_answer(em_req *rq)
{
    em_resp rs = { .status = 200 };
    int rc;

    if (rq->early == 0 && rq->form && rq->form_failed)
        refuse(rq, 413, "a form field is over %u bytes",
               EM_SERVE_MAX_PARAM_BYTES);
    if (rq->early != 0 && rq->route != NULL && rq->route->connect) {
        rc = em_connect_error(&rs, em_connect_code(rq->early),
                              rq->early_msg);
    } else if (rq->early != 0) {
        rc = em_resp_error(&rs, rq->early, early_type(rq->early), "%s",
                           rq->early_msg);
    } else {
        em_err_clear();
        rc = rq->route->run(rq, &rs);
        if (rc != EMBER_OK)     /* the handler could not even say why */
            rc = em_resp_ember(&rs, rc);
    }
    if (rc != EMBER_OK) {
        em_buf_free(&rs.body);
        em_stream_unref(rs.stream);
        return MHD_NO;
    }
    return queue(rq, &rs);
}

enum MHD_Result em_http_on_request(void *cls, struct MHD_Connection *c,
                                   const char *url, const char *method,
                                   const char *version, const char *upload,
                                   size_t *upload_size, void **ctx)
{
    em_req *rq = *ctx;

    (void)version;
    if (rq == NULL) {
        if ((*ctx = req_new(cls, c, url, method)) == NULL)
            return MHD_NO;
        rq = *ctx;
        /* a refusal goes out now, without reading a body */
        return rq->early != 0 ? req_answer(rq) : MHD_YES;
    }
    if (*upload_size != 0) {
        /* libmicrohttpd answers only once the body is in: past a limit
        ** the rest is read and dropped, up to a bound past which the
        ** connection is cut */
        if (rq->early == 0)
            req_feed(rq, upload, *upload_size);
        else
            rq->bytes_in += *upload_size;
        *upload_size = 0;
        return rq->bytes_in - rq->srv->opts.max_body > DISCARD_MAX &&
               rq->bytes_in > rq->srv->opts.max_body ? MHD_NO : MHD_YES;
    }
    return rq->status != 0 ? MHD_YES : req_answer(rq);
}

/* ---- completion: log, metrics, free ----------------------------------------- */

static void req_log(const em_req *rq, double secs)
{
    em_server *s = rq->srv;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char host[64] = "-", when[40];
    time_t now = time(NULL);
    struct tm tm;

    if (s->log == NULL)
        return;
    if (ci != NULL && ci->client_addr != NULL)
        em_serve_addr_str(ci->client_addr, host, sizeof host);
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%d/%b/%Y:%H:%M:%S +0000", &tm);
    pthread_mutex_lock(&s->log_lock);
    fprintf(s->log, "%s - - [%s] \"%s %s HTTP/1.1\" %u %" PRIu64 " %.6f\n",
            host, when, rq->method, rq->path, rq->status, rq->bytes_out,
            secs);
    fflush(s->log);
    pthread_mutex_unlock(&s->log_lock);
}

static void req_count(const em_req *rq, double secs)
{
    em_route_stats *st;
    size_t b = 0;

    if (rq->route == NULL)
        return;
    st = &rq->srv->stats[rq->route_ix];
    atomic_fetch_add(&st->by_class[rq->status / 100 % 6], 1);
    while (b < EM_SERVE_NBUCKETS && secs > em_serve_buckets[b])
        b++;
    atomic_fetch_add(&st->buckets[b], 1);
    atomic_fetch_add(&st->micros, (uint64_t)(secs * 1e6));
    atomic_fetch_add(&st->bytes_in, rq->bytes_in);
    atomic_fetch_add(&st->bytes_out, rq->bytes_out);
}

static void req_free(em_req *rq)
{
    if (rq->pp != NULL)
        MHD_destroy_post_processor(rq->pp);
    for (size_t i = 0; i < rq->nparams; i++) {
        em_free(rq->params[i].name);
        em_buf_free(&rq->params[i].value);
    }
    em_free(rq->params);
    em_buf_free(&rq->body);
    em_stream_unref(rq->stream);
    em_free(rq->method);
    em_free(rq->path);
    em_free(rq);
}

void em_http_on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_RequestTerminationCode toe)
{
    em_server *s = cls;
    em_req *rq = *ctx;
    double secs;

    (void)c;
    if (rq == NULL)
        return;
    if (rq->status == 0)        /* never answered: the client went away */
        rq->status = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? 408
                   : 499;
    if (rq->stream != NULL)     /* what went out of it, all or not */
        rq->bytes_out = em_stream_sent(rq->stream);
    secs = (double)(mono_ns() - rq->start_ns) / 1e9;
    req_log(rq, secs);
    req_count(rq, secs);
    req_free(rq);
    *ctx = NULL;
    atomic_fetch_sub(&s->active, 1);
}

void em_http_on_connection(void *cls, struct MHD_Connection *c,
                           void **socket_ctx,
                           enum MHD_ConnectionNotificationCode toe)
{
    em_server *s = cls;

    (void)c;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        /* Decided once, when the connection opens: the connections past
        ** the limit are those refused, whatever order they ask in. */
        unsigned n = atomic_fetch_add(&s->open_conns, 1) + 1;
        *socket_ctx = n > s->opts.max_conns ? (void *)&conn_over_mark
                                            : NULL;
        atomic_fetch_add(&s->conns_total, 1);
    } else {
        atomic_fetch_sub(&s->open_conns, 1);
    }
}
