/*
** tests/unit/test_chunk.c: the chunk codec (engine/chunk.c). Round trips are
** checked against the input through a reference built here independently
** (insertion sort for time order, qsort for stack order), both through
** em_chunk_transpose and through the stack-major arrays. Damaged chunks come
** three ways: every byte flip and truncation of real chunks (the checksum
** must catch them), and chunks written by a small second implementation of
** the format with a valid checksum but one broken rule each (the decoder's
** own checks must catch them). Allocation failures are injected at every
** call. One test prints bytes per sample and speeds on a realistic dataset.
** The content hash (engine/hash.c), on disk like the chunk bytes, is pinned
** here too.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

#include "engine/chunk.h"

/* ---- test data ---------------------------------------------------------- */

/* Profiles to encode and the arrays behind them. */
typedef struct tset {
    em_chunk_profile *ps;
    size_t np, cap_np;
    uint32_t *stk;
    int64_t *val;
    size_t ns, cap_ns;
} tset;

static void tset_init(tset *t, size_t cap_np, size_t cap_ns)
{
    memset(t, 0, sizeof *t);
    t->ps = calloc(cap_np + 1, sizeof *t->ps);
    t->stk = calloc(cap_ns + 1, sizeof *t->stk);
    t->val = calloc(cap_ns + 1, sizeof *t->val);
    assert_non_null(t->ps);
    assert_non_null(t->stk);
    assert_non_null(t->val);
    t->cap_np = cap_np;
    t->cap_ns = cap_ns;
}

static void tset_free(tset *t)
{
    free(t->ps);
    free(t->stk);
    free(t->val);
    memset(t, 0, sizeof *t);
}

/* Appends a profile, copying its N samples (stacks ascending). */
static void tset_add(tset *t, int64_t time, int64_t dur, int64_t period,
                     const uint32_t *stacks, const int64_t *values, size_t n)
{
    em_chunk_profile *p;

    assert_true(t->np < t->cap_np && t->ns + n <= t->cap_ns);
    p = &t->ps[t->np++];
    p->time_ms = time;
    p->duration_ns = dur;
    p->period = period;
    p->n = (uint32_t)n;
    p->stacks = t->stk + t->ns;
    p->values = t->val + t->ns;
    if (n > 0) {
        memcpy(t->stk + t->ns, stacks, n * sizeof *stacks);
        memcpy(t->val + t->ns, values, n * sizeof *values);
    }
    t->ns += n;
}

static uint64_t rng_next(uint64_t *s)      /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* A Zipf-like rank in [0, n): log-uniform, so rank r is drawn about as
** often as 1/(r+1). */
static uint32_t rng_zipf(uint64_t *s, uint32_t n)
{
    uint32_t r = (uint32_t)exp(rng_unit(s) * log((double)n + 1.0));
    return r == 0 ? 0 : r - 1 < n ? r - 1 : n - 1;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

enum { GEN_WILD = 1, GEN_SHUFFLE = 2, GEN_EMPTIES = 4 };

/* A value for the wild mode: the int64 edges, negatives, big and small. */
static int64_t wild_value(uint64_t *s)
{
    switch (rng_next(s) % 6) {
    case 0: return INT64_MIN;
    case 1: return INT64_MAX;
    case 2: return -(int64_t)(rng_next(s) % 1000);
    case 3: return (int64_t)rng_next(s);
    default: return (int64_t)(rng_next(s) % 100);
    }
}

/* One profile of up to DRAWS samples from a Zipf pool of POOL stack ids. */
static void gen_profile(tset *t, uint64_t *s, const uint32_t *pool,
                        uint32_t npool, size_t draws, int64_t time,
                        unsigned mode)
{
    uint32_t *ids = malloc((draws + 1) * sizeof *ids);
    int64_t *vals = malloc((draws + 1) * sizeof *vals);
    size_t n = 0;

    assert_non_null(ids);
    assert_non_null(vals);
    for (size_t i = 0; i < draws; i++)
        ids[i] = pool[rng_zipf(s, npool)];
    qsort(ids, draws, sizeof *ids, cmp_u32);
    for (size_t i = 0; i < draws; i++) {
        if (n > 0 && ids[n - 1] == ids[i]) {
            vals[n - 1] += 10000000;
            continue;
        }
        ids[n] = ids[i];
        vals[n++] = 10000000;
    }
    for (size_t i = 0; (mode & GEN_WILD) && i < n; i++)
        vals[i] = wild_value(s);
    tset_add(t, time, 10000000000LL + (int64_t)(rng_next(s) % 1000),
             10000000, ids, vals, n);
    free(ids);
    free(vals);
}

/* NP random profiles; times regular unless GEN_SHUFFLE scrambles them
** (with many ties). */
static void gen_random(tset *t, uint64_t seed, size_t np, size_t draws,
                       unsigned mode)
{
    uint64_t s = seed;
    uint32_t npool = 1 + (uint32_t)(rng_next(&s) % 3000), *pool;

    pool = malloc(npool * sizeof *pool);
    assert_non_null(pool);
    for (uint32_t i = 0; i < npool; i++)
        pool[i] = (mode & GEN_WILD) ? (uint32_t)rng_next(&s)
                                    : 1000 + (uint32_t)(rng_next(&s) % 200000);
    tset_init(t, np, np * draws);
    for (size_t i = 0; i < np; i++) {
        int64_t time = (mode & GEN_SHUFFLE)
                     ? 1700000000000LL + (int64_t)(rng_next(&s) % (np / 3 + 1))
                     : 1700000000000LL + 10000 * (int64_t)i;
        size_t d = (mode & GEN_EMPTIES) && rng_next(&s) % 4 == 0
                 ? 0 : 1 + rng_next(&s) % draws;
        gen_profile(t, &s, pool, npool, d, time, mode);
    }
    free(pool);
}

/* ---- the reference ------------------------------------------------------ */

/* Input indexes in decoded order: by time, ties in input order. */
static size_t *ref_order(const tset *t)
{
    size_t *o = malloc((t->np + 1) * sizeof *o);

    assert_non_null(o);
    for (size_t i = 0; i < t->np; i++) {
        size_t j = i;
        for (; j > 0 && t->ps[o[j - 1]].time_ms > t->ps[i].time_ms; j--)
            o[j] = o[j - 1];
        o[j] = i;
    }
    return o;
}

typedef struct ref_sample {
    uint32_t stack, prof;
    int64_t value;
} ref_sample;

static int cmp_ref(const void *x, const void *y)
{
    const ref_sample *a = x, *b = y;
    if (a->stack != b->stack)
        return a->stack < b->stack ? -1 : 1;
    return (a->prof > b->prof) - (a->prof < b->prof);
}

/* Every sample as (stack, rank in time order, value), stack-major. */
static ref_sample *ref_samples(const tset *t, const size_t *o)
{
    ref_sample *r = malloc((t->ns + 1) * sizeof *r);
    size_t n = 0;

    assert_non_null(r);
    for (size_t k = 0; k < t->np; k++)
        for (uint32_t i = 0; i < t->ps[o[k]].n; i++)
            r[n++] = (ref_sample){ t->ps[o[k]].stacks[i], (uint32_t)k,
                                   t->ps[o[k]].values[i] };
    qsort(r, n, sizeof *r, cmp_ref);
    return r;
}

static int64_t ref_total(const em_chunk_profile *p)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->n; i++)
        sum += (uint64_t)p->values[i];
    return (int64_t)sum;
}

