/*
** query/render_api.c: ember_result_render, the renderers of `ember query -o`
** for embedders. The text goes through a FILE (fopencookie) into an em_buf,
** so that its memory is Ember's (em_malloc: the OOM tests reach it, and the
** caller frees it with ember_free) and the renderers stream as they do to a
** terminal.
*/
#include <errno.h>
#include <stdio.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "query/query.h"

/* The cookie write: ENOMEM when the buffer cannot grow. */
static ssize_t buf_write(void *cookie, const char *p, size_t n)
{
    if (em_buf_put(cookie, p, n) != EMBER_OK) {
        errno = ENOMEM;
        return -1;
    }
    return (ssize_t)n;
}

/* Copies the public OPTS (NULL: defaults) into the renderers' options.
** No database: a query's result renders from what it holds and the handle
** it ran on (query/render.c). */
static int opts_from(const ember_render_opts *opts, em_render_opts *o)
{
    ember_render_opts p = { 0 };

    if (opts != NULL) {
        if (opts->sz == 0)
            return em_err(EMBER_EINVAL, "render options: sz is not set");
        memcpy(&p, opts, opts->sz < sizeof p ? opts->sz : sizeof p);
    }
    *o = (em_render_opts){ .sz = sizeof *o, .limit = p.limit,
                           .cum_sort = p.cum_sort != 0, .unit = p.unit,
                           .width = p.width, .relative = p.relative != 0 };
    return EMBER_OK;
}

EMBER_API int ember_result_render(ember_db *db, const ember_result *r,
                                  const char *format,
                                  const ember_render_opts *opts, char **out,
                                  size_t *len)
{
    cookie_io_functions_t io = { .write = buf_write };
    em_buf b = { 0 };
    em_render_opts o;
    FILE *f = NULL;
    int rc;

    (void)db;                           /* kept for the ABI: see ember.h */
    *out = NULL;
    *len = 0;
    if (r == NULL || format == NULL)
        return em_err(EMBER_EINVAL, "render: no %s",
                      r == NULL ? "result" : "format");
    rc = opts_from(opts, &o);
    if (rc == EMBER_OK && (f = fopencookie(&b, "w", io)) == NULL)
        rc = em_err(EMBER_ENOMEM, "render: output stream");
    if (rc == EMBER_OK)
        rc = em_render_result(f, r, format, &o);
    if (f != NULL && fclose(f) != 0 && rc == EMBER_OK)
        rc = em_err(EMBER_ENOMEM, "render: out of memory for the output");
    if (rc == EMBER_OK)
        rc = em_buf_put(&b, "", 1);     /* a NUL after the text */
    if (rc != EMBER_OK) {
        em_buf_free(&b);
        return rc;
    }
    *out = (char *)b.p;
    *len = b.len - 1;
    return EMBER_OK;
}
