/*
** ember.h: the one public header of Ember, an embedded time-series database
** for profiles (stack traces with values, over time, with labels).
**
** Conventions (docs/api.md says more):
** - Every call that can fail returns an int: EMBER_OK (0), a small positive
**   status such as EMBER_DONE, or a negative EMBER_E* code. The values are
**   stable. ember_errmsg() gives the message of the calling thread's last
**   failure: messages are kept per thread, not per handle, so that threads
**   sharing one ember_db never read each other's errors.
** - Handles are opaque. Structs passed in that will grow start with `sz`,
**   which the caller sets to sizeof the struct (libbpf's habit); a zeroed
**   struct with only sz set means "all defaults".
** - Pointers returned into a result object live until that object is freed.
**
** Thread safety: one ember_db may be shared by any number of threads. Readers
** (select, merge, totals, labels, snapshots) never block the writer and see a
** consistent snapshot taken when they start. Writers are serialized; the
** simple append calls from concurrent threads are committed together (group
** commit). Several processes may open the same directory: LMDB's lock file
** serializes their writers; a process that cannot get the lock file gets
** EMBER_EBUSY or EMBER_EIO with a message, never a damaged database.
**
** Durability: with EMBER_SYNC_FULL (the default) an append that returned
** EMBER_OK is on stable storage. With EMBER_SYNC_INTERVAL (syncs every
** sync_interval_ms) and EMBER_SYNC_NONE an acknowledged append survives a
** crash of the process (kill -9), but an OS crash or power loss may lose
** recent appends and, unless the file system keeps write order, damage the
** database (LMDB's MDB_NOSYNC caveat; ember verify detects it). A failed
** append leaves nothing behind.
*/
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_API __attribute__((visibility("default")))
#define EMBER_VERSION_STRING "0.1.0"

/* Result codes. Stable: programs and the socket protocol rely on them. */
enum {
    EMBER_OK = 0,
    EMBER_DONE = 1,         /* an iterator has nothing more */
    EMBER_ENOMEM = -1,      /* an allocation failed */
    EMBER_EIO = -2,         /* the OS or the storage failed */
    EMBER_ECORRUPT = -3,    /* stored bytes fail a check: see the message */
    EMBER_EINVAL = -4,      /* bad argument or malformed input */
    EMBER_ENOTFOUND = -5,   /* no such id, series or directory */
    EMBER_ELIMIT = -6,      /* a documented limit was exceeded */
    EMBER_EBUSY = -7,       /* the database is locked or in use */
    EMBER_EFORMAT = -8,     /* not Ember's, or an incompatible format version */
    EMBER_ETIMEOUT = -9     /* a time limit passed (ember_query_opts) */
};

typedef struct ember_db ember_db;       /* one open database directory */

/* "out of memory" etc.: a static string for any code, never NULL. */
EMBER_API const char *ember_strerror(int rc);

/* The calling thread's last failure message, naming what and where, e.g.
** "chunk (series 12, t=1732170000000): checksum mismatch". Valid until the
** thread's next Ember call. DB may be NULL. Never NULL; "" when none. */
EMBER_API const char *ember_errmsg(const ember_db *db);

/* ------------------------------------------------------------------------ */
/* Opening a database                                                        */

enum { EMBER_OPEN_RDONLY = 1u << 0,    /* no writes; the directory must exist */
       EMBER_OPEN_NOCREATE = 1u << 1 };/* fail with ENOTFOUND if DIR is missing */

enum { EMBER_SYNC_FULL = 0,            /* fsync on every commit (default) */
       EMBER_SYNC_INTERVAL = 1,        /* fsync every sync_interval_ms */
       EMBER_SYNC_NONE = 2 };          /* never fsync; the OS decides */

typedef struct ember_open_opts {
    size_t sz;                  /* sizeof(ember_open_opts) */
    unsigned flags;             /* EMBER_OPEN_* */
    int sync;                   /* EMBER_SYNC_*; 0 is FULL */
    unsigned sync_interval_ms;  /* EMBER_SYNC_INTERVAL period; 0: 100 ms */
    uint64_t map_size;          /* initial LMDB map in bytes; 0: 1 GiB. The
                                ** map grows by itself when it fills. */
    int64_t chunk_window_ms;    /* head chunks seal at this window; 0: 15 min */
    uint32_t chunk_max_profiles;/* ... or at this many profiles; 0: 720 */
    int zstd_level;             /* level for sealed chunks; 0: 3 */
    uint64_t cache_bytes;       /* memory for decoded sealed chunks, shared
                                ** by the handle's readers (LRU);
                                ** 0: 256 MiB; EMBER_CACHE_OFF: none */
    uint64_t block_cache_bytes; /* memory for the decoded symbols, postings
                                ** and indexes of blocks no query is
                                ** reading (LRU; a block being read is
                                ** held whatever this says); 0: 256 MiB;
                                ** EMBER_CACHE_OFF: none */
} ember_open_opts;

/* ember_open_opts.cache_bytes: decode every chunk on every read. */
#define EMBER_CACHE_OFF UINT64_MAX

/* Opens (creating unless told not to) the database directory DIR. OPTS may
** be NULL. Unless rc is EMBER_ENOMEM, *db is set even on failure so that
** ember_errmsg says why; always ember_close it. */
EMBER_API int ember_open(const char *dir, const ember_open_opts *opts,
                         ember_db **db);

