/*
** tests/unit/test_ccache.c: the decoded-chunk cache (engine/ccache.c) and
** the focus-aware read path (engine/read.c). A database of sealed and head
** chunks is read through a handle with the cache and through one without
** (EMBER_CACHE_OFF), and every answer must be the same, byte for byte:
**  - on a miss, on the second miss (when a chunk is admitted), on a hit,
**    and when a narrower range adds a part to a cached chunk;
**  - with focus and ignore (literal and non-literal regexes, the keep set
**    cache and the per-chunk memos of kept stacks);
**  - under a budget so small that every query evicts;
**  - after a sealed chunk is rewritten under the same key (a new checksum:
**    never served stale) and after a head grows;
**  - after new stacks and functions are appended (the keep set cache is
**    keyed by the table sizes);
**  - with reader threads running while a writer appends and seals;
**  - with each allocation of a cached merge failing in turn.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "engine/store.h"
#include "tests/unit/common/testutil.h"

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"
#define T0 1732170000000LL
#define STEP 10000LL                /* 10 s between profiles */
#define NSTACKS 40
#define NSERIES 5
#define NPROF 90                    /* per series: 15 minutes */
#define NHEAD 6                     /* more per series, left unsealed */
#define MAXST 256                   /* stacks in an answer, at most */
#define MAX_STEPS 100000

static const char *const svc[NSERIES] = { "a", "b", "c", "d", "e" };

typedef struct fixture {
    char *dir;
    ember_db *db;                   /* the cache on (the default) */
    ember_db *ref;                  /* EMBER_CACHE_OFF */
    uint32_t stacks[NSTACKS];
} fixture;

/* ---- the database ------------------------------------------------------- */

static ember_db *open_with(const char *dir, uint64_t cache_bytes)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE,
                          .chunk_max_profiles = 16,
                          .cache_bytes = cache_bytes };
    ember_db *db = NULL;

    assert_int_equal(ember_open(dir, &o, &db), EMBER_OK);
    return db;
}

/* Profile K of series S: a dozen stacks with values that vary by both. */
static ember_profile make_profile(fixture *f, int s, int k, ember_sample *smp)
{
    static ember_label l[1];
    size_t n = 0;

    l[0] = (ember_label){ "service", svc[s] };
    for (int i = 0; i < NSTACKS; i++)
        if ((i * 7 + k + s) % 3 == 0 && n < 16)
            smp[n++] = (ember_sample){ f->stacks[i],
                                       (int64_t)(k * 13 + i * 101 + s) };
    return tu_profile(CPU, l, 1, T0 + k * STEP + s, smp, n);
}

static void fill(fixture *f)
{
    ember_db *db = open_with(f->dir, EMBER_CACHE_OFF);

    for (uint32_t i = 0; i < NSTACKS; i++)
        f->stacks[i] = tu_synthetic_stack(db, i);
    for (int k = 0; k < NPROF; k++)
        for (int s = 0; s < NSERIES; s++) {
            ember_sample smp[16];
            ember_profile p = make_profile(f, s, k, smp);
            assert_int_equal(ember_append(db, &p), EMBER_OK);
        }
    assert_int_equal(ember_seal(db), EMBER_OK);
    for (int k = NPROF; k < NPROF + NHEAD; k++)
        for (int s = 0; s < NSERIES; s++) {
            ember_sample smp[16];
            ember_profile p = make_profile(f, s, k, smp);
            assert_int_equal(ember_append(db, &p), EMBER_OK);
        }
    ember_close(db);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    f->dir = tu_tmpdir("ccache");
    fill(f);
    f->db = open_with(f->dir, 0);
    f->ref = open_with(f->dir, EMBER_CACHE_OFF);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    em_alloc_fail_at(0);
    ember_close(f->db);
    ember_close(f->ref);
    tu_rmdir(f->dir);
    free(f);
    return 0;
}

/* ---- answers ------------------------------------------------------------ */

