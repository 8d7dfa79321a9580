/*
** engine/chunk.c: the columnar chunk codec (engine/chunk.h says what a
** chunk holds; docs/file-format.md has every byte). Layout, little-endian:
**
**   off  size
**     0     4  magic "EMCK"
**     4     1  version (EM_CHUNK_VERSION)
**     5     1  flags (EM_CHUNK_HEAD; other bits reserved, must be 0)
**     6     1  ncols: directory entries (8 in version 1)
**     7     1  reserved, must be 0
**     8     4  CRC-32 (zlib) of bytes [0, 8) and [12, end)
**    12     4  nprofiles          16  4  nstacks        20  8  nsamples
**    28     8  min_time           36  8  max_time
**    44  10*n  directory: id u8, encoding u8 (0 raw, 1 zstd), raw length
**              u32, stored length u32
**     ...      the columns' stored bytes, in directory order, back to back
**
** The checksum also covers the magic, version and flags ahead of it, so that
** every single-byte change anywhere is caught, a flipped HEAD flag included.
** The first eight entries are the v1 columns, ids 0 to 7 in order; later
** entries (ascending ids >= 8) belong to newer writers and are skipped.
**
** Invariants the decoder proves before handing out a chunk: the checksum
** holds; each count is within EM_CHUNK_MAX_* and no larger than its column's
** bytes allow (one byte per varint at least, and zstd expands at most 32768
** times), so nothing is allocated for data that is not there; zstd frames
** decompress to exactly the recorded raw length; every varint is complete
** and in range; stacks strictly ascend; each stack's profile indexes
** strictly ascend below nprofiles; counts sum to nsamples; times never
** decrease and their ends match the header; totals match the values when
** both are decoded. Values use two's-complement wrap-around throughout, so
** any int64 round-trips.
*/
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_create*_advanced, customMem */
#include <inttypes.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "engine/chunk.h"

#define CHUNK_MAGIC 0x4b434d45u     /* "EMCK" read as little-endian */
#define CHUNK_CRC_OFF 8
#define CHUNK_HDR 44
#define CHUNK_DIRENT 10
#define CHUNK_NCOLS 8               /* the columns version 1 defines */
#define CHUNK_MAX_COLS 64           /* room for newer writers' columns */
#define CHUNK_RAW_BELOW 64          /* shorter columns are not worth zstd */
#define CODEC_KEEP (64u << 20)      /* larger scratch is freed after use */
/* An RLE block is a 3-byte header and 1 byte expanding to at most 128 KiB
** (RFC 8878 3.1.1.2), the best ratio any zstd frame can reach. */
#define CHUNK_ZSTD_RATIO 32768u

enum { COL_TIMES, COL_DURATIONS, COL_PERIODS, COL_TOTALS,
       COL_STACKS, COL_COUNTS, COL_PROFILES, COL_VALUES };
enum { ENC_RAW = 0, ENC_ZSTD = 1 };

static const char *const col_name[CHUNK_NCOLS] = {
    "times", "durations", "periods", "totals",
    "stacks", "counts", "profiles", "values"
};

/* Largest varint each column's encoder can write: sizes its reservations. */
static const uint8_t col_maxvar[CHUNK_NCOLS] = { 10, 10, 10, 10, 5, 3, 3, 10 };

/* One sample on its way from profile-major to stack-major order. */
typedef struct enc_sample {
    uint32_t stack;
    uint32_t prof;              /* its profile's rank in time order */
    int64_t value;
} enc_sample;

typedef struct enc_order {
    int64_t t;
    uint32_t i;                 /* index into the caller's profiles */
} enc_order;

struct em_codec {
    ZSTD_CCtx *cctx;            /* made by the first column worth zstd */
    ZSTD_DCtx *dctx;            /* made by the first zstd column decoded */
    em_buf col[CHUNK_NCOLS];    /* encode: each column's raw varints */
    em_buf samples;             /* encode: two enc_sample arrays, totals */
    em_buf order;               /* encode: enc_order per profile */
    em_buf scratch;             /* decode: one column's decompressed bytes */
};

/* A column as the directory places it. */
typedef struct col_ref {
    const uint8_t *p;           /* its stored bytes, inside the chunk */
    uint32_t raw, stored;
    uint8_t enc;
} col_ref;

/* A column being read: its varints lie in [p, end). */
typedef struct col_rd {
    const uint8_t *p, *end;
    const char *name;
} col_rd;

/* ---- codec -------------------------------------------------------------- */

static void *zstd_alloc(void *opaque, size_t n)
{
    EM_UNUSED(opaque);
    return em_malloc(n);
}

static void zstd_free(void *opaque, void *p)
{
    EM_UNUSED(opaque);
    em_free(p);
}

static const ZSTD_customMem zstd_mem = { zstd_alloc, zstd_free, NULL };

int em_codec_new(em_codec **out)
{
    *out = em_calloc(1, sizeof **out);
    if (*out == NULL)
        return em_err(EMBER_ENOMEM, "chunk codec: %zu bytes",
                      sizeof **out);
    return EMBER_OK;
}

void em_codec_free(em_codec *c)
{
    if (c == NULL)
        return;
    ZSTD_freeCCtx(c->cctx);
    ZSTD_freeDCtx(c->dctx);
    for (size_t k = 0; k < CHUNK_NCOLS; k++)
        em_buf_free(&c->col[k]);
    em_buf_free(&c->samples);
    em_buf_free(&c->order);
    em_buf_free(&c->scratch);
    em_free(c);
}

/* Frees scratch buffers past CODEC_KEEP: a codec lives as long as its
** thread, and one outsized chunk should not pin that memory forever. */
static void codec_trim(em_codec *c)
{
    for (size_t k = 0; k < CHUNK_NCOLS; k++)
        if (c->col[k].cap > CODEC_KEEP)
            em_buf_free(&c->col[k]);
    if (c->samples.cap > CODEC_KEEP)
        em_buf_free(&c->samples);
    if (c->order.cap > CODEC_KEEP)
        em_buf_free(&c->order);
    if (c->scratch.cap > CODEC_KEEP)
        em_buf_free(&c->scratch);
}

/* Translates a zstd failure; only running out of memory is not our data's
** fault when compressing. */
static int zstd_fail(size_t r, int rc, const char *col, const char *what)
{
    if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
        return em_err(EMBER_ENOMEM, "chunk: %s column: zstd %s: %s", col,
                      what, ZSTD_getErrorName(r));
    if (rc == EMBER_ECORRUPT)
        return EM_CORRUPT("chunk: %s column: zstd %s: %s", col, what,
                          ZSTD_getErrorName(r));
    return em_err(rc, "chunk: %s column: zstd %s: %s", col, what,
                  ZSTD_getErrorName(r));
}

/* Empties scratch buffer B and makes room for N bytes. One byte more, so
** that B->p is never NULL: even adding 0 to a null pointer is undefined. */
static int scratch_reserve(em_buf *b, size_t n)
{
    b->len = 0;
    return em_buf_reserve(b, n + 1);
}

