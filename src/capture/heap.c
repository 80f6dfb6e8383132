/* Heap mode: allocator breakpoints, allocation events and the heap table.
 * See include/cprof/heap.h for the method.  */
#include "cprof/heap.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/insn.h"
#include "cprof/procfs.h"
#include "cprof/tpath.h"
#include "symbolize/resolver.h"

#define INT3 0xcc
#define RET 0xc3
#define TIMELINE_SPANS 1024           /* spans of the timeline at most */
#define FIRST_SPAN_NS 1000000ull      /* 1 ms each, doubled when full */

static const char *const fn_names[CP_HEAP_NFN] = {
	"malloc", "calloc", "realloc", "reallocarray", "free",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
};

const char *cp_heap_fn_name(enum cp_heap_fn fn)
{
	return (unsigned)fn < CP_HEAP_NFN ? fn_names[fn] : "?";
}

int cp_heap_metric_parse(const char *name)
{
	static const char *const names[] = { "live-bytes", "alloc-bytes",
					     "live-count", "alloc-count" };
	for (int i = 0; i < 4; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* One int3 of ours.  */
struct breakpoint {
	uint64_t addr;
	uint8_t orig[CP_INSN_MAX]; /* the code bytes before we wrote */
	struct cp_insn insn;       /* the displaced instruction */
	bool emulate;              /* else: step it with all threads held */
	bool inserted;
	enum cp_heap_fn fn;
};

/* What we know of one thread.  */
struct tstate {
	pid_t tid;
	bool in_call;         /* an outermost call whose return we await */
	enum cp_heap_fn fn;
	uint64_t slot;        /* stack address of its return address */
	uint64_t ret;         /* the real return address */
	uint64_t fake;        /* what we wrote there: the entry address */
	uint64_t args[3];
	uint32_t stack;       /* the call's stack id */
	uint64_t events;      /* its allocations and releases of blocks */
};

/* One block: live, or freed and not yet born again (so that a second
 * free of it is told from a free of a block born before we attached).  */
struct block {
	uint64_t ptr;         /* 0: empty slot */
	bool live;
	uint64_t size;
	uint64_t t_ns;
	uint64_t seq;         /* its thread's events when born */
	uint32_t stack;
	pid_t tid;
};

enum phase { WAIT_EXEC, WAIT_ENTRY, TRACING, DONE };

struct cp_heap {
	struct cp_target *target;
	pid_t pid;
	struct cp_unwinder *unwinder;
	struct cp_profile *profile;
	struct cp_resolver *resolver;
	struct cp_heap_options o;
	enum phase phase;
	struct breakpoint bps[CP_HEAP_NFN];
	size_t nbps;
	struct breakpoint entry;  /* launch mode: at the program's entry */
	struct breakpoint loader; /* at the dynamic linker's r_brk */
	uint64_t r_debug;         /* its struct r_debug, 0 when unknown */
	struct cp_symbols *symbols;
	char where[256];          /* modules the breakpoints are in */
	uint64_t alloc_lo, alloc_hi; /* the file mapping free() is in */
	uint64_t free_rsp;        /* stack pointer at the free being handled */
	struct tstate *threads;
	size_t nthreads, threads_cap;
	struct block *blocks;     /* open addressing, linear probing */
	size_t blocks_cap, nblocks;
	size_t nfreed;            /* entries of freed blocks */
	struct cp_heap_site *sites;
	size_t sites_cap;
	struct cp_heap_point *points; /* TIMELINE_SPANS, the highest of each */
	size_t npoints;
	uint64_t span_ns;         /* time each point covers */
	uint64_t level_bytes, level_count; /* live when last noted */
	uint64_t t0_ns;
	pid_t *steps;             /* threads held for a fallback step */
	size_t nsteps, steps_cap;
	struct cp_snapshot snap;
	uint64_t *pcs;
	uint32_t *locs;
	int error;                /* first internal failure */
	struct cp_heap_summary s;
};

static bool read_u64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return cp_target_read(pid, addr, v, sizeof(*v)) == (ssize_t)sizeof(*v);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool grow(void **items, size_t size, size_t need, size_t *cap)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	void *p = realloc(*items, n * size);
	if (!p)
		return false;
	memset((char *)p + *cap * size, 0, (n - *cap) * size);
	*items = p;
	*cap = n;
	return true;
}

/* ------------------------------------------------------ live blocks */

static size_t block_hash(uint64_t ptr, size_t cap)
{
	ptr ^= ptr >> 33;
	ptr *= 0xff51afd7ed558ccdULL;
	ptr ^= ptr >> 33;
	return (size_t)ptr & (cap - 1);
}

static struct block *block_find(struct cp_heap *h, uint64_t ptr)
{
	if (!h->blocks_cap)
		return NULL;
	for (size_t i = block_hash(ptr, h->blocks_cap);;
	     i = (i + 1) & (h->blocks_cap - 1)) {
		if (h->blocks[i].ptr == ptr)
			return &h->blocks[i];
		if (h->blocks[i].ptr == 0)
			return NULL;
	}
}

/* Freed entries kept at most (beyond 4 per live block): 24 MB.  */
#define FREED_KEPT (1u << 20)

/* Rehash into a table of CAP slots; KEEP_FREED false drops the entries
 * of freed blocks.  */
static bool blocks_rebuild(struct cp_heap *h, size_t cap, bool keep_freed)
{
	size_t old_cap = h->blocks_cap;
	struct block *old = h->blocks;
	struct block *fresh = calloc(cap, sizeof(*fresh));
	if (!fresh)
		return false;
	h->blocks = fresh;
	h->blocks_cap = cap;
	h->nblocks = 0;
	h->nfreed = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].ptr || (!old[i].live && !keep_freed))
			continue;
		h->nfreed += !old[i].live;
		size_t j = block_hash(old[i].ptr, cap);
		while (fresh[j].ptr)
			j = (j + 1) & (cap - 1);
		fresh[j] = old[i];
		h->nblocks++;
	}
	free(old);
	return true;
}

static bool block_insert(struct cp_heap *h, const struct block *b)
{
	if ((h->nblocks + 1) * 2 > h->blocks_cap) {
		/* Full: double, or drop the freed entries once they are
		 * many (a free of a dropped one then reads "untracked").  */
		size_t live = h->nblocks - h->nfreed;
		bool keep = h->nfreed < FREED_KEPT || h->nfreed < 4 * live;
		size_t cap = h->blocks_cap ? h->blocks_cap : 1024;
		if (keep || (live + 1) * 4 > cap)
			cap *= 2;
		if (!blocks_rebuild(h, cap, keep))
			return false;
	}
	size_t i = block_hash(b->ptr, h->blocks_cap);
	while (h->blocks[i].ptr)
		i = (i + 1) & (h->blocks_cap - 1);
	h->blocks[i] = *b;
	h->nblocks++;
	return true;
}

/* ------------------------------------------------------ accounting */

