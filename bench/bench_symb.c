/*
** bench/bench_symb.c FILE...: the cost of naming addresses in big ELF
** files, the symbolizer's work for each new address the eBPF sampler sees
** (issue 5). For each FILE: N addresses inside its function symbols
** (spread over the symbol table by a fixed LCG), each named twice:
**   - by Ember's sorted symbol index (em_symb_file_symbol), index build
**     included in the time, on a freshly opened file;
**   - by libdw's dwfl_module_addrname, what the symbolizer called before;
** and then resolved whole by em_symb_file_resolve (symbol, DWARF lines
** and inlined frames when the file has them), again on a fresh file,
** once through Ember's per-CU subprogram tables and once through libdw's
** dwarf_getscopes walk (scan_scopes, what it did before).
** Prints microseconds per address and the speedups, and checks the
** answers agree: the same name or an alias at the same address, and the
** same frames both ways, except where dwarf_getscopes misses an inlined
** call whose abstract origin lies in another CU (Go writes them so),
** which is counted.
** N is --count (default 2000).
*/
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/symb_int.h"
#include "bench/util.h"

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

typedef struct oracle {
    Dwfl *dwfl;
    Dwfl_Module *mod;
} oracle;

static void oracle_open(oracle *o, const char *path)
{
    if ((o->dwfl = dwfl_begin(&callbacks)) == NULL)
        die("dwfl_begin: %s", dwfl_errmsg(-1));
    dwfl_report_begin(o->dwfl);
    o->mod = dwfl_report_elf(o->dwfl, path, path, -1, 0, true);
    if (o->mod == NULL || dwfl_report_end(o->dwfl, NULL, NULL) != 0)
        die("%s: %s", path, dwfl_errmsg(-1));
}

/* Fills A with N addresses inside sized function symbols of O's module. */
static size_t pick_addrs(const oracle *o, uint64_t *a, size_t n)
{
    int total = dwfl_module_getsymtab(o->mod);
    uint64_t x = 0x9e3779b97f4a7c15u;
    size_t got = 0;

    for (size_t tries = 0; got < n && total > 1 && tries < 50 * n; tries++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *s;
        int i;
        x = x * 6364136223846793005u + 1442695040888963407u;
        i = 1 + (int)((x >> 33) % (uint64_t)(total - 1));
        s = dwfl_module_getsym_info(o->mod, i, &sym, &addr, NULL, NULL, NULL);
        if (s == NULL || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
            sym.st_size == 0 || sym.st_shndx == SHN_UNDEF)
            continue;
        a[got++] = addr + (x >> 13) % sym.st_size;
    }
    return got;
}

static em_symb_file *file_open(const char *path)
{
    em_symb_file *f = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        die("%s: cannot open", path);
    ember_check(em_symb_file_open(fd, path, 1, 1, &f), path);
    return f;
}

/* The start of the function symbol NAME, 0 when none: aliases check. */
/* True when a function symbol named NAME starts at AT (Ember's index cuts
** a .symtab name's version off; a name may be at several addresses). */
static bool sym_at(const oracle *o, const char *name, GElf_Addr at)
{
    int total = dwfl_module_getsymtab(o->mod);
    size_t len = strlen(name);

    for (int i = 1; i < total; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *s = dwfl_module_getsym_info(o->mod, i, &sym, &addr,
                                                NULL, NULL, NULL);
        if (s != NULL && sym.st_shndx != SHN_UNDEF && addr == at &&
            strncmp(s, name, len) == 0 && (s[len] == '\0' || s[len] == '@'))
            return true;
    }
    return false;
}

static bool same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* Whether two resolutions give the same frames, strings compared. */
static bool same_frames(const em_symb_res *x, const em_symb_res *y)
{
    if (x == NULL || y == NULL)
        return x == y;
    if (x->nframes != y->nframes)
        return false;
    for (uint32_t i = 0; i < x->nframes; i++) {
        const em_symb_frame *a = &x->frames[i], *b = &y->frames[i];
        if (!same_str(a->name, b->name) || !same_str(a->file, b->file) ||
            a->line != b->line || a->start_line != b->start_line)
            return false;
    }
    return true;
}

/* Whether X has more frames than Y where Y missed an inlined call (as
** dwarf_getscopes does when an inlined subroutine's abstract origin is in
** another CU, as Go writes them): the same outermost function (its file
** and line differ: Y gives it the inlined callee's). */
static bool outer_same(const em_symb_res *x, const em_symb_res *y)
{
    const em_symb_frame *a, *b;

    if (x == NULL || y == NULL || x->nframes <= y->nframes)
        return false;
    a = &x->frames[x->nframes - 1];
    b = &y->frames[y->nframes - 1];
    return same_str(a->name, b->name) && a->start_line == b->start_line;
}

