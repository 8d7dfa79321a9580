/*
** fuzz/fuzz_postings.c: stored postings bitmaps on hostile bytes. Each input
** is written, as it is, as the stored bitmap of label k="v" and of function
** 0's stacks in a small real database (one series with k="v", one stack
** through function 0), and then read through every door the engine reads
** postings by: em_bitmap_get, the matchers k="v", k=~"v|w" (a scan of the
** label's values) and k!="v", the focus on function 0, label values within
** a scope, and ember_verify.
**
** Invariants: nothing crashes; every door accepts the bytes or every door
** refuses them as corruption (EMBER_ECORRUPT), never some of each; what the
** doors answer follows from the one bitmap em_bitmap_get decodes; verify is
** clean exactly when that bitmap is the true one, {0}. An accepted bitmap
** must be a valid one: its values ascend, there are as many as its
** cardinality says, each is contained, it equals the bitmap built afresh
** from them, and it serializes and decodes back equal. (CRoaring's
** deserializer alone failed all of these, and crashed on crash-*: see
** engine/bitmap.c.)
*/
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_postings: %s (line %d)\n", #c, __LINE__); \
    abort(); } } while (0)

/* Values walked at most: a few input bytes can hold a run of 2^32. */
#define WALK_MAX (1u << 20)

static const char post_key[] = "k\0v";      /* the posting of k="v" */
#define POST_KLEN (sizeof post_key - 1)
#define TYPE "cpu:samples:count:cpu:nanoseconds"

static ember_db *db;
static char dir[] = "/tmp/ember-fuzz-postings-XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    ember_close(db);
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* One series {k="v"} of TYPE, one profile with stack 0 = [location 0],
** location 0 = function 0 "f0": the postings the inputs replace. */
static void setup(void)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE,
                          .map_size = 16u << 20 };
    ember_function f = { .name = "f0" };
    ember_line ln = { 0, 1 };
    ember_location loc = { .address = 0x1000, .lines = &ln, .nlines = 1 };
    ember_label lab = { "k", "v" };
    ember_sample s = { 0, 1 };
    ember_profile p = { .sz = sizeof p, .type = TYPE, .labels = &lab,
                        .nlabels = 1, .time_ms = 1000, .samples = &s,
                        .nsamples = 1 };
    ember_txn *t = NULL;
    uint32_t id;

    CHECK(mkdtemp(dir) != NULL);
    CHECK(ember_open(dir, &o, &db) == EMBER_OK);
    atexit(teardown);
    CHECK(ember_txn_begin(db, &t) == EMBER_OK);
    CHECK(ember_intern_function(t, &f, &id) == EMBER_OK && id == 0);
    CHECK(ember_intern_location(t, &loc, &id) == EMBER_OK && id == 0);
    CHECK(ember_intern_stack(t, &id, 1, &s.stack) == EMBER_OK &&
          s.stack == 0);
    CHECK(ember_txn_append(t, &p) == EMBER_OK);
    CHECK(ember_txn_commit(t) == EMBER_OK);
}

/* Stores the N bytes at P as both postings, as a writer's LMDB put would,
** with their checksums: the bitmap reader, not the checksum, must refuse
** what is not a bitmap. */
static void store(const uint8_t *p, size_t n)
{
    uint32_t fn = 0;
    MDB_val k = { POST_KLEN, (void *)post_key }, fk = { sizeof fn, &fn };
    MDB_txn *txn;

    CHECK(mdb_txn_begin(db->env, NULL, 0, &txn) == MDB_SUCCESS);
    CHECK(em_val_put(txn, db, EM_D_POST, &k, p, n, 0) == MDB_SUCCESS);
    CHECK(em_val_put(txn, db, EM_D_FPOST, &fk, p, n, 0) == MDB_SUCCESS);
    CHECK(mdb_txn_commit(txn) == MDB_SUCCESS);
}

/* ---- an accepted bitmap must be a valid one ---------------------------------- */

/* Walks BM: ascending, each contained, as many as its cardinality. Small
** enough bitmaps must also equal the bitmap of their values made afresh. */
static void check_values(const roaring_bitmap_t *bm)
{
    uint64_t card = roaring_bitmap_get_cardinality(bm), n = 0;
    roaring_bitmap_t *fresh = roaring_bitmap_create();
    roaring_uint32_iterator_t it;
    uint32_t prev = 0;

    CHECK(fresh != NULL);
    roaring_init_iterator(bm, &it);
    for (; it.has_value && n < WALK_MAX; roaring_advance_uint32_iterator(&it)) {
        CHECK(n == 0 || it.current_value > prev);
        CHECK(roaring_bitmap_contains(bm, it.current_value));
        roaring_bitmap_add(fresh, it.current_value);
        prev = it.current_value;
        n++;
    }
    CHECK(n == WALK_MAX || (!it.has_value && n == card));
    CHECK(roaring_bitmap_is_empty(bm) == (card == 0));
    if (n < WALK_MAX) {
        roaring_bitmap_run_optimize(fresh);
        CHECK(roaring_bitmap_equals(bm, fresh));
    }
    roaring_bitmap_free(fresh);
}

