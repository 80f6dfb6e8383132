/* Unit tests for the /proc parsers (cprof/procfs.h) and cp_strerror().
 * Recorded and hand-made inputs live in fixtures/data/.  */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/procfs.h"

#define DATA CP_SOURCE_DIR "/fixtures/data/"

/* The whole of fixtures/data/NAME, NUL-terminated; the caller frees it.  */
static char *read_fixture(const char *name, size_t *len)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), DATA "%s", name);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	int c;
	while ((c = getc(f)) != EOF)
		putc(c, mem);
	fclose(f);
	fclose(mem);
	*len = size;
	return text;
}

static struct cp_maps *parse_maps_fixture(const char *name)
{
	size_t len, bad_line = 0;
	char *text = read_fixture(name, &len);
	struct cp_maps *maps = NULL;
	int rc = cp_maps_parse(text, len, &maps, &bad_line);
	ck_assert_msg(rc == 0, "%s: rc %d (%s) at line %zu", name, rc,
		      cp_strerror(rc), bad_line);
	free(text);
	return maps;
}

static void assert_map(const struct cp_map *m, uint64_t start, uint64_t end,
		       const char *perms, uint64_t offset, uint64_t inode,
		       const char *path)
{
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->start, start);
	ck_assert_uint_eq(m->end, end);
	ck_assert_int_eq(m->readable, perms[0] == 'r');
	ck_assert_int_eq(m->writable, perms[1] == 'w');
	ck_assert_int_eq(m->executable, perms[2] == 'x');
	ck_assert_uint_eq(m->offset, offset);
	ck_assert_uint_eq(m->inode, inode);
	ck_assert_str_eq(m->path, path);
}

static void assert_sorted(const struct cp_maps *maps)
{
	for (size_t i = 0; i < maps->count; i++) {
		ck_assert_msg(maps->maps[i].start < maps->maps[i].end,
			      "map %zu is empty or inverted", i);
		if (i > 0)
			ck_assert_msg(maps->maps[i - 1].end <= maps->maps[i].start,
				      "maps %zu and %zu out of order", i - 1, i);
	}
}

/* A pid that existed a moment ago and is now reaped.  */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

static void own_comm(char comm[16])
{
	memset(comm, 0, 16);
	ck_assert_int_eq(prctl(PR_GET_NAME, comm), 0);
}

/* ------------------------------------------------------------ maps */

/* `cat /proc/self/maps` on the test machine: a PIE binary.  */
START_TEST(maps_pie)
{
	struct cp_maps *maps = parse_maps_fixture("maps-pie.txt");
	ck_assert_uint_eq(maps->count, 38);
	assert_sorted(maps);
	struct cp_map *m = maps->maps;
	assert_map(&m[0], 0x561ef5651000, 0x561ef5653000, "r--", 0, 247134, "/usr/bin/cat");
	assert_map(&m[1], 0x561ef5653000, 0x561ef5658000, "r-x", 0x2000, 247134, "/usr/bin/cat");
	assert_map(&m[4], 0x561ef565c000, 0x561ef565d000, "rw-", 0xa000, 247134, "/usr/bin/cat");
	assert_map(&m[5], 0x561f1dd03000, 0x561f1dd24000, "rw-", 0, 0, "[heap]");
	/* anonymous: the kernel prints "0 " and no name */
	assert_map(&m[6], 0x7f0688ca6000, 0x7f0688cc8000, "rw-", 0, 0, "");
	assert_map(&m[17], 0x7f0688d4f000, 0x7f0688ea5000, "r-x", 0x26000, 332835,
		   "/usr/lib/x86_64-linux-gnu/libc.so.6");
	/* shared mapping ("r--s") */
	assert_map(&m[25], 0x7f0688f0e000, 0x7f0688f15000, "r--", 0, 332280,
		   "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache");
	assert_map(&m[30], 0x7f0688f1e000, 0x7f0688f20000, "r-x", 0, 0, "[vdso]");
	assert_map(&m[36], 0x7ffd846ea000, 0x7ffd8470b000, "rw-", 0, 0, "[stack]");
	assert_map(&m[37], 0xffffffffff600000, 0xffffffffff601000, "--x", 0, 0, "[vsyscall]");
	cp_maps_free(maps);
}
END_TEST