static void check_header(const tset *t, const size_t *o, const ref_sample *r,
                         const em_chunk_header *h)
{
    uint32_t nstacks = 0;

    for (size_t k = 0; k < t->ns; k++)
        nstacks += k == 0 || r[k].stack != r[k - 1].stack;
    assert_int_equal(h->version, EM_CHUNK_VERSION);
    assert_int_equal(h->nprofiles, t->np);
    assert_int_equal(h->nsamples, t->ns);
    assert_int_equal(h->nstacks, nstacks);
    assert_int_equal(h->min_time, t->np ? t->ps[o[0]].time_ms : 0);
    assert_int_equal(h->max_time, t->np ? t->ps[o[t->np - 1]].time_ms : 0);
}

static void check_samples(const tset *t, const ref_sample *r,
                          const em_chunk *ch)
{
    uint32_t s = 0;

    for (size_t k = 0; k < t->ns; k++) {
        if (k > 0 && r[k].stack != r[k - 1].stack)
            s++;
        assert_true(s < ch->h.nstacks);
        assert_int_equal(ch->stacks[s], r[k].stack);
        assert_true(k >= ch->stack_start[s] && k < ch->stack_start[s + 1]);
        assert_int_equal(ch->sample_profile[k], r[k].prof);
        assert_int_equal(ch->sample_value[k], r[k].value);
    }
    assert_int_equal(ch->stack_start[0], 0);
    assert_int_equal(ch->stack_start[ch->h.nstacks], t->ns);
}

/* Compares a chunk decoded with COLS against the input T exactly. */
static void check_chunk(const tset *t, const em_chunk *ch, unsigned cols)
{
    size_t *o = ref_order(t);
    ref_sample *r = ref_samples(t, o);

    check_header(t, o, r, &ch->h);
    for (size_t k = 0; k < t->np; k++) {
        const em_chunk_profile *p = &t->ps[o[k]];
        if (cols & EM_COL_TIMES) {
            assert_int_equal(ch->time_ms[k], p->time_ms);
            assert_int_equal(ch->duration_ns[k], p->duration_ns);
            assert_int_equal(ch->period[k], p->period);
        }
        if (cols & EM_COL_TOTALS)
            assert_int_equal(ch->total[k], ref_total(p));
    }
    assert_true((ch->time_ms != NULL) == !!(cols & EM_COL_TIMES));
    assert_true((ch->period != NULL) == !!(cols & EM_COL_TIMES));
    assert_true((ch->total != NULL) == !!(cols & EM_COL_TOTALS));
    assert_true((ch->stacks != NULL) == !!(cols & EM_COL_SAMPLES));
    assert_true((ch->sample_value != NULL) == !!(cols & EM_COL_SAMPLES));
    if (cols & EM_COL_SAMPLES)
        check_samples(t, r, ch);
    free(r);
    free(o);
}

/* Transposes CH and compares each profile with its input. */
static void check_transpose(const tset *t, const em_chunk *ch)
{
    size_t *o = ref_order(t);
    em_chunk_profile *ps = NULL;

    assert_int_equal(em_chunk_transpose(ch, &ps), EMBER_OK);
    for (size_t k = 0; k < t->np; k++) {
        const em_chunk_profile *want = &t->ps[o[k]];
        assert_int_equal(ps[k].time_ms, want->time_ms);
        assert_int_equal(ps[k].duration_ns, want->duration_ns);
        assert_int_equal(ps[k].period, want->period);
        assert_int_equal(ps[k].n, want->n);
        if (want->n > 0) {
            assert_memory_equal(ps[k].stacks, want->stacks,
                                want->n * sizeof *want->stacks);
            assert_memory_equal(ps[k].values, want->values,
                                want->n * sizeof *want->values);
        }
    }
    em_free(ps);
    free(o);
}

/* Encodes T, decodes it fully and partly, and checks everything. */
static void round_trip(em_codec *c, const tset *t, int level)
{
    em_buf b = { 0 };
    em_chunk ch;

    assert_int_equal(em_chunk_encode(c, t->ps, t->np, 0, level, &b),
                     EMBER_OK);
    for (unsigned cols = 0; cols <= EM_COL_ALL; cols++) {
        int rc = em_chunk_decode(c, b.p, b.len, cols, &ch);
        if (rc != EMBER_OK)
            fail_msg("decode cols %u: %s", cols, em_errmsg());
        check_chunk(t, &ch, cols);
        if (cols == EM_COL_ALL)
            check_transpose(t, &ch);
        em_chunk_release(&ch);
    }
    em_buf_free(&b);
}

/* ---- round trips -------------------------------------------------------- */

static void test_empty_chunk(void **state)
{
    tset t;
    em_buf b = { 0 };
    em_chunk ch;
    em_chunk_profile *ps = NULL;

    (void)state;
    tset_init(&t, 1, 1);
    round_trip(NULL, &t, 3);
    assert_int_equal(em_chunk_encode(NULL, NULL, 0, EM_CHUNK_HEAD, 3, &b),
                     EMBER_OK);
    assert_int_equal(em_chunk_decode(NULL, b.p, b.len, EM_COL_ALL, &ch),
                     EMBER_OK);
    assert_int_equal(ch.h.flags, EM_CHUNK_HEAD);
    assert_non_null(ch.time_ms);
    assert_int_equal(ch.stack_start[0], 0);
    assert_int_equal(em_chunk_transpose(&ch, &ps), EMBER_OK);
    assert_non_null(ps);
    em_free(ps);
    em_chunk_release(&ch);
    em_chunk_release(&ch);      /* safe twice */
    em_buf_free(&b);
    tset_free(&t);
}

static void test_one_sample(void **state)
{
    const uint32_t s[] = { 42 };
    const int64_t v[] = { -7 };
    tset t;

    (void)state;
    tset_init(&t, 1, 1);
    tset_add(&t, 1732170000000, 10000000000, 10000000, s, v, 1);
    round_trip(NULL, &t, 3);
    tset_free(&t);
}

