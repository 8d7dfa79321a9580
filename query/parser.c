/*
** query/parser.c: recursive descent from tokens to an em_node tree, with one
** token of lookahead (two where an identifier may start a call). The
** grammar (docs/query-language.md explains every rule):
**
**   query         = expr EOF
**   expr          = call | selector_expr | number | string
**   call          = fname [ grouping ] "(" [ expr { "," expr } ] ")"
**                   [ grouping ]
**   grouping      = ( "by" | "without" )
**                   "(" [ label { "," label } [ "," ] ] ")"
**   selector_expr = selector [ "[" duration "]" ]
**                   { "offset" duration | "@" ( number | string ) }
**   selector      = TYPE [ "{" matchers "}" ] | "{" matchers "}"
**   matchers      = [ matcher { "," matcher } [ "," ] ]
**   matcher       = label_name ( "=" | "!=" | "=~" | "!~" ) string
**
** An identifier is a call when "(", by or without follows it, so a
** function's name alone is still a profile type. `__type__="T"` inside the
** braces sets the type exactly like a TYPE prefix (other operators on
** __type__ stay matchers for the engine). A selector must name a type or
** hold a matcher: `{}` alone would merge profiles of unrelated units. The
** parser knows function names and where grouping may go; arity and
** argument kinds are the planner's (query/plan.c).
**
** Errors point with a caret either at the offending token or, for
** "expected X after Y", just past Y (where X was missing), as compilers do.
** Every node is owned by its parent as soon as it is complete; a failure
** frees the partial tree from the root, so no path leaks.
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "query/query_int.h"

#define MAX_DEPTH 64            /* nested calls; deeper is EMBER_ELIMIT */
#define NAME_SHOWN 40           /* bytes of a bad name quoted in a message */

typedef struct parser {
    em_lexer lx;
    const char *src;
    em_token tok;               /* the current, not yet consumed, token */
    size_t prev_end;            /* byte just past the previous token */
} parser;

static int advance(parser *p)
{
    p->prev_end = p->tok.pos + p->tok.len;
    return em_lex_next(&p->lx, &p->tok);
}

/* The kind of the token after the current one; EOF when it does not lex
** (its error comes again, at its place, when the parser gets there). */
static em_tok peek_kind(const parser *p)
{
    em_lexer ahead = p->lx;
    em_token next;

    if (em_lex_next(&ahead, &next) != EMBER_OK)
        return EM_TOK_EOF;
    return next.kind;
}

/* An error for something missing after the previous token. */
static int expected_after(parser *p, const char *fmt, ...) EM_PRINTF(2, 3);
static int expected_after(parser *p, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return em_query_error(p->src, p->prev_end, "expected %s", what);
}

/* ---- functions ----------------------------------------------------------------- */

/* Writes the names of the functions (only those taking by/without when
** GROUPING) into BUF, separated by ", " and the last by LAST. */
static void fn_list(char *buf, size_t cap, bool grouping, const char *last)
{
    size_t n = 0, count = 0, total = 0;

    for (em_fn f = EM_FN_MERGE; em_fn_get(f) != NULL; f++)
        total += !grouping || em_fn_get(f)->grouping;
    buf[0] = '\0';
    for (em_fn f = EM_FN_MERGE; em_fn_get(f) != NULL && n < cap; f++) {
        if (grouping && !em_fn_get(f)->grouping)
            continue;
        count++;
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", count == 1 ? "" :
                              count == total ? last : ", ", em_fn_name(f));
    }
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

size_t em_edit_distance(const char *a, size_t n, const char *b, size_t m,
                        bool within)
{
    size_t d[EM_EDIT_MAX + 1][EM_EDIT_MAX + 1], best_end = SIZE_MAX;

    if (n > EM_EDIT_MAX || m > EM_EDIT_MAX)
        return SIZE_MAX;
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = within ? 0 : j;       /* a may start anywhere in b */
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (lower(a[i - 1]) !=
                                             lower(b[j - 1]));
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    if (!within)
        return d[n][m];
    for (size_t j = 0; j <= m; j++)     /* ... and end anywhere */
        if (d[n][j] < best_end)
            best_end = d[n][j];
    return best_end;
}

