/* The profile: interned strings, locations, stacks and aggregated samples. */
#include "cprof/profile.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cprof/error.h"
#include "util/hashidx.h"

struct thread_name {
	pid_t tid;
	uint32_t name; /* string id */
};

/* Stacks are paths in a prefix tree from the outermost frame.  A node
 * holds a run of locations and hangs under its parent after the first POS
 * locations of the parent's run (a stack that leaves an older one's path
 * in the middle of its run needs no split).  Each node is made by the one
 * stack that ends at the end of its run, so stack ID is node ID - 1 and a
 * stack costs one node, one index slot and the locations it does not share
 * with an older stack.  Node 0, the root, has no run and no stack; the
 * empty stack is a node under it with an empty run, as is a stack that
 * ends inside an older one's run.
 *
 * A location in a run is written as its place among the callees seen so
 * far of the location before it (its caller; the outermost frame's is
 * ROOT): a program's call graph is small and most callers have few
 * callees, so most frames take one nibble whatever their location's id,
 * where an id would take one or two bytes (issue 15: bytes per distinct
 * stack).  The call graph's edges are kept once each.  */
struct node {
	uint32_t parent;       /* node id; the root's is 0 */
	uint32_t run;          /* offset in runs[] of the node's record, in nibbles */
	uint32_t first_sample; /* its stack's first sample, or NO_SAMPLE */
};

/* A node's record in runs[]: POS, the number of locations N, then the N
 * locations outermost first, each its callee number (struct call), all
 * as nibble numbers (put_num).  */

/* A call graph edge in the index: callee number INDEX of CALLER.  */
struct call {
	uint32_t caller, index;
};

/* The callees of one caller, in the order they were first seen.  */
struct callees {
	uint32_t *to;
	uint32_t n, cap;
};

#define ROOT UINT32_MAX /* the outermost frame's caller */

/* An open-addressing table of ids (id + 1 in each slot, 0 empty) whose
 * keys the caller hashes and compares: 4 bytes a slot, no stored hash.  */
struct idtable {
	uint32_t *slots;
	size_t cap; /* power of two */
	size_t count;
};

#define NO_NODE UINT32_MAX
#define NO_SAMPLE UINT32_MAX
#define END_LOC UINT32_MAX /* the first location of an empty run */

struct cp_profile {
	/* strings: NUL-terminated, in blocks that never move, so a borrowed
	 * string stays valid while the table grows */
	char **blocks;
	size_t nblocks;
	size_t block_used, block_size; /* of the last block */
	char **strings;                /* by id */
	uint32_t nstrings, strings_cap;
	struct cp_hashidx string_index;

	struct cp_location *locations;
	uint32_t nlocations, locations_cap;

	struct node *nodes; /* nodes[0] is the root; stack ID is node ID - 1 */
	uint32_t nnodes, nodes_cap;
	struct idtable node_index; /* (parent, pos, first code) -> node */
	uint8_t *runs;
	size_t runs_used; /* nibbles */
	size_t runs_cap;  /* bytes */
	/* the call graph: each caller's callees by number, at caller + 1
	 * (ROOT's at 0), and for callers of many, their edges by (caller,
	 * callee) */
	struct call *calls;
	uint32_t ncalls, calls_cap;
	struct idtable call_index;
	struct callees *callees;
	size_t ncallees;     /* callers with room in callees[] */
	size_t callee_bytes; /* of the callees' lists */
	uint32_t *codes;     /* a new run's callee numbers, being written */
	size_t codes_cap;
	uint32_t nstacks;

	struct cp_sample *samples;
	size_t nsamples, samples_cap;
	/* (tid, stack) -> sample, for the samples that are not their stack's
	 * first (most stacks are seen on one thread) */
	struct idtable sample_index;
	uint64_t (*values)[CP_PROFILE_VALUES]; /* by sample; NULL until some */
	size_t values_cap;
	uint64_t total;

	struct thread_name *threads;
	size_t nthreads;
	pid_t *thread_ids;           /* parallel to threads, for the API */

	struct cp_mapping *mappings;
	uint32_t nmappings, mappings_cap;
	struct cp_profile_meta meta;
};

/* Tables of this size and more live in mappings of their own, grown in
 * place or moved by mremap: no copy and no hole left in the heap when
 * they grow, and only the pages written count in the resident set (a
 * long profile's tables are most of the tracer's memory).  At 256 KiB
 * the copies a table left in the heap below it made the tracer's VmRSS
 * grow in steps of 250-370 KB on bench/stackchurn.c (127 bytes per
 * distinct stack between its 8th and 16th second); at 64 KiB it grows
 * by 46 bytes a stack in both halves of a 32 s run.  */
#define MAPPED_BYTES (64 * 1024)

static size_t pages(size_t bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t size = page > 0 ? (size_t)page : 4096;
	return (bytes + size - 1) / size * size;
}

