/*
** ingest/perf_script.c: decodes the text `perf script` prints into a profile
** set (ingest/pset.h), in one pass over the buffer.
**
** Input. Events separated by blank lines; each is a header line, then its
** call chain one frame per line, leaf first (`perf record -g`):
**
**     prog  5963/5964 [001]  2875.701812:    1001001 cpu-clock:ppp: 
**     \t            118e hot+0x1e (/tmp/hot)
**     \t               0 [unknown] ([unknown])
**
** Header: [COMM] [PID or PID/TID] [[CPU]] [SECS.FRAC:] [PERIOD] [EVENT:],
** each field optional as `perf script -F` leaves it out, in the order perf
** prints them. COMM is any bytes (spaces included, left or right aligned);
** the time is seconds since boot; the event runs with its modifiers to the
** ':' that ends its token ("cpu-clock:ppp", "sched:sched_switch"), and
** tracepoint data may follow it and is ignored. With a time stamp the
** header is found by it: PID and CPU are the tokens before it, COMM all
** before them, so a comm with spaces or digits is kept whole. Without one,
** the first PID-like token is the PID. A line with neither is no header. A
** single number is the thread id: that is what perf's default field set
** prints (builtin-script.c prints TID unless -F pid is given), so such
** samples have no pid label; run `perf script -F +pid` to get both. A
** digits token after the time is the period unless what follows it is not
** an event or an address, then it is the address of the frame on the line
** ("1187 main (/x)"). Without -g perf prints the one sampled frame on the
** header line (after the event, if any): it is taken as a one-frame stack
** when no call chain lines follow; without ip there is no frame at all and
** the sample has an empty stack (stackcollapse-perf.pl counts it under its
** comm).
**
** Frame: a TAB-led line (perf's own layout; a space-led line is a frame
** only when it does not parse as a header with a time stamp or a srcline)
** of a hex address, then an optional symbol (anything: spaces,
** parentheses, templates) with an optional "+0xOFF", then an optional
** " (DSO)": the parenthesized group that ends the line, matched backwards
** so "(/memfd:x (deleted))" stays whole. Each frame becomes a location at
** that address on mapping {file = DSO} (none for "[unknown]" or a missing
** DSO) with one line {function named by the symbol without its offset,
** line 0}. An "[unknown]" or missing symbol gives a location with no
** lines, so unknown addresses stay apart as perf report keeps them apart.
** A frame "ADDR SYM (inlined)" is a function inlined at ADDR: perf prints
** those innermost first, then the frame they were inlined into at the same
** address; all become the lines of that one location (alone, the
** inlined frames make a location without a mapping). A space-led line
** "FILE:LINE" after a frame is its -F srcline: the line gets LINE, the
** function FILE ("??:0" and "DSO+0xOFF", perf's words for a line it could
** not find, add nothing). Lines starting with '#' are comments; before
** the first sample, `perf script --header`'s "# captured on" and "# time of
** last sample" are read for the wall clock (below). Its header is one
** block from "# ========" and "# captured on" to "# ========": a line in
** it not led by '#' is the rest of a field value with a line break (the
** recorded command line's arguments), never an event; reading a pipe,
** perf prints the fields after the block, and the "# cmdline" field runs
** to the next '#' line (header_lines). One that nothing ends is an error.
**
** Profiles. Samples are grouped per (comm, pid, tid, event) and time window
** into profiles labelled comm, pid, tid and event (the event with its
** modifiers), after the import's own labels (em_labels_join). Window k of
** the file covers [T0 + k*W, T0 + (k+1)*W) of perf time, T0 being the
** first sample's time and W opts->window_ms (EM_PERF_DEFAULT_WINDOW_MS by
** default); its profiles get time_ms = WALL0 + k*W and duration W. perf
** time is not wall time, so WALL0, the wall time of the first sample, is
** taken from the "# captured on" date (perf.data's mtime, so the end of the
** recording: minus (last sample - first sample) when "# time of last
** sample" is there too; read in the local time zone, as perf wrote it with
** ctime), else from opts->time_ms.
**
** Types. With opts->type, one profile per group of that type whose values
** are the sample's period when the type's sample unit (third part) is not
** "count" and the header has a period, else 1 per sample. Without it, for
** cpu-clock and task-clock: perf_cpu:samples:count:cpu:nanoseconds:delta
** (1 per sample) and perf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta (the
** period, for samples whose header has one); for any other event E (its
** name without modifiers, bytes outside [a-zA-Z0-9_] made '_'):
** perf_E:samples:count:E:count:delta and perf_E:E:count:E:count:delta;
** without the event field perf:samples:count:event:count:delta and
** perf:period:count:event:count:delta. The names are perf's own, not Go's
** process_cpu, so that perf, the eBPF sampler and Go profiles never sum
** into one type unasked (issue 12). A profile's period is opts->period,
** else its first sample's period.
**
** Input is hostile: lines longer than 1 MiB and stacks deeper than
** EM_PSET_MAX_DEPTH are EMBER_ELIMIT, anything malformed EMBER_EINVAL, each
** with one message "ORIGIN:LINE: what is wrong". Cost: one pass; per frame
** a few hash probes in the set and no allocation; groups are found through
** a hash map, never by a scan.
*/
#include <stdio.h>
#include <time.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/ingest_int.h"

#define PERF_MAX_LINE (1u << 20)        /* bytes per line, as collapsed */
#define PERF_MAX_SECS 9000000000ull     /* times stay below 2^63 ns */
#define TYPE_BUF 256                    /* "perf_" E ":samples:..." */
#define CPU_SAMPLES "perf_cpu:samples:count:cpu:nanoseconds:delta"
#define CPU_NANOS "perf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
#define ANY_SAMPLES "perf:samples:count:event:count:delta"
#define ANY_PERIODS "perf:period:count:event:count:delta"

