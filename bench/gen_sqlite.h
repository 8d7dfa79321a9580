/*
** bench/gen_sqlite.h: the SQLite baseline the engine benchmark compares
** against: the generator's data in a normalized schema with the indexes a
** competent developer would add (bench/gen_sqlite.c has the schema), WAL,
** prepared statements, one transaction per batch.
**
** (Named gen_* because the Makefile links bench/gen*.c into every bench
** program as their shared library.)
*/
#ifndef BENCH_GEN_SQLITE_H
#define BENCH_GEN_SQLITE_H

#include <stdbool.h>
#include <stdint.h>

#include "ember.h"
#include "bench/gen.h"

typedef struct sqlb sqlb;

/* Creates a fresh database at PATH (removing any old one) with the schema.
** SYNC_FULL: synchronous=FULL (durable at commit, as EMBER_SYNC_FULL),
** else NORMAL. Returns NULL with a message on stderr. */
sqlb *sqlb_open(const char *path, bool sync_full);
void sqlb_close(sqlb *b);
const char *sqlb_pragmas(void);         /* the settings, for the report */
const char *sqlb_version(void);

int sqlb_begin(sqlb *b);                /* 0 or -1 with a message */
int sqlb_commit(sqlb *b);

/* Loads G's whole symbol pool, ids = the generator's indexes, committing
** every BATCH rows (as gen_intern_stacks does for Ember). */
int sqlb_load_symbols(sqlb *b, const gen *g, size_t batch);
/* Symbols read from a database rather than the generator (bench_export):
** each row takes the id given, strings are interned. A location's lines
** and a stack's locations are the varint blobs of the schema. */
int sqlb_put_mapping(sqlb *b, int64_t id, const ember_mapping *m);
int sqlb_put_function(sqlb *b, int64_t id, const ember_function *f);
int sqlb_put_location(sqlb *b, int64_t id, const ember_location *l);
int sqlb_put_stack(sqlb *b, int64_t id, const uint32_t *locs, size_t n);
/* Appends P, whose samples carry stack ids already in the stacks table. */
int sqlb_append(sqlb *b, const ember_profile *p);
/* Appends P, whose samples carry G's pool indexes: interns each stack with
** its locations, functions, mappings and strings first (SELECT, INSERT when
** missing), caching symbols for the duration of the profile only, as
** gen_intern_one does for Ember. */
int sqlb_append_intern(sqlb *b, const gen *g, const ember_profile *p);

/* Resolves the series that TYPE (NULL: any) and the matchers select and
** merges their samples in [from, to]: SELECT stack_id, sum(value) ...
** GROUP BY stack_id. *nstacks and *sum describe the result. */
int sqlb_merge(sqlb *b, const char *type, const ember_matcher *m, size_t n,
               int64_t from, int64_t to, uint64_t *nstacks, int64_t *sum);
/* Distinct values of label NAME among the selected series. */
int sqlb_label_values(sqlb *b, const char *name, const char *type,
                      const ember_matcher *m, size_t n, uint64_t *count);

/* Runs ANALYZE so the planner knows the index selectivities (what a
** competent deployment does after a bulk load). */
int sqlb_analyze(sqlb *b);
/* Checkpoints the WAL into the main file; returns the bytes on disk
** (database plus WAL), or -1. */
int64_t sqlb_checkpoint_size(sqlb *b);
/* Bytes of the pages in use: (page_count - freelist_count) * page_size. */
int64_t sqlb_live_bytes(sqlb *b);
/* Bytes of pages held by TABLE and its indexes (dbstat), or -1. */
int64_t sqlb_table_bytes(sqlb *b, const char *table);

#endif /* BENCH_GEN_SQLITE_H */
