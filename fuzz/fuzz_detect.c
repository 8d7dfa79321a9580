/*
** fuzz/fuzz_detect.c: what every import does before a decoder, on hostile
** bytes: em_gunzip under its size cap, em_format_detect, and em_decode,
** which chains them in front of the decoder the format names (the path of
** ember_import and ember_import_files). Invariants:
** - gunzip gives EMBER_OK or an error code; EMBER_OK holds at most the
**   cap's bytes, a NUL after them, and exactly what zlib inflates from the
**   same stream (so libdeflate's fast path and the zlib path agree), and
**   zlib inflating the stream whole within the cap means EMBER_OK; a cap
**   one byte short of the output is EMBER_ELIMIT, a cap of exactly it is
**   EMBER_OK again (the cap is a bound, not a guess);
** - detection names a known format, AUTO for empty input, PPROF for any
**   input with a control byte in its first 4 KiB;
** - em_decode fails, with the origin first in its message, with gunzip's
**   code when gunzip fails, refuses what detection refused, and otherwise
**   ends as the decoder of the detected format named outright does, having
**   read the gunzipped size.
** The cap is 1 MiB instead of 1 GiB, so that a bomb costs milliseconds.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "ingest/pset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_detect: %s (line %d)\n", #c, __LINE__); \
    abort(); } } while (0)

#define CAP (1u << 20)

enum { REF_OK, REF_BAD, REF_BIG };

/* zlib over the whole input, member after member (as em_gunzip), into OUT
** of CAP + 1 bytes: REF_OK with *N bytes, REF_BAD, or REF_BIG past CAP. */
static int ref_gunzip(const uint8_t *p, size_t len, uint8_t *out, size_t *n)
{
    z_stream z = { 0 };
    int zrc = Z_OK, r = REF_BAD;

    if (inflateInit2(&z, 15 + 16) != Z_OK)
        abort();
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = CAP + 1;
    while (z.avail_out > 0) {
        zrc = inflate(&z, Z_NO_FLUSH);
        if (zrc == Z_STREAM_END && z.avail_in == 0)
            break;
        if (zrc == Z_STREAM_END)
            zrc = inflateReset(&z);     /* the next member */
        else if (zrc != Z_OK)
            break;
    }
    *n = CAP + 1 - z.avail_out;
    if (z.avail_out == 0)
        r = REF_BIG;
    else if (zrc == Z_STREAM_END)
        r = REF_OK;
    inflateEnd(&z);
    return r;
}

/* em_gunzip under caps around the output, against zlib. *PLAIN, *PLEN get
** the output under CAP (em_free it); returns em_gunzip's code. */
static int check_gunzip(const uint8_t *data, size_t size, void **plain,
                        size_t *plen)
{
    uint8_t *ref = malloc(CAP + 1);
    size_t rn = 0, n2 = 0;
    void *p2 = NULL;
    int want, rc;

    CHECK(ref != NULL);
    want = ref_gunzip(data, size, ref, &rn);
    rc = em_gunzip(data, size, CAP, plain, plen);
    CHECK(rc == EMBER_OK || rc == EMBER_EINVAL || rc == EMBER_ELIMIT ||
          rc == EMBER_ENOMEM);
    CHECK((rc == EMBER_OK) == (want == REF_OK));
    if (rc != EMBER_OK)
        CHECK(*plain == NULL && *plen == 0);
    if (rc == EMBER_OK) {
        CHECK(*plen <= CAP && *plen == rn && ((uint8_t *)*plain)[*plen] == 0);
        CHECK(memcmp(*plain, ref, rn) == 0);
    }
    if (rc == EMBER_OK && *plen > 0) {
        CHECK(em_gunzip(data, size, *plen - 1, &p2, &n2) == EMBER_ELIMIT);
        CHECK(em_gunzip(data, size, *plen, &p2, &n2) == EMBER_OK);
        CHECK(n2 == *plen && memcmp(p2, *plain, n2) == 0);
        em_free(p2);
    }
    free(ref);
    return rc;
}

/* True when the first 4 KiB of P hold a byte below 0x20 but TAB, LF, CR. */
static bool has_control(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len && i < 4096; i++)
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return true;
    return false;
}

static em_format check_detect(const uint8_t *p, size_t len)
{
    em_format f = em_format_detect(p, len), back = EM_FORMAT_AUTO;

    CHECK((unsigned)f <= EM_FORMAT_PERF);
    CHECK(em_format_parse(em_format_name(f), &back) == EMBER_OK && back == f);
    if (len == 0)
        CHECK(f == EM_FORMAT_AUTO);
    if (has_control(p, len))
        CHECK(f == EM_FORMAT_PPROF);
    return f;
}

/* What one em_decode ended with. */
typedef struct outcome {
    int rc;
    char msg[256];
    size_t profiles, samples, stacks, locs, functions;
    uint64_t bytes;
} outcome;

static void decode(const uint8_t *data, size_t size, em_format f,
                   outcome *o)
{
    em_import_opts opts = { .sz = sizeof opts, .origin = "fuzz",
                            .format = f, .max_bytes = CAP };
    em_pset s = { 0 };

    o->rc = em_decode(data, size, &opts, &s);
    snprintf(o->msg, sizeof o->msg, "%s", o->rc != EMBER_OK ? em_errmsg() : "");
    o->profiles = s.nprofiles;
    o->samples = s.nsamples;
    o->stacks = s.nstacks;
    o->locs = s.nlocs;
    o->functions = s.nfunctions;
    o->bytes = s.bytes_in;
    for (size_t i = 0; i < s.nsamples; i++)
        CHECK(s.samples[i].profile < s.nprofiles &&
              s.samples[i].stack < s.nstacks);
    em_pset_free(&s);
}

static bool same(const outcome *a, const outcome *b)
{
    return a->rc == b->rc && strcmp(a->msg, b->msg) == 0 &&
           a->profiles == b->profiles && a->samples == b->samples &&
           a->stacks == b->stacks && a->locs == b->locs &&
           a->functions == b->functions && a->bytes == b->bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *plain = data;
    void *buf = NULL;
    size_t plen = size;
    int grc = EMBER_OK;
    em_format f;
    outcome got, named;

    if (em_is_gzip(data, size)) {
        grc = check_gunzip(data, size, &buf, &plen);
        plain = buf;
    }
    f = grc == EMBER_OK ? check_detect(plain, plen) : EM_FORMAT_AUTO;
    decode(data, size, EM_FORMAT_AUTO, &got);
    CHECK(got.rc == EMBER_OK || got.rc == EMBER_EINVAL ||
          got.rc == EMBER_ELIMIT || got.rc == EMBER_ENOMEM);
    CHECK(got.rc == EMBER_OK || strncmp(got.msg, "fuzz:", 5) == 0);
    if (grc != EMBER_OK) {
        CHECK(got.rc == grc);
    } else if (f == EM_FORMAT_AUTO) {
        CHECK(got.rc == EMBER_EINVAL && strstr(got.msg, "not a profile"));
    } else {
        decode(data, size, f, &named);
        CHECK(same(&got, &named));
        CHECK(got.rc != EMBER_OK || got.bytes == plen);
    }
    em_free(buf);
    return 0;
}
