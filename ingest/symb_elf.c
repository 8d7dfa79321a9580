/*
** ingest/symb_elf.c: one held ELF file of the symbolizer: its identity
** (build id), its PT_LOAD headers (file offset -> ELF address) and, from
** the first cache miss on, a libdwfl session over it that turns an ELF
** address into frames: symbol, source file and line, inlined frames.
**
** Identity, in this order: the GNU build id note (hex, as `readelf -n`
** prints it); Go's build id note (.note.go.buildid, the string `go tool
** buildid` prints; Go's linker writes no GNU note unless it links
** externally); else "fid:" and a hash of the file's first and last 4 KiB
** and its size (em_symb_file_identity), OpenTelemetry's file-id idea.
**
** libdwfl session: one Dwfl per file, reported with dwfl_report_elf on a
** dup of the held descriptor at bias 0, so module addresses are ELF
** addresses. Separate debuginfo is found through
** /usr/lib/debug/.build-id/xx/yyyy.debug and .gnu_debuglink (next to the
** file, in its .debug/, under /usr/lib/debug), and through debuginfod
** only when the user has set DEBUGINFOD_URLS (find_debuginfo).
** Memory from libdw (dwarf_getscopes) is released with free(), not em_free.
*/
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <gelf.h>
#include <libelf.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ingest/symb_int.h"

#define NT_GO_BUILD_ID 4            /* Go's note type, name "Go" */
#define IDENTITY_CHUNK 4096u

static void cus_free(struct em_symb_cus *c);
static void syms_free(struct em_symb_syms *t);
static void subs_free(struct em_symb_subs *t);

/* ---- identity ------------------------------------------------------------ */

static char *hex_dup(const unsigned char *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *s = em_malloc(2 * n + 1);

    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        s[2 * i] = digits[p[i] >> 4];
        s[2 * i + 1] = digits[p[i] & 15];
    }
    s[2 * n] = '\0';
    return s;
}

/* A printable copy of Go's build id (it is ASCII; anything else is hex). */
static char *go_id_dup(const char *p, size_t n)
{
    char *s;

    while (n > 0 && p[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e)
            return hex_dup((const unsigned char *)p, n);
    if ((s = em_malloc(n + 1)) == NULL)
        return NULL;
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* Looks through the notes of DATA for the GNU build id (preferred) and
** Go's; sets *GNU / *GO (owned) when found and still NULL. */
static int notes_scan(Elf_Data *data, char **gnu, char **go)
{
    size_t off = 0, name_off, desc_off;
    GElf_Nhdr nh;

    while (data != NULL &&
           (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        const char *name = (const char *)data->d_buf + name_off;
        const char *desc = (const char *)data->d_buf + desc_off;

        if (*gnu == NULL && nh.n_type == NT_GNU_BUILD_ID &&
            nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
            nh.n_descsz > 0) {
            if ((*gnu = hex_dup((const unsigned char *)desc,
                                nh.n_descsz)) == NULL)
                return EMBER_ENOMEM;
        } else if (*go == NULL && nh.n_type == NT_GO_BUILD_ID &&
                   (nh.n_namesz == 3 || nh.n_namesz == 4) &&
                   memcmp(name, "Go", 3) == 0 &&
                   nh.n_descsz > 0) {
            if ((*go = go_id_dup(desc, nh.n_descsz)) == NULL)
                return EMBER_ENOMEM;
        }
    }
    return EMBER_OK;
}

/* The build id of ELF from its note sections, else its PT_NOTE segments
** (stripped section headers); NULL in *OUT when it has none. */
static int elf_build_id(Elf *elf, char **out)
{
    char *gnu = NULL, *go = NULL;
    Elf_Scn *scn = NULL;
    size_t phnum = 0;
    int rc = EMBER_OK;

    while (rc == EMBER_OK && (scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) != NULL && sh.sh_type == SHT_NOTE)
            rc = notes_scan(elf_getdata(scn, NULL), &gnu, &go);
    }
    if (rc == EMBER_OK && gnu == NULL && go == NULL &&
        elf_getphdrnum(elf, &phnum) == 0) {
        for (size_t i = 0; rc == EMBER_OK && i < phnum; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, (int)i, &ph) == NULL ||
                ph.p_type != PT_NOTE)
                continue;
            rc = notes_scan(elf_getdata_rawchunk(elf, (int64_t)ph.p_offset,
                                                 ph.p_filesz, ELF_T_NHDR),
                            &gnu, &go);
        }
    }
    if (rc != EMBER_OK || gnu != NULL) {
        em_free(go);
        *out = gnu;
    } else {
        *out = go;
    }
    return rc == EMBER_OK ? EMBER_OK
                          : em_err(rc, "symbolize: out of memory for a "
                                   "build id");
}

