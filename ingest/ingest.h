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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "ingest/pset.h"

/* The profile type of collapsed input that names none: samples counted,
** of what the file does not say. Not Go's process_cpu (nor perf's types,
** ingest/perf_script.c), so that collapsed, perf, ember record and Go
** data never sum into one type unless --type says so (issue 12). */
#define EM_COLLAPSED_DEFAULT_TYPE \
    "collapsed:samples:count:samples:count:delta"

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

/* Input formats. AUTO detects by content (em_format_detect). */
typedef enum em_format {
    EM_FORMAT_AUTO = 0,
    EM_FORMAT_PPROF = 1,        /* protobuf, raw or gzip'd */
    EM_FORMAT_COLLAPSED = 2,    /* folded stacks, see above */
    EM_FORMAT_PERF = 3          /* `perf script` text */
} em_format;

/* The default window that groups perf script samples into profiles. */
#define EM_PERF_DEFAULT_WINDOW_MS 10000
/* The default limit on the size of one input after gunzip: a gzip bomb
** stops here with EMBER_ELIMIT instead of filling memory. */
#define EM_IMPORT_MAX_BYTES (1ull << 30)
/* The largest input read whole, before gunzip (a file, or ember_import's
** buffer): EMBER_ELIMIT past it. */
#define EM_IMPORT_MAX_FILE (1ull << 30)

/* ---- walking an import's paths (ingest/walk.c) ---------------------------- */

#define EM_WALK_MAX_DEPTH 64            /* directories below a path */

struct stat;

/* What em_walk_paths does with what it finds; STOP may be NULL. */
typedef struct em_walk_hooks {
    void *ctx;
    /* A file open at FD (PATH in messages, ST its fstat); the walker
    ** closes FD after. */
    void (*file)(void *ctx, const char *path, int fd, const struct stat *st);
    /* PATH failed with RC (the thread's message says why): a file that
    ** could not be opened when FILE, else a path that could not be walked. */
    void (*failed)(void *ctx, const char *path, int rc, bool file);
    /* True: walk no further. */
    bool (*stop)(void *ctx);
} em_walk_hooks;

/* Walks the N PATHS: a directory recursively in name order (dot files
** skipped, at most EM_WALK_MAX_DEPTH deep), each file handed to H. */
void em_walk_paths(const em_walk_hooks *h, const char *const *paths,
                   size_t n);
/* Opens NAME (relative to the directory AT, or AT_FDCWD) read-only and
** fstats it into *ST: the descriptor, or -1 with errno set. */
int em_walk_open(int at, const char *name, struct stat *st);
/* Reads all of FD (ST its fstat, at most EM_IMPORT_MAX_FILE) into a new
** buffer (*BUF, em_free it, also on failure), NUL-terminated after *LEN. */
int em_walk_read(int fd, const struct stat *st, char **buf, size_t *len);
/* The time of a file whose content has none: a unix-ms file name (12 or 13
** digits, then the end or a '.'), else its mtime. */
int64_t em_walk_file_time(const char *path, const struct stat *st);

/* How an import labels and times what it writes. Zeroed with sz set means:
** origin "<input>", format AUTO, type by format (pprof: from the file;
** perf script: by event; collapsed: EM_COLLAPSED_DEFAULT_TYPE), no labels,
** time 0. */
typedef struct em_import_opts {
    size_t sz;                  /* sizeof(em_import_opts) */
    const char *origin;         /* file name, for messages; NULL: "<input>" */
    const char *type;           /* profile type of collapsed and perf script
                                ** input; NULL: by format. pprof ignores it */
    const ember_label *labels;  /* series labels of every profile written */
    size_t nlabels;
    int64_t time_ms;            /* profile time when the input has none
                                ** (pprof without time_nanos, collapsed);
                                ** perf script: the time of its first sample */
    int64_t duration_ns;        /* what the profile covers; 0: unknown */
    int64_t period;             /* sampling period in period units; 0: none */
    em_format format;           /* EM_FORMAT_AUTO: detect */
    const char *name;           /* pprof: the name part of every profile
                                ** type, instead of the one guessed from the
                                ** sample types; NULL: guess */
    int64_t window_ms;          /* perf script: samples of one thread within
                                ** a window form one profile; 0: default */
    bool comm_prefix;           /* collapsed: the first frame is the
                                ** "comm-pid" (or "comm") prefix that
                                ** stackcollapse-perf --pid writes: it
                                ** becomes labels comm and pid */
    uint64_t max_bytes;         /* limit after gunzip; 0: EM_IMPORT_MAX_BYTES */
    bool numeric_labels;        /* pprof: numeric sample labels ("bytes")
                                ** become series labels too; false: they
                                ** are dropped and their samples summed */
} em_import_opts;

/* What an import read and wrote, for progress lines. */
typedef struct em_import_stats {
    uint64_t lines;             /* samples read (collapsed: stack lines) */
    uint64_t stacks;            /* distinct stacks */
    uint64_t functions;         /* distinct functions (collapsed: frame names) */
    int64_t total;              /* sum of all values (saturates at the
                                ** int64 range: it adds up every type) */
    uint64_t profiles;          /* profiles written */
    uint64_t samples;           /* samples written, repeats of a stack in a
                                ** profile summed */
    uint64_t bytes;             /* input bytes after gunzip */
} em_import_stats;

