/*
** client/spool.h: the pusher's bounded on-disk buffer (client/spool.c).
** A window of requests is a file in the spool directory, written whole
** (tmp, fsync, rename, fsync of the directory) before any send is tried,
** so that a server outage or an agent restart loses nothing the bound
** holds. Files are sent oldest first; when a new window does not fit, the
** oldest are dropped (counted) to make room.
**
** A window file, little-endian (docs/server.md, "Pushing"):
**
**   offset  size  field
**   0       8     magic "EMSPOOL1"
**   8       4     count: requests in the window (<= EM_SPOOL_MAX_ENTRIES)
**   12      4     sent: requests delivered so far, rewritten in place
**   16      8     em_hash64 of every byte from offset 24 to the end
**   24      ...   count requests: u32 target length, u32 body length,
**                 the target ("ingest?name=..."), the body
**
** Every length read back meets a limit before it sizes anything, and the
** hash must match: a damaged file is deleted and counted, never sent.
** Thread-safe: the agent puts while the sender thread reads.
*/
#ifndef EM_CLIENT_SPOOL_H
#define EM_CLIENT_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define EM_SPOOL_HEAD 24
#define EM_SPOOL_MAX_ENTRIES 65536u
#define EM_SPOOL_MAX_TARGET 65536u      /* bytes of one request's target */
#define EM_SPOOL_MAX_FILE (1ull << 30)  /* bytes of one window */

typedef struct em_spool em_spool;

/* One request of a window. */
typedef struct em_spool_req {
    const char *target;         /* path and query, after the base URL */
    size_t tlen;
    const void *body;
    size_t blen;
} em_spool_req;

/* A window read back: its requests point into data. */
typedef struct em_spool_win {
    uint64_t seq;               /* its file's number */
    uint32_t count, sent;
    uint64_t size;              /* bytes on disk */
    uint8_t *data;
    em_spool_req *reqs;
} em_spool_win;

/* What the spool holds and what it gave up, since it was opened. */
typedef struct em_spool_stats {
    uint64_t windows, bytes;            /* queued now */
    uint64_t dropped_windows, dropped_bytes;    /* the buffer was full */
    uint64_t damaged_windows;           /* failed their checks, deleted */
} em_spool_stats;

/* Opens DIR (made when missing) as a spool of at most MAX_BYTES, keeping
** the windows a previous run left (over the bound: the oldest dropped),
** deleting its unfinished tmp files. */
int em_spool_open(const char *dir, uint64_t max_bytes, em_spool **out);
void em_spool_close(em_spool *s);                 /* NULL: no-op */

/* Writes N requests as the newest window, durable on return; drops the
** oldest windows (not the one being sent) until it fits. A window larger
** than the whole bound is itself dropped: EMBER_ELIMIT. *DROPPED (may be
** NULL) gets the windows this call dropped. */
int em_spool_put(em_spool *s, const em_spool_req *reqs, size_t n,
                 uint64_t *dropped);

/* Reads the oldest window into *W (em_spool_win_free) and marks it being
** sent, which put never drops. EMBER_DONE when none is queued. A window
** that fails its checks (EMBER_ECORRUPT) or cannot be read (EMBER_EIO) is
** deleted and counted, its message set: the next call reads the next. */
int em_spool_oldest(em_spool *s, em_spool_win *w);
void em_spool_win_free(em_spool_win *w);

/* Records in W's file that its first SENT requests are delivered, so a
** restart resends none of them (best effort: not synced). */
int em_spool_mark(em_spool *s, em_spool_win *w, uint32_t sent);

/* W is done (delivered or refused): its file is deleted and freed. */
int em_spool_done(em_spool *s, em_spool_win *w);

void em_spool_stats_get(em_spool *s, em_spool_stats *st);

#endif /* EM_CLIENT_SPOOL_H */
