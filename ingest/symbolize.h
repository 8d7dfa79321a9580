/*
** ingest/symbolize.h: addresses to symbols, for the eBPF sampler and any
** other source of raw stacks. Kernel addresses go through /proc/kallsyms
** (sorted once, binary-searched). User addresses go through the process's
** mappings, captured at exec or first sight from /proc/PID/maps with each
** executable file held open through /proc/PID/map_files (so processes that
** exit before the drain, and binaries deleted after they started, still
** symbolize), then to (build id, ELF virtual address), then to functions,
** files, lines and inlined frames with libdw, cached per build id.
**
** Results go into an em_pset (ingest/pset.h) as locations: a location keeps
** its mapping (file, build id; the address is the ELF virtual address, so
** it can be symbolized again later) and its lines, innermost inline frame
** first. Frames that cannot be resolved stay as addresses with their
** mapping, never dropped.
**
** Not thread-safe: one symbolizer per thread.
*/
#ifndef EM_SYMBOLIZE_H
#define EM_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest/pset.h"

typedef struct em_symbolizer em_symbolizer;

/* Self-metrics, cumulative. */
typedef struct em_symb_stats {
    uint64_t hits, misses;      /* address cache per build id */
    uint64_t unresolved;        /* frames kept as bare addresses */
    uint64_t processes;         /* tracked now */
    uint64_t files;             /* ELF files open now */
} em_symb_stats;

int em_symbolizer_new(em_symbolizer **out);
void em_symbolizer_free(em_symbolizer *s);      /* NULL: no-op */

/* Captures PID's mappings, executable name and cgroup now (at exec, or on
** its first sample), holding its executable files open. Calling it again
** for a known pid refreshes it (a new exec). ENOTFOUND when the process is
** gone. */
int em_symbolizer_track(em_symbolizer *s, uint32_t pid);
/* Marks PID as exited: its capture is kept until em_symbolizer_sweep. */
void em_symbolizer_exited(em_symbolizer *s, uint32_t pid);
/* Drops the captures of processes marked exited before the previous sweep
** (so a process that exits during a window still symbolizes at its drain). */
void em_symbolizer_sweep(em_symbolizer *s);

/* What a tracked process was: pointers valid until it is swept or
** retracked. NULL fields when unknown. */
typedef struct em_proc_info {
    const char *exe;            /* path of /proc/PID/exe at capture */
    const char *build_id;       /* hex build id of the executable, or the
                                ** file identity when it has none */
    const char *cgroup;         /* cgroup v2 path */
    const char *container_id;   /* from the cgroup path, or NULL */
} em_proc_info;
int em_symbolizer_proc(em_symbolizer *s, uint32_t pid, em_proc_info *out);

/* Adds to SET one location per frame of PID's user stack ADDRS[0..N) (leaf
** first, return addresses: every frame but the leaf is looked up at
** address - 1) and writes their set indexes to LOCS (N of them; inlined
** frames live inside a location). Tracks PID first when unknown. */
int em_symbolize_user(em_symbolizer *s, em_pset *set, uint32_t pid,
                      const uint64_t *addrs, size_t n, uint32_t *locs);
/* The same for kernel addresses, through kallsyms. */
int em_symbolize_kernel(em_symbolizer *s, em_pset *set, const uint64_t *addrs,
                        size_t n, uint32_t *locs);

void em_symbolizer_stats(const em_symbolizer *s, em_symb_stats *out);

/* True when kernel frames stay as addresses: /proc/kallsyms cannot be read,
** or kptr_restrict hides its addresses (reads kallsyms at the first call). */
bool em_symbolizer_kernel_hidden(em_symbolizer *s);

#endif /* EM_SYMBOLIZE_H */