/* Reads up to N bytes at OFF into BUF; the count read. */
static size_t read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got,
                          (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

int em_symb_file_identity(int fd, char **out)
{
    unsigned char buf[2 * IDENTITY_CHUNK + 8], digest[16];
    struct stat st;
    uint64_t size, tail, h0, h1;
    size_t n;

    if (fstat(fd, &st) != 0)
        return em_err(EMBER_EIO, "symbolize: fstat: %s", strerror(errno));
    size = (uint64_t)st.st_size;
    n = read_at(fd, buf, size < IDENTITY_CHUNK ? size : IDENTITY_CHUNK, 0);
    tail = size > IDENTITY_CHUNK ? size - IDENTITY_CHUNK : 0;
    n += read_at(fd, buf + n, (size_t)(size - tail), tail);
    for (int i = 0; i < 8; i++)
        buf[n++] = (unsigned char)(size >> (8 * i));
    h0 = em_hash64(buf, n, 0);
    h1 = em_hash64(buf, n, 1);
    for (int i = 0; i < 8; i++) {
        digest[i] = (unsigned char)(h0 >> (56 - 8 * i));
        digest[8 + i] = (unsigned char)(h1 >> (56 - 8 * i));
    }
    char *hex = hex_dup(digest, sizeof digest);
    if (hex == NULL || (*out = em_malloc(4 + 32 + 1)) == NULL) {
        em_free(hex);
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a file id");
    }
    memcpy(*out, "fid:", 4);
    memcpy(*out + 4, hex, 33);
    em_free(hex);
    return EMBER_OK;
}

/* ---- opening ------------------------------------------------------------- */

static int read_segments(Elf *elf, em_symb_file *f)
{
    size_t phnum = 0;

    if (elf_getphdrnum(elf, &phnum) != 0)
        return em_err(EMBER_EINVAL, "symbolize: %s: no program headers",
                      f->path);
    f->segs = em_calloc(phnum == 0 ? 1 : phnum, sizeof *f->segs);
    if (f->segs == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for %zu "
                      "program headers", phnum);
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD)
            continue;
        f->segs[f->nsegs++] = (em_symb_seg){ ph.p_offset, ph.p_vaddr,
                                             ph.p_filesz,
                                             (ph.p_flags & PF_X) != 0 };
    }
    return EMBER_OK;
}

/* Reads what F needs from its ELF headers. */
static int read_headers(em_symb_file *f)
{
    Elf *elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
    int rc;

    if (elf == NULL || elf_kind(elf) != ELF_K_ELF) {
        rc = em_err(EMBER_EINVAL, "symbolize: %s: not an ELF file: %s",
                    f->path, elf_errmsg(-1));
        goto out;
    }
    if ((rc = read_segments(elf, f)) != EMBER_OK)
        goto out;
    if ((rc = elf_build_id(elf, &f->build_id)) != EMBER_OK)
        goto out;
    if (f->build_id == NULL)
        rc = em_symb_file_identity(f->fd, &f->build_id);
out:
    if (elf != NULL)
        elf_end(elf);
    return rc;
}

int em_symb_file_open(int fd, const char *path, uint64_t dev, uint64_t ino,
                      em_symb_file **out)
{
    em_symb_file *f = em_calloc(1, sizeof *f);
    int rc;

    *out = NULL;
    if (f == NULL || (f->path = em_strdup(path)) == NULL) {
        em_free(f);
        close(fd);
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for a file");
    }
    f->fd = fd;
    f->dev = dev;
    f->ino = ino;
    elf_version(EV_CURRENT);
    if ((rc = read_headers(f)) != EMBER_OK) {
        em_symb_file_close(f);
        return rc;
    }
    f->bid_hash = em_hash64(f->build_id, strlen(f->build_id), 0x62696400);
    *out = f;
    return EMBER_OK;
}

void em_symb_file_close(em_symb_file *f)
{
    if (f == NULL)
        return;
    cus_free(f->cus);
    syms_free(f->syms);
    subs_free(f->subs);
    if (f->dwfl != NULL)
        dwfl_end(f->dwfl);
    if (f->fd >= 0)
        close(f->fd);
    em_free(f->segs);
    em_free(f->build_id);
    em_free(f->path);
    em_free(f);
}

bool em_symb_file_vaddr(const em_symb_file *f, uint64_t off, uint64_t *vaddr)
{
    for (size_t i = 0; i < f->nsegs; i++) {
        const em_symb_seg *g = &f->segs[i];
        if (off >= g->offset && off - g->offset < g->filesz) {
            *vaddr = off - g->offset + g->vaddr;
            return true;
        }
    }
    return false;
}

/* ---- libdwfl ------------------------------------------------------------- */

/* True when the separate debug file on FD belongs to MOD: the same GNU
** build id when MOD has one, else the CRC32 .gnu_debuglink names. */
static bool debug_matches(Dwfl_Module *mod, int fd, GElf_Word crc)
{
    const unsigned char *bits;
    GElf_Addr vaddr;
    int nbits = dwfl_module_build_id(mod, &bits, &vaddr);
    unsigned char buf[65536];
    uLong c = crc32(0, NULL, 0);
    ssize_t n;

    if (nbits > 0) {
        Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        char *id = NULL, *want = hex_dup(bits, (size_t)nbits);
        bool same = elf != NULL && elf_build_id(elf, &id) == EMBER_OK &&
                    id != NULL && want != NULL && strcmp(id, want) == 0;
        if (elf != NULL)
            elf_end(elf);
        em_free(id);
        em_free(want);
        em_err_clear();
        return same;
    }
    while ((n = read(fd, buf, sizeof buf)) > 0)
        c = crc32(c, buf, (uInt)n);
    return n == 0 && (GElf_Word)c == crc;
}

