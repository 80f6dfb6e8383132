/* Heap mode by the kernel's uprobes (heap_uprobe.h).  */
#include "capture/heap_uprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch/x86_64/regs.h"
#include "capture/heap_alloc.h"
#include "capture/heap_trap.h"
#include "capture/perf_ring.h"
#include "capture/tracefs_probes.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "symbolize/resolver.h"
#include "util/grow.h"

/* Stack bytes an allocating entry's record copies, from the stack
 * pointer up: the frames of the allocation's stack (perf record's
 * --call-graph dwarf copies as much by default).  16 KiB copies filled
 * a 4 MiB ring in 2.4 ms of heap-leak, faster than a tracer sharing two
 * CPUs with a test run was sure to wake.  A deeper stack is cut where the
 * copy ends (counted: stacks_cut).  A copy that grows per thread
 * (its events opened again while it is held) was tried and lost records
 * for reasons not understood; left for later.  */
#define ENTRY_COPY (8 * 1024)

/* A free's record copies its return address: where an unknown block's
 * free came from (the table asks, internal_frees).  The return of a call
 * that stores its result (posix_memalign) copies the caller's frames,
 * where the result is stored as a rule (it is read from the target
 * otherwise, which may have moved on); other returns copy nothing.  */
#define FREE_COPY 8
#define STORED_COPY 4096

/* A thread's ring: about 1000 allocating entries' records, less when
 * locked memory is short (perf_event_mlock_kb without CAP_IPC_LOCK).
 * The tracer is woken when a sixteenth of it is written, and a thread
 * whose ring is found that full (THROTTLE_PART; looked at before each
 * record is taken, as taking one may wait for the symbolizer) is asked
 * to stop and held until its ring is taken, so that the kernel need not
 * drop a record when the tracer is late or slower than the thread.  */
#define RING_DATA (8 * 1024 * 1024)
#define RING_LEAST (256 * 1024)
#define THROTTLE_PART 16
#define WATCH_EVERY 1

/* Records newer than this, by their time, wait for the next pass: a
 * record of another thread written a moment before may not be visible
 * yet, and the table must get the events in the order they happen.  */
#define HOLDBACK_NS 2000000ull

/* The longest wait for a record, so that a duration or a stop is seen.  */
#define PASS_MS 50

/* Descriptors left for everything else, as the CPU clocks leave.  */
#define FD_RESERVE 256

#define MAX_SITES (2 * CP_HEAP_MAX_ENTRIES)

/* One probed place: an entry point of row ROW, or its return.  */
struct site {
	uint32_t row;
	bool ret;
	uint32_t copy;       /* stack bytes its records carry */
	uint64_t addr;       /* the entry point in the target */
	uint64_t offset;     /* in the file */
	char path[64];       /* /proc/PID/map_files/START-END */
	unsigned event;      /* its event in uevents[] */
};

/* What a thread's perf event is opened on: the sites of one kind (entry
 * or return) and one copy, defined as one tracefs event, whose closing
 * waits for one grace period whatever its number of probes; or one site,
 * as an event of the uprobe PMU (no tracefs) or a definition of its own
 * (a kernel that does not append probes to an event).  */
struct uevent {
	uint64_t tp_id;      /* its definition in tracefs, 0: none */
	bool ret;
	uint32_t copy;
	size_t site;         /* its site, the first of them */
	size_t nsites;
};

/* One thread's events and what its calls left.  */
struct uthread {
	pid_t tid;
	int fds[MAX_SITES];   /* by event; fds[0]'s ring takes them all */
	uint64_t ids[MAX_SITES];
	size_t nfds;
	struct perf_event_mmap_page *ring;
	size_t ring_bytes;    /* mapped: a page and the data */
	size_t ring_data;     /* the data's size */
	unsigned depth;       /* allocator calls in flight, nested ones
			       * included (those with a return probe) */
	uint32_t row;         /* the outermost's row */
	uint64_t sp;          /* its stack pointer at entry */
	uint64_t ret;         /* its return address */
	uint64_t args[CP_ABI_REG_ARGS];
	uint32_t stack;       /* its stack id */
	bool asked;           /* asked to stop while its ring is taken */
};

/* An event waiting for its turn (the order of times).  */
struct pending {
	struct cp_heap_event ev;
	uint64_t caller;      /* a free's return address */
	uint64_t seq;
};

