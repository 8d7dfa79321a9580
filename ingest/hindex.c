/*
** ingest/hindex.c: the open-addressing index every decoder keeps over its
** own arrays (ingest/pset.h, em_hindex): linear probing, at most half full,
** a power of two of slots, each holding its entry's full hash so that a
** probe compares entries only on a hash match and growing never rehashes
** content.
*/
#include "engine/engine.h"
#include "ingest/pset.h"

#define HINDEX_INITIAL 64

int em_hindex_reserve(em_hindex *ix, size_t count)
{
    size_t nslots = ix->slots == NULL ? HINDEX_INITIAL : (ix->mask + 1) * 2;
    struct em_hslot *ns;

    if (ix->slots != NULL && (count + 1) * 2 <= ix->mask + 1)
        return EMBER_OK;
    ns = em_calloc(nslots, sizeof *ns);
    if (ns == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for an index of %zu "
                      "slots", nslots);
    for (size_t i = 0; ix->slots != NULL && i <= ix->mask; i++) {
        size_t j = (size_t)ix->slots[i].hash & (nslots - 1);
        if (ix->slots[i].idx1 == 0)
            continue;
        while (ns[j].idx1 != 0)
            j = (j + 1) & (nslots - 1);
        ns[j] = ix->slots[i];
    }
    em_free(ix->slots);
    ix->slots = ns;
    ix->mask = nslots - 1;
    return EMBER_OK;
}

void em_hindex_free(em_hindex *ix)
{
    em_free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}
