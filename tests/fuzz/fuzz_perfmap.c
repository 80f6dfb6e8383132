/* Fuzz the perf map table (cprof/perfmap.h): cp_perfmap_feed,
 * cp_perfmap_finish, cp_perfmap_lookup, cp_perfmap_parse_line.
 *
 * The input is the text of a /tmp/perf-PID.map, which the target writes
 * as it likes.  What must hold, beyond no crash, leak or undefined
 * behaviour:
 *   - the table agrees with a model built line by line from
 *     cp_perfmap_parse_line and the line-length rule (the same counts of
 *     symbols, bad lines, long lines and bytes);
 *   - the text fed whole, or in pieces of sizes chosen by the input's hash
 *     with lookups between the pieces (as a JIT appends while cprof
 *     looks), gives the same table: the same answer at every address
 *     probed;
 *   - a lookup answers only with a line of the model whose range holds
 *     the address, and for the start address of a line, with that line or
 *     a later one (the latest line wins).  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/perfmap.h"
#include "fuzzutil.h"

/* A line of the model.  */
struct line {
	uint64_t start, size;
	const char *name;
	size_t name_len;
};

#define MAX_PROBED 128

/* The model: every line taken, in order.  */
static size_t model(const uint8_t *data, size_t size, struct line **out,
		    struct cp_perfmap_stats *stats)
{
	struct line *lines = NULL;
	size_t n = 0, cap = 0;
	const char *text = (const char *)data, *end = text + size;

	memset(stats, 0, sizeof(*stats));
	stats->bytes = size;
	for (const char *p = text; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		struct line l;

		if (len >= CP_PERFMAP_MAX_LINE) {
			stats->long_lines++;
		} else if (!cp_perfmap_parse_line(p, len, &l.start, &l.size,
						  &l.name, &l.name_len) ||
			   l.size > UINT32_MAX) {
			stats->bad_lines++;
		} else {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				lines = realloc(lines, cap * sizeof(*lines));
				FUZZ_CHECK(lines != NULL, "out of memory");
			}
			lines[n++] = l;
			stats->symbols++;
		}
		p = nl ? nl + 1 : end;
	}
	*out = lines;
	return n;
}

static void same_stats(const struct cp_perfmap *map,
		       const struct cp_perfmap_stats *want, const char *how)
{
	struct cp_perfmap_stats got;

	cp_perfmap_stats(map, &got);
	FUZZ_CHECK(got.symbols == want->symbols &&
			   got.bad_lines == want->bad_lines &&
			   got.long_lines == want->long_lines &&
			   got.bytes == want->bytes,
		   "%s: %zu symbols, %llu bad, %llu long, %llu bytes; the "
		   "model: %zu, %llu, %llu, %llu", how, got.symbols,
		   (unsigned long long)got.bad_lines,
		   (unsigned long long)got.long_lines,
		   (unsigned long long)got.bytes, want->symbols,
		   (unsigned long long)want->bad_lines,
		   (unsigned long long)want->long_lines,
		   (unsigned long long)want->bytes);
}

/* The index of the latest line of the model that SYM is, or -1.  */
static long model_index(const struct line *lines, size_t n,
			const struct cp_perfmap_sym *sym)
{
	size_t len = strlen(sym->name);

	for (size_t i = n; i-- > 0;)
		if (lines[i].start == sym->start && lines[i].size == sym->size &&
		    lines[i].name_len == len &&
		    memcmp(lines[i].name, sym->name, len) == 0)
			return (long)i;
	return -1;
}

/* Look ADDRESS up in both tables; they must agree, and the answer must
 * be a line of the model holding it, no earlier than line AT_LEAST.  */
static void probe(struct cp_perfmap *whole, struct cp_perfmap *pieces,
		  const struct line *lines, size_t n, uint64_t address,
		  long at_least)
{
	struct cp_perfmap_sym a, b;
	bool found_a = cp_perfmap_lookup(whole, address, &a);
	bool found_b = cp_perfmap_lookup(pieces, address, &b);

	FUZZ_CHECK(found_a == found_b, "0x%llx found in one table only",
		   (unsigned long long)address);
	FUZZ_CHECK(found_a || at_least < 0, "0x%llx, the start of a line, "
		   "not found", (unsigned long long)address);
	if (!found_a)
		return;
	FUZZ_CHECK(a.start == b.start && a.size == b.size &&
			   strcmp(a.name, b.name) == 0,
		   "the tables disagree at 0x%llx", (unsigned long long)address);
	FUZZ_CHECK(address >= a.start && address - a.start < a.size,
		   "0x%llx answered with a line that does not hold it",
		   (unsigned long long)address);
	long index = model_index(lines, n, &a);
	FUZZ_CHECK(index >= 0, "0x%llx answered with no line of the text",
		   (unsigned long long)address);
	FUZZ_CHECK(index >= at_least, "0x%llx answered with line %ld, "
		   "older than line %ld that starts there",
		   (unsigned long long)address, index, at_least);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct line *lines;
	struct cp_perfmap_stats want;
	size_t n = model(data, size, &lines, &want);
	struct cp_perfmap *whole = cp_perfmap_new();
	struct cp_perfmap *pieces = cp_perfmap_new();
	uint64_t h = fuzz_hash(data, size);

	FUZZ_CHECK(whole && pieces, "out of memory");
	FUZZ_CHECK(cp_perfmap_feed(whole, (const char *)data, size) == 0,
		   "feed failed");
	FUZZ_CHECK(cp_perfmap_finish(whole) == 0, "finish failed");
	for (size_t i = 0; i < size;) {
		/* Pieces of 1 to 64 bytes, or 1 to 4096 for one input in
		 * four, as the hash says.  */
		h = h * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t piece = 1 + (size_t)(h >> 33) % ((h & 3) ? 64 : 4096);
		if (piece > size - i)
			piece = size - i;
		FUZZ_CHECK(cp_perfmap_feed(pieces, (const char *)data + i,
					   piece) == 0, "feed failed");
		i += piece;
		if ((h >> 20) & 1) {
			struct cp_perfmap_sym sym;
			cp_perfmap_lookup(pieces, h >> 8, &sym);
		}
	}
	FUZZ_CHECK(cp_perfmap_finish(pieces) == 0, "finish failed");
	same_stats(whole, &want, "fed whole");
	same_stats(pieces, &want, "fed in pieces");

	for (size_t i = 0; i < n && i < MAX_PROBED; i++) {
		/* The latest line starting where line I starts.  */
		long latest = (long)i;
		for (size_t j = i + 1; j < n; j++)
			if (lines[j].start == lines[i].start)
				latest = (long)j;
		probe(whole, pieces, lines, n, lines[i].start, latest);
		probe(whole, pieces, lines, n,
		      lines[i].start + (lines[i].size - 1), -1);
		probe(whole, pieces, lines, n, lines[i].start - 1, -1);
	}
	probe(whole, pieces, lines, n, h, -1);
	probe(whole, pieces, lines, n, 0, -1);
	probe(whole, pieces, lines, n, UINT64_MAX, -1);

	cp_perfmap_free(whole);
	cp_perfmap_free(pieces);
	free(lines);
	return 0;
}
