/*
** engine/buf.c: a growable byte buffer, the encoders' output. Growth doubles
** so that appending N bytes costs O(N) overall.
*/
#include "engine.h"

int em_buf_reserve(em_buf *b, size_t extra)
{
    size_t need = b->len + extra, cap;
    uint8_t *p;

    if (need < b->len)
        return em_err(EMBER_ELIMIT, "buffer: size overflow");
    if (need <= b->cap)
        return EMBER_OK;
    cap = b->cap < 64 ? 64 : b->cap;
    while (cap < need)
        cap = cap * 2 < cap ? need : cap * 2;
    p = em_realloc(b->p, cap);
    if (p == NULL)
        return em_err(EMBER_ENOMEM, "buffer: %zu bytes", cap);
    b->p = p;
    b->cap = cap;
    return EMBER_OK;
}

int em_buf_put(em_buf *b, const void *data, size_t n)
{
    int rc = em_buf_reserve(b, n);
    if (rc == EMBER_OK && n > 0) {
        memcpy(b->p + b->len, data, n);
        b->len += n;
    }
    return rc;
}

int em_buf_varint(em_buf *b, uint64_t v)
{
    int rc = em_buf_reserve(b, EM_VARINT_MAX);
    if (rc == EMBER_OK)
        b->len += em_varint_put(b->p + b->len, v);
    return rc;
}

void em_buf_free(em_buf *b)
{
    em_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