/* Everything a merge says. */
typedef struct manswer {
    size_t n;
    uint32_t stacks[MAXST];
    int64_t values[MAXST];
    uint64_t nseries, nprofiles;
    int64_t min_time, max_time, duration, period;
} manswer;

/* Everything a totals question says, flattened. */
typedef struct tanswer {
    size_t nseries, npoints;
    uint32_t series[16];
    int64_t times[4096], values[4096];
} tanswer;

/* A question: a range and a focus and ignore (each may be 0 / NULL). */
typedef struct question {
    const char *name;
    int64_t from, to;
    const char *service, *focus, *ignore;
} question;

static ember_selector sel_of(const question *q, ember_matcher *m)
{
    ember_selector sel = { .sz = sizeof sel, .type = CPU,
                           .from_ms = q->from, .to_ms = q->to,
                           .focus = q->focus, .ignore = q->ignore };

    if (q->service != NULL) {
        *m = (ember_matcher){ "service", q->service, EMBER_MATCH_EQ };
        sel.matchers = m;
        sel.nmatchers = 1;
    }
    return sel;
}

static int merge_answer(ember_db *db, const question *q, manswer *a)
{
    ember_matcher m;
    ember_selector sel = sel_of(q, &m);
    ember_merged *mg = NULL;
    const uint32_t *st;
    const int64_t *v;
    int rc;

    memset(a, 0, sizeof *a);
    if ((rc = ember_merge(db, &sel, &mg)) != EMBER_OK)
        return rc;
    a->n = ember_merged_samples(mg, &st, &v);
    assert_true(a->n <= MAXST);
    memcpy(a->stacks, st, a->n * sizeof *st);
    memcpy(a->values, v, a->n * sizeof *v);
    ember_merged_info(mg, &a->nseries, &a->nprofiles);
    ember_merged_span(mg, &a->min_time, &a->max_time, &a->duration,
                      &a->period);
    ember_merged_free(mg);
    return EMBER_OK;
}

static int totals_answer(ember_db *db, const question *q, tanswer *a)
{
    ember_matcher m;
    ember_selector sel = sel_of(q, &m);
    ember_totals *t = NULL;
    int rc;

    memset(a, 0, sizeof *a);
    if ((rc = ember_totals_get(db, &sel, &t)) != EMBER_OK)
        return rc;
    a->nseries = ember_totals_count(t);
    assert_true(a->nseries <= 16);
    for (size_t i = 0; i < a->nseries; i++) {
        const int64_t *tm, *v;
        size_t n;
        ember_totals_series(t, i, &a->series[i], &tm, &v, &n);
        assert_true(a->npoints + n <= 4096);
        memcpy(a->times + a->npoints, tm, n * sizeof *tm);
        memcpy(a->values + a->npoints, v, n * sizeof *v);
        a->npoints += n;
    }
    ember_totals_free(t);
    return EMBER_OK;
}

/* The points of ember_select, summed by stack and counted. */
static int iter_answer(ember_db *db, const question *q, int64_t *sum,
                       uint64_t *count)
{
    ember_matcher m;
    ember_selector sel = sel_of(q, &m);
    ember_iter *it = NULL;
    ember_point p;
    int rc = ember_select(db, &sel, &it);

    *sum = 0;
    *count = 0;
    while (rc == EMBER_OK && (rc = ember_iter_next(it, &p)) == EMBER_OK) {
        *sum += p.value * (int64_t)(p.stack + 1) + p.time_ms;
        ++*count;
    }
    ember_iter_free(it);
    return rc == EMBER_DONE ? EMBER_OK : rc;
}

static void same_merge(const manswer *a, const manswer *b, const char *what)
{
    if (memcmp(a, b, sizeof *a) != 0)
        fail_msg("%s: the cached merge differs (%zu stacks, %llu profiles "
                 "against %zu, %llu)", what, a->n,
                 (unsigned long long)a->nprofiles, b->n,
                 (unsigned long long)b->nprofiles);
}

static void same_totals(const tanswer *a, const tanswer *b, const char *what)
{
    if (memcmp(a, b, sizeof *a) != 0)
        fail_msg("%s: the cached totals differ", what);
}

