/*
** tests/unit/test_pprof_in.c: the pprof decoder (ingest/pprof_in.c,
** ingest/pprof_type.c).
**
** Real Go profiles (tests/data/pprof, see its README) are decoded and
** checked against figures computed straight from the protobuf as
** protobuf-c unpacks it: the profile types, sample counts and value sums
** per type and per label set, every location's lines, functions and
** mapping. Small profiles built here with protobuf-c's pack functions
** cover label semantics, sparse ids, type naming, and every kind of bad
** input: each must give the right code and one message starting with the
** origin. Allocation failure at every point gives ENOMEM and leaks nothing
** (the sanitizer build checks).
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"
#include "ingest/pprof_int.h"
#include "ingest/pset.h"
#include "proto/profile.pb-c.h"

#define DATA_DIR "tests/data/pprof"
#define ORIGIN "t.pb"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Location pb_location;

#define CPU_SAMPLES "process_cpu:samples:count:cpu:nanoseconds:delta"
#define CPU_NANOS "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"

/* ---- files -------------------------------------------------------------- */

/* Reads DATA_DIR/NAME whole and gunzips it; skips the test when the data
** is not there (not run from the repository root). */
static uint8_t *read_profile(const char *name, size_t *len)
{
    char path[256];
    FILE *f;
    uint8_t *raw = NULL;
    void *plain = NULL;
    long n;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    if ((f = fopen(path, "rb")) == NULL)
        skip();
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    raw = malloc((size_t)n);
    assert_non_null(raw);
    assert_int_equal(fread(raw, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    assert_true(em_is_gzip(raw, (size_t)n));
    assert_int_equal(em_gunzip(raw, (size_t)n, 1u << 30, &plain, len), 0);
    free(raw);
    return plain;                       /* em_free it */
}

/* Decodes LEN bytes at BUF as origin NAME into a fresh *S. */
static int decode(const void *buf, size_t len, const char *name, em_pset *s)
{
    em_import_opts o = { .sz = sizeof o, .origin = name };

    memset(s, 0, sizeof *s);
    return em_pprof_decode(buf, len, &o, s);
}

/* Decodes data file NAME, expecting success; P gets the unpacked protobuf
** (free with protobuf_c_message_free_unpacked). */
static void decode_file(const char *name, em_pset *s, pb_profile **p)
{
    size_t len;
    uint8_t *buf = read_profile(name, &len);
    int rc = decode(buf, len, name, s);

    if (rc != EMBER_OK)
        fail_msg("%s: %d %s", name, rc, em_errmsg());
    *p = perftools__profiles__profile__unpack(NULL, len, buf);
    assert_non_null(*p);
    em_free(buf);
}

static const char *pstr(const pb_profile *p, int64_t i)
{
    return i >= 0 && (uint64_t)i < p->n_string_table ? p->string_table[i]
                                                     : "?";
}

/* ---- the set's profiles ------------------------------------------------- */

/* Sums of S's samples per profile (SUMS has room for s->nprofiles). */
static void profile_sums(const em_pset *s, int64_t *sums)
{
    memset(sums, 0, s->nprofiles * sizeof *sums);
    for (size_t i = 0; i < s->nsamples; i++)
        sums[s->samples[i].profile] += s->samples[i].value;
}

/* Samples and value sum of all of S's profiles of TYPE. */
static void type_totals(const em_pset *s, const char *type, uint64_t *n,
                        int64_t *sum)
{
    int64_t *sums = calloc(s->nprofiles + 1, sizeof *sums);

    assert_non_null(sums);
    profile_sums(s, sums);
    *n = 0;
    *sum = 0;
    for (size_t i = 0; i < s->nprofiles; i++)
        if (strcmp(s->profiles[i].type, type) == 0) {
            *n += s->profiles[i].nsamples;
            *sum += sums[i];
        }
    free(sums);
}

/* True when S has a profile of TYPE. */
static bool has_type(const em_pset *s, const char *type)
{
    for (size_t i = 0; i < s->nprofiles; i++)
        if (strcmp(s->profiles[i].type, type) == 0)
            return true;
    return false;
}

/* Checks that S's profile types are exactly the N in WANT. */
static void types_are(const em_pset *s, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!has_type(s, want[i]))
            fail_msg("no profile of type %s", want[i]);
    for (size_t i = 0; i < s->nprofiles; i++) {
        bool ok = false;
        for (size_t k = 0; k < n && !ok; k++)
            ok = strcmp(s->profiles[i].type, want[k]) == 0;
        if (!ok)
            fail_msg("unexpected type %s", s->profiles[i].type);
    }
}

/* The value of label NAME of profile P, or NULL. */
static const char *label_of(const em_pset_profile *p, const char *name)
{
    for (size_t i = 0; i < p->nlabels; i++)
        if (strcmp(p->labels[i].name, name) == 0)
            return p->labels[i].value;
    return NULL;
}

/* Per sample type of P: samples with a nonzero value and their sum, as the
** decoder must add them, against S's profiles of TYPE[i]. */
static void sums_match(const em_pset *s, const pb_profile *p,
                       const char *const *type)
{
    for (size_t t = 0; t < p->n_sample_type; t++) {
        uint64_t want_n = 0, n;
        int64_t want_sum = 0, sum;
        for (size_t i = 0; i < p->n_sample; i++)
            if (p->sample[i]->value[t] != 0) {
                want_n++;
                want_sum += p->sample[i]->value[t];
            }
        type_totals(s, type[t], &n, &sum);
        assert_true(want_n > 0);
        assert_int_equal(n, want_n);
        assert_int_equal(sum, want_sum);
    }
}

/* True when location ID is in a sample of P with a nonzero value: one the
** decoder must keep. */
static bool referenced(const pb_profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const pb_sample *x = p->sample[i];
        bool nonzero = false;
        for (size_t t = 0; t < x->n_value; t++)
            nonzero |= x->value[t] != 0;
        for (size_t k = 0; nonzero && k < x->n_location_id; k++)
            if (x->location_id[k] == id)
                return true;
    }
    return false;
}

