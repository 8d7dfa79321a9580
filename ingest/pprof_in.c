/*
** ingest/pprof_in.c: the pprof decoder (em_pprof_decode). One gunzipped
** perftools.profiles.Profile becomes profiles of a set (ingest/pset.h):
** one per (sample type, distinct set of sample labels), as Pyroscope splits
** them. Profile types are named in ingest/pprof_type.c.
**
** Three passes, so that a malformed file adds nothing to the set (only
** ENOMEM can stop the third midway; the caller drops the set then):
**  1. The top-level fields are walked once: the samples stay where they
**     are in the input, everything else (the symbols, a small part of
**     most files) is copied out and protobuf-c unpacks it into an arena (a
**     few growing blocks, not an em_malloc per message and string; freed
**     at once). A failure is located afterwards by walking the top-level
**     fields (diagnose()).
**  2. Everything is checked: string indexes, ids (nonzero, unique; mapped
**     to array positions by a hash, or directly when they are 1..n in order
**     as Go writes them), references, value counts, limits, label values.
**     The ids in the unpacked message are rewritten in place to positions.
**     Each sample is unpacked alone into a scratch arena reused for the
**     next (sample_next()), and its labels are reduced to a label set id.
**     (Input up to em_pprof_whole_max is unpacked whole instead, as the
**     cost is small and the speed of small files is what counts there.)
**  3. What the samples reference is added: mappings, functions and
**     locations on first use (unreferenced symbols are not kept), then one
**     stack per sample and one set sample per nonzero value; the samples
**     are unpacked again one by one (unless unpacked whole).
**
** Why samples one by one: unpacked whole, a sample costs some 220 bytes
** of protobuf-c structures (pointers, arrays, alignment) for its 20 to 30
** bytes of input, and they were most of an import's peak memory (issue
** 12: 3.3 GB for a 268 MB file of 10M samples). Unpacking each twice
** costs less than a tenth of the decode. See docs/ingest.md, "Memory".
**
** Kept: mappings (start, limit, offset, file, build id), functions (name,
** system name, file, start line), locations (mapping, address, lines
** innermost first), stacks (leaf first, as pprof), time_nanos (as time_ms;
** none: opts->time_ms), duration_nanos, period (none: the opts' ones), and
** sample labels as SERIES labels:
**   - keys go through em_label_name_sanitize ("http.route" -> http_route;
**     two keys that sanitize alike are one key);
**   - numeric labels (no str) are left out unless opts->numeric_labels:
**     they describe one sample (Go's heap profile puts the block size in
**     "bytes" on every sample, "object count" too), so as series labels
**     they split a heap profile into a series per block size (issue 12);
**     left out, samples that differ only in them sum in their profile;
**   - with opts->numeric_labels a numeric label's value is its decimal
**     number, then " UNIT" when it has a num_unit ("4096 bytes");
**   - a key repeated in one sample joins its values with ',' in file order;
**   - a label with neither str nor num nor num_unit, or an empty string
**     value, is absent (as in Go's pprof and in PromQL);
**   - the import's own labels win a clash: the file's becomes exported_KEY;
**   - a value over 400 bytes (the engine's limit) is an error, not cut.
** A sample's zero values are skipped for their type, as Parca does: a zero
** adds nothing to any merge, and Go's heap profile is mostly zeros in its
** inuse_* columns.
**
** Not kept: comments, drop_frames, keep_frames, default_sample_type,
** doc_url, Line.column, the mapping has_* flags, Location.is_folded.
**
** Limits (EMBER_ELIMIT, naming the sample or location): EM_PSET_MAX_DEPTH
** locations per sample, EM_PSET_MAX_LINES lines per location,
** EM_PSET_MAX_LABELS labels per profile (the import's own included),
** EM_PPROF_MAX_TYPES sample types, 400 bytes per label value and profile
** type. Work per sample is bounded whatever the strings' lengths.
**
** String index 0 is "" even in a file with an empty string table.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"
#include "ingest/pprof_int.h"
#include "ingest/pset.h"
#include "proto/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Function pb_function;

#define MAX_LABEL_VALUE 400         /* the engine's EM_MAX_LABEL_VALUE */
#define ARENA_MIN (4u << 10)         /* the first block: twice the input, */
#define ARENA_FIRST_MAX (1u << 20)  /* within these bounds, then doubling */
#define ARENA_STEP_MAX (16u << 20)
/* Input up to this size is unpacked whole, samples and all (some ten times
** its size), rather than each sample twice: most files are small, and for
** them the split and the second unpack cost a twentieth of the import. */
size_t em_pprof_whole_max = 1u << 20;

/* ---- an arena for protobuf-c -------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

/* protobuf-c makes one allocation per message, array and string: a file
** of 100k samples is half a million. The arena makes them bump-pointer
** steps and frees them together; ProtobufCAllocator.free is a no-op. */
typedef struct arena {
    arena_block *head;
    size_t next_cap;            /* payload of the next block */
    bool failed;                /* an allocation failed: unpack's failure
                                ** is ENOMEM, not bad input */
} arena;

static void *arena_alloc(void *ad, size_t n)
{
    arena *a = ad;
    arena_block *b = a->head;
    size_t need = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);

    if (need < n) {
        a->failed = true;
        return NULL;
    }
    if (b == NULL || b->cap - b->used < need) {
        size_t cap = need > a->next_cap ? need : a->next_cap;
        b = cap <= SIZE_MAX - sizeof *b ? em_malloc(sizeof *b + cap) : NULL;
        if (b == NULL) {
            a->failed = true;
            return NULL;
        }
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        if (a->next_cap < ARENA_STEP_MAX)
            a->next_cap *= 2;
    }
    b->used += need;
    return (char *)b->data + b->used - need;
}

static void arena_nofree(void *ad, void *p)
{
    (void)ad;
    (void)p;
}

static void arena_release(arena *a)
{
    while (a->head != NULL) {
        arena_block *next = a->head->next;
        em_free(a->head);
        a->head = next;
    }
}

/* Empties A for the next message, keeping its newest (largest) block. */
static void arena_reset(arena *a)
{
    if (a->head == NULL)
        return;
    while (a->head->next != NULL) {
        arena_block *next = a->head->next->next;
        em_free(a->head->next);
        a->head->next = next;
    }
    a->head->used = 0;
}

/* ---- id maps ------------------------------------------------------------ */

