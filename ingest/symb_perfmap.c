/*
** ingest/symb_perfmap.c: names for JIT-compiled code from the process's
** perf map, /tmp/perf-PID.map, the convention perf set and JITs follow
** (V8/Node.js --perf-basic-prof, the JVM's perf-map-agent, Python 3.12
** -X perf, LuaJIT, Mono, .NET with DOTNET_PerfMapEnabled): one line per
** compiled function, "START SIZE NAME", START and SIZE in hex (with or
** without 0x), NAME to the end of the line. Code lives in anonymous
** mappings that no ELF file describes, so this is the only source of
** names for it.
**
** The file is the process's own, read with the agent's privileges: it is
** opened under the process's root (/proc/PID/root, which reaches a
** container's /tmp, with the pid the process sees in its own namespace),
** without following a symbolic link, and only used when it is a regular
** file owned by the process's user or by root; a process cannot make the
** agent read another file. At most EM_PERFMAP_MAX_BYTES are read; names
** are cut at EM_PERFMAP_MAX_NAME bytes. A JIT appends as it compiles: the
** map is read again when its size changed, at most once per sweep. Later
** lines win where ranges overlap (code memory reused).
*/
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ingest/symb_int.h"

#define EM_PERFMAP_MAX_BYTES (64u << 20)
#define EM_PERFMAP_MAX_NAME 1024u

typedef struct pm_ent {
    uint64_t start, end;
    uint32_t name;              /* offset in the name pool */
    uint32_t order;             /* line number: the later wins */
} pm_ent;

struct em_symb_perfmap {
    pm_ent *e;
    size_t n, cap;
    char *names;
    size_t names_n, names_cap;
    off_t size;                 /* of the file when read; -1: none */
    uint64_t checked;           /* sweeps done when last looked at */
};

static bool hex_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    int digits = 0;

    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    for (;; s++, digits++) {
        int d = *s >= '0' && *s <= '9' ? *s - '0'
              : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
              : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (digits == 16)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *p = s;
    *out = v;
    return digits > 0;
}

bool em_symb_perfmap_line(const char *line, uint64_t *start, uint64_t *size,
                          const char **name, size_t *name_len)
{
    const char *p = line, *end;

    if (!hex_u64(&p, start) || *p != ' ')
        return false;
    p++;
    if (!hex_u64(&p, size) || *p != ' ' || *size == 0 ||
        *start + *size < *start)
        return false;
    p++;
    end = p + strcspn(p, "\r\n");
    if (end == p)
        return false;
    *name = p;
    *name_len = (size_t)(end - p) < EM_PERFMAP_MAX_NAME
                ? (size_t)(end - p) : EM_PERFMAP_MAX_NAME;
    return true;
}

static int pm_add(struct em_symb_perfmap *m, uint64_t start, uint64_t size,
                  const char *name, size_t len)
{
    pm_ent *e = em_grow(m->e, &m->cap, m->n + 1, sizeof *m->e);
    char *names;

    if (e == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for %zu JIT "
                      "symbols", m->n + 1);
    m->e = e;
    names = em_grow(m->names, &m->names_cap, m->names_n + len + 1, 1);
    if (names == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for JIT "
                      "symbol names");
    m->names = names;
    memcpy(names + m->names_n, name, len);
    names[m->names_n + len] = '\0';
    m->e[m->n] = (pm_ent){ start, start + size, (uint32_t)m->names_n,
                           (uint32_t)m->n };
    m->n++;
    m->names_n += len + 1;
    return EMBER_OK;
}

static int cmp_ent(const void *a, const void *b)
{
    const pm_ent *x = a, *y = b;

    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The pid PID has in its own namespace (the last NStgid field), or PID. */
static uint32_t ns_pid(uint32_t pid)
{
    char path[64], line[256];
    unsigned long v = pid;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%u/status", pid);
    if ((f = fopen(path, "re")) == NULL)
        return pid;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "NStgid:", 7) == 0) {
            char *p = line + 7, *q;
            for (;;) {
                unsigned long x = strtoul(p, &q, 10);
                if (q == p)
                    break;
                v = x;
                p = q;
            }
            break;
        }
    fclose(f);
    return (uint32_t)v;
}

