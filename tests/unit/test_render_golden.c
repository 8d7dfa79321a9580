/*
** tests/unit/test_render_golden.c: every renderer on real data, through the
** dispatch (em_render_result) that `ember query -o` and the REPL use.
**
** The Go profiles of tests/data/pprof are imported into a scratch database,
** merged (ember_merge) and resolved (em_rprofile_build); diffs pair two
** merges of the CPU profile's worker labels (em_rprofile_add_diff); series
** and tables are hand-built results. Each output is compared with a golden
** file tests/golden/render/NAME.txt.
**
** To rewrite the golden files after an intended change of a format, run
** from the repository root:
**
**     EMBER_UPDATE_GOLDEN=1 build/tests/test_render_golden
**
** and review `git diff tests/golden/render` before committing: the files
** are the formats' specification by example (docs/output-formats.md quotes
** them).
**
** Besides the golden files: JSON outputs parse (a small checker below) and
** are valid UTF-8 whatever the names hold; a diff's collapsed columns sum to
** the two merges; top through the dispatch equals test_render.c's pprof
** expectations; format checks and errors; max_lines cutting; allocation
** failure at every call of each renderer; and a 100k-stack profile renders
** in every format in well under a second each.
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
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/pprof"
#define GOLDEN_DIR "tests/golden/render"

/* ---- output capture and golden files ------------------------------------------ */


static bool update_golden(void)
{
    const char *e = getenv("EMBER_UPDATE_GOLDEN");
    return e != NULL && strcmp(e, "1") == 0;
}

/* Compares TEXT with tests/golden/render/NAME.txt (or rewrites it). */
static void golden_check(const char *name, const char *text, size_t len)
{
    char path[256];
    size_t want_len = 0;
    char *want;

    snprintf(path, sizeof path, "%s/%s.txt", GOLDEN_DIR, name);
    if (update_golden()) {
        FILE *f;
        mkdir("tests/golden", 0755);
        mkdir(GOLDEN_DIR, 0755);
        f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(text, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
        return;
    }
    want = tu_read_file(path, &want_len);
    if (want == NULL)
        fail_msg("%s: missing; run with EMBER_UPDATE_GOLDEN=1 to write it",
                 path);
    if (want_len != len || memcmp(want, text, len) != 0) {
        print_message("--- got (%zu bytes):\n%s--- want %s (%zu bytes)\n",
                      len, text, path, want_len);
        free(want);
        fail_msg("%s differs", path);
    }
    free(want);
}

/* ---- a JSON syntax checker ------------------------------------------------------ */

typedef struct jp {
    const char *s;
    size_t depth;
} jp;

static bool j_value(jp *p);

static void j_ws(jp *p)
{
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\t' || *p->s == '\r')
        p->s++;
}

static bool j_string(jp *p)
{
    if (*p->s++ != '"')
        return false;
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s++;
        if (c == '\0' || c < 0x20)
            return false;
        if (c != '\\')
            continue;
        c = (unsigned char)*p->s++;
        if (c == 'u') {
            for (int i = 0; i < 4; i++)
                if (!((*p->s >= '0' && *p->s <= '9') ||
                      (*p->s >= 'a' && *p->s <= 'f') ||
                      (*p->s >= 'A' && *p->s <= 'F')))
                    return false;
                else
                    p->s++;
        } else if (strchr("\"\\/bfnrt", c) == NULL || c == '\0') {
            return false;
        }
    }
    p->s++;
    return true;
}

static bool j_number(jp *p)
{
    char *end;
    strtod(p->s, &end);
    if (end == p->s || *p->s == '+' || *p->s == '.')
        return false;
    p->s = end;
    return true;
}

static bool j_list(jp *p, char close, bool object)
{
    p->s++;
    j_ws(p);
    if (*p->s == close) {
        p->s++;
        return true;
    }
    for (;;) {
        j_ws(p);
        if (object) {
            if (!j_string(p))
                return false;
            j_ws(p);
            if (*p->s++ != ':')
                return false;
        }
        if (!j_value(p))
            return false;
        j_ws(p);
        if (*p->s == close) {
            p->s++;
            return true;
        }
        if (*p->s++ != ',')
            return false;
    }
}

static bool j_value(jp *p)
{
    bool ok;

    j_ws(p);
    if (++p->depth > 10000)
        return false;
    if (*p->s == '{')
        ok = j_list(p, '}', true);
    else if (*p->s == '[')
        ok = j_list(p, ']', false);
    else if (*p->s == '"')
        ok = j_string(p);
    else if (strncmp(p->s, "null", 4) == 0 || strncmp(p->s, "true", 4) == 0)
        ok = (p->s += 4, true);
    else if (strncmp(p->s, "false", 5) == 0)
        ok = (p->s += 5, true);
    else
        ok = j_number(p);
    p->depth--;
    return ok;
}

