/*
** tests/unit/test_block.c: block files (engine/block_write.c,
** engine/block_read.c).
**
** Blocks are built here two ways: from a small synthetic model whose every
** table the test keeps beside the builder (so that each table read back is
** compared with what went in, by content, whatever the ids became), and
** from real pprof files (tests/data/pprof, or the directory named by
** EMBER_BLOCK_DATA, e.g. bench's 600 Go profiles), decoded by the importer
** and fed to the builder as compaction will. The real block's sections are
** measured in bytes per distinct stack.
**
** Damage: every bit of a small block is flipped in turn, in place, and
** the file read through every door;
** each flip must fail with ECORRUPT or EFORMAT somewhere, or leave what is
** read exactly as before. Allocation failures are injected at every call.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/block.h"
#include "engine/compact.h"
#include "engine/store.h"
#include "ingest/ingest.h"
#include "ingest/pset.h"
#include "tests/unit/common/testutil.h"

#define OK(x) assert_int_equal((x), EMBER_OK)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t bstr(em_bbuild *b, const char *s)
{
    uint32_t id;

    OK(em_bbuild_string(b, s, strlen(s), &id));
    return id;
}

/* ---- a block from real profiles ----------------------------------------- */

/* One profile of a series, its samples summed per node and sorted. */
typedef struct rprof {
    int64_t t, d, p;
    uint32_t *stk;
    int64_t *val;
    uint32_t n;
} rprof;

typedef struct rser {
    rprof *ps;
    size_t n, cap;
} rser;

typedef struct rblock {
    em_bbuild *b;
    rser *ser;
    size_t nser;
    uint8_t *used;                  /* per node: some sample names it */
    size_t capused;
    uint64_t files, samples;
} rblock;

static int cmp_u32v(const void *x, const void *y)
{
    const uint32_t *a = x, *c = y;

    return (a[0] > c[0]) - (a[0] < c[0]);
}

/* The series of pset profile P, interned. */
static uint32_t real_series(rblock *r, const em_pset_profile *p)
{
    uint32_t names[EM_MAX_LABELS], values[EM_MAX_LABELS], id;

    for (size_t i = 0; i < p->nlabels; i++) {
        names[i] = bstr(r->b, p->labels[i].name);
        values[i] = bstr(r->b, p->labels[i].value);
    }
    OK(em_bbuild_series(r->b, bstr(r->b, p->type), names, values,
                        p->nlabels, &id));
    if (id >= r->nser) {
        r->ser = realloc(r->ser, (id + 1) * sizeof *r->ser);
        memset(r->ser + r->nser, 0, (id + 1 - r->nser) * sizeof *r->ser);
        r->nser = id + 1;
    }
    return id;
}

/* Interns S's symbols; SID[i] gets stack i's node. */
static void real_symbols(rblock *r, const em_pset *s, uint32_t *sid)
{
    uint32_t *mid = calloc(s->nmappings + 1, sizeof *mid);
    uint32_t *fid = calloc(s->nfunctions + 1, sizeof *fid);
    uint32_t *lid = calloc(s->nlocs + 1, sizeof *lid);
    uint32_t *tmp = calloc(s->max_depth + EM_PSET_MAX_LINES + 1, 4);
    int64_t lines[EM_PSET_MAX_LINES];

    for (size_t i = 0; i < s->nmappings; i++) {
        const ember_mapping *m = &s->mappings[i];
        OK(em_bbuild_mapping(r->b, m->start, m->limit, m->offset,
                             bstr(r->b, m->file), bstr(r->b, m->build_id),
                             &mid[i + 1]));
    }
    for (size_t i = 0; i < s->nfunctions; i++) {
        const ember_function *f = &s->functions[i];
        OK(em_bbuild_function(r->b, bstr(r->b, f->name),
                              bstr(r->b, f->system_name),
                              bstr(r->b, f->file), f->start_line, &fid[i]));
    }
    for (size_t i = 0; i < s->nlocs; i++) {
        const em_pset_loc *l = &s->locs[i];
        for (size_t j = 0; j < l->nlines; j++) {
            tmp[j] = fid[s->lines[l->first + j].function];
            lines[j] = s->lines[l->first + j].line;
        }
        OK(em_bbuild_location(r->b, mid[l->mapping], l->address, tmp, lines,
                              l->nlines, &lid[i]));
    }
    for (size_t i = 0; i < s->nstacks; i++) {
        const em_pset_stack_ent *e = &s->stacks[i];
        for (uint32_t j = 0; j < e->n; j++)
            tmp[j] = lid[s->pool[e->off + j]];
        OK(em_bbuild_stack(r->b, tmp, e->n, &sid[i]));
    }
    free(mid), free(fid), free(lid), free(tmp);
}

/* Adds pset profile K's samples (pairs of node, value) as a profile. */
static void real_profile(rblock *r, const em_pset *s, size_t k,
                         const uint32_t *sid, uint32_t series)
{
    const em_pset_profile *p = &s->profiles[k];
    rser *rs = &r->ser[series];
    uint64_t (*v)[2] = calloc(p->nsamples + 1, sizeof *v);
    rprof *o;
    size_t n = 0, m = 0;

    for (size_t i = 0; i < s->nsamples; i++)
        if (s->samples[i].profile == k) {
            v[n][0] = sid[s->samples[i].stack];
            v[n++][1] = (uint64_t)s->samples[i].value;
        }
    qsort(v, n, sizeof *v, cmp_u32v);
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 16;
        rs->ps = realloc(rs->ps, rs->cap * sizeof *rs->ps);
    }
    o = &rs->ps[rs->n++];
    *o = (rprof){ p->time_ms, p->duration_ns, p->period,
                  malloc((n + 1) * 4), malloc((n + 1) * 8), 0 };
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && o->stk[m - 1] == (uint32_t)v[i][0]) {
            o->val[m - 1] += (int64_t)v[i][1];
            continue;
        }
        o->stk[m] = (uint32_t)v[i][0];
        o->val[m++] = (int64_t)v[i][1];
        if (o->stk[m - 1] >= r->capused) {
            size_t c = 2 * (o->stk[m - 1] + 1);
            r->used = realloc(r->used, c);
            memset(r->used + r->capused, 0, c - r->capused);
            r->capused = c;
        }
        r->used[o->stk[m - 1]] = 1;
    }
    o->n = (uint32_t)m;
    r->samples += m;
    free(v);
}

/* Decodes one pprof file into the block's symbols and profiles. */
static void real_file(rblock *r, const char *path)
{
    size_t len;
    char *buf = tu_read_file(path, &len);
    em_pset s = { 0 };
    uint32_t *sid;

    assert_non_null(buf);
    OK(em_decode(buf, len, NULL, &s));
    sid = calloc(s.nstacks + 1, sizeof *sid);
    real_symbols(r, &s, sid);
    for (size_t k = 0; k < s.nprofiles; k++)
        if (s.profiles[k].nsamples > 0)
            real_profile(r, &s, k, sid, real_series(r, &s.profiles[k]));
    free(sid);
    em_pset_free(&s);
    free(buf);
    r->files++;
}

static int rprof_cmp(const void *x, const void *y)
{
    const rprof *a = x, *c = y;

    return (a->t > c->t) - (a->t < c->t);
}

/* Each series' profiles, in time order, as chunks of up to 720 profiles
** cut where the time changes. */
static void real_chunks(rblock *r)
{
    em_codec *c;
    em_chunk_profile *cp = NULL;

    OK(em_codec_new(&c));
    for (size_t s = 0; s < r->nser; s++) {
        rser *rs = &r->ser[s];
        qsort(rs->ps, rs->n, sizeof *rs->ps, rprof_cmp);
        cp = realloc(cp, (rs->n + 1) * sizeof *cp);
        for (size_t i = 0, start = 0; i <= rs->n; i++) {
            if (i < rs->n)
                cp[i] = (em_chunk_profile){ rs->ps[i].t, rs->ps[i].d,
                                            rs->ps[i].p, rs->ps[i].stk,
                                            rs->ps[i].val, rs->ps[i].n };
            if (i == rs->n || (i - start >= 720 &&
                               rs->ps[i].t != rs->ps[i - 1].t)) {
                OK(em_bbuild_chunk(r->b, c, (uint32_t)s, cp + start,
                                   i - start));
                start = i;
            }
        }
    }
    free(cp);
    em_codec_free(c);
}

static void rblock_free(rblock *r)
{
    for (size_t s = 0; s < r->nser; s++) {
        for (size_t i = 0; i < r->ser[s].n; i++)
            free(r->ser[s].ps[i].stk), free(r->ser[s].ps[i].val);
        free(r->ser[s].ps);
    }
    free(r->ser);
    free(r->used);
}

static int name_cmp(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Builds DIR/NAME from the .pb.gz files of SRC (at most MAX, in name
** order); *STACKS gets the distinct stacks the samples name. */
static void real_build(const char *src, size_t max, const char *dir,
                       const char *name, uint64_t *stacks)
{
    rblock r = { 0 };
    DIR *d = opendir(src);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".pb.gz") != NULL) {
            names = realloc(names, (n + 1) * sizeof *names);
            names[n++] = strdup(e->d_name);
        }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    OK(em_bbuild_new(dir, name, 19, &r.b));
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", src, names[i]);
        if (i < max)
            real_file(&r, path);
        free(names[i]);
    }
    free(names);
    real_chunks(&r);
    OK(em_bbuild_finish(r.b, NULL, NULL));
    em_bbuild_free(r.b);
    *stacks = 0;
    for (size_t i = 0; i < r.capused; i++)
        *stacks += r.used[i];
    rblock_free(&r);
}

