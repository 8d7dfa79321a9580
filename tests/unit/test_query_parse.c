/*
** tests/unit/test_query_parse.c: the query lexer and the selector parser:
** token kinds and positions, string escapes, numbers and durations, the
** selector forms, and every parse error as a golden message with its caret.
** Allocation failure is injected at every call of a parse to prove each path
** returns EMBER_ENOMEM and frees what it made (ASan's leak check).
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "query/query.h"

/* ---- helpers ------------------------------------------------------------------- */

/* Lexes SRC to the end; fills KINDS (up to MAX) and returns the count, or
** -1 on a lexer error. */
static int lex_all(const char *src, em_token *toks, int max)
{
    em_lexer lx;
    int n = 0;

    em_lex_init(&lx, src);
    for (;;) {
        em_token t;
        if (em_lex_next(&lx, &t) != EMBER_OK)
            return -1;
        if (n < max)
            toks[n] = t;
        n++;
        if (t.kind == EM_TOK_EOF)
            return n;
    }
}

static void expect_kinds(const char *src, const em_tok *kinds, int n)
{
    em_token toks[64];
    int got = lex_all(src, toks, 64);

    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) {
        if (toks[i].kind != kinds[i])
            fail_msg("%s: token %d is %s, expected %s", src, i,
                     em_tok_name(toks[i].kind), em_tok_name(kinds[i]));
    }
}

/* Parses SRC expecting failure with exactly the message WANT. */
static void expect_error(const char *src, const char *want)
{
    em_node *n = (em_node *)1;
    int rc = em_query_parse(src, &n);

    assert_int_equal(rc, EMBER_EINVAL);
    assert_null(n);
    assert_string_equal(em_errmsg(), want);
}

static em_node *parse_ok(const char *src)
{
    em_node *n = NULL;
    int rc = em_query_parse(src, &n);

    if (rc != EMBER_OK)
        fail_msg("%s: %s", src, em_errmsg());
    assert_non_null(n);
    assert_int_equal(n->kind, EM_NODE_SELECTOR);
    return n;
}

/* Decodes the single string token of SRC. */
static char *lex_one_string(const char *src)
{
    em_lexer lx;
    em_token t;
    char *out = NULL;

    em_lex_init(&lx, src);
    assert_int_equal(em_lex_next(&lx, &t), EMBER_OK);
    assert_int_equal(t.kind, EM_TOK_STRING);
    assert_int_equal(t.len, strlen(src));
    assert_int_equal(em_lex_string(src, &t, &out), EMBER_OK);
    return out;
}

/* ---- lexer ------------------------------------------------------------------------ */

static void test_lex_kinds(void **state)
{
    static const em_tok k1[] = {
        EM_TOK_IDENT, EM_TOK_LBRACE, EM_TOK_IDENT, EM_TOK_EQ, EM_TOK_STRING,
        EM_TOK_COMMA, EM_TOK_IDENT, EM_TOK_NEQ, EM_TOK_STRING, EM_TOK_COMMA,
        EM_TOK_IDENT, EM_TOK_RE, EM_TOK_STRING, EM_TOK_COMMA, EM_TOK_IDENT,
        EM_TOK_NRE, EM_TOK_STRING, EM_TOK_RBRACE, EM_TOK_EOF };
    static const em_tok k2[] = {
        EM_TOK_LPAREN, EM_TOK_RPAREN, EM_TOK_LBRACKET, EM_TOK_RBRACKET,
        EM_TOK_AT, EM_TOK_BY, EM_TOK_WITHOUT, EM_TOK_OFFSET, EM_TOK_BY,
        EM_TOK_IDENT, EM_TOK_EOF };
    static const em_tok k3[] = {
        EM_TOK_NUMBER, EM_TOK_NUMBER, EM_TOK_NUMBER, EM_TOK_NUMBER,
        EM_TOK_NUMBER, EM_TOK_NUMBER, EM_TOK_DURATION, EM_TOK_DURATION,
        EM_TOK_DURATION, EM_TOK_DURATION, EM_TOK_DURATION, EM_TOK_DURATION,
        EM_TOK_DURATION, EM_TOK_DURATION, EM_TOK_EOF };
    (void)state;

    expect_kinds("cpu{a=\"b\", c!='d', e=~`f`, g!~\"h\"}", k1,
                 (int)EM_ARRAY_LEN(k1));
    expect_kinds("( ) [ ] @ by WITHOUT Offset bY byx", k2,
                 (int)EM_ARRAY_LEN(k2));
    expect_kinds("12 1.5 .5 1e3 2.5E-3 0x1F 10s 5m 1h30m 500ms 2d 1w 1y 0s",
                 k3, (int)EM_ARRAY_LEN(k3));
    expect_kinds("", (const em_tok[]){ EM_TOK_EOF }, 1);
    expect_kinds("  # only a comment", (const em_tok[]){ EM_TOK_EOF }, 1);
}

