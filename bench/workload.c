/* workload: the benchmark target.  A fixed amount of checked CPU work, so
 * that its wall time under a profiler, compared with its wall time alone,
 * is the profiler's cost.
 *
 *   workload [--threads N] [--depth D] [--work UNITS] [--forever]
 *
 * Each of N threads (the main thread is thread 0, so a one-thread run has
 * one task and a tracer can seize its PID directly) does UNITS units of
 * work.  For every unit it recurses D levels through bench_recurse, then
 * bench_leaf sums the squares of 0 .. BENCH_UNIT_LOOPS-1 and checks the sum
 * against the closed form.  With --forever the threads keep going until
 * the process is killed.
 *
 * stdout: "ready" once every thread runs (flushed, for a reader on a pipe);
 * at the end "elapsed_ns N", the CLOCK_MONOTONIC time from the start of
 * main to the end of the last thread's work, so the time a profiler takes
 * to launch or attach does not count; then "cpu_ns N", the process's CPU
 * time (all threads, CLOCK_PROCESS_CPUTIME_ID) over the same span: unlike
 * the elapsed time, it does not depend on the share of the CPUs a loaded
 * machine gives the process.  Exit 0, or 1 (with "FAIL ..." on
 * stderr) if any sum came out wrong; 2 on a usage error.  */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_THREADS 256
#define BENCH_MAX_DEPTH 100000
/* One unit of work: about 0.3-1 ms of loop on current CPUs, so a thread
 * passes through its whole call chain hundreds of times per second and the
 * recursion itself costs well under 0.1 % of the time.  */
#define BENCH_UNIT_LOOPS (1u << 20)

/* Keep every frame and its own symbol at -O2: noipa forbids inlining and
 * cloning ("bench_recurse.constprop.0").  */
#if defined(__clang__)
#define BENCH_FRAME __attribute__((noinline))
#else
#define BENCH_FRAME __attribute__((noipa))
#endif

struct bench_args {
	long threads;
	long depth;
	long work;    /* units per thread */
	bool forever; /* ignore work, run until killed */
	bool sleep;   /* --forever, but each leaf sleeps instead of working */
};

static struct bench_args args = { 1, 30, 1000, false, false };
static uint64_t mismatches; /* wrong sums, all threads (atomic) */

uint64_t bench_leaf(void);
uint64_t bench_recurse(long depth);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* sum of i*i for 0 <= i < n = n(n-1)(2n-1)/6, exact in 128 bits; its low
 * 64 bits equal the wrapping loop's sum.  */
static uint64_t sum_squares_expected(uint64_t n)
{
	unsigned __int128 wide = n;

	if (n == 0)
		return 0;
	return (uint64_t)(wide * (wide - 1) * (2 * wide - 1) / 6);
}

/* One unit of checked work.  The empty asm makes the accumulator opaque on
 * every iteration, so the loop is neither folded into the closed form nor
 * vectorized: the time is spent here, in this frame.  A tracer that
 * corrupts a register or a word of stack shows up as a mismatch.  */
BENCH_FRAME uint64_t bench_leaf(void)
{
	uint64_t acc = 0;

	if (args.sleep) {
		/* a thread blocked in a deep stack, for the --dump bench */
		struct timespec second = {1, 0};
		nanosleep(&second, NULL);
		return 0;
	}
	for (uint64_t i = 0; i < BENCH_UNIT_LOOPS; i++) {
		acc += i * i;
		__asm__ volatile("" : "+r"(acc));
	}
	if (acc != sum_squares_expected(BENCH_UNIT_LOOPS))
		__atomic_add_fetch(&mismatches, 1, __ATOMIC_RELAXED);
	return acc;
}

/* DEPTH frames of bench_recurse above bench_leaf.  Why the asm: "+ 1"
 * after the call is not enough at -O2, GCC's tail-recursion pass turns
 * "f(n - 1) + 1" into a loop with an accumulator.  An opaque use of the
 * result after the call keeps a real call and a frame at every level.  */
BENCH_FRAME uint64_t bench_recurse(long depth)
{
	uint64_t result;

	if (depth <= 0)
		result = bench_leaf();
	else
		result = bench_recurse(depth - 1);
	__asm__ volatile("" : "+r"(result));
	return result + 1;
}

static void *bench_thread(void *unused)
{
	uint64_t total = 0;

	(void)unused;
	if (args.forever)
		for (;;)
			total += bench_recurse(args.depth);
	for (long unit = 0; unit < args.work; unit++)
		total += bench_recurse(args.depth);
	/* Use the result so the calls cannot be dropped.  */
	return (void *)(uintptr_t)(total == 0);
}

static void usage(FILE *to)
{
	fprintf(to,
		"Usage: workload [--threads N] [--depth D] [--work UNITS] [--forever] [--sleep]\n"
		"Fixed CPU work for the cprof benchmarks: N threads (default 1) each\n"
		"recurse D levels (default 30) and do UNITS units (default 1000) of\n"
		"checked busy work (%u loop iterations each).  Prints \"ready\", then\n"
		"\"elapsed_ns N\" at the end; --forever runs until killed.\n",
		BENCH_UNIT_LOOPS);
}

static long parse_long(const char *opt, const char *text, long min, long max)
{
	char *end;
	long value;

	errno = 0;
	value = text ? strtol(text, &end, 10) : 0;
	if (!text || errno || end == text || *end || value < min || value > max) {
		fprintf(stderr, "workload: %s wants an integer in %ld..%ld, got '%s'\n",
			opt, min, max, text ? text : "");
		usage(stderr);
		exit(2);
	}
	return value;
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--threads") == 0)
			args.threads = parse_long(a, i + 1 < argc ? argv[++i] : NULL, 1,
						  BENCH_MAX_THREADS);
		else if (strcmp(a, "--depth") == 0)
			args.depth = parse_long(a, i + 1 < argc ? argv[++i] : NULL, 0,
						BENCH_MAX_DEPTH);
		else if (strcmp(a, "--work") == 0)
			args.work = parse_long(a, i + 1 < argc ? argv[++i] : NULL, 0,
					       1000000000L);
		else if (strcmp(a, "--forever") == 0)
			args.forever = true;
		else if (strcmp(a, "--sleep") == 0)
			args.forever = args.sleep = true;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else {
			fprintf(stderr, "workload: unknown argument '%s'\n", a);
			usage(stderr);
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	uint64_t start = now_ns(), cpu_start = cpu_ns();
	pthread_t threads[BENCH_MAX_THREADS];
	int rc;

	parse_args(argc, argv);
	/* Deep recursion needs stack: D frames of a few dozen bytes each fit
	 * the default 8 MiB thread stacks up to very large D.  */
	for (long t = 1; t < args.threads; t++) {
		rc = pthread_create(&threads[t], NULL, bench_thread, NULL);
		if (rc) {
			fprintf(stderr, "workload: cannot create thread %ld: %s\n",
				t, strerror(rc));
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);
	bench_thread(NULL);
	for (long t = 1; t < args.threads; t++)
		pthread_join(threads[t], NULL);
	uint64_t elapsed = now_ns() - start, cpu = cpu_ns() - cpu_start;

	printf("elapsed_ns %" PRIu64 "\n", elapsed);
	printf("cpu_ns %" PRIu64 "\n", cpu);
	fflush(stdout);
	if (mismatches) {
		fprintf(stderr, "FAIL %" PRIu64 " wrong sums\n", mismatches);
		return 1;
	}
	return 0;
}
