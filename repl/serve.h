/*
** repl/serve.h: `ember serve`, the HTTP server (docs/protocol.md). Three
** parts, one file each:
**
**   serve.c       the command: options, listening sockets (Unix, TCP),
**                 libmicrohttpd daemons, background compaction
**                 (repl/compact_sched.c), signals, the orderly stop;
**   serve_http.c  one request's life: routing through the table, the token,
**                 the body and its limit, parameters, the answer, the
**                 access log line and the metrics;
**   serve_api.c   the table of routes and their handlers, each a thin
**                 adapter from HTTP to the public API (include/ember.h);
**   serve_stream.c answers sent as they are written (chunked), from a
**                 producer thread through a bounded buffer.
**
** A handler runs on one of the daemon's pool threads once the whole body
** has arrived; it fills an em_resp and returns. Everything a handler reads
** of the request goes through em_req_param and em_req_body, whatever way
** the client sent it (query string, url-encoded or multipart form, body).
*/
#ifndef EM_SERVE_H
#define EM_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include <protobuf-c/protobuf-c.h>

#include "engine/engine.h"
#include "repl/cli.h"
#include "repl/serve_mhd.h"

#define EM_SERVE_MAX_LISTEN 8
#define EM_SERVE_MAX_PARAMS 256         /* per request */
#define EM_SERVE_MAX_PARAM_BYTES (1u << 20) /* one form field, files aside */
#define EM_SERVE_CONN_MEMORY (64u << 10)   /* request line, headers, query */
/* Latency histogram bounds, seconds (Prometheus' default buckets). */
#define EM_SERVE_NBUCKETS 11

/* What `ember serve`'s options set (docs/protocol.md, "Limits"). */
typedef struct em_serve_opts {
    const char *dir;
    const char *listen[EM_SERVE_MAX_LISTEN];
    size_t nlisten;
    const char *token_file;
    const char *tls_cert, *tls_key;
    const char *access_log;     /* a path, "-" for stderr, "off" */
    uint64_t max_body;          /* bytes of one request body */
    unsigned max_conns;         /* open connections; past it: 503 */
    unsigned threads;           /* per listening socket */
    unsigned idle_timeout_s;    /* an idle keep-alive connection closes */
    int64_t query_timeout_ms;   /* a query's time; 0: none (a request may
                                ** ask for less, never more) */
    uint64_t query_max_bytes;   /* a query's memory; 0: none */
    const char *source_path;    /* list(): where source files are read
                                ** (pprof's -source_path); NULL: never */
    em_compact_sched_opts compact;  /* --compact-every and its runs' */
} em_serve_opts;

/* Counters of one route, for /metrics. */
typedef struct em_route_stats {
    _Atomic uint64_t by_class[6];       /* status / 100: 1xx..5xx; 0 unused */
    _Atomic uint64_t buckets[EM_SERVE_NBUCKETS + 1];   /* + the +Inf one */
    _Atomic uint64_t micros;            /* latencies summed */
    _Atomic uint64_t bytes_in, bytes_out;
} em_route_stats;

typedef struct em_route em_route;

typedef struct em_server {
    ember_db *db;
    em_serve_opts opts;
    char *token;                /* NULL: no token asked for */
    size_t token_len;
    FILE *log;                  /* access log; NULL: off */
    pthread_mutex_t log_lock;
    struct MHD_Daemon *daemons[EM_SERVE_MAX_LISTEN];
    size_t ndaemons;
    char *unix_paths[EM_SERVE_MAX_LISTEN];   /* sockets to unlink at exit */
    size_t nunix;
    int64_t started_ms;
    atomic_bool stopping;
    _Atomic unsigned open_conns;
    _Atomic unsigned active;    /* requests between headers and completion */
    _Atomic uint64_t conns_total, conns_refused;
    em_route_stats *stats;      /* one per route of em_routes */
    em_compact_sched *compact;  /* background compaction; NULL: off. Set
                                ** before the daemons start, freed after
                                ** they stop */
} em_server;

/* One parameter: from the query string, or a field of a form body. */
typedef struct em_param {
    char *name;
    em_buf value;               /* NUL after its bytes (not counted) */
} em_param;

typedef struct em_stream em_stream;

typedef struct em_req {
    em_server *srv;
    struct MHD_Connection *conn;
    const em_route *route;      /* NULL: no route matched */
    size_t route_ix;
    char *method, *path;
    char seg[256];              /* the '*' segment of the route's path */
    em_buf body;                /* the raw body, unless it is a form */
    em_param *params;
    size_t nparams, cap_params;
    struct MHD_PostProcessor *pp;
    uint64_t bytes_in;
    int64_t start_ns;
    unsigned early;             /* a status decided before the body */
    char early_msg[200];
    bool form;                  /* the body is a form, fed to pp */
    bool form_failed;           /* a field broke a limit */
    unsigned status;            /* sent, for the log and metrics */
    uint64_t bytes_out;
    em_stream *stream;          /* a streamed answer's: its bytes sent */
} em_req;

