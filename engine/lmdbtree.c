/*
** engine/lmdbtree.c: LMDB's B-trees as Ember checks them, page by page,
** before LMDB's own code walks them (issue 15, point 4). LMDB 0.9 trusts
** its pages: a node flag saying "duplicates" in a table that has none
** makes its cursor code follow a NULL pointer, a child page number past the
** file faults, a damaged branch key sends a seek to the wrong leaf, and a
** page on the free list that a tree still uses is overwritten by the next
** commit. So:
**  - em_tree_leaf_ok: one leaf page's nodes (offsets, sizes, flags), which
**    engine/lmdbval.c checks the first time a txn's reads meet the page, so
**    that a cursor steps only onto checked nodes of it;
**  - em_tree_check, for ember verify: every tree of the snapshot from its
**    root: page numbers within the file, each page reached once and of the
**    kind its depth says, nodes within their pages, keys ascending and
**    within the bounds their parent branches set, overflow runs,
**    duplicate sub-trees and sub-pages; then that no page a tree uses is on
**    the free list.
** Layouts are those of lmdb's mdb.c (0.9), which lmdb.h does not publish;
** P is the size of a pointer. A page: page number (P), pad u16, flags u16,
** lower u16 and upper u16 (or, first page of an overflow run, its number
** of pages u32), then u16 offsets of its nodes. A node: data size u32 as
** two u16 (a branch's: the child's page number, with the flags u16 as its
** high word), flags u16, key size u16, the key, the data (a page number
** for a value on overflow pages).
*/
#include <stdio.h>

#include "engine/store.h"

#define P sizeof(size_t)
#define PG_FLAGS (P + 2)
#define PG_LOWER (P + 4)
#define PG_UPPER (P + 6)
#define PG_PAD P
#define PG_HDR (P + 8)
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_LEAF2 0x20
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02
#define F_DUPDATA 0x04
#define NODE_HDR 8
/* MDB_db, a tree's record: pad u32, flags u16, depth u16, four counts
** (P each), root page (P). */
#define DB_PAD 0
#define DB_FLAGS 4
#define DB_DEPTH 6
#define DB_ROOT (8 + 4 * P)
#define DB_SIZE (8 + 5 * P)
/* The meta page: the free list's MDB_db, then the main database's, after
** the header and magic, version, address, map size; then the last page
** and the txn id. */
#define META_DBS (PG_HDR + 8 + 2 * P)
#define META_TXNID (META_DBS + 2 * DB_SIZE + P)
#define MAX_DEPTH 32                /* LMDB's CURSOR_STACK */
#define PGNO_INVALID ((uint64_t)(size_t)-1)

