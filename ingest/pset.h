/*
** ingest/pset.h: a profile set, what a decoder makes of one input file before
** anything touches the database: symbols (mappings, functions, locations),
** deduplicated stacks and one or more profiles whose samples point at them.
**
** Why a set first: a file is decoded and checked completely in memory, so a
** malformed file never takes the writer lock and writes nothing, and a
** writer can put several good files into one transaction (one fsync) while
** each file stays all-or-nothing: everything the engine would refuse
** (types, label names and values) is refused here, at decode time.
**
** Every add deduplicates by content, so a decoder may add the same function
** or location once per frame it reads and still get one entry. Indexes are
** dense from 0 in order of first add. Strings are copied into the set.
*/
#ifndef EM_PSET_H
#define EM_PSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "engine/engine.h"

/* Limits a decoder hits as EMBER_ELIMIT, so hostile input cannot make a set
** of unbounded size from a small file. */
#define EM_PSET_MAX_DEPTH 4096u         /* locations per stack */
#define EM_PSET_MAX_LINES 256u          /* inline frames per location */
#define EM_PSET_MAX_LABELS 64u          /* labels per profile */

/* One inline frame of a location: a function index of the set. */
typedef struct em_pset_line {
    uint32_t function;
    int64_t line;
} em_pset_line;

/* A location: MAPPING is a mapping index of the set PLUS ONE (0: the
** unknown mapping); its lines are lines[first .. first+nlines), innermost
** first. */
typedef struct em_pset_loc {
    uint32_t mapping;
    uint64_t address;
    size_t first, nlines;
    uint64_t hash;
} em_pset_loc;

/* A stack: pool[off .. off+n) location indexes of the set, LEAF FIRST.
** (Its hash is kept in the index only: 16 bytes, not 24, per stack.) */
typedef struct em_pset_stack_ent {
    size_t off;
    uint32_t n;
} em_pset_stack_ent;

/* One sample: a stack index of the set and a value, for profile PROFILE. */
typedef struct em_pset_sample_ent {
    uint32_t profile;
    uint32_t stack;
    int64_t value;
} em_pset_sample_ent;

/* One profile to append; type and labels are copies owned by the set, the
** labels sorted by name and checked as the engine checks them. */
typedef struct em_pset_profile {
    const char *type;
    ember_label *labels;
    size_t nlabels;
    int64_t time_ms, duration_ns, period;
    uint64_t nsamples;          /* samples added for it */
    int64_t pos, neg;           /* its positive and negative values summed:
                                ** each within int64 (em_pset_sample) */
} em_pset_profile;

/* A slot of the index a decoder keeps over an array of its own: an entry's
** hash and its index plus one (0: free). The tables are engine/htab.h's,
** instantiated through ingest/hindex.h; a zeroed one is empty. */
struct em_hslot {
    uint64_t hash;
    uint32_t idx1;
};
typedef EM_HTAB_TYPE(struct em_hslot) em_hindex;

typedef struct em_pset_block em_pset_block;

/* Zero-initialize ({0}) before use; em_pset_free releases it. */
typedef struct em_pset {
    em_pset_block *blocks;      /* arena of copied strings and label arrays */
    ember_mapping *mappings;
    size_t nmappings, cap_mappings;
    em_hindex mapping_index;
    ember_function *functions;
    size_t nfunctions, cap_functions;
    em_hindex function_index;
    em_pset_line *lines;
    size_t nlines, cap_lines;
    em_pset_loc *locs;
    size_t nlocs, cap_locs;
    em_hindex loc_index;
    uint32_t *pool;
    size_t npool, cap_pool;
    em_pset_stack_ent *stacks;
    size_t nstacks, cap_stacks;
    em_hindex stack_index;
    size_t max_depth;           /* most locations in one stack */
    em_pset_sample_ent *samples;
    size_t nsamples, cap_samples;
    em_pset_profile *profiles;
    size_t nprofiles, cap_profiles;
    uint64_t bytes_in;          /* input bytes decoded (after gunzip) */
    bool trimmed;               /* em_pset_trim ran: no more adds */
    bool joined;                /* em_labels_join made the profiles' labels:
                                ** those not named in base came from the
                                ** files, and em_pset_write notes them */
    const char **base;          /* the import's own label names (arena) */
    size_t nbase, cap_base;
} em_pset;

