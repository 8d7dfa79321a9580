/*
** engine/verify.c: `ember verify`. Walks every table and chunk of one
** snapshot and reports each problem with what and where:
**  - interned tables: ids dense from 0, records decode, references point at
**    existing ids, the hash index maps each record back to its id and holds
**    nothing else;
**  - postings: rebuilt in memory from the series and stack records and
**    compared bitmap for bitmap with the stored ones;
**  - chunks: key, checksum, full decode, stack ids, totals, head flags;
**  - meta counters and head summaries against what the walk counted;
**  - every key and value of every sub-database in its page, and (format 2)
**    every value's checksum (engine/lmdbval.c): each bad one is a problem,
**    and the walk goes on past it;
**  - first of all LMDB's own trees, page by page (engine/lmdbtree.c): when
**    one is damaged, verify reports it and stops, as LMDB's cursors could
**    fault walking it.
** Memory is bounded by the postings (one bitmap per label value and per
** function), never by the chunk data.
*/
#include <stdio.h>

#include "engine/compact.h"

#define EM_VERIFY_MAX_REPORTS 1000

typedef struct vctx {
    em_rtxn r;
    ember_problem_fn fn;
    void *fctx;
    uint64_t problems;
    em_staged post, fpost;          /* postings expected from the records */
    uint64_t profiles, samples, chunk_bytes, max_span;
} vctx;

static void problem(vctx *v, const char *fmt, ...) EM_PRINTF(2, 3);

static void problem(vctx *v, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    if (++v->problems > EM_VERIFY_MAX_REPORTS || v->fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->fn(v->fctx, msg);
}

/* Reports an error code from a decoder as a problem; OK otherwise. */
static bool check(vctx *v, int rc, const char *table, uint32_t id)
{
    if (rc == EMBER_OK)
        return true;
    problem(v, "%s %u: %s", table, id, em_errmsg());
    return false;
}

/* Checks the key K and stored value RAW a walk of sub-database D is on:
** a problem when either is damaged; else RAW's payload in *P, *N. */
static bool stored_ok(vctx *v, int d, const MDB_val *k, const MDB_val *raw,
                      const uint8_t **p, size_t *n)
{
    int rc = em_val_key(v->r.db, d, k);

    if (rc == EMBER_OK)
        rc = em_val_get(v->r.db, d, k, raw, p, n);
    if (rc != EMBER_OK)
        problem(v, "%s", em_errmsg());
    return rc == EMBER_OK;
}

static void ref(vctx *v, const char *table, uint32_t id, int target,
                uint32_t ref_id)
{
    if (ref_id >= v->r.next[target])
        problem(v, "%s %u: names %s %u, which does not exist", table, id,
                em_table_names[target], ref_id);
}

/* ---- records ---------------------------------------------------------------------- */

static int stage_label(vctx *v, const char *name, const char *value,
                       uint32_t series)
{
    char key[EM_MAX_LABEL_NAME + EM_MAX_LABEL_VALUE + 16];
    size_t a = strlen(name), b = strlen(value);

    if (a + b + 1 > sizeof key)
        return EMBER_OK;
    memcpy(key, name, a + 1);
    memcpy(key + a + 1, value, b);
    return em_staged_add(&v->post, key, a + 1 + b, series);
}

static const char *str_of(vctx *v, uint32_t id)
{
    const uint8_t *s;
    size_t len;
    if (em_table_get(v->r.txn, v->r.db, EM_T_STRING, id, &s, &len) != 0)
        return NULL;
    return (const char *)s;
}

static int verify_series(vctx *v, uint32_t id, const uint8_t *p, size_t n)
{
    em_series_rec s;
    const char *type;
    int rc = EMBER_OK;

    if (!check(v, em_series_decode(p, n, &s), "series", id))
        return EMBER_OK;
    ref(v, "series", id, EM_T_STRING, s.type);
    type = str_of(v, s.type);
    if (type != NULL)
        rc = stage_label(v, EM_TYPE_LABEL, type, id);
    for (uint32_t i = 0; i < s.nlabels && rc == EMBER_OK; i++) {
        const char *name = str_of(v, s.names[i]);
        const char *value = str_of(v, s.values[i]);
        ref(v, "series", id, EM_T_STRING, s.names[i]);
        ref(v, "series", id, EM_T_STRING, s.values[i]);
        if (name != NULL && value != NULL)
            rc = stage_label(v, name, value, id);
    }
    return rc;
}

static int verify_location(vctx *v, uint32_t id, const uint8_t *p, size_t n)
{
    uint32_t fn[EM_MAX_LINES], mapping;
    int64_t line[EM_MAX_LINES];
    uint64_t addr;
    size_t nl;

    if (!check(v, em_location_decode(p, n, &mapping, &addr, fn, line,
                                     EM_MAX_LINES, &nl), "location", id))
        return EMBER_OK;
    ref(v, "location", id, EM_T_MAPPING, mapping);
    for (size_t i = 0; i < nl; i++)
        ref(v, "location", id, EM_T_FUNCTION, fn[i]);
    return EMBER_OK;
}

/* Stages stack ID under each function its (valid) locations name. */
static int stage_stack(vctx *v, uint32_t id, const uint32_t *locs, size_t n)
{
    uint32_t fn[EM_MAX_LINES], mapping;
    int64_t line[EM_MAX_LINES];
    int rc = EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        const uint8_t *p;
        size_t len, nl;
        uint64_t addr;
        if (em_table_get(v->r.txn, v->r.db, EM_T_LOCATION, locs[i], &p,
                         &len) != EMBER_OK ||
            em_location_decode(p, len, &mapping, &addr, fn, line,
                               EM_MAX_LINES, &nl) != EMBER_OK)
            continue;       /* reported with the locations */
        for (size_t j = 0; j < nl && rc == EMBER_OK; j++)
            rc = em_staged_add(&v->fpost, &fn[j], sizeof fn[j], id);
    }
    return rc;
}

