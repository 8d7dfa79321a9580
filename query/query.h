/*
** query/query.h: the query layer as the layers above (repl/) and the tests
** see it. Pipeline, one file each (SQLite's shape):
**
**   text --lexer.c--> tokens --parser.c--> em_node tree --(planner, executor:
**   coming)--> ember_merge --rbuild.c--> em_rprofile --render_*.c--> FILE*
**
** Today the language is one selector, `TYPE{name="value", ...}`, which is all
** `ember query` needs; the node kinds, token kinds and error positions are
** laid out so that merge/diff/focus/top and the series functions can grow
** from here (docs/query-language.md).
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
    EM_TOK_COUNT_       /* number of kinds, not a kind */
} em_tok;

typedef struct em_token {
    em_tok kind;
    size_t pos;         /* byte offset of the token's first byte */
    size_t len;         /* bytes of source text, quotes included */
    unsigned line;      /* 1-based line */
    unsigned col;       /* 1-based column in that line, in UTF-8 characters */
} em_token;

typedef struct em_lexer {
    const char *src;    /* the whole query, NUL-terminated */
    size_t len;         /* strlen(src) */
    size_t pos;         /* next byte to read */
    unsigned line, col; /* position of pos */
} em_lexer;

/* Starts lexing SRC (NUL-terminated; it must outlive the lexer). */
void em_lex_init(em_lexer *lx, const char *src);
/* Reads the next token into *TOK; at the end, EM_TOK_EOF forever. Returns
** EMBER_OK or EMBER_EINVAL with a caret message (unterminated string, bad
** escape, bad number or duration, unexpected character). */
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
    EM_NODE_SELECTOR = 1    /* TYPE{matchers}: all profiles of the range */
    /* Coming with the full language: EM_NODE_CALL (merge, diff, focus,
    ** ignore, top, total, rate), EM_NODE_AGGREGATE (sum by (...)),
    ** EM_NODE_NUMBER, EM_NODE_STRING, and range/offset/@ modifiers. */
} em_node_kind;

typedef struct em_sel {
    char *type;                 /* exact profile type, owned; NULL: any */
    size_t type_pos;            /* byte offset of the type in the query */
    ember_matcher *matchers;    /* owned array; names and values owned */
    size_t *value_pos;          /* per matcher: byte offset of its value, so
                                ** that the planner can put a caret under a
                                ** bad regex (em_query_error) */
    size_t nmatchers;
} em_sel;

typedef struct em_node {
    em_node_kind kind;
    size_t pos;                 /* byte offset where the node starts */
    union {
        em_sel sel;             /* EM_NODE_SELECTOR */
    } u;
} em_node;

/* Parses the query TEXT into a new tree (*out, free with em_node_free).
** Today a query must be exactly one selector; anything else gives
** EMBER_EINVAL "expected a selector ..." with a caret. Also EMBER_ENOMEM,
** and EMBER_ELIMIT past EM_QUERY_MAX bytes. */
int em_query_parse(const char *text, em_node **out);
void em_node_free(em_node *n);                  /* NULL: no-op */

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
    uint32_t count, cap_ids;
    uint32_t *slots;            /* open addressing: id + 1, 0 empty */
    uint32_t nslots;            /* a power of two, or 0 */
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
    int64_t value;
} em_rstack;

typedef struct em_rprofile {
    em_strtab names;            /* function names */
    em_rframe *frames;
    size_t nframes, cap_frames;
    em_rstack *stacks;
    size_t nstacks, cap_stacks;
    char *sample_type;          /* "cpu", "alloc_space"; "" unknown; owned */
    char *unit;                 /* sample unit, lower case; "count" when
                                ** unknown; owned */
} em_rprofile;

/* Empties *P for a profile of TYPE ("name:sample_type:sample_unit:..."; NULL
** or malformed: sample type "" and unit "count"). EMBER_OK or ENOMEM; on
** failure *P is still safe to em_rprofile_free. */
int em_rprofile_init(em_rprofile *p, const char *type);
void em_rprofile_free(em_rprofile *p);          /* NULL: no-op */
/* Appends a stack of N frames (leaf first) with VALUE. */
int em_rprofile_add(em_rprofile *p, const em_rframe *frames, size_t n,
                    int64_t value);

/* Resolves every non-zero stack of M through the snapshot SNAP (NULL: a
** snapshot of DB opened and ended here) into *OUT, which it initializes
** for TYPE (the selector's type, for the unit; NULL: a count). A location without lines is named "0x<address> in <mapping file
** basename>" ("0x<address>" without a mapping file); a function without a
** name by its system name, else like a location without lines. On failure
** *OUT is freed and the engine's message says which stack failed. */
int em_rprofile_build(ember_db *db, const ember_merged *m, const char *type,
                      ember_snapshot *snap, em_rprofile *out);

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
} em_top_opts;

/* `go tool pprof -top` with granularity=functions over P: flat(f) sums the
** samples whose leaf frame is f, cum(f) the samples where f appears, once per
** sample however often it recurses; rows sorted by |flat| (or |cum|)
** descending then name; percentages of the sum of |values|. OPTS may be
** NULL (flat sort, all rows, no trimming). EMBER_OK, ENOMEM or EIO. */
int em_render_top(FILE *f, const em_rprofile *p, const em_top_opts *opts);

/* One line per distinct stack, `root;...;leaf VALUE`, outermost caller
** first, lines sorted bytewise, stacks with equal text summed and those
** summing to 0 left out. The empty stack is written "<empty>". In names,
** ';' becomes '_' and control characters ' ' so every line parses back.
** EMBER_OK, ENOMEM or EIO. */
int em_render_collapsed(FILE *f, const em_rprofile *p);

#endif /* EM_QUERY_H */
