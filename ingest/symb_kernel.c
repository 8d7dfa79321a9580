/*
** ingest/symb_kernel.c: kernel addresses to symbols through /proc/kallsyms,
** read once, text symbols only (t, T, w, W), sorted by address (then name,
** so aliases resolve the same way every run) and binary-searched.
**
** A symbol covers the addresses up to the next one; the last one of all is
** given 64 KiB (kallsyms has no sizes). Module symbols ("[ext4]", "[bpf]")
** keep the module as their mapping file; the core kernel's mapping is
** "[kernel.kallsyms]" (perf's name) with the build id of /sys/kernel/notes.
** With kptr_restrict every address reads as 0: the kernel is then "hidden"
** and its frames stay as addresses. Modules and BPF programs loaded after
** the load are not seen (their addresses fall to the symbol before them or
** past the end): a limit, documented in docs/ingest.md.
*/
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/symb_int.h"

#define CORE_NAME "[kernel.kallsyms]"
#define LAST_SYMBOL_SPAN 0x10000u

typedef struct ksym {
    uint64_t addr;
    uint32_t name;              /* offset in names */
    uint32_t mod;               /* index in mods; 0: the core kernel */
} ksym;

typedef struct kmod {
    uint32_t name;              /* offset in names: "[ext4]" */
    uint64_t start, limit;
} kmod;

struct em_symb_kernel {
    ksym *syms;
    size_t n, cap;
    char *names;
    size_t nnames, cap_names;
    kmod *mods;
    size_t nmods, cap_mods;
    char *build_id;             /* hex, or NULL */
    bool hidden;                /* every address was 0 */
};

/* Copies LEN bytes of S into K's names; its offset in *OFF. */
static int name_add(em_symb_kernel *k, const char *s, size_t len,
                    uint32_t *off)
{
    if (k->nnames + len + 1 > k->cap_names) {
        size_t need = k->nnames + len + 1;
        char *nn = NULL;
        /* a megabyte at first: /proc/kallsyms holds several */
        if (need <= UINT32_MAX)
            nn = em_grow(k->names, &k->cap_names,
                         need < (1u << 20) ? 1u << 20 : need, 1);
        if (nn == NULL)
            return em_err(EMBER_ENOMEM, "symbolize: out of memory for "
                          "kernel symbol names");
        k->names = nn;
    }
    memcpy(k->names + k->nnames, s, len);
    k->names[k->nnames + len] = '\0';
    *off = (uint32_t)k->nnames;
    k->nnames += len + 1;
    return EMBER_OK;
}

/* The index of module NAME ("[x]", or NULL for the core), added if new.
** Modules are few: a linear search is enough. */
static int mod_index(em_symb_kernel *k, const char *name, uint32_t *idx)
{
    int rc;

    if (name == NULL)
        name = CORE_NAME;
    for (size_t i = 0; i < k->nmods; i++)
        if (strcmp(k->names + k->mods[i].name, name) == 0) {
            *idx = (uint32_t)i;
            return EMBER_OK;
        }
    if (k->nmods == k->cap_mods) {
        size_t nc = k->cap_mods == 0 ? 8 : k->cap_mods * 2;
        kmod *nm = em_realloc(k->mods, nc * sizeof *nm);
        if (nm == NULL)
            return em_err(EMBER_ENOMEM, "symbolize: out of memory for "
                          "kernel modules");
        k->mods = nm;
        k->cap_mods = nc;
    }
    k->mods[k->nmods] = (kmod){ 0, UINT64_MAX, 0 };
    if ((rc = name_add(k, name, strlen(name), &k->mods[k->nmods].name)) != 0)
        return rc;
    *idx = (uint32_t)k->nmods++;
    return EMBER_OK;
}

/* Adds one kallsyms line "ADDR TYPE NAME[\t[MODULE]]" if it is text. */
static int line_add(em_symb_kernel *k, char *line)
{
    char *p = line, *name, *mod, *end;
    uint64_t addr = strtoull(p, &p, 16);
    uint32_t midx = 0;
    int rc;

    if (p == line || p[0] != ' ' || strchr("tTwW", p[1]) == NULL ||
        p[1] == '\0' || p[2] != ' ')
        return EMBER_OK;
    name = p + 3;
    end = name + strcspn(name, "\t\n");
    mod = *end == '\t' ? end + 1 : NULL;
    *end = '\0';
    if (mod != NULL)
        mod[strcspn(mod, "\n")] = '\0';
    if ((rc = mod_index(k, mod, &midx)) != EMBER_OK)
        return rc;
    if (k->n == k->cap) {
        ksym *ns = em_grow(k->syms, &k->cap,
                           k->n < (1u << 16) ? 1u << 16 : k->n + 1,
                           sizeof *ns);
        if (ns == NULL)
            return em_err(EMBER_ENOMEM, "symbolize: out of memory for "
                          "kernel symbols");
        k->syms = ns;
    }
    k->syms[k->n] = (ksym){ addr, 0, midx };
    if ((rc = name_add(k, name, (size_t)(end - name), &k->syms[k->n].name)))
        return rc;
    k->n++;
    return EMBER_OK;
}

