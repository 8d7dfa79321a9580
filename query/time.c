/*
** query/time.c: the times and durations users type: --from/--to on the
** command line, `@ <time>` and `[1h]` in queries. Everything becomes unix
** milliseconds (int64), the engine's unit.
**
** Accepted times (docs/query-language.md, "Times"): RFC 3339 with optional
** fractional seconds and a required zone (Z or +hh:mm; a bare date is
** midnight UTC), unix seconds (at most 11 digits, so until year 5138, with an
** optional fraction), unix milliseconds (12 or 13 digits), "now", and
** relative times "-1h", "now-2d", "now+30m". The digit-count rule is what
** tells seconds from milliseconds: any time after 1973 in ms has 12+ digits.
** Durations are PromQL's: digit-unit segments from the largest unit to the
** smallest, each unit at most once (1h30m, not 30m1h).
*/
#include <stdio.h>
#include <time.h>

#include "query/query_int.h"

#define MS_PER_SEC INT64_C(1000)
#define MS_PER_DAY INT64_C(86400000)

static const struct {
    const char *unit;
    int64_t ms;
} dur_units[] = {       /* largest first: the order segments must follow */
    { "y", 365 * MS_PER_DAY }, { "w", 7 * MS_PER_DAY }, { "d", MS_PER_DAY },
    { "h", 3600 * MS_PER_SEC }, { "m", 60 * MS_PER_SEC },
    { "s", MS_PER_SEC }, { "ms", 1 },
};

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Index in dur_units of the unit at S[0..n), its length in *LEN; -1 if none.
** "ms" is tried before "m" so that 5ms is not 5m followed by "s". */
static int dur_unit(const char *s, size_t n, size_t *len)
{
    if (n >= 2 && s[0] == 'm' && s[1] == 's') {
        *len = 2;
        return (int)EM_ARRAY_LEN(dur_units) - 1;
    }
    for (size_t u = 0; n >= 1 && u + 1 < EM_ARRAY_LEN(dur_units); u++) {
        if (s[0] == dur_units[u].unit[0]) {
            *len = 1;
            return (int)u;
        }
    }
    return -1;
}

static int dur_bad(const char *s, size_t n, const char *why)
{
    return em_err(EMBER_EINVAL, "bad duration \"%.*s\": %s",
                  (int)(n > 64 ? 64 : n), s, why);
}

/* Reads the digits at S[*i..n) into *V; false when none or on overflow. */
static bool read_count(const char *s, size_t n, size_t *i, int64_t *v,
                       bool *overflow)
{
    size_t start = *i;

    *v = 0;
    *overflow = false;
    while (*i < n && is_digit((unsigned char)s[*i])) {
        int d = s[(*i)++] - '0';
        if (*v > (INT64_MAX - d) / 10)
            *overflow = true;
        else
            *v = *v * 10 + d;
    }
    return *i > start;
}

int em_duration_parse_n(const char *s, size_t n, int64_t *out_ms)
{
    const char *expect = "expected digits and a unit (y w d h m s ms), like "
                         "1h30m";
    int64_t total = 0, v;
    int last = -1, u;
    size_t i = 0, ulen;
    bool overflow;

    if (n == 1 && s[0] == '0') {        /* PromQL accepts a bare 0 */
        *out_ms = 0;
        return EMBER_OK;
    }
    if (n == 0)
        return dur_bad(s, n, expect);
    while (i < n) {
        if (!read_count(s, n, &i, &v, &overflow) ||
            (u = dur_unit(s + i, n - i, &ulen)) < 0)
            return dur_bad(s, n, expect);
        if (u <= last)
            return dur_bad(s, n, "units must go from the largest to the "
                           "smallest, each at most once");
        if (overflow || v > (INT64_MAX - total) / dur_units[u].ms)
            return em_err(EMBER_ELIMIT, "duration \"%.*s\" is too long",
                          (int)(n > 64 ? 64 : n), s);
        total += v * dur_units[u].ms;
        last = u;
        i += ulen;
    }
    *out_ms = total;
    return EMBER_OK;
}

int em_duration_parse(const char *s, int64_t *out_ms)
{
    return em_duration_parse_n(s, strlen(s), out_ms);
}

/* ---- RFC 3339 --------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
** days_from_civil, exact for every int year). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t era;
    unsigned yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static unsigned days_in_month(unsigned y, unsigned m)
{
    static const unsigned days[] = { 31, 28, 31, 30, 31, 30,
                                     31, 31, 30, 31, 30, 31 };
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Reads exactly N digits at *P into *V, advancing *P. */
static bool digits(const char **p, int n, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((unsigned char)(*p)[i]))
            return false;
        *v = *v * 10 + (unsigned)((*p)[i] - '0');
    }
    *p += n;
    return true;
}

/* Reads "Z" or "+hh:mm"/"-hh:mm" at P into *OFF_MS (east of UTC). */
static bool rfc_zone(const char *p, int64_t *off_ms)
{
    unsigned hh, mm;
    int sign;

    if ((p[0] == 'Z' || p[0] == 'z') && p[1] == '\0') {
        *off_ms = 0;
        return true;
    }
    if (p[0] != '+' && p[0] != '-')
        return false;
    sign = p[0] == '-' ? -1 : 1;
    p++;
    if (!digits(&p, 2, &hh) || *p++ != ':' || !digits(&p, 2, &mm) ||
        *p != '\0' || hh > 23 || mm > 59)
        return false;
    *off_ms = sign * (int64_t)(hh * 60 + mm) * 60 * MS_PER_SEC;
    return true;
}

