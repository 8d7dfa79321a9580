/*
** bench/bench_export.c: a database's rows in the forms Ember's bytes are
** measured against (issue 15, bench/compact.sh), read through the public
** API only (ember_select, ember_series_labels, ember_snapshot_*):
**
**   bench_export DB [--sqlite FILE] [--columns DIR]
**
** --sqlite FILE: the normalized SQLite schema of bench/gen_sqlite.c
**   holding the same rows: a profile per (series, time) run of samples,
**   the stacks, locations, functions, mappings and strings they reach
**   under Ember's ids. WAL, synchronous=NORMAL (the bytes do not depend on
**   it), 100 profiles per commit, ANALYZE, a checkpoint. Profiles get
**   duration and period 0: ember_select does not give them.
** --columns DIR: the plain columns of the zstd floor, one file each:
**   samples.series (u32), samples.time (i64, ms), samples.stack (u32),
**   samples.value (i64), little-endian, in ember_select's order (series,
**   time, stack); then the symbol tables and the series dictionary as
**   tab-separated text: series.txt (id, type, name=value...),
**   stacks.txt (id, location ids leaf first), locations.txt (id, mapping,
**   address, function:line...), functions.txt (id, name, system name,
**   file, start line), mappings.txt (id, start, limit, offset, file,
**   build id).
**
** Prints one line of key=value counts (samples, profiles, series, stacks,
** locations, functions, mappings) and, with --sqlite, the SQLite bytes:
** file (after the checkpoint), samples (samples and profiles tables with
** their indexes), symbols (strings..stacks) and series (with labels).
*/
#include <errno.h>
#include <roaring/roaring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ember.h"
#include "bench/gen_sqlite.h"
#include "bench/util.h"

#define BATCH 100               /* profiles per SQLite commit */

enum { C_SERIES, C_TIME, C_STACK, C_VALUE, C_NCOLS };
enum { T_SERIES, T_STACKS, T_LOCATIONS, T_FUNCTIONS, T_MAPPINGS, T_NTABLES };

typedef struct out {
    ember_db *db;
    sqlb *sq;                   /* NULL: no SQLite */
    FILE *col[C_NCOLS];         /* all NULL: no columns */
    FILE *txt[T_NTABLES];
    roaring_bitmap_t *stacks, *locs, *funcs, *maps;
    /* the profile being gathered for SQLite */
    ember_profile p;
    ember_sample *s;
    size_t ns, cap;
    ember_strlist *labels;      /* of the current series */
    ember_label *lab;
    uint64_t nsamples, nprofiles, nseries;
} out;

static FILE *open_in(const char *dir, const char *name)
{
    char path[4400];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if ((f = fopen(path, "w")) == NULL)
        die("cannot create %s: %s", path, strerror(errno));
    return f;
}

static void open_columns(out *o, const char *dir)
{
    static const char *const col[C_NCOLS] = { "samples.series", "samples.time",
                                              "samples.stack", "samples.value" };
    static const char *const txt[T_NTABLES] = { "series.txt", "stacks.txt",
        "locations.txt", "functions.txt", "mappings.txt" };

    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        die("mkdir %s: %s", dir, strerror(errno));
    for (int i = 0; i < C_NCOLS; i++)
        o->col[i] = open_in(dir, col[i]);
    for (int i = 0; i < T_NTABLES; i++)
        o->txt[i] = open_in(dir, txt[i]);
}

