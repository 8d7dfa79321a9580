/*
** tests/unit/test_query_views.c: the views of issue 16 through the public
** ember_query and the renderers: callers and callees (stacks cut at a
** match), peek (pprof's -peek), list (pprof's -list, source lines),
** granularity (pprof's -granularity) and normalize (pprof's -normalize).
**
** Synthetic stacks with recursion pin the cut rules exactly; the real Go
** CPU profile of tests/data/pprof pins the text against what go tool pprof
** (go 1.19) printed for it, which tests/e2e/pprof_views.sh checks again
** against the pprof of the machine it runs on.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/pprof"
#define SYN "syn:work:nanoseconds:work:nanoseconds:delta"
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
#define SRC "srclist:lines:nanoseconds:lines:nanoseconds:delta"
#define T0 INT64_C(1700000000000)
#define NSTACKS 4
#define NSRC 12                     /* lines of the source file below */

typedef struct fixture {
    char *dir;
    ember_db *db;
} fixture;

static fixture fx;

/* src/prog.c of the scratch directory, whose functions SRC's stacks run:
** a tab, a CR before a newline and an escape character among them. */
static const char *const src_lines[NSRC] = {
    "/* prog.c */", "int work(void);", "int main(void) { return work(); }",
    "", "int work(void)", "{\033", "\tint x = 0;", "\treturn x;\r", "}", "",
    "/* end */", "/* last */",
};

/* ---- the data -------------------------------------------------------------------- */

/* Leaf first; b recurses through a in the second. */
static const char *const stack_names[NSTACKS][5] = {
    { "c", "b", "a", "main", NULL },
    { "b", "a", "b", "main", NULL },
    { "d", "main", NULL, NULL, NULL },
    { "b", "x", NULL, NULL, NULL },
};

/* Pod p0's values, and p1's (its base in the diffs below). */
static const int64_t values[2][NSTACKS] = { { 10, 20, 5, 7 },
                                            { 4, 20, 1, 0 } };

static void append_syn(void)
{
    uint32_t st[NSTACKS];

    for (int s = 0; s < NSTACKS; s++) {
        size_t n = 0;
        while (n < 5 && stack_names[s][n] != NULL)
            n++;
        st[s] = tu_stack(fx.db, stack_names[s], n);
    }
    for (int p = 0; p < 2; p++) {
        ember_label l = { "pod", p == 0 ? "p0" : "p1" };
        ember_sample smp[NSTACKS];
        size_t n = 0;
        for (int s = 0; s < NSTACKS; s++)
            if (values[p][s] != 0)
                smp[n++] = (ember_sample){ st[s], values[p][s] };
        ember_profile pr = tu_profile(SYN, &l, 1, T0, smp, n);
        assert_int_equal(ember_append(fx.db, &pr), EMBER_OK);
    }
}

static void write_source(void)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/src", fx.dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/src/prog.c", fx.dir);
    f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < NSRC; i++)
        fprintf(f, "%s\n", src_lines[i]);
    assert_int_equal(fclose(f), 0);
}

/* A location of function NAME (file FILE, first line START) at LINE. */
static uint32_t src_loc(ember_txn *t, const char *name, const char *file,
                        int64_t start, int64_t line, uint64_t addr)
{
    ember_function f = { .name = name, .file = file, .start_line = start };
    ember_line ln = { 0, line };
    ember_location l = { 0, addr, &ln, 1 };
    uint32_t id;

    assert_int_equal(ember_intern_function(t, &f, &ln.function), EMBER_OK);
    assert_int_equal(ember_intern_location(t, &l, &id), EMBER_OK);
    return id;
}

/* SRC: work at line 7 called from main at 3 (10), main alone (5), gone
** in a file that is nowhere (3), rel in a relative path (2), nofile (1),
** and an address of libfoo.so without symbols (4). */
static void append_src(void)
{
    char file[512];
    ember_mapping m = { .start = 0x9000, .limit = 0xa000,
                        .file = "/usr/lib/libfoo.so" };
    ember_location raw = { 0, 0x9010, NULL, 0 };
    uint32_t loc[6], st[6], mid;
    ember_sample smp[6];
    ember_txn *t;

    snprintf(file, sizeof file, "%s/src/prog.c", fx.dir);
    assert_int_equal(ember_txn_begin(fx.db, &t), EMBER_OK);
    loc[0] = src_loc(t, "work", file, 5, 7, 0x100);
    loc[1] = src_loc(t, "main", file, 0, 3, 0x200);
    loc[2] = src_loc(t, "gone", "/nonexistent/gone.c", 0, 10, 0x300);
    loc[3] = src_loc(t, "rel", "src/prog.c", 0, 2, 0x400);
    loc[4] = src_loc(t, "nofile", NULL, 0, 4, 0x500);
    assert_int_equal(ember_intern_mapping(t, &m, &mid), EMBER_OK);
    raw.mapping = mid;
    assert_int_equal(ember_intern_location(t, &raw, &loc[5]), EMBER_OK);
    assert_int_equal(ember_intern_stack(t, loc, 2, &st[0]), EMBER_OK);
    assert_int_equal(ember_intern_stack(t, &loc[1], 1, &st[1]), EMBER_OK);
    assert_int_equal(ember_intern_stack(t, (uint32_t[]){ loc[2], loc[1] },
                                        2, &st[2]), EMBER_OK);
    for (int i = 3; i < 6; i++)
        assert_int_equal(ember_intern_stack(t, &loc[i], 1, &st[i]),
                         EMBER_OK);
    assert_int_equal(ember_txn_commit(t), EMBER_OK);
    for (int i = 0; i < 6; i++)
        smp[i] = (ember_sample){ st[i], (int64_t[]){ 10, 5, 3, 2, 1, 4 }[i] };
    ember_profile pr = tu_profile(SRC, NULL, 0, T0, smp, 6);
    assert_int_equal(ember_append(fx.db, &pr), EMBER_OK);
}

