/*
** repl/repl_complete.c: tab completion in the REPL. It reads what precedes
** the cursor (with the earlier lines of an unfinished statement), finds
** the spot it is in from the tokens of the query lexer's tolerant mode
** (the word cut by the cursor is the last one), and offers:
**
**   - at the start of an expression: function names (with their '(') and
**     profile types;
**   - inside '{', after '{' or ',', and inside by/without ( ... ): label
**     names, as label_values' first argument too;
**   - inside a matcher's string (name="...): that label's values, with the
**     closing quote;
**   - after an expression: the keywords by, without and offset;
**   - on a dot command line: the commands, then what the command table
**     says its first argument is.
**
** Names come from the session's source (em_source: the open database, or
** the server with --server) and are cached (em_repl_cache) until a
** statement fails or .reload, so a tab costs no query.
*/
#include <histedit.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

/* ---- the cache ---------------------------------------------------------- */

const ember_strlist *em_repl_types(em_repl *r)
{
    if (r->cache.types == NULL &&
        em_source_types(&r->src, NULL, NULL, &r->cache.types) != EMBER_OK)
        r->cache.types = NULL;
    return r->cache.types;
}

const ember_strlist *em_repl_label_names(em_repl *r)
{
    if (r->cache.names == NULL &&
        em_source_label_names(&r->src, NULL, NULL,
                              &r->cache.names) != EMBER_OK)
        r->cache.names = NULL;
    return r->cache.names;
}

const ember_strlist *em_repl_label_values(em_repl *r, const char *name)
{
    em_repl_cache *c = &r->cache;
    unsigned slot;

    if (strcmp(name, "__type__") == 0)
        return em_repl_types(r);
    for (unsigned i = 0; i < EM_REPL_VALUE_CACHE; i++)
        if (c->value_name[i] != NULL && strcmp(c->value_name[i], name) == 0)
            return c->values[i];
    slot = c->next++ % EM_REPL_VALUE_CACHE;     /* the oldest goes */
    em_free(c->value_name[slot]);
    ember_strlist_free(c->values[slot]);
    c->values[slot] = NULL;
    if ((c->value_name[slot] = em_strdup(name)) == NULL)
        return NULL;
    if (em_source_label_values(&r->src, name, NULL, NULL,
                               &c->values[slot]) != EMBER_OK)
        c->values[slot] = NULL;
    return c->values[slot];
}

void em_repl_cache_drop(em_repl *r)
{
    em_repl_cache *c = &r->cache;

    ember_strlist_free(c->types);
    ember_strlist_free(c->names);
    for (unsigned i = 0; i < EM_REPL_VALUE_CACHE; i++) {
        em_free(c->value_name[i]);
        ember_strlist_free(c->values[i]);
    }
    memset(c, 0, sizeof *c);
}

/* ---- candidates --------------------------------------------------------- */

void em_completion_free(em_completion *c)
{
    for (size_t i = 0; i < c->n; i++) {
        em_free(c->words[i]);
        em_free(c->suffixes[i]);
    }
    em_free(c->words);
    em_free(c->suffixes);
    memset(c, 0, sizeof *c);
}

/* Adds WORD (LEN bytes) with SUFFIX. */
static int cand_add(em_completion *c, const char *word, size_t len,
                    const char *suffix)
{
    char *w, *s;

    if (c->n == c->cap) {               /* two arrays grown alike */
        size_t cap = c->cap;
        char **nw = em_grow(c->words, &cap, c->n + 1, sizeof *nw);
        if (nw != NULL)
            c->words = nw;
        char **ns = nw ? em_realloc(c->suffixes, cap * sizeof *ns) : NULL;
        if (ns == NULL)
            return EMBER_ENOMEM;
        c->suffixes = ns;
        c->cap = cap;
    }
    w = em_strndup(word, len);
    s = em_strdup(suffix);
    if (w == NULL || s == NULL) {
        em_free(w);
        em_free(s);
        return EMBER_ENOMEM;
    }
    c->words[c->n] = w;
    c->suffixes[c->n++] = s;
    return EMBER_OK;
}

/* Adds WORD if it starts with the PLEN bytes at PREFIX. */
static int cand_offer(em_completion *c, const char *prefix, size_t plen,
                      const char *word, const char *suffix)
{
    if (strncmp(word, prefix, plen) != 0)
        return EMBER_OK;
    return cand_add(c, word, strlen(word), suffix);
}

static int offer_list(em_completion *c, const char *prefix, size_t plen,
                      const ember_strlist *l, const char *suffix)
{
    int rc = EMBER_OK;

    for (size_t i = 0; l != NULL && i < ember_strlist_count(l) &&
                       rc == EMBER_OK; i++)
        rc = cand_offer(c, prefix, plen, ember_strlist_get(l, i), suffix);
    return rc;
}

