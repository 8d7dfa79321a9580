/*
** fuzz/fuzz_block.c: the block reader (engine/block_read.c) on hostile
** bytes. Each input is written to a memory file and read through every
** door: open, the symbols, the postings and label values of every label
** the block's own series carry, every chunk's bytes decoded whole, and
** verify. It is read twice: as given (the checksums turn away nearly
** everything) and with every section's checksum and the footer's
** recomputed, which lets the fuzzer reach the checks behind them.
**
** Invariants: nothing crashes, leaks or reads out of bounds; every call
** gives EMBER_OK or an error code; what the symbols hand out holds the
** promises of engine/block.h (parents before their children, every id
** inside its table, strings strictly ascending); and a block verify
** accepts reads without error through every other door.
*/
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/block.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_block: %s (line %d)\n", #c, __LINE__); \
    abort(); } } while (0)

static bool is_err(int rc)
{
    return rc == EMBER_ECORRUPT || rc == EMBER_EFORMAT ||
           rc == EMBER_ENOMEM;
}

/* Byte order of strings A and C, which may hold NULs. */
static int str_cmp(const em_block_syms *s, uint32_t a, uint32_t c)
{
    size_t la = s->str_off[a + 1] - s->str_off[a] - 1;
    size_t lc = s->str_off[c + 1] - s->str_off[c] - 1;
    int r = memcmp(s->str_bytes + s->str_off[a], s->str_bytes + s->str_off[c],
                   la < lc ? la : lc);

    return r != 0 ? r : (la > lc) - (la < lc);
}

/* The promises of em_block_syms, checked. */
static void syms_check(const em_block_info *in, const em_block_syms *s)
{
    CHECK(s->str_off[0] == 0 && s->str_bytes[0] == '\0');
    for (uint32_t i = 1; i < in->nstrings; i++) {
        CHECK(str_cmp(s, i - 1, i) < 0);
        CHECK(s->str_bytes[s->str_off[i + 1] - 1] == '\0');
    }
    for (uint32_t i = 0; i < in->nnodes; i++) {
        CHECK(s->parent[i] == EM_BLOCK_ROOT || s->parent[i] < i);
        CHECK(s->loc[i] < in->nlocations);
        CHECK(s->depth[i] >= 1);
    }
    for (uint32_t i = 0; i < in->nlocations; i++) {
        CHECK(s->locations[i].mapping < in->nmappings);
        CHECK(s->locations[i].first + (uint64_t)s->locations[i].n <=
              in->nlines);
    }
    for (uint32_t i = 0; i < in->nlines; i++)
        CHECK(s->lines[i].function < in->nfunctions);
    for (uint32_t i = 0; i < in->nfunctions; i++)
        CHECK(s->functions[i].name < in->nstrings &&
              s->functions[i].file < in->nstrings &&
              s->functions[i].system_name < in->nstrings);
    for (uint32_t i = 0; i < in->nseries; i++)
        CHECK(s->series[i].type < in->nstrings &&
              s->series[i].first + (uint64_t)s->series[i].n <= in->nlabels);
    for (uint32_t i = 0; i < in->nlabels; i++)
        CHECK(s->label_names[i] < in->nstrings &&
              s->label_values[i] < in->nstrings);
}

/* Postings and label values of every label of the block's series. */
static int postings(em_block *b, const em_block_info *in,
                    const em_block_syms *s)
{
    int rc = EMBER_OK;

    for (uint32_t i = 0; i < in->nlabels && rc == EMBER_OK; i++) {
        const char *nm = s->str_bytes + s->str_off[s->label_names[i]];
        roaring_bitmap_t *r;
        uint32_t *v;
        size_t n;
        rc = em_block_postings(b, nm, s->str_bytes +
                                          s->str_off[s->label_values[i]], &r);
        if (rc == EMBER_OK)
            roaring_bitmap_free(r);
        if (rc == EMBER_OK &&
            (rc = em_block_label_values(b, nm, &v, &n)) == EMBER_OK) {
            for (size_t j = 0; j < n; j++)
                CHECK(v[j] < in->nstrings);
            em_free(v);
        }
    }
    return rc;
}

static int chunks(em_block *b, const em_block_info *in)
{
    int rc = EMBER_OK;

    for (uint32_t k = 0; k < in->nseries && rc == EMBER_OK; k++) {
        const em_bchunk *c;
        size_t n;
        rc = em_block_chunks(b, k, &c, &n);
        for (size_t i = 0; i < n && rc == EMBER_OK; i++) {
            const uint8_t *p;
            em_chunk ch;
            CHECK(c[i].series == k);
            if ((rc = em_block_chunk_bytes(b, &c[i], &p)) == EMBER_OK &&
                (rc = em_chunk_decode(NULL, p, c[i].len, EM_COL_ALL, &ch)) ==
                    EMBER_OK)
                em_chunk_release(&ch);
        }
    }
    return rc;
}

/* Every door; a verify that passes means every door must have opened. */
static void read_all(const char *path)
{
    em_block *b;
    const em_block_syms *s;
    const em_block_info *in;
    int rc = em_block_open(path, &b), first = EMBER_OK, v;

    if (rc != EMBER_OK) {
        CHECK(is_err(rc));
        return;
    }
    in = em_block_get_info(b);
    if ((rc = em_block_symbols(b, &s)) == EMBER_OK) {
        syms_check(in, s);
        rc = postings(b, in, s);
    }
    first = rc;
    rc = chunks(b, in);
    if (first == EMBER_OK)
        first = rc;
    v = em_block_verify(b, NULL, NULL);
    CHECK(first == EMBER_OK || is_err(first));
    CHECK(v == EMBER_OK || is_err(v));
    CHECK(v != EMBER_OK || first == EMBER_OK);
    em_block_close(b);
}

/* Recomputes the checksums the directory and the trailer carry, where
** they lie inside the input. */
static void reseal(uint8_t *p, size_t size)
{
    uint32_t flen, nsec;
    size_t footer;
    uLong c;

    if (size < 8 + 112 + 16)
        return;
    flen = em_get_le32(p + size - 16);
    if (flen < 112 || flen > size - 24)
        return;
    footer = size - 16 - flen;
    nsec = em_get_le32(p + footer + 104);
    for (uint32_t k = 0; k < nsec && 112 + (k + 1) * (uint64_t)24 <= flen;
         k++) {
        uint8_t *e = p + footer + 112 + k * 24;
        uint64_t off = em_get_le64(e + 8), n = em_get_le32(e + 16);
        if (off <= size && n <= size - off)
            em_put_le32(e + 4, (uint32_t)crc32_z(0, p + off, n));
    }
    c = crc32_z(crc32_z(0, p, 8), p + footer, size - 8 - footer);
    em_put_le32(p + size - 8, (uint32_t)c);
}

/* Writes the input to a memory file and reads it by its /proc path. */
static void run(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfd_create("fuzz_block", MFD_CLOEXEC);

    if (fd < 0)
        return;
    if (write(fd, data, size) == (ssize_t)size) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        read_all(path);
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy;

    run(data, size);
    if (size == 0 || (copy = malloc(size)) == NULL)
        return 0;
    memcpy(copy, data, size);
    reseal(copy, size);
    run(copy, size);
    free(copy);
    return 0;
}