/* Hand-made: deleted files, paths with spaces and parentheses.  */
START_TEST(maps_deleted_and_spaces)
{
	struct cp_maps *maps = parse_maps_fixture("maps-deleted.txt");
	ck_assert_uint_eq(maps->count, 15);
	assert_sorted(maps);
	struct cp_map *m = maps->maps;
	const char *app = "/home/ann/My Projects/app (v2)/app (deleted)";
	assert_map(&m[0], 0x559a1c400000, 0x559a1c401000, "r--", 0, 1048602, app);
	assert_map(&m[1], 0x559a1c401000, 0x559a1c402000, "r-x", 0x1000, 1048602, app);
	assert_map(&m[3], 0x559a1c403000, 0x559a1c404000, "rw-", 0x3000, 1048602, app);
	assert_map(&m[5], 0x7f3b2c000000, 0x7f3b2c021000, "rw-", 0, 0, "");
	/* anonymous without the trailing space */
	assert_map(&m[6], 0x7f3b2c021000, 0x7f3b30000000, "---", 0, 0, "");
	assert_map(&m[9], 0x7f3b31e10000, 0x7f3b31e11000, "r-x", 0, 1048777,
		   "/home/ann/My Projects/lib/libplugin old.so (deleted)");
	assert_map(&m[10], 0x7f3b31e20000, 0x7f3b31e24000, "rw-", 0, 3094,
		   "/memfd:ring buffer (deleted)");
	assert_map(&m[12], 0x7f3b31e26000, 0x7f3b31e28000, "r-x", 0, 0, "[vdso]");
	assert_map(&m[13], 0x7ffc8e1d5000, 0x7ffc8e1f6000, "rw-", 0, 0, "[stack]");
	cp_maps_free(maps);
}
END_TEST

START_TEST(maps_find_boundaries)
{
	struct cp_maps *maps = parse_maps_fixture("maps-deleted.txt");
	struct cp_map *m = maps->maps;
	/* start inclusive, end exclusive: adjacent maps share an address */
	ck_assert_ptr_eq(cp_maps_find(maps, 0x559a1c400000), &m[0]);
	ck_assert_ptr_eq(cp_maps_find(maps, 0x559a1c400fff), &m[0]);
	ck_assert_ptr_eq(cp_maps_find(maps, 0x559a1c401000), &m[1]);
	ck_assert_ptr_eq(cp_maps_find(maps, 0x559a1c403fff), &m[3]);
	ck_assert_ptr_eq(cp_maps_find(maps, 0x7f3b31e26abc), &m[12]);
	ck_assert_ptr_eq(cp_maps_find(maps, 0xffffffffff600000), &m[14]);
	/* before the first, in gaps, after the last */
	ck_assert_ptr_null(cp_maps_find(maps, 0));
	ck_assert_ptr_null(cp_maps_find(maps, 0x559a1c3fffff));
	ck_assert_ptr_null(cp_maps_find(maps, 0x559a1c404000));
	ck_assert_ptr_null(cp_maps_find(maps, 0x559a1d000000));
	ck_assert_ptr_null(cp_maps_find(maps, 0x7f3b31bbd000));
	ck_assert_ptr_null(cp_maps_find(maps, 0xffffffffff601000));
	ck_assert_ptr_null(cp_maps_find(maps, UINT64_MAX));
	cp_maps_free(maps);
}
END_TEST

START_TEST(maps_no_final_newline_and_empty)
{
	const char *text = "00400000-00401000 r-xp 00000000 08:01 42 /bin/x\n"
			   "00401000-00402000 rw-p 00001000 08:01 42 /bin/x";
	struct cp_maps *maps = NULL;
	ck_assert_int_eq(cp_maps_parse(text, strlen(text), &maps, NULL), 0);
	ck_assert_uint_eq(maps->count, 2);
	assert_map(&maps->maps[1], 0x401000, 0x402000, "rw-", 0x1000, 42, "/bin/x");
	cp_maps_free(maps);

	maps = NULL;
	ck_assert_int_eq(cp_maps_parse("", 0, &maps, NULL), 0);
	ck_assert_uint_eq(maps->count, 0);
	ck_assert_ptr_null(cp_maps_find(maps, 0x1000));
	cp_maps_free(maps);
	cp_maps_free(NULL);
}
END_TEST

/* struct cp_maps is sorted by address whatever order the text had.  */
START_TEST(maps_sorted)
{
	const char *text = "7f0000000000-7f0000001000 r-xp 00000000 08:01 7 /lib/b.so\n"
			   "00400000-00401000 r-xp 00000000 08:01 42 /bin/x\n"
			   "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n";
	struct cp_maps *maps = NULL;
	ck_assert_int_eq(cp_maps_parse(text, strlen(text), &maps, NULL), 0);
	ck_assert_uint_eq(maps->count, 3);
	assert_sorted(maps);
	ck_assert_str_eq(maps->maps[0].path, "/bin/x");
	ck_assert_str_eq(maps->maps[1].path, "/lib/b.so");
	ck_assert_str_eq(cp_maps_find(maps, 0x7f0000000800)->path, "/lib/b.so");
	cp_maps_free(maps);
}
END_TEST

START_TEST(maps_malformed_file)
{
	size_t len, bad_line = 0;
	char *text = read_fixture("maps-malformed.txt", &len);
	struct cp_maps *maps = NULL;
	ck_assert_int_eq(cp_maps_parse(text, len, &maps, &bad_line), -CP_E_PARSE);
	ck_assert_uint_eq(bad_line, 3);
	free(text);
}
END_TEST

