/*
** engine/buf.c: a growable byte buffer, the encoders' output. Growth doubles
** so that appending N bytes costs O(N) overall.
*/
#include "engine.h"

int em_buf_grow(em_buf *b, size_t extra)
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

void em_buf_free(em_buf *b)
{
    em_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
