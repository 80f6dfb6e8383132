/* The perf ring reader (src/capture/perf_ring.h) on rings written here
 * as the kernel writes them: records that wrap around the ring's end, a
 * lost-records report, a sample with and without the identifier, and a
 * ring whose tail is not at a record.  */
#include <check.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/regs.h"
#include "capture/perf_ring.h"
#include "cprof/error.h"

#define DATA_SIZE 4096

/* A ring: its meta page, then DATA_SIZE bytes of data.  */
struct ring {
	struct perf_event_mmap_page *meta;
	unsigned char *data;
	uint64_t head;
};

static struct ring ring_new(uint64_t start)
{
	struct ring r;
	size_t page = sizeof(struct perf_event_mmap_page);
	r.meta = calloc(1, page + DATA_SIZE);
	ck_assert_ptr_nonnull(r.meta);
	r.meta->data_offset = page;
	r.meta->data_size = DATA_SIZE;
	r.meta->data_tail = start;
	r.data = (unsigned char *)r.meta + page;
	r.head = start;
	return r;
}

/* Append LEN bytes of REC at the head, wrapping.  */
static void ring_put(struct ring *r, const void *rec, size_t len)
{
	const unsigned char *p = rec;
	for (size_t i = 0; i < len; i++)
		r->data[(r->head + i) % DATA_SIZE] = p[i];
	r->head += len;
	r->meta->data_head = r->head;
}

/* A sample of the clock's or the uprobes' layout, TID, TIME, registers
 * numbered from 1, and COPY bytes of stack (each its offset's low byte),
 * LEN its length; with IDENTIFIED an identifier ID first.  */
static size_t sample(unsigned char *out, bool identified, uint64_t id,
		     uint32_t tid, uint64_t time, size_t copy)
{
	struct perf_event_header h = {.type = PERF_RECORD_SAMPLE};
	size_t at = sizeof(h);
	uint32_t ids[2] = {tid, tid};
	uint64_t abi = PERF_SAMPLE_REGS_ABI_64;
	if (identified) {
		memcpy(out + at, &id, 8);
		at += 8;
	}
	memcpy(out + at, ids, 8);
	at += 8;
	memcpy(out + at, &time, 8);
	at += 8;
	memcpy(out + at, &abi, 8);
	at += 8;
	for (uint64_t i = 0; i < CP_REGS_PERF_COUNT; i++) {
		uint64_t v = i + 1;
		memcpy(out + at, &v, 8);
		at += 8;
	}
	uint64_t size = copy;
	memcpy(out + at, &size, 8);
	at += 8;
	for (size_t i = 0; i < copy; i++)
		out[at + i] = (unsigned char)i;
	at += copy;
	if (copy) {
		memcpy(out + at, &size, 8); /* the dynamic size */
		at += 8;
	}
	h.size = (uint16_t)at;
	memcpy(out, &h, sizeof(h));
	return at;
}

struct seen {
	unsigned samples, lost_records, without_bytes;
	uint64_t lost;
	uint64_t times[16];
	size_t stack_lens[16];
	bool stacks_right;
	bool identified;
};

static void on_record(void *arg, uint32_t type, const unsigned char *rec,
		      size_t len)
{
	struct seen *s = arg;
	if (!rec) {
		s->without_bytes++;
		return;
	}
	if (type == PERF_RECORD_LOST) {
		s->lost_records++;
		s->lost += cp_perf_lost(rec, len);
		return;
	}
	ck_assert_uint_eq(type, PERF_RECORD_SAMPLE);
	struct cp_perf_sample smp;
	ck_assert(cp_perf_sample_parse(rec, len, s->identified, &smp));
	ck_assert_int_eq(smp.tid, 42);
	ck_assert_ptr_nonnull(smp.regs);
	ck_assert_uint_eq(smp.regs[0], 1);
	ck_assert_uint_eq(smp.regs[CP_REGS_PERF_COUNT - 1],
			  CP_REGS_PERF_COUNT);
	if (s->identified)
		ck_assert_uint_eq(smp.id, 7);
	for (size_t i = 0; i < smp.stack_len; i++)
		if (smp.stack[i] != (unsigned char)i)
			s->stacks_right = false;
	if (s->samples < 16) {
		s->times[s->samples] = smp.time_ns;
		s->stack_lens[s->samples] = smp.stack_len;
	}
	s->samples++;
}

/* Samples with stack copies, the second wrapping around the ring's end,
 * then a lost-records report wrapping too (a ring of its own): every
 * one given whole, in order, and the tail moved past them.  */
