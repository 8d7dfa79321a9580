/*
** query/render_int.h: what the renderers of query/ share and nothing else
** calls: the per-format entry points that render.c dispatches to, the call
** tree that tree, flame and json draw, and small text helpers (label sets,
** times, numbers, display columns, ANSI colors).
**
** Renderers are pure: they read an em_rprofile, series or table rows and
** write a FILE*; only render.c's pprof path calls the engine.
*/
#ifndef EM_RENDER_INT_H
#define EM_RENDER_INT_H

#include "query/query_int.h"

/* ---- the call tree (query/render_tree.c) ----------------------------------- */

/* One node: a path of function names from the root. The root (node 0) is
** the empty path; it holds every stack's value in total. */
typedef struct em_cnode {
    uint32_t fn;                /* name id; UINT32_MAX for the root */
    uint32_t parent;            /* node index; the root's is 0 */
    uint32_t depth;             /* root 0, its children 1, ... */
    uint32_t first_kid;         /* its children: kids[first_kid ..] */
    uint32_t nkids;
    int64_t total, self;        /* summed values through / ending here
                                ** (a diff's TARGET) */
    int64_t base_total, base_self;  /* a diff's BASE; 0 otherwise */
    uint64_t size;              /* sum of |value| through it: flame widths */
} em_cnode;

enum { EM_CTREE_BY_TOTAL = 0,   /* children by |total| (diff: the larger of
                                ** |base| and |target|) descending, then
                                ** name */
       EM_CTREE_BY_NAME = 1 };  /* children by name, bytewise (flame) */

typedef struct em_ctree {
    const em_rprofile *p;
    em_cnode *nodes;
    size_t n, cap;
    uint32_t *kids;             /* every node's children, grouped by parent */
    uint32_t *rank;             /* name id -> its rank in bytewise order */
} em_ctree;

/* Builds the call tree of P's stacks (root first; stacks with value and
** base 0 skipped), children in ORDER. EMBER_OK, ENOMEM or ELIMIT; *T is
** safe to em_ctree_free either way. */
int em_ctree_build(em_ctree *t, const em_rprofile *p, int order);
void em_ctree_free(em_ctree *t);
/* Node I's function name ("root" for the root). */
const char *em_ctree_name(const em_ctree *t, size_t i);

/* ---- pprof's call graph (query/render_graph.c) ------------------------------ */

typedef struct em_graph_edge {
    uint32_t src, dst;          /* caller and callee name ids */
    int64_t weight;
    bool inlined;               /* every occurrence was an inlined call */
    size_t stamp;               /* last stack that added to it */
} em_graph_edge;

typedef struct em_graph_row {
    uint32_t fn;                /* the node's name id */
    int64_t flat, cum;
    const char *name;
    unsigned in;                /* free for a renderer (top: the kinds of
                                ** its in-edges) */
} em_graph_row;

typedef struct em_graph {
    const em_rprofile *p;
    uint32_t nfn;               /* p's names: node ids are name ids */
    int64_t *flat, *cum;        /* per name id */
    size_t *seen;               /* per name id: stamp of its last stack */
    uint8_t *kept;              /* per name id: in the graph */
    em_map64 edge_ix;           /* src << 32 | dst -> index in edges */
    em_graph_edge *edges;
    size_t nedges, cap_edges;
    em_graph_row *rows;         /* the nodes with a value, unsorted until
                                ** em_graph_sort */
    size_t nrows;
} em_graph;

/* Builds P's whole graph into *G (em_graph_free it, even on failure). */
int em_graph_init(em_graph *g, const em_rprofile *p);
/* Rebuilds flat, cum, edges and rows over the kept nodes. */
int em_graph_build(em_graph *g);
/* Keeps only the nodes of rows[0..N) and rebuilds over them. */
int em_graph_keep(em_graph *g, size_t n);
/* Sorts the rows by |flat| (or |cum|) descending, then name. */
void em_graph_sort(em_graph *g, bool cum);
/* The signed sum of flat over the rows: pprof's base for its cutoffs. */
int64_t em_graph_flat_sum(const em_graph *g);
/* pprof's selectOutputUnit: the report's one unit, from the smallest
** non-zero node magnitude and TOTAL. */
const char *em_graph_unit(const em_graph *g, int64_t total);
/* pprof's report labels, Ember's short form: "Type: cpu" and "Showing
** nodes accounting for X, Y% of Z total" (X the rows' flat, Z TOTAL, both
** in OUT_UNIT as em_format_value_as takes it). */
void em_graph_header(FILE *f, const em_graph *g, const char *out_unit,
                     int64_t total);
/* The total percentages are of: the sum of |value| over P's stacks, or
** the total before focus and ignore (p->whole) unless RELATIVE. */
int64_t em_graph_total(const em_rprofile *p, bool relative);
void em_graph_free(em_graph *g);