/* A table of OLD_BYTES at OLD (NULL: none) made NEW_BYTES long, its
 * contents kept; NULL when out of memory (OLD left as it was).  */
static void *table_resize(void *old, size_t old_bytes, size_t new_bytes)
{
	if (new_bytes < MAPPED_BYTES)
		return realloc(old, new_bytes);
	if (old && old_bytes >= MAPPED_BYTES) {
		void *moved = mremap(old, pages(old_bytes), pages(new_bytes),
				     MREMAP_MAYMOVE);
		return moved == MAP_FAILED ? NULL : moved;
	}
	void *mapped = mmap(NULL, pages(new_bytes), PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mapped == MAP_FAILED)
		return NULL;
	if (old) {
		memcpy(mapped, old, old_bytes);
		free(old);
	}
	return mapped;
}

/* A zeroed table of BYTES.  */
static void *table_zeroed(size_t bytes)
{
	if (bytes < MAPPED_BYTES)
		return calloc(1, bytes);
	void *mapped = mmap(NULL, pages(bytes), PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return mapped == MAP_FAILED ? NULL : mapped;
}

static void table_free(void *table, size_t bytes)
{
	if (table && bytes >= MAPPED_BYTES)
		munmap(table, pages(bytes));
	else
		free(table);
}

/* Grow *ARRAY (of SIZE-byte elements) so that NEED elements fit, to
 * at most MAX.  */
static bool reserve_max(void *array, size_t size, size_t need, size_t *cap,
			size_t max)
{
	if (need <= *cap)
		return true;
	if (need > max)
		return false;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n = n > max / 3 * 2 ? max : n + n / 2; /* not doubling: less
							  slack in big tables */
	void *grown = table_resize(*(void **)array, *cap * size, n * size);
	if (!grown)
		return false;
	*(void **)array = grown;
	*cap = n;
	return true;
}

static bool reserve(void *array, size_t size, size_t need, size_t *cap)
{
	return reserve_max(array, size, need, cap, SIZE_MAX / size);
}

static bool reserve32(void *array, size_t size, uint32_t need, uint32_t *cap)
{
	size_t c = *cap;
	if (!reserve_max(array, size, need, &c, UINT32_MAX))
		return false;
	*cap = (uint32_t)c;
	return true;
}

struct cp_profile *cp_profile_new(void)
{
	struct cp_profile *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (cp_profile_intern(p, "", 0) != 0) {
		cp_profile_free(p);
		return NULL;
	}
	cp_profile_set_count_type(p, "samples", "count");
	snprintf(p->meta.time_type, sizeof(p->meta.time_type), "cpu");
	return p;
}

void cp_profile_free(struct cp_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nblocks; i++)
		free(p->blocks[i]);
	free(p->blocks);
	table_free(p->strings, p->strings_cap * sizeof(*p->strings));
	cp_hashidx_free(&p->string_index);
	for (uint32_t i = 0; i < p->nlocations; i++)
		free((void *)p->locations[i].lines);
	table_free(p->locations, p->locations_cap * sizeof(*p->locations));
	table_free(p->nodes, p->nodes_cap * sizeof(*p->nodes));
	table_free(p->node_index.slots,
		   p->node_index.cap * sizeof(*p->node_index.slots));
	table_free(p->runs, p->runs_cap);
	table_free(p->calls, p->calls_cap * sizeof(*p->calls));
	table_free(p->call_index.slots,
		   p->call_index.cap * sizeof(*p->call_index.slots));
	for (size_t i = 0; i < p->ncallees; i++)
		free(p->callees[i].to);
	table_free(p->codes, p->codes_cap * sizeof(*p->codes));
	table_free(p->callees, p->ncallees * sizeof(*p->callees));
	table_free(p->samples, p->samples_cap * sizeof(*p->samples));
	table_free(p->sample_index.slots,
		   p->sample_index.cap * sizeof(*p->sample_index.slots));
	table_free(p->values, p->values_cap * sizeof(*p->values));
	free(p->threads);
	free(p->thread_ids);
	table_free(p->mappings, p->mappings_cap * sizeof(*p->mappings));
	free(p);
}

#define BLOCK_SIZE (64 * 1024)

/* SIZE bytes of string storage that will never move.  */
static char *store(struct cp_profile *p, size_t size)
{
	if (p->nblocks == 0 || p->block_used + size > p->block_size) {
		size_t block = size > BLOCK_SIZE ? size : BLOCK_SIZE;
		char **grown =
			realloc(p->blocks, (p->nblocks + 1) * sizeof(*grown));
		if (!grown)
			return NULL;
		p->blocks = grown;
		char *b = malloc(block);
		if (!b)
			return NULL;
		p->blocks[p->nblocks++] = b;
		p->block_used = 0;
		p->block_size = block;
	}
	char *at = p->blocks[p->nblocks - 1] + p->block_used;
	p->block_used += size;
	return at;
}

