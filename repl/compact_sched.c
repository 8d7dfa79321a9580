/*
** repl/compact_sched.c: the scheduler that runs ember_compact in the
** background of `ember serve` and `ember agent` (issue 15), with the
** options of each run that `ember compact` takes (repl/compact_opts.c).
**
** It is one thread per command. Its first run comes at a random moment
** between a half and one and a half intervals after the start, so that
** servers started together (a fleet's deploy) do not compact together,
** and that a command run for less than half an interval (a test) does not
** compact at all; then a run every interval, counted from the previous
** run's planned moment on the monotonic clock. A run longer than the
** interval skips the moments it covered: runs never overlap. Another
** process's compaction of the same directory makes ember_compact answer
** EMBER_EBUSY: said, counted, tried again at the next moment.
**
** Stopping wakes the thread through its condition variable at once. A run
** in progress is not cut short (ember_compact has no cancel; each of its
** steps commits whole or not at all), so em_compact_sched_free waits for
** it.
**
** All the thread's state the commands read (em_compact_sched_stats) is
** under the scheduler's lock; ember_compact runs outside it.
*/
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

struct em_compact_sched {
    ember_db *db;
    const em_compact_sched_opts *o;     /* the caller's */
    const char *cmd;            /* "serve", "agent": the lines' prefix */
    bool verbose;               /* say successful runs too */
    pthread_t thread;
    pthread_mutex_t lock;       /* guards what follows */
    pthread_cond_t wake;        /* on the monotonic clock */
    bool stop;
    int64_t next_mono_ms;       /* the next run's moment */
    em_compact_sched_stats st;
};

/* ---- options ------------------------------------------------------------ */

void em_compact_sched_defaults(em_compact_sched_opts *o)
{
    o->every_ms = EM_COMPACT_EVERY_MS;
    em_compact_args_init(&o->compact);
}

int em_compact_every_opt(const char *cmd, const char *arg,
                         em_compact_sched_opts *o)
{
    o->every_ms = 0;
    if (strcmp(arg, "0") == 0)
        return 0;
    if (em_duration_parse(arg, &o->every_ms) != EMBER_OK ||
        o->every_ms < EM_COMPACT_EVERY_MIN_MS)
        return em_cli_fail(2, cmd, "--compact-every %s: expected a duration "
                           "of at least %d ms such as 1h, or 0 (none)", arg,
                           EM_COMPACT_EVERY_MIN_MS);
    return 0;
}

/* ---- clocks ------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    return em_mono_ns() / 1000000;
}

/* The monotonic moment MS as pthread_cond_timedwait takes it. */
static struct timespec mono_ts(int64_t ms)
{
    return (struct timespec){ .tv_sec = ms / 1000,
                              .tv_nsec = (long)(ms % 1000) * 1000000 };
}

/* MS as "1h", "45m12.3s", "750ms": how an operator writes a duration
** (tenths of a second past one second). */
static void dur_str(int64_t ms, char *buf, size_t n)
{
    long long h = ms / 3600000, m = ms / 60000 % 60, s10 = ms % 60000 / 100;
    size_t k = 0;

    if (ms < 1000) {
        snprintf(buf, n, "%lldms", (long long)ms);
        return;
    }
    buf[0] = '\0';
    if (h > 0)
        k += (size_t)snprintf(buf, n, "%lldh", h);
    if (m > 0 && k < n)
        k += (size_t)snprintf(buf + k, n - k, "%lldm", m);
    if (s10 > 0 && k < n)
        snprintf(buf + k, n - k, s10 % 10 ? "%.1fs" : "%.0fs",
                 (double)s10 / 10.0);
}

/* A random delay in [EVERY / 2, 3 * EVERY / 2): the first run's. */
static int64_t first_delay(int64_t every)
{
    uint64_t r = 0;

    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = em_mix64((uint64_t)em_mono_ns() ^ ((uint64_t)getpid() << 32));
    return every / 2 + (int64_t)(r % (uint64_t)every);
}

/* ---- one run ------------------------------------------------------------ */

/* What one run did, taken into the stats under the lock. */
typedef struct run_result {
    int rc;
    int64_t start_ms, elapsed_ms;
    char error[256];
    ember_compact_report rep;
} run_result;

static void run_compact(em_compact_sched *s, run_result *r)
{
    int64_t t0 = mono_ms();

    memset(r, 0, sizeof *r);
    r->rep.sz = sizeof r->rep;
    r->start_ms = em_cli_now_ms();
    r->rc = ember_compact(s->db, &s->o->compact.o, &r->rep);
    r->elapsed_ms = mono_ms() - t0;
    if (r->rc != EMBER_OK)
        snprintf(r->error, sizeof r->error, "%s", ember_errmsg(s->db));
}

/* One line on stderr about R: a success only when verbose. */
static void run_say(const em_compact_sched *s, const run_result *r)
{
    char line[512], every[32];

    dur_str(s->o->every_ms, every, sizeof every);
    if (r->rc == EMBER_OK && s->verbose) {
        em_compact_summary(&r->rep, false, line, sizeof line);
        fprintf(stderr, "ember %s: %s; %lld ms\n", s->cmd, line,
                (long long)r->elapsed_ms);
    } else if (r->rc == EMBER_EBUSY) {
        fprintf(stderr, "ember %s: compact: skipped: %s; the next try in "
                "%s\n", s->cmd, r->error, every);
    } else if (r->rc != EMBER_OK) {
        fprintf(stderr, "ember %s: compact: failed after %lld ms: %s; the "
                "next try in %s\n", s->cmd, (long long)r->elapsed_ms,
                r->error, every);
    }
}

