/*
** ingest/collapsed.c: the parser of collapsed ("folded") stacks, the line
** format described in ingest/ingest.h. It only splits and checks; what the
** stacks become is the callback's business (ingest/collapsed_decode.c
** for imports).
**
** Invariants: the input is untrusted, so every byte is read through LEN
** (never as a C string); a line is looked at only up to the line limit, so a
** huge line without '\n' costs O(limit), not O(file); frames handed out are
** non-empty slices of the caller's buffer; the one allocation, the frame
** scratch array, grows by doubling up to EM_COLLAPSED_MAX_FRAMES entries.
** Speed comes from memchr (the C library's vectorized scan) for line ends,
** NUL bytes and ';', and from scanning a value backwards from the line end.
*/
#include <stdio.h>

#include "engine/engine.h"
#include "ingest/ingest.h"

#define FRAMES_INITIAL 64           /* scratch entries before the first grow */

typedef struct parser {
    const char *origin;             /* names the input in messages */
    size_t lineno;                  /* current line, counted from 1 */
    em_collapsed_frame *frames;     /* scratch: the current line's frames */
    size_t cap;                     /* entries FRAMES holds */
} parser;

/* Sets "ORIGIN:LINE:COL: what" as the thread's message and returns RC. */
static int parse_err(const parser *ps, int rc, size_t col, const char *fmt,
                     ...) EM_PRINTF(4, 5);
static int parse_err(const parser *ps, int rc, size_t col, const char *fmt,
                     ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return em_err(rc, "%s:%zu:%zu: %s", ps->origin, ps->lineno, col, what);
}

