/*
** query/result_wire.c: a whole ember_result as bytes and back, so that a
** query run by `ember serve` (format=result, docs/protocol.md) arrives at
** a client as the very result ember_query gives, and renders there with
** the same renderers, byte for byte. Version 1 of the encoding:
**
**   "EMRW" 0x01                   magic and version
**   kind  flags                   EMBER_RESULT_*; bit 0: ids_only, bit 1:
**                                 a view follows the head
**   ostr type, ostr unit, ostr column
**   top_limit  from_ms* to_ms* step_ms*
**   [view  str regex]             EM_VIEW_* (peek(P, "re")) and its regex
**   nnotes  str...
**   ngroups group...              profiles and diffs only
**   nseries series...             series only
**   nrows  str...                 tables only
**
**   group:  labels  nseries nprofiles  str sample_type  str unit
**           pflags (bit 0 diff, bit 1 has_whole, bit 2 sites)  whole*
**           nnames str...
**           [granularity  nsrcs str...  site per name]      with bit 2
**           nframes (fn flags)...
**           nstacks (first nframes value* [base* when diff])...
**           pprof: 0, or 1 + length then the gzipped profile.proto
**   series: labels  n  time*... (each a delta from the one before)
**           n doubles, 8 bytes little-endian each
**   labels: n (str name, str value)...
**   site:   fn file obj (each 0 for none, else 1 + its srcs index)
**           flags  line*  start*  address
**
** Every integer is a LEB128 varint, those marked * zig-zag signed; a str
** is its length and its bytes (no NUL among them); an ostr is 0 for NULL
** or 1 + the length, then the bytes. The pprof lets `-o pprof` work on a
** decoded result, which has no database to read symbols from.
**
** Flags a reader does not know make it refuse the result, so a part added
** later (the view) is a flag, and results without it read as before.
**
** The decoder treats its input as hostile: every count is checked against
** the bytes left before it sizes an allocation (each element takes at least
** one byte), every index against what it indexes, and the input must end
** exactly where the result does. Any failure is EMBER_EINVAL naming the
** offset, never a crash (fuzz/fuzz_result_wire.c).
*/
#include <string.h>

#include "query/query_int.h"

#define WIRE_MAGIC "EMRW"
#define WIRE_VERSION 1
#define WIRE_IDS_ONLY 1u
#define WIRE_VIEW 2u
#define WIRE_DIFF 1u
#define WIRE_HAS_WHOLE 2u
#define WIRE_SITES 4u

/* ---- encoding ------------------------------------------------------------------------ */

typedef struct wenc {
    em_buf b;
    int rc;                     /* the first failure; later puts do nothing */
} wenc;

static void put_u(wenc *w, uint64_t v)
{
    if (w->rc == EMBER_OK)
        w->rc = em_buf_varint(&w->b, v);
}

static void put_i(wenc *w, int64_t v)
{
    put_u(w, em_zigzag(v));
}

static void put_bytes(wenc *w, const void *p, size_t n)
{
    if (w->rc == EMBER_OK)
        w->rc = em_buf_put(&w->b, p, n);
}

static void put_str(wenc *w, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    put_u(w, n);
    put_bytes(w, s, n);
}

static void put_ostr(wenc *w, const char *s)
{
    if (s == NULL) {
        put_u(w, 0);
        return;
    }
    put_u(w, strlen(s) + 1);
    put_bytes(w, s, strlen(s));
}

static void put_labels(wenc *w, const ember_label *l, size_t n)
{
    put_u(w, n);
    for (size_t i = 0; i < n; i++) {
        put_str(w, l[i].name);
        put_str(w, l[i].value);
    }
}

static void put_src(wenc *w, uint32_t id)
{
    put_u(w, id == EM_RSITE_NONE ? 0 : (uint64_t)id + 1);
}

static void put_sites(wenc *w, const em_rprofile *p)
{
    put_u(w, (uint64_t)p->granularity);
    put_u(w, p->srcs.count);
    for (uint32_t i = 0; i < p->srcs.count; i++)
        put_str(w, em_strtab_get(&p->srcs, i));
    for (uint32_t i = 0; i < p->names.count; i++) {
        const em_rsite *s = &p->sites[i];
        put_src(w, s->fn);
        put_src(w, s->file);
        put_src(w, s->obj);
        put_u(w, s->flags);
        put_i(w, s->line);
        put_i(w, s->start);
        put_u(w, s->address);
    }
}

