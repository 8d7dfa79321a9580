/*
** repl/cmd_record.c: `ember record` and `ember agent`, the eBPF sampler's
** commands (bpf/agent.h does the work; docs/sampling.md is the guide).
** record profiles for a duration and prints a summary; agent runs until
** SIGINT or SIGTERM. Both flush the last window when stopped by a signal.
**
** Nothing is written, and the database directory is not even created, when
** the arguments are wrong or the machine cannot sample (no root, BPF, BTF
** or perf events): those are checked before the database is opened.
**
** --push URL sends each window to a server as well (with -d) or instead
** (without): an ember_pusher (client/push.c) whose spool is DIR/push-spool,
** or --push-spool; its counts become self-metrics (push_*) and a line of
** the summary, its drops and outages lines on stderr as they happen.
**
** With -d DIR the agent compacts DIR in the background, every hour unless
** --compact-every says otherwise (repl/compact_sched.c): the windows go on
** being written meanwhile, and a compaction in progress at the end is let
** finish before the database is closed. record runs too briefly to need
** it.
*/
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "engine/engine.h"
#include "query/query.h"
#include "client/push.h"
#include "bpf/agent.h"
#include "bpf/sampler.h"
#include "repl/cli.h"

#define RECORD_DURATION_MS 30000    /* record's default --duration */
#define RECORD_MAX_FREQUENCY 10000  /* Hz per CPU */
#define RECORD_MIN_WINDOW_MS 100
#define PUSH_APP "ember_agent"      /* service_name without -l's */
#define PUSH_SPOOL_DEFAULT "/var/spool/ember/push"  /* without -d */
#define PUSH_FLUSH_MS 10000         /* the wait for the last windows */
#define PUSH_TOKEN_MAX 4096

/* Long options without a short form. */
enum { OPT_PUSH = 256, OPT_PUSH_TOKEN, OPT_PUSH_BUFFER, OPT_PUSH_SPOOL };

/* The pusher's self-metrics, counted per window. */
static const char *const push_metrics[] = {
    "push_windows_sent", "push_profiles_sent", "push_windows_dropped",
    "push_bytes_dropped", "push_profiles_refused", "push_retries",
};
#define PUSH_NMETRICS (sizeof push_metrics / sizeof *push_metrics)

/* Labels the agent sets itself: -l may not give them. */
static const char *const reserved_labels[] = {
    "pid", "comm", "executable", "cgroup", "container_id", "node", "metric",
};

static volatile sig_atomic_t record_stop;

static void on_signal(int sig)
{
    (void)sig;
    record_stop = 1;
}

/* SIGINT and SIGTERM end the run after its last window; a second one
** kills the process as usual (SA_RESETHAND). No SA_RESTART: the signal
** wakes the agent from its poll at once. */
static void signals_catch(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

typedef struct record_args {
    const char *cmd;            /* "record" or "agent" */
    const char *dir;
    em_agent_opts opts;
    ember_label labels[EM_MAX_CLI_LABELS];
    const char *push_url;       /* --push; NULL: none */
    const char *push_token_file;
    const char *push_spool;
    uint64_t push_buffer;       /* 0: the library's default */
    char push_spool_buf[4096];
    char *push_token;
    ember_pusher *pusher;
    uint64_t push_last[PUSH_NMETRICS];  /* the counts at the last window */
    uint64_t push_windows;      /* windows spooled */
    em_compact_sched_opts compact;  /* agent -d: the background runs */
    bool compact_given;         /* a --compact-* option was on the line */
} record_args;

static int label_arg(record_args *r, char *arg)
{
    ember_label *l = &r->labels[r->opts.nlabels];

    if (r->opts.nlabels == EM_MAX_CLI_LABELS || em_cli_label(arg, l) != 0)
        return em_cli_fail(2, r->cmd, "-l %s: expected name=value (at most "
                           "%d)", arg, EM_MAX_CLI_LABELS);
    if (em_label_name_check(l->name) != EMBER_OK)
        return em_cli_fail(2, r->cmd, "-l %s: %s", l->name, em_errmsg());
    for (size_t i = 0; i < sizeof reserved_labels / sizeof *reserved_labels;
         i++)
        if (strcmp(l->name, reserved_labels[i]) == 0)
            return em_cli_fail(2, r->cmd, "-l %s: the sampler sets this "
                               "label itself", l->name);
    r->opts.nlabels++;
    return 0;
}

/* A positive integer no larger than MAX, or -1. */
static long long number_arg(const char *s, long long max)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > max)
        return -1;
    return v;
}

