/*
** query/render_svg.c: the svg renderer, a flame graph in one self-contained
** file (its style and script inline, nothing fetched) that a browser opens
** as it is: click a frame to zoom, a search box that highlights matching
** functions and says what share of the profile they hold, tooltips and a
** status line with each frame's value. Written for Ember after the shape of
** Brendan Gregg's flamegraph.pl, not copied from it.
**
** Invariants of the drawing (the script relies on them):
** - Frames are aggregated by call path: the root "all" at the bottom, then
**   each stack's frames from its outermost caller up. Siblings are ordered
**   by name (bytewise), so the file depends on the data only, never on the
**   order of the stacks.
** - A frame's width is the sum of |value| of the stacks through it (a diff:
**   |base| + |target|), so children never overflow their parent. Frames
**   under 0.1% of the root's width are not drawn, nor their descendants;
**   their width still counts in their parent, leaving a gap.
** - Geometry is computed in milli-pixels, each edge rounded from the exact
**   value offset, so a child's [x, x+width] lies inside its parent's and
**   the script can tell ancestors and descendants apart by containment.
** - Each frame is <g><title>NAME\nDETAILS</title><rect/><text/></g>: the
**   first title line is the name exactly (control characters shown as
**   control pictures, bad UTF-8 as U+FFFD), which the script reads back.
*/
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "query/query_int.h"

#define SVG_W 1200                      /* image width, px */
#define SVG_PAD 10                      /* left and right margins, px */
#define FRAME_MW ((SVG_W - 2 * SVG_PAD) * 1000)  /* frame area, milli-px */
#define ROW_H 16                        /* one frame row, px */
#define HEAD_H 60                       /* title, subtitle, buttons */
#define FOOT_H 30                       /* status line */
#define TEXT_PAD_M 3000                 /* label inset, milli-px */
#define CHAR_M 6820                     /* 11px monospace: 0.62em a char */
#define MIN_SHARE 0.001                 /* narrower frames are not drawn */
#define NCOLORS 16                      /* warm palette classes c0..c15 */
#define NDIFF 5                         /* diff shades r1..r5, b1..b5 */
#define TITLE_MAX 60                    /* title characters shown */
#define NO_FN UINT32_MAX                /* the root's name id */

/* A frame placed in the picture, in the order it is written (preorder). */
typedef struct svg_frame {
    uint32_t fn;                /* name id; NO_FN for the root */
    uint32_t depth;             /* 0: the root */
    uint64_t width;             /* sum of |values| through it (saturating) */
    int64_t value, base;        /* signed sums: target (or value) and base */
    int64_t x, w;               /* milli-px within the frame area */
} svg_frame;

/* A frame waiting to be placed: the stacks through it are order[a..b). */
typedef struct svg_pending {
    size_t a, b;
    uint64_t off;               /* value offset from the root's left edge */
    svg_frame fr;               /* all but x and w */
} svg_pending;

typedef struct svg {
    const em_rprofile *p;
    const em_render_opts *o;
    uint32_t *byrank;           /* rank -> name id, names in bytewise order */
    uint32_t *rank;             /* name id -> rank */
    uint32_t *seq;              /* each kept stack's name ranks, root first */
    size_t *seq_off;            /* stack index -> its ranks in seq */
    uint32_t *order;            /* kept stacks (non-zero), sorted by path */
    size_t norder;
    svg_pending *pending;       /* frames waiting to be placed (a stack) */
    size_t npending, cap_pending;
    svg_frame *frames;          /* what is drawn, preorder */
    size_t nframes, cap_frames;
    uint64_t total;             /* the root's width */
    uint64_t pct_total;         /* what details' percentages are of: total,
                                ** or the total before focus and ignore */
    uint32_t max_depth;
    FILE *f;
} svg;

/* ---- text ------------------------------------------------------------ */