/* The .gnu_debuglink search (next to FILE_NAME, in its .debug/, under
** /usr/lib/debug): the debug file's descriptor and, in *OUT, its path
** (malloc'd: libdw frees it), or -1. */
static int debuglink_find(Dwfl_Module *mod, const char *file_name,
                          const char *link, GElf_Word crc, char **out)
{
    static const char *const where[][2] = {   /* before, after the dir */
        { "", "" }, { "", "/.debug" }, { "/usr/lib/debug", "" },
    };
    const char *slash = file_name != NULL ? strrchr(file_name, '/') : NULL;
    char path[4096];

    if (link == NULL || link[0] == '\0' || strchr(link, '/') != NULL ||
        slash == NULL)
        return -1;
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        int fd, len = (int)(slash - file_name);
        if (snprintf(path, sizeof path, "%s%.*s%s/%s", where[i][0], len,
                     file_name, where[i][1], link) >=
                (int)sizeof path || strcmp(path, file_name) == 0 ||
            (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        if (debug_matches(mod, fd, crc) && lseek(fd, 0, SEEK_SET) == 0 &&
            (*out = strdup(path)) != NULL)
            return fd;
        close(fd);
    }
    return -1;
}

/* libdw's standard search without its debuginfod step unless the user
** asked for it (DEBUGINFOD_URLS): the debuginfod client libdw makes for
** every Dwfl otherwise holds a socket pair (curl) per held file. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, GElf_Addr base,
                          const char *file_name, const char *debuglink,
                          GElf_Word crc, char **out)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    int fd;

    if (urls != NULL && urls[0] != '\0')
        return dwfl_standard_find_debuginfo(mod, userdata, modname, base,
                                            file_name, debuglink, crc, out);
    errno = 0;
    fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
                                      file_name, debuglink, crc, out);
    if (fd >= 0)
        return fd;
    return debuglink_find(mod, file_name, debuglink, crc, out);
}

static char *debuginfo_path;        /* NULL: libdw's default search path */
static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

/* Starts F's libdwfl session; false when it cannot (F is then left as
** symbols unknown, and not retried). */
static bool dwfl_start(em_symb_file *f)
{
    int fd;

    if (f->dwfl != NULL || f->dwfl_failed)
        return f->dwfl != NULL;
    f->dwfl_failed = true;
    if ((fd = dup(f->fd)) < 0)
        return false;
    if ((f->dwfl = dwfl_begin(&dwfl_callbacks)) == NULL) {
        close(fd);
        return false;
    }
    dwfl_report_begin(f->dwfl);
    /* Consumes FD, also on failure. Bias 0: module addresses are ELF. */
    f->mod = dwfl_report_elf(f->dwfl, f->path, f->path, fd, 0, true);
    if (dwfl_report_end(f->dwfl, NULL, NULL) != 0 || f->mod == NULL) {
        dwfl_end(f->dwfl);
        f->dwfl = NULL;
        f->mod = NULL;
        return false;
    }
    f->dwfl_failed = false;
    return true;
}

/* ---- sorted tables ------------------------------------------------------ */

size_t em_symb_upper(const void *base, size_t n, size_t size, size_t off,
                     uint64_t addr)
{
    const unsigned char *p = base;
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t key;
        memcpy(&key, p + mid * size + off, sizeof key);
        if (key <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- CUs by address --------------------------------------------------------
** libdw 0.188 finds the CU of an address through .debug_aranges only, and
** clang emits none by default: for such files the CUs' own ranges
** (DW_AT_low_pc/high_pc/ranges) are read once into a sorted table. */

/* DIEs by the address ranges they cover: the CUs of a file (here) and
** the subprograms of a CU (below). */
typedef struct die_range {
    Dwarf_Addr lo, hi;          /* [lo, hi) in DWARF addresses */
    Dwarf_Die die;
} die_range;

typedef struct die_ranges {
    die_range *r;
    size_t n, cap;
} die_ranges;

struct em_symb_cus {
    die_ranges ranges;
    Dwarf_Addr bias;            /* module address minus DWARF address */
};

/* By address; at one address the first in DIE order last, since
** ranges_find looks backwards and aliases (asm's subprograms) should give
** the name dwarf_getscopes would. */
static int cmp_range(const void *a, const void *b)
{
    const die_range *x = a, *y = b;
    Dwarf_Off ox, oy;

    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    ox = dwarf_dieoffset((Dwarf_Die *)&x->die);
    oy = dwarf_dieoffset((Dwarf_Die *)&y->die);
    return (ox < oy) - (ox > oy);
}

/* Adds every address range of DIE (DW_AT_low_pc/high_pc or ranges). */
static int ranges_add(die_ranges *t, Dwarf_Die *die)
{
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;

    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        die_range *r;
        if (hi <= lo)
            continue;
        if ((r = em_grow(t->r, &t->cap, t->n + 1, sizeof *t->r)) == NULL)
            return em_err(EMBER_ENOMEM, "symbolize: out of memory for %zu "
                          "DIE ranges", t->n + 1);
        t->r = r;
        t->r[t->n++] = (die_range){ lo, hi, *die };
    }
    return EMBER_OK;
}

static void ranges_sort(die_ranges *t)
{
    if (t->n > 1)               /* qsort(NULL, 0) is undefined */
        qsort(t->r, t->n, sizeof *t->r, cmp_range);
}

/* The DIE whose range holds ADDR, NULL when none does. Ranges of
** different DIEs rarely overlap: a few before the bisection's are tried. */
static Dwarf_Die *ranges_find(const die_ranges *t, Dwarf_Addr addr)
{
    size_t lo = em_symb_upper(t->r, t->n, sizeof *t->r,
                              offsetof(die_range, lo), addr);

    for (size_t i = lo, k = 0; i > 0 && k < 8; i--, k++)
        if (addr >= t->r[i - 1].lo && addr < t->r[i - 1].hi)
            return &t->r[i - 1].die;
    return NULL;
}

static void cus_free(struct em_symb_cus *c)
{
    if (c != NULL)
        em_free(c->ranges.r);
    em_free(c);
}

/* Reads the address ranges of every CU of F's module. */
static int cus_build(em_symb_file *f)
{
    struct em_symb_cus *c = em_calloc(1, sizeof *c);
    Dwarf_Die *cu = NULL;
    Dwarf_Addr bias = 0;
    int rc = EMBER_OK;

    if (c == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for CUs");
    while (rc == EMBER_OK &&
           (cu = dwfl_module_nextcu(f->mod, cu, &bias)) != NULL) {
        c->bias = bias;
        rc = ranges_add(&c->ranges, cu);
    }
    if (rc != EMBER_OK) {
        cus_free(c);
        return rc;
    }
    ranges_sort(&c->ranges);
    f->cus = c;
    return EMBER_OK;
}

/* The CU of module address ADDR from F's table, copied into *DIE. */
static int cus_find(em_symb_file *f, Dwarf_Addr addr, Dwarf_Die *die,
                    Dwarf_Addr *bias, bool *found)
{
    const Dwarf_Die *cu;
    int rc;

    *found = false;
    if (f->cus == NULL && (rc = cus_build(f)) != EMBER_OK)
        return rc;
    if ((cu = ranges_find(&f->cus->ranges, addr - f->cus->bias)) != NULL) {
        *die = *cu;
        *bias = f->cus->bias;
        *found = true;
    }
    return EMBER_OK;
}

/* ---- function symbols by address ------------------------------------------
** dwfl_module_addrname walks the whole symbol table for every address
** (libdw 0.188), which costs milliseconds per new address in a large
** binary; the agent asks for thousands. The function symbols are read
** once into a table sorted by address and searched by bisection.
**
** Aliases: one address often carries several names, glibc's read six
** (read, __read, __libc_read, __GI___libc_read, __GI___read, __GI_read).
** The table keeps one entry per address, named by the best alias, and
** the names of all of them (sym_alias). The best, in this order (issue
** 12; perf's choose_best_symbol in tools/perf/util/symbol.c also ranks
** size, binding and leading underscores, but puts a local above a weak
** symbol and so names libc's write __GI___libc_write):
**   1. a sized symbol over a sizeless one;
**   2. an exported one (global or weak) over a local one: glibc's
**      internal aliases (__GI_*, __libc_*) are local;
**   3. a name outside C's reserved space (not "__x" nor "_X") over one
**      in it: glibc exports getpid as a weak getpid and a global __getpid;
**   4. global over weak;
**   5. fewer leading underscores, then the shorter name (open over
**      open64), then byte order, so that the choice never depends on the
**      order of the symbol table.
** A symbol version ("fopen@@GLIBC_2.2.5" in a .symtab) is cut off. */

typedef struct sym_ent {
    GElf_Addr lo;
    GElf_Xword size;            /* 0: up to the next symbol */
    const char *name;           /* the best alias, version cut */
    size_t len;                 /* of NAME without its version */
    uint32_t first, n;          /* its aliases: names[first .. first+n) */
    int rank;                   /* rules 1-4 above: bigger wins */
} sym_ent;

struct em_symb_syms {
    sym_ent *s;                 /* one per address, sorted */
    size_t n;
    const char **names;         /* every alias, libdw's strings (alive as
                                ** long as F's Dwfl), grouped by address */
    char *cut;                  /* best names whose version was cut */
};

/* The length of NAME without a symbol version "@VER" or "@@VER". */
static size_t sym_len(const char *name)
{
    const char *at = strchr(name, '@');

    return at != NULL && at != name && at[1] != '\0' ? (size_t)(at - name)
                                                     : strlen(name);
}

static size_t leading_underscores(const char *s)
{
    return strspn(s, "_");
}

/* Orders by address, the best alias first (rules above). */
static int cmp_sym(const void *a, const void *b)
{
    const sym_ent *x = a, *y = b;
    size_t ux, uy;
    int c;

    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank > y->rank ? -1 : 1;
    ux = leading_underscores(x->name);
    uy = leading_underscores(y->name);
    if (ux != uy)
        return ux < uy ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    c = memcmp(x->name, y->name, x->len);
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* Rules 1-4 for a code symbol; -1: not a code symbol. */
static int sym_rank(const GElf_Sym *sym, GElf_Word shndx, const char *name)
{
    int type = GELF_ST_TYPE(sym->st_info), bind = GELF_ST_BIND(sym->st_info);
    bool reserved = name[0] == '_' &&
                    (name[1] == '_' || (name[1] >= 'A' && name[1] <= 'Z'));

    if (shndx == SHN_UNDEF || shndx == (GElf_Word)-1 || sym->st_name == 0 ||
        (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
        return -1;
    return (sym->st_size > 0 ? 8 : 0) +
           (bind == STB_GLOBAL || bind == STB_WEAK ? 4 : 0) +
           (reserved ? 0 : 2) + (bind == STB_GLOBAL ? 1 : 0);
}

static void syms_free(struct em_symb_syms *t)
{
    if (t != NULL) {
        em_free(t->s);
        em_free(t->names);
        em_free(t->cut);
    }
    em_free(t);
}

/* Keeps the first (best) entry of each address in T->s, recording every
** alias's name in T->names, and copies the best names that carry a
** symbol version into T->cut without it. */
static int syms_group(struct em_symb_syms *t, size_t n)
{
    size_t k = 0, bytes = 0;
    char *p;

    for (size_t i = 0; i < n; i++) {
        t->names[i] = t->s[i].name;
        if (k > 0 && t->s[k - 1].lo == t->s[i].lo) {
            t->s[k - 1].n++;
            continue;
        }
        t->s[k] = t->s[i];
        t->s[k].first = (uint32_t)i;
        t->s[k].n = 1;
        if (t->s[k].name[t->s[k].len] != '\0')
            bytes += t->s[k].len + 1;
        k++;
    }
    t->n = k;
    if (bytes == 0)
        return EMBER_OK;
    if ((p = t->cut = em_malloc(bytes)) == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for %zu bytes "
                      "of symbol names", bytes);
    for (size_t i = 0; i < k; i++) {
        sym_ent *e = &t->s[i];
        if (e->name[e->len] == '\0')
            continue;
        memcpy(p, e->name, e->len);
        p[e->len] = '\0';
        e->name = p;
        p += e->len + 1;
    }
    return EMBER_OK;
}

/* Reads F's code symbols, sorted by address, one per address. */
static int syms_build(em_symb_file *f)
{
    struct em_symb_syms *t = em_calloc(1, sizeof *t);
    int total = dwfl_module_getsymtab(f->mod), rc;
    size_t n = 0;

    if (t == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for symbols");
    if (total > 0 &&
        ((t->s = em_malloc((size_t)total * sizeof *t->s)) == NULL ||
         (t->names = em_malloc((size_t)total * sizeof *t->names)) == NULL)) {
        syms_free(t);
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for %d "
                      "symbols of %s", total, f->path);
    }
    for (int i = 1; i < total; i++) {       /* entry 0 is the null symbol */
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr,
                                                   &shndx, NULL, NULL);
        int rank = name != NULL && *name != '\0'
                       ? sym_rank(&sym, shndx, name) : -1;
        if (rank >= 0)
            t->s[n++] = (sym_ent){ addr, sym.st_size, name, sym_len(name),
                                   0, 0, rank };
    }
    if (n > 1)                  /* qsort(NULL, 0) is undefined */
        qsort(t->s, n, sizeof *t->s, cmp_sym);
    if ((rc = syms_group(t, n)) != EMBER_OK) {
        syms_free(t);
        return rc;
    }
    f->syms = t;
    return EMBER_OK;
}

/* A sized symbol that holds ADDR (looking a few back, for nested ones),
** else the nearest symbol below it when that one has no size, as libdw
** does; NULL when none. */
static int sym_find(em_symb_file *f, uint64_t addr, const sym_ent **out)
{
    const struct em_symb_syms *t;
    size_t lo;
    int rc;

    *out = NULL;
    if (!dwfl_start(f))
        return EMBER_OK;
    if (f->syms == NULL && (rc = syms_build(f)) != EMBER_OK)
        return rc;
    t = f->syms;
    lo = em_symb_upper(t->s, t->n, sizeof *t->s, offsetof(sym_ent, lo), addr);
    for (size_t i = lo, k = 0; i > 0 && k < 8; i--, k++) {
        const sym_ent *e = &t->s[i - 1];
        if (e->size > 0 && addr - e->lo < e->size) {
            *out = e;
            return EMBER_OK;
        }
    }
    if (lo > 0 && t->s[lo - 1].size == 0)
        *out = &t->s[lo - 1];
    return EMBER_OK;
}

int em_symb_file_symbol(em_symb_file *f, uint64_t addr, const char **name)
{
    const sym_ent *e;
    int rc = sym_find(f, addr, &e);

    *name = e != NULL ? e->name : NULL;
    return rc;
}

/* True when NAME is one of E's aliases (versions aside). */
static bool sym_alias(const struct em_symb_syms *t, const sym_ent *e,
                      const char *name)
{
    size_t len = strlen(name);

    for (uint32_t i = e->first; i < e->first + e->n; i++)
        if (sym_len(t->names[i]) == len &&
            memcmp(t->names[i], name, len) == 0)
            return true;
    return false;
}

/* Frames being collected, their strings still libdw's. */
typedef struct frames {
    em_symb_frame f[EM_SYMB_MAX_INLINE];
    uint32_t n;
} frames;

static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *s = dwarf_formstring(dwarf_attr_integrate(die,
                                                          DW_AT_linkage_name,
                                                          &a));

    if (s == NULL)
        s = dwarf_formstring(dwarf_attr_integrate(die,
                                                  DW_AT_MIPS_linkage_name,
                                                  &a));
    return s != NULL ? s : dwarf_diename(die);
}

/* The file and line an inlined subroutine DIE was called from. */
static void call_site(Dwarf_Die *cudie, Dwarf_Die *die, const char **file,
                      int64_t *line)
{
    Dwarf_Attribute a;
    Dwarf_Word w;
    Dwarf_Files *files;
    size_t nfiles;

    *line = 0;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &a), &w) == 0)
        *line = (int64_t)w;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &a), &w) == 0 &&
        dwarf_getsrcfiles(cudie, &files, &nfiles) == 0 && w < nfiles) {
        const char *s = dwarf_filesrc(files, w, NULL, NULL);
        if (s != NULL)
            *file = s;
    }
}

