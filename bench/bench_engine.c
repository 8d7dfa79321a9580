/*
** bench/bench_engine.c: Ember against an SQLite baseline on the same
** generated profiles (bench/gen.h), one Markdown table at the end.
**
**   bench_engine [--quick] [--series N] [--hours H] [--long N]
**                [--label-series N] [--new-profiles N] [--runs N]
**                [--dir DIR] [--seed S] [--keep] [--sqlite-only | --ember-only]
**
** Data set: N series (a quarter per profile type) of which --long span H
** hours and the rest the last hour (pods come and go), one profile per
** series every 10 s. Phases, each on both engines, same data, same order:
**  1. ingest with stacks interned on the way (per profile, as a pprof
**     decoder does), on the first --new-profiles of the last hour;
**  2. ingest with stacks already interned (symbols loaded first), the whole
**     data set, 100 profiles per commit;
**  3. size on disk after ember_seal / a WAL checkpoint;
**  4. merges (one series, one service, all series; 1 h and H h);
**  5. label matchers over --label-series series (one profile each).
** Pairing: both durable at each commit (EMBER_SYNC_FULL; SQLite WAL with
** synchronous=FULL), one commit per 100 profiles on both sides. Times are
** CLOCK_MONOTONIC; queries report the median of --runs runs (SQLite's
** merges of half as many: they are slow). The databases live in --dir and
** are removed at the end unless --keep.
*/
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "bench/gen.h"
#include "bench/gen_sqlite.h"
#include "bench/util.h"

#define BATCH 100               /* profiles per commit, both engines */
#define END_MS 1717200000000LL  /* the data set's last step: 2024-06-01 */

typedef struct opts {
    uint32_t series, nlong, label_series, new_profiles;
    double hours;
    int runs;
    bool quick, sqlite_only, ember_only, keep;
    const char *dir;
    uint64_t seed;
} opts;

typedef struct bprof {          /* one generated profile, kept in memory */
    uint32_t series, n;
    int64_t time_ms, duration_ns, period;
    uint64_t off;               /* into dataset.s */
} bprof;

typedef struct dataset {
    gen *g;
    bprof *p;
    size_t np;
    ember_sample *s;
    uint64_t ns;
    size_t new_first, new_count;    /* profiles of the new-stacks phase */
    int64_t end_ms;
} dataset;

/* ---- small helpers ---------------------------------------------------------- */

static double now(void) { return bench_clock(CLOCK_MONOTONIC); }

/* ---- the result table ------------------------------------------------------- */

typedef struct row {
    char metric[192];
    char ember[32], sqlite[32], ratio[16], target[32], verdict[8];
} row;

static row rows[64];
static int nrows;

/* Adds a row. HIGHER: bigger is better (ratio = ember / sqlite), else
** smaller is better (ratio = sqlite / ember). E or S < 0: not measured.
** GOAL > 0: E must reach it (HIGHER) or stay under it; RGOAL > 0: the
** ratio must reach it. */
static void add_row(const char *metric, double e, double s, bool higher,
                    const char *unit, double goal, double rgoal)
{
    row *r = &rows[nrows++];
    char b1[32], b2[32];
    double ratio = -1;
    bool ok = true, judged = false;

    snprintf(r->metric, sizeof r->metric, "%s", metric);
    snprintf(r->ember, sizeof r->ember, e < 0 ? "-" : "%s%s", human(e, b1, sizeof b1), unit);
    snprintf(r->sqlite, sizeof r->sqlite, s < 0 ? "-" : "%s%s", human(s, b2, sizeof b2), unit);
    if (e > 0 && s > 0)
        ratio = higher ? e / s : s / e;
    if (ratio > 0)
        snprintf(r->ratio, sizeof r->ratio, "%.1fx", ratio);
    else
        snprintf(r->ratio, sizeof r->ratio, "-");
    r->target[0] = '\0';
    if (goal > 0) {
        snprintf(r->target, sizeof r->target, "%s %s%s", higher ? ">=" : "<=",
                 human(goal, b1, sizeof b1), unit);
        if (e >= 0) {
            judged = true;
            ok = higher ? e >= goal : e <= goal;
        }
    }
    if (rgoal > 0) {
        size_t len = strlen(r->target);
        snprintf(r->target + len, sizeof r->target - len, "%s>= %.0fx vs sqlite",
                 len ? ", " : "", rgoal);
        if (ratio > 0) {
            judged = true;
            ok = ok && ratio >= rgoal;
        }
    }
    snprintf(r->verdict, sizeof r->verdict, "%s", !judged ? "" : ok ? "ok" : "MISS");
}

