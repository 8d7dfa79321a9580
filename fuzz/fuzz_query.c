/*
** fuzz/fuzz_query.c: libFuzzer harness for the query text decoders: the
** lexer token by token (decoding every string it accepts), the parser, and
** the time parser. Any bytes must give EMBER_OK or an error code with a
** message, never a crash, a leak or a read past the text. The input is
** copied and NUL-terminated because the query functions take C strings.
**
** A tree the parser accepts is checked (every node inside its parent's
** text, known kinds and functions, nesting within the limit) and printed
** back as query text, which must parse to the same tree: the parser and
** docs/query-language.md's grammar agree on whatever the fuzzer finds.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

/* Lexes TEXT to its end or first error; every string token must decode. */
static void lex_all(const char *text)
{
    em_lexer lx;
    em_token t;

    em_lex_init(&lx, text);
    while (em_lex_next(&lx, &t) == EMBER_OK && t.kind != EM_TOK_EOF) {
        char *s = NULL;
        if (t.pos + t.len > lx.len || t.len == 0)
            abort();                    /* a token outside the text */
        if (t.kind == EM_TOK_STRING &&
            em_lex_string(text, &t, &s) == EMBER_OK)
            em_free(s);
    }
}

/* ---- checking a tree ----------------------------------------------------------- */

static void check_sel(const em_sel *s, const em_node *n)
{
    ember_selector view;

    CHECK(s->type != NULL || s->nmatchers > 0);
    CHECK(s->range_ms >= 0 && s->offset_ms >= 0);
    for (size_t i = 0; i < s->nmatchers; i++) {
        CHECK(s->matchers[i].name != NULL && s->matchers[i].value != NULL);
        CHECK(s->value_pos[i] >= n->pos && s->value_pos[i] < n->end);
    }
    CHECK(s->at == NULL || (s->at_pos > n->pos && s->at_pos < n->end));
    em_sel_view(s, 0, 0, &view);
    CHECK(view.nmatchers == s->nmatchers && view.type == s->type);
}

/* Checks N, which lies within [FROM, TO) of a text of LEN bytes, at DEPTH
** calls deep. */
static void check_node(const em_node *n, size_t from, size_t to, int depth)
{
    CHECK(n != NULL && n->pos >= from && n->pos < n->end && n->end <= to);
    switch (n->kind) {
    case EM_NODE_SELECTOR:
        check_sel(&n->u.sel, n);
        break;
    case EM_NODE_CALL:
        CHECK(depth < 64 && em_fn_name(n->u.call.fn) != NULL);
        CHECK(n->u.call.name_pos == n->pos);
        CHECK(n->u.call.grouping != EM_GROUP_NONE || n->u.call.nlabels == 0);
        for (size_t i = 0; i < n->u.call.nargs; i++)
            check_node(n->u.call.args[i], n->pos, n->end, depth + 1);
        break;
    case EM_NODE_NUMBER:
        CHECK(isfinite(n->u.num) && n->u.num >= 0);
        break;
    case EM_NODE_STRING:
        CHECK(n->u.str != NULL);
        break;
    default:
        abort();
    }
}

/* ---- printing a tree back as a query --------------------------------------------- */

static void print_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\x%02x", c);   /* a byte, as the lexer decodes it */
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void print_node(FILE *f, const em_node *n);

static void print_sel(FILE *f, const em_sel *s)
{
    static const char *const ops[] = { "=", "!=", "=~", "!~" };

    fputc('{', f);
    if (s->type != NULL) {              /* any type text fits in a string */
        fputs("__type__=", f);
        print_str(f, s->type);
    }
    for (size_t i = 0; i < s->nmatchers; i++) {
        fprintf(f, "%s%s%s", i > 0 || s->type != NULL ? ", " : "",
                s->matchers[i].name, ops[s->matchers[i].op]);
        print_str(f, s->matchers[i].value);
    }
    fputc('}', f);
    if (s->range_ms != 0)
        fprintf(f, "[%lldms]", (long long)s->range_ms);
    if (s->at != NULL) {                /* the other order than offset @ */
        fputs(" @ ", f);
        print_str(f, s->at);
    }
    if (s->offset_ms != 0)
        fprintf(f, " offset %lldms", (long long)s->offset_ms);
}