static const struct {
	const char *text;
	size_t bad_line;
} malformed_maps[] = {
	{ "zzzz-1000 r-xp 00000000 00:00 0\n", 1 },
	{ "1000-2000 r-xp 00000000 00:00 0\n2000 r-xp 00000000 00:00 0\n", 2 },
	{ "1000-2000 r-xp 00000000 00:00 0\n2000-3000\n", 2 },
	{ "1000-2000 r-xp\n", 1 },
	{ "1000-2000 r-xp 00000000 00:00\n", 1 },
	{ "1000-2000 r-xp 00000000 00:00 0\n"
	  "2000-3000 r-xp 0000zz00 00:00 0\n"
	  "3000-4000 r-xp 00000000 00:00 0\n", 2 },
	{ "1000-2000 r-xp 00000000 00:00 0\n"
	  "2000-3000 rw-p 00000000 00:00 0\n"
	  "3000-4000 r-xp 00000000 00:00 inode\n", 3 },
	{ "garbage\n", 1 },
};

START_TEST(maps_malformed_lines)
{
	const char *text = malformed_maps[_i].text;
	size_t bad_line = 0;
	struct cp_maps *maps = NULL;
	ck_assert_msg(cp_maps_parse(text, strlen(text), &maps, &bad_line) == -CP_E_PARSE,
		      "accepted: %s", text);
	ck_assert_uint_eq(bad_line, malformed_maps[_i].bad_line);
	/* BAD_LINE may be NULL */
	ck_assert_int_eq(cp_maps_parse(text, strlen(text), &maps, NULL), -CP_E_PARSE);
}
END_TEST

START_TEST(maps_read_self)
{
	struct cp_maps *maps = NULL;
	ck_assert_int_eq(cp_maps_read(getpid(), &maps), 0);
	assert_sorted(maps);

	char exe[PATH_MAX] = "";
	ck_assert_int_gt(readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
	/* not the test itself: START_TEST names a pointer to a TTest */
	const struct cp_map *code = cp_maps_find(maps, (uintptr_t)&dead_pid);
	ck_assert_ptr_nonnull(code);
	ck_assert(code->executable);
	ck_assert_str_eq(code->path, exe);

	const struct cp_map *stack = cp_maps_find(maps, (uintptr_t)__builtin_frame_address(0));
	ck_assert_ptr_nonnull(stack);
	ck_assert_str_eq(stack->path, "[stack]");
	ck_assert(stack->readable && stack->writable);
	cp_maps_free(maps);
}
END_TEST

START_TEST(maps_read_no_process)
{
	struct cp_maps *maps = NULL;
	ck_assert_int_eq(cp_maps_read(dead_pid(), &maps), -CP_E_NOPROC);
}
END_TEST

/* ------------------------------------------------------------ stat */

static struct cp_task_stat parse_stat_fixture(const char *name)
{
	size_t len;
	char *text = read_fixture(name, &len);
	struct cp_task_stat st;
	memset(&st, 0x55, sizeof(st));
	int rc = cp_task_stat_parse(text, len, &st);
	ck_assert_msg(rc == 0, "%s: rc %d (%s)", name, rc, cp_strerror(rc));
	free(text);
	return st;
}

START_TEST(stat_init)
{
	struct cp_task_stat st = parse_stat_fixture("stat-init.txt");
	ck_assert_int_eq(st.tid, 1);
	ck_assert_str_eq(st.comm, "process_api");
	ck_assert_int_eq(st.state, 'S');
	ck_assert_int_eq(st.ppid, 0);
	ck_assert_uint_eq(st.flags, 4194560);
	ck_assert(!(st.flags & CP_PF_KTHREAD));
}
END_TEST

START_TEST(stat_kernel_threads)
{
	struct cp_task_stat st = parse_stat_fixture("stat-kthreadd.txt");
	ck_assert_int_eq(st.tid, 2);
	ck_assert_str_eq(st.comm, "kthreadd");
	ck_assert_int_eq(st.state, 'S');
	ck_assert_int_eq(st.ppid, 0);
	ck_assert_uint_eq(st.flags, 0x208040);
	ck_assert(st.flags & CP_PF_KTHREAD);

	/* workqueue names are longer than TASK_COMM_LEN */
	st = parse_stat_fixture("stat-kworker.txt");
	ck_assert_int_eq(st.tid, 36);
	ck_assert_str_eq(st.comm, "kworker/u8:2-events_unbound");
	ck_assert_int_eq(st.state, 'I');
	ck_assert_int_eq(st.ppid, 2);
	ck_assert(st.flags & CP_PF_KTHREAD);
}
END_TEST

START_TEST(stat_zombie_and_running)
{
	struct cp_task_stat st = parse_stat_fixture("stat-zombie.txt");
	ck_assert_int_eq(st.tid, 3451);
	ck_assert_str_eq(st.comm, "python3");
	ck_assert_int_eq(st.state, 'Z');
	ck_assert_int_eq(st.ppid, 3410);
	ck_assert(!(st.flags & CP_PF_KTHREAD));

	st = parse_stat_fixture("stat-running.txt");
	ck_assert_int_eq(st.tid, 3453);
	ck_assert_int_eq(st.state, 'R');
	ck_assert_int_eq(st.ppid, 3408);
}
END_TEST

/* The comm is everything between the first '(' and the last ')'.  */
START_TEST(stat_comm_with_parentheses)
{
	struct cp_task_stat st = parse_stat_fixture("stat-weird-comm.txt");
	ck_assert_int_eq(st.tid, 1234);
	ck_assert_str_eq(st.comm, "my (weird) name");
	ck_assert_int_eq(st.state, 'S');
	ck_assert_int_eq(st.ppid, 1);
	ck_assert_uint_eq(st.flags, 4194560);

	/* a comm that looks like the fields that follow it */
	st = parse_stat_fixture("stat-fake-fields.txt");
	ck_assert_int_eq(st.tid, 4242);
	ck_assert_str_eq(st.comm, "a) R 1 (b");
	ck_assert_int_eq(st.state, 'T');
	ck_assert_int_eq(st.ppid, 99);
	ck_assert(!(st.flags & CP_PF_KTHREAD));
}
END_TEST

START_TEST(stat_malformed)
{
	size_t len;
	char *text = read_fixture("stat-malformed.txt", &len);
	int lines = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		struct cp_task_stat st;
		ck_assert_msg(cp_task_stat_parse(line, strlen(line), &st) == -CP_E_PARSE,
			      "accepted: \"%s\"", line);
		lines++;
	}
	ck_assert_int_eq(lines, 10);
	free(text);

	struct cp_task_stat st;
	ck_assert_int_eq(cp_task_stat_parse("", 0, &st), -CP_E_PARSE);
}
END_TEST

