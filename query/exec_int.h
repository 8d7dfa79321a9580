/*
** query/exec_int.h: private to the executor's two files, exec.c (profiles,
** diffs, and the entry point) and exec_series.c (series and tables).
*/
#ifndef EM_QUERY_EXEC_INT_H
#define EM_QUERY_EXEC_INT_H

#include <stdlib.h>

#include "query/plan.h"

/* A series carries at most 64 labels (the engine's limit), plus __type__
** in a series key: room enough for a WITHOUT key. */
#define EM_KEY_SERIES_LABELS 65

/* qsort, fine with N < 2 and a NULL BASE (qsort's base may not be NULL). */
static inline void em_sort(void *base, size_t n, size_t size,
                           int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* One query's execution. */
typedef struct ectx {
    ember_db *db;
    em_reader *rd;                  /* the one snapshot of the query */
    const char *text;               /* for caret messages */
    int64_t step;                   /* series buckets; 0: none */
    bool all_time, any_range;       /* what was evaluated, for the result */
    int64_t from, to;
    const char *unit;               /* the sample unit of the series read
                                    ** (snapshot or owned by unit_own) */
    char *unit_own;
    bool units_mixed;               /* series of several units were read */
    unsigned flags;                 /* EM_QUERY_* */
    int build_gran;                 /* EM_GRAN_* profiles are resolved
                                    ** at: functions, or addresses (with
                                    ** sites) for a coarser one later */
} ectx;

/* Strings and labels (exec.c). */
bool em_str_same(const char *a, const char *b);    /* NULL-safe equality */
/* The unit of TYPE's samples, as em_rprofile_init derives it (NULL:
** "count"), as a new string. */
int em_type_unit(const char *type, char **unit);
int em_labels_cmp(const ember_label *a, size_t na, const ember_label *b,
                  size_t nb);
const char *em_label_get(const ember_label *l, size_t n, const char *type,
                         const char *name);
size_t em_group_key(int grouping, char **names, size_t nnames,
                    const ember_label *l, size_t n, const char *type,
                    bool typed, ember_label *key);
int em_group_labels(const ember_label *key, size_t n, ember_label **out,
                    size_t *nout);

/* Reading (exec.c). */
void em_chain_view(const em_pchain *ch, const char *type,
                   ember_selector *out);
void em_exec_range(ectx *e, const em_psel *ps);

/* `@ T` (docs/query-language.md, 6.4): the series of SET (T holds their
** profile times over all time) grouped by source, a source being a type
** and the labels but those an import took from a file's content (the
** series one file split into share them); per source the one time nearest
** AT among its series' profiles (ties: the earlier), and the series with
** a profile at exactly that time: their ids ascending in *IDS, the time in
** *TIMES, *N of them. */
int em_nearest_times(ectx *e, const em_series_set *set,
                     const ember_totals *t, int64_t at, uint32_t **ids,
                     int64_t **times, size_t *n);

/* Series and tables (exec_series.c): fill R from PLAN. */
int em_exec_series(ectx *e, const em_plan *plan, ember_result *r);
int em_exec_table(ectx *e, const em_plan *plan, ember_result *r);

#endif /* EM_QUERY_EXEC_INT_H */