static void import_file(const char *name)
{
    char path[256];
    size_t len = 0;
    char *buf;
    em_import_opts o = { .sz = sizeof o, .origin = name };
    int rc;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    buf = tu_read_file(path, &len);
    assert_non_null(buf);
    rc = em_import(fx.db, buf, len, &o, NULL);
    if (rc != EMBER_OK)
        fail_msg("import %s: %s", name, ember_errmsg(fx.db));
    free(buf);
}

static int setup(void **state)
{
    (void)state;
    fx.dir = tu_tmpdir("query-views");
    fx.db = tu_open(fx.dir, 0);
    append_syn();
    write_source();
    append_src();
    import_file("cpu.pb.gz");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ember_close(fx.db);
    tu_rmdir(fx.dir);
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------- */

static ember_result *query(const char *text)
{
    ember_result *r = NULL;
    int rc = ember_query(fx.db, text, NULL, &r);

    if (rc != EMBER_OK)
        fail_msg("%s: %s", text, ember_errmsg(fx.db));
    assert_non_null(r);
    return r;
}

/* The query's error message (it must fail with RC). */
static const char *query_fails(const char *text, int rc)
{
    ember_result *r = NULL;
    int got = ember_query(fx.db, text, NULL, &r);

    if (got != rc)
        fail_msg("%s: got %d, want %d (%s)", text, got, rc,
                 ember_errmsg(fx.db));
    assert_null(r);
    return ember_errmsg(fx.db);
}

/* Stack I of P as "leaf;...;root", an inlined frame marked '+'. */
static const char *stack_key(const em_rprofile *p, size_t i, char *buf,
                             size_t cap)
{
    const em_rstack *s = &p->stacks[i];
    size_t n = 0;

    buf[0] = '\0';
    for (size_t j = 0; j < s->nframes && n < cap; j++) {
        const em_rframe *f = &p->frames[s->first + j];
        n += (size_t)snprintf(buf + n, cap - n, "%s%s%s", j ? ";" : "",
                              em_strtab_get(&p->names, f->fn),
                              f->flags & EM_RFRAME_INLINED ? "+" : "");
    }
    return buf;
}

/* The value (or with BASE, the base) of the stacks named KEY in P. */
static int64_t key_sum(const em_rprofile *p, const char *key, bool base)
{
    char buf[4096];
    int64_t v = 0;

    for (size_t i = 0; i < p->nstacks; i++)
        if (strcmp(stack_key(p, i, buf, sizeof buf), key) == 0)
            v += base ? p->stacks[i].base : p->stacks[i].value;
    return v;
}

static int64_t key_value(const em_rprofile *p, const char *key)
{
    return key_sum(p, key, false);
}

/* The sum of P's values. */
static int64_t prof_sum(const em_rprofile *p)
{
    int64_t v = 0;

    for (size_t i = 0; i < p->nstacks; i++)
        v += p->stacks[i].value;
    return v;
}

/* R rendered as FORMAT (every row), reading sources from SOURCE_PATH, a
** malloc'd string. */
static char *render_src(const ember_result *r, const char *format,
                        const char *source_path)
{
    em_render_opts o = { .sz = sizeof o, .db = fx.db,
                         .source_path = source_path };
    tu_out out;

    tu_out_open(&out);
    assert_int_equal(em_render_result(out.f, r, format, &o), EMBER_OK);
    tu_out_close(&out);
    return out.text;
}

static char *render(const ember_result *r, const char *format)
{
    return render_src(r, format, "");
}

/* TEXT's FORMAT output holds each of the N lines of WANT. */
static void output_holds(const char *text, const char *format,
                         const char *const *want, size_t n)
{
    ember_result *r = query(text);
    char *got = render(r, format);

    for (size_t i = 0; i < n; i++)
        if (strstr(got, want[i]) == NULL)
            fail_msg("%s: no line \"%s\" in\n%s", text, want[i], got);
    free(got);
    ember_result_free(r);
}

/* ---- callers and callees ------------------------------------------------------------ */

static void test_callees(void **state)
{
    ember_result *r;
    const em_rprofile *p;

    (void)state;
    /* cut above the outermost b: it is the root, its recursion kept */
    r = query("callees(" SYN "{pod=\"p0\"}, \"^b$\")");
    p = &r->groups[0].prof;
    assert_int_equal(key_value(p, "c;b"), 10);
    assert_int_equal(key_value(p, "b;a;b"), 20);
    assert_int_equal(key_value(p, "b"), 7);
    assert_int_equal(prof_sum(p), 37);          /* b's cum */
    assert_int_equal(p->nstacks, 3);            /* d;main is not through b */
    /* percentages stay of the whole profile */
    assert_true(p->has_whole);
    assert_int_equal(p->whole, 42);
    /* the frames are not stored stacks: no pprof export */
    assert_null(r->groups[0].merged);
    ember_result_free(r);
}

static void test_callers(void **state)
{
    ember_result *r;
    const em_rprofile *p;

    (void)state;
    /* cut below the innermost b: it is the leaf, its callers all kept */
    r = query("callers(" SYN "{pod=\"p0\"}, \"^b$\")");
    p = &r->groups[0].prof;
    assert_int_equal(key_value(p, "b;a;main"), 10);
    assert_int_equal(key_value(p, "b;a;b;main"), 20);
    assert_int_equal(key_value(p, "b;x"), 7);
    assert_int_equal(prof_sum(p), 37);
    assert_int_equal(p->whole, 42);
    ember_result_free(r);
    /* any function the regex matches ends the stack: a or b, innermost */
    r = query("callers(" SYN "{pod=\"p0\"}, \"^[ab]$\")");
    p = &r->groups[0].prof;
    assert_int_equal(key_value(p, "b;a;main"), 10);
    assert_int_equal(key_value(p, "b;a;b;main"), 20);
    ember_result_free(r);
    r = query("callees(" SYN "{pod=\"p0\"}, \"^[ab]$\")");
    p = &r->groups[0].prof;
    assert_int_equal(key_value(p, "c;b;a"), 10);
    assert_int_equal(key_value(p, "b;a;b"), 20);
    ember_result_free(r);
}

static void test_cut_diff_and_inline(void **state)
{
    ember_result *r;
    const em_rprofile *p;

    (void)state;
    /* a diff: both sides cut alike */
    r = query("callees(diff(" SYN "{pod=\"p1\"}, " SYN "{pod=\"p0\"}), "
              "\"^b$\")");
    p = &r->groups[0].prof;
    assert_true(p->diff);
    assert_int_equal(key_value(p, "c;b"), 10);
    assert_int_equal(key_sum(p, "c;b", true), 4);
    assert_int_equal(key_sum(p, "b;a;b", true), 20);
    assert_int_equal(key_value(p, "b"), 7);
    ember_result_free(r);
    /* main.mix is inlined into main.hashWork: cut there, it is a root of
    ** its own and no longer marked inlined */
    r = query("callees(cpu, \"^main\\\\.mix$\")");
    p = &r->groups[0].prof;
    assert_true(p->nstacks > 0);
    for (size_t i = 0; i < p->nstacks; i++) {
        const em_rstack *s = &p->stacks[i];
        const em_rframe *root = &p->frames[s->first + s->nframes - 1];
        assert_string_equal(em_strtab_get(&p->names, root->fn), "main.mix");
        assert_int_equal(root->flags & EM_RFRAME_INLINED, 0);
    }
    ember_result_free(r);
    /* a regex matching nothing leaves nothing, and says so */
    r = query("callers(" SYN ", \"^nothing$\")");
    assert_int_equal(r->groups[0].prof.nstacks, 0);
    assert_true(ember_result_notes(r) > 0);
    assert_non_null(strstr(ember_result_note(r, 0), "callers(..., "
                           "\"^nothing$\") matches no function name"));
    ember_result_free(r);
}

static void test_callees_top(void **state)
{
    /* go tool pprof -top -sample_index=cpu -show_from='main\.work\.func1'
    ** tests/data/pprof/cpu.pb.gz (go 1.19) */
    static const char *const want[] = {
        "Showing nodes accounting for 230ms, 28.75% of 800ms total\n",
        "     120ms 15.00% 15.00%      180ms 22.50%  main.fib\n",
        "      20ms  2.50% 27.50%       30ms  3.75%  main.mix (inline)\n",
        "         0     0% 28.75%      230ms 28.75%  main.work.func1\n",
    };

    (void)state;
    output_holds("callees(cpu, \"main\\\\.work\\\\.func1\")", "top", want,
                 EM_ARRAY_LEN(want));
}

static void test_cut_errors(void **state)
{
    const char *m;

    (void)state;
    m = query_fails("callers(" SYN ", 3)", EMBER_EINVAL);
    assert_non_null(strstr(m, "callers expects a profile and a regex string: "
                           "argument 2 is a number"));
    m = query_fails("callees(total(" SYN "), \"b\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "callees expects a profile and a regex "
                           "string: argument 1 is a series"));
    m = query_fails("callees(" SYN ", \"(\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "bad regex"));
}

/* ---- peek ----------------------------------------------------------------------------- */

static void test_peek_text(void **state)
{
    /* go tool pprof -sample_index=cpu -peek='main\.fib|sort\.pdqsort'
    ** tests/data/pprof/cpu.pb.gz (go 1.19), from its "Showing" line */
    static const char want[] =
        "Type: cpu\n"
        "Showing nodes accounting for 800ms, 100% of 800ms total\n"
        "----------------------------------------------------------+------"
        "-------\n"
        "      flat  flat%   sum%        cum   cum%   calls calls% + context "
        "\t \t \n"
        "----------------------------------------------------------+------"
        "-------\n"
        "                                             180ms 56.25% |   "
        "main.work.func1\n"
        "                                             140ms 43.75% |   "
        "main.contend.func1\n"
        "     250ms 31.25% 31.25%      320ms 40.00%                | "
        "main.fib\n"
        "                                              70ms 21.88% |   "
        "runtime.asyncPreempt\n"
        "----------------------------------------------------------+------"
        "-------\n"
        "                                             100ms   100% |   "
        "sort.Sort\n"
        "         0     0% 31.25%      100ms 12.50%                | "
        "sort.pdqsort\n"
        "                                              70ms 70.00% |   "
        "sort.partition\n"
        "                                              30ms 30.00% |   "
        "sort.insertionSort\n"
        "----------------------------------------------------------+------"
        "-------\n";
    ember_result *r = query("peek(cpu, \"main\\\\.fib|sort\\\\.pdqsort\")");
    char *got;

    (void)state;
    assert_int_equal(r->view, EM_VIEW_PEEK);
    assert_string_equal(r->view_re, "main\\.fib|sort\\.pdqsort");
    got = render(r, "top");
    assert_string_equal(got, want);
    free(got);
    /* the other formats draw the profile itself */
    got = render(r, "collapsed");
    assert_non_null(strstr(got, "main.hashWork"));
    free(got);
    ember_result_free(r);
}

static void test_peek_json(void **state)
{
    ember_result *r = query("peek(merge by (pod) (" SYN "), \"^b$\")");
    char *got = render(r, "json");

    (void)state;
    /* b's callers a and main (2 stacks each), its callee c; a recursion
    ** is no edge; calls share a stack once */
    assert_non_null(strstr(got, "\"view\":\"peek\",\"regex\":\"^b$\""));
    assert_non_null(strstr(got, "{\"labels\":{\"pod\":\"p0\"},\"series\":1,"
                           "\"profiles\":1,\"total\":42,\"whole\":42,\"peek\":[\n"
                           "{\"name\":\"b\",\"flat\":27,\"cum\":37,"
                           "\"callers\":[{\"name\":\"a\",\"value\":30,"
                           "\"inline\":false},{\"name\":\"main\",\"value\":20,"
                           "\"inline\":false},{\"name\":\"x\",\"value\":7,"
                           "\"inline\":false}],\"callees\":[{\"name\":\"a\","
                           "\"value\":20,\"inline\":false},{\"name\":\"c\","
                           "\"value\":10,\"inline\":false}]}\n]}"));
    free(got);
    ember_result_free(r);
}

static void test_peek_errors(void **state)
{
    ember_result *r;
    const char *m;

    (void)state;
    m = query_fails("top(peek(" SYN ", \"b\"), 3)", EMBER_EINVAL);
    assert_non_null(strstr(m, "column 5: peek shows a profile as pprof's "
                           "-peek does: it is the whole query, not an "
                           "argument"));
    m = query_fails("peek(diff(" SYN ", " SYN "), \"b\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "peek expects a profile and a regex string: "
                           "argument 1 is a diff"));
    m = query_fails("peek(" SYN ", \"[\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "bad regex"));
    /* nothing matches: the frame of the report, and a note */
    r = query("peek(" SYN ", \"^nothing$\")");
    assert_true(ember_result_notes(r) > 0);
    assert_non_null(strstr(ember_result_note(r, 0), "peek(..., "
                           "\"^nothing$\") matches no function of the "
                           "profile"));
    ember_result_free(r);
}

/* R and the result decoded from its encoding render alike in FORMAT. */
static void wire_same(const char *text, const char *format)
{
    ember_result *r = query(text), *back = NULL;
    void *buf = NULL;
    size_t len = 0;
    char *a, *b;

    assert_int_equal(em_result_encode(r, &buf, &len), EMBER_OK);
    assert_int_equal(em_result_decode(buf, len, &back), EMBER_OK);
    a = render(r, format);
    b = render(back, format);
    assert_string_equal(a, b);
    free(a);
    free(b);
    em_free(buf);
    ember_result_free(back);
    ember_result_free(r);
}

static void test_views_wire(void **state)
{
    (void)state;
    wire_same("peek(cpu, \"main\\\\.\")", "top");
    wire_same("peek(cpu, \"main\\\\.\")", "json");
    wire_same("callers(cpu, \"fib\")", "collapsed");
    wire_same("granularity(cpu, \"lines\")", "top");
    wire_same("granularity(cpu, \"addresses\")", "json");
    wire_same("list(cpu, \"main\")", "top");
    wire_same("list(" SRC ", \".\")", "json");
}

/* ---- granularity ---------------------------------------------------------------------- */

static void test_path_clean(void **state)
{
    /* Go's filepath.Clean tests, and pprof's /proc/self/cwd trimming */
    static const char *const cases[][2] = {
        { "", "." }, { "abc", "abc" }, { "a/b/c", "a/b/c" }, { ".", "." },
        { "..", ".." }, { "../..", "../.." }, { "../../abc", "../../abc" },
        { "/abc", "/abc" }, { "/", "/" }, { "abc/", "abc" },
        { "./", "." }, { "../", ".." }, { "/abc/", "/abc" },
        { "abc//def//ghi", "abc/def/ghi" }, { "//abc", "/abc" },
        { "///abc", "/abc" }, { "//abc//", "/abc" }, { "abc//", "abc" },
        { "abc/./def", "abc/def" }, { "/./abc/def", "/abc/def" },
        { "abc/.", "abc" }, { "abc/def/ghi/../jkl", "abc/def/jkl" },
        { "abc/def/../ghi/../jkl", "abc/jkl" }, { "abc/def/..", "abc" },
        { "abc/def/../..", "." }, { "/abc/def/../..", "/" },
        { "abc/def/../../..", ".." }, { "/abc/def/../../..", "/" },
        { "abc/def/../../../ghi/jkl/../../../mno", "../../mno" },
        { "/../abc", "/abc" }, { "abc/./../def", "def" },
        { "abc//./../def", "def" }, { "abc/../../././../def", "../../def" },
        { "/proc/self/cwd/./src/a.go", "src/a.go" },
        { "/proc/self/cwd/src//a.go", "src/a.go" },
    };

    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(cases); i++) {
        char *got = em_path_clean(cases[i][0]);
        assert_non_null(got);
        if (strcmp(got, cases[i][1]) != 0)
            fail_msg("clean(\"%s\") = \"%s\", want \"%s\"", cases[i][0],
                     got, cases[i][1]);
        em_free(got);
    }
}