/* True when TEXT is valid UTF-8 (no overlong forms or surrogates). */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], need = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 :
                     (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        uint32_t cp = c & (0x7fu >> need);
        if (need == 9 || i + need >= n + (need == 0))
            return false;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3fu);
        }
        if ((need == 1 && cp < 0x80) || (need == 2 && cp < 0x800) ||
            (need == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += need + 1;
    }
    return true;
}

static void json_check(const char *text, size_t len)
{
    jp p = { text, 0 };

    assert_true(utf8_ok((const unsigned char *)text, len));
    if (!j_value(&p))
        fail_msg("bad JSON at byte %zu: %.40s", (size_t)(p.s - text), p.s);
    j_ws(&p);
    assert_int_equal(*p.s, '\0');
}

/* ---- the database and its profiles ---------------------------------------------- */

typedef struct fix {
    char *dir;
    ember_db *db;
    char *cpu_type, *heap_type;
    ember_merged *cpu_m;
    em_rprofile cpu, heap, diff, hash, sort;
} fix;

static void import_file(ember_db *db, const char *name)
{
    em_import_opts o = { .sz = sizeof o, .origin = name };
    char path[256];
    size_t len = 0;
    char *buf;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    buf = tu_read_file(path, &len);
    assert_non_null(buf);
    if (em_import(db, buf, len, &o, NULL) != EMBER_OK)
        fail_msg("import %s: %s", name, em_errmsg());
    free(buf);
}

/* The one profile type holding NEEDLE. */
static char *type_with(ember_db *db, const char *needle)
{
    ember_strlist *l = NULL;
    char *type = NULL;

    assert_int_equal(ember_profile_types(db, NULL, &l), EMBER_OK);
    for (size_t i = 0; i < ember_strlist_count(l); i++)
        if (strstr(ember_strlist_get(l, i), needle) != NULL)
            type = strdup(ember_strlist_get(l, i));
    ember_strlist_free(l);
    assert_non_null(type);
    return type;
}

/* Merges TYPE{worker=~RE} (RE NULL: all) into *P; *M keeps the merge when
** not NULL. */
static void merge_into(fix *f, const char *type, const char *re,
                       em_rprofile *p, ember_merged **m)
{
    ember_matcher mt = { "worker", re, EMBER_MATCH_RE };
    ember_selector sel = { .sz = sizeof sel, .type = type,
                           .matchers = re != NULL ? &mt : NULL,
                           .nmatchers = re != NULL ? 1 : 0 };
    ember_merged *got = NULL;

    assert_int_equal(ember_merge(f->db, &sel, &got), EMBER_OK);
    assert_int_equal(em_rprofile_build(f->db, got, type, NULL, p), EMBER_OK);
    if (m != NULL)
        *m = got;
    else
        ember_merged_free(got);
}

/* Appends every stack of SRC to the diff DST, as BASE or TARGET values. */
static void diff_add(em_rprofile *dst, const em_rprofile *src, bool target)
{
    em_rframe fr[4096];

    for (size_t i = 0; i < src->nstacks; i++) {
        const em_rstack *s = &src->stacks[i];
        assert_true(s->nframes <= 4096);
        for (size_t k = 0; k < s->nframes; k++) {
            const char *name = em_strtab_get(&src->names,
                                             src->frames[s->first + k].fn);
            assert_int_equal(em_strtab_intern(&dst->names, name, strlen(name),
                                              &fr[k].fn), EMBER_OK);
            fr[k].flags = src->frames[s->first + k].flags;
        }
        assert_int_equal(em_rprofile_add_diff(dst, fr, s->nframes,
                                              target ? 0 : s->value,
                                              target ? s->value : 0),
                         EMBER_OK);
    }
}

static int fix_setup(void **state)
{
    fix *f = calloc(1, sizeof *f);

    f->dir = tu_tmpdir("render-golden");
    f->db = tu_open(f->dir, 0);
    import_file(f->db, "cpu.pb.gz");
    import_file(f->db, "heap.pb.gz");
    f->cpu_type = type_with(f->db, ":cpu:nanoseconds:cpu:");
    f->heap_type = type_with(f->db, ":alloc_space:bytes:");
    merge_into(f, f->cpu_type, NULL, &f->cpu, &f->cpu_m);
    merge_into(f, f->heap_type, NULL, &f->heap, NULL);
    merge_into(f, f->cpu_type, "hash", &f->hash, NULL);
    merge_into(f, f->cpu_type, "sort", &f->sort, NULL);
    {
        em_rprofile base, target;
        merge_into(f, f->cpu_type, "sort|tree", &base, NULL);
        merge_into(f, f->cpu_type, "hash|tree", &target, NULL);
        assert_int_equal(em_rprofile_init(&f->diff, f->cpu_type), EMBER_OK);
        diff_add(&f->diff, &base, false);
        diff_add(&f->diff, &target, true);
        assert_true(f->diff.diff);
        em_rprofile_free(&base);
        em_rprofile_free(&target);
    }
    *state = f;
    return 0;
}