static int verify_stack(vctx *v, uint32_t id, const uint8_t *p, size_t n)
{
    uint32_t *locs;
    size_t depth;
    int rc;

    if (!check(v, em_stack_decode(p, n, NULL, 0, &depth), "stack", id))
        return EMBER_OK;
    locs = em_malloc(depth * sizeof *locs + 1);
    if (locs == NULL)
        return em_err(EMBER_ENOMEM, "verify: stack of %zu", depth);
    em_stack_decode(p, n, locs, depth, &depth);
    for (size_t i = 0; i < depth; i++)
        ref(v, "stack", id, EM_T_LOCATION, locs[i]);
    rc = stage_stack(v, id, locs, depth);
    em_free(locs);
    return rc;
}

static int verify_record(vctx *v, int t, uint32_t id, const uint8_t *p,
                         size_t n)
{
    uint64_t f[3];
    uint32_t s[3];
    int64_t line;

    switch (t) {
    case EM_T_MAPPING:
        if (check(v, em_mapping_decode(p, n, f, &s[0], &s[1]), "mapping", id)) {
            ref(v, "mapping", id, EM_T_STRING, s[0]);
            ref(v, "mapping", id, EM_T_STRING, s[1]);
        }
        return EMBER_OK;
    case EM_T_FUNCTION:
        if (check(v, em_function_decode(p, n, s, &line), "function", id))
            for (int i = 0; i < 3; i++)
                ref(v, "function", id, EM_T_STRING, s[i]);
        return EMBER_OK;
    case EM_T_LOCATION:
        return verify_location(v, id, p, n);
    case EM_T_STACK:
        return verify_stack(v, id, p, n);
    case EM_T_SERIES:
        return verify_series(v, id, p, n);
    default:
        return EMBER_OK;
    }
}

/* The hash index must map the record of ID back to ID. */
static void verify_indexed(vctx *v, int t, uint32_t id, const uint8_t *p,
                           size_t n)
{
    uint64_t h = em_hash64(p, n, (uint64_t)t);
    MDB_val k = { sizeof h, &h }, d = { sizeof id, &id };
    MDB_cursor *cur;

    if (mdb_cursor_open(v->r.txn, v->r.db->dbi[EM_T_COUNT + t], &cur) != 0)
        return;
    if (mdb_cursor_get(cur, &k, &d, MDB_GET_BOTH) != MDB_SUCCESS)
        problem(v, "%s %u: missing from its hash index", em_table_names[t],
                id);
    mdb_cursor_close(cur);
}