/* Offers each value of L written inside a QUOTE string (escaped as the
** lexer reads it back; a raw `...` string cannot hold a '`'), closing it. */
static int offer_quoted(em_completion *c, const char *prefix, size_t plen,
                        const ember_strlist *l, char quote)
{
    char close[2] = { quote, '\0' };
    em_buf b = { 0 };
    int rc = EMBER_OK;

    for (size_t i = 0; l != NULL && i < ember_strlist_count(l) &&
                       rc == EMBER_OK; i++) {
        const char *v = ember_strlist_get(l, i);
        b.len = 0;
        if (quote == '`' && strchr(v, '`') != NULL)
            continue;
        for (; *v != '\0' && rc == EMBER_OK; v++) {
            if (quote != '`' && (*v == quote || *v == '\\'))
                rc = em_buf_put(&b, "\\", 1);
            if (rc == EMBER_OK)
                rc = em_buf_put(&b, v, 1);
        }
        if (rc == EMBER_OK && b.len >= plen &&
            (plen == 0 || memcmp(b.p, prefix, plen) == 0))
            rc = cand_add(c, (const char *)b.p, b.len, close);
    }
    em_buf_free(&b);
    return rc;
}

static int offer_labels(em_repl *r, em_completion *c, const char *prefix,
                        size_t plen, const char *suffix)
{
    int rc = offer_list(c, prefix, plen, em_repl_label_names(r), suffix);
    return rc == EMBER_OK ? cand_offer(c, prefix, plen, "__type__", suffix)
                          : rc;
}

static int offer_functions(em_completion *c, const char *prefix, size_t plen)
{
    int rc = EMBER_OK;

    for (int fn = EM_FN_MERGE; em_fn_name((em_fn)fn) != NULL &&
                               rc == EMBER_OK; fn++)
        rc = cand_offer(c, prefix, plen, em_fn_name((em_fn)fn), "(");
    return rc;
}

/* ---- where the cursor is in a query ------------------------------------- */

enum { SPOT_NONE, SPOT_EXPR, SPOT_KEYWORD, SPOT_LABEL, SPOT_VALUE,
       SPOT_LABEL_STRING };

enum { FR_PLAIN, FR_CALL, FR_GROUP, FR_BRACE, FR_BRACKET };

#define MAX_DEPTH 64

typedef struct scan_frame {
    int kind;                   /* FR_* */
    bool label_values;          /* FR_CALL of label_values */
    unsigned arg;               /* FR_CALL: index of the current argument */
} scan_frame;

typedef struct scan {
    const char *s;
    scan_frame fr[MAX_DEPTH];
    int depth;
    em_token prev, prev2;       /* the last two tokens; EM_TOK_EOF: none */
    /* the result */
    int spot;                   /* SPOT_* */
    size_t start;               /* where the word being completed starts */
    char quote;                 /* SPOT_VALUE, SPOT_LABEL_STRING */
    char label[128];            /* SPOT_VALUE: the matcher's label */
} scan;

/* A matcher's operator, or a '!' the lexer rejects: one being typed. */
static bool is_op(const scan *sc, const em_token *t)
{
    return t->kind == EM_TOK_EQ || t->kind == EM_TOK_NEQ ||
           t->kind == EM_TOK_RE || t->kind == EM_TOK_NRE ||
           (t->kind == EM_TOK_UNKNOWN && sc->s[t->pos] == '!');
}

/* True when a name may follow T: at the start, after a comma, '(' or '{',
** or after a stray byte (the query will say what is wrong with it). */
static bool is_sep(const scan *sc, const em_token *t)
{
    return t->kind == EM_TOK_EOF || t->kind == EM_TOK_COMMA ||
           t->kind == EM_TOK_LPAREN || t->kind == EM_TOK_LBRACE ||
           (t->kind == EM_TOK_UNKNOWN && !is_op(sc, t));
}

/* The innermost frame; NULL at the top level and past MAX_DEPTH, deeper
** than a query may nest (the parser's limit too), where the spots below
** offer nothing. */
static scan_frame *top_frame(scan *sc)
{
    return sc->depth > 0 && sc->depth <= MAX_DEPTH ? &sc->fr[sc->depth - 1]
                                                   : NULL;
}

