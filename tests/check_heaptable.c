/* check_heaptable: the heap table from event sequences alone, no process
 * in between (include/cprof/heaptable.h): pairs, reallocs that move and
 * that stay, realloc(NULL) and realloc(p, 0), frees of blocks never seen,
 * freed twice, freed by the allocator, temporaries per thread, failed
 * allocations, the peak of a brief spike, the timeline's spans; and the
 * descriptor table of the allocator's entry points.  */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/heaptable.h"

#define MS 1000000ull
#define T0 (1000 * MS) /* tracing begins 1 s after the clock's origin */

static struct cp_heaptable *table;

static void setup(void)
{
	table = cp_heaptable_new();
	ck_assert_ptr_nonnull(table);
	cp_heaptable_begin(table, T0);
}

static void teardown(void)
{
	cp_heaptable_free(table);
	table = NULL;
}

static void add(const struct cp_heap_event *ev)
{
	ck_assert_int_eq(cp_heaptable_add(table, ev), 0);
}

static void alloc_at(pid_t tid, uint64_t addr, uint64_t size, uint32_t stack,
		     uint64_t t_ns)
{
	struct cp_heap_event ev = { .kind = CP_HEAP_EV_ALLOC, .addr = addr,
				    .size = size, .stack = stack, .tid = tid,
				    .t_ns = t_ns };
	add(&ev);
}

static void alloc(pid_t tid, uint64_t addr, uint64_t size, uint32_t stack)
{
	alloc_at(tid, addr, size, stack, T0 + MS);
}

static void free_at(pid_t tid, uint64_t addr, uint64_t caller, uint64_t t_ns)
{
	struct cp_heap_event ev = { .kind = CP_HEAP_EV_FREE, .addr = addr,
				    .tid = tid, .t_ns = t_ns,
				    .caller = caller };
	add(&ev);
}

static void release(pid_t tid, uint64_t addr)
{
	free_at(tid, addr, 0, T0 + 2 * MS);
}

static void resize(pid_t tid, uint64_t old_addr, uint64_t addr, uint64_t size,
		   uint32_t stack)
{
	struct cp_heap_event ev = { .kind = CP_HEAP_EV_REALLOC, .addr = addr,
				    .old_addr = old_addr, .size = size,
				    .stack = stack, .tid = tid,
				    .t_ns = T0 + 3 * MS };
	add(&ev);
}

static void resize_begins(pid_t tid, uint64_t old_addr, uint64_t t_ns)
{
	struct cp_heap_event ev = { .kind = CP_HEAP_EV_REALLOC_BEGIN,
				    .old_addr = old_addr, .tid = tid,
				    .t_ns = t_ns };
	add(&ev);
}

static const struct cp_heap_summary *sum(void)
{
	return cp_heaptable_summary(table);
}

/* allocations = frees + realloc releases + live, whatever happened.  */
static void expect_balance(void)
{
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->allocations,
			  s->frees + s->realloc_releases + s->live_count);
}

START_TEST(pairs)
{
	for (uint64_t i = 0; i < 3; i++) {
		alloc(7, 0x1000 + 0x100 * i, 64, 1);
		release(7, 0x1000 + 0x100 * i);
	}
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->allocations, 3);
	ck_assert_uint_eq(s->alloc_bytes, 192);
	ck_assert_uint_eq(s->frees, 3);
	ck_assert_uint_eq(s->live_count, 0);
	ck_assert_uint_eq(s->live_bytes, 0);
	ck_assert_uint_eq(s->temporary, 3);
	ck_assert_uint_eq(s->untracked_frees + s->repeat_frees +
				  s->internal_frees + s->null_frees,
			  0);
	ck_assert_uint_eq(s->sizes[7], 3); /* 64 is in [64, 128) */
	ck_assert_uint_ge(s->nsites, 2);
	ck_assert_uint_eq(s->sites[1].stack, 1);
	ck_assert_uint_eq(s->sites[1].alloc_count, 3);
	ck_assert_uint_eq(s->sites[1].alloc_bytes, 192);
	ck_assert_uint_eq(s->sites[1].live_count, 0);
	ck_assert_uint_eq(s->peak_bytes, 64);
	expect_balance();
}
END_TEST

