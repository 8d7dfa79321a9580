/*
** tests/unit/test_collapsed_decode.c: collapsed stacks into a profile set
** (ingest/collapsed_decode.c): one profile with the import's type, labels
** and times, frames as functions on mapping 0 / address 0, stacks leaf
** first; with comm_prefix one profile per "comm-pid" prefix; parse errors
** passed on; allocation failures.
**
** The set is rendered as in test_perf_script.c, frames by function name:
**
**     P0 TYPE {name=value,...} t=TIME_MS d=DURATION_NS p=PERIOD
**     S0 LEAF;...;ROOT VALUE
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
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"
#include "common/testutil.h"

#define TYPE EM_COLLAPSED_DEFAULT_TYPE

static em_import_opts opts(void)
{
    em_import_opts o = { .sz = sizeof o, .origin = "t.txt", .time_ms = 7000,
                         .duration_ns = 10, .period = 3 };
    return o;
}

/* Renders S; free the result. Every location must be mapping 0, address 0
** with one line of line number 0. */
static char *dump(const em_pset *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    tu_pset_dump_profiles(f, s);
    for (size_t i = 0; i < s->nsamples; i++) {
        const em_pset_stack_ent *st = &s->stacks[s->samples[i].stack];
        fprintf(f, "S%u ", s->samples[i].profile);
        for (size_t k = 0; k < st->n; k++) {
            const em_pset_loc *l = &s->locs[s->pool[st->off + k]];
            assert_int_equal(l->mapping, 0);
            assert_int_equal(l->address, 0);
            assert_int_equal(l->nlines, 1);
            assert_int_equal(s->lines[l->first].line, 0);
            fprintf(f, "%s%s", k > 0 ? ";" : "",
                    s->functions[s->lines[l->first].function].name);
        }
        fprintf(f, " %lld\n", (long long)s->samples[i].value);
    }
    fclose(f);
    return text;
}

static void decode_ok_opts(const char *text, const em_import_opts *o,
                           const char *want)
{
    em_pset s = { 0 };
    int rc = em_collapsed_decode(text, strlen(text), o, &s);
    char *got;

    if (rc != EMBER_OK)
        fail_msg("decode failed (%d): %s", rc, em_errmsg());
    got = dump(&s);
    if (strcmp(got, want) != 0)
        fail_msg("got:\n%s\nwant:\n%s", got, want);
    free(got);
    em_pset_free(&s);
}

static void test_one_profile(void **state)
{
    ember_label base[] = { { "service", "demo" } };
    em_import_opts o = opts();

    (void)state;
    o.labels = base;
    o.nlabels = 1;
    decode_ok_opts("main;run;compress(char const*, int) 42\n"
                   "# comment\n\nmain;idle 5\nmain;run;compress(char const*, "
                   "int) 8\n", &o,
                   "P0 " TYPE " {service=demo} t=7000 d=10 p=3\n"
                   "S0 compress(char const*, int);run;main 42\n"
                   "S0 idle;main 5\n"
                   "S0 compress(char const*, int);run;main 8\n");
    o.type = "memory:alloc_space:bytes:space:bytes";
    decode_ok_opts("a;b 1\n", &o, "P0 memory:alloc_space:bytes:space:bytes "
                   "{service=demo} t=7000 d=10 p=3\nS0 b;a 1\n");
}

/* A type of its own by default, not Go's process_cpu (issue 12: collapsed,
** perf and Go samples summed silently into one type); --type still wins. */
static void test_default_type(void **state)
{
    em_import_opts o = opts();

    (void)state;
    decode_ok_opts("a;b 1\n", &o, "P0 collapsed:samples:count:samples:"
                   "count:delta {} t=7000 d=10 p=3\nS0 b;a 1\n");
    o.type = "process_cpu:samples:count:cpu:nanoseconds:delta";
    decode_ok_opts("a;b 1\n", &o, "P0 process_cpu:samples:count:cpu:"
                   "nanoseconds:delta {} t=7000 d=10 p=3\nS0 b;a 1\n");
}

static void test_dedup_and_empty(void **state)
{
    em_import_opts o = opts();
    em_pset s = { 0 };
    const char *in = "a;b;c 1\na;b;c 2\nx;b 3\n";

    (void)state;
    assert_int_equal(em_collapsed_decode(in, strlen(in), &o, &s), EMBER_OK);
    assert_int_equal(s.nfunctions, 4);
    assert_int_equal(s.nlocs, 4);
    assert_int_equal(s.nstacks, 2);
    assert_int_equal(s.nmappings, 0);
    assert_int_equal(s.profiles[0].nsamples, 3);
    em_pset_free(&s);
    /* no stack line: no profile at all */
    decode_ok_opts("# nothing\n\n", &o, "");
    decode_ok_opts("", NULL, "");
}

