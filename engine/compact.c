/*
** engine/compact.c: ember_compact, the nightly job, as steps:
**
**   seal   every open head into sealed chunks (ember_seal);
**   cut    the head's sealed profiles older than the cut into level-0
**          blocks, one per window, written on a read snapshot while
**          ingest goes on, then committed in one write transaction that
**          checks nothing it read changed, drops it from the head and
**          enters the blocks in the catalog: a snapshot sees the profiles
**          in the head or in a block, never both, never neither;
**   gc     the head's tables rebuilt with only what its chunks still name;
**   punch  the pages LMDB freed given back to the file system.
**
** Block ids come from the meta counter block_seq, raised in a write
** transaction before any file is written: a block file whose id is above
** it was never allocated by this database's history, so the database went
** back in time (a lost or reverted LMDB commit), which compaction reports
** instead of removing the file. A file at or below it that the catalog
** does not name is a leftover of a compaction cut short, and removed. One
** compaction at a time: DIR/blocks/LOCK is held with flock.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "engine/compact.h"

#define DEFAULT_HEAD_MS (3600 * 1000ll)
#define DEFAULT_BLOCK_MS (2 * 3600 * 1000ll)
#define DEFAULT_MERGE_MS (24 * 3600 * 1000ll)
/* Merged blocks stay for good: 15 against 19 cost 1.3% more bytes and
** took half the time on bench's synthetic day (bench/RESULTS.md). */
#define DEFAULT_ZSTD_LEVEL 15
/* Level-0 blocks live until their merge window is whole (a day by
** default), then are rewritten: zstd 19 took half of a compaction's time
** there for bytes that soon go. */
#define CUT_ZSTD_LEVEL 3
#define CUT_TRIES 3

/* ---- bytes on disk ---------------------------------------------------------------- */

static uint64_t file_du(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* What `du` says of the database directory and its blocks. */
static uint64_t dir_du(em_cjob *j)
{
    char path[4400];
    uint64_t n = 0;
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof path, "%s/data.mdb", j->db->dir);
    n += file_du(path);
    snprintf(path, sizeof path, "%s/lock.mdb", j->db->dir);
    n += file_du(path);
    if ((d = opendir(j->blocks)) == NULL)
        return n;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", j->blocks, e->d_name);
        n += file_du(path);
    }
    closedir(d);
    return n;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int step_begin(em_cjob *j, const char *name, int64_t *t0)
{
    ember_compact_step *s;

    *t0 = em_mono_ns();
    if (j->rep->nsteps >= EMBER_COMPACT_MAX_STEPS)
        return -1;
    s = &j->rep->steps[j->rep->nsteps];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->bytes_before = dir_du(j);
    return (int)j->rep->nsteps++;
}

static void step_end(em_cjob *j, int k, int64_t t0, uint64_t items)
{
    ember_compact_step *s;

    if (k < 0)
        return;
    s = &j->rep->steps[k];
    s->bytes_after = dir_du(j);
    s->items = items;
    s->elapsed_ms = (em_mono_ns() - t0) / 1000000;
}

void em_cjob_progress(em_cjob *j, const char *what, uint64_t done, uint64_t total)
{
    if (j->in != NULL && j->in->progress != NULL)
        j->in->progress(j->in->ctx, what, done, total);
}

/* ---- the blocks directory, its lock and its leftovers ------------------------------- */

static int blocks_open(em_cjob *j)
{
    char path[4200];

    snprintf(j->blocks, sizeof j->blocks, "%s/blocks", j->db->dir);
    if (mkdir(j->blocks, 0700) != 0 && errno != EEXIST)
        return em_err(EMBER_EIO, "%s: cannot create: %s", j->blocks,
                      strerror(errno));
    snprintf(path, sizeof path, "%s/LOCK", j->blocks);
    j->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->lock_fd < 0)
        return em_err(EMBER_EIO, "%s: %s", path, strerror(errno));
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return em_err(errno == EWOULDBLOCK ? EMBER_EBUSY : EMBER_EIO,
                      "%s: another compaction is running", j->db->dir);
    return EMBER_OK;
}

/* ---- the cut ------------------------------------------------------------------------------- */

/* Windows (block starts) holding sealed head profiles before the cut. */
typedef struct wins {
    int64_t *v;
    size_t n, cap;
} wins;

static int64_t floor_to(int64_t t, int64_t span)
{
    return (t / span - (t % span < 0)) * span;
}

