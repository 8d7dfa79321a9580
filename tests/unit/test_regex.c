/*
** tests/unit/test_regex.c: the regex engine (engine/regex.c): a table of
** (pattern, subject, expected) over every syntax feature, error messages,
** prefix and literal analysis, a differential test against glibc's POSIX
** regexec on random patterns, hostile patterns that would never finish on a
** backtracking engine, allocation failures, and concurrent matching.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <locale.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* ---- helpers ------------------------------------------------------------ */

static em_regex *compile_ok(const char *pattern)
{
    em_regex *re = NULL;
    int rc = em_regex_compile(pattern, &re);

    if (rc != EMBER_OK)
        print_error("pattern \"%s\": rc %d: %s\n", pattern, rc, em_errmsg());
    assert_int_equal(rc, EMBER_OK);
    assert_non_null(re);
    return re;
}

static bool match_str(const char *pattern, const char *s)
{
    em_regex *re = compile_ok(pattern);
    bool m = em_regex_match(re, s, strlen(s));

    em_regex_free(re);
    return m;
}

/* A string of N copies of C, owned by the caller. */
static char *repeat_char(char c, size_t n)
{
    char *s = malloc(n + 1);

    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ---- the match table ---------------------------------------------------- */

typedef struct match_case {
    const char *pattern, *subject;
    bool expect;
} match_case;

static const match_case match_cases[] = {
    /* literals and full anchoring */
    {"abc", "abc", true}, {"abc", "abcd", false}, {"abc", "xabc", false},
    {"abc", "ab", false}, {"", "", true}, {"", "a", false},
    {"api-server", "api-server", true}, {"a b", "a b", true},
    /* the dot: one character, \n included (Prometheus's (?s)); one whole
    ** UTF-8 character */
    {"a.c", "abc", true}, {"a.c", "a\nc", true}, {"a.c", "ac", false},
    {"(?-s)a.c", "a\nc", false}, {"(?-s:.)", "\n", false},
    {"(?s-s).", "\n", false}, {"(?-s)a(?s:.)c", "a\nc", true},
    {".", "\xc3\xa9", true}, {"..", "\xc3\xa9", false},
    {"^.$", "\xc3\xa9", true}, {".", "\xe2\x82\xac", true},
    {".", "\xf0\x9f\x98\x80", true}, {"....", "\xf0\x9f\x98\x80", false},
    {".", "\xff", true}, {"..", "\xc3\x28", true}, {".", "\xc3\x28", false},
    {".", "\xc0\x80", false}, {"..", "\xc0\x80", true},       /* overlong */
    {"...", "\xed\xa0\x80", true},                  /* encoded surrogate */
    {"..", "\xf4\x90\x80\x80", false},              /* past U+10FFFF */
    {"a.", "a\xe2\x82", false}, {"a..", "a\xe2\x82", true}, /* cut */
    /* escapes */
    {"a\\.b", "a.b", true}, {"a\\.b", "axb", false}, {"\\\\", "\\", true},
    {"\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\.", "*+?()[]{}|^$.", true},
    {"\\t\\n\\r\\f\\v", "\t\n\r\f\v", true}, {"\\-\\/\\#\\\"", "-/#\"", true},
    /* Perl classes */
    {"\\d+", "0123456789", true}, {"\\d", "a", false}, {"\\D", "a", true},
    {"\\D", "5", false}, {"\\D", "\xc3\xa9", true}, {"\\w+", "az_AZ09", true},
    {"\\w", "-", false}, {"\\w", "\xc3\xa9", false}, {"\\W", "-", true},
    {"\\W", "\xc3\xa9", true}, {"\\s", "\t", true}, {"\\s", " ", true},
    {"\\s", "\n", true}, {"\\s", "\v", false}, {"\\S", "x", true},
    {"\\S", " ", false}, {"\\S", "\xff", true},
    /* bracket expressions */
    {"[abc]", "b", true}, {"[abc]", "d", false}, {"[a-z]+", "hello", true},
    {"[a-z]", "A", false}, {"[^a-z]", "A", true}, {"[^a-z]", "a", false},
    {"[^a]", "\xc3\xa9", true}, {"[^a]", "\n", true}, {"[^a]", "\xff", true},
    {"[^a][^a]", "\xc3\xa9", false}, {"[a-z]", "\xff", false},
    {"[]a]", "]", true}, {"[]a]", "a", true}, {"[^]a]", "]", false},
    {"[^]a]", "b", true}, {"[a-]", "-", true}, {"[-a]", "-", true},
    {"[a-]", "b", false}, {"[\\d]", "5", true},
    {"[\\da-f]+", "deadbeef01", true},
    {"[\\D]", "\xc3\xa9", true}, {"[\\D]", "7", false}, {"[\\s\\d]", " ", true},
    {"[\\W\\d]", "7", true}, {"[\\W\\d]", "x", false}, {"[^\\d]", "x", true},
    {"[^\\d]", "1", false}, {"[\\]]", "]", true}, {"[\\\\]", "\\", true},
    {"[\\n]", "\n", true}, {"[\\-]", "-", true}, {"[.]", ".", true},
    {"[.]", "a", false}, {"[*+?]", "+", true},
    {"[\xc3\xa9]", "\xc3\xa9", true}, {"[\xc3\xa9]", "e", false},
    {"[\xc3\xa0-\xc3\xbc]", "\xc3\xa9", true},
    {"[\xc3\xa0-\xc3\xbc]", "\xc3\xbd", false},
    {"[^\xc3\xa9]", "\xc3\xa9", false}, {"[^\xc3\xa9]", "e", true},
    {"[a-\xc3\xa9]", "z", true}, {"[a-\xc3\xa9]", "\xc3\xa8", true},
    {"[[:alpha:]]+", "abcXYZ", true}, {"[[:digit:]]", "x", false},
    {"[[:xdigit:][:space:]]+", "0aF \t", true}, {"[^[:punct:]]", ",", false},
    {"[[:word:]]", "_", true}, {"[[]", "[", true}, {"[a[]", "[", true},
    {"[[:foo]", "[", true}, {"[[:foo]", ":", true}, {"[\\d-z]", "-", true},
    {"[\\d-z]", "5", true}, {"[\\d-z]", "y", false},
    {"[[:digit:]-]", "-", true},
    {"[a-c-e]", "-", true}, {"[a-c-e]", "d", false},
    /* groups */
    {"(ab)+", "ababab", true}, {"(ab)+", "", false}, {"(ab)+", "aba", false},
    {"(?:ab)*", "", true}, {"(a|b)c", "bc", true}, {"(?P<x>a)b", "ab", true},
    {"(?<x_1>a)b", "ab", true}, {"()", "", true}, {"(|a)", "a", true},
    {"(|a)", "", true}, {"((a)(b(c)))", "abc", true},
    /* alternation */
    {"a|b|c", "b", true}, {"a|b|c", "d", false}, {"ab|cd", "cd", true},
    {"ab|cd", "abcd", false}, {"a|", "", true}, {"|a", "", true},
    {"api-.*|web", "web", true}, {"api-.*|web", "api-x", true},
    {"foo|foobar", "foobar", true}, {"foobar|foo", "foo", true},
    /* quantifiers, greedy and lazy */
    {"a*", "", true}, {"a*", "aaa", true}, {"a*", "aab", false},
    {"a+", "", false}, {"a+", "aaaa", true}, {"a?", "a", true},
    {"a?", "aa", false}, {"a{3}", "aaa", true}, {"a{3}", "aa", false},
    {"a{3}", "aaaa", false}, {"a{2,}", "aaaaa", true}, {"a{2,}", "a", false},
    {"a{2,4}", "aaaa", true}, {"a{2,4}", "aaaaa", false},
    {"a{2,4}", "a", false}, {"a{0}", "", true}, {"a{0}", "a", false},
    {"a{0,1}", "a", true}, {"a{0,}", "aaa", true}, {"(ab){2}", "abab", true},
    {"(ab){2}", "ab", false}, {"a*?", "aa", true}, {"a+?", "aa", true},
    {"a??", "", true}, {"a{2,3}?", "aaa", true}, {"a{2}?", "aa", true},
    {"\xc3\xa9+", "\xc3\xa9\xc3\xa9", true},
    {"\xc3\xa9{2}", "\xc3\xa9\xc3\xa9", true},
    {"\xc3\xa9+", "\xc3\xa9\xa9", false}, {"(a*)*", "aaa", true},
    {"(a*)+b", "aab", true}, {"(a|ab)(c|bcd)(d*)", "abcd", true},
    {"a{1000}", "a", false}, {"(?:a{0,2}b){3}", "aabbab", true},
    /* braces that are not counts are literals, as in RE2 */
    {"a{", "a{", true}, {"a{,2}", "a{,2}", true}, {"a{x}", "a{x}", true},
    {"a{1", "a{1", true}, {"a{1,2", "a{1,2", true}, {"}", "}", true},
    {"]", "]", true}, {"{", "{", true},
    /* case-insensitive */
    {"(?i)abc", "ABC", true}, {"(?i)abc", "aBc", true}, {"abc", "ABC", false},
    {"(?i)[a-c]+", "ABCabc", true}, {"(?i)[^a]", "A", false},
    {"(?i)[^a]", "b", true}, {"(?i)\xc3\xa9", "\xc3\x89", true},
    {"(?i)\\w", "K", true}, {"(?i)api-.*", "API-x", true}, {"(?i)1", "1", true},
    {"(?i)[[:upper:]]", "q", true}, {"(?i)", "", true},
    /* ^ and $: no-ops at the ends, assertions elsewhere */
    {"^abc$", "abc", true}, {"^abc", "abc", true}, {"abc$", "abc", true},
    {"^a|b$", "b", true}, {"^a|^b", "a", true}, {"a$|b$", "a", true},
    {"a^b", "ab", false}, {"a$b", "ab", false}, {"(^a)", "a", true},
    {"(a$)", "a", true}, {"(a$)b", "ab", false}, {"$^", "", true},
    {"^$", "", true}, {"^$", "a", false}, {"(?i)^A$", "a", true},
    {"^^a$$", "a", true}, {"x*^a", "a", true}, {"x*^a", "xa", false},
    /* the glob shapes that have a fast path */
    {"api-.*", "api-gateway", true}, {"api-.*", "api-", true},
    {"api-.*", "web-api", false}, {"api-.*", "api-\n", true},
    {"(?-s)api-.*", "api-\n", false}, {"(?-s).*-prod", "\n-prod", false},
    {".*-prod", "\n-prod", true}, {"a\n.*b", "a\nxb", true},
    {"(?-s)a\n.*b", "a\nxb", true}, {"(?-s:.*)(?s:.*)", "a\nb", true},
    {".*-prod", "eu-prod", true}, {".*-prod", "eu-prod-2", false},
    {".*foo.*", "xfooy", true}, {".*foo.*", "xfoy", false},
    {".*foo.*", "foo\n", true}, {"(?-s).*foo.*", "foo\n", false},
    {".*", "", true}, {".*", "a\nb", true}, {"(?-s).*", "a\nb", false},
    {".*", "\xff\xfe", true}, {"a.*b.*c", "aXbYc", true},
    {"a.*b.*c", "acb", false},
    {"a.*a", "a", false}, {"a.*a", "aa", true}, {".*ab.*ab", "ab", false},
    {".*ab.*ab", "abab", true}, {"(?:.*)ab", "xab", true}, {".*.*", "", true},
    {"a.*?b", "axxb", true}, {".*\\n", "a\n", true}, {".*\\n", "a\nb\n", true},
    {"(?-s).*\\n", "a\nb\n", false},
    {"ab.*cd.*", "abcd", true}, {"ab.*bc", "abc", false},
    /* \x, octal and other escapes of RE2 (issue 12) */
    {"\\x41", "A", true}, {"\\x41", "a", false}, {"\\x{263a}", "\xe2\x98\xba", true},
    {"\\x{41}\\x{0042}", "AB", true}, {"\\x{1F600}", "\xf0\x9f\x98\x80", true},
    {"[\\x41-\\x43]+", "ABC", true}, {"[\\x41-\\x43]", "D", false},
    {"[\\x{3b1}-\\x{3c9}]+", "\xce\xb1\xce\xb2\xcf\x89", true},
    {"\\x{e9}", "\xc3\xa9", true}, {"\\xe9", "\xe9", false}, {"\\101", "A", true},
    {"\\a\\ \\_", "\a _", true}, {"\\12", "\n", true},
    /* flags anywhere, scoped to their group; i s m U (issue 12) */
    {"(?i:abc)d", "ABCd", true}, {"(?i:abc)d", "ABCD", false},
    {"a(?i)b", "aB", true}, {"a(?i)b", "AB", false}, {"(?i)a(?-i)b", "Ab", true},
    {"(?i)a(?-i)b", "AB", false}, {"((?i)a)b", "Ab", true},
    {"((?i)a)b", "AB", false}, {"(?i)a|b", "B", true}, {"(?U)a+", "aaa", true},
    {"(?)a", "a", true}, {"(?i-i)a", "A", false}, {"(?ims)a.B", "A\nb", true},
    {"a$\\nb", "a\nb", false}, {"(?m)a$\\n^b", "a\nb", true},
    {"(?m:a$)\\n(?m:^b)", "a\nb", true}, {"(?m)a$", "a", true},
    {"(?m)^a", "a", true}, {"(?m).*^b", "a\nb", true}, {"(?m).*^b", "ab", false},
    {"a(?i)*", "aaa", true}, {"a(?i)*", "", true}, {"a*(?i)*", "aa", true},
    /* case folding is Unicode's simple folding, as in Go */
    {"(?i)\xcf\x83", "\xce\xa3", true}, {"(?i)\xcf\x83", "\xcf\x82", true},
    {"(?i)k", "\xe2\x84\xaa", true}, {"(?i)s", "\xc5\xbf", true},
    {"(?i)\xc3\xa9", "\xc3\x89", true}, {"(?i)[a-z]+", "\xc5\xbf\xe2\x84\xaa", true},
    {"(?i)\\W", "k", false}, {"(?i)\\W", "\xe2\x84\xaa", false}, {"\\W", "\xe2\x84\xaa", true},
    {"(?i)[^k]", "K", false}, {"(?i)[^k]", "\xe2\x84\xaa", false},
    {"(?i)\\p{Lu}", "\xc3\xa9", true}, {"\\p{Lu}", "\xc3\xa9", false},
    /* Unicode classes \pL \p{Greek} \PL \P{Greek} \p{^Greek} */
    {"\\pL", "\xc3\xa9", true}, {"\\pL", "1", false}, {"\\PL", "1", true},
    {"\\PL", "\xc3\xa9", false}, {"\\p{Greek}+", "\xce\xb1\xce\xb2\xce\xb3", true},
    {"\\p{Greek}", "a", false}, {"\\P{Greek}", "a", true},
    {"\\p{^Greek}", "\xce\xb1", false}, {"\\P{^Greek}", "\xce\xb1", true},
    {"[\\p{Greek}a]+", "\xce\xb1" "a", true}, {"[^\\pL]", "\xc3\xa9", false},
    {"\\p{Lu}", "\xc3\x89", true}, {"\\pN", "\xd9\xa0", true}, {"\\p{Han}", "\xe4\xb8\xad", true},
    {"[[:^alpha:]]", "1", true}, {"[[:^alpha:]]", "a", false},
    /* a stray byte is matched as Go matches U+FFFD */
    {"\\x{fffd}", "\xff", true}, {"\xef\xbf\xbd", "\xff", true},
    {"[^\\x{fffd}]", "\xff", false}, {"\\pS", "\xff", true}, {"\\pL", "\xff", false},
    {"[\\x{80}-\\x{10ffff}]", "\xff", true}, {"\\p{Any}", "\xff", true},
    /* \b \B \A \z: ASCII word boundaries, text start and end */
    {"a\\b", "a", true}, {"\\ba\\b", "a", true}, {"a\\bb", "ab", false},
    {"a\\b-", "a-", true}, {"a\\B-", "a-", false}, {"a\\Bb", "ab", true},
    {"\xc3\xa9\\b", "\xc3\xa9", false}, {"\xc3\xa9\\B", "\xc3\xa9", true},
    {".*\\bfoo\\b.*", "a foo b", true}, {".*\\bfoo\\b.*", "afoob", false},
    {"\\Aab\\z", "ab", true}, {"a\\Ab", "ab", false}, {"a\\zb", "ab", false},
    /* \Q...\E quotes; counts with a leading zero are literals, as in Go */
    {"\\Qa.b*\\E", "a.b*", true}, {"\\Qa.b*\\E", "axbb", false},
    {"\\Qab\\E+", "abbb", true}, {"(\\Q)\\E)", ")", true}, {"\\Q\\E", "", true},
    {"a{01}", "a{01}", true}, {"a{1,02}", "a{1,02}", true},
};

static void test_match_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(match_cases); i++) {
        const match_case *c = &match_cases[i];
        bool got = match_str(c->pattern, c->subject);
        if (got != c->expect)
            print_error("case %zu: \"%s\" on \"%s\": got %d\n", i,
                        c->pattern, c->subject, got);
        assert_int_equal(got, c->expect);
    }
}

