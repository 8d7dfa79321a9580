/*
** ingest/symb_proc.c: process captures for the symbolizer. A capture is
** what /proc/PID said when the process was tracked (at exec, or at its
** first sample): its executable mappings, each with its ELF file held open,
** its executable, cgroup and container id.
**
** Files are opened through /proc/PID/map_files/<start>-<end>, which reaches
** the very file the process maps even when it was deleted after it
** started, or lives in another mount namespace (a container); when that is
** refused (it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), /proc/PID/exe
** (for the executable), then the path through /proc/PID/root and as is
** are tried, each kept only when its device and inode are the mapped ones. Files are shared between captures by the
** device and inode the maps show.
**
** Lifetimes: em_symbolizer_exited only marks a capture; a sweep drops the
** captures marked before the previous sweep, so a process that exits in a
** window still symbolizes when that window is drained. A file no capture
** uses is closed at the sweep after it became unused.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ingest/symb_int.h"

#define DELETED_SUFFIX " (deleted)"

/* ---- tables ---------------------------------------------------------------- */

static uint64_t pid_hash(uint32_t pid)
{
    return em_hash64(&pid, sizeof pid, 0x706964);
}

static uint64_t file_hash(uint64_t dev, uint64_t ino)
{
    uint64_t k[2] = { dev, ino };

    return em_hash64(k, sizeof k, 0x66696c65);
}

/* A process looked up among the captures: by pid. */
typedef struct proc_key {
    em_symb_proc *const *procs;
    uint32_t pid;
} proc_key;

#define EM_HT_NAME proc_ix
#define EM_HT_KEY const proc_key *
#define EM_HT_MATCH(e, h, k) \
    ((e)->hash == (h) && (k)->procs[(e)->idx1 - 1]->pid == (k)->pid)
#define EM_HT_WHAT "symbolize: process index"
#include "ingest/hindex.h"

/* A file looked up among the held files: by device and inode. */
typedef struct file_key {
    em_symb_file *const *files;
    uint64_t dev, ino;
} file_key;

static bool file_is(const file_key *k, uint32_t idx)
{
    return k->files[idx]->dev == k->dev && k->files[idx]->ino == k->ino;
}

#define EM_HT_NAME file_ix
#define EM_HT_KEY const file_key *
#define EM_HT_MATCH(e, h, k) ((e)->hash == (h) && file_is(k, (e)->idx1 - 1))
#define EM_HT_WHAT "symbolize: file index"
#include "ingest/hindex.h"

em_symb_proc *em_symb_proc_find(em_symbolizer *s, uint32_t pid)
{
    proc_key k = { s->procs, pid };
    struct em_hslot *e = proc_ix_find(&s->proc_index, pid_hash(pid), &k);

    return e != NULL ? s->procs[e->idx1 - 1] : NULL;
}

static em_symb_file *file_find(em_symbolizer *s, uint64_t dev, uint64_t ino)
{
    file_key k = { s->files, dev, ino };
    struct em_hslot *e = file_ix_find(&s->file_index, file_hash(dev, ino),
                                      &k);

    return e != NULL ? s->files[e->idx1 - 1] : NULL;
}

/* Indexes procs[I], whose pid no other capture has. EMBER_ENOMEM. */
static int proc_index_put(em_symbolizer *s, size_t i)
{
    proc_key k = { s->procs, s->procs[i]->pid };
    uint64_t h = pid_hash(k.pid);
    bool found;
    struct em_hslot *e = proc_ix_insert(&s->proc_index, h, &k, &found);

    if (e != NULL)
        *e = (struct em_hslot){ h, (uint32_t)i + 1 };
    return e != NULL ? EMBER_OK : EMBER_ENOMEM;
}

/* Indexes files[I], whose device and inode no other held file has. */
static int file_index_put(em_symbolizer *s, size_t i)
{
    file_key k = { s->files, s->files[i]->dev, s->files[i]->ino };
    uint64_t h = file_hash(k.dev, k.ino);
    bool found;
    struct em_hslot *e = file_ix_insert(&s->file_index, h, &k, &found);

    if (e != NULL)
        *e = (struct em_hslot){ h, (uint32_t)i + 1 };
    return e != NULL ? EMBER_OK : EMBER_ENOMEM;
}

/* Makes room for one pointer more in the array *PP of N (capacity *CAP). */
static int table_room(void ***pp, size_t n, size_t *cap)
{
    void **np = em_grow(*pp, cap, n + 1, sizeof *np);

    if (np == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a table "
                      "of %zu", n + 1);
    *pp = np;
    return EMBER_OK;
}

