/*
** engine/regex.c: the regular expressions of label matchers (=~, !~) and
** function-name filters. An RE2-like syntax (docs/regex.md) is parsed into
** an AST, compiled to a Thompson NFA program and run as a Pike VM over state
** sets, so a match costs O(program size x input length) whatever the
** pattern: no backtracking, no exponential blow-up (Thompson 1968; Cox,
** "Regular Expression Matching Can Be Simple And Fast", 2007).
**
** Pipeline: parse (recursive descent) -> rnode AST in one array -> size
** check -> emit instructions -> analyses: the literal prefix every match
** starts with, whether the regex is one literal, and whether it has the
** "glob" shape L0.*L1.*...Ln, which is matched with memcmp and memmem.
** Other regexes compare the prefix, then run the VM from the threads the
** prefix walk ended with.
**
** Invariants:
** - Matching is fully anchored, as Prometheus wraps patterns in ^(?:...)$.
** - A program has at most EM_RE_MAX_PROG instructions, so a pc fits in a
**   uint16_t; its last instruction is its only RI_MATCH. Every instruction
**   but RI_MATCH continues at x (and RI_SPLIT also at y); x is never an
**   RI_JMP, whose chains are cut short once the program is emitted.
** - The subject is read in units: a well-formed UTF-8 multi-byte character,
**   or one byte (ASCII, or a byte that does not start a well-formed
**   character). RI_BYTE consumes one byte, RI_CLASS one unit of 1 to 4
**   bytes, so the VM keeps five state sets: this position and the next four.
** - Classes keep one bit per single-byte unit (ASCII and stray bytes) and
**   sorted, merged code-point ranges for characters >= 0x80; negation is
**   applied when the class is built, never while matching.
** - Matching never writes a const em_regex except its atomic `spare`
**   scratch slot, so any number of threads may match one regex at once.
**   Small programs keep their state sets on the stack; large ones take the
**   spare, or allocate when another thread holds it. One block always
**   exists (the spare or one a running match will give back), so a thread
**   whose allocation fails waits for it instead of failing: matching has no
**   error result.
*/
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"

#define EM_RE_MAX_PATTERN 4096  /* bytes */
#define EM_RE_MAX_REPEAT 1000   /* n and m in {n,m} */
#define EM_RE_MAX_PROG 20000    /* instructions, MATCH included */
#define EM_RE_MAX_DEPTH 100     /* nested groups: bounds the recursion */
#define EM_RE_SMALL 512         /* programs up to this size match on stack */
#define EM_RE_INF 0xffff        /* rnode.max of an unbounded repetition */
#define EM_RE_NONE 0xffff       /* end of a patch chain */
#define EM_RE_NSETS 5           /* this position and the next four */
#define EM_RE_MAX_CP 0x10ffff

/* ---- program ------------------------------------------------------------ */

/* Threads rest on RI_BYTE, RI_CLASS and RI_MATCH (<= RI_MATCH); the others
** are followed at once when a thread is added. */
enum { RI_BYTE, RI_CLASS, RI_MATCH, RI_SPLIT, RI_JMP, RI_BOL, RI_EOL };

typedef struct em_rinst {
    uint8_t op;                 /* RI_* */
    uint8_t byte;               /* RI_BYTE: the byte to consume */
    uint16_t cls;               /* RI_CLASS: index into em_regex.cls */
    uint16_t x, y;              /* next; RI_SPLIT: y is the other branch */
} em_rinst;

typedef struct em_rclass {
    uint32_t bits[8];           /* single-byte units: ASCII, stray bytes */
    uint32_t first, n;          /* code points >= 0x80: rng[first, first+n) */
    int32_t single;             /* the one ASCII byte it matches, or -1 */
} em_rclass;

struct em_regex {
    em_rinst *prog;             /* nprog instructions, the last RI_MATCH */
    uint32_t nprog;
    em_rclass *cls;             /* classes of RI_CLASS */
    uint32_t (*rng)[2];         /* inclusive code-point ranges of classes */
    char *prefix;               /* NUL-terminated; every match starts so */
    size_t nprefix;
    bool literal;               /* matches exactly prefix and nothing else */
    bool has_start;             /* start holds the threads after prefix */
    uint16_t *start;            /* resting pcs at position nprefix */
    uint32_t nstart;
    uint8_t *glob;              /* segments L0..Ln of L0.*L1.*...Ln, joined */
    size_t *gend;               /* end offset in glob of each segment */
    size_t nglob;               /* segments; 0 when not of that shape */
    _Atomic(void *) spare;      /* a VM scratch block for large programs */
};

/* ---- UTF-8 units -------------------------------------------------------- */

/* Decodes the unit at S (N > 0 bytes there) into *CP and returns its length:
** a well-formed multi-byte character (no overlongs, surrogates or values
** past U+10FFFF, as Go and RE2 decode), else one byte with *CP the byte. */
static unsigned utf8_unit(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t b = s[0], lo = 0x80, hi = 0xbf;
    unsigned need;
    uint32_t c;

    *cp = b;
    if (b >= 0xc2 && b <= 0xdf) {
        need = 1, c = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        need = 2, c = b & 0x0f;
        lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3, c = b & 0x07;
        lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 1;
    }
    if (n <= need || s[1] < lo || s[1] > hi)
        return 1;
    for (unsigned k = 1; k <= need; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 1;
        c = (c << 6) | (s[k] & 0x3f);
    }
    *cp = c;
    return need + 1;
}

static bool bit_has(const uint32_t *bits, uint32_t c)
{
    return (bits[c >> 5] >> (c & 31)) & 1;
}

static void bit_set(uint32_t *bits, uint32_t c)
{
    bits[c >> 5] |= 1u << (c & 31);
}