/* LEN bytes inside the input buffer, not NUL-terminated. */
typedef struct slice {
    const char *p;
    size_t len;
} slice;

/* One event header line. */
typedef struct header {
    slice comm, pid, tid, event;    /* len 0: not printed */
    slice time;                     /* SECS.FRAC, when has_time */
    bool has_time;
    int64_t time_ns;                /* perf time; 0 without has_time */
    int64_t period;                 /* 0 with has_period false */
    bool has_period;
    bool record;                    /* a PERF_RECORD_* side-band line */
    slice inline_frame;             /* the frame after the event; len 0: none */
} header;

/* One parsed frame line. */
typedef struct frame {
    uint64_t addr;
    slice sym, dso;                 /* len 0: unknown */
    slice file;                     /* from -F srcline; len 0: unknown */
    int64_t line;                   /* from -F srcline; 0: unknown */
    bool inlined;                   /* "(inlined)" in place of the DSO */
} frame;

/* One (comm, pid, tid, event, window): its profiles, made when needed. */
typedef struct group {
    slice comm, pid, tid, event;
    int64_t window;
    uint64_t hash;
    int64_t prof[2];                /* count profile, period profile; -1 */
} group;

/* The decoder's state over one buffer. */
typedef struct perf_dec {
    const em_import_opts *o;
    em_pset *s;
    size_t lineno;
    /* the wall clock: header lines, then the first sample */
    bool have_captured, have_last;
    int64_t captured_ms, last_ns, first_ns, wall0_ms, window_ns;
    /* perf script --header: lines not led by '#' that continue a field */
    size_t rule_line;               /* the last "# ========" line; 0 */
    bool in_block;                  /* between the "# ========" lines */
    bool cont;                      /* such lines continue the last field */
    size_t field_line;              /* the block's opening line or cmdline's */
    size_t cont_line;               /* first continuation not yet ended; 0 */
    /* the event being read */
    bool in_event, any_event;
    bool chain;                     /* call chain lines were read */
    header h;
    size_t hdr_line;                /* its line */
    frame inline_frame;             /* the frame on its line, if inline_ok */
    bool inline_ok;
    bool type_periods;              /* opts->type counts periods, not 1s */
    uint32_t *locs;                 /* its stack, leaf first */
    size_t nlocs, cap_locs;
    frame pend;                     /* the last frame line, waiting for */
    bool has_pend;                  /* ... a srcline line after it */
    size_t pend_line;
    em_pset_line run[EM_PSET_MAX_LINES];    /* the location being built: */
    size_t nrun;                    /* inlined functions, innermost first */
    uint64_t run_addr;              /* ... at this address */
    char *text;                     /* scratch for NUL-terminated names */
    size_t cap_text;
    ember_label *labels;            /* scratch: base labels + 4 */
    /* groups and their hash index (hash, index plus one) */
    group *groups;
    size_t ngroups, cap_groups;
    em_hindex index;
} perf_dec;

/* Sets "ORIGIN:LINE: what" as the message and returns RC. */
static int dec_err(const perf_dec *d, int rc, const char *fmt, ...)
    EM_PRINTF(3, 4);
static int dec_err(const perf_dec *d, int rc, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return em_err(rc, "%s:%zu: %s", d->o->origin, d->lineno, what);
}

/* Puts "ORIGIN:LINE: " before the message a callee set; RC passes. */
static int set_err(const perf_dec *d, int rc)
{
    return em_err_prefix(rc, "%s:%zu", d->o->origin, d->lineno);
}

/* ---- lexing helpers ---------------------------------------------------- */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t skip_blanks(const char *l, size_t i, size_t n)
{
    while (i < n && is_blank(l[i]))
        i++;
    return i;
}

static size_t token_end(const char *l, size_t i, size_t n)
{
    while (i < n && !is_blank(l[i]))
        i++;
    return i;
}

static bool all_digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(p[i]))
            return false;
    return true;
}

/* A decimal number within int64, at most 18 digits so no overflow. */
static bool parse_dec(const char *p, size_t n, int64_t *out)
{
    int64_t v = 0;

    if (!all_digits(p, n) || n > 18)
        return false;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (p[i] - '0');
    *out = v;
    return true;
}

/* A thread or process id as perf prints it: digits, or -1. */
static bool is_id(const char *p, size_t n)
{
    return all_digits(p, n) || (n == 2 && p[0] == '-' && p[1] == '1');
}

/* PID or PID/TID; *SLASH gets the '/' offset or N. */
static bool is_pid_token(const char *p, size_t n, size_t *slash)
{
    const char *s = memchr(p, '/', n);

    *slash = s != NULL ? (size_t)(s - p) : n;
    if (s == NULL)
        return is_id(p, n);
    return is_id(p, *slash) && is_id(s + 1, n - *slash - 1);
}

/* [CPU] */
static bool is_cpu_token(const char *p, size_t n)
{
    return n >= 3 && p[0] == '[' && p[n - 1] == ']' && all_digits(p + 1, n - 2);
}

/* SECS.FRAC (perf prints 6 fraction digits, 9 with --ns) as nanoseconds;
** false when malformed or out of range. Digits past the ninth are dropped. */
static bool parse_time(const char *p, size_t n, int64_t *out)
{
    const char *dot = memchr(p, '.', n);
    size_t nsec, nfrac;
    uint64_t secs = 0, frac = 0;

    if (dot == NULL)
        return false;
    nsec = (size_t)(dot - p);
    nfrac = n - nsec - 1;
    if (!all_digits(p, nsec) || !all_digits(dot + 1, nfrac) || nsec > 10)
        return false;
    for (size_t i = 0; i < nsec; i++)
        secs = secs * 10 + (uint64_t)(p[i] - '0');
    for (size_t i = 0; i < 9; i++)
        frac = frac * 10 + (i < nfrac ? (uint64_t)(dot[1 + i] - '0') : 0);
    if (secs > PERF_MAX_SECS)
        return false;
    *out = (int64_t)(secs * 1000000000ull + frac);
    return true;
}

