/*
** query/render_flame.c: the `flame` renderer, an icicle graph drawn in the
** terminal. The root is the top line and spans the width; each line below
** is one depth of the call tree; each frame is a box whose width is its
** share of its column range, so a box's children sit under it, left
** aligned, and the room they leave on the right is the frame's self value:
**
**     Type: cpu
**     Total: 1.56s, 1 column = 15.60ms
**     root                                              |
**     main                                              |
**     work                             |idle       |
**
** Layout, exactly: width W (o->width, else 100, at least 10) columns; a
** node covering values [s, s + size) of the root's size T (sizes are sums
** of |value|) spans columns floor(s*W/T) up to floor((s+size)*W/T), so
** neighbours tile without gaps or overlap. A box of w columns is its name
** fitted into w - 1 columns (em_render_fit: cut with ".." when too long)
** and a '|'; a frame under two columns (no room for a character of its
** name) is left out with everything below it.
** Children are ordered by name (as flamegraph.pl does, so that two
** profiles of one program line up). Lines lose their trailing blanks.
**
** Colors (o->color): the name part of each box gets a 256-color background
** with black text; the characters are the same as without, so stripping
** the escapes gives the plain output. Profiles use a warm palette chosen by
** a hash of the name (flamegraph.pl's "hot"); diffs size boxes by the
** TARGET value and color them by change: red for growth, green for
** shrinking, five shades scaled to the largest change, grey for none.
** Frames whose target is 0 have no width: the top and tree renderers show
** what vanished.
*/
#include <stdio.h>

#include "query/render_int.h"

#define FLAME_WIDTH 100u
#define FLAME_MIN_WIDTH 10u
#define FLAME_MAX_WIDTH 4096u
#define FLAME_MIN_BOX 2u        /* a box shows at least a character and '|' */

typedef struct flame_box {
    uint32_t node;
    uint64_t start;             /* offset in value units from the left */
} flame_box;

typedef struct flame {
    const em_ctree *t;
    const em_render_opts *o;
    unsigned width;
    uint64_t total;             /* the root's size */
    uint64_t max_change;        /* diffs: the largest |change| of a node */
    flame_box *cur, *next;      /* boxes of this line and the next */
    size_t ncur, nnext;
    em_buf line;
} flame;

/* ---- colors ------------------------------------------------------------------------ */

static const unsigned char warm[] = { 202, 203, 208, 209, 214, 215, 220,
                                      221, 166, 172, 178, 130 };
static const unsigned char reds[] = { 224, 217, 210, 203, 196 };
static const unsigned char greens[] = { 194, 157, 120, 83, 46 };

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static unsigned box_color(const flame *fl, uint32_t ix)
{
    const em_cnode *c = &fl->t->nodes[ix];
    int64_t change;
    uint64_t mag;
    size_t level;

    if (!fl->t->p->diff)
        return warm[fnv1a(em_ctree_name(fl->t, ix)) % sizeof warm];
    change = em_sub_wrap(c->total, c->base_total);
    if (change == 0 || fl->max_change == 0)
        return 252;
    mag = em_abs64(change);
    level = (size_t)((long double)mag * 5 / (long double)fl->max_change);
    level = level >= 5 ? 4 : level;
    return change > 0 ? reds[level] : greens[level];
}

/* ---- drawing ------------------------------------------------------------------------ */

static size_t column(const flame *fl, uint64_t v)
{
    return (size_t)((long double)v * fl->width / (long double)fl->total);
}

static int pad_to(em_buf *b, size_t *col, size_t to)
{
    int rc = em_buf_reserve(b, to > *col ? to - *col : 0);

    for (; rc == EMBER_OK && *col < to; (*col)++)
        b->p[b->len++] = ' ';
    return rc;
}

/* Appends box IX of W columns to the line. */
static int box_draw(flame *fl, uint32_t ix, size_t w)
{
    char on[32];
    int rc = EMBER_OK;

    if (fl->o->color && w > 1) {
        int n = snprintf(on, sizeof on, "\033[48;5;%um\033[30m",
                         box_color(fl, ix));
        rc = em_buf_put(&fl->line, on, (size_t)n);
    }
    if (rc == EMBER_OK && w > 1)
        rc = em_render_fit(&fl->line, em_ctree_name(fl->t, ix), w - 1);
    if (rc == EMBER_OK && fl->o->color && w > 1)
        rc = em_buf_put(&fl->line, EM_SGR_RESET, sizeof EM_SGR_RESET - 1);
    if (rc == EMBER_OK)
        rc = em_buf_put(&fl->line, "|", 1);
    return rc;
}