/* CRC-32 of every byte but the checksum field itself. */
static uint32_t chunk_crc(const uint8_t *p, size_t len)
{
    uint32_t crc = em_crc32(0, p, CHUNK_CRC_OFF);
    return em_crc32(crc, p + CHUNK_CRC_OFF + 4, len - CHUNK_CRC_OFF - 4);
}

/* ---- encoder ------------------------------------------------------------ */

/* Checks the caller's profiles and counts their samples, so that nothing is
** allocated for input that breaks a limit. */
static int enc_check(const em_chunk_profile *ps, size_t np, unsigned flags,
                     uint64_t *nsamples)
{
    uint64_t ns = 0;

    if (flags & ~(unsigned)EM_CHUNK_HEAD)
        return em_err(EMBER_EINVAL, "chunk encode: unknown flags %#x", flags);
    if (np > EM_CHUNK_MAX_PROFILES)
        return em_err(EMBER_ELIMIT, "chunk encode: %zu profiles, limit %u",
                      np, EM_CHUNK_MAX_PROFILES);
    if (np > 0 && ps == NULL)
        return em_err(EMBER_EINVAL, "chunk encode: no profiles given");
    for (size_t i = 0; i < np; i++) {
        if (ps[i].n > 0 && (ps[i].stacks == NULL || ps[i].values == NULL))
            return em_err(EMBER_EINVAL, "chunk encode: profile %zu: "
                          "%" PRIu32 " samples but no arrays", i, ps[i].n);
        ns += ps[i].n;
    }
    if (ns > EM_CHUNK_MAX_SAMPLES)
        return em_err(EMBER_ELIMIT, "chunk encode: %" PRIu64 " samples, "
                      "limit %llu", ns, EM_CHUNK_MAX_SAMPLES);
    *nsamples = ns;
    return EMBER_OK;
}

static int order_cmp(const void *x, const void *y)
{
    const enc_order *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);     /* ties keep input order */
}

/* Fills c->order with the profiles in time order, stable. Appends usually
** arrive in order, so sorting is skipped when it would change nothing. */
static int enc_order_profiles(em_codec *c, const em_chunk_profile *ps,
                              size_t np)
{
    enc_order *o;
    bool sorted = true;
    int rc;

    rc = scratch_reserve(&c->order, np * sizeof *o);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "chunk encode: profile order");
    o = (enc_order *)(void *)c->order.p;
    for (size_t i = 0; i < np; i++) {
        o[i].t = ps[i].time_ms;
        o[i].i = (uint32_t)i;
        sorted = sorted && (i == 0 || o[i].t >= o[i - 1].t);
    }
    if (!sorted)
        qsort(o, np, sizeof *o, order_cmp);
    return EMBER_OK;
}

/* Empties the raw column buffers and reserves room for their worst case,
** so that the loops below write varints without checking space. */
static int enc_reserve(em_codec *c, size_t np, uint64_t ns)
{
    for (size_t k = 0; k < CHUNK_NCOLS; k++) {
        size_t n = k < COL_STACKS ? np : (size_t)ns;
        int rc;

        rc = scratch_reserve(&c->col[k], n * col_maxvar[k]);
        if (rc != EMBER_OK)
            return em_err_prefix(rc, "chunk encode: %s column", col_name[k]);
    }
    return EMBER_OK;
}

static inline void put_var(em_buf *b, uint64_t v)
{
    b->len += em_varint_put(b->p + b->len, v);
}

/* Writes the per-profile columns, in time order. Times are delta-of-delta:
** the first is itself, the second a plain delta, regular intervals then
** cost a zero byte each. */
static void enc_profile_cols(em_codec *c, const em_chunk_profile *ps,
                             size_t np, const int64_t *totals)
{
    const enc_order *o = (const enc_order *)(const void *)c->order.p;
    int64_t pt = 0, pdelta = 0, pdur = 0, pper = 0, ptot = 0;

    for (size_t r = 0; r < np; r++) {
        const em_chunk_profile *p = &ps[o[r].i];
        int64_t delta = em_sub_wrap(p->time_ms, pt);

        put_var(&c->col[COL_TIMES], em_zigzag(em_sub_wrap(delta, pdelta)));
        put_var(&c->col[COL_DURATIONS],
                em_zigzag(em_sub_wrap(p->duration_ns, pdur)));
        put_var(&c->col[COL_PERIODS], em_zigzag(em_sub_wrap(p->period, pper)));
        put_var(&c->col[COL_TOTALS], em_zigzag(em_sub_wrap(totals[r], ptot)));
        pdelta = r == 0 ? 0 : delta;
        pt = p->time_ms;
        pdur = p->duration_ns;
        pper = p->period;
        ptot = totals[r];
    }
}

/* Copies every sample into c->samples in time order, checking that each
** profile's stacks ascend, and sums each profile's values into TOTALS. */
static int enc_gather(em_codec *c, const em_chunk_profile *ps, size_t np,
                      int64_t *totals)
{
    const enc_order *o = (const enc_order *)(const void *)c->order.p;
    enc_sample *s = (enc_sample *)(void *)c->samples.p;
    size_t j = 0;

    for (size_t r = 0; r < np; r++) {
        const em_chunk_profile *p = &ps[o[r].i];
        int64_t sum = 0;

        for (uint32_t k = 0; k < p->n; k++) {
            if (k > 0 && p->stacks[k] <= p->stacks[k - 1])
                return em_err(EMBER_EINVAL, "chunk encode: profile %" PRIu32
                              ": stacks not ascending at sample %" PRIu32,
                              o[r].i, k);
            s[j].stack = p->stacks[k];
            s[j].prof = (uint32_t)r;
            s[j++].value = p->values[k];
            sum = em_add_wrap(sum, p->values[k]);
        }
        totals[r] = sum;
    }
    return EMBER_OK;
}

/* Stable LSD radix sort by stack, a byte per pass, into A or B (returned).
** Passes where every key has the same byte are skipped: a series' stack ids
** tend to share their high bytes. Samples arrive in profile order, so
** stability leaves each stack's samples in profile order. */
static enc_sample *sort_by_stack(enc_sample *a, enc_sample *b, size_t n)
{
    size_t hist[4][256] = {{0}};

    for (size_t i = 0; i < n; i++)
        for (unsigned d = 0; d < 4; d++)
            hist[d][(a[i].stack >> (8 * d)) & 0xff]++;
    for (unsigned d = 0; d < 4 && n > 0; d++) {
        size_t pos = 0, *h = hist[d];
        enc_sample *t;

        if (h[(a[0].stack >> (8 * d)) & 0xff] == n)
            continue;
        for (unsigned v = 0; v < 256; v++) {
            size_t cnt = h[v];
            h[v] = pos;
            pos += cnt;
        }
        for (size_t i = 0; i < n; i++)
            b[h[(a[i].stack >> (8 * d)) & 0xff]++] = a[i];
        t = a, a = b, b = t;
    }
    return a;
}