static const question questions[] = {
    { "all time", 0, 0, NULL, NULL, NULL },
    { "one series", 0, 0, "c", NULL, NULL },
    { "a range through chunks", T0 + 5 * STEP, T0 + 70 * STEP, NULL,
      NULL, NULL },
    { "a range into the head", T0 + 85 * STEP, T0 + 200 * STEP, "b", NULL,
      NULL },
    { "a literal focus", 0, 0, NULL, "fn_7", NULL },
    { "a regex focus", T0 + 33 * STEP, T0 + 93 * STEP, NULL, "fn_(7|13)",
      NULL },
    { "an ignore", 0, 0, NULL, NULL, "fn_3" },
    { "focus and ignore", T0, T0 + 50 * STEP, "d", "fn_1.*", "fn_11" },
    { "a focus on nothing", 0, 0, NULL, "no_such_function", NULL },
};

#define NQ (sizeof questions / sizeof questions[0])

/* Asks every question of DB and of the reference, ROUNDS times. */
static void all_agree(fixture *f, ember_db *db, int rounds)
{
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < NQ; i++) {
            const question *q = &questions[i];
            manswer *ma = malloc(sizeof *ma), *mb = malloc(sizeof *mb);
            tanswer *ta = malloc(sizeof *ta), *tb = malloc(sizeof *tb);
            int64_t sa, sb;
            uint64_t ca, cb;

            assert_true(ma && mb && ta && tb);
            assert_int_equal(merge_answer(db, q, ma), EMBER_OK);
            assert_int_equal(merge_answer(f->ref, q, mb), EMBER_OK);
            same_merge(ma, mb, q->name);
            assert_int_equal(totals_answer(db, q, ta), EMBER_OK);
            assert_int_equal(totals_answer(f->ref, q, tb), EMBER_OK);
            same_totals(ta, tb, q->name);
            assert_int_equal(iter_answer(db, q, &sa, &ca), EMBER_OK);
            assert_int_equal(iter_answer(f->ref, q, &sb, &cb), EMBER_OK);
            assert_int_equal(sa, sb);
            assert_int_equal(ca, cb);
            free(ma);
            free(mb);
            free(ta);
            free(tb);
        }
}

static void stats_of(ember_db *db, ember_stats *st)
{
    memset(st, 0, sizeof *st);
    st->sz = sizeof *st;
    assert_int_equal(ember_stats_get(db, st), EMBER_OK);
}

/* ---- tests -------------------------------------------------------------- */

/* Misses, admissions and hits all give what the uncached handle gives,
** and the counters say the cache worked. */
static void test_hits_equal_misses(void **state)
{
    fixture *f = *state;
    ember_stats st, off;

    all_agree(f, f->db, 4);
    stats_of(f->db, &st);
    assert_true(st.cache_hits > st.cache_misses);
    assert_true(st.cache_entries > 0);
    assert_true(st.cache_bytes > 0 && st.cache_bytes <= (256u << 20));
    stats_of(f->ref, &off);
    assert_int_equal(off.cache_hits + off.cache_misses + off.cache_bytes +
                     off.cache_entries, 0);
}

/* A chunk is kept on its second miss: a one-shot query leaves nothing. */
static void test_admission(void **state)
{
    fixture *f = *state;
    ember_db *db = open_with(f->dir, 0);
    ember_stats st;
    manswer a;

    assert_int_equal(merge_answer(db, &questions[0], &a), EMBER_OK);
    stats_of(db, &st);
    assert_int_equal(st.cache_hits, 0);
    assert_int_equal(st.cache_entries, 0);
    assert_int_equal(merge_answer(db, &questions[0], &a), EMBER_OK);
    stats_of(db, &st);
    assert_int_equal(st.cache_hits, 0);
    assert_true(st.cache_entries > 0);
    assert_int_equal(merge_answer(db, &questions[0], &a), EMBER_OK);
    stats_of(db, &st);
    assert_int_equal(st.cache_hits, st.cache_entries);
    ember_close(db);
}

