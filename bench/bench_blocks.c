/*
** bench/bench_blocks.c: where the bytes of a database's block files go
** (issue 15), for bench/compact.sh.
**
**   bench_blocks DIR [--stacks N]
**
** Opens every block file DIR/blocks/NAME.block (engine/block.h, read-only, the files as
** they are: no catalog) and sums, over all blocks, each section of the
** block directories (stored and decompressed bytes), the chunk bytes (from
** the chunk indexes) and what is left of the files (footer, directory,
** trailer). Sections fall in groups: symbols (strings, mappings,
** functions, locations, lines, the stack tree's nodes), series (series,
** labels and their postings) and the chunk index. With --stacks N (the
** distinct stacks the data holds, as `ember stats` counted them before
** compaction) each row also gives bytes per distinct stack.
**
** Prints a Markdown table, then one line of key=value totals for scripts:
**   blocks= block_files= block_symbols= block_series= block_index=
**   block_chunks= block_other= block_nodes= block_samples=
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/util.h"
#include "engine/block.h"

#define MAX_SECTIONS 64

enum { G_SYMBOLS, G_SERIES, G_INDEX, G_NGROUPS };

typedef struct sums {
    char name[MAX_SECTIONS][32];    /* section names, first-seen order */
    uint64_t stored[MAX_SECTIONS], raw[MAX_SECTIONS];
    size_t nsec;
    uint64_t group[G_NGROUPS];      /* stored bytes per group */
    uint64_t files, chunks, nodes, samples, blocks;
} sums;

/* The group of section NAME: by the table it belongs to. */
static int group_of(const char *name)
{
    if (strncmp(name, "series.", 7) == 0 || strncmp(name, "labels.", 7) == 0 ||
        strncmp(name, "postings.", 9) == 0)
        return G_SERIES;
    if (strncmp(name, "index.", 6) == 0)
        return G_INDEX;
    return G_SYMBOLS;
}

static size_t section_slot(sums *s, const char *name)
{
    for (size_t i = 0; i < s->nsec; i++)
        if (strcmp(s->name[i], name) == 0)
            return i;
    if (s->nsec == MAX_SECTIONS)
        die("more than %d distinct sections", MAX_SECTIONS);
    snprintf(s->name[s->nsec], sizeof s->name[0], "%s", name);
    return s->nsec++;
}

/* Chunk bytes of B: the sum of its index's lengths, series by series. */
static uint64_t chunk_bytes(em_block *b, const char *path)
{
    const em_block_info *info = em_block_get_info(b);
    uint64_t n = 0;

    for (uint32_t i = 0; i < info->nseries; i++) {
        const em_bchunk *c;
        size_t nc;
        if (em_block_chunks(b, i, &c, &nc) != EMBER_OK)
            die("%s: chunk index of series %u does not load", path, i);
        for (size_t k = 0; k < nc; k++)
            n += c[k].len;
    }
    return n;
}

static void add_block(sums *s, const char *path)
{
    em_block *b;
    const em_block_info *info;
    int rc = em_block_open(path, &b);

    if (rc != EMBER_OK)
        die("%s: %s", path, ember_strerror(rc));
    info = em_block_get_info(b);
    for (size_t i = 0; i < em_block_nsections(b); i++) {
        em_bsection sec;
        size_t k;
        em_block_section(b, i, &sec);
        k = section_slot(s, sec.name != NULL ? sec.name : "(unknown)");
        s->stored[k] += sec.stored;
        s->raw[k] += sec.raw;
        s->group[group_of(s->name[k])] += sec.stored;
    }
    s->files += info->file_size;
    s->chunks += chunk_bytes(b, path);
    s->nodes += info->nnodes;
    s->samples += info->nsamples;
    s->blocks++;
    em_block_close(b);
}

static void scan(sums *s, const char *dir)
{
    char path[4400];
    struct dirent *e;
    DIR *d;

    snprintf(path, sizeof path, "%s/blocks", dir);
    if ((d = opendir(path)) == NULL)
        die("%s: no blocks directory", path);
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".block") != 0)
            continue;
        snprintf(path, sizeof path, "%s/blocks/%s", dir, e->d_name);
        add_block(s, path);
    }
    closedir(d);
}

/* One table row: NAME, stored and raw bytes, and per stack when known. */
static void row(const char *name, uint64_t stored, uint64_t raw, double stacks)
{
    printf("| %s | %llu |", name, (unsigned long long)stored);
    if (raw > 0)
        printf(" %llu |", (unsigned long long)raw);
    else
        printf(" |");
    if (stacks > 0)
        printf(" %.2f |\n", (double)stored / stacks);
    else
        printf(" |\n");
}

static void print(const sums *s, double stacks)
{
    static const char *const gname[G_NGROUPS] = {
        "**symbols** (strings, mappings, functions, locations, lines, nodes)",
        "**series** (series, labels, label postings)", "**chunk index**" };
    uint64_t sec = s->group[G_SYMBOLS] + s->group[G_SERIES] + s->group[G_INDEX];
    uint64_t other = s->files - sec - s->chunks;

    printf("| block part | bytes in files | decompressed | bytes per distinct stack |\n"
           "|---|---:|---:|---:|\n");
    for (int g = 0; g < G_NGROUPS; g++) {
        uint64_t raw = 0;
        for (size_t i = 0; i < s->nsec; i++)
            if (group_of(s->name[i]) == g)
                raw += s->raw[i];
        row(gname[g], s->group[g], raw, stacks);
        for (size_t i = 0; i < s->nsec; i++)
            if (group_of(s->name[i]) == g) {
                char label[48];
                snprintf(label, sizeof label, "&nbsp;&nbsp;%s", s->name[i]);
                row(label, s->stored[i], s->raw[i], stacks);
            }
    }
    row("**chunks** (samples)", s->chunks, 0, stacks);
    row("footer, directory, trailer", other, 0, stacks);
    row("**all block files**", s->files, 0, stacks);
    printf("\nblocks=%llu block_files=%llu block_symbols=%llu block_series=%llu "
           "block_index=%llu block_chunks=%llu block_other=%llu block_nodes=%llu "
           "block_samples=%llu\n", (unsigned long long)s->blocks,
           (unsigned long long)s->files, (unsigned long long)s->group[G_SYMBOLS],
           (unsigned long long)s->group[G_SERIES], (unsigned long long)s->group[G_INDEX],
           (unsigned long long)s->chunks, (unsigned long long)other,
           (unsigned long long)s->nodes, (unsigned long long)s->samples);
}

int main(int argc, char **argv)
{
    sums *s = calloc(1, sizeof *s);
    double stacks = 0;

    bench_name = "bench_blocks";
    if (argc == 4 && strcmp(argv[2], "--stacks") == 0)
        stacks = strtod(argv[3], NULL);
    else if (argc != 2)
        die("usage: bench_blocks DIR [--stacks N]");
    if (s == NULL)
        die("out of memory");
    scan(s, argv[1]);
    if (s->blocks == 0)
        die("%s/blocks holds no block", argv[1]);
    print(s, stacks);
    free(s);
    return 0;
}
