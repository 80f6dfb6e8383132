/* The pprof writer: the profile as a gzip-compressed
 * perftools.profiles.Profile (proto/profile.proto, packed by protobuf-c).
 *
 * The protobuf-c messages are built in memory from the profile (small
 * objects from an arena, freed at once), then packed straight into zlib,
 * which writes the gzip stream to the caller's FILE: the packed message is
 * never held whole.  */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "formats/entries.h"
#include "util/hashidx.h"
#include "profile.pb-c.h"

/* ------------------------------------------------------- sample types */

/* How one Sample.value is computed from an aggregated count.  */
enum value_source {
	VALUE_COUNT,   /* the count itself */
	VALUE_PERIOD,  /* the count times the period (CPU time) */
	VALUE_0, VALUE_1, VALUE_2, VALUE_3, /* cp_sample.values[i] */
};

struct value_kind {
	const char *type, *unit; /* pprof's ValueType */
	enum value_source source;
};

/* The sample types a profile is written with, from its meta.  */
struct profile_kind {
	bool timed;             /* needs a sampling frequency */
	size_t nvalues;
	struct value_kind values[CP_PROFILE_VALUES];
	size_t period_type;     /* index into VALUES */
};

static void profile_kind_of(const struct cp_profile_meta *meta,
			    struct profile_kind *k)
{
	memset(k, 0, sizeof(*k));
	if (meta->nvalue_types > 0) {
		/* A heap profile (cprof-attach --heap): Go's heap profile
		 * types from the values, so `go tool pprof
		 * -sample_index=alloc_space` works; the last (in-use space)
		 * is the default view.  */
		k->nvalues = meta->nvalue_types;
		for (size_t i = 0; i < k->nvalues; i++) {
			k->values[i].type = meta->value_types[i].type;
			k->values[i].unit = meta->value_types[i].unit;
			k->values[i].source = (enum value_source)(VALUE_0 + i);
		}
		k->period_type = k->nvalues - 1;
	} else if (cp_sample_type_is(&meta->count_type, "samples", "count") &&
		   meta->frequency > 0) {
		/* Samples with a known frequency: an event count first
		 * (pprof's convention), then the CPU (or wall) time it
		 * stands for, which is the default view (the last sample
		 * type).  */
		k->timed = true;
		k->nvalues = 2;
		k->values[0] = (struct value_kind){ "samples", "count",
						    VALUE_COUNT };
		k->values[1] = (struct value_kind){
			meta->time_type[0] ? meta->time_type : "cpu",
			"nanoseconds", VALUE_PERIOD };
		k->period_type = 1;
	} else {
		/* Anything else: the counts in their own type (samples of
		 * unknown frequency, a profile read from folded text, are
		 * samples/count).  */
		k->nvalues = 1;
		k->values[0] = (struct value_kind){
			meta->count_type.type[0] ? meta->count_type.type
						 : "samples",
			meta->count_type.unit[0] ? meta->count_type.unit
						 : "count",
			VALUE_COUNT };
	}
}

/* ------------------------------------------------------------- arena */

/* Many small objects (messages, their arrays) that live until the profile
 * is packed: allocated from big chunks, freed together.  */
struct arena {
	char **chunks;
	size_t nchunks;
	size_t used, size; /* of the last chunk */
};

#define ARENA_CHUNK (1024 * 1024)

static void *arena_alloc(struct arena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	if (a->nchunks == 0 || a->used + size > a->size) {
		size_t chunk = size > ARENA_CHUNK ? size : ARENA_CHUNK;
		char **grown = realloc(a->chunks,
				       (a->nchunks + 1) * sizeof(*grown));
		if (!grown)
			return NULL;
		a->chunks = grown;
		char *c = malloc(chunk);
		if (!c)
			return NULL;
		a->chunks[a->nchunks++] = c;
		a->used = 0;
		a->size = chunk;
	}
	void *at = a->chunks[a->nchunks - 1] + a->used;
	a->used += size;
	return at;
}

