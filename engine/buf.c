/*
** engine/buf.c: a growable byte buffer, the encoders' output. Growth doubles
** so that appending N bytes costs O(N) overall.
*/
#include "engine.h"

int em_buf_grow(em_buf *b, size_t extra)
{
    size_t need = b->len + extra;
    uint8_t *p;

    if (need < b->len)
        return em_err(EMBER_ELIMIT, "buffer: size overflow");
    if (need <= b->cap)
        return EMBER_OK;
    /* at least 64 bytes, so that small encodings take one allocation */
    p = em_grow(b->p, &b->cap, need < 64 ? 64 : need, 1);
    if (p == NULL)
        return em_err(EMBER_ENOMEM, "buffer: %zu bytes", need);
    b->p = p;
    return EMBER_OK;
}

void em_buf_free(em_buf *b)
{
    em_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