/* Subjects are byte strings: NUL is an ordinary byte. */
static void test_match_nul_bytes(void **state)
{
    em_regex *re = compile_ok("a.b");
    em_regex *star = compile_ok("a.*");

    (void)state;
    assert_true(em_regex_match(re, "a\0b", 3));
    assert_false(em_regex_match(re, "a\0b", 2));
    assert_true(em_regex_match(star, "a\0\0", 3));
    assert_false(em_regex_match(star, NULL, 0));
    em_regex_free(re);
    em_regex_free(star);
    re = compile_ok("");
    assert_true(em_regex_match(re, NULL, 0));
    em_regex_free(re);
    re = compile_ok(".*");
    assert_true(em_regex_match(re, NULL, 0));
    em_regex_free(re);
    re = compile_ok("x*");
    assert_true(em_regex_match(re, NULL, 0));
    em_regex_free(re);
}

/* ---- errors ------------------------------------------------------------- */

typedef struct error_case {
    const char *pattern;
    int rc;
    const char *msg;            /* the whole message, or a prefix of it */
} error_case;

static const error_case error_cases[] = {
    {"a(b", EMBER_EINVAL, "regex \"a(b\": column 4: expected ')'"},
    {"a)b", EMBER_EINVAL, "regex \"a)b\": column 2: unmatched ')'"},
    {")", EMBER_EINVAL, "regex \")\": column 1: unmatched ')'"},
    {"*a", EMBER_EINVAL,
     "regex \"*a\": column 1: expected an expression before '*' to repeat"},
    {"a|+", EMBER_EINVAL, "regex \"a|+\": column 3: expected an expression"},
    {"(?", EMBER_EINVAL, "regex \"(?\": column 1: expected ':' or a group"},
    {"{2}", EMBER_EINVAL, "regex \"{2}\": column 1: expected an expression"},
    {"a**", EMBER_EINVAL, "regex \"a**\": column 3: expected no second "
     "repetition operator"},
    {"a{2}{3}", EMBER_EINVAL, "regex \"a{2}{3}\": column 5: expected no"},
    {"a*??", EMBER_EINVAL, "regex \"a*??\": column 4: expected no second"},
    {"[abc", EMBER_EINVAL,
     "regex \"[abc\": column 5: expected ']' to close the '[' at column 1"},
    {"[]", EMBER_EINVAL, "regex \"[]\": column 3: expected ']'"},
    {"[^", EMBER_EINVAL, "regex \"[^\": column 3: expected ']'"},
    {"[z-a]", EMBER_EINVAL, "regex \"[z-a]\": column 2: expected a range"},
    {"[a-\\d]", EMBER_EINVAL, "regex \"[a-\\d]\": column 2: expected a range"},
    {"\\q", EMBER_EINVAL, "regex \"\\q\": column 1: unknown escape '\\q'"},
    {"\\1", EMBER_EINVAL, "regex \"\\1\": column 1: unknown escape '\\1'"},
    {"[\\b]", EMBER_EINVAL, "regex \"[\\b]\": column 2: unknown escape '\\b'"},
    {"\\8", EMBER_EINVAL, "regex \"\\8\": column 1: unknown escape '\\8'"},
    {"\\C", EMBER_EINVAL, "regex \"\\C\": column 1: unknown escape '\\C'"},
    {"a\\x{110000}", EMBER_EINVAL, "regex \"a\\x{110000}\": column 2: expected "
     "\\x and two hex digits, or \\x{...}"},
    {"\\x{}", EMBER_EINVAL, "regex \"\\x{}\": column 1: expected \\x"},
    {"\\x4", EMBER_EINVAL, "regex \"\\x4\": column 1: expected \\x"},
    {"\\p{Foo}", EMBER_EINVAL, "regex \"\\p{Foo}\": column 1: unknown Unicode "
     "class \"Foo\""},
    {"\\p{greek}", EMBER_EINVAL, "regex \"\\p{greek}\": column 1: unknown"},
    {"\\pX", EMBER_EINVAL, "regex \"\\pX\": column 1: unknown Unicode class"},
    {"\\p", EMBER_EINVAL, "regex \"\\p\": column 1: unknown Unicode class"},
    {"\\p{^}", EMBER_EINVAL, "regex \"\\p{^}\": column 1: unknown Unicode"},
    {"a\\p{Greek", EMBER_EINVAL, "regex \"a\\p{Greek\": column 2: expected '}'"},
    {"[a-\\pL]", EMBER_EINVAL, "regex \"[a-\\pL]\": column 2: expected a range"},
    {"[[:^foo:]]", EMBER_EINVAL, "regex \"[[:^foo:]]\": column 2: unknown class"},
    {"ab\\Qcd", EMBER_EINVAL, "regex \"ab\\Qcd\": column 7: expected \\E to "
     "end \\Q"},
    {"(?-)", EMBER_EINVAL, "regex \"(?-)\": column 1: expected ':' or a group"},
    {"(?i-)", EMBER_EINVAL, "regex \"(?i-)\": column 1: expected ':'"},
    {"(?--i)", EMBER_EINVAL, "regex \"(?--i)\": column 1: expected ':'"},
    {"(?i", EMBER_EINVAL, "regex \"(?i\": column 1: expected ':'"},
    {"a)(b", EMBER_EINVAL, "regex \"a)(b\": column 2: unmatched ')'"},
    {"(?i)*", EMBER_EINVAL, "regex \"(?i)*\": column 5: expected an expression"},
    {"[\\q]", EMBER_EINVAL, "regex \"[\\q]\": column 2: unknown escape"},
    {"a\\", EMBER_EINVAL,
     "regex \"a\\\": column 2: expected a character after '\\'"},
    {"a{1001}", EMBER_ELIMIT,
     "regex \"a{1001}\": column 2: repetition count 1001 exceeds 1000"},
    {"a{1,99999999999}", EMBER_ELIMIT, "regex \"a{1,99999999999}\": column 2:"
     " repetition count"},
    {"a{3,2}", EMBER_EINVAL, "regex \"a{3,2}\": column 2: expected {min,max} "
     "with min <= max, got {3,2}"},
    {"(?x)", EMBER_EINVAL, "regex \"(?x)\": column 1: expected ':' or a group"
     " name after '(?'"},
    {"(?=a)", EMBER_EINVAL, "regex \"(?=a)\": column 1: expected ':'"},
    {"(?P<>a)", EMBER_EINVAL, "regex \"(?P<>a)\": column 1: expected a group "
     "name"},
    {"(?P<a", EMBER_EINVAL, "regex \"(?P<a\": column 1: expected a group"},
    {"[[:foo:]]", EMBER_EINVAL, "regex \"[[:foo:]]\": column 2: unknown class "
     "[:foo:]"},
    {"\xc3\xa9(", EMBER_EINVAL, "regex \"\xc3\xa9(\": column 3: expected ')'"},
    {"(a{1000}){1000}", EMBER_ELIMIT, "regex \"(a{1000}){1000}\": compiled "
     "program exceeds 20000 instructions"},
    {"((a{100}){100}){100}", EMBER_ELIMIT, "regex \"((a{100}){100}){100}\": "
     "compiled program exceeds"},
};