/* ---- per-format renderers ---------------------------------------------------- */

/* The peek view of P for the regex RE as written (render_peek.c):
** pprof's -peek text, and its JSON, the member "peek":[...] of a group. */
int em_render_peek(FILE *f, const em_rprofile *p, const em_render_opts *o,
                   const char *re);
int em_render_peek_json(FILE *f, const em_rprofile *p,
                        const em_render_opts *o, const char *re);
/* The list view of P (at granularity lines) for the regex RE
** (render_list.c): pprof's -list text, and the member "list":[...]. */
int em_render_list(FILE *f, const em_rprofile *p, const em_render_opts *o,
                   const char *re);
int em_render_list_json(FILE *f, const em_rprofile *p,
                        const em_render_opts *o, const char *re);
/* "peek" for EM_VIEW_PEEK, ...; "" for none. */
const char *em_render_view_name(int view);
/* The view of group G of R (r->view) as JSON members after the group's
** own: "peek":[...] (render_json.c calls it). */
int em_render_view_json(FILE *f, const ember_result *r, const em_pgroup *g,
                        const em_render_opts *o);

/* The indented call tree (render_tree.c); LIMIT rows at most (0: all). */
int em_render_tree(FILE *f, const em_rprofile *p, const em_render_opts *o,
                   size_t limit);
/* The terminal icicle (render_flame.c). */
int em_render_flame(FILE *f, const em_rprofile *p, const em_render_opts *o);
/* One JSON document for any result kind (render_json.c). */
int em_render_json(FILE *f, const ember_result *r, const em_render_opts *o);
/* Series and tables (render_series.c). */
int em_render_series_table(FILE *f, const ember_result *r,
                           const em_render_opts *o);
int em_render_series_csv(FILE *f, const ember_result *r,
                         const em_render_opts *o);
int em_render_series_spark(FILE *f, const ember_result *r,
                           const em_render_opts *o);
int em_render_rows_table(FILE *f, const ember_result *r,
                         const em_render_opts *o);
int em_render_rows_csv(FILE *f, const ember_result *r,
                       const em_render_opts *o);

/* ---- shared text helpers (query/render.c) ---------------------------------- */

/* ANSI SGR sequences; the renderers write them only when o->color. */
#define EM_SGR_RESET "\033[0m"
#define EM_SGR_RED "\033[31m"
#define EM_SGR_GREEN "\033[32m"
#define EM_SGR_CYAN "\033[36m"

/* Writes `{name="value", ...}` (PromQL's notation, '"' and '\' escaped);
** "{}" for none. */
void em_render_labels(FILE *f, const ember_label *labels, size_t n);
/* The same appended to B (not NUL-terminated). EMBER_OK or ENOMEM. */
int em_render_labels_buf(em_buf *b, const ember_label *labels, size_t n);
/* UTC RFC 3339: "2024-11-21T06:20:00Z", with ".mmm" when the
** milliseconds are not 0. BUF holds 40 bytes. Returns BUF. */
const char *em_render_time(int64_t ms, char buf[40]);
/* A double as JSON and CSV want it: integers without a fraction, others in
** the fewest digits that read back to the same double; NaN and infinities
** as "" (the caller writes null or an empty field). BUF holds 40 bytes. */
const char *em_render_number(double v, char buf[40]);
/* A double in UNIT for people: "1.20s", "350ms/s", "1.5", "12". */
const char *em_render_value(double v, const char *unit, char buf[64]);
/* Appends NAME to B in exactly COLS display columns (UTF-8 characters
** count one each; control characters become ' ', and each byte that
** starts no character (em_utf8_decode) '?'): padded with spaces, or
** cut to COLS - 2 characters and ".." when longer (to COLS when COLS < 3). */
int em_render_fit(em_buf *b, const char *name, size_t cols);
/* Writes NAME with control characters as ' ', so one name stays one line
** and cannot move the cursor. */
void em_render_name(FILE *f, const char *name);
/* Display columns of NAME (UTF-8 characters, as em_utf8_count). */
size_t em_render_cols(const char *name);
/* The sign and relative size of CHANGE against BASE: "+25.00%", "-100%",
** "new" when BASE is 0, "0%" when CHANGE is. BUF holds 24 bytes. */
const char *em_render_change_pct(int64_t change, int64_t base, char buf[24]);
/* Compiles a view's regex TEXT (as written: it matches anywhere in a
** name, as the planner checked it) into *RE. EMBER_OK, EINVAL (a decoded
** result may hold anything) or ENOMEM. */
int em_render_view_regex(const char *text, em_regex **re);
/* em_format_value_as with a '+' before positive values. */
const char *em_render_signed(int64_t v, const char *unit,
                             const char *out_unit, char buf[EM_VALUE_MAX]);

#endif /* EM_RENDER_INT_H */