/* Writes code point CP as XML character data: markup characters as
** entities, control characters (which XML 1.0 cannot carry even as
** references) as their Unicode control pictures, U+FFFE/U+FFFF as U+FFFD. */
static void put_cp(FILE *f, uint32_t cp)
{
    char b[4];

    switch (cp) {
    case '&': fputs("&amp;", f); return;
    case '<': fputs("&lt;", f); return;
    case '>': fputs("&gt;", f); return;
    case '"': fputs("&quot;", f); return;
    case '\'': fputs("&apos;", f); return;
    default: break;
    }
    if (cp < 0x20)
        cp = 0x2400 + cp;           /* SYMBOL FOR NULL ... UNIT SEPARATOR */
    else if (cp == 0x7f)
        cp = 0x2421;                /* SYMBOL FOR DELETE */
    else if (cp == 0xfffe || cp == 0xffff)
        cp = 0xfffd;
    if (cp < 0x80) {
        fputc((int)cp, f);
        return;
    }
    if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        fwrite(b, 1, 2, f);
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        fwrite(b, 1, 3, f);
    } else {
        b[0] = (char)(0xf0 | cp >> 18);
        b[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        b[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        fwrite(b, 1, 4, f);
    }
}

/* Writes S escaped; when it has more than MAX code points, the first MAX - 2
** and "..", as the script's label() does on zoom. */
static void put_text(FILE *f, const char *s, size_t max)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t len = strlen(s), at = 0;
    size_t keep = max != SIZE_MAX && em_utf8_count(s, len) > max ? max - 2
                                                                 : SIZE_MAX;
    uint32_t cp;

    /* a byte that starts no character is one U+FFFD, so that every name
    ** becomes valid XML */
    for (size_t i = 0; at < len && i < keep; i++) {
        at += em_utf8_decode(u + at, len - at, &cp);
        put_cp(f, cp);
    }
    if (keep != SIZE_MAX)
        fputs("..", f);
}

/* Writes milli-pixels V as px with at most three decimals, no trailing 0s. */
static void put_milli(FILE *f, int64_t v)
{
    int64_t i = v / 1000, r = v % 1000;

    if (r == 0)
        fprintf(f, "%" PRId64, i);
    else if (r % 100 == 0)
        fprintf(f, "%" PRId64 ".%" PRId64, i, r / 100);
    else if (r % 10 == 0)
        fprintf(f, "%" PRId64 ".%02" PRId64, i, r / 10);
    else
        fprintf(f, "%" PRId64 ".%03" PRId64, i, r);
}

/* ---- stacks sorted by call path -------------------------------------- */

/* Rather than a tree of every call path (a million nodes for 50k deep
** stacks, nearly all too narrow to draw), the stacks are sorted by their
** paths as name ranks, root first: then the stacks through any frame are a
** contiguous run, its children are sub-runs already in name order, and only
** frames wide enough to draw are ever looked at. */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* A stack's width: |value|, or |base| + |target| for a diff. */
static uint64_t stack_width(const svg *s, const em_rstack *st)
{
    return sat_add(em_abs64(st->value),
                   s->p->diff ? em_abs64(st->base) : 0);
}

/* What qsort's comparators read (qsort takes no context); thread-local
** keeps concurrent renders apart, as in render_collapsed.c. */
static _Thread_local const svg *sort_svg;

static int name_cmp(const void *a, const void *b)
{
    const em_strtab *t = &sort_svg->p->names;
    return strcmp(em_strtab_get(t, *(const uint32_t *)a),
                  em_strtab_get(t, *(const uint32_t *)b));
}

/* Root first, rank by rank; a path before its extensions. */
static int path_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const uint32_t *px = sort_svg->seq + sort_svg->seq_off[x];
    const uint32_t *py = sort_svg->seq + sort_svg->seq_off[y];
    size_t nx = sort_svg->p->stacks[x].nframes;
    size_t ny = sort_svg->p->stacks[y].nframes;

    for (size_t i = 0; i < nx && i < ny; i++)
        if (px[i] != py[i])
            return px[i] < py[i] ? -1 : 1;
    return (nx > ny) - (nx < ny);
}