static int verify_table(vctx *v, int t)
{
    MDB_cursor *cur;
    MDB_val k, d;
    MDB_stat st;
    uint32_t expect = 0;
    int rc = EMBER_OK, mrc = mdb_cursor_open(v->r.txn, v->r.db->dbi[t], &cur);

    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT), expect++) {
        const uint8_t *p;
        uint32_t id;
        size_t n;
        if (!stored_ok(v, t, &k, &d, &p, &n))
            continue;
        if (k.mv_size != sizeof id) {
            problem(v, "%s table: key of %zu bytes", em_table_names[t],
                    k.mv_size);
            continue;
        }
        memcpy(&id, k.mv_data, sizeof id);
        if (id != expect)
            problem(v, "%s table: id %u where %u was expected (ids must be "
                    "dense)", em_table_names[t], id, expect);
        if (t == EM_T_STRING && (n == 0 || p[n - 1] != '\0')) {
            problem(v, "string %u: missing terminator", id);
            continue;
        }
        n -= t == EM_T_STRING;
        verify_indexed(v, t, id, p, n);
        rc = verify_record(v, t, id, p, n);
    }
    mdb_cursor_close(cur);
    if (mdb_stat(v->r.txn, v->r.db->dbi[EM_T_COUNT + t], &st) == 0 &&
        st.ms_entries != expect)
        problem(v, "%s hash index: %zu entries for %u records",
                em_table_names[t], (size_t)st.ms_entries, expect);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, em_table_names[t]);
    return rc;
}

/* ---- postings ------------------------------------------------------------------------- */

typedef struct post_cmp {
    vctx *v;
    MDB_dbi dbi;
    const char *what;
    const char *ids;                /* what the bitmaps hold: "series" */
} post_cmp;

static void key_text(const void *key, size_t klen, bool fn, char *out,
                     size_t cap)
{
    uint32_t f;
    size_t n = 0;

    if (fn && klen == sizeof f) {
        memcpy(&f, key, sizeof f);
        snprintf(out, cap, "function %u", f);
        return;
    }
    /* Byte by byte: "%.*s" would stop at the NUL between name and value. */
    for (size_t i = 0; i < klen && i < 200 && n + 1 < cap; i++) {
        char ch = ((const char *)key)[i];
        out[n++] = ch == '\0' ? '=' : ch;  /* name\0value as name=value */
    }
    out[n] = '\0';
}

/* The first id of A that B lacks, and how many there are (0: none). */
static uint64_t first_lacking(const roaring_bitmap_t *a,
                              const roaring_bitmap_t *b, uint32_t *first)
{
    roaring_uint32_iterator_t it;
    uint64_t n = roaring_bitmap_andnot_cardinality(a, b);

    *first = 0;
    roaring_init_iterator(a, &it);
    for (; n > 0 && it.has_value; roaring_advance_uint32_iterator(&it))
        if (!roaring_bitmap_contains(b, it.current_value)) {
            *first = it.current_value;
            break;
        }
    return n;
}

/* A stored bitmap that differs from the records': which ids, not only how
** many (two sets of one size differ too). */
static void postings_differ(post_cmp *c, const char *name,
                            const roaring_bitmap_t *have,
                            const roaring_bitmap_t *want)
{
    uint32_t extra_id, lack_id;
    uint64_t extra = first_lacking(have, want, &extra_id);
    uint64_t lack = first_lacking(want, have, &lack_id);
    char a[96] = "", b[96] = "";

    if (extra > 0)
        snprintf(a, sizeof a, "; %llu stored that no record names (first: "
                 "%s %u)", (unsigned long long)extra, c->ids, extra_id);
    if (lack > 0)
        snprintf(b, sizeof b, "; %llu named by records, not stored (first: "
                 "%s %u)", (unsigned long long)lack, c->ids, lack_id);
    problem(c->v, "%s %s: holds %llu ids, the records say %llu%s%s", c->what,
            name, (unsigned long long)roaring_bitmap_get_cardinality(have),
            (unsigned long long)roaring_bitmap_get_cardinality(want), a, b);
}

