/* Unit tests for opening the target's paths (cprof/tpath.h): the
 * credentials from /proc/PID/status, who may read what, debuglink names,
 * and cp_tpath_open on every kind of file a target can put at a path. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/tpath.h"

/* ------------------------------------------------------------ credentials */

START_TEST(test_creds_parse)
{
	static const char status[] =
		"Name:\tcat\nUmask:\t0022\nState:\tR (running)\n"
		"Uid:\t1000\t1001\t1002\t1003\n"
		"Gid:\t100\t101\t102\t103\n"
		"FDSize:\t256\nGroups:\t4 24 27 \nNStgid:\t1\n";
	struct cp_tpath_creds c;

	ck_assert_int_eq(cp_tpath_creds_parse(status, strlen(status), &c), 0);
	ck_assert_uint_eq(c.uid, 1000);
	ck_assert_uint_eq(c.euid, 1001);
	ck_assert_uint_eq(c.gid, 100);
	ck_assert_uint_eq(c.egid, 101);
	ck_assert_uint_eq(c.ngroups, 3);
	ck_assert_uint_eq(c.groups[2], 27);

	/* No groups at all, as for nobody.  */
	static const char none[] = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n";
	ck_assert_int_eq(cp_tpath_creds_parse(none, strlen(none), &c), 0);
	ck_assert_uint_eq(c.ngroups, 0);

	static const char *const bad[] = {
		"Name:\tx\n",
		"Uid:\t1\nGid:\t1\t2\t3\t4\n",
		"Uid:\t1\t2\t3\t4\n",
		"Uid:\tx\t2\t3\t4\nGid:\t1\t2\t3\t4\n",
		"Uid:\t99999999999\t2\t3\t4\nGid:\t1\t2\t3\t4\n",
		"Uid:\t1\t2\t3\t4\nGid:\t1\t2\t3\t4\nGroups:\t1 x\n",
		/* A name the target chose cannot pose as a field.  */
		"Name:\tUid:\t0\t0\t0\t0\nGid:\t1\t2\t3\t4\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(cp_tpath_creds_parse(bad[i], strlen(bad[i]),
						      &c), -CP_E_PARSE);
	/* Only LEN bytes: the Gid line cut off.  */
	ck_assert_int_eq(cp_tpath_creds_parse(status, 60, &c), -CP_E_PARSE);
}
END_TEST

START_TEST(test_creds_read)
{
	struct cp_tpath_creds c;

	ck_assert_int_eq(cp_tpath_creds_read(getpid(), &c), 0);
	ck_assert_uint_eq(c.uid, getuid());
	ck_assert_uint_eq(c.euid, geteuid());
	ck_assert_uint_eq(c.egid, getegid());
}
END_TEST

START_TEST(test_can_read)
{
	struct cp_tpath_creds user = { .uid = 1000, .euid = 1000, .gid = 100,
				       .egid = 100, .groups = { 20 },
				       .ngroups = 1 };
	struct cp_tpath_creds root = { 0 };
	struct stat st = { .st_uid = 1000, .st_gid = 100 };

	st.st_mode = S_IFREG | 0600;
	ck_assert(cp_tpath_can_read(&user, &st));
	/* The owner's bits decide for the owner, even with others' r.  */
	st.st_mode = S_IFREG | 0044;
	ck_assert(!cp_tpath_can_read(&user, &st));
	st.st_uid = 0;
	st.st_mode = S_IFREG | 0600;
	ck_assert(!cp_tpath_can_read(&user, &st));
	ck_assert(cp_tpath_can_read(&root, &st));
	st.st_mode = S_IFREG | 0644;
	ck_assert(cp_tpath_can_read(&user, &st));
	/* Group: primary and supplementary.  */
	st.st_mode = S_IFREG | 0640;
	st.st_gid = 100;
	ck_assert(cp_tpath_can_read(&user, &st));
	st.st_gid = 20;
	ck_assert(cp_tpath_can_read(&user, &st));
	st.st_gid = 21;
	ck_assert(!cp_tpath_can_read(&user, &st));
}
END_TEST