static void test_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(error_cases); i++) {
        const error_case *c = &error_cases[i];
        em_regex *re = (em_regex *)&re;         /* must be reset to NULL */
        int rc = em_regex_compile(c->pattern, &re);
        if (rc != c->rc || strncmp(em_errmsg(), c->msg, strlen(c->msg)) != 0)
            print_error("case %zu \"%s\": rc %d, message \"%s\"\n", i,
                        c->pattern, rc, em_errmsg());
        assert_int_equal(rc, c->rc);
        assert_null(re);
        assert_int_equal(strncmp(em_errmsg(), c->msg, strlen(c->msg)), 0);
    }
}

static void test_error_limits(void **state)
{
    char *p = repeat_char('a', 4097);
    em_regex *re;

    (void)state;
    assert_int_equal(em_regex_compile(p, &re), EMBER_ELIMIT);
    assert_non_null(strstr(em_errmsg(), "longer than 4096 bytes"));
    p[4096] = '\0';             /* exactly the limit is fine */
    assert_int_equal(em_regex_compile(p, &re), EMBER_OK);
    assert_true(em_regex_is_literal(re));
    em_regex_free(re);
    free(p);

    p = malloc(2 * 101 + 2);    /* 101 nested groups: one too many */
    assert_non_null(p);
    memset(p, '(', 101);
    memset(p + 101, ')', 101);
    p[202] = '\0';
    assert_int_equal(em_regex_compile(p, &re), EMBER_ELIMIT);
    assert_non_null(strstr(em_errmsg(), "nested deeper than 100"));
    free(p);
    p = malloc(2 * 100 + 2);    /* 100 is fine */
    assert_non_null(p);
    memset(p, '(', 100);
    memset(p + 100, ')', 100);
    p[200] = '\0';
    assert_int_equal(em_regex_compile(p, &re), EMBER_OK);
    assert_true(em_regex_match(re, "", 0));
    em_regex_free(re);
    free(p);

    /* Unicode tables are large: their ranges are bounded, 65536 in all */
    p = malloc(3 * 110 + 1);    /* \PL holds about 650 ranges */
    assert_non_null(p);
    for (int i = 0; i < 110; i++)
        memcpy(p + 3 * i, "\\PL", 3);
    p[3 * 110] = '\0';
    assert_int_equal(em_regex_compile(p, &re), EMBER_ELIMIT);
    assert_non_null(strstr(em_errmsg(), "character classes exceed 65536 "
                           "code-point ranges"));
    p[3 * 50] = '\0';
    assert_int_equal(em_regex_compile(p, &re), EMBER_OK);
    em_regex_free(re);
    free(p);

    assert_int_equal(em_regex_compile(NULL, &re), EMBER_EINVAL);
    em_regex_free(NULL);
    /* a long pattern is cut in the message */
    p = repeat_char('a', 200);
    p[199] = '(';
    assert_int_equal(em_regex_compile(p, &re), EMBER_EINVAL);
    assert_non_null(strstr(em_errmsg(), "aaaa...\": column 201: expected ')'"));
    free(p);
}

