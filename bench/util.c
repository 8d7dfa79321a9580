/*
** bench/util.c: the benchmark programs' shared helpers (bench/util.h).
*/
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ember.h"
#include "bench/util.h"

const char *bench_name = "bench";

double bench_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void vnote(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", bench_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
    exit(1);
}

void ember_check(int rc, const char *what)
{
    if (rc != EMBER_OK)
        die("%s: %s (%s)", what, ember_strerror(rc), ember_errmsg(NULL));
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die("out of memory (%zu bytes)", n);
    return p;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

void rm_rf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *human(double v, char *buf, size_t cap)
{
    if (v >= 1e9)
        snprintf(buf, cap, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, cap, "%.1fk", v / 1e3);
    else
        snprintf(buf, cap, "%.3g", v);
    return buf;
}

int bench_try_open(const char *path, ember_db **db)
{
    ember_open_opts oo;

    memset(&oo, 0, sizeof oo);
    oo.sz = sizeof oo;
    oo.flags = EMBER_OPEN_RDONLY | EMBER_OPEN_NOCREATE;
    *db = NULL;
    return ember_open(path, &oo, db);
}

ember_db *bench_open(const char *path)
{
    ember_db *db;

    if (bench_try_open(path, &db) != EMBER_OK)
        die("ember_open %s: %s", path, ember_errmsg(db));
    return db;
}