START_TEST(test_debuglink_names)
{
	static const char *const good[] = {
		"libc.so.6.debug", "a", "foo-1.2.debug", ".hidden.debug",
		"name with spaces",
	};
	static const char *const bad[] = {
		"", "..", ".", "../x", "../../etc/shadow", "a/b", "/abs",
		"x..debug", "tab\there", "nl\n", "del\x7f",
	};
	char long_name[NAME_MAX + 2];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(cp_tpath_debuglink_ok(good[i]), "\"%s\" refused",
			      good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!cp_tpath_debuglink_ok(bad[i]), "\"%s\" taken",
			      bad[i]);
	memset(long_name, 'a', NAME_MAX);
	long_name[NAME_MAX] = '\0';
	ck_assert(cp_tpath_debuglink_ok(long_name));
	long_name[NAME_MAX] = 'a';
	long_name[NAME_MAX + 1] = '\0';
	ck_assert(!cp_tpath_debuglink_ok(long_name));
}
END_TEST

/* ------------------------------------------------------------ opening */

static char dir[PATH_MAX];
static char file[PATH_MAX + 16], fifo[PATH_MAX + 16], link_path[PATH_MAX + 16];
static struct cp_tpath_creds me;

static void open_setup(void)
{
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/check_tpath-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	f = fopen(file, "w");
	ck_assert_ptr_nonnull(f);
	fputs("content\n", f);
	fclose(f);
	ck_assert_int_eq(mkfifo(fifo, 0644), 0);
	ck_assert_int_eq(cp_tpath_creds_read(getpid(), &me), 0);
}

static void open_teardown(void)
{
	unlink(file);
	unlink(fifo);
	unlink(link_path);
	rmdir(dir);
}

/* cp_tpath_open, expecting a refusal that says WHY.  */
static void expect_refused(const char *path, unsigned flags, const char *why)
{
	const char *got = NULL;
	struct stat st;
	int fd = cp_tpath_open(getpid(), path, flags, &me, &st, &got);

	ck_assert_msg(fd == -CP_E_PERM, "%s: %d, not refused", path, fd);
	ck_assert_msg(got && strstr(got, why), "%s: \"%s\", expected \"%s\"",
		      path, got ? got : "(null)", why);
}

START_TEST(test_open_kinds)
{
	struct stat st, direct;
	const char *why;
	char buf[16];
	int fd = cp_tpath_open(getpid(), file, CP_TPATH_NOFOLLOW |
			       CP_TPATH_OWNED | CP_TPATH_READABLE, &me, &st,
			       &why);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(stat(file, &direct), 0);
	ck_assert_uint_eq(st.st_ino, direct.st_ino);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 8);
	ck_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	close(fd);

	/* Never a FIFO (this would block for ever if it were opened), a
	 * device, a directory.  */
	expect_refused(fifo, 0, "a FIFO");
	expect_refused("/dev/zero", 0, "a device");
	expect_refused(dir, 0, "a directory");
	/* A symlink: refused as the last component with NOFOLLOW,
	 * followed without.  */
	ck_assert_int_eq(symlink(file, link_path), 0);
	expect_refused(link_path, CP_TPATH_NOFOLLOW, "a symbolic link");
	fd = cp_tpath_open(getpid(), link_path, 0, &me, &st, NULL);
	ck_assert_int_ge(fd, 0);
	close(fd);
	unlink(link_path);
	ck_assert_int_eq(symlink(fifo, link_path), 0);
	expect_refused(link_path, 0, "a FIFO");
	/* Absent.  */
	errno = 0;
	ck_assert_int_eq(cp_tpath_open(getpid(), "/nonexistent/x", 0, &me,
				       NULL, NULL), -CP_E_SYS);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_open_owner_rules)
{
	struct cp_tpath_creds other = { .uid = 4242, .euid = 4242,
					.gid = 4242, .egid = 4242 };

	if (geteuid() != 0)
		return; /* chown */
	/* Root's file, 0600: the owner rule passes, the target may not
	 * read it.  */
	ck_assert_int_eq(chmod(file, 0600), 0);
	{
		const char *why;
		int fd = cp_tpath_open(getpid(), file, CP_TPATH_OWNED, &other,
				       NULL, &why);

		ck_assert_int_ge(fd, 0);
		close(fd);
		ck_assert_int_eq(cp_tpath_open(getpid(), file,
					       CP_TPATH_READABLE, &other, NULL,
					       &why), -CP_E_PERM);
	}
	ck_assert_int_eq(chown(file, 1234, 1234), 0);
	ck_assert_int_eq(chmod(file, 0644), 0);
	{
		const char *why;

		ck_assert_int_eq(cp_tpath_open(getpid(), file, CP_TPATH_OWNED,
					       &other, NULL, &why), -CP_E_PERM);
		ck_assert_ptr_nonnull(strstr(why, "another user"));
		/* Readable: fine when ownership does not matter.  */
		int fd = cp_tpath_open(getpid(), file, CP_TPATH_READABLE,
				       &other, NULL, &why);
		ck_assert_int_ge(fd, 0);
		close(fd);
		/* No credentials: only root's files pass OWNED.  */
		ck_assert_int_eq(cp_tpath_open(getpid(), file, CP_TPATH_OWNED,
					       NULL, NULL, &why), -CP_E_PERM);
	}
}
END_TEST

