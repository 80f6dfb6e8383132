/* Fuzz the /proc/PID/maps parser, cp_maps_parse(), and the lookup over
 * what it returns, cp_maps_find().
 *
 * The input is the text of a maps file (the target controls the file
 * names in it).  What must hold, beyond no crash, leak or undefined
 * behaviour: a parse succeeds with mappings sorted by start, each with
 * start <= end and a NUL-terminated path, or fails with the line it
 * stopped at; the lookup of any address inside a mapping finds a mapping
 * that contains it, and never one that does not.  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "fuzzutil.h"

static void check_find(const struct cp_maps *maps, uint64_t addr)
{
	const struct cp_map *m = cp_maps_find(maps, addr);
	FUZZ_CHECK(!m || (m->start <= addr && addr < m->end),
		   "0x%llx found in [0x%llx, 0x%llx)", (unsigned long long)addr,
		   (unsigned long long)(m ? m->start : 0),
		   (unsigned long long)(m ? m->end : 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cp_maps *maps = NULL;
	size_t bad_line = 0;
	int rc = cp_maps_parse((const char *)data, size, &maps, &bad_line);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_PARSE, "unexpected error %s",
			   cp_strerror(rc));
		FUZZ_CHECK(bad_line >= 1 && bad_line <= size,
			   "bad line %zu of %zu bytes", bad_line, size);
		return 0;
	}
	bool disjoint = true;
	for (size_t i = 0; i < maps->count; i++) {
		const struct cp_map *m = &maps->maps[i];
		FUZZ_CHECK(m->start <= m->end, "mapping %zu ends before it starts",
			   i);
		FUZZ_CHECK(m->path != NULL, "mapping %zu without a path", i);
		(void)strlen(m->path); /* NUL-terminated: ASan checks */
		if (i > 0) {
			FUZZ_CHECK(maps->maps[i - 1].start <= m->start,
				   "mappings not sorted at %zu", i);
			disjoint &= maps->maps[i - 1].end <= m->start;
		}
	}
	for (size_t i = 0; i < maps->count; i++) {
		const struct cp_map *m = &maps->maps[i];
		check_find(maps, m->start);
		check_find(maps, m->end);
		if (m->end > m->start) {
			check_find(maps, m->end - 1);
			check_find(maps, m->start + (m->end - m->start) / 2);
			/* Real maps never overlap; then nothing inside one
			 * may be missed.  */
			if (disjoint)
				FUZZ_CHECK(cp_maps_find(maps, m->start) == m,
					   "mapping %zu not found by its start",
					   i);
		}
	}
	check_find(maps, 0);
	check_find(maps, UINT64_MAX);
	cp_maps_free(maps);
	return 0;
}