/* ---- prefix and literal analysis ---------------------------------------- */

typedef struct prefix_case {
    const char *pattern, *prefix;
    bool literal;
} prefix_case;

static const prefix_case prefix_cases[] = {
    {"abc", "abc", true}, {"a\\.b", "a.b", true}, {"api-.*", "api-", false},
    {"abc|abd", "ab", false}, {"abc|abc", "abc", true}, {"(?i)abc", "", false},
    {"(?i)123abc", "123", false}, {"[a]b", "ab", true}, {"a{3}", "aaa", true},
    {"a{2,3}", "aa", false}, {"a+", "a", false}, {"a*", "", false},
    {".*", "", false}, {"^abc$", "abc", true}, {"", "", true},
    {"(ab)+c", "ab", false}, {"foo(bar|baz)", "fooba", false},
    {"\xc3\xa9", "\xc3\xa9", true}, {"a$", "a", true}, {"(a$)", "a", false},
    {"a|b", "", false}, {"x(?:)y", "xy", true}, {"\\d", "", false},
    {"a\\d", "a", false}, {"(?:abc){2}", "abcabc", true}, {"a^b", "a", false},
    {"ab|a^", "ab", true}, {"job=\"x\"", "job=\"x\"", true},
    {"[.][.]", "..", true}, {"\\t", "\t", true}, {"a?", "", false},
    {"ab?", "a", false}, {"(?:ab|ac)d", "a", false}, {"a|a", "a", true},
    /* the syntax of issue 12 */
    {"\\x41b", "Ab", true}, {"\\101\\x{42}", "AB", true}, {"(?i)k", "", false},
    {"a(?i)k", "a", false}, {"(?i:a)b", "", false}, {"(?i)1(?-i)k", "1k", true},
    {"\\x{e9}", "", false}, {"\\Qa.b\\E", "a.b", true}, {"\\Aab\\z", "ab", true},
    {"ab\\b", "ab", false}, {"(?m)^ab", "ab", true}, {"a(?m)^b", "a", false},
    {"\\pLx", "", false}, {"(?s:.)", "", false},
};

