/* The heap table: live blocks, allocation sites, totals, the exact-peak
 * timeline and temporaries, built from allocation events alone.  See
 * include/cprof/heaptable.h.  No ptrace here.  */
#include "cprof/heaptable.h"

#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "util/grow.h"

#define TIMELINE_SPANS 1024           /* spans of the timeline at most */
#define FIRST_SPAN_NS 1000000ull      /* 1 ms each, doubled when full */

/* Freed entries kept at most (beyond 4 per live block): 24 MB.  */
#define FREED_KEPT (1u << 20)

/* One block: live, or freed and not yet born again (so that a second
 * free of it is told from a free of a block born before tracing).  */
struct block {
	uint64_t ptr;         /* 0: empty slot */
	bool live;
	uint64_t size;
	uint64_t t_ns;
	uint64_t seq;         /* its thread's events when born */
	uint32_t stack;
	pid_t tid;
};

/* What the table keeps of one thread: how many blocks it made or
 * released (for temporaries).  */
struct thread {
	pid_t tid;
	uint64_t events;
	/* Its realloc under way (CP_HEAP_EV_REALLOC_BEGIN): the block it
	 * released (RESIZING; live false when it was not a live block).  */
	bool resizing;
	struct block resized;
};

struct cp_heaptable {
	struct block *blocks;     /* open addressing, linear probing */
	size_t blocks_cap, nblocks;
	size_t nfreed;            /* entries of freed blocks */
	struct thread *threads;
	size_t nthreads, threads_cap;
	size_t last_thread;       /* where the last lookup found its thread */
	struct cp_heap_site *sites;
	size_t sites_cap;
	struct cp_heap_point *points; /* TIMELINE_SPANS, the highest of each */
	size_t npoints;
	uint64_t span_ns;         /* time each point covers */
	uint64_t level_bytes, level_count; /* live when last noted */
	uint64_t t0_ns;           /* 0: not begun */
	uint64_t alloc_lo, alloc_hi; /* the allocator's code */
	cp_heaptable_caller_fn caller;
	void *caller_arg;
	struct cp_heap_summary s;
};

int cp_heap_metric_parse(const char *name)
{
	static const char *const names[] = { "live-bytes", "alloc-bytes",
					     "live-count", "alloc-count" };
	for (int i = 0; i < 4; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* A zeroed array grown by doubling from 16 elements.  */
static bool grow(void **items, size_t size, size_t need, size_t *cap)
{
	return cp_grow_zeroed(items, cap, need, size, 16);
}

struct cp_heaptable *cp_heaptable_new(void)
{
	struct cp_heaptable *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->points = calloc(TIMELINE_SPANS, sizeof(*t->points));
	if (!t->points) {
		free(t);
		return NULL;
	}
	t->span_ns = FIRST_SPAN_NS;
	cp_heap_entries(&t->s.nentries);
	return t;
}

void cp_heaptable_free(struct cp_heaptable *t)
{
	if (!t)
		return;
	free(t->blocks);
	free(t->threads);
	free(t->sites);
	free(t->points);
	free(t);
}

void cp_heaptable_set_allocator(struct cp_heaptable *t, uint64_t lo,
				uint64_t hi, cp_heaptable_caller_fn caller,
				void *arg)
{
	t->alloc_lo = lo;
	t->alloc_hi = hi;
	t->caller = caller;
	t->caller_arg = arg;
}

/* ------------------------------------------------------ live blocks */

static size_t block_hash(uint64_t ptr, size_t cap)
{
	ptr ^= ptr >> 33;
	ptr *= 0xff51afd7ed558ccdULL;
	ptr ^= ptr >> 33;
	return (size_t)ptr & (cap - 1);
}

static struct block *block_find(struct cp_heaptable *t, uint64_t ptr)
{
	if (!t->blocks_cap)
		return NULL;
	for (size_t i = block_hash(ptr, t->blocks_cap);;
	     i = (i + 1) & (t->blocks_cap - 1)) {
		if (t->blocks[i].ptr == ptr)
			return &t->blocks[i];
		if (t->blocks[i].ptr == 0)
			return NULL;
	}
}

/* Rehash into a table of CAP slots; KEEP_FREED false drops the entries
 * of freed blocks.  */
static bool blocks_rebuild(struct cp_heaptable *t, size_t cap,
			   bool keep_freed)
{
	size_t old_cap = t->blocks_cap;
	struct block *old = t->blocks;
	struct block *fresh = calloc(cap, sizeof(*fresh));
	if (!fresh)
		return false;
	t->blocks = fresh;
	t->blocks_cap = cap;
	t->nblocks = 0;
	t->nfreed = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].ptr || (!old[i].live && !keep_freed))
			continue;
		t->nfreed += !old[i].live;
		size_t j = block_hash(old[i].ptr, cap);
		while (fresh[j].ptr)
			j = (j + 1) & (cap - 1);
		fresh[j] = old[i];
		t->nblocks++;
	}
	free(old);
	return true;
}