static void put_prof(wenc *w, const em_rprofile *p)
{
    put_str(w, p->sample_type);
    put_str(w, p->unit);
    put_u(w, (p->diff ? WIRE_DIFF : 0) | (p->has_whole ? WIRE_HAS_WHOLE : 0) |
             (p->sites != NULL ? WIRE_SITES : 0));
    put_i(w, p->whole);
    put_u(w, p->names.count);
    for (uint32_t i = 0; i < p->names.count; i++)
        put_str(w, em_strtab_get(&p->names, i));
    if (p->sites != NULL)
        put_sites(w, p);
    put_u(w, p->nframes);
    for (size_t i = 0; i < p->nframes; i++) {
        put_u(w, p->frames[i].fn);
        put_u(w, p->frames[i].flags);
    }
    put_u(w, p->nstacks);
    for (size_t i = 0; i < p->nstacks; i++) {
        put_u(w, p->stacks[i].first);
        put_u(w, p->stacks[i].nframes);
        put_i(w, p->stacks[i].value);
        if (p->diff)
            put_i(w, p->stacks[i].base);
    }
}

/* A lone group's pprof: the one the query kept, else encoded now through
** the handle it ran on (committed symbols never change). A result whose
** group kept no stack ids, or whose type pprof cannot name (a type that
** matched nothing), goes without, and `-o pprof` refuses it on the client
** as locally; the other formats do not need it. */
static void put_pprof(wenc *w, const ember_result *r, const em_pgroup *g)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = EMBER_OK;

    if (w->rc == EMBER_OK && g->pprof == NULL && r->ngroups == 1 &&
        g->merged != NULL && r->type != NULL && r->db != NULL)
        rc = ember_pprof_encode(r->db, g->merged, r->type, EMBER_PPROF_GZIP,
                                &buf, &len);
    if (rc == EMBER_ENOMEM || rc == EMBER_EIO || rc == EMBER_ECORRUPT)
        w->rc = rc;             /* EINVAL: a type pprof cannot name */
    if (g->pprof != NULL) {
        put_u(w, g->pprof_len + 1);
        put_bytes(w, g->pprof, g->pprof_len);
    } else if (buf != NULL) {
        put_u(w, len + 1);
        put_bytes(w, buf, len);
    } else {
        put_u(w, 0);
    }
    ember_free(buf);
}

static void put_double(wenc *w, double d)
{
    uint64_t u;
    uint8_t b[8];

    memcpy(&u, &d, sizeof u);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    put_bytes(w, b, sizeof b);
}

static void put_series(wenc *w, const em_series *s)
{
    int64_t prev = 0;

    put_labels(w, s->labels, s->nlabels);
    put_u(w, s->n);
    for (size_t i = 0; i < s->n; i++) {
        put_i(w, (int64_t)((uint64_t)s->times[i] - (uint64_t)prev));
        prev = s->times[i];
    }
    for (size_t i = 0; i < s->n; i++)
        put_double(w, s->values[i]);
}

static void put_result(wenc *w, const ember_result *r)
{
    put_bytes(w, WIRE_MAGIC, 4);
    put_u(w, WIRE_VERSION);
    put_u(w, (uint64_t)r->kind);
    put_u(w, (r->ids_only ? WIRE_IDS_ONLY : 0) |
             (r->view != EM_VIEW_NONE ? WIRE_VIEW : 0));
    put_ostr(w, r->type);
    put_ostr(w, r->unit);
    put_ostr(w, r->column);
    put_u(w, r->top_limit);
    put_i(w, r->from_ms);
    put_i(w, r->to_ms);
    put_i(w, r->step_ms);
    if (r->view != EM_VIEW_NONE) {
        put_u(w, (uint64_t)r->view);
        put_str(w, r->view_re);
    }
    put_u(w, r->nnotes);
    for (size_t i = 0; i < r->nnotes; i++)
        put_str(w, r->notes[i]);
    put_u(w, r->ngroups);
    for (size_t g = 0; g < r->ngroups; g++) {
        put_labels(w, r->groups[g].labels, r->groups[g].nlabels);
        put_u(w, r->groups[g].nseries);
        put_u(w, r->groups[g].nprofiles);
        put_prof(w, &r->groups[g].prof);
        put_pprof(w, r, &r->groups[g]);
    }
    put_u(w, r->nseries);
    for (size_t i = 0; i < r->nseries; i++)
        put_series(w, &r->series[i]);
    put_u(w, r->nrows);
    for (size_t i = 0; i < r->nrows; i++)
        put_str(w, r->rows[i]);
}

