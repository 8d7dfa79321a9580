/*
** fuzz/serve_fuzz.h: an `ember serve` inside the fuzz target's process, for
** the server's fuzz targets (fuzz_push, fuzz_ingest, fuzz_query_params).
**
** The server is the real one: an em_server over a small database in a
** temporary directory, and a libmicrohttpd daemon with no listening socket
** calling the server's own callbacks (repl/serve_http.c). A request goes in
** as raw HTTP bytes over a socketpair handed to the daemon, which this
** thread runs (MHD_run) until it has answered and closed the connection:
** one thread, no timing, so that a run replays the same way every time.
** What differs from `ember serve`: the daemon's threading (serve.c runs a
** pool over epoll; a streamed answer's producer thread is the same), a
** body limit of FZ_MAX_BODY, so that bombs are cheap, and a query time
** limit of 5 s, under the fuzzer's -timeout.
*/
#ifndef FZ_SERVE_FUZZ_H
#define FZ_SERVE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "repl/serve.h"

#define FZ_MAX_BODY (1u << 20)

#define FZ_CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
    abort(); } } while (0)

/* The server, set up at the first call (its database then empty); it is
** torn down at exit. */
em_server *fz_serve(void);

/* Sends the N bytes at REQ, a whole HTTP request, and runs the daemon until
** the connection is closed. The answer's status; 0 when none arrived, which
** only libmicrohttpd may cause: refusing headers that overflow its
** per-connection pool, or failing to fit the answer's headers in what is
** left of it. A request that reached Ember's code and was not answered by
** it aborts. */
unsigned fz_serve_request(const uint8_t *req, size_t n);

/* What the server's database holds: a refused request changes none. */
typedef struct fz_counts {
    uint64_t series, profiles, samples, stacks, locations, functions,
             mappings, strings;
} fz_counts;

/* DB's counts (the server's when NULL). */
fz_counts fz_counts_of(ember_db *db);

/* Empties the database once it has grown past 32 MB, so that a long run
** keeps its speed. */
void fz_serve_trim(void);

/* Appends to OUT the N bytes at P, percent-encoding those a request line
** cannot hold (controls, space, '#', DEL): the server decodes them back. */
int fz_url_put(em_buf *out, const uint8_t *p, size_t n);

#endif /* FZ_SERVE_FUZZ_H */