/* Queues the children of box B that are at least one column wide. */
static void kids_queue(flame *fl, const flame_box *b)
{
    const em_cnode *c = &fl->t->nodes[b->node];
    uint64_t s = b->start;

    for (uint32_t k = 0; k < c->nkids; k++) {
        uint32_t kid = fl->t->kids[c->first_kid + k];
        uint64_t size = fl->t->nodes[kid].size;
        if (column(fl, s + size) >= column(fl, s) + FLAME_MIN_BOX)
            fl->next[fl->nnext++] = (flame_box){ kid, s };
        s += size;
    }
}

/* Draws the current line and queues the next one. */
static int line_draw(FILE *f, flame *fl)
{
    size_t col = 0;
    int rc = EMBER_OK;

    fl->line.len = 0;
    fl->nnext = 0;
    for (size_t i = 0; rc == EMBER_OK && i < fl->ncur; i++) {
        const flame_box *b = &fl->cur[i];
        size_t c0 = column(fl, b->start),
               c1 = column(fl, b->start + fl->t->nodes[b->node].size);
        if ((rc = pad_to(&fl->line, &col, c0)) == EMBER_OK)
            rc = box_draw(fl, b->node, c1 - c0);
        col = c1;
        kids_queue(fl, b);
    }
    if (rc == EMBER_OK) {
        fwrite(fl->line.p, 1, fl->line.len, f);
        fputc('\n', f);
    }
    return rc;
}

static void flame_header(FILE *f, const flame *fl)
{
    const em_rprofile *p = fl->t->p;
    const em_cnode *root = &fl->t->nodes[0];
    char a[EM_VALUE_MAX], b[EM_VALUE_MAX];
    uint64_t per = fl->total / fl->width;

    if (p->sample_type[0] != '\0')
        fprintf(f, "Type: %s\n", p->sample_type);
    if (p->diff)
        fprintf(f, "Total: base %s, target %s; widths: target, colors: "
                "change\n", em_format_value(root->base_total, p->unit, a),
                em_format_value(root->total, p->unit, b));
    else
        fprintf(f, "Total: %s, 1 column = %s\n",
                em_format_value(root->total, p->unit, a),
                em_format_value(per > INT64_MAX ? INT64_MAX : (int64_t)per,
                                p->unit, b));
}

static int flame_alloc(flame *fl)
{
    size_t n = fl->t->n;

    fl->cur = em_malloc(n * sizeof *fl->cur);
    fl->next = em_malloc(n * sizeof *fl->next);
    if (fl->cur == NULL || fl->next == NULL)
        return em_err(EMBER_ENOMEM, "flame: %zu nodes", n);
    for (size_t i = 1; i < n; i++) {
        int64_t ch = em_sub_wrap(fl->t->nodes[i].total,
                                 fl->t->nodes[i].base_total);
        if (em_abs64(ch) > fl->max_change)
            fl->max_change = em_abs64(ch);
    }
    return EMBER_OK;
}

int em_render_flame(FILE *f, const em_rprofile *p, const em_render_opts *o)
{
    flame fl = { .o = o };
    em_ctree t;
    int rc = em_ctree_build(&t, p, EM_CTREE_BY_NAME);

    fl.t = &t;
    fl.width = o->width == 0 ? FLAME_WIDTH : o->width;
    fl.width = fl.width < FLAME_MIN_WIDTH ? FLAME_MIN_WIDTH :
               fl.width > FLAME_MAX_WIDTH ? FLAME_MAX_WIDTH : fl.width;
    fl.total = t.n > 0 ? t.nodes[0].size : 0;
    if (rc == EMBER_OK)
        rc = flame_alloc(&fl);
    if (rc != EMBER_OK)
        goto out;
    flame_header(f, &fl);
    if (fl.total > 0)
        fl.cur[fl.ncur++] = (flame_box){ 0, 0 };
    while (rc == EMBER_OK && fl.ncur > 0) {
        flame_box *swap = fl.cur;
        rc = line_draw(f, &fl);
        fl.cur = fl.next;
        fl.next = swap;
        fl.ncur = fl.nnext;
    }
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "flame: write failed");
out:
    em_free(fl.cur);
    em_free(fl.next);
    em_buf_free(&fl.line);
    em_ctree_free(&t);
    return rc;
}
