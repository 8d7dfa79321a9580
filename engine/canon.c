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
** merge result of a snapshot with several sources goes through the map,
** so ids are canonical for the snapshot's whole life. Blocks' node hashes
** are computed once per open block (one pass over its tables); the head's
** per snapshot, location by location, as merges meet them.
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

/* ---- a block's hashes, made once per open block ------------------------------ */

int em_block_hashes_make(const em_block_syms *y, const em_block_info *in,
                         em_h128 **out)
{
    size_t nn = in->nnodes, nl = in->nlocations, nf = in->nfunctions;
    size_t nm = in->nmappings, ns = in->nstrings;
    em_h128 *sh = em_malloc((ns + nm + nf + nl + 1) * sizeof *sh);
    em_h128 *mh = sh + ns, *fh = mh + nm, *lh = fh + nf;
    em_h128 *node = em_malloc((nn + 1) * sizeof *node);

    *out = NULL;
    if (sh == NULL || node == NULL) {
        em_free(sh);
        em_free(node);
        return em_err(EMBER_ENOMEM, "block: hashes of %zu stacks", nn);
    }
    for (size_t i = 0; i < ns; i++)
        sh[i] = str_hash(y->str_bytes + y->str_off[i],
                         y->str_off[i + 1] - y->str_off[i] - 1);
    for (size_t i = 0; i < nm; i++)
        mh[i] = mapping_hash(y->mappings[i].start, y->mappings[i].limit,
                             y->mappings[i].offset, sh[y->mappings[i].file],
                             sh[y->mappings[i].build_id]);
    for (size_t i = 0; i < nf; i++)
        fh[i] = function_hash(sh[y->functions[i].name],
                              sh[y->functions[i].system_name],
                              sh[y->functions[i].file],
                              y->functions[i].start_line);
    for (size_t i = 0; i < nl; i++) {
        const em_blocation *l = &y->locations[i];
        lh[i] = mh[l->mapping];
        fold(&lh[i], l->address);
        fold(&lh[i], l->n);
        for (uint32_t j = 0; j < l->n; j++) {
            fold_h(&lh[i], fh[y->lines[l->first + j].function]);
            fold(&lh[i], (uint64_t)y->lines[l->first + j].line);
        }
    }
    for (size_t i = 0; i < nn; i++) {
        node[i] = y->parent[i] == EM_BLOCK_ROOT ? root_hash
                                                : node[y->parent[i]];
        if (y->loc[i] != EM_BLOCK_NOLOC)    /* the empty stack: the root */
            fold_h(&node[i], lh[y->loc[i]]);
    }
    em_free(sh);
    *out = node;
    return EMBER_OK;
}

/* ---- the head's, per snapshot ------------------------------------------------ */

typedef struct canon_ent {
    em_h128 h;
    uint32_t vid;
    uint32_t used;
} canon_ent;

#define EM_HT_NAME ctab
#define EM_HT_TABLE em_ctab
#define EM_HT_ENTRY canon_ent
#define EM_HT_KEY const em_h128 *
#define EM_HT_IS_FREE(e) ((e)->used == 0)
#define EM_HT_HASH(e) ((e)->h.a)
#define EM_HT_MATCH(e, hh, k) ((e)->h.a == (k)->a && (e)->h.b == (k)->b)
#define EM_HT_WHAT "canonical stacks"
#include "engine/htab.h"

struct em_canon {
    em_ctab tab;                    /* stack hash -> canonical id */
    em_h128 *loc;                   /* head location hashes, by id */
    uint8_t *loc_done;
    size_t nloc;
};

void em_canon_free(em_canon *c)
{
    if (c == NULL)
        return;
    ctab_free(&c->tab);
    em_free(c->loc);
    em_free(c->loc_done);
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

/* The content hash of virtual stack VID of R. */
static int stack_hash(em_rtxn *r, em_canon *c, uint32_t vid, em_h128 *h)
{
    const em_h128 *nodes;
    uint32_t src, local;
    int rc = em_src_find(r, EM_T_STACK, vid, &src, &local);

    if (rc != EMBER_OK)
        return rc;
    if (r->src[src].kind == EM_SRC_HEAD)
        return head_stack(r, c, local, h);
    if ((rc = em_src_node_hashes(&r->src[src], &nodes)) == EMBER_OK)
        *h = nodes[local];
    return rc;
}

typedef struct idval {
    uint32_t id;
    int64_t v;
} idval;

static int idval_cmp(const void *a, const void *b)
{
    uint32_t x = ((const idval *)a)->id, y = ((const idval *)b)->id;
    return (x > y) - (x < y);
}

int em_canon_merged(em_rtxn *r, uint32_t *ids, int64_t *vals, size_t *n)
{
    idval *t = em_malloc(*n * sizeof *t + 1);
    size_t k = 0;
    int rc = t == NULL ? em_err(EMBER_ENOMEM, "merge: %zu stacks", *n)
                       : EMBER_OK;

    if (rc == EMBER_OK && r->canon == NULL)
        rc = canon_make(r, &r->canon);
    for (size_t i = 0; i < *n && rc == EMBER_OK; i++) {
        em_h128 h;
        canon_ent *e;
        bool found;
        if ((rc = stack_hash(r, r->canon, ids[i], &h)) != EMBER_OK)
            break;
        if ((e = ctab_insert(&r->canon->tab, h.a, &h, &found)) == NULL) {
            rc = EMBER_ENOMEM;
            break;
        }
        if (!found)
            *e = (canon_ent){ h, ids[i], 1 };
        t[i] = (idval){ e->vid, vals[i] };
    }
    if (rc == EMBER_OK && *n > 0) {
        qsort(t, *n, sizeof *t, idval_cmp);
        for (size_t i = 0; i < *n; i++) {   /* sums of one sign's values
                                            ** fit: no subset overflows */
            if (k > 0 && ids[k - 1] == t[i].id) {
                vals[k - 1] = em_add_wrap(vals[k - 1], t[i].v);
                continue;
            }
            ids[k] = t[i].id;
            vals[k++] = t[i].v;
        }
        *n = k;
    }
    em_free(t);
    return rc;
}
