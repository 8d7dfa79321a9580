/*
** fuzz/fuzz_regex.c: the regex engine on untrusted patterns and subjects.
** Input: pattern bytes, a NUL, subject bytes (no NUL: all pattern, empty
** subject). Any input must give EMBER_OK or an error code, and a compiled
** regex must keep its promises: a match starts with em_regex_prefix(), a
** literal regex matches its prefix and only it; and the pattern wrapped
** as (?s:PATTERN), which must mean the same since (?s) is the default and
** flags set inside a group end with it, gives the same answer (when the
** wrapping stays within the limits). Matching is bounded by
** O(program x subject), so a slow input here is a bug, not bad luck; the
** subject is cut at EM_FUZZ_SUBJECT bytes so that the worst case, a 20000-
** instruction program, stays well inside the smoke run's 10 s per input
** under the sanitizers (length only scales that cost linearly).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define EM_FUZZ_SUBJECT 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const em_regex *re, const char *s, size_t len)
{
    size_t n;
    const char *pre = em_regex_prefix(re, &n);
    bool m = em_regex_match(re, s, len);

    if (m && (len < n || memcmp(s, pre, n) != 0))
        abort();                /* a match without the promised prefix */
    if (m && em_regex_is_literal(re) && len != n)
        abort();                /* a "literal" that matched another string */
    if (em_regex_is_literal(re) && !em_regex_match(re, pre, n))
        abort();                /* a literal that misses itself */
}

/* (?s:PATTERN) must answer as PATTERN did (WANT) on S. */
static void check_wrapped(const char *pattern, size_t plen, bool want,
                          const char *s, size_t len)
{
    char *w = malloc(plen + 6);
    em_regex *re;

    if (w == NULL)
        return;
    memcpy(w, "(?s:", 4);
    memcpy(w + 4, pattern, plen);
    memcpy(w + 4 + plen, ")", 2);
    if (em_regex_compile(w, &re) == EMBER_OK) {
        if (em_regex_match(re, s, len) != want)
            abort();            /* the wrapping changed the meaning */
        em_regex_free(re);
    }
    free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t plen = nul != NULL ? (size_t)(nul - data) : size;
    char *pattern = malloc(plen + 1);
    em_regex *re;

    if (pattern == NULL)
        return 0;
    memcpy(pattern, data, plen);
    pattern[plen] = '\0';
    if (em_regex_compile(pattern, &re) == EMBER_OK) {
        const char *s = nul != NULL ? (const char *)nul + 1 : "";
        size_t slen = nul != NULL ? size - plen - 1 : 0;
        slen = slen < EM_FUZZ_SUBJECT ? slen : EM_FUZZ_SUBJECT;
        check(re, s, slen);
        check_wrapped(pattern, plen, em_regex_match(re, s, slen), s, slen);
        em_regex_free(re);
    }
    free(pattern);
    return 0;
}
