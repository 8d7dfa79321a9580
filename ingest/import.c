/*
** ingest/import.c: what every import shares. Options are normalized once;
** input is gunzipped under a size limit (a gzip bomb stops at the limit, not
** at the end of memory); the format is told by content when not given; a
** decoder fills a profile set; em_import writes the set in one transaction.
*/
#include <libdeflate.h>
#include <zlib.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

int em_import_opts_norm(const em_import_opts *opts, em_import_opts *o)
{
    int rc;

    memset(o, 0, sizeof *o);
    if (opts != NULL) {
        if (opts->sz == 0)
            return em_err(EMBER_EINVAL, "import options: sz is not set");
        memcpy(o, opts, opts->sz < sizeof *o ? opts->sz : sizeof *o);
    }
    o->sz = sizeof *o;
    if (o->origin == NULL)
        o->origin = "<input>";
    if (o->window_ms <= 0)
        o->window_ms = EM_PERF_DEFAULT_WINDOW_MS;
    if (o->max_bytes == 0)
        o->max_bytes = EM_IMPORT_MAX_BYTES;
    if (o->nlabels > 0 && o->labels == NULL)
        return em_err(EMBER_EINVAL, "%s: %zu labels but no label array",
                      o->origin, o->nlabels);
    if ((unsigned)o->format > EM_FORMAT_PERF)
        return em_err(EMBER_EINVAL, "%s: format %d is not known", o->origin,
                      (int)o->format);
    if (o->type != NULL && (rc = em_profile_type_check(o->type)) != EMBER_OK)
        return em_err_prefix(rc, "%s", o->origin);
    return EMBER_OK;
}

/* ---- gzip ----------------------------------------------------------------- */

bool em_is_gzip(const void *buf, size_t len)
{
    const uint8_t *p = buf;

    return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

#define INFLATE_SCRATCH (64u << 10)

static int bomb(uint64_t max)
{
    return em_err(EMBER_ELIMIT, "more than %llu bytes after gunzip (a gzip "
                  "bomb?)", (unsigned long long)max);
}

/* Runs Z over the whole input, member after member, into the CAP bytes at
** DST; *OUTLEN gets the bytes inflated. With COUNT, DST is a scratch that
** is written over and over, so only the size is learnt: more than MAX is
** ELIMIT as soon as it is passed. Without, output that outgrows CAP is
** ELIMIT. */
static int inflate_run(z_stream *z, uint8_t *dst, size_t cap, bool count,
                       uint64_t max, size_t *outlen)
{
    uint64_t total = 0;
    int zrc;

    z->next_out = dst;
    z->avail_out = (uInt)cap;
    for (;;) {
        if (z->avail_out == 0) {
            total += cap;
            if (!count || total > max)
                return bomb(max);
            z->next_out = dst;
            z->avail_out = (uInt)cap;
        }
        zrc = inflate(z, Z_NO_FLUSH);
        if (zrc == Z_STREAM_END && z->avail_in > 0) {
            if (inflateReset(z) != Z_OK)    /* concatenated members */
                break;
            continue;
        }
        if (zrc == Z_STREAM_END)
            break;
        if (zrc == Z_BUF_ERROR && z->avail_out > 0)
            return em_err(EMBER_EINVAL, "gzip stream is truncated");
        if (zrc != Z_OK && zrc != Z_BUF_ERROR)
            return em_err(zrc == Z_MEM_ERROR ? EMBER_ENOMEM : EMBER_EINVAL,
                          "gzip stream is damaged (%s)",
                          z->msg != NULL ? z->msg : "zlib error");
    }
    total += cap - z->avail_out;
    if (total > max)
        return bomb(max);
    *outlen = (size_t)total;
    return EMBER_OK;
}

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return em_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    em_free(p);
}