static void print_table(const opts *o, const dataset *d)
{
    printf("\n| metric | ember | sqlite | ember vs sqlite | target | |\n");
    printf("|---|---:|---:|---:|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        fputs("| ", stdout);
        for (const char *c = rows[i].metric; *c; c++) {     /* Markdown cell */
            if (*c == '|')
                putchar('\\');
            putchar(*c);
        }
        printf(" | %s | %s | %s | %s | %s |\n", rows[i].ember, rows[i].sqlite,
               rows[i].ratio, rows[i].target, rows[i].verdict);
    }
    printf("\nData: %zu series (%u over %.0f h, the rest over the last 1 h), "
           "%zu profiles, %llu samples, %zu stacks; labels: %u series. "
           "Seed %llu, medians of %d runs.\n",
           gen_nseries(d->g), o->nlong, o->hours, d->np, (unsigned long long)d->ns,
           gen_nstacks(d->g), o->label_series, (unsigned long long)o->seed, o->runs);
}

/* ---- the data set ------------------------------------------------------------- */

static gen_config main_config(const opts *o)
{
    gen_config c;

    memset(&c, 0, sizeof c);
    c.seed = o->seed;
    c.ntargets = (o->series + GEN_NTYPES - 1) / GEN_NTYPES;
    c.nlong = (o->nlong + GEN_NTYPES - 1) / GEN_NTYPES;
    c.nservices = 8;
    c.span_ms = (int64_t)(o->hours * 3600000.0);
    c.short_ms = 3600000;
    c.end_ms = END_MS;
    return c;
}

static void dataset_build(dataset *d, const opts *o)
{
    gen_config c = main_config(o);
    size_t capp = 1 << 16;
    uint64_t caps = 1 << 24;
    ember_profile p;
    double t0 = now();

    memset(d, 0, sizeof *d);
    d->g = gen_new(&c);
    d->end_ms = END_MS;
    d->p = xmalloc(capp * sizeof *d->p);
    d->s = xmalloc(caps * sizeof *d->s);
    while (gen_next_profile(d->g, &p)) {
        bprof *b;
        if (d->np == capp)
            d->p = realloc(d->p, (capp *= 2) * sizeof *d->p);
        while (d->ns + p.nsamples > caps)
            d->s = realloc(d->s, (caps *= 2) * sizeof *d->s);
        if (d->p == NULL || d->s == NULL)
            die("out of memory for the data set");
        b = &d->p[d->np++];
        b->series = (uint32_t)gen_profile_series(d->g);
        b->n = (uint32_t)p.nsamples;
        b->time_ms = p.time_ms;
        b->duration_ns = p.duration_ns;
        b->period = p.period;
        b->off = d->ns;
        memcpy(d->s + d->ns, p.samples, p.nsamples * sizeof *p.samples);
        d->ns += p.nsamples;
        if (d->new_count == 0 && p.time_ms > d->end_ms - 3600000) {
            d->new_first = d->np - 1;
            d->new_count = 1;
        }
    }
    if (d->new_count == 0)
        d->new_first = 0;
    d->new_count = d->np - d->new_first < o->new_profiles ? d->np - d->new_first
                                                          : o->new_profiles;
    note("generated %zu profiles, %llu samples, %zu stacks, %zu functions, "
         "%zu locations in %.1f s", d->np, (unsigned long long)d->ns,
         gen_nstacks(d->g), gen_nfunctions(d->g), gen_nlocations(d->g), now() - t0);
}

static void to_profile(const dataset *d, size_t i, ember_profile *out)
{
    const bprof *b = &d->p[i];
    size_t nl;

    memset(out, 0, sizeof *out);
    out->sz = sizeof *out;
    out->type = gen_type[gen_series_type(d->g, b->series)];
    out->labels = gen_series_labels(d->g, b->series, &nl);
    out->nlabels = nl;
    out->time_ms = b->time_ms;
    out->duration_ns = b->duration_ns;
    out->period = b->period;
    out->samples = d->s + b->off;
    out->nsamples = b->n;
}

static uint64_t samples_in(const dataset *d, size_t first, size_t n)
{
    uint64_t s = 0;
    for (size_t i = first; i < first + n; i++)
        s += d->p[i].n;
    return s;
}

