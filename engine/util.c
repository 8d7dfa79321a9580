/*
** engine/util.c: checks of names and strings that every layer shares: label
** names (Prometheus rules) and profile type strings (Parca's form).
*/
#include "engine.h"

int em_label_name_check(const char *name)
{
    size_t i;

    if (name == NULL || name[0] == '\0')
        return em_err(EMBER_EINVAL, "label name is empty");
    for (i = 0; name[i] != '\0'; i++) {
        char c = name[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     c == '_';
        bool digit = c >= '0' && c <= '9';
        if (!alpha && !(digit && i > 0))
            return em_err(EMBER_EINVAL,
                          "label name \"%s\": character %zu must be a letter, "
                          "'_'%s", name, i + 1, i > 0 ? " or a digit" : "");
    }
    if (i > 64)
        return em_err(EMBER_ELIMIT, "label name \"%.20s...\" longer than 64 "
                      "bytes", name);
    return EMBER_OK;
}

int em_profile_type_check(const char *type)
{
    size_t parts = 1, len;
    const char *last;

    if (type == NULL || type[0] == '\0')
        return em_err(EMBER_EINVAL, "profile type is empty");
    len = strlen(type);
    if (len > 400)     /* it is a postings key value: see EM_MAX_LABEL_VALUE */
        return em_err(EMBER_ELIMIT, "profile type longer than 400 bytes");
    for (const char *c = type; *c != '\0'; c++) {
        if (*c == ':')
            parts++;
        else if ((unsigned char)*c < 0x20 || *c == '{' || *c == '}')
            return em_err(EMBER_EINVAL,
                          "profile type \"%s\": bad character at %zu", type,
                          (size_t)(c - type) + 1);
    }
    last = strrchr(type, ':');
    if (parts == 5 || (parts == 6 && strcmp(last + 1, "delta") == 0))
        return EMBER_OK;
    return em_err(EMBER_EINVAL,
                  "profile type \"%s\": expected name:sample_type:"
                  "sample_unit:period_type:period_unit[:delta]", type);
}

bool em_type_is_delta(const char *type)
{
    size_t n = type != NULL ? strlen(type) : 0;
    return n >= 6 && strcmp(type + n - 6, ":delta") == 0;
}