START_TEST(live_blocks_by_site)
{
	alloc(1, 0x10, 100, 2);
	alloc(1, 0x20, 200, 2);
	alloc(1, 0x30, 5, 4);
	release(1, 0x10);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->live_count, 2);
	ck_assert_uint_eq(s->live_bytes, 205);
	ck_assert_uint_eq(s->sites[2].live_count, 1);
	ck_assert_uint_eq(s->sites[2].live_bytes, 200);
	ck_assert_uint_eq(s->sites[2].alloc_bytes, 300);
	ck_assert_uint_eq(s->sites[4].live_bytes, 5);
	ck_assert_uint_eq(s->sites[3].alloc_count, 0); /* a gap */
	ck_assert_uint_eq(s->peak_bytes, 305);
	expect_balance();
}
END_TEST

START_TEST(realloc_moving_and_in_place)
{
	alloc(1, 0xa0, 16, 1);
	resize(1, 0xa0, 0xb0, 32, 2); /* moved */
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->allocations, 2);
	ck_assert_uint_eq(s->alloc_bytes, 48);
	ck_assert_uint_eq(s->realloc_releases, 1);
	ck_assert_uint_eq(s->live_count, 1);
	ck_assert_uint_eq(s->live_bytes, 32);
	ck_assert_uint_eq(s->sites[1].live_count, 0);
	ck_assert_uint_eq(s->sites[2].live_bytes, 32);
	resize(1, 0xb0, 0xb0, 64, 3); /* in place */
	ck_assert_uint_eq(s->realloc_releases, 2);
	ck_assert_uint_eq(s->live_count, 1);
	ck_assert_uint_eq(s->live_bytes, 64);
	ck_assert_uint_eq(s->sites[3].live_bytes, 64);
	/* The block resized in place is the one a free then releases.  */
	release(1, 0xb0);
	ck_assert_uint_eq(s->frees, 1);
	ck_assert_uint_eq(s->repeat_frees + s->untracked_frees, 0);
	ck_assert_uint_eq(s->live_count, 0);
	ck_assert_uint_eq(s->peak_bytes, 64);
	expect_balance();
}
END_TEST

START_TEST(realloc_null_and_zero)
{
	resize(1, 0, 0xc0, 40, 1); /* realloc(NULL, 40): an allocation */
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->allocations, 1);
	ck_assert_uint_eq(s->realloc_releases, 0);
	ck_assert_uint_eq(s->live_bytes, 40);
	resize(1, 0xc0, 0, 0, 1); /* realloc(p, 0) freed p */
	ck_assert_uint_eq(s->realloc_releases, 1);
	ck_assert_uint_eq(s->live_count, 0);
	ck_assert_uint_eq(s->failed, 0);
	ck_assert_uint_eq(s->allocations, 1);
	/* p is gone: freeing it now is a second free.  */
	release(1, 0xc0);
	ck_assert_uint_eq(s->repeat_frees, 1);
	expect_balance();
}
END_TEST

START_TEST(realloc_failed_keeps_block)
{
	alloc(1, 0xd0, 8, 1);
	resize(1, 0xd0, 0, 1ull << 40, 1); /* no memory: the block stays */
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->failed, 1);
	ck_assert_uint_eq(s->live_count, 1);
	ck_assert_uint_eq(s->live_bytes, 8);
	ck_assert_uint_eq(s->realloc_releases, 0);
	release(1, 0xd0);
	ck_assert_uint_eq(s->frees, 1);
	expect_balance();
}
END_TEST

/* Thread 1's realloc frees its block inside; thread 2's malloc is given
 * the address before the realloc returns.  In the order of the calls'
 * ends the block would be born twice; released at the realloc's
 * beginning, each block is counted once.  */
