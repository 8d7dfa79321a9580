/*
** bench/gen_sqlite.c: the SQLite baseline of bench_engine and bench_export
** (which fills it from a database through the public API). Schema (ids are
** INTEGER PRIMARY KEYs; blobs hold varint lists):
**
**   strings(id, s UNIQUE)
**   mappings(id, file_id, build_id, start, lim, off, UNIQUE(all but id))
**   functions(id, name_id, system_name_id, file_id, start_line, UNIQUE(...))
**   locations(id, mapping_id, address, lines BLOB, UNIQUE(...))
**           lines: (function id, line) varint pairs, innermost first
**   stacks(id, locs BLOB UNIQUE)       location ids, leaf first, varints
**   series(id, type, labels, UNIQUE(type, labels))
**   series_labels(name, value, series_id) WITHOUT ROWID,
**           PRIMARY KEY (name, value, series_id), INDEX (series_id, name)
**   profiles(id, series_id, ts, duration, period), INDEX (series_id, ts)
**   samples(profile_id, stack_id, value) WITHOUT ROWID,
**           PRIMARY KEY (profile_id, stack_id)
**
** This is the shape a careful developer would pick: normalized symbols,
** postings-like label index, a clustered samples table so a profile's
** samples sit together, WAL, prepared statements, large page cache and
** mmap, temp b-trees in memory. Regular expressions come from a REGEXP
** function over POSIX extended regexes, compiled once per statement.
*/
#include <regex.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/gen_sqlite.h"
#include "engine/engine.h"

enum {
    S_SERIES_GET, S_SERIES_PUT, S_LABEL_PUT, S_PROFILE_PUT, S_SAMPLE_PUT,
    S_STR_GET, S_STR_PUT, S_MAP_GET, S_MAP_PUT, S_FUNC_GET, S_FUNC_PUT,
    S_LOC_GET, S_LOC_PUT, S_STACK_GET, S_STACK_PUT,
    S_MAP_PUT_ID, S_FUNC_PUT_ID, S_LOC_PUT_ID, S_STACK_PUT_ID, S_N
};

static const char *const stmt_sql[S_N] = {
    "SELECT id FROM series WHERE type = ?1 AND labels = ?2",
    "INSERT INTO series(type, labels) VALUES (?1, ?2)",
    "INSERT INTO series_labels(name, value, series_id) VALUES (?1, ?2, ?3)",
    "INSERT INTO profiles(series_id, ts, duration, period) VALUES (?1, ?2, ?3, ?4)",
    "INSERT INTO samples(profile_id, stack_id, value) VALUES (?1, ?2, ?3)",
    "SELECT id FROM strings WHERE s = ?1",
    "INSERT INTO strings(s) VALUES (?1)",
    "SELECT id FROM mappings WHERE file_id = ?1 AND build_id = ?2 AND start = ?3"
    " AND lim = ?4 AND off = ?5",
    "INSERT INTO mappings(file_id, build_id, start, lim, off) VALUES (?1, ?2, ?3, ?4, ?5)",
    "SELECT id FROM functions WHERE name_id = ?1 AND system_name_id = ?2"
    " AND file_id = ?3 AND start_line = ?4",
    "INSERT INTO functions(name_id, system_name_id, file_id, start_line)"
    " VALUES (?1, ?2, ?3, ?4)",
    "SELECT id FROM locations WHERE mapping_id = ?1 AND address = ?2 AND lines = ?3",
    "INSERT INTO locations(mapping_id, address, lines) VALUES (?1, ?2, ?3)",
    "SELECT id FROM stacks WHERE locs = ?1",
    "INSERT INTO stacks(locs) VALUES (?1)",
    "INSERT INTO mappings(file_id, build_id, start, lim, off, id)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    "INSERT INTO functions(name_id, system_name_id, file_id, start_line, id)"
    " VALUES (?1, ?2, ?3, ?4, ?5)",
    "INSERT INTO locations(mapping_id, address, lines, id) VALUES (?1, ?2, ?3, ?4)",
    "INSERT INTO stacks(locs, id) VALUES (?1, ?2)",
};