/* Each add returns EMBER_OK with *idx set, EMBER_ENOMEM, or EMBER_ELIMIT.
** NULL strings in M and F are taken as "". */
int em_pset_mapping(em_pset *s, const ember_mapping *m, uint32_t *idx);
int em_pset_function(em_pset *s, const ember_function *f, uint32_t *idx);
/* The same with the caller's hash H of F, for decoders that can hash
** something cheaper than the strings (pprof: their string-table indexes).
** Equal content under different hashes is kept twice, which only costs a
** second intern at write time; one set must not mix hash schemes. */
int em_pset_function_hashed(em_pset *s, const ember_function *f, uint64_t h,
                            uint32_t *idx);
/* MAPPING: mapping index plus one, or 0. LINES: N (<= EM_PSET_MAX_LINES)
** inline frames, innermost first, with function indexes of the set. */
int em_pset_location(em_pset *s, uint32_t mapping, uint64_t address,
                     const em_pset_line *lines, size_t n, uint32_t *idx);
/* LOCS: N (<= EM_PSET_MAX_DEPTH) location indexes, leaf first. */
int em_pset_stack(em_pset *s, const uint32_t *locs, size_t n, uint32_t *idx);

/* Adds a profile of TYPE with N labels (copied; checked as the engine
** would: a bad type, label name or value is EMBER_EINVAL/ELIMIT naming it;
** a repeated name is EINVAL). Profiles are not deduplicated: a decoder
** looks up its own (see em_pset_profile_find). */
int em_pset_profile_add(em_pset *s, const char *type,
                        const ember_label *labels, size_t n, int64_t time_ms,
                        int64_t duration_ns, int64_t period, uint32_t *idx);
/* The index of a profile with exactly TYPE and these labels (any order),
** or -1. Linear: decoders keep their own map when they make many. */
long em_pset_profile_find(const em_pset *s, const char *type,
                          const ember_label *labels, size_t n);

/* Makes room for NSTACKS more stacks of NFRAMES locations in all and
** NSAMPLES more samples: a decoder that knows its counts (pprof) grows each
** array once, to its size, where doubling could overshoot by almost half
** at the peak. EMBER_OK, ENOMEM or ELIMIT. */
int em_pset_reserve(em_pset *s, size_t nstacks, size_t nframes,
                    size_t nsamples);

/* Adds VALUE for stack STACK to profile PROFILE. Repeats sum when written.
** EMBER_ELIMIT when the profile's positive or negative values no longer
** sum within int64 (then no sum of them may be stored or read exactly). */
int em_pset_sample(em_pset *s, uint32_t profile, uint32_t stack,
                   int64_t value);

/* Frees what S holds and zeroes it. */
void em_pset_free(em_pset *s);

/* Empties S for the next input, keeping its arrays, indexes and newest
** arena block: decoding many small files one after another into one set
** (`ember import DIR`) then does not grow every array and index again
** from nothing per file. A trimmed set is freed instead. */
void em_pset_reset(em_pset *s);

/* Frees S's dedup indexes, which only adds need: a writer that keeps many
** decoded sets until their batch is written holds a fraction of the
** memory. After it, adds fail with EMBER_EINVAL; writing still works. */
void em_pset_trim(em_pset *s);

/* What em_pset_write wrote. */
typedef struct em_pset_counts {
    uint64_t profiles;          /* profiles appended (those with samples) */
    uint64_t samples;           /* samples appended, after summing repeats */
} em_pset_counts;

/* Interns S's symbols and stacks through TXN and appends its profiles that
** have samples (each profile's repeated stacks summed); notes the label
** names that came from the files (em_txn_note_split_label). Fails only on what
** the engine does (ENOMEM, EIO, ELIMIT of the store); the caller aborts TXN
** then. OUT may be NULL. */
int em_pset_write(ember_txn *txn, const em_pset *s, em_pset_counts *out);

#endif /* EM_PSET_H */
