/*
** bpf/agent.h: the continuous profiler: the eBPF sampler (bpf/sampler.h)
** drained every window, each key's stacks symbolized (ingest/symbolize.h)
** into a profile set, and the set written to the database as one profile
** per series (process) per window. `ember record` runs it for a duration,
** `ember agent` until a signal; both flush the last window before they
** return.
*/
#ifndef EM_BPF_AGENT_H
#define EM_BPF_AGENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "ingest/pset.h"
#include "bpf/sampler.h"

typedef struct em_agent_opts {
    size_t sz;                  /* sizeof(em_agent_opts) */
    em_sampler_opts sampler;    /* frequency, pid, map sizes */
    int64_t window_ms;          /* drain and write every; 0: 10 s */
    int64_t duration_ms;        /* stop after; 0: until *stop is set */
    const ember_label *labels;  /* -l k=v, added to every series */
    size_t nlabels;
    const char *node;           /* the node label; NULL: the hostname */
    bool verbose;               /* a line per window on stderr */
    /* Each window's set, self-metrics included, before it is written:
    ** `ember agent --push` sends it on. Its error ends the run. */
    int (*on_window)(void *ctx, const em_pset *set);
    void *window_ctx;
    /* NEXTRA (<= EM_AGENT_MAX_EXTRA) more self-metrics of the count type,
    ** named EXTRA_NAMES, whose window values extra_values writes. */
    const char *const *extra_names;
    size_t nextra;
    void (*extra_values)(void *ctx, uint64_t *values);
} em_agent_opts;

#define EM_AGENT_MAX_EXTRA 16

/* What a run did, summed over its windows. */
typedef struct em_agent_report {
    uint64_t windows, profiles, samples, idle, lost;
    uint64_t stack_errors, stacks_dropped, unresolved_frames;
    uint64_t processes;         /* distinct processes seen */
    double cpu_seconds;         /* of this process, user + system */
} em_agent_report;

/* Runs the agent on DB (NULL: none, the windows go to on_window only)
** until the duration passes, *STOP becomes non-zero
** (a signal handler sets it) or the one process sampled (sampler.pid)
** exits, writing one window's profiles per drain.
** Fails before writing anything when the machine cannot sample
** (em_sampler_check's message). REP (may be NULL) gets the totals. */
int em_agent_run(ember_db *db, const em_agent_opts *opts,
                 volatile sig_atomic_t *stop, em_agent_report *rep);

#endif /* EM_BPF_AGENT_H */
