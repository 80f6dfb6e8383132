/* An open-addressing hash index over ids kept elsewhere: the table stores
 * only ids, the caller compares keys.  Internal to libcprof.  */
#ifndef CPROF_HASHIDX_H
#define CPROF_HASHIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_hashidx {
	uint32_t *slots;  /* id + 1; 0 marks an empty slot */
	uint64_t *hashes; /* full hash of each slot, to skip most compares */
	size_t cap;       /* power of two */
	size_t count;
};

/* Does the entry with id ID have the key CTX is looking for?  */
typedef bool (*cp_hashidx_eq)(const void *ctx, uint32_t id);

/* The id stored under HASH that EQ accepts, or UINT32_MAX.  */
uint32_t cp_hashidx_find(const struct cp_hashidx *h, uint64_t hash,
			 cp_hashidx_eq eq, const void *ctx);

/* Store ID under HASH (the caller checked it is absent).  Returns false
 * when out of memory.  */
bool cp_hashidx_insert(struct cp_hashidx *h, uint64_t hash, uint32_t id);

void cp_hashidx_free(struct cp_hashidx *h);

/* FNV-1a style hashing with a final mix (good enough for interning).  */
uint64_t cp_hash_bytes(const void *data, size_t len, uint64_t seed);
uint64_t cp_hash_u64(uint64_t x);

#endif
