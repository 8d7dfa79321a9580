/*
** tests/unit/test_render.c: the renderers on hand-built resolved profiles
** (no engine): collapsed and top outputs as golden text, pprof's flat/cum
** semantics (recursion counted once, inlined frames, zero and negative
** values, ties), its sort orders, trimming, unit scaling and percentages,
** plus allocation failure at every call, and the hash map and string table
** the renderers build on.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "query/query.h"
#include "query/query_int.h"
#include "query/render_int.h"
#include "common/testutil.h"

/* ---- building profiles ---------------------------------------------------------- */

/* Adds a stack written root first, as collapsed stacks are: "main;foo;bar".
** A trailing '!' marks a frame inlined into its caller (the name before
** it), so "main;foo;bar!" is one location holding foo with bar inlined. */
static void add(em_rprofile *p, const char *spec, int64_t value)
{
    em_rframe frames[64];
    char buf[512], *names[64], *save = NULL;
    size_t n = 0;

    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok_r(buf, ";", &save); tok != NULL && n < 64;
         tok = strtok_r(NULL, ";", &save))
        names[n++] = tok;
    for (size_t i = 0; i < n; i++) {        /* leaf first */
        char *name = names[n - 1 - i];
        size_t len = strlen(name);
        frames[i].flags = 0;
        if (len > 0 && name[len - 1] == '!') {
            frames[i].flags = EM_RFRAME_INLINED;
            name[--len] = '\0';
        }
        assert_int_equal(em_strtab_intern(&p->names, name, len,
                                          &frames[i].fn), EMBER_OK);
    }
    assert_int_equal(em_rprofile_add(p, frames, n, value), EMBER_OK);
}

static void init(em_rprofile *p, const char *type)
{
    assert_int_equal(em_rprofile_init(p, type), EMBER_OK);
}

/* The recursion profile: a recurses, b and c tie on flat. */
static void recursion_profile(em_rprofile *p)
{
    init(p, "process_cpu:samples:count:cpu:nanoseconds:delta");
    add(p, "main;a;a;a", 10);
    add(p, "main;a;b", 5);
    add(p, "main;c", 5);
}

/* ---- rendering to strings ------------------------------------------------------- */


static void out_check(tu_out *o, const char *want)
{
    assert_int_equal(fclose(o->f), 0);
    if (strcmp(o->text, want) != 0) {
        print_message("--- got:\n%s--- want:\n%s---\n", o->text, want);
        fail();
    }
    free(o->text);
}

static void expect_top(const em_rprofile *p, const em_top_opts *opts,
                       const char *want)
{
    tu_out o;

    tu_out_open(&o);
    assert_int_equal(em_render_top(o.f, p, opts), EMBER_OK);
    out_check(&o, want);
}

static void expect_collapsed(const em_rprofile *p, const char *want)
{
    tu_out o;

    tu_out_open(&o);
    assert_int_equal(em_render_collapsed(o.f, p), EMBER_OK);
    out_check(&o, want);
}

/* ---- the resolved profile ------------------------------------------------------- */

static void test_rprofile_type_fields(void **state)
{
    em_rprofile p;
    em_rframe bad = { .fn = 7 };
    (void)state;

    init(&p, "memory:inuse_space:bytes:space:bytes");
    assert_string_equal(p.sample_type, "inuse_space");
    assert_string_equal(p.unit, "bytes");
    em_rprofile_free(&p);
    init(&p, "x:cpu:NanoSeconds:cpu:nanoseconds:delta");
    assert_string_equal(p.sample_type, "cpu");
    assert_string_equal(p.unit, "nanoseconds");
    em_rprofile_free(&p);
    init(&p, NULL);
    assert_string_equal(p.sample_type, "");
    assert_string_equal(p.unit, "count");
    assert_int_equal(em_rprofile_add(&p, &bad, 1, 1), EMBER_EINVAL);
    assert_int_equal(p.nstacks, 0);
    em_rprofile_free(&p);
    em_rprofile_free(NULL);
}

