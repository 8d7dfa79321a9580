/*
** engine/postings.c: the inverted indexes. Label postings map
** "name\0value" to the roaring bitmap of series ids carrying it (the type is
** the label __type__); function postings map a function id to the bitmap of
** stack ids passing through it. Bitmaps are stored in CRoaring's portable
** serialization, followed by their checksum (engine/lmdbval.c), and read
** with a deserializer that checks every byte (engine/bitmap.c).
**
** Writers stage new ids in memory (em_staged, a hash table of keys to
** bitmaps) and OR them into the stored bitmaps once per request, so that a
** request creating a thousand series rewrites each bitmap once.
**
** Matchers follow PromQL: a missing label has the value "", regexes are
** fully anchored. Evaluation intersects the matchers' series sets, starting
** from the whole id range.
**
** Focus and ignore: the stacks through the functions a regex names, ORed
** from the function postings (a literal regex compares string ids instead
** of running over every name), as a dense bitset of the stacks to keep.
** The handle keeps the last sets made, per (focus, ignore, function and
** stack counts of the snapshot): tables only grow, so equal counts mean an
** equal set, and new stacks or functions make a new one. Each set made gets
** an id never reused, which names it in the chunk cache's memos.
*/
#include "engine/store.h"

struct em_staged_ent {
    uint8_t *key;                   /* NULL: free slot */
    size_t klen;
    uint64_t hash;                  /* em_hash64 of the key */
    roaring_bitmap_t *bm;
    uint32_t *pend;                 /* ids added since bm was last brought */
    size_t npend, cap_pend;         /* up to date (staged_settle) */
};

/* What a probe compares an entry with. */
typedef struct staged_key {
    const void *key;
    size_t klen;
} staged_key;

#define EM_HT_NAME staged
#define EM_HT_TABLE em_staged
#define EM_HT_ENTRY struct em_staged_ent
#define EM_HT_KEY const staged_key *
#define EM_HT_IS_FREE(e) ((e)->key == NULL)
#define EM_HT_HASH(e) ((e)->hash)
#define EM_HT_MATCH(e, h, k)                                                 \
    ((e)->hash == (h) && (e)->klen == (k)->klen &&                           \
     memcmp((e)->key, (k)->key, (k)->klen) == 0)
#define EM_HT_WHAT "postings: staging table"
#include "engine/htab.h"

/* Ids wait in an entry's array until this many, then go into its bitmap in
** one roaring_bitmap_add_many: a new stack adds its id to the postings of
** each of its functions, some thirty bitmaps, and adding ids one at a time
** was most of staging (a Go heap profile's import). */
#define STAGED_PEND_MAX 1024

/* ---- staging ------------------------------------------------------------------ */

/* Brings E's bitmap up to date with its pending ids. */
static void staged_settle(struct em_staged_ent *e)
{
    if (e->npend > 0)
        roaring_bitmap_add_many(e->bm, e->npend, e->pend);
    e->npend = 0;
}

/* Appends ID to E's pending ids, settling first when they are full. */
static int staged_pend(struct em_staged_ent *e, uint32_t id)
{
    uint32_t *p;

    if (e->npend > 0 && e->pend[e->npend - 1] == id)
        return EMBER_OK;            /* a function twice in one stack */
    if (e->npend == STAGED_PEND_MAX)
        staged_settle(e);
    if (e->npend == e->cap_pend) {
        p = em_grow(e->pend, &e->cap_pend, e->npend + 1, sizeof *p);
        if (p == NULL)
            return em_err(EMBER_ENOMEM, "postings: staging %zu ids",
                          e->npend + 1);
        e->pend = p;
    }
    e->pend[e->npend++] = id;
    return EMBER_OK;
}

/* A new entry for key K (hash H) with no ids yet, in *E. Room comes
** first, so that the insert cannot fail once the key and the bitmap are
** made: a slot it hands out is counted as used and must be filled. */
static int staged_new(em_staged *s, uint64_t h, const staged_key *k,
                      struct em_staged_ent **e)
{
    int rc = staged_reserve(s, 1);
    uint8_t *key;
    roaring_bitmap_t *bm;
    bool found;

