/*
** ingest/hindex.h: engine/htab.h instantiated over an em_hindex
** (ingest/pset.h), the index a decoder keeps over an array of its own: a
** slot holds an entry's hash and its index plus one (0: free), so that a
** probe compares entries only on a hash match and growing never rehashes
** content. Define EM_HT_NAME, EM_HT_KEY (a pointer to a small struct
** carrying what the comparison needs), EM_HT_MATCH and EM_HT_WHAT, then
** include this; like engine/htab.h it may be included once per table.
**
** NAME_insert fails only for want of memory (EMBER_ENOMEM, its message
** set). An add inserts first, then fills the slot once its entry is in the
** array; when that fails the slot stays free and the table's count runs one
** high, which only makes it grow a little sooner.
*/
#include "engine/engine.h"
#include "ingest/pset.h"

#define EM_HT_TABLE em_hindex
#define EM_HT_ENTRY struct em_hslot
#define EM_HT_IS_FREE(e) ((e)->idx1 == 0)
#define EM_HT_HASH(e) ((e)->hash)
#include "engine/htab.h"
