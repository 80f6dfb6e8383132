/* The resolver: address -> profile location, with the symbolizer running
 * on a thread of its own, so that reading debug information (hundreds of
 * milliseconds for a large library's DWARF) never delays a sampling tick.
 * Internal to libcprof; used by the sampler.
 *
 * A new address gets a location at once, without lines; its lines are
 * filled in when the symbolizer thread has resolved it and the sampler
 * collects the result.  */
#ifndef CPROF_RESOLVER_H
#define CPROF_RESOLVER_H

#include <stdbool.h>
#include <stdint.h>

#include "cprof/profile.h"
#include "cprof/symbols.h"

struct cp_resolver;

/* Start the symbolizer thread.  SYMBOLS is used only by that thread until
 * cp_resolver_finish() returns.  Returns 0 or -CP_E_NOMEM/-CP_E_SYS.  */
int cp_resolver_start(struct cp_symbols *symbols, struct cp_profile *profile,
		      struct cp_resolver **out);

/* The location of ADDRESS, created (and queued for symbolization) on
 * first sight.  UINT32_MAX when out of memory.  */
uint32_t cp_resolver_location(struct cp_resolver *res, uint64_t address);

/* Give queued addresses to the symbolizer and apply its finished results
 * to the profile.  Cheap; call once per tick.  */
void cp_resolver_collect(struct cp_resolver *res);

/* The target exec'ed: every address means something new from now on.
 * Done by itself when the epoch of the symbolizer's address space
 * changes (cp_addrspace_exec).  */
void cp_resolver_reset(struct cp_resolver *res);

/* From now on, new addresses get their locations in PROFILE (a window
 * boundary of continuous sampling): the profile filled so far is
 * retiring, its addresses still being named, until
 * cp_resolver_retired() hands it back.  Returns 0, or -CP_E_BUSY while
 * an earlier one is still retiring.  */
int cp_resolver_rebind(struct cp_resolver *res, struct cp_profile *profile);

/* The retiring profile once every address queued for it is named (the
 * caller owns it then), else NULL.  With WAIT, wait for the symbolizer
 * to finish it first (it may read debug information: slow).  NULL as
 * well when nothing retires.  */
struct cp_profile *cp_resolver_retired(struct cp_resolver *res, bool wait);

/* Wait until every queued address is resolved, apply the results, stop
 * the thread and free RES.  NULL is fine.  */
void cp_resolver_finish(struct cp_resolver *res);

#endif
