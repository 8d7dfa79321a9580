/*
** bench/bench_serve.c: the in-process side of bench/serve.sh, the same
** work the server does per request, called directly, so that the HTTP
** figures have their baseline on the same data and machine:
**
**   bench_serve import DBDIR SECONDS FILE...
**       ember_import of each file in turn (one transaction and one fsync
**       each, as POST /api/v1/import does) into DBDIR for SECONDS; prints
**       "requests N", "bytes N" (as sent: gzipped), "seconds S".
**   bench_serve latency DBDIR N values NAME
**   bench_serve latency DBDIR N query FORMAT TEXT
**       N calls of ember_label_values(NAME), or of ember_query(TEXT) then
**       ember_result_render(FORMAT), as the server's handlers make them;
**       prints "p50_us" and "p99_us".
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ember.h"
#include "bench/util.h"

#define MAX_N 100000

typedef struct file {
    void *buf;
    size_t len;
} file;

static file file_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    file out = { 0 };

    if (f == NULL || fstat(fileno(f), &st) != 0)
        die("%s: cannot read", path);
    out.len = (size_t)st.st_size;
    out.buf = xmalloc(out.len + 1);
    if (fread(out.buf, 1, out.len, f) != out.len)
        die("%s: short read", path);
    fclose(f);
    return out;
}

static int run_import(const char *dir, double secs, char **paths, int n)
{
    file *files = xmalloc((size_t)n * sizeof *files);
    ember_db *db = NULL;
    ember_import_opts o = { .sz = sizeof o };
    ember_label l = { "service", "bench" };
    unsigned long long reqs = 0, bytes = 0;
    double t0, t;

    for (int i = 0; i < n; i++)
        files[i] = file_read(paths[i]);
    o.labels = &l;
    o.nlabels = 1;
    ember_check(ember_open(dir, NULL, &db), dir);
    t0 = bench_clock(CLOCK_MONOTONIC);
    do {
        const file *f = &files[reqs % (unsigned long long)n];
        ember_check(ember_import(db, f->buf, f->len, &o, NULL), "import");
        reqs++;
        bytes += f->len;
        t = bench_clock(CLOCK_MONOTONIC) - t0;
    } while (t < secs);
    ember_close(db);
    printf("requests %llu\nbytes %llu\nseconds %.3f\n", reqs, bytes, t);
    for (int i = 0; i < n; i++)
        free(files[i].buf);
    free(files);
    return 0;
}

/* One call of what the server's handler does for the request. */
static void one_call(ember_db *db, char **argv)
{
    if (strcmp(argv[0], "values") == 0) {
        ember_strlist *l = NULL;
        ember_check(ember_label_values(db, argv[1], NULL, &l), "values");
        ember_strlist_free(l);
    } else {
        ember_render_opts ro = { .sz = sizeof ro };
        ember_result *r = NULL;
        char *out = NULL;
        size_t len;
        ember_check(ember_query(db, argv[2], NULL, &r), "query");
        ember_check(ember_result_render(db, r, argv[1], &ro, &out, &len),
                    "render");
        ember_free(out);
        ember_result_free(r);
    }
}

static int run_latency(const char *dir, int n, char **argv)
{
    ember_open_opts oo = { .sz = sizeof oo, .flags = EMBER_OPEN_RDONLY };
    double *us = xmalloc((size_t)n * sizeof *us);
    ember_db *db = NULL;

    ember_check(ember_open(dir, &oo, &db), dir);
    one_call(db, argv);             /* warm, as the server is */
    for (int i = 0; i < n; i++) {
        double t0 = bench_clock(CLOCK_MONOTONIC);
        one_call(db, argv);
        us[i] = (bench_clock(CLOCK_MONOTONIC) - t0) * 1e6;
    }
    ember_close(db);
    median(us, n);                  /* sorts */
    printf("p50_us %.1f\np99_us %.1f\n", us[n / 2], us[n * 99 / 100]);
    free(us);
    return 0;
}

int main(int argc, char **argv)
{
    bench_name = "bench_serve";
    if (argc >= 6 && strcmp(argv[1], "import") == 0)
        return run_import(argv[2], atof(argv[3]), argv + 4, argc - 4);
    if (argc >= 6 && strcmp(argv[1], "latency") == 0) {
        int n = atoi(argv[3]);
        if (n < 1 || n > MAX_N)
            die("N: 1 to %d", MAX_N);
        if ((strcmp(argv[4], "values") == 0 && argc == 6) ||
            (strcmp(argv[4], "query") == 0 && argc == 7))
            return run_latency(argv[2], n, argv + 4);
    }
    fprintf(stderr, "usage: bench_serve import DBDIR SECONDS FILE...\n"
            "       bench_serve latency DBDIR N values NAME\n"
            "       bench_serve latency DBDIR N query FORMAT TEXT\n");
    return 2;
}