static int wins_add(wins *w, int64_t start)
{
    for (size_t i = w->n; i-- > 0;)     /* chunks come in time per series */
        if (w->v[i] == start)
            return EMBER_OK;
    if (w->n == w->cap) {
        int64_t *g = em_grow(w->v, &w->cap, w->n + 1, sizeof *g);
        if (g == NULL)
            return em_err(EMBER_ENOMEM, "compact: %zu windows", w->n + 1);
        w->v = g;
    }
    w->v[w->n++] = start;
    return EMBER_OK;
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Lists the windows of R's sealed chunks that hold profiles before the
** cut (from the chunk headers: no chunk is decoded). */
static int cut_windows(em_cjob *j, em_rtxn *r, wins *w)
{
    MDB_cursor *cur;
    MDB_val k, d;
    int rc = EMBER_OK;
    int mrc = mdb_cursor_open(r->txn, j->db->dbi[EM_D_CHUNK], &cur);

    if (mrc != MDB_SUCCESS)
        return em_lmdb(mrc, "compact: chunk cursor");
    for (mrc = em_val_cursor(j->db, EM_D_CHUNK, cur, &k, &d, MDB_FIRST,
                             &rc);
         mrc == MDB_SUCCESS && rc == EMBER_OK;
         mrc = em_val_cursor(j->db, EM_D_CHUNK, cur, &k, &d, MDB_NEXT,
                             &rc)) {
        em_chunk_header h;
        if ((rc = em_chunk_header_read(d.mv_data, d.mv_size, &h)) !=
            EMBER_OK || (h.flags & EM_CHUNK_HEAD) || h.min_time >= j->o.cut)
            continue;
        int64_t last = h.max_time < j->o.cut ? h.max_time : j->o.cut - 1;
        for (int64_t s = floor_to(h.min_time, j->o.block_ms);
             s <= last && rc == EMBER_OK; s += j->o.block_ms)
            rc = wins_add(w, s);
    }
    mdb_cursor_close(cur);
    if (rc == EMBER_OK && mrc != MDB_NOTFOUND)
        rc = em_lmdb(mrc, "compact: chunk scan");
    if (rc == EMBER_OK && w->n > 0)
        qsort(w->v, w->n, sizeof *w->v, i64_cmp);
    return rc;
}

/* Raises block_seq by N in its own commit: ids [*FIRST, *FIRST + N). */
typedef struct ids_ctx {
    uint64_t n, first;
} ids_ctx;

static int ids_txn(em_wtxn *w, void *ctx)
{
    ids_ctx *c = ctx;
    uint64_t seq = 0;
    int rc = em_meta_get_u64(w->txn, w->db, "block_seq", &seq);

    c->first = seq + 1;
    return rc == EMBER_OK ? em_meta_put_u64(w->txn, w->db, "block_seq",
                                            seq + c->n) : rc;
}

int em_cjob_ids(em_cjob *j, uint64_t n, uint64_t *first)
{
    ids_ctx c = { n, 0 };
    int rc = em_write_run(j->db, ids_txn, &c);

    *first = c.first;
    return rc;
}

typedef struct made {
    em_block_info *v;
    size_t n, cap;
} made;

static void made_unlink(em_cjob *j, const made *m)
{
    char path[4200];

    for (size_t i = 0; i < m->n; i++) {
        snprintf(path, sizeof path, "%s/%016llx.block", j->blocks,
                 (unsigned long long)m->v[i].id);
        unlink(path);
    }
}

static int chunk_cmp(const void *a, const void *b)
{
    return memcmp(((const em_cut_chunk *)a)->key,
                  ((const em_cut_chunk *)b)->key, EM_CHUNK_KEY_LEN);
}

/* Sorts L by key and drops the repeats of chunks read by two windows. */
static void cut_list_unique(em_cut_list *l)
{
    size_t w = 0;

    qsort(l->v, l->n, sizeof *l->v, chunk_cmp);
    for (size_t i = 0; i < l->n; i++)
        if (w == 0 || memcmp(l->v[w - 1].key, l->v[i].key,
                             EM_CHUNK_KEY_LEN) != 0)
            l->v[w++] = l->v[i];
    l->n = w;
}

/* Re-stores the profiles at or after the cut of the chunk D of SERIES. */
static int cut_remainder(em_cjob *j, em_wtxn *w, uint32_t series,
                         const MDB_val *d)
{
    em_chunk ch;
    em_chunk_profile *tp = NULL;
    size_t k = 0;
    int rc = em_chunk_decode(j->db->wcodec, d->mv_data, d->mv_size,
                             EM_COL_ALL, &ch);

    if (rc != EMBER_OK)
        return rc;
    rc = em_chunk_transpose(&ch, &tp);
    for (uint32_t i = 0; rc == EMBER_OK && i < ch.h.nprofiles; i++)
        if (tp[i].time_ms >= j->o.cut)
            tp[k++] = tp[i];
    w->chunk.len = 0;
    if (rc == EMBER_OK && k > 0)
        rc = em_chunk_encode(j->db->wcodec, tp, k, 0,
                             j->db->opts.zstd_level, &w->chunk);
    if (rc == EMBER_OK && k > 0)
        rc = em_chunk_store(w, series);
    em_free(tp);
    em_chunk_release(&ch);
    return rc;
}

/* In W: checks that every chunk of L is as it was read, drops it, keeps
** what lies after the cut. EMBER_EBUSY when one changed meanwhile. */
static int cut_drop(em_cjob *j, em_wtxn *w, const em_cut_list *l)
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < l->n && rc == EMBER_OK; i++) {
        MDB_val k = { EM_CHUNK_KEY_LEN, l->v[i].key }, raw, d = { 0, NULL };
        const uint8_t *p = NULL;
        uint32_t series, seq;
        int64_t t;
        int mrc = mdb_get(w->txn, j->db->dbi[EM_D_CHUNK], &k, &raw);
        if (mrc == MDB_SUCCESS &&
            (rc = em_val_get(j->db, EM_D_CHUNK, &k, &raw, &p, &d.mv_size)) !=
            EMBER_OK)
            return rc;
        d.mv_data = (void *)p;
        if (mrc == MDB_NOTFOUND || (mrc == MDB_SUCCESS &&
            (d.mv_size != l->v[i].len || d.mv_size < 12 ||
             em_get_le32((const uint8_t *)d.mv_data + 8) != l->v[i].crc)))
            return em_err(EMBER_EBUSY, "compact: a head chunk changed "
                          "while its block was written");
        if (mrc != MDB_SUCCESS)
            return em_lmdb(mrc, "compact: chunk get");
        em_chunk_key_parse(l->v[i].key, &series, &t, &seq);
        if (l->v[i].straddles)
            rc = cut_remainder(j, w, series, &d);
        w->c.chunk_bytes -= l->v[i].len;
        if (rc == EMBER_OK)
            rc = em_lmdb(mdb_del(w->txn, j->db->dbi[EM_D_CHUNK], &k, NULL),
                         "compact: chunk del");
    }
    return rc;
}