/* Every location of P that samples use is in S with the same address,
** mapping and lines (function name, system name, file, start line, line),
** innermost first; returns how many have inlined frames. */
static size_t locations_match(const em_pset *s, const pb_profile *p)
{
    size_t inlined = 0;

    for (size_t i = 0; i < p->n_location; i++) {
        const pb_location *l = p->location[i];
        const em_pset_loc *e = NULL;
        for (size_t k = 0; k < s->nlocs && e == NULL; k++)
            if (s->locs[k].address == l->address)
                e = &s->locs[k];
        if (e == NULL && !referenced(p, l->id))
            continue;
        assert_non_null(e);
        assert_int_equal(e->nlines, l->n_line);
        inlined += l->n_line > 1;
        assert_true(e->mapping >= 1 && e->mapping <= s->nmappings);
        for (size_t k = 0; k < l->n_line; k++) {
            const Perftools__Profiles__Function *f = NULL;
            const ember_function *g;
            for (size_t j = 0; j < p->n_function && f == NULL; j++)
                if (p->function[j]->id == l->line[k]->function_id)
                    f = p->function[j];
            assert_non_null(f);
            g = &s->functions[s->lines[e->first + k].function];
            assert_string_equal(g->name, pstr(p, f->name));
            assert_string_equal(g->system_name, pstr(p, f->system_name));
            assert_string_equal(g->file, pstr(p, f->filename));
            assert_int_equal(g->start_line, f->start_line);
            assert_int_equal(s->lines[e->first + k].line, l->line[k]->line);
        }
    }
    return inlined;
}

/* True when S has a location of two lines: INNER inlined into OUTER. */
static bool has_inlined(const em_pset *s, const char *inner,
                        const char *outer)
{
    for (size_t i = 0; i < s->nlocs; i++) {
        const em_pset_line *l = &s->lines[s->locs[i].first];
        if (s->locs[i].nlines == 2 &&
            strcmp(s->functions[l[0].function].name, inner) == 0 &&
            strcmp(s->functions[l[1].function].name, outer) == 0)
            return true;
    }
    return false;
}

/* The times every profile of S carries, from P. */
static void times_match(const em_pset *s, const pb_profile *p)
{
    for (size_t i = 0; i < s->nprofiles; i++) {
        assert_int_equal(s->profiles[i].time_ms, p->time_nanos / 1000000);
        assert_int_equal(s->profiles[i].duration_ns, p->duration_nanos);
        assert_int_equal(s->profiles[i].period, p->period);
    }
}

/* ---- real Go profiles --------------------------------------------------- */

static void test_go_cpu(void **state)
{
    const char *types[] = { CPU_SAMPLES, CPU_NANOS };
    const char *workers[] = { "hash", "sort", "tree", "lock", "alloc" };
    pb_profile *p;
    em_pset s;

    (void)state;
    decode_file("cpu.pb.gz", &s, &p);
    types_are(&s, types, 2);
    sums_match(&s, p, types);
    times_match(&s, p);
    assert_true(p->duration_nanos > 0);
    assert_true(locations_match(&s, p) > 0);    /* inlined frames kept */
    assert_true(has_inlined(&s, "main.mix", "main.hashWork"));
    assert_int_equal(s.nmappings, 1);
    assert_int_equal(s.mappings[0].start, p->mapping[0]->memory_start);
    assert_int_equal(s.mappings[0].limit, p->mapping[0]->memory_limit);
    assert_string_equal(s.mappings[0].file, pstr(p, p->mapping[0]->filename));
    assert_string_equal(s.mappings[0].build_id,
                        pstr(p, p->mapping[0]->build_id));
    /* pprof.Do's labels are series labels */
    for (size_t w = 0; w < EM_ARRAY_LEN(workers); w++) {
        bool found = false;
        for (size_t i = 0; i < s.nprofiles && !found; i++) {
            const char *v = label_of(&s.profiles[i], "worker");
            found = v != NULL && strcmp(v, workers[w]) == 0;
        }
        if (!found)
            fail_msg("no profile with worker=\"%s\"", workers[w]);
    }
    protobuf_c_message_free_unpacked(&p->base, NULL);
    em_pset_free(&s);
}

/* Sums per (type, worker label) equal the protobuf's. */
static void test_go_cpu_label_sums(void **state)
{
    pb_profile *p;
    em_pset s;
    int64_t *sums;

    (void)state;
    decode_file("cpu.pb.gz", &s, &p);
    sums = calloc(s.nprofiles, sizeof *sums);
    assert_non_null(sums);
    profile_sums(&s, sums);
    for (size_t i = 0; i < s.nprofiles; i++) {
        const char *w = label_of(&s.profiles[i], "worker");
        size_t t = strcmp(s.profiles[i].type, CPU_SAMPLES) == 0 ? 0 : 1;
        int64_t want = 0;
        for (size_t k = 0; k < p->n_sample; k++) {
            const pb_sample *x = p->sample[k];
            const char *xw = NULL;
            for (size_t j = 0; j < x->n_label; j++)
                if (strcmp(pstr(p, x->label[j]->key), "worker") == 0)
                    xw = pstr(p, x->label[j]->str);
            if ((w == NULL) == (xw == NULL) &&
                (w == NULL || strcmp(w, xw) == 0))
                want += x->value[t];
        }
        assert_int_equal(sums[i], want);
    }
    free(sums);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    em_pset_free(&s);
}

static void test_go_heap(void **state)
{
    const char *types[] = { "memory:alloc_objects:count:space:bytes",
                            "memory:alloc_space:bytes:space:bytes",
                            "memory:inuse_objects:count:space:bytes",
                            "memory:inuse_space:bytes:space:bytes" };
    pb_profile *p;
    em_pset s;

    (void)state;
    decode_file("heap.pb.gz", &s, &p);
    types_are(&s, types, 4);
    sums_match(&s, p, types);
    times_match(&s, p);
    locations_match(&s, p);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    em_pset_free(&s);
}

/* Go's heap profile carries a numeric "bytes" label (the block size) on
** every sample. By default it is dropped: one series per type, as the
** file has no string label (issue 12: it made 40 series of one file);
** --numeric-labels series makes one series per size, same sums. */
static void test_go_heap_numeric_labels(void **state)
{
    const char *types[] = { "memory:alloc_objects:count:space:bytes",
                            "memory:alloc_space:bytes:space:bytes",
                            "memory:inuse_objects:count:space:bytes",
                            "memory:inuse_space:bytes:space:bytes" };
    em_import_opts o = { .sz = sizeof o, .origin = "heap.pb.gz" };
    size_t len;
    uint8_t *buf = read_profile("heap.pb.gz", &len);
    pb_profile *p = perftools__profiles__profile__unpack(NULL, len, buf);
    em_pset s = { 0 };

    (void)state;
    assert_non_null(p);
    assert_int_equal(em_pprof_decode(buf, len, &o, &s), EMBER_OK);
    assert_int_equal(s.nprofiles, 4);
    for (size_t i = 0; i < s.nprofiles; i++)
        assert_null(label_of(&s.profiles[i], "bytes"));
    sums_match(&s, p, types);
    em_pset_free(&s);

    memset(&s, 0, sizeof s);
    o.numeric_labels = true;
    assert_int_equal(em_pprof_decode(buf, len, &o, &s), EMBER_OK);
    print_message("heap.pb.gz: %zu profiles with numeric labels, 4 "
                  "without\n", s.nprofiles);
    assert_true(s.nprofiles > 4 * 10);
    for (size_t i = 0; i < s.nprofiles; i++) {
        const char *v = label_of(&s.profiles[i], "bytes");
        assert_non_null(v);
        assert_true(strspn(v, "0123456789") == strlen(v) && v[0] != '\0');
    }
    sums_match(&s, p, types);
    em_pset_free(&s);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    em_free(buf);
}

