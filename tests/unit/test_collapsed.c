/*
** tests/unit/test_collapsed.c: the collapsed-stacks parser (every accepted
** shape and every error with its ORIGIN:LINE:COL) and the importer
** through the real engine (values per stack read back by merge and snapshots, stable stack
** ids across imports, nothing written by a bad file).
**
** Parsed stacks are rendered as "[frame][frame] value\n" so that a test
** sees exact frame boundaries, spaces included.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/pset.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/collapsed"
#define TYPE EM_COLLAPSED_DEFAULT_TYPE

/* ---- parser: a callback that renders what it is given -------------------- */

typedef struct collect {
    FILE *out;                  /* open_memstream over text */
    char *text;
    size_t len;
    size_t calls;
    size_t fail_on;             /* call number that fails (1 = first); 0: none */
    int fail_rc;
} collect;

static int collect_fn(void *ctx, const em_collapsed_frame *frames,
                      size_t nframes, int64_t value)
{
    collect *c = ctx;

    if (++c->calls == c->fail_on)
        return c->fail_rc < 0 ? em_err(c->fail_rc, "boom") : c->fail_rc;
    for (size_t i = 0; i < nframes; i++)
        fprintf(c->out, "[%.*s]", (int)frames[i].len, frames[i].p);
    fprintf(c->out, " %lld\n", (long long)value);
    return 0;
}

/* Parses LEN bytes of TEXT as "t.txt" into C (fclose'd, text kept). */
static int parse_into(collect *c, const char *text, size_t len)
{
    int rc;

    c->out = open_memstream(&c->text, &c->len);
    assert_non_null(c->out);
    rc = em_collapsed_parse(text, len, "t.txt", collect_fn, c);
    fclose(c->out);
    return rc;
}

/* Parses TEXT, expecting success and the rendering WANT. */
static void parse_ok(const char *text, const char *want)
{
    collect c = { 0 };
    int rc = parse_into(&c, text, strlen(text));

    if (rc != EMBER_OK)
        fail_msg("parse failed (%d): %s", rc, em_errmsg());
    assert_string_equal(c.text, want);
    free(c.text);
}

/* Parses LEN bytes at TEXT, expecting code RC and the message WANT. */
static void parse_fails_n(const char *text, size_t len, int rc,
                          const char *want)
{
    collect c = { 0 };

    assert_int_equal(parse_into(&c, text, len), rc);
    assert_string_equal(em_errmsg(), want);
    free(c.text);
}

static void parse_fails(const char *text, int rc, const char *want)
{
    parse_fails_n(text, strlen(text), rc, want);
}

static void test_parse_normal(void **state)
{
    (void)state;
    parse_ok("main;a;b 5\nmain;c 10\n", "[main][a][b] 5\n[main][c] 10\n");
    parse_ok("single 1\n", "[single] 1\n");
    parse_ok("", "");
}

static void test_parse_spaces_in_frames(void **state)
{
    (void)state;
    parse_ok("main;foo(int, char);[unknown] 3\n",
             "[main][foo(int, char)][[unknown]] 3\n");
    /* Several blanks before the value, trailing blanks after it. */
    parse_ok("a;b c \t  7 \t\n", "[a][b c] 7\n");
    /* perf's kernel annotations and Java's [j] suffixes are plain text. */
    parse_ok("java;Foo::bar_[j];do_syscall_64_[k] 2\n",
             "[java][Foo::bar_[j]][do_syscall_64_[k]] 2\n");
}

static void test_parse_crlf_comments_blanks(void **state)
{
    (void)state;
    parse_ok("a;b 1\r\nc 2\r\n", "[a][b] 1\n[c] 2\n");
    parse_ok("# comment\n\n   \n\r\n\t\na 1\n#x;y 2\n", "[a] 1\n");
    parse_ok("a;b 1\nc 2", "[a][b] 1\n[c] 2\n");        /* no final '\n' */
    parse_ok("a 1\r", "[a] 1\n");
}