/* ---- SQLite phases -------------------------------------------------------------- */

typedef struct measures {       /* one engine's figures */
    double ingest_new, ingest, symbols_s, seal_s;
    double bytes_file, bytes_live, bytes_samples, bytes_symbols, bytes_series, bytes_fpost;
} measures;

static void path_in(char *buf, size_t cap, const opts *o, const char *name)
{
    snprintf(buf, cap, "%s/%s", o->dir, name);
}

static double sqlite_ingest_new(const dataset *d, const opts *o)
{
    char path[4096];
    sqlb *b;
    double t0, t;

    path_in(path, sizeof path, o, "sqlite-new.db");
    if ((b = sqlb_open(path, true)) == NULL)
        die("sqlite: cannot open %s", path);
    t0 = now();
    for (size_t i = d->new_first; i < d->new_first + d->new_count;) {
        if (sqlb_begin(b) != 0)
            die("sqlite: begin");
        for (size_t k = 0; k < BATCH && i < d->new_first + d->new_count; k++, i++) {
            ember_profile p;
            to_profile(d, i, &p);
            if (sqlb_append_intern(b, d->g, &p) != 0)
                die("sqlite: append with interning");
        }
        if (sqlb_commit(b) != 0)
            die("sqlite: commit");
    }
    t = now() - t0;
    sqlb_close(b);
    path_in(path, sizeof path, o, "sqlite-new.db");
    rm_rf(path);
    return (double)samples_in(d, d->new_first, d->new_count) / t;
}

static sqlb *sqlite_load(const dataset *d, const opts *o, measures *m)
{
    char path[4096];
    sqlb *b;
    double t0;
    int64_t sym = 0;
    static const char *const symtabs[] = { "strings", "mappings", "functions",
                                           "locations", "stacks" };

    path_in(path, sizeof path, o, "sqlite.db");
    if ((b = sqlb_open(path, true)) == NULL)
        die("sqlite: cannot open %s", path);
    t0 = now();
    if (sqlb_load_symbols(b, d->g, 1000) != 0)
        die("sqlite: loading symbols");
    m->symbols_s = now() - t0;
    t0 = now();
    for (size_t i = 0; i < d->np;) {
        if (sqlb_begin(b) != 0)
            die("sqlite: begin");
        for (size_t k = 0; k < BATCH && i < d->np; k++, i++) {
            ember_profile p;
            to_profile(d, i, &p);
            if (sqlb_append(b, &p) != 0)
                die("sqlite: append");
        }
        if (sqlb_commit(b) != 0)
            die("sqlite: commit");
        if (i % 20000 < BATCH)
            note("sqlite: %zu/%zu profiles", i, d->np);
    }
    m->ingest = (double)d->ns / (now() - t0);
    if (sqlb_analyze(b) != 0)
        die("sqlite: analyze");
    m->bytes_file = (double)sqlb_checkpoint_size(b);
    m->bytes_live = (double)sqlb_live_bytes(b);
    m->bytes_samples = (double)(sqlb_table_bytes(b, "samples") + sqlb_table_bytes(b, "profiles"));
    for (size_t i = 0; i < sizeof symtabs / sizeof *symtabs; i++)
        sym += sqlb_table_bytes(b, symtabs[i]);
    m->bytes_symbols = (double)sym;
    m->bytes_series = (double)(sqlb_table_bytes(b, "series") +
                               sqlb_table_bytes(b, "series_labels"));
    return b;
}

/* ---- Ember phases ---------------------------------------------------------------- */

static ember_db *ember_fresh(const char *path)
{
    ember_open_opts oo;
    ember_db *db = NULL;
    int rc;

    rm_rf(path);
    memset(&oo, 0, sizeof oo);
    oo.sz = sizeof oo;
    oo.sync = EMBER_SYNC_FULL;
    oo.map_size = 16ull << 30;
    rc = ember_open(path, &oo, &db);
    if (rc != EMBER_OK)
        die("ember_open %s: %s (%s)", path, ember_strerror(rc), ember_errmsg(db));
    return db;
}