/* em_map64 against a plain array: dense and scattered keys through several
** growths, overwrites, misses, and the keys 0 and UINT64_MAX (the slots'
** free marker, kept aside). */
static void test_map64(void **state)
{
    enum { N = 5000 };
    static uint64_t keys[N], vals[N];
    em_map64 m = { 0 };
    uint64_t v = 0, x = 0x9e3779b97f4a7c15ULL;

    (void)state;
    assert_false(em_map64_get(&m, 7, &v));
    assert_false(em_map64_get(&m, UINT64_MAX, &v));
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        keys[i] = i % 2 ? i : x;            /* dense ids and random keys */
        vals[i] = i * 3;
        assert_int_equal(em_map64_put(&m, keys[i], vals[i] + 1), EMBER_OK);
        assert_int_equal(em_map64_put(&m, keys[i], vals[i]), EMBER_OK);
    }
    assert_int_equal(em_map64_put(&m, UINT64_MAX, 42), EMBER_OK);
    assert_int_equal(em_map64_put(&m, 0, 43), EMBER_OK);
    assert_int_equal(m.count, N + 1);       /* 0 joined; UINT64_MAX aside */
    for (size_t i = 1; i < N; i++) {
        assert_true(em_map64_get(&m, keys[i], &v));
        assert_true(v == vals[i]);
    }
    assert_true(em_map64_get(&m, UINT64_MAX, &v) && v == 42);
    assert_true(em_map64_get(&m, 0, &v) && v == 43);
    assert_true(em_map64_get(&m, 1, NULL));
    assert_false(em_map64_get(&m, N + 1, NULL));
    assert_false(em_map64_get(&m, UINT64_MAX - 1, NULL));
    em_map64_free(&m);
    assert_false(em_map64_get(&m, UINT64_MAX, NULL));
}

static void test_strtab(void **state)
{
    em_strtab t = { 0 };
    uint32_t a, b, c;
    char name[32];
    (void)state;

    assert_int_equal(em_strtab_intern(&t, "main", 4, &a), EMBER_OK);
    assert_int_equal(em_strtab_intern(&t, "mainly", 4, &b), EMBER_OK);
    assert_int_equal(em_strtab_intern(&t, "", 0, &c), EMBER_OK);
    assert_int_equal(a, 0);
    assert_int_equal(b, 0);
    assert_int_equal(c, 1);
    for (int i = 0; i < 5000; i++) {        /* grows through rehashes */
        int n = snprintf(name, sizeof name, "f%d", i);
        assert_int_equal(em_strtab_intern(&t, name, (size_t)n, &a), EMBER_OK);
        assert_int_equal(a, (uint32_t)i + 2);
    }
    assert_int_equal(em_strtab_intern(&t, "f4321", 5, &a), EMBER_OK);
    assert_int_equal(a, 4323);
    assert_string_equal(em_strtab_get(&t, 4323), "f4321");
    assert_string_equal(em_strtab_get(&t, 1), "");
    em_strtab_free(&t);
}

/* ---- collapsed ---------------------------------------------------------------------- */

static void test_collapsed_sorted(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, NULL);
    add(&p, "main;foo", 10);
    add(&p, "main;bar", 5);
    add(&p, "main;foo;baz", 3);
    add(&p, "main", 1);
    expect_collapsed(&p, "main 1\nmain;bar 5\nmain;foo 10\nmain;foo;baz 3\n");
    em_rprofile_free(&p);
}

static void test_collapsed_merge_zero_negative(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, NULL);
    add(&p, "a;b", 5);
    add(&p, "a;c", -3);
    add(&p, "a;b", -5);         /* cancels the first: left tu_out */
    add(&p, "a;d", 0);          /* zero: left tu_out */
    add(&p, "a;c", 1);          /* same text as an earlier stack: summed */
    add(&p, "a;e", INT64_MAX);
    add(&p, "a;e", 1);          /* sums wrap as the engine's do */
    expect_collapsed(&p, "a;c -2\na;e -9223372036854775808\n");
    em_rprofile_free(&p);
}

