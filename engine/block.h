/*
** engine/block.h: immutable block files (engine/block_write.c and
** engine/block_finish.c write them, engine/block_read.c reads them;
** docs/file-format.md has every byte).
**
** A block holds the profiles of a time range, self-contained: its own
** strings, mappings, functions, locations, stacks and series, with ids
** local to the block (no id is shared with the head or another block), its
** label postings, its chunks (engine/chunk.h's codec, unchanged) and an
** index of them. Stacks are a parent-pointer tree: node = (parent node,
** location), so a stack costs one node, not a list of locations; a chunk's
** stack ids are node ids.
**
** Every byte is covered by a checksum that is checked before the bytes are
** used: the footer and its section directory by one, each section by its
** own (checked when the section is first loaded), each chunk by the CRC it
** already carries. The reader treats the file as hostile: every count and
** offset is checked against the file's size and the limits of
** engine/store.h before it sizes an allocation or indexes an array.
**
** Writing: a builder interns content into block-local ids (equal content,
** equal id), takes chunks series by series and streams them to a temporary
** file, and at the end appends the symbol sections, the postings, the
** chunk index and the footer, fsyncs, and renames the file into place.
** Memory held: the symbol tables and the chunk index, never the chunks.
*/
#ifndef EM_BLOCK_H
#define EM_BLOCK_H

#include <roaring/roaring.h>

#include "engine/chunk.h"
#include "engine/engine.h"

#define EM_BLOCK_VERSION 1
#define EM_BLOCK_ROOT UINT32_MAX    /* the parent of a stack's outermost
                                    ** frame's node */
#define EM_BLOCK_NOLOC UINT32_MAX   /* the location of the empty stack's
                                    ** node: none (its parent is ROOT, its
                                    ** depth 0, and it has no children) */

/* What a block says about itself (its footer). */
typedef struct em_block_info {
    uint64_t id;                    /* the catalog's id of the block */
    int64_t min_time, max_time;     /* of its profiles, inclusive (ms) */
    int64_t resolution_ms;          /* 0: every profile as stored; else
                                    ** profiles are sums over buckets of
                                    ** this width, stamped at bucket start */
    uint32_t level;                 /* compaction level: 0 from the head */
    uint32_t nstrings, nmappings, nfunctions, nlocations, nnodes, nseries;
    uint32_t nlines;                /* location lines, all locations */
    uint32_t nlabels;               /* (name, value) pairs, all series */
    uint64_t nchunks, nprofiles, nsamples;
    uint64_t file_size;             /* bytes of the file */
    uint32_t footer_crc;            /* identifies the content (catalog) */
} em_block_info;

/* ---- writing (engine/block_write.c, engine/block_finish.c) ------------- */

typedef struct em_bbuild em_bbuild;

/* A builder whose file will be DIR/NAME (written as DIR/NAME.tmp until
** em_bbuild_finish). LEVEL is the zstd level of the symbol sections.
** Strings 0 ("") and mapping 0 (all zero, file and build id "") exist from
** the start, as in the head. */
int em_bbuild_new(const char *dir, const char *name, int level,
                  em_bbuild **out);
/* Removes the temporary file and frees B (NULL: no-op); after finish only
** frees. */
void em_bbuild_free(em_bbuild *b);

/* Interning: equal content gives the id it got the first time. Ids are
** dense from 0 in the order of first interning (strings, functions and
** the others may be renumbered at finish; node ids only by
** em_bbuild_nodes_dfs, before a chunk names them). */
int em_bbuild_string(em_bbuild *b, const char *s, size_t len, uint32_t *id);
int em_bbuild_mapping(em_bbuild *b, uint64_t start, uint64_t limit,
                      uint64_t offset, uint32_t file, uint32_t build_id,
                      uint32_t *id);
int em_bbuild_function(em_bbuild *b, uint32_t name, uint32_t system_name,
                       uint32_t file, int64_t start_line, uint32_t *id);
/* FNS[i], LINES[i]: the N lines, innermost inline frame first. */
int em_bbuild_location(em_bbuild *b, uint32_t mapping, uint64_t address,
                       const uint32_t *fns, const int64_t *lines, size_t n,
                       uint32_t *id);