int em_result_encode(const ember_result *r, void **out, size_t *len)
{
    wenc w = { .rc = EMBER_OK };

    *out = NULL;
    *len = 0;
    if (r == NULL)
        return em_err(EMBER_EINVAL, "result encode: no result");
    put_result(&w, r);
    if (w.rc == EMBER_OK)       /* room for a NUL, as rendered text has */
        w.rc = em_buf_reserve(&w.b, 1);
    if (w.rc != EMBER_OK) {
        em_buf_free(&w.b);
        return w.rc == EMBER_ENOMEM
               ? em_err(EMBER_ENOMEM, "result encode: %zu bytes", w.b.len)
               : w.rc;
    }
    *out = w.b.p;
    *len = w.b.len;
    return EMBER_OK;
}

/* ---- decoding ------------------------------------------------------------------------ */

typedef struct wdec {
    const uint8_t *p, *start, *end;
    int rc;                     /* the first failure; later gets fail too */
} wdec;

static int bad(wdec *d, const char *what)
{
    if (d->rc == EMBER_OK)
        d->rc = em_err(EMBER_EINVAL, "result: %s at byte %zu", what,
                       (size_t)(d->p - d->start));
    return d->rc;
}

static uint64_t get_u(wdec *d)
{
    uint64_t v = 0;

    if (d->rc == EMBER_OK && em_varint_get(&d->p, d->end, &v) != 0)
        bad(d, "truncated or overlong varint");
    return d->rc == EMBER_OK ? v : 0;
}

static int64_t get_i(wdec *d)
{
    return em_unzigzag(get_u(d));
}

/* A count of elements of at least one byte each: no more than remain. */
static size_t get_count(wdec *d, const char *what)
{
    uint64_t n = get_u(d);

    if (d->rc == EMBER_OK && n > (uint64_t)(d->end - d->p)) {
        bad(d, what);
        return 0;
    }
    return (size_t)n;
}

/* N bytes as a new NUL-terminated string. */
static char *get_nstr(wdec *d, size_t n)
{
    char *s;

    if (d->rc != EMBER_OK)
        return NULL;
    if (n > (size_t)(d->end - d->p) || memchr(d->p, '\0', n) != NULL) {
        bad(d, "string runs past the end or holds a NUL");
        return NULL;
    }
    if ((s = em_strndup((const char *)d->p, n)) == NULL) {
        d->rc = em_err(EMBER_ENOMEM, "result: string of %zu bytes", n);
        return NULL;
    }
    d->p += n;
    return s;
}

static char *get_str(wdec *d)
{
    return get_nstr(d, get_count(d, "string length past the end"));
}

/* NULL (encoded as 0), or a string. */
static char *get_ostr(wdec *d)
{
    size_t n = get_count(d, "string length past the end");

    return n == 0 ? NULL : get_nstr(d, n - 1);
}

/* An array of N elements of SIZE bytes, zeroed; NULL with rc set. */
static void *get_array(wdec *d, size_t n, size_t size)
{
    void *p;

    if (d->rc != EMBER_OK)
        return NULL;
    if ((p = em_calloc(n + 1, size)) == NULL)
        d->rc = em_err(EMBER_ENOMEM, "result: %zu elements", n);
    return p;
}

static void get_labels(wdec *d, ember_label **out, size_t *nout)
{
    size_t n = get_count(d, "label count past the end");
    ember_label *l = get_array(d, n, sizeof *l);

    *out = l;
    *nout = 0;
    for (size_t i = 0; l != NULL && i < n && d->rc == EMBER_OK; i++) {
        l[i].name = get_str(d);
        l[i].value = get_str(d);
        *nout = i + 1;          /* em_labels_free frees what is set */
    }
}

static void get_names(wdec *d, em_rprofile *p)
{
    size_t n = get_count(d, "name count past the end");

    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        char *s = get_str(d);
        uint32_t id = 0;
        if (s != NULL)
            d->rc = em_strtab_intern(&p->names, s, strlen(s), &id);
        if (d->rc == EMBER_OK && id != i)
            bad(d, "a function name given twice");
        em_free(s);
    }
}

/* A site's string: 0 for none, else 1 + an index into P's srcs. */
static uint32_t get_src(wdec *d, const em_rprofile *p)
{
    uint64_t v = get_u(d);

    if (v > p->srcs.count)
        bad(d, "a site's string out of range");
    return v == 0 || d->rc != EMBER_OK ? EM_RSITE_NONE : (uint32_t)(v - 1);
}

