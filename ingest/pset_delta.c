/*
** ingest/pset_delta.c: cumulative profiles made deltas (issue 14), as
** Pyroscope's /ingest does with a "prev_profile": Go's alloc_*, mutex and
** block counters only grow while a process runs, so a profile minus the
** one sent before it is what happened in between.
**
** The two sets were decoded separately, so their indexes mean nothing to
** each other: things are matched by content, in three rounds that each
** give equal content in either set one canonical id. Locations first, by
** a key of bytes holding the mapping's file and build id, the address, and
** each inline frame's function (name, system name, file, start line) and
** line; then stacks, by their locations' canonical ids (leaf first); then
** profiles, by type and labels. Every field is length-prefixed, so
** different contents never make one key; keys are sorted to find equals.
** A sample is then its profile's and stack's ids in one integer, and the
** previous value is found by binary search. A location's strings are thus
** held once, not once per sample that reaches it.
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

/* A key: LEN bytes at OFF of the key buffer (P once the buffer stops
** moving), of entry IDX of set SIDE (0: the current one, 1: prev). */
typedef struct key_ent {
    size_t off, len;
    const uint8_t *p;
    uint32_t idx;
    uint32_t side;
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

/* The keys of each round; each returns nonzero when out of memory. The
** fields go in the order written (|| orders them). */
typedef int (*key_fn)(em_buf *b, const em_pset *s, size_t i,
                      const uint32_t *lower);

static int key_loc(em_buf *b, const em_pset *s, size_t i,
                   const uint32_t *lower)
{
    const em_pset_loc *l = &s->locs[i];
    const ember_mapping *m = l->mapping > 0 ? &s->mappings[l->mapping - 1]
                                            : NULL;

    (void)lower;
    if (put_str(b, m != NULL ? m->file : "") ||
        put_str(b, m != NULL ? m->build_id : "") ||
        put_u64(b, l->address) || put_u64(b, l->nlines))
        return EMBER_ENOMEM;
    for (size_t j = 0; j < l->nlines; j++) {
        const em_pset_line *ln = &s->lines[l->first + j];
        const ember_function *f = &s->functions[ln->function];
        if (put_str(b, f->name) || put_str(b, f->system_name) ||
            put_str(b, f->file) || put_u64(b, (uint64_t)f->start_line) ||
            put_u64(b, (uint64_t)ln->line))
            return EMBER_ENOMEM;
    }
    return EMBER_OK;
}

/* A stack: its locations' canonical ids (LOWER), leaf first. */
static int key_stack(em_buf *b, const em_pset *s, size_t i,
                     const uint32_t *lower)
{
    const em_pset_stack_ent *st = &s->stacks[i];
    int rc = em_buf_reserve(b, (size_t)st->n * 4 + 4);

    for (uint32_t d = 0; rc == EMBER_OK && d < st->n; d++)
        rc = em_buf_put(b, &lower[s->pool[st->off + d]], 4);
    return rc;
}

static int key_prof(em_buf *b, const em_pset *s, size_t i,
                    const uint32_t *lower)
{
    const em_pset_profile *p = &s->profiles[i];

    (void)lower;
    if (put_str(b, p->type) || put_u64(b, p->nlabels))
        return EMBER_ENOMEM;
    for (size_t j = 0; j < p->nlabels; j++)
        if (put_str(b, p->labels[j].name) || put_str(b, p->labels[j].value))
            return EMBER_ENOMEM;
    return EMBER_OK;
}

static int key_cmp(const void *a, const void *b)
{
    const key_ent *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n > 0 ? memcmp(x->p, y->p, n) : 0;

    if (c != 0)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Appends the keys of SET's N entries (SIDE) to K. */
static int keys_add(keys *k, const em_pset *set, size_t n, uint32_t side,
                    key_fn fn, const uint32_t *lower)
{
    for (size_t i = 0; i < n; i++) {
        size_t off = k->buf.len;
        key_ent *ents = fn(&k->buf, set, i, lower) == EMBER_OK
            ? em_grow(k->ents, &k->cap, k->n + 1, sizeof *ents) : NULL;
        if (ents == NULL)
            return em_err(EMBER_ENOMEM, "delta: out of memory for keys");
        k->ents = ents;
        ents[k->n++] = (key_ent){ .off = off, .len = k->buf.len - off,
                                  .idx = (uint32_t)i, .side = side };
    }
    return EMBER_OK;
}

/* Gives the N[0] entries of SET[0] and N[1] of SET[1] ids into OUT[0] and
** OUT[1], equal where their keys (by FN, over LOWER ids) are. */
static int canon(const em_pset *const set[2], const size_t n[2], key_fn fn,
                 uint32_t *const lower[2], uint32_t *const out[2])
{
    keys k = { 0 };
    uint32_t id = 0;
    int rc = keys_add(&k, set[0], n[0], 0, fn, lower[0]);

    if (rc == EMBER_OK)
        rc = keys_add(&k, set[1], n[1], 1, fn, lower[1]);
    if (rc == EMBER_OK) {
        for (size_t i = 0; i < k.n; i++)
            k.ents[i].p = k.buf.p + k.ents[i].off;
        if (k.n > 1)
            qsort(k.ents, k.n, sizeof *k.ents, key_cmp);
        for (size_t i = 0; i < k.n; i++) {
            id += i > 0 && key_cmp(&k.ents[i - 1], &k.ents[i]) != 0;
            out[k.ents[i].side][k.ents[i].idx] = id;
        }
    }
    keys_free(&k);
    return rc;
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

/* One sample of a cumulative profile: its profile's and stack's
** canonical ids in one KEY. */
typedef struct sval {
    uint64_t key;
    int64_t value;
    size_t idx;
} sval;

static int sval_cmp(const void *a, const void *b)
{
    const sval *x = a, *y = b;

    return x->key < y->key ? -1 : x->key > y->key;
}

/* The samples of S's cumulative profiles, keyed by the ids PROF and
** STACK, sorted, into *OUT (*N of them). */
static int svals(const em_pset *s, const uint32_t *prof,
                 const uint32_t *stack, const char *const *cum, size_t ncum,
                 sval **out, size_t *n)
{
    *n = 0;
    if ((*out = em_malloc((s->nsamples + 1) * sizeof **out)) == NULL)
        return em_err(EMBER_ENOMEM, "delta: out of memory for %zu samples",
                      s->nsamples);
    for (size_t i = 0; i < s->nsamples; i++) {
        const em_pset_sample_ent *e = &s->samples[i];
        if (type_cumulative(s->profiles[e->profile].type, cum, ncum))
            (*out)[(*n)++] = (sval){ (uint64_t)prof[e->profile] << 32 |
                                     stack[e->stack], e->value, i };
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, sval_cmp);
    return EMBER_OK;
}

/* The previous value of KEY: PREV's equal keys summed (they are
** adjacent). A sum past int64 saturates. */
static int64_t prev_value(const sval *prev, size_t n, uint64_t key)
{
    const sval k = { .key = key };
    const sval *hit = n > 0 ? bsearch(&k, prev, n, sizeof k, sval_cmp)
                            : NULL;
    int64_t sum = 0;

    if (hit == NULL)
        return 0;
    while (hit > prev && hit[-1].key == key)
        hit--;
    for (; hit < prev + n && hit->key == key; hit++)
        sum = em_add_sat(sum, hit->value);
    return sum;
}

/* Sets each group of equal keys in CUR: its first sample holds the delta;
** DROP marks the samples to remove (the rest, or all when the delta is 0
** or less). */
static void deltas(em_pset *s, const sval *cur, size_t nc, const sval *prev,
                   size_t np, bool *drop)
{
    for (size_t i = 0, j; i < nc; i = j) {
        int64_t sum = 0, d;
        for (j = i; j < nc && cur[j].key == cur[i].key; j++) {
            sum = em_add_sat(sum, cur[j].value);
            drop[cur[j].idx] = true;
        }
        if (__builtin_sub_overflow(sum, prev_value(prev, np, cur[i].key), &d)
            || d <= 0)
            continue;
        s->samples[cur[i].idx].value = d;
        drop[cur[i].idx] = false;
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

/* The three rounds of canon: IDS[0..1] locations, [2..3] stacks, [4..5]
** profiles (cur, prev). */
static int canon_all(const em_pset *cur, const em_pset *prev, uint32_t *ids[6])
{
    const em_pset *const set[2] = { cur, prev };
    const size_t nl[2] = { cur->nlocs, prev->nlocs },
                 ns[2] = { cur->nstacks, prev->nstacks },
                 np[2] = { cur->nprofiles, prev->nprofiles };
    uint32_t *const none[2] = { NULL, NULL };
    int rc = EMBER_OK;

    for (size_t i = 0; i < 6 && rc == EMBER_OK; i++) {
        size_t n = (i < 2 ? nl : i < 4 ? ns : np)[i % 2];
        if ((ids[i] = em_calloc(n + 1, sizeof *ids[i])) == NULL)
            rc = em_err(EMBER_ENOMEM, "delta: out of memory for %zu ids", n);
    }
    if (rc == EMBER_OK)
        rc = canon(set, nl, key_loc, none, (uint32_t *const[2]){ ids[0],
                                                                 ids[1] });
    if (rc == EMBER_OK)
        rc = canon(set, ns, key_stack, (uint32_t *const[2]){ ids[0], ids[1] },
                   (uint32_t *const[2]){ ids[2], ids[3] });
    if (rc == EMBER_OK)
        rc = canon(set, np, key_prof, none,
                   (uint32_t *const[2]){ ids[4], ids[5] });
    return rc;
}

int em_pset_delta(em_pset *cur, const em_pset *prev, const char *const *cum,
                  size_t ncum)
{
    uint32_t *ids[6] = { NULL };
    sval *cv = NULL, *pv = NULL;
    size_t nc = 0, np = 0;
    bool *drop = em_calloc(cur->nsamples + 1, sizeof *drop);
    int rc = drop == NULL ? em_err(EMBER_ENOMEM, "delta: out of memory")
                          : canon_all(cur, prev, ids);

    if (rc == EMBER_OK)
        rc = svals(cur, ids[4], ids[2], cum, ncum, &cv, &nc);
    if (rc == EMBER_OK)
        rc = svals(prev, ids[5], ids[3], cum, ncum, &pv, &np);
    if (rc == EMBER_OK) {
        deltas(cur, cv, nc, pv, np, drop);
        compact(cur, drop);
        rc = retype(cur, cum, ncum);
    }
    for (size_t i = 0; i < 6; i++)
        em_free(ids[i]);
    em_free(cv);
    em_free(pv);
    em_free(drop);
    return rc;
}
