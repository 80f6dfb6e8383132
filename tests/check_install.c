/* The installed library as an embedding program sees it: `make install`
 * into a temporary DESTDIR with PREFIX=/usr/local puts exactly the files
 * it should there (programs, man pages, libcprof.a, libcprof.so with its
 * soname links, the headers, each of which compiles on its own, cprof.pc
 * naming /usr/local, not DESTDIR) and
 * `make uninstall` takes every one of them away again; libcprof.so
 * exports the cp_ API and nothing else; and docs/examples/sample-folded.c,
 * built as its comment says with pkg-config (PKG_CONFIG_PATH and
 * PKG_CONFIG_SYSROOT_DIR pointing into DESTDIR) against libcprof.so and
 * statically against libcprof.a, samples a running fixture for a second:
 * its folded output names the fixture's functions, and the fixture runs
 * on untraced.
 *
 * make runs in the source directory with this build directory (and the
 * SANITIZE of this build, so nothing is rebuilt with other flags); the
 * example is compiled with this build's sanitizer flags, as a program
 * linking a sanitized libcprof must be.  */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#ifndef CP_SANITIZE
#define CP_SANITIZE ""
#endif
#ifndef CP_SANFLAGS
#define CP_SANFLAGS ""
#endif

#define READY_TIMEOUT_MS 15000
#define EXAMPLE CP_SOURCE_DIR "/docs/examples/sample-folded.c"
/* Where `make install` puts things under DESTDIR.  */
#define PREFIX "/usr/local"
/* The environment of every command: make must not take this test's
 * make (its jobserver, its command line) for its parent.  */
#define CLEAN_ENV "unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES; "

static void teardown(void)
{
	tu_cleanup();
}

/* Run the shell command made from FMT with bash, its standard error with
 * its standard output into *OUTPUT (the caller frees it; OUTPUT may be
 * NULL).  Returns its exit status, -1 when it did not exit.  */
static int shell(char **output, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int shell(char **output, const char *fmt, ...)
{
	char *cmd = NULL, *quoted = NULL;
	va_list ap;
	va_start(ap, fmt);
	ck_assert_int_ge(vasprintf(&cmd, fmt, ap), 0);
	va_end(ap);
	/* bash -c '...', the command's own quotes escaped.  */
	size_t len = strlen(cmd);
	quoted = malloc(len * 4 + 64);
	ck_assert_ptr_nonnull(quoted);
	char *q = stpcpy(quoted, "bash -c '");
	for (const char *c = cmd; *c; c++)
		q = *c == '\'' ? stpcpy(q, "'\\''") : (*q = *c, q + 1);
	strcpy(q, "' 2>&1");
	FILE *p = popen(quoted, "r");
	ck_assert_msg(p != NULL, "popen: %s", strerror(errno));
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), p)) > 0)
		fwrite(buf, 1, got, mem);
	fclose(mem);
	int status = pclose(p);
	free(cmd);
	free(quoted);
	if (output)
		*output = text;
	else
		free(text);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The build directory as make was given it: relative to the source
 * directory when it is inside it, so make's dependency files (which name
 * it so) apply.  */
static const char *build_arg(void)
{
	size_t n = strlen(CP_SOURCE_DIR);
	if (strncmp(CP_BUILD_DIR, CP_SOURCE_DIR, n) == 0 &&
	    CP_BUILD_DIR[n] == '/')
		return CP_BUILD_DIR + n + 1;
	return CP_BUILD_DIR;
}

/* make TARGET DESTDIR=DESTDIR PREFIX=/usr/local in the source directory,
 * asserting it succeeds.  */
static void make_target(const char *target, const char *destdir)
{
	char *out;
	int rc = shell(&out,
		       CLEAN_ENV "make -s -C '%s' BUILD='%s' SANITIZE='%s' %s "
				 "DESTDIR='%s' PREFIX=" PREFIX,
		       CP_SOURCE_DIR, build_arg(), CP_SANITIZE, target,
		       destdir);
	ck_assert_msg(rc == 0, "make %s failed (%d):\n%.1500s", target, rc, out);
	free(out);
}

/* A new DESTDIR with libcprof installed in it.  */
static const char *install_into_temp(void)
{
	const char *destdir = tu_temp_dir();
	ck_assert_ptr_nonnull(destdir);
	make_target("install", destdir);
	return destdir;
}

