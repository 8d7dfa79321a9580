/*
** fuzz/replay.c: a plain main for the gcc builds. Feeds each file named on
** the command line to LLVMFuzzerTestOneInput; a directory stands for the
** files directly inside it (one level, as a libFuzzer corpus is laid out).
** `make test` replays every committed corpus and past crash this way, so a
** fixed bug stays fixed without clang. Exit status 1 when a file cannot be
** read; an empty directory only warns (a target may not have a corpus yet).
*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads PATH whole and runs it; 0 on success, -1 when unreadable. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n = -1;

    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        LLVMFuzzerTestOneInput(buf, (size_t)n);
        n = 0;
    } else {
        fprintf(stderr, "replay: cannot read %s\n", path);
        n = -1;
    }
    free(buf);
    if (f != NULL)
        fclose(f);
    return (int)n;
}

/* Replays the regular files directly inside DIR; *count gets how many. */
static int replay_dir(const char *dir, unsigned long *count)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = 0;

    if (d == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", dir);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;

        if (e->d_name[0] == '.' ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
                (int)sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        rc |= replay_file(path);
        (*count)++;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned long count = 0;
    int rc = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc |= replay_dir(argv[i], &count);
        } else {
            rc |= replay_file(argv[i]);
            count++;
        }
    }
    printf("replay: %lu inputs%s\n", count, rc ? ", some unreadable" : "");
    if (count == 0)
        fprintf(stderr, "replay: warning: no inputs\n");
    return rc != 0;
}
