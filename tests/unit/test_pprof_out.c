/*
** tests/unit/test_pprof_out.c: the merged span (ember_merged_span) and the
** pprof encoder (ember_pprof_encode). A database made through the public
** API holds mappings, inlined locations, functions with files and lines,
** and profiles of two series with different times, durations and periods;
** the encoded bytes are inflated with zlib, unpacked with protobuf-c and
** checked field by field against the merged stacks and the snapshot.
** Also: errors, an empty merge, and every allocation failing in turn; and
** a query's -o pprof, which is the query's own answer whatever was written
** since and whatever database handle the render is given.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ember.h"
#include "engine/engine.h"
#include "proto/profile.pb-c.h"
#include "query/query.h"
#include "tests/unit/common/testutil.h"

#define TYPE "myprof:cpu:nanoseconds:wall:milliseconds:delta"
#define T0 1732170000000LL

typedef Perftools__Profiles__Profile pb_profile;

/* The fixture's symbols: Ember ids, for the checks. */
typedef struct fix {
    char *dir;
    ember_db *db;
    uint32_t map_unused, map_app, map_libc, map_bare;
    uint32_t s_inl, s_memcpy, s_addr, s_main, s_zero, s_bare, s_other;
} fix;

static uint32_t intern_fn(ember_txn *t, const char *name, const char *sys,
                          const char *file, int64_t start)
{
    ember_function f = { name, sys, file, start };
    uint32_t id;

    assert_int_equal(ember_intern_function(t, &f, &id), EMBER_OK);
    return id;
}

static uint32_t intern_map(ember_txn *t, uint64_t start, uint64_t limit,
                           uint64_t off, const char *file, const char *bid)
{
    ember_mapping m = { start, limit, off, file, bid };
    uint32_t id;

    assert_int_equal(ember_intern_mapping(t, &m, &id), EMBER_OK);
    return id;
}

static uint32_t intern_loc(ember_txn *t, uint32_t map, uint64_t addr,
                           const ember_line *lines, size_t n)
{
    ember_location l = { map, addr, lines, n };
    uint32_t id;

    assert_int_equal(ember_intern_location(t, &l, &id), EMBER_OK);
    return id;
}

static uint32_t intern_stack(ember_txn *t, const uint32_t *locs, size_t n)
{
    uint32_t id;

    assert_int_equal(ember_intern_stack(t, locs, n, &id), EMBER_OK);
    return id;
}

/* Symbols. Mappings are interned libc before app (so pprof ids follow
** Ember ids, not first use), plus one mapping no stack uses. */
static void fix_symbols(fix *f)
{
    ember_txn *t;
    uint32_t fmain, fwork, finl, fmemcpy, fsys, fzero, funused;
    uint32_t lmain, linl, lmemcpy, laddr, lsys, lbare, lzero, lunused;

    assert_int_equal(ember_txn_begin(f->db, &t), EMBER_OK);
    f->map_unused = intern_map(t, 0x1000, 0x2000, 0, "/unused", "00");
    f->map_libc = intern_map(t, 0x7f0000, 0x7f8000, 0x1000,
                             "/lib/libc.so.6", "deadbeef");
    f->map_app = intern_map(t, 0x400000, 0x500000, 0, "/bin/app", "abc123");
    f->map_bare = intern_map(t, 0x900000, 0x901000, 0, "/bin/bare", "");
    funused = intern_fn(t, "unused", "", "u.c", 1);
    fmain = intern_fn(t, "main", "main", "main.c", 10);
    fwork = intern_fn(t, "work", "_Z4workv", "work.c", 20);
    finl = intern_fn(t, "inl", "", "work.h", 30);
    fmemcpy = intern_fn(t, "memcpy", "", "", 0);
    fsys = intern_fn(t, "", "_ZN3sys4callEv", "", 0);
    fzero = intern_fn(t, "zero", "", "z.c", 40);
    {
        ember_line l_unused = { funused, 2 }, l_main = { fmain, 12 };
        ember_line l_inl[2] = { { finl, 31 }, { fwork, 22 } };
        ember_line l_memcpy = { fmemcpy, 0 }, l_sys = { fsys, 7 };
        ember_line l_zero = { fzero, 41 };
        lunused = intern_loc(t, f->map_unused, 0x1010, &l_unused, 1);
        lmain = intern_loc(t, f->map_app, 0x401000, &l_main, 1);
        linl = intern_loc(t, f->map_app, 0x402000, l_inl, 2);
        lmemcpy = intern_loc(t, f->map_libc, 0x7f0100, &l_memcpy, 1);
        laddr = intern_loc(t, f->map_libc, 0x7f0200, NULL, 0);
        lsys = intern_loc(t, 0, 0, &l_sys, 1);
        lbare = intern_loc(t, f->map_bare, 0x900010, NULL, 0);
        lzero = intern_loc(t, f->map_app, 0x403000, &l_zero, 1);
    }
    {
        uint32_t a[] = { linl, lmain }, b[] = { lmemcpy, linl, lmain };
        uint32_t c[] = { laddr, lsys, lmain }, d[] = { lmain };
        uint32_t z[] = { lzero, lmain }, o[] = { lunused };
        uint32_t e[] = { lbare, lmain };
        f->s_other = intern_stack(t, o, 1);
        f->s_inl = intern_stack(t, a, 2);
        f->s_memcpy = intern_stack(t, b, 3);
        f->s_addr = intern_stack(t, c, 3);
        f->s_main = intern_stack(t, d, 1);
        f->s_zero = intern_stack(t, z, 2);
        f->s_bare = intern_stack(t, e, 2);
    }
    assert_int_equal(ember_txn_commit(t), EMBER_OK);
}