static const char schema[] =
    "CREATE TABLE strings(id INTEGER PRIMARY KEY, s TEXT NOT NULL UNIQUE);"
    "CREATE TABLE mappings(id INTEGER PRIMARY KEY, file_id INT, build_id INT,"
    " start INT, lim INT, off INT, UNIQUE(file_id, build_id, start, lim, off));"
    "CREATE TABLE functions(id INTEGER PRIMARY KEY, name_id INT, system_name_id INT,"
    " file_id INT, start_line INT, UNIQUE(name_id, system_name_id, file_id, start_line));"
    "CREATE TABLE locations(id INTEGER PRIMARY KEY, mapping_id INT, address INT,"
    " lines BLOB, UNIQUE(mapping_id, address, lines));"
    "CREATE TABLE stacks(id INTEGER PRIMARY KEY, locs BLOB NOT NULL UNIQUE);"
    "CREATE TABLE series(id INTEGER PRIMARY KEY, type TEXT NOT NULL,"
    " labels TEXT NOT NULL, UNIQUE(type, labels));"
    "CREATE TABLE series_labels(name TEXT NOT NULL, value TEXT NOT NULL,"
    " series_id INT NOT NULL, PRIMARY KEY(name, value, series_id)) WITHOUT ROWID;"
    "CREATE INDEX series_labels_series ON series_labels(series_id, name);"
    "CREATE TABLE profiles(id INTEGER PRIMARY KEY, series_id INT NOT NULL,"
    " ts INT NOT NULL, duration INT, period INT);"
    "CREATE INDEX profiles_series_ts ON profiles(series_id, ts);"
    "CREATE TABLE samples(profile_id INT NOT NULL, stack_id INT NOT NULL,"
    " value INT NOT NULL, PRIMARY KEY(profile_id, stack_id)) WITHOUT ROWID;";

static const char pragmas_full[] =
    "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-262144;"
    " PRAGMA mmap_size=8589934592; PRAGMA temp_store=MEMORY;";

struct sqlb {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *st[S_N];
    /* per-profile symbol caches of sqlb_append_intern, by generator index */
    uint32_t stamp, nmaps, nfuncs, nlocs;
    uint32_t *map_stamp, *func_stamp, *loc_stamp;
    int64_t *map_id, *func_id, *loc_id;
};

const char *sqlb_pragmas(void)
{
    return "journal_mode=WAL, synchronous=FULL, cache_size=256MiB, mmap_size=8GiB,"
           " temp_store=MEMORY, page_size=4096";
}

const char *sqlb_version(void)
{
    return sqlite3_libversion();
}

static int fail(sqlb *b, const char *what)
{
    fprintf(stderr, "sqlite: %s: %s\n", what, sqlite3_errmsg(b->db));
    return -1;
}

/* ---- REGEXP: fully anchored POSIX ERE, compiled once per statement ------- */

static void re_free(void *p)
{
    regfree(p);
    free(p);
}

static void re_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    regex_t *re = sqlite3_get_auxdata(ctx, 0);
    const char *s = (const char *)sqlite3_value_text(argv[1]);

    (void)argc;
    if (re == NULL) {
        const char *pat = (const char *)sqlite3_value_text(argv[0]);
        char *full = malloc(strlen(pat ? pat : "") + 5);
        re = malloc(sizeof *re);
        if (full == NULL || re == NULL) {
            free(full);
            free(re);
            sqlite3_result_error_nomem(ctx);
            return;
        }
        sprintf(full, "^(%s)$", pat ? pat : "");
        if (regcomp(re, full, REG_EXTENDED | REG_NOSUB) != 0) {
            free(full);
            free(re);
            sqlite3_result_error(ctx, "bad regular expression", -1);
            return;
        }
        free(full);
        sqlite3_set_auxdata(ctx, 0, re, re_free);
        re = sqlite3_get_auxdata(ctx, 0);
        if (re == NULL) {
            sqlite3_result_error_nomem(ctx);
            return;
        }
    }
    sqlite3_result_int(ctx, s != NULL && regexec(re, s, 0, NULL, 0) == 0);
}