/* The fast path, libdeflate's one-call decoder, which runs three times as
** fast as zlib's inflate: a single gzip member whose trailer size (ISIZE,
** which the writer may have lied about) is within MAX and within deflate's
** greatest ratio of the input. It decodes into exactly ISIZE bytes, so a
** lie or a second member just fails here; anything it does not take, or
** any failure, goes to zlib's streaming path, which enforces MAX as it
** goes and says what is wrong. So does a header with a CRC (FHCRC), which
** libdeflate skips and zlib checks: one path must not take what the other
** refuses (fuzz/fuzz_detect.c found it). */
static bool gunzip_fast(const uint8_t *p, size_t len, uint64_t max,
                        void **out, size_t *outlen)
{
    struct libdeflate_decompressor *d;
    enum libdeflate_result r;
    size_t used = 0, got = 0;
    uint32_t isize;
    uint8_t *o;

    if (len < 18 || (p[3] & 0x02) != 0)
        return false;
    isize = em_get_le32(p + len - 4);
    if (isize > max || isize / 1032 > len)
        return false;
    if ((o = em_malloc((size_t)isize + 1)) == NULL)
        return false;
    if ((d = libdeflate_alloc_decompressor()) == NULL) {
        em_free(o);
        return false;
    }
    r = libdeflate_gzip_decompress_ex(d, p, len, o, isize, &used, &got);
    libdeflate_free_decompressor(d);
    if (r != LIBDEFLATE_SUCCESS || used != len || got != isize) {
        em_free(o);
        return false;
    }
    o[got] = '\0';
    *out = o;
    *outlen = got;
    return true;
}

/* The slow path inflates twice: once into a scratch to learn the size
** (a bomb stops there, having allocated 64 KiB: growing the output as it
** came reached 1.09 GB before the 1 GiB limit refused it, issue 12), then
** into a buffer of exactly that size. Only input the fast path does not
** take comes here: concatenated members, or a trailer that lies. */
int em_gunzip(const void *buf, size_t len, uint64_t max, void **out,
              size_t *outlen)
{
    z_stream z = { .zalloc = z_alloc, .zfree = z_free };
    uint8_t *o = NULL;
    size_t size = 0, got = 0;
    int rc;

    *out = NULL;
    *outlen = 0;
    if (len > UINT32_MAX)
        return em_err(EMBER_ELIMIT, "gzip input over 4 GiB");
    if (gunzip_fast(buf, len, max, out, outlen))
        return EMBER_OK;
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return em_err(EMBER_ENOMEM, "gunzip: %s", z.msg ? z.msg : "no memory");
    z.next_in = (Bytef *)(uintptr_t)buf;
    z.avail_in = (uInt)len;
    if ((o = em_malloc(INFLATE_SCRATCH)) == NULL)
        rc = em_err(EMBER_ENOMEM, "out of memory gunzipping");
    else
        rc = inflate_run(&z, o, INFLATE_SCRATCH, true, max, &size);
    em_free(o);
    o = NULL;
    if (rc == EMBER_OK && size >= UINT32_MAX)  /* zlib counts room in uInt */
        rc = em_err(EMBER_ELIMIT, "more than 4 GiB after gunzip");
    if (rc == EMBER_OK && (o = em_malloc(size + 1)) == NULL)
        rc = em_err(EMBER_ENOMEM, "out of memory gunzipping (%zu bytes)",
                    size);
    if (rc == EMBER_OK && inflateReset(&z) != Z_OK)
        rc = em_err(EMBER_ENOMEM, "gunzip: cannot restart");
    if (rc == EMBER_OK) {
        z.next_in = (Bytef *)(uintptr_t)buf;
        z.avail_in = (uInt)len;
        /* one byte over: a stream that ends exactly at the end of its
        ** room is never taken for one that goes on */
        rc = inflate_run(&z, o, size + 1, false, size, &got);
    }
    inflateEnd(&z);
    if (rc != EMBER_OK) {
        em_free(o);
        return rc;
    }
    o[got] = '\0';
    *out = o;
    *outlen = got;
    return EMBER_OK;
}

/* ---- format detection ------------------------------------------------------ */

/* True when the first 4 KiB hold no NUL and no control byte but tab, CR
** and LF: text. pprof's first bytes (field tags, small varints) never are. */
static bool looks_text(const uint8_t *p, size_t len)
{
    size_t n = len < 4096 ? len : 4096;

    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return false;
    return true;
}