/* Closes DB, syncing pending writes. NULL is a no-op. No call on DB, nor on
** any object made from it, may run or follow. */
EMBER_API void ember_close(ember_db *db);

/* Forces everything committed so far onto stable storage. */
EMBER_API int ember_sync(ember_db *db);

/* ------------------------------------------------------------------------ */
/* The data model (docs/architecture.md). Ids are uint32 per table; an id
** interned names its record until the next compaction renumbers the head
** (an append naming it then fails with EMBER_EINVAL: intern again; docs/
** operations.md). Id 0 of strings is "", of mappings is the unknown
** mapping, always. */

typedef struct ember_label {
    const char *name;           /* [a-zA-Z_][a-zA-Z0-9_]*, <= 64 bytes */
    const char *value;          /* any UTF-8, <= 400 bytes; "" means the
                                ** label is absent */
} ember_label;

typedef struct ember_mapping {
    uint64_t start, limit, offset;  /* memory range and file offset */
    const char *file;           /* NULL: "" */
    const char *build_id;       /* hex or any identity; NULL: "" */
} ember_mapping;

typedef struct ember_function {
    const char *name;           /* human-readable name; NULL: "" */
    const char *system_name;    /* mangled name; NULL: "" */
    const char *file;           /* source file; NULL: "" */
    int64_t start_line;
} ember_function;

typedef struct ember_line {
    uint32_t function;          /* function id */
    int64_t line;               /* 0: unknown */
} ember_line;

typedef struct ember_location {
    uint32_t mapping;           /* mapping id, 0: unknown */
    uint64_t address;
    const ember_line *lines;    /* innermost inline frame first */
    size_t nlines;
} ember_location;

typedef struct ember_sample {
    uint32_t stack;             /* stack id */
    int64_t value;
} ember_sample;

/* One profile: all samples of one series at one time. A stack listed twice
** is summed. The type is "name:sample_type:sample_unit:period_type:
** period_unit" with an optional ":delta", e.g.
** "process_cpu:samples:count:cpu:nanoseconds:delta". */
typedef struct ember_profile {
    size_t sz;                  /* sizeof(ember_profile) */
    const char *type;
    const ember_label *labels;  /* any order; names must be distinct */
    size_t nlabels;
    int64_t time_ms;            /* unix milliseconds */
    int64_t duration_ns;        /* what the profile covers; 0: unknown */
    int64_t period;             /* sampling period in period units */
    const ember_sample *samples;
    size_t nsamples;
} ember_profile;

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

/* Appends one profile, durable on return (see Durability). Stacks must
** already exist (ember_intern_stack). Concurrent callers share commits. */
EMBER_API int ember_append(ember_db *db, const ember_profile *p);

/* Appends N profiles atomically: all of them or, on failure, none. */
EMBER_API int ember_append_batch(ember_db *db, const ember_profile *ps,
                                 size_t n);

/* An explicit write transaction, for embedders that intern their own
** symbols. It holds the database's writer lock from begin to commit or
** abort: keep it short. Ids it returns are final once it commits and
** vanish if it aborts. One thread at a time may use a txn. */
typedef struct ember_txn ember_txn;

EMBER_API int ember_txn_begin(ember_db *db, ember_txn **txn);
/* Commits and frees TXN, success or not (as mdb_txn_commit). */
EMBER_API int ember_txn_commit(ember_txn *txn);
/* Drops everything TXN did and frees it. NULL is a no-op. */
EMBER_API void ember_txn_abort(ember_txn *txn);

/* Interning: the same content always yields the same id. LEN bytes of S
** (any bytes). */
EMBER_API int ember_intern_string(ember_txn *txn, const char *s, size_t len,
                                  uint32_t *id);
EMBER_API int ember_intern_mapping(ember_txn *txn, const ember_mapping *m,
                                   uint32_t *id);
EMBER_API int ember_intern_function(ember_txn *txn, const ember_function *f,
                                    uint32_t *id);
EMBER_API int ember_intern_location(ember_txn *txn, const ember_location *l,
                                    uint32_t *id);
/* LOCS: location ids, leaf first. N may be 0 (the empty stack). */
EMBER_API int ember_intern_stack(ember_txn *txn, const uint32_t *locs,
                                 size_t n, uint32_t *id);
/* Appends P inside TXN; durable when TXN commits. A profile refused as
** EINVAL or ELIMIT (bad type or labels, unknown stack) writes nothing and
** TXN goes on; after any other failure only ember_txn_abort is left. */
EMBER_API int ember_txn_append(ember_txn *txn, const ember_profile *p);

/* Seals every head chunk into compressed chunks now, instead of waiting for
** its window to close. Queries see the same data either way. */
EMBER_API int ember_seal(ember_db *db);

/* ------------------------------------------------------------------------ */
/* Importing profiler output (docs/api.md, docs/ingest.md)                   */

enum { EMBER_FORMAT_AUTO = 0,       /* told by content */
       EMBER_FORMAT_PPROF = 1,      /* profile.proto, gzipped or not */
       EMBER_FORMAT_COLLAPSED = 2,  /* folded stacks: "main;f;g 42" */
       EMBER_FORMAT_PERF = 3 };     /* `perf script` text */

