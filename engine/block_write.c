/*
** engine/block_write.c: the block builder (engine/block.h; the layout is in
** engine/block_int.h, every byte in docs/file-format.md, "Blocks").
**
** Interning: each table is an array plus an engine/htab.h index of (hash,
** id + 1) slots; equal content gets the id it got first. Chunks go to
** DIR/NAME.tmp as they come, so the builder holds the symbol tables and
** the chunk index, never the samples.
**
** At finish the tables are renumbered for size (strings sorted, so that
** string order is id order and front coding shares prefixes; functions
** sorted by name; locations by address) and written one column per
** section, then the footer and trailer; the file is fsynced, renamed into
** place, and the directory fsynced. Node and series ids never change:
** chunks and the chunk index already name them.
**
** A write that fails leaves the file half-written: the builder then
** refuses everything but em_bbuild_free, which removes the file.
*/
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_createCCtx_advanced, customMem */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "engine/block_int.h"
#include "engine/store.h"

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

/* Grows ARR (CAP elements) to hold NEED, or returns ENOMEM naming WHAT
** from the calling function. */
#define GROW(arr, cap, need, what)                                          \
    do {                                                                    \
        void *p_;                                                           \
        if ((need) <= (cap))                                                \
            break;                                                          \
        if ((p_ = em_grow((arr), &(cap), (need), sizeof *(arr))) == NULL)   \
            return em_err(EMBER_ENOMEM, "block builder: %s: %zu entries",   \
                          (what), (size_t)(need));                          \
        (arr) = p_;                                                         \
    } while (0)

static int usable(const em_bbuild *b)
{
    if (b->failed)
        return em_err(EMBER_EIO, "block builder %s: unusable after an "
                      "earlier failure", b->tmp);
    if (b->done)
        return em_err(EMBER_EINVAL, "block builder %s: already finished",
                      b->path);
    return EMBER_OK;
}

/* Writes N bytes at P at the end of the temporary file. */
static int write_all(em_bbuild *b, const void *p, size_t n)
{
    const uint8_t *q = p;

    while (n > 0) {
        ssize_t w = write(b->fd, q, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            b->failed = 1;
            return em_err(EMBER_EIO, "block builder: write %s: %s", b->tmp,
                          w < 0 ? strerror(errno) : "no progress");
        }
        q += w, n -= (size_t)w, b->off += (uint64_t)w;
    }
    return EMBER_OK;
}

/* ---- strings ---------------------------------------------------------- */

typedef struct str_key {
    const em_bbuild *b;
    const char *s;
    size_t len;
} str_key;

static bool str_eq(const str_key *k, uint32_t id)
{
    const em_bbuild *b = k->b;

    return b->soff[id + 1] - b->soff[id] == k->len &&
           (k->len == 0 || memcmp(b->sb + b->soff[id], k->s, k->len) == 0);
}

#define EM_HT_NAME str_ix
#define EM_HT_TABLE btab
#define EM_HT_ENTRY bslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_KEY const str_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && str_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "block builder: string index"
#include "engine/htab.h"

