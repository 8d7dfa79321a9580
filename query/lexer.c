/*
** query/lexer.c: the tokenizer of the PromQL-like query language, and the
** caret messages every stage of query/ uses to point into the query text.
**
** Tokens follow PromQL's lexer: identifiers [a-zA-Z_:][a-zA-Z0-9_:]* (so a
** profile type such as process_cpu:samples:count:cpu:nanoseconds:delta is
** one identifier), strings in "..." or '...' with Go escapes or raw `...`,
** numbers, durations (1h30m), the punctuation { } ( ) [ ] , = != =~ !~ @,
** the keywords by, without, offset (case-insensitive), and # comments to the
** end of the line. Positions are byte offsets plus a 1-based line and a
** column counted in UTF-8 characters, so a caret lands under the character
** a terminal shows. The lexer validates everything it accepts, so later
** stages (em_lex_string) cannot fail on its tokens except for memory.
**
** The tolerant mode (EM_LEX_TOLERANT) is the same scanner for text still
** being typed, on which the REPL finds where a statement ends and what to
** complete (as SQLite's complete.c sits on its tokenizer), so the language
** has one tokenizer: each place that would return an error flags the token
** instead (EM_TOKF_*) and goes on after it, never calling em_query_error,
** so the strict path and its messages stay as they were.
*/
#include <stdio.h>
#include <strings.h>

#include "query/query_int.h"

#define ERR_WINDOW 72           /* bytes of a long line shown around a caret */

/* ---- caret messages --------------------------------------------------------- */

