/*
** bpf/sampler.c: the user-space half of the CPU sampler (bpf/sampler.h):
** loads bpf/sampler.bpf.c through its bpftool skeleton, opens one
** cpu-clock perf event per online CPU with the program attached, forwards
** exec and exit events from the ring buffer, and drains the in-kernel
** counts window by window.
**
** A drain flips the active map set, waits until no sample that read the
** old index is in flight, then takes every key of the old count map and
** every stack of the old stack map (lookup-and-delete in batches), the
** stacks into a table by hash: the set is empty again before it becomes
** active at the next flip, so the stack map never fills across windows
** and a hash never names two stacks under a live key.
**
** libbpf's failures are translated here into em_err messages naming the
** step; libbpf's own log is silent unless EMBER_BPF_DEBUG is set.
*/
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <sys/syscall.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "engine/engine.h"
#include "bpf/sampler.h"
#include "bpf/sampler_int.h"
#include "bpf/sampler.skel.h"

_Static_assert(EM_BPF_MAX_DEPTH == EM_SAMPLER_MAX_DEPTH, "stack depth");
_Static_assert((int)EM_BPF_PROC_EXEC == (int)EM_PROC_EXEC &&
               (int)EM_BPF_PROC_EXIT == (int)EM_PROC_EXIT &&
               (int)EM_BPF_PROC_SAMPLED == (int)EM_PROC_SAMPLED,
               "event values");

#define DEFAULT_FREQUENCY 19
#define DEFAULT_ENTRIES 16384
#define MAX_ENTRIES (1u << 22)      /* per map; a stack entry is ~1 KB */
#define STACK_BATCH 256             /* stacks per lookup-and-delete call */
#define MAX_FREQUENCY 100000        /* perf's own default ceiling */
#define INFLIGHT_WAIT_NS 100000000  /* give up on a marker after 100 ms */

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* One drained stack: POOL[OFF .. OFF + N) under HASH (0: a free slot). */
struct stack_slot {
    uint64_t hash;
    uint32_t off, n;
};
typedef EM_HTAB_TYPE(struct stack_slot) stack_table;

/* The kernel's stack hashes end in murmur3's finalizer: they are their own
** hash here. */
#define EM_HT_NAME stack_tab
#define EM_HT_TABLE stack_table
#define EM_HT_ENTRY struct stack_slot
#define EM_HT_KEY uint64_t
#define EM_HT_IS_FREE(e) ((e)->hash == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_MATCH(e, h, k) ((e)->hash == (k))
#define EM_HT_WHAT "sampler: drained stacks"
#include "engine/htab.h"

struct em_sampler {
    struct sampler *skel;
    struct ring_buffer *rb;         /* NULL when no event callback */
    struct bpf_link **links;        /* one per CPU; each owns its perf fd */
    int nlinks;
    em_proc_fn proc;
    void *proc_ctx;
    unsigned frequency;
    int ncpus;                      /* possible CPUs (per-CPU map values) */
    uint32_t count_cap;             /* entries of a count map */
    uint32_t stack_cap;             /* entries of a stack map */
    struct em_bpf_key *keys;        /* drain buffers of count_cap entries */
    uint64_t *values;
    struct em_bpf_stats *pcpu;      /* one per possible CPU */
    uint64_t events_lost_seen;      /* the events counter at the last drain */
    bool no_batch;                  /* the kernel refused batch operations */
    /* The drained stacks: a table by hash of frame runs in one pool. */
    stack_table stacks;
    uint64_t *pool;
    size_t pool_n, pool_cap;
    uint64_t *batch_keys;           /* STACK_BATCH entries each */
    struct em_bpf_stack *batch_stacks;
};

/* ---- libbpf's log ---------------------------------------------------------- */

__attribute__((format(printf, 2, 0)))
static int log_debug(enum libbpf_print_level level, const char *fmt,
                     va_list ap)
{
    EM_UNUSED(level);
    return vfprintf(stderr, fmt, ap);
}

