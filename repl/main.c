/*
** repl/main.c: the `ember` binary's entry point and its command table. The
** table is the one list of what ember can do: dispatch, `ember --help`,
** `ember help CMD` and `ember CMD --help` all read it, so a command cannot
** exist without its help.
**
** One rule for every command (issue 12): exit 0 on success, 1 when it ran
** and failed, 2 on a usage error; every message on stderr starts with
** "ember CMD: " (em_cli_fail), usage errors included (em_cli_usage,
** em_cli_bad_option, em_cli_args).
*/
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repl/cli.h"

static int cmd_help(int argc, char **argv);

const em_cmd em_commands[] = {
    { "import", "-d DIR|--server URL [--format auto|pprof|collapsed|perf] "
      "[-l k=v]... [--type T] [--name N] [--time T] [--window D] [--comm] "
      "[--max-size N] [--numeric-labels drop|series] FILE|DIR...",
      "store profiles from pprof, perf script or collapsed files",
      "Reads each FILE (a directory is read recursively, in name order),\n"
      "gunzips it when gzip'd and tells its format by content: pprof\n"
      "(Go's runtime/pprof and most profilers), `perf script` text, or\n"
      "collapsed stacks (`root;...;leaf VALUE` per line). A bad file is\n"
      "reported and writes nothing; the others go on; the exit status is 1\n"
      "when any failed. docs/ingest.md tells what each format becomes.\n"
      "  --format F   pprof, collapsed or perf instead of detecting\n"
      "  -l k=v       a series label on everything imported; repeat for more\n"
      "  --type T     profile type of collapsed and perf script input\n"
      "               (default collapsed:samples:count:samples:count:delta;\n"
      "               perf: perf_cpu:... for cpu-clock, perf_EVENT:...)\n"
      "  --name N     pprof: the name part of the profile types (default:\n"
      "               process_cpu, memory, goroutine, mutex, block by the\n"
      "               sample types)\n"
      "  --time T     the time of input that carries none (RFC 3339, unix s\n"
      "               or ms, now, -1h); perf script: of its first sample;\n"
      "               default: the file name when it is unix ms\n"
      "               (1732170000000.txt), else the file's mtime\n"
      "  --window D   perf script: one profile per thread per window (10s)\n"
      "  --comm       collapsed: the first frame is stackcollapse-perf's\n"
      "               comm-pid prefix; it becomes labels comm and pid\n"
      "  --max-size N largest input after gunzip (default 1G)\n"
      "  --numeric-labels drop|series\n"
      "               pprof: numeric sample labels (Go's bytes) are\n"
      "               dropped, their samples summed (default), or become\n"
      "               series labels\n"
      "  --server URL send each file to `ember serve` at unix:PATH or\n"
      "               http(s)://HOST:PORT instead of -d DIR (not with\n"
      "               --comm, --numeric-labels or --max-size)\n"
      "  --token-file F, --ca-file F  the server's token; its certificate\n",
      em_cmd_import, true },
    { "record", "-d DIR [--duration 30s] [--frequency 19] [--pid PID] "
      "[--window 10s] [-l k=v]... [-v]",
      "profile every process on this machine with eBPF for a while",
      "Samples the CPUs with an eBPF program (root, BTF and perf events\n"
      "needed; without them it says what is missing and writes nothing),\n"
      "symbolizes the user and kernel stacks, and writes one profile per\n"
      "process and thread name per window, labeled pid, comm, executable,\n"
      "cgroup, container_id and node, as both\n"
      "ebpf_cpu:samples:count:cpu:nanoseconds:delta and\n"
      "ebpf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta. Ctrl-C stops it\n"
      "early, after writing the last window. docs/sampling.md is the guide.\n"
      "  --duration D   how long (default 30s)\n"
      "  --frequency N  samples per second per CPU (default 19)\n"
      "  --pid PID      only this process; stop when it exits\n"
      "  --window D     write a profile per process every D (default 10s)\n"
      "  -l k=v         a label on every series; repeat for more\n"
      "  -v             a line per window on stderr\n",
      em_cmd_record, false },
    { "agent", "-d DIR|--push URL [--frequency 19] [--pid PID] "
      "[--window 10s] [-l k=v]... [-v] [--push-token-file F] "
      "[--push-buffer SIZE] [--push-spool DIR] [--compact-every 1h] "
      "[--compact-head D] [--compact-block D] [--compact-merge D] "
      "[--compact-retention R] [--compact-downsample S] "
      "[--compact-zstd-level N]",
      "profile continuously with eBPF until SIGINT or SIGTERM",
      "What `ember record` does, without an end: it runs until SIGINT or\n"
      "SIGTERM, then writes the last window and exits 0. Meant for a\n"
      "service manager (docs/sampling.md has a systemd unit). Options as\n"
      "ember record's, without --duration, and:\n"
      "  --push URL     send each window to a server too (without -d:\n"
      "                 instead): http://HOST:PORT, https://..., or\n"
      "                 unix:PATH; Pyroscope's /ingest (docs/server.md)\n"
      "  --push-token-file F  the bearer token, the file's content\n"
      "  --push-buffer SIZE   windows kept on disk while the server is\n"
      "                 away (default 256M); past it the oldest are dropped\n"
      "  --push-spool DIR     where (default DIR/push-spool, or\n"
      "                 /var/spool/ember/push without -d)\n"
      "  --compact-every D    with -d: run ember compact on DIR in the\n"
      "                 background every D (default 1h, 0: never); -v\n"
      "                 says each run\n"
      "  --compact-head D, --compact-block D, --compact-merge D,\n"
      "  --compact-retention R, --compact-downsample S,\n"
      "  --compact-zstd-level N\n"
      "                 each run's options, as ember compact's --head...\n",
      em_cmd_agent, false },
    { "query", "-d DIR|--server URL [--from T] [--to T] [--step D] [-o FORMAT] "
      "[--output-file F] [--limit N] [--cum] [--unit U] [--color WHEN] "
      "[--width N] 'QUERY'",
      "run a query and print its result",
      "Runs QUERY over the range (default: all stored time) and prints the\n"
      "result. A bare selector TYPE{label=\"value\", ...} merges what it\n"
      "matches; the language also has merge by, diff, focus, ignore, top,\n"
      "total, rate, sum/avg/max/min/count, topk and label metadata\n"
      "(docs/query-language.md).\n"
      "  -o FORMAT     profiles and diffs: top (default), tree, flame,\n"
      "                collapsed, pprof, svg, json; series: table\n"
      "                (default), csv, json, spark; tables: table, csv,\n"
      "                json. pprof is gzip'd protobuf for `go tool pprof`\n"
      "                (> out.pb.gz; never to a terminal)\n"
      "  --from T, --to T  the range: RFC 3339, unix s or ms, now, -1h\n"
      "  --step D      series: one point per D (30s, 5m, 1h) per series\n"
      "  --output-file F  write to F instead of stdout\n"
      "  --limit N     at most N rows of top and tree\n"
      "  --cum         sort top by cum instead of flat\n"
      "  --unit U      top's values in U as pprof's -unit: ns, us, ms, s,\n"
      "                B, kB, MB, GB, ...; auto scales each value on its\n"
      "                own; default: one unit picked as pprof does\n"
      "  --color WHEN  auto (default: when stdout is a terminal and\n"
      "                NO_COLOR is unset), always or never\n"
      "  --width N     columns for flame and tables (default: the\n"
      "                terminal's, else 100)\n"
      "  --server URL  run it on `ember serve` at unix:PATH or\n"
      "                http://HOST:PORT instead of -d DIR: the same output\n"
      "  --token-file F  the server's bearer token, with --server\n"
      "  --ca-file F   https: trust the PEM certificates in F\n",
      em_cmd_query, true },
    { "repl", "-d DIR|--server URL",
      "ask questions interactively, or run a script from stdin",
      "An interactive shell for queries: line editing, history in\n"
      "$EMBER_HISTORY (default ~/.ember_history), multi-line input while\n"
      "brackets or quotes are open, tab completion of functions, types,\n"
      "labels and values, and dot commands (.help lists them). When stdin\n"
      "is not a terminal it runs the statements it reads, one per line,\n"
      "and exits 1 if any failed: echo 'merge(cpu)' | ember repl -d DB.\n"
      "With --server URL (--token-file F, --ca-file F) it asks `ember\n"
      "serve` instead, completion included. docs/repl.md is the guide.\n",
      em_cmd_repl, false },
    { "serve", "-d DIR [--listen unix:PATH|tcp:[ADDR:]PORT]... "
      "[--token-file F] [--tls-cert F --tls-key F] [--access-log F|-|off] "
      "[--max-body N] [--max-connections N] [--threads N] "
      "[--idle-timeout S] [--query-timeout D] [--query-memory N] "
      "[--source-path DIRS] [--compact-every D] [--compact-head D] [--compact-block D] "
      "[--compact-merge D] [--compact-retention R] "
      "[--compact-downsample S] [--compact-zstd-level N]",
      "serve the database over HTTP until SIGINT or SIGTERM",
      "Answers Ember's HTTP API (docs/protocol.md) on a Unix socket, by\n"
      "default DIR/ember.sock (mode 0600), and on each --listen. TCP binds\n"
      "loopback unless an address is named, which needs --token-file:\n"
      "then every request but /healthz and /readyz must carry\n"
      "Authorization: Bearer TOKEN. SIGINT or SIGTERM stop accepting,\n"
      "let the requests in flight and a compaction in progress finish,\n"
      "sync and exit 0. docs/server.md is the guide.\n"
      "  --listen L          unix:PATH, tcp:PORT (loopback), tcp:ADDR:PORT\n"
      "                      or tcp:[V6]:PORT; repeat for more\n"
      "  --token-file F      the bearer token, the file's first line\n"
      "  --tls-cert F        PEM certificate and key: HTTPS on every TCP\n"
      "  --tls-key F         listener\n"
      "  --access-log F      a line per request: F appended to, - (stderr,\n"
      "                      the default) or off\n"
      "  --max-body N        largest request body (default 256M): 413\n"
      "  --max-connections N open connections (default 2048): 503 past it\n"
      "  --threads N         threads per listener (default 4)\n"
      "  --idle-timeout S    close a connection idle this long (120)\n"
      "  --query-timeout D   a query's time (default 30s, 0: none): 504;\n"
      "                      a request's timeout parameter may lower it\n"
      "  --query-memory N    a query's memory (default 1G, 0: none): 422\n"
      "  --source-path DIRS  list() shows source text read from the files\n"
      "                      profiles name, as pprof's -source_path (':'\n"
      "                      between directories); default: never read,\n"
      "                      line numbers alone. Only for trusted profiles\n"
      "  --compact-every D   run ember compact in the background every D\n"
      "                      (default 1h, the first after 0.5 to 1.5 D;\n"
      "                      0: never); a line per run on stderr\n"
      "  --compact-head D, --compact-block D, --compact-merge D,\n"
      "  --compact-retention R, --compact-downsample S,\n"
      "  --compact-zstd-level N\n"
      "                      each run's options, as ember compact's\n"
      "                      --head, --block, ... (see ember help compact)\n",
      em_cmd_serve, false },
    { "stats", "-d DIR|--server URL",
      "print what the database holds and its size",
      "Series, profiles, samples, distinct stacks, functions, locations,\n"
      "bytes on disk by table and bytes per sample. With --server URL\n"
      "(unix:PATH or http://HOST:PORT, --token-file F) a server's.\n",
      em_cmd_stats,
      true },
    { "compact", "-d DIR [--head D] [--block D] [--merge D] "
      "[--retention RULES] [--downsample SPEC] [--zstd-level N] [--dry-run]",
      "move old data into blocks and give space back (the nightly job)",
      "Seals the open heads, moves the profiles older than --head (default\n"
      "1h, 0: all) into immutable, compressed blocks of --block each\n"
      "(default 2h), rebuilds the head without the stacks, functions and\n"
      "strings nothing names any more, and punches the freed pages out of\n"
      "the data file. Imports, queries and servers may run meanwhile: they\n"
      "see the database before or after, never between. Prints what each\n"
      "step did; exit 1 with a message naming what failed. --dry-run says\n"
      "how many blocks it would write. docs/operations.md is the guide.\n"
      "  --merge D       merge the blocks of each whole window of D (1d)\n"
      "  --retention R   how long data is kept: 'memory:*=7d,30d' keeps\n"
      "                  memory profiles 7 days, the rest 30; a rule is\n"
      "                  [TYPE glob][{matchers}]=D, the first match wins\n"
      "  --downsample S  the resolutions kept: 'raw:2d,1m:14d,1h' keeps\n"
      "                  profiles as stored 2 days, per minute 14, per\n"
      "                  hour as long as retention does\n"
      "  --zstd-level N  zstd level of merged blocks, 1 to 22 (15); blocks\n"
      "                  cut from the head, merged later, are written at 3\n",
      em_cmd_compact, false },
    { "verify", "-d DIR", "check every table and chunk; exit 1 on damage",
      "Walks every chunk (checksums, decoding, stack references) and every\n"
      "table (records, references, hash indexes, postings) and prints each\n"
      "problem with what and where. Exit status 1 when damage was found.\n",
      em_cmd_verify, true },
    { "help", "[COMMAND]", "show help for a command", NULL, cmd_help,
      false },
};
const unsigned em_ncommands = sizeof em_commands / sizeof em_commands[0];

