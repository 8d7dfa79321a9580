/*
** engine/block_read.c: reading a block file (engine/block.h; the layout is
** in engine/block_int.h, every byte in docs/file-format.md, "Blocks").
**
** The file is mapped read-only and treated as hostile. Open checks the
** trailer, the footer's checksum, its counts against each other and the
** limits, and the section directory (sections tile the bytes between the
** chunks and the footer exactly, each sized for the count of values it
** must hold): after that every size that could make an allocation is
** bounded by the file's own size. Three groups of sections load on first
** use, under the block's mutex: the symbols, the postings and the chunk
** index. Each section's checksum is checked before it is decompressed
** (to exactly its recorded size) and decoded, and every reference is
** checked against its table, so what a load hands out can be indexed
** without further checks: parent[i] < i or EM_BLOCK_ROOT, locations,
** functions, mappings and strings exist, strings strictly ascend, labels
** ascend by name, chunks lie inside the chunk area and tile it.
**
** A failed load is remembered with its message (a want of memory is not:
** it is tried again), so every later call fails the same way.
*/
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_createDCtx_advanced, customMem */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "engine/block_int.h"
#include "engine/store.h"

const char *const em_blk_sec_names[BLK_NSEC] = {
    "strings.prefix", "strings.length", "strings.bytes", "mappings",
    "functions.name", "functions.system_name", "functions.file",
    "functions.start_line", "locations.mapping", "locations.address",
    "locations.nlines", "lines.function", "lines.line", "nodes.parent",
    "nodes.location", "series.type", "series.nlabels", "labels.name",
    "labels.value", "postings.name", "postings.value", "postings.count",
    "postings.series", "index.series", "index.min_time", "index.span",
    "index.offset", "index.length"
};

/* A directory entry. */
typedef struct blk_sec {
    uint8_t enc;
    uint32_t crc, stored, raw;
    uint64_t off;
} blk_sec;

/* A group of sections loaded on first use. */
typedef struct lazy {
    bool done;
    int rc;
    char *msg;                      /* why it failed (em_strdup'd) */
} lazy;

struct em_block {
    char *path;
    const uint8_t *map;
    size_t size;
    uint8_t head[BLK_HEADER];       /* the header, read apart from the map */
    em_block_info info;
    uint64_t chunks_end, footer;    /* where the sections, the footer start */
    uint32_t npost;
    size_t nsec;                    /* directory entries, newer ones too */
    blk_sec sec[BLK_NSEC];
    bool secs_read;                 /* their read from disk was asked for */
    pthread_mutex_t mu;
    ZSTD_DCtx *dctx;                /* under mu */
    lazy lz_names, lz_syms, lz_post, lz_idx;

    em_block_syms syms;             /* points at the arrays below */
    uint32_t *str_off;
    char *str_bytes;
    em_bmapping *mappings;
    em_bfunction *functions;
    em_blocation *locations;
    em_bline *lines;
    uint32_t *parent, *loc, *depth;
    em_bseries *series;
    uint32_t *lname, *lvalue;
    uint32_t type_name;             /* string id of "__type__", or
                                    ** UINT32_MAX without series */

    uint32_t *pname, *pvalue;       /* postings: (name, value) pairs */
    uint64_t *pfirst;               /* [npost + 1] into pseries */
    uint32_t *pseries;

    em_bchunk *chunks;              /* by series, then time */
    uint64_t *sfirst;               /* [nseries + 1] into chunks */
};

/* A section being read: its values lie in [p, end). */
typedef struct bcol {
    em_block *b;
    int id;
    const uint8_t *base, *p, *end;
    uint8_t *mem;                   /* decompressed bytes, or NULL */
} bcol;

#define SEC(id) em_blk_sec_names[id]
#define TRY(x)                                                              \
    do {                                                                    \
        if ((rc = (x)) != EMBER_OK)                                         \
            goto out;                                                       \
    } while (0)

/* ---- sections --------------------------------------------------------------- */

/* Asks the kernel to read [OFF, OFF + LEN) of the file ahead, in one
** request: the mapping does no read-around (blk_map). */
static void blk_prefetch(const em_block *b, uint64_t off, uint64_t len)
{
    if (len == 0 || off >= b->size)
        return;
    em_willneed(b->map + off, (size_t)(len < b->size - off ? len
                                                          : b->size - off));
}