enum { EMBER_IMPORT_TIME = 1u << 0, /* time_ms is given, even when 0 */
       EMBER_IMPORT_COMM = 1u << 1, /* collapsed: the first frame is
                                    ** stackcollapse-perf's "comm-pid",
                                    ** which becomes labels comm and pid */
       EMBER_IMPORT_NUMERIC_LABELS = 1u << 2 };/* pprof: numeric sample
                                    ** labels ("bytes") become series
                                    ** labels; without, their samples are
                                    ** summed (docs/ingest.md) */

typedef struct ember_import_opts {
    size_t sz;                  /* sizeof(ember_import_opts) */
    int format;                 /* EMBER_FORMAT_*; 0: by content */
    const char *origin;         /* ember_import: the input's name in
                                ** messages; NULL: "<input>" */
    const char *type;           /* collapsed and perf: the profile type;
                                ** NULL: one by format. pprof ignores it */
    const char *name;           /* pprof: the name part of every type;
                                ** NULL: guessed from the sample types */
    const ember_label *labels;  /* put on every profile written */
    size_t nlabels;
    unsigned flags;             /* EMBER_IMPORT_* */
    int64_t time_ms;            /* with EMBER_IMPORT_TIME, the time of input
                                ** that has none (collapsed, pprof without
                                ** time_nanos; perf: its first sample's).
                                ** Without: ember_import takes the clock,
                                ** ember_import_files a 12-13 digit file
                                ** name (unix ms), else the file's mtime */
    int64_t window_ms;          /* perf: a thread's samples within a window
                                ** form one profile; 0: 10 s */
    uint64_t max_bytes;         /* largest input after gunzip (gzip bombs
                                ** stop here); 0: 1 GiB */
} ember_import_opts;

/* What an import read and wrote. */
typedef struct ember_import_stats {
    size_t sz;                  /* sizeof(ember_import_stats) */
    uint64_t files;             /* inputs tried (ember_import: 1) */
    uint64_t failed;            /* of them refused: nothing of theirs kept */
    uint64_t bad_paths;         /* paths neither a file nor a directory
                                ** that could be read */
    uint64_t profiles;          /* profiles written */
    uint64_t samples;           /* samples written (a stack repeated in a
                                ** profile counts once) */
    uint64_t bytes;             /* input bytes written, after gunzip */
    uint64_t read_samples;      /* samples decoded, written or not yet */
    uint64_t read_bytes;        /* input bytes decoded, after gunzip */
} ember_import_stats;

/* Decodes LEN bytes at BUF (pprof, gzipped or not, collapsed stacks or perf
** script, as OPTS says or told by content) and writes all of it in one
** transaction, or nothing: a malformed input, a bad option, more than
** 1 GiB (before gunzip) or than opts->max_bytes (after) write nothing and
** return EINVAL or ELIMIT with a message naming the origin. OPTS may be
** NULL; STATS (may be NULL, else sz set) gets what was written. */
EMBER_API int ember_import(ember_db *db, const void *buf, size_t len,
                           const ember_import_opts *opts,
                           ember_import_stats *stats);

/* ember_import inside TXN, which the caller commits or aborts: several
** inputs written all together or not at all. The input is decoded whole
** before its first write; after a failure TXN may hold part of it, so the
** caller aborts TXN. */
EMBER_API int ember_txn_import(ember_txn *txn, const void *buf, size_t len,
                               const ember_import_opts *opts,
                               ember_import_stats *stats);

/* Callbacks of ember_import_files; any may be NULL. */
typedef struct ember_import_hooks {
    size_t sz;                  /* sizeof(ember_import_hooks) */
    void *ctx;                  /* passed to each */
    /* PATH was not imported (nothing of it was written) or could not be
    ** walked; MSG says why, starting with the path. */
    void (*failed)(void *ctx, const char *path, int rc, const char *msg);
    /* After each file and each commit, with the counts so far. */
    void (*progress)(void *ctx, const ember_import_stats *stats);
} ember_import_hooks;

/* Imports the N PATHS as `ember import` does: a directory is walked
** recursively in name order (dot files skipped, at most 64 deep); each file
** is read (at most 1 GiB) and decoded as ember_import does it; good files
** are written many to a transaction, and should a write fail the batch is
** written again file by file, so each file stays all-or-nothing and one
** bad file never takes others down. Returns EMBER_OK when every path was
** imported; else the first failure's code, ember_errmsg saying it. Bad
** OPTS fail before any file is read. HOOKS and STATS may be NULL. */
EMBER_API int ember_import_files(ember_db *db, const char *const *paths,
                                 size_t n, const ember_import_opts *opts,
                                 const ember_import_hooks *hooks,
                                 ember_import_stats *stats);

/* ------------------------------------------------------------------------ */
/* Selecting                                                                 */

enum { EMBER_MATCH_EQ = 0,      /* name="value" */
       EMBER_MATCH_NEQ = 1,     /* name!="value" */
       EMBER_MATCH_RE = 2,      /* name=~"regex", fully anchored */
       EMBER_MATCH_NRE = 3 };   /* name!~"regex" */

/* PromQL semantics: a missing label has the value "", so name="" selects
** series without the label. Regexes use the RE2-like syntax documented in
** docs/query-language.md and run in time linear in the input. */
typedef struct ember_matcher {
    const char *name;
    const char *value;
    int op;                     /* EMBER_MATCH_* */
} ember_matcher;

