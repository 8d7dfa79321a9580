/*
** tests/unit/test_symbolize.c: the symbolizer (ingest/symbolize.h) on real
** processes: this test's own functions through /proc/self, a child running
** tests/fixtures/symb_target.c (built here with clang -O2 -g
** -fno-omit-frame-pointer) resolved to functions, files, lines and an
** inline frame and checked against nm, readelf and addr2line; a child
** whose binary is deleted while it runs; a child that exits before its
** stacks are symbolized; kernel addresses through kallsyms; unknown
** addresses kept; the bounded cache; allocation failures.
**
** Run from the repository root (as make test does): the fixture's source
** is found there. Tests that need clang, the fixture or readable kernel
** addresses skip with a reason when they are missing.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest/symbolize.h"
#include "ingest/symb_int.h"
#include "common/testutil.h"

#define FIXTURE_SRC "tests/fixtures/symb_target.c"
#define CLANG "clang -O2 -g -fno-omit-frame-pointer"

static char *tmp;                       /* the group's scratch directory */
static char fixture[1024];              /* built fixture, "" when not */
static char fixture_bid[256];           /* what readelf -n says */

/* ---- helpers ------------------------------------------------------------- */

static const ember_function *loc_fn(const em_pset *set, uint32_t loc,
                                    size_t k)
{
    const em_pset_loc *l = &set->locs[loc];

    return k < l->nlines ? &set->functions[set->lines[l->first + k].function]
                         : NULL;
}

static int64_t loc_line(const em_pset *set, uint32_t loc, size_t k)
{
    return set->lines[set->locs[loc].first + k].line;
}

/* The outermost (non-inlined) function of LOC, or NULL. */
static const ember_function *loc_outer(const em_pset *set, uint32_t loc)
{
    size_t n = set->locs[loc].nlines;

    return n > 0 ? loc_fn(set, loc, n - 1) : NULL;
}

static const ember_mapping *loc_map(const em_pset *set, uint32_t loc)
{
    uint32_t m = set->locs[loc].mapping;

    return m > 0 ? &set->mappings[m - 1] : NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The line of the fixture's source holding the marker LINE:NAME. */
static int64_t source_line(const char *name)
{
    char marker[64], line[512];
    FILE *f = fopen(FIXTURE_SRC, "r");
    int64_t n = 0, found = 0;

    assert_non_null(f);
    snprintf(marker, sizeof marker, "/* LINE:%s */", name);
    while (found == 0 && fgets(line, sizeof line, f) != NULL) {
        n++;
        if (strstr(line, marker) != NULL)
            found = n;
    }
    fclose(f);
    assert_true(found > 0);
    return found;
}

/* The value (and size) of symbol SYM in BIN, from nm. */
static uint64_t nm_addr(const char *bin, const char *sym, uint64_t *size)
{
    char cmd[1200], line[512], name[256], type;
    unsigned long long v, sz;
    uint64_t found = 0;
    FILE *p;

    snprintf(cmd, sizeof cmd, "nm -S --defined-only %s", bin);
    p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof line, p) != NULL)
        if (sscanf(line, "%llx %llx %c %255s", &v, &sz, &type, name) == 4 &&
            strcmp(name, sym) == 0) {
            found = v;
            if (size != NULL)
                *size = sz;
        }
    pclose(p);
    assert_true(found != 0);
    return found;
}

/* The GNU build id `readelf -n` prints for BIN, "" when none. */
static void readelf_build_id(const char *bin, char *out, size_t n)
{
    char cmd[1200], line[512];
    FILE *p;

    snprintf(cmd, sizeof cmd, "readelf -n %s 2>/dev/null", bin);
    out[0] = '\0';
    if ((p = popen(cmd, "r")) == NULL)
        return;
    while (fgets(line, sizeof line, p) != NULL) {
        char *b = strstr(line, "Build ID: ");
        if (b != NULL && sscanf(b + 10, "%255s", out) == 1)
            break;
    }
    while (fgets(line, sizeof line, p) != NULL)
        ;
    pclose(p);
    (void)n;
}

