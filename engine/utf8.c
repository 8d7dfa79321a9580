/*
** engine/utf8.c: counting UTF-8 characters with em_utf8_decode (engine.h),
** the one decoder that the regex, the JSON and SVG writers and the text
** renderers share.
*/
#include "engine.h"

size_t em_utf8_count(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t count = 0, i = 0;
    uint32_t cp;

    for (; i < n; count++)
        i += em_utf8_decode(u + i, n - i, &cp);
    return count;
}
