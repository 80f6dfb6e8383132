/* Fuzz the /proc/PID/status parser, cp_task_status_parse().
 *
 * The target chooses its Name: line (prctl(PR_SET_NAME)), and cprof reads
 * the status files of processes it does not trust.  What must hold,
 * beyond no crash or undefined behaviour: the parser reads only the LEN
 * bytes it is given, a refused input leaves every field "unknown", and
 * the ids it reports are in range.  */
#include <stdint.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "fuzzutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cp_task_status st;
	int rc = cp_task_status_parse((const char *)data, size, &st);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_PARSE, "unexpected error %s",
			   cp_strerror(rc));
		FUZZ_CHECK(st.tgid == -1 && st.tracer_pid == -1 &&
				   st.uid[0] == -1 && st.gid[0] == -1 &&
				   !st.have_sig_pending,
			   "a refused input left a field set");
		return 0;
	}
	FUZZ_CHECK(st.tgid >= -1 && st.tracer_pid >= -1, "negative id");
	for (int i = 0; i < 4; i++)
		FUZZ_CHECK(st.uid[i] >= -1 && st.uid[i] <= 4294967295L &&
				   st.gid[i] >= -1 && st.gid[i] <= 4294967295L,
			   "id out of range");
	return 0;
}