/* pprof id -> position in its array. Ids need not be dense or ordered;
** when they are exactly 1..n in order (Go, pprof's own writer), the map is
** the identity and costs nothing, else a table (engine/htab.h) holds it. */
typedef struct idslot {
    uint64_t id;                /* 0: a free slot (no pprof id is 0) */
    uint32_t pos;
} idslot;
typedef EM_HTAB_TYPE(idslot) idtab;

#define EM_HT_NAME idtab
#define EM_HT_TABLE idtab
#define EM_HT_ENTRY idslot
#define EM_HT_KEY uint64_t
#define EM_HT_IS_FREE(e) ((e)->id == 0)
#define EM_HT_HASH(e) em_mix64((e)->id)
#define EM_HT_MATCH(e, h, k) ((e)->id == (k))
#define EM_HT_WHAT "pprof: id map"
#define EM_HT_INITIAL 16
#include "engine/htab.h"

typedef struct idmap {
    idtab t;                    /* unless dense */
    size_t n;
    bool dense;
} idmap;

typedef uint64_t (*id_fn)(const pb_profile *p, size_t i);

static uint64_t mapping_id(const pb_profile *p, size_t i)
{
    return p->mapping[i]->id;
}

static uint64_t function_id(const pb_profile *p, size_t i)
{
    return p->function[i]->id;
}

static uint64_t location_id(const pb_profile *p, size_t i)
{
    return p->location[i]->id;
}

/* The position of ID, or -1. */
static long idmap_get(const idmap *m, uint64_t id)
{
    const idslot *e;

    if (m->dense)
        return id >= 1 && id <= m->n ? (long)(id - 1) : -1;
    e = idtab_find(&m->t, em_mix64(id), id);    /* id 0 ends at a free slot */
    return e != NULL ? (long)e->pos : -1;
}

/* Maps the N ids GET gives; a zero or repeated id is an error naming WHAT. */
static int idmap_build(idmap *m, const pb_profile *p, size_t n, id_fn get,
                       const char *what, const char *origin)
{
    int rc;

    m->n = n;
    m->dense = true;
    for (size_t i = 0; i < n && m->dense; i++)
        m->dense = get(p, i) == i + 1;
    if (m->dense)
        return EMBER_OK;
    if (n > UINT32_MAX)
        return em_err(EMBER_ELIMIT, "%s: more than %u %ss", origin,
                      UINT32_MAX, what);
    if ((rc = idtab_reserve(&m->t, n)) != EMBER_OK)
        return em_err(rc, "%s: out of memory mapping %zu %s ids", origin, n,
                      what);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = get(p, i);
        bool found;
        idslot *e;
        if (id == 0)
            return em_err(EMBER_EINVAL, "%s: the %s at index %zu has id 0",
                          origin, what, i);
        e = idtab_insert(&m->t, em_mix64(id), id, &found);
        if (e == NULL)
            return EMBER_ENOMEM;
        if (found)
            return em_err(EMBER_EINVAL, "%s: %s id %" PRIu64 " is used "
                          "twice", origin, what, id);
        *e = (idslot){ id, (uint32_t)i };
    }
    return EMBER_OK;
}

/* ---- the decoder's state ------------------------------------------------ */

/* One distinct set of sample labels: canonical bytes "name\0value\0..."
** sorted by name, at sets.p + off. */
typedef struct labset {
    size_t off, len;
    uint32_t n;
    uint64_t hash;
} labset;

/* One label of the sample being reduced. */
typedef struct lab {
    const char *name;           /* its sanitized key, in keys */
    uint32_t key;               /* ... at this offset (keys may move) */
    uint32_t ord;               /* its place in the sample (stable sort) */
    const pb_label *l;
} lab;

typedef struct pctx {
    const char *origin;
    em_import_opts o;
    pb_profile *p;              /* all but the samples (n_sample is 0) */
    const uint8_t *in;          /* the input, where the samples stay */
    size_t inlen;
    size_t nsample;             /* sample fields in it */
    size_t first;               /* where the first one starts */
    pb_sample **kept;           /* small input, unpacked whole: its samples
                                ** (p->sample); NULL: unpack one by one */
    size_t depth;               /* most locations in one sample */
    size_t nstk, nfr, nval;     /* stacks, their frames and values pass 3
                                ** adds at most: em_pset_reserve */
    arena sa;                   /* the one sample unpacked, reset per sample */
    em_pset *s;
    idmap maps, funcs, locs;
    size_t ntypes;
    em_buf types;               /* profile type strings ... */
    size_t *type_off;           /* ... and where each starts */
    /* labels (pass 2) */
    uint32_t *key_name;         /* string index -> sanitized name's offset
                                ** in keys plus one; 0: not yet */
    em_buf keys;
    lab *labs;                  /* scratch, one sample's labels */
    size_t cap_labs;
    em_buf cur;                 /* scratch, one sample's canonical set */
    em_buf sets;                /* every distinct set's bytes */
    labset *set;                /* set 0 is the empty one */
    size_t nsets, cap_sets;
    em_hindex set_index;        /* over set */
    em_buf nul;                 /* uint64_t indexes of the strings that
                                ** hold a NUL byte, ascending */
    uint32_t *sample_set;       /* per sample; NULL: all in set 0 */
    /* adding (pass 3) */
    uint32_t *map_idx, *fn_idx, *loc_idx;   /* set index plus one; 0: not
                                            ** added yet */
    uint32_t *prof;             /* [set * ntypes + type]: profile plus one */
    uint32_t *stack;            /* scratch, one sample's location indexes */
    ember_label *extra, *joined;    /* scratch, one profile's labels */
    int64_t time_ms, duration_ns, period;
} pctx;

/* The set in C's cur, looked up among the sets. */
static bool set_eq(const pctx *c, uint32_t idx)
{
    const labset *e = &c->set[idx];

    return e->len == c->cur.len &&
           memcmp(c->sets.p + e->off, c->cur.p, e->len) == 0;
}

#define EM_HT_NAME set_ix
#define EM_HT_KEY const pctx *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && set_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "pprof: label set index"
#include "ingest/hindex.h"

static void pctx_free(pctx *c)
{
    idtab_free(&c->maps.t);
    idtab_free(&c->funcs.t);
    idtab_free(&c->locs.t);
    em_buf_free(&c->types);
    em_free(c->type_off);
    em_free(c->key_name);
    em_buf_free(&c->keys);
    em_free(c->labs);
    em_buf_free(&c->cur);
    em_buf_free(&c->sets);
    em_free(c->set);
    set_ix_free(&c->set_index);
    em_buf_free(&c->nul);
    em_free(c->sample_set);
    em_free(c->map_idx);
    em_free(c->fn_idx);
    em_free(c->loc_idx);
    em_free(c->prof);
    em_free(c->stack);
    em_free(c->extra);
    em_free(c->joined);
    arena_release(&c->sa);
}

