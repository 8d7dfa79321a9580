/*
** engine/meta.c: metadata questions (label names, label values, profile
** types, a series' labels) answered from the postings, and snapshots: symbol
** lookups on one read txn, decoding records into an arena that lives as long
** as the snapshot so returned pointers stay valid until it ends.
*/
#include <stdlib.h>

#include "engine/block.h"
#include "engine/store.h"

/* ---- string lists ------------------------------------------------------------- */

struct ember_strlist {
    char **v;
    size_t n, cap;
};

ember_strlist *em_strlist_new(void)
{
    return em_calloc(1, sizeof(ember_strlist));
}

int em_strlist_add(ember_strlist *l, const char *s, size_t len)
{
    char **v = em_grow(l->v, &l->cap, l->n + 1, sizeof *v);

    if (v == NULL)
        return em_err(EMBER_ENOMEM, "string list of %zu", l->n + 1);
    l->v = v;
    l->v[l->n] = em_strndup(s, len);
    if (l->v[l->n] == NULL)
        return em_err(EMBER_ENOMEM, "string list entry");
    l->n++;
    return EMBER_OK;
}

EMBER_API size_t ember_strlist_count(const ember_strlist *l)
{
    return l != NULL ? l->n : 0;
}

EMBER_API const char *ember_strlist_get(const ember_strlist *l, size_t i)
{
    return l != NULL && i < l->n ? l->v[i] : NULL;
}

EMBER_API void ember_strlist_free(ember_strlist *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        em_free(l->v[i]);
    em_free(l->v);
    em_free(l);
}

