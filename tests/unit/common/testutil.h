/*
** tests/unit/common/testutil.h: helpers shared by the engine tests: scratch
** database directories, a tiny symbol set, profile builders.
*/
#ifndef EM_TESTUTIL_H
#define EM_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include "ember.h"
#include "ingest/pset.h"

/* A fresh empty directory under /tmp; free with tu_rmdir. */
char *tu_tmpdir(const char *tag);
void tu_rmdir(char *dir);

/* Opens DIR with defaults (or a small map when SMALL), asserting success. */
ember_db *tu_open(const char *dir, int small);

/* Interns a stack of N frames named by NAMES (leaf first); returns its id. */
uint32_t tu_stack(ember_db *db, const char *const *names, size_t n);

/* The same inside transaction T (EMBER_OK, or the failing call's code):
** ids a compaction may renumber are safe only inside one transaction. */
int tu_txn_stack(ember_txn *t, const char *const *names, size_t n,
                 uint32_t *id);
int tu_txn_synthetic_stack(ember_txn *t, uint32_t k, uint32_t *id);

/* A stack named "f<a>;f<b>;..." style: interns stack number K of a family
** of synthetic stacks (depth 3..10) and returns its id. */
uint32_t tu_synthetic_stack(ember_db *db, uint32_t k);

/* Builds a profile in static storage valid until the next call. */
ember_profile tu_profile(const char *type, const ember_label *labels,
                         size_t nlabels, int64_t time_ms,
                         const ember_sample *samples, size_t n);

/* Counts problems reported by ember_verify (prints them). */
uint64_t tu_verify(ember_db *db);

/* Reads PATH whole into a malloc'd, NUL-terminated buffer of *LEN bytes;
** NULL if it cannot. */
char *tu_read_file(const char *path, size_t *len);

/* Writes one line per profile of S: "P<i> TYPE {k=v,...} t=T d=D p=P". */
void tu_pset_dump_profiles(FILE *f, const em_pset *s);

/* Output captured in memory (open_memstream): render into o->f, then
** tu_out_close and read o->text (free it). */
typedef struct tu_out {
    char *text;
    size_t len;
    FILE *f;
} tu_out;

void tu_out_open(tu_out *o);
void tu_out_close(tu_out *o);

/* A pprof (not gzip'd) of NSAMPLES samples, each a stack of DEPTH (1..64)
** locations drawn from NLOCS (one function each) by a generator seeded
** with SEED, and two values (samples/count, cpu/nanoseconds); written
** straight in the wire format. malloc'd; *LEN gets its size. */
uint8_t *tu_pprof_synth(uint64_t nsamples, uint32_t nlocs, uint32_t depth,
                        uint64_t seed, size_t *len);

/* Runs TEXT on DB (options O, may be NULL) with its i-th allocation
** failing, for i = 1, 2, ... until it succeeds: each failure must be
** EMBER_ENOMEM with no result, and the query must make more than ten
** allocations (the check reaches something). */
void tu_query_fail_each(ember_db *db, const char *text,
                        const ember_query_opts *o);

#endif
