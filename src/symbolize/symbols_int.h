/* What the symbolizer lends its neighbours in src/symbolize/ (lookup.c:
 * names to addresses).  Internal to libcprof.  */
#ifndef CPROF_SYMBOLS_INT_H
#define CPROF_SYMBOLS_INT_H

#include <elfutils/libdwfl.h>

#include "cprof/symbols.h"

/* The Dwfl of S, its modules reported as the target's mappings are now
 * (one re-read of them), for libdwfl calls made until
 * cp_symbols_dwfl_end: its callbacks (which open the modules' files by
 * the rules of cprof/tpath.h) know S only in between.  Borrowed until
 * cp_symbols_free; used only by the thread that uses S.  */
Dwfl *cp_symbols_dwfl_begin(struct cp_symbols *s);
void cp_symbols_dwfl_end(struct cp_symbols *s);

/* RAW (a symbol table's name) as S prints it: the version suffix
 * dropped, demangled unless no_demangle.  Borrowed until
 * cp_symbols_free.  */
const char *cp_symbols_display_name(struct cp_symbols *s, const char *raw);

/* Read separate debug files by compile unit (LAZY; symbolize/dwlazy.h)
 * or whole (the default).  Turned off, the modules read by unit are
 * opened again whole.  The resolver's symbolizer reads by unit;
 * cp_symbols_dwfl_begin turns it off (lookup.c reads every unit).  */
void cp_symbols_set_lazy(struct cp_symbols *s, bool lazy);

/* ADDRESSES are about to be looked up: when debug files are read by
 * unit, give each module's image the units of all of them at once (one
 * image for a batch, not one per new unit).  Answers are unchanged.  */
void cp_symbols_prefetch(struct cp_symbols *s, const uint64_t *addresses,
			 size_t n);

/* Compile units read apart, images of debug files made, debug files
 * read whole after all (every one met while reading by unit: those that
 * cannot be, those that needed too many images, all after
 * cp_symbols_set_lazy(false)).  */
void cp_symbols_lazy_stats(const struct cp_symbols *s, uint64_t *units,
			   uint64_t *images, size_t *whole);

#endif