static void test_one_profile(void **state)
{
    uint32_t s[5000];
    int64_t v[5000];
    tset t;

    (void)state;
    for (size_t i = 0; i < 5000; i++) {
        s[i] = (uint32_t)(i * i + 3);
        v[i] = (int64_t)(i % 17) * 10000000;
    }
    tset_init(&t, 1, 5000);
    tset_add(&t, -5, 0, 0, s, v, 5000);
    round_trip(NULL, &t, 3);
    tset_free(&t);
}

/* The int64 edges everywhere: values alternating between extremes within a
** stack (every delta wraps), times spanning the whole range, the stack id
** edges. */
static void test_extremes(void **state)
{
    const uint32_t s[] = { 0, 1, UINT32_MAX - 1, UINT32_MAX };
    const int64_t v1[] = { INT64_MIN, INT64_MAX, -1, 0 };
    const int64_t v2[] = { INT64_MAX, INT64_MIN, INT64_MIN, -1 };
    const int64_t v3[] = { -1, 1, INT64_MAX, INT64_MIN };
    tset t;

    (void)state;
    tset_init(&t, 6, 24);
    tset_add(&t, INT64_MAX, INT64_MIN, INT64_MAX, s, v1, 4);
    tset_add(&t, INT64_MIN, INT64_MAX, INT64_MIN, s, v2, 4);
    tset_add(&t, 0, -1, 1, s, v3, 4);
    tset_add(&t, INT64_MIN, 0, -1, s + 1, v1, 3);
    tset_add(&t, INT64_MAX, 1, 0, s, v2, 2);
    tset_add(&t, -1, INT64_MIN, INT64_MIN, s + 3, v3, 1);
    round_trip(NULL, &t, 3);
    round_trip(NULL, &t, 19);
    tset_free(&t);
}

/* Equal timestamps keep their input order; durations tell them apart. */
static void test_equal_times(void **state)
{
    uint32_t s[3] = { 1, 2, 3 };
    int64_t v[3] = { 1, 2, 3 };
    tset t;
    em_buf b = { 0 };
    em_chunk ch;

    (void)state;
    tset_init(&t, 200, 600);
    for (int64_t i = 0; i < 200; i++) {
        v[i % 3] = i;
        tset_add(&t, i % 2 ? 1000 : 2000, i, 1, s, v, (size_t)(i % 4));
    }
    round_trip(NULL, &t, 3);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, 0, 3, &b), EMBER_OK);
    assert_int_equal(em_chunk_decode(NULL, b.p, b.len, EM_COL_TIMES, &ch),
                     EMBER_OK);
    for (size_t k = 0; k < 200; k++)    /* odd inputs first, in order */
        assert_int_equal(ch.duration_ns[k], k < 100 ? 2 * k + 1
                                                    : 2 * (k - 100));
    em_chunk_release(&ch);
    em_buf_free(&b);
    tset_free(&t);
}

static void test_unsorted_input(void **state)
{
    em_codec *c;
    tset t;

    (void)state;
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        gen_random(&t, seed, 50 + seed * 20, 40, GEN_SHUFFLE);
        round_trip(c, &t, 3);
        tset_free(&t);
    }
    em_codec_free(c);
}

static void test_empty_profiles(void **state)
{
    em_codec *c;
    tset t;

    (void)state;
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    gen_random(&t, 99, 300, 30, GEN_EMPTIES | GEN_SHUFFLE);
    round_trip(c, &t, 1);
    tset_free(&t);
    tset_init(&t, 10, 1);       /* only empty profiles */
    for (int i = 0; i < 10; i++)
        tset_add(&t, 10 - i, i, -i, NULL, NULL, 0);
    round_trip(c, &t, 3);
    tset_free(&t);
    em_codec_free(c);
}

/* Many random chunks through one codec, so that its scratch is reused at
** growing and shrinking sizes. */
static void test_random_zipf(void **state)
{
    static const unsigned modes[] = { 0, GEN_WILD, GEN_SHUFFLE,
        GEN_EMPTIES, GEN_WILD | GEN_SHUFFLE | GEN_EMPTIES };
    em_codec *c;
    tset t;

    (void)state;
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    for (uint64_t seed = 100; seed < 120; seed++) {
        size_t np = 1 + (size_t)(seed * 37 % 720);
        gen_random(&t, seed, np, 1 + seed % 200, modes[seed % 5]);
        round_trip(c, &t, (int)(seed % 5) - 1);
        tset_free(&t);
    }
    em_codec_free(c);
}

/* KEPT, the runs of every stack of CH that RNG picks (one in FRAC). */
static uint32_t pick_runs(const em_chunk *ch, uint64_t *rng, uint32_t frac,
                          em_kept *kept)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < ch->h.nstacks; i++)
        if (frac <= 1 || rng_next(rng) % frac == 0)
            kept[n++] = (em_kept){ ch->stacks[i],
                                   (uint32_t)ch->stack_start[i],
                                   (uint32_t)(ch->stack_start[i + 1] -
                                              ch->stack_start[i]) };
    return n;
}

/* Decoding only some stacks' runs gives, in those runs, what a whole
** decode gives; raw and zstd columns, none, some and every stack. */
static void test_decode_kept(void **state)
{
    em_codec *c;
    tset t;

    (void)state;
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    for (uint64_t seed = 300; seed < 330; seed++) {
        em_buf b = { 0 };
        em_chunk all, part;
        uint64_t rng = seed;
        void *mem = NULL, *kmem = NULL, *kmem2 = NULL;
        size_t bytes, kbytes;
        em_kept *kept;
        uint32_t n;

        gen_random(&t, seed, 1 + (size_t)(seed * 13 % 400), 1 + seed % 300,
                   seed % 2 ? GEN_WILD : 0);
        assert_int_equal(em_chunk_encode(c, t.ps, t.np, 0, (int)(seed % 3) - 1,
                                         &b), EMBER_OK);
        assert_int_equal(em_chunk_decode(c, b.p, b.len, EM_COL_ALL, &all),
                         EMBER_OK);
        memset(&part, 0, sizeof part);
        assert_int_equal(em_chunk_header_read(b.p, b.len, &part.h), EMBER_OK);
        assert_int_equal(em_chunk_decode_parts(c, b.p, b.len, EM_PART_STACKS,
                                               &part, &mem, &bytes),
                         EMBER_OK);
        kept = malloc((part.h.nstacks + 1) * sizeof *kept);
        assert_non_null(kept);
        n = pick_runs(&part, &rng, (uint32_t)(seed % 4), kept);
        if (seed % 7 == 0)
            n = 0;
        assert_int_equal(em_chunk_decode_kept(seed % 5 ? c : NULL, b.p, b.len,
                                              EM_PART_VALUES |
                                                  EM_PART_PROFILES,
                                              &part, kept, n, &kmem, &kbytes),
                         EMBER_OK);
        for (uint32_t k = 0; k < n; k++)
            for (uint32_t j = kept[k].at; j < kept[k].at + kept[k].n; j++) {
                assert_int_equal(part.sample_value[j], all.sample_value[j]);
                assert_int_equal(part.sample_profile[j],
                                 all.sample_profile[j]);
            }
        /* the parts it holds are not decoded again */
        assert_int_equal(em_chunk_decode_kept(c, b.p, b.len, EM_PART_VALUES,
                                              &part, kept, n, &kmem2,
                                              &kbytes),
                         EMBER_EINVAL);
        assert_null(kmem2);
        free(kmem);
        free(mem);
        free(kept);
        em_chunk_release(&all);
        em_buf_free(&b);
        tset_free(&t);
    }
    em_codec_free(c);
}