START_TEST(realloc_block_taken_before_it_returns)
{
	alloc(1, 0xe0, 8, 1);
	resize_begins(1, 0xe0, T0 + MS);
	alloc_at(2, 0xe0, 16, 2, T0 + 2 * MS); /* thread 2 got it */
	resize(1, 0xe0, 0xf0, 32, 1);          /* then realloc returned */
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->realloc_releases, 1);
	ck_assert_uint_eq(s->live_count, 2);
	ck_assert_uint_eq(s->live_bytes, 16 + 32);
	release(2, 0xe0);
	release(1, 0xf0);
	ck_assert_uint_eq(s->frees, 2);
	ck_assert_uint_eq(s->repeat_frees + s->untracked_frees, 0);
	expect_balance();

	/* Begun and failed: the block is live again, once.  */
	alloc(1, 0xd0, 8, 1);
	resize_begins(1, 0xd0, T0 + MS);
	ck_assert_uint_eq(s->live_count, 0);
	resize(1, 0xd0, 0, 1ull << 40, 1);
	ck_assert_uint_eq(s->failed, 1);
	ck_assert_uint_eq(s->live_count, 1);
	ck_assert_uint_eq(s->live_bytes, 8);
	ck_assert_uint_eq(s->realloc_releases, 1);
	release(1, 0xd0);
	ck_assert_uint_eq(s->frees, 3);
	expect_balance();

	/* realloc(p, 0) begun: released once.  */
	alloc(1, 0xc0, 8, 1);
	resize_begins(1, 0xc0, T0 + MS);
	resize(1, 0xc0, 0, 0, 1);
	ck_assert_uint_eq(s->realloc_releases, 2);
	ck_assert_uint_eq(s->live_count, 0);
	expect_balance();
}
END_TEST

START_TEST(failed_allocations)
{
	/* calloc(2^33, 2^33) wraps to 0 in 64 bits and returns NULL; so
	 * does a malloc the allocator refuses: neither counts bytes.  */
	alloc(1, 0, (1ull << 33) * (1ull << 33), 1);
	alloc(1, 0, 1ull << 50, 1);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->failed, 2);
	ck_assert_uint_eq(s->allocations, 0);
	ck_assert_uint_eq(s->alloc_bytes, 0);
	ck_assert_uint_eq(s->live_count, 0);
	for (unsigned b = 0; b < CP_HEAP_SIZE_BUCKETS; b++)
		ck_assert_uint_eq(s->sizes[b], 0);
	ck_assert_uint_eq(s->peak_bytes, 0);
}
END_TEST

START_TEST(frees_not_live)
{
	release(1, 0x999);       /* born before tracing */
	release(1, 0);           /* free(NULL) */
	alloc(1, 0x100, 10, 1);
	release(1, 0x100);
	release(1, 0x100);       /* twice */
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->untracked_frees, 1);
	ck_assert_uint_eq(s->null_frees, 1);
	ck_assert_uint_eq(s->repeat_frees, 1);
	ck_assert_uint_eq(s->frees, 1);
	ck_assert_uint_eq(s->internal_frees, 0);
	/* A block born again after its free is live again.  */
	alloc(1, 0x100, 20, 1);
	release(1, 0x100);
	ck_assert_uint_eq(s->frees, 2);
	ck_assert_uint_eq(s->repeat_frees, 1);
	expect_balance();
}
END_TEST

/* The caller lookup: counts its calls and answers CALLER_ANSWER.  */
static unsigned caller_asked;
static uint64_t caller_answer;

static uint64_t ask_caller(void *arg, const struct cp_heap_event *ev)
{
	ck_assert_ptr_eq(arg, &caller_asked);
	ck_assert_int_eq(ev->kind, CP_HEAP_EV_FREE);
	caller_asked++;
	return caller_answer;
}

