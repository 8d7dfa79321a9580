/*
** tests/unit/test_render_svg.c: the svg flame graph (query/render_svg.c) on
** hand-built profiles and on real Go profiles imported from
** tests/data/pprof: the file is well-formed XML (checked here by a small
** parser: balanced tags, quoted attributes, known entities, valid UTF-8,
** no control characters), nasty names are escaped, widths nest and sum,
** tiny frames are left out but counted, diffs are colored by their change,
** the output depends on the data only, big profiles render fast and small,
** and every allocation failure is an ENOMEM without leaks. The browser side
** (click to zoom, search) is tests/e2e/svg_browser.sh.
*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "common/testutil.h"

#define DATA_DIR "tests/data/pprof"
#define CPU_NANOS "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
#define NS_TYPE "x:cpu:nanoseconds:cpu:nanoseconds"
#define FULL_W 1180000              /* the frame area, milli-px */

/* ---- building profiles ----------------------------------------------- */

/* Splits SPEC, written root first ("main;foo;bar"), into FRAMES leaf first,
** interning the names in P; returns the frame count. */
static size_t frames_of(em_rprofile *p, const char *spec, em_rframe *frames)
{
    char buf[1024], *names[128], *save = NULL;
    size_t n = 0;

    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok_r(buf, ";", &save); tok != NULL && n < 128;
         tok = strtok_r(NULL, ";", &save))
        names[n++] = tok;
    for (size_t i = 0; i < n; i++) {
        const char *name = names[n - 1 - i];
        frames[i].flags = 0;
        assert_int_equal(em_strtab_intern(&p->names, name, strlen(name),
                                          &frames[i].fn), EMBER_OK);
    }
    return n;
}

static void add(em_rprofile *p, const char *spec, int64_t value)
{
    em_rframe frames[128];
    size_t n = frames_of(p, spec, frames);

    assert_int_equal(em_rprofile_add(p, frames, n, value), EMBER_OK);
}

static void add_diff(em_rprofile *p, const char *spec, int64_t base,
                     int64_t target)
{
    em_rframe frames[128];
    size_t n = frames_of(p, spec, frames);

    assert_int_equal(em_rprofile_add_diff(p, frames, n, base, target),
                     EMBER_OK);
}

static void init(em_rprofile *p, const char *type)
{
    assert_int_equal(em_rprofile_init(p, type), EMBER_OK);
}

/* ---- rendering to a string ------------------------------------------- */

/* Renders P with OPTS (may be NULL) into a new string (free it). */
static char *render(const em_rprofile *p, const em_render_opts *opts,
                    size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);

    assert_non_null(f);
    assert_int_equal(em_render_svg(f, p, opts), EMBER_OK);
    assert_int_equal(fclose(f), 0);
    if (len != NULL)
        *len = n;
    return text;
}

/* ---- a small XML well-formedness checker ---------------------------- */

typedef struct xml {
    const char *s;
    size_t i, n;
    const char *why;            /* first problem found, or NULL */
    size_t at;                  /* its byte offset */
} xml;

static bool xml_fail(xml *x, const char *why)
{
    if (x->why == NULL) {
        x->why = why;
        x->at = x->i;
    }
    return false;
}