typedef struct cut_ctx {
    em_cjob *j;
    const em_cut_list *l;
    const made *m;
} cut_ctx;

static int cut_txn(em_wtxn *w, void *ctx)
{
    cut_ctx *c = ctx;
    int rc = cut_drop(c->j, w, c->l);

    for (size_t i = 0; i < c->m->n && rc == EMBER_OK; i++) {
        rc = em_catalog_put(w, &c->m->v[i], 0);
        w->c.profiles -= c->m->v[i].nprofiles;
        w->c.samples -= c->m->v[i].nsamples;
    }
    return rc;
}

/* Commits the cut: the head chunks of L dropped, the blocks of M in. */
static int cut_commit(em_cjob *j, const em_cut_list *l, const made *m)
{
    cut_ctx c = { j, l, m };

    return em_write_run(j->db, cut_txn, &c);
}

/* One try of the cut: blocks written from a snapshot, then committed. */
static int cut_try(em_cjob *j, made *m, em_cut_list *l)
{
    wins w = { 0 };
    uint64_t first = 0;
    em_rtxn r;
    int rc = em_rtxn_begin(j->db, &r);

    if (rc == EMBER_OK)
        rc = cut_windows(j, &r, &w);
    if (rc == EMBER_OK && w.n > 0 && !j->in_dry)
        rc = em_cjob_ids(j, w.n, &first);
    if (rc == EMBER_OK && w.n > 0 &&
        (m->v = em_calloc(w.n, sizeof *m->v)) == NULL)
        rc = em_err(EMBER_ENOMEM, "compact: %zu blocks", w.n);
    for (size_t i = 0; rc == EMBER_OK && !j->in_dry && i < w.n; i++) {
        em_cjob_progress(j, "cut", i, w.n);
        rc = em_cut_window(&r, &j->o, w.v[i], first + i, l, &m->v[m->n]);
        if (rc == EMBER_OK && m->v[m->n].nseries > 0)
            m->n++;
        else if (rc == EMBER_OK) {      /* the window's chunks held nothing
                                        ** inside it */
            made one = { &m->v[m->n], 1, 1 };
            made_unlink(j, &one);
        }
    }
    em_rtxn_end(&r);
    em_free(w.v);
    if (j->in_dry) {
        j->dry_windows = w.n;
        return rc;
    }
    if (rc == EMBER_OK && m->n > 0) {
        cut_list_unique(l);
        rc = cut_commit(j, l, m);
    }
    return rc;
}