/* Starts BIN with its stdout on a pipe and waits for its "ready". */
static pid_t spawn(const char *bin)
{
    int fds[2];
    char buf[16] = "";
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Dies with the test, even when an assertion skips reap(). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if ((fds[0] = open("/dev/null", O_WRONLY)) >= 0)
            dup2(fds[0], 2);
        execl(bin, bin, "120", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    assert_true(read(fds[0], buf, sizeof buf - 1) > 0);
    close(fds[0]);
    assert_string_equal(buf, "ready\n");
    return pid;
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Where PID mapped the start of PATH (the mapping at file offset 0). */
static uint64_t load_base(pid_t pid, const char *path)
{
    char name[64], line[1200];
    uint64_t base = 0;
    FILE *f;

    snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
    f = fopen(name, "r");
    assert_non_null(f);
    while (base == 0 && fgets(line, sizeof line, f) != NULL) {
        em_symb_maps_line ml;
        if (em_symb_parse_maps_line(line, &ml) && ml.pgoff == 0 &&
            strncmp(ml.path, path, strlen(path)) == 0)
            base = ml.start;
    }
    fclose(f);
    assert_true(base != 0);
    return base;
}

/* The runtime address of ELF address VADDR of an executable loaded at
** BASE: position-independent ones are linked at 0. */
static uint64_t runtime(uint64_t base, uint64_t vaddr)
{
    return vaddr >= base ? vaddr : base + vaddr;
}

static void need_fixture(void)
{
    if (fixture[0] == '\0') {
        print_message("skipped: no clang or no %s (run from the repository "
                      "root)\n", FIXTURE_SRC);
        skip();
    }
}

static int group_setup(void **state)
{
    char cmd[4096];

    (void)state;
    tmp = tu_tmpdir("symb");
    if (access(FIXTURE_SRC, R_OK) != 0)
        return 0;
    snprintf(fixture, sizeof fixture, "%s/symb_target", tmp);
    snprintf(cmd, sizeof cmd, CLANG " -o %s " FIXTURE_SRC, fixture);
    if (system(cmd) != 0) {
        fixture[0] = '\0';
        return 0;
    }
    readelf_build_id(fixture, fixture_bid, sizeof fixture_bid);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmdir(tmp);
    return 0;
}

/* ---- pure parsing -------------------------------------------------------- */

static void test_maps_line(void **state)
{
    char l1[] = "55d4c5a00000-55d4c5a02000 r-xp 00002000 fe:01 1234567"
                "                    /usr/bin/my prog (deleted)\n";
    char l2[] = "7ffd1c1e5000-7ffd1c1e7000 r-xp 00000000 00:00 0"
                "                          [vdso]\n";
    char l3[] = "7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n";
    char bad1[] = "zz-10 r-xp 0 00:00 0\n", bad2[] = "10-20 r-x\n";
    char bad3[] = "20-10 r-xp 00000000 00:00 0\n";
    em_symb_maps_line ml;

    (void)state;
    assert_true(em_symb_parse_maps_line(l1, &ml));
    assert_true(ml.start == 0x55d4c5a00000 && ml.end == 0x55d4c5a02000);
    assert_true(ml.exec && ml.pgoff == 0x2000 && ml.ino == 1234567);
    assert_true(ml.dev == makedev(0xfe, 1));
    assert_string_equal(ml.path, "/usr/bin/my prog (deleted)");
    assert_true(em_symb_parse_maps_line(l2, &ml));
    assert_string_equal(ml.path, "[vdso]");
    assert_true(em_symb_parse_maps_line(l3, &ml));
    assert_false(ml.exec);
    assert_string_equal(ml.path, "");
    assert_false(em_symb_parse_maps_line(bad1, &ml));
    assert_false(em_symb_parse_maps_line(bad2, &ml));
    assert_false(em_symb_parse_maps_line(bad3, &ml));
}

static void test_container_id(void **state)
{
    static const char id[] =
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    static const char *const yes[][2] = {
        { "/docker/", "" },
        { "/system.slice/docker-", ".scope" },
        { "/kubepods/burstable/pod1b2c3d4e-0000-1111-2222-333344445555/",
          "" },
        { "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-"
          "pod1b2c3d4e_0000.slice/cri-containerd-", ".scope" },
        { "/kubepods.slice/kubepods-pod1.slice/crio-", ".scope" },
        { "/machine.slice/libpod-", ".scope/container" },
        { "/system.slice/containerd.service/kubepods-burstable-pod1.slice:"
          "cri-containerd:", "" },
    };
    static const char *const no[] = {
        "/", "/user.slice/user-0.slice/session-1.scope",
        "/process_api/ecd284127beaf073052703448da66e27",
        ("/docker/0123456789abcdef0123456789abcdef0123456789abcdef01234567"
         "89abcdef0"),
        "/x/g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    };
    char path[512], out[65];

    (void)state;
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        snprintf(path, sizeof path, "%s%s%s", yes[i][0], id, yes[i][1]);
        assert_true(em_symb_container_id(path, out));
        assert_string_equal(out, id);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        assert_false(em_symb_container_id(no[i], out));
    assert_false(em_symb_container_id(NULL, out));
}

/* ---- this process ---------------------------------------------------------- */

static const int64_t self_target_line = __LINE__ + 1;
static __attribute__((noinline)) int self_target(int x)
{
    volatile int y = x;

    return y * 3 + 1;
}

static void test_self(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_proc_info pi;
    em_symb_stats st;
    Dl_info dl;
    char exe[1024], bid[256];
    uint64_t fn = (uint64_t)(uintptr_t)&self_target;
    uint64_t libc = (uint64_t)(uintptr_t)&getpid;
    uint64_t addrs[3] = { fn, fn + 1, libc + 1 };
    uint32_t locs[3];
    const ember_function *f;
    ssize_t n;

    (void)state;
    assert_int_equal(self_target(1), 4);
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(), addrs, 3,
                                       locs), EMBER_OK);
    for (int i = 0; i < 2; i++) {
        f = loc_outer(&set, locs[i]);
        assert_non_null(f);
        assert_string_equal(f->name, "self_target");
        assert_true(ends_with(f->file, "test_symbolize.c"));
        assert_int_equal(f->start_line, self_target_line);
        assert_non_null(loc_map(&set, locs[i]));
    }
    /* The leaf is looked up at its address, the return address at -1. */
    assert_int_equal(set.locs[locs[0]].address + 1,
                     set.locs[locs[1]].address);
    /* libc: the name dladdr gives, or an alias at the same address (the
    ** DWARF of libc6-dbg says __getpid; a local alias cannot be dlsym'd). */
    f = loc_outer(&set, locs[2]);
    assert_non_null(f);
    assert_true(dladdr((void *)(uintptr_t)libc, &dl) != 0);
    assert_true(strcmp(f->name, dl.dli_sname) == 0 ||
                dlsym(RTLD_DEFAULT, f->name) == (void *)(uintptr_t)libc ||
                strstr(f->name, "getpid") != NULL);
    /* What the capture says about this process. */
    assert_int_equal(em_symbolizer_proc(s, (uint32_t)getpid(), &pi),
                     EMBER_OK);
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    assert_string_equal(pi.exe, exe);
    readelf_build_id(exe, bid, sizeof bid);
    if (bid[0] != '\0')
        assert_string_equal(pi.build_id, bid);
    assert_non_null(pi.build_id);
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.processes, 1);
    assert_true(st.files >= 2);
    assert_int_equal(st.misses, 2);     /* fn and fn + 1 - 1 are one */
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.unresolved, 0);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* The [vdso] is symbolized from our own copy of it. */
static void test_vdso(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    uint64_t base = getauxval(AT_SYSINFO_EHDR), a;
    uint32_t loc;
    int named = 0;

    (void)state;
    if (base == 0)
        skip();
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    for (a = base; a < base + 8192; a += 16) {
        const ember_function *f;
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(), &a,
                                           1, &loc), EMBER_OK);
        if (loc_map(&set, loc) == NULL)
            break;
        assert_string_equal(loc_map(&set, loc)->file, "[vdso]");
        if ((f = loc_outer(&set, loc)) != NULL &&
            (strstr(f->name, "time") != NULL ||
             strstr(f->name, "getcpu") != NULL))
            named++;
    }
    assert_true(named > 0);
    assert_true(loc_map(&set, loc) == NULL || a >= base + 8192);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* ---- the fixture in a child ---------------------------------------------- */

