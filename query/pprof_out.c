/*
** query/pprof_out.c: ember_pprof_encode, a merged profile written as
** pprof's profile.proto (proto/profile.proto), optionally gzip'd, so that
** `go tool pprof` opens Ember's answers; and em_pprof_encode, the same
** through a snapshot the caller holds, which a query encodes its -o pprof
** answer with inside its own snapshot (query/exec.c); and em_pprof_encode_src,
** the same over any symbol source (em_pprof_src), so that a profile set not
** yet in any database (the agent's window, pushed by client/push.c) is
** written by this one encoder too.
**
** Two passes. The walk resolves every non-zero stack through the symbol
** source (one engine snapshot, or a profile set's tables): their ids
** become pprof ids through hash maps, dense
** 1..N in order of first use, and what pprof needs of each new location,
** function and mapping is copied into flat arrays (strings into an
** em_strtab, so the snapshot can end before packing). Each sample is
** packed by protobuf-c as soon as it is resolved, so the samples, by far
** the bulk, never sit in memory as message structs and id arrays. The
** pack pass then points protobuf-c message structs at the flat arrays,
** packs the rest of the profile after the samples, and gzips the bytes.
**
** The bytes are protobuf-c's throughout; only the framing of each sample
** is written here (field 2's tag and the length, as protobuf-c writes a
** repeated message field), and the profile is packed in three parts that
** concatenate to one message: Profile{sample_type}, the samples, and
** Profile{every other field}. protobuf messages concatenate by merging,
** and the fields come out in field-number order, so the result is the
** same bytes as packing the whole message at once.
**
** Invariants of the output:
** - string_table[0] is "" (pprof requires it); string 0 also means "none".
** - Locations keep their address, mapping and every line, innermost inline
**   frame first; samples list location ids leaf first, one value each.
** - Mappings are numbered in the order of their Ember ids, so the mapping
**   interned first (usually the main binary, pprof's mapping[0]) stays
**   first. A mapping's has_functions, has_filenames, has_line_numbers and
**   has_inline_frames are set when any used location of it carries names,
**   files, line numbers or lines at all (pprof's own symbolizer sets them
**   the same way), so pprof does not try to symbolize it again.
** - Headers are pprof's merge of the profiles merged (ember_merged_span):
**   time = earliest, duration = sum, period = largest.
*/
#include <limits.h>
#include <stdlib.h>
#include <libdeflate.h>

#include "proto/profile.pb-c.h"
#include "query/query_int.h"

typedef struct pp_line {
    uint64_t fn;                /* pprof function id */
    int64_t line;
} pp_line;

typedef struct pp_loc {
    uint32_t map;               /* index in maps plus one; 0: none */
    uint64_t address;
    size_t first, n;            /* its lines: lines[first .. first+n) */
} pp_loc;

typedef struct pp_fn {
    int64_t name, system_name, file;    /* string ids */
    int64_t start_line;
} pp_fn;

typedef struct pp_map {
    uint32_t ember_id;          /* decides the pprof id (see above) */
    uint64_t start, limit, offset;
    int64_t file, build_id;     /* string ids */
    bool has_fn, has_files, has_lines, has_inline;
} pp_map;

typedef struct pp_enc {
    const em_pprof_src *src;    /* the symbols, during the walk */
    em_strtab strs;
    int64_t type_str[4];        /* sample type, unit, period type, unit */
    em_map64 loc_ix, fn_ix, map_ix;     /* Ember id -> index in the arrays */
    pp_loc *locs;
    size_t nlocs, cap_locs;
    pp_line *lines;
    size_t nlines, cap_lines;
    pp_fn *fns;
    size_t nfns, cap_fns;
    pp_map *maps;
    size_t nmaps, cap_maps;
    em_buf out;                 /* Profile{sample_type}, then the samples */
    uint64_t *ids;              /* one sample's pprof location ids */
    size_t cap_ids;
} pp_enc;

