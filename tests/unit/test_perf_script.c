/*
** tests/unit/test_perf_script.c: the `perf script` decoder (ingest/
** perf_script.c): every header layout perf prints, frames with offsets,
** [unknown], kernel and C++ symbols, profiles per thread, event and window,
** the wall clock from --header, profile types, every bad input with its
** "ORIGIN:LINE: message", allocation failures, and the real captures in
** tests/data/perf.
**
** A decoded set is rendered as text so a test sees all of it at once:
**
**     P0 TYPE {name=value,...} t=TIME_MS d=DURATION_NS p=PERIOD
**     S0 FRAME;FRAME;... VALUE        (sample of P0, stack leaf first)
**
** a frame being FUNCTION@ADDR(DSO), with FUNCTION empty for a location
** without lines and (DSO) left out on the unknown mapping.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/perf"
#define T0 5000                 /* opts.time_ms of most tests */
#define SAMPLES "perf_cpu:samples:count:cpu:nanoseconds:delta"
#define NANOS "perf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"

/* ---- helpers ----------------------------------------------------------- */

static em_import_opts opts(void)
{
    em_import_opts o = { .sz = sizeof o, .origin = "t.perf", .time_ms = T0 };
    return o;
}

/* Writes location L of S as FUNCTION@ADDR(DSO). */
static void put_loc(FILE *f, const em_pset *s, uint32_t l)
{
    const em_pset_loc *loc = &s->locs[l];

    for (size_t i = 0; i < loc->nlines; i++)
        fprintf(f, "%s%s", i > 0 ? "|" : "",
                s->functions[s->lines[loc->first + i].function].name);
    fprintf(f, "@%llx", (unsigned long long)loc->address);
    if (loc->mapping > 0)
        fprintf(f, "(%s)", s->mappings[loc->mapping - 1].file);
}

/* Renders S (see the file comment); free the result. */
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
            if (k > 0)
                fputc(';', f);
            put_loc(f, s, s->pool[st->off + k]);
        }
        fprintf(f, " %lld\n", (long long)s->samples[i].value);
    }
    fclose(f);
    return text;
}

/* Decodes TEXT with O, expecting success and the rendering WANT. */
static void decode_ok_opts(const char *text, const em_import_opts *o,
                           const char *want)
{
    em_pset s = { 0 };
    int rc = em_perf_decode(text, strlen(text), o, &s);
    char *got;

    if (rc != EMBER_OK)
        fail_msg("decode failed (%d): %s", rc, em_errmsg());
    got = dump(&s);
    if (strcmp(got, want) != 0)
        fail_msg("got:\n%s\nwant:\n%s", got, want);
    free(got);
    em_pset_free(&s);
}

static void decode_ok(const char *text, const char *want)
{
    em_import_opts o = opts();
    decode_ok_opts(text, &o, want);
}

/* Decodes LEN bytes at TEXT, expecting code RC and the message WANT. */
static void decode_fails_n(const char *text, size_t len, int rc,
                           const char *want)
{
    em_import_opts o = opts();
    em_pset s = { 0 };

    assert_int_equal(em_perf_decode(text, len, &o, &s), rc);
    assert_string_equal(em_errmsg(), want);
    em_pset_free(&s);
}

static void decode_fails(const char *text, int rc, const char *want)
{
    decode_fails_n(text, strlen(text), rc, want);
}

/* The header of one cpu-clock sample of "prog" thread 5963. */
#define HDR(time) "prog  5963  " time ":    1001001 cpu-clock: \n"
#define PROG "{comm=prog,event=cpu-clock,tid=5963}"

/* ---- accepted input ---------------------------------------------------- */

static void test_basic(void **state)
{
    (void)state;
    decode_ok(HDR("2875.701812")
              "\t            118e hot+0x1e (/tmp/hot)\n"
              "\t            1149 main+0x9 (/tmp/hot)\n"
              "\t           2724a __libc_start_call_main+0x7a "
              "(/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
              "\n"
              HDR("2875.702812")
              "\t            1190 hot+0x20 (/tmp/hot)\n"
              "\t            1149 main+0x9 (/tmp/hot)\n",
              "P0 " SAMPLES " " PROG " t=5000 d=10000000000 p=1001001\n"
              "P1 " NANOS " " PROG " t=5000 d=10000000000 p=1001001\n"
              "S0 hot@118e(/tmp/hot);main@1149(/tmp/hot);"
              "__libc_start_call_main@2724a"
              "(/usr/lib/x86_64-linux-gnu/libc.so.6) 1\n"
              "S1 hot@118e(/tmp/hot);main@1149(/tmp/hot);"
              "__libc_start_call_main@2724a"
              "(/usr/lib/x86_64-linux-gnu/libc.so.6) 1001001\n"
              "S0 hot@1190(/tmp/hot);main@1149(/tmp/hot) 1\n"
              "S1 hot@1190(/tmp/hot);main@1149(/tmp/hot) 1001001\n");
}

static void test_dedup(void **state)
{
    em_import_opts o = opts();
    const char *in = HDR("1.0")
        "\t118e hot+0x1e (/tmp/hot)\n\t1149 main+0x9 (/tmp/hot)\n\n"
        HDR("1.1")
        "\t1190 hot+0x20 (/tmp/hot)\n\t1149 main+0x9 (/tmp/hot)\n\n"
        HDR("1.2")
        "\t118e hot+0x1e (/tmp/hot)\n\t1149 main+0x9 (/tmp/hot)\n";
    em_pset s = { 0 };

    (void)state;
    assert_int_equal(em_perf_decode(in, strlen(in), &o, &s), EMBER_OK);
    assert_int_equal(s.nmappings, 1);
    assert_int_equal(s.nfunctions, 2);         /* hot, main */
    assert_int_equal(s.nlocs, 3);              /* two addresses in hot */
    assert_int_equal(s.nstacks, 2);
    assert_int_equal(s.nprofiles, 2);
    assert_int_equal(s.profiles[0].nsamples, 3);
    em_pset_free(&s);
}