/* Collects the DWARF frames at PC of the CU CUDIE, innermost first: each
** inlined subroutine, then the subprogram holding them. dwarf_getscopes
** continues past an inlined instance with its abstract origin's scopes,
** so the physical nesting is taken from the innermost scope's parents
** (dwarf_getscopes_die), as eu-addr2line -i does. */
static void dwarf_frames(Dwarf_Die *cudie, Dwarf_Addr pc, const char *file,
                         int64_t line, frames *out)
{
    Dwarf_Die *scopes = NULL, inner;
    int n = dwarf_getscopes(cudie, pc, &scopes);

    if (n <= 0) {
        free(scopes);
        return;
    }
    inner = scopes[0];
    free(scopes);               /* libdw's malloc */
    scopes = NULL;
    n = dwarf_getscopes_die(&inner, &scopes);
    for (int i = 0; i < n && out->n < EM_SYMB_MAX_INLINE; i++) {
        Dwarf_Die *d = &scopes[i];
        int tag = dwarf_tag(d);
        int decl = 0;
        const char *decl_file;

        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
            tag != DW_TAG_entry_point)
            continue;
        decl_file = dwarf_decl_file(d);
        dwarf_decl_line(d, &decl);
        out->f[out->n++] = (em_symb_frame){ die_name(d), NULL,
                                            decl_file != NULL ? decl_file
                                                              : file,
                                            line, decl };
        if (tag != DW_TAG_inlined_subroutine)
            break;
        call_site(cudie, d, &file, &line);
    }
    free(scopes);               /* libdw's malloc */
}

