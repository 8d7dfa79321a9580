/*
** repl/cmd_query.c: `ember query`. Parses the selector, merges what it
** matches over the range, resolves stacks to names and renders top or
** collapsed. A merge only makes sense within one profile type, so a
** selector that matches several types is refused with their names.
*/
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

typedef struct query_args {
    const char *dir, *from, *to, *format, *text;
    size_t limit;
    bool cum;
} query_args;

static int query_parse_args(query_args *a, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "from", required_argument, NULL, 'F' },
        { "to", required_argument, NULL, 'T' },
        { "output", required_argument, NULL, 'o' },
        { "limit", required_argument, NULL, 'n' },
        { "cum", no_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    memset(a, 0, sizeof *a);
    a->format = "top";
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:o:", longs, NULL)) != -1) {
        switch (c) {
        case 'd': a->dir = optarg; break;
        case 'F': a->from = optarg; break;
        case 'T': a->to = optarg; break;
        case 'o': a->format = optarg; break;
        case 'n': a->limit = (size_t)strtoull(optarg, NULL, 10); break;
        case 'c': a->cum = true; break;
        default: return em_cli_usage("query");
        }
    }
    if (a->dir == NULL || optind != argc - 1)
        return em_cli_usage("query");
    if (strcmp(a->format, "top") != 0 && strcmp(a->format, "collapsed") != 0)
        return em_cli_fail(2, "query", "-o %s: expected top or collapsed",
                           a->format);
    a->text = argv[optind];
    return 0;
}

/* The one profile type SEL covers, or an error naming them all. */
static int query_type(ember_db *db, const ember_selector *sel, char **type)
{
    ember_strlist *types = NULL;
    int rc = ember_profile_types(db, sel, &types);

    *type = NULL;
    if (rc == EMBER_OK && ember_strlist_count(types) > 1) {
        char list[1024] = "";
        for (size_t i = 0; i < ember_strlist_count(types) && i < 8; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, ember_strlist_get(types, i),
                    sizeof list - strlen(list) - 1);
        }
        rc = em_err(EMBER_EINVAL, "the selector matches %zu profile types "
                    "(%s); name one, e.g. '%s{...}'",
                    ember_strlist_count(types), list,
                    ember_strlist_get(types, 0));
    } else if (rc == EMBER_OK && ember_strlist_count(types) == 1) {
        *type = em_strdup(ember_strlist_get(types, 0));
        if (*type == NULL)
            rc = em_err(EMBER_ENOMEM, "type name");
    }
    ember_strlist_free(types);
    return rc;
}

static int query_range(const query_args *a, int64_t *from, int64_t *to)
{
    int64_t now = em_cli_now_ms();
    int rc = EMBER_OK;

    *from = 0;
    *to = 0;
    if (a->from == NULL && a->to == NULL)
        return EMBER_OK;
    *from = INT64_MIN;
    *to = INT64_MAX;
    if (a->from != NULL)
        rc = em_time_parse(a->from, now, from);
    if (rc == EMBER_OK && a->to != NULL)
        rc = em_time_parse(a->to, now, to);
    if (rc == EMBER_OK && *from > *to)
        rc = em_err(EMBER_EINVAL, "--from is after --to");
    return rc;
}

static int query_render(const query_args *a, ember_db *db,
                        const ember_merged *m, const char *type)
{
    em_top_opts o = { .sz = sizeof o, .cum_sort = a->cum, .limit = a->limit };
    em_rprofile p;
    int rc = em_rprofile_build(db, m, type, NULL, &p);

    if (rc != EMBER_OK)
        return rc;
    if (strcmp(a->format, "collapsed") == 0)
        rc = em_render_collapsed(stdout, &p);
    else
        rc = em_render_top(stdout, &p, &o);
    em_rprofile_free(&p);
    return rc;
}

static int query_run(const query_args *a, ember_db *db)
{
    ember_selector sel;
    ember_merged *m = NULL;
    em_node *n = NULL;
    int64_t from, to;
    char *type = NULL;
    int rc = query_range(a, &from, &to);

    if (rc == EMBER_OK)
        rc = em_query_parse(a->text, &n);
    if (rc == EMBER_OK) {
        em_sel_view(&n->u.sel, from, to, &sel);
        rc = query_type(db, &sel, &type);
    }
    if (rc == EMBER_OK && type != NULL) {
        sel.type = type;
        rc = ember_merge(db, &sel, &m);
    }
    if (rc == EMBER_OK && m != NULL)
        rc = query_render(a, db, m, type);
    ember_merged_free(m);
    em_node_free(n);
    em_free(type);
    return rc;
}

int em_cmd_query(int argc, char **argv)
{
    query_args a;
    ember_db *db = NULL;
    int rc, st = query_parse_args(&a, argc, argv);

    if (st != 0)
        return st;
    if (em_cli_open("query", a.dir, 1, &db) != EMBER_OK)
        return 1;
    rc = query_run(&a, db);
    if (rc != EMBER_OK)
        em_cli_fail(1, "query", "%s", ember_errmsg(db));
    ember_close(db);
    return rc == EMBER_OK ? 0 : 1;
}