/* Writes the stack-major columns from samples sorted by stack, then by
** profile; *NSTACKS gets the number of distinct stacks. */
static int enc_sample_cols(em_codec *c, const enc_sample *s, size_t ns,
                           uint32_t *nstacks)
{
    uint64_t nst = 0;
    uint32_t prev = 0;

    for (size_t i = 0, j; i < ns; i = j) {
        put_var(&c->col[COL_STACKS], s[i].stack - prev);
        put_var(&c->col[COL_PROFILES], s[i].prof);
        put_var(&c->col[COL_VALUES], em_zigzag(s[i].value));
        for (j = i + 1; j < ns && s[j].stack == s[i].stack; j++) {
            put_var(&c->col[COL_PROFILES], s[j].prof - s[j - 1].prof - 1);
            put_var(&c->col[COL_VALUES],
                    em_zigzag(em_sub_wrap(s[j].value, s[j - 1].value)));
        }
        put_var(&c->col[COL_COUNTS], j - i);
        prev = s[i].stack;
        nst++;
    }
    if (nst > EM_CHUNK_MAX_STACKS)
        return em_err(EMBER_ELIMIT, "chunk encode: %" PRIu64 " stacks, "
                      "limit %u", nst, EM_CHUNK_MAX_STACKS);
    *nstacks = (uint32_t)nst;
    return EMBER_OK;
}

static bool stacks_rise(const em_chunk_profile *p)
{
    for (uint32_t i = 1; i < p->n; i++)
        if (p->stacks[i] <= p->stacks[i - 1])
            return false;
    return true;
}

/* Builds all eight raw columns in c->col. */
static int enc_columns(em_codec *c, const em_chunk_profile *ps, size_t np,
                       uint64_t ns, uint32_t *nstacks)
{
    enc_sample *sorted;
    int64_t *totals;
    /* One profile whose stacks rise is in stack order already: it needs
    ** neither the sort nor its second array, 16 bytes a sample at the
    ** peak of a big import (issue 12). */
    size_t arrays = np == 1 && stacks_rise(&ps[0]) ? 1 : 2;
    int rc;

    rc = scratch_reserve(&c->samples, (size_t)ns * arrays *
                        sizeof(enc_sample) + np * sizeof *totals);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "chunk encode: %" PRIu64 " samples", ns);
    /* the totals live after the sample arrays: same alignment as values */
    totals = (int64_t *)(void *)(c->samples.p + ns * arrays *
                                 sizeof(enc_sample));
    rc = enc_gather(c, ps, np, totals);
    if (rc != EMBER_OK)
        return rc;
    enc_profile_cols(c, ps, np, totals);
    sorted = (enc_sample *)(void *)c->samples.p;
    if (arrays == 2)
        sorted = sort_by_stack(sorted, sorted + ns, ns);
    return enc_sample_cols(c, sorted, ns, nstacks);
}

/* Appends column K to OUT, compressed when that is shorter, and fills its
** directory entry at DIRENT (an offset into OUT: OUT may move). */
static int enc_store(em_codec *c, size_t k, int level, em_buf *out,
                     size_t dirent)
{
    const em_buf *raw = &c->col[k];
    size_t stored = raw->len, bound = ZSTD_compressBound(raw->len);
    uint8_t enc = ENC_RAW;
    int rc;

    if (raw->len > UINT32_MAX)
        return em_err(EMBER_ELIMIT, "chunk encode: %s column: %zu bytes",
                      col_name[k], raw->len);
    rc = em_buf_reserve(out, bound > raw->len ? bound : raw->len);
    if (rc == EMBER_OK && raw->len >= CHUNK_RAW_BELOW && c->cctx == NULL &&
        (c->cctx = ZSTD_createCCtx_advanced(zstd_mem)) == NULL)
        rc = em_err(EMBER_ENOMEM, "chunk encode: zstd context");
    if (rc != EMBER_OK)
        return rc;
    if (raw->len >= CHUNK_RAW_BELOW) {
        size_t r = ZSTD_compressCCtx(c->cctx, out->p + out->len, bound,
                                     raw->p, raw->len, level);
        if (ZSTD_isError(r))
            return zstd_fail(r, EMBER_EIO, col_name[k], "compress");
        if (r < raw->len)
            stored = r, enc = ENC_ZSTD;
    }
    if (enc == ENC_RAW && raw->len > 0)
        memcpy(out->p + out->len, raw->p, raw->len);
    out->len += stored;
    out->p[dirent] = (uint8_t)k;
    out->p[dirent + 1] = enc;
    em_put_le32(out->p + dirent + 2, (uint32_t)raw->len);
    em_put_le32(out->p + dirent + 6, (uint32_t)stored);
    return EMBER_OK;
}

static void hdr_write(uint8_t *p, const em_chunk_header *h)
{
    em_put_le32(p, CHUNK_MAGIC);
    p[4] = h->version;
    p[5] = h->flags;
    p[6] = CHUNK_NCOLS;
    p[7] = 0;
    em_put_le32(p + 12, h->nprofiles);
    em_put_le32(p + 16, h->nstacks);
    em_put_le64(p + 20, h->nsamples);
    em_put_le64(p + 28, (uint64_t)h->min_time);
    em_put_le64(p + 36, (uint64_t)h->max_time);
}

/* Appends header, directory and columns to OUT, then seals the checksum. */
static int enc_write(em_codec *c, const em_chunk_header *h, int level,
                     em_buf *out)
{
    size_t at = out->len, dir = CHUNK_HDR + CHUNK_NCOLS * CHUNK_DIRENT;
    int rc = em_buf_reserve(out, dir);

    if (rc != EMBER_OK)
        return em_err_prefix(rc, "chunk encode: header");
    out->len += dir;
    for (size_t k = 0; k < CHUNK_NCOLS && rc == EMBER_OK; k++)
        rc = enc_store(c, k, level, out, at + CHUNK_HDR + k * CHUNK_DIRENT);
    if (rc != EMBER_OK)
        return rc;
    hdr_write(out->p + at, h);
    em_put_le32(out->p + at + CHUNK_CRC_OFF,
                chunk_crc(out->p + at, out->len - at));
    return EMBER_OK;
}

static int chunk_encode(em_codec *c, const em_chunk_profile *ps, size_t np,
                        unsigned flags, int level, em_buf *out)
{
    em_chunk_header h = { .version = EM_CHUNK_VERSION,
                          .flags = (uint8_t)flags,
                          .nprofiles = (uint32_t)np };
    const enc_order *o;
    int rc = enc_check(ps, np, flags, &h.nsamples);

    if (rc == EMBER_OK)
        rc = enc_order_profiles(c, ps, np);
    if (rc == EMBER_OK)
        rc = enc_reserve(c, np, h.nsamples);
    if (rc == EMBER_OK)
        rc = enc_columns(c, ps, np, h.nsamples, &h.nstacks);
    if (rc != EMBER_OK)
        return rc;
    o = (const enc_order *)(const void *)c->order.p;
    if (np > 0) {
        h.min_time = o[0].t;
        h.max_time = o[np - 1].t;
    }
    return enc_write(c, &h, level, out);
}

