/*
** engine/table.c: the interned, append-only tables (strings, mappings,
** functions, locations, stacks, series) and their record encodings.
**
** Each table is a forward sub-database (id -> record) and a reverse index
** (em_hash64 of the record, seeded with the table number -> ids, as LMDB
** duplicates), so that the same content always gets the same id: intern
** hashes the record, compares every id under that hash byte for byte, and
** only then assigns the next id. Records are varints (docs/file-format.md);
** strings are stored with a trailing NUL so readers can hand out pointers
** into the map without copying. Every record is stored and read through
** engine/lmdbval.c (its checksum follows it); the hash index's ids carry
** none: a damaged one names a record whose bytes do not compare equal.
*/
#include "engine/store.h"

int em_public_bad(const em_counters *c, int table, const char *what,
                  uint32_t id)
{
    if (id < c->base[table])
        return em_err(EMBER_EINVAL, "%s names %s %u, which a compaction "
                      "dropped (ids interned since start at %u): intern "
                      "it again", what, em_table_names[table], id,
                      c->base[table]);
    return em_err(EMBER_EINVAL, "%s names %s %u, which does not exist",
                  what, em_table_names[table], id);
}

/* ---- generic tables -------------------------------------------------------- */

/* The result of looking up ID in TABLE of DB: MRC and the stored value
** D, checked (engine/lmdbval.c) and without its checksum. */
static int table_got(const ember_db *db, int table, uint32_t id, int mrc,
                     const MDB_val *d, const uint8_t **rec, size_t *len)
{
    MDB_val k = { sizeof id, &id };
    int rc;

    *rec = NULL;
    *len = 0;
    if (mrc == MDB_NOTFOUND)
        return em_err(EMBER_ENOTFOUND, "%s %u: no such id",
                      em_table_names[table], id);
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, em_table_names[table]);
    rc = em_val_get(db, table, &k, d, rec, len);
    if (rc == EMBER_OK && table == EM_T_STRING) {
        if (*len == 0 || (*rec)[*len - 1] != '\0') {
            *rec = NULL;
            *len = 0;
            return EM_CORRUPT("string %u: missing terminator", id);
        }
        (*len)--;
    }
    return rc;
}

int em_table_get(MDB_txn *txn, ember_db *db, int table, uint32_t id,
                 const uint8_t **rec, size_t *len)
{
    MDB_val k = { sizeof id, &id }, d;
    int mrc = mdb_get(txn, db->dbi[table], &k, &d);

    return table_got(db, table, id, mrc, &d, rec, len);
}

int em_table_get_at(MDB_cursor *cur, int table, uint32_t id,
                    const uint8_t **rec, size_t *len)
{
    MDB_val k = { sizeof id, &id }, d;
    int mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_KEY);

    return table_got(em_val_db(mdb_cursor_txn(cur)), table, id, mrc, &d, rec,
                     len);
}

int em_table_next(MDB_cursor *cur, int table, uint32_t id,
                  const uint8_t **rec, size_t *len)
{
    const ember_db *db = em_val_db(mdb_cursor_txn(cur));
    MDB_val k, d;
    uint32_t have;
    int mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);

    if (mrc == MDB_SUCCESS && k.mv_size == sizeof have &&
        em_val_key(db, table, &k) == EMBER_OK) {
        memcpy(&have, k.mv_data, sizeof have);
        if (have == id)
            return table_got(db, table, id, mrc, &d, rec, len);
    }
    return em_table_get_at(cur, table, id, rec, len);  /* ids not dense */
}

