/*
** engine/htab.h: the house's one hash table, a template instantiated per
** entry type as postgres's simplehash.h is. Open addressing with linear
** probing over a power of two of slots, kept at most half full so that
** probes stay short; entries live in the slots, so a probe reads one array.
** There is no deletion: every table here only grows, or is cleared whole.
**
** An instantiation defines these, then includes this file (which undefines
** them, so that one .c may hold several):
**
**   EM_HT_NAME          prefix of the functions: NAME_find, NAME_insert...
**   EM_HT_TABLE         the table type, declared with EM_HTAB_TYPE(entry)
**                       (engine/engine.h, so that headers can hold tables)
**   EM_HT_ENTRY         the slot type
**   EM_HT_KEY           what a lookup is given besides the hash (a value,
**                       or a pointer to a caller's struct that carries
**                       whatever the comparison needs)
**   EM_HT_IS_FREE(e)    slot *e is free
**   EM_HT_HASH(e)       the hash of the entry in slot *e (for growing)
**   EM_HT_MATCH(e,h,k)  slot *e holds the entry of key k, whose hash is h
**   EM_HT_WHAT          a string naming the table in error messages
**
** and may define:
**
**   EM_HT_FREE_BYTE     the byte a free slot is filled with (default 0)
**   EM_HT_INITIAL       slots at first use, a power of two (default 64)
**   EM_HT_ALLOC(n)      allocator (default em_malloc; em_free releases)
**   EM_HT_RELEASE(p)
**   EM_HT_SCOPE         linkage of the functions (default static inline)
**
** The caller hashes: the probe starts at hash & mask, so a hash must mix
** its low bits (em_hash64 does; small integer keys go through em_mix64).
** Every function works on a zeroed table; NAME_free returns it to zero.
*/
#if !defined(EM_HT_NAME) || !defined(EM_HT_TABLE) || !defined(EM_HT_ENTRY) \
    || !defined(EM_HT_KEY) || !defined(EM_HT_IS_FREE) ||                    \
    !defined(EM_HT_HASH) || !defined(EM_HT_MATCH) || !defined(EM_HT_WHAT)
#error "engine/htab.h: an instantiation lacks one of its EM_HT_ macros"
#endif

#ifndef EM_HT_FREE_BYTE
#define EM_HT_FREE_BYTE 0
#endif
#ifndef EM_HT_INITIAL
#define EM_HT_INITIAL 64
#endif
#ifndef EM_HT_ALLOC
#define EM_HT_ALLOC(n) em_malloc(n)
#define EM_HT_RELEASE(p) em_free(p)
#endif
#ifndef EM_HT_SCOPE
#define EM_HT_SCOPE static inline
#endif

#if defined(__GNUC__)
#define EM_HT_RARELY(x) __builtin_expect(!!(x), 0)
#else
#define EM_HT_RARELY(x) (x)
#endif

#define EM_HT_CAT_(a, b) a##_##b
#define EM_HT_CAT(a, b) EM_HT_CAT_(a, b)
#define EM_HT_FN(f) EM_HT_CAT(EM_HT_NAME, f)

/* The one probe: the slot holding K, or else the free slot that ends its
** chain, where K would go. T has slots. */
EM_HT_SCOPE EM_HT_ENTRY *EM_HT_FN(probe)(const EM_HT_TABLE *t, uint64_t h,
                                         EM_HT_KEY k)
{
    size_t i = (size_t)h & t->mask;

    /* at most half full, most probes end at their first slot: said so, the
    ** compiler lays that path out straight (2% fewer instructions in
    ** query/map64.c's lookups) */
    while (EM_HT_RARELY(!EM_HT_IS_FREE(&t->slots[i]) &&
                        !EM_HT_MATCH(&t->slots[i], h, k)))
        i = (i + 1) & t->mask;
    return &t->slots[i];
}

/* The slot holding K (hash H), or NULL. */
EM_HT_SCOPE EM_HT_ENTRY *EM_HT_FN(find)(const EM_HT_TABLE *t, uint64_t h,
                                        EM_HT_KEY k)
{
    EM_HT_ENTRY *e;

    if (t->slots == NULL)
        return NULL;
    e = EM_HT_FN(probe)(t, h, k);
    return EM_HT_IS_FREE(e) ? NULL : e;
}