static void test_collapsed_recursion_and_inline(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, NULL);
    add(&p, "main;a;a;a", 10);
    /* one location main, one holding foo with bar and baz inlined:
    ** stored leaf first as baz, bar, foo, main; written root first */
    add(&p, "main;foo;bar!;baz!", 4);
    expect_collapsed(&p, "main;a;a;a 10\nmain;foo;bar;baz 4\n");
    em_rprofile_free(&p);
}

static void test_collapsed_names_and_empty(void **state)
{
    em_rprofile p;
    em_rframe f[2];
    (void)state;

    init(&p, NULL);
    assert_int_equal(em_strtab_intern(&p.names, "ns::op;x", 8, &f[1].fn), 0);
    assert_int_equal(em_strtab_intern(&p.names, "two\nlines\t", 10,
                                      &f[0].fn), 0);
    f[0].flags = f[1].flags = 0;
    assert_int_equal(em_rprofile_add(&p, f, 2, 7), EMBER_OK);
    assert_int_equal(em_rprofile_add(&p, NULL, 0, 4), EMBER_OK);
    expect_collapsed(&p, "<empty> 4\nns::op_x;two lines  7\n");
    em_rprofile_free(&p);
    init(&p, NULL);
    expect_collapsed(&p, "");
    em_rprofile_free(&p);
}

/* ---- top ------------------------------------------------------------------------------ */

static void test_top_recursion_counted_once(void **state)
{
    em_rprofile p;
    (void)state;

    recursion_profile(&p);
    expect_top(&p, NULL,
        "Type: samples\n"
        "Showing nodes accounting for 20, 100% of 20 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        10 50.00% 50.00%         15 75.00%  a\n"
        "         5 25.00% 75.00%          5 25.00%  b\n"
        "         5 25.00%   100%          5 25.00%  c\n"
        "         0     0%   100%         20   100%  main\n");
    em_rprofile_free(&p);
}

static void test_top_nanoseconds(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta");
    add(&p, "main;work", 1200000000);
    add(&p, "main;idle", 350000000);
    add(&p, "main;gc", 10000000);
    /* one unit for the report: 10ms is shown as 0.01s, as pprof does */
    expect_top(&p, NULL,
        "Type: cpu\n"
        "Showing nodes accounting for 1.56s, 100% of 1.56s total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "     1.20s 76.92% 76.92%      1.20s 76.92%  work\n"
        "     0.35s 22.44% 99.36%      0.35s 22.44%  idle\n"
        "     0.01s  0.64%   100%      0.01s  0.64%  gc\n"
        "         0     0%   100%      1.56s   100%  main\n");
    em_rprofile_free(&p);
}

static void test_top_bytes(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, "memory:alloc_space:bytes:space:bytes");
    add(&p, "main;alloc", 3 * 1048576);
    add(&p, "main;small", 1536);
    expect_top(&p, NULL,
        "Type: alloc_space\n"
        "Showing nodes accounting for 3073.50kB, 100% of 3073.50kB total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "    3072kB   100%   100%     3072kB   100%  alloc\n"
        "    1.50kB 0.049%   100%     1.50kB 0.049%  small\n"
        "         0     0%   100%  3073.50kB   100%  main\n");
    em_rprofile_free(&p);
}

static void test_top_inline(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, NULL);
    add(&p, "main;foo;bar!", 10);   /* bar inlined into foo: leaf is bar */
    add(&p, "main;bar", 5);         /* bar also called normally */
    add(&p, "main;x;y!", 3);        /* y only ever inlined */
    expect_top(&p, NULL,
        "Showing nodes accounting for 18, 100% of 18 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        15 83.33% 83.33%         15 83.33%  bar (partial-inline)\n"
        "         3 16.67%   100%          3 16.67%  y (inline)\n"
        "         0     0%   100%         10 55.56%  foo\n"
        "         0     0%   100%         18   100%  main\n"
        "         0     0%   100%          3 16.67%  x\n");
    em_rprofile_free(&p);
}

