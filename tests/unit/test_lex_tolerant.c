/*
** tests/unit/test_lex_tolerant.c: the query lexer's tolerant mode
** (EM_LEX_TOLERANT), which the REPL reads statements and completes words
** with, against its strict mode, which the parser uses:
**
**   - a text the strict mode accepts gives the same tokens in both;
**   - where the strict mode fails at token K, the tolerant one gives the
**     same K tokens before it, then a token at the same place flagged
**     EM_TOKF_INVALID, and goes on to the end of the text;
**   - every token kind cut at every byte is one token over the whole cut,
**     flagged EM_TOKF_INCOMPLETE exactly when the strict mode rejects it;
**   - the same cuts of whole queries, the fuzz corpus of the query lexer,
**     and generated junk, none of which may crash (ASan) or leave a byte
**     outside a token but blanks (and comments unless EM_LEX_COMMENTS).
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "query/query.h"
#include "tests/unit/common/testutil.h"

#define MAX_TOKS 4096

/* ---- helpers ------------------------------------------------------------------- */

/* Lexes SRC in MODE to its end (or, strict, its first error) into TOKS;
** returns how many tokens, EOF included; *FAILED: the strict mode failed
** at the last one. */
static size_t lex(const char *src, unsigned mode, em_token *toks,
                  bool *failed)
{
    em_lexer lx;
    size_t n = 0;

    em_lex_init_mode(&lx, src, mode);
    *failed = false;
    for (;;) {
        em_token t;
        int rc = em_lex_next(&lx, &t);
        assert_true(n < MAX_TOKS);
        toks[n++] = t;
        if (rc != EMBER_OK) {
            assert_false(mode & EM_LEX_TOLERANT);
            *failed = true;
            return n;
        }
        if (t.kind == EM_TOK_EOF)
            return n;
    }
}

static bool same_token(const em_token *a, const em_token *b)
{
    return a->kind == b->kind && a->pos == b->pos && a->len == b->len &&
           a->line == b->line && a->col == b->col && a->flags == b->flags;
}

static void fail_token(const char *src, size_t i, const char *why,
                       const em_token *t)
{
    fail_msg("\"%s\": token %zu (%s at %zu, %zu bytes, flags %u): %s", src,
             i, em_tok_name(t->kind), t->pos, t->len, t->flags, why);
}

/* Checks that the tolerant tokens T (N of them) tile SRC: in order, inside
** it, each but EOF non-empty, only blanks (or, without COMMENTS, comments)
** between them, flags only where allowed, and an incomplete token at the
** very end. */
static void check_tiling(const char *src, const em_token *t, size_t n,
                         bool comments)
{
    size_t end = 0, len = strlen(src);

    for (size_t i = 0; i < n; i++) {
        for (size_t k = end; k < t[i].pos; k++) {
            if (src[k] == '#' && !comments)
                k += strcspn(src + k, "\n") - 1;
            else if (strchr(" \t\n\r\f\v", src[k]) == NULL)
                fail_token(src, i, "a byte before it is in no token", &t[i]);
        }
        if (t[i].pos < end || t[i].pos + t[i].len > len ||
            (t[i].len == 0) != (t[i].kind == EM_TOK_EOF))
            fail_token(src, i, "outside the text or empty", &t[i]);
        if ((t[i].flags & EM_TOKF_INCOMPLETE) &&
            (!(t[i].flags & EM_TOKF_INVALID) || t[i].pos + t[i].len != len))
            fail_token(src, i, "incomplete but not invalid at the end",
                       &t[i]);
        if (t[i].kind == EM_TOK_UNKNOWN &&
            (t[i].len != 1 || !(t[i].flags & EM_TOKF_INVALID)))
            fail_token(src, i, "an unknown token is one invalid byte", &t[i]);
        end = t[i].pos + t[i].len;
    }
    assert_int_equal(t[n - 1].kind, EM_TOK_EOF);
    assert_int_equal(t[n - 1].pos, len);
}

/* The tolerant mode's promise about SRC, whatever it holds: see the top
** of the file. Returns whether the strict mode accepts SRC. */
static bool check_against_strict(const char *src)
{
    static em_token s[MAX_TOKS], t[MAX_TOKS], c[MAX_TOKS];
    bool failed, dummy;
    size_t ns = lex(src, 0, s, &failed);
    size_t nt = lex(src, EM_LEX_TOLERANT, t, &dummy);
    size_t nc = lex(src, EM_LEX_TOLERANT | EM_LEX_COMMENTS, c, &dummy);
    size_t ok = failed ? ns - 1 : ns;   /* tokens both modes agree on */

    check_tiling(src, t, nt, false);
    check_tiling(src, c, nc, true);
    for (size_t i = 0; i < ok; i++) {
        if (i >= nt || !same_token(&s[i], &t[i]))
            fail_token(src, i, "differs from the strict mode's", &s[i]);
    }
    if (!failed) {
        assert_int_equal(nt, ns);
    } else if (t[ok].pos != s[ok].pos || !(t[ok].flags & EM_TOKF_INVALID)) {
        fail_token(src, ok, "the strict mode fails here: not flagged",
                   &t[ok]);
    }
    for (size_t i = 0, j = 0; i < nc; i++) {    /* comments aside, the same */
        if (c[i].kind != EM_TOK_COMMENT && !same_token(&c[i], &t[j++]))
            fail_token(src, i, "differs with EM_LEX_COMMENTS", &c[i]);
    }
    return !failed;
}