/* A budget too small for the working set: every query evicts, answers
** stay right, the cache stays within its budget. */
static void test_tiny_budget(void **state)
{
    fixture *f = *state;
    uint64_t budgets[] = { 1, 4096, 16384 };

    for (size_t b = 0; b < 3; b++) {
        ember_db *db = open_with(f->dir, budgets[b]);
        ember_stats st;
        all_agree(f, db, 3);
        stats_of(db, &st);
        assert_true(st.cache_bytes <= budgets[b]);
        if (b == 0)
            assert_int_equal(st.cache_entries, 0);
        ember_close(db);
    }
}

/* The first sealed chunk of service S, its key and bytes copied out. */
static void first_sealed(MDB_txn *txn, ember_db *db, uint32_t series,
                         uint8_t key[EM_CHUNK_KEY_LEN], em_buf *val)
{
    MDB_cursor *cur;
    MDB_val k = { EM_CHUNK_KEY_LEN, key }, d;
    int mrc, rc = EMBER_OK;

    em_chunk_key(key, series, INT64_MIN, 0);
    assert_int_equal(mdb_cursor_open(txn, db->dbi[EM_D_CHUNK], &cur), 0);
    for (mrc = em_val_cursor(db, EM_D_CHUNK, cur, &k, &d, MDB_SET_RANGE, &rc);
         mrc == 0;
         mrc = em_val_cursor(db, EM_D_CHUNK, cur, &k, &d, MDB_NEXT, &rc)) {
        em_chunk_header h;
        assert_int_equal(em_chunk_header_read(d.mv_data, d.mv_size, &h), 0);
        if (!(h.flags & EM_CHUNK_HEAD))
            break;
    }
    assert_int_equal(mrc, 0);
    memcpy(key, k.mv_data, EM_CHUNK_KEY_LEN);
    val->len = 0;
    assert_int_equal(em_buf_reserve(val, d.mv_size), EMBER_OK);
    memcpy(val->p, d.mv_data, d.mv_size);
    val->len = d.mv_size;
    mdb_cursor_close(cur);
}

/* Rewrites the first sealed chunk of series SERIES under its own key, as
** a compaction would, with one value raised so that the chunk keeps its
** length (the cache keys by length too): only the checksum tells the two
** apart. */
static void rewrite_chunk(ember_db *db, uint32_t series)
{
    uint8_t key[EM_CHUNK_KEY_LEN];
    em_buf old = { 0 }, neu = { 0 };
    em_chunk c;
    em_chunk_profile *ps;
    em_wtxn w;
    MDB_val k = { EM_CHUNK_KEY_LEN, key };
    int64_t v0;

    pthread_mutex_lock(&db->wlock);
    assert_int_equal(em_wtxn_begin(db, &w), EMBER_OK);
    first_sealed(w.txn, db, series, key, &old);
    assert_int_equal(em_chunk_decode(NULL, old.p, old.len, EM_COL_ALL, &c),
                     EMBER_OK);
    assert_int_equal(em_chunk_transpose(&c, &ps), EMBER_OK);
    for (uint32_t i = 0; i < c.h.nprofiles && neu.len != old.len; i++)
        for (uint32_t j = 0; j < ps[i].n && neu.len != old.len; j++)
            for (int64_t delta = -3; delta <= 3 && neu.len != old.len;
                 delta++) {
                int64_t *v = (int64_t *)&ps[i].values[j];
                v0 = *v;
                *v += delta;
                neu.len = 0;
                if (delta != 0)
                    assert_int_equal(em_chunk_encode(NULL, ps,
                                     c.h.nprofiles, 0, 3, &neu), EMBER_OK);
                if (neu.len != old.len)
                    *v = v0;
            }
    assert_int_equal(neu.len, old.len);
    assert_int_not_equal(memcmp(old.p + 8, neu.p + 8, 4), 0);
    assert_int_equal(em_val_put(w.txn, db, EM_D_CHUNK, &k, neu.p, neu.len, 0),
                     0);
    assert_int_equal(em_wtxn_commit(&w), EMBER_OK);
    pthread_mutex_unlock(&db->wlock);
    em_free(ps);
    em_chunk_release(&c);
    em_buf_free(&old);
    em_buf_free(&neu);
}

