/* Fuzz the parsers of /proc/PID/task/TID/syscall and .../schedstat,
 * cp_task_syscall_parse() and cp_task_schedstat_parse(), which the
 * sampler runs on every tick of --wall on text from the kernel.
 *
 * The input is the text of either file.  What must hold, beyond no crash
 * or undefined behaviour (the parsers read exactly SIZE bytes: the input
 * is not NUL-terminated):
 *   - each parser accepts or returns -CP_E_PARSE, and a refusal leaves a
 *     zeroed result (state RUNNING, nr -1), never a half-filled one;
 *   - an accepted syscall line is self-consistent: RUNNING has nothing
 *     else, BLOCKED has nr -1 and no arguments, IN_SYSCALL a number that
 *     fits an int;
 *   - what was accepted, written back the way the kernel writes it,
 *     parses to the same values (with and without the final newline).  */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "fuzzutil.h"

/* SC as the kernel writes it (fs/proc/base.c, proc_pid_syscall).  */
static size_t format_syscall(const struct cp_task_syscall *sc, char *buf,
			     size_t size)
{
	int n;
	switch (sc->state) {
	case CP_TASK_RUNNING:
		n = snprintf(buf, size, "running\n");
		break;
	case CP_TASK_BLOCKED:
		n = snprintf(buf, size, "-1 0x%" PRIx64 " 0x%" PRIx64 "\n",
			     sc->sp, sc->pc);
		break;
	default:
		n = snprintf(buf, size,
			     "%ld 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64
			     " 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64
			     " 0x%" PRIx64 " 0x%" PRIx64 "\n",
			     sc->nr, sc->args[0], sc->args[1], sc->args[2],
			     sc->args[3], sc->args[4], sc->args[5], sc->sp,
			     sc->pc);
		break;
	}
	FUZZ_CHECK(n > 0 && (size_t)n < size, "formatting overflowed");
	return (size_t)n;
}

static void check_syscall(const uint8_t *data, size_t size)
{
	struct cp_task_syscall sc;
	memset(&sc, 0xa5, sizeof(sc));
	int rc = cp_task_syscall_parse((const char *)data, size, &sc);
	FUZZ_CHECK(rc == 0 || rc == -CP_E_PARSE, "unexpected error %d", rc);
	if (rc < 0) {
		FUZZ_CHECK(sc.state == CP_TASK_RUNNING && sc.nr == -1 &&
				   sc.sp == 0 && sc.pc == 0 && sc.args[0] == 0,
			   "a refused line left a half-filled result");
		return;
	}
	uint64_t any_arg = 0;
	for (int i = 0; i < 6; i++)
		any_arg |= sc.args[i];
	switch (sc.state) {
	case CP_TASK_RUNNING:
		FUZZ_CHECK(sc.nr == -1 && sc.sp == 0 && sc.pc == 0 &&
				   any_arg == 0,
			   "\"running\" with values");
		break;
	case CP_TASK_BLOCKED:
		FUZZ_CHECK(sc.nr == -1 && any_arg == 0,
			   "blocked outside a system call, with nr %ld", sc.nr);
		break;
	case CP_TASK_IN_SYSCALL:
		FUZZ_CHECK(sc.nr >= 0 && sc.nr <= INT32_MAX,
			   "system call number %ld", sc.nr);
		break;
	default:
		FUZZ_CHECK(0, "state %d", (int)sc.state);
	}

	char text[256];
	size_t len = format_syscall(&sc, text, sizeof(text));
	for (int newline = 0; newline < 2; newline++) {
		struct cp_task_syscall again;
		rc = cp_task_syscall_parse(text, newline ? len : len - 1,
					   &again);
		FUZZ_CHECK(rc == 0, "\"%.*s\" (written back) refused",
			   (int)len - 1, text);
		FUZZ_CHECK(memcmp(&again, &sc, sizeof(sc)) == 0,
			   "\"%.*s\" (written back) parsed differently",
			   (int)len - 1, text);
	}
}

static void check_schedstat(const uint8_t *data, size_t size)
{
	struct cp_task_schedstat st;
	memset(&st, 0xa5, sizeof(st));
	int rc = cp_task_schedstat_parse((const char *)data, size, &st);
	FUZZ_CHECK(rc == 0 || rc == -CP_E_PARSE, "unexpected error %d", rc);
	if (rc < 0) {
		FUZZ_CHECK(st.run_ns == 0 && st.wait_ns == 0 && st.slices == 0,
			   "a refused line left values");
		return;
	}
	char text[96];
	int n = snprintf(text, sizeof(text),
			 "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", st.run_ns,
			 st.wait_ns, st.slices);
	FUZZ_CHECK(n > 0 && (size_t)n < sizeof(text), "formatting overflowed");
	struct cp_task_schedstat again;
	rc = cp_task_schedstat_parse(text, (size_t)n, &again);
	FUZZ_CHECK(rc == 0 && again.run_ns == st.run_ns &&
			   again.wait_ns == st.wait_ns &&
			   again.slices == st.slices,
		   "\"%.*s\" (written back) parsed differently", n - 1, text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_syscall(data, size);
	check_schedstat(data, size);
	return 0;
}
