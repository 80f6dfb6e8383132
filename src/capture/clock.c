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
#include "cprof/error.h"

/* A bare ring: its control page and one page of records.  A bare
 * record is a header (8 bytes, sample_type 0): 512 fit, and the sampler
 * takes them at each wake-up.  */
#define RING_PAGES 2

/* A ring of records with copies holds at least this many (its data is
 * a power of two of pages): the sampler takes them at each wake-up, and
 * one it is slow to take is lost (counted), not written over.  */
#define COPY_RECORDS 3

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

static size_t ring_bytes(uint32_t copy)
{
	if (!copy)
		return RING_PAGES * page_size();
	size_t data = page_size();
	while (data < COPY_RECORDS * ((size_t)copy + COPY_OVERHEAD))
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
	attr.wakeup_events = 1; /* readable at every record */
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
	size_t bytes = ring_bytes(copy);
	void *ring = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
	if (ring == MAP_FAILED && copy) {
		/* Locked memory refused (perf_event_mlock_kb, no
		 * CAP_IPC_LOCK): a bare clock, samples by stops.  */
		close(fd);
		copy = 0;
		fd = open_event(th, period_ns, 0);
		bytes = ring_bytes(0);
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

/* Copy LEN bytes at offset OFF of a ring's data (SIZE bytes, wrapping)
 * into DST.  */
static void ring_copy(unsigned char *dst, const unsigned char *data,
		      uint64_t size, uint64_t off, size_t len)
{
	size_t at = (size_t)(off % size);
	size_t first = len < size - at ? len : (size_t)(size - at);
	memcpy(dst, data + at, first);
	memcpy(dst + first, data, len - first);
}

/* Parse one sample record with a copy (REC, LEN bytes, contiguous) for
 * FN.  */
static void give_sample(const unsigned char *rec, size_t len,
			void (*fn)(void *, const struct cp_clock_sample *),
			void *arg)
{
	struct cp_clock_sample smp;
	memset(&smp, 0, sizeof(smp));
	size_t at = sizeof(struct perf_event_header);
	uint32_t ids[2];
	uint64_t v;
	if (at + 8 + 8 + 8 > len)
		return;
	memcpy(ids, rec + at, sizeof(ids));
	smp.tid = (pid_t)ids[1];
	at += 8;
	memcpy(&smp.time_ns, rec + at, 8);
	at += 8;
	memcpy(&v, rec + at, 8); /* abi */
	at += 8;
	if (v != PERF_SAMPLE_REGS_ABI_NONE) {
		if (at + 8 * CP_REGS_PERF_COUNT > len)
			return;
		smp.regs = (const uint64_t *)(const void *)(rec + at);
		at += 8 * CP_REGS_PERF_COUNT;
	}
	if (at + 8 > len)
		return;
	uint64_t size;
	memcpy(&size, rec + at, 8);
	at += 8;
	if (size && at + size + 8 <= len) {
		uint64_t dyn;
		memcpy(&dyn, rec + at + size, 8);
		smp.stack = rec + at;
		smp.stack_len = (size_t)(dyn < size ? dyn : size);
	}
	fn(arg, &smp);
}

/* Take the records between the tail and the head of TH's ring, counting
 * the periods they stand for; with FN, give it each sample's copy.  */
static uint64_t take_records(struct cp_thread *th, unsigned char **scratch,
			     size_t *scratch_cap,
			     void (*fn)(void *, const struct cp_clock_sample *),
			     void *arg)
{
	struct perf_event_mmap_page *meta = th->clock_ring;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	const unsigned char *data =
		(const unsigned char *)meta + meta->data_offset;
	uint64_t size = meta->data_size;
	uint64_t periods = 0;
	while (tail < head && size) {
		struct perf_event_header h;
		/* Records are 8-byte aligned: a header never wraps.  */
		memcpy(&h, data + tail % size, sizeof(h));
		if (h.size < sizeof(h) || tail + h.size > head)
			break; /* not a record: drop the rest */
		if (h.type == PERF_RECORD_SAMPLE) {
			periods++;
			if (fn && th->clock_copy) {
				const unsigned char *rec = data + tail % size;
				if (tail % size + h.size > size) {
					if (*scratch_cap < h.size) {
						unsigned char *grown = realloc(
							*scratch, h.size);
						if (!grown) {
							tail += h.size;
							continue;
						}
						*scratch = grown;
						*scratch_cap = h.size;
					}
					ring_copy(*scratch, data, size, tail,
						  h.size);
					rec = *scratch;
				}
				give_sample(rec, h.size, fn, arg);
			}
		} else if (h.type == PERF_RECORD_LOST &&
			   h.size >= sizeof(h) + 2 * sizeof(uint64_t)) {
			/* { header, id, lost }: the lost count may wrap.  */
			uint64_t lost = 0;
			ring_copy((unsigned char *)&lost, data, size,
				  tail + sizeof(h) + sizeof(uint64_t),
				  sizeof(lost));
			periods += lost;
		}
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
	return periods;
}

uint64_t cp_thread_clock_take(struct cp_thread *th)
{
	return th->clock_ring ? take_records(th, NULL, NULL, NULL, NULL) : 0;
}

uint64_t cp_thread_clock_take_samples(
	struct cp_thread *th, unsigned char **scratch, size_t *scratch_cap,
	void (*fn)(void *arg, const struct cp_clock_sample *sample),
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
