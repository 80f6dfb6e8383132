/* The profile: interned strings, locations, stacks and per-thread sample
 * counts.  The model follows pprof's profile.proto (a location is an
 * address with one or more source lines, inlined calls innermost first), so
 * every writer — folded, and later svg, pprof, speedscope — reads the same
 * plain data.  A profile read from folded text has locations without
 * addresses, one line each.  */
#ifndef CPROF_PROFILE_H
#define CPROF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cp_profile;

/* One source-level frame of a location.  */
struct cp_line {
	uint32_t function;  /* string id of the frame's name */
	uint32_t file;      /* string id of the source file, 0 when unknown */
	int line;           /* 0 when unknown */
	bool inlined;       /* inlined into the next line of the location */
};

/* A mapped module (pprof's Mapping).  */
struct cp_mapping {
	uint64_t start, limit; /* [start, limit) in the target */
	uint64_t offset;       /* file offset of START */
	uint32_t file;         /* string id of the path */
	uint32_t build_id;     /* string id of the hex build-id, 0 if none */
};

/* Values a sample can carry besides its count (heap profiles: objects
 * and bytes allocated, objects and bytes in use).  */
#define CP_PROFILE_VALUES 4

/* What a value of samples measures and in which unit (pprof's
 * ValueType): samples/count, cpu/nanoseconds, wall/nanoseconds,
 * alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes, threads/count.  Names are lower case, without
 * spaces.  */
struct cp_sample_type {
	char type[32];
	char unit[16];
};

/* What a profile is about, for the writers' headers and pprof's fields. */
struct cp_profile_meta {
	uint32_t frequency;       /* samples per second per thread, 0 if n/a */
	uint64_t time_nanos;      /* wall-clock start, ns since the epoch */
	uint64_t duration_nanos;
	pid_t pid;
	char target[256];         /* the target's command line or name */
	char command[512];        /* the profiler's own command line */
	/* What the count of a sample weighs: samples/count (the default)
	 * or what a producer set (cp_profile_set_count_type; a heap profile:
	 * one of its value types).  Samples/count with a FREQUENCY are ticks
	 * of 1/FREQUENCY s of TIME_TYPE.  */
	struct cp_sample_type count_type;
	char time_type[16];       /* "cpu" (the default) or "wall" */
	/* The types of the samples' values[] (a heap profile's four, in
	 * cp_heap_fill_profile's order); 0 when samples carry none.  */
	size_t nvalue_types;
	struct cp_sample_type value_types[CP_PROFILE_VALUES];
};

struct cp_location {
	uint64_t address;   /* 0 when unknown (profiles read from text) */
	uint32_t module;    /* string id of the module basename, 0 if none */
	uint32_t mapping;   /* mapping id (1-based), 0 if none */
	uint32_t nlines;
	const struct cp_line *lines; /* innermost first */
};

/* One aggregated sample: a thread, a stack and a count.  Its values, if
 * any, through cp_profile_sample_values.  */
struct cp_sample {
	pid_t tid;          /* 0 when the thread is unknown */
	uint32_t stack;     /* stack id */
	uint64_t count;
};

struct cp_profile *cp_profile_new(void);
void cp_profile_free(struct cp_profile *profile);

/* Intern LEN bytes of STR; returns its id (0 is the empty string), or
 * UINT32_MAX when out of memory.  */
uint32_t cp_profile_intern(struct cp_profile *profile, const char *str,
			   size_t len);

/* The string with id ID; borrowed, valid until cp_profile_free().  */
const char *cp_profile_string(const struct cp_profile *profile, uint32_t id);

/* Add a location (LINES copied); returns its id or UINT32_MAX.  Locations
 * are not deduplicated: callers cache by address.  */
uint32_t cp_profile_add_location(struct cp_profile *profile,
				 uint64_t address, uint32_t module,
				 const struct cp_line *lines, uint32_t nlines);

/* Add a mapping; the same START and FILE give the same id.  Returns the
 * id (>= 1) or 0 when out of memory.  */
uint32_t cp_profile_add_mapping(struct cp_profile *profile, uint64_t start,
				uint64_t limit, uint64_t offset, uint32_t file,
				uint32_t build_id);

/* Mapping ID (1-based), or NULL.  */
const struct cp_mapping *cp_profile_mapping(const struct cp_profile *p,
					    uint32_t id);
uint32_t cp_profile_mapping_count(const struct cp_profile *profile);

/* Set the mapping of location ID.  */
void cp_profile_set_location_mapping(struct cp_profile *profile, uint32_t id,
				     uint32_t mapping);

uint32_t cp_profile_location_count(const struct cp_profile *profile);

/* The profile's description; never NULL, writable by its producer.  */
struct cp_profile_meta *cp_profile_meta(struct cp_profile *profile);
const struct cp_profile_meta *cp_profile_meta_const(const struct cp_profile *p);

/* Set TYPE to TYPE_NAME and UNIT (truncated to fit).  */
void cp_sample_type_set(struct cp_sample_type *type, const char *type_name,
			const char *unit);

