/* The session's breakpoints (cprof/session.h, "breakpoints"): int3s at
 * places the caller names, hits counted, a hit held for the caller while
 * it waits, every byte restored at delete, disable, detach.  A client of
 * the session's hook list (capture/session_hooks.h).  Internal to
 * libcprof.  */
#ifndef CPROF_BREAKS_H
#define CPROF_BREAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cprof/session.h"
#include "cprof/target.h"
#include "symbolize/lookup.h"

struct cp_breaks;

/* Breakpoints for the target SESSION has attached (TARGET), their hooks
 * added to the session's list.  LOCATE (may be NULL) finds a location in
 * the target's image as it is when called: after an exec, the pending
 * breakpoints are put into the new image where it finds them.  Returns
 * 0, -CP_E_NOMEM or -CP_E_BUSY (the hook list is full).  */
int cp_breaks_new(struct cp_session *session, struct cp_target *target,
		  int (*locate)(void *arg, const char *location,
				struct cp_place *out),
		  void *locate_arg, struct cp_breaks **out);

/* Every byte restored (cp_breaks_remove_all, when the target still
 * lives), the hooks taken out, and B freed.  NULL is fine.  */
void cp_breaks_free(struct cp_breaks *b);

/* A breakpoint at PLACE (from cp_symbols_locate), named LOCATION as the
 * caller gave it, or pending when PLACE is NULL (a launched command
 * before its exec: put in at the exec); *ID (may be NULL) its number.  Returns 0, -CP_E_INVAL
 * (an int3 of someone else's is there, or the instruction is a system
 * call, which a hit could not be passed over), -CP_E_NOMEM or
 * -CP_E_SYS.  */
int cp_breaks_insert(struct cp_breaks *b, const struct cp_place *place,
		     const char *location, bool temporary, int *id);

/* Delete, disable or enable breakpoint ID.  Returns 0 or -CP_E_INVAL.  */
int cp_breaks_delete(struct cp_breaks *b, int id);
int cp_breaks_enable(struct cp_breaks *b, int id, bool enabled);

/* The breakpoints in order of ID; borrowed until the next call that
 * changes them.  */
const struct cp_session_break *cp_breaks_list(const struct cp_breaks *b,
					      size_t *count);

/* How many breakpoints there are.  */
size_t cp_breaks_count(const struct cp_breaks *b);

/* Hits are held for the caller (ON: a cp_session_wait is under way) or
 * counted and passed at once.  */
void cp_breaks_set_waiting(struct cp_breaks *b, bool on);

/* A hit held and not reported yet: into *HIT, marked reported (a
 * temporary breakpoint deleted).  False when there is none.  */
bool cp_breaks_take_hit(struct cp_breaks *b, struct cp_session_hit *hit);

/* Is a hit held and not reported yet?  */
bool cp_breaks_has_hit(const struct cp_breaks *b);

/* The held thread once reported, or NULL.  */
const struct cp_session_hit *cp_breaks_held(const struct cp_breaks *b);

/* Let the held thread go on past its breakpoint.  Returns 0 or
 * -CP_E_NOTHELD.  */
int cp_breaks_continue(struct cp_breaks *b);

/* Take every int3 out (the bytes restored and read back; threads with
 * their trap still queued rewound first), let a held thread go, as
 * before a detach.  The breakpoints stay listed, pending (addr 0).
 * Returns 0 or -CP_E_SYS when a byte could not be restored.  */
int cp_breaks_remove_all(struct cp_breaks *b);

/* The first internal failure met while passing a hit (a byte not
 * written back), 0 when none; cleared.  */
int cp_breaks_take_error(struct cp_breaks *b);

#endif
