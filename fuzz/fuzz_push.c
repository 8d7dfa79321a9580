/*
** fuzz/fuzz_push.c: Pyroscope's push (POST /push.v1.PusherService/Push,
** repl/serve_connect.c) on hostile bodies. Each input is a request body,
** sent as application/json when it starts with '{', else as
** application/proto, with Content-Encoding: gzip when it starts with
** gzip's magic (a protobuf message never does: 0x1f is an invalid tag). It
** goes through what em_h_push runs after the headers,
** em_connect_call_with: the gunzip under the body limit, a JSON body made
** protobuf (serve_pbjson.c), the PushRequest unpacked by protoc-c's code
** and each raw profile imported in one transaction into a small real
** database.
**
** Invariants: nothing crashes or leaks; the answer is 200 or a Connect
** error ({"code":...} with its status); a refused push stores nothing at
** all (the database's counts are unchanged), as docs/protocol.md promises.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/serve_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_req rq = { .srv = fz_serve(),
                  .body = { .p = (uint8_t *)data, .len = size, .cap = size } };
    const char *ct = size > 0 && data[0] == '{' ? "application/json"
                   : "application/proto";
    const char *ce = size >= 2 && data[0] == 0x1f && data[1] == 0x8b
                   ? "gzip" : NULL;
    em_resp rs = { .status = 200 };
    fz_counts before = fz_counts_of(NULL), after;

    em_err_clear();
    FZ_CHECK(em_connect_call_with(&rq, &rs, &em_push_method, ct, ce) ==
             EMBER_OK);
    after = fz_counts_of(NULL);
    if (getenv("FUZZ_SERVE_VERBOSE") != NULL)
        fprintf(stderr, "--- answer: %u %.*s\n", rs.status,
                (int)rs.body.len, rs.body.p != NULL ? (char *)rs.body.p : "");
    if (rs.status != 200) {
        FZ_CHECK(rs.status >= 400 && rs.status < 600);
        FZ_CHECK(rs.body.len > 9 && memcmp(rs.body.p, "{\"code\":\"", 9) == 0);
        FZ_CHECK(memcmp(&before, &after, sizeof before) == 0);
    }
    em_buf_free(&rs.body);
    fz_serve_trim();
    return 0;
}