/* ---- subprograms by address, per CU ---------------------------------------
** dwarf_getscopes walks a CU's DIE tree from its root for each address,
** and Go puts a whole package in one CU: ~0.7 ms per address in a Go
** binary. The subprograms of a CU are read once, at its first address,
** into a table sorted by address; an address then walks only its
** subprogram's own subtree (sub_chain). */

typedef struct cu_subs {
    Dwarf_Off cu;               /* the CU DIE's offset: the key */
    die_ranges subs;
} cu_subs;

struct em_symb_subs {
    cu_subs *cus;               /* sorted by cu */
    size_t n, cap;
};

/* Adds the subprograms under PARENT with code, looking into the scopes
** that hold definitions (namespaces, classes, modules) but not into
** subprograms: nested ones are found from their parent by sub_chain. */
static int subs_scan(die_ranges *t, Dwarf_Die *parent, int depth)
{
    Dwarf_Die d;
    int rc = EMBER_OK, more;

    if (depth > 16 || dwarf_child(parent, &d) != 0)
        return EMBER_OK;
    for (more = 0; more == 0 && rc == EMBER_OK;
         more = dwarf_siblingof(&d, &d)) {
        int tag = dwarf_tag(&d);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_entry_point)
            rc = ranges_add(t, &d);
        else if (tag == DW_TAG_namespace || tag == DW_TAG_module ||
                 tag == DW_TAG_class_type ||
                 tag == DW_TAG_structure_type || tag == DW_TAG_union_type)
            rc = subs_scan(t, &d, depth + 1);
    }
    return rc;
}