static double ember_ingest_new(const dataset *d, const opts *o)
{
    char path[4096];
    ember_db *db;
    ember_sample *scratch = xmalloc(1024 * sizeof *scratch);
    double t0, t;

    path_in(path, sizeof path, o, "ember-new");
    db = ember_fresh(path);
    t0 = now();
    for (size_t i = d->new_first; i < d->new_first + d->new_count;) {
        ember_txn *txn;
        ember_check(ember_txn_begin(db, &txn), "txn_begin");
        for (size_t k = 0; k < BATCH && i < d->new_first + d->new_count; k++, i++) {
            ember_profile p;
            to_profile(d, i, &p);
            gen_intern_reset(d->g);
            for (size_t j = 0; j < p.nsamples && j < 1024; j++) {
                scratch[j].value = p.samples[j].value;
                ember_check(gen_intern_one(d->g, txn, p.samples[j].stack,
                                           &scratch[j].stack), "intern stack");
            }
            p.samples = scratch;
            ember_check(ember_txn_append(txn, &p), "txn_append");
        }
        ember_check(ember_txn_commit(txn), "txn_commit");
    }
    t = now() - t0;
    ember_close(db);
    rm_rf(path);
    free(scratch);
    return (double)samples_in(d, d->new_first, d->new_count) / t;
}