static void test_parse_values(void **state)
{
    (void)state;
    parse_ok("a -5\nb 9223372036854775807\nc -9223372036854775808\n"
             "d 0\ne 007\nf -0\n",
             "[a] -5\n[b] 9223372036854775807\n[c] -9223372036854775808\n"
             "[d] 0\n[e] 7\n[f] 0\n");
}

static void test_parse_missing_value(void **state)
{
    (void)state;
    parse_fails("a;b 1\nmain;foo\n", EMBER_EINVAL, "t.txt:2:9: expected a "
                "space and an integer value at the end of the line");
    parse_fails("main;foo(int, char)\n", EMBER_EINVAL, "t.txt:1:15: "
                "expected an integer value at the end of the line, found 'c'");
    parse_fails(" 1\n", EMBER_EINVAL, "t.txt:1:1: expected a stack (frames "
                "separated by ';') before the value");
}

static void test_parse_bad_value(void **state)
{
    (void)state;
    parse_fails("a 12x\n", EMBER_EINVAL,
                "t.txt:1:5: expected a decimal digit in the value, found 'x'");
    parse_fails("a 1.5\n", EMBER_EINVAL,
                "t.txt:1:4: expected a decimal digit in the value, found '.'");
    parse_fails("a -\n", EMBER_EINVAL,
                "t.txt:1:4: expected a digit after '-' in the value");
    parse_fails("a +5\n", EMBER_EINVAL, "t.txt:1:3: expected an integer "
                "value at the end of the line, found '+'");
    parse_fails("a 5\x1b\n", EMBER_EINVAL, "t.txt:1:4: expected a decimal "
                "digit in the value, found byte 0x1b");
}

static void test_parse_overflow(void **state)
{
    const char *want = "t.txt:1:3: value out of range: expected an integer "
                       "from -2^63 to 2^63-1";

    (void)state;
    parse_fails("a 9223372036854775808\n", EMBER_EINVAL, want);
    parse_fails("a -9223372036854775809\n", EMBER_EINVAL, want);
    parse_fails("a 99999999999999999999999999\n", EMBER_EINVAL, want);
}

static void test_parse_empty_frame(void **state)
{
    (void)state;
    parse_fails("a;;b 1\n", EMBER_EINVAL,
                "t.txt:1:3: expected a frame name before ';'");
    parse_fails("ok 1\n;a 1\n", EMBER_EINVAL,
                "t.txt:2:1: expected a frame name before ';'");
    parse_fails("a; 1\n", EMBER_EINVAL,
                "t.txt:1:3: expected a frame name after ';'");
}

static void test_parse_nul_byte(void **state)
{
    static const char text[] = "a\0b 1\n";

    (void)state;
    parse_fails_n(text, sizeof text - 1, EMBER_EINVAL,
                  "t.txt:1:2: unexpected NUL byte");
}

/* A line of LEN bytes: 'f' frames, then " 1"; with NL a '\n' follows. */
static char *long_line(size_t len, const char *prefix, bool nl)
{
    size_t plen = strlen(prefix);
    char *s = malloc(plen + len + 2);

    assert_non_null(s);
    memcpy(s, prefix, plen);
    memset(s + plen, 'f', len - 2);
    memcpy(s + plen + len - 2, " 1", 2);
    s[plen + len] = '\n';
    s[plen + len + nl] = '\0';
    return s;
}

