/*
** client/http.c: one HTTP exchange with `ember serve` through libcurl, so
** that the client writes no HTTP of its own (issue 14). A Unix socket URL
** ("unix:PATH") is requested as http://ember/... over the socket, which
** the server answers whatever the host name. One curl easy handle per
** client keeps its connection alive between requests. libcurl is opened at
** the first client (client/curl_dl.h), not linked. Its errors are
** translated here: callers see EMBER_EIO naming the URL, never a CURLcode.
** The client and the pusher (client/push.c) both send through it.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "client/curl_dl.h"

/* Largest answer read into memory: a bound, not an expectation. */
#define HTTP_MAX_BODY ((size_t)1 << 32)

struct em_http {
    CURL *curl;
    char *url;                  /* as the caller gave it */
    char *base;                 /* what request paths are appended to */
    char *token_header;         /* "Authorization: Bearer ..."; NULL: none */
    size_t max_answer;          /* bytes of an answer kept; the rest read
                                ** and dropped */
    bool too_large;             /* the answer passed HTTP_MAX_BODY */
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

/* curl_global_init is not safe to race: once per process. */
static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Splits URL into the base that paths are appended to and, for
** "unix:PATH", the socket's path. */
static int url_split(em_http *h, const char *url, char **unix_path)
{
    *unix_path = NULL;
    if (strncmp(url, "unix:", 5) == 0 && url[5] != '\0') {
        *unix_path = em_strdup(url + 5);
        h->base = em_strdup("http://ember");
        return *unix_path != NULL && h->base != NULL ? EMBER_OK
               : em_err(EMBER_ENOMEM, "client: URL %s", url);
    }
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return em_err(EMBER_EINVAL, "server %s: expected unix:PATH, "
                      "http://HOST:PORT or https://HOST:PORT", url);
    h->base = em_strndup(url, strlen(url) -
                         (url[strlen(url) - 1] == '/' ? 1 : 0));
    return h->base != NULL ? EMBER_OK
           : em_err(EMBER_ENOMEM, "client: URL %s", url);
}

static int handle_setup(em_http *h, const char *unix_path, long timeout_ms,
                        long connect_ms)
{
    CURL *c = h->curl;
    int bad = 0;

    bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                            connect_ms > 0 ? connect_ms : 10000L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_USERAGENT,
                            "ember/" EMBER_VERSION_STRING) != CURLE_OK;
    if (unix_path != NULL)
        bad |= curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, unix_path) !=
               CURLE_OK;
    return bad ? em_err(EMBER_ENOMEM, "client: setting up libcurl") : EMBER_OK;
}

int em_http_open(const char *url, const char *token, long timeout_ms,
                 long connect_ms, const char *ca_file, em_http **out)
{
    em_http *h;
    char *unix_path = NULL;
    int rc;

    *out = NULL;
    if (url == NULL)
        return em_err(EMBER_EINVAL, "client: no server URL");
    if ((rc = em_curl_load()) != EMBER_OK)
        return rc;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return em_err(EMBER_EIO, "client: libcurl: %s",
                      curl_easy_strerror(global_rc));
    if ((h = em_calloc(1, sizeof *h)) == NULL)
        return em_err(EMBER_ENOMEM, "client: handle");
    h->url = em_strdup(url);
    rc = h->url == NULL ? em_err(EMBER_ENOMEM, "client: URL")
                        : url_split(h, url, &unix_path);
    if (rc == EMBER_OK && token != NULL &&
        asprintf(&h->token_header, "Authorization: Bearer %s", token) < 0) {
        h->token_header = NULL;
        rc = em_err(EMBER_ENOMEM, "client: token");
    }
    if (rc == EMBER_OK && (h->curl = curl_easy_init()) == NULL)
        rc = em_err(EMBER_ENOMEM, "client: libcurl handle");
    if (rc == EMBER_OK)
        rc = handle_setup(h, unix_path, timeout_ms, connect_ms);
    if (rc == EMBER_OK && ca_file != NULL &&
        curl_easy_setopt(h->curl, CURLOPT_CAINFO, ca_file) != CURLE_OK)
        rc = em_err(EMBER_EINVAL, "client: CA file %s refused", ca_file);
    em_free(unix_path);     /* libcurl keeps its own copy */
    if (rc != EMBER_OK) {
        em_http_close(h);
        return rc;
    }
    *out = h;
    return EMBER_OK;
}

void em_http_close(em_http *h)
{
    if (h == NULL)
        return;
    if (h->curl != NULL)
        curl_easy_cleanup(h->curl);
    em_free(h->url);
    em_free(h->base);
    free(h->token_header);      /* asprintf's */
    em_free(h);
}

const char *em_http_url(const em_http *h)
{
    return h->url;
}

void em_http_keep_answer(em_http *h, size_t max)
{
    h->max_answer = max;
}

void em_http_resp_free(em_http_resp *r)
{
    em_free(r->ctype);
    em_buf_free(&r->body);
    memset(r, 0, sizeof *r);
}