static int duration_arg(record_args *r, const char *opt, const char *s,
                        int64_t min_ms, int64_t *out)
{
    if (em_duration_parse(s, out) != EMBER_OK || *out < min_ms)
        return em_cli_fail(2, r->cmd, "%s %s: expected a duration of at "
                           "least %lld ms, such as 10s or 1m", opt, s,
                           (long long)min_ms);
    return 0;
}

/* Handles option C (NAME when long); 0, or the exit status of a misuse. */
static int record_opt(record_args *r, int c, const char *name)
{
    em_agent_opts *o = &r->opts;
    long long v;

    switch (c) {
    case 'd': r->dir = optarg; return 0;
    case 'v': o->verbose = true; return 0;
    case 'l': return label_arg(r, optarg);
    case 'D': return duration_arg(r, "--duration", optarg, 1, &o->duration_ms);
    case 'w':
        return duration_arg(r, "--window", optarg, RECORD_MIN_WINDOW_MS,
                            &o->window_ms);
    case 'F':
        if ((v = number_arg(optarg, RECORD_MAX_FREQUENCY)) < 0)
            return em_cli_fail(2, r->cmd, "--frequency %s: expected 1 to %d "
                               "(Hz per CPU)", optarg, RECORD_MAX_FREQUENCY);
        o->sampler.frequency = (unsigned)v;
        return 0;
    case 'p':
        if ((v = number_arg(optarg, 1 << 30)) < 0)
            return em_cli_fail(2, r->cmd, "--pid %s: expected a process id",
                               optarg);
        o->sampler.pid = (int)v;
        return 0;
    case OPT_PUSH: r->push_url = optarg; return 0;
    case OPT_PUSH_TOKEN: r->push_token_file = optarg; return 0;
    case OPT_PUSH_SPOOL: r->push_spool = optarg; return 0;
    case OPT_PUSH_BUFFER:
        if (em_cli_size(optarg, &r->push_buffer) != 0)
            return em_cli_fail(2, r->cmd, "--push-buffer %s: expected bytes "
                               "such as 256M", optarg);
        return 0;
    case EM_OPT_COMPACT_EVERY:
        r->compact_given = true;
        return em_compact_every_opt(r->cmd, optarg, &r->compact);
    case EM_OPT_COMPACT:
        r->compact_given = true;
        return em_compact_opt(r->cmd, name, optarg, &r->compact.compact);
    default:
        return em_cli_bad_option(r->cmd, c);
    }
}

/* The --compact-* options: the agent's, and only with a database. */
static int compact_check(const record_args *r, bool agent)
{
    if (!r->compact_given)
        return 0;
    if (!agent)
        return em_cli_fail(2, r->cmd, "--compact-*: the agent's options; "
                           "run ember compact after a record");
    if (r->dir == NULL)
        return em_cli_fail(2, r->cmd, "--compact-*: the agent compacts its "
                           "-d DIR, and has none (the server it pushes to "
                           "compacts its own)");
    return 0;
}

static int record_parse(record_args *r, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "duration", required_argument, NULL, 'D' },
        { "frequency", required_argument, NULL, 'F' },
        { "pid", required_argument, NULL, 'p' },
        { "window", required_argument, NULL, 'w' },
        { "label", required_argument, NULL, 'l' },
        { "verbose", no_argument, NULL, 'v' },
        { "push", required_argument, NULL, OPT_PUSH },
        { "push-token-file", required_argument, NULL, OPT_PUSH_TOKEN },
        { "push-buffer", required_argument, NULL, OPT_PUSH_BUFFER },
        { "push-spool", required_argument, NULL, OPT_PUSH_SPOOL },
        { "compact-every", required_argument, NULL, EM_OPT_COMPACT_EVERY },
        EM_COMPACT_LONGOPTS("compact-"),
        { NULL, 0, NULL, 0 },
    };
    bool agent = strcmp(r->cmd, "agent") == 0;
    int c, st, li = 0;

    r->opts.sz = sizeof r->opts;
    r->opts.sampler.sz = sizeof r->opts.sampler;
    r->opts.labels = r->labels;
    r->opts.duration_ms = agent ? 0 : RECORD_DURATION_MS;
    em_compact_sched_defaults(&r->compact);
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:l:vF:p:", longs, &li)) != -1) {
        if (agent && c == 'D')
            return em_cli_fail(2, r->cmd, "--duration: the agent runs until "
                               "SIGINT or SIGTERM (see ember record)");
        if ((st = record_opt(r, c, longs[li].name)) != 0)
            return st;
    }
    if ((st = compact_check(r, agent)) != 0)
        return st;
    if (r->push_url == NULL && (r->push_token_file != NULL ||
                                r->push_spool != NULL || r->push_buffer))
        return em_cli_fail(2, r->cmd, "--push-token-file, --push-buffer and "
                           "--push-spool go with --push URL");
    if (agent && r->dir == NULL && r->push_url == NULL) {
        em_cli_fail(2, r->cmd, "missing -d DIR (the database) or --push URL");
        return em_cli_usage(r->cmd);
    }
    /* with --push, -d is optional: without it the agent only pushes */
    return em_cli_args(r->cmd, r->dir != NULL || r->push_url == NULL
                       ? r->dir : "", argc, argv, 0, 0);
}

