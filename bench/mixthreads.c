/* mixthreads: BUSY threads in a CPU loop and SLEEPERS threads blocked in
 * pthread_cond_wait for the whole run; the cost of a sampler per tick
 * against many threads (issue 15: --wall with 64 and 256 threads).
 *
 *   mixthreads BUSY SLEEPERS
 *
 * Busy thread: mix_busy -> mix_busy_1 -> mix_busy_2 (a checked loop).
 * Sleeper: mix_sleep -> mix_sleep_1 -> pthread_cond_wait, never woken.
 * Prints "ready" once every thread has started; runs until killed.  */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t started;
static volatile uint64_t sink;

__attribute__((noinline, noipa)) static uint64_t mix_busy_2(uint64_t n)
{
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += i * i;
	return s;
}

__attribute__((noinline, noipa)) static uint64_t mix_busy_1(uint64_t n)
{
	return mix_busy_2(n) + 1;
}

__attribute__((noinline, noipa)) static void *mix_busy(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&started);
	for (;;)
		sink += mix_busy_1(1u << 20);
	return NULL;
}

__attribute__((noinline, noipa)) static int mix_sleep_1(void)
{
	pthread_mutex_lock(&lock);
	for (;;)
		pthread_cond_wait(&never, &lock);
	return 0;
}

__attribute__((noinline, noipa)) static void *mix_sleep(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&started);
	return (void *)(intptr_t)mix_sleep_1();
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mixthreads BUSY SLEEPERS\n");
		return 2;
	}
	int busy = atoi(argv[1]), sleepers = atoi(argv[2]);
	pthread_barrier_init(&started, NULL, (unsigned)(busy + sleepers + 1));
	for (int i = 0; i < busy + sleepers; i++) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 256 * 1024);
		if (pthread_create(&t, &a, i < busy ? mix_busy : mix_sleep, NULL)) {
			perror("pthread_create");
			return 1;
		}
	}
	pthread_barrier_wait(&started);
	printf("ready\n");
	fflush(stdout);
	pthread_mutex_lock(&lock);
	for (;;)
		pthread_cond_wait(&never, &lock);
}
