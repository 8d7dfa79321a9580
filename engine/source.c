/*
** engine/source.c: the sources of a snapshot. A snapshot reads the head
** (the LMDB tables, today's data) and the immutable blocks the catalog
** names; each numbers its own strings, stacks and series from 0, and the
** snapshot lays them side by side in one virtual id space (the head
** first, at base 0, so that a database with no block reads as before).
**
** Blocks are opened once per handle and kept (em_bhold: the mapping and
** the decoded symbols are shared by every snapshot); a snapshot opens a
** block only when a question reads it (the catalog's record gives the
** sizes its ids are laid out by, and its times), then holds a reference.
** A block compaction removed from the catalog stays on disk until every
** LMDB reader that could name it has ended (engine/compact_blocks.c), so
** a snapshot may open it late.
**
** Series: the same labels may be stored in several sources. A snapshot
** gives them one canonical id, the virtual id under which it first met
** them (a hash table of label hashes, each hit confirmed by comparing the
** labels), so that a series keeps one id through every question of a
** query: a merge by a label and the graph of totals agree on it.
*/
#include <stdlib.h>

#include "engine/block.h"
#include "engine/store.h"

struct em_bhold {
    em_bhold *next;
    em_block *b;
    uint64_t id;
    unsigned refs;                  /* snapshots reading it, and the list */
    bool stale;                     /* off the list: compaction removed it,
                                    ** or the budget dropped it */
    uint64_t idle_since;            /* db->btick when it last went idle */
    size_t idle_bytes;              /* what it held then */
    pthread_mutex_t mu;             /* guards hashes' making */
    em_bhash *hashes;               /* content hashes made so far */
};

/* ---- the handle's open blocks ---------------------------------------------- */

