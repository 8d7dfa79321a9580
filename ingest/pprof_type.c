/*
** ingest/pprof_type.c: the Ember profile type of each pprof sample type,
**
**     name:sample_type:sample_unit:period_type:period_unit[:delta]
**
** The name part follows Parca and Pyroscope, guessed from the whole file
** (first rule that matches):
**
**   process_cpu  period type "cpu", or a sample type cpu/nanoseconds
**                (Go: samples/count and cpu/nanoseconds, period cpu)
**   memory       a sample type alloc_* or inuse_*, or period type "space"
**   goroutine    a sample type "goroutine" or "goroutines"
**   mutex/block  a sample type "contentions" or "delay": Go writes its
**                mutex and block profiles with identical types
**                (contentions/count, delay/nanoseconds, period
**                contentions), so the origin's file name decides: one
**                holding "mutex" is mutex, anything else block (the
**                larger family: channel, select and mutex waits alike)
**   otherwise    the period type's type, else the sample type's own type
**
** The caller's name (ember import --name) replaces the guess. ":delta"
** marks values that cover only the profile's own duration, so a query sums
** them over time: only CPU profiles (the guess, not --name, decides). Go's
** alloc_* values are cumulative since the process started and inuse_*,
** goroutine counts are gauges, mutex/block are cumulative: their profiles
** are snapshots a query should not sum over time.
**
** A file without a period type (or with an empty one) gets the sample
** type's own type and unit as its period fields. Bytes the type syntax
** cannot hold (':', '{', '}', control bytes) become '_', and an empty field
** becomes "unknown", so every file yields a type em_profile_type_check
** accepts unless it is longer than the engine's 400 bytes.
*/
#include <stdbool.h>
#include <string.h>

#include "ingest/pprof_int.h"

typedef enum kind {
    KIND_OTHER, KIND_CPU, KIND_MEMORY, KIND_GOROUTINE, KIND_CONTENTION
} kind;

const char *em_pprof_str(const Perftools__Profiles__Profile *p, int64_t i)
{
    if (i <= 0 || (uint64_t)i >= p->n_string_table)
        return "";
    return p->string_table[i];
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* What one sample type says about the whole profile, or KIND_OTHER. */
static kind sample_kind(const Perftools__Profiles__Profile *p,
                        const Perftools__Profiles__ValueType *vt)
{
    const char *t = em_pprof_str(p, vt->type);

    if (strcmp(t, "cpu") == 0 &&
        strcmp(em_pprof_str(p, vt->unit), "nanoseconds") == 0)
        return KIND_CPU;
    if (starts(t, "alloc_") || starts(t, "inuse_"))
        return KIND_MEMORY;
    if (strcmp(t, "goroutine") == 0 || strcmp(t, "goroutines") == 0)
        return KIND_GOROUTINE;
    if (strcmp(t, "contentions") == 0 || strcmp(t, "delay") == 0)
        return KIND_CONTENTION;
    return KIND_OTHER;
}

/* The kind of the whole profile: the period type first, then the first
** sample type that says something, in the order of the rules above. */
static kind profile_kind(const Perftools__Profiles__Profile *p)
{
    const char *pt = p->period_type ? em_pprof_str(p, p->period_type->type)
                                    : "";
    kind best = KIND_OTHER;

    if (strcmp(pt, "cpu") == 0)
        return KIND_CPU;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        kind k = sample_kind(p, p->sample_type[i]);
        if (k != KIND_OTHER && (best == KIND_OTHER || k < best))
            best = k;
    }
    if (best == KIND_OTHER && strcmp(pt, "space") == 0)
        return KIND_MEMORY;
    return best;
}

/* "mutex" when the file name part of ORIGIN says so, else "block". */
static const char *contention_name(const char *origin)
{
    const char *base = strrchr(origin, '/');

    base = base ? base + 1 : origin;
    return strstr(base, "mutex") != NULL ? "mutex" : "block";
}

/* Appends S as one type field: forbidden bytes become '_', "" "unknown".
** A field past 400 bytes is cut at 401: the whole type then fails the
** length check without a hostile string being copied in full. */
static int put_field(em_buf *b, const char *s, bool colon)
{
    size_t n = strnlen(s, 401);
    int rc = em_buf_reserve(b, n + 16);

    if (rc != EMBER_OK)
        return rc;
    if (colon)
        b->p[b->len++] = ':';
    if (n == 0)
        return em_buf_put(b, "unknown", 7);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool bad = c < 0x20 || c == 0x7f || c == ':' || c == '{' || c == '}';
        b->p[b->len++] = bad ? '_' : c;
    }
    return EMBER_OK;
}

/* The period fields: the period type's, or when the file has none (or an
** empty one), the sample type's own. */
static void period_fields(const Perftools__Profiles__Profile *p,
                          const Perftools__Profiles__ValueType *vt,
                          const char **type, const char **unit)
{
    const Perftools__Profiles__ValueType *pt = p->period_type;

    if (pt == NULL || (em_pprof_str(p, pt->type)[0] == '\0' &&
                       em_pprof_str(p, pt->unit)[0] == '\0'))
        pt = vt;
    *type = em_pprof_str(p, pt->type);
    *unit = em_pprof_str(p, pt->unit);
}

/* The name part for sample type VT of a profile of kind K. */
static const char *guess_name(const Perftools__Profiles__Profile *p, kind k,
                              const Perftools__Profiles__ValueType *vt,
                              const char *origin)
{
    switch (k) {
    case KIND_CPU:
        return "process_cpu";
    case KIND_MEMORY:
        return "memory";
    case KIND_GOROUTINE:
        return "goroutine";
    case KIND_CONTENTION:
        return contention_name(origin);
    case KIND_OTHER:
        break;
    }
    if (p->period_type != NULL && em_pprof_str(p, p->period_type->type)[0])
        return em_pprof_str(p, p->period_type->type);
    return em_pprof_str(p, vt->type);
}

/* Writes one type string, NUL-terminated, at the end of B. */
static int one_type(const Perftools__Profiles__Profile *p, kind k,
                    const Perftools__Profiles__ValueType *vt,
                    const char *origin, const char *name, em_buf *b)
{
    const char *ptype, *punit;
    int rc;

    period_fields(p, vt, &ptype, &punit);
    rc = put_field(b, name ? name : guess_name(p, k, vt, origin), false);
    if (rc == EMBER_OK)
        rc = put_field(b, em_pprof_str(p, vt->type), true);
    if (rc == EMBER_OK)
        rc = put_field(b, em_pprof_str(p, vt->unit), true);
    if (rc == EMBER_OK)
        rc = put_field(b, ptype, true);
    if (rc == EMBER_OK)
        rc = put_field(b, punit, true);
    if (rc == EMBER_OK && k == KIND_CPU)
        rc = em_buf_put(b, ":delta", 6);
    if (rc == EMBER_OK)
        rc = em_buf_put(b, "", 1);
    return rc;
}

int em_pprof_types(const Perftools__Profiles__Profile *p, const char *origin,
                   const char *name, em_buf *buf, size_t *offs)
{
    kind k = profile_kind(p);

    for (size_t i = 0; i < p->n_sample_type; i++) {
        int rc;
        offs[i] = buf->len;
        rc = one_type(p, k, p->sample_type[i], origin, name, buf);
        if (rc == EMBER_OK)
            rc = em_profile_type_check((const char *)buf->p + offs[i]);
        if (rc != EMBER_OK)
            return em_err_prefix(rc, "%s: sample type %zu", origin, i);
    }
    return EMBER_OK;
}