static int pp_nomem(const char *what, size_t n)
{
    return em_err(EMBER_ENOMEM, "pprof: %zu %s", n, what);
}

/* *ID gets the string table index of S (NULL: ""). */
static int pp_string(pp_enc *e, const char *s, int64_t *id)
{
    uint32_t v = 0;
    int rc = em_strtab_intern(&e->strs, s != NULL ? s : "",
                              s != NULL ? strlen(s) : 0, &v);

    *id = v;
    return rc;
}

/* ---- the walk: Ember ids to pprof records ------------------------------- */

/* Interns "" (id 0) and the four strings of TYPE's sample and period
** types, fields 1 to 4 of "name:type:unit:period_type:period_unit". */
static int pp_type_strings(pp_enc *e, const char *type)
{
    const char *s = strchr(type, ':') + 1;      /* checked: 5 or 6 fields */
    uint32_t id;
    int rc = em_strtab_intern(&e->strs, "", 0, &id);

    for (int k = 0; rc == EMBER_OK && k < 4; k++) {
        const char *end = strchr(s, ':');
        size_t n = end != NULL ? (size_t)(end - s) : strlen(s);
        rc = em_strtab_intern(&e->strs, s, n, &id);
        e->type_str[k] = id;
        s = end != NULL ? end + 1 : s + n;
    }
    return rc;
}

/* *OUT gets the pprof id of Ember function FID, adding it when new. */
static int pp_function(pp_enc *e, uint32_t fid, uint64_t *out)
{
    ember_function f;
    pp_fn *g;
    uint64_t v;
    int rc;

    if (em_map64_get(&e->fn_ix, fid, &v)) {
        *out = v + 1;
        return EMBER_OK;
    }
    if ((rc = e->src->function(e->src->ctx, fid, &f)) != EMBER_OK)
        return em_err_prefix(rc, "function %u", fid);
    g = em_grow(e->fns, &e->cap_fns, e->nfns + 1, sizeof *g);
    if (g == NULL)
        return pp_nomem("functions", e->nfns + 1);
    e->fns = g;
    g += e->nfns;
    g->start_line = f.start_line;
    if ((rc = pp_string(e, f.name, &g->name)) != EMBER_OK ||
        (rc = pp_string(e, f.system_name, &g->system_name)) != EMBER_OK ||
        (rc = pp_string(e, f.file, &g->file)) != EMBER_OK ||
        (rc = em_map64_put(&e->fn_ix, fid, e->nfns)) != EMBER_OK)
        return rc;
    *out = ++e->nfns;
    return EMBER_OK;
}

/* *IDX1 gets the index plus one of Ember mapping MID (0 for 0, the unknown
** mapping), adding it when new. */
static int pp_mapping(pp_enc *e, uint32_t mid, uint32_t *idx1)
{
    ember_mapping m;
    pp_map *g;
    uint64_t v;
    int rc;

    *idx1 = 0;
    if (mid == 0)
        return EMBER_OK;
    if (em_map64_get(&e->map_ix, mid, &v)) {
        *idx1 = (uint32_t)v + 1;
        return EMBER_OK;
    }
    if ((rc = e->src->mapping(e->src->ctx, mid, &m)) != EMBER_OK)
        return em_err_prefix(rc, "mapping %u", mid);
    if (e->nmaps >= UINT32_MAX - 1)
        return em_err(EMBER_ELIMIT, "pprof: too many mappings");
    g = em_grow(e->maps, &e->cap_maps, e->nmaps + 1, sizeof *g);
    if (g == NULL)
        return pp_nomem("mappings", e->nmaps + 1);
    e->maps = g;
    g += e->nmaps;
    *g = (pp_map){ .ember_id = mid, .start = m.start, .limit = m.limit,
                   .offset = m.offset };
    if ((rc = pp_string(e, m.file, &g->file)) != EMBER_OK ||
        (rc = pp_string(e, m.build_id, &g->build_id)) != EMBER_OK ||
        (rc = em_map64_put(&e->map_ix, mid, e->nmaps)) != EMBER_OK)
        return rc;
    *idx1 = (uint32_t)++e->nmaps;
    return EMBER_OK;
}

