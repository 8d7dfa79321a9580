/*
** fuzz/fuzz_query.c: libFuzzer harness for the query text decoders: the
** lexer token by token (decoding every string it accepts), the parser, and
** the time parser. Any bytes must give EMBER_OK or an error code with a
** message, never a crash, a leak or a read past the text. The input is
** copied and NUL-terminated because the query functions take C strings.
*/
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static void parse(const char *text)
{
    em_node *n = NULL;
    ember_selector sel;
    int rc = em_query_parse(text, &n);

    if (rc == EMBER_OK) {
        if (n == NULL || n->kind != EM_NODE_SELECTOR)
            abort();
        em_sel_view(&n->u.sel, 0, 0, &sel);
        em_node_free(n);
    } else if (n != NULL || (rc != EMBER_EINVAL && rc != EMBER_ELIMIT &&
                             rc != EMBER_ENOMEM) || em_errmsg()[0] == '\0') {
        abort();                        /* failures are codes with messages */
    }
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
    parse(text);
    em_time_parse(text, INT64_C(1732170000000), &ms);
    em_duration_parse(text, &ms);
    em_free(text);
    return 0;
}