/* LEN bounds the text: the flags after it must not be seen.  */
START_TEST(stat_respects_len)
{
	const char *line = "1234 (my (weird) name) S 1 1234 1234 0 -1 4194560 120 0\n";
	struct cp_task_stat st;
	size_t cut = strstr(line, " 4194560") - line;
	ck_assert_int_eq(cp_task_stat_parse(line, cut, &st), -CP_E_PARSE);
	ck_assert_int_eq(cp_task_stat_parse(line, strlen(line), &st), 0);
}
END_TEST

START_TEST(stat_read_self)
{
	char comm[16];
	own_comm(comm);
	struct cp_task_stat st;
	ck_assert_int_eq(cp_task_stat_read(getpid(), 0, &st), 0);
	ck_assert_int_eq(st.tid, getpid());
	ck_assert_int_eq(st.state, 'R');
	ck_assert_str_eq(st.comm, comm);
	ck_assert_int_eq(st.ppid, getppid());
	ck_assert(!(st.flags & CP_PF_KTHREAD));

	ck_assert_int_eq(cp_task_stat_read(getpid(), gettid(), &st), 0);
	ck_assert_int_eq(st.tid, gettid());
	ck_assert_int_eq(st.state, 'R');
}
END_TEST

START_TEST(stat_read_no_process)
{
	struct cp_task_stat st;
	ck_assert_int_eq(cp_task_stat_read(dead_pid(), 0, &st), -CP_E_NOPROC);
}
END_TEST

START_TEST(state_names)
{
	ck_assert_str_eq(cp_task_state_name('R'), "running");
	ck_assert_str_eq(cp_task_state_name('S'), "sleeping");
	ck_assert_str_eq(cp_task_state_name('D'), "disk-wait");
	ck_assert_str_eq(cp_task_state_name('T'), "stopped");
	ck_assert_str_eq(cp_task_state_name('Z'), "zombie");
	/* anything else still gets a word */
	ck_assert_ptr_nonnull(cp_task_state_name('?'));
	ck_assert_ptr_nonnull(cp_task_state_name('\0'));
}
END_TEST

/* ------------------------------------------------------------ misc */

/* A status file as the kernel writes it (trimmed), with a Name: line the
 * target chose to look like other fields.  */
static const char status_text[] =
	"Name:\tTgid:\t1\n"
	"Umask:\t0022\n"
	"State:\tS (sleeping)\n"
	"Tgid:\t4242\n"
	"Ngid:\t0\n"
	"Pid:\t4243\n"
	"PPid:\t1\n"
	"TracerPid:\t777\n"
	"Uid:\t1000\t1001\t1002\t1003\n"
	"Gid:\t65534\t65534\t65534\t65534\n"
	"SigQ:\t0/31536\n"
	"SigPnd:\t0000000000000010\n"
	"ShdPnd:\t0000000000000000\n";

START_TEST(status_parse)
{
	struct cp_task_status st;
	ck_assert_int_eq(cp_task_status_parse(status_text,
					      sizeof(status_text) - 1, &st), 0);
	ck_assert_int_eq(st.tgid, 4242);
	ck_assert_int_eq(st.tracer_pid, 777);
	ck_assert_int_eq(st.uid[0], 1000);
	ck_assert_int_eq(st.uid[1], 1001);
	ck_assert_int_eq(st.uid[3], 1003);
	ck_assert_int_eq(st.gid[2], 65534);
	ck_assert(st.have_sig_pending);
	/* SIGTRAP (5) is bit 4.  */
	ck_assert_uint_eq(st.sig_pending, 1u << (5 - 1));
}
END_TEST

