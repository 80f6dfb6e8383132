/* Reading the ring of a perf event (mapped: a meta page, then the data)
 * and the sample records cprof's events write there: the CPU clocks'
 * (capture/clock.h) and the heap uprobes' (capture/heap_uprobe.h).
 * No system call.  Internal to libcprof.  */
#ifndef CPROF_PERF_RING_H
#define CPROF_PERF_RING_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A sample record of sample_type [IDENTIFIER |] TID | TIME | REGS_USER |
 * STACK_USER, its fields pointing into the record.  */
struct cp_perf_sample {
	uint64_t id;                /* IDENTIFIER's, 0 without */
	pid_t tid;
	uint64_t time_ns;
	const uint64_t *regs;       /* CP_REGS_PERF_COUNT of them; NULL:
				     * none (ABI_NONE) */
	const unsigned char *stack; /* the copy, from the stack pointer up;
				     * NULL: none */
	size_t stack_len;           /* its bytes (the dynamic size) */
};

/* Parse REC (LEN bytes, contiguous), a sample of that layout, with the
 * IDENTIFIER field when IDENTIFIED.  Returns false when it is cut short
 * before its stack's size.  */
bool cp_perf_sample_parse(const unsigned char *rec, size_t len,
			  bool identified, struct cp_perf_sample *out);

/* The count of PERF_RECORD_LOST REC (LEN bytes): 0 if it is short.  */
uint64_t cp_perf_lost(const unsigned char *rec, size_t len);

/* Give FN each record between the tail and the head of the ring at META,
 * oldest first, contiguous: a record that wraps around the ring's end is
 * put together in a buffer (small ones on our stack, samples in *SCRATCH,
 * grown, *SCRATCH_CAP its size); with SCRATCH NULL, or when it cannot
 * grow, FN gets REC NULL for it.  Then the tail is moved past them.
 * Returns 0, or -CP_E_NOMEM when a record was given without its bytes
 * for want of memory.  */
int cp_perf_ring_take(struct perf_event_mmap_page *meta,
		      unsigned char **scratch, size_t *scratch_cap,
		      void (*fn)(void *arg, uint32_t type,
				 const unsigned char *rec, size_t len),
		      void *arg);

#endif