/* em_import of LEN bytes of collapsed stacks at BUF (em_collapsed_decode):
** one profile in which identical stack lines sum, frames becoming functions
** named by the frame (mapping 0, address 0, line 0). Input without a stack
** line writes nothing and returns EMBER_OK with out->stacks == 0. OPTS may
** be NULL (all defaults); OUT may be NULL; on error OUT is zeroed. */
int em_import_collapsed(ember_db *db, const char *buf, size_t len,
                        const em_import_opts *opts, em_import_stats *out);

/* ---- decoders into a profile set (ingest/pset.h) ----------------------- */

/* Each decoder reads LEN bytes at BUF whole and fills *OUT (zeroed, or
** holding earlier files' content, which stays), or fails with one message
** "ORIGIN: what is wrong [where]" and leaves *OUT as it was before the call
** only in that the caller must em_pset_free it either way. OPTS may be NULL.
** None of them touches a database. */

/* pprof, already gunzipped. One profile per sample type and distinct set of
** sample labels (docs/ingest.md says how types are named and labels kept). */
int em_pprof_decode(const void *buf, size_t len, const em_import_opts *opts,
                    em_pset *out);
/* `perf script` output: samples grouped per (comm, pid, tid, event) and
** window into profiles. */
int em_perf_decode(const char *buf, size_t len, const em_import_opts *opts,
                   em_pset *out);
/* Collapsed stacks as one profile (or one per comm/pid with comm_prefix). */
int em_collapsed_decode(const char *buf, size_t len,
                        const em_import_opts *opts, em_pset *out);

/* True when BUF starts with the gzip magic. */
bool em_is_gzip(const void *buf, size_t len);
/* Inflates the gzip stream (or concatenated members) at BUF into a new
** buffer *OUT (em_free it) of *OUTLEN bytes, one NUL byte after the end.
** More than MAX bytes: EMBER_ELIMIT. A bad stream: EMBER_EINVAL. */
int em_gunzip(const void *buf, size_t len, uint64_t max, void **out,
              size_t *outlen);
/* The format BUF (not gzip'd) most likely holds: PPROF for binary; PERF
** for text with a perf time stamp on its first content line, a TAB-led
** call chain line or perf script --header's opening ("# ========", then
** "# captured on"); COLLAPSED when every content line looked at (the first
** 64) ends in blanks and an integer, unless they read as a table (a TAB
** inside a stack, or TAB-separated values and no ';' anywhere) or as
** numbers only; AUTO when none fits, and for empty input or input of
** blanks and comments only: that is no profile. */
em_format em_format_detect(const void *buf, size_t len);
/* "pprof", "collapsed", "perf", "auto". */
const char *em_format_name(em_format f);
/* Parses a --format word; EMBER_EINVAL for an unknown one. */
int em_format_parse(const char *s, em_format *out);

/* Gunzips when gzip'd, detects unless OPTS says the format, and decodes
** into *OUT. Messages start with the origin. */
int em_decode(const void *buf, size_t len, const em_import_opts *opts,
              em_pset *out);

/* ---- cumulative profiles made deltas (ingest/pset_delta.c) -------------- */

/* The pprof sample types Pyroscope takes as cumulative when a request
** names none (Go's: alloc_objects, alloc_space, contentions, delay). */
extern const char *const em_delta_default_types[];
extern const size_t em_delta_ndefault_types;

/* Makes CUR's cumulative profiles deltas against PREV (decoded from the
** profile sent before, with the same options): a profile is cumulative
** when its sample type (the type's second field) is one of the NCUM names
** at CUM. Stacks are matched by content (mappings, addresses, functions,
** lines), profiles by type and labels; each stack keeps its value minus
** the previous one, and is dropped when that is 0 or less. Those types
** gain ":delta". Other profiles of CUR stay as they are; PREV is only
** read. EMBER_OK, ENOMEM, or ELIMIT for a type too long to gain ":delta". */
int em_pset_delta(em_pset *cur, const em_pset *prev, const char *const *cum,
                  size_t ncum);

/* em_import of a pprof CUR made deltas against the pprof PREV (both
** gzipped or not) as em_pset_delta says: PREV is decoded with OPTS under
** the origin PREV_ORIGIN, and nothing is written unless both decode.
** CUM NULL: em_delta_default_types. */
int em_import_delta(ember_db *db, const void *cur, size_t len,
                    const void *prev, size_t prev_len,
                    const char *prev_origin, const char *const *cum,
                    size_t ncum, const em_import_opts *opts,
                    em_import_stats *out);

/* ember_import (include/ember.h) and ember_import_files, the driver that
** `ember import` runs, live in ingest/import_driver.c over these. */

/* em_decode, then em_pset_write in one transaction of DB: the whole input
** or nothing. OUT (may be NULL) gets what was read and written; on error
** it is zeroed. */
int em_import(ember_db *db, const void *buf, size_t len,
              const em_import_opts *opts, em_import_stats *out);
/* The same inside the caller's TXN, which commits or aborts it. */
int em_import_txn(ember_txn *txn, const void *buf, size_t len,
                  const em_import_opts *opts, em_import_stats *out);

#endif /* EM_INGEST_H */