/* em_calloc of N entries of SIZE, or ENOMEM naming WHAT. */
static int alloc_array(pctx *c, void *pp, size_t n, size_t size,
                       const char *what)
{
    void **out = pp;

    *out = em_calloc(n > 0 ? n : 1, size);
    if (*out == NULL)
        return em_err(EMBER_ENOMEM, "%s: out of memory for %zu %s",
                      c->origin, n, what);
    return EMBER_OK;
}

static bool str_in_range(const pb_profile *p, int64_t i)
{
    return i == 0 || (i > 0 && (uint64_t)i < p->n_string_table);
}

/* True when string I holds a NUL byte (c->nul lists them, ascending). */
static bool str_has_nul(const pctx *c, int64_t i)
{
    const uint64_t *v = (const uint64_t *)(const void *)c->nul.p;
    size_t lo = 0, hi = c->nul.len / sizeof *v;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] == (uint64_t)i)
            return true;
        if (v[mid] < (uint64_t)i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* String I may be used: in the table and a whole C string (a NUL inside
** would cut "f\0A" and "f\0B" to one name "f", merging them silently). */
static bool str_ok(const pctx *c, int64_t i)
{
    return str_in_range(c->p, i) && (c->nul.len == 0 || !str_has_nul(c, i));
}

static const char *S(const pctx *c, int64_t i)
{
    return em_pprof_str(c->p, i);
}

/* The error for string index I in FIELD of WHAT number ID. */
static int bad_str(const pctx *c, const char *what, uint64_t id,
                   const char *field, int64_t i)
{
    if (str_in_range(c->p, i))
        return em_err(EMBER_EINVAL, "%s: %s %" PRIu64 ": %s string %" PRId64
                      " holds a NUL byte (names are kept whole, never cut)",
                      c->origin, what, id, field, i);
    return em_err(EMBER_EINVAL, "%s: %s %" PRIu64 ": %s string index %"
                  PRId64 " is out of range (the string table has %zu "
                  "entries)", c->origin, what, id, field, i,
                  c->p->n_string_table);
}

/* ---- pass 1: unpack ----------------------------------------------------- */

/* The top-level fields of Profile: name, message type, wire type. */
static const struct pb_field {
    const char *name;
    const ProtobufCMessageDescriptor *msg;
    int wire;                   /* -1: 0 or 2 (packed) */
} pb_fields[] = {
    [1] = { "sample type", &perftools__profiles__value_type__descriptor, 2 },
    [2] = { "sample", &perftools__profiles__sample__descriptor, 2 },
    [3] = { "mapping", &perftools__profiles__mapping__descriptor, 2 },
    [4] = { "location", &perftools__profiles__location__descriptor, 2 },
    [5] = { "function", &perftools__profiles__function__descriptor, 2 },
    [6] = { "string", NULL, 2 },
    [7] = { "drop_frames", NULL, 0 },
    [8] = { "keep_frames", NULL, 0 },
    [9] = { "time_nanos", NULL, 0 },
    [10] = { "duration_nanos", NULL, 0 },
    [11] = { "period type", &perftools__profiles__value_type__descriptor, 2 },
    [12] = { "period", NULL, 0 },
    [13] = { "comment", NULL, -1 },
    [14] = { "default_sample_type", NULL, 0 },
    [15] = { "doc_url", NULL, 0 },
};

/* Skips the value of one field of wire type WIRE at *POS; false when it
** runs past LEN (or the wire type is not one protobuf has). */
static bool skip_value(const uint8_t *b, size_t len, size_t *pos,
                       unsigned wire, uint64_t *size)
{
    const uint8_t *q = b + *pos;
    uint64_t v;

    *size = 0;
    switch (wire) {
    case 0:
        if (em_varint_get(&q, b + len, &v) != 0)
            return false;
        *pos = (size_t)(q - b);
        return true;
    case 1:
    case 5:
        *size = wire == 1 ? 8 : 4;
        break;
    case 2:
        if (em_varint_get(&q, b + len, size) != 0)
            return false;
        *pos = (size_t)(q - b);
        break;
    default:
        return false;
    }
    if (*size > len - *pos)
        return false;
    *pos += (size_t)*size;
    return true;
}

/* Unpacks one embedded message to see whether it is the bad one. */
static bool sub_ok(arena *a, const struct pb_field *f, const uint8_t *p,
                   size_t n)
{
    ProtobufCAllocator al = { arena_alloc, arena_nofree, a };
    bool ok = f->msg == NULL ||
              protobuf_c_message_unpack(f->msg, &al, n, p) != NULL ||
              a->failed;

    arena_reset(a);     /* a file of millions of samples is probed in turn */
    return ok;
}

/* Says in WHY what made protobuf-c refuse B: walks the top-level fields
** and unpacks each embedded message alone. */
static void diagnose(arena *a, const uint8_t *b, size_t len, char *why,
                     size_t n)
{
    size_t pos = 0, count[EM_ARRAY_LEN(pb_fields)] = { 0 };

    snprintf(why, n, "malformed message");
    while (pos < len) {
        size_t at = pos, body;
        const uint8_t *q = b + pos;
        uint64_t tag, size;
        unsigned wire;
        const struct pb_field *f = NULL;
        if (em_varint_get(&q, b + len, &tag) != 0 || (tag >> 3) == 0) {
            snprintf(why, n, "bad field key at byte %zu", at);
            return;
        }
        pos = (size_t)(q - b);
        wire = (unsigned)(tag & 7);
        if ((tag >> 3) < EM_ARRAY_LEN(pb_fields))
            f = &pb_fields[tag >> 3];
        if (f != NULL && f->name != NULL &&
            (f->wire >= 0 ? (unsigned)f->wire != wire
                          : wire != 0 && wire != 2)) {
            snprintf(why, n, "%s at byte %zu has wire type %u", f->name, at,
                     wire);
            return;
        }
        if (!skip_value(b, len, &pos, wire, &size)) {
            char field[32];
            snprintf(field, sizeof field, "field %" PRIu64, tag >> 3);
            snprintf(why, n, "%s at byte %zu: %s",
                     f != NULL && f->name != NULL ? f->name : field, at,
                     wire == 3 || wire == 4 || wire > 5
                     ? "bad wire type" : "truncated or overlong value");
            return;
        }
        body = pos - (size_t)size;
        if (f != NULL && f->name != NULL) {
            if (!sub_ok(a, f, b + body, (size_t)size)) {
                snprintf(why, n, "%s %zu at byte %zu is malformed", f->name,
                         count[tag >> 3], at);
                return;
            }
            count[tag >> 3]++;
        }
    }
}

#define STRING_KEY ((6u << 3) | 2)     /* string_table: field 6 */

/* Notes in c->nul the string table entry *IDX when its SIZE bytes at S
** hold a NUL, and counts it. */
static int nul_note(pctx *c, const uint8_t *s, uint64_t size, uint64_t *idx)
{
    int rc = EMBER_OK;

    if (memchr(s, '\0', (size_t)size) != NULL)
        rc = em_buf_put(&c->nul, idx, sizeof *idx);
    (*idx)++;
    return rc;
}

/* Lists in c->nul the string table entries of B that hold a NUL byte:
** protobuf-c hands strings out as C strings, their length lost, so only
** the wire says. One walk over the top-level fields (a sample is one). */
static int find_nul_strings(pctx *c, const uint8_t *b, size_t len)
{
    size_t pos = 0;
    uint64_t idx = 0, tag, size;
    int rc = EMBER_OK;

    while (pos < len && rc == EMBER_OK) {
        const uint8_t *q = b + pos;
        if (em_varint_get(&q, b + len, &tag) != 0)
            break;              /* unpack took it: cannot happen */
        pos = (size_t)(q - b);
        if (!skip_value(b, len, &pos, (unsigned)(tag & 7), &size))
            break;
        if (tag == STRING_KEY)
            rc = nul_note(c, b + pos - size, size, &idx);
    }
    return rc == EMBER_OK ? rc : em_err_prefix(rc, "%s", c->origin);
}

#define SAMPLE_KEY ((2u << 3) | 2)     /* field 2, length-delimited */

/* Copies the top-level fields of the LEN bytes at B but the samples into
** REST, a run of fields at a time (writers put the samples together),
** counting the samples, noting where the first one is and, in the same
** walk, which strings hold a NUL (find_nul_strings); false when the
** framing is bad. */
static bool split_samples(pctx *c, const uint8_t *b, size_t len, em_buf *rest,
                          int *rc)
{
    size_t pos = 0, run = 0;        /* the run of other fields from RUN */
    uint64_t idx = 0;               /* string table entries seen */

    *rc = EMBER_OK;
    while (pos < len) {
        size_t at = pos;
        const uint8_t *q = b + pos;
        uint64_t tag, size;
        if (em_varint_get(&q, b + len, &tag) != 0 || (tag >> 3) == 0)
            return false;
        pos = (size_t)(q - b);
        if (!skip_value(b, len, &pos, (unsigned)(tag & 7), &size))
            return false;
        if (tag == STRING_KEY &&
            (*rc = nul_note(c, b + pos - size, size, &idx)) != EMBER_OK)
            return false;
        if (tag != SAMPLE_KEY)
            continue;
        if (c->nsample++ == 0)
            c->first = at;
        if (at > run && (*rc = em_buf_put(rest, b + run, at - run)) != 0)
            return false;
        run = pos;
    }
    return len == run || (*rc = em_buf_put(rest, b + run, len - run)) == 0;
}

/* Unpacks BUF but its samples into c->p. */
static int unpack(pctx *c, arena *a, const void *buf, size_t len)
{
    ProtobufCAllocator al = { arena_alloc, arena_nofree, a };
    em_buf rest = { 0 };
    char why[160];
    int rc;

    if (buf == NULL && len > 0)
        return em_err(EMBER_EINVAL, "%s: no input buffer", c->origin);
    c->in = buf;
    c->inlen = len;
    rc = EMBER_OK;
    if (len <= em_pprof_whole_max) {
        c->p = perftools__profiles__profile__unpack(&al, len, buf);
        if (c->p != NULL) {
            c->nsample = c->p->n_sample;
            c->kept = c->p->sample;
        }
    } else if (split_samples(c, buf, len, &rest, &rc)) {
        c->p = perftools__profiles__profile__unpack(&al, rest.len,
                                                    rest.len ? rest.p
                                                             : (void *)"");
    }
    em_buf_free(&rest);
    if (rc != EMBER_OK)
        return em_err(rc, "%s: out of memory unpacking %zu bytes of pprof",
                      c->origin, len);
    if (c->p == NULL && a->failed)
        return em_err(EMBER_ENOMEM, "%s: out of memory unpacking %zu bytes "
                      "of pprof", c->origin, len);
    if (c->p == NULL) {
        diagnose(a, buf, len, why, sizeof why);
        return em_err(EMBER_EINVAL, "%s: not a valid pprof protobuf (%s)",
                      c->origin, why);
    }
    /* Anything parses as a message of unknown fields only: a PNG, text. */
    if (len > 0 && c->p->base.n_unknown_fields > 0 &&
        c->p->n_string_table == 0 && c->p->n_sample_type == 0 &&
        c->nsample == 0)
        return em_err(EMBER_EINVAL, "%s: not a valid pprof protobuf (no "
                      "pprof field, %u unknown ones)", c->origin,
                      c->p->base.n_unknown_fields);
    /* a split input had its strings checked as it was split */
    return len <= em_pprof_whole_max ? find_nul_strings(c, buf, len)
                                     : EMBER_OK;
}

/* ---- pass 2: checks ----------------------------------------------------- */

static int check_value_type(const pctx *c,
                            const Perftools__Profiles__ValueType *vt,
                            const char *what, size_t i)
{
    if (!str_ok(c, vt->type))
        return bad_str(c, what, i, "type", vt->type);
    if (!str_ok(c, vt->unit))
        return bad_str(c, what, i, "unit", vt->unit);
    return EMBER_OK;
}

/* The string table, sample types and period type. */
static int check_header(pctx *c)
{
    const pb_profile *p = c->p;
    int rc = EMBER_OK;

    if (p->n_string_table > 0 && p->string_table[0][0] != '\0')
        return em_err(EMBER_EINVAL, "%s: string table entry 0 is not empty",
                      c->origin);
    if (p->n_sample_type > EM_PPROF_MAX_TYPES)
        return em_err(EMBER_ELIMIT, "%s: %zu sample types (at most %u)",
                      c->origin, p->n_sample_type, EM_PPROF_MAX_TYPES);
    for (size_t i = 0; i < p->n_sample_type && rc == EMBER_OK; i++)
        rc = check_value_type(c, p->sample_type[i], "sample type", i);
    if (rc == EMBER_OK && p->period_type != NULL)
        rc = check_value_type(c, p->period_type, "period type", 0);
    return rc;
}

static int check_mappings(pctx *c)
{
    const pb_profile *p = c->p;

    for (size_t i = 0; i < p->n_mapping; i++) {
        const pb_mapping *m = p->mapping[i];
        if (!str_ok(c, m->filename))
            return bad_str(c, "mapping", m->id, "filename", m->filename);
        if (!str_ok(c, m->build_id))
            return bad_str(c, "mapping", m->id, "build_id", m->build_id);
    }
    return idmap_build(&c->maps, p, p->n_mapping, mapping_id, "mapping",
                       c->origin);
}

static int check_functions(pctx *c)
{
    const pb_profile *p = c->p;

    for (size_t i = 0; i < p->n_function; i++) {
        const pb_function *f = p->function[i];
        if (!str_ok(c, f->name))
            return bad_str(c, "function", f->id, "name", f->name);
        if (!str_ok(c, f->system_name))
            return bad_str(c, "function", f->id, "system_name",
                           f->system_name);
        if (!str_ok(c, f->filename))
            return bad_str(c, "function", f->id, "filename", f->filename);
    }
    return idmap_build(&c->funcs, p, p->n_function, function_id, "function",
                       c->origin);
}

/* Checks location L and rewrites its mapping id to a position plus one and
** its lines' function ids to positions. */
static int check_location(pctx *c, pb_location *l)
{
    long m = l->mapping_id != 0 ? idmap_get(&c->maps, l->mapping_id) : -1;

    if (l->mapping_id != 0 && m < 0)
        return em_err(EMBER_EINVAL, "%s: location %" PRIu64 " refers to "
                      "missing mapping %" PRIu64, c->origin, l->id,
                      l->mapping_id);
    if (l->n_line > EM_PSET_MAX_LINES)
        return em_err(EMBER_ELIMIT, "%s: location %" PRIu64 " has %zu lines "
                      "(at most %u inline frames)", c->origin, l->id,
                      l->n_line, EM_PSET_MAX_LINES);
    for (size_t k = 0; k < l->n_line; k++) {
        long f = idmap_get(&c->funcs, l->line[k]->function_id);
        if (f < 0)
            return em_err(EMBER_EINVAL, "%s: location %" PRIu64 " refers to "
                          "missing function %" PRIu64, c->origin, l->id,
                          l->line[k]->function_id);
        l->line[k]->function_id = (uint64_t)f;
    }
    l->mapping_id = (uint64_t)(m + 1);
    return EMBER_OK;
}

static int check_locations(pctx *c)
{
    int rc = idmap_build(&c->locs, c->p, c->p->n_location, location_id,
                         "location", c->origin);

    for (size_t i = 0; i < c->p->n_location && rc == EMBER_OK; i++)
        rc = check_location(c, c->p->location[i]);
    return rc;
}

/* ---- pass 2: label sets ------------------------------------------------- */

/* The offset in keys of the sanitized name of string KEY. */
static int key_name(pctx *c, int64_t key, uint32_t *off)
{
    char name[EM_LABEL_NAME_BUF];
    const char *raw = S(c, key);
    int rc;

    if (c->key_name == NULL &&
        (rc = alloc_array(c, &c->key_name, c->p->n_string_table + 1,
                          sizeof *c->key_name, "label keys")) != EMBER_OK)
        return rc;
    if (c->key_name[key] == 0) {
        uint32_t at = (uint32_t)c->keys.len;
        /* sanitize keeps at most 64 bytes: read no more of a long key */
        em_label_name_sanitize(raw, strnlen(raw, 64), name);
        if (c->keys.len >= UINT32_MAX - EM_LABEL_NAME_BUF)
            return em_err(EMBER_ELIMIT, "%s: too many label keys", c->origin);
        if ((rc = em_buf_put(&c->keys, name, strlen(name) + 1)) != EMBER_OK)
            return em_err_prefix(rc, "%s", c->origin);
        c->key_name[key] = at + 1;
    }
    *off = c->key_name[key] - 1;
    return EMBER_OK;
}

/* Writes V in decimal ending at END; returns where it starts. (snprintf
** was a tenth of the time of a heap profile, one number per sample.) */
static char *put_decimal(char *end, int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--end = '-';
    return end;
}

/* Appends string V to cur, at most one byte more than a value may hold:
** enough to tell it is too long without reading a hostile megabyte per
** sample. */
static int put_str(pctx *c, const char *v)
{
    return em_buf_put(&c->cur, v, strnlen(v, MAX_LABEL_VALUE + 1));
}

/* Appends the value of label L to cur. */
static int put_value(pctx *c, const pb_label *l)
{
    char num[24], *d;
    const char *unit = S(c, l->num_unit);
    int rc;

    if (l->str != 0)
        return put_str(c, S(c, l->str));
    d = put_decimal(num + sizeof num, l->num);
    rc = em_buf_put(&c->cur, d, (size_t)(num + sizeof num - d));
    if (rc == EMBER_OK && unit[0] != '\0') {
        rc = em_buf_put(&c->cur, " ", 1);
        if (rc == EMBER_OK)
            rc = put_str(c, unit);
    }
    return rc;
}

static int lab_cmp(const void *a, const void *b)
{
    const lab *x = a, *y = b;
    int d = strcmp(x->name, y->name);

    return d != 0 ? d : (x->ord > y->ord) - (x->ord < y->ord);
}

/* Sorts by name, keeping file order within a name (values join in it):
** insertion for the usual few labels, qsort for a hostile many. */
static void sort_labels(lab *l, size_t n)
{
    if (n > 8) {
        qsort(l, n, sizeof *l, lab_cmp);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        lab x = l[i];
        size_t j = i;
        for (; j > 0 && lab_cmp(&l[j - 1], &x) > 0; j--)
            l[j] = l[j - 1];
        l[j] = x;
    }
}

/* Collects sample SI's labels that carry a value into labs, stably sorted
** by sanitized key; *n gets their count. */
static int gather_labels(pctx *c, size_t si, const pb_sample *smp, size_t *n)
{
    size_t k = 0;

    if (smp->n_label > c->cap_labs) {
        em_free(c->labs);
        c->cap_labs = 0;
        c->labs = em_malloc(smp->n_label * sizeof *c->labs);
        if (c->labs == NULL)
            return em_err(EMBER_ENOMEM, "%s: out of memory for %zu labels",
                          c->origin, smp->n_label);
        c->cap_labs = smp->n_label;
    }
    for (size_t i = 0; i < smp->n_label; i++) {
        const pb_label *l = smp->label[i];
        lab *x = &c->labs[k];
        int rc;
        if (!str_ok(c, l->key))
            return bad_str(c, "sample", si, "label key", l->key);
        if (!str_ok(c, l->str))
            return bad_str(c, "sample", si, "label str", l->str);
        if (!str_ok(c, l->num_unit))
            return bad_str(c, "sample", si, "label num_unit", l->num_unit);
        if (l->str != 0 ? S(c, l->str)[0] == '\0'
                        : (l->num == 0 && l->num_unit == 0) ||
                          !c->o.numeric_labels)
            continue;           /* no value, or a number left out: absent */
        if ((rc = key_name(c, l->key, &x->key)) != EMBER_OK)
            return rc;
        x->ord = (uint32_t)k++;
        x->l = l;
    }
    for (size_t i = 0; i < k; i++)
        c->labs[i].name = (const char *)c->keys.p + c->labs[i].key;
    sort_labels(c->labs, k);
    *n = k;
    return EMBER_OK;
}

/* Writes the canonical bytes of labs[0..n) into cur, repeated keys joined;
** *nset gets the distinct keys. */
static int canon_labels(pctx *c, size_t si, size_t n, uint32_t *nset)
{
    int rc = EMBER_OK;

    c->cur.len = 0;
    *nset = 0;
    for (size_t i = 0; i < n && rc == EMBER_OK;) {
        const char *key = c->labs[i].name;
        size_t start;
        rc = em_buf_put(&c->cur, key, strlen(key) + 1);
        start = c->cur.len;
        /* Values never are empty, so a ',' goes before all but the first;
        ** the length is checked at each so a hostile repeat stops early. */
        for (; rc == EMBER_OK && i < n && strcmp(c->labs[i].name, key) == 0;
             i++) {
            if (c->cur.len > start)
                rc = em_buf_put(&c->cur, ",", 1);
            if (rc == EMBER_OK)
                rc = put_value(c, c->labs[i].l);
            if (rc == EMBER_OK && c->cur.len - start > MAX_LABEL_VALUE)
                return em_err(EMBER_ELIMIT, "%s: sample %zu: label %s: value "
                              "longer than %d bytes", c->origin, si, key,
                              MAX_LABEL_VALUE);
        }
        if (rc == EMBER_OK)
            rc = em_buf_put(&c->cur, "", 1);
        (*nset)++;
    }
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "%s", c->origin);
    if (*nset + c->o.nlabels > EM_PSET_MAX_LABELS)
        return em_err(EMBER_ELIMIT, "%s: sample %zu: %u labels and %zu of the "
                      "import's own (at most %u)", c->origin, si, *nset,
                      c->o.nlabels, EM_PSET_MAX_LABELS);
    return EMBER_OK;
}