/* SECS.FRAC: as a header holds it (the range is checked later). */
static bool is_time_token(const char *p, size_t n)
{
    const char *dot = memchr(p, '.', n);

    return n >= 4 && p[n - 1] == ':' && dot != NULL &&
           all_digits(p, (size_t)(dot - p)) &&
           all_digits(dot + 1, n - 2 - (size_t)(dot - p));
}

/* ---- the header line --------------------------------------------------- */

/* One blank-separated token L[b..e) of a line. */
typedef struct tok {
    size_t b, e;
} tok;

/* The token at or after offset I of L[0..n) (b == n: none). */
static tok next_tok(const char *l, size_t i, size_t n)
{
    size_t b = skip_blanks(l, i, n);

    return (tok){ b, token_end(l, b, n) };
}

static bool tok_pid(const char *l, tok t)
{
    size_t slash;

    return t.e > t.b && is_pid_token(l + t.b, t.e - t.b, &slash);
}

static bool tok_cpu(const char *l, tok t)
{
    return is_cpu_token(l + t.b, t.e - t.b);
}

/* "NAME:": an event name and its colon. */
static bool tok_event(const char *l, tok t)
{
    return t.e - t.b >= 2 && l[t.e - 1] == ':';
}

/* A frame address: 1 to 16 hex digits. */
static bool tok_hex(const char *l, tok t)
{
    if (t.e == t.b || t.e - t.b > 16)
        return false;
    for (size_t i = t.b; i < t.e; i++)
        if (hex_value(l[i]) < 0)
            return false;
    return true;
}

/* Sets h->pid and h->tid from the PID or PID/TID token T. A single number
** is the thread id: perf's default field set prints TID. */
static void set_pid(const char *l, tok t, header *h)
{
    size_t slash;

    (void)is_pid_token(l + t.b, t.e - t.b, &slash);
    if (slash < t.e - t.b) {
        h->pid = (slice){ l + t.b, slash };
        h->tid = (slice){ l + t.b + slash + 1, t.e - t.b - slash - 1 };
    } else {
        h->pid = (slice){ l, 0 };
        h->tid = (slice){ l + t.b, t.e - t.b };
    }
}

/* h->comm is L[0..end) without its outer blanks. */
static void set_comm(const char *l, size_t end, header *h)
{
    h->comm = (slice){ l, end };
    while (h->comm.len > 0 && is_blank(h->comm.p[h->comm.len - 1]))
        h->comm.len--;
    while (h->comm.len > 0 && is_blank(h->comm.p[0]))
        h->comm.p++, h->comm.len--;
}

/* The fields before the period, each but COMM optional as perf script -F
** leaves them out: [COMM] [PID[/TID]] [[CPU]] [SECS.FRAC:]. Tokens are read
** up to the first time stamp or, without one, up to the event ("NAME:"),
** a PERF_RECORD_ line or the end. With a time stamp, PID and CPU are the
** tokens just before it and COMM all that precedes them (so a comm with
** spaces or digits is kept whole); without one, the first PID-like token
** is PID, COMM what precedes it. *AFTER gets the offset past the last
** field. False when nothing anchors the line: no time stamp and no PID. */
static bool find_fields(const char *l, size_t n, header *h, size_t *after)
{
    tok t, prev[2] = { { 0, 0 }, { 0, 0 } }, pid = { 0, 0 };
    size_t i = 0, ntok = 0, first;

    while ((t = next_tok(l, i, n)).b < n) {
        i = t.e;
        if (is_time_token(l + t.b, t.e - t.b)) {
            h->has_time = true;
            break;
        }
        if (t.e - t.b >= 12 && memcmp(l + t.b, "PERF_RECORD_", 12) == 0) {
            h->record = true;       /* --show-*-events: not a sample */
            return true;
        }
        if (tok_event(l, t))
            break;
        if (pid.e == 0 && tok_pid(l, t))
            pid = t;
        prev[1] = prev[0];
        prev[0] = t;
        ntok++;
    }
    if (h->has_time) {
        size_t k = ntok >= 1 && tok_cpu(l, prev[0]) ? 1 : 0;
        first = t.b;
        if (k == 1)
            first = prev[0].b;
        if (ntok > k && tok_pid(l, prev[k])) {
            set_pid(l, prev[k], h);
            first = prev[k].b;
        }
        set_comm(l, first, h);
        h->time = (slice){ l + t.b, t.e - t.b - 1 };
        *after = t.e;
        return true;
    }
    if (pid.e == 0)
        return false;
    set_pid(l, pid, h);
    set_comm(l, pid.b, h);
    t = next_tok(l, pid.e, n);
    *after = tok_cpu(l, t) ? t.e : pid.e;
    return true;
}

/* Whether the digits token at L[i..e) is the period: perf prints it before
** the event, so it is unless a frame on the line (perf record without -g,
** no event) starts with it: "1001001 55ac1085023d hot+0x1e (/x)" has a
** period, "1187 main (/x)" does not. */
static bool is_period(const char *l, size_t e, size_t n)
{
    tok t = next_tok(l, e, n);

    return t.b == n || tok_event(l, t) || tok_hex(l, t);
}

static bool parse_frame(const char *l, size_t n, frame *f, const char **why);

