/* A thread's CPU clock: a perf task-clock event with a one-page ring
 * (clock.h).  */
#include "capture/clock.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch/x86_64/regs.h"
#include "capture/perf_ring.h"
#include "cprof/error.h"

/* A bare ring: its control page and one page of records.  A bare
 * record is a header (8 bytes, sample_type 0): 512 fit, and the sampler
 * takes them at each wake-up.  */
#define RING_PAGES 2

/* A ring of records with copies: its data (a power of two of pages)
 * holds about COPY_RECORDS of them, at most COPY_RING_MAX bytes of
 * data, and no fewer than COPY_RECORDS_MIN.  Its thread wakes the
 * sampler only once half of it is written: a wake-up at every record
 * cost the sampled thread about 15 us a sample (bench/clockcost.c, issue
 * 15), and the sampler takes every ring at its own drain ticks anyway
 * (capture/sampler.c), so that at the usual rates the thread wakes no
 * one.  Where locked memory is short the ring holds COPY_RECORDS_MIN.
 * One the sampler is slow to take is lost (counted), not written over.  */
#define COPY_RECORDS 24
#define COPY_RECORDS_MIN 4
#define COPY_RING_MAX (512 * 1024)

/* What a record with a copy adds to the stack bytes: header, pid/tid,
 * time, abi, registers, size, dyn_size.  */
#define COPY_OVERHEAD (8 + 8 + 8 + 8 + 8 * CP_REGS_PERF_COUNT + 8 + 8)

/* Descriptors left for everything else (debug files, /proc files, the
 * output): a target with thousands of threads gets clocks for as many
 * as the limit allows beyond these, and ticks for the rest.  */
#define FD_RESERVE 256

static size_t page_size(void)
{
	static size_t size;
	if (!size) {
		long v = sysconf(_SC_PAGESIZE);
		size = v > 0 ? (size_t)v : 4096;
	}
	return size;
}

static size_t ring_bytes(uint32_t copy, size_t records)
{
	if (!copy)
		return RING_PAGES * page_size();
	size_t record = (size_t)copy + COPY_OVERHEAD;
	size_t data = page_size();
	while (data < records * record &&
	       (data < COPY_RING_MAX || data < COPY_RECORDS_MIN * record))
		data *= 2;
	return page_size() + data;
}

static int open_event(struct cp_thread *th, uint64_t period_ns, uint32_t copy)
{
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	/* The thread's own run time, kernel time included, as schedstat
	 * counts it and perf's cpu-clock does.  */
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.sample_period = period_ns;
	attr.disabled = 1;
	/* A bare clock is readable at every record: the thread is due for
	 * a stop.  One with copies, at half its ring (wakeup_events 0: the
	 * kernel's watermark, half the data, as perf record's).  */
	attr.wakeup_events = copy ? 0 : 1;
	if (copy) {
		attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				   PERF_SAMPLE_REGS_USER |
				   PERF_SAMPLE_STACK_USER;
		attr.sample_regs_user = CP_REGS_PERF_MASK;
		attr.sample_stack_user = copy;
		attr.use_clockid = 1;
		attr.clockid = CLOCK_MONOTONIC;
		attr.exclude_callchain_kernel = 1;
	}
	return (int)syscall(SYS_perf_event_open, &attr, th->tid, -1, -1,
			    PERF_FLAG_FD_CLOEXEC);
}