static int col_inflate(em_block *b, const blk_sec *s, bcol *c)
{
    const uint8_t *src = b->map + s->off;
    size_t n;

    if (ZSTD_getFrameContentSize(src, s->stored) != s->raw ||
        ZSTD_findFrameCompressedSize(src, s->stored) != s->stored)
        return EM_CORRUPT("block %s: section %s: not one zstd frame of %"
                          PRIu32 " bytes", b->path, SEC(c->id), s->raw);
    if (b->dctx == NULL && (b->dctx = ZSTD_createDCtx_advanced(
                                (ZSTD_customMem){ blk_zstd_alloc,
                                                  blk_zstd_free, NULL }))
                               == NULL)
        return em_err(EMBER_ENOMEM, "block %s: zstd context", b->path);
    if ((c->mem = em_malloc((size_t)s->raw + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "block %s: section %s: %" PRIu32
                      " bytes", b->path, SEC(c->id), s->raw);
    n = ZSTD_decompressDCtx(b->dctx, c->mem, s->raw, src, s->stored);
    if (ZSTD_isError(n))
        return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation
                   ? em_err(EMBER_ENOMEM, "block %s: zstd", b->path)
                   : EM_CORRUPT("block %s: section %s: zstd: %s", b->path,
                                SEC(c->id), ZSTD_getErrorName(n));
    if (n != s->raw)
        return EM_CORRUPT("block %s: section %s: %zu bytes, expected %"
                          PRIu32, b->path, SEC(c->id), n, s->raw);
    c->base = c->p = c->mem;
    c->end = c->mem + n;
    return EMBER_OK;
}

/* Opens section ID for reading: its checksum first, then its bytes. */
static int col_open(em_block *b, int id, bcol *c)
{
    const blk_sec *s = &b->sec[id];
    const uint8_t *src = b->map + s->off;

    *c = (bcol){ b, id, src, src, src + s->raw, NULL };
    /* the sections lie together: read them all in one request, once */
    if (!__atomic_exchange_n(&b->secs_read, true, __ATOMIC_RELAXED))
        blk_prefetch(b, b->chunks_end, b->footer - b->chunks_end);
    if (em_crc32(0, src, s->stored) != s->crc)
        return EM_CORRUPT("block %s: section %s: checksum mismatch", b->path,
                          SEC(id));
    return s->enc == BLK_ENC_RAW ? EMBER_OK : col_inflate(b, s, c);
}

static void col_close(bcol *c)
{
    em_free(c->mem);
    c->mem = NULL;
}

/* col_get past its one-byte case, out of line: a symbol load reads
** millions of values, nearly all of one byte. */
__attribute__((noinline))
static int col_get_long(bcol *c, uint64_t *v)
{
    if (em_varint_get(&c->p, c->end, v) != 0)
        return EM_CORRUPT("block %s: section %s: bad varint at byte %td",
                          c->b->path, SEC(c->id), c->p - c->base);
    return EMBER_OK;
}

/* Inline for one and two bytes: ids, counts and small deltas, which a
** stack tree's location column is mostly made of. */
static inline int col_get(bcol *c, uint64_t *v)
{
    const uint8_t *p = c->p;

    if (__builtin_expect(c->end - p >= 2, 1)) {
        if (p[0] < 0x80) {
            *v = p[0];
            c->p = p + 1;
            return EMBER_OK;
        }
        if (p[1] < 0x80) {
            *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
            c->p = p + 2;
            return EMBER_OK;
        }
    }
    return col_get_long(c, v);
}

__attribute__((noinline))
static int col_past(const bcol *c, uint64_t v, uint64_t limit)
{
    return EM_CORRUPT("block %s: section %s: %" PRIu64 " at byte %td, past %"
                      PRIu64, c->b->path, SEC(c->id), v, c->p - c->base,
                      limit);
}

/* A value below LIMIT: an id of a table of LIMIT entries. */
static inline int col_below(bcol *c, uint64_t limit, uint64_t *v)
{
    int rc = col_get(c, v);

    if (__builtin_expect(rc == EMBER_OK && *v >= limit, 0))
        return col_past(c, *v, limit);
    return rc;
}

static int col_end(bcol *c)
{
    if (c->p != c->end)
        return EM_CORRUPT("block %s: section %s: %td bytes past its last "
                          "value", c->b->path, SEC(c->id), c->end - c->p);
    return EMBER_OK;
}

/* Allocates N elements of SIZE for the load of WHAT (NULL: ENOMEM set). */
static void *arr(const em_block *b, uint64_t n, size_t size, const char *what)
{
    void *p = n < SIZE_MAX / size ? em_malloc((size_t)(n + 1) * size) : NULL;

    if (p == NULL)
        em_err(EMBER_ENOMEM, "block %s: %s: %" PRIu64 " entries", b->path,
               what, n);
    return p;
}

/* ---- strings ------------------------------------------------------------------ */

/* Lengths from the prefix and length columns into b->str_off, prefixes
** into PRE; checks that the suffixes are the bytes of strings.bytes. */
static int str_lengths(em_block *b, bcol *pc, bcol *lc, uint32_t *pre)
{
    uint32_t n = b->info.nstrings;
    uint64_t prev = 0, total = 0, p, s;
    int rc = EMBER_OK;

    b->str_off[0] = 0;
    b->str_off[1] = 1;
    for (uint32_t i = 1; i < n; i++) {
        if ((rc = col_get(pc, &p)) != EMBER_OK ||
            (rc = col_get(lc, &s)) != EMBER_OK)
            return rc;
        if (p > prev || s == 0 || s > EM_MAX_STRING - p)
            return EM_CORRUPT("block %s: section strings.length: string %"
                              PRIu32 ": %" PRIu64 " bytes of the %" PRIu64
                              " before, then %" PRIu64, b->path, i, p, prev,
                              s);
        if (p + s + 1 > BLK_MAX_STRBYTES - b->str_off[i])
            return EM_CORRUPT("block %s: section strings.length: more than "
                              "%u bytes of strings", b->path,
                              BLK_MAX_STRBYTES);
        b->str_off[i + 1] = b->str_off[i] + (uint32_t)(p + s + 1);
        pre[i] = (uint32_t)p;
        prev = p + s;
        total += s;
    }
    if (total != b->sec[BLK_STR_BYTES].raw)
        return EM_CORRUPT("block %s: section strings.bytes: %" PRIu32
                          " bytes, the lengths say %" PRIu64, b->path,
                          b->sec[BLK_STR_BYTES].raw, total);
    return rc;
}

/* Each string: its prefix from the one before, then its own bytes; each
** must sort strictly after the one before. */
static int str_fill(em_block *b, bcol *bc, const uint32_t *pre)
{
    char *s = b->str_bytes;
    const uint32_t *off = b->str_off;

    s[0] = '\0';
    for (uint32_t i = 1; i < b->info.nstrings; i++) {
        const char *prev = s + off[i - 1];
        char *cur = s + off[i];
        uint32_t len = off[i + 1] - off[i] - 1, plen = off[i] - off[i - 1] - 1;
        memcpy(cur, prev, pre[i]);
        memcpy(cur + pre[i], bc->p, len - pre[i]);
        bc->p += len - pre[i];
        cur[len] = '\0';
        if (pre[i] < plen && (uint8_t)cur[pre[i]] <= (uint8_t)prev[pre[i]])
            return EM_CORRUPT("block %s: section strings.bytes: string %"
                              PRIu32 " does not sort after the one before",
                              b->path, i);
    }
    return EMBER_OK;
}

static int load_strings(em_block *b)
{
    uint32_t n = b->info.nstrings;
    uint32_t *pre = arr(b, n, sizeof *pre, "strings");
    bcol pc = { 0 }, lc = { 0 }, bc = { 0 };
    int rc = EMBER_ENOMEM;

    if (pre == NULL ||
        (b->str_off = arr(b, n + (uint64_t)1, sizeof *b->str_off,
                          "strings")) == NULL)
        goto out;
    TRY(col_open(b, BLK_STR_PREFIX, &pc));
    TRY(col_open(b, BLK_STR_LENGTH, &lc));
    TRY(str_lengths(b, &pc, &lc, pre));
    TRY(col_end(&pc));
    TRY(col_end(&lc));
    col_close(&pc), col_close(&lc);
    rc = EMBER_ENOMEM;
    if ((b->str_bytes = arr(b, b->str_off[n], 1, "string bytes")) == NULL)
        goto out;
    TRY(col_open(b, BLK_STR_BYTES, &bc));
    TRY(str_fill(b, &bc, pre));
    rc = col_end(&bc);
out:
    col_close(&pc), col_close(&lc), col_close(&bc);
    em_free(pre);
    return rc;
}

/* String ID against S (LEN bytes), in the order strings are stored. */
static int str_cmp(const em_block *b, uint32_t id, const char *s, size_t len)
{
    const char *m = b->str_bytes + b->str_off[id];
    size_t ml = b->str_off[id + 1] - b->str_off[id] - 1;
    int r = memcmp(m, s, ml < len ? ml : len);

    return r != 0 ? r : (ml > len) - (ml < len);
}

/* String S (LEN bytes) by bisection: strings strictly ascend. */
static bool str_find(const em_block *b, const char *s, size_t len,
                     uint32_t *id)
{
    uint32_t lo = 0, hi = b->info.nstrings;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int r = str_cmp(b, mid, s, len);
        if (r == 0)
            return *id = mid, true;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* ---- mappings, functions, locations ---------------------------------------- */

static int load_mappings(em_block *b)
{
    uint32_t n = b->info.nmappings, ns = b->info.nstrings;
    uint64_t v[5];
    bcol c = { 0 };
    int rc = EMBER_ENOMEM;

    if ((b->mappings = arr(b, n, sizeof *b->mappings, "mappings")) == NULL)
        return rc;
    TRY(col_open(b, BLK_MAPPINGS, &c));
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++)
            TRY(col_get(&c, &v[k]));
        TRY(col_below(&c, ns, &v[3]));
        TRY(col_below(&c, ns, &v[4]));
        b->mappings[i] = (em_bmapping){ v[0], v[0] + v[1], v[2],
                                        (uint32_t)v[3], (uint32_t)v[4] };
        if (i == 0 && (v[0] | v[1] | v[2] | v[3] | v[4]) != 0)
            TRY(EM_CORRUPT("block %s: section mappings: mapping 0 is not "
                           "the unknown mapping", b->path));
    }
    rc = col_end(&c);
out:
    col_close(&c);
    return rc;
}

__attribute__((noinline))
static int col_outside(const bcol *c, int64_t d, uint64_t limit)
{
    return EM_CORRUPT("block %s: section %s: %" PRId64 " at byte %td, "
                      "outside [0, %" PRIu64 ")", c->b->path, SEC(c->id), d,
                      c->p - c->base, limit);
}

/* Field *PREV moved by the zig-zag delta read from C, within [0, LIMIT). */
static inline int col_zz_id(bcol *c, uint64_t limit, uint32_t base,
                            uint32_t *out)
{
    uint64_t v;
    int64_t d, r;
    int rc = col_get(c, &v);

    if (rc != EMBER_OK)
        return rc;
    d = em_unzigzag(v);
    if (__builtin_expect(__builtin_add_overflow((int64_t)base, d, &r) ||
                         r < 0 || (uint64_t)r >= limit, 0))
        return col_outside(c, d, limit);
    *out = (uint32_t)r;
    return EMBER_OK;
}

static int fn_cmp(const em_bfunction *a, const em_bfunction *c)
{
    if (a->name != c->name)
        return a->name < c->name ? -1 : 1;
    if (a->system_name != c->system_name)
        return a->system_name < c->system_name ? -1 : 1;
    if (a->file != c->file)
        return a->file < c->file ? -1 : 1;
    return (a->start_line > c->start_line) - (a->start_line < c->start_line);
}

static int fn_read(em_block *b, bcol c[4], const em_bfunction *prev,
                   em_bfunction *f)
{
    uint64_t ns = b->info.nstrings, v;
    int rc = col_get(&c[0], &v);

    if (rc != EMBER_OK)
        return rc;
    if (v >= ns - prev->name)
        return EM_CORRUPT("block %s: section functions.name: step %" PRIu64
                          " past the strings", b->path, v);
    f->name = prev->name + (uint32_t)v;
    rc = col_zz_id(&c[1], ns, f->name, &f->system_name);
    if (rc == EMBER_OK)
        rc = col_zz_id(&c[2], ns, prev->file, &f->file);
    if (rc == EMBER_OK && (rc = col_get(&c[3], &v)) == EMBER_OK)
        f->start_line = em_add_wrap(prev->start_line, em_unzigzag(v));
    return rc;
}

/* Functions strictly ascend by (name, system name, file, start line). */
static int load_functions(em_block *b)
{
    uint32_t n = b->info.nfunctions;
    em_bfunction prev = { 0, 0, 0, 0 };
    bcol c[4] = { { 0 } };
    int rc = EMBER_ENOMEM;

    if ((b->functions = arr(b, n, sizeof *b->functions, "functions")) ==
        NULL)
        return rc;
    for (int k = 0; k < 4; k++)
        TRY(col_open(b, BLK_FN_NAME + k, &c[k]));
    for (uint32_t i = 0; i < n; i++) {
        TRY(fn_read(b, c, &prev, &b->functions[i]));
        if (i > 0 && fn_cmp(&prev, &b->functions[i]) >= 0)
            TRY(EM_CORRUPT("block %s: section functions.name: function %"
                           PRIu32 " does not sort after the one before",
                           b->path, i));
        prev = b->functions[i];
    }
    for (int k = 0; k < 4; k++)
        TRY(col_end(&c[k]));
out:
    for (int k = 0; k < 4; k++)
        col_close(&c[k]);
    return rc;
}

static int load_locs(em_block *b)
{
    uint32_t n = b->info.nlocations;
    uint64_t addr = 0, m, d, nl, sum = 0;
    bcol c[3] = { { 0 } };
    int rc = EMBER_ENOMEM;

    if ((b->locations = arr(b, n, sizeof *b->locations, "locations")) ==
        NULL)
        return rc;
    for (int k = 0; k < 3; k++)
        TRY(col_open(b, BLK_LOC_MAPPING + k, &c[k]));
    for (uint32_t i = 0; i < n; i++) {
        TRY(col_below(&c[0], b->info.nmappings, &m));
        TRY(col_get(&c[1], &d));
        TRY(col_below(&c[2], EM_MAX_LINES + 1, &nl));
        if (nl > b->info.nlines - sum)
            TRY(EM_CORRUPT("block %s: section locations.nlines: more than "
                           "%" PRIu32 " lines", b->path, b->info.nlines));
        addr += (uint64_t)em_unzigzag(d);
        b->locations[i] = (em_blocation){ (uint32_t)m, addr, (uint32_t)sum,
                                          (uint32_t)nl };
        sum += nl;
    }
    if (sum != b->info.nlines)
        TRY(EM_CORRUPT("block %s: section locations.nlines: %" PRIu64
                       " lines, the footer says %" PRIu32, b->path, sum,
                       b->info.nlines));
    for (int k = 0; k < 3; k++)
        TRY(col_end(&c[k]));
out:
    for (int k = 0; k < 3; k++)
        col_close(&c[k]);
    return rc;
}

/* Lines: a function each, the line against the function's start line. */
static int load_lines(em_block *b)
{
    uint32_t n = b->info.nlines;
    uint64_t f, d;
    bcol c[2] = { { 0 } };
    int rc = EMBER_ENOMEM;

    if ((b->lines = arr(b, n, sizeof *b->lines, "lines")) == NULL)
        return rc;
    TRY(col_open(b, BLK_LINE_FUNCTION, &c[0]));
    TRY(col_open(b, BLK_LINE_LINE, &c[1]));
    for (uint32_t i = 0; i < n; i++) {
        TRY(col_below(&c[0], b->info.nfunctions, &f));
        TRY(col_get(&c[1], &d));
        b->lines[i] = (em_bline){ (uint32_t)f,
                                  em_add_wrap(b->functions[f].start_line,
                                              em_unzigzag(d)) };
    }
    TRY(col_end(&c[0]));
    rc = col_end(&c[1]);
out:
    col_close(&c[0]), col_close(&c[1]);
    return rc;
}

/* ---- nodes, series ---------------------------------------------------------- */

/* Node I's parent and location from the columns PC and LC into the
** arrays: one node of load_nodes' loop, its arrays passed as locals so
** that their stores need not reload the block's fields. */
static inline int node_read(em_block *b, bcol *pc, bcol *lc, uint32_t i,
                            uint32_t *restrict parent, uint32_t *restrict loc,
                            uint32_t *restrict depth)
{
    uint64_t d;
    uint32_t nl = b->info.nlocations, p;
    int rc = col_below(pc, (uint64_t)i + 1, &d);

    if (rc != EMBER_OK)
        return rc;
    if (d == 0) {
        /* an outermost node may be one past the last location: the empty
        ** stack (depth 0) */
        parent[i] = EM_BLOCK_ROOT;
        if ((rc = col_zz_id(lc, (uint64_t)nl + 1, 0, &loc[i])) != EMBER_OK)
            return rc;
        depth[i] = loc[i] != nl;
        if (loc[i] == nl)
            loc[i] = EM_BLOCK_NOLOC;
        return EMBER_OK;
    }
    parent[i] = p = i - (uint32_t)d;
    if (loc[p] == EM_BLOCK_NOLOC)
        return EM_CORRUPT("block %s: section nodes.parent: node %" PRIu32
                          " has the empty stack as its parent", b->path, i);
    if ((rc = col_zz_id(lc, nl, loc[p], &loc[i])) != EMBER_OK)
        return rc;
    if ((depth[i] = depth[p] + 1) > EM_MAX_STACK_DEPTH)
        return EM_CORRUPT("block %s: section nodes.parent: node %" PRIu32
                          " is deeper than %u", b->path, i,
                          EM_MAX_STACK_DEPTH);
    return EMBER_OK;
}

static int load_nodes(em_block *b)
{
    uint32_t n = b->info.nnodes;
    uint32_t *parent, *loc, *depth;
    bcol c[2] = { { 0 } }, pc, lc;
    int rc = EMBER_ENOMEM;

    if ((b->parent = parent = arr(b, n, sizeof *parent, "nodes")) == NULL ||
        (b->loc = loc = arr(b, n, sizeof *loc, "nodes")) == NULL ||
        (b->depth = depth = arr(b, n, sizeof *depth, "nodes")) == NULL)
        return rc;
    TRY(col_open(b, BLK_NODE_PARENT, &c[0]));
    TRY(col_open(b, BLK_NODE_LOC, &c[1]));
    pc = c[0], lc = c[1];           /* cursors the loop keeps in registers */
    for (uint32_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = node_read(b, &pc, &lc, i, parent, loc, depth);
    if (rc == EMBER_OK && (rc = col_end(&pc)) == EMBER_OK)
        rc = col_end(&lc);
out:
    col_close(&c[0]), col_close(&c[1]);
    return rc;
}

static int load_series(em_block *b)
{
    uint32_t n = b->info.nseries;
    uint64_t t, nl, sum = 0;
    bcol c[2] = { { 0 } };
    int rc = EMBER_ENOMEM;

    if ((b->series = arr(b, n, sizeof *b->series, "series")) == NULL)
        return rc;
    TRY(col_open(b, BLK_SER_TYPE, &c[0]));
    TRY(col_open(b, BLK_SER_NLABELS, &c[1]));
    for (uint32_t i = 0; i < n; i++) {
        TRY(col_below(&c[0], b->info.nstrings, &t));
        TRY(col_below(&c[1], EM_MAX_LABELS + 1, &nl));
        if (nl > b->info.nlabels - sum)
            TRY(EM_CORRUPT("block %s: section series.nlabels: more than %"
                           PRIu32 " labels", b->path, b->info.nlabels));
        b->series[i] = (em_bseries){ (uint32_t)t, (uint32_t)sum,
                                     (uint32_t)nl };
        sum += nl;
    }
    if (sum != b->info.nlabels)
        TRY(EM_CORRUPT("block %s: section series.nlabels: %" PRIu64
                       " labels, the footer says %" PRIu32, b->path, sum,
                       b->info.nlabels));
    TRY(col_end(&c[0]));
    rc = col_end(&c[1]);
out:
    col_close(&c[0]), col_close(&c[1]);
    return rc;
}

/* One series' labels: names ascend (string order is id order), none is
** the reserved name, no value is "". */
static int labels_read(em_block *b, bcol c[2], const em_bseries *s)
{
    uint64_t nm, v;
    int rc = EMBER_OK;

    for (uint32_t j = 0; j < s->n && rc == EMBER_OK; j++) {
        uint32_t k = s->first + j;
        if ((rc = col_below(&c[0], b->info.nstrings, &nm)) != EMBER_OK ||
            (rc = col_below(&c[1], b->info.nstrings, &v)) != EMBER_OK)
            break;
        if ((j > 0 && nm <= b->lname[k - 1]) || nm == b->type_name || v == 0)
            rc = EM_CORRUPT("block %s: section labels.name: label %" PRIu32
                            ": out of order, reserved or empty", b->path, k);
        b->lname[k] = (uint32_t)nm;
        b->lvalue[k] = (uint32_t)v;
    }
    return rc;
}

static int load_labels(em_block *b)
{
    uint32_t n = b->info.nlabels;
    bcol c[2] = { { 0 } };
    int rc = EMBER_ENOMEM;

    b->type_name = UINT32_MAX;
    if (b->info.nseries > 0 &&
        !str_find(b, EM_TYPE_LABEL, strlen(EM_TYPE_LABEL), &b->type_name))
        return EM_CORRUPT("block %s: section strings.bytes: no \"%s\" for "
                          "%" PRIu32 " series", b->path, EM_TYPE_LABEL,
                          b->info.nseries);
    if ((b->lname = arr(b, n, sizeof *b->lname, "labels")) == NULL ||
        (b->lvalue = arr(b, n, sizeof *b->lvalue, "labels")) == NULL)
        return rc;
    TRY(col_open(b, BLK_LABEL_NAME, &c[0]));
    TRY(col_open(b, BLK_LABEL_VALUE, &c[1]));
    for (uint32_t i = 0; i < b->info.nseries; i++)
        TRY(labels_read(b, c, &b->series[i]));
    TRY(col_end(&c[0]));
    rc = col_end(&c[1]);
out:
    col_close(&c[0]), col_close(&c[1]);
    return rc;
}

static void names_free(em_block *b)
{
    em_free(b->str_off), em_free(b->str_bytes);
    em_free(b->series), em_free(b->lname), em_free(b->lvalue);
    b->str_off = NULL, b->str_bytes = NULL;
    b->series = NULL, b->lname = NULL, b->lvalue = NULL;
}

static void syms_free(em_block *b)
{
    em_free(b->mappings);
    em_free(b->functions), em_free(b->locations), em_free(b->lines);
    em_free(b->parent), em_free(b->loc), em_free(b->depth);
    b->mappings = NULL;
    b->functions = NULL, b->locations = NULL, b->lines = NULL;
    b->parent = NULL, b->loc = NULL, b->depth = NULL;
}

typedef int (*load_fn)(em_block *b);

/* Runs the N loads STEP in turn; when one fails, UNDO frees what all
** made. */
static int load_steps(em_block *b, const load_fn *step, size_t n,
                      void (*undo)(em_block *))
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = step[i](b);
    if (rc != EMBER_OK)
        undo(b);
    return rc;
}

/* The strings, series and labels: what label matching needs. */
static int load_names(em_block *b)
{
    static const load_fn step[] = { load_strings, load_series, load_labels };
    int rc = load_steps(b, step, EM_ARRAY_LEN(step), names_free);

    if (rc != EMBER_OK)
        return rc;
    b->syms.str_off = b->str_off;
    b->syms.str_bytes = b->str_bytes;
    b->syms.series = b->series;
    b->syms.label_names = b->lname;
    b->syms.label_values = b->lvalue;
    return EMBER_OK;
}

/* The rest of the symbols, after the names. Readers of the names may run
** meanwhile: only the other fields of b->syms are written. */
static int load_syms(em_block *b)
{
    static const load_fn step[] = { load_mappings, load_functions,
                                    load_locs, load_lines, load_nodes };
    int rc = load_steps(b, step, EM_ARRAY_LEN(step), syms_free);

    if (rc != EMBER_OK)
        return rc;
    b->syms.mappings = b->mappings;
    b->syms.functions = b->functions;
    b->syms.locations = b->locations;
    b->syms.lines = b->lines;
    b->syms.parent = b->parent;
    b->syms.loc = b->loc;
    b->syms.depth = b->depth;
    return EMBER_OK;
}

/* ---- postings ------------------------------------------------------------------ */

/* Posting K's (name, value): ascending pairs, ids of strings. */
static int post_pair(em_block *b, bcol c[3], uint32_t k)
{
    uint64_t ns = b->info.nstrings, dn, dv;
    uint32_t pn = k > 0 ? b->pname[k - 1] : 0;
    int rc;

    if ((rc = col_get(&c[0], &dn)) != EMBER_OK ||
        (rc = col_get(&c[1], &dv)) != EMBER_OK)
        return rc;
    if (dn >= ns - pn || (k > 0 && dn == 0 && (dv == 0 ||
                                               dv >= ns - b->pvalue[k - 1])) ||
        ((k == 0 || dn > 0) && dv >= ns))
        return EM_CORRUPT("block %s: section postings.value: posting %"
                          PRIu32 " is out of order or past the strings",
                          b->path, k);
    b->pname[k] = pn + (uint32_t)dn;
    b->pvalue[k] = k > 0 && dn == 0 ? b->pvalue[k - 1] + (uint32_t)dv
                                    : (uint32_t)dv;
    return EMBER_OK;
}

/* Posting K's series: first, then gaps of at least 1, below nseries. */
static int post_list(em_block *b, bcol c[4], uint32_t k)
{
    uint64_t total = b->info.nlabels + (uint64_t)b->info.nseries;
    uint64_t n, v, s = 0;
    int rc = col_get(&c[2], &n);

    if (rc != EMBER_OK)
        return rc;
    if (n == 0 || n > total - b->pfirst[k])
        return EM_CORRUPT("block %s: section postings.count: posting %"
                          PRIu32 ": %" PRIu64 " series", b->path, k, n);
    b->pfirst[k + 1] = b->pfirst[k] + n;
    for (uint64_t j = 0; j < n; j++) {
        if ((rc = col_get(&c[3], &v)) != EMBER_OK)
            return rc;
        if ((j > 0 && v == 0) || v >= b->info.nseries - s)
            return EM_CORRUPT("block %s: section postings.series: posting %"
                              PRIu32 ": series out of order or past %"
                              PRIu32, b->path, k, b->info.nseries);
        s += v;
        b->pseries[b->pfirst[k] + j] = (uint32_t)s;
    }
    return EMBER_OK;
}

static void post_free(em_block *b)
{
    em_free(b->pname), em_free(b->pvalue);
    em_free(b->pfirst), em_free(b->pseries);
    b->pname = b->pvalue = b->pseries = NULL;
    b->pfirst = NULL;
}

static int load_post(em_block *b)
{
    uint64_t total = b->info.nlabels + (uint64_t)b->info.nseries;
    bcol c[4] = { { 0 } };
    int rc = EMBER_ENOMEM;

    if ((b->pname = arr(b, b->npost, sizeof *b->pname, "postings")) ==
            NULL ||
        (b->pvalue = arr(b, b->npost, sizeof *b->pvalue, "postings")) ==
            NULL ||
        (b->pfirst = arr(b, b->npost + (uint64_t)1, sizeof *b->pfirst,
                         "postings")) == NULL ||
        (b->pseries = arr(b, total, sizeof *b->pseries, "postings")) == NULL)
        goto out;
    for (int k = 0; k < 4; k++)
        TRY(col_open(b, BLK_POST_NAME + k, &c[k]));
    b->pfirst[0] = 0;
    for (uint32_t k = 0; k < b->npost; k++) {
        TRY(post_pair(b, c, k));
        TRY(post_list(b, c, k));
    }
    if (b->pfirst[b->npost] != total)
        TRY(EM_CORRUPT("block %s: section postings.count: %" PRIu64
                       " entries, expected %" PRIu64, b->path,
                       b->pfirst[b->npost], total));
    for (int k = 0; k < 4; k++)
        TRY(col_end(&c[k]));
out:
    for (int k = 0; k < 4; k++)
        col_close(&c[k]);
    if (rc != EMBER_OK)
        post_free(b);
    return rc;
}

/* ---- the chunk index -------------------------------------------------------- */

/* Chunk K's times: after the previous chunk of its series, MAX = MIN +
** span without overflow. */
static int idx_times(em_block *b, bcol c[5], uint64_t k, bool same,
                     em_bchunk *e)
{
    uint64_t v, span;
    int64_t d;
    int rc;

    if ((rc = col_get(&c[1], &v)) != EMBER_OK ||
        (rc = col_get(&c[2], &span)) != EMBER_OK)
        return rc;
    d = em_unzigzag(v);
    if (same && (d < 1 || __builtin_add_overflow(e[-1].max_time, d,
                                                 &e->min_time)))
        return EM_CORRUPT("block %s: section index.min_time: chunk %" PRIu64
                          " does not start after the one before", b->path,
                          k);
    if (!same)
        e->min_time = d;
    if (span > (uint64_t)INT64_MAX - (uint64_t)e->min_time)
        return EM_CORRUPT("block %s: section index.span: chunk %" PRIu64
                          ": %" PRIu64 " ms past the end of time", b->path,
                          k, span);
    e->max_time = (int64_t)((uint64_t)e->min_time + span);
    return EMBER_OK;
}

/* Chunk K's place: inside the chunk area, at least a chunk header. */
static int idx_place(em_block *b, bcol c[5], uint64_t k, uint64_t end,
                     em_bchunk *e)
{
    uint64_t v, len;
    int rc;

    if ((rc = col_get(&c[3], &v)) != EMBER_OK ||
        (rc = col_get(&c[4], &len)) != EMBER_OK)
        return rc;
    e->offset = end + (uint64_t)em_unzigzag(v);
    e->len = len;
    if (e->offset < BLK_HEADER || e->offset > b->chunks_end ||
        len < 44 || len > b->chunks_end - e->offset)
        return EM_CORRUPT("block %s: section index.offset: chunk %" PRIu64
                          ": %" PRIu64 " bytes at %" PRIu64 ", outside "
                          "[%d, %" PRIu64 ")", b->path, k, len, e->offset,
                          BLK_HEADER, b->chunks_end);
    return EMBER_OK;
}

static int idx_read(em_block *b, bcol c[5])
{
    uint64_t n = b->info.nchunks, end = BLK_HEADER, s = 0, d;
    int rc = EMBER_OK;

    for (uint64_t k = 0; k < n && rc == EMBER_OK; k++) {
        em_bchunk *e = &b->chunks[k];
        if ((rc = col_below(&c[0], b->info.nseries - s, &d)) != EMBER_OK)
            break;
        s += d;
        e->series = (uint32_t)s;
        b->sfirst[s + 1] = k + 1;
        if ((rc = idx_times(b, c, k, k > 0 && d == 0, e)) == EMBER_OK)
            rc = idx_place(b, c, k, end, e);
        end = e->offset + e->len;
    }
    return rc;
}

static int off_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;

    return (a > c) - (a < c);
}