struct string_key {
	const struct cp_profile *p;
	const char *str;
	size_t len;
};

static bool string_eq(const void *ctx, uint32_t id)
{
	const struct string_key *k = ctx;
	const char *s = k->p->strings[id];
	return strncmp(s, k->str, k->len) == 0 && s[k->len] == '\0';
}

uint32_t cp_profile_intern(struct cp_profile *p, const char *str, size_t len)
{
	uint64_t hash = cp_hash_bytes(str, len, 0);
	struct string_key key = {p, str, len};
	uint32_t id = cp_hashidx_find(&p->string_index, hash, string_eq, &key);
	if (id != UINT32_MAX)
		return id;
	if (!reserve32(&p->strings, sizeof(char *), p->nstrings + 1,
		       &p->strings_cap))
		return UINT32_MAX;
	char *copy = store(p, len + 1);
	if (!copy)
		return UINT32_MAX;
	memcpy(copy, str, len);
	copy[len] = '\0';
	id = p->nstrings;
	if (!cp_hashidx_insert(&p->string_index, hash, id))
		return UINT32_MAX;
	p->strings[id] = copy;
	p->nstrings++;
	return id;
}

const char *cp_profile_string(const struct cp_profile *p, uint32_t id)
{
	if (id >= p->nstrings)
		return "";
	return p->strings[id];
}

uint32_t cp_profile_add_location(struct cp_profile *p, uint64_t address,
				 uint32_t module, const struct cp_line *lines,
				 uint32_t nlines)
{
	if (!reserve32(&p->locations, sizeof(*p->locations),
		       p->nlocations + 1, &p->locations_cap))
		return UINT32_MAX;
	struct cp_line *copy = malloc((nlines ? nlines : 1) * sizeof(*copy));
	if (!copy)
		return UINT32_MAX;
	if (nlines)
		memcpy(copy, lines, nlines * sizeof(*copy));
	struct cp_location *loc = &p->locations[p->nlocations];
	loc->address = address;
	loc->module = module;
	loc->mapping = 0;
	loc->nlines = nlines;
	loc->lines = copy;
	return p->nlocations++;
}

int cp_profile_set_location(struct cp_profile *p, uint32_t id,
			    uint32_t module, const struct cp_line *lines,
			    uint32_t nlines)
{
	if (id >= p->nlocations)
		return -CP_E_INVAL;
	struct cp_line *copy = malloc((nlines ? nlines : 1) * sizeof(*copy));
	if (!copy)
		return -CP_E_NOMEM;
	if (nlines)
		memcpy(copy, lines, nlines * sizeof(*copy));
	struct cp_location *loc = &p->locations[id];
	free((void *)loc->lines);
	loc->lines = copy;
	loc->nlines = nlines;
	loc->module = module;
	return 0;
}

const struct cp_location *cp_profile_location(const struct cp_profile *p,
					      uint32_t id)
{
	return id < p->nlocations ? &p->locations[id] : NULL;
}

/* The id in T under HASH that EQ accepts for KEY, or UINT32_MAX.  */
static uint32_t idtable_find(const struct idtable *t, uint64_t hash,
			     bool (*eq)(const struct cp_profile *, uint32_t,
					const void *),
			     const struct cp_profile *p, const void *key)
{
	if (t->cap == 0)
		return UINT32_MAX;
	size_t mask = t->cap - 1;
	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		uint32_t slot = t->slots[i];
		if (slot == 0)
			return UINT32_MAX;
		if (eq(p, slot - 1, key))
			return slot - 1;
	}
}

/* Make room in T for EXTRA more ids (at most 3/4 full); the ids in it
 * are rehashed with HASH_OF.  */
static bool idtable_reserve(struct idtable *t, size_t extra,
			    uint64_t (*hash_of)(const struct cp_profile *,
						uint32_t),
			    const struct cp_profile *p)
{
	size_t cap = t->cap ? t->cap : 256;
	while ((t->count + extra) * 4 > cap * 3)
		cap *= 2;
	if (cap == t->cap)
		return true;
	uint32_t *slots = table_zeroed(cap * sizeof(*slots));
	if (!slots)
		return false;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->slots[i])
			continue;
		size_t j = hash_of(p, t->slots[i] - 1) & (cap - 1);
		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = t->slots[i];
	}
	table_free(t->slots, t->cap * sizeof(*t->slots));
	t->slots = slots;
	t->cap = cap;
	return true;
}

/* Store ID under HASH (room reserved, the key absent).  */
static void idtable_put(struct idtable *t, uint64_t hash, uint32_t id)
{
	size_t mask = t->cap - 1;
	size_t i = hash & mask;
	while (t->slots[i])
		i = (i + 1) & mask;
	t->slots[i] = id + 1;
	t->count++;
}

