/*
** query/query.h: the query layer as the layers above (repl/) and the tests
** see it. Pipeline, one file each (SQLite's shape):
**
**   text --lexer.c--> tokens --parser.c--> em_node tree --plan.c--> checked
**   plan --exec.c, exec_series.c--> ember_result (result.c) --render.c-->
**   render_*.c --> FILE*
**
** The executor merges through the engine (ember_merge and the em_reader of
** engine/engine.h), resolves stacks to names once (rbuild.c) and builds
** typed results: profiles, diffs, series or tables. docs/query-language.md
** is the language; docs/output-formats.md the renderers.
**
** Invariants: every allocation goes through em_malloc and friends; every
** failure sets the thread's message (em_err) and returns a negative
** EMBER_E* code; parse errors are EMBER_EINVAL with the query, a caret under
** the offending column and what was expected.
*/
#ifndef EM_QUERY_H
#define EM_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ember.h"

/* Longest query text accepted, in bytes (a limit before any allocation). */
#define EM_QUERY_MAX (1u << 20)

/* ---- lexer (query/lexer.c) ------------------------------------------------ */

typedef enum em_tok {
    EM_TOK_EOF = 0,
    EM_TOK_IDENT,       /* [a-zA-Z_:][a-zA-Z0-9_:]*: types, labels, functions */
    EM_TOK_STRING,      /* "..." or '...' with escapes, `...` raw */
    EM_TOK_NUMBER,      /* 12, 1.5, 1e3, 0x1f */
    EM_TOK_DURATION,    /* 10s, 5m, 1h30m, 500ms (units y w d h m s ms) */
    EM_TOK_LBRACE,      /* { */
    EM_TOK_RBRACE,      /* } */
    EM_TOK_LPAREN,      /* ( */
    EM_TOK_RPAREN,      /* ) */
    EM_TOK_LBRACKET,    /* [ */
    EM_TOK_RBRACKET,    /* ] */
    EM_TOK_COMMA,       /* , */
    EM_TOK_EQ,          /* = */
    EM_TOK_NEQ,         /* != */
    EM_TOK_RE,          /* =~ */
    EM_TOK_NRE,         /* !~ */
    EM_TOK_AT,          /* @ */
    EM_TOK_BY,          /* keyword by (case-insensitive, as PromQL) */
    EM_TOK_WITHOUT,     /* keyword without */
    EM_TOK_OFFSET,      /* keyword offset */
    EM_TOK_UNKNOWN,     /* EM_LEX_TOLERANT: a byte no token starts with */
    EM_TOK_COMMENT,     /* EM_LEX_COMMENTS: '#' up to the end of its line */
    EM_TOK_COUNT_       /* number of kinds, not a kind */
} em_tok;

/* em_token.flags, which only EM_LEX_TOLERANT sets: where the strict lexer
** would have stopped with an error, a tolerant one flags the token and goes
** on after it. */
#define EM_TOKF_INVALID 1u      /* the strict lexer fails at this token */
#define EM_TOKF_INCOMPLETE 2u   /* also: the end of the input cut it inside
                                ** a part, so more text may complete it: a
                                ** string before its closing quote, '!'
                                ** before '=' or '~', '.' before digits, 0x
                                ** or an exponent before theirs, a duration
                                ** in its last unit (1h3, 1s5m of 1s5ms) */

typedef struct em_token {
    em_tok kind;
    size_t pos;         /* byte offset of the token's first byte */
    size_t len;         /* bytes of source text, quotes included */
    unsigned line;      /* 1-based line */
    unsigned col;       /* 1-based column in that line, in UTF-8 characters */
    unsigned flags;     /* EM_TOKF_*; 0 in the strict mode */
} em_token;

/* Lexer modes (em_lex_init_mode). */
#define EM_LEX_TOLERANT 1u      /* never fail: a stray byte becomes an
                                ** EM_TOK_UNKNOWN and a malformed or cut
                                ** token is flagged (EM_TOKF_*); a quoted
                                ** string goes on past a newline (flagged
                                ** invalid) to its closing quote, as the
                                ** REPL reads a statement over lines */
#define EM_LEX_COMMENTS 2u      /* '#' comments become EM_TOK_COMMENT tokens
                                ** instead of blanks */