/* The node of the stack whose parent node is PARENT (EM_BLOCK_ROOT for
** an outermost frame) and whose leaf is location LOC. */
int em_bbuild_node(em_bbuild *b, uint32_t parent, uint32_t loc,
                   uint32_t *id);
/* The node of the stack LOCS (N location ids, leaf first, as the head
** stores stacks): em_bbuild_node from the outermost frame in. N 0: the
** empty stack (a profile of no frames, as an agent's own counters are),
** the node (ROOT, EM_BLOCK_NOLOC). */
int em_bbuild_stack(em_bbuild *b, const uint32_t *locs, size_t n,
                    uint32_t *id);
/* Renumbers the nodes in depth-first preorder (children in the order of
** their ids), so that the stacks under any node, e.g. every stack through
** a function's frame, are one range of ids. Only before the first chunk
** names a node (EINVAL after). *PERM (may be NULL) gets a new array of
** the old node count: old id -> new id (em_free it). */
int em_bbuild_nodes_dfs(em_bbuild *b, uint32_t **perm);
/* A series: TYPE (string id) and N (name, value) string id pairs, sorted
** by name, names distinct. */
int em_bbuild_series(em_bbuild *b, uint32_t type, const uint32_t *names,
                     const uint32_t *values, size_t n, uint32_t *id);
/* Encodes NP profiles of SERIES (stack ids are node ids) as one chunk and
** appends it to the file. A series' chunks must come in time order and
** not overlap (each chunk's min time above the previous one's max time). */
int em_bbuild_chunk(em_bbuild *b, em_codec *c, uint32_t series,
                    const em_chunk_profile *ps, size_t np);
/* A series' profiles as a block keeps them: NP profiles of SERIES sorted
** by time, cut into chunks of at most EM_BLOCK_CHUNK_PROFILES profiles
** and about EM_BLOCK_CHUNK_SAMPLES samples (one profile more when it alone
** is larger), profiles of one time in one chunk. A query whose range ends
** inside a chunk decodes all of it, so a chunk must not span hours of a
** busy series. */
#define EM_BLOCK_CHUNK_PROFILES 4096u
#define EM_BLOCK_CHUNK_SAMPLES 65536u
int em_bbuild_series_chunks(em_bbuild *b, em_codec *c, uint32_t series,
                            const em_chunk_profile *ps, size_t np);
/* Appends already encoded chunk bytes (a chunk of another block whose
** stack ids mean the same nodes here), checked as em_chunk_header_read. */
int em_bbuild_chunk_raw(em_bbuild *b, uint32_t series, const uint8_t *chunk,
                        size_t len);
/* Writes the sections and the footer carrying INFO's id, resolution and
** level (the rest is counted), fsyncs the file, renames it to DIR/NAME
** and fsyncs DIR. *OUT (may be NULL) gets the block's info. */
int em_bbuild_finish(em_bbuild *b, const em_block_info *info,
                     em_block_info *out);
/* Bytes the builder holds (symbol tables, index), for memory budgets. */
size_t em_bbuild_memory(const em_bbuild *b);

/* ---- reading (engine/block_read.c) -------------------------------------- */

typedef struct em_block em_block;

/* Opens and maps PATH and checks its footer and section directory (not
** yet the sections: each is checked when first loaded). EMBER_ENOTFOUND
** when there is no such file, EMBER_ECORRUPT naming the damage, EMBER_EFORMAT
** for a version this reader does not know. */
int em_block_open(const char *path, em_block **out);
void em_block_close(em_block *b);           /* NULL: no-op */
const em_block_info *em_block_get_info(const em_block *b);

/* The decoded symbol tables, loaded (checksums checked, decompressed,
** every reference checked against its table) on first call and kept until
** close; safe to call from several threads. Arrays are indexed by id. */
typedef struct em_bmapping {
    uint64_t start, limit, offset;
    uint32_t file, build_id;        /* string ids */
} em_bmapping;

typedef struct em_bfunction {
    uint32_t name, system_name, file;   /* string ids */
    int64_t start_line;
} em_bfunction;