/* s->byrank and s->rank: the names in bytewise order. */
static int rank_names(svg *s)
{
    uint32_t n = s->p->names.count;

    s->byrank = em_calloc(n == 0 ? 1 : n, sizeof *s->byrank);
    s->rank = em_calloc(n == 0 ? 1 : n, sizeof *s->rank);
    if (s->byrank == NULL || s->rank == NULL)
        return em_err(EMBER_ENOMEM, "svg: %u names", n);
    for (uint32_t i = 0; i < n; i++)
        s->byrank[i] = i;
    sort_svg = s;
    qsort(s->byrank, n, sizeof *s->byrank, name_cmp);
    sort_svg = NULL;
    for (uint32_t i = 0; i < n; i++)
        s->rank[s->byrank[i]] = i;
    return EMBER_OK;
}

/* s->order: the stacks of non-zero width; s->seq: their paths as ranks. */
static int paths_build(svg *s)
{
    const em_rprofile *p = s->p;
    size_t nseq = 0, k = 0;

    if (p->nstacks > UINT32_MAX)
        return em_err(EMBER_ELIMIT, "svg: %zu stacks", p->nstacks);
    for (size_t i = 0; i < p->nstacks; i++)
        if (stack_width(s, &p->stacks[i]) > 0)
            nseq += p->stacks[i].nframes;
    s->seq = em_malloc((nseq == 0 ? 1 : nseq) * sizeof *s->seq);
    s->seq_off = em_malloc((p->nstacks == 0 ? 1 : p->nstacks) *
                           sizeof *s->seq_off);
    s->order = em_malloc((p->nstacks == 0 ? 1 : p->nstacks) *
                         sizeof *s->order);
    if (s->seq == NULL || s->seq_off == NULL || s->order == NULL)
        return em_err(EMBER_ENOMEM, "svg: paths of %zu frames", nseq);
    for (size_t i = 0; i < p->nstacks; i++) {
        const em_rstack *st = &p->stacks[i];
        uint64_t w = stack_width(s, st);
        if (w == 0)
            continue;
        s->order[s->norder++] = (uint32_t)i;
        s->seq_off[i] = k;
        for (size_t j = st->nframes; j-- > 0;)
            s->seq[k++] = s->rank[p->frames[st->first + j].fn];
        s->total = sat_add(s->total, w);
    }
    sort_svg = s;
    qsort(s->order, s->norder, sizeof *s->order, path_cmp);
    sort_svg = NULL;
    return EMBER_OK;
}

/* ---- layout ---------------------------------------------------------- */

/* Milli-pixel position of value offset OFF in the frame area. */
static int64_t to_milli(uint64_t off, uint64_t total)
{
    return (int64_t)llround((double)off / (double)total * FRAME_MW);
}

/* Grows *ARR of *CAP elements of SIZE bytes to hold one more than N. */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
    void *a = em_grow(*arr, cap, n + 1, size);

    if (a == NULL)
        return em_err(EMBER_ENOMEM, "svg: %zu frames", n + 1);
    *arr = a;
    return EMBER_OK;
}

/* Adds stack ST to the sums of FR. */
static void frame_add(const svg *s, svg_frame *fr, const em_rstack *st)
{
    fr->width = sat_add(fr->width, stack_width(s, st));
    fr->value = em_add_wrap(fr->value, st->value);
    if (s->p->diff)
        fr->base = em_add_wrap(fr->base, st->base);
}