/* Takes R into the stats. The caller holds the lock. */
static void run_count(em_compact_sched *s, const run_result *r)
{
    em_compact_sched_stats *st = &s->st;

    st->runs++;
    st->last = r->rc == EMBER_EBUSY ? (ember_compact_report){ 0 } : r->rep;
    st->failed += r->rc != EMBER_OK && r->rc != EMBER_EBUSY;
    st->busy += r->rc == EMBER_EBUSY;
    if (r->rep.bytes_before > r->rep.bytes_after)
        st->freed_bytes += r->rep.bytes_before - r->rep.bytes_after;
    st->blocks_written += r->rep.blocks_written;
    st->blocks_removed += r->rep.blocks_removed;
    st->last_ms = r->start_ms;
    st->last_elapsed_ms = r->elapsed_ms;
    st->last_rc = r->rc;
    memcpy(st->last_error, r->error, sizeof st->last_error);
    if (r->rc == EMBER_OK)
        st->last_ok_ms = r->start_ms + r->elapsed_ms;
}

/* ---- the thread --------------------------------------------------------- */

/* The first moment of the plan (PLANNED, then every EVERY) after NOW. */
static int64_t plan_after(int64_t planned, int64_t every, int64_t now)
{
    if (planned <= now)
        planned += ((now - planned) / every + 1) * every;
    return planned;
}

static void *sched_main(void *arg)
{
    em_compact_sched *s = arg;
    run_result r;

    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        if (mono_ms() < s->next_mono_ms) {
            struct timespec ts = mono_ts(s->next_mono_ms);
            pthread_cond_timedwait(&s->wake, &s->lock, &ts);
            continue;
        }
        s->st.running = true;
        pthread_mutex_unlock(&s->lock);
        run_compact(s, &r);
        run_say(s, &r);
        pthread_mutex_lock(&s->lock);
        run_count(s, &r);
        s->st.running = false;
        s->next_mono_ms = plan_after(s->next_mono_ms, s->o->every_ms,
                                     mono_ms());
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int sched_init(em_compact_sched *s)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);

    if (rc == 0 && (rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) == 0)
        rc = pthread_cond_init(&s->wake, &ca);
    if (rc == 0)
        pthread_condattr_destroy(&ca);
    if (rc == 0 && (rc = pthread_mutex_init(&s->lock, NULL)) != 0)
        pthread_cond_destroy(&s->wake);
    return rc;
}

/* Starts the thread with every signal blocked: they are the command's
** main thread's to take (sigwait in serve, a flag in agent). */
static int thread_start(em_compact_sched *s)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&s->thread, NULL, sched_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int em_compact_sched_start(ember_db *db, const em_compact_sched_opts *o,
                           const char *cmd, bool verbose,
                           em_compact_sched **out)
{
    em_compact_sched *s = em_calloc(1, sizeof *s);
    int64_t first;
    char every[32], in[32];
    int rc;

    *out = NULL;
    if (s == NULL)
        return em_cli_fail(1, cmd, "compact: out of memory");
    if ((rc = sched_init(s)) != 0) {
        em_free(s);
        return em_cli_fail(1, cmd, "compact: %s", strerror(rc));
    }
    s->db = db;
    s->o = o;
    s->cmd = cmd;
    s->verbose = verbose;
    s->st.every_ms = o->every_ms;
    first = first_delay(o->every_ms);
    s->next_mono_ms = mono_ms() + first;
    if ((rc = thread_start(s)) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        em_free(s);
        return em_cli_fail(1, cmd, "compact: thread: %s", strerror(rc));
    }
    dur_str(o->every_ms, every, sizeof every);
    dur_str(first, in, sizeof in);
    if (verbose)
        fprintf(stderr, "ember %s: compacting every %s, the first in %s\n",
                cmd, every, in);
    *out = s;
    return 0;
}

void em_compact_sched_stop(em_compact_sched *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void em_compact_sched_free(em_compact_sched *s)
{
    bool running;

    if (s == NULL)
        return;
    em_compact_sched_stop(s);
    pthread_mutex_lock(&s->lock);
    running = s->st.running;
    pthread_mutex_unlock(&s->lock);
    if (running)
        fprintf(stderr, "ember %s: compact: waiting for the compaction in "
                "progress to end\n", s->cmd);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    em_free(s);
}

void em_compact_sched_stats_get(em_compact_sched *s,
                                em_compact_sched_stats *out)
{
    memset(out, 0, sizeof *out);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    *out = s->st;
    if (!s->stop) {             /* the monotonic moment on the wall clock */
        int64_t now = mono_ms();
        out->next_ms = em_cli_now_ms() +
            (plan_after(s->next_mono_ms, s->o->every_ms, now) - now);
    }
    pthread_mutex_unlock(&s->lock);
}
