/*
** fuzz/fuzz_query_params.c: the parameters of Ember's own endpoints on
** hostile requests, through the whole server path: each input is
**
**   QUERY-STRING \n FORM-BODY
**
** sent as "GET /api/v1/query?QUERY-STRING", or as a POST of the form
** when there is one (multipart when it starts "--BOUNDARY", url-encoded
** otherwise), to the in-process server of fuzz/serve_fuzz.h. A
** QUERY-STRING starting "/api/v1/label", "/api/v1/types" or
** "/api/v1/series" names the path too, for match[], start, end and the
** label's name. So libmicrohttpd splits and decodes the parameters, and
** its post processor the form, as for `ember serve`; then the handler
** reads query, from, to, step, limit, width, unit, cum and format
** (serve_api.c), runs the query on a small database of two services and
** renders it.
**
** Invariants: nothing crashes or leaks; every request is answered, and a
** query changes nothing stored.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/serve_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char seed_text[] =
    "main;serve;parse 30\nmain;serve;render 20\nmain;gc 5\n";

/* Two services, two profiles each, a minute apart. */
static void seed(ember_db *db)
{
    static const char *const services[] = { "http", "worker" };

    for (int i = 0; i < 4; i++) {
        ember_label l = { "service", services[i % 2] };
        ember_import_opts o = { .sz = sizeof o, .labels = &l, .nlabels = 1,
                                .format = EMBER_FORMAT_COLLAPSED,
                                .flags = EMBER_IMPORT_TIME,
                                .time_ms = 1700000000000 + i * 60000 };
        FZ_CHECK(ember_import(db, seed_text, sizeof seed_text - 1, &o,
                              NULL) == EMBER_OK);
    }
}

/* The Content-Type and Content-Length of the form BODY (N bytes) into
** REQ: multipart when BODY starts "--BOUNDARY", url-encoded otherwise. */
static int form_head(em_buf *req, const uint8_t *body, size_t n)
{
    bool multipart = n >= 2 && memcmp(body, "--", 2) == 0;
    size_t nb = 0;
    char len[64];
    int rc;

    while (multipart && 2 + nb < n && body[2 + nb] != '\r' &&
           body[2 + nb] != '\n' && body[2 + nb] != '\0')
        nb++;
    if (multipart) {
        rc = em_buf_put(req, "Content-Type: multipart/form-data; "
                        "boundary=", 44);
        if (rc == EMBER_OK)
            rc = em_buf_put(req, body + 2, nb);
    } else {
        rc = em_buf_put(req, "Content-Type: application/"
                        "x-www-form-urlencoded", 47);
    }
    snprintf(len, sizeof len, "\r\nContent-Length: %zu\r\n\r\n", n);
    return rc == EMBER_OK ? em_buf_put(req, len, strlen(len)) : rc;
}

static bool starts(const uint8_t *p, size_t n, const char *prefix)
{
    return n >= strlen(prefix) && memcmp(p, prefix, strlen(prefix)) == 0;
}

/* The request of the input at [P, END) into REQ. */
static int request(const uint8_t *p, const uint8_t *end, em_buf *req)
{
    static const char head[] = " HTTP/1.1\r\nHost: fuzz\r\n"
                               "Connection: close\r\n";
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    const uint8_t *body = nl != NULL ? nl + 1 : end;
    size_t nqs = (size_t)((nl != NULL ? nl : end) - p);
    size_t nbody = (size_t)(end - body);
    bool path = starts(p, nqs, "/api/v1/label") ||
                starts(p, nqs, "/api/v1/types") ||
                starts(p, nqs, "/api/v1/series");
    int rc = em_buf_put(req, nbody > 0 ? "POST " : "GET ", nbody > 0 ? 5 : 4);

    if (rc == EMBER_OK && !path)
        rc = em_buf_put(req, "/api/v1/query?", 14);
    if (rc == EMBER_OK)
        rc = fz_url_put(req, p, nqs);
    if (rc == EMBER_OK)
        rc = em_buf_put(req, head, sizeof head - 1);
    if (rc == EMBER_OK)
        rc = nbody > 0 ? form_head(req, body, nbody)
                       : em_buf_put(req, "\r\n", 2);
    return rc == EMBER_OK ? em_buf_put(req, body, nbody) : rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool seeded;
    em_buf req = { 0 };
    fz_counts before, after;
    unsigned status;

    if (!seeded) {
        seed(fz_serve()->db);
        seeded = true;
    }
    before = fz_counts_of(NULL);
    FZ_CHECK(request(data, data + size, &req) == EMBER_OK);
    status = fz_serve_request(req.p, req.len);
    after = fz_counts_of(NULL);
    FZ_CHECK(status == 0 || (status >= 200 && status < 600));
    FZ_CHECK(memcmp(&before, &after, sizeof before) == 0);
    em_buf_free(&req);
    return 0;
}
