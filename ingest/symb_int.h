/*
** ingest/symb_int.h: private to the symbolizer (ingest/symb_*.c,
** ingest/symbolize.c) and its tests: held ELF files, process captures, the
** per-build-id frame cache and kallsyms.
**
** Ownership: the symbolizer owns every file and every capture. A file is
** shared by all the captures that map it (keyed by the device and inode
** /proc/PID/maps shows) and counts them in REFS; a file no capture refers
** to stays open until the next sweep, so a binary that is run again and
** again (short-lived processes) is not reopened for each run.
*/
#ifndef EM_SYMB_INT_H
#define EM_SYMB_INT_H

#include "engine/engine.h"
#include "ingest/symbolize.h"

/* Most inline frames kept per address (the innermost ones win). */
#define EM_SYMB_MAX_INLINE 64u
/* Frame-cache entries per generation; two generations are kept. */
#define EM_SYMB_CACHE_ENTRIES 32768u

struct Dwfl;
struct Dwfl_Module;
struct em_symb_cus;             /* CU address ranges (ingest/symb_elf.c) */
struct em_symb_perfmap;         /* a JIT's perf map (ingest/symb_perfmap.c) */

/* A PT_LOAD program header: what maps file offsets to ELF addresses. */
typedef struct em_symb_seg {
    uint64_t offset, vaddr, filesz;
    bool exec;                  /* PF_X */
} em_symb_seg;

/* An ELF file held open (ingest/symb_elf.c). */
typedef struct em_symb_file {
    uint64_t dev, ino;          /* key: device and inode from the maps */
    int fd;                     /* held open; -1 for none */
    unsigned refs;              /* capture mappings that use it */
    char *path;                 /* as first seen, " (deleted)" cut off */
    char *build_id;             /* see em_symb_file_identity */
    uint64_t bid_hash;          /* em_hash64 of build_id: the cache key */
    em_symb_seg *segs;          /* PT_LOAD headers */
    size_t nsegs;
    struct Dwfl *dwfl;          /* made at the first cache miss */
    struct Dwfl_Module *mod;
    bool dwfl_failed;           /* tried and failed: do not retry */
    struct em_symb_cus *cus;    /* made when libdw finds no CU by address */
    struct em_symb_syms *syms;  /* code symbols by address, at first use */
    struct em_symb_subs *subs;  /* subprograms by address, per CU */
    bool scan_scopes;           /* tests: walk CUs with libdw instead */
} em_symb_file;

/* Opens the ELF file on FD (taken: closed on failure too) that PATH names,
** reading its build id and PT_LOAD headers. EINVAL when FD is not an ELF
** file, ENOMEM. */
int em_symb_file_open(int fd, const char *path, uint64_t dev, uint64_t ino,
                      em_symb_file **out);
void em_symb_file_close(em_symb_file *f);       /* NULL: no-op */

/* The ELF address of file offset OFF, through the PT_LOAD headers: false
** when no segment holds it. */
bool em_symb_file_vaddr(const em_symb_file *f, uint64_t off, uint64_t *vaddr);

/* One resolved frame; strings live in the cache entry. */
typedef struct em_symb_frame {
    const char *name;           /* demangled when it is a C++ or Rust name */
    const char *system_name;    /* linkage name, else DWARF name, else symtab */
    const char *file;           /* source file of the function, or "" */
    int64_t line;               /* line in it, 0: unknown */
    int64_t start_line;         /* line the function is declared on */
} em_symb_frame;

/* What an ELF address resolves to, innermost inline frame first; no
** frames when nothing is known about it. One allocation. */
typedef struct em_symb_res {
    uint32_t nframes;
    em_symb_frame frames[];
} em_symb_res;

/* Resolves ELF address VADDR of F with libdw (symbols, lines, inlines,
** separate debuginfo). *OUT is NULL when nothing resolves; ENOMEM. */
int em_symb_file_resolve(em_symb_file *f, uint64_t vaddr, em_symb_res **out);

/* NAME demangled (C++, and Rust's legacy scheme, through libstdc++'s
** __cxa_demangle found at run time), in memory to em_free; NULL when NAME
** is not a mangled name, cannot be demangled, libstdc++ is not installed,
** or memory ran out. */
char *em_symb_demangle(const char *name);

/* In BASE, N entries of SIZE bytes sorted by the uint64_t at offset OFF of
** each, the index of the first entry whose key is above ADDR (N when none
** is): the entry before it is the last that starts at or below ADDR. */
size_t em_symb_upper(const void *base, size_t n, size_t size, size_t off,
                     uint64_t addr);

/* The name of the function symbol holding ELF address ADDR of F (from a
** table sorted by address, built at the first call), NULL in *NAME when
** none does; the string lives as long as F. ENOMEM. */
int em_symb_file_symbol(em_symb_file *f, uint64_t addr, const char **name);

/* A file identity for ELF files without a build id: "fid:" and 32 hex
** digits of two em_hash64 (seeds 0 and 1) over the first 4 KiB, the last
** 4 KiB and the size as 8 little-endian bytes. Reads FD with pread. */
int em_symb_file_identity(int fd, char **out);

