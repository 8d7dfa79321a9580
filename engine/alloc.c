/*
** engine/alloc.c: the one allocator of Ember, with a test hook that fails
** the Nth call so that tests can prove every path returns EMBER_ENOMEM and
** leaks nothing, and one that counts the bytes held so that tests can
** prove a memory budget (docs/ingest.md, "Memory"). zstd is routed here too
** (engine/chunk.c); LMDB and CRoaring allocate on their own.
**
** It is also the one point where a query's memory is counted (em_budget,
** engine.h): the calling thread's budget, when it has one, sees every block
** its allocations make and free, and refuses one that would pass its limit.
*/
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

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

/* ---- the thread's query budget ---------------------------------------------- */

static _Thread_local em_budget *tls_budget;

int64_t em_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

em_budget *em_budget_swap(em_budget *b)
{
    em_budget *old = tls_budget;

    tls_budget = b;
    return old;
}

int em_budget_step(int kind, uint64_t n)
{
    em_budget *b = tls_budget;

    if (b == NULL)
        return EMBER_OK;
    b->steps[kind] += n;
    if (b->deadline_ns != 0 && !b->expired && em_mono_ns() > b->deadline_ns)
        b->expired = true;
    return b->expired ? EMBER_ETIMEOUT : EMBER_OK;
}

/* Whether the thread's budget lets its held bytes grow by N, OLD bytes
** being given back at the same time (a realloc's block). */
static bool budget_admits(size_t n, size_t old)
{
    em_budget *b = tls_budget;

    if (b == NULL || b->max_bytes == 0 ||
        b->held + (int64_t)n - (int64_t)old <= (int64_t)b->max_bytes)
        return true;
    if (b->refused == 0) {
        b->refused = n;
        b->refused_held = b->held;
    }
    return false;
}

/* Adds the block P (NULL: none) to the thread's budget, or takes it off
** with -1. */
static void budget_count(void *p, int sign)
{
    em_budget *b = tls_budget;

    if (p == NULL || b == NULL)
        return;
    b->held += sign * (int64_t)malloc_usable_size(p);
    if (b->held > b->peak)
        b->peak = b->held;
}

void em_budget_hold(void *p, bool adopt)
{
    budget_count(p, adopt ? 1 : -1);
}

/* ---- test hooks ------------------------------------------------------------- */

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

/* ---- the allocator ------------------------------------------------------------ */

void *em_malloc(size_t n)
{
    void *p;

    if (alloc_should_fail() || !budget_admits(n, 0))
        return NULL;
    p = malloc(n == 0 ? 1 : n);
    count(p, 1);
    budget_count(p, 1);
    return p;
}

void *em_calloc(size_t n, size_t size)
{
    void *p;

    if (alloc_should_fail() ||
        !budget_admits(size != 0 && n > SIZE_MAX / size ? SIZE_MAX / 2
                       : n * size, 0))
        return NULL;
    p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
    count(p, 1);
    budget_count(p, 1);
    return p;
}

void *em_realloc(void *p, size_t n)
{
    void *q;

    if (alloc_should_fail() ||
        !budget_admits(n, p != NULL && tls_budget != NULL
                              ? malloc_usable_size(p) : 0))
        return NULL;
    count(p, -1);
    budget_count(p, -1);
    q = realloc(p, n == 0 ? 1 : n);
    count(q != NULL ? q : p, 1);
    budget_count(q != NULL ? q : p, 1);
    return q;
}

void em_free(void *p)
{
    count(p, -1);
    budget_count(p, -1);
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