static void bhold_unref_locked(ember_db *db, em_bhold *h)
{
    if (--h->refs > 0)
        return;
    for (em_bhold **p = &db->bopen; *p != NULL && !h->stale;
         p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    em_block_close(h->b);
    em_bhash_free(h->hashes);
    pthread_mutex_destroy(&h->mu);
    em_free(h);
}

/* What H's block holds decoded, and its content hashes: H idle or under
** h->mu, or the hashes may grow meanwhile. */
static size_t bhold_bytes(const em_bhold *h)
{
    return em_block_memory(h->b) + em_bhash_memory(h->hashes);
}

/* Drops the idle blocks (read by no snapshot, held by the list alone)
** that went idle longest ago until what the idle ones hold fits the
** handle's budget: a server that has read every block of a month keeps
** what it reads most, not the month. A later read opens a dropped block
** again. */
static void blocks_trim_locked(ember_db *db)
{
    for (;;) {
        uint64_t idle = 0;
        em_bhold *oldest = NULL, **at = NULL;
        for (em_bhold **p = &db->bopen; *p != NULL; p = &(*p)->next) {
            em_bhold *h = *p;
            if (h->refs != 1)
                continue;
            idle += h->idle_bytes;
            if (oldest == NULL || h->idle_since < oldest->idle_since)
                oldest = h, at = p;
        }
        if (oldest == NULL || idle <= db->opts.block_cache_bytes)
            return;
        *at = oldest->next;
        oldest->stale = true;       /* off the list: found by no one */
        bhold_unref_locked(db, oldest);
    }
}

static void bhold_unref(ember_db *db, em_bhold *h)
{
    pthread_mutex_lock(&db->bmu);
    if (h->refs == 2 && !h->stale) {    /* the caller's, the list's */
        h->idle_since = ++db->btick;
        h->idle_bytes = bhold_bytes(h);
        bhold_unref_locked(db, h);
        blocks_trim_locked(db);
    } else {
        bhold_unref_locked(db, h);
    }
    pthread_mutex_unlock(&db->bmu);
}

void em_blocks_memory(ember_db *db, uint64_t *open, uint64_t *bytes)
{
    *open = *bytes = 0;
    pthread_mutex_lock(&db->bmu);
    for (em_bhold *h = db->bopen; h != NULL; h = h->next) {
        pthread_mutex_lock(&h->mu);
        *bytes += bhold_bytes(h);
        pthread_mutex_unlock(&h->mu);
        (*open)++;
    }
    pthread_mutex_unlock(&db->bmu);
}

/* The block ID, held for the caller: the handle's open copy, or opened
** now from DIR/blocks and added to the list (which keeps a reference of
** its own until em_blocks_release or the block leaves the catalog). The
** file is checked against the catalog's record: same id, same footer. */
static int bhold_get(ember_db *db, const em_catalog_rec *rec,
                     em_bhold **out)
{
    uint64_t id = rec->id;
    char path[4096];
    const em_block_info *in;
    em_bhold *h;
    em_block *b = NULL;
    int rc;

    pthread_mutex_lock(&db->bmu);
    for (h = db->bopen; h != NULL && h->id != id; h = h->next)
        ;
    if (h != NULL)
        h->refs++;
    pthread_mutex_unlock(&db->bmu);
    if ((*out = h) != NULL)
        return EMBER_OK;
    em_block_path(db, id, path, sizeof path);
    if ((rc = em_block_open(path, &b)) != EMBER_OK)
        return rc;                  /* its message names the file */
    in = em_block_get_info(b);
    if (!em_catalog_agrees(rec, in, false)) {
        rc = EM_CORRUPT("block %016llx: the file is not the block the "
                        "catalog names (id %016llx, footer %08x, %llu "
                        "bytes; the catalog says footer %08x, %llu bytes, "
                        "or other table sizes)",
                        (unsigned long long)id, (unsigned long long)in->id,
                        in->footer_crc, (unsigned long long)in->file_size,
                        rec->footer_crc,
                        (unsigned long long)rec->file_size);
        em_block_close(b);
        return rc;
    }
    if ((h = em_calloc(1, sizeof *h)) == NULL) {
        em_block_close(b);
        return em_err(EMBER_ENOMEM, "block %016llx", (unsigned long long)id);
    }
    h->b = b;
    h->id = id;
    h->refs = 2;                    /* the list's and the caller's */
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_lock(&db->bmu);
    h->next = db->bopen;
    db->bopen = h;
    pthread_mutex_unlock(&db->bmu);
    *out = h;
    return EMBER_OK;
}

void em_blocks_release(ember_db *db)
{
    pthread_mutex_lock(&db->bmu);
    while (db->bopen != NULL)
        bhold_unref_locked(db, db->bopen);
    pthread_mutex_unlock(&db->bmu);
}

/* ---- a snapshot's sources ------------------------------------------------- */

static int src_push(em_rtxn *r, size_t *cap, const em_src *s)
{
    if (r->nsrc == *cap) {
        em_src *g = em_grow(r->src, cap, r->nsrc + 1, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "snapshot: %u sources", r->nsrc + 1);
        r->src = g;
    }
    r->src[r->nsrc++] = *s;
    return EMBER_OK;
}

/* Block source S as the catalog's record REC describes it, not opened. */
static void src_of_rec(em_src *s, ember_db *db, const em_catalog_rec *rec)
{
    memset(s, 0, sizeof *s);
    s->kind = EM_SRC_BLOCK;
    s->db = db;
    s->id = rec->id;
    s->footer_crc = rec->footer_crc;
    s->file_size = rec->file_size;
    s->n[EM_T_STRING] = rec->nstrings;
    s->n[EM_T_MAPPING] = rec->nmappings;
    s->n[EM_T_FUNCTION] = rec->nfunctions;
    s->n[EM_T_LOCATION] = rec->nlocations;
    s->n[EM_T_STACK] = rec->nnodes;
    s->n[EM_T_SERIES] = rec->nseries;
    s->min_time = rec->min_time;
    s->max_time = rec->max_time;
    s->resolution_ms = rec->resolution_ms;
    s->made_from = rec->made_from;
    s->level = rec->level;
}

/* Opens block source S: its file, checked against what the catalog said. */
static int src_open(em_src *s)
{
    em_catalog_rec rec = { .id = s->id, .footer_crc = s->footer_crc,
                           .file_size = s->file_size, .sized = true,
                           .nstrings = s->n[EM_T_STRING],
                           .nmappings = s->n[EM_T_MAPPING],
                           .nfunctions = s->n[EM_T_FUNCTION],
                           .nlocations = s->n[EM_T_LOCATION],
                           .nnodes = s->n[EM_T_STACK],
                           .nseries = s->n[EM_T_SERIES] };
    int rc = bhold_get(s->db, &rec, &s->hold);

    if (rc == EMBER_OK)
        s->blk = s->hold->b;
    return rc;
}

int em_src_block(em_src *s, em_block **out)
{
    int rc = s->blk != NULL ? EMBER_OK : src_open(s);

    *out = s->blk;
    return rc;
}

/* Lays the sources side by side: each table's bases, and the totals. */
static int src_bases(em_rtxn *r)
{
    for (int t = 0; t < EM_T_COUNT; t++) {
        uint64_t at = 0;
        for (uint32_t i = 0; i < r->nsrc; i++) {
            r->src[i].base[t] = (uint32_t)at;
            at += r->src[i].n[t];
            if (at > UINT32_MAX)
                return em_err(EMBER_ELIMIT, "snapshot: more than 2^32 - 1 "
                              "%s in its %u sources (compact the database)",
                              em_table_names[t], r->nsrc);
        }
        r->vnext[t] = (uint32_t)at;
    }
    r->nsrc_stacks = 0;
    for (uint32_t i = 0; i < r->nsrc; i++)
        r->nsrc_stacks += r->src[i].n[EM_T_STACK] > 0;
    return EMBER_OK;
}

/* A version 1 record lacks the table sizes the snapshot lays ids out by:
** its block is opened now, and the sizes read from its footer. So is
** every block of a handle opened without LMDB's lock: its snapshots are
** not in the reader table that compaction waits on before it removes a
** dropped block's file, so they must hold their blocks from the start. */
int em_sources_add_block(em_rtxn *r, size_t *cap, const em_catalog_rec *rec)
{
    em_catalog_rec sized = *rec;
    em_bhold *h = NULL;
    em_src s;
    int rc;

    if (!rec->sized || r->db->nolock) {
        if ((rc = bhold_get(r->db, rec, &h)) != EMBER_OK)
            return rc;
        const em_block_info *in = em_block_get_info(h->b);
        sized.nstrings = in->nstrings;
        sized.nmappings = in->nmappings;
        sized.nfunctions = in->nfunctions;
        sized.nlocations = in->nlocations;
        sized.nnodes = in->nnodes;
        sized.nseries = in->nseries;
    }
    src_of_rec(&s, r->db, &sized);
    if (h != NULL) {
        s.hold = h;
        s.blk = h->b;
    }
    if ((rc = src_push(r, cap, &s)) != EMBER_OK && h != NULL)
        bhold_unref(r->db, h);
    return rc;
}

/* Drops the handle's own reference to every open block R's catalog no
** longer names: compaction removed it, and no later snapshot will name
** it again (ids are never reused); snapshots still reading it keep it
** open until they end. */
static void blocks_forget(em_rtxn *r)
{
    ember_db *db = r->db;

    pthread_mutex_lock(&db->bmu);
    for (em_bhold **p = &db->bopen; *p != NULL;) {
        em_bhold *h = *p;
        bool named = false;
        for (uint32_t i = 1; i < r->nsrc && !named; i++)
            named = r->src[i].id == h->id;
        if (named || h->stale) {
            p = &h->next;
            continue;
        }
        h->stale = true;            /* off the list: found by no one */
        *p = h->next;
        if (--h->refs == 0) {
            em_block_close(h->b);
            em_bhash_free(h->hashes);
            pthread_mutex_destroy(&h->mu);
            em_free(h);
        }
    }
    pthread_mutex_unlock(&db->bmu);
}

int em_sources_open(em_rtxn *r, bool blocks)
{
    em_src head = { .kind = EM_SRC_HEAD, .min_time = INT64_MIN,
                    .max_time = INT64_MAX };
    size_t cap = 0;
    int rc;

    memcpy(head.n, r->next, sizeof head.n);
    rc = src_push(r, &cap, &head);
    if (rc == EMBER_OK && blocks)
        rc = em_catalog_each(r, &cap);
    if (rc == EMBER_OK)
        rc = src_bases(r);
    if (rc == EMBER_OK && blocks)
        blocks_forget(r);
    return rc;
}

static inline void canon_free(em_canon_tab *t);

void em_sources_close(em_rtxn *r)
{
    em_canon_free(r->canon);
    r->canon = NULL;
    for (uint32_t i = 0; i < r->nsrc; i++) {
        if (r->src[i].hold != NULL)
            bhold_unref(r->db, r->src[i].hold);
        em_free(r->src[i].scanon);
    }
    em_free(r->src);
    r->src = NULL;
    r->nsrc = 0;
    canon_free(&r->scanon);
}

int em_src_find(const em_rtxn *r, int table, uint32_t vid, uint32_t *src,
                uint32_t *local)
{
    uint32_t lo = 0, hi = r->nsrc;

    if (vid >= r->vnext[table])
        return em_err(EMBER_ENOTFOUND, "%s %u: no such id",
                      em_table_names[table], vid);
    while (hi - lo > 1) {           /* the last source whose base <= vid */
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->src[mid].base[table] <= vid)
            lo = mid;
        else
            hi = mid;
    }
    *src = lo;
    *local = vid - r->src[lo].base[table];
    return EMBER_OK;
}