static void arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->nchunks; i++)
		free(a->chunks[i]);
	free(a->chunks);
}

/* A growing array of message pointers (a repeated field).  */
struct ptrs {
	void **items;
	size_t n, cap;
};

static bool ptrs_push(struct ptrs *v, void *item)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 64;
		void **grown = realloc(v->items, cap * sizeof(*grown));
		if (!grown)
			return false;
		v->items = grown;
		v->cap = cap;
	}
	v->items[v->n++] = item;
	return true;
}

/* ------------------------------------------------------------ builder */

struct thread_labels {
	pid_t tid;
	size_t nlabels;
	/* thread_id, thread_name; in the arena, as samples point to it while
	 * this array grows */
	Perftools__Profiles__Label **labels;
};

struct builder {
	const struct cp_profile *p;
	struct arena arena;

	/* pprof's string table: a scratch profile interns the strings, its
	 * ids are the table's indexes (0 is "" in both).  */
	struct cp_profile *strings;
	uint32_t nstrings;      /* entries of the table so far */
	uint32_t *string_of;    /* profile string id -> index + 1; 0 unset */
	size_t string_of_len;

	struct ptrs functions;  /* Perftools__Profiles__Function * */
	uint64_t *function_keys; /* (name << 32 | file) per function */
	size_t function_keys_cap;
	struct cp_hashidx function_index;

	struct ptrs locations;  /* Perftools__Profiles__Location * */
	uint32_t *location_of;  /* profile location id -> pprof id; 0 unset */
	struct cp_hashidx address_index; /* address -> pprof id - 1 */

	struct ptrs mappings;   /* Perftools__Profiles__Mapping *, by id - 1 */
	uint32_t *mapping_of;   /* profile mapping id -> pprof id */

	struct thread_labels *threads;
	size_t nthreads, threads_cap;
	struct cp_hashidx thread_index;

	struct ptrs samples;
	struct ptrs value_types;
	int64_t *comments;
	size_t ncomments;
};

/* The string table index of STR.  */
static int64_t str_index(struct builder *b, const char *str)
{
	uint32_t id = cp_profile_intern(b->strings, str, strlen(str));
	if (id == UINT32_MAX)
		return -1;
	if (id >= b->nstrings)
		b->nstrings = id + 1;
	return id;
}

/* The string table index of the profile's string ID.  */
static int64_t str_of_id(struct builder *b, uint32_t id)
{
	if (id == 0)
		return 0;
	if (id >= b->string_of_len) {
		size_t len = b->string_of_len ? b->string_of_len : 1024;
		while (len <= id)
			len *= 2;
		uint32_t *grown = realloc(b->string_of, len * sizeof(*grown));
		if (!grown)
			return -1;
		memset(grown + b->string_of_len, 0,
		       (len - b->string_of_len) * sizeof(*grown));
		b->string_of = grown;
		b->string_of_len = len;
	}
	if (b->string_of[id] == 0) {
		int64_t index = str_index(b, cp_profile_string(b->p, id));
		if (index < 0)
			return -1;
		b->string_of[id] = (uint32_t)index + 1;
	}
	return (int64_t)b->string_of[id] - 1;
}

struct key_ctx {
	const struct builder *b;
	uint64_t key;
};

static bool function_eq(const void *ctx, uint32_t id)
{
	const struct key_ctx *k = ctx;
	return k->b->function_keys[id] == k->key;
}

/* The pprof id of the function NAME in FILE (profile string ids), one
 * Function per distinct pair.  0 when out of memory.  */