/* Mutex and block have the same sample types: the file name decides. */
static void test_go_mutex_block_goroutine(void **state)
{
    const char *mutex[] = { "mutex:contentions:count:contentions:count",
                            "mutex:delay:nanoseconds:contentions:count" };
    const char *block[] = { "block:contentions:count:contentions:count",
                            "block:delay:nanoseconds:contentions:count" };
    const char *gor[] = { "goroutine:goroutine:count:goroutine:count" };
    const struct { const char *file; const char *const *types; size_t n; }
        cases[] = { { "mutex.pb.gz", mutex, 2 }, { "block.pb.gz", block, 2 },
                    { "goroutine.pb.gz", gor, 1 } };

    (void)state;
    for (size_t c = 0; c < EM_ARRAY_LEN(cases); c++) {
        pb_profile *p;
        em_pset s;
        decode_file(cases[c].file, &s, &p);
        types_are(&s, cases[c].types, cases[c].n);
        sums_match(&s, p, cases[c].types);
        times_match(&s, p);
        locations_match(&s, p);
        protobuf_c_message_free_unpacked(&p->base, NULL);
        em_pset_free(&s);
    }
}

/* The goroutine profile's parked workers keep their pprof.Do labels. */
static void test_go_goroutine_labels(void **state)
{
    pb_profile *p;
    em_pset s;
    ember_label a = { "worker", "idle-a" }, b = { "worker", "idle-b" };
    const char *type = "goroutine:goroutine:count:goroutine:count";

    (void)state;
    decode_file("goroutine.pb.gz", &s, &p);
    assert_true(em_pset_profile_find(&s, type, &a, 1) >= 0);
    assert_true(em_pset_profile_find(&s, type, &b, 1) >= 0);
    assert_true(em_pset_profile_find(&s, type, NULL, 0) >= 0);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    em_pset_free(&s);
}

/* --name replaces the guessed name; the import's labels win a clash. */
static void test_go_name_and_labels(void **state)
{
    ember_label base[] = { { "service", "api" }, { "worker", "w0" } };
    em_import_opts o = { .sz = sizeof o, .origin = "cpu.pb.gz",
                         .name = "my:app", .labels = base, .nlabels = 2 };
    ember_label want[] = { { "service", "api" }, { "worker", "w0" },
                           { "exported_worker", "hash" } };
    size_t len;
    uint8_t *buf = read_profile("cpu.pb.gz", &len);
    em_pset s = { 0 };

    (void)state;
    assert_int_equal(em_pprof_decode(buf, len, &o, &s), EMBER_OK);
    assert_true(has_type(&s, "my_app:samples:count:cpu:nanoseconds:delta"));
    assert_true(has_type(&s, "my_app:cpu:nanoseconds:cpu:nanoseconds:delta"));
    assert_true(em_pset_profile_find(
                    &s, "my_app:cpu:nanoseconds:cpu:nanoseconds:delta",
                    want, 3) >= 0);
    em_pset_free(&s);
    em_free(buf);
}

/* Two files into one set: the second's symbols join the first's. */
static void test_go_two_files_one_set(void **state)
{
    size_t l1, l2;
    uint8_t *a = read_profile("cpu.pb.gz", &l1);
    uint8_t *b = read_profile("heap.pb.gz", &l2);
    em_import_opts o = { .sz = sizeof o, .origin = "x" };
    em_pset s = { 0 }, one = { 0 };
    size_t nprof;

    (void)state;
    assert_int_equal(em_pprof_decode(a, l1, &o, &s), EMBER_OK);
    nprof = s.nprofiles;
    assert_int_equal(em_pprof_decode(b, l2, &o, &s), EMBER_OK);
    assert_int_equal(em_pprof_decode(b, l2, &o, &one), EMBER_OK);
    assert_int_equal(s.nprofiles, nprof + one.nprofiles);
    assert_int_equal(s.nmappings, 1);       /* the same binary */
    em_pset_free(&s);
    em_pset_free(&one);
    em_free(a);
    em_free(b);
}

/* ---- a builder for small profiles --------------------------------------- */

/* Grows the array *ARR of *N entries by one and returns the new slot. The
** capacity is the power of two at or above N, so growth doubles. */
static void *push(void *arr, size_t *n, size_t size)
{
    void **a = arr;

    if ((*n & (*n - 1)) == 0) {
        *a = realloc(*a, (*n != 0 ? 2 * *n : 1) * size);
        assert_non_null(*a);
    }
    return (char *)*a + (*n)++ * size;
}

#define PUSH(arr, n) (*(__typeof__(*(arr)) *)push(&(arr), &(n), sizeof *(arr)))

/* The index of S in P's string table, added when new. */
static int64_t str(pb_profile *p, const char *s)
{
    for (size_t i = 0; i < p->n_string_table; i++)
        if (strcmp(p->string_table[i], s) == 0)
            return (int64_t)i;
    PUSH(p->string_table, p->n_string_table) = strdup(s);
    return (int64_t)p->n_string_table - 1;
}

static Perftools__Profiles__ValueType *value_type(pb_profile *p,
                                                  const char *t, const char *u)
{
    Perftools__Profiles__ValueType *v = malloc(sizeof *v);

    assert_non_null(v);
    perftools__profiles__value_type__init(v);
    v->type = str(p, t);
    v->unit = str(p, u);
    return v;
}

static void add_type(pb_profile *p, const char *t, const char *u)
{
    PUSH(p->sample_type, p->n_sample_type) = value_type(p, t, u);
}

static Perftools__Profiles__Mapping *add_mapping(pb_profile *p, uint64_t id,
                                                 const char *file)
{
    Perftools__Profiles__Mapping *m = malloc(sizeof *m);

    assert_non_null(m);
    perftools__profiles__mapping__init(m);
    m->id = id;
    m->memory_start = 0x400000;
    m->memory_limit = 0x800000;
    m->file_offset = 0x1000;
    m->filename = str(p, file);
    m->build_id = str(p, "b1d");
    PUSH(p->mapping, p->n_mapping) = m;
    return m;
}

static Perftools__Profiles__Function *add_function(pb_profile *p, uint64_t id,
                                                   const char *name)
{
    Perftools__Profiles__Function *f = malloc(sizeof *f);

    assert_non_null(f);
    perftools__profiles__function__init(f);
    f->id = id;
    f->name = str(p, name);
    f->system_name = str(p, name);
    f->filename = str(p, "app.go");
    f->start_line = 7;
    PUSH(p->function, p->n_function) = f;
    return f;
}