bool em_src_overlaps(const em_src *s, int64_t from, int64_t to)
{
    return s->max_time >= from && s->min_time <= to;
}

/* ---- series of a block ------------------------------------------------------ */

static int bsyms(em_src *s, const em_block_syms **out)
{
    em_block *b;
    int rc = em_src_block(s, &b);

    return rc == EMBER_OK ? em_block_symbols(b, out) : rc;
}

/* The strings, series and labels of S: what a label matcher or a series'
** labels need, without the stack tree. */
static int bnames(em_src *s, const em_block_syms **out)
{
    em_block *b;
    int rc = em_src_block(s, &b);

    return rc == EMBER_OK ? em_block_names(b, out) : rc;
}

static const char *bstr(const em_block_syms *y, uint32_t id)
{
    return y->str_bytes + y->str_off[id];
}

/* The series of block S that hold NAME=VALUE, ORed into ACC. */
static int bpost_or(em_src *s, const char *name, const char *value,
                    roaring_bitmap_t *acc)
{
    roaring_bitmap_t *bm = NULL;
    em_block *b;
    int rc = em_src_block(s, &b);

    if (rc == EMBER_OK)
        rc = em_block_postings(b, name, value, &bm);

    if (rc == EMBER_OK)
        roaring_bitmap_or_inplace(acc, bm);
    if (bm != NULL)
        roaring_bitmap_free(bm);
    return rc;
}