/* Notes in L's mapping what symbol information L's lines carry. */
static void pp_mapping_flags(pp_enc *e, const pp_loc *l)
{
    pp_map *m = &e->maps[l->map - 1];

    m->has_inline |= l->n > 0;
    for (size_t j = l->first; j < l->first + l->n; j++) {
        const pp_fn *f = &e->fns[e->lines[j].fn - 1];
        m->has_fn |= f->name != 0 || f->system_name != 0;
        m->has_files |= f->file != 0;
        m->has_lines |= e->lines[j].line != 0;
    }
}

/* Copies Ember location LOC (id LID) as pprof location number nlocs + 1. */
static int pp_location_add(pp_enc *e, uint32_t lid, const ember_location *loc)
{
    pp_loc *g, l = { .address = loc->address, .first = e->nlines,
                     .n = loc->nlines };
    pp_line *ln;
    int rc = pp_mapping(e, loc->mapping, &l.map);

    if (rc != EMBER_OK)
        return rc;
    /* one more than needed: em_grow hands back NULL for nothing yet held
    ** when asked for nothing, as a location of bare address is */
    ln = em_grow(e->lines, &e->cap_lines, e->nlines + loc->nlines + 1,
                 sizeof *ln);
    if (ln == NULL)
        return pp_nomem("lines", e->nlines + loc->nlines);
    e->lines = ln;
    for (size_t j = 0; j < loc->nlines; j++) {
        ln[l.first + j].line = loc->lines[j].line;
        rc = pp_function(e, loc->lines[j].function, &ln[l.first + j].fn);
        if (rc != EMBER_OK)
            return rc;
    }
    e->nlines += loc->nlines;
    g = em_grow(e->locs, &e->cap_locs, e->nlocs + 1, sizeof *g);
    if (g == NULL)
        return pp_nomem("locations", e->nlocs + 1);
    e->locs = g;
    g[e->nlocs] = l;
    if (l.map != 0)
        pp_mapping_flags(e, &l);
    return em_map64_put(&e->loc_ix, lid, e->nlocs++);
}

/* *OUT gets the pprof id of Ember location LID, adding it when new. */
static int pp_location(pp_enc *e, uint32_t lid, uint64_t *out)
{
    ember_location loc;
    uint64_t v;
    int rc;

    if (em_map64_get(&e->loc_ix, lid, &v)) {
        *out = v + 1;
        return EMBER_OK;
    }
    if ((rc = e->src->location(e->src->ctx, lid, &loc)) != EMBER_OK)
        return em_err_prefix(rc, "location %u", lid);
    if ((rc = pp_location_add(e, lid, &loc)) != EMBER_OK)
        return em_err_prefix(rc, "location %u", lid);
    *out = e->nlocs;
    return EMBER_OK;
}

/* Field 2 of Profile, repeated Sample: its tag as protobuf-c writes it. */
#define PP_SAMPLE_TAG ((2u << 3) | 2u)

/* Packs MSG onto E->out with protobuf-c; with FRAMED, as an element of
** Profile's field 2 (its tag and length first). */
static int pp_append(pp_enc *e, const ProtobufCMessage *msg, bool framed)
{
    size_t size = protobuf_c_message_get_packed_size(msg);
    int rc = em_buf_reserve(&e->out, 1 + EM_VARINT_MAX + size);

    if (rc != EMBER_OK)
        return rc;
    if (framed) {
        e->out.p[e->out.len++] = PP_SAMPLE_TAG;
        e->out.len += em_varint_put(e->out.p + e->out.len, size);
    }
    e->out.len += protobuf_c_message_pack(msg, e->out.p + e->out.len);
    return EMBER_OK;
}