int em_split_labels_read(em_rtxn *r, ember_strlist **out)
{
    const size_t plen = sizeof EM_SPLIT_LABEL_PREFIX - 1;
    MDB_val k = { plen, (void *)EM_SPLIT_LABEL_PREFIX }, d;
    MDB_cursor *cur = NULL;
    int rc = EMBER_OK, mrc;

    *out = em_calloc(1, sizeof **out);
    if (*out == NULL)
        return em_err(EMBER_ENOMEM, "string list");
    mrc = mdb_cursor_open(r->txn, r->db->dbi[EM_D_META], &cur);
    if (mrc == MDB_SUCCESS)
        mrc = em_val_cursor(r->db, EM_D_META, cur, &k, &d, MDB_SET_RANGE,
                            &rc);
    /* keys sort bytewise: the prefix's keys are one run */
    while (mrc == MDB_SUCCESS && rc == EMBER_OK && k.mv_size > plen &&
           memcmp(k.mv_data, EM_SPLIT_LABEL_PREFIX, plen) == 0) {
        rc = em_strlist_add(*out, (const char *)k.mv_data + plen,
                         k.mv_size - plen);
        mrc = em_val_cursor(r->db, EM_D_META, cur, &k, &d, MDB_NEXT, &rc);
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "meta: split labels");
    if (rc != EMBER_OK) {
        ember_strlist_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- label names and values ---------------------------------------------------- */

/* A metadata question: the snapshot, and per source the series in scope
** (SCOPES NULL: all). */
typedef struct meta_q {
    em_rtxn r;
    roaring_bitmap_t **scopes;      /* [r.nsrc] */
    roaring_bitmap_t *scope;        /* the head's */
    ember_strlist *out;
} meta_q;

static int meta_begin(ember_db *db, const ember_selector *sel, meta_q *m)
{
    int rc;

    memset(m, 0, sizeof *m);
    em_err_clear();
    if (db == NULL)
        return em_err(EMBER_EINVAL, "NULL database");
    rc = em_selector_check(sel);
    if (rc != EMBER_OK)
        return rc;
    m->out = em_calloc(1, sizeof *m->out);
    if (m->out == NULL)
        return em_err(EMBER_ENOMEM, "string list");
    rc = em_rtxn_begin(db, &m->r);
    if (rc == EMBER_OK && sel != NULL &&
        (m->scopes = em_calloc(m->r.nsrc, sizeof *m->scopes)) == NULL)
        rc = em_err(EMBER_ENOMEM, "label scope");
    for (uint32_t i = 0; rc == EMBER_OK && sel != NULL && i < m->r.nsrc; i++)
        rc = em_src_select(&m->r, i, sel, &m->scopes[i]);
    if (rc == EMBER_OK && sel != NULL)
        m->scope = m->scopes[0];
    return rc;
}

static int meta_end(meta_q *m, int rc, ember_strlist **out)
{
    for (uint32_t i = 0; m->scopes != NULL && i < m->r.nsrc; i++)
        if (m->scopes[i] != NULL)
            roaring_bitmap_free(m->scopes[i]);
    em_free(m->scopes);
    em_rtxn_end(&m->r);
    if (rc != EMBER_OK) {
        ember_strlist_free(m->out);
        m->out = NULL;
    }
    *out = m->out;
    return rc;
}

/* True when the posting bitmap BM (stored bytes) meets the scope. */
static int in_scope(const meta_q *m, const MDB_val *bm, bool *yes)
{
    roaring_bitmap_t *b;

    *yes = true;
    if (m->scope == NULL)
        return EMBER_OK;
    b = em_bitmap_decode(bm->mv_data, bm->mv_size);
    if (b == NULL)
        return EM_CORRUPT("postings bitmap of %zu bytes does not decode",
                          bm->mv_size);
    *yes = roaring_bitmap_intersect(b, m->scope);
    roaring_bitmap_free(b);
    return EMBER_OK;
}

/* Walks the postings from key START (NAME\0 prefix when NAME is set). */
static int postings_walk(meta_q *m, const char *name, bool names_only)
{
    MDB_cursor *cur;
    MDB_val k = { 0, (void *)"" }, d;
    size_t nlen = name ? strlen(name) + 1 : 0;
    char last[256] = "";
    int rc = EMBER_OK;
    int mrc = mdb_cursor_open(m->r.txn, m->r.db->dbi[EM_D_POST], &cur);

    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "postings cursor");
    k.mv_size = nlen;
    k.mv_data = (void *)(name ? name : "");
    mrc = em_val_cursor(m->r.db, EM_D_POST, cur, &k, &d,
                        nlen ? MDB_SET_RANGE : MDB_FIRST, &rc);
    for (; mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(m->r.db, EM_D_POST, cur, &k, &d, MDB_NEXT,
                             &rc)) {
        const char *key = k.mv_data;
        size_t klen = strnlen(key, k.mv_size);
        bool yes;
        if (klen == k.mv_size || klen >= sizeof last) {
            rc = EM_CORRUPT("postings key without a name");
            break;
        }
        if (nlen && (klen + 1 != nlen || memcmp(key, name, klen)))
            break;
        if (names_only && (strcmp(last, key) == 0 ||
                           strcmp(key, EM_TYPE_LABEL) == 0))
            continue;
        rc = in_scope(m, &d, &yes);
        if (rc != EMBER_OK || !yes)
            continue;
        if (names_only) {
            memcpy(last, key, klen + 1);
            rc = em_strlist_add(m->out, key, klen);
        } else {
            rc = em_strlist_add(m->out, key + klen + 1, k.mv_size - klen - 1);
        }
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "postings walk");
    return rc;
}

/* A set of string pointers: the strings of one block a listing has met. */
typedef EM_HTAB_TYPE(const char *) ptrset;

#define EM_HT_NAME ptrset
#define EM_HT_TABLE ptrset
#define EM_HT_ENTRY const char *
#define EM_HT_KEY const char *
#define EM_HT_IS_FREE(e) (*(e) == NULL)
#define EM_HT_HASH(e) em_mix64((uintptr_t)*(e))
#define EM_HT_MATCH(e, h, k) (*(e) == (k))
#define EM_HT_WHAT "label list"
#include "engine/htab.h"

/* Adds S to M's list unless SEEN holds it already. */
static int label_add(meta_q *m, ptrset *seen, const char *s)
{
    bool found;
    const char **e = ptrset_insert(seen, em_mix64((uintptr_t)s), s, &found);

    if (e == NULL)
        return EMBER_ENOMEM;        /* the message is set */
    if (found)
        return EMBER_OK;
    *e = s;
    return em_strlist_add(m->out, s, strlen(s));
}

/* Adds to M's list the label names (NAME NULL) or the values of label
** NAME of the series in scope of block source SRC. A block names each
** string once, so one string is one pointer into its table: the series'
** repeats (every series carries the same few names) go by pointer before
** any is copied, not by copying and sorting them all. */
static int block_labels(meta_q *m, uint32_t src, const char *name)
{
    roaring_bitmap_t *scope = m->scopes != NULL ? m->scopes[src] : NULL;
    uint32_t ns = m->r.src[src].n[EM_T_SERIES];
    bool type = name != NULL && strcmp(name, EM_TYPE_LABEL) == 0;
    ptrset seen = { 0 };
    int rc = EMBER_OK;

    for (uint32_t id = 0; id < ns && rc == EMBER_OK; id++) {
        ember_label l[EM_MAX_LABELS];
        const char *t;
        size_t nl;
        if (scope != NULL && !roaring_bitmap_contains(scope, id))
            continue;
        if ((rc = em_src_series(&m->r, src, id, &t, l, &nl)) != EMBER_OK)
            break;
        if (type)
            rc = label_add(m, &seen, t);
        for (size_t i = 0; i < nl && rc == EMBER_OK && !type; i++)
            if (name == NULL || strcmp(l[i].name, name) == 0)
                rc = label_add(m, &seen, name == NULL ? l[i].name
                                                      : l[i].value);
    }
    ptrset_free(&seen);
    return rc;
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts L and drops repeats: the sources' lists, one list. */
static void strlist_unique(ember_strlist *l)
{
    size_t w = 0;

    qsort(l->v, l->n, sizeof *l->v, strp_cmp);
    for (size_t i = 0; i < l->n; i++) {
        if (w > 0 && strcmp(l->v[w - 1], l->v[i]) == 0)
            em_free(l->v[i]);
        else
            l->v[w++] = l->v[i];
    }
    l->n = w;
}

/* The label names (NAME NULL) or values of NAME over every source. */
static int labels_all(meta_q *m, const char *name)
{
    int rc = postings_walk(m, name, name == NULL);

    for (uint32_t i = 1; i < m->r.nsrc && rc == EMBER_OK; i++)
        rc = block_labels(m, i, name);
    if (rc == EMBER_OK && m->r.nsrc > 1)
        strlist_unique(m->out);
    return rc;
}

EMBER_API int ember_label_names(ember_db *db, const ember_selector *sel,
                                ember_strlist **out)
{
    meta_q m;
    int rc;

    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_label_names: NULL result");
    rc = meta_begin(db, sel, &m);
    if (rc == EMBER_OK)
        rc = labels_all(&m, NULL);
    return meta_end(&m, rc, out);
}

EMBER_API int ember_label_values(ember_db *db, const char *name,
                                 const ember_selector *sel,
                                 ember_strlist **out)
{
    meta_q m;
    int rc;

    if (out == NULL || name == NULL)
        return em_err(EMBER_EINVAL, "ember_label_values: NULL argument");
    rc = meta_begin(db, sel, &m);
    if (rc == EMBER_OK && strcmp(name, EM_TYPE_LABEL) != 0)
        rc = em_label_name_check(name);
    if (rc == EMBER_OK)
        rc = labels_all(&m, name);
    return meta_end(&m, rc, out);
}

EMBER_API int ember_profile_types(ember_db *db, const ember_selector *sel,
                                  ember_strlist **out)
{
    return ember_label_values(db, EM_TYPE_LABEL, sel, out);
}

EMBER_API int ember_series_labels(ember_db *db, uint32_t id,
                                  ember_strlist **out)
{
    ember_label l[EM_MAX_LABELS];
    const char *type;
    uint32_t src, local;
    size_t n = 0;
    meta_q m;
    int rc;

    if (out == NULL)
        return em_err(EMBER_EINVAL, "ember_series_labels: NULL result");
    rc = meta_begin(db, NULL, &m);
    if (rc == EMBER_OK)
        rc = em_src_find(&m.r, EM_T_SERIES, id, &src, &local);
    if (rc == EMBER_OK)
        rc = em_src_series(&m.r, src, local, &type, l, &n);
    if (rc == EMBER_OK)
        rc = em_strlist_add(m.out, type, strlen(type));
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        rc = em_strlist_add(m.out, l[i].name, strlen(l[i].name));
        if (rc == EMBER_OK)
            rc = em_strlist_add(m.out, l[i].value, strlen(l[i].value));
    }
    return meta_end(&m, rc, out);
}

/* ---- snapshots --------------------------------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

struct ember_snapshot {
    unsigned refs;                  /* its owner's, and merges' made on it */
    em_rtxn r;
    arena_block *blocks;
    MDB_cursor *cur[EM_T_COUNT];    /* one per table, opened on first use */
    int64_t at[EM_T_COUNT];         /* the id each is on; -1: none */
};