/* Whether the run can start: the sampler's requirements and the target
** process, checked before anything touches the database. */
static int record_ready(const record_args *r)
{
    char path[64];
    FILE *f;

    if (em_sampler_check() != EMBER_OK)
        return em_cli_fail(1, r->cmd, "%s", em_errmsg());
    if (r->opts.sampler.pid > 0) {
        snprintf(path, sizeof path, "/proc/%d/stat", r->opts.sampler.pid);
        if ((f = fopen(path, "r")) == NULL)
            return em_cli_fail(1, r->cmd, "--pid %d: no such process",
                               r->opts.sampler.pid);
        fclose(f);
    }
    return 0;
}

/* ---- --push ----------------------------------------------------------------- */

/* The token: the file's content, trailing whitespace removed. */
static int push_token_load(record_args *r)
{
    FILE *f = fopen(r->push_token_file, "rb");
    size_t n;

    if (f == NULL)
        return em_cli_fail(1, r->cmd, "--push-token-file %s: %s",
                           r->push_token_file, strerror(errno));
    if ((r->push_token = em_malloc(PUSH_TOKEN_MAX + 1)) == NULL) {
        fclose(f);
        return em_cli_fail(1, r->cmd, "out of memory");
    }
    n = fread(r->push_token, 1, PUSH_TOKEN_MAX, f);
    fclose(f);
    while (n > 0 && strchr(" \t\r\n", r->push_token[n - 1]) != NULL)
        n--;
    r->push_token[n] = '\0';
    if (n == 0 || strlen(r->push_token) != n)
        return em_cli_fail(1, r->cmd, "--push-token-file %s: the token is "
                           "empty or holds a NUL byte", r->push_token_file);
    return 0;
}

static void push_log(void *ctx, const char *line)
{
    fprintf(stderr, "ember %s: %s\n", ((const record_args *)ctx)->cmd, line);
}

/* The agent's on_window: the set spooled for the server. A window that
** cannot be spooled is lost, said and not fatal: with -d the database
** still gets it, and the next window may fit. */
static int push_window(void *ctx, const em_pset *set)
{
    record_args *r = ctx;
    int rc = em_push_pset(r->pusher, set, PUSH_APP, NULL);

    if (rc == EMBER_ENOMEM)
        return rc;
    if (rc == EMBER_OK)
        r->push_windows++;
    else if (rc != EMBER_ELIMIT)    /* ELIMIT: the pusher logged the drop */
        fprintf(stderr, "ember %s: push: a window not spooled: %s\n", r->cmd,
                em_errmsg());
    return EMBER_OK;
}

/* The agent's extra_values: each push count's change since the last. */
static void push_values(void *ctx, uint64_t *v)
{
    record_args *r = ctx;
    ember_pusher_stats st = { .sz = sizeof st };
    uint64_t now[PUSH_NMETRICS];

    ember_pusher_stats_get(r->pusher, &st);
    now[0] = st.sent_windows;
    now[1] = st.sent_profiles;
    now[2] = st.dropped_windows;
    now[3] = st.dropped_bytes;
    now[4] = st.refused_profiles;
    now[5] = st.retries;
    for (size_t i = 0; i < PUSH_NMETRICS; i++) {
        v[i] = now[i] - r->push_last[i];
        r->push_last[i] = now[i];
    }
}

/* Opens the pusher and hooks it to the agent's windows. */
static int push_open(record_args *r)
{
    ember_pusher_opts po = { .sz = sizeof po, .log = push_log, .log_ctx = r };
    int st;

    if (r->push_token_file != NULL && (st = push_token_load(r)) != 0)
        return st;
    if (r->push_spool == NULL && r->dir != NULL) {
        snprintf(r->push_spool_buf, sizeof r->push_spool_buf,
                 "%s/push-spool", r->dir);
        r->push_spool = r->push_spool_buf;
    }
    po.spool_dir = r->push_spool != NULL ? r->push_spool : PUSH_SPOOL_DEFAULT;
    po.buffer_bytes = r->push_buffer;
    po.token = r->push_token;
    if (ember_pusher_open(r->push_url, &po, &r->pusher) != EMBER_OK)
        return em_cli_fail(1, r->cmd, "--push %s: %s", r->push_url,
                           em_errmsg());
    r->opts.on_window = push_window;
    r->opts.window_ctx = r;
    r->opts.extra_names = push_metrics;
    r->opts.nextra = PUSH_NMETRICS;
    r->opts.extra_values = push_values;
    return 0;
}