/* Line and column (1-based, in characters) of byte POS of SRC. */
static void src_linecol(const char *src, size_t pos, unsigned *line,
                        unsigned *col, size_t *line_start)
{
    *line = 1;
    *col = 1;
    *line_start = 0;
    for (size_t i = 0; i < pos && src[i] != '\0'; i++) {
        if (src[i] == '\n') {
            (*line)++;
            *col = 1;
            *line_start = i + 1;
        } else if (((unsigned char)src[i] & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

/* Moves I back to the start of a UTF-8 character (never before FLOOR). */
static size_t utf8_floor(const char *s, size_t i, size_t floor)
{
    while (i > floor && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    return i;
}

/* Appends to OUT the shown part [from, to) of the line, control characters
** but tabs as spaces (they would move the caret), and the caret line below
** it, whose padding copies the tabs so that the caret stays aligned. */
static void src_excerpt(char *out, size_t cap, const char *src, size_t from,
                        size_t to, size_t pos, bool pre, bool post)
{
    size_t n = 0;

    n += (size_t)snprintf(out + n, cap - n, "\n  %s", pre ? "..." : "");
    for (size_t i = from; i < to && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)src[i];
        out[n++] = ((c < 0x20 && c != '\t') || c == 0x7f) ? ' ' : (char)c;
    }
    if (n < cap)
        n += (size_t)snprintf(out + n, cap - n, "%s\n  %s",
                              post ? "..." : "", pre ? "   " : "");
    for (size_t i = from; i < pos && n + 1 < cap; i++) {
        if (src[i] == '\t')
            out[n++] = '\t';
        else if (((unsigned char)src[i] & 0xc0) != 0x80)
            out[n++] = ' ';
    }
    if (n + 1 < cap)
        out[n++] = '^';
    out[n < cap ? n : cap - 1] = '\0';
}

int em_query_error(const char *src, size_t pos, const char *fmt, ...)
{
    char msg[512], where[32], shown[256];
    size_t start, end, from, to;
    unsigned line, col;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    src_linecol(src, pos, &line, &col, &start);
    end = start + strcspn(src + start, "\n");
    if (pos > end)
        pos = end;
    from = start;
    to = end;
    if (end - start > ERR_WINDOW) {     /* a window of the long line */
        from = pos > start + ERR_WINDOW / 2 ? pos - ERR_WINDOW / 2 : start;
        from = utf8_floor(src, from, start);
        to = from + ERR_WINDOW < end ? from + ERR_WINDOW : end;
        to = utf8_floor(src, to, from);     /* still past pos: see above */
    }
    src_excerpt(shown, sizeof shown, src, from, to, pos, from > start,
                to < end);
    if (strchr(src, '\n') != NULL)
        snprintf(where, sizeof where, "line %u, column %u", line, col);
    else
        snprintf(where, sizeof where, "column %u", col);
    return em_err(EMBER_EINVAL, "parse error at %s: %s%s", where, msg, shown);
}

/* ---- character classes -------------------------------------------------------- */

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_ident_start(int c)
{
    return is_alpha(c) || c == ':';
}

/* inline: identifiers are most of a query's bytes, and gcc stops inlining
** this into their loop once the tolerant mode's paths call it too. */
static inline bool is_ident_char(int c)
{
    return is_alpha(c) || is_digit(c) || c == ':';
}

static bool is_hex(int c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_value(int c)
{
    if (is_digit(c))
        return c - '0';
    return (c | 0x20) - 'a' + 10;
}

/* ---- scanning ------------------------------------------------------------------- */

static int peek(const em_lexer *lx, size_t ahead)
{
    size_t i = lx->pos + ahead;
    return i < lx->len ? (unsigned char)lx->src[i] : 0;
}

/* Consumes one byte, keeping line and column. */
static void bump(em_lexer *lx)
{
    unsigned char c = (unsigned char)lx->src[lx->pos++];

    if (c == '\n') {
        lx->line++;
        lx->col = 1;
    } else if ((c & 0xc0) != 0x80) {
        lx->col++;
    }
}

static void skip_comment(em_lexer *lx)
{
    while (peek(lx, 0) != 0 && peek(lx, 0) != '\n')
        bump(lx);
}

static void skip_space(em_lexer *lx)
{
    for (;;) {
        int c = peek(lx, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
            c == '\v')
            bump(lx);
        else if (c == '#' && !(lx->mode & EM_LEX_COMMENTS))
            skip_comment(lx);           /* a comment runs to the line end */
        else
            return;
    }
}

void em_lex_init(em_lexer *lx, const char *src)
{
    em_lex_init_mode(lx, src, 0);
}

void em_lex_init_mode(em_lexer *lx, const char *src, unsigned mode)
{
    lx->src = src;
    lx->len = strlen(src);
    lx->pos = 0;
    lx->line = 1;
    lx->col = 1;
    lx->mode = mode;
}

static bool tolerant(const em_lexer *lx)
{
    return (lx->mode & EM_LEX_TOLERANT) != 0;
}

/* The tolerant mode's answer where the strict one fails: TOK is flagged
** (incomplete too when CUT) and lexing goes on. */
static int tolerate(em_token *tok, bool cut)
{
    tok->flags |= EM_TOKF_INVALID | (cut ? EM_TOKF_INCOMPLETE : 0u);
    return EMBER_OK;
}

/* ---- strings ------------------------------------------------------------------ */

/* Reads N hex digits at S; -1 when one is missing. */
static long read_hex(const char *s, int n)
{
    long v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_hex((unsigned char)s[i]))
            return -1;
        v = v * 16 + hex_value((unsigned char)s[i]);
    }
    return v;
}

/* Decodes the escape at S (just after the backslash) in a string quoted by
** QUOTE: *VAL gets the byte or code point, *UTF8 whether it is a code point,
** and the return value the number of bytes it spans, 0 when invalid.
** Go's and PromQL's rules: \a \b \f \n \r \t \v \\ \<quote>, \ooo (<= 255),
** \xhh, \uhhhh, \Uhhhhhhhh (no surrogates, <= U+10FFFF). */
static size_t escape_decode(const char *s, int quote, long *val, bool *utf8)
{
    static const char simple[] = "a\ab\bf\fn\nr\rt\tv\v\\\\";
    const char *hit = strchr(simple, s[0]);
    int c = (unsigned char)s[0];

    *utf8 = false;
    if (c != 0 && hit != NULL && (hit - simple) % 2 == 0) {
        *val = (unsigned char)hit[1];
        return 1;
    }
    if (c == quote) {
        *val = c;
        return 1;
    }
    if (c >= '0' && c <= '7') {
        if (s[1] < '0' || s[1] > '7' || s[2] < '0' || s[2] > '7')
            return 0;
        *val = (c - '0') * 64 + (s[1] - '0') * 8 + (s[2] - '0');
        return *val <= 255 ? 3 : 0;
    }
    if (c == 'x')
        return (*val = read_hex(s + 1, 2)) < 0 ? 0 : 3;
    if (c != 'u' && c != 'U')
        return 0;
    *utf8 = true;
    *val = read_hex(s + 1, c == 'u' ? 4 : 8);
    if (*val < 0 || *val > 0x10ffff || (*val >= 0xd800 && *val <= 0xdfff))
        return 0;
    return c == 'u' ? 5 : 9;
}

/* Tolerant mode: skips a bad escape as the backslash and the byte after it
** (N bytes when only its value, NUL, was wrong), which never close the
** string. */
static int skip_bad_escape(em_lexer *lx, em_token *tok, size_t n)
{
    bump(lx);
    for (size_t i = 0; i < (n > 0 ? n : 1) && peek(lx, 0) != 0; i++)
        bump(lx);
    return tolerate(tok, false);
}

static int lex_escape(em_lexer *lx, em_token *tok, int quote)
{
    size_t at = lx->pos;                /* the backslash */
    long val;
    bool utf8;
    size_t n = escape_decode(lx->src + lx->pos + 1, quote, &val, &utf8);

    if ((n == 0 || val == 0) && tolerant(lx))
        return skip_bad_escape(lx, tok, n);
    if (n == 0)
        return em_query_error(lx->src, at,
                              "bad escape sequence in string: expected "
                              "\\a \\b \\f \\n \\r \\t \\v \\\\ \\%c, \\ooo, "
                              "\\xhh, \\uhhhh or \\Uhhhhhhhh", quote);
    if (val == 0)
        return em_query_error(lx->src, at,
                              "a string may not contain a NUL character");
    for (size_t i = 0; i <= n; i++)
        bump(lx);
    return EMBER_OK;
}

static int lex_string(em_lexer *lx, em_token *tok)
{
    int quote = peek(lx, 0);
    int rc;

    tok->kind = EM_TOK_STRING;
    bump(lx);
    for (;;) {
        int c = peek(lx, 0);
        if (c == 0 || (c == '\n' && quote != '`')) {
            if (!tolerant(lx))
                return em_query_error(lx->src, tok->pos,
                                      "unterminated string: no closing %c%s",
                                      quote, quote == '`' ? "" :
                                      " on this line");
            if (c == 0)
                return tolerate(tok, true);
            tolerate(tok, false);       /* and on to the closing quote */
        }
        if (c == quote) {
            bump(lx);
            return EMBER_OK;
        }
        if (c == '\\' && quote != '`') {
            if ((rc = lex_escape(lx, tok, quote)) != EMBER_OK)
                return rc;
        } else {
            bump(lx);
        }
    }
}

/* Appends code point CP as UTF-8 at OUT; returns the bytes written. */
static size_t utf8_put(char *out, long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

int em_lex_string(const char *src, const em_token *tok, char **out)
{
    const char *s = src + tok->pos + 1, *end = src + tok->pos + tok->len - 1;
    int quote = (unsigned char)src[tok->pos];
    char *d = em_malloc(tok->len);      /* decoding never grows the text */
    size_t n = 0;

    if (d == NULL)
        return em_err(EMBER_ENOMEM, "query string of %zu bytes", tok->len);
    while (s < end) {
        long val;
        bool utf8;
        size_t k;
        if (*s != '\\' || quote == '`') {
            d[n++] = *s++;
            continue;
        }
        k = escape_decode(s + 1, quote, &val, &utf8);
        if (utf8)
            n += utf8_put(d + n, val);
        else
            d[n++] = (char)val;
        s += 1 + k;
    }
    d[n] = '\0';
    *out = d;
    return EMBER_OK;
}

/* ---- numbers and durations -------------------------------------------------- */

static bool is_duration_unit(const em_lexer *lx, size_t at)
{
    int c = peek(lx, at);
    return c == 'y' || c == 'w' || c == 'd' || c == 'h' || c == 'm' ||
           c == 's';
}

/* Tolerant mode: the number or duration TOK runs into a letter or a dot.
** The token takes the rest of the word, so that lexing goes on after it,
** and is cut, not wrong, when the input ends in a 0x or an exponent still
** without digits (0x, 1e, 1e-). */
static int number_tail(em_lexer *lx, em_token *tok)
{
    int c = peek(lx, 0) | 0x20;
    size_t n = 0;

    if (c == 'x' && lx->pos == tok->pos + 1 && lx->src[tok->pos] == '0')
        n = 1;
    else if (c == 'e' && tok->kind == EM_TOK_NUMBER)
        n = peek(lx, 1) == '+' || peek(lx, 1) == '-' ? 2 : 1;
    if (n > 0 && lx->pos + n == lx->len) {
        while (n-- > 0)
            bump(lx);
        return tolerate(tok, true);
    }
    while (is_ident_char(peek(lx, 0)) || peek(lx, 0) == '.')
        bump(lx);
    return tolerate(tok, false);
}

/* Scans digits-unit segments (1h30m); em_duration_parse_n checks order. */
static int lex_duration(em_lexer *lx, em_token *tok)
{
    int64_t ms;
    char why[256];

    tok->kind = EM_TOK_DURATION;
    while (is_digit(peek(lx, 0))) {
        while (is_digit(peek(lx, 0)))
            bump(lx);
        if (!is_duration_unit(lx, 0))
            break;
        if (peek(lx, 0) == 'm' && peek(lx, 1) == 's')
            bump(lx);
        bump(lx);
    }
    if (is_ident_char(peek(lx, 0)) || peek(lx, 0) == '.')
        return tolerant(lx) ? number_tail(lx, tok) :
               em_query_error(lx->src, tok->pos,
                              "bad duration: expected digits and units "
                              "such as 1h30m (units y w d h m s ms)");
    if (em_duration_parse_n(lx->src + tok->pos, lx->pos - tok->pos, &ms) !=
        EMBER_OK) {
        if (tolerant(lx))               /* cut in its last unit (or an m
                                        ** that may be the start of ms) */
            return tolerate(tok, lx->pos == lx->len &&
                                 (is_digit(lx->src[lx->pos - 1]) ||
                                  lx->src[lx->pos - 1] == 'm'));
        snprintf(why, sizeof why, "%s", em_errmsg());
        return em_query_error(lx->src, tok->pos, "%s", why);
    }
    return EMBER_OK;
}

static void skip_digits(em_lexer *lx, bool hex)
{
    while (hex ? is_hex(peek(lx, 0)) : is_digit(peek(lx, 0)))
        bump(lx);
}

/* PromQL numbers: 12, 1.5, .5, 1e-3, 0x1F. A digit run followed by a
** duration unit is a duration instead. */
static int lex_number(em_lexer *lx, em_token *tok)
{
    size_t i = 0;

    while (is_digit(peek(lx, i)))
        i++;
    if (i > 0 && is_duration_unit(lx, i))
        return lex_duration(lx, tok);
    tok->kind = EM_TOK_NUMBER;
    if (peek(lx, 0) == '0' && (peek(lx, 1) | 0x20) == 'x' &&
        is_hex(peek(lx, 2))) {
        bump(lx);
        bump(lx);
        skip_digits(lx, true);
    } else {
        skip_digits(lx, false);
        if (peek(lx, 0) == '.') {
            bump(lx);
            skip_digits(lx, false);
        }
        if ((peek(lx, 0) | 0x20) == 'e' &&
            (is_digit(peek(lx, 1)) || ((peek(lx, 1) == '+' ||
              peek(lx, 1) == '-') && is_digit(peek(lx, 2))))) {
            bump(lx);
            bump(lx);
            skip_digits(lx, false);
        }
    }
    if (is_ident_char(peek(lx, 0)) || peek(lx, 0) == '.')
        return tolerant(lx) ? number_tail(lx, tok) :
               em_query_error(lx->src, tok->pos, "bad number or duration");
    return EMBER_OK;
}

/* ---- identifiers, keywords, punctuation ----------------------------------------- */

static const struct {
    const char *word;
    em_tok kind;
} keywords[] = {
    { "by", EM_TOK_BY },
    { "without", EM_TOK_WITHOUT },
    { "offset", EM_TOK_OFFSET },
};

static void lex_ident(em_lexer *lx, em_token *tok)
{
    while (is_ident_char(peek(lx, 0)))
        bump(lx);
    tok->kind = EM_TOK_IDENT;
    for (size_t k = 0; k < EM_ARRAY_LEN(keywords); k++) {
        if (strlen(keywords[k].word) == lx->pos - tok->pos &&
            strncasecmp(keywords[k].word, lx->src + tok->pos,
                        lx->pos - tok->pos) == 0)
            tok->kind = keywords[k].kind;
    }
}

/* One- and two-character punctuation, longest match first. */
static const struct {
    const char *text;
    em_tok kind;
} puncts[] = {
    { "!=", EM_TOK_NEQ }, { "=~", EM_TOK_RE }, { "!~", EM_TOK_NRE },
    { "{", EM_TOK_LBRACE }, { "}", EM_TOK_RBRACE }, { "(", EM_TOK_LPAREN },
    { ")", EM_TOK_RPAREN }, { "[", EM_TOK_LBRACKET },
    { "]", EM_TOK_RBRACKET }, { ",", EM_TOK_COMMA }, { "=", EM_TOK_EQ },
    { "@", EM_TOK_AT },
};

/* Punctuation; else a comment (which skip_space lets through only with
** EM_LEX_COMMENTS), or a byte no token starts with. */
static int lex_punct(em_lexer *lx, em_token *tok)
{
    int c = peek(lx, 0);

    for (size_t k = 0; k < EM_ARRAY_LEN(puncts); k++) {
        size_t n = strlen(puncts[k].text);
        if (strncmp(lx->src + lx->pos, puncts[k].text, n) == 0) {
            tok->kind = puncts[k].kind;
            while (n-- > 0)
                bump(lx);
            return EMBER_OK;
        }
    }
    if (c == '#') {                     /* only with EM_LEX_COMMENTS */
        tok->kind = EM_TOK_COMMENT;
        skip_comment(lx);
        return EMBER_OK;
    }
    if (tolerant(lx)) {                 /* '!' and '.' may lack their end */
        tok->kind = EM_TOK_UNKNOWN;
        bump(lx);
        return tolerate(tok, (c == '!' || c == '.') && peek(lx, 0) == 0);
    }
    if (c == '!')
        return em_query_error(lx->src, tok->pos,
                              "unexpected '!': expected '!=' or '!~'");
    if (c > 0x20 && c < 0x7f)
        return em_query_error(lx->src, tok->pos, "unexpected character '%c'",
                              c);
    return em_query_error(lx->src, tok->pos, "unexpected byte 0x%02x", c);
}

int em_lex_next(em_lexer *lx, em_token *tok)
{
    int c, rc = EMBER_OK;

    skip_space(lx);
    tok->pos = lx->pos;
    tok->line = lx->line;
    tok->col = lx->col;
    tok->flags = 0;
    c = peek(lx, 0);
    if (c == 0)
        tok->kind = EM_TOK_EOF;
    else if (is_ident_start(c))
        lex_ident(lx, tok);
    else if (is_digit(c) || (c == '.' && is_digit(peek(lx, 1))))
        rc = lex_number(lx, tok);
    else if (c == '"' || c == '\'' || c == '`')
        rc = lex_string(lx, tok);
    else
        rc = lex_punct(lx, tok);
    tok->len = lx->pos - tok->pos;
    return rc;
}

/* ---- names for messages ---------------------------------------------------------- */

static const char *const tok_names[EM_TOK_COUNT_] = {
    [EM_TOK_EOF] = "end of query",      [EM_TOK_IDENT] = "identifier",
    [EM_TOK_STRING] = "string",         [EM_TOK_NUMBER] = "number",
    [EM_TOK_DURATION] = "duration",     [EM_TOK_LBRACE] = "'{'",
    [EM_TOK_RBRACE] = "'}'",            [EM_TOK_LPAREN] = "'('",
    [EM_TOK_RPAREN] = "')'",            [EM_TOK_LBRACKET] = "'['",
    [EM_TOK_RBRACKET] = "']'",          [EM_TOK_COMMA] = "','",
    [EM_TOK_EQ] = "'='",                [EM_TOK_NEQ] = "'!='",
    [EM_TOK_RE] = "'=~'",               [EM_TOK_NRE] = "'!~'",
    [EM_TOK_AT] = "'@'",                [EM_TOK_BY] = "keyword 'by'",
    [EM_TOK_WITHOUT] = "keyword 'without'",
    [EM_TOK_OFFSET] = "keyword 'offset'",
    [EM_TOK_UNKNOWN] = "unexpected character",
    [EM_TOK_COMMENT] = "comment",
};

const char *em_tok_name(em_tok kind)
{
    if ((unsigned)kind >= EM_TOK_COUNT_ || tok_names[kind] == NULL)
        return "token";
    return tok_names[kind];
}

bool em_tok_is_word(em_tok kind)
{
    return kind == EM_TOK_IDENT || kind == EM_TOK_BY ||
           kind == EM_TOK_WITHOUT || kind == EM_TOK_OFFSET;
}