START_TEST(status_partial_and_malformed)
{
	struct cp_task_status st;
	static const char only_tracer[] = "TracerPid:\t0\nGarbage";
	ck_assert_int_eq(cp_task_status_parse(only_tracer,
					      sizeof(only_tracer) - 1, &st), 0);
	ck_assert_int_eq(st.tracer_pid, 0);
	ck_assert_int_eq(st.tgid, -1);
	ck_assert_int_eq(st.uid[0], -1);
	ck_assert(!st.have_sig_pending);
	static const char nothing[] = "Name:\tx\nTgid:\tnot a number\n"
				      "TracerPid:\t99999999999999999999\n";
	ck_assert_int_eq(cp_task_status_parse(nothing, sizeof(nothing) - 1,
					      &st), -CP_E_PARSE);
	ck_assert_int_eq(st.tgid, -1);
	ck_assert_int_eq(st.tracer_pid, -1);
	ck_assert_int_eq(cp_task_status_parse("", 0, &st), -CP_E_PARSE);
	/* Only LEN bytes are read: "Tgid:\t12" cut after the 1.  */
	ck_assert_int_eq(cp_task_status_parse("Tgid:\t12", 7, &st), 0);
	ck_assert_int_eq(st.tgid, 1);
}
END_TEST

START_TEST(status_read_self)
{
	struct cp_task_status st;
	ck_assert_int_eq(cp_task_status_read(getpid(), 0, &st), 0);
	ck_assert_int_eq(st.tgid, getpid());
	ck_assert_int_eq(st.tracer_pid, 0);
	ck_assert_int_eq(st.uid[1], (long)geteuid());
	ck_assert(st.have_sig_pending);
	ck_assert_int_eq(cp_task_status_read(dead_pid(), 0, &st),
			 -CP_E_NOPROC);
}
END_TEST

START_TEST(tracer_pid)
{
	ck_assert_int_eq(cp_procfs_tracer_pid(getpid()), 0);
	ck_assert_int_eq(cp_procfs_tracer_pid(dead_pid()), -1);
}
END_TEST

