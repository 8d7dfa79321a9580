/*
** ingest/pset.c: the profile set (ingest/pset.h). Tables are arrays that
** grow by doubling, each with an index (ingest/hindex.h: the full hash
** kept in the slot, so growing never rehashes content). Strings and label
** arrays live in an arena of blocks that is freed at once, so a decoder's
** thousands of small copies cost no frees.
*/
#include <inttypes.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "ingest/ingest_int.h"
#include "ingest/pset.h"

#define BLOCK_MIN 4032              /* arena block payload: a page with
                                    ** its header, small files are many */
#define PSET_MAX_ENTRIES ((size_t)UINT32_MAX - 1)
#define PSET_MAX_VALUE 400          /* the engine's longest label value */

struct em_pset_block {
    em_pset_block *next;
    size_t used, cap;
    max_align_t data[];
};

/* ---- arena ---------------------------------------------------------------- */

/* N bytes from S's arena, aligned for any type; NULL with the message set. */
static void *arena_alloc(em_pset *s, size_t n)
{
    em_pset_block *b = s->blocks;
    size_t need = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);

    if (b == NULL || b->cap - b->used < need) {
        size_t cap = need > BLOCK_MIN ? need : BLOCK_MIN;
        b = em_malloc(sizeof *b + cap);
        if (b == NULL) {
            em_err(EMBER_ENOMEM, "out of memory for %zu bytes of symbols", n);
            return NULL;
        }
        b->used = 0;
        b->cap = cap;
        b->next = s->blocks;
        s->blocks = b;
    }
    b->used += need;
    return (char *)b->data + b->used - need;
}

char *em_pset_strndup(em_pset *s, const char *p, size_t len)
{
    char *c = arena_alloc(s, len + 1);

    if (c != NULL) {
        if (len > 0)
            memcpy(c, p, len);
        c[len] = '\0';
    }
    return c;
}

static const char *str_or_empty(const char *p)
{
    return p != NULL ? p : "";
}

/* ---- growth and indexes ---------------------------------------------------- */

/* Grows *P (an array of SIZE-byte entries, capacity *CAP) to hold COUNT+1.
** EMBER_OK, ELIMIT past the uint32 index range, or ENOMEM. */
static int array_reserve(void **p, size_t *cap, size_t count, size_t size,
                         const char *what)
{
    void *np;

    if (count >= PSET_MAX_ENTRIES)
        return em_err(EMBER_ELIMIT, "more than %zu %s in one input",
                      PSET_MAX_ENTRIES, what);
    if ((np = em_grow(*p, cap, count + 1, size)) == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for %zu %s", count + 1,
                      what);
    *p = np;
    return EMBER_OK;
}

#define RESERVE(s, arr, n, cap, what) \
    array_reserve((void **)&(s)->arr, &(s)->cap, (s)->n, sizeof *(s)->arr, what)

/* Adds are refused once the set was trimmed, as its indexes are gone. */
static int index_ready(const em_pset *s)
{
    if (s->trimmed)
        return em_err(EMBER_EINVAL, "profile set: added to after "
                      "em_pset_trim");
    return EMBER_OK;
}

static uint64_t hash_str(const char *p, uint64_t h)
{
    return em_hash64(p, strlen(p) + 1, h);
}

