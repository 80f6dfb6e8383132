/* Unit tests for the profile model (cprof/profile.h), the folded writer and
 * the atomic output files (cprof/output.h).  Golden outputs live in
 * the fixtures/data/ .folded files.  */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"

#define DATA CP_SOURCE_DIR "/fixtures/data/"

static struct cp_profile *profile;

static void setup(void)
{
	profile = cp_profile_new();
	ck_assert_ptr_nonnull(profile);
}

static void teardown(void)
{
	cp_profile_free(profile);
	profile = NULL;
}

static uint32_t str(const char *s)
{
	uint32_t id = cp_profile_intern(profile, s, strlen(s));
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

/* A location at ADDRESS with the one line FUNCTION (FILE:LINE when FILE).  */
static uint32_t frame_at(uint64_t address, const char *function,
			 const char *file, int line)
{
	struct cp_line l = {
		.function = str(function),
		.file = file ? str(file) : 0,
		.line = line,
	};
	uint32_t id = cp_profile_add_location(profile, address, 0, &l, 1);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

static uint32_t frame(uint64_t address, const char *function)
{
	return frame_at(address, function, NULL, 0);
}

static uint32_t intern_stack(const uint32_t *locs, size_t n)
{
	uint32_t id = cp_profile_intern_stack(profile, locs, n);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

/* STACK(innermost, ..., root) */
#define STACK(...)                                                         \
	intern_stack((const uint32_t[]){ __VA_ARGS__ },                    \
		     sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))

static void add(pid_t tid, uint32_t stack, uint64_t count)
{
	ck_assert_int_eq(cp_profile_add(profile, tid, stack, count), 0);
}

static uint64_t count_of(pid_t tid, uint32_t stack)
{
	size_t n;
	const struct cp_sample *s = cp_profile_samples(profile, &n);
	uint64_t found = 0;
	int matches = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].tid == tid && s[i].stack == stack) {
			found = s[i].count;
			matches++;
		}
	}
	ck_assert_msg(matches <= 1, "(tid %d, stack %u) appears %d times",
		      (int)tid, stack, matches);
	return found;
}

/* The whole of fixtures/data/NAME, NUL-terminated; the caller frees it.  */
static char *read_fixture(const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), DATA "%s", name);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	int c;
	while ((c = getc(f)) != EOF)
		putc(c, mem);
	fclose(f);
	fclose(mem);
	return text;
}

static char *folded(struct cp_folded_options opts)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_int_eq(cp_write_folded(profile, &opts, mem), 0);
	fclose(mem);
	return text;
}

static void assert_folded(struct cp_folded_options opts, const char *golden)
{
	char *want = read_fixture(golden);
	char *got = folded(opts);
	ck_assert_msg(strcmp(got, want) == 0, "%s differs.\n--- want\n%s--- got\n%s",
		      golden, want, got);
	free(got);
	free(want);
}

/* ------------------------------------------------------------ model */

START_TEST(intern_strings)
{
	ck_assert_uint_eq(cp_profile_intern(profile, "", 0), 0);
	ck_assert_str_eq(cp_profile_string(profile, 0), "");

	uint32_t main_id = str("main");
	ck_assert_uint_ne(main_id, 0);
	ck_assert_uint_eq(str("main"), main_id);
	/* LEN bytes, not up to the NUL */
	ck_assert_uint_eq(cp_profile_intern(profile, "mainloop", 4), main_id);
	uint32_t loop_id = str("mainloop");
	ck_assert_uint_ne(loop_id, main_id);
	ck_assert_uint_eq(cp_profile_intern(profile, "work", 0), 0);

	/* borrowed strings stay valid while the table grows */
	const char *main_str = cp_profile_string(profile, main_id);
	ck_assert_str_eq(main_str, "main");
	char name[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "function_%d", i);
		str(name);
	}
	ck_assert_str_eq(main_str, "main");
	ck_assert_uint_eq(str("function_1234"), str("function_1234"));
	ck_assert_str_eq(cp_profile_string(profile, str("function_4321")), "function_4321");
	ck_assert_uint_eq(str("main"), main_id);
	ck_assert_str_eq(cp_profile_string(profile, loop_id), "mainloop");
}
END_TEST