static void put_le(FILE *f, uint64_t v, int bytes)
{
    uint8_t b[8];

    for (int i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fwrite(b, 1, (size_t)bytes, f);
}

/* ---- the sample rows ------------------------------------------------------------ */

/* Writes the gathered profile to SQLite, committing every BATCH. */
static void flush_profile(out *o)
{
    if (o->ns == 0)
        return;
    o->nprofiles++;
    if (o->sq != NULL) {
        o->p.samples = o->s;
        o->p.nsamples = o->ns;
        if (sqlb_append(o->sq, &o->p) != 0)
            die("sqlite: append profile %llu", (unsigned long long)o->nprofiles);
        if (o->nprofiles % BATCH == 0 && (sqlb_commit(o->sq) != 0 || sqlb_begin(o->sq) != 0))
            die("sqlite: commit");
    }
    o->ns = 0;
}

/* A new series: its type and labels for the profiles, a dictionary line. */
static void start_series(out *o, uint32_t id)
{
    size_t n;

    ember_strlist_free(o->labels);
    ember_check(ember_series_labels(o->db, id, &o->labels), "series labels");
    n = (ember_strlist_count(o->labels) - 1) / 2;
    free(o->lab);
    o->lab = xmalloc((n + 1) * sizeof *o->lab);
    o->p.type = ember_strlist_get(o->labels, 0);
    for (size_t i = 0; i < n; i++)
        o->lab[i] = (ember_label){ ember_strlist_get(o->labels, 1 + 2 * i),
                                   ember_strlist_get(o->labels, 2 + 2 * i) };
    o->p.labels = o->lab;
    o->p.nlabels = n;
    o->nseries++;
    if (o->txt[T_SERIES] != NULL) {
        fprintf(o->txt[T_SERIES], "%u\t%s", id, o->p.type);
        for (size_t i = 0; i < n; i++)
            fprintf(o->txt[T_SERIES], "\t%s=%s", o->lab[i].name, o->lab[i].value);
        fputc('\n', o->txt[T_SERIES]);
    }
}

static void add_point(out *o, const ember_point *pt, const ember_point *prev)
{
    bool same_series = prev != NULL && prev->series == pt->series;

    if (!same_series || prev->time_ms != pt->time_ms || prev->stack >= pt->stack)
        flush_profile(o);
    if (!same_series)
        start_series(o, pt->series);
    if (o->ns == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 1024;
        o->s = realloc(o->s, o->cap * sizeof *o->s);
        if (o->s == NULL)
            die("out of memory");
    }
    o->s[o->ns++] = (ember_sample){ pt->stack, pt->value };
    o->p.time_ms = pt->time_ms;
    roaring_bitmap_add(o->stacks, pt->stack);
    if (o->col[0] != NULL) {
        put_le(o->col[C_SERIES], pt->series, 4);
        put_le(o->col[C_TIME], (uint64_t)pt->time_ms, 8);
        put_le(o->col[C_STACK], pt->stack, 4);
        put_le(o->col[C_VALUE], (uint64_t)pt->value, 8);
    }
    o->nsamples++;
}

static void export_samples(out *o)
{
    ember_selector sel;
    ember_iter *it;
    ember_point pt, prev = { 0, 0, 0, 0 };
    int rc;

    memset(&sel, 0, sizeof sel);
    sel.sz = sizeof sel;
    memset(&o->p, 0, sizeof o->p);
    o->p.sz = sizeof o->p;
    ember_check(ember_select(o->db, &sel, &it), "select");
    while ((rc = ember_iter_next(it, &pt)) == EMBER_OK) {
        add_point(o, &pt, o->nsamples > 0 ? &prev : NULL);
        prev = pt;
        if (o->nsamples % 5000000 == 0)
            note("%llu samples", (unsigned long long)o->nsamples);
    }
    ember_check(rc == EMBER_DONE ? EMBER_OK : rc, "select next");
    flush_profile(o);
    ember_iter_free(it);
}

/* ---- the symbol tables ------------------------------------------------------------ */

static void export_stacks(out *o, ember_snapshot *s)
{
    roaring_uint32_iterator_t *it = roaring_create_iterator(o->stacks);

    for (; it->has_value; roaring_advance_uint32_iterator(it)) {
        const uint32_t *locs;
        size_t n;
        ember_check(ember_snapshot_stack(s, it->current_value, &locs, &n), "stack");
        roaring_bitmap_add_many(o->locs, n, locs);
        if (o->sq != NULL && sqlb_put_stack(o->sq, it->current_value, locs, n) != 0)
            die("sqlite: stack %u", it->current_value);
        if (o->txt[T_STACKS] != NULL) {
            fprintf(o->txt[T_STACKS], "%u\t", it->current_value);
            for (size_t k = 0; k < n; k++)
                fprintf(o->txt[T_STACKS], k ? " %u" : "%u", locs[k]);
            fputc('\n', o->txt[T_STACKS]);
        }
    }
    roaring_free_uint32_iterator(it);
}

static void export_locations(out *o, ember_snapshot *s)
{
    roaring_uint32_iterator_t *it = roaring_create_iterator(o->locs);
    FILE *f = o->txt[T_LOCATIONS];

    for (; it->has_value; roaring_advance_uint32_iterator(it)) {
        ember_location l;
        ember_check(ember_snapshot_location(s, it->current_value, &l), "location");
        roaring_bitmap_add(o->maps, l.mapping);
        for (size_t k = 0; k < l.nlines; k++)
            roaring_bitmap_add(o->funcs, l.lines[k].function);
        if (o->sq != NULL && sqlb_put_location(o->sq, it->current_value, &l) != 0)
            die("sqlite: location %u", it->current_value);
        if (f == NULL)
            continue;
        fprintf(f, "%u\t%u\t%llx\t", it->current_value, l.mapping,
                (unsigned long long)l.address);
        for (size_t k = 0; k < l.nlines; k++)
            fprintf(f, k ? " %u:%lld" : "%u:%lld", l.lines[k].function,
                    (long long)l.lines[k].line);
        fputc('\n', f);
    }
    roaring_free_uint32_iterator(it);
}

static void export_functions(out *o, ember_snapshot *s)
{
    roaring_uint32_iterator_t *it = roaring_create_iterator(o->funcs);

    for (; it->has_value; roaring_advance_uint32_iterator(it)) {
        ember_function f;
        ember_check(ember_snapshot_function(s, it->current_value, &f), "function");
        if (o->sq != NULL && sqlb_put_function(o->sq, it->current_value, &f) != 0)
            die("sqlite: function %u", it->current_value);
        if (o->txt[T_FUNCTIONS] != NULL)
            fprintf(o->txt[T_FUNCTIONS], "%u\t%s\t%s\t%s\t%lld\n", it->current_value,
                    f.name ? f.name : "", f.system_name ? f.system_name : "",
                    f.file ? f.file : "", (long long)f.start_line);
    }
    roaring_free_uint32_iterator(it);
}

static void export_mappings(out *o, ember_snapshot *s)
{
    roaring_uint32_iterator_t *it = roaring_create_iterator(o->maps);

    for (; it->has_value; roaring_advance_uint32_iterator(it)) {
        ember_mapping m;
        ember_check(ember_snapshot_mapping(s, it->current_value, &m), "mapping");
        if (o->sq != NULL && sqlb_put_mapping(o->sq, it->current_value, &m) != 0)
            die("sqlite: mapping %u", it->current_value);
        if (o->txt[T_MAPPINGS] != NULL)
            fprintf(o->txt[T_MAPPINGS], "%u\t%llx\t%llx\t%llx\t%s\t%s\n",
                    it->current_value, (unsigned long long)m.start,
                    (unsigned long long)m.limit, (unsigned long long)m.offset,
                    m.file ? m.file : "", m.build_id ? m.build_id : "");
    }
    roaring_free_uint32_iterator(it);
}

static void export_symbols(out *o)
{
    ember_snapshot *s;

    ember_check(ember_snapshot_begin(o->db, &s), "snapshot");
    export_stacks(o, s);
    export_locations(o, s);
    export_functions(o, s);
    export_mappings(o, s);
    ember_snapshot_end(s);
}

/* ---- main ------------------------------------------------------------------------- */

static void sqlite_finish(out *o)
{
    static const char *const sym[] = { "strings", "mappings", "functions", "locations",
                                       "stacks" };
    int64_t file, samples, symbols = 0, series;

    if (sqlb_commit(o->sq) != 0 || sqlb_analyze(o->sq) != 0)
        die("sqlite: commit, analyze");
    file = sqlb_checkpoint_size(o->sq);
    samples = sqlb_table_bytes(o->sq, "samples") + sqlb_table_bytes(o->sq, "profiles");
    for (size_t i = 0; i < sizeof sym / sizeof *sym; i++)
        symbols += sqlb_table_bytes(o->sq, sym[i]);
    series = sqlb_table_bytes(o->sq, "series") + sqlb_table_bytes(o->sq, "series_labels");
    printf("sqlite_file=%lld sqlite_samples=%lld sqlite_symbols=%lld sqlite_series=%lld\n",
           (long long)file, (long long)samples, (long long)symbols, (long long)series);
}

static void parse(int argc, char **argv, const char **sqlite, const char **cols)
{
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--sqlite") == 0 && i + 1 < argc)
            *sqlite = argv[++i];
        else if (strcmp(argv[i], "--columns") == 0 && i + 1 < argc)
            *cols = argv[++i];
        else
            argc = 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        die("usage: bench_export DB [--sqlite FILE] [--columns DIR]");
}

int main(int argc, char **argv)
{
    const char *sqlite = NULL, *cols = NULL;
    out o;

    bench_name = "bench_export";
    memset(&o, 0, sizeof o);
    parse(argc, argv, &sqlite, &cols);
    o.db = bench_open(argv[1]);
    if (sqlite != NULL && ((o.sq = sqlb_open(sqlite, false)) == NULL || sqlb_begin(o.sq) != 0))
        die("sqlite: cannot create %s", sqlite);
    if (cols != NULL)
        open_columns(&o, cols);
    o.stacks = roaring_bitmap_create();
    o.locs = roaring_bitmap_create();
    o.funcs = roaring_bitmap_create();
    o.maps = roaring_bitmap_create();
    export_samples(&o);
    export_symbols(&o);
    printf("samples=%llu profiles=%llu series=%llu stacks=%llu locations=%llu "
           "functions=%llu mappings=%llu\n", (unsigned long long)o.nsamples,
           (unsigned long long)o.nprofiles, (unsigned long long)o.nseries,
           (unsigned long long)roaring_bitmap_get_cardinality(o.stacks),
           (unsigned long long)roaring_bitmap_get_cardinality(o.locs),
           (unsigned long long)roaring_bitmap_get_cardinality(o.funcs),
           (unsigned long long)roaring_bitmap_get_cardinality(o.maps));
    if (o.sq != NULL)
        sqlite_finish(&o);
    for (int i = 0; i < C_NCOLS; i++)
        if (o.col[i] != NULL && fclose(o.col[i]) != 0)
            die("writing the columns: %s", strerror(errno));
    for (int i = 0; i < T_NTABLES; i++)
        if (o.txt[i] != NULL && fclose(o.txt[i]) != 0)
            die("writing the tables: %s", strerror(errno));
    sqlb_close(o.sq);
    ember_strlist_free(o.labels);
    free(o.lab);
    free(o.s);
    roaring_bitmap_free(o.stacks);
    roaring_bitmap_free(o.locs);
    roaring_bitmap_free(o.funcs);
    roaring_bitmap_free(o.maps);
    ember_close(o.db);
    return 0;
}