    if (rc != EMBER_OK)
        return rc;
    key = em_malloc(k->klen);
    bm = roaring_bitmap_create();
    if (key == NULL || bm == NULL) {
        em_free(key);
        if (bm != NULL)
            roaring_bitmap_free(bm);
        return em_err(EMBER_ENOMEM, "postings: staging a key");
    }
    memcpy(key, k->key, k->klen);
    *e = staged_insert(s, h, k, &found);
    **e = (struct em_staged_ent){ .key = key, .klen = k->klen, .hash = h,
                                  .bm = bm };
    return EMBER_OK;
}

int em_staged_add(em_staged *s, const void *key, size_t klen, uint32_t id)
{
    uint64_t h = em_hash64(key, klen, 0);
    staged_key k = { key, klen };
    struct em_staged_ent *e = staged_find(s, h, &k);
    int rc;

    if (e == NULL && (rc = staged_new(s, h, &k, &e)) != EMBER_OK)
        return rc;
    return staged_pend(e, id);
}

void em_staged_clear(em_staged *s)
{
    struct em_staged_ent *e;
    size_t i = 0;

    while ((e = staged_next(s, &i)) != NULL) {
        em_free(e->key);
        em_free(e->pend);
        roaring_bitmap_free(e->bm);
    }
    staged_clear(s);
}

void em_staged_free(em_staged *s)
{
    em_staged_clear(s);
    staged_free(s);
}

/* ---- stored bitmaps ------------------------------------------------------------ */

int em_bitmap_get(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen,
                  roaring_bitmap_t **out)
{
    const ember_db *db = em_val_db(txn);
    MDB_val k = { klen, (void *)key }, d;
    const uint8_t *p;
    size_t n;
    int rc, mrc = mdb_get(txn, dbi, &k, &d);

    *out = NULL;
    if (mrc == MDB_NOTFOUND)
        return EMBER_OK;
    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "postings");
    rc = em_val_get(db, em_val_dbi(db, dbi), &k, &d, &p, &n);
    if (rc != EMBER_OK)
        return rc;
    *out = em_bitmap_decode(p, n);
    if (*out == NULL)
        return EM_CORRUPT("postings bitmap of %zu bytes does not decode", n);
    return EMBER_OK;
}

static int bitmap_put(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen,
                      const roaring_bitmap_t *bm)
{
    const ember_db *db = em_val_db(txn);
    int d = em_val_dbi(db, dbi);
    MDB_val k = { klen, (void *)key };
    size_t n;
    void *p;
    int mrc;

    roaring_bitmap_t *copy = roaring_bitmap_copy(bm);
    if (copy == NULL)
        return em_err(EMBER_ENOMEM, "postings: bitmap copy");
    roaring_bitmap_run_optimize(copy);
    n = roaring_bitmap_portable_size_in_bytes(copy);
    mrc = em_val_reserve(txn, db, d, &k, n, 0, &p);
    if (mrc == MDB_SUCCESS) {
        roaring_bitmap_portable_serialize(copy, p);
        em_val_seal(d, &k, p, n);
    }
    roaring_bitmap_free(copy);
    return em_lmdb(mrc, "postings put");
}

int em_staged_flush(em_wtxn *w, em_staged *s, MDB_dbi dbi)
{
    struct em_staged_ent *e;
    size_t i = 0;
    int rc = EMBER_OK;

    while (rc == EMBER_OK && (e = staged_next(s, &i)) != NULL) {
        roaring_bitmap_t *have;
        staged_settle(e);
        rc = em_bitmap_get(w->txn, dbi, e->key, e->klen, &have);
        if (rc == EMBER_OK && have != NULL) {
            roaring_bitmap_or_inplace(e->bm, have);
            roaring_bitmap_free(have);
        }
        if (rc == EMBER_OK)
            rc = bitmap_put(w->txn, dbi, e->key, e->klen, e->bm);
    }
    em_staged_clear(s);
    return rc;
}

