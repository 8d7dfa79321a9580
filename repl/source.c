/*
** repl/source.c: where a command's data is, a database directory (-d DIR)
** or a server (--server unix:PATH|http://HOST:PORT|https://HOST:PORT, with
** --token-file and --ca-file):
** `ember query`, `stats` and `repl`, and the REPL's completion, ask an
** em_source and never care which. Each call is a thin switch between an
** ember_* call and its ember_client_* twin, which return the same objects.
*/
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

#define TOKEN_MAX 4096

/* The token in PATH, trailing whitespace removed (as the server reads its
** own --token-file); NULL after a message. */
static char *token_read(const char *cmd, const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, TOKEN_MAX + 1);
    size_t n = 0;

    if (f == NULL || buf == NULL) {
        em_cli_fail(1, cmd, "--token-file %s: %s", path, strerror(errno));
        goto fail;
    }
    n = fread(buf, 1, TOKEN_MAX + 1, f);
    if (n > TOKEN_MAX || ferror(f)) {
        em_cli_fail(1, cmd, "--token-file %s: %s", path, n > TOKEN_MAX ?
                    "longer than 4096 bytes" : "read failed");
        goto fail;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
                     buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        n--;
    buf[n] = '\0';
    fclose(f);
    return buf;
fail:
    if (f != NULL)
        fclose(f);
    free(buf);
    return NULL;
}

int em_source_open(const char *cmd, const em_source_args *a, int rdonly,
                   em_source *s)
{
    ember_client_opts o = { .sz = sizeof o };
    char *token = NULL;
    int rc;

    memset(s, 0, sizeof *s);
    if (a->server == NULL)
        return em_cli_open(cmd, a->dir, rdonly, &s->db);
    if (a->token_file != NULL &&
        (token = token_read(cmd, a->token_file)) == NULL)
        return EMBER_EINVAL;
    o.token = token;
    o.ca_file = a->ca_file;
    rc = ember_client_open(a->server, &o, &s->client);
    if (rc != EMBER_OK)
        em_cli_fail(1, cmd, "%s", ember_errmsg(NULL));
    free(token);
    return rc;
}

void em_source_close(em_source *s)
{
    ember_close(s->db);
    ember_client_close(s->client);
    memset(s, 0, sizeof *s);
}

int em_source_query(em_source *s, const char *text,
                    const ember_query_opts *o, unsigned flags,
                    ember_result **out)
{
    if (s->client != NULL)
        return ember_client_query(s->client, text, o, out);
    return em_query_run(s->db, text, o, flags, out);
}

int em_source_types(em_source *s, const char *match,
                    const ember_selector *sel, ember_strlist **out)
{
    if (s->client != NULL)
        return ember_client_profile_types(s->client, match, out);
    return ember_profile_types(s->db, sel, out);
}

int em_source_label_names(em_source *s, const char *match,
                          const ember_selector *sel, ember_strlist **out)
{
    if (s->client != NULL)
        return ember_client_label_names(s->client, match, out);
    return ember_label_names(s->db, sel, out);
}

int em_source_label_values(em_source *s, const char *name, const char *match,
                           const ember_selector *sel, ember_strlist **out)
{
    if (s->client != NULL)
        return ember_client_label_values(s->client, name, match, out);
    return ember_label_values(s->db, name, sel, out);
}

int em_source_stats(em_source *s, ember_stats *out)
{
    if (s->client != NULL)
        return ember_client_stats(s->client, out);
    return ember_stats_get(s->db, out);
}

int em_source_option(em_source_args *a, int c, const char *arg)
{
    switch (c) {
    case 'd': a->dir = arg; return 1;
    case EM_OPT_SERVER: a->server = arg; return 1;
    case EM_OPT_TOKEN_FILE: a->token_file = arg; return 1;
    case EM_OPT_CA_FILE: a->ca_file = arg; return 1;
    default: return 0;
    }
}

int em_source_check(const char *cmd, const em_source_args *a)
{
    if (a->dir != NULL && a->server != NULL)
        return em_cli_fail(2, cmd, "-d and --server exclude each other: "
                           "the data is in a directory or behind a server");
    if ((a->token_file != NULL || a->ca_file != NULL) && a->server == NULL)
        return em_cli_fail(2, cmd, "--%s goes with --server",
                           a->token_file != NULL ? "token-file" : "ca-file");
    return 0;
}

int em_source_only_args(const char *cmd, int argc, char **argv,
                        em_source_args *a)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "server", required_argument, NULL, EM_OPT_SERVER },
        { "token-file", required_argument, NULL, EM_OPT_TOKEN_FILE },
        { "ca-file", required_argument, NULL, EM_OPT_CA_FILE },
        { NULL, 0, NULL, 0 },
    };
    int c, st;

    memset(a, 0, sizeof *a);
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:", longs, NULL)) != -1)
        if (!em_source_option(a, c, optarg))
            return em_cli_bad_option(cmd, c);
    if ((st = em_source_check(cmd, a)) != 0)
        return st;
    return em_cli_args(cmd, a->server != NULL ? a->server : a->dir, argc,
                       argv, 0, 0);
}