/* Pushes the children of T wide enough to draw, in reverse order so that
** they pop left to right. The stacks that end at T come first in its run
** (a path sorts before its extensions) and are skipped: T's self value is
** the gap to the right of its children. */
static int push_children(svg *s, const svg_pending *t)
{
    const em_rstack *stacks = s->p->stacks;
    uint32_t d = t->fr.depth;
    size_t i = t->a, first = s->npending;
    uint64_t off = t->off;
    int rc;

    while (i < t->b && stacks[s->order[i]].nframes <= d)
        i++;
    while (i < t->b) {
        uint32_t r = s->seq[s->seq_off[s->order[i]] + d];
        svg_pending c = { .a = i, .off = off,
                       .fr = { .fn = s->byrank[r], .depth = d + 1 } };
        for (; i < t->b && s->seq[s->seq_off[s->order[i]] + d] == r; i++)
            frame_add(s, &c.fr, &stacks[s->order[i]]);
        c.b = i;
        off = sat_add(off, c.fr.width);
        if ((double)c.fr.width < MIN_SHARE * (double)s->total)
            continue;
        if ((rc = grow((void **)&s->pending, &s->cap_pending, s->npending,
                       sizeof *s->pending)) != EMBER_OK)
            return rc;
        s->pending[s->npending++] = c;
    }
    for (size_t a = first, b = s->npending; a + 1 < b; a++, b--) {
        svg_pending tmp = s->pending[a];
        s->pending[a] = s->pending[b - 1];
        s->pending[b - 1] = tmp;
    }
    return EMBER_OK;
}

/* Places every frame wide enough to draw, depth first, into s->frames. */
static int layout(svg *s)
{
    svg_pending root = { .a = 0, .b = s->norder, .fr = { .fn = NO_FN } };
    int rc = grow((void **)&s->pending, &s->cap_pending, 0, sizeof *s->pending);

    if (rc != EMBER_OK || s->total == 0)
        return rc;
    for (size_t i = 0; i < s->norder; i++)
        frame_add(s, &root.fr, &s->p->stacks[s->order[i]]);
    s->pending[s->npending++] = root;
    while (rc == EMBER_OK && s->npending > 0) {
        svg_pending t = s->pending[--s->npending];
        t.fr.x = to_milli(t.off, s->total);
        t.fr.w = to_milli(sat_add(t.off, t.fr.width), s->total) - t.fr.x;
        rc = grow((void **)&s->frames, &s->cap_frames, s->nframes,
                  sizeof *s->frames);
        if (rc != EMBER_OK)
            break;
        s->frames[s->nframes++] = t.fr;
        if (t.fr.depth > s->max_depth)
            s->max_depth = t.fr.depth;
        rc = push_children(s, &t);
    }
    return rc;
}

/* ---- writing --------------------------------------------------------- */

static const char *frame_name(const svg *s, const svg_frame *fr)
{
    return fr->fn == NO_FN ? "all" : em_strtab_get(&s->p->names, fr->fn);
}

/* The style class of a frame: a warm color from the name's hash, or for a
** diff the direction and depth of its change relative to its larger side. */
static void put_class(const svg *s, const svg_frame *n, const char *name)
{
    uint64_t b = em_abs64(n->base), t = em_abs64(n->value);
    double big, rel;
    int level;

    if (!s->p->diff) {
        fprintf(s->f, "c%u", (unsigned)(em_hash64(name, strlen(name), 0) %
                                        NCOLORS));
        return;
    }
    big = (double)(b > t ? b : t);
    rel = big == 0 ? 0 : ((double)n->value - (double)n->base) / big;
    level = (int)ceil(fabs(rel) * NDIFF);
    if (level > NDIFF)
        level = NDIFF;
    if (n->value == n->base || level == 0)
        fputs("d0", s->f);
    else
        fprintf(s->f, "%c%d", rel > 0 ? 'r' : 'b', level);
}