/* The series of block S whose label NAME has a value RE matches (every
** value: RE NULL), ORed into ACC. */
static int bpost_union(em_src *s, const char *name, const em_regex *re,
                       roaring_bitmap_t *acc)
{
    const em_block_syms *y;
    uint32_t *vals = NULL;
    size_t n = 0;
    int rc = bnames(s, &y);

    if (rc == EMBER_OK)
        rc = em_block_label_values(s->blk, name, &vals, &n);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        const char *v = bstr(y, vals[i]);
        size_t len = y->str_off[vals[i] + 1] - y->str_off[vals[i]] - 1;
        if (re == NULL || em_regex_match(re, v, len))
            rc = bpost_or(s, name, v, acc);
    }
    em_free(vals);
    return rc;
}

/* The positive form of matcher M over block S (see matcher_positive in
** engine/postings.c: the same rules, "" matching the series that lack the
** label). */
static int bmatch_positive(em_src *s, const ember_matcher *m,
                           const roaring_bitmap_t *all, roaring_bitmap_t *pos)
{
    bool re = m->op == EMBER_MATCH_RE || m->op == EMBER_MATCH_NRE;
    em_regex *rx = NULL;
    bool empty;
    int rc = EMBER_OK;

    if (re && (rc = em_regex_compile(m->value, &rx)) != EMBER_OK)
        return em_err_prefix(rc, "matcher %s", m->name);
    rc = re ? bpost_union(s, m->name, rx, pos)
            : bpost_or(s, m->name, m->value, pos);
    empty = re ? em_regex_match(rx, "", 0) : m->value[0] == '\0';
    if (rc == EMBER_OK && empty) {
        roaring_bitmap_t *has = roaring_bitmap_create(), *lacking = NULL;
        if (has == NULL)
            rc = em_err(EMBER_ENOMEM, "matcher bitmap");
        if (rc == EMBER_OK)
            rc = bpost_union(s, m->name, NULL, has);
        if (rc == EMBER_OK &&
            (lacking = roaring_bitmap_andnot(all, has)) == NULL)
            rc = em_err(EMBER_ENOMEM, "matcher bitmap");
        if (lacking != NULL) {
            roaring_bitmap_or_inplace(pos, lacking);
            roaring_bitmap_free(lacking);
        }
        if (has != NULL)
            roaring_bitmap_free(has);
    }
    em_regex_free(rx);
    return rc;
}

