/* Reading a perf event's ring (perf_ring.h).  */
#include "capture/perf_ring.h"

#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/regs.h"
#include "cprof/error.h"

bool cp_perf_sample_parse(const unsigned char *rec, size_t len,
			  bool identified, struct cp_perf_sample *out)
{
	memset(out, 0, sizeof(*out));
	size_t at = sizeof(struct perf_event_header);
	uint32_t ids[2];
	uint64_t abi;
	if (at + (identified ? 8 : 0) + 8 + 8 + 8 > len)
		return false;
	if (identified) {
		memcpy(&out->id, rec + at, 8);
		at += 8;
	}
	memcpy(ids, rec + at, 8);
	out->tid = (pid_t)ids[1];
	at += 8;
	memcpy(&out->time_ns, rec + at, 8);
	at += 8;
	memcpy(&abi, rec + at, 8);
	at += 8;
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		if (at + 8 * CP_REGS_PERF_COUNT > len)
			return false;
		out->regs = (const uint64_t *)(const void *)(rec + at);
		at += 8 * CP_REGS_PERF_COUNT;
	}
	if (at + 8 > len)
		return false;
	uint64_t size;
	memcpy(&size, rec + at, 8);
	at += 8;
	if (size && at + size + 8 <= len) {
		uint64_t dyn;
		memcpy(&dyn, rec + at + size, 8);
		out->stack = rec + at;
		out->stack_len = (size_t)(dyn < size ? dyn : size);
	}
	return true;
}

uint64_t cp_perf_lost(const unsigned char *rec, size_t len)
{
	/* { header, id, lost } */
	uint64_t lost = 0;
	if (len >= sizeof(struct perf_event_header) + 16)
		memcpy(&lost, rec + sizeof(struct perf_event_header) + 8, 8);
	return lost;
}

/* LEN bytes of the ring's DATA (SIZE bytes) from offset OFF, wrapping.  */
static void ring_copy(unsigned char *dst, const unsigned char *data,
		      uint64_t size, uint64_t off, size_t len)
{
	size_t at = (size_t)(off % size);
	size_t first = len < size - at ? len : (size_t)(size - at);
	memcpy(dst, data + at, first);
	memcpy(dst + first, data, len - first);
}

#define SMALL_RECORD 64

/* *SCRATCH grown to hold LEN bytes (*CAP its size), or NULL: no SCRATCH
 * given, or no memory.  */
static unsigned char *scratch_for(unsigned char **scratch, size_t *cap,
				  size_t len)
{
	if (!scratch)
		return NULL;
	if (*cap < len) {
		unsigned char *grown = realloc(*scratch, len);
		if (!grown)
			return NULL;
		*scratch = grown;
		*cap = len;
	}
	return *scratch;
}

int cp_perf_ring_take(struct perf_event_mmap_page *meta,
		      unsigned char **scratch, size_t *scratch_cap,
		      void (*fn)(void *arg, uint32_t type,
				 const unsigned char *rec, size_t len),
		      void *arg)
{
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	const unsigned char *data =
		(const unsigned char *)meta + meta->data_offset;
	uint64_t size = meta->data_size;
	int rc = 0;
	while (tail < head && size) {
		struct perf_event_header h;
		/* Records are 8-byte aligned: a header never wraps.  */
		memcpy(&h, data + tail % size, sizeof(h));
		if (h.size < sizeof(h) || tail + h.size > head) {
			tail = head; /* not a record: drop the rest */
			break;
		}
		const unsigned char *rec = data + tail % size;
		unsigned char small[SMALL_RECORD];
		if (tail % size + h.size > size) {
			/* It wraps around the ring's end: put together.  */
			unsigned char *buf =
				h.size <= sizeof(small)
					? small
					: scratch_for(scratch, scratch_cap, h.size);
			if (buf)
				ring_copy(buf, data, size, tail, h.size);
			else if (scratch)
				rc = -CP_E_NOMEM;
			rec = buf;
		}
		fn(arg, h.type, rec, h.size);
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return rc;
}