/* A location of N lines: FNS[i] at line 10 * (i + 1), innermost first. */
static pb_location *add_location(pb_profile *p, uint64_t id, uint64_t mapping,
                                 const uint64_t *fns, size_t n)
{
    pb_location *l = malloc(sizeof *l);

    assert_non_null(l);
    perftools__profiles__location__init(l);
    l->id = id;
    l->mapping_id = mapping;
    l->address = 0x401000 + id * 16;
    for (size_t i = 0; i < n; i++) {
        Perftools__Profiles__Line *ln = malloc(sizeof *ln);
        assert_non_null(ln);
        perftools__profiles__line__init(ln);
        ln->function_id = fns[i];
        ln->line = 10 * ((int64_t)i + 1);
        PUSH(l->line, l->n_line) = ln;
    }
    PUSH(p->location, p->n_location) = l;
    return l;
}

/* A sample of N locations (leaf first) and NV values. */
static pb_sample *add_sample(pb_profile *p, const uint64_t *locs, size_t n,
                             const int64_t *vals, size_t nv)
{
    pb_sample *x = malloc(sizeof *x);

    assert_non_null(x);
    perftools__profiles__sample__init(x);
    for (size_t i = 0; i < n; i++)
        PUSH(x->location_id, x->n_location_id) = locs[i];
    for (size_t i = 0; i < nv; i++)
        PUSH(x->value, x->n_value) = vals[i];
    PUSH(p->sample, p->n_sample) = x;
    return x;
}

/* A string label (NUM 0) or a numeric one (STR NULL, UNIT may be NULL). */
static void add_label(pb_profile *p, pb_sample *x, const char *key,
                      const char *s, int64_t num, const char *unit)
{
    Perftools__Profiles__Label *l = malloc(sizeof *l);

    assert_non_null(l);
    perftools__profiles__label__init(l);
    l->key = str(p, key);
    l->str = s != NULL ? str(p, s) : 0;
    l->num = num;
    l->num_unit = unit != NULL ? str(p, unit) : 0;
    PUSH(x->label, x->n_label) = l;
}

/* A small valid CPU profile: mapping 1, functions 1 main, 2 helper (inlined
** into main), 3 leaf; locations 1 [leaf] and 2 [helper, main]; samples
** {1,2} = (1, 10) worker=a and {2} = (2, 20) worker=b, {1,2} = (0, 0). */
static pb_profile *small(void)
{
    pb_profile *p = malloc(sizeof *p);
    uint64_t l1[] = { 3 }, l2[] = { 2, 1 }, s1[] = { 1, 2 }, s2[] = { 2 };
    pb_sample *x;

    assert_non_null(p);
    perftools__profiles__profile__init(p);
    str(p, "");
    add_type(p, "samples", "count");
    add_type(p, "cpu", "nanoseconds");
    p->period_type = value_type(p, "cpu", "nanoseconds");
    p->period = 10000000;
    p->time_nanos = 1700000000123456789;
    p->duration_nanos = 10000000000;
    add_mapping(p, 1, "/bin/app");
    add_function(p, 1, "main");
    add_function(p, 2, "helper");
    add_function(p, 3, "leaf");
    add_location(p, 1, 1, l1, 1);
    add_location(p, 2, 1, l2, 2);
    x = add_sample(p, s1, 2, (int64_t[]){ 1, 10 }, 2);
    add_label(p, x, "worker", "a", 0, NULL);
    x = add_sample(p, s2, 1, (int64_t[]){ 2, 20 }, 2);
    add_label(p, x, "worker", "b", 0, NULL);
    add_sample(p, s1, 2, (int64_t[]){ 0, 0 }, 2);
    return p;
}

static uint8_t *pack(const pb_profile *p, size_t *len)
{
    uint8_t *buf;

    *len = perftools__profiles__profile__get_packed_size(p);
    buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(perftools__profiles__profile__pack(p, buf), *len);
    return buf;
}

/* Packs P, frees it and decodes the bytes into a fresh *S. */
static int decode_pb(pb_profile *p, em_pset *s, const em_import_opts *o)
{
    size_t len;
    uint8_t *buf = pack(p, &len);
    em_import_opts d = { .sz = sizeof d, .origin = ORIGIN };
    int rc;

    protobuf_c_message_free_unpacked(&p->base, NULL);
    memset(s, 0, sizeof *s);
    rc = em_pprof_decode(buf, len, o != NULL ? o : &d, s);
    free(buf);
    return rc;
}

/* Decodes P expecting code RC and a message "t.pb: ..." holding WANT. */
static void fails(pb_profile *p, int rc, const char *want)
{
    em_pset s;
    int got = decode_pb(p, &s, NULL);

    if (got != rc || strncmp(em_errmsg(), ORIGIN ": ", 6) != 0 ||
        strstr(em_errmsg(), want) == NULL)
        fail_msg("got %d \"%s\", wanted %d \"%s\"", got, em_errmsg(), rc,
                 want);
    em_pset_free(&s);
}

/* Decodes P expecting success. */
static void decodes(pb_profile *p, em_pset *s, const em_import_opts *o)
{
    int rc = decode_pb(p, s, o);

    if (rc != EMBER_OK)
        fail_msg("decode: %d %s", rc, em_errmsg());
}

/* ---- small profiles: what is kept --------------------------------------- */

static void test_small(void **state)
{
    ember_label a = { "worker", "a" }, b = { "worker", "b" };
    em_pset s;
    long pa, pb;

    (void)state;
    decodes(small(), &s, NULL);
    assert_int_equal(s.nprofiles, 4);       /* 2 types x 2 label sets */
    pa = em_pset_profile_find(&s, CPU_NANOS, &a, 1);
    pb = em_pset_profile_find(&s, CPU_NANOS, &b, 1);
    assert_true(pa >= 0 && pb >= 0);
    assert_int_equal(s.profiles[pa].nsamples, 1);   /* the zeros skipped */
    assert_int_equal(s.profiles[pa].time_ms, 1700000000123);
    assert_int_equal(s.profiles[pa].duration_ns, 10000000000);
    assert_int_equal(s.profiles[pa].period, 10000000);
    assert_int_equal(s.nfunctions, 3);
    assert_int_equal(s.nlocs, 2);
    assert_int_equal(s.nstacks, 2);
    /* location 2: helper (innermost) then main */
    assert_int_equal(s.locs[1].nlines, 2);
    assert_string_equal(s.functions[s.lines[s.locs[1].first].function].name,
                        "helper");
    assert_string_equal(
        s.functions[s.lines[s.locs[1].first + 1].function].name, "main");
    assert_int_equal(s.lines[s.locs[1].first + 1].line, 20);
    assert_int_equal(s.locs[1].mapping, 1);
    assert_string_equal(s.mappings[0].build_id, "b1d");
    assert_int_equal(s.mappings[0].offset, 0x1000);
    /* stack of sample 0: location 1 (leaf) then 2 */
    assert_int_equal(s.stacks[0].n, 2);
    assert_string_equal(
        s.functions[s.lines[s.locs[s.pool[s.stacks[0].off]].first].function]
            .name, "leaf");
    em_pset_free(&s);
}