static void subs_free(struct em_symb_subs *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        em_free(t->cus[i].subs.r);
    em_free(t->cus);
    em_free(t);
}

/* The subprogram table of CUDIE in F, read at its first use. */
static int subs_of(em_symb_file *f, Dwarf_Die *cudie, cu_subs **out)
{
    struct em_symb_subs *t = f->subs;
    Dwarf_Off key = dwarf_dieoffset(cudie);
    size_t lo = 0, hi;
    cu_subs c = { .cu = key }, *cus;
    int rc;

    if (t == NULL &&
        (t = f->subs = em_calloc(1, sizeof *t)) == NULL)
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for "
                      "subprograms");
    hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->cus[mid].cu < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n && t->cus[lo].cu == key) {
        *out = &t->cus[lo];
        return EMBER_OK;
    }
    if ((rc = subs_scan(&c.subs, cudie, 0)) != EMBER_OK) {
        em_free(c.subs.r);
        return rc;
    }
    if ((cus = em_grow(t->cus, &t->cap, t->n + 1, sizeof *t->cus)) == NULL) {
        em_free(c.subs.r);
        return em_err(EMBER_ENOMEM, "symbolize: out of memory for the "
                      "subprograms of %zu CUs", t->n + 1);
    }
    t->cus = cus;
    ranges_sort(&c.subs);
    memmove(&t->cus[lo + 1], &t->cus[lo], (t->n - lo) * sizeof *t->cus);
    t->cus[lo] = c;
    t->n++;
    *out = &t->cus[lo];
    return EMBER_OK;
}