static void test_fixture_chain(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_proc_info pi;
    uint64_t hot, mid, mainf, size, base, addrs[3];
    uint32_t locs[3];
    const ember_function *f;
    const ember_mapping *m;
    int64_t line;
    pid_t pid;

    (void)state;
    need_fixture();
    pid = spawn(fixture);
    base = load_base(pid, fixture);
    hot = nm_addr(fixture, "hot_leaf", NULL);
    mid = nm_addr(fixture, "middle", &size);
    mid += size / 2;
    mainf = nm_addr(fixture, "main", &size);
    mainf += size / 2;
    addrs[0] = runtime(base, hot + 4);
    addrs[1] = runtime(base, mid);
    addrs[2] = runtime(base, mainf);
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    assert_int_equal(em_symbolizer_track(s, (uint32_t)pid), EMBER_OK);
    assert_int_equal(em_symbolize_user(s, &set, (uint32_t)pid, addrs, 3,
                                       locs), EMBER_OK);
    f = loc_outer(&set, locs[0]);
    assert_non_null(f);
    assert_string_equal(f->name, "hot_leaf");
    assert_string_equal(f->system_name, "hot_leaf");
    assert_true(ends_with(f->file, FIXTURE_SRC));
    assert_int_equal(f->start_line, source_line("hot_leaf"));
    line = loc_line(&set, locs[0], set.locs[locs[0]].nlines - 1);
    assert_true(line >= f->start_line && line <= f->start_line + 8);
    assert_int_equal(set.locs[locs[0]].address, hot + 4);
    m = loc_map(&set, locs[0]);
    assert_non_null(m);
    assert_string_equal(m->file, fixture);
    assert_string_equal(m->build_id, fixture_bid);
    assert_true(m->start <= hot && hot < m->limit);
    assert_string_equal(loc_outer(&set, locs[1])->name, "middle");
    assert_int_equal(loc_outer(&set, locs[1])->start_line,
                     source_line("middle"));
    assert_string_equal(loc_outer(&set, locs[2])->name, "main");
    assert_int_equal(em_symbolizer_proc(s, (uint32_t)pid, &pi), EMBER_OK);
    assert_string_equal(pi.exe, fixture);
    assert_string_equal(pi.build_id, fixture_bid);
    assert_non_null(pi.cgroup);
    reap(pid);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* Runs llvm-symbolizer on ADDR of BIN: the frames' function names and
** lines, innermost first, into NAMES and LINES (N at most); how many, or
** -1 when it cannot run. (binutils' addr2line 2.40 misses clang's DWARF 5
** inline frames.) */
static int symbolizer_frames(const char *bin, uint64_t addr,
                             char names[][64], int64_t *lines, int n)
{
    char cmd[1200], line[512];
    int k = 0, i = 0;
    FILE *p;

    snprintf(cmd, sizeof cmd, "llvm-symbolizer --obj=%s 0x%llx 2>/dev/null",
             bin, (unsigned long long)addr);
    if ((p = popen(cmd, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, p) != NULL) {
        char *c;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0')
            continue;
        if (i++ % 2 == 0 && k < n)
            snprintf(names[k], 64, "%.63s", line);
        else if (k < n && (c = strchr(line, ':')) != NULL)
            lines[k++] = strtoll(c + 1, NULL, 10);
    }
    return pclose(p) == 0 ? k : -1;
}

static void test_fixture_inline(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    uint64_t hot, size, base, a, found = 0;
    uint32_t loc;
    char names[4][64];
    int64_t lines[4];
    int n;
    pid_t pid;

    (void)state;
    need_fixture();
    pid = spawn(fixture);
    base = load_base(pid, fixture);
    hot = nm_addr(fixture, "hot_leaf", &size);
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    for (a = hot; a < hot + size && found == 0; a++) {
        uint64_t r = runtime(base, a);
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)pid, &r, 1,
                                           &loc), EMBER_OK);
        if (set.locs[loc].nlines >= 2)
            found = a;
    }
    assert_true(found != 0);
    assert_int_equal(set.locs[loc].nlines, 2);
    assert_string_equal(loc_fn(&set, loc, 0)->name, "mix_inline");
    assert_int_equal(loc_fn(&set, loc, 0)->start_line,
                     source_line("mix_inline"));
    assert_string_equal(loc_fn(&set, loc, 1)->name, "hot_leaf");
    assert_int_equal(loc_line(&set, loc, 1), source_line("call_mix"));
    /* LLVM's symbolizer agrees, lines included. */
    n = symbolizer_frames(fixture, found, names, lines, 4);
    if (n >= 0) {
        assert_int_equal(n, 2);
        for (int i = 0; i < 2; i++) {
            assert_string_equal(names[i], loc_fn(&set, loc, (size_t)i)->name);
            assert_int_equal(lines[i], loc_line(&set, loc, (size_t)i));
        }
    }
    reap(pid);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

