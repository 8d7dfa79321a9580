/*
** engine/canon.c: one stack, one id, across the sources of a snapshot.
** The head and each block number their stacks apart, so the same stack
** stored in two of them has two virtual ids; a merge over both must sum
** them as one (the design's "by stack id inside a block, by stack content
** across blocks"), and every merge of a query must name it the same way,
** or a diff of two merges would see two stacks.
**
** A stack's content is hashed, bottom up, the same way in every source:
** strings by their bytes; a mapping and a function by their fields with
** their strings' hashes; a location by its mapping's hash, address and
** lines (each line's function hash and line number); a stack as the fold
** of its locations' hashes from the outermost frame in, which is also
** what a block's tree node is (its parent's hash folded with its
** location's). Hashes are 128 bits, two independently mixed 64-bit lanes:
** stacks are matched by hash, without comparing content, and 2^-128 per
** pair makes a false match out of reach (10^12 stacks: about 10^-15).
**
** A snapshot maps each hash to the first virtual id it met with it; every
** merge of a snapshot with several sources holding stacks moves each sum
** to its canonical stack before the result is made (engine/read.c), so
** ids are canonical for the snapshot's whole life. Blocks' hashes are
** made as merges meet their stacks and kept with the open block; the
** head's per snapshot, location by location, as merges meet them.
*/
#include <stdlib.h>

#include "engine/block.h"
#include "engine/store.h"

#define LANE_B 0x9e3779b97f4a7c15ull

static inline void fold(em_h128 *h, uint64_t x)
{
    h->a = em_mix64(h->a ^ x) + x;
    h->b = em_mix64((h->b + x) * LANE_B ^ (h->b >> 29));
}

static em_h128 str_hash(const char *s, size_t len)
{
    em_h128 h = { em_hash64(s, len, 0x57a1), em_hash64(s, len, 0x57a2) };
    return h;
}

static void fold_h(em_h128 *h, em_h128 x)
{
    fold(h, x.a);
    fold(h, x.b);
}

static const em_h128 root_hash = { 0x700d, 0x700e };

static em_h128 mapping_hash(uint64_t start, uint64_t limit, uint64_t offset,
                            em_h128 file, em_h128 build)
{
    em_h128 h = { 0x3a9, 0x3aa };

    fold(&h, start);
    fold(&h, limit);
    fold(&h, offset);
    fold_h(&h, file);
    fold_h(&h, build);
    return h;
}

static em_h128 function_hash(em_h128 name, em_h128 sys, em_h128 file,
                             int64_t start_line)
{
    em_h128 h = { 0xf11, 0xf12 };

    fold_h(&h, name);
    fold_h(&h, sys);
    fold_h(&h, file);
    fold(&h, (uint64_t)start_line);
    return h;
}

/* ---- a block's hashes, made as merges meet its stacks ----------------------- */

/* One open block's content hashes, each made on first need and kept: a
** query that meets a few hundred of a block's stacks hashes those, their
** locations and names, not the whole block (which cost a cold query more
** than its merge). */
struct em_bhash {
    em_h128 *h;                     /* strings, mappings, functions,
                                    ** locations, nodes: at off[kind] */
    uint8_t *done;
    size_t off[5], all;             /* all: the symbols, every kind */
    uint32_t *path;                 /* scratch: a node's unhashed ancestors */
    size_t npath;
};

enum { BH_STR, BH_MAP, BH_FN, BH_LOC, BH_NODE };

void em_bhash_free(em_bhash *b)
{
    if (b == NULL)
        return;
    em_free(b->h);
    em_free(b->done);
    em_free(b->path);
    em_free(b);
}

size_t em_bhash_memory(const em_bhash *b)
{
    if (b == NULL)
        return 0;
    return sizeof *b + (b->all + 1) * (sizeof *b->h + sizeof *b->done) +
           b->npath * sizeof *b->path;
}

