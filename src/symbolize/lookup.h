/* Names to addresses: where a breakpoint goes ("handle_request",
 * "trigger.c:42"), and the function names of the target for completion.
 * The opposite direction of cp_symbols_lookup.  Internal to libcprof.  */
#ifndef CPROF_LOOKUP_H
#define CPROF_LOOKUP_H

#include <stdbool.h>
#include <stdint.h>

#include "cprof/symbols.h"

/* Where a location is (struct cp_location is the profile's).  */
struct cp_place {
	uint64_t addr;         /* where to break */
	uint64_t entry;        /* the first instruction of its function (0:
				* unknown, for a FILE:LINE in no symbol) */
	char function[256];    /* as cprof prints it ("" when unknown) */
	char file[256];        /* source file ("" when unknown) */
	unsigned line;         /* source line (0 when unknown) */
	char module[256];      /* the module's file */
};

/* cp_symbols_locate FLAGS.  */
enum {
	/* FUNC: its first instruction, not the end of its prologue (the
	 * return address is then at the stack pointer: profiling a
	 * function catches its return there).  */
	CP_LOCATE_ENTRY = 1 << 0,
};

/* Find LOCATION in the target SYMBOLS reads:
 * - "FILE:LINE" (LINE all digits): the lowest address of the first line
 *   at or after LINE that has code, in a source file whose name ends in
 *   FILE (at a '/' boundary); every module with debug information is
 *   searched, the executable first.
 * - "FUNC": a function symbol whose name is FUNC as the symbol table has
 *   it (mangled, versions dropped) or as cprof prints it (demangled,
 *   with or without its parameter list).  The executable first, then the
 *   other modules in address order; a global symbol before a local one.
 *   The address is after the function's prologue, as a debugger sets a
 *   breakpoint on a function: the first line-table row past the
 *   function's first line (or the row DWARF marks prologue_end), when
 *   that lies inside the function; its entry when there is no line table
 *   or with CP_LOCATE_ENTRY.
 * Fills *OUT.  Returns 0, -CP_E_NOSYM (nothing found) or -CP_E_NOMEM.
 * Uses SYMBOLS on the calling thread: not a symbolizer another thread
 * owns.  */
int cp_symbols_locate(struct cp_symbols *symbols, const char *location,
		      unsigned flags, struct cp_place *out);

/* Call FN with every function symbol name (as cprof prints it) of the
 * target's modules that begins with PREFIX, each once, in sorted order,
 * until FN returns false.  Returns the number of names passed, or
 * -CP_E_NOMEM.  */
long cp_symbols_functions(struct cp_symbols *symbols, const char *prefix,
			  bool (*fn)(void *arg, const char *name), void *arg);

#endif