/* Closing a uprobe event waits for the kernel's grace periods (about
 * 85 ms each on 6.18): a thread of ours closes them, one after the
 * other, while tracing goes on (the events of a thread gone) and while
 * the results are written (all the others).  */
struct closer {
	pthread_t thread;
	bool started;
	bool done;            /* no more descriptors will come */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int *fds;
	size_t n, cap;
};

struct cp_heap_uprobes {
	struct closer closer;
	struct cp_tracefs_probes defs; /* the sites' definitions, if any */
	int type;             /* the uprobe PMU's */
	unsigned ret_bit;     /* config bit of a return probe */
	struct site sites[MAX_SITES];
	size_t nsites;
	struct uevent uevents[MAX_SITES];
	size_t nuevents;
	bool armed;
	struct uthread *threads;
	size_t nthreads, threads_cap;
	int epfd, sigfd;
	struct pending *pending;
	size_t npending, pending_cap;
	uint64_t seq;
	unsigned char *scratch;
	size_t scratch_cap;
	uint64_t free_caller; /* of the free being emitted */
	bool taking;          /* in take_all: the fills are watched */
	unsigned since_watch; /* records taken since they were */
	size_t asked;         /* threads asked to stop, not yet served */
};

static size_t page_size(void)
{
	long v = sysconf(_SC_PAGESIZE);
	return v > 0 ? (size_t)v : 4096;
}

static uint64_t now_ns(void)
{
	return cp_heap_now_ns();
}

/* A number from a sysfs file of the PMU; -1 when unreadable.  */
static long pmu_number(const char *file, const char *prefix)
{
	char path[128], text[64];
	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/uprobe/%s",
		 file);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	const char *at = text;
	if (prefix) {
		size_t len = strlen(prefix);
		if (strncmp(text, prefix, len) != 0)
			return -1;
		at += len;
	}
	char *end;
	long v = strtol(at, &end, 10);
	return end == at ? -1 : v;
}

int cp_heap_uprobes_new(struct cp_heap *h, struct cp_heap_uprobes **out)
{
	(void)h;
	long type = pmu_number("type", NULL);
	long bit = pmu_number("format/retprobe", "config:");
	if (type < 0 || bit < 0 || bit > 63)
		return -CP_E_SYS;
	struct cp_heap_uprobes *u = calloc(1, sizeof(*u));
	if (!u)
		return -CP_E_NOMEM;
	u->type = (int)type;
	u->ret_bit = (unsigned)bit;
	pthread_mutex_init(&u->closer.lock, NULL);
	pthread_cond_init(&u->closer.cond, NULL);
	u->epfd = u->sigfd = -1;
	*out = u;
	return 0;
}

bool cp_heap_uprobes_armed(const struct cp_heap *h)
{
	return h->uprobes && h->uprobes->armed;
}

bool cp_heap_uprobes_at(const struct cp_heap *h, uint64_t addr)
{
	if (!cp_heap_uprobes_armed(h))
		return false;
	for (size_t i = 0; i < h->uprobes->nsites; i++)
		if (h->uprobes->sites[i].addr == addr)
			return true;
	return false;
}

/* ------------------------------------------------------ events */

static int open_uevent(const struct cp_heap_uprobes *u,
		       const struct uevent *e, pid_t tid, size_t ring_data)
{
	const struct site *s = &u->sites[e->site];
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	if (e->tp_id) {
		attr.type = PERF_TYPE_TRACEPOINT;
		attr.config = e->tp_id;
	} else {
		attr.type = (uint32_t)u->type;
		attr.config = s->ret ? 1ull << u->ret_bit : 0;
		attr.config1 = (uint64_t)(uintptr_t)s->path;
		attr.config2 = s->offset;
	}
	attr.sample_period = 1;
	attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID |
			   PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
			   PERF_SAMPLE_STACK_USER;
	attr.sample_regs_user = CP_REGS_PERF_MASK;
	attr.sample_stack_user = e->copy;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.exclude_kernel = 1;
	attr.exclude_callchain_kernel = 1;
	attr.watermark = 1;
	attr.wakeup_watermark = (uint32_t)(ring_data / 16);
	return (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1,
			    PERF_FLAG_FD_CLOEXEC);
}

static void *closer_main(void *arg)
{
	struct closer *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->n && !c->done)
			pthread_cond_wait(&c->cond, &c->lock);
		if (!c->n)
			break;
		int fd = c->fds[--c->n];
		pthread_mutex_unlock(&c->lock);
		close(fd);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Hand FD to the closer (closed here when it cannot take it).  */
