/*
** docs/examples/import_top.c: import a pprof file and print its top
** functions, through the public API only.
**
**     ./import_top DB FILE [N [TYPE]]
**
** It reads FILE (a pprof profile such as Go's cpu.pb.gz, gzipped or not;
** collapsed stacks and `perf script` text work too), imports it into the
** database directory DB with ember_import, then runs the query
**
**     top(merge(TYPE), N)
**
** and prints it as `ember query -o top` (and `go tool pprof -top`) would.
** TYPE defaults to the first profile type stored, N to 10. The output is
** byte for byte what `ember query -d DB -o top 'top(merge(TYPE), N)'` prints
** (scripts/check-example.sh checks it).
**
** Build it against an installed Ember:
**
**     cc -std=c11 -Wall -Werror import_top.c \
**        $(pkg-config --cflags --libs ember) -o import_top
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ember.h>

/* Prints why RC failed and returns 1 (the exit status); 0 when RC is OK. */
static int failed(int rc, const char *what)
{
    if (rc == EMBER_OK)
        return 0;
    fprintf(stderr, "import_top: %s: %s: %s\n", what, ember_strerror(rc),
            ember_errmsg(NULL));
    return 1;
}

/* Reads PATH whole into a new buffer (free it); NULL if it cannot. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        *len = fread(buf, 1, (size_t)n, f);
        if (*len != (size_t)n) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* Imports FILE into DB: the whole file or, should it be bad, nothing. */
static int import_file(ember_db *db, const char *file)
{
    ember_import_opts o = { .sz = sizeof o, .origin = file };
    ember_import_stats st = { .sz = sizeof st };
    size_t len = 0;
    char *buf = read_file(file, &len);
    int rc;

    if (buf == NULL) {
        perror(file);
        return 1;
    }
    rc = ember_import(db, buf, len, &o, &st);
    free(buf);
    if (failed(rc, "import"))
        return 1;
    fprintf(stderr, "imported %s: %llu profiles, %llu samples\n", file,
            (unsigned long long)st.profiles, (unsigned long long)st.samples);
    return 0;
}

/* Runs top(merge(TYPE), N) and prints it as -o top does. */
static int print_top(ember_db *db, const char *type, const char *n)
{
    char query[512], *text = NULL;
    ember_result *r = NULL;
    size_t len = 0;
    int rc;

    snprintf(query, sizeof query, "top(merge(%s), %s)", type, n);
    rc = ember_query(db, query, NULL, &r);
    if (rc == EMBER_OK)
        rc = ember_result_render(db, r, "top", NULL, &text, &len);
    ember_result_free(r);
    if (failed(rc, query))
        return 1;
    fwrite(text, 1, len, stdout);
    ember_free(text);
    return 0;
}

int main(int argc, char **argv)
{
    ember_db *db = NULL;
    ember_strlist *types = NULL;
    const char *n = argc > 3 ? argv[3] : "10";
    int status = 1;

    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: import_top DB FILE [N [TYPE]]\n");
        return 2;
    }
    if (failed(ember_open(argv[1], NULL, &db), "open"))
        goto out;
    if (import_file(db, argv[2]) != 0)
        goto out;
    if (argc > 4) {
        status = print_top(db, argv[4], n);
    } else if (!failed(ember_profile_types(db, NULL, &types), "types")) {
        if (ember_strlist_count(types) == 0)
            fprintf(stderr, "import_top: %s holds no profile\n", argv[2]);
        else
            status = print_top(db, ember_strlist_get(types, 0), n);
    }
out:
    ember_strlist_free(types);
    ember_close(db);
    return status;
}