static int bmatch_apply(void *ctx, const ember_matcher *m,
                        const roaring_bitmap_t *all, roaring_bitmap_t *acc)
{
    em_src *s = ctx;
    roaring_bitmap_t *pos = roaring_bitmap_create();
    int rc = pos == NULL ? em_err(EMBER_ENOMEM, "matcher bitmap")
                         : em_matcher_check(m);

    if (rc == EMBER_OK)
        rc = bmatch_positive(s, m, all, pos);
    if (rc == EMBER_OK) {
        if (m->op == EMBER_MATCH_NEQ || m->op == EMBER_MATCH_NRE)
            roaring_bitmap_andnot_inplace(acc, pos);
        else
            roaring_bitmap_and_inplace(acc, pos);
    }
    if (pos != NULL)
        roaring_bitmap_free(pos);
    return rc;
}

static int block_select(em_src *s, const ember_selector *sel,
                        roaring_bitmap_t **out)
{
    int rc = em_select_with(s->n[EM_T_SERIES], sel, bmatch_apply, s, out);

    return em_err_prefix(rc, "block %016llx", (unsigned long long)s->id);
}

int em_src_select(em_rtxn *r, uint32_t src, const ember_selector *sel,
                  roaring_bitmap_t **out)
{
    if (r->src[src].kind == EM_SRC_HEAD)
        return em_select_series(r, sel, out);
    return block_select(&r->src[src], sel, out);
}

static int head_series(em_rtxn *r, uint32_t id, const char **type,
                       ember_label *labels, size_t *n)
{
    em_series_rec rec;
    const uint8_t *p;
    size_t len;
    int rc = em_table_get(r->txn, r->db, EM_T_SERIES, id, &p, &len);

    if (rc == EMBER_OK)
        rc = em_series_decode(p, len, &rec);
    for (uint32_t i = 0; i <= 2 * rec.nlabels && rc == EMBER_OK; i++) {
        uint32_t sid = i == 0 ? rec.type
                       : (i % 2 ? rec.names[i / 2] : rec.values[i / 2 - 1]);
        const char **to = i == 0 ? type : (i % 2 ? &labels[i / 2].name
                                                 : &labels[i / 2 - 1].value);
        rc = em_table_get(r->txn, r->db, EM_T_STRING, sid, &p, &len);
        if (rc == EMBER_ENOTFOUND)
            rc = EM_CORRUPT("series %u names missing string %u", id, sid);
        *to = (const char *)p;
    }
    *n = rc == EMBER_OK ? rec.nlabels : 0;
    return em_err_prefix(rc, "series %u", id);
}

static int block_series(em_src *s, uint32_t id, const char **type,
                        ember_label *labels, size_t *n)
{
    const em_block_syms *y;
    const em_bseries *se;
    int rc = bnames(s, &y);

    if (rc != EMBER_OK)
        return rc;
    if (id >= s->n[EM_T_SERIES])
        return EM_CORRUPT("block %016llx: series %u past its %u",
                          (unsigned long long)s->id, id, s->n[EM_T_SERIES]);
    se = &y->series[id];
    if (se->n > EM_MAX_LABELS)
        return EM_CORRUPT("block %016llx: series %u has %u labels",
                          (unsigned long long)s->id, id, se->n);
    *type = bstr(y, se->type);
    for (uint32_t i = 0; i < se->n; i++) {
        labels[i].name = bstr(y, y->label_names[se->first + i]);
        labels[i].value = bstr(y, y->label_values[se->first + i]);
    }
    *n = se->n;
    return EMBER_OK;
}