#define EM_RESP_MAX_HEADERS 4

/* A handler's answer: BODY, or else STREAM (owned) writes it. */
typedef struct em_resp {
    unsigned status;
    const char *ctype;
    em_buf body;
    em_stream *stream;
    const char *headers[EM_RESP_MAX_HEADERS][2];   /* more: name, value
                                ** (static strings; the page's caching) */
    size_t nheaders;
} em_resp;

typedef int (*em_handler)(em_req *rq, em_resp *rs);

enum { EM_GET = 1u, EM_POST = 2u };

/* What a POST body is. */
typedef enum em_body_kind {
    EM_BODY_FORM,               /* url-encoded or multipart parameters */
    EM_BODY_RAW,                /* data, whatever the content type says */
    EM_BODY_RAW_OR_MULTIPART    /* data, or multipart with a "profile"
                                ** field: url-encoded is data too, as
                                ** curl --data-binary labels it so */
} em_body_kind;

struct em_route {
    const char *path;           /* exact; a '*' segment matches one segment */
    unsigned methods;           /* EM_GET | EM_POST */
    em_handler run;
    bool open;                  /* answered without the token (health) */
    em_body_kind body;
    bool connect;               /* a Connect call: errors in its shape */
};

/* ---- serve_api.c ----------------------------------------------------------- */

/* A list of strings, sorted and made distinct by em_strset_sort: the
** unions of label names and values the metadata endpoints answer. */
typedef struct em_strset {
    char **v;
    size_t n, cap;
} em_strset;

int em_strset_add(em_strset *s, const char *str);
void em_strset_sort(em_strset *s);
void em_strset_free(em_strset *s);

/* The limits of a query run for RQ (docs/protocol.md, "Limits"): the
** server's --query-timeout and --query-memory, the timeout lowered by the
** request's `timeout` parameter or Connect-Timeout-Ms header (never
** raised), into O's timeout_ms and max_bytes. A malformed timeout is
** answered here (400, or Connect's invalid_argument on a Connect route)
** and *BAD set. */
int em_serve_query_limits(em_req *rq, em_resp *rs, ember_query_opts *o,
                          bool *bad);

/* ---- serve_web.c: the page ----------------------------------------------- */

/* One file of web/, built into the binary (scripts/web-embed.sh writes the
** table into BUILD/gen/web/assets.c). */
typedef struct em_web_asset {
    const char *path;           /* the URL path: "/", "/ui/app.js" */
    const char *ctype;
    const unsigned char *data;
    size_t len;
    const char *etag;           /* quoted, from the bytes' SHA-256 */
} em_web_asset;

extern const em_web_asset em_web_assets[];
extern const size_t em_web_nassets;

/* GET / and /ui/NAME: the page and its files, revalidated by ETag. */
int em_h_web(em_req *rq, em_resp *rs);

/* Pyroscope's POST /ingest (serve_pyroscope.c). */
int em_h_ingest(em_req *rq, em_resp *rs);

/* ---- serve_pbjson.c: protobuf's JSON mapping ------------------------- */

/* JSON's N bytes as the wire bytes of message D, appended to OUT. */
int em_pbjson_decode(const ProtobufCMessageDescriptor *d, const char *json,
                     size_t n, em_buf *out);
/* Message D's wire bytes P as JSON (one line), appended to OUT. */
int em_pbjson_encode(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                     size_t n, em_buf *out);

/* ---- serve_connect.c: Connect unary calls ------------------------------ */

/* A Connect error answer: {"code":CODE,"message":MSG} with CODE's status. */
int em_connect_error(em_resp *rs, const char *code, const char *msg);
/* The Connect error answer for RC, an Ember code, with its message. */
int em_connect_ember(em_resp *rs, int rc);
/* One Connect method: its request and answer messages, and RUN, which
** takes the request's protobuf bytes and answers in protobuf. */
typedef struct em_connect_method {
    const char *name;
    const ProtobufCMessageDescriptor *in, *out;
    int (*run)(em_req *rq, em_resp *rs, const uint8_t *p, size_t n);
} em_connect_method;