static void print_call(FILE *f, const em_call *c)
{
    fputs(em_fn_name(c->fn), f);
    if (c->grouping != EM_GROUP_NONE) {
        fputs(c->grouping == EM_GROUP_BY ? " BY (" : " without (", f);
        for (size_t i = 0; i < c->nlabels; i++)
            fprintf(f, "%s%s", i > 0 ? ", " : "", c->labels[i]);
        fputs(") ", f);
    }
    fputc('(', f);
    for (size_t i = 0; i < c->nargs; i++) {
        fputs(i > 0 ? ", # comment\n" : "", f);
        print_node(f, c->args[i]);
    }
    fputc(')', f);
}

static void print_node(FILE *f, const em_node *n)
{
    switch (n->kind) {
    case EM_NODE_SELECTOR: print_sel(f, &n->u.sel); break;
    case EM_NODE_CALL: print_call(f, &n->u.call); break;
    case EM_NODE_NUMBER: fprintf(f, "%.17g", n->u.num); break;
    default: print_str(f, n->u.str); break;
    }
}

/* ---- comparing trees -------------------------------------------------------------- */

static bool same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool same_sel(const em_sel *a, const em_sel *b)
{
    if (!same_str(a->type, b->type) || a->nmatchers != b->nmatchers ||
        a->range_ms != b->range_ms || a->offset_ms != b->offset_ms ||
        !same_str(a->at, b->at))
        return false;
    for (size_t i = 0; i < a->nmatchers; i++) {
        if (a->matchers[i].op != b->matchers[i].op ||
            strcmp(a->matchers[i].name, b->matchers[i].name) != 0 ||
            strcmp(a->matchers[i].value, b->matchers[i].value) != 0)
            return false;
    }
    return true;
}

static bool same_node(const em_node *a, const em_node *b);

static bool same_call(const em_call *a, const em_call *b)
{
    if (a->fn != b->fn || a->nargs != b->nargs ||
        a->grouping != b->grouping || a->nlabels != b->nlabels)
        return false;
    for (size_t i = 0; i < a->nlabels; i++) {
        if (strcmp(a->labels[i], b->labels[i]) != 0)
            return false;
    }
    for (size_t i = 0; i < a->nargs; i++) {
        if (!same_node(a->args[i], b->args[i]))
            return false;
    }
    return true;
}

static bool same_node(const em_node *a, const em_node *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case EM_NODE_SELECTOR: return same_sel(&a->u.sel, &b->u.sel);
    case EM_NODE_CALL: return same_call(&a->u.call, &b->u.call);
    case EM_NODE_NUMBER:                /* within an ulp or two: see parser.c */
        return fabs(a->u.num - b->u.num) <= 1e-12 * fabs(a->u.num) ||
               fabs(a->u.num - b->u.num) <= 1e-300;     /* subnormals */
    default: return strcmp(a->u.str, b->u.str) == 0;
    }
}

/* The tree N printed and parsed again must be N. */
static void round_trip(const em_node *n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    em_node *again = NULL;

    if (f == NULL)
        return;
    print_node(f, n);
    fclose(f);
    if (em_query_parse(text, &again) != EMBER_OK ||
        !same_node(n, again)) {
        fprintf(stderr, "round trip failed: %s\n%s\n", text, em_errmsg());
        abort();
    }
    em_node_free(again);
    free(text);
}

static void parse(const char *text, size_t len)
{
    em_node *n = NULL;
    int rc = em_query_parse(text, &n);

    if (rc == EMBER_OK) {
        check_node(n, 0, len, 0);
        round_trip(n);
        em_node_free(n);
        return;
    }
    CHECK(n == NULL);                   /* failures are codes with messages */
    CHECK(rc == EMBER_EINVAL || rc == EMBER_ELIMIT || rc == EMBER_ENOMEM);
    CHECK(em_errmsg()[0] != '\0');
    CHECK(rc != EMBER_EINVAL ||
          strncmp(em_errmsg(), "parse error at ", 15) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = em_malloc(size + 1);
    int64_t ms;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    lex_all(text);
    parse(text, strlen(text));
    em_time_parse(text, INT64_C(1732170000000), &ms);
    em_duration_parse(text, &ms);
    em_free(text);
    return 0;
}