/* Parses header line L[0..n) into *H. On failure returns false with *WHY
** saying what is wrong (for the message when the line must be a header). */
static bool parse_header(const char *l, size_t n, header *h, const char **why)
{
    size_t i, e;
    frame f;

    memset(h, 0, sizeof *h);
    h->comm = h->pid = h->tid = h->event = (slice){ l, 0 };  /* never NULL */
    if (!find_fields(l, n, h, &i)) {
        *why = "expected an event header 'COMM PID[/TID] [CPU] SECS.FRAC: "
               "[PERIOD] EVENT:' (with a PID or a time stamp at least)";
        return false;
    }
    if (h->record)
        return true;
    if (h->has_time && !parse_time(h->time.p, h->time.len, &h->time_ns)) {
        *why = "time stamp out of range";
        return false;
    }
    i = skip_blanks(l, i, n);
    e = token_end(l, i, n);
    if (all_digits(l + i, e - i) && is_period(l, e, n)) {
        if (!parse_dec(l + i, e - i, &h->period)) {
            *why = "period out of range";
            return false;
        }
        h->has_period = true;
        i = skip_blanks(l, e, n);
        e = token_end(l, i, n);
    }
    if (n - i >= 12 && memcmp(l + i, "PERF_RECORD_", 12) == 0) {
        h->record = true;
        return true;
    }
    if (tok_event(l, (tok){ i, e })) {
        h->event = (slice){ l + i, e - i - 1 };
        i = skip_blanks(l, e, n);
    } else if (i < n && !parse_frame(l + i, n - i, &f, why)) {
        *why = "expected the event name and ':', a frame or the line end "
               "after the time stamp";
        return false;
    }
    if (i < n && hex_value(l[i]) >= 0)
        h->inline_frame = (slice){ l + i, n - i };
    return true;
}

/* ---- frames ------------------------------------------------------------ */

/* True when S is perf's "[unknown]". */
static bool is_unknown(slice s)
{
    return s.len == 9 && memcmp(s.p, "[unknown]", 9) == 0;
}

/* Drops a trailing "+0xHEX" from SYM. */
static slice strip_offset(slice sym)
{
    size_t i = sym.len;

    while (i > 0 && hex_value(sym.p[i - 1]) >= 0)
        i--;
    if (i < sym.len && i >= 3 && sym.p[i - 1] == 'x' && sym.p[i - 2] == '0' &&
        sym.p[i - 3] == '+')
        sym.len = i - 3;
    return sym;
}

/* Splits R[0..n) (after the address) into symbol and " (DSO)". */
static void split_sym_dso(const char *r, size_t n, frame *f)
{
    size_t depth = 0, j = n;

    f->sym = (slice){ r, n };
    f->dso = (slice){ r, 0 };
    if (n == 0 || r[n - 1] != ')')
        return;
    while (j-- > 0) {               /* back to the '(' matching the last ')' */
        if (r[j] == ')')
            depth++;
        else if (r[j] == '(' && --depth == 0)
            break;
    }
    if (depth != 0 || (j > 0 && !is_blank(r[j - 1])))
        return;                     /* "foo(int)": part of the symbol */
    f->dso = (slice){ r + j + 1, n - j - 2 };
    f->sym.len = j;
    while (f->sym.len > 0 && is_blank(r[f->sym.len - 1]))
        f->sym.len--;
}

/* Parses frame text L[0..n) (leading blanks skipped) into *F; false when
** it is not a frame. */
static bool parse_frame(const char *l, size_t n, frame *f, const char **why)
{
    size_t i = skip_blanks(l, 0, n), e = i;
    uint64_t a = 0;
    int v;

    while (e < n && (v = hex_value(l[e])) >= 0) {
        if (e - i == 16) {
            *why = "frame address wider than 64 bits";
            return false;
        }
        a = a << 4 | (uint64_t)v;
        e++;
    }
    if (e == i || (e < n && !is_blank(l[e]))) {
        *why = "expected a frame: a hex address, then the symbol and (DSO)";
        return false;
    }
    f->addr = a;
    e = skip_blanks(l, e, n);
    split_sym_dso(l + e, n - e, f);
    f->sym = strip_offset(f->sym);
    if (is_unknown(f->sym))
        f->sym.len = 0;
    if (is_unknown(f->dso))
        f->dso.len = 0;
    f->file = (slice){ l, 0 };
    f->line = 0;
    f->inlined = f->sym.len > 0 && f->dso.len == 7 &&
                 memcmp(f->dso.p, "inlined", 7) == 0;
    if (f->inlined)
        f->dso.len = 0;
    return true;
}

/* When L[0..n) is a line perf script -F srcline prints after a frame,
** "  FILE:LINE", returns true with *FILE and *LINE (len 0 and 0 for
** perf's "??:0" and for "DSO+0xOFF", its word for a line it could not
** find). */
static bool parse_srcline(const char *l, size_t n, slice *file,
                          int64_t *line)
{
    size_t i = skip_blanks(l, 0, n), c = n;
    slice s = { l + i, n - i };

    *file = (slice){ l, 0 };
    *line = 0;
    while (c > i && l[c - 1] != ':')
        c--;
    if (c > i + 1 && parse_dec(l + c, n - c, line)) {
        if (!(c - 1 - i == 2 && memcmp(s.p, "??", 2) == 0))
            *file = (slice){ s.p, c - 1 - i };
        return true;
    }
    return s.len > 3 && strip_offset(s).len < s.len &&
           token_end(s.p, 0, s.len) == s.len;
}

/* Makes d->text hold at least N bytes. */
static int text_reserve(perf_dec *d, size_t n)
{
    char *t;

    if (n <= d->cap_text)
        return EMBER_OK;
    t = em_realloc(d->text, n);
    if (t == NULL)
        return em_err(EMBER_ENOMEM, "out of memory for %zu bytes", n);
    d->text = t;
    d->cap_text = n;
    return EMBER_OK;
}

/* Copies S into d->text at OFF, NUL-terminated; returns the copy. */
static const char *text_at(perf_dec *d, size_t off, slice s)
{
    memcpy(d->text + off, s.p, s.len);
    d->text[off + s.len] = '\0';
    return d->text + off;
}