/* Inside the target's root: "/" and ".." stop at it, and no magic link
 * of /proc leads out.  (Our own root is "/", so the results are the
 * host's files; what is checked is how the path is walked.)  */
START_TEST(test_open_in_root)
{
	char dotdot[PATH_MAX * 2];
	int fd;

	snprintf(dotdot, sizeof(dotdot), "/../../..%s", file);
	fd = cp_tpath_open(getpid(), dotdot, CP_TPATH_IN_ROOT |
			   CP_TPATH_NOFOLLOW, &me, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* /proc/self/root/... is a magic link: refused.  */
	snprintf(dotdot, sizeof(dotdot), "/proc/self/root%s", file);
	ck_assert_int_lt(cp_tpath_open(getpid(), dotdot, CP_TPATH_IN_ROOT,
				       &me, NULL, NULL), 0);
	/* A symlink on the way is followed, inside the root.  */
	ck_assert_int_eq(symlink(dir, link_path), 0);
	snprintf(dotdot, sizeof(dotdot), "%s/file", link_path);
	fd = cp_tpath_open(getpid(), dotdot, CP_TPATH_IN_ROOT |
			   CP_TPATH_NOFOLLOW, &me, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	close(fd);
}
END_TEST

/* /proc/PID/map_files: the file mapped, even once its name is a FIFO.  */
START_TEST(test_open_mapped)
{
	int fd = open(file, O_RDONLY);
	struct stat st, mapped;
	void *p;
	int got;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(fd);
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(mkfifo(file, 0644), 0);
	got = cp_tpath_open_mapped(getpid(), (uint64_t)(uintptr_t)p,
				   (uint64_t)(uintptr_t)p + 4096, &mapped,
				   NULL);
	if (got == -CP_E_SYS && errno == EPERM) {
		/* Without CAP_SYS_ADMIN: the caller falls back.  */
		munmap(p, 4096);
		return;
	}
	ck_assert_int_ge(got, 0);
	ck_assert_uint_eq(mapped.st_ino, st.st_ino);
	ck_assert(S_ISREG(mapped.st_mode));
	close(got);
	munmap(p, 4096);
	/* Nothing mapped there any more.  */
	ck_assert_int_eq(cp_tpath_open_mapped(getpid(),
					      (uint64_t)(uintptr_t)p,
					      (uint64_t)(uintptr_t)p + 4096,
					      NULL, NULL), -CP_E_SYS);
}
END_TEST

static Suite *tpath_suite(void)
{
	Suite *suite = suite_create("tpath");
	TCase *tcase = tcase_create("credentials");

	tcase_add_test(tcase, test_creds_parse);
	tcase_add_test(tcase, test_creds_read);
	tcase_add_test(tcase, test_can_read);
	tcase_add_test(tcase, test_debuglink_names);
	suite_add_tcase(suite, tcase);

	tcase = tcase_create("open");
	tcase_add_checked_fixture(tcase, open_setup, open_teardown);
	tcase_add_test(tcase, test_open_kinds);
	tcase_add_test(tcase, test_open_owner_rules);
	tcase_add_test(tcase, test_open_in_root);
	tcase_add_test(tcase, test_open_mapped);
	suite_add_tcase(suite, tcase);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(tpath_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