/* Writes the details line of frame N: "1.20s (12.50%)", or for a diff
** "base 1s, target 1.20s, change +200ms (+20.00%)". */
static void put_details(const svg *s, const svg_frame *n)
{
    const char *unit = s->p->unit;
    char v1[EM_VALUE_MAX], v2[EM_VALUE_MAX], v3[EM_VALUE_MAX];
    int64_t change = (int64_t)((uint64_t)n->value - (uint64_t)n->base);
    double share = 100.0 * (double)n->width / (double)s->pct_total;

    if (!s->p->diff) {
        fprintf(s->f, "%s (%.2f%%)", em_format_value(n->value, unit, v1),
                share);
        return;
    }
    fprintf(s->f, "base %s, target %s, change %s%s",
            em_format_value(n->base, unit, v1),
            em_format_value(n->value, unit, v2), change > 0 ? "+" : "",
            em_format_value(change, unit, v3));
    if (n->base != 0)
        fprintf(s->f, " (%+.2f%%)",
                100.0 * (double)change / fabs((double)n->base));
    else if (change != 0)
        fputs(" (new)", s->f);
}

/* Top of the rows area: row DEPTH's rect starts this many px down. */
static int64_t row_y(const svg *s, uint32_t depth)
{
    return HEAD_H + (int64_t)(s->max_depth - depth) * ROW_H;
}

static void put_frame(const svg *s, const svg_frame *fr)
{
    const char *name = frame_name(s, fr);
    int64_t y = row_y(s, fr->depth);
    int64_t fit = (fr->w - 2 * TEXT_PAD_M) / CHAR_M;

    fputs("<g><title>", s->f);
    put_text(s->f, name, SIZE_MAX);
    fputc('\n', s->f);
    put_details(s, fr);
    fputs("</title><rect x=\"", s->f);
    put_milli(s->f, SVG_PAD * 1000 + fr->x);
    fprintf(s->f, "\" y=\"%" PRId64 "\" width=\"", y);
    put_milli(s->f, fr->w);
    fputs("\" height=\"15\" class=\"", s->f);
    put_class(s, fr, name);
    fputs("\"/>", s->f);
    if (fr->w >= 2 * TEXT_PAD_M && fit >= 3) {
        fputs("<text x=\"", s->f);
        put_milli(s->f, SVG_PAD * 1000 + fr->x + TEXT_PAD_M);
        fprintf(s->f, "\" y=\"%" PRId64 "\">", y + 11);
        put_text(s->f, name, (size_t)fit);
        fputs("</text>", s->f);
    }
    fputs("</g>\n", s->f);
}

/* The style: the warm palette (flamegraph.pl's "hot" range: red 205-255,
** green 0-230, blue 0-55), the diff shades, highlight and zoom states. */
static const char svg_style[] =
    "text{font:11px monospace;fill:#000}\n"
    "#title{font:bold 15px monospace;text-anchor:middle}\n"
    "#sub{font-size:12px;text-anchor:middle;fill:#555}\n"
    ".btn{cursor:pointer;fill:#2050c0}\n"
    "#q{width:226px;font:12px monospace}\n"
    "#f g{cursor:pointer}\n"
    "#f g:hover rect{stroke:#000;stroke-width:.5}\n"
    ".hide{display:none}\n"
    ".anc rect{fill-opacity:.5}\n"
    ".hl rect{fill:#e600e6}\n"
    ".c0{fill:#e0522a}.c1{fill:#f08c1c}.c2{fill:#d8421e}.c3{fill:#fab41f}\n"
    ".c4{fill:#e46f2d}.c5{fill:#f59e33}.c6{fill:#dc5a0f}.c7{fill:#fcc82e}\n"
    ".c8{fill:#e7351b}.c9{fill:#f37f26}.c10{fill:#d96a31}.c11{fill:#fbd236}\n"
    ".c12{fill:#eb4b12}.c13{fill:#f4a62a}.c14{fill:#de7b22}"
    ".c15{fill:#f9be0c}\n"
    ".d0{fill:#e8e8e8}\n"
    ".r1{fill:#ffd6d6}.r2{fill:#ffadad}.r3{fill:#ff8585}.r4{fill:#ff5c5c}"
    ".r5{fill:#f52a2a}\n"
    ".b1{fill:#d6e2ff}.b2{fill:#adc5ff}.b3{fill:#85a8ff}.b4{fill:#5c8bff}"
    ".b5{fill:#2a64f5}\n";