static void closer_push(struct closer *c, int fd)
{
	pthread_mutex_lock(&c->lock);
	if (!c->started) {
		/* It takes none of our signals.  */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		c->started = pthread_create(&c->thread, NULL, closer_main, c) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (!c->started ||
	    !cp_grow_zeroed((void **)&c->fds, &c->cap, c->n + 1,
			    sizeof(*c->fds), 64)) {
		pthread_mutex_unlock(&c->lock);
		close(fd);
		return;
	}
	c->fds[c->n++] = fd;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Wait until the closer has closed everything it was given.  */
static void closer_join(struct closer *c)
{
	pthread_mutex_lock(&c->lock);
	c->done = true;
	pthread_cond_signal(&c->cond);
	bool started = c->started;
	c->started = false;
	pthread_mutex_unlock(&c->lock);
	if (started)
		pthread_join(c->thread, NULL);
	free(c->fds);
	c->fds = NULL;
	c->n = c->cap = 0;
}

/* T's events stop writing now and go to the closer; its ring goes.  */
static void close_thread(struct cp_heap_uprobes *u, struct uthread *t)
{
	for (size_t i = 0; i < t->nfds; i++)
		ioctl(t->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	if (t->ring)
		munmap(t->ring, t->ring_bytes);
	if (t->nfds)
		epoll_ctl(u->epfd, EPOLL_CTL_DEL, t->fds[0], NULL);
	for (size_t i = 0; i < t->nfds; i++)
		closer_push(&u->closer, t->fds[i]);
	t->ring = NULL;
	t->nfds = 0;
}

/* Open every site's event on thread T->tid into one ring of
 * T->ring_data bytes (less when locked memory is short).
 * Returns 0 or -CP_E_SYS (nothing left open; errno kept).  */
static int open_events(struct cp_heap *h, struct uthread *t)
{
	struct cp_heap_uprobes *u = h->uprobes;
	struct rlimit files;
	bool limit = getrlimit(RLIMIT_NOFILE, &files) == 0 &&
		     files.rlim_cur != RLIM_INFINITY;
	const uint32_t copy = ENTRY_COPY;
	t->nfds = 0;
	for (size_t i = 0; i < u->nuevents; i++) {
		int fd = open_uevent(u, &u->uevents[i], t->tid, t->ring_data);
		if (fd >= 0 && limit && (rlim_t)fd + FD_RESERVE >= files.rlim_cur) {
			close(fd);
			fd = -1;
			errno = EMFILE;
		}
		if (fd < 0)
			goto fail;
		t->fds[t->nfds++] = fd;
		if (ioctl(fd, PERF_EVENT_IOC_ID, &t->ids[i]) < 0)
			goto fail;
		if (i == 0) {
			void *ring = MAP_FAILED;
			while (ring == MAP_FAILED && t->ring_data >= RING_LEAST &&
			       t->ring_data >= 2 * (copy + 512)) {
				t->ring_bytes = page_size() + t->ring_data;
				ring = mmap(NULL, t->ring_bytes,
					    PROT_READ | PROT_WRITE, MAP_SHARED,
					    fd, 0);
				if (ring == MAP_FAILED)
					t->ring_data /= 2;
			}
			if (ring == MAP_FAILED)
				goto fail;
			t->ring = ring;
		} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, t->fds[0]) < 0) {
			goto fail;
		}
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)t->tid};
	if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, t->fds[0], &ev) < 0)
		goto fail;
	return 0;
fail:;
	int saved = errno;
	close_thread(u, t);
	errno = saved;
	return -CP_E_SYS;
}

static int open_thread(struct cp_heap *h, pid_t tid)
{
	struct cp_heap_uprobes *u = h->uprobes;
	if (!cp_grow_zeroed((void **)&u->threads, &u->threads_cap,
			    u->nthreads + 1, sizeof(*u->threads), 16))
		return -CP_E_NOMEM;
	struct uthread *t = &u->threads[u->nthreads];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->ring_data = RING_DATA;
	int rc = open_events(h, t);
	if (rc == 0)
		u->nthreads++;
	return rc;
}