/* Packs one Sample of the N location ids at E->ids and VALUE onto E->out. */
static int pp_sample_pack(pp_enc *e, size_t n, int64_t value)
{
    Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;

    s.n_location_id = n;
    s.location_id = e->ids;
    s.n_value = 1;
    s.value = &value;
    return pp_append(e, &s.base, true);
}

/* Adds merged stack SID with VALUE as one sample. */
static int pp_stack(pp_enc *e, uint32_t sid, int64_t value)
{
    const uint32_t *locs;
    uint64_t *ids;
    size_t n;
    int rc = e->src->stack(e->src->ctx, sid, &locs, &n);

    if (rc != EMBER_OK)
        return em_err_prefix(rc, "pprof: stack %u", sid);
    ids = em_grow(e->ids, &e->cap_ids, n + 1, sizeof *ids);   /* n may be 0 */
    if (ids == NULL)
        return pp_nomem("location ids", n);
    e->ids = ids;
    for (size_t i = 0; i < n; i++)
        if ((rc = pp_location(e, locs[i], &ids[i])) != EMBER_OK)
            return em_err_prefix(rc, "pprof: stack %u", sid);
    return pp_sample_pack(e, n, value);
}

/* Packs Profile{sample_type} onto E->out, the first of the three parts. */
static int pp_head_pack(pp_enc *e)
{
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    Perftools__Profiles__ValueType st = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    Perftools__Profiles__ValueType *stp = &st;

    st.type = e->type_str[0];
    st.unit = e->type_str[1];
    p.n_sample_type = 1;
    p.sample_type = &stp;
    return pp_append(e, &p.base, false);
}

static int pp_walk(pp_enc *e, const em_pprof_in *in, const char *type)
{
    int rc = pp_type_strings(e, type);

    /* a first guess at the packed samples' size, to grow less */
    if (rc == EMBER_OK)
        rc = em_buf_reserve(&e->out, 4096 + in->n * 32);
    if (rc == EMBER_OK)
        rc = pp_head_pack(e);
    for (size_t i = 0; rc == EMBER_OK && i < in->n; i++)
        if (in->values[i] != 0) /* pprof's merge drops zero samples too */
            rc = pp_stack(e, in->stacks[i], in->values[i]);
    return rc;
}

static void pp_enc_free(pp_enc *e)
{
    em_strtab_free(&e->strs);
    em_map64_free(&e->loc_ix);
    em_map64_free(&e->fn_ix);
    em_map64_free(&e->map_ix);
    em_free(e->locs);
    em_free(e->lines);
    em_free(e->fns);
    em_free(e->maps);
    em_buf_free(&e->out);
    em_free(e->ids);
}

/* ---- the pack: protobuf-c messages over the arrays ---------------------- */

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;

/* The message structs and pointer arrays, all freed by pp_msg_free. */
typedef struct pp_msg {
    pb_profile prof;            /* every field but sample and sample_type */
    pb_value_type period_type;
    pb_location *locs, **loc_p;
    pb_line *lines, **line_p;
    pb_function *fns, **fn_p;
    pb_mapping *maps, **map_p;
    uint64_t *map_id;           /* index in maps -> pprof mapping id */
    char **strings;
} pp_msg;

static void pp_msg_free(pp_msg *g)
{
    em_free(g->locs);
    em_free(g->loc_p);
    em_free(g->lines);
    em_free(g->line_p);
    em_free(g->fns);
    em_free(g->fn_p);
    em_free(g->maps);
    em_free(g->map_p);
    em_free(g->map_id);
    em_free(g->strings);
}

