/* ptrace_floor: the cheapest possible sample on this machine.
 *
 *   ptrace_floor TID [COUNT [GAP_US [getregs]]]
 *
 * Seizes one running thread and COUNT times (default 2000) stops it with
 * PTRACE_INTERRUPT, collects the stop with waitpid(__WALL) and resumes it
 * with PTRACE_CONT, sleeping GAP_US (default 1000) between round trips.
 * Nothing is read while the thread is stopped, so this is the floor under
 * any ptrace sampler's "target stopped per sample" time, measured the same
 * way (from before the interrupt to after the resume).
 *
 * With "getregs", each round trip also reads the registers
 * (PTRACE_GETREGS) while the thread is held, as every sampler must.
 *
 * stdout: "round_trip_us median X p99 Y count N",
 *         "stop_latency_us median X p99 Y" (interrupt to stop collected),
 *         "cpu_us_per_round_trip X csw_per_round_trip Y": this program's
 *         own CPU time (user + system, getrusage) and context switches per
 *         round trip, sleeps included: the floor of a sampler's own cost.
 * Exit 0, 1 on a ptrace failure, 2 on a usage error.  */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/user.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank quantile Q of the N sorted values.  */
static double quantile_us(const uint64_t *sorted, size_t n, double q)
{
	size_t rank = (size_t)(q * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)sorted[rank - 1] / 1000.0;
}

/* Wait for the group-stop or interrupt stop of TID.  Any other stop is a
 * signal for the target: pass it back unchanged and keep waiting.
 * Returns 0 once TID is in an interrupt stop, -1 if it is gone.  */
static int wait_interrupt_stop(pid_t tid)
{
	for (;;) {
		int status;

		if (waitpid(tid, &status, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return -1;
		if (!WIFSTOPPED(status))
			continue;
		/* PTRACE_INTERRUPT reports as SIGTRAP | PTRACE_EVENT_STOP << 8.  */
		if (status >> 16 == PTRACE_EVENT_STOP)
			return 0;
		ptrace(PTRACE_CONT, tid, NULL, (void *)(uintptr_t)WSTOPSIG(status));
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 5) {
		fprintf(stderr, "Usage: ptrace_floor TID [COUNT [GAP_US [getregs]]]\n");
		return 2;
	}
	pid_t tid = (pid_t)atol(argv[1]);
	long count = argc > 2 ? atol(argv[2]) : 2000;
	long gap_us = argc > 3 ? atol(argv[3]) : 1000;
	int getregs = argc > 4 && strcmp(argv[4], "getregs") == 0;
	struct user_regs_struct regs;
	struct rusage ru0, ru1;
	if (tid <= 0 || count <= 0 || gap_us < 0) {
		fprintf(stderr, "ptrace_floor: bad arguments\n");
		return 2;
	}
	uint64_t *round_trip = calloc((size_t)count, sizeof(*round_trip));
	uint64_t *stop_latency = calloc((size_t)count, sizeof(*stop_latency));
	if (!round_trip || !stop_latency) {
		fprintf(stderr, "ptrace_floor: out of memory\n");
		return 1;
	}
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0) {
		fprintf(stderr, "ptrace_floor: cannot seize %d: %s\n", (int)tid,
			strerror(errno));
		return 1;
	}
	const struct timespec gap = { gap_us / 1000000, (gap_us % 1000000) * 1000 };
	long done = 0;
	getrusage(RUSAGE_SELF, &ru0);
	for (; done < count; done++) {
		uint64_t t0 = now_ns();
		if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 ||
		    wait_interrupt_stop(tid) < 0)
			break;
		uint64_t t1 = now_ns();
		if (getregs && ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0)
			break;
		if (ptrace(PTRACE_CONT, tid, NULL, NULL) < 0)
			break;
		uint64_t t2 = now_ns();
		round_trip[done] = t2 - t0;
		stop_latency[done] = t1 - t0;
		nanosleep(&gap, NULL);
	}
	getrusage(RUSAGE_SELF, &ru1);
	/* Leave the target as it was: stop it once more and detach (a seized
	 * thread can only be detached while stopped).  */
	if (done == count && ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) == 0 &&
	    wait_interrupt_stop(tid) == 0)
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
	if (done < count) {
		fprintf(stderr, "ptrace_floor: target %d went away after %ld round trips\n",
			(int)tid, done);
		return 1;
	}
	qsort(round_trip, (size_t)count, sizeof(*round_trip), cmp_u64);
	qsort(stop_latency, (size_t)count, sizeof(*stop_latency), cmp_u64);
	printf("round_trip_us median %.1f p99 %.1f count %ld\n",
	       quantile_us(round_trip, (size_t)count, 0.5),
	       quantile_us(round_trip, (size_t)count, 0.99), count);
	printf("stop_latency_us median %.1f p99 %.1f\n",
	       quantile_us(stop_latency, (size_t)count, 0.5),
	       quantile_us(stop_latency, (size_t)count, 0.99));
	double cpu_us = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
				 ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
			(double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
				 ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
	long csw = ru1.ru_nvcsw - ru0.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nivcsw;
	printf("cpu_us_per_round_trip %.2f csw_per_round_trip %.2f\n",
	       cpu_us / (double)count, (double)csw / (double)count);
	free(round_trip);
	free(stop_latency);
	return 0;
}