static struct cp_heap_site *site(struct cp_heap *h, uint32_t stack)
{
	if (!grow((void **)&h->sites, sizeof(*h->sites), (size_t)stack + 1,
		  &h->sites_cap))
		return NULL;
	if ((size_t)stack + 1 > h->s.nsites)
		h->s.nsites = (size_t)stack + 1;
	h->sites[stack].stack = stack;
	return &h->sites[stack];
}

static struct tstate *tstate(struct cp_heap *h, pid_t tid, bool create)
{
	for (size_t i = 0; i < h->nthreads; i++)
		if (h->threads[i].tid == tid)
			return &h->threads[i];
	if (!create ||
	    !grow((void **)&h->threads, sizeof(*h->threads), h->nthreads + 1,
		  &h->threads_cap))
		return NULL;
	struct tstate *ts = &h->threads[h->nthreads++];
	memset(ts, 0, sizeof(*ts));
	ts->tid = tid;
	return ts;
}

static void fail(struct cp_heap *h, int rc)
{
	if (!h->error)
		h->error = rc;
}

/* The timeline: live bytes recorded at every change, kept as the highest
 * of each span of time (1 ms at first); when TIMELINE_SPANS spans are not
 * enough, neighbours merge into spans twice as long, each keeping the
 * higher.  So whatever the length of the run the timeline holds the peak
 * exactly, and a point is never a sample that may have missed it.  */
static void merge_spans(struct cp_heap *h)
{
	size_t n = (h->npoints + 1) / 2;
	h->span_ns *= 2;
	for (size_t i = 0; i < n; i++) {
		struct cp_heap_point a = h->points[2 * i];
		if (2 * i + 1 < h->npoints &&
		    h->points[2 * i + 1].live_bytes > a.live_bytes)
			a = h->points[2 * i + 1];
		a.t = (double)(i * h->span_ns) / 1e9;
		h->points[i] = a;
	}
	h->npoints = n;
}

/* Live bytes may have changed at NOW: note them.  */
static void note_live(struct cp_heap *h, uint64_t now)
{
	if (!h->points || !h->t0_ns)
		return;
	uint64_t at = now > h->t0_ns ? now - h->t0_ns : 0;
	while (at / h->span_ns >= TIMELINE_SPANS)
		merge_spans(h);
	size_t i = (size_t)(at / h->span_ns);
	/* Spans without a change held the level noted last.  */
	while (h->npoints <= i) {
		struct cp_heap_point *p = &h->points[h->npoints];
		p->t = (double)(h->npoints * h->span_ns) / 1e9;
		p->live_bytes = h->level_bytes;
		p->live_count = h->level_count;
		h->npoints++;
	}
	struct cp_heap_point *p = &h->points[i];
	if (h->s.live_bytes > p->live_bytes) {
		p->live_bytes = h->s.live_bytes;
		p->live_count = h->s.live_count;
	}
	h->level_bytes = h->s.live_bytes;
	h->level_count = h->s.live_count;
}

static unsigned size_bucket(uint64_t size)
{
	return size ? 64u - (unsigned)__builtin_clzll(size) : 0u;
}

/* Take the live block B out of the live totals.  */
static void unlive(struct cp_heap *h, struct block *b)
{
	struct cp_heap_site *st = site(h, b->stack);
	if (st) {
		st->live_count--;
		st->live_bytes -= b->size;
	}
	h->s.live_count--;
	h->s.live_bytes -= b->size;
	b->live = false;
	h->nfreed++;
}

static void on_alloc(struct cp_heap *h, struct tstate *ts, uint64_t ptr,
		     uint64_t size, uint64_t now)
{
	if (!ptr) {
		h->s.failed++;
		return;
	}
	struct block b = { ptr, true, size, now, ++ts->events, ts->stack,
			   ts->tid };
	struct cp_heap_site *st = site(h, ts->stack);
	struct block *slot = block_find(h, ptr);
	if (slot && slot->live) {
		/* Born twice: its free was not seen (a free by a vfork
		 * child).  Forget the old one.  */
		unlive(h, slot);
	}
	if (slot) {
		*slot = b;
		h->nfreed--;
	} else if (!block_insert(h, &b)) {
		st = NULL;
	}
	if (!st) {
		fail(h, -CP_E_NOMEM);
		return;
	}
	st->alloc_count++;
	st->alloc_bytes += size;
	st->live_count++;
	st->live_bytes += size;
	h->s.allocations++;
	h->s.alloc_bytes += size;
	h->s.live_count++;
	h->s.live_bytes += size;
	h->s.sizes[size_bucket(size)]++;
	if (h->s.live_bytes > h->s.peak_bytes) {
		h->s.peak_bytes = h->s.live_bytes;
		h->s.peak_t = (double)(now - h->t0_ns) / 1e9;
	}
	note_live(h, now);
}

/* A block goes away in thread TS: free() called from CALLER (0 when
 * unknown), or the old block of a realloc.  */
static void on_release(struct cp_heap *h, struct tstate *ts, uint64_t ptr,
		       uint64_t now, bool is_free, uint64_t caller)
{
	if (!ptr) {
		if (is_free)
			h->s.null_frees++;
		return;
	}
	struct block *b = block_find(h, ptr);
	if (!b || !b->live) {
		if (!is_free)
			return;
		if (caller == 0 && h->alloc_hi)
			read_u64(h->pid, h->free_rsp, &caller);
		if (caller >= h->alloc_lo && caller < h->alloc_hi)
			/* The allocator's own code freeing what it keeps
			 * (glibc frees each thread's tcache entries when the
			 * thread exits): not the program's.  */
			h->s.internal_frees++;
		else if (!b)
			h->s.untracked_frees++; /* born before we attached */
		else
			h->s.repeat_frees++;    /* freed twice */
		return;
	}
	if (is_free)
		h->s.frees++;
	else
		h->s.realloc_releases++;
	/* Temporary, by heaptrack's definition (a block whose release is
	 * the next allocator event after its birth: free or realloc), per
	 * thread so that no timing changes it: released by the thread that
	 * allocated it, which allocated or released nothing in between.  */
	if (b->tid == ts->tid && b->seq == ts->events)
		h->s.temporary++;
	ts->events++;
	unlive(h, b);
	note_live(h, now);
}

/* The outermost call of TS returned RESULT.  */
static void on_return(struct cp_heap *h, struct tstate *ts, uint64_t result)
{
	uint64_t now = now_ns();
	uint64_t *a = ts->args;
	switch (ts->fn) {
	case CP_HEAP_MALLOC:
	case CP_HEAP_VALLOC:
		on_alloc(h, ts, result, a[0], now);
		break;
	case CP_HEAP_PVALLOC:
		on_alloc(h, ts, result, (a[0] + 4095) & ~4095ull, now);
		break;
	case CP_HEAP_CALLOC:
		on_alloc(h, ts, result, a[0] * a[1], now);
		break;
	case CP_HEAP_ALIGNED_ALLOC:
	case CP_HEAP_MEMALIGN:
		on_alloc(h, ts, result, a[1], now);
		break;
	case CP_HEAP_POSIX_MEMALIGN: {
		uint64_t ptr = 0;
		if (result == 0 &&
		    cp_target_read(h->pid, a[0], &ptr, sizeof(ptr)) !=
			    (ssize_t)sizeof(ptr))
			ptr = 0;
		on_alloc(h, ts, result == 0 ? ptr : 0, a[2], now);
		break;
	}
	case CP_HEAP_REALLOC:
	case CP_HEAP_REALLOCARRAY: {
		uint64_t size = ts->fn == CP_HEAP_REALLOC ? a[1] : a[1] * a[2];
		if (result) {
			on_release(h, ts, a[0], now, false, 0);
			on_alloc(h, ts, result, size, now);
		} else if (size == 0 && a[0]) {
			/* realloc(p, 0) freed P.  */
			on_release(h, ts, a[0], now, false, 0);
		} else {
			h->s.failed++;
		}
		break;
	}
	default:
		break;
	}
}