/* A site of P: its strings (NULL: none) interned into P's srcs. */
static em_rsite mksite(em_rprofile *p, const char *fn, bool named,
                       const char *file, const char *obj, int64_t line,
                       uint64_t address)
{
    em_rsite s = { .fn = EM_RSITE_NONE, .file = EM_RSITE_NONE,
                   .obj = EM_RSITE_NONE, .flags = named ? EM_RSITE_NAMED : 0,
                   .line = line, .address = address };

    if (fn != NULL)
        assert_int_equal(em_strtab_intern(&p->srcs, fn, strlen(fn), &s.fn),
                         EMBER_OK);
    if (file != NULL)
        assert_int_equal(em_strtab_intern(&p->srcs, file, strlen(file),
                                          &s.file), EMBER_OK);
    if (obj != NULL)
        assert_int_equal(em_strtab_intern(&p->srcs, obj, strlen(obj),
                                          &s.obj), EMBER_OK);
    return s;
}

#define NSITES 6

static void test_granularity_names(void **state)
{
    /* per site, its name at functions, filefunctions, files, lines and
    ** addresses: pprof's NodeInfo.PrintableName but for functions */
    static const char *const want[NSITES][EM_GRAN_COUNT_] = {
        { "main.fib", "main.fib /src/main.go", "/src/main.go",
          "main.fib /src/main.go:55", "00000000004bfcd4 main.fib "
          "/src/main.go:55" },
        { "main.fib", "main.fib /src/main.go", "/src/main.go",
          "main.fib /src/main.go:56", "00000000004bfce0 main.fib "
          "/src/main.go:56" },
        { "0x4011a0 in libc.so.6", "[libc.so.6]", "[libc.so.6]",
          "[libc.so.6]", "00000000004011a0 [libc.so.6]" },
        { "0x0", "<unknown>", "<unknown>", "<unknown>", "<unknown>" },
        { "f", "f", "<unknown>", "f", "0000000000000010 f" },
        { "g", "g /a.go", "/a.go", "g /a.go", "g /a.go" },
    };
    em_rprofile p;
    em_rsite sites[NSITES];

    (void)state;
    for (int g = 0; g < EM_GRAN_COUNT_; g++) {
        assert_int_equal(em_rprofile_init(&p, SYN), EMBER_OK);
        p.granularity = EM_GRAN_ADDRESSES;
        sites[0] = mksite(&p, "main.fib", true, "/src/main.go", "prog", 55,
                          0x4bfcd4);
        sites[1] = mksite(&p, "main.fib", true, "/src/main.go", "prog", 56,
                          0x4bfce0);
        sites[2] = mksite(&p, "0x4011a0 in libc.so.6", false, NULL,
                          "libc.so.6", 0, 0x4011a0);
        sites[3] = mksite(&p, "0x0", false, NULL, NULL, 0, 0);
        sites[4] = mksite(&p, "f", true, NULL, NULL, 0, 0x10);
        sites[5] = mksite(&p, "g", true, "/a.go", NULL, 0, 0);
        for (int i = 0; i < NSITES; i++) {
            em_rframe f = { 0, 0 };
            assert_int_equal(em_rprofile_site(&p, &sites[i], &f.fn),
                             EMBER_OK);
            assert_int_equal(em_rprofile_add(&p, &f, 1, i + 1), EMBER_OK);
        }
        /* filters match the function, whatever the granularity */
        assert_string_equal(em_rprofile_fname(&p, p.frames[0].fn),
                            "main.fib");
        assert_int_equal(em_rprofile_regranulate(&p, g), EMBER_OK);
        assert_int_equal(p.granularity, g);
        assert_true((p.sites == NULL) == (g == EM_GRAN_FUNCTIONS));
        for (int i = 0; i < NSITES; i++)
            assert_string_equal(em_strtab_get(&p.names, p.frames[i].fn),
                                want[i][g]);
        /* sites a granularity does not tell apart share one name */
        assert_int_equal(p.frames[0].fn == p.frames[1].fn,
                         g != EM_GRAN_LINES && g != EM_GRAN_ADDRESSES);
        em_rprofile_free(&p);
    }
}