/* Rebuilds the indexes after some entries were dropped: they only shrink,
** so every put finds room and none fails. */
static void procs_reindex(em_symbolizer *s)
{
    proc_ix_clear(&s->proc_index);
    for (size_t i = 0; i < s->nprocs; i++)
        proc_index_put(s, i);
}

static void files_reindex(em_symbolizer *s)
{
    file_ix_clear(&s->file_index);
    for (size_t i = 0; i < s->nfiles; i++)
        file_index_put(s, i);
}

/* ---- parsing ------------------------------------------------------------- */

static bool hex_field(char **p, char end, uint64_t *out)
{
    char *e;

    errno = 0;
    *out = strtoull(*p, &e, 16);
    if (e == *p || errno != 0 || *e != end)
        return false;
    *p = e + 1;
    return true;
}

bool em_symb_parse_maps_line(char *line, em_symb_maps_line *out)
{
    char *p = line, *nl;
    uint64_t maj, min;

    memset(out, 0, sizeof *out);
    if (!hex_field(&p, '-', &out->start) || !hex_field(&p, ' ', &out->end))
        return false;
    if (strlen(p) < 5 || p[4] != ' ')
        return false;
    out->exec = p[2] == 'x';
    p += 5;
    if (!hex_field(&p, ' ', &out->pgoff) || !hex_field(&p, ':', &maj) ||
        !hex_field(&p, ' ', &min))
        return false;
    out->dev = makedev((unsigned)maj, (unsigned)min);
    errno = 0;
    out->ino = strtoull(p, &p, 10);
    if (errno != 0 || (*p != ' ' && *p != '\n' && *p != '\0'))
        return false;
    while (*p == ' ')
        p++;
    if ((nl = strchr(p, '\n')) != NULL)
        *nl = '\0';
    out->path = p;
    return out->start < out->end;
}