static void test_fixture_deleted(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_proc_info pi;
    char copy[1200], cmd[2600], link[64], exe[1200];
    uint64_t hot, base, a;
    uint32_t loc;
    ssize_t n;
    pid_t pid;

    (void)state;
    need_fixture();
    snprintf(copy, sizeof copy, "%s/deleted_target", tmp);
    snprintf(cmd, sizeof cmd, "cp %s %s", fixture, copy);
    assert_int_equal(system(cmd), 0);
    pid = spawn(copy);
    base = load_base(pid, copy);
    hot = nm_addr(copy, "hot_leaf", NULL);
    assert_int_equal(unlink(copy), 0);
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    n = readlink(link, exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    assert_true(ends_with(exe, " (deleted)"));
    a = runtime(base, hot + 4);
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    assert_int_equal(em_symbolize_user(s, &set, (uint32_t)pid, &a, 1, &loc),
                     EMBER_OK);
    assert_non_null(loc_outer(&set, loc));
    assert_string_equal(loc_outer(&set, loc)->name, "hot_leaf");
    assert_string_equal(loc_map(&set, loc)->file, copy);
    assert_string_equal(loc_map(&set, loc)->build_id, fixture_bid);
    assert_int_equal(em_symbolizer_proc(s, (uint32_t)pid, &pi), EMBER_OK);
    assert_string_equal(pi.exe, copy);
    assert_string_equal(pi.build_id, fixture_bid);
    reap(pid);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* Symbolizes ADDR of PID into a fresh set: the outer name, or NULL when
** the frame stayed an address (then its mapping must be the unknown one
** when UNKNOWN). */
static const char *one_name(em_symbolizer *s, em_pset *set, pid_t pid,
                            uint64_t addr)
{
    uint32_t loc;
    const ember_function *f;

    em_pset_free(set);
    assert_int_equal(em_symbolize_user(s, set, (uint32_t)pid, &addr, 1,
                                       &loc), EMBER_OK);
    f = loc_outer(set, loc);
    return f != NULL ? f->name : NULL;
}

static void test_fixture_exited(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_symb_stats st;
    uint64_t hot, base, a;
    pid_t pid;

    (void)state;
    need_fixture();
    pid = spawn(fixture);
    base = load_base(pid, fixture);
    hot = nm_addr(fixture, "hot_leaf", NULL);
    a = runtime(base, hot + 4);
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    assert_int_equal(em_symbolizer_track(s, (uint32_t)pid), EMBER_OK);
    reap(pid);
    assert_int_equal(em_symbolizer_track(s, (uint32_t)pid),
                     EMBER_ENOTFOUND);
    em_symbolizer_exited(s, (uint32_t)pid);
    assert_string_equal(one_name(s, &set, pid, a), "hot_leaf");
    em_symbolizer_sweep(s);     /* the window it exited in is drained */
    assert_string_equal(one_name(s, &set, pid, a), "hot_leaf");
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.processes, 1);
    em_symbolizer_sweep(s);     /* gone now: a bare address */
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.processes, 0);
    assert_true(st.files > 0);  /* closed at the next sweep */
    assert_null(one_name(s, &set, pid, a));
    assert_int_equal(set.locs[0].mapping, 0);
    assert_int_equal(set.locs[0].address, a);
    em_symbolizer_sweep(s);
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.files, 0);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* Two children of the same binary share its file and the cache. */
static void test_fixture_shared(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_symb_stats st;
    uint64_t hot, a[2];
    uint32_t loc[2];
    pid_t pid[2];

    (void)state;
    need_fixture();
    hot = nm_addr(fixture, "hot_leaf", NULL);
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    for (int i = 0; i < 2; i++) {
        pid[i] = spawn(fixture);
        a[i] = runtime(load_base(pid[i], fixture), hot + 8);
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)pid[i], &a[i],
                                           1, &loc[i]), EMBER_OK);
    }
    /* One mapping, one location (ELF addresses), one miss. */
    assert_int_equal(loc[0], loc[1]);
    assert_int_equal(set.nmappings, 1);
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.processes, 2);
    for (int i = 0; i < 2; i++)
        reap(pid[i]);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* A file without a GNU build id gets a file identity. */
static void test_file_identity(void **state)
{
    char bin[1200], cmd[2600], *id2 = NULL;
    em_symb_file *f = NULL;
    int fd;

    (void)state;
    need_fixture();
    snprintf(bin, sizeof bin, "%s/nobid", tmp);
    snprintf(cmd, sizeof cmd, CLANG " -Wl,--build-id=none -o %s "
             FIXTURE_SRC, bin);
    assert_int_equal(system(cmd), 0);
    fd = open(bin, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(em_symb_file_open(fd, bin, 1, 2, &f), EMBER_OK);
    assert_int_equal(strncmp(f->build_id, "fid:", 4), 0);
    assert_int_equal(strlen(f->build_id), 36);
    assert_int_equal(em_symb_file_identity(f->fd, &id2), EMBER_OK);
    assert_string_equal(f->build_id, id2);
    em_free(id2);
    em_symb_file_close(f);
    /* The fixture has a GNU build id: readelf's. */
    fd = open(fixture, O_RDONLY);
    assert_int_equal(em_symb_file_open(fd, fixture, 1, 2, &f), EMBER_OK);
    assert_string_equal(f->build_id, fixture_bid);
    em_symb_file_close(f);
    /* Not ELF: refused, the descriptor closed. */
    fd = open(FIXTURE_SRC, O_RDONLY);
    assert_int_equal(em_symb_file_open(fd, FIXTURE_SRC, 1, 2, &f),
                     EMBER_EINVAL);
    assert_null(f);
}

/* Stripped, with its DWARF in a separate file named by .gnu_debuglink:
** lines and inline frames still come back. */
static void test_debuglink(void **state)
{
    char bin[1200], cmd[4000];
    em_symb_file *f = NULL;
    em_symb_res *r = NULL;
    uint64_t hot, size, a;
    bool inl = false;
    int fd;

    (void)state;
    need_fixture();
    snprintf(bin, sizeof bin, "%s/stripped", tmp);
    snprintf(cmd, sizeof cmd, "cp %s %s && cd %s && "
             "objcopy --only-keep-debug stripped stripped.debug && "
             "strip -g stripped && "
             "objcopy --add-gnu-debuglink=stripped.debug stripped",
             fixture, bin, tmp);
    if (system(cmd) != 0) {
        print_message("skipped: no objcopy or strip\n");
        skip();
    }
    hot = nm_addr(bin, "hot_leaf", &size);
    fd = open(bin, O_RDONLY);
    assert_int_equal(em_symb_file_open(fd, bin, 1, 2, &f), EMBER_OK);
    assert_string_equal(f->build_id, fixture_bid);
    assert_int_equal(em_symb_file_resolve(f, hot + 4, &r), EMBER_OK);
    assert_non_null(r);
    assert_string_equal(r->frames[r->nframes - 1].name, "hot_leaf");
    assert_true(ends_with(r->frames[r->nframes - 1].file, FIXTURE_SRC));
    assert_int_equal(r->frames[r->nframes - 1].start_line,
                     source_line("hot_leaf"));
    em_free(r);
    for (a = hot; a < hot + size && !inl; a++) {
        assert_int_equal(em_symb_file_resolve(f, a, &r), EMBER_OK);
        inl = r != NULL && r->nframes == 2 &&
              strcmp(r->frames[0].name, "mix_inline") == 0;
        em_free(r);
    }
    assert_true(inl);
    em_symb_file_close(f);
}

/* ---- the symbol table index ------------------------------------------- */

/* True when a function symbol named NAME starts at ADDR in MOD (a
** .symtab name may carry a version, "fopen@@GLIBC_2.2.5", that the index
** cuts off; a name may be at several addresses: local ones, versions). */
static bool dwfl_sym_at(Dwfl_Module *mod, const char *name, GElf_Addr at)
{
    int n = dwfl_module_getsymtab(mod);
    size_t len = strlen(name);

    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *s = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL,
                                                NULL, NULL);
        if (s != NULL && addr == at && strncmp(s, name, len) == 0 &&
            (s[len] == '\0' || s[len] == '@') && sym.st_shndx != SHN_UNDEF)
            return true;
    }
    return false;
}