/* Moves the entries into a fresh array of N slots; they are placed by
** their hashes, with no key compared (all are distinct). */
EM_HT_SCOPE int EM_HT_FN(rehash)(EM_HT_TABLE *t, size_t n)
{
    EM_HT_ENTRY *ns = (EM_HT_ENTRY *)EM_HT_ALLOC(n * sizeof *ns);
    const EM_HT_ENTRY *e = t->slots;
    const EM_HT_ENTRY *end = e == NULL ? e : e + t->mask + 1;

    if (ns == NULL)
        return em_err(EMBER_ENOMEM, "%s: out of memory for %zu slots",
                      EM_HT_WHAT, n);
    memset(ns, EM_HT_FREE_BYTE, n * sizeof *ns);
    for (; e != end; e++) {
        size_t j;
        if (EM_HT_IS_FREE(e))
            continue;
        for (j = (size_t)(EM_HT_HASH(e)) & (n - 1); !EM_HT_IS_FREE(&ns[j]);
             j = (j + 1) & (n - 1))
            ;
        ns[j] = *e;
    }
    EM_HT_RELEASE(t->slots);
    t->slots = ns;
    t->mask = n - 1;
    return EMBER_OK;
}

/* Makes room for MORE entries beyond those held, keeping the table at most
** half full. EMBER_OK, EMBER_ENOMEM or EMBER_ELIMIT. */
EM_HT_SCOPE int EM_HT_FN(reserve)(EM_HT_TABLE *t, size_t more)
{
    size_t n = t->slots == NULL ? EM_HT_INITIAL : t->mask + 1;

    if (more > SIZE_MAX / 4 - t->count)
        return em_err(EMBER_ELIMIT, "%s: too many entries", EM_HT_WHAT);
    if (t->slots != NULL && t->count + more <= n / 2)
        return EMBER_OK;
    while (t->count + more > n / 2) {
        if (n > SIZE_MAX / 4 / sizeof(EM_HT_ENTRY))
            return em_err(EMBER_ELIMIT, "%s: too many entries", EM_HT_WHAT);
        n *= 2;
    }
    return EM_HT_FN(rehash)(t, n);
}

/* The slot for K (hash H), making room first. *FOUND tells whether K was
** there; if not, the slot returned is free and counted as used, and the
** caller must fill it (so that it is no longer free) before the next call.
** NULL on failure, with the error set. */
EM_HT_SCOPE EM_HT_ENTRY *EM_HT_FN(insert)(EM_HT_TABLE *t, uint64_t h,
                                          EM_HT_KEY k, bool *found)
{
    EM_HT_ENTRY *e;

    /* reserve's own test, here so that an insert with room (most of them)
    ** costs no call: decoders insert once per frame they read. One more
    ** entry fits when count + 1 <= (mask + 1) / 2, that is when 2 * count
    ** < mask (count stays under SIZE_MAX / 4), never with no slots (mask
    ** 0); one comparison where that was three */
    if (2 * t->count >= t->mask && EM_HT_FN(reserve)(t, 1) != EMBER_OK)
        return NULL;
    e = EM_HT_FN(probe)(t, h, k);
    *found = !EM_HT_IS_FREE(e);
    if (!*found)
        t->count++;
    return e;
}

/* The next used slot at or after *I, advancing *I past it; NULL at the
** end. Start with *I = 0. */
EM_HT_SCOPE EM_HT_ENTRY *EM_HT_FN(next)(const EM_HT_TABLE *t, size_t *i)
{
    while (t->slots != NULL && *i <= t->mask) {
        EM_HT_ENTRY *e = &t->slots[(*i)++];
        if (!EM_HT_IS_FREE(e))
            return e;
    }
    return NULL;
}

/* Empties T, keeping its slots. */
EM_HT_SCOPE void EM_HT_FN(clear)(EM_HT_TABLE *t)
{
    if (t->slots != NULL && t->count > 0)
        memset(t->slots, EM_HT_FREE_BYTE, (t->mask + 1) * sizeof *t->slots);
    t->count = 0;
}

/* Releases T's slots; T is zero again. */
EM_HT_SCOPE void EM_HT_FN(free)(EM_HT_TABLE *t)
{
    EM_HT_RELEASE(t->slots);
    t->slots = NULL;
    t->mask = 0;
    t->count = 0;
}

#undef EM_HT_NAME
#undef EM_HT_TABLE
#undef EM_HT_ENTRY
#undef EM_HT_KEY
#undef EM_HT_IS_FREE
#undef EM_HT_HASH
#undef EM_HT_MATCH
#undef EM_HT_WHAT
#undef EM_HT_FREE_BYTE
#undef EM_HT_INITIAL
#undef EM_HT_ALLOC
#undef EM_HT_RELEASE
#undef EM_HT_SCOPE
#undef EM_HT_RARELY
#undef EM_HT_CAT_
#undef EM_HT_CAT
#undef EM_HT_FN