static int bhash_make(const em_block_info *in, em_bhash **out)
{
    size_t n[5] = { in->nstrings, in->nmappings, in->nfunctions,
                    in->nlocations, in->nnodes }, all = 0;
    em_bhash *b = em_calloc(1, sizeof *b);

    for (int k = 0; b != NULL && k < 5; k++) {
        b->off[k] = all;
        all += n[k];
    }
    if (b != NULL) {
        b->all = all;
        b->h = em_malloc((all + 1) * sizeof *b->h);
        b->done = em_calloc(all + 1, 1);
    }
    if (b == NULL || b->h == NULL || b->done == NULL) {
        em_bhash_free(b);
        return em_err(EMBER_ENOMEM, "block: hashes of %zu symbols", all);
    }
    *out = b;
    return EMBER_OK;
}

/* The memo of symbol ID of KIND: true when *H already holds its hash. */
static inline bool bh_known(const em_bhash *b, int kind, uint32_t id,
                            em_h128 *h)
{
    size_t i = b->off[kind] + id;

    if (!b->done[i])
        return false;
    *h = b->h[i];
    return true;
}

static inline em_h128 bh_keep(em_bhash *b, int kind, uint32_t id, em_h128 h)
{
    b->h[b->off[kind] + id] = h;
    b->done[b->off[kind] + id] = 1;
    return h;
}

static em_h128 bh_str(em_bhash *b, const em_block_syms *y, uint32_t id)
{
    em_h128 h;

    if (bh_known(b, BH_STR, id, &h))
        return h;
    return bh_keep(b, BH_STR, id, str_hash(y->str_bytes + y->str_off[id],
                                           y->str_off[id + 1] - y->str_off[id] - 1));
}

static em_h128 bh_location(em_bhash *b, const em_block_syms *y, uint32_t id)
{
    const em_blocation *l = &y->locations[id];
    const em_bmapping *m = &y->mappings[l->mapping];
    em_h128 h, x;

    if (bh_known(b, BH_LOC, id, &h))
        return h;
    if (!bh_known(b, BH_MAP, l->mapping, &h))
        h = bh_keep(b, BH_MAP, l->mapping,
                    mapping_hash(m->start, m->limit, m->offset,
                                 bh_str(b, y, m->file), bh_str(b, y, m->build_id)));
    fold(&h, l->address);
    fold(&h, l->n);
    for (uint32_t j = 0; j < l->n; j++) {
        const em_bline *ln = &y->lines[l->first + j];
        const em_bfunction *f = &y->functions[ln->function];
        if (!bh_known(b, BH_FN, ln->function, &x))
            x = bh_keep(b, BH_FN, ln->function,
                        function_hash(bh_str(b, y, f->name), bh_str(b, y, f->system_name),
                                      bh_str(b, y, f->file), f->start_line));
        fold_h(&h, x);
        fold(&h, (uint64_t)ln->line);
    }
    return bh_keep(b, BH_LOC, id, h);
}

/* Node NODE's hash: its parent's folded with its location's (a node with
** no location is the empty stack, the root's hash). Parents come before
** children (the reader checks parent[i] < i), so the walk up ends. */
static int bh_node(em_bhash *b, const em_block_syms *y, uint32_t node,
                   em_h128 *out)
{
    size_t np = 0;
    uint32_t cur = node;
    em_h128 h = root_hash;

    while (!bh_known(b, BH_NODE, cur, &h)) {
        if (np == b->npath) {       /* kept on failure: npath names it */
            uint32_t *path = em_grow(b->path, &b->npath, np + 1, sizeof *path);
            if (path == NULL)
                return em_err(EMBER_ENOMEM, "block: a stack of %zu frames",
                              np + 1);
            b->path = path;
        }
        b->path[np++] = cur;
        if (y->parent[cur] == EM_BLOCK_ROOT) {
            h = root_hash;
            break;
        }
        cur = y->parent[cur];
    }
    while (np-- > 0) {
        uint32_t n = b->path[np];
        if (y->loc[n] != EM_BLOCK_NOLOC)
            fold_h(&h, bh_location(b, y, y->loc[n]));
        bh_keep(b, BH_NODE, n, h);
    }
    *out = h;
    return EMBER_OK;
}