static uint64_t function_id(struct builder *b, uint32_t name, uint32_t file)
{
	struct key_ctx key = { b, (uint64_t)name << 32 | file };
	uint64_t hash = cp_hash_u64(key.key);
	uint32_t found = cp_hashidx_find(&b->function_index, hash,
					 function_eq, &key);
	if (found != UINT32_MAX)
		return (uint64_t)found + 1;

	Perftools__Profiles__Function *f = arena_alloc(&b->arena, sizeof(*f));
	if (!f)
		return 0;
	perftools__profiles__function__init(f);
	int64_t name_index = str_of_id(b, name);
	int64_t file_index = str_of_id(b, file);
	if (name_index < 0 || file_index < 0)
		return 0;
	uint32_t index = (uint32_t)b->functions.n;
	f->id = (uint64_t)index + 1;
	f->name = name_index;
	/* The symbolizer keeps only the readable name.  */
	f->system_name = name_index;
	f->filename = file_index;
	if (index >= b->function_keys_cap) {
		size_t cap = b->function_keys_cap ? 2 * b->function_keys_cap
						  : 256;
		uint64_t *grown = realloc(b->function_keys,
					  cap * sizeof(*grown));
		if (!grown)
			return 0;
		b->function_keys = grown;
		b->function_keys_cap = cap;
	}
	b->function_keys[index] = key.key;
	if (!ptrs_push(&b->functions, f) ||
	    !cp_hashidx_insert(&b->function_index, hash, index))
		return 0;
	return f->id;
}

static bool address_eq(const void *ctx, uint32_t id)
{
	const struct key_ctx *k = ctx;
	const Perftools__Profiles__Location *loc = k->b->locations.items[id];
	return loc->address == k->key;
}

/* Note in the mapping of LOC what its symbols resolved.  */
static void mapping_learn(struct builder *b, const struct cp_location *loc)
{
	if (loc->mapping == 0 || loc->mapping > b->mappings.n)
		return;
	Perftools__Profiles__Mapping *m =
		b->mappings.items[b->mapping_of[loc->mapping] - 1];
	for (uint32_t i = 0; i < loc->nlines; i++) {
		const struct cp_line *line = &loc->lines[i];
		m->has_functions |= line->function != 0;
		m->has_filenames |= line->file != 0;
		/* Line numbers come from DWARF, and with DWARF the
		 * symbolizer expands inlined calls too.  */
		m->has_line_numbers |= line->line > 0;
		m->has_inline_frames |= line->line > 0;
	}
}

/* The pprof id of profile location ID: one Location per distinct address,
 * or per location id when the address is unknown.  0 when out of memory
 * or ID is not a location.  */
static uint64_t location_id(struct builder *b, uint32_t id)
{
	if (b->location_of[id])
		return b->location_of[id];
	const struct cp_location *loc = cp_profile_location(b->p, id);
	struct key_ctx key = { b, loc->address };
	uint64_t hash = cp_hash_u64(loc->address);
	if (loc->address != 0) {
		uint32_t found = cp_hashidx_find(&b->address_index, hash,
						 address_eq, &key);
		if (found != UINT32_MAX) {
			b->location_of[id] = found + 1;
			return b->location_of[id];
		}
	}

	Perftools__Profiles__Location *l = arena_alloc(&b->arena, sizeof(*l));
	Perftools__Profiles__Line *lines =
		arena_alloc(&b->arena, (loc->nlines + 1) * sizeof(*lines));
	Perftools__Profiles__Line **line_ptrs =
		arena_alloc(&b->arena, (loc->nlines + 1) * sizeof(*line_ptrs));
	if (!l || !lines || !line_ptrs)
		return 0;
	perftools__profiles__location__init(l);
	uint32_t index = (uint32_t)b->locations.n;
	l->id = (uint64_t)index + 1;
	l->address = loc->address;
	if (loc->mapping != 0 && loc->mapping <= b->mappings.n)
		l->mapping_id = b->mapping_of[loc->mapping];
	/* Both orders agree: inlined calls innermost first, the function
	 * they were inlined into last.  */
	for (uint32_t i = 0; i < loc->nlines; i++) {
		perftools__profiles__line__init(&lines[i]);
		lines[i].function_id = function_id(b, loc->lines[i].function,
						   loc->lines[i].file);
		if (lines[i].function_id == 0)
			return 0;
		lines[i].line = loc->lines[i].line > 0 ? loc->lines[i].line : 0;
		line_ptrs[i] = &lines[i];
	}
	l->n_line = loc->nlines;
	l->line = line_ptrs;
	mapping_learn(b, loc);
	if (!ptrs_push(&b->locations, l))
		return 0;
	if (loc->address != 0 &&
	    !cp_hashidx_insert(&b->address_index, hash, index))
		return 0;
	b->location_of[id] = index + 1;
	return l->id;
}

