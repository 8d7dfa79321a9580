/*
** bench/gen.h: a deterministic generator of realistic profiles, shared by
** the benchmarks and the demo data (bench/make_demo.c).
**
** Shape of what it makes (everything derives from cfg.seed through its own
** PRNG, so a seed always gives the same bytes on every machine):
** - Programs: call graphs of thousands of functions with realistic names
**   (Go "net/http.(*conn).serve", app "github.com/acme/cart/store.(*Repo)
**   .Load", libc and kernel C names), in tiers entry -> framework -> app ->
**   library -> runtime -> kernel. Each program draws a pool of stacks (depth
**   8..64, leaf first) by walking its graph, so stacks share prefixes the way
**   real programs do; heap stacks end in the allocator.
** - Targets: pods with labels (service, namespace, pod, node, region, zone,
**   version, container). Each target yields one series per profile type:
**   process_cpu samples and cpu nanoseconds (one CPU profile), memory
**   alloc_space and inuse_space (one heap profile).
** - Profiles: one per series every step_ms. A profile is the result of
**   sampling its program's pool with Zipf-distributed popularity until it
**   holds ~min_stacks..max_stacks distinct stacks: hot stacks get large
**   counts, most get 1 or 2 (heavy-tailed, as real profiles).
**
** Ids: samples carry the generator's pool index of their stack unless
** gen_intern_stacks (or gen_set_stack_ids) installed a map to engine ids.
*/
#ifndef BENCH_GEN_H
#define BENCH_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ember.h"

/* The generator's output version: raised with every change to what a
** seed makes, since benchmarks cache databases built from it by this. */
#define GEN_VERSION 2

/* Profile types, as bits of gen_config.types and indexes into gen_type. */
enum {
    GEN_CPU_SAMPLES = 0,    /* process_cpu:samples:count:cpu:nanoseconds:delta */
    GEN_CPU_NANOS = 1,      /* process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta */
    GEN_ALLOC_SPACE = 2,    /* memory:alloc_space:bytes:space:bytes */
    GEN_INUSE_SPACE = 3,    /* memory:inuse_space:bytes:space:bytes */
    GEN_NTYPES = 4
};
#define GEN_ALL_TYPES 0xfu

typedef struct gen_config {
    uint64_t seed;              /* 0 is a fine seed too */
    uint32_t ntargets;          /* pods; series = ntargets * types; 0: 50 */
    unsigned types;             /* bit (1u << GEN_*) per type; 0: all four */
    uint32_t nservices;         /* distinct service label values; 0: 8 */
    uint32_t nprograms;         /* distinct call graphs; 0: min(nservices, 8) */
    uint32_t nlong;             /* targets living the whole span_ms; the
                                ** others only the last short_ms; 0 with
                                ** short_ms 0: every target spans span_ms */
    int64_t end_ms;             /* time of the last step; 0: 2024-06-01 */
    int64_t span_ms;            /* long targets' span; 0: one step */
    int64_t short_ms;           /* other targets' span; 0: span_ms */
    int64_t step_ms;            /* 0: 10000 */
    uint32_t min_stacks;        /* distinct stacks per profile; 0: 100 */
    uint32_t max_stacks;        /* 0: 500 */
    uint32_t pool_stacks;       /* CPU stacks per program; 0: 3000 (heap
                                ** stacks are a third of that more) */
    uint32_t app_functions;     /* app functions per program; 0: 450 */
    /* Demo "regression": from shift_ms on, samples of service shift_service
    ** whose stack passes through shift_function are multiplied by 4. */
    int64_t shift_ms;           /* 0: none */
    uint32_t shift_service;
} gen_config;

typedef struct gen gen;

/* Profile type strings, indexed by GEN_*. */
extern const char *const gen_type[GEN_NTYPES];

/* Builds the generator (names, graphs, stack pools, series). Out of memory
** ends the process (a benchmark tool). */
gen *gen_new(const gen_config *cfg);
void gen_free(gen *g);                          /* NULL: no-op */

