/*
** repl/serve_pbjson.c: protobuf messages as JSON, protobuf's proto3 JSON
** mapping, for Connect calls whose Content-Type is application/json
** (docs/protocol.md, "Connect calls"). Both ways go through protoc-c's
** descriptors, so every message the server speaks is covered by these few
** functions rather than by one writer per message:
**
**   JSON in   json-c parses the body; each member is written as the wire
**             bytes of its field, and the method then unpacks those bytes
**             exactly as it unpacks a binary body: one decoder, one set of
**             checks behind both encodings.
**   JSON out  the method's binary answer is unpacked and walked by its
**             descriptor.
**
** The mapping: a member is named by the field's lowerCamelCase name or its
** proto name; 64-bit integers are strings out and strings or numbers in;
** enums by name (or number in); bytes as base64; fields at their default
** are left out; unknown members are skipped, as Connect's JSON codec does.
*/
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <arpa/nameser.h>
#include <resolv.h>

#include <json-c/json.h>

#include "repl/serve.h"

#define PBJSON_MAX_DEPTH 32     /* JSON nesting; the messages need 6 */

/* protobuf's wire types */
enum { WT_VARINT = 0, WT_64 = 1, WT_LEN = 2, WT_32 = 5 };

/* Field F's JSON name: "profile_typeID" -> "profileTypeID". */
static void json_name(const ProtobufCFieldDescriptor *f, char *buf,
                      size_t cap)
{
    size_t n = 0;
    bool up = false;

    for (const char *p = f->name; *p != '\0' && n + 1 < cap; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        buf[n++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A')
                                                : *p;
        up = false;
    }
    buf[n] = '\0';
}

/* ---- JSON in ------------------------------------------------------------- */

static const ProtobufCFieldDescriptor *
field_find(const ProtobufCMessageDescriptor *d, const char *key)
{
    char camel[128];

    for (unsigned i = 0; i < d->n_fields; i++) {
        json_name(&d->fields[i], camel, sizeof camel);
        if (strcmp(key, d->fields[i].name) == 0 || strcmp(key, camel) == 0)
            return &d->fields[i];
    }
    return NULL;
}

/* V as a signed integer in [LO, HI]: a JSON integer, an integral number,
** or a string of decimal digits. */
static int json_int(json_object *v, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s;
    char *end;
    double d;

    switch (json_object_get_type(v)) {
    case json_type_int:
        *out = json_object_get_int64(v);
        if (*out == INT64_MAX && json_object_get_uint64(v) > INT64_MAX)
            return em_err(EMBER_EINVAL, "%llu: out of range",
                          (unsigned long long)json_object_get_uint64(v));
        break;
    case json_type_double:
        d = json_object_get_double(v);
        if (d != floor(d) || !(d >= -9.2e18 && d <= 9.2e18))
            return em_err(EMBER_EINVAL, "%g: expected an integer", d);
        *out = (int64_t)d;
        break;
    case json_type_string:
        s = json_object_get_string(v);
        errno = 0;
        *out = strtoll(s, &end, 10);
        if (s[0] == '\0' || *end != '\0' || errno != 0)
            return em_err(EMBER_EINVAL, "\"%.40s\": expected an integer", s);
        break;
    default:
        return em_err(EMBER_EINVAL, "expected an integer");
    }
    if (*out < lo || *out > hi)
        return em_err(EMBER_EINVAL, "%lld: out of range", (long long)*out);
    return EMBER_OK;
}

/* V as an unsigned 64-bit integer. */
static int json_uint(json_object *v, uint64_t hi, uint64_t *out)
{
    const char *s = json_object_get_string(v);
    char *end;
    int64_t i;

    if (json_object_get_type(v) == json_type_string) {
        errno = 0;
        *out = strtoull(s, &end, 10);
        if (s[0] == '\0' || s[0] == '-' || *end != '\0' || errno != 0)
            return em_err(EMBER_EINVAL, "\"%.40s\": expected an unsigned "
                          "integer", s);
    } else if (json_object_get_type(v) == json_type_int &&
               json_object_get_int64(v) == INT64_MAX) {
        *out = json_object_get_uint64(v);
    } else {
        int rc = json_int(v, 0, INT64_MAX, &i);
        if (rc != EMBER_OK)
            return rc;
        *out = (uint64_t)i;
    }
    if (*out > hi)
        return em_err(EMBER_EINVAL, "%llu: out of range",
                      (unsigned long long)*out);
    return EMBER_OK;
}

static int json_float(json_object *v, double *out)
{
    const char *s = json_object_get_string(v);

    switch (json_object_get_type(v)) {
    case json_type_int:
    case json_type_double:
        *out = json_object_get_double(v);
        return EMBER_OK;
    case json_type_string:
        if (strcmp(s, "NaN") == 0)
            *out = NAN;
        else if (strcmp(s, "Infinity") == 0 || strcmp(s, "-Infinity") == 0)
            *out = s[0] == '-' ? -INFINITY : INFINITY;
        else
            return em_err(EMBER_EINVAL, "\"%.40s\": expected a number", s);
        return EMBER_OK;
    default:
        return em_err(EMBER_EINVAL, "expected a number");
    }
}

static int json_enum(json_object *v, const ProtobufCEnumDescriptor *e,
                     int64_t *out)
{
    const ProtobufCEnumValue *ev;

    if (json_object_get_type(v) != json_type_string)
        return json_int(v, INT32_MIN, INT32_MAX, out);
    if ((ev = protobuf_c_enum_descriptor_get_value_by_name(
             e, json_object_get_string(v))) == NULL)
        return em_err(EMBER_EINVAL, "\"%.60s\": not a value of %s",
                      json_object_get_string(v), e->name);
    *out = ev->value;
    return EMBER_OK;
}

/* Base64 (standard or URL-safe, padded or not) to bytes in OUT. */
static int json_bytes(json_object *v, em_buf *out)
{
    size_t n = (size_t)json_object_get_string_len(v);
    char *s = em_malloc(n + 4);
    int rc = EMBER_OK, got;

    if (json_object_get_type(v) != json_type_string)
        rc = em_err(EMBER_EINVAL, "expected a base64 string");
    else if (s == NULL || em_buf_reserve(out, n / 4 * 3 + 3) != EMBER_OK)
        rc = em_err(EMBER_ENOMEM, "out of memory");
    if (rc != EMBER_OK)
        goto done;
    memcpy(s, json_object_get_string(v), n);
    for (size_t i = 0; i < n; i++)
        s[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
    while (n % 4 != 0)
        s[n++] = '=';
    s[n] = '\0';
    if ((got = b64_pton(s, out->p + out->len, out->cap - out->len)) < 0)
        rc = em_err(EMBER_EINVAL, "not base64");
    else
        out->len += (size_t)got;
done:
    em_free(s);
    return rc;
}

static int message_put(em_buf *b, const ProtobufCMessageDescriptor *d,
                       json_object *o, int depth);

/* A length-delimited field: ITS bytes are written after their length. */
static int put_len(em_buf *b, const em_buf *its)
{
    int rc = em_buf_varint(b, its->len);

    return rc == EMBER_OK ? em_buf_put(b, its->p, its->len) : rc;
}

/* A string, bytes or message field's value V (tag already written). */
static int put_delimited(em_buf *b, const ProtobufCFieldDescriptor *f,
                         json_object *v, int depth)
{
    em_buf its = { 0 };
    int rc;

    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        rc = message_put(&its, f->descriptor, v, depth + 1);
    else if (f->type == PROTOBUF_C_TYPE_BYTES)
        rc = json_bytes(v, &its);
    else if (json_object_get_type(v) != json_type_string)
        rc = em_err(EMBER_EINVAL, "expected a string");
    else
        rc = em_buf_put(&its, json_object_get_string(v),
                        (size_t)json_object_get_string_len(v));
    if (rc == EMBER_OK)
        rc = put_len(b, &its);
    em_buf_free(&its);
    return rc;
}

static int put_fixed(em_buf *b, uint64_t v, size_t n)
{
    uint8_t le[8];

    for (size_t i = 0; i < n; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    return em_buf_put(b, le, n);
}

/* A numeric field's value V (tag already written). */
static int put_number(em_buf *b, const ProtobufCFieldDescriptor *f,
                      json_object *v)
{
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    float fl;
    int rc;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if ((rc = json_int(v, INT32_MIN, INT32_MAX, &i)) != EMBER_OK)
            return rc;
        return f->type == PROTOBUF_C_TYPE_SFIXED32 ? put_fixed(b, (uint32_t)i, 4)
             : em_buf_varint(b, f->type == PROTOBUF_C_TYPE_SINT32
                                ? em_zigzag(i) : (uint64_t)i);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if ((rc = json_int(v, INT64_MIN, INT64_MAX, &i)) != EMBER_OK)
            return rc;
        return f->type == PROTOBUF_C_TYPE_SFIXED64 ? put_fixed(b, (uint64_t)i, 8)
             : em_buf_varint(b, f->type == PROTOBUF_C_TYPE_SINT64
                                ? em_zigzag(i) : (uint64_t)i);
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if ((rc = json_uint(v, UINT32_MAX, &u)) != EMBER_OK)
            return rc;
        return f->type == PROTOBUF_C_TYPE_FIXED32 ? put_fixed(b, u, 4)
                                                  : em_buf_varint(b, u);
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        if ((rc = json_uint(v, UINT64_MAX, &u)) != EMBER_OK)
            return rc;
        return f->type == PROTOBUF_C_TYPE_FIXED64 ? put_fixed(b, u, 8)
                                                  : em_buf_varint(b, u);
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE:
        if ((rc = json_float(v, &d)) != EMBER_OK)
            return rc;
        fl = (float)d;
        memcpy(&u, f->type == PROTOBUF_C_TYPE_FLOAT ? (void *)&fl
                                                    : (void *)&d,
               f->type == PROTOBUF_C_TYPE_FLOAT ? 4 : 8);
        return put_fixed(b, u, f->type == PROTOBUF_C_TYPE_FLOAT ? 4 : 8);
    case PROTOBUF_C_TYPE_BOOL:
        if (json_object_get_type(v) != json_type_boolean)
            return em_err(EMBER_EINVAL, "expected true or false");
        return em_buf_varint(b, json_object_get_boolean(v) ? 1 : 0);
    case PROTOBUF_C_TYPE_ENUM:
        if ((rc = json_enum(v, f->descriptor, &i)) != EMBER_OK)
            return rc;
        return em_buf_varint(b, (uint64_t)i);
    default:
        return em_err(EMBER_EINVAL, "a field of an unknown type");
    }
}

static int wire_type(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return WT_32;
    case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return WT_64;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return WT_LEN;
    default:
        return WT_VARINT;
    }
}

/* One value of field F: its tag, then its bytes. */
static int value_put(em_buf *b, const ProtobufCFieldDescriptor *f,
                     json_object *v, int depth)
{
    int wt = wire_type(f);
    int rc = em_buf_varint(b, (uint64_t)f->id << 3 | (uint64_t)wt);

    if (rc != EMBER_OK)
        return rc;
    return wt == WT_LEN ? put_delimited(b, f, v, depth) : put_number(b, f, v);
}

/* Member V of field F: a repeated field's array is written one value at a
** time (unpacked; decoders take both forms). */
static int field_put(em_buf *b, const ProtobufCFieldDescriptor *f,
                     json_object *v, int depth)
{
    int rc = EMBER_OK;

    if (v == NULL)                      /* JSON null: the default */
        return EMBER_OK;
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        return value_put(b, f, v, depth);
    if (json_object_get_type(v) != json_type_array)
        return em_err(EMBER_EINVAL, "expected an array");
    for (size_t i = 0; i < json_object_array_length(v) && rc == EMBER_OK;
         i++) {
        json_object *e = json_object_array_get_idx(v, i);
        if (e == NULL)
            rc = em_err(EMBER_EINVAL, "null in an array");
        else if ((rc = value_put(b, f, e, depth)) != EMBER_OK)
            rc = em_err_prefix(rc, "[%zu]", i);
    }
    return rc;
}

static int message_put(em_buf *b, const ProtobufCMessageDescriptor *d,
                       json_object *o, int depth)
{
    int rc = EMBER_OK;

    if (depth > PBJSON_MAX_DEPTH)
        return em_err(EMBER_ELIMIT, "nested deeper than %d",
                      PBJSON_MAX_DEPTH);
    if (json_object_get_type(o) != json_type_object)
        return em_err(EMBER_EINVAL, "expected an object (%s)", d->name);
    json_object_object_foreach(o, key, v) {
        const ProtobufCFieldDescriptor *f = field_find(d, key);
        if (f != NULL && (rc = field_put(b, f, v, depth)) != EMBER_OK)
            return em_err_prefix(rc, "%.100s", key);
    }
    return rc;
}

int em_pbjson_decode(const ProtobufCMessageDescriptor *d, const char *json,
                     size_t n, em_buf *out)
{
    json_tokener *tok = json_tokener_new_ex(PBJSON_MAX_DEPTH);
    json_object *o = NULL;
    int rc = EMBER_OK;
    size_t end;

    if (tok == NULL)
        return em_err(EMBER_ENOMEM, "JSON body: out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
                                JSON_TOKENER_VALIDATE_UTF8);
    if (n > INT32_MAX)
        rc = em_err(EMBER_ELIMIT, "JSON body: %zu bytes", n);
    else if ((o = json_tokener_parse_ex(tok, json, (int)n)) == NULL &&
             json_tokener_get_error(tok) == json_tokener_continue)
        rc = em_err(EMBER_EINVAL, "JSON body: ends inside its value, at "
                    "byte %zu", n);
    else if (o == NULL &&
             json_tokener_get_error(tok) != json_tokener_success)
        rc = em_err(EMBER_EINVAL, "JSON body: %s at byte %zu",
                    json_tokener_error_desc(json_tokener_get_error(tok)),
                    json_tokener_get_parse_end(tok));
    for (end = o != NULL ? json_tokener_get_parse_end(tok) : n; end < n;
         end++)
        if (json[end] != ' ' && json[end] != '\n' && json[end] != '\r' &&
            json[end] != '\t') {
            rc = em_err(EMBER_EINVAL, "JSON body: data after the value at "
                        "byte %zu", end);
            break;
        }
    if (rc == EMBER_OK && (rc = message_put(out, d, o, 0)) != EMBER_OK)
        rc = em_err_prefix(rc, "JSON body (%s)", d->name);
    json_object_put(o);
    json_tokener_free(tok);
    return rc;
}

/* ---- JSON out ------------------------------------------------------------ */

static int out_message(em_buf *b, const ProtobufCMessage *m);

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

static int out_bytes(em_buf *b, const ProtobufCBinaryData *d)
{
    size_t cap = (d->len + 2) / 3 * 4 + 1;
    int rc = em_buf_reserve(b, cap + 2), n;

    if (rc != EMBER_OK)
        return rc;
    b->p[b->len++] = '"';
    if ((n = b64_ntop(d->data, d->len, (char *)b->p + b->len, cap)) < 0)
        return em_err(EMBER_ENOMEM, "base64 of %zu bytes", d->len);
    b->len += (size_t)n;
    b->p[b->len++] = '"';
    return EMBER_OK;
}

static int out_double(em_buf *b, double d, bool single)
{
    char s[40];

    if (isnan(d))
        snprintf(s, sizeof s, "\"NaN\"");
    else if (isinf(d))
        snprintf(s, sizeof s, "\"%sInfinity\"", d < 0 ? "-" : "");
    else
        snprintf(s, sizeof s, "%.*g", single ? 9 : 17, d);
    return em_buf_put(b, s, strlen(s));
}

/* One value of field F at P. */
static int out_value(em_buf *b, const ProtobufCFieldDescriptor *f,
                     const void *p)
{
    char s[40];
    const ProtobufCEnumValue *ev;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        snprintf(s, sizeof s, "%d", *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        snprintf(s, sizeof s, "%u", *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(s, sizeof s, "\"%lld\"", (long long)*(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        snprintf(s, sizeof s, "\"%llu\"",
                 (unsigned long long)*(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        return out_double(b, *(const float *)p, true);
    case PROTOBUF_C_TYPE_DOUBLE:
        return out_double(b, *(const double *)p, false);
    case PROTOBUF_C_TYPE_BOOL:
        snprintf(s, sizeof s, "%s", *(const protobuf_c_boolean *)p ? "true"
                                                                   : "false");
        break;
    case PROTOBUF_C_TYPE_ENUM:
        ev = protobuf_c_enum_descriptor_get_value(f->descriptor,
                                                  *(const int *)p);
        if (ev != NULL)
            return em_buf_json(b, ev->name);
        snprintf(s, sizeof s, "%d", *(const int *)p);
        break;
    case PROTOBUF_C_TYPE_STRING:
        return em_buf_json(b, *(char *const *)p);
    case PROTOBUF_C_TYPE_BYTES:
        return out_bytes(b, p);
    case PROTOBUF_C_TYPE_MESSAGE:
        return out_message(b, *(const ProtobufCMessage *const *)p);
    }
    return em_buf_put(b, s, strlen(s));
}

/* Whether the single value at P is its type's default (left out). */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
    static const uint8_t zero[sizeof(ProtobufCBinaryData)];

    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return s == NULL || s[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)p == NULL;
    default:
        return memcmp(p, zero, elem_size(f)) == 0;
    }
}

/* Field F of M as "name":value, after a comma when *FIRST is false. */
static int out_field(em_buf *b, const ProtobufCMessage *m,
                     const ProtobufCFieldDescriptor *f, bool *first)
{
    const uint8_t *base = (const uint8_t *)m;
    const void *p = base + f->offset;
    size_t count = 1;
    char name[128];
    int rc;

    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        count = *(const size_t *)(base + f->quantifier_offset);
        p = *(void *const *)p;
        if (count == 0)
            return EMBER_OK;
    } else if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0) {
        if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
            return EMBER_OK;
    } else if (is_default(f, p)) {
        return EMBER_OK;
    }
    json_name(f, name, sizeof name);
    if ((rc = em_buf_put(b, ",", *first ? 0 : 1)) != EMBER_OK ||
        (rc = em_buf_json(b, name)) != EMBER_OK ||
        (rc = em_buf_put(b, ":", 1)) != EMBER_OK)
        return rc;
    *first = false;
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        return out_value(b, f, p);
    rc = em_buf_put(b, "[", 1);
    for (size_t i = 0; i < count && rc == EMBER_OK; i++) {
        if (i > 0)
            rc = em_buf_put(b, ",", 1);
        if (rc == EMBER_OK)
            rc = out_value(b, f, (const uint8_t *)p + i * elem_size(f));
    }
    return rc == EMBER_OK ? em_buf_put(b, "]", 1) : rc;
}

static int out_message(em_buf *b, const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    bool first = true;
    int rc = em_buf_put(b, "{", 1);

    for (unsigned i = 0; i < d->n_fields && rc == EMBER_OK; i++)
        rc = out_field(b, m, &d->fields[i], &first);
    return rc == EMBER_OK ? em_buf_put(b, "}", 1) : rc;
}

int em_pbjson_encode(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                     size_t n, em_buf *out)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, p);
    int rc;

    if (m == NULL)
        return em_err(EMBER_EINVAL, "%s: not a valid message", d->name);
    rc = out_message(out, m);
    if (rc == EMBER_OK)
        rc = em_buf_put(out, "\n", 1);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc == EMBER_OK ? EMBER_OK
                          : em_err(EMBER_ENOMEM, "%s as JSON", d->name);
}