/* Calls M on the request: the body gunzipped per Content-Encoding, a JSON
** body made protobuf for M->run, and its answer made JSON again. A body
** that is neither is answered here. */
int em_connect_call(em_req *rq, em_resp *rs, const em_connect_method *m);
/* The same with the headers' values CT and CE given (NULL: absent), so
** that no connection is needed (fuzz/fuzz_push.c): RQ's body and server. */
int em_connect_call_with(em_req *rq, em_resp *rs, const em_connect_method *m,
                         const char *ct, const char *ce);
/* The Connect code of a status the server decided before the handler. */
const char *em_connect_code(unsigned status);
/* Pyroscope's POST /push.v1.PusherService/Push: a PushRequest's profiles
** stored in one transaction, all or none. */
int em_h_push(em_req *rq, em_resp *rs);
extern const em_connect_method em_push_method;
/* Pyroscope's querier, POST /querier.v1.QuerierService/METHOD (serve_querier.c):
** the handler reads the method from the path's last segment. */
int em_h_querier(em_req *rq, em_resp *rs);

extern const em_route em_routes[];
extern const size_t em_nroutes;
/* The latency buckets' upper bounds, seconds. */
extern const double em_serve_buckets[EM_SERVE_NBUCKETS];

/* ---- serve_stream.c: streamed answers ------------------------------------ */

/* Writes an answer to F (a stream of the response): EMBER_OK, or a code
** after which the answer is cut short (the client sees the chunked body
** end without its last chunk). Runs on a thread of its own. */
typedef int (*em_stream_fn)(void *ctx, FILE *f);

/* A stream that will run FN(CTX) once begun and then FREE_CTX(CTX) (may
** be NULL) when both the request and the response are done with it. On
** failure nothing is taken: the caller frees CTX. */
int em_stream_new(em_stream_fn fn, void (*free_ctx)(void *), void *ctx,
                  em_stream **out);
/* Starts S's producer and waits until it ends or fills the buffer (as
** long as rendering inline would have taken). When it ended, *ENDED is
** set and WHOLE gets all it wrote, or the code and message of its
** failure are returned: answer as with any buffer, then drop S. Else S is
** to be streamed (em_stream_response). */
int em_stream_begin(em_stream *s, em_buf *whole, bool *ended);
/* Runs FN(CTX) here, into OUT: for answers known to be small. */
int em_stream_render_whole(em_stream_fn fn, void *ctx, em_buf *out);
/* A response of unknown length (chunked) reading S on CONN; it holds S
** until libmicrohttpd destroys it. NULL when out of memory. */
struct MHD_Response *em_stream_response(em_stream *s,
                                        struct MHD_Connection *conn);
/* Bytes of S handed to libmicrohttpd so far. */
uint64_t em_stream_sent(const em_stream *s);
/* Drops a hold on S (NULL: no-op). */
void em_stream_unref(em_stream *s);

/* ---- serve.c ------------------------------------------------------------- */

/* A client's address as the access log shows it: "127.0.0.1", "[::1]",
** "unix". */
void em_serve_addr_str(const struct sockaddr *sa, char *buf, size_t cap);

/* ---- serve_http.c -------------------------------------------------------- */

/* libmicrohttpd's callbacks, with the server as their closure. */
enum MHD_Result em_http_on_request(void *cls, struct MHD_Connection *c,
                                   const char *url, const char *method,
                                   const char *version, const char *upload,
                                   size_t *upload_size, void **ctx);
void em_http_on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_RequestTerminationCode toe);
void em_http_on_connection(void *cls, struct MHD_Connection *c,
                           void **socket_ctx,
                           enum MHD_ConnectionNotificationCode toe);

/* The first value of parameter NAME, or NULL. */
const char *em_req_param(const em_req *rq, const char *name);
/* Every value of NAME, in order, into OUT (at most MAX); their count. */
size_t em_req_params(const em_req *rq, const char *name, const char **out,
                     size_t max);
/* A form field's bytes (binary-safe: a file field is held whole, under
** the body limit; a NUL after its length), or NULL when the body is no
** form or has no field NAME. */
const em_buf *em_req_field(const em_req *rq, const char *name);
/* The raw body (also a form's file field "profile", if any). */
const em_buf *em_req_body(const em_req *rq);

/* A JSON error answer, Prometheus' shape: {"status":"error","errorType":
** TYPE,"error":MESSAGE}. Returns EMBER_OK (the answer is ready). */
int em_resp_error(em_resp *rs, unsigned status, const char *type,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The error answer for RC, an Ember code, with the thread's message. */
int em_resp_ember(em_resp *rs, int rc);
/* Text into RS's body; EMBER_OK or EMBER_ENOMEM. */
int em_resp_text(em_resp *rs, const char *s);
int em_resp_printf(em_resp *rs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* EM_SERVE_H */
