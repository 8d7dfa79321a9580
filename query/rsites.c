/*
** query/rsites.c: the sites behind a resolved profile's names, and
** granularities (pprof's -granularity: functions, filefunctions, files,
** lines, addresses).
**
** A profile built with sites (em_rprofile_build_at, EM_GRAN_ADDRESSES)
** names every line of every location on its own, and keeps per name the
** site it stands for: the function, the source file, the line, the
** address and the mapping's file. Filters then match the function
** (em_rprofile_fname), as pprof's filters run before it aggregates, and
** at the end em_rprofile_regranulate renames the frames to the asked
** granularity, merging the sites it does not tell apart, as pprof's
** profile.Aggregate does before its graph is built.
**
** A name at a granularity is pprof's NodeInfo.PrintableName of the node:
** "%016x" of the address (addresses only), the function name (but for
** files), then "file:line" (lines, addresses), the file (filefunctions,
** files), or when neither is known "[mapping file's base name]" or
** "<unknown>", joined by spaces. A location without lines has no
** function: at granularity functions it keeps Ember's own name for it,
** "0x4011a0 in libc.so.6", which is also what filters match.
*/
#include <inttypes.h>
#include <stdio.h>

#include "query/query_int.h"

static const char *const gran_names[EM_GRAN_COUNT_] = {
    [EM_GRAN_FUNCTIONS] = "functions",
    [EM_GRAN_FILEFUNCTIONS] = "filefunctions",
    [EM_GRAN_FILES] = "files",
    [EM_GRAN_LINES] = "lines",
    [EM_GRAN_ADDRESSES] = "addresses",
};

int em_gran_parse(const char *name)
{
    for (int g = 0; g < EM_GRAN_COUNT_; g++)
        if (strcmp(gran_names[g], name) == 0)
            return g;
    return -1;
}

const char *em_gran_name(int gran)
{
    return gran >= 0 && gran < EM_GRAN_COUNT_ ? gran_names[gran] : "?";
}

/* ---- names --------------------------------------------------------------------------- */

static const char *src(const em_rprofile *p, uint32_t id)
{
    return id != EM_RSITE_NONE ? em_strtab_get(&p->srcs, id) : "";
}

/* S with the fields GRAN does not keep dropped. */
static em_rsite site_at(em_rsite s, int gran)
{
    if (gran != EM_GRAN_ADDRESSES)
        s.address = 0;
    if (gran != EM_GRAN_LINES && gran != EM_GRAN_ADDRESSES)
        s.line = s.start = 0;
    if (gran == EM_GRAN_FUNCTIONS)
        s.file = EM_RSITE_NONE;
    if (gran == EM_GRAN_FILES) {
        s.fn = EM_RSITE_NONE;
        s.flags &= ~EM_RSITE_NAMED;
    }
    return s;
}

/* The name of site S (of P, already cut to GRAN) into B, NUL-terminated. */
static int site_name(const em_rprofile *p, const em_rsite *s, int gran,
                     em_buf *b)
{
    bool named = (s->flags & EM_RSITE_NAMED) != 0;
    char tmp[48];
    int rc = EMBER_OK;

    b->len = 0;
    if (gran == EM_GRAN_FUNCTIONS)
        return em_buf_put(b, src(p, s->fn), strlen(src(p, s->fn)) + 1);
    if (s->address != 0) {
        snprintf(tmp, sizeof tmp, "%016" PRIx64 " ", s->address);
        rc = em_buf_put(b, tmp, strlen(tmp));
    }
    if (rc == EMBER_OK && named && s->fn != EM_RSITE_NONE) {
        rc = em_buf_put(b, src(p, s->fn), strlen(src(p, s->fn)));
        if (rc == EMBER_OK)
            rc = em_buf_put(b, " ", 1);
    }
    if (rc == EMBER_OK && s->line != 0) {
        snprintf(tmp, sizeof tmp, ":%" PRId64, s->line);
        if ((rc = em_buf_put(b, src(p, s->file),
                             strlen(src(p, s->file)))) == EMBER_OK)
            rc = em_buf_put(b, tmp, strlen(tmp));
    } else if (rc == EMBER_OK && s->file != EM_RSITE_NONE) {
        rc = em_buf_put(b, src(p, s->file), strlen(src(p, s->file)));
    } else if (rc == EMBER_OK && named && s->fn != EM_RSITE_NONE) {
        b->len--;                       /* the function alone: no space */
    } else if (rc == EMBER_OK && s->obj != EM_RSITE_NONE) {
        if ((rc = em_buf_put(b, "[", 1)) == EMBER_OK &&
            (rc = em_buf_put(b, src(p, s->obj),
                             strlen(src(p, s->obj)))) == EMBER_OK)
            rc = em_buf_put(b, "]", 1);
    } else if (rc == EMBER_OK) {
        rc = em_buf_put(b, "<unknown>", 9);
    }
    return rc == EMBER_OK ? em_buf_put(b, "", 1) : rc;
}

