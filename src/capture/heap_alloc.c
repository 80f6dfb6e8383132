/* Heap mode's allocator: the descriptor table of its entry points (what
 * each argument and result means) and the lookup of their addresses in
 * the target, in link-map order.  See heap_alloc.h.  */
#include "capture/heap_alloc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"

#define NO CP_HEAP_NO_ARG

/* The traced entry points, in the order the report lists them.  A row:
 * name, kind, result, then the arguments holding size, count, alignment,
 * the old or freed block, the stored result; the size's rounding; whether
 * tracing needs it.  */
static const struct cp_heap_entry entries[] = {
	{ "malloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  0, NO, NO, NO, NO, 0, true },
	{ "calloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  1, 0, NO, NO, NO, 0, false },
	{ "realloc", CP_HEAP_KIND_REALLOC, CP_HEAP_RESULT_PTR,
	  1, NO, NO, 0, NO, 0, false },
	{ "reallocarray", CP_HEAP_KIND_REALLOC, CP_HEAP_RESULT_PTR,
	  2, 1, NO, 0, NO, 0, false },
	{ "free", CP_HEAP_KIND_FREE, CP_HEAP_RESULT_NONE,
	  NO, NO, NO, 0, NO, 0, false },
	{ "posix_memalign", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_STORED,
	  2, NO, 1, NO, 0, 0, false },
	{ "aligned_alloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  1, NO, 0, NO, NO, 0, false },
	{ "memalign", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  1, NO, 0, NO, NO, 0, false },
	{ "valloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  0, NO, NO, NO, NO, 0, false },
	{ "pvalloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  0, NO, NO, NO, NO, 4096, false },
};

#define NENTRIES (sizeof(entries) / sizeof(entries[0]))
_Static_assert(NENTRIES <= CP_HEAP_MAX_ENTRIES,
	       "raise CP_HEAP_MAX_ENTRIES for the new rows");

const struct cp_heap_entry *cp_heap_entries(size_t *n)
{
	*n = NENTRIES;
	return entries;
}

int cp_heap_entry_find(const char *name)
{
	for (size_t i = 0; i < NENTRIES; i++)
		if (strcmp(entries[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* ------------------------------------------------------ lookup */

/* The lookup itself is the address space's (cprof/addrspace.h): the
 * modules in link-map order, each file the one mapped where its dynamic
 * section lies (never a name the link map gives), opened by the rules of
 * cprof/tpath.h.  */

int cp_heap_alloc_find(struct cp_addrspace *space, uint64_t r_debug,
		       struct cp_heap_found *found, uint64_t *r_debug_out)
{
	memset(found, 0, CP_HEAP_MAX_ENTRIES * sizeof(*found));
	/* The mappings as they are now: the dynamic linker has just mapped
	 * the program's libraries (launch mode), or a dlopen came.  */
	cp_addrspace_refresh(space);
	const struct cp_addrspace_view *view = cp_addrspace_view(space);
	const char *names[NENTRIES];
	struct cp_addrspace_symbol syms[NENTRIES];
	memset(syms, 0, sizeof(syms));
	for (size_t f = 0; f < NENTRIES; f++)
		names[f] = entries[f].name;
	int rc = cp_addrspace_find_symbols(space, &view, r_debug, names,
					   NENTRIES, 0, syms, r_debug_out);
	for (size_t f = 0; rc >= 0 && f < NENTRIES; f++)
		if (syms[f].value) {
			found[f].addr = syms[f].value;
			snprintf(found[f].module, sizeof(found[f].module), "%s",
				 syms[f].name);
		}
	cp_addrspace_view_release(view);
	return rc < 0 ? rc : 0;
}

int cp_heap_alloc_loader(struct cp_addrspace *space, uint64_t base,
			 uint64_t *brk, uint64_t *r_debug)
{
	static const char *const names[] = { "_dl_debug_state", "_r_debug" };
	uint64_t values[2] = {0, 0};
	const struct cp_addrspace_view *view = cp_addrspace_view(space);
	const struct cp_addrspace_module *ld =
		cp_addrspace_view_module(view, base);
	if (!ld) {
		/* Mapped since the view was taken (an exec of ours).  */
		cp_addrspace_view_release(view);
		cp_addrspace_refresh(space);
		view = cp_addrspace_view(space);
		ld = cp_addrspace_view_module(view, base);
	}
	/* The loader is linked at 0 (ET_DYN): its bias is BASE.  */
	if (ld)
		cp_addrspace_module_symbols(ld, names, 2, CP_ADDRSPACE_SYM_DATA,
					    values);
	cp_addrspace_view_release(view);
	*brk = values[0];
	*r_debug = values[1];
	return values[0] ? 0 : -1;
}