static void append(fix *f, const char *type, const char *pod, int64_t t,
                   int64_t dur, int64_t period, const ember_sample *s,
                   size_t n)
{
    ember_label l = { "pod", pod };
    ember_profile p = tu_profile(type, &l, 1, t, s, n);

    p.duration_ns = dur;
    p.period = period;
    assert_int_equal(ember_append(f->db, &p), EMBER_OK);
}

/* Series pod=a at T0 and T0+60s, pod=b at T0+30s, pod=c (another type)
** and a profile at T0+1h that the ranged merges leave out. pod=a2 has
** a profile with the time and duration of pod=a's first, as the parts of
** one pprof file split by sample labels have: its duration counts once;
** pod=a3 shares a time but not the duration with pod=a's second, so it
** counts. The stack s_zero sums to 0; s_other only exists in the other
** type. Durations: 10 + 5 + 1 + 2 + 4 = 22 s in TYPE. */
static void fix_profiles(fix *f)
{
    ember_sample a1[] = { { f->s_inl, 100 }, { f->s_memcpy, 7 },
                          { f->s_zero, 5 }, { f->s_main, 1 } };
    ember_sample a2[] = { { f->s_inl, 50 }, { f->s_addr, 3 },
                          { f->s_zero, -5 }, { f->s_bare, 4 } };
    ember_sample b1[] = { { f->s_addr, 2 }, { f->s_memcpy, -1 } };
    ember_sample c1[] = { { f->s_other, 9 } };
    ember_sample late[] = { { f->s_main, 1000 } };

    append(f, TYPE, "a", T0, 10000000000LL, 10, a1, 4);
    append(f, TYPE, "a", T0 + 60000, 5000000000LL, 20, a2, 4);
    append(f, TYPE, "b", T0 + 30000, 1000000000LL, 15, b1, 2);
    append(f, "other:x:count:y:count", "c", T0 - 5000, 7, 99, c1, 1);
    append(f, TYPE, "b", T0 + 3600000, 2000000000LL, 5, late, 1);
    append(f, TYPE, "a2", T0, 10000000000LL, 10, late, 1);
    append(f, TYPE, "a3", T0 + 60000, 4000000000LL, 5, late, 1);
}

static int fix_setup(void **state)
{
    fix *f = calloc(1, sizeof *f);

    f->dir = tu_tmpdir("pprof-out");
    f->db = tu_open(f->dir, 0);
    fix_symbols(f);
    fix_profiles(f);
    *state = f;
    return 0;
}

static int fix_teardown(void **state)
{
    fix *f = *state;

    ember_close(f->db);
    tu_rmdir(f->dir);
    free(f);
    return 0;
}

