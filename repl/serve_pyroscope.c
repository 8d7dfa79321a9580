/*
** repl/serve_pyroscope.c: Pyroscope's ingest endpoint, POST /ingest, so
** that the Pyroscope SDKs (Go, Node, Python, Ruby, .NET) and agents push to
** Ember with no code of ours (docs/protocol.md, "Pyroscope's ingest").
**
** The application name carries the labels: "APP[.KIND]{k=v,...}". APP
** becomes the label service_name, each k=v a label (a name with bytes a
** label name cannot hold, as the SDKs' "process.runtime.name", has them
** written '_'), spyName the label pyroscope_spy. The body goes through
** ember_import, all or nothing:
**
**   format=folded (the default)  "a;b;c 10" lines: collapsed stacks, the
**                                type by KIND (.cpu when there is none)
**   format=lines                 one stack per line, each counting 1
**   format=pprof                 profile.proto, gzipped or not, the raw
**                                body or a multipart field "profile"; the
**                                types come from its sample types
**
** from (unix seconds) is the profiles' time when the input has none.
**
** Cumulative profiles (issue 14): a pprof request may carry, as multipart
** fields beside "profile", the profile sent before it ("prev_profile")
** and a JSON "sample_type_config" saying which sample types are
** cumulative (without one, Pyroscope's Go defaults). Those types are
** stored as profile minus prev_profile per stack (em_import_delta), the
** rest as sent; a bad field refuses the whole request, naming it.
*/
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "ingest/ingest.h"
#include "query/query.h"
#include "repl/serve.h"

#define MAX_LABELS EM_MAX_CLI_LABELS
#define MAX_NAME 1024
#define MAX_STC_BYTES (64u << 10)   /* sample_type_config's JSON */
#define MAX_STC_TYPES 64u           /* sample types it may name */
#define STC_DEPTH 4                 /* {type: {member: value}} and room */

/* The type of folded input by the application name's KIND, as
** Pyroscope's legacy names mean them. Per-interval values are ":delta";
** in-use memory and goroutine counts are gauges. */
static const struct kind_type {
    const char *kind;
    const char *type;
} kinds[] = {
    { "cpu", "process_cpu:samples:count:cpu:nanoseconds:delta" },
    { "itimer", "process_cpu:samples:count:cpu:nanoseconds:delta" },
    { "wall", "wall:samples:count:wall:nanoseconds:delta" },
    { "alloc_objects", "memory:alloc_objects:count:space:bytes:delta" },
    { "alloc_space", "memory:alloc_space:bytes:space:bytes:delta" },
    { "inuse_objects", "memory:inuse_objects:count:space:bytes" },
    { "inuse_space", "memory:inuse_space:bytes:space:bytes" },
    { "goroutines", "goroutine:goroutine:count:goroutine:count" },
    { "mutex_count", "mutex:contentions:count:contentions:count:delta" },
    { "mutex_duration",
      "mutex:delay:nanoseconds:contentions:count:delta" },
    { "block_count", "block:contentions:count:contentions:count:delta" },
    { "block_duration",
      "block:delay:nanoseconds:contentions:count:delta" },
    { "lock_count", "mutex:contentions:count:contentions:count:delta" },
    { "lock_duration", "mutex:delay:nanoseconds:contentions:count:delta" },
    { "exceptions", "exceptions:samples:count:samples:count:delta" },
};

/* An application name taken apart; the strings point into BUF. */
typedef struct app_name {
    char buf[MAX_NAME + 1];
    const char *type;           /* folded input's type */
    ember_label labels[MAX_LABELS];
    size_t nlabels;
} app_name;

/* Writes '_' over each byte a label name may not hold. */
static void label_name_fix(char *s)
{
    for (size_t i = 0; s[i] != '\0'; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9')))
            s[i] = '_';
    }
}

/* Strips a known ".KIND" off APP, setting A's type. */
static void app_kind(app_name *a, char *app)
{
    char *dot = strrchr(app, '.');

    a->type = kinds[0].type;
    for (size_t i = 0; dot != NULL && i < EM_ARRAY_LEN(kinds); i++)
        if (strcmp(dot + 1, kinds[i].kind) == 0) {
            a->type = kinds[i].type;
            *dot = '\0';
            return;
        }
}