/* Ids need not be dense, ordered or small. */
static void test_sparse_ids(void **state)
{
    pb_profile *p = small();
    em_pset s;
    const uint64_t fid[] = { 900, 17, 1ull << 60 }, lid[] = { 5, 123456789 };

    (void)state;
    for (size_t i = 0; i < 3; i++)
        p->function[i]->id = fid[i];
    p->location[0]->line[0]->function_id = fid[2];
    p->location[1]->line[0]->function_id = fid[1];
    p->location[1]->line[1]->function_id = fid[0];
    p->mapping[0]->id = 42;
    for (size_t i = 0; i < 2; i++) {
        p->location[i]->id = lid[i];
        p->location[i]->mapping_id = 42;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        pb_sample *x = p->sample[i];
        for (size_t k = 0; k < x->n_location_id; k++)
            x->location_id[k] = lid[x->location_id[k] - 1];
    }
    decodes(p, &s, NULL);
    assert_int_equal(s.nprofiles, 4);
    assert_int_equal(s.nlocs, 2);
    assert_string_equal(s.functions[s.lines[s.locs[0].first].function].name,
                        "leaf");
    em_pset_free(&s);
}

/* The labels of test_labels. */
static pb_profile *labelled(void)
{
    pb_profile *p = small();
    pb_sample *x = p->sample[0];

    add_label(p, x, "http.route", "/x", 0, NULL);
    add_label(p, x, "size", NULL, 4096, "bytes");
    add_label(p, x, "tag", "x", 0, NULL);
    add_label(p, x, "n", NULL, 12, NULL);
    add_label(p, x, "tag", "y", 0, NULL);
    add_label(p, x, "tag", NULL, -5, NULL);
    add_label(p, x, "empty", "", 0, NULL);       /* absent */
    add_label(p, x, "nothing", NULL, 0, NULL);   /* absent */
    return p;
}

/* Labels: sanitized keys, repeats joined, absent ones dropped, numbers
** left out unless numeric_labels, then with their units. */
static void test_labels(void **state)
{
    ember_label want[] = { { "worker", "a" }, { "http_route", "/x" },
                           { "size", "4096 bytes" }, { "tag", "x,y,-5" },
                           { "n", "12" } };
    ember_label strs[] = { { "worker", "a" }, { "http_route", "/x" },
                           { "tag", "x,y" } };
    em_import_opts o = { .sz = sizeof o, .origin = ORIGIN,
                         .numeric_labels = true };
    em_pset s;

    (void)state;
    decodes(labelled(), &s, NULL);
    assert_true(em_pset_profile_find(&s, CPU_NANOS, strs, 3) >= 0);
    assert_true(em_pset_profile_find(&s, CPU_SAMPLES, strs, 3) >= 0);
    em_pset_free(&s);
    decodes(labelled(), &s, &o);
    assert_true(em_pset_profile_find(&s, CPU_NANOS, want, 5) >= 0);
    assert_true(em_pset_profile_find(&s, CPU_SAMPLES, want, 5) >= 0);
    em_pset_free(&s);
}

/* Many labels (the qsort path) keep file order within a repeated key. */
static void test_labels_many(void **state)
{
    pb_profile *p = small();
    ember_label want[] = { { "worker", "b" }, { "k0", "0,3,6,9" },
                           { "k1", "1,4,7,10" }, { "k2", "2,5,8,11" } };
    char key[16], val[16];
    em_import_opts o = { .sz = sizeof o, .origin = ORIGIN,
                         .numeric_labels = true };
    em_pset s;

    (void)state;
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof key, "k%d", i % 3);
        snprintf(val, sizeof val, "%d", i);
        if (i % 2 == 0)
            add_label(p, p->sample[1], key, val, 0, NULL);
        else
            add_label(p, p->sample[1], key, NULL, i, NULL);
    }
    decodes(p, &s, &o);
    assert_true(em_pset_profile_find(&s, CPU_NANOS, want, 4) >= 0);
    em_pset_free(&s);
}

/* The same label set in another order is the same profile. */
static void test_label_order(void **state)
{
    pb_profile *p = small();
    em_pset s;

    (void)state;
    add_label(p, p->sample[0], "zone", "z1", 0, NULL);
    add_label(p, p->sample[1], "zone", "z1", 0, NULL);
    /* sample 1 now: worker=b, zone=z1; make it worker=a in reverse order */
    p->sample[1]->label[0]->str = str(p, "a");
    {
        Perftools__Profiles__Label *t = p->sample[1]->label[0];
        p->sample[1]->label[0] = p->sample[1]->label[1];
        p->sample[1]->label[1] = t;
    }
    decodes(p, &s, NULL);
    assert_int_equal(s.nprofiles, 2);
    assert_int_equal(s.profiles[0].nsamples, 2);
    em_pset_free(&s);
}

static void test_label_value_limit(void **state)
{
    pb_profile *p = small();
    char big[402];

    (void)state;
    memset(big, 'v', 401);
    big[401] = '\0';
    add_label(p, p->sample[1], "trace.id", big, 0, NULL);
    fails(p, EMBER_ELIMIT, "sample 1: label trace_id: value longer than 400 "
          "bytes");
    /* joined values count together: 300 + ',' + 107 */
    p = small();
    big[300] = '\0';
    add_label(p, p->sample[0], "k", big, 0, NULL);
    big[107] = '\0';
    add_label(p, p->sample[0], "k", big, 0, NULL);
    fails(p, EMBER_ELIMIT, "sample 0: label k: value longer than 400 bytes");
}

static void test_label_count_limit(void **state)
{
    pb_profile *p = small();
    char key[16];

    (void)state;
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof key, "k%d", i);
        add_label(p, p->sample[1], key, "v", 0, NULL);
    }
    fails(p, EMBER_ELIMIT, "sample 1: 65 labels");
}