static ember_merged *merge(fix *f, const char *type, int64_t from,
                           int64_t to)
{
    ember_selector s = { .sz = sizeof s, .type = type, .from_ms = from,
                         .to_ms = to };
    ember_merged *m = NULL;
    int rc = ember_merge(f->db, &s, &m);

    if (rc != EMBER_OK)
        fprintf(stderr, "merge: %s\n", ember_errmsg(f->db));
    assert_int_equal(rc, EMBER_OK);
    return m;
}

/* ---- the span ---------------------------------------------------------- */

static void check_span(const ember_merged *m, int64_t tmin, int64_t tmax,
                       int64_t dur, int64_t period)
{
    int64_t a = -1, b = -1, c = -1, d = -1;

    ember_merged_span(m, &a, &b, &c, &d);
    assert_int_equal(a, tmin);
    assert_int_equal(b, tmax);
    assert_int_equal(c, dur);
    assert_int_equal(d, period);
}

static void test_span(void **state)
{
    fix *f = *state;
    ember_merged *m = merge(f, TYPE, 0, 0);
    int64_t t = 0;

    check_span(m, T0, T0 + 3600000, 22000000000LL, 20);
    ember_merged_span(m, NULL, &t, NULL, NULL);     /* any may be NULL */
    assert_int_equal(t, T0 + 3600000);
    ember_merged_span(m, NULL, NULL, NULL, NULL);
    ember_merged_free(m);
    m = merge(f, TYPE, T0 + 1, T0 + 60000);         /* cuts a chunk */
    check_span(m, T0 + 30000, T0 + 60000, 10000000000LL, 20);
    ember_merged_free(m);
    m = merge(f, TYPE, T0, T0 + 30000);
    check_span(m, T0, T0 + 30000, 11000000000LL, 15);
    ember_merged_free(m);
    m = merge(f, NULL, 0, 0);                       /* across types */
    check_span(m, T0 - 5000, T0 + 3600000, 22000000007LL, 99);
    ember_merged_free(m);
    m = merge(f, "none:a:b:c:d", 0, 0);             /* nothing merged */
    check_span(m, 0, 0, 0, 0);
    ember_merged_free(m);
    check_span(NULL, 0, 0, 0, 0);
}

/* The span is the same whether the profiles sit in heads or sealed
** chunks, and after a reopen. */
static void test_span_sealed(void **state)
{
    fix *f = *state;
    ember_merged *m;

    assert_int_equal(ember_seal(f->db), EMBER_OK);
    m = merge(f, TYPE, 0, 0);
    check_span(m, T0, T0 + 3600000, 22000000000LL, 20);
    ember_merged_free(m);
    m = merge(f, TYPE, T0 + 1, T0 + 60000);
    check_span(m, T0 + 30000, T0 + 60000, 10000000000LL, 20);
    ember_merged_free(m);
}

/* ---- decoding what the encoder wrote ----------------------------------- */

static void *pb_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n);
}

static void pb_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static ProtobufCAllocator pb_allocator = { pb_alloc, pb_free, NULL };

/* Inflates a gzip stream into a malloc'd buffer. */
static uint8_t *gunzip(const uint8_t *in, size_t n, size_t *outlen)
{
    z_stream z;
    size_t cap = 4 * n + 1024;
    uint8_t *out = malloc(cap);
    int zrc;

    memset(&z, 0, sizeof z);
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    for (;;) {
        z.next_out = out + z.total_out;
        z.avail_out = (uInt)(cap - z.total_out);
        zrc = inflate(&z, Z_FINISH);
        if (zrc == Z_STREAM_END)
            break;
        assert_true(zrc == Z_OK || zrc == Z_BUF_ERROR);
        assert_int_equal(z.avail_out, 0);
        cap *= 2;
        out = realloc(out, cap);
    }
    assert_int_equal(z.avail_in, 0);        /* one member, nothing after */
    *outlen = z.total_out;
    inflateEnd(&z);
    return out;
}