/* Makes room for one more set: the array grows by doubling. */
static int sets_reserve(pctx *c)
{
    labset *np = em_grow(c->set, &c->cap_sets, c->nsets + 1, sizeof *np);

    if (np == NULL)
        return em_err(EMBER_ENOMEM, "%s: out of memory for %zu label sets",
                      c->origin, c->nsets + 1);
    c->set = np;
    return EMBER_OK;
}

/* The id of the set in cur (N labels), added when new. */
static int set_intern(pctx *c, uint32_t n, uint32_t *id)
{
    uint64_t h = em_hash64(c->cur.p, c->cur.len, 0x6c6162);
    struct em_hslot *sl;
    bool found;
    int rc = sets_reserve(c);

    if (rc != EMBER_OK)
        return rc;
    if ((sl = set_ix_insert(&c->set_index, h, c, &found)) == NULL)
        return em_err(EMBER_ENOMEM, "%s: out of memory for %zu label sets",
                      c->origin, c->nsets);
    if (found) {
        *id = sl->idx1 - 1;
        return EMBER_OK;
    }
    c->set[c->nsets] = (labset){ c->sets.len, c->cur.len, n, h };
    if ((rc = em_buf_put(&c->sets, c->cur.p, c->cur.len)) != EMBER_OK)
        return em_err_prefix(rc, "%s", c->origin);
    *sl = (struct em_hslot){ h, (uint32_t)c->nsets + 1 };
    *id = (uint32_t)c->nsets++;
    return EMBER_OK;
}