/* Looks REC up under hash H; EMBER_OK with *id, or ENOTFOUND. */
static int table_lookup(MDB_txn *txn, ember_db *db, int table, uint64_t h,
                        const uint8_t *rec, size_t len, uint32_t *id)
{
    MDB_cursor *cur;
    MDB_val k = { sizeof h, &h }, d;
    int mrc, rc = EMBER_ENOTFOUND;

    mrc = mdb_cursor_open(txn, db->dbi[EM_T_COUNT + table], &cur);
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "index cursor");
    for (mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_KEY);
         mrc == MDB_SUCCESS && rc == EMBER_ENOTFOUND;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT_DUP)) {
        const uint8_t *have = NULL;
        size_t hlen = 0;
        uint32_t cand;
        /* an id has no checksum: in its page, and its record must match */
        if ((rc = em_val_key(db, EM_T_COUNT + table, &d)) != EMBER_OK)
            break;
        rc = EMBER_ENOTFOUND;
        if (d.mv_size != sizeof cand) {
            rc = EM_CORRUPT("%s index: entry of %zu bytes",
                            em_table_names[table], d.mv_size);
            break;
        }
        memcpy(&cand, d.mv_data, sizeof cand);
        rc = em_table_get(txn, db, table, cand, &have, &hlen);
        if (rc == EMBER_ENOTFOUND)
            rc = EM_CORRUPT("%s index names missing id %u",
                            em_table_names[table], cand);
        else if (rc == EMBER_OK && (hlen != len || memcmp(have, rec, len)))
            rc = EMBER_ENOTFOUND;   /* a hash collision: keep looking */
        else if (rc == EMBER_OK)
            *id = cand;
    }
    mdb_cursor_close(cur);
    if (mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND && rc == EMBER_ENOTFOUND)
        return em_lmdb(mrc, "index lookup");
    return rc;
}

int em_table_find(MDB_txn *txn, ember_db *db, int table, const uint8_t *rec,
                  size_t len, uint32_t *id)
{
    uint64_t h = em_hash64(rec, len, (uint64_t)table);
    return table_lookup(txn, db, table, h, rec, len, id);
}

/* Stores REC under the next id of TABLE (strings get their NUL). */
static int table_insert(em_wtxn *w, int table, uint64_t h, const uint8_t *rec,
                        size_t len, uint32_t *id)
{
    ember_db *db = w->db;
    uint32_t nid = w->c.next[table];
    MDB_val k = { sizeof nid, &nid };
    MDB_val hk = { sizeof h, &h }, hd = { sizeof nid, &nid };
    size_t n = len + (table == EM_T_STRING);    /* a string's NUL */
    uint8_t *p;
    int mrc;

    if (nid == UINT32_MAX)
        return em_err(EMBER_ELIMIT, "%s table is full", em_table_names[table]);
    mrc = em_val_reserve(w->txn, db, table, &k, n, MDB_APPEND, (void **)&p);
    if (mrc == MDB_SUCCESS) {
        memcpy(p, rec, len);
        if (table == EM_T_STRING)
            p[len] = '\0';
        em_val_seal(table, &k, p, n);
    }
    if (mrc == MDB_SUCCESS)
        mrc = mdb_put(w->txn, db->dbi[EM_T_COUNT + table], &hk, &hd, 0);
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, em_table_names[table]);
    w->c.next[table] = nid + 1;
    *id = nid;
    return EMBER_OK;
}

int em_table_intern(em_wtxn *w, int table, const uint8_t *rec, size_t len,
                    uint32_t *id, bool *created)
{
    uint64_t h = em_hash64(rec, len, (uint64_t)table);
    int rc;

    if (created != NULL)
        *created = false;
    if (em_icache_get(&w->db->icache, table, h, rec, len, id))
        return EMBER_OK;
    rc = table_lookup(w->txn, w->db, table, h, rec, len, id);
    if (rc == EMBER_ENOTFOUND) {
        if (created != NULL)
            *created = true;
        rc = table_insert(w, table, h, rec, len, id);
    }
    if (rc == EMBER_OK)
        em_icache_put(&w->db->icache, table, h, rec, len, *id);
    return rc;
}

int em_intern_str(em_wtxn *w, const char *s, size_t len, uint32_t *id)
{
    if (len > EM_MAX_STRING)
        return em_err(EMBER_ELIMIT, "string of %zu bytes (limit %u)", len,
                      EM_MAX_STRING);
    return em_table_intern(w, EM_T_STRING, (const uint8_t *)s, len, id, NULL);
}

/* ---- record decoding --------------------------------------------------------- */

/* A cursor over a varint record; fails once and stays failed. */
typedef struct rd {
    const uint8_t *p, *end;
    bool bad;
} rd;