typedef struct em_lexer {
    const char *src;    /* the whole query, NUL-terminated */
    size_t len;         /* strlen(src) */
    size_t pos;         /* next byte to read */
    unsigned line, col; /* position of pos */
    unsigned mode;      /* EM_LEX_*; 0: strict, as the parser lexes */
} em_lexer;

/* Starts lexing SRC (NUL-terminated; it must outlive the lexer). */
void em_lex_init(em_lexer *lx, const char *src);
/* The same in MODE (EM_LEX_* or'ed; 0 is em_lex_init's). The tolerant mode
** is for tools reading text as it is typed (SQLite's complete.c on its
** tokenizer): the REPL's statement scanner and its tab completion. */
void em_lex_init_mode(em_lexer *lx, const char *src, unsigned mode);
/* Reads the next token into *TOK; at the end, EM_TOK_EOF forever. Returns
** EMBER_OK or EMBER_EINVAL with a caret message (unterminated string, bad
** escape, bad number or duration, unexpected character). In the tolerant
** mode it always returns EMBER_OK (a bad duration may still leave a message
** in em_errmsg()); the tokens of a text the strict mode accepts are the
** same in both modes, flags 0. */
int em_lex_next(em_lexer *lx, em_token *tok);
/* "'{'", "string", "end of query", ... for messages. Never NULL. */
const char *em_tok_name(em_tok kind);
/* True when an identifier-like token (IDENT or a keyword) could serve as a
** label name, as PromQL lets keywords be label names. */
bool em_tok_is_word(em_tok kind);
/* Decodes the STRING token TOK of SRC (escapes resolved, quotes removed)
** into a new NUL-terminated string the caller em_frees. The lexer already
** validated it, so only EMBER_ENOMEM can fail. */
int em_lex_string(const char *src, const em_token *tok, char **out);

