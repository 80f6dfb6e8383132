/* timeline_gen SAMPLES [THREADS [DEPTH [SEED]]]: raw samples (the text
 * cprof-attach --format raw writes) on standard output, for
 * bench/timeline.sh.
 *
 * THREADS threads (default 8) are sampled in turn at 99 Hz; each keeps a
 * stack of exactly DEPTH frames (default 30) that changes like a real
 * program's: in 3 samples of 10 it is the same as before, otherwise the
 * innermost K frames are replaced, K geometric with mean 2 (so about 2.8
 * events per sample).  Names come from 512 functions.  Deterministic for
 * a SEED.  */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMES 512

static uint64_t state;

static uint64_t next(void)
{
	/* xorshift64* */
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	return state * 2685821657736338717ULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: timeline_gen SAMPLES [THREADS [DEPTH [SEED]]]\n");
		return 2;
	}
	uint64_t samples = strtoull(argv[1], NULL, 10);
	unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 8;
	unsigned depth = argc > 3 ? (unsigned)atoi(argv[3]) : 30;
	state = argc > 4 ? strtoull(argv[4], NULL, 10) | 1 : 88172645463325252ULL;
	if (threads == 0 || depth == 0)
		return 2;

	char names[NAMES][32];
	size_t lens[NAMES];
	for (unsigned i = 0; i < NAMES; i++)
		lens[i] = (size_t)snprintf(names[i], sizeof(names[i]),
					   "%s_%u", i % 3 == 0 ? "parse_block"
						    : i % 3 == 1 ? "hash"
								 : "ns::Obj::run",
					   i);
	unsigned *stacks = calloc((size_t)threads * depth, sizeof(*stacks));
	if (!stacks)
		return 1;
	for (size_t i = 0; i < (size_t)threads * depth; i++)
		stacks[i] = (unsigned)(next() % NAMES);

	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	char line[8192];
	for (uint64_t n = 0; n < samples; n++) {
		unsigned t = (unsigned)(n % threads);
		uint64_t round = n / threads;
		unsigned *stack = stacks + (size_t)t * depth;
		uint64_t r = next();
		if (r % 10 >= 3) {
			unsigned k = 1;
			while (k < depth && (r >> (8 + k)) & 1)
				k++;
			for (unsigned i = depth - k; i < depth; i++)
				stack[i] = (unsigned)(next() % NAMES);
		}
		uint64_t us = round * 10101 + t * 37;
		int len = snprintf(line, sizeof(line), "%" PRIu64 ".%06" PRIu64 " %u ",
				   us / 1000000, us % 1000000, 1000 + t);
		for (unsigned i = 0; i < depth; i++) {
			if (i)
				line[len++] = ';';
			memcpy(line + len, names[stack[i]], lens[stack[i]]);
			len += (int)lens[stack[i]];
		}
		line[len++] = '\n';
		fwrite_unlocked(line, 1, (size_t)len, stdout);
	}
	free(stacks);
	return fflush(stdout) != 0;
}