/* Every cut of the valid query FULL: each must keep the promise, and where
** the strict mode rejects the cut, the last token is incomplete (the cut
** made it so: the text before it was fine). */
static void check_cuts(const char *full)
{
    size_t len = strlen(full);
    char *buf = malloc(len + 1);
    static em_token t[MAX_TOKS];

    assert_non_null(buf);
    if (!check_against_strict(full))
        fail_msg("\"%s\": not a valid query", full);
    for (size_t k = 0; k <= len; k++) {
        bool dummy;
        size_t nt;
        memcpy(buf, full, k);
        buf[k] = '\0';
        if (check_against_strict(buf))
            continue;
        nt = lex(buf, EM_LEX_TOLERANT, t, &dummy);
        assert_true(nt >= 2);
        for (size_t i = 0; i + 2 < nt; i++) {
            if (t[i].flags != 0)
                fail_token(buf, i, "flagged before the cut", &t[i]);
        }
        if (t[nt - 2].flags != (EM_TOKF_INVALID | EM_TOKF_INCOMPLETE))
            fail_token(buf, nt - 2, "the cut token is not incomplete",
                       &t[nt - 2]);
    }
    free(buf);
}

/* ---- every token kind, cut at every byte ------------------------------------------ */

static void test_cut_every_token(void **state)
{
    static const struct { const char *text; em_tok kind; } toks[] = {
        { "process_cpu:samples:count", EM_TOK_IDENT }, { "_x9", EM_TOK_IDENT },
        { "by", EM_TOK_BY }, { "WITHOUT", EM_TOK_WITHOUT },
        { "Offset", EM_TOK_OFFSET },
        { "\"a\\\"b\\\\c\"", EM_TOK_STRING }, { "'it\\'s'", EM_TOK_STRING },
        { "\"\\x41\\101\\u00e9\\U0001F600\\n\"", EM_TOK_STRING },
        { "\"\xc3\xa9\"", EM_TOK_STRING }, { "`raw\\n\nx`", EM_TOK_STRING },
        { "12", EM_TOK_NUMBER }, { "1.5", EM_TOK_NUMBER },
        { ".5", EM_TOK_NUMBER }, { "2.5E-3", EM_TOK_NUMBER },
        { "1e+30", EM_TOK_NUMBER }, { "0x1F", EM_TOK_NUMBER },
        { "1h30m", EM_TOK_DURATION }, { "500ms", EM_TOK_DURATION },
        { "1y2w3d4h5m6s7ms", EM_TOK_DURATION }, { "0s", EM_TOK_DURATION },
        { "{", EM_TOK_LBRACE }, { "}", EM_TOK_RBRACE },
        { "(", EM_TOK_LPAREN }, { ")", EM_TOK_RPAREN },
        { "[", EM_TOK_LBRACKET }, { "]", EM_TOK_RBRACKET },
        { ",", EM_TOK_COMMA }, { "=", EM_TOK_EQ }, { "!=", EM_TOK_NEQ },
        { "=~", EM_TOK_RE }, { "!~", EM_TOK_NRE }, { "@", EM_TOK_AT },
    };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(toks); i++) {
        const char *text = toks[i].text;
        em_token t[4];
        bool dummy;
        assert_int_equal(lex(text, 0, t, &dummy), 2);
        assert_int_equal(t[0].kind, toks[i].kind);
        assert_int_equal(t[0].len, strlen(text));
        check_cuts(text);
        /* each cut alone is one token over the whole cut */
        for (size_t k = 1; k < strlen(text); k++) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)k, text);
            assert_int_equal(lex(buf, EM_LEX_TOLERANT, t, &dummy), 2);
            assert_int_equal(t[0].pos, 0);
            assert_int_equal(t[0].len, k);
            if (t[0].flags != 0 && t[0].kind != toks[i].kind &&
                t[0].kind != EM_TOK_UNKNOWN)
                fail_token(buf, 0, "a cut changed its kind", &t[0]);
        }
    }
}