/* Appends the function of frame F (named by its symbol, in its source file
** when -F srcline said) as a line of the location being built. */
static int run_add(perf_dec *d, const frame *f)
{
    ember_function fn = { 0 };
    em_pset_line *ln = &d->run[d->nrun];
    int rc;

    if (d->nrun == EM_PSET_MAX_LINES)
        return dec_err(d, EMBER_ELIMIT, "more than %u inlined frames at "
                       "address %llx", EM_PSET_MAX_LINES,
                       (unsigned long long)f->addr);
    if ((rc = text_reserve(d, f->sym.len + f->file.len + 2)) != EMBER_OK)
        return set_err(d, rc);
    fn.name = text_at(d, 0, f->sym);
    if (f->file.len > 0)
        fn.file = text_at(d, f->sym.len + 1, f->file);
    if ((rc = em_pset_function(d->s, &fn, &ln->function)) != EMBER_OK)
        return set_err(d, rc);
    ln->line = f->line;
    d->nrun++;
    return EMBER_OK;
}

/* Pushes the location being built, at ADDR on mapping MAP1 (index plus
** one; 0: none), on the stack. */
static int run_end(perf_dec *d, uint32_t map1, uint64_t addr)
{
    uint32_t loc;
    size_t n = d->nrun;
    int rc;

    d->nrun = 0;
    if (d->nlocs == EM_PSET_MAX_DEPTH)
        return dec_err(d, EMBER_ELIMIT, "more than %u frames in one stack",
                       EM_PSET_MAX_DEPTH);
    if (d->nlocs == d->cap_locs) {
        size_t cap = d->cap_locs == 0 ? 64 : d->cap_locs * 2;
        uint32_t *p = em_realloc(d->locs, cap * sizeof *p);
        if (p == NULL)
            return dec_err(d, EMBER_ENOMEM, "out of memory for %zu frames",
                           cap);
        d->locs = p;
        d->cap_locs = cap;
    }
    if ((rc = em_pset_location(d->s, map1, addr, d->run, n, &loc)) != 0)
        return set_err(d, rc);
    d->locs[d->nlocs++] = loc;
    return EMBER_OK;
}

/* Adds frame F to the stack. perf prints a function inlined at an address
** as a frame "ADDR SYM (inlined)" before the frame of the function it was
** inlined into, at the same address: such frames become lines of that one
** location, innermost first, as pprof has them. An inlined frame whose
** address no frame of its own follows is a location without a mapping. An
** "[unknown]" symbol gives a location without lines, a missing or
** "[unknown]" DSO the unknown mapping. */
static int frame_add(perf_dec *d, const frame *f)
{
    ember_mapping m = { 0 };
    uint32_t map1 = 0;
    int rc = EMBER_OK;

    if (d->nrun > 0 && d->run_addr != f->addr)
        rc = run_end(d, 0, d->run_addr);
    d->run_addr = f->addr;
    if (rc == EMBER_OK && f->sym.len > 0)
        rc = run_add(d, f);
    if (rc != EMBER_OK || f->inlined)
        return rc;
    if (f->dso.len > 0) {
        if ((rc = text_reserve(d, f->dso.len + 1)) == EMBER_OK) {
            m.file = text_at(d, 0, f->dso);
            rc = em_pset_mapping(d->s, &m, &map1);
        }
        if (rc != EMBER_OK)
            return set_err(d, rc);
        map1++;
    }
    return run_end(d, map1, f->addr);
}

/* Adds the frame line read last, now that no srcline line follows it;
** messages name its line. */
static int pend_flush(perf_dec *d)
{
    size_t line = d->lineno;
    int rc;

    if (!d->has_pend)
        return EMBER_OK;
    d->has_pend = false;
    d->lineno = d->pend_line;
    rc = frame_add(d, &d->pend);
    d->lineno = line;
    return rc;
}

/* A call chain line L[0..n) of the current event: it waits in d->pend
** for the srcline that may follow it. */
static int frame_line(perf_dec *d, const char *l, size_t n)
{
    const char *why = NULL;
    frame f;
    int rc;

    if (!d->in_event)
        return dec_err(d, EMBER_EINVAL, "a frame line %s", d->any_event
                       ? "outside an event (after a blank line)"
                       : "before any event header");
    if (!parse_frame(l, n, &f, &why))
        return dec_err(d, EMBER_EINVAL, "%s", why);
    if ((rc = pend_flush(d)) != EMBER_OK)
        return rc;
    d->chain = true;
    d->pend = f;
    d->pend_line = d->lineno;
    d->has_pend = true;
    return EMBER_OK;
}

/* A srcline line (FILE, LINE) of the frame before it: the pending call
** chain frame, else the frame on the header line. */
static int srcline_line(perf_dec *d, slice file, int64_t line)
{
    frame *f = d->has_pend ? &d->pend
               : !d->chain && d->inline_ok ? &d->inline_frame : NULL;

    if (f == NULL)
        return dec_err(d, EMBER_EINVAL, "a source line (perf script -F "
                       "srcline) without a frame before it");
    f->file = file;
    f->line = line;
    return EMBER_OK;
}

/* ---- groups and their profiles ----------------------------------------- */