/* Type naming beyond Go's: other names, missing and odd fields. */
static void test_type_names(void **state)
{
    const struct {
        const char *st, *su, *pt, *pu;  /* pt NULL: no period type */
        const char *want;
    } cases[] = {
        { "cpu", "nanoseconds", NULL, NULL,
          "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta" },
        { "alloc_space", "bytes", NULL, NULL,
          "memory:alloc_space:bytes:alloc_space:bytes" },
        { "objects", "count", "space", "bytes",
          "memory:objects:count:space:bytes" },
        { "goroutines", "count", "", "",
          "goroutine:goroutines:count:goroutines:count" },
        { "wall", "nanoseconds", "wall", "nanoseconds",
          "wall:wall:nanoseconds:wall:nanoseconds" },
        { "events", "count", NULL, NULL, "events:events:count:events:count" },
        { "a:b{c}", "", "x\ty", "", "x_y:a_b_c_:unknown:x_y:unknown" },
        { "", "", NULL, NULL, "unknown:unknown:unknown:unknown:unknown" },
    };

    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(cases); i++) {
        pb_profile *p = malloc(sizeof *p);
        uint64_t loc = 1;
        em_pset s;
        assert_non_null(p);
        perftools__profiles__profile__init(p);
        str(p, "");
        add_type(p, cases[i].st, cases[i].su);
        if (cases[i].pt != NULL)
            p->period_type = value_type(p, cases[i].pt, cases[i].pu);
        add_location(p, 1, 0, NULL, 0);
        add_sample(p, &loc, 1, (int64_t[]){ 3 }, 1);
        decodes(p, &s, NULL);
        assert_int_equal(s.nprofiles, 1);
        assert_string_equal(s.profiles[0].type, cases[i].want);
        assert_int_equal(s.locs[0].mapping, 0);     /* no mapping */
        em_pset_free(&s);
    }
}

/* No time in the file: the caller's; empty input: nothing, OK. */
static void test_defaults_and_empty(void **state)
{
    pb_profile *p = small();
    em_import_opts o = { .sz = sizeof o, .origin = ORIGIN, .time_ms = 77,
                         .duration_ns = 5, .period = 9 };
    em_pset s;

    (void)state;
    p->time_nanos = 0;
    p->duration_nanos = 0;
    p->period = 0;
    decodes(p, &s, &o);
    assert_int_equal(s.profiles[0].time_ms, 77);
    assert_int_equal(s.profiles[0].duration_ns, 5);
    assert_int_equal(s.profiles[0].period, 9);
    em_pset_free(&s);
    assert_int_equal(decode("", 0, ORIGIN, &s), EMBER_OK);
    assert_int_equal(s.nprofiles, 0);
    em_pset_free(&s);
}

/* ---- small profiles: bad input ------------------------------------------ */

static void test_bad_string_table(void **state)
{
    pb_profile *p = small();

    (void)state;
    free(p->string_table[0]);
    p->string_table[0] = strdup("x");
    fails(p, EMBER_EINVAL, "string table entry 0 is not empty");
}

static void test_bad_string_index(void **state)
{
    pb_profile *p;

    (void)state;
    p = small();
    p->function[1]->name = (int64_t)p->n_string_table;
    fails(p, EMBER_EINVAL, "function 2: name string index");
    p = small();
    p->function[0]->filename = -1;
    fails(p, EMBER_EINVAL, "function 1: filename string index -1 is out of "
          "range");
    p = small();
    p->mapping[0]->build_id = 1000;
    fails(p, EMBER_EINVAL, "mapping 1: build_id string index 1000");
    p = small();
    p->sample_type[1]->unit = INT64_MIN;
    fails(p, EMBER_EINVAL, "sample type 1: unit string index");
    p = small();
    p->period_type->type = 99;
    fails(p, EMBER_EINVAL, "period type 0: type string index 99");
    p = small();
    p->sample[1]->label[0]->key = 99;
    fails(p, EMBER_EINVAL, "sample 1: label key string index 99");
    p = small();
    p->sample[0]->label[0]->str = -2;
    fails(p, EMBER_EINVAL, "sample 0: label str string index -2");
    p = small();
    p->sample[0]->label[0]->num_unit = 99;
    fails(p, EMBER_EINVAL, "sample 0: label num_unit string index 99");
}

/* Packs P (freeing it), turns every '~' of the wire's strings into a NUL
** byte and decodes: RC and a message holding WANT (NULL: success). */
static void nul_decode(pb_profile *p, int rc, const char *want)
{
    size_t len;
    uint8_t *buf = pack(p, &len), *t;
    em_import_opts o = { .sz = sizeof o, .origin = ORIGIN };
    em_pset s = { 0 };
    int got;

    protobuf_c_message_free_unpacked(&p->base, NULL);
    while ((t = memchr(buf, '~', len)) != NULL)
        *t = '\0';
    got = em_pprof_decode(buf, len, &o, &s);
    if (got != rc || (want != NULL && (strncmp(em_errmsg(), ORIGIN ": ", 6)
                                       != 0 || !strstr(em_errmsg(), want))))
        fail_msg("got %d \"%s\", wanted %d \"%s\"", got, em_errmsg(), rc,
                 want != NULL ? want : "");
    em_pset_free(&s);
    free(buf);
}

/* A NUL inside a string would cut "f\0A" and "f\0B" to one name (issue
** 12): refused wherever a string names something; elsewhere harmless. */
static void test_nul_in_strings(void **state)
{
    pb_profile *p;
    int64_t unused;

    (void)state;
    p = small();                        /* functions f\0A and f\0B */
    p->function[0]->name = str(p, "f~A");
    p->function[1]->name = str(p, "f~B");
    nul_decode(p, EMBER_EINVAL, "function 1: name string 14 holds a NUL");
    p = small();
    p->function[2]->system_name = str(p, "g~");
    nul_decode(p, EMBER_EINVAL, "function 3: system_name string");
    p = small();
    p->function[1]->filename = str(p, "a.go~x");
    nul_decode(p, EMBER_EINVAL, "function 2: filename string");
    p = small();
    p->mapping[0]->filename = str(p, "/bin/~app");
    nul_decode(p, EMBER_EINVAL, "mapping 1: filename string");
    p = small();
    p->mapping[0]->build_id = str(p, "b1~d");
    nul_decode(p, EMBER_EINVAL, "mapping 1: build_id string");
    p = small();                        /* labels nul\0A, nul\0B and nul */
    p->sample[0]->label[0]->str = str(p, "nul~A");
    p->sample[1]->label[0]->str = str(p, "nul~B");
    nul_decode(p, EMBER_EINVAL, "sample 0: label str string");
    p = small();
    p->sample[1]->label[0]->key = str(p, "wor~ker");
    nul_decode(p, EMBER_EINVAL, "sample 1: label key string");
    p = small();
    add_label(p, p->sample[1], "size", NULL, 4096, "by~tes");
    nul_decode(p, EMBER_EINVAL, "sample 1: label num_unit string");
    p = small();
    p->sample_type[0]->type = str(p, "sam~ples");
    nul_decode(p, EMBER_EINVAL, "sample type 0: type string");
    p = small();                        /* a string nothing names by */
    unused = str(p, "comment ~ with a NUL");
    PUSH(p->comment, p->n_comment) = unused;
    nul_decode(p, EMBER_OK, NULL);
}