/* True when [P, END) holds a blank-separated token "digits.digits:", the
** time stamp of a perf script event header. */
static bool has_perf_time(const char *p, const char *end)
{
    while (p < end) {
        const char *t = p, *dot = NULL;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        if (p - t >= 4 && p[-1] == ':' && t[0] >= '0' && t[0] <= '9') {
            const char *c = t;
            for (; c < p - 1 && ((*c >= '0' && *c <= '9') || *c == '.'); c++)
                if (*c == '.')
                    dot = c;
            if (c == p - 1 && dot != NULL && dot > t && dot < p - 2)
                return true;
        }
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
    }
    return false;
}

/* When [P, END) ends in blanks and an integer (a collapsed line), returns
** where those blanks start; else NULL. */
static const char *value_blanks(const char *p, const char *end)
{
    const char *e = end, *d;

    while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        e--;
    d = e;
    while (d > p && d[-1] >= '0' && d[-1] <= '9')
        d--;
    if (d == e)
        return NULL;
    if (d > p && d[-1] == '-')
        d--;
    if (d == p || (d[-1] != ' ' && d[-1] != '\t'))
        return NULL;
    while (d > p && (d[-1] == ' ' || d[-1] == '\t'))
        d--;
    return d;
}

/* True when [P, END) is a perf script call chain line: a TAB, then a hex
** address and a blank or the line end. */
static bool perf_frame_line(const char *p, const char *end)
{
    const char *q = p + 1, *h;

    if (p == end || *p != '\t')
        return false;
    while (q < end && (*q == ' ' || *q == '\t'))
        q++;
    for (h = q; q < end && ((*q >= '0' && *q <= '9') ||
                            (*q >= 'a' && *q <= 'f')); q++)
        ;
    return q > h && (q == end || *q == ' ' || *q == '\t' || *q == '\r');
}

/* True when [P, END), less a trailing CR, starts with S (or is S, EXACT). */
static bool line_starts(const char *p, const char *end, const char *s,
                        bool exact)
{
    size_t n = strlen(s), len = (size_t)(end - p);

    len -= len > 0 && p[len - 1] == '\r';
    return len >= n && memcmp(p, s, n) == 0 && (!exact || len == n);
}

/* What the content lines looked at say about collapsed stacks. */
typedef struct text_look {
    size_t lines;               /* content lines looked at */
    bool values;                /* the first ends in blanks and an integer
                                ** (a later bad line is the decoder's to
                                ** report, with its number) */
    bool semis;                 /* some stack has a ';' */
    bool tab_in_stack;          /* a TAB before the value's blanks */
    bool tab_value;             /* a TAB among the value's blanks */
    bool numbers;               /* every stack is numbers and blanks */
} text_look;

/* Adds content line [P, END) to *T. */
static void look_line(text_look *t, const char *p, const char *end)
{
    const char *v = value_blanks(p, end);

    if (t->lines++ == 0)
        t->values = v != NULL && v != p;
    if (v == NULL || v == p)
        return;
    t->semis |= memchr(p, ';', (size_t)(v - p)) != NULL;
    t->tab_in_stack |= memchr(p, '\t', (size_t)(v - p)) != NULL;
    t->tab_value |= memchr(v, '\t', (size_t)(end - v)) != NULL;
    for (const char *c = p; c < v && t->numbers; c++)
        t->numbers = strchr("0123456789.,+-eE \t", *c) != NULL;
}

#define DETECT_LINES 64             /* content lines looked at, at most */
#define DETECT_BYTES (64u << 10)    /* ... starting in these first bytes */