/* Every thread's events, the epoll and the signalfd.  */
static void close_all(struct cp_heap_uprobes *u)
{
	for (size_t i = 0; i < u->nthreads; i++)
		close_thread(u, &u->threads[i]);
	u->nthreads = 0;
	if (u->sigfd >= 0)
		close(u->sigfd);
	if (u->epfd >= 0)
		close(u->epfd);
	u->sigfd = u->epfd = -1;
}

/* The site SITE's place in the file it is mapped from.  */
static int place_site(struct cp_heap *h, const struct cp_maps *maps,
		      struct site *s, uint64_t addr)
{
	const struct cp_map *m = cp_maps_find(maps, addr);
	if (!m || !m->executable || m->path[0] != '/')
		return -CP_E_NOALLOC;
	s->addr = addr;
	s->offset = addr - m->start + m->offset;
	snprintf(s->path, sizeof(s->path), "/proc/%d/map_files/%llx-%llx",
		 (int)h->pid, (unsigned long long)m->start,
		 (unsigned long long)m->end);
	return 0;
}

/* The events of U's sites: by tracefs when it is there, the sites of
 * one kind and copy in one event (one grace period to close it, for all
 * threads), or one each when the kernel does not append probes; else one
 * event of the uprobe PMU each.  */
static void define_uevents(struct cp_heap_uprobes *u)
{
	const char *paths[MAX_SITES];
	uint64_t offsets[MAX_SITES];
	bool rets[MAX_SITES];
	unsigned events[MAX_SITES];
	for (int shared = 1; shared >= 0; shared--) {
		u->nuevents = 0;
		for (size_t i = 0; i < u->nsites; i++) {
			struct site *s = &u->sites[i];
			size_t k = 0;
			while (shared && k < u->nuevents &&
			       (u->uevents[k].ret != s->ret ||
				u->uevents[k].copy != s->copy))
				k++;
			if (!shared || k == u->nuevents) {
				k = u->nuevents++;
				u->uevents[k] = (struct uevent){
					.ret = s->ret, .copy = s->copy,
					.site = i };
			}
			u->uevents[k].nsites++;
			s->event = (unsigned)k;
			paths[i] = s->path;
			offsets[i] = s->offset;
			rets[i] = s->ret;
			events[i] = s->event;
		}
		if (cp_tracefs_probes_define(&u->defs, u->nsites, paths,
					     offsets, rets, events) == 0) {
			for (size_t k = 0; k < u->nuevents; k++)
				u->uevents[k].tp_id = u->defs.ids[k];
			return;
		}
	}
}

int cp_heap_uprobes_arm(struct cp_heap *h, const struct cp_heap_found *found)
{
	struct cp_heap_uprobes *u = h->uprobes;
	struct cp_maps *maps = NULL;
	int rc = cp_maps_read(h->pid, &maps);
	if (rc < 0)
		return rc;
	u->nsites = 0;
	uint64_t seen[CP_HEAP_MAX_ENTRIES];
	size_t nseen = 0;
	for (size_t f = 0; f < h->nentries && rc == 0; f++) {
		if (!found[f].addr)
			continue;
		bool alias = false;
		for (size_t i = 0; i < nseen; i++)
			alias |= seen[i] == found[f].addr;
		if (alias)
			continue; /* counted under the first name, as traps */
		seen[nseen++] = found[f].addr;
		const struct cp_heap_entry *e = &h->entries[f];
		struct site *s = &u->sites[u->nsites];
		s->row = (uint32_t)f;
		s->ret = false;
		s->copy = e->result == CP_HEAP_RESULT_NONE ? FREE_COPY
							    : ENTRY_COPY;
		rc = place_site(h, maps, s, found[f].addr);
		if (rc < 0)
			break;
		u->nsites++;
		if (e->result != CP_HEAP_RESULT_NONE) {
			struct site *r = &u->sites[u->nsites++];
			*r = *s;
			r->ret = true;
			r->copy = e->result == CP_HEAP_RESULT_STORED
					  ? STORED_COPY : 0;
		}
	}
	cp_maps_free(maps);
	if (rc < 0 || !u->nsites)
		return rc < 0 ? rc : -CP_E_NOALLOC;
	define_uevents(u);
	u->epfd = epoll_create1(EPOLL_CLOEXEC);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	u->sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0};
	if (u->epfd < 0 || u->sigfd < 0 ||
	    epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->sigfd, &ev) < 0)
		goto fail;
	/* Every thread is probed at once, as an int3 is in for all of them
	 * at once: a block made by a thread probed first and freed by one
	 * not yet probed would stay live for ever.  Held for the moment
	 * their events take to open (a millisecond or two), unless they are
	 * already (launch mode: the one thread at the loader's trap).  */
	bool held = !cp_target_all_stopped(h->target) &&
		    cp_target_hold_all(h->target) == 0;
	size_t count = 0;
	struct cp_thread *threads = cp_target_threads(h->target, &count);
	pid_t *tids = calloc(count ? count : 1, sizeof(*tids));
	if (!tids) {
		if (held)
			cp_target_release_all(h->target);
		rc = -CP_E_NOMEM;
		goto fail;
	}
	for (size_t i = 0; i < count; i++)
		tids[i] = threads[i].tid;
	size_t opened = 0;
	for (size_t i = 0; i < count; i++) {
		rc = open_thread(h, tids[i]);
		if (rc == -CP_E_SYS && errno == ESRCH) {
			rc = 0;
			continue; /* gone meanwhile */
		}
		if (rc < 0)
			break;
		opened++;
	}
	free(tids);
	if (held)
		cp_target_release_all(h->target);
	if (rc >= 0 && !opened)
		rc = -CP_E_GONE;
	if (rc < 0)
		goto fail;
	u->armed = true;
	return 0;
