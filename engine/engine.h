/*
** engine/engine.h: what the layers above (query/, ingest/, bpf/, repl/) and
** the tests may call from the engine besides the public ember.h: allocation
** with a failure hook, per-thread error messages, varints, byte buffers, the
** stable content hash, and the internal engine entry points.
**
** Invariant: every allocation in Ember goes through em_malloc and friends so
** that tests can fail the Nth one (SQLite's habit).
*/
#ifndef EM_ENGINE_H
#define EM_ENGINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ember.h"

#define EM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define EM_UNUSED(x) ((void)(x))
#define EM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- allocation (engine/alloc.c) ---------------------------------------- */

void *em_malloc(size_t n);
void *em_calloc(size_t n, size_t size);
void *em_realloc(void *p, size_t n);
void em_free(void *p);
char *em_strdup(const char *s);
char *em_strndup(const char *s, size_t n);
/* P (an array of *CAP elements of SIZE bytes) grown by doubling, from 16,
** to hold NEED elements; P itself when it already does. NULL when out of
** memory or past SIZE_MAX, with P and *CAP untouched; the caller says what
** failed. */
void *em_grow(void *p, size_t *cap, size_t need, size_t size);

/* Test hook: the Nth allocation from now (1 = the next) fails, and every one
** after it until the hook is reset with 0. Counts across all threads. */
void em_alloc_fail_at(uint64_t n);
/* Allocations made since start (successful or not), for tests. */
uint64_t em_alloc_calls(void);
/* Test hook: from now on, counts the bytes em_malloc and friends hold (as
** malloc_usable_size sees them) and the most they held at once; ON false
** stops. Blocks allocated before the start and freed after it are
** subtracted too, so start where little is about to be freed. */
void em_alloc_count(bool on);
/* The most bytes held at once since em_alloc_count(true). */
uint64_t em_alloc_peak(void);

/* ---- a query's budget (engine/alloc.c) ----------------------------------- */

/* What a budget counts progress in, for the message that says how far a
** query got when its time ran out. */
enum { EM_STEP_CHUNK = 0,       /* a stored chunk read (engine/read.c) */
       EM_STEP_SERIES,          /* a series of a series query built */
       EM_STEP_STACK,           /* stacks resolved to names */
       EM_STEP_COUNT_ };

/* One query's limits (ember_query_opts' timeout_ms and max_bytes), made
** the calling thread's own by em_budget_swap for as long as the query
** runs. Memory is counted at one point, the allocator: every em_malloc,
** em_calloc and em_realloc of the thread while the budget is its own adds
** the block's usable size to HELD and each em_free takes it off; one that
** would take HELD past MAX_BYTES is refused (NULL, as when out of memory:
** every caller already fails cleanly then) and noted in REFUSED, so that
** the query tells its ENOMEM from a real one. Time is checked at
** em_budget_step, which the loops that do a query's work call per chunk,
** per series, per batch of stacks: never per sample. */
typedef struct em_budget {
    int64_t deadline_ns;        /* CLOCK_MONOTONIC; 0: no time limit */
    int64_t start_ns;           /* when the query started */
    uint64_t max_bytes;         /* 0: no memory limit */
    int64_t held, peak;         /* bytes counted now, and at most */
    uint64_t refused;           /* bytes of the first allocation refused */
    int64_t refused_held;       /* HELD when it was */
    bool expired;               /* the deadline passed at a step */
    uint64_t steps[EM_STEP_COUNT_];     /* progress, by EM_STEP_* */
} em_budget;

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t em_mono_ns(void);
/* Makes B (NULL: none) the calling thread's budget; returns the one it
** had. A query swaps its own in and the old one back when it ends; code
** whose memory is not the query's (the handle's chunk cache) swaps NULL
** in around it. */
em_budget *em_budget_swap(em_budget *b);
/* Counts N steps of KIND (EM_STEP_*) on the thread's budget and checks its
** deadline: EMBER_ETIMEOUT once past it (and at every step after), else
** EMBER_OK; always EMBER_OK without a budget. Sets no message: the query
** says how far it got when it ends (em_budget_expired_msg). */
int em_budget_step(int kind, uint64_t n);
/* Counts block P (NULL: none) on the thread's budget as if it had just
** been allocated (ADOPT) or freed (!ADOPT): buffers a handle pools across
** queries (the merge accumulator) count for the query holding them. */
void em_budget_hold(void *p, bool adopt);

