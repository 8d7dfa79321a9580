/*
** bench/util.h: what every benchmark program needs besides the generator:
** clocks, messages that end the run, checked allocation, removing a
** database directory, medians and short numbers. bench_name prefixes the
** messages; each program sets it first thing in main.
*/
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <time.h>

#include "ember.h"

extern const char *bench_name;

/* Seconds on clock ID (CLOCK_MONOTONIC, a CPU-time clock, ...). */
double bench_clock(clockid_t id);
/* A line "NAME: message" on stderr. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, then exit(1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Dies with WHAT and Ember's message unless RC is EMBER_OK. */
void ember_check(int rc, const char *what);
void *xmalloc(size_t n);
/* Opens the existing database at PATH read-only into *DB (which holds the
** handle for ember_errmsg even on failure); Ember's code. */
int bench_try_open(const char *path, ember_db **db);
/* The same, dying with Ember's message when it does not open. */
ember_db *bench_open(const char *path);
/* Removes PATH and everything under it; a missing PATH is fine. */
void rm_rf(const char *path);
/* Sorts V[0..N) and returns its median. */
double median(double *v, int n);
/* "1.23M", "45.6k", "789": V in at most four significant figures. */
const char *human(double v, char *buf, size_t cap);

#endif /* BENCH_UTIL_H */