static void test_header_pid_tid_cpu(void **state)
{
    (void)state;
    /* -F +pid: PID/TID; system-wide: [CPU]; both */
    decode_ok("mt  8526/8528   2977.036588:    1001001 cpu-clock: \n"
              "\t122e spin+0x1e (/tmp/mt)\n"
              "\n"
              "mt 8526/8529 [001] 2977.036600: 1001001 cpu-clock:\n"
              "\t122e spin+0x1e (/tmp/mt)\n"
              "\n"
              "mt 8530 [000] 2977.036700: cpu-clock:\n"
              "\t122e spin+0x1e (/tmp/mt)\n",
              "P0 " SAMPLES " {comm=mt,event=cpu-clock,pid=8526,tid=8528} "
              "t=5000 d=10000000000 p=1001001\n"
              "P1 " NANOS " {comm=mt,event=cpu-clock,pid=8526,tid=8528} "
              "t=5000 d=10000000000 p=1001001\n"
              "P2 " SAMPLES " {comm=mt,event=cpu-clock,pid=8526,tid=8529} "
              "t=5000 d=10000000000 p=1001001\n"
              "P3 " NANOS " {comm=mt,event=cpu-clock,pid=8526,tid=8529} "
              "t=5000 d=10000000000 p=1001001\n"
              "P4 " SAMPLES " {comm=mt,event=cpu-clock,tid=8530} "
              "t=5000 d=10000000000 p=0\n"
              "S0 spin@122e(/tmp/mt) 1\n"
              "S1 spin@122e(/tmp/mt) 1001001\n"
              "S2 spin@122e(/tmp/mt) 1\n"
              "S3 spin@122e(/tmp/mt) 1001001\n"
              "S4 spin@122e(/tmp/mt) 1\n");
}

static void test_header_comm(void **state)
{
    (void)state;
    /* A comm with spaces, digits, ':', '/' and '-'; --ns times; modifiers
    ** kept in the label. */
    decode_ok("Web Content 42  31337  100.000000001: 250000 "
              "cpu-clock:ppp: \n\t10 f (/x)\n\n"
              "kworker/0:1-ev  17   100.5: 3 cpu-clock:u:\n\t10 f (/x)\n",
              "P0 " SAMPLES " {comm=Web Content 42,event=cpu-clock:ppp,"
              "tid=31337} t=5000 d=10000000000 p=250000\n"
              "P1 " NANOS " {comm=Web Content 42,event=cpu-clock:ppp,"
              "tid=31337} t=5000 d=10000000000 p=250000\n"
              "P2 " SAMPLES " {comm=kworker/0:1-ev,event=cpu-clock:u,tid=17} "
              "t=5000 d=10000000000 p=3\n"
              "P3 " NANOS " {comm=kworker/0:1-ev,event=cpu-clock:u,tid=17} "
              "t=5000 d=10000000000 p=3\n"
              "S0 f@10(/x) 1\nS1 f@10(/x) 250000\n"
              "S2 f@10(/x) 1\nS3 f@10(/x) 3\n");
}

static void test_no_callchain(void **state)
{
    (void)state;
    /* perf record without -g: right-aligned comm, the frame on the header
    ** line, no blank lines between events. */
    decode_ok("             hot  8401  2973.202734:    1001001 cpu-clock:"
              "      5564bd7eb20e hot+0x1e (/tmp/h2/hot)\n"
              "             hot  8401  2973.203727:    1001001 cpu-clock:"
              "      5564bd7eb246 warm+0x16 (/tmp/h2/hot)\n"
              "             hot  8401  2973.204727:    1001001 cpu-clock:"
              "      5564bd7eb20e hot+0x1e (/tmp/h2/hot)\n",
              "P0 " SAMPLES " {comm=hot,event=cpu-clock,tid=8401} t=5000 "
              "d=10000000000 p=1001001\n"
              "P1 " NANOS " {comm=hot,event=cpu-clock,tid=8401} t=5000 "
              "d=10000000000 p=1001001\n"
              "S0 hot@5564bd7eb20e(/tmp/h2/hot) 1\n"
              "S1 hot@5564bd7eb20e(/tmp/h2/hot) 1001001\n"
              "S0 warm@5564bd7eb246(/tmp/h2/hot) 1\n"
              "S1 warm@5564bd7eb246(/tmp/h2/hot) 1001001\n"
              "S0 hot@5564bd7eb20e(/tmp/h2/hot) 1\n"
              "S1 hot@5564bd7eb20e(/tmp/h2/hot) 1001001\n");
}

static void test_fields(void **state)
{
    (void)state;
    /* -F comm,tid,time,event,ip (no sym, no dso); ip,dso; ip,sym */
    decode_ok("hot  8307  2968.492543: cpu-clock: \n"
              "\t            120e\n\t            11cd\n\n"
              "hot  8307  2968.492600: cpu-clock: \n"
              "\t            120e (/tmp/h2/hot)\n\n"
              "hot  8307  2968.492700: cpu-clock: \n"
              "\t            120e hot\n",
              "P0 " SAMPLES " {comm=hot,event=cpu-clock,tid=8307} t=5000 "
              "d=10000000000 p=0\n"
              "S0 @120e;@11cd 1\n"
              "S0 @120e(/tmp/h2/hot) 1\n"
              "S0 hot@120e 1\n");
}

static void test_unknown_and_kernel(void **state)
{
    (void)state;
    decode_ok(HDR("1.0")
              "\tffffffff821f5127 exc_page_fault+0xd7 ([kernel.kallsyms])\n"
              "\t    5612c90714f0 [unknown] ([unknown])\n"
              "\t    5612c90714f8 [unknown] ([unknown])\n"
              "\t    5612c90714f0 [unknown] ([unknown])\n"
              "\t           14645 [unknown] (/lib/ld.so)\n"
              "\t               0 [unknown] ([unknown])\n",
              "P0 " SAMPLES " " PROG " t=5000 d=10000000000 p=1001001\n"
              "P1 " NANOS " " PROG " t=5000 d=10000000000 p=1001001\n"
              "S0 exc_page_fault@ffffffff821f5127([kernel.kallsyms]);"
              "@5612c90714f0;@5612c90714f8;@5612c90714f0;@14645(/lib/ld.so);"
              "@0 1\n"
              "S1 exc_page_fault@ffffffff821f5127([kernel.kallsyms]);"
              "@5612c90714f0;@5612c90714f8;@5612c90714f0;@14645(/lib/ld.so);"
              "@0 1001001\n");
}

