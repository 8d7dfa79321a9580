/*
** bench/bench_query.c: query latency on a large generated database (issue 4,
** "Benchmark"), one Markdown table on stdout at the end, progress on stderr.
**
**   bench_query [--quick] [--dir DIR] [--runs N] [--cold-runs N]
**               [--pods N] [--hours H] [--label-series N] [--seed S]
**               [--step S] [--stacks MIN:MAX] [--range H]
**               [--compact] [--block H] [--downsample LIST] [--only SUBSTRING]
**               [--rebuild]
**
** Data (bench/gen.h), built once and cached in DIR (a directory per
** configuration, e.g. DIR/query-p100-h24-s1, with a stamp file written
** last, so a cut-short build is redone and reruns skip it):
**  - main: --pods pods x 2 profile types (CPU samples, alloc_space), one
**    profile per series every 10 s over --hours hours, written time-major
**    as a live database receives them: head chunks seal as their 15-minute
**    windows close and the last window stays open. The default is 100 pods
**    (200 series) over 24 h: 8,640 profiles per series, 1.73M profiles.
**    --step (seconds between profiles, 10) and --stacks (distinct stacks
**    per profile, 100:500) make other shapes, e.g. issue 15's 30 days of
**    200 series: --hours 720 --step 60 --stacks 10:40.
**  - compacted (--compact, issue 15): a copy of the main database after
**    ember_compact with no head kept (everything in blocks of --block
**    hours, the engine's default 2 h unless given), cached beside it
**    (DIR/query-...-compact-bH) with its own stamp, so the same queries
**    run on the head as written and on blocks. --downsample 5m,1h adds
**    downsampled copies of every merged block at those resolutions (all
**    kept), so queries pick the coarsest their range and step allow.
**  - labels: --label-series series (pods x 4 types, 300 services), one
**    small profile each, for label_values under a matcher.
**
** The long rows (a day of a series, a day of a service) span --range
** hours, 24 (or the data set's span when shorter) unless given.
**
** Each query runs through ember_query (its text is printed) and through the
** engine calls the executor makes for it (ember_merge + em_rprofile_build,
** ember_totals_get, ember_label_values), so the table also shows what the
** planner and executor add; both answers are checked to agree. Focus is
** also run the way an engine without function postings must do it: merge,
** resolve every stack, keep the stacks through a function whose name
** matches (the "filter path").
**
** Warm: the median of --runs runs after two untimed runs, same handle:
** the decoded-chunk cache keeps a chunk on its second miss, and a focus's
** memo of the stacks it keeps in a chunk is made on the first hit after,
** so the third run is the first that finds the handle warm.
** Cold-ish: before each of --cold-runs runs the handle is closed and the
** data file's pages are dropped from the page cache (posix_fadvise
** DONTNEED on data.mdb and the block files: only this database's pages,
** not the machine's),
** then ember_open and the query are timed together, as one CLI call does.
** Times are this thread's CPU time and wall clock (CLOCK_MONOTONIC). The
** verdicts use CPU time: the targets are per core, and on a shared machine
** the wall clock also counts other processes' turns (warm queries wait on
** no I/O, so on a quiet machine the two agree). Everything runs on one
** core (the engine does not use threads).
**
** A second table gives the targets: merge throughput (samples the
** selector covers, counted with ember_select, per CPU second; issue 15's
** bar of 100M, issue 4's was 20M), focus against the filter path (warm
** and cold-ish), one series over 24 h. --only runs the rows
** whose name holds SUBSTRING (a focus row brings its filter row).
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "bench/gen.h"
#include "bench/util.h"
#include "engine/engine.h"
#include "query/query.h"

#define END_MS 1717200000000LL  /* the data sets' last step: 2024-06-01 */
#define HOUR_MS 3600000LL
#define BATCH 200               /* profiles per append while building */
#define MAX_RUNS 64
#define MAX_QUERIES 24
#define CPU_TYPE (gen_type[GEN_CPU_SAMPLES])

typedef struct opts {
    uint32_t pods, label_series;
    double hours;
    double step_s;              /* between a series' profiles */
    uint32_t min_stacks, max_stacks;    /* per profile; 0: gen's 100..500 */
    double range_h;             /* the long rows' span; 0: min(24, hours) */
    double block_h;             /* --compact's block span; 0: the default */
    int runs, cold_runs;
    uint64_t seed;
    const char *dir, *only;
    const char *downsample;     /* --downsample: "5m,1h"; NULL: none */
    bool quick, rebuild, compact;
} opts;

/* ---- small helpers ---------------------------------------------------------- */

static double now(void) { return bench_clock(CLOCK_MONOTONIC); }
static double cpu_now(void) { return bench_clock(CLOCK_THREAD_CPUTIME_ID); }

/* "12.3 ms", "850 us", "1.20 s" */
static const char *ms_text(double s, char *buf, size_t cap)
{
    if (s < 0)
        snprintf(buf, cap, "-");
    else if (s < 1e-3)
        snprintf(buf, cap, "%.0f us", s * 1e6);
    else if (s < 1)
        snprintf(buf, cap, "%.3g ms", s * 1e3);
    else
        snprintf(buf, cap, "%.2f s", s);
    return buf;
}

static uint64_t dir_bytes;

static int du_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)path;
    (void)f;
    if (flag == FTW_F)
        dir_bytes += (uint64_t)st->st_size;
    return 0;
}

static uint64_t du(const char *path)
{
    dir_bytes = 0;
    nftw(path, du_one, 16, FTW_PHYS);
    return dir_bytes;
}

/* ---- the data sets ------------------------------------------------------------ */

/* The main data set's generator configuration. */
static gen_config main_config(const opts *o)
{
    gen_config c;

    memset(&c, 0, sizeof c);
    c.seed = o->seed;
    c.ntargets = o->pods;
    c.types = (1u << GEN_CPU_SAMPLES) | (1u << GEN_ALLOC_SPACE);
    c.nservices = 8;
    c.span_ms = (int64_t)(o->hours * (double)HOUR_MS);
    c.end_ms = END_MS;
    c.step_ms = (int64_t)(o->step_s * 1000);
    c.min_stacks = o->min_stacks;
    c.max_stacks = o->max_stacks;
    return c;
}

static gen_config labels_config(const opts *o)
{
    gen_config c;

    memset(&c, 0, sizeof c);
    c.seed = o->seed + 1;
    c.ntargets = (o->label_series + GEN_NTYPES - 1) / GEN_NTYPES;
    c.nservices = 300;
    c.min_stacks = 3;
    c.max_stacks = 8;
    c.end_ms = END_MS;
    return c;
}

/* Copies up to MAX next profiles of G into PS, their samples into BUF
** (room for MAX * per samples). */
static size_t next_batch(gen *g, ember_profile *ps, ember_sample *buf, size_t max,
                         size_t per, uint64_t *nsamples)
{
    ember_profile p;
    size_t n = 0, used = 0;

    while (n < max && gen_next_profile(g, &p)) {
        if (used + p.nsamples > max * per)
            die("a generated profile of %zu samples overflows the batch", p.nsamples);
        memcpy(buf + used, p.samples, p.nsamples * sizeof *p.samples);
        p.samples = buf + used;
        used += p.nsamples;
        *nsamples += p.nsamples;
        ps[n++] = p;
    }
    return n;
}