typedef struct ember_selector {
    size_t sz;                  /* sizeof(ember_selector) */
    const char *type;           /* exact profile type; NULL: any type */
    const ember_matcher *matchers;
    size_t nmatchers;
    int64_t from_ms, to_ms;     /* inclusive range; both 0: all time */
    const char *focus;          /* regex on function names: keep only stacks
                                ** through a matching function; NULL: all */
    const char *ignore;         /* regex on function names: drop the stacks
                                ** through a matching function; NULL: none.
                                ** With focus: through focus, not ignore. */
    const uint32_t *series;     /* only these series ids (any order); NULL:
                                ** every series the matchers select */
    size_t nseries;
    /* Where compaction kept downsampled copies (ember_compact_opts'
    ** resolutions), which copy may stand in for profiles as stored: one
    ** whose bucket width divides this (a merge's sums are exact over the
    ** buckets inside the range; stored profiles fill the edges); -1: any,
    ** the coarsest first; 0: none. Where only copies are left (retention
    ** dropped the stored profiles), the finest copy is read anyway. */
    int64_t resolution_ms;
} ember_selector;

/* One stored sample, as ember_iter_next yields them: ordered by series,
** then time, then stack (two profiles of a series with the same time come
** one after the other, each in stack order). */
typedef struct ember_point {
    uint32_t series;
    int64_t time_ms;
    uint32_t stack;
    int64_t value;
} ember_point;

typedef struct ember_iter ember_iter;

/* Starts an iterator over every sample SEL selects, on a snapshot taken
** now. Free it with ember_iter_free. */
EMBER_API int ember_select(ember_db *db, const ember_selector *sel,
                           ember_iter **it);
/* EMBER_OK with *p filled, EMBER_DONE at the end, or an error (a corrupt
** chunk is an error, never skipped). */
EMBER_API int ember_iter_next(ember_iter *it, ember_point *p);
EMBER_API void ember_iter_free(ember_iter *it);

/* A merged profile: each distinct stack with its summed value, ordered by
** stack id. Sums are exact: a merge whose positive or negative values do
** not sum within int64 fails with EMBER_ELIMIT instead of wrapping. Its
** stack ids are those of the snapshot it was made on, which it holds
** until ember_merged_free (ember_pprof_encode reads them there): like a
** snapshot it holds back space reuse, so free it promptly. */
typedef struct ember_merged ember_merged;

EMBER_API int ember_merge(ember_db *db, const ember_selector *sel,
                          ember_merged **out);
/* Number of stacks; *stacks and *values (either may be NULL) point into M. */
EMBER_API size_t ember_merged_samples(const ember_merged *m,
                                      const uint32_t **stacks,
                                      const int64_t **values);
/* How many series and profiles the merge covered. */
EMBER_API void ember_merged_info(const ember_merged *m, uint64_t *nseries,
                                 uint64_t *nprofiles);
/* The merged header as pprof's merge makes it: the earliest and latest
** profile time (unix ms), the summed duration (ns; profiles sharing a time
** and a duration, as the parts of one imported file do, count once) and
** the largest period of the profiles merged; all 0 when none was. Out
** pointers may be NULL. */
EMBER_API void ember_merged_span(const ember_merged *m, int64_t *min_time_ms,
                                 int64_t *max_time_ms, int64_t *duration_ns,
                                 int64_t *period);
EMBER_API void ember_merged_free(ember_merged *m);

/* Per-profile totals over time (the graph above a flame graph): for each
** selected series, each profile's time and summed value. */
typedef struct ember_totals ember_totals;

EMBER_API int ember_totals_get(ember_db *db, const ember_selector *sel,
                               ember_totals **out);
EMBER_API size_t ember_totals_count(const ember_totals *t);
/* Series I of T: its id, and N points of (times[k], values[k]) by time. */
EMBER_API void ember_totals_series(const ember_totals *t, size_t i,
                                   uint32_t *series, const int64_t **times,
                                   const int64_t **values, size_t *n);
EMBER_API void ember_totals_free(ember_totals *t);

/* ------------------------------------------------------------------------ */
/* Metadata: lists of strings                                                */

typedef struct ember_strlist ember_strlist;

EMBER_API size_t ember_strlist_count(const ember_strlist *l);
EMBER_API const char *ember_strlist_get(const ember_strlist *l, size_t i);
EMBER_API void ember_strlist_free(ember_strlist *l);

/* Sorted distinct label names of the series SEL selects (SEL NULL: all);
** the range of SEL is ignored. "__type__" is not listed. */
EMBER_API int ember_label_names(ember_db *db, const ember_selector *sel,
                                ember_strlist **out);
/* Sorted distinct values of label NAME among the series SEL selects. */
EMBER_API int ember_label_values(ember_db *db, const char *name,
                                 const ember_selector *sel,
                                 ember_strlist **out);
/* Sorted distinct profile types among the series SEL selects. */
EMBER_API int ember_profile_types(ember_db *db, const ember_selector *sel,
                                  ember_strlist **out);
/* Series ID: its type at index 0, then name, value pairs sorted by name. */
EMBER_API int ember_series_labels(ember_db *db, uint32_t id,
                                  ember_strlist **out);

/* ------------------------------------------------------------------------ */
/* Snapshots: symbol lookups that see one consistent state. Every pointer a
** snapshot returns lives until ember_snapshot_end. Snapshots are cheap but
** hold back space reuse in the file while open: end them promptly. One
** thread at a time may use a snapshot (it opens blocks and makes its
** tables as questions reach them). */

typedef struct ember_snapshot ember_snapshot;