static void test_prefix_literal(void **state)
{
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(prefix_cases); i++) {
        const prefix_case *c = &prefix_cases[i];
        em_regex *re = compile_ok(c->pattern);
        size_t n = 99;
        const char *p = em_regex_prefix(re, &n);
        if (n != strlen(c->prefix) || memcmp(p, c->prefix, n) != 0 ||
            em_regex_is_literal(re) != c->literal)
            print_error("case %zu \"%s\": prefix \"%.*s\" literal %d\n", i,
                        c->pattern, (int)n, p, em_regex_is_literal(re));
        assert_int_equal(n, strlen(c->prefix));
        assert_memory_equal(p, c->prefix, n);
        assert_int_equal(p[n], '\0');
        assert_int_equal(em_regex_is_literal(re), c->literal);
        if (c->literal)
            assert_true(em_regex_match(re, p, n));
        em_regex_free(re);
    }
}

/* Regexes that match nothing can keep the prefix walk going (x*^ loops on
** x): it must stop at its bound, and the prefix stays a true one. */
static void test_prefix_walk_bound(void **state)
{
    static const char *const pats[] = {"d{*^", "aa*^", "(?:ab)+^c",
                                       "x(?:y*^)"};
    static const char first[] = "daax";
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(pats); i++) {
        em_regex *re = compile_ok(pats[i]);
        size_t n;
        const char *p = em_regex_prefix(re, &n);
        assert_true(n >= 1 && n < 64);
        assert_int_equal(p[0], first[i]);
        assert_false(em_regex_is_literal(re));
        assert_false(em_regex_match(re, p, n));
        assert_false(em_regex_match(re, p, 1));
        em_regex_free(re);
    }
}

