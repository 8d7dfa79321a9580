/*
** fuzz/fuzz_ingest.c: Pyroscope's POST /ingest (repl/serve_pyroscope.c) on
** hostile requests, through the whole server path: each input is
**
**   QUERY-STRING \n CONTENT-TYPE \n BODY
**
** sent as "POST /ingest?QUERY-STRING" (bytes a request line cannot hold
** percent-encoded) with that Content-Type (none when empty) to the
** in-process server of fuzz/serve_fuzz.h. So libmicrohttpd splits and
** decodes the query string and, for a multipart body, its post processor
** cuts the fields (the SDKs' "profile", "prev_profile",
** "sample_type_config") as it does for `ember serve`; then em_h_ingest
** parses the name "APP.KIND{k=v,...}", from, format and spyName and
** imports the body into a small real database.
**
** Invariants: nothing crashes or leaks; every request is answered; one
** that is not answered 200 stores nothing at all.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/serve_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next line of [*P, END): its length; *P moves past its '\n'. */
static size_t line(const uint8_t **p, const uint8_t *end, const uint8_t **at)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t n = (size_t)((nl != NULL ? nl : end) - *p);

    *at = *p;
    *p = nl != NULL ? nl + 1 : end;
    return n;
}

/* "Content-Type: CT\r\n" into REQ, a CR or NUL in CT made a space. */
static int ctype_put(em_buf *req, const uint8_t *ct, size_t n)
{
    int rc = em_buf_put(req, "Content-Type: ", 14);

    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = em_buf_put(req, ct[i] == '\r' || ct[i] == '\0' ? " "
                        : (const char *)&ct[i], 1);
    return rc == EMBER_OK ? em_buf_put(req, "\r\n", 2) : rc;
}

/* The request of the input at [P, END) into REQ. */
static int request(const uint8_t *p, const uint8_t *end, em_buf *req)
{
    static const char head[] = " HTTP/1.1\r\nHost: fuzz\r\n"
                               "Connection: close\r\n";
    const uint8_t *qs, *ct;
    size_t nqs = line(&p, end, &qs), nct = line(&p, end, &ct);
    char len[64];
    int rc = em_buf_put(req, "POST /ingest?", 13);

    snprintf(len, sizeof len, "Content-Length: %zu\r\n\r\n",
             (size_t)(end - p));
    if (rc == EMBER_OK)
        rc = fz_url_put(req, qs, nqs);
    if (rc == EMBER_OK)
        rc = em_buf_put(req, head, sizeof head - 1);
    if (rc == EMBER_OK && nct > 0)
        rc = ctype_put(req, ct, nct);
    if (rc == EMBER_OK)
        rc = em_buf_put(req, len, strlen(len));
    return rc == EMBER_OK ? em_buf_put(req, p, (size_t)(end - p)) : rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_buf req = { 0 };
    fz_counts before, after;
    unsigned status;

    fz_serve();
    before = fz_counts_of(NULL);
    FZ_CHECK(request(data, data + size, &req) == EMBER_OK);
    status = fz_serve_request(req.p, req.len);
    after = fz_counts_of(NULL);
    FZ_CHECK(status == 0 || (status >= 200 && status < 600));
    if (status != 200)
        FZ_CHECK(memcmp(&before, &after, sizeof before) == 0);
    em_buf_free(&req);
    fz_serve_trim();
    return 0;
}
