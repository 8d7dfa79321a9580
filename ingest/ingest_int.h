/*
** ingest/ingest_int.h: private to ingest/ (and its tests and fuzz targets):
** the fold, an in-memory profile that collects parsed stacks before anything
** touches the database.
**
** Why a fold first: a file is parsed and deduplicated completely before the
** write transaction starts, so a malformed file never takes the writer lock
** and the transaction only interns what is known to be good. Each distinct
** frame name and each distinct stack is kept once (hash tables over
** em_hash64), so the transaction interns each of them exactly once.
*/
#ifndef EM_INGEST_INT_H
#define EM_INGEST_INT_H

#include "engine/engine.h"
#include "ingest/ingest.h"

/* A distinct frame name: a slice of the parsed buffer. */
typedef struct em_fold_frame {
    const char *p;              /* not NUL-terminated; lives with the buffer */
    size_t len;
    uint64_t hash;              /* em_hash64 of the bytes */
} em_fold_frame;

/* A distinct stack: N frame indexes at pool[off], ROOT FIRST. */
typedef struct em_fold_stack {
    size_t off;
    size_t n;
    int64_t value;              /* summed over identical lines (wrapping) */
    uint64_t hash;              /* em_hash64 of the index run */
} em_fold_stack;

/* Zero-initialize ({0}) before use; em_fold_free releases it. */
typedef struct em_fold {
    em_fold_frame *frames;      /* distinct frame names, first seen first */
    size_t nframes, frames_cap;
    em_hindex frame_index;
    em_fold_stack *stacks;      /* distinct stacks, first seen first */
    size_t nstacks, stacks_cap;
    em_hindex stack_index;
    uint32_t *pool;             /* frame indexes of all distinct stacks */
    size_t npool, pool_cap;
    size_t max_depth;           /* most frames in one stack */
    size_t max_name;            /* longest frame name in bytes */
    uint64_t lines;             /* stack lines added */
    int64_t total;              /* sum of all values (wrapping) */
} em_fold;

/* An em_collapsed_fn with CTX an em_fold *: adds one stack line, summing it
** into an identical earlier stack. EMBER_OK, ENOMEM or ELIMIT. */
int em_fold_add(void *ctx, const em_collapsed_frame *frames, size_t nframes,
                int64_t value);

/* Frees what F holds and zeroes it. */
void em_fold_free(em_fold *f);

/* ---- shared by the decoders (ingest/import.c, ingest/pset.c) ------------ */

/* Copies the caller's options (of any older, smaller size) over the
** defaults into *O (origin "<input>", window, max_bytes filled in) and
** checks what the engine would refuse late (the type, the label array). */
int em_import_opts_norm(const em_import_opts *opts, em_import_opts *o);

#define EM_LABEL_NAME_BUF 72    /* a sanitized name and its NUL */

/* Makes a label name of the LEN bytes at IN that the engine accepts:
** bytes other than [a-zA-Z0-9_] become '_', a leading digit gets '_'
** before it, "" becomes "_", and it is cut to 64 bytes (Prometheus' habit
** for foreign names such as "http.route" or "trace-id"). */
void em_label_name_sanitize(const char *in, size_t len,
                            char out[EM_LABEL_NAME_BUF]);

/* The labels of one profile: the import's own BASE (from -l), then EXTRA
** from the file (names already sanitized). An EXTRA name that BASE or an
** earlier EXTRA holds becomes "exported_NAME" (Parca's rule; again while
** it still clashes). OUT has room for NBASE + NEXTRA; names made here live
** in S's arena. S remembers BASE's names: a profile's other labels came
** from its file and split it (em_pset_write notes them for `@ T`).
** EMBER_OK or ENOMEM. */
int em_labels_join(em_pset *s, const ember_label *base, size_t nbase,
                   const ember_label *extra, size_t nextra, ember_label *out,
                   size_t *nout);

/* Copies LEN bytes at P, NUL-terminated, into S's arena (NULL: ENOMEM,
** with the message set). */
char *em_pset_strndup(em_pset *s, const char *p, size_t len);

#endif /* EM_INGEST_INT_H */
