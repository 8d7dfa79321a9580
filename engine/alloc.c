/*
** engine/alloc.c: the one allocator of Ember, with a test hook that fails
** the Nth call so that tests can prove every path returns EMBER_ENOMEM and
** leaks nothing, and one that counts the bytes held so that tests can
** prove a memory budget (docs/ingest.md, "Memory"). zstd is routed here too
** (engine/chunk.c); LMDB and CRoaring allocate on their own.
*/
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "engine.h"

static _Atomic uint64_t alloc_calls;    /* calls so far */
static _Atomic uint64_t alloc_fail_from;/* first failing call, 0: never */
static _Atomic bool count_on;           /* em_alloc_count */
static _Atomic int64_t count_live, count_peak;

void em_alloc_count(bool on)
{
    atomic_store(&count_live, 0);
    atomic_store(&count_peak, 0);
    atomic_store(&count_on, on);
}

uint64_t em_alloc_peak(void)
{
    int64_t p = atomic_load(&count_peak);

    return p > 0 ? (uint64_t)p : 0;
}

/* Adds the block P (NULL: none) to the count, or takes it off with -1. */
static void count(void *p, int sign)
{
    int64_t live, peak;

    if (p == NULL || !atomic_load_explicit(&count_on, memory_order_relaxed))
        return;
    live = atomic_fetch_add(&count_live,
                            sign * (int64_t)malloc_usable_size(p)) +
           sign * (int64_t)malloc_usable_size(p);
    peak = atomic_load(&count_peak);
    while (live > peak &&
           !atomic_compare_exchange_weak(&count_peak, &peak, live))
        ;
}

void em_alloc_fail_at(uint64_t n)
{
    atomic_store(&alloc_fail_from, n == 0 ? 0 : atomic_load(&alloc_calls) + n);
}

uint64_t em_alloc_calls(void)
{
    return atomic_load(&alloc_calls);
}

/* True when the hook says this call must fail. */
static bool alloc_should_fail(void)
{
    uint64_t call = atomic_fetch_add(&alloc_calls, 1) + 1;
    uint64_t from = atomic_load(&alloc_fail_from);
    return from != 0 && call >= from;
}

void *em_malloc(size_t n)
{
    void *p;

    if (alloc_should_fail())
        return NULL;
    p = malloc(n == 0 ? 1 : n);
    count(p, 1);
    return p;
}

void *em_calloc(size_t n, size_t size)
{
    void *p;

    if (alloc_should_fail())
        return NULL;
    p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
    count(p, 1);
    return p;
}

void *em_realloc(void *p, size_t n)
{
    void *q;

    if (alloc_should_fail())
        return NULL;
    count(p, -1);
    q = realloc(p, n == 0 ? 1 : n);
    count(q != NULL ? q : p, 1);
    return q;
}

void em_free(void *p)
{
    count(p, -1);
    free(p);
}

/* The public face of em_free, for buffers handed to the caller. */
EMBER_API void ember_free(void *p)
{
    em_free(p);
}

char *em_strndup(const char *s, size_t n)
{
    char *d = em_malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *em_strdup(const char *s)
{
    return em_strndup(s, strlen(s));
}

void *em_grow(void *p, size_t *cap, size_t need, size_t size)
{
    size_t c = *cap != 0 ? *cap : 16;
    void *q;

    if (need <= *cap)
        return p;
    while (c < need) {
        if (c > SIZE_MAX / 2 / size)
            return NULL;
        c *= 2;
    }
    if ((q = em_realloc(p, c * size)) != NULL)
        *cap = c;
    return q;
}