__attribute__((format(printf, 2, 0)))
static int log_silent(enum libbpf_print_level level, const char *fmt,
                      va_list ap)
{
    EM_UNUSED(level);
    EM_UNUSED(fmt);
    EM_UNUSED(ap);
    return 0;
}

static void set_libbpf_log(void)
{
    const char *v = getenv("EMBER_BPF_DEBUG");

    libbpf_set_print(v != NULL && *v != '\0' && strcmp(v, "0") != 0
                         ? log_debug : log_silent);
}

/* ---- requirements ---------------------------------------------------------- */

/* True when the effective capability set holds CAP. */
static bool has_cap(int cap)
{
    struct __user_cap_header_struct h = {
        .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];

    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) != 0)
        return geteuid() == 0;
    return (d[cap / 32].effective >> (cap % 32)) & 1u;
}

static long perf_event_open(struct perf_event_attr *a, int cpu)
{
    return syscall(SYS_perf_event_open, a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* One cpu-clock event on CPU at FREQ Hz: its fd, or -1 with errno set. */
static int open_cpu_clock(int cpu, unsigned freq)
{
    struct perf_event_attr a;

    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = freq;
    return (int)perf_event_open(&a, cpu);
}

/* The message for a failed perf_event_open (errno ERR) at FREQ Hz. */
static int perf_open_err(int err, int cpu, unsigned freq)
{
    if (err == EACCES || err == EPERM)
        return em_err(EMBER_EINVAL, "eBPF sampling needs root (CAP_PERFMON): "
                      "perf_event_open of cpu-clock on CPU %d was denied; "
                      "run as root", cpu);
    if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP || err == ENOSYS)
        return em_err(EMBER_EINVAL, "this kernel has no cpu-clock perf event "
                      "(perf_event_open on CPU %d: %s): it needs "
                      "CONFIG_PERF_EVENTS", cpu, strerror(err));
    if (err == EINVAL)
        return em_err(EMBER_EINVAL, "perf_event_open of cpu-clock at %u Hz "
                      "on CPU %d: invalid; is the frequency above "
                      "kernel.perf_event_max_sample_rate?", freq, cpu);
    return em_err(EMBER_EIO, "perf_event_open of cpu-clock on CPU %d: %s",
                  cpu, strerror(err));
}

int em_sampler_check(void)
{
    int fd, ok;

    if (!has_cap(CAP_SYS_ADMIN) && !(has_cap(CAP_BPF) && has_cap(CAP_PERFMON)))
        return em_err(EMBER_EINVAL, "eBPF sampling needs root (CAP_BPF, "
                      "CAP_PERFMON): run ember record as root");
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        return em_err(EMBER_EINVAL, "eBPF sampling needs the kernel's BTF "
                      "(/sys/kernel/btf/vmlinux: %s): use a kernel built "
                      "with CONFIG_DEBUG_INFO_BTF=y", strerror(errno));
    fd = open_cpu_clock(0, DEFAULT_FREQUENCY);
    if (fd < 0)
        return perf_open_err(errno, 0, DEFAULT_FREQUENCY);
    close(fd);
    set_libbpf_log();
    ok = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL);
    if (ok != 1)
        return em_err(EMBER_EINVAL, "this kernel cannot load perf_event BPF "
                      "programs (%s): it needs CONFIG_BPF_SYSCALL and "
                      "CONFIG_BPF_EVENTS", ok < 0 ? strerror(-ok)
                                                  : "not supported");
    return EMBER_OK;
}

/* ---- open and close -------------------------------------------------------- */

