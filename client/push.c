/*
** client/push.c: ember_pusher (include/ember.h), profiles pushed to a
** server over Pyroscope's ingest (POST /ingest?name=APP{k=v}&from=S&
** until=S&format=pprof&spyName=ember, docs/protocol.md), which both
** `ember serve` and Pyroscope take.
**
** ember_pusher_send only writes the window to the spool (client/spool.h)
** and wakes the sender, a thread that sends the spool's windows oldest
** first, request by request, through client/http.c (keep-alive):
**   2xx                        delivered; the file's cursor moves on
**   408, 429, 5xx, no answer   retried after a backoff of backoff_min_ms
**                              doubling to backoff_max_ms, each wait drawn
**                              from its upper half (jitter), so that agents
**                              that lost one server do not return in step
**   any other 4xx              refused: the server will never take it;
**                              dropped, counted and logged
** A window leaves the spool when each of its requests is delivered or
** refused. Delivery is at least once: a request whose answer was lost is
** sent again.
*/
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "client/client.h"
#include "client/spool.h"

#define PUSH_BUFFER_DEFAULT (256ull << 20)
#define PUSH_BACKOFF_MIN_MS 1000
#define PUSH_BACKOFF_MAX_MS 60000
#define PUSH_TIMEOUT_MS 30000
#define PUSH_CONNECT_MS 10000
#define PUSH_ANSWER_MAX 300     /* bytes of an error answer kept to log */
#define PUSH_NAME_MAX 1024      /* Ember's /ingest takes no longer name */

struct ember_pusher {
    em_spool *spool;
    em_http *http;              /* used by the sender thread only */
    const char *url;            /* as given, for messages (http's) */
    char err[256];              /* why the last request got no answer */
    char answer[PUSH_ANSWER_MAX + 1];
    size_t answer_len;
    int64_t backoff_min_ms, backoff_max_ms, delay_ms;
    uint64_t rng;               /* xorshift state of the jitter */
    ember_log_fn log;
    void *log_ctx;
    pthread_t thread;
    bool started;               /* the thread runs */
    pthread_mutex_t mu;         /* guards what follows */
    pthread_cond_t wake;        /* a window queued, or stop */
    pthread_cond_t idle;        /* a window done, or the sender waits */
    bool stop, outage;
    ember_pusher_stats st;      /* the sender's counts (spool's apart) */
};

static void push_log(ember_pusher *p, const char *fmt, ...) EM_PRINTF(2, 3);