static void test_cpp_symbols(void **state)
{
    em_import_opts o = opts();

    (void)state;
    o.type = "t:samples:count:cpu:nanoseconds";
    decode_ok_opts(HDR("1.0")
                   "\t10 foo(int, char const*)+0x12 (/lib/x.so)\n"
                   "\t20 std::function<void ()>::operator()() const+0x5 "
                   "(/usr/lib/libstdc++.so.6)\n"
                   "\t30 bar(std::map<int, std::pair<int, int> >&) "
                   "(/memfd:doublemapper (deleted))\n"
                   "\t40 baz(int)\n"
                   "\t50 operator new(unsigned long)+0x1c\n"
                   "\t60 qux+0x1+0x2 (/y)\n"
                   "\t70 +0x10 (/z)\n",
                   &o,
                   "P0 t:samples:count:cpu:nanoseconds " PROG " t=5000 "
                   "d=10000000000 p=1001001\n"
                   "S0 foo(int, char const*)@10(/lib/x.so);"
                   "std::function<void ()>::operator()() const@20"
                   "(/usr/lib/libstdc++.so.6);"
                   "bar(std::map<int, std::pair<int, int> >&)@30"
                   "(/memfd:doublemapper (deleted));"
                   "baz(int)@40;"
                   "operator new(unsigned long)@50;"
                   "qux+0x1@60(/y);@70(/z) 1\n");
}

static void test_tracepoint_and_records(void **state)
{
    (void)state;
    /* Trace data after the event; --show-*-events lines are skipped; a
    ** sample without frames (tracepoint, no -g) has an empty stack. */
    decode_ok("mt  8526  2977.035618: PERF_RECORD_MMAP2 8526/8526: [0x55b5df"
              "648000(0x1000) @ 0x1000 fe:00 10977563 889594586]: r-xp "
              "/tmp/h2/mt\n"
              "mt  8671 [001]  2989.165409: sched:sched_switch: prev_comm=mt "
              "prev_pid=8671 prev_prio=120 prev_state=R ==> next_comm=mt "
              "next_pid=8673 next_prio=120\n"
              "\tffffffff821facd8 __schedule+0x618 ([kernel.kallsyms])\n"
              "\n"
              "              mt 10287 [000]  3051.431861: sched:sched_switch: "
              "prev_comm=mt prev_pid=10287 prev_state=S ==> next_comm=mt\n"
              "swapper     0     0.000000: PERF_RECORD_COMM: perf-exec:8/8\n"
              "hot  8696  2990.372859:          1 page-faults: \n"
              "\tffffffff817554ea elf_load+0x28a ([kernel.kallsyms])\n",
              "P0 perf_sched_sched_switch:samples:count:sched_sched_switch:"
              "count:delta {comm=mt,event=sched:sched_switch,tid=8671} "
              "t=5000 d=10000000000 p=0\n"
              "P1 perf_sched_sched_switch:samples:count:sched_sched_switch:"
              "count:delta {comm=mt,event=sched:sched_switch,tid=10287} "
              "t=65000 d=10000000000 p=0\n"
              "P2 perf_page_faults:samples:count:page_faults:count:delta "
              "{comm=hot,event=page-faults,tid=8696} t=5000 d=10000000000 "
              "p=1\n"
              "P3 perf_page_faults:page_faults:count:page_faults:count:delta "
              "{comm=hot,event=page-faults,tid=8696} t=5000 d=10000000000 "
              "p=1\n"
              "S0 __schedule@ffffffff821facd8([kernel.kallsyms]) 1\n"
              "S1  1\n"
              "S2 elf_load@ffffffff817554ea([kernel.kallsyms]) 1\n"
              "S3 elf_load@ffffffff817554ea([kernel.kallsyms]) 1\n");
}

static void test_event_names(void **state)
{
    (void)state;
    /* cycles:P loses its modifier in the type, keeps it in the label;
    ** task-clock is a CPU clock; odd bytes become '_'. */
    decode_ok("a 1 1.0: 7 cycles:P:\n\t10 f (/x)\n\n"
              "a 1 1.0: 8 task-clock:\n\t10 f (/x)\n\n"
              "a 1 1.0: 9 cpu/mem-loads,ldlat=30/P:\n\t10 f (/x)\n",
              "P0 perf_cycles:samples:count:cycles:count:delta "
              "{comm=a,event=cycles:P,tid=1} t=5000 d=10000000000 p=7\n"
              "P1 perf_cycles:cycles:count:cycles:count:delta "
              "{comm=a,event=cycles:P,tid=1} t=5000 d=10000000000 p=7\n"
              "P2 " SAMPLES " {comm=a,event=task-clock,tid=1} t=5000 "
              "d=10000000000 p=8\n"
              "P3 " NANOS " {comm=a,event=task-clock,tid=1} t=5000 "
              "d=10000000000 p=8\n"
              "P4 perf_cpu_mem_loads_ldlat_30_P:samples:count:"
              "cpu_mem_loads_ldlat_30_P:count:delta "
              "{comm=a,event=cpu/mem-loads,ldlat=30/P,tid=1} t=5000 "
              "d=10000000000 p=9\n"
              "P5 perf_cpu_mem_loads_ldlat_30_P:cpu_mem_loads_ldlat_30_P:"
              "count:cpu_mem_loads_ldlat_30_P:count:delta "
              "{comm=a,event=cpu/mem-loads,ldlat=30/P,tid=1} t=5000 "
              "d=10000000000 p=9\n"
              "S0 f@10(/x) 1\nS1 f@10(/x) 7\n"
              "S2 f@10(/x) 1\nS3 f@10(/x) 8\n"
              "S4 f@10(/x) 1\nS5 f@10(/x) 9\n");
}

static void test_windows(void **state)
{
    em_import_opts o = opts();

    (void)state;
    /* First sample at 100.0 s: windows [100,110) [110,120) ..., so 109.999
    ** shares the first, 125 is window 2 and 99.5 (out of order) window -1. */
    decode_ok("a 1 100.0: c:\n\t1 f\n\n"
              "a 1 109.999: c:\n\t1 f\n\n"
              "a 1 125.0: c:\n\t1 f\n\n"
              "b 2 125.0: c:\n\t1 f\n\n"
              "a 1 99.5: c:\n\t1 f\n",
              "P0 perf_c:samples:count:c:count:delta {comm=a,event=c,tid=1} "
              "t=5000 d=10000000000 p=0\n"
              "P1 perf_c:samples:count:c:count:delta {comm=a,event=c,tid=1} "
              "t=25000 d=10000000000 p=0\n"
              "P2 perf_c:samples:count:c:count:delta {comm=b,event=c,tid=2} "
              "t=25000 d=10000000000 p=0\n"
              "P3 perf_c:samples:count:c:count:delta {comm=a,event=c,tid=1} "
              "t=-5000 d=10000000000 p=0\n"
              "S0 f@1 1\nS0 f@1 1\nS1 f@1 1\nS2 f@1 1\nS3 f@1 1\n");
    o.window_ms = 1000;
    decode_ok_opts("a 1 100.0: c:\n\t1 f\n\na 1 101.5: c:\n\t1 f\n", &o,
                   "P0 perf_c:samples:count:c:count:delta {comm=a,event=c,"
                   "tid=1} t=5000 d=1000000000 p=0\n"
                   "P1 perf_c:samples:count:c:count:delta {comm=a,event=c,"
                   "tid=1} t=6000 d=1000000000 p=0\n"
                   "S0 f@1 1\nS1 f@1 1\n");
}