/* Copies the caller's options (as much as its sz covers) with defaults. */
static int read_opts(const em_sampler_opts *in, em_sampler_opts *o)
{
    memset(o, 0, sizeof *o);
    if (in != NULL)
        memcpy(o, in, in->sz < sizeof *o ? in->sz : sizeof *o);
    o->sz = sizeof *o;
    if (o->frequency == 0)
        o->frequency = DEFAULT_FREQUENCY;
    if (o->stack_entries == 0)
        o->stack_entries = DEFAULT_ENTRIES;
    if (o->count_entries == 0)
        o->count_entries = DEFAULT_ENTRIES;
    if (o->frequency > MAX_FREQUENCY)
        return em_err(EMBER_EINVAL, "sampler: frequency %u Hz above %u",
                      o->frequency, MAX_FREQUENCY);
    if (o->pid < 0)
        return em_err(EMBER_EINVAL, "sampler: pid %d is negative", o->pid);
    if (o->stack_entries > MAX_ENTRIES || o->count_entries > MAX_ENTRIES)
        return em_err(EMBER_EINVAL, "sampler: map sizes %u, %u above %u",
                      o->stack_entries, o->count_entries, MAX_ENTRIES);
    return EMBER_OK;
}

/* The drain buffers, sized before anything touches the kernel: the stack
** table has room for all the stack map's entries, so a drain never grows
** it. */
static int alloc_buffers(em_sampler *s, unsigned stack_entries)
{
    int rc = stack_tab_reserve(&s->stacks, stack_entries);

    if (rc != EMBER_OK)
        return rc;
    s->batch_keys = em_malloc(STACK_BATCH * sizeof *s->batch_keys);
    s->batch_stacks = em_malloc(STACK_BATCH * sizeof *s->batch_stacks);
    s->keys = em_malloc((size_t)s->count_cap * sizeof *s->keys);
    s->values = em_malloc((size_t)s->count_cap * sizeof *s->values);
    s->pcpu = em_calloc((size_t)s->ncpus, sizeof *s->pcpu);
    s->links = em_calloc((size_t)s->ncpus, sizeof *s->links);
    if (s->keys == NULL || s->values == NULL || s->pcpu == NULL ||
        s->links == NULL || s->batch_keys == NULL ||
        s->batch_stacks == NULL)
        return em_err(EMBER_ENOMEM, "sampler: drain buffers for %u keys, "
                      "%u stacks, %d CPUs", s->count_cap, stack_entries,
                      s->ncpus);
    return EMBER_OK;
}

/* Sets the map sizes and the pid filter, then loads the programs. */
static int load(em_sampler *s, const em_sampler_opts *o)
{
    struct sampler *k = s->skel;
    struct bpf_map *sized[] = { k->maps.em_counts_0, k->maps.em_counts_1,
                                k->maps.em_stacks_0, k->maps.em_stacks_1 };
    int err = 0;

    for (size_t i = 0; i < EM_ARRAY_LEN(sized) && err == 0; i++)
        err = bpf_map__set_max_entries(sized[i], i < 2 ? o->count_entries
                                                       : o->stack_entries);
    if (err != 0)
        return em_err(EMBER_EIO, "sampler: size maps: %s", strerror(-err));
    k->rodata->target_tgid = (__u32)o->pid;
    k->rodata->want_events = s->proc != NULL;
    if (s->proc == NULL) {      /* nobody listens: do not load the hooks */
        bpf_program__set_autoload(k->progs.em_proc_exec, false);
        bpf_program__set_autoload(k->progs.em_proc_exit, false);
    }
    err = sampler__load(k);
    if (err == -EPERM || err == -EACCES)
        return em_err(EMBER_EINVAL, "eBPF sampling needs root (CAP_BPF, "
                      "CAP_PERFMON): loading the sampler was denied (%s)",
                      strerror(-err));
    if (err != 0)
        return em_err(EMBER_EIO, "sampler: load BPF programs and maps: %s "
                      "(EMBER_BPF_DEBUG=1 shows libbpf's log)",
                      strerror(-err));
    return EMBER_OK;
}