/* Opens the frame of the bracket KIND, which the token before it names:
** a call, by/without's labels, a selector's braces or a range. */
static void open_frame(scan *sc, em_tok kind)
{
    const char *lv = em_fn_name(EM_FN_LABEL_VALUES);
    scan_frame f = { FR_PLAIN, false, 0 };

    if (kind == EM_TOK_LBRACE)
        f.kind = FR_BRACE;
    else if (kind == EM_TOK_LBRACKET)
        f.kind = FR_BRACKET;
    else if (sc->prev.kind == EM_TOK_BY || sc->prev.kind == EM_TOK_WITHOUT)
        f.kind = FR_GROUP;
    else if (em_tok_is_word(sc->prev.kind)) {
        f.kind = FR_CALL;
        f.label_values = sc->prev.len == strlen(lv) &&
            strncmp(sc->s + sc->prev.pos, lv, sc->prev.len) == 0;
    }
    if (sc->depth < MAX_DEPTH)
        sc->fr[sc->depth] = f;
    sc->depth++;
}

/* Takes in token T: brackets open and close frames, commas count call
** arguments. */
static void scan_take(scan *sc, const em_token *t)
{
    scan_frame *f;

    switch (t->kind) {
    case EM_TOK_LPAREN: case EM_TOK_LBRACE: case EM_TOK_LBRACKET:
        open_frame(sc, t->kind);
        break;
    case EM_TOK_RPAREN: case EM_TOK_RBRACE: case EM_TOK_RBRACKET:
        if (sc->depth > 0)
            sc->depth--;
        break;
    case EM_TOK_COMMA:
        if ((f = top_frame(sc)) != NULL && f->kind == FR_CALL)
            f->arg++;
        break;
    default:
        break;
    }
    sc->prev2 = sc->prev;
    sc->prev = *t;
}

/* At the end of the text, inside a string opened at OPEN: a matcher's
** value when the string follows NAME OP inside braces. */
static void spot_string(scan *sc, size_t open)
{
    scan_frame *f = top_frame(sc);

    sc->quote = sc->s[open];
    sc->start = open + 1;
    if (sc->depth > MAX_DEPTH)
        return;
    if (f != NULL && f->kind == FR_BRACE && is_op(sc, &sc->prev) &&
        em_tok_is_word(sc->prev2.kind) && sc->prev2.len < sizeof sc->label) {
        memcpy(sc->label, sc->s + sc->prev2.pos, sc->prev2.len);
        sc->label[sc->prev2.len] = '\0';
        sc->spot = SPOT_VALUE;
    } else if (f != NULL && f->kind == FR_CALL && f->label_values &&
               f->arg == 0) {
        sc->spot = SPOT_LABEL_STRING;
    }
}

/* At the end of the text, in a word starting at START (maybe empty). */
static void spot_word(scan *sc, size_t start)
{
    scan_frame *f = top_frame(sc);
    bool after_sep = is_sep(sc, &sc->prev);
    em_tok prev = sc->prev.kind;

    sc->start = start;
    if (sc->depth > MAX_DEPTH)
        return;
    if (f != NULL && (f->kind == FR_BRACE || f->kind == FR_GROUP ||
                      (f->kind == FR_CALL && f->label_values &&
                       f->arg == 0))) {
        if (after_sep)
            sc->spot = SPOT_LABEL;
    } else if (f != NULL && f->kind == FR_BRACKET) {
        return;
    } else if (after_sep) {
        sc->spot = SPOT_EXPR;
    } else if (prev == EM_TOK_OFFSET || prev == EM_TOK_BY ||
               prev == EM_TOK_WITHOUT || prev == EM_TOK_AT ||
               is_op(sc, &sc->prev)) {
        return;
    } else {
        sc->spot = SPOT_KEYWORD;
    }
}

/* T runs to the end of the text: true, having set the spot, when the
** cursor is in it (a word, a string the end cuts, a number or a comment,
** which get nothing); false when T is whole and the cursor after it. */
static bool spot_last(scan *sc, const em_token *t)
{
    switch (t->kind) {
    case EM_TOK_COMMENT:
        return true;
    case EM_TOK_STRING:
        if ((t->flags & EM_TOKF_INCOMPLETE) == 0)
            return false;
        spot_string(sc, t->pos);
        return true;
    case EM_TOK_NUMBER: case EM_TOK_DURATION:
        sc->start = t->pos;
        return true;
    default:
        if (!em_tok_is_word(t->kind))
            return false;
        spot_word(sc, t->pos);
        return true;
    }
}