static void test_labels_type_period(void **state)
{
    ember_label base[] = { { "service", "db" }, { "tid", "x" } };
    em_import_opts o = opts();

    (void)state;
    /* The import's labels come first; a clash gets exported_. With a type
    ** counting nanoseconds the value is the period; opts.period wins. */
    o.labels = base;
    o.nlabels = 2;
    o.type = "cpu:cpu:nanoseconds:cpu:nanoseconds:delta";
    o.period = 42;
    decode_ok_opts(HDR("1.0") "\t10 f (/x)\n", &o,
                   "P0 cpu:cpu:nanoseconds:cpu:nanoseconds:delta {comm=prog,"
                   "event=cpu-clock,exported_tid=5963,service=db,tid=x} "
                   "t=5000 d=10000000000 p=42\n"
                   "S0 f@10(/x) 1001001\n");
}

static void test_header_wall_clock(void **state)
{
    em_import_opts o = opts();
    const char *head =
        "# ========\n"
        "# captured on    : Sat Nov 21 10:00:00 2026\n"
        "# header version : 1\n"
        "# time of first sample : 3159.243105\n";

    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    o.type = "t:samples:count:cpu:nanoseconds";
    /* captured on = the end of the recording: the last sample 2.5 s after
    ** the first puts the first at 09:59:57.500. */
    char *in = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&in, &n);
    fprintf(f, "%s# time of last sample : 3161.743105\n# ========\n#\n"
            "a 1 3159.243105: c:\n\t1 f\n\na 1 3171.0: c:\n\t1 f\n"
            "# captured on    : Sat Nov 21 11:00:00 2026\n", head);
    fclose(f);
    decode_ok_opts(in, &o,
                   "P0 t:samples:count:cpu:nanoseconds {comm=a,event=c,tid=1} "
                   "t=1795255197500 d=10000000000 p=0\n"
                   "P1 t:samples:count:cpu:nanoseconds {comm=a,event=c,tid=1} "
                   "t=1795255207500 d=10000000000 p=0\n"
                   "S0 f@1 1\nS1 f@1 1\n");
    free(in);
    /* Without the last sample time: captured on is the first sample's;
    ** a malformed date is ignored. */
    decode_ok_opts("# captured on : Sat Nov 21 10:00:00 2026\n"
                   "a 1 7.0: c:\n\t1 f\n", &o,
                   "P0 t:samples:count:cpu:nanoseconds {comm=a,event=c,tid=1} "
                   "t=1795255200000 d=10000000000 p=0\n"
                   "S0 f@1 1\n");
    decode_ok_opts("# captured on : Sat Nox 21 10:00:00 2026\n"
                   "a 1 7.0: c:\n\t1 f\n", &o,
                   "P0 t:samples:count:cpu:nanoseconds {comm=a,event=c,tid=1} "
                   "t=5000 d=10000000000 p=0\n"
                   "S0 f@1 1\n");
}

/* perf script --header prints an argument of the recorded command line
** as given, so one with a line break runs on in lines without '#' (issue
** 15): inside the header block they are the field's, whatever they look
** like (an event header, a frame, a blank line); reading a pipe, perf
** prints the fields after the block and "# cmdline" runs to the next '#'. */
static void test_header_multiline_field(void **state)
{
    const char *events = "a 1 7.0: c:\n\t1 f\n";
    const char *want = "P0 perf_c:samples:count:c:count:delta {comm=a,"
                       "event=c,tid=1} t=5000 d=10000000000 p=0\nS0 f@1 1\n";
    char *in = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&in, &n);

    (void)state;
    fprintf(f, "# ========\n# captured on : Sat Nox 21 10:00:00 2026\n"
            "# cmdline : perf record -- sh -c true\n"
            "echo 12 34.5: y:\n\n\t./hot 4 \n  2 g (/x)\n"
            "# event : name = cpu-clock\n# ========\n#\n%s", events);
    fclose(f);
    decode_ok(in, want);
    free(in);
    in = NULL;
    f = open_memstream(&in, &n);
    fprintf(f, "# ========\n# captured on : Sat Nox 21 10:00:00 2026\n"
            "# ========\n#\n# hostname : vm\n# cmdline : sh -c a\n"
            "b 1 2.0: c:\n\t3 g\n# event : name = c\n%s", events);
    fclose(f);
    decode_ok(in, want);
    free(in);
    /* "# ========" alone is a comment, not perf's header */
    decode_ok("# ========\na 1 7.0: c:\n\t1 f\n# ========\n", want);
}

static void test_empty_and_odd_text(void **state)
{
    (void)state;
    decode_ok("", "");
    decode_ok("# only\n#\n\n  \n\r\n", "");
    /* CRLF, no final line end, a space-led frame line, a header with
    ** nothing after it at the end of the input */
    decode_ok("a 1 1.0: c:\r\n\t1 f (/x)\r\n    2 g (/x)\r\n\r\n"
              "a 1 1.1: c:\n\t3 h",
              "P0 perf_c:samples:count:c:count:delta {comm=a,event=c,tid=1} "
              "t=5000 d=10000000000 p=0\n"
              "S0 f@1(/x);g@2(/x) 1\nS0 h@3 1\n");
    decode_ok("a 1 1.0: c:", "P0 perf_c:samples:count:c:count:delta "
              "{comm=a,event=c,tid=1} t=5000 d=10000000000 p=0\nS0  1\n");
}

/* ---- rejected input ---------------------------------------------------- */

/* What a line that is not an event header is told. */
#define NOT_HDR "expected an event header 'COMM PID[/TID] [CPU] SECS.FRAC: " \
    "[PERIOD] EVENT:' (with a PID or a time stamp at least)"