/* The arguments of the running command (what main passed it), for
** em_cli_bad_option to name the option getopt stopped at. */
static char **cli_argv;

int em_cli_fail(int status, const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "ember %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

static const em_cmd *cmd_find(const char *name)
{
    for (unsigned i = 0; i < em_ncommands; i++)
        if (strcmp(em_commands[i].name, name) == 0)
            return &em_commands[i];
    return NULL;
}

int em_cli_usage(const char *name)
{
    const em_cmd *c = cmd_find(name);
    if (c != NULL)
        em_cli_fail(2, name, "usage: ember %s %s", c->name, c->usage);
    return 2;
}

int em_cli_bad_option(const char *cmd, int c)
{
    const char *arg = cli_argv != NULL && optind > 0 ? cli_argv[optind - 1]
                                                     : "?";
    int len = (int)strcspn(arg, "=");

    if (c == ':')
        em_cli_fail(2, cmd, "%.*s needs a value", len, arg);
    else if (optopt != 0)
        em_cli_fail(2, cmd, "unknown option -%c", optopt);
    else
        em_cli_fail(2, cmd, "unknown option %.*s", len, arg);
    return em_cli_usage(cmd);
}

int em_cli_args(const char *cmd, const char *dir, int argc, char **argv,
                int min, int max)
{
    const em_cmd *c = cmd_find(cmd);
    const char *what = c != NULL ? strrchr(c->usage, ' ') : NULL;
    int n = argc - optind;

    if (dir == NULL)
        em_cli_fail(2, cmd, "missing -d DIR, the database directory%s",
                    c != NULL && strstr(c->usage, "--server") != NULL
                        ? " (or --server URL)" : "");
    else if (n < min)
        em_cli_fail(2, cmd, "missing %s", what != NULL ? what + 1 : "an "
                    "argument");
    else if (n > max)
        em_cli_fail(2, cmd, "unexpected argument \"%s\"", argv[optind + max]);
    else
        return 0;
    return em_cli_usage(cmd);
}

const char *em_cli_dir_arg(const char *cmd, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { NULL, 0, NULL, 0 },
    };
    const char *dir = NULL;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:", longs, NULL)) != -1) {
        if (c != 'd') {
            em_cli_bad_option(cmd, c);
            return NULL;
        }
        dir = optarg;
    }
    return em_cli_args(cmd, dir, argc, argv, 0, 0) == 0 ? dir : NULL;
}