static void test_parse_line_limit(void **state)
{
    char want[128];
    char *s;
    collect c = { 0 };

    (void)state;
    s = long_line(EM_COLLAPSED_MAX_LINE, "", true);     /* exactly at it */
    assert_int_equal(parse_into(&c, s, strlen(s)), EMBER_OK);
    assert_int_equal(c.calls, 1);
    free(c.text);
    free(s);
    snprintf(want, sizeof want, "t.txt:2:%u: line longer than %u bytes",
             EM_COLLAPSED_MAX_LINE + 1, EM_COLLAPSED_MAX_LINE);
    s = long_line(EM_COLLAPSED_MAX_LINE + 1, "ok 1\r\n", true);
    parse_fails(s, EMBER_ELIMIT, want);
    free(s);
    s = long_line(EM_COLLAPSED_MAX_LINE * 3, "ok 1\n", false);
    parse_fails(s, EMBER_ELIMIT, want);
    free(s);
}

/* "f;f;...;f 1" with N frames. */
static char *deep_line(size_t n)
{
    char *s = malloc(2 * n + 3);

    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        memcpy(s + 2 * i, "f;", 2);
    memcpy(s + 2 * n - 1, " 1\n", 4);
    return s;
}

static void test_parse_frame_limit(void **state)
{
    char want[128];
    char *s = deep_line(EM_COLLAPSED_MAX_FRAMES);
    collect c = { 0 };

    (void)state;
    assert_int_equal(parse_into(&c, s, strlen(s)), EMBER_OK);
    assert_int_equal(c.calls, 1);
    free(c.text);
    free(s);
    s = deep_line(EM_COLLAPSED_MAX_FRAMES + 1);
    snprintf(want, sizeof want, "t.txt:1:%u: more than %u frames in one "
             "stack", 2 * EM_COLLAPSED_MAX_FRAMES + 1, EM_COLLAPSED_MAX_FRAMES);
    parse_fails(s, EMBER_ELIMIT, want);
    free(s);
}

static void test_parse_callback_stops(void **state)
{
    collect c = { .fail_on = 2, .fail_rc = EMBER_ENOMEM };
    const char *text = "a 1\nb 2\nc 3\n";

    (void)state;
    assert_int_equal(parse_into(&c, text, strlen(text)), EMBER_ENOMEM);
    assert_string_equal(em_errmsg(), "t.txt:2: boom");
    assert_int_equal(c.calls, 2);
    assert_string_equal(c.text, "[a] 1\n");
    free(c.text);
    /* A positive code stops too and comes back untouched. */
    memset(&c, 0, sizeof c);
    c.fail_on = 1;
    c.fail_rc = 7;
    assert_int_equal(parse_into(&c, text, strlen(text)), 7);
    assert_int_equal(c.calls, 1);
    free(c.text);
}

static void test_parse_origin_and_args(void **state)
{
    collect c = { 0 };

    (void)state;
    c.out = open_memstream(&c.text, &c.len);
    assert_int_equal(em_collapsed_parse("x\n", 2, NULL, collect_fn, &c),
                     EMBER_EINVAL);
    fclose(c.out);
    free(c.text);
    assert_string_equal(em_errmsg(), "<input>:1:2: expected a space and an "
                        "integer value at the end of the line");
    assert_int_equal(em_collapsed_parse(NULL, 0, "e", collect_fn, &c),
                     EMBER_OK);
    assert_int_equal(em_collapsed_parse(NULL, 1, "e", collect_fn, &c),
                     EMBER_EINVAL);
    assert_int_equal(em_collapsed_parse("a 1", 3, "e", NULL, NULL),
                     EMBER_EINVAL);
}

/* The parser's one allocation fails: ENOMEM with origin and line. */
static void test_parse_oom(void **state)
{
    char *s = deep_line(100);
    collect c = { 0 };
    int rc;

    (void)state;
    em_alloc_fail_at(1);
    rc = parse_into(&c, s, strlen(s));
    em_alloc_fail_at(0);
    assert_int_equal(rc, EMBER_ENOMEM);
    assert_string_equal(em_errmsg(), "t.txt:1:1: out of memory for 64 frames");
    free(c.text);
    free(s);
}

/* ---- files ---------------------------------------------------------------- */

/* True for NAME.txt, the examples (not the README). */
static bool is_data_file(const char *name)
{
    size_t n = strlen(name);

    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".txt") == 0;
}