EMBER_API int ember_snapshot_begin(ember_db *db, ember_snapshot **s);
EMBER_API void ember_snapshot_end(ember_snapshot *s);   /* NULL: no-op */

/* Stack ID's location ids, leaf first. */
EMBER_API int ember_snapshot_stack(ember_snapshot *s, uint32_t id,
                                   const uint32_t **locs, size_t *n);
EMBER_API int ember_snapshot_location(ember_snapshot *s, uint32_t id,
                                      ember_location *out);
EMBER_API int ember_snapshot_function(ember_snapshot *s, uint32_t id,
                                      ember_function *out);
EMBER_API int ember_snapshot_mapping(ember_snapshot *s, uint32_t id,
                                     ember_mapping *out);
/* String ID; *len (if not NULL) gets its length. NUL-terminated. */
EMBER_API int ember_snapshot_string(ember_snapshot *s, uint32_t id,
                                    const char **str, size_t *len);
/* ember_merge on snapshot S: merges made on one snapshot name each stack
** by one id (the head and blocks may each store it), so two of them can
** be compared id by id, as a diff does. The result holds S. */
EMBER_API int ember_snapshot_merge(ember_snapshot *s, const ember_selector *sel,
                                   ember_merged **out);

/* ------------------------------------------------------------------------ */
/* pprof out                                                                 */

enum { EMBER_PPROF_GZIP = 1u };     /* gzip the bytes, as .pb.gz files are */

/* Encodes M as a pprof profile (profile.proto) that `go tool pprof` opens.
** TYPE is the profile type of what was merged: it gives the sample and
** period types; period, time and duration come from ember_merged_span.
** Every non-zero stack is written with its locations, inline lines,
** functions and mappings, read from the snapshot M holds (or, for a merge
** made by hand, from a new snapshot of DB). *OUT gets a new
** buffer of *LEN bytes to free with ember_free. EMBER_EINVAL for a bad
** TYPE or FLAGS. */
EMBER_API int ember_pprof_encode(ember_db *db, const ember_merged *m,
                                 const char *type, unsigned flags, void **out,
                                 size_t *len);

/* Frees a buffer Ember returned (ember_pprof_encode's). NULL: no-op. */
EMBER_API void ember_free(void *p);

/* ------------------------------------------------------------------------ */
/* Queries (docs/query-language.md)                                          */

typedef struct ember_query_opts {
    size_t sz;                  /* sizeof(ember_query_opts) */
    int64_t from_ms, to_ms;     /* the range selectors without [range] or @
                                ** cover, inclusive; both 0: all time */
    int64_t step_ms;            /* series: bucket points by this; 0: one
                                ** point per profile */
    int64_t now_ms;             /* "now" for relative times in @; 0: the
                                ** clock */
    /* Limits (0: none). Both cover running the query, not rendering it.
    ** Past them ember_query frees what it made and fails: EMBER_ETIMEOUT
    ** naming how far it got, or EMBER_ELIMIT "query memory limit of N
    ** bytes exceeded in WHAT". A caller built before these two fields
    ** (its sz the struct's size then) gets no limits. */
    int64_t timeout_ms;         /* wall-clock time from the call, checked
                                ** per chunk read, series built and batch
                                ** of stacks resolved */
    uint64_t max_bytes;         /* memory the query's own structures hold
                                ** at once (merges, names, stacks, series,
                                ** results), counted through Ember's
                                ** allocator; decoded chunks belong to the
                                ** handle's cache (cache_bytes), not here */
} ember_query_opts;

/* What a query gives. */
enum { EMBER_RESULT_PROFILE = 1,    /* merged profiles, one per group */
       EMBER_RESULT_DIFF = 2,       /* profiles with base and target values */
       EMBER_RESULT_SERIES = 3,     /* values over time, one per series */
       EMBER_RESULT_TABLE = 4 };    /* one column of strings (metadata) */

typedef struct ember_result ember_result;

/* Parses, plans and runs the query TEXT on one snapshot of DB. OPTS may be
** NULL. A query that does not parse or does not type-check is EMBER_EINVAL
** with the query, a caret under the spot and what was expected; one past
** opts' timeout_ms is EMBER_ETIMEOUT, past its max_bytes EMBER_ELIMIT. */
EMBER_API int ember_query(ember_db *db, const char *text,
                          const ember_query_opts *opts, ember_result **out);
EMBER_API void ember_result_free(ember_result *r);      /* NULL: no-op */
EMBER_API int ember_result_kind(const ember_result *r);
/* The profile type of a profile, diff or series result; NULL when series
** span several types, and for tables. */
EMBER_API const char *ember_result_type(const ember_result *r);

/* One frame of a result stack. */
enum { EMBER_FRAME_INLINED = 1u };  /* inlined into the frame that follows */
typedef struct ember_frame {
    const char *name;           /* function name */
    unsigned flags;             /* EMBER_FRAME_* */
} ember_frame;

/* Profiles and diffs: how many groups (merge by gives one per group). */
EMBER_API size_t ember_result_groups(const ember_result *r);
/* Group G's labels (NULL, 0 for a plain merge) and stack count. */
EMBER_API void ember_result_group(const ember_result *r, size_t g,
                                  const ember_label **labels, size_t *nlabels,
                                  size_t *nstacks);
