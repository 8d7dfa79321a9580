/*
** engine/error.c: per-thread error messages. A message names what failed
** and where; codes travel up the call chain unchanged. Messages are per
** thread so that threads sharing one database never see each other's.
*/
#include <stdio.h>

#include "engine.h"

#define EM_MSG_MAX 1024

static _Thread_local char tls_msg[EM_MSG_MAX];

int em_verr(int rc, const char *fmt, va_list ap)
{
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    return rc;
}

int em_err(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    em_verr(rc, fmt, ap);
    va_end(ap);
    return rc;
}

int em_corrupt_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    size_t n;

    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    va_end(ap);
    n = strlen(tls_msg);
    snprintf(tls_msg + n, sizeof tls_msg - n, " [%s:%d]", file, line);
    return EMBER_ECORRUPT;
}

int em_err_prefix(int rc, const char *fmt, ...)
{
    char old[EM_MSG_MAX];
    va_list ap;
    size_t n;

    if (rc == EMBER_OK)
        return rc;
    memcpy(old, tls_msg, sizeof old);
    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    va_end(ap);
    n = strlen(tls_msg);
    if (n + 2 < sizeof tls_msg) {
        memcpy(tls_msg + n, ": ", 2);
        n += 2;
        memcpy(tls_msg + n, old, strnlen(old, sizeof tls_msg - n - 1));
        tls_msg[n + strnlen(old, sizeof tls_msg - n - 1)] = '\0';
    }
    return rc;
}

const char *em_errmsg(void)
{
    return tls_msg;
}

void em_err_clear(void)
{
    tls_msg[0] = '\0';
}

EMBER_API const char *ember_errmsg(const ember_db *db)
{
    EM_UNUSED(db);
    return tls_msg;
}

EMBER_API const char *ember_strerror(int rc)
{
    switch (rc) {
    case EMBER_OK: return "ok";
    case EMBER_DONE: return "done";
    case EMBER_ENOMEM: return "out of memory";
    case EMBER_EIO: return "I/O error";
    case EMBER_ECORRUPT: return "database corrupt";
    case EMBER_EINVAL: return "invalid argument or input";
    case EMBER_ENOTFOUND: return "not found";
    case EMBER_ELIMIT: return "limit exceeded";
    case EMBER_EBUSY: return "database busy";
    case EMBER_EFORMAT: return "not an Ember database of a known format";
    case EMBER_ETIMEOUT: return "time limit exceeded";
    default: return "unknown error";
    }
}