int em_cli_label(char *arg, ember_label *out)
{
    char *eq = strchr(arg, '=');

    if (eq == NULL || eq == arg)
        return EMBER_EINVAL;
    *eq = '\0';
    out->name = arg;
    out->value = eq + 1;
    return EMBER_OK;
}

int em_cli_open(const char *cmd, const char *dir, int rdonly, ember_db **db)
{
    ember_open_opts o = { .sz = sizeof o };
    int rc;

    if (rdonly)
        o.flags = EMBER_OPEN_RDONLY;
    rc = ember_open(dir, &o, db);
    if (rc != EMBER_OK) {
        em_cli_fail(1, cmd, "%s", ember_errmsg(*db));
        ember_close(*db);
        *db = NULL;
    }
    return rc;
}

int em_cli_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || v == 0 || s[0] < '0' || s[0] > '9')
        return -1;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > UINT64_MAX >> shift)
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int64_t em_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage_all(FILE *f)
{
    fprintf(f, "ember %s: an embedded time-series database for profiles\n\n"
            "usage: ember COMMAND [ARGS]\n"
            "       ember COMMAND --help\n"
            "       ember --help | --version\n\ncommands:\n",
            EMBER_VERSION_STRING);
    for (unsigned i = 0; i < em_ncommands; i++)
        fprintf(f, "  %-8s %s\n", em_commands[i].name, em_commands[i].summary);
    fprintf(f, "\noptions:\n"
            "  --help    this list (also -h)\n"
            "  --version the version of ember\n"
            "\n`ember help COMMAND` or `ember COMMAND --help` shows a "
            "command's arguments.\nExit status: 0 success, 1 failure, 2 "
            "usage error.\n");
}

