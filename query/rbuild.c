/*
** query/rbuild.c: em_rprofile_build, from a merged profile (stack ids and
** values) to resolved frames, through one engine snapshot so that every id
** resolves against the same state. This is the only file of the renderers'
** path that calls the engine.
**
** Profiles over time repeat the same locations in many stacks, so each
** location is resolved once: its frames are cached (a slice of `cache`),
** keyed by location id; function names are cached by function id.
**
** Built with sites (em_rprofile_build_at, for granularities and source
** listings), each line of a location is named by its site (rsites.c):
** the function, its cleaned source file, the line, the address and the
** mapping's base name, looked up once per location as well.
*/
#include <stdio.h>

#include "query/query_int.h"

typedef struct builder {
    ember_snapshot *snap;
    em_rprofile *p;
    bool sites;                 /* name frames by their sites */
    em_map64 locs;              /* location id -> first << 32 | count */
    em_map64 fns;               /* function id -> name id */
    em_rframe *cache;           /* frames of the resolved locations */
    size_t ncache, cap_cache;
    em_rframe *scratch;         /* the stack being assembled */
    size_t nscratch, cap_scratch;
} builder;

/* Appends frame F to the array *A of *N (capacity *CAP). */
static int frames_push(em_rframe **a, size_t *n, size_t *cap, em_rframe f)
{
    if (*n == *cap) {
        em_rframe *g = em_grow(*a, cap, *n + 1, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "profile: %zu frames", *n + 1);
        *a = g;
    }
    (*a)[(*n)++] = f;
    return EMBER_OK;
}

/* The base name of LOC's mapping file ("" without one), which lives as
** long as the snapshot's current lookup. */
static int mapping_base(builder *b, const ember_location *loc,
                        const char **base)
{
    ember_mapping m = { 0 };
    const char *file;
    int rc;

    if (loc->mapping != 0 &&
        (rc = ember_snapshot_mapping(b->snap, loc->mapping, &m)) != EMBER_OK)
        return em_err_prefix(rc, "mapping %u", loc->mapping);
    file = m.file != NULL ? m.file : "";
    *base = strrchr(file, '/') != NULL ? strrchr(file, '/') + 1 : file;
    return EMBER_OK;
}

/* The name of a frame without a function name: "0x4011a0 in libc.so.6"
** (BASE: the mapping's base name), into NAME; returns its length. */
static size_t address_text(const ember_location *loc, const char *base,
                           char name[320])
{
    int n;

    if (base[0] != '\0')
        n = snprintf(name, 320, "0x%llx in %.290s",
                     (unsigned long long)loc->address, base);
    else
        n = snprintf(name, 320, "0x%llx", (unsigned long long)loc->address);
    return (size_t)n;
}

static int address_name(builder *b, const ember_location *loc, uint32_t *id)
{
    const char *base = "";
    char name[320];
    int rc = mapping_base(b, loc, &base);

    if (rc != EMBER_OK)
        return rc;
    return em_strtab_intern(&b->p->names, name,
                            address_text(loc, base, name), id);
}

/* The name id of function FN, or UINT32_MAX when it has no name at all. */
static int function_name(builder *b, uint32_t fn, uint32_t *id)
{
    ember_function f;
    const char *name;
    uint64_t v;
    int rc;

    if (em_map64_get(&b->fns, fn, &v)) {
        *id = (uint32_t)v;
        return EMBER_OK;
    }
    if ((rc = ember_snapshot_function(b->snap, fn, &f)) != EMBER_OK)
        return em_err_prefix(rc, "function %u", fn);
    name = f.name != NULL && f.name[0] != '\0' ? f.name : f.system_name;
    *id = UINT32_MAX;
    if (name != NULL && name[0] != '\0' &&
        (rc = em_strtab_intern(&b->p->names, name, strlen(name), id)) !=
        EMBER_OK)
        return rc;
    return em_map64_put(&b->fns, fn, *id);
}

/* *ID: the srcs id of the LEN bytes at S, or EM_RSITE_NONE for none. */
static int src_id(builder *b, const char *s, size_t len, uint32_t *id)
{
    *id = EM_RSITE_NONE;
    if (s == NULL || len == 0)
        return EMBER_OK;
    return em_strtab_intern(&b->p->srcs, s, len, id);
}

/* Function FN's part of a site: its name (or system name), cleaned file. */
static int site_function(builder *b, uint32_t fn, em_rsite *s)
{
    ember_function f;
    const char *name;
    char *file = NULL;
    int rc = ember_snapshot_function(b->snap, fn, &f);

    if (rc != EMBER_OK)
        return em_err_prefix(rc, "function %u", fn);
    s->start = f.start_line;
    name = f.name != NULL && f.name[0] != '\0' ? f.name : f.system_name;
    if (name != NULL && name[0] != '\0') {
        s->flags |= EM_RSITE_NAMED;
        rc = src_id(b, name, strlen(name), &s->fn);
    }
    if (rc == EMBER_OK && f.file != NULL && f.file[0] != '\0' &&
        (file = em_path_clean(f.file)) == NULL)
        rc = EMBER_ENOMEM;
    if (rc == EMBER_OK && file != NULL)
        rc = src_id(b, file, strlen(file), &s->file);
    em_free(file);
    return rc;
}

