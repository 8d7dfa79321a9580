/*
** client/import.c: ember_client_import (one POST /api/v1/import) and
** ember_client_import_files, which walks paths with ember_import_files'
** walker (ingest/walk.c) and sends each file as one import, so each stays
** all or nothing on the server. A file's time, when its content has none,
** is found here as locally: the options' time, a unix-ms file name, else
** its mtime. A server that cannot be reached stops the walk: every file
** after would fail the same way.
*/
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "client/client.h"
#include "ingest/ingest.h"
#include "query/query.h"


static const char *const format_names[] = { "auto", "pprof", "collapsed",
                                            "perf" };

/* ---- one import ------------------------------------------------------------------- */

static int opts_params(em_buf *b, const ember_import_opts *o)
{
    char t[40], v[600];
    int rc = em_buf_put(b, "/api/v1/import", 14);

    if (o->format < 0 || o->format > 3)
        return em_err(EMBER_EINVAL, "import options: unknown format %d",
                      o->format);
    if (rc == EMBER_OK)
        rc = em_http_param(b, "format", format_names[o->format]);
    for (size_t i = 0; rc == EMBER_OK && i < o->nlabels; i++) {
        snprintf(v, sizeof v, "%s=%s", o->labels[i].name, o->labels[i].value);
        rc = em_http_param(b, "label", v);
    }
    if (rc == EMBER_OK && o->type != NULL)
        rc = em_http_param(b, "type", o->type);
    if (rc == EMBER_OK && o->name != NULL)
        rc = em_http_param(b, "name", o->name);
    if (rc == EMBER_OK && o->origin != NULL)    /* names it in messages */
        rc = em_http_param(b, "origin", o->origin);
    if (rc == EMBER_OK && (o->flags & EMBER_IMPORT_TIME))
        rc = em_http_param(b, "time", em_time_format(o->time_ms, t));
    if (rc == EMBER_OK && o->window_ms > 0) {
        snprintf(v, sizeof v, "%" PRId64 "ms", o->window_ms);
        rc = em_http_param(b, "window", v);
    }
    if (rc == EMBER_OK && (o->flags & EMBER_IMPORT_COMM))
        rc = em_http_param(b, "comm", "1");
    if (rc == EMBER_OK && (o->flags & EMBER_IMPORT_NUMERIC_LABELS))
        rc = em_http_param(b, "numeric_labels", "series");
    if (rc == EMBER_OK && o->max_bytes != 0) {
        snprintf(v, sizeof v, "%" PRIu64, o->max_bytes);
        rc = em_http_param(b, "max_size", v);
    }
    return rc == EMBER_OK ? em_buf_put(b, "", 1) : rc;
}

/* {"data":{"profiles":P,"samples":S,"bytes":B}} into ST. */
static int answer_read(const em_http_resp *r, ember_import_stats *st)
{
    json_object *o = NULL, *d = NULL, *v;
    json_tokener *tok = json_tokener_new();
    int rc = EMBER_OK;

    if (tok != NULL && r->body.len < INT32_MAX)
        o = json_tokener_parse_ex(tok, (const char *)r->body.p,
                                  (int)r->body.len);
    if (o == NULL || !json_object_object_get_ex(o, "data", &d))
        rc = em_err(EMBER_EIO, "server: an import answer without data");
    if (rc == EMBER_OK && json_object_object_get_ex(d, "profiles", &v))
        st->profiles = (uint64_t)json_object_get_uint64(v);
    if (rc == EMBER_OK && json_object_object_get_ex(d, "samples", &v))
        st->samples = (uint64_t)json_object_get_uint64(v);
    if (rc == EMBER_OK && json_object_object_get_ex(d, "bytes", &v))
        st->bytes = (uint64_t)json_object_get_uint64(v);
    st->read_samples = st->samples;
    st->read_bytes = st->bytes;
    json_object_put(o);
    if (tok != NULL)
        json_tokener_free(tok);
    return rc;
}

/* One import; *ANSWERED says whether the server gave an answer. */
static int import_one(ember_client *c, const void *buf, size_t len,
                      const ember_import_opts *o, ember_import_stats *st,
                      bool *answered)
{
    em_buf path = { 0 };
    em_http_resp resp = { 0 };
    int rc = opts_params(&path, o);

    *answered = false;
    if (rc == EMBER_OK)
        rc = em_http_do(em_client_http(c), (const char *)path.p,
                        buf != NULL ? buf : "", len, "application/octet-stream",
                        &resp);
    if (rc == EMBER_OK) {
        *answered = true;
        if (resp.status < 200 || resp.status > 299)
            rc = em_client_answer_error(c, &resp);
        else
            rc = answer_read(&resp, st);
    }
    em_http_resp_free(&resp);
    em_buf_free(&path);
    return rc;
}

static int opts_copy(const ember_import_opts *in, ember_import_opts *o)
{
    memset(o, 0, sizeof *o);
    if (in == NULL)
        return EMBER_OK;
    if (in->sz == 0)
        return em_err(EMBER_EINVAL, "import options: sz is not set");
    memcpy(o, in, in->sz < sizeof *o ? in->sz : sizeof *o);
    return EMBER_OK;
}

static void stats_out(ember_import_stats *out, const ember_import_stats *st)
{
    size_t sz;

    if (out == NULL || out->sz == 0)
        return;
    sz = out->sz < sizeof *st ? out->sz : sizeof *st;
    memcpy(out, st, sz);
    out->sz = sz;
}