static void get_sites(wdec *d, em_rprofile *p)
{
    uint64_t gran = get_u(d);
    size_t n = get_count(d, "site string count past the end");

    if (gran >= EM_GRAN_COUNT_ || gran == EM_GRAN_FUNCTIONS)
        bad(d, "an unknown granularity");
    p->granularity = (int)gran;
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        char *s = get_str(d);
        uint32_t id = 0;
        if (s != NULL)
            d->rc = em_strtab_intern(&p->srcs, s, strlen(s), &id);
        if (d->rc == EMBER_OK && id != i)
            bad(d, "a site string given twice");
        em_free(s);
    }
    p->sites = get_array(d, p->names.count, sizeof *p->sites);
    p->cap_sites = p->sites != NULL ? p->names.count : 0;
    for (uint32_t i = 0; i < p->names.count && d->rc == EMBER_OK; i++) {
        em_rsite *s = &p->sites[i];
        s->fn = get_src(d, p);
        s->file = get_src(d, p);
        s->obj = get_src(d, p);
        s->flags = (uint32_t)get_u(d);
        s->line = get_i(d);
        s->start = get_i(d);
        s->address = get_u(d);
        if (s->flags & ~EM_RSITE_NAMED)
            bad(d, "a site's flags out of range");
    }
}

static void get_frames(wdec *d, em_rprofile *p)
{
    size_t n = get_count(d, "frame count past the end");

    p->frames = get_array(d, n, sizeof *p->frames);
    p->cap_frames = p->frames != NULL ? n : 0;
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        uint64_t fn = get_u(d), flags = get_u(d);
        if (fn >= p->names.count || (flags & ~(uint64_t)EM_RFRAME_INLINED))
            bad(d, "a frame's function or flags out of range");
        p->frames[i] = (em_rframe){ .fn = (uint32_t)fn,
                                    .flags = (uint32_t)flags };
        p->nframes = i + 1;
    }
}

static void get_stacks(wdec *d, em_rprofile *p)
{
    size_t n = get_count(d, "stack count past the end");

    p->stacks = get_array(d, n, sizeof *p->stacks);
    p->cap_stacks = p->stacks != NULL ? n : 0;
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        em_rstack *s = &p->stacks[i];
        uint64_t first = get_u(d), nf = get_u(d);
        if (first > p->nframes || nf > p->nframes - first)
            bad(d, "a stack's frames out of range");
        s->first = (size_t)first;
        s->nframes = (size_t)nf;
        s->value = get_i(d);
        s->base = p->diff ? get_i(d) : 0;
        p->nstacks = i + 1;
    }
}

static void get_prof(wdec *d, em_rprofile *p, bool diff)
{
    uint64_t flags;

    memset(p, 0, sizeof *p);
    p->sample_type = get_str(d);
    p->unit = get_str(d);
    flags = get_u(d);
    if (flags & ~(uint64_t)(WIRE_DIFF | WIRE_HAS_WHOLE | WIRE_SITES) ||
        ((flags & WIRE_DIFF) != 0) != diff)
        bad(d, "profile flags do not fit the result's kind");
    p->diff = diff;
    p->has_whole = (flags & WIRE_HAS_WHOLE) != 0;
    p->whole = get_i(d);
    get_names(d, p);
    if ((flags & WIRE_SITES) != 0 && d->rc == EMBER_OK)
        get_sites(d, p);
    get_frames(d, p);
    get_stacks(d, p);
}

static void get_pprof(wdec *d, em_pgroup *g)
{
    size_t n = get_count(d, "pprof length past the end");

    if (n == 0 || d->rc != EMBER_OK)
        return;
    n--;
    if (n > (size_t)(d->end - d->p)) {
        bad(d, "pprof runs past the end");
        return;
    }
    if ((g->pprof = em_malloc(n + 1)) == NULL) {
        d->rc = em_err(EMBER_ENOMEM, "result: pprof of %zu bytes", n);
        return;
    }
    memcpy(g->pprof, d->p, n);
    g->pprof_len = n;
    d->p += n;
}

static void get_groups(wdec *d, ember_result *r)
{
    size_t n = get_count(d, "group count past the end");
    bool diff = r->kind == EMBER_RESULT_DIFF;

    if (n > 0 && r->kind != EMBER_RESULT_PROFILE && !diff)
        bad(d, "groups in a result that is not a profile");
    r->groups = get_array(d, n, sizeof *r->groups);
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        em_pgroup *g = &r->groups[i];
        r->ngroups = i + 1;     /* em_result_free frees what is set */
        get_labels(d, &g->labels, &g->nlabels);
        g->nseries = get_u(d);
        g->nprofiles = get_u(d);
        get_prof(d, &g->prof, diff);
        get_pprof(d, g);
    }
}

