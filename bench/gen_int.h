/*
** bench/gen_int.h: the generator's private structures, shared by gen.c (call
** graphs, stack pools, series, profiles), gen_names.c (realistic names and
** the hand-written call paths) and gen_ember.c (interning, collapsed text).
*/
#ifndef BENCH_GEN_INT_H
#define BENCH_GEN_INT_H

#include "bench/gen.h"

/* Tiers of a call graph, root side first. */
enum { T_ENTRY, T_APP, T_LIB, T_RUNTIME, T_LIBC, T_KERNEL };

enum {
    GF_DISPATCH = 1,    /* calls into the program's app entries */
    GF_RECURSIVE = 2,   /* calls itself, often */
    GF_APIS = 4         /* may be called from app code (an API entry) */
};

#define GEN_MAX_DEPTH 64        /* profilers keep the leaf-most 64 frames */
#define GEN_WALK_MAX 96
#define GEN_SELF_SITES 3        /* sample points inside a function */
#define GEN_APP_ENTRIES 24      /* handlers / workers per program */
#define GEN_ENTRY_KINDS 3       /* who calls an entry: app_entry's KIND */
enum { GEN_ENTRY_HTTP, GEN_ENTRY_GRPC, GEN_ENTRY_OTHER };
#define EM_LEN(a) (sizeof(a) / sizeof((a)[0]))

typedef struct gfunc {
    const char *name, *file;
    int64_t line;
    uint8_t tier, flags;
    uint16_t prog;              /* owning program, 0xffff when shared */
    uint32_t sys;               /* the __x64_sys_* it enters, or UINT32_MAX */
    uint32_t *callees;          /* distinct, most frequent first */
    uint32_t ncallees, capcallees;
} gfunc;

typedef struct gloc {
    uint32_t func, mapping, site;
    int64_t line;
    uint64_t addr;
} gloc;

typedef struct gmap {
    const char *file, *build_id;
    uint64_t start, limit;
} gmap;

typedef struct galias {         /* Vose's alias table over ranks 0..n-1 */
    uint32_t n;
    float *prob;
    uint32_t *alias;
} galias;

typedef struct gprog {
    const char *name;
    bool c;                     /* a C program (else Go) */
    uint32_t mapping;           /* its binary */
    uint32_t app0, napp;        /* its app functions in gen.funcs */
    uint32_t mw_http[24], nmw_http; /* middleware frames before a handler */
    uint32_t mw_grpc[24], nmw_grpc;
    double scen_w[16];          /* scenario weights */
    uint32_t *cpu, ncpu;        /* pool: global stack indexes, by rank */
    uint32_t *heap, nheap;
    galias acpu, aheap;
} gprog;

typedef struct gtarget {
    ember_label labels[8];      /* sorted by name */
    uint32_t service, prog;
    uint32_t k;                 /* typical distinct stacks per profile */
    double cores;               /* load scale */
    bool long_lived;
} gtarget;

typedef struct gmapu {          /* open-addressing u64 -> u32 */
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;
} gmapu;

typedef struct garena {
    char *cur;
    size_t left;
    char **blocks;
    size_t nblocks;
} garena;

struct gen {
    gen_config cfg;
    garena arena;
    gen_rng rng;

    gfunc *funcs;
    uint32_t nfuncs, capfuncs;
    gmapu fname;                /* name hash -> shared function */
    uint32_t *apis;             /* functions app code calls, by popularity */
    uint32_t napis;
    uint32_t *libc_apis;
    uint32_t nlibc_apis;

    gmap *maps;
    uint32_t nmaps, map_kernel, map_libc;
    gloc *locs;
    uint32_t nlocs, caplocs;
    gmapu lockey;               /* (mapping, func, site) -> location */

    uint32_t *stack_locs;       /* all stacks' locations, leaf first */
    size_t nstack_locs, capstack_locs;
    uint64_t *stack_off;        /* [nstacks + 1] */
    uint32_t nstacks, capstacks;
    gmapu stackkey;
    uint32_t *objsize;          /* per stack: allocation size (heap) */
    uint8_t *shifted;           /* per stack: passes the shift function */
    uint32_t shift_func;
    uint32_t sys_entry, sys_do, sys_exit;   /* kernel entry frames */

    gprog *progs;
    uint32_t nprogs;
    char **service_names;
    gtarget *targets;
    uint32_t ntargets;
    int types[GEN_NTYPES];      /* enabled types, in order */
    int ntypes;
    size_t nsteps, short_steps;

    /* iteration */
    size_t step, target, typei;
    uint32_t *stamp;            /* per stack: draw stamp */
    uint32_t *pos;              /* per stack: its index in the draw */
    uint32_t stampv;
    struct gdraw {
        uint64_t key;           /* (target, step) + 1; 0: empty */
        uint32_t *pairs;        /* (pool index, count), by pool index */
        uint32_t n, cap;
    } draw[2];                  /* CPU, heap */
    ember_sample *out;
    size_t outcap;
    const uint32_t *stack_map;

    /* Ember ids (gen_ember.c) */
    uint32_t *em_map, *em_func, *em_loc, *em_stack;
    uint32_t *c_map_stamp, *c_func_stamp, *c_loc_stamp;
    uint32_t *c_map, *c_func, *c_loc;
    uint32_t c_stamp;
};

/* gen.c helpers used by the other files */
void *gen_xmalloc(size_t n);
void *gen_xcalloc(size_t n, size_t size);
void *gen_xrealloc(void *p, size_t n);
char *gen_strdup(gen *g, const char *s);
char *gen_printf(gen *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
uint64_t gen_hash(const void *p, size_t n, uint64_t seed);
uint32_t gen_func_add(gen *g, const char *name, const char *file,
                      int64_t line, int tier, uint16_t prog);
uint32_t gen_func_find(const gen *g, const char *name);    /* UINT32_MAX */
void gen_edge_add(gen *g, uint32_t from, uint32_t to);

/* gen_names.c */
void gen_names_shared(gen *g);          /* runtime, libraries, libc, kernel */
void gen_names_app(gen *g, gprog *p, gen_rng *r);
const char *gen_names_service(gen *g, uint32_t s);
void gen_names_labels(gen *g, gtarget *t, uint32_t index, gen_rng *r);
/* Scenario I of a Go (or C) program: root chain, "@" = an app entry, and
** its base weight. NULL past the last. */
const char *gen_names_scenario(bool c, int i, double *weight);

#endif /* BENCH_GEN_INT_H */
