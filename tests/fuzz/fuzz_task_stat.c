/* Fuzz the /proc/PID/task/TID/stat parser, cp_task_stat_parse().
 *
 * The input is one stat line; its command name is chosen by the target
 * (prctl(PR_SET_NAME), up to 15 bytes of anything but NUL, parentheses
 * and spaces included).  What must hold, beyond no crash or undefined
 * behaviour: the parser reads only the LEN bytes it is given (the input
 * is not NUL-terminated, so ASan sees any read past it), and on success
 * the command name is a NUL-terminated string.  */
#include <stdint.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "fuzzutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cp_task_stat stat;
	int rc = cp_task_stat_parse((const char *)data, size, &stat);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_PARSE, "unexpected error %s",
			   cp_strerror(rc));
		return 0;
	}
	FUZZ_CHECK(memchr(stat.comm, '\0', sizeof(stat.comm)) != NULL,
		   "the command name is not NUL-terminated");
	FUZZ_CHECK(cp_task_state_name(stat.state) != NULL,
		   "no name for state %d", stat.state);
	return 0;
}
