#include "util/hashidx.h"

#include <stdlib.h>

uint64_t cp_hash_u64(uint64_t x)
{
	/* splitmix64 finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t cp_hash_bytes(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return cp_hash_u64(h);
}

uint32_t cp_hashidx_find(const struct cp_hashidx *h, uint64_t hash,
			 cp_hashidx_eq eq, const void *ctx)
{
	if (h->cap == 0)
		return UINT32_MAX;
	size_t mask = h->cap - 1;
	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		uint32_t slot = h->slots[i];
		if (slot == 0)
			return UINT32_MAX;
		if (h->hashes[i] == hash && eq(ctx, slot - 1))
			return slot - 1;
	}
}

static bool grow(struct cp_hashidx *h)
{
	size_t cap = h->cap ? h->cap * 2 : 1024;
	uint32_t *slots = calloc(cap, sizeof(*slots));
	uint64_t *hashes = malloc(cap * sizeof(*hashes));
	if (!slots || !hashes) {
		free(slots);
		free(hashes);
		return false;
	}
	for (size_t i = 0; i < h->cap; i++) {
		if (!h->slots[i])
			continue;
		size_t j = h->hashes[i] & (cap - 1);
		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = h->slots[i];
		hashes[j] = h->hashes[i];
	}
	free(h->slots);
	free(h->hashes);
	h->slots = slots;
	h->hashes = hashes;
	h->cap = cap;
	return true;
}

bool cp_hashidx_insert(struct cp_hashidx *h, uint64_t hash, uint32_t id)
{
	if ((h->count + 1) * 4 > h->cap * 3 && !grow(h))
		return false;
	size_t mask = h->cap - 1;
	size_t i = hash & mask;
	while (h->slots[i])
		i = (i + 1) & mask;
	h->slots[i] = id + 1;
	h->hashes[i] = hash;
	h->count++;
	return true;
}

void cp_hashidx_free(struct cp_hashidx *h)
{
	free(h->slots);
	free(h->hashes);
	h->slots = NULL;
	h->hashes = NULL;
	h->cap = h->count = 0;
}
