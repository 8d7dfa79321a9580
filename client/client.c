/*
** client/client.c: ember_client_*, the public API against a server
** (include/ember.h, docs/protocol.md). Each call is one request:
**
**   ember_client_query          POST /api/v1/query format=result (a form
**                               body, as queries may be long), decoded by
**                               em_result_decode into a real result
**   ember_client_label_names    GET /api/v1/labels
**   ember_client_label_values   GET /api/v1/label/NAME/values
**   ember_client_profile_types  GET /api/v1/types
**   ember_client_stats          GET /api/v1/status
**
** JSON answers are read with json-c. A non-2xx answer becomes the EMBER_*
** code its errorType stands for, with the server's message verbatim, so
** that `ember query --server` fails with the words `ember query -d` uses.
*/
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "client/client.h"
#include "query/query.h"

struct ember_client {
    em_http *http;
};

/* ---- the handle --------------------------------------------------------------------- */

static int opts_read(const ember_client_opts *o, ember_client_opts *out)
{
    memset(out, 0, sizeof *out);
    if (o == NULL)
        return EMBER_OK;
    if (o->sz == 0)
        return em_err(EMBER_EINVAL, "client options: sz is not set");
    memcpy(out, o, o->sz < sizeof *out ? o->sz : sizeof *out);
    return EMBER_OK;
}

EMBER_API int ember_client_open(const char *url, const ember_client_opts *o,
                                ember_client **c)
{
    ember_client_opts opts;
    int rc;

    em_err_clear();
    if (c == NULL)
        return em_err(EMBER_EINVAL, "ember_client_open: NULL client");
    *c = NULL;
    if ((rc = opts_read(o, &opts)) != EMBER_OK)
        return rc;
    if ((*c = em_calloc(1, sizeof **c)) == NULL)
        return em_err(EMBER_ENOMEM, "client: handle");
    rc = em_http_open(url, opts.token, (long)opts.timeout_ms,
                      (long)opts.connect_timeout_ms, opts.ca_file,
                      &(*c)->http);
    if (rc != EMBER_OK) {
        em_free(*c);
        *c = NULL;
    }
    return rc;
}

EMBER_API void ember_client_close(ember_client *c)
{
    if (c == NULL)
        return;
    em_http_close(c->http);
    em_free(c);
}

EMBER_API const char *ember_client_errmsg(const ember_client *c)
{
    (void)c;                    /* messages are per thread, as ember_errmsg */
    return em_errmsg();
}

em_http *em_client_http(ember_client *c)
{
    return c->http;
}

/* ---- errors ------------------------------------------------------------------------- */

/* The code for an answer's status and errorType (docs/protocol.md,
** "Errors"); TYPE may be NULL. */
static int code_of(long status, const char *type)
{
    if (type != NULL && strcmp(type, "limit") == 0)
        return EMBER_ELIMIT;
    if (type != NULL && strcmp(type, "timeout") == 0)
        return EMBER_ETIMEOUT;
    switch (status) {
    case 400: return EMBER_EINVAL;
    case 401: return EMBER_EINVAL;
    case 404: return EMBER_ENOTFOUND;
    case 413: return EMBER_ELIMIT;
    case 422: return EMBER_ELIMIT;
    case 503: return EMBER_EBUSY;
    case 504: return EMBER_ETIMEOUT;
    default: return EMBER_EIO;
    }
}