static uint64_t rd_u(rd *r)
{
    uint64_t v = 0;
    if (!r->bad && em_varint_get(&r->p, r->end, &v) != 0)
        r->bad = true;
    return v;
}

static uint32_t rd_u32(rd *r)
{
    uint64_t v = rd_u(r);
    if (v > UINT32_MAX)
        r->bad = true;
    return (uint32_t)v;
}

/* EMBER_OK when the whole record was read without fault. */
static int rd_done(const rd *r, const char *what)
{
    if (r->bad || r->p != r->end)
        return EM_CORRUPT("%s record: %s", what,
                          r->bad ? "bad varint" : "trailing bytes");
    return EMBER_OK;
}

int em_series_decode(const uint8_t *p, size_t len, em_series_rec *s)
{
    rd r = { p, p + len, false };

    s->type = rd_u32(&r);
    s->nlabels = rd_u32(&r);
    if (s->nlabels > EM_MAX_LABELS)
        return EM_CORRUPT("series record: %u labels", s->nlabels);
    for (uint32_t i = 0; i < s->nlabels && !r.bad; i++) {
        s->names[i] = rd_u32(&r);
        s->values[i] = rd_u32(&r);
    }
    return rd_done(&r, "series");
}

int em_mapping_decode(const uint8_t *p, size_t len, uint64_t f[3],
                      uint32_t *file, uint32_t *build_id)
{
    rd r = { p, p + len, false };

    for (int i = 0; i < 3; i++)
        f[i] = rd_u(&r);
    *file = rd_u32(&r);
    *build_id = rd_u32(&r);
    return rd_done(&r, "mapping");
}

int em_function_decode(const uint8_t *p, size_t len, uint32_t s[3],
                       int64_t *start_line)
{
    rd r = { p, p + len, false };

    for (int i = 0; i < 3; i++)
        s[i] = rd_u32(&r);
    *start_line = em_unzigzag(rd_u(&r));
    return rd_done(&r, "function");
}

int em_location_decode(const uint8_t *p, size_t len, uint32_t *mapping,
                       uint64_t *address, uint32_t *fn, int64_t *line,
                       size_t cap, size_t *nlines)
{
    rd r = { p, p + len, false };
    uint64_t n;

    *mapping = rd_u32(&r);
    *address = rd_u(&r);
    n = rd_u(&r);
    if (n > EM_MAX_LINES)
        return EM_CORRUPT("location record: %llu lines", (unsigned long long)n);
    for (uint64_t i = 0; i < n && !r.bad; i++) {
        uint32_t f = rd_u32(&r);
        int64_t l = em_unzigzag(rd_u(&r));
        if (i < cap) {
            fn[i] = f;
            line[i] = l;
        }
    }
    *nlines = (size_t)n;
    return rd_done(&r, "location");
}

/* The hot loop of every stack lookup: location ids under 2^14 take one or
** two bytes, read here without the general varint reader. */
int em_stack_decode(const uint8_t *p, size_t len, uint32_t *locs, size_t cap,
                    size_t *n)
{
    const uint8_t *end = p + len;
    uint64_t depth, v;

    if (em_varint_get(&p, end, &depth) != 0)
        return EM_CORRUPT("stack record: bad varint");
    if (depth > EM_MAX_STACK_DEPTH)
        return EM_CORRUPT("stack record: depth %llu",
                          (unsigned long long)depth);
    for (uint64_t i = 0; i < depth; i++) {
        if (p < end && p[0] < 0x80) {
            v = p[0];
            p++;
        } else if (end - p >= 2 && p[1] < 0x80) {
            v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
            p += 2;
        } else if (em_varint_get(&p, end, &v) != 0 || v > UINT32_MAX) {
            return EM_CORRUPT("stack record: bad varint");
        }
        if (i < cap)
            locs[i] = (uint32_t)v;
    }
    *n = (size_t)depth;
    if (p != end)
        return EM_CORRUPT("stack record: trailing bytes");
    return EMBER_OK;
}

/* ---- series ------------------------------------------------------------------ */