/* Bump allocation that lives until the snapshot ends. */
static void *arena_alloc(ember_snapshot *s, size_t n)
{
    arena_block *b = s->blocks;
    size_t need = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);

    if (b == NULL || b->cap - b->used < need) {
        size_t cap = need > 65536 ? need : 65536;
        b = em_malloc(sizeof *b + cap);
        if (b == NULL)
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = s->blocks;
        s->blocks = b;
    }
    b->used += need;
    return (char *)b->data + b->used - need;
}

EMBER_API int ember_snapshot_begin(ember_db *db, ember_snapshot **out)
{
    ember_snapshot *s;
    int rc;

    em_err_clear();
    if (db == NULL || out == NULL)
        return em_err(EMBER_EINVAL, "ember_snapshot_begin: NULL argument");
    *out = NULL;
    s = em_calloc(1, sizeof *s);
    if (s == NULL)
        return em_err(EMBER_ENOMEM, "snapshot");
    for (int t = 0; t < EM_T_COUNT; t++)
        s->at[t] = -1;
    s->refs = 1;
    rc = em_rtxn_begin(db, &s->r);
    if (rc != EMBER_OK) {
        em_free(s);
        return rc;
    }
    *out = s;
    return EMBER_OK;
}

static void *arena_fn(void *ctx, size_t n)
{
    return arena_alloc(ctx, n);
}

