/*
** fuzz/fuzz_perf.c: any bytes given to the `perf script` decoder yield
** EMBER_OK or an input error (EINVAL, ELIMIT) whose message starts with the
** origin, never a crash. On success the set must hang together: every
** sample names an existing profile and stack, every stack's locations and
** every location's lines and mapping exist, stacks stay within
** EM_PSET_MAX_DEPTH and the profiles' sample counts add up. A 1 ms window
** and an import label make the window and label paths run too.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless S's indexes all point inside S. */
static void check_set(const em_pset *s)
{
    uint64_t counted = 0;

    for (size_t i = 0; i < s->nsamples; i++) {
        const em_pset_sample_ent *e = &s->samples[i];
        if (e->profile >= s->nprofiles || e->stack >= s->nstacks)
            abort();
    }
    for (size_t i = 0; i < s->nstacks; i++) {
        const em_pset_stack_ent *st = &s->stacks[i];
        if (st->n > EM_PSET_MAX_DEPTH || st->off + st->n > s->npool)
            abort();
        for (size_t k = 0; k < st->n; k++)
            if (s->pool[st->off + k] >= s->nlocs)
                abort();
    }
    for (size_t i = 0; i < s->nlocs; i++) {
        const em_pset_loc *l = &s->locs[i];
        if (l->mapping > s->nmappings || l->first + l->nlines > s->nlines)
            abort();
        for (size_t k = 0; k < l->nlines; k++)
            if (s->lines[l->first + k].function >= s->nfunctions)
                abort();
    }
    for (size_t i = 0; i < s->nprofiles; i++)
        counted += s->profiles[i].nsamples;
    if (counted != s->nsamples)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const ember_label base[] = { { "tid", "fuzz" } };
    em_import_opts o = { .sz = sizeof o, .origin = "fuzz", .labels = base,
                         .nlabels = 1, .window_ms = 1 };
    em_pset s = { 0 };
    int rc = em_perf_decode((const char *)data, size, &o, &s);

    if (rc != EMBER_OK && rc != EMBER_EINVAL && rc != EMBER_ELIMIT)
        abort();
    if (rc != EMBER_OK && strncmp(em_errmsg(), "fuzz:", 5) != 0)
        abort();
    if (rc == EMBER_OK)
        check_set(&s);
    em_pset_free(&s);
    return 0;
}