/* ------------------------------------------------------ breakpoints */

static struct breakpoint *find_bp(struct cp_heap *h, uint64_t addr)
{
	for (size_t i = 0; i < h->nbps; i++)
		if (h->bps[i].addr == addr && h->bps[i].inserted)
			return &h->bps[i];
	return NULL;
}

static int insert_bp(struct cp_heap *h, struct breakpoint *bp)
{
	uint8_t int3 = INT3, check = 0;
	if (cp_target_write_mem(h->pid, bp->addr, &int3, 1) < 0 ||
	    cp_target_read_mem(h->pid, bp->addr, &check, 1) < 0 ||
	    check != INT3)
		return -CP_E_SYS;
	bp->inserted = true;
	return 0;
}

/* Put back the original byte of BP in process PID and check it.  */
static int restore_bp(pid_t pid, const struct breakpoint *bp)
{
	uint8_t check = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (cp_target_write_mem(pid, bp->addr, bp->orig, 1) == 0 &&
		    cp_target_read_mem(pid, bp->addr, &check, 1) == 0 &&
		    check == bp->orig[0])
			return 0;
	}
	return -CP_E_SYS;
}

static int mem_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct cp_heap *h = arg;
	return cp_target_read(h->pid, addr, buf, len) == (ssize_t)len ? 0 : -1;
}

static int mem_write(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct cp_heap *h = arg;
	return cp_target_write(h->pid, addr, buf, len) == 0 ? 0 : -1;
}

/* Run BP's displaced instruction at PC on REGS.  Returns 0 or -1.  */
static int emulate(struct cp_heap *h, const struct breakpoint *bp,
		   uint64_t pc, struct user_regs_struct *regs)
{
	if (bp->orig[0] == RET) {
		uint64_t ret;
		if (!read_u64(h->pid, regs->rsp, &ret))
			return -1;
		regs->rip = ret;
		regs->rsp += 8;
		return 0;
	}
	return cp_insn_emulate(&bp->insn, pc, regs, mem_read, mem_write, h) < 0
		       ? -1
		       : 0;
}

/* ------------------------------------------------------ allocator lookup */

struct module {
	char name[128];    /* basename, for messages */
	uint64_t bias;     /* load bias (link_map l_addr) */
	uint64_t inside;   /* an address in one of its file mappings (its
			    * dynamic section), 0 for the executable */
};

/* Open the file process PID has mapped at ADDR, the way every file of the
 * target is opened (cprof/tpath.h): the mapping itself through
 * /proc/PID/map_files, or without the privilege for that its path in the
 * target's root by the target's rules, and only while that path is still
 * the inode mapped.  The names the link map gives are the target's to
 * write and are never opened.  MAPS: PID's mappings, read here when
 * NULL.  Returns a descriptor or -1.  */
static int open_mapped(pid_t pid, const struct cp_maps *maps, uint64_t addr)
{
	struct cp_maps *read_here = NULL;
	if (!maps) {
		if (cp_maps_read(pid, &read_here) < 0)
			return -1;
		maps = read_here;
	}
	int fd = -1;
	const struct cp_map *m = cp_maps_find(maps, addr);
	if (m && m->path[0] == '/') {
		fd = cp_tpath_open_mapped(pid, m->start, m->end, NULL, NULL);
		if (fd == -CP_E_SYS) {
			struct cp_tpath_creds creds;
			struct stat st;
			fd = -1;
			if (cp_tpath_creds_read(pid, &creds) == 0)
				fd = cp_tpath_open(pid, m->path,
						   CP_TPATH_IN_ROOT |
							   CP_TPATH_NOFOLLOW |
							   CP_TPATH_READABLE,
						   &creds, &st, NULL);
			if (fd >= 0 && (uint64_t)st.st_ino != m->inode) {
				close(fd);
				fd = -1;
			}
		}
	}
	cp_maps_free(read_here);
	return fd < 0 ? -1 : fd;
}

/* Open module M of process PID: the executable through /proc/PID/exe
 * (the kernel's link to the file it runs), a library by its mapping in
 * MAPS.  */
static int open_module(pid_t pid, const struct cp_maps *maps,
		       const struct module *m)
{
	if (m->inside)
		return maps ? open_mapped(pid, maps, m->inside) : -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* The executable's load bias and the run-time address of its dynamic
 * section (0 when static).  */
static int exe_layout(pid_t pid, uint64_t *bias, uint64_t *dynamic)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -CP_E_SYS;
	int rc = -CP_E_PARSE;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t nph;
	if (!elf || !gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nph) < 0)
		goto out;
	uint64_t phdr_vaddr = 0, dyn_vaddr = 0;
	bool have_phdr = false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_PHDR) {
			phdr_vaddr = ph.p_vaddr;
			have_phdr = true;
		} else if (ph.p_type == PT_LOAD && ph.p_offset == 0 &&
			   !have_phdr) {
			phdr_vaddr = ph.p_vaddr + eh.e_phoff;
			have_phdr = true;
		} else if (ph.p_type == PT_DYNAMIC) {
			dyn_vaddr = ph.p_vaddr;
		}
	}
	uint64_t at_phdr = cp_procfs_auxv(pid, AT_PHDR);
	if (!have_phdr || !at_phdr)
		goto out;
	*bias = at_phdr - phdr_vaddr;
	*dynamic = dyn_vaddr ? *bias + dyn_vaddr : 0;
	rc = 0;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

/* The address of the dynamic linker's struct r_debug, from the
 * executable's DT_DEBUG (0 when static or not yet filled in).  */
static uint64_t exe_r_debug(pid_t pid, uint64_t dynamic)
{
	uint64_t r_debug = 0;
	for (int i = 0; dynamic && i < 1024; i++) {
		uint64_t dyn[2];
		if (cp_target_read(pid, dynamic + 16 * (uint64_t)i, dyn,
				   sizeof(dyn)) != (ssize_t)sizeof(dyn) ||
		    dyn[0] == DT_NULL)
			break;
		if (dyn[0] == DT_DEBUG)
			r_debug = dyn[1];
	}
	return r_debug;
}