/* Formats a parse error at byte POS of SRC and returns EMBER_EINVAL:
**   parse error at column 12: expected '=', '!=', '=~' or '!~' after ...
**     cpu{service "api"}
**                ^
** ("at line L, column C" when SRC has several lines; long lines are shown
** as a window around POS). */
int em_query_error(const char *src, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- syntax tree (query/parser.c) ------------------------------------------ */

typedef enum em_node_kind {
    EM_NODE_SELECTOR = 1,   /* u.sel: TYPE{matchers}[range] offset D @ T */
    EM_NODE_CALL,           /* u.call: fn(args) with an optional by/without */
    EM_NODE_NUMBER,         /* u.num: 20, 0.5 */
    EM_NODE_STRING          /* u.str: "regex", "pod" (escapes resolved) */
} em_node_kind;

/* The functions of the language (docs/query-language.md). Their names,
** arguments and kinds are one catalogue, query/functions.c: the parser
** reads names and by/without from it, the planner arity and kinds. */
typedef enum em_fn {
    EM_FN_MERGE = 1,        /* merge [by|without (l...)] (P): profile(s) */
    EM_FN_DIFF,             /* diff(BASE, TARGET): diff profile(s) */
    EM_FN_NORMALIZE,        /* normalize(D): D's target at its base's total */
    EM_FN_FOCUS,            /* focus(P, "re"): stacks through a match */
    EM_FN_IGNORE,           /* ignore(P, "re"): stacks through none */
    EM_FN_HIDE,             /* hide(P, "re"): drop matching frames */
    EM_FN_SHOW,             /* show(P, "re"): keep only matching frames */
    EM_FN_CALLERS,          /* callers(P, "re"): stacks cut to end at a match */
    EM_FN_CALLEES,          /* callees(P, "re"): stacks cut to start at one */
    EM_FN_PEEK,             /* peek(P, "re"): pprof's -peek view of P */
    EM_FN_LIST,             /* list(P, "re"): pprof's -list view of P */
    EM_FN_GRANULARITY,      /* granularity(P, "lines"): names per line */
    EM_FN_TOP,              /* top(P, N): the N largest-flat functions */
    EM_FN_TOTAL,            /* total(SEL): per-series value over time */
    EM_FN_RATE,             /* rate(S): per second */
    EM_FN_SUM,              /* sum/avg/max/min/count [by|without] (S) */
    EM_FN_AVG,
    EM_FN_MAX,
    EM_FN_MIN,
    EM_FN_COUNT,
    EM_FN_TOPK,             /* topk(K, S), bottomk(K, S) */
    EM_FN_BOTTOMK,
    EM_FN_PROFILE_TYPES,    /* profile_types([SEL]): table */
    EM_FN_LABEL_NAMES,      /* label_names([SEL]): table */
    EM_FN_LABEL_VALUES      /* label_values(NAME [, SEL]): table */
} em_fn;

enum { EM_GROUP_NONE = 0, EM_GROUP_BY = 1, EM_GROUP_WITHOUT = 2 };

typedef struct em_sel {
    char *type;                 /* exact profile type, owned; NULL: any */
    size_t type_pos;            /* byte offset of the type in the query */
    ember_matcher *matchers;    /* owned array; names and values owned */
    size_t *value_pos;          /* per matcher: byte offset of its value, so
                                ** that the planner can put a caret under a
                                ** bad regex (em_query_error) */
    size_t nmatchers;
    int64_t range_ms;           /* SEL[1h]; 0: none given */
    int64_t offset_ms;          /* SEL offset 1d; 0: none given */
    char *at;                   /* SEL @ T: T's text as em_time_parse takes
                                ** it (a number token's digits or a string's
                                ** contents), owned; NULL: none. Resolved by
                                ** the planner, which knows "now". */
    size_t at_pos;              /* byte offset of T, for errors */
} em_sel;

struct em_node;

typedef struct em_call {
    em_fn fn;
    size_t name_pos;            /* byte offset of the function name */
    struct em_node **args;      /* owned */
    size_t nargs;
    int grouping;               /* EM_GROUP_* */
    char **labels;              /* by/without label names, owned */
    size_t nlabels;
} em_call;

typedef struct em_node {
    em_node_kind kind;
    size_t pos;                 /* byte offset where the node starts */
    size_t end;                 /* byte offset just past its last token */
    union {
        em_sel sel;             /* EM_NODE_SELECTOR */
        em_call call;           /* EM_NODE_CALL */
        double num;             /* EM_NODE_NUMBER */
        char *str;              /* EM_NODE_STRING, owned */
    } u;
} em_node;

/* Parses the query TEXT into a new tree (*out, free with em_node_free).
** Syntax only: an unknown function name is an error here, a wrong argument
** kind is the planner's. EMBER_EINVAL with a caret message, EMBER_ENOMEM,
** and EMBER_ELIMIT past EM_QUERY_MAX bytes or 64 levels of nesting. */
int em_query_parse(const char *text, em_node **out);
void em_node_free(em_node *n);                  /* NULL: no-op */
/* "merge", "label_values", ... for messages; NULL for a bad value. */
const char *em_fn_name(em_fn fn);

/* Fills *OUT to select what SEL names over [FROM_MS, TO_MS] (both 0: all
** time). A view: its pointers live as long as SEL. */
void em_sel_view(const em_sel *sel, int64_t from_ms, int64_t to_ms,
                 ember_selector *out);

/* ---- times and durations (query/time.c) ----------------------------------- */

/* Parses a time given on the command line or in a query into unix ms:
** RFC 3339 ("2024-11-21T06:20:00Z", fractional seconds, "+01:00"
** offsets, a bare date is midnight UTC), unix seconds (up to 11 digits,
** fractions allowed: "1732170000.5"), unix milliseconds (12 or 13 digits),
** "now", or relative to NOW_MS: "-1h", "now-2d", "now+30m". EMBER_OK or
** EMBER_EINVAL with a message naming the text. */
int em_time_parse(const char *s, int64_t now_ms, int64_t *out_ms);
/* Unix ms MS as RFC 3339 UTC, "2024-11-21T06:20:00Z" (".123Z" when there
** are milliseconds), into BUF; returns BUF. */
const char *em_time_format(int64_t ms, char buf[40]);
/* Parses a duration ("10s", "1h30m", "500ms", "2d", "1w", "1y", "0") into
** ms. Units from largest to smallest, each at most once (PromQL's rule); y
** is 365 days. EMBER_OK, EMBER_EINVAL or EMBER_ELIMIT (overflow). */
int em_duration_parse(const char *s, int64_t *out_ms);
/* The same over the N bytes at S (not NUL-terminated): the lexer's entry. */
int em_duration_parse_n(const char *s, size_t n, int64_t *out_ms);

/* ---- string table (query/strtab.c) ------------------------------------------ */

/* Interned byte strings with dense ids 0, 1, 2, ... in order of first
** insertion. A zeroed em_strtab is empty and ready. */
typedef struct em_strtab {
    char *bytes;                /* every string, each NUL-terminated */
    size_t len, cap;
    size_t *off;                /* id -> offset of its string in bytes */
    size_t cap_ids;
    uint32_t count;             /* strings, ids 0 .. count - 1 */
    struct em_strtab_index {    /* hash -> id: a table of engine/htab.h, */
        struct em_strtab_slot *slots;   /* its fields as EM_HTAB_TYPE */
        size_t mask, count;             /* lays them out */
    } index;
} em_strtab;

/* *ID gets the id of the LEN bytes at S (which must hold no NUL), adding
** them if new. EMBER_OK, EMBER_ENOMEM, or EMBER_ELIMIT past 2^31 strings. */
int em_strtab_intern(em_strtab *t, const char *s, size_t len, uint32_t *id);
/* String ID (< t->count), NUL-terminated, valid until the next intern. */
const char *em_strtab_get(const em_strtab *t, uint32_t id);
void em_strtab_free(em_strtab *t);

/* ---- resolved profiles (query/rprofile.c, query/rbuild.c) ------------------ */

/* A merged profile with every stack resolved to function names, so that
** renderers aggregate by integer ids and never touch the database:
**
**   stacks[i]: frames[first .. first+nframes), leaf first. A location with
**   inlined calls contributes its lines innermost first, so frames[first]
**   is the innermost inline frame of the leaf location (pprof's leaf), and
**   every frame but the outermost of a location has EM_RFRAME_INLINED.
**
** Zero-valued stacks may be present; renderers skip them. */
#define EM_RFRAME_INLINED 1u    /* inlined into the frame that follows */

typedef struct em_rframe {
    uint32_t fn;                /* function name id in em_rprofile.names */
    uint32_t flags;             /* EM_RFRAME_* */
} em_rframe;

typedef struct em_rstack {
    size_t first;               /* index of its leaf frame in frames */
    size_t nframes;
    int64_t value;              /* a diff's TARGET value */
    int64_t base;               /* a diff's BASE value; 0 unless p->diff */
} em_rstack;

/* Granularities (pprof's -granularity): what one frame's name stands for,
** and so what renderers aggregate by. */
enum { EM_GRAN_FUNCTIONS = 0,   /* "main.fib" (without sites) */
       EM_GRAN_FILEFUNCTIONS,   /* "main.fib /src/main.go" */
       EM_GRAN_FILES,           /* "/src/main.go" */
       EM_GRAN_LINES,           /* "main.fib /src/main.go:55" */
       EM_GRAN_ADDRESSES,       /* "00000000004bfcd4 main.fib /src/main.go:55" */
       EM_GRAN_COUNT_ };

/* Where a name's frames are: one line of one location at the profile's
** granularity, the fields it does not keep zeroed (none: EM_RSITE_NONE).
** Strings are ids in em_rprofile.srcs. */
#define EM_RSITE_NONE UINT32_MAX
#define EM_RSITE_NAMED 1u       /* fn is a function's name (or system
                                ** name), not an address's */