static bool block_insert(struct cp_heaptable *t, const struct block *b)
{
	if ((t->nblocks + 1) * 2 > t->blocks_cap) {
		/* Full: double, or drop the freed entries once they are
		 * many (a free of a dropped one then reads "untracked").  */
		size_t live = t->nblocks - t->nfreed;
		bool keep = t->nfreed < FREED_KEPT || t->nfreed < 4 * live;
		size_t cap = t->blocks_cap ? t->blocks_cap : 1024;
		if (keep || (live + 1) * 4 > cap)
			cap *= 2;
		if (!blocks_rebuild(t, cap, keep))
			return false;
	}
	size_t i = block_hash(b->ptr, t->blocks_cap);
	while (t->blocks[i].ptr)
		i = (i + 1) & (t->blocks_cap - 1);
	t->blocks[i] = *b;
	t->nblocks++;
	return true;
}

/* ------------------------------------------------------ accounting */

static struct cp_heap_site *site(struct cp_heaptable *t, uint32_t stack)
{
	if (!grow((void **)&t->sites, sizeof(*t->sites), (size_t)stack + 1,
		  &t->sites_cap))
		return NULL;
	if ((size_t)stack + 1 > t->s.nsites)
		t->s.nsites = (size_t)stack + 1;
	t->sites[stack].stack = stack;
	return &t->sites[stack];
}

static struct thread *thread(struct cp_heaptable *t, pid_t tid)
{
	if (t->last_thread < t->nthreads &&
	    t->threads[t->last_thread].tid == tid)
		return &t->threads[t->last_thread];
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid) {
			t->last_thread = i;
			return &t->threads[i];
		}
	if (!grow((void **)&t->threads, sizeof(*t->threads), t->nthreads + 1,
		  &t->threads_cap))
		return NULL;
	t->last_thread = t->nthreads;
	struct thread *th = &t->threads[t->nthreads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	return th;
}

/* The timeline: live bytes recorded at every change, kept as the highest
 * of each span of time (1 ms at first); when TIMELINE_SPANS spans are not
 * enough, neighbours merge into spans twice as long, each keeping the
 * higher.  So whatever the length of the run the timeline holds the peak
 * exactly, and a point is never a sample that may have missed it.  */
static void merge_spans(struct cp_heaptable *t)
{
	size_t n = (t->npoints + 1) / 2;
	t->span_ns *= 2;
	for (size_t i = 0; i < n; i++) {
		struct cp_heap_point a = t->points[2 * i];
		if (2 * i + 1 < t->npoints &&
		    t->points[2 * i + 1].live_bytes > a.live_bytes)
			a = t->points[2 * i + 1];
		a.t = (double)(i * t->span_ns) / 1e9;
		t->points[i] = a;
	}
	t->npoints = n;
}