START_TEST(comm_of_self)
{
	char comm[16], buf[64];
	own_comm(comm);
	cp_procfs_comm(getpid(), 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, comm);
	cp_procfs_comm(getpid(), gettid(), buf, sizeof(buf));
	ck_assert_str_eq(buf, comm);
	cp_procfs_comm(dead_pid(), 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(slurp)
{
	size_t want_len, len = 0;
	char *want = read_fixture("stat-init.txt", &want_len);
	char *text = NULL;
	ck_assert_int_eq(cp_procfs_slurp(DATA "stat-init.txt", &text, &len), 0);
	ck_assert_uint_eq(len, want_len);
	ck_assert_str_eq(text, want);
	free(text);
	free(want);

	/* /proc files report size 0: the whole text must still come back */
	ck_assert_int_eq(cp_procfs_slurp("/proc/self/maps", &text, &len), 0);
	ck_assert_uint_gt(len, 0);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_int_eq(text[len - 1], '\n');
	free(text);

	errno = 0;
	ck_assert_int_eq(cp_procfs_slurp(DATA "no-such-file", &text, &len), -CP_E_SYS);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* ------------------------------------------------------------ errors */

START_TEST(strerror_messages)
{
	for (int code = 0; code < CP_E_COUNT_; code++) {
		const char *msg = cp_strerror(code);
		ck_assert_ptr_nonnull(msg);
		ck_assert_msg(msg[0] != '\0', "code %d has no message", code);
		ck_assert_str_eq(cp_strerror(-code), msg);
		ck_assert_str_ne(msg, "unknown error");
	}
	ck_assert_str_eq(cp_strerror(-CP_E_PARSE), "malformed input");
	ck_assert_str_eq(cp_strerror(CP_E_COUNT_), "unknown error");
	ck_assert_str_eq(cp_strerror(-CP_E_COUNT_), "unknown error");
	ck_assert_str_eq(cp_strerror(INT_MAX), "unknown error");
	ck_assert_str_eq(cp_strerror(INT_MIN), "unknown error");
}
END_TEST

/* ------------------------------------------------- syscall, schedstat */

/* Recorded from a `sleep` blocked in clock_nanosleep (230).  */
START_TEST(syscall_in_syscall)
{
	static const char text[] =
		"230 0x0 0x0 0x7ffc54e5fa30 0x7ffc54e5fa70 0x0 0x0 "
		"0x7ffc54e5fa18 0x7fd607f13503\n";
	struct cp_task_syscall sc;
	ck_assert_int_eq(cp_task_syscall_parse(text, strlen(text), &sc), 0);
	ck_assert_int_eq(sc.state, CP_TASK_IN_SYSCALL);
	ck_assert_int_eq(sc.nr, 230);
	ck_assert_uint_eq(sc.args[0], 0);
	ck_assert_uint_eq(sc.args[2], 0x7ffc54e5fa30);
	ck_assert_uint_eq(sc.args[3], 0x7ffc54e5fa70);
	ck_assert_uint_eq(sc.args[5], 0);
	ck_assert_uint_eq(sc.sp, 0x7ffc54e5fa18);
	ck_assert_uint_eq(sc.pc, 0x7fd607f13503);
	/* No final newline; capital hex digits; system call 0.  */
	static const char bare[] =
		"0 0x3 0xFFFF 0x1 0x2 0x3 0x4 0x7FFD0000 0xABCDEF";
	ck_assert_int_eq(cp_task_syscall_parse(bare, strlen(bare), &sc), 0);
	ck_assert_int_eq(sc.state, CP_TASK_IN_SYSCALL);
	ck_assert_int_eq(sc.nr, 0);
	ck_assert_uint_eq(sc.args[0], 3);
	ck_assert_uint_eq(sc.args[1], 0xffff);
	ck_assert_uint_eq(sc.args[4], 3);
	ck_assert_uint_eq(sc.sp, 0x7ffd0000);
	ck_assert_uint_eq(sc.pc, 0xabcdef);
	/* Every argument the largest a register holds.  */
	static const char full[] =
		"335 0xffffffffffffffff 0xffffffffffffffff 0xffffffffffffffff "
		"0xffffffffffffffff 0xffffffffffffffff 0xffffffffffffffff "
		"0xffffffffffffffff 0xffffffffffffffff\n";
	ck_assert_int_eq(cp_task_syscall_parse(full, strlen(full), &sc), 0);
	ck_assert_uint_eq(sc.args[5], UINT64_MAX);
	ck_assert_uint_eq(sc.pc, UINT64_MAX);
}
END_TEST

START_TEST(syscall_blocked_and_running)
{
	struct cp_task_syscall sc;
	static const char blocked[] = "-1 0x7ffd5032af8 0x401000\n";
	ck_assert_int_eq(cp_task_syscall_parse(blocked, strlen(blocked), &sc),
			 0);
	ck_assert_int_eq(sc.state, CP_TASK_BLOCKED);
	ck_assert_int_eq(sc.nr, -1);
	ck_assert_uint_eq(sc.sp, 0x7ffd5032af8);
	ck_assert_uint_eq(sc.pc, 0x401000);
	ck_assert_uint_eq(sc.args[0], 0);
	for (int newline = 0; newline < 2; newline++) {
		const char *running = newline ? "running\n" : "running";
		memset(&sc, 0x55, sizeof(sc));
		ck_assert_int_eq(cp_task_syscall_parse(running,
						       strlen(running), &sc),
				 0);
		ck_assert_int_eq(sc.state, CP_TASK_RUNNING);
		ck_assert_int_eq(sc.nr, -1);
		ck_assert_uint_eq(sc.sp, 0);
		ck_assert_uint_eq(sc.pc, 0);
	}
}
END_TEST

static const char *const malformed_syscall[] = {
	"",
	"\n",
	"runnin",
	"running\nx",
	"running\n\n",
	" running",
	"-1",
	"-1 0x1",
	"-1 0x1 0x2 0x3",
	"-2 0x1 0x2",
	"-0 0x1 0x2",
	"--1 0x1 0x2",
	"-1 1 0x2",
	"-1 0x 0x2",
	"-1 0x1 0x2 ",
	"230",
	"230 0x0 0x0",
	"230 0x0 0x0 0x0 0x0 0x0 0x0 0x1",
	"230 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2 0x3",
	"230 0 0 0 0 0 0 0 0",
	"230  0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2",
	"230 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2\n\n",
	"230 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2 \n",
	"230 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0xg",
	"0x10 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2",
	" 230 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2",
	"9999999999 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2",
	"99999999999999999999999 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2",
	"230 0x10000000000000000 0x0 0x0 0x0 0x0 0x0 0x1 0x2",
};

START_TEST(syscall_malformed)
{
	const char *text = malformed_syscall[_i];
	struct cp_task_syscall sc;
	memset(&sc, 0x55, sizeof(sc));
	ck_assert_msg(cp_task_syscall_parse(text, strlen(text), &sc) ==
			      -CP_E_PARSE,
		      "\"%s\" was accepted", text);
	/* A failed parse leaves nothing half-filled.  */
	ck_assert_int_eq(sc.state, CP_TASK_RUNNING);
	ck_assert_int_eq(sc.nr, -1);
	ck_assert_uint_eq(sc.sp, 0);
	ck_assert_uint_eq(sc.pc, 0);
}
END_TEST

START_TEST(syscall_respects_len)
{
	/* The parser reads LEN bytes and not one more (the buffer of a
	 * pread is not NUL-terminated).  */
	static const char text[] = "-1 0x10 0x20\nXXXX";
	struct cp_task_syscall sc;
	ck_assert_int_eq(cp_task_syscall_parse(text, 13, &sc), 0);
	ck_assert_uint_eq(sc.pc, 0x20);
	ck_assert_int_eq(cp_task_syscall_parse(text, 11, &sc), 0);
	ck_assert_uint_eq(sc.pc, 0x2);
	ck_assert_int_eq(cp_task_syscall_parse(text, 10, &sc), -CP_E_PARSE);
	ck_assert_int_eq(cp_task_syscall_parse(text, sizeof(text) - 1, &sc),
			 -CP_E_PARSE);
	ck_assert_int_eq(cp_task_syscall_parse("running", 4, &sc),
			 -CP_E_PARSE);
}
END_TEST

/* A child blocked in read(2) on a pipe, as the kernel shows it: system
 * call 0, the descriptor as first argument, a stack pointer inside the
 * child's stack and a pc inside executable code.  */
START_TEST(syscall_read_child)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		char byte;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[1]);
		_exit(read(fds[0], &byte, 1) == 0 ? 0 : 1);
	}
	close(fds[0]);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)child);
	struct cp_task_syscall sc = {0};
	/* Until the child is asleep in its read (not a timing assertion:
	 * the loop ends as soon as it is; the bound only ends a hang).  */
	for (int tries = 0; tries < 10000; tries++) {
		char *text;
		size_t len;
		ck_assert_int_eq(cp_procfs_slurp(path, &text, &len), 0);
		ck_assert_int_eq(cp_task_syscall_parse(text, len, &sc), 0);
		free(text);
		if (sc.state == CP_TASK_IN_SYSCALL && sc.nr == 0)
			break;
		usleep(1000);
	}
	ck_assert_int_eq(sc.state, CP_TASK_IN_SYSCALL);
	ck_assert_int_eq(sc.nr, 0);
	ck_assert_uint_eq(sc.args[0], (uint64_t)fds[0]);
	ck_assert_uint_eq(sc.args[2], 1);
	struct cp_maps *maps;
	ck_assert_int_eq(cp_maps_read(child, &maps), 0);
	const struct cp_map *code = cp_maps_find(maps, sc.pc);
	const struct cp_map *stack = cp_maps_find(maps, sc.sp);
	ck_assert_ptr_nonnull(code);
	ck_assert(code->executable);
	ck_assert_ptr_nonnull(stack);
	ck_assert_str_eq(stack->path, "[stack]");
	cp_maps_free(maps);
	close(fds[1]);
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