static void test_bad_input(void **state)
{
    (void)state;
    decode_fails("hello world\n", EMBER_EINVAL, "t.perf:1: " NOT_HDR);
    decode_fails("\t118e hot+0x1e (/tmp/hot)\n", EMBER_EINVAL,
                 "t.perf:1: a frame line before any event header");
    decode_fails(HDR("1.0") "\t1 f\n\n\t2 g\n", EMBER_EINVAL,
                 "t.perf:4: a frame line outside an event (after a blank "
                 "line)");
    decode_fails(HDR("1.0") "\t1 f\n\nprog  two  2875.70", EMBER_EINVAL,
                 "t.perf:4: " NOT_HDR);
    decode_fails("prog  5963  2875.701812:  main (/x)", EMBER_EINVAL,
                 "t.perf:1: expected the event name and ':', a frame or the "
                 "line end after the time stamp");
    decode_fails(HDR("1.0") "\tzz f (/x)\n", EMBER_EINVAL, "t.perf:2: "
                 "expected a frame: a hex address, then the symbol and (DSO)");
    decode_fails(HDR("1.0") "\t12x f (/x)\n", EMBER_EINVAL, "t.perf:2: "
                 "expected a frame: a hex address, then the symbol and (DSO)");
    decode_fails(HDR("1.0") "\t11112222333344445 f (/x)\n", EMBER_EINVAL,
                 "t.perf:2: frame address wider than 64 bits");
    decode_fails(HDR("1.0") "  junk line\n", EMBER_EINVAL, "t.perf:2: "
                 "expected a frame: a hex address, then the symbol and (DSO)");
    decode_fails(HDR("1.0") "\t1 f\n  junk line\n", EMBER_EINVAL,
                 "t.perf:3: expected a frame: a hex address, then the symbol "
                 "and (DSO)");
    decode_fails(HDR("1.0") "  hot.c:6\n", EMBER_EINVAL, "t.perf:2: a "
                 "source line (perf script -F srcline) without a frame "
                 "before it");
    decode_fails("a 1 9000000001.0: c:\n", EMBER_EINVAL,
                 "t.perf:1: time stamp out of range");
    decode_fails("a 1 1.0: 1234567890123456789 c:\n", EMBER_EINVAL,
                 "t.perf:1: period out of range");
    decode_fails("a 1 1.0: c:\n\t1 f\n\x01\x02\x03\n", EMBER_EINVAL,
                 "t.perf:3: " NOT_HDR);
    decode_fails_n("a 1 1.0: c:\n\t1 f\x00g\n", 18, EMBER_EINVAL,
                   "t.perf:2: unexpected NUL byte: not perf script text");
    decode_fails_n("a\x00 1 1.0: c:\n\t1 f\n", 18, EMBER_EINVAL,
                   "t.perf:1: unexpected NUL byte: not perf script text");
    decode_fails_n("\x1f\x8b\x08\x00\x00\x00", 6, EMBER_EINVAL,
                   "t.perf:1: unexpected NUL byte: not perf script text");
}

/* The header's continuation lines take nothing else: garbage after the
** block is still an error at its line, and a block or "# cmdline" field
** that nothing ends is one at the first line it took. */
static void test_bad_header_block(void **state)
{
    (void)state;
    decode_fails("# ========\n# captured on : x\n# cmdline : a\nb\n"
                 "# ========\n#\nhello world\n", EMBER_EINVAL,
                 "t.perf:7: " NOT_HDR);
    decode_fails("# ========\nhello world\n", EMBER_EINVAL,
                 "t.perf:2: " NOT_HDR);
    decode_fails("#\n# ========\n# captured on : x\n# cmdline : a\n\nb\n"
                 "a 1 7.0: c:\n\t1 f\n# time of last sample : 8.0\n",
                 EMBER_EINVAL, "t.perf:6: taken as part of the perf script "
                 "--header block of line 2, which no '# ========' line "
                 "closes");
    decode_fails("# cmdline : a\nb 1 7.0: c:\n\t1 f\n", EMBER_EINVAL,
                 "t.perf:2: taken as part of the '# cmdline' header field "
                 "of line 1, which no '#' line ends");
}

static void test_bad_label_value(void **state)
{
    char in[700];

    (void)state;
    /* A comm the engine would refuse fails at its header's line. */
    memset(in, 'c', sizeof in);
    memcpy(in, "a 1 1.0: c:\n\t1 f\n\n", 18);
    memcpy(in + 518, " 2 1.0: c:\n\t1 f\n", 17);
    in[535] = '\0';
    decode_fails(in, EMBER_ELIMIT, "t.perf:4: label comm: value of 500 "
                 "bytes (at most 400)");
}

static void test_limits(void **state)
{
    size_t n = EM_PSET_MAX_DEPTH + 1, len = 0;
    char *deep = malloc(64 + n * 8), *line;
    em_import_opts o = opts();
    em_pset s = { 0 };

    (void)state;
    len += (size_t)sprintf(deep, "a 1 1.0: c:\n");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(deep + len, "\t%zx f\n", i);
    /* EM_PSET_MAX_DEPTH frames pass, one more is too many */
    assert_int_equal(em_perf_decode(deep, len - 8, &o, &s), EMBER_OK);
    assert_int_equal(s.max_depth, EM_PSET_MAX_DEPTH);
    em_pset_free(&s);
    decode_fails_n(deep, len, EMBER_ELIMIT, "t.perf:4098: more than 4096 "
                   "frames in one stack");
    free(deep);

    /* a line of 1 MiB passes (as a frame), one byte more does not */
    line = malloc((1u << 20) + 64);
    len = (size_t)sprintf(line, "a 1 1.0: c:\n\t1 ");
    memset(line + len, 'x', (1u << 20) - 3);       /* 1 MiB with "\t1 " */
    len += (1u << 20) - 3;
    line[len] = '\n';
    assert_int_equal(em_perf_decode(line, len + 1, &o, &s), EMBER_OK);
    assert_int_equal(s.nfunctions, 1);
    em_pset_free(&s);
    line[len] = 'x';
    line[len + 1] = '\n';
    decode_fails_n(line, len + 2, EMBER_ELIMIT, "t.perf:2: line longer than "
                   "1048576 bytes");
    /* without any line end, too */
    decode_fails_n(line + 12, len + 1 - 12, EMBER_ELIMIT,
                   "t.perf:1: line longer than 1048576 bytes");
    free(line);
}

static void test_bad_opts(void **state)
{
    em_import_opts o = opts();
    em_pset s = { 0 };

    (void)state;
    o.type = "nope";
    assert_int_equal(em_perf_decode("", 0, &o, &s), EMBER_EINVAL);
    o = opts();
    o.window_ms = INT64_MAX;
    assert_int_equal(em_perf_decode("", 0, &o, &s), EMBER_EINVAL);
    assert_string_equal(em_errmsg(), "t.perf: window of 9223372036854775807 "
                        "ms out of range");
    assert_int_equal(em_perf_decode(NULL, 3, NULL, &s), EMBER_EINVAL);
    /* NULL options: defaults, origin <input> */
    assert_int_equal(em_perf_decode("x\n", 2, NULL, &s), EMBER_EINVAL);
    assert_string_equal(em_errmsg(), "<input>:1: " NOT_HDR);
    em_pset_free(&s);
}

