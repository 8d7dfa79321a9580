/*
** query/plan.h: private to the planner (plan.c), the executor (exec.c) and
** the public query API (result.c). The planner turns the syntax tree into a
** checked plan; the executor runs it on one engine reader (one snapshot)
** and fills a struct ember_result.
**
** A plan is a tree of em_plan nodes that mirrors the series and table
** functions; everything profile-valued below them is flattened into an
** em_pchain (one selector, a grouping and stack filters in order) or a diff
** of two chains. Invariants the planner guarantees to the executor: every
** argument has the kind its function takes, every regex compiled, every
** selector's range resolved, and stack filters that the engine can apply
** (the first focus and the first ignore before any top) marked pushed.
** A plan borrows strings and label lists from the tree: the tree must
** outlive it.
*/
#ifndef EM_QUERY_PLAN_H
#define EM_QUERY_PLAN_H

#include "query/query_int.h"

/* A selector with its times resolved against the query's options. */
typedef struct em_psel {
    const em_node *node;        /* the EM_NODE_SELECTOR (pos, u.sel) */
    int64_t from, to;           /* the engine's inclusive range; both 0:
                                ** all time */
    bool nearest;               /* `@ T` without a range: per series the
                                ** one profile nearest `at` */
    int64_t at;                 /* T minus the offset, unix ms */
    int64_t bucket_from;        /* where step buckets start (the range's
                                ** start; 0 for all time: epoch multiples) */
} em_psel;

/* A stack filter on profiles. */
enum { EM_OP_FOCUS = 1, EM_OP_IGNORE, EM_OP_TOP, EM_OP_HIDE, EM_OP_SHOW,
       EM_OP_CALLERS,           /* stacks through a match, cut below the
                                ** innermost one: it is their leaf */
       EM_OP_CALLEES };         /* ... cut above the outermost: the root */

typedef struct em_pop {
    int op;                     /* EM_OP_* */
    em_regex *re;               /* all but TOP: pattern compiled, owned */
    char *pattern;              /* the regex as matched, unanchored:
                                ** .*(?:text).*, owned */
    const char *text;           /* the regex as written, borrowed */
    size_t n;                   /* TOP: how many functions */
    bool pushed;                /* the engine applies it (selector focus or
                                ** ignore): the executor skips it */
} em_pop;

/* A profile-valued expression without diff: merge [by|without] of one
** selector, then OPS in order. */
typedef struct em_pchain {
    em_psel sel;
    int grouping;               /* EM_GROUP_* */
    char **labels;              /* by/without labels, borrowed */
    size_t nlabels;
    em_pop *ops;                /* owned */
    size_t nops;
    const char *focus;          /* the pushed filters' patterns (borrowed */
    const char *ignore;         /* from ops), for ember_selector.focus and
                                ** .ignore */
} em_pchain;

typedef struct em_plan em_plan;

struct em_plan {
    int kind;                   /* EMBER_RESULT_* this node gives */
    em_fn fn;                   /* EM_FN_MERGE for profiles and diffs */
    const em_node *node;        /* for messages */
    /* PROFILE: a; DIFF: base a, target b, then post on the diff */
    em_pchain a, b;
    em_pop *post;               /* owned */
    size_t npost;
    /* SERIES: TOTAL reads a (no grouping, no top); the others arg */
    em_plan *arg;
    int grouping;               /* sum ... bottomk: EM_GROUP_* */
    char **labels;              /* borrowed */
    size_t nlabels;
    double k;                   /* topk, bottomk */
    em_pop view;                /* peek(P, "re"): op EM_VIEW_PEEK, its
                                ** regex; op 0: no view */
    int granularity;            /* PROFILE, DIFF: EM_GRAN_* of the names
                                ** (granularity(P, "lines")) */
    bool gran_given;            /* granularity() was written */
    bool normalize;             /* DIFF: the target scaled to the base's
                                ** total (pprof's -normalize) */
    /* TABLE */
    const char *name;           /* label_values' label, borrowed */
    bool has_sel;               /* a: its selector given (type, matchers) */
};

/* What the planner needs besides the tree. */
typedef struct em_plan_ctx {
    const char *text;           /* the query, for caret messages */
    int64_t from, to;           /* ember_query_opts' range (0, 0: all) */
    int64_t now;                /* "now", unix ms */
} em_plan_ctx;

/* Checks TREE and makes *OUT (free with em_plan_free). EMBER_EINVAL with
** a caret message for a wrong kind, count or value of argument, a bad
** regex or time; EMBER_ENOMEM. */
int em_plan_build(const em_plan_ctx *ctx, const em_node *tree,
                  em_plan **out);
void em_plan_free(em_plan *p);                  /* NULL: no-op */

/* Runs PLAN on DB into a new *OUT (em_result_free). STEP_MS buckets series;
** FLAGS are em_query_run's.
** Type errors found while running (a selector of several types in a
** profile context, a diff of two types) are EMBER_EINVAL with a caret into
** TEXT. */
int em_exec(ember_db *db, const char *text, const em_plan *plan,
            int64_t step_ms, unsigned flags, ember_result **out);

/* Resolves the types of TREE's selectors against DB (query/notes.c): a
** short type name (a sample type such as cpu or inuse_space) becomes the
** one stored type it names, and a selector without a type that feeds a
** merge takes the one CPU type among those it matches; notes go to NOTES.
** EMBER_EINVAL with a caret for an ambiguous short name; ENOMEM, EIO. */
int em_notes_types(ember_db *db, const char *text, em_node *tree,
                   ember_result *notes);
/* Adds to R, the result of PLAN, notes saying why it is empty (or why a
** diff side is): unknown types, label names and values with "did you
** mean", a range outside the stored span, a regex matching no function. */
int em_notes_explain(ember_db *db, const char *text, const em_plan *plan,
                     ember_result *r);

/* Labels: copies N labels (names and values each em_malloc'ed) into a new
** array *OUT; frees such an array. */
int em_labels_dup(const ember_label *src, size_t n, ember_label **out);
void em_labels_free(ember_label *l, size_t n);

#endif /* EM_QUERY_PLAN_H */
