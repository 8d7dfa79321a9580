/*
** fuzz/fuzz_pprof.c: any bytes given to the pprof decoder (as gunzipped
** input) yield EMBER_OK or an input error (EINVAL, ELIMIT) whose message
** starts with the origin, never a crash. On success the set must hold
** together: every sample's profile and stack exist, every stack's locations,
** every location's mapping and functions, no stack or location past the
** limits, and every profile type passes the engine's check. No database.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/pset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless S's references all point inside S. */
static void check_set(const em_pset *s)
{
    for (size_t i = 0; i < s->nsamples; i++)
        if (s->samples[i].profile >= s->nprofiles ||
            s->samples[i].stack >= s->nstacks || s->samples[i].value == 0)
            abort();
    for (size_t i = 0; i < s->nstacks; i++) {
        if (s->stacks[i].n > EM_PSET_MAX_DEPTH ||
            s->stacks[i].off + s->stacks[i].n > s->npool)
            abort();
        for (size_t k = 0; k < s->stacks[i].n; k++)
            if (s->pool[s->stacks[i].off + k] >= s->nlocs)
                abort();
    }
    for (size_t i = 0; i < s->nlocs; i++) {
        const em_pset_loc *l = &s->locs[i];
        if (l->mapping > s->nmappings || l->nlines > EM_PSET_MAX_LINES ||
            l->first + l->nlines > s->nlines)
            abort();
        for (size_t k = 0; k < l->nlines; k++)
            if (s->lines[l->first + k].function >= s->nfunctions)
                abort();
    }
    for (size_t i = 0; i < s->nprofiles; i++)
        if (em_profile_type_check(s->profiles[i].type) != EMBER_OK ||
            s->profiles[i].nlabels > EM_PSET_MAX_LABELS)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_import_opts o = { .sz = sizeof o, .origin = "fuzz" };
    em_pset s = { 0 };
    int rc = em_pprof_decode(data, size, &o, &s);

    if (rc != EMBER_OK && rc != EMBER_EINVAL && rc != EMBER_ELIMIT)
        abort();
    if (rc != EMBER_OK && strncmp(em_errmsg(), "fuzz: ", 6) != 0)
        abort();
    if (rc == EMBER_OK)
        check_set(&s);
    em_pset_free(&s);
    return 0;
}