/* The stamp says what a cached directory holds: its first line names the
** configuration, the second what the build measured. */
static bool stamp_read(const char *path, const char *want, char *info, size_t cap)
{
    char file[4200], line[512];
    FILE *f;
    bool ok = false;

    snprintf(file, sizeof file, "%s/stamp", path);
    if ((f = fopen(file, "r")) == NULL)
        return false;
    if (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        ok = strcmp(line, want) == 0;
    }
    info[0] = '\0';
    if (ok && fgets(info, (int)cap, f) != NULL)
        info[strcspn(info, "\n")] = '\0';
    fclose(f);
    return ok;
}

/* Writes all of G's profiles into a new database at PATH (through a
** temporary directory renamed at the end) and stamps it with CONFIG. */
static void build(gen *g, const char *path, const char *config, size_t batch,
                  char *info, size_t cap)
{
    char tmp[4200], file[4300];
    ember_open_opts oo;
    ember_profile *ps = xmalloc(batch * sizeof *ps);
    ember_sample *buf = xmalloc(batch * 1024 * sizeof *buf);
    ember_db *db = NULL;
    uint64_t nprof = 0, nsamp = 0, last = 0;
    double t0 = now();
    size_t n;
    FILE *f;

    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    rm_rf(tmp);
    rm_rf(path);
    memset(&oo, 0, sizeof oo);
    oo.sz = sizeof oo;
    oo.sync = EMBER_SYNC_NONE;          /* a build, not the ingest benchmark */
    oo.map_size = 4ull << 30;
    if (ember_open(tmp, &oo, &db) != EMBER_OK)
        die("ember_open %s: %s", tmp, ember_errmsg(db));
    ember_check(gen_intern_stacks(g, db, 5000), "intern stacks");
    gen_rewind(g);
    while ((n = next_batch(g, ps, buf, batch, 1024, &nsamp)) > 0) {
        ember_check(ember_append_batch(db, ps, n), "append");
        nprof += n;
        if (nsamp - last >= 20000000) {
            note("build: %llu profiles, %llu samples, %.0f s", (unsigned long long)nprof,
                 (unsigned long long)nsamp, now() - t0);
            last = nsamp;
        }
    }
    ember_check(ember_sync(db), "sync");
    ember_close(db);
    snprintf(info, cap, "%llu profiles, %llu samples, built in %.0f s, %.0f MB on disk",
             (unsigned long long)nprof, (unsigned long long)nsamp, now() - t0,
             (double)du(tmp) / 1e6);
    snprintf(file, sizeof file, "%s/stamp", tmp);
    if ((f = fopen(file, "w")) == NULL || fprintf(f, "%s\n%s\n", config, info) < 0 ||
        fclose(f) != 0)
        die("cannot write %s: %s", file, strerror(errno));
    if (rename(tmp, path) != 0)
        die("rename %s: %s", tmp, strerror(errno));
    note("build: %s: %s", path, info);
    free(ps);
    free(buf);
}

typedef struct dataset {
    gen *g;
    char path[4096];
    char config[256];           /* the stamp's first line */
    char info[512];             /* the stamp's second line */
    ember_db *db;
} dataset;

/* True when the database at PATH opens (a cached one written by an older
** format version does not, and is built again). */
static bool opens(const char *path)
{
    ember_db *db;
    int rc = bench_try_open(path, &db);

    if (rc != EMBER_OK)
        note("%s does not open (%s): building it again", path, ember_errmsg(db));
    ember_close(db);
    return rc == EMBER_OK;
}

/* Copies the file SRC to DST (a new file). */
static void copy_file(const char *src, const char *dst)
{
    static char buf[1 << 20];
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    size_t n;

    if (in == NULL || out == NULL)
        die("copy %s to %s: %s", src, dst, strerror(errno));
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            die("write %s: %s", dst, strerror(errno));
    if (ferror(in) || fclose(out) != 0)
        die("copy %s: %s", src, strerror(errno));
    fclose(in);
}

#define MAX_RES 8

/* --downsample's LIST ("5m,1h": seconds with s, m, h or d) as RES, the
** profiles as stored first; every resolution kept for good, so each query
** finds the coarsest its range and step allow. Returns the count. */
static size_t resolutions_of(const char *list, ember_resolution *res, size_t cap)
{
    size_t n = 0;
    const char *p = list;

    memset(res, 0, cap * sizeof *res);
    if (list == NULL)
        return 0;
    res[n++].resolution_ms = 0;
    while (*p != '\0') {
        char *end;
        double v = strtod(p, &end);
        int64_t unit = *end == 's' ? 1000 : *end == 'm' ? 60000
                     : *end == 'h' ? HOUR_MS : *end == 'd' ? 24 * HOUR_MS : 0;
        if (end == p || unit == 0 || v <= 0 || n == cap ||
            (end[1] != ',' && end[1] != '\0'))
            die("--downsample %s: want a list like 5m,1h", list);
        res[n++].resolution_ms = (int64_t)(v * (double)unit);
        p = end[1] == ',' ? end + 2 : end + 1;
    }
    return n;
}

/* Compacts a copy of the database at PATH into TMP, everything into
** blocks of --block hours; INFO gets what it did. */
static void compact_into(const char *path, const char *tmp, const opts *o, char *info,
                         size_t cap)
{
    char src[4400], dst[4400];
    ember_open_opts oo;
    ember_compact_opts co;
    ember_compact_report rep;
    ember_resolution res[MAX_RES];
    ember_db *db = NULL;
    double t0;

    rm_rf(tmp);
    if (mkdir(tmp, 0755) != 0)
        die("mkdir %s: %s", tmp, strerror(errno));
    snprintf(src, sizeof src, "%s/data.mdb", path);
    snprintf(dst, sizeof dst, "%s/data.mdb", tmp);
    copy_file(src, dst);
    memset(&oo, 0, sizeof oo);
    oo.sz = sizeof oo;
    oo.map_size = 16ull << 30;
    if (ember_open(tmp, &oo, &db) != EMBER_OK)
        die("ember_open %s: %s", tmp, ember_errmsg(db));
    memset(&co, 0, sizeof co);
    co.sz = sizeof co;
    co.head_ms = 0;
    co.block_ms = (int64_t)(o->block_h * (double)HOUR_MS);
    co.nresolutions = resolutions_of(o->downsample, res, MAX_RES);
    co.resolutions = res;
    memset(&rep, 0, sizeof rep);
    rep.sz = sizeof rep;
    t0 = now();
    if (ember_compact(db, &co, &rep) != EMBER_OK)
        die("ember_compact %s: %s", tmp, ember_errmsg(db));
    snprintf(info, cap, "compacted in %.0f s: %llu blocks, %.0f MB -> %.0f MB on disk",
             now() - t0, (unsigned long long)rep.blocks_written,
             (double)rep.bytes_before / 1e6, (double)rep.bytes_after / 1e6);
    ember_close(db);
}