/* True when every name of R's groups satisfies OK. */
static bool names_all(const ember_result *r, bool (*ok)(const char *))
{
    for (size_t g = 0; g < r->ngroups; g++)
        for (uint32_t i = 0; i < r->groups[g].prof.names.count; i++)
            if (!ok(em_strtab_get(&r->groups[g].prof.names, i)))
                return false;
    return true;
}

static bool is_file(const char *s)
{
    size_t n = strlen(s);
    return s[0] == '/' && ((n > 3 && strcmp(s + n - 3, ".go") == 0) ||
                           (n > 2 && strcmp(s + n - 2, ".s") == 0));
}

static bool has_line(const char *s)
{
    const char *c = strrchr(s, ':');
    return strchr(s, ' ') != NULL && c != NULL && c[1] >= '1' &&
           c[1] <= '9';
}

static bool not_fib(const char *s)
{
    return strncmp(s, "main.fib ", 9) != 0;
}

static void test_granularity_query(void **state)
{
    ember_result *r;

    (void)state;
    r = query("granularity(cpu, \"files\")");
    assert_true(r->groups[0].prof.nstacks > 0);
    assert_true(names_all(r, is_file));
    assert_int_equal(r->groups[0].prof.granularity, EM_GRAN_FILES);
    ember_result_free(r);
    /* filters match functions before the names are lines */
    r = query("granularity(hide(merge by (worker) (cpu), "
              "\"^main\\\\.fib$\"), \"lines\")");
    assert_true(r->ngroups > 1);
    assert_true(names_all(r, has_line));
    assert_true(names_all(r, not_fib));
    ember_result_free(r);
    /* both sides of a diff, from either side's granularity */
    r = query("diff(cpu{worker=\"sort\"}, granularity(cpu{worker="
              "\"hash\"}, \"files\"))");
    assert_true(r->groups[0].prof.diff);
    assert_true(names_all(r, is_file));
    ember_result_free(r);
}