int em_chunk_encode(em_codec *c, const em_chunk_profile *ps, size_t np,
                    unsigned flags, int level, em_buf *out)
{
    em_codec *tmp = NULL;
    size_t start = out->len;
    int rc = EMBER_OK;

    if (c == NULL)
        rc = em_codec_new(&tmp), c = tmp;
    if (rc == EMBER_OK)
        rc = chunk_encode(c, ps, np, flags, level, out);
    if (rc != EMBER_OK)
        out->len = start;   /* a failed encode appends nothing */
    if (c != NULL)
        codec_trim(c);
    em_codec_free(tmp);
    return rc;
}

/* ---- header and directory ----------------------------------------------- */

/* Checks the counts against the limits and against each other. */
static int hdr_check_counts(const em_chunk_header *h)
{
    if (h->nprofiles > EM_CHUNK_MAX_PROFILES || h->nstacks >
        EM_CHUNK_MAX_STACKS || h->nsamples > EM_CHUNK_MAX_SAMPLES)
        return EM_CORRUPT("chunk: header: %" PRIu32 " profiles, %" PRIu32
                          " stacks, %" PRIu64 " samples exceed the limits",
                          h->nprofiles, h->nstacks, h->nsamples);
    if (h->nstacks > h->nsamples ||
        h->nsamples > (uint64_t)h->nstacks * h->nprofiles)
        return EM_CORRUPT("chunk: header: %" PRIu64 " samples cannot fill %"
                          PRIu32 " stacks over %" PRIu32 " profiles",
                          h->nsamples, h->nstacks, h->nprofiles);
    if (h->min_time > h->max_time ||
        (h->nprofiles == 0 && (h->min_time != 0 || h->max_time != 0)))
        return EM_CORRUPT("chunk: header: bad time span [%" PRId64 ", %"
                          PRId64 "] for %" PRIu32 " profiles", h->min_time,
                          h->max_time, h->nprofiles);
    return EMBER_OK;
}

/* The header of the LEN bytes at BUF, whose checksum CHECK_CRC says
** whether to verify (a caller that read the header just before did). */
static int header_parse(const uint8_t *buf, size_t len, bool check_crc,
                        em_chunk_header *h)
{
    memset(h, 0, sizeof *h);
    if (len < CHUNK_HDR)
        return EM_CORRUPT("chunk: %zu bytes, shorter than a header", len);
    if (check_crc && chunk_crc(buf, len) != em_get_le32(buf + CHUNK_CRC_OFF))
        return EM_CORRUPT("chunk: checksum mismatch");
    if (em_get_le32(buf) != CHUNK_MAGIC)
        return EM_CORRUPT("chunk: bad magic %08" PRIx32, em_get_le32(buf));
    /* Past the checksum, odd values were written on purpose: by a newer
    ** writer this build does not understand. */
    if (buf[4] != EM_CHUNK_VERSION || (buf[5] & ~EM_CHUNK_HEAD) || buf[7])
        return em_err(EMBER_EFORMAT, "chunk: version %u, flags %#x, "
                      "reserved %u: this build reads version %d",
                      buf[4], buf[5], buf[7], EM_CHUNK_VERSION);
    if (buf[6] < CHUNK_NCOLS || buf[6] > CHUNK_MAX_COLS)
        return EM_CORRUPT("chunk: %u columns", buf[6]);
    if (len < CHUNK_HDR + (size_t)buf[6] * CHUNK_DIRENT)
        return EM_CORRUPT("chunk: %zu bytes, shorter than its directory",
                          len);
    h->version = buf[4];
    h->flags = buf[5];
    h->nprofiles = em_get_le32(buf + 12);
    h->nstacks = em_get_le32(buf + 16);
    h->nsamples = em_get_le64(buf + 20);
    h->min_time = (int64_t)em_get_le64(buf + 28);
    h->max_time = (int64_t)em_get_le64(buf + 36);
    return hdr_check_counts(h);
}

int em_chunk_header_read(const uint8_t *buf, size_t len, em_chunk_header *h)
{
    return header_parse(buf, len, true, h);
}

int em_chunk_header_peek(const uint8_t *buf, size_t len, em_chunk_header *h,
                         uint32_t *crc)
{
    int rc = header_parse(buf, len, false, h);

    *crc = rc == EMBER_OK ? em_get_le32(buf + CHUNK_CRC_OFF) : 0;
    return rc;
}

int em_chunk_crc_check(const uint8_t *buf, size_t len)
{
    if (len < CHUNK_HDR)
        return EM_CORRUPT("chunk: %zu bytes, shorter than a header", len);
    if (chunk_crc(buf, len) != em_get_le32(buf + CHUNK_CRC_OFF))
        return EM_CORRUPT("chunk: checksum mismatch");
    return EMBER_OK;
}

/* Checks a v1 column's entry against the count of varints it must hold:
** each takes 1 to 10 bytes, and zstd cannot expand past CHUNK_ZSTD_RATIO. */
static int dir_check(size_t k, const col_ref *d, uint64_t count)
{
    if (d->enc != ENC_RAW && d->enc != ENC_ZSTD)
        return em_err(EMBER_EFORMAT, "chunk: %s column: encoding %u: this "
                      "build reads version %d", col_name[k], d->enc,
                      EM_CHUNK_VERSION);
    if (d->raw < count || d->raw > count * EM_VARINT_MAX)
        return EM_CORRUPT("chunk: %s column: %" PRIu32 " bytes cannot hold %"
                          PRIu64 " varints", col_name[k], d->raw, count);
    if (d->enc == ENC_RAW && d->raw != d->stored)
        return EM_CORRUPT("chunk: %s column: raw, yet %" PRIu32 " bytes "
                          "stored for %" PRIu32, col_name[k], d->stored,
                          d->raw);
    if (d->enc == ENC_ZSTD && d->raw > (uint64_t)d->stored * CHUNK_ZSTD_RATIO)
        return EM_CORRUPT("chunk: %s column: %" PRIu32 " zstd bytes cannot "
                          "expand to %" PRIu32, col_name[k], d->stored,
                          d->raw);
    return EMBER_OK;
}