/* Finds the spot at the end of the query text S, read by the query
** lexer's tolerant mode (which takes text cut anywhere). */
static void scan_query(scan *sc, const char *s)
{
    em_lexer lx;
    em_token t;

    memset(sc, 0, sizeof *sc);
    sc->s = s;
    em_lex_init_mode(&lx, s, EM_LEX_TOLERANT | EM_LEX_COMMENTS);
    for (;;) {
        em_lex_next(&lx, &t);
        if (t.kind == EM_TOK_EOF) {
            spot_word(sc, t.pos);       /* an empty word */
            return;
        }
        if (t.pos + t.len == lx.len && spot_last(sc, &t))
            return;
        if (t.kind != EM_TOK_COMMENT)
            scan_take(sc, &t);
    }
}

static int complete_query(em_repl *r, const char *text, size_t base,
                          em_completion *c)
{
    static const char *const keywords[] = { "by", "without", "offset" };
    scan sc;
    const char *w;
    size_t wl;
    int rc = EMBER_OK;

    scan_query(&sc, text);
    w = text + sc.start;
    wl = strlen(w);
    c->start = base + sc.start;
    switch (sc.spot) {
    case SPOT_EXPR:
        rc = offer_functions(c, w, wl);
        if (rc == EMBER_OK)
            rc = offer_list(c, w, wl, em_repl_types(r), "");
        break;
    case SPOT_KEYWORD:
        for (size_t k = 0; k < EM_ARRAY_LEN(keywords) && rc == EMBER_OK; k++)
            rc = cand_offer(c, w, wl, keywords[k], " ");
        break;
    case SPOT_LABEL:
        rc = offer_labels(r, c, w, wl, "");
        break;
    case SPOT_LABEL_STRING: {
        char close[2] = { sc.quote, '\0' };
        rc = offer_labels(r, c, w, wl, close);
        break;
    }
    case SPOT_VALUE:
        rc = offer_quoted(c, w, wl, em_repl_label_values(r, sc.label),
                          sc.quote);
        break;
    default:
        break;
    }
    return rc;
}

/* ---- dot commands ------------------------------------------------------- */

/* The command a line's first word names, exactly or as a unique prefix. */
static const em_dot_cmd *dot_lookup(const char *name, size_t n)
{
    const em_dot_cmd *hit = NULL;
    size_t nhits = 0;

    for (size_t i = 0; i < em_ndot_cmds; i++) {
        const char *cn = em_dot_cmds[i].name;
        if (strlen(cn) == n && memcmp(cn, name, n) == 0)
            return &em_dot_cmds[i];
        if (strncmp(cn, name, n) == 0) {
            hit = &em_dot_cmds[i];
            nhits++;
        }
    }
    return nhits == 1 ? hit : NULL;
}

/* Completes the first argument ARG (at offset BASE) of command CMD. */
static int complete_dot_arg(em_repl *r, const em_dot_cmd *cmd,
                            const char *arg, size_t base, em_completion *c)
{
    static const char *const onoff[] = { "on", "off" };
    size_t wl = strlen(arg), sp = strcspn(arg, " \t");
    int rc = EMBER_OK;

    c->start = base;
    if (cmd->complete == EM_COMPLETE_QUERY)
        return complete_query(r, arg, base, c);
    if (cmd->complete == EM_COMPLETE_LABEL && arg[sp] != '\0')
        return complete_query(r, arg + sp, base + sp, c);
    if (arg[sp] != '\0')
        return EMBER_OK;        /* past the first argument */
    switch (cmd->complete) {
    case EM_COMPLETE_FORMAT:
        for (size_t i = 0; i < em_cli_nformats && rc == EMBER_OK; i++)
            rc = cand_offer(c, arg, wl, em_cli_formats[i], "");
        if (rc == EMBER_OK)
            rc = cand_offer(c, arg, wl, "auto", "");
        break;
    case EM_COMPLETE_ONOFF:
        for (size_t i = 0; i < 2 && rc == EMBER_OK; i++)
            rc = cand_offer(c, arg, wl, onoff[i], "");
        break;
    case EM_COMPLETE_OFF:
        rc = cand_offer(c, arg, wl, "off", "");
        break;
    case EM_COMPLETE_LABEL:
        rc = offer_labels(r, c, arg, wl, " ");
        break;
    case EM_COMPLETE_DOT:
        for (size_t i = 0; i < em_ndot_cmds && rc == EMBER_OK; i++)
            rc = cand_offer(c, arg, wl, em_dot_cmds[i].name + 1, "");
        break;
    default:
        break;
    }
    return rc;
}

