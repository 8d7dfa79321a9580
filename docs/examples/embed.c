/*
** docs/examples/embed.c: a small program that embeds Ember.
**
** It opens (or creates) the database directory given as argv[1], stores a
** few CPU profiles of a made-up service, then asks two questions:
**   1. Where did service "api" spend its samples? (a merge, top stacks)
**   2. How did each series' total change over time? (totals)
**
** Build it against an installed Ember:
**
**     cc -std=c11 -Wall -Werror embed.c $(pkg-config --cflags --libs ember)
**     ./a.out /tmp/example.db
**
** Every Ember call returns an int: EMBER_OK (0) on success, a negative
** EMBER_E* code on failure. ember_errmsg() then says what failed and where.
**
** Running it twice on the same directory doubles the numbers: the stacks
** intern to the same ids, and the profiles are appended again.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ember.h>

/* The profile type every profile below has: CPU samples, counted. */
#define TYPE "process_cpu:samples:count:cpu:nanoseconds:delta"

/* 2024-11-21T06:20:00Z in unix milliseconds: a fixed start, so the output
** is the same on every run. */
#define T0 1732170000000LL

/* Prints why RC failed and returns 1 (the exit status); 0 when RC is OK. */
static int failed(int rc, const char *what)
{
    if (rc == EMBER_OK)
        return 0;
    fprintf(stderr, "embed: %s: %s: %s\n", what, ember_strerror(rc),
            ember_errmsg(NULL));
    return 1;
}

/* ---- writing ------------------------------------------------------------ */

/* The call stacks of our made-up program, root first, as text. */
static const char *const stack_text[][4] = {
    { "main", "serve", "handle_request", "parse_json" },
    { "main", "serve", "handle_request", "write_log" },
    { "main", "serve", "accept", NULL },
    { "main", "gc", NULL, NULL },
};
#define NSTACKS (sizeof stack_text / sizeof stack_text[0])

/* Interns function NAME, and a location that holds just that function,
** inside TXN; *loc gets the location id. */
static int intern_frame(ember_txn *txn, const char *name, uint32_t *loc)
{
    ember_function fn = { .name = name };   /* other fields: "" and 0 */
    ember_line line = { 0, 0 };             /* line 0: unknown */
    ember_location l = { 0 };               /* mapping 0: unknown */
    int rc = ember_intern_function(txn, &fn, &line.function);

    if (rc != EMBER_OK)
        return rc;
    l.lines = &line;
    l.nlines = 1;
    return ember_intern_location(txn, &l, loc);
}

/* Interns every stack of stack_text in one write transaction; stack_ids[i]
** gets the id of stack_text[i]. Interning is idempotent: running this
** program twice gives the same ids. */
static int intern_stacks(ember_db *db, uint32_t stack_ids[NSTACKS])
{
    ember_txn *txn = NULL;
    int rc = ember_txn_begin(db, &txn);

    for (size_t i = 0; rc == EMBER_OK && i < NSTACKS; i++) {
        uint32_t locs[4];
        size_t depth = 0;
        while (depth < 4 && stack_text[i][depth] != NULL)
            depth++;
        /* Ember stores stacks leaf first, as pprof does. */
        for (size_t k = 0; rc == EMBER_OK && k < depth; k++)
            rc = intern_frame(txn, stack_text[i][depth - 1 - k], &locs[k]);
        if (rc == EMBER_OK)
            rc = ember_intern_stack(txn, locs, depth, &stack_ids[i]);
    }
    if (rc != EMBER_OK) {
        ember_txn_abort(txn);       /* the ids it made vanish */
        return rc;
    }
    return ember_txn_commit(txn);   /* frees txn, success or not */
}

/* Appends six profiles, 10 s apart, for each of two hosts of service "api",
** in one atomic batch. From the fourth profile on, host "a" spends twice as
** much in parse_json: something for the totals to show. */
static int append_profiles(ember_db *db, const uint32_t stack_ids[NSTACKS])
{
    static const char *const hosts[2] = { "a", "b" };
    ember_label labels[2][2];
    ember_sample samples[12][NSTACKS];
    ember_profile ps[12];
    size_t n = 0;

    for (int h = 0; h < 2; h++) {
        labels[h][0] = (ember_label){ "service", "api" };
        labels[h][1] = (ember_label){ "host", hosts[h] };
        for (int step = 0; step < 6; step++, n++) {
            int64_t json = (h == 0 && step >= 3) ? 80 : 40;
            const int64_t values[NSTACKS] = { json, 15 + step, 25, 5 };
            for (size_t s = 0; s < NSTACKS; s++)
                samples[n][s] = (ember_sample){ stack_ids[s], values[s] };
            memset(&ps[n], 0, sizeof ps[n]);
            ps[n].sz = sizeof ps[n];
            ps[n].type = TYPE;
            ps[n].labels = labels[h];
            ps[n].nlabels = 2;
            ps[n].time_ms = T0 + step * 10000;
            ps[n].duration_ns = 10000000000LL;      /* 10 s */
            ps[n].period = 10000000;                /* 100 Hz: 10 ms */
            ps[n].samples = samples[n];
            ps[n].nsamples = NSTACKS;
        }
    }
    /* All twelve profiles or none. ember_append() stores one. */
    return ember_append_batch(db, ps, n);
}