/* Prints each section's bytes per distinct stack, and open and load
** times. */
static void real_report(const char *path, uint64_t stacks)
{
    em_block *b;
    const em_block_syms *s;
    const em_block_info *in;
    double t0 = now_s(), t1, t2;
    uint64_t sym = 0, idx = 0;

    OK(em_block_open(path, &b));
    t1 = now_s();
    OK(em_block_symbols(b, &s));
    t2 = now_s();
    in = em_block_get_info(b);
    printf("block: %" PRIu64 " stacks, %" PRIu32 " nodes, %" PRIu32
           " locations, %" PRIu32 " functions, %" PRIu32 " strings, %"
           PRIu64 " bytes\n", stacks, in->nnodes, in->nlocations,
           in->nfunctions, in->nstrings, in->file_size);
    for (size_t i = 0; i < em_block_nsections(b); i++) {
        em_bsection sec;
        em_block_section(b, i, &sec);
        printf("  %-22s %9" PRIu32 " B raw %9" PRIu32 " B  %6.3f B/stack\n",
               sec.name, sec.raw, sec.stored, (double)sec.stored / stacks);
        if (strncmp(sec.name, "index.", 6) == 0)
            idx += sec.stored;
        else
            sym += sec.stored;
    }
    printf("  symbols and postings: %.2f B/stack; index %" PRIu64
           " B; open %.3f ms, symbols %.3f ms\n", (double)sym / stacks, idx,
           (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
}

static void test_real_sizes(void **state)
{
    const char *src = getenv("EMBER_BLOCK_DATA");
    char *dir = tu_tmpdir("block-real");
    char path[512];
    uint64_t stacks;

    EM_UNUSED(state);
    real_build(src != NULL ? src : "tests/data/pprof", SIZE_MAX, dir,
               "real.blk", &stacks);
    snprintf(path, sizeof path, "%s/real.blk", dir);
    real_report(path, stacks);
    tu_rmdir(dir);
}


/* ---- a synthetic block and its model ------------------------------------- */

#define M_MAXD 24                   /* deepest synthetic stack */

/* What went into a synthetic block, by content and builder id. */
typedef struct model {
    uint32_t nfn, nloc, nstk, nser, nprof, chunk;
    uint32_t *fn_id, *loc_id;       /* builder ids of functions, locations */
    uint32_t *stk_n;                /* frames of stack s */
    uint32_t (*stk)[M_MAXD];        /* model locations, leaf first */
    uint32_t *stk_node;             /* its node */
    uint32_t *ser_id;               /* builder id of series s */
    em_chunk_profile *ps;           /* [nser * nprof] */
    uint32_t *pstk;                 /* behind ps */
    int64_t *pval;
} model;

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void fn_name(uint32_t k, char *out, size_t n)
{
    snprintf(out, n, "pkg%u.Func%u", k % 7, k);
}

static void fn_file(uint32_t k, char *out, size_t n)
{
    snprintf(out, n, "src/pkg%u/file%u.go", k % 7, k % 13);
}

static void fn_sys(uint32_t k, char *out, size_t n)
{
    if (k % 2 == 0)
        fn_name(k, out, n);
    else
        snprintf(out, n, "_Z%usys%u", k % 11, k);
}

static int64_t fn_start(uint32_t k)
{
    return 10 * (int64_t)k + 1;
}

/* Location k: mapping 1 or 2, one address each, 1 to 3 lines. */
static uint32_t loc_nlines(uint32_t k) { return 1 + k % 3; }
static uint64_t loc_addr(uint32_t k) { return 0x400000 + 16 * (uint64_t)k; }
static uint32_t loc_fn(const model *m, uint32_t k, uint32_t j)
{
    return (k * 7 + j * 3) % m->nfn;
}
static int64_t loc_line(const model *m, uint32_t k, uint32_t j)
{
    return fn_start(loc_fn(m, k, j)) + j + k % 5;
}

static const char *ser_type(uint32_t s)
{
    return s % 2 ? "memory:alloc_space:bytes:space:bytes"
                 : "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta";
}

static void model_symbols(model *m, em_bbuild *b)
{
    uint32_t mp[2], fns[3];
    int64_t lines[3];
    char a[64], c[64], d[64];

    OK(em_bbuild_mapping(b, 0x400000, 0x800000, 0, bstr(b, "/bin/app"),
                         bstr(b, "b1d"), &mp[0]));
    OK(em_bbuild_mapping(b, 0x7f0000000000, 0x7f0000100000, 4096,
                         bstr(b, "/lib/libc.so.6"), 0, &mp[1]));
    for (uint32_t k = 0; k < m->nfn; k++) {
        fn_name(k, a, sizeof a), fn_sys(k, c, sizeof c);
        fn_file(k, d, sizeof d);
        OK(em_bbuild_function(b, bstr(b, a), bstr(b, c), bstr(b, d),
                              fn_start(k), &m->fn_id[k]));
    }
    for (uint32_t k = 0; k < m->nloc; k++) {
        for (uint32_t j = 0; j < loc_nlines(k); j++) {
            fns[j] = m->fn_id[loc_fn(m, k, j)];
            lines[j] = loc_line(m, k, j);
        }
        OK(em_bbuild_location(b, mp[k % 2], loc_addr(k), fns, lines,
                              loc_nlines(k), &m->loc_id[k]));
    }
}

/* Stacks whose outer frames come from few locations, so that they share
** prefixes as real ones do. */
static void model_stacks(model *m, em_bbuild *b, uint64_t *rng)
{
    uint32_t ids[M_MAXD];

    for (uint32_t s = 0; s < m->nstk; s++) {
        uint32_t n = 2 + (uint32_t)(rng_next(rng) % (M_MAXD - 2));
        m->stk_n[s] = n;
        for (uint32_t j = 0; j < n; j++) {     /* j: from the outermost */
            uint32_t choice = 1 + 2 * j;
            uint32_t l = (uint32_t)((j * 5 + rng_next(rng) % choice) %
                                    m->nloc);
            m->stk[s][n - 1 - j] = l;
            ids[n - 1 - j] = m->loc_id[l];
        }
        OK(em_bbuild_stack(b, ids, n, &m->stk_node[s]));
    }
}

static void model_series(model *m, em_bbuild *b)
{
    char v[32];

    for (uint32_t s = 0; s < m->nser; s++) {
        uint32_t names[2] = { bstr(b, "host"), bstr(b, "service") };
        uint32_t values[2];
        snprintf(v, sizeof v, "h%u", s % 2);
        values[0] = bstr(b, v);
        snprintf(v, sizeof v, "svc%u", s);
        values[1] = bstr(b, v);
        /* "host" < "service": sorted by name as the builder wants */
        OK(em_bbuild_series(b, bstr(b, ser_type(s)), names, values,
                            s % 3 == 2 ? 1 : 2, &m->ser_id[s]));
    }
}

static int u32_cmp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, c = *(const uint32_t *)y;

    return (a > c) - (a < c);
}

/* Profiles: each takes a few stacks' nodes, distinct and ascending. */
static void model_profiles(model *m, uint64_t *rng)
{
    size_t np = (size_t)m->nser * m->nprof, at = 0;

    m->ps = calloc(np + 1, sizeof *m->ps);
    m->pstk = calloc(np * 8 + 1, sizeof *m->pstk);
    m->pval = calloc(np * 8 + 1, sizeof *m->pval);
    for (size_t i = 0; i < np; i++) {
        uint32_t *st = m->pstk + at, n = 0;
        for (uint32_t j = 0; j < 1 + rng_next(rng) % 8; j++) {
            uint32_t node = m->stk_node[rng_next(rng) % m->nstk];
            bool dup = false;
            for (uint32_t k = 0; k < n; k++)
                dup |= st[k] == node;
            if (!dup)
                st[n++] = node;
        }
        qsort(st, n, sizeof *st, u32_cmp);
        for (uint32_t k = 0; k < n; k++)
            m->pval[at + k] = (int64_t)(rng_next(rng) % 1000) - 100;
        m->ps[i] = (em_chunk_profile){ 1732170000000 + 10000 *
                                           (int64_t)(i % m->nprof),
                                       10000000000, 10000000, st,
                                       m->pval + at, n };
        at += n;
    }
}

static void model_chunks(model *m, em_bbuild *b)
{
    em_codec *c;

    OK(em_codec_new(&c));
    for (uint32_t s = 0; s < m->nser; s++)
        for (uint32_t i = 0; i < m->nprof; i += m->chunk)
            OK(em_bbuild_chunk(b, c, m->ser_id[s], m->ps + s * m->nprof + i,
                               m->nprof - i < m->chunk ? m->nprof - i
                                                       : m->chunk));
    em_codec_free(c);
}

/* A model of NFN functions, NLOC locations, NSTK stacks and NSER series
** of NPROF profiles each, in chunks of CHUNK, written to DIR/NAME. */
static void model_build(model *m, const char *dir, const char *name,
                        uint32_t nstk, uint32_t nser, uint32_t nprof,
                        uint32_t chunk, em_block_info *info)
{
    em_bbuild *b;
    uint64_t rng = 42;
    em_block_info in = { .id = 7, .resolution_ms = 60000, .level = 1 };

    *m = (model){ .nfn = 40, .nloc = 120, .nstk = nstk, .nser = nser,
                  .nprof = nprof, .chunk = chunk };
    m->fn_id = calloc(m->nfn, 4), m->loc_id = calloc(m->nloc, 4);
    m->stk_n = calloc(nstk + 1, 4), m->stk = calloc(nstk + 1, M_MAXD * 4);
    m->stk_node = calloc(nstk + 1, 4), m->ser_id = calloc(nser + 1, 4);
    OK(em_bbuild_new(dir, name, 3, &b));
    model_symbols(m, b);
    model_stacks(m, b, &rng);
    model_series(m, b);
    model_profiles(m, &rng);
    model_chunks(m, b);
    assert_true(em_bbuild_memory(b) > 0);
    OK(em_bbuild_finish(b, &in, info));
    em_bbuild_free(b);
}

static void model_free(model *m)
{
    free(m->fn_id), free(m->loc_id), free(m->stk_n), free(m->stk);
    free(m->stk_node), free(m->ser_id), free(m->ps), free(m->pstk);
    free(m->pval);
}

/* ---- reading back by content ---------------------------------------------- */

static const char *sstr(const em_block_syms *s, uint32_t id)
{
    return s->str_bytes + s->str_off[id];
}

/* Block location L is model location K, by content. */
static void loc_same(const model *m, const em_block_syms *s, uint32_t l,
                     uint32_t k)
{
    const em_blocation *bl = &s->locations[l];
    const em_bmapping *mp = &s->mappings[bl->mapping];
    char a[64];

    assert_int_equal(bl->address, loc_addr(k));
    assert_string_equal(sstr(s, mp->file),
                        k % 2 ? "/lib/libc.so.6" : "/bin/app");
    assert_int_equal(bl->n, loc_nlines(k));
    for (uint32_t j = 0; j < bl->n; j++) {
        const em_bline *ln = &s->lines[bl->first + j];
        const em_bfunction *f = &s->functions[ln->function];
        uint32_t fk = loc_fn(m, k, j);
        fn_name(fk, a, sizeof a);
        assert_string_equal(sstr(s, f->name), a);
        fn_sys(fk, a, sizeof a);
        assert_string_equal(sstr(s, f->system_name), a);
        fn_file(fk, a, sizeof a);
        assert_string_equal(sstr(s, f->file), a);
        assert_int_equal(f->start_line, fn_start(fk));
        assert_int_equal(ln->line, loc_line(m, k, j));
    }
}

/* Every stack's node leads, through its parents, to its frames. */
static void stacks_same(const model *m, const em_block_syms *s)
{
    for (uint32_t k = 0; k < m->nstk; k++) {
        uint32_t node = m->stk_node[k];
        assert_int_equal(s->depth[node], m->stk_n[k]);
        for (uint32_t j = 0; j < m->stk_n[k]; j++) {
            assert_true(node != EM_BLOCK_ROOT);
            loc_same(m, s, s->loc[node], m->stk[k][j]);
            assert_true(s->parent[node] == EM_BLOCK_ROOT ||
                        s->parent[node] < node);
            node = s->parent[node];
        }
        assert_int_equal(node, EM_BLOCK_ROOT);
    }
}

static void strings_sorted(const em_block *b, const em_block_syms *s)
{
    const em_block_info *in = em_block_get_info(b);

    assert_string_equal(sstr(s, 0), "");
    for (uint32_t i = 1; i < in->nstrings; i++)
        assert_true(strcmp(sstr(s, i - 1), sstr(s, i)) < 0);
}

static void series_same(const model *m, em_block *b, const em_block_syms *s)
{
    char v[32];

    for (uint32_t k = 0; k < m->nser; k++) {
        const em_bseries *se = &s->series[m->ser_id[k]];
        assert_string_equal(sstr(s, se->type), ser_type(k));
        assert_int_equal(se->n, k % 3 == 2 ? 1 : 2);
        assert_string_equal(sstr(s, s->label_names[se->first]), "host");
        snprintf(v, sizeof v, "h%u", k % 2);
        assert_string_equal(sstr(s, s->label_values[se->first]), v);
        if (se->n == 2) {
            snprintf(v, sizeof v, "svc%u", k);
            assert_string_equal(sstr(s, s->label_values[se->first + 1]), v);
        }
    }
    EM_UNUSED(b);
}

/* Series K's chunks decode to its profiles. */
static void chunks_same(const model *m, em_block *b, uint32_t k)
{
    const em_bchunk *c;
    size_t n, at = 0;

    OK(em_block_chunks(b, m->ser_id[k], &c, &n));
    assert_int_equal(n, (m->nprof + m->chunk - 1) / m->chunk);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p;
        em_chunk ch;
        em_chunk_profile *ps;
        OK(em_block_chunk_bytes(b, &c[i], &p));
        OK(em_chunk_decode(NULL, p, c[i].len, EM_COL_ALL, &ch));
        OK(em_chunk_transpose(&ch, &ps));
        assert_int_equal(c[i].series, m->ser_id[k]);
        assert_int_equal(c[i].min_time, ch.h.min_time);
        assert_int_equal(c[i].max_time, ch.h.max_time);
        for (uint32_t j = 0; j < ch.h.nprofiles; j++, at++) {
            const em_chunk_profile *want = &m->ps[k * m->nprof + at];
            assert_int_equal(ps[j].time_ms, want->time_ms);
            assert_int_equal(ps[j].n, want->n);
            assert_memory_equal(ps[j].stacks, want->stacks, want->n * 4);
            assert_memory_equal(ps[j].values, want->values, want->n * 8);
        }
        em_free(ps);
        em_chunk_release(&ch);
    }
    assert_int_equal(at, m->nprof);
}