typedef struct em_rsite {
    uint32_t fn;                /* the function as granularity functions
                                ** names it ("0x4011a0 in libc.so.6"
                                ** without a name), what filters match */
    uint32_t file;              /* source file, as pprof cleans it */
    uint32_t obj;               /* the mapping file's base name */
    uint32_t flags;             /* EM_RSITE_* */
    int64_t line;               /* 0: unknown or not kept */
    int64_t start;              /* the function's first line (lines and
                                ** addresses only); 0: unknown */
    uint64_t address;           /* 0: unknown or not kept */
} em_rsite;

typedef struct em_rprofile {
    em_strtab names;            /* function names (or at a granularity
                                ** other than functions, pprof's names of
                                ** its nodes: see em_rsite) */
    em_rframe *frames;
    size_t nframes, cap_frames;
    em_rstack *stacks;
    size_t nstacks, cap_stacks;
    char *sample_type;          /* "cpu", "alloc_space"; "" unknown; owned */
    char *unit;                 /* sample unit, lower case; "count" when
                                ** unknown; owned */
    bool diff;                  /* stacks carry base and target values:
                                ** renderers show both and the change */
    bool has_whole;             /* focus or ignore removed stacks: */
    int64_t whole;              /* the total before they did, which top,
                                ** tree and svg take percentages of (pprof
                                ** computes its total before -focus and
                                ** -ignore); without has_whole they sum
                                ** |value| over the stacks */
    int granularity;            /* EM_GRAN_*: what a name stands for */
    em_rsite *sites;            /* per name id, when the profile was built
                                ** with sites; NULL: names are function
                                ** names and nothing more is known */
    size_t cap_sites;
    em_strtab srcs;             /* the strings the sites name */
} em_rprofile;