/* Records site S for name ID of P, which is new. */
static int site_set(em_rprofile *p, uint32_t id, const em_rsite *s)
{
    if (id >= p->cap_sites) {
        em_rsite *g = em_grow(p->sites, &p->cap_sites, (size_t)id + 1,
                              sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "profile: %u sites", id + 1);
        p->sites = g;
    }
    p->sites[id] = *s;
    return EMBER_OK;
}

/* *ID: the name id of S at GRAN in P (S's strings in P->srcs). */
static int site_intern(em_rprofile *p, const em_rsite *s, int gran,
                       em_buf *b, uint32_t *id)
{
    uint32_t before = p->names.count;
    int rc = site_name(p, s, gran, b);

    if (rc == EMBER_OK)
        rc = em_strtab_intern(&p->names, (const char *)b->p, b->len - 1, id);
    if (rc == EMBER_OK && p->names.count > before)
        rc = site_set(p, *id, s);
    return rc;
}

int em_rprofile_site(em_rprofile *p, const em_rsite *s, uint32_t *id)
{
    em_rsite cut = site_at(*s, p->granularity);
    em_buf b = { 0 };
    int rc = site_intern(p, &cut, p->granularity, &b, id);

    em_buf_free(&b);
    return rc;
}

const char *em_rprofile_fname(const em_rprofile *p, uint32_t id)
{
    if (p->sites != NULL && p->sites[id].fn != EM_RSITE_NONE)
        return em_strtab_get(&p->srcs, p->sites[id].fn);
    return em_strtab_get(&p->names, id);
}

/* ---- copying and coarsening ----------------------------------------------------------- */

/* *TO gets the id in DST->srcs of FROM in SRC->srcs. */
static int src_copy(em_rprofile *dst, const em_rprofile *src, uint32_t from,
                    uint32_t *to)
{
    const char *s;

    *to = EM_RSITE_NONE;
    if (from == EM_RSITE_NONE)
        return EMBER_OK;
    s = em_strtab_get(&src->srcs, from);
    return em_strtab_intern(&dst->srcs, s, strlen(s), to);
}

int em_rprofile_copy_name(em_rprofile *dst, const em_rprofile *src,
                          uint32_t id, uint32_t *out)
{
    const char *name = em_strtab_get(&src->names, id);
    uint32_t before = dst->names.count;
    em_rsite s;
    int rc = em_strtab_intern(&dst->names, name, strlen(name), out);

    if (rc != EMBER_OK || src->sites == NULL || dst->names.count == before)
        return rc;
    dst->granularity = src->granularity;
    s = src->sites[id];
    if ((rc = src_copy(dst, src, s.fn, &s.fn)) == EMBER_OK &&
        (rc = src_copy(dst, src, s.file, &s.file)) == EMBER_OK &&
        (rc = src_copy(dst, src, s.obj, &s.obj)) == EMBER_OK)
        rc = site_set(dst, *out, &s);
    return rc;
}

/* The new name ids of P's names at GRAN into MAP, interned in TMP's
** names with their cut sites (P's srcs are kept). Names no frame uses
** (a filter took them away) are left out. */
static int names_at(em_rprofile *p, int gran, em_rprofile *tmp,
                    uint32_t *map)
{
    em_buf b = { 0 };
    int rc = EMBER_OK;

    memset(map, 0xff, p->names.count * sizeof *map);
    for (size_t i = 0; i < p->nframes; i++)
        map[p->frames[i].fn] = 0;       /* p's frames are all live */
    tmp->srcs = p->srcs;                /* borrowed for the names */
    for (uint32_t id = 0; id < p->names.count && rc == EMBER_OK; id++) {
        em_rsite cut = site_at(p->sites[id], gran);
        if (map[id] == 0)
            rc = site_intern(tmp, &cut, gran, &b, &map[id]);
    }
    memset(&tmp->srcs, 0, sizeof tmp->srcs);
    em_buf_free(&b);
    return rc;
}

