/*
** engine/hash.c: the content hash of the dedup indexes. It is stored on disk
** (the reverse index of every interned table is keyed by it), so its exact
** definition is part of the file format and must never change without a
** format version bump. Shape: 8-byte little-endian words, each folded in with
** a 128-bit multiply (as wyhash and rapidhash do), a tail word padded with
** zeros, then the length and a final avalanche.
*/
#include <libdeflate.h>

#include "engine.h"

#define EM_H_K1 0xa0761d6478bd642fULL
#define EM_H_K2 0xe7037ed1a0b428dbULL
#define EM_H_K3 0x8ebc6af09c88c6e3ULL

static uint64_t hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* The N (1..7) bytes at P as a little-endian word padded with zeros, read
** as a few overlapping loads instead of byte by byte (the records hashed
** are short, so the tail is much of the work). FULL: the 8 bytes before
** P + N are readable too (N < 8 bytes of a longer input). */
static uint64_t hash_tail(const uint8_t *p, size_t n, bool full)
{
    if (full)
        return em_get_le64(p + n - 8) >> (8 * (8 - n));
    if (n >= 4)
        return (uint64_t)em_get_le32(p) |
               (uint64_t)em_get_le32(p + n - 4) << (8 * (n - 4));
    return (uint64_t)p[0] | (uint64_t)p[n / 2] << (8 * (n / 2)) |
           (uint64_t)p[n - 1] << (8 * (n - 1));
}

uint64_t em_hash64(const void *data, size_t n, uint64_t seed)
{
    const uint8_t *p = data;
    uint64_t h = seed ^ EM_H_K1;
    size_t i = 0;

    for (; i + 8 <= n; i += 8)
        h = hash_mix(h ^ em_get_le64(p + i), EM_H_K2);
    if (i < n)
        h = hash_mix(h ^ hash_tail(p + i, n - i, n >= 8), EM_H_K2);
    h = hash_mix(h ^ (uint64_t)n, EM_H_K3);
    return hash_mix(h, EM_H_K1);
}

uint32_t em_crc32(uint32_t crc, const void *p, size_t n)
{
    return n == 0 ? crc : libdeflate_crc32(crc, p, n);
}