int em_bhash_node(em_bhash **memo, const em_block_syms *y,
                  const em_block_info *in, uint32_t node, em_h128 *out)
{
    int rc = *memo == NULL ? bhash_make(in, memo) : EMBER_OK;

    if (rc == EMBER_OK && node >= in->nnodes)
        rc = EM_CORRUPT("block: stack %u of %u", node, in->nnodes);
    return rc == EMBER_OK ? bh_node(*memo, y, node, out) : rc;
}

/* ---- the head's, per snapshot ------------------------------------------------ */

typedef struct canon_ent {
    em_h128 h;
    uint32_t vid;
    uint32_t src1;                  /* vid's source + 1; 0: a free slot */
} canon_ent;

#define EM_HT_NAME ctab
#define EM_HT_TABLE em_ctab
#define EM_HT_ENTRY canon_ent
#define EM_HT_KEY const em_h128 *
#define EM_HT_IS_FREE(e) ((e)->src1 == 0)
#define EM_HT_HASH(e) ((e)->h.a)
#define EM_HT_MATCH(e, hh, k) ((e)->h.a == (k)->a && (e)->h.b == (k)->b)
#define EM_HT_WHAT "canonical stacks"
#include "engine/htab.h"

struct em_canon {
    em_ctab tab;                    /* stack hash -> canonical id */
    em_h128 *loc;                   /* head location hashes, by id */
    uint8_t *loc_done;
    size_t nloc;
    em_h128 *hs;                    /* scratch: a batch's stack hashes */
    size_t nhs;
};

void em_canon_free(em_canon *c)
{
    if (c == NULL)
        return;
    ctab_free(&c->tab);
    em_free(c->loc);
    em_free(c->loc_done);
    em_free(c->hs);
    em_free(c);
}

static int head_str(em_rtxn *r, uint32_t id, em_h128 *h)
{
    const uint8_t *p;
    size_t len;
    int rc = em_table_get(r->txn, r->db, EM_T_STRING, id, &p, &len);

    if (rc == EMBER_ENOTFOUND)
        rc = EM_CORRUPT("a record names missing string %u", id);
    if (rc == EMBER_OK)
        *h = str_hash((const char *)p, len);
    return rc;
}

static int head_mapping(em_rtxn *r, uint32_t id, em_h128 *h)
{
    const uint8_t *p;
    size_t len;
    uint64_t f[3];
    uint32_t file, build;
    em_h128 fh, bh;
    int rc = em_table_get(r->txn, r->db, EM_T_MAPPING, id, &p, &len);

    if (rc == EMBER_OK)
        rc = em_mapping_decode(p, len, f, &file, &build);
    if (rc == EMBER_OK)
        rc = head_str(r, file, &fh);
    if (rc == EMBER_OK)
        rc = head_str(r, build, &bh);
    if (rc == EMBER_OK)
        *h = mapping_hash(f[0], f[1], f[2], fh, bh);
    return em_err_prefix(rc, "mapping %u", id);
}

static int head_function(em_rtxn *r, uint32_t id, em_h128 *h)
{
    const uint8_t *p;
    size_t len;
    uint32_t s[3];
    int64_t start;
    em_h128 sh[3];
    int rc = em_table_get(r->txn, r->db, EM_T_FUNCTION, id, &p, &len);

    if (rc == EMBER_OK)
        rc = em_function_decode(p, len, s, &start);
    for (int i = 0; i < 3 && rc == EMBER_OK; i++)
        rc = head_str(r, s[i], &sh[i]);
    if (rc == EMBER_OK)
        *h = function_hash(sh[0], sh[1], sh[2], start);
    return em_err_prefix(rc, "function %u", id);
}

static int head_location(em_rtxn *r, em_canon *c, uint32_t id, em_h128 *h)
{
    uint32_t fn[EM_MAX_LINES], mapping;
    int64_t line[EM_MAX_LINES];
    uint64_t address;
    const uint8_t *p;
    size_t len, nl;
    em_h128 x = { 0, 0 };
    int rc;

    if (id < c->nloc && c->loc_done[id]) {
        *h = c->loc[id];
        return EMBER_OK;
    }
    rc = em_table_get(r->txn, r->db, EM_T_LOCATION, id, &p, &len);
    if (rc == EMBER_OK)
        rc = em_location_decode(p, len, &mapping, &address, fn, line,
                                EM_MAX_LINES, &nl);
    if (rc == EMBER_OK)
        rc = head_mapping(r, mapping, h);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "location %u", id);
    fold(h, address);
    fold(h, nl);
    for (size_t j = 0; j < nl && rc == EMBER_OK; j++) {
        if ((rc = head_function(r, fn[j], &x)) == EMBER_OK) {
            fold_h(h, x);
            fold(h, (uint64_t)line[j]);
        }
    }
    if (rc == EMBER_OK && id < c->nloc) {
        c->loc[id] = *h;
        c->loc_done[id] = 1;
    }
    return rc;
}

