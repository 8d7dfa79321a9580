/*
** engine/chunk.h: the columnar chunk codec (engine/chunk.c). A chunk holds
** the profiles of one series over a time window, stack-major: per distinct
** stack, which profiles it appears in and its values there. Profiles over
** time repeat the same stacks, so this layout compresses well and a merge
** sums a column per stack instead of probing a hash table per sample.
**
** Columns (each varint-coded, then zstd-compressed on its own so a reader
** decodes only what it needs; docs/file-format.md has every byte):
**   times      delta-of-delta, zig-zag            [nprofiles]
**   durations  delta, zig-zag                     [nprofiles]
**   periods    delta, zig-zag                     [nprofiles]
**   totals     delta, zig-zag (sum of the profile's values) [nprofiles]
**   stacks     first id, then gaps                [nstacks]
**   counts     profiles per stack                 [nstacks]
**   profiles   per stack: first index, then gap-1 [nsamples]
**   values     per stack: first value, then delta against the same stack's
**              previous value, zig-zag (wrap-around) [nsamples]
** The header (fixed size, uncompressed) carries the counts, the time span and
** a CRC-32 of everything after the checksum field; every read checks it
** (the chunk cache checks it once, when it decodes the chunk).
**
** Decoders treat their input as hostile: every count is checked against the
** bytes present and against EM_CHUNK_MAX_* before it sizes an allocation.
*/
#ifndef EM_CHUNK_H
#define EM_CHUNK_H

#include "engine/engine.h"

#define EM_CHUNK_VERSION 1
#define EM_CHUNK_MAX_PROFILES (1u << 20)
#define EM_CHUNK_MAX_STACKS (1u << 26)
#define EM_CHUNK_MAX_SAMPLES (1ull << 28)

enum { EM_CHUNK_HEAD = 1u << 0 };   /* header flag: an unsealed head chunk */

/* Which columns em_chunk_decode fills. */
enum {
    EM_COL_TIMES = 1u << 0,     /* time_ms, duration_ns, period */
    EM_COL_TOTALS = 1u << 1,    /* total */
    EM_COL_SAMPLES = 1u << 2,   /* stacks, stack_start, sample_* */
    EM_COL_ALL = 7u,
    EM_COL_CRC_DONE = 1u << 3   /* not a column: the caller verified the
                                ** checksum (em_chunk_header_read) already */
};

/* The parts of a decoded chunk, for readers that decode a chunk a part at
** a time and keep it (em_chunk_decode_parts, the chunk cache of
** engine/ccache.c): a merge of a chunk wholly inside its range needs no
** profile indexes, a total no samples at all. */
enum {
    EM_PART_TIMES = 1u << 0,    /* time_ms, duration_ns, period */
    EM_PART_TOTALS = 1u << 1,   /* total */
    EM_PART_STACKS = 1u << 2,   /* stacks, stack_start */
    EM_PART_VALUES = 1u << 3,   /* sample_value (brings STACKS) */
    EM_PART_PROFILES = 1u << 4, /* sample_profile (brings STACKS) */
    EM_PART_ALL = 31u
};

/* One profile given to the encoder. */
typedef struct em_chunk_profile {
    int64_t time_ms;
    int64_t duration_ns;
    int64_t period;
    const uint32_t *stacks;     /* ascending, distinct */
    const int64_t *values;      /* values[i] belongs to stacks[i] */
    uint32_t n;
} em_chunk_profile;

typedef struct em_chunk_header {
    uint8_t version;
    uint8_t flags;              /* EM_CHUNK_* */
    uint32_t nprofiles;
    uint32_t nstacks;
    uint64_t nsamples;
    int64_t min_time, max_time; /* of the profiles, inclusive */
} em_chunk_header;

/* A decoded chunk. Profiles are in time order (ties keep the order they
** were given to the encoder). Arrays not asked for are NULL. */
typedef struct em_chunk {
    em_chunk_header h;
    int64_t *time_ms;           /* [nprofiles] */
    int64_t *duration_ns;       /* [nprofiles] */
    int64_t *period;            /* [nprofiles] */
    int64_t *total;             /* [nprofiles], wrap-around sums */
    uint32_t *stacks;           /* [nstacks], ascending, distinct */
    uint64_t *stack_start;      /* [nstacks + 1]: the samples of stacks[i]
                                ** are [stack_start[i], stack_start[i+1]) */
    uint32_t *sample_profile;   /* [nsamples], ascending within a stack */
    int64_t *sample_value;      /* [nsamples] */
    bool small_values;          /* with sample_value: every value lies in
                                ** [-2^31, 2^31), so a run of one stack's
                                ** samples sums in 64 bits without wrapping
                                ** (a chunk holds under 2^32 samples) */
    void *mem;                  /* the one allocation behind the arrays */
} em_chunk;

