/* A thread's CPU clock: a perf task-clock event with a one-page ring
 * (clock.h).  */
#include "capture/clock.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cprof/error.h"

/* The ring: its control page and one page of records.  A record of ours
 * is a bare header (8 bytes, sample_type 0): 512 fit, and the sampler
 * takes them at each wake-up.  */
#define RING_PAGES 2

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

int cp_thread_clock_open(struct cp_thread *th, uint64_t period_ns)
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
	int fd = (int)syscall(SYS_perf_event_open, &attr, th->tid, -1, -1,
			      PERF_FLAG_FD_CLOEXEC);
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
	void *ring = mmap(NULL, RING_PAGES * page_size(),
			  PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) {
		int saved = errno;
		close(fd);
		errno = saved;
		th->no_clock = true;
		return -CP_E_SYS;
	}
	th->clock_fd = fd;
	th->clock_ring = ring;
	th->clock_period = period_ns;
	th->clock_owner = 0;
	return fd;
}

/* Take the records between the tail and the head of TH's ring, counting
 * the periods they stand for.  */
static uint64_t take_records(struct cp_thread *th)
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
		if (h.size < sizeof(h))
			break; /* not a record: drop the rest */
		if (h.type == PERF_RECORD_SAMPLE) {
			periods++;
		} else if (h.type == PERF_RECORD_LOST &&
			   h.size >= sizeof(h) + 2 * sizeof(uint64_t)) {
			/* { header, id, lost }: the lost count may wrap.  */
			uint64_t lost = 0;
			unsigned char *dst = (unsigned char *)&lost;
			for (size_t i = 0; i < sizeof(lost); i++)
				dst[i] = data[(tail + sizeof(h) +
					       sizeof(uint64_t) + i) %
					      size];
			periods += lost;
		}
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
	return periods;
}

uint64_t cp_thread_clock_take(struct cp_thread *th)
{
	return th->clock_ring ? take_records(th) : 0;
}

int cp_thread_clock_enable(struct cp_thread *th, bool on)
{
	if (th->clock_fd < 0)
		return -CP_E_SYS;
	if (on)
		take_records(th);
	if (ioctl(th->clock_fd,
		  on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) < 0)
		return -CP_E_SYS;
	return 0;
}

void cp_thread_clock_close(struct cp_thread *th)
{
	if (th->clock_ring)
		munmap(th->clock_ring, RING_PAGES * page_size());
	if (th->clock_fd >= 0)
		close(th->clock_fd);
	th->clock_ring = NULL;
	th->clock_fd = -1;
	th->clock_owner = 0;
}
