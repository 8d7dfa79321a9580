/*
** repl/repl_out.c: what `ember query` and the REPL share about output: the
** list of formats and the messages naming those that fit a result, the
** time range of the command line, the note about summed snapshots, and
** the terminal's size and color choice.
*/
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

/* Profile formats first, then series and table ones; em_render_fits says
** which fit a kind, this list only orders them for people. */
const char *const em_cli_formats[] = {
    "top", "tree", "flame", "collapsed", "pprof", "svg", "json",
    "table", "csv", "spark",
};
const size_t em_cli_nformats = EM_ARRAY_LEN(em_cli_formats);

bool em_cli_format_known(const char *name)
{
    for (size_t i = 0; i < em_cli_nformats; i++)
        if (strcmp(em_cli_formats[i], name) == 0)
            return true;
    return false;
}

const char *em_cli_format_list(int kind, char *buf, size_t n)
{
    const char *fit[EM_ARRAY_LEN(em_cli_formats)];
    size_t k = 0, len = 0;

    for (size_t i = 0; i < em_cli_nformats; i++)
        if (kind == 0 || em_render_fits(kind, em_cli_formats[i]))
            fit[k++] = em_cli_formats[i];
    buf[0] = '\0';
    for (size_t i = 0; i < k && len < n; i++) {
        const char *sep = i == 0 ? "" : i + 1 == k ? " or " : ", ";
        int w = snprintf(buf + len, n - len, "%s%s", sep, fit[i]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    return buf;
}

const char *em_cli_kind_name(int kind)
{
    switch (kind) {
    case EMBER_RESULT_PROFILE: return "profile";
    case EMBER_RESULT_DIFF: return "diff";
    case EMBER_RESULT_SERIES: return "series";
    case EMBER_RESULT_TABLE: return "table";
    default: return "unknown";
    }
}

int em_cli_range(const char *from, const char *to, int64_t now,
                 int64_t *from_ms, int64_t *to_ms)
{
    int rc = EMBER_OK;

    *from_ms = 0;
    *to_ms = 0;
    if (from == NULL && to == NULL)
        return EMBER_OK;
    /* The epoch rather than INT64_MIN: a step buckets from the range's
    ** start, and subtracting INT64_MIN from a time overflows. */
    *to_ms = now;
    if (from != NULL)
        rc = em_time_parse(from, now, from_ms);
    if (rc == EMBER_OK && to != NULL)
        rc = em_time_parse(to, now, to_ms);
    if (rc == EMBER_OK && *from_ms > *to_ms)
        rc = em_err(EMBER_EINVAL, "the range starts (%s) after it ends (%s)",
                    from != NULL ? from : "the epoch",
                    to != NULL ? to : "now");
    if (rc == EMBER_OK && *from_ms == 0 && *to_ms == 0)
        *to_ms = 1;             /* (0, 0) would mean all time */
    return rc;
}

static bool type_is_delta(const char *type)
{
    size_t len = type != NULL ? strlen(type) : 0;
    return len >= 6 && strcmp(type + len - 6, ":delta") == 0;
}

/* Sums what the groups of R merged: the group's counts, or its merged
** profile's when the executor left them 0. */
static void result_counts(const ember_result *r, uint64_t *nseries,
                          uint64_t *nprofiles)
{
    *nseries = 0;
    *nprofiles = 0;
    for (size_t i = 0; i < r->ngroups; i++) {
        uint64_t s = r->groups[i].nseries, p = r->groups[i].nprofiles;
        if (s == 0 && p == 0 && r->groups[i].merged != NULL)
            ember_merged_info(r->groups[i].merged, &s, &p);
        *nseries += s;
        *nprofiles += p;
    }
}

/* The answer is still what `go tool pprof` gives over the same files,
** which sums them too; the note says how to get one point in time. */
void em_cli_note_sums(const char *who, const ember_result *r)
{
    uint64_t nseries, nprofiles;

    if (r == NULL || r->kind != EMBER_RESULT_PROFILE || r->type == NULL ||
        type_is_delta(r->type))
        return;
    result_counts(r, &nseries, &nprofiles);
    if (nprofiles > nseries)
        fprintf(stderr, "%s: note: %s is not a delta type; %llu profiles of "
                "%llu series were summed, as go tool pprof sums files. For "
                "one point in time narrow the range or use @ "
                "(docs/ingest.md).\n", who, r->type,
                (unsigned long long)nprofiles, (unsigned long long)nseries);
}

void em_cli_term_size(int fd, unsigned *cols, unsigned *rows)
{
    struct winsize ws;

    *cols = 0;
    *rows = 0;
    if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) != 0)
        return;
    *cols = ws.ws_col;
    *rows = ws.ws_row;
}

bool em_cli_color_auto(FILE *f)
{
    const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

    if (no != NULL && no[0] != '\0')
        return false;
    if (term != NULL && strcmp(term, "dumb") == 0)
        return false;
    return isatty(fileno(f));
}