/* --compact: D's database compacted, in a copy cached beside it under a
** stamp of CONFIG and the block span; D then names the copy. */
static void compact_copy(dataset *d, const opts *o)
{
    const char *config = d->config;
    char path[4096], tmp[4200], want[512], info[256], file[4400];
    FILE *f;

    if (snprintf(path, sizeof path, "%s-compact-b%g%s%s", d->path, o->block_h,
                 o->downsample != NULL ? "-d" : "",
                 o->downsample != NULL ? o->downsample : "") >= (int)sizeof path)
        die("%s: path too long", d->path);
    snprintf(want, sizeof want, "%s; compacted, head 0, blocks of %g h%s%s", config,
             o->block_h, o->downsample != NULL ? ", downsampled " : "",
             o->downsample != NULL ? o->downsample : "");
    if (o->rebuild || !stamp_read(path, want, info, sizeof info) || !opens(path)) {
        note("compacting a copy of %s into %s (once, cached)", d->path, path);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        compact_into(d->path, tmp, o, info, sizeof info);
        snprintf(file, sizeof file, "%s/stamp", tmp);
        if ((f = fopen(file, "w")) == NULL || fprintf(f, "%s\n%s\n", want, info) < 0 ||
            fclose(f) != 0)
            die("cannot write %s: %s", file, strerror(errno));
        rm_rf(path);
        if (rename(tmp, path) != 0)
            die("rename %s: %s", tmp, strerror(errno));
    }
    note("%s: %s", path, info);
    snprintf(d->path, sizeof d->path, "%s", path);
    snprintf(d->info + strlen(d->info), sizeof d->info - strlen(d->info), "; %s", info);
}

/* Makes the generator of C and the database for it under DIR/NAME, built
** unless a stamp says it is there and it opens. */
static void dataset_open(dataset *d, const opts *o, const gen_config *c,
                         const char *name, size_t batch)
{
    char config[256];
    int n;

    snprintf(d->path, sizeof d->path, "%s/%s", o->dir, name);
    n = snprintf(config, sizeof config,
                 "bench_query v1 gen=%d seed=%llu targets=%u types=%#x services=%u "
                 "span=%lld stacks=%u..%u", GEN_VERSION, (unsigned long long)c->seed,
                 c->ntargets, c->types,
                 c->nservices, (long long)c->span_ms, c->min_stacks, c->max_stacks);
    if (c->step_ms != 0 && c->step_ms != 10000)     /* the older stamps stay valid */
        snprintf(config + n, sizeof config - (size_t)n, " step=%lld", (long long)c->step_ms);
    d->g = gen_new(c);
    if (o->rebuild || !stamp_read(d->path, config, d->info, sizeof d->info) ||
        !opens(d->path)) {
        note("building %s (%zu series; once, cached for later runs)", d->path,
             gen_nseries(d->g));
        build(d->g, d->path, config, batch, d->info, sizeof d->info);
    } else {
        note("%s: cached (%s)", d->path, d->info);
    }
    d->db = NULL;
    snprintf(d->config, sizeof d->config, "%s", config);
}

/* Drops the pages of FILE from the page cache (COUNT false), or counts
** those it holds (COUNT true), in pages. */
static uint64_t cache_file(const char *file, bool count)
{
    struct stat st;
    uint64_t n = 0;
    int fd, rc;

    if ((fd = open(file, O_RDONLY)) < 0)
        die("open %s: %s", file, strerror(errno));
    if (!count) {
        rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        if (rc != 0)
            die("posix_fadvise %s: %s", file, strerror(rc));
        return 0;
    }
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        size_t np = ((size_t)st.st_size + pg - 1) / pg;
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *v = xmalloc(np);
        if (m == MAP_FAILED || mincore(m, (size_t)st.st_size, v) != 0)
            die("mincore %s: %s", file, strerror(errno));
        for (size_t i = 0; i < np; i++)
            n += v[i] & 1;
        munmap(m, (size_t)st.st_size);
        free(v);
    }
    close(fd);
    return n * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* PATH's data file and block files: dropped from the page cache, or the
** bytes of them it holds counted (what a cold query read from disk). */
static uint64_t cache_db(const char *path, bool count)
{
    char file[4400];
    struct dirent *e;
    uint64_t n;
    DIR *dir;

    snprintf(file, sizeof file, "%s/data.mdb", path);
    n = cache_file(file, count);
    snprintf(file, sizeof file, "%s/blocks", path);
    if ((dir = opendir(file)) == NULL)
        return n;
    while ((e = readdir(dir)) != NULL)
        if (strstr(e->d_name, ".block") != NULL) {
            snprintf(file, sizeof file, "%s/blocks/%s", path, e->d_name);
            n += cache_file(file, count);
        }
    closedir(dir);
    return n;
}

static void evict(const char *path)
{
    cache_db(path, false);
}

/* ---- the queries ------------------------------------------------------------- */

enum {                          /* what a query does, engine side */
    OP_MERGE = 1,               /* ember_merge + em_rprofile_build */
    OP_MERGE_BY,                /* label_values, then a merge per value */
    OP_DIFF,                    /* two merges, both resolved */
    OP_FOCUS,                   /* merge with sel.focus, resolved */
    OP_FILTER,                  /* merge, resolve all, keep matching stacks */
    OP_TOTAL,                   /* ember_totals_get, bucketed by step */
    OP_LVALUES,                 /* ember_label_values */
    OP_LNAMES,                  /* ember_label_names */
    OP_MERGE_RAW                /* ember_merge alone (throughput) */
};

typedef struct bq {
    char name[128];             /* row label */
    char text[512];             /* for ember_query; "" when engine only */
    int op;
    ember_matcher m[3];
    size_t nm;
    int64_t window_ms;          /* [END - window + 1, END]; 0: all time */
    int64_t offset_ms;          /* diff: the base is this much earlier */
    int64_t step_ms;            /* total: bucket width */
    const char *re;             /* focus, filter: regex on function names */
    const char *label;          /* merge by, label_values: the label */
    dataset *d;
    double target_s;            /* answer within this, warm; 0: no target */
    int pair;                   /* OP_FILTER: index of the focus row */
    uint64_t samples;           /* samples the selector reads; 0: not counted */
} bq;

/* What a query gave, to check the two paths agree. */
typedef struct answer {
    uint64_t groups, stacks, series, points, rows;
    double sum, base;           /* stack values (diff: target, base) or points */
} answer;

static bool is_label_op(const bq *q)
{
    return q->op == OP_LVALUES || q->op == OP_LNAMES;
}

static void sel_of(const bq *q, ember_selector *s)
{
    memset(s, 0, sizeof *s);
    s->sz = sizeof *s;
    s->type = is_label_op(q) ? NULL : CPU_TYPE;
    s->matchers = q->m;
    s->nmatchers = q->nm;
    if (q->window_ms > 0) {
        s->from_ms = END_MS - q->window_ms + 1;
        s->to_ms = END_MS;
    }
    /* as the query layer: a merge may read any downsampled copy, the
    ** totals (bucketed from an odd from_ms) the profiles as stored */
    s->resolution_ms = q->op == OP_TOTAL || is_label_op(q) ? 0 : -1;
}

static void answer_add_rprofile(answer *a, const em_rprofile *p)
{
    for (size_t i = 0; i < p->nstacks; i++)
        if (p->stacks[i].value != 0 || p->stacks[i].base != 0) {
            a->stacks++;
            a->sum += (double)p->stacks[i].value;
            a->base += (double)p->stacks[i].base;
        }
    a->groups++;
}

/* Merges SEL and resolves it into *P. */
static int merge_resolve(ember_db *db, const ember_selector *sel, em_rprofile *p)
{
    ember_merged *m = NULL;
    int rc = ember_merge(db, sel, &m);

    if (rc == EMBER_OK)
        rc = em_rprofile_build(db, m, sel->type, NULL, p);
    ember_merged_free(m);
    return rc;
}

static int eng_merge(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    em_rprofile p;
    int rc;

    sel_of(q, &s);
    if (q->op == OP_FOCUS)
        s.focus = q->re;
    if ((rc = merge_resolve(db, &s, &p)) != EMBER_OK)
        return rc;
    answer_add_rprofile(a, &p);
    em_rprofile_free(&p);
    return EMBER_OK;
}