/* The modules in link-map order (the order the dynamic linker resolves
 * symbols in), or just the executable when there is no link map.
 * R_DEBUG: where the dynamic linker's struct r_debug is when known (0:
 * from the executable's DT_DEBUG); *R_DEBUG_OUT gets the one used.  */
static int list_modules(pid_t pid, uint64_t r_debug, struct module **out,
			size_t *n, uint64_t *r_debug_out)
{
	uint64_t bias = 0, dynamic = 0;
	int rc = exe_layout(pid, &bias, &dynamic);
	if (rc < 0)
		return rc;
	struct module *mods = NULL;
	size_t count = 0, cap = 0;
	if (!r_debug)
		r_debug = exe_r_debug(pid, dynamic);
	*r_debug_out = r_debug;
	uint64_t lm = 0;
	if (r_debug)
		read_u64(pid, r_debug + offsetof(struct r_debug, r_map), &lm);
	if (!lm) {
		/* Static, or the dynamic linker has not run: the executable
		 * alone.  */
		mods = calloc(1, sizeof(*mods));
		if (!mods)
			return -CP_E_NOMEM;
		snprintf(mods[0].name, sizeof(mods[0].name), "executable");
		mods[0].bias = bias;
		*out = mods;
		*n = 1;
		return 0;
	}
	for (int guard = 0; lm && guard < 4096; guard++) {
		/* struct link_map: l_addr, l_name, l_ld, l_next, l_prev.  */
		uint64_t l[4];
		if (cp_target_read(pid, lm, l, sizeof(l)) != (ssize_t)sizeof(l))
			break;
		char name[4096] = "";
		if (l[1]) {
			ssize_t got = cp_target_read(pid, l[1], name,
						     sizeof(name) - 1);
			name[got > 0 ? got : 0] = '\0';
			name[sizeof(name) - 1] = '\0';
		}
		if (!grow((void **)&mods, sizeof(*mods), count + 1, &cap)) {
			free(mods);
			return -CP_E_NOMEM;
		}
		struct module *m = &mods[count];
		if (count == 0 && name[0] == '\0') {
			snprintf(m->name, sizeof(m->name), "executable");
			m->bias = bias;
			m->inside = 0;
			count++;
		} else if (name[0] == '/' && l[2]) {
			/* The name is only for messages: the file is the one
			 * mapped where its dynamic section (l_ld) is.  */
			const char *base = strrchr(name, '/');
			snprintf(m->name, sizeof(m->name), "%s", base + 1);
			m->bias = l[0];
			m->inside = l[2];
			count++;
		}
		/* else the vDSO ("linux-vdso.so.1"): no file, no malloc.  */
		lm = l[3];
	}
	*out = mods;
	*n = count;
	return count ? 0 : -CP_E_NOALLOC;
}

/* Look in the ELF file FD for the functions named NAMES[0..N) that it
 * defines and exports (the static executable's .symtab too when
 * STATIC_EXE) and whose VALUES are still 0; fill those with the symbol
 * values plus BIAS and return how many were found.  DATA_TOO: objects
 * count as well as functions.  */
static size_t find_symbols(int fd, const char *const *names, size_t n,
			   uint64_t *values, uint64_t bias, bool static_exe,
			   bool data_too)
{
	size_t found = 0;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_DYNSYM &&
		    !(static_exe && sh.sh_type == SHT_SYMTAB))
			continue;
		/* Symbol versions: a hidden (non-default) version is not
		 * what a new link binds to.  */
		Elf_Data *versym = NULL;
		if (sh.sh_type == SHT_DYNSYM) {
			Elf_Scn *v = NULL;
			while ((v = elf_nextscn(elf, v))) {
				GElf_Shdr vh;
				if (gelf_getshdr(v, &vh) &&
				    vh.sh_type == SHT_GNU_versym)
					versym = elf_getdata(v, NULL);
			}
		}
		Elf_Data *data = elf_getdata(scn, NULL);
		size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; data && i < count; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(data, (int)i, &sym) ||
			    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
				continue;
			int type = GELF_ST_TYPE(sym.st_info);
			int bind = GELF_ST_BIND(sym.st_info);
			/* A static executable has one allocator, and in a
			 * static-pie glibc's malloc is a local symbol.  */
			bool local_ok = static_exe && sh.sh_type == SHT_SYMTAB;
			if ((type != STT_FUNC &&
			     !(data_too && type == STT_OBJECT)) ||
			    (bind != STB_GLOBAL && bind != STB_WEAK &&
			     !(local_ok && bind == STB_LOCAL)))
				continue;
			if (versym) {
				GElf_Versym vs;
				if (gelf_getversym(versym, (int)i, &vs) &&
				    (vs & 0x8000))
					continue;
			}
			const char *name =
				elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			for (size_t f = 0; f < n; f++)
				if (!values[f] && strcmp(name, names[f]) == 0) {
					values[f] = bias + sym.st_value;
					found++;
				}
		}
	}
	if (elf)
		elf_end(elf);
	return found;
}

/* Look for the traced functions module M of process PID defines and
 * exports and that no earlier module defined; fill ADDRS.  */
static void scan_module(pid_t pid, const struct cp_maps *maps,
			const struct module *m, uint64_t addrs[CP_HEAP_NFN],
			const char *where[CP_HEAP_NFN], bool static_exe)
{
	int fd = open_module(pid, maps, m);
	if (fd < 0)
		return;
	uint64_t found[CP_HEAP_NFN] = {0};
	for (int f = 0; f < CP_HEAP_NFN; f++)
		found[f] = addrs[f] ? 1 : 0; /* taken by an earlier module */
	find_symbols(fd, fn_names, CP_HEAP_NFN, found, m->bias, static_exe,
		     false);
	for (int f = 0; f < CP_HEAP_NFN; f++)
		if (!addrs[f] && found[f]) {
			addrs[f] = found[f];
			where[f] = m->name;
		}
	close(fd);
}

/* Launch mode: the dynamic linker is mapped at BASE and has not run.  Find
 * in its file the function it calls after each change of the link map
 * (_dl_debug_state, which glibc and musl export for debuggers: the r_brk
 * of struct r_debug, not yet filled in) and its struct r_debug.  Returns
 * 0 or -1.  */
static int loader_symbols(pid_t pid, uint64_t base, uint64_t *brk,
			  uint64_t *r_debug)
{
	static const char *const names[] = { "_dl_debug_state", "_r_debug" };
	uint64_t values[2] = {0, 0};
	int fd = open_mapped(pid, NULL, base);
	if (fd < 0)
		return -1;
	/* The loader is linked at 0 (ET_DYN): BASE is its bias.  */
	find_symbols(fd, names, 2, values, base, false, true);
	close(fd);
	*brk = values[0];
	*r_debug = values[1];
	return values[0] ? 0 : -1;
}

/* The breakpoint of ours at ADDR, the loader's included.  */
static struct breakpoint *any_bp(struct cp_heap *h, uint64_t addr)
{
	if (h->loader.inserted && h->loader.addr == addr)
		return &h->loader;
	return find_bp(h, addr);
}

