/*
** tests/unit/test_corrupt.c: corruption detection. Builds a database with
** sealed and head chunks, closes it, damages stored bytes through LMDB
** directly (one chunk byte at a time, a stack record, a string record, a
** postings bitmap), reopens and checks:
**  - ember_verify returns EMBER_ECORRUPT and names what and where;
**  - every query that touches the damage fails (EMBER_ECORRUPT), never
**    answering with numbers;
**  - queries that do not touch it still answer, and answer right.
** Each case restores the original bytes and checks the database is clean
** again before the next.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <lmdb.h>
#include <roaring/roaring.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ember.h"
#include "tests/unit/common/testutil.h"

#define CPU "process_cpu:samples:count:cpu:nanoseconds:delta"
#define T0 1732170000000LL
#define HOUR (3600 * 1000LL)
#define NSTACKS 6
#define NSEALED 40                  /* profiles per series, sealed hour */
#define NHEAD 10                    /* profiles per series left in the head */

static const char *const services[] = { "a", "b", "c" };

/* The database every test damages, built once (group setup). */
typedef struct fixture {
    char *dir;
    uint32_t series[3];             /* ids of service=a, b, c */
    uint32_t stacks[NSTACKS];
    int64_t total[3];               /* every value of each series, summed */
} fixture;

static fixture fx;

/* ---- building ----------------------------------------------------------- */

static void append_series(ember_db *db, int s, int64_t start, int n)
{
    ember_label l[] = { { "service", services[s] } };

    for (int k = 0; k < n; k++) {
        ember_sample smp[3] = {
            { fx.stacks[k % NSTACKS], 10 * k + s + 1 },
            { fx.stacks[(k + 2) % NSTACKS], 7 },
            { fx.stacks[(k + 3 + s) % NSTACKS], -3 * k },
        };
        ember_profile p = tu_profile(CPU, l, 1, start + k * 60000LL, smp, 3);
        assert_int_equal(ember_append(db, &p), EMBER_OK);
        fx.total[s] += smp[0].value + smp[1].value + smp[2].value;
    }
}

static uint32_t series_id(ember_db *db, const char *service)
{
    ember_matcher m = { "service", service, EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .matchers = &m, .nmatchers = 1 };
    ember_totals *t = NULL;
    uint32_t id;

    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    assert_int_equal(ember_totals_count(t), 1);
    ember_totals_series(t, 0, &id, NULL, NULL, NULL);
    ember_totals_free(t);
    return id;
}

static int setup(void **state)
{
    ember_db *db;
    ember_stats st = { .sz = sizeof st };

    (void)state;
    memset(&fx, 0, sizeof fx);
    fx.dir = tu_tmpdir("corrupt");
    {   /* one-hour windows: NSEALED profiles make exactly one sealed chunk */
        ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE,
                              .chunk_window_ms = HOUR };
        db = NULL;
        assert_int_equal(ember_open(fx.dir, &o, &db), EMBER_OK);
    }
    for (uint32_t i = 0; i < NSTACKS; i++)
        fx.stacks[i] = tu_synthetic_stack(db, i);
    for (int s = 0; s < 3; s++)
        append_series(db, s, T0, NSEALED);
    assert_int_equal(ember_seal(db), EMBER_OK);
    for (int s = 0; s < 3; s++)
        append_series(db, s, T0 + 2 * HOUR, NHEAD);
    for (int s = 0; s < 3; s++)
        fx.series[s] = series_id(db, services[s]);
    assert_int_equal(ember_stats_get(db, &st), EMBER_OK);
    assert_int_equal(st.chunks, 3);
    assert_int_equal(st.head_chunks, 3 * NHEAD);
    assert_int_equal(tu_verify(db), 0);
    ember_close(db);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(fx.dir);
    return 0;
}

/* ---- raw LMDB access ---------------------------------------------------- */

typedef struct raw {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
} raw;

/* Opens table NAME of the database for writing, behind Ember's back. */
static void raw_open(raw *r, const char *name, unsigned flags)
{
    assert_int_equal(mdb_env_create(&r->env), 0);
    assert_int_equal(mdb_env_set_maxdbs(r->env, 32), 0);
    assert_int_equal(mdb_env_open(r->env, fx.dir, 0, 0600), 0);
    assert_int_equal(mdb_txn_begin(r->env, NULL, 0, &r->txn), 0);
    assert_int_equal(mdb_dbi_open(r->txn, name, flags, &r->dbi), 0);
}

static void raw_close(raw *r)
{
    assert_int_equal(mdb_txn_commit(r->txn), 0);
    mdb_env_close(r->env);
}

/* A stored value: its key and bytes, kept to put them back. */
typedef struct saved {
    const char *table;
    unsigned flags;
    uint8_t key[64];
    size_t klen;
    uint8_t *val;
    size_t vlen;
} saved;

