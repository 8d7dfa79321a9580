/*
** engine/dl.c: shared libraries opened when first needed. The HTTP server
** (libmicrohttpd, which brings GnuTLS) and the client (libcurl and its
** thirty libraries) are needed by `ember serve` and `--server` only, yet
** linking them costs every process their loading and constructors: about
** 5 ms of CPU a start, where a whole short query takes less. So they are
** opened with dlopen by the code that needs them, once, and called through
** a table of pointers (repl/serve_mhd.h, client/curl_dl.h).
*/
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "engine.h"

/* Opens L->soname and resolves each of L->names into L->fns. */
static int dl_open(em_dl_lib *l)
{
    void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);

    if (h == NULL)
        return em_err(EMBER_ENOTFOUND, "%s cannot be loaded (%s): install "
                      "%s", l->soname, dlerror(), l->package);
    for (size_t i = 0; i < l->n; i++)
        if ((l->fns[i] = dlsym(h, l->names[i])) == NULL) {
            em_err(EMBER_ENOTFOUND, "%s has no %s: a version of %s that "
                   "is too old", l->soname, l->names[i], l->package);
            dlclose(h);
            return EMBER_ENOTFOUND;
        }
    return EMBER_OK;                    /* kept open for the process */
}

int em_dl_load(em_dl_lib *l)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int rc;

    pthread_mutex_lock(&lock);
    if (!l->tried) {
        l->rc = dl_open(l);
        l->tried = true;
        if (l->rc != EMBER_OK)
            snprintf(l->msg, sizeof l->msg, "%s", em_errmsg());
    }
    rc = l->rc;
    pthread_mutex_unlock(&lock);
    return rc == EMBER_OK ? rc : em_err(rc, "%s", l->msg);
}