/* Reads /sys/devices/system/cpu/online ("0-3,6") into ONLINE[0..n). */
static void online_cpus(bool *online, int n)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    int a, b, got = 0;
    char sep;

    if (f != NULL) {
        while (fscanf(f, "%d", &a) == 1) {
            b = a;
            sep = (char)fgetc(f);
            if (sep == '-' && fscanf(f, "%d", &b) == 1)
                sep = (char)fgetc(f);
            for (int c = a < 0 ? 0 : a; c <= b && c < n; c++) {
                online[c] = true;
                got = 1;
            }
            if (sep != ',')
                break;
        }
        fclose(f);
    }
    if (!got)                   /* unreadable: try them all */
        for (int c = 0; c < n; c++)
            online[c] = true;
}

/* Opens a cpu-clock event per online CPU and attaches em_sample to it. */
static int attach_cpus(em_sampler *s)
{
    bool *online = em_calloc((size_t)s->ncpus, sizeof *online);
    int rc = EMBER_OK;

    if (online == NULL)
        return em_err(EMBER_ENOMEM, "sampler: %d CPUs", s->ncpus);
    online_cpus(online, s->ncpus);
    for (int c = 0; c < s->ncpus && rc == EMBER_OK; c++) {
        if (!online[c])
            continue;
        int fd = open_cpu_clock(c, s->frequency);
        if (fd < 0 && errno == ENODEV)
            continue;           /* went offline since we read the list */
        if (fd < 0) {
            rc = perf_open_err(errno, c, s->frequency);
            break;
        }
        struct bpf_link *l =
            bpf_program__attach_perf_event(s->skel->progs.em_sample, fd);
        if (l == NULL) {
            int err = errno;
            close(fd);          /* the link owns it only on success */
            rc = em_err(EMBER_EIO, "sampler: attach to cpu-clock of CPU %d: "
                        "%s", c, strerror(err));
            break;
        }
        s->links[s->nlinks++] = l;
    }
    if (rc == EMBER_OK && s->nlinks == 0)
        rc = em_err(EMBER_EIO, "sampler: no online CPU to sample");
    em_free(online);
    return rc;
}

static int on_event(void *ctx, void *data, size_t size)
{
    em_sampler *s = ctx;
    const struct em_bpf_event *e = data;

    if (size >= sizeof *e)
        s->proc(s->proc_ctx, (int)e->event, e->tgid);
    return 0;
}

/* Attaches the exec and exit hooks and the ring buffer reader. */
static int attach_events(em_sampler *s)
{
    struct sampler *k = s->skel;

    k->links.em_proc_exec = bpf_program__attach(k->progs.em_proc_exec);
    if (k->links.em_proc_exec == NULL)
        return em_err(EMBER_EIO, "sampler: attach tp_btf/sched_process_exec: "
                      "%s", strerror(errno));
    k->links.em_proc_exit = bpf_program__attach(k->progs.em_proc_exit);
    if (k->links.em_proc_exit == NULL)
        return em_err(EMBER_EIO, "sampler: attach tp_btf/sched_process_exit: "
                      "%s", strerror(errno));
    s->rb = ring_buffer__new(bpf_map__fd(k->maps.em_events), on_event, s,
                             NULL);
    if (s->rb == NULL)
        return em_err(EMBER_EIO, "sampler: ring buffer of process events: %s",
                      strerror(errno));
    return EMBER_OK;
}

