/* What the session offers the parts of libcprof that write into the
 * target (heap tracing, breakpoints, profiling a function): one set of
 * target hooks shared by all of them, fork following on demand, and a
 * symbolizer of the caller's thread for looking names up.  Internal to
 * libcprof.
 *
 * The target has one hook set (cp_target_set_hooks).  The session
 * installs its own dispatcher once, at attach or launch, and hands every
 * SIGTRAP to each client's on_trap in the order they were added until
 * one says CP_TRAP_HANDLED; every client hears of every fork child and
 * exec.  A client's hooks see only what they set: each recognizes its own
 * int3s by address.  */
#ifndef CPROF_SESSION_HOOKS_H
#define CPROF_SESSION_HOOKS_H

#include <stdbool.h>
#include <stddef.h>

#include "cprof/session.h"
#include "cprof/target.h"

/* The most clients at once.  */
#define CP_SESSION_HOOKS_MAX 8

/* Add HOOKS (copied; HOOKS->arg names the client) to the list.  Returns 0,
 * -CP_E_GONE when nothing is attached, or -CP_E_BUSY when the list is
 * full.  */
int cp_session_hooks_add(struct cp_session *session,
			 const struct cp_target_hooks *hooks);

/* How many clients there are.  */
size_t cp_session_hooks_count(const struct cp_session *session);

/* A client that cannot share the target with others as it is (heap
 * tracing with several tracer threads, whose threads' traps no other
 * client would see): END(ARG) is called, once, before another client is
 * added, and must make it shareable; its failure fails the adding.  END
 * NULL: none.  */
void cp_session_hooks_exclusive(struct cp_session *session,
				int (*end)(void *arg), void *arg);

/* Take the client whose hooks have ARG out of the list (nothing when it
 * is not in it).  Safe inside a hold (cp_target_hold_all): it changes no
 * thread.  */
void cp_session_hooks_remove(struct cp_session *session, void *arg);

/* Fork children must be followed (NEED: one more user wants them, else
 * one fewer): an int3 left in a child's copy of the code would kill it
 * with SIGTRAP.  Followed while any user needs it, or always when the
 * configuration says follow_forks.  Holds every thread for a moment when
 * the setting changes, so never call it inside a hold.  Returns 0 or
 * -CP_E_GONE.  */
int cp_session_forks_need(struct cp_session *session, bool need);

/* A symbolizer over the target's address space for the caller's thread
 * only (finding a breakpoint's location, naming a backtrace's frames
 * while a sampler's or a heap trace's symbolizer thread owns the
 * session's own).  Created on first use; NULL when nothing is attached
 * or out of memory.  Borrowed until detach.  */
struct cp_symbols *cp_session_lookup_symbols(struct cp_session *session);

/* The session's unwinder (for a capture engine of one's own); NULL when
 * nothing is attached.  Borrowed.  */
struct cp_unwinder *cp_session_unwinder(struct cp_session *session);

#endif