/* Nibble numbers: below 15 a nibble of its own; from 15 a nibble of 15,
 * then the rest (the number - 15) 3 bits a nibble, least significant
 * first, the top bit of each set when another follows.  At most
 * NUM_NIBBLES for 32 bits.  */
#define NUM_NIBBLES 12

static inline unsigned nib_get(const uint8_t *runs, size_t at)
{
	uint8_t b = runs[at >> 1];
	return at & 1 ? b >> 4 : b & 15;
}

static void nib_put(uint8_t *runs, size_t at, unsigned v)
{
	/* Appended in order: the low nibble of a byte is written first.  */
	if (at & 1)
		runs[at >> 1] |= (uint8_t)(v << 4);
	else
		runs[at >> 1] = (uint8_t)v;
}

static void put_num(uint8_t *runs, size_t *at, uint32_t v)
{
	if (v < 15) {
		nib_put(runs, (*at)++, v);
		return;
	}
	nib_put(runs, (*at)++, 15);
	v -= 15;
	do {
		unsigned g = v & 7;
		v >>= 3;
		nib_put(runs, (*at)++, g | (v ? 8 : 0));
	} while (v);
}

static inline __attribute__((always_inline)) uint32_t
get_num(const uint8_t *runs, size_t *at)
{
	unsigned first = nib_get(runs, (*at)++);
	if (first < 15)
		return first;
	uint32_t v = 0;
	unsigned shift = 0, g;
	do {
		g = nib_get(runs, (*at)++);
		v |= (uint32_t)(g & 7) << shift;
		shift += 3;
	} while (g & 8);
	return v + 15;
}

/* The header of NODE's record: *POS and *N; returns the offset (in
 * nibbles) of its first location.  */
static size_t record_of(const struct cp_profile *p, uint32_t node,
			uint32_t *pos, uint32_t *n)
{
	size_t at = p->nodes[node].run;
	*pos = get_num(p->runs, &at);
	*n = get_num(p->runs, &at);
	return at;
}

/* ------------------------------------------------------ the call graph */

static uint64_t call_key_hash(uint32_t caller, uint32_t callee)
{
	return cp_hash_u64(((uint64_t)caller << 32) | callee);
}

static inline struct callees *callees_of(const struct cp_profile *p,
				  uint32_t caller)
{
	size_t slot = (uint32_t)(caller + 1); /* ROOT's is 0 */
	return slot < p->ncallees ? &p->callees[slot] : NULL;
}

static uint32_t call_callee(const struct cp_profile *p, uint32_t id)
{
	return callees_of(p, p->calls[id].caller)->to[p->calls[id].index];
}

static uint64_t call_hash(const struct cp_profile *p, uint32_t id)
{
	return call_key_hash(p->calls[id].caller, call_callee(p, id));
}

static bool call_eq(const struct cp_profile *p, uint32_t id, const void *key)
{
	const uint32_t *k = key; /* caller, callee */
	return p->calls[id].caller == k[0] && call_callee(p, id) == k[1];
}

/* A caller's callees are looked for in its list while it has this many
 * at most, and through the index from then on.  */
#define CALL_SCAN 16

/* CALLEE's number among CALLER's callees, UINT32_MAX when it has none
 * yet.  */
static uint32_t call_find(const struct cp_profile *p, uint32_t caller,
			  uint32_t callee)
{
	const struct callees *c = callees_of(p, caller);
	if (!c)
		return UINT32_MAX;
	if (c->n <= CALL_SCAN) {
		for (uint32_t i = 0; i < c->n; i++)
			if (c->to[i] == callee)
				return i;
		return UINT32_MAX;
	}
	uint32_t key[2] = {caller, callee};
	uint32_t id = idtable_find(&p->call_index,
				   call_key_hash(caller, callee), call_eq, p,
				   key);
	return id == UINT32_MAX ? UINT32_MAX : p->calls[id].index;
}

/* Index callee INDEX of CALLER (room reserved).  */
static void call_index_put(struct cp_profile *p, uint32_t caller,
			   uint32_t index)
{
	uint32_t id = p->ncalls++;
	p->calls[id] = (struct call){caller, index};
	idtable_put(&p->call_index, call_hash(p, id), id);
}

/* CALLEE's number among CALLER's callees, added when new; UINT32_MAX when
 * out of memory.  */