EMBER_API int ember_client_import(ember_client *c, const void *buf,
                                  size_t len, const ember_import_opts *opts,
                                  ember_import_stats *stats)
{
    ember_import_stats st = { .sz = sizeof st, .files = 1 };
    ember_import_opts o;
    bool answered;
    int rc;

    em_err_clear();
    if (c == NULL || (buf == NULL && len > 0))
        return em_err(EMBER_EINVAL, "ember_client_import: NULL %s",
                      c == NULL ? "client" : "buffer");
    rc = opts_copy(opts, &o);
    if (rc == EMBER_OK)
        rc = import_one(c, buf, len, &o, &st, &answered);
    st.failed = rc != EMBER_OK;
    stats_out(stats, &st);
    return rc;
}

/* ---- walking paths ------------------------------------------------------------------- */

typedef struct walk {
    ember_client *c;
    ember_import_opts opts;
    ember_import_hooks hooks;
    ember_import_stats st;
    int first_rc;
    char *first_msg;
    bool stop;                  /* the server could not be reached */
} walk;

/* As ingest/import_driver.c reports: the message made to start with PATH,
** kept when it is the first failure, and handed to the hook. */
static void report(walk *w, const char *path, int rc)
{
    const char *msg = em_errmsg();

    if (strncmp(msg, path, strlen(path)) != 0)
        em_err_prefix(rc, "%s", path);
    msg = em_errmsg();
    if (w->first_rc == EMBER_OK) {
        w->first_rc = rc;
        w->first_msg = em_strdup(msg);
    }
    if (w->hooks.failed != NULL)
        w->hooks.failed(w->hooks.ctx, path, rc, msg);
}

static void walk_file(walk *w, const char *path, int fd,
                      const struct stat *st)
{
    ember_import_stats one = { .sz = sizeof one };
    ember_import_opts o = w->opts;
    bool answered = true;
    char *buf = NULL;
    size_t len = 0;
    int rc = em_walk_read(fd, st, &buf, &len);

    o.origin = path;
    if ((o.flags & EMBER_IMPORT_TIME) == 0)
        o.time_ms = em_walk_file_time(path, st);
    o.flags |= EMBER_IMPORT_TIME;
    if (rc == EMBER_OK)
        rc = import_one(w->c, buf, len, &o, &one, &answered);
    em_free(buf);
    w->st.files++;
    if (rc != EMBER_OK) {
        w->st.failed++;
        w->stop = !answered;
        report(w, path, rc);
        return;
    }
    w->st.profiles += one.profiles;
    w->st.samples += one.samples;
    w->st.bytes += one.bytes;
    w->st.read_samples += one.read_samples;
    w->st.read_bytes += one.read_bytes;
    if (w->hooks.progress != NULL)
        w->hooks.progress(w->hooks.ctx, &w->st);
}

static void on_file(void *ctx, const char *path, int fd,
                    const struct stat *st)
{
    walk_file(ctx, path, fd, st);
}

static void on_failed(void *ctx, const char *path, int rc, bool file)
{
    walk *w = ctx;

    w->st.files += file;
    w->st.failed += file;
    w->st.bad_paths += !file;
    report(w, path, rc);
}

static bool on_stop(void *ctx)
{
    return ((walk *)ctx)->stop;
}

static int walk_init(walk *w, ember_client *c, const ember_import_opts *opts,
                     const ember_import_hooks *hooks)
{
    em_buf probe = { 0 };
    int rc;

    w->c = c;
    w->st.sz = sizeof w->st;
    if (c == NULL)
        return em_err(EMBER_EINVAL, "import: no client");
    if (hooks != NULL) {
        if (hooks->sz == 0)
            return em_err(EMBER_EINVAL, "import hooks: sz is not set");
        memcpy(&w->hooks, hooks, hooks->sz < sizeof w->hooks
                                     ? hooks->sz : sizeof w->hooks);
    }
    if ((rc = opts_copy(opts, &w->opts)) != EMBER_OK)
        return rc;
    rc = opts_params(&probe, &w->opts);   /* bad options: before any file */
    em_buf_free(&probe);
    return rc;
}

EMBER_API int ember_client_import_files(ember_client *c,
                                        const char *const *paths, size_t n,
                                        const ember_import_opts *opts,
                                        const ember_import_hooks *hooks,
                                        ember_import_stats *stats)
{
    walk w = { 0 };
    int rc;

    em_err_clear();
    if (stats != NULL && stats->sz == 0)
        return em_err(EMBER_EINVAL, "import: stats sz is not set");
    rc = walk_init(&w, c, opts, hooks);
    if (rc == EMBER_OK && n > 0 && paths == NULL)
        rc = em_err(EMBER_EINVAL, "import: %zu paths but no path array", n);
    if (rc == EMBER_OK)
        em_walk_paths(&(em_walk_hooks){ .ctx = &w, .file = on_file,
                                        .failed = on_failed,
                                        .stop = on_stop }, paths, n);
    if (rc == EMBER_OK)
        rc = w.first_rc;
    if (rc != EMBER_OK && w.first_msg != NULL) {
        uint64_t more = w.st.failed + w.st.bad_paths - 1;
        if (more > 0)
            em_err(rc, "%s (and %" PRIu64 " more)", w.first_msg, more);
        else
            em_err(rc, "%s", w.first_msg);
    }
    stats_out(stats, &w.st);
    em_free(w.first_msg);
    return rc;
}