/* Damaged values and profiles columns (past the checksum, which the
** caller checks) are reported, never read past: every bit flip of a small
** chunk decodes or is an error naming the damage (or an encoding this
** build does not know). */
static void test_decode_kept_damage(void **state)
{
    em_buf b = { 0 };
    em_chunk part;
    em_kept kept[1024];
    uint64_t rng = 5;
    size_t bytes, kbytes;
    void *mem = NULL, *kmem = NULL;
    uint32_t n;
    tset t;

    (void)state;
    gen_random(&t, 41, 40, 60, GEN_WILD);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, 0, -1, &b), EMBER_OK);
    memset(&part, 0, sizeof part);
    assert_int_equal(em_chunk_header_read(b.p, b.len, &part.h), EMBER_OK);
    assert_int_equal(em_chunk_decode_parts(NULL, b.p, b.len, EM_PART_STACKS,
                                           &part, &mem, &bytes), EMBER_OK);
    assert_true(part.h.nstacks <= 1024);
    n = pick_runs(&part, &rng, 2, kept);
    for (size_t i = 0; i < b.len; i++)
        for (int bit = 0; bit < 8; bit++) {
            uint8_t *q = malloc(b.len);
            em_chunk view = part;
            int rc;
            assert_non_null(q);
            memcpy(q, b.p, b.len);
            q[i] ^= (uint8_t)(1u << bit);
            rc = em_chunk_decode_kept(NULL, q, b.len,
                                      EM_PART_VALUES | EM_PART_PROFILES,
                                      &view, kept, n, &kmem, &kbytes);
            if (rc != EMBER_OK && rc != EMBER_ECORRUPT && rc != EMBER_EFORMAT)
                fail_msg("byte %zu bit %d: %d %s", i, bit, rc, em_errmsg());
            if (rc != EMBER_OK)
                assert_null(kmem);
            free(kmem);
            kmem = NULL;
            free(q);
        }
    free(mem);
    em_buf_free(&b);
    tset_free(&t);
}

/* A large chunk compresses its columns, and compressed columns decode. */
static void test_zstd_columns(void **state)
{
    em_buf b = { 0 };
    tset t;
    int nzstd = 0;

    (void)state;
    gen_random(&t, 7, 300, 300, 0);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, 0, 3, &b), EMBER_OK);
    for (int k = 0; k < 8; k++)
        nzstd += b.p[44 + 10 * k + 1] == 1;
    assert_true(nzstd >= 4);
    em_buf_free(&b);
    round_trip(NULL, &t, 3);
    tset_free(&t);
}

static void test_header_read(void **state)
{
    em_chunk_header h;
    em_buf b = { 0 };
    tset t;

    (void)state;
    gen_random(&t, 5, 20, 10, GEN_SHUFFLE);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, EM_CHUNK_HEAD, 3, &b),
                     EMBER_OK);
    assert_int_equal(em_chunk_header_read(b.p, b.len, &h), EMBER_OK);
    assert_int_equal(h.version, EM_CHUNK_VERSION);
    assert_int_equal(h.flags, EM_CHUNK_HEAD);
    assert_int_equal(h.nprofiles, 20);
    assert_int_equal(h.nsamples, t.ns);
    {
        size_t *o = ref_order(&t);
        assert_int_equal(h.min_time, t.ps[o[0]].time_ms);
        assert_int_equal(h.max_time, t.ps[o[19]].time_ms);
        free(o);
    }
    b.p[b.len - 1] ^= 1;
    assert_int_equal(em_chunk_header_read(b.p, b.len, &h), EMBER_ECORRUPT);
    assert_non_null(strstr(em_errmsg(), "chunk: checksum mismatch"));
    em_buf_free(&b);
    tset_free(&t);
}

/* ---- damage the checksum must catch ------------------------------------- */

/* Decodes LEN bytes of P from an exact-size copy, so that ASan sees any read
** past the end. */
static int decode_copy(em_codec *c, const uint8_t *p, size_t len,
                       unsigned cols)
{
    uint8_t *q = malloc(len + 1);
    em_chunk ch;
    int rc;

    assert_non_null(q);
    if (len > 0)
        memcpy(q, p, len);
    rc = em_chunk_decode(c, q, len, cols, &ch);
    if (rc == EMBER_OK)
        em_chunk_release(&ch);
    assert_null(ch.mem);
    free(q);
    return rc;
}

static void encode_small(em_buf *b, uint64_t seed, size_t np, size_t draws)
{
    tset t;

    gen_random(&t, seed, np, draws, GEN_WILD | GEN_SHUFFLE);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, 0, 3, b), EMBER_OK);
    tset_free(&t);
}