/* ---- allocation failures ----------------------------------------------- */

static void test_oom(void **state)
{
    const char *in =
        "a 1/2 1.0: 5 cpu-clock:\n\t10 f+0x1 (/x)\n\t20 [unknown] (/y)\n\n"
        "b 3 2.0: 5 cpu-clock:\n\t10 f+0x1 (/x)\n\t30 g(int) (/z)\n\n"
        "b 3 3.0: 5 cpu-clock:\n\t10 i (inlined)\n  i.c:3\n\t10 f+0x1 (/x)\n"
        "  f.c:9\n\t40 j (inlined)\n\n"
        "b 3 20.0: 5 other:\n\t40 h (/z)\n\n"
        "b 4 20.0: 5 other:      50 k (/z)\n";
    ember_label base[] = { { "tid", "x" } };
    em_import_opts o = opts();
    int rc = EMBER_ENOMEM;
    uint64_t n;

    (void)state;
    o.labels = base;
    o.nlabels = 1;
    for (n = 1; rc == EMBER_ENOMEM; n++) {
        em_pset s = { 0 };
        em_alloc_fail_at(n);
        rc = em_perf_decode(in, strlen(in), &o, &s);
        em_alloc_fail_at(0);
        if (rc == EMBER_ENOMEM)
            assert_true(strlen(em_errmsg()) > 0);
        else
            assert_int_equal(s.nsamples, 10);
        em_pset_free(&s);
    }
    assert_int_equal(rc, EMBER_OK);
    assert_true(n > 10);
}

/* ---- the real captures ------------------------------------------------- */

/* Counts the events of perf script text and those whose leaf frame is in
** function FN (" FN+0x" on it), reading the text independently of the
** decoder: a header is a line that does not start with a tab or '#' and is
** not empty; its leaf is the next line when that starts with a tab, else
** the header line itself (perf record without -g). */
static void count_events(const char *text, const char *fn, uint64_t *events,
                         uint64_t *in_fn)
{
    char want[64];
    const char *p = text;
    bool pending = false, hdr_fn = false;

    snprintf(want, sizeof want, " %s+0x", fn);
    *events = *in_fn = 0;
    while (*p != '\0') {
        const char *eol = strchr(p, '\n');
        size_t n = eol != NULL ? (size_t)(eol - p) : strlen(p);
        bool has_fn = memmem(p, n, want, strlen(want)) != NULL;
        if (p[0] == '\t' && pending) {
            *in_fn += has_fn;
            pending = false;            /* only the leaf counts */
        } else if (p[0] != '\t' && p[0] != '#' && n > 0) {
            *in_fn += pending && hdr_fn;
            (*events)++;
            pending = true;
            hdr_fn = has_fn;
        } else if (n == 0) {
            *in_fn += pending && hdr_fn;
            pending = false;
        }
        p += n + (eol != NULL);
    }
    *in_fn += pending && hdr_fn;
}

/* Sums the samples of type TYPE in S, and those whose leaf is FN. */
static void count_set(const em_pset *s, const char *type, const char *fn,
                      int64_t *total, int64_t *in_fn)
{
    *total = *in_fn = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        const em_pset_sample_ent *e = &s->samples[i];
        const em_pset_stack_ent *st = &s->stacks[e->stack];
        const em_pset_loc *l;
        if (strcmp(s->profiles[e->profile].type, type) != 0)
            continue;
        *total += e->value;
        if (st->n == 0)
            continue;
        l = &s->locs[s->pool[st->off]];
        if (l->nlines > 0 &&
            strcmp(s->functions[s->lines[l->first].function].name, fn) == 0)
            *in_fn += e->value;
    }
}

/* Decodes DATA_DIR/NAME and checks its sample count and FN's leaf count
** against a plain reading of the text; returns the set (free it) and FN's
** samples in *FN_SAMPLES. */
static void check_capture(const char *name, const char *fn, em_pset *s,
                          int64_t *fn_samples)
{
    char path[256];
    size_t len = 0;
    char *buf;
    em_import_opts o = opts();
    uint64_t events = 0, in_fn = 0;
    int64_t total, set_fn;

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    buf = tu_read_file(path, &len);
    if (buf == NULL)
        fail_msg("cannot read %s", path);
    o.origin = path;
    if (em_perf_decode(buf, len, &o, s) != EMBER_OK)
        fail_msg("%s", em_errmsg());
    count_events(buf, fn, &events, &in_fn);
    count_set(s, SAMPLES, fn, &total, &set_fn);
    assert_true(events > 20);
    assert_int_equal(total, events);
    assert_int_equal(set_fn, in_fn);
    assert_true(in_fn * 2 > events);            /* FN dominates */
    *fn_samples = set_fn;
    free(buf);
}

static void test_capture_hot(void **state)
{
    em_pset s = { 0 };
    int64_t hot;

    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    check_capture("hot.txt", "hot", &s, &hot);
    /* perf report --no-children --sort sym: hot 82 and warm 19 of 101 */
    assert_int_equal(hot, 82);
    assert_int_equal(s.nprofiles, 2);
    assert_int_equal(s.profiles[0].nsamples, 101);
    /* captured on 10:00:00 UTC, the last sample 100.804 ms after the first */
    assert_int_equal(s.profiles[0].time_ms, 1795255200000 - 100);
    assert_int_equal(s.profiles[0].period, 1001001);
    em_pset_free(&s);
}

static void test_capture_mt(void **state)
{
    em_pset s = { 0 };
    int64_t spin;

    (void)state;
    check_capture("mt.txt", "spin", &s, &spin);
    assert_int_equal(spin, 79);                 /* as perf report says */
    /* three threads of one process, each in its own two profiles */
    assert_int_equal(s.nprofiles, 6);
    for (size_t i = 0; i < s.nprofiles; i++) {
        const em_pset_profile *p = &s.profiles[i];
        assert_int_equal(p->nlabels, 4);
        assert_string_equal(p->labels[2].name, "pid");
        assert_string_equal(p->labels[2].value,
                            s.profiles[0].labels[2].value);
        assert_string_equal(p->labels[3].name, "tid");
        if (i % 2 == 1)
            assert_string_equal(p->labels[3].value,
                                s.profiles[i - 1].labels[3].value);
        else if (i > 0)
            assert_string_not_equal(p->labels[3].value,
                                    s.profiles[i - 2].labels[3].value);
    }
    em_pset_free(&s);
}

