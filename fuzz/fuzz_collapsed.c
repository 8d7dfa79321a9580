/*
** fuzz/fuzz_collapsed.c: any bytes given to the collapsed parser yield
** EMBER_OK or an input error whose message starts with the origin, never a
** crash; every frame handed out is a non-empty slice of the input holding no
** ';', NUL or '\n', and every byte of it is read (so the sanitizers see any
** slice that strays). The same input is then decoded into a profile set
** by the decoder `ember import` ships (em_collapsed_decode): it fails
** whenever the plain parse fails, succeeds whenever the parse does unless
** a sum leaves int64 (or memory runs out), and then holds at most one
** sample per stack line in one profile.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/pset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
    uintptr_t lo, hi;           /* the input's address range */
    uint64_t lines;             /* stack lines the callback got */
    uint64_t sum;               /* of every frame byte, so none is skipped */
} seen;

static volatile uint64_t sink;  /* keeps the byte reads from being elided */

/* Checks one frame's bounds and bytes; aborts on a broken invariant. */
static void touch_frame(seen *s, const em_collapsed_frame *f)
{
    uintptr_t p = (uintptr_t)f->p;

    if (f->len == 0 || p < s->lo || p > s->hi || f->len > s->hi - p)
        abort();
    for (size_t k = 0; k < f->len; k++) {
        unsigned char b = (unsigned char)f->p[k];
        if (b == ';' || b == '\0' || b == '\n')
            abort();
        s->sum += b;
    }
}

static int touch(void *ctx, const em_collapsed_frame *frames, size_t n,
                 int64_t value)
{
    seen *s = ctx;

    if (n == 0 || n > EM_COLLAPSED_MAX_FRAMES)
        abort();
    for (size_t i = 0; i < n; i++)
        touch_frame(s, &frames[i]);
    s->sum += (uint64_t)value;
    s->lines++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    seen s = { (uintptr_t)data, (uintptr_t)data + size, 0, 0 };
    em_import_opts o = { .sz = sizeof o, .origin = "fuzz" };
    em_pset set = { 0 };
    const char *buf = (const char *)data;
    int rc, rc2;

    rc = em_collapsed_parse(buf, size, "fuzz", touch, &s);
    if (rc != EMBER_OK && rc != EMBER_EINVAL && rc != EMBER_ELIMIT)
        abort();
    if (rc != EMBER_OK && strncmp(em_errmsg(), "fuzz:", 5) != 0)
        abort();
    rc2 = em_collapsed_decode(buf, size, &o, &set);
    /* the decoder also refuses sums past int64 (ELIMIT), perhaps on a line
    ** before the parse's error, and memory may run out; otherwise it
    ** agrees with the parse */
    if ((rc2 == EMBER_OK) != (rc == EMBER_OK) && rc2 != EMBER_ELIMIT &&
        rc2 != EMBER_ENOMEM)
        abort();
    if (rc2 == EMBER_OK && (set.nprofiles > 1 || set.nsamples > s.lines))
        abort();
    em_pset_free(&set);
    sink = s.sum;
    return 0;
}