/* Every one of the 255 changes of every byte of a small (raw) chunk, and
** every bit flip of a larger (zstd) one. */
static void test_byte_flips(void **state)
{
    em_buf small = { 0 }, big = { 0 };
    em_codec *c;

    (void)state;
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    encode_small(&small, 11, 4, 5);
    encode_small(&big, 12, 60, 40);
    for (size_t i = 0; i < small.len; i++)
        for (unsigned x = 1; x < 256; x++) {
            small.p[i] ^= (uint8_t)x;
            assert_int_equal(em_chunk_decode(c, small.p, small.len,
                             EM_COL_ALL, &(em_chunk){ 0 }), EMBER_ECORRUPT);
            small.p[i] ^= (uint8_t)x;
        }
    for (size_t i = 0; i < big.len; i++)
        for (unsigned bit = 0; bit < 8; bit++) {
            big.p[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(decode_copy(c, big.p, big.len, EM_COL_ALL),
                             EMBER_ECORRUPT);
            big.p[i] ^= (uint8_t)(1u << bit);
        }
    assert_int_equal(decode_copy(c, big.p, big.len, EM_COL_ALL), EMBER_OK);
    em_buf_free(&small);
    em_buf_free(&big);
    em_codec_free(c);
}

static void test_truncations(void **state)
{
    em_buf b = { 0 };
    em_codec *c;

    (void)state;
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    encode_small(&b, 13, 80, 30);
    for (size_t len = 0; len < b.len; len++)
        assert_int_equal(decode_copy(c, b.p, len, EM_COL_ALL),
                         EMBER_ECORRUPT);
    assert_int_equal(decode_copy(NULL, b.p, 0, EM_COL_ALL), EMBER_ECORRUPT);
    assert_int_equal(em_buf_put(&b, "", 1), EMBER_OK);     /* one extra */
    assert_int_equal(decode_copy(c, b.p, b.len, EM_COL_ALL), EMBER_ECORRUPT);
    em_buf_free(&b);
    em_codec_free(c);
}

/* ---- a second writer: valid checksums over broken rules ----------------- */

/* A chunk spelled out column by column as the varints docs/file-format.md
** defines; craft_build() writes it with every column raw. */
typedef struct craft {
    uint8_t version, flags, reserved;
    uint32_t np, nst;
    uint64_t nsm;
    int64_t tmin, tmax;
    uint64_t col[8][8];         /* each column's varints */
    size_t n[8];
    int extra_id;               /* >= 0: a ninth column with this id */
} craft;

/* The base chunk: profiles at 100, 110, 120 ms; stack 5 has 7 in profile 0
** and -2 in profile 1, stack 9 has 3 in profile 0 and 4 in profile 2. */
static craft craft_base(void)
{
    craft c = {
        .version = EM_CHUNK_VERSION, .np = 3, .nst = 2, .nsm = 4,
        .tmin = 100, .tmax = 120, .extra_id = -1,
        .col = {
            { 200, 20, 0 },     /* times: 100, +10, +0 on the delta */
            { 20, 0, 0 },       /* durations: 10, 10, 10 */
            { 2, 0, 0 },        /* periods: 1, 1, 1 */
            { 20, 23, 12 },     /* totals: 10, -2 (-12), 4 (+6) */
            { 5, 4 },           /* stacks: 5, 9 */
            { 2, 2 },           /* counts */
            { 0, 0, 0, 1 },     /* profiles: 0 1 | 0 2 */
            { 14, 17, 6, 2 },   /* values: 7 -2 (-9) | 3 4 (+1) */
        },
        .n = { 3, 3, 3, 3, 2, 2, 4, 4 },
    };
    return c;
}

static void put_varint_raw(uint8_t *p, size_t *at, uint64_t v)
{
    *at += em_varint_put(p + *at, v);
}

/* CRC-32 of every byte but the checksum field, stored at offset 8. */
static void reseal(uint8_t *p, size_t len)
{
    uLong crc = crc32(0, p, 8);
    crc = crc32(crc, p + 12, (uInt)(len - 12));
    em_put_le32(p + 8, (uint32_t)crc);
}

/* Writes C into P (1 KiB at least); returns its length. */
static size_t craft_build(const craft *c, uint8_t *p)
{
    size_t ncols = c->extra_id >= 0 ? 9 : 8, at = 44 + 10 * ncols;

    memset(p, 0, at);
    em_put_le32(p, 0x4b434d45);
    p[4] = c->version;
    p[5] = c->flags;
    p[6] = (uint8_t)ncols;
    p[7] = c->reserved;
    em_put_le32(p + 12, c->np);
    em_put_le32(p + 16, c->nst);
    em_put_le64(p + 20, c->nsm);
    em_put_le64(p + 28, (uint64_t)c->tmin);
    em_put_le64(p + 36, (uint64_t)c->tmax);
    for (size_t k = 0; k < ncols; k++) {
        size_t start = at;
        for (size_t i = 0; k < 8 && i < c->n[k]; i++)
            put_varint_raw(p, &at, c->col[k][i]);
        if (k == 8)
            p[at++] = 0xee;     /* a newer writer's column: opaque */
        p[44 + 10 * k] = (uint8_t)(k < 8 ? k : (size_t)c->extra_id);
        em_put_le32(p + 44 + 10 * k + 2, (uint32_t)(at - start));
        em_put_le32(p + 44 + 10 * k + 6, (uint32_t)(at - start));
    }
    reseal(p, at);
    return at;
}

/* Builds C, decodes it, expects RC and a message containing WHAT. */
static void craft_expect(const craft *c, int rc, const char *what)
{
    uint8_t p[1024];
    size_t len = craft_build(c, p);
    int got = decode_copy(NULL, p, len, EM_COL_ALL);

    if (got != rc || strstr(em_errmsg(), what) == NULL)
        fail_msg("want %d \"%s\", got %d \"%s\"", rc, what, got,
                 em_errmsg());
}

/* The encoder and the second writer agree byte for byte, and the bytes are
** pinned here: a change of format must change this test and the doc. */
static void test_golden(void **state)
{
    static const uint8_t want[] = {
        0x45, 0x4d, 0x43, 0x4b, 0x01, 0x00, 0x08, 0x00,     /* magic .. */
        0x93, 0xa8, 0xca, 0x76,                             /* crc */
        0x03, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,     /* np, nst */
        0x04, 0, 0, 0, 0, 0, 0, 0,                          /* nsamples */
        0x64, 0, 0, 0, 0, 0, 0, 0, 0x78, 0, 0, 0, 0, 0, 0, 0, /* span */
        0, 0, 4, 0, 0, 0, 4, 0, 0, 0,   /* times: raw, 4 bytes */
        1, 0, 3, 0, 0, 0, 3, 0, 0, 0,
        2, 0, 3, 0, 0, 0, 3, 0, 0, 0,
        3, 0, 3, 0, 0, 0, 3, 0, 0, 0,
        4, 0, 2, 0, 0, 0, 2, 0, 0, 0,
        5, 0, 2, 0, 0, 0, 2, 0, 0, 0,
        6, 0, 4, 0, 0, 0, 4, 0, 0, 0,
        7, 0, 4, 0, 0, 0, 4, 0, 0, 0,
        0xc8, 0x01, 0x14, 0x00,  0x14, 0x00, 0x00,  0x02, 0x00, 0x00,
        0x14, 0x17, 0x0c,  0x05, 0x04,  0x02, 0x02,  0x00, 0x00, 0x00, 0x01,
        0x0e, 0x11, 0x06, 0x02,
    };
    const uint32_t s0[] = { 5, 9 }, s1[] = { 5 }, s2[] = { 9 };
    const int64_t v0[] = { 7, 3 }, v1[] = { -2 }, v2[] = { 4 };
    craft c = craft_base();
    uint8_t p[1024];
    size_t len = craft_build(&c, p);
    em_buf b = { 0 };
    tset t;

    (void)state;
    tset_init(&t, 3, 4);
    tset_add(&t, 110, 10, 1, s1, v1, 1);    /* out of order on purpose */
    tset_add(&t, 100, 10, 1, s0, v0, 2);
    tset_add(&t, 120, 10, 1, s2, v2, 1);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, 0, 3, &b), EMBER_OK);
    assert_int_equal(b.len, sizeof want);
    assert_int_equal(len, sizeof want);
    assert_memory_equal(b.p, want, sizeof want);
    assert_memory_equal(p, want, sizeof want);
    em_buf_free(&b);
    tset_free(&t);
}

