/*
** engine/block_write.c: the block builder (engine/block.h) up to its
** finish (engine/block_finish.c); the layout is in engine/block_int.h,
** every byte in docs/file-format.md, "Blocks".
**
** Interning: each table is an array plus an engine/htab.h index of (hash,
** id + 1) slots; equal content gets the id it got first. Chunks go to
** DIR/NAME.tmp as they come, so the builder holds the symbol tables and
** the chunk index, never the samples.
**
** A write that fails leaves the file half-written: the builder then
** refuses everything but em_bbuild_free, which removes the file.
*/
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/block_int.h"
#include "engine/store.h"

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

int em_bbuild_check(const em_bbuild *b)
{
    if (b->failed)
        return em_err(EMBER_EIO, "block builder %s: unusable after an "
                      "earlier failure", b->tmp);
    if (b->done)
        return em_err(EMBER_EINVAL, "block builder %s: already finished",
                      b->path);
    return EMBER_OK;
}

int em_bbuild_write(em_bbuild *b, const void *p, size_t n)
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
    int rc = em_bbuild_check(b);

    if (rc == EMBER_OK && s == NULL && len > 0)
        rc = em_err(EMBER_EINVAL, "block builder: string: no bytes");
    return rc == EMBER_OK ? str_add(b, s, len, id) : rc;
}

int em_bbuild_strcmp(const em_bbuild *b, uint32_t a, uint32_t c)
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
    int rc = em_bbuild_check(b);

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
    int rc = em_bbuild_check(b);

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
    int rc = em_bbuild_check(b);

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
    uint32_t depth = loc == EM_BLOCK_NOLOC ? 0
                     : parent == EM_BLOCK_ROOT ? 1 : b->depth[parent] + 1;
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
    int rc = em_bbuild_check(b);

    if (rc != EMBER_OK)
        return rc;
    if (parent != EM_BLOCK_ROOT && parent >= b->nnode)
        return em_err(EMBER_EINVAL, "block builder: node: parent %" PRIu32
                      " of %" PRIu32, parent, b->nnode);
    if (loc == EM_BLOCK_NOLOC && parent == EM_BLOCK_ROOT)
        return node_add(b, parent, loc, id);    /* the empty stack */
    if (parent != EM_BLOCK_ROOT && b->nodeloc[parent] == EM_BLOCK_NOLOC)
        return em_err(EMBER_EINVAL, "block builder: node: the empty stack "
                      "%" PRIu32 " as a parent", parent);
    if (loc >= b->nloc)
        return em_err(EMBER_EINVAL, "block builder: node: location %" PRIu32
                      " of %" PRIu32, loc, b->nloc);
    return node_add(b, parent, loc, id);
}

