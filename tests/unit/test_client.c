/*
** tests/unit/test_client.c: the client's parts that need no server (a real
** `ember serve` is tests/e2e/client.sh's). The result encoding: a query's
** result encoded and decoded renders byte for byte as the original in
** every format that fits it and answers every accessor the same; every
** cut of an encoding is refused; allocation failure at every call gives
** EMBER_ENOMEM and leaks nothing. The client: a bad URL, a server that is
** not there and options the server does not take fail with their codes
** and messages naming the URL.
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
#include "query/query.h"
#include "common/testutil.h"

#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
#define ALLOC "memory:alloc_space:bytes:space:bytes"

static const char *const queries[] = {
    "merge(" CPU ")",
    "merge by (service) (" ALLOC ")",
    "diff(merge(" ALLOC "{service=\"x\"}), merge(" ALLOC "))",
    "focus(merge(" CPU "), \"runtime\")",
    "top(merge(" CPU "), 3)",
    "total(" ALLOC ")",
    "sum by (service) (total({service=~\".+\"}))",
    "label_values(service)",
    "merge(nothing)",
};

static const char *const formats[] = {
    "top", "tree", "flame", "collapsed", "json", "svg", "pprof", "table",
    "csv", "spark",
};

typedef struct fixture {
    char *dir;
    ember_db *db;
} fixture;

static int setup(void **state)
{
    static const char *const files[] = { "tests/data/pprof/cpu.pb.gz",
                                         "tests/data/pprof/heap.pb.gz" };
    ember_label l = { "service", "api" };
    ember_import_opts o = { .sz = sizeof o, .labels = &l, .nlabels = 1 };
    fixture *f = calloc(1, sizeof *f);

    f->dir = tu_tmpdir("client");
    f->db = tu_open(f->dir, 0);
    assert_int_equal(ember_import_files(f->db, files, 2, &o, NULL, NULL),
                     EMBER_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    ember_close(f->db);
    tu_rmdir(f->dir);
    free(f);
    return 0;
}

/* A query's result, encoded and decoded again. */
static void run_both(fixture *f, const char *q, ember_result **a,
                     ember_result **b, void **wire, size_t *len)
{
    ember_query_opts o = { .sz = sizeof o, .step_ms = 3600000 };

    if (ember_query(f->db, q, strstr(q, "total") ? &o : NULL, a) != EMBER_OK)
        fail_msg("%s: %s", q, ember_errmsg(NULL));
    assert_int_equal(em_result_encode(*a, wire, len), EMBER_OK);
    assert_int_equal(em_result_decode(*wire, *len, b), EMBER_OK);
}

static void same_render(const ember_result *a, const ember_result *b,
                        const char *q)
{
    ember_render_opts o = { .sz = sizeof o };

    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char *x = NULL, *y = NULL;
        size_t xn = 0, yn = 0;
        int rx = ember_result_render(NULL, a, formats[i], &o, &x, &xn);
        int ry = ember_result_render(NULL, b, formats[i], &o, &y, &yn);
        if (rx != ry || xn != yn || (rx == EMBER_OK && memcmp(x, y, xn)))
            fail_msg("%s -o %s: %d/%d, %zu/%zu bytes", q, formats[i], rx, ry,
                     xn, yn);
        ember_free(x);
        ember_free(y);
    }
}

static void same_accessors(ember_result *a, ember_result *b)
{
    assert_int_equal(ember_result_kind(a), ember_result_kind(b));
    assert_int_equal(ember_result_groups(a), ember_result_groups(b));
    assert_int_equal(ember_result_series_count(a),
                     ember_result_series_count(b));
    assert_int_equal(ember_result_rows(a), ember_result_rows(b));
    assert_int_equal(ember_result_notes(a), ember_result_notes(b));
    for (size_t i = 0; i < ember_result_notes(a); i++)
        assert_string_equal(ember_result_note(a, i), ember_result_note(b, i));
    for (size_t g = 0; g < ember_result_groups(a); g++) {
        size_t na, nb;
        ember_result_group(a, g, NULL, NULL, &na);
        ember_result_group(b, g, NULL, NULL, &nb);
        assert_int_equal(na, nb);
        for (size_t j = 0; j < na; j++) {
            const ember_frame *fa, *fb;
            size_t ka, kb;
            int64_t va, vb, ba, bb;
            assert_int_equal(ember_result_stack(a, g, j, &fa, &ka, &va, &ba),
                             EMBER_OK);
            char *first = strdup(ka > 0 ? fa[0].name : "");
            assert_int_equal(ember_result_stack(b, g, j, &fb, &kb, &vb, &bb),
                             EMBER_OK);
            assert_int_equal(ka, kb);
            assert_true(va == vb && ba == bb);
            assert_string_equal(first, kb > 0 ? fb[0].name : "");
            free(first);
        }
    }
}

