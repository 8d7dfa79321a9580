/*
** repl/serve_connect.c: the Connect protocol's unary calls, as Pyroscope's
** APIs use them (connectrpc.com): POST /package.Service/Method, the bare
** message as the body (Content-Type application/proto, or
** application/json in protobuf's JSON mapping through serve_pbjson.c;
** optionally Content-Encoding gzip), the reply message as the answer in
** the request's encoding, and errors as {"code":"invalid_argument",
** "message":"..."} with the status that code maps to. Then Pyroscope's
** push, the first method served here.
*/
#include <string.h>
#include <strings.h>

#include "ingest/ingest.h"
#include "repl/serve.h"
#include "proto/pyroscope/push.pb-c.h"

#define MAX_LABELS EM_MAX_CLI_LABELS

/* Connect's codes and the statuses they travel with. */
static const struct connect_code {
    const char *code;
    unsigned status;
} codes[] = {
    { "invalid_argument", 400 }, { "unauthenticated", 401 },
    { "permission_denied", 403 }, { "not_found", 404 },
    { "resource_exhausted", 429 }, { "unimplemented", 501 },
    { "unavailable", 503 }, { "deadline_exceeded", 504 },
    { "internal", 500 },
};

int em_connect_error(em_resp *rs, const char *code, const char *msg)
{
    unsigned status = 500;

    for (size_t i = 0; i < EM_ARRAY_LEN(codes); i++)
        if (strcmp(codes[i].code, code) == 0)
            status = codes[i].status;
    rs->body.len = 0;
    rs->status = status;
    rs->ctype = "application/json";
    if (em_resp_text(rs, "{\"code\":") || em_buf_json(&rs->body, code) ||
        em_resp_text(rs, ",\"message\":") || em_buf_json(&rs->body, msg) ||
        em_resp_text(rs, "}\n"))
        return EMBER_ENOMEM;
    return EMBER_OK;
}

const char *em_connect_code(unsigned status)
{
    switch (status) {
    case 400: return "invalid_argument";
    case 401: return "unauthenticated";
    case 404: case 405: return "unimplemented";
    case 413: return "resource_exhausted";
    case 503: return "unavailable";
    default: return "internal";
    }
}

/* The code of an Ember failure. */
int em_connect_ember(em_resp *rs, int rc)
{
    const char *msg = ember_errmsg(NULL);
    const char *code = rc == EMBER_EINVAL ? "invalid_argument"
                     : rc == EMBER_ELIMIT ? "resource_exhausted"
                     : rc == EMBER_ETIMEOUT ? "deadline_exceeded"
                     : rc == EMBER_ENOTFOUND ? "not_found"
                     : rc == EMBER_EBUSY || rc == EMBER_ENOMEM ? "unavailable"
                     : "internal";

    return em_connect_error(rs, code, msg[0] != '\0' ? msg
                                                   : ember_strerror(rc));
}

/* The request's bytes, gunzipped when Content-Encoding CE says so (*OWNED
** then holds them, for the caller to free); *JSON says which codec, by
** Content-Type CT. */
static int call_body(em_req *rq, em_resp *rs, const char *ct,
                     const char *ce, const uint8_t **p, size_t *n,
                     void **owned, bool *json)
{
    const em_buf *b = em_req_body(rq);

    *owned = NULL;
    *p = b->p;
    *n = b->len;
    *json = ct != NULL && strncasecmp(ct, "application/json", 16) == 0;
    if (!*json && (ct == NULL || strncasecmp(ct, "application/proto", 17)))
        return em_connect_error(rs, "invalid_argument", "Content-Type: "
                                "expected application/proto or "
                                "application/json");
    if (ce != NULL && strcasecmp(ce, "identity") != 0) {
        size_t len;
        if (strcasecmp(ce, "gzip") != 0)
            return em_connect_error(rs, "unimplemented", "Content-Encoding: "
                                    "only gzip and identity are taken");
        if (em_gunzip(*p, *n, rq->srv->opts.max_body, owned, &len) !=
            EMBER_OK)
            return em_connect_ember(rs, EMBER_EINVAL);
        *p = *owned;
        *n = len;
    }
    return EMBER_OK;
}

/* A JSON request made the wire bytes of message IN, into WIRE. */
static int call_from_json(em_resp *rs, const ProtobufCMessageDescriptor *in,
                          const uint8_t *p, size_t n, em_buf *wire)
{
    int rc = em_pbjson_decode(in, (const char *)p, n, wire);

    if (rc == EMBER_OK)
        return EMBER_OK;
    return em_connect_error(rs, rc == EMBER_ENOMEM ? "unavailable"
                                                   : "invalid_argument",
                            ember_errmsg(NULL));
}