/* ---- reading ------------------------------------------------------------ */

/* Writes stack ID as "root;...;leaf", resolving names through SNAP. */
static int print_stack(ember_snapshot *snap, uint32_t id)
{
    const uint32_t *locs;
    size_t depth;
    int rc = ember_snapshot_stack(snap, id, &locs, &depth);

    for (size_t k = depth; rc == EMBER_OK && k-- > 0;) {     /* root first */
        ember_location loc;
        rc = ember_snapshot_location(snap, locs[k], &loc);
        /* A location holds inlined frames innermost first: print the
        ** outermost first, as we print callers before callees. */
        for (size_t j = loc.nlines; rc == EMBER_OK && j-- > 0;) {
            ember_function fn;
            rc = ember_snapshot_function(snap, loc.lines[j].function, &fn);
            if (rc == EMBER_OK)
                printf("%s%s", fn.name, k == 0 && j == 0 ? "" : ";");
        }
    }
    return rc;
}

/* Orders indexes into a merged profile by value, largest first. */
static const int64_t *sort_values;

static int by_value_desc(const void *a, const void *b)
{
    int64_t x = sort_values[*(const size_t *)a];
    int64_t y = sort_values[*(const size_t *)b];
    return (x < y) - (x > y);
}

/* Merges every profile of service "api" over the whole minute and prints
** its stacks, heaviest first. */
static int print_top(ember_db *db)
{
    ember_matcher m = { "service", "api", EMBER_MATCH_EQ };
    ember_selector sel = { .sz = sizeof sel, .type = TYPE, .matchers = &m,
                           .nmatchers = 1, .from_ms = T0,
                           .to_ms = T0 + 59999 };
    ember_merged *merged = NULL;
    ember_snapshot *snap = NULL;
    const uint32_t *stacks;
    const int64_t *values;
    uint64_t nseries, nprofiles;
    size_t n, *order = NULL;
    int rc = ember_merge(db, &sel, &merged);

    if (rc != EMBER_OK)
        return rc;
    n = ember_merged_samples(merged, &stacks, &values);
    ember_merged_info(merged, &nseries, &nprofiles);
    printf("merged %llu profiles of %llu series: %zu stacks\n",
           (unsigned long long)nprofiles, (unsigned long long)nseries, n);
    order = malloc((n + 1) * sizeof *order);
    if (order == NULL) {
        ember_merged_free(merged);
        fprintf(stderr, "embed: out of memory\n");
        return EMBER_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    sort_values = values;
    qsort(order, n, sizeof *order, by_value_desc);
    /* Ids are resolved through a snapshot: one consistent view of the
    ** symbol tables whose pointers live until ember_snapshot_end. */
    rc = ember_snapshot_begin(db, &snap);
    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        printf("  %6lld  ", (long long)values[order[i]]);
        rc = print_stack(snap, stacks[order[i]]);
        printf("\n");
    }
    ember_snapshot_end(snap);
    ember_merged_free(merged);
    free(order);
    return rc;
}

/* Prints series ID's labels as {name="value", ...}. */
static int print_series(ember_db *db, uint32_t id)
{
    ember_strlist *l = NULL;
    int rc = ember_series_labels(db, id, &l);  /* type, then name, value */

    if (rc != EMBER_OK)
        return rc;
    printf("%s{", ember_strlist_get(l, 0));
    for (size_t i = 1; i + 1 < ember_strlist_count(l); i += 2)
        printf("%s%s=\"%s\"", i > 1 ? ", " : "", ember_strlist_get(l, i),
               ember_strlist_get(l, i + 1));
    printf("}\n");
    ember_strlist_free(l);
    return EMBER_OK;
}

/* Prints, for every series of the type, each profile's total over time. */
static int print_totals(ember_db *db)
{
    ember_selector sel = { .sz = sizeof sel, .type = TYPE };  /* all time */
    ember_totals *t = NULL;
    int rc = ember_totals_get(db, &sel, &t);

    for (size_t i = 0; rc == EMBER_OK && i < ember_totals_count(t); i++) {
        const int64_t *times, *values;
        uint32_t series;
        size_t n;
        ember_totals_series(t, i, &series, &times, &values, &n);
        rc = print_series(db, series);
        for (size_t k = 0; rc == EMBER_OK && k < n; k++)
            printf("  t=+%3llds  total %lld\n",
                   (long long)((times[k] - T0) / 1000), (long long)values[k]);
    }
    ember_totals_free(t);
    return rc;
}

int main(int argc, char **argv)
{
    ember_open_opts opts = { .sz = sizeof opts };   /* all defaults */
    ember_db *db = NULL;
    uint32_t stack_ids[NSTACKS];
    int status;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DATABASE-DIRECTORY\n", argv[0]);
        return 2;
    }
    /* ember_open sets db even when it fails, so that ember_errmsg can say
    ** why; close it in every case. */
    status = failed(ember_open(argv[1], &opts, &db), "open");
    if (status == 0)
        status = failed(intern_stacks(db, stack_ids), "interning stacks");
    if (status == 0)
        status = failed(append_profiles(db, stack_ids), "appending");
    if (status == 0)
        status = failed(print_top(db), "merge");
    if (status == 0)
        status = failed(print_totals(db), "totals");
    ember_close(db);
    return status;
}