/* Gives the sender a while to deliver what is queued, says what became of
** the windows, and closes the pusher. */
static void push_close(record_args *r)
{
    ember_pusher_stats st = { .sz = sizeof st };

    if (r->pusher == NULL)
        return;
    (void)ember_pusher_flush(r->pusher, PUSH_FLUSH_MS);
    ember_pusher_stats_get(r->pusher, &st);
    fprintf(stderr, "ember %s: push: %llu windows spooled, %llu sent (%llu "
            "profiles, %llu bytes), %llu queued (%llu bytes, sent at the "
            "next start), %llu dropped for a full buffer (%llu bytes), "
            "%llu profiles refused, %llu retries\n", r->cmd,
            (unsigned long long)r->push_windows,
            (unsigned long long)st.sent_windows,
            (unsigned long long)st.sent_profiles,
            (unsigned long long)st.sent_bytes,
            (unsigned long long)st.queued_windows,
            (unsigned long long)st.queued_bytes,
            (unsigned long long)st.dropped_windows,
            (unsigned long long)st.dropped_bytes,
            (unsigned long long)st.refused_profiles,
            (unsigned long long)st.retries);
    ember_pusher_close(r->pusher);
    r->pusher = NULL;
}

static void record_summary(const record_args *r, const em_agent_report *rep,
                           double secs)
{
    uint64_t all = rep->samples + rep->idle;

    if (secs <= 0)
        secs = 0.001;
    fprintf(stderr, "ember %s: %llu windows in %.1f s: %llu profiles, %llu "
            "samples of %llu processes, idle %.0f%% (%llu samples), %llu "
            "lost, %llu stack errors, %llu unresolved frames; ember used "
            "%.3f CPU s (%.2f%% of one CPU)\n", r->cmd,
            (unsigned long long)rep->windows, secs,
            (unsigned long long)rep->profiles,
            (unsigned long long)rep->samples,
            (unsigned long long)rep->processes,
            all ? 100.0 * (double)rep->idle / (double)all : 0.0,
            (unsigned long long)rep->idle, (unsigned long long)rep->lost,
            (unsigned long long)rep->stack_errors,
            (unsigned long long)rep->unresolved_frames, rep->cpu_seconds,
            100.0 * rep->cpu_seconds / secs);
}

/* `ember record` and `ember agent`: the same run, with or without an end. */
static int record_run(const char *cmd, int argc, char **argv)
{
    record_args r;
    em_agent_report rep;
    ember_db *db = NULL;
    em_compact_sched *sched = NULL;
    int64_t t0;
    int st, rc;

    memset(&rep, 0, sizeof rep);
    memset(&r, 0, sizeof r);
    r.cmd = cmd;
    if ((st = record_parse(&r, argc, argv)) != 0 ||
        (st = record_ready(&r)) != 0 ||
        (r.push_url != NULL && (st = push_open(&r)) != 0))
        goto out;
    record_stop = 0;
    signals_catch();
    if (r.dir != NULL && em_cli_open(cmd, r.dir, 0, &db) != EMBER_OK) {
        st = 1;
        goto out;
    }
    if (db != NULL && strcmp(cmd, "agent") == 0 && r.compact.every_ms > 0 &&
        (st = em_compact_sched_start(db, &r.compact, cmd, r.opts.verbose,
                                     &sched)) != 0) {
        ember_close(db);
        goto out;
    }
    t0 = em_cli_now_ms();
    rc = em_agent_run(db, &r.opts, &record_stop, &rep);
    st = rc == EMBER_OK ? 0 : em_cli_fail(1, cmd, "%s", em_errmsg());
    em_compact_sched_free(sched);       /* waits for a run to end */
    ember_close(db);
    if (rc == EMBER_OK || rep.windows > 0)
        record_summary(&r, &rep, (double)(em_cli_now_ms() - t0) / 1000.0);
out:
    push_close(&r);
    em_free(r.push_token);
    em_compact_args_free(&r.compact.compact);
    return st;
}

int em_cmd_record(int argc, char **argv)
{
    return record_run("record", argc, argv);
}

int em_cmd_agent(int argc, char **argv)
{
    return record_run("agent", argc, argv);
}