static void test_granularity_errors(void **state)
{
    const char *m;

    (void)state;
    m = query_fails("granularity(cpu, \"words\")", EMBER_EINVAL);
    assert_non_null(strstr(m, "column 18: granularity expects a profile and "
                           "a granularity (\"functions\", \"filefunctions\", "
                           "\"files\", \"lines\" or \"addresses\"): argument 2 "
                           "is not one of them"));
    m = query_fails("granularity(cpu, lines)", EMBER_EINVAL);
    assert_non_null(strstr(m, "argument 2 is a selector"));
    m = query_fails("granularity(granularity(cpu, \"lines\"), \"files\")",
                    EMBER_EINVAL);
    assert_non_null(strstr(m, "column 1: the granularity is given twice"));
    m = query_fails("diff(granularity(cpu, \"lines\"), granularity(cpu, "
                    "\"files\"))", EMBER_EINVAL);
    assert_non_null(strstr(m, "diff's sides have different granularities: "
                           "lines and files"));
}

/* ---- list ------------------------------------------------------------------------------ */

/* What list prints for line L of src/prog.c with FLAT and CUM, appended. */
static void src_row(char *buf, size_t cap, int l, const char *flat,
                    const char *cum)
{
    char text[64];
    size_t n = strlen(buf), k = 0;

    for (const char *c = src_lines[l - 1]; *c != '\0'; c++)
        if (*c != '\r' || c[1] != '\0')   /* a CR ending the line goes */
            text[k++] = (unsigned char)*c < 0x20 && *c != '\t' ? ' ' : *c;
    text[k] = '\0';
    snprintf(buf + n, cap - n, "%10s %10s %6d:%s\n", flat, cum, l, text);
}