static uint32_t call_code(struct cp_profile *p, uint32_t caller,
			  uint32_t callee)
{
	uint32_t index = call_find(p, caller, callee);
	if (index != UINT32_MAX)
		return index;
	size_t slot = (uint32_t)(caller + 1), had = p->ncallees;
	if (!reserve(&p->callees, sizeof(*p->callees), slot + 1,
		     &p->ncallees))
		return UINT32_MAX;
	memset(p->callees + had, 0, (p->ncallees - had) * sizeof(*p->callees));
	struct callees *c = &p->callees[slot];
	if (c->n == c->cap) {
		/* Most callers have a few callees: small lists, doubled.  */
		if (c->cap >= UINT32_MAX / 2)
			return UINT32_MAX;
		uint32_t cap = c->cap ? c->cap * 2 : 2;
		uint32_t *grown = realloc(c->to, cap * sizeof(*grown));
		if (!grown)
			return UINT32_MAX;
		p->callee_bytes += (size_t)(cap - c->cap) * sizeof(*grown);
		c->to = grown;
		c->cap = cap;
	}
	/* Past CALL_SCAN callees, all of them go to the index.  */
	size_t indexed = c->n < CALL_SCAN ? 0 : c->n == CALL_SCAN ? c->n + 1 : 1;
	if (indexed &&
	    (p->ncalls >= UINT32_MAX - indexed ||
	     !reserve32(&p->calls, sizeof(*p->calls),
			(uint32_t)(p->ncalls + indexed), &p->calls_cap) ||
	     !idtable_reserve(&p->call_index, indexed, call_hash, p)))
		return UINT32_MAX;
	index = c->n++;
	c->to[index] = callee;
	for (uint32_t i = c->n - (uint32_t)indexed; i < c->n; i++)
		call_index_put(p, caller, i);
	return index;
}

/* The location numbered CODE among CALLER's callees.  */
static inline uint32_t callee_of(const struct cp_profile *p, uint32_t caller,
			  uint32_t code)
{
	return callees_of(p, caller)->to[code];
}

/* ------------------------------------------------------------ the tree */

static uint64_t edge_hash(uint32_t parent, uint32_t pos, uint32_t code)
{
	return cp_hash_u64((((uint64_t)parent << 32) | code) +
			   pos * 0x9e3779b97f4a7c15ULL);
}

/* A node's place: under PARENT, after POS of its locations, starting with
 * callee number CODE (of the location before it: that is fixed by PARENT
 * and POS), END_LOC for an empty run.  */
struct edge {
	uint32_t parent, pos, code;
};

static struct edge edge_of(const struct cp_profile *p, uint32_t node)
{
	struct edge e = {.parent = p->nodes[node].parent};
	uint32_t n;
	size_t at = record_of(p, node, &e.pos, &n);
	e.code = n ? get_num(p->runs, &at) : END_LOC;
	return e;
}

static uint64_t node_hash(const struct cp_profile *p, uint32_t node)
{
	struct edge e = edge_of(p, node);
	return edge_hash(e.parent, e.pos, e.code);
}

static bool edge_eq(const struct cp_profile *p, uint32_t node,
		    const void *key)
{
	const struct edge *k = key;
	if (p->nodes[node].parent != k->parent)
		return false;
	struct edge e = edge_of(p, node);
	return e.pos == k->pos && e.code == k->code;
}

/* The node of the stack that ends N locations into the path from the
 * root, LOCS[0..N) innermost first, added with the locations it does not
 * share with the tree; NO_NODE when out of memory.  */
static uint32_t node_of(struct cp_profile *p, const uint32_t *locs, size_t n)
{
	if (!p->nodes) {
		if (!reserve32(&p->nodes, sizeof(*p->nodes), 1, &p->nodes_cap))
			return NO_NODE;
		p->nodes[p->nnodes++] = (struct node){0, 0, NO_SAMPLE};
	}
	uint32_t node = 0;
	uint32_t matched = 0, len = 0; /* of NODE's run */
	size_t k = n;                  /* locations LOCS[0..K) to place */
	uint32_t caller = ROOT;        /* of LOCS[K-1]: LOCS[K] */
	for (;;) {
		if (k == 0 && matched == len && node != 0)
			return node; /* its own stack */
		struct edge e = {node, matched, END_LOC};
		if (k > 0) {
			e.code = call_find(p, caller, locs[k - 1]);
			if (e.code == UINT32_MAX)
				break; /* a call never seen: a new stack */
		}
		uint64_t hash = edge_hash(e.parent, e.pos, e.code);
		uint32_t child = idtable_find(&p->node_index, hash, edge_eq,
					      p, &e);
		if (child == UINT32_MAX)
			break;
		node = child;
		uint32_t pos;
		size_t at = record_of(p, node, &pos, &len);
		for (matched = 0; matched < len && k > 0; matched++, k--) {
			uint32_t loc = callee_of(p, caller,
						 get_num(p->runs, &at));
			if (loc != locs[k - 1])
				break;
			caller = loc;
		}
	}
	/* A new node under NODE after MATCHED of its locations, with the
	 * rest of the stack: LOCS[K-1] .. LOCS[0], as callee numbers (the
	 * calls made first: a failure leaves the tree as it was).  */
	size_t need = p->runs_used + (2 + k) * NUM_NIBBLES;
	if (p->nnodes >= UINT32_MAX - 1 || need > UINT32_MAX ||
	    !reserve32(&p->nodes, sizeof(*p->nodes), p->nnodes + 1,
		       &p->nodes_cap) ||
	    !idtable_reserve(&p->node_index, 1, node_hash, p) ||
	    !reserve(&p->runs, 1, need / 2 + 1, &p->runs_cap) ||
	    !reserve(&p->codes, sizeof(*p->codes), k, &p->codes_cap))
		return NO_NODE;
	for (size_t i = k, c = caller; i-- > 0; c = locs[i]) {
		p->codes[k - 1 - i] = call_code(p, (uint32_t)c, locs[i]);
		if (p->codes[k - 1 - i] == UINT32_MAX)
			return NO_NODE;
	}
	uint32_t run = (uint32_t)p->runs_used;
	size_t at = p->runs_used;
	put_num(p->runs, &at, matched);
	put_num(p->runs, &at, (uint32_t)k);
	for (size_t i = 0; i < k; i++)
		put_num(p->runs, &at, p->codes[i]);
	p->runs_used = at;
	uint32_t first = k ? p->codes[0] : END_LOC;
	uint32_t added = p->nnodes++;
	p->nodes[added] = (struct node){node, run, NO_SAMPLE};
	idtable_put(&p->node_index, edge_hash(node, matched, first), added);
	return added;
}

