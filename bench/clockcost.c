/* clockcost: what a sampling clock costs the thread it samples, per
 * sample, counted rather than timed against a noisy machine (issue 15,
 * goal 4).  A fixed amount of work at stack depth 30 is timed by the
 * thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID: time on a CPU, not
 * time waiting for one) with no event, with cprof-attach's CPU clock (a
 * task-clock event on the thread writing its registers and 1.25 KiB of its
 * stack at each period, the size it learns for this thread's frames,
 * into a ring of 64 KiB, readable at half of it and taken every 10 ms:
 * capture/clock.c and sampler.c), and
 * with perf record -g's (a cpu-clock event writing a frame-pointer call
 * chain, woken by watermark) and with perf record --call-graph dwarf's
 * (the same with the registers and 8 KiB of stack instead of the user
 * call chain), at HZ samples per second of CPU time,
 * interleaved REPS times.  A thread of its own takes the records, as the
 * tools' do.  Per sample: (median CPU with - median CPU without) /
 * median samples; at another rate the slowdown is that cost times the
 * rate.
 *
 * Those are the tools' events as this program opens them.  Given the
 * path of cprof-attach, it runs the tools themselves on itself instead
 * ("attach": cprof-attach -F HZ; "perfrecord": perf record -g -F HZ -p),
 * started before the work and ended with SIGTERM after it, the samples
 * read from what each says at its end: whatever else a tool does to the
 * thread (cprof-attach's ptrace seize and its stops, if any) counts too.
 *
 *   clockcost HZ REPS WORK_MS [CPROF_ATTACH]
 *
 * prints "none_ns N", "cprof_ns N", "cprof_samples N", "cprof_us_per_sample
 * X", the same for perf and perfdwarf (or attach and perfrecord), and
 * NAME_pct_at_99 X for each.  */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COPY 1280          /* what capture/sampler.c learns for work_at */
#define COPY_RING_PAGES 16 /* capture/clock.c's ring for such copies */
#define RING_PAGES 64      /* perf's */
/* capture/sampler.c's drain ticks come 10 ms apart at 999 Hz: about 10
 * records each, far from the half ring that wakes it.  The reader of
 * cprof's clock takes as many at each of its own, whatever HZ.  */
#define DRAIN_RECORDS 10
#define REGS_MASK (0x3ffull | (0xffull << 16)) /* as cprof-attach: CP_REGS_PERF_MASK */

static volatile uint64_t sink;

