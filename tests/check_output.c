/* Tests of the output destinations (cp_output_*, cprof/output.h) and of
 * every program that writes one: what -o may do to the machine.
 *
 * Run as root, cprof once turned /dev/null and /dev/full into regular
 * files, gave a FIFO's reader nothing and replaced symbolic links.  These
 * tests never touch the real /dev: they make their own device nodes
 * (mknod 1,3 is a null device, 1,7 a full one, a block node of an
 * unused major), FIFOs with a reader collecting the bytes, listening
 * sockets, symbolic links and directories in temporary directories, and
 * check after each run that the node is still what it was.
 *
 *   - the library: a new file, a replaced file (mode and owner kept),
 *     devices, a FIFO and a socket written in place, links followed (the
 *     link stays a link), links under /proc written through, refusals
 *     (directory, dangling link, loop, link owned by another user, block
 *     device) that touch nothing, temporaries named .NAME.cprof-tmp.PID.X
 *     and stale ones of dead writers removed (others' left alone), a name
 *     too long for the old ".tmp.XXXXXX" suffix;
 *   - cprof, each subcommand (flamegraph, diff, convert, report,
 *     timeline) with -o on each kind of destination, and a cprof killed
 *     with SIGKILL while its temporary exists: the next run removes it;
 *   - cprof-attach with -o on each kind of destination.
 *
 * Each test fails on the code before this suite (commit 5076806).  To
 * show it, build the suite in a worktree of that commit with
 * -DCP_TEST_OLD_OUTPUT_API (cp_output_open had no error buffer then and
 * no kinds; a shim below stands in).  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "testutil.h"

#define CPROF CP_BUILD_DIR "/cprof"
#define CPROF_ATTACH CP_BUILD_DIR "/cprof-attach"
#define CHAIN CP_BUILD_DIR "/fixtures/chain-O0"

/* Bounds that only end a hang.  */
#define RUN_TIMEOUT_MS 30000

#ifdef CP_TEST_OLD_OUTPUT_API
/* Only to show these tests fail on the code before them: everything was
 * a temporary renamed into place.  */
enum cp_output_kind { CP_OUTPUT_STDOUT, CP_OUTPUT_REPLACE, CP_OUTPUT_DIRECT };
static int out_open(const char *path, struct cp_output **out, char *error,
		    size_t size)
{
	int rc = cp_output_open(path, out);
	if (rc < 0)
		snprintf(error, size, "%s: %s", path, strerror(errno));
	return rc;
}
static enum cp_output_kind out_kind(const struct cp_output *out)
{
	return strcmp(cp_output_path(out), "-") == 0 ? CP_OUTPUT_STDOUT
						     : CP_OUTPUT_REPLACE;
}
#else
#define out_open cp_output_open
#define out_kind cp_output_kind
#endif

static void teardown(void)
{
	tu_cleanup();
}

/* ------------------------------------------------------------ helpers */

static bool is_root(void)
{
	return geteuid() == 0;
}

static const char *temp_dir(void)
{
	const char *dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	return dir;
}

/* DIR/NAME into BUF (PATH_MAX bytes); returns BUF.  */
static char *in_dir(char *buf, const char *dir, const char *name)
{
	ck_assert_int_lt(snprintf(buf, PATH_MAX, "%s/%s", dir, name),
			 PATH_MAX);
	return buf;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static char *read_file(const char *path)
{
	char *text = tu_read_file(path);
	ck_assert_msg(text != NULL, "cannot read %s: %s", path,
		      strerror(errno));
	return text;
}

static struct stat lstat_of(const char *path)
{
	struct stat st;
	ck_assert_msg(lstat(path, &st) == 0, "lstat %s: %s", path,
		      strerror(errno));
	return st;
}

/* A character device node at PATH: major 1 minor 3 is a null device, 7 a
 * full one.  */
static void make_char(const char *path, unsigned minor)
{
	ck_assert_msg(mknod(path, S_IFCHR | 0666, makedev(1, minor)) == 0,
		      "mknod %s: %s", path, strerror(errno));
}

/* A block device node of major 60 ("local/experimental use": no driver,
 * so even a wrong open could not reach a disk).  */
static void make_block(const char *path)
{
	ck_assert_msg(mknod(path, S_IFBLK | 0600, makedev(60, 0)) == 0,
		      "mknod %s: %s", path, strerror(errno));
}

static void make_link(const char *target, const char *path)
{
	ck_assert_msg(symlink(target, path) == 0, "symlink %s: %s", path,
		      strerror(errno));
}

/* PATH is still what BEFORE says: the same node of the same kind (and
 * device number), not replaced.  */
static void assert_same_node(const char *path, const struct stat *before)
{
	struct stat now;
	ck_assert_msg(lstat(path, &now) == 0, "%s is gone: %s", path,
		      strerror(errno));
	ck_assert_msg((now.st_mode & S_IFMT) == (before->st_mode & S_IFMT),
		      "%s changed kind: mode %o, was %o (replaced)", path,
		      (unsigned)now.st_mode, (unsigned)before->st_mode);
	ck_assert_msg(now.st_ino == before->st_ino &&
			      now.st_rdev == before->st_rdev,
		      "%s was replaced (inode %lu, was %lu)", path,
		      (unsigned long)now.st_ino,
		      (unsigned long)before->st_ino);
}

/* The link at PATH still points at TARGET.  */
static void assert_link(const char *path, const char *target)
{
	char text[PATH_MAX];
	ssize_t n = readlink(path, text, sizeof(text) - 1);
	ck_assert_msg(n >= 0, "%s is no longer a symbolic link: %s", path,
		      strerror(errno));
	text[n] = '\0';
	ck_assert_str_eq(text, target);
}

/* DIR holds exactly the entries NAMES (sorted, NULL-ended): no
 * temporaries left, nothing created.  */
static void assert_entries(const char *dir, const char *const names[])
{
	char **have;
	int n = tu_dir_entries(dir, &have);
	ck_assert_int_ge(n, 0);
	char list[4096] = "";
	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 " '%s'", have[i]);
	int want = 0;
	while (names[want])
		want++;
	bool same = n == want;
	for (int i = 0; same && i < n; i++)
		same = strcmp(have[i], names[i]) == 0;
	tu_free_names(have);
	ck_assert_msg(same, "%s holds%s", dir, list);
}

