/*
** tests/unit/test_utf8.c: em_utf8_decode and em_utf8_count (engine.h), the
** one UTF-8 decoder: every valid form of one to four bytes, each class of
** invalid input (overlong forms, surrogates, values past U+10FFFF,
** truncation at each position, stray continuation bytes, bytes that never
** appear), bounds that are never read past, and every scalar value
** encoded and decoded back.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "engine/engine.h"

/* The shortest form of CP into B; returns its length. */
static size_t encode(uint32_t cp, uint8_t b[4])
{
    if (cp < 0x80) {
        b[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (uint8_t)(0xc0 | cp >> 6);
        b[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (uint8_t)(0xe0 | cp >> 12);
        b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        b[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    b[0] = (uint8_t)(0xf0 | cp >> 18);
    b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
    b[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes the N bytes of S copied to the end of a heap block, so that ASan
** sees any read past them; checks the width and code point. */
static void expect(const char *s, size_t n, unsigned width, uint32_t cp)
{
    uint8_t *b = malloc(n);
    uint32_t got = 0x12345678;

    assert_non_null(b);
    memcpy(b, s, n);
    assert_int_equal(em_utf8_decode(b, n, &got), width);
    assert_int_equal(got, cp);
    free(b);
}

/* S (N bytes) starts no character: one byte, U+FFFD. */
static void bad(const char *s, size_t n)
{
    expect(s, n, 1, EM_UTF8_BAD);
}

static void test_valid_forms(void **state)
{
    (void)state;
    expect("\0", 1, 1, 0);
    expect("A", 1, 1, 'A');
    expect("\x7f", 1, 1, 0x7f);
    expect("\xc2\x80", 2, 2, 0x80);
    expect("\xc3\xa9", 2, 2, 0xe9);
    expect("\xdf\xbf", 2, 2, 0x7ff);
    expect("\xe0\xa0\x80", 3, 3, 0x800);
    expect("\xe4\xb8\x96", 3, 3, 0x4e16);
    expect("\xed\x9f\xbf", 3, 3, 0xd7ff);       /* last before surrogates */
    expect("\xee\x80\x80", 3, 3, 0xe000);       /* first after them */
    expect("\xef\xbf\xbd", 3, 3, 0xfffd);       /* U+FFFD itself: width 3 */
    expect("\xef\xbf\xbf", 3, 3, 0xffff);
    expect("\xf0\x90\x80\x80", 4, 4, 0x10000);
    expect("\xf0\x9f\x98\x80", 4, 4, 0x1f600);
    expect("\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff);
    /* only the first character is read */
    expect("\xc3\xa9x", 3, 2, 0xe9);
    expect("ab", 2, 1, 'a');
}

static void test_overlong(void **state)
{
    (void)state;
    bad("\xc0\x80", 2);                 /* U+0000 in two bytes */
    bad("\xc0\xaf", 2);                 /* '/' */
    bad("\xc1\xbf", 2);                 /* U+007F */
    bad("\xe0\x80\x80", 3);             /* U+0000 in three */
    bad("\xe0\x9f\xbf", 3);             /* U+07FF */
    bad("\xf0\x80\x80\x80", 4);         /* U+0000 in four */
    bad("\xf0\x8f\xbf\xbf", 4);         /* U+FFFF */
}

static void test_surrogates_and_range(void **state)
{
    (void)state;
    bad("\xed\xa0\x80", 3);             /* U+D800 */
    bad("\xed\xaf\xbf", 3);             /* U+DBFF */
    bad("\xed\xb0\x80", 3);             /* U+DC00 */
    bad("\xed\xbf\xbf", 3);             /* U+DFFF */
    bad("\xf4\x90\x80\x80", 4);         /* U+110000 */
    bad("\xf4\xbf\xbf\xbf", 4);
    bad("\xf5\x80\x80\x80", 4);         /* U+140000 */
    bad("\xf7\xbf\xbf\xbf", 4);         /* U+1FFFFF */
}

static void test_truncated(void **state)
{
    static const char *const full[] = {
        "\xc3\xa9", "\xe4\xb8\x96", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf",
    };
    (void)state;

    for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) {
        size_t len = strlen(full[i]);
        char s[8];
        /* cut short by the buffer's end after each byte */
        for (size_t n = 1; n < len; n++)
            bad(full[i], n);
        /* or by a byte that is no continuation at each position */
        for (size_t at = 1; at < len; at++) {
            memcpy(s, full[i], len);
            s[at] = 'x';
            bad(s, len);
            s[at] = '\xc3';
            bad(s, len);
            s[at] = '\0';
            bad(s, len);
        }
    }
}

static void test_bytes_that_start_nothing(void **state)
{
    char s[2] = { 0, (char)0x80 };
    (void)state;

    for (unsigned b = 0x80; b <= 0xbf; b++) {  /* stray continuation */
        s[0] = (char)b;
        bad(s, 2);
    }
    for (unsigned b = 0xf5; b <= 0xff; b++) {
        char t[4] = { (char)b, (char)0x80, (char)0x80, (char)0x80 };
        bad(t, 4);
    }
    bad("\xc0", 1);
    bad("\xc1", 1);
    bad("\xfe", 1);
    bad("\xff", 1);
}

/* Every scalar value decodes back from its encoding at its width, whether
** or not a byte follows, and the surrogates' encodings do not decode. */
static void test_every_code_point(void **state)
{
    uint8_t b[5];
    uint32_t cp;
    (void)state;

    for (uint32_t c = 0; c <= 0x10ffff; c++) {
        size_t n = encode(c, b);
        b[n] = 0x80;
        if (c >= 0xd800 && c <= 0xdfff) {
            assert_int_equal(em_utf8_decode(b, n, &cp), 1);
            assert_int_equal(cp, EM_UTF8_BAD);
            continue;
        }
        if (em_utf8_decode(b, n, &cp) != n || cp != c)
            fail_msg("U+%04X decodes as %u bytes U+%04X", (unsigned)c,
                     em_utf8_decode(b, n, &cp), (unsigned)cp);
        assert_int_equal(em_utf8_decode(b, n + 1, &cp), n);
        assert_int_equal(cp, c);
    }
}

static void test_count(void **state)
{
    (void)state;
    assert_int_equal(em_utf8_count("", 0), 0);
    assert_int_equal(em_utf8_count("abc", 3), 3);
    assert_int_equal(em_utf8_count("h\xc3\xa9llo", 6), 5);
    assert_int_equal(em_utf8_count("\xf0\x9f\x98\x80", 4), 1);
    /* each byte of an invalid sequence counts one */
    assert_int_equal(em_utf8_count("\xc0\xaf", 2), 2);
    assert_int_equal(em_utf8_count("\xed\xa0\x80", 3), 3);
    assert_int_equal(em_utf8_count("\xe4\xb8", 2), 2);
    /* the length bounds it, not a NUL */
    assert_int_equal(em_utf8_count("a\0b", 3), 3);
    assert_int_equal(em_utf8_count("\xe4\xb8\x96", 2), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_forms),
        cmocka_unit_test(test_overlong),
        cmocka_unit_test(test_surrogates_and_range),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bytes_that_start_nothing),
        cmocka_unit_test(test_every_code_point),
        cmocka_unit_test(test_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