static void test_lex_profile_type_is_one_ident(void **state)
{
    const char *src = "process_cpu:samples:count:cpu:nanoseconds:delta{";
    em_token toks[4];
    (void)state;

    assert_int_equal(lex_all(src, toks, 4), 3);
    assert_int_equal(toks[0].kind, EM_TOK_IDENT);
    assert_int_equal(toks[0].len, strlen(src) - 1);
    assert_int_equal(toks[1].kind, EM_TOK_LBRACE);
    assert_int_equal(toks[1].col, strlen(src));
}

static void test_lex_positions(void **state)
{
    /* columns count characters: the two-byte é is one column */
    const char *src = "{a=\"\xc3\xa9\", b=\"x\"}\n  cpu # note\n\t}";
    em_token t[16];
    (void)state;

    assert_int_equal(lex_all(src, t, 16), 12);
    assert_int_equal(t[0].col, 1);
    assert_int_equal(t[3].pos, 3);          /* "é" */
    assert_int_equal(t[3].len, 4);
    assert_int_equal(t[4].col, 7);          /* , */
    assert_int_equal(t[4].pos, 7);
    assert_int_equal(t[5].col, 9);          /* b */
    assert_int_equal(t[9].kind, EM_TOK_IDENT);  /* cpu on line 2 */
    assert_int_equal(t[9].line, 2);
    assert_int_equal(t[9].col, 3);
    assert_int_equal(t[10].kind, EM_TOK_RBRACE);
    assert_int_equal(t[10].line, 3);
    assert_int_equal(t[10].col, 2);
    assert_int_equal(t[11].kind, EM_TOK_EOF);
}

static void test_lex_string_escapes(void **state)
{
    struct { const char *src, *want; } cases[] = {
        { "\"plain\"", "plain" },
        { "\"\"", "" },
        { "\"a\\\"b\"", "a\"b" },
        { "'it\\'s'", "it's" },
        { "\"\\a\\b\\f\\n\\r\\t\\v\\\\\"", "\a\b\f\n\r\t\v\\" },
        { "\"\\x41\\101\\u00e9\\U0001F600\"",
          "AA\xc3\xa9\xf0\x9f\x98\x80" },
        { "`raw \\n \"x\" 'y'`", "raw \\n \"x\" 'y'" },
        { "`two\nlines`", "two\nlines" },
        { "'double \" inside'", "double \" inside" },
        { "\"\xe6\x97\xa5\xe6\x9c\xac\"", "\xe6\x97\xa5\xe6\x9c\xac" },
    };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(cases); i++) {
        char *got = lex_one_string(cases[i].src);
        assert_string_equal(got, cases[i].want);
        em_free(got);
    }
}