#define ENTRIES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_ENTRIES ((const char *const[]){NULL})

/* Some text of SIZE bytes, different at every position.  */
static char *pattern(size_t size)
{
	char *text = malloc(size + 1);
	ck_assert_ptr_nonnull(text);
	for (size_t i = 0; i < size; i++)
		text[i] = (char)('a' + (i * 7 + i / 26) % 26);
	text[size] = '\0';
	return text;
}

/* ---------------------------------------------------------- collector */

/* A thread that reads what a FIFO or a socket receives.  */
struct collector {
	int fd;          /* the FIFO (read end) or the listening socket */
	bool listening;  /* FD is a socket to accept one connection on */
	int stop[2];     /* a pipe: written when the writer is done */
	pthread_t thread;
	char *data;      /* received; NUL-ended once joined */
	size_t len, cap;
	bool eof;        /* the writer closed (rather than never came) */
};

static void collect_append(struct collector *c, const char *buf, size_t n)
{
	if (c->len + n + 1 > c->cap) {
		c->cap = (c->len + n + 1) * 2;
		c->data = realloc(c->data, c->cap);
		if (!c->data)
			abort();
	}
	memcpy(c->data + c->len, buf, n);
	c->len += n;
}

static void *collect(void *arg)
{
	struct collector *c = arg;
	int fd = c->fd;
	char buf[65536];
	if (c->listening) {
		struct pollfd p[2] = {{c->fd, POLLIN, 0}, {c->stop[0], POLLIN, 0}};
		while (poll(p, 2, -1) < 0)
			;
		if (!(p[0].revents & POLLIN))
			return NULL;
		fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return NULL;
	}
	for (;;) {
		/* A FIFO nobody has opened for writing yet polls as nothing
		 * (Linux), so this waits for the writer or for the stop.  */
		struct pollfd p[2] = {{fd, POLLIN, 0}, {c->stop[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0)
			continue;
		bool stopping = p[1].revents != 0;
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			collect_append(c, buf, (size_t)n);
		if (n == 0 && (p[0].revents & (POLLIN | POLLHUP))) {
			c->eof = true;
			break;
		}
		if (stopping)
			break;
	}
	if (fd != c->fd)
		close(fd);
	return NULL;
}

/* Make a FIFO at PATH and start reading it.  */
static void collect_fifo(struct collector *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	ck_assert_msg(mkfifo(path, 0600) == 0, "mkfifo %s: %s", path,
		      strerror(errno));
	/* Open before the writer: a writer's open then never waits.  */
	c->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(c->fd, 0);
	ck_assert_int_eq(pipe2(c->stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&c->thread, NULL, collect, c), 0);
}

/* Make a listening stream socket at PATH and start reading it.  */
static void collect_socket(struct collector *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->listening = true;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(c->fd, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	ck_assert_uint_lt(strlen(path), sizeof(addr.sun_path));
	strcpy(addr.sun_path, path);
	ck_assert_msg(bind(c->fd, (struct sockaddr *)&addr, sizeof(addr)) == 0,
		      "bind %s: %s", path, strerror(errno));
	ck_assert_int_eq(listen(c->fd, 1), 0);
	ck_assert_int_eq(pipe2(c->stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&c->thread, NULL, collect, c), 0);
}

/* The writer is done: take what arrived.  */
static void collect_finish(struct collector *c)
{
	ck_assert_int_eq(write(c->stop[1], "x", 1), 1);
	pthread_join(c->thread, NULL);
	collect_append(c, "", 0);
	c->data[c->len] = '\0';
	close(c->fd);
	close(c->stop[0]);
	close(c->stop[1]);
}

/* ------------------------------------------------------- programs run */

struct prog_run {
	int code;   /* exit code; -1 when killed by a signal */
	char *out;  /* standard output, NUL-ended */
	char *err;  /* standard error */
};

static char *slurp_stream(FILE *f)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	rewind(f);
	int c;
	while ((c = getc(f)) != EOF)
		putc(c, mem);
	fclose(mem);
	fclose(f);
	return text;
}

/* Start PROG with ARGS (NULL-ended, argv[0] included) in directory CWD,
 * standard input from IN_FD (-1: /dev/null), output to OUT and ERR.  */
static pid_t spawn(const char *prog, const char *cwd, int in_fd, FILE *out,
		   FILE *err, const char *const args[])
{
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (in_fd < 0)
			in_fd = open("/dev/null", O_RDONLY);
		dup2(in_fd, STDIN_FILENO);
		dup2(fileno(out), STDOUT_FILENO);
		dup2(fileno(err), STDERR_FILENO);
		if (cwd && chdir(cwd) != 0)
			_exit(126);
		alarm(60); /* survives exec: a hung program dies */
		execv(prog, (char *const *)args);
		fprintf(stderr, "cannot run %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	return pid;
}

static int wait_code(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run PROG (CPROF or CPROF_ATTACH) with ARGS in CWD, with COLLECTOR (may
 * be NULL) reading meanwhile.  */
static struct prog_run run_progv(const char *prog, const char *cwd,
				 struct collector *collector,
				 const char *const args[])
{
	FILE *out = tmpfile(), *err = tmpfile();
	ck_assert(out && err);
	const char *argv[40] = {strrchr(prog, '/') + 1};
	size_t argc = 1;
	for (size_t i = 0; args[i]; i++) {
		ck_assert_uint_lt(argc, 39);
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;
	pid_t pid = spawn(prog, cwd, -1, out, err, argv);
	struct prog_run run = {.code = wait_code(pid)};
	if (collector)
		collect_finish(collector);
	run.out = slurp_stream(out);
	run.err = slurp_stream(err);
	return run;
}

#define RUN(prog, cwd, collector, ...)                                     \
	run_progv((prog), (cwd), (collector),                              \
		  (const char *const[]){__VA_ARGS__, NULL})

static void run_free(struct prog_run *run)
{
	free(run->out);
	free(run->err);
}

static void assert_ok(const struct prog_run *run, const char *what)
{
	ck_assert_msg(run->code == 0, "%s: exit %d, stderr: %s", what,
		      run->code, run->err);
}

/* RUN failed with CODE and one line on stderr that starts with PREFIX
 * and contains TEXT (NULL: anything).  */
static void assert_fails(const struct prog_run *run, int code,
			 const char *prefix, const char *text,
			 const char *what)
{
	ck_assert_msg(run->code == code, "%s: exit %d, expected %d; stderr: %s",
		      what, run->code, code, run->err);
	ck_assert_msg(strncmp(run->err, prefix, strlen(prefix)) == 0 &&
			      tu_count_lines(run->err) == 1,
		      "%s: expected one line starting with '%s' on stderr: %s",
		      what, prefix, run->err);
	ck_assert_msg(!text || strstr(run->err, text),
		      "%s: stderr does not say '%s': %s", what, text, run->err);
}

/* ------------------------------------------------------- library tests */

/* Write TEXT through a new output to PATH and commit; returns how it
 * was written (callers check what became of PATH first: what a user
 * sees).  */
static enum cp_output_kind write_through(const char *path, const char *text)
{
	struct cp_output *out = NULL;
	char error[PATH_MAX + 256] = "";
	int rc = out_open(path, &out, error, sizeof(error));
	ck_assert_msg(rc == 0, "cp_output_open %s: %d: %s", path, rc, error);
	enum cp_output_kind kind = out_kind(out);
	ck_assert_int_eq(fputs(text, cp_output_stream(out)) >= 0, 1);
	rc = cp_output_commit(out);
	ck_assert_msg(rc == 0, "commit %s: %d: %s", path, rc, strerror(errno));
	return kind;
}

#define ASSERT_KIND(kind, want) \
	ck_assert_msg((kind) == (want), "written as kind %d, expected %s", \
		      (int)(kind), #want)


/* A new file gets 0666 less the umask; a replaced one keeps its mode
 * bits and (for root) its owner; abort leaves the old file as it was;
 * no temporary is left.  */
START_TEST(lib_regular_files)
{
	umask(022);
	const char *dir = temp_dir();
	char fresh[PATH_MAX], old[PATH_MAX];
	in_dir(fresh, dir, "new.folded");
	in_dir(old, dir, "old.folded");
	enum cp_output_kind kind = write_through(fresh, "main;a 1\n");
	char *text = read_file(fresh);
	ck_assert_str_eq(text, "main;a 1\n");
	free(text);
	ck_assert_uint_eq(lstat_of(fresh).st_mode & 07777, 0644);
	ASSERT_KIND(kind, CP_OUTPUT_REPLACE);

	write_file(old, "old\n");
	ck_assert_int_eq(chmod(old, 0640), 0);
	if (is_root())
		ck_assert_int_eq(chown(old, 65534, 65534), 0);
	struct cp_output *out = NULL;
	char error[PATH_MAX + 256];
	ck_assert_int_eq(out_open(old, &out, error, sizeof(error)), 0);
	fputs("half", cp_output_stream(out));
	cp_output_abort(out);
	text = read_file(old);
	ck_assert_str_eq(text, "old\n");
	free(text);

	kind = write_through(old, "main;b 2\n");
	text = read_file(old);
	ck_assert_str_eq(text, "main;b 2\n");
	free(text);
	struct stat st = lstat_of(old);
	ck_assert_msg((st.st_mode & 07777) == 0640,
		      "the replaced file's mode is %o, was 0640",
		      (unsigned)(st.st_mode & 07777));
	if (is_root())
		ck_assert_msg(st.st_uid == 65534 && st.st_gid == 65534,
			      "the replaced file's owner is %u:%u, was 65534:65534",
			      (unsigned)st.st_uid, (unsigned)st.st_gid);
	assert_entries(dir, ENTRIES("new.folded", "old.folded"));
	ASSERT_KIND(kind, CP_OUTPUT_REPLACE);
}
END_TEST

/* A name as long as a name may be: the temporary's name is cut to fit
 * (".tmp.XXXXXX" after it did not).  */
START_TEST(lib_long_name)
{
	const char *dir = temp_dir();
	char name[NAME_MAX + 1];
	memset(name, 'n', NAME_MAX);
	name[NAME_MAX] = '\0';
	char path[PATH_MAX];
	enum cp_output_kind kind =
		write_through(in_dir(path, dir, name), "main;a 1\n");
	char *text = read_file(path);
	ck_assert_str_eq(text, "main;a 1\n");
	free(text);
	assert_entries(dir, ENTRIES(name));
	ASSERT_KIND(kind, CP_OUTPUT_REPLACE);
}
END_TEST

/* A null device is written in place and stays a device; a full one
 * reports ENOSPC at commit and stays a device.  */
START_TEST(lib_char_devices)
{
	if (!is_root()) {
		fprintf(stderr, "lib_char_devices: skipped (mknod needs root)\n");
		return;
	}
	const char *dir = temp_dir();
	char null[PATH_MAX], full[PATH_MAX];
	make_char(in_dir(null, dir, "null"), 3);
	make_char(in_dir(full, dir, "full"), 7);
	struct stat null_st = lstat_of(null), full_st = lstat_of(full);

	enum cp_output_kind kind = write_through(null, "main;a 1\n");
	assert_same_node(null, &null_st);
	ASSERT_KIND(kind, CP_OUTPUT_DIRECT);

	struct cp_output *out = NULL;
	char error[PATH_MAX + 256] = "";
	int rc = out_open(full, &out, error, sizeof(error));
	ck_assert_msg(rc == 0, "cp_output_open %s: %s", full, error);
	kind = out_kind(out);
	fputs("main;a 1\n", cp_output_stream(out));
	errno = 0;
	rc = cp_output_commit(out);
	int err = errno;
	assert_same_node(full, &full_st);
	ASSERT_KIND(kind, CP_OUTPUT_DIRECT);
	ck_assert_msg(rc == -CP_E_SYS && err == ENOSPC,
		      "commit on a full device: %d, errno %s", rc,
		      strerror(err));
	assert_entries(dir, ENTRIES("full", "null"));
}
END_TEST

/* A FIFO's reader gets every byte (more than a pipe holds), and the FIFO
 * stays a FIFO.  */
START_TEST(lib_fifo)
{
	const char *dir = temp_dir();
	char fifo[PATH_MAX];
	struct collector c;
	collect_fifo(&c, in_dir(fifo, dir, "fifo"));
	struct stat st = lstat_of(fifo);
	char *text = pattern(1 << 20);
	enum cp_output_kind kind = write_through(fifo, text);
	collect_finish(&c);
	assert_same_node(fifo, &st);
	ASSERT_KIND(kind, CP_OUTPUT_DIRECT);
	ck_assert_msg(c.len == strlen(text) && memcmp(c.data, text, c.len) == 0,
		      "the FIFO's reader got %zu bytes, expected %zu", c.len,
		      strlen(text));
	ck_assert(c.eof);
	assert_entries(dir, ENTRIES("fifo"));
	free(c.data);
	free(text);
}
END_TEST

/* A listening socket is connected to and gets every byte.  */
START_TEST(lib_socket)
{
	const char *dir = temp_dir();
	char sock[PATH_MAX];
	struct collector c;
	collect_socket(&c, in_dir(sock, dir, "sock"));
	struct stat st = lstat_of(sock);
	char *text = pattern(1 << 20);
	enum cp_output_kind kind = write_through(sock, text);
	collect_finish(&c);
	assert_same_node(sock, &st);
	ASSERT_KIND(kind, CP_OUTPUT_DIRECT);
	ck_assert_msg(c.len == strlen(text) && memcmp(c.data, text, c.len) == 0,
		      "the socket's reader got %zu bytes, expected %zu", c.len,
		      strlen(text));
	assert_entries(dir, ENTRIES("sock"));
	free(c.data);
	free(text);
}
END_TEST

/* Links are followed to their final target (absolute, relative, a chain
 * of two, one to a device): the file there is replaced in its own
 * directory, keeping its mode; every link stays the same link.  */
START_TEST(lib_symlinks)
{
	const char *dir = temp_dir(), *other = temp_dir();
	char target[PATH_MAX], rel[PATH_MAX], abs_link[PATH_MAX],
		rel_link[PATH_MAX], chain[PATH_MAX];
	write_file(in_dir(target, other, "target.folded"), "old\n");
	ck_assert_int_eq(chmod(target, 0600), 0);
	snprintf(rel, sizeof(rel), "../%s/target.folded",
		 strrchr(other, '/') + 1);
	make_link(target, in_dir(abs_link, dir, "abs"));
	make_link(rel, in_dir(rel_link, dir, "rel"));
	make_link("rel", in_dir(chain, dir, "chain"));

	const struct {
		const char *path, *text;
	} cases[] = {
		{abs_link, "main;abs 1\n"},
		{rel_link, "main;rel 2\n"},
		{chain, "main;chain 3\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		enum cp_output_kind kind =
			write_through(cases[i].path, cases[i].text);
		assert_link(abs_link, target);
		assert_link(rel_link, rel);
		assert_link(chain, "rel");
		ASSERT_KIND(kind, CP_OUTPUT_REPLACE);
		char *text = read_file(target);
		ck_assert_msg(strcmp(text, cases[i].text) == 0,
			      "through %s the target holds '%s'", cases[i].path,
			      text);
		free(text);
		ck_assert_uint_eq(lstat_of(target).st_mode & 07777, 0600);
	}
	if (is_root()) {
		char null[PATH_MAX], to_null[PATH_MAX];
		make_char(in_dir(null, other, "null"), 3);
		struct stat st = lstat_of(null);
		make_link(null, in_dir(to_null, dir, "to-null"));
		enum cp_output_kind kind = write_through(to_null, "main;a 1\n");
		assert_same_node(null, &st);
		assert_link(to_null, null);
		ASSERT_KIND(kind, CP_OUTPUT_DIRECT);
		assert_entries(dir, ENTRIES("abs", "chain", "rel", "to-null"));
		assert_entries(other, ENTRIES("null", "target.folded"));
	} else {
		assert_entries(dir, ENTRIES("abs", "chain", "rel"));
		assert_entries(other, ENTRIES("target.folded"));
	}
}
END_TEST

/* A link to /proc/self/fd/N (what /dev/stdout is) writes to that open
 * file: here a pipe's write end.  */
START_TEST(lib_proc_fd_link)
{
	const char *dir = temp_dir();
	int fds[2];
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	char proc[64], link[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fds[1]);
	make_link(proc, in_dir(link, dir, "my-stdout"));
	enum cp_output_kind kind = write_through(link, "main;a 1\n");
	assert_link(link, proc);
	char buf[64] = "";
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	ck_assert_msg(n == 9 && strcmp(buf, "main;a 1\n") == 0,
		      "the pipe got %zd bytes: '%s'", n, n > 0 ? buf : "");
	assert_entries(dir, ENTRIES("my-stdout"));
	ASSERT_KIND(kind, CP_OUTPUT_DIRECT);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

/* Destinations that are refused: -CP_E_INVAL, one line naming the path,
 * and nothing touched or created.  */
START_TEST(lib_refused)
{
	const char *dir = temp_dir(), *other = temp_dir();
	char p[PATH_MAX], target[PATH_MAX];
	ck_assert_int_eq(mkdir(in_dir(p, dir, "sub"), 0755), 0);
	write_file(in_dir(target, other, "target"), "keep\n");
	make_link("nowhere", in_dir(p, dir, "dangling"));
	make_link("loop-b", in_dir(p, dir, "loop-a"));
	make_link("loop-a", in_dir(p, dir, "loop-b"));
	make_link("sub", in_dir(p, dir, "to-dir"));
	const char *const *names =
		ENTRIES("dangling", "loop-a", "loop-b", "sub", "to-dir");
	const char *const *root_names =
		ENTRIES("block", "dangling", "foreign", "loop-a", "loop-b",
			"sub", "to-dir");
	if (is_root()) {
		make_block(in_dir(p, dir, "block"));
		make_link(target, in_dir(p, dir, "foreign"));
		ck_assert_int_eq(lchown(p, 65534, 65534), 0);
		names = root_names;
	}
	const char *cases[] = {"sub", "sub/", ".", "dangling", "loop-a",
			       "to-dir", "block", "foreign"};
	size_t ncases = sizeof(cases) / sizeof(*cases) - (is_root() ? 0 : 2);
	for (size_t i = 0; i < ncases; i++) {
		char path[PATH_MAX];
		in_dir(path, dir, cases[i]);
		struct stat before;
		bool existed = lstat(path, &before) == 0;
		struct cp_output *out = NULL;
		char error[PATH_MAX + 256] = "";
		int rc = out_open(path, &out, error, sizeof(error));
		if (rc == 0) {
			fputs("main;a 1\n", cp_output_stream(out));
			cp_output_commit(out);
		}
		ck_assert_msg(rc == -CP_E_INVAL,
			      "%s: cp_output_open returned %d (%s), expected -CP_E_INVAL",
			      cases[i], rc, error);
		ck_assert_msg(strstr(error, path) && !strchr(error, '\n'),
			      "%s: the message is not one line naming it: %s",
			      cases[i], error);
		if (existed)
			assert_same_node(path, &before);
		assert_entries(dir, names);
	}
	char *text = read_file(target);
	ck_assert_str_eq(text, "keep\n");
	free(text);
	assert_entries(other, ENTRIES("target"));
}
END_TEST

/* Links on the way to the file are followed by the same rule as the
 * last one: ours or root's are, another user's is refused (with nothing
 * written where it points); /dev/fd-style links into /proc work.  */
START_TEST(lib_directory_links)
{
	const char *dir = temp_dir(), *other = temp_dir();
	char p[PATH_MAX], target[PATH_MAX];
	write_file(in_dir(target, other, "target"), "keep\n");
	make_link(other, in_dir(p, dir, "ours"));
	make_link("/proc/self/fd", in_dir(p, dir, "fd"));
	int fds[2];
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	char via_fd[PATH_MAX];
	snprintf(via_fd, sizeof(via_fd), "%s/fd/%d", dir, fds[1]);
	enum cp_output_kind fd_kind = write_through(via_fd, "main;fd 1\n");
	char buf[64] = "";
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	ck_assert_msg(n == 10 && strcmp(buf, "main;fd 1\n") == 0,
		      "through %s the pipe got %zd bytes: '%s'", via_fd, n,
		      n > 0 ? buf : "");
	close(fds[0]);
	close(fds[1]);
	ASSERT_KIND(fd_kind, CP_OUTPUT_DIRECT);

	snprintf(p, sizeof(p), "%s/ours/new.folded", dir);
	write_through(p, "main;a 1\n");
	char *text = read_file(in_dir(p, other, "new.folded"));
	ck_assert_str_eq(text, "main;a 1\n");
	free(text);
	if (!is_root()) {
		assert_entries(dir, ENTRIES("fd", "ours"));
		return;
	}
	make_link(other, in_dir(p, dir, "theirs"));
	ck_assert_int_eq(lchown(p, 65534, 65534), 0);
	/* ".." after a link is the parent of where it led (/tmp here) */
	char roundabout[PATH_MAX];
	snprintf(roundabout, sizeof(roundabout), "ours/../%s/theirs/target",
		 strrchr(dir, '/') + 1);
	const char *cases[] = {"theirs/target", "theirs/fresh", roundabout};
	for (size_t i = 0; i < 3; i++) {
		char path[PATH_MAX];
		in_dir(path, dir, cases[i]);
		struct cp_output *out = NULL;
		char error[PATH_MAX + 256] = "";
		int rc = out_open(path, &out, error, sizeof(error));
		if (rc == 0) {
			fputs("main;a 1\n", cp_output_stream(out));
			cp_output_commit(out);
		}
		ck_assert_msg(rc == -CP_E_INVAL,
			      "%s: cp_output_open returned %d (%s), expected -CP_E_INVAL",
			      cases[i], rc, error);
		ck_assert_msg(strstr(error, path) && strstr(error, "theirs") &&
				      strstr(error, "65534"),
			      "%s: the message does not name the link and its owner: %s",
			      cases[i], error);
		text = read_file(target);
		ck_assert_str_eq(text, "keep\n");
		free(text);
		assert_entries(other, ENTRIES("new.folded", "target"));
	}
	assert_entries(dir, ENTRIES("fd", "ours", "theirs"));
}
END_TEST

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Temporaries are .NAME.cprof-tmp.PID.XXXXXXXX; one of a dead writer
 * that is a regular file of ours goes at the next open of NAME; those of
 * live writers, of another user, of another name, and links stay.  */
START_TEST(lib_stale_temporaries)
{
	const char *dir = temp_dir();
	pid_t dead = tu_reaped_pid();
	ck_assert_int_gt(dead, 0);
	char stale[128], live[128], foreign[128], other_name[128], link[128];
	snprintf(stale, sizeof(stale), ".out.folded.cprof-tmp.%d.0123abcd",
		 (int)dead);
	snprintf(live, sizeof(live), ".out.folded.cprof-tmp.%d.89abcdef",
		 (int)getpid());
	snprintf(foreign, sizeof(foreign), ".out.folded.cprof-tmp.%d.00000001",
		 (int)dead);
	snprintf(other_name, sizeof(other_name),
		 ".other.folded.cprof-tmp.%d.0123abcd", (int)dead);
	snprintf(link, sizeof(link), ".out.folded.cprof-tmp.%d.00000002",
		 (int)dead);
	char p[PATH_MAX];
	write_file(in_dir(p, dir, stale), "stale\n");
	write_file(in_dir(p, dir, live), "live\n");
	write_file(in_dir(p, dir, other_name), "other\n");
	make_link("out.folded", in_dir(p, dir, link));
	const char *after[8] = {link, live, other_name, "out.folded"};
	size_t nafter = 4;
	if (is_root()) {
		write_file(in_dir(p, dir, foreign), "foreign\n");
		ck_assert_int_eq(chown(p, 65534, 65534), 0);
		after[nafter++] = foreign;
	}
	qsort(after, nafter, sizeof(*after), compare_names);

	char out_path[PATH_MAX];
	in_dir(out_path, dir, "out.folded");
	struct cp_output *out = NULL;
	char error[PATH_MAX + 256];
	ck_assert_int_eq(out_open(out_path, &out, error, sizeof(error)), 0);
	/* While open: the stale one is gone, ours is there, named as the
	 * man page says.  */
	char **names;
	int n = tu_dir_entries(dir, &names);
	char mine[64];
	snprintf(mine, sizeof(mine), ".out.folded.cprof-tmp.%d.", (int)getpid());
	int ours = 0;
	bool stale_there = false;
	for (int i = 0; i < n; i++) {
		stale_there |= strcmp(names[i], stale) == 0;
		if (strncmp(names[i], mine, strlen(mine)) == 0 &&
		    strcmp(names[i], live) != 0 &&
		    strlen(names[i]) == strlen(mine) + 8)
			ours++;
	}
	tu_free_names(names);
	fputs("main;a 1\n", cp_output_stream(out));
	ck_assert_int_eq(cp_output_commit(out), 0);
	ck_assert_msg(ours == 1, "no temporary named %sXXXXXXXX while writing",
		      mine);
	ck_assert_msg(!stale_there, "the stale temporary %s was not removed",
		      stale);
	assert_entries(dir, after);
}
END_TEST

/* ---------------------------------------------------------- cprof e2e */

/* Inputs for every subcommand: a folded profile and raw samples.  */
struct inputs {
	char folded[PATH_MAX], raw[PATH_MAX];
};

static void make_inputs(struct inputs *in)
{
	const char *dir = temp_dir();
	write_file(in_dir(in->folded, dir, "in.folded"),
		   "main;parse;hash 30\nmain;parse 5\nmain;write 12\n");
	write_file(in_dir(in->raw, dir, "in.raw"),
		   "# thread 7 worker\n"
		   "0.000000 7 main;parse\n0.010000 7 main;parse;hash\n"
		   "0.020000 7 main;write\n0.030000 7 main;write\n");
}

/* Each subcommand with "-o OUT" (OUT relative, so runs in two
 * directories have the same command line, which the SVG shows).  */
#define NCOMMANDS 5
static void command_args(const struct inputs *in, size_t i, const char *out,
			 const char *args[8])
{
	const char *const table[NCOMMANDS][8] = {
		{"flamegraph", in->folded, "-o", out},
		{"diff", in->folded, in->folded, "-o", out},
		{"convert", in->folded, "--format", "folded", "-o", out},
		{"report", in->folded, "-o", out},
		{"timeline", in->raw, "-o", out},
	};
	memcpy(args, table[i], sizeof(table[i]));
}

/* What command I writes: run it with -o a new regular file.  */
static char *expected_output(const struct inputs *in, size_t i)
{
	const char *dir = temp_dir();
	const char *args[8];
	command_args(in, i, "out", args);
	struct prog_run run = run_progv(CPROF, dir, NULL, args);
	assert_ok(&run, args[0]);
	run_free(&run);
	char p[PATH_MAX];
	char *text = read_file(in_dir(p, dir, "out"));
	ck_assert_msg(text[0] != '\0', "cprof %s wrote nothing", args[0]);
	return text;
}

/* -o onto a null device: written, the device stays; onto a full one:
 * exit 1, "No space left on device", the device stays.  */
START_TEST(cprof_char_devices)
{
	if (!is_root()) {
		fprintf(stderr, "cprof_char_devices: skipped (mknod needs root)\n");
		return;
	}
	struct inputs in;
	make_inputs(&in);
	const char *dir = temp_dir();
	char null[PATH_MAX], full[PATH_MAX];
	make_char(in_dir(null, dir, "null"), 3);
	make_char(in_dir(full, dir, "full"), 7);
	struct stat null_st = lstat_of(null), full_st = lstat_of(full);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const char *args[8];
		command_args(&in, i, "null", args);
		struct prog_run run = run_progv(CPROF, dir, NULL, args);
		assert_same_node(null, &null_st);
		assert_ok(&run, args[0]);
		run_free(&run);

		command_args(&in, i, "full", args);
		run = run_progv(CPROF, dir, NULL, args);
		assert_same_node(full, &full_st);
		assert_fails(&run, 1, "cprof: cannot write full",
			     "No space left on device", args[0]);
		run_free(&run);
		assert_entries(dir, ENTRIES("full", "null"));
	}
}
END_TEST

/* -o onto a FIFO: its reader gets what a file would hold.  The date in
 * an SVG's header is fixed (SOURCE_DATE_EPOCH): the two runs compared
 * can fall on either side of a second.  */
START_TEST(cprof_fifo)
{
	setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
	struct inputs in;
	make_inputs(&in);
	const char *dir = temp_dir();
	char fifo[PATH_MAX];
	in_dir(fifo, dir, "out");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		char *expected = expected_output(&in, i);
		unlink(fifo);
		struct collector c;
		collect_fifo(&c, fifo);
		struct stat st = lstat_of(fifo);
		const char *args[8];
		command_args(&in, i, "out", args);
		struct prog_run run = run_progv(CPROF, dir, &c, args);
		assert_same_node(fifo, &st);
		assert_ok(&run, args[0]);
		if (strcmp(c.data, expected) != 0) {
			/* The whole texts would pass Check's message limit. */
			size_t at = 0;
			while (c.data[at] && c.data[at] == expected[at])
				at++;
			fprintf(stderr, "cprof %s: the FIFO's reader got:\n%s\n"
				"expected:\n%s\n", args[0], c.data, expected);
			ck_abort_msg("cprof %s: the FIFO's reader got %zu bytes, "
				     "expected %zu; they differ from byte %zu "
				     "(eof seen: %d)", args[0], c.len,
				     strlen(expected), at, (int)c.eof);
		}
		assert_entries(dir, ENTRIES("out"));
		run_free(&run);
		free(c.data);
		free(expected);
	}
}
END_TEST

/* -o onto a link to a file in another directory: the file is replaced
 * there (mode kept), the link stays; a link to /proc/self/fd/1 (as
 * /dev/stdout) writes to standard output.  */
START_TEST(cprof_symlinks)
{
	struct inputs in;
	make_inputs(&in);
	const char *dir = temp_dir(), *other = temp_dir();
	char target[PATH_MAX], link[PATH_MAX], so[PATH_MAX];
	write_file(in_dir(target, other, "target"), "old\n");
	ck_assert_int_eq(chmod(target, 0600), 0);
	make_link(target, in_dir(link, dir, "out"));
	make_link("/proc/self/fd/1", in_dir(so, dir, "so"));
	for (size_t i = 0; i < NCOMMANDS; i++) {
		char *expected = expected_output(&in, i);
		const char *args[8];
		command_args(&in, i, "out", args);
		struct prog_run run = run_progv(CPROF, dir, NULL, args);
		assert_link(link, target);
		assert_ok(&run, args[0]);
		char *text = read_file(target);
		ck_assert_msg(strcmp(text, expected) == 0,
			      "cprof %s: the link's target holds:\n%s", args[0],
			      text);
		ck_assert_uint_eq(lstat_of(target).st_mode & 07777, 0600);
		free(text);
		run_free(&run);

		/* the SVG names the output: compare with an "so" run */
		if (strcmp(args[0], "flamegraph") == 0 ||
		    strcmp(args[0], "diff") == 0) {
			free(expected);
			command_args(&in, i, "so", args);
			const char *tmp = temp_dir();
			run = run_progv(CPROF, tmp, NULL, args);
			assert_ok(&run, args[0]);
			run_free(&run);
			char p[PATH_MAX];
			expected = read_file(in_dir(p, tmp, "so"));
		}
		command_args(&in, i, "so", args);
		run = run_progv(CPROF, dir, NULL, args);
		assert_link(so, "/proc/self/fd/1");
		assert_ok(&run, args[0]);
		ck_assert_msg(strcmp(run.out, expected) == 0,
			      "cprof %s -o so: standard output holds:\n%s",
			      args[0], run.out);
		run_free(&run);
		free(expected);
		assert_entries(dir, ENTRIES("out", "so"));
		assert_entries(other, ENTRIES("target"));
	}
}
END_TEST

/* -o onto a directory, a dangling link or a loop: exit 2, one line, and
 * nothing touched.  */
START_TEST(cprof_refused)
{
	struct inputs in;
	make_inputs(&in);
	const char *dir = temp_dir();
	char p[PATH_MAX];
	ck_assert_int_eq(mkdir(in_dir(p, dir, "sub"), 0755), 0);
	make_link("nowhere", in_dir(p, dir, "dangling"));
	make_link("loop-b", in_dir(p, dir, "loop-a"));
	make_link("loop-a", in_dir(p, dir, "loop-b"));
	const char *const names[] = {"dangling", "loop-a", "loop-b", "sub",
				     NULL};
	const char *outs[] = {"sub", "dangling", "loop-a"};
	for (size_t i = 0; i < NCOMMANDS; i++) {
		for (size_t j = 0; j < 3; j++) {
			const char *args[8];
			command_args(&in, i, outs[j], args);
			struct prog_run run = run_progv(CPROF, dir, NULL, args);
			char what[64], prefix[64];
			snprintf(what, sizeof(what), "cprof %s -o %s", args[0],
				 outs[j]);
			snprintf(prefix, sizeof(prefix),
				 "cprof: will not write to %s: ", outs[j]);
			assert_fails(&run, 2, prefix, NULL, what);
			ck_assert_str_eq(run.out, "");
			run_free(&run);
			assert_entries(dir, names);
			assert_link(in_dir(p, dir, "dangling"), "nowhere");
		}
	}
	char **entries;
	ck_assert_int_eq(tu_dir_entries(in_dir(p, dir, "sub"), &entries), 0);
	tu_free_names(entries);
}
END_TEST

/* A cprof killed with SIGKILL while writing leaves its temporary, named
 * .NAME.cprof-tmp.PID.XXXXXXXX; the next run that writes NAME removes
 * it.  */
START_TEST(cprof_killed_writer)
{
	struct inputs in;
	make_inputs(&in);
	const char *dir = temp_dir();
	/* cprof creates its output, then reads standard input: held open
	 * here, it waits with the temporary in place.  */
	int input[2];
	ck_assert_int_eq(pipe2(input, O_CLOEXEC), 0);
	FILE *out = tmpfile(), *err = tmpfile();
	const char *argv[] = {"cprof", "convert", "-", "--format", "folded",
			      "-o", "k.folded", NULL};
	pid_t pid = spawn(CPROF, dir, input[0], out, err, argv);
	close(input[0]);
	char **names = NULL;
	int n = 0;
	uint64_t deadline = tu_now_ns() + RUN_TIMEOUT_MS * 1000000ull;
	while ((n = tu_dir_entries(dir, &names)) == 0 &&
	       tu_now_ns() < deadline) {
		tu_free_names(names);
		names = NULL;
		tu_delay_ms(1);
	}
	ck_assert_msg(n == 1, "cprof created %d files", n);
	char temp[NAME_MAX + 1];
	snprintf(temp, sizeof(temp), "%s", names[0]);
	tu_free_names(names);
	char prefix[64];
	snprintf(prefix, sizeof(prefix), ".k.folded.cprof-tmp.%d.", (int)pid);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(wait_code(pid), -1);
	close(input[1]);
	fclose(out);
	fclose(err);
	ck_assert_msg(strncmp(temp, prefix, strlen(prefix)) == 0 &&
			      strlen(temp) == strlen(prefix) + 8,
		      "the temporary is named '%s', not %sXXXXXXXX", temp,
		      prefix);
	assert_entries(dir, ENTRIES(temp));

	const char *args[] = {"convert", in.folded, "--format", "folded", "-o",
			      "k.folded", NULL};
	struct prog_run run = run_progv(CPROF, dir, NULL, args);
	assert_ok(&run, "cprof convert after the kill");
	run_free(&run);
	assert_entries(dir, ENTRIES("k.folded"));
}
END_TEST

/* --------------------------------------------------- cprof-attach e2e */

/* cprof-attach -q -o OUT -- chain-O0 1, in DIR.  */
static struct prog_run attach_run(const char *dir, const char *out,
				  struct collector *collector)
{
	return RUN(CPROF_ATTACH, dir, collector, "-q", "-o", out, "--", CHAIN,
		   "1");
}

/* A profile cprof-attach wrote: folded lines of the chain fixture.  */
static void assert_profile(const char *text, const char *what)
{
	char error[256];
	struct tu_profile *profile = tu_profile_parse(text, error,
						      sizeof(error));
	ck_assert_msg(profile != NULL, "%s: not a folded profile (%s):\n%s",
		      what, error, text);
	ck_assert_msg(profile->count > 0 &&
			      tu_profile_count_frame(profile, "main") > 0,
		      "%s: no stack with main in it:\n%s", what, text);
	tu_profile_free(profile);
}

/* cprof-attach -o onto a link to a file elsewhere: the file replaced
 * (its mode kept), the link stays.  */
START_TEST(attach_symlink)
{
	const char *dir = temp_dir(), *other = temp_dir();
	char link[PATH_MAX], target[PATH_MAX];
	write_file(in_dir(target, other, "target"), "old\n");
	ck_assert_int_eq(chmod(target, 0640), 0);
	make_link(target, in_dir(link, dir, "link"));
	struct prog_run run = attach_run(dir, "link", NULL);
	assert_link(link, target);
	assert_ok(&run, "cprof-attach -o link");
	run_free(&run);
	char *text = read_file(target);
	assert_profile(text, "through the link");
	free(text);
	ck_assert_uint_eq(lstat_of(target).st_mode & 07777, 0640);
	assert_entries(dir, ENTRIES("link"));
	assert_entries(other, ENTRIES("target"));
}
END_TEST

/* cprof-attach -o onto a FIFO: the reader gets the profile.  */
START_TEST(attach_fifo)
{
	const char *dir = temp_dir();
	char fifo[PATH_MAX];
	struct collector c;
	collect_fifo(&c, in_dir(fifo, dir, "fifo"));
	struct stat st = lstat_of(fifo);
	struct prog_run run = attach_run(dir, "fifo", &c);
	assert_same_node(fifo, &st);
	assert_ok(&run, "cprof-attach -o fifo");
	run_free(&run);
	assert_profile(c.data, "the FIFO's reader");
	free(c.data);
	assert_entries(dir, ENTRIES("fifo"));
}
END_TEST

/* cprof-attach -o onto a null device: written, the device stays; onto a
 * full one: exit 125 (launch mode: a failure of ours, the command went
 * well) with ENOSPC, the device stays.  */
START_TEST(attach_char_devices)
{
	if (!is_root()) {
		fprintf(stderr, "attach_char_devices: skipped (mknod needs root)\n");
		return;
	}
	const char *dir = temp_dir();
	char null[PATH_MAX], full[PATH_MAX];
	make_char(in_dir(null, dir, "null"), 3);
	make_char(in_dir(full, dir, "full"), 7);
	struct stat null_st = lstat_of(null), full_st = lstat_of(full);
	struct prog_run run = attach_run(dir, "null", NULL);
	assert_same_node(null, &null_st);
	assert_ok(&run, "cprof-attach -o null");
	run_free(&run);
	run = attach_run(dir, "full", NULL);
	assert_same_node(full, &full_st);
	assert_fails(&run, 125, "cprof-attach: cannot write the profile to full",
		     "No space left on device", "cprof-attach -o full");
	run_free(&run);
	assert_entries(dir, ENTRIES("full", "null"));
}
END_TEST

/* cprof-attach -o onto a directory or a dangling link: refused before
 * any target is started, exit 2, nothing touched.  */
START_TEST(attach_refused)
{
	const char *dir = temp_dir();
	char p[PATH_MAX];
	make_link("nowhere", in_dir(p, dir, "dangling"));
	ck_assert_int_eq(mkdir(in_dir(p, dir, "sub"), 0755), 0);
	const char *refused[] = {"sub", "dangling"};
	for (size_t i = 0; i < 2; i++) {
		struct prog_run run = attach_run(dir, refused[i], NULL);
		char prefix[64];
		snprintf(prefix, sizeof(prefix),
			 "cprof-attach: will not write to %s: ", refused[i]);
		assert_fails(&run, 2, prefix, NULL, refused[i]);
		run_free(&run);
		assert_link(in_dir(p, dir, "dangling"), "nowhere");
		assert_entries(dir, ENTRIES("dangling", "sub"));
	}
}
END_TEST

/* cprof-attach removes a dead writer's temporary, not a live one's.  */
START_TEST(attach_stale_temporary)
{
	const char *dir = temp_dir();
	pid_t dead = tu_reaped_pid();
	char stale[128], live[128], p[PATH_MAX];
	snprintf(stale, sizeof(stale), ".p.folded.cprof-tmp.%d.0123abcd",
		 (int)dead);
	snprintf(live, sizeof(live), ".p.folded.cprof-tmp.%d.0123abcd",
		 (int)getpid());
	write_file(in_dir(p, dir, stale), "stale\n");
	write_file(in_dir(p, dir, live), "live\n");
	struct prog_run run = attach_run(dir, "p.folded", NULL);
	assert_ok(&run, "cprof-attach -o p.folded");
	run_free(&run);
	char *text = read_file(in_dir(p, dir, "p.folded"));
	assert_profile(text, "p.folded");
	free(text);
	assert_entries(dir, ENTRIES(live, "p.folded"));
}
END_TEST

/* ----------------------------------------------------------------- suite */

static Suite *output_suite(void)
{
	Suite *s = suite_create("output");

	TCase *tc = tcase_create("library");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lib_regular_files);
	tcase_add_test(tc, lib_long_name);
	tcase_add_test(tc, lib_char_devices);
	tcase_add_test(tc, lib_fifo);
	tcase_add_test(tc, lib_socket);
	tcase_add_test(tc, lib_symlinks);
	tcase_add_test(tc, lib_proc_fd_link);
	tcase_add_test(tc, lib_refused);
	tcase_add_test(tc, lib_directory_links);
	tcase_add_test(tc, lib_stale_temporaries);
	suite_add_tcase(s, tc);

	tc = tcase_create("cprof");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, cprof_char_devices);
	tcase_add_test(tc, cprof_fifo);
	tcase_add_test(tc, cprof_symlinks);
	tcase_add_test(tc, cprof_refused);
	tcase_add_test(tc, cprof_killed_writer);
	suite_add_tcase(s, tc);

	tc = tcase_create("cprof-attach");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, attach_symlink);
	tcase_add_test(tc, attach_fifo);
	tcase_add_test(tc, attach_char_devices);
	tcase_add_test(tc, attach_refused);
	tcase_add_test(tc, attach_stale_temporary);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	/* A test that fails with a FIFO's writer gone must not die of it.  */
	signal(SIGPIPE, SIG_IGN);
	SRunner *sr = srunner_create(output_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