/* Per-thread codec state: zstd contexts (allocating through em_malloc) and
** scratch buffers, made once and reused. */
typedef struct em_codec em_codec;

int em_codec_new(em_codec **out);
void em_codec_free(em_codec *c);        /* NULL: no-op */

/* Encodes NP profiles, in any time order, into OUT (appended). FLAGS are
** EM_CHUNK_* header flags; LEVEL is the zstd level. NP may be 0. */
int em_chunk_encode(em_codec *c, const em_chunk_profile *ps, size_t np,
                    unsigned flags, int level, em_buf *out);

/* Reads and checks the header and the checksum of the whole blob. */
int em_chunk_header_read(const uint8_t *buf, size_t len, em_chunk_header *h);

/* The header, checked but without the checksum, and the stored checksum
** *CRC: what a cache looks a chunk up by. The chunk is not proven whole. */
int em_chunk_header_peek(const uint8_t *buf, size_t len, em_chunk_header *h,
                         uint32_t *crc);
/* Checks the checksum of the whole blob (EMBER_ECORRUPT on a mismatch). */
int em_chunk_crc_check(const uint8_t *buf, size_t len);

/* Decodes into CH the parts of PARTS (EM_PART_*) it lacks. CH->h must be
** BUF's header and BUF's checksum verified by the caller; CH's arrays may
** come from earlier calls on the same bytes. The new arrays live in one
** new allocation *MEM of *BYTES bytes (NULL, 0 when nothing was missing),
** which the caller frees; CH->mem is left alone. C may be NULL. When
** totals, values and profile indexes are all present after a call that
** added one of them, the totals are checked against the values as
** em_chunk_decode does. On failure CH is unchanged and *MEM is NULL. */
int em_chunk_decode_parts(em_codec *c, const uint8_t *buf, size_t len,
                          unsigned parts, em_chunk *ch, void **mem,
                          size_t *bytes);
/* One stack of a chunk that a focus or ignore keeps: its id and its run
** of samples, [at, at + n) (a chunk holds at most 2^28 samples). */
typedef struct em_kept {
    uint32_t stack, at, n;
} em_kept;

/* Decodes of PARTS (EM_PART_VALUES, EM_PART_PROFILES) the samples of the
** N runs KEPT alone (ascending, disjoint), skipping the other stacks'
** varints: a focus reading a chunk the cache will not keep needs a few
** stacks of it, not the whole. CH must hold STACKS and lack PARTS; the
** arrays, of the chunk's every sample, live in *MEM (*BYTES) and only the
** kept runs' slots are set, so CH serves reads of those runs alone and
** must not be cached; the totals are not checked against the values (the
** checksum, checked by the caller, covers the bytes). On failure CH is
** unchanged and *MEM NULL. C may be NULL. */
int em_chunk_decode_kept(em_codec *c, const uint8_t *buf, size_t len,
                         unsigned parts, em_chunk *ch, const em_kept *kept,
                         uint32_t n, void **mem, size_t *bytes);
/* Which parts CH holds (its arrays that are not NULL). */
unsigned em_chunk_parts(const em_chunk *ch);
/* Copies into DST the array pointers of PARTS from SRC. */
void em_chunk_adopt(em_chunk *dst, const em_chunk *src, unsigned parts);

/* Decodes the columns COLS asks for. C may be NULL (a temporary codec is
** made). On failure OUT holds nothing to release and the message names the
** column and what is wrong (EMBER_ECORRUPT). */
int em_chunk_decode(em_codec *c, const uint8_t *buf, size_t len,
                    unsigned cols, em_chunk *out);
void em_chunk_release(em_chunk *ch);    /* frees ch->mem; safe twice */

/* Turns a chunk decoded with EM_COL_ALL back into profiles, in time order,
** each with ascending stacks. *OUT and the arrays it points into live in
** one allocation returned as *OUT; free it with em_free. */
int em_chunk_transpose(const em_chunk *ch, em_chunk_profile **out);

#endif /* EM_CHUNK_H */