/* Set the breakpoint on the dynamic linker's r_brk at ADDR: the function
 * it calls, empty, after every change of the link map, for debuggers to
 * break on (glibc's _dl_debug_state is a bare ret, emulated here).  Not
 * having it costs only the news of dlopen and dlclose.  */
static void set_loader_bp(struct cp_heap *h, uint64_t addr)
{
	struct breakpoint *bp = &h->loader;
	memset(bp, 0, sizeof(*bp));
	bp->addr = addr;
	bp->fn = CP_HEAP_NFN;
	if (cp_target_read_mem(h->pid, addr, bp->orig, sizeof(bp->orig)) < 0 ||
	    bp->orig[0] == INT3)
		return;
	bp->emulate = !h->o.force_step &&
		      (bp->orig[0] == RET ||
		       cp_insn_decode(bp->orig, sizeof(bp->orig), &bp->insn) ==
			       0);
	if (insert_bp(h, bp) < 0)
		restore_bp(h->pid, bp);
}

/* The target's mappings changed (tracing began; a dlopen or dlclose is
 * complete): the unwinder forgets what it cached of them, and the
 * symbolizer records them and opens the modules' files now, while the
 * target lives.  The names are looked up on another thread, and after the
 * detach: a short-lived target is gone by then, its /proc/PID/maps and
 * map_files with it.  */
static void mappings_changed(struct cp_heap *h)
{
	cp_unwinder_invalidate(h->unwinder);
	cp_symbols_capture(h->symbols);
}

/* Find the entry points and set the breakpoints.  */
static int arm(struct cp_heap *h)
{
	struct module *mods = NULL;
	size_t nmods = 0;
	int rc = list_modules(h->pid, h->r_debug, &mods, &nmods, &h->r_debug);
	if (rc < 0)
		return rc;
	uint64_t addrs[CP_HEAP_NFN] = {0};
	const char *where[CP_HEAP_NFN] = {0};
	elf_version(EV_CURRENT);
	struct cp_maps *mapped = NULL;
	cp_maps_read(h->pid, &mapped); /* NULL: only the executable is read */
	for (size_t i = 0; i < nmods; i++)
		scan_module(h->pid, mapped, &mods[i], addrs, where, nmods == 1);
	cp_maps_free(mapped);
	h->nbps = 0;
	h->where[0] = '\0';
	for (int f = 0; f < CP_HEAP_NFN; f++) {
		if (!addrs[f])
			continue;
		snprintf(h->s.module[f], sizeof(h->s.module[f]), "%s",
			 where[f]);
		h->s.traced[f] = true;
		if (find_bp(h, addrs[f])) {
			/* An alias (glibc's memalign is aligned_alloc): one
			 * breakpoint, counted under the first name.  */
			snprintf(h->s.module[f], sizeof(h->s.module[f]),
				 "alias of %s",
				 fn_names[find_bp(h, addrs[f])->fn]);
			continue;
		}
		struct breakpoint *bp = &h->bps[h->nbps];
		memset(bp, 0, sizeof(*bp));
		bp->addr = addrs[f];
		bp->fn = (enum cp_heap_fn)f;
		if (cp_target_read_mem(h->pid, bp->addr, bp->orig,
				       sizeof(bp->orig)) < 0) {
			rc = -CP_E_SYS;
			goto out;
		}
		if (bp->orig[0] == INT3) {
			/* Someone else's breakpoint (a debugger was here and
			 * died): leave this entry point alone.  */
			h->s.traced[f] = false;
			continue;
		}
		/* Not decodable: stepped instead (run_steps), which needs
		 * no decoding.  */
		bp->emulate = !h->o.force_step &&
			      cp_insn_decode(bp->orig, sizeof(bp->orig),
					     &bp->insn) == 0;
		rc = insert_bp(h, bp);
		if (rc < 0)
			goto out;
		h->nbps++;
		if (!strstr(h->where, where[f])) {
			size_t len = strlen(h->where);
			snprintf(h->where + len, sizeof(h->where) - len, "%s%s",
				 len ? ", " : "", where[f]);
		}
	}
	rc = h->nbps && h->s.traced[CP_HEAP_MALLOC] ? 0 : -CP_E_NOALLOC;
	struct cp_maps *maps = NULL;
	if (rc == 0 && addrs[CP_HEAP_FREE] && cp_maps_read(h->pid, &maps) == 0) {
		const struct cp_map *m = cp_maps_find(maps, addrs[CP_HEAP_FREE]);
		if (m) {
			h->alloc_lo = m->start;
			h->alloc_hi = m->end;
		}
		cp_maps_free(maps);
	}
	if (rc == 0) {
		h->phase = TRACING;
		h->t0_ns = now_ns();
		h->span_ns = FIRST_SPAN_NS;
		note_live(h, h->t0_ns);
		/* Attached: the loader's notifications tell us of dlopen and
		 * dlclose from now on.  */
		uint64_t brk = 0;
		if (!h->loader.inserted && h->r_debug &&
		    read_u64(h->pid, h->r_debug + offsetof(struct r_debug, r_brk),
			     &brk) && brk)
			set_loader_bp(h, brk);
		mappings_changed(h);
	}
out:
	if (rc < 0) {
		for (size_t i = 0; i < h->nbps + 1 && i < CP_HEAP_NFN; i++)
			if (h->bps[i].inserted) {
				restore_bp(h->pid, &h->bps[i]);
				h->bps[i].inserted = false;
			}
		h->nbps = 0;
	}
	free(mods);
	return rc;
}

/* ------------------------------------------------------ traps */

/* Unwind the copy taken at an outermost entry into a stack id: the
 * allocator's own frame is left out, the caller comes first.  */
static void record_stack(struct cp_heap *h, struct tstate *ts)
{
	size_t n = cp_unwinder_unwind(h->unwinder, &h->snap, h->pcs,
				      h->o.max_depth + 1);
	size_t first = n > 1 ? 1 : 0;
	size_t depth = 0;
	for (size_t i = first; i < n; i++) {
		uint32_t loc = cp_resolver_location(h->resolver, h->pcs[i]);
		if (loc == UINT32_MAX) {
			fail(h, -CP_E_NOMEM);
			return;
		}
		h->locs[depth++] = loc;
	}
	uint32_t stack = cp_profile_intern_stack(h->profile, h->locs, depth);
	if (stack == UINT32_MAX)
		fail(h, -CP_E_NOMEM);
	else
		ts->stack = stack;
}

static enum cp_target_trap entry_trap(struct cp_heap *h, pid_t tid,
				      struct user_regs_struct *regs,
				      bool hold)
{
	/* Launch mode: the program reached its entry point; every library
	 * it links is mapped, and main has not run.  */
	uint64_t pc = regs->rip - 1;
	if (restore_bp(h->pid, &h->entry) < 0) {
		fail(h, -CP_E_SYS);
		return CP_TRAP_HANDLED;
	}
	h->entry.inserted = false;
	regs->rip = pc;
	cp_target_set_regs(h->target, tid, regs);
	int rc = arm(h);
	if (rc < 0)
		fail(h, rc);
	cp_resolver_reset(h->resolver);
	cp_unwinder_invalidate(h->unwinder);
	if (!hold)
		cp_target_resume(h->target, tid);
	return CP_TRAP_HANDLED;
}