/* The frames of LOC named by their sites, at the end of the cache. */
static int location_sites(builder *b, const ember_location *loc)
{
    const char *base = "";
    char addr[320];
    size_t n = loc->nlines > 0 ? loc->nlines : 1, alen = 0;
    int rc = mapping_base(b, loc, &base);
    em_rsite s = { .obj = EM_RSITE_NONE, .address = loc->address };

    if (rc == EMBER_OK) {       /* BASE dies with the next lookup */
        alen = address_text(loc, base, addr);
        rc = src_id(b, base, strlen(base), &s.obj);
    }
    for (size_t j = 0; j < n && rc == EMBER_OK; j++) {
        em_rframe f = { .flags = j + 1 < n ? EM_RFRAME_INLINED : 0 };
        s.fn = s.file = EM_RSITE_NONE;
        s.flags = 0;
        s.start = 0;
        s.line = loc->nlines > 0 ? loc->lines[j].line : 0;
        if (loc->nlines > 0)
            rc = site_function(b, loc->lines[j].function, &s);
        if (rc == EMBER_OK && s.fn == EM_RSITE_NONE)
            rc = src_id(b, addr, alen, &s.fn);
        if (rc == EMBER_OK)
            rc = em_rprofile_site(b->p, &s, &f.fn);
        if (rc == EMBER_OK)
            rc = frames_push(&b->cache, &b->ncache, &b->cap_cache, f);
    }
    return rc;
}

/* Resolves location LOC_ID into new frames at the end of the cache. */
static int location_resolve(builder *b, uint32_t loc_id)
{
    ember_location loc;
    uint32_t id;
    int rc;

    if ((rc = ember_snapshot_location(b->snap, loc_id, &loc)) != EMBER_OK)
        return em_err_prefix(rc, "location %u", loc_id);
    if (b->sites)
        return location_sites(b, &loc);
    if (loc.nlines == 0) {              /* unsymbolized: name the address */
        if ((rc = address_name(b, &loc, &id)) != EMBER_OK)
            return rc;
        return frames_push(&b->cache, &b->ncache, &b->cap_cache,
                           (em_rframe){ .fn = id, .flags = 0 });
    }
    for (size_t j = 0; j < loc.nlines; j++) {
        em_rframe f = { .flags = j + 1 < loc.nlines ? EM_RFRAME_INLINED : 0 };
        rc = function_name(b, loc.lines[j].function, &f.fn);
        if (rc == EMBER_OK && f.fn == UINT32_MAX)
            rc = address_name(b, &loc, &f.fn);
        if (rc == EMBER_OK)
            rc = frames_push(&b->cache, &b->ncache, &b->cap_cache, f);
        if (rc != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}

/* Appends location LOC_ID's frames (innermost inline frame first) to the
** stack being assembled. */
static int location_frames(builder *b, uint32_t loc_id)
{
    uint64_t v;
    size_t first, n;
    int rc;

    if (!em_map64_get(&b->locs, loc_id, &v)) {
        first = b->ncache;
        if (first > UINT32_MAX)         /* the cache key packs 32 + 32 bits */
            return em_err(EMBER_ELIMIT, "profile: too many frames");
        if ((rc = location_resolve(b, loc_id)) != EMBER_OK)
            return rc;
        if (b->ncache - first > UINT32_MAX)
            return em_err(EMBER_ELIMIT, "location %u: too many lines",
                          loc_id);
        v = (uint64_t)first << 32 | (b->ncache - first);
        if ((rc = em_map64_put(&b->locs, loc_id, v)) != EMBER_OK)
            return rc;
    }
    first = (size_t)(v >> 32);
    n = (size_t)(v & 0xffffffffu);
    for (size_t i = 0; i < n; i++)
        if ((rc = frames_push(&b->scratch, &b->nscratch, &b->cap_scratch,
                              b->cache[first + i])) != EMBER_OK)
            return rc;
    return EMBER_OK;
}

static int stack_add(builder *b, uint32_t stack, int64_t value)
{
    const uint32_t *locs;
    size_t n;
    int rc;

    if ((rc = ember_snapshot_stack(b->snap, stack, &locs, &n)) != EMBER_OK)
        return em_err_prefix(rc, "stack %u", stack);
    b->nscratch = 0;
    for (size_t i = 0; i < n; i++)
        if ((rc = location_frames(b, locs[i])) != EMBER_OK)
            return em_err_prefix(rc, "stack %u", stack);
    return em_rprofile_add(b->p, b->scratch, b->nscratch, value);
}

int em_rprofile_build(ember_db *db, const ember_merged *m, const char *type,
                      ember_snapshot *snap, em_rprofile *out)
{
    return em_rprofile_build_at(db, m, type, snap, EM_GRAN_FUNCTIONS, out);
}

int em_rprofile_build_at(ember_db *db, const ember_merged *m,
                         const char *type, ember_snapshot *snap, int gran,
                         em_rprofile *out)
{
    builder b = { .snap = snap, .p = out, .sites = gran != EM_GRAN_FUNCTIONS };
    ember_snapshot *own = NULL;
    const uint32_t *stacks;
    const int64_t *values;
    size_t n = ember_merged_samples(m, &stacks, &values);
    int rc = em_rprofile_init(out, type);

    out->granularity = gran;
    if (rc == EMBER_OK && snap == NULL &&
        (rc = ember_snapshot_begin(db, &own)) == EMBER_OK)
        b.snap = own;
    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        if (values[i] != 0)     /* pprof skips zero samples everywhere */
            rc = stack_add(&b, stacks[i], values[i]);
        if (rc == EMBER_OK && (i & 255) == 255)    /* a query's deadline, */
            rc = em_budget_step(EM_STEP_STACK, 256);/* checked per batch */
    }
    ember_snapshot_end(own);
    em_map64_free(&b.locs);
    em_map64_free(&b.fns);
    em_free(b.cache);
    em_free(b.scratch);
    if (rc != EMBER_OK)
        em_rprofile_free(out);
    return rc;
}