static int app_label(app_name *a, char *name, char *value)
{
    if (a->nlabels == MAX_LABELS)
        return em_err(EMBER_ELIMIT, "name: more than %d labels", MAX_LABELS);
    label_name_fix(name);
    a->labels[a->nlabels++] = (ember_label){ name, value };
    return EMBER_OK;
}

/* The "{k=v,...}" part at TAGS (after the '{'), in place. */
static int app_tags(app_name *a, char *tags)
{
    char *end = strrchr(tags, '}'), *save = NULL;

    if (end == NULL || end[1] != '\0')
        return em_err(EMBER_EINVAL, "name: the labels' '{' has no '}' at "
                      "the end");
    *end = '\0';
    for (char *kv = strtok_r(tags, ",", &save); kv != NULL;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        int rc;
        if (eq == NULL || eq == kv)
            return em_err(EMBER_EINVAL, "name: label \"%s\" is not k=v", kv);
        *eq = '\0';
        if ((rc = app_label(a, kv, eq + 1)) != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}

static int app_parse(app_name *a, const char *name, const char *spy)
{
    char *brace;
    int rc;

    if (name == NULL || name[0] == '\0')
        return em_err(EMBER_EINVAL, "name: the parameter is missing");
    if (strlen(name) > MAX_NAME)
        return em_err(EMBER_ELIMIT, "name: longer than %d bytes", MAX_NAME);
    memcpy(a->buf, name, strlen(name) + 1);
    if ((brace = strchr(a->buf, '{')) != NULL)
        *brace = '\0';
    app_kind(a, a->buf);
    if (a->buf[0] == '\0')
        return em_err(EMBER_EINVAL, "name: no application name before "
                      "the labels");
    if (brace != NULL && (rc = app_tags(a, brace + 1)) != EMBER_OK)
        return rc;
    if ((rc = app_label(a, "service_name", a->buf)) != EMBER_OK)
        return rc;
    if (spy != NULL && spy[0] != '\0' &&
        (rc = app_label(a, "pyroscope_spy", (char *)spy)) != EMBER_OK)
        return rc;
    return em_labels_check(a->labels, a->nlabels);
}

/* "lines": a stack per line, each one sample; made collapsed stacks. */
static int lines_to_collapsed(const em_buf *in, em_buf *out)
{
    const char *p = (const char *)in->p, *end = p + in->len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl != NULL ? nl : end) - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0 && (em_buf_put(out, p, n) || em_buf_put(out, " 1\n", 3)))
            return em_err(EMBER_ENOMEM, "lines: out of memory");
        p += (nl != NULL ? nl - p : end - p) + 1;
    }
    return EMBER_OK;
}

/* from: unix seconds, as Pyroscope sends it (milliseconds and nanoseconds
** also, told by size, as Pyroscope's own parser does). */
static int ingest_time(const char *from, ember_import_opts *o)
{
    char *end;
    long long v;

    if (from == NULL || from[0] == '\0')
        return EMBER_OK;
    errno = 0;
    v = strtoll(from, &end, 10);
    if (*end != '\0' || v < 0 || errno == ERANGE)
        return em_err(EMBER_EINVAL, "from=%s: expected unix seconds", from);
    o->time_ms = v >= 100000000000000LL ? v / 1000000
               : v >= 100000000000LL ? v : v * 1000;
    o->flags |= EMBER_IMPORT_TIME;
    return EMBER_OK;
}

static int ingest_format(const char *format, ember_import_opts *o,
                         bool *lines)
{
    *lines = false;
    if (format == NULL || strcmp(format, "folded") == 0) {
        o->format = EMBER_FORMAT_COLLAPSED;
    } else if (strcmp(format, "lines") == 0) {
        o->format = EMBER_FORMAT_COLLAPSED;
        *lines = true;
    } else if (strcmp(format, "pprof") == 0) {
        o->format = EMBER_FORMAT_PPROF;
        o->type = NULL;
    } else {
        return em_err(EMBER_EINVAL, "format=%s: Ember takes folded, lines "
                      "or pprof", format);
    }
    return EMBER_OK;
}

/* ---- sample_type_config ------------------------------------------------ */

