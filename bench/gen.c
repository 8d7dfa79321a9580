/*
** bench/gen.c: the profile generator's core: PRNG, call graphs, stack
** pools, targets and the time-major profile iterator (bench/gen.h tells the
** shape). Invariants: everything is a pure function of gen_config (no clock,
** no global state); a profile's content depends only on (target, step), so
** the CPU samples and CPU nanoseconds series of a target describe the same
** samples, as one pprof with two sample types would, and likewise the heap
** series. Out of memory ends the process: this is a benchmark tool.
*/
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gen_int.h"

const char *const gen_type[GEN_NTYPES] = {
    "process_cpu:samples:count:cpu:nanoseconds:delta",
    "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta",
    "memory:alloc_space:bytes:space:bytes",
    "memory:inuse_space:bytes:space:bytes",
};

#define CPU_PERIOD_NS 10000000      /* 100 Hz, as Go's and most profilers */
#define HEAP_PERIOD 524288          /* Go's MemProfileRate */

/* ---- memory, strings, hashing ------------------------------------------ */

static void oom(size_t n)
{
    fprintf(stderr, "gen: out of memory (%zu bytes)\n", n);
    exit(2);
}

void *gen_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *gen_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *gen_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

static char *arena_alloc(garena *a, size_t n)
{
    char *p;

    if (n > a->left) {
        size_t sz = n > 65536 ? n : 65536;
        a->blocks = gen_xrealloc(a->blocks, (a->nblocks + 1) * sizeof *a->blocks);
        a->cur = a->blocks[a->nblocks++] = gen_xmalloc(sz);
        a->left = sz;
    }
    p = a->cur;
    a->cur += n;
    a->left -= n;
    return p;
}

char *gen_strdup(gen *g, const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(arena_alloc(&g->arena, n), s, n);
}

char *gen_printf(gen *g, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return gen_strdup(g, buf);
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t gen_hash(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = mix64(seed + n + 0x9e3779b97f4a7c15ULL);

    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mix64(h ^ w) * 0x9e3779b97f4a7c15ULL;
    }
    for (; n > 0; n--)
        h = (h ^ *s++) * 0x100000001b3ULL;
    return mix64(h);
}

/* ---- PRNG: xoshiro256** seeded by splitmix64 (Blackman & Vigna) -------- */

