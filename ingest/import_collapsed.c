/*
** ingest/import_collapsed.c: imports a buffer of collapsed stacks as one
** profile. Two phases: parse and fold the whole buffer in memory (nothing
** touches the database, so a bad file costs no lock and writes nothing),
** then one write transaction that interns each distinct frame once
** (function -> location), each distinct stack once (leaf first) and appends
** the profile. Any failure aborts the transaction: all or nothing per file.
**
** Frames are symbols without addresses: a frame becomes a function named by
** the frame text and a location on the unknown mapping (0) at address 0 with
** one line (that function, line 0). Because distinct names give distinct
** functions and so distinct locations, distinct folded stacks give distinct
** stack ids: the samples appended never repeat a stack.
*/
#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

/* Scratch of the write phase, sized once from the fold's maxima. */
typedef struct writer {
    ember_txn *txn;
    uint32_t *locs;             /* location id of each distinct frame */
    uint32_t *stack;            /* one stack's location ids, leaf first */
    char *name;                 /* one frame name, NUL-terminated */
    ember_sample *samples;      /* one per distinct stack */
} writer;

/* Allocates W's scratch for fold F. */
static int writer_alloc(writer *w, const em_fold *f)
{
    w->locs = em_malloc(f->nframes * sizeof *w->locs);
    w->stack = em_malloc(f->max_depth * sizeof *w->stack);
    w->name = em_malloc(f->max_name + 1);
    w->samples = em_malloc(f->nstacks * sizeof *w->samples);
    if (w->locs == NULL || w->stack == NULL || w->name == NULL ||
        w->samples == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for %zu frames and %zu "
                      "stacks", f->nframes, f->nstacks);
    return EMBER_OK;
}

/* Interns frame FR as function -> location; *LOC gets the location id. */
static int intern_frame(writer *w, const em_fold_frame *fr, uint32_t *loc)
{
    ember_function fn = { 0 };
    ember_line line = { 0 };
    ember_location l = { 0 };
    int rc;

    memcpy(w->name, fr->p, fr->len);
    w->name[fr->len] = '\0';
    fn.name = w->name;
    rc = ember_intern_function(w->txn, &fn, &line.function);
    if (rc != EMBER_OK)
        return rc;
    l.lines = &line;            /* mapping 0 and address 0: unknown */
    l.nlines = 1;
    return ember_intern_location(w->txn, &l, loc);
}

/* Interns every distinct stack of F, reversed to leaf first, into the
** samples array with its summed value. */
static int intern_stacks(writer *w, const em_fold *f)
{
    for (size_t i = 0; i < f->nstacks; i++) {
        const em_fold_stack *s = &f->stacks[i];
        const uint32_t *run = f->pool + s->off;   /* root first */
        int rc;

        for (size_t k = 0; k < s->n; k++)
            w->stack[k] = w->locs[run[s->n - 1 - k]];
        rc = ember_intern_stack(w->txn, w->stack, s->n, &w->samples[i].stack);
        if (rc != EMBER_OK)
            return rc;
        w->samples[i].value = s->value;
    }
    return EMBER_OK;
}

/* Writes fold F as one profile in one transaction, or nothing. */
static int import_write(ember_db *db, const em_fold *f, const em_import_opts *o)
{
    writer w = { 0 };
    ember_profile p = { .sz = sizeof p, .type = o->type, .labels = o->labels,
                        .nlabels = o->nlabels, .time_ms = o->time_ms,
                        .duration_ns = o->duration_ns, .period = o->period,
                        .nsamples = f->nstacks };
    int rc = writer_alloc(&w, f);

    if (rc == EMBER_OK)
        rc = ember_txn_begin(db, &w.txn);
    for (size_t i = 0; rc == EMBER_OK && i < f->nframes; i++)
        rc = intern_frame(&w, &f->frames[i], &w.locs[i]);
    if (rc == EMBER_OK)
        rc = intern_stacks(&w, f);
    p.samples = w.samples;
    if (rc == EMBER_OK)
        rc = ember_txn_append(w.txn, &p);
    if (rc == EMBER_OK) {
        rc = ember_txn_commit(w.txn);
        w.txn = NULL;               /* commit frees the txn, success or not */
    }
    ember_txn_abort(w.txn);
    em_free(w.locs);
    em_free(w.stack);
    em_free(w.name);
    em_free(w.samples);
    return rc == EMBER_OK ? rc : em_err_prefix(rc, "%s", o->origin);
}

int em_import_collapsed(ember_db *db, const char *buf, size_t len,
                        const em_import_opts *opts, em_import_stats *out)
{
    em_import_opts o;
    em_fold f = { 0 };
    int rc;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL)
        return em_err(EMBER_EINVAL, "import: no database");
    rc = em_import_opts_norm(opts, &o);
    if (o.type == NULL)
        o.type = EM_COLLAPSED_DEFAULT_TYPE;
    if (rc == EMBER_OK)
        rc = em_collapsed_parse(buf, len, o.origin, em_fold_add, &f);
    if (rc == EMBER_OK && f.nstacks > 0)
        rc = import_write(db, &f, &o);
    if (rc == EMBER_OK && out != NULL) {
        out->lines = f.lines;
        out->stacks = f.nstacks;
        out->functions = f.nframes;
        out->total = f.total;
    }
    em_fold_free(&f);
    return rc;
}