static pb_profile *encode(fix *f, const ember_merged *m, const char *type,
                          unsigned flags, uint8_t **raw, size_t *rawlen)
{
    void *buf = NULL;
    size_t len = 0, n;
    uint8_t *bytes;
    pb_profile *p;
    int rc = ember_pprof_encode(f->db, m, type, flags, &buf, &len);

    if (rc != EMBER_OK)
        fprintf(stderr, "encode: %s\n", ember_errmsg(f->db));
    assert_int_equal(rc, EMBER_OK);
    assert_non_null(buf);
    if (flags & EMBER_PPROF_GZIP) {
        assert_true(len > 18 && ((uint8_t *)buf)[0] == 0x1f &&
                    ((uint8_t *)buf)[1] == 0x8b);
        bytes = gunzip(buf, len, &n);
    } else {
        bytes = malloc(len + 1);
        memcpy(bytes, buf, len);
        n = len;
    }
    ember_free(buf);
    p = perftools__profiles__profile__unpack(&pb_allocator, n, bytes);
    assert_non_null(p);
    if (raw != NULL) {
        *raw = bytes;
        *rawlen = n;
    } else {
        free(bytes);
    }
    return p;
}

static const char *str(const pb_profile *p, int64_t id)
{
    assert_true(id >= 0 && (size_t)id < p->n_string_table);
    return p->string_table[id];
}

/* Compares strings, treating NULL as "". */
static void assert_str(const char *got, const char *want)
{
    assert_string_equal(got, want != NULL ? want : "");
}

/* The pprof mapping of id ID and the Ember mapping MID hold the same. */
static void check_mapping(const pb_profile *p, uint64_t id,
                          ember_snapshot *s, uint32_t mid)
{
    const Perftools__Profiles__Mapping *pm;
    ember_mapping em;

    assert_true(mid != 0 && id >= 1 && id <= p->n_mapping);
    pm = p->mapping[id - 1];
    assert_int_equal(pm->id, id);
    assert_int_equal(ember_snapshot_mapping(s, mid, &em), EMBER_OK);
    assert_int_equal(pm->memory_start, em.start);
    assert_int_equal(pm->memory_limit, em.limit);
    assert_int_equal(pm->file_offset, em.offset);
    assert_str(str(p, pm->filename), em.file);
    assert_str(str(p, pm->build_id), em.build_id);
}

static void check_function(const pb_profile *p, uint64_t id,
                           ember_snapshot *s, uint32_t fid)
{
    const Perftools__Profiles__Function *pf;
    ember_function ef;

    assert_true(id >= 1 && id <= p->n_function);
    pf = p->function[id - 1];
    assert_int_equal(pf->id, id);
    assert_int_equal(ember_snapshot_function(s, fid, &ef), EMBER_OK);
    assert_str(str(p, pf->name), ef.name);
    assert_str(str(p, pf->system_name), ef.system_name);
    assert_str(str(p, pf->filename), ef.file);
    assert_int_equal(pf->start_line, ef.start_line);
}

/* The pprof location ID and Ember location LID: address, mapping, and
** every line, innermost first. */
static void check_location(const pb_profile *p, uint64_t id,
                           ember_snapshot *s, uint32_t lid)
{
    const Perftools__Profiles__Location *pl;
    ember_location el;

    assert_true(id >= 1 && id <= p->n_location);
    pl = p->location[id - 1];
    assert_int_equal(pl->id, id);
    assert_int_equal(ember_snapshot_location(s, lid, &el), EMBER_OK);
    assert_int_equal(pl->address, el.address);
    if (el.mapping == 0)
        assert_int_equal(pl->mapping_id, 0);
    else
        check_mapping(p, pl->mapping_id, s, el.mapping);
    assert_int_equal(pl->n_line, el.nlines);
    for (size_t j = 0; j < el.nlines; j++) {
        assert_int_equal(pl->line[j]->line, el.lines[j].line);
        check_function(p, pl->line[j]->function_id, s, el.lines[j].function);
    }
}