/* Every expected bitmap must be stored, and equal. */
static int expected_stored(void *ctx, const void *key, size_t klen,
                           const roaring_bitmap_t *want)
{
    post_cmp *c = ctx;
    roaring_bitmap_t *have = NULL;
    char name[256];
    int rc = em_bitmap_get(c->v->r.txn, c->dbi, key, klen, &have);

    key_text(key, klen, c->dbi == c->v->r.db->dbi[EM_D_FPOST], name,
             sizeof name);
    if (rc == EMBER_ECORRUPT)
        problem(c->v, "%s %s: %s", c->what, name, em_errmsg());
    else if (rc == EMBER_OK && have == NULL)
        problem(c->v, "%s %s: missing", c->what, name);
    else if (rc == EMBER_OK && !roaring_bitmap_equals(have, want))
        postings_differ(c, name, have, want);
    if (have != NULL)
        roaring_bitmap_free(have);
    return rc == EMBER_ECORRUPT ? EMBER_OK : rc;
}

/* Every stored key must be expected. An expected one's value was checked
** by expected_stored; another's with a bad checksum is reported as such
** (a flipped key, most likely). */
static int stored_expected(vctx *v, em_staged *s, int dn, const char *what)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int mrc = mdb_cursor_open(v->r.txn, v->r.db->dbi[dn], &cur);

    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS; mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        char name[256];
        const uint8_t *p;
        size_t n;
        if (em_val_key(v->r.db, dn, &k) != EMBER_OK) {
            problem(v, "%s", em_errmsg());
            continue;
        }
        if (em_staged_find(s, k.mv_data, k.mv_size) != NULL ||
            !stored_ok(v, dn, &k, &d, &p, &n))
            continue;
        key_text(k.mv_data, k.mv_size, dn == EM_D_FPOST, name, sizeof name);
        problem(v, "%s %s: stored but no record names it", what, name);
    }
    mdb_cursor_close(cur);
    return mrc == MDB_NOTFOUND ? EMBER_OK : em_lmdb(mrc, what);
}

static int verify_postings(vctx *v)
{
    post_cmp a = { v, v->r.db->dbi[EM_D_POST], "label postings", "series" };
    post_cmp b = { v, v->r.db->dbi[EM_D_FPOST], "function postings",
                   "stack" };
    int rc = em_staged_each(&v->post, expected_stored, &a);

    if (rc == EMBER_OK)
        rc = stored_expected(v, &v->post, EM_D_POST, a.what);
    if (rc == EMBER_OK)
        rc = em_staged_each(&v->fpost, expected_stored, &b);
    if (rc == EMBER_OK)
        rc = stored_expected(v, &v->fpost, EM_D_FPOST, b.what);
    return rc;
}

/* ---- chunks ------------------------------------------------------------------------------ */

/* Checks C's stack ids and totals; ENOMEM is an error, not a problem. */
static int verify_chunk_body(vctx *v, const char *where, const em_chunk *c)
{
    int64_t *sums;

    for (uint32_t i = 0; i < c->h.nstacks; i++)
        if (c->stacks[i] >= v->r.next[EM_T_STACK]) {
            problem(v, "%s: stack %u does not exist", where, c->stacks[i]);
            break;
        }
    sums = em_calloc(c->h.nprofiles + 1, sizeof *sums);
    if (sums == NULL)
        return em_err(EMBER_ENOMEM, "verify: %s: totals of %u profiles",
                      where, c->h.nprofiles);
    for (uint32_t i = 0; i < c->h.nstacks; i++)
        for (uint64_t j = c->stack_start[i]; j < c->stack_start[i + 1]; j++)
            sums[c->sample_profile[j]] = em_add_wrap(
                sums[c->sample_profile[j]], c->sample_value[j]);
    for (uint32_t p = 0; p < c->h.nprofiles; p++)
        if (sums[p] != c->total[p]) {
            problem(v, "%s: profile %u total %lld, its samples sum to %lld",
                    where, p, (long long)c->total[p], (long long)sums[p]);
            break;
        }
    em_free(sums);
    return EMBER_OK;
}