/* The chunks tile [BLK_HEADER, chunks_end) exactly, and their times span
** the footer's. */
static int idx_tile(em_block *b)
{
    uint64_t n = b->info.nchunks, at = BLK_HEADER;
    uint64_t *v = arr(b, 2 * n, sizeof *v, "chunk index");
    int64_t lo = 0, hi = 0;
    int rc = EMBER_OK;

    if (v == NULL)
        return EMBER_ENOMEM;
    for (uint64_t k = 0; k < n; k++) {
        v[2 * k] = b->chunks[k].offset, v[2 * k + 1] = b->chunks[k].len;
        lo = k == 0 || b->chunks[k].min_time < lo ? b->chunks[k].min_time : lo;
        hi = k == 0 || b->chunks[k].max_time > hi ? b->chunks[k].max_time : hi;
    }
    qsort(v, n, 2 * sizeof *v, off_cmp);
    for (uint64_t k = 0; k < n && at == v[2 * k]; k++)
        at += v[2 * k + 1];
    if (at != b->chunks_end)
        rc = EM_CORRUPT("block %s: section index.offset: the chunks do not "
                        "tile [%d, %" PRIu64 ")", b->path, BLK_HEADER,
                        b->chunks_end);
    else if (lo != b->info.min_time || hi != b->info.max_time)
        rc = EM_CORRUPT("block %s: section index.min_time: chunks span [%"
                        PRId64 ", %" PRId64 "], the footer says [%" PRId64
                        ", %" PRId64 "]", b->path, lo, hi, b->info.min_time,
                        b->info.max_time);
    em_free(v);
    return rc;
}

