/*
** repl/serve_mhd.c: the table of libmicrohttpd's functions (serve_mhd.h).
*/
#include "engine/engine.h"
#include "repl/serve_mhd.h"

em_mhd_table em_mhd;

int em_mhd_load(void)
{
#define EM_MHD_NAME(f) #f,
    static const char *const names[] = { EM_MHD_FUNCS(EM_MHD_NAME) };
#undef EM_MHD_NAME
    static em_dl_lib lib = {
        .soname = "libmicrohttpd.so.12", .package = "libmicrohttpd12",
        .names = names, .fns = (void **)&em_mhd,
        .n = sizeof names / sizeof names[0],
    };

    _Static_assert(sizeof em_mhd == sizeof names / sizeof names[0] *
                   sizeof(void *), "one pointer per name");
    return em_dl_load(&lib);
}
