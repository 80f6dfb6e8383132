#include <time.h>
#include <string.h>
#include "cprof/session.h"
#include "cprof/error.h"

/* TEMPORARY (issue 14): weak stand-ins for the session calls whose
 * library side is being written (breakpoints, profile-a-function,
 * inspection), so the command language builds meanwhile; each is
 * replaced by the library's definition as it lands, and this file goes
 * when the last one has.  */
#define W __attribute__((weak))
W int cp_session_break_insert(struct cp_session *s, const char *l, bool t, int *id) { return -CP_E_NOSYM; }
W int cp_session_break_delete(struct cp_session *s, int id) { return -CP_E_INVAL; }
W int cp_session_break_enable(struct cp_session *s, int id, bool e) { return -CP_E_INVAL; }
W const struct cp_session_break *cp_session_breaks(const struct cp_session *s, size_t *n) { *n = 0; return NULL; }
static uint64_t now(void){struct timespec ts; clock_gettime(CLOCK_MONOTONIC,&ts); return ts.tv_sec*1000000000ull+ts.tv_nsec;}
W int cp_session_wait(struct cp_session *s, uint64_t until, volatile sig_atomic_t *stop, enum cp_session_end *end, struct cp_session_hit *hit) {
	enum cp_session_end e = CP_SESSION_DEADLINE;
	if (cp_session_heap(s) && 0) {}
	int rc = cp_session_sample_run(s, until, stop, &e);
	if (rc == -CP_E_BUSY || rc < 0) {
		rc = cp_session_heap_run(s, until, stop, &e);
		if (rc < 0) {
			while (now() < until && !(stop && *stop) && !cp_session_target_exited(s)) {
				struct timespec ts = {0, 10000000}; nanosleep(&ts, NULL);
			}
			e = stop && *stop ? CP_SESSION_STOPPED : cp_session_target_exited(s) ? CP_SESSION_EXITED : CP_SESSION_DEADLINE;
			rc = 0;
		}
	}
	if (end) *end = e;
	return rc;
}
W const struct cp_session_hit *cp_session_held(const struct cp_session *s) { return NULL; }
W int cp_session_held_regs(struct cp_session *s, struct user_regs_struct *r) { return -CP_E_NOTHELD; }
W int cp_session_backtrace(struct cp_session *s, pid_t tid, size_t d, struct cp_dump **out) { return cp_session_dump(s, d, out); }
W int cp_session_continue(struct cp_session *s) { return -CP_E_NOTHELD; }
W int cp_session_sample_start_in(struct cp_session *s, const char *f, const struct cp_sampler_options *o) { return -CP_E_NOSYM; }
W void cp_session_in_stats(const struct cp_session *s, struct cp_session_in_stats *st) { memset(st, 0, sizeof(*st)); }
W long cp_session_functions(struct cp_session *s, const char *p, bool (*fn)(void *, const char *), void *a) { return 0; }
W struct cp_addrspace *cp_session_addrspace(struct cp_session *s) { return NULL; }
W uint64_t cp_session_attached_ns(const struct cp_session *s) { return 0; }
W uint64_t cp_session_cpu_ns(const struct cp_session *s) { return 0; }
