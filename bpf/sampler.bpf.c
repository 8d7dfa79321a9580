// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
** bpf/sampler.bpf.c: the in-kernel half of the CPU sampler, compiled by
** clang -target bpf against the running kernel's vmlinux.h (CO-RE) and
** embedded in bpf/sampler.c through a bpftool skeleton.
**
** em_sample runs on every cpu-clock sample of every CPU: the idle task only
** bumps a per-CPU counter; any other task is counted in a hash map keyed by
** (tgid, user stack, kernel stack, cgroup id, comm). Each stack is copied
** by bpf_get_stack (frame pointers for user code, the kernel's own
** unwinder for kernel code) and interned in a HASH map under a 64-bit hash
** of its frames.
**
** Invariants:
** - Two map sets (counts and stacks 0 and 1); a sample writes only the set
**   named by active_set when it starts. User space flips active_set, waits
**   until no run that read the old value is in flight (cpu_seq), and only
**   then drains and empties the old set: draining never races a writer.
** - A stack never shows under another's name. The kernel's STACK_TRACE map
**   has one slot per bucket: a second stack hashing to a taken bucket is
**   refused (-EEXIST), which lost a third of the stacks of a compile load
**   at 999 Hz, or with BPF_F_REUSE_STACKID replaces the first under keys
**   that still name it (bcc commit 90f2086). A HASH map chains its
**   buckets, so stacks are lost only when it is full; a 64-bit hash shared
**   by two different stacks is caught by comparing the stored frame
**   count, leaf and root, and that sample loses its stack (counted).
** - Exec of a process, its first sample since then and the exit of its
**   last thread reach user space as (event, tgid) through a ring buffer
**   (tp_btf: no tracefs needed).
*/
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "bpf/sampler_int.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Only this tgid (0: every process); set before load. */
const volatile __u32 target_tgid = 0;

/* The map set samples go to, 0 or 1; written by user space (mmap'ed). */
volatile __u32 active_set = 0;

/* Per-CPU in-flight markers (sampler_int.h). */
struct em_bpf_cpu_seq cpu_seq[EM_BPF_MAX_CPUS];

/* New keys and stacks per map set, read and reset by user space. */
struct em_bpf_fill fill[2];

/* Sizes are the defaults; bpf/sampler.c sets them from its options. */
#define COUNT_MAP(name)                                                     \
    struct {                                                                \
        __uint(type, BPF_MAP_TYPE_HASH);                                    \
        __uint(max_entries, 16384);                                         \
        __type(key, struct em_bpf_key);                                     \
        __type(value, __u64);                                               \
    } name SEC(".maps")
#define STACK_MAP(name)                                                     \
    struct {                                                                \
        __uint(type, BPF_MAP_TYPE_HASH);                                    \
        __uint(max_entries, 16384);                                         \
        __type(key, __u64);                                                 \
        __type(value, struct em_bpf_stack);                                 \
    } name SEC(".maps")

COUNT_MAP(em_counts_0);
COUNT_MAP(em_counts_1);
STACK_MAP(em_stacks_0);
STACK_MAP(em_stacks_1);

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, EM_BPF_STATS_N);
    __type(key, __u32);
    __type(value, struct em_bpf_stats);
} em_stats SEC(".maps");

/* Where a sample's stack is copied before it is hashed (one per CPU: a
** perf_event program does not nest on its CPU). */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct em_bpf_stack);
} em_scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024);
} em_events SEC(".maps");