static int step_cut(em_cjob *j, uint64_t *nblocks)
{
    int rc = EMBER_EBUSY;

    *nblocks = 0;
    for (int t = 0; t < CUT_TRIES; t++) {
        made m = { 0 };
        em_cut_list l = { 0 };
        rc = cut_try(j, &m, &l);
        if (rc != EMBER_OK && !j->in_dry)
            made_unlink(j, &m);
        for (size_t i = 0; rc == EMBER_OK && i < m.n; i++) {
            j->rep->profiles_moved += m.v[i].nprofiles;
            (*nblocks)++;
        }
        em_free(m.v);
        em_free(l.v);
        if (rc != EMBER_EBUSY)
            break;
    }
    j->rep->blocks_written = *nblocks;
    return rc;
}

/* ---- the job --------------------------------------------------------------------------------- */

/* Checks and compiles the retention rules and the resolutions. */
static int opts_rules(em_cjob *j, const ember_compact_opts *in)
{
    em_compact_opts *o = &j->o;
    int rc = EMBER_OK;

    o->retention = in->retention;
    o->nretention = in->retention != NULL ? in->nretention : 0;
    o->res = in->resolutions;
    o->nres = in->resolutions != NULL ? in->nresolutions : 0;
    for (size_t i = 0; i < o->nres; i++)
        if (o->res[i].resolution_ms < 0 || o->res[i].keep_ms < 0 ||
            (o->res[i].resolution_ms > 0 &&
             (o->res[i].resolution_ms % 1000 != 0 ||
              j->o.merge_ms % o->res[i].resolution_ms != 0)))
            return em_err(EMBER_EINVAL, "compact: resolution %zu: %lld ms "
                          "(whole seconds dividing merge_ms %lld)", i,
                          (long long)o->res[i].resolution_ms,
                          (long long)j->o.merge_ms);
    if (o->nretention > 0 &&
        (o->rx = em_calloc(o->nretention, sizeof *o->rx)) == NULL)
        return em_err(EMBER_ENOMEM, "compact: retention");
    for (size_t i = 0; i < o->nretention && rc == EMBER_OK; i++) {
        const ember_retention *r = &o->retention[i];
        if (r->keep_ms < 0 || (r->nmatchers > 0 && r->matchers == NULL))
            return em_err(EMBER_EINVAL, "compact: retention rule %zu", i);
        if ((o->rx[i] = em_calloc(r->nmatchers + 1, sizeof *o->rx[i])) ==
            NULL)
            return em_err(EMBER_ENOMEM, "compact: retention");
        for (size_t m = 0; m < r->nmatchers && rc == EMBER_OK; m++) {
            rc = em_matcher_check(&r->matchers[m]);
            if (rc == EMBER_OK &&
                (r->matchers[m].op == EMBER_MATCH_RE ||
                 r->matchers[m].op == EMBER_MATCH_NRE))
                rc = em_regex_compile(r->matchers[m].value, &o->rx[i][m]);
        }
    }
    return em_err_prefix(rc, "compact: retention");
}

static void opts_free(em_compact_opts *o)
{
    for (size_t i = 0; o->rx != NULL && i < o->nretention; i++) {
        for (size_t m = 0; o->rx[i] != NULL &&
             m < o->retention[i].nmatchers; m++)
            em_regex_free(o->rx[i][m]);
        em_free(o->rx[i]);
    }
    em_free(o->rx);
}