/* The soname: libcprof.so.MAJOR, MAJOR the first number of VERSION.  */
static void soname(char *buf, size_t size)
{
	snprintf(buf, size, "libcprof.so.%.*s", (int)strcspn(CP_VERSION, "."),
		 CP_VERSION);
}

/* Every file and symbolic link under DIR, as paths relative to it,
 * sorted, one a line ("" when there is none).  */
static char *files_under(const char *dir)
{
	char *out;
	int rc = shell(&out,
		       "cd '%s' && find . \\( -type f -o -type l \\) -printf '%%P\\n' "
		       "| LC_ALL=C sort",
		       dir);
	ck_assert_msg(rc == 0, "find in %s failed: %.1500s", dir, out);
	return out;
}

/* What make install should put under DESTDIR, sorted as files_under
 * sorts (LC_ALL=C).  */
static char *expected_files(void)
{
	char so[64], *out;
	soname(so, sizeof(so));
	int rc = shell(&out,
		       "{ echo " PREFIX "/bin/cprof-attach; "
		       "  [ -e '%s/src/cli/cprof.c' ] && echo " PREFIX "/bin/cprof; "
		       "  for h in '%s'/include/cprof/*.h; do "
		       "    echo " PREFIX "/include/cprof/${h##*/}; done; "
		       "  echo " PREFIX "/lib/libcprof.a; "
		       "  echo " PREFIX "/lib/libcprof.so; "
		       "  echo " PREFIX "/lib/%s; "
		       "  echo " PREFIX "/lib/libcprof.so.%s; "
		       "  echo " PREFIX "/lib/pkgconfig/cprof.pc; "
		       "  echo " PREFIX "/share/man/man1/cprof-attach.1; "
		       "  [ -e '%s/docs/cprof.1' ] && echo " PREFIX "/share/man/man1/cprof.1; "
		       "} | sed s,^/,, | LC_ALL=C sort",
		       CP_SOURCE_DIR, CP_SOURCE_DIR, so, CP_VERSION,
		       CP_SOURCE_DIR);
	ck_assert_int_eq(rc, 0);
	return out;
}

/* The target of symbolic link PATH.  */
static void assert_link(const char *path, const char *target)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);
	ck_assert_msg(n > 0, "%s is not a symbolic link", path);
	buf[n] = '\0';
	ck_assert_str_eq(buf, target);
}

START_TEST(shared_library_exports_only_cp)
{
	const char *destdir = install_into_temp();
	char path[PATH_MAX], *out;
	snprintf(path, sizeof(path), "%s" PREFIX "/lib/libcprof.so", destdir);
	int rc = shell(&out, "nm -D --defined-only '%s' | awk '{ print $NF }'",
		       path);
	ck_assert_msg(rc == 0, "nm -D %s: %.1500s", path, out);
	size_t symbols = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		ck_assert_msg(strncmp(line, "cp_", 3) == 0,
			      "libcprof.so exports %s, which is not cp_", line);
		symbols++;
	}
	free(out);
	/* The API is there: the session, a writer, the profile.  */
	rc = shell(&out, "nm -D --defined-only '%s'", path);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(out, " T cp_session_new\n"));
	ck_assert_ptr_nonnull(strstr(out, " T cp_write_folded\n"));
	ck_assert_ptr_nonnull(strstr(out, " T cp_profile_total\n"));
	free(out);
	ck_assert_uint_gt(symbols, 100);

	/* Every one is named in a public header; none of the cp_ helpers
	 * the private headers in src/ declare is (and libcprof.a has such
	 * helpers, so this checks something).  The one line printed is the
	 * number of those; any other names what should not be exported.  */
	const char *w = tu_temp_dir();
	ck_assert_ptr_nonnull(w);
	rc = shell(&out,
		   "cd '%s' && W='%s' && "
		   "grep -oh '\\bcp_[A-Za-z0-9_]*' include/cprof/*.h "
		   "| LC_ALL=C sort -u > $W/public && "
		   "grep -roh --include='*.h' '\\bcp_[A-Za-z0-9_]*' src "
		   "| LC_ALL=C sort -u | LC_ALL=C comm -23 - $W/public > $W/private && "
		   "nm -D --defined-only '%s' | awk '{ print $NF }' "
		   "| LC_ALL=C sort > $W/exported && "
		   "nm -g --defined-only '%s/libcprof.a' | awk 'NF == 3 { print $3 }' "
		   "| LC_ALL=C sort -u > $W/archive && "
		   "LC_ALL=C comm -12 $W/private $W/archive | wc -l && "
		   "LC_ALL=C comm -23 $W/exported $W/public | sed 's/^/not public: /' && "
		   "LC_ALL=C comm -12 $W/exported $W/private | sed 's/^/private: /'",
		   CP_SOURCE_DIR, w, path, CP_BUILD_DIR);
	ck_assert_msg(rc == 0, "%.1500s", out);
	ck_assert_msg(tu_count_lines(out) == 1,
		      "exported, and should not be:\n%.1500s", out);
	ck_assert_msg(atoi(out) > 0, "no private cp_ helper in libcprof.a: %s",
		      out);
	free(out);

	/* The soname is libcprof.so.MAJOR.  */
	char so[64], want[128];
	soname(so, sizeof(so));
	snprintf(want, sizeof(want), "Library soname: [%s]", so);
	rc = shell(&out, "readelf -d '%s'", path);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(strstr(out, want), "no '%s' in readelf -d:\n%.1500s", want,
		      out);
	free(out);
}
END_TEST