fail:
	if (rc >= 0)
		rc = -CP_E_SYS;
	close_all(u);
	return rc;
}

static void take_ring(struct cp_heap *h, struct uthread *t);
static size_t ask_stops(struct cp_heap *h);

void cp_heap_uprobes_birth(struct cp_heap *h, pid_t tid)
{
	if (!cp_heap_uprobes_armed(h))
		return;
	int rc = open_thread(h, tid);
	/* Opening takes a millisecond or more (a ring's pages cleared and
	 * locked, the kernel's probes made): the other threads' records
	 * are taken now, not at the end of a batch of births.  */
	ask_stops(h);
	for (size_t i = 0; i < h->uprobes->nthreads; i++)
		take_ring(h, &h->uprobes->threads[i]);
	if (rc < 0) {
		/* Its allocations go untraced: said, and counted.  */
		h->s.threads_untraced++;
		if (h->o.warn) {
			char text[160];
			snprintf(text, sizeof(text),
				 "cannot probe the allocator in new thread %d: "
				 "%s; its allocations are not traced",
				 (int)tid, strerror(errno));
			h->o.warn(h->o.warn_arg, text);
		}
	}
}

/* ------------------------------------------------------ records */

static int queue(struct cp_heap_uprobes *u, const struct cp_heap_event *ev,
		 uint64_t caller)
{
	if (!cp_grow_zeroed((void **)&u->pending, &u->pending_cap,
			    u->npending + 1, sizeof(*u->pending), 256))
		return -CP_E_NOMEM;
	struct pending *p = &u->pending[u->npending++];
	p->ev = *ev;
	p->caller = caller;
	p->seq = u->seq++;
	return 0;
}

/* A copy's 8 bytes at target address ADDR, from stack pointer SP up.  */
static bool copy_u64(const struct cp_perf_sample *r, uint64_t sp, uint64_t addr,
		     uint64_t *v)
{
	if (addr < sp || addr - sp > r->stack_len || r->stack_len - (addr - sp) < 8)
		return false;
	memcpy(v, r->stack + (addr - sp), 8);
	return true;
}