/* TEXT's list (or with FORMAT json...) equals WANT. */
static void list_is(const char *text, const char *source_path,
                    const char *want)
{
    ember_result *r = query(text);
    char *got = render_src(r, "top", source_path);

    if (strcmp(got, want) != 0)
        fail_msg("%s:\n%s\nwant:\n%s", text, got, want);
    free(got);
    ember_result_free(r);
}

static void test_list_text(void **state)
{
    char want[4096], head[1024];

    (void)state;
    /* from the function's first line (5) to 5 past its sample */
    snprintf(want, sizeof want, "Total: 25ns\nROUTINE ======================"
             "== work in %s/src/prog.c\n      10ns       10ns (flat, cum) "
             "40.00%% of Total\n", fx.dir);
    for (int l = 5; l <= 12; l++)
        src_row(want, sizeof want, l, l == 7 ? "10ns" : ".",
                l == 7 ? "10ns" : ".");
    list_is("list(" SRC ", \"^work$\")", "", want);
    /* no first line known: 5 before, cut at line 1 */
    snprintf(want, sizeof want, "Total: 25ns\nROUTINE ======================"
             "== main in %s/src/prog.c\n       5ns       18ns (flat, cum) "
             "72.00%% of Total\n", fx.dir);
    for (int l = 1; l <= 8; l++)
        src_row(want, sizeof want, l, l == 3 ? "5ns" : ".",
                l == 3 ? "18ns" : ".");
    list_is("list(" SRC ", \"^main$\")", "", want);
    /* unreadable: pprof's error line, then the lines with samples */
    list_is("list(" SRC ", \"^gone$\")", "",
            "Total: 25ns\nROUTINE ======================== gone in "
            "/nonexistent/gone.c\n       3ns        3ns (flat, cum) 12.00% "
            "of Total\n Error: open /nonexistent/gone.c: No such file or "
            "directory\n       3ns        3ns     10\n");
    list_is("list(" SRC ", \"^nofile$\")", "",
            "Total: 25ns\nNo source information for nofile\n");
    /* a relative path is looked for under the source path's directories
    ** and their parents */
    snprintf(head, sizeof head, "%s/src/deeper", fx.dir);
    snprintf(want, sizeof want, "Total: 25ns\nROUTINE ======================"
             "== rel in src/prog.c\n       2ns        2ns (flat, cum)  8.00%% "
             "of Total\n");
    for (int l = 1; l <= 7; l++)
        src_row(want, sizeof want, l, l == 2 ? "2ns" : ".",
                l == 2 ? "2ns" : ".");
    list_is("list(" SRC ", \"^rel$\")", head, want);
    /* no source path (a server's): no file is read */
    snprintf(want, sizeof want, "Total: 25ns\nROUTINE ======================"
             "== work in %s/src/prog.c\n      10ns       10ns (flat, cum) "
             "40.00%% of Total\n Error: not reading source files here\n"
             "      10ns       10ns      7\n", fx.dir);
    list_is("list(" SRC ", \"^work$\")", NULL, want);
}