typedef struct sink {
    em_http *h;
    em_buf *b;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    sink *s = ctx;

    n *= size;
    if (s->h->max_answer > 0) {         /* keep the first bytes only */
        size_t room = s->h->max_answer - s->b->len;
        return em_buf_put(s->b, p, n < room ? n : room) == EMBER_OK ? n : 0;
    }
    if (s->b->len + n > HTTP_MAX_BODY) {
        s->h->too_large = true;
        return 0;               /* libcurl stops with a write error */
    }
    return em_buf_put(s->b, p, n) == EMBER_OK ? n : 0;
}

/* The token, the content type, and no "Expect: 100-continue" (libcurl
** adds it to large POSTs: a round trip each, for a server that reads
** every body anyway). */
static struct curl_slist *headers_for(const em_http *h, const char *ctype)
{
    struct curl_slist *l = curl_slist_append(NULL, "Expect:"), *t;
    char buf[200];

    if (l != NULL && h->token_header != NULL &&
        (t = curl_slist_append(l, h->token_header)) == NULL) {
        curl_slist_free_all(l);
        return NULL;
    }
    if (l == NULL)
        return NULL;
    snprintf(buf, sizeof buf, "Content-Type: %s",
             ctype != NULL ? ctype : "application/octet-stream");
    t = curl_slist_append(l, buf);
    if (t == NULL)
        curl_slist_free_all(l);
    return t;
}

/* The transport failure RC as the caller sees it. */
static int transport_error(em_http *h, CURLcode rc)
{
    const char *why = h->errbuf[0] != '\0' ? h->errbuf
                                           : curl_easy_strerror(rc);

    if (h->too_large)
        return em_err(EMBER_ELIMIT, "server %s: an answer larger than %zu "
                      "bytes", h->url, HTTP_MAX_BODY);
    if (rc == CURLE_OUT_OF_MEMORY || rc == CURLE_WRITE_ERROR)
        return em_err(EMBER_ENOMEM, "server %s: out of memory for the "
                      "answer", h->url);
    if (rc == CURLE_COULDNT_CONNECT) {  /* the OS's words say more */
        long e = 0;
        curl_easy_getinfo(h->curl, CURLINFO_OS_ERRNO, &e);
        if (e != 0)
            return em_err(EMBER_EIO, "server %s: cannot connect: %s",
                          h->url, strerror((int)e));
    }
    return em_err(EMBER_EIO, "server %s: %s", h->url, why);
}

static int request_setup(em_http *h, const char *url, const void *body,
                         size_t len, struct curl_slist *hdrs, sink *s)
{
    CURL *c = h->curl;
    int bad = 0;

    bad |= curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEDATA, s) != CURLE_OK;
    if (body != NULL) {
        bad |= curl_easy_setopt(c, CURLOPT_POST, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, body) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                                (curl_off_t)len) != CURLE_OK;
    } else {
        bad |= curl_easy_setopt(c, CURLOPT_HTTPGET, 1L) != CURLE_OK;
    }
    return bad ? em_err(EMBER_ENOMEM, "client: setting up a request")
               : EMBER_OK;
}

int em_http_do(em_http *h, const char *path, const void *body, size_t len,
               const char *ctype, em_http_resp *resp)
{
    struct curl_slist *hdrs = headers_for(h, ctype);
    sink s = { .h = h, .b = &resp->body };
    char *url = NULL, *ct = NULL;
    CURLcode crc;
    int rc = EMBER_OK;

    memset(resp, 0, sizeof *resp);
    h->errbuf[0] = '\0';
    h->too_large = false;
    if (hdrs == NULL || asprintf(&url, "%s%s", h->base, path) < 0) {
        url = NULL;
        rc = em_err(EMBER_ENOMEM, "client: request %s", path);
    }
    if (rc == EMBER_OK)
        rc = request_setup(h, url, body, len, hdrs, &s);
    if (rc == EMBER_OK && (crc = curl_easy_perform(h->curl)) != CURLE_OK)
        rc = transport_error(h, crc);
    if (rc == EMBER_OK) {
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &resp->status);
        curl_easy_getinfo(h->curl, CURLINFO_CONTENT_TYPE, &ct);
        if (ct != NULL && (resp->ctype = em_strdup(ct)) == NULL)
            rc = em_err(EMBER_ENOMEM, "client: content type");
    }
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    free(url);
    if (rc != EMBER_OK)
        em_http_resp_free(resp);
    return rc;
}

int em_http_param(em_buf *b, const char *name, const char *value)
{
    char *esc = curl_easy_escape(NULL, value, 0);
    bool first = b->len == 0 || memchr(b->p, '?', b->len) == NULL;
    int rc;

    if (esc == NULL)
        return em_err(EMBER_ENOMEM, "client: parameter %s", name);
    rc = em_buf_put(b, first ? "?" : "&", 1);
    if (rc == EMBER_OK)
        rc = em_buf_put(b, name, strlen(name));
    if (rc == EMBER_OK)
        rc = em_buf_put(b, "=", 1);
    if (rc == EMBER_OK)
        rc = em_buf_put(b, esc, strlen(esc));
    curl_free(esc);
    return rc == EMBER_OK ? EMBER_OK
           : em_err(EMBER_ENOMEM, "client: parameter %s", name);
}