/* Packs P's frames so that the stacks' slices follow one another: hide,
** show and callers leave frames no stack uses in between. Slices are in
** stack order (em_rprofile_add appends), so a move never overwrites a
** slice not moved yet. */
static void frames_pack(em_rprofile *p)
{
    size_t w = 0;

    for (size_t i = 0; i < p->nstacks; i++) {
        em_rstack *s = &p->stacks[i];
        memmove(p->frames + w, p->frames + s->first,
                s->nframes * sizeof *p->frames);
        s->first = w;
        w += s->nframes;
    }
    p->nframes = w;
}

int em_rprofile_regranulate(em_rprofile *p, int gran)
{
    em_rprofile tmp = { .granularity = gran };
    uint32_t *map;
    int rc;

    if (p->sites == NULL || gran == p->granularity)
        return EMBER_OK;
    frames_pack(p);
    if ((map = em_malloc(p->names.count * sizeof *map + 1)) == NULL)
        return em_err(EMBER_ENOMEM, "profile: %u names", p->names.count);
    rc = names_at(p, gran, &tmp, map);
    if (rc == EMBER_OK) {
        for (size_t i = 0; i < p->nframes; i++)
            p->frames[i].fn = map[p->frames[i].fn];
        em_strtab_free(&p->names);
        em_free(p->sites);
        p->names = tmp.names;
        p->sites = tmp.sites;
        p->cap_sites = tmp.cap_sites;
        p->granularity = gran;
        tmp.names = (em_strtab){ 0 };
        tmp.sites = NULL;
    }
    if (rc == EMBER_OK && gran == EM_GRAN_FUNCTIONS) {
        em_free(p->sites);              /* names are function names again */
        p->sites = NULL;
        p->cap_sites = 0;
        em_strtab_free(&p->srcs);
    }
    em_strtab_free(&tmp.names);
    em_free(tmp.sites);
    em_free(map);
    return rc;
}

/* ---- source file names ---------------------------------------------------------------- */

/* Go's filepath.Clean of the N bytes at P into OUT (room for N + 2). */
static size_t clean(const char *p, size_t n, char *out)
{
    bool rooted = n > 0 && p[0] == '/';
    size_t r = rooted, w = 0, floor = 0;   /* floor: what .. cannot undo */

    if (rooted) {
        out[w++] = '/';
        floor = 1;
    }
    while (r < n) {
        size_t e = r;
        while (e < n && p[e] != '/')
            e++;
        if (e == r || (e - r == 1 && p[r] == '.')) {
            r = e + 1;                  /* an empty or "." element */
            continue;
        }
        if (e - r == 2 && p[r] == '.' && p[r + 1] == '.') {
            if (w > floor) {            /* back over the last element */
                while (w > floor && out[w - 1] != '/')
                    w--;
                w -= w > floor;
            } else if (!rooted) {       /* a leading .. stays */
                if (w > 0)
                    out[w++] = '/';
                memcpy(out + w, "..", 2);
                w += 2;
                floor = w;
            }
            r = e + 1;
            continue;
        }
        if (w > (rooted ? 1u : 0u))
            out[w++] = '/';
        memcpy(out + w, p + r, e - r);
        w += e - r;
        r = e + 1;
    }
    if (w == 0)
        out[w++] = '.';
    out[w] = '\0';
    return w;
}

char *em_path_clean(const char *path)
{
    static const char *const trims[] = { "/proc/self/cwd/./",
                                         "/proc/self/cwd/" };
    size_t n;
    char *out;

    for (size_t i = 0; i < EM_ARRAY_LEN(trims); i++)
        if (strncmp(path, trims[i], strlen(trims[i])) == 0) {
            path += strlen(trims[i]);
            break;
        }
    n = strlen(path);
    if ((out = em_malloc(n + 3)) == NULL) {
        em_err(EMBER_ENOMEM, "profile: file name of %zu bytes", n);
        return NULL;
    }
    clean(path, n, out);
    return out;
}