/* ---- differential test against POSIX ERE -------------------------------- */

/* A small grammar both syntaxes read the same way: literals a b c, '.',
** simple brackets, groups, alternation, * + ? {n} {n,} {n,m}, and .* (for
** the glob fast path). No empty groups or branches, no nested quantifiers,
** no \d (POSIX has none), no '\n' in subjects ('.' differs on it). */
typedef struct gen {
    uint64_t seed;
    char buf[512];
    size_t len;
} gen;

static unsigned gen_rand(gen *g, unsigned n)
{
    g->seed = g->seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(g->seed >> 33) % n;
}

static void gen_put(gen *g, const char *s)
{
    size_t n = strlen(s);

    if (g->len + n < sizeof g->buf)
        memcpy(g->buf + g->len, s, n), g->len += n;
    g->buf[g->len] = '\0';
}

static void gen_alt(gen *g, int depth);

static void gen_atom(gen *g, int depth)
{
    static const char *const atoms[] = {
        "a", "b", "c", "a", "b", ".", "[ab]", "[^a]", "[a-c]", "[^bc]",
        "\\.", "[.b]", "ab", "ca",
    };
    unsigned k = gen_rand(g, depth > 0 ? 16 : 14);

    if (k < 14) {
        gen_put(g, atoms[k]);
        return;
    }
    gen_put(g, "(");
    gen_alt(g, depth - 1);
    gen_put(g, ")");
}

static void gen_item(gen *g, int depth)
{
    static const char *const quants[] = {
        "*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}", "{0}", "{3,}",
    };
    unsigned k = gen_rand(g, 20);

    if (k == 0) {
        gen_put(g, ".*");
        return;
    }
    gen_atom(g, depth);
    if (k < 8)
        gen_put(g, quants[gen_rand(g, EM_ARRAY_LEN(quants))]);
}

static void gen_alt(gen *g, int depth)
{
    unsigned branches = 1 + (gen_rand(g, 4) == 0) + (gen_rand(g, 8) == 0);

    for (unsigned b = 0; b < branches; b++) {
        unsigned items = 1 + gen_rand(g, 4);
        if (b > 0)
            gen_put(g, "|");
        for (unsigned i = 0; i < items; i++)
            gen_item(g, depth);
    }
}

static bool posix_match(const char *pattern, const char *s)
{
    char wrapped[600];
    regex_t rx;
    int rc;

    snprintf(wrapped, sizeof wrapped, "^(%s)$", pattern);
    rc = regcomp(&rx, wrapped, REG_EXTENDED | REG_NOSUB);
    if (rc != 0)
        print_error("regcomp failed on \"%s\"\n", wrapped);
    assert_int_equal(rc, 0);
    rc = regexec(&rx, s, 0, NULL, 0);
    regfree(&rx);
    return rc == 0;
}

/* Checks one subject against POSIX and the prefix and literal promises. */
static void diff_one(const em_regex *re, const char *pattern, const char *s)
{
    size_t n, len = strlen(s);
    const char *pre = em_regex_prefix(re, &n);
    bool got = em_regex_match(re, s, len), want = posix_match(pattern, s);

    if (got != want)
        print_error("\"%s\" on \"%s\": ember %d, posix %d\n", pattern, s,
                    got, want);
    assert_int_equal(got, want);
    if (got)
        assert_true(len >= n && memcmp(s, pre, n) == 0);
    if (got && em_regex_is_literal(re))
        assert_true(len == n);
}

static void test_differential_posix(void **state)
{
    gen g = {.seed = 0x5eed};
    char subject[16];

    (void)state;
    for (int i = 0; i < 4000; i++) {
        em_regex *re;
        g.len = 0;
        gen_alt(&g, 3);
        re = compile_ok(g.buf);
        for (int j = 0; j < 12; j++) {
            unsigned len = gen_rand(&g, 9);
            for (unsigned k = 0; k < len; k++)
                subject[k] = "abc.d"[gen_rand(&g, j < 6 ? 3 : 5)];
            subject[len] = '\0';
            diff_one(re, g.buf, subject);
        }
        if (em_regex_is_literal(re))
            diff_one(re, g.buf, em_regex_prefix(re, NULL));
        em_regex_free(re);
    }
}