__attribute__((noinline, noipa)) static uint64_t work_at(int depth,
							 uint64_t n)
{
	if (depth > 0)
		return work_at(depth - 1, n) + 1;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += i * i ^ (s >> 3);
	return s;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct reader {
	int drain_ms;       /* its own ticks; 0: the watermark's wake-ups
			     * (as perf record's) */
	int fd;
	struct perf_event_mmap_page *meta;
	volatile int stop;
	uint64_t samples;
};

static void take(struct reader *r)
{
	struct perf_event_mmap_page *m = r->meta;
	uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = m->data_tail;
	const unsigned char *data = (const unsigned char *)m + m->data_offset;
	while (tail < head) {
		struct perf_event_header h;
		memcpy(&h, data + tail % m->data_size, sizeof(h));
		if (h.size < sizeof(h))
			break;
		if (h.type == PERF_RECORD_SAMPLE)
			r->samples++;
		tail += h.size;
	}
	__atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct pollfd p = {.fd = r->fd, .events = POLLIN};
	while (!r->stop) {
		poll(&p, 1, r->drain_ms ? r->drain_ms : 100);
		take(r);
	}
	take(r);
	return NULL;
}

/* One run of N loops under the event KIND (0 none, 1 cprof, 2 perf -g,
 * 3 perf --call-graph dwarf);
 * its CPU time, and the samples in *SAMPLES.  */
static uint64_t run(int kind, unsigned hz, uint64_t n, uint64_t *samples)
{
	struct reader r = {.fd = -1};
	pthread_t thread;
	size_t pages = 0;
	if (kind == 1) {
		r.drain_ms = (int)(DRAIN_RECORDS * 1000 / hz);
		if (r.drain_ms < 1)
			r.drain_ms = 1;
	}
	*samples = 0;
	if (kind) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_SOFTWARE;
		a.disabled = 1;
		if (kind == 1) {
			a.config = PERF_COUNT_SW_TASK_CLOCK;
			a.sample_period = 1000000000ull / hz;
			a.wakeup_events = 0; /* the watermark: half */
			a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
					PERF_SAMPLE_REGS_USER |
					PERF_SAMPLE_STACK_USER;
			a.sample_regs_user = REGS_MASK;
			a.sample_stack_user = COPY;
			a.use_clockid = 1;
			a.clockid = CLOCK_MONOTONIC;
			a.exclude_callchain_kernel = 1;
		} else {
			a.config = PERF_COUNT_SW_CPU_CLOCK;
			a.freq = 1;
			a.sample_freq = hz;
			a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID |
					PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN |
					PERF_SAMPLE_PERIOD;
			a.watermark = 1;
			a.wakeup_watermark = RING_PAGES * 4096 / 2;
			if (kind == 3) {
				/* perf record --call-graph dwarf: also the
				 * registers and 8 KiB of stack.  */
				a.sample_type |= PERF_SAMPLE_REGS_USER |
						 PERF_SAMPLE_STACK_USER;
				a.sample_regs_user = REGS_MASK;
				a.sample_stack_user = 8192;
				a.exclude_callchain_user = 1;
			}
		}
		r.fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
		if (r.fd < 0) {
			perror("perf_event_open");
			exit(1);
		}
		pages = kind == 1 ? COPY_RING_PAGES : RING_PAGES;
		r.meta = mmap(NULL, (pages + 1) * 4096,
			      PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
		if (r.meta == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		pthread_create(&thread, NULL, reader_main, &r);
		ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0);
	}
	uint64_t t0 = thread_cpu_ns();
	sink += work_at(30, n);
	uint64_t t1 = thread_cpu_ns();
	if (kind) {
		ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0);
		r.stop = 1;
		pthread_join(thread, NULL);
		*samples = r.samples;
		munmap(r.meta, (pages + 1) * 4096);
		close(r.fd);
	}
	return t1 - t0;
}

/* Whether this process is traced (cprof-attach has seized it).  */
static bool traced(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	bool yes = false;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "TracerPid:", 10) == 0)
			yes = atoi(line + 10) != 0;
	if (f)
		fclose(f);
	return yes;
}

/* One run of N loops with the tool itself on this process (KIND 4
 * cprof-attach at ATTACH, 5 perf record -g); its CPU time, and the
 * samples the tool says it took in *SAMPLES.  Exits on failure.  */