static int eng_merge_raw(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    ember_merged *m;
    const int64_t *v;
    int rc;

    sel_of(q, &s);
    if ((rc = ember_merge(db, &s, &m)) != EMBER_OK)
        return rc;
    a->groups = 1;
    a->stacks = ember_merged_samples(m, NULL, &v);
    for (uint64_t i = 0; i < a->stacks; i++)
        a->sum += (double)v[i];
    ember_merged_free(m);
    return EMBER_OK;
}

/* One merge per value of the label, as `merge by (label)` gives. */
static int eng_merge_by(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    ember_strlist *vals = NULL;
    ember_matcher m[4];
    int rc;

    sel_of(q, &s);
    if ((rc = ember_label_values(db, q->label, &s, &vals)) != EMBER_OK)
        return rc;
    memcpy(m, q->m, q->nm * sizeof *m);
    s.matchers = m;
    s.nmatchers = q->nm + 1;
    for (size_t i = 0; rc == EMBER_OK && i < ember_strlist_count(vals); i++) {
        em_rprofile p;
        m[q->nm] = (ember_matcher){ q->label, ember_strlist_get(vals, i), EMBER_MATCH_EQ };
        if ((rc = merge_resolve(db, &s, &p)) == EMBER_OK) {
            answer_add_rprofile(a, &p);
            em_rprofile_free(&p);
        }
    }
    ember_strlist_free(vals);
    return rc;
}

/* Stacks in the union of two stack-ordered merges (with non-zero values). */
static uint64_t union_count(const ember_merged *x, const ember_merged *y)
{
    const uint32_t *sx, *sy;
    const int64_t *vx, *vy;
    size_t nx = ember_merged_samples(x, &sx, &vx), ny = ember_merged_samples(y, &sy, &vy);
    size_t i = 0, j = 0;
    uint64_t n = 0;

    while (i < nx || j < ny) {
        bool take_x = j == ny || (i < nx && sx[i] <= sy[j]);
        bool take_y = i == nx || (j < ny && sy[j] <= sx[i]);
        n += (take_x && vx[i] != 0) || (take_y && vy[j] != 0);
        i += take_x;
        j += take_y;
    }
    return n;
}

/* Base and target merged and resolved through one snapshot. */
static int eng_diff(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    ember_merged *m[2] = { NULL, NULL };
    ember_snapshot *snap = NULL;
    em_rprofile p[2];
    int rc, built = 0;

    /* one snapshot: both merges name a stack the head and blocks both
    ** hold by one id (union_count compares ids) */
    rc = ember_snapshot_begin(db, &snap);
    sel_of(q, &s);
    s.from_ms -= q->offset_ms;
    s.to_ms -= q->offset_ms;
    if (rc == EMBER_OK)
        rc = ember_snapshot_merge(snap, &s, &m[0]);
    sel_of(q, &s);
    if (rc == EMBER_OK)
        rc = ember_snapshot_merge(snap, &s, &m[1]);
    for (; rc == EMBER_OK && built < 2; built++)
        rc = em_rprofile_build(db, m[built], CPU_TYPE, snap, &p[built]);
    if (rc == EMBER_OK) {
        answer tmp[2];
        memset(tmp, 0, sizeof tmp);
        answer_add_rprofile(&tmp[0], &p[0]);
        answer_add_rprofile(&tmp[1], &p[1]);
        a->groups = 1;
        a->stacks = union_count(m[0], m[1]);
        a->sum = tmp[1].sum;
        a->base = tmp[0].sum;
    }
    while (built-- > 0 && rc == EMBER_OK)
        em_rprofile_free(&p[built]);
    ember_snapshot_end(snap);
    ember_merged_free(m[0]);
    ember_merged_free(m[1]);
    return rc;
}

/* Whether any frame of stack I of P (its names in NAMES) is a function
** whose name matches RE;
** MEMO caches the answer per name id (0 unknown, 1 no, 2 yes). */
static bool stack_through(const em_rprofile *p, const em_strtab *names, size_t i,
                          const em_regex *re, uint8_t *memo)
{
    const em_rstack *s = &p->stacks[i];

    for (size_t k = 0; k < s->nframes; k++) {
        uint32_t fn = p->frames[s->first + k].fn;
        if (memo[fn] == 0) {
            const char *name = em_strtab_get(names, fn);
            memo[fn] = em_regex_match(re, name, strlen(name)) ? 2 : 1;
        }
        if (memo[fn] == 2)
            return true;
    }
    return false;
}

/* Focus without function postings: merge, resolve every stack, then keep
** the stacks through a matching function in a new resolved profile. */
static int eng_filter(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    em_rprofile all, kept;
    em_regex *re = NULL;
    uint8_t *memo = NULL;
    int rc;

    sel_of(q, &s);
    if ((rc = merge_resolve(db, &s, &all)) != EMBER_OK)
        return rc;
    rc = em_rprofile_init(&kept, CPU_TYPE);
    if (rc == EMBER_OK) {       /* the kept frames name the same functions */
        em_strtab_free(&kept.names);
        kept.names = all.names;
        memset(&all.names, 0, sizeof all.names);
        rc = em_regex_compile(q->re, &re);
    }
    if (rc == EMBER_OK && (memo = calloc(kept.names.count + 1, 1)) == NULL)
        rc = EMBER_ENOMEM;
    for (size_t i = 0; rc == EMBER_OK && i < all.nstacks; i++)
        if (all.stacks[i].value != 0 && stack_through(&all, &kept.names, i, re, memo))
            rc = em_rprofile_add(&kept, all.frames + all.stacks[i].first,
                                 all.stacks[i].nframes, all.stacks[i].value);
    if (rc == EMBER_OK)
        answer_add_rprofile(a, &kept);
    free(memo);
    em_regex_free(re);
    em_rprofile_free(&kept);
    em_rprofile_free(&all);
    return rc;
}

/* Per-series totals summed into buckets of q->step_ms from the range start. */
static int eng_total(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    ember_totals *t;
    size_t nb = (size_t)(q->window_ms / q->step_ms) + 1;
    double *b = xmalloc(nb * sizeof *b);
    uint8_t *used = xmalloc(nb);
    int rc;

    sel_of(q, &s);
    if ((rc = ember_totals_get(db, &s, &t)) != EMBER_OK)
        goto out;
    a->series = ember_totals_count(t);
    for (size_t i = 0; i < a->series; i++) {
        const int64_t *times, *vals;
        uint32_t id;
        size_t n;
        ember_totals_series(t, i, &id, &times, &vals, &n);
        memset(used, 0, nb);
        for (size_t k = 0; k < n; k++) {
            size_t j = (size_t)((times[k] - s.from_ms) / q->step_ms);
            b[j] = used[j] ? b[j] + (double)vals[k] : (double)vals[k];
            used[j] = 1;
        }
        for (size_t j = 0; j < nb; j++)
            if (used[j]) {
                a->points++;
                a->sum += b[j];
            }
    }
    ember_totals_free(t);
out:
    free(b);
    free(used);
    return rc;
}

/* ember_label_values of q->label, or ember_label_names. */
static int eng_labels(ember_db *db, const bq *q, answer *a)
{
    ember_selector s;
    ember_strlist *l;
    int rc;

    sel_of(q, &s);
    rc = q->op == OP_LNAMES ? ember_label_names(db, &s, &l)
                            : ember_label_values(db, q->label, &s, &l);
    if (rc != EMBER_OK)
        return rc;
    a->rows = ember_strlist_count(l);
    ember_strlist_free(l);
    return EMBER_OK;
}