/* Reads ".ddd..." at *P into *MS (truncated to milliseconds). */
static bool rfc_fraction(const char **p, int64_t *ms)
{
    int64_t scale = 100;
    const char *q = *p;

    *ms = 0;
    if (*q != '.')
        return true;
    if (!is_digit((unsigned char)*++q))
        return false;
    for (; is_digit((unsigned char)*q); q++, scale /= 10)
        *ms += (*q - '0') * scale;
    *p = q;
    return true;
}

static int time_bad(const char *s, const char *why)
{
    return em_err(EMBER_EINVAL, "bad time \"%.64s\": %s", s, why);
}

/* "2024-11-21T06:20:00.250+01:00", or a bare "2024-11-21". */
static int rfc3339_parse(const char *s, int64_t *out_ms)
{
    const char *p = s;
    unsigned y, mo, d, h = 0, mi = 0, sec = 0;
    int64_t frac = 0, off = 0;

    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) ||
        *p++ != '-' || !digits(&p, 2, &d))
        return time_bad(s, "expected an RFC 3339 date like "
                        "2024-11-21T06:20:00Z");
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
        return time_bad(s, "no such date");
    if (*p != '\0') {
        if (*p != 'T' && *p != 't' && *p != ' ')
            return time_bad(s, "expected 'T' between the date and the time");
        p++;
        if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi) ||
            *p++ != ':' || !digits(&p, 2, &sec) || !rfc_fraction(&p, &frac))
            return time_bad(s, "expected a time of day like 06:20:00");
        if (h > 23 || mi > 59 || sec > 59)
            return time_bad(s, "hour, minute or second out of range");
        if (!rfc_zone(p, &off))
            return time_bad(s, "expected a zone after the time: Z or an "
                            "offset like +01:00");
    }
    *out_ms = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) *
              MS_PER_SEC + frac - off;
    return EMBER_OK;
}

/* ---- unix timestamps and relative times ------------------------------------ */

/* "1732170000", "1732170000.5" (seconds) or "1732170000000" (ms). */
static int unix_parse(const char *s, int64_t *out_ms)
{
    size_t ndig = strspn(s, "0123456789");
    const char *p = s + ndig;
    int64_t v = 0, frac = 0;

    if (ndig > 13)
        return time_bad(s, "too many digits for unix seconds (up to 11) or "
                        "milliseconds (12 or 13)");
    for (size_t i = 0; i < ndig; i++)
        v = v * 10 + (s[i] - '0');
    if (*p == '.' && ndig <= 11 && rfc_fraction(&p, &frac) && *p == '\0') {
        *out_ms = v * MS_PER_SEC + frac;
        return EMBER_OK;
    }
    if (*p == '.' && ndig > 11)
        return time_bad(s, "unix milliseconds take no fraction");
    if (*p != '\0')
        return time_bad(s, "expected unix seconds or milliseconds, as in "
                        "1732170000, 1732170000.5 or 1732170000000");
    *out_ms = ndig <= 11 ? v * MS_PER_SEC : v;
    return EMBER_OK;
}

/* "-1h", "+30m" relative to NOW_MS. */
static int relative_parse(const char *s, const char *whole, int64_t now_ms,
                          int64_t *out_ms)
{
    int64_t d;
    int rc = em_duration_parse(s + 1, &d);

    if (rc == EMBER_ELIMIT)
        return rc;
    if (rc != EMBER_OK)
        return em_err(rc, "bad time \"%.64s\": expected a duration after "
                      "'%c', like %c1h30m", whole, s[0], s[0]);
    if (s[0] == '-' ? now_ms < INT64_MIN + d : now_ms > INT64_MAX - d)
        return em_err(EMBER_ELIMIT, "time \"%.64s\" is out of range", whole);
    *out_ms = s[0] == '-' ? now_ms - d : now_ms + d;
    return EMBER_OK;
}

int em_time_parse(const char *s, int64_t now_ms, int64_t *out_ms)
{
    size_t ndig = strspn(s, "0123456789");

    if (strcmp(s, "now") == 0) {
        *out_ms = now_ms;
        return EMBER_OK;
    }
    if (strncmp(s, "now", 3) == 0 && (s[3] == '-' || s[3] == '+'))
        return relative_parse(s + 3, s, now_ms, out_ms);
    if (s[0] == '-' || s[0] == '+')
        return relative_parse(s, s, now_ms, out_ms);
    if (ndig == 4 && s[4] == '-')
        return rfc3339_parse(s, out_ms);
    if (ndig > 0)
        return unix_parse(s, out_ms);
    return time_bad(s, "expected RFC 3339 (2024-11-21T06:20:00Z), unix "
                    "seconds or milliseconds, now, or a relative time like "
                    "-1h");
}

const char *em_time_format(int64_t ms, char buf[40])
{
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    int64_t frac = ms - (int64_t)secs * 1000;
    struct tm tm;
    size_t n;

    if (gmtime_r(&secs, &tm) == NULL) {
        snprintf(buf, 40, "%lld", (long long)ms);
        return buf;
    }
    n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    if (frac != 0)
        snprintf(buf + n, 40 - n, ".%03lldZ", (long long)frac);
    else
        snprintf(buf + n, 40 - n, "Z");
    return buf;
}
