/*
** engine/block_int.h: the block file's layout, shared by its writer
** (engine/block_write.c, engine/block_finish.c) and its reader
** (engine/block_read.c), and the builder's state; private to them.
** docs/file-format.md ("Blocks") has every byte. Little-endian:
**
**   [0, 8)                  header: magic "EMBK", version, 3 zero bytes
**   [8, chunks_end)         the chunks, back to back (engine/chunk.c)
**   [chunks_end, footer)    the sections, back to back in directory order
**   [footer, size - 16)     footer: BLK_FOOTER_FIXED bytes, then the
**                           directory, BLK_DIRENT bytes per section
**   [size - 16, size)       trailer: footer length u32, version u8, flags
**                           u8, reserved u16, CRC-32 u32, magic "EMBK"
**
** The trailer's CRC-32 (zlib's) covers the header, the footer and the
** trailer's first 8 bytes; each section's CRC (in its directory entry)
** covers its stored bytes; each chunk carries its own. So every byte of
** the file is under one checksum, and the layout tiles the file exactly.
*/
#ifndef EM_BLOCK_INT_H
#define EM_BLOCK_INT_H

#include "engine/block.h"

#define BLK_MAGIC 0x4b424d45u       /* "EMBK" read as little-endian */
#define BLK_HEADER 8
#define BLK_TRAILER 16
#define BLK_FOOTER_FIXED 112
#define BLK_DIRENT 24
#define BLK_MAX_SECTIONS 255        /* ids are one byte */
#define BLK_RAW_BELOW 64            /* shorter sections are stored raw */
/* zstd's best ratio (an RLE block: 4 bytes for 128 KiB), as in chunks. */
#define BLK_ZSTD_RATIO 32768u
/* Decoded string bytes (NULs included) a reader accepts: front coding
** lets few stored bytes stand for many, so this bounds what they size. */
#define BLK_MAX_STRBYTES (1u << 30)

enum { BLK_ENC_RAW = 0, BLK_ENC_ZSTD = 1 };

/* The sections of version 1, in the order they are stored. Each is one
** column of varints (BLK_STR_BYTES: raw bytes), zstd-compressed on its
** own. Later ids (>= BLK_NSEC) would be a newer writer's, skipped. */
enum {
    BLK_STR_PREFIX,     /* per string after the first: bytes shared with the
                        ** string before */
    BLK_STR_LENGTH,     /* ... and bytes that follow them */
    BLK_STR_BYTES,      /* those suffixes, concatenated (not varints) */
    BLK_MAPPINGS,       /* per mapping: start, limit - start, offset, file,
                        ** build id */
    BLK_FN_NAME,        /* per function: name - previous name */
    BLK_FN_SYSTEM,      /* zz(system name - name) */
    BLK_FN_FILE,        /* zz(file - previous file) */
    BLK_FN_START,       /* zz(start line - previous start line) */
    BLK_LOC_MAPPING,    /* per location: mapping id */
    BLK_LOC_ADDRESS,    /* zz(address - previous address) */
    BLK_LOC_NLINES,     /* lines of the location */
    BLK_LINE_FUNCTION,  /* per line: function id */
    BLK_LINE_LINE,      /* zz(line - the function's start line) */
    BLK_NODE_PARENT,    /* per node: node - parent, 0 for EM_BLOCK_ROOT */
    BLK_NODE_LOC,       /* zz(location - the parent's location) */
    BLK_SER_TYPE,       /* per series: type string id */
    BLK_SER_NLABELS,    /* labels of the series */
    BLK_LABEL_NAME,     /* per label: name string id */
    BLK_LABEL_VALUE,    /* value string id */
    BLK_POST_NAME,      /* per posting: name - previous name */
    BLK_POST_VALUE,     /* value - previous value (same name), else value */
    BLK_POST_COUNT,     /* series in the posting */
    BLK_POST_SERIES,    /* per posting: first series, then gaps */
    BLK_IDX_SERIES,     /* per chunk: series - previous series */
    BLK_IDX_MIN,        /* zz(min time - previous max time, same series),
                        ** else zz(min time) */
    BLK_IDX_SPAN,       /* max time - min time */
    BLK_IDX_OFFSET,     /* zz(offset - previous chunk's end) */
    BLK_IDX_LENGTH,     /* bytes of the chunk */
    BLK_NSEC
};