static uint32_t series_of(ember_db *db, const char *service)
{
    ember_matcher m = { "service", service, EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .matchers = &m, .nmatchers = 1 };
    ember_totals *t = NULL;
    uint32_t id;

    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    ember_totals_series(t, 0, &id, NULL, NULL, NULL);
    ember_totals_free(t);
    return id;
}

/* A sealed chunk rewritten under its key while its decoded form is cached
** is read anew, and a head that grows (a new head chunk per append, none
** of them cached) is read whole every time. */
static void test_rewritten_not_stale(void **state)
{
    fixture *f = *state;
    char *dir = tu_tmpdir("ccache-rw");
    char cmd[600];
    ember_db *db, *ref;
    manswer before, after, want;
    question q = { "one series", 0, 0, "a", NULL, NULL };

    snprintf(cmd, sizeof cmd, "cp '%s'/*.mdb '%s'/", f->dir, dir);
    assert_int_equal(system(cmd), 0);
    db = open_with(dir, 0);
    for (int r = 0; r < 3; r++)
        assert_int_equal(merge_answer(db, &q, &before), EMBER_OK);
    rewrite_chunk(db, series_of(db, "a"));
    ref = open_with(dir, EMBER_CACHE_OFF);
    assert_int_equal(merge_answer(ref, &q, &want), EMBER_OK);
    assert_int_equal(merge_answer(db, &q, &after), EMBER_OK);
    same_merge(&after, &want, "after a rewrite");
    assert_int_not_equal(memcmp(&before, &after, sizeof before), 0);
    for (int k = NPROF + NHEAD; k < NPROF + NHEAD + 3; k++) {
        ember_sample smp[16];
        ember_profile p = make_profile(f, 0, k, smp);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
        for (int r = 0; r < 3; r++) {
            assert_int_equal(merge_answer(db, &q, &after), EMBER_OK);
            assert_int_equal(merge_answer(ref, &q, &want), EMBER_OK);
            same_merge(&after, &want, "after a head append");
        }
    }
    ember_close(ref);
    ember_close(db);
    tu_rmdir(dir);
}

/* A focus asked again after new stacks (and a new function) through it
** were appended sees them: the keep set cache is keyed by table sizes. */
static void test_focus_sees_new_stacks(void **state)
{
    fixture *f = *state;
    char *dir = tu_tmpdir("ccache-new");
    char cmd[600];
    const char *names[] = { "brand_new", "fn_7", "main" };
    question q = { "focus", 0, 0, "a", "fn_7", NULL };
    question q2 = { "focus", 0, 0, "a", "brand_new", NULL };
    ember_db *db, *ref;
    manswer a, b;
    ember_label l[] = { { "service", "a" } };
    ember_sample s[1];
    ember_profile p;

    snprintf(cmd, sizeof cmd, "cp '%s'/*.mdb '%s'/", f->dir, dir);
    assert_int_equal(system(cmd), 0);
    db = open_with(dir, 0);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(merge_answer(db, &q, &a), EMBER_OK);
        assert_int_equal(merge_answer(db, &q2, &b), EMBER_OK);
        assert_int_equal(b.n, 0);
    }
    s[0] = (ember_sample){ tu_stack(db, names, 3), 1000 };
    p = tu_profile(CPU, l, 1, T0 + 2000 * STEP, s, 1);
    assert_int_equal(ember_append(db, &p), EMBER_OK);
    ref = open_with(dir, EMBER_CACHE_OFF);
    assert_int_equal(merge_answer(db, &q, &a), EMBER_OK);
    assert_int_equal(merge_answer(ref, &q, &b), EMBER_OK);
    same_merge(&a, &b, "focus after new stacks");
    assert_int_equal(merge_answer(db, &q2, &a), EMBER_OK);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.values[0], 1000);
    ember_close(ref);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- the merged span ---------------------------------------------------- */