/* The postings and label values of B against the model; S its names. */
static void postings_same_names(const model *m, em_block *b,
                                const em_block_syms *s)
{
    roaring_bitmap_t *r;
    uint32_t *v;
    size_t n;
    char name[32];

    for (uint32_t k = 0; k < m->nser; k++) {
        snprintf(name, sizeof name, "svc%u", k);
        OK(em_block_postings(b, "service", name, &r));
        assert_int_equal(roaring_bitmap_get_cardinality(r), k % 3 != 2);
        if (k % 3 != 2)
            assert_true(roaring_bitmap_contains(r, m->ser_id[k]));
        roaring_bitmap_free(r);
    }
    OK(em_block_postings(b, "host", "h0", &r));
    assert_int_equal(roaring_bitmap_get_cardinality(r), (m->nser + 1) / 2);
    roaring_bitmap_free(r);
    OK(em_block_postings(b, EM_TYPE_LABEL, ser_type(0), &r));
    assert_int_equal(roaring_bitmap_get_cardinality(r), (m->nser + 1) / 2);
    roaring_bitmap_free(r);
    OK(em_block_postings(b, "host", "nope", &r));
    assert_int_equal(roaring_bitmap_get_cardinality(r), 0);
    roaring_bitmap_free(r);
    OK(em_block_label_values(b, "host", &v, &n));
    assert_int_equal(n, m->nser > 1 ? 2 : 1);
    assert_string_equal(sstr(s, v[0]), "h0");
    em_free(v);
    OK(em_block_label_values(b, EM_TYPE_LABEL, &v, &n));
    assert_int_equal(n, m->nser > 1 ? 2 : 1);
    assert_string_equal(sstr(s, v[0]), ser_type(1 % m->nser));
    em_free(v);
    OK(em_block_label_values(b, "nope", &v, &n));
    assert_int_equal(n, 0);
    assert_null(v);
}

static void postings_same(const model *m, em_block *b)
{
    const em_block_syms *s;

    OK(em_block_symbols(b, &s));
    postings_same_names(m, b, s);
}

static void info_same(const em_block_info *a, const em_block_info *c)
{
    assert_int_equal(a->id, c->id);
    assert_int_equal(a->min_time, c->min_time);
    assert_int_equal(a->max_time, c->max_time);
    assert_int_equal(a->resolution_ms, c->resolution_ms);
    assert_int_equal(a->level, c->level);
    assert_int_equal(a->nstrings, c->nstrings);
    assert_int_equal(a->nmappings, c->nmappings);
    assert_int_equal(a->nfunctions, c->nfunctions);
    assert_int_equal(a->nlocations, c->nlocations);
    assert_int_equal(a->nnodes, c->nnodes);
    assert_int_equal(a->nseries, c->nseries);
    assert_int_equal(a->nlines, c->nlines);
    assert_int_equal(a->nlabels, c->nlabels);
    assert_int_equal(a->nchunks, c->nchunks);
    assert_int_equal(a->nprofiles, c->nprofiles);
    assert_int_equal(a->nsamples, c->nsamples);
    assert_int_equal(a->file_size, c->file_size);
    assert_int_equal(a->footer_crc, c->footer_crc);
}

static void model_check(const model *m, const char *path,
                        const em_block_info *built)
{
    em_block *b;
    const em_block_syms *s;
    const em_block_info *in;

    OK(em_block_open(path, &b));
    in = em_block_get_info(b);
    info_same(in, built);
    assert_int_equal(in->id, 7);
    assert_int_equal(in->resolution_ms, 60000);
    assert_int_equal(in->nfunctions, m->nfn);
    assert_int_equal(in->nlocations, m->nloc);
    assert_int_equal(in->nseries, m->nser);
    OK(em_block_symbols(b, &s));
    strings_sorted(b, s);
    stacks_same(m, s);
    series_same(m, b, s);
    for (uint32_t k = 0; k < m->nser; k++)
        chunks_same(m, b, k);
    postings_same(m, b);
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
}