/* The checksum format 2 stores after a value of TABLE (docs/file-format.md,
** section 15): CRC-32 of the table's name, the key and, but for a chunk,
** the value. */
static uint32_t value_crc(const char *table, const void *key, size_t klen,
                          const void *val, size_t vlen)
{
    uLong c = crc32(0, (const Bytef *)table, (uInt)strlen(table));

    c = crc32(c, key, (uInt)klen);
    if (strcmp(table, "chunk") != 0)
        c = crc32(c, val, (uInt)vlen);
    return (uint32_t)c;
}

/* Stores VAL[VLEN] and, unless RAW_BYTES, its checksum under KEY. */
static void raw_put(raw *r, const char *table, const void *key, size_t klen,
                    const void *val, size_t vlen, bool raw_bytes)
{
    uint8_t *buf = malloc(vlen + 4);
    uint32_t crc = value_crc(table, key, klen, val, vlen);
    MDB_val k = { klen, (void *)key }, d = { vlen + (raw_bytes ? 0 : 4), buf };

    assert_non_null(buf);
    memcpy(buf, val, vlen);
    for (int i = 0; i < 4; i++)
        buf[vlen + i] = (uint8_t)(crc >> (8 * i));
    assert_int_equal(mdb_put(r->txn, r->dbi, &k, &d, 0), 0);
    free(buf);
}

/* Replaces S's value with VAL[VLEN] (S->val keeps the original) and a
** checksum that matches: the bytes a writer's bug, not a flipped bit, would
** leave, which only the decoders and verify's cross-checks can catch. */
static void damage(const saved *s, const void *val, size_t vlen)
{
    raw r;

    raw_open(&r, s->table, s->flags);
    raw_put(&r, s->table, s->key, s->klen, val, vlen, false);
    raw_close(&r);
}

/* Replaces S's stored bytes, checksum included, with VAL[VLEN]. */
static void damage_raw(const saved *s, const void *val, size_t vlen)
{
    raw r;

    raw_open(&r, s->table, s->flags);
    raw_put(&r, s->table, s->key, s->klen, val, vlen, true);
    raw_close(&r);
}

static void restore(saved *s)
{
    damage(s, s->val, s->vlen);
    free(s->val);
    s->val = NULL;
}

/* Copies the value of KEY in TABLE into S, without its checksum. */
static void save(saved *s, const char *table, unsigned flags, const void *key,
                 size_t klen)
{
    MDB_val k = { klen, (void *)key }, d;
    raw r;

    assert_true(klen <= sizeof s->key);
    s->table = table;
    s->flags = flags;
    memcpy(s->key, key, klen);
    s->klen = klen;
    raw_open(&r, table, flags);
    assert_int_equal(mdb_get(r.txn, r.dbi, &k, &d), 0);
    assert_true(d.mv_size >= 4);
    s->val = malloc(d.mv_size + 1);
    assert_non_null(s->val);
    memcpy(s->val, d.mv_data, d.mv_size);
    s->vlen = d.mv_size - 4;
    mdb_txn_abort(r.txn);
    mdb_env_close(r.env);
}

/* Finds the first chunk of SERIES that is (HEAD) or is not a head chunk;
** saves it in S and returns its time. The chunk key: series BE32, time
** BE64 with the sign bit flipped, seq BE32; header byte 5 bit 0: head. */
static int64_t find_chunk(uint32_t series, bool head, saved *s)
{
    MDB_cursor *cur;
    MDB_val k, d;
    raw r;
    int mrc;
    int64_t time = 0;
    bool found = false;

    raw_open(&r, "chunk", 0);
    assert_int_equal(mdb_cursor_open(r.txn, r.dbi, &cur), 0);
    for (mrc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); mrc == 0 && !found;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        const uint8_t *p = k.mv_data, *v = d.mv_data;
        uint32_t sid = 0;
        uint64_t t = 0;
        assert_int_equal(k.mv_size, 16);
        for (int i = 0; i < 4; i++)
            sid = (sid << 8) | p[i];
        for (int i = 0; i < 8; i++)
            t = (t << 8) | p[4 + i];
        if (sid != series || d.mv_size < 44 || (bool)(v[5] & 1) != head)
            continue;
        time = (int64_t)(t ^ (1ull << 63));
        found = true;
        s->klen = k.mv_size;
        memcpy(s->key, k.mv_data, k.mv_size);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(r.txn);
    mdb_env_close(r.env);
    assert_true(found);
    save(s, "chunk", 0, s->key, s->klen);
    return time;
}

/* ---- checks ------------------------------------------------------------- */

typedef struct problems {
    char **v;
    size_t n;
} problems;

