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
** - Matching is fully anchored and '.' matches '\n' unless (?-s) says
**   otherwise, as Prometheus wraps patterns in ^(?s:...)$; the syntax and
**   meaning follow Go's regexp/syntax (tests/e2e/regex_go.sh checks them
**   against Go on generated patterns). Unicode classes and case folding
**   come from tables generated from Go's unicode package (regex_unicode.c).
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
**   applied when the class is built, never while matching. A stray byte is
**   in a class when U+FFFD is (Go decodes it as U+FFFD) or when the
**   pattern lists that raw byte in brackets.
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
#include "regex_unicode.h"

#define EM_RE_MAX_PATTERN 4096  /* bytes */
#define EM_RE_MAX_REPEAT 1000   /* n and m in {n,m} */
#define EM_RE_MAX_PROG 20000    /* instructions, MATCH included */
#define EM_RE_MAX_DEPTH 100     /* nested groups: bounds the recursion */
#define EM_RE_MAX_RANGES 65536  /* code-point ranges of all classes */
#define EM_RE_SMALL 512         /* programs up to this size match on stack */
#define EM_RE_INF 0xffff        /* rnode.max of an unbounded repetition */
#define EM_RE_NONE 0xffff       /* end of a patch chain */
#define EM_RE_NSETS 5           /* this position and the next four */
#define EM_RE_MAX_CP 0x10ffff

/* ---- program ------------------------------------------------------------ */

/* Threads rest on RI_BYTE, RI_CLASS and RI_MATCH (<= RI_MATCH); the others
** are followed at once when a thread is added. RI_BOL and RI_EOL are the
** start and end of the subject, RI_BOLL and RI_EOLL those of a line
** ((?m)), RI_WORDB and RI_NWORDB an ASCII word boundary and its absence. */
enum { RI_BYTE, RI_CLASS, RI_MATCH, RI_SPLIT, RI_JMP, RI_BOL, RI_EOL,
       RI_BOLL, RI_EOLL, RI_WORDB, RI_NWORDB };

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
    bool glob_nl;               /* its .* match '\n' (no (?-s)) */
    _Atomic(void *) spare;      /* a VM scratch block for large programs */
};

/* ---- UTF-8 units -------------------------------------------------------- */

/* The unit at S (N > 0 bytes there) into *CP, returning its length: the
** character em_utf8_decode reads, or one byte that starts none with *CP
** that byte, which is how classes and literals match it (docs/regex.md). */
static inline unsigned utf8_unit(const uint8_t *s, size_t n, uint32_t *cp)
{
    unsigned w = em_utf8_decode(s, n, cp);

    if (w == 1)
        *cp = s[0];
    return w;
}

static bool bit_has(const uint32_t *bits, uint32_t c)
{
    return (bits[c >> 5] >> (c & 31)) & 1;
}

static void bit_set(uint32_t *bits, uint32_t c)
{
    bits[c >> 5] |= 1u << (c & 31);
}

/* True when CP is in the N sorted, disjoint ranges R. */
static bool rng_has(const uint32_t (*r)[2], size_t n, uint32_t cp);

/* True when class C holds the unit (CP, W) that utf8_unit decoded. */
static bool class_has(const em_regex *re, const em_rclass *c, uint32_t cp,
                      unsigned w)
{
    if (w == 1)
        return bit_has(c->bits, cp);
    return c->n > 0 && rng_has(re->rng + c->first, c->n, cp);
}

/* ---- parser state and errors -------------------------------------------- */

/* N_BOL ... N_NWORDB are the assertions, in the order of RI_BOL ... */
enum { N_EMPTY, N_LIT, N_CLASS, N_BOL, N_EOL, N_BOLL, N_EOLL, N_WORDB,
       N_NWORDB, N_CAT, N_ALT, N_REP };

/* Flags of (?flags) and (?flags:re), as Go's regexp/syntax has them. */
enum { RF_ICASE = 1,            /* i: case folds (Unicode simple folding) */
       RF_DOTNL = 2,            /* s: '.' matches '\n' (the default here) */
       RF_MULTI = 4,            /* m: ^ and $ match at line ends too */
       RF_UNGREEDY = 8 };       /* U: swaps lazy and greedy: no effect */

typedef struct rnode {
    uint8_t type;               /* N_* */
    uint8_t nlit;               /* N_LIT: bytes in lit (one character) */
    uint8_t lit[4];
    uint8_t dot;                /* N_CLASS written '.': RF_DOTNL or 1 */
    uint16_t min, max;          /* N_REP; max EM_RE_INF when unbounded */
    uint32_t cls;               /* N_CLASS: index into rparser.cls */
    int32_t kid, next;          /* first child (CAT, ALT, REP); sibling */
} rnode;