static void push_log(ember_pusher *p, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    if (p->log == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    p->log(p->log_ctx, line);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- targets ------------------------------------------------------------ */

/* Appends S percent-encoded as a query value (RFC 3986 unreserved kept). */
static int put_escaped(em_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = EMBER_OK;

    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[3] = { '%', hex[c >> 4], hex[c & 15] };
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~')
            rc = em_buf_put(b, &s[i], 1);
        else
            rc = em_buf_put(b, e, 3);
    }
    return rc;
}

/* Appends a label value with the bytes Pyroscope's name syntax splits on
** written '_'. */
static int put_value(em_buf *b, const char *v)
{
    int rc = EMBER_OK;

    for (; rc == EMBER_OK && *v != '\0'; v++) {
        char c = (*v == ',' || *v == '=' || *v == '{' || *v == '}') ? '_'
                 : *v;
        rc = em_buf_put(b, &c, 1);
    }
    return rc;
}

/* Pyroscope's application name of PR: "APP{k=v,...}". */
static int app_name(const ember_push_profile *pr, em_buf *b)
{
    size_t k = 0;
    int rc = em_buf_put(b, pr->app, strlen(pr->app));

    for (size_t i = 0; rc == EMBER_OK && i < pr->nlabels; i++) {
        const ember_label *l = &pr->labels[i];
        if (l->value == NULL || l->value[0] == '\0')
            continue;
        rc = em_buf_put(b, k++ == 0 ? "{" : ",", 1);
        if (rc == EMBER_OK)
            rc = em_buf_put(b, l->name, strlen(l->name));
        if (rc == EMBER_OK)
            rc = em_buf_put(b, "=", 1);
        if (rc == EMBER_OK)
            rc = put_value(b, l->value);
    }
    if (rc == EMBER_OK && k > 0)
        rc = em_buf_put(b, "}", 1);
    if (rc != EMBER_OK)
        return em_err(EMBER_ENOMEM, "push: out of memory");
    if (b->len > PUSH_NAME_MAX)
        return em_err(EMBER_ELIMIT, "push: application name and labels of "
                      "%zu bytes (at most %d)", b->len, PUSH_NAME_MAX);
    return EMBER_OK;
}

/* The request target of PR into T: "ingest?name=...&from=...". */
static int target_make(const ember_push_profile *pr, em_buf *t)
{
    em_buf name = { 0 };
    char tail[128];
    int64_t from = pr->time_ms / 1000;
    int64_t until = (pr->time_ms + pr->duration_ns / 1000000 + 999) / 1000;
    int rc = app_name(pr, &name);

    if (rc == EMBER_OK) {
        snprintf(tail, sizeof tail, "&from=%" PRId64 "&until=%" PRId64
                 "&format=pprof&spyName=ember", from, until);
        if (em_buf_put(t, "ingest?name=", 12) != EMBER_OK ||
            put_escaped(t, (const char *)name.p, name.len) != EMBER_OK ||
            em_buf_put(t, tail, strlen(tail)) != EMBER_OK)
            rc = em_err(EMBER_ENOMEM, "push: out of memory");
    }
    em_buf_free(&name);
    return rc;
}

static int profile_check(const ember_push_profile *pr, size_t i)
{
    if (pr->app == NULL || pr->app[0] == '\0')
        return em_err(EMBER_EINVAL, "push: profile %zu: no application "
                      "name", i);
    if (pr->pprof == NULL && pr->len > 0)
        return em_err(EMBER_EINVAL, "push: profile %zu: no bytes", i);
    return em_labels_check(pr->labels, pr->nlabels) != EMBER_OK
           ? em_err_prefix(EMBER_EINVAL, "push: profile %zu", i) : EMBER_OK;
}

/* ---- one request -------------------------------------------------------- */

/* POSTs R through client/http.c; the HTTP status, or 0 when no answer
** came (p->err says why). The answer's first bytes go to p->answer. */
static long post(ember_pusher *p, const em_spool_req *r)
{
    em_buf path = { 0 };
    em_http_resp resp;
    long status = 0;
    int rc = EMBER_OK;

    p->err[0] = '\0';
    p->answer_len = 0;
    if (em_buf_put(&path, "/", 1) != EMBER_OK ||
        em_buf_put(&path, r->target, r->tlen) != EMBER_OK ||
        em_buf_put(&path, "", 1) != EMBER_OK)
        rc = em_err(EMBER_ENOMEM, "out of memory");
    if (rc == EMBER_OK)
        rc = em_http_do(p->http, (const char *)path.p, r->body, r->blen,
                        "application/octet-stream", &resp);
    if (rc != EMBER_OK) {
        snprintf(p->err, sizeof p->err, "%s", em_errmsg());
    } else {
        status = resp.status;
        p->answer_len = resp.body.len < PUSH_ANSWER_MAX ? resp.body.len
                                                        : PUSH_ANSWER_MAX;
        if (p->answer_len > 0)
            memcpy(p->answer, resp.body.p, p->answer_len);
        em_http_resp_free(&resp);
    }
    p->answer[p->answer_len] = '\0';
    em_buf_free(&path);
    return status;
}

/* ---- the sender --------------------------------------------------------- */

static bool stopping(ember_pusher *p)
{
    bool s;

    pthread_mutex_lock(&p->mu);
    s = p->stop;
    pthread_mutex_unlock(&p->mu);
    return s;
}

/* The monotonic time MS from now, for the timed waits. */
static struct timespec deadline(int64_t ms)
{
    struct timespec ts;
    int64_t ns;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ns = ts.tv_nsec + (ms % 1000) * 1000000;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

/* Waits MS, or less when ANY_WAKE and woken, unless stopping (the lock
** held); false once stopping. */
static bool wait_ms(ember_pusher *p, int64_t ms, bool any_wake)
{
    struct timespec ts = deadline(ms);

    while (!p->stop && pthread_cond_timedwait(&p->wake, &p->mu, &ts) == 0 &&
           !any_wake)
        ;
    return !p->stop;
}

/* The next backoff: doubled up to the maximum, drawn from its upper half. */
static int64_t backoff_next(ember_pusher *p)
{
    int64_t d = p->delay_ms == 0 ? p->backoff_min_ms : p->delay_ms * 2;

    p->delay_ms = d < p->backoff_max_ms ? d : p->backoff_max_ms;
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return p->delay_ms / 2 + (int64_t)(p->rng % (uint64_t)(p->delay_ms / 2 + 1));
}

/* A request that failed and will be retried: logs the outage's start,
** then waits; false once stopping. */
static bool retry_later(ember_pusher *p, long status)
{
    int64_t ms = backoff_next(p);
    bool first, go_on;

    pthread_mutex_lock(&p->mu);
    p->st.retries++;
    first = !p->outage;
    p->outage = true;
    pthread_mutex_unlock(&p->mu);
    if (first && status == 0)
        push_log(p, "push: %s: %s; retrying with backoff, windows wait in "
                 "the spool", p->url, p->err);
    else if (first)
        push_log(p, "push: %s answered %ld%s%s; retrying with backoff, "
                 "windows wait in the spool", p->url, status,
                 p->answer_len ? ": " : "", p->answer);
    pthread_mutex_lock(&p->mu);
    go_on = wait_ms(p, ms, false);
    pthread_mutex_unlock(&p->mu);
    return go_on;
}

/* Counts a delivery (SENT) or a refusal of R: either way the server
** answers, which ends an outage. */
static void delivered(ember_pusher *p, const em_spool_req *r, bool sent)
{
    uint64_t retries;
    bool was;

    pthread_mutex_lock(&p->mu);
    if (sent) {
        p->st.sent_profiles++;
        p->st.sent_bytes += r->blen;
    } else {
        p->st.refused_profiles++;
    }
    was = p->outage;
    retries = p->st.retries;
    p->outage = false;
    pthread_mutex_unlock(&p->mu);
    p->delay_ms = 0;
    if (was)
        push_log(p, "push: %s answers again (%" PRIu64 " retries so far)",
                 p->url, retries);
}

static bool retryable(long status)
{
    return status == 0 || status == 408 || status == 429 || status >= 500;
}

/* Sends W's requests from its cursor on; false when stopped first. The
** first refusal of a window is logged with the server's answer, the rest
** counted in one line: a server that refuses one refuses them all. */
static bool window_send(ember_pusher *p, em_spool_win *w)
{
    uint32_t i = w->sent, refused = 0;

    while (i < w->count) {
        long status;
        if (stopping(p))
            return false;
        status = post(p, &w->reqs[i]);
        if (retryable(status)) {
            if (!retry_later(p, status))
                return false;
            continue;
        }
        if (status >= 300 && refused++ == 0)
            push_log(p, "push: %s refused a profile with %ld%s%s: dropped",
                     p->url, status, p->answer_len ? ": " : "", p->answer);
        delivered(p, &w->reqs[i], status < 300);
        if (em_spool_mark(p->spool, w, ++i) != EMBER_OK)
            push_log(p, "push: %s", em_errmsg());
    }
    if (refused > 1)
        push_log(p, "push: %s refused %u more profiles of the window: "
                 "dropped", p->url, refused - 1);
    return true;
}

/* Waits for a window to be queued; false once stopping. */
static bool wait_work(ember_pusher *p)
{
    bool go_on;

    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->idle);
    /* a second at most: a put may come between the spool's check and
    ** this wait */
    go_on = wait_ms(p, 1000, true);
    pthread_mutex_unlock(&p->mu);
    return go_on;
}

static void window_done(ember_pusher *p, em_spool_win *w)
{
    if (em_spool_done(p->spool, w) != EMBER_OK)
        push_log(p, "push: %s", em_errmsg());
    pthread_mutex_lock(&p->mu);
    p->st.sent_windows++;
    pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->mu);
}