/* Every sample of P is a non-zero stack of M in order, same value, same
** locations (leaf first); no id is used that nothing needs. */
static void check_samples(fix *f, const pb_profile *p, const ember_merged *m)
{
    const uint32_t *stacks;
    const int64_t *values;
    size_t n = ember_merged_samples(m, &stacks, &values), k = 0;
    ember_snapshot *s;
    uint8_t *loc_used = calloc(p->n_location + 1, 1);

    assert_int_equal(ember_snapshot_begin(f->db, &s), EMBER_OK);
    for (size_t i = 0; i < n; i++) {
        const uint32_t *locs;
        size_t depth;
        if (values[i] == 0)
            continue;
        assert_true(k < p->n_sample);
        assert_int_equal(p->sample[k]->n_value, 1);
        assert_int_equal(p->sample[k]->value[0], values[i]);
        assert_int_equal(p->sample[k]->n_label, 0);
        assert_int_equal(ember_snapshot_stack(s, stacks[i], &locs, &depth),
                         EMBER_OK);
        assert_int_equal(p->sample[k]->n_location_id, depth);
        for (size_t d = 0; d < depth; d++) {
            uint64_t id = p->sample[k]->location_id[d];
            check_location(p, id, s, locs[d]);
            loc_used[id] = 1;
        }
        k++;
    }
    assert_int_equal(k, p->n_sample);
    for (size_t id = 1; id <= p->n_location; id++)
        assert_true(loc_used[id]);
    free(loc_used);
    ember_snapshot_end(s);
}

static void check_header(const pb_profile *p, int64_t tmin_ms, int64_t dur,
                         int64_t period)
{
    assert_true(p->n_string_table >= 1);
    assert_string_equal(p->string_table[0], "");
    assert_int_equal(p->n_sample_type, 1);
    assert_string_equal(str(p, p->sample_type[0]->type), "cpu");
    assert_string_equal(str(p, p->sample_type[0]->unit), "nanoseconds");
    assert_non_null(p->period_type);
    assert_string_equal(str(p, p->period_type->type), "wall");
    assert_string_equal(str(p, p->period_type->unit), "milliseconds");
    assert_int_equal(p->period, period);
    assert_int_equal(p->time_nanos, tmin_ms * 1000000);
    assert_int_equal(p->duration_nanos, dur);
    assert_int_equal(p->drop_frames, 0);
    assert_int_equal(p->keep_frames, 0);
    for (size_t i = 0; i < p->n_string_table; i++)     /* no duplicates */
        for (size_t j = i + 1; j < p->n_string_table; j++)
            assert_string_not_equal(p->string_table[i], p->string_table[j]);
}

static const Perftools__Profiles__Mapping *mapping_named(const pb_profile *p,
                                                         const char *file)
{
    for (size_t i = 0; i < p->n_mapping; i++)
        if (strcmp(str(p, p->mapping[i]->filename), file) == 0)
            return p->mapping[i];
    return NULL;
}

static void check_flags(const Perftools__Profiles__Mapping *m, bool fn,
                        bool files, bool lines, bool inl)
{
    assert_non_null(m);
    assert_int_equal(m->has_functions, fn);
    assert_int_equal(m->has_filenames, files);
    assert_int_equal(m->has_line_numbers, lines);
    assert_int_equal(m->has_inline_frames, inl);
}

/* The mappings the samples use, in Ember id order (libc, app, bare), with
** flags from what their locations carry; the unused one is left out. */
static void check_mappings(fix *f, const pb_profile *p)
{
    assert_int_equal(p->n_mapping, 3);
    assert_int_equal(p->mapping[0]->id, 1);
    assert_string_equal(str(p, p->mapping[0]->filename), "/lib/libc.so.6");
    assert_string_equal(str(p, p->mapping[1]->filename), "/bin/app");
    assert_string_equal(str(p, p->mapping[2]->filename), "/bin/bare");
    assert_string_equal(str(p, p->mapping[0]->build_id), "deadbeef");
    assert_int_equal(p->mapping[0]->memory_start, 0x7f0000);
    assert_int_equal(p->mapping[0]->memory_limit, 0x7f8000);
    assert_int_equal(p->mapping[0]->file_offset, 0x1000);
    assert_null(mapping_named(p, "/unused"));
    check_flags(mapping_named(p, "/bin/app"), true, true, true, true);
    check_flags(mapping_named(p, "/lib/libc.so.6"), true, false, false, true);
    check_flags(mapping_named(p, "/bin/bare"), false, false, false, false);
    (void)f;
}