static void test_list_json(void **state)
{
    ember_result *r = query("list(" SRC ", \"^(work|gone|nofile)$\")");
    char *got = render(r, "json");
    char want[2048];

    (void)state;
    assert_non_null(strstr(got, "\"view\":\"list\",\"regex\":"
                           "\"^(work|gone|nofile)$\""));
    assert_non_null(strstr(got, "\"total\":25,\"whole\":25,\"list\":[\n"
                           "{\"name\":\"gone\",\"file\":\"/nonexistent/gone.c\","
                           "\"flat\":3,\"cum\":3,\"source\":false,\"error\":"
                           "\"open /nonexistent/gone.c: No such file or "
                           "directory\",\"lines\":[{\"line\":10,\"flat\":3,"
                           "\"cum\":3}]},\n{\"name\":\"nofile\",\"file\":null,"
                           "\"flat\":1,\"cum\":1,\"source\":false,\"lines\":[]},"
                           "\n{\"name\":\"work\",\"file\":"));
    snprintf(want, sizeof want, "\"flat\":10,\"cum\":10,\"source\":true,"
             "\"lines\":[{\"line\":5,\"flat\":0,\"cum\":0,\"text\":\"int "
             "work(void)\"},{\"line\":6,\"flat\":0,\"cum\":0,\"text\":"
             "\"{\\u001b\"},{\"line\":7,\"flat\":10,\"cum\":10,\"text\":"
             "\"\\tint x = 0;\"}");
    assert_non_null(strstr(got, want));
    free(got);
    ember_result_free(r);
}

static void test_list_profile(void **state)
{
    ember_result *r;
    char *got;

    (void)state;
    /* the profile of a list is at granularity lines, whatever was asked */
    r = query("list(granularity(" SRC ", \"files\"), \"^work$\")");
    assert_int_equal(r->groups[0].prof.granularity, EM_GRAN_LINES);
    got = render(r, "collapsed");
    assert_non_null(strstr(got, "prog.c:3;work "));
    free(got);
    ember_result_free(r);
    /* an address without symbols at each granularity */
    r = query("granularity(" SRC ", \"lines\")");
    got = render(r, "top");
    assert_non_null(strstr(got, "  [libfoo.so]\n"));
    free(got);
    ember_result_free(r);
    r = query("granularity(" SRC ", \"addresses\")");
    got = render(r, "top");
    assert_non_null(strstr(got, "  0000000000009010 [libfoo.so]\n"));
    free(got);
    ember_result_free(r);
    r = query(SRC);
    got = render(r, "top");
    assert_non_null(strstr(got, "  0x9010 in libfoo.so\n"));
    free(got);
    ember_result_free(r);
    /* a list whose regex names no function: a note */
    r = query("list(" SRC ", \"^none$\")");
    assert_non_null(strstr(ember_result_note(r, 0), "list(..., \"^none$\") "
                           "matches no function of the profile"));
    ember_result_free(r);
}

/* ---- normalize ------------------------------------------------------------------------ */

