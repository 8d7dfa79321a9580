/*
** repl/cmd_db.c: `ember stats` and `ember verify`, the commands that look
** at a database as a whole. `ember stats --server URL` asks a server
** (GET /api/v1/status) and prints the same.
*/
#include <stdio.h>
#include <string.h>

#include "repl/cli.h"

static double per(uint64_t a, uint64_t b)
{
    return b == 0 ? 0.0 : (double)a / (double)b;
}

static void stats_print(const ember_stats *s)
{
    printf("format version    %u\n", s->format_version);
    printf("series            %llu\n", (unsigned long long)s->series);
    printf("profiles          %llu\n", (unsigned long long)s->profiles);
    printf("samples           %llu\n", (unsigned long long)s->samples);
    printf("stacks            %llu\n", (unsigned long long)s->stacks);
    printf("locations         %llu\n", (unsigned long long)s->locations);
    printf("functions         %llu\n", (unsigned long long)s->functions);
    printf("mappings          %llu\n", (unsigned long long)s->mappings);
    printf("strings           %llu\n", (unsigned long long)s->strings);
    printf("chunks            %llu sealed, %llu head\n",
           (unsigned long long)s->chunks, (unsigned long long)s->head_chunks);
    printf("chunk bytes       %llu (%.2f per sample)\n",
           (unsigned long long)s->chunk_bytes, per(s->chunk_bytes, s->samples));
    printf("file bytes        %llu (%.2f per sample)\n",
           (unsigned long long)s->file_bytes, per(s->file_bytes, s->samples));
    printf("used bytes        %llu\n", (unsigned long long)s->used_bytes);
    if (s->blocks > 0) {
        printf("blocks            %llu: %llu bytes, %llu series, %llu "
               "profiles, %llu samples, %llu stack nodes\n",
               (unsigned long long)s->blocks,
               (unsigned long long)s->block_bytes,
               (unsigned long long)s->block_series,
               (unsigned long long)s->block_profiles,
               (unsigned long long)s->block_samples,
               (unsigned long long)s->block_stacks);
        printf("disk bytes        %llu (%.2f per sample)\n",
               (unsigned long long)(s->file_bytes + s->block_bytes),
               per(s->file_bytes + s->block_bytes, s->samples));
    }
    if (s->lockless)
        printf("lock              none: read-only, lock.mdb is not "
               "writable by this user\n");
    if (s->ntables == 0)
        return;
    printf("\n%-10s %12s %14s\n", "table", "entries", "bytes");
    for (unsigned i = 0; i < s->ntables; i++)
        printf("%-10s %12llu %14llu\n", s->tables[i].name,
               (unsigned long long)s->tables[i].entries,
               (unsigned long long)s->tables[i].bytes);
}

int em_cmd_stats(int argc, char **argv)
{
    ember_stats s = { .sz = sizeof s };
    em_source_args a;
    em_source src;
    int rc = em_source_only_args("stats", argc, argv, &a);

    if (rc != 0)
        return rc;              /* it said why */
    if (em_source_open("stats", &a, 1, &src) != EMBER_OK)
        return 1;
    rc = em_source_stats(&src, &s);
    if (rc == EMBER_OK)
        stats_print(&s);
    else
        em_cli_fail(1, "stats", "%s", ember_errmsg(src.db));
    em_source_close(&src);
    return rc == EMBER_OK ? 0 : 1;
}

static void print_problem(void *ctx, const char *problem)
{
    (void)ctx;
    printf("damage: %s\n", problem);
}

int em_cmd_verify(int argc, char **argv)
{
    const char *dir = em_cli_dir_arg("verify", argc, argv);
    ember_stats s = { .sz = sizeof s };
    ember_db *db = NULL;
    uint64_t n = 0;
    int rc;

    if (dir == NULL)
        return 2;               /* em_cli_dir_arg said why */
    if (em_cli_open("verify", dir, 1, &db) != EMBER_OK)
        return 1;
    rc = ember_verify(db, print_problem, NULL, &n);
    if (rc == EMBER_OK && ember_stats_get(db, &s) == EMBER_OK)
        printf("ok: %llu series, %llu profiles, %llu samples, %llu chunks, "
               "%llu stacks checked\n", (unsigned long long)s.series,
               (unsigned long long)s.profiles, (unsigned long long)s.samples,
               (unsigned long long)(s.chunks + s.head_chunks),
               (unsigned long long)s.stacks);
    else if (rc == EMBER_ECORRUPT)
        printf("%llu problems found\n", (unsigned long long)n);
    else
        em_cli_fail(1, "verify", "%s", ember_errmsg(db));
    ember_close(db);
    return rc == EMBER_OK ? 0 : 1;
}