/* Stack J of group G: frames leaf first (into *frames, an array valid until
** the next call on R), its value and, for a diff, its base value (0
** otherwise). EMBER_EINVAL when G or J is out of range. */
EMBER_API int ember_result_stack(ember_result *r, size_t g, size_t j,
                                 const ember_frame **frames, size_t *nframes,
                                 int64_t *value, int64_t *base);

/* Series: how many, and series I's labels and N points. */
EMBER_API size_t ember_result_series_count(const ember_result *r);
EMBER_API void ember_result_series(const ember_result *r, size_t i,
                                   const ember_label **labels,
                                   size_t *nlabels, const int64_t **times,
                                   const double **values, size_t *n);

/* Tables: the column's name and its rows. */
EMBER_API const char *ember_result_column(const ember_result *r);
EMBER_API size_t ember_result_rows(const ember_result *r);
EMBER_API const char *ember_result_row(const ember_result *r, size_t i);

/* Notes for a person about any result, in order: why a query matched
** nothing ("no series has label \"servce\" (did you mean service?)"), the
** stored span when the range missed it, which type a short type name or a
** selector without one resolved to. A query with notes still succeeded.
** ember_result_note gives note I (NULL past the end), valid until R is
** freed. */
EMBER_API size_t ember_result_notes(const ember_result *r);
EMBER_API const char *ember_result_note(const ember_result *r, size_t i);

/* How ember_result_render draws; a zeroed struct with sz set: defaults. */
typedef struct ember_render_opts {
    size_t sz;                  /* sizeof(ember_render_opts) */
    size_t limit;               /* top, tree: at most this many rows; 0: N
                                ** of the query's top(P, N), else all */
    int cum_sort;               /* top: sort by cum instead of flat */
    const char *unit;           /* top: pprof's -unit; NULL: "minimum" */
    unsigned width;             /* flame, table: columns; 0: 100 */
    int relative;               /* top, tree, svg: after focus or ignore,
                                ** percentages of what they kept, not of the
                                ** whole selection (pprof's
                                ** -relative_percentages) */
} ember_render_opts;

/* Renders R as `ember query -o FORMAT` prints it: for profiles and diffs
** "top", "tree", "flame", "collapsed", "pprof", "json", "svg"; for series
** "table", "csv", "json", "spark"; for tables "table", "csv", "json". DB
** is not used and may be NULL for every format (it stays for the ABI):
** "pprof" reads the symbols of R's stacks through the snapshot R's query
** ran on, which R holds until ember_result_free (its database must still
** be open). *OUT gets a new buffer of *LEN bytes
** and a NUL, to free with ember_free. EMBER_EINVAL naming the formats that
** fit when FORMAT does not fit R's kind. */
EMBER_API int ember_result_render(ember_db *db, const ember_result *r,
                                  const char *format,
                                  const ember_render_opts *opts, char **out,
                                  size_t *len);

/* ------------------------------------------------------------------------ */
/* Statistics and verification                                               */

#define EMBER_STATS_MAX_TABLES 24

typedef struct ember_table_stats {
    char name[24];              /* LMDB sub-database name */
    uint64_t entries;
    uint64_t bytes;             /* pages it holds, times the page size */
} ember_table_stats;

typedef struct ember_stats {
    size_t sz;                  /* sizeof(ember_stats) */
    uint64_t series, profiles, samples;
    uint64_t stacks, locations, functions, mappings, strings;
    uint64_t chunks, head_chunks;   /* sealed and still-open chunks */
    uint64_t chunk_bytes;       /* stored chunk payload bytes */
    uint64_t file_bytes;        /* size of the data file on disk */
    uint64_t used_bytes;        /* pages in use, times the page size */
    uint32_t format_version;
    unsigned ntables;
    ember_table_stats tables[EMBER_STATS_MAX_TABLES];
    /* The handle's decoded-chunk cache (all 0 when it is off): chunk reads
    ** it answered and did not, since the open; what it holds now. */
    uint64_t cache_hits, cache_misses;
    uint64_t cache_bytes, cache_entries;
    int lockless;               /* 1: opened read-only without lock.mdb,
                                ** which this user may not write: a writer
                                ** working meanwhile may change what this
                                ** handle reads (docs/getting-started.md) */
    /* Blocks (ember_compact): how many, their bytes on disk, and what they
    ** hold; profiles and samples above count the head's and the blocks'.
    ** A series stored in several blocks counts once per block. */
    uint64_t blocks, block_bytes;
    uint64_t block_series, block_profiles, block_samples, block_stacks;
    /* Blocks the handle holds open, and the memory of their decoded
    ** tables (ember_open_opts.block_cache_bytes bounds the idle ones). */
    uint64_t blocks_open, blocks_open_bytes;
} ember_stats;

EMBER_API int ember_stats_get(ember_db *db, ember_stats *out);

/* Called once per problem found, with a line naming what and where. */
typedef void (*ember_problem_fn)(void *ctx, const char *problem);

/* Walks every table and chunk, checking checksums, decodes and references.
** Returns EMBER_OK when clean, EMBER_ECORRUPT when it found damage (each
** problem went to FN, which may be NULL), or another error if it could not
** finish. *nproblems (may be NULL) gets the count. */
EMBER_API int ember_verify(ember_db *db, ember_problem_fn fn, void *ctx,
                           uint64_t *nproblems);

/* ------------------------------------------------------------------------ */
/* Compaction (docs/operations.md)                                           */

/* Progress of a compaction step: DONE of TOTAL units of WHAT. */
typedef void (*ember_progress_fn)(void *ctx, const char *what, uint64_t done,
                                  uint64_t total);

