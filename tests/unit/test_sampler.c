/*
** tests/unit/test_sampler.c: the eBPF sampler (bpf/sampler.h) on the real
** kernel: a busy thread of this process is sampled at 99 Hz with user
** stacks ending in its spin function, counts match the frequency, a second
** drain sees only the new window, exec and exit of a child arrive as
** events, a pid filter sees only its process, and closing leaves no
** program, map or perf event behind (bpftool and /proc/self/fd agree).
**
** Every test skips, with the reason printed, where the machine cannot
** sample: not root, no BTF, or no cpu-clock perf event.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "engine/engine.h"
#include "bpf/sampler.h"

#define FREQ 99

/* ---- preconditions ----------------------------------------------------------- */

/* NULL when this machine can sample, else why not. */
static const char *cannot_sample(void)
{
    struct perf_event_attr a;
    long fd;

    if (geteuid() != 0)
        return "not root";
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        return "no BTF at /sys/kernel/btf/vmlinux";
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = FREQ;
    fd = syscall(SYS_perf_event_open, &a, -1, 0, -1, 0);
    if (fd < 0)
        return "perf_event_open of cpu-clock fails";
    close((int)fd);
    return NULL;
}

#define REQUIRE_SAMPLER()                                                   \
    do {                                                                    \
        const char *why_ = cannot_sample();                                 \
        if (why_ != NULL) {                                                 \
            printf("skipped: %s\n", why_);                                  \
            skip();                                                         \
        }                                                                   \
    } while (0)

/* ---- a busy thread ----------------------------------------------------------- */

static int spinning;
static volatile uint64_t spin_sink;