static double get_double(wdec *d)
{
    uint64_t u = 0;
    double v;

    if (d->rc == EMBER_OK && d->end - d->p < 8)
        bad(d, "a value runs past the end");
    if (d->rc != EMBER_OK)
        return 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)d->p[i] << (8 * i);
    d->p += 8;
    memcpy(&v, &u, sizeof v);
    return v;
}

static void get_one_series(wdec *d, em_series *s)
{
    uint64_t t = 0;
    size_t n;

    get_labels(d, &s->labels, &s->nlabels);
    n = get_count(d, "point count past the end");
    s->times = get_array(d, n, sizeof *s->times);
    s->values = get_array(d, n, sizeof *s->values);
    if (d->rc != EMBER_OK)
        return;
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        t += (uint64_t)get_i(d);    /* wraps as the encoder's delta did */
        s->times[i] = (int64_t)t;
    }
    for (size_t i = 0; i < n; i++)
        s->values[i] = get_double(d);
}

static void get_all_series(wdec *d, ember_result *r)
{
    size_t n = get_count(d, "series count past the end");

    if (n > 0 && r->kind != EMBER_RESULT_SERIES)
        bad(d, "series in a result that is not a series");
    r->series = get_array(d, n, sizeof *r->series);
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        r->nseries = i + 1;
        get_one_series(d, &r->series[i]);
    }
}

static void get_rows(wdec *d, ember_result *r)
{
    size_t n = get_count(d, "row count past the end");

    if (n > 0 && r->kind != EMBER_RESULT_TABLE)
        bad(d, "rows in a result that is not a table");
    r->rows = get_array(d, n, sizeof *r->rows);
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        r->nrows = i + 1;
        r->rows[i] = get_str(d);
    }
}

static void get_notes(wdec *d, ember_result *r)
{
    size_t n = get_count(d, "note count past the end");

    r->notes = get_array(d, n, sizeof *r->notes);
    for (size_t i = 0; i < n && d->rc == EMBER_OK; i++) {
        r->nnotes = i + 1;
        r->notes[i] = get_str(d);
    }
}

static void get_view(wdec *d, ember_result *r)
{
    uint64_t view = get_u(d);

    if (view < EM_VIEW_PEEK || view > EM_VIEW_LAST ||
        (r->kind != EMBER_RESULT_PROFILE && d->rc == EMBER_OK))
        bad(d, "a view that is unknown or not of a profile");
    r->view_re = get_str(d);
    if (d->rc == EMBER_OK)
        r->view = (int)view;
}

static void get_head(wdec *d, ember_result *r)
{
    uint64_t kind, flags;

    if (d->end - d->p < 5 || memcmp(d->p, WIRE_MAGIC, 4) != 0) {
        bad(d, "not an encoded result (no \"EMRW\")");
        return;
    }
    d->p += 4;
    if (get_u(d) != WIRE_VERSION)
        bad(d, "an encoding version this reader does not know");
    kind = get_u(d);
    flags = get_u(d);
    if (kind < EMBER_RESULT_PROFILE || kind > EMBER_RESULT_TABLE ||
        (flags & ~(uint64_t)(WIRE_IDS_ONLY | WIRE_VIEW)) != 0)
        bad(d, "an unknown result kind or flag");
    r->kind = (int)kind;
    r->ids_only = (flags & WIRE_IDS_ONLY) != 0;
    r->type = get_ostr(d);
    r->unit = get_ostr(d);
    r->column = get_ostr(d);
    r->top_limit = (size_t)get_u(d);
    r->from_ms = get_i(d);
    r->to_ms = get_i(d);
    r->step_ms = get_i(d);
    if ((flags & WIRE_VIEW) != 0 && d->rc == EMBER_OK)
        get_view(d, r);
}

int em_result_decode(const void *buf, size_t len, ember_result **out)
{
    wdec d = { .p = buf, .start = buf, .end = (const uint8_t *)buf + len };
    ember_result *r = em_calloc(1, sizeof *r);

    *out = NULL;
    if (r == NULL)
        return em_err(EMBER_ENOMEM, "result: decode");
    if (buf == NULL)
        d.p = d.start = d.end = (const uint8_t *)"";
    get_head(&d, r);
    get_notes(&d, r);
    get_groups(&d, r);
    get_all_series(&d, r);
    get_rows(&d, r);
    if (d.rc == EMBER_OK && d.p != d.end)
        bad(&d, "bytes after the result");
    if (d.rc != EMBER_OK) {
        em_result_free(r);
        return d.rc;
    }
    *out = r;
    return EMBER_OK;
}