uint32_t cp_profile_intern_stack(struct cp_profile *p, const uint32_t *locs,
				 size_t n)
{
	uint32_t node = node_of(p, locs, n);
	if (node == NO_NODE)
		return UINT32_MAX;
	if (node > p->nstacks)
		p->nstacks = node; /* a new one: stack NODE - 1 */
	return node - 1;
}

size_t cp_profile_stack_depth(const struct cp_profile *p, uint32_t id)
{
	if (id >= p->nstacks)
		return 0;
	uint32_t node = id + 1, pos, n;
	record_of(p, node, &pos, &n);
	size_t depth = n;
	/* each node on the way up gives its parent's first POS locations */
	for (; node != 0; node = p->nodes[node].parent) {
		record_of(p, node, &pos, &n);
		depth += pos;
	}
	return depth;
}

size_t cp_profile_stack_locs(const struct cp_profile *p, uint32_t id,
			     uint32_t *locs, size_t cap)
{
	size_t depth = cp_profile_stack_depth(p, id);
	if (depth > cap)
		return depth;
	/* The nodes on the path, innermost first, with the number of
	 * locations each gives (all of the innermost's run, then of each
	 * parent the first POS of the node below it); then decoded from
	 * the root down, each location the callee of the one before it,
	 * into LOCS from its end (LOCS is innermost first).  */
	struct step {
		uint32_t node, take;
	} some[64], *path = some;
	size_t npath = 0, path_cap = sizeof(some) / sizeof(some[0]);
	uint32_t node = id + 1, pos, n;
	record_of(p, node, &pos, &n);
	uint32_t take = n;
	for (; node != 0; node = p->nodes[node].parent) {
		if (npath == path_cap) {
			size_t grown_cap = path_cap * 2;
			struct step *grown = malloc(grown_cap * sizeof(*grown));
			if (!grown)
				return 0;
			memcpy(grown, path, npath * sizeof(*grown));
			if (path != some)
				free(path);
			path = grown;
			path_cap = grown_cap;
		}
		path[npath++] = (struct step){node, take};
		record_of(p, node, &pos, &n);
		take = pos;
	}
	size_t out = depth;
	uint32_t caller = ROOT;
	while (npath-- > 0) {
		size_t at = record_of(p, path[npath].node, &pos, &n);
		for (uint32_t i = 0; i < path[npath].take; i++) {
			caller = callee_of(p, caller, get_num(p->runs, &at));
			locs[--out] = caller;
		}
	}
	if (path != some)
		free(path);
	return depth;
}

/* cp_profile_stack's buffer, one per thread, freed when it exits.  */
struct stack_buffer {
	uint32_t *locs;
	size_t cap;
};

static pthread_key_t buffer_key;
static pthread_once_t buffer_once = PTHREAD_ONCE_INIT;
static bool buffer_key_made;

static void free_buffer(void *arg)
{
	struct stack_buffer *b = arg;
	free(b->locs);
	free(b);
}

static void make_buffer_key(void)
{
	buffer_key_made = pthread_key_create(&buffer_key, free_buffer) == 0;
}

const uint32_t *cp_profile_stack(const struct cp_profile *p, uint32_t id,
				 size_t *n)
{
	*n = 0;
	if (id >= p->nstacks)
		return NULL;
	pthread_once(&buffer_once, make_buffer_key);
	if (!buffer_key_made)
		return NULL;
	struct stack_buffer *b = pthread_getspecific(buffer_key);
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b || pthread_setspecific(buffer_key, b) != 0) {
			free(b);
			return NULL;
		}
	}
	size_t depth = cp_profile_stack_depth(p, id);
	if (depth + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < depth + 1)
			cap *= 2;
		uint32_t *grown = realloc(b->locs, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		b->locs = grown;
		b->cap = cap;
	}
	*n = cp_profile_stack_locs(p, id, b->locs, b->cap);
	return b->locs;
}