static int load_idx(em_block *b)
{
    uint64_t n = b->info.nchunks;
    bcol c[5] = { { 0 } };
    int rc = EMBER_ENOMEM;

    if ((b->chunks = arr(b, n, sizeof *b->chunks, "chunk index")) == NULL ||
        (b->sfirst = em_calloc(b->info.nseries + (size_t)2,
                               sizeof *b->sfirst)) == NULL) {
        rc = em_err(EMBER_ENOMEM, "block %s: chunk index", b->path);
        goto out;
    }
    for (int k = 0; k < 5; k++)
        TRY(col_open(b, BLK_IDX_SERIES + k, &c[k]));
    TRY(idx_read(b, c));
    for (int k = 0; k < 5; k++)
        TRY(col_end(&c[k]));
    /* series without chunks start where the one before ends */
    for (uint32_t s = 1; s <= b->info.nseries; s++)
        if (b->sfirst[s] < b->sfirst[s - 1])
            b->sfirst[s] = b->sfirst[s - 1];
    rc = idx_tile(b);
out:
    for (int k = 0; k < 5; k++)
        col_close(&c[k]);
    if (rc != EMBER_OK) {
        em_free(b->chunks), em_free(b->sfirst);
        b->chunks = NULL, b->sfirst = NULL;
    }
    return rc;
}