/* Runs Q through the engine calls; *A gets the answer. */
static int run_engine(ember_db *db, const bq *q, answer *a)
{
    memset(a, 0, sizeof *a);
    switch (q->op) {
    case OP_MERGE:
    case OP_FOCUS:
        return eng_merge(db, q, a);
    case OP_MERGE_BY:
        return eng_merge_by(db, q, a);
    case OP_DIFF:
        return eng_diff(db, q, a);
    case OP_FILTER:
        return eng_filter(db, q, a);
    case OP_TOTAL:
        return eng_total(db, q, a);
    case OP_LVALUES:
    case OP_LNAMES:
        return eng_labels(db, q, a);
    default:
        return eng_merge_raw(db, q, a);
    }
}

/* The answer of an ember_query result (untimed: walks every stack). */
static void answer_of(ember_result *r, answer *a)
{
    int kind = ember_result_kind(r);

    memset(a, 0, sizeof *a);
    if (kind == EMBER_RESULT_PROFILE || kind == EMBER_RESULT_DIFF) {
        a->groups = ember_result_groups(r);
        for (size_t g = 0; g < a->groups; g++) {
            size_t n;
            ember_result_group(r, g, NULL, NULL, &n);
            for (size_t j = 0; j < n; j++) {
                const ember_frame *f;
                size_t nf;
                int64_t v, b;
                if (ember_result_stack(r, g, j, &f, &nf, &v, &b) != EMBER_OK ||
                    (v == 0 && b == 0))
                    continue;
                a->stacks++;
                a->sum += (double)v;
                a->base += (double)b;
            }
        }
    } else if (kind == EMBER_RESULT_SERIES) {
        a->series = ember_result_series_count(r);
        for (size_t i = 0; i < a->series; i++) {
            const int64_t *t;
            const double *v;
            size_t n;
            ember_result_series(r, i, NULL, NULL, &t, &v, &n);
            a->points += n;
            for (size_t k = 0; k < n; k++)
                a->sum += v[k];
        }
    } else if (kind == EMBER_RESULT_TABLE) {
        a->rows = ember_result_rows(r);
    }
}

static void query_opts(const bq *q, ember_query_opts *qo)
{
    memset(qo, 0, sizeof *qo);
    qo->sz = sizeof *qo;
    if (q->window_ms > 0) {
        qo->from_ms = END_MS - q->window_ms + 1;
        qo->to_ms = END_MS;
    }
    qo->step_ms = q->step_ms;
    qo->now_ms = END_MS;
}

/* ---- timing ------------------------------------------------------------------ */

enum { PATH_QUERY = 0, PATH_ENGINE = 1 };

typedef struct timing {
    double wall, cpu;           /* medians, seconds; < 0: not measured */
    double read;                /* cold-ish: bytes read from disk, median */
    answer ans;
    char err[200];              /* why it failed, "" when it did not */
} timing;

/* One run of Q on PATH, timed; the result is walked and freed after. */
static int run_once(ember_db *db, const bq *q, int path, double *wall, double *cpu,
                    answer *a)
{
    double w0 = now(), c0 = cpu_now();
    int rc;

    if (path == PATH_QUERY) {
        ember_query_opts qo;
        ember_result *r = NULL;
        query_opts(q, &qo);
        rc = ember_query(db, q->text, &qo, &r);
        *wall = now() - w0;
        *cpu = cpu_now() - c0;
        if (rc == EMBER_OK)
            answer_of(r, a);
        ember_result_free(r);
    } else {
        rc = run_engine(db, q, a);
        *wall = now() - w0;
        *cpu = cpu_now() - c0;
    }
    return rc;
}

/* Warm: WARMUP_RUNS untimed runs (the file's header says why two), then
** RUNS timed ones on the open handle. */
#define WARMUP_RUNS 2
static void time_warm(dataset *d, const bq *q, int path, int runs, timing *t)
{
    double w[MAX_RUNS], c[MAX_RUNS];
    int rc = EMBER_OK;

    for (int u = 0; rc == EMBER_OK && u < WARMUP_RUNS; u++)
        rc = run_once(d->db, q, path, &w[0], &c[0], &t->ans);
    t->wall = t->cpu = -1;
    t->read = 0;
    for (int r = 0; rc == EMBER_OK && r < runs; r++)
        rc = run_once(d->db, q, path, &w[r], &c[r], &t->ans);
    if (rc != EMBER_OK) {
        snprintf(t->err, sizeof t->err, "%s: %s", ember_strerror(rc),
                 ember_errmsg(NULL));
        return;
    }
    t->wall = median(w, runs);
    t->cpu = median(c, runs);
}

/* Cold-ish: per run, close, evict the data file, then open + query timed. */
static void time_cold(dataset *d, const bq *q, int path, int runs, timing *t)
{
    double w[MAX_RUNS], c[MAX_RUNS], b[MAX_RUNS];
    int rc = EMBER_OK;

    t->wall = t->cpu = -1;
    for (int r = 0; rc == EMBER_OK && r < runs; r++) {
        double w0, c0, qw, qc;
        ember_close(d->db);
        evict(d->path);
        w0 = now();
        c0 = cpu_now();
        d->db = bench_open(d->path);
        w[r] = now() - w0;
        c[r] = cpu_now() - c0;
        rc = run_once(d->db, q, path, &qw, &qc, &t->ans);
        w[r] += qw;
        c[r] += qc;
        b[r] = (double)cache_db(d->path, true);
    }
    if (rc != EMBER_OK) {
        snprintf(t->err, sizeof t->err, "%s: %s", ember_strerror(rc),
                 ember_errmsg(NULL));
        return;
    }
    t->wall = median(w, runs);
    t->cpu = median(c, runs);
    t->read = median(b, runs);
}

/* Samples Q's selector reads (its points; with a focus, those of the focus
** stacks only), counted through ember_select. */
static uint64_t count_samples(ember_db *db, const bq *q)
{
    ember_selector s;
    ember_iter *it;
    ember_point p;
    uint64_t n = 0;
    int rc;

    sel_of(q, &s);
    if (q->op == OP_FOCUS)
        s.focus = q->re;
    ember_check(ember_select(db, &s, &it), "select");
    while ((rc = ember_iter_next(it, &p)) == EMBER_OK)
        n++;
    ember_check(rc == EMBER_DONE ? EMBER_OK : rc, "select next");
    ember_iter_free(it);
    return n;
}

/* ---- the query set ------------------------------------------------------------- */

typedef struct qset {
    bq q[MAX_QUERIES];
    int n;
    const char *service, *pod;  /* the service and pod queried */
    char re[256];               /* the focus regex */
    char fn[256];               /* the function it names */
} qset;

/* Escapes regex metacharacters of NAME into OUT (a literal regex). */
static void regex_quote(const char *name, char *out, size_t cap)
{
    size_t k = 0;

    for (const char *c = name; *c != '\0' && k + 3 < cap; c++) {
        if (strchr("\\.+*?()|[]{}^$", *c) != NULL)
            out[k++] = '\\';
        out[k++] = *c;
    }
    out[k] = '\0';
}

static bq *add(qset *s, dataset *d, int op, const char *name, int64_t window)
{
    bq *q;

    if (s->n == MAX_QUERIES)
        die("more than %d queries: raise MAX_QUERIES", MAX_QUERIES);
    q = &s->q[s->n++];
    memset(q, 0, sizeof *q);
    snprintf(q->name, sizeof q->name, "%s", name);
    q->op = op;
    q->d = d;
    q->window_ms = window;
    return q;
}