typedef struct label_ref {
    const char *name, *value;
} label_ref;

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const label_ref *)a)->name, ((const label_ref *)b)->name);
}

/* Checks and sorts the labels by name, dropping empty values (PromQL: an
** empty value is the same as no label). Returns the count kept. */
static int labels_canon(const ember_label *in, size_t n, label_ref *out,
                        size_t *nout)
{
    size_t k = 0;

    if (n > EM_MAX_LABELS)
        return em_err(EMBER_ELIMIT, "%zu labels (limit %d)", n, EM_MAX_LABELS);
    for (size_t i = 0; i < n; i++) {
        int rc = em_label_name_check(in[i].name);
        if (rc != EMBER_OK)
            return rc;
        if (strcmp(in[i].name, EM_TYPE_LABEL) == 0)
            return em_err(EMBER_EINVAL, "label %s is reserved", EM_TYPE_LABEL);
        if (in[i].value == NULL || in[i].value[0] == '\0')
            continue;
        if (strlen(in[i].value) > EM_MAX_LABEL_VALUE)
            return em_err(EMBER_ELIMIT, "label %s: value longer than %d bytes",
                          in[i].name, EM_MAX_LABEL_VALUE);
        out[k].name = in[i].name;
        out[k++].value = in[i].value;
    }
    qsort(out, k, sizeof *out, label_cmp);
    for (size_t i = 1; i < k; i++)
        if (strcmp(out[i].name, out[i - 1].name) == 0)
            return em_err(EMBER_EINVAL, "label %s given twice", out[i].name);
    *nout = k;
    return EMBER_OK;
}

int em_labels_check(const ember_label *labels, size_t n)
{
    label_ref tmp[EM_MAX_LABELS];
    size_t k;

    if (n > 0 && labels == NULL)
        return em_err(EMBER_EINVAL, "%zu labels but no label array", n);
    return labels_canon(labels, n, tmp, &k);
}

/* Stages the postings of a new series: each label and its type. */
static int series_stage(em_wtxn *w, const char *type, const label_ref *l,
                        size_t n, uint32_t id)
{
    char key[EM_MAX_LABEL_NAME + EM_MAX_LABEL_VALUE + 16];
    int rc = EMBER_OK;

    for (size_t i = 0; i <= n && rc == EMBER_OK; i++) {
        const char *name = i < n ? l[i].name : EM_TYPE_LABEL;
        const char *value = i < n ? l[i].value : type;
        size_t a = strlen(name), b = strlen(value);
        memcpy(key, name, a);
        key[a] = '\0';
        memcpy(key + a + 1, value, b);
        rc = em_staged_add(&w->post, key, a + 1 + b, id);
    }
    return rc;
}

int em_series_check(const ember_label *labels, size_t n)
{
    label_ref l[EM_MAX_LABELS];
    size_t k = 0;

    return labels_canon(labels, n, l, &k);
}

int em_series_intern(em_wtxn *w, const char *type, const ember_label *labels,
                     size_t n, uint32_t *id)
{
    label_ref l[EM_MAX_LABELS];
    uint8_t rec[(2 * EM_MAX_LABELS + 2) * 5];
    size_t k = 0, len = 0;
    uint32_t sid;
    bool created;
    int rc = labels_canon(labels, n, l, &k);

    if (rc == EMBER_OK)
        rc = em_intern_str(w, type, strlen(type), &sid);
    if (rc != EMBER_OK)
        return rc;
    len += em_varint_put(rec + len, sid);
    len += em_varint_put(rec + len, k);
    for (size_t i = 0; i < k && rc == EMBER_OK; i++) {
        rc = em_intern_str(w, l[i].name, strlen(l[i].name), &sid);
        len += em_varint_put(rec + len, sid);
        if (rc == EMBER_OK)
            rc = em_intern_str(w, l[i].value, strlen(l[i].value), &sid);
        len += em_varint_put(rec + len, sid);
    }
    if (rc == EMBER_OK)
        rc = em_table_intern(w, EM_T_SERIES, rec, len, id, &created);
    if (rc == EMBER_OK && created)
        rc = series_stage(w, type, l, k, *id);
    return rc;
}

/* ---- mappings, functions, locations: their records ------------------------ */

