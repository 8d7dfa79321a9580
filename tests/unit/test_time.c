/*
** tests/unit/test_time.c: em_time_parse and em_duration_parse against a
** fixed "now": every accepted form (RFC 3339, unix seconds and
** milliseconds, now, relative times), the seconds/milliseconds digit rule,
** calendar checks, overflow, and the messages that name the bad text.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "query/query.h"

#define NOW INT64_C(1732170000000)      /* 2024-11-21T06:20:00Z */
#define HOUR INT64_C(3600000)
#define DAY (24 * HOUR)

typedef struct {
    const char *text;
    int64_t want;
} time_case;

static void expect_times(const time_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t got = -42;
        int rc = em_time_parse(c[i].text, NOW, &got);
        if (rc != EMBER_OK)
            fail_msg("%s: %s", c[i].text, em_errmsg());
        if (got != c[i].want)
            fail_msg("%s: got %lld, want %lld", c[i].text, (long long)got,
                     (long long)c[i].want);
    }
}

/* Each text fails with RC and a message containing WANT. */
static void expect_time_error(const char *text, int rc, const char *want)
{
    int64_t got = -42;

    assert_int_equal(em_time_parse(text, NOW, &got), rc);
    assert_int_equal(got, -42);
    if (strstr(em_errmsg(), want) == NULL)
        fail_msg("%s: message \"%s\" lacks \"%s\"", text, em_errmsg(), want);
}

static void test_rfc3339(void **state)
{
    const time_case c[] = {
        { "2024-11-21T06:20:00Z", NOW },
        { "2024-11-21t06:20:00z", NOW },
        { "2024-11-21 06:20:00Z", NOW },
        { "2024-11-21T06:20:00.250Z", NOW + 250 },
        { "2024-11-21T06:20:00.5Z", NOW + 500 },
        { "2024-11-21T06:20:00.123456789Z", NOW + 123 },   /* truncated */
        { "2024-11-21T07:20:00+01:00", NOW },
        { "2024-11-21T00:50:00-05:30", NOW },
        { "2024-11-21T06:20:00+00:00", NOW },
        { "2024-11-21", NOW - 6 * HOUR - 20 * 60000 },      /* midnight UTC */
        { "1970-01-01T00:00:00Z", 0 },
        { "1969-12-31T23:00:00Z", -HOUR },
        { "2024-02-29T23:59:59Z", INT64_C(1709251199000) },
        { "2000-02-29T00:00:00Z", INT64_C(951782400000) },
        { "9999-12-31T23:59:59Z", INT64_C(253402300799000) },
    };
    (void)state;
    expect_times(c, EM_ARRAY_LEN(c));
}

static void test_rfc3339_errors(void **state)
{
    (void)state;
    expect_time_error("2023-02-29T00:00:00Z", EMBER_EINVAL, "no such date");
    expect_time_error("1900-02-29", EMBER_EINVAL, "no such date");
    expect_time_error("2024-13-01T00:00:00Z", EMBER_EINVAL, "no such date");
    expect_time_error("2024-04-31", EMBER_EINVAL, "no such date");
    expect_time_error("2024-11-00", EMBER_EINVAL, "no such date");
    expect_time_error("2024-11-21T24:00:00Z", EMBER_EINVAL, "out of range");
    expect_time_error("2024-11-21T06:60:00Z", EMBER_EINVAL, "out of range");
    expect_time_error("2024-11-21T06:20:60Z", EMBER_EINVAL, "out of range");
    expect_time_error("2024-11-21T06:20:00", EMBER_EINVAL,
                      "bad time \"2024-11-21T06:20:00\": expected a zone "
                      "after the time: Z or an offset like +01:00");
    expect_time_error("2024-11-21T06:20:00+1:00", EMBER_EINVAL, "zone");
    expect_time_error("2024-11-21T06:20:00+01:00x", EMBER_EINVAL, "zone");
    expect_time_error("2024-11-21T06:20:00.Z", EMBER_EINVAL, "time of day");
    expect_time_error("2024-11-21T6:20:00Z", EMBER_EINVAL, "time of day");
    expect_time_error("2024-11-21X06:20:00Z", EMBER_EINVAL, "'T'");
    expect_time_error("2024-1-21", EMBER_EINVAL, "RFC 3339 date");
}

static void test_unix(void **state)
{
    const time_case c[] = {
        { "1732170000", NOW },                  /* 10 digits: seconds */
        { "1732170000.5", NOW + 500 },
        { "1732170000.123999", NOW + 123 },
        { "1732170000000", NOW },               /* 13 digits: ms */
        { "173217000000", INT64_C(173217000000) },  /* 12 digits: ms */
        { "99999999999", INT64_C(99999999999000) }, /* 11 digits: s */
        { "0", 0 },
        { "0.001", 1 },
    };
    (void)state;
    expect_times(c, EM_ARRAY_LEN(c));
}

static void test_unix_errors(void **state)
{
    (void)state;
    expect_time_error("17321700000000", EMBER_EINVAL,
                      "too many digits for unix seconds (up to 11) or "
                      "milliseconds (12 or 13)");
    expect_time_error("1732170000000.5", EMBER_EINVAL,
                      "unix milliseconds take no fraction");
    expect_time_error("1732170000.", EMBER_EINVAL, "expected unix seconds");
    expect_time_error("1732170000s", EMBER_EINVAL, "expected unix seconds");
    expect_time_error("12:30", EMBER_EINVAL, "expected unix seconds");
}