static void pin_series(const qset *s, bq *q)
{
    q->m[0] = (ember_matcher){ "service", s->service, EMBER_MATCH_EQ };
    q->m[1] = (ember_matcher){ "pod", s->pod, EMBER_MATCH_EQ };
    q->nm = 2;
}

static void pin_service(const qset *s, bq *q)
{
    q->m[0] = (ember_matcher){ "service", s->service, EMBER_MATCH_EQ };
    q->nm = 1;
}

/* Focus through the postings and the filter path, over 1 h of a service
** and a day of a series; each filter row names its focus row. */
static void focus_queries(qset *s, dataset *d, int64_t day, const char *dayname)
{
    char name[128];

    for (int k = 0; k < 2; k++) {
        bq *f, *q;
        snprintf(name, sizeof name, "focus, 1 %s, %s", k ? "series" : "service",
                 k ? dayname : "1 h");
        f = add(s, d, OP_FOCUS, name, k ? day : HOUR_MS);
        if (k)
            pin_series(s, f);
        else
            pin_service(s, f);
        f->re = s->re;
        if (k)
            snprintf(f->text, sizeof f->text, "focus(%s{service=\"%s\", pod=\"%s\"}, `%s`)",
                     CPU_TYPE, s->service, s->pod, s->re);
        else
            snprintf(f->text, sizeof f->text, "focus(%s{service=\"%s\"}, `%s`)", CPU_TYPE,
                     s->service, s->re);
        snprintf(name, sizeof name, "  the same as merge + resolve + filter on names");
        q = add(s, d, OP_FILTER, name, f->window_ms);
        memcpy(q->m, f->m, sizeof q->m);
        q->nm = f->nm;
        q->re = s->re;
        q->pair = s->n - 2;
    }
}

/* Rows on the main data set; DAY is 24 h (or the data set's span). */
static void main_queries(qset *s, dataset *d, int64_t day, const char *dayname)
{
    const char *T = CPU_TYPE;
    char name[128];
    bq *q;

    q = add(s, d, OP_MERGE, "merge, 1 series, 1 h", HOUR_MS);
    pin_series(s, q);
    snprintf(q->text, sizeof q->text, "%s{service=\"%s\", pod=\"%s\"}", T, s->service, s->pod);
    q->target_s = 0.1;
    snprintf(name, sizeof name, "merge, 1 series, %s", dayname);
    q = add(s, d, OP_MERGE, name, day);
    pin_series(s, q);
    snprintf(q->text, sizeof q->text, "%s", s->q[s->n - 2].text);
    q->target_s = 0.1;
    q = add(s, d, OP_MERGE, "merge, 1 service, 1 h", HOUR_MS);
    pin_service(s, q);
    snprintf(q->text, sizeof q->text, "%s{service=\"%s\"}", T, s->service);
    q = add(s, d, OP_MERGE_BY, "merge by (pod), 1 service, 1 h", HOUR_MS);
    pin_service(s, q);
    q->label = "pod";
    snprintf(q->text, sizeof q->text, "merge by (pod) (%s{service=\"%s\"})", T, s->service);
    q = add(s, d, OP_DIFF, "diff of two hours, 1 service", HOUR_MS);
    pin_service(s, q);
    q->offset_ms = HOUR_MS;
    snprintf(q->text, sizeof q->text, "diff(%s{service=\"%s\"} offset 1h, %s{service=\"%s\"})",
             T, s->service, T, s->service);
    focus_queries(s, d, day, dayname);
    snprintf(name, sizeof name, "total, 1 series, %s, step 5m", dayname);
    q = add(s, d, OP_TOTAL, name, day);
    pin_series(s, q);
    q->step_ms = 300000;
    snprintf(q->text, sizeof q->text, "total(%s{service=\"%s\", pod=\"%s\"})", T,
             s->service, s->pod);
    snprintf(name, sizeof name, "total, 1 service, %s, step 5m", dayname);
    q = add(s, d, OP_TOTAL, name, day);
    pin_service(s, q);
    q->step_ms = 300000;
    snprintf(q->text, sizeof q->text, "total(%s{service=\"%s\"})", T, s->service);
    /* what Grafana's and Pyroscope's label requests ask, over every block */
    q = add(s, d, OP_LNAMES, "label names, all series, all time", 0);
    snprintf(q->text, sizeof q->text, "label_names()");
    q = add(s, d, OP_LVALUES, "label values of pod, all series, all time", 0);
    q->label = "pod";
    snprintf(q->text, sizeof q->text, "label_values(pod)");
}

/* label_values under matchers on the 100k-series data set. */
static void label_queries(qset *s, dataset *d)
{
    char name[128];
    bq *q;

    snprintf(name, sizeof name, "label_values(pod) under service=, %zuk series",
             gen_nseries(d->g) / 1000);
    q = add(s, d, OP_LVALUES, name, 0);
    q->label = "pod";
    q->m[0] = (ember_matcher){ "service", gen_series_label(d->g, 0, "service"),
                               EMBER_MATCH_EQ };
    q->nm = 1;
    snprintf(q->text, sizeof q->text, "label_values(pod, {service=\"%s\"})", q->m[0].value);
    snprintf(name, sizeof name, "label_values(pod) under namespace= and service=~, %zuk series",
             gen_nseries(d->g) / 1000);
    q = add(s, d, OP_LVALUES, name, 0);
    q->label = "pod";
    q->m[0] = (ember_matcher){ "namespace", gen_series_label(d->g, 0, "namespace"),
                               EMBER_MATCH_EQ };
    q->m[1] = (ember_matcher){ "service", "(api|checkout|cart|search).*", EMBER_MATCH_RE };
    q->nm = 2;
    snprintf(q->text, sizeof q->text,
             "label_values(pod, {namespace=\"%s\", service=~\"%s\"})", q->m[0].value,
             q->m[1].value);
}

/* ember_merge alone over a day, for samples/s. */
static void throughput_queries(qset *s, dataset *d, int64_t day, const char *dayname)
{
    char name[128];
    bq *q;

    snprintf(name, sizeof name, "ember_merge alone, 1 series, %s", dayname);
    q = add(s, d, OP_MERGE_RAW, name, day);
    pin_series(s, q);
    snprintf(name, sizeof name, "ember_merge alone, 1 service, %s", dayname);
    q = add(s, d, OP_MERGE_RAW, name, day);
    pin_service(s, q);
    snprintf(name, sizeof name, "ember_merge alone, all series, %s", dayname);
    add(s, d, OP_MERGE_RAW, name, day);
}

/* ---- running and reporting ------------------------------------------------------- */

typedef struct outcome {
    timing query, engine, cold;
    bool same;                  /* both paths gave the same answer */
} outcome;

static bool answers_agree(const answer *a, const answer *b)
{
    double tol = 1e-9 * (fabs(a->sum) + fabs(b->sum)) + 1e-6;

    return a->groups == b->groups && a->stacks == b->stacks && a->series == b->series &&
           a->points == b->points && a->rows == b->rows && fabs(a->sum - b->sum) <= tol &&
           fabs(a->base - b->base) <= tol;
}