/* Lines innermost first: the inlined location lists inl, then work. */
static void check_inline(const pb_profile *p)
{
    size_t found = 0;

    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        if (l->address != 0x402000)
            continue;
        found++;
        assert_int_equal(l->n_line, 2);
        assert_string_equal(
            str(p, p->function[l->line[0]->function_id - 1]->name), "inl");
        assert_int_equal(l->line[0]->line, 31);
        assert_string_equal(
            str(p, p->function[l->line[1]->function_id - 1]->name), "work");
        assert_int_equal(l->line[1]->line, 22);
    }
    assert_int_equal(found, 1);
}

static void test_encode(void **state)
{
    fix *f = *state;
    ember_merged *m = merge(f, TYPE, 0, 0);
    uint8_t *gz_raw, *raw;
    size_t gz_len, len;
    pb_profile *p = encode(f, m, TYPE, EMBER_PPROF_GZIP, &gz_raw, &gz_len);
    pb_profile *q = encode(f, m, TYPE, 0, &raw, &len);

    check_header(p, T0, 22000000000LL, 20);
    check_samples(f, p, m);
    check_mappings(f, p);
    check_inline(p);
    /* Non-zero stacks: inl 150, memcpy 6, addr 5, main 3001, bare 4; the
    ** zero one (through function zero) is left out with its symbols. */
    assert_int_equal(p->n_sample, 5);
    assert_int_equal(p->n_location, 6);     /* inl main memcpy addr sys bare */
    assert_int_equal(p->n_function, 5);     /* inl work main memcpy sys */
    for (size_t i = 0; i < p->n_function; i++)
        assert_int_equal(p->function[i]->id, i + 1);
    /* The same bytes with and without gzip. */
    assert_int_equal(gz_len, len);
    assert_memory_equal(gz_raw, raw, len);
    /* The encoder packs the samples one by one between two partial
    ** profiles; protobuf-c packing the whole message gives the same bytes. */
    {
        size_t n = perftools__profiles__profile__get_packed_size(q);
        uint8_t *whole = malloc(n + 1);
        assert_int_equal(n, len);
        assert_int_equal(perftools__profiles__profile__pack(q, whole), n);
        assert_memory_equal(whole, raw, n);
        free(whole);
    }
    perftools__profiles__profile__free_unpacked(p, &pb_allocator);
    perftools__profiles__profile__free_unpacked(q, &pb_allocator);
    free(gz_raw);
    free(raw);
    ember_merged_free(m);
}

/* A ranged merge: the header and samples follow the range. */
static void test_encode_range(void **state)
{
    fix *f = *state;
    ember_merged *m = merge(f, TYPE, T0 + 1, T0 + 60000);
    pb_profile *p = encode(f, m, TYPE, EMBER_PPROF_GZIP, NULL, NULL);

    check_header(p, T0 + 30000, 10000000000LL, 20);
    check_samples(f, p, m);
    /* inl 50, addr 5, zero -5 (not cancelled here), bare 4, memcpy -1,
    ** main 1000 (pod=a3) */
    assert_int_equal(p->n_sample, 6);
    perftools__profiles__profile__free_unpacked(p, &pb_allocator);
    ember_merged_free(m);
}

/* Nothing merged: a valid profile with its types and no samples. */
static void test_encode_empty(void **state)
{
    fix *f = *state;
    ember_merged *m = merge(f, "none:cpu:nanoseconds:wall:milliseconds", 0,
                            0);
    pb_profile *p = encode(f, m, TYPE, EMBER_PPROF_GZIP, NULL, NULL);

    check_header(p, 0, 0, 0);
    assert_int_equal(p->n_sample, 0);
    assert_int_equal(p->n_location, 0);
    assert_int_equal(p->n_function, 0);
    assert_int_equal(p->n_mapping, 0);
    assert_int_equal(p->n_string_table, 5);
    perftools__profiles__profile__free_unpacked(p, &pb_allocator);
    ember_merged_free(m);
}

