/* Heap mode's allocator lookup: where the target's allocator entry points
 * (the rows of cp_heap_entries) are, found the way the dynamic linker
 * binds them.  Internal to libcprof.  */
#ifndef CPROF_HEAP_ALLOC_H
#define CPROF_HEAP_ALLOC_H

#include <stdint.h>
#include <sys/types.h>

#include "cprof/heaptable.h"

/* Where one entry point was found.  */
struct cp_heap_found {
	uint64_t addr;           /* 0: not defined */
	char module[128];        /* basename of the module defining it */
};

struct cp_addrspace;

/* Look up every row of the descriptor table in the target whose address
 * space is SPACE (refreshed first): for each, the first module in
 * link-map order that defines and exports it (the executable alone when
 * there is no link map: static, or the dynamic linker has not run; its
 * .symtab with local symbols too), by cp_addrspace_find_symbols.
 * R_DEBUG: where the dynamic linker's struct r_debug is when known (0:
 * from the executable's DT_DEBUG); *R_DEBUG_OUT gets the one used.
 * FOUND has CP_HEAP_MAX_ENTRIES rows.  Returns 0, -CP_E_NOALLOC (no
 * module), or another -CP_E_* code.  */
int cp_heap_alloc_find(struct cp_addrspace *space, uint64_t r_debug,
		       struct cp_heap_found *found, uint64_t *r_debug_out);

/* Launch mode: the dynamic linker is mapped at BASE and has not run.
 * Find in its file the function it calls after each change of the link
 * map (_dl_debug_state, which glibc and musl export for debuggers: the
 * r_brk of struct r_debug, not yet filled in) and its struct r_debug.
 * Returns 0 or -1.  */
int cp_heap_alloc_loader(struct cp_addrspace *space, uint64_t base,
			 uint64_t *brk, uint64_t *r_debug);

#endif