static void test_capture_nog(void **state)
{
    em_pset s = { 0 };
    int64_t hot;

    (void)state;
    check_capture("nog.txt", "hot", &s, &hot);
    assert_int_equal(hot, 26);                  /* as perf report says */
    assert_int_equal(s.max_depth, 1);
    em_pset_free(&s);
}

/* ---- every shape perf script -F prints (issue 12) ------------------- */

/* What of a frame shapes_match compares. */
enum { ADDR = 1, FUNC = 2, DSO = 4, SRC = 8 };

/* Decodes DATA_DIR/NAME into *S (zeroed first). */
static void decode_capture(const char *name, em_pset *s)
{
    char path[256];
    size_t len = 0;
    char *buf;
    em_import_opts o = opts();

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    buf = tu_read_file(path, &len);
    if (buf == NULL)
        fail_msg("cannot read %s", path);
    o.origin = path;
    memset(s, 0, sizeof *s);
    if (em_perf_decode(buf, len, &o, s) != EMBER_OK)
        fail_msg("%s", em_errmsg());
    free(buf);
}

/* True when sample E counts events: its type's sample type is "samples". */
static bool counted(const em_pset *s, const em_pset_sample_ent *e)
{
    return strstr(s->profiles[e->profile].type, ":samples:count:") != NULL;
}

/* Writes the stack of sample E (leaf first) with the parts WHAT names. */
static void put_stack(FILE *f, const em_pset *s, const em_pset_sample_ent *e,
                      unsigned what)
{
    const em_pset_stack_ent *st = &s->stacks[e->stack];

    for (size_t k = 0; k < st->n; k++) {
        const em_pset_loc *l = &s->locs[s->pool[st->off + k]];
        fputc(k > 0 ? ';' : '[', f);
        if (what & ADDR)
            fprintf(f, "%llx", (unsigned long long)l->address);
        for (size_t i = 0; (what & (FUNC | SRC)) && i < l->nlines; i++) {
            const em_pset_line *ln = &s->lines[l->first + i];
            const ember_function *fn = &s->functions[ln->function];
            fprintf(f, "%s%s", i > 0 ? "|" : " ", fn->name);
            if (what & SRC)
                fprintf(f, "@%s:%lld", fn->file != NULL ? fn->file : "",
                        (long long)ln->line);
        }
        if ((what & DSO) && l->mapping > 0)
            fprintf(f, " (%s)", s->mappings[l->mapping - 1].file);
    }
    fputs("]\n", f);
}

/* The counted samples of S, one stack per line, in the order read. */
static char *stacks_text(const em_pset *s, unsigned what, size_t *n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    *n = 0;
    for (size_t i = 0; i < s->nsamples; i++)
        if (counted(s, &s->samples[i])) {
            put_stack(f, s, &s->samples[i], what);
            (*n)++;
        }
    fclose(f);
    return text;
}

/* Decodes NAME, another `perf script -F` shape of the recording full.txt
** holds, and checks it has the same events with the same stacks in the
** parts WHAT names (what the shape printed). Returns the set (free it). */
static void shape_matches(const char *name, unsigned what, em_pset *s)
{
    em_pset ref;
    size_t n, nref;
    char *got, *want;

    decode_capture("full.txt", &ref);
    decode_capture(name, s);
    want = stacks_text(&ref, what, &nref);
    got = stacks_text(s, what, &n);
    assert_int_equal(nref, 27);             /* perf report: 22 hot, 5 warm */
    if (n != nref || strcmp(got, want) != 0)
        fail_msg("%s: %zu events, full.txt %zu:\n%.600s\nwant:\n%.600s",
                 name, n, nref, got, want);
    free(got);
    free(want);
    em_pset_free(&ref);
}

/* The label NAME of profile P, or NULL. */
static const char *plabel(const em_pset_profile *p, const char *name)
{
    for (size_t i = 0; i < p->nlabels; i++)
        if (strcmp(p->labels[i].name, name) == 0)
            return p->labels[i].value;
    return NULL;
}

/* full.txt: every field stackcollapse-perf.pl asks for, the reference. */
static void test_shape_full(void **state)
{
    em_pset s = { 0 };
    int64_t hot;

    (void)state;
    check_capture("full.txt", "hot", &s, &hot);
    assert_int_equal(hot, 22);                  /* as perf report says */
    assert_int_equal(s.nprofiles, 2);
    assert_string_equal(plabel(&s.profiles[0], "pid"), "25742");
    assert_string_equal(plabel(&s.profiles[0], "tid"), "25742");
    assert_string_equal(plabel(&s.profiles[0], "event"), "cpu-clock");
    em_pset_free(&s);
}

/* perf script --ns --no-inline -F comm,pid,tid,time,ip,sym,dso: no event
** (issue 12: "expected the event name and ':' after the time stamp"). */
static void test_shape_no_event(void **state)
{
    em_pset s;

    (void)state;
    shape_matches("noevent.txt", ADDR | FUNC | DSO, &s);
    assert_int_equal(s.nprofiles, 1);           /* no period printed */
    assert_string_equal(s.profiles[0].type,
                        "perf:samples:count:event:count:delta");
    assert_null(plabel(&s.profiles[0], "event"));
    assert_string_equal(plabel(&s.profiles[0], "comm"), "hot");
    assert_string_equal(plabel(&s.profiles[0], "pid"), "25742");
    em_pset_free(&s);
}

/* -F comm,tid,ip,sym,dso: no time stamp, no event. */
static void test_shape_no_time(void **state)
{
    em_pset s;

    (void)state;
    shape_matches("notime.txt", ADDR | FUNC | DSO, &s);
    assert_int_equal(s.nprofiles, 1);
    assert_string_equal(plabel(&s.profiles[0], "tid"), "25742");
    assert_int_equal(s.profiles[0].time_ms, T0);
    em_pset_free(&s);
}

/* -F tid,time,period,ip,sym,symoff,dso: no comm, a period, no event. */
static void test_shape_no_comm(void **state)
{
    em_pset s;

    (void)state;
    shape_matches("nocomm.txt", ADDR | FUNC | DSO, &s);
    assert_int_equal(s.nprofiles, 2);
    assert_string_equal(s.profiles[1].type,
                        "perf:period:count:event:count:delta");
    assert_null(plabel(&s.profiles[0], "comm"));
    assert_int_equal(s.profiles[0].period, 1001001);
    em_pset_free(&s);
}

/* -F comm,pid,tid,time,event,ip,sym (no dso) and -F comm,tid,time,event,ip
** (addresses only). */
static void test_shape_no_dso_no_sym(void **state)
{
    em_pset s;

    (void)state;
    shape_matches("nodso.txt", ADDR | FUNC, &s);
    assert_int_equal(s.nmappings, 0);
    em_pset_free(&s);
    shape_matches("ip.txt", ADDR, &s);
    assert_int_equal(s.nfunctions, 0);
    em_pset_free(&s);
}