void gen_rng_seed(gen_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ULL;
        r->s[i] = mix64(seed);
    }
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t gen_rng_next(gen_rng *r)
{
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

uint64_t gen_rng_below(gen_rng *r, uint64_t n)
{
    return n ? (uint64_t)(((unsigned __int128)gen_rng_next(r) * n) >> 64) : 0;
}

double gen_rng_unit(gen_rng *r)
{
    return (double)(gen_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- u64 -> u32 map (open addressing, linear probing) ------------------- */

static void map_grow(gmapu *m);

static size_t map_slot(const gmapu *m, uint64_t key)
{
    size_t i = mix64(key) & (m->cap - 1);
    while (m->vals[i] != UINT32_MAX && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static uint32_t map_get(const gmapu *m, uint64_t key)
{
    return m->cap ? m->vals[map_slot(m, key)] : UINT32_MAX;
}

static void map_put(gmapu *m, uint64_t key, uint32_t val)
{
    size_t i;

    if ((m->n + 1) * 4 > m->cap * 3)
        map_grow(m);
    i = map_slot(m, key);
    if (m->vals[i] == UINT32_MAX)
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
}

static void map_grow(gmapu *m)
{
    gmapu old = *m;

    m->cap = old.cap ? old.cap * 2 : 1024;
    m->n = 0;
    m->keys = gen_xmalloc(m->cap * sizeof *m->keys);
    m->vals = gen_xmalloc(m->cap * sizeof *m->vals);
    memset(m->vals, 0xff, m->cap * sizeof *m->vals);
    for (size_t i = 0; i < old.cap; i++)
        if (old.vals[i] != UINT32_MAX)
            map_put(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
}

static void map_free(gmapu *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---- functions, mappings, locations ------------------------------------- */

uint32_t gen_func_add(gen *g, const char *name, const char *file, int64_t line,
                      int tier, uint16_t prog)
{
    gfunc *f;

    if (g->nfuncs == g->capfuncs) {
        g->capfuncs = g->capfuncs ? g->capfuncs * 2 : 4096;
        g->funcs = gen_xrealloc(g->funcs, g->capfuncs * sizeof *g->funcs);
    }
    f = &g->funcs[g->nfuncs];
    memset(f, 0, sizeof *f);
    f->name = gen_strdup(g, name);
    f->file = gen_strdup(g, file);
    f->line = line;
    f->tier = (uint8_t)tier;
    f->prog = prog;
    f->sys = UINT32_MAX;
    if (prog == 0xffff)
        map_put(&g->fname, gen_hash(name, strlen(name), 1), g->nfuncs);
    return g->nfuncs++;
}

uint32_t gen_func_find(const gen *g, const char *name)
{
    return map_get(&g->fname, gen_hash(name, strlen(name), 1));
}

void gen_edge_add(gen *g, uint32_t from, uint32_t to)
{
    gfunc *f = &g->funcs[from];

    for (uint32_t i = 0; i < f->ncallees; i++)
        if (f->callees[i] == to)
            return;
    if (f->ncallees == f->capcallees) {
        f->capcallees = f->capcallees ? f->capcallees * 2 : 4;
        f->callees = gen_xrealloc(f->callees, f->capcallees * sizeof *f->callees);
    }
    f->callees[f->ncallees++] = to;
}

static uint32_t map_add(gen *g, const char *file, uint64_t start, uint64_t size)
{
    gmap *m;

    g->maps = gen_xrealloc(g->maps, (g->nmaps + 1) * sizeof *g->maps);
    m = &g->maps[g->nmaps];
    m->file = gen_strdup(g, file);
    m->build_id = gen_printf(g, "%016llx%016llx",
        (unsigned long long)gen_hash(file, strlen(file), 21),
        (unsigned long long)gen_hash(file, strlen(file), 22));
    m->start = start;
    m->limit = start + size;
    return g->nmaps++;
}

static uint32_t func_mapping(const gen *g, const gprog *p, uint32_t f)
{
    int tier = g->funcs[f].tier;
    if (tier == T_KERNEL)
        return g->map_kernel;
    if (tier == T_LIBC || (p->c && tier == T_ENTRY && f != gen_func_find(g, "_start")))
        return g->map_libc;
    return p->mapping;
}

/* The location of site SITE in function F within program P's address space. */
static uint32_t loc_get(gen *g, const gprog *p, uint32_t f, uint32_t site)
{
    uint32_t m = func_mapping(g, p, f);
    uint64_t key = ((uint64_t)m << 40) | ((uint64_t)f << 10) | (site & 1023);
    uint32_t l = map_get(&g->lockey, key);
    gloc *loc;

    if (l != UINT32_MAX)
        return l;
    if (g->nlocs == g->caplocs) {
        g->caplocs = g->caplocs ? g->caplocs * 2 : 16384;
        g->locs = gen_xrealloc(g->locs, g->caplocs * sizeof *g->locs);
    }
    loc = &g->locs[g->nlocs];
    loc->func = f;
    loc->mapping = m;
    loc->site = site;
    loc->line = g->funcs[f].line + 2 + 3 * (int64_t)site;
    loc->addr = g->maps[m].start + 0x1000 + (uint64_t)f * 0x180 + 0x10 + 7 * (uint64_t)site;
    map_put(&g->lockey, key, g->nlocs);
    return g->nlocs++;
}

/* ---- alias tables (Vose) ----------------------------------------------- */

static void alias_build(galias *a, uint32_t n, double s)
{
    double *w = gen_xmalloc(n * sizeof *w), sum = 0;
    uint32_t *small = gen_xmalloc(n * sizeof *small), *large = gen_xmalloc(n * sizeof *large);
    uint32_t ns = 0, nl = 0;

    a->n = n;
    a->prob = gen_xmalloc(n * sizeof *a->prob);
    a->alias = gen_xmalloc(n * sizeof *a->alias);
    for (uint32_t i = 0; i < n; i++)
        sum += w[i] = pow(i + 1.0, -s);
    for (uint32_t i = 0; i < n; i++) {
        w[i] *= n / sum;
        if (w[i] < 1.0)
            small[ns++] = i;
        else
            large[nl++] = i;
    }
    while (ns > 0 && nl > 0) {
        uint32_t l = small[--ns], gi = large[--nl];
        a->prob[l] = (float)w[l];
        a->alias[l] = gi;
        w[gi] = (w[gi] + w[l]) - 1.0;
        if (w[gi] < 1.0)
            small[ns++] = gi;
        else
            large[nl++] = gi;
    }
    while (nl > 0) {
        uint32_t i = large[--nl];
        a->prob[i] = 1.0f;
        a->alias[i] = i;
    }
    while (ns > 0) {
        uint32_t i = small[--ns];
        a->prob[i] = 1.0f;
        a->alias[i] = i;
    }
    free(w);
    free(small);
    free(large);
}

static uint32_t alias_draw(const galias *a, gen_rng *r)
{
    uint64_t x = gen_rng_next(r);
    uint32_t i = (uint32_t)(((x >> 32) * a->n) >> 32);
    float u = (float)(x & 0xffffff) * (1.0f / 16777216.0f);
    return u < a->prob[i] ? i : a->alias[i];
}

static void alias_free(galias *a)
{
    free(a->prob);
    free(a->alias);
}

/* ---- walks: one stack from a program's call graph ----------------------- */

static uint32_t zipf_small(gen_rng *r, uint32_t n)
{
    double h = 0, u;
    for (uint32_t k = 0; k < n; k++)
        h += 1.0 / (k + 1);
    u = gen_rng_unit(r) * h;
    for (uint32_t k = 0; k < n; k++) {
        u -= 1.0 / (k + 1);
        if (u < 0)
            return k;
    }
    return n - 1;
}

/* An app entry of KIND (GEN_ENTRY_*): a Go program's handlers each serve
** one kind of caller, as a route belongs to one server, so a handler sits
** under one dispatcher's paths; a C program's serve any. */
static uint32_t app_entry(const gprog *p, gen_rng *r, unsigned kind)
{
    if (p->c)
        return p->app0 + 1 + zipf_small(r, GEN_APP_ENTRIES);
    return p->app0 + 1 + kind +
           GEN_ENTRY_KINDS * zipf_small(r, GEN_APP_ENTRIES / GEN_ENTRY_KINDS);
}

static uint32_t must_find(const gen *g, const char *name)
{
    uint32_t f = gen_func_find(g, name);
    if (f == UINT32_MAX) {
        fprintf(stderr, "gen: unknown function %s\n", name);
        exit(2);
    }
    return f;
}

/* Appends the frames of a scenario's root chain; returns the count. */
static size_t walk_root(gen *g, const gprog *p, gen_rng *r, uint32_t *fr)
{
    double sum = 0, u, w;
    const char *chain = NULL;
    char buf[512];
    size_t n = 0;
    int i;

    for (i = 0; gen_names_scenario(p->c, i, &w) != NULL; i++)
        sum += p->scen_w[i];
    u = gen_rng_unit(r) * sum;
    for (i = 0; (chain = gen_names_scenario(p->c, i, &w)) != NULL; i++)
        if ((u -= p->scen_w[i]) < 0)
            break;
    if (chain == NULL)
        chain = gen_names_scenario(p->c, 0, &w);
    snprintf(buf, sizeof buf, "%s", chain);
    for (char *save = NULL, *t = strtok_r(buf, ";", &save); t != NULL;
         t = strtok_r(NULL, ";", &save)) {
        if (strcmp(t, "@main") == 0)
            fr[n++] = p->app0;
        else if (strcmp(t, "@") == 0)
            fr[n++] = app_entry(p, r, GEN_ENTRY_OTHER);
        else
            fr[n++] = must_find(g, t);
    }
    return n;
}

static const char *const heap_tails[] = {
    "runtime.newobject", "runtime.makeslice", "runtime.growslice",
    "runtime.makemap;runtime.makeBucketArray;runtime.newarray",
    "runtime.concatstrings;runtime.rawstringtmp;runtime.rawstring",
    "runtime.slicebytetostring", "runtime.convTstring", "runtime.newobject",
    "runtime.makeslice", "runtime.newobject"
};

static size_t heap_tail(gen *g, const gprog *p, gen_rng *r, uint32_t *fr)
{
    char buf[256];
    size_t n = 0;

    if (p->c) {
        fr[n++] = must_find(g, "malloc");
        return n;
    }
    snprintf(buf, sizeof buf, "%s;runtime.mallocgc",
             heap_tails[gen_rng_below(r, EM_LEN(heap_tails))]);
    for (char *save = NULL, *t = strtok_r(buf, ";", &save); t != NULL;
         t = strtok_r(NULL, ";", &save))
        fr[n++] = must_find(g, t);
    return n;
}

/* A dispatcher calls the app: through the middleware chain the first time
** (HTTP or gRPC by what called it), then to an app entry. */
static size_t dispatch(gen *g, const gprog *p, gen_rng *r, uint32_t *fr, size_t n)
{
    static uint32_t http = UINT32_MAX, grpc = UINT32_MAX;
    uint32_t f = fr[n - 1];
    const uint32_t *mw = NULL;
    uint32_t nmw = 0;
    unsigned kind = GEN_ENTRY_OTHER;

    if (http == UINT32_MAX) {
        http = gen_func_find(g, "net/http.HandlerFunc.ServeHTTP");
        grpc = gen_func_find(g, "google.golang.org/grpc.(*Server).processUnaryRPC.func1");
    }
    if (f == http && (n < 2 || fr[n - 2] == must_find(g, "net/http.serverHandler.ServeHTTP"))) {
        mw = p->mw_http;
        nmw = p->nmw_http;
        kind = GEN_ENTRY_HTTP;
    } else if (f == grpc) {
        mw = p->mw_grpc;
        nmw = p->nmw_grpc;
        kind = GEN_ENTRY_GRPC;
    }
    for (uint32_t i = 0; i < nmw && n < GEN_WALK_MAX - 1; i++)
        fr[n++] = mw[i];
    fr[n++] = app_entry(p, r, kind);
    return n;
}

static const double pstop_cpu[] = { 0.0, 0.05, 0.10, 0.25, 0.30, 0.20 };

/* Walks P's graph from a scenario root (root first into FR); for HEAP the
** walk stops in app or library code and ends in the allocator. Returns
** the frame count, or 0 when the walk should be redrawn. */
static size_t walk(gen *g, const gprog *p, gen_rng *r, bool heap, uint32_t *fr)
{
    size_t n = walk_root(g, p, r, fr);

    while (n < GEN_WALK_MAX) {
        const gfunc *f = &g->funcs[fr[n - 1]];
        uint32_t next;
        if ((f->flags & GF_DISPATCH) && (f->ncallees == 0 || gen_rng_below(r, 10) < 8)) {
            n = dispatch(g, p, r, fr, n);
            continue;
        }
        else if ((f->flags & GF_RECURSIVE) && gen_rng_unit(r) < 0.3)
            next = fr[n - 1];
        else if (f->ncallees == 0 || gen_rng_unit(r) < (heap ? 0.2 : pstop_cpu[f->tier]))
            break;
        else
            next = f->callees[zipf_small(r, f->ncallees)];
        if (heap && g->funcs[next].tier >= T_RUNTIME)
            break;
        if (next == g->sys_entry && f->sys != UINT32_MAX && n + 3 <= GEN_WALK_MAX) {
            fr[n++] = next;             /* the caller's own system call */
            fr[n++] = g->sys_do;
            next = gen_rng_below(r, 10) ? f->sys : g->sys_exit;
        }
        fr[n++] = next;
    }
    if (heap) {
        int tier = g->funcs[fr[n - 1]].tier;
        if (tier != T_APP && tier != T_LIB)
            return 0;
        n += heap_tail(g, p, r, fr + n);
    }
    return n;
}

/* The site in CALLER that calls CALLEE: its callee index, or the "dynamic
** call" site after them (dispatch, scenario chains). */
static uint32_t call_site(const gen *g, uint32_t caller, uint32_t callee)
{
    const gfunc *f = &g->funcs[caller];
    for (uint32_t i = 0; i < f->ncallees; i++)
        if (f->callees[i] == callee)
            return i;
    return f->ncallees;
}

/* Interns the stack of frames FR[0..n) (root first) into the global stack
** table; returns its index. */
static uint32_t stack_add(gen *g, const gprog *p, gen_rng *r, const uint32_t *fr,
                          size_t n)
{
    uint32_t locs[GEN_WALK_MAX + 8];
    uint64_t h;
    uint32_t s;
    size_t k;

    for (k = 0; k < n; k++) {
        uint32_t f = fr[n - 1 - k];
        uint32_t site = k == 0
            ? g->funcs[f].ncallees + 1 + (uint32_t)gen_rng_below(r, GEN_SELF_SITES)
            : call_site(g, f, fr[n - k]);
        locs[k] = loc_get(g, p, f, site);
    }
    h = gen_hash(locs, n * sizeof *locs, 99);
    s = map_get(&g->stackkey, h);
    if (s != UINT32_MAX)
        return s;
    if (g->nstacks + 1 >= g->capstacks) {
        g->capstacks = g->capstacks ? g->capstacks * 2 : 8192;
        g->stack_off = gen_xrealloc(g->stack_off, (g->capstacks + 1) * sizeof *g->stack_off);
        g->objsize = gen_xrealloc(g->objsize, g->capstacks * sizeof *g->objsize);
        g->shifted = gen_xrealloc(g->shifted, g->capstacks);
    }
    if (g->nstack_locs + n > g->capstack_locs) {
        g->capstack_locs = g->capstack_locs * 2 + n + 65536;
        g->stack_locs = gen_xrealloc(g->stack_locs, g->capstack_locs * sizeof *g->stack_locs);
    }
    s = g->nstacks++;
    memcpy(g->stack_locs + g->nstack_locs, locs, n * sizeof *locs);
    g->stack_off[s] = g->nstack_locs;
    g->nstack_locs += n;
    g->stack_off[s + 1] = g->nstack_locs;
    /* allocation size: 16 B .. 1 MiB, geometric over powers of two */
    {
        unsigned e = 0;
        while (e < 16 && gen_rng_below(r, 100) < 62)
            e++;
        g->objsize[s] = (16u << e) * (1 + (uint32_t)gen_rng_below(r, 3));
    }
    g->shifted[s] = 0;
    for (k = 0; k < n; k++)
        if (fr[k] == g->shift_func)
            g->shifted[s] = 1;
    map_put(&g->stackkey, h, s);
    return s;
}

/* Draws WANT distinct stacks for P's CPU (or heap) pool, by rank. */
static void pool_build(gen *g, gprog *p, gen_rng *r, bool heap, uint32_t want)
{
    uint32_t fr[GEN_WALK_MAX + 8], *pool = gen_xmalloc(want * sizeof *pool), n = 0;
    gmapu seen = { 0 };

    for (uint64_t tries = 0; n < want && tries < 60ull * want; tries++) {
        size_t nf = walk(g, p, r, heap, fr);
        uint32_t *use = fr, s;
        if (nf < 8)
            continue;
        if (nf > GEN_MAX_DEPTH) {       /* keep the leaf-most frames */
            use = fr + (nf - GEN_MAX_DEPTH);
            nf = GEN_MAX_DEPTH;
        }
        s = stack_add(g, p, r, use, nf);
        if (map_get(&seen, s) == UINT32_MAX) {
            map_put(&seen, s, n);
            pool[n++] = s;
        }
    }
    map_free(&seen);
    if (heap) {
        p->heap = pool;
        p->nheap = n;
        alias_build(&p->aheap, n, 1.1);
    } else {
        p->cpu = pool;
        p->ncpu = n;
        alias_build(&p->acpu, n, 0.95 + 0.2 * gen_rng_unit(r));
    }
}

static void programs_build(gen *g)
{
    g->progs = gen_xcalloc(g->nprogs, sizeof *g->progs);
    for (uint32_t i = 0; i < g->nprogs; i++) {
        gprog *p = &g->progs[i];
        gen_rng r;
        double w;
        gen_rng_seed(&r, g->cfg.seed * 31 + i + 1);
        p->name = g->service_names[i];
        p->c = i % 4 == 3;
        p->mapping = map_add(g, gen_printf(g, "/usr/local/bin/%s", p->name),
                             0x400000, 0x4000000);
        for (int k = 0; gen_names_scenario(p->c, k, &w) != NULL; k++)
            p->scen_w[k] = w * (0.3 + 1.7 * gen_rng_unit(&r));
        gen_names_app(g, p, &r);
        pool_build(g, p, &r, false, g->cfg.pool_stacks);
        pool_build(g, p, &r, true, g->cfg.pool_stacks / 3);
    }
}

/* ---- construction ------------------------------------------------------ */

static void config_defaults(gen_config *c)
{
    if (c->ntargets == 0)
        c->ntargets = 50;
    if (c->types == 0)
        c->types = GEN_ALL_TYPES;
    if (c->nservices == 0)
        c->nservices = 8;
    if (c->nprograms == 0 || c->nprograms > c->nservices)
        c->nprograms = c->nservices < 8 ? c->nservices : 8;
    if (c->end_ms == 0)
        c->end_ms = 1717200000000LL;        /* 2024-06-01T00:00:00Z */
    if (c->step_ms <= 0)
        c->step_ms = 10000;
    if (c->min_stacks == 0)
        c->min_stacks = 100;
    if (c->max_stacks < c->min_stacks)
        c->max_stacks = c->min_stacks < 500 ? 500 : c->min_stacks;
    if (c->pool_stacks == 0)
        c->pool_stacks = 3000;
    if (c->pool_stacks < 2 * c->max_stacks)
        c->pool_stacks = 2 * c->max_stacks;
    if (c->app_functions < GEN_APP_ENTRIES + 8)
        c->app_functions = c->app_functions ? GEN_APP_ENTRIES + 8 : 450;
}

static void targets_build(gen *g)
{
    gen_rng r;

    gen_rng_seed(&r, g->cfg.seed ^ 0x7a7a7a7aULL);
    g->targets = gen_xcalloc(g->ntargets, sizeof *g->targets);
    for (uint32_t i = 0; i < g->ntargets; i++) {
        gtarget *t = &g->targets[i];
        double u = gen_rng_unit(&r);
        t->service = i % g->cfg.nservices;
        t->prog = t->service % g->nprogs;
        t->k = g->cfg.min_stacks +
               (uint32_t)gen_rng_below(&r, g->cfg.max_stacks - g->cfg.min_stacks + 1);
        t->cores = u * u * 3.0;             /* extra load: most pods idle-ish */
        t->long_lived = g->cfg.short_ms == 0 || i < g->cfg.nlong;
        gen_names_labels(g, t, i, &r);
    }
}

gen *gen_new(const gen_config *cfg)
{
    gen *g = gen_xcalloc(1, sizeof *g);
    int64_t span;

    g->cfg = *cfg;
    config_defaults(&g->cfg);
    gen_rng_seed(&g->rng, g->cfg.seed);
    g->nprogs = g->cfg.nprograms;
    g->ntargets = g->cfg.ntargets;
    for (int t = 0; t < GEN_NTYPES; t++)
        if (g->cfg.types & (1u << t))
            g->types[g->ntypes++] = t;
    g->service_names = gen_xcalloc(g->cfg.nservices, sizeof *g->service_names);
    for (uint32_t s = 0; s < g->cfg.nservices; s++)
        g->service_names[s] = (char *)gen_names_service(g, s);
    g->map_kernel = map_add(g, "[kernel.kallsyms]", 0xffffffff81000000ULL, 0x2000000);
    g->map_libc = map_add(g, "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000ULL,
                          0x200000);
    gen_names_shared(g);
    g->shift_func = must_find(g, "encoding/json.(*encodeState).marshal");
    programs_build(g);
    targets_build(g);
    span = g->cfg.span_ms > g->cfg.step_ms ? g->cfg.span_ms : g->cfg.step_ms;
    g->nsteps = (size_t)(span / g->cfg.step_ms);
    g->short_steps = g->cfg.short_ms > 0 ? (size_t)(g->cfg.short_ms / g->cfg.step_ms) : g->nsteps;
    if (g->short_steps == 0)
        g->short_steps = 1;
    if (g->short_steps > g->nsteps)
        g->short_steps = g->nsteps;
    g->stamp = gen_xcalloc(g->nstacks, sizeof *g->stamp);
    g->pos = gen_xcalloc(g->nstacks, sizeof *g->pos);
    gen_rewind(g);
    return g;
}

void gen_free(gen *g)
{
    if (g == NULL)
        return;
    for (uint32_t i = 0; i < g->nfuncs; i++)
        free(g->funcs[i].callees);
    for (uint32_t i = 0; i < g->nprogs; i++) {
        free(g->progs[i].cpu);
        free(g->progs[i].heap);
        alias_free(&g->progs[i].acpu);
        alias_free(&g->progs[i].aheap);
    }
    for (size_t i = 0; i < g->arena.nblocks; i++)
        free(g->arena.blocks[i]);
    for (int k = 0; k < 2; k++) {
        free(g->draw[k].pairs);
    }
    map_free(&g->fname);
    map_free(&g->lockey);
    map_free(&g->stackkey);
    free(g->arena.blocks);
    free(g->funcs);
    free(g->apis);
    free(g->libc_apis);
    free(g->maps);
    free(g->locs);
    free(g->stack_locs);
    free(g->stack_off);
    free(g->objsize);
    free(g->shifted);
    free(g->progs);
    free(g->service_names);
    free(g->targets);
    free(g->stamp);
    free(g->pos);
    free(g->out);
    free(g->em_map);
    free(g->em_func);
    free(g->em_loc);
    free(g->em_stack);
    free(g->c_map_stamp);
    free(g->c_func_stamp);
    free(g->c_loc_stamp);
    free(g->c_map);
    free(g->c_func);
    free(g->c_loc);
    free(g);
}

/* ---- accessors ------------------------------------------------------------- */

size_t gen_nseries(const gen *g) { return (size_t)g->ntargets * g->ntypes; }
size_t gen_nstacks(const gen *g) { return g->nstacks; }
size_t gen_nlocations(const gen *g) { return g->nlocs; }
size_t gen_nfunctions(const gen *g) { return g->nfuncs; }
size_t gen_nmappings(const gen *g) { return g->nmaps; }
size_t gen_nsteps(const gen *g) { return g->nsteps; }

int gen_series_type(const gen *g, size_t i) { return g->types[i % g->ntypes]; }

const ember_label *gen_series_labels(const gen *g, size_t i, size_t *n)
{
    *n = EM_LEN(g->targets[0].labels);
    return g->targets[i / g->ntypes].labels;
}

const char *gen_series_label(const gen *g, size_t i, const char *name)
{
    const gtarget *t = &g->targets[i / g->ntypes];
    for (size_t k = 0; k < EM_LEN(t->labels); k++)
        if (strcmp(t->labels[k].name, name) == 0)
            return t->labels[k].value;
    return "";
}

uint32_t gen_series_service(const gen *g, size_t i)
{
    return g->targets[i / g->ntypes].service;
}

const char *gen_service_name(const gen *g, uint32_t s)
{
    return g->service_names[s];
}

const char *gen_shift_function(const gen *g) { return g->funcs[g->shift_func].name; }
const char *gen_function_name(const gen *g, uint32_t f) { return g->funcs[f].name; }
const char *gen_function_file(const gen *g, uint32_t f) { return g->funcs[f].file; }
int64_t gen_function_line(const gen *g, uint32_t f) { return g->funcs[f].line; }
const char *gen_mapping_file(const gen *g, uint32_t m) { return g->maps[m].file; }

void gen_mapping_info(const gen *g, uint32_t m, uint64_t *start, uint64_t *limit,
                      const char **build_id)
{
    *start = g->maps[m].start;
    *limit = g->maps[m].limit;
    *build_id = g->maps[m].build_id;
}

void gen_location(const gen *g, uint32_t l, uint32_t *function, int64_t *line,
                  uint64_t *address, uint32_t *mapping)
{
    const gloc *loc = &g->locs[l];
    *function = loc->func;
    *line = loc->line;
    *address = loc->addr;
    *mapping = loc->mapping;
}

const uint32_t *gen_stack(const gen *g, uint32_t s, size_t *n)
{
    *n = (size_t)(g->stack_off[s + 1] - g->stack_off[s]);
    return g->stack_locs + g->stack_off[s];
}

/* ---- iteration ------------------------------------------------------------ */

void gen_rewind(gen *g)
{
    g->step = g->target = g->typei = 0;
    g->draw[0].key = g->draw[1].key = 0;
}

void gen_set_stack_ids(gen *g, const uint32_t *map)
{
    g->stack_map = map;
}

static int cmp_u32pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static int cmp_sample(const void *a, const void *b)
{
    const ember_sample *x = a, *y = b;
    return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Samples the pool of target T at the current step as a profiler does:
** draws until the profile holds ~t->k distinct stacks, then draws more for
** busy pods (only on stacks already seen). Gives (pool index, count) pairs
** by pool index. Cached per kind, since two series share each draw. */
static struct gdraw *draw_get(gen *g, const gtarget *t, size_t ti, int kind)
{
    struct gdraw *d = &g->draw[kind];
    const gprog *p = &g->progs[t->prog];
    const galias *a = kind ? &p->aheap : &p->acpu;
    const uint32_t *pool = kind ? p->heap : p->cpu;
    uint64_t key = ((uint64_t)ti << 32 | g->step) + 1, draws, extra;
    uint32_t k;
    gen_rng r;

    if (d->key == key)
        return d;
    d->key = key;
    d->n = 0;
    gen_rng_seed(&r, g->cfg.seed ^ mix64(key * 4 + (uint64_t)kind));
    k = (uint32_t)(t->k * (0.9 + 0.2 * gen_rng_unit(&r)));
    if (kind)
        k = k * 3 / 5;
    if (k > a->n / 2)
        k = a->n / 2;
    if (k == 0)
        k = 1;
    if (d->cap < k) {
        d->cap = k;
        d->pairs = gen_xrealloc(d->pairs, 2 * (size_t)k * sizeof *d->pairs);
    }
    if (++g->stampv == 0) {
        memset(g->stamp, 0, g->nstacks * sizeof *g->stamp);
        g->stampv = 1;
    }
    for (draws = 0; d->n < k && draws < 64ull * k; draws++) {
        uint32_t s = pool[alias_draw(a, &r)];
        if (g->stamp[s] != g->stampv) {
            g->stamp[s] = g->stampv;
            g->pos[s] = d->n;
            d->pairs[2 * d->n] = s;
            d->pairs[2 * d->n++ + 1] = 1;
        } else {
            d->pairs[2 * g->pos[s] + 1]++;
        }
    }
    extra = (uint64_t)((double)draws * t->cores);
    while (extra-- > 0) {
        uint32_t s = pool[alias_draw(a, &r)];
        if (g->stamp[s] == g->stampv)
            d->pairs[2 * g->pos[s] + 1]++;
    }
    qsort(d->pairs, d->n, 2 * sizeof *d->pairs, cmp_u32pair);
    return d;
}

/* Value of pool stack S with COUNT draws in a profile of TYPE. */
static int64_t value_of(const gen *g, int type, size_t ti, uint32_t s,
                        uint32_t count)
{
    uint64_t h;
    double nobj;

    switch (type) {
    case GEN_CPU_SAMPLES:
        return count;
    case GEN_CPU_NANOS:
        return (int64_t)count * CPU_PERIOD_NS;
    case GEN_ALLOC_SPACE:
        return (int64_t)count * g->objsize[s] * 32;
    default:                    /* inuse: stable per (target, stack), drifting */
        h = mix64(((uint64_t)ti << 32) ^ s ^ g->cfg.seed);
        nobj = (double)(1 + h % 256) *
               (1.0 + 0.08 * sin(6.283185307179586 *
                                 ((double)g->step / 360.0 + (double)(h >> 40) / 16777216.0)));
        return (int64_t)g->objsize[s] * (nobj < 1 ? 1 : (int64_t)nobj);
    }
}

static void profile_make(gen *g, size_t ti, int type, ember_profile *out)
{
    const gtarget *t = &g->targets[ti];
    const struct gdraw *d = draw_get(g, t, ti, type >= GEN_ALLOC_SPACE);
    int64_t time_ms = g->cfg.end_ms - (int64_t)(g->nsteps - 1 - g->step) * g->cfg.step_ms;
    bool shift = g->cfg.shift_ms != 0 && time_ms >= g->cfg.shift_ms &&
                 t->service == g->cfg.shift_service;

    if (g->outcap < d->n) {
        g->outcap = d->n;
        g->out = gen_xrealloc(g->out, g->outcap * sizeof *g->out);
    }
    for (uint32_t i = 0; i < d->n; i++) {
        uint32_t s = d->pairs[2 * i], c = d->pairs[2 * i + 1];
        if (shift && g->shifted[s])
            c *= 4;
        g->out[i].stack = g->stack_map ? g->stack_map[s] : s;
        g->out[i].value = value_of(g, type, ti, s, c);
    }
    if (g->stack_map != NULL)
        qsort(g->out, d->n, sizeof *g->out, cmp_sample);
    memset(out, 0, sizeof *out);
    out->sz = sizeof *out;
    out->type = gen_type[type];
    out->labels = t->labels;
    out->nlabels = EM_LEN(t->labels);
    out->time_ms = time_ms;
    out->duration_ns = g->cfg.step_ms * 1000000;
    out->period = type >= GEN_ALLOC_SPACE ? HEAP_PERIOD : CPU_PERIOD_NS;
    out->samples = g->out;
    out->nsamples = d->n;
}

bool gen_next_profile(gen *g, ember_profile *out)
{
    for (;;) {
        if (g->step >= g->nsteps)
            return false;
        if (g->target >= g->ntargets) {
            g->step++;
            g->target = 0;
            g->typei = 0;
        } else if (g->typei >= (size_t)g->ntypes) {
            g->target++;
            g->typei = 0;
        } else if (!g->targets[g->target].long_lived &&
                   g->step < g->nsteps - g->short_steps) {
            g->target++;
        } else {
            profile_make(g, g->target, g->types[g->typei++], out);
            return true;
        }
    }
}

size_t gen_profile_series(const gen *g)
{
    return g->target * (size_t)g->ntypes + g->typei - 1;
}

void gen_count(gen *g, uint64_t *nprofiles, uint64_t *nsamples)
{
    ember_profile p;

    *nprofiles = *nsamples = 0;
    gen_rewind(g);
    while (gen_next_profile(g, &p)) {
        (*nprofiles)++;
        *nsamples += p.nsamples;
    }
    gen_rewind(g);
}