static void test_round_trip(void **state)
{
    char *dir = tu_tmpdir("block-rt");
    char path[512];
    em_block_info info;
    model m;
    struct stat st;

    EM_UNUSED(state);
    model_build(&m, dir, "a.blk", 300, 5, 50, 16, &info);
    snprintf(path, sizeof path, "%s/a.blk", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((uint64_t)st.st_size, info.file_size);
    snprintf(path, sizeof path, "%s/a.blk.tmp", dir);
    assert_int_not_equal(stat(path, &st), 0);   /* renamed */
    snprintf(path, sizeof path, "%s/a.blk", dir);
    model_check(&m, path, &info);
    model_free(&m);
    tu_rmdir(dir);
}

/* ---- interning, the tree, limits ----------------------------------------- */

/* A builder in a fresh directory, with one function and location. */
typedef struct tb {
    char *dir;
    char path[512];
    em_bbuild *b;
    uint32_t fn, loc;
} tb;

static void tb_new(tb *t, const char *tag)
{
    uint32_t fns[1];
    int64_t lines[1] = { 3 };

    t->dir = tu_tmpdir(tag);
    snprintf(t->path, sizeof t->path, "%s/t.blk", t->dir);
    OK(em_bbuild_new(t->dir, "t.blk", 1, &t->b));
    OK(em_bbuild_function(t->b, bstr(t->b, "main"), 0, 0, 1, &t->fn));
    fns[0] = t->fn;
    OK(em_bbuild_location(t->b, 0, 0x10, fns, lines, 1, &t->loc));
}

static void tb_free(tb *t)
{
    em_bbuild_free(t->b);
    tu_rmdir(t->dir);
}

static void test_interning(void **state)
{
    tb t;
    uint32_t a, c, d, e, fns[2], locs[3], names[2], values[2];
    int64_t lines[2] = { 5, 6 };

    EM_UNUSED(state);
    tb_new(&t, "block-intern");
    OK(em_bbuild_string(t.b, "x", 1, &a));
    OK(em_bbuild_string(t.b, "y", 1, &c));
    OK(em_bbuild_string(t.b, "x", 1, &d));
    assert_int_equal(a, d);
    assert_int_not_equal(a, c);
    OK(em_bbuild_string(t.b, "x\0z", 3, &d));       /* NUL inside */
    assert_int_not_equal(a, d);
    OK(em_bbuild_string(t.b, "", 0, &d));
    assert_int_equal(d, 0);
    OK(em_bbuild_mapping(t.b, 0, 0, 0, 0, 0, &d));
    assert_int_equal(d, 0);
    OK(em_bbuild_mapping(t.b, 1, 2, 3, a, c, &d));
    OK(em_bbuild_mapping(t.b, 1, 2, 3, a, c, &e));
    assert_int_equal(d, e);
    OK(em_bbuild_mapping(t.b, 1, 2, 3, c, a, &e));
    assert_int_not_equal(d, e);
    OK(em_bbuild_function(t.b, bstr(t.b, "main"), 0, 0, 1, &d));
    assert_int_equal(d, t.fn);
    OK(em_bbuild_function(t.b, bstr(t.b, "main"), 0, 0, 2, &d));
    assert_int_not_equal(d, t.fn);
    fns[0] = t.fn, fns[1] = d;
    OK(em_bbuild_location(t.b, 0, 0x20, fns, lines, 2, &a));
    OK(em_bbuild_location(t.b, 0, 0x20, fns, lines, 2, &c));
    assert_int_equal(a, c);
    OK(em_bbuild_location(t.b, 0, 0x20, fns, lines, 1, &c));
    assert_int_not_equal(a, c);
    locs[0] = a, locs[1] = c, locs[2] = t.loc;
    OK(em_bbuild_stack(t.b, locs, 3, &d));
    OK(em_bbuild_stack(t.b, locs, 3, &e));
    assert_int_equal(d, e);
    names[0] = bstr(t.b, "a"), names[1] = bstr(t.b, "b");
    values[0] = bstr(t.b, "1"), values[1] = bstr(t.b, "2");
    OK(em_bbuild_series(t.b, bstr(t.b, "t"), names, values, 2, &d));
    OK(em_bbuild_series(t.b, bstr(t.b, "t"), names, values, 2, &e));
    assert_int_equal(d, e);
    OK(em_bbuild_series(t.b, bstr(t.b, "t"), names, values, 1, &e));
    assert_int_not_equal(d, e);
    tb_free(&t);
}

/* Stacks sharing prefixes share nodes: a node per distinct prefix. */
static void test_shared_prefixes(void **state)
{
    tb t;
    uint32_t l[6], fns[1], n1, n2, n3, n4, leaf, mid;
    int64_t line[1] = { 0 };
    const em_block_syms *s;
    em_block *b;
    em_block_info info;

    EM_UNUSED(state);
    tb_new(&t, "block-tree");
    fns[0] = t.fn;
    for (uint32_t i = 0; i < 6; i++)
        OK(em_bbuild_location(t.b, 0, 0x100 + i, fns, line, 1, &l[i]));
    /* leaf first: main=l[0] -> a=l[1] -> b=l[2] -> c=l[3] */
    OK(em_bbuild_stack(t.b, (uint32_t[]){ l[3], l[2], l[1], l[0] }, 4, &n1));
    OK(em_bbuild_stack(t.b, (uint32_t[]){ l[4], l[2], l[1], l[0] }, 4, &n2));
    OK(em_bbuild_stack(t.b, (uint32_t[]){ l[2], l[1], l[0] }, 3, &n3));
    OK(em_bbuild_stack(t.b, (uint32_t[]){ l[5], l[0] }, 2, &n4));
    OK(em_bbuild_node(t.b, n3, l[3], &leaf));       /* the same as n1 */
    assert_int_equal(leaf, n1);
    OK(em_bbuild_node(t.b, EM_BLOCK_ROOT, l[0], &mid));
    OK(em_bbuild_finish(t.b, NULL, &info));
    assert_int_equal(info.nnodes, 6);               /* main a b c d e */
    OK(em_block_open(t.path, &b));
    OK(em_block_symbols(b, &s));
    assert_int_equal(s->parent[n1], n3);
    assert_int_equal(s->parent[n2], n3);
    assert_int_equal(s->parent[s->parent[n3]], mid);
    assert_int_equal(s->parent[n4], mid);
    assert_int_equal(s->parent[mid], EM_BLOCK_ROOT);
    assert_int_equal(s->depth[n1], 4);
    assert_int_equal(s->depth[n4], 2);
    assert_int_equal(s->locations[s->loc[n2]].address, 0x104);
    assert_int_equal(s->locations[s->loc[mid]].address, 0x100);
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
    tb_free(&t);
}

/* A stack of the deepest depth allowed, and one frame more. */
static void test_deep_stack(void **state)
{
    tb t;
    uint32_t *locs = malloc((EM_MAX_STACK_DEPTH + 1) * sizeof *locs), id;
    const em_block_syms *s;
    em_block *b;

    EM_UNUSED(state);
    tb_new(&t, "block-deep");
    for (uint32_t i = 0; i <= EM_MAX_STACK_DEPTH; i++)
        locs[i] = t.loc;
    assert_int_equal(em_bbuild_stack(t.b, locs, EM_MAX_STACK_DEPTH + 1, &id),
                     EMBER_ELIMIT);
    OK(em_bbuild_stack(t.b, locs, EM_MAX_STACK_DEPTH, &id));
    assert_int_equal(em_bbuild_node(t.b, id, t.loc, &id), EMBER_ELIMIT);
    OK(em_bbuild_finish(t.b, NULL, NULL));
    OK(em_block_open(t.path, &b));
    OK(em_block_symbols(b, &s));
    assert_int_equal(em_block_get_info(b)->nnodes, EM_MAX_STACK_DEPTH);
    assert_int_equal(s->depth[id], EM_MAX_STACK_DEPTH);
    for (uint32_t i = 0; i < EM_MAX_STACK_DEPTH; i++)
        assert_int_equal(s->parent[i], i == 0 ? EM_BLOCK_ROOT : i - 1);
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
    free(locs);
    tb_free(&t);
}

static void test_empty_block(void **state)
{
    tb t;
    em_block *b;
    const em_block_syms *s;
    const em_bchunk *c;
    roaring_bitmap_t *r;
    uint32_t *v;
    size_t n;
    em_block_info info;

    EM_UNUSED(state);
    t.dir = tu_tmpdir("block-empty");
    snprintf(t.path, sizeof t.path, "%s/e.blk", t.dir);
    OK(em_bbuild_new(t.dir, "e.blk", 3, &t.b));
    OK(em_bbuild_finish(t.b, NULL, &info));
    assert_int_equal(info.nstrings, 1);
    assert_int_equal(info.nmappings, 1);
    assert_int_equal(info.nseries + info.nchunks + info.nnodes, 0);
    OK(em_block_open(t.path, &b));
    info_same(em_block_get_info(b), &info);
    OK(em_block_symbols(b, &s));
    assert_string_equal(sstr(s, 0), "");
    assert_int_equal(s->mappings[0].limit, 0);
    OK(em_block_postings(b, EM_TYPE_LABEL, "x", &r));
    assert_true(roaring_bitmap_is_empty(r));
    roaring_bitmap_free(r);
    OK(em_block_label_values(b, EM_TYPE_LABEL, &v, &n));
    assert_int_equal(n, 0);
    assert_int_equal(em_block_chunks(b, 0, &c, &n), EMBER_EINVAL);
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
    em_bbuild_free(t.b);
    tu_rmdir(t.dir);
}

static void test_limits(void **state)
{
    tb t;
    char *big = calloc(EM_MAX_STRING + 1, 1);
    uint32_t id, fns[EM_MAX_LINES + 1], names[EM_MAX_LABELS + 1],
        values[EM_MAX_LABELS + 1], a, z, empty = 0;
    int64_t lines[EM_MAX_LINES + 1] = { 0 };

    EM_UNUSED(state);
    tb_new(&t, "block-limits");
    OK(em_bbuild_string(t.b, big, EM_MAX_STRING, &id));
    assert_int_equal(em_bbuild_string(t.b, big, EM_MAX_STRING + 1, &id),
                     EMBER_ELIMIT);
    assert_int_equal(em_bbuild_mapping(t.b, 0, 0, 0, 999, 0, &id),
                     EMBER_EINVAL);
    assert_int_equal(em_bbuild_function(t.b, 0, 999, 0, 0, &id),
                     EMBER_EINVAL);
    for (size_t i = 0; i <= EM_MAX_LINES; i++)
        fns[i] = t.fn;
    OK(em_bbuild_location(t.b, 0, 1, fns, lines, EM_MAX_LINES, &id));
    assert_int_equal(em_bbuild_location(t.b, 0, 1, fns, lines,
                                        EM_MAX_LINES + 1, &id),
                     EMBER_ELIMIT);
    assert_int_equal(em_bbuild_location(t.b, 9, 1, fns, lines, 1, &id),
                     EMBER_EINVAL);
    fns[0] = 999;
    assert_int_equal(em_bbuild_location(t.b, 0, 1, fns, lines, 1, &id),
                     EMBER_EINVAL);
    {   /* the empty stack: one node, (ROOT, NOLOC), depth 0 */
        uint32_t e1, e2;
        assert_int_equal(em_bbuild_stack(t.b, &t.loc, 0, &e1), EMBER_OK);
        assert_int_equal(em_bbuild_stack(t.b, NULL, 0, &e2), EMBER_OK);
        assert_int_equal(e1, e2);
        assert_int_equal(em_bbuild_node(t.b, e1, t.loc, &id), EMBER_EINVAL);
    }
    assert_int_equal(em_bbuild_stack(t.b, &empty + 0, 1, &id), EMBER_OK);
    assert_int_equal(em_bbuild_stack(t.b, (uint32_t[]){ 999 }, 1, &id),
                     EMBER_EINVAL);
    assert_int_equal(em_bbuild_node(t.b, 999, t.loc, &id), EMBER_EINVAL);
    assert_int_equal(em_bbuild_node(t.b, EM_BLOCK_ROOT, 999, &id),
                     EMBER_EINVAL);
    a = bstr(t.b, "a"), z = bstr(t.b, "z");
    for (size_t i = 0; i <= EM_MAX_LABELS; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "l%03zu", i);
        names[i] = bstr(t.b, nm), values[i] = a;
    }
    OK(em_bbuild_series(t.b, a, names, values, EM_MAX_LABELS, &id));
    assert_int_equal(em_bbuild_series(t.b, a, names, values,
                                      EM_MAX_LABELS + 1, &id),
                     EMBER_ELIMIT);
    assert_int_equal(em_bbuild_series(t.b, a, (uint32_t[]){ z, a },
                                      (uint32_t[]){ a, a }, 2, &id),
                     EMBER_EINVAL);             /* not sorted */
    assert_int_equal(em_bbuild_series(t.b, a, (uint32_t[]){ a, a },
                                      (uint32_t[]){ a, a }, 2, &id),
                     EMBER_EINVAL);             /* a name twice */
    assert_int_equal(em_bbuild_series(t.b, a, &a, &empty, 1, &id),
                     EMBER_EINVAL);             /* empty value */
    names[0] = bstr(t.b, EM_TYPE_LABEL);
    assert_int_equal(em_bbuild_series(t.b, a, names, values, 1, &id),
                     EMBER_EINVAL);             /* reserved name */
    assert_int_equal(em_bbuild_series(t.b, 999, NULL, NULL, 0, &id),
                     EMBER_EINVAL);
    free(big);
    tb_free(&t);
}