static bool thread_eq(const void *ctx, uint32_t id)
{
	const struct key_ctx *k = ctx;
	return (uint64_t)(uint32_t)k->b->threads[id].tid == k->key;
}

/* The labels of thread TID, shared by all its samples; NULL when out of
 * memory.  */
static struct thread_labels *thread_labels(struct builder *b, pid_t tid)
{
	struct key_ctx key = { b, (uint32_t)tid };
	uint64_t hash = cp_hash_u64(key.key);
	uint32_t found = cp_hashidx_find(&b->thread_index, hash, thread_eq,
					 &key);
	if (found != UINT32_MAX)
		return &b->threads[found];
	if (b->nthreads == b->threads_cap) {
		size_t cap = b->threads_cap ? 2 * b->threads_cap : 16;
		struct thread_labels *grown =
			realloc(b->threads, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		b->threads = grown;
		b->threads_cap = cap;
	}
	struct thread_labels *t = &b->threads[b->nthreads];
	t->tid = tid;
	t->nlabels = 0;
	t->labels = arena_alloc(&b->arena, 2 * sizeof(*t->labels));
	if (!t->labels)
		return NULL;
	/* Thread 0 is "unknown" (folded input): no labels.  */
	if (tid != 0) {
		Perftools__Profiles__Label *id =
			arena_alloc(&b->arena, sizeof(*id));
		if (!id)
			return NULL;
		perftools__profiles__label__init(id);
		id->key = str_index(b, "thread_id");
		id->num = tid;
		t->labels[t->nlabels++] = id;
		const char *name = cp_profile_thread_name(b->p, tid);
		if (name) {
			Perftools__Profiles__Label *n =
				arena_alloc(&b->arena, sizeof(*n));
			if (!n)
				return NULL;
			perftools__profiles__label__init(n);
			n->key = str_index(b, "thread_name");
			n->str = str_index(b, name);
			if (n->str < 0)
				return NULL;
			t->labels[t->nlabels++] = n;
		}
		if (id->key < 0)
			return NULL;
	}
	if (!cp_hashidx_insert(&b->thread_index, hash,
			       (uint32_t)b->nthreads))
		return NULL;
	b->nthreads++;
	return t;
}

/* Does PATH name a shared library ("libc.so.6", "x.cpython-311.so")?  */
static bool shared_library(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	for (const char *so = strstr(base, ".so"); so; so = strstr(so + 1, ".so"))
		if (so[3] == '\0' || so[3] == '.')
			return true;
	return false;
}

/* pprof takes the first mapping for the main binary ("File:" in go tool
 * pprof's reports, the binary it symbolizes first).  The profile lists
 * them as the samples met them, often libc first.  The executable goes
 * first: the lowest mapping of a file that is not a shared library (an
 * executable is mapped below the libraries, PIE or not), else the lowest
 * of all; the others keep their order.  */
static uint32_t main_mapping(struct builder *b, uint32_t n)
{
	uint32_t best = 0;
	bool best_library = true;
	for (uint32_t id = 1; id <= n; id++) {
		const struct cp_mapping *cm = cp_profile_mapping(b->p, id);
		if (!cm)
			continue;
		const char *file = cm->file ? cp_profile_string(b->p, cm->file)
					    : NULL;
		bool library = !file || file[0] == '[' || shared_library(file);
		const struct cp_mapping *bm =
			best ? cp_profile_mapping(b->p, best) : NULL;
		if (!bm || (best_library && !library) ||
		    (best_library == library && cm->start < bm->start)) {
			best = id;
			best_library = library;
		}
	}
	return best;
}

static bool build_mappings(struct builder *b)
{
	uint32_t n = cp_profile_mapping_count(b->p);
	b->mapping_of = calloc((size_t)n + 1, sizeof(*b->mapping_of));
	if (!b->mapping_of)
		return false;
	uint32_t first = main_mapping(b, n);
	for (uint32_t i = 0; i <= n; i++) {
		/* FIRST, then the others in their order.  */
		uint32_t id = i == 0 ? first : i;
		if (id == 0 || (i > 0 && id == first))
			continue;
		const struct cp_mapping *cm = cp_profile_mapping(b->p, id);
		Perftools__Profiles__Mapping *m =
			arena_alloc(&b->arena, sizeof(*m));
		if (!cm || !m)
			return false;
		perftools__profiles__mapping__init(m);
		m->id = b->mappings.n + 1;
		m->memory_start = cm->start;
		m->memory_limit = cm->limit;
		m->file_offset = cm->offset;
		m->filename = str_of_id(b, cm->file);
		m->build_id = str_of_id(b, cm->build_id);
		if (m->filename < 0 || m->build_id < 0 ||
		    !ptrs_push(&b->mappings, m))
			return false;
		b->mapping_of[id] = (uint32_t)m->id;
	}
	return true;
}

static bool build_samples(struct builder *b, const struct profile_kind *kind,
			  int64_t period)
{
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(b->p, &nsamples);
	uint32_t nlocations = cp_profile_location_count(b->p);
	for (size_t i = 0; i < nsamples; i++) {
		const struct cp_sample *cs = &samples[i];
		const uint64_t *cs_values = cp_profile_sample_values(b->p, i);
		bool weighs = cs->count > 0;
		for (size_t v = 0; v < kind->nvalues && !weighs; v++)
			if (kind->values[v].source >= VALUE_0)
				weighs = cs_values[kind->values[v].source -
						   VALUE_0] > 0;
		if (!weighs)
			continue;
		size_t depth;
		const uint32_t *locs =
			cp_profile_stack(b->p, cs->stack, &depth);
		Perftools__Profiles__Sample *s =
			arena_alloc(&b->arena, sizeof(*s));
		uint64_t *ids = arena_alloc(&b->arena,
					    (depth + 1) * sizeof(*ids));
		int64_t *values = arena_alloc(&b->arena,
					      kind->nvalues * sizeof(*values));
		struct thread_labels *t = thread_labels(b, cs->tid);
		if (!s || !ids || !values || !t)
			return false;
		perftools__profiles__sample__init(s);
		size_t n = 0;
		for (size_t j = 0; j < depth; j++) {
			if (locs[j] >= nlocations)
				continue;
			ids[n] = location_id(b, locs[j]);
			if (ids[n] == 0)
				return false;
			n++;
		}
		s->n_location_id = n;
		s->location_id = ids;
		for (size_t v = 0; v < kind->nvalues; v++) {
			int64_t count = (int64_t)cs->count;
			enum value_source src = kind->values[v].source;
			if (src == VALUE_PERIOD)
				values[v] = count * period;
			else if (src >= VALUE_0)
				values[v] = (int64_t)cs_values[src - VALUE_0];
			else
				values[v] = count;
		}
		s->n_value = kind->nvalues;
		s->value = values;
		s->n_label = t->nlabels;
		s->label = t->labels;
		if (!ptrs_push(&b->samples, s))
			return false;
	}
	return true;
}

static Perftools__Profiles__ValueType *value_type(struct builder *b,
						  const struct value_kind *k)
{
	Perftools__Profiles__ValueType *vt = arena_alloc(&b->arena,
							 sizeof(*vt));
	if (!vt)
		return NULL;
	perftools__profiles__value_type__init(vt);
	vt->type = str_index(b, k->type);
	vt->unit = str_index(b, k->unit);
	return vt->type < 0 || vt->unit < 0 ? NULL : vt;
}

static bool add_comment(struct builder *b, const char *text)
{
	if (!*text)
		return true;
	int64_t index = str_index(b, text);
	if (index < 0)
		return false;
	b->comments[b->ncomments++] = index;
	return true;
}

/* ------------------------------------------------------- gzip output */

/* A protobuf-c output buffer that feeds zlib: small appends are staged,
 * deflated in big pieces and written to the stream.  */
struct gzip_sink {
	ProtobufCBuffer base;
	z_stream z;
	FILE *stream;
	int error;          /* first -CP_E_* failure */
	size_t staged;
	unsigned char in[64 * 1024];
	unsigned char out[64 * 1024];
};

static void sink_deflate(struct gzip_sink *s, const unsigned char *data,
			 size_t len, int flush)
{
	s->z.next_in = (unsigned char *)data;
	s->z.avail_in = (uInt)len;
	do {
		s->z.next_out = s->out;
		s->z.avail_out = sizeof(s->out);
		int rc = deflate(&s->z, flush);
		if (rc == Z_STREAM_ERROR) {
			s->error = -CP_E_INVAL;
			return;
		}
		size_t have = sizeof(s->out) - s->z.avail_out;
		if (have && fwrite(s->out, 1, have, s->stream) != have) {
			s->error = -CP_E_SYS;
			return;
		}
	} while (s->z.avail_out == 0 ||
		 (flush == Z_FINISH && s->z.avail_in > 0));
}

static void sink_append(ProtobufCBuffer *buffer, size_t len,
			const uint8_t *data)
{
	struct gzip_sink *s = (struct gzip_sink *)buffer;
	if (s->error)
		return;
	if (s->staged + len > sizeof(s->in)) {
		sink_deflate(s, s->in, s->staged, Z_NO_FLUSH);
		s->staged = 0;
	}
	if (len >= sizeof(s->in)) {
		/* uInt is 32 bits: big pieces go in slices.  */
		while (len > 0 && !s->error) {
			size_t slice = len > (1u << 30) ? (1u << 30) : len;
			sink_deflate(s, data, slice, Z_NO_FLUSH);
			data += slice;
			len -= slice;
		}
		return;
	}
	memcpy(s->in + s->staged, data, len);
	s->staged += len;
}

/* Pack MESSAGE gzip-compressed to STREAM.  */
static int write_gzip(const ProtobufCMessage *message, FILE *stream)
{
	struct gzip_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return -CP_E_NOMEM;
	s->base.append = sink_append;
	s->stream = stream;
	/* 16 + 15: a gzip header around a deflate stream with the largest
	 * window.  The fastest level: profiles compress well anyway, and
	 * big ones should not wait on zlib (Go's runtime does the same).  */
	if (deflateInit2(&s->z, Z_BEST_SPEED, Z_DEFLATED, 16 + 15, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(s);
		return -CP_E_NOMEM;
	}
	protobuf_c_message_pack_to_buffer(message, &s->base);
	if (!s->error)
		sink_deflate(s, s->in, s->staged, Z_FINISH);
	int rc = s->error;
	if (!rc && fflush(stream) != 0)
		rc = -CP_E_SYS;
	deflateEnd(&s->z);
	free(s);
	return rc;
}

/* ------------------------------------------------------------- write */

int cp_write_pprof(const struct cp_profile *p, FILE *stream)
{
	const struct cp_profile_meta *meta = cp_profile_meta_const(p);
	struct profile_kind kind_of_meta;
	profile_kind_of(meta, &kind_of_meta);
	const struct profile_kind *kind = &kind_of_meta;
	int64_t period = 1;
	if (kind->timed)
		period = (int64_t)((1000000000ULL + meta->frequency / 2) /
				   meta->frequency);
	int rc = -CP_E_NOMEM;
	char **table = NULL;
	struct builder b = { .p = p };
	Perftools__Profiles__Profile profile;
	perftools__profiles__profile__init(&profile);
	b.strings = cp_profile_new();
	uint32_t nlocations = cp_profile_location_count(p);
	b.location_of = calloc(nlocations + 1, sizeof(*b.location_of));
	b.comments = calloc(2, sizeof(*b.comments));
	if (!b.strings || !b.location_of || !b.comments)
		goto out;

	for (size_t i = 0; i < kind->nvalues; i++) {
		Perftools__Profiles__ValueType *vt =
			value_type(&b, &kind->values[i]);
		if (!vt || !ptrs_push(&b.value_types, vt))
			goto out;
	}
	profile.period_type = value_type(&b, &kind->values[kind->period_type]);
	if (!profile.period_type)
		goto out;
	profile.period = period;
	profile.time_nanos = (int64_t)meta->time_nanos;
	profile.duration_nanos = (int64_t)meta->duration_nanos;
	if (!add_comment(&b, meta->target) || !add_comment(&b, meta->command))
		goto out;
	if (!build_mappings(&b) || !build_samples(&b, kind, period))
		goto out;

	/* The scratch profile's ids are the string table's indexes.  */
	table = malloc((b.nstrings + 1) * sizeof(*table));
	if (!table)
		goto out;
	table[0] = (char *)"";
	for (uint32_t i = 1; i < b.nstrings; i++)
		table[i] = (char *)cp_profile_string(b.strings, i);

	profile.n_sample_type = b.value_types.n;
	profile.sample_type =
		(Perftools__Profiles__ValueType **)b.value_types.items;
	profile.n_sample = b.samples.n;
	profile.sample = (Perftools__Profiles__Sample **)b.samples.items;
	profile.n_mapping = b.mappings.n;
	profile.mapping = (Perftools__Profiles__Mapping **)b.mappings.items;
	profile.n_location = b.locations.n;
	profile.location = (Perftools__Profiles__Location **)b.locations.items;
	profile.n_function = b.functions.n;
	profile.function = (Perftools__Profiles__Function **)b.functions.items;
	profile.n_string_table = b.nstrings ? b.nstrings : 1;
	profile.string_table = table;
	profile.n_comment = b.ncomments;
	profile.comment = b.comments;
	rc = write_gzip(&profile.base, stream);
out:
	free(table);
	free(b.comments);
	free(b.samples.items);
	free(b.value_types.items);
	free(b.threads);
	cp_hashidx_free(&b.thread_index);
	free(b.mappings.items);
	free(b.mapping_of);
	cp_hashidx_free(&b.address_index);
	free(b.location_of);
	free(b.locations.items);
	cp_hashidx_free(&b.function_index);
	free(b.function_keys);
	free(b.functions.items);
	free(b.string_of);
	cp_profile_free(b.strings);
	arena_free(&b.arena);
	return rc;
}

static int format_pprof_write(const struct cp_format_input *in,
			      const struct cp_format_options *o, FILE *stream)
{
	(void)o;
	return cp_write_pprof(in->profile, stream);
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_pprof = {
	.name = "pprof",
	.suffixes = { ".pb.gz", NULL },
	.description = "gzipped profile.proto (go tool pprof), binary",
	.kinds = CP_FORMAT_SAMPLED | CP_FORMAT_HEAP | CP_FORMAT_DUMP,
	.binary = true,
	.dump_as_profile = true,
	.write = format_pprof_write,
	.begin = NULL,
	.sample = NULL,
	.end = NULL,
};