static void test_lex_errors(void **state)
{
    struct { const char *src, *want; } cases[] = {
        { "{a=\"x}", "parse error at column 4: unterminated string: no "
          "closing \" on this line\n  {a=\"x}\n     ^" },
        { "{a=\"x\n\"}", "parse error at line 1, column 4: unterminated "
          "string: no closing \" on this line\n  {a=\"x\n     ^" },
        { "`x", "parse error at column 1: unterminated string: no closing "
          "`\n  `x\n  ^" },
        { "\"\\q\"", "parse error at column 2: bad escape sequence in "
          "string: expected \\a \\b \\f \\n \\r \\t \\v \\\\ \\\", \\ooo, "
          "\\xhh, \\uhhhh or \\Uhhhhhhhh\n  \"\\q\"\n   ^" },
        { "'\\\"'", "parse error at column 2: bad escape sequence in "
          "string: expected \\a \\b \\f \\n \\r \\t \\v \\\\ \\', \\ooo, "
          "\\xhh, \\uhhhh or \\Uhhhhhhhh\n  '\\\"'\n   ^" },
        { "\"ab\\x00\"", "parse error at column 4: a string may not contain "
          "a NUL character\n  \"ab\\x00\"\n     ^" },
        { "12abc", "parse error at column 1: bad number or duration\n"
          "  12abc\n  ^" },
        { "1.5h", "parse error at column 1: bad number or duration\n"
          "  1.5h\n  ^" },
        { "x 1h1h", "parse error at column 3: bad duration \"1h1h\": units "
          "must go from the largest to the smallest, each at most once\n"
          "  x 1h1h\n    ^" },
        { "30m1h", "parse error at column 1: bad duration \"30m1h\": units "
          "must go from the largest to the smallest, each at most once\n"
          "  30m1h\n  ^" },
        { "1h30", "parse error at column 1: bad duration \"1h30\": expected "
          "digits and a unit (y w d h m s ms), like 1h30m\n  1h30\n  ^" },
        { "5mx", "parse error at column 1: bad duration: expected digits "
          "and units such as 1h30m (units y w d h m s ms)\n  5mx\n  ^" },
        { "cpu $", "parse error at column 5: unexpected character '$'\n"
          "  cpu $\n      ^" },
        { "a ! b", "parse error at column 3: unexpected '!': expected '!=' "
          "or '!~'\n  a ! b\n    ^" },
        { "\xc3\xa9", "parse error at column 1: unexpected byte 0xc3\n"
          "  \xc3\xa9\n  ^" },
    };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(cases); i++) {
        em_token t[8];
        if (lex_all(cases[i].src, t, 8) != -1)
            fail_msg("%s: lexed without error", cases[i].src);
        assert_string_equal(em_errmsg(), cases[i].want);
    }
}

static void test_lex_string_escape_limits(void **state)
{
    /* each is rejected: surrogate, beyond U+10FFFF, octal above 255,
    ** short hex */
    const char *bad[] = { "\"\\ud800\"", "\"\\U00110000\"", "\"\\400\"",
                          "\"\\x4\"", "\"\\u12\"", "\"\\", "\"\\0\"" };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(bad); i++) {
        em_token t[4];
        if (lex_all(bad[i], t, 4) != -1)
            fail_msg("%s: lexed without error", bad[i]);
    }
}

/* ---- parser: accepted selectors ---------------------------------------------------- */

static void test_parse_type_only(void **state)
{
    em_node *n = parse_ok("  process_cpu:samples:count:cpu:nanoseconds:delta ");
    (void)state;

    assert_string_equal(n->u.sel.type,
                        "process_cpu:samples:count:cpu:nanoseconds:delta");
    assert_int_equal(n->u.sel.type_pos, 2);
    assert_int_equal(n->u.sel.nmatchers, 0);
    assert_int_equal(n->pos, 2);
    em_node_free(n);
}