/* sample_type_config, as Pyroscope's SDKs send it: a JSON object keyed by
** pprof sample type, each {"units", "display-name", "aggregation":
** strings, "cumulative", "sampled": booleans}. Only "cumulative" changes
** what Ember stores (the types come from the pprof itself), and a
** "display-name" of "mutex_..." tells a Go mutex profile from a block one
** (their sample types are the same); the rest is checked and kept by no
** one. The names point into JSON. */
typedef struct type_config {
    json_object *json;          /* NULL: no config was sent */
    const char *cum[MAX_STC_TYPES];
    size_t ncum;
    bool mutex;                 /* a display name says mutex */
} type_config;

static const struct stc_member {
    const char *name;
    json_type type;
} stc_members[] = {
    { "units", json_type_string },
    { "display-name", json_type_string },
    { "aggregation", json_type_string },
    { "cumulative", json_type_boolean },
    { "sampled", json_type_boolean },
};

/* One sample type's entry V, named NAME. */
static int stc_entry(type_config *tc, const char *name, json_object *v)
{
    json_object *m;

    if (!json_object_is_type(v, json_type_object))
        return em_err(EMBER_EINVAL, "sample_type_config: \"%.100s\": "
                      "expected an object", name);
    for (size_t i = 0; i < EM_ARRAY_LEN(stc_members); i++)
        if (json_object_object_get_ex(v, stc_members[i].name, &m) &&
            !json_object_is_type(m, stc_members[i].type) &&
            !json_object_is_type(m, json_type_null))
            return em_err(EMBER_EINVAL, "sample_type_config: \"%.100s\": "
                          "%s: expected a %s", name, stc_members[i].name,
                          stc_members[i].type == json_type_string
                          ? "string" : "boolean");
    if (json_object_object_get_ex(v, "cumulative", &m) &&
        json_object_get_boolean(m))
        tc->cum[tc->ncum++] = name;
    if (json_object_object_get_ex(v, "display-name", &m) &&
        json_object_is_type(m, json_type_string) &&
        strncmp(json_object_get_string(m), "mutex", 5) == 0)
        tc->mutex = true;
    return EMBER_OK;
}

/* Parses the N bytes at JSON, all of them one value, into TC->json. */
static int stc_json(type_config *tc, const char *json, size_t n)
{
    json_tokener *tok = json_tokener_new_ex(STC_DEPTH);
    size_t end;
    int rc = EMBER_OK;

    if (tok == NULL)
        return em_err(EMBER_ENOMEM, "sample_type_config: out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
                                JSON_TOKENER_VALIDATE_UTF8);
    tc->json = json_tokener_parse_ex(tok, json, (int)n);
    end = tc->json != NULL ? json_tokener_get_parse_end(tok) : n;
    while (end < n && strchr(" \t\r\n", json[end]) != NULL)
        end++;
    if (tc->json == NULL)
        rc = em_err(EMBER_EINVAL, "sample_type_config: %s",
                    json_tokener_get_error(tok) == json_tokener_continue
                    ? "the JSON ends inside its value"
                    : json_tokener_error_desc(json_tokener_get_error(tok)));
    else if (end < n)
        rc = em_err(EMBER_EINVAL, "sample_type_config: data after the "
                    "JSON value at byte %zu", end);
    json_tokener_free(tok);
    return rc;
}

/* The form field sample_type_config, if sent, into TC. */
static int stc_parse(const em_req *rq, type_config *tc)
{
    const em_buf *b = em_req_field(rq, "sample_type_config");
    int rc;

    if (b == NULL)
        return EMBER_OK;
    if (b->len > MAX_STC_BYTES)
        return em_err(EMBER_ELIMIT, "sample_type_config: over %u bytes",
                      MAX_STC_BYTES);
    if ((rc = stc_json(tc, b->p != NULL ? (const char *)b->p : "", b->len))
        != EMBER_OK)
        return rc;
    if (!json_object_is_type(tc->json, json_type_object))
        return em_err(EMBER_EINVAL, "sample_type_config: expected an object "
                      "keyed by sample type");
    if (json_object_object_length(tc->json) > (int)MAX_STC_TYPES)
        return em_err(EMBER_ELIMIT, "sample_type_config: more than %u "
                      "sample types", MAX_STC_TYPES);
    json_object_object_foreach(tc->json, name, v)
        if ((rc = stc_entry(tc, name, v)) != EMBER_OK)
            return rc;
    return EMBER_OK;
}

/* ---- the handler ---------------------------------------------------------- */

/* An /ingest request's parameters, decoded; the labels point into A. */
typedef struct ingest_req {
    app_name a;
    ember_import_opts o;
    bool lines;                 /* format=lines: made collapsed first */
    const em_buf *prev;         /* prev_profile's bytes, or NULL */
    type_config tc;
} ingest_req;

