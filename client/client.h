/*
** client/client.h: the client layer of libember, above query/ and ingest/:
** ember_client_* (include/ember.h) runs queries, imports and metadata
** calls against `ember serve` (docs/protocol.md) and hands back the
** objects the local calls give. Files, one job each:
**
**   http.c      one HTTP exchange over libcurl, opened at first use
**               (client/curl_dl.h; Unix socket or TCP, TLS,
**               the bearer token, timeouts), nothing Ember-specific;
**   client.c    the handle, errors (the server's JSON error body mapped to
**               EMBER_* codes), queries, labels, types and status;
**   import.c    ember_client_import and ember_client_import_files.
**
** The pusher (push.c, spool.c) sends through http.c too.
**
** A client handle is used by one thread at a time (one curl handle, one
** keep-alive connection). Errors go through em_err, so ember_errmsg and
** ember_client_errmsg give the thread's last message.
*/
#ifndef EM_CLIENT_H
#define EM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/* ---- http.c ----------------------------------------------------------------- */

typedef struct em_http em_http;

/* One answer: its status, content type (NULL: none given) and body. */
typedef struct em_http_resp {
    long status;
    char *ctype;                /* owned */
    em_buf body;
} em_http_resp;

/* Opens a connection description for URL: "unix:PATH", "http://HOST:PORT"
** or "https://HOST:PORT" (a path after the port is a prefix of every
** request's). No connection is made yet. TOKEN (may be NULL) goes in
** every request as "Authorization: Bearer TOKEN". TIMEOUT_MS bounds a
** whole exchange (0: none), CONNECT_MS its connect (0: 10 s). CA_FILE
** (may be NULL) holds the PEM certificates https trusts. */
int em_http_open(const char *url, const char *token, long timeout_ms,
                 long connect_ms, const char *ca_file, em_http **out);
void em_http_close(em_http *h);                 /* NULL: no-op */
/* The URL as the caller gave it, for messages. */
const char *em_http_url(const em_http *h);
/* Keeps only the first MAX bytes of each answer (0: all, up to 4 GiB),
** for a caller that reads answers only to say what a refusal said. */
void em_http_keep_answer(em_http *h, size_t max);
/* GET PATH (with its query string, already escaped) or, when BODY is not
** NULL, POST it with LEN bytes of content type CTYPE. A transport failure
** is EMBER_EIO naming the URL; any status is EMBER_OK with *RESP filled
** (em_http_resp_free it). */
int em_http_do(em_http *h, const char *path, const void *body, size_t len,
               const char *ctype, em_http_resp *resp);
void em_http_resp_free(em_http_resp *r);
/* Appends "&NAME=VALUE" (or "?" first when B holds no '?') to the query
** string in B, VALUE escaped. EMBER_OK or ENOMEM. */
int em_http_param(em_buf *b, const char *name, const char *value);

/* ---- client.c --------------------------------------------------------------- */

/* Maps a non-2xx answer to an EMBER_* code with the server's message (its
** JSON error body's "error"), or names the status when the body is not
** Ember's. Returns the code. */
int em_client_answer_error(const ember_client *c, const em_http_resp *r);
/* The handle's HTTP side. */
em_http *em_client_http(ember_client *c);

#endif /* EM_CLIENT_H */