/* BM serialized as the writer does (engine/postings.c) decodes equal. */
static void check_round_trip(const roaring_bitmap_t *bm)
{
    size_t n = roaring_bitmap_portable_size_in_bytes(bm);
    char *buf = malloc(n + 1);
    roaring_bitmap_t *again;

    CHECK(buf != NULL);
    CHECK(roaring_bitmap_portable_serialize(bm, buf) == n);
    again = roaring_bitmap_portable_deserialize_safe(buf, n);
    CHECK(again != NULL && roaring_bitmap_equals(bm, again));
    roaring_bitmap_free(again);
    free(buf);
}

/* ---- every door agrees ------------------------------------------------------- */

/* The series {k OP VALUE} selects; *OUT NULL unless EMBER_OK. */
static int select_k(em_rtxn *r, int op, const char *value,
                    roaring_bitmap_t **out)
{
    ember_matcher m = { "k", value, op };
    ember_selector sel = { .sz = sizeof sel, .matchers = &m, .nmatchers = 1 };

    return em_select_series(r, &sel, out);
}

/* Door RC answered OUT (NULL unless EMBER_OK); WANT is what BM implies,
** or NULL when em_bitmap_get refused the bytes. Frees OUT and WANT. */
static void agree(int rc, roaring_bitmap_t *out, roaring_bitmap_t *want)
{
    CHECK(rc == (want != NULL ? EMBER_OK : EMBER_ECORRUPT));
    CHECK(want == NULL || roaring_bitmap_equals(out, want));
    if (out != NULL)
        roaring_bitmap_free(out);
    if (want != NULL)
        roaring_bitmap_free(want);
}

static roaring_bitmap_t *and_all(const roaring_bitmap_t *bm, bool andnot)
{
    roaring_bitmap_t *all = roaring_bitmap_from_range(0, 1, 1), *r;

    CHECK(all != NULL);
    r = bm == NULL ? NULL : andnot ? roaring_bitmap_andnot(all, bm)
                                   : roaring_bitmap_and(all, bm);
    roaring_bitmap_free(all);
    return r;
}

/* Label values of k among the series of TYPE: "v" when BM holds series 0. */
static void check_label_values(const roaring_bitmap_t *bm)
{
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };
    ember_strlist *l = NULL;
    int rc = ember_label_values(db, "k", &sel, &l);

    CHECK(rc == (bm != NULL ? EMBER_OK : EMBER_ECORRUPT));
    if (bm != NULL)
        CHECK(ember_strlist_count(l) ==
              (roaring_bitmap_contains(bm, 0) ? 1u : 0u));
    ember_strlist_free(l);
}

/* Verify is clean exactly when both stored bitmaps are {0}. */
static void check_verify(const roaring_bitmap_t *bm)
{
    roaring_bitmap_t *truth = roaring_bitmap_from_range(0, 1, 1);
    uint64_t problems = 0;
    int rc = ember_verify(db, NULL, NULL, &problems);
    bool clean = bm != NULL && roaring_bitmap_equals(bm, truth);

    CHECK(rc == (clean ? EMBER_OK : EMBER_ECORRUPT));
    CHECK(clean ? problems == 0 : problems == 2);
    roaring_bitmap_free(truth);
}

static void check_doors(em_rtxn *r, const roaring_bitmap_t *bm)
{
    roaring_bitmap_t *out = NULL;
    int rc;

    rc = select_k(r, EMBER_MATCH_EQ, "v", &out);
    agree(rc, out, and_all(bm, false));
    rc = select_k(r, EMBER_MATCH_RE, "v|w", &out);
    agree(rc, out, and_all(bm, false));
    rc = select_k(r, EMBER_MATCH_NEQ, "v", &out);
    agree(rc, out, and_all(bm, true));
    rc = em_focus_stacks(r, "f0", &out);
    agree(rc, out, bm != NULL ? roaring_bitmap_copy(bm) : NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    roaring_bitmap_t *bm = NULL;
    em_rtxn r;
    int rc;

    if (db == NULL)
        setup();
    store(data, size);
    CHECK(em_rtxn_begin(db, &r) == EMBER_OK);
    rc = em_bitmap_get(r.txn, db->dbi[EM_D_POST], post_key, POST_KLEN, &bm);
    CHECK(rc == EMBER_OK ? bm != NULL : rc == EMBER_ECORRUPT && bm == NULL);
    if (bm != NULL) {
        check_values(bm);
        check_round_trip(bm);
    }
    check_doors(&r, bm);
    em_rtxn_end(&r);
    check_label_values(bm);
    check_verify(bm);
    if (bm != NULL)
        roaring_bitmap_free(bm);
    return 0;
}