/* Allocates every array of G for E's counts. */
static int pp_msg_alloc(pp_msg *g, const pp_enc *e)
{
    g->locs = em_malloc(e->nlocs * sizeof *g->locs + 1);
    g->loc_p = em_malloc(e->nlocs * sizeof *g->loc_p + 1);
    g->lines = em_malloc(e->nlines * sizeof *g->lines + 1);
    g->line_p = em_malloc(e->nlines * sizeof *g->line_p + 1);
    g->fns = em_malloc(e->nfns * sizeof *g->fns + 1);
    g->fn_p = em_malloc(e->nfns * sizeof *g->fn_p + 1);
    g->maps = em_malloc(e->nmaps * sizeof *g->maps + 1);
    g->map_p = em_malloc(e->nmaps * sizeof *g->map_p + 1);
    g->map_id = em_malloc(e->nmaps * sizeof *g->map_id + 1);
    g->strings = em_malloc(e->strs.count * sizeof *g->strings + 1);
    if (g->locs == NULL || g->loc_p == NULL || g->lines == NULL ||
        g->line_p == NULL || g->fns == NULL || g->fn_p == NULL || g->maps == NULL ||
        g->map_p == NULL || g->map_id == NULL || g->strings == NULL)
        return em_err(EMBER_ENOMEM, "pprof: message of %zu locations, %zu "
                      "functions", e->nlocs, e->nfns);
    return EMBER_OK;
}

typedef struct map_order {
    uint32_t ember_id;
    size_t idx;
} map_order;

static int map_order_cmp(const void *a, const void *b)
{
    const map_order *x = a, *y = b;
    return (x->ember_id > y->ember_id) - (x->ember_id < y->ember_id);
}

/* Mappings in Ember id order: g->maps[k] has pprof id k + 1, and
** g->map_id says where each of e->maps went. */
static int pp_msg_mappings(pp_msg *g, const pp_enc *e)
{
    map_order *o = em_malloc(e->nmaps * sizeof *o + 1);

    if (o == NULL)
        return pp_nomem("mappings", e->nmaps);
    for (size_t i = 0; i < e->nmaps; i++)
        o[i] = (map_order){ e->maps[i].ember_id, i };
    qsort(o, e->nmaps, sizeof *o, map_order_cmp);
    for (size_t k = 0; k < e->nmaps; k++) {
        const pp_map *m = &e->maps[o[k].idx];
        pb_mapping *pm = &g->maps[k];
        perftools__profiles__mapping__init(pm);
        pm->id = k + 1;
        pm->memory_start = m->start;
        pm->memory_limit = m->limit;
        pm->file_offset = m->offset;
        pm->filename = m->file;
        pm->build_id = m->build_id;
        pm->has_functions = m->has_fn;
        pm->has_filenames = m->has_files;
        pm->has_line_numbers = m->has_lines;
        pm->has_inline_frames = m->has_inline;
        g->map_p[k] = pm;
        g->map_id[o[k].idx] = k + 1;
    }
    em_free(o);
    return EMBER_OK;
}

static void pp_msg_locations(pp_msg *g, pp_enc *e)
{
    for (size_t i = 0; i < e->nlines; i++) {
        perftools__profiles__line__init(&g->lines[i]);
        g->lines[i].function_id = e->lines[i].fn;
        g->lines[i].line = e->lines[i].line;
        g->line_p[i] = &g->lines[i];
    }
    for (size_t i = 0; i < e->nlocs; i++) {
        const pp_loc *l = &e->locs[i];
        pb_location *pl = &g->locs[i];
        perftools__profiles__location__init(pl);
        pl->id = i + 1;
        pl->mapping_id = l->map != 0 ? g->map_id[l->map - 1] : 0;
        pl->address = l->address;
        pl->n_line = l->n;
        pl->line = g->line_p + l->first;
        g->loc_p[i] = pl;
    }
    for (size_t i = 0; i < e->nfns; i++) {
        pb_function *pf = &g->fns[i];
        perftools__profiles__function__init(pf);
        pf->id = i + 1;
        pf->name = e->fns[i].name;
        pf->system_name = e->fns[i].system_name;
        pf->filename = e->fns[i].file;
        pf->start_line = e->fns[i].start_line;
        g->fn_p[i] = pf;
    }
}

/* unix ms to ns, clamped instead of overflowing (past the year 2262). */
static int64_t ms_to_ns(int64_t ms)
{
    int64_t ns;

    if (__builtin_mul_overflow(ms, (int64_t)1000000, &ns))
        return ms < 0 ? INT64_MIN : INT64_MAX;
    return ns;
}