/* A successful binary answer of message OUT rewritten as JSON. */
static int call_to_json(em_resp *rs, const ProtobufCMessageDescriptor *out)
{
    em_buf json = { 0 };
    int rc;

    if (rs->status != 200 || rs->ctype == NULL ||
        strcmp(rs->ctype, "application/proto") != 0)
        return EMBER_OK;                /* an error: already JSON */
    if ((rc = em_pbjson_encode(out, rs->body.p, rs->body.len, &json)) !=
        EMBER_OK) {
        em_buf_free(&json);
        return em_connect_ember(rs, rc);
    }
    em_buf_free(&rs->body);
    rs->body = json;
    rs->ctype = "application/json";
    return EMBER_OK;
}

int em_connect_call(em_req *rq, em_resp *rs, const em_connect_method *m)
{
    const char *ct = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *ce = MHD_lookup_connection_value(
        rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);

    return em_connect_call_with(rq, rs, m, ct, ce);
}

int em_connect_call_with(em_req *rq, em_resp *rs, const em_connect_method *m,
                         const char *ct, const char *ce)
{
    const uint8_t *p;
    void *owned = NULL;
    em_buf wire = { 0 };
    size_t n;
    bool json;
    int rc = call_body(rq, rs, ct, ce, &p, &n, &owned, &json);

    if (rc != EMBER_OK || rs->status != 200)
        goto done;
    if (json) {
        if ((rc = call_from_json(rs, m->in, p, n, &wire)) != EMBER_OK ||
            rs->status != 200)
            goto done;
        p = wire.p;
        n = wire.len;
    }
    if ((rc = m->run(rq, rs, p, n)) == EMBER_OK && json)
        rc = call_to_json(rs, m->out);
done:
    em_buf_free(&wire);
    em_free(owned);
    return rc;
}

/* ---- push.v1.PusherService/Push ----------------------------------------- */

/* The labels of series S: __name__ gives the pprof's name part (*NAME);
** other names starting "__" are Pyroscope's own and dropped. */
static int push_labels(const Push__V1__RawProfileSeries *s,
                       ember_label *labels, size_t *n, const char **name)
{
    *n = 0;
    *name = NULL;
    for (size_t i = 0; i < s->n_labels; i++) {
        const Types__V1__LabelPair *l = s->labels[i];
        if (strcmp(l->name, "__name__") == 0) {
            *name = l->value;
            continue;
        }
        if (strncmp(l->name, "__", 2) == 0)
            continue;
        if (*n == MAX_LABELS)
            return em_err(EMBER_ELIMIT, "series: more than %d labels",
                          MAX_LABELS);
        labels[(*n)++] = (ember_label){ l->name, l->value };
    }
    return em_labels_check(labels, *n);
}

/* Writes each of series S's profiles in TXN. */
static int push_series(ember_txn *txn, const Push__V1__RawProfileSeries *s,
                       size_t si, ember_label *labels)
{
    ember_import_opts o = { .sz = sizeof o, .format = EMBER_FORMAT_PPROF };
    char origin[64];
    int rc = push_labels(s, labels, &o.nlabels, &o.name);

    if (rc != EMBER_OK)
        return em_err_prefix(rc, "series %zu", si);
    o.labels = labels;
    o.origin = origin;          /* an import's errors start with it */
    for (size_t j = 0; j < s->n_samples && rc == EMBER_OK; j++) {
        snprintf(origin, sizeof origin, "series %zu, sample %zu", si, j);
        rc = ember_txn_import(txn, s->samples[j]->raw_profile.data,
                              s->samples[j]->raw_profile.len, &o, NULL);
    }
    return rc;
}

/* Every profile of R in one transaction: a push is stored whole or not. */
static int push_write(ember_db *db, const Push__V1__PushRequest *r)
{
    ember_label labels[MAX_LABELS];
    ember_txn *txn = NULL;
    int rc = ember_txn_begin(db, &txn);

    for (size_t i = 0; i < r->n_series && rc == EMBER_OK; i++)
        rc = push_series(txn, r->series[i], i, labels);
    if (rc == EMBER_OK)
        return ember_txn_commit(txn);
    ember_txn_abort(txn);
    return rc;
}

static int push_run(em_req *rq, em_resp *rs, const uint8_t *p, size_t n)
{
    Push__V1__PushRequest *r = push__v1__push_request__unpack(NULL, n, p);
    int rc;

    if (r == NULL)
        return em_connect_error(rs, "invalid_argument", "PushRequest: not "
                                "a valid message");
    rc = push_write(rq->srv->db, r);
    push__v1__push_request__free_unpacked(r, NULL);
    if (rc != EMBER_OK)
        return em_connect_ember(rs, rc);
    rs->ctype = "application/proto";    /* PushResponse{}: no bytes */
    return EMBER_OK;
}

const em_connect_method em_push_method = {
    "Push", &push__v1__push_request__descriptor,
    &push__v1__push_response__descriptor, push_run
};

int em_h_push(em_req *rq, em_resp *rs)
{
    return em_connect_call(rq, rs, &em_push_method);
}