int em_sampler_open(const em_sampler_opts *opts, em_proc_fn proc, void *ctx,
                    em_sampler **out)
{
    em_sampler_opts o;
    em_sampler *s = NULL;
    int rc;

    *out = NULL;
    rc = read_opts(opts, &o);
    if (rc != EMBER_OK)
        return rc;
    if (o.pid != 0 && kill(o.pid, 0) != 0 && errno == ESRCH)
        return em_err(EMBER_ENOTFOUND, "sampler: no process %d", o.pid);
    set_libbpf_log();
    s = em_calloc(1, sizeof *s);
    if (s == NULL)
        return em_err(EMBER_ENOMEM, "sampler: handle");
    s->proc = proc;
    s->proc_ctx = ctx;
    s->frequency = o.frequency;
    s->count_cap = o.count_entries;
    s->stack_cap = o.stack_entries;
    s->ncpus = libbpf_num_possible_cpus();
    if (s->ncpus <= 0) {
        rc = em_err(EMBER_EIO, "sampler: count possible CPUs: %s",
                    strerror(-s->ncpus));
        goto out;
    }
    rc = alloc_buffers(s, o.stack_entries);
    if (rc != EMBER_OK)
        goto out;
    s->skel = sampler__open();
    if (s->skel == NULL) {
        rc = em_err(errno == ENOMEM ? EMBER_ENOMEM : EMBER_EIO,
                    "sampler: open the BPF object: %s", strerror(errno));
        goto out;
    }
    rc = load(s, &o);
    if (rc == EMBER_OK && proc != NULL)
        rc = attach_events(s);
    if (rc == EMBER_OK)
        rc = attach_cpus(s);
out:
    if (rc != EMBER_OK) {
        em_sampler_close(s);
        return rc;
    }
    *out = s;
    return EMBER_OK;
}

void em_sampler_close(em_sampler *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->nlinks; i++)
        bpf_link__destroy(s->links[i]);     /* also closes the perf fd */
    ring_buffer__free(s->rb);
    sampler__destroy(s->skel);              /* the hooks' links, the maps */
    em_free(s->links);
    em_free(s->keys);
    em_free(s->values);
    em_free(s->pcpu);
    stack_tab_free(&s->stacks);
    em_free(s->pool);
    em_free(s->batch_keys);
    em_free(s->batch_stacks);
    em_free(s);
}

double em_sampler_fill(const em_sampler *s)
{
    unsigned set = __atomic_load_n(&s->skel->bss->active_set,
                                   __ATOMIC_RELAXED) & 1u;
    const volatile struct em_bpf_fill *f = &s->skel->bss->fill[set];
    double keys = (double)f->keys / (double)s->count_cap;
    double stacks = (double)f->stacks / (double)s->stack_cap;

    return keys > stacks ? keys : stacks;
}

int em_sampler_fill_interval_ms(const em_sampler *s)
{
    double per_s = (double)s->frequency * (double)s->nlinks;
    uint32_t cap = s->count_cap < s->stack_cap ? s->count_cap : s->stack_cap;
    double ms = per_s > 0 ? 1000.0 * (double)cap / (4.0 * 2.0 * per_s)
                          : 500.0;

    return ms > 500.0 ? 500 : ms < 10.0 ? 10 : (int)ms;
}

uint64_t em_sampler_period_ns(const em_sampler *s)
{
    return 1000000000u / s->frequency;
}

int em_sampler_poll(em_sampler *s, int timeout_ms)
{
    int n;

    if (s->rb == NULL) {        /* no listener: keep the caller's pace */
        struct timespec ts = { timeout_ms / 1000,
                               (long)(timeout_ms % 1000) * 1000000L };
        if (timeout_ms > 0)
            nanosleep(&ts, NULL);
        return EMBER_OK;
    }
    n = ring_buffer__poll(s->rb, timeout_ms);
    if (n < 0 && n != -EINTR)
        return em_err(EMBER_EIO, "sampler: poll process events: %s",
                      strerror(-n));
    return EMBER_OK;
}

/* ---- drain ----------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Makes the other set active; returns the old one. The sequentially
** consistent exchange is a full barrier (x86: xchg), pairing with the
** program's locked add on its in-flight marker. */
static unsigned flip(em_sampler *s)
{
    unsigned old = __atomic_load_n(&s->skel->bss->active_set,
                                   __ATOMIC_RELAXED) & 1u;

    __atomic_exchange_n(&s->skel->bss->active_set, old ^ 1u,
                        __ATOMIC_SEQ_CST);
    return old;
}