/* Empties *P for a profile of TYPE ("name:sample_type:sample_unit:..."; NULL
** or malformed: sample type "" and unit "count"). EMBER_OK or ENOMEM; on
** failure *P is still safe to em_rprofile_free. */
int em_rprofile_init(em_rprofile *p, const char *type);
void em_rprofile_free(em_rprofile *p);          /* NULL: no-op */
/* Makes room for NSTACKS more stacks of NFRAMES frames in all, so that
** adding a profile whose size is known copies no array twice. */
int em_rprofile_reserve(em_rprofile *p, size_t nstacks, size_t nframes);
/* Appends a stack of N frames (leaf first) with VALUE. */
int em_rprofile_add(em_rprofile *p, const em_rframe *frames, size_t n,
                    int64_t value);
/* The same for a diff profile: BASE and TARGET values. Sets p->diff. */
int em_rprofile_add_diff(em_rprofile *p, const em_rframe *frames, size_t n,
                         int64_t base, int64_t target);

/* ---- sites and granularities (query/rsites.c) ------------------------------ */

/* "lines" -> EM_GRAN_LINES, ...; -1 for a name that is none. */
int em_gran_parse(const char *name);
const char *em_gran_name(int gran);             /* "lines", ... */
/* *ID gets the name id of site S (its strings interned in P->srcs) at
** P's granularity, adding the name and its site when new. P must have
** been built with sites (or be empty). EMBER_OK or ENOMEM. */
int em_rprofile_site(em_rprofile *p, const em_rsite *s, uint32_t *id);
/* The function name filters match for name ID: the site's function at
** granularity functions, or without sites the name itself. */
const char *em_rprofile_fname(const em_rprofile *p, uint32_t id);
/* *OUT gets the id in DST of SRC's name ID, interned there with its site
** when SRC has sites (DST then takes SRC's granularity). */
int em_rprofile_copy_name(em_rprofile *dst, const em_rprofile *src,
                          uint32_t id, uint32_t *out);
/* Renames P's frames to the coarser granularity GRAN (pprof's aggregate):
** sites that differ only in what GRAN drops share one name. GRAN
** functions drops the sites. No-op for a profile without sites. */
int em_rprofile_regranulate(em_rprofile *p, int gran);
/* pprof's cleaning of a source file name: a /proc/self/cwd/ prefix
** trimmed, then Go's filepath.Clean. A new string (em_free it). */
char *em_path_clean(const char *path);

/* Resolves every non-zero stack of M through the snapshot SNAP (NULL: a
** snapshot of DB opened and ended here) into *OUT, which it initializes
** for TYPE (the selector's type, for the unit; NULL: a count). A location without lines is named "0x<address> in <mapping file
** basename>" ("0x<address>" without a mapping file); a function without a
** name by its system name, else like a location without lines. On failure
** *OUT is freed and the engine's message says which stack failed. */
int em_rprofile_build(ember_db *db, const ember_merged *m, const char *type,
                      ember_snapshot *snap, em_rprofile *out);
/* The same at GRAN: EM_GRAN_ADDRESSES builds with sites (every line of
** every location its own name, what a coarser granularity and the source
** listing start from); EM_GRAN_FUNCTIONS is em_rprofile_build. */
int em_rprofile_build_at(ember_db *db, const ember_merged *m,
                         const char *type, ember_snapshot *snap, int gran,
                         em_rprofile *out);

/* ---- value formatting (query/units.c), pprof's measurement package ------- */

#define EM_VALUE_MAX 48         /* bytes for any formatted value */

/* VALUE in UNIT ("nanoseconds", "bytes", "count", ...), scaled to the
** largest unit it reaches: "1.20s", "350ms", "1.50MB", "42". Returns BUF. */
const char *em_format_value(int64_t value, const char *unit,
                            char buf[EM_VALUE_MAX]);
/* VALUE in UNIT written in OUT_UNIT ("ms", "MB", ...; "auto" scales as
** em_format_value). Returns BUF. */
const char *em_format_value_as(int64_t value, const char *unit,
                               const char *out_unit, char buf[EM_VALUE_MAX]);