/* Reduces sample SI's labels to a set id in sample_set. */
static int sample_labels(pctx *c, size_t si, const pb_sample *smp)
{
    size_t n = 0;
    uint32_t nset, id;
    int rc = gather_labels(c, si, smp, &n);

    if (rc != EMBER_OK || n == 0)
        return rc;
    if ((rc = canon_labels(c, si, n, &nset)) != EMBER_OK)
        return rc;
    if ((rc = set_intern(c, nset, &id)) != EMBER_OK)
        return rc;
    if (c->sample_set == NULL && id != 0 &&
        (rc = alloc_array(c, &c->sample_set, c->nsample,
                          sizeof *c->sample_set, "samples")) != EMBER_OK)
        return rc;
    if (c->sample_set != NULL)
        c->sample_set[si] = id;
    return EMBER_OK;
}

/* Unpacks the sample after *POS in the input (sample SI; *POS 0: the
** first) into c->sa, where it lives until the next call; *POS moves past
** it. Input unpacked whole has it at hand. */
static int sample_next(pctx *c, size_t *pos, size_t si, pb_sample **out)
{
    ProtobufCAllocator al = { arena_alloc, arena_nofree, &c->sa };
    const uint8_t *b = c->in;
    uint64_t tag = 0, size = 0;
    size_t at;

    if (c->kept != NULL) {
        *out = c->kept[si];
        return EMBER_OK;
    }
    if (*pos == 0)
        *pos = c->first;
    do {            /* split_samples checked the framing */
        const uint8_t *q = b + *pos;
        at = *pos;
        (void)em_varint_get(&q, b + c->inlen, &tag);
        *pos = (size_t)(q - b);
        (void)skip_value(b, c->inlen, pos, (unsigned)(tag & 7), &size);
    } while (tag != SAMPLE_KEY);
    arena_reset(&c->sa);
    *out = perftools__profiles__sample__unpack(&al, (size_t)size,
                                               b + *pos - size);
    if (*out == NULL && c->sa.failed)
        return em_err(EMBER_ENOMEM, "%s: out of memory unpacking sample %zu",
                      c->origin, si);
    if (*out == NULL)
        return em_err(EMBER_EINVAL, "%s: not a valid pprof protobuf (sample "
                      "%zu at byte %zu is malformed)", c->origin, si, at);
    return EMBER_OK;
}