static const em_symb_kernel *sort_kernel;      /* qsort has no context */

static int cmp_ksym(const void *a, const void *b)
{
    const ksym *x = a, *y = b;

    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return strcmp(sort_kernel->names + x->name, sort_kernel->names + y->name);
}

/* The GNU build id among the notes of /sys/kernel/notes, or NULL. */
static char *kernel_build_id(void)
{
    unsigned char buf[4096];
    FILE *fp = fopen("/sys/kernel/notes", "re");
    size_t n, off = 0;

    if (fp == NULL)
        return NULL;
    n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    while (off + 12 <= n) {
        uint32_t h[3];
        memcpy(h, buf + off, sizeof h);
        size_t name = off + 12, desc = name + ((h[0] + 3u) & ~3u);
        size_t next = desc + ((h[1] + 3u) & ~3u);
        if (next > n || next <= off)
            break;
        if (h[2] == 3 && h[0] == 4 && memcmp(buf + name, "GNU", 4) == 0) {
            char *s = em_malloc(2 * h[1] + 1);
            for (uint32_t i = 0; s != NULL && i < h[1]; i++)
                snprintf(s + 2 * i, 3, "%02x", buf[desc + i]);
            if (s != NULL && h[1] == 0)
                s[0] = '\0';
            return s;
        }
        off = next;
    }
    return NULL;
}

/* Sorts the symbols and sets each module's range. */
static void kernel_finish(em_symb_kernel *k)
{
    sort_kernel = k;
    if (k->n > 1)               /* qsort(NULL, 0) is undefined */
        qsort(k->syms, k->n, sizeof *k->syms, cmp_ksym);
    sort_kernel = NULL;
    k->hidden = k->n == 0 || k->syms[k->n - 1].addr == 0;
    for (size_t i = 0; i < k->n; i++) {
        kmod *m = &k->mods[k->syms[i].mod];
        if (k->syms[i].addr < m->start)
            m->start = k->syms[i].addr;
        if (k->syms[i].addr + LAST_SYMBOL_SPAN > m->limit)
            m->limit = k->syms[i].addr + LAST_SYMBOL_SPAN;
    }
    for (size_t i = 0; i < k->nmods; i++)
        if (k->mods[i].start > k->mods[i].limit)
            k->mods[i].start = k->mods[i].limit = 0;
}

int em_symb_kernel_load(const char *kallsyms, em_symb_kernel **out)
{
    em_symb_kernel *k = em_calloc(1, sizeof *k);
    char *line = NULL;
    size_t len = 0;
    uint32_t core;
    FILE *fp = NULL;
    int rc;

    *out = NULL;
    if (k == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for kallsyms");
    if ((rc = mod_index(k, NULL, &core)) != EMBER_OK)
        goto out;
    if ((fp = fopen(kallsyms, "re")) == NULL) {
        rc = em_err(EMBER_EIO, "symbolize: cannot read %s", kallsyms);
        goto out;
    }
    while (rc == EMBER_OK && getline(&line, &len, fp) > 0)
        rc = line_add(k, line);
    if (rc != EMBER_OK)
        goto out;
    kernel_finish(k);
    k->build_id = kernel_build_id();
    *out = k;
    k = NULL;
out:
    free(line);                 /* getline's malloc */
    if (fp != NULL)
        fclose(fp);
    em_symb_kernel_free(k);
    return rc;
}

void em_symb_kernel_free(em_symb_kernel *k)
{
    if (k == NULL)
        return;
    em_free(k->syms);
    em_free(k->names);
    em_free(k->mods);
    em_free(k->build_id);
    em_free(k);
}

bool em_symb_kernel_hidden(const em_symb_kernel *k)
{
    return k->hidden;
}

void em_symb_kernel_lookup(const em_symb_kernel *k, uint64_t addr,
                           em_symb_ksym *out)
{
    size_t lo, i;
    const kmod *m = &k->mods[0];

    out->name = NULL;
    if (!k->hidden) {
        lo = em_symb_upper(k->syms, k->n, sizeof *k->syms,
                           offsetof(ksym, addr), addr);
        if (lo > 0) {
            i = lo - 1;
            while (i > 0 && k->syms[i - 1].addr == k->syms[i].addr)
                i--;
            if (lo < k->n || addr - k->syms[i].addr < LAST_SYMBOL_SPAN) {
                out->name = k->names + k->syms[i].name;
                m = &k->mods[k->syms[i].mod];
            }
        }
    }
    out->mapping = (ember_mapping){ m->start, m->limit, 0,
                                    k->names + m->name,
                                    m == &k->mods[0] ? k->build_id : NULL };
}