static int head_stack(em_rtxn *r, em_canon *c, uint32_t id, em_h128 *h)
{
    const uint8_t *p, *q;
    uint64_t depth = 0;
    uint32_t *locs;
    size_t len, n;
    int rc = em_table_get(r->txn, r->db, EM_T_STACK, id, &p, &len);

    q = p;
    if (rc == EMBER_OK && (em_varint_get(&q, p + len, &depth) != 0 ||
                           depth > len))
        rc = EM_CORRUPT("stack %u: record of %zu bytes does not decode", id,
                        len);
    if (rc != EMBER_OK)
        return rc;
    if ((locs = em_malloc((size_t)depth * sizeof *locs + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "stack of %llu",
                      (unsigned long long)depth);
    rc = em_stack_decode(p, len, locs, (size_t)depth, &n);
    *h = root_hash;
    for (size_t i = n; i-- > 0 && rc == EMBER_OK;) {
        em_h128 lh;
        if ((rc = head_location(r, c, locs[i], &lh)) == EMBER_OK)
            fold_h(h, lh);
    }
    em_free(locs);
    return em_err_prefix(rc, "stack %u", id);
}

static int canon_make(em_rtxn *r, em_canon **out)
{
    em_canon *c = em_calloc(1, sizeof *c);

    if (c != NULL) {
        c->nloc = r->next[EM_T_LOCATION];
        c->loc = em_malloc((c->nloc + 1) * sizeof *c->loc);
        c->loc_done = em_calloc(c->nloc + 1, 1);
    }
    if (c == NULL || c->loc == NULL || c->loc_done == NULL) {
        em_canon_free(c);
        return em_err(EMBER_ENOMEM, "canonical stacks");
    }
    *out = c;
    return EMBER_OK;
}

/* The content hashes of stacks LOCAL[0..N) of source SRC of R into H: a
** block's under one hold of its memo, not one per stack (a merge over a
** month meets the same few hundred stacks in each of its blocks). */
static int stack_hashes(em_rtxn *r, em_canon *c, uint32_t src,
                        const uint32_t *local, size_t n, em_h128 *h)
{
    int rc = EMBER_OK;

    if (r->src[src].kind != EM_SRC_HEAD)
        return em_src_node_hashes(&r->src[src], local, n, h);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = head_stack(r, c, local[i], &h[i]);
    return rc;
}

int em_canon_stacks(em_rtxn *r, uint32_t src, const uint32_t *local,
                    size_t n, uint32_t *vid, uint32_t *vsrc)
{
    uint32_t base = r->src[src].base[EM_T_STACK];
    em_canon *c;
    int rc = r->canon == NULL ? canon_make(r, &r->canon) : EMBER_OK;

    if (rc != EMBER_OK)
        return rc;
    c = r->canon;
    if (n > c->nhs) {
        em_h128 *hs = em_grow(c->hs, &c->nhs, n, sizeof *hs);
        if (hs == NULL)
            return em_err(EMBER_ENOMEM, "canonical ids of %zu stacks", n);
        c->hs = hs;
    }
    if ((rc = stack_hashes(r, c, src, local, n, c->hs)) != EMBER_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        bool found;
        canon_ent *e = ctab_insert(&c->tab, c->hs[i].a, &c->hs[i], &found);
        if (e == NULL)
            return EMBER_ENOMEM;
        if (!found)
            *e = (canon_ent){ c->hs[i], base + local[i], src + 1 };
        vid[i] = e->vid;
        vsrc[i] = e->src1 - 1;
    }
    return EMBER_OK;
}