static int cmp_sample(const void *a, const void *b)
{
    const ember_sample *x = a, *y = b;
    return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Rewrites the data set's stack ids from pool indexes to Ember's ids. */
static void remap(dataset *d, const uint32_t *ids)
{
    for (size_t i = 0; i < d->np; i++) {
        ember_sample *s = d->s + d->p[i].off;
        bool sorted = true;
        for (uint32_t k = 0; k < d->p[i].n; k++) {
            s[k].stack = ids[s[k].stack];
            if (k > 0 && s[k].stack < s[k - 1].stack)
                sorted = false;
        }
        if (!sorted)
            qsort(s, d->p[i].n, sizeof *s, cmp_sample);
    }
}

static bool table_is(const char *name, const char *const *names)
{
    for (size_t i = 0; names[i] != NULL; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static ember_db *ember_load(dataset *d, const opts *o, measures *m)
{
    /* Ember's LMDB sub-databases: records and their content-hash indexes */
    static const char *const sym[] = { "str", "strh", "map", "maph", "fn", "fnh",
                                       "loc", "loch", "stk", "stkh", NULL };
    static const char *const ser[] = { "ser", "serh", "post", NULL };
    char path[4096];
    ember_profile ps[BATCH];
    ember_stats st;
    ember_db *db;
    double t0;

    path_in(path, sizeof path, o, "ember");
    db = ember_fresh(path);
    t0 = now();
    ember_check(gen_intern_stacks(d->g, db, 1000), "intern stacks");
    m->symbols_s = now() - t0;
    remap(d, gen_stack_ids(d->g));
    t0 = now();
    for (size_t i = 0; i < d->np;) {
        size_t n = 0;
        for (; n < BATCH && i < d->np; n++, i++)
            to_profile(d, i, &ps[n]);
        ember_check(ember_append_batch(db, ps, n), "append_batch");
        if (i % 20000 < BATCH)
            note("ember: %zu/%zu profiles", i, d->np);
    }
    m->ingest = (double)d->ns / (now() - t0);
    t0 = now();
    ember_check(ember_seal(db), "seal");
    m->seal_s = now() - t0;
    memset(&st, 0, sizeof st);
    st.sz = sizeof st;
    ember_check(ember_stats_get(db, &st), "stats");
    if (st.samples != d->ns)
        note("WARNING: ember counts %llu samples, the data set has %llu",
             (unsigned long long)st.samples, (unsigned long long)d->ns);
    m->bytes_file = (double)st.file_bytes;
    m->bytes_samples = (double)st.chunk_bytes;
    m->bytes_symbols = m->bytes_series = m->bytes_live = 0;
    for (unsigned i = 0; i < st.ntables && i < EMBER_STATS_MAX_TABLES; i++) {
        m->bytes_live += (double)st.tables[i].bytes;
        if (table_is(st.tables[i].name, sym))
            m->bytes_symbols += (double)st.tables[i].bytes;
        else if (table_is(st.tables[i].name, ser))
            m->bytes_series += (double)st.tables[i].bytes;
        else if (strcmp(st.tables[i].name, "fpost") == 0)
            m->bytes_fpost = (double)st.tables[i].bytes;
        note("ember table %-16s %10llu entries %12llu bytes", st.tables[i].name,
             (unsigned long long)st.tables[i].entries,
             (unsigned long long)st.tables[i].bytes);
    }
    note("ember: file %llu B, used %llu B, chunks %llu (%llu B), head chunks %llu",
         (unsigned long long)st.file_bytes, (unsigned long long)st.used_bytes,
         (unsigned long long)st.chunks, (unsigned long long)st.chunk_bytes,
         (unsigned long long)st.head_chunks);
    return db;
}

/* The rows of the ingest and size phases. */
static void report_load(const opts *o, const dataset *d, const measures *me,
                        const measures *ms)
{
    bool e = !o->sqlite_only, s = !o->ember_only;
    double n = (double)d->ns, nn = (double)samples_in(d, d->new_first, d->new_count);
    double nst = (double)gen_nstacks(d->g);
    char metric[192], buf[32];

    add_row("ingest, stacks already interned, samples/s", e ? me->ingest : -1,
            s ? ms->ingest : -1, true, "", 1e6, 0);
    snprintf(metric, sizeof metric,
             "ingest, stacks interned per profile (%s samples), samples/s",
             human(nn, buf, sizeof buf));
    add_row(metric, e ? me->ingest_new : -1, s ? ms->ingest_new : -1, true, "", 0, 0);
    add_row("symbol pool load (mappings, functions, locations, stacks), stacks/s",
            e ? nst / me->symbols_s : -1, s ? nst / ms->symbols_s : -1, true, "", 0, 0);
    add_row("disk bytes/sample, whole database", e ? me->bytes_file / n : -1,
            s ? ms->bytes_file / n : -1, false, " B", 0, 10);
    add_row("disk bytes/sample, pages in use (ember: sum of tables; sqlite: minus freelist)",
            e ? me->bytes_live / n : -1, s ? ms->bytes_live / n : -1, false, " B", 0, 10);
    add_row("disk bytes/sample, sample data (ember chunks; sqlite samples+profiles)",
            e ? me->bytes_samples / n : -1, s ? ms->bytes_samples / n : -1, false,
            " B", 2, 10);
    add_row("symbol tables (strings..stacks), bytes", e ? me->bytes_symbols : -1,
            s ? ms->bytes_symbols : -1, false, " B", 0, 0);
    add_row("series and label index, bytes", e ? me->bytes_series : -1,
            s ? ms->bytes_series : -1, false, " B", 0, 0);
    add_row("function postings (function -> stacks; no sqlite counterpart), bytes",
            e ? me->bytes_fpost : -1, -1, false, " B", 0, 0);
    if (e)
        note("ember seal took %.2f s", me->seal_s);
}

/* ---- merges ----------------------------------------------------------------------- */

typedef struct query {
    const char *name;
    ember_matcher m[2];
    size_t nm;
} query;

static bool series_matches(const gen *g, size_t s, int type, const query *q)
{
    if (gen_series_type(g, s) != type)
        return false;
    for (size_t i = 0; i < q->nm; i++)         /* EQ matchers only here */
        if (strcmp(gen_series_label(g, s, q->m[i].name), q->m[i].value) != 0)
            return false;
    return true;
}

static uint64_t expected_samples(const dataset *d, const query *q, int64_t from,
                                 int64_t to)
{
    uint64_t n = 0;
    for (size_t i = 0; i < d->np; i++)
        if (d->p[i].time_ms >= from && d->p[i].time_ms <= to &&
            series_matches(d->g, d->p[i].series, GEN_CPU_SAMPLES, q))
            n += d->p[i].n;
    return n;
}

static double time_ember_merge(ember_db *db, const query *q, int64_t from, int64_t to,
                               uint64_t *nstacks, int64_t *sum)
{
    ember_selector sel;
    ember_merged *mg;
    const int64_t *vals;
    uint64_t s = 0;
    double t0 = now(), t;

    memset(&sel, 0, sizeof sel);
    sel.sz = sizeof sel;
    sel.type = gen_type[GEN_CPU_SAMPLES];
    sel.matchers = q->m;
    sel.nmatchers = q->nm;
    sel.from_ms = from;
    sel.to_ms = to;
    ember_check(ember_merge(db, &sel, &mg), "merge");
    t = now() - t0;
    *nstacks = ember_merged_samples(mg, NULL, &vals);
    for (uint64_t i = 0; i < *nstacks; i++)
        s += (uint64_t)vals[i];
    *sum = (int64_t)s;
    ember_merged_free(mg);
    return t;
}

static void bench_merges(const dataset *d, const opts *o, ember_db *db, sqlb *b)
{
    query qs[3];
    double windows[2] = { 1, o->hours };
    int nw = o->hours > 1 ? 2 : 1;

    memset(qs, 0, sizeof qs);
    qs[0].name = "1 series";
    qs[0].m[0] = (ember_matcher){ "service", gen_series_label(d->g, 0, "service"), EMBER_MATCH_EQ };
    qs[0].m[1] = (ember_matcher){ "pod", gen_series_label(d->g, 0, "pod"), EMBER_MATCH_EQ };
    qs[0].nm = 2;
    qs[1].name = "1 service";
    qs[1].m[0] = qs[0].m[0];
    qs[1].nm = 1;
    qs[2].name = "all series";
    for (int w = 0; w < nw; w++) {
        int64_t to = d->end_ms, from = to - (int64_t)(windows[w] * 3600000.0) + 1;
        for (int qi = 0; qi < 3; qi++) {
            const query *q = &qs[qi];
            uint64_t n = expected_samples(d, q, from, to), es = 0, ss = 0;
            int64_t esum = 0, ssum = 0;
            double te[64] = { 0 }, ts[64] = { 0 }, e = -1, s = -1, first_e, first_s;
            char metric[192];
            for (int r = 0; db != NULL && r < o->runs; r++)
                te[r] = time_ember_merge(db, q, from, to, &es, &esum);
            for (int r = 0; b != NULL && r < (o->runs + 1) / 2; r++) {
                double t0 = now();
                if (sqlb_merge(b, gen_type[GEN_CPU_SAMPLES], q->m, q->nm, from, to,
                               &ss, &ssum) != 0)
                    die("sqlite merge");
                ts[r] = now() - t0;
            }
            first_e = te[0];
            first_s = ts[0];
            if (db != NULL)
                e = (double)n / median(te, o->runs);
            if (b != NULL)
                s = (double)n / median(ts, (o->runs + 1) / 2);
            if (db != NULL && b != NULL && (es != ss || esum != ssum))
                note("WARNING: merge %s %.0f h differs: ember %llu stacks sum %lld, "
                     "sqlite %llu stacks sum %lld", q->name, windows[w],
                     (unsigned long long)es, (long long)esum,
                     (unsigned long long)ss, (long long)ssum);
            snprintf(metric, sizeof metric, "merge %s, %.0f h (%s samples), samples/s",
                     q->name, windows[w], human((double)n, (char[32]){ 0 }, 32));
            add_row(metric, e, s, true, "", 20e6, 10);
            note("%s: ember %.4f s (first run %.4f s), sqlite %.4f s (first %.4f s)",
                 metric, db ? (double)n / e : -1.0, db ? first_e : -1.0,
                 b ? (double)n / s : -1.0, b ? first_s : -1.0);
        }
    }
}

/* ---- label matchers ------------------------------------------------------------------ */

typedef struct lquery {
    const char *label;          /* whose values to list */
    ember_matcher m[3];
    size_t nm;
    const char *text;
} lquery;

static void label_queries(lquery *q, int *n)
{
    int k = 0;

    q[k++] = (lquery){ "pod", { { "service", "checkout", EMBER_MATCH_EQ } }, 1,
                       "pod values of {service=\"checkout\"}" };
    q[k++] = (lquery){ "pod", { { "namespace", "prod", EMBER_MATCH_EQ },
                                { "service", "api|checkout|cart", EMBER_MATCH_RE } }, 2,
                       "pod values of {namespace=\"prod\", service=~\"api|checkout|cart\"}" };
    q[k++] = (lquery){ "version", { { "region", "us-east-1", EMBER_MATCH_NEQ },
                                    { "service", "pay.*", EMBER_MATCH_RE } }, 2,
                       "version values of {region!=\"us-east-1\", service=~\"pay.*\"}" };
    q[k++] = (lquery){ "service", { { "pod", ".*-x.*", EMBER_MATCH_RE } }, 1,
                       "service values of {pod=~\".*-x.*\"}" };
    q[k++] = (lquery){ "node", { { "namespace", "prod", EMBER_MATCH_NEQ },
                                 { "version", "v1\\.1.*", EMBER_MATCH_NRE },
                                 { "service", "(search|geo).*", EMBER_MATCH_RE } }, 3,
                       "node values of {namespace!=\"prod\", version!~\"v1\\\\.1.*\", "
                       "service=~\"(search|geo).*\"}" };
    *n = k;
}

/* Copies up to MAX next profiles of G into PS, samples into BUF. */
static size_t next_batch(gen *g, ember_profile *ps, ember_sample *buf, size_t max)
{
    ember_profile p;
    size_t n = 0, used = 0;

    while (n < max && gen_next_profile(g, &p)) {
        memcpy(buf + used, p.samples, p.nsamples * sizeof *p.samples);
        p.samples = buf + used;
        used += p.nsamples;
        ps[n++] = p;
    }
    return n;
}

#define LBATCH 1000

/* Loads the label data set: Ember with its stack ids, SQLite with the
** generator's (two passes over the generator). */
static void labels_load(gen *g, ember_db *db, sqlb *b)
{
    ember_profile *ps = xmalloc(LBATCH * sizeof *ps);
    ember_sample *buf = xmalloc(LBATCH * 64 * sizeof *buf);
    size_t n;

    if (b != NULL) {
        gen_set_stack_ids(g, NULL);
        gen_rewind(g);
        if (sqlb_load_symbols(b, g, 5000) != 0)
            die("sqlite: symbols (labels)");
        while ((n = next_batch(g, ps, buf, LBATCH)) > 0) {
            if (sqlb_begin(b) != 0)
                die("sqlite: begin");
            for (size_t i = 0; i < n; i++)
                if (sqlb_append(b, &ps[i]) != 0)
                    die("sqlite: append (labels)");
            if (sqlb_commit(b) != 0)
                die("sqlite: commit");
        }
        if (sqlb_analyze(b) != 0)
            die("sqlite: analyze");
    }
    if (db != NULL) {
        ember_check(gen_intern_stacks(g, db, 5000), "intern stacks (labels)");
        gen_rewind(g);
        while ((n = next_batch(g, ps, buf, LBATCH)) > 0)
            ember_check(ember_append_batch(db, ps, n), "append (labels)");
    }
    free(ps);
    free(buf);
}

static void bench_labels(const opts *o)
{
    gen_config c;
    gen *g;
    ember_db *db = NULL;
    sqlb *b = NULL;
    char path[4096];
    lquery q[8];
    int nq;
    double t0 = now();

    memset(&c, 0, sizeof c);
    c.seed = o->seed + 1;
    c.ntargets = (o->label_series + GEN_NTYPES - 1) / GEN_NTYPES;
    c.nservices = 300;
    c.min_stacks = 3;
    c.max_stacks = 8;
    g = gen_new(&c);
    if (!o->sqlite_only) {
        path_in(path, sizeof path, o, "ember-labels");
        db = ember_fresh(path);
    }
    if (!o->ember_only) {
        path_in(path, sizeof path, o, "sqlite-labels.db");
        if ((b = sqlb_open(path, false)) == NULL)
            die("sqlite: cannot open %s", path);
    }
    labels_load(g, db, b);
    note("labels: loaded %zu series in %.1f s", gen_nseries(g), now() - t0);
    label_queries(q, &nq);
    for (int i = 0; i < nq; i++) {
        double te[64], ts[64], e = -1, s = -1;
        uint64_t ec = 0, sc = 0;
        char metric[192];
        for (int r = 0; db != NULL && r < o->runs; r++) {
            ember_selector sel;
            ember_strlist *l;
            memset(&sel, 0, sizeof sel);
            sel.sz = sizeof sel;
            sel.matchers = q[i].m;
            sel.nmatchers = q[i].nm;
            t0 = now();
            ember_check(ember_label_values(db, q[i].label, &sel, &l), "label_values");
            te[r] = now() - t0;
            ec = ember_strlist_count(l);
            ember_strlist_free(l);
        }
        for (int r = 0; b != NULL && r < o->runs; r++) {
            t0 = now();
            if (sqlb_label_values(b, q[i].label, NULL, q[i].m, q[i].nm, &sc) != 0)
                die("sqlite label values");
            ts[r] = now() - t0;
        }
        if (db != NULL)
            e = median(te, o->runs) * 1e3;
        if (b != NULL)
            s = median(ts, o->runs) * 1e3;
        if (db != NULL && b != NULL && ec != sc)
            note("WARNING: %s: ember %llu values, sqlite %llu", q[i].text,
                 (unsigned long long)ec, (unsigned long long)sc);
        snprintf(metric, sizeof metric, "%s over %zuk series (%llu values), ms",
                 q[i].text, gen_nseries(g) / 1000,
                 (unsigned long long)(db ? ec : sc));
        add_row(metric, e, s, false, " ms", 0, 0);
    }
    ember_close(db);
    sqlb_close(b);
    gen_free(g);
}

/* ---- main ------------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_engine [--quick] [--series N] [--hours H] [--long N]\n"
            "                    [--label-series N] [--new-profiles N] [--runs N]\n"
            "                    [--dir DIR] [--seed S] [--keep]\n"
            "                    [--sqlite-only | --ember-only]\n");
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
    bool quick = false;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
    o->quick = quick;
    o->series = quick ? 40 : 200;
    o->nlong = quick ? 4 : 16;
    o->hours = quick ? 6 : 24;
    o->label_series = quick ? 20000 : 100000;
    o->new_profiles = quick ? 600 : 3000;
    o->runs = quick ? 3 : 5;
    o->dir = "build/bench-data";
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            continue;
        else if (strcmp(argv[i], "--series") == 0)
            o->series = (uint32_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--hours") == 0)
            o->hours = num(argc, argv, &i);
        else if (strcmp(argv[i], "--long") == 0)
            o->nlong = (uint32_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--label-series") == 0)
            o->label_series = (uint32_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--new-profiles") == 0)
            o->new_profiles = (uint32_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--runs") == 0)
            o->runs = (int)num(argc, argv, &i);
        else if (strcmp(argv[i], "--seed") == 0)
            o->seed = (uint64_t)num(argc, argv, &i);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            o->dir = argv[++i];
        else if (strcmp(argv[i], "--sqlite-only") == 0)
            o->sqlite_only = true;
        else if (strcmp(argv[i], "--ember-only") == 0)
            o->ember_only = true;
        else if (strcmp(argv[i], "--keep") == 0)
            o->keep = true;
        else
            usage();
    }
    if (o->series < GEN_NTYPES || o->hours < 1 || o->runs < 1 || o->runs > 64 ||
        (o->sqlite_only && o->ember_only))
        usage();
    if (o->nlong > o->series)
        o->nlong = o->series;
}

int main(int argc, char **argv)
{
    opts o;
    dataset d;
    measures me, ms;
    ember_db *db = NULL;
    sqlb *b = NULL;
    double t0 = now();

    memset(&o, 0, sizeof o);
    memset(&me, 0, sizeof me);
    memset(&ms, 0, sizeof ms);
    parse(&o, argc, argv);
    if (mkdir(o.dir, 0755) != 0 && errno != EEXIST)
        die("mkdir %s: %s", o.dir, strerror(errno));
    printf("Ember %s vs SQLite %s. Durability: ember sync=FULL (fsync per commit); "
           "sqlite %s. One commit per %d profiles on both sides.\n",
           EMBER_VERSION_STRING, sqlb_version(), sqlb_pragmas(), BATCH);
    fflush(stdout);
    dataset_build(&d, &o);
    if (!o.ember_only) {
        ms.ingest_new = sqlite_ingest_new(&d, &o);
        note("sqlite: ingest with interning %.0f samples/s", ms.ingest_new);
        b = sqlite_load(&d, &o, &ms);
        note("sqlite: ingest %.0f samples/s, %.0f bytes", ms.ingest, ms.bytes_file);
    }
    if (!o.sqlite_only) {
        me.ingest_new = ember_ingest_new(&d, &o);
        note("ember: ingest with interning %.0f samples/s", me.ingest_new);
        db = ember_load(&d, &o, &me);
        note("ember: ingest %.0f samples/s, seal %.2f s", me.ingest, me.seal_s);
    }
    report_load(&o, &d, &me, &ms);
    bench_merges(&d, &o, db, b);
    ember_close(db);
    sqlb_close(b);
    bench_labels(&o);
    print_table(&o, &d);
    if (!o.keep) {
        static const char *const names[] = { "ember", "ember-new", "ember-labels",
            "sqlite.db", "sqlite-new.db", "sqlite-labels.db" };
        char path[4096];
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            path_in(path, sizeof path, &o, names[i]);
            rm_rf(path);
            if (strstr(names[i], ".db") != NULL) {
                char aux[4200];
                snprintf(aux, sizeof aux, "%s-wal", path);
                remove(aux);
                snprintf(aux, sizeof aux, "%s-shm", path);
                remove(aux);
            }
        }
        rmdir(o.dir);
    }
    printf("Total run time %.0f s.\n", now() - t0);
    gen_free(d.g);
    free(d.p);
    free(d.s);
    return 0;
}