/* UTF-8: against glibc in the C.UTF-8 locale, where '.' and negated classes
** also consume whole characters. Valid UTF-8 subjects only (glibc and Ember
** differ on invalid bytes), no non-ASCII ranges (glibc rejects them) and no
** \w \W (glibc's follow the locale: there é is a word character). */
static void test_differential_utf8(void **state)
{
    static const char *const atoms[] = {
        "a", "\xc3\xa9", "\xe2\x82\xac", ".", "[^a]", "[a\xc3\xa9]",
        "[^\xc3\xa9]", "(a|\xc3\xa9)", "\xf0\x9f\x98\x80", "[^\xe2\x82\xac]",
    };
    static const char *const quants[] = {"", "", "*", "+", "?", "{2}"};
    static const char *const chars[] = {
        "a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "b",
    };
    gen g = {.seed = 0xc0ffee};

    (void)state;
    if (setlocale(LC_ALL, "C.UTF-8") == NULL)
        skip();
    for (int i = 0; i < 1500; i++) {
        char pat[256] = "", sub[64];
        em_regex *re;
        for (unsigned k = 0, n = 1 + gen_rand(&g, 4); k < n; k++) {
            strcat(pat, atoms[gen_rand(&g, EM_ARRAY_LEN(atoms))]);
            strcat(pat, quants[gen_rand(&g, EM_ARRAY_LEN(quants))]);
        }
        re = compile_ok(pat);
        for (int j = 0; j < 10; j++) {
            sub[0] = '\0';
            for (unsigned k = 0, n = gen_rand(&g, 5); k < n; k++)
                strcat(sub, chars[gen_rand(&g, EM_ARRAY_LEN(chars))]);
            diff_one(re, pat, sub);
        }
        em_regex_free(re);
    }
    setlocale(LC_ALL, "C");
}

/* ---- hostile patterns --------------------------------------------------- */

typedef struct hostile_case {
    const char *pattern;
    char fill;                  /* the subject is LEN copies of fill */
    size_t len;
    bool expect;
} hostile_case;

static const hostile_case hostile_cases[] = {
    {"(a*)*b", 'a', 100000, false},
    {"(a|a)*b", 'a', 100000, false},
    {"(a|aa)*b", 'a', 100000, false},
    {"(x+x+)+y", 'x', 50000, false},
    {"(a?){30}a{30}", 'a', 30, true},
    {"(a?){30}a{30}", 'a', 60, true},
    {"(a?){30}a{30}", 'a', 10000, false},
    {"(.*)*(.*)*(.*)*z", 'q', 100000, false},
    {"(.*a){20}", 'a', 100000, true},
    {"(a*)*(b*)*$", 'a', 100000, true},
    {"([^b]|a)*c", 'a', 100000, false},
    {"(?:(?:a{1,10}){1,10}){1,10}b", 'a', 20000, false},
    {"(a{1,30}){1,30}", 'a', 10000, false},
    {"(a{1,30}){1,30}", 'a', 900, true},
    {"(?i)(A|a)*b", 'a', 100000, false},
    {"(?i)(?:\\pL|[\\p{Greek}k]|\\b)*1", 'a', 100000, false},
    {"(?m)(?:^|$|\\B|.)*\\PL", 'a', 100000, false},
    {"(\\w+\\s?)*$x", 'w', 100000, false},
    /* long prefix walks with many agreeing threads (compile time) */
    {"(?:a{1,99}){1,99}a{200}", 'a', 300, true},
    {"((a{8}a`){70,}){26,}", 'a', 3000, false},
};

static void test_hostile(void **state)
{
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(hostile_cases); i++) {
        const hostile_case *c = &hostile_cases[i];
        char *s = repeat_char(c->fill, c->len);
        em_regex *re = compile_ok(c->pattern);
        assert_int_equal(em_regex_match(re, s, c->len), c->expect);
        em_regex_free(re);
        free(s);
    }
}

/* A program close to the 20000-instruction limit still matches in time
** proportional to its size times the input. */
static void test_hostile_large_program(void **state)
{
    em_regex *re = compile_ok("(a{1,100}){1,100}");   /* 19999 + MATCH */
    char *s = repeat_char('a', 3001);

    (void)state;
    assert_true(em_regex_match(re, s, 3000));
    s[3000] = 'b';
    assert_false(em_regex_match(re, s, 3001));
    assert_false(em_regex_match(re, s, 0));
    em_regex_free(re);
    free(s);
}

/* ---- memory ------------------------------------------------------------- */

static const char *const alloc_patterns[] = {
    "abc", "api-.*", "a.*b.*c", "(?i)[a-z]+\\d{2,4}", "[^\xc3\xa9\\W]|x",
    "(a{1,30}){1,30}", "((ab|cd)*|[[:alpha:]]+){3}", "", "a(b",
    "[\xc3\xa0-\xc3\xbc\xe2\x82\xac]+", "(a{1000}){1000}",
    "(?i)\\p{Greek}+[^\\PL\\d]\\x{263a}", "(?i:[[:^alpha:]k-z])\\b\\Qx\\E",
    "(?-s).*(?i)\\W", "\\P{^Greek}\\p{Foo}",
};

/* Fails the first, second, ... allocation of each compile until it goes
** through: each failure is ENOMEM (or the pattern's own error) and leaks
** nothing (the ASan build's leak checker proves that part). */
static void test_alloc_failures(void **state)
{
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(alloc_patterns); i++) {
        em_regex *ref = NULL;
        int want = em_regex_compile(alloc_patterns[i], &ref);
        for (uint64_t n = 1;; n++) {
            em_regex *re = (em_regex *)&re;
            int rc;
            em_alloc_fail_at(n);
            rc = em_regex_compile(alloc_patterns[i], &re);
            em_alloc_fail_at(0);
            if (rc == want) {
                if (rc == EMBER_OK)
                    assert_int_equal(em_regex_match(re, "abc", 3),
                                     em_regex_match(ref, "abc", 3));
                em_regex_free(re);
                break;
            }
            assert_int_equal(rc, EMBER_ENOMEM);
            assert_null(re);
            assert_non_null(strstr(em_errmsg(), "out of memory"));
            assert_true(n < 1000);
        }
        em_regex_free(ref);
    }
}