START_TEST(internal_frees)
{
	caller_asked = 0;
	caller_answer = 0x7000;
	cp_heaptable_set_allocator(table, 0x7000, 0x8000, ask_caller,
				   &caller_asked);
	/* A free of a live block is the program's: no caller asked.  */
	alloc(1, 0x100, 10, 1);
	release(1, 0x100);
	ck_assert_uint_eq(caller_asked, 0);
	/* Not live, from the allocator's code: its own (a tcache flush).  */
	release(1, 0x200);
	ck_assert_uint_eq(caller_asked, 1);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->internal_frees, 1);
	ck_assert_uint_eq(s->untracked_frees, 0);
	/* A caller given with the event is not asked for.  */
	free_at(1, 0x300, 0x7fff, T0 + 5 * MS);
	ck_assert_uint_eq(caller_asked, 1);
	ck_assert_uint_eq(s->internal_frees, 2);
	/* Outside the allocator: untracked, and a second free of a tracked
	 * block is the program's double free.  */
	free_at(1, 0x400, 0x8000, T0 + 5 * MS);
	ck_assert_uint_eq(s->untracked_frees, 1);
	free_at(1, 0x100, 0x1234, T0 + 5 * MS);
	ck_assert_uint_eq(s->repeat_frees, 1);
	/* Already freed, from the allocator: internal, not a double free.  */
	free_at(1, 0x100, 0x7800, T0 + 5 * MS);
	ck_assert_uint_eq(s->repeat_frees, 1);
	ck_assert_uint_eq(s->internal_frees, 3);
	ck_assert_uint_eq(s->frees, 1);
}
END_TEST

START_TEST(temporaries_per_thread)
{
	/* Thread 1's block freed by its next event: temporary, although
	 * thread 2 allocated in between.  */
	alloc(1, 0x10, 8, 1);
	alloc(2, 0x20, 8, 2);
	release(1, 0x10);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->temporary, 1);
	/* Thread 2's, freed by its next event too.  */
	release(2, 0x20);
	ck_assert_uint_eq(s->temporary, 2);
	/* Another allocation of the thread in between: not temporary.  */
	alloc(1, 0x30, 8, 1);
	alloc(1, 0x40, 8, 1);
	release(1, 0x30);
	ck_assert_uint_eq(s->temporary, 2);
	/* Freed by another thread: not temporary.  */
	alloc(2, 0x50, 8, 2);
	release(1, 0x50);
	ck_assert_uint_eq(s->temporary, 2);
	/* A realloc releasing the block right after its birth is its next
	 * event: temporary.  */
	alloc(3, 0x60, 8, 3);
	resize(3, 0x60, 0x70, 16, 3);
	ck_assert_uint_eq(s->temporary, 3);
	/* A free of NULL or of a block never seen is no event of the
	 * thread's: the next free still makes a temporary.  */
	alloc(4, 0x80, 8, 4);
	release(4, 0);
	release(4, 0x12345);
	release(4, 0x80);
	ck_assert_uint_eq(s->temporary, 4);
	expect_balance();
}
END_TEST

START_TEST(born_twice)
{
	/* A free we did not see (a vfork child's): the block is born again
	 * at the same address; the old one is forgotten.  */
	alloc(1, 0x10, 100, 1);
	alloc(1, 0x10, 30, 2);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->allocations, 2);
	ck_assert_uint_eq(s->live_count, 1);
	ck_assert_uint_eq(s->live_bytes, 30);
	ck_assert_uint_eq(s->sites[1].live_count, 0);
	ck_assert_uint_eq(s->sites[2].live_count, 1);
}
END_TEST

/* The highest point of the timeline.  */
static const struct cp_heap_point *timeline_top(const struct cp_heap_summary *s)
{
	const struct cp_heap_point *top = NULL;
	for (size_t i = 0; i < s->npoints; i++)
		if (!top || s->timeline[i].live_bytes > top->live_bytes)
			top = &s->timeline[i];
	return top;
}