/* ---- open, close ----------------------------------------------------------- */

static void remove_db(const char *path)
{
    char buf[4096];

    unlink(path);
    snprintf(buf, sizeof buf, "%s-wal", path);
    unlink(buf);
    snprintf(buf, sizeof buf, "%s-shm", path);
    unlink(buf);
}

sqlb *sqlb_open(const char *path, bool sync_full)
{
    sqlb *b = calloc(1, sizeof *b);

    if (b == NULL)
        return NULL;
    remove_db(path);
    b->path = strdup(path);
    if (sqlite3_open(path, &b->db) != SQLITE_OK) {
        fail(b, path);
        sqlb_close(b);
        return NULL;
    }
    if (sqlite3_exec(b->db, pragmas_full, NULL, NULL, NULL) != SQLITE_OK ||
        (!sync_full && sqlite3_exec(b->db, "PRAGMA synchronous=NORMAL", NULL, NULL,
                                    NULL) != SQLITE_OK) ||
        sqlite3_exec(b->db, schema, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(b->db, "regexp", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                NULL, re_func, NULL, NULL) != SQLITE_OK) {
        fail(b, "schema");
        sqlb_close(b);
        return NULL;
    }
    for (int i = 0; i < S_N; i++)
        if (sqlite3_prepare_v3(b->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &b->st[i], NULL) != SQLITE_OK) {
            fail(b, stmt_sql[i]);
            sqlb_close(b);
            return NULL;
        }
    return b;
}

void sqlb_close(sqlb *b)
{
    if (b == NULL)
        return;
    for (int i = 0; i < S_N; i++)
        sqlite3_finalize(b->st[i]);
    sqlite3_close(b->db);
    free(b->path);
    free(b->map_stamp);
    free(b->func_stamp);
    free(b->loc_stamp);
    free(b->map_id);
    free(b->func_id);
    free(b->loc_id);
    free(b);
}

int sqlb_begin(sqlb *b)
{
    return sqlite3_exec(b->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0
                                                                     : fail(b, "begin");
}

int sqlb_commit(sqlb *b)
{
    return sqlite3_exec(b->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0
                                                                      : fail(b, "commit");
}

/* ---- statement helpers --------------------------------------------------------- */

/* Runs statement I to completion; *ID (if not NULL) gets the first column of
** the first row, or -1 when there is none. */
static int run(sqlb *b, int i, int64_t *id)
{
    sqlite3_stmt *st = b->st[i];
    int rc = sqlite3_step(st);

    if (id != NULL)
        *id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    while (rc == SQLITE_ROW)
        rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : fail(b, stmt_sql[i]);
}

/* SELECT id (statement GET) or INSERT (statement PUT) with the same binds,
** which the caller made on both. */
static int get_or_put(sqlb *b, int get, int put, int64_t *id)
{
    if (run(b, get, id) != 0)
        return -1;
    if (*id >= 0)
        return 0;
    if (run(b, put, NULL) != 0)
        return -1;
    *id = sqlite3_last_insert_rowid(b->db);
    return 0;
}

static int intern_string(sqlb *b, const char *s, int64_t *id)
{
    sqlite3_bind_text(b->st[S_STR_GET], 1, s, -1, SQLITE_STATIC);
    sqlite3_bind_text(b->st[S_STR_PUT], 1, s, -1, SQLITE_STATIC);
    return get_or_put(b, S_STR_GET, S_STR_PUT, id);
}


static void bind_i64s(sqlite3_stmt *st, const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        sqlite3_bind_int64(st, i + 1, v[i]);
}

/* Binds mapping M of G on the get and put statements (put: with ID when
** ID >= 0). */
static int bind_mapping(sqlb *b, const gen *g, uint32_t m, int get, int put)
{
    int64_t v[5];
    uint64_t start, limit;
    const char *build_id;

    gen_mapping_info(g, m, &start, &limit, &build_id);
    if (intern_string(b, gen_mapping_file(g, m), &v[0]) != 0 ||
        intern_string(b, build_id, &v[1]) != 0)
        return -1;
    v[2] = (int64_t)start;
    v[3] = (int64_t)limit;
    v[4] = 0;
    if (get >= 0)
        bind_i64s(b->st[get], v, 5);
    bind_i64s(b->st[put], v, 5);
    return 0;
}

static int bind_function(sqlb *b, const gen *g, uint32_t f, int get, int put)
{
    int64_t v[4];

    if (intern_string(b, gen_function_name(g, f), &v[0]) != 0 ||
        intern_string(b, gen_function_file(g, f), &v[2]) != 0)
        return -1;
    v[1] = v[0];                /* system name = name, as gen_ember.c does */
    v[3] = gen_function_line(g, f);
    if (get >= 0)
        bind_i64s(b->st[get], v, 4);
    bind_i64s(b->st[put], v, 4);
    return 0;
}

static void bind_location(sqlb *b, const gen *g, uint32_t l, int64_t map_id,
                          int64_t func_id, int get, int put)
{
    uint32_t f, m;
    int64_t line;
    uint64_t addr;
    uint8_t blob[32];
    size_t n;

    gen_location(g, l, &f, &line, &addr, &m);
    n = em_varint_put(blob, (uint64_t)func_id);
    n += em_varint_put(blob + n, (uint64_t)line);
    for (int s = 0; s < 2; s++) {
        int i = s ? put : get;
        if (i < 0)
            continue;
        sqlite3_bind_int64(b->st[i], 1, map_id);
        sqlite3_bind_int64(b->st[i], 2, (int64_t)addr);
        sqlite3_bind_blob(b->st[i], 3, blob, (int)n, SQLITE_TRANSIENT);
    }
}

static void bind_stack(sqlb *b, const gen *g, uint32_t s, const int64_t *loc_ids,
                       int get, int put)
{
    uint8_t blob[70 * 10];
    size_t n, len = 0;
    const uint32_t *locs = gen_stack(g, s, &n);

    for (size_t k = 0; k < n; k++)
        len += em_varint_put(blob + len, (uint64_t)loc_ids[locs[k]]);
    if (get >= 0)
        sqlite3_bind_blob(b->st[get], 1, blob, (int)len, SQLITE_TRANSIENT);
    sqlite3_bind_blob(b->st[put], 1, blob, (int)len, SQLITE_TRANSIENT);
}

/* ---- loading ------------------------------------------------------------------ */

/* Commits and begins again every BATCH calls. */
static int batch_step(sqlb *b, size_t *count, size_t batch)
{
    if (++*count % batch != 0)
        return 0;
    return sqlb_commit(b) == 0 && sqlb_begin(b) == 0 ? 0 : -1;
}

int sqlb_load_symbols(sqlb *b, const gen *g, size_t batch)
{
    size_t nl = gen_nlocations(g), count = 0;
    int64_t *ids = malloc(nl * sizeof *ids);
    int rc = 0;

    if (batch == 0)
        batch = 1000;
    if (ids == NULL || sqlb_begin(b) != 0) {
        free(ids);
        return -1;
    }
    for (uint32_t m = 0; rc == 0 && m < gen_nmappings(g); m++) {
        rc = bind_mapping(b, g, m, -1, S_MAP_PUT_ID);
        sqlite3_bind_int64(b->st[S_MAP_PUT_ID], 6, m);
        rc = rc ? rc : run(b, S_MAP_PUT_ID, NULL);
        rc = rc ? rc : batch_step(b, &count, batch);
    }
    for (uint32_t f = 0; rc == 0 && f < gen_nfunctions(g); f++) {
        rc = bind_function(b, g, f, -1, S_FUNC_PUT_ID);
        sqlite3_bind_int64(b->st[S_FUNC_PUT_ID], 5, f);
        rc = rc ? rc : run(b, S_FUNC_PUT_ID, NULL);
        rc = rc ? rc : batch_step(b, &count, batch);
    }
    for (uint32_t l = 0; rc == 0 && l < nl; l++) {
        uint32_t f, m;
        int64_t line;
        uint64_t addr;
        gen_location(g, l, &f, &line, &addr, &m);
        bind_location(b, g, l, m, f, -1, S_LOC_PUT_ID);
        sqlite3_bind_int64(b->st[S_LOC_PUT_ID], 4, l);
        rc = run(b, S_LOC_PUT_ID, NULL);
        rc = rc ? rc : batch_step(b, &count, batch);
        ids[l] = l;
    }
    for (uint32_t s = 0; rc == 0 && s < gen_nstacks(g); s++) {
        bind_stack(b, g, s, ids, -1, S_STACK_PUT_ID);
        sqlite3_bind_int64(b->st[S_STACK_PUT_ID], 2, s);
        rc = run(b, S_STACK_PUT_ID, NULL);
        rc = rc ? rc : batch_step(b, &count, batch);
    }
    free(ids);
    return rc == 0 ? sqlb_commit(b) : -1;
}

/* ---- symbols by id, from a database -------------------------------------------- */

int sqlb_put_mapping(sqlb *b, int64_t id, const ember_mapping *m)
{
    sqlite3_stmt *st = b->st[S_MAP_PUT_ID];
    int64_t v[6];

    if (intern_string(b, m->file ? m->file : "", &v[0]) != 0 ||
        intern_string(b, m->build_id ? m->build_id : "", &v[1]) != 0)
        return -1;
    v[2] = (int64_t)m->start;
    v[3] = (int64_t)m->limit;
    v[4] = (int64_t)m->offset;
    v[5] = id;
    bind_i64s(st, v, 6);
    return run(b, S_MAP_PUT_ID, NULL);
}

int sqlb_put_function(sqlb *b, int64_t id, const ember_function *f)
{
    int64_t v[5];

    if (intern_string(b, f->name ? f->name : "", &v[0]) != 0 ||
        intern_string(b, f->system_name ? f->system_name : "", &v[1]) != 0 ||
        intern_string(b, f->file ? f->file : "", &v[2]) != 0)
        return -1;
    v[3] = f->start_line;
    v[4] = id;
    bind_i64s(b->st[S_FUNC_PUT_ID], v, 5);
    return run(b, S_FUNC_PUT_ID, NULL);
}

/* Runs the PUT_ID statement I with BLOB (N bytes) at 1 and 3, ID last. */
static int put_blob_row(sqlb *b, int i, const uint8_t *blob, size_t n)
{
    int rc = sqlite3_bind_blob(b->st[i], i == S_LOC_PUT_ID ? 3 : 1, blob, (int)n,
                               SQLITE_TRANSIENT);
    return rc == SQLITE_OK ? run(b, i, NULL) : fail(b, "bind blob");
}

int sqlb_put_location(sqlb *b, int64_t id, const ember_location *l)
{
    uint8_t *blob = malloc(l->nlines * 20 + 1);
    size_t n = 0;
    int rc;

    if (blob == NULL)
        return fail(b, "out of memory");
    for (size_t k = 0; k < l->nlines; k++) {
        n += em_varint_put(blob + n, l->lines[k].function);
        n += em_varint_put(blob + n, (uint64_t)l->lines[k].line);
    }
    sqlite3_bind_int64(b->st[S_LOC_PUT_ID], 1, l->mapping);
    sqlite3_bind_int64(b->st[S_LOC_PUT_ID], 2, (int64_t)l->address);
    sqlite3_bind_int64(b->st[S_LOC_PUT_ID], 4, id);
    rc = put_blob_row(b, S_LOC_PUT_ID, blob, n);
    free(blob);
    return rc;
}

int sqlb_put_stack(sqlb *b, int64_t id, const uint32_t *locs, size_t n)
{
    uint8_t *blob = malloc(n * 5 + 1);
    size_t len = 0;
    int rc;

    if (blob == NULL)
        return fail(b, "out of memory");
    for (size_t k = 0; k < n; k++)
        len += em_varint_put(blob + len, locs[k]);
    sqlite3_bind_int64(b->st[S_STACK_PUT_ID], 2, id);
    rc = put_blob_row(b, S_STACK_PUT_ID, blob, len);
    free(blob);
    return rc;
}

/* The series id of P's type and labels, created with its label rows when
** new. Labels arrive sorted by name (the generator's), so the text form
** "name=value\x1f..." is canonical. */
static int series_id(sqlb *b, const ember_profile *p, int64_t *id)
{
    char buf[2048];
    size_t len = 0;

    for (size_t i = 0; i < p->nlabels && len < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s=%s\x1f",
                                p->labels[i].name, p->labels[i].value);
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    for (int i = S_SERIES_GET; i <= S_SERIES_PUT; i++) {
        sqlite3_bind_text(b->st[i], 1, p->type, -1, SQLITE_STATIC);
        sqlite3_bind_text(b->st[i], 2, buf, (int)len, SQLITE_TRANSIENT);
    }
    if (run(b, S_SERIES_GET, id) != 0)
        return -1;
    if (*id >= 0)
        return 0;
    if (run(b, S_SERIES_PUT, NULL) != 0)
        return -1;
    *id = sqlite3_last_insert_rowid(b->db);
    for (size_t i = 0; i < p->nlabels; i++) {
        sqlite3_stmt *st = b->st[S_LABEL_PUT];
        sqlite3_bind_text(st, 1, p->labels[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, p->labels[i].value, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, *id);
        if (run(b, S_LABEL_PUT, NULL) != 0)
            return -1;
    }
    return 0;
}

static int profile_row(sqlb *b, const ember_profile *p, int64_t *pid)
{
    sqlite3_stmt *st = b->st[S_PROFILE_PUT];
    int64_t sid;

    if (series_id(b, p, &sid) != 0)
        return -1;
    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int64(st, 2, p->time_ms);
    sqlite3_bind_int64(st, 3, p->duration_ns);
    sqlite3_bind_int64(st, 4, p->period);
    if (run(b, S_PROFILE_PUT, NULL) != 0)
        return -1;
    *pid = sqlite3_last_insert_rowid(b->db);
    return 0;
}

static int sample_row(sqlb *b, int64_t pid, int64_t stack, int64_t value)
{
    sqlite3_stmt *st = b->st[S_SAMPLE_PUT];

    sqlite3_bind_int64(st, 1, pid);
    sqlite3_bind_int64(st, 2, stack);
    sqlite3_bind_int64(st, 3, value);
    if (sqlite3_step(st) != SQLITE_DONE) {
        sqlite3_reset(st);
        return fail(b, "insert sample");
    }
    sqlite3_reset(st);
    return 0;
}

int sqlb_append(sqlb *b, const ember_profile *p)
{
    int64_t pid;

    if (profile_row(b, p, &pid) != 0)
        return -1;
    for (size_t i = 0; i < p->nsamples; i++)
        if (sample_row(b, pid, p->samples[i].stack, p->samples[i].value) != 0)
            return -1;
    return 0;
}

/* ---- per-profile interning ------------------------------------------------------ */

static int cache_init(sqlb *b, const gen *g)
{
    if (b->loc_stamp != NULL)
        return 0;
    b->nmaps = (uint32_t)gen_nmappings(g);
    b->nfuncs = (uint32_t)gen_nfunctions(g);
    b->nlocs = (uint32_t)gen_nlocations(g);
    b->map_stamp = calloc(b->nmaps, sizeof *b->map_stamp);
    b->func_stamp = calloc(b->nfuncs, sizeof *b->func_stamp);
    b->loc_stamp = calloc(b->nlocs, sizeof *b->loc_stamp);
    b->map_id = calloc(b->nmaps, sizeof *b->map_id);
    b->func_id = calloc(b->nfuncs, sizeof *b->func_id);
    b->loc_id = calloc(b->nlocs, sizeof *b->loc_id);
    if (!b->map_stamp || !b->func_stamp || !b->loc_stamp || !b->map_id ||
        !b->func_id || !b->loc_id) {
        fprintf(stderr, "sqlite: out of memory\n");
        return -1;
    }
    return 0;
}

static int cached_location(sqlb *b, const gen *g, uint32_t l)
{
    uint32_t f, m;
    int64_t line;
    uint64_t addr;

    if (b->loc_stamp[l] == b->stamp)
        return 0;
    gen_location(g, l, &f, &line, &addr, &m);
    if (b->map_stamp[m] != b->stamp) {
        if (bind_mapping(b, g, m, S_MAP_GET, S_MAP_PUT) != 0 ||
            get_or_put(b, S_MAP_GET, S_MAP_PUT, &b->map_id[m]) != 0)
            return -1;
        b->map_stamp[m] = b->stamp;
    }
    if (b->func_stamp[f] != b->stamp) {
        if (bind_function(b, g, f, S_FUNC_GET, S_FUNC_PUT) != 0 ||
            get_or_put(b, S_FUNC_GET, S_FUNC_PUT, &b->func_id[f]) != 0)
            return -1;
        b->func_stamp[f] = b->stamp;
    }
    bind_location(b, g, l, b->map_id[m], b->func_id[f], S_LOC_GET, S_LOC_PUT);
    if (get_or_put(b, S_LOC_GET, S_LOC_PUT, &b->loc_id[l]) != 0)
        return -1;
    b->loc_stamp[l] = b->stamp;
    return 0;
}

int sqlb_append_intern(sqlb *b, const gen *g, const ember_profile *p)
{
    int64_t pid;

    if (cache_init(b, g) != 0 || profile_row(b, p, &pid) != 0)
        return -1;
    b->stamp++;
    for (size_t i = 0; i < p->nsamples; i++) {
        uint32_t s = p->samples[i].stack;
        size_t n;
        const uint32_t *locs = gen_stack(g, s, &n);
        int64_t sid;
        for (size_t k = 0; k < n; k++)
            if (cached_location(b, g, locs[k]) != 0)
                return -1;
        bind_stack(b, g, s, b->loc_id, S_STACK_GET, S_STACK_PUT);
        if (get_or_put(b, S_STACK_GET, S_STACK_PUT, &sid) != 0 ||
            sample_row(b, pid, sid, p->samples[i].value) != 0)
            return -1;
    }
    return 0;
}

/* ---- queries --------------------------------------------------------------------- */

/* Appends to SQL the series selection "SELECT s.id FROM series s WHERE ..."
** for TYPE and the matchers; the binds follow in order (type, then name and
** value per matcher). */
static void series_sql(char *sql, size_t cap, const char *type,
                       const ember_matcher *m, size_t n)
{
    static const char *const clause[] = {
        " AND s.id IN (SELECT series_id FROM series_labels WHERE name = ? AND value = ?)",
        " AND s.id NOT IN (SELECT series_id FROM series_labels WHERE name = ? AND value = ?)",
        " AND s.id IN (SELECT series_id FROM series_labels WHERE name = ? AND value REGEXP ?)",
        " AND s.id NOT IN (SELECT series_id FROM series_labels WHERE name = ? AND value REGEXP ?)",
    };
    size_t len = strlen(sql);

    len += (size_t)snprintf(sql + len, cap - len, "SELECT s.id FROM series s WHERE %s",
                            type ? "s.type = ?" : "1");
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(sql + len, cap - len, "%s", clause[m[i].op & 3]);
}

static int bind_selection(sqlite3_stmt *st, int at, const char *type,
                          const ember_matcher *m, size_t n)
{
    if (type != NULL)
        sqlite3_bind_text(st, at++, type, -1, SQLITE_STATIC);
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_text(st, at++, m[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, at++, m[i].value, -1, SQLITE_STATIC);
    }
    return at;
}

int sqlb_merge(sqlb *b, const char *type, const ember_matcher *m, size_t n,
               int64_t from, int64_t to, uint64_t *nstacks, int64_t *sum)
{
    char sql[4096] = "SELECT sa.stack_id, sum(sa.value) FROM profiles p"
                     " JOIN samples sa ON sa.profile_id = p.id WHERE p.series_id IN (";
    sqlite3_stmt *st;
    int rc, at;
    uint64_t sumu = 0;

    series_sql(sql, sizeof sql, type, m, n);
    strncat(sql, ") AND p.ts BETWEEN ? AND ? GROUP BY sa.stack_id",
            sizeof sql - strlen(sql) - 1);
    if (sqlite3_prepare_v2(b->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail(b, sql);
    at = bind_selection(st, 1, type, m, n);
    sqlite3_bind_int64(st, at++, from);
    sqlite3_bind_int64(st, at, to);
    *nstacks = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        (*nstacks)++;
        sumu += (uint64_t)sqlite3_column_int64(st, 1);
    }
    *sum = (int64_t)sumu;
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(b, "merge");
}

int sqlb_label_values(sqlb *b, const char *name, const char *type,
                      const ember_matcher *m, size_t n, uint64_t *count)
{
    char sql[4096] = "SELECT DISTINCT value FROM series_labels WHERE name = ?"
                     " AND series_id IN (";
    sqlite3_stmt *st;
    int rc;

    series_sql(sql, sizeof sql, type, m, n);
    strncat(sql, ")", sizeof sql - strlen(sql) - 1);
    if (sqlite3_prepare_v2(b->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail(b, sql);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    bind_selection(st, 2, type, m, n);
    *count = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        (*count)++;
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(b, "label values");
}

/* ---- sizes ------------------------------------------------------------------------ */

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

int sqlb_analyze(sqlb *b)
{
    return sqlite3_exec(b->db, "ANALYZE", NULL, NULL, NULL) == SQLITE_OK ? 0
                                                                       : fail(b, "analyze");
}

int64_t sqlb_checkpoint_size(sqlb *b)
{
    char wal[4096];

    if (sqlite3_exec(b->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) != SQLITE_OK)
        return fail(b, "checkpoint");
    snprintf(wal, sizeof wal, "%s-wal", b->path);
    return file_size(b->path) + file_size(wal);
}

static int64_t pragma_int(sqlb *b, const char *sql)
{
    sqlite3_stmt *st;
    int64_t v = -1;

    if (sqlite3_prepare_v2(b->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail(b, sql);
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int64_t sqlb_live_bytes(sqlb *b)
{
    return (pragma_int(b, "PRAGMA page_count") - pragma_int(b, "PRAGMA freelist_count")) *
           pragma_int(b, "PRAGMA page_size");
}

int64_t sqlb_table_bytes(sqlb *b, const char *table)
{
    sqlite3_stmt *st;
    int64_t bytes = -1;

    if (sqlite3_prepare_v2(b->db,
            "SELECT sum(pgsize) FROM dbstat WHERE name = ?1 OR name IN"
            " (SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1)",
            -1, &st, NULL) != SQLITE_OK)
        return fail(b, "dbstat");
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        bytes = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return bytes;
}
