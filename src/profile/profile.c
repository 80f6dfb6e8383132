/* The profile: interned strings, locations, stacks and aggregated samples. */
#include "cprof/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "util/hashidx.h"

struct thread_name {
	pid_t tid;
	uint32_t name; /* string id */
};

struct stack_ref {
	size_t offset; /* into stack_locs */
	uint32_t len;
};

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

	uint32_t *stack_locs;
	size_t stack_locs_used, stack_locs_cap;
	struct stack_ref *stacks;
	uint32_t nstacks, stacks_cap;
	struct cp_hashidx stack_index;

	struct cp_sample *samples;
	size_t nsamples, samples_cap;
	struct cp_hashidx sample_index;
	uint64_t total;

	struct thread_name *threads;
	size_t nthreads;
	pid_t *thread_ids;           /* parallel to threads, for the API */

	struct cp_mapping *mappings;
	uint32_t nmappings, mappings_cap;
	struct cp_profile_meta meta;
};

/* Grow *ARRAY (of SIZE-byte elements) so that NEED elements fit.  */
static bool reserve(void *array, size_t size, size_t need, size_t *cap)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *grown = realloc(*(void **)array, n * size);
	if (!grown)
		return false;
	*(void **)array = grown;
	*cap = n;
	return true;
}

static bool reserve32(void *array, size_t size, uint32_t need, uint32_t *cap)
{
	size_t c = *cap;
	if (!reserve(array, size, need, &c))
		return false;
	*cap = (uint32_t)(c > UINT32_MAX ? UINT32_MAX : c);
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
	free(p->strings);
	cp_hashidx_free(&p->string_index);
	for (uint32_t i = 0; i < p->nlocations; i++)
		free((void *)p->locations[i].lines);
	free(p->locations);
	free(p->stack_locs);
	free(p->stacks);
	cp_hashidx_free(&p->stack_index);
	free(p->samples);
	cp_hashidx_free(&p->sample_index);
	free(p->threads);
	free(p->thread_ids);
	free(p->mappings);
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

struct stack_key {
	const struct cp_profile *p;
	const uint32_t *locs;
	size_t n;
};

static bool stack_eq(const void *ctx, uint32_t id)
{
	const struct stack_key *k = ctx;
	const struct stack_ref *s = &k->p->stacks[id];
	return s->len == k->n &&
	       memcmp(k->p->stack_locs + s->offset, k->locs,
		      k->n * sizeof(*k->locs)) == 0;
}

uint32_t cp_profile_intern_stack(struct cp_profile *p, const uint32_t *locs,
				 size_t n)
{
	uint64_t hash = cp_hash_bytes(locs, n * sizeof(*locs), 1);
	struct stack_key key = {p, locs, n};
	uint32_t id = cp_hashidx_find(&p->stack_index, hash, stack_eq, &key);
	if (id != UINT32_MAX)
		return id;
	if (!reserve(&p->stack_locs, sizeof(*p->stack_locs),
		     p->stack_locs_used + n, &p->stack_locs_cap) ||
	    !reserve32(&p->stacks, sizeof(*p->stacks), p->nstacks + 1,
		       &p->stacks_cap))
		return UINT32_MAX;
	id = p->nstacks;
	p->stacks[id].offset = p->stack_locs_used;
	p->stacks[id].len = (uint32_t)n;
	if (n)
		memcpy(p->stack_locs + p->stack_locs_used, locs,
		       n * sizeof(*locs));
	if (!cp_hashidx_insert(&p->stack_index, hash, id))
		return UINT32_MAX;
	p->stack_locs_used += n;
	p->nstacks++;
	return id;
}

const uint32_t *cp_profile_stack(const struct cp_profile *p, uint32_t id,
				 size_t *n)
{
	if (id >= p->nstacks) {
		*n = 0;
		return NULL;
	}
	*n = p->stacks[id].len;
	return p->stack_locs + p->stacks[id].offset;
}

struct sample_key {
	const struct cp_profile *p;
	pid_t tid;
	uint32_t stack;
};

static bool sample_eq(const void *ctx, uint32_t id)
{
	const struct sample_key *k = ctx;
	return k->p->samples[id].tid == k->tid &&
	       k->p->samples[id].stack == k->stack;
}

static struct cp_sample *sample_of(struct cp_profile *p, pid_t tid,
				   uint32_t stack);

int cp_profile_add(struct cp_profile *p, pid_t tid, uint32_t stack,
		   uint64_t count)
{
	struct cp_sample *s = sample_of(p, tid, stack);
	if (!s)
		return -CP_E_NOMEM;
	s->count += count;
	p->total += count;
	return 0;
}

int cp_profile_add_values(struct cp_profile *p, pid_t tid, uint32_t stack,
			  uint64_t count, const uint64_t *values)
{
	struct cp_sample *s = sample_of(p, tid, stack);
	if (!s)
		return -CP_E_NOMEM;
	s->count += count;
	p->total += count;
	for (size_t i = 0; i < CP_PROFILE_VALUES; i++)
		s->values[i] += values[i];
	return 0;
}

static struct cp_sample *sample_of(struct cp_profile *p, pid_t tid,
				   uint32_t stack)
{
	uint64_t hash = cp_hash_u64(((uint64_t)(uint32_t)tid << 32) | stack);
	struct sample_key key = {p, tid, stack};
	uint32_t id = cp_hashidx_find(&p->sample_index, hash, sample_eq, &key);
	if (id == UINT32_MAX) {
		if (!reserve(&p->samples, sizeof(*p->samples), p->nsamples + 1,
			     &p->samples_cap))
			return NULL;
		id = (uint32_t)p->nsamples;
		memset(&p->samples[id], 0, sizeof(p->samples[id]));
		p->samples[id].tid = tid;
		p->samples[id].stack = stack;
		if (!cp_hashidx_insert(&p->sample_index, hash, id))
			return NULL;
		p->nsamples++;
	}
	return &p->samples[id];
}

const struct cp_sample *cp_profile_samples(const struct cp_profile *p,
					   size_t *n)
{
	*n = p->nsamples;
	return p->samples;
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
		p->samples[i].count = p->samples[i].values[count_value];
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