static int str_add(em_bbuild *b, const char *s, size_t len, uint32_t *id)
{
    str_key k = { b, s, len };
    uint64_t h = em_hash64(s, len, 0);
    bool found;
    bslot *e;

    if (len > EM_MAX_STRING)
        return em_err(EMBER_ELIMIT, "block builder: string of %zu bytes, "
                      "limit %u", len, EM_MAX_STRING);
    if ((e = str_ix_insert(&b->str_ix, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return *id = e->idx1 - 1, EMBER_OK;
    if (b->nstr >= UINT32_MAX - 1)
        return em_err(EMBER_ELIMIT, "block builder: too many strings");
    GROW(b->sb, b->capsb, b->nsb + len + 1, "string bytes");
    GROW(b->soff, b->capsoff, (size_t)b->nstr + 2, "strings");
    if (len > 0)
        memcpy(b->sb + b->nsb, s, len);
    b->nsb += len;
    b->soff[0] = 0;
    b->soff[++b->nstr] = b->nsb;
    *e = (bslot){ h, b->nstr };
    *id = b->nstr - 1;
    return EMBER_OK;
}

int em_bbuild_string(em_bbuild *b, const char *s, size_t len, uint32_t *id)
{
    int rc = usable(b);

    if (rc == EMBER_OK && s == NULL && len > 0)
        rc = em_err(EMBER_EINVAL, "block builder: string: no bytes");
    return rc == EMBER_OK ? str_add(b, s, len, id) : rc;
}

/* Byte order of strings A and C (memcmp, then the shorter first). */
static int str_cmp(const em_bbuild *b, uint32_t a, uint32_t c)
{
    size_t la = b->soff[a + 1] - b->soff[a], lc = b->soff[c + 1] - b->soff[c];
    int r = memcmp(b->sb + b->soff[a], b->sb + b->soff[c],
                   la < lc ? la : lc);

    return r != 0 ? r : (la > lc) - (la < lc);
}

static int str_check(const em_bbuild *b, uint32_t id, const char *what)
{
    if (id >= b->nstr)
        return em_err(EMBER_EINVAL, "block builder: %s: string %" PRIu32
                      " of %" PRIu32, what, id, b->nstr);
    return EMBER_OK;
}

/* ---- mappings and functions ------------------------------------------- */

typedef struct map_key {
    const em_bbuild *b;
    const em_bmapping *m;
} map_key;

static bool map_eq(const map_key *k, uint32_t id)
{
    const em_bmapping *a = &k->b->map[id], *m = k->m;

    return a->start == m->start && a->limit == m->limit &&
           a->offset == m->offset && a->file == m->file &&
           a->build_id == m->build_id;
}

#define EM_HT_NAME map_ix
#define EM_HT_TABLE btab
#define EM_HT_ENTRY bslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_KEY const map_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && map_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "block builder: mapping index"
#include "engine/htab.h"

int em_bbuild_mapping(em_bbuild *b, uint64_t start, uint64_t limit,
                      uint64_t offset, uint32_t file, uint32_t build_id,
                      uint32_t *id)
{
    em_bmapping m = { start, limit, offset, file, build_id };
    map_key k = { b, &m };
    uint8_t rec[32];
    uint64_t h;
    bool found;
    bslot *e;
    int rc = usable(b);

    if (rc == EMBER_OK && (rc = str_check(b, file, "mapping file")) == 0)
        rc = str_check(b, build_id, "mapping build id");
    if (rc != EMBER_OK)
        return rc;
    em_put_le64(rec, start), em_put_le64(rec + 8, limit);
    em_put_le64(rec + 16, offset), em_put_le32(rec + 24, file);
    em_put_le32(rec + 28, build_id);
    h = em_hash64(rec, sizeof rec, EM_T_MAPPING);
    if ((e = map_ix_insert(&b->map_ix, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return *id = e->idx1 - 1, EMBER_OK;
    if (b->nmap >= UINT32_MAX - 1)
        return em_err(EMBER_ELIMIT, "block builder: too many mappings");
    GROW(b->map, b->capmap, (size_t)b->nmap + 1, "mappings");
    b->map[b->nmap++] = m;
    *e = (bslot){ h, b->nmap };
    *id = b->nmap - 1;
    return EMBER_OK;
}

typedef struct fn_key {
    const em_bbuild *b;
    const em_bfunction *f;
} fn_key;

static bool fn_eq(const fn_key *k, uint32_t id)
{
    const em_bfunction *a = &k->b->fn[id], *f = k->f;

    return a->name == f->name && a->system_name == f->system_name &&
           a->file == f->file && a->start_line == f->start_line;
}

#define EM_HT_NAME fn_ix
#define EM_HT_TABLE btab
#define EM_HT_ENTRY bslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_KEY const fn_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && fn_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "block builder: function index"
#include "engine/htab.h"

int em_bbuild_function(em_bbuild *b, uint32_t name, uint32_t system_name,
                       uint32_t file, int64_t start_line, uint32_t *id)
{
    em_bfunction f = { name, system_name, file, start_line };
    fn_key k = { b, &f };
    uint8_t rec[20];
    uint64_t h;
    bool found;
    bslot *e;
    int rc = usable(b);

    if (rc == EMBER_OK && (rc = str_check(b, name, "function name")) == 0 &&
        (rc = str_check(b, system_name, "function system name")) == 0)
        rc = str_check(b, file, "function file");
    if (rc != EMBER_OK)
        return rc;
    em_put_le32(rec, name), em_put_le32(rec + 4, system_name);
    em_put_le32(rec + 8, file), em_put_le64(rec + 12, (uint64_t)start_line);
    h = em_hash64(rec, sizeof rec, EM_T_FUNCTION);
    if ((e = fn_ix_insert(&b->fn_ix, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return *id = e->idx1 - 1, EMBER_OK;
    if (b->nfn >= UINT32_MAX - 1)
        return em_err(EMBER_ELIMIT, "block builder: too many functions");
    GROW(b->fn, b->capfn, (size_t)b->nfn + 1, "functions");
    b->fn[b->nfn++] = f;
    *e = (bslot){ h, b->nfn };
    *id = b->nfn - 1;
    return EMBER_OK;
}

/* ---- locations ---------------------------------------------------------- */

typedef struct loc_key {
    const em_bbuild *b;
    uint32_t mapping;
    uint64_t address;
    const uint32_t *fns;
    const int64_t *lines;
    size_t n;
} loc_key;

static bool loc_eq(const loc_key *k, uint32_t id)
{
    const em_blocation *l = &k->b->loc[id];
    const em_bline *ln = k->b->line + l->first;

    if (l->mapping != k->mapping || l->address != k->address || l->n != k->n)
        return false;
    for (size_t i = 0; i < k->n; i++)
        if (ln[i].function != k->fns[i] || ln[i].line != k->lines[i])
            return false;
    return true;
}

#define EM_HT_NAME loc_ix
#define EM_HT_TABLE btab
#define EM_HT_ENTRY bslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_KEY const loc_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && loc_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "block builder: location index"
#include "engine/htab.h"

static int loc_check(const em_bbuild *b, const loc_key *k)
{
    if (k->mapping >= b->nmap)
        return em_err(EMBER_EINVAL, "block builder: location: mapping %"
                      PRIu32 " of %" PRIu32, k->mapping, b->nmap);
    if (k->n > EM_MAX_LINES)
        return em_err(EMBER_ELIMIT, "block builder: location: %zu lines, "
                      "limit %u", k->n, EM_MAX_LINES);
    if (k->n > 0 && (k->fns == NULL || k->lines == NULL))
        return em_err(EMBER_EINVAL, "block builder: location: no lines");
    for (size_t i = 0; i < k->n; i++)
        if (k->fns[i] >= b->nfn)
            return em_err(EMBER_EINVAL, "block builder: location: line %zu:"
                          " function %" PRIu32 " of %" PRIu32, i, k->fns[i],
                          b->nfn);
    return EMBER_OK;
}

/* The hash of a location's content (host order: it is never stored). */
static uint64_t loc_hash(const loc_key *k)
{
    uint8_t rec[16];
    uint64_t h;

    em_put_le32(rec, k->mapping), em_put_le64(rec + 4, k->address);
    em_put_le32(rec + 12, (uint32_t)k->n);
    h = em_hash64(rec, sizeof rec, EM_T_LOCATION);
    if (k->n > 0) {
        h = em_hash64(k->fns, k->n * sizeof *k->fns, h);
        h = em_hash64(k->lines, k->n * sizeof *k->lines, h);
    }
    return h;
}

int em_bbuild_location(em_bbuild *b, uint32_t mapping, uint64_t address,
                       const uint32_t *fns, const int64_t *lines, size_t n,
                       uint32_t *id)
{
    loc_key k = { b, mapping, address, fns, lines, n };
    uint64_t h;
    bool found;
    bslot *e;
    int rc = usable(b);

    if (rc == EMBER_OK)
        rc = loc_check(b, &k);
    if (rc != EMBER_OK)
        return rc;
    h = loc_hash(&k);
    if ((e = loc_ix_insert(&b->loc_ix, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return *id = e->idx1 - 1, EMBER_OK;
    if (b->nloc >= UINT32_MAX - 1 || n > UINT32_MAX - 1 - b->nline)
        return em_err(EMBER_ELIMIT, "block builder: too many locations");
    GROW(b->loc, b->caploc, (size_t)b->nloc + 1, "locations");
    GROW(b->line, b->capline, (size_t)b->nline + n, "location lines");
    b->loc[b->nloc] = (em_blocation){ mapping, address, b->nline,
                                      (uint32_t)n };
    for (size_t i = 0; i < n; i++)
        b->line[b->nline++] = (em_bline){ fns[i], lines[i] };
    *e = (bslot){ h, ++b->nloc };
    *id = b->nloc - 1;
    return EMBER_OK;
}

/* ---- the stack tree ------------------------------------------------------ */

typedef struct node_key {
    const em_bbuild *b;
    uint32_t parent, loc;
} node_key;

#define EM_HT_NAME node_ix
#define EM_HT_TABLE btab
#define EM_HT_ENTRY bslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_KEY const node_key *
#define EM_HT_MATCH(e, h, k)                                                \
    ((e)->hash == (h) && (k)->b->parent[(e)->idx1 - 1] == (k)->parent &&    \
     (k)->b->nodeloc[(e)->idx1 - 1] == (k)->loc)
#define EM_HT_WHAT "block builder: node index"
#include "engine/htab.h"

static int node_add(em_bbuild *b, uint32_t parent, uint32_t loc,
                    uint32_t *id)
{
    node_key k = { b, parent, loc };
    uint64_t h = em_mix64((uint64_t)parent << 32 | loc);
    uint32_t depth = parent == EM_BLOCK_ROOT ? 1 : b->depth[parent] + 1;
    bool found;
    bslot *e;

    if ((e = node_ix_insert(&b->node_ix, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return *id = e->idx1 - 1, EMBER_OK;
    if (depth > EM_MAX_STACK_DEPTH)
        return em_err(EMBER_ELIMIT, "block builder: a stack deeper than %u",
                      EM_MAX_STACK_DEPTH);
    if (b->nnode >= UINT32_MAX - 1)
        return em_err(EMBER_ELIMIT, "block builder: too many nodes");
    GROW(b->parent, b->capparent, (size_t)b->nnode + 1, "nodes");
    GROW(b->nodeloc, b->capnodeloc, (size_t)b->nnode + 1, "nodes");
    GROW(b->depth, b->capdepth, (size_t)b->nnode + 1, "nodes");
    b->parent[b->nnode] = parent;
    b->nodeloc[b->nnode] = loc;
    b->depth[b->nnode] = depth;
    *e = (bslot){ h, ++b->nnode };
    *id = b->nnode - 1;
    return EMBER_OK;
}

int em_bbuild_node(em_bbuild *b, uint32_t parent, uint32_t loc, uint32_t *id)
{
    int rc = usable(b);

    if (rc != EMBER_OK)
        return rc;
    if (parent != EM_BLOCK_ROOT && parent >= b->nnode)
        return em_err(EMBER_EINVAL, "block builder: node: parent %" PRIu32
                      " of %" PRIu32, parent, b->nnode);
    if (loc >= b->nloc)
        return em_err(EMBER_EINVAL, "block builder: node: location %" PRIu32
                      " of %" PRIu32, loc, b->nloc);
    return node_add(b, parent, loc, id);
}

int em_bbuild_stack(em_bbuild *b, const uint32_t *locs, size_t n,
                    uint32_t *id)
{
    uint32_t node = EM_BLOCK_ROOT;
    int rc = usable(b);

    if (rc == EMBER_OK && (n == 0 || locs == NULL))
        rc = em_err(EMBER_EINVAL, "block builder: an empty stack");
    if (rc == EMBER_OK && n > EM_MAX_STACK_DEPTH)
        rc = em_err(EMBER_ELIMIT, "block builder: stack of %zu frames, "
                    "limit %u", n, EM_MAX_STACK_DEPTH);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        if (locs[i] >= b->nloc)
            rc = em_err(EMBER_EINVAL, "block builder: stack frame %zu: "
                        "location %" PRIu32 " of %" PRIu32, i, locs[i],
                        b->nloc);
    for (size_t i = n; i-- > 0 && rc == EMBER_OK;)
        rc = node_add(b, node, locs[i], &node);
    if (rc == EMBER_OK)
        *id = node;
    return rc;
}

/* ---- series --------------------------------------------------------------- */

typedef struct ser_key {
    const em_bbuild *b;
    uint32_t type;
    const uint32_t *names, *values;
    size_t n;
} ser_key;

static bool ser_eq(const ser_key *k, uint32_t id)
{
    const em_bseries *s = &k->b->ser[id].s;

    return s->type == k->type && s->n == k->n &&
           (k->n == 0 ||
            (memcmp(k->b->lname + s->first, k->names,
                    k->n * sizeof *k->names) == 0 &&
             memcmp(k->b->lvalue + s->first, k->values,
                    k->n * sizeof *k->values) == 0));
}

#define EM_HT_NAME ser_ix
#define EM_HT_TABLE btab
#define EM_HT_ENTRY bslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_KEY const ser_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && ser_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "block builder: series index"
#include "engine/htab.h"

/* Labels sorted by name, names distinct and not the reserved one, values
** not empty: what the head stores, so what postings can index. */
static int ser_check(const em_bbuild *b, const ser_key *k)
{
    int rc = str_check(b, k->type, "series type");

    if (rc == EMBER_OK && k->n > EM_MAX_LABELS)
        return em_err(EMBER_ELIMIT, "block builder: series: %zu labels, "
                      "limit %d", k->n, EM_MAX_LABELS);
    if (rc == EMBER_OK && k->n > 0 && (k->names == NULL || !k->values))
        return em_err(EMBER_EINVAL, "block builder: series: no labels");
    for (size_t i = 0; i < k->n && rc == EMBER_OK; i++) {
        uint32_t nm = k->names[i];
        if ((rc = str_check(b, nm, "label name")) != EMBER_OK ||
            (rc = str_check(b, k->values[i], "label value")) != EMBER_OK)
            break;
        if (i > 0 && str_cmp(b, k->names[i - 1], nm) >= 0)
            return em_err(EMBER_EINVAL, "block builder: series: label %zu "
                          "not after the one before", i);
        if (b->soff[k->values[i] + 1] == b->soff[k->values[i]] ||
            (b->soff[nm + 1] - b->soff[nm] == strlen(EM_TYPE_LABEL) &&
             memcmp(b->sb + b->soff[nm], EM_TYPE_LABEL,
                    strlen(EM_TYPE_LABEL)) == 0))
            return em_err(EMBER_EINVAL, "block builder: series: label %zu: "
                          "empty value or the reserved name", i);
    }
    return rc;
}

static uint64_t ser_hash(const ser_key *k)
{
    uint8_t rec[8];
    uint64_t h;

    em_put_le32(rec, k->type), em_put_le32(rec + 4, (uint32_t)k->n);
    h = em_hash64(rec, sizeof rec, EM_T_SERIES);
    if (k->n > 0) {
        h = em_hash64(k->names, k->n * sizeof *k->names, h);
        h = em_hash64(k->values, k->n * sizeof *k->values, h);
    }
    return h;
}

int em_bbuild_series(em_bbuild *b, uint32_t type, const uint32_t *names,
                     const uint32_t *values, size_t n, uint32_t *id)
{
    ser_key k = { b, type, names, values, n };
    uint64_t h;
    bool found;
    bslot *e;
    int rc = usable(b);

    if (rc == EMBER_OK)
        rc = ser_check(b, &k);
    if (rc != EMBER_OK)
        return rc;
    h = ser_hash(&k);
    if ((e = ser_ix_insert(&b->ser_ix, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found)
        return *id = e->idx1 - 1, EMBER_OK;
    if (b->nser >= UINT32_MAX - 1 || n > UINT32_MAX - 1 - b->nlabel)
        return em_err(EMBER_ELIMIT, "block builder: too many series");
    GROW(b->ser, b->capser, (size_t)b->nser + 1, "series");
    GROW(b->lname, b->caplname, (size_t)b->nlabel + n, "labels");
    GROW(b->lvalue, b->caplvalue, (size_t)b->nlabel + n, "labels");
    b->ser[b->nser] = (bser){ { type, b->nlabel, (uint32_t)n }, 0, false };
    if (n > 0) {
        memcpy(b->lname + b->nlabel, names, n * sizeof *names);
        memcpy(b->lvalue + b->nlabel, values, n * sizeof *values);
    }
    b->nlabel += (uint32_t)n;
    *e = (bslot){ h, ++b->nser };
    *id = b->nser - 1;
    return EMBER_OK;
}

/* ---- chunks --------------------------------------------------------------- */

/* Appends the checked chunk of SERIES (header H) to the file and the
** index. An empty chunk is nothing to store. */
static int chunk_append(em_bbuild *b, uint32_t series, const uint8_t *p,
                        size_t len, const em_chunk_header *h)
{
    bser *s = &b->ser[series];
    int rc;

    if (h->nprofiles == 0)
        return EMBER_OK;
    if (s->any && h->min_time <= s->last)
        return em_err(EMBER_EINVAL, "block builder: series %" PRIu32 ": a "
                      "chunk from %" PRId64 " ms, not after the previous "
                      "one's end (%" PRId64 ")", series, h->min_time,
                      s->last);
    GROW(b->chunk, b->capchunk, b->nchunk + 1, "chunk index");
    b->chunk[b->nchunk] = (em_bchunk){ series, h->min_time, h->max_time,
                                       b->off, len };
    if ((rc = write_all(b, p, len)) != EMBER_OK)
        return rc;
    if (b->nchunk == 0 || h->min_time < b->min_time)
        b->min_time = h->min_time;
    if (b->nchunk == 0 || h->max_time > b->max_time)
        b->max_time = h->max_time;
    b->nchunk++;
    b->nprofiles += h->nprofiles;
    b->nsamples += h->nsamples;
    s->last = h->max_time;
    s->any = true;
    return EMBER_OK;
}

static int series_check(const em_bbuild *b, uint32_t series)
{
    if (series >= b->nser)
        return em_err(EMBER_EINVAL, "block builder: chunk: series %" PRIu32
                      " of %" PRIu32, series, b->nser);
    return EMBER_OK;
}

int em_bbuild_chunk(em_bbuild *b, em_codec *c, uint32_t series,
                    const em_chunk_profile *ps, size_t np)
{
    em_chunk_header h;
    int rc = usable(b);

    if (rc == EMBER_OK)
        rc = series_check(b, series);
    for (size_t i = 0; i < np && rc == EMBER_OK; i++)
        for (uint32_t j = 0; j < ps[i].n; j++)
            if (ps[i].stacks[j] >= b->nnode)
                return em_err(EMBER_EINVAL, "block builder: chunk: profile "
                              "%zu: node %" PRIu32 " of %" PRIu32, i,
                              ps[i].stacks[j], b->nnode);
    if (rc != EMBER_OK || np == 0)
        return rc;
    b->enc.len = 0;
    rc = em_chunk_encode(c, ps, np, 0, b->level, &b->enc);
    if (rc == EMBER_OK)
        rc = em_chunk_header_read(b->enc.p, b->enc.len, &h);
    if (rc == EMBER_OK)
        rc = chunk_append(b, series, b->enc.p, b->enc.len, &h);
    return rc;
}

/* Checks that the stacks of a whole chunk name nodes of this block. */
static int chunk_nodes_check(const em_bbuild *b, const uint8_t *chunk,
                             size_t len, const em_chunk_header *h)
{
    em_chunk ch = { .h = *h };
    void *mem = NULL;
    size_t bytes;
    int rc = em_chunk_decode_parts(NULL, chunk, len, EM_PART_STACKS, &ch,
                                   &mem, &bytes);

    if (rc == EMBER_OK && h->nstacks > 0 &&
        ch.stacks[h->nstacks - 1] >= b->nnode)
        rc = em_err(EMBER_EINVAL, "block builder: raw chunk: node %" PRIu32
                    " of %" PRIu32, ch.stacks[h->nstacks - 1], b->nnode);
    em_free(mem);
    return rc;
}

int em_bbuild_chunk_raw(em_bbuild *b, uint32_t series, const uint8_t *chunk,
                        size_t len)
{
    em_chunk_header h;
    int rc = usable(b);

    if (rc == EMBER_OK)
        rc = series_check(b, series);
    if (rc == EMBER_OK && chunk == NULL)
        rc = em_err(EMBER_EINVAL, "block builder: raw chunk: no bytes");
    if (rc == EMBER_OK)
        rc = em_chunk_header_read(chunk, len, &h);
    if (rc == EMBER_OK)
        rc = chunk_nodes_check(b, chunk, len, &h);
    if (rc == EMBER_OK)
        rc = chunk_append(b, series, chunk, len, &h);
    return rc;
}

/* ---- new, free, memory ---------------------------------------------------- */

static int bbuild_open(em_bbuild *b, const char *dir, const char *name)
{
    static const uint8_t header[BLK_HEADER] = { 'E', 'M', 'B', 'K',
                                                EM_BLOCK_VERSION, 0, 0, 0 };
    size_t nd = strlen(dir), nn = strlen(name);
    uint32_t id;
    int rc;

    b->dir = em_strdup(dir);
    b->path = em_malloc(nd + nn + 2);
    b->tmp = em_malloc(nd + nn + 6);
    if (b->dir == NULL || b->path == NULL || b->tmp == NULL)
        return em_err(EMBER_ENOMEM, "block builder: %s/%s", dir, name);
    snprintf(b->path, nd + nn + 2, "%s/%s", dir, name);
    snprintf(b->tmp, nd + nn + 6, "%s/%s.tmp", dir, name);
    b->fd = open(b->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (b->fd < 0)
        return em_err(errno == ENOENT ? EMBER_ENOTFOUND : EMBER_EIO,
                      "block builder: create %s: %s", b->tmp,
                      strerror(errno));
    b->created = true;
    if ((rc = write_all(b, header, sizeof header)) != EMBER_OK)
        return rc;
    /* the reserved records every block has, as the head has them */
    if ((rc = str_add(b, "", 0, &id)) != EMBER_OK)
        return rc;
    return em_bbuild_mapping(b, 0, 0, 0, 0, 0, &id);
}

int em_bbuild_new(const char *dir, const char *name, int level,
                  em_bbuild **out)
{
    em_bbuild *b;
    int rc;

    *out = NULL;
    if (dir == NULL || name == NULL || *name == '\0' || strchr(name, '/'))
        return em_err(EMBER_EINVAL, "block builder: bad file name");
    if ((b = em_calloc(1, sizeof *b)) == NULL)
        return em_err(EMBER_ENOMEM, "block builder: %zu bytes", sizeof *b);
    b->fd = -1;
    b->level = level;
    if ((rc = bbuild_open(b, dir, name)) != EMBER_OK) {
        em_bbuild_free(b);
        return rc;
    }
    *out = b;
    return EMBER_OK;
}

void em_bbuild_free(em_bbuild *b)
{
    if (b == NULL)
        return;
    if (b->fd >= 0)
        close(b->fd);
    if (b->created && !b->done)
        (void)unlink(b->tmp);   /* nothing of a failed block stays */
    em_free(b->dir), em_free(b->path), em_free(b->tmp);
    em_free(b->sb), em_free(b->soff), str_ix_free(&b->str_ix);
    em_free(b->map), map_ix_free(&b->map_ix);
    em_free(b->fn), fn_ix_free(&b->fn_ix);
    em_free(b->loc), em_free(b->line), loc_ix_free(&b->loc_ix);
    em_free(b->parent), em_free(b->nodeloc), em_free(b->depth);
    node_ix_free(&b->node_ix);
    em_free(b->ser), em_free(b->lname), em_free(b->lvalue);
    ser_ix_free(&b->ser_ix);
    em_free(b->chunk);
    em_buf_free(&b->enc);
    em_free(b);
}

size_t em_bbuild_memory(const em_bbuild *b)
{
    return sizeof *b + b->capsb + b->capsoff * sizeof *b->soff +
           (b->str_ix.mask + 1 + b->map_ix.mask + 1 + b->fn_ix.mask + 1 +
            b->loc_ix.mask + 1 + b->node_ix.mask + 1 + b->ser_ix.mask + 1) *
               sizeof(bslot) +
           b->capmap * sizeof *b->map + b->capfn * sizeof *b->fn +
           b->caploc * sizeof *b->loc + b->capline * sizeof *b->line +
           (b->capparent + b->capnodeloc + b->capdepth) * sizeof(uint32_t) +
           b->capser * sizeof *b->ser +
           (b->caplname + b->caplvalue) * sizeof(uint32_t) +
           b->capchunk * sizeof *b->chunk + b->enc.cap;
}

/* ---- finish: the new order of each table ---------------------------------- */

/* What finish works with: each renumbered table's order (new id -> old)
** and map (old id -> new), and the column being written. */
typedef struct fin {
    uint32_t *sorder, *smap;        /* strings */
    uint32_t *forder, *fmap;        /* functions */
    uint32_t *lorder, *lmap;        /* locations */
    uint32_t type_name;             /* new id of "__type__" */
    uint32_t npost;                 /* postings written */
    ZSTD_CCtx *cctx;
    em_buf col;                     /* one section's raw bytes */
    em_buf z;                       /* ... compressed */
    em_buf dir;                     /* the section directory */
} fin;

static int cmp_u32(uint32_t a, uint32_t c)
{
    return (a > c) - (a < c);
}

static int str_order_cmp(const void *x, const void *y, void *ctx)
{
    return str_cmp(ctx, *(const uint32_t *)x, *(const uint32_t *)y);
}

/* ORDER (N ids, then sorted) and its inverse MAP, allocated. */
static int order_alloc(uint32_t n, uint32_t **order, uint32_t **map,
                       const char *what)
{
    *order = em_malloc((n + (size_t)1) * sizeof **order);
    *map = em_malloc((n + (size_t)1) * sizeof **map);
    if (*order == NULL || *map == NULL)
        return em_err(EMBER_ENOMEM, "block builder: order of %" PRIu32
                      " %s", n, what);
    for (uint32_t i = 0; i < n; i++)
        (*order)[i] = i;
    return EMBER_OK;
}

static void order_invert(const uint32_t *order, uint32_t *map, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        map[order[i]] = i;
}

/* Strings in byte order: string order is then id order (a reader finds a
** string by bisection, series labels sorted by name are sorted by id), and
** neighbours share prefixes for the front coding. "" stays string 0. */
static int order_strings(em_bbuild *b, fin *f)
{
    int rc = order_alloc(b->nstr, &f->sorder, &f->smap, "strings");

    if (rc != EMBER_OK)
        return rc;
    qsort_r(f->sorder, b->nstr, sizeof *f->sorder, str_order_cmp, b);
    order_invert(f->sorder, f->smap, b->nstr);
    return EMBER_OK;
}

/* A function under the new string ids, for sorting. */
typedef struct fn_sort {
    uint32_t name, system_name, file, old;
    int64_t start_line;
} fn_sort;

static int fn_sort_cmp(const void *x, const void *y)
{
    const fn_sort *a = x, *c = y;
    int r = cmp_u32(a->name, c->name);

    if (r == 0)
        r = cmp_u32(a->system_name, c->system_name);
    if (r == 0)
        r = cmp_u32(a->file, c->file);
    if (r == 0)
        r = (a->start_line > c->start_line) - (a->start_line < c->start_line);
    return r;
}

/* Functions sorted by name (then the other fields): names then grow by
** small steps, and the order is canonical, so a reader can prove that no
** function is stored twice. */
static int order_functions(em_bbuild *b, fin *f)
{
    fn_sort *v = em_malloc((b->nfn + (size_t)1) * sizeof *v);
    int rc = order_alloc(b->nfn, &f->forder, &f->fmap, "functions");

    if (rc == EMBER_OK && v == NULL)
        rc = em_err(EMBER_ENOMEM, "block builder: sorting %" PRIu32
                    " functions", b->nfn);
    for (uint32_t i = 0; rc == EMBER_OK && i < b->nfn; i++) {
        const em_bfunction *fn = &b->fn[i];
        v[i] = (fn_sort){ f->smap[fn->name], f->smap[fn->system_name],
                          f->smap[fn->file], i, fn->start_line };
    }
    if (rc == EMBER_OK) {
        qsort(v, b->nfn, sizeof *v, fn_sort_cmp);
        for (uint32_t i = 0; i < b->nfn; i++)
            f->forder[i] = v[i].old;
        order_invert(f->forder, f->fmap, b->nfn);
    }
    em_free(v);
    return rc;
}

/* A location's sort key. */
typedef struct loc_sort {
    uint32_t mapping;
    uint64_t address;
    uint32_t uses, old;
} loc_sort;

static int loc_sort_cmp(const void *x, const void *y)
{
    const loc_sort *a = x, *c = y;
    int r = cmp_u32(a->mapping, c->mapping);

    if (r == 0)
        r = (a->address > c->address) - (a->address < c->address);
    if (r == 0)
        r = cmp_u32(c->uses, a->uses);
    return r != 0 ? r : cmp_u32(a->old, c->old);
}

/* Locations by mapping and address: neighbours' addresses differ by
** little and often share functions, which the address and line columns
** gain more from than the node column loses (measured on real Go
** profiles: 7.4 bytes per stack against 8.3 in order of use). Those that
** share an address (collapsed stacks know none) go by how many nodes name
** them, most first, so that the node column's common values are small. */
static int order_locations(em_bbuild *b, fin *f)
{
    loc_sort *v = em_calloc(b->nloc + (size_t)1, sizeof *v);
    int rc = order_alloc(b->nloc, &f->lorder, &f->lmap, "locations");

    if (rc == EMBER_OK && v == NULL)
        rc = em_err(EMBER_ENOMEM, "block builder: sorting %" PRIu32
                    " locations", b->nloc);
    if (rc != EMBER_OK)
        goto out;
    for (uint32_t i = 0; i < b->nloc; i++)
        v[i] = (loc_sort){ b->loc[i].mapping, b->loc[i].address, 0, i };
    for (uint32_t i = 0; i < b->nnode; i++)
        v[b->nodeloc[i]].uses++;
    qsort(v, b->nloc, sizeof *v, loc_sort_cmp);
    for (uint32_t i = 0; i < b->nloc; i++)
        f->lorder[i] = v[i].old;
    order_invert(f->lorder, f->lmap, b->nloc);
out:
    em_free(v);
    return rc;
}

static int fin_order(em_bbuild *b, fin *f)
{
    uint32_t id;
    int rc = EMBER_OK;

    /* the type is indexed as a label under its reserved name */
    if (b->nser > 0)
        rc = str_add(b, EM_TYPE_LABEL, strlen(EM_TYPE_LABEL), &id);
    if (rc == EMBER_OK)
        rc = order_strings(b, f);
    if (rc == EMBER_OK && b->nser > 0)
        f->type_name = f->smap[id];
    if (rc == EMBER_OK)
        rc = order_functions(b, f);
    if (rc == EMBER_OK)
        rc = order_locations(b, f);
    return rc;
}

/* ---- finish: sections ----------------------------------------------------- */

/* Empties the column and makes room for N varints. */
static int col_begin(fin *f, uint64_t n)
{
    f->col.len = 0;
    if (n > (SIZE_MAX - 1) / EM_VARINT_MAX)
        return em_err(EMBER_ELIMIT, "block builder: a column of %" PRIu64
                      " values", n);
    return em_buf_reserve(&f->col, (size_t)n * EM_VARINT_MAX + 1);
}

/* Appends a varint; col_begin made room. */
static inline void put(fin *f, uint64_t v)
{
    f->col.len += em_varint_put(f->col.p + f->col.len, v);
}

static inline void put_zz(fin *f, int64_t v)
{
    put(f, em_zigzag(v));
}

/* Compresses the column when that pays, appends it to the file as
** section ID and its entry to the directory. */
static int sec_put(em_bbuild *b, fin *f, int id)
{
    const uint8_t *p = f->col.p;
    size_t n = f->col.len, bound = ZSTD_compressBound(n);
    uint8_t e[BLK_DIRENT] = { (uint8_t)id, BLK_ENC_RAW };
    int rc;

    if (n > UINT32_MAX)
        return em_err(EMBER_ELIMIT, "block builder: section %s: %zu bytes",
                      em_blk_sec_names[id], n);
    if (n >= BLK_RAW_BELOW) {
        if (f->cctx == NULL && (f->cctx = ZSTD_createCCtx_advanced(
                                    (ZSTD_customMem){ blk_zstd_alloc,
                                                      blk_zstd_free, NULL }))
                                   == NULL)
            return em_err(EMBER_ENOMEM, "block builder: zstd context");
        f->z.len = 0;
        if ((rc = em_buf_reserve(&f->z, bound)) != EMBER_OK)
            return em_err_prefix(rc, "block builder: section %s",
                                 em_blk_sec_names[id]);
        size_t r = ZSTD_compressCCtx(f->cctx, f->z.p, bound, p, n, b->level);
        if (ZSTD_isError(r))
            return em_err(ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                              ? EMBER_ENOMEM : EMBER_EIO,
                          "block builder: section %s: zstd: %s",
                          em_blk_sec_names[id], ZSTD_getErrorName(r));
        if (r < n)
            p = f->z.p, n = r, e[1] = BLK_ENC_ZSTD;
    }
    em_put_le32(e + 4, (uint32_t)crc32_z(0, p, n));
    em_put_le64(e + 8, b->off);
    em_put_le32(e + 16, (uint32_t)n);
    em_put_le32(e + 20, (uint32_t)f->col.len);
    if ((rc = em_buf_put(&f->dir, e, sizeof e)) != EMBER_OK)
        return em_err_prefix(rc, "block builder: section directory");
    return write_all(b, p, n);
}

/* Bytes strings A and C share at their start. */
static size_t str_lcp(const em_bbuild *b, uint32_t a, uint32_t c)
{
    const uint8_t *pa = b->sb + b->soff[a], *pc = b->sb + b->soff[c];
    size_t la = b->soff[a + 1] - b->soff[a], lc = b->soff[c + 1] - b->soff[c];
    size_t n = la < lc ? la : lc, i = 0;

    while (i < n && pa[i] == pc[i])
        i++;
    return i;
}

/* Front coding, from the second string on (the first is ""): the bytes
** shared with the string before, the length of the rest, the rests. */
static int sec_strings(em_bbuild *b, fin *f)
{
    const uint32_t *o = f->sorder;
    int rc = EMBER_OK;

    for (int k = BLK_STR_PREFIX; k <= BLK_STR_BYTES && rc == EMBER_OK; k++) {
        rc = k == BLK_STR_BYTES ? col_begin(f, b->nsb / EM_VARINT_MAX + 1)
                                : col_begin(f, b->nstr);
        for (uint32_t i = 1; i < b->nstr && rc == EMBER_OK; i++) {
            size_t p = str_lcp(b, o[i - 1], o[i]);
            size_t len = b->soff[o[i] + 1] - b->soff[o[i]];
            if (k == BLK_STR_BYTES) {
                memcpy(f->col.p + f->col.len, b->sb + b->soff[o[i]] + p,
                       len - p);
                f->col.len += len - p;
            } else {
                put(f, k == BLK_STR_PREFIX ? p : len - p);
            }
        }
        if (rc == EMBER_OK)
            rc = sec_put(b, f, k);
    }
    return rc;
}

static int sec_mappings(em_bbuild *b, fin *f)
{
    int rc = col_begin(f, 5 * (uint64_t)b->nmap);

    for (uint32_t i = 0; i < b->nmap && rc == EMBER_OK; i++) {
        const em_bmapping *m = &b->map[i];
        put(f, m->start);
        put(f, m->limit - m->start);
        put(f, m->offset);
        put(f, f->smap[m->file]);
        put(f, f->smap[m->build_id]);
    }
    return rc == EMBER_OK ? sec_put(b, f, BLK_MAPPINGS) : rc;
}

/* Field K (BLK_FN_*) of the functions in their new order, each against
** the function before. */
static void fn_column(const em_bbuild *b, fin *f, int k)
{
    uint32_t name = 0, file = 0;
    int64_t start = 0;

    for (uint32_t i = 0; i < b->nfn; i++) {
        const em_bfunction *fn = &b->fn[f->forder[i]];
        uint32_t nm = f->smap[fn->name], fl = f->smap[fn->file];
        if (k == BLK_FN_NAME)
            put(f, nm - name);
        else if (k == BLK_FN_SYSTEM)
            put_zz(f, (int64_t)f->smap[fn->system_name] - nm);
        else if (k == BLK_FN_FILE)
            put_zz(f, (int64_t)fl - file);
        else
            put_zz(f, em_sub_wrap(fn->start_line, start));
        name = nm, file = fl, start = fn->start_line;
    }
}

static int sec_functions(em_bbuild *b, fin *f)
{
    int rc = EMBER_OK;

    for (int k = BLK_FN_NAME; k <= BLK_FN_START && rc == EMBER_OK; k++) {
        if ((rc = col_begin(f, b->nfn)) == EMBER_OK) {
            fn_column(b, f, k);
            rc = sec_put(b, f, k);
        }
    }
    return rc;
}

/* Field K (BLK_LOC_*) of the locations in their new order. */
static void loc_column(const em_bbuild *b, fin *f, int k)
{
    uint64_t addr = 0;

    for (uint32_t i = 0; i < b->nloc; i++) {
        const em_blocation *l = &b->loc[f->lorder[i]];
        if (k == BLK_LOC_MAPPING)
            put(f, l->mapping);
        else if (k == BLK_LOC_ADDRESS)
            put_zz(f, (int64_t)(l->address - addr));
        else
            put(f, l->n);
        addr = l->address;
    }
}

/* Field K (BLK_LINE_*) of the lines, location by location: a line is
** stored against its function's start line, which it follows closely. */
static void line_column(const em_bbuild *b, fin *f, int k)
{
    for (uint32_t i = 0; i < b->nloc; i++) {
        const em_blocation *l = &b->loc[f->lorder[i]];
        for (uint32_t j = 0; j < l->n; j++) {
            const em_bline *ln = &b->line[l->first + j];
            if (k == BLK_LINE_FUNCTION)
                put(f, f->fmap[ln->function]);
            else
                put_zz(f, em_sub_wrap(ln->line,
                                      b->fn[ln->function].start_line));
        }
    }
}

static int sec_locations(em_bbuild *b, fin *f)
{
    int rc = EMBER_OK;

    for (int k = BLK_LOC_MAPPING; k <= BLK_LINE_LINE && rc == EMBER_OK; k++) {
        bool line = k >= BLK_LINE_FUNCTION;
        if ((rc = col_begin(f, line ? b->nline : b->nloc)) == EMBER_OK) {
            if (line)
                line_column(b, f, k);
            else
                loc_column(b, f, k);
            rc = sec_put(b, f, k);
        }
    }
    return rc;
}

/* The tree: node - parent (0 for an outermost frame), which a stack's new
** nodes, made one after another, keep at 1; and the node's location
** against its parent's, since a caller and its callees tend to lie close
** in the address order of locations (10% smaller on real Go profiles). */
static int sec_nodes(em_bbuild *b, fin *f)
{
    int rc = col_begin(f, b->nnode);

    for (uint32_t i = 0; i < b->nnode && rc == EMBER_OK; i++)
        put(f, b->parent[i] == EM_BLOCK_ROOT ? 0 : i - b->parent[i]);
    if (rc == EMBER_OK)
        rc = sec_put(b, f, BLK_NODE_PARENT);
    if (rc == EMBER_OK)
        rc = col_begin(f, b->nnode);
    for (uint32_t i = 0; i < b->nnode && rc == EMBER_OK; i++) {
        uint32_t p = b->parent[i];
        put_zz(f, (int64_t)f->lmap[b->nodeloc[i]] -
                      (p == EM_BLOCK_ROOT ? 0 : f->lmap[b->nodeloc[p]]));
    }
    return rc == EMBER_OK ? sec_put(b, f, BLK_NODE_LOC) : rc;
}

static int sec_series(em_bbuild *b, fin *f)
{
    int rc = EMBER_OK;

    for (int k = BLK_SER_TYPE; k <= BLK_LABEL_VALUE && rc == EMBER_OK; k++) {
        bool label = k >= BLK_LABEL_NAME;
        if ((rc = col_begin(f, label ? b->nlabel : b->nser)) != EMBER_OK)
            break;
        for (uint32_t i = 0; i < b->nser; i++) {
            const em_bseries *s = &b->ser[i].s;
            if (k == BLK_SER_TYPE)
                put(f, f->smap[s->type]);
            else if (k == BLK_SER_NLABELS)
                put(f, s->n);
            for (uint32_t j = 0; label && j < s->n; j++)
                put(f, f->smap[k == BLK_LABEL_NAME ? b->lname[s->first + j]
                                                   : b->lvalue[s->first + j]]);
        }
        rc = sec_put(b, f, k);
    }
    return rc;
}

/* ---- finish: postings and the chunk index -------------------------------- */

/* One (label, series) pair: the postings sorted. */
typedef struct post_ent {
    uint32_t name, value, series;
} post_ent;

static int post_cmp(const void *x, const void *y)
{
    const post_ent *a = x, *c = y;
    int r = cmp_u32(a->name, c->name);

    if (r == 0)
        r = cmp_u32(a->value, c->value);
    return r != 0 ? r : cmp_u32(a->series, c->series);
}

/* Every series' labels and its type (under "__type__"), as pairs sorted
** by name, value and series. */
static int post_gather(const em_bbuild *b, const fin *f, post_ent **out,
                       size_t *n)
{
    size_t k = 0;
    post_ent *v = em_malloc(((size_t)b->nlabel + b->nser + 1) * sizeof *v);

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "block builder: postings of %" PRIu32
                      " series", b->nser);
    for (uint32_t i = 0; i < b->nser; i++) {
        const em_bseries *s = &b->ser[i].s;
        v[k++] = (post_ent){ f->type_name, f->smap[s->type], i };
        for (uint32_t j = 0; j < s->n; j++)
            v[k++] = (post_ent){ f->smap[b->lname[s->first + j]],
                                 f->smap[b->lvalue[s->first + j]], i };
    }
    qsort(v, k, sizeof *v, post_cmp);
    *out = v;
    *n = k;
    return EMBER_OK;
}

/* Column K (BLK_POST_*) of the postings: one per distinct (name, value). */
static void post_column(fin *f, const post_ent *v, size_t n, int k)
{
    for (size_t i = 0, end; i < n; i = end) {
        bool same = i > 0 && v[i - 1].name == v[i].name;
        for (end = i + 1; end < n && v[end].name == v[i].name &&
                          v[end].value == v[i].value; end++)
            ;
        if (k == BLK_POST_NAME)
            put(f, i > 0 ? v[i].name - v[i - 1].name : v[i].name);
        else if (k == BLK_POST_VALUE)
            put(f, same ? v[i].value - v[i - 1].value : v[i].value);
        else if (k == BLK_POST_COUNT)
            put(f, end - i);
        for (size_t j = i; k == BLK_POST_SERIES && j < end; j++)
            put(f, j == i ? v[j].series : v[j].series - v[j - 1].series);
        if (k == BLK_POST_NAME)
            f->npost++;
    }
}

static int sec_postings(em_bbuild *b, fin *f)
{
    post_ent *v = NULL;
    size_t n = 0;
    int rc = post_gather(b, f, &v, &n);

    for (int k = BLK_POST_NAME; k <= BLK_POST_SERIES && rc == EMBER_OK; k++) {
        if ((rc = col_begin(f, n)) == EMBER_OK) {
            post_column(f, v, n, k);
            rc = sec_put(b, f, k);
        }
    }
    em_free(v);
    return rc;
}

static int chunk_cmp(const void *x, const void *y)
{
    const em_bchunk *a = x, *c = y;
    int r = cmp_u32(a->series, c->series);

    return r != 0 ? r : (a->min_time > c->min_time) -
                        (a->min_time < c->min_time);
}

/* Column K (BLK_IDX_*) of the index, sorted by series and time. */
static void idx_column(fin *f, const em_bchunk *v, uint64_t n, int k)
{
    uint64_t end = BLK_HEADER;

    for (uint64_t i = 0; i < n; i++) {
        const em_bchunk *c = &v[i];
        bool same = i > 0 && v[i - 1].series == c->series;
        if (k == BLK_IDX_SERIES)
            put(f, i > 0 ? c->series - v[i - 1].series : c->series);
        else if (k == BLK_IDX_MIN)
            put_zz(f, same ? em_sub_wrap(c->min_time, v[i - 1].max_time)
                           : c->min_time);
        else if (k == BLK_IDX_SPAN)
            put(f, (uint64_t)c->max_time - (uint64_t)c->min_time);
        else if (k == BLK_IDX_OFFSET)
            put_zz(f, (int64_t)(c->offset - end));
        else
            put(f, c->len);
        end = c->offset + c->len;
    }
}

/* The index, in (series, time) order; chunks were written in the order
** they came, which for a builder fed series by series is the same, so
** that each offset is the previous chunk's end and costs a zero. */
static int sec_index(em_bbuild *b, fin *f)
{
    int rc = EMBER_OK;

    if (b->nchunk > 0)          /* qsort's base must not be NULL */
        qsort(b->chunk, b->nchunk, sizeof *b->chunk, chunk_cmp);
    for (int k = BLK_IDX_SERIES; k <= BLK_IDX_LENGTH && rc == EMBER_OK; k++) {
        if ((rc = col_begin(f, b->nchunk)) == EMBER_OK) {
            idx_column(f, b->chunk, b->nchunk, k);
            rc = sec_put(b, f, k);
        }
    }
    return rc;
}

/* ---- finish: footer, trailer, rename -------------------------------------- */

static void footer_fill(const em_bbuild *b, const fin *f,
                        const em_block_info *in, uint64_t chunks_end,
                        uint8_t *p)
{
    em_put_le64(p + BLK_F_ID, in != NULL ? in->id : 0);
    em_put_le64(p + BLK_F_MIN, (uint64_t)b->min_time);
    em_put_le64(p + BLK_F_MAX, (uint64_t)b->max_time);
    em_put_le64(p + BLK_F_RES, in != NULL ? (uint64_t)in->resolution_ms : 0);
    em_put_le32(p + BLK_F_LEVEL, in != NULL ? in->level : 0);
    em_put_le32(p + BLK_F_NSTRINGS, b->nstr);
    em_put_le32(p + BLK_F_NMAPPINGS, b->nmap);
    em_put_le32(p + BLK_F_NFUNCTIONS, b->nfn);
    em_put_le32(p + BLK_F_NLOCATIONS, b->nloc);
    em_put_le32(p + BLK_F_NLINES, b->nline);
    em_put_le32(p + BLK_F_NNODES, b->nnode);
    em_put_le32(p + BLK_F_NSERIES, b->nser);
    em_put_le32(p + BLK_F_NLABELS, b->nlabel);
    em_put_le32(p + BLK_F_NPOSTINGS, f->npost);
    em_put_le64(p + BLK_F_NCHUNKS, b->nchunk);
    em_put_le64(p + BLK_F_NPROFILES, b->nprofiles);
    em_put_le64(p + BLK_F_NSAMPLES, b->nsamples);
    em_put_le64(p + BLK_F_CHUNKS_END, chunks_end);
    em_put_le32(p + BLK_F_NSECTIONS, BLK_NSEC);
    em_put_le32(p + BLK_F_RESERVED, 0);
}

/* Appends footer and trailer; *CRC gets the trailer's checksum. */
static int fin_footer(em_bbuild *b, fin *f, const em_block_info *in,
                      uint64_t chunks_end, uint32_t *crc)
{
    static const uint8_t header[BLK_HEADER] = { 'E', 'M', 'B', 'K',
                                                EM_BLOCK_VERSION, 0, 0, 0 };
    size_t n = BLK_FOOTER_FIXED + f->dir.len;
    uint8_t *p = em_malloc(n + BLK_TRAILER);
    uLong c;
    int rc;

    if (p == NULL)
        return em_err(EMBER_ENOMEM, "block builder: footer of %zu bytes", n);
    footer_fill(b, f, in, chunks_end, p);
    memcpy(p + BLK_FOOTER_FIXED, f->dir.p, f->dir.len);
    em_put_le32(p + n, (uint32_t)n);
    memcpy(p + n + 4, (const uint8_t[4]){ EM_BLOCK_VERSION, 0, 0, 0 }, 4);
    c = crc32_z(crc32_z(0, header, sizeof header), p, n + 8);
    *crc = (uint32_t)c;
    em_put_le32(p + n + 8, *crc);
    em_put_le32(p + n + 12, BLK_MAGIC);
    rc = write_all(b, p, n + BLK_TRAILER);
    em_free(p);
    return rc;
}

static int sys_fail(em_bbuild *b, const char *what, const char *path)
{
    b->failed = 1;
    return em_err(EMBER_EIO, "block builder: %s %s: %s", what, path,
                  strerror(errno));
}

/* Makes the file durable under its name: fsync, rename, fsync DIR. */
static int fin_commit(em_bbuild *b)
{
    int fd, rc = EMBER_OK;

    if (fsync(b->fd) != 0)
        return sys_fail(b, "fsync", b->tmp);
    fd = b->fd, b->fd = -1;
    if (close(fd) != 0)
        return sys_fail(b, "close", b->tmp);
    if (rename(b->tmp, b->path) != 0)
        return sys_fail(b, "rename", b->tmp);
    b->done = true;
    if ((fd = open(b->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return sys_fail(b, "open", b->dir);
    if (fsync(fd) != 0)
        rc = sys_fail(b, "fsync", b->dir);
    close(fd);
    return rc;
}

static void fin_free(fin *f)
{
    em_free(f->sorder), em_free(f->smap);
    em_free(f->forder), em_free(f->fmap);
    em_free(f->lorder), em_free(f->lmap);
    ZSTD_freeCCtx(f->cctx);
    em_buf_free(&f->col), em_buf_free(&f->z), em_buf_free(&f->dir);
}

static void info_fill(const em_bbuild *b, const em_block_info *in,
                      uint32_t crc, em_block_info *out)
{
    *out = (em_block_info){
        .id = in != NULL ? in->id : 0,
        .min_time = b->min_time, .max_time = b->max_time,
        .resolution_ms = in != NULL ? in->resolution_ms : 0,
        .level = in != NULL ? in->level : 0,
        .nstrings = b->nstr, .nmappings = b->nmap, .nfunctions = b->nfn,
        .nlocations = b->nloc, .nnodes = b->nnode, .nseries = b->nser,
        .nlines = b->nline, .nlabels = b->nlabel, .nchunks = b->nchunk,
        .nprofiles = b->nprofiles, .nsamples = b->nsamples,
        .file_size = b->off, .footer_crc = crc };
}

int em_bbuild_finish(em_bbuild *b, const em_block_info *info,
                     em_block_info *out)
{
    fin f = { .type_name = UINT32_MAX };
    uint64_t chunks_end = b->off;
    uint32_t crc = 0;
    int rc = usable(b);

    if (rc == EMBER_OK)
        rc = fin_order(b, &f);
    if (rc == EMBER_OK && (rc = sec_strings(b, &f)) == EMBER_OK &&
        (rc = sec_mappings(b, &f)) == EMBER_OK &&
        (rc = sec_functions(b, &f)) == EMBER_OK &&
        (rc = sec_locations(b, &f)) == EMBER_OK &&
        (rc = sec_nodes(b, &f)) == EMBER_OK &&
        (rc = sec_series(b, &f)) == EMBER_OK &&
        (rc = sec_postings(b, &f)) == EMBER_OK)
        rc = sec_index(b, &f);
    if (rc == EMBER_OK)
        rc = fin_footer(b, &f, info, chunks_end, &crc);
    if (rc == EMBER_OK)
        rc = fin_commit(b);
    if (rc == EMBER_OK && out != NULL)
        info_fill(b, info, crc, out);
    if (rc != EMBER_OK && !b->done)
        b->failed = 1;          /* sections may be half-written */
    fin_free(&f);
    return rc;
}