/* em_format_detect for text; AUTO with *WHY saying why it is no profile. */
static em_format detect_text(const char *buf, size_t len, const char **why)
{
    const char *p = buf, *end = buf + len;
    text_look t = { 0, false, false, false, false, true };
    bool rule = false;              /* the last line was "# ========" */

    while (p < end && t.lines < DETECT_LINES &&
           (size_t)(p - buf) < DETECT_BYTES) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *q = p;
        if (eol == NULL)
            eol = end;
        if (perf_frame_line(p, eol))
            return EM_FORMAT_PERF;  /* perf's call chains are TAB-led */
        /* perf script --header's opening, whose fields may run on in lines
        ** without '#' (a command line with a line break, issue 15) */
        if (rule && line_starts(p, eol, "# captured on", false))
            return EM_FORMAT_PERF;
        rule = line_starts(p, eol, "# ========", true);
        while (q < eol && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < eol && *q != '#') {
            if (t.lines == 0 && has_perf_time(p, eol))
                return EM_FORMAT_PERF;
            look_line(&t, p, eol);
        }
        p = eol + 1;
    }
    *why = t.lines == 0 ? "empty: no profile in it (only blanks or "
                          "comments)"
           : !t.values ? "neither pprof, perf script nor collapsed stacks "
                         "(name the format with --format if it is one)"
           : t.tab_in_stack || (t.tab_value && !t.semis)
           ? "a table of tab-separated columns, not collapsed stacks "
             "(--format collapsed reads it as stacks all the same)"
           : t.numbers && !t.semis ? "columns of numbers, not collapsed "
                                     "stacks (--format collapsed reads them "
                                     "as stacks all the same)"
           : NULL;
    return *why != NULL ? EM_FORMAT_AUTO : EM_FORMAT_COLLAPSED;
}

/* em_format_detect that says why when nothing fits. */
static em_format detect(const void *buf, size_t len, const char **why)
{
    *why = NULL;
    if (len == 0) {
        *why = "empty: no profile in it";
        return EM_FORMAT_AUTO;
    }
    if (!looks_text(buf, len))
        return EM_FORMAT_PPROF;
    return detect_text(buf, len, why);
}

em_format em_format_detect(const void *buf, size_t len)
{
    const char *why;

    return detect(buf, len, &why);
}

static const char *const format_names[] = { "auto", "pprof", "collapsed",
                                            "perf" };

const char *em_format_name(em_format f)
{
    return (unsigned)f <= EM_FORMAT_PERF ? format_names[f] : "unknown";
}

int em_format_parse(const char *s, em_format *out)
{
    for (unsigned i = 0; i <= EM_FORMAT_PERF; i++)
        if (strcmp(s, format_names[i]) == 0) {
            *out = (em_format)i;
            return EMBER_OK;
        }
    return em_err(EMBER_EINVAL, "format \"%s\": expected auto, pprof, "
                  "collapsed or perf", s);
}

/* ---- decode and import ------------------------------------------------------ */

/* Decodes LEN bytes at BUF (not gzip'd) in format F. */
static int decode_plain(const void *buf, size_t len, const em_import_opts *o,
                        em_format f, em_pset *out)
{
    const char *why = NULL;

    if (f == EM_FORMAT_AUTO)
        f = detect(buf, len, &why);
    out->bytes_in += len;
    switch (f) {
    case EM_FORMAT_PPROF:
        return em_pprof_decode(buf, len, o, out);
    case EM_FORMAT_PERF:
        return em_perf_decode(buf, len, o, out);
    case EM_FORMAT_COLLAPSED:
        return em_collapsed_decode(buf, len, o, out);
    default:
        return em_err(EMBER_EINVAL, "%s: not a profile: %s", o->origin,
                      why);
    }
}

int em_decode(const void *buf, size_t len, const em_import_opts *opts,
              em_pset *out)
{
    em_import_opts o;
    void *plain = NULL;
    size_t plen = 0;
    int rc = em_import_opts_norm(opts, &o);

    if (rc != EMBER_OK)
        return rc;
    if (!em_is_gzip(buf, len))
        return decode_plain(buf, len, &o, o.format, out);
    rc = em_gunzip(buf, len, o.max_bytes, &plain, &plen);
    if (rc != EMBER_OK)
        return em_err_prefix(rc, "%s", o.origin);
    rc = decode_plain(plain, plen, &o, o.format, out);
    em_free(plain);
    return rc;
}

/* What S read and C wrote, into OUT. */
static void import_stats(const em_pset *s, const em_pset_counts *c,
                         em_import_stats *out)
{
    out->lines = s->nsamples;
    out->stacks = s->nstacks;
    out->functions = s->nfunctions;
    for (size_t i = 0; i < s->nprofiles; i++)       /* saturating: the */
        out->total = em_add_sat(out->total,         /* types may differ */
                                em_add_sat(s->profiles[i].pos,
                                           s->profiles[i].neg));
    out->profiles = c->profiles;
    out->samples = c->samples;
    out->bytes = s->bytes_in;
}