/* The script: zoom, search, status line. Geometry is read back from the
** rects (milli-px, as written) so nothing is stored twice. */
static const char svg_script[] =
    "\"use strict\";\n"
    "var fr=[],byG=new Map(),zoomed=null,NS=\"http://www.w3.org/2000/svg\";\n"
    "function $(id){return document.getElementById(id);}\n"
    "function init(){\n"
    " var gs=document.querySelectorAll(\"#f>g\");\n"
    " for(var i=0;i<gs.length;i++){\n"
    "  var g=gs[i],r=g.querySelector(\"rect\"),t=g.querySelector(\"title\")"
    ".textContent,k=t.indexOf(\"\\n\");\n"
    "  var f={g:g,r:r,t:g.querySelector(\"text\"),i:i,\n"
    "   n:k<0?t:t.slice(0,k),d:k<0?\"\":t.slice(k+1),\n"
    "   x:Math.round((parseFloat(r.getAttribute(\"x\"))-PAD)*1000),\n"
    "   w:Math.round(parseFloat(r.getAttribute(\"width\"))*1000),\n"
    "   y:parseFloat(r.getAttribute(\"y\"))};\n"
    "  fr.push(f);byG.set(g,f);\n"
    " }\n"
    " var box=$(\"f\"),q=$(\"q\");\n"
    " box.addEventListener(\"click\",function(e){var f=frameAt(e.target);"
    "if(f)zoom(f.g);});\n"
    " box.addEventListener(\"mouseover\",function(e){var f=frameAt(e.target);"
    "if(f)$(\"details\").textContent=f.n+\": \"+f.d;});\n"
    " box.addEventListener(\"mouseout\",function(){"
    "$(\"details\").textContent=\" \";});\n"
    " $(\"unzoom\").addEventListener(\"click\",unzoom);\n"
    " $(\"sbtn\").addEventListener(\"click\",function(){"
    "if(q.value)search(q.value);else q.focus();});\n"
    " q.addEventListener(\"input\",function(){search(q.value);});\n"
    " q.addEventListener(\"keydown\",function(e){if(e.key===\"Escape\")"
    "{q.value=\"\";search(\"\");}});\n"
    " document.addEventListener(\"keydown\",function(e){\n"
    "  if((e.ctrlKey&&e.key===\"f\")||(e.key===\"/\"&&"
    "document.activeElement!==q)){e.preventDefault();q.focus();}});\n"
    "}\n"
    "function frameAt(el){var g=el&&el.closest?el.closest(\"#f>g\"):null;"
    "return g?byG.get(g):null;}\n"
    "/* the label that fits W milli-px, cut as the renderer cuts it */\n"
    "function label(f,w){\n"
    " var n=Math.floor((w-2*TPAD)/CHARW);\n"
    " if(n<3)return \"\";\n"
    " if(f.n.length<=n)return f.n;\n"
    " var a=Array.from(f.n);\n"
    " return a.length<=n?f.n:a.slice(0,n-2).join(\"\")+\"..\";\n"
    "}\n"
    "function px(m){return String(Math.round(m)/1000);}\n"
    "function place(f,x,w,cls){\n"
    " f.r.setAttribute(\"x\",px(PAD*1000+x));"
    "f.r.setAttribute(\"width\",px(w));\n"
    " var s=label(f,w);\n"
    " if(!f.t&&s){f.t=document.createElementNS(NS,\"text\");"
    "f.t.setAttribute(\"y\",f.y+11);f.g.appendChild(f.t);}\n"
    " if(f.t){f.t.setAttribute(\"x\",px(PAD*1000+x+TPAD));"
    "f.t.textContent=s;}\n"
    " f.g.classList.remove(\"hide\",\"anc\");if(cls)f.g.classList.add(cls);\n"
    "}\n"
    "function hide(f){f.g.classList.add(\"hide\");}\n"
    "/* G fills the width: descendants scale with it, ancestors span the\n"
    "   width faded, every other frame is hidden (the root resets) */\n"
    "function zoom(g){\n"
    " var z=byG.get(g);if(!z)return;if(z.i===0)return unzoom();\n"
    " var s=FW/z.w;\n"
    " fr.forEach(function(f){\n"
    "  if(f.y<=z.y){if(f.x>=z.x&&f.x+f.w<=z.x+z.w)"
    "place(f,(f.x-z.x)*s,f.w*s,null);else hide(f);}\n"
    "  else if(f.x<=z.x&&f.x+f.w>=z.x+z.w)place(f,0,FW,\"anc\");\n"
    "  else hide(f);});\n"
    " zoomed=z;$(\"unzoom\").classList.remove(\"hide\");\n"
    "}\n"
    "function unzoom(){fr.forEach(function(f){place(f,f.x,f.w,null);});"
    "zoomed=null;$(\"unzoom\").classList.add(\"hide\");}\n"
    "/* highlights frames whose name matches TERM (a regex; a literal\n"
    "   substring when it is not one); returns how many */\n"
    "function search(term){\n"
    " var re=null,hits=[],cov=0,end=-1;\n"
    " if(term){try{re=new RegExp(term);}catch(e){re=null;}}\n"
    " fr.forEach(function(f){\n"
    "  var m=!!term&&f.i!==0&&(re?re.test(f.n):f.n.indexOf(term)>=0);\n"
    "  f.g.classList.toggle(\"hl\",m);if(m)hits.push(f);});\n"
    " hits.sort(function(a,b){return a.x-b.x;});\n"
    " hits.forEach(function(f){var s=Math.max(f.x,end),e=f.x+f.w;"
    "if(e>s){cov+=e-s;end=e;}});\n"
    " $(\"matched\").textContent=term?\"Matched: \"+"
    "(100*cov/FW*SHARE).toFixed(2)"
    "+\"% (\"+hits.length+\" frames)\":\" \";\n"
    " return hits.length;\n"
    "}\n"
    "init();\n";

