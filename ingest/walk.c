/*
** ingest/walk.c: the paths of an import, walked and read the one way that
** ember_import_files (ingest/import_driver.c) and the client's
** ember_client_import_files (client/import.c) share: a directory
** recursively in name order (dot files skipped, at most EM_WALK_MAX_DEPTH
** deep), each file opened once relative to its directory, read whole up to
** EM_IMPORT_MAX_FILE, and timed by its name or mtime when its content says
** nothing. What to do with a file, and with a failure, is the caller's.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/ingest.h"

/* ---- reading a file ------------------------------------------------------------- */

int em_walk_open(int at, const char *name, struct stat *st)
{
    int fd = openat(at, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);

    if (fd >= 0 && fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int em_walk_read(int fd, const struct stat *st, char **buf, size_t *len)
{
    size_t want = (size_t)st->st_size, n = 0;

    *buf = NULL;
    if ((uint64_t)st->st_size > EM_IMPORT_MAX_FILE)
        return em_err(EMBER_ELIMIT, "larger than %llu bytes",
                      (unsigned long long)EM_IMPORT_MAX_FILE);
    *buf = em_malloc(want + 1);
    if (*buf == NULL)
        return em_err(EMBER_ENOMEM, "%zu bytes", want);
    while (n < want) {
        ssize_t k = read(fd, *buf + n, want - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return em_err(EMBER_EIO, "%s", strerror(errno));
        if (k == 0)
            return em_err(EMBER_EIO, "short read");
        n += (size_t)k;
    }
    (*buf)[n] = '\0';
    *len = n;
    return EMBER_OK;
}

int64_t em_walk_file_time(const char *path, const struct stat *st)
{
    const char *base = strrchr(path, '/');
    char *end;
    long long v;

    base = base != NULL ? base + 1 : path;
    errno = 0;
    v = strtoll(base, &end, 10);
    if (errno == 0 && end - base >= 12 && end - base <= 13 &&
        (*end == '\0' || *end == '.'))
        return v;
    return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

/* ---- walking paths ------------------------------------------------------------------ */

static bool stopped(const em_walk_hooks *h)
{
    return h->stop != NULL && h->stop(h->ctx);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        em_free(names[i]);
    em_free(names);
}

/* The names in D but dot files, sorted, into *NAMES (names_free them) and
** their count into *N. */
static int dir_names(DIR *d, char ***names, size_t *n)
{
    struct dirent *e;
    size_t cap = 0;

    *names = NULL;
    *n = 0;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        char **nn;
        if (e->d_name[0] == '.')
            continue;
        if ((nn = em_grow(*names, &cap, *n + 1, sizeof *nn)) == NULL)
            return em_err(EMBER_ENOMEM, "out of memory listing %zu names",
                          *n + 1);
        *names = nn;
        if ((nn[*n] = em_strdup(e->d_name)) == NULL)
            return em_err(EMBER_ENOMEM, "out of memory listing a name");
        (*n)++;
    }
    if (errno != 0)
        return em_err(EMBER_EIO, "%s", strerror(errno));
    if (*n > 0)
        qsort(*names, *n, sizeof **names, name_cmp);
    return EMBER_OK;
}

static void walk_at(const em_walk_hooks *h, int at, const char *name,
                    const char *path, int depth);

/* Walks each entry of the directory open at FD (PATH), in name order;
** takes FD. Entries are opened relative to it, named by PATH/name. */
static void walk_dir(const em_walk_hooks *h, const char *path, int fd,
                     int depth)
{
    DIR *d = fdopendir(fd);
    char **names = NULL;
    size_t n = 0, plen = strlen(path);
    bool slash = plen > 0 && path[plen - 1] == '/';
    int rc;

    if (d == NULL) {
        rc = em_err(EMBER_EIO, "%s", strerror(errno));
        close(fd);
        h->failed(h->ctx, path, rc, false);
        return;
    }
    if ((rc = dir_names(d, &names, &n)) != EMBER_OK)
        h->failed(h->ctx, path, rc, false);     /* and walk what was listed */
    for (size_t i = 0; i < n && !stopped(h); i++) {
        size_t len = plen + 1 + strlen(names[i]) + 1;
        char *full = em_malloc(len);
        if (full == NULL) {         /* not a file we tried: a bad path */
            h->failed(h->ctx, path, em_err(EMBER_ENOMEM, "no memory for "
                                           "the path of %s", names[i]),
                      false);
            continue;
        }
        snprintf(full, len, "%s%s%s", path, slash ? "" : "/", names[i]);
        walk_at(h, dirfd(d), names[i], full, depth + 1);
        em_free(full);
    }
    names_free(names, n);
    closedir(d);
}

/* Walks NAME (relative to the directory AT), called PATH in messages: a
** directory recursively, a file handed to the caller. */
static void walk_at(const em_walk_hooks *h, int at, const char *name,
                    const char *path, int depth)
{
    struct stat st;
    int fd = em_walk_open(at, name, &st);

    if (fd < 0) {
        int e = errno;
        bool file = fstatat(at, name, &st, 0) == 0 && !S_ISDIR(st.st_mode);
        h->failed(h->ctx, path, em_err(EMBER_EIO, "%s", strerror(e)), file);
    } else if (S_ISDIR(st.st_mode)) {
        if (depth < EM_WALK_MAX_DEPTH) {
            walk_dir(h, path, fd, depth);
        } else {
            close(fd);
            h->failed(h->ctx, path, em_err(EMBER_ELIMIT, "more than %d "
                                           "directories deep, not read",
                                           EM_WALK_MAX_DEPTH), false);
        }
    } else {
        h->file(h->ctx, path, fd, &st);
        close(fd);
    }
}

void em_walk_paths(const em_walk_hooks *h, const char *const *paths,
                   size_t n)
{
    for (size_t i = 0; i < n && !stopped(h); i++)
        walk_at(h, AT_FDCWD, paths[i], paths[i], 0);
}
