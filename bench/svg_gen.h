/* A synthetic profile for the flame graph benchmark and tests: what a
 * large C++ program's folded profile looks like, made deterministically
 * from a seed through the cp_profile API.
 *
 * NFUNCS functions form a call graph: function F calls 1 to 6 others
 * chosen from its hash.  A stack is a random walk from "main" of a depth
 * drawn in [MIN_DEPTH, MAX_DEPTH], taking the first callee half of the
 * time, the second a quarter, ... so some paths are hot and prefixes are
 * shared, as in real programs.  Walks are repeated until STACKS distinct
 * stacks exist; then SAMPLES samples are spread over them with a heavy
 * tail (every stack gets at least one) and over THREADS threads.
 *
 * Names are C++-like and 30-70 bytes long; a quarter of the functions
 * live in shared libraries ("libgen3.so"), a few are kernel frames
 * ("..._[k]"), inlined (the "_[i]" kind) or "[unknown]".
 *
 * Header-only (static functions), included by bench/svg_bench.c and
 * tests/check_svg.c.  */
#ifndef CPROF_BENCH_SVG_GEN_H
#define CPROF_BENCH_SVG_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/profile.h"

struct svggen_params {
	size_t stacks;        /* distinct stacks */
	uint64_t samples;     /* total count, >= stacks */
	unsigned min_depth, max_depth;
	unsigned funcs;       /* distinct functions */
	unsigned threads;
	uint64_t seed;
};

static const struct svggen_params svggen_benchmark = {
	.stacks = 100000,
	.samples = 1000000,
	.min_depth = 10,
	.max_depth = 60,
	.funcs = 20000,
	.threads = 4,
	.seed = 42,
};

static uint64_t svggen_next(uint64_t *state)
{
	/* splitmix64 */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t svggen_mix(uint64_t a, uint64_t b)
{
	uint64_t s = a * 0x100000001b3ull ^ b;
	return svggen_next(&s);
}

/* The profile, or NULL when out of memory.  */
static struct cp_profile *svggen_profile(const struct svggen_params *g)
{
	static const char *const spaces[] = {"net", "db", "ui", "core",
					     "io", "std::__detail", "util"};
	static const char *const kinds[] = {"Parser", "Cache", "Session",
					    "Buffer", "Worker", "Index"};
	static const char *const verbs[] = {"handle", "lookup", "flush",
					    "encode", "visit", "resize",
					    "dispatch", "compute"};
	struct cp_profile *p = cp_profile_new();
	uint32_t *locs = calloc(g->funcs, sizeof(*locs));
	uint32_t *path = calloc(g->max_depth + 1, sizeof(*path));
	uint32_t *stack = calloc(g->max_depth + 1, sizeof(*stack));
	uint32_t *stack_ids = calloc(g->stacks, sizeof(*stack_ids));
	double *weights = calloc(g->stacks, sizeof(*weights));
	char name[256];
	uint64_t rng = g->seed;
	if (!p || !locs || !path || !stack || !stack_ids || !weights)
		goto fail;
	for (unsigned f = 0; f < g->funcs; f++) {
		uint64_t h = svggen_mix(g->seed, f);
		const char *module = "gen-app";
		bool inlined = false;
		if (f == 0) {
			snprintf(name, sizeof(name), "main");
		} else if (h % 97 == 0) {
			snprintf(name, sizeof(name), "[unknown]");
			module = "";
		} else if (h % 53 == 0) {
			snprintf(name, sizeof(name), "%s_%u_[k]",
				 verbs[h % 8], f);
			module = "[kernel.kallsyms]";
		} else {
			snprintf(name, sizeof(name), "%s::%s%u::%s_%u(%s)",
				 spaces[h % 7], kinds[(h >> 8) % 6],
				 (unsigned)(h >> 16) % 50, verbs[(h >> 24) % 8],
				 f,
				 (h >> 32) % 3 == 0 ? "int, char const*"
				 : (h >> 32) % 3 == 1 ? "std::string const&"
						      : "");
			if ((h >> 40) % 4 == 0)
				module = (h >> 44) % 2 ? "libgen3.so"
						       : "libc.so.6";
			inlined = (h >> 48) % 10 == 0;
		}
		struct cp_line line = {
			.function = cp_profile_intern(p, name, strlen(name)),
			.inlined = inlined,
		};
		uint32_t mod = cp_profile_intern(p, module, strlen(module));
		if (line.function == UINT32_MAX || mod == UINT32_MAX)
			goto fail;
		locs[f] = cp_profile_add_location(p, 0, mod, &line, 1);
		if (locs[f] == UINT32_MAX)
			goto fail;
	}
	size_t distinct = 0;
	for (uint64_t tries = 0; distinct < g->stacks; tries++) {
		if (tries > 100 * (uint64_t)g->stacks)
			goto fail; /* the call graph is too small */
		unsigned depth = g->min_depth +
			(unsigned)(svggen_next(&rng) %
				   (g->max_depth - g->min_depth + 1));
		unsigned f = 0;
		path[0] = 0;
		for (unsigned d = 1; d < depth; d++) {
			uint64_t h = svggen_mix(g->seed ^ 0x5bd1e995, f);
			unsigned ncallees = 1 + (unsigned)(h % 6);
			unsigned pick = 0;
			uint64_t r = svggen_next(&rng);
			while (pick + 1 < ncallees && (r & 1)) {
				pick++;
				r >>= 1;
			}
			f = 1 + (unsigned)(svggen_mix(h, pick) %
					   (g->funcs - 1));
			path[d] = f;
		}
		for (unsigned d = 0; d < depth; d++)
			stack[d] = locs[path[depth - 1 - d]];
		uint32_t id = cp_profile_intern_stack(p, stack, depth);
		if (id == UINT32_MAX)
			goto fail;
		if (id == distinct) /* ids are dense: a new stack */
			stack_ids[distinct++] = id;
	}
	double sum = 0;
	for (size_t i = 0; i < g->stacks; i++) {
		/* Pareto-like: most stacks rare, a few hot */
		double u = (double)(svggen_next(&rng) >> 11) / 9007199254740992.0;
		weights[i] = 1.0 / (0.001 + u * u * u);
		sum += weights[i];
	}
	uint64_t spread = g->samples - g->stacks, given = 0;
	for (size_t i = 0; i < g->stacks; i++) {
		uint64_t count = 1 + (uint64_t)((double)spread * weights[i] / sum);
		if (i + 1 == g->stacks)
			count = g->samples - given;
		given += count;
		pid_t tid = 1000 + (pid_t)(i % g->threads);
		if (cp_profile_add(p, tid, stack_ids[i], count) != 0)
			goto fail;
	}
	free(locs);
	free(path);
	free(stack);
	free(stack_ids);
	free(weights);
	return p;
fail:
	cp_profile_free(p);
	free(locs);
	free(path);
	free(stack);
	free(stack_ids);
	free(weights);
	return NULL;
}

#endif