#define SP_SERIES 37                /* an odd count: unpaired runs */
#define SP_STEPS 40

/* Profile K of series S: on a shared 10 s grid, from a start that varies,
** with a duration that depends on the time alone except in series 5. */
static int64_t sp_time(int s, int k)
{
    return T0 + (int64_t)((s * 3 + k) % SP_STEPS) * STEP;
}

static int64_t sp_duration(int s, int k)
{
    return (((s * 3 + k) % SP_STEPS) % 4 + 1) * 1000000000LL +
           (s == 5 ? 7 : 0);
}

/* pprof's merged duration: each distinct (time, duration) counted once. */
static int64_t sp_want(int64_t from, int64_t to)
{
    int64_t t[SP_SERIES * SP_STEPS], d[SP_SERIES * SP_STEPS], sum = 0;
    size_t n = 0;

    for (int s = 0; s < SP_SERIES; s++)
        for (int k = 0; k < SP_STEPS; k++) {
            bool seen = false;
            int64_t tt = sp_time(s, k), dd = sp_duration(s, k);
            if ((from != 0 || to != 0) && (tt < from || tt > to))
                continue;
            for (size_t i = 0; i < n && !seen; i++)
                seen = t[i] == tt && d[i] == dd;
            if (!seen) {
                t[n] = tt;
                d[n++] = dd;
                sum += dd;
            }
        }
    return sum;
}

/* The merged duration dedupes (time, duration) across series and across
** chunks that arrive out of time order, cached or not. */
/* em_keep_cached's build for the keep-set tests: sets bit CTX's value,
** counting its calls. */
typedef struct kbuild {
    uint32_t bit, nstacks;
    int calls;
} kbuild;

static int kbuild_fn(void *ctx, const char *focus, const char *ignore,
                     uint64_t **bits)
{
    kbuild *k = ctx;

    (void)focus;
    (void)ignore;
    k->calls++;
    if ((*bits = em_calloc(k->nstacks / 64 + 1, sizeof **bits)) == NULL)
        return EMBER_ENOMEM;
    (*bits)[k->bit / 64] |= 1ull << (k->bit % 64);
    return EMBER_OK;
}

/* One source's keep set (OWNER's, over NSTACKS stacks), through the
** handle's cache; whether it was built anew. */
static bool keep_one(ember_db *db, uint64_t owner, uint32_t nstacks,
                     uint64_t *id)
{
    kbuild k = { (uint32_t)owner % nstacks, nstacks, 0 };
    uint64_t *bits = NULL;

    assert_int_equal(em_keep_cached(db, owner, 10, nstacks, "f", NULL,
                                    kbuild_fn, &k, &bits, id), EMBER_OK);
    assert_non_null(bits);
    assert_true(bits[k.bit / 64] >> (k.bit % 64) & 1);
    em_free(bits);
    return k.calls == 1;
}

/* A focus over many sources keeps a set for each (a month of 2 h blocks
** and their copies: 361), and the sets' bytes stay within
** EM_KCACHE_BYTES however large they are: the least recently used go. */
static void test_keep_sets(void **state)
{
    char *dir = tu_tmpdir("ccache-keep");
    ember_db *db = tu_open(dir, 0);
    uint64_t id, first[400];
    const uint32_t big = EM_KCACHE_BYTES / 4 * 8;  /* a quarter each */

    (void)state;
    for (uint64_t o = 1; o <= 400; o++)
        assert_true(keep_one(db, o, 1000, &first[o - 1]));
    for (int round = 0; round < 2; round++)   /* all kept: no rebuild */
        for (uint64_t o = 1; o <= 400; o++) {
            assert_false(keep_one(db, o, 1000, &id));
            assert_true(id == first[o - 1]);
        }
    /* more sources than slots: the least recently used go, the others
    ** are still found in their owners' buckets */
    for (uint64_t o = 401; o <= EM_KCACHE_SLOTS + 100; o++)
        assert_true(keep_one(db, o, 1000, &id));
    assert_true(keep_one(db, 1, 1000, &id));
    assert_false(keep_one(db, EM_KCACHE_SLOTS + 100, 1000, &id));
    assert_false(keep_one(db, 400, 1000, &id));
    for (uint64_t o = 1001; o <= 1005; o++)   /* five of a quarter each */
        assert_true(keep_one(db, o, big, &id));
    assert_true(db->kcache.bytes <= EM_KCACHE_BYTES);
    assert_false(keep_one(db, 1005, big, &id));     /* the newest stays */
    assert_true(keep_one(db, 1001, big, &id));      /* the oldest went */
    ember_close(db);
    tu_rmdir(dir);
}

