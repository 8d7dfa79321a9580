/*
** engine/bitmap.c: em_bitmap_decode, the one way from stored bytes to a
** roaring bitmap (postings, engine/postings.c and engine/meta.c).
**
** Bitmaps are stored in CRoaring's portable format (RoaringFormatSpec:
** a cookie, a key and cardinality per container, offsets, then array,
** bitset or run containers, all little-endian).
** roaring_bitmap_portable_deserialize_safe stays within the bytes, but the
** CRoaring Debian ships (0.2.66, which has no roaring_bitmap_internal_
** validate) takes whatever the containers say: no runs at all, runs that
** overlap or run past 65535, arrays or keys out of order, a cardinality
** that lies. Such a bitmap gives wrong answers or crashes CRoaring: a
** 15-byte stored posting crashed every query through its label, and 17
** bytes crashed `ember verify` (fuzz/fuzz_postings.c found both). So the
** bytes are checked whole first, by the rules of CRoaring's own later
** validator: keys ascend; an array's values ascend; a bitset holds as many
** bits as its cardinality; runs are at least one, ascend without touching
** or overlapping, and end within the container; and, since Ember's writer
** writes nothing else, every cardinality and offset is the true one and no
** byte follows the last container.
*/
#include "engine/store.h"

#define COOKIE_RUNS 12347u          /* low half; high half: containers - 1 */
#define COOKIE_PLAIN 12346u         /* no run containers; le32 count next */
#define OFFSETS_FROM 4u             /* run-cookie bitmaps of fewer
                                    ** containers carry no offsets */
#define ARRAY_MAX 4096u             /* more values make a bitset container */
#define BITSET_BYTES 8192u

typedef struct reader {
    const uint8_t *p;
    size_t n, at;                   /* bytes, and how many are read */
} reader;

/* *OUT gets the next K bytes; false when fewer are left. */
static bool take(reader *r, size_t k, const uint8_t **out)
{
    if (r->n - r->at < k)
        return false;
    *out = r->p + r->at;
    r->at += k;
    return true;
}

static uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static bool array_ok(reader *r, uint32_t card)
{
    const uint8_t *v;

    if (!take(r, (size_t)card * 2, &v))
        return false;
    for (uint32_t i = 1; i < card; i++)
        if (le16(v + 2 * i) <= le16(v + 2 * i - 2))
            return false;
    return true;
}

static bool bitset_ok(reader *r, uint32_t card)
{
    const uint8_t *w;
    uint64_t bits = 0;

    if (!take(r, BITSET_BYTES, &w))
        return false;
    for (uint32_t i = 0; i < BITSET_BYTES; i += 8) {
        uint64_t x;
        memcpy(&x, w + i, sizeof x);    /* a count needs no byte order */
        bits += (uint64_t)__builtin_popcountll(x);
    }
    return bits == card;
}

/* Runs are (start, length - 1) pairs after their count. */
static bool runs_ok(reader *r, uint32_t card)
{
    const uint8_t *h, *run;
    uint32_t nruns, end = 0, sum = 0;

    if (!take(r, 2, &h) || (nruns = le16(h)) == 0 ||
        !take(r, (size_t)nruns * 4, &run))
        return false;
    for (uint32_t i = 0; i < nruns; i++, run += 4) {
        uint32_t start = le16(run), len = le16(run + 2) + 1;
        if ((i > 0 && start <= end) || start + len > 65536)
            return false;       /* touching runs would be one run */
        end = start + len;
        sum += len;
    }
    return sum == card;
}

/* True when the N bytes at P are one valid bitmap and nothing else. */
static bool valid(const uint8_t *p, size_t n)
{
    reader r = { p, n, 0 };
    const uint8_t *c, *runs = NULL, *desc, *offs = NULL;
    uint32_t size;

    if (!take(&r, 4, &c))
        return false;
    if ((em_get_le32(c) & 0xffff) == COOKIE_RUNS) {
        size = (em_get_le32(c) >> 16) + 1;
        if (!take(&r, (size + 7) / 8, &runs))
            return false;
    } else if (em_get_le32(c) != COOKIE_PLAIN || !take(&r, 4, &c) ||
               (size = em_get_le32(c)) > 65536) {
        return false;
    }
    if (!take(&r, (size_t)size * 4, &desc) ||
        ((runs == NULL || size >= OFFSETS_FROM) &&
         !take(&r, (size_t)size * 4, &offs)))
        return false;
    for (uint32_t i = 0; i < size; i++) {
        uint32_t card = le16(desc + 4 * i + 2) + 1;
        bool ok;
        if ((i > 0 && le16(desc + 4 * i) <= le16(desc + 4 * i - 4)) ||
            (offs != NULL && em_get_le32(offs + 4 * i) != r.at))
            return false;
        ok = runs != NULL && (runs[i / 8] >> (i % 8) & 1) ? runs_ok(&r, card)
             : card > ARRAY_MAX ? bitset_ok(&r, card) : array_ok(&r, card);
        if (!ok)
            return false;
    }
    return r.at == n;
}

roaring_bitmap_t *em_bitmap_decode(const void *p, size_t n)
{
    if (!valid(p, n))
        return NULL;
    return roaring_bitmap_portable_deserialize_safe(p, n);
}