/* Let thread TID, stopped at BP's int3 with REGS, go on past the
 * displaced instruction: emulated, or queued for a step with every
 * thread held (run_steps).  */
static void pass_bp(struct cp_heap *h, pid_t tid, struct breakpoint *bp,
		    uint64_t pc, struct user_regs_struct *regs)
{
	if (!bp->emulate) {
		regs->rip = pc;
		cp_target_set_regs(h->target, tid, regs);
		if (!grow((void **)&h->steps, sizeof(*h->steps), h->nsteps + 1,
			  &h->steps_cap))
			fail(h, -CP_E_NOMEM);
		else
			h->steps[h->nsteps++] = tid;
		return;
	}
	if (emulate(h, bp, pc, regs) < 0) {
		regs->rip = pc;
		if (cp_target_set_regs(h->target, tid, regs) == 0)
			fail(h, -CP_E_SYS);
		return;
	}
	if (cp_target_set_regs(h->target, tid, regs) == 0)
		cp_target_resume(h->target, tid);
}

/* The dynamic linker's notification: the link map changed.  Launch mode,
 * before tracing: once it is consistent with the program's libraries
 * mapped (and none of their constructors run yet), the allocator is
 * there to be found.  */
static enum cp_target_trap loader_trap(struct cp_heap *h, pid_t tid,
				       struct user_regs_struct *regs,
				       bool hold)
{
	uint64_t pc = regs->rip - 1;
	if (hold) {
		regs->rip = pc;
		cp_target_set_regs(h->target, tid, regs);
		return CP_TRAP_HANDLED;
	}
	int32_t state = -1;
	if (h->r_debug &&
	    cp_target_read(h->pid, h->r_debug + offsetof(struct r_debug, r_state),
			   &state, sizeof(state)) != (ssize_t)sizeof(state))
		state = -1;
	if (state == RT_CONSISTENT && h->phase == WAIT_ENTRY) {
		int rc = arm(h);
		if (rc == 0 && h->entry.inserted) {
			if (restore_bp(h->pid, &h->entry) < 0)
				fail(h, -CP_E_SYS);
			h->entry.inserted = false;
		} else if (rc < 0 && rc != -CP_E_NOALLOC) {
			fail(h, rc); /* else: the entry point may do */
		}
	} else if (state == RT_CONSISTENT && h->phase == TRACING) {
		mappings_changed(h);
	}
	pass_bp(h, tid, &h->loader, pc, regs);
	return CP_TRAP_HANDLED;
}

static enum cp_target_trap on_trap(void *arg, pid_t tid, bool hold)
{
	struct cp_heap *h = arg;
	struct user_regs_struct regs;
	if (cp_target_get_regs(h->target, tid, &regs) < 0)
		return CP_TRAP_NOT_OURS;
	uint64_t pc = regs.rip - 1;
	if (h->entry.inserted && pc == h->entry.addr)
		return entry_trap(h, tid, &regs, hold);
	if (h->loader.inserted && pc == h->loader.addr)
		return loader_trap(h, tid, &regs, hold);
	struct breakpoint *bp = find_bp(h, pc);
	if (!bp)
		return CP_TRAP_NOT_OURS;
	struct tstate *ts = tstate(h, tid, true);
	if (!ts) {
		fail(h, -CP_E_NOMEM);
		return CP_TRAP_NOT_OURS;
	}
	if (ts->in_call && ts->fake == pc && regs.rsp == ts->slot + 8) {
		/* The return of the outermost call, into our int3.  */
		regs.rip = ts->ret;
		ts->in_call = false;
		if (cp_target_set_regs(h->target, tid, &regs) < 0)
			return CP_TRAP_HANDLED;
		if (!hold)
			cp_target_resume(h->target, tid);
		on_return(h, ts, regs.rax);
		return CP_TRAP_HANDLED;
	}
	if (hold) {
		/* Everything is being stopped: undo the trap; the call
		 * starts again after the original byte is back.  */
		regs.rip = pc;
		cp_target_set_regs(h->target, tid, &regs);
		return CP_TRAP_HANDLED;
	}
	struct cp_thread *th = cp_target_thread(h->target, tid);
	bool vfork_child = th && th->vfork_child;
	if (ts->in_call && regs.rsp > ts->slot) {
		/* Above the outstanding call's frame: that call is gone
		 * without returning through us (longjmp, a lost thread).
		 * At the same stack pointer it is a tail call of the
		 * outstanding call (glibc's realloc(NULL, n) jumps to
		 * malloc): part of it, and it returns through our slot.  */
		ts->in_call = false;
		h->s.lost_returns++;
	}
	bool outer = !ts->in_call && !vfork_child;
	bool want_stack = false;
	if (outer) {
		h->s.calls[bp->fn]++;
		if (bp->fn == CP_HEAP_FREE) {
			h->free_rsp = regs.rsp;
			on_release(h, ts, regs.rdi, now_ns(), true, 0);
		} else {
			if (bp->fn == CP_HEAP_REALLOC ||
			    bp->fn == CP_HEAP_REALLOCARRAY)
				h->s.reallocs++;
			/* Copy the stack for the unwinder, then send the
			 * return to our int3.  */
			h->snap.regs = regs;
			h->snap.regs.rip = pc;
			uint64_t ret = 0;
			if (cp_target_snapshot_stack(h->target, tid,
						     &h->snap) == 0 &&
			    regs.rsp >= h->snap.stack_addr &&
			    h->snap.stack_len >= 8 &&
			    regs.rsp - h->snap.stack_addr <=
				    h->snap.stack_len - 8)
				memcpy(&ret,
				       h->snap.stack +
					       (regs.rsp - h->snap.stack_addr),
				       8);
			else
				read_u64(h->pid, regs.rsp, &ret);
			uint64_t fake = pc;
			if (ret && cp_target_write(h->pid, regs.rsp, &fake,
						   8) == 0) {
				ts->in_call = true;
				ts->fn = bp->fn;
				ts->slot = regs.rsp;
				ts->ret = ret;
				ts->fake = fake;
				ts->args[0] = regs.rdi;
				ts->args[1] = regs.rsi;
				ts->args[2] = regs.rdx;
				want_stack = true;
			} else {
				h->s.lost_returns++;
			}
		}
	}
	if (!bp->emulate) {
		/* Step the original instruction with every thread held,
		 * from the main loop (not from inside this callback).  */
		regs.rip = pc;
		cp_target_set_regs(h->target, tid, &regs);
		if (!grow((void **)&h->steps, sizeof(*h->steps), h->nsteps + 1,
			  &h->steps_cap)) {
			fail(h, -CP_E_NOMEM);
		} else {
			h->steps[h->nsteps++] = tid;
		}
	} else {
		if (emulate(h, bp, pc, &regs) < 0) {
			/* Cannot continue it correctly: rewind so it runs the
			 * real instruction once we restore the byte.  */
			regs.rip = pc;
			if (cp_target_set_regs(h->target, tid, &regs) == 0)
				fail(h, -CP_E_SYS);
			return CP_TRAP_HANDLED;
		}
		/* A thread killed meanwhile (another thread's execve or
		 * exit_group) takes no registers: it is gone, nothing to
		 * continue, nothing failed.  */
		if (cp_target_set_regs(h->target, tid, &regs) < 0)
			return CP_TRAP_HANDLED;
		cp_target_resume(h->target, tid);
	}
	if (want_stack) {
		/* Once per thread: where its stack ends, so the next copies
		 * take exactly the used part (read after the resume).  */
		cp_target_learn_stack(h->target, tid, regs.rsp);
		record_stack(h, ts);
	}
	return CP_TRAP_HANDLED;
}

