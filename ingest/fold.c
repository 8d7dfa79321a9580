/*
** ingest/fold.c: the fold (ingest/ingest_int.h), which deduplicates parsed
** stacks in memory: frame name -> frame index, run of frame indexes -> stack
** index, summing the values of identical stacks.
**
** Tables are open addressing with linear probing, kept at most half full,
** their sizes powers of two. A slot stores the full hash, so a probe
** compares entries only on a hash match and growing never rehashes bytes.
** Indexes are uint32 (as the engine's ids): a fold refuses to hold more
** than UINT32_MAX - 1 frames or stacks. All arrays grow by doubling.
*/
#include "engine/engine.h"
#include "ingest/ingest_int.h"

#define FOLD_MAX_ENTRIES ((size_t)UINT32_MAX - 1)

/* P grown to hold NEED entries of SIZE bytes (em_grow), or NULL with the
** message set and P still valid. */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    void *np = em_grow(p, cap, need, size);

    if (np == NULL)
        em_err(EMBER_ENOMEM, "out of memory folding stacks (%zu entries)",
               need);
    return np;
}

/* Makes room in T for one more entry (COUNT now), refusing past the
** uint32 index range. */
static int table_reserve(em_hindex *t, size_t count)
{
    if (count >= FOLD_MAX_ENTRIES)
        return em_err(EMBER_ELIMIT, "more than %zu distinct frames or "
                      "stacks in one profile", FOLD_MAX_ENTRIES);
    return em_hindex_reserve(t, count);
}

/* Appends a new distinct frame and points slot S at it. */
static int frame_new(em_fold *f, struct em_hslot *s,
                     const em_collapsed_frame *fr, uint64_t h, uint32_t *idx)
{
    if (f->nframes == f->frames_cap) {
        em_fold_frame *np = grow(f->frames, &f->frames_cap, f->nframes + 1,
                                 sizeof *np);
        if (np == NULL)
            return EMBER_ENOMEM;
        f->frames = np;
    }
    f->frames[f->nframes] = (em_fold_frame){ fr->p, fr->len, h };
    if (fr->len > f->max_name)
        f->max_name = fr->len;
    *idx = (uint32_t)f->nframes++;
    s->hash = h;
    s->idx1 = *idx + 1;
    return EMBER_OK;
}

/* Sets *IDX to the index of frame name FR, adding it when new. */
static int frame_index(em_fold *f, const em_collapsed_frame *fr,
                       uint32_t *idx)
{
    uint64_t h = em_hash64(fr->p, fr->len, 0);
    em_hindex *t = &f->frame_index;
    struct em_hslot *s;
    int rc;

    if ((rc = table_reserve(t, f->nframes)) != EMBER_OK)
        return rc;
    for (size_t i = (size_t)h & t->mask; (s = &t->slots[i])->idx1 != 0;
         i = (i + 1) & t->mask) {
        const em_fold_frame *e = &f->frames[s->idx1 - 1];
        if (s->hash == h && e->len == fr->len &&
            memcmp(e->p, fr->p, fr->len) == 0) {
            *idx = s->idx1 - 1;
            return EMBER_OK;
        }
    }
    return frame_new(f, s, fr, h, idx);
}

/* Appends the run at pool[base..base+n) as a new distinct stack. */
static int stack_new(em_fold *f, struct em_hslot *s, size_t base, size_t n,
                     int64_t value, uint64_t h)
{
    if (f->nstacks == f->stacks_cap) {
        em_fold_stack *np = grow(f->stacks, &f->stacks_cap, f->nstacks + 1,
                                 sizeof *np);
        if (np == NULL)
            return EMBER_ENOMEM;
        f->stacks = np;
    }
    f->stacks[f->nstacks++] = (em_fold_stack){ base, n, value, h };
    s->hash = h;
    s->idx1 = (uint32_t)f->nstacks;
    f->npool = base + n;            /* keep the run: it is the new stack's */
    if (n > f->max_depth)
        f->max_depth = n;
    return EMBER_OK;
}

/* Sums VALUE into the stack whose run was just written at pool[base], or
** makes it a new stack. A duplicate run is dropped (npool stays BASE). */
static int stack_add(em_fold *f, size_t base, size_t n, int64_t value)
{
    const uint32_t *run = f->pool + base;
    uint64_t h = em_hash64(run, n * sizeof *run, 0);
    em_hindex *t = &f->stack_index;
    struct em_hslot *s;
    int rc;

    if ((rc = table_reserve(t, f->nstacks)) != EMBER_OK)
        return rc;
    for (size_t i = (size_t)h & t->mask; (s = &t->slots[i])->idx1 != 0;
         i = (i + 1) & t->mask) {
        em_fold_stack *e = &f->stacks[s->idx1 - 1];
        if (s->hash == h && e->n == n &&
            memcmp(f->pool + e->off, run, n * sizeof *run) == 0) {
            e->value = em_add_wrap(e->value, value);
            return EMBER_OK;
        }
    }
    return stack_new(f, s, base, n, value, h);
}

int em_fold_add(void *ctx, const em_collapsed_frame *frames, size_t nframes,
                int64_t value)
{
    em_fold *f = ctx;
    size_t base = f->npool;
    int rc = EMBER_OK;

    if (base + nframes > f->pool_cap) {
        uint32_t *np = grow(f->pool, &f->pool_cap, base + nframes,
                            sizeof *np);
        if (np == NULL)
            return EMBER_ENOMEM;
        f->pool = np;
    }
    /* The run is written past npool; stack_add keeps it only if new. */
    for (size_t i = 0; rc == EMBER_OK && i < nframes; i++)
        rc = frame_index(f, &frames[i], &f->pool[base + i]);
    if (rc == EMBER_OK)
        rc = stack_add(f, base, nframes, value);
    if (rc == EMBER_OK) {
        f->lines++;
        f->total = em_add_wrap(f->total, value);
    }
    return rc;
}

void em_fold_free(em_fold *f)
{
    em_free(f->frames);
    em_hindex_free(&f->frame_index);
    em_free(f->stacks);
    em_hindex_free(&f->stack_index);
    em_free(f->pool);
    memset(f, 0, sizeof *f);
}