static void bench_file(const char *path, size_t n)
{
    oracle o;
    uint64_t *a = xmalloc(n * sizeof *a);
    const char **ours = xmalloc(n * sizeof *ours);
    em_symb_res **res = xmalloc(n * sizeof *res);
    em_symb_file *f, *g, *h;
    double t0, t_ours, t_dw, t_res, t_scan;
    size_t k, differ = 0, aliases = 0, more_inline = 0;
    char b1[32];

    oracle_open(&o, path);
    if ((k = pick_addrs(&o, a, n)) == 0) {
        printf("| %s | no function symbols (stripped) | | | | | | | | |\n",
               path);
        dwfl_end(o.dwfl);
        free(res);
        free(ours);
        free(a);
        return;
    }
    f = file_open(path);
    t0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t i = 0; i < k; i++)
        ember_check(em_symb_file_symbol(f, a[i], &ours[i]), path);
    t_ours = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - t0;

    t0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t i = 0; i < k; i++) {
        const char *want = dwfl_module_addrname(o.mod, a[i]);
        if (want == NULL || ours[i] == NULL || strcmp(want, ours[i]) != 0)
            differ++;
    }
    t_dw = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - t0;
    for (size_t i = 0; i < k && differ > 0; i++) {
        GElf_Off off = 0;
        GElf_Sym ws;
        const char *want = dwfl_module_addrinfo(o.mod, a[i], &off, &ws,
                                                NULL, NULL, NULL);
        if (want == NULL || ours[i] == NULL)
            die("%s: %#llx named %s by libdw, %s by Ember", path,
                (unsigned long long)a[i], want ? want : "nothing",
                ours[i] ? ours[i] : "nothing");
        if (strcmp(want, ours[i]) != 0) {
            if (!sym_at(&o, ours[i], a[i] - off))
                die("%s: %#llx is %s for libdw, %s for Ember", path,
                    (unsigned long long)a[i], want, ours[i]);
            aliases++;
        }
    }

    g = file_open(path);
    t0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t i = 0; i < k; i++)
        ember_check(em_symb_file_resolve(g, a[i], &res[i]), path);
    t_res = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - t0;
    h = file_open(path);
    h->scan_scopes = true;
    t0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t i = 0; i < k; i++) {
        em_symb_res *r = NULL;
        ember_check(em_symb_file_resolve(h, a[i], &r), path);
        if (!same_frames(res[i], r)) {
            if (!outer_same(res[i], r))
                die("%s: %#llx resolves to different frames through the "
                    "subprogram table and through dwarf_getscopes", path,
                    (unsigned long long)a[i]);
            more_inline++;
        }
        em_free(r);
        em_free(res[i]);
    }
    t_scan = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - t0;

    printf("| %s | %s | %.2f | %.1f | %.0fx | %.1f | %.1f | %.0fx | %zu | "
           "%zu |\n", path, human((double)k, b1, sizeof b1),
           t_ours * 1e6 / (double)k, t_dw * 1e6 / (double)k,
           t_ours > 0 ? t_dw / t_ours : 0.0, t_res * 1e6 / (double)k,
           t_scan * 1e6 / (double)k, t_res > 0 ? t_scan / t_res : 0.0,
           aliases, more_inline);
    fflush(stdout);
    em_symb_file_close(h);
    em_symb_file_close(g);
    em_symb_file_close(f);
    dwfl_end(o.dwfl);
    free(res);
    free(ours);
    free(a);
}

int main(int argc, char **argv)
{
    size_t n = 2000;
    int i = 1;

    bench_name = "bench_symb";
    if (i + 1 < argc && strcmp(argv[i], "--count") == 0) {
        n = (size_t)strtoul(argv[i + 1], NULL, 10);
        i += 2;
    }
    if (i >= argc || n == 0)
        die("usage: bench_symb [--count N] ELF-FILE...");
    printf("| file | addresses | symbol: Ember index, µs/addr (build "
           "included) | symbol: dwfl_module_addrname, µs/addr | speedup | "
           "whole resolve (symbol, lines, inlines), µs/addr | the same "
           "through dwarf_getscopes, µs/addr | speedup | named by an "
           "alias | inlined frames only the table finds |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n");
    for (; i < argc; i++)
        bench_file(argv[i], n);
    return 0;
}