/* Chunks: in time order per series, of nodes that exist, whole. */
static void test_chunk_rules(void **state)
{
    tb t;
    uint32_t ser, node, stk[1];
    int64_t val[1] = { 5 };
    em_chunk_profile p = { 100, 1, 1, stk, val, 1 };
    em_codec *c;
    em_buf buf = { 0 };
    em_block_info info;

    EM_UNUSED(state);
    tb_new(&t, "block-chunks");
    OK(em_codec_new(&c));
    OK(em_bbuild_stack(t.b, &t.loc, 1, &node));
    OK(em_bbuild_series(t.b, bstr(t.b, "t"), NULL, NULL, 0, &ser));
    stk[0] = node + 1;
    assert_int_equal(em_bbuild_chunk(t.b, c, ser, &p, 1), EMBER_EINVAL);
    stk[0] = node;
    assert_int_equal(em_bbuild_chunk(t.b, c, ser + 1, &p, 1), EMBER_EINVAL);
    OK(em_bbuild_chunk(t.b, c, ser, &p, 0));        /* nothing */
    OK(em_bbuild_chunk(t.b, c, ser, &p, 1));
    assert_int_equal(em_bbuild_chunk(t.b, c, ser, &p, 1), EMBER_EINVAL);
    p.time_ms = 101;
    OK(em_chunk_encode(c, &p, 1, 0, 1, &buf));
    buf.p[20] ^= 1;
    assert_int_equal(em_bbuild_chunk_raw(t.b, ser, buf.p, buf.len),
                     EMBER_ECORRUPT);
    buf.p[20] ^= 1;
    OK(em_bbuild_chunk_raw(t.b, ser, buf.p, buf.len));
    buf.len = 0;
    stk[0] = node + 5;
    p.time_ms = 102;
    OK(em_chunk_encode(c, &p, 1, 0, 1, &buf));
    assert_int_equal(em_bbuild_chunk_raw(t.b, ser, buf.p, buf.len),
                     EMBER_EINVAL);         /* a node this block lacks */
    OK(em_bbuild_finish(t.b, NULL, &info));
    assert_int_equal(info.nchunks, 2);
    assert_int_equal(info.min_time, 100);
    assert_int_equal(info.max_time, 101);
    assert_int_equal(em_bbuild_chunk(t.b, c, ser, &p, 1), EMBER_EINVAL);
    assert_int_equal(em_bbuild_finish(t.b, NULL, NULL), EMBER_EINVAL);
    em_buf_free(&buf);
    em_codec_free(c);
    tb_free(&t);
}

/* Whether Y's N nodes are in depth-first preorder: each node's parent is
** the node before it or one of that node's ancestors. */
static bool preorder(const em_block_syms *y, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        uint32_t x = i - 1;
        while (x != EM_BLOCK_ROOT && x != y->parent[i])
            x = y->parent[x];
        if (x != y->parent[i])
            return false;
    }
    return true;
}

/* The addresses of stack NODE's frames, leaf first, as one number: each
** address below 16 (one hex digit per frame). */
static uint64_t frames_of(const em_block_syms *y, uint32_t node)
{
    uint64_t v = 0;

    for (uint32_t x = node; x != EM_BLOCK_ROOT; x = y->parent[x])
        v = v << 4 | y->locations[y->loc[x]].address;
    return v;
}

/* Nodes renumbered depth-first before the first chunk: the stacks under
** a node are one range of ids, interning finds the new ids, a chunk names
** them; after a chunk, renumbering is refused. */
static void test_nodes_dfs(void **state)
{
    tb t;
    uint32_t l[6], *perm, id, ser, st[3];
    uint32_t s1[3], s2[2], s3[2];     /* leaf first */
    int64_t lines[1] = { 3 }, val[3] = { 1, 2, 3 };
    em_chunk_profile p = { 100, 1, 1, st, val, 3 };
    const em_block_syms *y;
    em_block *b;
    em_codec *c;

    EM_UNUSED(state);
    tb_new(&t, "block-dfs");
    OK(em_codec_new(&c));
    for (uint32_t k = 1; k <= 5; k++)
        OK(em_bbuild_location(t.b, 0, k, &t.fn, lines, 1, &l[k]));
    s1[0] = l[3], s1[1] = l[2], s1[2] = l[1];   /* 1>2>3: nodes 0, 1, 2 */
    s2[0] = l[5], s2[1] = l[4];                 /* 4>5: nodes 3, 4 */
    s3[0] = l[4], s3[1] = l[1];                 /* 1>4: node 5 */
    OK(em_bbuild_stack(t.b, s1, 3, &id));
    assert_int_equal(id, 2);
    OK(em_bbuild_stack(t.b, s2, 2, &id));
    assert_int_equal(id, 4);
    OK(em_bbuild_stack(t.b, s3, 2, &id));
    assert_int_equal(id, 5);
    OK(em_bbuild_nodes_dfs(t.b, &perm));
    assert_int_equal(perm[0], 0);
    assert_int_equal(perm[1], 1);
    assert_int_equal(perm[2], 2);
    assert_int_equal(perm[5], 3);       /* 1>4 follows 1's other subtree */
    assert_int_equal(perm[3], 4);
    assert_int_equal(perm[4], 5);
    OK(em_bbuild_stack(t.b, s3, 2, &id));
    assert_int_equal(id, 3);
    OK(em_bbuild_stack(t.b, s1, 3, &st[0]));
    OK(em_bbuild_stack(t.b, s3, 2, &st[1]));
    OK(em_bbuild_stack(t.b, s2, 2, &st[2]));
    assert_int_equal(st[2], 5);
    OK(em_bbuild_series(t.b, bstr(t.b, "t"), NULL, NULL, 0, &ser));
    OK(em_bbuild_chunk(t.b, c, ser, &p, 1));
    assert_int_equal(em_bbuild_nodes_dfs(t.b, NULL), EMBER_EINVAL);
    OK(em_bbuild_finish(t.b, NULL, NULL));
    OK(em_block_open(t.path, &b));
    OK(em_block_symbols(b, &y));
    assert_int_equal(em_block_get_info(b)->nnodes, 6);
    assert_true(preorder(y, 6));
    assert_int_equal(frames_of(y, st[0]), 0x321);   /* read outermost last */
    assert_int_equal(frames_of(y, st[1]), 0x41);
    assert_int_equal(frames_of(y, st[2]), 0x54);
    em_block_close(b);
    em_free(perm);
    em_codec_free(c);
    tb_free(&t);
}

/* Chunks copied raw from one block into another with the same nodes. */
static void test_chunk_raw_copy(void **state)
{
    char *dir = tu_tmpdir("block-raw");
    char path[512];
    model m, m2;
    em_block_info info, info2;
    em_block *a;
    em_bbuild *b;
    uint64_t rng = 42;

    EM_UNUSED(state);
    model_build(&m, dir, "a.blk", 100, 3, 20, 8, &info);
    snprintf(path, sizeof path, "%s/a.blk", dir);
    OK(em_block_open(path, &a));
    m2 = (model){ .nfn = 40, .nloc = 120, .nstk = 100, .nser = 3 };
    m2.fn_id = calloc(40, 4), m2.loc_id = calloc(120, 4);
    m2.stk_n = calloc(101, 4), m2.stk = calloc(101, M_MAXD * 4);
    m2.stk_node = calloc(101, 4), m2.ser_id = calloc(4, 4);
    OK(em_bbuild_new(dir, "b.blk", 3, &b));
    model_symbols(&m2, b);
    model_stacks(&m2, b, &rng);
    model_series(&m2, b);
    for (uint32_t s = 0; s < 3; s++) {
        const em_bchunk *c;
        const uint8_t *p;
        size_t n;
        OK(em_block_chunks(a, m.ser_id[s], &c, &n));
        for (size_t i = 0; i < n; i++) {
            OK(em_block_chunk_bytes(a, &c[i], &p));
            OK(em_bbuild_chunk_raw(b, m2.ser_id[s], p, c[i].len));
        }
    }
    OK(em_bbuild_finish(b, &(em_block_info){ .id = 7, .resolution_ms = 60000,
                                             .level = 1 }, &info2));
    em_bbuild_free(b);
    em_block_close(a);
    info.footer_crc = info2.footer_crc;
    assert_int_equal(info.file_size, info2.file_size);
    snprintf(path, sizeof path, "%s/b.blk", dir);
    m2.nprof = m.nprof, m2.chunk = m.chunk, m2.ps = m.ps;
    model_check(&m2, path, &info2);
    m2.ps = NULL;
    model_free(&m2);
    model_free(&m);
    tu_rmdir(dir);
}

/* Every profile of block B, series by series (in id order), as text. */
static char *block_dump(em_block *b)
{
    const em_block_info *in = em_block_get_info(b);
    tu_out o;
    em_codec *c;

    OK(em_codec_new(&c));
    tu_out_open(&o);
    for (uint32_t s = 0; s < in->nseries; s++) {
        const em_bchunk *cs;
        size_t n;
        OK(em_block_chunks(b, s, &cs, &n));
        for (size_t i = 0; i < n; i++) {
            const uint8_t *p;
            em_chunk ch;
            em_chunk_profile *tp;
            OK(em_block_chunk_bytes(b, &cs[i], &p));
            OK(em_chunk_decode(c, p, (size_t)cs[i].len, EM_COL_ALL, &ch));
            OK(em_chunk_transpose(&ch, &tp));
            for (uint32_t k = 0; k < ch.h.nprofiles; k++) {
                fprintf(o.f, "s%u t%" PRId64 " d%" PRId64 " p%" PRId64 ":", s,
                        tp[k].time_ms, tp[k].duration_ns, tp[k].period);
                for (uint32_t j = 0; j < tp[k].n; j++)
                    fprintf(o.f, " %u=%" PRId64, tp[k].stacks[j], tp[k].values[j]);
                fputc('\n', o.f);
            }
            free(tp);
            em_chunk_release(&ch);
        }
    }
    tu_out_close(&o);
    em_codec_free(c);
    return o.text;
}

/* Rewrites block A as block ID in DIR (per bucket RES, holding HOLD
** samples of a series at most) and dumps it. */
static char *rewrite_dump(em_block *a, const char *dir, uint64_t id,
                          int64_t res, uint64_t hold, uint32_t *nchunks)
{
    em_rewrite_opts o = { .id = id, .level = 1, .resolution_ms = res,
                          .from = INT64_MIN, .to = INT64_MAX, .dir = dir,
                          .zstd_level = 3, .hold_samples = hold };
    em_block_info info;
    em_block *b;
    char path[512], *text;

    const em_block_syms *y;

    OK(em_rewrite(&a, 1, &o, &info));
    snprintf(path, sizeof path, "%s/%016llx.block", dir, (unsigned long long)id);
    OK(em_block_open(path, &b));
    OK(em_block_symbols(b, &y));
    assert_true(preorder(y, info.nnodes));  /* a rewrite orders its tree */
    text = block_dump(b);
    *nchunks = (uint32_t)info.nchunks;
    em_block_close(b);
    return text;
}