/* ---- errors (engine/error.c) -------------------------------------------- */

/* Sets the calling thread's message and returns RC, so that the caller can
** write `return em_err(EMBER_EINVAL, "label %zu: empty name", i);`. */
int em_err(int rc, const char *fmt, ...) EM_PRINTF(2, 3);
int em_verr(int rc, const char *fmt, va_list ap) EM_PRINTF(2, 0);
/* Corruption, with the engine file and line that detected it appended
** (SQLite's SQLITE_CORRUPT_BKPT), e.g. "... [engine/chunk.c:212]". */
int em_corrupt_at(const char *file, int line, const char *fmt, ...)
    EM_PRINTF(3, 4);
#define EM_CORRUPT(...) em_corrupt_at(__FILE__, __LINE__, __VA_ARGS__)
/* Prefixes the current message with "WHAT: " and returns RC; no-op when
** RC is EMBER_OK. */
int em_err_prefix(int rc, const char *fmt, ...) EM_PRINTF(2, 3);
const char *em_errmsg(void);
void em_err_clear(void);

/* ---- varints and zig-zag (LEB128, as protobuf) --------------------------- */

#define EM_VARINT_MAX 10

static inline size_t em_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Reads one varint at *P (not past END). Returns 0 and advances *P, or -1
** when truncated or longer than 10 bytes or overflowing 64 bits. */
static inline int em_varint_get(const uint8_t **p, const uint8_t *end,
                                uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t r = 0;
    unsigned shift = 0;

    while (q < end) {
        uint8_t b = *q++;
        if (shift == 63 && b > 1)
            return -1;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *p = q;
            *v = r;
            return 0;
        }
        shift += 7;
        if (shift > 63)
            return -1;
    }
    return -1;
}

