/*
** query/functions.c: the catalogue of the language's functions, the one
** list the parser (names, by/without), the planner (arguments, kinds), the
** REPL's completion and the error messages all read. A function added here
** is known everywhere; its enum value in query.h indexes the table.
*/
#include <string.h>

#include "query/query_int.h"

static const em_fn_info fns[] = {
    [EM_FN_MERGE] = { "merge", "a profile", 1, 1, true,
                      EMBER_RESULT_PROFILE },
    [EM_FN_DIFF] = { "diff", "two profiles (base, target)", 2, 2, false,
                     EMBER_RESULT_DIFF },
    [EM_FN_NORMALIZE] = { "normalize", "a diff", 1, 1, false,
                          EMBER_RESULT_DIFF },
    [EM_FN_FOCUS] = { "focus", "a profile and a regex string", 2, 2, false,
                      EMBER_RESULT_PROFILE },
    [EM_FN_IGNORE] = { "ignore", "a profile and a regex string", 2, 2, false,
                       EMBER_RESULT_PROFILE },
    [EM_FN_HIDE] = { "hide", "a profile and a regex string", 2, 2, false,
                     EMBER_RESULT_PROFILE },
    [EM_FN_SHOW] = { "show", "a profile and a regex string", 2, 2, false,
                     EMBER_RESULT_PROFILE },
    [EM_FN_CALLERS] = { "callers", "a profile and a regex string", 2, 2,
                        false, EMBER_RESULT_PROFILE },
    [EM_FN_CALLEES] = { "callees", "a profile and a regex string", 2, 2,
                        false, EMBER_RESULT_PROFILE },
    [EM_FN_PEEK] = { "peek", "a profile and a regex string", 2, 2, false,
                     EMBER_RESULT_PROFILE },
    [EM_FN_LIST] = { "list", "a profile and a regex string", 2, 2, false,
                     EMBER_RESULT_PROFILE },
    [EM_FN_GRANULARITY] = { "granularity", "a profile and a granularity "
                            "(\"functions\", \"filefunctions\", \"files\", "
                            "\"lines\" or \"addresses\")", 2, 2, false,
                            EMBER_RESULT_PROFILE },
    [EM_FN_TOP] = { "top", "a profile and a number", 2, 2, false,
                    EMBER_RESULT_PROFILE },
    [EM_FN_TOTAL] = { "total", "a selector", 1, 1, false,
                      EMBER_RESULT_SERIES },
    [EM_FN_RATE] = { "rate", "a series", 1, 1, false, EMBER_RESULT_SERIES },
    [EM_FN_SUM] = { "sum", "a series", 1, 1, true, EMBER_RESULT_SERIES },
    [EM_FN_AVG] = { "avg", "a series", 1, 1, true, EMBER_RESULT_SERIES },
    [EM_FN_MAX] = { "max", "a series", 1, 1, true, EMBER_RESULT_SERIES },
    [EM_FN_MIN] = { "min", "a series", 1, 1, true, EMBER_RESULT_SERIES },
    [EM_FN_COUNT] = { "count", "a series", 1, 1, true, EMBER_RESULT_SERIES },
    [EM_FN_TOPK] = { "topk", "a number and a series", 2, 2, true,
                     EMBER_RESULT_SERIES },
    [EM_FN_BOTTOMK] = { "bottomk", "a number and a series", 2, 2, true,
                        EMBER_RESULT_SERIES },
    [EM_FN_PROFILE_TYPES] = { "profile_types", "an optional selector", 0, 1,
                              false, EMBER_RESULT_TABLE },
    [EM_FN_LABEL_NAMES] = { "label_names", "an optional selector", 0, 1,
                            false, EMBER_RESULT_TABLE },
    [EM_FN_LABEL_VALUES] = { "label_values",
                             "a label name and an optional selector", 1, 2,
                             false, EMBER_RESULT_TABLE },
};

const em_fn_info *em_fn_get(em_fn fn)
{
    if ((unsigned)fn == 0 || (unsigned)fn >= EM_ARRAY_LEN(fns))
        return NULL;
    return &fns[fn];
}

const char *em_fn_name(em_fn fn)
{
    const em_fn_info *f = em_fn_get(fn);

    return f != NULL ? f->name : NULL;
}

em_fn em_fn_lookup(const char *s, size_t len)
{
    for (size_t f = 1; f < EM_ARRAY_LEN(fns); f++)
        if (strlen(fns[f].name) == len && memcmp(fns[f].name, s, len) == 0)
            return (em_fn)f;
    return 0;
}