static void test_now_and_relative(void **state)
{
    const time_case c[] = {
        { "now", NOW },
        { "-1h", NOW - HOUR },
        { "-30m", NOW - 30 * 60000 },
        { "-1h30m", NOW - 90 * 60000 },
        { "+1h", NOW + HOUR },
        { "now-2d", NOW - 2 * DAY },
        { "now+30m", NOW + 30 * 60000 },
        { "now-1w", NOW - 7 * DAY },
        { "now-500ms", NOW - 500 },
        { "-0", NOW },
    };
    (void)state;
    expect_times(c, EM_ARRAY_LEN(c));
}

static void test_time_errors(void **state)
{
    (void)state;
    expect_time_error("", EMBER_EINVAL, "bad time \"\": expected RFC 3339 "
                      "(2024-11-21T06:20:00Z), unix seconds or milliseconds, "
                      "now, or a relative time like -1h");
    expect_time_error("yesterday", EMBER_EINVAL, "bad time \"yesterday\"");
    expect_time_error("Now", EMBER_EINVAL, "bad time \"Now\"");
    expect_time_error("now-", EMBER_EINVAL, "bad time \"now-\": expected a "
                      "duration after '-', like -1h30m");
    expect_time_error("-", EMBER_EINVAL, "expected a duration after '-'");
    expect_time_error("-1x", EMBER_EINVAL, "bad time \"-1x\"");
    expect_time_error("-100", EMBER_EINVAL, "expected a duration");
    expect_time_error("now - 1h", EMBER_EINVAL, "bad time \"now - 1h\"");
    expect_time_error("-9999999999999999999d", EMBER_ELIMIT, "too long");
    expect_time_error("now+9223372036854775807ms", EMBER_ELIMIT,
                      "out of range");
}

static void test_durations(void **state)
{
    const struct { const char *text; int64_t want; } c[] = {
        { "10s", 10000 }, { "5m", 300000 }, { "1h", HOUR }, { "2d", 2 * DAY },
        { "1w", 7 * DAY }, { "1y", 365 * DAY }, { "1h30m", 90 * 60000 },
        { "500ms", 500 }, { "1m500ms", 60500 }, { "0", 0 }, { "0s", 0 },
        { "1y2w3d4h5m6s7ms", 365 * DAY + 14 * DAY + 3 * DAY + 4 * HOUR +
                             5 * 60000 + 6000 + 7 },
        { "90m", 90 * 60000 }, { "007s", 7000 },
    };
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(c); i++) {
        int64_t got = -1;
        if (em_duration_parse(c[i].text, &got) != EMBER_OK)
            fail_msg("%s: %s", c[i].text, em_errmsg());
        assert_int_equal(got, c[i].want);
    }
}

static void test_duration_errors(void **state)
{
    const char *order = "units must go from the largest to the smallest, "
                        "each at most once";
    const char *shape = "expected digits and a unit (y w d h m s ms), like "
                        "1h30m";
    const struct { const char *text, *want; } c[] = {
        { "", shape }, { "1", shape }, { "h", shape }, { "1.5h", shape },
        { "-1h", shape }, { "1h ", shape }, { "1x", shape }, { "1H", shape },
        { "1hh", shape }, { "1h1h", order }, { "30m1h", order },
        { "1ms1s", order }, { "5s5s", order },
    };
    int64_t v = -1;
    (void)state;

    for (size_t i = 0; i < EM_ARRAY_LEN(c); i++) {
        assert_int_equal(em_duration_parse(c[i].text, &v), EMBER_EINVAL);
        if (strstr(em_errmsg(), c[i].want) == NULL)
            fail_msg("%s: message \"%s\"", c[i].text, em_errmsg());
    }
    assert_string_equal(em_errmsg(), "bad duration \"5s5s\": units must go "
                        "from the largest to the smallest, each at most once");
    assert_int_equal(v, -1);
    assert_int_equal(em_duration_parse("9223372036854775808ms", &v),
                     EMBER_ELIMIT);
    assert_int_equal(em_duration_parse("300000000y", &v), EMBER_ELIMIT);
    assert_int_equal(em_duration_parse("9223372036854775807ms", &v),
                     EMBER_OK);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(em_duration_parse("106751991167d1ms", &v), EMBER_OK);
    assert_int_equal(em_duration_parse("292471209y", &v), EMBER_ELIMIT);
}

static void test_duration_parse_n(void **state)
{
    int64_t v = 0;
    (void)state;

    /* the lexer's entry reads only N bytes of a longer text */
    assert_int_equal(em_duration_parse_n("1h30m]", 5, &v), EMBER_OK);
    assert_int_equal(v, 90 * 60000);
    assert_int_equal(em_duration_parse_n("1h30m", 2, &v), EMBER_OK);
    assert_int_equal(v, HOUR);
    assert_int_equal(em_duration_parse_n("5m", 1, &v), EMBER_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_rfc3339_errors),
        cmocka_unit_test(test_unix),
        cmocka_unit_test(test_unix_errors),
        cmocka_unit_test(test_now_and_relative),
        cmocka_unit_test(test_time_errors),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_duration_errors),
        cmocka_unit_test(test_duration_parse_n),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