static bool slice_eq(slice a, slice b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

static uint64_t group_hash(const header *h, int64_t window)
{
    uint64_t x = em_hash64(h->comm.p, h->comm.len, (uint64_t)window);

    x = em_hash64(h->pid.p, h->pid.len, x);
    x = em_hash64(h->tid.p, h->tid.len, x ^ h->pid.len);
    return em_hash64(h->event.p, h->event.len, x ^ h->tid.len);
}

/* A header and window looked up among the groups. */
typedef struct group_key {
    const group *groups;
    const header *h;
    int64_t window;
} group_key;

static bool group_eq(const group_key *k, uint32_t idx)
{
    const group *g = &k->groups[idx];

    return g->window == k->window && slice_eq(g->comm, k->h->comm) &&
           slice_eq(g->pid, k->h->pid) && slice_eq(g->tid, k->h->tid) &&
           slice_eq(g->event, k->h->event);
}

#define EM_HT_NAME group_ix
#define EM_HT_KEY const group_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && group_eq(k, (e)->idx1 - 1))
#define EM_HT_WHAT "perf script: group index"
#include "ingest/hindex.h"

/* Appends the group of H in WINDOW and points slot SL, which an insert left
** free, at it. */
static int group_new(perf_dec *d, const header *h, int64_t window,
                     uint64_t hash, struct em_hslot *sl, group **out)
{
    group *g;

    if (d->ngroups == d->cap_groups) {
        size_t cap = d->cap_groups == 0 ? 16 : d->cap_groups * 2;
        g = em_realloc(d->groups, cap * sizeof *g);
        if (g == NULL)
            return dec_err(d, EMBER_ENOMEM, "out of memory for %zu groups",
                           cap);
        d->groups = g;
        d->cap_groups = cap;
    }
    g = &d->groups[d->ngroups++];
    *g = (group){ h->comm, h->pid, h->tid, h->event, window, hash, { -1, -1 } };
    sl->hash = hash;
    sl->idx1 = (uint32_t)d->ngroups;
    *out = g;
    return EMBER_OK;
}

/* Finds or makes the group of header H in WINDOW. */
static int group_get(perf_dec *d, const header *h, int64_t window, group **out)
{
    uint64_t hash = group_hash(h, window);
    group_key k = { d->groups, h, window };
    struct em_hslot *sl;
    bool found;

    if ((sl = group_ix_insert(&d->index, hash, &k, &found)) == NULL)
        return dec_err(d, EMBER_ENOMEM, "out of memory for %zu groups",
                       d->ngroups);
    if (found) {
        *out = &d->groups[sl->idx1 - 1];
        return EMBER_OK;
    }
    return group_new(d, h, window, hash, sl, out);
}

/* The event name without perf's modifiers (":u", ":ppp", ...); a part of
** other letters is part of the name, as in "sched:sched_switch". */
static slice event_base(slice ev)
{
    const char *c = ev.p + ev.len;

    while (c > ev.p && c[-1] != ':')
        c--;
    if (c == ev.p || c == ev.p + ev.len)
        return ev;
    for (const char *m = c; m < ev.p + ev.len; m++)
        if (strchr("ukhGHIpPSDWeb", *m) == NULL || *m == '\0')
            return ev;
    return (slice){ ev.p, (size_t)(c - 1 - ev.p) };
}

/* Writes the type of profile WHICH (0: counts, 1: periods) of event EV. */
static void event_type(slice ev, int which, char out[TYPE_BUF])
{
    slice b = event_base(ev);
    char e[EM_LABEL_NAME_BUF];

    if (ev.len == 0) {              /* perf script -F without event */
        snprintf(out, TYPE_BUF, "%s", which == 0 ? ANY_SAMPLES : ANY_PERIODS);
        return;
    }
    if ((b.len == 9 && memcmp(b.p, "cpu-clock", 9) == 0) ||
        (b.len == 10 && memcmp(b.p, "task-clock", 10) == 0)) {
        snprintf(out, TYPE_BUF, "%s", which == 0 ? CPU_SAMPLES : CPU_NANOS);
        return;
    }
    em_label_name_sanitize(b.p, b.len, e);
    snprintf(out, TYPE_BUF, "perf_%s:%s:count:%s:count:delta", e,
             which == 0 ? "samples" : e, e);
}

/* Adds label NAME = V to EXTRA (skipped when V is empty: absent). */
static int extra_label(perf_dec *d, ember_label *extra, size_t *n,
                       const char *name, slice v)
{
    if (v.len == 0)
        return EMBER_OK;
    extra[*n].name = name;
    extra[*n].value = em_pset_strndup(d->s, v.p, v.len);
    if (extra[*n].value == NULL)
        return EMBER_ENOMEM;
    (*n)++;
    return EMBER_OK;
}

/* Makes profile WHICH (0: counts, 1: periods) of group G, whose first
** sample has PERIOD. */
static int profile_make(perf_dec *d, group *g, int which, int64_t period)
{
    ember_label extra[4];
    size_t nextra = 0, n = 0;
    char type[TYPE_BUF];
    int64_t time_ms = em_add_wrap(d->wall0_ms, g->window * d->o->window_ms);
    uint32_t idx;
    int rc = extra_label(d, extra, &nextra, "comm", g->comm);

    if (rc == EMBER_OK)
        rc = extra_label(d, extra, &nextra, "pid", g->pid);
    if (rc == EMBER_OK)
        rc = extra_label(d, extra, &nextra, "tid", g->tid);
    if (rc == EMBER_OK)
        rc = extra_label(d, extra, &nextra, "event", g->event);
    if (rc == EMBER_OK)
        rc = em_labels_join(d->s, d->o->labels, d->o->nlabels, extra, nextra,
                            d->labels, &n);
    if (rc != EMBER_OK)
        return set_err(d, rc);
    if (d->o->type == NULL)
        event_type(g->event, which, type);
    rc = em_pset_profile_add(d->s, d->o->type != NULL ? d->o->type : type,
                             d->labels, n, time_ms, d->window_ns,
                             d->o->period != 0 ? d->o->period : period, &idx);
    if (rc != EMBER_OK)
        return set_err(d, rc);
    g->prof[which] = idx;
    return EMBER_OK;
}

/* Adds VALUE for STACK to profile WHICH of G, making the profile first. */
static int group_sample(perf_dec *d, group *g, int which, uint32_t stack,
                        int64_t value)
{
    int rc = EMBER_OK;

    if (g->prof[which] < 0)
        rc = profile_make(d, g, which, d->h.period);
    if (rc == EMBER_OK &&
        (rc = em_pset_sample(d->s, (uint32_t)g->prof[which], stack, value)) !=
        EMBER_OK)
        rc = set_err(d, rc);
    return rc;
}

/* Floor of A / B for B > 0 (samples before the first one get window -1). */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return a % b != 0 && a < 0 ? q - 1 : q;
}