/* A rewrite that writes a series out as it goes (a few samples held at a
** time) makes the same profiles as one that holds the whole series, as
** stored and per bucket, in more chunks. */
static void test_rewrite_hold(void **state)
{
    char *dir = tu_tmpdir("block-hold");
    char path[512];
    model m;
    em_block_info info;
    em_block *a;

    EM_UNUSED(state);
    model_build(&m, dir, "a.blk", 60, 4, 700, 50, &info);
    snprintf(path, sizeof path, "%s/a.blk", dir);
    OK(em_block_open(path, &a));
    for (int k = 0; k < 2; k++) {
        int64_t res = k ? 5 * 60000 : 0;
        uint32_t n1, n2;
        char *whole = rewrite_dump(a, dir, 10 + 2 * (uint64_t)k, res, 0, &n1);
        char *held = rewrite_dump(a, dir, 11 + 2 * (uint64_t)k, res, 16, &n2);
        assert_true(strlen(whole) > 1000);
        assert_string_equal(whole, held);
        assert_true(n2 > n1);       /* the small hold did write early */
        free(whole);
        free(held);
    }
    em_block_close(a);
    model_free(&m);
    tu_rmdir(dir);
}

static void test_open_errors(void **state)
{
    char *dir = tu_tmpdir("block-open");
    char path[512];
    em_block *b;
    FILE *f;

    EM_UNUSED(state);
    snprintf(path, sizeof path, "%s/none.blk", dir);
    assert_int_equal(em_block_open(path, &b), EMBER_ENOTFOUND);
    assert_null(b);
    f = fopen(path, "w");
    assert_int_equal(em_block_open(path, &b), EMBER_ECORRUPT);  /* empty */
    for (int i = 0; i < 300; i++)
        fputs("not a block ", f);
    fclose(f);
    assert_int_equal(em_block_open(path, &b), EMBER_EFORMAT);
    assert_non_null(strstr(em_errmsg(), "not a block"));
    assert_int_equal(em_bbuild_new(dir, "a/b", 1, &(em_bbuild *){ NULL }),
                     EMBER_EINVAL);
    snprintf(path, sizeof path, "%s/nodir", dir);
    assert_int_equal(em_bbuild_new(path, "x", 1, &(em_bbuild *){ NULL }),
                     EMBER_ENOTFOUND);
    tu_rmdir(dir);
}

/* An unfinished builder leaves nothing behind. */
static void test_abandon(void **state)
{
    char *dir = tu_tmpdir("block-abandon");
    em_bbuild *b;
    DIR *d;
    struct dirent *e;
    int n = 0;

    EM_UNUSED(state);
    OK(em_bbuild_new(dir, "x.blk", 1, &b));
    em_bbuild_free(b);
    em_bbuild_free(NULL);
    em_block_close(NULL);
    d = opendir(dir);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
    tu_rmdir(dir);
}

/* ---- several readers of one block ----------------------------------------- */

typedef struct tread {
    em_block *b;
    const em_block_syms *syms;
    const em_bchunk *chunks;
    uint64_t card;
    int rc;
} tread;

static void *reader_thread(void *arg)
{
    tread *t = arg;
    roaring_bitmap_t *r = NULL;
    size_t n;

    t->rc = em_block_symbols(t->b, &t->syms);
    if (t->rc == EMBER_OK)
        t->rc = em_block_postings(t->b, "host", "h0", &r);
    if (t->rc == EMBER_OK)
        t->card = roaring_bitmap_get_cardinality(r);
    if (t->rc == EMBER_OK)
        t->rc = em_block_chunks(t->b, 0, &t->chunks, &n);
    roaring_bitmap_free(r);
    return NULL;
}