static void *sender(void *arg)
{
    ember_pusher *p = arg;

    while (!stopping(p)) {
        em_spool_win w;
        int rc = em_spool_oldest(p->spool, &w);
        if (rc == EMBER_DONE) {
            (void)wait_work(p);
        } else if (rc == EMBER_ENOMEM) {
            push_log(p, "push: %s; trying again later", em_errmsg());
            pthread_mutex_lock(&p->mu);
            (void)wait_ms(p, backoff_next(p), false);
            pthread_mutex_unlock(&p->mu);
        } else if (rc != EMBER_OK) {
            push_log(p, "push: dropped a spooled window: %s", em_errmsg());
        } else if (window_send(p, &w)) {
            window_done(p, &w);
        } else {
            em_spool_win_free(&w);
        }
    }
    return NULL;
}

/* ---- open and close ----------------------------------------------------- */

static int opts_check(const ember_pusher_opts *o)
{
    if (o == NULL || o->sz < sizeof *o)
        return em_err(EMBER_EINVAL, "push: options of %zu bytes (want %zu)",
                      o != NULL ? o->sz : 0, sizeof *o);
    if (o->spool_dir == NULL || o->spool_dir[0] == '\0')
        return em_err(EMBER_EINVAL, "push: no spool directory");
    if (o->backoff_min_ms < 0 || o->backoff_max_ms < 0 || o->timeout_ms < 0)
        return em_err(EMBER_EINVAL, "push: a negative backoff or timeout");
    return EMBER_OK;
}