static void on_problem(void *ctx, const char *msg)
{
    problems *p = ctx;
    char **v = realloc(p->v, (p->n + 1) * sizeof *v);

    assert_non_null(v);
    p->v = v;
    p->v[p->n++] = strdup(msg);
}

/* Runs verify: it must find damage, and some line must contain every one
** of the NEEDLES (up to 3; NULL ends the list). */
static void verify_reports(ember_db *db, const char *n1, const char *n2,
                           const char *n3)
{
    problems p = { NULL, 0 };
    uint64_t count = 0;
    bool named = false;
    int rc = ember_verify(db, on_problem, &p, &count);

    assert_int_equal(rc, EMBER_ECORRUPT);
    assert_true(count > 0);
    assert_int_equal(p.n, count);
    for (size_t i = 0; i < p.n; i++) {
        bool all = strstr(p.v[i], n1) != NULL &&
                   (n2 == NULL || strstr(p.v[i], n2) != NULL) &&
                   (n3 == NULL || strstr(p.v[i], n3) != NULL);
        named |= all;
    }
    if (!named) {
        for (size_t i = 0; i < p.n; i++)
            fprintf(stderr, "  problem: %s\n", p.v[i]);
        fail_msg("no problem names \"%s\" \"%s\" \"%s\"", n1, n2 ? n2 : "",
                 n3 ? n3 : "");
    }
    for (size_t i = 0; i < p.n; i++)
        free(p.v[i]);
    free(p.v);
}

static ember_selector sel_of(const ember_matcher *m, int64_t from, int64_t to)
{
    ember_selector s = { .sz = sizeof s, .matchers = m, .nmatchers = m ? 1 : 0,
                         .from_ms = from, .to_ms = to };
    return s;
}

/* ember_errmsg must name the damage: contain NEEDLE. */
static void message_names(ember_db *db, const char *needle)
{
    if (strstr(ember_errmsg(db), needle) == NULL)
        fail_msg("message \"%s\" does not name \"%s\"", ember_errmsg(db),
                 needle);
}

/* Every query kind over SEL must fail with EMBER_ECORRUPT, the message
** naming NEEDLE. */
static void queries_fail(ember_db *db, const ember_selector *sel,
                         const char *needle)
{
    ember_merged *m = NULL;
    ember_totals *t = NULL;
    ember_iter *it = NULL;
    ember_point pt;
    int rc;

    assert_int_equal(ember_merge(db, sel, &m), EMBER_ECORRUPT);
    assert_null(m);
    message_names(db, needle);
    assert_int_equal(ember_totals_get(db, sel, &t), EMBER_ECORRUPT);
    assert_null(t);
    message_names(db, needle);
    rc = ember_select(db, sel, &it);
    if (rc == EMBER_OK) {
        while ((rc = ember_iter_next(it, &pt)) == EMBER_OK)
            ;
        ember_iter_free(it);
    }
    assert_int_equal(rc, EMBER_ECORRUPT);
    message_names(db, needle);
}

/* The totals of service S over SEL's range: one series, the right sum. */
static void series_answers(ember_db *db, int s, int64_t from, int64_t to,
                           int64_t want)
{
    ember_matcher mt = { "service", services[s], EMBER_MATCH_EQ };
    ember_selector sel = sel_of(&mt, from, to);
    ember_merged *m = NULL;
    ember_totals *t = NULL;
    ember_iter *it = NULL;
    ember_point pt;
    const int64_t *v;
    int64_t sum = 0, isum = 0;
    size_t n;
    int rc;

    rc = ember_merge(db, &sel, &m);
    if (rc != EMBER_OK)
        fprintf(stderr, "merge: %s\n", ember_errmsg(db));
    assert_int_equal(rc, EMBER_OK);
    n = ember_merged_samples(m, NULL, &v);
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    assert_int_equal(sum, want);
    ember_merged_free(m);
    assert_int_equal(ember_totals_get(db, &sel, &t), EMBER_OK);
    assert_int_equal(ember_totals_count(t), 1);
    ember_totals_free(t);
    assert_int_equal(ember_select(db, &sel, &it), EMBER_OK);
    while ((rc = ember_iter_next(it, &pt)) == EMBER_OK)
        isum += pt.value;
    assert_int_equal(rc, EMBER_DONE);
    assert_int_equal(isum, want);
    ember_iter_free(it);
}

/* The sum of service S's profiles from the head hour only. */
static int64_t head_total(int s)
{
    int64_t sum = 0;
    for (int k = 0; k < NHEAD; k++)
        sum += 10 * k + s + 1 + 7 - 3 * k;
    return sum;
}

static void check_clean(void)
{
    ember_db *db = tu_open(fx.dir, 0);

    assert_int_equal(tu_verify(db), 0);
    for (int s = 0; s < 3; s++)
        series_answers(db, s, 0, 0, fx.total[s]);
    ember_close(db);
}

