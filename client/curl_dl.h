/*
** client/curl_dl.h: libcurl opened when a client or pusher first needs it
** rather than linked into libember (engine/dl.c says why: its thirty
** libraries cost every process that links Ember milliseconds at start).
** Included instead of <curl/curl.h>: each curl_* function the client
** calls is a pointer of em_curl under its own name, filled by
** em_curl_load. A function added to the client's calls goes in the list
** and gets its #define below.
*/
#ifndef EM_CLIENT_CURL_DL_H
#define EM_CLIENT_CURL_DL_H

/* curl.h's type-checking wrappers are macros of these very names. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#define EM_CURL_FUNCS(X)                                                   \
    X(curl_easy_cleanup) X(curl_easy_escape) X(curl_easy_getinfo)          \
    X(curl_easy_init) X(curl_easy_perform) X(curl_easy_setopt)             \
    X(curl_easy_strerror) X(curl_free) X(curl_global_cleanup)              \
    X(curl_global_init) X(curl_slist_append) X(curl_slist_free_all)

typedef struct em_curl_table {
#define EM_CURL_FIELD(f) __typeof__(&f) f;
    EM_CURL_FUNCS(EM_CURL_FIELD)
#undef EM_CURL_FIELD
} em_curl_table;

extern em_curl_table em_curl;

/* Opens libcurl once (thread-safe); EMBER_OK, or EMBER_ENOTFOUND with a
** message naming the library and the package that installs it. */
int em_curl_load(void);

/* A name's use inside its own #define is not expanded again. curl.h
** defines these two as calls of themselves, to count their arguments. */
#undef curl_easy_getinfo
#undef curl_easy_setopt
#define curl_easy_cleanup (em_curl.curl_easy_cleanup)
#define curl_easy_escape (em_curl.curl_easy_escape)
#define curl_easy_getinfo (em_curl.curl_easy_getinfo)
#define curl_easy_init (em_curl.curl_easy_init)
#define curl_easy_perform (em_curl.curl_easy_perform)
#define curl_easy_setopt (em_curl.curl_easy_setopt)
#define curl_easy_strerror (em_curl.curl_easy_strerror)
#define curl_free (em_curl.curl_free)
#define curl_global_cleanup (em_curl.curl_global_cleanup)
#define curl_global_init (em_curl.curl_global_init)
#define curl_slist_append (em_curl.curl_slist_append)
#define curl_slist_free_all (em_curl.curl_slist_free_all)

#endif