typedef struct em_blocation {
    uint32_t mapping;
    uint64_t address;
    uint32_t first, n;              /* lines [first, first + n) */
} em_blocation;

typedef struct em_bline {
    uint32_t function;
    int64_t line;
} em_bline;

typedef struct em_bseries {
    uint32_t type;                  /* string id */
    uint32_t first, n;              /* labels [first, first + n) */
} em_bseries;

typedef struct em_block_syms {
    const uint32_t *str_off;        /* [nstrings + 1]; string i is the
                                    ** bytes [str_off[i], str_off[i+1] - 1)
                                    ** of str_bytes, NUL-terminated */
    const char *str_bytes;
    const em_bmapping *mappings;
    const em_bfunction *functions;
    const em_blocation *locations;
    const em_bline *lines;
    const uint32_t *parent;         /* [nnodes]: parent node, or
                                    ** EM_BLOCK_ROOT; parent[i] < i */
    const uint32_t *loc;            /* [nnodes]: the node's leaf location;
                                    ** EM_BLOCK_NOLOC: the empty stack */
    const uint32_t *depth;          /* [nnodes]: frames in the stack */
    const em_bseries *series;
    const uint32_t *label_names, *label_values;   /* [nlabels], string ids */
} em_block_syms;

/* Bytes of the decoded tables B holds now (names, symbols, postings,
** chunk index), for the handle's budget of open blocks. */
size_t em_block_memory(em_block *b);
/* The block's symbols, loaded (and checked) on first use, kept until
** close. */
int em_block_symbols(em_block *b, const em_block_syms **out);
/* Its strings, series and labels alone (*OUT's other tables may be NULL):
** matching labels, listing values or reading a series' labels needs no
** stack tree, the largest part of a block's symbols. */
int em_block_names(em_block *b, const em_block_syms **out);

/* The series whose labels hold NAME=VALUE (strings, exact), as a new
** bitmap (empty when none). */
int em_block_postings(em_block *b, const char *name, const char *value,
                      roaring_bitmap_t **out);
/* Every distinct value of label NAME (type: "__type__") among the series,
** sorted, as string ids into the symbols (*OUT em_malloc'ed, *N of them). */
int em_block_label_values(em_block *b, const char *name, uint32_t **out,
                          size_t *n);

/* One chunk of the index: where its bytes are and what they span. */
typedef struct em_bchunk {
    uint32_t series;
    int64_t min_time, max_time;
    uint64_t offset, len;           /* in the file */
} em_bchunk;

/* The chunks of SERIES, in time order: *OUT points into the block's index
** (loaded and checked like a section), *N of them. */
int em_block_chunks(em_block *b, uint32_t series, const em_bchunk **out,
                    size_t *n);
/* The bytes of chunk C, inside the mapping, checked against the file's
** size (not their CRC: em_chunk_header_read and the decoders check it). */
int em_block_chunk_bytes(em_block *b, const em_bchunk *c,
                         const uint8_t **bytes);

/* Starts reading chunks C[0..N) (adjacent in the file, as one series'
** are) from disk in one request: a block's mapping reads nothing ahead
** by itself, so a reader names what it is about to read. */
void em_block_prefetch(em_block *b, const em_bchunk *c, size_t n);

/* The caller is about to read every chunk in order (compaction, verify):
** the mapping reads ahead as the kernel does for any file. */
void em_block_will_scan(em_block *b);

/* Section I (below em_block_nsections) of the directory, for sizes:
** NAME is NULL for a newer writer's section this build does not know. */
typedef struct em_bsection {
    const char *name;               /* "nodes.parent" */
    uint64_t offset;                /* in the file */
    uint32_t stored, raw;           /* bytes in the file, decompressed */
} em_bsection;

size_t em_block_nsections(const em_block *b);
void em_block_section(const em_block *b, size_t i, em_bsection *out);

/* Checks every checksum and decodes every section and chunk, reporting
** each problem through FN (as ember_verify does) and returning
** EMBER_ECORRUPT when there was one. */
int em_block_verify(em_block *b, ember_problem_fn fn, void *ctx);

#endif /* EM_BLOCK_H */
