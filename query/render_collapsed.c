/*
** query/render_collapsed.c: Brendan Gregg's collapsed (folded) stacks,
** `root;caller;...;leaf VALUE`, the input of flamegraph.pl, speedscope and
** `ember import --format collapsed`.
**
** A stack is stored leaf first, so it is written backwards; within one
** location the stored order is innermost inline frame first, so backwards
** also puts the outermost caller first, as a flame graph wants. Two stacks
** can read the same (different addresses in one function): their values are
** summed, so each line is unique, and lines are sorted bytewise so that the
** output is the same for the same data whatever the stack ids. Lines that
** sum to zero are left out. The text of all lines is built in one buffer
** and sorted through an index of (offset, length) entries.
**
** A diff profile is written in the differential folded format that
** flamegraph.pl's difffolded.pl writes and flamegraph.pl reads, two
** values per line, BASE then TARGET:
**
**     root;caller;leaf 120 95
**
** summed per distinct line like single values; lines whose two sums are
** both 0 are left out.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "query/query_int.h"

typedef struct line {
    size_t off, len;            /* its text in the shared buffer */
    int64_t value;
    int64_t base;               /* diffs: the BASE value */
} line;

/* The buffer qsort's comparator reads: qsort takes no context argument. A
** thread-local keeps concurrent renders apart. */
static _Thread_local const char *sort_text;

static int line_cmp(const void *a, const void *b)
{
    const line *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(sort_text + x->off, sort_text + y->off, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* Appends NAME, with the bytes that would break the format replaced. */
static int put_name(em_buf *b, const char *name)
{
    size_t n = strlen(name);
    int rc = em_buf_reserve(b, n);

    if (rc != EMBER_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        b->p[b->len++] = c == ';' ? '_' : (c < 0x20 || c == 0x7f) ? ' ' : c;
    }
    return EMBER_OK;
}

/* Appends stack S, root first, to B. */
static int put_stack(em_buf *b, const em_rprofile *p, const em_rstack *s)
{
    int rc = EMBER_OK;

    if (s->nframes == 0)
        return em_buf_put(b, "<empty>", 7);
    for (size_t i = s->nframes; rc == EMBER_OK && i-- > 0;) {
        rc = put_name(b, em_strtab_get(&p->names, p->frames[s->first + i].fn));
        if (rc == EMBER_OK && i > 0)
            rc = em_buf_put(b, ";", 1);
    }
    return rc;
}

/* Builds the text and index of every non-zero stack. */
static int lines_build(const em_rprofile *p, em_buf *text, line *lines,
                       size_t *n)
{
    int rc;

    *n = 0;
    for (size_t i = 0; i < p->nstacks; i++) {
        const em_rstack *s = &p->stacks[i];
        size_t off = text->len;
        if (s->value == 0 && (!p->diff || s->base == 0))
            continue;
        if ((rc = put_stack(text, p, s)) != EMBER_OK)
            return rc;
        lines[(*n)++] = (line){ off, text->len - off, s->value,
                                p->diff ? s->base : 0 };
    }
    return EMBER_OK;
}

/* Sums runs of equal text into their first entry; returns the new count. */
static size_t lines_merge(const char *text, line *lines, size_t n)
{
    size_t out = 0;

    for (size_t i = 0; i < n; i++) {
        if (out > 0 && lines[out - 1].len == lines[i].len &&
            memcmp(text + lines[out - 1].off, text + lines[i].off,
                   lines[i].len) == 0) {
            lines[out - 1].value = em_add_wrap(lines[out - 1].value,
                                               lines[i].value);
            lines[out - 1].base = em_add_wrap(lines[out - 1].base,
                                              lines[i].base);
        } else {
            lines[out++] = lines[i];
        }
    }
    return out;
}

int em_render_collapsed(FILE *f, const em_rprofile *p)
{
    em_buf text = { 0 };
    line *lines = em_calloc(p->nstacks == 0 ? 1 : p->nstacks, sizeof *lines);
    size_t n = 0;
    int rc = EMBER_OK;

    if (lines == NULL)
        rc = em_err(EMBER_ENOMEM, "collapsed: %zu stacks", p->nstacks);
    if (rc == EMBER_OK)
        rc = lines_build(p, &text, lines, &n);
    if (rc == EMBER_OK && n > 1) {
        sort_text = (const char *)text.p;
        qsort(lines, n, sizeof *lines, line_cmp);
        sort_text = NULL;
        n = lines_merge((const char *)text.p, lines, n);
    }
    for (size_t i = 0; rc == EMBER_OK && i < n; i++) {
        if (lines[i].value == 0 && lines[i].base == 0)
            continue;
        fwrite(text.p + lines[i].off, 1, lines[i].len, f);
        if (p->diff)
            fprintf(f, " %" PRId64 " %" PRId64 "\n", lines[i].base,
                    lines[i].value);
        else
            fprintf(f, " %" PRId64 "\n", lines[i].value);
    }
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "collapsed: write failed");
    em_buf_free(&text);
    em_free(lines);
    return rc;
}