/* Live bytes may have changed at NOW: note them.  */
static void note_live(struct cp_heaptable *t, uint64_t now)
{
	if (!t->t0_ns)
		return;
	uint64_t at = now > t->t0_ns ? now - t->t0_ns : 0;
	while (at / t->span_ns >= TIMELINE_SPANS)
		merge_spans(t);
	size_t i = (size_t)(at / t->span_ns);
	/* Spans without a change held the level noted last.  */
	while (t->npoints <= i) {
		struct cp_heap_point *p = &t->points[t->npoints];
		p->t = (double)(t->npoints * t->span_ns) / 1e9;
		p->live_bytes = t->level_bytes;
		p->live_count = t->level_count;
		t->npoints++;
	}
	struct cp_heap_point *p = &t->points[i];
	if (t->s.live_bytes > p->live_bytes) {
		p->live_bytes = t->s.live_bytes;
		p->live_count = t->s.live_count;
	}
	t->level_bytes = t->s.live_bytes;
	t->level_count = t->s.live_count;
}

void cp_heaptable_begin(struct cp_heaptable *t, uint64_t t0_ns)
{
	t->t0_ns = t0_ns ? t0_ns : 1;
	t->span_ns = FIRST_SPAN_NS;
	note_live(t, t->t0_ns);
}

void cp_heaptable_end(struct cp_heaptable *t, uint64_t end_ns)
{
	if (!t->t0_ns)
		return;
	note_live(t, end_ns);
	t->s.duration =
		end_ns > t->t0_ns ? (double)(end_ns - t->t0_ns) / 1e9 : 0.0;
}

static unsigned size_bucket(uint64_t size)
{
	return size ? 64u - (unsigned)__builtin_clzll(size) : 0u;
}

/* Take the live block B out of the live totals.  */
static void unlive(struct cp_heaptable *t, struct block *b)
{
	struct cp_heap_site *st = site(t, b->stack);
	if (st) {
		st->live_count--;
		st->live_bytes -= b->size;
	}
	t->s.live_count--;
	t->s.live_bytes -= b->size;
	b->live = false;
	t->nfreed++;
}

static int on_alloc(struct cp_heaptable *t, struct thread *th,
		    const struct cp_heap_event *ev, uint64_t ptr)
{
	if (!ptr) {
		t->s.failed++;
		return 0;
	}
	struct block b = { ptr, true, ev->size, ev->t_ns, ++th->events,
			   ev->stack, ev->tid };
	struct cp_heap_site *st = site(t, ev->stack);
	struct block *slot = block_find(t, ptr);
	if (slot && slot->live) {
		/* Born twice: its free was not seen (a free by a vfork
		 * child).  Forget the old one.  */
		unlive(t, slot);
	}
	if (slot) {
		*slot = b;
		t->nfreed--;
	} else if (!block_insert(t, &b)) {
		st = NULL;
	}
	if (!st)
		return -CP_E_NOMEM;
	st->alloc_count++;
	st->alloc_bytes += ev->size;
	st->live_count++;
	st->live_bytes += ev->size;
	t->s.allocations++;
	t->s.alloc_bytes += ev->size;
	t->s.live_count++;
	t->s.live_bytes += ev->size;
	t->s.sizes[size_bucket(ev->size)]++;
	if (t->s.live_bytes > t->s.peak_bytes) {
		t->s.peak_bytes = t->s.live_bytes;
		t->s.peak_t = ev->t_ns > t->t0_ns && t->t0_ns
				      ? (double)(ev->t_ns - t->t0_ns) / 1e9
				      : 0.0;
	}
	note_live(t, ev->t_ns);
	return 0;
}

/* Block PTR goes away in thread TH: freed (EV a free), or the old block
 * of a realloc.  */