/* ---- chunks ------------------------------------------------------------- */

/* Offsets to flip in a chunk of LEN bytes: magic, flags, checksum, counts,
** time span, the column directory, the payload, the last byte. */
static size_t flip_offsets(size_t len, size_t *off)
{
    size_t n = 0;

    off[n++] = 0;
    off[n++] = 5;
    off[n++] = 9;
    off[n++] = 12;
    off[n++] = 30;
    off[n++] = 44;          /* directory entry 0: column id */
    off[n++] = 47;          /* directory entry 0: raw length */
    off[n++] = 44 + 8 * 10 - 1;
    off[n++] = 44 + 8 * 10 + (len - 44 - 80) / 2;
    off[n++] = len - 1;
    return n;
}

/* Damages the chunk of service S (head or sealed) at every flip offset
** and at a truncation, checking verify and queries each time. */
static void chunk_damage_cases(int s, bool head)
{
    uint32_t sid = fx.series[s];
    saved sv;
    int64_t t = find_chunk(sid, head, &sv);
    char where_s[32], where_t[40], where[80];
    size_t off[16], noff = flip_offsets(sv.vlen, off);
    uint8_t *buf = malloc(sv.vlen);

    assert_non_null(buf);
    assert_true(sv.vlen > 44 + 80 + 2);
    snprintf(where_s, sizeof where_s, "series %u", sid);
    snprintf(where_t, sizeof where_t, "t=%lld", (long long)t);
    snprintf(where, sizeof where, "series %u, t=%lld", sid, (long long)t);
    for (size_t i = 0; i <= noff; i++) {
        ember_matcher mine = { "service", services[s], EMBER_MATCH_EQ };
        ember_selector sel = sel_of(&mine, 0, 0), all = sel_of(NULL, 0, 0);
        ember_selector near = sel_of(&mine, t, t);
        size_t len = sv.vlen;
        ember_db *db;
        memcpy(buf, sv.val, sv.vlen);
        if (i < noff)
            buf[off[i]] ^= (uint8_t)(0x01u << (i % 8));
        else
            len -= 7;                       /* a truncated value */
        damage(&sv, buf, len);
        db = tu_open(fx.dir, 0);
        verify_reports(db, "chunk", where_s, where_t);
        queries_fail(db, &sel, where);
        queries_fail(db, &all, where);
        queries_fail(db, &near, where);
        for (int o = 0; o < 3; o++)         /* other series still answer */
            if (o != s)
                series_answers(db, o, 0, 0, fx.total[o]);
        if (!head)                          /* the head hour is intact */
            series_answers(db, s, T0 + 2 * HOUR, T0 + 3 * HOUR,
                           head_total(s));
        else                                /* sealing must not eat it */
            assert_int_equal(ember_seal(db), EMBER_ECORRUPT);
        ember_close(db);
    }
    free(buf);
    restore(&sv);
    check_clean();
}

static void test_sealed_chunk_bytes(void **state)
{
    (void)state;
    chunk_damage_cases(0, false);
    chunk_damage_cases(2, false);
}

static void test_head_chunk_bytes(void **state)
{
    (void)state;
    chunk_damage_cases(1, true);
}

/* ---- tables ------------------------------------------------------------- */