/* ---- open: trailer, footer, directory ------------------------------------ */

static int blk_map(em_block *b)
{
    int fd = open(b->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *m;

    if (fd < 0)
        return errno == ENOENT
                   ? em_err(EMBER_ENOTFOUND, "block %s: no such file",
                            b->path)
                   : em_err(EMBER_EIO, "block %s: open: %s", b->path,
                            strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return em_err(EMBER_EIO, "block %s: not a readable file", b->path);
    }
    if ((uint64_t)st.st_size < BLK_HEADER + BLK_FOOTER_FIXED + BLK_TRAILER) {
        close(fd);
        return EM_CORRUPT("block %s: %jd bytes, too short for a block",
                          b->path, (intmax_t)st.st_size);
    }
    /* the header is read, not faulted in: a fault there would read
    ** ahead into chunks the query may never touch */
    if (pread(fd, b->head, BLK_HEADER, 0) != BLK_HEADER) {
        close(fd);
        return em_err(EMBER_EIO, "block %s: read of the header: %s", b->path,
                      strerror(errno));
    }
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return em_err(EMBER_EIO, "block %s: mmap: %s", b->path,
                      strerror(errno));
    /* No read-around: a fault would read the device's whole read-ahead
    ** window (8 MB on some virtual disks) around one page. The reader
    ** says what it will read instead (blk_prefetch). */
    (void)madvise(m, (size_t)st.st_size, MADV_RANDOM);
    b->map = m;
    b->size = (size_t)st.st_size;
    return EMBER_OK;
}

/* The CRC-32 the trailer carries: header, footer, trailer's first 8. */
static uint32_t footer_crc(const em_block *b)
{
    uint32_t c = em_crc32(0, b->head, BLK_HEADER);

    return em_crc32(c, b->map + b->footer, b->size - 8 - b->footer);
}

/* The magic at both ends, the footer's place and checksum, the version. */
static int blk_trailer(em_block *b)
{
    const uint8_t *t = b->map + b->size - BLK_TRAILER, *h = b->head;
    bool hm = em_get_le32(h) == BLK_MAGIC, tm = em_get_le32(t + 12) ==
                                                BLK_MAGIC;
    uint32_t flen = em_get_le32(t);

    if (!hm && !tm)
        return em_err(EMBER_EFORMAT, "block %s: not a block file (no magic "
                      "at either end)", b->path);
    if (!hm || !tm)
        return EM_CORRUPT("block %s: %s: bad magic", b->path,
                          hm ? "trailer" : "header");
    if (flen < BLK_FOOTER_FIXED ||
        flen > b->size - BLK_HEADER - BLK_TRAILER)
        return EM_CORRUPT("block %s: trailer: a footer of %" PRIu32 " bytes "
                          "in a file of %zu", b->path, flen, b->size);
    b->footer = b->size - BLK_TRAILER - flen;
    b->info.footer_crc = footer_crc(b);
    if (b->info.footer_crc != em_get_le32(t + 8))
        return EM_CORRUPT("block %s: footer: checksum mismatch", b->path);
    /* past the checksum, odd values were written on purpose: by a newer
    ** writer this build does not understand */
    if (t[4] != EM_BLOCK_VERSION || t[5] != 0 || t[6] != 0 || t[7] != 0)
        return em_err(EMBER_EFORMAT, "block %s: version %u, flags %#x: this "
                      "build reads version %d", b->path, t[4], t[5],
                      EM_BLOCK_VERSION);
    if (memcmp(h + 4, t + 4, 4) != 0)
        return EM_CORRUPT("block %s: header: version %u, the trailer says "
                          "%u", b->path, h[4], t[4]);
    return EMBER_OK;
}

static void footer_read(em_block *b, const uint8_t *f)
{
    em_block_info *i = &b->info;

    i->id = em_get_le64(f + BLK_F_ID);
    i->min_time = (int64_t)em_get_le64(f + BLK_F_MIN);
    i->max_time = (int64_t)em_get_le64(f + BLK_F_MAX);
    i->resolution_ms = (int64_t)em_get_le64(f + BLK_F_RES);
    i->level = em_get_le32(f + BLK_F_LEVEL);
    i->nstrings = em_get_le32(f + BLK_F_NSTRINGS);
    i->nmappings = em_get_le32(f + BLK_F_NMAPPINGS);
    i->nfunctions = em_get_le32(f + BLK_F_NFUNCTIONS);
    i->nlocations = em_get_le32(f + BLK_F_NLOCATIONS);
    i->nlines = em_get_le32(f + BLK_F_NLINES);
    i->nnodes = em_get_le32(f + BLK_F_NNODES);
    i->nseries = em_get_le32(f + BLK_F_NSERIES);
    i->nlabels = em_get_le32(f + BLK_F_NLABELS);
    b->npost = em_get_le32(f + BLK_F_NPOSTINGS);
    i->nchunks = em_get_le64(f + BLK_F_NCHUNKS);
    i->nprofiles = em_get_le64(f + BLK_F_NPROFILES);
    i->nsamples = em_get_le64(f + BLK_F_NSAMPLES);
    b->chunks_end = em_get_le64(f + BLK_F_CHUNKS_END);
    b->nsec = em_get_le32(f + BLK_F_NSECTIONS);
    i->file_size = b->size;
}

/* The footer's counts against each other and the limits. */
static const char *footer_bad(const em_block *b)
{
    const em_block_info *i = &b->info;
    uint64_t area = b->chunks_end - BLK_HEADER;

    if (i->nstrings == 0 || i->nmappings == 0)
        return "no string 0 or mapping 0";
    if (i->nnodes == UINT32_MAX || i->nstrings == UINT32_MAX)
        return "a table of 2^32 - 1 entries";
    if (i->nlines > (uint64_t)i->nlocations * EM_MAX_LINES ||
        i->nlabels > (uint64_t)i->nseries * EM_MAX_LABELS)
        return "more lines or labels than their limits allow";
    if (b->npost > i->nlabels + (uint64_t)i->nseries ||
        (b->npost == 0) != (i->nseries == 0))
        return "postings do not fit the series";
    if (b->chunks_end < BLK_HEADER || b->chunks_end > b->footer ||
        i->nchunks > area / 44 || (i->nchunks == 0) != (area == 0))
        return "chunks do not fit their area";
    if (i->nprofiles < i->nchunks ||
        i->nprofiles > i->nchunks * EM_CHUNK_MAX_PROFILES ||
        i->nsamples > i->nchunks * EM_CHUNK_MAX_SAMPLES)
        return "more profiles or samples than the chunks can hold";
    if (i->min_time > i->max_time || i->resolution_ms < 0 ||
        (i->nchunks == 0 && (i->min_time != 0 || i->max_time != 0)))
        return "a bad time span or resolution";
    return NULL;
}

/* How many values section ID holds (strings.bytes: bytes, unknown). */
static uint64_t sec_count(const em_block *b, int id)
{
    const em_block_info *i = &b->info;

    switch (id) {
    case BLK_STR_PREFIX: case BLK_STR_LENGTH: return i->nstrings - 1;
    case BLK_MAPPINGS: return 5 * (uint64_t)i->nmappings;
    case BLK_FN_NAME: case BLK_FN_SYSTEM: case BLK_FN_FILE:
    case BLK_FN_START: return i->nfunctions;
    case BLK_LOC_MAPPING: case BLK_LOC_ADDRESS:
    case BLK_LOC_NLINES: return i->nlocations;
    case BLK_LINE_FUNCTION: case BLK_LINE_LINE: return i->nlines;
    case BLK_NODE_PARENT: case BLK_NODE_LOC: return i->nnodes;
    case BLK_SER_TYPE: case BLK_SER_NLABELS: return i->nseries;
    case BLK_LABEL_NAME: case BLK_LABEL_VALUE: return i->nlabels;
    case BLK_POST_NAME: case BLK_POST_VALUE: case BLK_POST_COUNT:
        return b->npost;
    case BLK_POST_SERIES: return i->nlabels + (uint64_t)i->nseries;
    default: return i->nchunks;
    }
}

/* A version 1 section's entry: its encoding and sizes fit its count. */
static int sec_check(const em_block *b, int id, const blk_sec *s)
{
    uint64_t n = sec_count(b, id);
    bool bytes = id == BLK_STR_BYTES;

    if (s->enc != BLK_ENC_RAW && s->enc != BLK_ENC_ZSTD)
        return em_err(EMBER_EFORMAT, "block %s: section %s: encoding %u: "
                      "this build reads version %d", b->path, SEC(id),
                      s->enc, EM_BLOCK_VERSION);
    if ((s->enc == BLK_ENC_RAW && s->raw != s->stored) ||
        (s->enc == BLK_ENC_ZSTD &&
         s->raw > (uint64_t)s->stored * BLK_ZSTD_RATIO))
        return EM_CORRUPT("block %s: section %s: %" PRIu32 " bytes stored "
                          "cannot hold %" PRIu32, b->path, SEC(id),
                          s->stored, s->raw);
    if (bytes ? s->raw < b->info.nstrings - 1 || s->raw > BLK_MAX_STRBYTES
              : s->raw < n || s->raw > n * EM_VARINT_MAX)
        return EM_CORRUPT("block %s: section %s: %" PRIu32 " bytes for %"
                          PRIu64 " values", b->path, SEC(id), s->raw,
                          bytes ? (uint64_t)b->info.nstrings - 1 : n);
    return EMBER_OK;
}

/* The directory: version 1's ids in order, then a newer writer's in
** ascending order; sections back to back from the chunks to the footer. */
static int blk_directory(em_block *b)
{
    const uint8_t *d = b->map + b->footer + BLK_FOOTER_FIXED;
    uint64_t at = b->chunks_end;
    int rc = EMBER_OK;

    for (size_t k = 0; k < b->nsec && rc == EMBER_OK; k++) {
        const uint8_t *e = d + k * BLK_DIRENT;
        blk_sec s = { e[1], em_get_le32(e + 4), em_get_le32(e + 16),
                      em_get_le32(e + 20), em_get_le64(e + 8) };
        if (k < BLK_NSEC ? e[0] != k : e[0] <= e[-BLK_DIRENT])
            return EM_CORRUPT("block %s: section directory: entry %zu has "
                              "id %u", b->path, k, e[0]);
        if (s.off != at || s.stored > b->footer - at)
            return EM_CORRUPT("block %s: section directory: entry %zu: %"
                              PRIu32 " bytes at %" PRIu64 ", expected at %"
                              PRIu64 " before %" PRIu64, b->path, k,
                              s.stored, s.off, at, b->footer);
        if (k < BLK_NSEC && (e[2] != 0 || e[3] != 0))
            return em_err(EMBER_EFORMAT, "block %s: section %s: reserved "
                          "bytes set", b->path, SEC(k));
        if (k < BLK_NSEC)
            rc = sec_check(b, (int)k, &s), b->sec[k] = s;
        at += s.stored;
    }
    if (rc == EMBER_OK && at != b->footer)
        return EM_CORRUPT("block %s: section directory: sections end at %"
                          PRIu64 ", the footer starts at %" PRIu64, b->path,
                          at, b->footer);
    return rc;
}

static int blk_footer(em_block *b)
{
    const uint8_t *f = b->map + b->footer;
    const char *bad;

    footer_read(b, f);
    if (em_get_le32(f + BLK_F_RESERVED) != 0)
        return em_err(EMBER_EFORMAT, "block %s: footer: reserved bytes set",
                      b->path);
    if (b->nsec < BLK_NSEC || b->nsec > BLK_MAX_SECTIONS ||
        b->size - BLK_TRAILER - b->footer !=
            BLK_FOOTER_FIXED + b->nsec * BLK_DIRENT)
        return EM_CORRUPT("block %s: footer: %zu sections in %" PRIu64
                          " bytes", b->path, b->nsec,
                          (uint64_t)(b->size - BLK_TRAILER - b->footer));
    if ((bad = footer_bad(b)) != NULL)
        return EM_CORRUPT("block %s: footer: %s", b->path, bad);
    return blk_directory(b);
}

int em_block_open(const char *path, em_block **out)
{
    em_block *b = em_calloc(1, sizeof *b);
    int rc;

    *out = NULL;
    if (b == NULL || (b->path = em_strdup(path)) == NULL) {
        em_free(b);
        return em_err(EMBER_ENOMEM, "block %s: open", path);
    }
    pthread_mutex_init(&b->mu, NULL);
    b->type_name = UINT32_MAX;
    if ((rc = blk_map(b)) == EMBER_OK && (rc = blk_trailer(b)) == EMBER_OK)
        rc = blk_footer(b);
    if (rc != EMBER_OK) {
        em_block_close(b);
        return rc;
    }
    *out = b;
    return EMBER_OK;
}

void em_block_close(em_block *b)
{
    if (b == NULL)
        return;
    if (b->map != NULL)
        munmap((void *)b->map, b->size);
    syms_free(b);
    names_free(b);
    post_free(b);
    em_free(b->chunks), em_free(b->sfirst);
    em_free(b->lz_names.msg), em_free(b->lz_syms.msg);
    em_free(b->lz_post.msg), em_free(b->lz_idx.msg);
    ZSTD_freeDCtx(b->dctx);
    pthread_mutex_destroy(&b->mu);
    em_free(b->path);
    em_free(b);
}

const em_block_info *em_block_get_info(const em_block *b)
{
    return &b->info;
}

size_t em_block_nsections(const em_block *b)
{
    return b->nsec;
}

void em_block_section(const em_block *b, size_t i, em_bsection *out)
{
    const uint8_t *e = b->map + b->footer + BLK_FOOTER_FIXED +
                       i * BLK_DIRENT;

    *out = (em_bsection){ e[0] < BLK_NSEC ? SEC(e[0]) : NULL,
                          em_get_le64(e + 8), em_get_le32(e + 16),
                          em_get_le32(e + 20) };
}

/* ---- lazy loads and lookups ---------------------------------------------- */

/* Runs LOAD once under the block's mutex and remembers how it went; a
** want of memory is not remembered, so the next call tries again. */
static int lazy_run(em_block *b, lazy *lz, int (*load)(em_block *))
{
    int rc;

    pthread_mutex_lock(&b->mu);
    if (lz->done) {
        rc = lz->rc;
        if (rc != EMBER_OK)
            em_err(rc, "%s", lz->msg != NULL ? lz->msg : "block: damaged");
    } else {
        rc = load(b);
        /* a block reads its sections a few times in its life, and an
        ** open block is held as long as the catalog names it: its zstd
        ** context (96 KiB) is not kept idle between them */
        ZSTD_freeDCtx(b->dctx);
        b->dctx = NULL;
        if (rc != EMBER_ENOMEM) {
            lz->done = true;
            lz->rc = rc;
            if (rc != EMBER_OK)
                lz->msg = em_strdup(em_errmsg());
        }
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int em_block_names(em_block *b, const em_block_syms **out)
{
    int rc = lazy_run(b, &b->lz_names, load_names);

    *out = rc == EMBER_OK ? &b->syms : NULL;
    return rc;
}

int em_block_symbols(em_block *b, const em_block_syms **out)
{
    int rc = lazy_run(b, &b->lz_names, load_names);

    if (rc == EMBER_OK)
        rc = lazy_run(b, &b->lz_syms, load_syms);
    *out = rc == EMBER_OK ? &b->syms : NULL;
    return rc;
}

/* What group LZ holds once loaded, of the block's decoded tables. */
static bool lazy_held(const lazy *lz)
{
    return lz->done && lz->rc == EMBER_OK;
}

size_t em_block_memory(em_block *b)
{
    const em_block_info *in = &b->info;
    size_t n = 0;

    pthread_mutex_lock(&b->mu);
    if (lazy_held(&b->lz_names))
        n += ((size_t)in->nstrings + 1) * sizeof *b->str_off +
             b->str_off[in->nstrings] + in->nseries * sizeof *b->series +
             (size_t)in->nlabels * 2 * sizeof *b->lname;
    if (lazy_held(&b->lz_syms))
        n += in->nmappings * sizeof *b->mappings +
             in->nfunctions * sizeof *b->functions +
             in->nlocations * sizeof *b->locations +
             in->nlines * sizeof *b->lines +
             (size_t)in->nnodes * 3 * sizeof *b->parent;
    if (lazy_held(&b->lz_post))
        n += (size_t)b->npost * (2 * sizeof *b->pname + sizeof *b->pfirst) +
             b->pfirst[b->npost] * sizeof *b->pseries;
    if (lazy_held(&b->lz_idx))
        n += in->nchunks * sizeof *b->chunks +
             ((size_t)in->nseries + 2) * sizeof *b->sfirst;
    pthread_mutex_unlock(&b->mu);
    return n;
}

static int load_all_post(em_block *b)
{
    int rc = lazy_run(b, &b->lz_names, load_names);

    return rc == EMBER_OK ? lazy_run(b, &b->lz_post, load_post) : rc;
}

/* The first posting of label NAME (string id) at or after value V. */
static uint32_t post_seek(const em_block *b, uint32_t name, uint32_t v)
{
    uint32_t lo = 0, hi = b->npost;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (b->pname[mid] < name ||
            (b->pname[mid] == name && b->pvalue[mid] < v))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The posting of NAME=VALUE: its index, or npost when there is none.
** String ids are ranks in string order, so the postings, sorted by
** (name id, value id), sort as their strings do: a search over them
** compares a few strings, where finding both ids among all the block's
** strings compared three times as many (a month's query looks up its
** labels in each of 30 blocks). */
static uint32_t post_find(const em_block *b, const char *name,
                          const char *value)
{
    size_t nlen = strlen(name), vlen = strlen(value);
    uint32_t lo = 0, hi = b->npost;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int r = str_cmp(b, b->pname[mid], name, nlen);
        if (r == 0)
            r = str_cmp(b, b->pvalue[mid], value, vlen);
        if (r == 0)
            return mid;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return b->npost;
}

int em_block_postings(em_block *b, const char *name, const char *value,
                      roaring_bitmap_t **out)
{
    uint32_t k;
    int rc = load_all_post(b);

    *out = NULL;
    if (rc != EMBER_OK)
        return rc;
    if ((*out = roaring_bitmap_create()) == NULL)
        return em_err(EMBER_ENOMEM, "block %s: postings bitmap", b->path);
    if ((k = post_find(b, name, value)) < b->npost)
        roaring_bitmap_add_many(*out, b->pfirst[k + 1] - b->pfirst[k],
                                b->pseries + b->pfirst[k]);
    return EMBER_OK;
}

int em_block_label_values(em_block *b, const char *name, uint32_t **out,
                          size_t *n)
{
    uint32_t nm, k, end;
    int rc = load_all_post(b);

    *out = NULL;
    *n = 0;
    if (rc != EMBER_OK || !str_find(b, name, strlen(name), &nm))
        return rc;
    k = post_seek(b, nm, 0);
    for (end = k; end < b->npost && b->pname[end] == nm; end++)
        ;
    if (end == k)
        return EMBER_OK;
    if ((*out = em_malloc((end - k) * sizeof **out)) == NULL)
        return em_err(EMBER_ENOMEM, "block %s: %" PRIu32 " label values",
                      b->path, end - k);
    memcpy(*out, b->pvalue + k, (end - k) * sizeof **out);
    *n = end - k;
    return EMBER_OK;
}

int em_block_chunks(em_block *b, uint32_t series, const em_bchunk **out,
                    size_t *n)
{
    int rc = lazy_run(b, &b->lz_idx, load_idx);

    *out = NULL;
    *n = 0;
    if (rc != EMBER_OK)
        return rc;
    if (series >= b->info.nseries)
        return em_err(EMBER_EINVAL, "block %s: series %" PRIu32 " of %"
                      PRIu32, b->path, series, b->info.nseries);
    *out = b->chunks + b->sfirst[series];
    *n = (size_t)(b->sfirst[series + 1] - b->sfirst[series]);
    return EMBER_OK;
}

int em_block_chunk_bytes(em_block *b, const em_bchunk *c,
                         const uint8_t **bytes)
{
    *bytes = NULL;
    if (c->offset < BLK_HEADER || c->offset > b->chunks_end ||
        c->len > b->chunks_end - c->offset)
        return EM_CORRUPT("block %s: chunk of %" PRIu64 " bytes at %" PRIu64
                          " outside the chunk area", b->path, c->len,
                          c->offset);
    *bytes = b->map + c->offset;
    return EMBER_OK;
}

void em_block_prefetch(em_block *b, const em_bchunk *c, size_t n)
{
    uint64_t lo = UINT64_MAX, hi = 0;

    for (size_t i = 0; i < n; i++)
        if (c[i].offset < b->chunks_end &&
            c[i].len <= b->chunks_end - c[i].offset) {
            lo = c[i].offset < lo ? c[i].offset : lo;
            hi = c[i].offset + c[i].len > hi ? c[i].offset + c[i].len : hi;
        }
    if (lo < hi)
        blk_prefetch(b, lo, hi - lo);
}

void em_block_will_scan(em_block *b)
{
    (void)madvise((void *)b->map, b->size, MADV_NORMAL);
}

/* ---- verify ------------------------------------------------------------------ */

typedef struct vstate {
    em_block *b;
    ember_problem_fn fn;
    void *ctx;
    uint64_t n;                     /* problems found */
    int fatal;                      /* a failure that is not damage */
} vstate;

static void problem(vstate *v, const char *fmt, ...) EM_PRINTF(2, 3);

static void problem(vstate *v, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->n++;
    if (v->fn != NULL)
        v->fn(v->ctx, msg);
}

/* Reports RC's message when it is damage; remembers any other failure. */
static bool v_ok(vstate *v, int rc)
{
    if (rc == EMBER_ECORRUPT || rc == EMBER_EFORMAT)
        problem(v, "%s", em_errmsg());
    else if (rc != EMBER_OK && v->fatal == EMBER_OK)
        v->fatal = rc;
    return rc == EMBER_OK;
}

/* Every section's checksum, newer writers' sections too. */
static void v_sections(vstate *v)
{
    em_block *b = v->b;

    for (size_t k = 0; k < b->nsec; k++) {
        const uint8_t *e = b->map + b->footer + BLK_FOOTER_FIXED +
                           k * BLK_DIRENT;
        uint64_t off = em_get_le64(e + 8);
        uint32_t stored = em_get_le32(e + 16);
        if (em_crc32(0, b->map + off, stored) != em_get_le32(e + 4))
            problem(v, "block %s: section %s: checksum mismatch", b->path,
                    e[0] < BLK_NSEC ? SEC(e[0]) : "(newer)");
    }
}

static int post_ent_cmp(const void *x, const void *y)
{
    const uint32_t *a = x, *c = y;

    for (int k = 0; k < 3; k++)
        if (a[k] != c[k])
            return a[k] < c[k] ? -1 : 1;
    return 0;
}

/* The first posting that differs from the (name, value, series) triples
** T, sorted; npost when none does. */
static uint32_t post_diff(const em_block *b, const uint32_t *t)
{
    uint64_t i = 0;

    for (uint32_t p = 0; p < b->npost; p++)
        for (uint64_t j = b->pfirst[p]; j < b->pfirst[p + 1]; j++, i++)
            if (t[3 * i] != b->pname[p] || t[3 * i + 1] != b->pvalue[p] ||
                t[3 * i + 2] != b->pseries[j])
                return p;
    return b->npost;
}

/* The postings are the series' labels and types, no more, no less. */
static void v_postings(vstate *v)
{
    em_block *b = v->b;
    uint64_t n = b->info.nlabels + (uint64_t)b->info.nseries, k = 0;
    uint32_t *t = arr(b, 3 * n, sizeof *t, "postings check"), p;

    if (t == NULL) {
        v_ok(v, EMBER_ENOMEM);
        return;
    }
    for (uint32_t s = 0; s < b->info.nseries; s++) {
        const em_bseries *se = &b->series[s];
        t[3 * k] = b->type_name, t[3 * k + 1] = se->type, t[3 * k++ + 2] = s;
        for (uint32_t j = se->first; j < se->first + se->n; j++)
            t[3 * k] = b->lname[j], t[3 * k + 1] = b->lvalue[j],
            t[3 * k++ + 2] = s;
    }
    qsort(t, n, 3 * sizeof *t, post_ent_cmp);
    if ((p = post_diff(b, t)) < b->npost)
        problem(v, "block %s: section postings.series: posting %" PRIu32
                " differs from the series' labels", b->path, p);
    em_free(t);
}

static int u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;

    return (a > c) - (a < c);
}

/* No two nodes are the same (parent, location): a stack has one id. */
static void v_nodes(vstate *v)
{
    em_block *b = v->b;
    uint32_t n = b->info.nnodes;
    uint64_t *k = arr(b, n, sizeof *k, "node check");

    if (k == NULL) {
        v_ok(v, EMBER_ENOMEM);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        k[i] = (uint64_t)b->parent[i] << 32 | b->loc[i];
    qsort(k, n, sizeof *k, u64_cmp);
    for (uint32_t i = 1; i < n; i++)
        if (k[i] == k[i - 1]) {
            problem(v, "block %s: section nodes.location: two nodes of "
                    "parent %" PRIu32 " at location %" PRIu32, b->path,
                    (uint32_t)(k[i] >> 32), (uint32_t)k[i]);
            break;
        }
    em_free(k);
}

/* Chunk K: decodes whole, names nodes of the block, spans its entry. */
static void v_chunk(vstate *v, em_codec *c, uint64_t k, uint64_t sums[2])
{
    em_block *b = v->b;
    const em_bchunk *e = &b->chunks[k];
    const uint8_t *p;
    em_chunk ch;
    int rc = em_block_chunk_bytes(b, e, &p);

    if (rc == EMBER_OK)
        rc = em_chunk_decode(c, p, e->len, EM_COL_ALL, &ch);
    if (rc != EMBER_OK) {
        v_ok(v, em_err_prefix(rc, "block %s: chunk %" PRIu64 " (series %"
                              PRIu32 ")", b->path, k, e->series));
        return;
    }
    if (ch.h.min_time != e->min_time || ch.h.max_time != e->max_time)
        problem(v, "block %s: chunk %" PRIu64 ": spans [%" PRId64 ", %"
                PRId64 "], the index says [%" PRId64 ", %" PRId64 "]",
                b->path, k, ch.h.min_time, ch.h.max_time, e->min_time,
                e->max_time);
    if (ch.h.nstacks > 0 && ch.stacks[ch.h.nstacks - 1] >= b->info.nnodes)
        problem(v, "block %s: chunk %" PRIu64 ": stack %" PRIu32 " of %"
                PRIu32 " nodes", b->path, k, ch.stacks[ch.h.nstacks - 1],
                b->info.nnodes);
    sums[0] += ch.h.nprofiles;
    sums[1] += ch.h.nsamples;
    em_chunk_release(&ch);
}

static void v_chunks(vstate *v)
{
    em_block *b = v->b;
    uint64_t sums[2] = { 0, 0 };
    em_codec *c = NULL;

    if (!v_ok(v, em_codec_new(&c)))
        return;
    em_block_will_scan(b);
    for (uint64_t k = 0; k < b->info.nchunks; k++)
        v_chunk(v, c, k, sums);
    if (sums[0] != b->info.nprofiles || sums[1] != b->info.nsamples)
        problem(v, "block %s: the chunks hold %" PRIu64 " profiles and %"
                PRIu64 " samples, the footer says %" PRIu64 " and %" PRIu64,
                b->path, sums[0], sums[1], b->info.nprofiles,
                b->info.nsamples);
    em_codec_free(c);
}

int em_block_verify(em_block *b, ember_problem_fn fn, void *ctx)
{
    vstate v = { b, fn, ctx, 0, EMBER_OK };
    const em_block_syms *s;
    bool syms;

    v_sections(&v);
    if ((syms = v_ok(&v, em_block_symbols(b, &s))))
        v_nodes(&v);
    if (syms && v_ok(&v, lazy_run(b, &b->lz_post, load_post)))
        v_postings(&v);
    if (v_ok(&v, lazy_run(b, &b->lz_idx, load_idx)))
        v_chunks(&v);
    if (v.fatal != EMBER_OK)
        return v.fatal;
    if (v.n > 0)
        return em_err(EMBER_ECORRUPT, "block %s: %" PRIu64 " problems",
                      b->path, v.n);
    return EMBER_OK;
}