/* libc's functions are named as their callers know them (issue 12),
** though glibc gives each several aliases at one address: read is also
** __read, __libc_read and the DWARF of libc6-dbg's __GI___libc_read;
** getpid is a weak getpid and a global __getpid; write has only weak and
** local names. Through the shipped path (this process, /proc/self/maps,
** the symbol index and DWARF when libc6-dbg is installed), at an address
** inside each function found by dlsym. */
static void test_libc_aliases(void **state)
{
    static const char *const names[] = {
        "read", "write", "malloc", "free", "calloc", "realloc", "close",
        "open", "getpid", "nanosleep", "fopen", "fclose", "printf", "qsort",
        "pthread_mutex_lock",
    };
    em_symbolizer *s = NULL;
    em_pset set = { 0 };

    (void)state;
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *p = dlsym(RTLD_DEFAULT, names[i]);
        uint64_t a = (uint64_t)(uintptr_t)p + 1;
        const ember_function *f;
        uint32_t loc;
        assert_non_null(p);
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(), &a,
                                           1, &loc), EMBER_OK);
        f = loc_outer(&set, loc);
        assert_non_null(f);
        if (strcmp(f->name, names[i]) != 0)
            fail_msg("%s at %p is named %s", names[i], p, f->name);
    }
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* The sorted index answers as libdw's dwfl_module_addrinfo does, over
** libc's function symbols (no DWARF; its .dynsym or .symtab): the same
** name, or an alias starting at the same address. Addresses at each
** function's start, middle and last byte. */
static void test_symtab_index(void **state)
{
    static const Dwfl_Callbacks cb = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
    };
    Dl_info dl;
    em_symb_file *f = NULL;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    int fd, n, checked = 0, aliases = 0;

    (void)state;
    assert_true(dladdr((void *)(uintptr_t)&printf, &dl) != 0);
    fd = open(dl.dli_fname, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(em_symb_file_open(fd, dl.dli_fname, 1, 2, &f),
                     EMBER_OK);
    dwfl = dwfl_begin(&cb);
    assert_non_null(dwfl);
    dwfl_report_begin(dwfl);
    mod = dwfl_report_elf(dwfl, "libc", dl.dli_fname, -1, 0, true);
    assert_non_null(mod);
    assert_int_equal(dwfl_report_end(dwfl, NULL, NULL), 0);
    n = dwfl_module_getsymtab(mod);
    assert_true(n > 100);
    for (int i = 1; i < n && checked < 3000; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *s = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL,
                                                NULL, NULL);
        GElf_Addr probe[3];
        if (s == NULL || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
            sym.st_size == 0 || sym.st_shndx == SHN_UNDEF)
            continue;
        probe[0] = addr;
        probe[1] = addr + sym.st_size / 2;
        probe[2] = addr + sym.st_size - 1;
        for (int k = 0; k < 3; k++, checked++) {
            GElf_Off off = 0;
            GElf_Sym ws;
            const char *want = dwfl_module_addrinfo(mod, probe[k], &off, &ws,
                                                    NULL, NULL, NULL), *got;
            assert_int_equal(em_symb_file_symbol(f, probe[k], &got),
                             EMBER_OK);
            assert_non_null(want);
            assert_non_null(got);
            if (strcmp(want, got) != 0) {
                if (!dwfl_sym_at(mod, got, probe[k] - off))
                    fail_msg("%#llx: libdw says %s at %#llx, the index %s",
                             (unsigned long long)probe[k], want,
                             (unsigned long long)(probe[k] - off), got);
                aliases++;
            }
        }
    }
    print_message("%d addresses of %s, %d named by an alias\n", checked,
                  dl.dli_fname, aliases);
    assert_true(checked > 300);
    dwfl_end(dwfl);
    em_symb_file_close(f);
}

