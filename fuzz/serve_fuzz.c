/*
** fuzz/serve_fuzz.c: the in-process server of fuzz/serve_fuzz.h. With
** FUZZ_SERVE_VERBOSE set in the environment, each answer's first bytes go
** to stderr (to see what a corpus file gets).
*/
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fuzz/serve_fuzz.h"

/* Time without a byte moved that makes a request stuck, a bug: above the
** query timeout, below fuzz-smoke's -timeout. */
#define STUCK_MS 8000
#define TRIM_BYTES (32u << 20)

static em_server srv;
static struct MHD_Daemon *daemon_;
static bool reached;            /* the request got to the server's code */
static bool queued;             /* ... which queued an answer */
static char dir[] = "/tmp/ember-fuzz-serve-XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void db_open(void)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE,
                          .map_size = 16u << 20 };

    FZ_CHECK(ember_open(dir, &o, &srv.db) == EMBER_OK);
}

static void db_close(void)
{
    ember_close(srv.db);
    srv.db = NULL;
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    FZ_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
}

static void teardown(void)
{
    if (daemon_ != NULL)
        MHD_stop_daemon(daemon_);
    ember_close(srv.db);
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    em_free(srv.stats);
}

/* The server's request callback, noting that the request got to it:
** libmicrohttpd refuses a request whose headers do not fit its memory pool
** (431) before any of Ember's code runs, often with no answer. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **ctx)
{
    reached = true;
    return em_http_on_request(cls, c, url, method, version, upload,
                              upload_size, ctx);
}

/* The server's completion callback, noting whether an answer was queued:
** libmicrohttpd may still fail to send it, when the request line and
** headers left its pool no room for the answer's. */
static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                         enum MHD_RequestTerminationCode toe)
{
    const em_req *rq = *ctx;

    queued = rq != NULL && rq->status != 0;
    em_http_on_completed(cls, c, ctx, toe);
}

em_server *fz_serve(void)
{
    if (daemon_ != NULL)
        return &srv;
    signal(SIGPIPE, SIG_IGN);
    FZ_CHECK(em_mhd_load() == EMBER_OK);
    FZ_CHECK(mkdtemp(dir) != NULL);
    db_open();
    srv.opts = (em_serve_opts){ .dir = dir, .max_body = FZ_MAX_BODY,
                                .max_conns = 16, .threads = 1,
                                .query_timeout_ms = 5000,
                                .query_max_bytes = 256u << 20 };
    FZ_CHECK((srv.stats = em_calloc(em_nroutes, sizeof *srv.stats)) != NULL);
    pthread_mutex_init(&srv.log_lock, NULL);
    /* no listening socket, no thread: fz_serve_request runs it (a
    ** streamed answer's producer has one, as in ember serve) */
    daemon_ = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET |
                               MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
                               on_request, &srv,
                               MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                               &srv,
                               MHD_OPTION_NOTIFY_CONNECTION,
                               em_http_on_connection, &srv, MHD_OPTION_END);
    FZ_CHECK(daemon_ != NULL);
    atexit(teardown);
    return &srv;
}

fz_counts fz_counts_of(ember_db *db)
{
    ember_stats st = { .sz = sizeof st };

    FZ_CHECK(ember_stats_get(db != NULL ? db : srv.db, &st) == EMBER_OK);
    return (fz_counts){ st.series, st.profiles, st.samples, st.stacks,
                        st.locations, st.functions, st.mappings,
                        st.strings };
}

void fz_serve_trim(void)
{
    ember_stats st = { .sz = sizeof st };

    FZ_CHECK(ember_stats_get(srv.db, &st) == EMBER_OK);
    if (st.file_bytes < TRIM_BYTES)
        return;
    db_close();
    db_open();
}

/* The status of the answer's first line, "HTTP/1.1 200 OK". */
static unsigned status_of(const char *head, size_t n)
{
    unsigned st = 0;

    if (n < 12 || memcmp(head, "HTTP/1.", 7) != 0)
        return 0;
    for (size_t i = 9; i < 12 && head[i] >= '0' && head[i] <= '9'; i++)
        st = st * 10 + (unsigned)(head[i] - '0');
    return st;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Moves the request in and the answer out until the daemon closes the
** connection; the answer's first bytes go to HEAD. A streamed answer's
** producer runs on a thread of its own, so a round that moves nothing
** waits a millisecond for it; STUCK_MS of that is a bug. */
static size_t pump(int fd, const uint8_t *req, size_t n, char *head,
                   size_t cap)
{
    size_t off = 0, got = 0;
    int64_t idle_since = now_ms();
    char buf[16384];

    for (;;) {
        ssize_t w = off < n ? write(fd, req + off, n - off) : 0, r;
        bool moved = w > 0;

        off += w > 0 ? (size_t)w : 0;
        MHD_run(daemon_);
        while ((r = read(fd, buf, sizeof buf)) > 0) {
            size_t k = got < cap ? cap - got : 0;
            memcpy(head + got, buf, (size_t)r < k ? (size_t)r : k);
            got += (size_t)r < k ? (size_t)r : k;
            moved = true;
        }
        if (r == 0 || (r < 0 && errno != EAGAIN))
            return got;         /* closed: the request is over */
        if (moved)
            idle_since = now_ms();
        else if (now_ms() - idle_since > STUCK_MS)
            break;
        else
            poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 1);
    }
    fprintf(stderr, "serve_fuzz: the server is stuck: %zu of %zu request "
            "bytes in, %zu answer bytes out\n", off, n, got);
    abort();
}

unsigned fz_serve_request(const uint8_t *req, size_t n)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char head[512];
    size_t got;
    int sv[2];

    fz_serve();
    reached = queued = false;
    FZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    FZ_CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
    FZ_CHECK(MHD_add_connection(daemon_, sv[0], (struct sockaddr *)&a,
                                sizeof a) == MHD_YES);
    got = pump(sv[1], req, n, head, sizeof head);
    close(sv[1]);
    MHD_run(daemon_);           /* completion: the request is freed */
    if (getenv("FUZZ_SERVE_VERBOSE") != NULL)
        fprintf(stderr, "--- answer:\n%.*s\n", (int)got, head);
    /* a request the server took is answered, whatever it was */
    FZ_CHECK(!reached || queued);
    return status_of(head, got);
}

int fz_url_put(em_buf *out, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        char esc[3] = { '%', hex[p[i] >> 4], hex[p[i] & 15] };
        int rc = p[i] <= ' ' || p[i] == '#' || p[i] == 0x7f
               ? em_buf_put(out, esc, 3) : em_buf_put(out, &p[i], 1);
        if (rc != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}