/* Writes S (decoded, RC its decoder's result) in TXN, or (TXN NULL) in a
** transaction of DB's own begun only now, so that decoding never holds
** the writer lock; frees S. */
static int import_write(ember_db *db, ember_txn *txn, em_pset *s, int rc,
                        em_import_stats *out)
{
    em_pset_counts c = { 0 };
    ember_txn *own = NULL;

    em_pset_trim(s);        /* its indexes are a third of it; writing needs none */
    if (rc == EMBER_OK && s->nsamples > 0) {
        if (txn == NULL && (rc = ember_txn_begin(db, &own)) == EMBER_OK)
            txn = own;
        if (rc == EMBER_OK)
            rc = em_pset_write(txn, s, &c);
        if (own != NULL && rc == EMBER_OK)
            rc = ember_txn_commit(own);
        else if (own != NULL)
            ember_txn_abort(own);
    }
    if (rc == EMBER_OK && out != NULL)
        import_stats(s, &c, out);
    em_pset_free(s);
    return rc;
}

/* Decodes, then writes (import_write). */
static int import_run(ember_db *db, ember_txn *txn, const void *buf,
                      size_t len, const em_import_opts *opts,
                      em_import_stats *out)
{
    em_pset s = { 0 };

    if (out != NULL)
        memset(out, 0, sizeof *out);
    return import_write(db, txn, &s, em_decode(buf, len, opts, &s), out);
}

int em_import(ember_db *db, const void *buf, size_t len,
              const em_import_opts *opts, em_import_stats *out)
{
    if (db == NULL)
        return em_err(EMBER_EINVAL, "import: no database");
    return import_run(db, NULL, buf, len, opts, out);
}

int em_import_txn(ember_txn *txn, const void *buf, size_t len,
                  const em_import_opts *opts, em_import_stats *out)
{
    if (txn == NULL)
        return em_err(EMBER_EINVAL, "import: no transaction");
    return import_run(NULL, txn, buf, len, opts, out);
}

const char *const em_delta_default_types[] = {
    "alloc_objects", "alloc_space", "contentions", "delay",
};
const size_t em_delta_ndefault_types = EM_ARRAY_LEN(em_delta_default_types);

/* Decodes PREV with OPTS under its own origin into *OUT. */
static int decode_prev(const void *prev, size_t len, const char *origin,
                       const em_import_opts *opts, em_pset *out)
{
    em_import_opts o;
    int rc = em_import_opts_norm(opts, &o);

    o.origin = origin != NULL ? origin : "previous profile";
    o.format = EM_FORMAT_PPROF;
    return rc == EMBER_OK ? em_decode(prev, len, &o, out) : rc;
}

int em_import_delta(ember_db *db, const void *cur, size_t len,
                    const void *prev, size_t prev_len,
                    const char *prev_origin, const char *const *cum,
                    size_t ncum, const em_import_opts *opts,
                    em_import_stats *out)
{
    em_pset s = { 0 }, p = { 0 };
    em_import_opts o;
    int rc = db == NULL ? em_err(EMBER_EINVAL, "import: no database")
                        : em_import_opts_norm(opts, &o);

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (cum == NULL)
        cum = em_delta_default_types, ncum = em_delta_ndefault_types;
    o.format = EM_FORMAT_PPROF;
    if (rc == EMBER_OK)
        rc = decode_prev(prev, prev_len, prev_origin, &o, &p);
    if (rc == EMBER_OK)
        rc = em_decode(cur, len, &o, &s);
    if (rc == EMBER_OK)
        rc = em_pset_delta(&s, &p, cum, ncum);
    em_pset_free(&p);
    if (db == NULL) {
        em_pset_free(&s);
        return rc;
    }
    return import_write(db, NULL, &s, rc, out);
}

int em_import_collapsed(ember_db *db, const char *buf, size_t len,
                        const em_import_opts *opts, em_import_stats *out)
{
    em_import_opts o;
    int rc = em_import_opts_norm(opts, &o);

    if (rc != EMBER_OK) {
        if (out != NULL)
            memset(out, 0, sizeof *out);
        return rc;
    }
    o.format = EM_FORMAT_COLLAPSED;
    return em_import(db, buf, len, &o, out);
}