/* A retention rule: how long the series it selects are kept. */
typedef struct ember_retention {
    const char *type;           /* profile type; '*' matches any run of
                                ** characters ("memory:*"); NULL: any */
    const ember_matcher *matchers;  /* and these (NULL: none) */
    size_t nmatchers;
    int64_t keep_ms;            /* 0: forever */
} ember_retention;

/* A resolution kept: profiles as stored (0) or per bucket of this width,
** and for how long. */
typedef struct ember_resolution {
    int64_t resolution_ms;      /* 0: as stored; else a multiple of 1000 */
    int64_t keep_ms;            /* 0: as long as retention keeps data */
} ember_resolution;

typedef struct ember_compact_opts {
    size_t sz;                  /* sizeof(ember_compact_opts) */
    int64_t now_ms;             /* 0: the clock */
    int64_t head_ms;            /* the newest data kept in the head; -1:
                                ** the default (1 hour); 0: none */
    int64_t block_ms;           /* span of a block cut from the head; 0:
                                ** the default (2 hours) */
    int dry_run;                /* 1: say what would be done, do nothing */
    ember_progress_fn progress; /* NULL: none */
    void *ctx;
    /* Blocks of a whole window this wide (ending before the cut) are
    ** merged into one; 0: the default (1 day), a multiple of block_ms. */
    int64_t merge_ms;
    /* The first rule that selects a series decides how long it is kept;
    ** none: kept forever. Data goes in whole blocks: up to merge_ms late. */
    const ember_retention *retention;
    size_t nretention;
    /* The resolutions kept (docs/operations.md): a merged block gets a
    ** downsampled copy per resolution above 0, and each copy and the
    ** block itself go when their keep_ms passes; queries read the coarsest
    ** copy their range and step allow. NULL: profiles as stored only. */
    const ember_resolution *resolutions;
    size_t nresolutions;
    /* zstd level (1 to 22) of merged blocks and their downsampled copies;
    ** 0: the default, 15. Blocks cut from the head are written at 3: each
    ** is rewritten when its merge window is whole. */
    int zstd_level;
} ember_compact_opts;

/* What one step did, in bytes of the database directory. */
typedef struct ember_compact_step {
    char name[16];              /* "seal", "cut", "merge", "downsample",
                                ** "retention", "gc", "punch" */
    uint64_t bytes_before, bytes_after;
    uint64_t items;             /* what it worked on: heads sealed, blocks
                                ** written, records dropped, pages freed */
    int64_t elapsed_ms;
} ember_compact_step;

#define EMBER_COMPACT_MAX_STEPS 10

typedef struct ember_compact_report {
    size_t sz;                  /* sizeof(ember_compact_report) */
    uint64_t bytes_before, bytes_after;     /* of the directory, on disk */
    uint64_t blocks_written, profiles_moved, blocks_removed;
    unsigned nsteps;
    ember_compact_step steps[EMBER_COMPACT_MAX_STEPS];
} ember_compact_report;

/* The nightly job: seals the head, moves its data older than head_ms into
** immutable blocks, rebuilds the head without what nothing names, and
** gives the freed pages back to the file system. Safe while other threads
** and processes import and query: they see the database before or after,
** never between. One compaction at a time per database (EMBER_EBUSY).
** OPTS NULL: defaults. OUT (may be NULL) says what was done. */
EMBER_API int ember_compact(ember_db *db, const ember_compact_opts *opts,
                            ember_compact_report *out);

/* ------------------------------------------------------------------------ */
/* The client: the same calls against `ember serve` (docs/api.md, "Embedding:
** the client"; docs/protocol.md). A client's results, lists and stats are
** the very objects the local calls give: free them with the same calls.
** Errors: the server's errors come back as their EMBER_* code (400 EINVAL,
** 404 ENOTFOUND, 413 and 422 ELIMIT, 503 EBUSY, 504 ETIMEOUT, others EIO)
** with the server's message; a server that cannot be reached is EMBER_EIO naming
** the URL. One client is used by one thread at a time. */

typedef struct ember_client ember_client;

typedef struct ember_client_opts {
    size_t sz;                  /* sizeof(ember_client_opts) */
    const char *token;          /* sent as "Authorization: Bearer TOKEN";
                                ** NULL: none */
    unsigned timeout_ms;        /* a whole request; 0: no limit */
    unsigned connect_timeout_ms;/* connecting; 0: 10 s */
    const char *ca_file;        /* https: PEM certificates to trust (a
                                ** server's own self-signed one); NULL: the
                                ** system's */
} ember_client_opts;

/* Opens a client of the server at URL: "unix:PATH" (a Unix socket),
** "http://HOST:PORT" or "https://HOST:PORT". Nothing is sent yet: a server
** that is not there fails the first call. OPTS may be NULL. */
EMBER_API int ember_client_open(const char *url, const ember_client_opts *o,
                                ember_client **c);
EMBER_API void ember_client_close(ember_client *c);    /* NULL: no-op */
/* The calling thread's last failure message, as ember_errmsg: the
** server's own message for a refused request. Never NULL. */
EMBER_API const char *ember_client_errmsg(const ember_client *c);