/* pprof's report-wide unit choice ("minimum"): the unit that shows the
** smallest non-zero magnitude MINV down to 0.01 while the total MAXV stays
** readable. Returns a static string, or UNIT itself when it is not scalable. */
const char *em_unit_pick(int64_t minv, int64_t maxv, const char *unit);
/* pprof's percentage: "  100%", "12.50%", " 0.5%". BUF holds 16 bytes. */
const char *em_format_percent(int64_t value, int64_t total, char buf[16]);

/* ---- renderers (query/render_top.c, query/render_collapsed.c) -------------- */

typedef struct em_top_opts {
    size_t sz;                  /* sizeof(em_top_opts) */
    bool cum_sort;              /* sort by cum instead of flat */
    size_t limit;               /* at most this many rows; 0: all */
    double node_fraction;       /* drop functions with |cum| below this
                                ** share of the total; 0: none (pprof's
                                ** -nodefraction, which defaults to 0.005) */
    double edge_fraction;       /* pprof's -edgefraction (default 0.001);
                                ** only decides the "(inline)" suffixes */
    const char *unit;           /* pprof's -unit: every value in this unit
                                ** ("ns", "ms", "s", "B", "kB", "MB", ...;
                                ** "auto": each value scaled on its own);
                                ** NULL or "minimum": one unit for the
                                ** report, picked as pprof does by default */
    bool color;                 /* diffs: the change in red (growth) or
                                ** green (shrinking), ANSI */
    bool relative;              /* percentages of the stacks shown, not of
                                ** p->whole (pprof's -relative_percentages) */
} em_top_opts;

/* `go tool pprof -top` with granularity=functions over P: flat(f) sums the
** samples whose leaf frame is f, cum(f) the samples where f appears, once per
** sample however often it recurses; rows sorted by |flat| (or |cum|)
** descending then name; percentages of P->whole when P has one, else of
** the sum of |values|. OPTS may be
** NULL (flat sort, all rows, no trimming). A diff profile (P->diff) gets
** base, target, change and change% columns sorted by |change|
** (render_top.c). EMBER_OK, ENOMEM or EIO. */
int em_render_top(FILE *f, const em_rprofile *p, const em_top_opts *opts);

/* One line per distinct stack, `root;...;leaf VALUE`, outermost caller
** first, lines sorted bytewise, stacks with equal text summed and those
** summing to 0 left out. The empty stack is written "<empty>". In names,
** ';' becomes '_' and control characters ' ' so every line parses back.
** A diff profile writes `stack BASE TARGET` (difffolded.pl's format).
** EMBER_OK, ENOMEM or EIO. */
int em_render_collapsed(FILE *f, const em_rprofile *p);

/* ---- query results (query/result.c, built by query/exec.c) ---------------- */

/* A view (peek(P, "re")): a profile result shown as one of pprof's
** reports by the top and json formats; the other formats draw the
** profile itself. */
enum { EM_VIEW_NONE = 0,
       EM_VIEW_PEEK = 1,        /* callers and callees of the matches */
       EM_VIEW_LIST = 2,        /* their source lines */
       EM_VIEW_LAST = EM_VIEW_LIST };

/* One profile of a result: a merge group (`merge by (pod)` gives one per
** pod) or a diff pair. */
typedef struct em_pgroup {
    ember_label *labels;        /* the group's labels, sorted by name; owned
                                ** (names and values too); none for a plain
                                ** merge */
    size_t nlabels;
    em_rprofile prof;           /* resolved stacks (p.diff for a diff) */
    ember_merged *merged;       /* the stack ids behind prof, for pprof out;
                                ** for a diff TARGET minus BASE; may be NULL
                                ** when the executor could not keep it */
    void *pprof;                /* merged as gzip'd pprof, encoded in the
                                ** query's snapshot when it ran for -o pprof
                                ** (EM_QUERY_IDS_ONLY); else NULL; owned */
    size_t pprof_len;
    uint64_t nseries, nprofiles;/* what was merged (both sides of a diff) */
} em_pgroup;

/* One series of a series result: points by time. */
typedef struct em_series {
    ember_label *labels;        /* sorted by name, owned; __type__ first
                                ** when the result spans several types */
    size_t nlabels;
    int64_t *times;             /* unix ms (a bucket's start with a step) */
    double *values;
    size_t n;
} em_series;