/* -F comm,tid,time,event,sym,dso: without ip perf prints no call chain,
** so each event is a sample of an empty stack (as stackcollapse-perf.pl
** counts it under its comm). */
static void test_shape_no_ip(void **state)
{
    em_pset s;
    size_t n;

    (void)state;
    decode_capture("noip.txt", &s);
    free(stacks_text(&s, ADDR, &n));
    assert_int_equal(n, 27);
    assert_int_equal(s.nstacks, 1);
    assert_int_equal(s.max_depth, 0);
    em_pset_free(&s);
}

/* -F ...,srcline: "  hot.c:6" after each frame gives the line its number
** and the function its file; the stacks are those of full.txt. */
static void test_shape_srcline(void **state)
{
    em_pset s;
    size_t n;
    char *text;

    (void)state;
    shape_matches("srcline.txt", ADDR | FUNC | DSO, &s);
    text = stacks_text(&s, SRC, &n);
    assert_non_null(strstr(text, "[ hot@hot.c:6; level2@hot.c:15; "
                           "level1@hot.c:18; main@hot.c:21; "
                           "__libc_start_call_main@libc-start.c:74]\n"));
    assert_non_null(strstr(text, "[ warm@hot.c:11; level2@hot.c:16;"));
    free(text);
    em_pset_free(&s);
}

/* perf record without -g: the frame on the header line, here without an
** event (a period before it), and with its srcline on the next line. */
static void test_shape_no_callchain(void **state)
{
    em_pset s = { 0 }, t;
    int64_t total, hot;
    size_t n;
    char *text;

    (void)state;
    decode_capture("nogev.txt", &s);
    count_set(&s, "perf:samples:count:event:count:delta", "hot", &total,
              &hot);
    assert_int_equal(total, 27);
    assert_int_equal(hot, 22);                  /* as perf report says */
    assert_int_equal(s.profiles[0].period, 1001001);
    assert_int_equal(s.max_depth, 1);
    decode_capture("nogsrc.txt", &t);
    text = stacks_text(&t, FUNC | SRC, &n);
    assert_int_equal(n, 27);
    assert_non_null(strstr(text, "[ hot@hot.c:6]\n"));
    assert_non_null(strstr(text, "[ warm@hot.c:11]\n"));
    free(text);
    em_pset_free(&t);
    em_pset_free(&s);
}

/* perf record --call-graph dwarf, perf script: functions inlined at an
** address come first as "(inlined)" frames; they become lines of the
** location of the frame they were inlined into, innermost first. */
static void test_shape_inline(void **state)
{
    em_pset s;
    size_t n;
    char *text;

    (void)state;
    decode_capture("inline.txt", &s);
    text = stacks_text(&s, ADDR | FUNC | DSO, &n);
    assert_int_equal(n, 32);                    /* perf report: outer 32 */
    assert_non_null(strstr(text, "[11ea mix|inner|outer (/tmp/ember-perf/"
                           "inlg);1087 main (/tmp/ember-perf/inlg);27249 "
                           "__libc_start_call_main (/usr/lib/x86_64-linux-"
                           "gnu/libc.so.6);27304 __libc_start_main_impl;"
                           "1100 _start (/tmp/ember-perf/inlg)]\n"));
    assert_null(strstr(text, "(inlined)"));
    free(text);
    em_pset_free(&s);
}

/* How many times NEEDLE occurs in TEXT. */
static size_t count_of(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* perf record -g -- sh -c 'true<NL>echo 12 34.5: y:<NL><NL><TAB>./hot 4',
** perf script --header: the command line runs on in three lines without
** '#' (one like an event header, one blank, one TAB-led) inside the
** header block; the samples are hot's alone (issue 15). */
static void test_capture_cmdline(void **state)
{
    em_pset s;
    size_t n;
    char *text;
    const char *chain = "level2 (/tmp/ember-perf/hot); level1 (/tmp/ember-"
                        "perf/hot); main (/tmp/ember-perf/hot); "
                        "__libc_start_call_main (/usr/lib/x86_64-linux-gnu/"
                        "libc.so.6)]\n";
    char hot[256], warm[256];

    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    decode_capture("cmdline.txt", &s);
    text = stacks_text(&s, FUNC | DSO, &n);
    snprintf(hot, sizeof hot, "[ hot (/tmp/ember-perf/hot); %s", chain);
    snprintf(warm, sizeof warm, "[ warm (/tmp/ember-perf/hot); %s", chain);
    assert_int_equal(n, 6);             /* perf report: hot 4, warm 2 */
    assert_int_equal(count_of(text, hot), 4);
    assert_int_equal(count_of(text, warm), 2);
    free(text);
    assert_int_equal(s.nprofiles, 2);   /* hot's counts and nanoseconds */
    assert_string_equal(plabel(&s.profiles[0], "comm"), "hot");
    assert_string_equal(plabel(&s.profiles[0], "tid"), "23044");
    /* the wall clock from the fields after the command line: captured on
    ** 10:36:44 UTC, the last sample 12.020 ms after the first */
    assert_int_equal(s.profiles[0].time_ms, 1795775804000 - 12);
    em_pset_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_dedup),
        cmocka_unit_test(test_header_pid_tid_cpu),
        cmocka_unit_test(test_header_comm),
        cmocka_unit_test(test_no_callchain),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_unknown_and_kernel),
        cmocka_unit_test(test_cpp_symbols),
        cmocka_unit_test(test_tracepoint_and_records),
        cmocka_unit_test(test_event_names),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_labels_type_period),
        cmocka_unit_test(test_header_wall_clock),
        cmocka_unit_test(test_header_multiline_field),
        cmocka_unit_test(test_empty_and_odd_text),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_bad_header_block),
        cmocka_unit_test(test_bad_label_value),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_capture_hot),
        cmocka_unit_test(test_capture_mt),
        cmocka_unit_test(test_capture_nog),
        cmocka_unit_test(test_capture_cmdline),
        cmocka_unit_test(test_shape_full),
        cmocka_unit_test(test_shape_no_event),
        cmocka_unit_test(test_shape_no_time),
        cmocka_unit_test(test_shape_no_comm),
        cmocka_unit_test(test_shape_no_dso_no_sym),
        cmocka_unit_test(test_shape_no_ip),
        cmocka_unit_test(test_shape_srcline),
        cmocka_unit_test(test_shape_no_callchain),
        cmocka_unit_test(test_shape_inline),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