static bool same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* Resolves ~PROBES addresses across BIN's code through the per-CU
** subprogram tables and through libdw's dwarf_getscopes walk
** (scan_scopes): the frames must be the same, names, files and lines. */
static int tables_agree(const char *bin, int probes)
{
    em_symb_file *f = NULL, *g = NULL;
    int fd = open(bin, O_RDONLY), resolved = 0;

    assert_true(fd >= 0);
    assert_int_equal(em_symb_file_open(fd, bin, 1, 2, &f), EMBER_OK);
    assert_true((fd = open(bin, O_RDONLY)) >= 0);
    assert_int_equal(em_symb_file_open(fd, bin, 1, 3, &g), EMBER_OK);
    g->scan_scopes = true;
    for (size_t i = 0; i < f->nsegs; i++) {
        const em_symb_seg *sg = &f->segs[i];
        uint64_t step = sg->filesz / (uint64_t)probes + 1;
        if (!sg->exec)
            continue;
        for (uint64_t a = sg->vaddr; a < sg->vaddr + sg->filesz; a += step) {
            em_symb_res *x = NULL, *y = NULL;
            assert_int_equal(em_symb_file_resolve(f, a, &x), EMBER_OK);
            assert_int_equal(em_symb_file_resolve(g, a, &y), EMBER_OK);
            assert_int_equal(x == NULL, y == NULL);
            if (x != NULL) {
                assert_int_equal(x->nframes, y->nframes);
                for (uint32_t k = 0; k < x->nframes; k++) {
                    const em_symb_frame *p = &x->frames[k], *q = &y->frames[k];
                    if (!same_str(p->name, q->name) ||
                        !same_str(p->file, q->file) || p->line != q->line ||
                        p->start_line != q->start_line)
                        fail_msg("%s %#llx frame %u: %s %s:%lld (%lld) by "
                                 "table, %s %s:%lld (%lld) by libdw", bin,
                                 (unsigned long long)a, k, p->name, p->file,
                                 (long long)p->line, (long long)p->start_line,
                                 q->name, q->file, (long long)q->line,
                                 (long long)q->start_line);
                }
                resolved += x->nframes > 0;
            }
            em_free(x);
            em_free(y);
        }
    }
    em_symb_file_close(g);
    em_symb_file_close(f);
    return resolved;
}

/* The subprogram tables give what dwarf_getscopes gives, on the clang
** fixture (inlines, no aranges) and on this gcc -O2 -g test binary. */
static void test_subprogram_table(void **state)
{
    char self[1024];
    ssize_t n;

    (void)state;
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    assert_true(tables_agree(self, 3000) > 1000);
    need_fixture();
    assert_true(tables_agree(fixture, 500) > 10);
}

/* ---- C++ names ------------------------------------------------------------ */

/* C++ functions resolve to demangled names, with the linkage name kept as
** the system name; C names and garbage are left alone. */
static void test_demangle(void **state)
{
    char bin[1200], cmd[2600], *d;
    em_symb_file *f = NULL;
    em_symb_res *r = NULL;
    uint64_t hot, area;
    int fd;

    (void)state;
    if ((d = em_symb_demangle("_ZN6shapes3hotEi")) == NULL) {
        print_message("skipped: no libstdc++ to demangle with\n");
        skip();
    }
    assert_string_equal(d, "shapes::hot(int)");
    em_free(d);
    assert_null(em_symb_demangle("hot_leaf"));
    assert_null(em_symb_demangle("_Z"));
    assert_null(em_symb_demangle("_Zgarbage!"));
    assert_null(em_symb_demangle(NULL));
    snprintf(bin, sizeof bin, "%s/cxx", tmp);
    snprintf(cmd, sizeof cmd, "clang++ -O1 -g -fno-omit-frame-pointer -o %s "
             "tests/fixtures/cxx_target.cc 2> /dev/null", bin);
    if (system(cmd) != 0) {
        print_message("skipped: clang++ cannot build the C++ fixture\n");
        skip();
    }
    hot = nm_addr(bin, "_ZN6shapes3hotEi", NULL);
    area = nm_addr(bin, "_ZNK6shapes3boxIlE4areaEi", NULL);
    fd = open(bin, O_RDONLY);
    assert_int_equal(em_symb_file_open(fd, bin, 1, 2, &f), EMBER_OK);
    assert_int_equal(em_symb_file_resolve(f, hot + 1, &r), EMBER_OK);
    assert_non_null(r);
    assert_string_equal(r->frames[r->nframes - 1].name, "shapes::hot(int)");
    assert_string_equal(r->frames[r->nframes - 1].system_name,
                        "_ZN6shapes3hotEi");
    em_free(r);
    assert_int_equal(em_symb_file_resolve(f, area + 1, &r), EMBER_OK);
    assert_non_null(r);
    assert_string_equal(r->frames[r->nframes - 1].name,
                        "shapes::box<long>::area(int) const");
    em_free(r);
    em_symb_file_close(f);
}

/* ---- JIT code: perf maps ------------------------------------------------- */

static void test_perfmap_line(void **state)
{
    uint64_t start, size;
    const char *name;
    size_t len;

    (void)state;
    assert_true(em_symb_perfmap_line("7f3a2c01e2a0 4c LazyCompile:~fib a.js:3\n",
                                     &start, &size, &name, &len));
    assert_true(start == 0x7f3a2c01e2a0 && size == 0x4c);
    assert_int_equal(len, strlen("LazyCompile:~fib a.js:3"));
    assert_memory_equal(name, "LazyCompile:~fib a.js:3", len);
    assert_true(em_symb_perfmap_line("0x10 0x20 py::f:/x.py\r\n", &start,
                                     &size, &name, &len));
    assert_true(start == 0x10 && size == 0x20 && len == 11);
    assert_false(em_symb_perfmap_line("10 0 zero-sized\n", &start, &size,
                                      &name, &len));
    assert_false(em_symb_perfmap_line("10 20\n", &start, &size, &name, &len));
    assert_false(em_symb_perfmap_line("xyz 20 f\n", &start, &size, &name,
                                      &len));
    assert_false(em_symb_perfmap_line("10  20 f\n", &start, &size, &name,
                                      &len));
    assert_false(em_symb_perfmap_line("fffffffffffffff0 20 wraps\n", &start,
                                      &size, &name, &len));
    assert_false(em_symb_perfmap_line("10000000000000000 1 long\n", &start,
                                      &size, &name, &len));
}