/* Run the queued fallback steps: every thread held, the original byte
 * back for one instruction, the int3 again.  */
static void run_steps(struct cp_heap *h)
{
	if (!h->nsteps)
		return;
	cp_target_hold_all(h->target);
	/* An execve while the threads were stopped replaced the image our
	 * breakpoints were in (phase DONE): the same addresses are other code
	 * now, and must not get our bytes.  Before tracing, in launch mode,
	 * the loader's breakpoint is stepped too.  */
	for (size_t i = 0; i < h->nsteps &&
			   (h->phase == TRACING || h->phase == WAIT_ENTRY);
	     i++) {
		pid_t tid = h->steps[i];
		struct user_regs_struct regs;
		if (cp_target_get_regs(h->target, tid, &regs) < 0)
			continue;
		struct breakpoint *bp = any_bp(h, regs.rip);
		if (!bp)
			continue;
		if (restore_bp(h->pid, bp) < 0) {
			fail(h, -CP_E_SYS);
			continue;
		}
		cp_target_step(h->target, tid);
		h->s.stepped++;
		if (insert_bp(h, bp) < 0)
			fail(h, -CP_E_SYS);
	}
	h->nsteps = 0;
	cp_target_release_all(h->target);
}

static void on_fork(void *arg, pid_t parent, pid_t child, bool vfork)
{
	struct cp_heap *h = arg;
	if (vfork) {
		h->s.vfork_children++;
		return;
	}
	h->s.fork_children++;
	/* The child's memory is a copy of the parent's, int3s included.  */
	for (size_t i = 0; i < h->nbps; i++)
		if (h->bps[i].inserted && restore_bp(child, &h->bps[i]) < 0)
			fail(h, -CP_E_SYS);
	if (h->entry.inserted && restore_bp(child, &h->entry) < 0)
		fail(h, -CP_E_SYS);
	if (h->loader.inserted && restore_bp(child, &h->loader) < 0)
		fail(h, -CP_E_SYS);
	/* Only the forking thread lives on in the child.  */
	struct tstate *ts = tstate(h, parent, false);
	uint64_t slot = 0;
	if (ts && ts->in_call && read_u64(child, ts->slot, &slot) &&
	    slot == ts->fake)
		cp_target_write(child, ts->slot, &ts->ret, 8);
}

static void on_exec(void *arg)
{
	struct cp_heap *h = arg;
	if (h->phase == WAIT_EXEC) {
		/* Launch mode: the command's image is loaded; its
		 * libraries are not yet.  Stop it at its entry point.  */
		h->entry.addr = cp_procfs_auxv(h->pid, AT_ENTRY);
		if (!h->entry.addr ||
		    cp_target_read_mem(h->pid, h->entry.addr, h->entry.orig,
				       sizeof(h->entry.orig)) < 0 ||
		    insert_bp(h, &h->entry) < 0) {
			fail(h, -CP_E_SYS);
			h->phase = DONE;
			return;
		}
		/* Dynamically linked: the loader's notifications come
		 * sooner, once the libraries are mapped and before their
		 * constructors run (which may allocate: libstdc++'s
		 * emergency pool).  The entry point stays the fallback.  */
		uint64_t base = cp_procfs_auxv(h->pid, AT_BASE), brk = 0;
		if (base && loader_symbols(h->pid, base, &brk, &h->r_debug) == 0)
			set_loader_bp(h, brk);
		h->phase = WAIT_ENTRY;
		return;
	}
	/* The old image, our bytes with it, is gone; so are the steps
	 * queued for it.  */
	for (size_t i = 0; i < h->nbps; i++)
		h->bps[i].inserted = false;
	h->nsteps = 0;
	h->entry.inserted = false;
	h->loader.inserted = false;
	h->nthreads = 0;
	h->s.target_exec = true;
	h->phase = DONE;
}

/* ------------------------------------------------------ public */

static volatile sig_atomic_t alarm_seen;

static void on_alarm(int sig)
{
	(void)sig;
	alarm_seen = 1;
}

int cp_heap_start(struct cp_target *target, struct cp_unwinder *unwinder,
		  struct cp_symbols *symbols, struct cp_profile *profile,
		  const struct cp_heap_options *options, struct cp_heap **out)
{
	struct cp_heap *h = calloc(1, sizeof(*h));
	if (!h)
		return -CP_E_NOMEM;
	h->target = target;
	h->pid = cp_target_pid(target);
	h->unwinder = unwinder;
	h->profile = profile;
	h->symbols = symbols;
	h->o = *options;
	if (h->o.max_depth < 1)
		h->o.max_depth = 1;
	h->pcs = calloc(h->o.max_depth + 1, sizeof(*h->pcs));
	h->locs = calloc(h->o.max_depth + 1, sizeof(*h->locs));
	h->points = calloc(TIMELINE_SPANS, sizeof(*h->points));
	int rc = -CP_E_NOMEM;
	if (!h->pcs || !h->locs || !h->points)
		goto fail;
	/* The symbolizer thread must not take our signals: they are what
	 * interrupts the wait for the next trap.  */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = cp_resolver_start(symbols, profile, &h->resolver);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		goto fail;
	struct cp_target_hooks hooks = { on_trap, on_fork, on_exec, h };
	cp_target_set_hooks(target, &hooks);
	if (cp_target_launched(target)) {
		/* Wait for the image, then for its entry point.  */
		h->phase = WAIT_EXEC;
		while (h->phase == WAIT_EXEC || h->phase == WAIT_ENTRY) {
			if (h->o.stop && *h->o.stop) {
				rc = -CP_E_GONE;
				goto fail;
			}
			if (cp_target_wait_event(target) < 0) {
				rc = -CP_E_GONE;
				goto fail;
			}
			run_steps(h);
			if (h->error) {
				rc = h->error;
				goto fail;
			}
		}
		if (h->phase != TRACING) {
			rc = h->error ? h->error : -CP_E_NOALLOC;
			goto fail;
		}
	} else {
		/* The threads run meanwhile: writing one byte is atomic for
		 * them, and a thread reaching an int3 already set is
		 * handled by the hooks.  */
		rc = arm(h);
		if (rc < 0)
			goto fail;
	}
	*out = h;
	return 0;
fail:
	cp_heap_finish(h);
	cp_heap_free(h);
	return rc;
}