/* Checks sample SI's stack and rewrites its location ids to positions. */
static int sample_locations(pctx *c, size_t si, pb_sample *smp)
{
    if (smp->n_location_id > EM_PSET_MAX_DEPTH)
        return em_err(EMBER_ELIMIT, "%s: sample %zu has %zu locations (at "
                      "most %u in one stack)", c->origin, si,
                      smp->n_location_id, EM_PSET_MAX_DEPTH);
    for (size_t k = 0; k < smp->n_location_id; k++) {
        long pos = idmap_get(&c->locs, smp->location_id[k]);
        if (pos < 0)
            return em_err(EMBER_EINVAL, "%s: sample %zu refers to missing "
                          "location %" PRIu64, c->origin, si,
                          smp->location_id[k]);
        smp->location_id[k] = (uint64_t)pos;
    }
    return EMBER_OK;
}

/* Checks sample SI, rewrites its location ids to positions, reduces its
** labels. */
static int check_sample(pctx *c, size_t si, pb_sample *smp)
{
    size_t nz = 0;
    int rc;

    /* Here, not with the header: a sample that does not unpack is named
    ** first, as when the samples were unpacked with the rest. */
    if (c->p->n_sample_type == 0)
        return em_err(EMBER_EINVAL, "%s: %zu samples but no sample types",
                      c->origin, c->nsample);
    if (smp->n_value != c->p->n_sample_type)
        return em_err(EMBER_EINVAL, "%s: sample %zu has %zu values for %zu "
                      "sample types", c->origin, si, smp->n_value,
                      c->p->n_sample_type);
    if ((rc = sample_locations(c, si, smp)) != EMBER_OK)
        return rc;
    if (smp->n_location_id > c->depth)
        c->depth = smp->n_location_id;
    for (size_t t = 0; t < smp->n_value; t++)
        nz += smp->value[t] != 0;
    if (nz > 0) {               /* pass 3 adds its stack and NZ samples */
        c->nval += nz;
        c->nstk++;
        c->nfr += smp->n_location_id;
    }
    return smp->n_label > 0 ? sample_labels(c, si, smp) : EMBER_OK;
}