static void test_errors(void **state)
{
    fix *f = *state;
    ember_merged *m = merge(f, TYPE, 0, 0);
    void *buf = (void *)1;
    size_t len = 99;

    assert_int_equal(ember_pprof_encode(f->db, m, "a:b:c", 0, &buf, &len),
                     EMBER_EINVAL);
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_non_null(strstr(ember_errmsg(f->db), "pprof"));
    assert_int_equal(ember_pprof_encode(f->db, m, "a:b:c:d:e:cumulative", 0,
                                        &buf, &len), EMBER_EINVAL);
    assert_int_equal(ember_pprof_encode(f->db, m, NULL, 0, &buf, &len),
                     EMBER_EINVAL);
    assert_int_equal(ember_pprof_encode(f->db, m, TYPE, 2, &buf, &len),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(f->db), "flags"));
    assert_int_equal(ember_pprof_encode(f->db, NULL, TYPE, 0, &buf, &len),
                     EMBER_EINVAL);
    assert_int_equal(ember_pprof_encode(NULL, m, TYPE, 0, &buf, &len),
                     EMBER_EINVAL);
    assert_int_equal(ember_pprof_encode(f->db, m, TYPE, 0, NULL, &len),
                     EMBER_EINVAL);
    assert_int_equal(ember_pprof_encode(f->db, m, TYPE, 0, &buf, NULL),
                     EMBER_EINVAL);
    assert_null(buf);
    ember_free(NULL);
    ember_merged_free(m);
}

/* Every allocation of an encode failing in turn: ENOMEM with a message,
** nothing returned, nothing leaked (ASan); then the same bytes. */
static void test_encode_oom(void **state)
{
    fix *f = *state;
    ember_merged *m = merge(f, TYPE, 0, 0);
    void *want = NULL, *got = NULL;
    size_t wlen = 0, glen = 0;
    uint64_t n;

    assert_int_equal(ember_pprof_encode(f->db, m, TYPE, EMBER_PPROF_GZIP,
                                        &want, &wlen), EMBER_OK);
    for (n = 1; n < 10000; n++) {
        int rc;
        em_alloc_fail_at(n);
        rc = ember_pprof_encode(f->db, m, TYPE, EMBER_PPROF_GZIP, &got,
                                &glen);
        em_alloc_fail_at(0);
        if (rc == EMBER_OK)
            break;
        if (rc != EMBER_ENOMEM)
            fail_msg("allocation %llu failing: %s: %s",
                     (unsigned long long)n, ember_strerror(rc),
                     ember_errmsg(f->db));
        assert_true(ember_errmsg(f->db)[0] != '\0');
        assert_null(got);
        assert_int_equal(glen, 0);
    }
    assert_true(n > 10);        /* the loop did reach the encoder's work */
    assert_int_equal(glen, wlen);
    assert_memory_equal(got, want, wlen);
    ember_free(got);
    ember_free(want);
    ember_merged_free(m);
}

/* ---- a query's pprof ----------------------------------------------------- */

#define CPU_PB "tests/data/pprof/cpu.pb.gz"
#define GO_CPU "go:cpu:nanoseconds:cpu:nanoseconds:delta"

/* Imports FILE (a pprof; NULL: none) and collapsed TEXT (NULL: none) in
** GO_CPU into DB: symbols interned in an order of their own. */
static void db_add(ember_db *db, const char *file, const char *text)
{
    ember_import_opts o = { .sz = sizeof o, .type = GO_CPU, .name = "go" };
    size_t len = 0;
    char *buf = file != NULL ? tu_read_file(file, &len) : NULL;

    if (buf != NULL)
        assert_int_equal(ember_import(db, buf, len, &o, NULL), EMBER_OK);
    if (text != NULL)
        assert_int_equal(ember_import(db, text, strlen(text), &o, NULL),
                         EMBER_OK);
    free(buf);
}

static ember_db *db_of(char *dir, const char *file, const char *text)
{
    ember_db *db = tu_open(dir, 0);

    db_add(db, file, text);
    return db;
}

/* ember_result_render of R as pprof (DB: the argument, which is unused)
** must be the bytes WANT. */
static void render_is(ember_db *db, const ember_result *r, const void *want,
                      size_t wlen)
{
    char *out = NULL;
    size_t len = 0;
    int rc = ember_result_render(db, r, "pprof", NULL, &out, &len);

    if (rc != EMBER_OK)
        fail_msg("render: %s", ember_errmsg(db));
    assert_int_equal(len, wlen);
    assert_memory_equal(out, want, wlen);
    ember_free(out);
}

