/* How cprof-attach begins and ends with its target: attach to a PID or
 * launch a command through the session, and, in launch mode, wait for
 * the command and exit with its status.  */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cprof/error.h"
#include "cprof/session.h"

#include "attach.h"

/* Attach to O->pid or launch O->command in SESSION; returns 0 or the
 * exit code, having said why.  */
int start(const struct options *o, struct cp_session *session)
{
	int rc;
	if (o->command) {
		rc = cp_session_launch(session, o->command);
		if (rc == -CP_E_EXEC) {
			message("cannot run '%s': %s", o->command[0],
				strerror(errno));
			/* The shell's codes, as env(1) and timeout(1) give. */
			return errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
		}
		if (rc < 0) {
			message("cannot start '%s': %s: %s", o->command[0],
				cp_strerror(rc), strerror(errno));
			return EXIT_RUNTIME;
		}
		launched_child = cp_session_pid(session);
		own_failure = EXIT_LAUNCH_FAILED;
		return 0;
	}
	/* We trace from a child of the process the user started: that one
	 * is cprof-attach too.  A dump stops the threads there are now;
	 * no need to follow new ones.  */
	pid_t tracer = 0;
	rc = o->pid == visible_pid
		     ? -CP_E_SELF
		     : cp_session_attach(session, o->pid, o->tids, o->ntids,
					 o->dump, &tracer);
	return rc < 0 ? explain_attach_error(rc, o->pid, tracer, o) : 0;
}

/* Launch mode, at the very end: the profile is written (or could not
 * be) and the command let go; wait for it to end, as time(1) and
 * valgrind do, and exit with its status: its code, or 128 + the signal
 * that killed it.  When we failed (EXIT_CODE is not 0), exit 125, and
 * say how the command ended if it failed too.  A second stop request
 * ends the wait at once (the handler exits 125).  */
int finish_launch(const struct options *o, int exit_code)
{
	if (launched_child <= 0)
		return exit_code;
	int status = launched_status;
	if (status == -1) {
		if (!o->quiet)
			message("waiting for %s (pid %d) to exit",
				o->command[0], (int)launched_child);
		while (waitpid(launched_child, &status, 0) < 0) {
			if (errno == EINTR)
				continue;
			message("cannot wait for %s (pid %d): %s",
				o->command[0], (int)launched_child,
				strerror(errno));
			return EXIT_LAUNCH_FAILED;
		}
	}
	int command_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
					       : WEXITSTATUS(status);
	if (exit_code == EXIT_OK)
		return command_code;
	/* Our failure was said in its one line; how the command ended is
	 * worth a second only when it failed too (125 hides its code).  */
	if (command_code == 0)
		return EXIT_LAUNCH_FAILED;
	if (WIFSIGNALED(status))
		message("%s was killed by signal %d (%s); exit status %d: "
			"cprof-attach failed (see above)",
			o->command[0], WTERMSIG(status),
			strsignal(WTERMSIG(status)), EXIT_LAUNCH_FAILED);
	else
		message("%s exited with status %d; exit status %d: "
			"cprof-attach failed (see above)",
			o->command[0], command_code, EXIT_LAUNCH_FAILED);
	return EXIT_LAUNCH_FAILED;
}

