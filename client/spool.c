/*
** client/spool.c: the pusher's bounded on-disk buffer (client/spool.h has
** the file layout and the contract).
**
** The spool keeps an index of its window files in memory, oldest first
** (their numbers only grow, and the names are the numbers in 16 hex
** digits, so a directory listing sorted is the order of arrival), with
** their sizes summed against the bound. One thread puts (the agent), one
** reads (the sender); a mutex guards the index. The window being sent is
** marked busy: making room never deletes it under the sender, so that
** what was sent is counted once, as sent.
**
** Durability: a window is written to NUM.tmp, fsynced, renamed to NUM.win
** and the directory fsynced, before em_spool_put returns; a crash leaves
** either no file or the whole one (tmp files are deleted at open).
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "client/spool.h"

#define SPOOL_MAGIC "EMSPOOL1"
#define SPOOL_PATH_MAX 4096

typedef struct spool_file {
    uint64_t seq;
    uint64_t size;
} spool_file;

struct em_spool {
    pthread_mutex_t mu;
    char *dir;
    uint64_t max_bytes;
    spool_file *files;          /* oldest first */
    size_t n, cap;
    uint64_t bytes;             /* sizes of files[] summed */
    uint64_t next_seq;
    uint64_t busy_seq;          /* the window being sent; 0: none */
    em_spool_stats st;
};

static void spool_path(const em_spool *s, uint64_t seq, const char *ext,
                       char *out)
{
    snprintf(out, SPOOL_PATH_MAX, "%s/%016" PRIx64 ".%s", s->dir, seq, ext);
}

static int sys_err(const char *what, const char *path)
{
    return em_err(EMBER_EIO, "spool: %s %s: %s", what, path, strerror(errno));
}

/* Makes the renames and deletions in the directory durable. */
static int dir_sync(const em_spool *s)
{
    int fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = EMBER_OK;

    if (fd < 0)
        return sys_err("open", s->dir);
    if (fsync(fd) != 0)
        rc = sys_err("fsync", s->dir);
    close(fd);
    return rc;
}

/* ---- the index ---------------------------------------------------------- */

static int index_add(em_spool *s, uint64_t seq, uint64_t size)
{
    spool_file *f = em_grow(s->files, &s->cap, s->n + 1, sizeof *f);

    if (f == NULL)
        return em_err(EMBER_ENOMEM, "spool: index of %zu windows", s->n + 1);
    s->files = f;
    f[s->n++] = (spool_file){ seq, size };
    s->bytes += size;
    if (seq >= s->next_seq)
        s->next_seq = seq + 1;
    return EMBER_OK;
}

/* Deletes window I's file and its index entry (the lock held). */
static void index_remove(em_spool *s, size_t i)
{
    char path[SPOOL_PATH_MAX];

    spool_path(s, s->files[i].seq, "win", path);
    (void)unlink(path);         /* gone already: nothing left to delete */
    s->bytes -= s->files[i].size;
    memmove(&s->files[i], &s->files[i + 1],
            (s->n - i - 1) * sizeof *s->files);
    s->n--;
}

/* Drops the oldest windows but the busy one until SIZE more bytes fit;
** false when they cannot. The lock held. */
static bool make_room(em_spool *s, uint64_t size, uint64_t *dropped)
{
    uint64_t keep = size;
    size_t i = 0;

    for (size_t k = 0; k < s->n; k++)
        if (s->files[k].seq == s->busy_seq)
            keep += s->files[k].size;
    if (keep > s->max_bytes)
        return false;           /* drop nothing for what cannot fit */
    while (s->bytes + size > s->max_bytes) {
        if (i < s->n && s->files[i].seq == s->busy_seq)
            i++;
        if (i >= s->n)
            return false;
        s->st.dropped_windows++;
        s->st.dropped_bytes += s->files[i].size;
        (*dropped)++;
        index_remove(s, i);
    }
    return true;
}