static void test_round_trip(void **state)
{
    fixture *f = *state;

    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        ember_result *a = NULL, *b = NULL;
        void *wire = NULL;
        size_t len = 0;
        run_both(f, queries[i], &a, &b, &wire, &len);
        same_render(a, b, queries[i]);
        same_accessors(a, b);
        ember_result_free(a);
        ember_result_free(b);
        em_free(wire);
    }
}

/* Every proper prefix is refused; so is a byte more. */
static void test_cuts_refused(void **state)
{
    fixture *f = *state;
    ember_result *a = NULL, *b = NULL;
    void *wire = NULL;
    size_t len = 0;
    uint8_t *more;

    run_both(f, queries[1], &a, &b, &wire, &len);
    ember_result_free(b);
    for (size_t n = 0; n < len; n += n < 64 ? 1 : 97) {
        b = NULL;
        assert_int_equal(em_result_decode(wire, n, &b), EMBER_EINVAL);
        assert_null(b);
    }
    more = malloc(len + 1);
    memcpy(more, wire, len);
    more[len] = 0;
    assert_int_equal(em_result_decode(more, len + 1, &b), EMBER_EINVAL);
    assert_non_null(strstr(ember_errmsg(NULL), "bytes after the result"));
    assert_int_equal(em_result_decode(NULL, 0, &b), EMBER_EINVAL);
    free(more);
    ember_result_free(a);
    em_free(wire);
}

static void test_decode_out_of_memory(void **state)
{
    fixture *f = *state;
    ember_result *a = NULL, *b = NULL;
    void *wire = NULL;
    size_t len = 0;
    int rc = EMBER_ENOMEM;

    run_both(f, queries[2], &a, &b, &wire, &len);
    ember_result_free(b);
    for (uint64_t i = 1; rc == EMBER_ENOMEM && i < 100000; i++) {
        b = NULL;
        em_alloc_fail_at(i);
        rc = em_result_decode(wire, len, &b);
        em_alloc_fail_at(0);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
        ember_result_free(b);
    }
    assert_int_equal(rc, EMBER_OK);
    ember_result_free(a);
    em_free(wire);
}

static void test_client_errors(void **state)
{
    ember_client *c = NULL;
    ember_result *r = NULL;
    ember_strlist *l = NULL;
    ember_import_opts o = { .sz = sizeof o, .format = 9 };
    (void)state;

    assert_int_equal(ember_client_open("ftp://x", NULL, &c), EMBER_EINVAL);
    assert_null(c);
    assert_non_null(strstr(ember_client_errmsg(NULL), "expected unix:PATH"));
    assert_int_equal(ember_client_open("unix:/nonexistent/ember.sock", NULL,
                                       &c), EMBER_OK);
    assert_int_equal(ember_client_query(c, "merge(x)", NULL, &r), EMBER_EIO);
    assert_null(r);
    assert_non_null(strstr(ember_client_errmsg(c), "server unix:/nonexistent"
                           "/ember.sock: cannot connect"));
    assert_int_equal(ember_client_label_names(c, NULL, &l), EMBER_EIO);
    assert_null(l);
    assert_int_equal(ember_client_label_values(c, "9bad", NULL, &l),
                     EMBER_EINVAL);
    assert_int_equal(ember_client_import(c, "a;b 1\n", 6, &o, NULL),
                     EMBER_EINVAL);
    assert_non_null(strstr(ember_client_errmsg(c), "unknown format 9"));
    ember_client_close(c);
    ember_client_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuts_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_out_of_memory, setup,
                                        teardown),
        cmocka_unit_test(test_client_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