static void on_entry(struct cp_heap *h, struct uthread *t,
		     const struct site *s, const struct cp_perf_sample *r,
		     const struct user_regs_struct *regs)
{
	const struct cp_heap_entry *e = &h->entries[s->row];
	struct heap_lane *l = &h->lane0;
	uint64_t sp = cp_regs_sp(regs);
	uint64_t ret = 0;
	copy_u64(r, sp, sp, &ret);
	if (t->depth && (sp > t->sp || (sp == t->sp && ret == t->ret))) {
		/* Above the outstanding call's frame, or a call from the
		 * same place again: that call is gone without a return we
		 * saw (longjmp, a record lost).  At the same stack pointer
		 * with another return address it is a tail call of it
		 * (glibc's realloc(NULL, n) jumps to malloc, its return
		 * address the kernel's trampoline by then), which returns
		 * with it.  */
		t->depth = 0;
		l->s.lost_returns++;
	}
	if (t->depth) {
		if (e->result != CP_HEAP_RESULT_NONE)
			t->depth++;
		return; /* the allocator's own call */
	}
	l->s.calls[s->row]++;
	if (e->kind == CP_HEAP_KIND_REALLOC)
		l->s.reallocs++;
	/* A free's event (its caller: its return address), or a realloc's
	 * release of its block, at the entry's time.  */
	struct cp_heap_event ev;
	if (cp_heap_entry_event(h, s->row, regs, t->tid, r->time_ns, &ev) &&
	    queue(h->uprobes, &ev, ev.kind == CP_HEAP_EV_FREE ? ret : 0) < 0)
		cp_heap_fail(h, -CP_E_NOMEM);
	if (e->result == CP_HEAP_RESULT_NONE)
		return;
	t->depth = 1;
	t->row = s->row;
	t->sp = sp;
	t->ret = ret;
	for (unsigned a = 0; a < CP_ABI_REG_ARGS; a++)
		t->args[a] = cp_abi_arg(regs, a);
	struct cp_snapshot snap = {
		.tid = t->tid,
		.regs = *regs,
		.stack = (unsigned char *)(uintptr_t)r->stack,
		.stack_len = r->stack_len,
		.stack_cap = r->stack_len,
		.stack_addr = sp,
		.copied_running = true,
	};
	bool ended = true;
	cp_heap_record_stack(l, &snap, &t->stack, &ended);
	/* The copy came full and the frames stop short of the outermost:
	 * the stack goes on beyond the copy.  */
	if (!ended && r->stack_len >= ENTRY_COPY)
		h->s.stacks_cut++;
}

static void on_return(struct cp_heap *h, struct uthread *t,
		      const struct site *s, const struct cp_perf_sample *r,
		      const struct user_regs_struct *regs)
{
	if (!t->depth)
		return; /* a call entered before we were there */
	if (--t->depth)
		return;
	const struct cp_heap_entry *e = &h->entries[t->row];
	(void)s;
	struct cp_heap_event ev = cp_heap_return_event(
		h, t->row, t->args, t->stack, t->tid, r->time_ns);
	uint64_t result = cp_abi_retval(regs);
	if (e->result == CP_HEAP_RESULT_STORED) {
		/* It returned 0 and stored the block's address: on the
		 * caller's stack as a rule, copied with the return;
		 * elsewhere read now.  */
		uint64_t out = cp_heap_call_arg(t->args, e->out_arg), ptr = 0;
		if (result == 0 && !copy_u64(r, cp_regs_sp(regs), out, &ptr) &&
		    !cp_heap_read_u64(h->pid, out, &ptr))
			ptr = 0;
		ev.addr = result == 0 ? ptr : 0;
	} else {
		ev.addr = result;
	}
	if (queue(h->uprobes, &ev, 0) < 0)
		cp_heap_fail(h, -CP_E_NOMEM);
}

static void on_record(struct cp_heap *h, struct uthread *t,
		      const unsigned char *rec, size_t len)
{
	struct cp_perf_sample r;
	if (!rec || !cp_perf_sample_parse(rec, len, true, &r) || !r.regs)
		return;
	struct cp_heap_uprobes *u = h->uprobes;
	const struct uevent *e = NULL;
	for (size_t i = 0; i < t->nfds && !e; i++)
		if (t->ids[i] == r.id)
			e = &u->uevents[i];
	if (!e)
		return;
	struct user_regs_struct regs;
	cp_regs_from_perf(r.regs, &regs);
	/* Which site: the entry point the thread is at (the kernel gives
	 * the probe's address); a return is the outstanding call's.  */
	const struct site *s = &u->sites[e->site];
	if (!e->ret && e->nsites > 1) {
		unsigned k = (unsigned)(e - u->uevents);
		uint64_t pc = cp_regs_pc(&regs);
		s = NULL;
		for (size_t i = e->site; i < u->nsites && !s; i++)
			if (u->sites[i].event == k && u->sites[i].addr == pc)
				s = &u->sites[i];
		if (!s)
			return;
	}
	if (s->ret)
		on_return(h, t, s, &r, &regs);
	else
		on_entry(h, t, s, &r, &regs);
}

/* One take of a thread's ring.  */
struct take {
	struct cp_heap *h;
	struct uthread *t;
};