START_TEST(schedstat_parse)
{
	struct cp_task_schedstat st;
	static const char text[] = "445464 1200 17\n";
	ck_assert_int_eq(cp_task_schedstat_parse(text, strlen(text), &st), 0);
	ck_assert_uint_eq(st.run_ns, 445464);
	ck_assert_uint_eq(st.wait_ns, 1200);
	ck_assert_uint_eq(st.slices, 17);
	/* Without scheduler statistics the kernel writes zeros.  */
	ck_assert_int_eq(cp_task_schedstat_parse("0 0 0", 5, &st), 0);
	ck_assert_uint_eq(st.run_ns + st.wait_ns + st.slices, 0);
	static const char big[] = "18446744073709551615 0 1";
	ck_assert_int_eq(cp_task_schedstat_parse(big, strlen(big), &st), 0);
	ck_assert_uint_eq(st.run_ns, UINT64_MAX);
	/* Only LEN bytes are read.  */
	ck_assert_int_eq(cp_task_schedstat_parse("1 2 3 4", 5, &st), 0);
	ck_assert_uint_eq(st.slices, 3);
}
END_TEST

static const char *const malformed_schedstat[] = {
	"", "\n", "1", "1 2", "1 2 ", "1 2 3 4", "1 2 3\n\n", " 1 2 3",
	"1  2 3", "-1 2 3", "a b c", "0x1 2 3", "1 2 3x",
	"18446744073709551616 0 0", "1\t2\t3",
};

START_TEST(schedstat_malformed)
{
	const char *text = malformed_schedstat[_i];
	struct cp_task_schedstat st;
	memset(&st, 0x55, sizeof(st));
	ck_assert_msg(cp_task_schedstat_parse(text, strlen(text), &st) ==
			      -CP_E_PARSE,
		      "\"%s\" was accepted", text);
	ck_assert_uint_eq(st.run_ns + st.wait_ns + st.slices, 0);
}
END_TEST

START_TEST(schedstat_read_self)
{
	char *text;
	size_t len;
	struct cp_task_schedstat st;
	ck_assert_int_eq(cp_procfs_slurp("/proc/thread-self/schedstat", &text,
					 &len), 0);
	ck_assert_msg(cp_task_schedstat_parse(text, len, &st) == 0,
		      "cannot parse \"%s\"", text);
	free(text);
}
END_TEST