static void test_cut_every_query(void **state)
{
    static const char *const queries[] = {
        "merge by (pod) (process_cpu:samples:count:cpu:nanoseconds:delta"
        "{service=\"api\", pod!~'db-.*', zone=~`eu-\\d`}[1h] offset 30m "
        "@ 1732170000.5)",
        "top(ignore(focus(cpu, \"json\\\\..*\"), `runtime\\..*`), 20)",
        "sum without (zone) (rate(total(cpu{a!=\"\\u00e9\"}[5m])))",
        "label_values(pod, {__type__=~\"memory:.*\"}) # the pods\n",
        "topk(2.5e1, total(cpu)) @ \"2024-11-21T06:20:00Z\" offset .5",
        "cpu # a comment\n{\n\ta = \"x\" ,\n\tby=\"y\"\n}",
    };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(queries); i++)
        check_cuts(queries[i]);
}

/* ---- what the tolerant mode makes of what the strict one rejects ----------------- */

typedef struct want_tok {
    em_tok kind;
    size_t pos, len;
    unsigned flags;
} want_tok;

#define BAD EM_TOKF_INVALID
#define CUT (EM_TOKF_INVALID | EM_TOKF_INCOMPLETE)

static void expect_tokens(const char *src, unsigned mode, const want_tok *w,
                          size_t n)
{
    em_token t[64];
    bool dummy;
    size_t nt = lex(src, mode, t, &dummy);

    check_against_strict(src);
    if (nt != n + 1)
        fail_msg("\"%s\": %zu tokens, expected %zu", src, nt - 1, n);
    for (size_t i = 0; i < n; i++) {
        if (t[i].kind != w[i].kind || t[i].pos != w[i].pos ||
            t[i].len != w[i].len || t[i].flags != w[i].flags)
            fail_token(src, i, "not as expected", &t[i]);
    }
}

#define EXPECT(src, mode, ...) do { \
        static const want_tok w_[] = { __VA_ARGS__ }; \
        expect_tokens(src, mode, w_, EM_ARRAY_LEN(w_)); \
    } while (0)

static void test_tolerant_tokens(void **state)
{
    const unsigned T = EM_LEX_TOLERANT;
    (void)state;

    /* an unfinished regex: the string runs to the end, cut */
    EXPECT("cpu{a=~\"x.(", T, { EM_TOK_IDENT, 0, 3, 0 },
           { EM_TOK_LBRACE, 3, 1, 0 }, { EM_TOK_IDENT, 4, 1, 0 },
           { EM_TOK_RE, 5, 2, 0 }, { EM_TOK_STRING, 7, 4, CUT });
    /* an unclosed brace is the parser's business: tokens are fine */
    EXPECT("{a=\"b\"", T, { EM_TOK_LBRACE, 0, 1, 0 },
           { EM_TOK_IDENT, 1, 1, 0 }, { EM_TOK_EQ, 2, 1, 0 },
           { EM_TOK_STRING, 3, 3, 0 });
    /* stray bytes, one token each, and lexing goes on */
    EXPECT("cpu $ + x", T, { EM_TOK_IDENT, 0, 3, 0 },
           { EM_TOK_UNKNOWN, 4, 1, BAD }, { EM_TOK_UNKNOWN, 6, 1, BAD },
           { EM_TOK_IDENT, 8, 1, 0 });
    EXPECT("\xc3\xa9;", T, { EM_TOK_UNKNOWN, 0, 1, BAD },
           { EM_TOK_UNKNOWN, 1, 1, BAD }, { EM_TOK_UNKNOWN, 2, 1, BAD });
    /* '!' and '.' are cut at the end, merely wrong elsewhere */
    EXPECT("a ! b !", T, { EM_TOK_IDENT, 0, 1, 0 },
           { EM_TOK_UNKNOWN, 2, 1, BAD }, { EM_TOK_IDENT, 4, 1, 0 },
           { EM_TOK_UNKNOWN, 6, 1, CUT });
    EXPECT(". x.", T, { EM_TOK_UNKNOWN, 0, 1, BAD },
           { EM_TOK_IDENT, 2, 1, 0 }, { EM_TOK_UNKNOWN, 3, 1, CUT });
    /* bad escapes and NULs: the string goes on to its closing quote */
    EXPECT("\"a\\qb\" '\\\"' \"\\x00\" x", T,
           { EM_TOK_STRING, 0, 6, BAD }, { EM_TOK_STRING, 7, 4, BAD },
           { EM_TOK_STRING, 12, 6, BAD }, { EM_TOK_IDENT, 19, 1, 0 });
    EXPECT("\"\\", T, { EM_TOK_STRING, 0, 2, CUT });
    EXPECT("'\\x4", T, { EM_TOK_STRING, 0, 4, CUT });
    /* a quoted string over a newline: wrong, but it ends at its quote, as
    ** the REPL keeps reading the lines of an open string */
    EXPECT("\"ab\ncd\" x", T, { EM_TOK_STRING, 0, 7, BAD },
           { EM_TOK_IDENT, 8, 1, 0 });
    EXPECT("'ab\n", T, { EM_TOK_STRING, 0, 4, CUT });
    /* bad numbers and durations take the rest of their word */
    EXPECT("12abc 1.5h 1.2.3 5mx y", T, { EM_TOK_NUMBER, 0, 5, BAD },
           { EM_TOK_NUMBER, 6, 4, BAD }, { EM_TOK_NUMBER, 11, 5, BAD },
           { EM_TOK_DURATION, 17, 3, BAD }, { EM_TOK_IDENT, 21, 1, 0 });
    EXPECT("1e-x 1h1h 1h3 ", T, { EM_TOK_NUMBER, 0, 2, BAD },
           { EM_TOK_UNKNOWN, 2, 1, BAD }, { EM_TOK_IDENT, 3, 1, 0 },
           { EM_TOK_DURATION, 5, 4, BAD }, { EM_TOK_DURATION, 10, 3, BAD });
    EXPECT("0x 1e- 1h3", T, { EM_TOK_NUMBER, 0, 2, BAD },
           { EM_TOK_NUMBER, 3, 2, BAD }, { EM_TOK_UNKNOWN, 5, 1, BAD },
           { EM_TOK_DURATION, 7, 3, CUT });
    EXPECT("1e-", T, { EM_TOK_NUMBER, 0, 3, CUT });
    EXPECT("0X", T, { EM_TOK_NUMBER, 0, 2, CUT });
}