/* ---- matchers ---------------------------------------------------------------- */

/* Calls FN for every stored value of label NAME whose value starts with
** PREFIX, with the value and its bitmap bytes. FN returns EMBER_OK to go on,
** EMBER_DONE to stop, or an error. */
typedef int (*value_fn)(void *ctx, const char *value, size_t vlen,
                        const MDB_val *bitmap);

static int label_scan(em_rtxn *r, const char *name, const char *prefix,
                      size_t plen, value_fn fn, void *ctx)
{
    size_t nlen = strlen(name) + 1;
    char *seek = em_malloc(nlen + plen);
    MDB_cursor *cur = NULL;
    MDB_val k, d;
    int mrc, rc = EMBER_OK;

    if (seek == NULL)
        return em_err(EMBER_ENOMEM, "label scan");
    memcpy(seek, name, nlen);
    memcpy(seek + nlen, prefix, plen);
    k.mv_size = nlen + plen;
    k.mv_data = seek;
    mrc = mdb_cursor_open(r->txn, r->db->dbi[EM_D_POST], &cur);
    if (mrc == MDB_SUCCESS)
        mrc = em_val_cursor(r->db, EM_D_POST, cur, &k, &d, MDB_SET_RANGE,
                            &rc);
    while (mrc == MDB_SUCCESS && rc == EMBER_OK) {
        if (k.mv_size < nlen + plen || memcmp(k.mv_data, seek, nlen + plen))
            break;
        rc = fn(ctx, (const char *)k.mv_data + nlen, k.mv_size - nlen, &d);
        mrc = em_val_cursor(r->db, EM_D_POST, cur, &k, &d, MDB_NEXT, &rc);
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    em_free(seek);
    if (rc == EMBER_DONE)
        rc = EMBER_OK;
    if (rc == EMBER_OK && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "label scan");
    return rc;
}

typedef struct union_ctx {
    const em_regex *re;             /* NULL: take every value */
    roaring_bitmap_t *acc;
} union_ctx;

static int union_value(void *ctx, const char *value, size_t vlen,
                       const MDB_val *bitmap)
{
    union_ctx *u = ctx;
    roaring_bitmap_t *bm;

    if (u->re != NULL && !em_regex_match(u->re, value, vlen))
        return EMBER_OK;
    bm = em_bitmap_decode(bitmap->mv_data, bitmap->mv_size);
    if (bm == NULL)
        return EM_CORRUPT("postings of a label value do not decode");
    roaring_bitmap_or_inplace(u->acc, bm);
    roaring_bitmap_free(bm);
    return EMBER_OK;
}

/* The series whose label NAME has a value RE matches (any value: RE NULL). */
static int label_union(em_rtxn *r, const char *name, const em_regex *re,
                       roaring_bitmap_t **out)
{
    union_ctx u = { re, roaring_bitmap_create() };
    const char *prefix = "";
    size_t plen = 0;
    int rc;

    if (u.acc == NULL)
        return em_err(EMBER_ENOMEM, "matcher bitmap");
    if (re != NULL)
        prefix = em_regex_prefix(re, &plen);
    rc = label_scan(r, name, prefix, plen, union_value, &u);
    if (rc != EMBER_OK) {
        roaring_bitmap_free(u.acc);
        return rc;
    }
    *out = u.acc;
    return EMBER_OK;
}

/* The exact posting name=value (an empty bitmap when absent). */
static int label_exact(em_rtxn *r, const char *name, const char *value,
                       roaring_bitmap_t **out)
{
    size_t a = strlen(name), b = strlen(value);
    char *key = em_malloc(a + 1 + b);
    int rc;

    if (key == NULL)
        return em_err(EMBER_ENOMEM, "matcher key");
    memcpy(key, name, a + 1);
    memcpy(key + a + 1, value, b);
    rc = em_bitmap_get(r->txn, r->db->dbi[EM_D_POST], key, a + 1 + b, out);
    em_free(key);
    if (rc == EMBER_OK && *out == NULL && (*out = roaring_bitmap_create()) ==
        NULL)
        rc = em_err(EMBER_ENOMEM, "matcher bitmap");
    return rc;
}

/* The set of series whose NAME value is matched by the positive form of M
** (= or =~), including series without the label when "" matches. */
static int matcher_positive(em_rtxn *r, const ember_matcher *m,
                            const roaring_bitmap_t *all,
                            roaring_bitmap_t **out)
{
    bool re = m->op == EMBER_MATCH_RE || m->op == EMBER_MATCH_NRE;
    em_regex *rx = NULL;
    bool empty_matches;
    int rc;

    *out = NULL;
    if (re && (rc = em_regex_compile(m->value, &rx)) != EMBER_OK)
        return em_err_prefix(rc, "matcher %s", m->name);
    if (re && em_regex_is_literal(rx)) {
        size_t n;
        const char *lit = em_regex_prefix(rx, &n);
        rc = n == strlen(lit) ? label_exact(r, m->name, lit, out)
                              : label_union(r, m->name, rx, out);
    } else {
        rc = re ? label_union(r, m->name, rx, out)
                : label_exact(r, m->name, m->value, out);
    }
    empty_matches = re ? em_regex_match(rx, "", 0) : m->value[0] == '\0';
    if (rc == EMBER_OK && empty_matches) {
        /* PromQL: "" also selects the series that lack the label. */
        roaring_bitmap_t *has = NULL, *lacking;
        rc = label_union(r, m->name, NULL, &has);
        lacking = rc == EMBER_OK ? roaring_bitmap_andnot(all, has) : NULL;
        if (rc == EMBER_OK && lacking == NULL)
            rc = em_err(EMBER_ENOMEM, "matcher bitmap");
        if (rc == EMBER_OK) {
            roaring_bitmap_or_inplace(*out, lacking);
            roaring_bitmap_free(lacking);
        }
        if (has != NULL)
            roaring_bitmap_free(has);
    }
    em_regex_free(rx);
    if (rc != EMBER_OK && *out != NULL) {   /* the "" half failed */
        roaring_bitmap_free(*out);
        *out = NULL;
    }
    return rc;
}

int em_matcher_check(const ember_matcher *m)
{
    if (m->name == NULL || m->value == NULL)
        return em_err(EMBER_EINVAL, "matcher with a NULL name or value");
    if (m->op < EMBER_MATCH_EQ || m->op > EMBER_MATCH_NRE)
        return em_err(EMBER_EINVAL, "matcher %s: unknown operator %d",
                      m->name, m->op);
    if (strcmp(m->name, EM_TYPE_LABEL) == 0)
        return EMBER_OK;
    return em_label_name_check(m->name);
}

/* ANDs matcher M into ACC (em_match_fn, on the head: CTX is the rtxn). */
static int matcher_apply(void *ctx, const ember_matcher *m,
                         const roaring_bitmap_t *all, roaring_bitmap_t *acc)
{
    em_rtxn *r = ctx;
    roaring_bitmap_t *pos = NULL;
    int rc = em_matcher_check(m);

    if (rc == EMBER_OK)
        rc = matcher_positive(r, m, all, &pos);
    if (rc != EMBER_OK)
        return rc;
    if (m->op == EMBER_MATCH_NEQ || m->op == EMBER_MATCH_NRE)
        roaring_bitmap_andnot_inplace(acc, pos);
    else
        roaring_bitmap_and_inplace(acc, pos);
    roaring_bitmap_free(pos);
    return EMBER_OK;
}

int em_selector_check(const ember_selector *sel)
{
    if (sel != NULL && sel->sz < sizeof *sel)
        return em_err(EMBER_EINVAL, "selector: sz is not "
                      "sizeof(ember_selector)");
    if (sel != NULL && sel->nmatchers > 0 && sel->matchers == NULL)
        return em_err(EMBER_EINVAL, "selector: matchers is NULL");
    return EMBER_OK;
}

int em_select_with(uint32_t nseries, const ember_selector *sel,
                   em_match_fn apply, void *ctx, roaring_bitmap_t **out)
{
    roaring_bitmap_t *all, *acc;
    int rc = EMBER_OK;

    *out = NULL;
    /* from_range refuses an empty range: start from an empty bitmap. */
    all = nseries == 0 ? roaring_bitmap_create()
          : roaring_bitmap_from_range(0, nseries, 1);
    acc = all != NULL ? roaring_bitmap_copy(all) : NULL;
    if (acc == NULL) {
        if (all != NULL)
            roaring_bitmap_free(all);
        return em_err(EMBER_ENOMEM, "series bitmap");
    }
    if (sel != NULL && sel->type != NULL) {
        ember_matcher tm = { EM_TYPE_LABEL, sel->type, EMBER_MATCH_EQ };
        rc = apply(ctx, &tm, all, acc);
    }
    for (size_t i = 0; sel != NULL && i < sel->nmatchers && rc == EMBER_OK &&
         !roaring_bitmap_is_empty(acc); i++)
        rc = apply(ctx, &sel->matchers[i], all, acc);
    roaring_bitmap_free(all);
    if (rc != EMBER_OK) {
        roaring_bitmap_free(acc);
        return rc;
    }
    *out = acc;
    return EMBER_OK;
}

int em_select_series(em_rtxn *r, const ember_selector *sel,
                     roaring_bitmap_t **out)
{
    return em_select_with(r->next[EM_T_SERIES], sel, matcher_apply, r, out);
}

/* ---- focus: stacks through functions ------------------------------------------ */

/* True when function ID's name (or system name) matches RE. */
static int function_matches(em_rtxn *r, const em_regex *re, const MDB_val *d,
                            bool *yes)
{
    uint32_t s[3];
    int64_t start;
    int rc = em_function_decode(d->mv_data, d->mv_size, s, &start);

    *yes = false;
    for (int i = 0; rc == EMBER_OK && i < 2 && !*yes; i++) {
        const uint8_t *str;
        size_t len;
        rc = em_table_get(r->txn, r->db, EM_T_STRING, s[i], &str, &len);
        if (rc == EMBER_OK)
            *yes = em_regex_match(re, (const char *)str, len);
    }
    return rc;
}

/* True when function record D names string NAME (name or system name):
** a literal regex compares string ids, reading no string. */
static int function_names(const MDB_val *d, uint32_t name, bool *yes)
{
    uint32_t s[3];
    int64_t start;
    int rc = em_function_decode(d->mv_data, d->mv_size, s, &start);

    *yes = rc == EMBER_OK && (s[0] == name || s[1] == name);
    return rc;
}

/* The string id of RE's one match when RE is a literal: *LITERAL says
** whether it is, *ID is UINT32_MAX when no such string is stored (then no
** function can match). */
static int literal_id(em_rtxn *r, const em_regex *re, bool *literal,
                      uint32_t *id)
{
    size_t len;
    const char *p = em_regex_prefix(re, &len);
    int rc;

    *id = UINT32_MAX;
    *literal = em_regex_is_literal(re);
    if (!*literal)
        return EMBER_OK;
    rc = em_table_find(r->txn, r->db, EM_T_STRING, (const uint8_t *)p, len,
                       id);
    if (rc == EMBER_ENOTFOUND) {
        em_err_clear();
        *id = UINT32_MAX;
        return EMBER_OK;
    }
    return rc;
}

/* ORs into ACC the stacks through every function RE matches: a walk of the
** function table, comparing string ids when RE is a literal. */
static int focus_scan(em_rtxn *r, const em_regex *re, roaring_bitmap_t *acc)
{
    MDB_cursor *cur = NULL;
    MDB_val k, d;
    uint32_t name;
    bool literal;
    int mrc, rc = literal_id(r, re, &literal, &name);

    if (rc != EMBER_OK || (literal && name == UINT32_MAX))
        return rc;
    mrc = mdb_cursor_open(r->txn, r->db->dbi[EM_T_FUNCTION], &cur);
    for (mrc = mrc ? mrc : em_val_cursor(r->db, EM_T_FUNCTION, cur, &k, &d,
                                         MDB_FIRST, &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(r->db, EM_T_FUNCTION, cur, &k, &d, MDB_NEXT,
                             &rc)) {
        roaring_bitmap_t *bm = NULL;
        bool yes;
        rc = literal ? function_names(&d, name, &yes)
                     : function_matches(r, re, &d, &yes);
        if (rc == EMBER_OK && yes)
            rc = em_bitmap_get(r->txn, r->db->dbi[EM_D_FPOST], k.mv_data,
                               k.mv_size, &bm);
        if (bm != NULL) {
            roaring_bitmap_or_inplace(acc, bm);
            roaring_bitmap_free(bm);
        }
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "focus scan");
    return rc;
}

int em_focus_stacks(em_rtxn *r, const char *regex, roaring_bitmap_t **out)
{
    em_regex *re = NULL;
    roaring_bitmap_t *acc = roaring_bitmap_create();
    int rc = acc == NULL ? em_err(EMBER_ENOMEM, "focus bitmap")
                         : em_regex_compile(regex, &re);

    *out = NULL;
    if (rc == EMBER_OK)
        rc = focus_scan(r, re, acc);
    em_regex_free(re);
    if (rc != EMBER_OK) {
        if (acc != NULL)
            roaring_bitmap_free(acc);
        return rc;
    }
    *out = acc;
    return EMBER_OK;
}

/* ---- keep sets: focus and ignore as bitsets, cached per handle ----------- */

/* Sets in the dense bitset KEEP (words for the snapshot's stacks) the bits
** of BM, or clears them when CLEAR. */
static void keep_apply(uint64_t *keep, uint32_t nstacks,
                       const roaring_bitmap_t *bm, bool clear)
{
    roaring_uint32_iterator_t it;

    roaring_init_iterator(bm, &it);
    for (; it.has_value && it.current_value < nstacks;
         roaring_advance_uint32_iterator(&it)) {
        uint32_t st = it.current_value;
        if (clear)
            keep[st >> 6] &= ~(1ull << (st & 63));
        else
            keep[st >> 6] |= 1ull << (st & 63);
    }
}

/* The stacks to keep under FOCUS and IGNORE (either may be NULL): through
** a FOCUS function and through no IGNORE function. *OUT is NULL when both
** are NULL (keep everything), else a new bitset of nstacks bits. */
static int keep_build(em_rtxn *r, const char *focus, const char *ignore,
                      uint64_t **out)
{
    uint32_t nstacks = r->next[EM_T_STACK];
    size_t words = (size_t)nstacks / 64 + 1;
    roaring_bitmap_t *bm = NULL;
    uint64_t *keep;
    int rc = EMBER_OK;

    *out = NULL;
    if (focus == NULL && ignore == NULL)
        return EMBER_OK;
    keep = em_calloc(words, sizeof *keep);
    if (keep == NULL)
        return em_err(EMBER_ENOMEM, "focus: %u stacks", nstacks);
    if (focus != NULL && (rc = em_focus_stacks(r, focus, &bm)) == EMBER_OK)
        keep_apply(keep, nstacks, bm, false);
    else if (focus == NULL)
        memset(keep, 0xff, words * sizeof *keep);
    if (rc != EMBER_OK) {
        em_err_prefix(rc, "focus");
    } else if (ignore != NULL) {
        if (bm != NULL)
            roaring_bitmap_free(bm);
        bm = NULL;
        if ((rc = em_focus_stacks(r, ignore, &bm)) == EMBER_OK)
            keep_apply(keep, nstacks, bm, true);
        else
            em_err_prefix(rc, "ignore");
    }
    if (bm != NULL)
        roaring_bitmap_free(bm);
    if (rc != EMBER_OK) {
        em_free(keep);
        return rc;
    }
    *out = keep;
    return EMBER_OK;
}

static bool str_same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

void em_kcache_init(em_kcache *k)
{
    memset(k, 0, sizeof *k);
    pthread_mutex_init(&k->mu, NULL);
}

static void kslot_clear(em_kslot *s)
{
    em_free(s->focus);
    em_free(s->ignore);
    em_free(s->bits);
    memset(s, 0, sizeof *s);
}

void em_kcache_free(em_kcache *k)
{
    for (int i = 0; i < EM_KCACHE_SLOTS; i++)
        kslot_clear(&k->slot[i]);
    pthread_mutex_destroy(&k->mu);
}

/* What a keep set was made for: its source (0 for the head, else a
** block's id) and the table sizes it saw, with the regexes. */
typedef struct kkey {
    uint64_t owner;
    uint32_t nfunctions, nstacks;
    const char *focus, *ignore;
} kkey;

static bool kslot_is(const em_kslot *s, const kkey *k)
{
    return s->bits != NULL && s->owner == k->owner &&
           s->nfunctions == k->nfunctions && s->nstacks == k->nstacks &&
           str_same(s->focus, k->focus) && str_same(s->ignore, k->ignore);
}

static size_t keep_words(uint32_t nstacks)
{
    return (size_t)nstacks / 64 + 1;
}

static size_t kbucket(uint64_t owner)
{
    return (size_t)((owner * 0x9e3779b97f4a7c15ull) >> (64 - EM_KCACHE_BITS));
}

/* Takes slot SL out of its owner's bucket. */
static void kcache_unlink(em_kcache *k, em_kslot *sl)
{
    uint16_t *p = &k->head[kbucket(sl->owner)];
    uint16_t me = (uint16_t)(sl - k->slot + 1);

    while (*p != 0 && *p != me)
        p = &k->slot[*p - 1].next;
    if (*p == me)
        *p = sl->next;
    sl->next = 0;
}

/* A copy of the cached set for K in *BITS with its *ID; *BITS stays NULL
** when there is none. */
static int kcache_get(em_kcache *kc, const kkey *k, uint64_t **bits,
                      uint64_t *id)
{
    size_t words = keep_words(k->nstacks);
    int rc = EMBER_OK;

    *bits = NULL;
    pthread_mutex_lock(&kc->mu);
    for (uint16_t i = kc->head[kbucket(k->owner)]; i != 0;
         i = kc->slot[i - 1].next) {
        em_kslot *sl = &kc->slot[i - 1];
        if (!kslot_is(sl, k))
            continue;
        sl->used = ++kc->tick;
        *id = sl->id;
        if ((*bits = em_malloc(words * sizeof **bits)) != NULL)
            memcpy(*bits, sl->bits, words * sizeof **bits);
        else
            rc = em_err(EMBER_ENOMEM, "focus: %u stacks", k->nstacks);
        break;
    }
    pthread_mutex_unlock(&kc->mu);
    return rc;
}

static size_t kslot_bytes(const em_kslot *s)
{
    return s->bits != NULL ? keep_words(s->nstacks) * sizeof *s->bits : 0;
}

/* An empty slot for a set of BYTES: the least recently used ones are
** emptied until one is free and the sets fit EM_KCACHE_BYTES with it. */
static em_kslot *kcache_evict(em_kcache *k, size_t bytes)
{
    em_kslot *free_sl = NULL;

    for (;;) {
        em_kslot *lru = NULL;
        for (int i = 0; i < EM_KCACHE_SLOTS; i++) {
            em_kslot *sl = &k->slot[i];
            if (sl->bits == NULL)
                free_sl = free_sl != NULL ? free_sl : sl;
            else if (lru == NULL || sl->used < lru->used)
                lru = sl;
        }
        if ((free_sl != NULL && k->bytes + bytes <= EM_KCACHE_BYTES) ||
            lru == NULL)
            return free_sl != NULL ? free_sl : &k->slot[0];
        k->bytes -= kslot_bytes(lru);
        kcache_unlink(k, lru);
        kslot_clear(lru);
    }
}

/* A new id for the set BITS made for K, and a copy of it in the least
** recently used slot (best effort). */
static uint64_t kcache_put(em_kcache *kc, const kkey *key,
                           const uint64_t *bits)
{
    em_kcache *k = kc;
    const char *focus = key->focus, *ignore = key->ignore;
    size_t words = keep_words(key->nstacks);
    em_kslot n = { NULL, NULL, key->nfunctions, key->nstacks,
                   em_malloc(words * sizeof *bits), 0, 0, key->owner, 0 };
    em_kslot *sl;
    uint64_t id;

    if ((focus != NULL && (n.focus = em_strdup(focus)) == NULL) ||
        (ignore != NULL && (n.ignore = em_strdup(ignore)) == NULL))
        kslot_clear(&n);        /* frees bits too: nothing is kept */
    if (n.bits != NULL)
        memcpy(n.bits, bits, words * sizeof *bits);
    pthread_mutex_lock(&k->mu);
    id = ++k->last_id;
    if (n.bits != NULL) {
        sl = kcache_evict(k, words * sizeof *bits);
        *sl = n;
        sl->id = id;
        sl->used = ++k->tick;
        sl->next = k->head[kbucket(key->owner)];
        k->head[kbucket(key->owner)] = (uint16_t)(sl - k->slot + 1);
        k->bytes += words * sizeof *bits;
    }
    pthread_mutex_unlock(&k->mu);
    if (n.bits == NULL) {
        em_free(n.focus);
        em_free(n.ignore);
    }
    return id;
}

int em_keep_cached(ember_db *db, uint64_t owner, uint32_t nfunctions,
                   uint32_t nstacks, const char *focus, const char *ignore,
                   em_keep_build_fn build, void *ctx, uint64_t **bits,
                   uint64_t *id)
{
    kkey k = { owner, nfunctions, nstacks, focus, ignore };
    int rc;

    *bits = NULL;
    *id = 0;
    if (focus == NULL && ignore == NULL)
        return EMBER_OK;
    rc = kcache_get(&db->kcache, &k, bits, id);
    if (rc != EMBER_OK || *bits != NULL)
        return rc;
    rc = build(ctx, focus, ignore, bits);
    if (rc == EMBER_OK)
        *id = kcache_put(&db->kcache, &k, *bits);
    return rc;
}

static int head_keep_build(void *ctx, const char *focus, const char *ignore,
                           uint64_t **bits)
{
    return keep_build(ctx, focus, ignore, bits);
}

int em_keep_get(em_rtxn *r, const char *focus, const char *ignore,
                uint64_t **bits, uint64_t *id)
{
    return em_keep_cached(r->db, r->head_gen, r->next[EM_T_FUNCTION],
                          r->next[EM_T_STACK], focus, ignore,
                          head_keep_build, r, bits, id);
}

/* ---- lookups for verify ------------------------------------------------------- */

const roaring_bitmap_t *em_staged_find(em_staged *s, const void *key,
                                       size_t klen)
{
    staged_key k = { key, klen };
    struct em_staged_ent *e = staged_find(s, em_hash64(key, klen, 0), &k);

    if (e == NULL)
        return NULL;
    staged_settle(e);
    return e->bm;
}

int em_staged_each(em_staged *s,
                   int (*fn)(void *ctx, const void *key, size_t klen,
                             const roaring_bitmap_t *bm),
                   void *ctx)
{
    struct em_staged_ent *e;
    size_t i = 0;
    int rc = EMBER_OK;

    while (rc == EMBER_OK && (e = staged_next(s, &i)) != NULL) {
        staged_settle(e);
        rc = fn(ctx, e->key, e->klen, e->bm);
    }
    return rc;
}