START_TEST(peak_of_a_brief_spike)
{
	/* 10 blocks of 100 bytes live; at 500 ms one of 1 MiB for a
	 * microsecond; the run lasts 2 s.  */
	for (uint64_t i = 0; i < 10; i++)
		alloc_at(1, 0x1000 + 16 * i, 100, 1, T0 + i * MS);
	alloc_at(1, 0x9000, 1 << 20, 2, T0 + 500 * MS);
	free_at(1, 0x9000, 0, T0 + 500 * MS + 1000);
	for (uint64_t i = 0; i < 5; i++)
		free_at(1, 0x1000 + 16 * i, 0, T0 + (1000 + i) * MS);
	cp_heaptable_end(table, T0 + 2000 * MS);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->peak_bytes, 1000 + (1 << 20));
	ck_assert(s->peak_t > 0.4999 && s->peak_t < 0.5001);
	ck_assert(s->duration > 1.9999 && s->duration < 2.0001);
	const struct cp_heap_point *top = timeline_top(s);
	ck_assert_ptr_nonnull(top);
	ck_assert_uint_eq(top->live_bytes, s->peak_bytes);
	ck_assert_uint_eq(top->live_count, 11);
	ck_assert(top->t <= s->peak_t &&
		  s->peak_t < top->t + s->timeline_span);
	/* The end: the level the run ended at.  */
	ck_assert_uint_eq(s->timeline[s->npoints - 1].live_bytes, 500);
	ck_assert_uint_eq(s->live_bytes, 500);
}
END_TEST

START_TEST(timeline_spans)
{
	/* 3 s of events: 1 ms spans double until 1024 cover the run.  */
	uint64_t live = 0;
	for (uint64_t ms = 0; ms < 3000; ms += 10) {
		alloc_at(1, 0x100000 + ms, 1 + ms, 1, T0 + ms * MS);
		live += 1 + ms;
	}
	cp_heaptable_end(table, T0 + 3000 * MS);
	const struct cp_heap_summary *s = sum();
	ck_assert(s->timeline_span > 0.00399 && s->timeline_span < 0.00401);
	ck_assert_uint_le(s->npoints, 1024);
	ck_assert_uint_ge((double)s->npoints * s->timeline_span, 2.999);
	for (size_t i = 0; i < s->npoints; i++) {
		double t = (double)i * s->timeline_span;
		ck_assert(s->timeline[i].t > t - 1e-9 &&
			  s->timeline[i].t < t + 1e-9);
		/* Live bytes only grow here: so does the timeline.  */
		if (i)
			ck_assert_uint_ge(s->timeline[i].live_bytes,
					  s->timeline[i - 1].live_bytes);
	}
	ck_assert_uint_eq(s->timeline[s->npoints - 1].live_bytes, live);
	ck_assert_uint_eq(s->peak_bytes, live);
	/* A span with no event holds the level before it: 4 ms spans and
	 * an event every 10 ms leave some empty.  */
	ck_assert_uint_eq(s->timeline[1].live_bytes, s->timeline[0].live_bytes);
}
END_TEST

START_TEST(short_run_timeline)
{
	alloc_at(1, 0x10, 50, 1, T0 + 2 * MS);
	cp_heaptable_end(table, T0 + 3 * MS + 1);
	const struct cp_heap_summary *s = sum();
	ck_assert(s->timeline_span > 0.000999 && s->timeline_span < 0.001001);
	ck_assert_uint_eq(s->npoints, 4);
	ck_assert_uint_eq(s->timeline[0].live_bytes, 0);
	ck_assert_uint_eq(s->timeline[1].live_bytes, 0);
	ck_assert_uint_eq(s->timeline[2].live_bytes, 50);
	ck_assert_uint_eq(s->timeline[3].live_bytes, 50);
}
END_TEST

