/*
** repl/serve_stream.c: answers sent as they are written (chunked transfer
** encoding), for query results that may be large. The renderers write to a
** FILE (query/render.c); here that FILE is a fopencookie stream into a
** bounded buffer, written by a producer thread of the answer's own and
** drained by libmicrohttpd's content reader on the daemon's thread.
**
** A handler that expects a small answer renders it inline instead
** (em_stream_render_whole): a thread and its hand-offs cost more than a
** small render. Otherwise the handler starts the producer and waits until
** it has ended or filled
** the buffer, as long as rendering inline took: an answer that fits is
** sent whole, with its length, and nothing more happens (most answers:
** the thread costs tens of microseconds, suspending and resuming a
** connection more). A larger one is streamed, and from then on nothing
** blocks the daemon's thread: when the buffer is empty the reader
** suspends the connection (MHD_suspend_connection, allowed from a content
** reader) and the producer resumes it once it has written more or ended.
** The producer waits while the buffer is full, so a slow client holds at
** most EM_STREAM_BUF bytes of the answer in memory, not all of it.
**
** Lifetime: the stream is shared by the request (which reads the bytes
** sent for the log and metrics) and the response; the last of them frees
** it. The response's end (completion, a client gone, the daemon stopping)
** cancels the producer, whose next write then fails, and joins it, so no
** producer outlives its response.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "repl/serve.h"

#define EM_STREAM_BUF (256u << 10)  /* bytes buffered between the two */
#define EM_STREAM_BLOCK (64u << 10) /* most bytes one read hands out */

struct em_stream {
    pthread_mutex_t mu;
    pthread_cond_t room;            /* the buffer has room, is full, or
                                    ** the producer ended or is cancelled */
    uint8_t *buf;                   /* a ring of EM_STREAM_BUF bytes */
    size_t head, len;               /* first unread byte, bytes unread */
    bool started, joined, done, cancelled;
    bool suspended;                 /* the reader suspended the connection */
    int rc;                         /* the producer's result, once done */
    char msg[512];                  /* ... and its message when it failed */
    pthread_t thread;
    struct MHD_Connection *conn;
    _Atomic uint64_t sent;          /* bytes handed to libmicrohttpd */
    _Atomic int refs;
    em_stream_fn fn;
    void (*free_ctx)(void *ctx);
    void *ctx;
};

int em_stream_new(em_stream_fn fn, void (*free_ctx)(void *), void *ctx,
                  em_stream **out)
{
    em_stream *s = em_calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL || (s->buf = em_malloc(EM_STREAM_BUF)) == NULL) {
        em_free(s);
        return em_err(EMBER_ENOMEM, "an answer's stream buffer");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->room, NULL);
    s->fn = fn;
    s->free_ctx = free_ctx;
    s->ctx = ctx;
    atomic_init(&s->refs, 1);
    *out = s;
    return EMBER_OK;
}

void em_stream_unref(em_stream *s)
{
    if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    if (s->free_ctx != NULL)
        s->free_ctx(s->ctx);
    pthread_cond_destroy(&s->room);
    pthread_mutex_destroy(&s->mu);
    em_free(s->buf);
    em_free(s);
}

uint64_t em_stream_sent(const em_stream *s)
{
    return atomic_load(&s->sent);
}

/* Under the lock: lets the daemon read again if the reader is waiting. */
static void wake_reader(em_stream *s)
{
    if (s->suspended) {
        s->suspended = false;
        MHD_resume_connection(s->conn);
    }
}

/* ---- the producer's side ------------------------------------------------------ */

/* The cookie write: copies all N bytes into the ring, waiting for room;
** -1 (EPIPE) once the response is gone. */
static ssize_t stream_write(void *cookie, const char *p, size_t n)
{
    em_stream *s = cookie;
    size_t done = 0;

    pthread_mutex_lock(&s->mu);
    while (done < n && !s->cancelled) {
        size_t tail = (s->head + s->len) % EM_STREAM_BUF;
        size_t k = EM_STREAM_BUF - s->len;
        if (k == 0) {           /* full: em_stream_begin waits for it */
            pthread_cond_broadcast(&s->room);
            pthread_cond_wait(&s->room, &s->mu);
            continue;
        }
        if (k > EM_STREAM_BUF - tail)
            k = EM_STREAM_BUF - tail;
        if (k > n - done)
            k = n - done;
        memcpy(s->buf + tail, p + done, k);
        s->len += k;
        done += k;
        wake_reader(s);
    }
    pthread_mutex_unlock(&s->mu);
    if (done < n) {
        errno = EPIPE;
        return -1;
    }
    return (ssize_t)n;
}

