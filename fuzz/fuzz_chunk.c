/*
** fuzz/fuzz_chunk.c: the chunk decoder on hostile bytes. Any input must give
** EMBER_OK or an error code: no crash, no read out of bounds, no leak, no
** undefined behaviour. Each input is decoded twice: as given (the checksum
** turns away nearly everything) and with its checksum recomputed, which
** lets the fuzzer reach the header, directory and column checks behind it.
** A chunk that decodes must also survive transpose, re-encoding and a second
** decode unchanged: the decoder may accept only what the encoder can say.
*/
#include <stdlib.h>
#include <zlib.h>

#include "engine/chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SAME(a, b, n) \
    ((n) == 0 || memcmp((a), (b), (size_t)(n) * sizeof *(a)) == 0)

static bool chunk_equal(const em_chunk *a, const em_chunk *b)
{
    const em_chunk_header *h = &a->h;

    return memcmp(&a->h, &b->h, sizeof a->h) == 0 &&
           SAME(a->time_ms, b->time_ms, h->nprofiles) &&
           SAME(a->duration_ns, b->duration_ns, h->nprofiles) &&
           SAME(a->period, b->period, h->nprofiles) &&
           SAME(a->total, b->total, h->nprofiles) &&
           SAME(a->stacks, b->stacks, h->nstacks) &&
           SAME(a->stack_start, b->stack_start, h->nstacks + 1) &&
           SAME(a->sample_profile, b->sample_profile, h->nsamples) &&
           SAME(a->sample_value, b->sample_value, h->nsamples);
}

/* Re-encodes a decoded chunk and aborts unless it decodes the same. Only
** running out of memory may stop it. */
static void re_encode(const em_chunk *ch)
{
    em_chunk_profile *ps = NULL;
    em_buf b = { 0 };
    em_chunk again;
    int rc = em_chunk_transpose(ch, &ps);

    if (rc == EMBER_OK)
        rc = em_chunk_encode(NULL, ps, ch->h.nprofiles, ch->h.flags, 1, &b);
    if (rc == EMBER_OK) {
        rc = em_chunk_decode(NULL, b.p, b.len, EM_COL_ALL, &again);
        if (rc == EMBER_OK && !chunk_equal(ch, &again))
            abort();
        em_chunk_release(&again);
    }
    if (rc != EMBER_OK && rc != EMBER_ENOMEM)
        abort();
    em_free(ps);
    em_buf_free(&b);
}

static void decode(const uint8_t *data, size_t size)
{
    em_chunk ch;

    if (em_chunk_decode(NULL, data, size, EM_COL_ALL, &ch) == EMBER_OK) {
        re_encode(&ch);
        em_chunk_release(&ch);
    }
}

/* The checksum: CRC-32 of every byte but its own four at offset 8. */
static void reseal(uint8_t *p, size_t size)
{
    uLong crc = crc32_z(0, p, 8);
    crc = crc32_z(crc, p + 12, size - 12);
    em_put_le32(p + 8, (uint32_t)crc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy;

    decode(data, size);
    if (size < 12 || (copy = malloc(size)) == NULL)
        return 0;
    memcpy(copy, data, size);
    reseal(copy, size);
    decode(copy, size);
    free(copy);
    return 0;
}