static void test_span_duration(void **state)
{
    char *dir = tu_tmpdir("ccache-span");
    ember_db *db = open_with(dir, 0);
    const char *names[] = { "leaf", "main" };
    uint32_t st = tu_stack(db, names, 2);
    int64_t ranges[][2] = { { 0, 0 }, { T0 + 3 * STEP, T0 + 17 * STEP } };

    (void)state;
    for (int k = 0; k < SP_STEPS; k++)
        for (int s = 0; s < SP_SERIES; s++) {
            char name[8];
            ember_label l[] = { { "service", name } };
            ember_sample smp[] = { { st, 1 } };
            ember_profile p;
            snprintf(name, sizeof name, "s%d", s);
            p = tu_profile(CPU, l, 1, sp_time(s, k), smp, 1);
            p.duration_ns = sp_duration(s, k);
            assert_int_equal(ember_append(db, &p), EMBER_OK);
        }
    assert_int_equal(ember_seal(db), EMBER_OK);
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 2; i++) {
            question q = { "span", ranges[i][0], ranges[i][1], NULL, NULL,
                           NULL };
            manswer a;
            assert_int_equal(merge_answer(db, &q, &a), EMBER_OK);
            assert_int_equal(a.duration, sp_want(q.from, q.to));
        }
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- threads ------------------------------------------------------------ */

#define TH_READERS 4
#define TH_SERIES 3
#define TH_PROFILES 600

typedef struct th_ctx {
    ember_db *db;
    uint32_t a, b;                  /* stacks: A through fn "only_a" */
    atomic_int done;
    atomic_int bad;
} th_ctx;

/* Every profile holds A = 1 and B = 2: in any snapshot, a merge of N
** profiles sums to N and 2N, and a focus on A to N alone. */
static void *reader_main(void *arg)
{
    th_ctx *c = arg;

    for (int i = 0; !atomic_load(&c->done) || i < 50; i++) {
        ember_selector sel = { .sz = sizeof sel, .type = CPU };
        ember_merged *m = NULL;
        const uint32_t *st;
        const int64_t *v;
        uint64_t ns, np;
        size_t n;

        if (i % 3 == 1)
            sel.focus = "only_a";
        if (i % 3 == 2) {
            sel.from_ms = T0 + (i % 50) * STEP;
            sel.to_ms = sel.from_ms + 97 * STEP;
        }
        if (ember_merge(c->db, &sel, &m) != EMBER_OK) {
            c->bad++;
            continue;
        }
        n = ember_merged_samples(m, &st, &v);
        ember_merged_info(m, &ns, &np);
        for (size_t k = 0; k < n; k++)
            if ((st[k] == c->a && v[k] != (int64_t)np) ||
                (st[k] == c->b && (sel.focus != NULL || v[k] != 2 *
                                   (int64_t)np)))
                c->bad++;
        if (np > 0 && n != (sel.focus != NULL ? 1u : 2u))
            c->bad++;
        ember_merged_free(m);
    }
    return NULL;
}