/* The body as a parsed JSON object, or NULL when it is not one. */
static json_object *json_body(const em_http_resp *r)
{
    json_tokener *tok;
    json_object *o;

    if (r->body.len == 0 || r->body.len > INT32_MAX ||
        (tok = json_tokener_new()) == NULL)
        return NULL;
    o = json_tokener_parse_ex(tok, (const char *)r->body.p,
                              (int)r->body.len);
    if (json_tokener_get_error(tok) != json_tokener_success) {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    return o;
}

static const char *json_str(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

int em_client_answer_error(const ember_client *c, const em_http_resp *r)
{
    json_object *o = json_body(r);
    const char *type = o != NULL ? json_str(o, "errorType") : NULL;
    const char *msg = o != NULL ? json_str(o, "error") : NULL;
    int rc = code_of(r->status, type);

    if (r->status == 401)
        em_err(rc, "server %s: unauthorized (401): %s", em_http_url(c->http),
               msg != NULL ? msg : "a token is needed, or it is wrong");
    else if (msg != NULL)
        em_err(rc, "%s", msg);
    else
        em_err(rc, "server %s: status %ld, not an Ember answer",
               em_http_url(c->http), r->status);
    json_object_put(o);
    return rc;
}

/* GET PATH (B's bytes, NUL added) and check the status: EMBER_OK with
** *RESP holding a 2xx answer, else the mapped error and *RESP freed. */
static int get(ember_client *c, em_buf *path, em_http_resp *resp)
{
    int rc = em_buf_put(path, "", 1);

    memset(resp, 0, sizeof *resp);
    if (rc != EMBER_OK)
        return em_err(EMBER_ENOMEM, "client: request path");
    rc = em_http_do(c->http, (const char *)path->p, NULL, 0, NULL, resp);
    if (rc == EMBER_OK && (resp->status < 200 || resp->status > 299))
        rc = em_client_answer_error(c, resp);
    if (rc != EMBER_OK)
        em_http_resp_free(resp);
    return rc;
}

/* ---- queries ------------------------------------------------------------------------- */

/* Adds OPTS' range, step and time limit as the server's parameters: times
** as RFC 3339, which em_time_parse reads back to the millisecond. Its
** memory limit is the server's own (--query-memory). */
static int query_params(em_buf *b, const ember_query_opts *opts)
{
    ember_query_opts q = { 0 }, *o = &q;
    char t[40], step[32];
    int rc = EMBER_OK;

    if (opts == NULL)
        return EMBER_OK;
    if (opts->sz == 0)
        return em_err(EMBER_EINVAL, "query options: sz is not set");
    memcpy(&q, opts, opts->sz < sizeof q ? opts->sz : sizeof q);
    if (o->from_ms != 0 || o->to_ms != 0) {
        rc = em_http_param(b, "from", em_time_format(o->from_ms, t));
        if (rc == EMBER_OK)
            rc = em_http_param(b, "to", em_time_format(o->to_ms, t));
    }
    if (rc == EMBER_OK && o->step_ms != 0) {
        snprintf(step, sizeof step, "%" PRId64 "ms", o->step_ms);
        rc = em_http_param(b, "step", step);
    }
    if (rc == EMBER_OK && o->timeout_ms > 0) {
        snprintf(step, sizeof step, "%" PRId64 "ms", o->timeout_ms);
        rc = em_http_param(b, "timeout", step);
    }
    return rc;
}

/* POSTs the form in B ("?a=1&b=2", as em_http_param builds it) to PATH:
** a query of any length fits a body, not always a URL. */
static int post_form(ember_client *c, const char *path, const em_buf *b,
                     em_http_resp *resp)
{
    int rc = em_http_do(c->http, path, b->p + 1, b->len - 1,
                        "application/x-www-form-urlencoded", resp);

    if (rc == EMBER_OK && (resp->status < 200 || resp->status > 299))
        rc = em_client_answer_error(c, resp);
    if (rc != EMBER_OK)
        em_http_resp_free(resp);
    return rc;
}

EMBER_API int ember_client_query(ember_client *c, const char *text,
                                 const ember_query_opts *opts,
                                 ember_result **out)
{
    em_buf form = { 0 };
    em_http_resp resp;
    int rc;

    em_err_clear();
    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_client_query: NULL result");
    *out = NULL;
    if (c == NULL || text == NULL)
        return em_err(EMBER_EINVAL, "ember_client_query: NULL %s",
                      c == NULL ? "client" : "query");
    rc = em_http_param(&form, "format", "result");
    if (rc == EMBER_OK)
        rc = em_http_param(&form, "query", text);
    if (rc == EMBER_OK)
        rc = query_params(&form, opts);
    if (rc == EMBER_OK &&
        (rc = post_form(c, "/api/v1/query", &form, &resp)) == EMBER_OK) {
        rc = em_result_decode(resp.body.p, resp.body.len, out);
        em_http_resp_free(&resp);
    }
    em_buf_free(&form);
    return rc;
}

/* ---- lists ---------------------------------------------------------------------------- */

/* {"status":"success","data":[strings]} into a new list. */
static int list_read(const em_http_resp *r, ember_strlist **out)
{
    json_object *o = json_body(r), *data = NULL;
    ember_strlist *l = NULL;
    int rc = EMBER_OK;
    size_t n;

    if (o == NULL || !json_object_object_get_ex(o, "data", &data) ||
        !json_object_is_type(data, json_type_array))
        rc = em_err(EMBER_EIO, "server: a list answer without its data "
                    "array");
    if (rc == EMBER_OK && (l = em_strlist_new()) == NULL)
        rc = em_err(EMBER_ENOMEM, "client: list");
    n = rc == EMBER_OK ? json_object_array_length(data) : 0;
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        json_object *v = json_object_array_get_idx(data, i);
        if (!json_object_is_type(v, json_type_string))
            rc = em_err(EMBER_EIO, "server: list entry %zu is not a string",
                        i);
        else
            rc = em_strlist_add(l, json_object_get_string(v),
                                (size_t)json_object_get_string_len(v));
    }
    json_object_put(o);
    if (rc != EMBER_OK) {
        ember_strlist_free(l);
        l = NULL;
    }
    *out = l;
    return rc;
}

/* GET PATH with match[]=MATCH (when not NULL) into a new list. */
static int list_get(ember_client *c, const char *path, const char *match,
                    ember_strlist **out)
{
    em_buf b = { 0 };
    em_http_resp resp;
    int rc;

    em_err_clear();
    if (out == NULL || c == NULL)
        return em_err(EMBER_EINVAL, "client: NULL %s",
                      out == NULL ? "list" : "client");
    *out = NULL;
    rc = em_buf_put(&b, path, strlen(path));
    if (rc == EMBER_OK && match != NULL)
        rc = em_http_param(&b, "match%5B%5D", match);
    if (rc == EMBER_OK && (rc = get(c, &b, &resp)) == EMBER_OK) {
        rc = list_read(&resp, out);
        em_http_resp_free(&resp);
    }
    em_buf_free(&b);
    return rc;
}

EMBER_API int ember_client_label_names(ember_client *c, const char *match,
                                       ember_strlist **out)
{
    return list_get(c, "/api/v1/labels", match, out);
}

EMBER_API int ember_client_label_values(ember_client *c, const char *name,
                                        const char *match,
                                        ember_strlist **out)
{
    char path[320];

    if (name == NULL || em_label_name_check(name) != EMBER_OK ||
        strlen(name) > 256) {
        if (out != NULL)
            *out = NULL;
        return em_err(EMBER_EINVAL, "label values: \"%s\" is not a label "
                      "name", name != NULL ? name : "");
    }
    snprintf(path, sizeof path, "/api/v1/label/%s/values", name);
    return list_get(c, path, match, out);
}

EMBER_API int ember_client_profile_types(ember_client *c, const char *match,
                                         ember_strlist **out)
{
    return list_get(c, "/api/v1/types", match, out);
}

/* ---- status ------------------------------------------------------------------------------ */

static uint64_t json_u64(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v))
        return 0;
    return (uint64_t)json_object_get_uint64(v);
}

