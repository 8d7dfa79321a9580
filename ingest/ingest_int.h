/*
** ingest/ingest_int.h: private to ingest/ (and its tests and fuzz targets):
** what the decoders share.
*/
#ifndef EM_INGEST_INT_H
#define EM_INGEST_INT_H

#include "engine/engine.h"
#include "ingest/ingest.h"

/* ---- shared by the decoders (ingest/import.c, ingest/pset.c) ------------ */

/* Copies the caller's options (of any older, smaller size) over the
** defaults into *O (origin "<input>", window, max_bytes filled in) and
** checks what the engine would refuse late (the type, the label array). */
int em_import_opts_norm(const em_import_opts *opts, em_import_opts *o);

#define EM_LABEL_NAME_BUF 72    /* a sanitized name and its NUL */

/* Makes a label name of the LEN bytes at IN that the engine accepts:
** bytes other than [a-zA-Z0-9_] become '_', a leading digit gets '_'
** before it, "" becomes "_", and it is cut to 64 bytes (Prometheus' habit
** for foreign names such as "http.route" or "trace-id"). */
void em_label_name_sanitize(const char *in, size_t len,
                            char out[EM_LABEL_NAME_BUF]);

/* The labels of one profile: the import's own BASE (from -l), then EXTRA
** from the file (names already sanitized). An EXTRA name that BASE or an
** earlier EXTRA holds becomes "exported_NAME" (Parca's rule; again while
** it still clashes). OUT has room for NBASE + NEXTRA; names made here live
** in S's arena. S remembers BASE's names: a profile's other labels came
** from its file and split it (em_pset_write notes them for `@ T`).
** EMBER_OK or ENOMEM. */
int em_labels_join(em_pset *s, const ember_label *base, size_t nbase,
                   const ember_label *extra, size_t nextra, ember_label *out,
                   size_t *nout);

/* Copies LEN bytes at P, NUL-terminated, into S's arena (NULL: ENOMEM,
** with the message set). */
char *em_pset_strndup(em_pset *s, const char *p, size_t len);

#endif /* EM_INGEST_INT_H */