static void test_top_negative_and_zero(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, NULL);
    add(&p, "main;a", 10);
    add(&p, "main;b", -4);
    add(&p, "main;c", 0);       /* skipped: never a node */
    add(&p, "main;d", 3);
    add(&p, "main;d", -3);      /* d cancels to flat 0, cum 0: not shown */
    /* total is the sum of |values|: 20; sort by |flat| */
    expect_top(&p, NULL,
        "Showing nodes accounting for 6, 30.00% of 20 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        10 50.00% 50.00%         10 50.00%  a\n"
        "        -4 20.00% 30.00%         -4 20.00%  b\n"
        "         0     0% 30.00%          6 30.00%  main\n");
    em_rprofile_free(&p);
}

static void test_top_ties_sort_by_name(void **state)
{
    em_rprofile p;
    (void)state;

    /* pprof's FlatNameOrder: equal |flat| sorts by name before cum, so
    ** alpha (cum 2) precedes beta (cum 7) */
    init(&p, NULL);
    add(&p, "beta", 2);
    add(&p, "beta;gamma", 5);
    add(&p, "alpha", 2);
    add(&p, "zeta", -2);
    expect_top(&p, NULL,
        "Showing nodes accounting for 7, 63.64% of 11 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "         5 45.45% 45.45%          5 45.45%  gamma\n"
        "         2 18.18% 63.64%          2 18.18%  alpha\n"
        "         2 18.18% 81.82%          7 63.64%  beta\n"
        "        -2 18.18% 63.64%         -2 18.18%  zeta\n");
    em_rprofile_free(&p);
}

static void test_top_cum_sort_and_limit(void **state)
{
    em_top_opts o = { .sz = sizeof o, .cum_sort = true, .limit = 2 };
    em_rprofile p;
    (void)state;

    /* b and c are dropped; their samples no longer reach a kept leaf, so
    ** they add to no flat (pprof rebuilds the graph over the kept nodes) */
    recursion_profile(&p);
    expect_top(&p, &o,
        "Type: samples\n"
        "Showing nodes accounting for 10, 50.00% of 20 total\n"
        "Showing top 2 nodes out of 4\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "         0     0%     0%         20   100%  main\n"
        "        10 50.00% 50.00%         15 75.00%  a\n");
    o.limit = 10;
    expect_top(&p, &o,
        "Type: samples\n"
        "Showing nodes accounting for 20, 100% of 20 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "         0     0%     0%         20   100%  main\n"
        "        10 50.00% 50.00%         15 75.00%  a\n"
        "         5 25.00% 75.00%          5 25.00%  b\n"
        "         5 25.00%   100%          5 25.00%  c\n");
    em_rprofile_free(&p);
}

static void test_top_node_fraction(void **state)
{
    em_top_opts o = { .sz = sizeof o, .node_fraction = 0.3 };
    em_rprofile p;
    (void)state;

    recursion_profile(&p);
    expect_top(&p, &o,
        "Type: samples\n"
        "Showing nodes accounting for 10, 50.00% of 20 total\n"
        "Dropped 2 nodes (cum <= 6)\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        10 50.00% 50.00%         15 75.00%  a\n"
        "         0     0% 50.00%         20   100%  main\n");
    em_rprofile_free(&p);
}

static void test_top_edge_fraction_hides_light_inline_edge(void **state)
{
    em_top_opts o = { .sz = sizeof o, .edge_fraction = 0.1 };
    em_rprofile p;
    (void)state;

    /* the inlined call into bar weighs 1 of 21: under the edge cutoff, so
    ** bar counts as called normally only */
    init(&p, NULL);
    add(&p, "main;bar", 20);
    add(&p, "main;foo;bar!", 1);
    expect_top(&p, &o,
        "Showing nodes accounting for 21, 100% of 21 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        21   100%   100%         21   100%  bar\n"
        "         0     0%   100%          1  4.76%  foo\n"
        "         0     0%   100%         21   100%  main\n");
    em_rprofile_free(&p);
}

