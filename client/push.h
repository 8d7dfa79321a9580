/*
** client/push.h: what the programs (repl/) call of the pusher besides
** ember.h's ember_pusher: an agent's window, a profile set (ingest/pset.h)
** never written to any database, pushed as one pprof per profile
** (client/push_pset.c).
*/
#ifndef EM_CLIENT_PUSH_H
#define EM_CLIENT_PUSH_H

#include <stdint.h>

#include "ember.h"
#include "ingest/pset.h"

/* What em_push_pset queued. */
typedef struct em_push_counts {
    uint64_t profiles;          /* pprofs in the window */
    uint64_t bytes;             /* their bytes, gzipped */
} em_push_counts;

/* Encodes each profile of SET that has a non-zero sample as a gzipped
** pprof (query/pprof_out.c's encoder, symbols read from the set) and
** sends them all as one window (ember_pusher_send). The application name
** is the profile's service_name label when it has one, else APP. A set
** with nothing to send queues nothing. OUT may be NULL. */
int em_push_pset(ember_pusher *p, const em_pset *set, const char *app,
                 em_push_counts *out);

#endif /* EM_CLIENT_PUSH_H */