START_TEST(locations)
{
	struct cp_line lines[2] = {
		{ .function = str("inner"), .file = str("util.h"), .line = 7, .inlined = true },
		{ .function = str("outer"), .file = str("main.c"), .line = 40 },
	};
	uint32_t module = str("app");
	uint32_t id = cp_profile_add_location(profile, 0x401234, module, lines, 2);
	ck_assert_uint_ne(id, UINT32_MAX);
	/* LINES were copied */
	lines[0] = lines[1];

	const struct cp_location *loc = cp_profile_location(profile, id);
	ck_assert_ptr_nonnull(loc);
	ck_assert_uint_eq(loc->address, 0x401234);
	ck_assert_uint_eq(loc->module, module);
	ck_assert_uint_eq(loc->nlines, 2);
	ck_assert_str_eq(cp_profile_string(profile, loc->lines[0].function), "inner");
	ck_assert_str_eq(cp_profile_string(profile, loc->lines[0].file), "util.h");
	ck_assert_int_eq(loc->lines[0].line, 7);
	ck_assert(loc->lines[0].inlined);
	ck_assert_str_eq(cp_profile_string(profile, loc->lines[1].function), "outer");
	ck_assert(!loc->lines[1].inlined);

	/* not deduplicated */
	uint32_t again = cp_profile_add_location(profile, 0x401234, module, lines, 2);
	ck_assert_uint_ne(again, id);
}
END_TEST