/* Everything but the thread; the caller closes P on failure. */
static int pusher_init(ember_pusher *p, const char *url,
                       const ember_pusher_opts *o)
{
    pthread_condattr_t ca;
    int rc;

    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &ca);
    pthread_cond_init(&p->idle, &ca);
    pthread_condattr_destroy(&ca);
    p->log = o->log;
    p->log_ctx = o->log_ctx;
    p->backoff_min_ms = o->backoff_min_ms ? o->backoff_min_ms
                                          : PUSH_BACKOFF_MIN_MS;
    p->backoff_max_ms = o->backoff_max_ms ? o->backoff_max_ms
                                          : PUSH_BACKOFF_MAX_MS;
    if (p->backoff_max_ms < p->backoff_min_ms)
        p->backoff_max_ms = p->backoff_min_ms;
    p->rng = (uint64_t)mono_ms() * 0x9e3779b97f4a7c15ull | 1;
    if ((rc = em_http_open(url, o->token, (long)(o->timeout_ms > 0
                                                 ? o->timeout_ms
                                                 : PUSH_TIMEOUT_MS),
                           PUSH_CONNECT_MS, NULL, &p->http)) != EMBER_OK)
        return em_err_prefix(rc, "push");
    em_http_keep_answer(p->http, PUSH_ANSWER_MAX);
    p->url = em_http_url(p->http);
    return em_spool_open(o->spool_dir, o->buffer_bytes ? o->buffer_bytes
                         : PUSH_BUFFER_DEFAULT, &p->spool);
}

EMBER_API int ember_pusher_open(const char *url, const ember_pusher_opts *opts,
                                ember_pusher **out)
{
    ember_pusher *p;
    int rc;

    em_err_clear();
    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_pusher_open: NULL result");
    *out = NULL;
    if ((rc = opts_check(opts)) != EMBER_OK)
        return rc;
    if ((p = em_calloc(1, sizeof *p)) == NULL)
        return em_err(EMBER_ENOMEM, "push: out of memory");
    rc = pusher_init(p, url, opts);
    if (rc == EMBER_OK && pthread_create(&p->thread, NULL, sender, p) != 0)
        rc = em_err(EMBER_EIO, "push: no sender thread: %s", strerror(errno));
    p->started = rc == EMBER_OK;
    if (rc != EMBER_OK) {
        ember_pusher_close(p);
        return rc;
    }
    *out = p;
    return EMBER_OK;
}

