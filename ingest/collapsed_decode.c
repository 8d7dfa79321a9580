/*
** ingest/collapsed_decode.c: collapsed stacks (the format ingest/ingest.h
** describes, split by em_collapsed_parse) into a profile set.
**
** Frames are symbols without addresses: a frame becomes a function named by the frame text and a
** location on the unknown mapping (0) at address 0 with one line (that
** function, line 0); stacks are leaf first. Every line is one sample of its
** value: the set sums repeated stacks when it is written.
**
** Profiles: one of opts->type (EM_COLLAPSED_DEFAULT_TYPE when NULL) with
** the import's labels, time, duration and period, made at the first stack
** line (an input without one gives an empty set). With opts->comm_prefix
** the root frame is the process prefix that stackcollapse-perf.pl --pid
** (or --tid) writes and leaves the stack: "comm-PID" gives labels comm and
** pid, "comm-PID/TID" comm, pid and tid (the numbers after the LAST '-'),
** anything else is all comm ("java", "kworker/0:1-events"). One profile is
** made per distinct prefix, found through a hash map, never by a scan. A
** line holding only the prefix is a sample with an empty stack.
*/
#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

/* One distinct prefix frame and its profile. */
typedef struct prefix {
    const char *p;              /* in the parsed buffer */
    size_t len;
    uint64_t hash;
    uint32_t profile;
} prefix;

typedef struct cdec {
    const em_import_opts *o;
    em_pset *s;
    uint32_t *locs;             /* scratch: one stack, leaf first */
    char *name;                 /* scratch: one frame, NUL-terminated */
    size_t cap_name;
    ember_label *labels;        /* scratch: the import's labels + 3 */
    bool have_profile;          /* without comm_prefix: made yet */
    uint32_t profile;
    prefix *prefixes;           /* with comm_prefix: the map's entries */
    size_t nprefixes, cap_prefixes;
    em_hindex index;            /* over prefixes */
} cdec;

/* ---- the comm prefix --------------------------------------------------- */

static bool all_digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* Adds label NAME = the N bytes at P to EXTRA. */
static int extra_label(cdec *d, ember_label *extra, size_t *k,
                       const char *name, const char *p, size_t n)
{
    extra[*k].name = name;
    extra[*k].value = em_pset_strndup(d->s, p, n);
    if (extra[*k].value == NULL)
        return EMBER_ENOMEM;
    (*k)++;
    return EMBER_OK;
}

/* Splits prefix frame F into comm, pid and tid labels (EXTRA, *K). */
static int prefix_labels(cdec *d, const em_collapsed_frame *f,
                         ember_label *extra, size_t *k)
{
    const char *dash = NULL, *slash;
    size_t num, pid;
    int rc;

    for (size_t i = f->len; i-- > 0 && dash == NULL;)
        if (f->p[i] == '-')
            dash = f->p + i;
    if (dash == NULL)
        return extra_label(d, extra, k, "comm", f->p, f->len);
    num = f->len - (size_t)(dash + 1 - f->p);
    slash = memchr(dash + 1, '/', num);
    pid = slash != NULL ? (size_t)(slash - dash - 1) : num;
    if (!all_digits(dash + 1, pid) ||
        (slash != NULL && !all_digits(slash + 1, num - pid - 1)))
        return extra_label(d, extra, k, "comm", f->p, f->len);
    rc = extra_label(d, extra, k, "comm", f->p, (size_t)(dash - f->p));
    if (rc == EMBER_OK)
        rc = extra_label(d, extra, k, "pid", dash + 1, pid);
    if (rc == EMBER_OK && slash != NULL)
        rc = extra_label(d, extra, k, "tid", slash + 1, num - pid - 1);
    return rc;
}

/* Adds the one profile of this input with EXTRA labels after the import's. */
static int profile_make(cdec *d, const ember_label *extra, size_t nextra,
                        uint32_t *idx)
{
    const em_import_opts *o = d->o;
    size_t n = 0;
    int rc = em_labels_join(d->s, o->labels, o->nlabels, extra, nextra,
                            d->labels, &n);

    if (rc == EMBER_OK)
        rc = em_pset_profile_add(d->s, o->type != NULL ? o->type
                                 : EM_COLLAPSED_DEFAULT_TYPE, d->labels, n,
                                 o->time_ms, o->duration_ns, o->period, idx);
    return rc;
}

/* A prefix frame looked up among D's prefixes. */
typedef struct prefix_key {
    const cdec *d;
    const em_collapsed_frame *f;
} prefix_key;

static bool prefix_eq(const prefix_key *k, uint32_t idx)
{
    const prefix *p = &k->d->prefixes[idx];

    return p->len == k->f->len && memcmp(p->p, k->f->p, p->len) == 0;
}

#define EM_HT_NAME prefix_ix
#define EM_HT_KEY const prefix_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && prefix_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "collapsed: prefix index"
#include "ingest/hindex.h"