size_t cp_profile_bytes(const struct cp_profile *p)
{
	return p->nodes_cap * sizeof(*p->nodes) +
	       p->node_index.cap * sizeof(*p->node_index.slots) +
	       p->runs_cap + p->calls_cap * sizeof(*p->calls) +
	       p->call_index.cap * sizeof(*p->call_index.slots) +
	       p->ncallees * sizeof(*p->callees) + p->callee_bytes +
	       p->samples_cap * sizeof(*p->samples) +
	       p->sample_index.cap * sizeof(*p->sample_index.slots) +
	       p->values_cap * sizeof(*p->values);
}

struct sample_key {
	pid_t tid;
	uint32_t stack;
};

static uint64_t sample_key_hash(pid_t tid, uint32_t stack)
{
	return cp_hash_u64(((uint64_t)(uint32_t)tid << 32) | stack);
}

static uint64_t sample_hash(const struct cp_profile *p, uint32_t id)
{
	return sample_key_hash(p->samples[id].tid, p->samples[id].stack);
}

static bool sample_eq(const struct cp_profile *p, uint32_t id,
		      const void *key)
{
	const struct sample_key *k = key;
	return p->samples[id].tid == k->tid && p->samples[id].stack == k->stack;
}

/* The sample of (TID, STACK), added when new; its index, or SIZE_MAX when
 * out of memory.  */
static size_t sample_of(struct cp_profile *p, pid_t tid, uint32_t stack)
{
	/* A stack's first sample is found through the stack, the others
	 * (the same stack on other threads, unknown stack ids) through
	 * the index.  */
	uint32_t *first = stack < p->nstacks
				  ? &p->nodes[stack + 1].first_sample
				  : NULL;
	if (first && *first != NO_SAMPLE && p->samples[*first].tid == tid)
		return *first;
	struct sample_key key = {tid, stack};
	uint64_t hash = sample_key_hash(tid, stack);
	bool indexed = !first || *first != NO_SAMPLE;
	if (indexed) {
		uint32_t id = idtable_find(&p->sample_index, hash, sample_eq,
					   p, &key);
		if (id != UINT32_MAX)
			return id;
	}
	if (p->nsamples >= UINT32_MAX - 1 ||
	    !reserve(&p->samples, sizeof(*p->samples), p->nsamples + 1,
		     &p->samples_cap) ||
	    (p->values && !reserve(&p->values, sizeof(*p->values),
				   p->nsamples + 1, &p->values_cap)) ||
	    (indexed &&
	     !idtable_reserve(&p->sample_index, 1, sample_hash, p)))
		return SIZE_MAX;
	size_t id = p->nsamples++;
	p->samples[id] = (struct cp_sample){.tid = tid, .stack = stack};
	if (p->values)
		memset(p->values[id], 0, sizeof(p->values[id]));
	if (indexed)
		idtable_put(&p->sample_index, hash, (uint32_t)id);
	else
		*first = (uint32_t)id;
	return id;
}

int cp_profile_add(struct cp_profile *p, pid_t tid, uint32_t stack,
		   uint64_t count)
{
	size_t id = sample_of(p, tid, stack);
	if (id == SIZE_MAX)
		return -CP_E_NOMEM;
	p->samples[id].count += count;
	p->total += count;
	return 0;
}

int cp_profile_add_values(struct cp_profile *p, pid_t tid, uint32_t stack,
			  uint64_t count, const uint64_t *values)
{
	if (!p->values) {
		/* The first values: a table for every sample from now on. */
		size_t need = p->nsamples ? p->nsamples : 1;
		if (!reserve(&p->values, sizeof(*p->values), need,
			     &p->values_cap))
			return -CP_E_NOMEM;
		memset(p->values, 0, p->nsamples * sizeof(*p->values));
	}
	size_t id = sample_of(p, tid, stack);
	if (id == SIZE_MAX)
		return -CP_E_NOMEM;
	p->samples[id].count += count;
	p->total += count;
	for (size_t i = 0; i < CP_PROFILE_VALUES; i++)
		p->values[id][i] += values[i];
	return 0;
}

const struct cp_sample *cp_profile_samples(const struct cp_profile *p,
					   size_t *n)
{
	*n = p->nsamples;
	return p->samples;
}

const uint64_t *cp_profile_sample_values(const struct cp_profile *p,
					 size_t index)
{
	static const uint64_t zeros[CP_PROFILE_VALUES];
	if (!p->values || index >= p->nsamples)
		return zeros;
	return p->values[index];
}

uint64_t cp_profile_total(const struct cp_profile *p)
{
	return p->total;
}

