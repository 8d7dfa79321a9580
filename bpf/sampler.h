/*
** bpf/sampler.h: the eBPF CPU sampler (bpf/sampler.c loads
** bpf/sampler.bpf.c through its bpftool skeleton). One cpu-clock perf event
** per online CPU in frequency mode runs a BPF program that counts samples
** in the kernel per (tgid, user stack, kernel stack, cgroup id, comm); user
** space drains the counts every window from the map set the program is not
** writing (two alternating sets, flipped by an index in .bss), so draining
** never races the writers. Exec and exit of processes reach user space
** through a ring buffer, so a process's mappings can be captured at exec
** and kept until the window after its exit (ingest/symbolize.h).
**
** Requirements, checked by em_sampler_check with one clear message each:
** root (CAP_BPF and CAP_PERFMON), BTF at /sys/kernel/btf/vmlinux, and
** perf_event_open of the software cpu-clock.
*/
#ifndef EM_BPF_SAMPLER_H
#define EM_BPF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define EM_SAMPLER_MAX_DEPTH 127    /* frames per stack, as perf's default */

typedef struct em_sampler em_sampler;

typedef struct em_sampler_opts {
    size_t sz;                  /* sizeof(em_sampler_opts) */
    unsigned frequency;         /* Hz per CPU; 0: 19 */
    int pid;                    /* only this process (tgid); 0: all */
    unsigned stack_entries;     /* stack map entries per set; 0: 16384 */
    unsigned count_entries;     /* count map entries per set; 0: 16384 */
} em_sampler_opts;

/* One aggregated key of a window: COUNT samples of process TGID (COMM,
** cgroup CGROUP_ID) with this user and kernel stack (leaf first, return
** addresses as the kernel reports them; NKSTACK 0: a user-mode sample or
** no kernel stack, NUSTACK 0: a kernel thread or no user stack). */
typedef struct em_sample {
    uint32_t tgid;
    uint64_t cgroup_id;
    char comm[16];
    const uint64_t *ustack;
    uint32_t nustack;
    const uint64_t *kstack;
    uint32_t nkstack;
    uint64_t count;
    uint32_t flags;             /* EM_SAMPLE_*_LOST */
} em_sample;

/* em_sample.flags: a stack of the key was lost to a full stack map or an
** error (counted in the window's stats); its frames are then empty, which
** is not "no such stack". */
enum { EM_SAMPLE_USTACK_LOST = 1u << 0, EM_SAMPLE_KSTACK_LOST = 1u << 1 };

/* Self-metrics of one window, summed over CPUs. */
typedef struct em_sampler_stats {
    uint64_t samples;           /* samples counted in keys */
    uint64_t idle;              /* samples of the idle task (pid 0) */
    uint64_t lost;              /* samples dropped: a full counts map */
    uint64_t ustack_errors;     /* bpf_get_stack failures but -EFAULT */
    uint64_t kstack_errors;
    uint64_t stacks_dropped;    /* stacks a full stack map refused */
    uint64_t events_lost;       /* exec/exit events the ring buffer dropped */
    uint64_t drain_ns;          /* time em_sampler_drain took */
} em_sampler_stats;

/* A process event from the ring buffer: an exec, the exit of the last
** thread, the first sample since the exec (or since the start). */
enum { EM_PROC_EXEC = 1, EM_PROC_EXIT = 2, EM_PROC_SAMPLED = 3 };
typedef void (*em_proc_fn)(void *ctx, int event, uint32_t tgid);

/* EMBER_OK when this machine can run the sampler; otherwise EMBER_EINVAL
** (or EIO) with one line saying what is missing and how to get it, e.g.
** "eBPF sampling needs root (CAP_BPF, CAP_PERFMON): run ember record as
** root". Touches nothing. */
int em_sampler_check(void);

/* Loads and attaches the sampler. PROC (may be NULL) gets exec and exit
** events during em_sampler_poll. On failure nothing stays loaded. */
int em_sampler_open(const em_sampler_opts *opts, em_proc_fn proc, void *ctx,
                    em_sampler **out);
/* Waits up to TIMEOUT_MS for process events and delivers them. */
int em_sampler_poll(em_sampler *s, int timeout_ms);
/* Flips the map sets, waits for in-flight samples of the old set, then
** calls FN once per key of the old set (stacks valid during the call only)
** and empties it. *ST (may be NULL) gets the window's self-metrics. A
** non-zero return of FN stops the drain and is returned. */
int em_sampler_drain(em_sampler *s,
                     int (*fn)(void *ctx, const em_sample *smp), void *ctx,
                     em_sampler_stats *st);
/* How full the map set being written is: its new keys or new stacks over
** its map's entries, whichever is higher (0 after a drain, 1 when full).
** A caller that drains when it passes 0.5 never loses samples to a full
** map unless one burst fills the other half. */
double em_sampler_fill(const em_sampler *s);
/* How often to check em_sampler_fill: the time in which every CPU's
** samples could fill an eighth of the smaller map (each sample may add a
** key and two stacks), between 10 and 500 ms. */
int em_sampler_fill_interval_ms(const em_sampler *s);
/* The sampling period in ns (1e9 / frequency). */
uint64_t em_sampler_period_ns(const em_sampler *s);
/* Detaches and unloads everything: no program, map, link or perf event is
** left behind. NULL: no-op. */
void em_sampler_close(em_sampler *s);

#endif /* EM_BPF_SAMPLER_H */