/* Adds the event being read, if any, as one sample (two for a CPU clock
** with a period). Messages name the header's line. */
static int sample_add(perf_dec *d)
{
    const header *h = &d->h;
    group *g = NULL;
    uint32_t stack;
    int64_t value = 1;
    int rc = EMBER_OK;

    if (!d->chain && d->inline_ok)
        rc = frame_add(d, &d->inline_frame);
    if (rc == EMBER_OK && d->nrun > 0)
        rc = run_end(d, 0, d->run_addr);
    if (rc == EMBER_OK &&
        (rc = em_pset_stack(d->s, d->locs, d->nlocs, &stack)) != EMBER_OK)
        rc = set_err(d, rc);
    if (rc == EMBER_OK)
        rc = group_get(d, h, floor_div(h->time_ns - d->first_ns,
                                       d->window_ns), &g);
    if (rc == EMBER_OK && d->o->type != NULL && d->type_periods &&
        h->has_period)
        value = h->period;
    if (rc == EMBER_OK)
        rc = group_sample(d, g, 0, stack, value);
    if (rc == EMBER_OK && d->o->type == NULL && h->has_period)
        rc = group_sample(d, g, 1, stack, h->period);
    return rc;
}

/* Ends the event being read (a blank line, a new header, the end). */
static int event_end(perf_dec *d)
{
    size_t line = d->lineno;
    int rc;

    if (!d->in_event)
        return EMBER_OK;
    d->in_event = false;
    if ((rc = pend_flush(d)) == EMBER_OK) {
        d->lineno = d->hdr_line;
        rc = sample_add(d);
        d->lineno = line;
    }
    d->nlocs = 0;
    d->nrun = 0;
    return rc;
}

/* Starts the event of header H, read on the current line. */
static int event_start(perf_dec *d, const header *h)
{
    const char *why;
    int rc = event_end(d);

    if (rc != EMBER_OK || h->record)
        return rc;
    if (!d->any_event) {
        d->first_ns = h->time_ns;
        d->wall0_ms = d->o->time_ms;
        if (d->have_captured)
            d->wall0_ms = d->captured_ms -
                (d->have_last && d->last_ns > h->time_ns
                 ? (d->last_ns - h->time_ns) / 1000000 : 0);
    }
    d->any_event = d->in_event = true;
    d->chain = false;
    d->h = *h;
    d->hdr_line = d->lineno;
    d->inline_ok = h->inline_frame.len > 0 &&
        parse_frame(h->inline_frame.p, h->inline_frame.len,
                    &d->inline_frame, &why);
    return EMBER_OK;
}

/* ---- comments: perf script --header ------------------------------------ */

/* Parses ctime's "Sat Nov 21 09:56:57 2026" (local time) into *MS. */
static bool parse_ctime(const char *p, size_t n, int64_t *ms)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char buf[64], wday[4], mon[4];
    int day, hh, mm, ss, year;
    const char *m;
    struct tm tm = { 0 };
    time_t t;

    if (n >= sizeof buf)
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (sscanf(buf, "%3s %3s %2d %2d:%2d:%2d %4d", wday, mon, &day, &hh, &mm,
               &ss, &year) != 7 || strlen(mon) != 3 ||
        (m = strstr(months, mon)) == NULL || (m - months) % 3 != 0 ||
        day < 1 || day > 31 || hh < 0 || hh > 23 || mm < 0 || mm > 59 ||
        ss < 0 || ss > 60 || year < 1970)
        return false;
    tm.tm_year = year - 1900;
    tm.tm_mon = (int)(m - months) / 3;
    tm.tm_mday = day;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    tm.tm_isdst = -1;           /* let the zone's rules say */
    if ((t = mktime(&tm)) == (time_t)-1)
        return false;
    *ms = (int64_t)t * 1000;
    return true;
}

/* When L[0..n) is "# KEY : VALUE", returns VALUE's offset; else 0. */
static size_t header_field(const char *l, size_t n, const char *key)
{
    size_t k = strlen(key), i = skip_blanks(l, 1, n);

    if (n - i < k || memcmp(l + i, key, k) != 0)
        return 0;
    i = skip_blanks(l, i + k, n);
    if (i == n || l[i] != ':')
        return 0;
    return skip_blanks(l, i + 1, n);
}

/* perf script --header prints its fields one per '#' line in a block that
** opens with "# ========" and "# captured on" and closes with "# ========"
** (perf's session.c), but a field value holding a line break goes on
** without a '#': print_cmdline (perf's header.c) prints each argument as
** given, so `sh -c 'a<newline>b'` puts "b" on a line of its own (issue
** 15). Inside the block such a line belongs to the field before it,
** whatever it looks like. Reading a pipe (perf record -o - | perf script
** --header) perf prints the fields after the block instead; there the
** "# cmdline" field runs on to the next '#' line. Sets d->cont. */
static void header_lines(perf_dec *d, const char *l, size_t n)
{
    bool rule = n == 10 && memcmp(l, "# ========", 10) == 0;

    if (d->in_block) {
        d->in_block = d->cont = !rule;
    } else if (d->rule_line > 0 && d->rule_line + 1 == d->lineno &&
               header_field(l, n, "captured on") > 0) {
        d->in_block = d->cont = true;
        d->field_line = d->rule_line;
    } else {
        d->cont = header_field(l, n, "cmdline") > 0;
        d->field_line = d->lineno;
    }
    if (!d->in_block || rule)
        d->cont_line = 0;           /* what went before has ended */
    if (rule)
        d->rule_line = d->lineno;
}

/* At the end of the input: lines taken as a field's continuation that
** nothing ended may have been events, so they are an error, not lost. */
static int header_end(perf_dec *d)
{
    if (d->cont_line == 0)
        return EMBER_OK;
    d->lineno = d->cont_line;
    if (d->in_block)
        return dec_err(d, EMBER_EINVAL, "taken as part of the perf script "
                       "--header block of line %zu, which no '# ========' "
                       "line closes", d->field_line);
    return dec_err(d, EMBER_EINVAL, "taken as part of the '# cmdline' "
                   "header field of line %zu, which no '#' line ends",
                   d->field_line);
}