int cp_thread_clock_open(struct cp_thread *th, uint64_t period_ns,
			 uint32_t copy)
{
	int fd = copy ? open_event(th, period_ns, copy) : -1;
	if (fd < 0) {
		copy = 0;
		fd = open_event(th, period_ns, 0);
	}
	struct rlimit files;
	if (fd >= 0 && getrlimit(RLIMIT_NOFILE, &files) == 0 &&
	    files.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)fd + FD_RESERVE >= files.rlim_cur) {
		close(fd);
		fd = -1;
		errno = EMFILE;
	}
	if (fd < 0) {
		th->no_clock = true;
		return -CP_E_SYS;
	}
	/* Writable: the kernel then keeps records we have not taken
	 * instead of writing over them, and counts the ones it could not
	 * write as lost.  */
	size_t bytes = ring_bytes(copy, COPY_RECORDS);
	void *ring = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
	if (ring == MAP_FAILED && copy &&
	    ring_bytes(copy, COPY_RECORDS_MIN) < bytes) {
		/* Locked memory is short (perf_event_mlock_kb without
		 * CAP_IPC_LOCK): the smallest ring.  */
		bytes = ring_bytes(copy, COPY_RECORDS_MIN);
		ring = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			    fd, 0);
	}
	if (ring == MAP_FAILED && copy) {
		/* Locked memory refused (perf_event_mlock_kb, no
		 * CAP_IPC_LOCK): a bare clock, samples by stops.  */
		close(fd);
		copy = 0;
		fd = open_event(th, period_ns, 0);
		bytes = ring_bytes(0, 0);
		ring = fd < 0 ? MAP_FAILED
			      : mmap(NULL, bytes, PROT_READ | PROT_WRITE,
				     MAP_SHARED, fd, 0);
	}
	if (ring == MAP_FAILED) {
		int saved = errno;
		if (fd >= 0)
			close(fd);
		errno = saved;
		th->no_clock = true;
		return -CP_E_SYS;
	}
	th->clock_fd = fd;
	th->clock_ring = ring;
	th->clock_ring_bytes = bytes;
	th->clock_copy = copy;
	th->clock_period = period_ns;
	th->clock_owner = 0;
	return fd;
}

/* What a take of a clock's ring adds up, and whom it gives the samples.  */
struct take {
	const struct cp_thread *th;
	uint64_t periods;
	void (*fn)(void *, const struct cp_perf_sample *);
	void *arg;
};

static void take_record(void *arg, uint32_t type, const unsigned char *rec,
			size_t len)
{
	struct take *t = arg;
	if (type == PERF_RECORD_SAMPLE) {
		t->periods++;
		struct cp_perf_sample smp;
		if (t->fn && t->th->clock_copy && rec &&
		    cp_perf_sample_parse(rec, len, false, &smp))
			t->fn(t->arg, &smp);
	} else if (type == PERF_RECORD_LOST && rec) {
		t->periods += cp_perf_lost(rec, len);
	}
}

/* Take the records between the tail and the head of TH's ring, counting
 * the periods they stand for; with FN, give it each sample's copy.  */
static uint64_t take_records(struct cp_thread *th, unsigned char **scratch,
			     size_t *scratch_cap,
			     void (*fn)(void *, const struct cp_perf_sample *),
			     void *arg)
{
	struct take t = {.th = th, .fn = fn, .arg = arg};
	cp_perf_ring_take(th->clock_ring, fn ? scratch : NULL, scratch_cap,
			  take_record, &t);
	return t.periods;
}

uint64_t cp_thread_clock_take(struct cp_thread *th)
{
	return th->clock_ring ? take_records(th, NULL, NULL, NULL, NULL) : 0;
}

uint64_t cp_thread_clock_take_samples(
	struct cp_thread *th, unsigned char **scratch, size_t *scratch_cap,
	void (*fn)(void *arg, const struct cp_perf_sample *sample),
	void *arg)
{
	return th->clock_ring ? take_records(th, scratch, scratch_cap, fn, arg)
			      : 0;
}

int cp_thread_clock_enable(struct cp_thread *th, bool on)
{
	if (th->clock_fd < 0)
		return -CP_E_SYS;
	if (on)
		cp_thread_clock_take(th);
	if (ioctl(th->clock_fd,
		  on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) < 0)
		return -CP_E_SYS;
	return 0;
}

bool cp_thread_clock_unread(const struct cp_thread *th)
{
	const struct perf_event_mmap_page *meta = th->clock_ring;
	return meta && __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) !=
			       meta->data_tail;
}

void cp_thread_clock_close(struct cp_thread *th)
{
	if (th->clock_ring)
		munmap(th->clock_ring, th->clock_ring_bytes);
	if (th->clock_fd >= 0)
		close(th->clock_fd);
	th->clock_ring = NULL;
	th->clock_fd = -1;
	th->clock_owner = 0;
	th->clock_copy = 0;
}
