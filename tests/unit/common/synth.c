/*
** tests/unit/common/synth.c: large pprof inputs written straight in the
** wire format (see testutil.h), for tests of import memory that need
** millions of samples: building them through protobuf-c would hold the
** whole message in memory twice before the test even starts.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/common/testutil.h"

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static void w_reserve(wbuf *b, size_t n)
{
    if (b->len + n <= b->cap)
        return;
    while (b->len + n > b->cap)
        b->cap = b->cap ? b->cap * 2 : 4096;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
}

static void w_varint(wbuf *b, uint64_t v)
{
    w_reserve(b, 10);
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void w_tag(wbuf *b, unsigned field, unsigned wire)
{
    w_varint(b, (uint64_t)field << 3 | wire);
}

static void w_bytes(wbuf *b, unsigned field, const void *p, size_t n)
{
    w_tag(b, field, 2);
    w_varint(b, n);
    w_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void w_uint(wbuf *b, unsigned field, uint64_t v)
{
    w_tag(b, field, 0);
    w_varint(b, v);
}

/* A message of field FIELD holding the varint fields (field, value) of
** the N pairs at KV. */
static void w_msg(wbuf *b, unsigned field, const uint64_t *kv, size_t n)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        len += varint_len(kv[2 * i] << 3) + varint_len(kv[2 * i + 1]);
    w_tag(b, field, 2);
    w_varint(b, len);
    for (size_t i = 0; i < n; i++)
        w_uint(b, (unsigned)kv[2 * i], kv[2 * i + 1]);
}

/* A packed repeated varint field of the N values at V. */
static size_t packed_len(const uint64_t *v, size_t n)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        len += varint_len(v[i]);
    return len;
}

static void w_packed(wbuf *b, unsigned field, const uint64_t *v, size_t n)
{
    w_tag(b, field, 2);
    w_varint(b, packed_len(v, n));
    for (size_t i = 0; i < n; i++)
        w_varint(b, v[i]);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* String table: "", then the fixed names, then f0 .. f<NLOCS-1>. */
enum { S_SAMPLES = 1, S_COUNT, S_CPU, S_NANOS, S_FILE, S_BIN, S_FIRST_FN };

static void w_strings(wbuf *b, uint32_t nlocs)
{
    static const char *const fixed[] = { "", "samples", "count", "cpu",
                                         "nanoseconds", "main.go", "/bin/x" };
    char name[32];

    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        w_bytes(b, 6, fixed[i], strlen(fixed[i]));
    for (uint32_t i = 0; i < nlocs; i++) {
        int n = snprintf(name, sizeof name, "main.f%u", i);
        w_bytes(b, 6, name, (size_t)n);
    }
}

uint8_t *tu_pprof_synth(uint64_t nsamples, uint32_t nlocs, uint32_t depth,
                        uint64_t seed, size_t *len)
{
    wbuf b = { 0 };
    uint64_t st = seed | 1, locs[64], vals[2];
    uint64_t vt1[] = { 1, S_SAMPLES, 2, S_COUNT };
    uint64_t vt2[] = { 1, S_CPU, 2, S_NANOS };
    uint64_t map[] = { 1, 1, 2, 0x400000, 3, 0x800000, 5, S_BIN };

    assert_true(depth >= 1 && depth <= 64 && nlocs >= 1);
    w_msg(&b, 1, vt1, 2);
    w_msg(&b, 1, vt2, 2);
    for (uint64_t i = 0; i < nsamples; i++) {
        size_t n1, n2;
        for (uint32_t k = 0; k < depth; k++)
            locs[k] = 1 + rnd(&st) % nlocs;
        vals[0] = 1 + rnd(&st) % 4;
        vals[1] = vals[0] * 10000000;
        n1 = packed_len(locs, depth);
        n2 = packed_len(vals, 2);
        w_tag(&b, 2, 2);
        w_varint(&b, 1 + varint_len(n1) + n1 + 1 + varint_len(n2) + n2);
        w_packed(&b, 1, locs, depth);
        w_packed(&b, 2, vals, 2);
    }
    w_msg(&b, 3, map, 4);
    for (uint32_t i = 0; i < nlocs; i++) {
        /* Location { id, mapping_id, address, line { function_id, line } } */
        uint64_t line[] = { 1, i + 1, 2, 10 + i % 100 };
        uint64_t head[] = { 1, i + 1, 2, 1, 3, 0x400000 + 16 * (uint64_t)i };
        size_t ll = varint_len(1 << 3) + varint_len(i + 1) +
                    varint_len(2 << 3) + varint_len(10 + i % 100);
        size_t hl = 0;
        for (size_t k = 0; k < 3; k++)
            hl += varint_len(head[2 * k] << 3) + varint_len(head[2 * k + 1]);
        w_tag(&b, 4, 2);
        w_varint(&b, hl + 1 + varint_len(ll) + ll);
        for (size_t k = 0; k < 3; k++)
            w_uint(&b, (unsigned)head[2 * k], head[2 * k + 1]);
        w_msg(&b, 4, line, 2);
    }
    for (uint32_t i = 0; i < nlocs; i++) {
        uint64_t fn[] = { 1, i + 1, 2, S_FIRST_FN + i, 3, S_FIRST_FN + i,
                          4, S_FILE };
        w_msg(&b, 5, fn, 4);
    }
    w_strings(&b, nlocs);
    w_uint(&b, 9, 1732170000000000000ull);
    w_uint(&b, 10, 10000000000ull);
    w_msg(&b, 11, vt2, 2);
    w_uint(&b, 12, 10000000);
    *len = b.len;
    return b.p;
}
