/* Parsers for the /proc files cprof reads: /proc/PID/maps and
 * /proc/PID/task/TID/stat, syscall and schedstat.  The parsers take text, so the unit tests feed
 * them recorded files from fixtures/data/; the readers wrap them.  */
#ifndef CPROF_PROCFS_H
#define CPROF_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of /proc/PID/maps.  */
struct cp_map {
	uint64_t start, end;  /* [start, end) in the target's address space */
	uint64_t offset;      /* file offset of START */
	uint64_t inode;
	bool readable, writable, executable;
	char *path;           /* "" for anonymous memory; "[stack]", ... */
};

/* A snapshot of a process's mappings, sorted by address.  */
struct cp_maps {
	struct cp_map *maps;
	size_t count;
};

/* Parse the text of a maps file (TEXT, LEN bytes) into a new cp_maps.
 * Returns 0 or -CP_E_PARSE (with the 1-based line in *BAD_LINE when not
 * NULL) or -CP_E_NOMEM.  The caller frees *OUT with cp_maps_free().  */
int cp_maps_parse(const char *text, size_t len, struct cp_maps **out,
		  size_t *bad_line);

/* Read and parse /proc/PID/maps.  Returns 0, -CP_E_NOPROC, or as above.  */
int cp_maps_read(pid_t pid, struct cp_maps **out);

/* The mapping containing ADDR, or NULL.  Borrowed from MAPS.  */
const struct cp_map *cp_maps_find(const struct cp_maps *maps, uint64_t addr);

void cp_maps_free(struct cp_maps *maps);

/* The fields of /proc/PID/task/TID/stat that cprof uses.  */
struct cp_task_stat {
	pid_t tid;
	char comm[64];        /* without the parentheses */
	char state;           /* 'R', 'S', 'D', 'T', 't', 'Z', 'X', 'I', ... */
	pid_t ppid;
	unsigned long flags;  /* PF_* flags: PF_KTHREAD marks kernel threads */
};

#define CP_PF_KTHREAD 0x00200000UL

/* Parse one stat line.  The command name may contain spaces and
 * parentheses, so the fields are found from the last ')'.  Returns 0 or
 * -CP_E_PARSE.  */
int cp_task_stat_parse(const char *text, size_t len, struct cp_task_stat *out);

/* Read /proc/PID/task/TID/stat (TID 0: /proc/PID/stat).  Returns 0,
 * -CP_E_NOPROC or -CP_E_PARSE.  */
int cp_task_stat_read(pid_t pid, pid_t tid, struct cp_task_stat *out);

/* What /proc/PID/task/TID/syscall says of a thread (read without stopping
 * it; the kernel answers only for a thread that is off the CPU).  */
enum cp_task_syscall_state {
	CP_TASK_RUNNING,    /* "running": on a CPU, nothing to read */
	CP_TASK_IN_SYSCALL, /* blocked in system call NR */
	CP_TASK_BLOCKED,    /* "-1 SP PC": off the CPU outside a system call
			     * (a page fault, a stop) */
};

struct cp_task_syscall {
	enum cp_task_syscall_state state;
	long nr;             /* system call number; -1 unless IN_SYSCALL */
	uint64_t args[6];    /* its arguments as passed in registers (x86-64:
			      * rdi rsi rdx r10 r8 r9); 0 unless IN_SYSCALL */
	uint64_t sp, pc;     /* user stack pointer and program counter; 0
			      * when RUNNING */
};

/* Parse the text of a syscall file: "running", "-1 SP PC", or "NR ARG1
 * ... ARG6 SP PC" (NR in decimal, the rest 0x-prefixed hex), each with
 * or without a final newline.  Returns 0 or -CP_E_PARSE.  */
int cp_task_syscall_parse(const char *text, size_t len,
			  struct cp_task_syscall *out);

/* The scheduler's counters of a thread, /proc/PID/task/TID/schedstat.
 * Both grow only while the thread runs, so a thread whose counters did
 * not move between two reads was off the CPU the whole time.  */