int em_src_series(em_rtxn *r, uint32_t src, uint32_t local,
                  const char **type, ember_label *labels, size_t *n)
{
    if (r->src[src].kind == EM_SRC_HEAD)
        return head_series(r, local, type, labels, n);
    return block_series(&r->src[src], local, type, labels, n);
}

/* ---- canonical series --------------------------------------------------------- */

struct em_canon_slot {
    uint64_t h;
    uint32_t vid;
    uint32_t used;
};

typedef struct canon_key {
    em_rtxn *r;
    const char *type;
    const ember_label *labels;
    size_t n;
    int rc;                         /* a failure while comparing */
} canon_key;

/* True when virtual series VID has K's type and labels. */
static bool canon_same(canon_key *k, uint32_t vid)
{
    ember_label l[EM_MAX_LABELS];
    const char *type;
    uint32_t src, local;
    size_t n;
    int rc = em_src_find(k->r, EM_T_SERIES, vid, &src, &local);

    if (rc == EMBER_OK)
        rc = em_src_series(k->r, src, local, &type, l, &n);
    if (rc != EMBER_OK) {
        k->rc = rc;
        return false;
    }
    if (n != k->n || strcmp(type, k->type) != 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].name, k->labels[i].name) != 0 ||
            strcmp(l[i].value, k->labels[i].value) != 0)
            return false;
    return true;
}

#define EM_HT_NAME canon
#define EM_HT_TABLE em_canon_tab
#define EM_HT_ENTRY struct em_canon_slot
#define EM_HT_KEY canon_key *
#define EM_HT_IS_FREE(e) ((e)->used == 0)
#define EM_HT_HASH(e) ((e)->h)
#define EM_HT_MATCH(e, hh, k) ((e)->h == (hh) && canon_same((k), (e)->vid))
#define EM_HT_WHAT "canonical series"
#include "engine/htab.h"

static uint64_t labels_hash(const char *type, const ember_label *l, size_t n)
{
    uint64_t h = em_hash64(type, strlen(type) + 1, 0x5e51e5);

    for (size_t i = 0; i < n; i++) {
        h = em_hash64(l[i].name, strlen(l[i].name) + 1, h);
        h = em_hash64(l[i].value, strlen(l[i].value) + 1, h);
    }
    return h;
}

int em_src_canon_series(em_rtxn *r, uint32_t src, uint32_t local,
                        uint32_t *vid)
{
    em_src *s = &r->src[src];
    ember_label l[EM_MAX_LABELS];
    canon_key k = { r, NULL, l, 0, EMBER_OK };
    struct em_canon_slot *e;
    bool found;
    uint64_t h;
    int rc;

    if (r->nsrc == 1) {             /* one source: ids are canonical */
        *vid = local;
        return EMBER_OK;
    }
    if (s->scanon == NULL) {
        s->scanon = em_malloc(((size_t)s->n[EM_T_SERIES] + 1) *
                              sizeof *s->scanon);
        if (s->scanon == NULL)
            return em_err(EMBER_ENOMEM, "series: %u", s->n[EM_T_SERIES]);
        memset(s->scanon, 0xff, ((size_t)s->n[EM_T_SERIES] + 1) *
               sizeof *s->scanon);
    }
    if ((*vid = s->scanon[local]) != UINT32_MAX)
        return EMBER_OK;
    if ((rc = em_src_series(r, src, local, &k.type, l, &k.n)) != EMBER_OK)
        return rc;
    h = labels_hash(k.type, l, k.n);
    e = canon_insert(&r->scanon, h, &k, &found);
    if (k.rc != EMBER_OK)
        return k.rc;
    if (e == NULL)
        return em_err_prefix(EMBER_ENOMEM, "series %u", local);
    if (!found)
        *e = (struct em_canon_slot){ h, s->base[EM_T_SERIES] + local, 1 };
    *vid = s->scanon[local] = e->vid;
    return EMBER_OK;
}