/* Points the profile message of G at E's arrays and IN's headers: the
** third part, all but the sample types and samples. */
static void pp_msg_profile(pp_msg *g, pp_enc *e, const em_pprof_in *in)
{
    pb_profile *p = &g->prof;

    for (uint32_t i = 0; i < e->strs.count; i++)
        g->strings[i] = (char *)em_strtab_get(&e->strs, i);
    perftools__profiles__value_type__init(&g->period_type);
    g->period_type.type = e->type_str[2];
    g->period_type.unit = e->type_str[3];
    perftools__profiles__profile__init(p);
    p->n_mapping = e->nmaps;
    p->mapping = g->map_p;
    p->n_location = e->nlocs;
    p->location = g->loc_p;
    p->n_function = e->nfns;
    p->function = g->fn_p;
    p->n_string_table = e->strs.count;
    p->string_table = g->strings;
    p->time_nanos = ms_to_ns(in->time_ms);
    p->duration_nanos = in->duration_ns;
    p->period_type = &g->period_type;
    p->period = in->period;
}

/* ---- gzip --------------------------------------------------------------- */

/* Gzips the N bytes at IN into a new buffer *OUT of *OUTLEN bytes, with
** libdeflate at level 1 (Go's runtime/pprof writes level 1 too): twice as
** fast as zlib's level 1, for a slightly smaller file. */
static int pp_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
    uint8_t *buf = NULL;
    size_t bound, got;
    int rc = EMBER_OK;

    if (c == NULL)
        return em_err(EMBER_ENOMEM, "pprof: gzip: no memory for the compressor");
    bound = libdeflate_gzip_compress_bound(c, n);
    if ((buf = em_malloc(bound + 1)) == NULL) {
        rc = pp_nomem("bytes of gzip output", bound);
        goto out;
    }
    got = libdeflate_gzip_compress(c, in, n, buf, bound);
    if (got == 0) {
        rc = em_err(EMBER_EIO, "pprof: gzip: %zu bytes did not fit the "
                    "compressor's own bound", n);
        goto out;
    }
    *out = buf;
    *outlen = got;
    buf = NULL;
out:
    libdeflate_free_compressor(c);
    em_free(buf);
    return rc;
}

/* ---- the encoder -------------------------------------------------------- */

/* Packs the third part after E->out's first two and hands back the whole
** profile, gzip'd when FLAGS say. */
static int pp_pack(pp_enc *e, const em_pprof_in *in, unsigned flags,
                   void **out, size_t *len)
{
    pp_msg g;
    uint8_t *gz = NULL;
    size_t gzlen = 0;
    int rc;

    memset(&g, 0, sizeof g);
    rc = pp_msg_alloc(&g, e);
    if (rc == EMBER_OK)
        rc = pp_msg_mappings(&g, e);
    if (rc == EMBER_OK) {
        pp_msg_locations(&g, e);
        pp_msg_profile(&g, e, in);
        rc = pp_append(e, &g.prof.base, false);
    }
    pp_msg_free(&g);
    if (rc != EMBER_OK)
        return rc;
    if (flags & EMBER_PPROF_GZIP) {
        if ((rc = pp_gzip(e->out.p, e->out.len, &gz, &gzlen)) != EMBER_OK)
            return rc;
        *out = gz;
        *len = gzlen;
        return EMBER_OK;
    }
    *out = e->out.p;            /* the caller's now: ember_pprof_free */
    *len = e->out.len;
    e->out = (em_buf){ 0 };
    return EMBER_OK;
}

/* The checks every encode makes before it reads anything. */
static int pp_args_check(const char *type, unsigned flags)
{
    int rc;

    if ((flags & ~(unsigned)EMBER_PPROF_GZIP) != 0)
        return em_err(EMBER_EINVAL, "pprof: unknown flags 0x%x",
                      flags & ~(unsigned)EMBER_PPROF_GZIP);
    if ((rc = em_profile_type_check(type)) != EMBER_OK)
        return em_err_prefix(rc, "pprof");
    return EMBER_OK;
}