/* The content hash keys every table's reverse index on disk, so its values
** are pinned like the chunk bytes: every tail length, the 8-byte loop, and
** the seed. */
static void test_hash_golden(void **state)
{
    static const char s[] = "main.(*worker).hashWork\0"
                            "/work/main/tests/go/profgen/main.go";
    static const struct { size_t len; uint64_t h; } want[] = {
        { 0, 0x91385a4b13576e01ULL }, { 1, 0x962d466b1bbf420bULL },
        { 3, 0x7372be536da6e6ddULL }, { 4, 0x1e7f25a4c7de2a40ULL },
        { 7, 0x60824edaae738e8eULL }, { 8, 0x5d6b2c5075ba781aULL },
        { 9, 0xe628521107c60799ULL }, { 15, 0x3bc82de781b5c2b0ULL },
        { 16, 0x207bba78db016135ULL }, { 17, 0x228933a59a97c0b9ULL },
        { 23, 0x605c36f17b428a13ULL }, { 24, 0xa6462eed5ed19ae2ULL },
        { 60, 0x4bce93fc38f28ad7ULL },
    };
    uint8_t le[8];

    (void)state;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (em_hash64(s, want[i].len, i) != want[i].h)
            fail_msg("em_hash64 of %zu bytes: %016" PRIx64 ", want %016"
                     PRIx64, want[i].len, em_hash64(s, want[i].len, i),
                     want[i].h);
    em_put_le64(le, 0x0807060504030201ULL);
    for (int i = 0; i < 8; i++)
        assert_int_equal(le[i], i + 1);
    assert_true(em_get_le64(le) == 0x0807060504030201ULL);
    assert_int_equal(em_get_le32(le + 4), 0x08070605);
}

static void test_crafted_valid(void **state)
{
    craft c = craft_base();

    (void)state;
    craft_expect(&c, EMBER_OK, "");
    c.extra_id = 200;           /* newer writers' columns are skipped */
    craft_expect(&c, EMBER_OK, "");
    c.flags = EM_CHUNK_HEAD;
    craft_expect(&c, EMBER_OK, "");
}

typedef struct breakage {
    const char *what;           /* expected in the message */
    int rc;
    void (*apply)(craft *c);
} breakage;

static void b_version(craft *c) { c->version = 2; }
static void b_flags(craft *c) { c->flags = 0x80; }
static void b_reserved(craft *c) { c->reserved = 1; }
static void b_dup_extra(craft *c) { c->extra_id = 7; }
static void b_np_limit(craft *c) { c->np = EM_CHUNK_MAX_PROFILES + 1; }
static void b_nst_limit(craft *c) { c->nst = EM_CHUNK_MAX_STACKS + 1; }
static void b_nsm_limit(craft *c) { c->nsm = EM_CHUNK_MAX_SAMPLES + 1; }
static void b_nsm_fill(craft *c) { c->nsm = 7; }
static void b_span(craft *c) { c->tmin = 121; }
static void b_min(craft *c) { c->tmin = 99; }
static void b_max(craft *c) { c->tmax = 121; }
static void b_time_order(craft *c) { c->col[0][2] = 39; }  /* -20 */
static void b_time_count(craft *c) { c->n[0] = 2; }
static void b_time_trail(craft *c) { c->n[0] = 4; c->col[0][3] = 0; }
static void b_time_huge(craft *c) { c->col[0][2] = 1ull << 63; }
static void b_stack_zero_gap(craft *c) { c->col[4][1] = 0; }
static void b_stack_wrap(craft *c) { c->col[4][1] = UINT32_MAX; }
static void b_stack_first(craft *c) { c->col[4][0] = 1ull << 32; }
static void b_count_zero(craft *c) { c->col[5][0] = 0; c->col[5][1] = 4; }
static void b_count_sum(craft *c) { c->col[5][1] = 1; }
static void b_count_many(craft *c) { c->col[5][0] = 4; c->col[5][1] = 0; }
static void b_prof_range(craft *c) { c->col[6][0] = 3; }
static void b_prof_gap(craft *c) { c->col[6][3] = 1; c->col[6][2] = 1; }
static void b_prof_huge(craft *c) { c->col[6][1] = UINT64_MAX; }
static void b_values(craft *c) { c->col[7][3] = 4; }
static void b_values_short(craft *c) { c->n[7] = 3; }
static void b_totals(craft *c) { c->col[3][2] = 14; }

static void test_crafted_corrupt(void **state)
{
    static const breakage bs[] = {
        { "version 2", EMBER_EFORMAT, b_version },
        { "flags 0x80", EMBER_EFORMAT, b_flags },
        { "reserved 1", EMBER_EFORMAT, b_reserved },
        { "directory entry 8", EMBER_ECORRUPT, b_dup_extra },
        { "exceed the limits", EMBER_ECORRUPT, b_np_limit },
        { "exceed the limits", EMBER_ECORRUPT, b_nst_limit },
        { "exceed the limits", EMBER_ECORRUPT, b_nsm_limit },
        { "cannot fill", EMBER_ECORRUPT, b_nsm_fill },
        { "time span", EMBER_ECORRUPT, b_span },
        { "times column: span", EMBER_ECORRUPT, b_min },
        { "times column: span", EMBER_ECORRUPT, b_max },
        { "times column: profile 2", EMBER_ECORRUPT, b_time_order },
        { "times column", EMBER_ECORRUPT, b_time_count },
        { "times column", EMBER_ECORRUPT, b_time_trail },
        { "times column: span", EMBER_ECORRUPT, b_time_huge },
        { "stacks column: stack 1", EMBER_ECORRUPT, b_stack_zero_gap },
        { "stacks column: stack 1", EMBER_ECORRUPT, b_stack_wrap },
        { "stacks column", EMBER_ECORRUPT, b_stack_first },
        { "counts column: stack 0", EMBER_ECORRUPT, b_count_zero },
        { "counts column: sum", EMBER_ECORRUPT, b_count_sum },
        { "counts column: stack 0", EMBER_ECORRUPT, b_count_many },
        { "profiles column: stack 0", EMBER_ECORRUPT, b_prof_range },
        { "profiles column: stack 1", EMBER_ECORRUPT, b_prof_gap },
        { "profiles column: stack 0", EMBER_ECORRUPT, b_prof_huge },
        { "totals column: profile 2", EMBER_ECORRUPT, b_values },
        { "values column", EMBER_ECORRUPT, b_values_short },
        { "totals column: profile 2", EMBER_ECORRUPT, b_totals },
    };

    (void)state;
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        craft c = craft_base();
        bs[i].apply(&c);
        craft_expect(&c, bs[i].rc, bs[i].what);
    }
}