static void test_normalize(void **state)
{
    ember_result *r;
    const em_rprofile *p;
    const char *m;

    (void)state;
    /* p1's total is 25, p0's 42: p0's values times 25/42, rounded as
    ** pprof's ScaleN rounds (half away from zero) */
    r = query("normalize(diff(" SYN "{pod=\"p1\"}, " SYN "{pod=\"p0\"}))");
    p = &r->groups[0].prof;
    assert_true(p->diff);
    assert_int_equal(key_value(p, "c;b;a;main"), 6);        /* 5.95 */
    assert_int_equal(key_value(p, "b;a;b;main"), 12);       /* 11.90 */
    assert_int_equal(key_value(p, "d;main"), 3);            /* 2.98 */
    assert_int_equal(key_value(p, "b;x"), 4);               /* 4.17 */
    assert_int_equal(key_sum(p, "c;b;a;main", true), 4);    /* the base stays */
    assert_int_equal(prof_sum(p), 25);
    ember_result_free(r);
    /* the totals are the sides' before any filter, as pprof normalizes
    ** as it reads the files; so is a focus inside the sides */
    r = query("focus(normalize(diff(" SYN "{pod=\"p1\"}, " SYN
              "{pod=\"p0\"})), \"^c$\")");
    assert_int_equal(key_value(&r->groups[0].prof, "c;b;a;main"), 6);
    assert_int_equal(r->groups[0].prof.nstacks, 1);
    ember_result_free(r);
    r = query("normalize(diff(focus(" SYN "{pod=\"p1\"}, \"^c$\"), focus("
              SYN "{pod=\"p0\"}, \"^c$\")))");
    assert_int_equal(key_value(&r->groups[0].prof, "c;b;a;main"), 6);
    ember_result_free(r);
    /* an empty base: nothing to scale to, the target is all 0 */
    r = query("normalize(diff(" SYN "{pod=\"p9\"}, " SYN "{pod=\"p0\"}))");
    assert_int_equal(prof_sum(&r->groups[0].prof), 0);
    ember_result_free(r);
    m = query_fails("normalize(" SYN ")", EMBER_EINVAL);
    assert_non_null(strstr(m, "normalize expects a diff: argument 1 is a "
                           "profile: normalize scales a diff's target to its "
                           "base's total"));
    m = query_fails("diff(normalize(diff(" SYN ", " SYN ")), " SYN ")",
                    EMBER_EINVAL);
    assert_non_null(strstr(m, "argument 1 is a diff"));
}

/* ---- allocation failure ------------------------------------------------------------- */

static void fail_each(const char *text)
{
    tu_query_fail_each(fx.db, text, NULL);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    fail_each("callers(callees(merge by (pod) (" SYN "), \"a\"), \"b\")");
    fail_each("callees(diff(" SYN "{pod=\"p1\"}, " SYN "), \"^b$\")");
    fail_each("peek(merge by (pod) (" SYN "), \"^nothing$\")");
    fail_each("granularity(hide(merge by (worker) (cpu), \"fib\"), "
              "\"lines\")");
    fail_each("diff(cpu{worker=\"sort\"}, granularity(cpu, \"files\"))");
    fail_each("list(merge by (worker) (cpu), \"fib\")");
    fail_each("normalize(diff(merge by (pod) (" SYN "), " SYN "{pod=\"p0\"}))");
}

/* Renders R in FORMAT failing the Nth allocation for every N. */
static void render_fail_each(const char *text, const char *format)
{
    ember_result *r = query(text);
    em_render_opts o = { .sz = sizeof o, .db = fx.db };
    int rc = EMBER_ENOMEM;
    uint64_t i;

    for (i = 1; rc != EMBER_OK && i < 100000; i++) {
        tu_out out;
        tu_out_open(&out);
        em_alloc_fail_at(i);
        rc = em_render_result(out.f, r, format, &o);
        em_alloc_fail_at(0);
        tu_out_close(&out);
        free(out.text);
        if (rc != EMBER_OK && rc != EMBER_ENOMEM)
            fail_msg("%s -o %s: allocation %llu: %d", text, format,
                     (unsigned long long)i, rc);
    }
    assert_int_equal(rc, EMBER_OK);
    ember_result_free(r);
}

static void test_render_out_of_memory(void **state)
{
    (void)state;
    render_fail_each("peek(cpu, \"main\")", "top");
    render_fail_each("peek(cpu, \"main\")", "json");
    render_fail_each("list(" SRC ", \".\")", "top");
    render_fail_each("list(" SRC ", \".\")", "json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_callees),
        cmocka_unit_test(test_callers),
        cmocka_unit_test(test_cut_diff_and_inline),
        cmocka_unit_test(test_callees_top),
        cmocka_unit_test(test_cut_errors),
        cmocka_unit_test(test_peek_text),
        cmocka_unit_test(test_peek_json),
        cmocka_unit_test(test_peek_errors),
        cmocka_unit_test(test_path_clean),
        cmocka_unit_test(test_granularity_names),
        cmocka_unit_test(test_granularity_query),
        cmocka_unit_test(test_granularity_errors),
        cmocka_unit_test(test_list_text),
        cmocka_unit_test(test_list_json),
        cmocka_unit_test(test_list_profile),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_views_wire),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_render_out_of_memory),
    };

    return cmocka_run_group_tests_name("query_views", tests, setup, teardown);
}