/* Reads the directory of a chunk whose header passed: fills D with the v1
** columns and proves the stored lengths tile the rest of the chunk. */
static int dir_read(const uint8_t *buf, size_t len, const em_chunk_header *h,
                    col_ref d[CHUNK_NCOLS])
{
    const uint64_t count[CHUNK_NCOLS] = {
        h->nprofiles, h->nprofiles, h->nprofiles, h->nprofiles,
        h->nstacks, h->nstacks, h->nsamples, h->nsamples };
    size_t ncols = buf[6], off = CHUNK_HDR + ncols * CHUNK_DIRENT;
    int rc = EMBER_OK;

    for (size_t k = 0; k < ncols && rc == EMBER_OK; k++) {
        const uint8_t *e = buf + CHUNK_HDR + k * CHUNK_DIRENT;
        col_ref r = { buf + off, em_get_le32(e + 2), em_get_le32(e + 6),
                      e[1] };

        if (k < CHUNK_NCOLS ? e[0] != k : e[0] <= e[-CHUNK_DIRENT])
            return EM_CORRUPT("chunk: directory entry %zu has column id %u",
                              k, e[0]);
        if (r.stored > len - off)
            return EM_CORRUPT("chunk: column %u: %" PRIu32 " bytes stored, "
                              "%zu left", e[0], r.stored, len - off);
        if (k < CHUNK_NCOLS)
            rc = dir_check(k, &r, count[k]), d[k] = r;
        off += r.stored;
    }
    if (rc == EMBER_OK && off != len)
        return EM_CORRUPT("chunk: %zu bytes after the last column",
                          len - off);
    return rc;
}

/* ---- decoder ------------------------------------------------------------ */

/* em_varint_get with the one-byte case inlined: most gaps and deltas are
** small and this runs once per sample. */
static inline bool vget(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    if (*p < end && **p < 0x80) {
        *v = *(*p)++;
        return true;
    }
    return em_varint_get(p, end, v) == 0;
}

/* Points R at column K's varints, decompressing into c->scratch if need be
** (so R lives until the next column is opened). */
static int col_open(em_codec *c, const col_ref *d, size_t k, col_rd *r)
{
    unsigned long long fcs;
    size_t n;
    int rc;

    r->name = col_name[k];
    r->p = d->p;
    r->end = d->p + d->raw;
    if (d->enc == ENC_RAW)
        return EMBER_OK;
    fcs = ZSTD_getFrameContentSize(d->p, d->stored);
    if (fcs != d->raw || ZSTD_findFrameCompressedSize(d->p, d->stored) !=
        d->stored)
        return EM_CORRUPT("chunk: %s column: not one zstd frame of %" PRIu32
                          " bytes", r->name, d->raw);
    if (c->dctx == NULL &&
        (c->dctx = ZSTD_createDCtx_advanced(zstd_mem)) == NULL)
        return em_err(EMBER_ENOMEM, "chunk: zstd decompression context");
    rc = scratch_reserve(&c->scratch, d->raw);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "chunk: %s column", r->name);
    n = ZSTD_decompressDCtx(c->dctx, c->scratch.p, d->raw, d->p, d->stored);
    if (ZSTD_isError(n))
        return zstd_fail(n, EMBER_ECORRUPT, r->name, "decompress");
    if (n != d->raw)
        return EM_CORRUPT("chunk: %s column: %zu bytes, expected %" PRIu32,
                          r->name, n, d->raw);
    r->p = c->scratch.p;
    r->end = c->scratch.p + n;
    return EMBER_OK;
}

static int col_done(const col_rd *r)
{
    if (r->p != r->end)
        return EM_CORRUPT("chunk: %s column: %td bytes past its last varint",
                          r->name, r->end - r->p);
    return EMBER_OK;
}

/* Decodes N delta-coded values (the first against 0). */
static int dec_delta(col_rd *r, uint32_t n, int64_t *out)
{
    int64_t v = 0;
    uint64_t u;

    for (uint32_t i = 0; i < n; i++) {
        if (!vget(&r->p, r->end, &u))
            return EM_CORRUPT("chunk: %s column: bad varint at %" PRIu32,
                              r->name, i);
        v = em_add_wrap(v, em_unzigzag(u));
        out[i] = v;
    }
    return col_done(r);
}

/* Decodes the delta-of-delta times and checks their order and span. */
static int dec_times(col_rd *r, const em_chunk_header *h, int64_t *t)
{
    int64_t prev = 0, pdelta = 0;
    uint64_t u;

    for (uint32_t i = 0; i < h->nprofiles; i++) {
        int64_t delta;

        if (!vget(&r->p, r->end, &u))
            return EM_CORRUPT("chunk: times column: bad varint at %" PRIu32,
                              i);
        delta = em_add_wrap(pdelta, em_unzigzag(u));
        t[i] = em_add_wrap(prev, delta);
        if (i > 0 && t[i] < prev)
            return EM_CORRUPT("chunk: times column: profile %" PRIu32
                              " at %" PRId64 " is before %" PRId64, i, t[i],
                              prev);
        pdelta = i == 0 ? 0 : delta;
        prev = t[i];
    }
    if (h->nprofiles > 0 &&
        (t[0] != h->min_time || t[h->nprofiles - 1] != h->max_time))
        return EM_CORRUPT("chunk: times column: span [%" PRId64 ", %" PRId64
                          "] differs from the header's", t[0],
                          t[h->nprofiles - 1]);
    return col_done(r);
}

/* Decodes the stack ids: the first, then gaps of at least 1. */
static int dec_stacks(col_rd *r, uint32_t ns, uint32_t *stacks)
{
    uint64_t s = 0, u;

    for (uint32_t i = 0; i < ns; i++) {
        if (!vget(&r->p, r->end, &u))
            return EM_CORRUPT("chunk: stacks column: bad varint at %" PRIu32,
                              i);
        if ((i > 0 && u == 0) || u > UINT32_MAX - s)
            return EM_CORRUPT("chunk: stacks column: stack %" PRIu32 " gap %"
                              PRIu64 " after id %" PRIu64, i, u, s);
        s += u;
        stacks[i] = (uint32_t)s;
    }
    return col_done(r);
}

/* Decodes the per-stack counts into START, proving they sum to nsamples. */
static int dec_counts(col_rd *r, const em_chunk_header *h, uint64_t *start)
{
    uint64_t u;

    start[0] = 0;
    for (uint32_t i = 0; i < h->nstacks; i++) {
        if (!vget(&r->p, r->end, &u))
            return EM_CORRUPT("chunk: counts column: bad varint at %" PRIu32,
                              i);
        if (u == 0 || u > h->nprofiles || u > h->nsamples - start[i])
            return EM_CORRUPT("chunk: counts column: stack %" PRIu32 " has %"
                              PRIu64 " samples, %" PRIu64 " left", i, u,
                              h->nsamples - start[i]);
        start[i + 1] = start[i] + u;
    }
    if (start[h->nstacks] != h->nsamples)
        return EM_CORRUPT("chunk: counts column: sum %" PRIu64 ", header "
                          "says %" PRIu64, start[h->nstacks], h->nsamples);
    return col_done(r);
}

enum { PROF_OK, PROF_VARINT, PROF_RANGE };

