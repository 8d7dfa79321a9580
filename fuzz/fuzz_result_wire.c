/*
** fuzz/fuzz_result_wire.c: the result decoder (query/result_wire.c) on
** hostile bytes, as a client reads what a server, or anything listening
** at its URL, sends. Any input gives EMBER_OK or an error code: no crash,
** no read out of bounds, no leak. A result that decodes is then rendered
** in every format that fits its kind, as `ember query --server` would,
** and encoded again: the encoding must decode to the same bytes, so the
** decoder accepts only what the encoder can say and the renderers never
** meet a result a query could not make.
*/
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const formats[] = {
    "top", "tree", "flame", "collapsed", "json", "svg", "pprof", "table",
    "csv", "spark",
};

static void render_all(const ember_result *r)
{
    ember_render_opts o = { .sz = sizeof o, .width = 80 };

    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char *out = NULL;
        size_t len = 0;
        if (ember_result_render(NULL, r, formats[i], &o, &out, &len) ==
            EMBER_OK)
            ember_free(out);
    }
}

/* Encoding R and decoding that must give the same encoding again. */
static void round_trip(const ember_result *r)
{
    void *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    ember_result *again = NULL;

    if (em_result_encode(r, &a, &alen) != EMBER_OK)
        return;
    if (em_result_decode(a, alen, &again) != EMBER_OK)
        abort();                /* the decoder refused the encoder's */
    if (em_result_encode(again, &b, &blen) != EMBER_OK)
        abort();
    if (alen != blen || memcmp(a, b, alen) != 0)
        abort();
    ember_result_free(again);
    em_free(a);
    em_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ember_result *r = NULL;

    if (em_result_decode(data, size, &r) != EMBER_OK)
        return 0;
    render_all(r);
    round_trip(r);
    ember_result_free(r);
    return 0;
}