int em_bbuild_stack(em_bbuild *b, const uint32_t *locs, size_t n,
                    uint32_t *id)
{
    uint32_t node = EM_BLOCK_ROOT;
    int rc = em_bbuild_check(b);

    if (rc == EMBER_OK && n == 0)
        return node_add(b, EM_BLOCK_ROOT, EM_BLOCK_NOLOC, id);
    if (rc == EMBER_OK && locs == NULL)
        rc = em_err(EMBER_EINVAL, "block builder: NULL stack");
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

/* Node ids in depth-first preorder, children in id order: PERM[old] =
** new. KID and SIB are scratch of n + 1 (the last slot is the root all
** outermost nodes hang from). Iterative: a stack may be 65536 deep. */
static void nodes_preorder(const uint32_t *parent, uint32_t n, uint32_t *kid,
                           uint32_t *sib, uint32_t *perm)
{
    const uint32_t none = UINT32_MAX;
    uint32_t next = 0, x;

    for (uint32_t i = 0; i <= n; i++)
        kid[i] = sib[i] = none;
    for (uint32_t i = n; i-- > 0;) {       /* prepended: lists ascend */
        uint32_t p = parent[i] == EM_BLOCK_ROOT ? n : parent[i];
        sib[i] = kid[p];
        kid[p] = i;
    }
    for (x = kid[n]; x != none;) {
        perm[x] = next++;
        if (kid[x] != none) {
            x = kid[x];
            continue;
        }
        while (x != none && sib[x] == none)
            x = parent[x] == EM_BLOCK_ROOT ? none : parent[x];
        if (x != none)
            x = sib[x];
    }
}

/* Moves A[i] to A[P[i]] for the N nodes, through TMP. */
static void nodes_permute(uint32_t *a, const uint32_t *p, uint32_t n,
                          uint32_t *tmp)
{
    for (uint32_t i = 0; i < n; i++)
        tmp[p[i]] = a[i];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

int em_bbuild_nodes_dfs(em_bbuild *b, uint32_t **perm)
{
    uint32_t n = b->nnode;
    uint32_t *p = NULL, *kid = NULL, *sib = NULL;
    int rc = em_bbuild_check(b);

    if (rc == EMBER_OK && b->nchunk > 0)
        rc = em_err(EMBER_EINVAL, "block builder: nodes renumbered after "
                    "a chunk named them");
    if (rc == EMBER_OK &&
        ((p = em_malloc(((size_t)n + 1) * sizeof *p)) == NULL ||
         (kid = em_malloc(((size_t)n + 1) * sizeof *kid)) == NULL ||
         (sib = em_malloc(((size_t)n + 1) * sizeof *sib)) == NULL))
        rc = em_err(EMBER_ENOMEM, "block builder: ordering %u nodes", n);
    if (rc == EMBER_OK) {
        nodes_preorder(b->parent, n, kid, sib, p);
        for (uint32_t i = 0; i < n; i++)    /* parents by their new ids */
            if (b->parent[i] != EM_BLOCK_ROOT)
                b->parent[i] = p[b->parent[i]];
        nodes_permute(b->parent, p, n, kid);
        nodes_permute(b->nodeloc, p, n, kid);
        nodes_permute(b->depth, p, n, kid);
        /* the keys hold parent ids: index anew, in the slots it had, so
        ** that no insert allocates */
        node_ix_clear(&b->node_ix);
        for (uint32_t i = 0; i < n; i++) {
            node_key k = { b, b->parent[i], b->nodeloc[i] };
            uint64_t h = em_mix64((uint64_t)k.parent << 32 | k.loc);
            bool found;
            *node_ix_insert(&b->node_ix, h, &k, &found) = (bslot){ h, i + 1 };
        }
    }
    em_free(kid);
    em_free(sib);
    if (rc == EMBER_OK && perm != NULL)
        *perm = p;
    else
        em_free(p);
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
        if (i > 0 && em_bbuild_strcmp(b, k->names[i - 1], nm) >= 0)
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
    int rc = em_bbuild_check(b);

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
    if ((rc = em_bbuild_write(b, p, len)) != EMBER_OK)
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
    int rc = em_bbuild_check(b);

    if (rc == EMBER_OK)
        rc = series_check(b, series);
    if (rc == EMBER_OK && np > 0 && ps == NULL)
        rc = em_err(EMBER_EINVAL, "block builder: chunk: no profiles");
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

int em_bbuild_series_chunks(em_bbuild *b, em_codec *c, uint32_t series,
                            const em_chunk_profile *ps, size_t np)
{
    int rc = EMBER_OK;

    for (size_t at = 0; at < np && rc == EMBER_OK;) {
        size_t k = 1;
        uint64_t ns = ps[at].n;
        while (at + k < np && k < EM_BLOCK_CHUNK_PROFILES &&
               ns + ps[at + k].n <= EM_BLOCK_CHUNK_SAMPLES)
            ns += ps[at + k++].n;
        while (at + k < np && k > 1 &&    /* chunks' times must not meet */
               ps[at + k].time_ms == ps[at + k - 1].time_ms)
            k--;
        rc = em_bbuild_chunk(b, c, series, ps + at, k);
        at += k;
    }
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
    int rc = em_bbuild_check(b);

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
    if ((rc = em_bbuild_write(b, header, sizeof header)) != EMBER_OK)
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
    const btab *ix[] = { &b->str_ix, &b->map_ix, &b->fn_ix, &b->loc_ix,
                         &b->node_ix, &b->ser_ix };
    size_t slots = 0;

    for (size_t i = 0; i < EM_ARRAY_LEN(ix); i++)
        slots += ix[i]->slots != NULL ? ix[i]->mask + 1 : 0;
    return sizeof *b + b->capsb + b->capsoff * sizeof *b->soff +
           slots * sizeof(bslot) +
           b->capmap * sizeof *b->map + b->capfn * sizeof *b->fn +
           b->caploc * sizeof *b->loc + b->capline * sizeof *b->line +
           (b->capparent + b->capnodeloc + b->capdepth) * sizeof(uint32_t) +
           b->capser * sizeof *b->ser +
           (b->caplname + b->caplvalue) * sizeof(uint32_t) +
           b->capchunk * sizeof *b->chunk + b->enc.cap;
}