/* TEXT starts with '.' (after blanks): a command name, or its argument. */
static int complete_dot(em_repl *r, const char *text, size_t base,
                        em_completion *c)
{
    size_t n = strcspn(text, " \t");
    const em_dot_cmd *cmd;
    int rc = EMBER_OK;

    if (text[n] == '\0') {
        c->start = base;
        for (size_t i = 0; i < em_ndot_cmds && rc == EMBER_OK; i++)
            rc = cand_offer(c, text, n, em_dot_cmds[i].name,
                            em_dot_cmds[i].args[0] ? " " : "");
        return rc;
    }
    if ((cmd = dot_lookup(text, n)) == NULL)
        return EMBER_OK;
    while (text[n] == ' ' || text[n] == '\t')
        n++;
    return complete_dot_arg(r, cmd, text + n, base + n, c);
}

int em_repl_complete(em_repl *r, const char *text, em_completion *c)
{
    size_t lead = strspn(text, " \t");
    int rc;

    memset(c, 0, sizeof *c);
    c->start = strlen(text);
    if (text[lead] == '.')
        rc = complete_dot(r, text + lead, lead, c);
    else
        rc = complete_query(r, text, 0, c);
    if (rc != EMBER_OK)
        em_completion_free(c);
    return rc;
}

/* ---- libedit ------------------------------------------------------------ */

/* Lists the candidates under the line, in columns as wide as the
** terminal, at most a screenful's worth. */
static void list_candidates(const em_completion *c)
{
    enum { MAX_SHOWN = 100 };
    unsigned cols, rows;
    size_t width = 0, per_line, shown = c->n < MAX_SHOWN ? c->n : MAX_SHOWN;

    em_cli_term_size(STDOUT_FILENO, &cols, &rows);
    if (cols == 0)
        cols = 80;
    for (size_t i = 0; i < shown; i++)
        if (strlen(c->words[i]) > width)
            width = strlen(c->words[i]);
    width += 2;
    per_line = width < cols ? cols / width : 1;
    fputc('\n', stdout);
    for (size_t i = 0; i < shown; i++) {
        bool last = (i + 1) % per_line == 0 || i + 1 == shown;
        fprintf(stdout, "%-*s%s", last ? 0 : (int)width, c->words[i],
                last ? "\n" : "");
    }
    if (shown < c->n)
        fprintf(stdout, "(%zu more)\n", c->n - shown);
    fflush(stdout);
}

static size_t common_prefix(const em_completion *c)
{
    size_t n = strlen(c->words[0]);

    for (size_t i = 1; i < c->n; i++) {
        size_t k = 0;
        while (k < n && c->words[i][k] == c->words[0][k])
            k++;
        n = k;
    }
    return n;
}

/* Inserts what the candidates agree on past the typed word; lists them
** when they agree on nothing more (bash's and psql's habit). */
static unsigned char complete_apply(EditLine *el, const em_completion *c,
                                    size_t typed)
{
    size_t common;
    char *add;
    int rc;

    if (c->n == 0)
        return CC_REFRESH_BEEP;
    common = common_prefix(c);
    if (c->n > 1 && common <= typed) {
        list_candidates(c);
        return CC_REDISPLAY;
    }
    add = em_malloc(common - typed + strlen(c->suffixes[0]) + 1);
    if (add == NULL)
        return CC_ERROR;
    memcpy(add, c->words[0] + typed, common - typed);
    strcpy(add + common - typed, c->n == 1 ? c->suffixes[0] : "");
    rc = add[0] != '\0' ? el_insertstr(el, add) : 0;
    em_free(add);
    return rc == 0 ? CC_REFRESH : CC_ERROR;
}

static unsigned char complete_fn(EditLine *el, int ch)
{
    const LineInfo *li = el_line(el);
    em_repl *r = NULL;
    em_completion c;
    em_buf text = { 0 };
    size_t cur = (size_t)(li->cursor - li->buffer);
    unsigned char ret = CC_ERROR;

    EM_UNUSED(ch);
    el_get(el, EL_CLIENTDATA, &r);
    if (r == NULL)
        return CC_ERROR;
    if ((r->pending != NULL &&
         em_buf_put(&text, r->pending, strlen(r->pending)) != EMBER_OK) ||
        em_buf_put(&text, li->buffer, cur) != EMBER_OK ||
        em_buf_put(&text, "", 1) != EMBER_OK)
        goto out;
    if (em_repl_complete(r, (const char *)text.p, &c) == EMBER_OK) {
        ret = complete_apply(el, &c, text.len - 1 - c.start);
        em_completion_free(&c);
    }
out:
    em_buf_free(&text);
    return ret;
}

void em_repl_bind(struct editline *el)
{
    /* wide: the narrow EL_ADDFN leaks copies of its strings */
    el_wset(el, EL_ADDFN, L"ember-complete", L"complete the word",
            complete_fn);
    el_set(el, EL_BIND, "^I", "ember-complete", NULL);
}
