/*
** bpf/agent.c: the continuous profiler loop (bpf/agent.h). The sampler
** counts stacks in the kernel; every window this file drains its counts,
** symbolizes each key's kernel and user stack into one profile set, and
** writes the set in one transaction: one profile per series (a process
** and its thread name) and per profile type, plus the window's
** self-metrics. The set goes to the options' on_window first (`ember
** agent --push`), and only there when the run has no database.
**
** Stacks are stored leaf first: the kernel frames (when the sample was
** taken in the kernel), then the user frames under them, so a flame graph
** shows a syscall's kernel work on top of the user code that made it.
**
** A window may take several drains: when a map set of the sampler is half
** full (em_sampler_fill, read every em_sampler_fill_interval_ms) its
** counts are drained into the window's set at once, so a busy machine
** loses no samples to a full map; the window is still written once.
**
** Two profile types carry the same samples (docs/sampling.md), as Go's CPU
** profiles do. Their name is the sampler's own, not Go's process_cpu, so
** that the machine's samples never sum silently with a Go program's own
** profile of the same CPU time (issue 12):
**   ebpf_cpu:samples:count:cpu:nanoseconds:delta        value = samples
**   ebpf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta      value = samples x
**                                                       period
** Both have period = 1e9 / frequency ns, time = the window's start and
** duration = the window's length.
**
** Self-metrics are series of their own, one profile per window with one
** sample on the empty stack, so total() and sum by (metric) query them:
**   ember_self:events:count:window:nanoseconds:delta{metric="idle", ...}
**   ember_self:time:nanoseconds:window:nanoseconds:delta{metric="cpu", ...}
** (the metric names are in self_metrics below).
**
** Process lifetimes: the first sample of a process makes the symbolizer
** capture its mappings at once (so a process that lives 200 ms still
** symbolizes at the next drain), exit events mark it, and the sweep after
** each window's write drops those marked before the previous sweep. A process is
** captured at its first sample (an event the sampler sends while it runs,
** again after each exec) and 20 ms and 250 ms after that (recapture_ms:
** the loader may not have mapped libc yet, then early dlopens) while it
** lives: without that, a short-lived process's libc frames would stay
** addresses once it is gone. A process never sampled is never captured,
** which on a build machine is most of them. Processes already running at the start are
** captured then, by a walk of /proc, so that one that exits before the
** first drain still symbolizes. A drain that meets many new binaries can
** take a second; process events are handled during it too
** (events_handle), or a process living less than that would be gone
** before its capture.
*/
#include <dirent.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/pset.h"
#include "ingest/symbolize.h"
#include "bpf/agent.h"

#define TYPE_SAMPLES "ebpf_cpu:samples:count:cpu:nanoseconds:delta"
#define TYPE_CPU "ebpf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
#define TYPE_SELF_COUNT "ember_self:events:count:window:nanoseconds:delta"
#define TYPE_SELF_TIME "ember_self:time:nanoseconds:window:nanoseconds:delta"

#define AGENT_WINDOW_MS 10000       /* default window */
#define AGENT_POLL_MAX_MS 500       /* longest sleep between stop checks */
#define AGENT_FILL_DRAIN 0.5        /* drain early when a map is this full */
#define AGENT_FIXED_LABELS 6        /* pid comm executable cgroup
                                    ** container_id node */
#define AGENT_MAX_VALUE 400         /* the engine's label value limit */
#define AGENT_HOST_MAX 256
#define AGENT_RECAPTURES 1024       /* pending recaptures per stage */
#define AGENT_EVENTS_NS 10000000    /* during a drain, handle process
                                    ** events at least this often */

/* Delays after exec of the captures again, one stage each. */
static const int64_t recapture_ms[] = { 20, 250 };
#define AGENT_STAGES (sizeof recapture_ms / sizeof *recapture_ms)

/* One series of the window: a process and a thread name. Its two profiles
** are PROF (samples) and PROF + 1 (cpu nanoseconds). */
typedef struct series_ent {
    uint32_t tgid1;             /* tgid + 1; 0: a free slot */
    char comm[16];
    uint32_t prof;
} series_ent;

