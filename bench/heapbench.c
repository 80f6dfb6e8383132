/* heapbench: malloc(64) + free pairs at the bottom of a DEPTH-frame stack
 * in THREADS threads, timed by the program itself: the cost of a heap
 * tracer per pair as the target sees it, without the tracer's start-up
 * (bench/cost.sh, issue 15 goal 3).  fixtures/heap-pairs is the same
 * loop without a clock.
 *
 *   heapbench N DEPTH [THREADS]   (THREADS 1..64, default 1)
 *
 * Each thread makes N / THREADS pairs under DEPTH noipa frames
 * (hb_recurse -> ... -> hb_leaf -> malloc / free), built -O2 with frame
 * pointers.  The threads start together (a barrier); the clock runs from
 * the barrier to the last join.  stdout: "elapsed_ns NS pairs P" and "ok
 * CHECKSUM" (the same for the same N and THREADS, traced or not); exit 1
 * and "FAIL" on stderr if malloc fails.  */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOIPA __attribute__((noinline, noipa))

struct worker {
	pthread_t thread;
	long count;
	long depth;
	uint64_t sum;
};

static pthread_barrier_t go;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

NOIPA uint64_t hb_leaf(long count);
NOIPA uint64_t hb_recurse(long depth, long count);

NOIPA uint64_t hb_leaf(long count)
{
	uint64_t sum = 0;

	for (long i = 0; i < count; i++) {
		uint64_t *block = malloc(64);

		if (block == NULL) {
			fprintf(stderr, "FAIL malloc(64)\n");
			exit(1);
		}
		for (int k = 0; k < 8; k++)
			block[k] = (uint64_t)i * 8 + (uint64_t)k;
		__asm__ volatile("" : : "r"(block) : "memory");
		for (int k = 0; k < 8; k++)
			sum = sum * 31 + block[k];
		free(block);
	}
	return sum;
}

NOIPA uint64_t hb_recurse(long depth, long count)
{
	if (depth <= 1)
		return hb_leaf(count) + 1;
	return hb_recurse(depth - 1, count) + 1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(&go);
	w->sum = hb_recurse(w->depth, w->count);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker workers[64];

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: heapbench N DEPTH [THREADS]\n");
		return 2;
	}
	long n = atol(argv[1]), depth = atol(argv[2]);
	int threads = argc > 3 ? atoi(argv[3]) : 1;
	if (n < 1 || depth < 1 || depth > 10000 || threads < 1 || threads > 64) {
		fprintf(stderr, "usage: heapbench N DEPTH [THREADS]: N >= 1, DEPTH 1..10000, THREADS 1..64\n");
		return 2;
	}
	pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
	for (int t = 0; t < threads; t++) {
		workers[t].count = n / threads;
		workers[t].depth = depth;
		if (pthread_create(&workers[t].thread, NULL, worker_main, &workers[t])) {
			fprintf(stderr, "FAIL pthread_create\n");
			return 1;
		}
	}
	pthread_barrier_wait(&go);
	uint64_t start = now_ns(), sum = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(workers[t].thread, NULL);
		sum += workers[t].sum;
	}
	uint64_t elapsed = now_ns() - start;
	printf("elapsed_ns %llu pairs %ld\nok %llu\n", (unsigned long long)elapsed,
	       n / threads * threads, (unsigned long long)sum);
	return 0;
}