static void test_top_empty(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, "x:cpu:nanoseconds:cpu:nanoseconds");
    add(&p, "", 0);
    expect_top(&p, NULL,
        "Type: cpu\n"
        "Showing nodes accounting for 0, 0% of 0 total\n"
        "      flat  flat%   sum%        cum   cum%\n");
    em_rprofile_free(&p);
}

static void test_top_empty_stack_counts_in_total(void **state)
{
    em_rprofile p;
    (void)state;

    init(&p, NULL);
    add(&p, "", 5);
    add(&p, "f", 15);
    expect_top(&p, NULL,
        "Showing nodes accounting for 15, 75.00% of 20 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        15 75.00% 75.00%         15 75.00%  f\n");
    em_rprofile_free(&p);
}

/* ---- value formatting ------------------------------------------------------------------ */

static void test_format_value(void **state)
{
    const struct { int64_t v; const char *unit, *want; } c[] = {
        { 1200000000, "nanoseconds", "1.20s" },
        { 350000000, "nanoseconds", "350ms" },
        { 999, "nanoseconds", "999ns" },
        { 1000, "nanoseconds", "1us" },
        { 1500, "microseconds", "1.50ms" },
        { -1500000, "nanoseconds", "-1.50ms" },
        { INT64_C(7200000000000), "nanoseconds", "2hrs" },
        { 0, "nanoseconds", "0" },
        { 1536, "bytes", "1.50kB" },
        { 3145728, "bytes", "3MB" },
        { INT64_C(1099511627776), "bytes", "1TB" },
        { 512, "bytes", "512B" },
        { 42, "count", "42" },
        { -7, "count", "-7" },
        { 5, "samples", "5" },
        { 1234567, "count", "1234567" },
        { 3, "", "3" },
    };
    char buf[EM_VALUE_MAX];
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(c); i++)
        assert_string_equal(em_format_value(c[i].v, c[i].unit, buf),
                            c[i].want);
    assert_string_equal(em_format_value_as(10000000, "nanoseconds", "s", buf),
                        "0.01s");
    assert_string_equal(em_format_value_as(4000, "nanoseconds", "ms", buf),
                        "0");
    assert_string_equal(em_format_value_as(5, "samples", "samples", buf),
                        "5samples");
    assert_string_equal(em_format_value_as(5, "count", "count", buf), "5");
    assert_string_equal(em_format_value_as(1536, "bytes", "kB", buf),
                        "1.50kB");
    assert_string_equal(em_format_value_as(7200, "seconds", "hrs", buf),
                        "2hrs");
    assert_string_equal(em_format_value(INT64_MIN, "count", buf),
                        "-9223372036854775808");
}

static void test_unit_pick(void **state)
{
    (void)state;
    /* 10ms against 1.56s: 0.01s fits, so seconds */
    assert_string_equal(em_unit_pick(10000000, 1560000000, "nanoseconds"),
                        "s");
    /* 100ms against 1.5s: 100x the minimum is over the total: ms */
    assert_string_equal(em_unit_pick(100000000, 1500000000, "nanoseconds"),
                        "ms");
    assert_string_equal(em_unit_pick(5000, 9000, "nanoseconds"), "us");
    assert_string_equal(em_unit_pick(512, 10485760, "bytes"), "kB");
    assert_string_equal(em_unit_pick(5, 20, "count"), "count");
    assert_string_equal(em_unit_pick(5, 20, "samples"), "samples");
    assert_string_equal(em_unit_pick(INT64_MAX, INT64_MAX, "bytes"), "PB");
}

static void test_format_percent(void **state)
{
    const struct { int64_t v, total; const char *want; } c[] = {
        { 1, 2, "50.00%" }, { 9995, 10000, "  100%" },
        { 10005, 10000, "  100%" }, { 9994, 10000, "99.94%" },
        { 1, 100, " 1.00%" }, { 1, 1000, "  0.1%" }, { 1, 100000, "0.001%" },
        { 1, 1000000, "0.0001%" }, { 1, 10000000, "1e-05%" },
        { 0, 0, "    0%" }, { 5, 0, "    0%" }, { -1, 4, "25.00%" },
        { 3, 2, "150.00%" },
    };
    char buf[16];
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(c); i++)
        assert_string_equal(em_format_percent(c[i].v, c[i].total, buf),
                            c[i].want);
}