START_TEST(test_wrapping_records)
{
	for (int identified = 0; identified <= 1; identified++) {
		unsigned char rec[1024], second[1024];
		size_t n = sample(rec, identified, 7, 42, 1000, 64);
		size_t n2 = sample(second, identified, 7, 42, 2000, 96);
		/* The second starts 40 bytes before the end.  */
		struct ring r = ring_new(DATA_SIZE - 40 - n);
		ring_put(&r, rec, n);
		ring_put(&r, second, n2);
		unsigned char *scratch = NULL;
		size_t cap = 0;
		struct seen s = {.stacks_right = true,
				 .identified = identified};
		ck_assert_int_eq(cp_perf_ring_take(r.meta, &scratch, &cap,
						   on_record, &s), 0);
		ck_assert_uint_eq(s.samples, 2);
		ck_assert_uint_eq(s.times[0], 1000);
		ck_assert_uint_eq(s.stack_lens[0], 64);
		ck_assert_uint_eq(s.times[1], 2000);
		ck_assert_uint_eq(s.stack_lens[1], 96);
		ck_assert(s.stacks_right);
		ck_assert_uint_eq(s.without_bytes, 0);
		ck_assert_uint_eq(r.meta->data_tail, r.head);
		ck_assert_ptr_nonnull(scratch); /* the wrapped sample's */
		/* Nothing new: nothing given.  */
		struct seen again = {.stacks_right = true};
		ck_assert_int_eq(cp_perf_ring_take(r.meta, &scratch, &cap,
						   on_record, &again), 0);
		ck_assert_uint_eq(again.samples + again.lost_records, 0);
		free(scratch);
		free(r.meta);
	}
	/* { header, id, lost } starting 8 bytes before the end.  */
	struct ring r = ring_new(DATA_SIZE - 8);
	struct perf_event_header h = {.type = PERF_RECORD_LOST,
				      .size = sizeof(h) + 16};
	unsigned char rec[64];
	uint64_t lost[2] = {7, 5};
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), lost, 16);
	ring_put(&r, rec, h.size);
	struct seen s = {.stacks_right = true};
	ck_assert_int_eq(cp_perf_ring_take(r.meta, NULL, NULL, on_record, &s),
			 0);
	ck_assert_uint_eq(s.lost_records, 1);
	ck_assert_uint_eq(s.lost, 5);
	ck_assert_uint_eq(r.meta->data_tail, r.head);
	free(r.meta);
}
END_TEST

/* Without a scratch buffer a wrapped sample comes without its bytes
 * (counted by the caller), and a wrapped small record whole.  */
START_TEST(test_no_scratch)
{
	unsigned char rec[1024];
	size_t n = sample(rec, false, 0, 42, 1000, 128);
	struct ring r = ring_new(DATA_SIZE - n / 2);
	ring_put(&r, rec, n);
	struct seen s = {.stacks_right = true};
	ck_assert_int_eq(cp_perf_ring_take(r.meta, NULL, NULL, on_record, &s),
			 0);
	ck_assert_uint_eq(s.without_bytes, 1);
	ck_assert_uint_eq(s.samples, 0);
	ck_assert_uint_eq(r.meta->data_tail, r.head);
	free(r.meta);
}
END_TEST

/* A header that is no record (size 0, or past the head): the rest is
 * dropped, not read again at every take.  */
START_TEST(test_not_a_record)
{
	struct ring r = ring_new(0);
	unsigned char rec[1024];
	size_t n = sample(rec, false, 0, 42, 1000, 16);
	ring_put(&r, rec, n);
	struct perf_event_header bad = {.type = PERF_RECORD_SAMPLE, .size = 0};
	ring_put(&r, &bad, sizeof(bad));
	ring_put(&r, rec, n);
	struct seen s = {.stacks_right = true};
	ck_assert_int_eq(cp_perf_ring_take(r.meta, NULL, NULL, on_record, &s),
			 0);
	ck_assert_uint_eq(s.samples, 1);
	ck_assert_uint_eq(r.meta->data_tail, r.head);
	free(r.meta);
}
END_TEST

/* Records cut short: refused before their registers or stack size.  */
START_TEST(test_short_samples)
{
	unsigned char rec[1024];
	size_t n = sample(rec, true, 7, 42, 1000, 0);
	struct cp_perf_sample smp;
	ck_assert(cp_perf_sample_parse(rec, n, true, &smp));
	ck_assert_ptr_null(smp.stack);
	ck_assert(!cp_perf_sample_parse(rec, n - 8, true, &smp));
	ck_assert(!cp_perf_sample_parse(rec, 40, true, &smp));
	ck_assert(!cp_perf_sample_parse(rec, 8, false, &smp));
	ck_assert_uint_eq(cp_perf_lost(rec, 8), 0);
}
END_TEST

static Suite *perfring_suite(void)
{
	Suite *suite = suite_create("perfring");
	TCase *tcase = tcase_create("ring");

	tcase_add_test(tcase, test_wrapping_records);
	tcase_add_test(tcase, test_no_scratch);
	tcase_add_test(tcase, test_not_a_record);
	tcase_add_test(tcase, test_short_samples);
	suite_add_tcase(suite, tcase);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(perfring_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
