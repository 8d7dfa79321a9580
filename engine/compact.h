/*
** engine/compact.h: compaction, private to the engine (engine/compact.c
** runs the steps; engine/compact_head.c cuts the head into blocks;
** engine/head_gc.c rebuilds the head without what nothing names;
** engine/punch.c gives free pages back to the file system).
*/
#ifndef EM_COMPACT_H
#define EM_COMPACT_H

#include "engine/block.h"
#include "engine/store.h"

/* A compaction's options, resolved (defaults filled in, times absolute). */
typedef struct em_compact_opts {
    int64_t now;                    /* unix ms */
    int64_t cut;                    /* head profiles before it go to blocks */
    int64_t block_ms;               /* span of a level-0 block */
    int64_t merge_ms;               /* span of a merged (level-1) block */
    int zstd_level;                 /* of merged blocks, which stay */
    int cut_zstd_level;             /* of level-0 blocks: each is merged
                                    ** (rewritten) once its window is whole */
    const char *blocks_dir;         /* DIR/blocks */
    const ember_retention *retention;
    size_t nretention;
    struct em_regex ***rx;          /* [nretention][nmatchers]: =~ and !~ */
    const ember_resolution *res;
    size_t nres;
} em_compact_opts;

/* One run of ember_compact. */
typedef struct em_cjob {
    ember_db *db;
    em_compact_opts o;
    const ember_compact_opts *in;
    ember_compact_report *rep;
    char blocks[4096];
    int lock_fd;
    bool in_dry;                    /* a dry run: count, write nothing */
    uint64_t dry_windows;
} em_cjob;

/* Raises block_seq by N in its own commit: ids [*FIRST, *FIRST + N). */
int em_cjob_ids(em_cjob *j, uint64_t n, uint64_t *first);
/* Reports progress through the caller's callback, if any. */
void em_cjob_progress(em_cjob *j, const char *what, uint64_t done,
                      uint64_t total);

/* The steps on blocks (engine/compact_blocks.c): merge the blocks of each
** whole merge window, make the downsampled copies, apply retention; each
** sets *N to the blocks it wrote or removed. */
int em_blocks_merge(em_cjob *j, uint64_t *n);
int em_blocks_downsample(em_cjob *j, uint64_t *n);
int em_blocks_retention(em_cjob *j, uint64_t *n);
/* Removes the files of blocks the catalog dropped once no reader can still
** open them (meta gone_ID holds the commit that dropped ID), and files no
** commit ever named. */
int em_blocks_sweep(em_cjob *j);
/* Rewrites the catalog's version 1 records as version 2 (with the table
** sizes, read from each block's footer), so that snapshots open those
** blocks only when a question reads them. */
int em_blocks_upgrade(em_cjob *j);
/* The oldest snapshot (LMDB txn id) a reader of the environment holds;
** UINT64_MAX when none does (engine/punch.c). */
int em_readers_oldest(ember_db *db, uint64_t *txnid);

/* A head chunk a cut read: what the commit checks is still there. */
typedef struct em_cut_chunk {
    uint8_t key[EM_CHUNK_KEY_LEN];
    uint64_t len;
    uint32_t crc;                   /* the chunk's own stored checksum */
    bool straddles;                 /* has profiles at or after the cut */
} em_cut_chunk;

typedef struct em_cut_list {
    em_cut_chunk *v;
    size_t n, cap;
} em_cut_list;

/* Writes the block BLOCK_ID of the head's sealed profiles in
** [W0, min(W0 + block span, cut)) read on R, noting every chunk it read in
** READ; *OUT gets the block's info (nseries 0: the window held nothing,
** and the file is to be removed). */
int em_cut_window(em_rtxn *r, const em_compact_opts *o, int64_t w0,
                  uint64_t block_id, em_cut_list *read, em_block_info *out);

/* What a rewrite of blocks into one keeps and how (engine/rewrite.c). */
typedef struct em_rewrite_opts {
    uint64_t id;                    /* the new block's */
    uint32_t level;
    int64_t resolution_ms;          /* 0: every profile; else per series one
                                    ** profile a bucket: the sum (delta
                                    ** types) or the last (the others) */
    int64_t from, to;               /* profiles kept, inclusive */
    /* Retention: the oldest time kept of a series (INT64_MIN: all);
    ** NULL: FROM alone decides. */
    int64_t (*keep_from)(void *ctx, const char *type,
                         const ember_label *labels, size_t n);
    void *ctx;
    const char *dir;                /* DIR/blocks */
    int zstd_level;
    /* Samples of a series held before what is final of it is written;
    ** 0: the default (rewrite.c's REWRITE_HOLD). Tests set it small. */
    uint64_t hold_samples;
} em_rewrite_opts;

/* Writes the block O->id holding what O keeps of the NIN blocks IN (only
** the symbols that names), *OUT its info (nseries 0: nothing was kept,
** and the file is to be removed). */
int em_rewrite(em_block *const *in, size_t nin, const em_rewrite_opts *o,
               em_block_info *out);

/* Rebuilds the head's tables keeping only what its chunks name, renumbering
** them densely (engine/head_gc.c). *DROPPED gets the records dropped. */
int em_head_gc(ember_db *db, uint64_t *dropped);

/* Returns the free pages of DIR's data file that no reader can see to the
** file system (engine/punch.c); *BYTES gets how many were punched. */
int em_punch_free(ember_db *db, uint64_t *bytes);

/* Checks every block R's catalog names (the file there, its footer as
** the catalog recorded it, every checksum and decode) and the blocks
** directory against the catalog (a block file newer than every block the
** database made means it went back in time): each problem to FN, counted
** in *PROBLEMS (engine/verify_blocks.c). */
int em_verify_blocks(em_rtxn *r, ember_problem_fn fn, void *ctx,
                     uint64_t *problems);

#endif /* EM_COMPACT_H */