/* The "tables" array of a status answer, as many as S holds. */
static void stats_tables(json_object *d, ember_stats *s)
{
    json_object *t;
    size_t n;

    if (!json_object_object_get_ex(d, "tables", &t) ||
        !json_object_is_type(t, json_type_array))
        return;
    n = json_object_array_length(t);
    for (size_t i = 0; i < n && s->ntables < EMBER_STATS_MAX_TABLES; i++) {
        json_object *e = json_object_array_get_idx(t, i), *name;
        ember_table_stats *ts = &s->tables[s->ntables];
        if (!json_object_is_type(e, json_type_object) ||
            !json_object_object_get_ex(e, "name", &name) ||
            !json_object_is_type(name, json_type_string))
            continue;
        snprintf(ts->name, sizeof ts->name, "%s",
                 json_object_get_string(name));
        ts->entries = json_u64(e, "entries");
        ts->bytes = json_u64(e, "bytes");
        s->ntables++;
    }
}

static void stats_fill(json_object *d, ember_stats *s)
{
    s->format_version = (uint32_t)json_u64(d, "format_version");
    s->series = json_u64(d, "series");
    s->profiles = json_u64(d, "profiles");
    s->samples = json_u64(d, "samples");
    s->stacks = json_u64(d, "stacks");
    s->locations = json_u64(d, "locations");
    s->functions = json_u64(d, "functions");
    s->mappings = json_u64(d, "mappings");
    s->strings = json_u64(d, "strings");
    s->chunks = json_u64(d, "chunks");
    s->head_chunks = json_u64(d, "head_chunks");
    s->chunk_bytes = json_u64(d, "chunk_bytes");
    s->file_bytes = json_u64(d, "file_bytes");
    s->used_bytes = json_u64(d, "used_bytes");
    s->blocks = json_u64(d, "blocks");
    s->block_bytes = json_u64(d, "block_bytes");
    s->block_series = json_u64(d, "block_series");
    s->block_profiles = json_u64(d, "block_profiles");
    s->block_samples = json_u64(d, "block_samples");
    s->block_stacks = json_u64(d, "block_stacks");
    stats_tables(d, s);
}

EMBER_API int ember_client_stats(ember_client *c, ember_stats *out)
{
    em_buf b = { 0 };
    em_http_resp resp;
    json_object *o = NULL, *d = NULL;
    size_t sz;
    int rc;

    em_err_clear();
    if (c == NULL || out == NULL || out->sz == 0)
        return em_err(EMBER_EINVAL, "ember_client_stats: NULL client or "
                      "stats, or sz not set");
    sz = out->sz < sizeof *out ? out->sz : sizeof *out;
    rc = em_buf_put(&b, "/api/v1/status", 14);
    if (rc == EMBER_OK && (rc = get(c, &b, &resp)) == EMBER_OK) {
        o = json_body(&resp);
        if (o == NULL || !json_object_object_get_ex(o, "data", &d) ||
            !json_object_is_type(d, json_type_object))
            rc = em_err(EMBER_EIO, "server: a status answer without data");
        em_http_resp_free(&resp);
    }
    if (rc == EMBER_OK) {
        ember_stats s = { .sz = sizeof s };
        stats_fill(d, &s);
        memcpy(out, &s, sz);
        out->sz = sz;
    }
    json_object_put(o);
    em_buf_free(&b);
    return rc;
}