/* The hash of ST's frames: each frame mixed in, then murmur3's finalizer;
** never 0, which means no stack. */
static __always_inline __u64 stack_hash(const struct em_bpf_stack *st)
{
    __u64 h = 0x9e3779b97f4a7c15ull ^ st->nframes;

    for (int i = 0; i < EM_BPF_MAX_DEPTH; i++) {
        if (i >= st->nframes)
            break;
        h = (h ^ st->ip[i]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h != 0 ? h : 1;
}

/* Whether the stored stack OLD is ST: the same count, leaf and root. */
static __always_inline bool same_stack(const struct em_bpf_stack *old,
                                       const struct em_bpf_stack *st)
{
    __u64 last = st->nframes - 1;

    if (old->nframes != st->nframes || old->ip[0] != st->ip[0])
        return false;
    return last >= EM_BPF_MAX_DEPTH || old->ip[last] == st->ip[last];
}

/* Copies one stack of the current sample into ST and interns it in
** STACKS; returns its hash, or 0 when there is none (-EFAULT, or no
** frames) or it is lost, which sets LOST in *KFLAGS and is counted. */
static __always_inline __u64 intern_stack(void *ctx, void *stacks,
                                          __u64 flags,
                                          struct em_bpf_stack *st,
                                          struct em_bpf_stats *stats,
                                          __u64 *errors, __u32 *kflags,
                                          __u32 lost, struct em_bpf_fill *f)
{
    long len = bpf_get_stack(ctx, st->ip, sizeof st->ip, flags);
    struct em_bpf_stack *old;
    __u64 h;
    long err;

    if (len < 0) {
        if (len != -EM_BPF_EFAULT) {
            *errors += 1;
            *kflags |= lost;
        }
        return 0;
    }
    st->nframes = (__u64)len / sizeof st->ip[0];
    if (st->nframes == 0)
        return 0;
    h = stack_hash(st);
    old = bpf_map_lookup_elem(stacks, &h);
    if (old == NULL) {
        err = bpf_map_update_elem(stacks, &h, st, BPF_NOEXIST);
        if (err == 0) {
            __sync_fetch_and_add(&f->stacks, 1);
            return h;
        }
        if (err == -EM_BPF_EEXIST)      /* another CPU, the same moment */
            old = bpf_map_lookup_elem(stacks, &h);
    }
    if (old != NULL && same_stack(old, st))
        return h;
    stats->stacks_dropped += 1;         /* full, busy, or a collision */
    *kflags |= lost;
    return 0;
}

/* Adds one to KEY's count in COUNTS; false when the map is full. Two CPUs
** may insert the same new key at once: the loser (-EEXIST) adds to the
** winner's entry. */
static __always_inline bool count_key(void *counts, struct em_bpf_key *key,
                                      struct em_bpf_fill *f)
{
    __u64 one = 1, *val = bpf_map_lookup_elem(counts, key);

    if (val == NULL) {
        long err = bpf_map_update_elem(counts, key, &one, BPF_NOEXIST);
        if (err == 0) {
            __sync_fetch_and_add(&f->keys, 1);
            return true;
        }
        if (err == -EM_BPF_EEXIST)
            val = bpf_map_lookup_elem(counts, key);
        if (val == NULL)
            return false;
    }
    __sync_fetch_and_add(val, 1);
    return true;
}

/* Sends (EVENT, TGID) to user space; a full ring buffer is counted. */
static __always_inline void send_event(__u32 event, __u32 tgid)
{
    struct em_bpf_event *e;
    __u32 k = EM_BPF_STATS_EVENTS;

    if (target_tgid != 0 && tgid != target_tgid)
        return;
    e = bpf_ringbuf_reserve(&em_events, sizeof *e, 0);
    if (e == NULL) {
        struct em_bpf_stats *st = bpf_map_lookup_elem(&em_stats, &k);
        if (st != NULL)
            __sync_fetch_and_add(&st->events_lost, 1);
        return;
    }
    e->event = event;
    e->tgid = tgid;
    bpf_ringbuf_submit(e, 0);
}

/* Processes sampled since their exec (or the start): the first sample of
** each is sent to user space, which captures the process while it runs,
** so processes never sampled cost no capture beyond their exec. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 32768);
    __type(key, __u32);
    __type(value, __u8);
} em_seen SEC(".maps");

/* Whether user space wants process events (set before load). */
const volatile bool want_events = false;

#define EM_PF_EXITING 0x00000004   /* include/linux/sched.h */

/* Tells user space the first time TGID is sampled since its exec. A full
** em_seen sends nothing: user space then captures at the drain. A thread
** past exit_signals() is not announced: do_exit still runs, and may be
** sampled, after sched_process_exit has forgotten the process, and the
** process would be announced again after its exit. */
static __always_inline void first_sample(__u32 tgid)
{
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();
    __u8 one = 1;

    if (!want_events || bpf_map_lookup_elem(&em_seen, &tgid) != NULL)
        return;
    if (BPF_CORE_READ(t, flags) & EM_PF_EXITING)
        return;
    if (bpf_map_update_elem(&em_seen, &tgid, &one, BPF_NOEXIST) == 0)
        send_event(EM_BPF_PROC_SAMPLED, tgid);
}

/* Counts the current sample in map set SET (COUNTS, STACKS). */
static __always_inline void sample(void *ctx, __u32 set, void *counts,
                                   void *stacks)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = (__u32)(id >> 32);
    struct em_bpf_key key;
    struct em_bpf_stats *st = bpf_map_lookup_elem(&em_stats, &set);
    __u32 zero = 0;
    struct em_bpf_stack *scratch = bpf_map_lookup_elem(&em_scratch, &zero);
    struct em_bpf_fill *f = &fill[set & 1];

    if (st == NULL || scratch == NULL)
        return;
    if ((__u32)id == 0) {               /* the idle task: no stacks */
        st->idle += 1;
        return;
    }
    if (target_tgid != 0 && tgid != target_tgid)
        return;
    first_sample(tgid);
    __builtin_memset(&key, 0, sizeof key);
    key.tgid = tgid;
    key.cgroup_id = bpf_get_current_cgroup_id();
    bpf_get_current_comm(key.comm, sizeof key.comm);
    key.kstack = intern_stack(ctx, stacks, 0, scratch, st,
                              &st->kstack_errors, &key.flags,
                              EM_BPF_KSTACK_LOST, f);
    key.ustack = intern_stack(ctx, stacks, BPF_F_USER_STACK, scratch, st,
                              &st->ustack_errors, &key.flags,
                              EM_BPF_USTACK_LOST, f);
    if (count_key(counts, &key, f))
        st->samples += 1;
    else
        st->lost += 1;
}

SEC("perf_event")
int em_sample(struct bpf_perf_event_data *ctx)
{
    __u32 cpu = bpf_get_smp_processor_id();
    struct em_bpf_cpu_seq *seq = NULL;

    /* The locked add orders the marker before the read of active_set
    ** (x86: a full barrier), pairing with the flip's exchange in user
    ** space: either this run sees the new set or the drain sees it odd. */
    if (cpu < EM_BPF_MAX_CPUS) {
        seq = &cpu_seq[cpu];
        __sync_fetch_and_add(&seq->seq, 1);
    }
    if (active_set & 1)
        sample(ctx, 1, &em_counts_1, &em_stacks_1);
    else
        sample(ctx, 0, &em_counts_0, &em_stacks_0);
    if (seq != NULL)
        __sync_fetch_and_add(&seq->seq, 1);
    return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(em_proc_exec, struct task_struct *p)
{
    __u32 tgid = BPF_CORE_READ(p, tgid);

    bpf_map_delete_elem(&em_seen, &tgid);   /* a new image: tell again */
    send_event(EM_BPF_PROC_EXEC, tgid);
    return 0;
}

/* Only when the whole thread group is gone (signal->live dropped to 0
** before this tracepoint, on every kernel with tp_btf): a leader that
** exits before its threads does not end the process. Two threads dying
** together may both see 0; a repeated exit is harmless to the consumer. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(em_proc_exit, struct task_struct *p)
{
    __u32 tgid;

    if (BPF_CORE_READ(p, signal, live.counter) != 0)
        return 0;
    tgid = BPF_CORE_READ(p, tgid);
    bpf_map_delete_elem(&em_seen, &tgid);   /* the pid may be reused */
    send_event(EM_BPF_PROC_EXIT, tgid);
    return 0;
}
