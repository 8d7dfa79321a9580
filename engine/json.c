/*
** engine/json.c: JSON strings, written the one way the house writes them
** (the json renderer, the server's answers): '"', '\' and control
** characters escaped (\n, \t, \r, \b, \f, others as \u00XX), valid UTF-8
** passed through, and a byte that starts no character written as U+FFFD,
** so that the document is valid JSON whatever bytes a profile carried.
*/
#include <stdio.h>

#include "engine/engine.h"

/* The escape of byte C, or NULL when it needs none. BUF holds 8 bytes. */
static const char *json_escape(unsigned char c, char buf[8])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
    }
    if (c >= 0x20)
        return NULL;
    snprintf(buf, 8, "\\u%04x", c);
    return buf;
}

void em_json_string(const char *str, em_json_put_fn put, void *ctx)
{
    const unsigned char *s = (const unsigned char *)(str != NULL ? str : "");
    const unsigned char *run = s;       /* bytes that pass as they are */
    const unsigned char *end = s + strlen((const char *)s);
    char esc[8];
    uint32_t cp;

    put(ctx, "\"", 1);
    while (*s != '\0') {
        const char *e;
        size_t n;
        if (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\') {
            s++;                        /* the common case: plain ASCII */
            continue;
        }
        e = json_escape(*s, esc);
        /* here a byte >= 0x80 when E is NULL: one that starts no
        ** character (width 1) becomes U+FFFD */
        n = e == NULL ? em_utf8_decode(s, (size_t)(end - s), &cp) : 0;
        if (n > 1) {
            s += n;
            continue;
        }
        put(ctx, (const char *)run, (size_t)(s - run));
        e = e != NULL ? e : "\\ufffd";
        put(ctx, e, strlen(e));
        run = ++s;
    }
    put(ctx, (const char *)run, (size_t)(s - run));
    put(ctx, "\"", 1);
}

typedef struct buf_put {
    em_buf *b;
    int rc;
} buf_put;

static void buf_put_fn(void *ctx, const char *s, size_t n)
{
    buf_put *p = ctx;

    if (p->rc == EMBER_OK)
        p->rc = em_buf_put(p->b, s, n);
}

int em_buf_json(em_buf *b, const char *str)
{
    buf_put p = { b, EMBER_OK };

    em_json_string(str, buf_put_fn, &p);
    return p.rc;
}
