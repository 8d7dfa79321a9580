/*
** repl/serve_web.c: the page of `ember serve` (docs/web.md). Its files
** live in web/ and are built into the binary (scripts/web-embed.sh, the
** table em_web_assets), so the server needs nothing on disk and the page
** nothing from the network: uPlot comes from npm at build time, not from a
** CDN at run time.
**
** Every file answers with a strong ETag and `Cache-Control: no-cache`: the
** browser keeps it and asks again each time, and an unchanged file costs a
** 304 with no body. The paths carry no version, so a new binary's page is
** never hidden behind an old cached one. The page's Content-Security-Policy
** allows only its own origin: no inline script, nothing fetched elsewhere.
*/
#include <string.h>

#include "repl/serve.h"

#define CSP "default-src 'self'; img-src 'self' data: blob:; " \
            "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"

static const em_web_asset *asset_find(const char *path)
{
    for (size_t i = 0; i < em_web_nassets; i++)
        if (strcmp(em_web_assets[i].path, path) == 0)
            return &em_web_assets[i];
    return NULL;
}

static void header(em_resp *rs, const char *name, const char *value)
{
    if (rs->nheaders < EM_RESP_MAX_HEADERS) {
        rs->headers[rs->nheaders][0] = name;
        rs->headers[rs->nheaders][1] = value;
        rs->nheaders++;
    }
}

int em_h_web(em_req *rq, em_resp *rs)
{
    const em_web_asset *a = asset_find(rq->path);
    const char *inm;

    if (a == NULL)
        return em_resp_error(rs, 404, "not_found", "no such file: %s",
                             rq->path);
    header(rs, MHD_HTTP_HEADER_ETAG, a->etag);
    header(rs, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    header(rs, "X-Content-Type-Options", "nosniff");
    if (strcmp(a->ctype, "text/html; charset=utf-8") == 0)
        header(rs, "Content-Security-Policy", CSP);
    rs->ctype = a->ctype;
    inm = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                      MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (inm != NULL && strstr(inm, a->etag) != NULL) {
        rs->status = 304;       /* the browser's copy is this one */
        return EMBER_OK;
    }
    return em_buf_put(&rs->body, a->data, a->len);
}
