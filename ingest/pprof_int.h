/*
** ingest/pprof_int.h: private to the pprof decoder (ingest/pprof_in.c and
** ingest/pprof_type.c): naming the Ember profile type of each pprof sample
** type.
*/
#ifndef EM_PPROF_INT_H
#define EM_PPROF_INT_H

#include <stddef.h>

#include "engine/engine.h"
#include "proto/profile.pb-c.h"

/* Sample types per file: real profiles have one to a few; each becomes a
** profile type string, so a hostile count must not. */
#define EM_PPROF_MAX_TYPES 256u

/* Writes the profile type of each of P's n_sample_type sample types into
** BUF, NUL-terminated, and its offset into OFFS[i] (room for
** n_sample_type). P's string indexes must already be checked. NAME (NULL:
** guess from the file, see pprof_type.c) is the name part; ORIGIN names the
** file, for the mutex/block guess and for messages. EMBER_OK, ENOMEM, or
** EINVAL/ELIMIT when a type the engine would refuse comes out (too long). */
int em_pprof_types(const Perftools__Profiles__Profile *p, const char *origin,
                   const char *name, em_buf *buf, size_t *offs);

/* Input of at most this many bytes (default 1 MiB) is unpacked whole;
** larger input sample by sample, straight from the input (pprof_in.c).
** A knob for tests, which run every case both ways. */
extern size_t em_pprof_whole_max;

/* P's string I, or "" for 0 and anything out of range. */
const char *em_pprof_str(const Perftools__Profiles__Profile *p, int64_t i);

#endif /* EM_PPROF_INT_H */