/* The first calls of several threads load each group once, for all. */
static void test_threads(void **state)
{
    char *dir = tu_tmpdir("block-threads");
    char path[512];
    model m;
    em_block_info info;
    em_block *b;
    pthread_t th[6];
    tread t[6];

    EM_UNUSED(state);
    model_build(&m, dir, "t.blk", 500, 4, 30, 10, &info);
    snprintf(path, sizeof path, "%s/t.blk", dir);
    OK(em_block_open(path, &b));
    for (int i = 0; i < 6; i++) {
        t[i] = (tread){ .b = b };
        assert_int_equal(pthread_create(&th[i], NULL, reader_thread, &t[i]),
                         0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        OK(t[i].rc);
        assert_ptr_equal(t[i].syms, t[0].syms);
        assert_ptr_equal(t[i].chunks, t[0].chunks);
        assert_int_equal(t[i].card, 2);
    }
    em_block_close(b);
    model_check(&m, path, &info);
    model_free(&m);
    tu_rmdir(dir);
}

/* ---- everything a reader reads, for damage and allocation failure ------- */

/* A growable byte string on plain malloc, so that the allocations a test
** makes fail only when the code under test's do. */
typedef struct tbuf {
    uint8_t *p;
    size_t len, cap;
} tbuf;

static void tput(tbuf *t, const void *p, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = 2 * (t->len + n) + 64;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
    if (n > 0)
        memcpy(t->p + t->len, p, n);
    t->len += n;
}

static void t64(tbuf *t, uint64_t v)
{
    tput(t, &v, sizeof v);
}

/* The labels to look up postings for: the original block's. */
typedef struct lookups {
    char **name, **value;
    size_t n;
} lookups;

static void syms_put(tbuf *t, const em_block_info *in, const em_block_syms *s)
{
    tput(t, s->str_off, (in->nstrings + (size_t)1) * 4);
    tput(t, s->str_bytes, s->str_off[in->nstrings]);
    for (uint32_t i = 0; i < in->nmappings; i++) {
        const em_bmapping *m = &s->mappings[i];
        t64(t, m->start), t64(t, m->limit), t64(t, m->offset);
        t64(t, m->file), t64(t, m->build_id);
    }
    for (uint32_t i = 0; i < in->nfunctions; i++) {
        const em_bfunction *f = &s->functions[i];
        t64(t, f->name), t64(t, f->system_name), t64(t, f->file);
        t64(t, (uint64_t)f->start_line);
    }
    for (uint32_t i = 0; i < in->nlocations; i++) {
        const em_blocation *l = &s->locations[i];
        t64(t, l->mapping), t64(t, l->address), t64(t, l->first);
        t64(t, l->n);
    }
    for (uint32_t i = 0; i < in->nlines; i++)
        t64(t, s->lines[i].function), t64(t, (uint64_t)s->lines[i].line);
    tput(t, s->parent, in->nnodes * (size_t)4);
    tput(t, s->loc, in->nnodes * (size_t)4);
    tput(t, s->depth, in->nnodes * (size_t)4);
    tput(t, s->series, in->nseries * sizeof *s->series);
    tput(t, s->label_names, in->nlabels * (size_t)4);
    tput(t, s->label_values, in->nlabels * (size_t)4);
}

static void info_put(tbuf *t, const em_block_info *in)
{
    t64(t, in->id), t64(t, (uint64_t)in->min_time);
    t64(t, (uint64_t)in->max_time), t64(t, (uint64_t)in->resolution_ms);
    t64(t, in->level), t64(t, in->nstrings), t64(t, in->nmappings);
    t64(t, in->nfunctions), t64(t, in->nlocations), t64(t, in->nnodes);
    t64(t, in->nseries), t64(t, in->nlines), t64(t, in->nlabels);
    t64(t, in->nchunks), t64(t, in->nprofiles), t64(t, in->nsamples);
    t64(t, in->file_size), t64(t, in->footer_crc);
}

static int post_put(tbuf *t, em_block *b, const lookups *lk)
{
    const em_block_syms *s;
    int rc = em_block_symbols(b, &s);

    for (size_t i = 0; i < lk->n && rc == EMBER_OK; i++) {
        roaring_bitmap_t *r;
        uint32_t *v;
        size_t n;
        if ((rc = em_block_postings(b, lk->name[i], lk->value[i], &r)) != 0)
            break;
        n = roaring_bitmap_get_cardinality(r);
        v = calloc(n + 1, 4);
        roaring_bitmap_to_uint32_array(r, v);
        tput(t, v, n * 4);
        free(v);
        roaring_bitmap_free(r);
        if ((rc = em_block_label_values(b, lk->name[i], &v, &n)) != 0)
            break;
        for (size_t j = 0; j < n; j++)
            tput(t, sstr(s, v[j]), strlen(sstr(s, v[j])) + 1);
        em_free(v);
    }
    return rc;
}

static int chunk_put(tbuf *t, em_block *b, const em_bchunk *c)
{
    const uint8_t *p;
    em_chunk ch;
    int rc = em_block_chunk_bytes(b, c, &p);

    if (rc == EMBER_OK)
        rc = em_chunk_decode(NULL, p, c->len, EM_COL_ALL, &ch);
    if (rc != EMBER_OK)
        return rc;
    t64(t, c->series), t64(t, (uint64_t)c->min_time);
    t64(t, (uint64_t)c->max_time), t64(t, c->offset), t64(t, c->len);
    tput(t, ch.time_ms, ch.h.nprofiles * (size_t)8);
    tput(t, ch.total, ch.h.nprofiles * (size_t)8);
    tput(t, ch.stacks, ch.h.nstacks * (size_t)4);
    tput(t, ch.stack_start, (ch.h.nstacks + (size_t)1) * 8);
    tput(t, ch.sample_profile, ch.h.nsamples * 4);
    tput(t, ch.sample_value, ch.h.nsamples * 8);
    em_chunk_release(&ch);
    return EMBER_OK;
}

/* Opens PATH and reads everything through every door into T. */
static int read_all(const char *path, const lookups *lk, tbuf *t)
{
    em_block *b;
    const em_block_syms *s;
    const em_block_info *in;
    int rc = em_block_open(path, &b);

    t->len = 0;
    if (rc != EMBER_OK)
        return rc;
    in = em_block_get_info(b);
    info_put(t, in);
    if ((rc = em_block_symbols(b, &s)) == EMBER_OK)
        syms_put(t, in, s);
    if (rc == EMBER_OK)
        rc = post_put(t, b, lk);
    for (uint32_t k = 0; k < in->nseries && rc == EMBER_OK; k++) {
        const em_bchunk *c;
        size_t n;
        rc = em_block_chunks(b, k, &c, &n);
        for (size_t i = 0; i < n && rc == EMBER_OK; i++)
            rc = chunk_put(t, b, &c[i]);
    }
    if (rc == EMBER_OK)
        rc = em_block_verify(b, NULL, NULL);
    em_block_close(b);
    return rc;
}

/* Every (name, value) the series of PATH carry, their types included. */
static void lookups_make(const char *path, lookups *lk)
{
    em_block *b;
    const em_block_syms *s;
    const em_block_info *in;

    OK(em_block_open(path, &b));
    OK(em_block_symbols(b, &s));
    in = em_block_get_info(b);
    lk->n = 0;
    lk->name = calloc(in->nlabels + in->nseries + 1, sizeof *lk->name);
    lk->value = calloc(in->nlabels + in->nseries + 1, sizeof *lk->value);
    for (uint32_t i = 0; i < in->nseries; i++) {
        lk->name[lk->n] = strdup(EM_TYPE_LABEL);
        lk->value[lk->n++] = strdup(sstr(s, s->series[i].type));
    }
    for (uint32_t i = 0; i < in->nlabels; i++) {
        lk->name[lk->n] = strdup(sstr(s, s->label_names[i]));
        lk->value[lk->n++] = strdup(sstr(s, s->label_values[i]));
    }
    em_block_close(b);
}

static void lookups_free(lookups *lk)
{
    for (size_t i = 0; i < lk->n; i++)
        free(lk->name[i]), free(lk->value[i]);
    free(lk->name), free(lk->value);
}

/* ---- damage ------------------------------------------------------------------ */

/* Flips bit I of the file FD in place. */
static void flip(int fd, uint64_t i)
{
    uint8_t c;

    assert_int_equal(pread(fd, &c, 1, (off_t)(i / 8)), 1);
    c ^= (uint8_t)(1u << (i % 8));
    assert_int_equal(pwrite(fd, &c, 1, (off_t)(i / 8)), 1);
}

typedef struct flips {
    uint64_t errors, same, corrupt, format;
} flips;

/* Reads the file with bit I flipped: an error, or what the original read. */
static void flip_one(const char *path, int fd, uint64_t i, const lookups *lk,
                     const tbuf *orig, tbuf *t, flips *f)
{
    int rc;

    flip(fd, i);
    rc = read_all(path, lk, t);
    flip(fd, i);
    if (rc == EMBER_OK) {
        if (t->len != orig->len || memcmp(t->p, orig->p, t->len) != 0)
            fail_msg("bit %" PRIu64 " (byte %" PRIu64 ") flipped: read "
                     "differs, no error", i, i / 8);
        f->same++;
        return;
    }
    if (rc != EMBER_ECORRUPT && rc != EMBER_EFORMAT)
        fail_msg("bit %" PRIu64 " flipped: rc %d (%s)", i, rc, em_errmsg());
    f->errors++;
    f->corrupt += rc == EMBER_ECORRUPT;
    f->format += rc == EMBER_EFORMAT;
}

/* Every bit of a small block, one at a time: each flip is an error or
** changes nothing read. */
static void test_bit_flips(void **state)
{
    char *dir = tu_tmpdir("block-flip");
    char path[512];
    model m;
    em_block_info info;
    lookups lk;
    tbuf orig = { 0 }, t = { 0 };
    flips f = { 0 };
    uint64_t bits;
    double t0 = now_s();
    int fd;

    EM_UNUSED(state);
    model_build(&m, dir, "f.blk", 300, 3, 40, 16, &info);
    snprintf(path, sizeof path, "%s/f.blk", dir);
    lookups_make(path, &lk);
    OK(read_all(path, &lk, &orig));
    bits = info.file_size * 8;
    assert_true(info.nchunks >= 6);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    for (uint64_t i = 0; i < bits; i++)
        flip_one(path, fd, i, &lk, &orig, &t, &f);
    close(fd);
    printf("flips: %" PRIu64 " bytes, %" PRIu64 " flips: %" PRIu64
           " errors (%" PRIu64 " corrupt, %" PRIu64 " format), %" PRIu64
           " unchanged, %.1f s\n", info.file_size, f.errors + f.same,
           f.errors, f.corrupt, f.format, f.same, now_s() - t0);
    OK(read_all(path, &lk, &t));            /* every flip was undone */
    assert_memory_equal(t.p, orig.p, orig.len);
    free(orig.p), free(t.p);
    lookups_free(&lk);
    model_free(&m);
    tu_rmdir(dir);
}

/* Labels are read without the stack tree: a block whose nodes.parent is
** damaged still answers postings, label values and series names (from
** bytes that passed their checksums), and every read of its stacks fails
** naming the section. */
static void test_names_alone(void **state)
{
    char *dir = tu_tmpdir("block-names");
    char path[512];
    model m;
    em_block_info info;
    em_bsection sec = { 0 };
    const em_block_syms *s;
    em_block *b;
    int fd;

    EM_UNUSED(state);
    model_build(&m, dir, "n.blk", 100, 3, 20, 8, &info);
    snprintf(path, sizeof path, "%s/n.blk", dir);
    OK(em_block_open(path, &b));
    for (size_t i = 0; i < em_block_nsections(b); i++) {
        em_block_section(b, i, &sec);
        if (sec.name != NULL && strcmp(sec.name, "nodes.parent") == 0)
            break;
    }
    assert_string_equal(sec.name, "nodes.parent");
    em_block_close(b);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    flip(fd, sec.offset * 8 + 3);
    close(fd);
    OK(em_block_open(path, &b));
    OK(em_block_names(b, &s));
    assert_non_null(s->series);
    assert_null(s->parent);                 /* not loaded */
    postings_same_names(&m, b, s);
    assert_int_equal(em_block_symbols(b, &s), EMBER_ECORRUPT);
    assert_non_null(strstr(em_errmsg(), "nodes.parent"));
    assert_int_equal(em_block_symbols(b, &s), EMBER_ECORRUPT); /* kept */
    OK(em_block_names(b, &s));              /* the names stay good */
    em_block_close(b);
    model_free(&m);
    tu_rmdir(dir);
}

/* A truncated or extended file is an error, whatever its length. */
static void test_truncations(void **state)
{
    char *dir = tu_tmpdir("block-trunc");
    char path[512], cut[512];
    model m;
    em_block_info info;
    lookups lk;
    tbuf t = { 0 };
    size_t len;
    char *all;

    EM_UNUSED(state);
    model_build(&m, dir, "f.blk", 50, 2, 10, 4, &info);
    snprintf(path, sizeof path, "%s/f.blk", dir);
    snprintf(cut, sizeof cut, "%s/cut.blk", dir);
    lookups_make(path, &lk);
    all = tu_read_file(path, &len);
    for (size_t n = 0; n < len + 64; n += n < 64 || len - n < 64 ? 1 : 97) {
        FILE *f = fopen(cut, "w");
        fwrite(all, 1, n < len ? n : len, f);
        for (size_t k = len; k < n; k++)
            fputc(0, f);
        fclose(f);
        if (n == len)
            continue;
        int rc = read_all(cut, &lk, &t);
        assert_true(rc == EMBER_ECORRUPT || rc == EMBER_EFORMAT);
    }
    free(all), free(t.p);
    lookups_free(&lk);
    model_free(&m);
    tu_rmdir(dir);
}

/* ---- allocation failure -------------------------------------------------- */

/* Failing the Nth allocation of a read gives ENOMEM, or the same read. */
static void test_alloc_fail_read(void **state)
{
    char *dir = tu_tmpdir("block-oom-r");
    char path[512];
    model m;
    em_block_info info;
    lookups lk;
    tbuf orig = { 0 }, t = { 0 };
    uint64_t n;
    int rc;

    EM_UNUSED(state);
    model_build(&m, dir, "f.blk", 60, 2, 10, 4, &info);
    snprintf(path, sizeof path, "%s/f.blk", dir);
    lookups_make(path, &lk);
    OK(read_all(path, &lk, &orig));
    for (n = 1;; n++) {
        em_alloc_fail_at(n);
        rc = read_all(path, &lk, &t);
        em_alloc_fail_at(0);
        if (rc == EMBER_OK)
            break;
        if (rc != EMBER_ENOMEM)
            fail_msg("allocation %" PRIu64 " failed: rc %d (%s)", n, rc,
                     em_errmsg());
    }
    assert_true(n > 20);
    assert_int_equal(t.len, orig.len);
    assert_memory_equal(t.p, orig.p, orig.len);
    free(orig.p), free(t.p);
    lookups_free(&lk);
    model_free(&m);
    tu_rmdir(dir);
}

/* A small block built without asserting, for allocation failures. */
static int small_build(const char *dir, em_codec *c)
{
    em_bbuild *b = NULL;
    uint32_t s[4], fn, loc[2], node[2], ser;
    int64_t line = 7, vals[2] = { 1, -1 };
    em_chunk_profile p = { 1000, 1, 1, node, vals, 2 };
    int rc = em_bbuild_new(dir, "s.blk", 3, &b);

    if (rc == EMBER_OK && (rc = em_bbuild_string(b, "main", 4, &s[0])) == 0 &&
        (rc = em_bbuild_string(b, "a.go", 4, &s[1])) == 0 &&
        (rc = em_bbuild_string(b, "cpu", 3, &s[2])) == 0 &&
        (rc = em_bbuild_string(b, "svc", 3, &s[3])) == 0 &&
        (rc = em_bbuild_function(b, s[0], s[0], s[1], 3, &fn)) == 0 &&
        (rc = em_bbuild_location(b, 0, 16, &fn, &line, 1, &loc[0])) == 0 &&
        (rc = em_bbuild_location(b, 0, 32, &fn, &line, 1, &loc[1])) == 0 &&
        (rc = em_bbuild_stack(b, loc, 2, &node[0])) == 0 &&
        (rc = em_bbuild_stack(b, loc + 1, 1, &node[1])) == 0 &&
        (rc = em_bbuild_series(b, s[2], &s[3], &s[0], 1, &ser)) == 0) {
        if (node[0] > node[1])
            node[0] = node[1], node[1] = node[0] + 1;
        rc = em_bbuild_chunk(b, c, ser, &p, 1);
    }
    if (rc == EMBER_OK)
        rc = em_bbuild_finish(b, NULL, NULL);
    em_bbuild_free(b);
    return rc;
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Failing the Nth allocation of a build gives ENOMEM and no file. */
static void test_alloc_fail_build(void **state)
{
    char *dir = tu_tmpdir("block-oom-w");
    char path[512];
    em_codec *c;
    em_block *b;
    uint64_t n;
    int rc;

    EM_UNUSED(state);
    OK(em_codec_new(&c));
    snprintf(path, sizeof path, "%s/s.blk", dir);
    for (n = 1;; n++) {
        em_alloc_fail_at(n);
        rc = small_build(dir, c);
        em_alloc_fail_at(0);
        if (rc == EMBER_OK)
            break;
        if (rc != EMBER_ENOMEM)
            fail_msg("allocation %" PRIu64 " failed: rc %d (%s)", n, rc,
                     em_errmsg());
        assert_int_equal(dir_entries(dir), 0);
    }
    assert_true(n > 20);
    OK(em_block_open(path, &b));
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
    em_codec_free(c);
    tu_rmdir(dir);
}

/* ---- the worked example of docs/file-format.md, and the seed corpus ---- */

/* The example block: one function, two locations, one stack, one series
** service=api of type "cpu", one profile. */
static void example_build(const char *dir, const char *name,
                          em_block_info *info)
{
    em_bbuild *b;
    uint32_t s_main, s_file, fn, loc[2], node, ser, name_id, value_id;
    int64_t line = 12;
    int64_t val = 5;
    em_chunk_profile p = { 1000, 10, 1, &node, &val, 1 };

    OK(em_bbuild_new(dir, name, 3, &b));
    s_main = bstr(b, "main"), s_file = bstr(b, "main.go");
    OK(em_bbuild_function(b, s_main, s_main, s_file, 10, &fn));
    OK(em_bbuild_location(b, 0, 0x401000, &fn, &line, 1, &loc[1]));
    line = 15;
    OK(em_bbuild_location(b, 0, 0x401100, &fn, &line, 1, &loc[0]));
    OK(em_bbuild_stack(b, loc, 2, &node));
    name_id = bstr(b, "service"), value_id = bstr(b, "api");
    OK(em_bbuild_series(b, bstr(b, "cpu"), &name_id, &value_id, 1, &ser));
    OK(em_bbuild_chunk(b, NULL, ser, &p, 1));
    OK(em_bbuild_finish(b, &(em_block_info){ .id = 1 }, info));
    em_bbuild_free(b);
}

/* The example's bytes are pinned: its size, the trailer's checksum (which
** covers header, footer and directory, and so every section's checksum
** and the chunk's place), and the sections as docs/file-format.md shows
** them. */
static void test_golden(void **state)
{
    static const uint8_t sections[] = {
        0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x08, 0x03, 0x03, 0x04, 0x03, 0x07,
        0x5f, 0x5f, 0x74, 0x79, 0x70, 0x65, 0x5f, 0x5f, 0x61, 0x70, 0x69, 0x63,
        0x70, 0x75, 0x6d, 0x61, 0x69, 0x6e, 0x2e, 0x67, 0x6f, 0x73, 0x65, 0x72,
        0x76, 0x69, 0x63, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x0a,
        0x14, 0x00, 0x00, 0x80, 0xc0, 0x80, 0x04, 0x80, 0x04, 0x01, 0x01, 0x00,
        0x00, 0x04, 0x0a, 0x00, 0x01, 0x00, 0x02, 0x03, 0x01, 0x06, 0x02, 0x01,
        0x05, 0x03, 0x02, 0x01, 0x01, 0x00, 0x00, 0x00, 0xd0, 0x0f, 0x00, 0x00,
        0x85, 0x01
    };
    char *dir = tu_tmpdir("block-golden");
    char path[512];
    em_block_info info;
    em_block *b;
    em_bsection first, last;
    size_t len;
    uint8_t *all;

    EM_UNUSED(state);
    example_build(dir, "x.blk", &info);
    snprintf(path, sizeof path, "%s/x.blk", dir);
    all = (uint8_t *)tu_read_file(path, &len);
    OK(em_block_open(path, &b));
    em_block_section(b, 0, &first);
    em_block_section(b, em_block_nsections(b) - 1, &last);
    if (getenv("EMBER_BLOCK_DUMP") != NULL) {
        for (size_t i = 0; i < len; i++)
            printf("%02X%s", all[i], i % 16 == 15 ? "\n" : " ");
        printf("\nsize %zu crc %08x sections [%" PRIu64 ", %" PRIu64 ")\n",
               len, info.footer_crc, first.offset, last.offset + last.stored);
    }
    assert_int_equal(len, 1027);
    assert_int_equal(info.footer_crc, 0xc91c7c2c);
    assert_int_equal(last.offset + last.stored - first.offset,
                     sizeof sections);
    assert_memory_equal(all + first.offset, sections, sizeof sections);
    OK(em_block_verify(b, NULL, NULL));
    em_block_close(b);
    free(all);
    tu_rmdir(dir);
}

/* Recomputes the checksums of the sections and the footer of the LEN
** bytes at P, after an edit: damage only the rules can find. */
static void reseal(uint8_t *p, size_t len)
{
    uint32_t flen = em_get_le32(p + len - 16), nsec;
    size_t footer = len - 16 - flen;

    nsec = em_get_le32(p + footer + 104);
    for (uint32_t k = 0; k < nsec; k++) {
        uint8_t *e = p + footer + 112 + 24 * k;
        em_put_le32(e + 4, (uint32_t)crc32_z(0, p + em_get_le64(e + 8),
                                             em_get_le32(e + 16)));
    }
    em_put_le32(p + len - 8, (uint32_t)crc32_z(crc32_z(0, p, 8), p + footer,
                                               len - 8 - footer));
}

static void problem_note(void *ctx, const char *problem)
{
    snprintf(ctx, 256, "%s", problem);
}

/* The example, with byte AT set to V and the checksums made to match:
** where it fails and why. */
static void edited(const char *dir, size_t at, uint8_t v, int open_rc,
                   int syms_rc, int verify_rc, const char *what)
{
    char path[512], src[512], got[256] = "";
    size_t len;
    uint8_t *p;
    em_block *b;
    const em_block_syms *s;
    FILE *f;
    int rc;

    snprintf(src, sizeof src, "%s/x.blk", dir);
    snprintf(path, sizeof path, "%s/edit.blk", dir);
    p = (uint8_t *)tu_read_file(src, &len);
    p[at] = v;
    reseal(p, len);
    f = fopen(path, "wb");
    fwrite(p, 1, len, f);
    fclose(f);
    free(p);
    rc = em_block_open(path, &b);
    assert_int_equal(rc, open_rc);
    if (rc == EMBER_OK) {
        assert_int_equal(em_block_symbols(b, &s), syms_rc);
        assert_int_equal(em_block_verify(b, problem_note, got), verify_rc);
        em_block_close(b);
    } else {
        snprintf(got, sizeof got, "%s", em_errmsg());
    }
    if (strstr(got, what) == NULL)
        fail_msg("byte %zu = %u: \"%s\" does not name %s", at, v, got, what);
}

/* Damage under valid checksums (what a writer's bug would make): each is
** found by the rule it breaks, and named. Offsets are the worked
** example's (docs/file-format.md). */
static void test_rules(void **state)
{
    char *dir = tu_tmpdir("block-rules");
    em_block_info info;
    const int C = EMBER_ECORRUPT;

    EM_UNUSED(state);
    example_build(dir, "x.blk", &info);
    edited(dir, 0x3F7, 2, EMBER_EFORMAT, 0, 0, "version 2");
    edited(dir, 0x3F8, 1, EMBER_EFORMAT, 0, 0, "flags");
    edited(dir, 0x14F, 1, EMBER_EFORMAT, 0, 0, "reserved");
    edited(dir, 0x004, 2, C, 0, 0, "header");
    edited(dir, 0x107, 0, C, 0, 0, "string 0");             /* nstrings */
    edited(dir, 0x143, 0x8C, C, 0, 0, "section directory");  /* chunks_end */
    edited(dir, 0x154, 2, EMBER_EFORMAT, 0, 0, "encoding");
    edited(dir, 0x0CD, 2, EMBER_OK, C, C, "nodes.parent");  /* parent 1-2 */
    edited(dir, 0x0CF, 4, EMBER_OK, C, C, "nodes.location");
    edited(dir, 0x0D3, 3, EMBER_OK, EMBER_OK, C, "postings");
    edited(dir, 0x0D2, 1, EMBER_OK, C, C, "labels.name");   /* __type__ */
    edited(dir, 0x0C8, 1, EMBER_OK, C, C, "lines.function");
    edited(dir, 0x0A1, 0x30, EMBER_OK, C, C, "does not sort"); /* "0pi" */
    edited(dir, 0x0DF, 1, EMBER_OK, EMBER_OK, C, "index");  /* span */
    edited(dir, 0x0DA, 1, EMBER_OK, EMBER_OK, C, "postings.series");
    tu_rmdir(dir);
}

static void corpus_put(const char *dir, const char *name, const char *src,
                       size_t flip_at)
{
    char path[512];
    size_t len;
    uint8_t *p = (uint8_t *)tu_read_file(src, &len);
    FILE *f;

    if (flip_at != SIZE_MAX)
        p[flip_at < len ? flip_at : len - 1] ^= 0x10;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, len, f), len);
    fclose(f);
    free(p);
}