/* Edits the built bytes of the base chunk at OFF, reseals, decodes. */
static int craft_poke(size_t off, uint8_t v, size_t *lenp)
{
    craft c = craft_base();
    uint8_t p[1024];
    size_t len = craft_build(&c, p);

    p[off] = v;
    len = lenp ? *lenp : len;
    reseal(p, len);
    return decode_copy(NULL, p, len, EM_COL_ALL);
}

static void test_crafted_layout(void **state)
{
    size_t cut = 44 + 80 + 3;   /* inside the columns */

    (void)state;
    assert_int_equal(craft_poke(45, 2, NULL), EMBER_EFORMAT); /* encoding */
    assert_int_equal(craft_poke(44, 1, NULL), EMBER_ECORRUPT); /* id */
    assert_int_equal(craft_poke(6, 7, NULL), EMBER_ECORRUPT);  /* ncols */
    assert_int_equal(craft_poke(6, 65, NULL), EMBER_ECORRUPT);
    assert_int_equal(craft_poke(0, 'X', NULL), EMBER_ECORRUPT); /* magic */
    assert_null(strstr(em_errmsg(), "checksum"));
    assert_int_equal(craft_poke(46, 5, NULL), EMBER_ECORRUPT); /* raw len */
    assert_int_equal(craft_poke(50, 9, NULL), EMBER_ECORRUPT); /* stored */
    assert_int_equal(craft_poke(44 + 80, 0x80, NULL), EMBER_ECORRUPT);
    assert_int_equal(craft_poke(148, 0x82, NULL), EMBER_ECORRUPT);
    assert_non_null(strstr(em_errmsg(), "values column: stack 1: bad varint"));
    assert_int_equal(craft_poke(44 + 80, 0xc8, &cut), EMBER_ECORRUPT);
    assert_non_null(strstr(em_errmsg(), "left"));
    cut = 30;                   /* shorter than a header */
    assert_int_equal(craft_poke(0, 0x45, &cut), EMBER_ECORRUPT);
    cut = 60;                   /* shorter than its directory */
    assert_int_equal(craft_poke(0, 0x45, &cut), EMBER_ECORRUPT);
    assert_non_null(strstr(em_errmsg(), "directory"));
}

/* A zstd column of the base chunk: the values column compressed, with its
** recorded raw length RAW_DELTA off the truth. */
static int craft_zstd(int raw_delta, uint32_t stored_raw_override)
{
    craft c = craft_base();
    uint8_t p[1024], q[1024], z[256];
    size_t len = craft_build(&c, p), vals = len - 4, zlen, at;

    zlen = ZSTD_compress(z, sizeof z, p + vals, 4, 1);
    assert_false(ZSTD_isError(zlen));
    memcpy(q, p, vals);
    memcpy(q + vals, z, zlen);
    at = 44 + 70;
    q[at + 1] = 1;
    em_put_le32(q + at + 2, stored_raw_override ? stored_raw_override
                                                : (uint32_t)(4 + raw_delta));
    em_put_le32(q + at + 6, (uint32_t)zlen);
    reseal(q, vals + zlen);
    return decode_copy(NULL, q, vals + zlen, EM_COL_ALL);
}

static void test_crafted_zstd(void **state)
{
    (void)state;
    assert_int_equal(craft_zstd(0, 0), EMBER_OK);
    assert_int_equal(craft_zstd(1, 0), EMBER_ECORRUPT);
    assert_non_null(strstr(em_errmsg(), "zstd frame"));
    assert_int_equal(craft_zstd(-1, 0), EMBER_ECORRUPT);
    assert_int_equal(craft_zstd(0, 41), EMBER_ECORRUPT);  /* > 10 x count */
    assert_non_null(strstr(em_errmsg(), "cannot hold"));
}

/* ---- bad arguments ------------------------------------------------------ */

static void test_bad_arguments(void **state)
{
    const uint32_t up[] = { 1, 2 }, dup[] = { 2, 2 }, down[] = { 3, 1 };
    const int64_t v[] = { 1, 2 };
    em_chunk_profile p = { 0, 0, 0, dup, v, 2 };
    em_buf b = { 0 };
    em_chunk ch;
    em_chunk_profile *ps;

    (void)state;
    assert_int_equal(em_buf_put(&b, "x", 1), EMBER_OK);
    assert_int_equal(em_chunk_encode(NULL, &p, 1, 0, 3, &b), EMBER_EINVAL);
    assert_non_null(strstr(em_errmsg(), "not ascending"));
    p.stacks = down;
    assert_int_equal(em_chunk_encode(NULL, &p, 1, 0, 3, &b), EMBER_EINVAL);
    p.stacks = NULL;
    assert_int_equal(em_chunk_encode(NULL, &p, 1, 0, 3, &b), EMBER_EINVAL);
    p.stacks = up;
    assert_int_equal(em_chunk_encode(NULL, &p, 1, 0x10, 3, &b),
                     EMBER_EINVAL);
    assert_int_equal(em_chunk_encode(NULL, &p, EM_CHUNK_MAX_PROFILES + 1, 0,
                                     3, &b), EMBER_ELIMIT);
    assert_int_equal(b.len, 1);             /* failures append nothing */
    assert_int_equal(em_chunk_encode(NULL, &p, 1, 0, 3, &b), EMBER_OK);
    assert_int_equal(em_chunk_decode(NULL, b.p + 1, b.len - 1, 16, &ch),
                     EMBER_EINVAL);
    assert_int_equal(em_chunk_decode(NULL, b.p + 1, b.len - 1, EM_COL_TIMES,
                                     &ch), EMBER_OK);
    assert_int_equal(em_chunk_transpose(&ch, &ps), EMBER_EINVAL);
    assert_null(ps);
    em_chunk_release(&ch);
    em_buf_free(&b);
}

/* ---- allocation failures ------------------------------------------------ */