/* Waits until every run that may have read the old index is done: a CPU
** whose marker is odd is inside a run; any change of that marker means the
** run ended (later runs see the new index). Runs last microseconds; past
** INFLIGHT_WAIT_NS, or for CPUs without a marker, two sample periods pass
** instead. */
static void wait_inflight(em_sampler *s)
{
    volatile struct em_bpf_cpu_seq *seq = s->skel->bss->cpu_seq;
    int n = s->ncpus < EM_BPF_MAX_CPUS ? s->ncpus : EM_BPF_MAX_CPUS;
    uint64_t deadline = now_ns() + INFLIGHT_WAIT_NS;
    bool late = s->ncpus > EM_BPF_MAX_CPUS;

    for (int c = 0; c < n && !late; c++) {
        uint64_t v = __atomic_load_n(&seq[c].seq, __ATOMIC_SEQ_CST);
        while ((v & 1) && __atomic_load_n(&seq[c].seq, __ATOMIC_SEQ_CST) == v) {
            if (now_ns() > deadline) {
                late = true;
                break;
            }
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
    }
    if (late) {
        uint64_t p = 2 * em_sampler_period_ns(s);
        struct timespec ts = { (time_t)(p / 1000000000u),
                               (long)(p % 1000000000u) };
        nanosleep(&ts, NULL);
    }
}

/* Sums and zeroes the per-CPU statistics entry KEY into *SUM. */
static int take_stats(em_sampler *s, uint32_t key, struct em_bpf_stats *sum,
                      bool zero)
{
    int fd = bpf_map__fd(s->skel->maps.em_stats);
    int err = bpf_map_lookup_elem(fd, &key, s->pcpu);

    if (err != 0)
        return em_err(EMBER_EIO, "sampler: read statistics: %s",
                      strerror(errno));
    memset(sum, 0, sizeof *sum);
    for (int c = 0; c < s->ncpus; c++) {
        const struct em_bpf_stats *p = &s->pcpu[c];
        sum->samples += p->samples;
        sum->idle += p->idle;
        sum->lost += p->lost;
        sum->ustack_errors += p->ustack_errors;
        sum->kstack_errors += p->kstack_errors;
        sum->stacks_dropped += p->stacks_dropped;
        sum->events_lost += p->events_lost;
    }
    if (!zero)
        return EMBER_OK;
    memset(s->pcpu, 0, (size_t)s->ncpus * sizeof *s->pcpu);
    if (bpf_map_update_elem(fd, &key, s->pcpu, BPF_ANY) != 0)
        return em_err(EMBER_EIO, "sampler: reset statistics: %s",
                      strerror(errno));
    return EMBER_OK;
}

/* Moves the keys of count map FD into the buffers one at a time (kernels
** without batch operations): the next key is found before the current one
** is deleted, since a deleted key restarts the iteration. */
static int take_counts_slow(em_sampler *s, int fd, uint32_t *n)
{
    struct em_bpf_key cur, next;
    int more = bpf_map_get_next_key(fd, NULL, &next) == 0;

    *n = 0;
    while (more && *n < s->count_cap) {
        cur = next;
        more = bpf_map_get_next_key(fd, &cur, &next) == 0;
        if (bpf_map_lookup_elem(fd, &cur, &s->values[*n]) == 0)
            s->keys[(*n)++] = cur;
        bpf_map_delete_elem(fd, &cur);
    }
    return EMBER_OK;
}

/* Moves every key and count of count map FD into the buffers and empties
** the map; *N gets the number of keys. The map holds at most count_cap. */
static int take_counts(em_sampler *s, int fd, uint32_t *n)
{
    LIBBPF_OPTS(bpf_map_batch_opts, bo);
    uint32_t token = 0, got;
    bool first = true;
    int err;

    *n = 0;
    if (s->no_batch)
        return take_counts_slow(s, fd, n);
    while ((got = s->count_cap - *n) > 0) {
        err = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &token,
                                              &token, s->keys + *n,
                                              s->values + *n, &got, &bo);
        err = err < 0 ? -errno : 0;
        if (err == 0 || err == -ENOENT)
            *n += got;
        if (err == -ENOENT)
            return EMBER_OK;                /* the map is empty now */
        if (err != 0 && first && (err == -EINVAL || err == -ENOTSUP ||
                                  err == -EOPNOTSUPP)) {
            s->no_batch = true;             /* an old kernel */
            return take_counts_slow(s, fd, n);
        }
        if (err != 0)
            return em_err(EMBER_EIO, "sampler: take counts: %s",
                          strerror(-err));
        first = false;
    }
    return EMBER_OK;
}