/* The three groups a reader loads at once, each on first use. */
#define BLK_SYMS_FIRST BLK_STR_PREFIX
#define BLK_SYMS_END BLK_POST_NAME
#define BLK_POST_FIRST BLK_POST_NAME
#define BLK_POST_END BLK_IDX_SERIES
#define BLK_IDX_FIRST BLK_IDX_SERIES
#define BLK_IDX_END BLK_NSEC

extern const char *const em_blk_sec_names[BLK_NSEC];

/* zstd's allocations, through em_malloc like every other (ZSTD_customMem). */
static inline void *blk_zstd_alloc(void *opaque, size_t n)
{
    EM_UNUSED(opaque);
    return em_malloc(n);
}

static inline void blk_zstd_free(void *opaque, void *p)
{
    EM_UNUSED(opaque);
    em_free(p);
}

/* Footer fields, offsets into the footer. */
enum {
    BLK_F_ID = 0, BLK_F_MIN = 8, BLK_F_MAX = 16, BLK_F_RES = 24,
    BLK_F_LEVEL = 32, BLK_F_NSTRINGS = 36, BLK_F_NMAPPINGS = 40,
    BLK_F_NFUNCTIONS = 44, BLK_F_NLOCATIONS = 48, BLK_F_NLINES = 52,
    BLK_F_NNODES = 56, BLK_F_NSERIES = 60, BLK_F_NLABELS = 64,
    BLK_F_NPOSTINGS = 68, BLK_F_NCHUNKS = 72, BLK_F_NPROFILES = 80,
    BLK_F_NSAMPLES = 88, BLK_F_CHUNKS_END = 96, BLK_F_NSECTIONS = 104,
    BLK_F_RESERVED = 108
};

/* ---- the builder, shared by block_write.c and block_finish.c ----------- */

/* An index slot: the entry's hash and its id plus one (0: free). */
typedef struct bslot {
    uint64_t hash;
    uint32_t idx1;
} bslot;
typedef EM_HTAB_TYPE(bslot) btab;

/* A series as the builder keeps it: its record and its chunks' end. */
typedef struct bser {
    em_bseries s;
    int64_t last;                   /* max time of its latest chunk */
    bool any;                       /* it has a chunk */
} bser;

struct em_bbuild {
    char *dir, *path, *tmp;
    int fd;
    bool created;                   /* the temporary file exists */
    int level;                      /* zstd level */
    int failed;                     /* a write failed: the file is bad */
    bool done;                      /* renamed into place */
    uint64_t off;                   /* bytes written so far */

    uint8_t *sb;                    /* string bytes, back to back */
    size_t nsb, capsb;
    uint64_t *soff;                 /* [nstr + 1]: string i is
                                    ** sb[soff[i], soff[i+1]) */
    size_t capsoff;
    uint32_t nstr;
    btab str_ix;

    em_bmapping *map;
    size_t capmap;
    uint32_t nmap;
    btab map_ix;

    em_bfunction *fn;
    size_t capfn;
    uint32_t nfn;
    btab fn_ix;

    em_blocation *loc;
    size_t caploc;
    uint32_t nloc;
    btab loc_ix;
    em_bline *line;
    size_t capline;
    uint32_t nline;

    uint32_t *parent, *nodeloc, *depth;     /* per node */
    size_t capparent, capnodeloc, capdepth;
    uint32_t nnode;
    btab node_ix;

    bser *ser;
    size_t capser;
    uint32_t nser;
    btab ser_ix;
    uint32_t *lname, *lvalue;       /* labels, string ids */
    size_t caplname, caplvalue;
    uint32_t nlabel;

    em_bchunk *chunk;
    size_t capchunk;
    uint64_t nchunk, nprofiles, nsamples;
    int64_t min_time, max_time;
    em_buf enc;                     /* the chunk being encoded */
};

/* EMBER_OK, or the error of a builder that failed or finished. */
int em_bbuild_check(const em_bbuild *b);
/* Appends N bytes at P to the temporary file; a failure marks B failed. */
int em_bbuild_write(em_bbuild *b, const void *p, size_t n);
/* Byte order of strings A and C (memcmp, then the shorter first). */
int em_bbuild_strcmp(const em_bbuild *b, uint32_t a, uint32_t c);

#endif /* EM_BLOCK_INT_H */