/* The block source of virtual id VID of TABLE, with its local id in
** *LOCAL; NULL for the head's ids (whose local ids are the virtual ones),
** or when the id is past every source (*RC says). */
static em_src *snap_block(ember_snapshot *s, int table, uint32_t vid,
                          uint32_t *local, int *rc)
{
    uint32_t src;

    *rc = EMBER_OK;
    if (s == NULL || s->r.nsrc <= 1 || vid < s->r.src[0].n[table])
        return NULL;
    if ((*rc = em_src_find(&s->r, table, vid, &src, local)) != EMBER_OK)
        return NULL;
    return src == 0 ? NULL : &s->r.src[src];
}

em_rtxn *em_snapshot_rtxn(ember_snapshot *s)
{
    return &s->r;
}

void em_snapshot_bounds(ember_snapshot *s, uint32_t *locations,
                        uint32_t *functions, uint32_t *mappings)
{
    *locations = s->r.vnext[EM_T_LOCATION];
    *functions = s->r.vnext[EM_T_FUNCTION];
    *mappings = s->r.vnext[EM_T_MAPPING];
}

ember_snapshot *em_snapshot_ref(ember_snapshot *s)
{
    if (s != NULL)
        __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    return s;
}

EMBER_API void ember_snapshot_end(ember_snapshot *s)
{
    if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    while (s->blocks != NULL) {
        arena_block *next = s->blocks->next;
        em_free(s->blocks);
        s->blocks = next;
    }
    for (int t = 0; t < EM_T_COUNT; t++)
        if (s->cur[t] != NULL)      /* a read txn's cursors need closing */
            mdb_cursor_close(s->cur[t]);
    em_rtxn_end(&s->r);
    em_free(s);
}

/* Record ID of TABLE through the table's cursor: callers resolve many ids,
** often in ascending order (a merged profile's stacks), which the cursor
** finds on the page it is on, or as the next record when they are dense. */
static int snap_get(ember_snapshot *s, int table, uint32_t id,
                    const uint8_t **rec, size_t *len)
{
    int mrc, rc;

    em_err_clear();
    if (s == NULL)
        return em_err(EMBER_EINVAL, "NULL snapshot");
    if (s->cur[table] == NULL &&
        (mrc = mdb_cursor_open(s->r.txn, s->r.db->dbi[table],
                               &s->cur[table])) != MDB_SUCCESS) {
        s->cur[table] = NULL;
        return em_lmdb(mrc, em_table_names[table]);
    }
    if (s->at[table] >= 0 && id == s->at[table] + 1)
        rc = em_table_next(s->cur[table], table, id, rec, len);
    else
        rc = em_table_get_at(s->cur[table], table, id, rec, len);
    s->at[table] = rc == EMBER_OK ? (int64_t)id : -1;
    return rc;
}

EMBER_API int ember_snapshot_string(ember_snapshot *s, uint32_t id,
                                    const char **str, size_t *len)
{
    const uint8_t *rec;
    size_t n;
    uint32_t local;
    int rc;
    em_src *b = snap_block(s, EM_T_STRING, id, &local, &rc);

    if (b != NULL || rc != EMBER_OK)
        return rc != EMBER_OK ? rc : em_bsrc_string(b, local, str, len);
    rc = snap_get(s, EM_T_STRING, id, &rec, &n);

    if (rc != EMBER_OK)
        return rc;
    if (str != NULL)
        *str = (const char *)rec;
    if (len != NULL)
        *len = n;
    return EMBER_OK;
}

/* String ID as a C string, or corruption when a record names a bad id. */
static int snap_str(ember_snapshot *s, uint32_t id, const char **out)
{
    int rc = ember_snapshot_string(s, id, out, NULL);
    if (rc == EMBER_ENOTFOUND)
        rc = EM_CORRUPT("a record names missing string %u", id);
    return rc;
}

