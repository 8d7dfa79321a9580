// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
** bpf/sampler.bpf.c: the in-kernel half of the CPU sampler, compiled by
** clang -target bpf against the running kernel's vmlinux.h (CO-RE) and
** embedded in bpf/sampler.c through a bpftool skeleton.
**
** em_sample runs on every cpu-clock sample of every CPU: the idle task only
** bumps a per-CPU counter; any other task is counted in a hash map keyed by
** (tgid, user stack id, kernel stack id, cgroup id, comm), the stacks
** interned in a STACK_TRACE map by bpf_get_stackid (frame pointers for
** user code, the kernel's own unwinder for kernel code).
**
** Invariants:
** - Two map sets (counts and stacks 0 and 1); a sample writes only the set
**   named by active_set when it starts. User space flips active_set, waits
**   until no run that read the old value is in flight (cpu_seq), and only
**   then drains and empties the old set: draining never races a writer.
** - BPF_F_REUSE_STACKID is never used: with it a colliding stack silently
**   replaces the one an existing key points at, and that key's samples
**   would be shown under another stack (bcc commit 90f2086). A collision
**   is counted and the key keeps -EEXIST for that stack instead; the map
**   is emptied every drain, so collisions stay rare.
** - Exec of a process and exit of its last thread reach user space as
**   (event, tgid) through a ring buffer (tp_btf: no tracefs needed).
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
        __uint(type, BPF_MAP_TYPE_STACK_TRACE);                             \
        __uint(max_entries, 16384);                                         \
        __uint(key_size, sizeof(__u32));                                    \
        __uint(value_size, EM_BPF_MAX_DEPTH * sizeof(__u64));               \
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

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024);
} em_events SEC(".maps");

/* Interns one stack of the current sample; returns its id, or the negated
** errno, counted unless it only says there is no such stack (-EFAULT). */
static __always_inline __s32 stack_id(void *ctx, void *stacks, __u64 flags,
                                      __u64 *errors, __u64 *collisions)
{
    long id = bpf_get_stackid(ctx, stacks, flags);

    if (id >= 0 || id == -EM_BPF_EFAULT)
        return (__s32)id;
    if (id == -EM_BPF_EEXIST)
        *collisions += 1;
    else
        *errors += 1;
    return (__s32)id;
}

/* Adds one to KEY's count in COUNTS; false when the map is full. Two CPUs
** may insert the same new key at once: the loser (-EEXIST) adds to the
** winner's entry. */
static __always_inline bool count_key(void *counts, struct em_bpf_key *key)
{
    __u64 one = 1, *val = bpf_map_lookup_elem(counts, key);

    if (val == NULL) {
        long err = bpf_map_update_elem(counts, key, &one, BPF_NOEXIST);
        if (err == 0)
            return true;
        if (err == -EM_BPF_EEXIST)
            val = bpf_map_lookup_elem(counts, key);
        if (val == NULL)
            return false;
    }
    __sync_fetch_and_add(val, 1);
    return true;
}

/* Counts the current sample in map set SET (COUNTS, STACKS). */
static __always_inline void sample(void *ctx, __u32 set, void *counts,
                                   void *stacks)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = (__u32)(id >> 32);
    struct em_bpf_key key;
    struct em_bpf_stats *st = bpf_map_lookup_elem(&em_stats, &set);

    if (st == NULL)
        return;
    if ((__u32)id == 0) {               /* the idle task: no stacks */
        st->idle += 1;
        return;
    }
    if (target_tgid != 0 && tgid != target_tgid)
        return;
    __builtin_memset(&key, 0, sizeof key);
    key.tgid = tgid;
    key.cgroup_id = bpf_get_current_cgroup_id();
    bpf_get_current_comm(key.comm, sizeof key.comm);
    key.kstack_id = stack_id(ctx, stacks, 0, &st->kstack_errors,
                             &st->collisions);
    key.ustack_id = stack_id(ctx, stacks, BPF_F_USER_STACK,
                             &st->ustack_errors, &st->collisions);
    if (count_key(counts, &key))
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

SEC("tp_btf/sched_process_exec")
int BPF_PROG(em_proc_exec, struct task_struct *p)
{
    send_event(EM_BPF_PROC_EXEC, BPF_CORE_READ(p, tgid));
    return 0;
}

/* Only when the whole thread group is gone (signal->live dropped to 0
** before this tracepoint, on every kernel with tp_btf): a leader that
** exits before its threads does not end the process. Two threads dying
** together may both see 0; a repeated exit is harmless to the consumer. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(em_proc_exit, struct task_struct *p)
{
    if (BPF_CORE_READ(p, signal, live.counter) != 0)
        return 0;
    send_event(EM_BPF_PROC_EXIT, BPF_CORE_READ(p, tgid));
    return 0;
}