/* ---- focus and ignore over a block's tree ----------------------------------- */

/* Marks in THROUGH (one byte per node) the nodes whose stack passes
** through a function whose name or system name RE matches: a location
** matches when one of its lines does, and a node when its location or its
** parent does. Parents come before children, so one pass does. */
static int bthrough(em_src *s, const em_block_syms *y, const char *regex,
                    uint8_t *through)
{
    uint32_t nf = s->n[EM_T_FUNCTION], nl = s->n[EM_T_LOCATION];
    uint32_t nn = s->n[EM_T_STACK];
    uint8_t *fm = em_calloc((size_t)nf + nl + 1, 1), *lm = fm + nf;
    em_regex *re = NULL;
    int rc = fm == NULL ? em_err(EMBER_ENOMEM, "focus: %u functions", nf)
                        : em_regex_compile(regex, &re);

    for (uint32_t f = 0; f < nf && rc == EMBER_OK; f++) {
        const em_bfunction *fn = &y->functions[f];
        uint32_t ids[2] = { fn->name, fn->system_name };
        for (int k = 0; k < 2 && !fm[f]; k++)
            fm[f] = em_regex_match(re, bstr(y, ids[k]),
                                   y->str_off[ids[k] + 1] -
                                   y->str_off[ids[k]] - 1);
    }
    for (uint32_t l = 0; l < nl && rc == EMBER_OK; l++) {
        const em_blocation *loc = &y->locations[l];
        for (uint32_t j = 0; j < loc->n && !lm[l]; j++)
            lm[l] = fm[y->lines[loc->first + j].function];
    }
    for (uint32_t i = 0; i < nn && rc == EMBER_OK; i++)
        through[i] = (y->loc[i] != EM_BLOCK_NOLOC && lm[y->loc[i]]) |
                     (y->parent[i] != EM_BLOCK_ROOT ? through[y->parent[i]]
                                                    : 0);
    em_regex_free(re);
    em_free(fm);
    return rc;
}

static int bkeep_build(void *ctx, const char *focus, const char *ignore,
                       uint64_t **out)
{
    em_src *s = ctx;
    uint32_t nn = s->n[EM_T_STACK];
    const em_block_syms *y;
    uint8_t *tf = NULL, *ti = NULL;
    uint64_t *keep = em_calloc((size_t)nn / 64 + 1, sizeof *keep);
    int rc = keep == NULL ? em_err(EMBER_ENOMEM, "focus: %u stacks", nn)
                          : bsyms(s, &y);

    if (rc == EMBER_OK && focus != NULL &&
        ((tf = em_malloc((size_t)nn + 1)) == NULL ||
         (rc = bthrough(s, y, focus, tf)) != EMBER_OK))
        rc = em_err_prefix(tf == NULL ? EMBER_ENOMEM : rc, "focus");
    if (rc == EMBER_OK && ignore != NULL &&
        ((ti = em_malloc((size_t)nn + 1)) == NULL ||
         (rc = bthrough(s, y, ignore, ti)) != EMBER_OK))
        rc = em_err_prefix(ti == NULL ? EMBER_ENOMEM : rc, "ignore");
    for (uint32_t i = 0; i < nn && rc == EMBER_OK; i++)
        if ((tf == NULL || tf[i]) && (ti == NULL || !ti[i]))
            keep[i >> 6] |= 1ull << (i & 63);
    em_free(tf);
    em_free(ti);
    if (rc != EMBER_OK) {
        em_free(keep);
        return rc;
    }
    *out = keep;
    return EMBER_OK;
}

int em_src_keep(em_rtxn *r, uint32_t src, const char *focus,
                const char *ignore, uint64_t **bits, uint64_t *id)
{
    em_src *s = &r->src[src];

    if (s->kind == EM_SRC_HEAD)
        return em_keep_get(r, focus, ignore, bits, id);
    return em_keep_cached(r->db, s->id | 1ull << 63, s->n[EM_T_FUNCTION],
                          s->n[EM_T_STACK], focus, ignore, bkeep_build, s,
                          bits, id);
}

/* ---- a block's symbols, in virtual ids -------------------------------------- */