static unsigned rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rdp(const uint8_t *p)
{
    size_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---- one leaf page ------------------------------------------------------------ */

const char *em_tree_leaf_ok(const uint8_t *pg, size_t size, bool dupsort,
                            bool main)
{
    unsigned lower = rd16(pg + PG_LOWER), upper = rd16(pg + PG_UPPER);

    if (lower < PG_HDR || lower > upper || upper > size ||
        (lower - PG_HDR) % 2 != 0)
        return "a leaf page whose header is damaged";
    for (size_t i = 0; i < (lower - PG_HDR) / 2; i++) {
        size_t off = rd16(pg + PG_HDR + 2 * i);
        const uint8_t *node = pg + off;
        unsigned f;
        size_t need;
        if (off < upper || off > size - NODE_HDR)
            return "a node outside its leaf page";
        f = rd16(node + 4);
        if ((f & ~(unsigned)(F_BIGDATA | F_SUBDATA | F_DUPDATA)) != 0 ||
            ((f & F_DUPDATA) && !dupsort) ||
            ((f & F_SUBDATA) && !(f & F_DUPDATA) && !main))
            return "a node with flags its table cannot have";
        need = NODE_HDR + rd16(node + 6) + ((f & F_BIGDATA) ? P
               : rd16(node) | (size_t)rd16(node + 2) << 16);
        if (need > size - off)
            return "a node running past its leaf page";
    }
    return NULL;
}

/* ---- whole trees, for verify ----------------------------------------------------- */

typedef struct walk {
    const uint8_t *base;            /* the map */
    size_t psize;
    uint64_t last;                  /* the snapshot's last page */
    uint64_t *used, *freed;         /* bitsets: pages of trees, free list */
    ember_problem_fn fn;
    void *ctx;
    uint64_t problems;
    const char *name;               /* the tree's, for messages */
    unsigned flags;                 /* its LMDB flags */
    bool dups, main, freelist;      /* a tree of duplicates, of names, the
                                    ** free list */
    unsigned ksize;                 /* LEAF2 key size (duplicates) */
} walk;

static void bad(walk *w, const char *fmt, ...) EM_PRINTF(2, 3);

static void bad(walk *w, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    int n = snprintf(msg, sizeof msg, "%s: LMDB's tree: ", w->name);

    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    w->problems++;
    if (w->fn != NULL)
        w->fn(w->ctx, msg);
}

static bool bit_test_set(uint64_t *set, uint64_t i)
{
    bool had = set[i / 64] >> (i % 64) & 1;
    set[i / 64] |= 1ull << (i % 64);
    return had;
}

/* Pages PGNO to PGNO + N - 1 as a tree's part: false (reported) when
** they lie outside the snapshot's pages or one was reached before. */
static bool pages_mark(walk *w, uint64_t pgno, uint64_t n)
{
    if (n > 0 && (pgno < 2 || pgno > w->last || n > w->last - pgno + 1)) {
        bad(w, "page %llu (%llu pages) outside the file's pages 2 to %llu",
            (unsigned long long)pgno, (unsigned long long)n,
            (unsigned long long)w->last);
        return false;
    }
    for (uint64_t i = 0; i < n; i++)
        if (bit_test_set(w->used, pgno + i)) {
            bad(w, "page %llu reached twice", (unsigned long long)(pgno + i));
            return false;
        }
    return true;
}

/* Page PGNO as a tree's part, NULL (reported) when it cannot be: outside
** the file, reached before, or with another page's number. */
static const uint8_t *page_take(walk *w, uint64_t pgno)
{
    if (!pages_mark(w, pgno, 1))
        return NULL;
    if (rdp(w->base + pgno * w->psize) != pgno) {
        bad(w, "page %llu says it is page %llu", (unsigned long long)pgno,
            (unsigned long long)rdp(w->base + pgno * w->psize));
        return NULL;
    }
    return w->base + pgno * w->psize;
}

/* The order of W's keys: native unsigned integers, else bytes. */
static int key_cmp(const walk *w, const MDB_val *a, const MDB_val *b)
{
    bool ints = w->dups ? (w->flags & MDB_INTEGERDUP)
                        : (w->flags & MDB_INTEGERKEY);
    size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size;
    int c;

    if (ints && a->mv_size == b->mv_size && a->mv_size == sizeof(uint32_t)) {
        uint32_t x, y;
        memcpy(&x, a->mv_data, sizeof x);
        memcpy(&y, b->mv_data, sizeof y);
        return (x > y) - (x < y);
    }
    if (ints && a->mv_size == b->mv_size && a->mv_size == sizeof(size_t)) {
        size_t x, y;
        memcpy(&x, a->mv_data, sizeof x);
        memcpy(&y, b->mv_data, sizeof y);
        return (x > y) - (x < y);
    }
    c = n > 0 ? memcmp(a->mv_data, b->mv_data, n) : 0;
    return c != 0 ? c : (a->mv_size > b->mv_size) - (a->mv_size < b->mv_size);
}

/* Key K of page PGNO must follow PREV and lie in [LO, HI) (NULL: open). */
static bool key_in_order(walk *w, uint64_t pgno, const MDB_val *k,
                         const MDB_val *prev, const MDB_val *lo,
                         const MDB_val *hi)
{
    if ((prev != NULL && key_cmp(w, prev, k) >= 0) ||
        (lo != NULL && key_cmp(w, k, lo) < 0) ||
        (hi != NULL && key_cmp(w, k, hi) >= 0)) {
        bad(w, "page %llu: a key out of order (a seek would miss it)",
            (unsigned long long)pgno);
        return false;
    }
    return true;
}

/* The keys of a LEAF2 page PG of SIZE bytes (duplicates of KS bytes each,
** packed after the header), in order and in [LO, HI). */
static void leaf2_keys(walk *w, uint64_t pgno, const uint8_t *pg,
                       size_t size, size_t ks, const MDB_val *lo,
                       const MDB_val *hi)
{
    unsigned lower = rd16(pg + PG_LOWER);
    size_t n = lower >= PG_HDR ? (lower - PG_HDR) / 2 : 0;
    MDB_val prev, k;

    if (ks == 0 || lower < PG_HDR || size < PG_HDR ||
        n > (size - PG_HDR) / ks) {
        bad(w, "page %llu: a page of duplicates (%zu of %zu bytes) does not "
            "fit its %zu bytes", (unsigned long long)pgno, n, ks, size);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        k = (MDB_val){ ks, (void *)(pg + PG_HDR + i * ks) };
        if (!key_in_order(w, pgno, &k, i > 0 ? &prev : NULL, lo, hi))
            return;
        prev = k;
    }
}

static void tree_page(walk *w, uint64_t pgno, unsigned depth,
                      unsigned leaf_depth, const MDB_val *lo,
                      const MDB_val *hi);

/* The free list's value D: a count, then that many free page numbers. */
static void free_pages(walk *w, const uint8_t *d, size_t size)
{
    uint64_t n = size >= P ? rdp(d) : 0;

    if (size < P || n > size / P - 1) {
        bad(w, "a free list entry of %zu bytes counts %llu pages", size,
            (unsigned long long)n);
        return;
    }
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t pg = rdp(d + i * P);
        if (pg < 2 || pg > w->last)
            bad(w, "free page %llu outside the file",
                (unsigned long long)pg);
        else
            bit_test_set(w->freed, pg);
    }
}