struct ember_result {
    int kind;                   /* EMBER_RESULT_* */
    char *type;                 /* the profile type of profiles and series
                                ** (NULL when series span several); owned */
    char *unit;                 /* the sample unit ("nanoseconds"), or
                                ** "count", or "count/s", ...; owned */
    em_pgroup *groups;          /* PROFILE and DIFF */
    size_t ngroups;
    em_series *series;          /* SERIES */
    size_t nseries;
    char *column;               /* TABLE: its one column's name ("type",
                                ** "label", "value"), owned */
    char **rows;                /* TABLE rows, owned, sorted */
    size_t nrows;
    size_t top_limit;           /* top(P, N): N, which the top renderer
                                ** uses as its default row limit; 0: none */
    int view;                   /* EM_VIEW_*: how top and json show the
                                ** profiles (peek(P, "re")); 0: as such */
    char *view_re;              /* the view's regex as written, owned */
    int64_t from_ms, to_ms;     /* the range the query was evaluated over */
    int64_t step_ms;            /* series bucketing; 0: none */
    ember_frame *frames;        /* ember_result_stack's scratch, owned */
    size_t cap_frames;
    bool ids_only;              /* profiles hold stack ids (merged) but no
                                ** resolved names: EM_QUERY_IDS_ONLY */
    char **notes;               /* ember_result_note's, owned, in order */
    size_t nnotes;
    ember_db *db;               /* the handle the query ran on, whose
                                ** symbols the pprof renderer reads when no
                                ** group holds its pprof; not owned (no
                                ** object made from a handle outlives it) */
};