/* Decodes one stack's N > 0 profile indexes into OUT: the first, then
** gap - 1, so they strictly ascend by construction and only the bound
** needs a check. Returns PROF_*; *P advances. */
static inline int dec_profile_run(const uint8_t **p, const uint8_t *end,
                                  uint64_t n, uint64_t np, uint32_t *out)
{
    uint64_t idx, g;

    if (!vget(p, end, &idx))
        return PROF_VARINT;
    if (idx >= np)
        return PROF_RANGE;
    out[0] = (uint32_t)idx;
    for (uint64_t k = 1; k < n; k++) {
        if (!vget(p, end, &g))
            return PROF_VARINT;
        if (g >= np - idx - 1)
            return PROF_RANGE;
        idx += g + 1;
        out[k] = (uint32_t)idx;
    }
    return PROF_OK;
}

static int dec_profiles(col_rd *r, const em_chunk *ch, uint32_t *prof)
{
    const uint8_t *p = r->p, *end = r->end;
    const uint64_t *start = ch->stack_start;

    for (uint32_t s = 0; s < ch->h.nstacks; s++) {
        int why = dec_profile_run(&p, end, start[s + 1] - start[s],
                                  ch->h.nprofiles, prof + start[s]);
        if (why == PROF_VARINT)
            return EM_CORRUPT("chunk: profiles column: stack %" PRIu32
                              ": bad varint", s);
        if (why == PROF_RANGE)
            return EM_CORRUPT("chunk: profiles column: stack %" PRIu32
                              ": index past %" PRIu32 " profiles", s,
                              ch->h.nprofiles);
    }
    r->p = p;
    return col_done(r);
}

/* Decodes each stack's values: the first, then deltas against the stack's
** previous value. */
static int dec_values(col_rd *r, const em_chunk *ch, int64_t *val,
                      bool *small)
{
    const uint8_t *p = r->p, *end = r->end;
    uint64_t wide = 0;              /* bits of value + 2^31 past bit 31 */

    for (uint32_t s = 0; s < ch->h.nstacks; s++) {
        uint64_t k = ch->stack_start[s], e = ch->stack_start[s + 1], u;
        int64_t v = 0;

        for (; k < e; k++) {
            if (!vget(&p, end, &u))
                return EM_CORRUPT("chunk: values column: stack %" PRIu32
                                  ": bad varint at sample %" PRIu64, s, k);
            v = em_add_wrap(v, em_unzigzag(u));
            val[k] = v;
            wide |= (uint64_t)v + (1ull << 31);
        }
    }
    *small = (wide >> 32) == 0;
    r->p = p;
    return col_done(r);
}

/* Bytes the arrays of PARTS take for a chunk with header H. */
static size_t parts_size(const em_chunk_header *h, unsigned parts)
{
    size_t np = h->nprofiles, ns = h->nstacks, nsm = (size_t)h->nsamples;
    size_t size = 0;

    size += parts & EM_PART_TIMES ? 3 * np * 8 : 0;
    size += parts & EM_PART_TOTALS ? np * 8 : 0;
    size += parts & EM_PART_STACKS ? (ns + 1) * 8 + ns * 4 : 0;
    size += parts & EM_PART_VALUES ? nsm * 8 : 0;
    size += parts & EM_PART_PROFILES ? nsm * 4 : 0;
    return size;
}

/* Carves one new allocation, *MEM, into the arrays of PARTS in CH: 8-byte
** arrays first, so every array is aligned. Counts were proven small by
** dir_read. */
static int parts_alloc(em_chunk *ch, unsigned parts, void **mem,
                       size_t *bytes)
{
    const em_chunk_header *h = &ch->h;
    size_t np = h->nprofiles, ns = h->nstacks, nsm = (size_t)h->nsamples;
    size_t size = parts_size(h, parts), at = 0;
    uint8_t *m;

    *mem = m = em_malloc(size);
    if (m == NULL)
        return em_err(EMBER_ENOMEM, "chunk: %zu bytes for decoded columns",
                      size);
    *bytes = size;
#define CARVE(field, n) \
    (ch->field = (void *)(m + at), at += (n) * sizeof *ch->field)
    if (parts & EM_PART_TIMES) {
        CARVE(time_ms, np);
        CARVE(duration_ns, np);
        CARVE(period, np);
    }
    if (parts & EM_PART_TOTALS)
        CARVE(total, np);
    if (parts & EM_PART_STACKS)
        CARVE(stack_start, ns + 1);
    if (parts & EM_PART_VALUES)
        CARVE(sample_value, nsm);
    if (parts & EM_PART_STACKS)
        CARVE(stacks, ns);
    if (parts & EM_PART_PROFILES)
        CARVE(sample_profile, nsm);
#undef CARVE
    return EMBER_OK;
}

/* Opens and decodes delta-coded column K of N values into OUT. */
static int col_delta(em_codec *c, const col_ref *d, size_t k, uint32_t n,
                     int64_t *out)
{
    col_rd r;
    int rc = col_open(c, &d[k], k, &r);

    return rc == EMBER_OK ? dec_delta(&r, n, out) : rc;
}

/* Decodes the per-profile parts PARTS asks for. */
static int dec_profile_cols(em_codec *c, const col_ref *d, em_chunk *ch,
                            unsigned parts)
{
    uint32_t np = ch->h.nprofiles;
    col_rd r;
    int rc = EMBER_OK;

    if (parts & EM_PART_TIMES) {
        rc = col_open(c, &d[COL_TIMES], COL_TIMES, &r);
        if (rc == EMBER_OK)
            rc = dec_times(&r, &ch->h, ch->time_ms);
        if (rc == EMBER_OK)
            rc = col_delta(c, d, COL_DURATIONS, np, ch->duration_ns);
        if (rc == EMBER_OK)
            rc = col_delta(c, d, COL_PERIODS, np, ch->period);
    }
    if (rc == EMBER_OK && (parts & EM_PART_TOTALS))
        rc = col_delta(c, d, COL_TOTALS, np, ch->total);
    return rc;
}

/* Decodes the stack-major parts PARTS asks for; the profiles and values
** columns need stack_start, which CH has or which STACKS brings first. */
static int dec_sample_cols(em_codec *c, const col_ref *d, em_chunk *ch,
                           unsigned parts)
{
    col_rd r;
    int rc = EMBER_OK;

    if ((parts & EM_PART_STACKS) &&
        (rc = col_open(c, &d[COL_STACKS], COL_STACKS, &r)) == EMBER_OK)
        rc = dec_stacks(&r, ch->h.nstacks, ch->stacks);
    if (rc == EMBER_OK && (parts & EM_PART_STACKS) &&
        (rc = col_open(c, &d[COL_COUNTS], COL_COUNTS, &r)) == EMBER_OK)
        rc = dec_counts(&r, &ch->h, ch->stack_start);
    if (rc == EMBER_OK && (parts & EM_PART_PROFILES) &&
        (rc = col_open(c, &d[COL_PROFILES], COL_PROFILES, &r)) == EMBER_OK)
        rc = dec_profiles(&r, ch, ch->sample_profile);
    if (rc == EMBER_OK && (parts & EM_PART_VALUES) &&
        (rc = col_open(c, &d[COL_VALUES], COL_VALUES, &r)) == EMBER_OK)
        rc = dec_values(&r, ch, ch->sample_value, &ch->small_values);
    return rc;
}