typedef struct rparser {
    const char *pat;
    size_t len, pos;            /* pattern bytes; the next one to read */
    unsigned flags;             /* RF_* in effect at pos */
    bool quote;                 /* inside \Q...\E */
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

/* Makes room for N more ranges in p->rng, within EM_RE_MAX_RANGES: a
** Unicode table or its complement can hold hundreds, so a 4 KB pattern of
** \pL would otherwise take megabytes. */
static int rng_reserve(rparser *p, size_t n)
{
    void *q;

    if (p->nrng + n > EM_RE_MAX_RANGES)
        return perr(p, EMBER_ELIMIT, p->pos, "character classes exceed %d "
                    "code-point ranges", EM_RE_MAX_RANGES);
    q = em_grow(p->rng, &p->crng, p->nrng + n, sizeof *p->rng);
    if (q == NULL)
        return nomem(p->pat, p->len);
    p->rng = q;
    return EMBER_OK;
}

/* Starts a class, empty, whose ranges go at the tail of p->rng. While it is
** built its bits hold only the raw stray bytes listed in brackets. */
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

/* Adds the code points LO..HI to the class being built. */
static int class_add(rparser *p, uint32_t lo, uint32_t hi)
{
    int rc = rng_reserve(p, 1);

    if (rc == EMBER_OK) {
        p->rng[p->nrng][0] = lo;
        p->rng[p->nrng++][1] = hi;
    }
    return rc;
}

static int range_cmp(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and merges the ranges p->rng[from, nrng) in place; returns how
** many remain. */
static size_t rng_merge(rparser *p, size_t from)
{
    uint32_t (*r)[2];
    size_t n = p->nrng - from, m = 0;

    if (n == 0)                 /* and p->rng may be NULL */
        return 0;
    r = p->rng + from;
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
    p->nrng = from + m + 1;
    return m + 1;
}

/* True when CP is in the N sorted, disjoint ranges R. */
static bool rng_has(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
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

/* Replaces the merged ranges p->rng[from, nrng) by their complement in
** [0, 0x10FFFF]. Writing gap j never overtakes the reading of range j,
** which sits one slot to the right. */
static int rng_negate(rparser *p, size_t from)
{
    size_t n = p->nrng - from, m = 0;
    uint32_t (*r)[2], start = 0;
    int rc = rng_reserve(p, 1);

    if (rc != EMBER_OK)
        return rc;
    r = p->rng + from;
    memmove(r + 1, r, n * sizeof *r);
    for (size_t k = 0; k < n; k++) {
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
    p->nrng = from + m;
    return EMBER_OK;
}

/* The first fold pair whose code point is >= CP. */
static size_t fold_lower(uint32_t cp)
{
    size_t lo = 0, hi = em_re_nfolds;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (em_re_folds[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* unicode.SimpleFold(CP): the next member of its case orbit, or CP. */
static uint32_t fold_next(uint32_t cp)
{
    size_t k = fold_lower(cp);

    return k < em_re_nfolds && em_re_folds[k][0] == cp ? em_re_folds[k][1]
                                                        : cp;
}

/* Closes p->rng[from, nrng) under case folding, as (?i) does in Go: every
** member of the orbit of each code point in it is added (k gives K and
** U+212A KELVIN SIGN). A range that spans all the code points that fold
** (each member of an orbit is one) leaves nothing to add, as (?i)\p{Any}
** would otherwise walk every orbit. Orbits have at most four members; the
** bound only guards against a bad table. */
static int rng_fold(rparser *p, size_t from)
{
    size_t n = rng_merge(p, from);
    int rc = EMBER_OK;

    for (size_t i = 0; i < n; i++)      /* holds every folding code point */
        if (p->rng[from + i][0] <= em_re_folds[0][0] &&
            p->rng[from + i][1] >= em_re_folds[em_re_nfolds - 1][0])
            return EMBER_OK;
    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        for (size_t k = fold_lower(p->rng[from + i][0]);
             rc == EMBER_OK && k < em_re_nfolds &&
             em_re_folds[k][0] <= p->rng[from + i][1]; k++) {
            uint32_t f = em_re_folds[k][1];
            for (int j = 0; j < 8 && f != em_re_folds[k][0] &&
                 rc == EMBER_OK; j++, f = fold_next(f))
                if (!rng_has(p->rng + from, n, f))
                    rc = class_add(p, f, f);
        }
    }
    if (rc == EMBER_OK)
        rng_merge(p, from);
    return rc;
}

/* Ends one item of a class (a character, range, \d, \pL, [:alpha:]...)
** whose ranges start at FROM: folds it under (?i) and then, with NEG,
** replaces it by its complement. Go folds each item before negating it,
** so (?i)\W matches neither k nor K, which folding \W itself would. */
static int item_finish(rparser *p, size_t from, bool neg)
{
    int rc = EMBER_OK;

    if (p->flags & RF_ICASE)
        rc = rng_fold(p, from);
    if (rc == EMBER_OK && neg) {
        rng_merge(p, from);
        rc = rng_negate(p, from);
    }
    return rc;
}

/* Adds set D (\d, [:alpha:]) as an item, or with NEG its complement. */
static int class_add_set(rparser *p, const rset_def *d, bool neg)
{
    size_t from = p->nrng;
    int rc = EMBER_OK;

    for (unsigned i = 0; i < d->nr && rc == EMBER_OK; i++)
        rc = class_add(p, d->r[i][0], d->r[i][1]);
    return rc == EMBER_OK ? item_finish(p, from, neg) : rc;
}

/* The Unicode table named by the N bytes at NAME, or NULL. */
static const em_re_utable *utable_find(const char *name, size_t n)
{
    size_t lo = 0, hi = em_re_nutables;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, k = strlen(em_re_utables[mid].name);
        int c = memcmp(em_re_utables[mid].name, name, k < n ? k : n);
        if (c == 0)
            c = k < n ? -1 : k > n;
        if (c == 0)
            return &em_re_utables[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Adds Unicode table T (\pL, \p{Greek}) as an item, or with NEG (\PL,
** \p{^Greek}) its complement. */
static int class_add_table(rparser *p, const em_re_utable *t, bool neg)
{
    size_t from = p->nrng;
    int rc = rng_reserve(p, t->n);

    if (rc != EMBER_OK)
        return rc;
    memcpy(p->rng + p->nrng, em_re_uranges + t->first, t->n * sizeof *p->rng);
    p->nrng += t->n;
    return item_finish(p, from, neg);
}

/* Merges class CI, applies NEG to it whole, and moves its ASCII part into
** bits: class CI is final. Stray bytes join when U+FFFD is in the class
** before NEG, as Go reads them as U+FFFD (so [^a] and \PL match them,
** [a-z] and [^\x{fffd}] do not). */
static int class_finish(rparser *p, uint32_t ci, bool neg)
{
    em_rclass *c = &p->cls[ci];
    size_t n = rng_merge(p, c->first), drop = 0;
    uint32_t (*r)[2], nbits = 0;
    int rc = EMBER_OK;

    if (n > 0 && rng_has(p->rng + c->first, n, 0xfffd))
        for (int i = 4; i < 8; i++)
            c->bits[i] = ~0u;
    if (neg && (rc = rng_negate(p, c->first)) != EMBER_OK)
        return rc;
    for (int i = 4; neg && i < 8; i++)
        c->bits[i] = ~c->bits[i];
    r = p->rng + c->first;
    n = p->nrng - c->first;
    for (; drop < n && r[drop][0] < 0x80; drop++) {
        for (uint32_t u = r[drop][0]; u <= r[drop][1] && u < 0x80; u++)
            bit_set(c->bits, u);
        if (r[drop][1] >= 0x80) {
            r[drop][0] = 0x80;  /* keep the part past ASCII */
            break;
        }
    }
    memmove(r, r + drop, (n - drop) * sizeof *r);
    p->nrng -= drop;
    c->n = (uint32_t)(n - drop);
    c->single = -1;
    for (uint32_t b = 0; b < 256; b++)
        nbits += bit_has(c->bits, b);
    for (uint32_t b = 0; c->n == 0 && nbits == 1 && b < 0x80; b++)
        if (bit_has(c->bits, b))
            c->single = (int32_t)b;
    return EMBER_OK;
}

/* Ends class CI with NEG and makes a node of it. */
static int class_close(rparser *p, uint32_t ci, bool neg, int32_t *out)
{
    int rc = class_finish(p, ci, neg);

    if (rc == EMBER_OK)
        rc = node_new(p, N_CLASS, out);
    if (rc == EMBER_OK)
        p->node[*out].cls = ci;
    return rc;
}

/* A node for '.': any character, or any but '\n' under (?-s). */
static int dot_node(rparser *p, int32_t *out)
{
    uint32_t ci = 0;
    bool nl = p->flags & RF_DOTNL;
    int rc = class_new(p, &ci);

    if (rc == EMBER_OK)
        rc = class_add(p, nl ? 0 : '\n' + 1, EM_RE_MAX_CP);
    if (rc == EMBER_OK && !nl)
        rc = class_add(p, 0, '\n' - 1);
    if (rc == EMBER_OK)
        rc = class_close(p, ci, false, out);
    if (rc == EMBER_OK)
        p->node[*out].dot = nl ? RF_DOTNL : 1;
    return rc;
}

/* ---- escapes and bracket expressions ------------------------------------ */

static bool is_alnum(int c)
{
    return is_digit((char)c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static int hex_digit(int c)
{
    if (is_digit((char)c))
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int bad_escape(const rparser *p, size_t at)
{
    int c = at + 1 < p->len ? (uint8_t)p->pat[at + 1] : -1;

    if (c < 0)
        return perr(p, EMBER_EINVAL, at, "expected a character after '\\'");
    if (c > 0x20 && c < 0x7f)
        return perr(p, EMBER_EINVAL, at,
                    "unknown escape '\\%c' (expected \\ before punctuation "
                    "or one of a f n r t v x 0-7 d D w W s S p P, or "
                    "outside brackets b B A z Q)", c);
    return perr(p, EMBER_EINVAL, at,
                "unknown escape (expected \\ before punctuation or a letter "
                "or digit that names an escape)");
}

/* \x41 or \x{263a} at AT (a '\'), as Go reads them: exactly two hex digits,
** or one or more in braces up to 10FFFF (a surrogate is accepted and, as
** in Go, matches nothing). */
static int hex_escape(rparser *p, size_t at, uint32_t *cp)
{
    const char *s = p->pat;
    size_t i = at + 2, nd = 0;
    uint32_t v = 0;

    if (i < p->len && s[i] == '{') {
        for (i++; i < p->len && hex_digit(s[i]) >= 0 && v <= EM_RE_MAX_CP;
             i++, nd++)
            v = v * 16 + (uint32_t)hex_digit(s[i]);
        if (nd > 0 && v <= EM_RE_MAX_CP && i < p->len && s[i] == '}') {
            *cp = v;
            p->pos = i + 1;
            return EMBER_OK;
        }
    } else if (i + 1 < p->len && hex_digit(s[i]) >= 0 &&
               hex_digit(s[i + 1]) >= 0) {
        *cp = (uint32_t)(hex_digit(s[i]) * 16 + hex_digit(s[i + 1]));
        p->pos = i + 2;
        return EMBER_OK;
    }
    return perr(p, EMBER_EINVAL, at, "expected \\x and two hex digits, or "
                "\\x{...} with 1 or more hex digits up to 10FFFF");
}

/* A character escape at p->pos (a '\'), as Go's parseEscape: any ASCII
** punctuation or other non-alphanumeric character, \a \f \n \r \t \v,
** octal \0 \12 \101 (\1 to \7 alone would be back-references: errors),
** \x41 and \x{263a}. Sets *CP to the code point it stands for. */
static int escape_char(rparser *p, uint32_t *cp)
{
    static const char from[] = "afnrtv", to[] = "\a\f\n\r\t\v";
    const char *s = p->pat, *f;
    size_t at = p->pos, i = at + 2;
    int c = at + 1 < p->len ? (uint8_t)s[at + 1] : -1;

    if (c >= 0 && c < 0x80 && !is_alnum(c)) {
        *cp = (uint32_t)c;
    } else if (c >= '0' && c <= '7') {
        if (c != '0' && (i >= p->len || s[i] < '0' || s[i] > '7'))
            return bad_escape(p, at);
        *cp = (uint32_t)(c - '0');
        for (int k = 1; k < 3 && i < p->len && s[i] >= '0' && s[i] <= '7';
             k++)
            *cp = *cp * 8 + (uint32_t)(s[i++] - '0');
    } else if (c == 'x') {
        return hex_escape(p, at, cp);
    } else if (c > 0 && (f = strchr(from, c)) != NULL) {
        *cp = (uint8_t)to[f - from];
    } else {
        return bad_escape(p, at);
    }
    p->pos = i;
    return EMBER_OK;
}

/* \pL, \p{Greek}, \PL, \p{^Greek} or \P{^Greek} at p->pos, added to the
** class being built. Names are Go's: the general categories, the scripts
** and Any, case-sensitive. */
static int unicode_item(rparser *p)
{
    const char *s = p->pat, *name = s + p->pos + 2, *end;
    size_t at = p->pos, n = 0;
    bool neg = s[at + 1] == 'P';
    const em_re_utable *t;
    uint32_t cp;

    if (at + 2 < p->len && *name == '{') {
        end = memchr(name, '}', p->len - at - 2);
        if (end == NULL)
            return perr(p, EMBER_EINVAL, at, "expected '}' to end \\%c{",
                        s[at + 1]);
        name++;
        n = (size_t)(end - name);
        p->pos = (size_t)(end - s) + 1;
    } else if (at + 2 < p->len) {
        n = utf8_unit((const uint8_t *)name, p->len - at - 2, &cp);
        p->pos = at + 2 + n;
    }
    if (n > 0 && *name == '^') {
        neg = !neg;
        name++, n--;
    }
    if ((t = utable_find(name, n)) == NULL)
        return perr(p, EMBER_EINVAL, at, "unknown Unicode class \"%.*s\" "
                    "(expected a category such as L, Lu or N, a script such "
                    "as Greek or Latin, or Any)", (int)(n > 30 ? 30 : n),
                    name);
    return class_add_table(p, t, neg);
}

/* One bracket character at p->pos into *CP; *RAW when it is a pattern byte
** that does not start a UTF-8 character, which stands for that byte. */
static int bracket_char(rparser *p, uint32_t *cp, bool *raw)
{
    const uint8_t *s = (const uint8_t *)p->pat + p->pos;
    unsigned w;

    *raw = false;
    if (s[0] == '\\')
        return escape_char(p, cp);
    w = utf8_unit(s, p->len - p->pos, cp);
    *raw = w == 1 && *cp >= 0x80;
    p->pos += w;
    return EMBER_OK;
}

/* [:name:] or [:^name:] at p->pos, found as Go does: "[:" and then ":]"
** anywhere later. 1 when it was one (added), 0 when the '[' is a plain
** character, or an error for an unknown name. */
static int bracket_posix(rparser *p)
{
    const char *s = p->pat + p->pos, *end, *name;
    size_t rest = p->len - p->pos, n;
    bool neg;
    int rc;

    if (rest <= 2 || s[1] != ':' ||
        (end = memmem(s + 2, rest - 2, ":]", 2)) == NULL)
        return 0;
    n = (size_t)(end - s) - 2;
    neg = n > 0 && s[2] == '^';
    name = s + 2 + neg;
    for (size_t i = 0; i < EM_ARRAY_LEN(posix_sets); i++) {
        if (strlen(posix_sets[i].name) == n - neg &&
            memcmp(posix_sets[i].name, name, n - neg) == 0) {
            rc = class_add_set(p, &posix_sets[i], neg);
            p->pos += n + 4;
            return rc == EMBER_OK ? 1 : rc;
        }
    }
    return perr(p, EMBER_EINVAL, p->pos,
                "unknown class [:%.*s:] (expected alnum, alpha, ascii, "
                "blank, cntrl, digit, graph, lower, print, punct, space, "
                "upper, word or xdigit, or one of them after ^)",
                (int)(n > 20 ? 20 : n), s + 2);
}

/* One item of a bracket expression: [:name:], \pL, \d, a character or a
** range, added to class CI. */
static int bracket_item(rparser *p, uint32_t ci)
{
    const char *s = p->pat + p->pos;
    size_t at = p->pos, from = p->nrng;
    const rset_def *set;
    uint32_t lo, hi;
    bool neg, raw, raw_hi = false;
    int rc = s[0] == '[' ? bracket_posix(p) : 0;

    if (rc != 0)
        return rc < 0 ? rc : EMBER_OK;
    if (s[0] == '\\' && at + 1 < p->len && (s[1] == 'p' || s[1] == 'P'))
        return unicode_item(p);
    if (s[0] == '\\' && at + 1 < p->len &&
        (set = perl_set((uint8_t)s[1], &neg)) != NULL) {
        p->pos += 2;            /* a '-' after it is a character, as in Go */
        return class_add_set(p, set, neg);
    }
    if ((rc = bracket_char(p, &lo, &raw)) != EMBER_OK)
        return rc;
    hi = lo;
    if (peek(p) == '-' && p->pos + 1 < p->len && p->pat[p->pos + 1] != ']') {
        p->pos++;
        if (peek(p) == '\\' && p->pos + 1 < p->len &&
            strchr("dDwWsSpP", p->pat[p->pos + 1]) != NULL)
            raw_hi = true;      /* a class cannot end a range */
        else if ((rc = bracket_char(p, &hi, &raw_hi)) != EMBER_OK)
            return rc;
        if (hi < lo || raw || raw_hi)
            return perr(p, EMBER_EINVAL, at, "expected a range low-high "
                        "with low <= high, both characters");
    } else if (raw) {           /* a stray byte stands for itself */
        bit_set(p->cls[ci].bits, lo);
        return EMBER_OK;
    }
    rc = class_add(p, lo, hi);
    return rc == EMBER_OK ? item_finish(p, from, false) : rc;
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
        rc = class_close(p, ci, neg, out);
    }
    return rc;
}

/* ---- atoms, repetition, concatenation, alternation ---------------------- */

static int parse_alt(rparser *p, int32_t *out);

/* A literal character: the W pattern bytes at S (NULL for an escape), code
** point CP. It is a class under (?i) when CP has other cases; for U+FFFD,
** which also matches stray bytes; and for an escape past ASCII, which has
** no bytes in the pattern to compare with. */
static int literal_node(rparser *p, const uint8_t *s, unsigned w, uint32_t cp,
                        int32_t *out)
{
    bool raw = s != NULL && w == 1 && cp >= 0x80;
    uint8_t b = (uint8_t)cp;
    uint32_t ci;
    size_t from = p->nrng;
    int rc;

    if (!raw && (((p->flags & RF_ICASE) && fold_next(cp) != cp) ||
                 cp == 0xfffd || (s == NULL && cp >= 0x80))) {
        rc = class_new(p, &ci);
        if (rc == EMBER_OK)
            rc = class_add(p, cp, cp);
        if (rc == EMBER_OK)
            rc = item_finish(p, from, false);
        return rc == EMBER_OK ? class_close(p, ci, false, out) : rc;
    }
    rc = node_new(p, N_LIT, out);
    if (rc == EMBER_OK) {
        memcpy(p->node[*out].lit, s != NULL ? s : &b, s != NULL ? w : 1);
        p->node[*out].nlit = (uint8_t)(s != NULL ? w : 1);
    }
    return rc;
}

/* An escape outside brackets: an assertion (\A \z \b \B), the start of
** \Q...\E (no node: *out is -1), a class (\d, \pL) or a character. */
static int parse_escape(rparser *p, int32_t *out)
{
    static const char asserts[] = "AzbB";
    static const uint8_t types[] = {N_BOL, N_EOL, N_WORDB, N_NWORDB};
    size_t at = p->pos;
    int c = at + 1 < p->len ? (uint8_t)p->pat[at + 1] : -1;
    const char *a = c > 0 ? strchr(asserts, c) : NULL;
    const rset_def *set = NULL;
    uint32_t ci, cp;
    bool neg = false;
    int rc;

    if (a != NULL || c == 'Q') {
        p->pos += 2;
        p->quote = c == 'Q';
        *out = -1;
        return a != NULL ? node_new(p, types[a - asserts], out) : EMBER_OK;
    }
    if (c == 'p' || c == 'P' || (c >= 0 && (set = perl_set(c, &neg)))) {
        if ((rc = class_new(p, &ci)) == EMBER_OK && set != NULL) {
            p->pos += 2;
            rc = class_add_set(p, set, neg);
        } else if (rc == EMBER_OK) {
            rc = unicode_item(p);
        }
        return rc == EMBER_OK ? class_close(p, ci, false, out) : rc;
    }
    if ((rc = escape_char(p, &cp)) != EMBER_OK)
        return rc;
    return literal_node(p, NULL, 1, cp, out);
}

/* The letters of Go's flags: i m s U, as RF_* bits. */
static unsigned flag_bit(char c)
{
    switch (c) {
    case 'i': return RF_ICASE;
    case 'm': return RF_MULTI;
    case 's': return RF_DOTNL;
    case 'U': return RF_UNGREEDY;
    default: return 0;
    }
}

/* What follows "(?" (p->pos at the '?'; the group opened at AT): a named
** group (?P<name> or (?<name>, or flags as Go reads them, (?flags) or
** (?flags:, flags being letters of i m s U, then optionally '-' and at
** least one more to clear. Returns 1 for (?flags), which sets p->flags
** for the rest of the enclosing group, 0 for a group (whose flags are
** now in p->flags), or an error. */
static int group_prefix(rparser *p, size_t at)
{
    const char *s = p->pat;
    size_t i = p->pos + 1;
    unsigned flags = p->flags, f;
    bool minus = false, saw = false;

    if (i < p->len && (s[i] == '<' || (s[i] == 'P' && i + 1 < p->len &&
                                       s[i + 1] == '<'))) {
        size_t n = 0;
        i += s[i] == 'P' ? 2 : 1;
        while (i + n < p->len && is_name_char(s[i + n]))
            n++;
        if (n > 0 && i + n < p->len && s[i + n] == '>') {
            p->pos = i + n + 1;
            return 0;
        }
        return perr(p, EMBER_EINVAL, at, "expected a group name of letters, "
                    "digits and '_' and then '>'");
    }
    for (; i < p->len; i++) {
        if ((f = flag_bit(s[i])) != 0) {
            flags = minus ? flags & ~f : flags | f;
            saw = true;
        } else if (s[i] == '-' && !minus) {
            minus = true;
            saw = false;
        } else if ((s[i] == ':' || s[i] == ')') && (!minus || saw)) {
            p->flags = flags;
            p->pos = i + 1;
            return s[i] == ')';
        } else {
            break;
        }
    }
    return perr(p, EMBER_EINVAL, at, "expected ':' or a group name after "
                "'(?', or flags of i m s U (clearing after '-') and then "
                "':' or ')'");
}

/* A group at p->pos: (re), (?:re), (?flags:re) or a named group; or flags
** (?flags), which make no node (*out is -1). The flags a group sets end
** with it. */
static int parse_group(rparser *p, int32_t *out)
{
    size_t at = p->pos++;
    unsigned flags = p->flags;
    int rc = peek(p) == '?' ? group_prefix(p, at) : 0;

    if (rc != 0) {
        *out = -1;
        return rc < 0 ? rc : EMBER_OK;
    }
    if (p->depth >= EM_RE_MAX_DEPTH)
        return perr(p, EMBER_ELIMIT, at, "groups nested deeper than %d",
                    EM_RE_MAX_DEPTH);
    p->depth++;
    rc = parse_alt(p, out);
    p->depth--;
    if (rc == EMBER_OK && peek(p) != ')')
        rc = perr(p, EMBER_EINVAL, p->pos, "expected ')'");
    p->pos++;
    p->flags = flags;
    return rc;
}

/* Reads the digits of a count at *I: false when there are none or a
** leading zero (Go then reads '{' as a literal); saturates past 100000. */
static bool scan_int(const rparser *p, size_t *i, uint32_t *v)
{
    const char *s = p->pat;
    size_t d = *i;

    if (d >= p->len || !is_digit(s[d]) ||
        (s[d] == '0' && d + 1 < p->len && is_digit(s[d + 1])))
        return false;
    for (*v = 0; *i < p->len && is_digit(s[*i]); (*i)++)
        *v = *v > 100000 ? *v : *v * 10 + (uint32_t)(s[*i] - '0');
    return true;
}

/* Reads {n}, {n,} or {n,m} at AT without judging the numbers: 1 and *END
** past '}' when the syntax is right, 0 when '{' is a literal (as in RE2). */
static int scan_count(const rparser *p, size_t at, uint32_t *min,
                      uint32_t *max, size_t *end)
{
    const char *s = p->pat;
    size_t i = at + 1;

    if (at >= p->len || s[at] != '{' || !scan_int(p, &i, min))
        return 0;
    *max = *min;
    if (i < p->len && s[i] == ',') {
        *max = UINT32_MAX;      /* {n,} */
        i++;
        if (i < p->len && s[i] != '}' && !scan_int(p, &i, max))
            return 0;
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

/* One atom at p->pos, which is not '|' or ')' (unless quoted) and not a
** quantifier; *out is -1 for flags and \Q...\E, which make no node. */
static int parse_atom(rparser *p, int32_t *out)
{
    const uint8_t *s = (const uint8_t *)p->pat + p->pos;
    uint32_t cp;
    unsigned w;

    if (p->quote && s[0] == '\\' && p->pos + 1 < p->len && s[1] == 'E') {
        p->pos += 2;
        p->quote = false;
        *out = -1;
        return EMBER_OK;
    }
    switch (p->quote ? 0 : s[0]) {
    case '(': return parse_group(p, out);
    case '[': return parse_bracket(p, out);
    case '\\': return parse_escape(p, out);
    case '.': p->pos++; return dot_node(p, out);
    case '^':
        p->pos++;
        return node_new(p, p->flags & RF_MULTI ? N_BOLL : N_BOL, out);
    case '$':
        p->pos++;
        return node_new(p, p->flags & RF_MULTI ? N_EOLL : N_EOL, out);
    default: break;
    }
    w = utf8_unit(s, p->len - p->pos, &cp);
    p->pos += w;
    return literal_node(p, s, w, cp, out);
}

/* Applies the quantifier at p->pos to *LAST, the previous item of a
** concatenation (-1: none), as Go does: flags and \Q\E between them do not
** count, but a quantifier directly after another is an error. */
static int parse_repeat(rparser *p, int32_t *last, bool after_repeat)
{
    uint16_t min = 0, max = 0;
    size_t at = p->pos;
    int32_t rep;
    int rc;

    if (*last < 0)
        return perr(p, EMBER_EINVAL, at, "expected an expression before "
                    "'%c' to repeat", p->pat[at]);
    if (after_repeat)
        return perr(p, EMBER_EINVAL, at, "expected no second repetition "
                    "operator; group the first with (?:...)");
    if ((rc = parse_quantifier(p, &min, &max)) < 0)
        return rc;
    if ((rc = node_new(p, N_REP, &rep)) != EMBER_OK)
        return rc;
    p->node[rep].kid = *last;
    p->node[rep].min = min, p->node[rep].max = max;
    *last = rep;
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

/* Items up to '|', ')' or the end; a quantifier replaces the last item by
** its repetition (the REP node takes its place in the list). */
static int parse_cat(rparser *p, int32_t *out)
{
    int32_t cat, prev = -1, last = -1, item;
    bool after_repeat = false;
    int rc = node_new(p, N_CAT, &cat);

    while (rc == EMBER_OK && peek(p) >= 0 &&
           (p->quote || (peek(p) != '|' && peek(p) != ')'))) {
        if (!p->quote && quantifier_at(p, p->pos)) {
            rc = parse_repeat(p, &last, after_repeat);
            after_repeat = true;
        } else {
            rc = parse_atom(p, &item);
            after_repeat = false;
            if (rc != EMBER_OK || item < 0)
                continue;
            prev = last;
            last = item;
        }
        if (rc == EMBER_OK && prev < 0)
            p->node[cat].kid = last;
        else if (rc == EMBER_OK)
            p->node[prev].next = last;
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

/* The whole pattern, under Prometheus's (?s): '.' matches '\n'. A \Q
** without \E is an error, though Go alone reads it to the end: Prometheus
** wraps the pattern as ^(?s:re)$, so there the \Q quotes the ")$". */
static int parse_pattern(rparser *p, int32_t *root)
{
    int rc;

    p->flags = RF_DOTNL;
    rc = parse_alt(p, root);
    if (rc == EMBER_OK && p->quote)
        rc = perr(p, EMBER_EINVAL, p->len, "expected \\E to end \\Q");
    else if (rc == EMBER_OK && p->pos < p->len) /* only ')' stops parse_alt */
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
    case N_CLASS: case N_BOL: case N_EOL: case N_BOLL: case N_EOLL:
    case N_WORDB: case N_NWORDB: s = 1; break;
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
    case N_BOL: case N_EOL: case N_BOLL: case N_EOLL: case N_WORDB:
    case N_NWORDB:              /* the same order as RI_BOL ... */
        put(e, (uint8_t)(RI_BOL + (n->type - N_BOL)), 0, 0);
        break;
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

static bool is_word(uint8_t c)
{
    return is_name_char((char)c);
}

/* Whether assertion OP (RI_BOLL ... RI_NWORDB) holds at POS of the subject.
** Word characters are ASCII, as in RE2, so the bytes on either side
** decide: a byte of a multi-byte character is never one. */
static bool vm_assert(const rvm *vm, uint8_t op, size_t pos)
{
    bool before, after;

    if (op == RI_BOLL)
        return pos == 0 || vm->s[pos - 1] == '\n';
    if (op == RI_EOLL)
        return pos == vm->len || vm->s[pos] == '\n';
    before = pos > 0 && is_word(vm->s[pos - 1]);
    after = pos < vm->len && is_word(vm->s[pos]);
    return op == RI_WORDB ? before != after : before == after;
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
            if (in->op <= RI_MATCH) {
                S->pc[S->nfront++] = (uint16_t)pc;
                vm->live++;
                continue;
            }
            if (vm->len == SIZE_MAX && (pos > 0 || in->op != RI_BOLL))
                vm->blocked = true;     /* prefix walk: the rest unknown */
            else if (vm_assert(vm, in->op, pos))
                EM_RE_PUSH(in->x);
            break;
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

/* True when node I is a concatenation of literals and .*, all of one kind
** of dot (*DOT: RF_DOTNL or 1 for (?-s), 0 before the first), with no '\n'
** in the literals under (?-s), and no stray byte (which memmem could find
** inside a character); counts the literal bytes and the .* seen. */
static bool glob_scan(const rparser *p, int32_t i, size_t *nbytes,
                      size_t *nstars, uint8_t *dot)
{
    const rnode *n = &p->node[i];
    uint8_t d;

    switch (n->type) {
    case N_EMPTY: return true;
    case N_LIT:
        *nbytes += n->nlit;
        return !(n->nlit == 1 && n->lit[0] >= 0x80) &&
               (*dot == RF_DOTNL || memchr(n->lit, '\n', n->nlit) == NULL);
    case N_REP:
        *nstars += 1;
        d = p->node[n->kid].type == N_CLASS ? p->node[n->kid].dot : 0;
        if (n->min != 0 || n->max != EM_RE_INF || d == 0 ||
            (*dot != 0 && *dot != d))
            return false;
        *dot = d;
        return true;
    case N_CAT:
        for (int32_t k = n->kid; k >= 0; k = p->node[k].next)
            if (!glob_scan(p, k, nbytes, nstars, dot))
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
    uint8_t dot = 0;

    /* twice: the first .* may come after a literal with '\n' */
    if (re->literal || !glob_scan(p, root, &nbytes, &nstars, &dot) ||
        nstars == 0)
        return EMBER_OK;
    nbytes = nstars = 0;
    if (!glob_scan(p, root, &nbytes, &nstars, &dot))
        return EMBER_OK;
    re->glob_nl = dot == RF_DOTNL;
    re->glob = em_malloc(nbytes);
    re->gend = em_malloc((nstars + 1) * sizeof *re->gend);
    if (re->glob == NULL || re->gend == NULL)
        return EMBER_ENOMEM;
    glob_fill(p, root, re, &off);
    re->gend[re->nglob++] = off;
    return EMBER_OK;
}

/* L0.*L1.*...Ln: under (?-s) no '\n' (only .* could hold one and '.' does
** not), L0 at the start, Ln at the end, the others leftmost in order in
** between (a greedy leftmost choice never loses a match when gaps are
** unconstrained). */
static bool glob_match(const em_regex *re, const uint8_t *s, size_t len)
{
    size_t n = re->nglob, a = re->gend[0];
    size_t z = re->gend[n - 1] - re->gend[n - 2], pos = a, end;

    if (len < a + z || (!re->glob_nl && memchr(s, '\n', len) != NULL))
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
