/*
** fuzz/fuzz_collapsed.c: any bytes given to the collapsed parser yield
** EMBER_OK or an input error whose message starts with the origin, never a
** crash; every frame handed out is a non-empty slice of the input holding no
** ';', NUL or '\n', and every byte of it is read (so the sanitizers see any
** slice that strays). The same input is then folded (ingest/fold.c): the
** fold must agree with the plain parse on the outcome and the line count.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

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
    em_fold f = { 0 };
    const char *buf = (const char *)data;
    int rc, rc2;

    rc = em_collapsed_parse(buf, size, "fuzz", touch, &s);
    if (rc != EMBER_OK && rc != EMBER_EINVAL && rc != EMBER_ELIMIT)
        abort();
    if (rc != EMBER_OK && strncmp(em_errmsg(), "fuzz:", 5) != 0)
        abort();
    rc2 = em_collapsed_parse(buf, size, "fuzz", em_fold_add, &f);
    if (rc2 != rc || (rc == EMBER_OK && f.lines != s.lines) ||
        f.nstacks > f.lines || (f.lines > 0 && f.nframes == 0))
        abort();
    em_fold_free(&f);
    sink = s.sum;
    return 0;
}