static void test_bad_references(void **state)
{
    pb_profile *p;

    (void)state;
    p = small();
    p->location[1]->line[1]->function_id = 99;
    fails(p, EMBER_EINVAL, "location 2 refers to missing function 99");
    p = small();
    p->location[0]->line[0]->function_id = 0;
    fails(p, EMBER_EINVAL, "location 1 refers to missing function 0");
    p = small();
    p->location[0]->mapping_id = 5;
    fails(p, EMBER_EINVAL, "location 1 refers to missing mapping 5");
    p = small();
    p->sample[2]->location_id[1] = 3;
    fails(p, EMBER_EINVAL, "sample 2 refers to missing location 3");
    p = small();
    p->sample[0]->location_id[0] = UINT64_MAX;     /* a "negative" id */
    fails(p, EMBER_EINVAL, "sample 0 refers to missing location "
          "18446744073709551615");
}

static void test_bad_values(void **state)
{
    pb_profile *p;

    (void)state;
    p = small();
    PUSH(p->sample[1]->value, p->sample[1]->n_value) = 5;
    fails(p, EMBER_EINVAL, "sample 1 has 3 values for 2 sample types");
    p = small();
    p->sample[2]->n_value = 1;
    fails(p, EMBER_EINVAL, "sample 2 has 1 values for 2 sample types");
    p = small();
    for (size_t i = 0; i < p->n_sample_type; i++)
        protobuf_c_message_free_unpacked(&p->sample_type[i]->base, NULL);
    p->n_sample_type = 0;
    fails(p, EMBER_EINVAL, "3 samples but no sample types");
}

static void test_bad_ids(void **state)
{
    pb_profile *p;
    uint64_t l1 = 1;

    (void)state;
    p = small();
    p->function[2]->id = 1;
    fails(p, EMBER_EINVAL, "function id 1 is used twice");
    p = small();
    p->location[1]->id = 1;
    fails(p, EMBER_EINVAL, "location id 1 is used twice");
    p = small();
    add_mapping(p, 1, "/lib/other.so");
    fails(p, EMBER_EINVAL, "mapping id 1 is used twice");
    p = small();
    p->function[0]->id = 0;
    fails(p, EMBER_EINVAL, "function at index 0 has id 0");
    p = small();
    add_location(p, 0, 0, &l1, 1);
    fails(p, EMBER_EINVAL, "location at index 2 has id 0");
    p = small();
    p->mapping[0]->id = 0;
    fails(p, EMBER_EINVAL, "mapping at index 0 has id 0");
}

static void test_limits(void **state)
{
    pb_profile *p;
    uint64_t *many = calloc(EM_PSET_MAX_DEPTH + 1, sizeof *many);
    char name[410];

    (void)state;
    assert_non_null(many);
    for (size_t i = 0; i <= EM_PSET_MAX_DEPTH; i++)
        many[i] = 1;
    p = small();
    add_location(p, 9, 1, many, EM_PSET_MAX_LINES + 1);
    fails(p, EMBER_ELIMIT, "location 9 has 257 lines");
    p = small();
    add_location(p, 9, 1, many, EM_PSET_MAX_LINES);     /* at the limit */
    add_sample(p, (uint64_t[]){ 9 }, 1, (int64_t[]){ 1, 1 }, 2);
    {
        em_pset s;
        decodes(p, &s, NULL);
        em_pset_free(&s);
    }
    p = small();
    add_sample(p, many, EM_PSET_MAX_DEPTH + 1, (int64_t[]){ 1, 1 }, 2);
    fails(p, EMBER_ELIMIT, "sample 3 has 4097 locations");
    p = small();
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    free(p->string_table[p->sample_type[0]->type]);
    p->string_table[p->sample_type[0]->type] = strdup(name);
    fails(p, EMBER_ELIMIT, "sample type 0: profile type longer than 400");
    p = small();
    for (size_t i = 0; i < p->n_sample; i++)
        p->sample[i]->n_value = 0;
    for (int i = 2; i < 256; i++)
        add_type(p, "t", "u");
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t k = 0; k < p->n_sample_type; k++)
            PUSH(p->sample[i]->value, p->sample[i]->n_value) = 1;
    {
        em_pset s;
        decodes(p, &s, NULL);      /* 256 types: at the limit */
        em_pset_free(&s);
    }
    p = small();
    for (int i = 2; i <= 256; i++)
        add_type(p, "t", "u");
    fails(p, EMBER_ELIMIT, "257 sample types (at most 256)");
    free(many);
}

/* ---- bytes that are not a profile --------------------------------------- */

/* Decodes LEN bytes at BUF expecting EINVAL and a message holding WANT. */
static void bytes_fail(const void *buf, size_t len, const char *want)
{
    em_pset s;
    int rc = decode(buf, len, ORIGIN, &s);

    if (rc != EMBER_EINVAL || strncmp(em_errmsg(), ORIGIN ": ", 6) != 0 ||
        strstr(em_errmsg(), want) == NULL)
        fail_msg("got %d \"%s\", wanted \"%s\"", rc, em_errmsg(), want);
    assert_int_equal(s.nprofiles, 0);
    em_pset_free(&s);
}

static void test_not_protobuf(void **state)
{
    const uint8_t png[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0,
                            0, 13, 'I', 'H', 'D', 'R', 0, 0, 1, 0, 0, 0, 1, 0,
                            8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89 };
    const uint8_t gz[] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x4b, 0x4c,
                           0x4a, 6, 0, 0xc2, 0x41, 0x24, 0x35, 3, 0, 0, 0 };
    /* time_nanos (field 9) as an 11-byte varint */
    const uint8_t huge[] = { 0x48, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                             0xff, 0xff, 0xff, 0x01 };
    /* string_table entry of 100 bytes with 3 present */
    const uint8_t past[] = { 0x32, 0x00, 0x32, 100, 'a', 'b', 'c' };
    /* sample_type as a varint */
    const uint8_t wire[] = { 0x32, 0x00, 0x08, 0x05 };
    /* a sample whose value list is cut inside a varint */
    const uint8_t sub[] = { 0x32, 0x00, 0x12, 0x03, 0x12, 0x01, 0x80 };
    const char *text = "main;foo;bar 10\nmain;baz 3\n";
    uint8_t junk[4096];
    uint64_t x = 88172645463325252ull;

    (void)state;
    bytes_fail(png, sizeof png, "not a valid pprof protobuf");
    bytes_fail(gz, sizeof gz, "not a valid pprof protobuf");
    bytes_fail(huge, sizeof huge, "time_nanos at byte 0: truncated or "
               "overlong");
    bytes_fail(past, sizeof past, "string at byte 2: truncated or overlong");
    bytes_fail(wire, sizeof wire, "sample type at byte 2 has wire type 0");
    bytes_fail(sub, sizeof sub, "sample 0 at byte 2 is malformed");
    bytes_fail(text, strlen(text), "not a valid pprof protobuf");
    for (size_t i = 0; i < sizeof junk; i++) {     /* xorshift garbage */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        junk[i] = (uint8_t)x;
    }
    bytes_fail(junk, sizeof junk, "not a valid pprof protobuf");
}