/* Checks one chunk. Damage is reported as a problem; running out of
** memory is not damage, so it stops the walk with EMBER_ENOMEM instead. */
static int verify_chunk(vctx *v, const MDB_val *k, const MDB_val *d,
                        em_staged *heads)
{
    uint32_t series, seq;
    int64_t t;
    char where[128];
    const uint8_t *p;
    size_t n;
    em_chunk c;
    int rc;

    if (!stored_ok(v, EM_D_CHUNK, k, d, &p, &n))
        return EMBER_OK;
    if (k->mv_size != EM_CHUNK_KEY_LEN) {
        problem(v, "chunk key of %zu bytes", k->mv_size);
        return EMBER_OK;
    }
    em_chunk_key_parse(k->mv_data, &series, &t, &seq);
    snprintf(where, sizeof where, "chunk (series %u, t=%lld, seq %u)", series,
             (long long)t, seq);
    if (series >= v->r.next[EM_T_SERIES])
        problem(v, "%s: series does not exist", where);
    rc = em_chunk_decode(v->r.codec, p, n, EM_COL_ALL, &c);
    if (rc == EMBER_ENOMEM)
        return em_err_prefix(rc, "verify: %s", where);
    if (rc != EMBER_OK) {
        problem(v, "%s: %s", where, em_errmsg());
        return EMBER_OK;
    }
    if (c.h.nprofiles > 0 && c.h.min_time != t)
        problem(v, "%s: starts at %lld, its key says %lld", where,
                (long long)c.h.min_time, (long long)t);
    if (c.h.nprofiles > 0 && (uint64_t)(c.h.max_time - c.h.min_time) >
        v->max_span)
        v->max_span = (uint64_t)(c.h.max_time - c.h.min_time);
    rc = verify_chunk_body(v, where, &c);
    if (rc == EMBER_OK && (c.h.flags & EM_CHUNK_HEAD))
        rc = em_staged_add(heads, &series, sizeof series, seq);
    v->profiles += c.h.nprofiles;
    v->samples += c.h.nsamples;
    v->chunk_bytes += n;
    em_chunk_release(&c);
    return rc;
}

/* Each head summary must count the head chunks of its series. */
static void verify_heads(vctx *v, em_staged *heads)
{
    MDB_cursor *cur;
    MDB_val k, d;
    uint64_t nheads = 0;
    int mrc = mdb_cursor_open(v->r.txn, v->r.db->dbi[EM_D_HEAD], &cur);

    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS; mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        uint32_t series;
        em_head h;
        const roaring_bitmap_t *have;
        const uint8_t *p;
        size_t n;
        if (!stored_ok(v, EM_D_HEAD, &k, &d, &p, &n))
            continue;
        if (k.mv_size != sizeof series || n != sizeof h) {
            problem(v, "head table: entry of %zu/%zu bytes", k.mv_size, n);
            continue;
        }
        memcpy(&series, k.mv_data, sizeof series);
        memcpy(&h, p, sizeof h);
        have = em_staged_find(heads, &series, sizeof series);
        if ((have ? roaring_bitmap_get_cardinality(have) : 0) != h.nchunks)
            problem(v, "head of series %u: says %u chunks, found %llu",
                    series, h.nchunks, (unsigned long long)(have ?
                    roaring_bitmap_get_cardinality(have) : 0));
        nheads++;
    }
    mdb_cursor_close(cur);
    if (nheads != heads->count)
        problem(v, "head table: %llu series with head chunks, %zu summaries",
                (unsigned long long)heads->count, (size_t)nheads);
}

static int verify_chunks(vctx *v)
{
    em_staged heads;
    MDB_cursor *cur;
    MDB_val k, d;
    int rc = EMBER_OK;
    int mrc = mdb_cursor_open(v->r.txn, v->r.db->dbi[EM_D_CHUNK], &cur);

    memset(&heads, 0, sizeof heads);
    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
        rc = verify_chunk(v, &k, &d, &heads);
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "chunk walk");
    if (rc == EMBER_OK)
        verify_heads(v, &heads);
    em_staged_free(&heads);
    return rc;
}