/* ember_query on the server: the result holds everything a local one does
** (groups, stacks, series, rows, notes), and ember_result_render draws it
** byte for byte as it draws ember_query's, "pprof" included. "now" and
** relative times are the server's clock (opts->now_ms is not sent);
** opts->timeout_ms may lower the server's time limit, and the memory limit
** is the server's (opts->max_bytes is not sent). */
EMBER_API int ember_client_query(ember_client *c, const char *text,
                                 const ember_query_opts *opts,
                                 ember_result **out);
/* ember_import on the server (POST /api/v1/import), with the same options
** (max_bytes at most the server's 1 GiB). STATS gets what the server
** wrote. */
EMBER_API int ember_client_import(ember_client *c, const void *buf,
                                  size_t len, const ember_import_opts *opts,
                                  ember_import_stats *stats);
/* ember_import_files on the server: walks the paths as it does and sends
** each file as one import (each all or nothing; a file's time when it has
** none is its unix-ms name or its mtime, as locally). */
EMBER_API int ember_client_import_files(ember_client *c,
                                        const char *const *paths, size_t n,
                                        const ember_import_opts *opts,
                                        const ember_import_hooks *hooks,
                                        ember_import_stats *stats);
/* Label names, a label's values and profile types of the series MATCH
** selects (a selector of the query language, `{service="api"}`; NULL:
** all series), as ember_label_names and friends give them. */
EMBER_API int ember_client_label_names(ember_client *c, const char *match,
                                       ember_strlist **out);
EMBER_API int ember_client_label_values(ember_client *c, const char *name,
                                        const char *match,
                                        ember_strlist **out);
EMBER_API int ember_client_profile_types(ember_client *c, const char *match,
                                         ember_strlist **out);
/* The server's ember_stats_get (GET /api/v1/status): the counts and sizes;
** the per-table and cache figures are not sent (ntables is 0). */
EMBER_API int ember_client_stats(ember_client *c, ember_stats *out);

/* ------------------------------------------------------------------------ */
/* Pushing to a server (docs/server.md, "Push from the agent")              */

/* Sends profiles to `ember serve` or any Pyroscope-compatible server
** (POST /ingest?format=pprof) from a thread of its own, through a bounded
** spool on disk: each window of profiles is durable in the spool before a
** send is tried, is retried with backoff while the server is away, and
** survives a restart (the next pusher on the same spool sends it). */
typedef struct ember_pusher ember_pusher;

/* Called with one line: a drop, a refusal, an outage and its end. */
typedef void (*ember_log_fn)(void *ctx, const char *line);

typedef struct ember_pusher_opts {
    size_t sz;                  /* sizeof(ember_pusher_opts) */
    const char *spool_dir;      /* required; made when missing */
    uint64_t buffer_bytes;      /* the spool's bound; 0: 256 MiB */
    const char *token;          /* "Authorization: Bearer"; NULL: none */
    int64_t backoff_min_ms;     /* first retry after; 0: 1 s */
    int64_t backoff_max_ms;     /* doubling, jittered, up to; 0: 60 s */
    int64_t timeout_ms;         /* one request; 0: 30 s */
    ember_log_fn log;           /* NULL: silent */
    void *log_ctx;
} ember_pusher_opts;

/* One profile of a window, sent as Pyroscope's name=APP{k=v,...}. */
typedef struct ember_push_profile {
    const char *app;            /* the service_name label */
    const ember_label *labels;  /* "" values are left out; ',', '=', '{',
                                ** '}' in values become '_' */
    size_t nlabels;
    int64_t time_ms, duration_ns;   /* from and until */
    const void *pprof;          /* profile.proto, gzipped or not */
    size_t len;
} ember_push_profile;

typedef struct ember_pusher_stats {
    size_t sz;                  /* sizeof(ember_pusher_stats) */
    uint64_t sent_windows;      /* done: each profile delivered or refused */
    uint64_t sent_profiles, sent_bytes;     /* delivered */
    uint64_t queued_windows, queued_bytes;  /* in the spool now */
    uint64_t dropped_windows, dropped_bytes;    /* oldest, buffer full */
    uint64_t refused_profiles;  /* a 4xx but 408 and 429: dropped */
    uint64_t damaged_windows;   /* spool files failing their checks */
    uint64_t retries;           /* attempts failed and to be retried */
} ember_pusher_stats;

/* Opens a pusher to URL: http://HOST:PORT[/PREFIX], https://..., or
** unix:PATH (a server's Unix socket); queued windows a previous pusher
** left in the spool are sent first. *OUT is NULL on failure. */
EMBER_API int ember_pusher_open(const char *url, const ember_pusher_opts *opts,
                                ember_pusher **out);
/* Spools N profiles as one window, durable on return, dropping the oldest
** windows when the buffer is full (logged and counted); the bytes are
** copied. EMBER_ELIMIT when the window alone exceeds the buffer. */
EMBER_API int ember_pusher_send(ember_pusher *p,
                                const ember_push_profile *profiles, size_t n);
/* Waits up to TIMEOUT_MS for the spool to empty: EMBER_OK, or EMBER_DONE
** when windows are still queued (at once while the server is away). */
EMBER_API int ember_pusher_flush(ember_pusher *p, int64_t timeout_ms);
/* Counts since open (queued: now). */
EMBER_API void ember_pusher_stats_get(ember_pusher *p, ember_pusher_stats *out);
/* Stops the sender after its request in flight; what is queued stays in
** the spool for the next pusher. NULL: no-op. */
EMBER_API void ember_pusher_close(ember_pusher *p);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_H */