static uint64_t run_tool(int kind, const char *attach, unsigned hz,
			 uint64_t n, uint64_t *samples)
{
	char pid[16], freq[16], data[64];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	snprintf(freq, sizeof(freq), "%u", hz);
	snprintf(data, sizeof(data), "/tmp/clockcost-%d.data", (int)getpid());
	int err[2];
	if (pipe(err) < 0) {
		perror("pipe");
		exit(1);
	}
	pid_t tool = fork();
	if (tool == 0) {
		dup2(err[1], 2);
		close(err[0]);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		if (kind == 4)
			execl(attach, attach, "-v", "-F", freq, "-o", "/dev/null",
			      pid, (char *)NULL);
		else
			execlp("perf", "perf", "record", "-g", "-F", freq, "-p",
			       pid, "-o", data, (char *)NULL);
		_exit(127);
	}
	close(err[1]);
	/* Started: cprof-attach seizes the process, then opens the clocks
	 * (give it a moment); perf record opens its events without a sign
	 * this process could see.  */
	struct timespec pause = {0, 20000000};
	for (int i = 0; kind == 4 && !traced() && i < 500; i++)
		nanosleep(&pause, NULL);
	pause.tv_nsec = 0;
	pause.tv_sec = 1;
	nanosleep(&pause, NULL);
	uint64_t t0 = thread_cpu_ns();
	sink += work_at(30, n);
	uint64_t t1 = thread_cpu_ns();
	kill(tool, SIGTERM);
	static char out[16384]; /* not on the stack: see main */
	size_t len = 0;
	ssize_t got;
	while ((got = read(err[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)got;
	out[len] = '\0';
	close(err[0]);
	int status;
	waitpid(tool, &status, 0);
	unlink(data);
	const char *at = kind == 4 ? strstr(out, "cprof-attach: ")
				   : strstr(out, "samples)");
	*samples = 0;
	if (kind == 4) {
		for (; at; at = strstr(at + 1, "cprof-attach: "))
			if (strstr(at, " samples from ") &&
			    strstr(at, " samples from ") < strchr(at, '\n')) {
				*samples = strtoull(at + 14, NULL, 10);
				break;
			}
	} else if (at) {
		while (at > out && at[-1] != '(')
			at--;
		*samples = strtoull(at, NULL, 10);
	}
	if (!*samples) {
		fprintf(stderr, "clockcost: %s took no sample: %s\n",
			kind == 4 ? attach : "perf record", out);
		exit(1);
	}
	return t1 - t0;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr,
			"usage: clockcost HZ REPS WORK_MS [CPROF_ATTACH]\n");
		return 2;
	}
	const char *attach = argc == 5 ? argv[4] : NULL;
	/* The events, or the tools.  */
	const int events[] = {0, 1, 2, 3}, tools[] = {0, 4, 5};
	const int *kind_of = attach ? tools : events;
	int kinds = attach ? 3 : 4;
	unsigned hz = (unsigned)atoi(argv[1]);
	int reps = atoi(argv[2]);
	double work_ms = atof(argv[3]);
	if (hz == 0 || reps < 1 || reps > 99 || work_ms <= 0) {
		fprintf(stderr, "clockcost: HZ, REPS (1-99) and WORK_MS > 0\n");
		return 2;
	}
	/* Loops for WORK_MS of CPU.  */
	uint64_t n = 100000, ns;
	uint64_t dummy;
	while ((ns = run(0, hz, n, &dummy)) < 20000000ull)
		n *= 2;
	n = (uint64_t)((double)n * work_ms * 1e6 / (double)ns);
	/* Static: a frame of main this large would be copied with every
	 * sample (cprof-attach sizes its copies by the frames it finds).  */
	static uint64_t cpu[6][99], smp[6][99];
	for (int i = 0; i < reps; i++)
		for (int k = 0; k < kinds; k++) {
			int kind = kind_of[(k + i) % kinds]; /* rotated */
			cpu[kind][i] = kind >= 4 ? run_tool(kind, attach, hz, n,
							    &smp[kind][i])
						 : run(kind, hz, n,
						       &smp[kind][i]);
		}
	const char *names[6] = {"none",      "cprof",  "perf",
				"perfdwarf", "attach", "perfrecord"};
	uint64_t base = median(cpu[0], reps);
	printf("none_ns %llu\n", (unsigned long long)base);
	for (int j = 1; j < kinds; j++) {
		int k = kind_of[j];
		uint64_t c = median(cpu[k], reps), s = median(smp[k], reps);
		double per = s ? ((double)c - (double)base) / (double)s / 1e3
			       : 0.0;
		printf("%s_ns %llu\n%s_samples %llu\n%s_us_per_sample %.2f\n"
		       "%s_pct_at_99 %.3f\n",
		       names[k], (unsigned long long)c, names[k],
		       (unsigned long long)s, names[k], per, names[k],
		       per * 99.0 / 1e4);
	}
	return 0;
}
