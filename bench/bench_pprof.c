/*
** bench/bench_pprof.c: pprof import throughput in one process, without the
** CLI around it: what `ember import` does per file (em_decode: gunzip,
** protobuf unpack, build the profile set) and per batch (em_pset_write of
** up to 4096 files in one transaction, one fsync), timed on files already
** in memory, so reading them is left out.
**
**   bench_pprof [--runs N] [--dir DBDIR] FILE|DIR...
**   bench_pprof --seal DBDIR       (ember_seal: every head chunk sealed now)
**
** Two phases, each run N times (default 5), the median reported:
**   decode   em_decode of every file, the set freed at once (no database);
**   import   decode and write in batches as repl/cmd_import.c does, into a
**            fresh database in DBDIR (EMBER_SYNC_FULL), close included.
** Prints "key value" lines on stdout (bench/pprof.sh reads them): files,
** gz_bytes, bytes (after gunzip), samples (Ember samples written: one per
** pprof sample and sample type), then seconds, MB/s and samples/s of each
** phase, and of the import's CPU time alone (import_cpu: without fsync
** waits and other processes' turns). One thread, so one core.
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ember.h"
#include "ingest/ingest.h"
#include "ingest/pset.h"
#include "bench/util.h"

#define BATCH_MAX_FILES 4096            /* as repl/cmd_import.c */
#define BATCH_MAX_BYTES (64ull << 20)
#define MAX_RUNS 99

typedef struct input {
    char *path;
    void *buf;
    size_t len;
} input;

typedef struct inputs {
    input *v;
    size_t n, cap;
    uint64_t gz_bytes;
} inputs;

static double now(void) { return bench_clock(CLOCK_MONOTONIC); }
/* CPU seconds of this process: what one core spent, whatever else runs on
** the machine and however long fsync waits. */
static double cpu_now(void) { return bench_clock(CLOCK_PROCESS_CPUTIME_ID); }

/* Reads PATH whole into the next slot of IN. */
static void input_read(inputs *in, const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    input *e;

    if (f == NULL || fstat(fileno(f), &st) != 0)
        die("%s: cannot read", path);
    if (in->n == in->cap) {
        in->cap = in->cap ? in->cap * 2 : 1024;
        in->v = realloc(in->v, in->cap * sizeof *in->v);
        if (in->v == NULL)
            die("out of memory");
    }
    e = &in->v[in->n++];
    e->path = strdup(path);
    e->len = (size_t)st.st_size;
    e->buf = xmalloc(e->len);
    if (e->path == NULL || fread(e->buf, 1, e->len, f) != e->len)
        die("%s: short read", path);
    in->gz_bytes += e->len;
    fclose(f);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads PATH, or every regular file under it in name order (as the CLI). */
static void input_walk(inputs *in, const char *path)
{
    struct stat st;
    struct dirent *de;
    char **names = NULL;
    size_t n = 0;
    DIR *d;

    if (stat(path, &st) != 0)
        die("%s: not found", path);
    if (!S_ISDIR(st.st_mode)) {
        input_read(in, path);
        return;
    }
    if ((d = opendir(path)) == NULL)
        die("%s: cannot open", path);
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof *names);
        if (names == NULL || asprintf(&names[n], "%s/%s", path, de->d_name) < 0)
            die("out of memory");
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        input_walk(in, names[i]);
        free(names[i]);
    }
    free(names);
}

static void decode_one(const input *e, em_pset *s)
{
    em_import_opts o = { .sz = sizeof o, .origin = e->path };

    memset(s, 0, sizeof *s);
    if (em_decode(e->buf, e->len, &o, s) != EMBER_OK)
        die("%s", ember_errmsg(NULL));
}

/* Phase decode: every file decoded and freed. Returns the seconds taken;
** *BYTES gets the input bytes after gunzip. */
static double run_decode(const inputs *in, uint64_t *bytes)
{
    double t0 = now();
    em_pset s;

    *bytes = 0;
    for (size_t i = 0; i < in->n; i++) {
        decode_one(&in->v[i], &s);
        *bytes += s.bytes_in;
        em_pset_free(&s);
    }
    return now() - t0;
}