/* Counts. */
size_t gen_nseries(const gen *g);
size_t gen_nstacks(const gen *g);               /* pool size, all programs */
size_t gen_nlocations(const gen *g);
size_t gen_nfunctions(const gen *g);
/* Steps (time points) from the first profile of a long target to the end. */
size_t gen_nsteps(const gen *g);
/* Profiles and samples gen_next_profile will yield in all (computed by
** running the generator once; slow for big configs). Rewinds G. */
void gen_count(gen *g, uint64_t *nprofiles, uint64_t *nsamples);

/* Series I: its type index (GEN_*), labels (sorted by name; pointers live
** as long as G) and service index. */
int gen_series_type(const gen *g, size_t i);
const ember_label *gen_series_labels(const gen *g, size_t i, size_t *n);
const char *gen_series_label(const gen *g, size_t i, const char *name);
uint32_t gen_series_service(const gen *g, size_t i);
const char *gen_service_name(const gen *g, uint32_t s);
/* The function whose stacks the demo regression boosts. */
const char *gen_shift_function(const gen *g);

/* Symbols of the pool, for loaders other than Ember (the SQLite baseline).
** Stacks are location indexes, leaf first; a location has one line. */
const char *gen_function_name(const gen *g, uint32_t f);
const char *gen_function_file(const gen *g, uint32_t f);
int64_t gen_function_line(const gen *g, uint32_t f);
uint32_t gen_function_mapping(const gen *g, uint32_t f);
void gen_location(const gen *g, uint32_t l, uint32_t *function, int64_t *line,
                  uint64_t *address, uint32_t *mapping);
size_t gen_nmappings(const gen *g);
const char *gen_mapping_file(const gen *g, uint32_t m);
void gen_mapping_info(const gen *g, uint32_t m, uint64_t *start, uint64_t *limit,
                      const char **build_id);
const uint32_t *gen_stack(const gen *g, uint32_t s, size_t *n);

/* Iteration, time-major: every series alive at step 0, then step 1, ...
** Fills *OUT (sz, type, labels, time, duration, period, samples) and
** returns true, or false at the end. OUT's pointers live until the next
** call or gen_rewind. Samples are sorted by stack. */
bool gen_next_profile(gen *g, ember_profile *out);
/* The series index of the profile gen_next_profile gave last. */
size_t gen_profile_series(const gen *g);
void gen_rewind(gen *g);

/* Stack ids written into samples: MAP[pool index] (NULL: the pool index
** itself). G keeps the pointer; it must outlive the iteration. */
void gen_set_stack_ids(gen *g, const uint32_t *map);

/* Interns the whole pool (mappings, functions, locations, stacks) into DB,
** BATCH stacks per write transaction (0: 1000), and installs the resulting
** ids with gen_set_stack_ids. Returns an EMBER_* code. */
int gen_intern_stacks(gen *g, ember_db *db, size_t batch);
const uint32_t *gen_stack_ids(const gen *g);    /* NULL before interning */

/* Per-profile interning, as an ingest pipeline without an id cache does
** it (a pprof file brings its own function and location tables): interns
** pool stack S with its locations, functions and mappings inside TXN and
** sets *ID. Symbols are interned once per "profile": call
** gen_intern_reset before each profile. */
int gen_intern_one(gen *g, ember_txn *txn, uint32_t s, uint32_t *id);
void gen_intern_reset(gen *g);

/* Writes P (whose samples carry pool indexes) as collapsed text: one line
** "root;...;leaf value" per sample. Returns 0 or -1 with errno. */
int gen_write_collapsed(const gen *g, const ember_profile *p, FILE *f);

/* The PRNG (xoshiro256**, seeded by splitmix64), for the benchmarks. */
typedef struct gen_rng {
    uint64_t s[4];
} gen_rng;
void gen_rng_seed(gen_rng *r, uint64_t seed);
uint64_t gen_rng_next(gen_rng *r);
uint64_t gen_rng_below(gen_rng *r, uint64_t n);     /* uniform in [0, n) */
double gen_rng_unit(gen_rng *r);                    /* uniform in [0, 1) */

#endif /* BENCH_GEN_H */