/* Every prefix of a real profile decodes or fails cleanly with EINVAL. */
static void test_truncated_everywhere(void **state)
{
    size_t len, fails_n = 0;
    uint8_t *buf = read_profile("goroutine.pb.gz", &len);

    (void)state;
    for (size_t n = 0; n < len; n++) {
        em_pset s;
        uint8_t *cut = malloc(n + 1);           /* exact size for ASan */
        int rc;
        assert_non_null(cut);
        memcpy(cut, buf, n);
        rc = decode(cut, n, ORIGIN, &s);
        if (rc != EMBER_OK) {
            fails_n++;
            assert_int_equal(rc, EMBER_EINVAL);
            assert_memory_equal(em_errmsg(), ORIGIN ": ", 6);
        }
        em_pset_free(&s);
        free(cut);
    }
    assert_true(fails_n > len / 2);
    em_free(buf);
}

/* Every single-byte flip: no crash, a clean code, the origin first. */
static void test_flipped_bytes(void **state)
{
    size_t len;
    uint8_t *buf = read_profile("mutex.pb.gz", &len);

    (void)state;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            em_pset s;
            int rc;
            buf[i] ^= (uint8_t)(1u << bit);
            rc = decode(buf, len, ORIGIN, &s);
            buf[i] ^= (uint8_t)(1u << bit);
            if (rc != EMBER_OK) {
                assert_true(rc == EMBER_EINVAL || rc == EMBER_ELIMIT);
                assert_memory_equal(em_errmsg(), ORIGIN ": ", 6);
            }
            em_pset_free(&s);
        }
    em_free(buf);
}

/* ---- allocation failure ------------------------------------------------- */

/* Fails each allocation in turn while decoding LEN bytes at BUF. */
static void oom_loop(const uint8_t *buf, size_t len, const em_import_opts *o)
{
    int rc = EMBER_ENOMEM;

    for (uint64_t n = 1; rc != EMBER_OK; n++) {
        em_pset s = { 0 };
        em_alloc_fail_at(n);
        rc = em_pprof_decode(buf, len, o, &s);
        em_alloc_fail_at(0);
        if (rc != EMBER_OK) {
            if (rc != EMBER_ENOMEM)
                fail_msg("allocation %llu: %d %s", (unsigned long long)n, rc,
                         em_errmsg());
            if (strstr(em_errmsg(), o->origin) == NULL)
                fail_msg("allocation %llu: \"%s\"", (unsigned long long)n,
                         em_errmsg());
        } else {
            assert_true(s.nprofiles > 0);
        }
        em_pset_free(&s);
        assert_true(n < 100000);
    }
}

static void test_oom(void **state)
{
    ember_label base[] = { { "worker", "w" } };
    em_import_opts o = { .sz = sizeof o, .origin = ORIGIN, .labels = base,
                         .nlabels = 1, .numeric_labels = true };
    pb_profile *p = small();
    size_t len;
    uint8_t *buf, *gor;

    (void)state;
    add_label(p, p->sample[0], "size", NULL, 4096, "bytes");
    p->function[1]->id = 77;            /* sparse ids: the hash path */
    p->location[1]->line[0]->function_id = 77;
    buf = pack(p, &len);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    oom_loop(buf, len, &o);
    free(buf);
    o.nlabels = 0;
    gor = read_profile("cpu.pb.gz", &len);
    oom_loop(gor, len, &o);
    em_free(gor);
}

/* ---- scale -------------------------------------------------------------- */

/* 200k sparse locations, 100k samples over 1000 label sets: linear time. */
static void test_scale(void **state)
{
    enum { NLOC = 200000, NSAMPLE = 100000, NSETS = 1000 };
    pb_profile *p = malloc(sizeof *p);
    char v[16];
    int64_t wk;
    em_pset s;
    clock_t t0;
    double secs;

    (void)state;
    assert_non_null(p);
    perftools__profiles__profile__init(p);
    str(p, "");
    add_type(p, "cpu", "nanoseconds");
    add_function(p, 5, "f");
    for (uint64_t i = 0; i < NLOC; i++) {   /* ids descending, sparse */
        uint64_t f = 5;
        add_location(p, (NLOC - i) * 7919, 0, &f, 1);
    }
    wk = str(p, "worker");
    for (int i = 0; i < NSETS; i++) {
        snprintf(v, sizeof v, "w%d", i);
        str(p, v);
    }
    for (uint64_t i = 0; i < NSAMPLE; i++) {
        uint64_t locs[3] = { (i % NLOC + 1) * 7919,
                             ((i * 31) % NLOC + 1) * 7919, 7919 };
        pb_sample *x = add_sample(p, locs, 3, (int64_t[]){ 1 }, 1);
        Perftools__Profiles__Label *l = malloc(sizeof *l);
        assert_non_null(l);
        perftools__profiles__label__init(l);
        l->key = wk;
        l->str = wk + 1 + (int64_t)(i % NSETS);
        PUSH(x->label, x->n_label) = l;
    }
    t0 = clock();
    decodes(p, &s, NULL);
    secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(s.nprofiles, NSETS);
    assert_int_equal(s.nsamples, NSAMPLE);
    assert_true(secs < 20);     /* about 0.1 s; quadratic would be hours */
    em_pset_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_go_cpu),
        cmocka_unit_test(test_go_cpu_label_sums),
        cmocka_unit_test(test_go_heap),
        cmocka_unit_test(test_go_heap_numeric_labels),
        cmocka_unit_test(test_go_mutex_block_goroutine),
        cmocka_unit_test(test_go_goroutine_labels),
        cmocka_unit_test(test_go_name_and_labels),
        cmocka_unit_test(test_go_two_files_one_set),
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_sparse_ids),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_labels_many),
        cmocka_unit_test(test_label_order),
        cmocka_unit_test(test_label_value_limit),
        cmocka_unit_test(test_label_count_limit),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_defaults_and_empty),
        cmocka_unit_test(test_bad_string_table),
        cmocka_unit_test(test_bad_string_index),
        cmocka_unit_test(test_nul_in_strings),
        cmocka_unit_test(test_bad_references),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_not_protobuf),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_flipped_bytes),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_scale),
    };
    int failed = cmocka_run_group_tests_name("unpacked whole", tests, NULL,
                                             NULL);

    /* again with every input taken sample by sample, as big files are */
    em_pprof_whole_max = 0;
    return failed + cmocka_run_group_tests_name("sample by sample", tests,
                                                NULL, NULL);
}