static void put_head(const svg *s, const char *title, int64_t height)
{
    fprintf(s->f, "<?xml version=\"1.0\" encoding=\"UTF-8\" "
            "standalone=\"no\"?>\n"
            "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%d\" height=\"%" PRId64 "\" viewBox=\"0 0 %d %" PRId64
            "\">\n<title>", SVG_W, height, SVG_W, height);
    put_text(s->f, title, SIZE_MAX);
    fprintf(s->f, "</title>\n<style>\n%s</style>\n"
            "<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" "
            "y2=\"1\"><stop stop-color=\"#eeeeee\" offset=\"5%%\"/>"
            "<stop stop-color=\"#eeeeb0\" offset=\"95%%\"/></linearGradient>"
            "</defs>\n<rect width=\"100%%\" height=\"100%%\" "
            "fill=\"url(#bg)\"/>\n<text id=\"title\" x=\"%d\" y=\"24\">",
            svg_style, SVG_W / 2);
    /* the whole as a tooltip */
    if (em_utf8_count(title, strlen(title)) > TITLE_MAX) {
        fputs("<title>", s->f);
        put_text(s->f, title, SIZE_MAX);
        fputs("</title>", s->f);
    }
    put_text(s->f, title, TITLE_MAX);
    fprintf(s->f, "</text>\n<text id=\"sub\" x=\"%d\" y=\"42\">", SVG_W / 2);
}

