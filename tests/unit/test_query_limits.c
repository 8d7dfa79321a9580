/*
** tests/unit/test_query_limits.c: a query's time and memory limits
** (ember_query_opts' timeout_ms and max_bytes, issue 14) on real-size
** generated data: 8 pprof profiles of 25k samples over 4 series, about 100k
** distinct stacks to resolve. A tiny timeout fails with EMBER_ETIMEOUT and
** says how far the query got; every memory budget from 1 KiB up to more
** than the query needs either gives the unlimited answer or fails with
** EMBER_ELIMIT naming what asked, leaking nothing (ASan's build runs this
** too); generous limits answer exactly what no limits answer, for
** profiles, groups, diffs and series; a caller built before the limits
** (its smaller sz) gets none. No test here reads a clock: the timeout
** fails because the work is thousands of times longer than 1 ms.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "common/testutil.h"

#define NPROFILES 8
#define NSAMPLES 25000
#define T0 INT64_C(1700000000000)

static struct {
    char *dir;
    ember_db *db;
    char type[256];                 /* the CPU type the imports made */
} fx;

static int setup(void **state)
{
    ember_strlist *types = NULL;

    (void)state;
    fx.dir = tu_tmpdir("query-limits");
    fx.db = tu_open(fx.dir, 0);
    for (int i = 0; i < NPROFILES; i++) {
        char pod[8];
        size_t len;
        uint8_t *buf = tu_pprof_synth(NSAMPLES, 4000, 8, 100 + i, &len);
        ember_label l = { "pod", pod };
        ember_import_opts o = { .sz = sizeof o, .labels = &l, .nlabels = 1,
                                .flags = EMBER_IMPORT_TIME,
                                .time_ms = T0 + i * 10000 };
        snprintf(pod, sizeof pod, "p%d", i % 4);
        assert_non_null(buf);
        if (ember_import(fx.db, buf, len, &o, NULL) != EMBER_OK)
            fail_msg("import %d: %s", i, ember_errmsg(fx.db));
        free(buf);
    }
    assert_int_equal(ember_profile_types(fx.db, NULL, &types), EMBER_OK);
    for (size_t i = 0; i < ember_strlist_count(types); i++)
        if (strstr(ember_strlist_get(types, i), "nanoseconds") != NULL)
            snprintf(fx.type, sizeof fx.type, "%s",
                     ember_strlist_get(types, i));
    ember_strlist_free(types);
    assert_true(fx.type[0] != '\0');
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ember_close(fx.db);
    tu_rmdir(fx.dir);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------------- */

/* TMPL with each '@' replaced by the type, into BUF. */
static const char *q(const char *tmpl, char *buf, size_t cap)
{
    size_t n = 0;

    for (; *tmpl != '\0' && n + strlen(fx.type) + 1 < cap; tmpl++) {
        if (*tmpl == '@') {
            memcpy(buf + n, fx.type, strlen(fx.type));
            n += strlen(fx.type);
        } else {
            buf[n++] = *tmpl;
        }
    }
    buf[n] = '\0';
    return buf;
}

/* Runs TEXT under O and renders it as FORMAT: the text (free it), or NULL
** with *RC the failure. */
static char *answer(const char *text, const ember_query_opts *o,
                    const char *format, int *rc)
{
    ember_result *r = NULL;
    char *out = NULL;
    size_t len;

    *rc = ember_query(fx.db, text, o, &r);
    if (*rc != EMBER_OK) {
        assert_null(r);
        return NULL;
    }
    *rc = ember_result_render(NULL, r, format, NULL, &out, &len);
    ember_result_free(r);
    assert_int_equal(*rc, EMBER_OK);
    return out;
}

static const char *const queries[] = {
    "merge(@{})",
    "merge(@{}) by (pod)",
    "diff(@{pod=\"p0\"}, @{pod=\"p1\"})",
    "focus(merge(@{}), \"f1\")",
    "total(@{})",
};

static const char *query_text(size_t i, char *buf, size_t cap)
{
    return q(queries[i], buf, cap);
}

static const char *format_of(size_t i)
{
    return strncmp(queries[i], "total", 5) == 0 ? "csv" : "collapsed";
}

/* ---- time ------------------------------------------------------------------------- */

/* 1 ms against work of a second or so: the deadline passes while the
** query resolves its stacks (checked every 256) or reads its chunks. */
static void test_timeout(void **state)
{
    ember_query_opts o = { .sz = sizeof o, .timeout_ms = 1 };
    char text[512];
    int rc;

    (void)state;
    for (size_t i = 0; i < 3; i++) {
        char *out = answer(query_text(i, text, sizeof text), &o,
                           format_of(i), &rc);
        assert_null(out);
        assert_int_equal(rc, EMBER_ETIMEOUT);
        if (strstr(ember_errmsg(fx.db), "query time limit of 1 ms exceeded")
            == NULL || strstr(ember_errmsg(fx.db), "chunks") == NULL ||
            strstr(ember_errmsg(fx.db), text) == NULL)
            fail_msg("message: %s", ember_errmsg(fx.db));
    }
    assert_string_equal(ember_strerror(EMBER_ETIMEOUT),
                        "time limit exceeded");
}

/* ---- memory ----------------------------------------------------------------------- */

/* Every budget from 1 KiB, doubling, fails cleanly with ELIMIT until one
** is large enough, which answers what no budget answers. */
static void check_budgets(size_t qi)
{
    char text[512];
    int rc;
    char *want = answer(query_text(qi, text, sizeof text), NULL,
                        format_of(qi), &rc);
    bool passed = false;

    assert_non_null(want);
    for (uint64_t max = 1024; max <= (UINT64_C(1) << 32) && !passed;
         max *= 2) {
        ember_query_opts o = { .sz = sizeof o, .max_bytes = max };
        char *got = answer(text, &o, format_of(qi), &rc);
        if (got == NULL) {
            char head[64];
            snprintf(head, sizeof head, "query memory limit of %llu bytes "
                     "exceeded in ", (unsigned long long)max);
            assert_int_equal(rc, EMBER_ELIMIT);
            if (max == 65536)
                fprintf(stderr, "%s\n", ember_errmsg(fx.db));
            if (strncmp(ember_errmsg(fx.db), head, strlen(head)) != 0)
                fail_msg("%s: %s", text, ember_errmsg(fx.db));
            continue;
        }
        fprintf(stderr, "%s: answered within %llu bytes\n", text,
                (unsigned long long)max);
        assert_string_equal(got, want);
        em_free(got);
        passed = true;
    }
    assert_true(passed);
    em_free(want);
}

static void test_memory_budgets(void **state)
{
    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(queries); i++)
        check_budgets(i);
}