static void test_parse_full_selector(void **state)
{
    const char *q = "memory:inuse_space:bytes:space:bytes{service=\"api\", "
                    "pod=~'api-.*', zone!=`eu\\1`, host!~\"db\\\\d+\",}";
    em_node *n = parse_ok(q);
    const em_sel *s = &n->u.sel;
    (void)state;

    assert_string_equal(s->type, "memory:inuse_space:bytes:space:bytes");
    assert_int_equal(s->nmatchers, 4);
    assert_string_equal(s->matchers[0].name, "service");
    assert_string_equal(s->matchers[0].value, "api");
    assert_int_equal(s->matchers[0].op, EMBER_MATCH_EQ);
    assert_string_equal(s->matchers[1].name, "pod");
    assert_string_equal(s->matchers[1].value, "api-.*");
    assert_int_equal(s->matchers[1].op, EMBER_MATCH_RE);
    assert_string_equal(s->matchers[2].value, "eu\\1");
    assert_int_equal(s->matchers[2].op, EMBER_MATCH_NEQ);
    assert_string_equal(s->matchers[3].value, "db\\d+");
    assert_int_equal(s->matchers[3].op, EMBER_MATCH_NRE);
    assert_int_equal(s->value_pos[0], strstr(q, "\"api\"") - q);
    assert_int_equal(s->value_pos[1], strstr(q, "'api") - q);
    em_node_free(n);
}

static void test_parse_bare_matchers(void **state)
{
    em_node *n = parse_ok("{service=\"api\"}");
    ember_selector sel;
    (void)state;

    assert_null(n->u.sel.type);
    assert_int_equal(n->u.sel.nmatchers, 1);
    em_sel_view(&n->u.sel, 1000, 2000, &sel);
    assert_int_equal(sel.sz, sizeof sel);
    assert_null(sel.type);
    assert_ptr_equal(sel.matchers, n->u.sel.matchers);
    assert_int_equal(sel.nmatchers, 1);
    assert_int_equal(sel.from_ms, 1000);
    assert_int_equal(sel.to_ms, 2000);
    assert_null(sel.focus);
    em_node_free(n);
}

static void test_parse_type_matcher(void **state)
{
    em_node *n = parse_ok("{service!=\"x\", __type__=\"memory:a:bytes:b:c\"}");
    em_node *m = parse_ok("{__type__=~\"memory:.*\"}");
    ember_selector sel;
    (void)state;

    assert_string_equal(n->u.sel.type, "memory:a:bytes:b:c");
    assert_int_equal(n->u.sel.nmatchers, 1);
    assert_string_equal(n->u.sel.matchers[0].name, "service");
    em_sel_view(&n->u.sel, 0, 0, &sel);
    assert_string_equal(sel.type, "memory:a:bytes:b:c");
    /* other operators on __type__ stay matchers */
    assert_null(m->u.sel.type);
    assert_string_equal(m->u.sel.matchers[0].name, "__type__");
    assert_int_equal(m->u.sel.matchers[0].op, EMBER_MATCH_RE);
    em_node_free(n);
    em_node_free(m);
}

static void test_parse_keywords_as_label_names(void **state)
{
    em_node *n = parse_ok("cpu{by=\"a\", Without=\"b\", offset=\"\"}");
    (void)state;

    assert_int_equal(n->u.sel.nmatchers, 3);
    assert_string_equal(n->u.sel.matchers[0].name, "by");
    assert_string_equal(n->u.sel.matchers[1].name, "Without");
    assert_string_equal(n->u.sel.matchers[2].value, "");
    em_node_free(n);
}

static void test_parse_whitespace_and_comments(void **state)
{
    em_node *n = parse_ok("cpu # the type\n{\n  a = \"1\" , # first\n"
                          "  b=\"2\"\n}\n");
    (void)state;

    assert_string_equal(n->u.sel.type, "cpu");
    assert_int_equal(n->u.sel.nmatchers, 2);
    em_node_free(n);
}

/* ---- parser: errors, golden messages ------------------------------------------------ */