/* ---- the frame cache (ingest/symbolize.c) ------------------------------- */

typedef struct em_symb_centry {
    uint64_t bid_hash, addr;    /* key: build id hash and looked-up address */
    em_symb_res *res;           /* NULL: resolved to nothing, or moved */
    bool moved;                 /* promoted to the younger generation */
} em_symb_centry;

typedef struct em_symb_cgen {
    em_symb_centry *ents;
    size_t n, cap;
    em_hindex index;
} em_symb_cgen;

/* Two generations: lookups hit the young one, then the old one (promoting
** the entry); when the young one is full the old one is dropped and the
** young one becomes old. Bounded by 2 x LIMIT entries, close to an LRU at
** the cost of one hash probe. */
typedef struct em_symb_cache {
    em_symb_cgen gen[2];        /* 0: young, 1: old */
    size_t limit;
} em_symb_cache;

/* ---- process captures (ingest/symb_proc.c) ------------------------------ */

typedef struct em_symb_map {
    uint64_t start, end, pgoff; /* runtime range and file offset */
    uint64_t bias;              /* runtime address minus ELF address */
    em_symb_file *file;         /* NULL: no ELF file (anon, unreadable) */
    char *name;                 /* owned when FILE is NULL, else file->path */
} em_symb_map;

typedef struct em_symb_proc {
    uint32_t pid;
    bool exited;
    uint64_t exit_gen;          /* sweeps done when marked exited */
    uint64_t capture_gen;       /* sweeps done when captured */
    char *exe, *build_id, *cgroup, *container_id;
    em_symb_map *maps;          /* executable mappings, sorted by start */
    size_t nmaps;
    struct em_symb_perfmap *perfmap;    /* read at its first JIT frame */
} em_symb_proc;

/* ---- JIT code: /tmp/perf-PID.map (ingest/symb_perfmap.c) --------------- */

/* Parses one perf map line "START SIZE NAME" (hex, 0x optional): false
** when it is not one. NAME points into LINE, NAME_LEN bytes (cut). */
bool em_symb_perfmap_line(const char *line, uint64_t *start, uint64_t *size,
                          const char **name, size_t *name_len);
/* The name P's perf map gives runtime address ADDR, NULL when none (no
** map, not the process's own file, no line holds it); the string lives
** until P's map is read again. ENOMEM. */
int em_symb_perfmap_lookup(em_symbolizer *s, em_symb_proc *p, uint64_t addr,
                           const char **name);
void em_symb_perfmap_free(struct em_symb_perfmap *m);   /* NULL: no-op */

/* The kernel's text symbols (ingest/symb_kernel.c). */
typedef struct em_symb_kernel em_symb_kernel;

struct em_symbolizer {
    em_symb_proc **procs;
    size_t nprocs, cap_procs;
    em_hindex proc_index;
    em_symb_file **files;
    size_t nfiles, cap_files;
    em_hindex file_index;
    em_symb_file *vdso;         /* our own [vdso] in a memfd, or NULL */
    uint64_t vdso_size;         /* its size: a [vdso] of another size differs */
    bool vdso_tried;
    uint64_t sweeps;
    em_symb_cache cache;
    em_symb_kernel *kernel;     /* loaded at the first kernel stack */
    bool kernel_tried;
    em_symb_stats stats;
};

/* The capture of PID, or NULL. */
em_symb_proc *em_symb_proc_find(em_symbolizer *s, uint32_t pid);
/* The executable mapping of P holding ADDR, or NULL. */
const em_symb_map *em_symb_proc_map(const em_symb_proc *p, uint64_t addr);
/* Frees the captures and the files (em_symbolizer_free). */
void em_symb_procs_free(em_symbolizer *s);

/* Parses one line of /proc/PID/maps; false when it is not one. PATH points
** into LINE (the rest of it, "" for anonymous mappings). */
typedef struct em_symb_maps_line {
    uint64_t start, end, pgoff, dev, ino;
    bool exec;
    const char *path;
} em_symb_maps_line;
bool em_symb_parse_maps_line(char *line, em_symb_maps_line *out);

/* The container id a cgroup path names (the last run of exactly 64 hex
** digits between non-alphanumeric bytes: docker, containerd, cri-o,
** podman), copied into OUT (65 bytes); false when there is none. */
bool em_symb_container_id(const char *cgroup, char out[65]);

/* Loads /proc/kallsyms (text symbols) and the kernel build id. ENOMEM,
** EIO when it cannot be read. */
int em_symb_kernel_load(const char *kallsyms, em_symb_kernel **out);
void em_symb_kernel_free(em_symb_kernel *k);    /* NULL: no-op */
/* True when every address is 0 (kptr_restrict hides them). */
bool em_symb_kernel_hidden(const em_symb_kernel *k);

/* A kernel address: its symbol (NULL when none), and the mapping it is in
** (core or one module). */
typedef struct em_symb_ksym {
    const char *name;
    ember_mapping mapping;
} em_symb_ksym;
void em_symb_kernel_lookup(const em_symb_kernel *k, uint64_t addr,
                           em_symb_ksym *out);

#endif /* EM_SYMB_INT_H */