/* Adds stack ST under HASH (not 0) to the drained stacks. The stack map
** holds at most stack_entries, which the table has room for. */
static int stack_put(em_sampler *s, uint64_t hash,
                     const struct em_bpf_stack *st)
{
    uint32_t n = st->nframes < EM_SAMPLER_MAX_DEPTH ? (uint32_t)st->nframes
                                                    : EM_SAMPLER_MAX_DEPTH;
    uint64_t *pool;
    struct stack_slot *e;
    bool found;

    if ((e = stack_tab_insert(&s->stacks, hash, hash, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return EMBER_OK;
    if ((pool = em_grow(s->pool, &s->pool_cap, s->pool_n + n,
                        sizeof *pool)) == NULL)
        return em_err(EMBER_ENOMEM, "sampler: out of memory for %zu "
                      "stack frames", s->pool_n + n);
    s->pool = pool;
    memcpy(pool + s->pool_n, st->ip, n * sizeof *pool);
    *e = (struct stack_slot){ hash, (uint32_t)s->pool_n, n };
    s->pool_n += n;
    return EMBER_OK;
}

/* The drained stack HASH: its frames and count; NULL when not drained. */
static const uint64_t *stack_get(const em_sampler *s, uint64_t hash,
                                 uint32_t *n)
{
    const struct stack_slot *e = stack_tab_find(&s->stacks, hash, hash);

    *n = e != NULL ? e->n : 0;
    return e != NULL ? s->pool + e->off : NULL;
}

/* Moves the stacks of stack map FD into the table one at a time (kernels
** without batch operations), finding the next key before deleting. */
static int take_stacks_slow(em_sampler *s, int fd)
{
    uint64_t cur, next;
    int more = bpf_map_get_next_key(fd, NULL, &next) == 0, rc = EMBER_OK;

    while (more) {
        cur = next;
        more = bpf_map_get_next_key(fd, &cur, &next) == 0;
        if (rc == EMBER_OK && cur != 0 &&
            bpf_map_lookup_elem(fd, &cur, &s->batch_stacks[0]) == 0)
            rc = stack_put(s, cur, &s->batch_stacks[0]);
        bpf_map_delete_elem(fd, &cur);
    }
    return rc;
}

/* Moves every stack of stack map FD into the table (emptied first) and
** empties the map, STACK_BATCH stacks per system call. */
static int take_stacks(em_sampler *s, int fd)
{
    LIBBPF_OPTS(bpf_map_batch_opts, bo);
    uint32_t token = 0, got;
    bool first = true;
    int err, rc = EMBER_OK;

    stack_tab_clear(&s->stacks);
    s->pool_n = 0;
    if (s->no_batch)
        return take_stacks_slow(s, fd);
    for (;;) {
        got = STACK_BATCH;
        err = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &token,
                                              &token, s->batch_keys,
                                              s->batch_stacks, &got, &bo);
        err = err < 0 ? -errno : 0;
        if (err != 0 && err != -ENOENT)
            return em_err(EMBER_EIO, "sampler: take stacks: %s",
                          strerror(-err));
        for (uint32_t i = 0; i < got && rc == EMBER_OK; i++)
            if (s->batch_keys[i] != 0)
                rc = stack_put(s, s->batch_keys[i], &s->batch_stacks[i]);
        if (err == -ENOENT || rc != EMBER_OK)
            return rc;                      /* the map is empty now */
        first = false;
    }
}

/* Calls FN for the N keys in the buffers with their stacks from the
** table; stops at FN's first non-zero return. A stack the table does not
** hold (it cannot happen while the flip protocol holds) counts as lost. */
static int deliver(em_sampler *s, uint32_t n,
                   int (*fn)(void *ctx, const em_sample *smp), void *ctx)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct em_bpf_key *k = &s->keys[i];
        em_sample smp;
        int rc;

        memset(&smp, 0, sizeof smp);
        smp.tgid = k->tgid;
        smp.cgroup_id = k->cgroup_id;
        memcpy(smp.comm, k->comm, sizeof smp.comm);
        smp.comm[sizeof smp.comm - 1] = '\0';
        smp.count = s->values[i];
        if (k->flags & EM_BPF_USTACK_LOST)
            smp.flags |= EM_SAMPLE_USTACK_LOST;
        if (k->flags & EM_BPF_KSTACK_LOST)
            smp.flags |= EM_SAMPLE_KSTACK_LOST;
        if (k->ustack != 0 &&
            (smp.ustack = stack_get(s, k->ustack, &smp.nustack)) == NULL)
            smp.flags |= EM_SAMPLE_USTACK_LOST;
        if (k->kstack != 0 &&
            (smp.kstack = stack_get(s, k->kstack, &smp.nkstack)) == NULL)
            smp.flags |= EM_SAMPLE_KSTACK_LOST;
        if ((rc = fn(ctx, &smp)) != 0)
            return rc;
    }
    return EMBER_OK;
}