/* A '#' line: the header's extent, and before the first sample the wall
** clock of the recording. */
static void comment_line(perf_dec *d, const char *l, size_t n)
{
    size_t v;
    int64_t t;

    header_lines(d, l, n);
    if (d->any_event)
        return;
    if ((v = header_field(l, n, "captured on")) > 0 && !d->have_captured)
        d->have_captured = parse_ctime(l + v, n - v, &d->captured_ms);
    else if ((v = header_field(l, n, "time of last sample")) > 0 &&
             parse_time(l + v, token_end(l, v, n) - v, &t)) {
        d->last_ns = t;
        d->have_last = true;
    }
}

/* ---- lines ------------------------------------------------------------- */

/* Sets *N to the length of the line at P (REM bytes left) without its '\n',
** looking no further than the limit allows. */
static int line_length(const perf_dec *d, const char *p, size_t rem,
                       size_t *n)
{
    size_t window = PERF_MAX_LINE + 2;              /* content, '\r', '\n' */
    const char *nl;
    size_t raw;

    if (window > rem)
        window = rem;
    nl = memchr(p, '\n', window);
    raw = nl != NULL ? (size_t)(nl - p) : window;
    if (raw - (raw > 0 && p[raw - 1] == '\r') > PERF_MAX_LINE)
        return dec_err(d, EMBER_ELIMIT, "line longer than %u bytes",
                       PERF_MAX_LINE);
    *n = raw;
    return EMBER_OK;
}

/* A space-led line L[0..n) inside an event: a right-aligned header with a
** time stamp, a srcline, a frame (perf's own are TAB-led, hand-made ones
** may not be), or a header without a time stamp, in that order. */
static int space_line(perf_dec *d, const char *l, size_t n)
{
    const char *why = NULL, *fwhy = NULL;
    frame f;
    header h;
    slice file;
    int64_t line;
    bool is_hdr = parse_header(l, n, &h, &why);

    if (is_hdr && (h.has_time || h.record))
        return event_start(d, &h);
    if (parse_srcline(l, n, &file, &line))
        return srcline_line(d, file, line);
    if (parse_frame(l, n, &f, &fwhy) || !is_hdr)
        return frame_line(d, l, n);
    return event_start(d, &h);
}

/* Reads one line L[0..n) without its line end. */
static int dec_line(perf_dec *d, const char *l, size_t n)
{
    const char *why = NULL;
    header h;
    int rc;

    while (n > 0 && (is_blank(l[n - 1]) || l[n - 1] == '\r'))
        n--;
    if (memchr(l, '\0', n) != NULL)
        return dec_err(d, EMBER_EINVAL, "unexpected NUL byte: not perf "
                       "script text");
    if (d->cont && (n == 0 || l[0] != '#')) {
        if (n > 0 && d->cont_line == 0)     /* a header field goes on */
            d->cont_line = d->lineno;
        return EMBER_OK;
    }
    if (n == 0)
        return event_end(d);
    if (l[0] == '#') {
        rc = event_end(d);
        comment_line(d, l, n);
        return rc;
    }
    if (l[0] == '\t')              /* perf's frame lines start with a tab */
        return frame_line(d, l, n);
    if (l[0] == ' ' && d->in_event)
        return space_line(d, l, n);
    if (parse_header(l, n, &h, &why))
        return event_start(d, &h);
    return dec_err(d, EMBER_EINVAL, "%s", why);
}

/* Checks the options the decoder needs and sizes its scratch. */
static int dec_init(perf_dec *d, const em_import_opts *o, em_pset *s)
{
    const char *unit;

    d->o = o;
    d->s = s;
    if (o->window_ms <= 0 || o->window_ms > INT64_MAX / 1000000)
        return em_err(EMBER_EINVAL, "%s: window of %lld ms out of range",
                      o->origin, (long long)o->window_ms);
    d->window_ns = o->window_ms * 1000000;
    if (o->type != NULL) {      /* name:sample_type:UNIT:... (checked) */
        unit = strchr(strchr(o->type, ':') + 1, ':') + 1;
        d->type_periods = strncmp(unit, "count:", 6) != 0;
    }
    d->labels = em_malloc((o->nlabels + 4) * sizeof *d->labels);
    if (d->labels == NULL)
        return em_err(EMBER_ENOMEM, "%s: out of memory for %zu labels",
                      o->origin, o->nlabels + 4);
    return EMBER_OK;
}

static void dec_free(perf_dec *d)
{
    em_free(d->locs);
    em_free(d->text);
    em_free(d->labels);
    em_free(d->groups);
    group_ix_free(&d->index);
}

int em_perf_decode(const char *buf, size_t len, const em_import_opts *opts,
                   em_pset *out)
{
    em_import_opts o;
    perf_dec d = { 0 };
    size_t pos = 0, n = 0;
    int rc = em_import_opts_norm(opts, &o);

    if (rc != EMBER_OK)
        return rc;
    if ((buf == NULL && len > 0) || out == NULL)
        return em_err(EMBER_EINVAL, "%s: no buffer or no set", o.origin);
    rc = dec_init(&d, &o, out);
    while (rc == EMBER_OK && pos < len) {
        d.lineno++;
        rc = line_length(&d, buf + pos, len - pos, &n);
        if (rc == EMBER_OK)
            rc = dec_line(&d, buf + pos, n);
        pos += n + 1;               /* past the '\n' (or past the end) */
    }
    if (rc == EMBER_OK)
        rc = event_end(&d);
    if (rc == EMBER_OK)
        rc = header_end(&d);
    dec_free(&d);
    return rc;
}