/* True when class C holds the unit (CP, W) that utf8_unit decoded. */
static bool class_has(const em_regex *re, const em_rclass *c, uint32_t cp,
                      unsigned w)
{
    const uint32_t (*r)[2];
    size_t lo = 0, hi = c->n;

    if (w == 1)
        return bit_has(c->bits, cp);
    if (hi == 0)                /* and re->rng may be NULL */
        return false;
    r = re->rng + c->first;
    while (lo < hi) {           /* binary search of the sorted ranges */
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* ---- parser state and errors -------------------------------------------- */

enum { N_EMPTY, N_LIT, N_CLASS, N_BOL, N_EOL, N_CAT, N_ALT, N_REP };

typedef struct rnode {
    uint8_t type;               /* N_* */
    uint8_t nlit;               /* N_LIT: bytes in lit (one character) */
    uint8_t lit[4];
    bool dot;                   /* N_CLASS written as '.' */
    uint16_t min, max;          /* N_REP; max EM_RE_INF when unbounded */
    uint32_t cls;               /* N_CLASS: index into rparser.cls */
    int32_t kid, next;          /* first child (CAT, ALT, REP); sibling */
} rnode;

typedef struct rparser {
    const char *pat;
    size_t len, pos;            /* pattern bytes; the next one to read */
    bool icase;                 /* (?i) was given */
    unsigned depth;             /* groups open around pos */
    rnode *node;
    size_t nnode, cnode;
    em_rclass *cls;
    size_t ncls, ccls;
    uint32_t (*rng)[2];         /* ranges of all classes, class by class */
    size_t nrng, crng;
} rparser;

/* The 1-based column of byte AT of the pattern, counted in UTF-8 units. */
static size_t pattern_column(const rparser *p, size_t at)
{
    size_t col = 1, i = 0;
    uint32_t cp;

    while (i < at) {
        i += utf8_unit((const uint8_t *)p->pat + i, p->len - i, &cp);
        col++;
    }
    return col;
}

/* Sets `regex "PAT": column N: WHAT` (no column when AT is SIZE_MAX) and
** returns RC. */
static int perr(const rparser *p, int rc, size_t at, const char *fmt, ...)
    EM_PRINTF(4, 5);
static int perr(const rparser *p, int rc, size_t at, const char *fmt, ...)
{
    char what[256];
    int show = p->len > 64 ? 60 : (int)p->len;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (at == SIZE_MAX)
        return em_err(rc, "regex \"%.*s%s\": %s", show, p->pat,
                      (size_t)show < p->len ? "..." : "", what);
    return em_err(rc, "regex \"%.*s%s\": column %zu: %s", show, p->pat,
                  (size_t)show < p->len ? "..." : "",
                  pattern_column(p, at), what);
}

static int nomem(const char *pat, size_t len)
{
    int show = len > 64 ? 60 : (int)len;
    return em_err(EMBER_ENOMEM, "regex \"%.*s%s\": out of memory", show, pat,
                  (size_t)show < len ? "..." : "");
}

static int node_new(rparser *p, uint8_t type, int32_t *out)
{
    rnode *q = em_grow(p->node, &p->cnode, p->nnode + 1, sizeof *q);

    if (q == NULL)
        return nomem(p->pat, p->len);
    p->node = q;
    memset(&q[p->nnode], 0, sizeof *q);
    q[p->nnode].type = type;
    q[p->nnode].kid = q[p->nnode].next = -1;
    *out = (int32_t)p->nnode++;
    return EMBER_OK;
}

static int peek(const rparser *p)
{
    return p->pos < p->len ? (uint8_t)p->pat[p->pos] : -1;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_char(char c)
{
    return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
}

/* ---- classes ------------------------------------------------------------ */

/* ASCII sets as inclusive byte ranges, for \d \w \s and [:name:]. */
typedef struct rset_def {
    const char *name;           /* POSIX name, or the Perl letter */
    uint8_t r[4][2];            /* up to four ranges; {0,0} ends early */
    unsigned nr;
} rset_def;

static const rset_def perl_sets[] = {
    {"d", {{'0', '9'}}, 1},
    {"w", {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}}, 4},
    {"s", {{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}, 3},   /* RE2's \s */
};

static const rset_def posix_sets[] = {
    {"alnum", {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}, 3},
    {"alpha", {{'A', 'Z'}, {'a', 'z'}}, 2},
    {"ascii", {{0x00, 0x7f}}, 1},
    {"blank", {{'\t', '\t'}, {' ', ' '}}, 2},
    {"cntrl", {{0x00, 0x1f}, {0x7f, 0x7f}}, 2},
    {"digit", {{'0', '9'}}, 1},
    {"graph", {{0x21, 0x7e}}, 1},
    {"lower", {{'a', 'z'}}, 1},
    {"print", {{0x20, 0x7e}}, 1},
    {"punct", {{0x21, 0x2f}, {0x3a, 0x40}, {0x5b, 0x60}, {0x7b, 0x7e}}, 4},
    {"space", {{'\t', '\r'}, {' ', ' '}}, 2},
    {"upper", {{'A', 'Z'}}, 1},
    {"word", {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}}, 4},
    {"xdigit", {{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, 3},
};

/* The Perl class of escape letter C (\d \D \w \W \s \S), or NULL. */
static const rset_def *perl_set(int c, bool *neg)
{
    *neg = c == 'D' || c == 'W' || c == 'S';
    for (size_t i = 0; i < EM_ARRAY_LEN(perl_sets); i++)
        if (perl_sets[i].name[0] == (*neg ? c + ('a' - 'A') : c))
            return &perl_sets[i];
    return NULL;
}

/* Starts a class, empty, whose ranges go at the tail of p->rng. */
static int class_new(rparser *p, uint32_t *out)
{
    em_rclass *q;

    /* RI_CLASS holds a uint16_t index; at most one class is made per
    ** pattern byte, so this only guards the invariant. */
    if (p->ncls >= UINT16_MAX)
        return perr(p, EMBER_ELIMIT, p->pos, "too many classes");
    q = em_grow(p->cls, &p->ccls, p->ncls + 1, sizeof *q);
    if (q == NULL)
        return nomem(p->pat, p->len);
    p->cls = q;
    memset(&q[p->ncls], 0, sizeof *q);
    q[p->ncls].first = (uint32_t)p->nrng;
    *out = (uint32_t)p->ncls++;
    return EMBER_OK;
}

/* Adds the code points LO..HI to class CI (the one being built). */
static int class_add(rparser *p, uint32_t ci, uint32_t lo, uint32_t hi)
{
    uint32_t (*q)[2];

    for (; lo <= hi && lo < 0x80; lo++)
        bit_set(p->cls[ci].bits, lo);
    if (lo > hi)
        return EMBER_OK;
    q = em_grow(p->rng, &p->crng, p->nrng + 1, sizeof *q);
    if (q == NULL)
        return nomem(p->pat, p->len);
    p->rng = q;
    q[p->nrng][0] = lo;
    q[p->nrng++][1] = hi;
    return EMBER_OK;
}

/* Adds set D, or with NEG everything else: all other single-byte units and
** every character >= 0x80, so that \D and \W consume whole characters. */
static int class_add_set(rparser *p, uint32_t ci, const rset_def *d, bool neg)
{
    uint32_t bits[8] = {0};

    for (unsigned i = 0; i < d->nr; i++)
        for (uint32_t c = d->r[i][0]; c <= d->r[i][1]; c++)
            bit_set(bits, c);
    for (int i = 0; i < 8; i++)
        p->cls[ci].bits[i] |= neg ? ~bits[i] : bits[i];
    return neg ? class_add(p, ci, 0x80, EM_RE_MAX_CP) : EMBER_OK;
}

static int range_cmp(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and merges the ranges of class CI; returns how many remain. */
static uint32_t class_merge(rparser *p, uint32_t ci)
{
    uint32_t (*r)[2];
    size_t n = p->nrng - p->cls[ci].first, m = 0;

    if (n == 0)                 /* and p->rng may be NULL */
        return 0;
    r = p->rng + p->cls[ci].first;
    qsort(r, n, sizeof *r, range_cmp);
    for (size_t i = 1; i < n; i++) {
        if (r[i][0] <= r[m][1] + 1) {
            if (r[i][1] > r[m][1])
                r[m][1] = r[i][1];
        } else {
            m++;
            r[m][0] = r[i][0], r[m][1] = r[i][1];
        }
    }
    return (uint32_t)m + 1;
}

/* Replaces the N merged ranges of class CI by their complement within
** [0x80, 0x10FFFF]; the caller reserved one more slot. Writing gap j never
** overtakes the reading of range j, which sits one slot to the right. */
static uint32_t class_negate_ranges(rparser *p, uint32_t ci, uint32_t n)
{
    uint32_t (*r)[2] = p->rng + p->cls[ci].first, start = 0x80, m = 0;

    memmove(r + 1, r, n * sizeof *r);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t a = r[k + 1][0], b = r[k + 1][1];
        if (a > start) {
            r[m][0] = start, r[m][1] = a - 1;
            m++;
        }
        start = b + 1;
    }
    if (start <= EM_RE_MAX_CP) {
        r[m][0] = start, r[m][1] = EM_RE_MAX_CP;
        m++;
    }
    return m;
}

/* Folds ASCII case, merges ranges and applies NEG: class CI is final. */
static int class_finish(rparser *p, uint32_t ci, bool neg)
{
    em_rclass *c = &p->cls[ci];
    uint32_t n, nbits = 0;

    for (uint32_t u = 'A'; p->icase && u <= 'Z'; u++)
        if (bit_has(c->bits, u) || bit_has(c->bits, u + 32))
            bit_set(c->bits, u), bit_set(c->bits, u + 32);
    n = class_merge(p, ci);
    p->nrng = c->first + n;
    if (neg) {
        void *q = em_grow(p->rng, &p->crng, p->nrng + 1, sizeof *p->rng);
        if (q == NULL)
            return nomem(p->pat, p->len);
        p->rng = q;
        for (int i = 0; i < 8; i++)
            c->bits[i] = ~c->bits[i];
        n = class_negate_ranges(p, ci, n);
        p->nrng = c->first + n;
    }
    c->n = n;
    c->single = -1;
    for (uint32_t b = 0; b < 256; b++)
        nbits += bit_has(c->bits, b);
    for (uint32_t b = 0; n == 0 && nbits == 1 && b < 0x80; b++)
        if (bit_has(c->bits, b))
            c->single = (int32_t)b;
    return EMBER_OK;
}

/* A node for a class built from one set or the dot. */
static int class_node(rparser *p, const rset_def *d, bool neg, bool dot,
                      int32_t *out)
{
    uint32_t ci = 0;
    int rc = class_new(p, &ci);

    if (rc == EMBER_OK && dot) {
        memset(p->cls[ci].bits, 0xff, sizeof p->cls[ci].bits);
        p->cls[ci].bits['\n' >> 5] &= ~(1u << ('\n' & 31));
        rc = class_add(p, ci, 0x80, EM_RE_MAX_CP);
    } else if (rc == EMBER_OK) {
        rc = class_add_set(p, ci, d, neg);
    }
    if (rc == EMBER_OK)
        rc = class_finish(p, ci, false);
    if (rc == EMBER_OK)
        rc = node_new(p, N_CLASS, out);
    if (rc == EMBER_OK) {
        p->node[*out].cls = ci;
        p->node[*out].dot = dot;
    }
    return rc;
}

/* ---- bracket expressions ------------------------------------------------ */

/* The byte an escape letter stands for, as a literal: \t \n \r \f \v and
** any escaped ASCII punctuation; -1 otherwise. */
static int escape_byte(int c)
{
    static const char from[] = "tnrfv", to[] = "\t\n\r\f\v";
    const char *f = c > 0 ? strchr(from, c) : NULL;

    if (f != NULL)
        return (uint8_t)to[f - from];
    if (c > 0x20 && c < 0x7f && !(c >= '0' && c <= '9') &&
        !((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
        return c;
    return -1;
}

static int bad_escape(const rparser *p, size_t at)
{
    int c = at + 1 < p->len ? (uint8_t)p->pat[at + 1] : -1;

    if (c < 0)
        return perr(p, EMBER_EINVAL, at, "expected a character after '\\'");
    if (c > 0x20 && c < 0x7f)
        return perr(p, EMBER_EINVAL, at,
                    "unknown escape '\\%c' (expected \\ before punctuation "
                    "or one of t n r f v d D w W s S)", c);
    return perr(p, EMBER_EINVAL, at,
                "unknown escape (expected \\ before punctuation or one of "
                "t n r f v d D w W s S)");
}

/* One bracket item at p->pos: a character (*cp, *w is its unit length in
** the pattern, 1 for escapes) or, with *set non-NULL, a Perl class. */
static int bracket_char(rparser *p, uint32_t *cp, unsigned *w,
                        const rset_def **set, bool *neg)
{
    const uint8_t *s = (const uint8_t *)p->pat;
    int b;

    *set = NULL;
    if (s[p->pos] != '\\') {
        *w = utf8_unit(s + p->pos, p->len - p->pos, cp);
        p->pos += *w;
        return EMBER_OK;
    }
    if (p->pos + 1 < p->len && (*set = perl_set(s[p->pos + 1], neg)) != NULL) {
        p->pos += 2;
        return EMBER_OK;
    }
    b = p->pos + 1 < p->len ? escape_byte(s[p->pos + 1]) : -1;
    if (b < 0)
        return bad_escape(p, p->pos);
    *cp = (uint32_t)b, *w = 1;
    p->pos += 2;
    return EMBER_OK;
}

/* [:name:] at p->pos: 1 when it is one (added to CI), 0 when the '[' is a
** plain character, or an error for an unknown name. */
static int bracket_posix(rparser *p, uint32_t ci)
{
    const char *s = p->pat + p->pos + 2;
    size_t n = 0;
    int rc;

    if (p->pos + 2 >= p->len || p->pat[p->pos + 1] != ':')
        return 0;
    while (p->pos + 2 + n < p->len && s[n] >= 'a' && s[n] <= 'z')
        n++;
    if (p->pos + 3 + n >= p->len || s[n] != ':' || s[n + 1] != ']')
        return 0;               /* not [:name:]: '[' is a character */
    for (size_t i = 0; i < EM_ARRAY_LEN(posix_sets); i++) {
        if (strlen(posix_sets[i].name) == n &&
            memcmp(posix_sets[i].name, s, n) == 0) {
            rc = class_add_set(p, ci, &posix_sets[i], false);
            p->pos += n + 4;
            return rc == EMBER_OK ? 1 : rc;
        }
    }
    return perr(p, EMBER_EINVAL, p->pos,
                "unknown class [:%.*s:] (expected alnum, alpha, ascii, "
                "blank, cntrl, digit, graph, lower, print, punct, space, "
                "upper, word or xdigit)", (int)(n > 20 ? 20 : n), s);
}

/* One item of a bracket expression: [:name:], \d, a character or a range. */
static int bracket_item(rparser *p, uint32_t ci)
{
    size_t at = p->pos;
    const rset_def *set;
    uint32_t lo, hi;
    unsigned w, wlo;
    bool neg, range;
    int rc = p->pat[p->pos] == '[' ? bracket_posix(p, ci) : 0;

    if (rc != 0)
        return rc < 0 ? rc : EMBER_OK;
    if ((rc = bracket_char(p, &lo, &wlo, &set, &neg)) != EMBER_OK)
        return rc;
    if (set != NULL)            /* a '-' after it is a character, as in Go */
        return class_add_set(p, ci, set, neg);
    range = peek(p) == '-' && p->pos + 1 < p->len && p->pat[p->pos + 1] != ']';
    if (!range) {
        if (wlo == 1 && lo >= 0x80)     /* a stray byte stands for itself */
            return bit_set(p->cls[ci].bits, lo), EMBER_OK;
        return class_add(p, ci, lo, lo);
    }
    p->pos++;
    if ((rc = bracket_char(p, &hi, &w, &set, &neg)) != EMBER_OK)
        return rc;
    if (set != NULL || hi < lo || (wlo == 1 && lo >= 0x80) ||
        (w == 1 && hi >= 0x80))
        return perr(p, EMBER_EINVAL, at, "expected a range low-high with "
                    "low <= high, both characters");
    return class_add(p, ci, lo, hi);
}

/* A bracket expression [...] or [^...] at p->pos. */
static int parse_bracket(rparser *p, int32_t *out)
{
    size_t at = p->pos++;
    bool neg = peek(p) == '^', first = true;
    uint32_t ci;
    int rc = class_new(p, &ci);

    p->pos += neg;
    while (rc == EMBER_OK) {
        if (p->pos >= p->len)
            return perr(p, EMBER_EINVAL, p->len,
                        "expected ']' to close the '[' at column %zu",
                        pattern_column(p, at));
        if (peek(p) == ']' && !first)
            break;
        rc = bracket_item(p, ci);
        first = false;
    }
    if (rc == EMBER_OK) {
        p->pos++;
        rc = class_finish(p, ci, neg);
    }
    if (rc == EMBER_OK)
        rc = node_new(p, N_CLASS, out);
    if (rc == EMBER_OK)
        p->node[*out].cls = ci;
    return rc;
}

/* ---- atoms, repetition, concatenation, alternation ---------------------- */

static int parse_alt(rparser *p, int32_t *out);

/* A literal of LEN bytes at S; under (?i) an ASCII letter is a class. */
static int literal_node(rparser *p, const uint8_t *s, unsigned len,
                        int32_t *out)
{
    int rc;
    uint32_t ci;

    if (p->icase && len == 1 && (s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z') {
        rc = class_new(p, &ci);
        if (rc == EMBER_OK)
            rc = class_add(p, ci, s[0], s[0]);
        if (rc == EMBER_OK)
            rc = class_finish(p, ci, false);
        if (rc == EMBER_OK && (rc = node_new(p, N_CLASS, out)) == EMBER_OK)
            p->node[*out].cls = ci;
        return rc;
    }
    rc = node_new(p, N_LIT, out);
    if (rc == EMBER_OK) {
        memcpy(p->node[*out].lit, s, len);
        p->node[*out].nlit = (uint8_t)len;
    }
    return rc;
}

/* An escape outside brackets: \d and friends, or a literal. */
static int parse_escape(rparser *p, int32_t *out)
{
    size_t at = p->pos;
    const rset_def *set;
    bool neg;
    uint8_t b;
    int e;

    if (at + 1 < p->len &&
        (set = perl_set((uint8_t)p->pat[at + 1], &neg)) != NULL) {
        p->pos += 2;
        return class_node(p, set, neg, false, out);
    }
    e = at + 1 < p->len ? escape_byte((uint8_t)p->pat[at + 1]) : -1;
    if (e < 0)
        return bad_escape(p, at);
    b = (uint8_t)e;
    p->pos += 2;
    return literal_node(p, &b, 1, out);
}

/* The "(?" forms after the start: (?:re), (?P<name>re) and (?<name>re). */
static int group_prefix(rparser *p, size_t at)
{
    const char *s = p->pat;
    size_t i = p->pos + 1;

    if (i < p->len && s[i] == ':') {
        p->pos = i + 1;
        return EMBER_OK;
    }
    if (i < p->len && s[i] == 'P')
        i++;
    if (i < p->len && s[i] == '<') {
        size_t n = 0;
        while (i + 1 + n < p->len && is_name_char(s[i + 1 + n]))
            n++;
        if (n > 0 && i + 1 + n < p->len && s[i + 1 + n] == '>') {
            p->pos = i + 2 + n;
            return EMBER_OK;
        }
        return perr(p, EMBER_EINVAL, at, "expected a group name of letters, "
                    "digits and '_' and then '>'");
    }
    if (p->pos + 1 < p->len && s[p->pos + 1] == 'i')
        return perr(p, EMBER_EINVAL, at,
                    "flags (?i) are allowed only at the start of the pattern");
    return perr(p, EMBER_EINVAL, at, "expected ':' or a group name after '(?'");
}

/* A group at p->pos: (re), (?:re) or a named group. */
static int parse_group(rparser *p, int32_t *out)
{
    size_t at = p->pos++;
    int rc = peek(p) == '?' ? group_prefix(p, at) : EMBER_OK;

    if (rc != EMBER_OK)
        return rc;
    if (p->depth >= EM_RE_MAX_DEPTH)
        return perr(p, EMBER_ELIMIT, at, "groups nested deeper than %d",
                    EM_RE_MAX_DEPTH);
    p->depth++;
    rc = parse_alt(p, out);
    p->depth--;
    if (rc == EMBER_OK && peek(p) != ')')
        rc = perr(p, EMBER_EINVAL, p->pos, "expected ')'");
    p->pos++;
    return rc;
}

/* Reads {n}, {n,} or {n,m} at AT without judging the numbers: 1 and *END
** past '}' when the syntax is right, 0 when '{' is a literal (as in RE2). */
static int scan_count(const rparser *p, size_t at, uint32_t *min,
                      uint32_t *max, size_t *end)
{
    const char *s = p->pat;
    size_t i = at + 1, d;

    if (at >= p->len || s[at] != '{')
        return 0;
    for (*min = 0, d = i; i < p->len && is_digit(s[i]); i++)
        *min = *min > 100000 ? *min : *min * 10 + (uint32_t)(s[i] - '0');
    if (i == d)
        return 0;
    *max = *min;
    if (i < p->len && s[i] == ',') {
        *max = UINT32_MAX;      /* {n,} */
        for (d = ++i; i < p->len && is_digit(s[i]); i++)
            *max = (i == d ? 0 : *max > 100000 ? *max : *max * 10) +
                   (uint32_t)(s[i] - '0');
    }
    if (i >= p->len || s[i] != '}')
        return 0;
    *end = i + 1;
    return 1;
}

static bool quantifier_at(const rparser *p, size_t at)
{
    uint32_t a, b;
    size_t end;
    int c = at < p->len ? (uint8_t)p->pat[at] : -1;

    return c == '*' || c == '+' || c == '?' || scan_count(p, at, &a, &b, &end);
}

/* A quantifier at p->pos: 1 with *min, *max set, 0 when none, or < 0. */
static int parse_quantifier(rparser *p, uint16_t *min, uint16_t *max)
{
    uint32_t a = 0, b = UINT32_MAX;     /* UINT32_MAX: unbounded */
    size_t at = p->pos, end = at + 1;
    int c = peek(p);

    if (c == '+')
        a = 1;
    else if (c == '?')
        b = 1;
    else if (c != '*' && !scan_count(p, at, &a, &b, &end))
        return 0;
    if (a > EM_RE_MAX_REPEAT || (b != UINT32_MAX && b > EM_RE_MAX_REPEAT))
        return perr(p, EMBER_ELIMIT, at, "repetition count %u exceeds %d",
                    a > EM_RE_MAX_REPEAT ? a : b, EM_RE_MAX_REPEAT);
    if (b < a)
        return perr(p, EMBER_EINVAL, at,
                    "expected {min,max} with min <= max, got {%u,%u}", a, b);
    *min = (uint16_t)a;
    *max = b == UINT32_MAX ? EM_RE_INF : (uint16_t)b;
    p->pos = end;
    if (peek(p) == '?')
        p->pos++;               /* lazy: the same yes or no as greedy */
    return 1;
}

/* One atom at p->pos; the caller saw it is not '|' or ')'. */
static int parse_atom(rparser *p, int32_t *out)
{
    const uint8_t *s = (const uint8_t *)p->pat + p->pos;
    uint32_t cp;
    unsigned w;

    switch (s[0]) {
    case '(': return parse_group(p, out);
    case '[': return parse_bracket(p, out);
    case '\\': return parse_escape(p, out);
    case '.': p->pos++; return class_node(p, NULL, false, true, out);
    case '^': p->pos++; return node_new(p, N_BOL, out);
    case '$': p->pos++; return node_new(p, N_EOL, out);
    default: break;
    }
    if (quantifier_at(p, p->pos))
        return perr(p, EMBER_EINVAL, p->pos,
                    "expected an expression before '%c' to repeat", s[0]);
    w = utf8_unit(s, p->len - p->pos, &cp);
    p->pos += w;
    return literal_node(p, s, w, out);
}

/* An atom with its quantifier, if any. */
static int parse_repeat(rparser *p, int32_t *out)
{
    uint16_t min = 0, max = 0;
    int32_t rep;
    int rc = parse_atom(p, out);

    if (rc != EMBER_OK || (rc = parse_quantifier(p, &min, &max)) <= 0)
        return rc;
    if (quantifier_at(p, p->pos))
        return perr(p, EMBER_EINVAL, p->pos, "expected no second repetition "
                    "operator; group the first with (?:...)");
    if ((rc = node_new(p, N_REP, &rep)) != EMBER_OK)
        return rc;
    p->node[rep].kid = *out;
    p->node[rep].min = min, p->node[rep].max = max;
    *out = rep;
    return EMBER_OK;
}

/* Ends a concatenation: at the top level a leading ^ or trailing $ of a
** branch is dropped (a no-op under full anchoring, and dropping it keeps
** "^abc$" a literal); no items gives N_EMPTY, one item is itself. */
static int32_t cat_finish(rparser *p, int32_t cat)
{
    rnode *n = p->node;
    int32_t keep = -1;

    while (p->depth == 0 && n[cat].kid >= 0 && n[n[cat].kid].type == N_BOL)
        n[cat].kid = n[n[cat].kid].next;
    for (int32_t k = n[cat].kid; p->depth == 0 && k >= 0; k = n[k].next)
        if (n[k].type != N_EOL)
            keep = k;
    if (p->depth == 0 && keep < 0)
        n[cat].kid = -1;
    else if (p->depth == 0)
        n[keep].next = -1;
    if (n[cat].kid < 0)
        n[cat].type = N_EMPTY;
    else if (n[n[cat].kid].next < 0)
        return n[cat].kid;
    return cat;
}

static int parse_cat(rparser *p, int32_t *out)
{
    int32_t cat, last = -1, item;
    int rc = node_new(p, N_CAT, &cat);

    while (rc == EMBER_OK && peek(p) >= 0 && peek(p) != '|' && peek(p) != ')') {
        rc = parse_repeat(p, &item);
        if (rc != EMBER_OK)
            break;
        if (last < 0)
            p->node[cat].kid = item;
        else
            p->node[last].next = item;
        last = item;
    }
    if (rc == EMBER_OK)
        *out = cat_finish(p, cat);
    return rc;
}

static int parse_alt(rparser *p, int32_t *out)
{
    int32_t alt, last, br;
    int rc = parse_cat(p, out);

    if (rc != EMBER_OK || peek(p) != '|')
        return rc;
    if ((rc = node_new(p, N_ALT, &alt)) != EMBER_OK)
        return rc;
    p->node[alt].kid = last = *out;
    while (rc == EMBER_OK && peek(p) == '|') {
        p->pos++;
        rc = parse_cat(p, &br);
        if (rc == EMBER_OK) {
            p->node[last].next = br;
            last = br;
        }
    }
    *out = alt;
    return rc;
}

static int parse_pattern(rparser *p, int32_t *root)
{
    int rc;

    if (p->len >= 4 && memcmp(p->pat, "(?i)", 4) == 0) {
        p->icase = true;
        p->pos = 4;
    }
    rc = parse_alt(p, root);
    if (rc == EMBER_OK && p->pos < p->len)     /* only ')' stops parse_alt */
        rc = perr(p, EMBER_EINVAL, p->pos, "unmatched ')'");
    return rc;
}

/* ---- code generation ---------------------------------------------------- */

/* Instructions node I compiles to, saturated at EM_RE_MAX_PROG + 1. */
static uint32_t node_size(const rparser *p, int32_t i)
{
    const rnode *n = &p->node[i];
    uint64_t s = 0, x, k = 0;

    switch (n->type) {
    case N_LIT: s = n->nlit; break;
    case N_CLASS: case N_BOL: case N_EOL: s = 1; break;
    case N_CAT: case N_ALT:
        for (int32_t c = n->kid; c >= 0; c = p->node[c].next, k++) {
            s += node_size(p, c);
            s = s > EM_RE_MAX_PROG ? EM_RE_MAX_PROG + 1 : s;
        }
        s += n->type == N_ALT ? 2 * (k - 1) : 0;
        break;
    case N_REP:
        x = node_size(p, n->kid);
        if (n->max == EM_RE_INF)
            s = n->min == 0 ? x + 2 : n->min * x + 1;
        else
            s = n->min * x + (uint64_t)(n->max - n->min) * (x + 1);
        break;
    default: break;
    }
    return s > EM_RE_MAX_PROG ? EM_RE_MAX_PROG + 1 : (uint32_t)s;
}

typedef struct remit {
    const rparser *p;           /* the AST */
    const em_rclass *cls;       /* its classes, now owned by the regex */
    em_rinst *prog;
    uint32_t pc;                /* next instruction to write */
} remit;

static uint32_t put(remit *e, uint8_t op, uint32_t x, uint32_t y)
{
    em_rinst *in = &e->prog[e->pc];

    memset(in, 0, sizeof *in);
    in->op = op;
    in->x = (uint16_t)x, in->y = (uint16_t)y;
    return e->pc++;
}

static void emit(remit *e, int32_t i);

/* x{min,max}: min copies, then a loop (x* or x+) or max-min optional copies
** whose SPLITs are chained through y until the end is known. */
static void emit_rep(remit *e, const rnode *n)
{
    bool inf = n->max == EM_RE_INF;
    uint32_t copies = inf && n->min > 0 ? n->min - 1u : n->min, l, chain;

    for (uint32_t k = 0; k < copies; k++)
        emit(e, n->kid);
    if (inf && n->min > 0) {                /* x+: x, then back or on */
        l = e->pc;
        emit(e, n->kid);
        put(e, RI_SPLIT, l, e->pc + 1);
    } else if (inf) {                       /* x*: split, x, jump back */
        l = put(e, RI_SPLIT, e->pc + 1, 0);
        emit(e, n->kid);
        put(e, RI_JMP, l, 0);
        e->prog[l].y = (uint16_t)e->pc;
    } else {
        chain = EM_RE_NONE;
        for (uint32_t k = n->min; k < n->max; k++) {
            chain = put(e, RI_SPLIT, e->pc + 1, chain);
            emit(e, n->kid);
        }
        for (uint32_t next; chain != EM_RE_NONE; chain = next) {
            next = e->prog[chain].y;
            e->prog[chain].y = (uint16_t)e->pc;
        }
    }
}

/* a|b|c: SPLIT to each branch but the last; JMPs chained through x. */
static void emit_alt(remit *e, const rnode *n)
{
    uint32_t chain = EM_RE_NONE, s;

    for (int32_t k = n->kid; k >= 0; k = e->p->node[k].next) {
        if (e->p->node[k].next < 0) {
            emit(e, k);
            break;
        }
        s = put(e, RI_SPLIT, e->pc + 1, 0);
        emit(e, k);
        chain = put(e, RI_JMP, chain, 0);
        e->prog[s].y = (uint16_t)e->pc;
    }
    for (uint32_t next; chain != EM_RE_NONE; chain = next) {
        next = e->prog[chain].x;
        e->prog[chain].x = (uint16_t)e->pc;
    }
}

/* Where a jump to T really goes: past any chain of RI_JMP. Chains are
** acyclic (an RI_JMP targets an RI_SPLIT or moves forward), the bound is
** only belt and braces. */
static uint32_t jump_target(const em_rinst *prog, uint32_t n, uint32_t t)
{
    for (uint32_t k = 0; k < n && prog[t].op == RI_JMP; k++)
        t = prog[t].x;
    return t;
}

/* Points every successor past jumps, so threads skip them: consuming
** instructions then continue at x instead of pc + 1. */
static void cut_jumps(em_rinst *prog, uint32_t n)
{
    for (uint32_t pc = 0; pc < n; pc++) {
        em_rinst *in = &prog[pc];
        if (in->op == RI_MATCH)
            continue;
        if (in->op != RI_SPLIT && in->op != RI_JMP)
            in->x = (uint16_t)(pc + 1);
        in->x = (uint16_t)jump_target(prog, n, in->x);
        if (in->op == RI_SPLIT)
            in->y = (uint16_t)jump_target(prog, n, in->y);
    }
}

static void emit(remit *e, int32_t i)
{
    const rnode *n = &e->p->node[i];
    const em_rclass *c;

    switch (n->type) {
    case N_LIT:
        for (unsigned k = 0; k < n->nlit; k++)
            e->prog[put(e, RI_BYTE, 0, 0)].byte = n->lit[k];
        break;
    case N_CLASS:
        c = &e->cls[n->cls];
        if (c->single >= 0)         /* [a], [.]: a plain byte */
            e->prog[put(e, RI_BYTE, 0, 0)].byte = (uint8_t)c->single;
        else
            e->prog[put(e, RI_CLASS, 0, 0)].cls = (uint16_t)n->cls;
        break;
    case N_BOL: put(e, RI_BOL, 0, 0); break;
    case N_EOL: put(e, RI_EOL, 0, 0); break;
    case N_CAT:
        for (int32_t k = n->kid; k >= 0; k = e->p->node[k].next)
            emit(e, k);
        break;
    case N_ALT: emit_alt(e, n); break;
    case N_REP: emit_rep(e, n); break;
    default: break;
    }
}

/* ---- the VM ------------------------------------------------------------- */

/* A set of pcs for one input position. Consuming instructions and MATCH
** fill pc[] from the front (the threads to step); epsilon ones, kept only
** so that their marks can be cleared, fill it from the back. */
typedef struct rset {
    uint16_t *pc;
    uint8_t *mark;              /* mark[pc]: pc is in the set */
    uint32_t nfront, nback;
} rset;

typedef struct rvm {
    const em_regex *re;
    const em_rinst *prog;
    const uint8_t *s;
    size_t len;                 /* SIZE_MAX while computing the prefix */
    rset set[EM_RE_NSETS];      /* set[k] is for positions = k mod 5 */
    uint16_t *stack;            /* closure worklist: each pc once, <= nprog */
    size_t live;                /* front entries over all sets */
    bool blocked;               /* an RI_EOL failed (prefix analysis) */
} rvm;

/* Scratch for programs of up to EM_RE_SMALL instructions, on the stack. */
typedef struct rsmall {
    uint16_t pcs[(EM_RE_NSETS + 1) * EM_RE_SMALL];
    uint8_t marks[EM_RE_NSETS * EM_RE_SMALL];
} rsmall;

static size_t scratch_size(uint32_t n)
{
    return (EM_RE_NSETS + 1) * n * sizeof(uint16_t) + EM_RE_NSETS * n;
}

static void vm_init(rvm *vm, const em_regex *re, uint16_t *pcs, uint8_t *marks,
                    const uint8_t *s, size_t len)
{
    uint32_t n = re->nprog;

    vm->re = re, vm->prog = re->prog, vm->s = s, vm->len = len;
    for (int k = 0; k < EM_RE_NSETS; k++) {
        vm->set[k].pc = pcs + (size_t)k * n;
        vm->set[k].mark = marks + (size_t)k * n;
        vm->set[k].nfront = vm->set[k].nback = 0;
    }
    vm->stack = pcs + (size_t)EM_RE_NSETS * n;
    vm->live = 0;
    vm->blocked = false;
    memset(marks, 0, (size_t)EM_RE_NSETS * n);
}

/* Adds PC and everything reachable from it without consuming input, at
** position POS (which decides RI_BOL and RI_EOL), to set S. */
static void vm_closure(rvm *vm, rset *S, uint32_t pc, size_t pos)
{
    uint16_t *stk = vm->stack;
    uint32_t top = 0, n = vm->re->nprog;

#define EM_RE_PUSH(t) do { if (!S->mark[t]) { S->mark[t] = 1; \
                           stk[top++] = (uint16_t)(t); } } while (0)
    EM_RE_PUSH(pc);
    while (top > 0) {
        const em_rinst *in = &vm->prog[pc = stk[--top]];
        switch (in->op) {
        case RI_JMP: EM_RE_PUSH(in->x); break;
        case RI_SPLIT: EM_RE_PUSH(in->x); EM_RE_PUSH(in->y); break;
        case RI_BOL: if (pos == 0) EM_RE_PUSH(in->x); break;
        case RI_EOL:
            if (pos == vm->len)
                EM_RE_PUSH(in->x);
            else
                vm->blocked = true;
            break;
        default:
            S->pc[S->nfront++] = (uint16_t)pc;
            vm->live++;
            continue;
        }
        S->pc[n - 1 - S->nback++] = (uint16_t)pc;
    }
#undef EM_RE_PUSH
}

/* vm_closure, with the common case of a resting instruction inline. */
static inline void vm_add(rvm *vm, rset *S, uint32_t pc, size_t pos)
{
    if (S->mark[pc])
        return;
    if (vm->prog[pc].op > RI_MATCH) {
        vm_closure(vm, S, pc, pos);
        return;
    }
    S->mark[pc] = 1;
    S->pc[S->nfront++] = (uint16_t)pc;
    vm->live++;
}

static void set_clear(rvm *vm, rset *S)
{
    uint32_t n = vm->re->nprog;

    for (uint32_t i = 0; i < S->nfront; i++)
        S->mark[S->pc[i]] = 0;
    for (uint32_t i = 0; i < S->nback; i++)
        S->mark[S->pc[n - 1 - i]] = 0;
    vm->live -= S->nfront;
    S->nfront = S->nback = 0;
}

/* Steps the threads of set K (position POS) over the unit at POS. */
static void vm_step(rvm *vm, unsigned k, size_t pos)
{
    const rset *cur = &vm->set[k];
    uint32_t cp = 0;
    unsigned w = 0;

    for (uint32_t i = 0; i < cur->nfront; i++) {
        uint32_t pc = cur->pc[i];
        const em_rinst *in = &vm->prog[pc];
        if (in->op == RI_BYTE) {
            if (vm->s[pos] == in->byte)
                vm_add(vm, &vm->set[k == 4 ? 0 : k + 1], in->x, pos + 1);
        } else if (in->op == RI_CLASS) {
            if (w == 0)
                w = utf8_unit(vm->s + pos, vm->len - pos, &cp);
            if (class_has(vm->re, &vm->re->cls[in->cls], cp, w))
                vm_add(vm, &vm->set[(k + w) % EM_RE_NSETS], in->x, pos + w);
        }
    }
}

/* The Pike VM proper: true when the whole subject matches. The caller has
** checked the prefix, so with has_start the run begins right after it. */
static bool vm_run(rvm *vm)
{
    const em_regex *re = vm->re;
    size_t pos = re->has_start ? re->nprefix : 0;
    unsigned k = (unsigned)(pos % EM_RE_NSETS);

    if (!re->has_start)
        vm_add(vm, &vm->set[0], 0, 0);
    for (uint32_t i = 0; i < re->nstart; i++)
        vm_add(vm, &vm->set[k], re->start[i], pos);
    for (; pos < vm->len; pos++) {
        if (vm->live == 0)
            return false;       /* every thread died */
        vm_step(vm, k, pos);
        set_clear(vm, &vm->set[k]);
        k = k == 4 ? 0 : k + 1;
    }
    return vm->set[k].mark[vm->re->nprog - 1] != 0;
}

/* A scratch block for a large program: the regex's spare when free, else a
** new one; when memory is out, waits for the spare, which the thread
** holding it returns within one bounded match. */
static void *scratch_take(const em_regex *re)
{
    em_regex *m = (em_regex *)re;      /* the object is not const: see top */
    void *b = atomic_exchange(&m->spare, NULL);

    if (b == NULL)
        b = em_malloc(scratch_size(re->nprog));
    while (b == NULL) {
        sched_yield();
        b = atomic_exchange(&m->spare, NULL);
    }
    return b;
}

static void scratch_give(const em_regex *re, void *b)
{
    em_regex *m = (em_regex *)re;
    void *none = NULL;

    if (!atomic_compare_exchange_strong(&m->spare, &none, b))
        em_free(b);
}

static bool vm_match(const em_regex *re, const uint8_t *s, size_t len)
{
    rsmall small;
    uint16_t *block;
    rvm vm;
    bool r;

    if (re->nprog <= EM_RE_SMALL) {
        vm_init(&vm, re, small.pcs, small.marks, s, len);
        return vm_run(&vm);
    }
    block = scratch_take(re);
    vm_init(&vm, re, block, (uint8_t *)(block + (EM_RE_NSETS + 1) *
                                        (size_t)re->nprog), s, len);
    r = vm_run(&vm);
    scratch_give(re, block);
    return r;
}

/* ---- analyses ----------------------------------------------------------- */

/* The byte all threads of set S consume next, or -1 when they disagree, one
** is not a plain byte, or one is MATCH. */
static int set_common_byte(const rvm *vm, const rset *S)
{
    int b = -1;

    for (uint32_t i = 0; i < S->nfront; i++) {
        const em_rinst *in = &vm->prog[S->pc[i]];
        if (in->op != RI_BYTE || (b >= 0 && in->byte != b))
            return -1;
        b = in->byte;
    }
    return b;
}

/* Keeps the threads S the prefix walk ended with, so that matching can
** start after the prefix. Not when a $ stopped the walk: S then depends on
** where the subject ends. */
static int keep_start(em_regex *re, const rvm *vm, const rset *S)
{
    if (vm->blocked || re->literal || re->nprefix == 0)
        return EMBER_OK;
    re->start = em_malloc(S->nfront * sizeof *re->start);
    if (re->start == NULL)
        return EMBER_ENOMEM;
    memcpy(re->start, S->pc, S->nfront * sizeof *re->start);
    re->nstart = S->nfront;
    re->has_start = true;
    return EMBER_OK;
}

/* Walks the program from the start while every live thread wants the same
** byte: those bytes are a prefix of every match. If the walk ends with MATCH
** as the only thread (no $ in the way), the regex is that one string.
** The walk ends by nprog bytes, which only a regex matching nothing reaches
** (x*^ loops on x for ever). It may stop early at no loss of correctness
** (a shorter prefix is still a prefix), so its work is also capped at a few
** times the program size: many threads agreeing over a long walk, as in
** (a{1,99}){1,99}a{200}, would otherwise cost nprog squared. */
static int find_prefix(em_regex *re, rvm *vm)
{
    size_t budget = 4 * (size_t)re->nprog + 64;
    unsigned k = 0;
    int b, rc;

    re->prefix = em_malloc(re->nprog + 1);
    if (re->prefix == NULL)
        return EMBER_ENOMEM;
    vm_add(vm, &vm->set[0], 0, 0);
    while (!vm->blocked && re->nprefix < re->nprog &&   /* prefix's size */
           budget > vm->set[k].nfront + vm->set[k].nback &&
           (b = set_common_byte(vm, &vm->set[k])) >= 0) {
        rset *cur = &vm->set[k];
        budget -= cur->nfront + cur->nback;
        re->prefix[re->nprefix++] = (char)b;
        for (uint32_t i = 0; i < cur->nfront; i++)
            vm_add(vm, &vm->set[k ^ 1], vm->prog[cur->pc[i]].x, re->nprefix);
        set_clear(vm, cur);
        k ^= 1;
    }
    re->prefix[re->nprefix] = '\0';
    re->literal = !vm->blocked && vm->set[k].nfront == 1 &&
                  vm->prog[vm->set[k].pc[0]].op == RI_MATCH;
    rc = keep_start(re, vm, &vm->set[k]);
    set_clear(vm, &vm->set[0]);
    set_clear(vm, &vm->set[1]);
    return rc;
}

/* True when node I is a concatenation of literals without '\n' and .*;
** counts the literal bytes and the .* seen. */
static bool glob_scan(const rparser *p, int32_t i, size_t *nbytes,
                      size_t *nstars)
{
    const rnode *n = &p->node[i];

    switch (n->type) {
    case N_EMPTY: return true;
    case N_LIT:
        *nbytes += n->nlit;
        return memchr(n->lit, '\n', n->nlit) == NULL;
    case N_REP:
        *nstars += 1;
        return n->min == 0 && n->max == EM_RE_INF &&
               p->node[n->kid].type == N_CLASS && p->node[n->kid].dot;
    case N_CAT:
        for (int32_t k = n->kid; k >= 0; k = p->node[k].next)
            if (!glob_scan(p, k, nbytes, nstars))
                return false;
        return true;
    default: return false;
    }
}

static void glob_fill(const rparser *p, int32_t i, em_regex *re, size_t *off)
{
    const rnode *n = &p->node[i];

    if (n->type == N_LIT) {
        memcpy(re->glob + *off, n->lit, n->nlit);
        *off += n->nlit;
    } else if (n->type == N_REP) {
        re->gend[re->nglob++] = *off;   /* .* ends a segment */
    } else if (n->type == N_CAT) {
        for (int32_t k = n->kid; k >= 0; k = p->node[k].next)
            glob_fill(p, k, re, off);
    }
}

/* Records the L0.*L1.*...Ln shape, when the regex has it, for glob_match. */
static int find_glob(em_regex *re, const rparser *p, int32_t root)
{
    size_t nbytes = 0, nstars = 0, off = 0;

    if (re->literal || !glob_scan(p, root, &nbytes, &nstars) || nstars == 0)
        return EMBER_OK;
    re->glob = em_malloc(nbytes);
    re->gend = em_malloc((nstars + 1) * sizeof *re->gend);
    if (re->glob == NULL || re->gend == NULL)
        return EMBER_ENOMEM;
    glob_fill(p, root, re, &off);
    re->gend[re->nglob++] = off;
    return EMBER_OK;
}

/* L0.*L1.*...Ln: no '\n' (only .* could hold one and '.' does not), L0 at
** the start, Ln at the end, the others leftmost in order in between (a
** greedy leftmost choice never loses a match when gaps are unconstrained). */
static bool glob_match(const em_regex *re, const uint8_t *s, size_t len)
{
    size_t n = re->nglob, a = re->gend[0];
    size_t z = re->gend[n - 1] - re->gend[n - 2], pos = a, end;

    if (len < a + z || memchr(s, '\n', len) != NULL)
        return false;
    end = len - z;
    if (memcmp(s, re->glob, a) != 0 ||
        memcmp(s + end, re->glob + re->gend[n - 2], z) != 0)
        return false;
    for (size_t k = 1; k + 1 < n; k++) {
        size_t from = re->gend[k - 1], sn = re->gend[k] - from;
        const uint8_t *f = sn == 0 ? s + pos :
                           memmem(s + pos, end - pos, re->glob + from, sn);
        if (f == NULL)
            return false;
        pos = (size_t)(f - s) + sn;
    }
    return true;
}

/* ---- public entry points ------------------------------------------------ */

/* Runs find_prefix on a scratch block sized for the program. */
static int analyse(em_regex *re)
{
    rsmall small;
    uint16_t *block = re->nprog <= EM_RE_SMALL ? small.pcs : re->spare;
    uint8_t *marks = re->nprog <= EM_RE_SMALL ? small.marks :
        (uint8_t *)(block + (EM_RE_NSETS + 1) * (size_t)re->nprog);
    rvm vm;

    vm_init(&vm, re, block, marks, NULL, SIZE_MAX);
    return find_prefix(re, &vm);
}

/* Builds the regex from the parsed ROOT; takes the classes from P. */
static int build(rparser *p, int32_t root, em_regex **out)
{
    uint32_t size = node_size(p, root) + 1;
    em_regex *re;
    remit e = {p, p->cls, NULL, 0};

    if (size > EM_RE_MAX_PROG)
        return perr(p, EMBER_ELIMIT, SIZE_MAX, "compiled program exceeds %d "
                    "instructions (reduce counted repetitions)",
                    EM_RE_MAX_PROG);
    if ((re = em_calloc(1, sizeof *re)) == NULL)
        return nomem(p->pat, p->len);
    atomic_init(&re->spare, NULL);
    re->cls = p->cls, re->rng = p->rng;
    p->cls = NULL, p->rng = NULL;
    re->nprog = size;
    e.prog = re->prog = em_malloc(size * sizeof *re->prog);
    if (re->prog == NULL)
        goto fail;
    if (size > EM_RE_SMALL) {   /* the first spare, never lost: see take */
        atomic_store(&re->spare, em_malloc(scratch_size(size)));
        if (atomic_load(&re->spare) == NULL)
            goto fail;
    }
    emit(&e, root);
    put(&e, RI_MATCH, 0, 0);
    cut_jumps(re->prog, size);
    if (analyse(re) != EMBER_OK || find_glob(re, p, root) != EMBER_OK)
        goto fail;
    *out = re;
    return EMBER_OK;
fail:
    em_regex_free(re);
    return nomem(p->pat, p->len);
}

int em_regex_compile(const char *pattern, em_regex **out)
{
    rparser p;
    int32_t root;
    int rc;

    *out = NULL;
    if (pattern == NULL)
        return em_err(EMBER_EINVAL, "regex: NULL pattern");
    memset(&p, 0, sizeof p);
    p.pat = pattern;
    p.len = strnlen(pattern, EM_RE_MAX_PATTERN + 1);
    if (p.len > EM_RE_MAX_PATTERN)
        return em_err(EMBER_ELIMIT, "regex \"%.60s...\": pattern longer "
                      "than %d bytes", pattern, EM_RE_MAX_PATTERN);
    rc = parse_pattern(&p, &root);
    if (rc == EMBER_OK)
        rc = build(&p, root, out);
    em_free(p.node);
    em_free(p.cls);
    em_free(p.rng);
    return rc;
}

/* Fast paths first: literal, then prefix, then glob shape, then the VM. */
bool em_regex_match(const em_regex *re, const char *s, size_t len)
{
    const uint8_t *u = (const uint8_t *)(s != NULL ? s : "");

    if (s == NULL)              /* len is 0: keep NULL from mem* calls */
        s = "";
    if (re->literal)
        return len == re->nprefix &&
               (len == 0 || memcmp(s, re->prefix, len) == 0);
    if (len < re->nprefix ||
        (re->nprefix > 0 && memcmp(s, re->prefix, re->nprefix) != 0))
        return false;
    if (re->nglob > 0)
        return glob_match(re, u, len);
    return vm_match(re, u, len);
}

const char *em_regex_prefix(const em_regex *re, size_t *len)
{
    if (len != NULL)
        *len = re->nprefix;
    return re->prefix;
}

bool em_regex_is_literal(const em_regex *re)
{
    return re->literal;
}

void em_regex_free(em_regex *re)
{
    if (re == NULL)
        return;
    em_free(re->prog);
    em_free(re->cls);
    em_free(re->rng);
    em_free(re->prefix);
    em_free(re->start);
    em_free(re->glob);
    em_free(re->gend);
    em_free(atomic_load(&re->spare));
    em_free(re);
}