EMBER_API int ember_snapshot_stack(ember_snapshot *s, uint32_t id,
                                   const uint32_t **locs, size_t *n)
{
    const uint8_t *rec, *p;
    uint64_t depth = 0;
    size_t len, got;
    uint32_t *out, local;
    int rc;
    em_src *b = snap_block(s, EM_T_STACK, id, &local, &rc);

    if (b != NULL || rc != EMBER_OK)
        return rc != EMBER_OK ? rc : em_bsrc_stack(b, local, arena_fn, s,
                                                   locs, n);
    rc = snap_get(s, EM_T_STACK, id, &rec, &len);

    if (rc != EMBER_OK)
        return rc;
    /* The record starts with its depth, and each location takes at least
    ** a byte: that bounds the array, so the record is decoded once. */
    p = rec;
    if (em_varint_get(&p, rec + len, &depth) != 0 || depth > len)
        return EM_CORRUPT("stack %u: record of %zu bytes does not decode",
                          id, len);
    out = arena_alloc(s, (size_t)depth * sizeof *out + 1);
    if (out == NULL)
        return em_err(EMBER_ENOMEM, "snapshot: stack of %llu",
                      (unsigned long long)depth);
    rc = em_stack_decode(rec, len, out, (size_t)depth, &got);
    if (rc != EMBER_OK)
        return rc;
    *locs = out;
    *n = got;
    return EMBER_OK;
}

EMBER_API int ember_snapshot_location(ember_snapshot *s, uint32_t id,
                                      ember_location *out)
{
    uint32_t fn[EM_MAX_LINES];
    int64_t line[EM_MAX_LINES];
    const uint8_t *rec;
    size_t len, nl;
    ember_line *lines;
    uint32_t local;
    int rc;
    em_src *b = snap_block(s, EM_T_LOCATION, id, &local, &rc);

    if (b != NULL || rc != EMBER_OK)
        return rc != EMBER_OK ? rc : em_bsrc_location(b, local, arena_fn, s,
                                                      out);
    rc = snap_get(s, EM_T_LOCATION, id, &rec, &len);

    if (rc == EMBER_OK)
        rc = em_location_decode(rec, len, &out->mapping, &out->address, fn,
                                line, EM_MAX_LINES, &nl);
    if (rc != EMBER_OK)
        return rc;
    lines = arena_alloc(s, nl * sizeof *lines + 1);
    if (lines == NULL)
        return em_err(EMBER_ENOMEM, "snapshot: %zu lines", nl);
    for (size_t i = 0; i < nl; i++) {
        lines[i].function = fn[i];
        lines[i].line = line[i];
    }
    out->lines = lines;
    out->nlines = nl;
    return EMBER_OK;
}

EMBER_API int ember_snapshot_function(ember_snapshot *s, uint32_t id,
                                      ember_function *out)
{
    const uint8_t *rec;
    size_t len;
    uint32_t sid[3], local;
    int rc;
    em_src *b = snap_block(s, EM_T_FUNCTION, id, &local, &rc);

    if (b != NULL || rc != EMBER_OK)
        return rc != EMBER_OK ? rc : em_bsrc_function(b, local, out);
    rc = snap_get(s, EM_T_FUNCTION, id, &rec, &len);

    if (rc == EMBER_OK)
        rc = em_function_decode(rec, len, sid, &out->start_line);
    if (rc == EMBER_OK)
        rc = snap_str(s, sid[0], &out->name);
    if (rc == EMBER_OK)
        rc = snap_str(s, sid[1], &out->system_name);
    if (rc == EMBER_OK)
        rc = snap_str(s, sid[2], &out->file);
    return rc;
}

EMBER_API int ember_snapshot_mapping(ember_snapshot *s, uint32_t id,
                                     ember_mapping *out)
{
    const uint8_t *rec;
    size_t len;
    uint64_t f[3];
    uint32_t file, build, local;
    int rc;
    em_src *b = snap_block(s, EM_T_MAPPING, id, &local, &rc);

    if (b != NULL || rc != EMBER_OK)
        return rc != EMBER_OK ? rc : em_bsrc_mapping(b, local, out);
    rc = snap_get(s, EM_T_MAPPING, id, &rec, &len);

    if (rc == EMBER_OK)
        rc = em_mapping_decode(rec, len, f, &file, &build);
    if (rc == EMBER_OK)
        rc = snap_str(s, file, &out->file);
    if (rc == EMBER_OK)
        rc = snap_str(s, build, &out->build_id);
    if (rc == EMBER_OK) {
        out->start = f[0];
        out->limit = f[1];
        out->offset = f[2];
    }
    return rc;
}