/* The DIEs from subprogram SUB down to the innermost inlined subroutine
** holding PC, descending through lexical blocks: the physical nesting.
** Returns how many, outermost first, in CHAIN. */
static int sub_chain(Dwarf_Die *sub, Dwarf_Addr pc, Dwarf_Die *chain,
                     int max)
{
    Dwarf_Die cur = *sub, d;
    int n = 0;

    chain[n++] = cur;
    for (int depth = 0; depth < 64 && n < max; depth++) {
        bool found = false;
        int more;
        if (dwarf_child(&cur, &d) != 0)
            break;
        for (more = 0; more == 0 && !found; more = dwarf_siblingof(&d, &d)) {
            int tag = dwarf_tag(&d);
            if ((tag == DW_TAG_inlined_subroutine ||
                 tag == DW_TAG_lexical_block) && dwarf_haspc(&d, pc) > 0) {
                if (tag == DW_TAG_inlined_subroutine)
                    chain[n++] = d;
                cur = d;
                found = true;
            }
        }
        if (!found)
            break;
    }
    return n;
}

/* dwarf_frames through F's subprogram table; false when the table has no
** subprogram at PC (the caller then walks the CU with libdw). */
static int table_frames(em_symb_file *f, Dwarf_Die *cudie, Dwarf_Addr pc,
                        const char *file, int64_t line, frames *out,
                        bool *done)
{
    Dwarf_Die chain[EM_SYMB_MAX_INLINE], *sub;
    cu_subs *c = NULL;
    int n, rc;

    *done = false;
    if ((rc = subs_of(f, cudie, &c)) != EMBER_OK)
        return rc;
    if ((sub = ranges_find(&c->subs, pc)) == NULL)
        return EMBER_OK;
    n = sub_chain(sub, pc, chain, EM_SYMB_MAX_INLINE);
    for (int i = n - 1; i >= 0 && out->n < EM_SYMB_MAX_INLINE; i--) {
        Dwarf_Die *d = &chain[i];
        int decl = 0;
        const char *decl_file = dwarf_decl_file(d);
        dwarf_decl_line(d, &decl);
        out->f[out->n++] = (em_symb_frame){ die_name(d), NULL,
                                            decl_file != NULL ? decl_file
                                                              : file,
                                            line, decl };
        if (i > 0)
            call_site(cudie, d, &file, &line);
    }
    *done = true;
    return EMBER_OK;
}

/* ---- demangling --------------------------------------------------------
** libstdc++'s __cxa_demangle, looked up with dlopen so that neither
** libember nor its users link C++; without libstdc++ names stay mangled. */

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);
static cxa_demangle_fn cxa_demangle;
static pthread_once_t cxa_once = PTHREAD_ONCE_INIT;

static void cxa_load(void)
{
    void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    void *f = h != NULL ? dlsym(h, "__cxa_demangle") : NULL;

    /* A function pointer from dlsym's void *, as POSIX requires to work. */
    memcpy(&cxa_demangle, &f, sizeof f);
}

char *em_symb_demangle(const char *name)
{
    char *d, *out;
    int status = -1;

    if (name == NULL || strncmp(name, "_Z", 2) != 0)
        return NULL;
    pthread_once(&cxa_once, cxa_load);
    if (cxa_demangle == NULL ||
        (d = cxa_demangle(name, NULL, NULL, &status)) == NULL)
        return NULL;
    out = status == 0 ? em_strdup(d) : NULL;
    free(d);                    /* libstdc++'s malloc */
    return out;
}

