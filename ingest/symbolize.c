/*
** ingest/symbolize.c: the symbolizer object (ingest/symbolize.h): raw
** stacks to em_pset locations, through the process captures
** (ingest/symb_proc.c), the held ELF files (ingest/symb_elf.c) and
** kallsyms (ingest/symb_kernel.c), with a frame cache keyed by
** (build id, ELF address) so that every process running the same binary
** shares what was resolved.
**
** A user frame becomes: runtime address -> the capture's executable
** mapping -> file offset -> ELF address (PT_LOAD) -> frames. The location
** stores the ELF address and a mapping whose range is in ELF addresses too
** (runtime range minus the load bias), so the same library in two
** processes is one mapping and one set of locations, and (build id,
** address) can be symbolized again later. Frames that do not resolve keep
** their mapping and address with no lines; addresses outside every
** executable mapping go to the unknown mapping (0) with the raw address.
** A live process whose capture misses an address is captured again once
** per sweep (it may have loaded a library since).
*/
#include <string.h>

#include "ingest/symb_int.h"

#define KALLSYMS "/proc/kallsyms"

int em_symbolizer_new(em_symbolizer **out)
{
    em_symbolizer *s = em_calloc(1, sizeof *s);

    *out = s;
    if (s == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory");
    s->cache.limit = EM_SYMB_CACHE_ENTRIES;
    return EMBER_OK;
}

/* ---- the frame cache ------------------------------------------------------- */

static uint64_t centry_hash(uint64_t bid_hash, uint64_t addr)
{
    uint64_t k[2] = { bid_hash, addr };

    return em_hash64(k, sizeof k, 0x63616368);
}

/* A build id hash and address looked up among a generation's entries. */
typedef struct centry_key {
    const em_symb_centry *ents;
    uint64_t bid_hash, addr;
} centry_key;

static bool centry_is(const centry_key *k, uint32_t idx)
{
    const em_symb_centry *e = &k->ents[idx];

    return e->bid_hash == k->bid_hash && e->addr == k->addr;
}

#define EM_HT_NAME cgen_ix
#define EM_HT_KEY const centry_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && centry_is(k, (e)->idx1 - 1))
#define EM_HT_WHAT "symbolize: cache index"
#include "ingest/hindex.h"

static em_symb_centry *cgen_find(em_symb_cgen *g, uint64_t h,
                                 uint64_t bid_hash, uint64_t addr)
{
    centry_key k = { g->ents, bid_hash, addr };
    struct em_hslot *sl = cgen_ix_find(&g->index, h, &k);

    return sl != NULL ? &g->ents[sl->idx1 - 1] : NULL;
}

/* Adds E (hash H), which G does not hold, to G, which owns E's result from
** then on. */
static int cgen_add(em_symb_cgen *g, uint64_t h, const em_symb_centry *e)
{
    centry_key k = { NULL, e->bid_hash, e->addr };
    struct em_hslot *sl;
    bool found;

    em_symb_centry *ne = em_grow(g->ents, &g->cap, g->n + 1, sizeof *ne);

    if (ne == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a cache "
                      "of %zu", g->n + 1);
    g->ents = ne;
    k.ents = g->ents;           /* where they are after growing */
    if ((sl = cgen_ix_insert(&g->index, h, &k, &found)) == NULL)
        return EMBER_ENOMEM;
    g->ents[g->n] = *e;
    *sl = (struct em_hslot){ h, (uint32_t)++g->n };
    return EMBER_OK;
}

static void cgen_free(em_symb_cgen *g)
{
    for (size_t i = 0; i < g->n; i++)
        em_free(g->ents[i].res);
    em_free(g->ents);
    cgen_ix_free(&g->index);
    memset(g, 0, sizeof *g);
}

/* Adds E to the young generation, first aging it when it is full; E's
** result is freed if that fails. */
static int cache_put(em_symb_cache *c, uint64_t h, em_symb_centry *e)
{
    int rc;

    if (c->gen[0].n >= c->limit) {
        cgen_free(&c->gen[1]);
        c->gen[1] = c->gen[0];
        memset(&c->gen[0], 0, sizeof c->gen[0]);
    }
    if ((rc = cgen_add(&c->gen[0], h, e)) != EMBER_OK)
        em_free(e->res);
    return rc;
}

/* The frames of ADDR in F (a lookup address), from the cache or libdw;
** *OUT NULL when nothing resolves. Valid until the next lookup. */
static int cache_get(em_symbolizer *s, em_symb_file *f, uint64_t addr,
                     const em_symb_res **out)
{
    uint64_t h = centry_hash(f->bid_hash, addr);
    em_symb_centry *e = cgen_find(&s->cache.gen[0], h, f->bid_hash, addr);
    em_symb_centry fresh = { f->bid_hash, addr, NULL, false };
    int rc;

    if (e == NULL &&
        (e = cgen_find(&s->cache.gen[1], h, f->bid_hash, addr)) != NULL &&
        !e->moved) {
        fresh.res = e->res;     /* promoted: the old generation lets go */
        e->res = NULL;
        e->moved = true;
        s->stats.hits++;
        rc = cache_put(&s->cache, h, &fresh);
        *out = rc == EMBER_OK ? fresh.res : NULL;
        return rc;
    }
    if (e != NULL && !e->moved) {
        s->stats.hits++;
        *out = e->res;
        return EMBER_OK;
    }
    s->stats.misses++;
    if ((rc = em_symb_file_resolve(f, addr, &fresh.res)) != EMBER_OK)
        return rc;
    rc = cache_put(&s->cache, h, &fresh);
    *out = rc == EMBER_OK ? fresh.res : NULL;
    return rc;
}

/* ---- into the set ---------------------------------------------------------- */

/* Adds R's frames as one location of mapping MAPPING1 (index plus one) at
** ADDRESS, or a bare one when R is NULL (counted unresolved). */
static int loc_add(em_symbolizer *s, em_pset *set, uint32_t mapping1,
                   uint64_t address, const em_symb_res *r, uint32_t *loc)
{
    em_pset_line lines[EM_SYMB_MAX_INLINE];
    uint32_t n = r != NULL ? r->nframes : 0;
    int rc;

    if (n == 0)
        s->stats.unresolved++;
    for (uint32_t i = 0; i < n; i++) {
        const em_symb_frame *fr = &r->frames[i];
        ember_function fn = { fr->name, fr->system_name, fr->file,
                              fr->start_line };
        if ((rc = em_pset_function(set, &fn, &lines[i].function)) != 0)
            return rc;
        lines[i].line = fr->line;
    }
    return em_pset_location(set, mapping1, address, lines, n, loc);
}

/* The mapping of M in ELF addresses (runtime addresses when M has no
** file), added to SET; its index plus one in *IDX1. */
static int map_add(em_pset *set, const em_symb_map *m, uint32_t *idx1)
{
    ember_mapping em = { m->start - m->bias, m->end - m->bias, m->pgoff,
                         m->name, m->file != NULL ? m->file->build_id : "" };
    int rc = em_pset_mapping(set, &em, idx1);

    *idx1 += 1;
    return rc;
}

/* The executable mapping of P holding ADDR, capturing P again (once per
** sweep) when it has none: the process may have loaded a library since. */
static const em_symb_map *user_map(em_symbolizer *s, uint32_t pid,
                                   em_symb_proc **pp, uint64_t addr,
                                   int *rc)
{
    const em_symb_map *m = *pp != NULL ? em_symb_proc_map(*pp, addr) : NULL;

    *rc = EMBER_OK;
    if (m != NULL || *pp == NULL || (*pp)->exited ||
        (*pp)->capture_gen == s->sweeps)
        return m;
    (*pp)->capture_gen = s->sweeps;
    if ((*rc = em_symbolizer_track(s, pid)) == EMBER_ENOMEM)
        return NULL;
    *rc = EMBER_OK;
    em_err_clear();
    *pp = em_symb_proc_find(s, pid);
    return *pp != NULL ? em_symb_proc_map(*pp, addr) : NULL;
}

/* A frame in code no ELF file describes (a JIT's anonymous memory): named
** by the process's perf map when it has one, else a bare address. */
static int jit_frame(em_symbolizer *s, em_pset *set, em_symb_proc *p,
                     uint32_t map1, uint64_t addr, bool leaf, uint32_t *loc)
{
    const char *name = NULL;
    em_pset_line line = { 0, 0 };
    int rc = p != NULL ? em_symb_perfmap_lookup(s, p, leaf || addr == 0
                                                      ? addr : addr - 1,
                                                &name)
                       : EMBER_OK;

    if (rc != EMBER_OK)
        return rc;
    if (name == NULL)
        return loc_add(s, set, map1, addr, NULL, loc);
    ember_function fn = { name, name, "", 0 };
    if ((rc = em_pset_function(set, &fn, &line.function)) != EMBER_OK)
        return rc;
    return em_pset_location(set, map1, addr, &line, 1, loc);
}

/* One user frame: ADDR of PID, a return address unless LEAF. */
static int user_frame(em_symbolizer *s, em_pset *set, uint32_t pid,
                      em_symb_proc **pp, uint64_t addr, bool leaf,
                      uint32_t *loc)
{
    const em_symb_res *r = NULL;
    const em_symb_map *m;
    uint64_t vaddr;
    uint32_t map1;
    int rc;

    m = user_map(s, pid, pp, addr, &rc);
    if (rc != EMBER_OK)
        return rc;
    if (m == NULL)
        return loc_add(s, set, 0, addr, NULL, loc);
    if ((rc = map_add(set, m, &map1)) != EMBER_OK)
        return rc;
    if (m->file == NULL)
        return jit_frame(s, set, *pp, map1, addr, leaf, loc);
    if (!em_symb_file_vaddr(m->file, addr - m->start + m->pgoff, &vaddr))
        return loc_add(s, set, map1, addr - m->bias, NULL, loc);
    /* A return address is the instruction after the call: look up the
    ** call itself, which may be the last one of its function or inline. */
    rc = cache_get(s, m->file, leaf || vaddr == 0 ? vaddr : vaddr - 1, &r);
    if (rc != EMBER_OK)
        return rc;
    return loc_add(s, set, map1, vaddr, r, loc);
}

int em_symbolize_user(em_symbolizer *s, em_pset *set, uint32_t pid,
                      const uint64_t *addrs, size_t n, uint32_t *locs)
{
    em_symb_proc *p = em_symb_proc_find(s, pid);
    int rc;

    if (p == NULL && n > 0) {
        rc = em_symbolizer_track(s, pid);
        if (rc == EMBER_ENOMEM)
            return rc;
        em_err_clear();         /* gone or unreadable: bare addresses */
        p = em_symb_proc_find(s, pid);
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = user_frame(s, set, pid, &p, addrs[i], i == 0,
                             &locs[i])) != EMBER_OK)
            return rc;
    return EMBER_OK;
}

