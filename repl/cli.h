/*
** repl/cli.h: the `ember` command line. One table of commands (name, usage,
** summary, handler) drives dispatch and help, as Redis's command table does;
** the REPL's dot commands have their own table (repl/repl_dot.c) that
** drives their dispatch, `.help` and completion the same way.
**
** Handlers return the process exit status: 0 on success, 1 when the command
** ran but found a problem (a failed file, a damaged database), 2 on a usage
** error. Errors go to stderr as one line "ember CMD: what: why"; a usage
** error adds the line "ember CMD: usage: ember CMD ARGS". main() answers
** `ember CMD --help` from the table before the handler runs, and turns off
** getopt's own messages: handlers pass its '?' and ':' to
** em_cli_bad_option (optstrings start with ':').
*/
#ifndef EM_CLI_H
#define EM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ember.h"

#define EM_MAX_CLI_LABELS 64

typedef struct em_cmd {
    const char *name;
    const char *usage;          /* arguments after the name */
    const char *summary;        /* one line for `ember --help` */
    const char *help;           /* the long text for `ember help NAME` */
    int (*run)(int argc, char **argv);
    bool one_shot;              /* runs once and exits: see keep_heap() */
} em_cmd;

extern const em_cmd em_commands[];
extern const unsigned em_ncommands;

int em_cmd_import(int argc, char **argv);
int em_cmd_query(int argc, char **argv);
int em_cmd_record(int argc, char **argv);
int em_cmd_agent(int argc, char **argv);
int em_cmd_repl(int argc, char **argv);
int em_cmd_stats(int argc, char **argv);
int em_cmd_verify(int argc, char **argv);
int em_cmd_compact(int argc, char **argv);
int em_cmd_serve(int argc, char **argv);