/* Every character is valid UTF-8 and allowed by XML 1.0's Char rule. */
static bool xml_chars(xml *x)
{
    const unsigned char *u = (const unsigned char *)x->s;

    for (x->i = 0; x->i < x->n;) {
        unsigned char c = u[x->i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1fu
                    : len == 3 ? c & 0x0fu : c & 0x07u;
        static const uint32_t mins[] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (len == 0 || x->i + len > x->n)
            return xml_fail(x, "bad UTF-8 lead byte");
        for (size_t k = 1; k < len; k++) {
            if ((u[x->i + k] & 0xc0) != 0x80)
                return xml_fail(x, "bad UTF-8 continuation");
            cp = cp << 6 | (u[x->i + k] & 0x3fu);
        }
        if (cp < mins[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return xml_fail(x, "overlong or out-of-range UTF-8");
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') ||
            cp == 0xfffe || cp == 0xffff)
            return xml_fail(x, "character not allowed in XML");
        x->i += len;
    }
    return true;
}

static bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == ':';
}

static bool is_name_char(char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Length of the name at x->i (0: none). */
static size_t xml_name(const xml *x)
{
    size_t k = x->i;

    if (k >= x->n || !is_name_start(x->s[k]))
        return 0;
    while (k < x->n && is_name_char(x->s[k]))
        k++;
    return k - x->i;
}

/* The reference at x->i ('&'): a predefined entity or a character one. */
static bool xml_ref(xml *x)
{
    static const char *const ents[] = { "&amp;", "&lt;", "&gt;", "&quot;",
                                        "&apos;" };
    const char *p = x->s + x->i;

    for (size_t k = 0; k < 5; k++)
        if (strncmp(p, ents[k], strlen(ents[k])) == 0) {
            x->i += strlen(ents[k]);
            return true;
        }
    if (strncmp(p, "&#x", 3) == 0 && strspn(p + 3, "0123456789abcdefABCDEF")
        > 0 && p[3 + strspn(p + 3, "0123456789abcdefABCDEF")] == ';') {
        x->i += 4 + strspn(p + 3, "0123456789abcdefABCDEF");
        return true;
    }
    if (strncmp(p, "&#", 2) == 0 && strspn(p + 2, "0123456789") > 0 &&
        p[2 + strspn(p + 2, "0123456789")] == ';') {
        x->i += 3 + strspn(p + 2, "0123456789");
        return true;
    }
    return xml_fail(x, "bad entity reference");
}

/* Character data up to the next '<'; outside the root only blanks. */
static bool xml_text(xml *x, bool in_root)
{
    while (x->i < x->n && x->s[x->i] != '<') {
        char c = x->s[x->i];
        if (!in_root && c != ' ' && c != '\n' && c != '\t' && c != '\r')
            return xml_fail(x, "text outside the root element");
        if (c == '&') {
            if (!xml_ref(x))
                return false;
            continue;
        }
        if (c == '>' && x->i >= 2 && strncmp(x->s + x->i - 2, "]]>", 3) == 0)
            return xml_fail(x, "]]> in text");
        x->i++;
    }
    return true;
}

/* Skips from x->i past the next END; false when there is none. */
static bool xml_skip_past(xml *x, const char *end, const char *why)
{
    const char *e = strstr(x->s + x->i, end);

    if (e == NULL)
        return xml_fail(x, why);
    x->i = (size_t)(e - x->s) + strlen(end);
    return true;
}

/* Attributes then '>' or "/>"; *EMPTY is set for "/>". */
static bool xml_attrs(xml *x, bool *empty)
{
    for (;;) {
        size_t sp = strspn(x->s + x->i, " \t\r\n"), len;
        char q;
        x->i += sp;
        if (x->s[x->i] == '>' || strncmp(x->s + x->i, "/>", 2) == 0) {
            *empty = x->s[x->i] == '/';
            x->i += *empty ? 2 : 1;
            return true;
        }
        if (sp == 0 || (len = xml_name(x)) == 0)
            return xml_fail(x, "expected an attribute");
        x->i += len;
        if (x->s[x->i] != '=' || (x->s[x->i + 1] != '"' &&
                                  x->s[x->i + 1] != '\''))
            return xml_fail(x, "attribute without a quoted value");
        q = x->s[x->i + 1];
        for (x->i += 2; x->i < x->n && x->s[x->i] != q;) {
            if (x->s[x->i] == '<')
                return xml_fail(x, "'<' in an attribute value");
            if (x->s[x->i] == '&' ? !xml_ref(x) : (x->i++, false))
                return false;
        }
        if (x->i >= x->n)
            return xml_fail(x, "unterminated attribute value");
        x->i++;
    }
}

/* Checks that S (N bytes) is one well-formed XML document; on failure
** prints why and where. */
static bool xml_ok(const char *s, size_t n)
{
    xml x = { .s = s, .n = n };
    size_t open[512][2], depth = 0, roots = 0;

    if (!xml_chars(&x))
        goto bad;
    for (x.i = 0; x.i < n;) {
        if (!xml_text(&x, depth > 0))
            goto bad;
        if (x.i >= n)
            break;
        if (strncmp(s + x.i, "<?", 2) == 0) {
            if (!xml_skip_past(&x, "?>", "unterminated <?"))
                goto bad;
        } else if (strncmp(s + x.i, "<!--", 4) == 0) {
            if (!xml_skip_past(&x, "-->", "unterminated comment"))
                goto bad;
        } else if (strncmp(s + x.i, "<![CDATA[", 9) == 0) {
            if (depth == 0 || !xml_skip_past(&x, "]]>", "unterminated CDATA"))
                goto bad;
        } else if (strncmp(s + x.i, "</", 2) == 0) {
            size_t len;
            x.i += 2;
            len = xml_name(&x);
            if (depth == 0 || len != open[depth - 1][1] ||
                strncmp(s + x.i, s + open[depth - 1][0], len) != 0) {
                xml_fail(&x, "end tag does not match");
                goto bad;
            }
            x.i += len;
            if (s[x.i] != '>') {
                xml_fail(&x, "expected '>'");
                goto bad;
            }
            x.i++;
            depth--;
        } else {
            bool empty;
            size_t len;
            x.i++;
            if ((len = xml_name(&x)) == 0 || depth == 512 ||
                (depth == 0 && roots > 0)) {
                xml_fail(&x, "bad start tag, or a second root");
                goto bad;
            }
            open[depth][0] = x.i;
            open[depth][1] = len;
            x.i += len;
            if (!xml_attrs(&x, &empty))
                goto bad;
            roots += depth == 0;
            depth += !empty;
        }
    }
    if (depth == 0 && roots == 1)
        return true;
    xml_fail(&x, "unclosed elements at the end");
bad:
    print_message("not well-formed at byte %zu: %s: ...%.60s...\n", x.at,
                  x.why, s + (x.at > 30 ? x.at - 30 : 0));
    return false;
}

/* ---- reading frames back --------------------------------------------- */

typedef struct frame {
    char name[256];             /* as written, escaped */
    char details[256];
    char label[256];            /* the <text>, "" when none */
    char cls[16];
    int64_t x, y, w;            /* x and w in milli-px from the area's left */
} frame;

static int64_t milli(double px)
{
    return (int64_t)llround(px * 1000);
}

/* Copies the text between S and END (exclusive) into OUT. */
static void copy_until(char *out, size_t cap, const char *s, const char *end)
{
    size_t n = (size_t)(end - s);

    assert_true(n < cap);
    memcpy(out, s, n);
    out[n] = '\0';
}

/* Parses every frame of SVG into a new array (free it); *N gets the count. */
static frame *frames_read(const char *svg, size_t *n)
{
    frame *fr = NULL;
    size_t cap = 0;
    const char *p = strstr(svg, "<g id=\"f\">");

    assert_non_null(p);
    *n = 0;
    while ((p = strstr(p, "<g><title>")) != NULL) {
        const char *nl = strchr(p += 10, '\n'), *end = strstr(p, "</title>");
        double x, y, w;
        frame *f;
        if (*n == cap) {
            cap = cap == 0 ? 64 : cap * 2;
            assert_non_null(fr = realloc(fr, cap * sizeof *fr));
        }
        f = &fr[(*n)++];
        assert_true(nl != NULL && end != NULL && nl < end);
        copy_until(f->name, sizeof f->name, p, nl);
        copy_until(f->details, sizeof f->details, nl + 1, end);
        assert_int_equal(sscanf(end, "</title><rect x=\"%lf\" y=\"%lf\" "
                                "width=\"%lf\" height=\"15\" class=\"%15[^\"]",
                                &x, &y, &w, f->cls), 4);
        f->x = milli(x) - 10000;
        f->y = (int64_t)y;
        f->w = milli(w);
        p = strstr(end, "/>") + 2;
        f->label[0] = '\0';
        if (strncmp(p, "<text", 5) == 0)
            copy_until(f->label, sizeof f->label, strchr(p, '>') + 1,
                       strstr(p, "</text>"));
    }
    return fr;
}

static const frame *frame_named(const frame *fr, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(fr[i].name, name) == 0)
            return &fr[i];
    fail_msg("no frame named %s", name);
    return fr;                          /* not reached: fail_msg jumps */
}

/* Frames LAST[FROM..TO] are complete: with EXACT, each with children has
** them summing to its width (no self values, no tiny frames). */
static void close_levels(const frame *fr, const size_t *last,
                         const int64_t *sum, size_t from, size_t to,
                         bool exact)
{
    for (size_t l = from; exact && l <= to; l++)
        if (sum[l] > 0)
            assert_int_equal(sum[l], fr[last[l]].w);
}

/* Checks nesting in preorder: each frame lies inside the last frame one row
** below (its parent), after its left sibling, and children never sum past
** their parent (with EXACT, to it). Returns the parent-child pairs seen. */
static size_t check_nesting(const frame *fr, size_t n, bool exact)
{
    size_t last[1024] = { 0 }, pairs = 0, top = 0;
    int64_t sum[1024] = { 0 }, end[1024] = { 0 };
    int64_t bottom = fr[0].y;

    assert_int_equal(fr[0].x, 0);
    assert_int_equal(fr[0].w, FULL_W);
    for (size_t i = 1; i < n; i++) {
        size_t d = (size_t)(bottom - fr[i].y) / 16;
        const frame *par;
        assert_true(d >= 1 && d < 1024 && d <= top + 1);
        close_levels(fr, last, sum, d, top, exact);
        par = &fr[last[d - 1]];
        assert_true(fr[i].x >= par->x && fr[i].x + fr[i].w <= par->x + par->w);
        assert_true(fr[i].w > 0);
        assert_true(fr[i].x >= end[d - 1]);    /* after its left sibling */
        end[d - 1] = fr[i].x + fr[i].w;
        sum[d - 1] += fr[i].w;
        assert_true(sum[d - 1] <= par->w);
        last[d] = i;
        sum[d] = 0;
        end[d] = fr[i].x;
        top = d;
        pairs++;
    }
    close_levels(fr, last, sum, 0, top, exact);
    return pairs;
}

/* ---- hand-built profiles -------------------------------------------- */

static void test_small(void **state)
{
    em_rprofile p;
    em_render_opts o = { .sz = sizeof o, .query = "cpu{a=\"b\"}" };
    frame *fr;
    size_t n, len;
    char *svg;
    (void)state;

    init(&p, NS_TYPE);
    add(&p, "main;a", 30);
    add(&p, "main;b", 70);
    svg = render(&p, &o, &len);
    assert_true(xml_ok(svg, len));
    assert_non_null(strstr(svg, "<title>cpu{a=&quot;b&quot;}</title>"));
    assert_non_null(strstr(svg, "cpu (nanoseconds): 100ns total"));
    assert_non_null(strstr(svg, "<script><![CDATA["));
    assert_null(strstr(svg, "href"));            /* nothing fetched */
    assert_null(strstr(svg, "src="));
    assert_null(strstr(svg, "style=\""));
    fr = frames_read(svg, &n);
    assert_int_equal(n, 4);
    assert_string_equal(fr[0].name, "all");
    assert_string_equal(fr[0].details, "100ns (100.00%)");
    assert_string_equal(fr[1].name, "main");
    assert_int_equal(fr[1].w, FULL_W);
    assert_int_equal(fr[1].y, fr[0].y - 16);   /* the root at the bottom */
    assert_string_equal(fr[2].name, "a");
    assert_string_equal(fr[2].details, "30ns (30.00%)");
    assert_int_equal(fr[2].x, 0);
    assert_int_equal(fr[2].w, 354000);
    assert_string_equal(fr[3].name, "b");
    assert_int_equal(fr[3].x, 354000);
    assert_int_equal(fr[3].w, 826000);
    assert_string_equal(fr[3].label, "b");
    assert_int_equal(check_nesting(fr, n, true), 3);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

/* A small LCG so that generated profiles are the same on every run. */
static uint32_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

/* Stacks of exactly three frames, none tiny: children sum to parents. */
static void test_widths_sum(void **state)
{
    static const char *const l1[] = { "m1", "m2", "m3" };
    static const char *const l2[] = { "x", "y", "z" };
    static const char *const l3[] = { "p", "q", "r" };
    uint64_t seed = 7;
    em_rprofile p;
    frame *fr;
    size_t n, len;
    char *svg, spec[64];
    (void)state;

    init(&p, NS_TYPE);
    for (int i = 0; i < 27; i++) {
        snprintf(spec, sizeof spec, "%s;%s;%s", l1[i / 9], l2[i / 3 % 3],
                 l3[i % 3]);
        add(&p, spec, 100 + rnd(&seed) % 900);
    }
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    assert_non_null(strstr(svg, "<title>Flame Graph</title>"));
    fr = frames_read(svg, &n);
    assert_int_equal(n, 1 + 3 + 9 + 27);
    assert_int_equal(check_nesting(fr, n, true), n - 1);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

/* Random stacks with self values, recursion and tiny frames: nesting
** holds, and the frames drawn are the call paths of at least 0.1%. */
static void test_widths_random(void **state)
{
    static const char *const names[] = { "main", "a", "b", "c", "d", "e" };
    uint64_t seed = 42;
    em_rprofile p;
    frame *fr;
    size_t n, len;
    char *svg;
    (void)state;

    init(&p, "x:alloc_space:bytes:space:bytes");
    for (int i = 0; i < 400; i++) {
        char spec[256] = "main";
        int depth = 1 + (int)(rnd(&seed) % 8);
        for (int d = 0; d < depth; d++) {
            strcat(spec, ";");
            strcat(spec, names[rnd(&seed) % 6]);
        }
        add(&p, spec, rnd(&seed) % 3 == 0 ? 1 : (int64_t)(rnd(&seed) % 5000));
    }
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    assert_true(n > 50);
    assert_int_equal(check_nesting(fr, n, false), n - 1);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

static void test_tiny_frames(void **state)
{
    em_rprofile p;
    frame *fr;
    size_t n, len;
    char *svg;
    (void)state;

    init(&p, NS_TYPE);
    add(&p, "main;big", 100000);
    add(&p, "main;mtiny;deeper", 50);       /* 0.05%: not drawn */
    add(&p, "main;small", 200);              /* 0.2%: drawn */
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    assert_int_equal(n, 4);
    assert_null(strstr(svg, "mtiny"));
    assert_null(strstr(svg, "deeper"));
    assert_string_equal(frame_named(fr, n, "main")->details,
                        "100.25us (100.00%)");
    assert_int_equal(frame_named(fr, n, "main")->w, FULL_W);
    /* big, then the gap mtiny leaves, then small, at its offset */
    assert_int_equal(frame_named(fr, n, "big")->w,
                     llround(100000.0 / 100250 * FULL_W));
    assert_int_equal(frame_named(fr, n, "small")->x,
                     llround(100050.0 / 100250 * FULL_W));
    assert_string_equal(frame_named(fr, n, "small")->label, "");
    check_nesting(fr, n, false);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

static void test_escaping(void **state)
{
    em_rprofile p;
    em_render_opts o = { .sz = sizeof o, .title = "<script>&\"x\"</script>",
                         .query = "ignored" };
    size_t len;
    char *svg;
    (void)state;

    init(&p, NS_TYPE);
    add(&p, "main;a&b<c>\"d'e", 10);
    add(&p, "main;ctl\x01\x1f\x7f" "end", 10);
    add(&p, "main;bad\xff\xfe" "utf", 10);
    add(&p, "main;\xc3\xa9t\xc3\xa9 \xf0\x9f\x94\xa5", 10);
    add(&p, "main;cdata]]>end", 10);
    add(&p, "main;sur\xed\xa0\x80" "rogate", 10);
    add(&p, "main;over\xc0\xaflong", 10);
    add(&p, "main;cut\xe2\x82", 10);           /* cut short at the end */
    add(&p, "main;nonchar\xef\xbf\xbf", 10);
    svg = render(&p, &o, &len);
    assert_true(xml_ok(svg, len));
    assert_non_null(strstr(svg, "<title>&lt;script&gt;&amp;&quot;x&quot;"
                                "&lt;/script&gt;</title>"));
    assert_null(strstr(svg, "ignored"));
    assert_non_null(strstr(svg, "<title>a&amp;b&lt;c&gt;&quot;d&apos;e\n"));
    assert_non_null(strstr(svg, "ctl\xe2\x90\x81\xe2\x90\x9f\xe2\x90\xa1"
                                "end\n"));
    assert_non_null(strstr(svg, "bad\xef\xbf\xbd\xef\xbf\xbdutf\n"));
    assert_non_null(strstr(svg, "\xc3\xa9t\xc3\xa9 \xf0\x9f\x94\xa5\n"));
    assert_non_null(strstr(svg, "cdata]]&gt;end\n"));
    assert_non_null(strstr(svg, "sur\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                                "rogate\n"));
    assert_non_null(strstr(svg, "over\xef\xbf\xbd\xef\xbf\xbdlong\n"));
    assert_non_null(strstr(svg, "cut\xef\xbf\xbd\xef\xbf\xbd\n"));
    assert_non_null(strstr(svg, "nonchar\xef\xbf\xbd\n"));
    free(svg);
    em_rprofile_free(&p);
}

/* Labels are cut by code points, with "..", the way the script cuts them. */
static void test_labels_cut(void **state)
{
    char name[200] = "main;", *svg;
    em_rprofile p;
    frame *fr;
    size_t n, len;
    (void)state;

    for (int i = 0; i < 60; i++)
        strcat(name, "\xc3\xa9");           /* 60 two-byte characters */
    init(&p, NS_TYPE);
    add(&p, name, 94);
    add(&p, "main;short", 2);               /* 2% = 23.6px: 2 chars: none */
    add(&p, "main;medium_name", 4);         /* 4% = 47.2px: 6 chars */
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    assert_string_equal(frame_named(fr, n, "medium_name")->label, "medi..");
    assert_string_equal(frame_named(fr, n, "short")->label, "");
    /* 94% of 1180px less 6px of insets fits 161 chars: all 60 shown */
    assert_string_equal(frame_named(fr, n, name + 5)->label, name + 5);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
    init(&p, NS_TYPE);
    add(&p, name, 10);
    add(&p, "main;wide", 90);               /* 10% = 118px: 16 chars */
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    assert_int_equal(strlen(frame_named(fr, n, name + 5)->label), 14 * 2 + 2);
    assert_string_equal(frame_named(fr, n, name + 5)->label + 28, "..");
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

static void test_diff(void **state)
{
    em_rprofile p;
    frame *fr;
    size_t n, len;
    char *svg;
    (void)state;

    init(&p, NS_TYPE);
    add_diff(&p, "main;grew", 10, 100);
    add_diff(&p, "main;shrank", 100, 10);
    add_diff(&p, "main;same", 50, 50);
    add_diff(&p, "main;bit", 100, 110);
    add_diff(&p, "main;new", 0, 40);
    add_diff(&p, "main;gone", 40, 0);
    assert_true(p.diff);
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    assert_int_equal(n, 8);
    assert_string_equal(frame_named(fr, n, "grew")->cls, "r5");
    assert_string_equal(frame_named(fr, n, "shrank")->cls, "b5");
    assert_string_equal(frame_named(fr, n, "same")->cls, "d0");
    assert_string_equal(frame_named(fr, n, "bit")->cls, "r1");  /* +10/110 */
    assert_string_equal(frame_named(fr, n, "new")->cls, "r5");
    assert_string_equal(frame_named(fr, n, "gone")->cls, "b5");
    assert_string_equal(frame_named(fr, n, "main")->cls, "r1"); /* 300->310 */
    assert_string_equal(frame_named(fr, n, "grew")->details,
                        "base 10ns, target 100ns, change +90ns (+900.00%)");
    assert_string_equal(frame_named(fr, n, "shrank")->details,
                        "base 100ns, target 10ns, change -90ns (-90.00%)");
    assert_string_equal(frame_named(fr, n, "same")->details,
                        "base 50ns, target 50ns, change 0 (+0.00%)");
    assert_string_equal(frame_named(fr, n, "new")->details,
                        "base 0, target 40ns, change +40ns (new)");
    /* width: base + target, 610 in all; edges rounded from offsets */
    assert_int_equal(frame_named(fr, n, "grew")->x,
                     llround(250.0 / 610 * FULL_W));        /* bit, gone */
    assert_int_equal(frame_named(fr, n, "grew")->w,
                     llround(360.0 / 610 * FULL_W) -
                     llround(250.0 / 610 * FULL_W));
    assert_non_null(strstr(svg, "red grew, blue shrank"));
    check_nesting(fr, n, true);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

static void test_colors_and_determinism(void **state)
{
    static const char *const stacks[] = { "main;a;b", "main;b;a", "main;c",
                                          "other;a", "main;a;c;b" };
    em_rprofile p, q;
    char *s1, *s2, *s3;
    frame *fr;
    size_t n, l1, l2;
    (void)state;

    init(&p, NS_TYPE);
    init(&q, NS_TYPE);
    for (int i = 0; i < 5; i++) {
        add(&p, stacks[i], 10 * (i + 1));
        add(&q, stacks[4 - i], 10 * (5 - i));   /* other order, other ids */
    }
    add(&q, "main;zero", 0);            /* zero stacks change nothing */
    s1 = render(&p, NULL, &l1);
    s2 = render(&q, NULL, &l2);
    s3 = render(&p, NULL, NULL);
    assert_int_equal(l1, l2);
    assert_string_equal(s1, s2);
    assert_string_equal(s1, s3);
    fr = frames_read(s1, &n);
    for (size_t i = 0; i < n; i++) {             /* one color per name */
        assert_true(fr[i].cls[0] == 'c');
        for (size_t j = 0; j < i; j++)
            if (strcmp(fr[i].name, fr[j].name) == 0)
                assert_string_equal(fr[i].cls, fr[j].cls);
    }
    assert_string_equal(fr[1].name, "main");    /* siblings by name */
    assert_string_equal(fr[2].name, "a");
    free(fr);
    free(s1);
    free(s2);
    free(s3);
    em_rprofile_free(&p);
    em_rprofile_free(&q);
}

static void test_empty(void **state)
{
    em_rprofile p;
    size_t n, len;
    frame *fr;
    char *svg;
    (void)state;

    init(&p, NULL);
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    assert_non_null(strstr(svg, "no samples"));
    fr = frames_read(svg, &n);
    assert_int_equal(n, 0);
    free(fr);
    free(svg);
    add(&p, "a;b", 0);
    add(&p, "", 0);
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    assert_non_null(strstr(svg, "no samples"));
    free(svg);
    add(&p, "", 5);                     /* the empty stack: root only */
    add(&p, "a", -5);                           /* negatives count by size */
    svg = render(&p, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    assert_int_equal(n, 2);
    assert_string_equal(fr[0].details, "0 (100.00%)");
    assert_string_equal(fr[1].details, "-5 (50.00%)");
    assert_int_equal(fr[1].w, FULL_W / 2);
    free(fr);
    free(svg);
    em_rprofile_free(&p);
}

/* A big generated profile: 50k stacks over a call graph of 2,000
** functions, depth 10 to 40. */
static void big_profile(em_rprofile *p)
{
    uint64_t seed = 1;
    char name[32];
    em_rframe fr[40];
    uint32_t ids[2000];

    init(p, NS_TYPE);
    for (int i = 0; i < 2000; i++) {
        int k = snprintf(name, sizeof name, "pkg%d.func%d", i % 37, i);
        assert_int_equal(em_strtab_intern(&p->names, name, (size_t)k,
                                          &ids[i]), EMBER_OK);
    }
    for (int s = 0; s < 50000; s++) {
        size_t depth = 10 + rnd(&seed) % 31;
        uint32_t f = rnd(&seed) % 4;            /* a few roots */
        for (size_t d = 0; d < depth; d++) {    /* callees near the caller */
            fr[depth - 1 - d] = (em_rframe){ ids[f], 0 };
            f = (f * 7 + 1 + rnd(&seed) % 3) % 2000;
        }
        assert_int_equal(em_rprofile_add(p, fr, depth,
                                         1 + rnd(&seed) % 10000), EMBER_OK);
    }
}

static void test_big_is_fast_and_small(void **state)
{
    struct timespec t0, t1;
    em_rprofile p;
    size_t len;
    double ms;
    char *svg;
    (void)state;

    big_profile(&p);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    svg = render(&p, NULL, &len);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
         (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    print_message("50k stacks: %.1f ms, %zu bytes\n", ms, len);
    assert_true(len < 4u << 20);
    assert_true(ms < 3000);                 /* ~0.1 s plain; ASan is slower */
    assert_true(xml_ok(svg, len));
    free(svg);
    em_rprofile_free(&p);
}

static void test_write_error(void **state)
{
    em_rprofile p;
    FILE *f = fopen("/dev/full", "w");
    (void)state;

    if (f == NULL)
        skip();
    big_profile(&p);
    assert_int_equal(em_render_svg(f, &p, NULL), EMBER_EIO);
    fclose(f);
    em_rprofile_free(&p);
}

static void test_out_of_memory(void **state)
{
    em_rprofile p;
    int rc = EMBER_ENOMEM;
    uint64_t i;
    (void)state;

    init(&p, NS_TYPE);
    for (int k = 0; k < 300; k++) {     /* enough nodes to grow the arrays */
        char spec[64];
        snprintf(spec, sizeof spec, "main;f%d;g%d;h%d", k % 50, k, k % 7);
        add(&p, spec, k + 1);
    }
    for (i = 1; rc == EMBER_ENOMEM && i < 1000; i++) {
        char *text = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&text, &n);
        assert_non_null(f);
        em_alloc_fail_at(i);
        rc = em_render_svg(f, &p, NULL);
        em_alloc_fail_at(0);
        fclose(f);
        free(text);
        assert_true(rc == EMBER_OK || rc == EMBER_ENOMEM);
    }
    assert_int_equal(rc, EMBER_OK);
    assert_true(i > 5);
    em_rprofile_free(&p);
}

/* ---- real profiles --------------------------------------------------- */

/* Imports DATA_DIR/NAME into DB; skips when not run from the repo root. */
static void import_file(ember_db *db, const char *name)
{
    char path[256];
    size_t len;
    char *buf;
    em_import_opts o = { .sz = sizeof o, .origin = name };

    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    if ((buf = tu_read_file(path, &len)) == NULL)
        skip();
    assert_int_equal(em_import(db, buf, len, &o, NULL), EMBER_OK);
    free(buf);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The frames the renderer should draw, counted independently: the root
** plus every distinct call path (as text) holding at least 0.1%. */
static size_t expected_frames(const em_rprofile *p)
{
    char **paths = NULL;
    int64_t *vals = NULL;
    size_t n = 0, cap = 0, count = 1;
    double total = 0;

    for (size_t i = 0; i < p->nstacks; i++) {
        const em_rstack *s = &p->stacks[i];
        char buf[8192] = "";
        total += fabs((double)s->value);
        for (size_t k = s->nframes; s->value != 0 && k-- > 0;) {
            assert_true(strlen(buf) < sizeof buf - 600);
            strcat(buf, "\x01");
            strcat(buf, em_strtab_get(&p->names, p->frames[s->first + k].fn));
            if (n == cap) {
                cap = cap == 0 ? 1024 : cap * 2;
                paths = realloc(paths, cap * sizeof *paths);
                vals = realloc(vals, cap * sizeof *vals);
            }
            paths[n] = malloc(strlen(buf) + 1 + sizeof(int64_t));
            strcpy(paths[n], buf);
            memcpy(paths[n] + strlen(buf) + 1, &s->value, sizeof(int64_t));
            n++;
        }
    }
    qsort(paths, n, sizeof *paths, str_cmp);
    for (size_t i = 0; i < n;) {
        double sum = 0;
        size_t j = i;
        for (; j < n && strcmp(paths[i], paths[j]) == 0; j++) {
            int64_t v;
            memcpy(&v, paths[j] + strlen(paths[j]) + 1, sizeof v);
            sum += fabs((double)v);
        }
        count += sum >= 0.001 * total;
        i = j;
    }
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(vals);
    return count;
}

static void test_real_cpu_and_heap(void **state)
{
    static const char *const types[] = {
        CPU_NANOS, "memory:alloc_space:bytes:space:bytes",
        "memory:inuse_objects:count:space:bytes" };
    char *dir = tu_tmpdir("svg");
    ember_db *db = tu_open(dir, 1);
    (void)state;

    import_file(db, "cpu.pb.gz");
    import_file(db, "heap.pb.gz");
    for (size_t t = 0; t < EM_ARRAY_LEN(types); t++) {
        ember_selector sel = { .sz = sizeof sel, .type = types[t] };
        em_render_opts o = { .sz = sizeof o, .query = types[t] };
        const int64_t *values;
        int64_t total = 0;
        char want[EM_VALUE_MAX + 16], v[EM_VALUE_MAX];
        ember_merged *m;
        em_rprofile p;
        frame *fr;
        size_t n, len, ns;
        char *svg;

        assert_int_equal(ember_merge(db, &sel, &m), EMBER_OK);
        ns = ember_merged_samples(m, NULL, &values);
        for (size_t i = 0; i < ns; i++)
            total += values[i];
        assert_int_equal(em_rprofile_build(db, m, types[t], NULL, &p),
                         EMBER_OK);
        ember_merged_free(m);
        svg = render(&p, &o, &len);
        assert_true(xml_ok(svg, len));
        fr = frames_read(svg, &n);
        snprintf(want, sizeof want, "%s (100.00%%)",
                 em_format_value(total, p.unit, v));
        assert_string_equal(fr[0].details, want);
        assert_int_equal(n, expected_frames(&p));
        assert_true(n > 10);
        check_nesting(fr, n, false);
        free(fr);
        free(svg);
        em_rprofile_free(&p);
    }
    ember_close(db);
    tu_rmdir(dir);
}

/* A diff over real names: the heap profile against itself with some
** stacks grown, some gone. */
static void test_real_diff(void **state)
{
    char *dir = tu_tmpdir("svgdiff");
    ember_db *db = tu_open(dir, 1);
    ember_selector sel = { .sz = sizeof sel,
                           .type = "memory:alloc_space:bytes:space:bytes" };
    ember_merged *m;
    em_rprofile p, d;
    size_t n, len;
    frame *fr;
    char *svg;
    int reds = 0, blues = 0;
    (void)state;

    import_file(db, "heap.pb.gz");
    assert_int_equal(ember_merge(db, &sel, &m), EMBER_OK);
    assert_int_equal(em_rprofile_build(db, m, sel.type, NULL, &p), EMBER_OK);
    ember_merged_free(m);
    init(&d, sel.type);
    for (uint32_t i = 0; i < p.names.count; i++) {  /* same ids in d */
        uint32_t id;
        const char *s = em_strtab_get(&p.names, i);
        assert_int_equal(em_strtab_intern(&d.names, s, strlen(s), &id), 0);
        assert_int_equal(id, i);
    }
    for (size_t i = 0; i < p.nstacks; i++) {
        const em_rstack *s = &p.stacks[i];
        int64_t target = i % 3 == 0 ? 0 : i % 3 == 1 ? s->value * 2 : s->value;
        assert_int_equal(em_rprofile_add_diff(&d, p.frames + s->first,
                                              s->nframes, s->value, target),
                         EMBER_OK);
    }
    svg = render(&d, NULL, &len);
    assert_true(xml_ok(svg, len));
    fr = frames_read(svg, &n);
    for (size_t i = 0; i < n; i++) {
        reds += fr[i].cls[0] == 'r';
        blues += fr[i].cls[0] == 'b';
        assert_true(strncmp(fr[i].details, "base ", 5) == 0);
    }
    assert_true(reds > 0 && blues > 0);
    check_nesting(fr, n, false);
    free(fr);
    free(svg);
    em_rprofile_free(&d);
    em_rprofile_free(&p);
    ember_close(db);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_widths_sum),
        cmocka_unit_test(test_widths_random),
        cmocka_unit_test(test_tiny_frames),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_labels_cut),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_colors_and_determinism),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_big_is_fast_and_small),
        cmocka_unit_test(test_write_error),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_real_cpu_and_heap),
        cmocka_unit_test(test_real_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
