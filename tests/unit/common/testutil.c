/*
** tests/unit/common/testutil.c: see testutil.h.
*/
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/common/testutil.h"

char *tu_tmpdir(const char *tag)
{
    char tmpl[256];
    char *d;

    snprintf(tmpl, sizeof tmpl, "/tmp/ember-test-%s-XXXXXX", tag);
    d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

void tu_rmdir(char *dir)
{
    char cmd[512];

    if (dir == NULL)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
}

ember_db *tu_open(const char *dir, int small)
{
    ember_open_opts o = { .sz = sizeof o, .sync = EMBER_SYNC_NONE };
    ember_db *db = NULL;
    int rc;

    if (small)
        o.map_size = 1u << 20;
    rc = ember_open(dir, &o, &db);
    if (rc != EMBER_OK)
        fprintf(stderr, "open %s: %s\n", dir, ember_errmsg(db));
    assert_int_equal(rc, EMBER_OK);
    return db;
}

int tu_txn_stack(ember_txn *t, const char *const *names, size_t n,
                 uint32_t *id)
{
    uint32_t locs[64];
    int rc = n <= 64 ? EMBER_OK : EMBER_EINVAL;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
        ember_function f = { .name = names[i], .file = "x.c" };
        ember_line line = { 0, (int64_t)i + 1 };
        ember_location l = { 0, 0x1000 + i, &line, 1 };
        rc = ember_intern_function(t, &f, &line.function);
        if (rc == EMBER_OK)
            rc = ember_intern_location(t, &l, &locs[i]);
    }
    return rc == EMBER_OK ? ember_intern_stack(t, locs, n, id) : rc;
}

uint32_t tu_stack(ember_db *db, const char *const *names, size_t n)
{
    ember_txn *t;
    uint32_t id = 0;

    assert_int_equal(ember_txn_begin(db, &t), EMBER_OK);
    assert_int_equal(tu_txn_stack(t, names, n, &id), EMBER_OK);
    assert_int_equal(ember_txn_commit(t), EMBER_OK);
    return id;
}

int tu_txn_synthetic_stack(ember_txn *t, uint32_t k, uint32_t *id)
{
    char buf[16][32];
    const char *names[16];
    size_t depth = 3 + k % 8;
    uint32_t x = k * 2654435761u;

    for (size_t i = 0; i < depth; i++) {
        snprintf(buf[i], sizeof buf[i], "fn_%u", (x >> (i * 3)) % 50);
        names[i] = buf[i];
    }
    snprintf(buf[0], sizeof buf[0], "leaf_%u", k);
    return tu_txn_stack(t, names, depth, id);
}

uint32_t tu_synthetic_stack(ember_db *db, uint32_t k)
{
    ember_txn *t;
    uint32_t id = 0;

    assert_int_equal(ember_txn_begin(db, &t), EMBER_OK);
    assert_int_equal(tu_txn_synthetic_stack(t, k, &id), EMBER_OK);
    assert_int_equal(ember_txn_commit(t), EMBER_OK);
    return id;
}

ember_profile tu_profile(const char *type, const ember_label *labels,
                         size_t nlabels, int64_t time_ms,
                         const ember_sample *samples, size_t n)
{
    ember_profile p;

    memset(&p, 0, sizeof p);
    p.sz = sizeof p;
    p.type = type;
    p.labels = labels;
    p.nlabels = nlabels;
    p.time_ms = time_ms;
    p.duration_ns = 10000000000LL;
    p.period = 10000000;
    p.samples = samples;
    p.nsamples = n;
    return p;
}

static void print_problem(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "verify: %s\n", msg);
}

uint64_t tu_verify(ember_db *db)
{
    uint64_t n = 0;
    int rc = ember_verify(db, print_problem, NULL, &n);

    if (rc != EMBER_OK && rc != EMBER_ECORRUPT)
        fprintf(stderr, "verify failed: %s\n", ember_errmsg(db));
    assert_true(rc == EMBER_OK || rc == EMBER_ECORRUPT);
    return n;
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        *len = fread(buf, 1, (size_t)n, f);
        buf[*len] = '\0';
    }
    fclose(f);
    return buf;
}

void tu_pset_dump_profiles(FILE *f, const em_pset *s)
{
    for (size_t i = 0; i < s->nprofiles; i++) {
        const em_pset_profile *p = &s->profiles[i];
        fprintf(f, "P%zu %s {", i, p->type);
        for (size_t k = 0; k < p->nlabels; k++)
            fprintf(f, "%s%s=%s", k > 0 ? "," : "", p->labels[k].name,
                    p->labels[k].value);
        fprintf(f, "} t=%lld d=%lld p=%lld\n", (long long)p->time_ms,
                (long long)p->duration_ns, (long long)p->period);
    }
}

void tu_out_open(tu_out *o)
{
    o->text = NULL;
    o->len = 0;
    o->f = open_memstream(&o->text, &o->len);
    assert_non_null(o->f);
}

void tu_out_close(tu_out *o)
{
    assert_int_equal(fclose(o->f), 0);
}

void tu_query_fail_each(ember_db *db, const char *text,
                        const ember_query_opts *o)
{
    int rc = EMBER_ENOMEM;
    uint64_t i;

    for (i = 1; rc != EMBER_OK && i < 100000; i++) {
        ember_result *r = NULL;
        em_alloc_fail_at(i);
        rc = ember_query(db, text, o, &r);
        em_alloc_fail_at(0);
        if (rc != EMBER_OK) {
            assert_null(r);
            if (rc != EMBER_ENOMEM)
                fail_msg("%s: allocation %llu: %d %s", text,
                         (unsigned long long)i, rc, ember_errmsg(db));
        }
        ember_result_free(r);
    }
    assert_int_equal(rc, EMBER_OK);
    assert_true(i > 10);
}