int cp_profile_set_thread_name(struct cp_profile *p, pid_t tid,
			       const char *name)
{
	uint32_t id = cp_profile_intern(p, name, strlen(name));
	if (id == UINT32_MAX)
		return -CP_E_NOMEM;
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid) {
			p->threads[i].name = id;
			return 0;
		}
	struct thread_name *grown =
		realloc(p->threads, (p->nthreads + 1) * sizeof(*grown));
	if (!grown)
		return -CP_E_NOMEM;
	p->threads = grown;
	pid_t *ids = realloc(p->thread_ids, (p->nthreads + 1) * sizeof(*ids));
	if (!ids)
		return -CP_E_NOMEM;
	p->thread_ids = ids;
	p->thread_ids[p->nthreads] = tid;
	p->threads[p->nthreads].tid = tid;
	p->threads[p->nthreads].name = id;
	p->nthreads++;
	return 0;
}

const char *cp_profile_thread_name(const struct cp_profile *p, pid_t tid)
{
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid)
			return cp_profile_string(p, p->threads[i].name);
	return NULL;
}

uint32_t cp_profile_add_mapping(struct cp_profile *p, uint64_t start,
				uint64_t limit, uint64_t offset, uint32_t file,
				uint32_t build_id)
{
	for (uint32_t i = 0; i < p->nmappings; i++)
		if (p->mappings[i].start == start && p->mappings[i].file == file)
			return i + 1;
	if (!reserve32(&p->mappings, sizeof(*p->mappings), p->nmappings + 1,
		       &p->mappings_cap))
		return 0;
	p->mappings[p->nmappings] = (struct cp_mapping){
		start, limit, offset, file, build_id};
	return ++p->nmappings;
}

const struct cp_mapping *cp_profile_mapping(const struct cp_profile *p,
					    uint32_t id)
{
	return id >= 1 && id <= p->nmappings ? &p->mappings[id - 1] : NULL;
}

uint32_t cp_profile_mapping_count(const struct cp_profile *p)
{
	return p->nmappings;
}

void cp_profile_set_location_mapping(struct cp_profile *p, uint32_t id,
				     uint32_t mapping)
{
	if (id < p->nlocations)
		p->locations[id].mapping = mapping;
}

uint32_t cp_profile_location_count(const struct cp_profile *p)
{
	return p->nlocations;
}

void cp_sample_type_set(struct cp_sample_type *t, const char *type,
			const char *unit)
{
	snprintf(t->type, sizeof(t->type), "%s", type ? type : "");
	snprintf(t->unit, sizeof(t->unit), "%s", unit ? unit : "");
}

bool cp_sample_type_is(const struct cp_sample_type *t, const char *type,
		       const char *unit)
{
	return (!type || strcmp(t->type, type) == 0) &&
	       (!unit || strcmp(t->unit, unit) == 0);
}

const char *cp_sample_type_word(const struct cp_sample_type *t)
{
	if (!t->unit[0] || strcmp(t->unit, "count") != 0)
		return t->unit[0] ? t->unit : "samples";
	if (!t->type[0] || strcmp(t->type, "samples") == 0)
		return "samples";
	size_t len = strlen(t->type);
	if (len >= 8 && strcmp(t->type + len - 8, "_objects") == 0)
		return "allocations";
	return t->type;
}

void cp_profile_set_count_type(struct cp_profile *p, const char *type,
			       const char *unit)
{
	cp_sample_type_set(&p->meta.count_type, type, unit);
}

void cp_profile_set_heap_types(struct cp_profile *p, size_t count_value)
{
	static const char *const types[CP_PROFILE_VALUES][2] = {
		{ "alloc_objects", "count" },
		{ "alloc_space", "bytes" },
		{ "inuse_objects", "count" },
		{ "inuse_space", "bytes" },
	};
	p->meta.nvalue_types = CP_PROFILE_VALUES;
	for (size_t i = 0; i < CP_PROFILE_VALUES; i++)
		cp_sample_type_set(&p->meta.value_types[i], types[i][0],
				   types[i][1]);
	if (count_value >= CP_PROFILE_VALUES)
		count_value = CP_PROFILE_VALUES - 1;
	cp_profile_set_count_type(p, types[count_value][0],
				  types[count_value][1]);
	p->total = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		p->samples[i].count =
			cp_profile_sample_values(p, i)[count_value];
		p->total += p->samples[i].count;
	}
}

bool cp_profile_counts_samples(const struct cp_profile *p)
{
	return cp_sample_type_is(&p->meta.count_type, "samples", "count");
}

struct cp_profile_meta *cp_profile_meta(struct cp_profile *p)
{
	return &p->meta;
}

const struct cp_profile_meta *cp_profile_meta_const(const struct cp_profile *p)
{
	return &p->meta;
}

const pid_t *cp_profile_threads(const struct cp_profile *p, size_t *n)
{
	*n = p->nthreads;
	return p->thread_ids;
}