/* Describes byte C for a message without echoing control bytes (hostile
** input must not reach the terminal as escape sequences). */
static const char *byte_desc(unsigned char c, char *buf, size_t size)
{
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

/* Spaces and tabs separate the value; a trailing CR is part of CRLF. */
static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Sets *N to the length of the line at P (REM bytes left) without its '\n'.
** Looks no further than the limit allows, whatever REM is. */
static int line_length(const parser *ps, const char *p, size_t rem, size_t *n)
{
    size_t window = EM_COLLAPSED_MAX_LINE + 2;      /* content, '\r', '\n' */
    const char *nl;
    size_t raw, content;

    if (window > rem)
        window = rem;
    nl = memchr(p, '\n', window);
    raw = nl != NULL ? (size_t)(nl - p) : window;
    content = raw > 0 && p[raw - 1] == '\r' ? raw - 1 : raw;
    if (content > EM_COLLAPSED_MAX_LINE)
        return parse_err(ps, EMBER_ELIMIT, (size_t)EM_COLLAPSED_MAX_LINE + 1,
                         "line longer than %u bytes", EM_COLLAPSED_MAX_LINE);
    *n = raw;
    return EMBER_OK;
}

/* Parses the value token S[0..n), found at column COL: optional '-', then
** decimal digits, within int64 (checked before each step, so no overflow). */
static int parse_value(const parser *ps, const char *s, size_t n, size_t col,
                       int64_t *out)
{
    bool neg = s[0] == '-';
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    char desc[16];

    if (neg && n == 1)
        return parse_err(ps, EMBER_EINVAL, col + 1,
                         "expected a digit after '-' in the value");
    for (size_t i = neg; i < n; i++) {
        unsigned d = (unsigned)((unsigned char)s[i] - '0');
        if (d > 9)
            return parse_err(ps, EMBER_EINVAL, col + i,
                             i == (size_t)neg
                             ? "expected an integer value at the end of the "
                               "line, found %s"
                             : "expected a decimal digit in the value, found %s",
                             byte_desc((unsigned char)s[i], desc, sizeof desc));
        if (v > (limit - d) / 10)
            return parse_err(ps, EMBER_EINVAL, col,
                             "value out of range: expected an integer from "
                             "-2^63 to 2^63-1");
        v = v * 10 + d;
    }
    /* -(v-1)-1 reaches INT64_MIN without converting 2^63 to int64. */
    *out = neg && v > 0 ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    return EMBER_OK;
}

/* Makes room for one more frame, refusing past the frame limit. COL is
** where that frame starts, for the message. */
static int grow_frames(parser *ps, size_t col)
{
    size_t cap = ps->cap == 0 ? FRAMES_INITIAL : ps->cap * 2;
    em_collapsed_frame *f;

    if (ps->cap >= EM_COLLAPSED_MAX_FRAMES)
        return parse_err(ps, EMBER_ELIMIT, col,
                         "more than %u frames in one stack",
                         EM_COLLAPSED_MAX_FRAMES);
    if (cap > EM_COLLAPSED_MAX_FRAMES)
        cap = EM_COLLAPSED_MAX_FRAMES;
    f = em_realloc(ps->frames, cap * sizeof *f);
    if (f == NULL)
        return parse_err(ps, EMBER_ENOMEM, col,
                         "out of memory for %zu frames", cap);
    ps->frames = f;
    ps->cap = cap;
    return EMBER_OK;
}

/* Splits the stack S[0..n) at ';' into ps->frames; *NFRAMES gets the count. */
static int split_frames(parser *ps, const char *s, size_t n, size_t *nframes)
{
    size_t i = 0, k = 0;
    int rc;

    if (n == 0)
        return parse_err(ps, EMBER_EINVAL, 1, "expected a stack (frames "
                         "separated by ';') before the value");
    for (;;) {
        const char *semi = memchr(s + i, ';', n - i);
        size_t end = semi != NULL ? (size_t)(semi - s) : n;
        if (end == i)
            return parse_err(ps, EMBER_EINVAL, i + 1,
                             "expected a frame name %s", i == n
                             ? "after ';'" : "before ';'");
        if (k == ps->cap && (rc = grow_frames(ps, i + 1)) != EMBER_OK)
            return rc;
        ps->frames[k].p = s + i;
        ps->frames[k++].len = end - i;
        if (semi == NULL)
            break;
        i = end + 1;
    }
    *nframes = k;
    return EMBER_OK;
}

/* Parses one line of N bytes (without '\n') and hands its stack to FN. */
static int parse_line(parser *ps, const char *line, size_t n,
                      em_collapsed_fn fn, void *ctx)
{
    const char *nul;
    size_t v, s, nframes = 0;
    int64_t value = 0;
    int rc;

    while (n > 0 && is_blank(line[n - 1]))
        n--;
    if (n == 0 || line[0] == '#')
        return EMBER_OK;                /* blank line or comment */
    /* Frames become C strings later: a NUL would silently cut a name. */
    if ((nul = memchr(line, '\0', n)) != NULL)
        return parse_err(ps, EMBER_EINVAL, (size_t)(nul - line) + 1,
                         "unexpected NUL byte");
    for (v = n; v > 0 && !is_blank(line[v - 1]); v--)
        ;
    if (v == 0)
        return parse_err(ps, EMBER_EINVAL, n + 1, "expected a space and an "
                         "integer value at the end of the line");
    if ((rc = parse_value(ps, line + v, n - v, v + 1, &value)) != EMBER_OK)
        return rc;
    for (s = v; s > 0 && is_blank(line[s - 1]); s--)
        ;
    if ((rc = split_frames(ps, line, s, &nframes)) != EMBER_OK)
        return rc;
    rc = fn(ctx, ps->frames, nframes, value);
    if (rc < 0)
        rc = em_err_prefix(rc, "%s:%zu", ps->origin, ps->lineno);
    return rc;
}

int em_collapsed_parse(const char *buf, size_t len, const char *origin,
                       em_collapsed_fn fn, void *ctx)
{
    parser ps = { .origin = origin != NULL ? origin : "<input>" };
    size_t pos = 0, n = 0;
    int rc = EMBER_OK;

    if ((buf == NULL && len > 0) || fn == NULL)
        return em_err(EMBER_EINVAL, "%s: no buffer or no callback",
                      ps.origin);
    while (rc == EMBER_OK && pos < len) {
        ps.lineno++;
        rc = line_length(&ps, buf + pos, len - pos, &n);
        if (rc == EMBER_OK)
            rc = parse_line(&ps, buf + pos, n, fn, ctx);
        pos += n + 1;               /* past the '\n' (or past the end) */
    }
    em_free(ps.frames);
    return rc;
}
