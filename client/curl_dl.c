/*
** client/curl_dl.c: the table of libcurl's functions (curl_dl.h).
*/
#include "engine/engine.h"
#include "client/curl_dl.h"

em_curl_table em_curl;

int em_curl_load(void)
{
#define EM_CURL_NAME(f) #f,
    static const char *const names[] = { EM_CURL_FUNCS(EM_CURL_NAME) };
#undef EM_CURL_NAME
    static em_dl_lib lib = {
        .soname = "libcurl.so.4", .package = "libcurl4",
        .names = names, .fns = (void **)&em_curl,
        .n = sizeof names / sizeof names[0],
    };

    _Static_assert(sizeof em_curl == sizeof names / sizeof names[0] *
                   sizeof(void *), "one pointer per name");
    return em_dl_load(&lib);
}