/* Writes SETS[0..N) in one transaction and frees them. */
static void write_batch(ember_db *db, em_pset *sets, size_t n,
                        uint64_t *samples)
{
    ember_txn *txn = NULL;

    if (ember_txn_begin(db, &txn) != EMBER_OK)
        die("begin: %s", ember_errmsg(db));
    for (size_t i = 0; i < n; i++) {
        em_pset_counts c;
        if (em_pset_write(txn, &sets[i], &c) != EMBER_OK)
            die("write: %s", ember_errmsg(db));
        *samples += c.samples;
        em_pset_free(&sets[i]);
    }
    if (ember_txn_commit(txn) != EMBER_OK)
        die("commit: %s", ember_errmsg(db));
}

/* Phase import: decode and write in batches into a fresh DIR. Returns the
** wall seconds; *CPU gets the CPU seconds. */
static double run_import(const inputs *in, const char *dir, uint64_t *samples,
                         double *cpu)
{
    em_pset *sets = xmalloc(BATCH_MAX_FILES * sizeof *sets);
    uint64_t batch_bytes = 0;
    size_t n = 0;
    ember_db *db = NULL;
    double t0, c0;

    rm_rf(dir);
    *samples = 0;
    t0 = now();
    c0 = cpu_now();
    if (ember_open(dir, NULL, &db) != EMBER_OK)
        die("%s: %s", dir, ember_errmsg(db));
    for (size_t i = 0; i < in->n; i++) {
        decode_one(&in->v[i], &sets[n]);
        em_pset_trim(&sets[n]);    /* as repl/cmd_import.c */
        batch_bytes += sets[n].bytes_in;
        if (++n == BATCH_MAX_FILES || batch_bytes >= BATCH_MAX_BYTES) {
            write_batch(db, sets, n, samples);
            n = 0;
            batch_bytes = 0;
        }
    }
    if (n > 0)
        write_batch(db, sets, n, samples);
    ember_close(db);
    t0 = now() - t0;
    *cpu = cpu_now() - c0;
    free(sets);
    return t0;
}

static void report(const char *phase, double secs, uint64_t bytes,
                   uint64_t samples)
{
    printf("%s_s %.6f\n", phase, secs);
    printf("%s_mb_per_s %.1f\n", phase, (double)bytes / 1e6 / secs);
    printf("%s_samples_per_s %.0f\n", phase, (double)samples / secs);
}

/* Seals DIR's head chunks, as a day-old database would have them: queries
** over the bench's data (600 profiles within two minutes, so inside one
** head window) are timed both ways. */
static int seal(const char *dir)
{
    ember_db *db = NULL;
    int rc = ember_open(dir, NULL, &db);

    if (rc == EMBER_OK)
        rc = ember_seal(db);
    if (rc != EMBER_OK)
        die("%s: seal: %s", dir, ember_errmsg(db));
    ember_close(db);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "bench-pprof.db";
    double tdec[MAX_RUNS], timp[MAX_RUNS], cimp[MAX_RUNS];
    uint64_t bytes = 0, samples = 0;
    inputs in = { 0 };
    int runs = 5, i = 1;

    bench_name = "bench_pprof";

    if (argc == 3 && strcmp(argv[1], "--seal") == 0)
        return seal(argv[2]);
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else
            die("usage: bench_pprof [--runs N] [--dir DBDIR] FILE|DIR...");
    }
    if (i == argc || runs < 1 || runs > MAX_RUNS)
        die("usage: bench_pprof [--runs N (1-%d)] [--dir DBDIR] FILE|DIR...",
            MAX_RUNS);
    for (; i < argc; i++)
        input_walk(&in, argv[i]);
    for (int r = 0; r < runs; r++) {
        tdec[r] = run_decode(&in, &bytes);
        timp[r] = run_import(&in, dir, &samples, &cimp[r]);
    }
    printf("files %zu\ngz_bytes %llu\nbytes %llu\nsamples %llu\n", in.n,
           (unsigned long long)in.gz_bytes, (unsigned long long)bytes,
           (unsigned long long)samples);
    report("decode", median(tdec, runs), bytes, samples);
    report("import", median(timp, runs), bytes, samples);
    report("import_cpu", median(cimp, runs), bytes, samples);
    rm_rf(dir);
    for (size_t k = 0; k < in.n; k++) {
        free(in.v[k].path);
        free(in.v[k].buf);
    }
    free(in.v);
    return 0;
}