/* The example files stay valid: each parses and holds stacks. */
static void test_data_files_parse(void **state)
{
    DIR *d = opendir(DATA_DIR);
    struct dirent *e;
    size_t nfiles = 0;

    (void)state;
    if (d == NULL)
        skip();                 /* not run from the repository root */
    while ((e = readdir(d)) != NULL) {
        char path[512];
        size_t len = 0;
        char *buf;
        em_pset set = { 0 };

        if (!is_data_file(e->d_name))
            continue;
        snprintf(path, sizeof path, "%s/%s", DATA_DIR, e->d_name);
        buf = tu_read_file(path, &len);
        assert_non_null(buf);
        if (em_collapsed_decode(buf, len, NULL, &set) != EMBER_OK)
            fail_msg("%s", em_errmsg());
        assert_true(set.nstacks > 10);
        em_pset_free(&set);
        free(buf);
        nfiles++;
    }
    closedir(d);
    assert_true(nfiles >= 2);
}

/* ---- the importer through the engine ------------------------------------ */

typedef struct dbfix {
    char dir[64];               /* temporary directory */
    char path[96];              /* the database: DIR/db */
    ember_db *db;
} dbfix;

static int db_setup(void **state)
{
    dbfix *x = calloc(1, sizeof *x);

    if (x == NULL)
        return -1;
    strcpy(x->dir, "/tmp/ember-test-collapsed-XXXXXX");
    if (mkdtemp(x->dir) == NULL)
        return -1;
    snprintf(x->path, sizeof x->path, "%s/db", x->dir);
    if (ember_open(x->path, NULL, &x->db) != EMBER_OK) {
        fprintf(stderr, "ember_open: %s\n", ember_errmsg(x->db));
        return -1;
    }
    *state = x;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int db_teardown(void **state)
{
    dbfix *x = *state;

    ember_close(x->db);
    nftw(x->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(x);
    return 0;
}

/* Imports TEXT as origin NAME at time T with the default type, expecting
** success; returns the importer's counts. */
static em_import_stats import_ok(ember_db *db, const char *text,
                                 const char *name, int64_t t)
{
    em_import_opts o = { .sz = sizeof o, .origin = name, .time_ms = t,
                         .period = 10000000 };
    em_import_stats st;
    int rc = em_import_collapsed(db, text, strlen(text), &o, &st);

    if (rc != EMBER_OK)
        fail_msg("import %s: %d %s", name, rc, ember_errmsg(db));
    return st;
}

/* "root;...;leaf VALUE" for stack ID, checking the location shape. */
static void stack_text(ember_snapshot *snap, FILE *out, uint32_t id,
                       int64_t value)
{
    const uint32_t *locs;
    size_t n;

    assert_int_equal(ember_snapshot_stack(snap, id, &locs, &n), EMBER_OK);
    for (size_t k = n; k-- > 0;) {          /* stored leaf first */
        ember_location l;
        ember_function fn;
        assert_int_equal(ember_snapshot_location(snap, locs[k], &l), EMBER_OK);
        assert_int_equal(l.mapping, 0);
        assert_int_equal(l.address, 0);
        assert_int_equal(l.nlines, 1);
        assert_int_equal(l.lines[0].line, 0);
        assert_int_equal(ember_snapshot_function(snap, l.lines[0].function,
                                                 &fn), EMBER_OK);
        fprintf(out, "%s%s", fn.name, k > 0 ? ";" : "");
    }
    fprintf(out, " %lld\n", (long long)value);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the lines of TEXT in place (merge order is by stack id). */
static void sort_lines(char *text)
{
    char *lines[256], *copy = strdup(text), *save = NULL;
    size_t n = 0;

    assert_non_null(copy);
    for (char *l = strtok_r(copy, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save)) {
        assert_true(n < EM_ARRAY_LEN(lines));
        lines[n++] = l;
    }
    qsort(lines, n, sizeof *lines, cmp_str);
    text[0] = '\0';
    for (size_t i = 0; i < n; i++)
        strcat(strcat(text, lines[i]), "\n");
    free(copy);
}

/* The merge of SEL rendered as sorted collapsed lines; the stack ids go to
** IDS (room for 64) and their count to *NIDS when IDS is not NULL. */
static char *merged_text(ember_db *db, const ember_selector *sel,
                         uint32_t *ids, size_t *nids)
{
    ember_merged *m = NULL;
    ember_snapshot *snap = NULL;
    const uint32_t *stacks;
    const int64_t *values;
    char *text = NULL;
    size_t len = 0, n;
    FILE *out = open_memstream(&text, &len);

    assert_non_null(out);
    if (ember_merge(db, sel, &m) != EMBER_OK)
        fail_msg("merge: %s", ember_errmsg(db));
    assert_int_equal(ember_snapshot_begin(db, &snap), EMBER_OK);
    n = ember_merged_samples(m, &stacks, &values);
    for (size_t i = 0; i < n; i++)
        stack_text(snap, out, stacks[i], values[i]);
    if (ids != NULL) {
        assert_true(n <= 64);
        memcpy(ids, stacks, n * sizeof *ids);
        *nids = n;
    }
    ember_snapshot_end(snap);
    ember_merged_free(m);
    fclose(out);
    sort_lines(text);
    return text;
}

static ember_stats db_stats(ember_db *db)
{
    ember_stats s = { .sz = sizeof s };

    if (ember_stats_get(db, &s) != EMBER_OK)
        fail_msg("stats: %s", ember_errmsg(db));
    return s;
}

static const char GO_SERVICE[] =
    "# a tiny Go service\n"
    "runtime.main;main.main;net/http.(*Server).Serve;main.handle 5\n"
    "runtime.main;main.main;net/http.(*Server).Serve;main.handle;"
    "encoding/json.Marshal 3\r\n"
    "runtime.goexit;runtime.gcBgMarkWorker;runtime.gcDrain 2\n"
    "\n"
    "runtime.main;main.main;net/http.(*Server).Serve;main.handle 4\n"
    "[unknown];syscall.Syscall(int, char) 1";

static const char GO_SERVICE_MERGED[] =
    "[unknown];syscall.Syscall(int, char) 1\n"
    "runtime.goexit;runtime.gcBgMarkWorker;runtime.gcDrain 2\n"
    "runtime.main;main.main;net/http.(*Server).Serve;main.handle 9\n"
    "runtime.main;main.main;net/http.(*Server).Serve;main.handle;"
    "encoding/json.Marshal 3\n";

static void test_import_basic(void **state)
{
    dbfix *x = *state;
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };
    em_import_stats st = import_ok(x->db, GO_SERVICE, "go.txt",
                                   1732170000000);
    ember_stats s = db_stats(x->db);
    char *text;

    assert_int_equal(st.lines, 5);
    assert_int_equal(st.stacks, 4);
    assert_int_equal(st.functions, 10);
    assert_int_equal(st.total, 15);
    assert_int_equal(s.profiles, 1);
    assert_int_equal(s.stacks, 4);
    assert_int_equal(s.functions, 10);
    assert_int_equal(s.locations, 10);
    text = merged_text(x->db, &sel, NULL, NULL);
    assert_string_equal(text, GO_SERVICE_MERGED);
    free(text);
}

/* Importing the same file again reuses every id and doubles the values. */
static void test_import_twice(void **state)
{
    dbfix *x = *state;
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };
    uint32_t ids1[64], ids2[64];
    size_t n1, n2;
    ember_stats s1, s2;
    char *text;

    import_ok(x->db, GO_SERVICE, "go.txt", 1732170000000);
    s1 = db_stats(x->db);
    free(merged_text(x->db, &sel, ids1, &n1));
    import_ok(x->db, GO_SERVICE, "go.txt", 1732170010000);
    s2 = db_stats(x->db);
    text = merged_text(x->db, &sel, ids2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(ids1, ids2, n1 * sizeof *ids1);
    assert_int_equal(s2.profiles, 2);
    assert_int_equal(s2.stacks, s1.stacks);
    assert_int_equal(s2.functions, s1.functions);
    assert_int_equal(s2.locations, s1.locations);
    assert_string_equal(text,
        "[unknown];syscall.Syscall(int, char) 2\n"
        "runtime.goexit;runtime.gcBgMarkWorker;runtime.gcDrain 4\n"
        "runtime.main;main.main;net/http.(*Server).Serve;main.handle 18\n"
        "runtime.main;main.main;net/http.(*Server).Serve;main.handle;"
        "encoding/json.Marshal 6\n");
    free(text);
}

/* The tables an import could touch, compared before and after. */
static void assert_same_stats(const ember_stats *a, const ember_stats *b)
{
    assert_int_equal(a->series, b->series);
    assert_int_equal(a->profiles, b->profiles);
    assert_int_equal(a->samples, b->samples);
    assert_int_equal(a->stacks, b->stacks);
    assert_int_equal(a->locations, b->locations);
    assert_int_equal(a->functions, b->functions);
    assert_int_equal(a->strings, b->strings);
}

static void test_import_bad_file_writes_nothing(void **state)
{
    dbfix *x = *state;
    static const char bad[] = "new;frames 1\nnew;other 2\nnew;;broken 3\n";
    em_import_opts o = { .sz = sizeof o, .origin = "bad.txt" };
    em_import_stats st = { .lines = 99 };
    ember_stats before, after;

    import_ok(x->db, GO_SERVICE, "go.txt", 1732170000000);
    before = db_stats(x->db);
    assert_int_equal(em_import_collapsed(x->db, bad, strlen(bad), &o, &st),
                     EMBER_EINVAL);
    assert_string_equal(ember_errmsg(x->db),
                        "bad.txt:3:5: expected a frame name before ';'");
    assert_int_equal(st.lines, 0);              /* zeroed on error */
    o.type = "not:a:type";
    assert_int_equal(em_import_collapsed(x->db, GO_SERVICE,
                                         strlen(GO_SERVICE), &o, NULL),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(x->db), "bad.txt: profile type"));
    after = db_stats(x->db);
    assert_same_stats(&before, &after);
}

/* Type and labels reach the series: each selector sees its own import. */
static void test_import_type_and_labels(void **state)
{
    dbfix *x = *state;
    static const ember_label api[] = { { "service", "api" } };
    static const char mem[] = "main;alloc 4096\nmain;alloc 1024\n";
    em_import_opts o = { .sz = sizeof o, .origin = "mem.txt",
                         .type = "memory:alloc_space:bytes:space:bytes",
                         .labels = api, .nlabels = 1, .time_ms = 1000 };
    ember_matcher m = { "service", "api", EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .type = o.type,
                           .matchers = &m, .nmatchers = 1 };
    ember_selector all = { .sz = sizeof all };
    ember_strlist *types;
    char *text;

    assert_int_equal(em_import_collapsed(x->db, mem, strlen(mem), &o, NULL),
                     EMBER_OK);
    import_ok(x->db, GO_SERVICE, "go.txt", 1000);
    text = merged_text(x->db, &sel, NULL, NULL);
    assert_string_equal(text, "main;alloc 5120\n");
    free(text);
    sel.type = TYPE;
    sel.nmatchers = 0;
    text = merged_text(x->db, &sel, NULL, NULL);
    assert_string_equal(text, GO_SERVICE_MERGED);
    free(text);
    assert_int_equal(ember_profile_types(x->db, &all, &types), EMBER_OK);
    assert_int_equal(ember_strlist_count(types), 2);
    assert_string_equal(ember_strlist_get(types, 0), TYPE);
    assert_string_equal(ember_strlist_get(types, 1),
                        "memory:alloc_space:bytes:space:bytes");
    ember_strlist_free(types);
}

static void test_import_empty(void **state)
{
    dbfix *x = *state;
    em_import_stats st = import_ok(x->db, "# nothing\n\n", "e.txt", 0);

    assert_int_equal(st.stacks, 0);
    assert_int_equal(db_stats(x->db).profiles, 0);
}

/* Failing each allocation in turn: ENOMEM, nothing written, and at last a
** full import. */
static void test_import_oom(void **state)
{
    dbfix *x = *state;
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };
    em_import_opts o = { .sz = sizeof o, .origin = "go.txt" };
    int rc = EMBER_ENOMEM;
    char *text;

    for (uint64_t n = 1; rc != EMBER_OK; n++) {
        em_alloc_fail_at(n);
        rc = em_import_collapsed(x->db, GO_SERVICE, strlen(GO_SERVICE), &o,
                                 NULL);
        em_alloc_fail_at(0);
        if (rc != EMBER_OK) {
            if (rc != EMBER_ENOMEM)
                fail_msg("allocation %llu: %d %s", (unsigned long long)n,
                         rc, ember_errmsg(x->db));
            assert_int_equal(db_stats(x->db).profiles, 0);
        }
        assert_true(n < 10000);
    }
    text = merged_text(x->db, &sel, NULL, NULL);
    assert_string_equal(text, GO_SERVICE_MERGED);
    free(text);
}