/* With both decoded, each profile's total must be the sum of its values. */
static int dec_check_totals(em_codec *c, const em_chunk *ch)
{
    size_t np = ch->h.nprofiles;
    int64_t *sum;
    int rc = scratch_reserve(&c->scratch, np * sizeof *sum);

    if (rc != EMBER_OK)
        return em_err_prefix(rc, "chunk: totals check");
    sum = (int64_t *)(void *)c->scratch.p;
    memset(sum, 0, np * sizeof *sum);
    for (uint64_t k = 0; k < ch->h.nsamples; k++)
        sum[ch->sample_profile[k]] =
            em_add_wrap(sum[ch->sample_profile[k]], ch->sample_value[k]);
    for (size_t i = 0; i < np; i++)
        if (sum[i] != ch->total[i])
            return EM_CORRUPT("chunk: totals column: profile %zu total %"
                              PRId64 ", its values sum to %" PRId64, i,
                              ch->total[i], sum[i]);
    return EMBER_OK;
}

unsigned em_chunk_parts(const em_chunk *ch)
{
    return (ch->time_ms != NULL ? EM_PART_TIMES : 0) |
           (ch->total != NULL ? EM_PART_TOTALS : 0) |
           (ch->stack_start != NULL ? EM_PART_STACKS : 0) |
           (ch->sample_value != NULL ? EM_PART_VALUES : 0) |
           (ch->sample_profile != NULL ? EM_PART_PROFILES : 0);
}

void em_chunk_adopt(em_chunk *dst, const em_chunk *src, unsigned parts)
{
    if (parts & EM_PART_TIMES) {
        dst->time_ms = src->time_ms;
        dst->duration_ns = src->duration_ns;
        dst->period = src->period;
    }
    if (parts & EM_PART_TOTALS)
        dst->total = src->total;
    if (parts & EM_PART_STACKS) {
        dst->stacks = src->stacks;
        dst->stack_start = src->stack_start;
    }
    if (parts & EM_PART_VALUES) {
        dst->sample_value = src->sample_value;
        dst->small_values = src->small_values;
    }
    if (parts & EM_PART_PROFILES)
        dst->sample_profile = src->sample_profile;
}

/* Decodes into a copy of CH the parts of WANT it lacks, then hands the
** copy back: on failure CH is as it was. */
static int chunk_parts(em_codec *c, const uint8_t *buf, size_t len,
                       unsigned want, em_chunk *ch, void **mem,
                       size_t *bytes)
{
    const unsigned sums = EM_PART_TOTALS | EM_PART_VALUES | EM_PART_PROFILES;
    unsigned have = em_chunk_parts(ch), add;
    col_ref d[CHUNK_NCOLS];
    em_chunk t = *ch;
    int rc;

    if (want & (EM_PART_VALUES | EM_PART_PROFILES))
        want |= EM_PART_STACKS;     /* their runs are the stacks' counts */
    add = want & ~have;
    if (add == 0)
        return EMBER_OK;
    rc = dir_read(buf, len, &t.h, d);
    if (rc == EMBER_OK)
        rc = parts_alloc(&t, add, mem, bytes);
    if (rc == EMBER_OK)
        rc = dec_profile_cols(c, d, &t, add);
    if (rc == EMBER_OK)
        rc = dec_sample_cols(c, d, &t, add);
    if (rc == EMBER_OK && ((have | add) & sums) == sums && (add & sums))
        rc = dec_check_totals(c, &t);
    if (rc != EMBER_OK) {
        em_free(*mem);
        *mem = NULL;
        *bytes = 0;
        return rc;
    }
    t.mem = ch->mem;        /* MEM may be &ch->mem (em_chunk_decode) */
    *ch = t;
    return EMBER_OK;
}

/* Skips N varints from *P: each ends at a byte below 0x80. Eight bytes at
** a time while fewer than N end in them, then byte by byte. The ends of a
** word are counted by a multiply, the build not assuming a popcount
** instruction. */
static bool vskip(const uint8_t **p, const uint8_t *end, uint64_t n)
{
    const uint8_t *q = *p;

    while (n > 0 && end - q >= 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        unsigned ends = (unsigned)((((~w & 0x8080808080808080ull) >> 7) *
                                    0x0101010101010101ull) >> 56);
        if (ends >= n)
            break;
        n -= ends;
        q += 8;
    }
    for (; n > 0 && q < end; q++)
        n -= *q < 0x80;
    *p = q;
    return n == 0;
}

/* The kept runs' profile indexes, from the opened profiles column R. */
static int kept_profiles(col_rd *r, const em_chunk *ch, const em_kept *kept,
                         uint32_t n, uint32_t *prof)
{
    const uint8_t *p = r->p;
    uint64_t at = 0;                /* the sample P stands at */

    for (uint32_t k = 0; k < n; k++) {
        int why = vskip(&p, r->end, kept[k].at - at) ? PROF_OK : PROF_VARINT;
        if (why == PROF_OK)
            why = dec_profile_run(&p, r->end, kept[k].n, ch->h.nprofiles,
                                  prof + kept[k].at);
        if (why != PROF_OK)
            return EM_CORRUPT("chunk: profiles column: stack %" PRIu32
                              ": %s", kept[k].stack,
                              why == PROF_VARINT ? "bad varint"
                                                 : "index past the profiles");
        at = (uint64_t)kept[k].at + kept[k].n;
    }
    return EMBER_OK;
}

/* The kept runs' values, from the opened values column R. */
static int kept_values(col_rd *r, const em_kept *kept, uint32_t n,
                       int64_t *val, bool *small)
{
    const uint8_t *p = r->p;
    uint64_t at = 0, wide = 0, u;

    for (uint32_t k = 0; k < n; k++) {
        uint64_t e = (uint64_t)kept[k].at + kept[k].n;
        int64_t v = 0;
        if (!vskip(&p, r->end, kept[k].at - at))
            return EM_CORRUPT("chunk: values column: bad varint before "
                              "sample %" PRIu32, kept[k].at);
        for (uint64_t j = kept[k].at; j < e; j++) {
            if (!vget(&p, r->end, &u))
                return EM_CORRUPT("chunk: values column: stack %" PRIu32
                                  ": bad varint at sample %" PRIu64,
                                  kept[k].stack, j);
            v = em_add_wrap(v, em_unzigzag(u));
            val[j] = v;
            wide |= (uint64_t)v + (1ull << 31);
        }
        at = e;
    }
    *small = (wide >> 32) == 0;
    return EMBER_OK;
}