int em_mapping_intern(em_wtxn *w, uint64_t start, uint64_t limit,
                      uint64_t offset, uint32_t file, uint32_t build,
                      uint32_t *id)
{
    uint8_t rec[5 * EM_VARINT_MAX];
    size_t n = 0;

    n += em_varint_put(rec + n, start);
    n += em_varint_put(rec + n, limit);
    n += em_varint_put(rec + n, offset);
    n += em_varint_put(rec + n, file);
    n += em_varint_put(rec + n, build);
    return em_table_intern(w, EM_T_MAPPING, rec, n, id, NULL);
}

int em_function_intern(em_wtxn *w, const uint32_t s[3], int64_t start_line,
                       uint32_t *id)
{
    uint8_t rec[4 * EM_VARINT_MAX];
    size_t n = 0;

    for (int i = 0; i < 3; i++)
        n += em_varint_put(rec + n, s[i]);
    n += em_varint_put(rec + n, em_zigzag(start_line));
    return em_table_intern(w, EM_T_FUNCTION, rec, n, id, NULL);
}

/* The record goes through W's scratch: a location has up to 1024 lines. */
int em_location_intern(em_wtxn *w, const ember_location *l, uint32_t *id)
{
    em_buf *b = &w->rec;
    int rc;

    b->len = 0;
    rc = em_buf_varint(b, l->mapping);
    if (rc == EMBER_OK)
        rc = em_buf_varint(b, l->address);
    if (rc == EMBER_OK)
        rc = em_buf_varint(b, l->nlines);
    for (size_t i = 0; rc == EMBER_OK && i < l->nlines; i++) {
        rc = em_buf_varint(b, l->lines[i].function);
        if (rc == EMBER_OK)
            rc = em_buf_varint(b, em_zigzag(l->lines[i].line));
    }
    if (rc == EMBER_OK)
        rc = em_table_intern(w, EM_T_LOCATION, b->p, b->len, id, NULL);
    return rc;
}

/* ---- stacks and their function postings ------------------------------------ */

/* Stages stack ID in the postings of every function its locations name. */
static int stack_stage(em_wtxn *w, const uint32_t *locs, size_t n,
                       uint32_t id)
{
    uint32_t fn[EM_MAX_LINES];
    int64_t line[EM_MAX_LINES];

    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec;
        const uint32_t *fns = fn;
        size_t len, nl;
        uint32_t mapping;
        uint64_t addr;
        int rc = EMBER_OK;

        if (!em_icache_get_lfn(&w->db->icache, locs[i], &fns, &nl)) {
            rc = em_table_get(w->txn, w->db, EM_T_LOCATION, locs[i], &rec,
                              &len);
            if (rc == EMBER_OK)
                rc = em_location_decode(rec, len, &mapping, &addr, fn, line,
                                        EM_MAX_LINES, &nl);
            if (rc == EMBER_OK)
                em_icache_put_lfn(&w->db->icache, locs[i], fn, nl);
        }
        for (size_t j = 0; rc == EMBER_OK && j < nl; j++)
            rc = em_staged_add(&w->fpost, &fns[j], sizeof fns[j], id);
        if (rc != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}

int em_stack_intern(em_wtxn *w, const uint32_t *locs, size_t n, uint32_t *id)
{
    bool created;
    int rc;

    if (n > EM_MAX_STACK_DEPTH)
        return em_err(EMBER_ELIMIT, "stack of depth %zu (limit %d)", n,
                      EM_MAX_STACK_DEPTH);
    w->rec.len = 0;
    rc = em_buf_varint(&w->rec, n);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        if (locs[i] >= w->c.next[EM_T_LOCATION])
            return em_err(EMBER_EINVAL, "stack frame %zu: no location %u", i,
                          locs[i]);
        rc = em_buf_varint(&w->rec, locs[i]);
    }
    if (rc == EMBER_OK)
        rc = em_table_intern(w, EM_T_STACK, w->rec.p, w->rec.len, id,
                             &created);
    if (rc == EMBER_OK && created)
        rc = stack_stage(w, locs, n, *id);
    return rc;
}
