/*
** engine/block_finish.c: em_bbuild_finish, the end of a block builder
** (engine/block_write.c interns and takes the chunks; the layout is in
** engine/block_int.h, every byte in docs/file-format.md, "Blocks").
**
** The tables are renumbered for size: strings sorted (string order is
** then id order, and front coding shares prefixes), functions sorted by
** name, locations by address. Node and series ids never change: the
** chunks and the chunk index already name them. Each table field becomes
** one section, varints compressed with zstd when that pays, with a CRC of
** its stored bytes; then the footer (counts and the section directory)
** and the trailer, whose CRC covers header, footer and itself. The file is
** fsynced, renamed into place, and its directory fsynced.
*/
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_createCCtx_advanced, customMem */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "engine/block_int.h"
#include "engine/store.h"

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
    return em_bbuild_strcmp(ctx, *(const uint32_t *)x, *(const uint32_t *)y);
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
        if (b->nodeloc[i] != EM_BLOCK_NOLOC)
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
        rc = em_bbuild_string(b, EM_TYPE_LABEL, strlen(EM_TYPE_LABEL), &id);
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
    em_put_le32(e + 4, em_crc32(0, p, n));
    em_put_le64(e + 8, b->off);
    em_put_le32(e + 16, (uint32_t)n);
    em_put_le32(e + 20, (uint32_t)f->col.len);
    if ((rc = em_buf_put(&f->dir, e, sizeof e)) != EMBER_OK)
        return em_err_prefix(rc, "block builder: section directory");
    return em_bbuild_write(b, p, n);
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
        /* the empty stack's node: one past the last location */
        int64_t l = b->nodeloc[i] == EM_BLOCK_NOLOC ? b->nloc
                                                    : f->lmap[b->nodeloc[i]];
        put_zz(f, l - (p == EM_BLOCK_ROOT ? 0 : f->lmap[b->nodeloc[p]]));
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
    int rc;

    if (p == NULL)
        return em_err(EMBER_ENOMEM, "block builder: footer of %zu bytes", n);
    footer_fill(b, f, in, chunks_end, p);
    memcpy(p + BLK_FOOTER_FIXED, f->dir.p, f->dir.len);
    em_put_le32(p + n, (uint32_t)n);
    memcpy(p + n + 4, (const uint8_t[4]){ EM_BLOCK_VERSION, 0, 0, 0 }, 4);
    *crc = em_crc32(em_crc32(0, header, sizeof header), p, n + 8);
    em_put_le32(p + n + 8, *crc);
    em_put_le32(p + n + 12, BLK_MAGIC);
    rc = em_bbuild_write(b, p, n + BLK_TRAILER);
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
    int rc = em_bbuild_check(b);

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