/* Prints "ember CMD: message" (printf-style) to stderr; returns STATUS. */
int em_cli_fail(int status, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints the usage line of CMD to stderr, as "ember CMD: usage: ...", and
** returns 2. */
int em_cli_usage(const char *cmd);
/* For getopt_long's '?' (unknown option) and ':' (an option without its
** value: the optstring must start with ':'), C: says which option and
** prints the usage; returns 2. */
int em_cli_bad_option(const char *cmd, int c);
/* After getopt: 0 when DIR was given and ARGV holds MIN to MAX operands
** after the options; else says what is missing or extra, prints the usage
** and returns 2. */
int em_cli_args(const char *cmd, const char *dir, int argc, char **argv,
                int min, int max);
/* The DIR of a command that takes only -d DIR; NULL (after a message for
** a stray argument) when the command line is anything else. */
const char *em_cli_dir_arg(const char *cmd, int argc, char **argv);
/* Splits "k=v" into a label (pointers into ARG, which it modifies). */
int em_cli_label(char *arg, ember_label *out);
/* Opens DIR for the command CMD (read-only when RDONLY); prints why not. */
int em_cli_open(const char *cmd, const char *dir, int rdonly, ember_db **db);
/* Parses bytes given as "512M", "2G", "64k" or "1000000" into *OUT; 0, or
** -1 for anything else (zero included). */
int em_cli_size(const char *s, uint64_t *out);
/* Milliseconds since the epoch, now. */
int64_t em_cli_now_ms(void);

/* ---- where the data is: -d DIR or --server URL (repl/source.c) ---------- */

/* getopt_long values of --server and --token-file. */
enum { EM_OPT_SERVER = 0x100, EM_OPT_TOKEN_FILE = 0x101,
       EM_OPT_CA_FILE = 0x102 };

typedef struct em_source_args {
    const char *dir;            /* -d DIR */
    const char *server;         /* --server unix:PATH|http://HOST:PORT */
    const char *token_file;     /* --token-file FILE, with --server */
    const char *ca_file;        /* --ca-file FILE: https trusts these */
} em_source_args;

/* A directory or a server: exactly one of the two is set once open. */
typedef struct em_source {
    ember_db *db;
    ember_client *client;
} em_source;

/* Takes option C (-d, --server, --token-file) into A: 1 when it was one
** of them, else 0. */
int em_source_option(em_source_args *a, int c, const char *arg);
/* After the options: 0, or 2 after a message when they clash. */
int em_source_check(const char *cmd, const em_source_args *a);
/* The arguments of a command that takes only where its data is (stats,
** repl): 0, or the exit status after a message. */
int em_source_only_args(const char *cmd, int argc, char **argv,
                        em_source_args *a);
/* Opens A's directory (read-only when RDONLY) or server into *S; prints
** why not. */
int em_source_open(const char *cmd, const em_source_args *a, int rdonly,
                   em_source *s);
void em_source_close(em_source *s);
/* em_query_run (FLAGS) or ember_client_query (no flags: the server's
** result carries what every format needs). */
int em_source_query(em_source *s, const char *text,
                    const ember_query_opts *o, unsigned flags,
                    ember_result **out);
/* Profile types, label names, a label's values of the series a selector
** picks: MATCH, its text, goes to a server, SEL, its parse, to a
** directory; both NULL: every series. */
int em_source_types(em_source *s, const char *match,
                    const ember_selector *sel, ember_strlist **out);
int em_source_label_names(em_source *s, const char *match,
                          const ember_selector *sel, ember_strlist **out);
int em_source_label_values(em_source *s, const char *name, const char *match,
                           const ember_selector *sel, ember_strlist **out);
int em_source_stats(em_source *s, ember_stats *out);

/* ---- compaction: its options (repl/compact_opts.c), and its runs in the
** background of `ember serve` and `ember agent` (repl/compact_sched.c;
** issue 15) ---------------------------------------------------------------- */

/* getopt_long values: every option of one compaction shares EM_OPT_COMPACT
** and is told apart by its name (em_compact_opt). */
enum { EM_OPT_COMPACT = 0x110, EM_OPT_COMPACT_EVERY = 0x111 };

/* The options of one compaction as getopt_long entries named PREFIX and
** the option's name: `ember compact` lists them bare (--head), serve and
** agent as "compact-" ones (--compact-head). A new field of
** ember_compact_opts is a line here and a case in em_compact_opt, and all
** three commands take it. */
#define EM_COMPACT_LONGOPTS(PREFIX) \
    { PREFIX "head", required_argument, NULL, EM_OPT_COMPACT }, \
    { PREFIX "block", required_argument, NULL, EM_OPT_COMPACT }, \
    { PREFIX "merge", required_argument, NULL, EM_OPT_COMPACT }, \
    { PREFIX "retention", required_argument, NULL, EM_OPT_COMPACT }, \
    { PREFIX "downsample", required_argument, NULL, EM_OPT_COMPACT }, \
    { PREFIX "zstd-level", required_argument, NULL, EM_OPT_COMPACT }

#define EM_COMPACT_MAX_RULES 32         /* --retention's */
#define EM_COMPACT_MAX_RES 8            /* --downsample's */

struct em_node;

/* One compaction's options and everything they point to (owned). */
typedef struct em_compact_args {
    ember_compact_opts o;
    ember_retention rules[EM_COMPACT_MAX_RULES];
    struct em_node *trees[EM_COMPACT_MAX_RULES];  /* the rules' matchers */
    char *types[EM_COMPACT_MAX_RULES];
    ember_resolution res[EM_COMPACT_MAX_RES];
} em_compact_args;

/* ember_compact's defaults. */
void em_compact_args_init(em_compact_args *a);
/* Frees what A owns (the retention rules); A may be used again. */
void em_compact_args_free(em_compact_args *a);
/* Sets the option NAME (an entry of EM_COMPACT_LONGOPTS, "compact-" or
** not) of A from ARG, which it may modify and point into: 0, or the exit
** status after a message naming it. */
int em_compact_opt(const char *cmd, const char *name, char *arg,
                   em_compact_args *a);
/* "compacted: 12.10 MiB -> 3.02 MiB on disk; 4 blocks cut from the head,
** 812 profiles moved out of it, 2 blocks removed" ("dry run: ..." when
** DRY) into BUF. */
void em_compact_summary(const ember_compact_report *r, bool dry, char *buf,
                        size_t n);

#define EM_COMPACT_EVERY_MS (3600 * 1000ll)    /* --compact-every's default */
#define EM_COMPACT_EVERY_MIN_MS 100            /* a shorter one is refused */

/* What --compact-every and the compaction options of serve and agent set. */
typedef struct em_compact_sched_opts {
    int64_t every_ms;           /* between runs; 0: none in the background */
    em_compact_args compact;    /* each run's (head, block, retention...) */
} em_compact_sched_opts;

/* Every hour, each run with ember_compact's defaults; free it with
** em_compact_args_free(&o->compact). */
void em_compact_sched_defaults(em_compact_sched_opts *o);
/* --compact-every ARG ("0": off) into O: 0, or 2 after a message. */
int em_compact_every_opt(const char *cmd, const char *arg,
                         em_compact_sched_opts *o);

/* What the background compactions have done, for /api/v1/status and
** /metrics. Counts are of runs that ended. */
typedef struct em_compact_sched_stats {
    int64_t every_ms;           /* 0: no scheduler */
    uint64_t runs;              /* whatever their result */
    uint64_t failed;            /* ended in an error other than busy */
    uint64_t busy;              /* skipped: another compaction held the
                                ** database (EMBER_EBUSY) */
    uint64_t freed_bytes;       /* per run bytes before - after, when > 0 */
    uint64_t blocks_written;    /* cut from the head */
    uint64_t blocks_removed;    /* merged, downsampled or retention's */
    bool running;               /* one runs now */
    int64_t next_ms;            /* unix ms of the next run; 0: none */
    int64_t last_ok_ms;         /* unix ms the last success ended; 0: none */
    /* the last run, when runs > 0 */
    int64_t last_ms;            /* unix ms it started */
    int64_t last_elapsed_ms;
    int last_rc;                /* EMBER_OK, EMBER_EBUSY or an error */
    char last_error[256];       /* its message; "" when it succeeded */
    ember_compact_report last;
} em_compact_sched_stats;

typedef struct em_compact_sched em_compact_sched;

/* Starts a thread that runs ember_compact on DB every O->every_ms (the
** first run at a random moment between a half and one and a half
** intervals from now), one run at a time, and says each on stderr as
** "ember CMD: ...": always when one fails or is skipped, when it
** succeeds only if VERBOSE. DB and O must outlive it. 0, or 1 after a
** message when the thread could not start. */
int em_compact_sched_start(ember_db *db, const em_compact_sched_opts *o,
                           const char *cmd, bool verbose,
                           em_compact_sched **out);
/* Asks the thread to stop, and returns: no run starts after this, and a
** run in progress goes on to its end (NULL: no-op). */
void em_compact_sched_stop(em_compact_sched *s);
/* Stops the thread, waits for a run in progress to end (saying so), and
** frees S (NULL: no-op). */
void em_compact_sched_free(em_compact_sched *s);
/* A copy of S's counts into OUT, taken under its lock (NULL S: zeros). */
void em_compact_sched_stats_get(em_compact_sched *s,
                                em_compact_sched_stats *out);

/* ---- output shared by `ember query` and the REPL (repl/repl_out.c) ------- */

/* Every output format, in the order messages and help list them. */
extern const char *const em_cli_formats[];
extern const size_t em_cli_nformats;

/* True when NAME is one of em_cli_formats. */
bool em_cli_format_known(const char *name);
/* Writes "a, b or c" into BUF (N bytes): the formats that render results
** of KIND (EMBER_RESULT_*), or all of them when KIND is 0. Returns BUF. */
const char *em_cli_format_list(int kind, char *buf, size_t n);
/* "profile", "diff", "series", "table" for messages. */
const char *em_cli_kind_name(int kind);
/* Resolves a --from/--to pair (either may be NULL; em_time_parse's forms,
** relative to NOW) into the inclusive range ember_query takes: both NULL
** is all time (0, 0); a missing FROM is the epoch and a missing TO is NOW.
** EMBER_OK or EMBER_EINVAL with a message. */
int em_cli_range(const char *from, const char *to, int64_t now,
                 int64_t *from_ms, int64_t *to_ms);
/* Summing several profiles of one series is right for delta types but
** adds up snapshots for the others: says so on stderr, as "WHO: note: ...",
** when a profile result of R summed more profiles than series. */
void em_cli_note_sums(const char *who, const ember_result *r);
/* The size of the terminal on FD; both 0 when FD is not a terminal. */
void em_cli_term_size(int fd, unsigned *cols, unsigned *rows);
/* Whether to color output going to F: a terminal, $NO_COLOR unset and
** $TERM not "dumb". */
bool em_cli_color_auto(FILE *f);

/* ---- the REPL (repl/cmd_repl.c, repl_dot.c, repl_complete.c) ------------- */

/* What tab completion offers in a spot, and what a dot command's first
** argument is (em_dot_cmd.complete). */
typedef enum em_complete_kind {
    EM_COMPLETE_NONE = 0,       /* nothing */
    EM_COMPLETE_QUERY,          /* a query (functions, types, labels...) */
    EM_COMPLETE_FORMAT,         /* an output format */
    EM_COMPLETE_LABEL,          /* a label name, then a selector */
    EM_COMPLETE_ONOFF,          /* on or off */
    EM_COMPLETE_OFF,            /* off (besides what the user types) */
    EM_COMPLETE_DOT             /* a dot command's name */
} em_complete_kind;

#define EM_REPL_VALUE_CACHE 8   /* labels whose values completion keeps */

/* Names read from the database for completion, read on first use and
** dropped after a failed statement or on .reload (the data may have
** changed under us). */
typedef struct em_repl_cache {
    ember_strlist *types;       /* profile types; NULL: not read yet */
    ember_strlist *names;       /* label names */
    char *value_name[EM_REPL_VALUE_CACHE];      /* owned */
    ember_strlist *values[EM_REPL_VALUE_CACHE]; /* values of value_name[i] */
    unsigned next;              /* slot the next label's values replace */
} em_repl_cache;

/* One REPL session's state. */
typedef struct em_repl {
    em_source src;              /* the directory or the server */
    ember_db *db;               /* src.db: NULL with --server */
    bool interactive;           /* stdin is a terminal: prompts, editing */
    bool failed;                /* a statement failed (script exit status) */
    bool quit;                  /* .quit ran */
    unsigned line;              /* script line of the statement's start */
    char *from, *to;            /* .range as typed, resolved at each query
                                ** so that "-1h" follows the clock; NULL:
                                ** open (both NULL: all time) */
    int64_t step_ms;            /* .step; 0: off */
    char *format;               /* .format; NULL: by result kind */
    bool timing;                /* .timing on */
    FILE *out;                  /* .output FILE; NULL: stdout */
    char *out_path;             /* its name, owned */
    size_t limit;               /* .limit: rows of top and tree; 0: cut at
                                ** the terminal's height instead */
    const char *pending;        /* the lines of an unfinished statement,
                                ** for completion's context; NULL: none */
    em_repl_cache cache;
} em_repl;

/* A dot command: ".name args". RUN gets the trimmed text after the name
** and returns 0, or 1 when it failed (having said why on stderr). */
typedef struct em_dot_cmd {
    const char *name;           /* ".format" */
    const char *args;           /* "FMT", for .help */
    const char *help;           /* one line */
    int (*run)(em_repl *r, const char *args);
    em_complete_kind complete;  /* what its first argument is */
} em_dot_cmd;

extern const em_dot_cmd em_dot_cmds[];
extern const size_t em_ndot_cmds;

/* Runs the dot command LINE (starting with '.'). 0 or 1 as em_dot_cmd. */
int em_repl_dot(em_repl *r, const char *line);
/* Runs the query TEXT and writes its result where .output says. 0, or 1
** when it failed (the message went to stderr). */
int em_repl_query(em_repl *r, const char *text);
/* Prints a failure of the statement at r->line to stderr: "error: MSG" at
** a terminal, "ember repl: line N: MSG" in a script. Returns 1. */
int em_repl_fail(em_repl *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The completion cache's lists, read on first use; NULL when the database
** could not say. */
const ember_strlist *em_repl_types(em_repl *r);
const ember_strlist *em_repl_label_names(em_repl *r);
const ember_strlist *em_repl_label_values(em_repl *r, const char *name);
/* Forgets every cached list. */
void em_repl_cache_drop(em_repl *r);

/* Completion: the candidates for the text TEXT (what precedes the cursor,
** the unfinished statement's earlier lines included). */
typedef struct em_completion {
    size_t start;               /* byte offset in TEXT of the word being
                                ** completed; candidates replace from here */
    char **words;               /* candidates (owned), each with the text
                                ** to add after it when it is the only one */
    char **suffixes;            /* owned; "" for none */
    size_t n, cap;
} em_completion;

/* Fills *C with the candidates for TEXT. EMBER_OK or EMBER_ENOMEM. */
int em_repl_complete(em_repl *r, const char *text, em_completion *c);
void em_completion_free(em_completion *c);

/* Binds tab to completion in the line editor EL (libedit's EditLine),
** whose EL_CLIENTDATA must point at a struct whose first member is the
** session's em_repl. */
struct editline;
void em_repl_bind(struct editline *el);

#endif