/* Every meta value: in its page, its checksum, 8 bytes (section 12). */
static int verify_meta(vctx *v)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int mrc = mdb_cursor_open(v->r.txn, v->r.db->dbi[EM_D_META], &cur);

    for (mrc = mrc ? mrc : mdb_cursor_get(cur, &k, &d, MDB_FIRST);
         mrc == MDB_SUCCESS; mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        const uint8_t *p;
        size_t n;
        if (stored_ok(v, EM_D_META, &k, &d, &p, &n) && n != sizeof(uint64_t))
            problem(v, "meta \"%.*s\": %zu bytes, expected 8",
                    (int)(k.mv_size < 80 ? k.mv_size : 80),
                    (const char *)k.mv_data, n);
    }
    mdb_cursor_close(cur);
    return mrc == MDB_NOTFOUND ? EMBER_OK : em_lmdb(mrc, "meta walk");
}

static void verify_counters(vctx *v)
{
    em_counters c;

    /* a counter that does not load was reported by verify_meta, a damaged
    ** table end by verify_table */
    if (em_counters_load(v->r.txn, v->r.db, &c) != EMBER_OK)
        return;
    if (c.profiles != v->profiles)
        problem(v, "meta: %llu profiles counted, the chunks hold %llu",
                (unsigned long long)c.profiles,
                (unsigned long long)v->profiles);
    if (c.samples != v->samples)
        problem(v, "meta: %llu samples counted, the chunks hold %llu",
                (unsigned long long)c.samples, (unsigned long long)v->samples);
    if (c.chunk_bytes != v->chunk_bytes)
        problem(v, "meta: %llu chunk bytes counted, the chunks hold %llu",
                (unsigned long long)c.chunk_bytes,
                (unsigned long long)v->chunk_bytes);
    if (c.max_span < v->max_span)
        problem(v, "meta: widest chunk span %llu, a chunk spans %llu",
                (unsigned long long)c.max_span,
                (unsigned long long)v->max_span);
}

/* em_tree_check's problems go where verify's do. */
static void tree_problem(void *ctx, const char *msg)
{
    problem(ctx, "%s", msg);
}

/* LMDB's trees first, walked without LMDB: a damaged one stops verify
** there, since walking it through LMDB could fault. */
static int verify_trees(vctx *v, bool *sound)
{
    uint64_t n = 0;
    int rc = em_tree_check(&v->r, tree_problem, v, &n);

    *sound = rc == EMBER_OK && n == 0;
    if (rc == EMBER_OK && n > 0)
        problem(v, "the records, postings and chunks were not checked: "
                "LMDB would walk the damaged pages above, and could fault");
    return rc == EMBER_OK && *sound ? em_rtxn_sizes(&v->r) : rc;
}

EMBER_API int ember_verify(ember_db *db, ember_problem_fn fn, void *ctx,
                           uint64_t *nproblems)
{
    bool sound = false;
    vctx v;
    int rc;

    em_err_clear();
    if (db == NULL)
        return em_err(EMBER_EINVAL, "ember_verify: NULL database");
    memset(&v, 0, sizeof v);
    v.fn = fn;
    v.fctx = ctx;
    rc = em_rtxn_begin_lax(db, &v.r);
    if (rc == EMBER_OK)
        rc = verify_trees(&v, &sound);
    if (rc == EMBER_OK && sound)
        rc = em_verify_blocks(&v.r, fn, ctx, &v.problems);
    for (int t = 0; t < EM_T_COUNT && rc == EMBER_OK && sound; t++)
        rc = verify_table(&v, t);
    if (rc == EMBER_OK && sound)
        rc = verify_meta(&v);
    if (rc == EMBER_OK && sound)
        rc = verify_postings(&v);
    if (rc == EMBER_OK && sound)
        rc = verify_chunks(&v);
    if (rc == EMBER_OK && sound)
        verify_counters(&v);
    em_staged_free(&v.post);
    em_staged_free(&v.fpost);
    em_rtxn_end(&v.r);
    if (nproblems != NULL)
        *nproblems = v.problems;
    if (rc == EMBER_OK && v.problems > 0)
        rc = em_err(EMBER_ECORRUPT, "verify: %llu problems",
                    (unsigned long long)v.problems);
    return rc;
}