static void test_comment_tokens(void **state)
{
    const unsigned C = EM_LEX_COMMENTS, TC = EM_LEX_TOLERANT | C;
    (void)state;

    EXPECT("a # one\n# two\nb #", C, { EM_TOK_IDENT, 0, 1, 0 },
           { EM_TOK_COMMENT, 2, 5, 0 }, { EM_TOK_COMMENT, 8, 5, 0 },
           { EM_TOK_IDENT, 14, 1, 0 }, { EM_TOK_COMMENT, 16, 1, 0 });
    EXPECT("\"#\" `#` # \"x", TC, { EM_TOK_STRING, 0, 3, 0 },
           { EM_TOK_STRING, 4, 3, 0 }, { EM_TOK_COMMENT, 8, 4, 0 });
    EXPECT("# only #\n", C, { EM_TOK_COMMENT, 0, 8, 0 });
    assert_string_equal(em_tok_name(EM_TOK_COMMENT), "comment");
    assert_string_equal(em_tok_name(EM_TOK_UNKNOWN), "unexpected character");
}

/* ---- the fuzz corpus and generated junk --------------------------------------------- */

static void test_fuzz_corpus(void **state)
{
    const char *dir = "fuzz/corpus/fuzz_query";
    DIR *d = opendir(dir);
    struct dirent *e;
    unsigned files = 0;
    (void)state;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        size_t len;
        char *text;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if ((text = tu_read_file(path, &len)) == NULL)
            continue;
        if (strlen(text) < 4096)        /* cuts cost the square */
            for (size_t k = 0; k <= strlen(text); k++) {
                char c = text[k];
                text[k] = '\0';
                check_against_strict(text);
                text[k] = c;
            }
        check_against_strict(text);
        free(text);
        files++;
    }
    closedir(d);
    assert_true(files > 10);
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_generated_junk(void **state)
{
    static const char *const parts[] = {
        "cpu", "by", "offset", "label_values", "(", ")", "{", "}", "[", "]",
        ",", "=", "!=", "=~", "!~", "!", "@", "\"", "'", "`", "\\", "\\x4",
        "\\u00e9", "#", "\n", " ", "\t", "\f", "1", "5m", "1h3", "1e", "-",
        "0x", ".", "7.", "e", ";", "$", "\xc3\xa9", "\xff", ":", "_",
    };
    uint64_t seed = 0x9e3779b97f4a7c15u;
    char buf[256];
    (void)state;

    for (int i = 0; i < 20000; i++) {
        size_t n = 0, parts_n = next_rand(&seed) % 16;
        for (size_t k = 0; k < parts_n; k++) {
            const char *p = parts[next_rand(&seed) % EM_ARRAY_LEN(parts)];
            if (n + strlen(p) < sizeof buf)
                n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", p);
        }
        buf[n] = '\0';
        check_against_strict(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_every_token),
        cmocka_unit_test(test_cut_every_query),
        cmocka_unit_test(test_tolerant_tokens),
        cmocka_unit_test(test_comment_tokens),
        cmocka_unit_test(test_fuzz_corpus),
        cmocka_unit_test(test_generated_junk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