START_TEST(stacks)
{
	uint32_t a = frame(0x1000, "a"), b = frame(0x2000, "b"), c = frame(0x3000, "c");
	uint32_t locs[3] = { c, b, a };
	uint32_t abc = intern_stack(locs, 3);
	locs[0] = a; /* the stack was copied */
	ck_assert_uint_eq(STACK(c, b, a), abc);
	ck_assert_uint_ne(STACK(b, a), abc);
	ck_assert_uint_ne(STACK(a, b, c), abc);
	ck_assert_uint_ne(STACK(c, b, a, a), abc);
	ck_assert_uint_eq(STACK(b, a), STACK(b, a));

	size_t n = 0;
	const uint32_t *got = cp_profile_stack(profile, abc, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(got[0], c);
	ck_assert_uint_eq(got[1], b);
	ck_assert_uint_eq(got[2], a);
}
END_TEST

/* xorshift64: the same sequence every run.  */
static uint64_t next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* Stacks that share, extend, end inside and leave each other's paths (the
 * prefix tree's splits): every one reads back as interned, interning it
 * again gives its id, and ids are dense in the order first interned.  */
START_TEST(stacks_tree)
{
	enum { NSTACKS = 3000, MAXDEPTH = 24, NLOCS = 6 };
	uint32_t locs[NLOCS + 100];
	for (size_t i = 0; i < NLOCS; i++)
		locs[i] = frame(0x1000 + i, "f");
	/* callers with more than 15 callees: callee numbers of two nibbles
	 * and more */
	for (size_t i = 0; i < 100; i++)
		locs[NLOCS + i] = frame(0x9000 + i, "g");
	for (uint32_t i = 0; i < 9000; i++)
		frame(0x20000 + i, "h");
	uint32_t big = frame(0x30000, "big");
	static uint32_t paths[NSTACKS][MAXDEPTH];
	static size_t depths[NSTACKS];
	static uint32_t ids[NSTACKS];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	uint32_t next_id = 0;
	for (size_t i = 0; i < NSTACKS; i++) {
		/* often a prefix or an extension of an earlier stack */
		size_t depth = next_random(&rng) % MAXDEPTH;
		size_t from = i ? next_random(&rng) % i : 0;
		size_t keep = i ? next_random(&rng) % (depths[from] + 1) : 0;
		if (keep > depth)
			keep = depth;
		/* the outer KEEP frames of stack FROM, then random ones */
		for (size_t d = 0; d < keep; d++)
			paths[i][depth - 1 - d] =
				paths[from][depths[from] - 1 - d];
		for (size_t d = keep; d < depth; d++) {
			uint64_t r = next_random(&rng);
			paths[i][depth - 1 - d] =
				r % 50 == 0 ? big
					    : locs[r % (r % 7 ? NLOCS : NLOCS + 100)];
		}
		depths[i] = depth;
		ids[i] = intern_stack(paths[i], depth);
		/* dense, in the order first interned */
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			if (depths[j] == depth &&
			    memcmp(paths[j], paths[i],
				   depth * sizeof(uint32_t)) == 0) {
				ck_assert_uint_eq(ids[i], ids[j]);
				seen = true;
			}
		if (!seen)
			ck_assert_uint_eq(ids[i], next_id++);
	}
	for (size_t i = 0; i < NSTACKS; i++) {
		ck_assert_uint_eq(intern_stack(paths[i], depths[i]), ids[i]);
		ck_assert_uint_eq(cp_profile_stack_depth(profile, ids[i]),
				  depths[i]);
		uint32_t got[MAXDEPTH];
		ck_assert_uint_eq(cp_profile_stack_locs(profile, ids[i], got,
							MAXDEPTH),
				  depths[i]);
		ck_assert_mem_eq(got, paths[i], depths[i] * sizeof(uint32_t));
		size_t n;
		const uint32_t *borrowed = cp_profile_stack(profile, ids[i], &n);
		ck_assert_uint_eq(n, depths[i]);
		if (n)
			ck_assert_mem_eq(borrowed, paths[i],
					 n * sizeof(uint32_t));
	}
	/* too small a buffer: the depth, nothing copied */
	size_t deepest = 0;
	for (size_t i = 1; i < NSTACKS; i++)
		if (depths[i] > depths[deepest])
			deepest = i;
	uint32_t one = 12345;
	ck_assert_uint_eq(cp_profile_stack_locs(profile, ids[deepest], &one, 1),
			  depths[deepest]);
	ck_assert_uint_eq(one, 12345);
	/* unknown ids */
	size_t n = 7;
	ck_assert_ptr_null(cp_profile_stack(profile, next_id, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(cp_profile_stack_depth(profile, next_id), 0);
}
END_TEST

/* A stack at the end of a path of hundreds of nodes (each stack one
 * frame deeper than the one before) reads back whole.  */
START_TEST(stacks_long_path)
{
	enum { DEPTH = 300 };
	uint32_t locs[3], path[DEPTH], ids[DEPTH + 1];
	for (size_t i = 0; i < 3; i++)
		locs[i] = frame(0x1000 + i, "f");
	for (size_t d = 0; d < DEPTH; d++)
		path[DEPTH - 1 - d] = locs[d % 3];
	for (size_t d = 0; d <= DEPTH; d++)
		ids[d] = intern_stack(path + DEPTH - d, d);
	for (size_t d = 0; d <= DEPTH; d++) {
		uint32_t got[DEPTH];
		ck_assert_uint_eq(intern_stack(path + DEPTH - d, d), ids[d]);
		ck_assert_uint_eq(cp_profile_stack_locs(profile, ids[d], got,
							DEPTH),
				  d);
		ck_assert_mem_eq(got, path + DEPTH - d, d * sizeof(uint32_t));
	}
}
END_TEST

/* Issue 15 goal 5: the bytes a profile holds per distinct stack, for
 * stacks that change all the time (bench/stackmem.c; before the prefix
 * tree: about 150, 230 and 315 bytes at depths 5, 20 and 40; before
 * frames were written as callee numbers: 77 and 110 at depths 20 and 40,
 * and 132 at depth 40 in a call tree of 4096 locations).  */
START_TEST(stack_memory)
{
	enum { NSTACKS = 20000, NLOCS = 4096 };
	static const struct {
		size_t depth;
		unsigned shared;  /* outer frames the same in every stack */
		bool tree;        /* each frame one of 4 callees of its caller */
		double bound;     /* bytes per distinct stack */
	} cases[] = {
		/* every frame one of 16, at random: shared only by chance */
		{5, 0, false, 56}, {20, 0, false, 64}, {40, 0, false, 80},
		/* a program's outer frames, then churn at the leaves */
		{20, 16, false, 64}, {40, 36, false, 64},
		/* a call tree of 1024 locations (ids of two bytes; its 4096
		 * calls are kept once) */
		{20, 0, true, 64}, {40, 0, true, 80},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct cp_profile *p = cp_profile_new();
		ck_assert_ptr_nonnull(p);
		static uint32_t locs[NLOCS];
		for (size_t i = 0; i < NLOCS; i++) {
			struct cp_line l = {.function = 0};
			locs[i] = cp_profile_add_location(p, 0x1000 + i, 0, &l,
							  1);
			ck_assert_uint_ne(locs[i], UINT32_MAX);
		}
		size_t before = cp_profile_bytes(p);
		uint64_t rng = 88172645463325252ull;
		uint32_t stack[64];
		uint32_t distinct = 0;
		for (size_t i = 0; i < NSTACKS; i++) {
			size_t depth = cases[c].depth;
			/* outermost first: the caller picks its callee */
			uint32_t at = 0;
			for (size_t d = depth; d-- > 0;) {
				uint64_t r = next_random(&rng);
				at = cases[c].tree ? (at * 4 + 1 + r % 4) % 1024
				     : d >= depth - cases[c].shared ? d % 16
								    : r % 16;
				stack[d] = locs[at];
			}
			uint32_t id = cp_profile_intern_stack(p, stack, depth);
			ck_assert_uint_ne(id, UINT32_MAX);
			if (id + 1 > distinct)
				distinct = id + 1;
			ck_assert_int_eq(cp_profile_add(p, 1, id, 1), 0);
		}
		ck_assert_uint_gt(distinct, NSTACKS / 2);
		double per_stack = (double)(cp_profile_bytes(p) - before) /
				   distinct;
		fprintf(stderr, "stack_memory: depth %zu (%u shared%s): %.1f "
			"bytes per distinct stack\n",
			cases[c].depth, cases[c].shared,
			cases[c].tree ? ", call tree" : "", per_stack);
		ck_assert_double_le(per_stack, cases[c].bound);
		cp_profile_free(p);
	}
}
END_TEST

/* Values are kept only for profiles that have some, and read back by
 * sample, also for samples added before the first values.  */
START_TEST(sample_values)
{
	uint32_t a = frame(0x1000, "a"), b = frame(0x2000, "b");
	uint32_t ab = STACK(b, a), just_a = STACK(a);
	add(1, ab, 2);
	const uint64_t *v = cp_profile_sample_values(profile, 0);
	for (size_t i = 0; i < CP_PROFILE_VALUES; i++)
		ck_assert_uint_eq(v[i], 0);
	size_t cpu_bytes = cp_profile_bytes(profile);
	const uint64_t one[CP_PROFILE_VALUES] = {1, 10, 100, 1000};
	ck_assert_int_eq(cp_profile_add_values(profile, 2, just_a, 1, one), 0);
	ck_assert_int_eq(cp_profile_add_values(profile, 2, just_a, 1, one), 0);
	ck_assert_int_eq(cp_profile_add_values(profile, 1, ab, 0, one), 0);
	ck_assert_uint_gt(cp_profile_bytes(profile), cpu_bytes);
	size_t n;
	const struct cp_sample *s = cp_profile_samples(profile, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(s[0].count, 2);
	ck_assert_uint_eq(s[1].count, 2);
	v = cp_profile_sample_values(profile, 0);
	ck_assert_uint_eq(v[0], 1);
	ck_assert_uint_eq(v[3], 1000);
	v = cp_profile_sample_values(profile, 1);
	ck_assert_uint_eq(v[1], 20);
	ck_assert_uint_eq(v[2], 200);
	/* a heap profile's counts become one of its values */
	cp_profile_set_heap_types(profile, 3);
	s = cp_profile_samples(profile, &n);
	ck_assert_uint_eq(s[0].count, 1000);
	ck_assert_uint_eq(s[1].count, 2000);
	ck_assert_uint_eq(cp_profile_total(profile), 3000);
	v = cp_profile_sample_values(profile, 2);
	ck_assert_uint_eq(v[0], 0);
}
END_TEST

START_TEST(samples_aggregate)
{
	uint32_t a = frame(0x1000, "a"), b = frame(0x2000, "b");
	uint32_t ab = STACK(b, a), just_a = STACK(a);
	ck_assert_uint_eq(cp_profile_total(profile), 0);

	add(10, ab, 1);
	add(10, ab, 4);
	add(11, ab, 2);
	add(10, just_a, 3);
	add(0, just_a, 1);

	size_t n;
	cp_profile_samples(profile, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(count_of(10, ab), 5);
	ck_assert_uint_eq(count_of(11, ab), 2);
	ck_assert_uint_eq(count_of(10, just_a), 3);
	ck_assert_uint_eq(count_of(0, just_a), 1);
	ck_assert_uint_eq(cp_profile_total(profile), 11);
}
END_TEST

START_TEST(thread_names)
{
	ck_assert_ptr_null(cp_profile_thread_name(profile, 42));
	char name[16] = "worker";
	ck_assert_int_eq(cp_profile_set_thread_name(profile, 42, name), 0);
	ck_assert_int_eq(cp_profile_set_thread_name(profile, 43, "io pool"), 0);
	strcpy(name, "clobbered"); /* the name was copied */
	ck_assert_str_eq(cp_profile_thread_name(profile, 42), "worker");
	ck_assert_str_eq(cp_profile_thread_name(profile, 43), "io pool");
	ck_assert_ptr_null(cp_profile_thread_name(profile, 44));

	/* a thread that calls exec or prctl(PR_SET_NAME) gets a new name */
	ck_assert_int_eq(cp_profile_set_thread_name(profile, 42, "renamed"), 0);
	ck_assert_str_eq(cp_profile_thread_name(profile, 42), "renamed");
}
END_TEST

START_TEST(free_null)
{
	cp_profile_free(NULL);
}
END_TEST

/* ------------------------------------------------------------ folded */

/* Three threads; "compute" at two addresses; samples added out of order.  */
static void build_basic(void)
{
	uint32_t main_ = frame(0x401000, "main"), work = frame(0x401100, "work");
	uint32_t compute = frame(0x401200, "compute");
	uint32_t compute2 = frame(0x401234, "compute");
	uint32_t idle = frame(0x401300, "idle");
	uint32_t zeta = frame(0x402000, "Zeta"), x = frame(0x402100, "x");

	add(99, STACK(idle, main_), 4);
	add(100, STACK(compute, work, main_), 3);
	add(101, STACK(x, zeta), 1);
	add(101, STACK(compute, work, main_), 3);
	add(100, STACK(work, main_), 2);
	add(100, STACK(compute2, work, main_), 1);
	add(100, STACK(compute, work, main_), 2);

	ck_assert_int_eq(cp_profile_set_thread_name(profile, 99, "ui"), 0);
	ck_assert_int_eq(cp_profile_set_thread_name(profile, 100, "worker"), 0);
	ck_assert_int_eq(cp_profile_set_thread_name(profile, 101, "io pool"), 0);
}

START_TEST(folded_empty)
{
	char *got = folded((struct cp_folded_options){ 0 });
	ck_assert_str_eq(got, "");
	free(got);
}
END_TEST

/* Root first, sorted by strcmp ("Zeta" < "main"), merged across threads
 * and addresses.  */
START_TEST(folded_basic)
{
	build_basic();
	assert_folded((struct cp_folded_options){ 0 }, "basic.folded");
}
END_TEST

/* "TID name" first; sorted as text, so "100" < "99".  */
START_TEST(folded_threads)
{
	build_basic();
	assert_folded((struct cp_folded_options){ .threads = true }, "threads.folded");
}
END_TEST

/* outer() with mid() and inner() inlined into it, at one address; leaf()
 * is called from inner().  */
static void build_inline(void)
{
	uint32_t main_ = frame(0x401000, "main");
	const struct cp_line lines[] = { /* innermost first */
		{ .function = str("inner"), .inlined = true },
		{ .function = str("mid"), .inlined = true },
		{ .function = str("outer") },
	};
	uint32_t multi = cp_profile_add_location(profile, 0x401500, 0, lines, 3);
	ck_assert_uint_ne(multi, UINT32_MAX);
	uint32_t outer = frame(0x401600, "outer"), leaf = frame(0x401700, "leaf");

	add(1, STACK(multi, main_), 7);
	add(1, STACK(outer, main_), 2);
	add(1, STACK(leaf, multi, main_), 1);
}

START_TEST(folded_inline)
{
	build_inline();
	assert_folded((struct cp_folded_options){ 0 }, "inline.folded");
}
END_TEST

/* Inlined frames fold into their caller, and the stacks that become equal
 * merge.  */
START_TEST(folded_no_inline)
{
	build_inline();
	assert_folded((struct cp_folded_options){ .no_inline = true }, "no-inline.folded");
}
END_TEST

static void build_lines(void)
{
	uint32_t main_ = frame_at(0x401000, "main", "main.c", 40);
	uint32_t work12 = frame_at(0x401100, "work", "work.c", 12);
	uint32_t work13 = frame_at(0x401110, "work", "work.c", 13);
	uint32_t compute = frame(0x401200, "compute"); /* no debug info */

	add(1, STACK(compute, work12, main_), 3);
	add(1, STACK(work13, main_), 2);
	add(2, STACK(work12, main_), 1);
}

START_TEST(folded_lines)
{
	build_lines();
	assert_folded((struct cp_folded_options){ .lines = true }, "lines.folded");

	/* without positions the two lines of work() are one frame */
	char *got = folded((struct cp_folded_options){ 0 });
	ck_assert_str_eq(got, "main;work 3\nmain;work;compute 3\n");
	free(got);
}
END_TEST

/* ------------------------------------------------------------ output */

static char tmpdir[PATH_MAX];

static void output_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/cprof-check-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static int entries(void)
{
	DIR *dir = opendir(tmpdir);
	ck_assert_ptr_nonnull(dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dir);
	return n;
}

static void output_teardown(void)
{
	DIR *dir = opendir(tmpdir);
	struct dirent *e;
	char path[PATH_MAX + 256];
	while (dir && (e = readdir(dir))) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	if (dir)
		closedir(dir);
	rmdir(tmpdir);
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

START_TEST(output_commit)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/out.folded", tmpdir);
	struct cp_output *out = NULL;
	ck_assert_int_eq(cp_output_open(path, &out, NULL, 0), 0);
	ck_assert_str_eq(cp_output_path(out), path);
	FILE *stream = cp_output_stream(out);
	ck_assert_ptr_nonnull(stream);
	fputs("main;work 3\n", stream);

	/* only the temporary beside it exists yet */
	ck_assert(!exists(path));
	ck_assert_int_eq(entries(), 1);

	ck_assert_int_eq(cp_output_commit(out), 0);
	ck_assert(exists(path));
	ck_assert_int_eq(entries(), 1);
	FILE *f = fopen(path, "r");
	char buf[64] = "";
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, "main;work 3\n");
}
END_TEST

START_TEST(output_abort)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/out.folded", tmpdir);
	struct cp_output *out = NULL;
	ck_assert_int_eq(cp_output_open(path, &out, NULL, 0), 0);
	fputs("half a line", cp_output_stream(out));
	cp_output_abort(out);
	ck_assert(!exists(path));
	ck_assert_int_eq(entries(), 0);
	cp_output_abort(NULL);
}
END_TEST

START_TEST(output_missing_dir)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/no-such-dir/out.folded", tmpdir);
	struct cp_output *out = NULL;
	errno = 0;
	ck_assert_int_eq(cp_output_open(path, &out, NULL, 0), -CP_E_SYS);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(output_stdout)
{
	struct cp_output *out = NULL;
	ck_assert_int_eq(cp_output_open("-", &out, NULL, 0), 0);
	ck_assert_str_eq(cp_output_path(out), "-");
	ck_assert_ptr_nonnull(cp_output_stream(out));
	ck_assert_int_eq(cp_output_commit(out), 0);
}
END_TEST

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");

	TCase *tc = tcase_create("model");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, intern_strings);
	tcase_add_test(tc, locations);
	tcase_add_test(tc, stacks);
	tcase_add_test(tc, stacks_tree);
	tcase_add_test(tc, stacks_long_path);
	tcase_add_test(tc, stack_memory);
	tcase_add_test(tc, sample_values);
	tcase_add_test(tc, samples_aggregate);
	tcase_add_test(tc, thread_names);
	tcase_add_test(tc, free_null);
	suite_add_tcase(s, tc);

	tc = tcase_create("folded");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, folded_empty);
	tcase_add_test(tc, folded_basic);
	tcase_add_test(tc, folded_threads);
	tcase_add_test(tc, folded_inline);
	tcase_add_test(tc, folded_no_inline);
	tcase_add_test(tc, folded_lines);
	suite_add_tcase(s, tc);

	tc = tcase_create("output");
	tcase_add_checked_fixture(tc, output_setup, output_teardown);
	tcase_add_test(tc, output_commit);
	tcase_add_test(tc, output_abort);
	tcase_add_test(tc, output_missing_dir);
	tcase_add_test(tc, output_stdout);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(profile_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