/* A small budget fails a merge whose pooled accumulator is warm as it
** fails a cold one: the pool's buffers count for the query holding them. */
static void test_memory_pooled(void **state)
{
    ember_query_opts o = { .sz = sizeof o, .max_bytes = 16384 };
    char text[512];
    int rc;

    (void)state;
    for (int i = 0; i < 3; i++) {
        assert_null(answer(q("merge(@{})", text, sizeof text), &o,
                           "collapsed", &rc));
        assert_int_equal(rc, EMBER_ELIMIT);
    }
}

/* ---- generous limits, old callers ------------------------------------------------- */

static void test_generous_same(void **state)
{
    ember_query_opts o = { .sz = sizeof o, .timeout_ms = 600000,
                           .max_bytes = UINT64_C(1) << 34 };
    char text[512];
    int rc;

    (void)state;
    for (size_t i = 0; i < EM_ARRAY_LEN(queries); i++) {
        char *want = answer(query_text(i, text, sizeof text), NULL,
                            format_of(i), &rc);
        char *got = answer(text, &o, format_of(i), &rc);
        assert_non_null(want);
        assert_non_null(got);
        assert_string_equal(got, want);
        em_free(want);
        em_free(got);
    }
}

/* sz as a caller compiled before timeout_ms and max_bytes sets it: the
** fields past it are not read (here they hold limits that would fail). */
static void test_old_size(void **state)
{
    ember_query_opts o = { .sz = offsetof(ember_query_opts, timeout_ms),
                           .timeout_ms = 1, .max_bytes = 1024 };
    ember_query_opts bad = { .sz = offsetof(ember_query_opts, now_ms) };
    ember_query_opts neg = { .sz = sizeof neg, .timeout_ms = -1 };
    char text[512];
    ember_result *r = NULL;
    int rc;
    char *got = answer(q("merge(@{})", text, sizeof text), &o, "collapsed",
                       &rc);

    (void)state;
    assert_non_null(got);
    em_free(got);
    assert_int_equal(ember_query(fx.db, text, &bad, &r), EMBER_EINVAL);
    assert_int_equal(ember_query(fx.db, text, &neg, &r), EMBER_EINVAL);
    assert_null(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_memory_budgets),
        cmocka_unit_test(test_memory_pooled),
        cmocka_unit_test(test_generous_same),
        cmocka_unit_test(test_old_size),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
