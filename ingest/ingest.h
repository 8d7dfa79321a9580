/*
** ingest/ingest.h: what the layers above (bpf/, repl/) and the tests may call
** from ingest/: decoders that turn profiler output into Ember profiles.
**
** Collapsed stacks (Brendan Gregg's "folded" format, as stackcollapse-*.pl,
** async-profiler -o collapsed, py-spy --format raw and `ember query -o
** collapsed` write it): one stack per line, frames root first, separated by
** ';', then one or more spaces or tabs and an integer value:
**
**     main;run;compress(char const*, int) 42
**
** Frames are taken verbatim: they may contain spaces, parentheses, brackets,
** anything but ';', NUL and a line end. Empty lines, lines of blanks and
** lines starting with '#' are skipped; LF and CRLF line ends are accepted;
** the last line needs no line end. A frame may not be empty ("a;;b 1" is an
** error) and a line needs a value. Input is hostile: every malformed line
** gives an error naming "ORIGIN:LINE:COL: what was expected", never a crash.
*/
#ifndef EM_INGEST_H
#define EM_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

/* The profile type of an import that names none: what perf, the eBPF
** sampler and most collapsed files hold (CPU samples, counted). */
#define EM_COLLAPSED_DEFAULT_TYPE \
    "process_cpu:samples:count:cpu:nanoseconds:delta"

/* Limits, both counted without the line end. Beyond them: EMBER_ELIMIT. */
#define EM_COLLAPSED_MAX_LINE (1u << 20)    /* bytes per line: 1 MiB */
#define EM_COLLAPSED_MAX_FRAMES 4096u       /* frames per stack */

/* One frame: LEN bytes at P, inside the parsed buffer (not NUL-terminated;
** never empty, never holding ';', NUL, '\n'). */
typedef struct em_collapsed_frame {
    const char *p;
    size_t len;
} em_collapsed_frame;

/* Called once per stack line with its NFRAMES (1 to EM_COLLAPSED_MAX_FRAMES)
** frames ROOT FIRST, as written, and its value. FRAMES lives until the
** callback returns; the bytes it points to live as long as the buffer.
** Return 0 to go on; anything else stops the parse, which returns it (a
** negative code also gets "ORIGIN:LINE: " put before its message). */
typedef int (*em_collapsed_fn)(void *ctx, const em_collapsed_frame *frames,
                               size_t nframes, int64_t value);

/* Parses LEN bytes of collapsed stacks at BUF, calling FN for each stack
** line in order. ORIGIN (a file name; NULL: "<input>") starts messages.
** Stops at the first problem: EMBER_EINVAL for malformed input and
** EMBER_ELIMIT past a limit (with "ORIGIN:LINE:COL: ..." in em_errmsg(),
** LINE and COL counted from 1, COL in bytes), EMBER_ENOMEM, or what FN
** returned. Values: optional '-', decimal digits, within int64. */
int em_collapsed_parse(const char *buf, size_t len, const char *origin,
                       em_collapsed_fn fn, void *ctx);

/* How an import labels and times what it writes. Zeroed with sz set means:
** origin "<input>", type EM_COLLAPSED_DEFAULT_TYPE, no labels, time 0. */
typedef struct em_import_opts {
    size_t sz;                  /* sizeof(em_import_opts) */
    const char *origin;         /* file name, for messages; NULL: "<input>" */
    const char *type;           /* profile type; NULL: the default above */
    const ember_label *labels;  /* series labels, copied by the engine */
    size_t nlabels;
    int64_t time_ms;            /* profile timestamp, unix milliseconds */
    int64_t duration_ns;        /* what the profile covers; 0: unknown */
    int64_t period;             /* sampling period in period units; 0: none */
} em_import_opts;

/* What an import read and wrote, for progress lines. */
typedef struct em_import_stats {
    uint64_t lines;             /* stack lines read */
    uint64_t stacks;            /* distinct stacks = samples written */
    uint64_t functions;         /* distinct frame names */
    int64_t total;              /* sum of all values (wraps, as merges do) */
} em_import_stats;

/* Imports LEN bytes of collapsed stacks at BUF as ONE profile: identical
** stack lines sum, frames become functions named by the frame (mapping 0,
** address 0, line 0), stacks are stored leaf first. Atomic: everything is
** written in one transaction or, on any error, nothing. Input without a
** stack line writes nothing and returns EMBER_OK with out->stacks == 0.
** OPTS may be NULL (all defaults); OUT may be NULL; on error OUT is zeroed. */
int em_import_collapsed(ember_db *db, const char *buf, size_t len,
                        const em_import_opts *opts, em_import_stats *out);

#endif /* EM_INGEST_H */