static void *producer(void *arg)
{
    em_stream *s = arg;
    cookie_io_functions_t io = { .write = stream_write };
    FILE *f = fopencookie(s, "w", io);
    int rc = f != NULL ? s->fn(s->ctx, f)
                       : em_err(EMBER_ENOMEM, "an answer's stream");

    if (f != NULL && fclose(f) != 0 && rc == EMBER_OK)
        rc = em_err(EMBER_EIO, "the client went away");
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    if (rc != EMBER_OK)
        snprintf(s->msg, sizeof s->msg, "%s", ember_errmsg(NULL));
    s->done = true;
    pthread_cond_broadcast(&s->room);   /* em_stream_begin waits for it */
    wake_reader(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the daemon's side -------------------------------------------------------- */

/* libmicrohttpd's content reader: up to MAX bytes of what the producer
** wrote, or 0 with the connection suspended until it writes more. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    em_stream *s = cls;
    size_t n = 0;
    ssize_t ret = 0;

    (void)pos;
    pthread_mutex_lock(&s->mu);
    while (n < max && s->len > 0) {
        size_t k = s->len < EM_STREAM_BUF - s->head ? s->len
                                                    : EM_STREAM_BUF - s->head;
        if (k > max - n)
            k = max - n;
        memcpy(out + n, s->buf + s->head, k);
        s->head = (s->head + k) % EM_STREAM_BUF;
        s->len -= k;
        n += k;
    }
    if (n > 0) {
        pthread_cond_signal(&s->room);
        ret = (ssize_t)n;
    } else if (s->done) {
        ret = s->rc == EMBER_OK ? MHD_CONTENT_READER_END_OF_STREAM
                                : MHD_CONTENT_READER_END_WITH_ERROR;
    } else {                    /* the producer resumes it when it writes */
        s->suspended = true;
        MHD_suspend_connection(s->conn);
    }
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add(&s->sent, n);
    return ret;
}

/* The response is gone: stop the producer and drop the response's hold. */
static void stream_end(void *cls)
{
    em_stream *s = cls;

    pthread_mutex_lock(&s->mu);
    s->cancelled = true;
    pthread_cond_broadcast(&s->room);
    pthread_mutex_unlock(&s->mu);
    if (s->started && !s->joined)
        pthread_join(s->thread, NULL);
    em_stream_unref(s);
}

int em_stream_begin(em_stream *s, em_buf *whole, bool *ended)
{
    int rc = EMBER_OK;

    *ended = false;
    pthread_mutex_lock(&s->mu);
    s->started = pthread_create(&s->thread, NULL, producer, s) == 0;
    while (s->started && !s->done && s->len < EM_STREAM_BUF)
        pthread_cond_wait(&s->room, &s->mu);
    *ended = !s->started || s->done;
    pthread_mutex_unlock(&s->mu);
    if (!*ended)
        return EMBER_OK;
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->joined = true;
    }
    if (!s->started)
        rc = em_err(EMBER_ENOMEM, "no thread for an answer");
    else if (s->rc != EMBER_OK)
        rc = em_err(s->rc, "%s", s->msg);
    else if (em_buf_put(whole, s->buf, s->len) != EMBER_OK)
        rc = em_err(EMBER_ENOMEM, "an answer of %zu bytes", s->len);
    return rc;
}

/* The cookie write of em_stream_render_whole. */
static ssize_t whole_write(void *cookie, const char *p, size_t n)
{
    if (em_buf_put(cookie, p, n) != EMBER_OK) {
        errno = ENOMEM;
        return -1;
    }
    return (ssize_t)n;
}

int em_stream_render_whole(em_stream_fn fn, void *ctx, em_buf *out)
{
    cookie_io_functions_t io = { .write = whole_write };
    FILE *f = fopencookie(out, "w", io);
    int rc = f != NULL ? fn(ctx, f) : em_err(EMBER_ENOMEM, "an answer");

    if (f != NULL && fclose(f) != 0 && rc == EMBER_OK)
        rc = em_err(EMBER_ENOMEM, "an answer of %zu bytes", out->len);
    return rc;
}

struct MHD_Response *em_stream_response(em_stream *s,
                                        struct MHD_Connection *conn)
{
    struct MHD_Response *r;

    s->conn = conn;
    atomic_fetch_add(&s->refs, 1);      /* the response's */
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EM_STREAM_BLOCK,
                                          stream_read, s, stream_end);
    if (r == NULL)
        em_stream_unref(s);
    return r;
}