static int bsrc_check(em_src *s, int table, uint32_t id,
                      const em_block_syms **y)
{
    if (id >= s->n[table])
        return em_err(EMBER_ENOTFOUND, "block %016llx: %s %u: no such id",
                      (unsigned long long)s->id, em_table_names[table], id);
    return table == EM_T_STRING ? bnames(s, y) : bsyms(s, y);
}

int em_bsrc_string(em_src *s, uint32_t id, const char **str, size_t *len)
{
    const em_block_syms *y;
    int rc = bsrc_check(s, EM_T_STRING, id, &y);

    if (rc != EMBER_OK)
        return rc;
    if (str != NULL)
        *str = bstr(y, id);
    if (len != NULL)
        *len = y->str_off[id + 1] - y->str_off[id] - 1;
    return EMBER_OK;
}

int em_bsrc_mapping(em_src *s, uint32_t id, ember_mapping *out)
{
    const em_block_syms *y;
    int rc = bsrc_check(s, EM_T_MAPPING, id, &y);

    if (rc != EMBER_OK)
        return rc;
    out->start = y->mappings[id].start;
    out->limit = y->mappings[id].limit;
    out->offset = y->mappings[id].offset;
    out->file = bstr(y, y->mappings[id].file);
    out->build_id = bstr(y, y->mappings[id].build_id);
    return EMBER_OK;
}

int em_bsrc_function(em_src *s, uint32_t id, ember_function *out)
{
    const em_block_syms *y;
    int rc = bsrc_check(s, EM_T_FUNCTION, id, &y);

    if (rc != EMBER_OK)
        return rc;
    out->name = bstr(y, y->functions[id].name);
    out->system_name = bstr(y, y->functions[id].system_name);
    out->file = bstr(y, y->functions[id].file);
    out->start_line = y->functions[id].start_line;
    return EMBER_OK;
}

int em_bsrc_location(em_src *s, uint32_t id, em_arena_fn arena, void *ctx,
                     ember_location *out)
{
    const em_block_syms *y;
    const em_blocation *l;
    ember_line *lines;
    int rc = bsrc_check(s, EM_T_LOCATION, id, &y);

    if (rc != EMBER_OK)
        return rc;
    l = &y->locations[id];
    if ((lines = arena(ctx, (size_t)l->n * sizeof *lines + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "snapshot: %u lines", l->n);
    for (uint32_t i = 0; i < l->n; i++) {
        lines[i].function = s->base[EM_T_FUNCTION] +
                            y->lines[l->first + i].function;
        lines[i].line = y->lines[l->first + i].line;
    }
    out->mapping = s->base[EM_T_MAPPING] + l->mapping;
    out->address = l->address;
    out->lines = lines;
    out->nlines = l->n;
    return EMBER_OK;
}

int em_bsrc_stack(em_src *s, uint32_t id, em_arena_fn arena, void *ctx,
                  const uint32_t **locs, size_t *n)
{
    const em_block_syms *y;
    uint32_t *out, d, node = id;
    int rc = bsrc_check(s, EM_T_STACK, id, &y);

    if (rc != EMBER_OK)
        return rc;
    d = y->depth[id];
    if ((out = arena(ctx, (size_t)d * sizeof *out + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "snapshot: stack of %u", d);
    for (uint32_t i = 0; i < d; i++, node = y->parent[node])
        out[i] = s->base[EM_T_LOCATION] + y->loc[node];   /* leaf first */
    *locs = out;
    *n = d;
    return EMBER_OK;
}

int em_src_node_hashes(em_src *s, const uint32_t *local, size_t n,
                       em_h128 *out)
{
    const em_block_syms *y;
    em_block *blk;
    em_bhold *h;
    em_budget *b;
    int rc = em_src_block(s, &blk);

    if (rc != EMBER_OK)
        return rc;
    h = s->hold;
    pthread_mutex_lock(&h->mu);
    b = em_budget_swap(NULL);       /* the handle's memory, not the query's */
    rc = bsyms(s, &y);
    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = em_bhash_node(&h->hashes, y, em_block_get_info(blk), local[i],
                           &out[i]);
    em_budget_swap(b);
    pthread_mutex_unlock(&h->mu);
    return rc;
}