static int fix_teardown(void **state)
{
    fix *f = *state;

    em_rprofile_free(&f->cpu);
    em_rprofile_free(&f->heap);
    em_rprofile_free(&f->diff);
    em_rprofile_free(&f->hash);
    em_rprofile_free(&f->sort);
    ember_merged_free(f->cpu_m);
    ember_close(f->db);
    tu_rmdir(f->dir);
    free(f->cpu_type);
    free(f->heap_type);
    free(f);
    return 0;
}

/* ---- results around profiles ---------------------------------------------------- */

static ember_label hash_label[] = { { "worker", "hash" } };
static ember_label sort_label[] = { { "worker", "sort" } };

/* A one-group result over P (no labels). */
static ember_result one(const em_rprofile *p, const char *type,
                        ember_merged *m, em_pgroup *g)
{
    memset(g, 0, sizeof *g);
    g->prof = *p;
    g->merged = m;
    g->nseries = 1;
    g->nprofiles = 1;
    return (ember_result){ .kind = p->diff ? EMBER_RESULT_DIFF :
                                             EMBER_RESULT_PROFILE,
                           .type = (char *)type, .unit = p->unit,
                           .groups = g, .ngroups = 1 };
}

static ember_result two(fix *f, em_pgroup g[2])
{
    memset(g, 0, 2 * sizeof *g);
    g[0].labels = hash_label;
    g[0].nlabels = 1;
    g[0].prof = f->hash;
    g[0].nseries = 1;
    g[0].nprofiles = 1;
    g[1].labels = sort_label;
    g[1].nlabels = 1;
    g[1].prof = f->sort;
    g[1].nseries = 1;
    g[1].nprofiles = 1;
    return (ember_result){ .kind = EMBER_RESULT_PROFILE,
                           .type = f->cpu_type, .unit = f->cpu.unit,
                           .groups = g, .ngroups = 2 };
}

/* Renders R in FORMAT with O (NULL: defaults) and checks golden NAME. */
static void expect_golden(const char *name, const ember_result *r,
                          const char *format, const em_render_opts *o)
{
    tu_out c;
    int rc;

    tu_out_open(&c);
    rc = em_render_result(c.f, r, format, o);
    tu_out_close(&c);
    if (rc != EMBER_OK)
        fail_msg("%s: rc %d: %s", name, rc, em_errmsg());
    if (strcmp(format, "json") == 0)
        json_check(c.text, c.len);
    golden_check(name, c.text, c.len);
    free(c.text);
}

/* ---- profiles -------------------------------------------------------------------- */

static void test_cpu_formats(void **state)
{
    fix *f = *state;
    em_pgroup g;
    ember_result r = one(&f->cpu, f->cpu_type, f->cpu_m, &g);
    em_render_opts cum = { .sz = sizeof cum, .cum_sort = true, .limit = 12 };
    em_render_opts lim = { .sz = sizeof lim, .limit = 10 };
    em_render_opts color = { .sz = sizeof color, .color = true };
    em_render_opts narrow = { .sz = sizeof narrow, .width = 40 };
    em_render_opts q = { .sz = sizeof q, .query = "cpu{}" };

    expect_golden("cpu_top", &r, "top", NULL);
    expect_golden("cpu_top_cum", &r, "top", &cum);
    expect_golden("cpu_tree", &r, "tree", NULL);
    expect_golden("cpu_tree_limit", &r, "tree", &lim);
    expect_golden("cpu_flame", &r, "flame", NULL);
    expect_golden("cpu_flame_w40", &r, "flame", &narrow);
    expect_golden("cpu_flame_color", &r, "flame", &color);
    expect_golden("cpu_collapsed", &r, "collapsed", NULL);
    expect_golden("cpu_json", &r, "json", &q);
}

static void test_heap_formats(void **state)
{
    fix *f = *state;
    em_pgroup g;
    ember_result r = one(&f->heap, f->heap_type, NULL, &g);

    expect_golden("heap_top", &r, "top", NULL);
    expect_golden("heap_tree", &r, "tree", NULL);
    expect_golden("heap_flame", &r, "flame", NULL);
}