/* A query's -o pprof is the pprof of the query's own merge, encoded as
** ember_pprof_encode does: rendered with no database, with another
** database's handle, and after new profiles added functions, locations,
** mappings and strings to its own; and for a query run for pprof
** (EM_QUERY_IDS_ONLY) it was encoded in the query's snapshot. */
static void test_query_pprof(void **state)
{
    char *dir = tu_tmpdir("pprof-q"), *dir2 = tu_tmpdir("pprof-q2");
    ember_db *db = db_of(dir, CPU_PB, NULL);
    ember_db *other = db_of(dir2, "tests/data/pprof/heap.pb.gz",
                            "other;symbols 3\n");
    ember_selector sel = { .sz = sizeof sel, .type = GO_CPU };
    const char *q = "merge({__type__=\"" GO_CPU "\"})";
    ember_result *r = NULL, *ids = NULL, *later = NULL;
    ember_merged *m = NULL;
    void *want = NULL;
    size_t wlen = 0;
    char *out = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_OK);
    assert_int_equal(ember_pprof_encode(db, m, GO_CPU, EMBER_PPROF_GZIP,
                                        &want, &wlen), EMBER_OK);
    assert_int_equal(ember_query(db, q, NULL, &r), EMBER_OK);
    assert_int_equal(em_query_run(db, q, NULL, EM_QUERY_IDS_ONLY, &ids),
                     EMBER_OK);
    assert_non_null(ids->groups[0].pprof);
    assert_null(r->groups[0].pprof);        /* no cost for other queries */
    render_is(NULL, r, want, wlen);
    render_is(other, r, want, wlen);
    render_is(NULL, ids, want, wlen);
    /* a write in between: new functions, locations, stacks, strings */
    db_add(db, "tests/data/pprof/heap.pb.gz",
           "brand;new;frames 5\nmain.main;fresh 7\n");
    render_is(NULL, r, want, wlen);
    render_is(other, ids, want, wlen);
    /* while a new query sees the write */
    assert_int_equal(ember_query(db, q, NULL, &later), EMBER_OK);
    assert_int_equal(ember_result_render(NULL, later, "pprof", NULL, &out,
                                         &len), EMBER_OK);
    assert_false(len == wlen && memcmp(out, want, wlen) == 0);
    ember_free(out);
    ember_result_free(later);
    ember_result_free(ids);
    ember_result_free(r);
    ember_merged_free(m);
    ember_free(want);
    ember_close(other);
    ember_close(db);
    tu_rmdir(dir2);
    tu_rmdir(dir);
}

/* A query run for pprof with every allocation failing in turn: ENOMEM
** and no result, nothing leaked (ASan); then the same bytes. */
static void test_query_pprof_oom(void **state)
{
    char *dir = tu_tmpdir("pprof-qoom");
    ember_db *db = db_of(dir, NULL, "a;b;c 3\na;d 4\ne 1\n");
    const char *q = "merge({__type__=\"" GO_CPU "\"})";
    ember_result *r = NULL, *want = NULL;
    uint64_t n;

    (void)state;
    assert_int_equal(em_query_run(db, q, NULL, EM_QUERY_IDS_ONLY, &want),
                     EMBER_OK);
    for (n = 1; n < 10000; n++) {
        int rc;
        em_alloc_fail_at(n);
        rc = em_query_run(db, q, NULL, EM_QUERY_IDS_ONLY, &r);
        em_alloc_fail_at(0);
        if (rc == EMBER_OK)
            break;
        if (rc != EMBER_ENOMEM)
            fail_msg("allocation %llu failing: %s: %s",
                     (unsigned long long)n, ember_strerror(rc),
                     ember_errmsg(db));
        assert_null(r);
    }
    assert_true(n > 10);
    render_is(NULL, r, want->groups[0].pprof, want->groups[0].pprof_len);
    ember_result_free(r);
    ember_result_free(want);
    ember_close(db);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_encode_range),
        cmocka_unit_test(test_encode_empty),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_encode_oom),
        cmocka_unit_test(test_span_sealed),
        cmocka_unit_test(test_query_pprof),
        cmocka_unit_test(test_query_pprof_oom),
    };
    return cmocka_run_group_tests_name("pprof_out", tests, fix_setup,
                                       fix_teardown);
}