static int check_samples(pctx *c)
{
    int rc;

    /* Set 0 is the empty set, so unlabeled samples need no lookup. */
    c->cur.len = 0;
    if ((rc = em_buf_reserve(&c->cur, 64)) != EMBER_OK ||
        (rc = em_buf_reserve(&c->sets, 64)) != EMBER_OK)
        return em_err_prefix(rc, "%s", c->origin);
    if ((rc = set_intern(c, 0, &(uint32_t){ 0 })) != EMBER_OK)
        return rc;
    for (size_t i = 0, pos = 0; i < c->nsample && rc == EMBER_OK; i++) {
        pb_sample *smp;
        if ((rc = sample_next(c, &pos, i, &smp)) == EMBER_OK)
            rc = check_sample(c, i, smp);
    }
    return rc;
}

static int check_all(pctx *c)
{
    int rc = check_header(c);

    if (rc == EMBER_OK)
        rc = check_mappings(c);
    if (rc == EMBER_OK)
        rc = check_functions(c);
    if (rc == EMBER_OK)
        rc = check_locations(c);
    if (rc == EMBER_OK)
        rc = check_samples(c);
    c->ntypes = c->p->n_sample_type;
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->type_off, c->ntypes, sizeof *c->type_off,
                         "sample types");
    if (rc == EMBER_OK)
        rc = em_pprof_types(c->p, c->origin, c->o.name, &c->types,
                            c->type_off);
    return rc;
}

/* ---- pass 3: adding to the set ------------------------------------------ */

/* The set index plus one of mapping position plus one POS1 (0: none). */
static int add_mapping(pctx *c, uint64_t pos1, uint32_t *idx1)
{
    const pb_mapping *m;
    ember_mapping em;
    uint32_t idx;
    int rc;

    if (pos1 == 0 || c->map_idx[pos1 - 1] != 0) {
        *idx1 = pos1 == 0 ? 0 : c->map_idx[pos1 - 1];
        return EMBER_OK;
    }
    m = c->p->mapping[pos1 - 1];
    em = (ember_mapping){ m->memory_start, m->memory_limit, m->file_offset,
                          S(c, m->filename), S(c, m->build_id) };
    if ((rc = em_pset_mapping(c->s, &em, &idx)) != EMBER_OK)
        return em_err_prefix(rc, "%s", c->origin);
    *idx1 = c->map_idx[pos1 - 1] = idx + 1;
    return EMBER_OK;
}

/* The set index of function position POS. */
/* A function's hash in the set: its string-table indexes stand for its
** strings, since within one file equal indexes mean equal strings and the
** rare duplicate string only costs a duplicate set entry. */
static uint64_t function_key(const pb_function *f)
{
    uint64_t k[4] = { (uint64_t)f->name, (uint64_t)f->system_name,
                      (uint64_t)f->filename, (uint64_t)f->start_line };

    return em_hash64(k, sizeof k, 0x66756e63);
}

static int add_function(pctx *c, uint64_t pos, uint32_t *idx)
{
    const pb_function *f = c->p->function[pos];
    ember_function ef = { S(c, f->name), S(c, f->system_name),
                          S(c, f->filename), f->start_line };
    int rc;

    if (c->fn_idx[pos] != 0) {
        *idx = c->fn_idx[pos] - 1;
        return EMBER_OK;
    }
    if ((rc = em_pset_function_hashed(c->s, &ef, function_key(f), idx)) != 0)
        return em_err_prefix(rc, "%s", c->origin);
    c->fn_idx[pos] = *idx + 1;
    return EMBER_OK;
}