/* The function most likely meant by a misspelled name, or NULL: one edit
** away for names of up to 4 bytes, two for longer ones. */
static const char *fn_closest(const char *s, size_t len)
{
    const char *best = NULL;
    size_t best_d = len <= 4 ? 2 : 3;

    for (em_fn f = EM_FN_MERGE; em_fn_get(f) != NULL; f++) {
        const char *name = em_fn_name(f);
        size_t dist = em_edit_distance(s, len, name, strlen(name), false);
        if (dist < best_d) {
            best_d = dist;
            best = name;
        }
    }
    return best;
}

static int unknown_function(parser *p, const em_token *name)
{
    const char *s = p->src + name->pos;
    const char *near = fn_closest(s, name->len);
    char list[384], hint[64] = "";

    fn_list(list, sizeof list, false, ", ");
    if (near != NULL)
        snprintf(hint, sizeof hint, " (did you mean %s?)", near);
    return em_query_error(p->src, name->pos, "unknown function \"%.*s\"%s: "
                          "expected one of %s", (int)(name->len > NAME_SHOWN ?
                          NAME_SHOWN : name->len), s, hint, list);
}

/* ---- building nodes ------------------------------------------------------------ */

/* A zeroed node of KIND starting at the current token. */
static int node_new(parser *p, em_node_kind kind, em_node **out)
{
    em_node *n = em_calloc(1, sizeof *n);

    *out = n;
    if (n == NULL)
        return em_err(EMBER_ENOMEM, "query: syntax tree node");
    n->kind = kind;
    n->pos = p->tok.pos;
    return EMBER_OK;
}