START_TEST(install_then_uninstall)
{
	const char *destdir = install_into_temp();
	char *have = files_under(destdir), *want = expected_files();
	ck_assert_msg(strcmp(have, want) == 0,
		      "installed:\n%.1500s\nexpected:\n%.1500s", have, want);
	free(have);
	free(want);

	/* The library under its full version; the soname and the
	 * development name are links to it.  */
	char path[PATH_MAX], so[64], full[64];
	struct stat st;
	soname(so, sizeof(so));
	snprintf(full, sizeof(full), "libcprof.so.%s", CP_VERSION);
	snprintf(path, sizeof(path), "%s" PREFIX "/lib/%s", destdir, full);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	snprintf(path, sizeof(path), "%s" PREFIX "/lib/%s", destdir, so);
	assert_link(path, full);
	snprintf(path, sizeof(path), "%s" PREFIX "/lib/libcprof.so", destdir);
	assert_link(path, so);

	/* cprof.pc names the installed directories, not DESTDIR.  */
	snprintf(path, sizeof(path), "%s" PREFIX "/lib/pkgconfig/cprof.pc",
		 destdir);
	char *pc = tu_read_file(path);
	ck_assert_ptr_nonnull(pc);
	ck_assert_msg(strstr(pc, "\nlibdir=" PREFIX "/lib\n"), "%s", pc);
	ck_assert_msg(strstr(pc, "\nincludedir=" PREFIX "/include\n"), "%s",
		      pc);
	ck_assert_msg(!strstr(pc, destdir), "cprof.pc names DESTDIR:\n%s", pc);
	free(pc);
	char *out;
	int rc = shell(&out,
		       "PKG_CONFIG_PATH='%s" PREFIX "/lib/pkgconfig' "
		       "pkg-config --modversion cprof",
		       destdir);
	ck_assert_msg(rc == 0, "pkg-config: %s", out);
	ck_assert_str_eq(out, CP_VERSION "\n");
	free(out);

	/* Each installed header compiles on its own, with what pkg-config
	 * gives: an embedding program includes only what it uses.  */
	rc = shell(&out,
		   "export PKG_CONFIG_PATH='%s" PREFIX "/lib/pkgconfig' "
		   "PKG_CONFIG_SYSROOT_DIR='%s'; cd '%s" PREFIX "/include' && "
		   "for h in cprof/*.h; do echo \"#include <$h>\" "
		   "| cc -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags cprof) "
		   "-x c - || echo \"$h does not compile alone\"; done",
		   destdir, destdir, destdir);
	ck_assert_msg(rc == 0 && out[0] == '\0', "%.1500s", out);
	free(out);

	make_target("uninstall", destdir);
	have = files_under(destdir);
	ck_assert_msg(have[0] == '\0', "left after make uninstall:\n%.1500s", have);
	free(have);
	snprintf(path, sizeof(path), "%s" PREFIX "/include/cprof", destdir);
	ck_assert_msg(access(path, F_OK) != 0, "%s is still there", path);
}
END_TEST

/* Build the example against DESTDIR's libcprof with pkg-config (STATIC:
 * libcprof.a and, as far as there are static archives, its dependencies:
 * pkg-config --static), run it on a chain-O0 fixture, and check what it
 * wrote and that the fixture runs on, untraced.  */
