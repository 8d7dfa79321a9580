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
    int zstd_level;                 /* of block sections */
    const char *blocks_dir;         /* DIR/blocks */
} em_compact_opts;

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