/* The work the samples should land in; the empty asm keeps the optimizer
** from dropping or folding the loop. */
__attribute__((noinline)) static uint64_t spin_once(uint64_t x)
{
    for (int i = 0; i < 1000000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* A second function, so that two threads have distinct stacks. */
__attribute__((noinline)) static uint64_t spin_other(uint64_t x)
{
    for (int i = 0; i < 1000000; i++) {
        x = x * 2862933555777941757ull + 3037000493ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static void *busy_main(void *arg)
{
    uint64_t x = 1;

    EM_UNUSED(arg);
    while (__atomic_load_n(&spinning, __ATOMIC_RELAXED))
        x = spin_once(x);
    spin_sink = x;
    return NULL;
}

static void *other_main(void *arg)
{
    uint64_t x = 1;

    EM_UNUSED(arg);
    while (__atomic_load_n(&spinning, __ATOMIC_RELAXED))
        x = spin_other(x);
    spin_sink = x;
    return NULL;
}

static pthread_t busy_start(void)
{
    pthread_t t;

    __atomic_store_n(&spinning, 1, __ATOMIC_RELAXED);
    assert_int_equal(pthread_create(&t, NULL, busy_main, NULL), 0);
    return t;
}

static void busy_stop(pthread_t t)
{
    __atomic_store_n(&spinning, 0, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static long online_cpus(void)
{
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* ---- what a drain delivers ----------------------------------------------------- */

typedef struct tally {
    uint32_t tgid;              /* the process of interest */
    uint64_t all;               /* samples of every key */
    uint64_t mine;              /* samples of TGID */
    uint64_t mine_ustack;       /* ... with a user stack */
    uint64_t mine_in_spin;      /* ... whose leaf is in spin_once */
    uint64_t others;            /* samples of other processes */
    uint64_t keys;
    uint64_t bad_depth;         /* stacks longer than the maximum */
} tally;

static int tally_fn(void *ctx, const em_sample *smp)
{
    tally *t = ctx;
    uintptr_t spin = (uintptr_t)spin_once;

    t->keys++;
    t->all += smp->count;
    if (smp->nustack > EM_SAMPLER_MAX_DEPTH ||
        smp->nkstack > EM_SAMPLER_MAX_DEPTH)
        t->bad_depth++;
    if (smp->tgid != t->tgid) {
        t->others += smp->count;
        return 0;
    }
    t->mine += smp->count;
    if (smp->nustack > 0)
        t->mine_ustack += smp->count;
    if (smp->nustack > 0 && smp->ustack[0] >= spin &&
        smp->ustack[0] < spin + 512)
        t->mine_in_spin += smp->count;
    return 0;
}

static int stop_fn(void *ctx, const em_sample *smp)
{
    EM_UNUSED(smp);
    (*(int *)ctx)++;
    return 42;
}

/* ---- tests ----------------------------------------------------------------------- */

static void test_check(void **state)
{
    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    if (em_sampler_check() != EMBER_OK)
        fail_msg("em_sampler_check: %s", em_errmsg());
}

/* Counts near FREQ x seconds x busy CPUs, leaves in spin_once, a second
** window with only its own samples, the whole machine covered. */
static void test_windows(void **state)
{
    em_sampler_opts o = { .sz = sizeof o, .frequency = FREQ };
    em_sampler_stats st, st2;
    em_sampler *s = NULL;
    tally t1 = { .tgid = (uint32_t)getpid() }, t2 = t1;
    double t0, w1, w2;
    pthread_t busy;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    busy = busy_start();
    if (em_sampler_open(&o, NULL, NULL, &s) != EMBER_OK)
        fail_msg("em_sampler_open: %s", em_errmsg());
    assert_int_equal(em_sampler_period_ns(s), 1000000000u / FREQ);
    t0 = now_s();
    sleep_ms(1000);
    assert_int_equal(em_sampler_drain(s, tally_fn, &t1, &st), EMBER_OK);
    w1 = now_s() - t0;
    t0 = now_s();
    sleep_ms(500);
    assert_int_equal(em_sampler_drain(s, tally_fn, &t2, &st2), EMBER_OK);
    w2 = now_s() - t0;
    busy_stop(busy);
    em_sampler_close(s);

    printf("window 1 (%.2fs): %llu of ours (%llu in spin_once), %llu all, "
           "%llu idle, %llu keys; stats samples %llu lost %llu uerr %llu "
           "kerr %llu dropped %llu drain %.2f ms\n", w1,
           (unsigned long long)t1.mine, (unsigned long long)t1.mine_in_spin,
           (unsigned long long)t1.all, (unsigned long long)st.idle,
           (unsigned long long)t1.keys, (unsigned long long)st.samples,
           (unsigned long long)st.lost, (unsigned long long)st.ustack_errors,
           (unsigned long long)st.kstack_errors,
           (unsigned long long)st.stacks_dropped, (double)st.drain_ns / 1e6);
    printf("window 2 (%.2fs): %llu of ours, %llu all\n", w2,
           (unsigned long long)t2.mine, (unsigned long long)t2.all);

    /* One busy thread: about FREQ per second of window, when it gets its
    ** CPU (other load may take some). */
    assert_in_range(t1.mine, (uint64_t)(FREQ * w1 * 0.3),
                    (uint64_t)(FREQ * w1 * 1.3 + 10));
    assert_true(t1.mine_ustack * 10 >= t1.mine * 9);
    assert_true(t1.mine_in_spin * 2 >= t1.mine);
    assert_int_equal(t1.bad_depth, 0);
    /* Keys and idle make up the machine's samples. No lower bound past our
    ** own thread's: on a tickless kernel an idle CPU's cpu-clock may not
    ** fire at all, so the other CPUs can add nothing. */
    assert_int_equal(st.samples, t1.all);
    double machine = (double)(t1.all + st.idle);
    assert_true(machine >= (double)t1.mine);
    assert_true(machine <= FREQ * w1 * (double)online_cpus() * 1.3 + 20);
    /* The second window holds only its half second, nothing of the first:
    ** exactly what the program counted into that set since the flip. */
    assert_in_range(t2.mine, (uint64_t)(FREQ * w2 * 0.3),
                    (uint64_t)(FREQ * w2 * 1.3 + 10));
    assert_int_equal(st2.samples, t2.all);
}

typedef struct events {
    pid_t child;
    int exec, exit, sampled;    /* seen for CHILD */
    int other;                  /* events of other processes */
} events;

static void on_proc(void *ctx, int event, uint32_t tgid)
{
    events *e = ctx;

    if (tgid != (uint32_t)e->child)
        e->other++;
    else if (event == EM_PROC_EXEC)
        e->exec++;
    else if (event == EM_PROC_EXIT)
        e->exit++;
    else if (event == EM_PROC_SAMPLED)
        e->sampled++;
}

/* Polls S until CHILD's exec and exit arrived or 3 s passed. */
static void poll_events(em_sampler *s, events *e, int want_exec)
{
    double until = now_s() + 3;

    while ((e->exec < want_exec || e->exit < 1) && now_s() < until)
        assert_int_equal(em_sampler_poll(s, 100), EMBER_OK);
}

static void test_exec_exit_events(void **state)
{
    em_sampler *s = NULL;
    events e = { 0 };
    int status;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    if (em_sampler_open(NULL, on_proc, &e, &s) != EMBER_OK)
        fail_msg("em_sampler_open: %s", em_errmsg());
    e.child = fork();
    assert_true(e.child >= 0);
    if (e.child == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(e.child, &status, 0), e.child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    poll_events(s, &e, 1);
    em_sampler_close(s);
    assert_int_equal(e.exec, 1);
    assert_int_equal(e.exit, 1);
}

/* A child that spins for 300 ms is sampled about 30 times but announced
** once, at its first sample; its exec is told apart, and so is the first
** sample of the new image after it. */
static void test_sampled_event(void **state)
{
    em_sampler_opts o = { .sz = sizeof o, .frequency = FREQ };
    em_sampler *s = NULL;
    events e = { 0 };
    int status;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    if (em_sampler_open(&o, on_proc, &e, &s) != EMBER_OK)
        fail_msg("em_sampler_open: %s", em_errmsg());
    e.child = fork();
    assert_true(e.child >= 0);
    if (e.child == 0) {
        double until = now_s() + 0.3;
        while (now_s() < until)
            ;
        /* The new image spins too (sh's loop), announced again. */
        execl("/bin/sh", "sh", "-c",
              "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
              (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(e.child, &status, 0), e.child);
    poll_events(s, &e, 1);
    em_sampler_close(s);
    printf("child: %d exec, %d sampled, %d exit events\n", e.exec, e.sampled,
           e.exit);
    assert_int_equal(e.exec, 1);
    assert_int_equal(e.sampled, 2);
    assert_int_equal(e.exit, 1);
}

/* The CPU time PID has had, in seconds (/proc/PID/stat's utime and
** stime), or -1 when it cannot be read. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long ut = 0, st = 0;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name may hold spaces: fields count from its ')' */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A spinning child, sampled with a pid filter while this process spins
** too: only the child's samples and events arrive, about FREQ a second of
** the CPU the child had (not of the wall clock: on a busy machine it gets
** less, and the sampler rightly samples it less). */
static void test_pid_filter(void **state)
{
    em_sampler_opts o = { .sz = sizeof o, .frequency = FREQ };
    em_sampler *s = NULL;
    events e = { 0 };
    tally t = { 0 };
    pthread_t busy;
    double cpu0, cpu1;
    int status;
    pid_t child;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        uint64_t x = 1;
        for (;;)
            spin_sink = x = spin_once(x);
    }
    busy = busy_start();
    o.pid = child;
    e.child = child;
    t.tgid = (uint32_t)child;
    if (em_sampler_open(&o, on_proc, &e, &s) != EMBER_OK) {
        kill(child, SIGKILL);
        fail_msg("em_sampler_open: %s", em_errmsg());
    }
    cpu0 = proc_cpu_s(child);
    sleep_ms(1000);
    cpu1 = proc_cpu_s(child);
    assert_int_equal(em_sampler_drain(s, tally_fn, &t, NULL), EMBER_OK);
    kill(child, SIGKILL);
    assert_int_equal(waitpid(child, &status, 0), child);
    poll_events(s, &e, 0);
    busy_stop(busy);
    em_sampler_close(s);
    printf("pid %d: %llu samples in %.2f s of CPU, %llu of others, exit "
           "events %d, others' events %d\n", (int)child,
           (unsigned long long)t.mine, cpu1 - cpu0,
           (unsigned long long)t.others, e.exit, e.other);
    assert_true(cpu0 >= 0 && cpu1 >= cpu0);
    /* a fifth of the samples its CPU time is worth, the clock ticks'
    ** rounding (a tick either side) allowed for */
    assert_true((double)t.mine >=
                FREQ * (cpu1 - cpu0 - 2.0 / (double)sysconf(_SC_CLK_TCK)) / 5);
    assert_true(t.mine > 0 || cpu1 - cpu0 < 0.1);
    assert_int_equal(t.others, 0);
    assert_true(t.mine_in_spin * 2 >= t.mine);
    assert_int_equal(e.exit, 1);
    assert_int_equal(e.other, 0);
}

/* A callback's non-zero return stops the drain and is returned; the old
** set is still emptied, so the next window starts clean. */
static void test_drain_stops(void **state)
{
    em_sampler_opts o = { .sz = sizeof o, .frequency = FREQ };
    em_sampler *s = NULL;
    tally t = { .tgid = (uint32_t)getpid() };
    pthread_t busy;
    int calls = 0;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    busy = busy_start();
    if (em_sampler_open(&o, NULL, NULL, &s) != EMBER_OK)
        fail_msg("em_sampler_open: %s", em_errmsg());
    sleep_ms(300);
    assert_int_equal(em_sampler_drain(s, stop_fn, &calls, NULL), 42);
    assert_int_equal(calls, 1);
    sleep_ms(300);
    assert_int_equal(em_sampler_drain(s, tally_fn, &t, NULL), EMBER_OK);
    busy_stop(busy);
    em_sampler_close(s);
    assert_true(t.mine > 0);
    assert_true(t.mine <= (uint64_t)(FREQ * 0.3 * 1.3 + 15));
}

typedef struct wrong {
    uint32_t tgid;
    uint64_t mine, lost, right, wrong;
} wrong;

/* Leaves must match the thread named in comm: "spin_a" runs spin_once,
** "spin_b" spin_other; a lost user stack is flagged and has no frames. */
static int wrong_fn(void *ctx, const em_sample *smp)
{
    wrong *w = ctx;
    uintptr_t a = (uintptr_t)spin_once, b = (uintptr_t)spin_other;

    if (smp->tgid != w->tgid)
        return 0;
    w->mine += smp->count;
    if (smp->flags & EM_SAMPLE_USTACK_LOST) {
        assert_int_equal(smp->nustack, 0);
        w->lost += smp->count;
        return 0;
    }
    if (smp->nustack == 0)
        return 0;
    /* The function a leaf is in: the nearer start at or below it. */
    uint64_t leaf = smp->ustack[0];
    bool in_a = leaf >= a && leaf - a < 512 && (leaf < b || b < a);
    bool in_b = leaf >= b && leaf - b < 512 && (leaf < a || a < b);
    if ((strcmp(smp->comm, "spin_a") == 0 && in_b) ||
        (strcmp(smp->comm, "spin_b") == 0 && in_a))
        w->wrong += smp->count;
    else if (in_a || in_b)
        w->right += smp->count;
    return 0;
}

/* A one-entry stack map and two threads with different stacks: once it
** holds one stack every other is refused; the refusals are counted and
** flagged, never reported as the other thread's stack. */
static void test_stack_map_full(void **state)
{
    em_sampler_opts o = { .sz = sizeof o, .frequency = FREQ,
                          .stack_entries = 1 };
    em_sampler_stats st;
    em_sampler *s = NULL;
    wrong w = { .tgid = (uint32_t)getpid() };
    pthread_t ta, tb;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    ta = busy_start();
    pthread_setname_np(ta, "spin_a");
    assert_int_equal(pthread_create(&tb, NULL, other_main, NULL), 0);
    pthread_setname_np(tb, "spin_b");
    if (em_sampler_open(&o, NULL, NULL, &s) != EMBER_OK)
        fail_msg("em_sampler_open: %s", em_errmsg());
    sleep_ms(700);
    assert_int_equal(em_sampler_drain(s, wrong_fn, &w, &st), EMBER_OK);
    busy_stop(ta);
    pthread_join(tb, NULL);
    em_sampler_close(s);
    printf("%llu samples: %llu lost stacks, %llu right, %llu wrong; "
           "%llu stacks dropped\n", (unsigned long long)w.mine,
           (unsigned long long)w.lost, (unsigned long long)w.right,
           (unsigned long long)w.wrong, (unsigned long long)st.stacks_dropped);
    assert_true(w.mine >= FREQ / 5);
    assert_true(w.lost > 0);
    assert_true(st.stacks_dropped >= w.lost);
    assert_int_equal(w.wrong, 0);
}

/* ---- nothing left behind ------------------------------------------------------- */

#define MAX_IDS 4096

typedef struct idset {
    uint32_t id[MAX_IDS];
    size_t n;
} idset;

static bool is_ours(const char *name)
{
    static const char *const ours[] = {
        "em_sample", "em_proc_exec", "em_proc_exit", "em_counts_0",
        "em_counts_1", "em_stacks_0", "em_stacks_1", "em_stats", "em_events",
        "sampler.rodata", "sampler.bss" };

    for (size_t i = 0; i < EM_ARRAY_LEN(ours); i++)
        if (strcmp(name, ours[i]) == 0)
            return true;
    return false;
}

/* The ids of `bpftool WHAT show` entries named like the sampler's. */
static void bpftool_ids(const char *what, idset *out)
{
    char cmd[64], line[512], name[64];
    unsigned id;
    FILE *p;

    out->n = 0;
    snprintf(cmd, sizeof cmd, "bpftool %s show 2>/dev/null", what);
    p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof line, p) != NULL) {
        const char *at = strstr(line, " name ");
        if (sscanf(line, "%u:", &id) != 1 || at == NULL ||
            sscanf(at, " name %63s", name) != 1)
            continue;
        if (is_ours(name) && out->n < MAX_IDS)
            out->id[out->n++] = id;
    }
    pclose(p);
}

static bool has_id(const idset *s, uint32_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->id[i] == id)
            return true;
    return false;
}

/* Entries of DURING that were not in BEFORE (the sampler's own, whatever
** else runs on the machine); *LEFT gets how many of them are in AFTER. */
static size_t mine(const idset *before, const idset *during,
                   const idset *after, size_t *left)
{
    size_t n = 0;

    *left = 0;
    for (size_t i = 0; i < during->n; i++) {
        if (has_id(before, during->id[i]))
            continue;
        n++;
        if (has_id(after, during->id[i])) {
            printf("%u still listed\n", (unsigned)during->id[i]);
            (*left)++;
        }
    }
    return n;
}

/* The kernel frees a closed link's program after an RCU grace period, so
** the listing may lag close by a moment: look again for up to 3 s. */
static size_t gone(const char *what, const idset *before,
                   const idset *during)
{
    static idset after;
    size_t n = 0, left = 1;

    for (int tries = 0; tries < 30 && left > 0; tries++) {
        if (tries > 0)
            sleep_ms(100);
        bpftool_ids(what, &after);
        n = mine(before, during, &after, &left);
    }
    if (left > 0)
        fail_msg("%zu BPF %ss still loaded 3 s after close", left, what);
    return n;
}

/* This process's descriptors of perf events and BPF objects. */
static int bpf_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    char path[300], target[256];
    int n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (strstr(target, "perf_event") != NULL ||
            strstr(target, "bpf") != NULL)
            n++;
    }
    closedir(d);
    return n;
}

static void test_nothing_left(void **state)
{
    static idset pb, pd, mb, md;
    em_sampler *s = NULL;
    events e = { 0 };
    int fds0, fds1;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    fds0 = bpf_fds();
    bpftool_ids("prog", &pb);
    bpftool_ids("map", &mb);
    if (em_sampler_open(NULL, on_proc, &e, &s) != EMBER_OK)
        fail_msg("em_sampler_open: %s", em_errmsg());
    fds1 = bpf_fds();
    bpftool_ids("prog", &pd);
    bpftool_ids("map", &md);
    em_sampler_close(s);
    printf("descriptors: %d before, %d open, %d after\n", fds0, fds1,
           bpf_fds());
    assert_int_equal(gone("prog", &pb, &pd), 3);
    assert_int_equal(gone("map", &mb, &md), 8);
    assert_true(fds1 >= fds0 + (int)online_cpus());
    assert_int_equal(bpf_fds(), fds0);
}

/* Each of em_sampler_open's own allocations may fail: ENOMEM, nothing
** loaded, nothing leaked. */
static void test_open_oom(void **state)
{
    em_sampler *s = NULL;
    int rc = EMBER_ENOMEM, fds0;

    EM_UNUSED(state);
    REQUIRE_SAMPLER();
    fds0 = bpf_fds();
    for (uint64_t n = 1; n < 50 && rc != EMBER_OK; n++) {
        em_alloc_fail_at(n);
        rc = em_sampler_open(NULL, on_proc, NULL, &s);
        em_alloc_fail_at(0);
        if (rc != EMBER_OK) {
            assert_int_equal(rc, EMBER_ENOMEM);
            assert_null(s);
            assert_int_equal(bpf_fds(), fds0);
        }
    }
    assert_int_equal(rc, EMBER_OK);
    em_sampler_close(s);
    assert_int_equal(bpf_fds(), fds0);
}

/* Without privileges: one line naming what is missing, nothing loaded. */
static void test_not_root(void **state)
{
    int status;
    pid_t child;

    EM_UNUSED(state);
    if (geteuid() != 0) {
        printf("skipped: not root, cannot drop to another user\n");
        skip();
    }
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        em_sampler *s = NULL;
        int bad = 0;
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        if (em_sampler_check() != EMBER_EINVAL ||
            strstr(em_errmsg(), "needs root") == NULL)
            bad |= 1;
        printf("check: %s\n", em_errmsg());
        if (em_sampler_open(NULL, NULL, NULL, &s) == EMBER_OK || s != NULL)
            bad |= 2;
        printf("open: %s\n", em_errmsg());
        fflush(stdout);
        _exit(bad);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_bad_opts(void **state)
{
    em_sampler_opts o = { .sz = sizeof o, .frequency = 1000000 };
    em_sampler *s = (em_sampler *)&o;

    EM_UNUSED(state);
    assert_int_equal(em_sampler_open(&o, NULL, NULL, &s), EMBER_EINVAL);
    assert_null(s);
    assert_non_null(strstr(em_errmsg(), "frequency"));
    o.frequency = 0;
    o.pid = -3;
    assert_int_equal(em_sampler_open(&o, NULL, NULL, &s), EMBER_EINVAL);
    o.pid = 0x3fffffff;         /* above any pid_max */
    assert_int_equal(em_sampler_open(&o, NULL, NULL, &s), EMBER_ENOTFOUND);
    assert_non_null(strstr(em_errmsg(), "no process"));
    em_sampler_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_exec_exit_events),
        cmocka_unit_test(test_sampled_event),
        cmocka_unit_test(test_pid_filter),
        cmocka_unit_test(test_drain_stops),
        cmocka_unit_test(test_stack_map_full),
        cmocka_unit_test(test_nothing_left),
        cmocka_unit_test(test_open_oom),
        cmocka_unit_test(test_not_root),
        cmocka_unit_test(test_bad_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