/* The set index of location position POS, with its mapping and functions. */
static int add_location(pctx *c, uint64_t pos, uint32_t *idx)
{
    const pb_location *l = c->p->location[pos];
    em_pset_line lines[EM_PSET_MAX_LINES];
    uint32_t m1 = 0;
    int rc;

    if (c->loc_idx[pos] != 0) {
        *idx = c->loc_idx[pos] - 1;
        return EMBER_OK;
    }
    for (size_t k = 0; k < l->n_line; k++) {
        if ((rc = add_function(c, l->line[k]->function_id,
                               &lines[k].function)) != EMBER_OK)
            return rc;
        lines[k].line = l->line[k]->line;
    }
    if ((rc = add_mapping(c, l->mapping_id, &m1)) != EMBER_OK)
        return rc;
    rc = em_pset_location(c->s, m1, l->address, lines, l->n_line, idx);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "%s", c->origin);
    c->loc_idx[pos] = *idx + 1;
    return EMBER_OK;
}

static int add_stack(pctx *c, const pb_sample *smp, uint32_t *idx)
{
    int rc;

    for (size_t k = 0; k < smp->n_location_id; k++)
        if ((rc = add_location(c, smp->location_id[k], &c->stack[k])) != 0)
            return rc;
    rc = em_pset_stack(c->s, c->stack, smp->n_location_id, idx);
    return rc == EMBER_OK ? rc : em_err_prefix(rc, "%s", c->origin);
}

/* The set index of the profile of label set SET and sample type T. */
static int add_profile(pctx *c, uint32_t set, size_t t, uint32_t *idx)
{
    uint32_t *slot = &c->prof[(size_t)set * c->ntypes + t];
    const labset *ls = &c->set[set];
    const char *q = (const char *)c->sets.p + ls->off;
    size_t nj;
    int rc;

    if (*slot != 0) {
        *idx = *slot - 1;
        return EMBER_OK;
    }
    for (uint32_t i = 0; i < ls->n; i++) {  /* "name\0value\0" pairs */
        c->extra[i].name = q;
        q += strlen(q) + 1;
        c->extra[i].value = q;
        q += strlen(q) + 1;
    }
    rc = em_labels_join(c->s, c->o.labels, c->o.nlabels, c->extra, ls->n,
                        c->joined, &nj);
    if (rc == EMBER_OK)
        rc = em_pset_profile_add(c->s, (const char *)c->types.p +
                                 c->type_off[t], c->joined, nj, c->time_ms,
                                 c->duration_ns, c->period, idx);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "%s", c->origin);
    *slot = *idx + 1;
    return EMBER_OK;
}

/* The scratch and caches of pass 3. */
static int add_prepare(pctx *c)
{
    const pb_profile *p = c->p;
    size_t depth = c->depth > 0 ? c->depth : 1;
    int rc;

    if (c->ntypes > 0 && c->nsets > SIZE_MAX / sizeof *c->prof / c->ntypes)
        return em_err(EMBER_ENOMEM, "%s: %zu label sets of %zu types",
                      c->origin, c->nsets, c->ntypes);
    rc = alloc_array(c, &c->map_idx, p->n_mapping, sizeof *c->map_idx,
                     "mappings");
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->fn_idx, p->n_function, sizeof *c->fn_idx,
                         "functions");
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->loc_idx, p->n_location, sizeof *c->loc_idx,
                         "locations");
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->prof, c->nsets * c->ntypes, sizeof *c->prof,
                         "profiles");
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->stack, depth, sizeof *c->stack, "frames");
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->extra, EM_PSET_MAX_LABELS, sizeof *c->extra,
                         "labels");
    if (rc == EMBER_OK)
        rc = alloc_array(c, &c->joined, EM_PSET_MAX_LABELS + c->o.nlabels,
                         sizeof *c->joined, "labels");
    if (rc == EMBER_OK &&
        (rc = em_pset_reserve(c->s, c->nstk, c->nfr, c->nval)) != EMBER_OK)
        rc = em_err_prefix(rc, "%s", c->origin);
    return rc;
}

/* Adds every sample's nonzero values (zeros add nothing to a merge and
** Parca skips them too) to the profile of its type and label set. */
static int add_samples(pctx *c)
{
    int rc = add_prepare(c);

    for (size_t i = 0, pos = 0; i < c->nsample && rc == EMBER_OK; i++) {
        pb_sample *smp;
        uint32_t set = c->sample_set != NULL ? c->sample_set[i] : 0;
        uint32_t stack = 0, prof;
        bool have_stack = false;
        if (c->kept != NULL)       /* its location ids are positions */
            smp = c->kept[i];
        else if ((rc = sample_next(c, &pos, i, &smp)) != EMBER_OK ||
                 (rc = sample_locations(c, i, smp)) != EMBER_OK)
            break;
        for (size_t t = 0; t < c->ntypes && rc == EMBER_OK; t++) {
            if (smp->value[t] == 0)
                continue;
            if (!have_stack && (rc = add_stack(c, smp, &stack)) != EMBER_OK)
                break;
            have_stack = true;
            rc = add_profile(c, set, t, &prof);
            if (rc == EMBER_OK &&
                (rc = em_pset_sample(c->s, prof, stack, smp->value[t])) != 0)
                rc = em_err_prefix(rc, "%s", c->origin);
        }
    }
    return rc;
}

/* ---- entry -------------------------------------------------------------- */

int em_pprof_decode(const void *buf, size_t len, const em_import_opts *opts,
                    em_pset *out)
{
    pctx c = { .sa = { NULL, ARENA_MIN, false } };
    arena a = { NULL, len < ARENA_MIN / 2 ? ARENA_MIN
                      : len > ARENA_FIRST_MAX / 2 ? ARENA_FIRST_MAX : 2 * len,
                false };
    int rc = em_import_opts_norm(opts, &c.o);

    if (rc != EMBER_OK)
        return rc;
    c.origin = c.o.origin;
    c.s = out;
    rc = unpack(&c, &a, buf, len);
    if (rc == EMBER_OK)
        rc = check_all(&c);
    if (rc == EMBER_OK) {
        const pb_profile *p = c.p;
        c.time_ms = p->time_nanos != 0 ? p->time_nanos / 1000000 : c.o.time_ms;
        c.duration_ns = p->duration_nanos != 0 ? p->duration_nanos
                                               : c.o.duration_ns;
        c.period = p->period != 0 ? p->period : c.o.period;
        rc = add_samples(&c);
    }
    pctx_free(&c);
    arena_release(&a);
    return rc;
}
