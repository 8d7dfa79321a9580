/*
** engine/regex_unicode.h: the Unicode tables of engine/regex.c, generated
** into engine/regex_unicode.c by scripts/gen_regex_unicode.go from Go's
** unicode package (so \p{...} and (?i) agree with Go's regexp).
*/
#ifndef EMBER_ENGINE_REGEX_UNICODE_H
#define EMBER_ENGINE_REGEX_UNICODE_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_re_utable {
    const char *name;           /* "L", "Lu", "Greek", "Any", ... */
    uint32_t first, n;          /* em_re_uranges[first, first + n) */
} em_re_utable;

/* Inclusive code-point ranges, sorted and disjoint within each table. */
extern const uint32_t em_re_uranges[][2];
/* The tables, sorted by name in strcmp order. */
extern const em_re_utable em_re_utables[];
extern const size_t em_re_nutables;
/* (r, unicode.SimpleFold(r)) for every r whose orbit has another member,
** sorted by r: following the pairs from r walks the orbit back to r. */
extern const uint32_t em_re_folds[][2];
extern const size_t em_re_nfolds;

#endif