static void check_example(bool statically)
{
	const char *destdir = install_into_temp();
	char exe[PATH_MAX], *out;
	snprintf(exe, sizeof(exe), "%s/sample-folded", tu_temp_dir());
	const char *pc_env = "PKG_CONFIG_PATH='%s" PREFIX "/lib/pkgconfig' "
			     "PKG_CONFIG_SYSROOT_DIR='%s'; export PKG_CONFIG_PATH "
			     "PKG_CONFIG_SYSROOT_DIR; ";
	char env[2 * PATH_MAX + 256];
	snprintf(env, sizeof(env), pc_env, destdir, destdir);
	int rc;
	/* -no-pie for the static link: Debian's libunwind-ptrace.a is not
	 * position-independent.  */
	if (statically)
		rc = shell(&out,
			   "%s cc -Wall -Wextra -Werror -g -no-pie %s -o '%s' '%s' "
			   "$(pkg-config --cflags cprof) -Wl,-Bstatic "
			   "$(pkg-config --static --libs cprof) -Wl,-Bdynamic",
			   env, CP_SANFLAGS, exe, EXAMPLE);
	else
		rc = shell(&out,
			   "%s cc -Wall -Wextra -Werror -g %s -o '%s' '%s' "
			   "$(pkg-config --cflags --libs cprof)",
			   env, CP_SANFLAGS, exe, EXAMPLE);
	ck_assert_msg(rc == 0, "cannot build the example:\n%.1500s", out);
	free(out);

	/* Linked as asked: libcprof.so.MAJOR needed, or no libcprof.  */
	char so[64];
	soname(so, sizeof(so));
	rc = shell(&out, "readelf -d '%s' | grep NEEDED", exe);
	ck_assert_int_eq(rc, 0);
	if (statically)
		ck_assert_msg(!strstr(out, "libcprof"), "%.1500s", out);
	else
		ck_assert_msg(strstr(out, so), "%s not needed:\n%.1500s", so, out);
	free(out);

	struct tu_proc *fx = tu_fixture_start("chain-O0", "120", NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert_msg(tu_proc_wait_line(fx, "ready", READY_TIMEOUT_MS),
		      "chain-O0 did not print ready: %s", fx->output);

	/* Its standard output only (the example's warnings go to the test
	 * log).  The timeout bounds a hang, it measures nothing.  */
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd),
		 "LD_LIBRARY_PATH='%s" PREFIX "/lib' timeout -s KILL 120 '%s' %d",
		 destdir, exe, (int)fx->pid);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), p)) > 0)
		fwrite(buf, 1, got, mem);
	fclose(mem);
	int status = pclose(p);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "sample-folded: status %#x, output:\n%s", status, text);

	char error[256];
	struct tu_profile *profile = tu_profile_parse(text, error,
						      sizeof(error));
	ck_assert_msg(profile, "not folded stacks (%s):\n%.1500s", error, text);
	uint64_t total = tu_profile_total(profile);
	uint64_t chain = tu_profile_count_subsequence(
		profile,
		TU_FRAMES("main", "chain_alpha", "chain_beta", "chain_gamma"));
	if (total == 0 || chain * 10 < total * 9)
		tu_profile_dump(profile, 20);
	ck_assert_uint_gt(total, 0);
	/* Nearly all the fixture's time is in the chain (chain.c).  */
	ck_assert_uint_ge(chain * 10, total * 9);
	tu_profile_free(profile);
	free(text);

	/* Let go: running, untraced.  */
	ck_assert_int_eq(tu_task_tracer(fx->pid, 0), 0);
	ck_assert(tu_wait_cpu_ticks(fx->pid, 2, READY_TIMEOUT_MS));
	ck_assert_int_eq(tu_task_tracer(fx->pid, 0), 0);
	make_target("uninstall", destdir);
}

START_TEST(example_against_shared_library)
{
	check_example(false);
}
END_TEST

START_TEST(example_against_static_library)
{
	check_example(true);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("install");
	TCase *tc = tcase_create("install");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, shared_library_exports_only_cp);
	tcase_add_test(tc, install_then_uninstall);
	tcase_add_test(tc, example_against_shared_library);
	tcase_add_test(tc, example_against_static_library);
	suite_add_tcase(suite, tc);
	SRunner *runner = srunner_create(suite);
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