/* The id of string S in the "str" table. */
static uint32_t string_id(const char *s)
{
    MDB_cursor *cur;
    MDB_val k, d;
    raw r;
    uint32_t id = UINT32_MAX;

    raw_open(&r, "str", MDB_INTEGERKEY);
    assert_int_equal(mdb_cursor_open(r.txn, r.dbi, &cur), 0);
    for (int mrc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
        if (d.mv_size == strlen(s) + 1 + 4 &&
            memcmp(d.mv_data, s, strlen(s) + 1) == 0)
            memcpy(&id, k.mv_data, sizeof id);
    mdb_cursor_close(cur);
    mdb_txn_abort(r.txn);
    mdb_env_close(r.env);
    assert_true(id != UINT32_MAX);
    return id;
}

static void test_stack_record(void **state)
{
    uint32_t id = fx.stacks[1];
    uint8_t rec[8] = { 1, 0x9f, 0x8d, 0x06 };    /* depth 1: location 99999 */
    char who[32];
    saved sv;
    ember_db *db;

    (void)state;
    save(&sv, "stk", MDB_INTEGERKEY, &id, sizeof id);
    damage(&sv, rec, 4);
    db = tu_open(fx.dir, 0);
    snprintf(who, sizeof who, "stack %u", id);
    verify_reports(db, who, "location 99999", NULL);
    ember_close(db);
    restore(&sv);

    /* A record cut short: its varints end early. */
    save(&sv, "stk", MDB_INTEGERKEY, &id, sizeof id);
    damage(&sv, sv.val, sv.vlen - 1);
    db = tu_open(fx.dir, 0);
    verify_reports(db, who, NULL, NULL);
    ember_close(db);
    restore(&sv);
    check_clean();
}

static void test_string_record(void **state)
{
    uint32_t id = string_id("b");
    char who[32];
    saved sv;
    ember_db *db;
    ember_strlist *l = NULL;

    (void)state;
    snprintf(who, sizeof who, "string %u", id);
    save(&sv, "str", MDB_INTEGERKEY, &id, sizeof id);
    damage(&sv, sv.val, sv.vlen - 1);           /* the NUL cut off */
    db = tu_open(fx.dir, 0);
    verify_reports(db, who, "terminator", NULL);
    assert_int_equal(ember_series_labels(db, fx.series[1], &l),
                     EMBER_ECORRUPT);
    assert_null(l);
    ember_close(db);
    restore(&sv);

    save(&sv, "str", MDB_INTEGERKEY, &id, sizeof id);
    damage(&sv, "", 1);                         /* "b" became "" */
    db = tu_open(fx.dir, 0);
    verify_reports(db, who, NULL, NULL);
    ember_close(db);
    restore(&sv);
    check_clean();
}

static void test_postings_bitmap(void **state)
{
    static const char key[] = "service\0a";
    roaring_bitmap_t *bm = roaring_bitmap_of(2, fx.series[0], fx.series[1]);
    size_t n = roaring_bitmap_portable_size_in_bytes(bm);
    char *bytes = malloc(n);
    ember_matcher ma = { "service", "a", EMBER_MATCH_EQ };
    ember_selector sel = sel_of(&ma, 0, 0);
    ember_strlist *l = NULL;
    saved sv;
    ember_db *db;

    (void)state;
    assert_non_null(bytes);
    roaring_bitmap_portable_serialize(bm, bytes);
    roaring_bitmap_free(bm);

    /* A bitmap that decodes but holds a series too many. */
    save(&sv, "post", 0, key, sizeof key - 1);
    damage(&sv, bytes, n);
    db = tu_open(fx.dir, 0);
    verify_reports(db, "service=a", "label postings", NULL);
    ember_close(db);
    restore(&sv);

    /* A bitmap that does not decode: queries through it fail. */
    save(&sv, "post", 0, key, sizeof key - 1);
    damage(&sv, sv.val, 3);
    db = tu_open(fx.dir, 0);
    verify_reports(db, "service=a", "label postings", NULL);
    queries_fail(db, &sel, "postings");
    assert_int_equal(ember_label_values(db, "service", &sel, &l),
                     EMBER_ECORRUPT);
    assert_null(l);
    series_answers(db, 1, 0, 0, fx.total[1]);   /* service="b" */
    ember_close(db);
    restore(&sv);
    free(bytes);
    check_clean();
}

static void test_function_postings(void **state)
{
    uint32_t fn = 0;
    saved sv;
    ember_db *db;

    (void)state;
    save(&sv, "fpost", MDB_INTEGERKEY, &fn, sizeof fn);
    damage(&sv, sv.val, 2);
    db = tu_open(fx.dir, 0);
    verify_reports(db, "function postings", "function 0", NULL);
    ember_close(db);
    restore(&sv);
    check_clean();
}

/* A stored set of the right size with one id swapped for another: verify
** must say which ids differ, not "holds N ids, the records say N". */
static void test_postings_same_size(void **state)
{
    uint32_t fn = 0, gone, extra = 1000;
    char want_gone[64], want_extra[64];
    roaring_bitmap_t *bm;
    saved sv;
    char *bytes;
    size_t n;
    ember_db *db;

    (void)state;
    save(&sv, "fpost", MDB_INTEGERKEY, &fn, sizeof fn);
    bm = roaring_bitmap_portable_deserialize_safe((char *)sv.val, sv.vlen);
    assert_non_null(bm);
    assert_true(roaring_bitmap_get_cardinality(bm) > 0);
    assert_false(roaring_bitmap_contains(bm, extra));
    gone = roaring_bitmap_minimum(bm);
    roaring_bitmap_remove(bm, gone);
    roaring_bitmap_add(bm, extra);
    n = roaring_bitmap_portable_size_in_bytes(bm);
    bytes = malloc(n);
    assert_non_null(bytes);
    roaring_bitmap_portable_serialize(bm, bytes);
    roaring_bitmap_free(bm);
    damage(&sv, bytes, n);
    free(bytes);
    snprintf(want_extra, sizeof want_extra, "1 stored that no record names "
             "(first: stack %u)", extra);
    snprintf(want_gone, sizeof want_gone, "1 named by records, not stored "
             "(first: stack %u)", gone);
    db = tu_open(fx.dir, 0);
    verify_reports(db, "function postings function 0", want_extra,
                   want_gone);
    ember_close(db);
    restore(&sv);
    check_clean();
}

/* The head summary (u32 nchunks first) and a meta counter (u64). */
static void test_head_and_meta(void **state)
{
    uint32_t sid = fx.series[2];
    uint64_t profiles;
    char who[32];
    saved sv;
    uint8_t *buf;
    ember_db *db;

    (void)state;
    save(&sv, "head", MDB_INTEGERKEY, &sid, sizeof sid);
    buf = malloc(sv.vlen);
    assert_non_null(buf);
    memcpy(buf, sv.val, sv.vlen);
    buf[0] ^= 2;                                /* nchunks off by two */
    damage(&sv, buf, sv.vlen);
    free(buf);
    db = tu_open(fx.dir, 0);
    snprintf(who, sizeof who, "head of series %u", sid);
    verify_reports(db, who, "chunks", NULL);
    ember_close(db);
    restore(&sv);

    save(&sv, "meta", 0, "profiles", 8);
    assert_int_equal(sv.vlen, sizeof profiles);
    memcpy(&profiles, sv.val, sizeof profiles);
    assert_int_equal(profiles, 3 * (NSEALED + NHEAD));
    profiles += 1;
    damage(&sv, &profiles, sizeof profiles);
    db = tu_open(fx.dir, 0);
    verify_reports(db, "meta", "profiles", NULL);
    ember_close(db);
    restore(&sv);
    check_clean();
}

/* ---- checksums (format 2) ------------------------------------------------ */

/* S's stored bytes (payload and checksum) with bit BIT of byte AT flipped. */
static void flip_stored(const saved *s, size_t at, int bit)
{
    uint8_t *buf = malloc(s->vlen + 4);

    assert_non_null(buf);
    memcpy(buf, s->val, s->vlen + 4);
    buf[at] ^= (uint8_t)(1u << bit);
    damage_raw(s, buf, s->vlen + 4);
    free(buf);
}

/* Flips a bit of S's first byte, last payload byte and checksum in turn:
** verify must name WHO ("stk 3") and a checksum mismatch each time, and,
** when SEL is set, the queries over it fail naming the same. */
static void checksum_cases(saved *s, const char *who, const ember_selector *sel)
{
    size_t at[3] = { 0, s->vlen - 1, s->vlen + 2 };

    for (int i = 0; i < 3; i++) {
        ember_db *db;
        flip_stored(s, at[i], i + 3);
        db = tu_open(fx.dir, 0);
        verify_reports(db, who, "checksum mismatch", NULL);
        if (sel != NULL)
            queries_fail(db, sel, "checksum mismatch");
        ember_close(db);
    }
    restore(s);
}

/* A flipped bit in any stored value, its checksum included, or a value
** moved under another key: verify names the table and the key, and the
** queries that read it fail, where format 1 decoded what was left. */
static void test_value_checksums(void **state)
{
    static const char post_key[] = "service\0a";
    ember_matcher ma = { "service", "a", EMBER_MATCH_EQ };
    ember_selector sel = sel_of(&ma, 0, 0);
    uint32_t sid = fx.series[0], str = string_id("b"), fn = 0;
    uint32_t stk = fx.stacks[1], other = fx.stacks[2];
    char who[64];
    saved sv, mv;
    ember_db *db;

    (void)state;
    save(&sv, "stk", MDB_INTEGERKEY, &stk, sizeof stk);
    snprintf(who, sizeof who, "stk %u", stk);
    checksum_cases(&sv, who, NULL);
    save(&sv, "str", MDB_INTEGERKEY, &str, sizeof str);
    snprintf(who, sizeof who, "str %u", str);
    checksum_cases(&sv, who, NULL);
    save(&sv, "post", 0, post_key, sizeof post_key - 1);
    checksum_cases(&sv, "post service=a", &sel);
    save(&sv, "fpost", MDB_INTEGERKEY, &fn, sizeof fn);
    checksum_cases(&sv, "fpost 0", NULL);
    save(&sv, "meta", 0, "profiles", 8);
    checksum_cases(&sv, "meta \"profiles\"", NULL);
    save(&sv, "head", MDB_INTEGERKEY, &sid, sizeof sid);
    snprintf(who, sizeof who, "head %u", sid);
    checksum_cases(&sv, who, NULL);

    /* stack OTHER's stored bytes under STK's key */
    save(&sv, "stk", MDB_INTEGERKEY, &stk, sizeof stk);
    save(&mv, "stk", MDB_INTEGERKEY, &other, sizeof other);
    damage_raw(&sv, mv.val, mv.vlen + 4);
    free(mv.val);
    db = tu_open(fx.dir, 0);
    snprintf(who, sizeof who, "stk %u", stk);
    verify_reports(db, who, "checksum mismatch", NULL);
    ember_close(db);
    restore(&sv);
    check_clean();
}

/* A chunk's value: its own checksum covers its bytes, the value's covers
** its key: a bit flipped in the value's checksum fails as the key's. The
** series before it may fail too (its scan stops at the first key past it,
** which cannot be trusted); the one after does not. */
static void test_chunk_value_checksum(void **state)
{
    ember_matcher mine = { "service", services[1], EMBER_MATCH_EQ };
    ember_selector sel = sel_of(&mine, 0, 0);
    char where[80];
    saved sv;
    int64_t t = find_chunk(fx.series[1], false, &sv);
    ember_db *db;

    (void)state;
    snprintf(where, sizeof where, "chunk (series %u, t=%lld", fx.series[1],
             (long long)t);
    flip_stored(&sv, sv.vlen + 1, 0);
    db = tu_open(fx.dir, 0);
    verify_reports(db, where, "checksum mismatch", NULL);
    queries_fail(db, &sel, "checksum mismatch");
    series_answers(db, 2, 0, 0, fx.total[2]);
    ember_close(db);
    restore(&sv);
    check_clean();
}

/* ---- LMDB's trees -------------------------------------------------------- */

#define INDEX_FLAGS (MDB_INTEGERKEY | MDB_DUPSORT | MDB_DUPFIXED | \
                     MDB_INTEGERDUP)