static int opts_resolve(em_cjob *j, const ember_compact_opts *in)
{
    int64_t head = DEFAULT_HEAD_MS, span = DEFAULT_BLOCK_MS;

    if (in != NULL && in->sz < sizeof *in)
        return em_err(EMBER_EINVAL, "compact: opts.sz is not "
                      "sizeof(ember_compact_opts)");
    j->o.now = in != NULL && in->now_ms != 0 ? in->now_ms : now_ms();
    if (in != NULL && in->head_ms >= 0)
        head = in->head_ms;
    if (in != NULL && in->block_ms > 0)
        span = in->block_ms;
    if (in != NULL && (in->head_ms < -1 || in->block_ms < 0 ||
                       span > 366 * 24 * 3600 * 1000ll))
        return em_err(EMBER_EINVAL, "compact: head_ms %lld, block_ms %lld",
                      (long long)in->head_ms, (long long)in->block_ms);
    j->o.block_ms = span;
    /* whole windows only, so that a window's block is made once */
    j->o.cut = head == 0 ? INT64_MAX
                         : floor_to(j->o.now - head, span);
    j->o.zstd_level = in != NULL && in->zstd_level != 0 ? in->zstd_level
                                                       : DEFAULT_ZSTD_LEVEL;
    j->o.cut_zstd_level = CUT_ZSTD_LEVEL;
    if (j->o.zstd_level < 1 || j->o.zstd_level > ZSTD_maxCLevel())
        return em_err(EMBER_EINVAL, "compact: zstd level %d (1 to %d)",
                      j->o.zstd_level, ZSTD_maxCLevel());
    j->o.blocks_dir = j->blocks;
    j->in_dry = in != NULL && in->dry_run;
    j->o.merge_ms = in != NULL && in->merge_ms > 0 ? in->merge_ms
                                                  : DEFAULT_MERGE_MS;
    if (j->o.merge_ms % span != 0)
        return em_err(EMBER_EINVAL, "compact: merge_ms %lld is not a "
                      "multiple of block_ms %lld", (long long)j->o.merge_ms,
                      (long long)span);
    return in != NULL ? opts_rules(j, in) : EMBER_OK;
}

static int run_steps(em_cjob *j)
{
    int64_t t0;
    uint64_t n = 0;
    int k, rc = EMBER_OK;

    if (!j->in_dry) {
        k = step_begin(j, "seal", &t0);
        rc = ember_seal(j->db);
        step_end(j, k, t0, 0);
    }
    if (rc == EMBER_OK) {
        k = step_begin(j, "cut", &t0);
        rc = step_cut(j, &n);
        step_end(j, k, t0, j->in_dry ? j->dry_windows : n);
    }
    if (rc == EMBER_OK) {
        k = step_begin(j, "merge", &t0);
        rc = em_blocks_merge(j, &n);
        step_end(j, k, t0, n);
    }
    /* copies before retention, which may drop the stored profiles they
    ** stand for; and again after it, for blocks it rewrote */
    for (int pass = 0; pass < 2 && rc == EMBER_OK; pass++) {
        if (j->o.nres > 0) {
            k = step_begin(j, "downsample", &t0);
            rc = em_blocks_downsample(j, &n);
            step_end(j, k, t0, n);
        }
        if (rc == EMBER_OK && pass == 0) {
            k = step_begin(j, "retention", &t0);
            rc = em_blocks_retention(j, &n);
            step_end(j, k, t0, n);
        }
    }
    if (rc == EMBER_OK && !j->in_dry) {
        k = step_begin(j, "gc", &t0);
        rc = em_head_gc(j->db, &n);
        step_end(j, k, t0, n);
    }
    if (rc == EMBER_OK && !j->in_dry) {
        k = step_begin(j, "punch", &t0);
        rc = em_punch_free(j->db, &n);
        step_end(j, k, t0, n);
    }
    return rc;
}

EMBER_API int ember_compact(ember_db *db, const ember_compact_opts *opts,
                            ember_compact_report *out)
{
    ember_compact_report rep;
    em_cjob j;
    int rc;

    em_err_clear();
    if (db == NULL)
        return em_err(EMBER_EINVAL, "ember_compact: NULL database");
    if (out != NULL && out->sz < sizeof *out)
        return em_err(EMBER_EINVAL, "compact: report.sz is not "
                      "sizeof(ember_compact_report)");
    if (db->rdonly)
        return em_err(EMBER_EINVAL, "compact: %s is open read-only",
                      db->dir);
    memset(&j, 0, sizeof j);
    memset(&rep, 0, sizeof rep);
    rep.sz = sizeof rep;
    j.db = db;
    j.in = opts;
    j.rep = &rep;
    j.lock_fd = -1;
    rc = blocks_open(&j);
    if (rc == EMBER_OK)
        rc = opts_resolve(&j, opts);
    if (rc == EMBER_OK) {
        rep.bytes_before = dir_du(&j);
        rc = em_blocks_sweep(&j);
    }
    if (rc == EMBER_OK && !j.in_dry)
        rc = em_blocks_upgrade(&j);
    if (rc == EMBER_OK)
        rc = run_steps(&j);
    opts_free(&j.o);
    rep.bytes_after = dir_du(&j);
    if (j.lock_fd >= 0)
        close(j.lock_fd);           /* releases the flock */
    if (out != NULL)
        *out = rep;
    return rc;
}
