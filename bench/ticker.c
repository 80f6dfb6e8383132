/* ticker: the reference of goal 2 (bench/cost.sh): a bare timer loop that
 * wakes HZ times a second for SECONDS as cprof-attach's sampling thread
 * does (ppoll with the time left to the next tick, in the class that
 * session.c's take_priority asks for: SCHED_DEADLINE with a quarter of
 * 16 ms (or of the tick, if longer) as its runtime up to 1000 Hz,
 * otherwise or when refused
 * nice -10 with a 100 us scheduler slice), doing
 * nothing, and counts the ticks it missed by the sampler's rule (a
 * wake-up a whole period or more after its tick).  What it misses beside
 * the same target is the machine's share (the scheduler, a virtual CPU
 * taken away by the host), not the profiler's.
 *
 *   ticker HZ SECONDS   prints "ticks N missed M taken P"  */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3 || atoi(argv[1]) < 1 || atof(argv[2]) <= 0) {
		fprintf(stderr, "usage: ticker HZ SECONDS\n");
		return 2;
	}
	uint64_t period = 1000000000u / (unsigned)atoi(argv[1]);
	/* As the sampling thread; not fatal when not allowed.  */
	setpriority(PRIO_PROCESS, 0, -10);
	struct {
		uint32_t size, sched_policy;
		uint64_t sched_flags;
		int32_t sched_nice;
		uint32_t sched_priority;
		uint64_t sched_runtime, sched_deadline, sched_period;
	} attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.sched_policy = 6; /* SCHED_DEADLINE */
	attr.sched_flags = 1;  /* reset on fork */
	uint64_t reserve = period < 16000000u ? 16000000u : period;
	attr.sched_runtime = reserve / 4;
	attr.sched_deadline = reserve;
	attr.sched_period = reserve;
	if (period < 1000000u || syscall(SYS_sched_setattr, 0, &attr, 0) != 0) {
		memset(&attr, 0, sizeof(attr));
		attr.size = sizeof(attr);
		attr.sched_nice = -10;
		attr.sched_runtime = 100000;
		syscall(SYS_sched_setattr, 0, &attr, 0);
	}
	uint64_t start = now_ns();
	uint64_t end = start + (uint64_t)(atof(argv[2]) * 1e9);
	uint64_t next = start + period, scheduled = 0, missed = 0;
	for (;;) {
		uint64_t now = now_ns();
		if (now >= end)
			break;
		if (now < next) {
			uint64_t rel = next - now;
			struct timespec t = { (time_t)(rel / 1000000000u),
					      (long)(rel % 1000000000u) };
			ppoll(NULL, 0, &t, NULL);
		}
		uint64_t woke = now_ns();
		if (woke >= next) {
			uint64_t expirations = 1 + (woke - next) / period;
			next += expirations * period;
			scheduled += expirations;
			missed += expirations - 1;
		}
	}
	printf("ticks %llu missed %llu taken %.2f\n",
	       (unsigned long long)scheduled, (unsigned long long)missed,
	       scheduled ? 100.0 * (double)(scheduled - missed) /
				   (double)scheduled
			 : 0.0);
	return 0;
}