/* The process-event losses since the last drain. */
static int events_lost(em_sampler *s, uint64_t *lost)
{
    struct em_bpf_stats ev;
    int rc = take_stats(s, EM_BPF_STATS_EVENTS, &ev, false);

    *lost = 0;
    if (rc == EMBER_OK) {
        *lost = ev.events_lost - s->events_lost_seen;
        s->events_lost_seen = ev.events_lost;
    }
    return rc;
}

int em_sampler_drain(em_sampler *s,
                     int (*fn)(void *ctx, const em_sample *smp), void *ctx,
                     em_sampler_stats *st)
{
    uint64_t t0 = now_ns(), lost_events = 0;
    struct sampler *k = s->skel;
    struct em_bpf_stats sum = { 0 };
    uint32_t n = 0;
    unsigned old;
    int rc, rc2, stacks;

    old = flip(s);
    wait_inflight(s);
    /* Whatever fails, the old set is emptied: it becomes active again at
    ** the next flip and must not carry this window into that one. */
    rc = take_counts(s, bpf_map__fd(old ? k->maps.em_counts_1
                                        : k->maps.em_counts_0), &n);
    rc2 = take_stats(s, old, &sum, true);
    if (rc == EMBER_OK)
        rc = rc2;
    stacks = bpf_map__fd(old ? k->maps.em_stacks_1 : k->maps.em_stacks_0);
    rc2 = take_stacks(s, stacks);
    if (rc == EMBER_OK)
        rc = rc2;
    if (rc == EMBER_OK)
        rc = deliver(s, n, fn, ctx);
    s->skel->bss->fill[old] = (struct em_bpf_fill){ 0, 0 };
    rc2 = events_lost(s, &lost_events);
    if (rc == EMBER_OK)
        rc = rc2;
    if (st != NULL) {
        memset(st, 0, sizeof *st);
        st->samples = sum.samples;
        st->idle = sum.idle;
        st->lost = sum.lost;
        st->ustack_errors = sum.ustack_errors;
        st->kstack_errors = sum.kstack_errors;
        st->stacks_dropped = sum.stacks_dropped;
        st->events_lost = lost_events;
        st->drain_ns = now_ns() - t0;
    }
    return rc;
}