static void take_record(void *arg, uint32_t type, const unsigned char *rec,
			size_t len)
{
	struct take *k = arg;
	struct cp_heap *h = k->h;
	struct cp_heap_uprobes *u = h->uprobes;
	if (type == PERF_RECORD_SAMPLE) {
		on_record(h, k->t, rec, len);
		/* Taking is slower than writing when stacks are unwound
		 * afresh: the other rings are watched as this one is
		 * taken.  */
		if (u->taking && ++u->since_watch >= WATCH_EVERY) {
			u->since_watch = 0;
			ask_stops(h);
		}
	} else if (type == PERF_RECORD_LOST && rec) {
		h->s.events_lost += cp_perf_lost(rec, len);
		/* Which calls are in flight is not known any more.  */
		k->t->depth = 0;
	}
}

/* Take the records of T's ring.  */
static void take_ring(struct cp_heap *h, struct uthread *t)
{
	struct cp_heap_uprobes *u = h->uprobes;
	struct take k = {.h = h, .t = t};
	if (cp_perf_ring_take(t->ring, &u->scratch, &u->scratch_cap,
			      take_record, &k) < 0)
		cp_heap_fail(h, -CP_E_NOMEM);
}

static int by_time(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;
	if (x->ev.t_ns != y->ev.t_ns)
		return x->ev.t_ns < y->ev.t_ns ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hand the table the events older than BEFORE (all with 0), in the
 * order of their times.  */
static void emit_pending(struct cp_heap *h, uint64_t before)
{
	struct cp_heap_uprobes *u = h->uprobes;
	if (!u->npending)
		return;
	qsort(u->pending, u->npending, sizeof(*u->pending), by_time);
	size_t n = 0;
	while (n < u->npending && (!before || u->pending[n].ev.t_ns < before))
		n++;
	pthread_mutex_lock(&h->lock);
	for (size_t i = 0; i < n; i++) {
		u->free_caller = u->pending[i].caller;
		h->free_sp = 0;
		int rc = cp_heaptable_add(h->table, &u->pending[i].ev);
		if (rc < 0)
			cp_heap_fail(h, rc);
		if (h->o.on_event)
			h->o.on_event(h->o.on_event_arg, &u->pending[i].ev);
	}
	u->free_caller = 0;
	pthread_mutex_unlock(&h->lock);
	memmove(u->pending, u->pending + n,
		(u->npending - n) * sizeof(*u->pending));
	u->npending -= n;
}

uint64_t cp_heap_uprobes_free_caller(const struct cp_heap *h)
{
	return h->uprobes ? h->uprobes->free_caller : 0;
}

/* Ask every thread whose ring is more than a sixteenth full to stop (no
 * wait), unless asked already.  Returns how many were asked.  */
static size_t ask_stops(struct cp_heap *h)
{
	struct cp_heap_uprobes *u = h->uprobes;
	size_t asked = 0;
	for (size_t i = 0; i < u->nthreads; i++) {
		struct uthread *t = &u->threads[i];
		struct perf_event_mmap_page *meta = t->ring;
		uint64_t fill = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) -
				meta->data_tail;
		if (!t->asked && fill > meta->data_size / THROTTLE_PART &&
		    cp_target_thread(h->target, t->tid) &&
		    cp_target_interrupt(h->target, t->tid) == 0) {
			t->asked = true;
			asked++;
		}
	}
	u->asked += asked;
	return asked;
}

/* The thread of TID's ring, or NULL.  */
static struct uthread *uthread_of(struct cp_heap_uprobes *u, pid_t tid)
{
	for (size_t i = 0; i < u->nthreads; i++)
		if (u->threads[i].tid == tid)
			return &u->threads[i];
	return NULL;
}

/* A thread we asked to stop is held: what it wrote before stopping is
 * taken, and it goes on.  */
static void on_stop(void *arg, pid_t tid)
{
	struct cp_heap *h = arg;
	struct cp_heap_uprobes *u = h->uprobes;
	struct uthread *t = uthread_of(u, tid);
	if (t) {
		take_ring(h, t);
		if (t->asked && u->asked)
			u->asked--;
		t->asked = false;
		h->s.threads_throttled++;
	}
	cp_target_resume(h->target, tid);
}

/* Take every ring.  A thread whose ring is found more than a sixteenth
 * full writes faster than we take: every such thread is asked to stop
 * first (no wait), the rings are taken meanwhile, and a thread that
 * stopped is held until what it wrote before stopping is taken too
 * (on_stop).  So a thread waits for the tracer as it would at a trap,
 * and the kernel need not drop a record.  */