static void test_comm_prefix(void **state)
{
    em_import_opts o = opts();

    (void)state;
    o.comm_prefix = true;
    decode_ok_opts("java-123;main;run 5\n"
                   "bash;main 1\n"
                   "java-123;main;gc 2\n"
                   "my-app-9/10;f 4\n"
                   "kworker/0:1-events;worker 3\n"
                   "java-456;main 6\n"
                   "x-12a;f 1\n"
                   "-7;f 1\n"
                   "lonely-1 9\n", &o,
                   "P0 " TYPE " {comm=java,pid=123} t=7000 d=10 p=3\n"
                   "P1 " TYPE " {comm=bash} t=7000 d=10 p=3\n"
                   "P2 " TYPE " {comm=my-app,pid=9,tid=10} t=7000 d=10 p=3\n"
                   "P3 " TYPE " {comm=kworker/0:1-events} t=7000 d=10 p=3\n"
                   "P4 " TYPE " {comm=java,pid=456} t=7000 d=10 p=3\n"
                   "P5 " TYPE " {comm=x-12a} t=7000 d=10 p=3\n"
                   "P6 " TYPE " {pid=7} t=7000 d=10 p=3\n"
                   "P7 " TYPE " {comm=lonely,pid=1} t=7000 d=10 p=3\n"
                   "S0 run;main 5\n"
                   "S1 main 1\n"
                   "S0 gc;main 2\n"
                   "S2 f 4\n"
                   "S3 worker 3\n"
                   "S4 main 6\n"
                   "S5 f 1\n"
                   "S6 f 1\n"
                   "S7  9\n");
}

static void test_comm_prefix_labels(void **state)
{
    ember_label base[] = { { "pid", "mine" } };
    em_import_opts o = opts();

    (void)state;
    o.comm_prefix = true;
    o.labels = base;
    o.nlabels = 1;
    decode_ok_opts("sh-5;a 1\n", &o,
                   "P0 " TYPE " {comm=sh,exported_pid=5,pid=mine} t=7000 "
                   "d=10 p=3\nS0 a 1\n");
}

static void test_many_prefixes(void **state)
{
    em_import_opts o = opts();
    em_pset s = { 0 };
    char *in = malloc(20000 * 24), *p = in;

    (void)state;
    o.comm_prefix = true;
    for (int i = 0; i < 20000; i++)
        p += sprintf(p, "p-%d;f;g %d\n", i % 5000, i);
    assert_int_equal(em_collapsed_decode(in, (size_t)(p - in), &o, &s),
                     EMBER_OK);
    assert_int_equal(s.nprofiles, 5000);
    assert_int_equal(s.nsamples, 20000);
    assert_int_equal(s.nstacks, 1);
    for (size_t i = 0; i < s.nprofiles; i++)
        assert_int_equal(s.profiles[i].nsamples, 4);
    em_pset_free(&s);
    free(in);
}

static void test_errors(void **state)
{
    em_import_opts o = opts();
    em_pset s = { 0 };
    char *big;

    (void)state;
    assert_int_equal(em_collapsed_decode("a;b 1\nbroken\n", 13, &o, &s),
                     EMBER_EINVAL);
    assert_string_equal(em_errmsg(), "t.txt:2:7: expected a space and an "
                        "integer value at the end of the line");
    em_pset_free(&s);
    o.type = "bad";
    assert_int_equal(em_collapsed_decode("a 1\n", 4, &o, &s), EMBER_EINVAL);
    em_pset_free(&s);
    /* a comm over the engine's value limit fails at its line */
    o = opts();
    o.comm_prefix = true;
    big = malloc(600);
    memset(big, 'c', 600);
    memcpy(big, "a 1\n", 4);
    memcpy(big + 504, ";f 1\n", 6);
    assert_int_equal(em_collapsed_decode(big, strlen(big), &o, &s),
                     EMBER_ELIMIT);
    assert_string_equal(em_errmsg(), "t.txt:2: label comm: value of 500 "
                        "bytes (at most 400)");
    em_pset_free(&s);
    free(big);
}

static void test_oom(void **state)
{
    const char *in = "java-1;a;b 1\njava-2;a;c 2\nsh;a;b 3\nsh;d 4\n";
    ember_label base[] = { { "pid", "x" } };
    int rc = EMBER_ENOMEM;
    uint64_t n;

    (void)state;
    for (int prefix = 0; prefix < 2; prefix++) {
        em_import_opts o = opts();
        o.comm_prefix = prefix == 1;
        o.labels = base;
        o.nlabels = 1;
        rc = EMBER_ENOMEM;
        for (n = 1; rc == EMBER_ENOMEM; n++) {
            em_pset s = { 0 };
            em_alloc_fail_at(n);
            rc = em_collapsed_decode(in, strlen(in), &o, &s);
            em_alloc_fail_at(0);
            if (rc == EMBER_OK)
                assert_int_equal(s.nsamples, 4);
            em_pset_free(&s);
        }
        assert_int_equal(rc, EMBER_OK);
        assert_true(n > 5);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_profile),
        cmocka_unit_test(test_default_type),
        cmocka_unit_test(test_dedup_and_empty),
        cmocka_unit_test(test_comm_prefix),
        cmocka_unit_test(test_comm_prefix_labels),
        cmocka_unit_test(test_many_prefixes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_oom),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