/* A command's usage and help on stdout, for `ember help CMD` and
** `ember CMD --help`. */
static int cmd_usage_help(const em_cmd *c)
{
    printf("usage: ember %s %s\n\n%s\n", c->name, c->usage, c->summary);
    if (c->help != NULL)
        printf("\n%s", c->help);
    return 0;
}

static int cmd_help(int argc, char **argv)
{
    const em_cmd *c;

    if (argc > 1 && argv[1][0] == '-') {
        em_cli_fail(2, "help", "unknown option %s", argv[1]);
        return em_cli_usage("help");
    }
    if (argc > 2) {
        em_cli_fail(2, "help", "unexpected argument \"%s\"", argv[2]);
        return em_cli_usage("help");
    }
    if (argc < 2) {
        usage_all(stdout);
        return 0;
    }
    c = cmd_find(argv[1]);
    if (c == NULL)
        return em_cli_fail(2, "help", "no command \"%s\" (`ember --help` "
                           "lists them)", argv[1]);
    return cmd_usage_help(c);
}

/* True when ARGV (a command's arguments) asks for its help: --help or -h
** before any "--". */
static bool help_asked(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

/* A command that runs once and exits gains nothing from handing freed
** memory back to the kernel: glibc mmaps each block over 128 KB (a merged
** profile's arrays, a pprof being packed) and munmaps it when freed, and
** trims the heap's top, so the same pages are faulted in, zeroed and
** unmapped again within one query. Keeping them in the heap measured
** about 5% of a 4 ms `ember query -o pprof` (bench/pprof.sh). */
static void keep_heap(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);    /* glibc's largest on 64-bit */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int main(int argc, char **argv)
{
    const em_cmd *c;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage_all(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ember %s\n", EMBER_VERSION_STRING);
        return 0;
    }
    if (argv[1][0] == '-') {
        fprintf(stderr, "ember: unknown option %s (`ember --help` lists "
                "the commands)\n", argv[1]);
        return 2;
    }
    c = cmd_find(argv[1]);
    if (c == NULL) {
        fprintf(stderr, "ember: no command \"%s\" (`ember --help` lists "
                "them)\n", argv[1]);
        return 2;
    }
    if (help_asked(argc - 1, argv + 1))
        return cmd_usage_help(c);
    /* Each command says what is wrong with an option itself, prefixed by
    ** its name (em_cli_bad_option), instead of getopt's "query: ...". */
    opterr = 0;
    cli_argv = argv + 1;
    if (c->one_shot)
        keep_heap();
    return c->run(argc - 1, argv + 1);
}