/* True when TYPE is TYPE_NAME (NULL: any) in UNIT (NULL: any).  */
bool cp_sample_type_is(const struct cp_sample_type *type,
		       const char *type_name, const char *unit);

/* The word for a quantity of TYPE in text (a report's totals, a flame
 * graph's tooltips): the unit ("bytes", "nanoseconds"), except counts:
 * "samples" for samples/count, "allocations" for *_objects/count, else
 * the type ("threads").  Borrowed from TYPE or static.  */
const char *cp_sample_type_word(const struct cp_sample_type *type);

/* Set what PROFILE's counts weigh to TYPE_NAME/UNIT.  */
void cp_profile_set_count_type(struct cp_profile *profile,
			       const char *type_name, const char *unit);

/* A heap profile's value types (alloc_objects/count, alloc_space/bytes,
 * inuse_objects/count, inuse_space/bytes, in values[] order), the count
 * weighing value COUNT_VALUE of them (0..3): every sample's count becomes
 * its value COUNT_VALUE (0 for a site with nothing live: writers leave
 * such samples out, pprof keeps them for their other values).  */
void cp_profile_set_heap_types(struct cp_profile *profile,
			       size_t count_value);

/* True when PROFILE's counts are samples/count (ticks when it has a
 * frequency).  */
bool cp_profile_counts_samples(const struct cp_profile *profile);

/* Replace the module and lines of location ID (a location added before
 * its address was symbolized).  Returns 0, -CP_E_INVAL or -CP_E_NOMEM.  */
int cp_profile_set_location(struct cp_profile *profile, uint32_t id,
			    uint32_t module, const struct cp_line *lines,
			    uint32_t nlines);

const struct cp_location *cp_profile_location(const struct cp_profile *p,
					      uint32_t id);

/* Intern a stack of location ids, LOCS[0] the innermost.  Returns the
 * stack id or UINT32_MAX.  Stack ids are dense, in the order stacks were
 * first interned.  Stacks are kept in a prefix tree from the outermost
 * frame, so a stack costs only the frames it does not share with one
 * interned before (see cp_profile_bytes).  */
uint32_t cp_profile_intern_stack(struct cp_profile *profile,
				 const uint32_t *locs, size_t n);

/* The number of locations of stack ID (0 for an unknown id).  */
size_t cp_profile_stack_depth(const struct cp_profile *profile, uint32_t id);

/* Copy the locations of stack ID, innermost first, into LOCS when they
 * fit in CAP; returns their number (nothing copied when it is > CAP).  */
size_t cp_profile_stack_locs(const struct cp_profile *profile, uint32_t id,
			     uint32_t *locs, size_t cap);

/* The locations of stack ID, innermost first; *N set to their number.
 * Made on demand in a buffer of the calling thread: borrowed, valid until
 * the calling thread's next cp_profile_stack (of any profile); NULL when
 * out of memory or ID is unknown (*N then 0).  */
const uint32_t *cp_profile_stack(const struct cp_profile *profile,
				 uint32_t id, size_t *n);

/* Bytes the profile holds for its stacks and samples (the prefix tree,
 * its index, the stack and sample tables and their indexes, capacity
 * included; not strings or locations): for a bound on the memory per
 * distinct stack.  */
size_t cp_profile_bytes(const struct cp_profile *profile);

/* Add COUNT samples of stack STACK on thread TID.  Returns 0 or
 * -CP_E_NOMEM.  */
int cp_profile_add(struct cp_profile *profile, pid_t tid, uint32_t stack,
		   uint64_t count);

/* Like cp_profile_add, and add VALUES (CP_PROFILE_VALUES of them) to the
 * sample's values.  */
int cp_profile_add_values(struct cp_profile *profile, pid_t tid,
			  uint32_t stack, uint64_t count,
			  const uint64_t *values);

/* The aggregated samples, one per distinct (thread, stack), in the order
 * first added; borrowed.  */
const struct cp_sample *cp_profile_samples(const struct cp_profile *p,
					   size_t *n);

/* The CP_PROFILE_VALUES values of sample INDEX (in cp_profile_samples'
 * order): what cp_profile_add_values added, zeros when nothing was.
 * Borrowed, valid until the profile changes.  Values are stored only once
 * a profile has some (heap profiles), not for every CPU sample.  */
const uint64_t *cp_profile_sample_values(const struct cp_profile *p,
					 size_t index);

/* Total of all sample counts.  */
uint64_t cp_profile_total(const struct cp_profile *profile);

/* Thread names (the "comm" of each thread).  */
int cp_profile_set_thread_name(struct cp_profile *profile, pid_t tid,
			       const char *name);
/* Borrowed, or NULL when unknown.  */
const char *cp_profile_thread_name(const struct cp_profile *profile,
				   pid_t tid);

/* Every thread with a name, in the order first named; *N set.  */
const pid_t *cp_profile_threads(const struct cp_profile *profile, size_t *n);

#endif