/* Opens PID's perf map if it is a regular file of the process's user or
** root; -1 otherwise. *ST gets its status. */
static int pm_open(uint32_t pid, struct stat *st)
{
    char path[128];
    struct stat owner;
    int fd;

    snprintf(path, sizeof path, "/proc/%u", pid);
    if (stat(path, &owner) != 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%u/root/tmp/perf-%u.map", pid,
             ns_pid(pid));
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return -1;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) ||
        (st->st_uid != owner.st_uid && st->st_uid != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads FD's lines into M (emptied first), sorted. */
static int pm_read(struct em_symb_perfmap *m, int fd)
{
    FILE *f = fdopen(fd, "re");
    char *line = NULL;
    size_t cap = 0, bytes = 0;
    ssize_t got;
    int rc = EMBER_OK;

    m->n = 0;
    m->names_n = 0;
    if (f == NULL) {
        close(fd);
        return EMBER_OK;
    }
    while (rc == EMBER_OK && bytes < EM_PERFMAP_MAX_BYTES &&
           (got = getline(&line, &cap, f)) > 0) {
        uint64_t start, size;
        const char *name;
        size_t len;
        bytes += (size_t)got;
        if (em_symb_perfmap_line(line, &start, &size, &name, &len))
            rc = pm_add(m, start, size, name, len);
    }
    free(line);                 /* getline's malloc */
    fclose(f);
    if (rc == EMBER_OK && m->n > 1)
        qsort(m->e, m->n, sizeof *m->e, cmp_ent);
    return rc;
}

/* P's perf map, read or read again when it changed (once per sweep). */
static int pm_get(em_symbolizer *s, em_symb_proc *p,
                  struct em_symb_perfmap **out)
{
    struct em_symb_perfmap *m = p->perfmap;
    struct stat st;
    int fd, rc;

    *out = m;
    if (m != NULL && m->checked == s->sweeps + 1)
        return EMBER_OK;
    if (m == NULL) {
        if ((m = em_calloc(1, sizeof *m)) == NULL)
            return em_err(EMBER_ENOMEM, "symbolize: out of memory for a "
                          "perf map");
        m->size = -1;
        p->perfmap = *out = m;
    }
    m->checked = s->sweeps + 1;
    if (p->exited || (fd = pm_open(p->pid, &st)) < 0)
        return EMBER_OK;        /* keep what was read */
    if (st.st_size == m->size) {
        close(fd);
        return EMBER_OK;
    }
    m->size = st.st_size;
    rc = pm_read(m, fd);
    return rc;
}

int em_symb_perfmap_lookup(em_symbolizer *s, em_symb_proc *p, uint64_t addr,
                           const char **name)
{
    struct em_symb_perfmap *m;
    size_t lo;
    int rc;

    *name = NULL;
    if ((rc = pm_get(s, p, &m)) != EMBER_OK)
        return rc;
    lo = em_symb_upper(m->e, m->n, sizeof *m->e, offsetof(pm_ent, start),
                       addr);
    /* The latest line that holds ADDR among the few that start below it. */
    for (size_t i = lo, k = 0, best = SIZE_MAX; i > 0 && k < 16; i--, k++) {
        const pm_ent *e = &m->e[i - 1];
        if (addr < e->end &&
            (best == SIZE_MAX || e->order > m->e[best].order)) {
            best = i - 1;
            *name = m->names + e->name;
        }
    }
    return EMBER_OK;
}

void em_symb_perfmap_free(struct em_symb_perfmap *m)
{
    if (m == NULL)
        return;
    em_free(m->e);
    em_free(m->names);
    em_free(m);
}