static const char *answer_text(const bq *q, const answer *a, char *buf, size_t cap)
{
    char h1[32], h2[32];

    if (is_label_op(q))
        snprintf(buf, cap, "%llu %s", (unsigned long long)a->rows,
                 q->op == OP_LNAMES ? "names" : "values");
    else if (q->op == OP_TOTAL)
        snprintf(buf, cap, "%llu series, %llu points", (unsigned long long)a->series,
                 (unsigned long long)a->points);
    else
        snprintf(buf, cap, "%llu group%s, %s stacks, total %s", (unsigned long long)a->groups,
                 a->groups == 1 ? "" : "s", human((double)a->stacks, h1, sizeof h1),
                 human(a->sum, h2, sizeof h2));
    return buf;
}

static void run_all(qset *s, outcome *out, const opts *o)
{
    for (int i = 0; i < s->n; i++) {
        bq *q = &s->q[i];
        outcome *r = &out[i];
        bool has_text = q->text[0] != '\0';
        char b1[32], b2[32];

        memset(r, 0, sizeof *r);
        r->query.wall = r->engine.wall = r->cold.wall = -1;
        if (o->only != NULL && strstr(q->name, o->only) == NULL && (q->op != OP_FILTER ||
            strstr(s->q[q->pair].name, o->only) == NULL))
            continue;
        if (q->d->db == NULL)
            q->d->db = bench_open(q->d->path);
        if (q->op == OP_MERGE_RAW || q->op == OP_MERGE || q->op == OP_FOCUS ||
            q->op == OP_FILTER)
            q->samples = count_samples(q->d->db, q);
        if (has_text)
            time_warm(q->d, q, PATH_QUERY, o->runs, &r->query);
        time_warm(q->d, q, PATH_ENGINE, o->runs, &r->engine);
        if (r->engine.wall < 0)
            die("%s: engine path failed: %s", q->name, r->engine.err);
        if (o->cold_runs > 0)
            time_cold(q->d, q, r->query.wall >= 0 ? PATH_QUERY : PATH_ENGINE,
                      o->cold_runs, &r->cold);
        r->same = r->query.wall < 0 || answers_agree(&r->query.ans, &r->engine.ans);
        if (!r->same)
            note("WARNING: %s: ember_query and the engine calls disagree", q->name);
        note("%-52s query %s, engine %s%s%s", q->name,
             ms_text(r->query.wall, b1, sizeof b1), ms_text(r->engine.wall, b2, sizeof b2),
             r->query.err[0] ? "; ember_query: " : "", r->query.err);
    }
}

/* "12.1 ms (wall 12.3 ms)": CPU time first, the figure verdicts use */
static const char *time_cell(const timing *t, char *buf, size_t cap)
{
    char w[32], c[32];

    if (t->err[0] != '\0')
        snprintf(buf, cap, "failed (below)");
    else if (t->wall < 0)
        snprintf(buf, cap, "-");
    else if (t->read > 0)
        snprintf(buf, cap, "%s (wall %s, %.1f MB read)",
                 ms_text(t->cpu, c, sizeof c), ms_text(t->wall, w, sizeof w),
                 t->read / 1e6);
    else
        snprintf(buf, cap, "%s (wall %s)", ms_text(t->cpu, c, sizeof c),
                 ms_text(t->wall, w, sizeof w));
    return buf;
}

static void md_cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            putchar('\\');
        putchar(*s);
    }
}

static const char *verdict(bool measured, bool ok)
{
    return !measured ? "" : ok ? "PASS" : "MISS";
}

/* The latency table: one row per query. */
static void print_latency(const qset *s, const outcome *out)
{
    printf("\n| query | ember_query, warm | engine calls, warm | cold-ish (open + query) "
           "| answer | target | |\n|---|---:|---:|---:|---|---|---|\n");
    for (int i = 0; i < s->n; i++) {
        const bq *q = &s->q[i];
        const outcome *r = &out[i];
        const timing *best = r->query.wall >= 0 ? &r->query : &r->engine;
        char c1[80], c2[80], c3[80], a[96], tg[32];
        if (r->engine.wall < 0)
            continue;
        fputs("| ", stdout);
        md_cell(q->name);
        if (q->text[0] != '\0') {      /* `` `` when the text holds a ` */
            const char *tick = strchr(q->text, '`') != NULL ? "``" : "`";
            printf(": %s%s", tick, tick[1] ? " " : "");
            md_cell(q->text);
            printf("%s%s", tick[1] ? " " : "", tick);
        }
        tg[0] = '\0';
        if (q->target_s > 0)
            snprintf(tg, sizeof tg, "< %.0f ms", q->target_s * 1e3);
        printf(" | %s | %s | %s | %s%s | %s | %s |\n", time_cell(&r->query, c1, sizeof c1),
               time_cell(&r->engine, c2, sizeof c2), time_cell(&r->cold, c3, sizeof c3),
               answer_text(q, &best->ans, a, sizeof a), r->same ? "" : " (paths DIFFER)",
               tg, verdict(q->target_s > 0, best->cpu < q->target_s));
    }
    for (int i = 0; i < s->n; i++)
        if (out[i].query.err[0] != '\0' || out[i].cold.err[0] != '\0')
            printf("\n%s: ember_query failed: %s%s\n", s->q[i].name, out[i].query.err,
                   out[i].cold.err);
}

/* The targets, each with its figure. */
static void print_targets(const qset *s, const outcome *out)
{
    printf("\n| figure | value | target | |\n|---|---:|---|---|\n");
    for (int i = 0; i < s->n; i++) {
        const bq *q = &s->q[i];
        const outcome *r = &out[i];
        char h[32], h2[32], h3[32], h4[32];
        if (r->engine.wall < 0)
            continue;
        if (q->op == OP_MERGE_RAW || (q->op == OP_MERGE && q->window_ms > HOUR_MS)) {
            const timing *t = q->op == OP_MERGE_RAW ? &r->engine
                            : r->query.wall >= 0 ? &r->query : &r->engine;
            double v = (double)q->samples / t->cpu;
            printf("| merge throughput, %s%s (%s samples read), samples per CPU second "
                   "(per wall second: %s) | %s | >= 100M | %s |\n", q->name,
                   q->op == OP_MERGE_RAW ? "" : t == &r->query ? ", whole ember_query"
                                                              : ", merge + resolve",
                   human((double)q->samples, h, sizeof h),
                   human((double)q->samples / t->wall, h2, sizeof h2),
                   human(v, h3, sizeof h3), verdict(true, v >= 100e6));
        }
        if (q->op == OP_FILTER) {
            const outcome *f = &out[q->pair];
            const timing *ft = f->query.wall >= 0 ? &f->query : &f->engine;
            double ratio = r->engine.cpu / ft->cpu;
            printf("| %s (keeps %s of %s samples): filter path %s / focus %s (%s), CPU "
                   "| %.1fx | >= 10x | %s |\n", s->q[q->pair].name,
                   human((double)s->q[q->pair].samples, h3, sizeof h3),
                   human((double)q->samples, h4, sizeof h4),
                   ms_text(r->engine.cpu, h, sizeof h), ms_text(ft->cpu, h2, sizeof h2),
                   ft == &f->query ? "ember_query" : "engine calls", ratio,
                   verdict(true, ratio >= 10));
            if (!answers_agree(&r->engine.ans, &ft->ans))
                printf("| WARNING: focus and filter answers differ | | | |\n");
            if (r->cold.cpu > 0 && f->cold.cpu > 0)
                printf("| the same cold-ish (open + query): filter path %s / focus %s, CPU "
                       "(wall: %.1fx) | %.1fx | >= 10x | %s |\n",
                       ms_text(r->cold.cpu, h, sizeof h), ms_text(f->cold.cpu, h2, sizeof h2),
                       r->cold.wall / f->cold.wall, r->cold.cpu / f->cold.cpu,
                       verdict(true, r->cold.cpu / f->cold.cpu >= 10));
        }
        if (q->op == OP_MERGE && q->target_s > 0 && q->window_ms > HOUR_MS) {
            const timing *t = r->query.wall >= 0 ? &r->query : &r->engine;
            printf("| %s, warm CPU / warm wall / cold-ish wall | %s / %s / %s | < 100 ms "
                   "| %s |\n", q->name, ms_text(t->cpu, h, sizeof h),
                   ms_text(t->wall, h2, sizeof h2), ms_text(r->cold.wall, h3, sizeof h3),
                   verdict(true, t->cpu < 0.1));
        }
    }
}