/* Every example file imports, timed by its name (unix milliseconds). */
static void test_import_data_files(void **state)
{
    dbfix *x = *state;
    DIR *d = opendir(DATA_DIR);
    struct dirent *e;
    uint64_t nfiles = 0;

    if (d == NULL)
        skip();
    while ((e = readdir(d)) != NULL) {
        char path[512];
        size_t len = 0;
        char *buf;
        em_import_opts o = { .sz = sizeof o, .origin = path };

        if (!is_data_file(e->d_name))
            continue;
        snprintf(path, sizeof path, "%s/%s", DATA_DIR, e->d_name);
        o.time_ms = strtoll(e->d_name, NULL, 10);
        assert_true(o.time_ms > 1700000000000);
        buf = tu_read_file(path, &len);
        assert_non_null(buf);
        if (em_import_collapsed(x->db, buf, len, &o, NULL) != EMBER_OK)
            fail_msg("%s", ember_errmsg(x->db));
        free(buf);
        nfiles++;
    }
    closedir(d);
    assert_int_equal(db_stats(x->db).profiles, nfiles);
}

#define DB_TEST(f) cmocka_unit_test_setup_teardown(f, db_setup, db_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_normal),
        cmocka_unit_test(test_parse_spaces_in_frames),
        cmocka_unit_test(test_parse_crlf_comments_blanks),
        cmocka_unit_test(test_parse_values),
        cmocka_unit_test(test_parse_missing_value),
        cmocka_unit_test(test_parse_bad_value),
        cmocka_unit_test(test_parse_overflow),
        cmocka_unit_test(test_parse_empty_frame),
        cmocka_unit_test(test_parse_nul_byte),
        cmocka_unit_test(test_parse_line_limit),
        cmocka_unit_test(test_parse_frame_limit),
        cmocka_unit_test(test_parse_callback_stops),
        cmocka_unit_test(test_parse_origin_and_args),
        cmocka_unit_test(test_parse_oom),
        cmocka_unit_test(test_data_files_parse),
        DB_TEST(test_import_basic),
        DB_TEST(test_import_twice),
        DB_TEST(test_import_bad_file_writes_nothing),
        DB_TEST(test_import_type_and_labels),
        DB_TEST(test_import_empty),
        DB_TEST(test_import_oom),
        DB_TEST(test_import_data_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