/* Adds (ADD) or removes N ids from 1000000 on as duplicates under the
** first key of the string index: a sub-page of them for a few, a sub-tree
** for many. */
static void index_dups(size_t n, bool add)
{
    MDB_cursor *cur;
    MDB_val k, d;
    uint64_t key;
    raw r;

    raw_open(&r, "strh", INDEX_FLAGS);
    assert_int_equal(mdb_cursor_open(r.txn, r.dbi, &cur), 0);
    assert_int_equal(mdb_cursor_get(cur, &k, &d, MDB_FIRST), 0);
    memcpy(&key, k.mv_data, sizeof key);
    mdb_cursor_close(cur);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = 1000000 + i;
        MDB_val kk = { sizeof key, &key }, dd = { sizeof id, &id };
        assert_int_equal(add ? mdb_put(r.txn, r.dbi, &kk, &dd, 0)
                             : mdb_del(r.txn, r.dbi, &kk, &dd), 0);
    }
    raw_close(&r);
}

/* Ember's indexes hold duplicates only on a hash collision, so rarely
** that no other test makes LMDB store them: verify's walk of LMDB's trees
** must take both of LMDB's forms of duplicates as sound, and report only
** the index's extra entries. */
static void test_index_duplicates(void **state)
{
    size_t counts[2] = { 3, 3000 };

    (void)state;
    for (int i = 0; i < 2; i++) {
        problems p = { NULL, 0 };
        uint64_t count = 0;
        ember_db *db;
        index_dups(counts[i], true);
        db = tu_open(fx.dir, 0);
        assert_int_equal(ember_verify(db, on_problem, &p, &count),
                         EMBER_ECORRUPT);
        for (size_t j = 0; j < p.n; j++) {
            if (strstr(p.v[j], "LMDB's tree") != NULL)
                fail_msg("%zu duplicates: %s", counts[i], p.v[j]);
            free(p.v[j]);
        }
        free(p.v);
        assert_true(count > 0);
        ember_close(db);
        index_dups(counts[i], false);
    }
    check_clean();
}

