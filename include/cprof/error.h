/* cprof error codes.
 *
 * Library functions return 0 on success or a negative -CP_E_* code.  When the
 * failure came from the system, errno is left as the system set it, so a
 * caller can print both.  One X-macro list generates the enum and the
 * messages (the elfutils DWFL_ERRORS pattern), so they never drift apart.  */
#ifndef CPROF_ERROR_H
#define CPROF_ERROR_H

#define CP_ERRORS                                                          \
	CP_ERROR(OK, "success")                                            \
	CP_ERROR(SYS, "system call failed (see errno)")                    \
	CP_ERROR(NOMEM, "out of memory")                                   \
	CP_ERROR(NOPROC, "no such process")                                \
	CP_ERROR(ZOMBIE, "process is a zombie")                            \
	CP_ERROR(KTHREAD, "process is a kernel thread")                    \
	CP_ERROR(SELF, "cannot trace ourselves")                           \
	CP_ERROR(PERM, "operation not permitted")                          \
	CP_ERROR(TRACED, "process is already traced")                      \
	CP_ERROR(GONE, "thread or process has exited")                     \
	CP_ERROR(PARSE, "malformed input")                                 \
	CP_ERROR(UNWIND, "stack unwinding failed")                         \
	CP_ERROR(EXEC, "cannot execute command")                           \
	CP_ERROR(INVAL, "invalid argument")                                \
	CP_ERROR(NOTLEADER, "a thread, not a process")                    \
	CP_ERROR(NOALLOC, "no allocator entry points found")              \
	CP_ERROR(BUSY, "busy: sampling or heap tracing is on")            \
	CP_ERROR(NOSYM, "no such function or source line in the target")  \
	CP_ERROR(NOTHELD, "no thread is held at a breakpoint")

enum cp_error {
#define CP_ERROR(name, msg) CP_E_##name,
	CP_ERRORS
#undef CP_ERROR
	CP_E_COUNT_
};

/* A static, human-readable description of CODE (positive or negative).
 * Never NULL.  */
const char *cp_strerror(int code);

#endif
