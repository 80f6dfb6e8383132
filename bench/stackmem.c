/* stackmem: bytes of profile per distinct stack (issue 15, goal 5), from
 * cp_profile_bytes (its tables, capacity included), malloc's own count
 * (mallinfo2: it does not see the tables of 256 KB and more, mappings of
 * their own) and VmRSS growth: N stacks of
 * DEPTH frames, each interned and added once to a cp_profile, in two
 * shapes:
 *   random   every frame one of 16 locations (bench/stackchurn.c's random
 *            walk): stacks share only their outer log16(N) frames, the
 *            worst case for the profile's prefix tree;
 *   fanout4  every frame one of 4 callees of its caller (a call tree with
 *            4^DEPTH paths): stacks share the outer frames of their
 *            callers, as most programs' do.
 *   stackmem               both shapes at depths 5, 20 and 40
 *   stackmem N DEPTH [random|fanout4]   one line per shape:
 *   SHAPE depth D distinct N bytes_per_stack B (malloc M, rss R)
 * Build: gcc -O2 -Iinclude -Isrc bench/stackmem.c BUILD/libcprof.a
 * -pthread.
 *
 * The whole tracer's figure (profile, resolver, symbolizer, capture):
 * GOALS=5 bash bench/cost.sh BUILD runs cprof-attach -F 999 on
 * bench/stackchurn and divides the tracing process's VmRSS growth by the
 * profile's folded lines.  Folded lines undercount distinct stacks (the
 * innermost pcs of one function fold into one line); for the exact count
 * write --format pprof and count its samples (one per distinct thread and
 * stack), and read VmRSS of the tracing process (the child of the one
 * started) every few seconds.  */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/profile.h"

#define NLOCS 4096

/* This process's resident set (VmRSS), in bytes.  */
static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %zu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

static void run(size_t n, size_t depth, bool fanout)
{
	struct cp_profile *p = cp_profile_new();
	static uint32_t locs[NLOCS];
	uint32_t stack[256], frame[256];
	if (depth > 256)
		depth = 256;
	uint32_t f = cp_profile_intern(p, "f", 1);
	for (int i = 0; i < NLOCS; i++) {
		struct cp_line line = {.function = f};
		locs[i] = cp_profile_add_location(p, 0x1000 + (uint64_t)i, 0,
						  &line, 1);
	}
	uint64_t rng = 88172645463325252ull;
	struct mallinfo2 before = mallinfo2();
	size_t rss_before = rss_bytes();
	size_t bytes_before = cp_profile_bytes(p);
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		/* frame[0] is the outermost: the caller picks its callee */
		for (size_t d = 0; d < depth; d++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			if (!fanout)
				frame[d] = (uint32_t)(rng % 16);
			else
				frame[d] = d == 0 ? 0
						  : (frame[d - 1] * 4 + 1 +
						     (uint32_t)(rng % 4)) %
							    NLOCS;
		}
		for (size_t d = 0; d < depth; d++)
			stack[d] = locs[frame[depth - 1 - d]];
		uint32_t id = cp_profile_intern_stack(p, stack, depth);
		if (id == UINT32_MAX) {
			fprintf(stderr, "stackmem: out of memory\n");
			exit(1);
		}
		if (id + 1 > distinct)
			distinct = id + 1;
		cp_profile_add(p, 1, id, 1);
	}
	struct mallinfo2 after = mallinfo2();
	size_t rss_after = rss_bytes();
	size_t grown = after.uordblks + after.hblkhd - before.uordblks -
		       before.hblkhd;
	/* BYTES_PER_STACK: the profile's tables (capacity included), what
	 * cp_profile_bytes says; malloc's count misses the big ones, which
	 * are mappings of their own; RSS is what was written of them.  */
	printf("%-8s depth %3zu distinct %7zu bytes_per_stack %6.1f "
	       "(malloc %6.1f, rss %6.1f)\n",
	       fanout ? "fanout4" : "random", depth, distinct,
	       (double)(cp_profile_bytes(p) - bytes_before) /
		       (double)distinct,
	       (double)grown / (double)distinct,
	       (double)(rss_after - rss_before) / (double)distinct);
	cp_profile_free(p);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		size_t n = strtoul(argv[1], NULL, 0);
		size_t depth = argc > 2 ? strtoul(argv[2], NULL, 0) : 20;
		for (int fanout = 0; fanout < 2; fanout++)
			if (argc < 4 ||
			    strcmp(argv[3], fanout ? "fanout4" : "random") == 0)
				run(n, depth, fanout);
		return 0;
	}
	static const size_t depths[] = {5, 20, 40};
	for (int fanout = 0; fanout < 2; fanout++)
		for (size_t i = 0; i < 3; i++)
			run(200000, depths[i], fanout);
	return 0;
}