/* The value of leaf node NODE (flags F, data size DS) stored on overflow
** pages: the run must be in the file and hold DS bytes. */
static const uint8_t *overflow_run(walk *w, const uint8_t *node, size_t ks,
                                   size_t ds)
{
    uint64_t pgno = rdp(node + NODE_HDR + ks);
    uint64_t n = (ds + PG_HDR + w->psize - 1) / w->psize;
    const uint8_t *pg = page_take(w, pgno);
    uint32_t pages;

    if (pg == NULL)
        return NULL;
    memcpy(&pages, pg + PG_LOWER, sizeof pages);
    if (!(rd16(pg + PG_FLAGS) & P_OVERFLOW) || pages < n) {
        bad(w, "page %llu: not an overflow run of %llu pages for a value "
            "of %zu bytes", (unsigned long long)pgno, (unsigned long long)n,
            ds);
        return NULL;
    }
    return pages_mark(w, pgno + 1, pages - 1) ? pg + PG_HDR : NULL;
}

/* The duplicates of one key of page PGNO, held in its node's data D (DS
** bytes): a sub-page of them (LEAF2: Ember's indexes are DUPFIXED), or
** the record of a sub-tree (F_SUBDATA). */
static void dup_values(walk *w, uint64_t pgno, const uint8_t *d, size_t ds,
                       bool subtree)
{
    walk sub = *w;
    char name[64];

    snprintf(name, sizeof name, "%s duplicates", w->name);
    sub.name = name;
    sub.dups = true;
    sub.problems = 0;
    if (subtree && ds == DB_SIZE) {
        sub.ksize = (unsigned)rdp(d + DB_PAD) & 0xffffffffu;
        if (rdp(d + DB_ROOT) != PGNO_INVALID)
            tree_page(&sub, rdp(d + DB_ROOT), 1, rd16(d + DB_DEPTH), NULL,
                      NULL);
    } else if (subtree) {
        bad(w, "page %llu: a record of duplicates of %zu bytes",
            (unsigned long long)pgno, ds);
    } else if (ds < PG_HDR || !(rd16(d + PG_FLAGS) & P_LEAF2)) {
        bad(w, "page %llu: a damaged page of duplicates",
            (unsigned long long)pgno);
    } else {
        leaf2_keys(&sub, pgno, d, ds, rd16(d + PG_PAD), NULL, NULL);
    }
    w->problems += sub.problems;
}

/* Checks the data of leaf node NODE of page PGNO. */
static void leaf_data(walk *w, uint64_t pgno, const uint8_t *node)
{
    unsigned f = rd16(node + 4);
    size_t ks = rd16(node + 6), ds = rd16(node) | (size_t)rd16(node + 2) << 16;
    const uint8_t *d = node + NODE_HDR + ks;

    if (f & F_BIGDATA)
        d = overflow_run(w, node, ks, ds);
    if (d == NULL)
        return;
    if (f & F_DUPDATA)
        dup_values(w, pgno, d, ds, (f & F_SUBDATA) != 0);
    else if (w->freelist)
        free_pages(w, d, ds);
    else if ((f & F_SUBDATA) && ds != DB_SIZE)
        bad(w, "a table's record of %zu bytes", ds);
}