/* Packs FR's frames and their strings into one allocation; a frame's name
** is demangled when it can be, its system name keeps the linkage name. */
static int frames_pack(const frames *fr, em_symb_res **out)
{
    size_t bytes = sizeof(em_symb_res) + fr->n * sizeof(em_symb_frame);
    char *dm[EM_SYMB_MAX_INLINE] = { NULL };
    em_symb_res *r = NULL;
    char *p;
    int rc = EMBER_OK;

    for (uint32_t i = 0; i < fr->n; i++) {
        dm[i] = em_symb_demangle(fr->f[i].name);
        bytes += strlen(fr->f[i].name) + strlen(fr->f[i].file) + 2 +
                 (dm[i] != NULL ? strlen(dm[i]) + 1 : 0);
    }
    if ((r = em_malloc(bytes)) == NULL) {
        rc = em_err(EMBER_ENOMEM, "symbolize: out of memory for frames");
        goto done;
    }
    r->nframes = fr->n;
    p = (char *)&r->frames[fr->n];
    for (uint32_t i = 0; i < fr->n; i++) {
        size_t ln = strlen(fr->f[i].name) + 1, lf = strlen(fr->f[i].file) + 1;
        r->frames[i] = fr->f[i];
        r->frames[i].system_name = memcpy(p, fr->f[i].name, ln);
        r->frames[i].file = memcpy(p + ln, fr->f[i].file, lf);
        p += ln + lf;
        r->frames[i].name = r->frames[i].system_name;
        if (dm[i] != NULL) {
            size_t ld = strlen(dm[i]) + 1;
            r->frames[i].name = memcpy(p, dm[i], ld);
            p += ld;
        }
    }
    *out = r;
done:
    for (uint32_t i = 0; i < fr->n; i++)
        em_free(dm[i]);
    return rc;
}

/* The CU holding module address VADDR of F, through libdw or F's own
** table; NULL in *CUDIE when none does. */
static int cu_at(em_symb_file *f, uint64_t vaddr, Dwarf_Die *copy,
                 Dwarf_Die **cudie, Dwarf_Addr *bias)
{
    bool found;
    int rc;

    if ((*cudie = dwfl_module_addrdie(f->mod, vaddr, bias)) != NULL)
        return EMBER_OK;
    if ((rc = cus_find(f, vaddr, copy, bias, &found)) == EMBER_OK && found)
        *cudie = copy;
    return rc;
}

/* The source file and line of PC in CUDIE, through its line table. */
static void cu_line(Dwarf_Die *cudie, Dwarf_Addr pc, const char **file,
                    int *line)
{
    Dwarf_Line *l = dwarf_getsrc_die(cudie, pc);
    const char *s;

    if (l == NULL)
        return;
    if ((s = dwarf_linesrc(l, NULL, NULL)) != NULL)
        *file = s;
    dwarf_lineno(l, line);
}

int em_symb_file_resolve(em_symb_file *f, uint64_t vaddr, em_symb_res **out)
{
    frames fr = { .n = 0 };
    const char *sym, *file = "";
    const sym_ent *e;
    int line = 0, rc;
    Dwarf_Die *cudie, copy;
    Dwarf_Addr bias = 0;

    *out = NULL;
    if (!dwfl_start(f))
        return EMBER_OK;
    if ((rc = sym_find(f, vaddr, &e)) != EMBER_OK)
        return rc;
    sym = e != NULL ? e->name : NULL;
    if ((rc = cu_at(f, vaddr, &copy, &cudie, &bias)) != EMBER_OK)
        return rc;
    if (cudie != NULL) {
        bool done = false;
        cu_line(cudie, vaddr - bias, &file, &line);
        if (!f->scan_scopes &&
            (rc = table_frames(f, cudie, vaddr - bias, file, line, &fr,
                               &done)) != EMBER_OK)
            return rc;
        if (!done)
            dwarf_frames(cudie, vaddr - bias, file, line, &fr);
    }
    /* No subprogram in DWARF (or no DWARF): the symbol table's name. */
    if (fr.n == 0 || fr.f[fr.n - 1].name == NULL) {
        if (sym == NULL && fr.n == 0)
            return EMBER_OK;
        if (fr.n == 0)
            fr.f[fr.n++] = (em_symb_frame){ sym, NULL, file, line, 0 };
        else
            fr.f[fr.n - 1].name = sym != NULL ? sym : "";
    } else if (e != NULL && fr.f[fr.n - 1].name != sym &&
               sym_alias(f->syms, e, fr.f[fr.n - 1].name)) {
        /* DWARF names the function by one of its aliases (glibc's say
        ** __GI___libc_read): the best one instead. Other names stay,
        ** such as a function's name where its .cold part's symbol is
        ** "f.cold". */
        fr.f[fr.n - 1].name = sym;
    }
    for (uint32_t i = 0; i < fr.n; i++)
        if (fr.f[i].name == NULL)
            fr.f[i].name = "";
    return frames_pack(&fr, out);
}
