/*
** query/units.c: sample values as pprof prints them (its measurement
** package), so that `ember query -o top` reads like `go tool pprof -top`:
** nanoseconds as ns/us/ms/s/hrs, bytes as B/kB/MB/GB/TB/PB in powers of
** 1024, two decimals with a trailing ".00" dropped, and counts bare.
**
** A unit name is matched as pprof "sniffs" it: lower-cased, a trailing 's'
** dropped when longer than two characters, then looked up among aliases
** ("nanoseconds" -> "nanosecond" -> ns). Units it does not know are printed
** after the number, except count, sample and unit, which print nothing.
*/
#include <stdio.h>

#include "query/query_int.h"

typedef struct unit_def {
    const char *name;           /* canonical, as printed */
    const char *aliases[4];     /* sniffed forms, NULL-terminated */
    double factor;              /* in the type's base unit */
} unit_def;

typedef struct unit_type {
    unit_def units[7];              /* empty name ends the list */
    const char *def_name;       /* printed when nothing fits */
    double def_factor;
} unit_type;

static const unit_type unit_types[] = {
    { { { "B", { "b", "byte" }, 1 },
        { "kB", { "kb", "kbyte", "kilobyte" }, 1024.0 },
        { "MB", { "mb", "mbyte", "megabyte" }, 1048576.0 },
        { "GB", { "gb", "gbyte", "gigabyte" }, 1073741824.0 },
        { "TB", { "tb", "tbyte", "terabyte" }, 1099511627776.0 },
        { "PB", { "pb", "pbyte", "petabyte" }, 1125899906842624.0 } },
      "B", 1 },
    { { { "ns", { "ns", "nanosecond" }, 1 },
        { "us", { "\xce\xbcs", "us", "microsecond" }, 1e3 },
        { "ms", { "ms", "millisecond" }, 1e6 },
        { "s", { "s", "sec", "second" }, 1e9 },
        { "hrs", { "hour", "hr" }, 3600e9 } },
      "s", 1e9 },
};

/* The unit of T that NAME sniffs to, or NULL. */
static const unit_def *unit_sniff(const unit_type *t, const char *name)
{
    char low[32];
    size_t n = strlen(name);

    if (n >= sizeof low)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 :
                        name[i]);
    if (n > 2 && low[n - 1] == 's')
        low[n - 1] = '\0';
    for (const unit_def *u = t->units; u->name != NULL; u++)
        for (size_t a = 0; a < 4 && u->aliases[a] != NULL; a++)
            if (strcmp(u->aliases[a], low) == 0)
                return u;
    return NULL;
}

static bool is_auto(const char *to)
{
    return strcmp(to, "auto") == 0 || strcmp(to, "minimum") == 0;
}

/* The largest unit of T that V (in base units) reaches at least 1 of. */
static void unit_autoscale(const unit_type *t, double v, double *out,
                           const char **name)
{
    double f = 0;

    for (const unit_def *u = t->units; u->name != NULL; u++) {
        if (u->factor >= f && v / u->factor >= 1.0) {
            f = u->factor;
            *name = u->name;
        }
    }
    if (f == 0) {
        *out = v / t->def_factor;
        *name = t->def_name;
    } else {
        *out = v / f;
    }
}

/* pprof's measurement.Scale: VALUE in FROM as a number of *NAME units. */
static double unit_scale(int64_t value, const char *from, const char *to,
                         const char **name)
{
    if (value < 0 && value != INT64_MIN)    /* pprof recurses on -value */
        return -unit_scale(-value, from, to, name);
    for (size_t i = 0; i < EM_ARRAY_LEN(unit_types); i++) {
        const unit_type *t = &unit_types[i];
        const unit_def *fu = unit_sniff(t, from), *tu;
        double v, out;
        if (fu == NULL)
            continue;
        v = (double)value * fu->factor;
        if (is_auto(to)) {
            unit_autoscale(t, v, &out, name);
            return out;
        }
        tu = unit_sniff(t, to);
        *name = tu != NULL ? tu->name : t->def_name;
        return v / (tu != NULL ? tu->factor : t->def_factor);
    }
    *name = strcmp(to, "count") == 0 || strcmp(to, "sample") == 0 ||
            strcmp(to, "unit") == 0 || is_auto(to) ? "" : to;
    return (double)value;
}

const char *em_format_value_as(int64_t value, const char *unit,
                               const char *out_unit, char buf[EM_VALUE_MAX])
{
    const char *name;
    double v = unit_scale(value, unit, out_unit, &name);
    size_t n;

    snprintf(buf, EM_VALUE_MAX, "%.2f", v);
    n = strlen(buf);
    if (n > 3 && strcmp(buf + n - 3, ".00") == 0)
        buf[n -= 3] = '\0';
    if (strcmp(buf, "0") == 0 || strcmp(buf, "-0") == 0)
        return strcpy(buf, "0");
    snprintf(buf + n, EM_VALUE_MAX - n, "%s", name);
    return buf;
}

const char *em_format_value(int64_t value, const char *unit,
                            char buf[EM_VALUE_MAX])
{
    return em_format_value_as(value, unit, "auto", buf);
}

const char *em_unit_pick(int64_t minv, int64_t maxv, const char *unit)
{
    const char *lo, *hi, *pick;

    unit_scale(minv, unit, "minimum", &lo);
    unit_scale(maxv, unit, "minimum", &hi);
    pick = lo;
    /* pprof: when the extremes differ in unit, show the smallest value as
    ** small as 0.01 of a larger unit rather than the total in a tiny one. */
    if (strcmp(lo, hi) != 0 && em_abs64(minv) <= (uint64_t)INT64_MAX / 100 &&
        minv * 100 < maxv)
        unit_scale(minv * 100, unit, "minimum", &pick);
    return pick[0] != '\0' ? pick : unit;
}

const char *em_format_percent(int64_t value, int64_t total, char buf[16])
{
    double ratio = 0;

    if (total != 0) {
        ratio = (double)value / (double)total * 100;
        ratio = ratio < 0 ? -ratio : ratio;
    }
    if (ratio >= 99.95 && ratio <= 100.05)
        snprintf(buf, 16, "  100%%");
    else if (ratio >= 1.0)
        snprintf(buf, 16, "%5.2f%%", ratio);
    else
        snprintf(buf, 16, "%5.2g%%", ratio);
    return buf;
}