static void on_release(struct cp_heaptable *t, struct thread *th,
		       const struct cp_heap_event *ev, uint64_t ptr)
{
	bool is_free = ev->kind == CP_HEAP_EV_FREE;
	if (!ptr) {
		if (is_free)
			t->s.null_frees++;
		return;
	}
	struct block *b = block_find(t, ptr);
	if (!b || !b->live) {
		if (!is_free)
			return;
		uint64_t caller = ev->caller;
		if (caller == 0 && t->alloc_hi && t->caller)
			caller = t->caller(t->caller_arg, ev);
		if (caller >= t->alloc_lo && caller < t->alloc_hi)
			/* The allocator's own code freeing what it keeps
			 * (glibc frees each thread's tcache entries when the
			 * thread exits): not the program's.  */
			t->s.internal_frees++;
		else if (!b)
			t->s.untracked_frees++; /* born before tracing */
		else
			t->s.repeat_frees++;    /* freed twice */
		return;
	}
	if (is_free)
		t->s.frees++;
	else
		t->s.realloc_releases++;
	/* Temporary, by heaptrack's definition (a block whose release is
	 * the next allocator event after its birth: free or realloc), per
	 * thread so that no timing changes it: released by the thread that
	 * allocated it, which allocated or released nothing in between.  */
	if (b->tid == ev->tid && b->seq == th->events)
		t->s.temporary++;
	th->events++;
	unlive(t, b);
	note_live(t, ev->t_ns);
}

/* TH's realloc of EV's OLD_ADDR began: release the block now (another
 * thread may be given its address before the realloc returns), and keep
 * it to give back should the call fail.  */
static void on_resize(struct cp_heaptable *t, struct thread *th,
		      const struct cp_heap_event *ev)
{
	th->resizing = false;
	if (!ev->old_addr)
		return;
	struct block *b = block_find(t, ev->old_addr);
	th->resizing = true;
	th->resized = b && b->live ? *b : (struct block){ .ptr = ev->old_addr };
	on_release(t, th, ev, ev->old_addr);
}

/* A failed realloc's block B, released at its beginning, is live again
 * (unless its address was given out since, which a failed realloc does
 * not do).  */
static void relive(struct cp_heaptable *t, const struct block *b,
		   uint64_t now)
{
	if (!b->live)
		return;
	struct block *slot = block_find(t, b->ptr);
	if (!slot || slot->live)
		return;
	*slot = *b;
	t->nfreed--;
	struct cp_heap_site *st = site(t, b->stack);
	if (st) {
		st->live_count++;
		st->live_bytes += b->size;
	}
	t->s.realloc_releases--;
	t->s.live_count++;
	t->s.live_bytes += b->size;
	note_live(t, now);
}

int cp_heaptable_add(struct cp_heaptable *t, const struct cp_heap_event *ev)
{
	struct thread *th = thread(t, ev->tid);
	if (!th)
		return -CP_E_NOMEM;
	switch (ev->kind) {
	case CP_HEAP_EV_ALLOC:
		return on_alloc(t, th, ev, ev->addr);
	case CP_HEAP_EV_FREE:
		on_release(t, th, ev, ev->addr);
		return 0;
	case CP_HEAP_EV_REALLOC_BEGIN:
		on_resize(t, th, ev);
		return 0;
	case CP_HEAP_EV_REALLOC: {
		/* Released at its beginning already?  */
		bool begun = th->resizing && ev->old_addr &&
			     th->resized.ptr == ev->old_addr;
		th->resizing = false;
		if (ev->addr) {
			if (!begun)
				on_release(t, th, ev, ev->old_addr);
			return on_alloc(t, th, ev, ev->addr);
		}
		if (ev->size == 0 && ev->old_addr) {
			/* realloc(p, 0) freed P.  */
			if (!begun)
				on_release(t, th, ev, ev->old_addr);
			return 0;
		}
		if (begun)
			relive(t, &th->resized, ev->t_ns);
		t->s.failed++;
		return 0;
	}
	}
	return -CP_E_INVAL;
}

const struct cp_heap_summary *
cp_heaptable_summary(const struct cp_heaptable *t)
{
	struct cp_heap_summary *s = (struct cp_heap_summary *)&t->s;
	s->sites = t->sites;
	s->timeline = t->points;
	s->npoints = t->npoints;
	s->timeline_span = (double)t->span_ns / 1e9;
	return s;
}

int cp_heaptable_fill_profile(const struct cp_heaptable *t,
			      struct cp_profile *profile,
			      enum cp_heap_metric metric)
{
	for (size_t i = 0; i < t->s.nsites; i++) {
		const struct cp_heap_site *st = &t->sites[i];
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