size_t cp_heap_breakpoints(const struct cp_heap *h, const char **module)
{
	if (module)
		*module = h->where;
	return h->nbps;
}

int cp_heap_run(struct cp_heap *h)
{
	return cp_heap_run_until(h, 0, NULL, NULL);
}

int cp_heap_run_until(struct cp_heap *h, uint64_t until_ns,
		      volatile sig_atomic_t *stop, enum cp_heap_end *end)
{
	enum cp_heap_end why = CP_HEAP_DEADLINE;
	/* A timer signal to the tracing thread wakes the blocking wait
	 * every 100 ms (the duration, *stop).  */
	struct sigaction sa, old_sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old_sa);
	timer_t timer;
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	bool have_timer = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
	if (have_timer) {
		struct itimerspec its = { { 0, 100000000 }, { 0, 100000000 } };
		timer_settime(timer, 0, &its, NULL);
	}
	uint64_t deadline = h->o.duration > 0
				    ? h->t0_ns + (uint64_t)(h->o.duration * 1e9)
				    : 0;
	if (until_ns && (!deadline || until_ns < deadline))
		deadline = until_ns;
	int rc = 0;
	while (h->phase == TRACING) {
		if ((h->o.stop && *h->o.stop) || (stop && *stop)) {
			h->s.interrupted = true;
			why = CP_HEAP_STOPPED;
			break;
		}
		uint64_t now = now_ns();
		if (deadline && now >= deadline)
			break;
		if (cp_target_exited(h->target))
			break;
		int got = cp_target_wait_event(h->target);
		if (got == -CP_E_GONE)
			break;
		run_steps(h);
		cp_resolver_collect(h->resolver);
		if (h->error) {
			rc = h->error;
			break;
		}
	}
	if (have_timer)
		timer_delete(timer);
	sigaction(SIGALRM, &old_sa, NULL);
	h->s.target_exited = cp_target_exited(h->target);
	if (h->s.target_exec)
		why = CP_HEAP_EXEC;
	else if (h->s.target_exited)
		why = CP_HEAP_EXITED;
	if (end)
		*end = why;
	return rc;
}

int cp_heap_finish(struct cp_heap *h)
{
	if (!h)
		return 0;
	int rc = 0;
	uint64_t end = now_ns();
	if (h->t0_ns) {
		note_live(h, end);
		h->s.duration = (double)(end - h->t0_ns) / 1e9;
	}
	h->phase = DONE;
	bool any = h->entry.inserted || h->loader.inserted;
	for (size_t i = 0; i < h->nbps; i++)
		any |= h->bps[i].inserted;
	if (any && !cp_target_exited(h->target) &&
	    cp_target_hold_all(h->target) == 0) {
		/* A thread may have stopped for our interrupt with the
		 * SIGTRAP of an int3 still queued: let it take the signal
		 * (the hook rewinds it) before the byte goes away.  */
		size_t n;
		struct cp_thread *threads = cp_target_threads(h->target, &n);
		for (size_t i = 0; i < n; i++) {
			pid_t tid = threads[i].tid;
			for (int tries = 0; tries < 4; tries++) {
				struct user_regs_struct regs;
				if (cp_target_get_regs(h->target, tid,
						       &regs) < 0)
					break;
				uint64_t pc = regs.rip - 1;
				bool ours = any_bp(h, pc) ||
					    (h->entry.inserted &&
					     pc == h->entry.addr);
				if (!ours ||
				    !cp_target_trap_pending(h->target, tid))
					break;
				cp_target_deliver_pending(h->target, tid);
				threads = cp_target_threads(h->target, &n);
			}
		}
		for (size_t i = 0; i < h->nbps; i++) {
			if (!h->bps[i].inserted)
				continue;
			if (restore_bp(h->pid, &h->bps[i]) < 0) {
				fprintf(stderr,
					"cprof-attach: cannot restore the byte at %#llx "
					"(%s) in %d: %s\n",
					(unsigned long long)h->bps[i].addr,
					fn_names[h->bps[i].fn], (int)h->pid,
					strerror(errno));
				rc = -CP_E_SYS;
			}
			h->bps[i].inserted = false;
		}
		if (h->entry.inserted) {
			if (restore_bp(h->pid, &h->entry) < 0)
				rc = -CP_E_SYS;
			h->entry.inserted = false;
		}
		if (h->loader.inserted) {
			if (restore_bp(h->pid, &h->loader) < 0)
				rc = -CP_E_SYS;
			h->loader.inserted = false;
		}
		/* Return addresses still pointing at our int3s.  */
		for (size_t i = 0; i < h->nthreads; i++) {
			struct tstate *ts = &h->threads[i];
			uint64_t slot = 0;
			if (!ts->in_call ||
			    !cp_target_thread(h->target, ts->tid))
				continue;
			if (read_u64(h->pid, ts->slot, &slot) &&
			    slot == ts->fake &&
			    cp_target_write(h->pid, ts->slot, &ts->ret, 8) < 0)
				rc = -CP_E_SYS;
			ts->in_call = false;
			h->s.lost_returns++;
		}
		/* The threads stay held: the caller detaches them.  */
	}
	cp_target_set_hooks(h->target, NULL);
	return rc;
}

void cp_heap_resolve(struct cp_heap *h)
{
	cp_resolver_finish(h->resolver);
	h->resolver = NULL;
}

const struct cp_heap_summary *cp_heap_summary(const struct cp_heap *h)
{
	struct cp_heap_summary *s = (struct cp_heap_summary *)&h->s;
	s->sites = h->sites;
	s->timeline = h->points;
	s->npoints = h->npoints;
	s->timeline_span = (double)h->span_ns / 1e9;
	return s;
}

int cp_heap_fill_profile(const struct cp_heap *h, struct cp_profile *profile,
			 enum cp_heap_metric metric)
{
	for (size_t i = 0; i < h->s.nsites; i++) {
		const struct cp_heap_site *st = &h->sites[i];
		if (!st->alloc_count)
			continue;
		uint64_t values[CP_PROFILE_VALUES] = {
			st->alloc_count, st->alloc_bytes, st->live_count,
			st->live_bytes };
		uint64_t weight = metric == CP_HEAP_LIVE_BYTES ? st->live_bytes
				: metric == CP_HEAP_ALLOC_BYTES ? st->alloc_bytes
				: metric == CP_HEAP_LIVE_COUNT ? st->live_count
							       : st->alloc_count;
		if (weight == 0)
			continue;
		if (cp_profile_add_values(profile, 0, st->stack, weight,
					  values) < 0)
			return -CP_E_NOMEM;
	}
	return 0;
}

void cp_heap_free(struct cp_heap *h)
{
	if (!h)
		return;
	cp_resolver_finish(h->resolver);
	free(h->threads);
	free(h->blocks);
	free(h->sites);
	free(h->points);
	free(h->steps);
	free(h->snap.stack);
	free(h->pcs);
	free(h->locs);
	free(h);
}