/* Matching allocates nothing, for small (stack) and large programs. */
static void test_match_allocates_nothing(void **state)
{
    static const char *const pats[] = {"abc", "api-.*", "(a|b)*c[0-9]",
                                       "(a{1,30}){1,30}"};
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(pats); i++) {
        em_regex *re = compile_ok(pats[i]);
        uint64_t before = em_alloc_calls();
        for (int k = 0; k < 10; k++)
            (void)em_regex_match(re, "aaaaaaaaaaaaaaaaaaaaaaaaab", 26);
        assert_int_equal(em_alloc_calls(), before);
        em_regex_free(re);
    }
}

/* ---- threads ------------------------------------------------------------ */

typedef struct thread_arg {
    const em_regex *re;
    const char *s;
    size_t len;
    int bad;                    /* wrong answers seen */
} thread_arg;

static void *match_thread(void *p)
{
    thread_arg *a = p;

    for (int i = 0; i < 40; i++) {
        if (!em_regex_match(a->re, a->s, a->len))
            a->bad++;
        if (em_regex_match(a->re, a->s, a->len + 1))
            a->bad++;
    }
    return NULL;
}

/* Several threads share one const regex whose program needs heap scratch. */
static void test_threads(void **state)
{
    em_regex *re = compile_ok("(a{1,20}){1,30}b");
    char *s = repeat_char('a', 301);
    pthread_t th[6];
    thread_arg args[6];

    (void)state;
    s[300] = 'b';               /* "a"*300 "b" matches; "a"*300 "ba" not */
    s[301] = 'a';
    for (int t = 0; t < 6; t++) {
        args[t] = (thread_arg){re, s, 301, 0};
        assert_int_equal(pthread_create(&th[t], NULL, match_thread, &args[t]),
                         0);
    }
    for (int t = 0; t < 6; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(args[t].bad, 0);
    }
    em_regex_free(re);
    free(s);
}

/* ---- differential test against Go's regexp ----------------------------- */

/* Decodes the hex digits at HEX (up to a space or the end) into OUT, NUL-
** terminated; returns the byte count, or -1. */
static long unhex(const char *hex, char *out, size_t cap)
{
    size_t n = 0;

    for (; hex[0] != '\0' && hex[0] != ' ' && hex[0] != '\n'; hex += 2) {
        unsigned v;
        if (n + 1 >= cap || sscanf(hex, "%2x", &v) != 1 || hex[1] == '\0')
            return -1;
        out[n++] = (char)v;
    }
    out[n] = '\0';
    return (long)n;
}

/* Runs Ember on the cases tests/go/regexdiff judged (see its header) and
** compares every verdict: whether each pattern compiles, and for those that
** do, whether each subject matches (and the prefix and literal promises).
** Prints each difference and a summary; returns the number of differences,
** or -1 when the file cannot be read. */
static long go_cases(const char *path)
{
    FILE *f = fopen(path, "r");
    static char line[1 << 16], pat[1 << 15], sub[1 << 15];
    long diffs = 0, npat = 0, nerr = 0, nsub = 0, nmatch = 0, slen;
    em_regex *re = NULL;
    bool pat_ok = false;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        const char *v = strrchr(line, ' ');
        if (line[0] == 'p' && v != NULL && unhex(line + 2, pat, sizeof pat) >= 0) {
            em_regex_free(re);
            re = NULL;
            pat_ok = strncmp(v + 1, "ok", 2) == 0;
            npat++;
            nerr += !pat_ok;
            if ((em_regex_compile(pat, &re) == EMBER_OK) != pat_ok) {
                printf("DIFF pattern \"%s\": go %s, ember %s\n", pat,
                       pat_ok ? "compiles it" : "rejects it",
                       re != NULL ? "compiles it" : em_errmsg());
                diffs++;
            }
        } else if (line[0] == 's' && v != NULL &&
                   (slen = unhex(line + 2, sub, sizeof sub)) >= 0) {
            bool want = v[1] == '1', got;
            size_t n;
            const char *pre;
            if (re == NULL)
                continue;       /* the pattern already differed */
            nsub++;
            nmatch += want;
            got = em_regex_match(re, sub, (size_t)slen);
            pre = em_regex_prefix(re, &n);
            if (got != want || (got && ((size_t)slen < n ||
                                        memcmp(sub, pre, n) != 0 ||
                                        (em_regex_is_literal(re) &&
                                         (size_t)slen != n)))) {
                printf("DIFF pattern \"%s\" subject \"%s\" (%ld bytes): "
                       "go %d, ember %d\n", pat, sub, slen, want, got);
                diffs++;
            }
        } else {
            printf("bad line: %s", line);
            diffs++;
        }
    }
    em_regex_free(re);
    fclose(f);
    printf("go-cases: %ld patterns (%ld rejected by go), %ld subjects "
           "(%ld matched by go), %ld differences\n", npat, nerr, nsub, nmatch,
           diffs);
    return diffs;
}

/* test_regex --go-cases FILE: the differential test (tests/e2e/regex_go.sh);
** without arguments, the unit tests. */
int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--go-cases") == 0) {
        long d = go_cases(argv[2]);
        if (d < 0)
            fprintf(stderr, "test_regex: cannot read %s\n", argv[2]);
        return d == 0 ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_table),
        cmocka_unit_test(test_match_nul_bytes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_limits),
        cmocka_unit_test(test_prefix_literal),
        cmocka_unit_test(test_prefix_walk_bound),
        cmocka_unit_test(test_differential_posix),
        cmocka_unit_test(test_differential_utf8),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_hostile_large_program),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_match_allocates_nothing),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