/* True for the hex digits of a container id. */
static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool is_alnum(char c)
{
    return is_hex(c) || (c >= 'g' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool em_symb_container_id(const char *cgroup, char out[65])
{
    bool found = false;
    size_t i = 0, n = cgroup != NULL ? strlen(cgroup) : 0;

    while (i < n) {
        size_t j = i;
        while (j < n && is_hex(cgroup[j]))
            j++;
        if (j - i == 64 && (i == 0 || !is_alnum(cgroup[i - 1])) &&
            (j == n || !is_alnum(cgroup[j]))) {
            memcpy(out, cgroup + i, 64);
            out[64] = '\0';
            found = true;
        }
        i = j > i ? j : i + 1;
    }
    return found;
}

/* ---- reading /proc ------------------------------------------------------- */

/* Cuts " (deleted)" off the end of PATH. */
static void cut_deleted(char *path)
{
    size_t n = strlen(path), k = strlen(DELETED_SUFFIX);

    if (n > k && strcmp(path + n - k, DELETED_SUFFIX) == 0)
        path[n - k] = '\0';
}

/* Opens PATH read-only if it is the file DEV, INO; -1 otherwise. */
static int open_checked(const char *path, uint64_t dev, uint64_t ino)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_ino != ino || (uint64_t)st.st_dev != dev) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens the file of mapping ML of PID: map_files, else by path. */
static int open_mapped(uint32_t pid, const em_symb_maps_line *ml,
                       const char *path)
{
    char buf[4200];
    int fd;

    snprintf(buf, sizeof buf, "/proc/%u/map_files/%llx-%llx", pid,
             (unsigned long long)ml->start, (unsigned long long)ml->end);
    /* The very file mapped there (on overlayfs its st_dev is not the one
    ** the maps show: not checked). */
    if ((fd = open(buf, O_RDONLY | O_CLOEXEC)) >= 0)
        return fd;
    /* Without privileges: the executable itself, even deleted, is open to
    ** its owner through /proc/PID/exe. */
    snprintf(buf, sizeof buf, "/proc/%u/exe", pid);
    if ((fd = open_checked(buf, ml->dev, ml->ino)) >= 0)
        return fd;
    snprintf(buf, sizeof buf, "/proc/%u/root%s", pid, path);
    if ((fd = open_checked(buf, ml->dev, ml->ino)) >= 0)
        return fd;
    return open_checked(path, ml->dev, ml->ino);
}

/* The held file of mapping ML of PID, opened and shared; NULL when it
** cannot be opened or is not ELF (the mapping is then kept by name). */
static int file_get(em_symbolizer *s, uint32_t pid,
                    const em_symb_maps_line *ml, const char *path,
                    em_symb_file **out)
{
    em_symb_file *f = file_find(s, ml->dev, ml->ino);
    int fd, rc;

    *out = NULL;
    if (f != NULL) {
        *out = f;
        return EMBER_OK;
    }
    if ((fd = open_mapped(pid, ml, path)) < 0)
        return EMBER_OK;
    rc = em_symb_file_open(fd, path, ml->dev, ml->ino, &f);
    if (rc == EMBER_ENOMEM)
        return rc;
    if (rc != EMBER_OK) {
        em_err_clear();
        return EMBER_OK;
    }
    if ((rc = table_room((void ***)&s->files, s->nfiles,
                         &s->cap_files)) == EMBER_OK) {
        s->files[s->nfiles] = f;
        rc = file_index_put(s, s->nfiles);
    }
    if (rc != EMBER_OK) {
        em_symb_file_close(f);
        return rc;
    }
    s->nfiles++;
    *out = f;
    return EMBER_OK;
}

/* Our own [vdso] copied into a memfd: every native process of this kernel
** maps the same image, so it symbolizes like any held file. */
static void vdso_load(em_symbolizer *s)
{
    uint64_t base = getauxval(AT_SYSINFO_EHDR), size = 0;
    char line[512];
    FILE *fp;
    int fd;

    s->vdso_tried = true;
    if (base == 0 || (fp = fopen("/proc/self/maps", "re")) == NULL)
        return;
    while (fgets(line, sizeof line, fp) != NULL) {
        em_symb_maps_line ml;
        if (em_symb_parse_maps_line(line, &ml) && ml.start == base &&
            strcmp(ml.path, "[vdso]") == 0)
            size = ml.end - ml.start;
    }
    fclose(fp);
    if (size == 0 || (fd = memfd_create("ember-vdso", MFD_CLOEXEC)) < 0)
        return;
    if (write(fd, (const void *)(uintptr_t)base, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    if (em_symb_file_open(fd, "[vdso]", 0, 0, &s->vdso) == EMBER_OK)
        s->vdso_size = size;
    em_err_clear();
}

/* The ELF bias of a mapping of F at START for file offset PGOFF: through
** the PT_LOAD segment that holds the mapped pages. */
static uint64_t map_bias(const em_symb_file *f, uint64_t start,
                         uint64_t pgoff)
{
    for (size_t i = 0; i < f->nsegs; i++) {
        const em_symb_seg *g = &f->segs[i];
        uint64_t lo = g->offset & ~(uint64_t)0xfff;
        if (pgoff >= lo && pgoff < g->offset + g->filesz)
            return start - pgoff + g->offset - g->vaddr;
    }
    return start - pgoff;
}

/* Appends to P the executable mapping ML of PID. */
static int map_add(em_symbolizer *s, em_symb_proc *p, size_t *cap,
                   const em_symb_maps_line *ml, char *path)
{
    em_symb_map m = { ml->start, ml->end, ml->pgoff, 0, NULL, NULL };
    em_symb_map *nm;
    int rc = EMBER_OK;

    cut_deleted(path);
    if (path[0] == '/' && ml->ino != 0)
        rc = file_get(s, p->pid, ml, path, &m.file);
    else if (strcmp(path, "[vdso]") == 0) {
        if (!s->vdso_tried)
            vdso_load(s);
        if (s->vdso != NULL && s->vdso_size == ml->end - ml->start)
            m.file = s->vdso;
    }
    if (rc != EMBER_OK)
        return rc;
    if (m.file == NULL &&
        (m.name = em_strdup(path[0] != '\0' ? path : "[anon]")) == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a name");
    if ((nm = em_grow(p->maps, cap, p->nmaps + 1, sizeof *nm)) == NULL) {
        em_free(m.name);
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for %zu "
                      "mappings", p->nmaps + 1);
    }
    p->maps = nm;
    if (m.file != NULL) {
        m.file->refs++;
        m.name = m.file->path;
        m.bias = map_bias(m.file, m.start, m.pgoff);
    }
    p->maps[p->nmaps++] = m;
    return EMBER_OK;
}

static int maps_open_err(uint32_t pid, const char *what)
{
    if (errno == ENOENT || errno == ESRCH)
        return em_err(EMBER_ENOTFOUND, "symbolize: process %u is gone", pid);
    return em_err(EMBER_EIO, "symbolize: %s of process %u: %s", what, pid,
                  strerror(errno));
}

static int cmp_map(const void *a, const void *b)
{
    const em_symb_map *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

/* Reads the executable mappings of P->pid into P. */
static int read_maps(em_symbolizer *s, em_symb_proc *p)
{
    char path[64], *line = NULL;
    size_t len = 0, cap = 0;
    FILE *fp;
    int rc = EMBER_OK;

    snprintf(path, sizeof path, "/proc/%u/maps", p->pid);
    if ((fp = fopen(path, "re")) == NULL)
        return maps_open_err(p->pid, "maps");
    while (rc == EMBER_OK && getline(&line, &len, fp) > 0) {
        em_symb_maps_line ml;
        if (em_symb_parse_maps_line(line, &ml) && ml.exec)
            rc = map_add(s, p, &cap, &ml, (char *)ml.path);
    }
    if (rc == EMBER_OK && ferror(fp))
        rc = maps_open_err(p->pid, "reading maps");
    free(line);                 /* getline's malloc */
    fclose(fp);
    if (p->nmaps > 1)           /* qsort(NULL, 0) is undefined */
        qsort(p->maps, p->nmaps, sizeof *p->maps, cmp_map);
    return rc;
}

/* Reads /proc/PID/exe into P (NULL for kernel threads and zombies) and
** finds the build id of the mapping that is the executable. */
static int read_exe(em_symb_proc *p)
{
    char path[64], buf[4097];
    struct stat st;
    ssize_t n;

    snprintf(path, sizeof path, "/proc/%u/exe", p->pid);
    if ((n = readlink(path, buf, sizeof buf - 1)) <= 0)
        return EMBER_OK;
    buf[n] = '\0';
    cut_deleted(buf);
    if ((p->exe = em_strdup(buf)) == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a path");
    if (stat(path, &st) != 0)
        return EMBER_OK;
    for (size_t i = 0; i < p->nmaps; i++) {
        const em_symb_file *f = p->maps[i].file;
        if (f != NULL && f->ino == (uint64_t)st.st_ino &&
            f->dev == (uint64_t)st.st_dev) {
            if ((p->build_id = em_strdup(f->build_id)) == NULL)
                return em_err(EMBER_ENOMEM, "symbolize: out of memory for "
                              "a build id");
            break;
        }
    }
    return EMBER_OK;
}

/* The cgroup path of one /proc/PID/cgroup line "ID:CONTROLLERS:PATH" when
** it is the v2 line ("0::") or, on a v1-only host, systemd's. */
static const char *cgroup_path(char *line, bool *v2)
{
    char *nl = strchr(line, '\n');

    if (nl != NULL)
        *nl = '\0';
    *v2 = strncmp(line, "0::", 3) == 0;
    if (*v2)
        return line + 3;
    if ((line = strchr(line, ':')) != NULL &&
        strncmp(line, ":name=systemd:", 14) == 0)
        return line + 14;
    return NULL;
}

/* Reads the cgroup of P and the container id it names. */
static int read_cgroup(em_symb_proc *p)
{
    char path[64], line[4200], id[65], *best = NULL;
    FILE *fp;
    bool v2 = false;

    snprintf(path, sizeof path, "/proc/%u/cgroup", p->pid);
    if ((fp = fopen(path, "re")) == NULL)
        return EMBER_OK;
    while (!v2 && fgets(line, sizeof line, fp) != NULL) {
        const char *c = cgroup_path(line, &v2);
        if (c != NULL && (best == NULL || v2)) {
            em_free(best);
            if ((best = em_strdup(c)) == NULL)
                break;
        }
    }
    fclose(fp);
    p->cgroup = best;
    if (best == NULL)
        return EMBER_OK;        /* none, or out of memory: not essential */
    if (em_symb_container_id(best, id) &&
        (p->container_id = em_strdup(id)) == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for an id");
    return EMBER_OK;
}

/* Frees what a capture holds (its files stay, one reference fewer). */
static void capture_clear(em_symb_proc *p)
{
    for (size_t i = 0; i < p->nmaps; i++) {
        if (p->maps[i].file != NULL)
            p->maps[i].file->refs--;
        else
            em_free(p->maps[i].name);
    }
    em_free(p->maps);
    em_symb_perfmap_free(p->perfmap);
    p->perfmap = NULL;
    em_free(p->exe);
    em_free(p->build_id);
    em_free(p->cgroup);
    em_free(p->container_id);
    p->maps = NULL;
    p->nmaps = 0;
    p->exe = p->build_id = p->cgroup = p->container_id = NULL;
}

/* Captures P->pid now into P (cleared on failure). */
static int capture(em_symbolizer *s, em_symb_proc *p)
{
    int rc = read_maps(s, p);

    if (rc == EMBER_OK)
        rc = read_exe(p);
    if (rc == EMBER_OK)
        rc = read_cgroup(p);
    if (rc != EMBER_OK)
        capture_clear(p);
    p->capture_gen = s->sweeps;
    return rc;
}

int em_symbolizer_track(em_symbolizer *s, uint32_t pid)
{
    em_symb_proc *old = em_symb_proc_find(s, pid), *p;
    em_symb_proc fresh = { .pid = pid };
    int rc = capture(s, &fresh);

    /* A zombie shows no mappings: keep what it was while it lived. */
    if (rc == EMBER_OK && old != NULL && old->nmaps > 0 &&
        fresh.nmaps == 0 && fresh.exe == NULL) {
        capture_clear(&fresh);
        rc = em_err(EMBER_ENOTFOUND, "symbolize: process %u is gone", pid);
    }
    if (rc != EMBER_OK)
        return rc;
    if (old != NULL) {
        capture_clear(old);
        *old = fresh;           /* exited no more: a new exec, or pid reuse */
        return EMBER_OK;
    }
    if ((p = em_malloc(sizeof *p)) == NULL) {
        capture_clear(&fresh);
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a process");
    }
    *p = fresh;
    if ((rc = table_room((void ***)&s->procs, s->nprocs,
                         &s->cap_procs)) == EMBER_OK) {
        s->procs[s->nprocs] = p;
        rc = proc_index_put(s, s->nprocs);
    }
    if (rc != EMBER_OK) {
        capture_clear(p);
        em_free(p);
        return rc;
    }
    s->nprocs++;
    return EMBER_OK;
}

void em_symbolizer_exited(em_symbolizer *s, uint32_t pid)
{
    em_symb_proc *p = em_symb_proc_find(s, pid);

    if (p != NULL && !p->exited) {
        p->exited = true;
        p->exit_gen = s->sweeps;
    }
}

/* Closes the files no capture has used since the previous sweep. */
static void files_sweep(em_symbolizer *s)
{
    size_t kept = 0;

    for (size_t i = 0; i < s->nfiles; i++) {
        if (s->files[i]->refs == 0)
            em_symb_file_close(s->files[i]);
        else
            s->files[kept++] = s->files[i];
    }
    if (kept != s->nfiles) {
        s->nfiles = kept;
        files_reindex(s);
    }
}

void em_symbolizer_sweep(em_symbolizer *s)
{
    size_t kept = 0;

    files_sweep(s);
    for (size_t i = 0; i < s->nprocs; i++) {
        em_symb_proc *p = s->procs[i];
        if (p->exited && p->exit_gen < s->sweeps) {
            capture_clear(p);
            em_free(p);
        } else {
            s->procs[kept++] = p;
        }
    }
    if (kept != s->nprocs) {
        s->nprocs = kept;
        procs_reindex(s);
    }
    s->sweeps++;
}

int em_symbolizer_proc(em_symbolizer *s, uint32_t pid, em_proc_info *out)
{
    const em_symb_proc *p = em_symb_proc_find(s, pid);

    memset(out, 0, sizeof *out);
    if (p == NULL)
        return em_err(EMBER_ENOTFOUND, "symbolize: process %u is not "
                      "tracked", pid);
    *out = (em_proc_info){ p->exe, p->build_id, p->cgroup, p->container_id };
    return EMBER_OK;
}

const em_symb_map *em_symb_proc_map(const em_symb_proc *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nmaps;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->maps[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nmaps && p->maps[lo].start <= addr ? &p->maps[lo] : NULL;
}

void em_symb_procs_free(em_symbolizer *s)
{
    for (size_t i = 0; i < s->nprocs; i++) {
        capture_clear(s->procs[i]);
        em_free(s->procs[i]);
    }
    for (size_t i = 0; i < s->nfiles; i++)
        em_symb_file_close(s->files[i]);
    em_symb_file_close(s->vdso);
    em_free(s->procs);
    em_free(s->files);
    proc_ix_free(&s->proc_index);
    file_ix_free(&s->file_index);
    s->procs = NULL;
    s->files = NULL;
    s->vdso = NULL;
    s->nprocs = s->nfiles = s->cap_procs = s->cap_files = 0;
}