/* prev_profile, a form field of a pprof request, into IN->prev. */
static int prev_param(const em_req *rq, ingest_req *in)
{
    in->prev = em_req_field(rq, "prev_profile");
    if (in->prev == NULL && em_req_param(rq, "prev_profile") != NULL)
        return em_err(EMBER_EINVAL, "prev_profile: expected a field of a "
                      "multipart/form-data body");
    if (in->prev != NULL && in->o.format != EMBER_FORMAT_PPROF)
        return em_err(EMBER_EINVAL, "prev_profile: only with format=pprof");
    if (in->prev != NULL && in->prev->len == 0)
        return em_err(EMBER_EINVAL, "prev_profile: empty");
    return EMBER_OK;
}

/* Whether the pprof is Go's mutex profile rather than its block profile,
** which has the same sample types: the SDK's display names say so, or the
** name's KIND (mutex_count, ...). ingest/pprof_type.c reads "mutex" in
** the origin, as it reads a file's name. */
static bool ingest_mutex(const ingest_req *in)
{
    return in->tc.mutex ||
           (in->a.type != NULL && strncmp(in->a.type, "mutex:", 6) == 0);
}

/* RQ's parameters (query string or form fields) into IN. */
static int ingest_params(const em_req *rq, ingest_req *in)
{
    int rc = app_parse(&in->a, em_req_param(rq, "name"),
                       em_req_param(rq, "spyName"));

    if (rc != EMBER_OK)
        return rc;
    in->o = (ember_import_opts){ .sz = sizeof in->o, .origin = "ingest body",
                                 .type = in->a.type, .labels = in->a.labels,
                                 .nlabels = in->a.nlabels };
    rc = ingest_format(em_req_param(rq, "format"), &in->o, &in->lines);
    if (rc == EMBER_OK)
        rc = ingest_time(em_req_param(rq, "from"), &in->o);
    if (rc == EMBER_OK)
        rc = prev_param(rq, in);
    if (rc == EMBER_OK)
        rc = stc_parse(rq, &in->tc);
    if (ingest_mutex(in))
        in->o.origin = "ingest body (mutex)";
    return rc;
}

/* The body made deltas against prev_profile (ingest/pset_delta.c). */
static int ingest_delta(em_req *rq, const ingest_req *in, const em_buf *body)
{
    em_import_opts o = { .sz = sizeof o,
                         .origin = ingest_mutex(in) ? "profile (mutex)"
                                                    : "profile",
                         .labels = in->o.labels, .nlabels = in->o.nlabels,
                         .time_ms = in->o.time_ms,
                         .format = EM_FORMAT_PPROF };
    struct timespec ts;

    if ((in->o.flags & EMBER_IMPORT_TIME) == 0) {
        clock_gettime(CLOCK_REALTIME, &ts);
        o.time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    return em_import_delta(rq->srv->db, body->p, body->len, in->prev->p,
                           in->prev->len, ingest_mutex(in)
                           ? "prev_profile (mutex)" : "prev_profile",
                           in->tc.json != NULL ? in->tc.cum : NULL,
                           in->tc.ncum, &o, NULL);
}

int em_h_ingest(em_req *rq, em_resp *rs)
{
    ingest_req *in = em_calloc(1, sizeof *in);
    const em_buf *body = em_req_body(rq);
    em_buf conv = { 0 };
    int rc = in == NULL ? em_err(EMBER_ENOMEM, "out of memory")
                        : ingest_params(rq, in);

    if (rc == EMBER_OK && in->lines &&
        (rc = lines_to_collapsed(body, &conv)) == EMBER_OK)
        body = &conv;
    /* an empty body is an SDK's empty interval: nothing to do */
    if (rc == EMBER_OK && body->len > 0 && in->prev != NULL)
        rc = ingest_delta(rq, in, body);
    else if (rc == EMBER_OK && body->len > 0)
        rc = ember_import(rq->srv->db, body->p, body->len, &in->o, NULL);
    em_buf_free(&conv);
    if (in != NULL)
        json_object_put(in->tc.json);
    em_free(in);
    if (rc != EMBER_OK)
        return em_resp_ember(rs, rc);
    return EMBER_OK;            /* Pyroscope answers 200 with no body */
}