/* Fails the Nth allocation for N = 1, 2, ... until encoding succeeds: each
** failure must be ENOMEM, append nothing, and leak nothing (ASan). */
static void test_alloc_fail_encode(void **state)
{
    tset t;
    uint64_t n;

    (void)state;
    gen_random(&t, 21, 100, 100, 0);
    for (n = 1;; n++) {
        em_codec *c = NULL;
        em_buf b = { 0 };
        int rc;

        em_alloc_fail_at(n);
        rc = em_codec_new(&c);
        if (rc == EMBER_OK)
            rc = em_chunk_encode(c, t.ps, t.np, 0, 3, &b);
        em_alloc_fail_at(0);
        em_codec_free(c);
        if (rc == EMBER_OK) {
            assert_int_equal(decode_copy(NULL, b.p, b.len, EM_COL_ALL),
                             EMBER_OK);
            em_buf_free(&b);
            break;
        }
        assert_int_equal(rc, EMBER_ENOMEM);
        assert_int_equal(b.len, 0);
        em_buf_free(&b);
    }
    assert_true(n > 5);
    tset_free(&t);
}

/* The same with one codec throughout: a failure must leave it usable. */
static void test_alloc_fail_reuse(void **state)
{
    em_codec *c;
    em_buf b = { 0 };
    em_chunk ch;
    tset t;
    int rc = EMBER_ENOMEM;

    (void)state;
    gen_random(&t, 23, 100, 100, 0);
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    for (uint64_t n = 1; rc != EMBER_OK; n++) {
        em_alloc_fail_at(n);
        rc = em_chunk_encode(c, t.ps, t.np, 0, 3, &b);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || (rc == EMBER_ENOMEM && b.len == 0));
    }
    rc = EMBER_ENOMEM;
    for (uint64_t n = 1; rc != EMBER_OK; n++) {
        em_alloc_fail_at(n);
        rc = em_chunk_decode(c, b.p, b.len, EM_COL_ALL, &ch);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
    }
    check_chunk(&t, &ch, EM_COL_ALL);
    em_chunk_release(&ch);
    em_buf_free(&b);
    em_codec_free(c);
    tset_free(&t);
}

static void test_alloc_fail_decode(void **state)
{
    em_buf b = { 0 };
    tset t;
    uint64_t n;

    (void)state;
    gen_random(&t, 22, 100, 100, 0);
    assert_int_equal(em_chunk_encode(NULL, t.ps, t.np, 0, 3, &b), EMBER_OK);
    for (n = 1;; n++) {
        em_chunk ch;
        em_chunk_profile *ps = NULL;
        int rc;

        em_alloc_fail_at(n);
        rc = em_chunk_decode(NULL, b.p, b.len, EM_COL_ALL, &ch);
        if (rc == EMBER_OK) {
            rc = em_chunk_transpose(&ch, &ps);
            em_chunk_release(&ch);
        }
        em_alloc_fail_at(0);
        if (rc == EMBER_OK) {
            em_free(ps);
            break;
        }
        assert_int_equal(rc, EMBER_ENOMEM);
        assert_null(ch.mem);
        assert_null(ps);
    }
    assert_true(n > 3);
    em_buf_free(&b);
    tset_free(&t);
}

/* ---- a realistic dataset: size and speed, printed ----------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One hour of a CPU profile every 5 s (720 profiles), 2000 samples each
** drawn from a Zipf pool of 20000 stacks; values are counts times 10 ms. */
static void gen_realistic(tset *t)
{
    uint64_t s = 2024;
    uint32_t *pool = malloc(20000 * sizeof *pool);

    assert_non_null(pool);
    for (uint32_t i = 0; i < 20000; i++)
        pool[i] = 5000 + i * 3 + (uint32_t)(rng_next(&s) % 3);
    tset_init(t, 720, 720 * 2000);
    for (size_t i = 0; i < 720; i++)
        gen_profile(t, &s, pool, 20000, 2000,
                    1732170000000 + 5000 * (int64_t)i, 0);
    free(pool);
}

static void test_realistic_info(void **state)
{
    em_codec *c;
    em_buf b = { 0 };
    em_chunk ch;
    tset t;
    double t0, t1, t2;
    int64_t sink = 0;
    const int reps = 10;

    (void)state;
    gen_realistic(&t);
    assert_int_equal(em_codec_new(&c), EMBER_OK);
    t0 = now_s();
    assert_int_equal(em_chunk_encode(c, t.ps, t.np, 0, 3, &b), EMBER_OK);
    t1 = now_s();
    for (int r = 0; r < reps; r++) {
        assert_int_equal(em_chunk_decode(c, b.p, b.len, EM_COL_SAMPLES, &ch),
                         EMBER_OK);
        for (uint64_t k = 0; k < ch.h.nsamples; k++)    /* merge-like sum */
            sink += ch.sample_value[k];
        em_chunk_release(&ch);
    }
    t2 = now_s();
    print_message("info: %zu profiles, %zu samples, %zu bytes: %.3f "
                  "bytes/sample; encode %.1fM samples/s, decode+sum %.1fM "
                  "samples/s (%" PRId64 ")\n", t.np, t.ns, b.len,
                  (double)b.len / (double)t.ns, (double)t.ns / (t1 - t0) / 1e6,
                  (double)t.ns * reps / (t2 - t1) / 1e6, sink % 10);
    assert_int_equal(em_chunk_decode(c, b.p, b.len, EM_COL_ALL, &ch),
                     EMBER_OK);
    check_chunk(&t, &ch, EM_COL_ALL);
    em_chunk_release(&ch);
    em_buf_free(&b);
    em_codec_free(c);
    tset_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_chunk),
        cmocka_unit_test(test_one_sample),
        cmocka_unit_test(test_one_profile),
        cmocka_unit_test(test_extremes),
        cmocka_unit_test(test_equal_times),
        cmocka_unit_test(test_unsorted_input),
        cmocka_unit_test(test_empty_profiles),
        cmocka_unit_test(test_random_zipf),
        cmocka_unit_test(test_decode_kept),
        cmocka_unit_test(test_decode_kept_damage),
        cmocka_unit_test(test_zstd_columns),
        cmocka_unit_test(test_header_read),
        cmocka_unit_test(test_byte_flips),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_hash_golden),
        cmocka_unit_test(test_crafted_valid),
        cmocka_unit_test(test_crafted_corrupt),
        cmocka_unit_test(test_crafted_layout),
        cmocka_unit_test(test_crafted_zstd),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_alloc_fail_encode),
        cmocka_unit_test(test_alloc_fail_reuse),
        cmocka_unit_test(test_alloc_fail_decode),
        cmocka_unit_test(test_realistic_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