/* Appends prefix F with a new profile and points slot SL, which an insert
** left free, at it. */
static int prefix_new(cdec *d, const em_collapsed_frame *f, uint64_t h,
                      struct em_hslot *sl, uint32_t *profile)
{
    ember_label extra[3];
    size_t k = 0;
    int rc;

    if (d->nprefixes == d->cap_prefixes) {
        size_t cap = d->cap_prefixes == 0 ? 16 : d->cap_prefixes * 2;
        prefix *np = em_realloc(d->prefixes, cap * sizeof *np);
        if (np == NULL)
            return em_err(EMBER_ENOMEM, "out of memory for %zu prefixes",
                          cap);
        d->prefixes = np;
        d->cap_prefixes = cap;
    }
    rc = prefix_labels(d, f, extra, &k);
    if (rc == EMBER_OK)
        rc = profile_make(d, extra, k, profile);
    if (rc != EMBER_OK)
        return rc;
    d->prefixes[d->nprefixes++] = (prefix){ f->p, f->len, h, *profile };
    sl->hash = h;
    sl->idx1 = (uint32_t)d->nprefixes;
    return EMBER_OK;
}

/* The profile of prefix frame F, made at its first line. */
static int prefix_profile(cdec *d, const em_collapsed_frame *f,
                          uint32_t *profile)
{
    uint64_t h = em_hash64(f->p, f->len, 0x636f6d6d);
    prefix_key k = { d, f };
    struct em_hslot *sl;
    bool found;

    if ((sl = prefix_ix_insert(&d->index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    if (found) {
        *profile = d->prefixes[sl->idx1 - 1].profile;
        return EMBER_OK;
    }
    return prefix_new(d, f, h, sl, profile);
}

/* ---- stacks ------------------------------------------------------------ */

/* The location of frame F: function F, mapping 0, address 0, line 0. */
static int frame_location(cdec *d, const em_collapsed_frame *f, uint32_t *loc)
{
    ember_function fn = { 0 };
    em_pset_line line = { 0 };
    int rc;

    if (f->len >= d->cap_name) {
        char *n = em_realloc(d->name, f->len + 1);
        if (n == NULL)
            return em_err(EMBER_ENOMEM, "out of memory for a frame of %zu "
                          "bytes", f->len);
        d->name = n;
        d->cap_name = f->len + 1;
    }
    memcpy(d->name, f->p, f->len);
    d->name[f->len] = '\0';
    fn.name = d->name;
    rc = em_pset_function(d->s, &fn, &line.function);
    if (rc == EMBER_OK)
        rc = em_pset_location(d->s, 0, 0, &line, 1, loc);
    return rc;
}

/* An em_collapsed_fn: one stack line (frames root first) as one sample. */
static int add_line(void *ctx, const em_collapsed_frame *frames,
                    size_t nframes, int64_t value)
{
    cdec *d = ctx;
    size_t skip = d->o->comm_prefix ? 1 : 0, n = nframes - skip;
    uint32_t profile = d->profile, stack;
    int rc = EMBER_OK;

    if (skip > 0)
        rc = prefix_profile(d, &frames[0], &profile);
    else if (!d->have_profile && (rc = profile_make(d, NULL, 0,
                                                    &d->profile)) == EMBER_OK) {
        d->have_profile = true;
        profile = d->profile;
    }
    for (size_t k = 0; rc == EMBER_OK && k < n; k++)  /* leaf first */
        rc = frame_location(d, &frames[nframes - 1 - k], &d->locs[k]);
    if (rc == EMBER_OK)
        rc = em_pset_stack(d->s, d->locs, n, &stack);
    if (rc == EMBER_OK)
        rc = em_pset_sample(d->s, profile, stack, value);
    return rc;
}

int em_collapsed_decode(const char *buf, size_t len,
                        const em_import_opts *opts, em_pset *out)
{
    em_import_opts o;
    cdec d = { .o = &o, .s = out };
    int rc = em_import_opts_norm(opts, &o);

    if (rc != EMBER_OK)
        return rc;
    if (out == NULL)
        return em_err(EMBER_EINVAL, "%s: no set to decode into", o.origin);
    d.locs = em_malloc(EM_COLLAPSED_MAX_FRAMES * sizeof *d.locs);
    d.labels = em_malloc((o.nlabels + 3) * sizeof *d.labels);
    if (d.locs == NULL || d.labels == NULL)
        rc = em_err(EMBER_ENOMEM, "%s: out of memory for the decoder",
                    o.origin);
    if (rc == EMBER_OK)
        rc = em_collapsed_parse(buf, len, o.origin, add_line, &d);
    em_free(d.locs);
    em_free(d.name);
    em_free(d.labels);
    em_free(d.prefixes);
    prefix_ix_free(&d.index);
    return rc;
}