/* ---- allocation failure --------------------------------------------------------------- */

typedef int (*render_fn)(FILE *, const em_rprofile *);

static int render_top_default(FILE *f, const em_rprofile *p)
{
    em_top_opts o = { .sz = sizeof o, .limit = 2, .node_fraction = 0.1 };
    return em_render_top(f, p, &o);
}

static void fail_each_allocation(render_fn fn)
{
    em_rprofile p;
    int rc = EMBER_ENOMEM;

    recursion_profile(&p);
    add(&p, "main;foo;bar!", 3);
    for (uint64_t i = 1; rc == EMBER_ENOMEM && i < 1000; i++) {
        tu_out o;
        tu_out_open(&o);
        em_alloc_fail_at(i);
        rc = fn(o.f, &p);
        em_alloc_fail_at(0);
        fclose(o.f);
        free(o.text);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
    }
    assert_int_equal(rc, EMBER_OK);
    em_rprofile_free(&p);
}

/* The text renderers read names with the strict decoder: an overlong form
** ("/" as C0 AF) is two bad bytes, two columns of '?', not one character
** copied through for a terminal to decode. */
static void test_fit_rejects_overlong(void **state)
{
    em_buf b = { 0 };
    (void)state;

    assert_int_equal(em_render_cols("a\xc0\xaf"), 3);
    assert_int_equal(em_render_cols("a\xed\xa0\x80"), 4);  /* surrogate */
    assert_int_equal(em_render_cols("h\xc3\xa9"), 2);
    assert_int_equal(em_render_fit(&b, "a\xc0\xaf" "b", 6), EMBER_OK);
    assert_int_equal(b.len, 6);
    assert_memory_equal(b.p, "a??b  ", 6);
    b.len = 0;
    assert_int_equal(em_render_fit(&b, "\xe0\x80\xafxyz", 5), EMBER_OK);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.p, "???..", 5);
    em_buf_free(&b);
}

static void test_render_out_of_memory(void **state)
{
    int rc = EMBER_ENOMEM;
    (void)state;

    fail_each_allocation(render_top_default);
    fail_each_allocation(em_render_collapsed);
    for (uint64_t i = 1; rc == EMBER_ENOMEM && i < 1000; i++) {
        em_rprofile p;
        em_alloc_fail_at(i);
        rc = em_rprofile_init(&p, "a:b:c:d:e");
        if (rc == EMBER_OK)
            rc = em_rprofile_add(&p, NULL, 0, 1);
        em_alloc_fail_at(0);
        em_rprofile_free(&p);
    }
    assert_int_equal(rc, EMBER_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rprofile_type_fields),
        cmocka_unit_test(test_strtab),
        cmocka_unit_test(test_map64),
        cmocka_unit_test(test_collapsed_sorted),
        cmocka_unit_test(test_collapsed_merge_zero_negative),
        cmocka_unit_test(test_collapsed_recursion_and_inline),
        cmocka_unit_test(test_collapsed_names_and_empty),
        cmocka_unit_test(test_top_recursion_counted_once),
        cmocka_unit_test(test_top_nanoseconds),
        cmocka_unit_test(test_top_bytes),
        cmocka_unit_test(test_top_inline),
        cmocka_unit_test(test_top_negative_and_zero),
        cmocka_unit_test(test_top_ties_sort_by_name),
        cmocka_unit_test(test_top_cum_sort_and_limit),
        cmocka_unit_test(test_top_node_fraction),
        cmocka_unit_test(test_top_edge_fraction_hides_light_inline_edge),
        cmocka_unit_test(test_top_empty),
        cmocka_unit_test(test_top_empty_stack_counts_in_total),
        cmocka_unit_test(test_format_value),
        cmocka_unit_test(test_unit_pick),
        cmocka_unit_test(test_format_percent),
        cmocka_unit_test(test_fit_rejects_overlong),
        cmocka_unit_test(test_render_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