/* Node I of page PG: its key (a branch's first has none). */
static MDB_val node_key(const uint8_t *pg, size_t i)
{
    const uint8_t *node = pg + rd16(pg + PG_HDR + 2 * i);
    return (MDB_val){ rd16(node + 6), (void *)(node + NODE_HDR) };
}

/* A branch page: nodes within it, keys in order, each child walked with
** the bounds its neighbours' keys set. */
static void branch_page(walk *w, uint64_t pgno, const uint8_t *pg, size_t n,
                        unsigned depth, unsigned leaf_depth,
                        const MDB_val *lo, const MDB_val *hi)
{
    unsigned upper = rd16(pg + PG_UPPER);
    MDB_val k[2];

    for (size_t i = 0; i < n; i++) {
        size_t off = rd16(pg + PG_HDR + 2 * i);
        if (off < upper || off > w->psize - NODE_HDR ||
            NODE_HDR + rd16(pg + off + 6) > w->psize - off) {
            bad(w, "page %llu: a node outside its branch page",
                (unsigned long long)pgno);
            return;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *node = pg + rd16(pg + PG_HDR + 2 * i);
        uint64_t child = rd16(node) | (uint64_t)rd16(node + 2) << 16 |
                         (P > 4 ? (uint64_t)rd16(node + 4) << 32 : 0);
        const MDB_val *clo = i > 0 ? &k[i % 2] : lo;
        if (i > 0) {
            k[i % 2] = node_key(pg, i);
            if (!key_in_order(w, pgno, &k[i % 2], i > 1 ? &k[(i + 1) % 2]
                              : NULL, lo, hi))
                return;
        }
        if (i + 1 < n) {
            MDB_val next = node_key(pg, i + 1);
            tree_page(w, child, depth + 1, leaf_depth, clo, &next);
        } else {
            tree_page(w, child, depth + 1, leaf_depth, clo, hi);
        }
    }
}

/* A leaf page: its nodes, keys in order and in bounds, their data. */
static void leaf_page(walk *w, uint64_t pgno, const uint8_t *pg, size_t n,
                      const MDB_val *lo, const MDB_val *hi)
{
    const char *why = em_tree_leaf_ok(pg, w->psize,
                                      (w->flags & MDB_DUPSORT) != 0, w->main);
    MDB_val k[2];

    if (why != NULL) {
        bad(w, "page %llu: %s", (unsigned long long)pgno, why);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        k[i % 2] = node_key(pg, i);
        if (!key_in_order(w, pgno, &k[i % 2], i > 0 ? &k[(i + 1) % 2] : NULL,
                          lo, hi))
            return;
        leaf_data(w, pgno, pg + rd16(pg + PG_HDR + 2 * i));
    }
}

static void tree_page(walk *w, uint64_t pgno, unsigned depth,
                      unsigned leaf_depth, const MDB_val *lo,
                      const MDB_val *hi)
{
    const uint8_t *pg = page_take(w, pgno);
    unsigned flags, lower;
    size_t n;

    if (pg == NULL)
        return;
    flags = rd16(pg + PG_FLAGS);
    lower = rd16(pg + PG_LOWER);
    n = lower >= PG_HDR ? (lower - PG_HDR) / 2 : 0;
    if (leaf_depth > MAX_DEPTH || lower < PG_HDR ||
        lower > rd16(pg + PG_UPPER) || rd16(pg + PG_UPPER) > w->psize) {
        bad(w, "page %llu: a damaged header", (unsigned long long)pgno);
    } else if (depth < leaf_depth && (flags & P_BRANCH) && n > 0) {
        branch_page(w, pgno, pg, n, depth, leaf_depth, lo, hi);
    } else if (depth == leaf_depth && w->dups && (flags & P_LEAF2)) {
        leaf2_keys(w, pgno, pg, w->psize, w->ksize, lo, hi);
    } else if (depth == leaf_depth && (flags & P_LEAF) &&
               !(flags & P_LEAF2)) {
        leaf_page(w, pgno, pg, n, lo, hi);
    } else {
        bad(w, "page %llu: flags %#x where a %s page belongs (depth %u of "
            "%u)", (unsigned long long)pgno, flags,
            depth < leaf_depth ? "branch" : "leaf", depth, leaf_depth);
    }
}

/* ---- the trees of a snapshot ------------------------------------------------------ */

/* Walks the tree whose record (MDB_db) is at REC, named NAME. */
static void tree_walk(walk *w, const char *name, const uint8_t *rec,
                      bool main, bool freelist)
{
    uint64_t root = rdp(rec + DB_ROOT);

    w->name = name;
    w->flags = rd16(rec + DB_FLAGS);
    w->main = main;
    w->freelist = freelist;
    w->dups = false;
    if (root != PGNO_INVALID)
        tree_page(w, root, 1, rd16(rec + DB_DEPTH), NULL, NULL);
}

/* The meta page of the snapshot of TXN, or NULL when it was overwritten
** since (a writer committed twice). */
static const uint8_t *meta_of(const em_map *m, MDB_txn *txn)
{
    for (int i = 0; i < 2; i++) {
        const uint8_t *pg = m->base + (size_t)i * m->psize;
        if (rdp(pg + META_TXNID) == (uint64_t)mdb_txn_id(txn))
            return pg;
    }
    return NULL;
}

/* The record of sub-database NAME in the main database MAIN_REC (walked
** already), read from its one leaf: Ember's 17 names fit one page. */
static const uint8_t *named_record(walk *w, const uint8_t *main_rec,
                                   const char *name)
{
    uint64_t root = rdp(main_rec + DB_ROOT);
    size_t len = strlen(name), n;
    const uint8_t *pg;

    if (root == PGNO_INVALID || rd16(main_rec + DB_DEPTH) != 1)
        return NULL;
    pg = w->base + root * w->psize;
    n = (rd16(pg + PG_LOWER) - PG_HDR) / 2;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *node = pg + rd16(pg + PG_HDR + 2 * i);
        if (rd16(node + 6) == len && memcmp(node + NODE_HDR, name, len) == 0)
            return (rd16(node + 4) & F_SUBDATA) && rd16(node) == DB_SIZE &&
                   rd16(node + 2) == 0 ? node + NODE_HDR + len : NULL;
    }
    return NULL;
}

