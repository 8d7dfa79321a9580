/*
** bench/make_demo.c: writes the demo data set of `make run` as collapsed
** text files, OUTDIR/<service>/<unix ms>.txt, one CPU profile (sample
** counts) per service every 10 s. From two thirds of the window on, the
** first service spends 4x more in JSON encoding (a "bad deploy"), so that
** diff queries have something to find.
**
**   make_demo OUTDIR [--series N] [--minutes M] [--end MS] [--seed S]
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench/gen.h"

static void usage(void)
{
    fprintf(stderr, "usage: make_demo OUTDIR [--series N] [--minutes M] "
                    "[--end UNIX_MS] [--seed S]\n");
    exit(2);
}

static long long num_arg(int argc, char **argv, int *i)
{
    char *end;
    long long v;

    if (*i + 1 >= argc)
        usage();
    v = strtoll(argv[++*i], &end, 10);
    if (*end != '\0' || v < 0) {
        fprintf(stderr, "make_demo: bad number for %s: %s\n", argv[*i - 1], argv[*i]);
        exit(2);
    }
    return v;
}

static int mkdir_p(const char *dir)
{
    if (mkdir(dir, 0755) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "make_demo: mkdir %s: %s\n", dir, strerror(errno));
    return -1;
}

int main(int argc, char **argv)
{
    const char *outdir = NULL;
    long long series = 3, minutes = 30, end_ms = 0, seed = 42;
    gen_config cfg;
    ember_profile p;
    char path[4096];
    size_t files = 0, bytes = 0;
    gen *g;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--series") == 0)
            series = num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--minutes") == 0)
            minutes = num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--end") == 0)
            end_ms = num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = num_arg(argc, argv, &i);
        else if (argv[i][0] == '-' || outdir != NULL)
            usage();
        else
            outdir = argv[i];
    }
    if (outdir == NULL || series < 1 || series > 1000 || minutes < 1)
        usage();
    if (end_ms == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        end_ms = (long long)ts.tv_sec * 1000 / 10000 * 10000;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = (uint64_t)seed;
    cfg.ntargets = (uint32_t)series;
    cfg.nservices = (uint32_t)series;
    cfg.types = 1u << GEN_CPU_SAMPLES;
    cfg.end_ms = end_ms;
    cfg.span_ms = minutes * 60000;
    cfg.min_stacks = 30;
    cfg.max_stacks = 100;
    cfg.pool_stacks = 1200;
    cfg.app_functions = 250;
    cfg.shift_ms = end_ms - cfg.span_ms / 3;
    cfg.shift_service = 0;
    g = gen_new(&cfg);
    if (mkdir_p(outdir) != 0)
        return 1;
    for (uint32_t s = 0; s < cfg.nservices; s++) {
        snprintf(path, sizeof path, "%s/%s", outdir, gen_service_name(g, s));
        if (mkdir_p(path) != 0)
            return 1;
    }
    while (gen_next_profile(g, &p)) {
        const char *svc = NULL;
        FILE *f;
        for (size_t i = 0; i < p.nlabels; i++)
            if (strcmp(p.labels[i].name, "service") == 0)
                svc = p.labels[i].value;
        snprintf(path, sizeof path, "%s/%s/%lld.txt", outdir, svc, (long long)p.time_ms);
        f = fopen(path, "w");
        if (f == NULL || gen_write_collapsed(g, &p, f) != 0 || fclose(f) != 0) {
            fprintf(stderr, "make_demo: write %s: %s\n", path, strerror(errno));
            return 1;
        }
        files++;
        {
            struct stat st;
            if (stat(path, &st) == 0)
                bytes += (size_t)st.st_size;
        }
    }
    printf("make_demo: %zu files, %.1f MB in %s: %lld service(s) x %lld min, "
           "one CPU profile per 10 s, last at %lld ms\n",
           files, bytes / 1e6, outdir, series, minutes, end_ms);
    printf("make_demo: from %lld ms on, service %s spends 4x more under %s\n",
           (long long)cfg.shift_ms, gen_service_name(g, 0), gen_shift_function(g));
    gen_free(g);
    return 0;
}