static void test_parse_error_messages(void **state)
{
    struct { const char *src, *want; } cases[] = {
        { "cpu{service \"api\"}",
          "parse error at column 12: expected '=', '!=', '=~' or '!~' after "
          "label name\n  cpu{service \"api\"}\n             ^" },
        { "cpu{service=}",
          "parse error at column 13: expected a string after '='\n"
          "  cpu{service=}\n              ^" },
        { "cpu{service=~42}",
          "parse error at column 14: expected a string after '=~'\n"
          "  cpu{service=~42}\n               ^" },
        { "cpu{service=\"api\" pod=\"x\"}",
          "parse error at column 18: expected ',' or '}' after matcher\n"
          "  cpu{service=\"api\" pod=\"x\"}\n                   ^" },
        { "cpu{service=\"api\"",
          "parse error at column 18: expected ',' or '}' after matcher\n"
          "  cpu{service=\"api\"\n                   ^" },
        { "cpu{\"a\"=\"x\"}",
          "parse error at column 5: expected a label name or '}' after '{'\n"
          "  cpu{\"a\"=\"x\"}\n      ^" },
        { "cpu{a=\"x\",,}",
          "parse error at column 11: expected a label name or '}' after ','\n"
          "  cpu{a=\"x\",,}\n            ^" },
        { "cpu{a:b=\"x\"}",
          "parse error at column 5: label name \"a:b\" may hold only letters, "
          "digits and '_'\n  cpu{a:b=\"x\"}\n      ^" },
        { "{}",
          "parse error at column 1: a selector needs a profile type or at "
          "least one matcher\n  {}\n  ^" },
        { "",
          "parse error at column 1: expected a selector (TYPE, "
          "TYPE{name=\"value\", ...} or {name=\"value\", ...}), found end of "
          "query\n  \n  ^" },
        { "  42",
          "parse error at column 3: expected a selector (TYPE, "
          "TYPE{name=\"value\", ...} or {name=\"value\", ...}), found number"
          "\n    42\n    ^" },
        { "merge(cpu)",
          "parse error at column 1: expected a selector: functions such as "
          "merge(...) are not supported yet\n  merge(cpu)\n  ^" },
        { "cpu[5m]",
          "parse error at column 4: range selectors such as [1h] are not "
          "supported yet: give the range with --from and --to\n"
          "  cpu[5m]\n     ^" },
        { "cpu offset 1h",
          "parse error at column 5: keyword 'offset' is not supported yet: "
          "give the range with --from and --to\n  cpu offset 1h\n      ^" },
        { "cpu @ 1732170000",
          "parse error at column 5: '@' is not supported yet: give the "
          "range with --from and --to\n  cpu @ 1732170000\n      ^" },
        { "cpu{__type__=\"x\"}",
          "parse error at column 5: the profile type is given twice (as a "
          "prefix or __type__=\"...\")\n  cpu{__type__=\"x\"}\n      ^" },
        { "cpu{a=\"x\"} extra",
          "parse error at column 11: expected the end of the query after "
          "the selector\n  cpu{a=\"x\"} extra\n            ^" },
        { "cpu cpu",
          "parse error at column 4: expected the end of the query after the "
          "selector\n  cpu cpu\n     ^" },
    };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(cases); i++)
        expect_error(cases[i].src, cases[i].want);
}

static void test_parse_error_multiline_and_tabs(void **state)
{
    (void)state;
    expect_error("cpu{\n  a \"x\"}",
                 "parse error at line 2, column 4: expected '=', '!=', '=~' "
                 "or '!~' after label name\n    a \"x\"}\n     ^");
    /* the caret line copies tabs so that it lines up in a terminal */
    expect_error("cpu{\tservice \"x\"}",
                 "parse error at column 13: expected '=', '!=', '=~' or '!~' "
                 "after label name\n  cpu{\tservice \"x\"}\n      \t       ^");
    /* columns count characters, not bytes */
    expect_error("{a=\"h\xc3\xa9llo\" b=\"x\"}",
                 "parse error at column 11: expected ',' or '}' after "
                 "matcher\n  {a=\"h\xc3\xa9llo\" b=\"x\"}\n            ^");
}

