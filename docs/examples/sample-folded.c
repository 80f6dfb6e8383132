/* sample-folded: the smallest program that embeds libcprof.
 *
 * It attaches to a running process, samples its stacks for one second
 * through the session API (include/cprof/session.h), lets the process go
 * and writes what it saw as folded stacks (one line per distinct stack,
 * "main;f;g COUNT") to standard output, for flamegraph.pl, speedscope or
 * `cprof svg`.
 *
 * Build it against an installed libcprof (make install):
 *
 *     cc -o sample-folded sample-folded.c $(pkg-config --cflags --libs cprof)
 *
 * or with libcprof.a and its dependencies linked in (-no-pie: Debian's
 * libunwind-ptrace.a is not position-independent):
 *
 *     cc -no-pie -o sample-folded sample-folded.c $(pkg-config --cflags cprof) \
 *        -Wl,-Bstatic $(pkg-config --static --libs cprof) -Wl,-Bdynamic
 *
 * Run it as root (or as the process's owner where ptrace is allowed):
 *
 *     ./sample-folded PID > PID.folded
 *
 * The library never prints: its warnings come to warn() below, and every
 * call returns 0 or a negative -CP_E_* code that cp_strerror() describes
 * (-CP_E_SYS: errno says more).  */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cprof/error.h>
#include <cprof/output.h>
#include <cprof/session.h>

/* One line of text per problem the library meets (a debug file that does
 * not match, say): sampling goes on.  */
static void warn(void *arg, const char *message)
{
	(void)arg;
	fprintf(stderr, "sample-folded: warning: %s\n", message);
}

static void fail(const char *what, int rc)
{
	fprintf(stderr, "sample-folded: %s: %s%s%s\n", what, cp_strerror(rc),
		rc == -CP_E_SYS ? ": " : "", rc == -CP_E_SYS ? strerror(errno) : "");
}

/* Deadlines are CLOCK_MONOTONIC nanoseconds.  */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	char *end;
	long pid = argc == 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc != 2 || *end != '\0' || pid <= 0) {
		fprintf(stderr, "usage: sample-folded PID\n");
		return 2;
	}

	/* A session: one attachment, driven step by step.  The defaults
	 * (zero) are cprof-attach's: DWARF names, inlined frames,
	 * demangled C++ and Rust.  */
	struct cp_session_config config = { .warn = warn };
	struct cp_session *session;
	int rc = cp_session_new(&config, &session);
	if (rc) {
		fail("cannot make a session", rc);
		return 1;
	}

	/* Every thread of PID, and the threads it starts from now on.  */
	rc = cp_session_attach(session, (pid_t)pid, NULL, 0, false, NULL);
	if (rc) {
		fail("cannot attach", rc);
		cp_session_free(session);
		return 1;
	}

	/* Sample at 99 Hz for one second (or until the process exits).  */
	struct cp_sampler_options options = { .frequency = 99,
					      .max_depth = 256 };
	rc = cp_session_sample_start(session, &options);
	if (rc == 0)
		rc = cp_session_sample_run(session, now_ns() + 1000000000u,
					   NULL, NULL);
	/* Stop even after a failure: the samples taken are kept, and the
	 * frames of all of them are named once it returns.  */
	int stop_rc = cp_session_sample_stop(session);
	if (rc == 0)
		rc = stop_rc;

	/* Let the process go before writing: it runs on, untouched.  The
	 * profile stays in the session.  */
	cp_session_detach(session);
	if (rc) {
		fail("sampling failed", rc);
		cp_session_free(session);
		return 1;
	}

	/* Folded stacks, root first, as cprof-attach writes
	 * them (no profile: nothing was sampled; nothing to write).  */
	const struct cp_profile *profile = cp_session_profile(session);
	struct cp_folded_options folded = { 0 };
	if (profile)
		rc = cp_write_folded(profile, &folded, stdout);
	cp_session_free(session);
	if (rc == 0 && fflush(stdout) != 0)
		rc = -CP_E_SYS;
	if (rc) {
		fail("cannot write the profile", rc);
		return 1;
	}
	return 0;
}