struct cp_task_schedstat {
	uint64_t run_ns;     /* time spent on a CPU (sum_exec_runtime) */
	uint64_t wait_ns;    /* time spent runnable, waiting for a CPU */
	uint64_t slices;     /* times it was scheduled in */
};

/* Parse "RUN_NS WAIT_NS SLICES" (decimal, final newline optional).  A
 * kernel without scheduler statistics writes "0 0 0", which parses:
 * callers must not take unchanged zeros for "did not run".  Returns 0 or
 * -CP_E_PARSE.  */
int cp_task_schedstat_parse(const char *text, size_t len,
			    struct cp_task_schedstat *out);

/* From /proc/PID/task/TID/sched (kernels with CONFIG_SCHED_DEBUG): the
 * CPU time run, as schedstat's RUN_NS, and how many times the thread left
 * a CPU of its own accord (to sleep, to stop: nr_voluntary_switches).
 * Returns 0 or -CP_E_PARSE when either line is missing.  */
struct cp_task_sched {
	uint64_t run_ns;
	uint64_t voluntary;
};
int cp_task_sched_parse(const char *text, size_t len,
			struct cp_task_sched *out);

/* A human word for a stat state letter: "running", "sleeping",
 * "disk-wait", "stopped", "zombie", ...  Static string.  */
const char *cp_task_state_name(char state);

/* Read a whole small file (a /proc file) into a new NUL-terminated buffer.
 * Returns 0 and sets *TEXT (caller frees) and *LEN, or -CP_E_SYS.  */
int cp_procfs_slurp(const char *path, char **text, size_t *len);

/* The fields of /proc/PID/status (or /proc/PID/task/TID/status) that
 * cprof uses; a field absent from the text keeps its "unknown" value.  */
struct cp_task_status {
	pid_t tgid;            /* Tgid: the process id; -1 unknown */
	pid_t tracer_pid;      /* TracerPid: 0 untraced; -1 unknown */
	long uid[4], gid[4];   /* real, effective, saved, fs; -1 unknown */
	uint64_t sig_pending;  /* SigPnd: signals queued for the thread */
	bool have_sig_pending;
};

/* Parse the text of a status file (TEXT, LEN bytes, not necessarily
 * NUL-terminated; the target chooses its Name: line, so anything may be
 * there).  Returns 0 or -CP_E_PARSE when no field at all was found.  */
int cp_task_status_parse(const char *text, size_t len,
			 struct cp_task_status *out);

/* Read and parse /proc/PID/task/TID/status (TID 0: /proc/PID/status).
 * Returns 0, -CP_E_NOPROC or -CP_E_PARSE.  */
int cp_task_status_read(pid_t pid, pid_t tid, struct cp_task_status *out);

/* The TracerPid of PID from /proc/PID/status: 0 when not traced, -1 when
 * unknown.  */
pid_t cp_procfs_tracer_pid(pid_t pid);

/* The Tgid (process id) of thread TID from /proc/TID/status, -1 when
 * unknown.  */
pid_t cp_procfs_tgid(pid_t tid);

/* Threads of the machine runnable right now, the caller's included
 * (/proc/loadavg's fourth field); -1 when it cannot be read.  */
int cp_procfs_runnable(void);

/* Threads of process PID in state R now; -1 when it cannot be read.  */
int cp_procfs_runnable_tasks(pid_t pid);

/* The comm (short name) of PID/TID into BUF; "" when unavailable.  */
void cp_procfs_comm(pid_t pid, pid_t tid, char *buf, size_t size);

/* The command line of PID into BUF, arguments joined by spaces; its comm
 * when that is unreadable (a kernel thread, a zombie); "" when neither
 * is.  */
void cp_procfs_cmdline(pid_t pid, char *buf, size_t size);

/* The value of entry TYPE (AT_ENTRY, AT_PHDR, AT_BASE...) of process
 * PID's auxiliary vector, /proc/PID/auxv; 0 when absent or unreadable. */
uint64_t cp_procfs_auxv(pid_t pid, uint64_t type);

#endif