/* Every page a tree uses must be off the free list. */
static void overlap(walk *w)
{
    w->name = "free list";
    for (uint64_t i = 0; i <= w->last / 64; i++)
        if (w->used[i] & w->freed[i]) {
            uint64_t b = w->used[i] & w->freed[i];
            bad(w, "page %llu is on it and in a tree (the next commit "
                "would overwrite it)",
                (unsigned long long)(i * 64 + (uint64_t)__builtin_ctzll(b)));
            return;
        }
}

int em_tree_check(em_rtxn *r, ember_problem_fn fn, void *ctx,
                  uint64_t *nproblems)
{
    const em_map *m = &r->db->map;
    walk w = { m->base, m->psize, 0, NULL, NULL, fn, ctx, 0, "", 0, false,
               false, false, 0 };
    const uint8_t *meta = m->base != NULL ? meta_of(m, r->txn) : NULL;
    size_t words;
    bool main_ok;

    *nproblems = 0;
    if (meta == NULL)
        return EMBER_OK;    /* the map or the snapshot's meta is not known */
    w.last = rdp(meta + META_TXNID - P);
    if (w.last >= (__atomic_load_n(&m->end, __ATOMIC_ACQUIRE) -
                   (uintptr_t)m->base) / m->psize)
        return EMBER_OK;    /* not past the pages the txn's start counted */
    meta += META_DBS;
    words = (size_t)(w.last / 64 + 1);
    w.used = em_calloc(words, sizeof *w.used);
    w.freed = em_calloc(words, sizeof *w.freed);
    if (w.used == NULL || w.freed == NULL) {
        em_free(w.used);
        em_free(w.freed);
        return em_err(EMBER_ENOMEM, "verify: page maps of %llu pages",
                      (unsigned long long)w.last + 1);
    }
    tree_walk(&w, "free list", meta, false, true);
    tree_walk(&w, "main database", meta + DB_SIZE, true, false);
    main_ok = w.problems == 0;
    /* each table's tree, unless the names that lead to them are damaged */
    for (int d = 0; d < EM_D_COUNT && main_ok; d++) {
        const uint8_t *rec = named_record(&w, meta + DB_SIZE,
                                          em_dbi_names[d]);
        if (rec != NULL)
            tree_walk(&w, em_dbi_names[d], rec, false, false);
    }
    if (w.problems == 0)
        overlap(&w);
    em_free(w.used);
    em_free(w.freed);
    *nproblems = w.problems;
    return EMBER_OK;
}