/* A child that copies "push rbp; mov rbp, rsp; jmp ." into anonymous
** executable memory, writes its perf map (as a regular file, or as a
** symbolic link to one when LINK), says where the code is, and runs it. */
static pid_t jit_child(bool link, uint64_t *code)
{
    static const unsigned char loop[] = { 0x55, 0x48, 0x89, 0xe5, 0xeb, 0xfe };
    char buf[64] = "";
    int fds[2];
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char map[128], target[1200];
        void *m;
        FILE *f;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            _exit(1);
        memcpy(m, loop, sizeof loop);
        snprintf(map, sizeof map, "/tmp/perf-%d.map", (int)getpid());
        snprintf(target, sizeof target, "%s/jit-%d.map", tmp, (int)getpid());
        if ((f = fopen(link ? target : map, "w")) == NULL)
            _exit(1);
        /* An older function once at the same address: the later line wins. */
        fprintf(f, "%lx 6 stale_function\n%lx %zx jitted_loop\n",
                (unsigned long)(uintptr_t)m, (unsigned long)(uintptr_t)m,
                sizeof loop);
        fclose(f);
        if (link && symlink(target, map) != 0)
            _exit(1);
        dprintf(fds[1], "%lx\n", (unsigned long)(uintptr_t)m);
        ((void (*)(void))m)();
        _exit(0);
    }
    close(fds[1]);
    assert_true(read(fds[0], buf, sizeof buf - 1) > 0);
    close(fds[0]);
    *code = strtoull(buf, NULL, 16);
    assert_true(*code != 0);
    return pid;
}

/* A frame in a JIT's anonymous memory takes its name from the process's
** perf map; a map that is a symbolic link is not read (the agent must not
** be led to read another file); without a name the address stays. */
static void test_perfmap(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    char map[128];
    uint32_t loc;
    uint64_t code, a;

    (void)state;
    for (int link = 0; link < 2; link++) {
        pid_t pid = jit_child(link, &code);
        assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
        a = code + 4;
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)pid, &a, 1,
                                           &loc), EMBER_OK);
        if (!link) {
            assert_int_equal(set.locs[loc].nlines, 1);
            assert_string_equal(loc_fn(&set, loc, 0)->name, "jitted_loop");
        } else {
            assert_int_equal(set.locs[loc].nlines, 0);
        }
        reap(pid);
        snprintf(map, sizeof map, "/tmp/perf-%d.map", (int)pid);
        unlink(map);
        em_pset_free(&set);
        memset(&set, 0, sizeof set);
        em_symbolizer_free(s);
        s = NULL;
    }
}

/* ---- kernel and unknown addresses ---------------------------------------- */

static uint64_t kallsyms_addr(const char *sym)
{
    char line[512], name[256], type;
    unsigned long long v;
    uint64_t found = 0;
    FILE *f = fopen("/proc/kallsyms", "r");

    if (f == NULL)
        return 0;
    while (found == 0 && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "%llx %c %255s", &v, &type, name) == 3 &&
            strcmp(name, sym) == 0)
            found = v;
    fclose(f);
    return found;
}

static void test_kernel(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    uint64_t k = kallsyms_addr("do_syscall_64"), addrs[3];
    uint32_t locs[3];

    (void)state;
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    if (k == 0 || em_symbolizer_kernel_hidden(s)) {
        em_symbolizer_free(s);
        print_message("skipped: kernel addresses are hidden "
                      "(kptr_restrict, or not root)\n");
        skip();
    }
    addrs[0] = k + 0x10;
    addrs[1] = k + 0x10;
    addrs[2] = 0x10;
    assert_int_equal(em_symbolize_kernel(s, &set, addrs, 3, locs), EMBER_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(set.locs[locs[i]].nlines, 1);
        assert_string_equal(loc_fn(&set, locs[i], 0)->name, "do_syscall_64");
        assert_string_equal(loc_map(&set, locs[i])->file,
                            "[kernel.kallsyms]");
        assert_int_equal(set.locs[locs[i]].address, k + 0x10);
    }
    assert_int_equal(locs[0], locs[1]);
    /* Below every symbol: kept as an address. */
    assert_int_equal(set.locs[locs[2]].nlines, 0);
    assert_int_equal(set.locs[locs[2]].address, 0x10);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

static void test_unknown(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_symb_stats st;
    uint64_t addrs[2] = { 0x10, 0x20 };
    uint32_t locs[2];

    (void)state;
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(), addrs, 2,
                                       locs), EMBER_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(set.locs[locs[i]].mapping, 0);
        assert_int_equal(set.locs[locs[i]].address, addrs[i]);
        assert_int_equal(set.locs[locs[i]].nlines, 0);
    }
    /* A pid that does not exist: bare addresses, not an error. */
    assert_int_equal(em_symbolize_user(s, &set, 0x7ffffff0u, addrs, 2, locs),
                     EMBER_OK);
    assert_int_equal(set.locs[locs[0]].mapping, 0);
    assert_int_equal(em_symbolizer_track(s, 0x7ffffff0u), EMBER_ENOTFOUND);
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.unresolved, 4);
    assert_int_equal(st.processes, 1);
    em_symbolizer_exited(s, 0x7ffffff0u);   /* unknown: no-op */
    em_symbolizer_sweep(s);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* ---- the cache ----------------------------------------------------------- */

static void test_cache_bounded(void **state)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    em_symb_stats st;
    uint64_t fn = (uint64_t)(uintptr_t)&self_target;
    uint32_t loc;

    (void)state;
    assert_int_equal(em_symbolizer_new(&s), EMBER_OK);
    s->cache.limit = 2;         /* ages every other entry */
    for (int round = 0; round < 3; round++)
        for (uint64_t i = 0; i < 5; i++) {
            uint64_t a = fn + i;
            assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(),
                                               &a, 1, &loc), EMBER_OK);
            assert_string_equal(loc_outer(&set, loc)->name, "self_target");
        }
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.hits + st.misses, 15);
    assert_true(s->cache.gen[0].n <= 2 && s->cache.gen[1].n <= 2);
    /* With room, repeats hit. */
    s->cache.limit = EM_SYMB_CACHE_ENTRIES;
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t a = fn + i;
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(), &a,
                                           1, &loc), EMBER_OK);
    }
    em_symbolizer_stats(s, &st);
    uint64_t hits = st.hits;
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t a = fn + i;
        assert_int_equal(em_symbolize_user(s, &set, (uint32_t)getpid(), &a,
                                           1, &loc), EMBER_OK);
    }
    em_symbolizer_stats(s, &st);
    assert_int_equal(st.hits, hits + 5);
    em_pset_free(&set);
    em_symbolizer_free(s);
}