/* Processes to capture again, in order of due time (a FIFO: every entry
** of a stage waits the same delay). Full: the oldest is dropped. */
typedef struct recapture_fifo {
    uint32_t pid[AGENT_RECAPTURES];
    int64_t due_ns[AGENT_RECAPTURES];
    size_t head, n;
} recapture_fifo;

/* The window's series (engine/htab.h, instantiated below). */
typedef EM_HTAB_TYPE(series_ent) series_table;
/* A set of u32 values, each held plus one (0: a free slot). */
typedef EM_HTAB_TYPE(uint32_t) u32_set;

typedef struct agent {
    ember_db *db;
    const em_agent_opts *opts;
    em_sampler *sampler;
    em_symbolizer *symb;
    char node[AGENT_MAX_VALUE + 1];
    uint64_t period_ns;
    /* the window being drained */
    em_pset set;
    series_table series;        /* (tgid, comm) -> its first profile */
    int64_t win_start_ms;       /* realtime, the window's start */
    int64_t win_start_ns;       /* monotonic, the same instant */
    int64_t win_len_ns;
    uint64_t win_dropped;       /* samples whose stack failed */
    em_sampler_stats win_st;    /* the window's drains, summed */
    uint64_t win_drains;
    int64_t fill_checked_ns;    /* when em_sampler_fill was last read */
    uint32_t locs[2 * EM_SAMPLER_MAX_DEPTH];
    char vals[5][AGENT_MAX_VALUE + 1];  /* a new series' label values */
    /* since the start */
    em_symb_stats symb_last;    /* at the previous window */
    double cpu_last;            /* CPU seconds at the previous window */
    u32_set seen;               /* processes sampled */
    recapture_fifo recap[AGENT_STAGES];
    bool target_gone;           /* opts' pid exited: stop after a flush */
    int64_t events_ns;          /* when process events were last handled */
    em_agent_report rep;
} agent;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* This process's CPU time so far, user + system, in seconds. */
static double cpu_seconds(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- label values ------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at S (at most N bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 :
                 s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;

    if (s[0] > 0xf4 || len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* Copies IN into OUT (AGENT_MAX_VALUE + 1 bytes) as a label value the
** engine takes and a terminal prints safely: control bytes and invalid
** UTF-8 become '?', and a value too long is cut at a character boundary.
** Process names and paths are whatever the process chose. */
static void value_clean(const char *in, char *out)
{
    const unsigned char *s = (const unsigned char *)(in != NULL ? in : "");
    size_t k = 0;

    while (*s != '\0' && k < AGENT_MAX_VALUE) {
        size_t len = *s < 0x80 ? 1 : utf8_len(s, strlen((const char *)s));
        if (len == 1 || len == 0) {
            out[k++] = *s < 0x20 || *s >= 0x7f ? '?' : (char)*s;
            s++;
            continue;
        }
        if (k + len > AGENT_MAX_VALUE)
            break;
        memcpy(out + k, s, len);
        k += len;
        s += len;
    }
    out[k] = '\0';
}

/* The executable label: the base name of /proc/PID/exe, without the
** " (deleted)" the kernel appends once the file is gone. */
static void exe_label(const char *exe, char *out)
{
    static const char deleted[] = " (deleted)";
    const char *base;
    char tmp[AGENT_MAX_VALUE + 1];
    size_t n;

    if (exe == NULL) {
        out[0] = '\0';
        return;
    }
    base = strrchr(exe, '/');
    base = base != NULL ? base + 1 : exe;
    n = strlen(base);
    if (n >= sizeof deleted - 1 &&
        strcmp(base + n - (sizeof deleted - 1), deleted) == 0)
        n -= sizeof deleted - 1;
    if (n > AGENT_MAX_VALUE)
        n = AGENT_MAX_VALUE;
    memcpy(tmp, base, n);
    tmp[n] = '\0';
    value_clean(tmp, out);
}

/* ---- sets --------------------------------------------------------------- */

#define EM_HT_NAME u32_set
#define EM_HT_TABLE u32_set
#define EM_HT_ENTRY uint32_t
#define EM_HT_KEY uint32_t          /* the value plus one */
#define EM_HT_IS_FREE(e) (*(e) == 0)
#define EM_HT_HASH(e) em_mix64(*(e))
#define EM_HT_MATCH(e, h, k) (*(e) == (k))
#define EM_HT_WHAT "agent: process set"
#include "engine/htab.h"

static uint64_t series_hash(uint32_t tgid, const char *comm)
{
    return em_hash64(comm, strnlen(comm, 16), em_mix64(tgid));
}

/* A series looked up: a process and its thread name (16 bytes). */
typedef struct series_key {
    uint32_t tgid;
    const char *comm;
} series_key;

#define EM_HT_NAME series_tab
#define EM_HT_TABLE series_table
#define EM_HT_ENTRY series_ent
#define EM_HT_KEY const series_key *
#define EM_HT_IS_FREE(e) ((e)->tgid1 == 0)
#define EM_HT_HASH(e) series_hash((e)->tgid1 - 1, (e)->comm)
#define EM_HT_MATCH(e, h, k) \
    ((e)->tgid1 == (k)->tgid + 1 && memcmp((e)->comm, (k)->comm, 16) == 0)
#define EM_HT_WHAT "agent: series table"
#define EM_HT_INITIAL 256
#include "engine/htab.h"

/* ---- one window's profiles ---------------------------------------------- */

/* Copies the -l labels after the N labels already at L; returns the count. */
static size_t labels_extra(const agent *a, ember_label *l, size_t n)
{
    for (size_t i = 0; i < a->opts->nlabels; i++)
        l[n++] = a->opts->labels[i];
    return n;
}

/* What the symbolizer knows of TGID, capturing it on first sight; zeroed
** when the process is gone (its series then has no executable). */
static void proc_info(agent *a, uint32_t tgid, em_proc_info *info)
{
    if (em_symbolizer_proc(a->symb, tgid, info) == EMBER_OK)
        return;
    if (em_symbolizer_track(a->symb, tgid) == EMBER_OK &&
        em_symbolizer_proc(a->symb, tgid, info) == EMBER_OK)
        return;
    memset(info, 0, sizeof *info);
}

/* Adds the two profiles of a new series (TGID, COMM) to the set; *PROF
** gets the first's index. */
static int series_profiles(agent *a, uint32_t tgid, const char *comm,
                           uint32_t *prof)
{
    char (*v)[AGENT_MAX_VALUE + 1] = a->vals;  /* pid comm exe cgroup id */
    ember_label l[EM_PSET_MAX_LABELS];
    em_proc_info info;
    uint32_t second;
    char c[17];
    size_t n;
    int rc;

    proc_info(a, tgid, &info);
    snprintf(v[0], sizeof v[0], "%u", tgid);
    memcpy(c, comm, 16);
    c[16] = '\0';
    value_clean(c, v[1]);
    exe_label(info.exe, v[2]);
    value_clean(info.cgroup, v[3]);
    value_clean(info.container_id, v[4]);
    l[0] = (ember_label){ "pid", v[0] };
    l[1] = (ember_label){ "comm", v[1] };
    l[2] = (ember_label){ "executable", v[2] };
    l[3] = (ember_label){ "cgroup", v[3] };
    l[4] = (ember_label){ "container_id", v[4] };
    l[5] = (ember_label){ "node", a->node };
    n = labels_extra(a, l, AGENT_FIXED_LABELS);
    rc = em_pset_profile_add(&a->set, TYPE_SAMPLES, l, n, a->win_start_ms,
                             a->win_len_ns, (int64_t)a->period_ns, prof);
    if (rc == EMBER_OK)
        rc = em_pset_profile_add(&a->set, TYPE_CPU, l, n, a->win_start_ms,
                                 a->win_len_ns, (int64_t)a->period_ns,
                                 &second);
    return rc;
}

/* The series of (TGID, COMM) in this window, made on first sight. */
static int series_get(agent *a, uint32_t tgid, const char *comm,
                      uint32_t *prof)
{
    series_key k = { tgid, comm };
    uint64_t h = series_hash(tgid, comm);
    series_ent *e = series_tab_find(&a->series, h, &k);
    uint32_t *seen;
    bool found;
    int rc;

    if (e != NULL) {
        *prof = e->prof;
        return EMBER_OK;
    }
    /* made before it is inserted, so that the table counts only series */
    if ((rc = series_profiles(a, tgid, comm, prof)) != EMBER_OK)
        return rc;
    if ((e = series_tab_insert(&a->series, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    e->tgid1 = tgid + 1;
    memcpy(e->comm, comm, 16);
    e->prof = *prof;
    if ((seen = u32_set_insert(&a->seen, em_mix64(tgid + 1), tgid + 1,
                               &found)) == NULL)
        return EMBER_ENOMEM;
    if (!found) {
        *seen = tgid + 1;
        a->rep.processes++;
    }
    return EMBER_OK;
}

/* Frames the symbolizer could not take at all: bare addresses without a
** mapping, so the sample keeps its depth and value. */
static int frames_raw(agent *a, const uint64_t *addrs, size_t n,
                      uint32_t *locs)
{
    for (size_t i = 0; i < n; i++) {
        int rc = em_pset_location(&a->set, 0, addrs[i], NULL, 0, &locs[i]);
        if (rc != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}

/* Kernel frames, then user frames, into a->locs; *N gets the depth. Only
** out-of-memory fails: a symbolizer failure keeps the addresses. */
static int sample_frames(agent *a, const em_sample *smp, size_t *n)
{
    uint32_t nk = smp->nkstack, nu = smp->nustack;
    int rc = EMBER_OK;

    if (nk > EM_SAMPLER_MAX_DEPTH)
        nk = EM_SAMPLER_MAX_DEPTH;
    if (nu > EM_SAMPLER_MAX_DEPTH)
        nu = EM_SAMPLER_MAX_DEPTH;
    if (nk > 0)
        rc = em_symbolize_kernel(a->symb, &a->set, smp->kstack, nk, a->locs);
    if (rc != EMBER_OK && rc != EMBER_ENOMEM)
        rc = frames_raw(a, smp->kstack, nk, a->locs);
    if (rc == EMBER_OK && nu > 0) {
        rc = em_symbolize_user(a->symb, &a->set, smp->tgid, smp->ustack, nu,
                               a->locs + nk);
        if (rc != EMBER_OK && rc != EMBER_ENOMEM)
            rc = frames_raw(a, smp->ustack, nu, a->locs + nk);
    }
    *n = (size_t)nk + nu;
    return rc;
}

static void events_handle(agent *a, int64_t now);

/* em_sampler_drain's callback: one key into the set. */
static int on_sample(void *ctx, const em_sample *smp)
{
    agent *a = ctx;
    uint32_t prof, stack;
    size_t n = 0;
    int64_t cpu;
    int rc;

    events_handle(a, mono_ns());
    if (smp->count == 0)
        return 0;
    rc = series_get(a, smp->tgid, smp->comm, &prof);
    if (rc == EMBER_OK)
        rc = sample_frames(a, smp, &n);
    if (rc == EMBER_OK)
        rc = em_pset_stack(&a->set, a->locs, n, &stack);
    if (rc == EMBER_OK)
        rc = em_pset_sample(&a->set, prof, stack, (int64_t)smp->count);
    cpu = (int64_t)(smp->count * a->period_ns);
    if (rc == EMBER_OK)
        rc = em_pset_sample(&a->set, prof + 1, stack, cpu);
    if (rc == EMBER_OK || rc == EMBER_ENOMEM)
        return rc;
    a->win_dropped += smp->count;  /* a limit of the set: skip the key */
    return 0;
}

/* ---- self-metrics ------------------------------------------------------- */

/* One self-metric profile: VALUE on the empty stack. */
static int self_metric(agent *a, const char *type, const char *metric,
                       int64_t value, uint32_t empty)
{
    ember_label l[EM_PSET_MAX_LABELS];
    uint32_t prof;
    size_t n;
    int rc;

    l[0] = (ember_label){ "metric", metric };
    l[1] = (ember_label){ "node", a->node };
    n = labels_extra(a, l, 2);
    rc = em_pset_profile_add(&a->set, type, l, n, a->win_start_ms,
                             a->win_len_ns, a->win_len_ns, &prof);
    if (rc == EMBER_OK)
        rc = em_pset_sample(&a->set, prof, empty, value);
    return rc;
}

/* The caller's own self-metrics (em_agent_opts' extra_names). */
static int self_extra(agent *a, uint32_t empty)
{
    uint64_t v[EM_AGENT_MAX_EXTRA] = { 0 };
    int rc = EMBER_OK;

    a->opts->extra_values(a->opts->window_ctx, v);
    for (size_t i = 0; rc == EMBER_OK && i < a->opts->nextra; i++)
        rc = self_metric(a, TYPE_SELF_COUNT, a->opts->extra_names[i],
                         (int64_t)v[i], empty);
    return rc;
}

/* The window's self-metrics into the set (metric names: docs/sampling.md). */
static int self_metrics(agent *a, const em_sampler_stats *st,
                        const em_symb_stats *sy, int64_t cpu_ns)
{
    const struct { const char *name; uint64_t v; } counts[] = {
        { "samples", st->samples },
        { "idle", st->idle },
        { "lost", st->lost },
        { "stack_errors", st->ustack_errors + st->kstack_errors },
        { "stacks_dropped", st->stacks_dropped },
        { "events_lost", st->events_lost },
        { "dropped", a->win_dropped },
        { "symbol_hits", sy->hits - a->symb_last.hits },
        { "symbol_misses", sy->misses - a->symb_last.misses },
        { "unresolved_frames", sy->unresolved - a->symb_last.unresolved },
        { "series", a->series.count },
        { "drains", a->win_drains },
    };
    const struct { const char *name; int64_t v; } times[] = {
        { "drain", (int64_t)st->drain_ns },
        { "cpu", cpu_ns },
    };
    uint32_t empty;
    int rc = em_pset_stack(&a->set, a->locs, 0, &empty);

    for (size_t i = 0; rc == EMBER_OK && i < sizeof counts / sizeof *counts;
         i++)
        rc = self_metric(a, TYPE_SELF_COUNT, counts[i].name,
                         (int64_t)counts[i].v, empty);
    for (size_t i = 0; rc == EMBER_OK && i < sizeof times / sizeof *times;
         i++)
        rc = self_metric(a, TYPE_SELF_TIME, times[i].name, times[i].v, empty);
    if (rc == EMBER_OK && a->opts->nextra > 0)
        rc = self_extra(a, empty);
    return rc;
}

/* ---- windows ------------------------------------------------------------ */

static void window_reset(agent *a, int64_t start_ns, int64_t start_ms)
{
    em_pset_free(&a->set);
    series_tab_clear(&a->series);
    a->win_dropped = 0;
    memset(&a->win_st, 0, sizeof a->win_st);
    a->win_drains = 0;
    a->win_start_ns = start_ns;
    a->win_start_ms = start_ms;
}

/* Writes the set in one transaction. */
static int window_write(agent *a, em_pset_counts *c)
{
    ember_txn *txn = NULL;
    int rc = ember_txn_begin(a->db, &txn);

    if (rc == EMBER_OK && (rc = em_pset_write(txn, &a->set, c)) != EMBER_OK)
        ember_txn_abort(txn);
    else if (rc == EMBER_OK)
        rc = ember_txn_commit(txn);
    if (rc != EMBER_OK)
        em_err_prefix(rc, "agent: writing window %llu",
                      (unsigned long long)a->rep.windows + 1);
    return rc;
}

/* Hands the set to on_window, then writes it when there is a database;
** without one, C counts what the set holds. */
static int window_out(agent *a, em_pset_counts *c)
{
    int rc = EMBER_OK;

    if (a->opts->on_window != NULL)
        rc = a->opts->on_window(a->opts->window_ctx, &a->set);
    if (rc == EMBER_OK && a->db != NULL)
        return window_write(a, c);
    for (size_t i = 0; rc == EMBER_OK && i < a->set.nprofiles; i++) {
        c->profiles += a->set.profiles[i].nsamples > 0;
        c->samples += a->set.profiles[i].nsamples;
    }
    return rc;
}

/* A line per window on stderr (-v). TOTAL_NS: drain to written. */
static void window_verbose(const agent *a, const em_sampler_stats *st,
                           const em_pset_counts *c, uint64_t unresolved,
                           int64_t total_ns)
{
    uint64_t all = st->samples + st->idle;

    fprintf(stderr, "window %llu: %zu series, %llu profiles, %llu samples "
            "(idle %.0f%%), %llu lost, %llu stack errors, %llu unresolved "
            "frames, drain+symbolize %.1f ms, with write %.1f ms\n",
            (unsigned long long)a->rep.windows, a->series.count,
            (unsigned long long)c->profiles, (unsigned long long)st->samples,
            all ? 100.0 * (double)st->idle / (double)all : 0.0,
            (unsigned long long)st->lost,
            (unsigned long long)(st->ustack_errors + st->kstack_errors),
            (unsigned long long)unresolved, (double)st->drain_ns / 1e6,
            (double)total_ns / 1e6);
}

static void window_count(agent *a, const em_sampler_stats *st,
                         const em_symb_stats *sy, const em_pset_counts *c)
{
    a->rep.windows++;
    a->rep.profiles += c->profiles;
    a->rep.samples += st->samples;
    a->rep.idle += st->idle;
    a->rep.lost += st->lost;
    a->rep.stack_errors += st->ustack_errors + st->kstack_errors;
    a->rep.stacks_dropped += st->stacks_dropped;
    a->rep.unresolved_frames += sy->unresolved - a->symb_last.unresolved;
    a->symb_last = *sy;
}

/* Drains the sampler's counts into the window's set; the window goes on.
** Called at the window's end and whenever a map set is half full. */
static int window_drain(agent *a)
{
    em_sampler_stats st = { 0 };
    em_sampler_stats *w = &a->win_st;
    int rc = em_sampler_drain(a->sampler, on_sample, a, &st);

    w->samples += st.samples;
    w->idle += st.idle;
    w->lost += st.lost;
    w->ustack_errors += st.ustack_errors;
    w->kstack_errors += st.kstack_errors;
    w->stacks_dropped += st.stacks_dropped;
    w->events_lost += st.events_lost;
    w->drain_ns += st.drain_ns;
    a->win_drains++;
    return rc;
}

/* Ends the window now: drain, symbolize, write, sweep; the next window
** starts at the drain's flip. */
static int window_flush(agent *a)
{
    const em_sampler_stats *st = &a->win_st;
    em_symb_stats sy = { 0 };
    em_pset_counts c = { 0 };
    int64_t flip_ns = mono_ns(), flip_ms = real_ms();
    double cpu;
    int rc;

    a->win_len_ns = flip_ns - a->win_start_ns;
    rc = window_drain(a);
    events_handle(a, mono_ns());
    em_symbolizer_stats(a->symb, &sy);
    cpu = cpu_seconds();
    if (rc == EMBER_OK)
        rc = self_metrics(a, st, &sy, (int64_t)((cpu - a->cpu_last) * 1e9));
    if (rc == EMBER_OK)
        rc = window_out(a, &c);
    a->cpu_last = cpu;
    if (rc == EMBER_OK) {
        uint64_t unresolved = sy.unresolved - a->symb_last.unresolved;
        window_count(a, st, &sy, &c);
        if (a->opts->verbose)
            window_verbose(a, st, &c, unresolved, mono_ns() - flip_ns);
    }
    em_symbolizer_sweep(a->symb);
    window_reset(a, flip_ns, flip_ms);
    return rc;
}

/* ---- process events ----------------------------------------------------- */

static void recapture_push(recapture_fifo *f, uint32_t pid, int64_t due_ns)
{
    size_t i;

    if (f->n == AGENT_RECAPTURES) {     /* drop the oldest */
        f->head = (f->head + 1) % AGENT_RECAPTURES;
        f->n--;
    }
    i = (f->head + f->n++) % AGENT_RECAPTURES;
    f->pid[i] = pid;
    f->due_ns[i] = due_ns;
}

/* Captures again the processes due by NOW, passing each to the next
** stage; returns the earliest due time left (INT64_MAX: none). */
static int64_t recapture_run(agent *a, int64_t now)
{
    int64_t next = INT64_MAX;

    for (size_t st = 0; st < AGENT_STAGES; st++) {
        recapture_fifo *f = &a->recap[st];
        while (f->n > 0 && f->due_ns[f->head] <= now) {
            uint32_t pid = f->pid[f->head];
            f->head = (f->head + 1) % AGENT_RECAPTURES;
            f->n--;
            /* gone: the symbolizer keeps the capture it has */
            if (em_symbolizer_track(a->symb, pid) == EMBER_OK &&
                st + 1 < AGENT_STAGES)
                recapture_push(&a->recap[st + 1], pid, now +
                    (recapture_ms[st + 1] - recapture_ms[st]) * 1000000);
        }
        if (f->n > 0 && f->due_ns[f->head] < next)
            next = f->due_ns[f->head];
    }
    return next;
}

/* Between the keys of a long drain: delivers the process events and the
** recaptures due, at most every AGENT_EVENTS_NS. Polling the event ring
** buffer does not touch the count and stack maps being drained. */
static void events_handle(agent *a, int64_t now)
{
    if (now - a->events_ns < AGENT_EVENTS_NS)
        return;
    a->events_ns = now;
    (void)em_sampler_poll(a->sampler, 0);   /* a failure shows at the loop */
    (void)recapture_run(a, now);
}

/* Captures the processes running now (only opts' pid, when given): they
** sent no exec event. A process gone meanwhile is no error. */
static void capture_running(agent *a)
{
    DIR *d;
    struct dirent *e;

    if (a->opts->sampler.pid > 0) {
        (void)em_symbolizer_track(a->symb, (uint32_t)a->opts->sampler.pid);
        return;
    }
    if ((d = opendir("/proc")) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *end;
        unsigned long pid = strtoul(e->d_name, &end, 10);
        if (*end == '\0' && pid > 0 && pid <= UINT32_MAX)
            (void)em_symbolizer_track(a->symb, (uint32_t)pid);
    }
    closedir(d);
}

/* em_sampler_open's process events: capture at the first sample of a
** process's image (then twice more: libraries the loader or the program
** maps later), mark at exit. An exec needs nothing: the sampler announces
** the new image's first sample again. Processes never sampled cost
** nothing. With a pid to sample, the others are none of our business. */
static void on_proc(void *ctx, int event, uint32_t tgid)
{
    agent *a = ctx;
    int target = a->opts->sampler.pid;
    bool ours = target <= 0 || tgid == (uint32_t)target;

    if (event == EM_PROC_SAMPLED && ours) {
        if (em_symbolizer_track(a->symb, tgid) == EMBER_OK)
            recapture_push(&a->recap[0], tgid,
                           mono_ns() + recapture_ms[0] * 1000000);
    } else if (event == EM_PROC_EXIT) {
        em_symbolizer_exited(a->symb, tgid);
        if (target > 0 && tgid == (uint32_t)target)
            a->target_gone = true;
    }
}

/* ---- the run ------------------------------------------------------------ */

/* The node label: OPTS's, else the host name. */
static void node_name(agent *a)
{
    char host[AGENT_HOST_MAX];
    const char *node = a->opts->node;

    if (node == NULL) {
        if (gethostname(host, sizeof host) != 0)
            strcpy(host, "localhost");
        host[sizeof host - 1] = '\0';
        node = host;
    }
    value_clean(node, a->node);
}

static int opts_check(const em_agent_opts *o)
{
    if (o == NULL || o->sz < sizeof *o)
        return em_err(EMBER_EINVAL, "agent: options of %zu bytes (want %zu)",
                      o != NULL ? o->sz : 0, sizeof *o);
    if (o->window_ms < 0 || o->duration_ms < 0)
        return em_err(EMBER_EINVAL, "agent: a negative window or duration");
    if (o->nlabels > EM_PSET_MAX_LABELS - AGENT_FIXED_LABELS)
        return em_err(EMBER_ELIMIT, "agent: %zu labels (at most %d)",
                      o->nlabels, EM_PSET_MAX_LABELS - AGENT_FIXED_LABELS);
    if (o->nextra > EM_AGENT_MAX_EXTRA ||
        (o->nextra > 0 && o->extra_values == NULL))
        return em_err(EMBER_EINVAL, "agent: %zu extra self-metrics (at "
                      "most %d, with their callback)", o->nextra,
                      EM_AGENT_MAX_EXTRA);
    return EMBER_OK;
}

/* Polls process events until the window ends, the duration passes, *STOP
** is set or the one process sampled exits, then flushes; repeats until
** the end. */
static int agent_loop(agent *a, volatile sig_atomic_t *stop)
{
    int64_t window_ns = (a->opts->window_ms ? a->opts->window_ms :
                         AGENT_WINDOW_MS) * 1000000;
    int64_t end_ns = a->opts->duration_ms ?
                     a->win_start_ns + a->opts->duration_ms * 1000000 : 0;
    int64_t fill_ns = (int64_t)em_sampler_fill_interval_ms(a->sampler) *
                      1000000;
    int rc;

    for (;;) {
        int64_t now = mono_ns(), win_end = a->win_start_ns + window_ns;
        bool last = (stop != NULL && *stop) || (end_ns && now >= end_ns) ||
                    a->target_gone;
        int64_t wake, wait_ms;

        if (end_ns && end_ns < win_end)
            win_end = end_ns;
        if (last || now >= win_end) {
            if ((rc = window_flush(a)) != EMBER_OK || last)
                return rc;
            continue;
        }
        if (now - a->fill_checked_ns >= fill_ns) {
            a->fill_checked_ns = now;
            if (em_sampler_fill(a->sampler) >= AGENT_FILL_DRAIN &&
                (rc = window_drain(a)) != EMBER_OK) {
                int frc = window_flush(a);  /* keep what was counted */
                return frc != EMBER_OK ? frc : rc;
            }
        }
        wake = recapture_run(a, now);
        if (win_end < wake)
            wake = win_end;
        if (a->fill_checked_ns + fill_ns < wake)
            wake = a->fill_checked_ns + fill_ns;
        wait_ms = (wake - now + 999999) / 1000000;
        if (wait_ms > AGENT_POLL_MAX_MS)
            wait_ms = AGENT_POLL_MAX_MS;
        rc = em_sampler_poll(a->sampler, (int)(wait_ms > 0 ? wait_ms : 0));
        if (rc != EMBER_OK && !(stop != NULL && *stop)) {
            int frc = window_flush(a);  /* keep what was counted */
            return frc != EMBER_OK ? frc : rc;
        }
    }
}

static void agent_free(agent *a)
{
    em_sampler_close(a->sampler);
    em_symbolizer_free(a->symb);
    em_pset_free(&a->set);
    series_tab_free(&a->series);
    u32_set_free(&a->seen);
}

int em_agent_run(ember_db *db, const em_agent_opts *opts,
                 volatile sig_atomic_t *stop, em_agent_report *rep)
{
    agent *a = NULL;
    em_sampler_opts so;
    int rc = opts_check(opts);

    if (rep != NULL)
        memset(rep, 0, sizeof *rep);
    if (rc == EMBER_OK && db == NULL && opts->on_window == NULL)
        rc = em_err(EMBER_EINVAL, "agent: neither a database nor a window "
                    "callback");
    if (rc == EMBER_OK)
        rc = em_sampler_check();
    if (rc == EMBER_OK && (a = em_calloc(1, sizeof *a)) == NULL)
        rc = em_err(EMBER_ENOMEM, "agent: out of memory");
    if (rc != EMBER_OK)
        return rc;
    a->db = db;
    a->opts = opts;
    node_name(a);
    so = opts->sampler;
    so.sz = sizeof so;
    rc = em_symbolizer_new(&a->symb);
    if (rc == EMBER_OK)
        rc = em_sampler_open(&so, on_proc, a, &a->sampler);
    if (rc == EMBER_OK) {
        int64_t t0 = mono_ns();
        a->period_ns = em_sampler_period_ns(a->sampler);
        capture_running(a);
        if (opts->verbose)
            fprintf(stderr, "sampler attached; running processes captured "
                    "in %.1f ms\n", (double)(mono_ns() - t0) / 1e6);
        if (em_symbolizer_kernel_hidden(a->symb))
            fprintf(stderr, "note: kernel frames will stay addresses: "
                    "/proc/kallsyms is unreadable or hides its addresses "
                    "(kernel.kptr_restrict)\n");
        em_symbolizer_stats(a->symb, &a->symb_last);
        a->cpu_last = cpu_seconds();
        window_reset(a, mono_ns(), real_ms());
        rc = agent_loop(a, stop);
    }
    agent_free(a);
    a->rep.cpu_seconds = cpu_seconds();
    if (rep != NULL)
        *rep = a->rep;
    em_free(a);
    return rc;
}