static int seq_cmp(const void *a, const void *b)
{
    const spool_file *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* One directory entry at open: a window is indexed, a tmp file deleted,
** anything else left alone. */
static int open_entry(em_spool *s, const char *name)
{
    char path[SPOOL_PATH_MAX], ext[8] = "";
    unsigned long long seq;
    struct stat sb;
    int len = 0;

    if (sscanf(name, "%16llx.%3[a-z]%n", &seq, ext, &len) != 2 ||
        (size_t)len != strlen(name) || strlen(name) != 20 || seq == 0)
        return EMBER_OK;
    spool_path(s, seq, ext, path);
    if (strcmp(ext, "tmp") == 0) {
        (void)unlink(path);     /* a put that did not finish */
        return EMBER_OK;
    }
    if (strcmp(ext, "win") != 0 || stat(path, &sb) != 0)
        return EMBER_OK;
    return index_add(s, seq, (uint64_t)sb.st_size);
}

/* mkdir -p DIR, the new directories mode 0700. */
static int mkdirs(const char *dir)
{
    char path[SPOOL_PATH_MAX];
    size_t n = strlen(dir);

    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return sys_err("mkdir", path);
        path[i] = i < n ? '/' : '\0';
    }
    return EMBER_OK;
}

static int open_scan(em_spool *s)
{
    DIR *d;
    struct dirent *e;
    uint64_t dropped = 0;
    int rc = mkdirs(s->dir);

    if (rc != EMBER_OK)
        return rc;
    if ((d = opendir(s->dir)) == NULL)
        return sys_err("opendir", s->dir);
    while (rc == EMBER_OK && (e = readdir(d)) != NULL)
        rc = open_entry(s, e->d_name);
    closedir(d);
    if (rc != EMBER_OK)
        return rc;
    if (s->n > 1)
        qsort(s->files, s->n, sizeof *s->files, seq_cmp);
    (void)make_room(s, 0, &dropped);    /* a smaller bound than before */
    return EMBER_OK;
}