/* ---- a kallsyms of our own ---------------------------------------------- */

static const char fake_kallsyms[] =
    "0000000000001000 t zz_alias\n"
    "0000000000001000 T _stext\n"
    "0000000000001100 T func_a\n"
    "0000000000001200 D data_x\n"
    "0000000000001300 b bss_y\n"
    "0000000000002000 t mod_fn\t[mymod]\n"
    "0000000000002100 W weak_fn\t[mymod]\n"
    "not a line\n";

/* Writes TEXT to a file under the scratch directory; its path. */
static const char *scratch_file(const char *name, const char *text)
{
    static char path[1200];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmp, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *ksym_name(const em_symb_kernel *k, uint64_t addr,
                             const char **file)
{
    em_symb_ksym ks;

    em_symb_kernel_lookup(k, addr, &ks);
    *file = ks.mapping.file;
    return ks.name;
}

static void test_kallsyms(void **state)
{
    em_symb_kernel *k = NULL;
    const char *file;

    (void)state;
    assert_int_equal(em_symb_kernel_load(scratch_file("kallsyms",
                                                      fake_kallsyms), &k),
                     EMBER_OK);
    assert_false(em_symb_kernel_hidden(k));
    assert_null(ksym_name(k, 0x10, &file));
    assert_string_equal(file, "[kernel.kallsyms]");
    assert_string_equal(ksym_name(k, 0x1000, &file), "_stext");  /* alias */
    assert_string_equal(ksym_name(k, 0x10ff, &file), "_stext");
    assert_string_equal(ksym_name(k, 0x1100, &file), "func_a");
    assert_string_equal(ksym_name(k, 0x1250, &file), "func_a"); /* no data */
    assert_string_equal(file, "[kernel.kallsyms]");
    assert_string_equal(ksym_name(k, 0x2050, &file), "mod_fn");
    assert_string_equal(file, "[mymod]");
    assert_string_equal(ksym_name(k, 0x2100 + 0xffff, &file), "weak_fn");
    assert_null(ksym_name(k, 0x2100 + 0x10000, &file));
    em_symb_kernel_free(k);
    /* kptr_restrict: every address 0. */
    assert_int_equal(em_symb_kernel_load(scratch_file("hidden",
                     "0000000000000000 T _stext\n"
                     "0000000000000000 T func_a\n"), &k), EMBER_OK);
    assert_true(em_symb_kernel_hidden(k));
    assert_null(ksym_name(k, 0xffffffff81000000ull, &file));
    em_symb_kernel_free(k);
    assert_int_equal(em_symb_kernel_load("/nonexistent/kallsyms", &k),
                     EMBER_EIO);
    assert_null(k);
}

/* ---- allocation failures --------------------------------------------------- */

/* Symbolizes a user stack of the fixture child PID (twice: the second
** time from the cache) and a kernel stack over our own kallsyms, failing
** allocation N: OK or ENOMEM, and right when OK. */
static int oom_round(uint64_t n, pid_t pid, uint64_t hot, bool kernel)
{
    em_symbolizer *s = NULL;
    em_pset set = { 0 };
    uint64_t addrs[3] = { hot, hot + 1, 0x10 };
    uint64_t kaddrs[2] = { 0x1110, 0x2010 };
    uint32_t locs[3];
    int rc;

    em_alloc_fail_at(n);
    rc = em_symbolizer_new(&s);
    if (rc == EMBER_OK && kernel) {
        s->kernel_tried = true;
        rc = em_symb_kernel_load(scratch_file("kallsyms", fake_kallsyms),
                                 &s->kernel);
    }
    if (rc == EMBER_OK && kernel)
        rc = em_symbolize_kernel(s, &set, kaddrs, 2, locs);
    for (int i = 0; i < 2 && rc == EMBER_OK && !kernel; i++)
        rc = em_symbolize_user(s, &set, (uint32_t)pid, addrs, 3, locs);
    em_alloc_fail_at(0);
    if (rc == EMBER_OK)
        assert_string_equal(loc_outer(&set, locs[0])->name,
                            kernel ? "func_a" : "hot_leaf");
    em_pset_free(&set);
    em_symbolizer_free(s);
    return rc;
}

static void oom_loop(bool kernel)
{
    uint64_t n, hot = 0;
    int rc = EMBER_ENOMEM;
    pid_t pid = 0;

    if (!kernel) {
        need_fixture();
        pid = spawn(fixture);
        hot = runtime(load_base(pid, fixture),
                      nm_addr(fixture, "hot_leaf", NULL) + 4);
    }
    for (n = 1; n < 5000 && rc == EMBER_ENOMEM; n++) {
        rc = oom_round(n, pid, hot, kernel);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
    }
    assert_int_equal(rc, EMBER_OK);
    assert_true(n > 3);
    if (pid > 0)
        reap(pid);
}

static void test_oom_user(void **state)
{
    (void)state;
    oom_loop(false);
}

static void test_oom_kernel(void **state)
{
    (void)state;
    oom_loop(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_line),
        cmocka_unit_test(test_container_id),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_vdso),
        cmocka_unit_test(test_fixture_chain),
        cmocka_unit_test(test_fixture_inline),
        cmocka_unit_test(test_fixture_deleted),
        cmocka_unit_test(test_fixture_exited),
        cmocka_unit_test(test_fixture_shared),
        cmocka_unit_test(test_file_identity),
        cmocka_unit_test(test_debuglink),
        cmocka_unit_test(test_symtab_index),
        cmocka_unit_test(test_libc_aliases),
        cmocka_unit_test(test_subprogram_table),
        cmocka_unit_test(test_demangle),
        cmocka_unit_test(test_perfmap_line),
        cmocka_unit_test(test_perfmap),
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_kallsyms),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_cache_bounded),
        cmocka_unit_test(test_oom_user),
        cmocka_unit_test(test_oom_kernel),
    };

    if (getenv("TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests_name("symbolize", tests, group_setup,
                                       group_teardown);
}
