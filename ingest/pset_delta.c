/*
** ingest/pset_delta.c: cumulative profiles made deltas (issue 14), as
** Pyroscope's /ingest does with a "prev_profile": Go's alloc_*, mutex and
** block counters only grow while a process runs, so a profile minus the
** one sent before it is what happened in between.
**
** The two sets were decoded separately, so their indexes mean nothing to
** each other: a sample is matched by content, a key of bytes holding its
** profile's type and labels and, for each location of its stack (leaf
** first), the mapping's file and build id, the address, and each inline
** frame's function (name, system name, file, start line) and line. Every
** field is length-prefixed, so different contents never make one key.
** Keys are sorted and matched by binary search.
**
** Per stack: the current value (repeats summed) minus the previous one.
** A stack whose delta is 0 is dropped; so is one whose value went down
** (the counter was reset, the process restarted): Pyroscope's tree diff
** drops the part of a tree whose value fell the same way.
*/
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

/* One sample's key: LEN bytes at OFF of the key buffer, then P once the
** buffer stops moving. */
typedef struct key_ent {
    size_t off, len;
    const uint8_t *p;
    int64_t value;
    size_t idx;                 /* the sample's index in its set */
} key_ent;

typedef struct keys {
    em_buf buf;
    key_ent *ents;
    size_t n, cap;
} keys;

static void keys_free(keys *k)
{
    em_buf_free(&k->buf);
    em_free(k->ents);
}

static int put_str(em_buf *b, const char *s)
{
    uint32_t n = (uint32_t)(s != NULL ? strlen(s) : 0);

    if (em_buf_put(b, &n, sizeof n) != EMBER_OK ||
        (n > 0 && em_buf_put(b, s, n) != EMBER_OK))
        return EMBER_ENOMEM;
    return EMBER_OK;
}

static int put_u64(em_buf *b, uint64_t v)
{
    return em_buf_put(b, &v, sizeof v);
}

static int key_profile(em_buf *b, const em_pset_profile *p)
{
    int rc = put_str(b, p->type) | put_u64(b, p->nlabels);

    for (size_t i = 0; rc == EMBER_OK && i < p->nlabels; i++)
        rc = put_str(b, p->labels[i].name) | put_str(b, p->labels[i].value);
    return rc != EMBER_OK ? EMBER_ENOMEM : EMBER_OK;
}

static int key_location(em_buf *b, const em_pset *s, uint32_t li)
{
    const em_pset_loc *l = &s->locs[li];
    const ember_mapping *m = l->mapping > 0 ? &s->mappings[l->mapping - 1]
                                            : NULL;
    int rc = put_str(b, m != NULL ? m->file : "") |
             put_str(b, m != NULL ? m->build_id : "") |
             put_u64(b, l->address) | put_u64(b, l->nlines);

    for (size_t i = 0; rc == EMBER_OK && i < l->nlines; i++) {
        const em_pset_line *ln = &s->lines[l->first + i];
        const ember_function *f = &s->functions[ln->function];
        rc = put_str(b, f->name) | put_str(b, f->system_name) |
             put_str(b, f->file) | put_u64(b, (uint64_t)f->start_line) |
             put_u64(b, (uint64_t)ln->line);
    }
    return rc != EMBER_OK ? EMBER_ENOMEM : EMBER_OK;
}

/* Appends sample SI of S under its key to K. */
static int key_sample(keys *k, const em_pset *s, size_t si)
{
    const em_pset_sample_ent *e = &s->samples[si];
    const em_pset_stack_ent *st = &s->stacks[e->stack];
    size_t off = k->buf.len;
    key_ent *ents;
    int rc = key_profile(&k->buf, &s->profiles[e->profile]) |
             put_u64(&k->buf, st->n);

    for (uint32_t i = 0; rc == EMBER_OK && i < st->n; i++)
        rc = key_location(&k->buf, s, s->pool[st->off + i]);
    ents = rc == EMBER_OK ? em_grow(k->ents, &k->cap, k->n + 1, sizeof *ents)
                          : NULL;
    if (ents == NULL)
        return em_err(EMBER_ENOMEM, "delta: out of memory for sample keys");
    k->ents = ents;
    ents[k->n++] = (key_ent){ .off = off, .len = k->buf.len - off,
                              .value = e->value, .idx = si };
    return EMBER_OK;
}

static int key_cmp(const void *a, const void *b)
{
    const key_ent *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);

    if (c != 0)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* The sample type, the second field of TYPE, is one of CUM's N names. */
static bool type_cumulative(const char *type, const char *const *cum,
                            size_t n)
{
    const char *st = strchr(type, ':');
    size_t len;

    if (st == NULL)
        return false;
    len = strcspn(++st, ":");
    for (size_t i = 0; i < n; i++)
        if (strlen(cum[i]) == len && memcmp(st, cum[i], len) == 0)
            return true;
    return false;
}