/* The snapshot as a symbol source: Ember ids. */
static int snap_stack(void *ctx, uint32_t id, const uint32_t **locs,
                      size_t *n)
{
    return ember_snapshot_stack(ctx, id, locs, n);
}

static int snap_location(void *ctx, uint32_t id, ember_location *out)
{
    return ember_snapshot_location(ctx, id, out);
}

static int snap_function(void *ctx, uint32_t id, ember_function *out)
{
    return ember_snapshot_function(ctx, id, out);
}

static int snap_mapping(void *ctx, uint32_t id, ember_mapping *out)
{
    return ember_snapshot_mapping(ctx, id, out);
}

/* Walks IN through SRC, then packs. */
static int pp_encode(const em_pprof_src *src, const em_pprof_in *in,
                     const char *type, unsigned flags, void **out,
                     size_t *len, ember_snapshot *own)
{
    pp_enc e;
    int rc;

    memset(&e, 0, sizeof e);
    e.src = src;
    rc = pp_walk(&e, in, type);
    e.src = NULL;
    /* the walk alone needs the symbols: a snapshot begun for this encode
    ** ends as soon as the strings are copied */
    ember_snapshot_end(own);
    if (rc == EMBER_OK)
        rc = pp_pack(&e, in, flags, out, len);
    pp_enc_free(&e);
    return rc;
}

/* M's samples and pprof's merged headers through snapshot SNAP. */
static int pp_encode_merged(ember_snapshot *snap, bool own,
                            const ember_merged *m, const char *type,
                            unsigned flags, void **out, size_t *len)
{
    em_pprof_src src = { snap, snap_stack, snap_location, snap_function,
                         snap_mapping };
    em_pprof_in in;

    in.n = ember_merged_samples(m, &in.stacks, &in.values);
    ember_merged_span(m, &in.time_ms, NULL, &in.duration_ns, &in.period);
    return pp_encode(&src, &in, type, flags, out, len, own ? snap : NULL);
}

int em_pprof_encode(ember_snapshot *snap, const ember_merged *m,
                    const char *type, unsigned flags, void **out, size_t *len)
{
    int rc = pp_args_check(type, flags);

    *out = NULL;
    *len = 0;
    if (rc != EMBER_OK)
        return rc;
    return pp_encode_merged(snap, false, m, type, flags, out, len);
}

int em_pprof_encode_src(const em_pprof_src *src, const em_pprof_in *in,
                        const char *type, unsigned flags, void **out,
                        size_t *len)
{
    int rc = pp_args_check(type, flags);

    *out = NULL;
    *len = 0;
    if (rc != EMBER_OK)
        return rc;
    return pp_encode(src, in, type, flags, out, len, NULL);
}

EMBER_API int ember_pprof_encode(ember_db *db, const ember_merged *m,
                                 const char *type, unsigned flags, void **out,
                                 size_t *len)
{
    ember_snapshot *snap = NULL;
    int rc;

    em_err_clear();
    if (out == NULL || len == NULL)
        return em_err(EMBER_EINVAL, "ember_pprof_encode: NULL result");
    *out = NULL;
    *len = 0;
    if (db == NULL || m == NULL)
        return em_err(EMBER_EINVAL, "ember_pprof_encode: NULL %s",
                      db == NULL ? "database" : "merged profile");
    if ((rc = pp_args_check(type, flags)) != EMBER_OK)
        return rc;
    if ((snap = em_merged_snapshot(m)) != NULL)     /* what its ids name */
        return pp_encode_merged(snap, false, m, type, flags, out, len);
    if ((rc = ember_snapshot_begin(db, &snap)) != EMBER_OK)
        return rc;
    return pp_encode_merged(snap, true, m, type, flags, out, len);
}