/* ---- main ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_query [--quick] [--dir DIR] [--runs N] [--cold-runs N]\n"
            "                   [--pods N] [--hours H] [--label-series N] [--seed S]\n"
            "                   [--step S] [--stacks MIN:MAX] [--range H]\n"
            "                   [--compact] [--block H] [--downsample LIST]\n"
            "                   [--only SUBSTRING] [--rebuild]\n");
    exit(2);
}

static double num(int argc, char **argv, int *i)
{
    char *end;
    double v;

    if (*i + 1 >= argc)
        usage();
    v = strtod(argv[++*i], &end);
    if (*end != '\0' || v < 0 || !isfinite(v))
        die("bad number for %s: %s", argv[*i - 1], argv[*i]);
    return v;
}

static void parse(opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            o->quick = true;
    o->pods = o->quick ? 20 : 100;
    o->hours = o->quick ? 3 : 24;
    o->label_series = o->quick ? 20000 : 100000;
    o->runs = o->quick ? 3 : 7;
    o->cold_runs = 3;
    o->seed = 1;
    o->step_s = 10;
    o->dir = "build/bench-data";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            continue;
        else if (strcmp(argv[i], "--pods") == 0)
            o->pods = (uint32_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--hours") == 0)
            o->hours = num(argc, argv, &i);
        else if (strcmp(argv[i], "--label-series") == 0)
            o->label_series = (uint32_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--runs") == 0)
            o->runs = (int)num(argc, argv, &i);
        else if (strcmp(argv[i], "--cold-runs") == 0)
            o->cold_runs = (int)num(argc, argv, &i);
        else if (strcmp(argv[i], "--seed") == 0)
            o->seed = (uint64_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            o->dir = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            o->only = argv[++i];
        else if (strcmp(argv[i], "--rebuild") == 0)
            o->rebuild = true;
        else if (strcmp(argv[i], "--step") == 0)
            o->step_s = num(argc, argv, &i);
        else if (strcmp(argv[i], "--range") == 0)
            o->range_h = num(argc, argv, &i);
        else if (strcmp(argv[i], "--compact") == 0)
            o->compact = true;
        else if (strcmp(argv[i], "--block") == 0)
            o->block_h = num(argc, argv, &i);
        else if (strcmp(argv[i], "--downsample") == 0 && i + 1 < argc)
            o->downsample = argv[++i];
        else if (strcmp(argv[i], "--stacks") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%u:%u", &o->min_stacks, &o->max_stacks) != 2)
                usage();
        } else
            usage();
    }
    if (o->pods < 1 || o->hours < 2 || o->label_series < GEN_NTYPES || o->runs < 1 ||
        o->runs > MAX_RUNS || o->cold_runs > MAX_RUNS || o->step_s < 1 ||
        o->min_stacks > o->max_stacks || o->range_h > o->hours)
        usage();
}

static void print_header(const opts *o, const dataset *m, const dataset *l)
{
    printf("Ember %s query benchmark (issue 4). Main data set: %zu series (%u pods x "
           "CPU samples and alloc_space, 8 services), one profile per series every "
           "%g s over %g h, %zu stacks in the pool, %zu functions: %s. Label data "
           "set: %zu series: %s. Queries use %s; service \"%s\" (%u pods of it per "
           "type), pod \"%s\". Warm: median of %d runs after two; cold-ish: median "
           "of %d runs, each after dropping the data file from the page cache and "
           "reopening. Times: CPU time of the query's thread, wall clock in "
           "parentheses; verdicts on CPU time.\n",
           EMBER_VERSION_STRING, gen_nseries(m->g), o->pods, o->step_s, o->hours,
           gen_nstacks(m->g),
           gen_nfunctions(m->g), m->info, gen_nseries(l->g), l->info, CPU_TYPE,
           gen_series_label(m->g, 0, "service"), (o->pods + 7) / 8,
           gen_series_label(m->g, 0, "pod"), o->runs, o->cold_runs);
}

int main(int argc, char **argv)
{
    opts o;
    dataset main_d, lab_d;
    gen_config mc, lc;
    qset *s = calloc(1, sizeof *s);
    outcome *out = calloc(MAX_QUERIES, sizeof *out);
    char name[128], dayname[32];
    int64_t day;
    int n;
    double t0 = now();

    bench_name = "bench query";

    memset(&o, 0, sizeof o);
    parse(&o, argc, argv);
    if (s == NULL || out == NULL)
        die("out of memory");
    if (mkdir(o.dir, 0755) != 0 && errno != EEXIST)
        die("mkdir %s: %s", o.dir, strerror(errno));
    mc = main_config(&o);
    lc = labels_config(&o);
    n = snprintf(name, sizeof name, "query-p%u-h%g-s%llu", o.pods, o.hours,
                 (unsigned long long)o.seed);
    if (o.step_s != 10)
        n += snprintf(name + n, sizeof name - (size_t)n, "-step%g", o.step_s);
    if (o.max_stacks > 0)
        snprintf(name + n, sizeof name - (size_t)n, "-k%u-%u", o.min_stacks, o.max_stacks);
    dataset_open(&main_d, &o, &mc, name, BATCH);
    if (o.compact)
        compact_copy(&main_d, &o);
    snprintf(name, sizeof name, "query-labels-%u-s%llu", o.label_series,
             (unsigned long long)o.seed);
    dataset_open(&lab_d, &o, &lc, name, 1000);
    day = o.hours >= 24 ? 24 * HOUR_MS : (int64_t)(o.hours * (double)HOUR_MS);
    if (o.range_h > 0)
        day = (int64_t)(o.range_h * (double)HOUR_MS);
    if (day > 24 * HOUR_MS && day % (24 * HOUR_MS) == 0)
        snprintf(dayname, sizeof dayname, "%g d", (double)day / (double)(24 * HOUR_MS));
    else
        snprintf(dayname, sizeof dayname, "%g h", (double)day / (double)HOUR_MS);
    s->service = gen_series_label(main_d.g, 0, "service");
    s->pod = gen_series_label(main_d.g, 0, "pod");
    snprintf(s->fn, sizeof s->fn, "%s", gen_shift_function(main_d.g));
    regex_quote(s->fn, s->re, sizeof s->re);
    main_queries(s, &main_d, day, dayname);
    throughput_queries(s, &main_d, day, dayname);
    label_queries(s, &lab_d);
    print_header(&o, &main_d, &lab_d);
    fflush(stdout);
    run_all(s, out, &o);
    print_latency(s, out);
    print_targets(s, out);
    printf("\nFocus regex: `%s` (the function %s). Total run time %.0f s.\n", s->re,
           s->fn, now() - t0);
    ember_close(main_d.db);
    ember_close(lab_d.db);
    gen_free(main_d.g);
    gen_free(lab_d.g);
    free(s);
    free(out);
    return 0;
}