/* Folds V into H: one 128-bit multiply, as em_hash64 does per word, without
** its length and avalanche steps. These hashes never leave memory, and
** numbers are most of what locations hash. */
static uint64_t hash_u64(uint64_t v, uint64_t h)
{
    __uint128_t r = (__uint128_t)(h ^ v) * 0x9e3779b97f4a7c15ull;

    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* ---- mappings and functions ------------------------------------------------ */

static uint64_t mapping_hash(const ember_mapping *m)
{
    uint64_t h = hash_u64(m->start, 0x6d6170);

    h = hash_u64(m->limit, h);
    h = hash_u64(m->offset, h);
    h = hash_str(str_or_empty(m->file), h);
    return hash_str(str_or_empty(m->build_id), h);
}

typedef struct mapping_key {
    const em_pset *s;
    const ember_mapping *m;
} mapping_key;

static bool mapping_eq(const mapping_key *k, uint32_t idx)
{
    const ember_mapping *a = &k->s->mappings[idx], *b = k->m;

    return a->start == b->start && a->limit == b->limit &&
           a->offset == b->offset &&
           strcmp(a->file, str_or_empty(b->file)) == 0 &&
           strcmp(a->build_id, str_or_empty(b->build_id)) == 0;
}

#define EM_HT_NAME mapping_ix
#define EM_HT_KEY const mapping_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && mapping_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "profile set: mapping index"
#include "ingest/hindex.h"

int em_pset_mapping(em_pset *s, const ember_mapping *m, uint32_t *idx)
{
    mapping_key k = { s, m };
    uint64_t h = mapping_hash(m);
    struct em_hslot *slot;
    ember_mapping *e;
    bool found;
    int rc = index_ready(s);

    if (rc != EMBER_OK)
        return rc;
    if ((slot = mapping_ix_insert(&s->mapping_index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found) {
        *idx = slot->idx1 - 1;
        return EMBER_OK;
    }
    if ((rc = RESERVE(s, mappings, nmappings, cap_mappings, "mappings")) != 0)
        return rc;
    e = &s->mappings[s->nmappings];
    *e = *m;
    e->file = em_pset_strndup(s, str_or_empty(m->file),
                              strlen(str_or_empty(m->file)));
    e->build_id = em_pset_strndup(s, str_or_empty(m->build_id),
                                  strlen(str_or_empty(m->build_id)));
    if (e->file == NULL || e->build_id == NULL)
        return EMBER_ENOMEM;
    *idx = (uint32_t)s->nmappings++;
    *slot = (struct em_hslot){ h, *idx + 1 };
    return EMBER_OK;
}

static uint64_t function_hash(const ember_function *f)
{
    uint64_t h = hash_str(str_or_empty(f->name), 0x66756e63);

    h = hash_str(str_or_empty(f->system_name), h);
    h = hash_str(str_or_empty(f->file), h);
    return hash_u64((uint64_t)f->start_line, h);
}

typedef struct function_key {
    const em_pset *s;
    const ember_function *f;
} function_key;

static bool function_eq(const function_key *k, uint32_t idx)
{
    const ember_function *a = &k->s->functions[idx], *b = k->f;

    return a->start_line == b->start_line &&
           strcmp(a->name, str_or_empty(b->name)) == 0 &&
           strcmp(a->system_name, str_or_empty(b->system_name)) == 0 &&
           strcmp(a->file, str_or_empty(b->file)) == 0;
}

#define EM_HT_NAME function_ix
#define EM_HT_KEY const function_key *
#define EM_HT_MATCH(e, h, k) \
    ((e)->hash == (h) && function_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "profile set: function index"
#include "ingest/hindex.h"

/* Copies F's strings into the arena; the system name and file are shared
** with the name when equal, as they often are. */
static int function_copy(em_pset *s, const ember_function *f, ember_function *e)
{
    const char *name = str_or_empty(f->name);
    const char *sys = str_or_empty(f->system_name);
    const char *file = str_or_empty(f->file);

    e->start_line = f->start_line;
    e->name = em_pset_strndup(s, name, strlen(name));
    if (e->name == NULL)
        return EMBER_ENOMEM;
    e->system_name = strcmp(sys, name) == 0 ? e->name
                                            : em_pset_strndup(s, sys, strlen(sys));
    e->file = *file == '\0' ? "" : em_pset_strndup(s, file, strlen(file));
    return e->system_name != NULL && e->file != NULL ? EMBER_OK : EMBER_ENOMEM;
}

int em_pset_function(em_pset *s, const ember_function *f, uint32_t *idx)
{
    return em_pset_function_hashed(s, f, function_hash(f), idx);
}

int em_pset_function_hashed(em_pset *s, const ember_function *f, uint64_t h,
                            uint32_t *idx)
{
    function_key k = { s, f };
    struct em_hslot *slot;
    bool found;
    int rc = index_ready(s);

    if (rc != EMBER_OK)
        return rc;
    if ((slot = function_ix_insert(&s->function_index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found) {
        *idx = slot->idx1 - 1;
        return EMBER_OK;
    }
    if ((rc = RESERVE(s, functions, nfunctions, cap_functions,
                      "functions")) != 0)
        return rc;
    if ((rc = function_copy(s, f, &s->functions[s->nfunctions])) != 0)
        return rc;
    *idx = (uint32_t)s->nfunctions++;
    *slot = (struct em_hslot){ h, *idx + 1 };
    return EMBER_OK;
}

/* ---- locations and stacks -------------------------------------------------- */

typedef struct loc_key {
    const em_pset *s;
    uint32_t mapping;
    uint64_t address;
    const em_pset_line *lines;
    size_t n;
} loc_key;

static uint64_t location_hash(const loc_key *k)
{
    uint64_t h = hash_u64(k->mapping, 0x6c6f63);

    h = hash_u64(k->address, h);
    for (size_t i = 0; i < k->n; i++) {
        h = hash_u64(k->lines[i].function, h);
        h = hash_u64((uint64_t)k->lines[i].line, h);
    }
    return h;
}

static bool location_eq(const loc_key *b, uint32_t idx)
{
    const em_pset *s = b->s;
    const em_pset_loc *a = &s->locs[idx];

    if (a->mapping != b->mapping || a->address != b->address ||
        a->nlines != b->n)
        return false;
    for (size_t i = 0; i < b->n; i++)
        if (s->lines[a->first + i].function != b->lines[i].function ||
            s->lines[a->first + i].line != b->lines[i].line)
            return false;
    return true;
}

#define EM_HT_NAME loc_ix
#define EM_HT_KEY const loc_key *
#define EM_HT_MATCH(e, h, k) \
    ((e)->hash == (h) && location_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "profile set: location index"
#include "ingest/hindex.h"

/* Checks that what a location points at exists in S. */
static int location_check(const em_pset *s, const loc_key *k)
{
    if (k->n > EM_PSET_MAX_LINES)
        return em_err(EMBER_ELIMIT, "a location with %zu inline frames "
                      "(at most %u)", k->n, EM_PSET_MAX_LINES);
    if (k->mapping > s->nmappings)
        return em_err(EMBER_EINVAL, "location: mapping %u does not exist",
                      k->mapping);
    for (size_t i = 0; i < k->n; i++)
        if (k->lines[i].function >= s->nfunctions)
            return em_err(EMBER_EINVAL, "location: function %u does not "
                          "exist", k->lines[i].function);
    return EMBER_OK;
}

/* Appends the lines of a new location at the end of S->lines. */
static int lines_append(em_pset *s, const em_pset_line *lines, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = RESERVE(s, lines, nlines, cap_lines, "inline frames");
        if (rc != EMBER_OK)
            return rc;
        s->lines[s->nlines++] = lines[i];
    }
    return EMBER_OK;
}

int em_pset_location(em_pset *s, uint32_t mapping, uint64_t address,
                     const em_pset_line *lines, size_t n, uint32_t *idx)
{
    loc_key k = { s, mapping, address, lines, n };
    uint64_t h;
    struct em_hslot *slot;
    bool found;
    int rc = location_check(s, &k);

    if (rc == EMBER_OK)
        rc = index_ready(s);
    if (rc != EMBER_OK)
        return rc;
    h = location_hash(&k);
    if ((slot = loc_ix_insert(&s->loc_index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found) {
        *idx = slot->idx1 - 1;
        return EMBER_OK;
    }
    if ((rc = RESERVE(s, locs, nlocs, cap_locs, "locations")) != 0)
        return rc;
    s->locs[s->nlocs] = (em_pset_loc){ mapping, address, s->nlines, n, h };
    if ((rc = lines_append(s, lines, n)) != EMBER_OK)
        return rc;
    *idx = (uint32_t)s->nlocs++;
    *slot = (struct em_hslot){ h, *idx + 1 };
    return EMBER_OK;
}

typedef struct stack_key {
    const em_pset *s;
    const uint32_t *locs;
    size_t n;
} stack_key;

static bool stack_eq(const stack_key *b, uint32_t idx)
{
    const em_pset_stack_ent *a = &b->s->stacks[idx];

    return a->n == b->n &&
           (b->n == 0 || memcmp(b->s->pool + a->off, b->locs,
                                b->n * sizeof *b->locs) == 0);
}

#define EM_HT_NAME stack_ix
#define EM_HT_KEY const stack_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && stack_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "profile set: stack index"
#include "ingest/hindex.h"

/* Appends N location indexes to the pool. */
static int pool_append(em_pset *s, const uint32_t *locs, size_t n)
{
    uint32_t *np;

    if (s->npool + n > s->cap_pool) {   /* a pool still NULL may stay so */
        np = em_grow(s->pool, &s->cap_pool, s->npool + n, sizeof *np);
        if (np == NULL)
            return em_err(EMBER_ENOMEM, "out of memory for %zu stack "
                          "frames", s->npool + n);
        s->pool = np;
    }
    if (n > 0)
        memcpy(s->pool + s->npool, locs, n * sizeof *locs);
    s->npool += n;
    return EMBER_OK;
}

int em_pset_stack(em_pset *s, const uint32_t *locs, size_t n, uint32_t *idx)
{
    stack_key k = { s, locs, n };
    uint64_t h;
    struct em_hslot *slot;
    bool found;
    int rc;

    if (n > EM_PSET_MAX_DEPTH)
        return em_err(EMBER_ELIMIT, "a stack of %zu frames (at most %u)", n,
                      EM_PSET_MAX_DEPTH);
    for (size_t i = 0; i < n; i++)
        if (locs[i] >= s->nlocs)
            return em_err(EMBER_EINVAL, "stack: location %u does not exist",
                          locs[i]);
    if ((rc = index_ready(s)) != EMBER_OK)
        return rc;
    h = em_hash64(locs, n * sizeof *locs, 0x737461636b);
    if ((slot = stack_ix_insert(&s->stack_index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found) {
        *idx = slot->idx1 - 1;
        return EMBER_OK;
    }
    if ((rc = RESERVE(s, stacks, nstacks, cap_stacks, "stacks")) != 0)
        return rc;
    if ((rc = pool_append(s, locs, n)) != EMBER_OK)
        return rc;
    s->stacks[s->nstacks] = (em_pset_stack_ent){ s->npool - n, (uint32_t)n };
    if (n > s->max_depth)
        s->max_depth = n;
    *idx = (uint32_t)s->nstacks++;
    *slot = (struct em_hslot){ h, *idx + 1 };
    return EMBER_OK;
}

/* Grows *P (capacity *CAP, COUNT used) to exactly COUNT + MORE entries. */
static int array_exact(void **p, size_t *cap, size_t count, size_t more,
                       size_t size, const char *what)
{
    void *np;

    if (more > PSET_MAX_ENTRIES - count)
        return em_err(EMBER_ELIMIT, "more than %zu %s in one input",
                      PSET_MAX_ENTRIES, what);
    if (count + more <= *cap)
        return EMBER_OK;
    if (count + more > SIZE_MAX / size ||
        (np = em_realloc(*p, (count + more) * size)) == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for %zu %s", count + more,
                      what);
    *p = np;
    *cap = count + more;
    return EMBER_OK;
}

int em_pset_reserve(em_pset *s, size_t nstacks, size_t nframes,
                    size_t nsamples)
{
    int rc = array_exact((void **)&s->stacks, &s->cap_stacks, s->nstacks,
                         nstacks, sizeof *s->stacks, "stacks");

    if (rc == EMBER_OK && nframes > SIZE_MAX / sizeof *s->pool - s->npool)
        rc = em_err(EMBER_ENOMEM, "out of memory for %zu stack frames",
                    nframes);
    if (rc == EMBER_OK && s->npool + nframes > s->cap_pool) {
        uint32_t *np = em_realloc(s->pool, (s->npool + nframes) *
                                           sizeof *np);
        if (np == NULL)
            return em_err(EMBER_ENOMEM, "out of memory for %zu stack frames",
                          s->npool + nframes);
        s->pool = np;
        s->cap_pool = s->npool + nframes;
    }
    if (rc == EMBER_OK)
        rc = array_exact((void **)&s->samples, &s->cap_samples, s->nsamples,
                         nsamples, sizeof *s->samples, "samples");
    if (rc == EMBER_OK && nstacks > 0)
        rc = index_ready(s);
    if (rc == EMBER_OK && nstacks > 0)
        rc = stack_ix_reserve(&s->stack_index, nstacks);
    return rc;
}

/* ---- profiles and samples -------------------------------------------------- */

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const ember_label *)a)->name,
                  ((const ember_label *)b)->name);
}

/* Copies the N labels at IN into the arena, without empty values (which
** mean "absent"), sorted by name, checked as the engine checks them. */
static int labels_copy(em_pset *s, const ember_label *in, size_t n,
                       ember_label **out, size_t *nout)
{
    ember_label *l;
    size_t k = 0;

    if (n > EM_PSET_MAX_LABELS)
        return em_err(EMBER_ELIMIT, "%zu labels on one profile (at most %u)",
                      n, EM_PSET_MAX_LABELS);
    l = arena_alloc(s, (n > 0 ? n : 1) * sizeof *l);
    if (l == NULL)
        return EMBER_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int rc = em_label_name_check(in[i].name);
        size_t vlen = in[i].value != NULL ? strlen(in[i].value) : 0;
        if (rc != EMBER_OK)
            return rc;
        if (vlen > PSET_MAX_VALUE)
            return em_err(EMBER_ELIMIT, "label %s: value of %zu bytes (at "
                          "most %d)", in[i].name, vlen, PSET_MAX_VALUE);
        if (vlen == 0)
            continue;
        l[k].name = em_pset_strndup(s, in[i].name, strlen(in[i].name));
        l[k].value = em_pset_strndup(s, in[i].value, vlen);
        if (l[k].name == NULL || l[k].value == NULL)
            return EMBER_ENOMEM;
        k++;
    }
    qsort(l, k, sizeof *l, label_cmp);
    for (size_t i = 1; i < k; i++)
        if (strcmp(l[i - 1].name, l[i].name) == 0)
            return em_err(EMBER_EINVAL, "label %s given twice", l[i].name);
    *out = l;
    *nout = k;
    return EMBER_OK;
}

int em_pset_profile_add(em_pset *s, const char *type,
                        const ember_label *labels, size_t n, int64_t time_ms,
                        int64_t duration_ns, int64_t period, uint32_t *idx)
{
    em_pset_profile *p;
    int rc = em_profile_type_check(type);

    if (rc == EMBER_OK)
        rc = RESERVE(s, profiles, nprofiles, cap_profiles, "profiles");
    if (rc != EMBER_OK)
        return rc;
    p = &s->profiles[s->nprofiles];
    memset(p, 0, sizeof *p);
    p->type = em_pset_strndup(s, type, strlen(type));
    if (p->type == NULL)
        return EMBER_ENOMEM;
    if ((rc = labels_copy(s, labels, n, &p->labels, &p->nlabels)) != 0)
        return rc;
    p->time_ms = time_ms;
    p->duration_ns = duration_ns;
    p->period = period;
    *idx = (uint32_t)s->nprofiles++;
    return EMBER_OK;
}

/* True when the N labels at L (any order, empty values absent) are
** exactly P's. */
static bool labels_same(const em_pset_profile *p, const ember_label *l,
                        size_t n)
{
    size_t present = 0;

    for (size_t i = 0; i < n; i++) {
        bool found = false;
        if (l[i].value == NULL || l[i].value[0] == '\0')
            continue;
        present++;
        for (size_t k = 0; k < p->nlabels && !found; k++)
            found = strcmp(p->labels[k].name, l[i].name) == 0 &&
                    strcmp(p->labels[k].value, l[i].value) == 0;
        if (!found)
            return false;
    }
    return present == p->nlabels;
}

long em_pset_profile_find(const em_pset *s, const char *type,
                          const ember_label *labels, size_t n)
{
    for (size_t i = 0; i < s->nprofiles; i++)
        if (strcmp(s->profiles[i].type, type) == 0 &&
            labels_same(&s->profiles[i], labels, n))
            return (long)i;
    return -1;
}

int em_pset_sample(em_pset *s, uint32_t profile, uint32_t stack,
                   int64_t value)
{
    em_pset_profile *pr;
    int rc;

    if (profile >= s->nprofiles || stack >= s->nstacks)
        return em_err(EMBER_EINVAL, "sample: profile %u or stack %u does not "
                      "exist", profile, stack);
    pr = &s->profiles[profile];
    if (!em_sum_add(&pr->pos, &pr->neg, value))
        return em_err(EMBER_ELIMIT, "the values of profile %s sum past the "
                      "64-bit range (value %" PRId64 ")", pr->type, value);
    if ((rc = RESERVE(s, samples, nsamples, cap_samples, "samples")) != 0)
        return rc;
    s->samples[s->nsamples++] = (em_pset_sample_ent){ profile, stack, value };
    pr->nsamples++;
    return EMBER_OK;
}

/* Frees the four indexes; a zeroed one is empty. */
static void indexes_free(em_pset *s)
{
    mapping_ix_free(&s->mapping_index);
    function_ix_free(&s->function_index);
    loc_ix_free(&s->loc_index);
    stack_ix_free(&s->stack_index);
}

void em_pset_trim(em_pset *s)
{
    indexes_free(s);
    s->trimmed = true;
}

void em_pset_reset(em_pset *s)
{
    em_pset_block *keep = s->blocks;

    if (s->trimmed) {               /* its indexes are gone: start over */
        em_pset_free(s);
        return;
    }
    if (keep != NULL) {             /* the newest block, the largest */
        while (keep->next != NULL) {
            em_pset_block *next = keep->next->next;
            em_free(keep->next);
            keep->next = next;
        }
        keep->used = 0;
    }
    mapping_ix_clear(&s->mapping_index);
    function_ix_clear(&s->function_index);
    loc_ix_clear(&s->loc_index);
    stack_ix_clear(&s->stack_index);
    s->nmappings = s->nfunctions = s->nlines = s->nlocs = 0;
    s->npool = s->nstacks = s->max_depth = 0;
    s->nsamples = s->nprofiles = 0;
    s->bytes_in = 0;
    s->nbase = 0;                   /* the names lived in the arena */
    s->joined = false;
}

void em_pset_free(em_pset *s)
{
    if (s == NULL)
        return;
    while (s->blocks != NULL) {
        em_pset_block *next = s->blocks->next;
        em_free(s->blocks);
        s->blocks = next;
    }
    indexes_free(s);
    em_free(s->mappings);
    em_free(s->functions);
    em_free(s->lines);
    em_free(s->locs);
    em_free(s->pool);
    em_free(s->stacks);
    em_free(s->samples);
    em_free(s->profiles);
    em_free(s->base);
    memset(s, 0, sizeof *s);
}

/* ---- labels of foreign names ------------------------------------------------ */

void em_label_name_sanitize(const char *in, size_t len,
                            char out[EM_LABEL_NAME_BUF])
{
    size_t k = 0;

    if (len > 0 && in[0] >= '0' && in[0] <= '9')
        out[k++] = '_';
    for (size_t i = 0; i < len && k < 64; i++) {
        char c = in[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_';
        out[k++] = ok ? c : '_';
    }
    if (k == 0)
        out[k++] = '_';
    out[k] = '\0';
}

/* True when NAME is one of the N labels at L. */
static bool label_taken(const ember_label *l, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].name, name) == 0)
            return true;
    return false;
}

/* True when NAME cannot be the file's: taken by an earlier label, or the
** engine's reserved "__type__". */
static bool label_clash(const ember_label *l, size_t n, const char *name)
{
    return strcmp(name, "__type__") == 0 || label_taken(l, n, name);
}

#define EXPORTED "exported_"
#define EXPORTED_LEN (sizeof EXPORTED - 1)
#define EXPORTED_TRIES 8

/* True when NAME is one of the import's own label names S remembers. */
static bool base_name(const em_pset *s, const char *name)
{
    for (size_t i = 0; i < s->nbase; i++)
        if (strcmp(s->base[i], name) == 0)
            return true;
    return false;
}

/* Remembers the names of BASE (the import's labels) in S, each once. */
static int base_remember(em_pset *s, const ember_label *base, size_t nbase)
{
    for (size_t i = 0; i < nbase; i++) {
        size_t len = strlen(base[i].name);
        char *copy;
        if (base_name(s, base[i].name))
            continue;
        const char **v = em_grow(s->base, &s->cap_base, s->nbase + 1,
                                 sizeof *v);
        if (v == NULL)
            return em_err(EMBER_ENOMEM, "import: %zu label names",
                          s->nbase + 1);
        s->base = v;
        if ((copy = arena_alloc(s, len + 1)) == NULL)
            return EMBER_ENOMEM;
        memcpy(copy, base[i].name, len + 1);
        s->base[s->nbase++] = copy;
    }
    s->joined = true;
    return EMBER_OK;
}

int em_labels_join(em_pset *s, const ember_label *base, size_t nbase,
                   const ember_label *extra, size_t nextra, ember_label *out,
                   size_t *nout)
{
    size_t k = 0;
    int rc = base_remember(s, base, nbase);

    if (rc != EMBER_OK)
        return rc;

    for (size_t i = 0; i < nbase; i++)
        out[k++] = base[i];
    for (size_t i = 0; i < nextra; i++) {
        const char *name = extra[i].name;
        for (int tries = 0; label_clash(out, k, name); tries++) {
            /* the prefix, then as much of the name as a 64-byte name holds */
            size_t len = strlen(name);
            char *n2 = arena_alloc(s, EXPORTED_LEN + len + 1);
            if (tries == EXPORTED_TRIES)
                return em_err(EMBER_EINVAL, "label %s: its name clashes "
                              "with the import's labels", extra[i].name);
            if (n2 == NULL)
                return EMBER_ENOMEM;
            if (len > 64 - EXPORTED_LEN)
                len = 64 - EXPORTED_LEN;
            memcpy(n2, EXPORTED, EXPORTED_LEN);
            memcpy(n2 + EXPORTED_LEN, name, len);
            n2[EXPORTED_LEN + len] = '\0';
            name = n2;
        }
        out[k].name = name;
        out[k++].value = extra[i].value;
    }
    *nout = k;
    return EMBER_OK;
}

/* ---- writing ---------------------------------------------------------------- */

/* Scratch of one write: ids of the set's entries in the database. */
typedef struct pset_ids {
    uint32_t *mappings, *functions, *locs, *stacks;
    ember_line *lines;
    uint32_t *frame;
    uint32_t *order;            /* sample indexes, grouped by profile */
    size_t *first;              /* [nprofiles + 1] group starts */
    ember_sample *samples;      /* one profile's, in database stack ids */
} pset_ids;

static void ids_free(pset_ids *w)
{
    em_free(w->mappings);
    em_free(w->functions);
    em_free(w->locs);
    em_free(w->stacks);
    em_free(w->lines);
    em_free(w->frame);
    em_free(w->order);
    em_free(w->samples);
    em_free(w->first);
}

/* The scratch of one write. Samples are grouped through 4-byte indexes
** and copied one profile at a time: a grouped copy of them all was 16
** bytes per sample more at the peak of a big import (issue 12). */
static int ids_alloc(pset_ids *w, const em_pset *s)
{
    size_t most = 0;

    for (size_t i = 0; i < s->nprofiles; i++)
        if (s->profiles[i].nsamples > most)
            most = s->profiles[i].nsamples;
    w->mappings = em_malloc((s->nmappings + 1) * sizeof *w->mappings);
    w->functions = em_malloc((s->nfunctions + 1) * sizeof *w->functions);
    w->locs = em_malloc((s->nlocs + 1) * sizeof *w->locs);
    w->stacks = em_malloc((s->nstacks + 1) * sizeof *w->stacks);
    w->lines = em_malloc(EM_PSET_MAX_LINES * sizeof *w->lines);
    w->frame = em_malloc((s->max_depth + 1) * sizeof *w->frame);
    w->order = em_malloc((s->nsamples + 1) * sizeof *w->order);
    w->samples = em_malloc((most + 1) * sizeof *w->samples);
    w->first = em_malloc((s->nprofiles + 1) * sizeof *w->first);
    if (w->mappings == NULL || w->functions == NULL || w->locs == NULL ||
        w->stacks == NULL || w->lines == NULL || w->frame == NULL ||
        w->order == NULL || w->samples == NULL || w->first == NULL)
        return em_err(EMBER_ENOMEM, "out of memory writing %zu stacks and "
                      "%zu samples", s->nstacks, s->nsamples);
    return EMBER_OK;
}

static int write_symbols(ember_txn *txn, const em_pset *s, pset_ids *w)
{
    int rc = EMBER_OK;

    for (size_t i = 0; rc == EMBER_OK && i < s->nmappings; i++)
        rc = ember_intern_mapping(txn, &s->mappings[i], &w->mappings[i]);
    for (size_t i = 0; rc == EMBER_OK && i < s->nfunctions; i++)
        rc = ember_intern_function(txn, &s->functions[i], &w->functions[i]);
    for (size_t i = 0; rc == EMBER_OK && i < s->nlocs; i++) {
        const em_pset_loc *l = &s->locs[i];
        ember_location loc = { .address = l->address, .lines = w->lines,
                               .nlines = l->nlines };
        loc.mapping = l->mapping != 0 ? w->mappings[l->mapping - 1] : 0;
        for (size_t k = 0; k < l->nlines; k++) {
            w->lines[k].function = w->functions[s->lines[l->first + k].function];
            w->lines[k].line = s->lines[l->first + k].line;
        }
        rc = ember_intern_location(txn, &loc, &w->locs[i]);
    }
    for (size_t i = 0; rc == EMBER_OK && i < s->nstacks; i++) {
        const em_pset_stack_ent *st = &s->stacks[i];
        for (size_t k = 0; k < st->n; k++)
            w->frame[k] = w->locs[s->pool[st->off + k]];
        rc = ember_intern_stack(txn, w->frame, st->n, &w->stacks[i]);
    }
    return rc;
}

static int sample_cmp(const void *a, const void *b)
{
    uint32_t x = ((const ember_sample *)a)->stack;
    uint32_t y = ((const ember_sample *)b)->stack;

    return (x > y) - (x < y);
}

/* Groups the sample indexes by profile (a counting sort). */
static void group_samples(const em_pset *s, pset_ids *w)
{
    memset(w->first, 0, (s->nprofiles + 1) * sizeof *w->first);
    for (size_t i = 0; i < s->nprofiles; i++)
        w->first[i + 1] = w->first[i] + s->profiles[i].nsamples;
    for (size_t i = 0; i < s->nsamples; i++)
        w->order[w->first[s->samples[i].profile]++] = (uint32_t)i;
    for (size_t i = s->nprofiles; i > 0; i--)    /* back to group starts */
        w->first[i] = w->first[i - 1];
    w->first[0] = 0;
}

/* Copies profile P's samples into w->samples, in database stack ids. */
static void profile_samples(const em_pset *s, pset_ids *w, size_t p)
{
    for (size_t i = w->first[p], k = 0; i < w->first[p + 1]; i++, k++) {
        const em_pset_sample_ent *x = &s->samples[w->order[i]];
        w->samples[k] = (ember_sample){ w->stacks[x->stack], x->value };
    }
}

/* Sorts the N samples at P by stack and sums repeats; returns the count. */
static size_t samples_sum(ember_sample *p, size_t n)
{
    size_t k = 0, i = 1;

    /* A pprof's stacks are new in sample order, so their ids mostly rise
    ** already; glibc's qsort would copy them all to sort (issue 12). */
    while (i < n && p[i - 1].stack <= p[i].stack)
        i++;
    if (i < n)
        qsort(p, n, sizeof *p, sample_cmp);
    for (i = 0; i < n; i++) {
        if (k > 0 && p[k - 1].stack == p[i].stack)
            p[k - 1].value += p[i].value;   /* fits: em_pset_sample */
        else
            p[k++] = p[i];
    }
    return k;
}

/* Notes P's labels that came from its file (not the import's own). */
static int note_split(ember_txn *txn, const em_pset *s,
                      const em_pset_profile *p)
{
    int rc = EMBER_OK;

    for (size_t i = 0; s->joined && i < p->nlabels && rc == EMBER_OK; i++)
        if (!base_name(s, p->labels[i].name))
            rc = em_txn_note_split_label(txn, p->labels[i].name);
    return rc;
}

static int write_profiles(ember_txn *txn, const em_pset *s, pset_ids *w,
                          em_pset_counts *c)
{
    group_samples(s, w);
    for (size_t i = 0; i < s->nprofiles; i++) {
        const em_pset_profile *p = &s->profiles[i];
        ember_profile ep = { .sz = sizeof ep, .type = p->type,
                             .labels = p->labels, .nlabels = p->nlabels,
                             .time_ms = p->time_ms,
                             .duration_ns = p->duration_ns,
                             .period = p->period, .samples = w->samples };
        int rc;
        if (p->nsamples == 0)
            continue;
        profile_samples(s, w, i);
        ep.nsamples = samples_sum(w->samples, p->nsamples);
        if ((rc = ember_txn_append(txn, &ep)) != EMBER_OK ||
            (rc = note_split(txn, s, p)) != EMBER_OK)
            return rc;
        c->profiles++;
        c->samples += ep.nsamples;
    }
    return EMBER_OK;
}

int em_pset_write(ember_txn *txn, const em_pset *s, em_pset_counts *out)
{
    pset_ids w = { 0 };
    em_pset_counts c = { 0 };
    int rc = ids_alloc(&w, s);

    if (rc == EMBER_OK)
        rc = write_symbols(txn, s, &w);
    if (rc == EMBER_OK)
        rc = write_profiles(txn, s, &w, &c);
    ids_free(&w);
    if (out != NULL)
        *out = rc == EMBER_OK ? c : (em_pset_counts){ 0 };
    return rc;
}