/* ---- kernel ---------------------------------------------------------------- */

/* Loads kallsyms at the first use; NULL when it cannot be read. */
static int kernel_get(em_symbolizer *s, em_symb_kernel **out)
{
    int rc = EMBER_OK;

    if (!s->kernel_tried) {
        s->kernel_tried = true;
        rc = em_symb_kernel_load(KALLSYMS, &s->kernel);
        if (rc == EMBER_ENOMEM)
            s->kernel_tried = false;
        else
            rc = EMBER_OK;
        em_err_clear();
    }
    *out = s->kernel;
    return rc == EMBER_ENOMEM ? em_err(rc, "symbolize: out of memory for "
                                       "kallsyms") : EMBER_OK;
}

bool em_symbolizer_kernel_hidden(em_symbolizer *s)
{
    em_symb_kernel *k = NULL;

    return kernel_get(s, &k) != EMBER_OK || k == NULL ||
           em_symb_kernel_hidden(k);
}

static int kernel_frame(em_symbolizer *s, em_pset *set,
                        const em_symb_kernel *k, uint64_t addr, bool leaf,
                        uint32_t *loc)
{
    em_symb_ksym ks;
    em_pset_line line = { 0, 0 };
    uint32_t map1;
    int rc;

    if (k == NULL)
        return loc_add(s, set, 0, addr, NULL, loc);
    em_symb_kernel_lookup(k, leaf || addr == 0 ? addr : addr - 1, &ks);
    if ((rc = em_pset_mapping(set, &ks.mapping, &map1)) != EMBER_OK)
        return rc;
    map1++;
    if (ks.name == NULL)
        return loc_add(s, set, map1, addr, NULL, loc);
    ember_function fn = { ks.name, ks.name, "", 0 };
    if ((rc = em_pset_function(set, &fn, &line.function)) != EMBER_OK)
        return rc;
    return em_pset_location(set, map1, addr, &line, 1, loc);
}

int em_symbolize_kernel(em_symbolizer *s, em_pset *set, const uint64_t *addrs,
                        size_t n, uint32_t *locs)
{
    em_symb_kernel *k = NULL;
    int rc = n > 0 ? kernel_get(s, &k) : EMBER_OK;

    for (size_t i = 0; rc == EMBER_OK && i < n; i++)
        rc = kernel_frame(s, set, k, addrs[i], i == 0, &locs[i]);
    return rc;
}

/* ---- lifetime and metrics ------------------------------------------------ */

void em_symbolizer_stats(const em_symbolizer *s, em_symb_stats *out)
{
    *out = s->stats;
    out->processes = s->nprocs;
    out->files = s->nfiles;
}

void em_symbolizer_free(em_symbolizer *s)
{
    if (s == NULL)
        return;
    em_symb_procs_free(s);
    cgen_free(&s->cache.gen[0]);
    cgen_free(&s->cache.gen[1]);
    em_symb_kernel_free(s->kernel);
    em_free(s);
}