static void take_all(struct cp_heap *h, bool final)
{
	struct cp_heap_uprobes *u = h->uprobes;
	uint64_t pass = now_ns();
	u->taking = !final;
	if (!final)
		ask_stops(h);
	for (size_t i = 0; i < u->nthreads; i++)
		take_ring(h, &u->threads[i]);
	u->taking = false;
	/* The threads asked to stop are served as their stops come (a
	 * thread waiting for a CPU stops only once it gets one: waiting for
	 * it here would leave the others' rings untaken).  Not at the end:
	 * the threads are held (or at an exec stop, inside the target's
	 * dispatch), and a thread served would be let go.  */
	if (!final)
		cp_target_serve(h->target, 0, on_stop, h);
	/* Threads gone: their rings were taken, their events go.  */
	for (size_t i = 0; !final && i < u->nthreads;) {
		if (cp_target_thread(h->target, u->threads[i].tid)) {
			i++;
			continue;
		}
		take_ring(h, &u->threads[i]);
		close_thread(u, &u->threads[i]);
		u->threads[i] = u->threads[--u->nthreads];
	}
	emit_pending(h, final ? 0 : (pass > HOLDBACK_NS ? pass - HOLDBACK_NS : 1));
}

void cp_heap_uprobes_on_exit(void *arg, pid_t tid)
{
	struct heap_lane *l = arg;
	struct cp_heap *h = l->heap;
	(void)tid;
	if (!cp_heap_uprobes_armed(h))
		return;
	/* Called from inside the target's dispatch: rings are taken, no
	 * stop is asked for or served here.  */
	for (size_t i = 0; i < h->uprobes->nthreads; i++)
		take_ring(h, &h->uprobes->threads[i]);
}

int cp_heap_uprobes_run(struct cp_heap *h, uint64_t deadline,
			volatile sig_atomic_t *stop, bool *stopped)
{
	struct cp_heap_uprobes *u = h->uprobes;
	/* SIGCHLD (a ptrace event: a thread born, an exit, an exec) comes
	 * through the signalfd.  */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &old);
	*stopped = false;
	int rc = 0;
	while (cp_heap_phase(h) == TRACING) {
		if (cp_heap_run_over(h, stop, deadline, stopped))
			break;
		uint64_t now = now_ns();
		int wait_ms = PASS_MS;
		if (deadline > now && (deadline - now) / 1000000 < (uint64_t)wait_ms)
			wait_ms = (int)((deadline - now) / 1000000) + 1;
		struct epoll_event evs[16];
		int n = epoll_wait(u->epfd, evs, 16, wait_ms);
		for (int i = 0; i < n; i++)
			if (evs[i].data.u32 == 0) {
				struct signalfd_siginfo si;
				while (read(u->sigfd, &si, sizeof(si)) > 0)
					;
			}
		cp_target_serve(h->target, 0, on_stop, h);
		cp_heap_trap_run_steps(h);
		if (cp_heap_phase(h) != TRACING)
			break;
		take_all(h, false);
		pthread_mutex_lock(&h->lock);
		cp_resolver_collect(h->resolver);
		pthread_mutex_unlock(&h->lock);
		if (h->error) {
			rc = h->error;
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void cp_heap_uprobes_end(struct cp_heap *h)
{
	struct cp_heap_uprobes *u = h->uprobes;
	if (!u || !u->armed)
		return;
	take_all(h, true);
	/* No record from now on; closing (slow: see heap.h) comes after the
	 * threads run again, from cp_heap_uprobes_close.  */
	for (size_t i = 0; i < u->nthreads; i++)
		for (size_t f = 0; f < u->threads[i].nfds; f++)
			ioctl(u->threads[i].fds[f], PERF_EVENT_IOC_DISABLE, 0);
	u->armed = false;
}

void cp_heap_uprobes_close(struct cp_heap *h)
{
	struct cp_heap_uprobes *u = h->uprobes;
	if (!u)
		return;
	close_all(u);
	closer_join(&u->closer);
	cp_tracefs_probes_remove(&u->defs);
}

void cp_heap_uprobes_free(struct cp_heap_uprobes *u)
{
	if (!u)
		return;
	close_all(u);
	closer_join(&u->closer);
	cp_tracefs_probes_remove(&u->defs);
	pthread_mutex_destroy(&u->closer.lock);
	pthread_cond_destroy(&u->closer.cond);
	free(u->threads);
	free(u->pending);
	free(u->scratch);
	free(u);
}