static inline uint64_t em_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t em_unzigzag(uint64_t u)
{
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

/* Wrapping arithmetic on int64 without undefined behaviour. */
static inline int64_t em_add_wrap(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t em_sub_wrap(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* Adds V to *POS when positive, else to *NEG; false when that sum leaves
** int64. Values whose two sums both fit have every partial sum in range:
** the rule that keeps each stored profile's and each merge's sums exact
** (issue 12), checked once per value instead of at every later sum. */
static inline bool em_sum_add(int64_t *pos, int64_t *neg, int64_t v)
{
    return v > 0 ? !__builtin_add_overflow(*pos, v, pos)
                 : !__builtin_add_overflow(*neg, v, neg);
}

/* A + B, held at INT64_MAX or INT64_MIN where it would not fit: for
** figures that are shown, never stored or summed again. Sums that must be
** exact are checked with __builtin_add_overflow where they are made. */
static inline int64_t em_add_sat(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return a > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* Little-endian fixed-width stores and loads (the chunk format's). Written
** out byte by byte, not as loops: gcc -O2 merges these into one move, but
** leaves a loop a loop (a byte-at-a-time em_get_le64 was most of the
** content hash's time). */
static inline void em_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void em_put_le64(uint8_t *p, uint64_t v)
{
    em_put_le32(p, (uint32_t)v);
    em_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t em_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t em_get_le64(const uint8_t *p)
{
    return (uint64_t)em_get_le32(p) | (uint64_t)em_get_le32(p + 4) << 32;
}

/* Big-endian 64-bit stores and loads, for keys whose byte order must be
** their numeric order (LMDB compares keys as bytes). */
static inline void em_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline uint64_t em_get_be64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* ---- UTF-8 (engine/utf8.c) ---------------------------------------------- */

/* What em_utf8_decode yields for a byte that starts no character. */
#define EM_UTF8_BAD 0xfffdu

/* Decodes the character at S (N > 0 bytes there; never reads past them)
** into *CP and returns its width, 1 to 4. Only the shortest form of a
** scalar value is a character: an overlong form, a surrogate, a value past
** U+10FFFF, a truncated sequence, a stray continuation byte and 0xC0, 0xC1,
** 0xF5..0xFF each decode as one byte, EM_UTF8_BAD of width 1, as Go's
** utf8.DecodeRune and RE2 do (the regex matches such a byte by its value,
** docs/regex.md), so every scan advances. Inline: the regex VM calls it per
** subject character. */
static inline unsigned em_utf8_decode(const uint8_t *s, size_t n,
                                      uint32_t *cp)
{
    uint8_t b = s[0], lo = 0x80, hi = 0xbf;
    unsigned need;
    uint32_t c;

    *cp = b;
    if (b < 0x80)
        return 1;
    *cp = EM_UTF8_BAD;
    if (b >= 0xc2 && b <= 0xdf) {
        need = 1, c = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {    /* bounds bar overlong, D800.. */
        need = 2, c = b & 0x0f;
        lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {    /* ... overlong, past 10FFFF */
        need = 3, c = b & 0x07;
        lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 1;
    }
    if (n <= need || s[1] < lo || s[1] > hi)
        return 1;
    for (unsigned k = 1; k <= need; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 1;
        c = (c << 6) | (s[k] & 0x3f);
    }
    *cp = c;
    return need + 1;
}

/* Characters in the N bytes at S as em_utf8_decode reads them: each byte
** that starts none counts one. */
size_t em_utf8_count(const char *s, size_t n);

/* ---- growable byte buffer (engine/buf.c) --------------------------------- */

typedef struct em_buf {
    uint8_t *p;
    size_t len, cap;
} em_buf;

/* Grows B to hold EXTRA more bytes: em_buf_reserve's slow path. */
int em_buf_grow(em_buf *b, size_t extra);
void em_buf_free(em_buf *b);

/* Inline, because the record encoders call these per varint and the room
** is nearly always there already. EMBER_OK, or ENOMEM or ELIMIT. */
static inline int em_buf_reserve(em_buf *b, size_t extra)
{
    return extra <= b->cap - b->len ? EMBER_OK : em_buf_grow(b, extra);
}

static inline int em_buf_put(em_buf *b, const void *data, size_t n)
{
    int rc = em_buf_reserve(b, n);
    if (rc == EMBER_OK && n > 0) {
        memcpy(b->p + b->len, data, n);
        b->len += n;
    }
    return rc;
}

static inline int em_buf_varint(em_buf *b, uint64_t v)
{
    int rc = em_buf_reserve(b, EM_VARINT_MAX);
    if (rc == EMBER_OK)
        b->len += em_varint_put(b->p + b->len, v);
    return rc;
}

/* ---- string lists (engine/meta.c) ---------------------------------------- */

/* A new empty list (NULL: out of memory), to fill with em_strlist_add: the
** metadata calls' lists and the client's (client/client.c). */
ember_strlist *em_strlist_new(void);
/* Appends the LEN bytes at S. EMBER_OK or EMBER_ENOMEM. */
int em_strlist_add(ember_strlist *l, const char *s, size_t len);

/* ---- JSON strings (engine/json.c) --------------------------------------- */

typedef void (*em_json_put_fn)(void *ctx, const char *s, size_t n);
/* Writes STR (NULL: "") as a quoted JSON string through PUT: escapes as
** JSON needs, valid UTF-8 as it is, other bytes as U+FFFD. */
void em_json_string(const char *str, em_json_put_fn put, void *ctx);
/* The same, appended to B; EMBER_OK or EMBER_ENOMEM. */
int em_buf_json(em_buf *b, const char *str);

/* ---- hashing (engine/hash.c) -------------------------------------------- */

/* The stable 64-bit content hash behind every dedup index; its exact
** definition is part of the file format (docs/file-format.md). */
uint64_t em_hash64(const void *data, size_t n, uint64_t seed);

/* CRC-32 (the gzip polynomial, as zlib's crc32) of N bytes at P continuing
** CRC (0 to start): every checksum Ember stores. libdeflate's, which folds
** with carry-less multiplies where zlib's runs tables, about twice as fast
** here; the values are zlib's. */
uint32_t em_crc32(uint32_t crc, const void *p, size_t n);

/* A table of ENTRY slots for the template engine/htab.h, which defines its
** functions. Zeroed, it is an empty table with no slots. */
#define EM_HTAB_TYPE(entry)                                                  \
    struct {                                                                 \
        entry *slots;                                                        \
        size_t mask;        /* slot count minus one; 0 with no slots */      \
        size_t count;       /* slots in use */                               \
    }

/* Mixes a small integer key (an id, a pid) into a hash whose low bits
** spread, for the tables of engine/htab.h: murmur3's 64-bit finalizer. */
static inline uint64_t em_mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* ---- regular expressions (engine/regex.c) -------------------------------- */

/* A compiled, fully anchored regular expression matched by a Thompson-NFA
** simulation: time O(pattern * input), never backtracking. Syntax and
** meaning are Go's regexp as Prometheus compiles a matcher, ^(?s:re)$:
** '.' matches '\n' (docs/regex.md). */
typedef struct em_regex em_regex;

/* Compiles PATTERN; on failure returns EMBER_EINVAL (or ENOMEM, ELIMIT) with
** a message naming the column and what was expected. */
int em_regex_compile(const char *pattern, em_regex **out);
/* True when the whole of S[0..len) matches. */
bool em_regex_match(const em_regex *re, const char *s, size_t len);
/* The literal every match must start with (possibly ""), for index seeks. */
const char *em_regex_prefix(const em_regex *re, size_t *len);
/* True when the regex matches exactly one string, the prefix. */
bool em_regex_is_literal(const em_regex *re);
void em_regex_free(em_regex *re);

/* ---- shared libraries opened when needed (engine/dl.c) ------------------- */

/* A library whose functions are called through FNS once em_dl_load has
** filled them: NAMES[i] into FNS[i]. */
typedef struct em_dl_lib {
    const char *soname;         /* "libcurl.so.4" */
    const char *package;        /* the Debian package that installs it */
    const char *const *names;
    void **fns;
    size_t n;
    bool tried;
    int rc;
    char msg[256];
} em_dl_lib;

/* Loads L the first time (thread-safe), after that says how it went:
** EMBER_OK, or EMBER_ENOTFOUND naming the library or function missing. */
int em_dl_load(em_dl_lib *l);

/* ---- reads of mapped files (engine/read.c) -------------------------------- */

/* A page size to round mapped ranges by (the kernel's is no larger). */
#define EM_PAGE_GUESS 4096u

/* Asks the kernel to read the mapped bytes [P, P + LEN) from disk in one
** request. LMDB's map and block files are mapped without read-ahead, so
** without it each 4 KiB page of a chunk is a read of its own. */
void em_willneed(const void *p, size_t len);

/* ---- time and labels (engine/util.c) ------------------------------------- */

/* Checks a label name against Prometheus rules; EMBER_OK or EINVAL. */
int em_label_name_check(const char *name);
/* Checks N labels as an append would (names, the reserved __type__, value
** sizes, a name given twice, at most 64), so that a caller can refuse them
** before it reads any input; EMBER_OK, EINVAL or ELIMIT naming the label. */
int em_labels_check(const ember_label *labels, size_t n);
/* Checks a profile type string (5 or 6 colon-separated parts, the 6th
** "delta"); EMBER_OK or EINVAL with a message. */
int em_profile_type_check(const char *type);
/* True when TYPE's profiles count what happened in their duration (its
** sixth part is "delta"), so that profiles add up over time; the others
** are snapshots (gauges) or running totals. */
bool em_type_is_delta(const char *type);

/* ---- the query layer's reads (engine/read.c) ------------------------------ */

/* A reader: one snapshot that every question of a query reads, and one
** merge accumulator that its merges share, so that a merge by a label with
** many groups costs what one merge costs. Selectors given to a reader mean
** what they mean to ember_merge (type, matchers, range, focus, ignore,
** series ids); the snapshot's pointers live until em_reader_close. */
typedef struct em_reader em_reader;

int em_reader_open(ember_db *db, em_reader **out);
void em_reader_close(em_reader *rd);                /* NULL: no-op */
/* The snapshot, for resolving stacks (em_rprofile_build). */
ember_snapshot *em_reader_snapshot(em_reader *rd);
/* Bounds of snapshot S's location, function and mapping ids: every id a
** record names is below its table's bound (one past it is corruption,
** which the lookup reports), for callers that index arrays by id. */
void em_snapshot_bounds(ember_snapshot *s, uint32_t *locations,
                        uint32_t *functions, uint32_t *mappings);
/* Adds what SEL selects to the reader's merge accumulator; on failure the
** accumulator is emptied. */
int em_reader_merge_add(em_reader *rd, const ember_selector *sel);
/* What the profiles added since the last take summed to before their
** selectors' focus and ignore (their stored totals; 0 without a focus or
** ignore): read it before em_reader_merge_take empties the merge. */
int64_t em_reader_merge_whole(const em_reader *rd);
/* The accumulated merge as a new *OUT (ember_merged_free), and empties the
** accumulator. Nothing added: an empty merge. */
int em_reader_merge_take(em_reader *rd, ember_merged **out);
/* ember_totals_get on the reader's snapshot. */
int em_reader_totals(em_reader *rd, const ember_selector *sel,
                     ember_totals **out);
/* Series I's profile durations (ns), beside ember_totals_series' points. */
const int64_t *em_totals_durations(const ember_totals *t, size_t i);

/* The label names an import took from the content of its files (pprof
** sample labels, perf script's comm, pid, tid and event, ...), which split
** one file's profile into several series at one instant, as a new sorted
** *OUT (ember_strlist_free); the other labels name a source (`@ T`). */
int em_reader_split_labels(em_reader *rd, ember_strlist **out);
/* Notes label NAME (at most 64 bytes) as one taken from a file's content,
** in TXN (a meta key; see docs/file-format.md, section 12). */
int em_txn_note_split_label(ember_txn *txn, const char *name);

/* One series a selector selects. */
typedef struct em_series_info {
    uint32_t id;
    const char *type;               /* into the snapshot */
    const ember_label *labels;      /* sorted by name; strings into the
                                    ** snapshot, array into the set */
    size_t nlabels;
    size_t first;                   /* labels' index in the set's storage */
} em_series_info;

typedef struct em_series_set {
    em_series_info *v;              /* by series id */
    size_t n;
    ember_label *labels;            /* storage behind v[i].labels */
    size_t nlabels;
} em_series_set;

/* The series SEL's type, matchers and series ids select (its range, focus
** and ignore play no part), with their types and labels. *OUT is emptied
** first; free it with em_series_set_free (also after a failure). */
int em_reader_series(em_reader *rd, const ember_selector *sel,
                     em_series_set *out);
void em_series_set_free(em_series_set *s);

/* Another reference to snapshot S (ember_snapshot_end drops one). */
ember_snapshot *em_snapshot_ref(ember_snapshot *s);
/* The snapshot M's stack ids belong to, held by M; NULL for a merge made
** by hand. */
ember_snapshot *em_merged_snapshot(const ember_merged *m);

/* A merged profile made from N (stack, value) pairs in stack order, with
** the series and profile counts and the span of SPAN_OF (NULL: none); for
** a diff's stacks and for filtered merges. */
int em_merged_make(const uint32_t *stacks, const int64_t *values, size_t n,
                   const ember_merged *span_of, ember_merged **out);

#endif /* EM_ENGINE_H */