static void test_diff_formats(void **state)
{
    fix *f = *state;
    em_pgroup g;
    ember_result r = one(&f->diff, f->cpu_type, NULL, &g);
    em_render_opts cum = { .sz = sizeof cum, .cum_sort = true };
    em_render_opts color = { .sz = sizeof color, .color = true };
    em_render_opts lim = { .sz = sizeof lim, .limit = 5 };

    expect_golden("diff_top", &r, "top", NULL);
    expect_golden("diff_top_cum", &r, "top", &cum);
    expect_golden("diff_top_color", &r, "top", &color);
    expect_golden("diff_tree", &r, "tree", NULL);
    expect_golden("diff_tree_color", &r, "tree", &color);
    expect_golden("diff_flame", &r, "flame", NULL);
    expect_golden("diff_flame_color", &r, "flame", &color);
    expect_golden("diff_collapsed", &r, "collapsed", NULL);
    expect_golden("diff_json", &r, "json", NULL);
    r.top_limit = 3;                /* top(P, 3): the default row limit */
    expect_golden("diff_top_limit3", &r, "top", NULL);
    expect_golden("diff_top_limit5", &r, "top", &lim);   /* opts win */
}

/* The differential collapsed columns sum to the two sides' totals. */
static void test_diff_collapsed_matches_merges(void **state)
{
    fix *f = *state;
    int64_t want_b = 0, want_t = 0, got_b = 0, got_t = 0;
    tu_out c;

    for (size_t i = 0; i < f->diff.nstacks; i++) {
        want_b += f->diff.stacks[i].base;
        want_t += f->diff.stacks[i].value;
    }
    assert_true(want_b > 0 && want_t > 0 && want_b != want_t);
    tu_out_open(&c);
    assert_int_equal(em_render_collapsed(c.f, &f->diff), EMBER_OK);
    tu_out_close(&c);
    for (char *line = strtok(c.text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        char *t = strrchr(line, ' '), *b;
        assert_non_null(t);
        *t = '\0';
        b = strrchr(line, ' ');
        assert_non_null(b);
        got_b += strtoll(b + 1, NULL, 10);
        got_t += strtoll(t + 1, NULL, 10);
    }
    assert_int_equal(got_b, want_b);
    assert_int_equal(got_t, want_t);
    free(c.text);
}

static void test_groups(void **state)
{
    fix *f = *state;
    em_pgroup g[2];
    ember_result r = two(f, g);
    em_render_opts o = { .sz = sizeof o, .db = f->db, .limit = 5 };
    tu_out c;

    expect_golden("groups_top", &r, "top", &o);
    expect_golden("groups_tree", &r, "tree", &o);
    expect_golden("groups_flame", &r, "flame", NULL);
    expect_golden("groups_collapsed", &r, "collapsed", NULL);
    expect_golden("groups_json", &r, "json", NULL);
    tu_out_open(&c);
    assert_int_equal(em_render_result(c.f, &r, "pprof", &o), EMBER_EINVAL);
    assert_non_null(strstr(em_errmsg(), "2 groups"));
    assert_int_equal(em_render_result(c.f, &r, "svg", &o), EMBER_EINVAL);
    tu_out_close(&c);
    assert_int_equal(c.len, 0);
    free(c.text);
}

static void test_pprof(void **state)
{
    fix *f = *state;
    em_pgroup g;
    ember_result r = one(&f->cpu, f->cpu_type, f->cpu_m, &g);
    em_render_opts o = { .sz = sizeof o, .db = f->db, .max_lines = 1 };
    void *plain = NULL;
    size_t plain_len = 0;
    tu_out c;

    tu_out_open(&c);
    assert_int_equal(em_render_result(c.f, &r, "pprof", &o), EMBER_OK);
    tu_out_close(&c);
    /* binary: never cut by max_lines */
    assert_true(c.len > 100);
    assert_true(em_is_gzip(c.text, c.len));
    assert_int_equal(em_gunzip(c.text, c.len, 1u << 26, &plain, &plain_len),
                     EMBER_OK);
    assert_true(plain_len > c.len);
    em_free(plain);
    free(c.text);
    /* no database or no stack ids: a clear error, nothing written */
    o.db = NULL;
    tu_out_open(&c);
    assert_int_equal(em_render_result(c.f, &r, "pprof", &o), EMBER_EINVAL);
    g.merged = NULL;
    o.db = f->db;
    assert_int_equal(em_render_result(c.f, &r, "pprof", &o), EMBER_EINVAL);
    r.ngroups = 0;
    assert_int_equal(em_render_result(c.f, &r, "pprof", &o),
                     EMBER_ENOTFOUND);
    tu_out_close(&c);
    assert_int_equal(c.len, 0);
    free(c.text);
}

/* Empty results draw empty reports, not errors. */
static void test_empty_results(void **state)
{
    fix *f = *state;
    ember_result r = { .kind = EMBER_RESULT_PROFILE, .type = f->cpu_type,
                       .unit = (char *)"nanoseconds" };
    static const char *const fmts[] = { "top", "tree", "flame", "collapsed",
                                        "json" };
    tu_out c;

    tu_out_open(&c);
    for (size_t i = 0; i < EM_ARRAY_LEN(fmts); i++)
        assert_int_equal(em_render_result(c.f, &r, fmts[i], NULL), EMBER_OK);
    r.kind = EMBER_RESULT_DIFF;
    for (size_t i = 0; i < EM_ARRAY_LEN(fmts); i++)
        assert_int_equal(em_render_result(c.f, &r, fmts[i], NULL), EMBER_OK);
    tu_out_close(&c);
    golden_check("empty_profiles", c.text, c.len);
    free(c.text);
}

/* ---- names that need escaping ------------------------------------------------------ */

static void test_hostile_names(void **state)
{
    static const char *const names[] = {
        "main", "quote\"back\\slash", "ctl\x01\x1f\ttab\nnl",
        "bad\xff\xc3(utf8", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",
        "semi;colon", "\xf0\x9f\x94\xa5" "fire",
    };
    em_rprofile p;
    em_rframe fr[2];
    em_pgroup g;
    ember_result r;
    em_render_opts narrow = { .sz = sizeof narrow, .width = 30 };
    (void)state;

    assert_int_equal(em_rprofile_init(&p, "x:cpu:nanoseconds:cpu:ns"),
                     EMBER_OK);
    assert_int_equal(em_strtab_intern(&p.names, names[0], 4, &fr[1].fn), 0);
    fr[0].flags = fr[1].flags = 0;
    for (size_t i = 1; i < EM_ARRAY_LEN(names); i++) {
        assert_int_equal(em_strtab_intern(&p.names, names[i],
                                          strlen(names[i]), &fr[0].fn), 0);
        assert_int_equal(em_rprofile_add(&p, fr, 2, (int64_t)i * 1000),
                         EMBER_OK);
    }
    r = one(&p, "x:cpu:nanoseconds:cpu:ns", NULL, &g);
    expect_golden("names_json", &r, "json", NULL);
    expect_golden("names_collapsed", &r, "collapsed", NULL);
    expect_golden("names_flame", &r, "flame", &narrow);
    expect_golden("names_tree", &r, "tree", NULL);
    em_rprofile_free(&p);
}

/* ---- series and tables ------------------------------------------------------------- */

static ember_label s1_labels[] = { { "__type__", "cpu" }, { "pod", "api-1" } };
static ember_label s2_labels[] = { { "pod", "api,\"2\"" },
                                   { "zone", "eu" } };
static int64_t s1_times[] = { 1732170000000, 1732170010000, 1732170020000,
                              1732170030000, 1732170040000, 1732170050500 };
static double s1_values[] = { 120e6, 350e6, 90e6, 1.2e9, 0, 410e6 };
static int64_t s2_times[] = { 1732170010000, 1732170030000, 1732170040000 };
static double s2_values[] = { 5e6, 7.5e6, 1e6 };

static ember_result series_result(em_series s[2])
{
    s[0] = (em_series){ s1_labels, 2, s1_times, s1_values, 6 };
    s[1] = (em_series){ s2_labels, 2, s2_times, s2_values, 3 };
    return (ember_result){ .kind = EMBER_RESULT_SERIES,
                           .unit = (char *)"nanoseconds", .series = s,
                           .nseries = 2, .from_ms = 1732170000000,
                           .to_ms = 1732170060000, .step_ms = 10000 };
}

static void test_series_formats(void **state)
{
    em_series s[2];
    ember_result r = series_result(s);
    em_render_opts narrow = { .sz = sizeof narrow, .width = 30 };
    em_render_opts color = { .sz = sizeof color, .color = true };
    em_render_opts q = { .sz = sizeof q, .query = "total(cpu{})" };
    (void)state;

    expect_golden("series_table", &r, "table", NULL);
    expect_golden("series_table_blocks", &r, "table", &narrow);
    expect_golden("series_csv", &r, "csv", NULL);
    expect_golden("series_json", &r, "json", &q);
    expect_golden("series_spark", &r, "spark", NULL);
    expect_golden("series_spark_color", &r, "spark", &color);
}

/* Rates: fractional values, a unit with "/s", NaN, and more points than
** sparkline cells. */
static void test_series_rates(void **state)
{
    static int64_t t[200];
    static double v[200];
    static ember_label l[] = { { "pod", "a" } };
    em_series s = { l, 1, t, v, 200 };
    ember_result r = { .kind = EMBER_RESULT_SERIES,
                       .unit = (char *)"count/s", .series = &s,
                       .nseries = 1 };
    (void)state;

    for (size_t i = 0; i < 200; i++) {
        t[i] = 1732170000000 + (int64_t)i * 15000;
        v[i] = i == 7 ? NAN : 0.5 + sin((double)i / 10.0) / 4;
    }
    expect_golden("rates_spark", &r, "spark", NULL);
    expect_golden("rates_json", &r, "json", NULL);
    s.n = 4;
    expect_golden("rates_csv", &r, "csv", NULL);
    r.unit = (char *)"nanoseconds/s";
    v[0] = 350e6;
    expect_golden("rates_table", &r, "table", NULL);
}

static void test_table_formats(void **state)
{
    static char *rows[] = { (char *)"pod", (char *)"service",
                            (char *)"with,comma", (char *)"zone \"z\"" };
    ember_result r = { .kind = EMBER_RESULT_TABLE,
                       .column = (char *)"label", .rows = rows, .nrows = 4 };
    ember_result none = { .kind = EMBER_RESULT_TABLE,
                          .column = (char *)"type" };
    (void)state;

    expect_golden("table_table", &r, "table", NULL);
    expect_golden("table_csv", &r, "csv", NULL);
    expect_golden("table_json", &r, "json", NULL);
    expect_golden("table_empty", &none, "table", NULL);
    expect_golden("table_empty_json", &none, "json", NULL);
}

static void test_empty_series(void **state)
{
    ember_result r = { .kind = EMBER_RESULT_SERIES,
                       .unit = (char *)"count" };
    static const char *const fmts[] = { "table", "csv", "json", "spark" };
    tu_out c;
    (void)state;

    tu_out_open(&c);
    for (size_t i = 0; i < EM_ARRAY_LEN(fmts); i++)
        assert_int_equal(em_render_result(c.f, &r, fmts[i], NULL), EMBER_OK);
    tu_out_close(&c);
    golden_check("empty_series", c.text, c.len);
    free(c.text);
}

/* ---- dispatch ---------------------------------------------------------------------- */

static void test_dispatch(void **state)
{
    ember_result r = { .kind = EMBER_RESULT_SERIES };
    tu_out c;
    (void)state;

    assert_string_equal(em_render_default(EMBER_RESULT_PROFILE), "top");
    assert_string_equal(em_render_default(EMBER_RESULT_DIFF), "top");
    assert_string_equal(em_render_default(EMBER_RESULT_SERIES), "table");
    assert_string_equal(em_render_default(EMBER_RESULT_TABLE), "table");
    assert_true(em_render_fits(EMBER_RESULT_PROFILE, "flame"));
    assert_true(em_render_fits(EMBER_RESULT_DIFF, "svg"));
    assert_true(em_render_fits(EMBER_RESULT_SERIES, "spark"));
    assert_true(em_render_fits(EMBER_RESULT_TABLE, "json"));
    assert_false(em_render_fits(EMBER_RESULT_TABLE, "spark"));
    assert_false(em_render_fits(EMBER_RESULT_SERIES, "top"));
    assert_false(em_render_fits(EMBER_RESULT_PROFILE, "csv"));
    assert_false(em_render_fits(EMBER_RESULT_PROFILE, "nope"));
    assert_false(em_render_fits(99, "json"));
    assert_true(em_render_binary("pprof"));
    assert_false(em_render_binary("svg"));
    assert_false(em_render_binary("nope"));
    tu_out_open(&c);
    assert_int_equal(em_render_result(c.f, &r, "top", NULL), EMBER_EINVAL);
    assert_string_equal(em_errmsg(), "-o top does not render a series "
                        "result: expected json, table, csv or spark");
    assert_int_equal(em_render_result(c.f, &r, "flamegraph", NULL),
                     EMBER_EINVAL);
    assert_string_equal(em_errmsg(), "unknown output format \"flamegraph\": "
                        "for a series result, expected json, table, csv or "
                        "spark");
    r.kind = EMBER_RESULT_PROFILE;
    assert_int_equal(em_render_result(c.f, &r, "csv", NULL), EMBER_EINVAL);
    assert_string_equal(em_errmsg(), "-o csv does not render a profile "
                        "result: expected top, tree, flame, collapsed, pprof, "
                        "json or svg");
    r.kind = 0;
    assert_int_equal(em_render_result(c.f, &r, "json", NULL), EMBER_EINVAL);
    tu_out_close(&c);
    assert_int_equal(c.len, 0);
    free(c.text);
}

/* max_lines cuts text and says how many lines were left out. */
static void test_max_lines(void **state)
{
    fix *f = *state;
    em_pgroup g;
    ember_result r = one(&f->cpu, f->cpu_type, NULL, &g);
    em_render_opts o = { .sz = sizeof o, .max_lines = 6 };
    tu_out all, cut;
    size_t lines = 0;

    expect_golden("cut_top", &r, "top", &o);
    tu_out_open(&all);
    assert_int_equal(em_render_result(all.f, &r, "collapsed", NULL), 0);
    tu_out_close(&all);
    for (size_t i = 0; i < all.len; i++)
        lines += all.text[i] == '\n';
    tu_out_open(&cut);
    o.max_lines = 3;
    assert_int_equal(em_render_result(cut.f, &r, "collapsed", &o), 0);
    tu_out_close(&cut);
    {
        const char *p = all.text;
        char note[128];
        for (int i = 0; i < 3; i++)
            p = strchr(p, '\n') + 1;
        assert_memory_equal(cut.text, all.text, (size_t)(p - all.text));
        snprintf(note, sizeof note, "... %zu more rows (use .limit or -o "
                 "FORMAT > file)\n", lines - 3);
        assert_string_equal(cut.text + (p - all.text), note);
    }
    free(all.text);
    free(cut.text);
    /* exactly max_lines lines: no note */
    o.max_lines = lines;
    tu_out_open(&cut);
    assert_int_equal(em_render_result(cut.f, &r, "collapsed", &o), 0);
    tu_out_close(&cut);
    assert_null(strstr(cut.text, "more rows"));
    free(cut.text);
}

/* top through the dispatch is test_render.c's pprof top, unchanged. */
static void test_top_unchanged(void **state)
{
    em_rprofile p;
    em_rframe fr[4];
    uint32_t main_id, a, b, c;
    em_pgroup g;
    ember_result r;
    tu_out o;
    (void)state;

    assert_int_equal(em_rprofile_init(&p, "process_cpu:samples:count:cpu:"
                                      "nanoseconds:delta"), EMBER_OK);
    assert_int_equal(em_strtab_intern(&p.names, "main", 4, &main_id), 0);
    assert_int_equal(em_strtab_intern(&p.names, "a", 1, &a), 0);
    assert_int_equal(em_strtab_intern(&p.names, "b", 1, &b), 0);
    assert_int_equal(em_strtab_intern(&p.names, "c", 1, &c), 0);
    for (int i = 0; i < 4; i++)
        fr[i] = (em_rframe){ i < 3 ? a : main_id, 0 };
    assert_int_equal(em_rprofile_add(&p, fr, 4, 10), EMBER_OK);
    fr[0] = (em_rframe){ b, 0 };
    fr[1] = (em_rframe){ a, 0 };
    fr[2] = (em_rframe){ main_id, 0 };
    assert_int_equal(em_rprofile_add(&p, fr, 3, 5), EMBER_OK);
    fr[0] = (em_rframe){ c, 0 };
    fr[1] = (em_rframe){ main_id, 0 };
    assert_int_equal(em_rprofile_add(&p, fr, 2, 5), EMBER_OK);
    r = one(&p, NULL, NULL, &g);
    tu_out_open(&o);
    assert_int_equal(em_render_result(o.f, &r, "top", NULL), EMBER_OK);
    tu_out_close(&o);
    assert_string_equal(o.text,
        "Type: samples\n"
        "Showing nodes accounting for 20, 100% of 20 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        10 50.00% 50.00%         15 75.00%  a\n"
        "         5 25.00% 75.00%          5 25.00%  b\n"
        "         5 25.00%   100%          5 25.00%  c\n"
        "         0     0%   100%         20   100%  main\n");
    free(o.text);
    em_rprofile_free(&p);
}

/* ---- allocation failure ---------------------------------------------------------------- */

typedef struct oom_case {
    const char *format;
    bool diff, series;
    em_render_opts o;
} oom_case;

static void test_out_of_memory(void **state)
{
    fix *f = *state;
    const oom_case cases[] = {
        { "top", true, false, { .sz = sizeof(em_render_opts) } },
        { "tree", false, false, { .sz = sizeof(em_render_opts) } },
        { "tree", true, false, { .sz = sizeof(em_render_opts) } },
        { "flame", false, false, { .sz = sizeof(em_render_opts),
                                   .color = true } },
        { "flame", true, false, { .sz = sizeof(em_render_opts) } },
        { "collapsed", true, false, { .sz = sizeof(em_render_opts) } },
        { "json", true, false, { .sz = sizeof(em_render_opts) } },
        { "table", false, true, { .sz = sizeof(em_render_opts) } },
        { "csv", false, true, { .sz = sizeof(em_render_opts) } },
        { "spark", false, true, { .sz = sizeof(em_render_opts) } },
        { "top", false, false, { .sz = sizeof(em_render_opts),
                                 .max_lines = 3 } },
    };
    em_series s[2];
    ember_result sr = series_result(s);

    for (size_t k = 0; k < EM_ARRAY_LEN(cases); k++) {
        em_pgroup g;
        ember_result pr = one(cases[k].diff ? &f->diff : &f->sort,
                              f->cpu_type, NULL, &g);
        int rc = EMBER_ENOMEM;
        for (uint64_t i = 1; rc == EMBER_ENOMEM && i < 10000; i++) {
            tu_out c;
            tu_out_open(&c);
            em_alloc_fail_at(i);
            rc = em_render_result(c.f, cases[k].series ? &sr : &pr,
                                  cases[k].format, &cases[k].o);
            em_alloc_fail_at(0);
            tu_out_close(&c);
            free(c.text);
            if (rc != EMBER_OK && rc != EMBER_ENOMEM)
                fail_msg("%s: rc %d", cases[k].format, rc);
        }
        assert_int_equal(rc, EMBER_OK);
    }
}

/* ---- speed ------------------------------------------------------------------------------ */

/* CPU time: other processes on a busy machine do not count. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 100k distinct stacks of depth 8 to 40 over 2,000 functions: random
** walks from main through a call graph where each function calls 4 others
** (so edges are few, as in programs), which leaves a call tree of about
** 1.5M nodes: far more than real profiles of 100k stacks, a worst case. */
static void big_profile(em_rprofile *p, bool diff)
{
    uint64_t x = 88172645463325252ull;
    em_rframe fr[40];
    char name[32];

    assert_int_equal(em_rprofile_init(p, "x:cpu:nanoseconds:cpu:ns"), 0);
    for (int i = 0; i < 2000; i++) {
        uint32_t id;
        int n = snprintf(name, sizeof name, "pkg.function_%d", i);
        assert_int_equal(em_strtab_intern(&p->names, name, (size_t)n, &id),
                         0);
    }
    for (int i = 0; i < 100000; i++) {
        size_t depth = 8 + (size_t)(i % 33);
        uint32_t fn = 0;
        for (size_t k = 0; k < depth; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            fr[depth - 1 - k] = (em_rframe){ fn, 0 };
            fn = (uint32_t)((fn * 7919u + (x % 4) * 104729u + 1) % 2000);
        }
        if (diff)
            assert_int_equal(em_rprofile_add_diff(p, fr, depth,
                             (int64_t)(x % 5000), (int64_t)(x % 7000)), 0);
        else
            assert_int_equal(em_rprofile_add(p, fr, depth,
                                             1 + (int64_t)(x % 10000)), 0);
    }
}

/* A big profile and a big diff render in every format. The times are
** printed, not asserted: a test must not fail because the machine is
** busy (under load this took over a second); speed is measured in
** bench/. */
static void test_speed(void **state)
{
    static const char *const fmts[] = { "top", "tree", "flame", "collapsed",
                                        "json" };
    FILE *null = fopen("/dev/null", "w");
    em_render_opts o = { .sz = sizeof o, .limit = 50 };
    (void)state;

    assert_non_null(null);
    for (int d = 0; d < 2; d++) {
        em_rprofile p;
        em_pgroup g;
        ember_result r;
        big_profile(&p, d == 1);
        r = one(&p, "x:cpu:nanoseconds:cpu:ns", NULL, &g);
        for (size_t i = 0; i < EM_ARRAY_LEN(fmts); i++) {
            double t0 = now_s(), dt;
            assert_int_equal(em_render_result(null, &r, fmts[i], &o), 0);
            dt = now_s() - t0;
            print_message("  %s %-9s %6.0f ms\n", d ? "diff" : "profile",
                          fmts[i], dt * 1000);
        }
        em_rprofile_free(&p);
    }
    fclose(null);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_formats),
        cmocka_unit_test(test_heap_formats),
        cmocka_unit_test(test_diff_formats),
        cmocka_unit_test(test_diff_collapsed_matches_merges),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_pprof),
        cmocka_unit_test(test_empty_results),
        cmocka_unit_test(test_hostile_names),
        cmocka_unit_test(test_series_formats),
        cmocka_unit_test(test_series_rates),
        cmocka_unit_test(test_table_formats),
        cmocka_unit_test(test_empty_series),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_max_lines),
        cmocka_unit_test(test_top_unchanged),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests_name("render_golden", tests, fix_setup,
                                       fix_teardown);
}
