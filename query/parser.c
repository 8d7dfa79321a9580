/*
** query/parser.c: recursive descent from tokens to an em_node tree, one
** token of lookahead. Today's grammar (docs/query-language.md has the EBNF):
**
**   query    = selector EOF
**   selector = TYPE [ "{" matchers "}" ] | "{" matchers "}"
**   matchers = [ matcher { "," matcher } [ "," ] ]
**   matcher  = label_name ( "=" | "!=" | "=~" | "!~" ) string
**
** `__type__="T"` inside the braces sets the type exactly like a TYPE prefix
** (other operators on __type__ stay matchers for the engine). A selector
** must name a type or hold a matcher: `{}` alone would merge profiles of
** unrelated units. Errors point with a caret either at the offending token
** or, for "expected X after Y", just past Y (where X was missing), as
** compilers do. Function calls, ranges, offset and @ are recognized only to
** say they are coming.
*/
#include "query/query_int.h"

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

/* An error for a token missing after the previous one. */
static int expected_after(parser *p, const char *what)
{
    return em_query_error(p->src, p->prev_end, "expected %s", what);
}

/* ---- building the selector ---------------------------------------------------- */

static int sel_push(em_sel *s, char *name, char *value, int op, size_t vpos)
{
    ember_matcher *m;
    size_t *pos;

    m = em_realloc(s->matchers, (s->nmatchers + 1) * sizeof *m);
    if (m == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu matchers", s->nmatchers + 1);
    s->matchers = m;
    pos = em_realloc(s->value_pos, (s->nmatchers + 1) * sizeof *pos);
    if (pos == NULL)
        return em_err(EMBER_ENOMEM, "query: %zu matchers", s->nmatchers + 1);
    s->value_pos = pos;
    m[s->nmatchers] = (ember_matcher){ .name = name, .value = value,
                                       .op = op };
    pos[s->nmatchers++] = vpos;
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

static int check_label_name(parser *p)
{
    const char *name = p->src + p->tok.pos;

    if (memchr(name, ':', p->tok.len) != NULL)
        return em_query_error(p->src, p->tok.pos, "label name \"%.*s\" may "
                              "hold only letters, digits and '_'",
                              (int)p->tok.len, name);
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

/* ---- grammar ------------------------------------------------------------------- */

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
        return em_query_error(p->src, p->prev_end, "expected a string "
                              "after %s", em_tok_name(opkind));
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
            return expected_after(p, after);
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

static int parse_selector(parser *p, em_node *n)
{
    em_sel *s = &n->u.sel;
    size_t brace;
    int rc;

    n->kind = EM_NODE_SELECTOR;
    n->pos = p->tok.pos;
    if (p->tok.kind == EM_TOK_IDENT) {
        rc = sel_set_type(p, s, p->src + p->tok.pos, p->tok.len, p->tok.pos);
        if (rc != EMBER_OK || (rc = advance(p)) != EMBER_OK)
            return rc;
        if (p->tok.kind != EM_TOK_LBRACE)
            return EMBER_OK;
    }
    brace = p->tok.pos;
    if ((rc = parse_matchers(p, s)) != EMBER_OK)
        return rc;
    if (s->type == NULL && s->nmatchers == 0)
        return em_query_error(p->src, brace, "a selector needs a profile "
                              "type or at least one matcher");
    return EMBER_OK;
}

/* The first token cannot start a selector: say what it is and what is
** coming. */
static int not_a_selector(parser *p)
{
    em_token first = p->tok;

    if (first.kind == EM_TOK_IDENT && advance(p) == EMBER_OK &&
        p->tok.kind == EM_TOK_LPAREN)
        return em_query_error(p->src, first.pos, "expected a selector: "
                              "functions such as %.*s(...) are not "
                              "supported yet", (int)(first.len > 40 ? 40 :
                              first.len), p->src + first.pos);
    return em_query_error(p->src, first.pos, "expected a selector (TYPE, "
                          "TYPE{name=\"value\", ...} or {name=\"value\", "
                          "...}), found %s", em_tok_name(first.kind));
}

/* After a whole selector only the end may follow. */
static int expect_end(parser *p)
{
    switch (p->tok.kind) {
    case EM_TOK_EOF:
        return EMBER_OK;
    case EM_TOK_LBRACKET:
        return em_query_error(p->src, p->tok.pos, "range selectors such as "
                              "[1h] are not supported yet: give the range "
                              "with --from and --to");
    case EM_TOK_OFFSET:
    case EM_TOK_AT:
        return em_query_error(p->src, p->tok.pos, "%s is not supported "
                              "yet: give the range with --from and --to",
                              em_tok_name(p->tok.kind));
    default:
        return expected_after(p, "the end of the query after the selector");
    }
}

static int parse_query(parser *p, em_node *n)
{
    int rc = advance(p);

    if (rc != EMBER_OK)
        return rc;
    if (p->tok.kind == EM_TOK_IDENT) {
        em_lexer ahead = p->lx;     /* a call is IDENT '(': look one ahead */
        em_token next;
        if (em_lex_next(&ahead, &next) == EMBER_OK &&
            next.kind == EM_TOK_LPAREN)
            return not_a_selector(p);
    } else if (p->tok.kind != EM_TOK_LBRACE) {
        return not_a_selector(p);
    }
    if ((rc = parse_selector(p, n)) != EMBER_OK)
        return rc;
    return expect_end(p);
}

int em_query_parse(const char *text, em_node **out)
{
    parser p = { .src = text };
    em_node *n;
    int rc;

    *out = NULL;
    if (strlen(text) > EM_QUERY_MAX)
        return em_err(EMBER_ELIMIT, "query longer than %u bytes",
                      EM_QUERY_MAX);
    n = em_calloc(1, sizeof *n);
    if (n == NULL)
        return em_err(EMBER_ENOMEM, "query: syntax tree");
    em_lex_init(&p.lx, text);
    rc = parse_query(&p, n);
    if (rc != EMBER_OK) {
        em_node_free(n);
        return rc;
    }
    *out = n;
    return EMBER_OK;
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
}

void em_node_free(em_node *n)
{
    if (n == NULL)
        return;
    if (n->kind == EM_NODE_SELECTOR || n->kind == 0)
        sel_free(&n->u.sel);
    em_free(n);
}