/* The subtitle: what the widths and colors mean. */
static void put_subtitle(const svg *s)
{
    const svg_frame *r = s->frames;     /* NULL when there are none */
    char v[EM_VALUE_MAX], w[EM_VALUE_MAX];

    put_text(s->f, s->p->sample_type[0] != '\0' ? s->p->sample_type
                                                 : "samples", SIZE_MAX);
    fputs(" (", s->f);
    put_text(s->f, s->p->unit, SIZE_MAX);
    fputs(")", s->f);
    if (s->nframes == 0) {
        fputs(": no samples", s->f);
        return;
    }
    if (!s->p->diff && s->pct_total != s->total) {
        fprintf(s->f, ": %s of %s total", em_format_value(r->value,
                s->p->unit, v), em_format_value((int64_t)s->pct_total,
                                                s->p->unit, w));
        return;
    }
    if (!s->p->diff) {
        fprintf(s->f, ": %s total", em_format_value(r->value, s->p->unit, v));
        return;
    }
    fputs(", diff: ", s->f);
    put_details(s, r);
    fputs(". Width: base + target; red grew, blue shrank, deeper "
          "is a larger change", s->f);
}

static void put_controls(const svg *s, int64_t height)
{
    fprintf(s->f, "</text>\n"
            "<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"24\">"
            "Reset Zoom</text>\n"
            "<foreignObject x=\"%d\" y=\"9\" width=\"236\" height=\"24\">"
            "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"q\" "
            "type=\"search\" placeholder=\"search (regex)\"/>"
            "</foreignObject>\n"
            "<text id=\"sbtn\" class=\"btn\" x=\"%d\" y=\"24\" "
            "text-anchor=\"end\">Search</text>\n"
            "<text id=\"details\" x=\"%d\" y=\"%" PRId64 "\"> </text>\n"
            "<text id=\"matched\" x=\"%d\" y=\"%" PRId64 "\" "
            "text-anchor=\"end\"> </text>\n",
            SVG_PAD, SVG_W - SVG_PAD - 60 - 236, SVG_W - SVG_PAD, SVG_PAD,
            height - 10, SVG_W - SVG_PAD, height - 10);
}

static void put_tail(const svg *s)
{
    /* SHARE: the root's part of the total percentages are of */
    fprintf(s->f, "<script><![CDATA[\nvar FW=%d,PAD=%d,TPAD=%d,CHARW=%d,"
            "SHARE=%.6g;\n%s]]></script>\n</svg>\n", FRAME_MW, SVG_PAD,
            TEXT_PAD_M, CHAR_M, s->pct_total > 0 ? (double)s->total /
            (double)s->pct_total : 1.0, svg_script);
}

static void write_svg(const svg *s)
{
    const char *title = s->o != NULL && s->o->title != NULL ? s->o->title
                      : s->o != NULL && s->o->query != NULL ? s->o->query
                      : "Flame Graph";
    int64_t height = HEAD_H + (int64_t)(s->max_depth + 1) * ROW_H + FOOT_H;

    put_head(s, title, height);
    put_subtitle(s);
    put_controls(s, height);
    fputs("<g id=\"f\">\n", s->f);
    for (size_t i = 0; i < s->nframes; i++)
        put_frame(s, &s->frames[i]);
    fputs("</g>\n", s->f);
    put_tail(s);
}

int em_render_svg(FILE *f, const em_rprofile *p, const em_render_opts *o)
{
    svg s = { .p = p, .o = o, .f = f };
    int rc = rank_names(&s);

    if (rc == EMBER_OK)
        rc = paths_build(&s);
    /* pprof's flame graph, like its -top, shares of the whole selection */
    s.pct_total = p->has_whole && !o->relative && !p->diff && p->whole > 0 ?
                  (uint64_t)p->whole : s.total;
    if (rc == EMBER_OK)
        rc = layout(&s);
    if (rc == EMBER_OK)
        write_svg(&s);
    if (rc == EMBER_OK && ferror(f))
        rc = em_err(EMBER_EIO, "svg: write failed");
    em_free(s.byrank);
    em_free(s.rank);
    em_free(s.seq);
    em_free(s.seq_off);
    em_free(s.order);
    em_free(s.pending);
    em_free(s.frames);
    return rc;
}