static void test_parse_error_long_line_window(void **state)
{
    char q[512], want[512];
    (void)state;

    /* the error sits at byte 205 of a 420-byte line: 36 bytes of context
    ** before it, 72 in all, "..." where the line goes on */
    snprintf(q, sizeof q, "{a=\"%0200d\" b=\"y\", c=\"%0200d\"}", 0, 0);
    snprintf(want, sizeof want, "parse error at column 206: expected ',' or "
             "'}' after matcher\n  ...%.72s...\n  %39s^", q + 205 - 36, "");
    expect_error(q, want);
}

static void test_parse_errors_from_lexer(void **state)
{
    (void)state;
    expect_error("cpu{a=\"x}", "parse error at column 7: unterminated string: "
                 "no closing \" on this line\n  cpu{a=\"x}\n        ^");
    expect_error("cpu{a=\"x\"}[", "parse error at column 11: range selectors "
                 "such as [1h] are not supported yet: give the range with "
                 "--from and --to\n  cpu{a=\"x\"}[\n            ^");
}

static void test_parse_limits(void **state)
{
    char *big = em_malloc(EM_QUERY_MAX + 2);
    char q[320];
    em_node *n = NULL;
    (void)state;

    assert_non_null(big);
    memset(big, 'a', EM_QUERY_MAX + 1);
    big[EM_QUERY_MAX + 1] = '\0';
    assert_int_equal(em_query_parse(big, &n), EMBER_ELIMIT);
    assert_null(n);
    em_free(big);
    q[0] = '{';                         /* a 256-byte label name */
    memset(q + 1, 'b', 256);
    snprintf(q + 257, sizeof q - 257, "=\"x\"}");
    assert_int_equal(em_query_parse(q, &n), EMBER_EINVAL);
    assert_non_null(strstr(em_errmsg(), "label name longer than 255"));
}

/* Every allocation of a parse fails in turn: ENOMEM, never a leak. */
static void test_parse_out_of_memory(void **state)
{
    const char *q = "process_cpu:samples:count:cpu:nanoseconds{a=\"1\", "
                    "b=~\"2\", c!=\"3\", d!~\"4\", e=\"5\", f=\"6\"}";
    int rc = EMBER_ENOMEM;
    (void)state;

    for (uint64_t i = 1; rc == EMBER_ENOMEM && i < 1000; i++) {
        em_node *n = NULL;
        em_alloc_fail_at(i);
        rc = em_query_parse(q, &n);
        em_alloc_fail_at(0);
        if (rc == EMBER_ENOMEM)
            assert_null(n);
        em_node_free(n);
    }
    assert_int_equal(rc, EMBER_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lex_kinds),
        cmocka_unit_test(test_lex_profile_type_is_one_ident),
        cmocka_unit_test(test_lex_positions),
        cmocka_unit_test(test_lex_string_escapes),
        cmocka_unit_test(test_lex_errors),
        cmocka_unit_test(test_lex_string_escape_limits),
        cmocka_unit_test(test_parse_type_only),
        cmocka_unit_test(test_parse_full_selector),
        cmocka_unit_test(test_parse_bare_matchers),
        cmocka_unit_test(test_parse_type_matcher),
        cmocka_unit_test(test_parse_keywords_as_label_names),
        cmocka_unit_test(test_parse_whitespace_and_comments),
        cmocka_unit_test(test_parse_error_messages),
        cmocka_unit_test(test_parse_error_multiline_and_tabs),
        cmocka_unit_test(test_parse_error_long_line_window),
        cmocka_unit_test(test_parse_errors_from_lexer),
        cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_parse_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