/* Checks that KEPT's runs are those of CH's stacks, in order. */
static int kept_check(const em_chunk *ch, const em_kept *kept, uint32_t n)
{
    uint64_t at = 0;

    for (uint32_t k = 0; k < n; k++) {
        if (kept[k].at < at || (uint64_t)kept[k].at + kept[k].n >
                                   ch->h.nsamples)
            return em_err(EMBER_EINVAL, "chunk decode: kept run %" PRIu32
                          " out of order or past the samples", k);
        at = (uint64_t)kept[k].at + kept[k].n;
    }
    return EMBER_OK;
}

int em_chunk_decode_kept(em_codec *c, const uint8_t *buf, size_t len,
                         unsigned parts, em_chunk *ch, const em_kept *kept,
                         uint32_t n, void **mem, size_t *bytes)
{
    em_codec *tmp = NULL;
    col_ref d[CHUNK_NCOLS];
    em_chunk t = *ch;
    col_rd r;
    int rc = EMBER_OK;

    *mem = NULL;
    *bytes = 0;
    if ((parts & ~(unsigned)(EM_PART_VALUES | EM_PART_PROFILES)) ||
        ch->stack_start == NULL || (em_chunk_parts(ch) & parts))
        return em_err(EMBER_EINVAL, "chunk decode: kept runs of parts %#x",
                      parts);
    if (c == NULL)
        rc = em_codec_new(&tmp), c = tmp;
    if (rc == EMBER_OK)
        rc = kept_check(ch, kept, n);
    if (rc == EMBER_OK)
        rc = dir_read(buf, len, &t.h, d);
    if (rc == EMBER_OK)
        rc = parts_alloc(&t, parts, mem, bytes);
    if (rc == EMBER_OK && (parts & EM_PART_PROFILES) &&
        (rc = col_open(c, &d[COL_PROFILES], COL_PROFILES, &r)) == EMBER_OK)
        rc = kept_profiles(&r, &t, kept, n, t.sample_profile);
    if (rc == EMBER_OK && (parts & EM_PART_VALUES) &&
        (rc = col_open(c, &d[COL_VALUES], COL_VALUES, &r)) == EMBER_OK)
        rc = kept_values(&r, kept, n, t.sample_value, &t.small_values);
    if (c != NULL)
        codec_trim(c);
    em_codec_free(tmp);
    if (rc != EMBER_OK) {
        em_free(*mem);
        *mem = NULL;
        *bytes = 0;
        return rc;
    }
    t.mem = ch->mem;
    *ch = t;
    return EMBER_OK;
}

int em_chunk_decode_parts(em_codec *c, const uint8_t *buf, size_t len,
                          unsigned parts, em_chunk *ch, void **mem,
                          size_t *bytes)
{
    em_codec *tmp = NULL;
    int rc = EMBER_OK;

    *mem = NULL;
    *bytes = 0;
    if (parts & ~(unsigned)EM_PART_ALL)
        return em_err(EMBER_EINVAL, "chunk decode: unknown parts %#x", parts);
    if (c == NULL)
        rc = em_codec_new(&tmp), c = tmp;
    if (rc == EMBER_OK)
        rc = chunk_parts(c, buf, len, parts, ch, mem, bytes);
    if (c != NULL)
        codec_trim(c);
    em_codec_free(tmp);
    return rc;
}

/* The parts behind em_chunk_decode's columns. */
static unsigned cols_parts(unsigned cols)
{
    return (cols & EM_COL_TIMES ? EM_PART_TIMES : 0) |
           (cols & EM_COL_TOTALS ? EM_PART_TOTALS : 0) |
           (cols & EM_COL_SAMPLES ? EM_PART_STACKS | EM_PART_VALUES |
                                    EM_PART_PROFILES : 0);
}

static int chunk_decode(em_codec *c, const uint8_t *buf, size_t len,
                        unsigned cols, em_chunk *ch)
{
    size_t bytes;
    int rc = header_parse(buf, len, !(cols & EM_COL_CRC_DONE), &ch->h);

    if (rc == EMBER_OK)
        rc = chunk_parts(c, buf, len, cols_parts(cols), ch, &ch->mem, &bytes);
    return rc;
}

int em_chunk_decode(em_codec *c, const uint8_t *buf, size_t len,
                    unsigned cols, em_chunk *out)
{
    em_codec *tmp = NULL;
    int rc = EMBER_OK;

    memset(out, 0, sizeof *out);
    if (cols & ~(unsigned)(EM_COL_ALL | EM_COL_CRC_DONE))
        return em_err(EMBER_EINVAL, "chunk decode: unknown columns %#x",
                      cols);
    if (buf == NULL && len > 0)
        return em_err(EMBER_EINVAL, "chunk decode: no buffer");
    if (c == NULL)
        rc = em_codec_new(&tmp), c = tmp;
    if (rc == EMBER_OK)
        rc = chunk_decode(c, buf, len, cols, out);
    if (rc != EMBER_OK)
        em_chunk_release(out);
    if (c != NULL)
        codec_trim(c);
    em_codec_free(tmp);
    return rc;
}

void em_chunk_release(em_chunk *ch)
{
    em_free(ch->mem);
    memset(ch, 0, sizeof *ch);
}

/* ---- transpose ---------------------------------------------------------- */

int em_chunk_transpose(const em_chunk *ch, em_chunk_profile **out)
{
    size_t np = ch->h.nprofiles, nsm = (size_t)ch->h.nsamples;
    em_chunk_profile *ps;
    int64_t *vals;
    uint32_t *stk;

    *out = NULL;
    if (ch->time_ms == NULL || ch->total == NULL || ch->stack_start == NULL)
        return em_err(EMBER_EINVAL, "chunk transpose: needs every column");
    ps = em_malloc(np * sizeof *ps + nsm * (sizeof *vals + sizeof *stk));
    if (ps == NULL)
        return em_err(EMBER_ENOMEM, "chunk transpose: %zu samples", nsm);
    vals = (int64_t *)(void *)(ps + np);
    stk = (uint32_t *)(void *)(vals + nsm);
    for (size_t i = 0; i < np; i++)
        ps[i] = (em_chunk_profile){ ch->time_ms[i], ch->duration_ns[i],
                                    ch->period[i], NULL, NULL, 0 };
    for (size_t k = 0; k < nsm; k++)
        ps[ch->sample_profile[k]].n++;
    for (size_t i = 0, at = 0; i < np; i++) {
        ps[i].stacks = stk + at;
        ps[i].values = vals + at;
        at += ps[i].n;
        ps[i].n = 0;        /* counts again as the samples land */
    }
    /* Walking stacks in ascending order leaves each profile's ascending. */
    for (uint32_t s = 0; s < ch->h.nstacks; s++)
        for (uint64_t k = ch->stack_start[s]; k < ch->stack_start[s + 1];
             k++) {
            em_chunk_profile *p = &ps[ch->sample_profile[k]];
            size_t at = (size_t)(p->stacks - (const uint32_t *)stk) + p->n++;
            stk[at] = ch->stacks[s];
            vals[at] = ch->sample_value[k];
        }
    *out = ps;
    return EMBER_OK;
}