START_TEST(sched_parse)
{
	static const char text[] =
		"cat (4242, #threads: 1)\n"
		"-------------------------------------------------------------------\n"
		"se.exec_start                                :      77898501.889331\n"
		"se.sum_exec_runtime                          :          1234.000567\n"
		"nr_switches                                  :                    9\n"
		"nr_voluntary_switches                        :                    7\n"
		"nr_involuntary_switches                      :                    2\n";
	struct cp_task_sched st;
	ck_assert_int_eq(cp_task_sched_parse(text, strlen(text), &st), 0);
	ck_assert_uint_eq(st.run_ns, 1234000567u);
	ck_assert_uint_eq(st.voluntary, 7);
	/* A line whose name only begins like the one asked for is another
	 * (se.sum_exec_runtime_x), and the fraction must be 6 digits.  */
	static const char *const bad[] = {
		"se.sum_exec_runtime : 1.000001\n",
		"nr_voluntary_switches : 3\n",
		"se.sum_exec_runtime_x : 1.000001\nnr_voluntary_switches : 3\n",
		"se.sum_exec_runtime : 1.0001\nnr_voluntary_switches : 3\n",
		"se.sum_exec_runtime : 1\nnr_voluntary_switches : 3\n",
		"se.sum_exec_runtime : 1.000001\nnr_voluntary_switches : x\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ck_assert_msg(cp_task_sched_parse(bad[i], strlen(bad[i]),
						  &st) == -CP_E_PARSE,
			      "\"%s\" was accepted", bad[i]);
}
END_TEST

/* The kernel's own file, where it has one (CONFIG_SCHED_DEBUG): the run
 * time agrees with schedstat's, and a sleep is a voluntary switch.  */
START_TEST(sched_read_self)
{
	char *text;
	size_t len;
	struct cp_task_sched before, after;
	if (cp_procfs_slurp("/proc/thread-self/sched", &text, &len) < 0)
		return; /* no CONFIG_SCHED_DEBUG: schedstat is used */
	ck_assert_msg(cp_task_sched_parse(text, len, &before) == 0,
		      "cannot parse \"%s\"", text);
	free(text);
	usleep(2000);
	ck_assert_int_eq(cp_procfs_slurp("/proc/thread-self/sched", &text,
					 &len), 0);
	ck_assert_int_eq(cp_task_sched_parse(text, len, &after), 0);
	free(text);
	ck_assert_uint_gt(after.voluntary, before.voluntary);
	ck_assert_uint_ge(after.run_ns, before.run_ns);
	struct cp_task_schedstat ss;
	ck_assert_int_eq(cp_procfs_slurp("/proc/thread-self/schedstat", &text,
					 &len), 0);
	ck_assert_int_eq(cp_task_schedstat_parse(text, len, &ss), 0);
	free(text);
	ck_assert_uint_ge(ss.run_ns, after.run_ns);
}
END_TEST

static Suite *procfs_suite(void)
{
	Suite *s = suite_create("procfs");

	TCase *tc = tcase_create("maps");
	tcase_add_test(tc, maps_pie);
	tcase_add_test(tc, maps_deleted_and_spaces);
	tcase_add_test(tc, maps_find_boundaries);
	tcase_add_test(tc, maps_no_final_newline_and_empty);
	tcase_add_test(tc, maps_sorted);
	tcase_add_test(tc, maps_malformed_file);
	tcase_add_loop_test(tc, maps_malformed_lines, 0,
			    sizeof(malformed_maps) / sizeof(malformed_maps[0]));
	tcase_add_test(tc, maps_read_self);
	tcase_add_test(tc, maps_read_no_process);
	suite_add_tcase(s, tc);

	tc = tcase_create("stat");
	tcase_add_test(tc, stat_init);
	tcase_add_test(tc, stat_kernel_threads);
	tcase_add_test(tc, stat_zombie_and_running);
	tcase_add_test(tc, stat_comm_with_parentheses);
	tcase_add_test(tc, stat_malformed);
	tcase_add_test(tc, stat_respects_len);
	tcase_add_test(tc, stat_read_self);
	tcase_add_test(tc, stat_read_no_process);
	tcase_add_test(tc, state_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("syscall");
	tcase_add_test(tc, syscall_in_syscall);
	tcase_add_test(tc, syscall_blocked_and_running);
	tcase_add_loop_test(tc, syscall_malformed, 0,
			    sizeof(malformed_syscall) /
				    sizeof(malformed_syscall[0]));
	tcase_add_test(tc, syscall_respects_len);
	tcase_add_test(tc, syscall_read_child);
	tcase_add_test(tc, schedstat_parse);
	tcase_add_loop_test(tc, schedstat_malformed, 0,
			    sizeof(malformed_schedstat) /
				    sizeof(malformed_schedstat[0]));
	tcase_add_test(tc, schedstat_read_self);
	tcase_add_test(tc, sched_parse);
	tcase_add_test(tc, sched_read_self);
	suite_add_tcase(s, tc);

	tc = tcase_create("status");
	tcase_add_test(tc, status_parse);
	tcase_add_test(tc, status_partial_and_malformed);
	tcase_add_test(tc, status_read_self);
	suite_add_tcase(s, tc);

	tc = tcase_create("misc");
	tcase_add_test(tc, tracer_pid);
	tcase_add_test(tc, comm_of_self);
	tcase_add_test(tc, slurp);
	tcase_add_test(tc, strerror_messages);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(procfs_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
