/* A hash index over strings kept elsewhere: maps a string to its position in
 * its owner's array (metadata keys, tensor names), so that lookups and the
 * duplicate checks of the parsers cost O(1) each instead of a scan. The one
 * hash map of the formats layer; open addressing, linear probing, XXH3. */
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

_Thread_local uint64_t lmq_work_probes;

void lmq_strindex_clear(lmq_strindex *ix)
{
    free(ix->slot);
    ix->slot = NULL;
    ix->cap = ix->n = 0;
}

#define POS(s) ((size_t)((s) & 0xffffffffu) - 1)
#define TAG(h) ((h) & ~(uint64_t)0xffffffffu)

/* The slot holding key (hash h), or the empty slot where it would go. The
 * hash's high half, kept in the slot, gives the home slot and rejects most
 * other keys without touching their strings (each a cache miss). */
static size_t probe(const lmq_strindex *ix, const char *key, uint64_t h, lmq_strindex_key_fn get, const void *owner)
{
    size_t mask = ix->cap - 1;
    size_t i = (size_t)(h >> 32) & mask;
    lmq_work_probes++;
    while (ix->slot[i] && (TAG(ix->slot[i]) != TAG(h) || strcmp(get(owner, POS(ix->slot[i])), key))) {
        i = (i + 1) & mask;
        lmq_work_probes++;
    }
    return i;
}

static uint64_t hash_of(const char *key)
{
    return lmq_hash64(key, strlen(key));
}

size_t lmq_strindex_find(const lmq_strindex *ix, const char *key, lmq_strindex_key_fn get, const void *owner)
{
    if (!ix->cap || !key) return SIZE_MAX;
    size_t i = probe(ix, key, hash_of(key), get, owner);
    return ix->slot[i] ? POS(ix->slot[i]) : SIZE_MAX;
}

static lmq_status grow(lmq_strindex *ix, lmq_strindex_key_fn get, const void *owner)
{
    size_t cap = ix->cap ? ix->cap * 2 : 64;
    if (cap > SIZE_MAX / sizeof(uint64_t)) return lmq_error(LMQ_ERR_NOMEM, "name index: %zu entries", ix->n);
    lmq_strindex next = {calloc(cap, sizeof(uint64_t)), cap, 0};
    if (!next.slot) return lmq_error(LMQ_ERR_NOMEM, "name index: %zu entries", ix->n);
    (void)get, (void)owner;
    for (size_t i = 0; i < ix->cap; i++) {
        if (!ix->slot[i]) continue;
        /* keys are distinct: the first empty slot from the home, which comes
         * from the hash bits the slot keeps (no string is touched) */
        size_t at = (size_t)(ix->slot[i] >> 32) & (cap - 1);
        while (next.slot[at]) at = (at + 1) & (cap - 1);
        next.slot[at] = ix->slot[i];
        next.n++;
    }
    free(ix->slot);
    *ix = next;
    return LMQ_OK;
}

lmq_status lmq_strindex_add(lmq_strindex *ix, size_t pos, lmq_strindex_key_fn get, const void *owner,
                            size_t *existing)
{
    if (existing) *existing = SIZE_MAX;
    if (pos >= (1u << 31)) return lmq_error(LMQ_ERR_LIMIT, "name index: more than %u entries", 1u << 31);
    if ((ix->n + 1) * 2 > ix->cap) {
        lmq_status s = grow(ix, get, owner);
        if (s) return s;
    }
    const char *key = get(owner, pos);
    uint64_t h = hash_of(key);
    size_t i = probe(ix, key, h, get, owner);
    if (ix->slot[i]) {
        if (existing) *existing = POS(ix->slot[i]);
        return LMQ_OK;
    }
    ix->slot[i] = TAG(h) | ((uint64_t)pos + 1);
    ix->n++;
    return LMQ_OK;
}
