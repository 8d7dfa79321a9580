/*
** query/rprofile.c: the resolved profile's storage, independent of the
** engine so that renderers can be tested on hand-built profiles (the
** engine-facing builder is rbuild.c, the sites of names rsites.c). Frames
** of all stacks share one array; a stack is a (first, nframes) slice of
** it, leaf first.
*/
#include "query/query_int.h"

/* Copies field K (0-based) of the colon-separated TYPE, or DEF when TYPE
** has fewer fields; lower-cased when LOWER (pprof lower-cases units). */
static char *type_field(const char *type, unsigned k, const char *def,
                        bool lower)
{
    const char *s = type, *end;
    char *out;

    for (unsigned i = 0; s != NULL && i < k; i++) {
        s = strchr(s, ':');
        s = s != NULL ? s + 1 : NULL;
    }
    if (s == NULL || *s == '\0' || *s == ':')
        return em_strdup(def);
    end = strchr(s, ':');
    out = em_strndup(s, end != NULL ? (size_t)(end - s) : strlen(s));
    for (char *c = out; lower && c != NULL && *c != '\0'; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c + 32);
    return out;
}

int em_rprofile_init(em_rprofile *p, const char *type)
{
    memset(p, 0, sizeof *p);
    /* name:sample_type:sample_unit:period_type:period_unit[:delta] */
    p->sample_type = type_field(type != NULL ? type : "", 1, "", false);
    p->unit = type_field(type != NULL ? type : "", 2, "count", true);
    if (p->sample_type == NULL || p->unit == NULL)
        return em_err(EMBER_ENOMEM, "profile: type strings");
    return EMBER_OK;
}

void em_rprofile_free(em_rprofile *p)
{
    if (p == NULL)
        return;
    em_strtab_free(&p->names);
    em_strtab_free(&p->srcs);
    em_free(p->sites);
    em_free(p->frames);
    em_free(p->stacks);
    em_free(p->sample_type);
    em_free(p->unit);
    memset(p, 0, sizeof *p);
}

int em_rprofile_reserve(em_rprofile *p, size_t nstacks, size_t nframes)
{
    if (nframes > SIZE_MAX / 2 / sizeof *p->frames - p->nframes ||
        nstacks > SIZE_MAX / 2 / sizeof *p->stacks - p->nstacks)
        return em_err(EMBER_ELIMIT, "profile: too many frames");
    if (p->nframes + nframes > p->cap_frames) {
        em_rframe *f = em_grow(p->frames, &p->cap_frames,
                               p->nframes + nframes, sizeof *f);
        if (f == NULL)
            return em_err(EMBER_ENOMEM, "profile: %zu frames",
                          p->nframes + nframes);
        p->frames = f;
    }
    if (p->nstacks + nstacks > p->cap_stacks) {
        em_rstack *s = em_grow(p->stacks, &p->cap_stacks,
                               p->nstacks + nstacks, sizeof *s);
        if (s == NULL)
            return em_err(EMBER_ENOMEM, "profile: %zu stacks",
                          p->nstacks + nstacks);
        p->stacks = s;
    }
    return EMBER_OK;
}

int em_rprofile_add(em_rprofile *p, const em_rframe *frames, size_t n,
                    int64_t value)
{
    int rc;

    for (size_t i = 0; i < n; i++)     /* renderers index names by fn */
        if (frames[i].fn >= p->names.count)
            return em_err(EMBER_EINVAL, "profile: frame %zu names function "
                          "%u of %u", i, frames[i].fn, p->names.count);
    if ((rc = em_rprofile_reserve(p, 1, n)) != EMBER_OK)
        return rc;
    if (n > 0)
        memcpy(p->frames + p->nframes, frames, n * sizeof *frames);
    p->stacks[p->nstacks++] = (em_rstack){ .first = p->nframes,
                                           .nframes = n, .value = value };
    p->nframes += n;
    return EMBER_OK;
}

int em_rprofile_add_diff(em_rprofile *p, const em_rframe *frames, size_t n,
                         int64_t base, int64_t target)
{
    int rc = em_rprofile_add(p, frames, n, target);

    if (rc == EMBER_OK) {
        p->stacks[p->nstacks - 1].base = base;
        p->diff = true;
    }
    return rc;
}