/* ---- LMDB's meta pages ------------------------------------------------- */

/* LMDB 0.9's meta page on a 64-bit host: a 16-byte page header, then
** magic, version, address, map size (at 32), the free list's MDB_db whose
** first u32 is the page size (at 40), the main MDB_db, the last page (at
** 136), the txn id. Page 1 starts at the page size. */
enum { META_MAPSIZE = 32, META_PSIZE = 40, META_MAIN_ROOT = 128,
       META_LAST = 136, META_TXNID = 144 };

static void file_store(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Writes WIDTH bytes of V at OFF of both meta pages of ORIG (N bytes) to
** PATH. */
static void meta_patch(const char *path, const char *orig, size_t n,
                       size_t off, size_t width, uint64_t v)
{
    char *b = malloc(n);
    uint32_t psize;

    assert_non_null(b);
    memcpy(b, orig, n);
    memcpy(&psize, orig + META_PSIZE, sizeof psize);
    assert_int_equal(psize, 4096);
    memcpy(b + off, &v, width);
    memcpy(b + psize + off, &v, width);
    file_store(path, b, n);
    free(b);
}

/* Flips bit BIT of the txn id of meta page PAGE of ORIG (N bytes) into
** PATH. */
static void txnid_flip(const char *path, const char *orig, size_t n,
                       int page, int bit)
{
    char *b = malloc(n);
    uint64_t id;

    assert_non_null(b);
    memcpy(b, orig, n);
    memcpy(&id, b + page * 4096 + META_TXNID, sizeof id);
    id ^= 1ull << bit;
    memcpy(b + page * 4096 + META_TXNID, &id, sizeof id);
    file_store(path, b, n);
    free(b);
}

/* Opening, read-only or not, fails with CODE and a message holding both
** needles. */
static void open_fails(int code, const char *n1, const char *n2)
{
    ember_open_opts ro = { .sz = sizeof ro, .flags = EMBER_OPEN_RDONLY };

    for (int i = 0; i < 2; i++) {
        ember_db *db = NULL;
        int rc = ember_open(fx.dir, i == 0 ? NULL : &ro, &db);
        if (rc != code || strstr(ember_errmsg(db), n1) == NULL ||
            strstr(ember_errmsg(db), n2) == NULL)
            fail_msg("open %d: rc %d \"%s\", wanted %d naming \"%s\", \"%s\"",
                     i, rc, ember_errmsg(db), code, n1, n2);
        ember_close(db);
    }
}

/* A damaged meta page or a cut file is named as such, with the value: it
** was "open: out of memory" (a last page that sizes an exabyte map), a
** division by zero (page size 0), or a fault on the first page past the
** end of the file. */
static void test_meta_pages(void **state)
{
    char path[512];
    size_t n;
    char *orig;

    (void)state;
    snprintf(path, sizeof path, "%s/data.mdb", fx.dir);
    orig = tu_read_file(path, &n);
    assert_non_null(orig);

    meta_patch(path, orig, n, META_LAST, 8, 0xffffffffffffull);
    open_fails(EMBER_ECORRUPT, "damaged meta page", "281474976710655");
    meta_patch(path, orig, n, META_PSIZE, 4, 0);
    open_fails(EMBER_ECORRUPT, "damaged meta page 0", "page size 0");
    meta_patch(path, orig, n, META_MAPSIZE, 8, 0x7fff000000000000ull);
    open_fails(EMBER_ECORRUPT, "damaged meta page", "map size "
               "9223090561878065152");
    file_store(path, orig, n / 2);
    open_fails(EMBER_ECORRUPT, "truncated", "the file's");
    file_store(path, orig, 100);
    open_fails(EMBER_ECORRUPT, "truncated to 100 bytes", "meta page 0");
    meta_patch(path, orig, n, 16, 4, 0x55555555);
    open_fails(EMBER_EFORMAT, "not an LMDB file", "magic 0x55555555");
    meta_patch(path, orig, n, META_MAIN_ROOT, 8, 0x10000);
    open_fails(EMBER_ECORRUPT, "main database's root is page 65536",
               "past its last page");
    file_store(path, orig, n);
    free(orig);
    check_clean();
}

/* The probe: the high byte of a meta page's txn id flipped made
** LMDB open the older snapshot, where the database was empty, and verify
** said ok. LMDB writes txn N to meta page N % 2, one txn apart: any other
** pair is damage, named with both ids, read-only or not. */
static void test_meta_txnid(void **state)
{
    char path[512];
    size_t n;
    char *orig;

    (void)state;
    snprintf(path, sizeof path, "%s/data.mdb", fx.dir);
    orig = tu_read_file(path, &n);
    assert_non_null(orig);
    for (int page = 0; page < 2; page++) {
        txnid_flip(path, orig, n, page, 56);        /* the high byte */
        open_fails(EMBER_ECORRUPT, "went back in time", "not one apart");
        txnid_flip(path, orig, n, page, 0);         /* the parity */
        open_fails(EMBER_ECORRUPT, "went back in time",
                   page == 0 ? "page 0 holds an odd one"
                             : "page 1 holds an even one");
        txnid_flip(path, orig, n, page, 3);
        open_fails(EMBER_ECORRUPT, "meta page 0 holds txn", "meta page 1");
    }
    file_store(path, orig, n);
    free(orig);
    check_clean();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sealed_chunk_bytes),
        cmocka_unit_test(test_head_chunk_bytes),
        cmocka_unit_test(test_stack_record),
        cmocka_unit_test(test_string_record),
        cmocka_unit_test(test_postings_bitmap),
        cmocka_unit_test(test_function_postings),
        cmocka_unit_test(test_postings_same_size),
        cmocka_unit_test(test_head_and_meta),
        cmocka_unit_test(test_value_checksums),
        cmocka_unit_test(test_chunk_value_checksum),
        cmocka_unit_test(test_index_duplicates),
        cmocka_unit_test(test_meta_pages),
        cmocka_unit_test(test_meta_txnid),
    };
    return cmocka_run_group_tests_name("corrupt", tests, setup, teardown);
}