int em_spool_open(const char *dir, uint64_t max_bytes, em_spool **out)
{
    em_spool *s;
    int rc;

    *out = NULL;
    if (dir == NULL || dir[0] == '\0' || strlen(dir) > SPOOL_PATH_MAX - 32)
        return em_err(EMBER_EINVAL, "spool: no directory, or too long a "
                      "path");
    if ((s = em_calloc(1, sizeof *s)) == NULL ||
        (s->dir = em_strdup(dir)) == NULL) {
        em_free(s);
        return em_err(EMBER_ENOMEM, "spool: out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    s->max_bytes = max_bytes;
    s->next_seq = 1;
    if ((rc = open_scan(s)) != EMBER_OK) {
        em_spool_close(s);
        return rc;
    }
    *out = s;
    return EMBER_OK;
}

void em_spool_close(em_spool *s)
{
    if (s == NULL)
        return;
    pthread_mutex_destroy(&s->mu);
    em_free(s->files);
    em_free(s->dir);
    em_free(s);
}

/* ---- writing ------------------------------------------------------------ */

/* The window file's bytes: the header, then each request. */
static int encode(const em_spool_req *reqs, size_t n, em_buf *b)
{
    uint8_t head[EM_SPOOL_HEAD] = SPOOL_MAGIC, len[8];

    if (n == 0 || n > EM_SPOOL_MAX_ENTRIES)
        return em_err(EMBER_EINVAL, "spool: %zu requests in a window (1 to "
                      "%u)", n, EM_SPOOL_MAX_ENTRIES);
    em_put_le32(head + 8, (uint32_t)n);
    if (em_buf_put(b, head, sizeof head) != EMBER_OK)
        return em_err(EMBER_ENOMEM, "spool: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].tlen > EM_SPOOL_MAX_TARGET ||
            reqs[i].blen > EM_SPOOL_MAX_FILE)
            return em_err(EMBER_ELIMIT, "spool: request %zu: %zu bytes of "
                          "target, %zu of body", i, reqs[i].tlen,
                          reqs[i].blen);
        em_put_le32(len, (uint32_t)reqs[i].tlen);
        em_put_le32(len + 4, (uint32_t)reqs[i].blen);
        if (em_buf_put(b, len, 8) != EMBER_OK ||
            em_buf_put(b, reqs[i].target, reqs[i].tlen) != EMBER_OK ||
            em_buf_put(b, reqs[i].body, reqs[i].blen) != EMBER_OK)
            return em_err(EMBER_ENOMEM, "spool: out of memory");
    }
    em_put_le64(b->p + 16, em_hash64(b->p + EM_SPOOL_HEAD,
                                     b->len - EM_SPOOL_HEAD, 0));
    return EMBER_OK;
}

/* Writes B to PATH and syncs it. */
static int file_write(const char *path, const em_buf *b)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t off = 0;
    int rc = EMBER_OK;

    if (fd < 0)
        return sys_err("create", path);
    while (rc == EMBER_OK && off < b->len) {
        ssize_t w = write(fd, b->p + off, b->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = sys_err("write", path);
        else
            off += (size_t)w;
    }
    if (rc == EMBER_OK && fsync(fd) != 0)
        rc = sys_err("fsync", path);
    if (close(fd) != 0 && rc == EMBER_OK)
        rc = sys_err("close", path);
    if (rc != EMBER_OK)
        (void)unlink(path);
    return rc;
}

/* Enters the written tmp file of SEQ as the newest window, dropping the
** oldest to make room. The lock held. */
static int put_commit(em_spool *s, uint64_t seq, uint64_t size,
                      uint64_t *dropped)
{
    char tmp[SPOOL_PATH_MAX], win[SPOOL_PATH_MAX];
    int rc;

    spool_path(s, seq, "tmp", tmp);
    spool_path(s, seq, "win", win);
    if (!make_room(s, size, dropped)) {
        (void)unlink(tmp);
        s->st.dropped_windows++;
        s->st.dropped_bytes += size;
        (*dropped)++;
        return em_err(EMBER_ELIMIT, "spool: a window of %" PRIu64 " bytes "
                      "does not fit the buffer of %" PRIu64, size,
                      s->max_bytes);
    }
    if (rename(tmp, win) != 0) {
        rc = sys_err("rename", tmp);
        (void)unlink(tmp);
        return rc;
    }
    if ((rc = index_add(s, seq, size)) != EMBER_OK)
        (void)unlink(win);
    return rc != EMBER_OK ? rc : dir_sync(s);
}

int em_spool_put(em_spool *s, const em_spool_req *reqs, size_t n,
                 uint64_t *dropped)
{
    char tmp[SPOOL_PATH_MAX];
    em_buf b = { 0 };
    uint64_t seq, ndrop = 0;
    int rc = encode(reqs, n, &b);

    pthread_mutex_lock(&s->mu);
    seq = s->next_seq++;
    pthread_mutex_unlock(&s->mu);
    spool_path(s, seq, "tmp", tmp);
    if (rc == EMBER_OK)
        rc = file_write(tmp, &b);
    if (rc == EMBER_OK) {
        pthread_mutex_lock(&s->mu);
        rc = put_commit(s, seq, b.len, &ndrop);
        pthread_mutex_unlock(&s->mu);
    }
    em_buf_free(&b);
    if (dropped != NULL)
        *dropped = ndrop;
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

/* Reads all of PATH into a new *DATA after its size met the limit. */
static int file_read(const char *path, uint8_t **data, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    uint64_t off = 0;
    int rc = EMBER_OK;

    *data = NULL;
    if (fd < 0)
        return sys_err("open", path);
    if (fstat(fd, &sb) != 0)
        rc = sys_err("stat", path);
    else if (sb.st_size < EM_SPOOL_HEAD ||
             (uint64_t)sb.st_size > EM_SPOOL_MAX_FILE)
        rc = EM_CORRUPT("spool: %s: %lld bytes", path,
                        (long long)sb.st_size);
    else if ((*data = em_malloc((size_t)sb.st_size)) == NULL)
        rc = em_err(EMBER_ENOMEM, "spool: %lld bytes", (long long)sb.st_size);
    while (rc == EMBER_OK && off < (uint64_t)sb.st_size) {
        ssize_t r = read(fd, *data + off, (size_t)sb.st_size - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = r < 0 ? sys_err("read", path)
                       : EM_CORRUPT("spool: %s: shorter than its size", path);
        else
            off += (uint64_t)r;
    }
    close(fd);
    *size = off;
    return rc;
}

/* Checks W's bytes and points its requests into them. */
static int parse(em_spool_win *w)
{
    const uint8_t *p = w->data + EM_SPOOL_HEAD, *end = w->data + w->size;

    if (memcmp(w->data, SPOOL_MAGIC, 8) != 0)
        return EM_CORRUPT("spool: window %" PRIu64 ": bad magic", w->seq);
    w->count = em_get_le32(w->data + 8);
    w->sent = em_get_le32(w->data + 12);
    if (w->count == 0 || w->count > EM_SPOOL_MAX_ENTRIES ||
        w->sent > w->count)
        return EM_CORRUPT("spool: window %" PRIu64 ": %u requests, %u sent",
                          w->seq, w->count, w->sent);
    if (em_get_le64(w->data + 16) != em_hash64(p, (size_t)(end - p), 0))
        return EM_CORRUPT("spool: window %" PRIu64 ": checksum mismatch",
                          w->seq);
    if ((w->reqs = em_calloc(w->count, sizeof *w->reqs)) == NULL)
        return em_err(EMBER_ENOMEM, "spool: %u requests", w->count);
    for (uint32_t i = 0; i < w->count; i++) {
        em_spool_req *r = &w->reqs[i];
        if (end - p < 8)
            return EM_CORRUPT("spool: window %" PRIu64 ": request %u cut",
                              w->seq, i);
        r->tlen = em_get_le32(p);
        r->blen = em_get_le32(p + 4);
        p += 8;
        if (r->tlen > EM_SPOOL_MAX_TARGET || r->tlen > (size_t)(end - p) ||
            r->blen > (size_t)(end - p) - r->tlen)
            return EM_CORRUPT("spool: window %" PRIu64 ": request %u runs "
                              "past the end", w->seq, i);
        r->target = (const char *)p;
        r->body = p + r->tlen;
        p += r->tlen + r->blen;
    }
    if (p != end)
        return EM_CORRUPT("spool: window %" PRIu64 ": bytes after the last "
                          "request", w->seq);
    return EMBER_OK;
}

/* Reads window SEQ into W; a failure frees what it read. */
static int win_load(em_spool *s, uint64_t seq, em_spool_win *w)
{
    char path[SPOOL_PATH_MAX];
    int rc;

    memset(w, 0, sizeof *w);
    w->seq = seq;
    spool_path(s, seq, "win", path);
    rc = file_read(path, &w->data, &w->size);
    if (rc == EMBER_OK)
        rc = parse(w);
    if (rc != EMBER_OK)
        em_spool_win_free(w);
    return rc;
}

/* Drops window SEQ that failed to load (it is the busy one). */
static void win_damaged(em_spool *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    if (s->n > 0 && s->files[0].seq == seq) {
        index_remove(s, 0);
        s->st.damaged_windows++;
    }
    s->busy_seq = 0;
    pthread_mutex_unlock(&s->mu);
}

int em_spool_oldest(em_spool *s, em_spool_win *w)
{
    uint64_t seq;
    int rc;

    pthread_mutex_lock(&s->mu);
    seq = s->n > 0 ? s->files[0].seq : 0;
    s->busy_seq = seq;
    pthread_mutex_unlock(&s->mu);
    if (seq == 0)
        return EMBER_DONE;
    rc = win_load(s, seq, w);
    if (rc != EMBER_OK && rc != EMBER_ENOMEM)
        win_damaged(s, seq);    /* its message stays for the caller's log */
    return rc;
}

void em_spool_win_free(em_spool_win *w)
{
    em_free(w->data);
    em_free(w->reqs);
    w->data = NULL;
    w->reqs = NULL;
}

int em_spool_mark(em_spool *s, em_spool_win *w, uint32_t sent)
{
    char path[SPOOL_PATH_MAX];
    uint8_t b[4];
    int fd, rc = EMBER_OK;

    spool_path(s, w->seq, "win", path);
    em_put_le32(b, sent);
    if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
        return sys_err("open", path);
    if (pwrite(fd, b, 4, 12) != 4)
        rc = sys_err("write", path);
    close(fd);
    if (rc == EMBER_OK)
        w->sent = sent;
    return rc;
}

int em_spool_done(em_spool *s, em_spool_win *w)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++)
        if (s->files[i].seq == w->seq) {
            index_remove(s, i);
            break;
        }
    s->busy_seq = 0;
    pthread_mutex_unlock(&s->mu);
    em_spool_win_free(w);
    return dir_sync(s);
}

void em_spool_stats_get(em_spool *s, em_spool_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    st->windows = s->n;
    st->bytes = s->bytes;
    pthread_mutex_unlock(&s->mu);
}