/* Writes fuzz/fuzz_block's seeds into $EMBER_BLOCK_CORPUS when it is set:
** valid blocks of several shapes and a few damaged ones. */
static void test_corpus(void **state)
{
    const char *out = getenv("EMBER_BLOCK_CORPUS");
    char *dir;
    char path[512];
    em_block_info info;
    em_bbuild *b;
    model m;

    EM_UNUSED(state);
    if (out == NULL)
        skip();
    dir = tu_tmpdir("block-corpus");
    example_build(dir, "example", &info);
    snprintf(path, sizeof path, "%s/example", dir);
    corpus_put(out, "example", path, SIZE_MAX);
    corpus_put(out, "bad-section-crc", path, 200);
    corpus_put(out, "bad-footer", path, info.file_size - 200);
    OK(em_bbuild_new(dir, "empty", 1, &b));
    OK(em_bbuild_finish(b, NULL, NULL));
    em_bbuild_free(b);
    snprintf(path, sizeof path, "%s/empty", dir);
    corpus_put(out, "empty", path, SIZE_MAX);
    model_build(&m, dir, "small", 40, 3, 12, 4, &info);
    snprintf(path, sizeof path, "%s/small", dir);
    corpus_put(out, "small", path, SIZE_MAX);
    model_free(&m);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_interning),
        cmocka_unit_test(test_shared_prefixes),
        cmocka_unit_test(test_deep_stack),
        cmocka_unit_test(test_empty_block),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_chunk_rules),
        cmocka_unit_test(test_chunk_raw_copy),
        cmocka_unit_test(test_rewrite_hold),
        cmocka_unit_test(test_nodes_dfs),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_abandon),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_names_alone),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_alloc_fail_read),
        cmocka_unit_test(test_alloc_fail_build),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_real_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
