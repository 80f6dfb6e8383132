/* stackmem: bytes of profile per distinct stack (issue 15, goal 5), from
 * malloc's own count: N random stacks of DEPTH frames over 16 locations
 * (a random walk, as bench/stackchurn.c makes), each interned and added
 * once to a cp_profile.
 *   stackmem [N [DEPTH]]  */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "cprof/profile.h"

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 200000;
	size_t depth = argc > 2 ? strtoul(argv[2], NULL, 0) : 20;
	struct cp_profile *p = cp_profile_new();
	uint32_t locs[16], stack[256];
	for (int i = 0; i < 16; i++) {
		struct cp_line line = {.function = cp_profile_intern(p, "f", 1)};
		locs[i] = cp_profile_add_location(p, 0x1000 + (uint64_t)i, 0, &line, 1);
	}
	uint64_t rng = 88172645463325252ull;
	struct mallinfo2 before = mallinfo2();
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t d = 0; d < depth; d++) {
			rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
			stack[d] = locs[rng % 16];
		}
		uint32_t id = cp_profile_intern_stack(p, stack, depth);
		if (id + 1 > distinct)
			distinct = id + 1;
		cp_profile_add(p, 1, id, 1);
	}
	struct mallinfo2 after = mallinfo2();
	printf("distinct %zu depth %zu bytes_per_stack %.1f\n", distinct, depth,
	       (double)(after.uordblks + after.hblkhd - before.uordblks - before.hblkhd) / (double)distinct);
	cp_profile_free(p);
	return 0;
}