/* K's keys of the samples of S whose profile is cumulative, sorted. */
static int keys_build(keys *k, const em_pset *s, const char *const *cum,
                      size_t ncum)
{
    int rc = EMBER_OK;

    for (size_t i = 0; rc == EMBER_OK && i < s->nsamples; i++)
        if (type_cumulative(s->profiles[s->samples[i].profile].type, cum,
                            ncum))
            rc = key_sample(k, s, i);
    if (rc != EMBER_OK)
        return rc;
    for (size_t i = 0; i < k->n; i++)
        k->ents[i].p = k->buf.p + k->ents[i].off;
    if (k->n > 1)
        qsort(k->ents, k->n, sizeof *k->ents, key_cmp);
    return EMBER_OK;
}

/* The previous value of the stack keyed by E: PREV's equal keys summed
** (they are adjacent). A sum past int64 saturates. */
static int64_t prev_value(const keys *prev, const key_ent *e)
{
    const key_ent *hit = prev->n > 0 ? bsearch(e, prev->ents, prev->n,
                                               sizeof *e, key_cmp)
                                     : NULL;
    int64_t sum = 0;

    if (hit == NULL)
        return 0;
    while (hit > prev->ents && key_cmp(hit - 1, e) == 0)
        hit--;
    for (; hit < prev->ents + prev->n && key_cmp(hit, e) == 0; hit++)
        sum = em_add_sat(sum, hit->value);
    return sum;
}

/* Sets each group of equal keys in CUR: its first sample holds the delta,
** the rest 0; DROP marks the samples to remove. */
static void deltas(em_pset *s, const keys *cur, const keys *prev, bool *drop)
{
    for (size_t i = 0, j; i < cur->n; i = j) {
        int64_t sum = 0, d;
        for (j = i; j < cur->n && key_cmp(&cur->ents[j], &cur->ents[i]) == 0;
             j++) {
            sum = em_add_sat(sum, cur->ents[j].value);
            drop[cur->ents[j].idx] = true;
        }
        if (__builtin_sub_overflow(sum, prev_value(prev, &cur->ents[i]), &d)
            || d <= 0)
            continue;
        s->samples[cur->ents[i].idx].value = d;
        drop[cur->ents[i].idx] = false;
    }
}

/* Removes the dropped samples and counts each profile's again. */
static void compact(em_pset *s, const bool *drop)
{
    size_t n = 0;

    for (size_t i = 0; i < s->nprofiles; i++)
        s->profiles[i].nsamples = 0, s->profiles[i].pos = 0,
        s->profiles[i].neg = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        em_pset_sample_ent e = s->samples[i];
        em_pset_profile *p = &s->profiles[e.profile];
        if (drop[i])
            continue;
        s->samples[n++] = e;
        p->nsamples++;
        if (e.value > 0)        /* kept deltas are positive */
            p->pos = em_add_sat(p->pos, e.value);
        else
            p->neg = em_add_sat(p->neg, e.value);
    }
    s->nsamples = n;
}

/* The cumulative profiles' types gain ":delta": their values now cover
** the time between the two profiles, and a query may sum them. */
static int retype(em_pset *s, const char *const *cum, size_t ncum)
{
    static const char sfx[] = ":delta";
    char tmp[1024];              /* a type longer than this is refused */

    for (size_t i = 0; i < s->nprofiles; i++) {
        const char *t = s->profiles[i].type;
        size_t n = strlen(t);
        int rc;
        if (!type_cumulative(t, cum, ncum) ||
            (n >= sizeof sfx - 1 && strcmp(t + n - (sizeof sfx - 1), sfx) == 0))
            continue;
        if (n + sizeof sfx > sizeof tmp)
            return em_err(EMBER_ELIMIT, "delta: type %s is too long to "
                          "gain %s", t, sfx);
        memcpy(tmp, t, n);
        memcpy(tmp + n, sfx, sizeof sfx);
        if ((rc = em_profile_type_check(tmp)) != EMBER_OK)
            return em_err_prefix(rc, "delta");
        if ((s->profiles[i].type = em_pset_strndup(s, tmp, strlen(tmp))) ==
            NULL)
            return EMBER_ENOMEM;
    }
    return EMBER_OK;
}

int em_pset_delta(em_pset *cur, const em_pset *prev, const char *const *cum,
                  size_t ncum)
{
    keys ck = { 0 }, pk = { 0 };
    bool *drop = em_calloc(cur->nsamples + 1, sizeof *drop);
    int rc = drop == NULL ? em_err(EMBER_ENOMEM, "delta: out of memory")
                          : keys_build(&pk, prev, cum, ncum);

    if (rc == EMBER_OK)
        rc = keys_build(&ck, cur, cum, ncum);
    if (rc == EMBER_OK) {
        deltas(cur, &ck, &pk, drop);
        compact(cur, drop);
        rc = retype(cur, cum, ncum);
    }
    keys_free(&ck);
    keys_free(&pk);
    em_free(drop);
    return rc;
}