EMBER_API void ember_pusher_close(ember_pusher *p)
{
    if (p == NULL)
        return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    em_http_close(p->http);
    em_spool_close(p->spool);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
    em_free(p);
}

/* ---- the caller's side -------------------------------------------------- */

/* The spool requests of N profiles; their targets are held in T[i]. */
static int window_reqs(const ember_push_profile *prs, size_t n, em_buf *t,
                       em_spool_req *reqs)
{
    int rc = EMBER_OK;

    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        rc = profile_check(&prs[i], i);
        if (rc == EMBER_OK)
            rc = target_make(&prs[i], &t[i]);
        reqs[i] = (em_spool_req){ (const char *)t[i].p, t[i].len,
                                  prs[i].pprof, prs[i].len };
    }
    return rc;
}

EMBER_API int ember_pusher_send(ember_pusher *p,
                                const ember_push_profile *profiles, size_t n)
{
    em_buf *t = NULL;
    em_spool_req *reqs = NULL;
    uint64_t dropped = 0;
    int rc;

    em_err_clear();
    if (p == NULL || (profiles == NULL && n > 0))
        return em_err(EMBER_EINVAL, "ember_pusher_send: NULL argument");
    if (n == 0)
        return EMBER_OK;
    t = em_calloc(n, sizeof *t);
    reqs = em_calloc(n, sizeof *reqs);
    rc = t == NULL || reqs == NULL ? em_err(EMBER_ENOMEM, "push: %zu "
                                            "profiles", n)
         : window_reqs(profiles, n, t, reqs);
    if (rc == EMBER_OK)
        rc = em_spool_put(p->spool, reqs, n, &dropped);
    for (size_t i = 0; t != NULL && i < n; i++)
        em_buf_free(&t[i]);
    em_free(t);
    em_free(reqs);
    if (dropped > 0)
        push_log(p, "push: the buffer is full: dropped %" PRIu64 " window%s "
                 "%s", dropped, dropped == 1 ? "" : "s",
                 rc == EMBER_ELIMIT ? "(the new one does not fit)"
                                    : "(the oldest)");
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

EMBER_API void ember_pusher_stats_get(ember_pusher *p, ember_pusher_stats *out)
{
    em_spool_stats s;

    if (p == NULL || out == NULL || out->sz < sizeof *out)
        return;
    em_spool_stats_get(p->spool, &s);
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    pthread_mutex_unlock(&p->mu);
    out->sz = sizeof *out;
    out->queued_windows = s.windows;
    out->queued_bytes = s.bytes;
    out->dropped_windows = s.dropped_windows;
    out->dropped_bytes = s.dropped_bytes;
    out->damaged_windows = s.damaged_windows;
}

EMBER_API int ember_pusher_flush(ember_pusher *p, int64_t timeout_ms)
{
    int64_t end = mono_ms() + timeout_ms;
    em_spool_stats s;

    if (p == NULL)
        return em_err(EMBER_EINVAL, "ember_pusher_flush: NULL pusher");
    for (;;) {
        bool outage;
        em_spool_stats_get(p->spool, &s);
        if (s.windows == 0)
            return EMBER_OK;
        pthread_mutex_lock(&p->mu);
        outage = p->outage;
        pthread_mutex_unlock(&p->mu);
        if (outage || mono_ms() >= end)
            return EMBER_DONE;
        int64_t left = end - mono_ms();
        struct timespec ts = deadline(left < 0 ? 0 : left < 100 ? left : 100);
        pthread_mutex_lock(&p->mu);
        (void)pthread_cond_timedwait(&p->idle, &p->mu, &ts);
        pthread_mutex_unlock(&p->mu);
    }
}