START_TEST(many_blocks)
{
	/* Enough blocks to rehash the table several times, half freed.  */
	for (uint64_t i = 1; i <= 50000; i++)
		alloc(1, i * 16, 16, (uint32_t)(i % 7));
	for (uint64_t i = 1; i <= 50000; i += 2)
		release(1, i * 16);
	const struct cp_heap_summary *s = sum();
	ck_assert_uint_eq(s->allocations, 50000);
	ck_assert_uint_eq(s->frees, 25000);
	ck_assert_uint_eq(s->live_count, 25000);
	ck_assert_uint_eq(s->live_bytes, 25000 * 16);
	for (uint64_t i = 1; i <= 50000; i += 2)
		release(1, i * 16);
	ck_assert_uint_eq(s->repeat_frees, 25000);
	expect_balance();
}
END_TEST

START_TEST(descriptor_table)
{
	size_t n = 0;
	const struct cp_heap_entry *e = cp_heap_entries(&n);
	ck_assert_uint_ge(n, 10);
	ck_assert_uint_le(n, CP_HEAP_MAX_ENTRIES);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(cp_heap_entry_find(e[i].name), (int)i);
		/* Only a free needs no return; it names its block.  */
		ck_assert_int_eq(e[i].kind == CP_HEAP_KIND_FREE,
				 e[i].result == CP_HEAP_RESULT_NONE);
		if (e[i].kind != CP_HEAP_KIND_ALLOC)
			ck_assert_int_ge(e[i].ptr_arg, 0);
		if (e[i].kind != CP_HEAP_KIND_FREE)
			ck_assert_int_ge(e[i].size_arg, 0);
		if (e[i].result == CP_HEAP_RESULT_STORED)
			ck_assert_int_ge(e[i].out_arg, 0);
	}
	ck_assert_int_eq(cp_heap_entry_find("nonesuch"), -1);
	int m = cp_heap_entry_find("malloc");
	ck_assert_int_ge(m, 0);
	ck_assert(e[m].required);
	int c = cp_heap_entry_find("calloc");
	ck_assert_int_eq(e[c].count_arg, 0);
	ck_assert_int_eq(e[c].size_arg, 1);
	int pm = cp_heap_entry_find("posix_memalign");
	ck_assert_int_eq(e[pm].result, CP_HEAP_RESULT_STORED);
	ck_assert_int_eq(e[pm].out_arg, 0);
	ck_assert_int_eq(e[pm].size_arg, 2);
	int pv = cp_heap_entry_find("pvalloc");
	ck_assert_uint_eq(e[pv].round_to, 4096);
	ck_assert_int_eq(e[cp_heap_entry_find("realloc")].kind,
			 CP_HEAP_KIND_REALLOC);
	ck_assert_uint_eq(sum()->nentries, n);
}
END_TEST

START_TEST(metric_names)
{
	ck_assert_int_eq(cp_heap_metric_parse("live-bytes"), CP_HEAP_LIVE_BYTES);
	ck_assert_int_eq(cp_heap_metric_parse("alloc-count"),
			 CP_HEAP_ALLOC_COUNT);
	ck_assert_int_eq(cp_heap_metric_parse("bytes"), -1);
}
END_TEST

static Suite *heaptable_suite(void)
{
	Suite *s = suite_create("heaptable");
	TCase *tc = tcase_create("events");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, pairs);
	tcase_add_test(tc, live_blocks_by_site);
	tcase_add_test(tc, realloc_moving_and_in_place);
	tcase_add_test(tc, realloc_null_and_zero);
	tcase_add_test(tc, realloc_failed_keeps_block);
	tcase_add_test(tc, realloc_block_taken_before_it_returns);
	tcase_add_test(tc, failed_allocations);
	tcase_add_test(tc, frees_not_live);
	tcase_add_test(tc, internal_frees);
	tcase_add_test(tc, temporaries_per_thread);
	tcase_add_test(tc, born_twice);
	tcase_add_test(tc, many_blocks);
	suite_add_tcase(s, tc);
	tc = tcase_create("timeline");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, peak_of_a_brief_spike);
	tcase_add_test(tc, timeline_spans);
	tcase_add_test(tc, short_run_timeline);
	suite_add_tcase(s, tc);
	tc = tcase_create("entries");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, descriptor_table);
	tcase_add_test(tc, metric_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(heaptable_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