static void test_threads(void **state)
{
    char *dir = tu_tmpdir("ccache-th");
    ember_db *db = open_with(dir, 24 << 10);
    const char *na[] = { "only_a", "main" }, *nb[] = { "only_b", "main" };
    th_ctx c = { .db = db };
    pthread_t th[TH_READERS];
    ember_stats st;

    (void)state;
    c.a = tu_stack(db, na, 2);
    c.b = tu_stack(db, nb, 2);
    for (int i = 0; i < TH_READERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &c), 0);
    for (int k = 0; k < TH_PROFILES; k++) {
        char name[8];
        ember_label l[] = { { "service", name } };
        ember_sample s[] = { { c.a, 1 }, { c.b, 2 } };
        ember_profile p;
        snprintf(name, sizeof name, "s%d", k % TH_SERIES);
        p = tu_profile(CPU, l, 1, T0 + (k / TH_SERIES) * STEP, s, 2);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
        if (k % 97 == 96)
            assert_int_equal(ember_seal(db), EMBER_OK);
    }
    atomic_store(&c.done, 1);
    for (int i = 0; i < TH_READERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&c.bad), 0);
    stats_of(db, &st);
    assert_true(st.cache_hits > 0);
    assert_true(st.cache_bytes <= 24 << 10);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    tu_rmdir(dir);
}

/* ---- allocation failures ------------------------------------------------ */

/* How a handle is readied before the failing run: its cache cold, primed
** (the next miss is admitted), warm, or warm without profile indexes (a
** narrower range then adds them to the entries). */
enum { COLD, PRIMED, WARM, WIDE_THEN_NARROW };
static const char *const how_name[] = { "cold", "primed", "warm",
                                        "wide then narrow" };

static void oom_case(fixture *f, const question *q, int how)
{
    question wide = *q;
    manswer *want = malloc(sizeof *want), *got = malloc(sizeof *got);
    uint64_t n;

    assert_true(want != NULL && got != NULL);
    wide.from = wide.to = 0;
    assert_int_equal(merge_answer(f->ref, q, want), EMBER_OK);
    for (n = 1; n < MAX_STEPS; n++) {
        ember_db *db = open_with(f->dir, 0);
        uint64_t start, used;
        int rc;
        for (int r = 0; r < (how == COLD ? 0 : how == PRIMED ? 1 : 2); r++)
            assert_int_equal(merge_answer(db, how == WIDE_THEN_NARROW ? &wide
                                          : q, got), EMBER_OK);
        start = em_alloc_calls();
        em_alloc_fail_at(n);
        rc = merge_answer(db, q, got);
        used = em_alloc_calls() - start;
        em_alloc_fail_at(0);
        if (rc != EMBER_OK && rc != EMBER_ENOMEM)
            fail_msg("%s: allocation %llu failing: %s", q->name,
                     (unsigned long long)n, ember_errmsg(db));
        if (rc == EMBER_OK)
            same_merge(got, want, q->name);
        /* the next query on the same cache still answers right */
        assert_int_equal(merge_answer(db, q, got), EMBER_OK);
        same_merge(got, want, q->name);
        ember_close(db);
        if (used < n)       /* the hook lay past the run's allocations */
            break;
    }
    assert_true(n < MAX_STEPS);
    fprintf(stderr, "  %s (%s): each of %llu allocations failed in turn\n",
            q->name, how_name[how], (unsigned long long)(n - 1));
    free(want);
    free(got);
}

static void test_oom(void **state)
{
    fixture *f = *state;
    question focus = { "focus in a range", T0 + 5 * STEP, T0 + 70 * STEP,
                       NULL, "fn_(7|13)", NULL };

    for (int how = COLD; how <= WIDE_THEN_NARROW; how++) {
        oom_case(f, &questions[2], how);
        oom_case(f, &focus, how);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_equal_misses),
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_tiny_budget),
        cmocka_unit_test(test_rewritten_not_stale),
        cmocka_unit_test(test_focus_sees_new_stacks),
        cmocka_unit_test(test_keep_sets),
        cmocka_unit_test(test_span_duration),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests_name("ccache", tests, setup, teardown);
}