/* Grows the array *A of N elements of SIZE bytes so that one more fits:
** capacities are powers of two, so a long list costs O(n) copying. */
static int grow(void **a, size_t n, size_t size, const char *what)
{
    void *q;

    if (n != 0 && (n & (n - 1)) != 0)
        return EMBER_OK;                /* room left below the next power */
    q = em_realloc(*a, (n == 0 ? 4 : 2 * n) * size);
    if (q == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu %s", n + 1, what);
    *a = q;
    return EMBER_OK;
}

/* Appends ARG to C's arguments; on failure frees ARG. */
static int call_push_arg(em_call *c, em_node *arg)
{
    int rc = grow((void **)&c->args, c->nargs, sizeof *c->args, "arguments");

    if (rc != EMBER_OK) {
        em_node_free(arg);
        return rc;
    }
    c->args[c->nargs++] = arg;
    return EMBER_OK;
}

static int sel_push(em_sel *s, char *name, char *value, int op, size_t vpos)
{
    int rc = grow((void **)&s->matchers, s->nmatchers, sizeof *s->matchers,
                  "matchers");

    if (rc == EMBER_OK)
        rc = grow((void **)&s->value_pos, s->nmatchers, sizeof *s->value_pos,
                  "matchers");
    if (rc != EMBER_OK)
        return rc;
    s->matchers[s->nmatchers] = (ember_matcher){ .name = name,
                                                 .value = value, .op = op };
    s->value_pos[s->nmatchers++] = vpos;
    return EMBER_OK;
}

/* Sets the selector's type; a second type is an error at POS. */
static int sel_set_type(parser *p, em_sel *s, const char *type, size_t len,
                        size_t pos)
{
    if (s->type != NULL)
        return em_query_error(p->src, pos, "the profile type is given twice "
                              "(as a prefix or __type__=\"...\")");
    s->type = em_strndup(type, len);
    if (s->type == NULL)
        return em_err(EMBER_ENOMEM, "query: profile type of %zu bytes", len);
    s->type_pos = pos;
    return EMBER_OK;
}

/* The current token, a word, must be a valid label name. */
static int check_label_name(parser *p)
{
    const char *name = p->src + p->tok.pos;

    if (memchr(name, ':', p->tok.len) != NULL)
        return em_query_error(p->src, p->tok.pos, "label name \"%.*s\" may "
                              "hold only letters, digits and '_'",
                              (int)(p->tok.len > NAME_SHOWN ? NAME_SHOWN :
                              p->tok.len), name);
    if (p->tok.len > 255)
        return em_query_error(p->src, p->tok.pos,
                              "label name longer than 255 bytes");
    return EMBER_OK;
}

static int match_op(em_tok kind)
{
    switch (kind) {
    case EM_TOK_EQ: return EMBER_MATCH_EQ;
    case EM_TOK_NEQ: return EMBER_MATCH_NEQ;
    case EM_TOK_RE: return EMBER_MATCH_RE;
    case EM_TOK_NRE: return EMBER_MATCH_NRE;
    default: return -1;
    }
}

/* ---- selectors ----------------------------------------------------------------- */

/* matcher = label_name op string; the current token is the name. */
static int parse_matcher(parser *p, em_sel *s)
{
    em_token name = p->tok;
    char *value = NULL, *lname = NULL;
    em_tok opkind;
    int op, rc;

    if ((rc = check_label_name(p)) != EMBER_OK || (rc = advance(p)) != EMBER_OK)
        return rc;
    opkind = p->tok.kind;
    if ((op = match_op(opkind)) < 0)
        return expected_after(p, "'=', '!=', '=~' or '!~' after label name");
    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    if (p->tok.kind != EM_TOK_STRING)
        return expected_after(p, "a string after %s", em_tok_name(opkind));
    if (name.len == 8 && memcmp(p->src + name.pos, "__type__", 8) == 0 &&
        op == EMBER_MATCH_EQ) {
        if ((rc = em_lex_string(p->src, &p->tok, &value)) != EMBER_OK)
            return rc;
        rc = sel_set_type(p, s, value, strlen(value), name.pos);
        em_free(value);
        return rc != EMBER_OK ? rc : advance(p);
    }
    if ((rc = em_lex_string(p->src, &p->tok, &value)) == EMBER_OK &&
        (lname = em_strndup(p->src + name.pos, name.len)) == NULL)
        rc = em_err(EMBER_ENOMEM, "query: label name");
    if (rc == EMBER_OK)
        rc = sel_push(s, lname, value, op, p->tok.pos);
    if (rc != EMBER_OK) {
        em_free(lname);
        em_free(value);
        return rc;
    }
    return advance(p);
}

/* "{" matchers "}"; the current token is the "{". */
static int parse_matchers(parser *p, em_sel *s)
{
    const char *after = "a label name or '}' after '{'";
    int rc;

    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    while (p->tok.kind != EM_TOK_RBRACE) {
        if (!em_tok_is_word(p->tok.kind))
            return expected_after(p, "%s", after);
        if ((rc = parse_matcher(p, s)) != EMBER_OK)
            return rc;
        if (p->tok.kind == EM_TOK_COMMA) {
            if ((rc = advance(p)) != EMBER_OK)
                return rc;
            after = "a label name or '}' after ','";
        } else if (p->tok.kind != EM_TOK_RBRACE) {
            return expected_after(p, "',' or '}' after matcher");
        }
    }
    return advance(p);
}

/* A duration after the keyword or bracket just consumed, into *MS. */
static int parse_duration(parser *p, const char *after, int64_t *ms)
{
    int rc;

    if (p->tok.kind != EM_TOK_DURATION)
        return expected_after(p, "a duration such as 5m or 1h30m after %s",
                              after);
    rc = em_duration_parse_n(p->src + p->tok.pos, p->tok.len, ms);
    return rc != EMBER_OK ? rc : advance(p);    /* the lexer checked it */
}

/* "[" duration "]"; the current token is the "[". */
static int parse_range(parser *p, em_sel *s)
{
    size_t at;
    int rc;

    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    at = p->tok.pos;
    if ((rc = parse_duration(p, "'['", &s->range_ms)) != EMBER_OK)
        return rc;
    if (s->range_ms <= 0)
        return em_query_error(p->src, at, "a range must be longer than 0");
    if (p->tok.kind != EM_TOK_RBRACKET)
        return expected_after(p, "']' after the range");
    return advance(p);
}

/* "@" (number | string); the current token is the "@". The text is checked
** with em_time_parse here, for a caret, and resolved by the planner. */
static int parse_at(parser *p, em_sel *s)
{
    char why[512];
    int64_t ms;
    int rc;

    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    s->at_pos = p->tok.pos;
    if (p->tok.kind == EM_TOK_NUMBER) {
        s->at = em_strndup(p->src + p->tok.pos, p->tok.len);
        if (s->at == NULL)
            return em_err(EMBER_ENOMEM, "query: time after '@'");
    } else if (p->tok.kind == EM_TOK_STRING) {
        if ((rc = em_lex_string(p->src, &p->tok, &s->at)) != EMBER_OK)
            return rc;
    } else {
        return expected_after(p, "a time after '@': a number such as "
                              "1732170000 or a string such as "
                              "\"2024-11-21T14:05:00Z\", \"-1h\" or \"now\"");
    }
    if (em_time_parse(s->at, 0, &ms) != EMBER_OK) {
        snprintf(why, sizeof why, "%s", em_errmsg());
        return em_query_error(p->src, s->at_pos, "%s", why);
    }
    return advance(p);
}

/* [ "[" duration "]" ] { "offset" duration | "@" time }, each at most once. */
static int parse_modifiers(parser *p, em_sel *s)
{
    bool offset = false, at = false;
    int rc = EMBER_OK;

    if (p->tok.kind == EM_TOK_LBRACKET)
        rc = parse_range(p, s);
    while (rc == EMBER_OK) {
        size_t pos = p->tok.pos;
        if (p->tok.kind == EM_TOK_OFFSET) {
            if (offset)
                return em_query_error(p->src, pos, "offset is given twice");
            offset = true;
            if ((rc = advance(p)) == EMBER_OK)
                rc = parse_duration(p, "offset", &s->offset_ms);
        } else if (p->tok.kind == EM_TOK_AT) {
            if (at)
                return em_query_error(p->src, pos, "@ is given twice");
            at = true;
            rc = parse_at(p, s);
        } else if (p->tok.kind == EM_TOK_LBRACKET) {
            return em_query_error(p->src, pos, s->range_ms != 0 ?
                                  "the range is given twice" : "the range "
                                  "goes right after the selector, before "
                                  "offset and @");
        } else {
            return EMBER_OK;
        }
    }
    return rc;
}

/* selector_expr; the current token is the type or the "{". */
static int parse_selector(parser *p, em_node *n)
{
    em_sel *s = &n->u.sel;
    size_t brace;
    int rc;

    if (p->tok.kind == EM_TOK_IDENT) {
        rc = sel_set_type(p, s, p->src + p->tok.pos, p->tok.len, p->tok.pos);
        if (rc != EMBER_OK || (rc = advance(p)) != EMBER_OK)
            return rc;
    }
    if (p->tok.kind == EM_TOK_LBRACE) {
        brace = p->tok.pos;
        if ((rc = parse_matchers(p, s)) != EMBER_OK)
            return rc;
        if (s->type == NULL && s->nmatchers == 0)
            return em_query_error(p->src, brace, "a selector needs a profile "
                                  "type or at least one matcher");
    }
    return parse_modifiers(p, s);
}

/* ---- numbers and strings ----------------------------------------------------------- */

/* The value of the NUMBER token at S (LEN bytes, checked by the lexer).
** Written out rather than strtod, whose decimal point follows the locale
** (a REPL that calls setlocale would read "1.5" as 1). Significant digits
** past 19 only move the exponent. Up to 15 digits and a power of ten up to
** 1e22 come out exactly rounded (both are exact doubles: Clinger's fast
** path), the rest within an ulp or two, plenty for N in top(P, N). */
static double number_value(const char *s, size_t len)
{
    uint64_t mant = 0;
    long scale = 0, e = 0;
    size_t i = 0;
    bool frac = false;
    int esign = 1;

    if (len > 2 && s[0] == '0' && (s[1] | 0x20) == 'x') {
        double v = 0;
        for (i = 2; i < len; i++)
            v = v * 16 + (s[i] <= '9' ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10);
        return v;
    }
    for (; i < len && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9')); i++) {
        if (s[i] == '.') {
            frac = true;
        } else if (mant < UINT64_C(1000000000000000000)) {
            mant = mant * 10 + (uint64_t)(s[i] - '0');
            scale -= frac;
        } else {
            scale += !frac;             /* a dropped digit */
        }
    }
    if (i < len) {                      /* the exponent: e[+-]digits */
        esign = s[++i] == '-' ? -1 : 1;
        i += s[i] == '-' || s[i] == '+';
        for (; i < len; i++)
            e = e < 100000 ? e * 10 + (s[i] - '0') : e;
    }
    scale += esign * e;
    if (mant == 0)
        return 0;                       /* 0e999 is 0, not 0 * inf */
    if (scale >= 0)
        return (double)mant * pow(10, (double)scale);   /* inf: too large */
    if (scale >= -308)
        return (double)mant / pow(10, (double)-scale);
    /* 10^-scale would overflow: divide in two steps, down to subnormals */
    return (double)mant / pow(10, (double)(-scale - 308)) / 1e308;
}

static int parse_number(parser *p, em_node *n)
{
    n->u.num = number_value(p->src + p->tok.pos, p->tok.len);
    if (!isfinite(n->u.num))
        return em_query_error(p->src, p->tok.pos, "number out of range");
    return advance(p);
}

static int parse_string(parser *p, em_node *n)
{
    int rc = em_lex_string(p->src, &p->tok, &n->u.str);
    return rc != EMBER_OK ? rc : advance(p);
}

/* label_values' first argument written as a bare name: a string node. */
static int parse_label_arg(parser *p, em_node *n)
{
    int rc = check_label_name(p);

    if (rc != EMBER_OK)
        return rc;
    n->u.str = em_strndup(p->src + p->tok.pos, p->tok.len);
    if (n->u.str == NULL)
        return em_err(EMBER_ENOMEM, "query: label name");
    return advance(p);
}

/* ---- calls ------------------------------------------------------------------------- */

static bool is_grouping(em_tok kind)
{
    return kind == EM_TOK_BY || kind == EM_TOK_WITHOUT;
}

/* Appends the current token, a label name, to C's grouping labels. */
static int call_push_label(parser *p, em_call *c)
{
    char *name;
    int rc = check_label_name(p);

    if (rc != EMBER_OK)
        return rc;
    if ((name = em_strndup(p->src + p->tok.pos, p->tok.len)) == NULL)
        return em_err(EMBER_ENOMEM, "query: label name");
    rc = grow((void **)&c->labels, c->nlabels, sizeof *c->labels, "labels");
    if (rc != EMBER_OK) {
        em_free(name);
        return rc;
    }
    c->labels[c->nlabels++] = name;
    return EMBER_OK;
}

/* grouping, before or after C's arguments; the current token is by or
** without. */
static int parse_grouping(parser *p, em_call *c)
{
    const char *after = "a label name or ')' after '('";
    em_token kw = p->tok;
    char list[128];
    int rc;

    if (!em_fn_get(c->fn)->grouping) {
        fn_list(list, sizeof list, true, " and ");
        return em_query_error(p->src, kw.pos, "%s takes no grouping: by and "
                              "without apply only to %s", em_fn_name(c->fn),
                              list);
    }
    if (c->grouping != EM_GROUP_NONE)
        return em_query_error(p->src, kw.pos, "the grouping is given twice: "
                              "write by or without either before or after "
                              "the arguments of %s", em_fn_name(c->fn));
    c->grouping = kw.kind == EM_TOK_BY ? EM_GROUP_BY : EM_GROUP_WITHOUT;
    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    if (p->tok.kind != EM_TOK_LPAREN)
        return expected_after(p, "'(' after %s", em_tok_name(kw.kind));
    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    while (p->tok.kind != EM_TOK_RPAREN) {
        if (!em_tok_is_word(p->tok.kind))
            return expected_after(p, "%s", after);
        if ((rc = call_push_label(p, c)) != EMBER_OK ||
            (rc = advance(p)) != EMBER_OK)
            return rc;
        if (p->tok.kind == EM_TOK_COMMA) {
            if ((rc = advance(p)) != EMBER_OK)
                return rc;
            after = "a label name or ')' after ','";
        } else if (p->tok.kind != EM_TOK_RPAREN) {
            return expected_after(p, "',' or ')' after label name");
        }
    }
    return advance(p);
}

static int parse_expr(parser *p, int depth, em_node **out);
static int misplaced(parser *p, const em_node *n);

/* True when argument I of C, at the current token, is label_values' label
** name written bare: `label_values(pod)` as well as `label_values("pod")`. */
static bool bare_label_arg(const parser *p, const em_call *c)
{
    em_tok next;

    if (c->fn != EM_FN_LABEL_VALUES || c->nargs != 0 ||
        !em_tok_is_word(p->tok.kind))
        return false;
    next = peek_kind(p);
    return next == EM_TOK_COMMA || next == EM_TOK_RPAREN;
}

static int parse_arg(parser *p, em_call *c, int depth, em_node **out)
{
    em_node *n;
    int rc;

    if (!bare_label_arg(p, c))
        return parse_expr(p, depth, out);
    *out = NULL;
    if ((rc = node_new(p, EM_NODE_STRING, &n)) != EMBER_OK)
        return rc;
    if ((rc = parse_label_arg(p, n)) != EMBER_OK) {
        em_node_free(n);
        return rc;
    }
    n->end = p->prev_end;
    *out = n;
    return EMBER_OK;
}

/* "(" [ expr { "," expr } ] ")"; the current token is the "(". DEPTH is
** that of the arguments. */
static int parse_args(parser *p, em_call *c, int depth)
{
    int rc = advance(p);

    if (rc != EMBER_OK || p->tok.kind == EM_TOK_RPAREN)
        return rc != EMBER_OK ? rc : advance(p);
    for (;;) {
        em_node *arg;
        if ((rc = parse_arg(p, c, depth, &arg)) != EMBER_OK ||
            (rc = call_push_arg(c, arg)) != EMBER_OK)
            return rc;
        if (p->tok.kind == EM_TOK_RPAREN)
            return advance(p);
        if (p->tok.kind != EM_TOK_COMMA) {
            if ((rc = misplaced(p, arg)) != EMBER_OK)
                return rc;
            return expected_after(p, "',' or ')' after argument %zu of %s",
                                  c->nargs, em_fn_name(c->fn));
        }
        if ((rc = advance(p)) != EMBER_OK)
            return rc;
    }
}

/* call; the current token is the function's name, DEPTH the number of
** calls around this one. */
static int parse_call(parser *p, em_node *n, int depth)
{
    em_call *c = &n->u.call;
    em_token name = p->tok;
    int rc;

    c->name_pos = name.pos;
    if (depth >= MAX_DEPTH) {
        em_query_error(p->src, name.pos, "functions nested more than %d "
                       "deep", MAX_DEPTH);
        return EMBER_ELIMIT;
    }
    if ((c->fn = em_fn_lookup(p->src + name.pos, name.len)) == 0)
        return unknown_function(p, &name);
    if ((rc = advance(p)) != EMBER_OK)
        return rc;
    if (is_grouping(p->tok.kind) && (rc = parse_grouping(p, c)) != EMBER_OK)
        return rc;
    if (p->tok.kind != EM_TOK_LPAREN)
        return expected_after(p, "'(' and the arguments of %s after the "
                              "grouping", em_fn_name(c->fn));
    if ((rc = parse_args(p, c, depth + 1)) != EMBER_OK)
        return rc;
    if (is_grouping(p->tok.kind))
        return parse_grouping(p, c);
    return EMBER_OK;
}

/* ---- expressions ------------------------------------------------------------------- */

static const char *node_noun(const em_node *n)
{
    switch (n->kind) {
    case EM_NODE_SELECTOR: return "selector";
    case EM_NODE_CALL: return "function call";
    case EM_NODE_NUMBER: return "number";
    default: return "string";
    }
}

/* The current token follows the expression N but belongs to something else
** than N is: a modifier after a call, a grouping after a selector. Returns
** the error, or EMBER_OK when the token is just unexpected. */
static int misplaced(parser *p, const em_node *n)
{
    const char *what;

    switch (p->tok.kind) {
    case EM_TOK_LBRACKET: what = "a range [...]"; break;
    case EM_TOK_OFFSET: what = "offset"; break;
    case EM_TOK_AT: what = "@"; break;
    case EM_TOK_BY:
    case EM_TOK_WITHOUT:
        return em_query_error(p->src, p->tok.pos, "%s goes with a function, "
                              "before or after its arguments: merge by "
                              "(pod) (SEL) or sum(...) by (pod)",
                              p->tok.kind == EM_TOK_BY ? "by" : "without");
    default:
        return EMBER_OK;
    }
    if (n->kind == EM_NODE_SELECTOR)
        return EMBER_OK;                /* parse_modifiers took its own */
    return em_query_error(p->src, p->tok.pos, "%s applies to a selector, not "
                          "to a %s", what, node_noun(n));
}

/* What may start an expression was not found: say what is there. */
static int not_an_expr(parser *p, int depth)
{
    if (depth == 0)
        return em_query_error(p->src, p->tok.pos, "expected a selector (TYPE, "
                              "TYPE{name=\"value\", ...} or {name=\"value\", "
                              "...}) or a function call, found %s",
                              em_tok_name(p->tok.kind));
    return em_query_error(p->src, p->tok.pos, "expected a selector, a "
                          "function call, a number or a string, found %s",
                          em_tok_name(p->tok.kind));
}

/* expr into a new *OUT; nothing is left allocated on failure. */
static int parse_expr(parser *p, int depth, em_node **out)
{
    em_tok kind = p->tok.kind, next = EM_TOK_EOF;
    em_node *n;
    int rc;

    *out = NULL;
    if (kind == EM_TOK_IDENT)
        next = peek_kind(p);
    if (next == EM_TOK_LPAREN || is_grouping(next)) {
        if ((rc = node_new(p, EM_NODE_CALL, &n)) == EMBER_OK)
            rc = parse_call(p, n, depth);
    } else if (kind == EM_TOK_IDENT || kind == EM_TOK_LBRACE) {
        if ((rc = node_new(p, EM_NODE_SELECTOR, &n)) == EMBER_OK)
            rc = parse_selector(p, n);
    } else if (kind == EM_TOK_NUMBER) {
        if ((rc = node_new(p, EM_NODE_NUMBER, &n)) == EMBER_OK)
            rc = parse_number(p, n);
    } else if (kind == EM_TOK_STRING) {
        if ((rc = node_new(p, EM_NODE_STRING, &n)) == EMBER_OK)
            rc = parse_string(p, n);
    } else {
        return not_an_expr(p, depth);
    }
    if (rc != EMBER_OK) {
        em_node_free(n);
        return rc;
    }
    n->end = p->prev_end;
    *out = n;
    return EMBER_OK;
}

static int parse_query(parser *p, em_node **out)
{
    em_node *n;
    int rc = advance(p);

    if (rc != EMBER_OK || (rc = parse_expr(p, 0, &n)) != EMBER_OK)
        return rc;
    if (p->tok.kind != EM_TOK_EOF) {
        if ((rc = misplaced(p, n)) == EMBER_OK)
            rc = expected_after(p, "the end of the query after the %s",
                                node_noun(n));
        em_node_free(n);
        return rc;
    }
    *out = n;
    return EMBER_OK;
}

int em_query_parse(const char *text, em_node **out)
{
    parser p = { .src = text };

    *out = NULL;
    if (strlen(text) > EM_QUERY_MAX)
        return em_err(EMBER_ELIMIT, "query longer than %u bytes",
                      EM_QUERY_MAX);
    em_lex_init(&p.lx, text);
    return parse_query(&p, out);
}

/* ---- using and freeing the tree ------------------------------------------------- */

void em_sel_view(const em_sel *sel, int64_t from_ms, int64_t to_ms,
                 ember_selector *out)
{
    memset(out, 0, sizeof *out);
    out->sz = sizeof *out;
    out->type = sel->type;
    out->matchers = sel->matchers;
    out->nmatchers = sel->nmatchers;
    out->from_ms = from_ms;
    out->to_ms = to_ms;
}

static void sel_free(em_sel *s)
{
    for (size_t i = 0; i < s->nmatchers; i++) {
        em_free((char *)s->matchers[i].name);   /* owned: see em_sel */
        em_free((char *)s->matchers[i].value);
    }
    em_free(s->matchers);
    em_free(s->value_pos);
    em_free(s->type);
    em_free(s->at);
}

static void call_free(em_call *c)
{
    for (size_t i = 0; i < c->nargs; i++)
        em_node_free(c->args[i]);       /* depth <= 64: the parser's limit */
    for (size_t i = 0; i < c->nlabels; i++)
        em_free(c->labels[i]);
    em_free(c->args);
    em_free(c->labels);
}

void em_node_free(em_node *n)
{
    if (n == NULL)
        return;
    switch (n->kind) {
    case EM_NODE_SELECTOR: sel_free(&n->u.sel); break;
    case EM_NODE_CALL: call_free(&n->u.call); break;
    case EM_NODE_STRING: em_free(n->u.str); break;
    case EM_NODE_NUMBER: break;
    }
    em_free(n);
}
