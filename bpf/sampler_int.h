/*
** bpf/sampler_int.h: the layouts bpf/sampler.bpf.c (in the kernel) and
** bpf/sampler.c (its loader) share: the count map's key, the per-CPU
** statistics, the process events of the ring buffer and the in-flight
** markers. Included after vmlinux.h on the BPF side and after
** <linux/types.h> in user space, so it uses the kernel's __u32 names and
** includes nothing itself. Keys are hashed as bytes: every padding byte is
** named and zeroed.
*/
#ifndef EM_BPF_SAMPLER_INT_H
#define EM_BPF_SAMPLER_INT_H

#define EM_BPF_MAX_DEPTH 127        /* = EM_SAMPLER_MAX_DEPTH */
#define EM_BPF_MAX_CPUS 1024        /* CPUs with an in-flight marker */
#define EM_BPF_EFAULT 14            /* errno values the program tells apart */
#define EM_BPF_EEXIST 17

/* A key of the count maps (value: __u64 samples). A stack is named by the
** 64-bit hash of its frames under which the stack map holds it; 0 means
** no such stack (a user-mode sample has no kernel stack, a kernel thread
** no user stack) or a lost one, which FLAGS tells apart. */
struct em_bpf_key {
    __u32 tgid;
    __u32 flags;                    /* EM_BPF_*STACK_LOST */
    __u64 ustack;                   /* hash, 0: none */
    __u64 kstack;
    __u64 cgroup_id;                /* bpf_get_current_cgroup_id (v2) */
    char comm[16];
};
enum { EM_BPF_USTACK_LOST = 1u << 0, EM_BPF_KSTACK_LOST = 1u << 1 };

/* A value of the stack maps: the frames, leaf first, and how many. Keys
** are stack hashes; a key already present whose frames differ in count,
** leaf or root is a hash collision and loses the stack, never another's. */
struct em_bpf_stack {
    __u64 nframes;
    __u64 ip[EM_BPF_MAX_DEPTH];
};

/* Per-CPU counters (a PERCPU_ARRAY): entries EM_BPF_STATS_SET0/1 belong to
** the map set of that index and are read and zeroed with it; the events
** entry only grows, user space reports its differences. */
struct em_bpf_stats {
    __u64 samples;                  /* counted in a key */
    __u64 idle;                     /* the idle task (pid 0) */
    __u64 lost;                     /* the count map was full */
    __u64 ustack_errors;            /* bpf_get_stack < 0 but -EFAULT */
    __u64 kstack_errors;
    __u64 stacks_dropped;           /* a full stack map, or a hash collision */
    __u64 events_lost;              /* ring buffer full (events entry only) */
};
enum { EM_BPF_STATS_SET0 = 0, EM_BPF_STATS_SET1 = 1, EM_BPF_STATS_EVENTS = 2,
       EM_BPF_STATS_N = 3 };

/* A ring buffer record; the event values equal EM_PROC_EXEC,
** EM_PROC_EXIT and EM_PROC_SAMPLED of bpf/sampler.h (checked there). */
enum { EM_BPF_PROC_EXEC = 1, EM_BPF_PROC_EXIT = 2, EM_BPF_PROC_SAMPLED = 3 };
struct em_bpf_event {
    __u32 event;
    __u32 tgid;
};

/* How many keys and stacks one map set has taken since it was drained,
** in .bss, so user space can drain early before a map fills. */
struct em_bpf_fill {
    __u64 keys;
    __u64 stacks;
};

/* One CPU's in-flight marker in .bss, a cache line each: the sample
** program adds 1 before it reads the active set and 1 when it is done, so
** an odd value means a run that may still write the set it read. */
struct em_bpf_cpu_seq {
    __u64 seq;
    __u64 pad[7];
};

#endif /* EM_BPF_SAMPLER_INT_H */
