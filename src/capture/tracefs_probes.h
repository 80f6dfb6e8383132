/* Uprobe events defined in tracefs (its uprobe_events file, as perf
 * probe defines them), for the heap's uprobe method: one definition per
 * event, shared by the perf events opened on it for each thread
 * (PERF_TYPE_TRACEPOINT, its id).  A uprobe perf event of its own (the
 * uprobe PMU) makes the kernel wait for grace periods when it is closed,
 * about 85 ms each; events sharing a definition wait only when the last
 * of them goes, once for all the probes of the definition.  The definitions are the machine's: they are removed
 * once their events are closed, and those a cprof-attach left behind
 * (killed) are removed by the next one.  Internal to libcprof.  */
#ifndef CPROF_TRACEFS_PROBES_H
#define CPROF_TRACEFS_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_TRACEFS_PROBES_MAX 32

struct cp_tracefs_probes {
	char dir[64];                 /* the tracefs mount, "" when none */
	char group[48];               /* cprof_PID_SERIAL */
	size_t n;                     /* events defined */
	uint64_t ids[CP_TRACEFS_PROBES_MAX]; /* their tracepoint ids */
};

/* Define N probes: at OFFSETS[i] of the file PATHS[i] (a path the
 * kernel resolves now: /proc/PID/map_files/...), at its return when
 * RETS[i], in event EVENTS[i] (0, 1, ... in the order of first use).
 * The probes of one event, all of one kind, share it: the kernel appends
 * a probe to an event of the same name (Linux 5.5 and later), and a
 * perf event opened on it takes all of its probes; its closing waits
 * for one grace period, not one per probe.  Returns 0 with P filled (the
 * id of event k in P->ids[k]), or -1 with nothing left defined (no
 * tracefs mounted, no permission, a kernel that does not append).  */
int cp_tracefs_probes_define(struct cp_tracefs_probes *p, size_t n,
			     const char *const paths[],
			     const uint64_t offsets[], const bool rets[],
			     const unsigned events[]);

/* Remove P's definitions (their events must be closed: the kernel
 * refuses while one is open).  */
void cp_tracefs_probes_remove(struct cp_tracefs_probes *p);

#endif
