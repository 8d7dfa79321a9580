/*
** query/query_int.h: helpers private to the files of query/ (SQLite's
** sqliteInt.h habit): a small integer hash map shared by the profile
** builder (caches of location and function lookups) and the top renderer
** (call edges).
*/
#ifndef EM_QUERY_INT_H
#define EM_QUERY_INT_H

#include "engine/engine.h"
#include "query/query.h"

/* uint64 key -> uint64 value, a table of engine/htab.h. A zeroed em_map64
** is empty and ready. No deletion: the maps here only grow while one
** profile is built or rendered. */
typedef struct em_map64_slot {
    uint64_t key;               /* EM_MAP64_FREE: an empty slot */
    uint64_t val;
} em_map64_slot;

typedef struct em_map64 {
    em_map64_slot *slots;       /* every key but EM_MAP64_FREE; these */
    size_t mask, count;         /* three as EM_HTAB_TYPE lays them out */
    bool has_free_key;          /* EM_MAP64_FREE itself, kept aside */
    uint64_t free_key_val;
} em_map64;

/* *VAL (may be NULL) gets KEY's value; false when absent. */
bool em_map64_get(const em_map64 *m, uint64_t key, uint64_t *val);
/* Sets KEY to VAL, adding it if absent. EMBER_OK or EMBER_ENOMEM. */
int em_map64_put(em_map64 *m, uint64_t key, uint64_t val);
void em_map64_free(em_map64 *m);

/* One function of the language (query/functions.c, the catalogue). */
typedef struct em_fn_info {
    const char *name;           /* "merge", "label_values", ... */
    const char *args;           /* "focus expects ..." without the name */
    unsigned min_args, max_args;
    bool grouping;              /* takes by/without */
    int kind;                   /* what it gives: EMBER_RESULT_* */
} em_fn_info;

/* FN's entry; NULL for a value that names no function. Functions are the
** em_fn values from EM_FN_MERGE up while this is not NULL. */
const em_fn_info *em_fn_get(em_fn fn);
/* The function spelled by the LEN bytes at S (case matters, as in PromQL's
** functions); 0 when none. */
em_fn em_fn_lookup(const char *s, size_t len);

/* Edit distance (optimal string alignment: a swap of neighbours is one
** edit), ignoring ASCII case, between the N bytes at A and the M at B; with
** WITHIN, between A and the closest substring of B. SIZE_MAX when N or M
** passes EM_EDIT_MAX (query/parser.c: "did you mean" for functions, and
** query/notes.c for types, labels, values and function names). */
#define EM_EDIT_MAX 64
size_t em_edit_distance(const char *a, size_t n, const char *b, size_t m,
                        bool within);

/* The magnitude of V as uint64, defined for INT64_MIN too. */
static inline uint64_t em_abs64(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

#endif /* EM_QUERY_INT_H */