/* Frees everything R owns and R itself. NULL: no-op. */
void em_result_free(ember_result *r);
/* Appends a note (printf FMT) to R's notes: why a query matched nothing,
** which type a short or missing type resolved to. EMBER_OK or ENOMEM. */
int em_result_note(ember_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ember_query with FLAGS. EM_QUERY_IDS_ONLY, for -o pprof: a lone group's
** pprof is encoded inside the query's snapshot (em_pgroup.pprof), and a
** profile result need not resolve its stacks to names when no filter
** needs them; its groups' em_rprofile may then be empty and r->ids_only
** is set, which only the pprof format accepts. */
#define EM_QUERY_IDS_ONLY 1u
int em_query_run(ember_db *db, const char *text, const ember_query_opts *opts,
                 unsigned flags, ember_result **out);

/* ember_pprof_encode (include/ember.h) of M through SNAP, which the caller
** holds: the pprof a query encodes inside its own snapshot. */
int em_pprof_encode(ember_snapshot *snap, const ember_merged *m,
                    const char *type, unsigned flags, void **out,
                    size_t *len);

/* Where em_pprof_encode_src reads symbols by id: a snapshot's tables, or a
** caller's own (an ingest profile set not written anywhere). Each lookup
** returns EMBER_OK or an error with its message set; what it hands back
** need only live until the next lookup. Mapping 0 is never looked up. */
typedef struct em_pprof_src {
    void *ctx;
    int (*stack)(void *ctx, uint32_t id, const uint32_t **locs, size_t *n);
    int (*location)(void *ctx, uint32_t id, ember_location *out);
    int (*function)(void *ctx, uint32_t id, ember_function *out);
    int (*mapping)(void *ctx, uint32_t id, ember_mapping *out);
} em_pprof_src;

/* One profile to encode: N (stack id, value) samples and its headers. */
typedef struct em_pprof_in {
    const uint32_t *stacks;
    const int64_t *values;
    size_t n;
    int64_t time_ms, duration_ns, period;
} em_pprof_in;

/* ember_pprof_encode of IN's samples, symbols read through SRC. */
int em_pprof_encode_src(const em_pprof_src *src, const em_pprof_in *in,
                        const char *type, unsigned flags, void **out,
                        size_t *len);

/* ---- a result as bytes (query/result_wire.c) ----------------------------- */

/* The content type of an encoded result, as `ember serve` labels its
** format=result answers (docs/protocol.md). */
#define EM_RESULT_WIRE_CTYPE "application/vnd.ember.result"

/* Encodes all of R (a lone profile group with its pprof, read through the
** handle R's query ran on unless R holds it) into a new buffer (*OUT,
** *LEN; em_free it). EMBER_OK, ENOMEM, or the pprof encoder's error. */
int em_result_encode(const ember_result *r, void **out, size_t *len);
/* Decodes the LEN bytes at BUF, which may be anything, into a new result
** (*OUT, ember_result_free it) that every accessor and renderer takes as
** ember_query's. EMBER_EINVAL naming the offset of what is wrong, or
** EMBER_ENOMEM; never a crash. */
int em_result_decode(const void *buf, size_t len, ember_result **out);

/* ---- flame graph levels (query/render_levels.c) ---------------------------- */

/* One depth of a flame graph: 4 integers a node (x offset from the end of
** the node before it, total, self, index into names), or for a diff 7
** (base x offset, total, self, target x offset, total, self, index). */
typedef struct em_level {
    int64_t *values;
    size_t n;
    int64_t end, end_base;      /* where the last node ends (target, base) */
} em_level;

/* A profile as Pyroscope's flame graph levels; names point into the
** profile it was built from (and static "total", "other"). */
typedef struct em_levels {
    const char **names;
    size_t nnames, cap_names;
    em_level *levels;
    size_t nlevels;
    int64_t total, max_self;    /* a diff's total: base's plus target's */
    bool diff;                  /* 7 integers a node */
    int64_t base_total, target_total;   /* a diff's two totals */
} em_levels;

/* Lays P out as levels, root "total" first, children by name; MAX_NODES
** > 0 cuts nodes below the MAX_NODES-th largest total (a diff: the larger
** of its two) into an "other" node per parent. A diff profile gives a
** diff's levels (Pyroscope's FlameGraphDiff). Free with em_levels_free. */
int em_levels_build(const em_rprofile *p, int64_t max_nodes, em_levels *out);
void em_levels_free(em_levels *l);
/* R (a profile or a diff of one group at most) as levels JSON
** (query/render_json.c), MAX_NODES as em_levels_build's; the server's
** format=levels. em_render_levels_fits says whether R can be. */
int em_render_levels_fits(const ember_result *r);
int em_render_levels_json(FILE *f, const ember_result *r, int64_t max_nodes);

/* ---- rendering results (query/render.c dispatches) ------------------------ */

typedef struct em_render_opts {
    size_t sz;                  /* sizeof(em_render_opts) */
    ember_db *db;               /* pprof's symbols for a result that
                                ** carries neither its pprof nor its
                                ** handle (one built by hand); NULL is fine
                                ** for a query's results and every other
                                ** format */
    bool cum_sort;              /* top: sort by cum */
    size_t limit;               /* top, tree: at most this many rows; 0:
                                ** the result's top_limit, else all */
    const char *unit;           /* top: pprof's -unit; NULL: "minimum" */
    bool color;                 /* ANSI colors (flame, diffs, sparklines) */
    unsigned width;             /* terminal columns (flame, table); 0: 100 */
    size_t max_lines;           /* cut text output past this many lines,
                                ** with a note saying how many were left
                                ** out; 0: never cut */
    const char *source_path;    /* list: where source files are read,
                                ** pprof's -source_path (':'-separated
                                ** directories, "" the current one);
                                ** NULL: never, line numbers alone (a
                                ** server must not read files that
                                ** profiles name) */
    const char *title;          /* svg's title; NULL: the query */
    const char *query;          /* the query text, shown by svg and json */
    bool relative;              /* top, tree, svg: percentages of what
                                ** focus and ignore kept, not of the whole
                                ** selection (pprof's -relative_percentages) */
} em_render_opts;

/* Writes R to F in FORMAT: for profiles and diffs "top", "tree", "flame",
** "collapsed", "pprof", "json", "svg"; for series "table", "csv", "json",
** "spark"; for tables "table", "csv", "json". EMBER_EINVAL naming the
** formats that fit when FORMAT does not fit R's kind. */
int em_render_result(FILE *f, const ember_result *r, const char *format,
                     const em_render_opts *o);
/* The svg flame graph (query/render_svg.c): one self-contained file, its
** script and style inline, that a browser opens with nothing else. */
int em_render_svg(FILE *f, const em_rprofile *p, const em_render_opts *o);

/* The format used when none is asked for: "top", "table". */
const char *em_render_default(int kind);
/* True when FORMAT renders results of KIND. */
bool em_render_fits(int kind, const char *format);
/* True when FORMAT writes binary bytes (pprof). */
bool em_render_binary(const char *format);

#endif /* EM_QUERY_H */
