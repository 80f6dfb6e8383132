/* The symbolizer's memory: what it reads and when it lets go of it (issue
 * 15 goal 5, bench/rss_start.sh measures the figures).  Asserted by what
 * is loaded and read, not by sizes or times:
 * - no libdebuginfod (with libcurl, its TLS library and libcrypto: 7 MB)
 *   is loaded when DEBUGINFOD_URLS names no server, though a module has
 *   no debug information to be found;
 * - a symbolizer that reads debug files by compile unit (the resolver's)
 *   names libc's frames at the bottom of chain-O0's stack with one or two
 *   units of libc's debug file (libc6-dbg's: compressed), not the whole
 *   file, and gives the same answers, inlined frames and lines, as one
 *   that reads it whole; a search by name (lookup.c) reads it whole;
 * - cp_symbols_release lets go of the modules not looked up in since its
 *   last call and keeps the others; the answers given stay valid, and a
 *   new address in a module let go gets the answer a fresh symbolizer
 *   gives.
 * Each test starts its own fixture, waits for its "ready" line and kills
 * it in the teardown.  */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/profile.h"
#include "cprof/symbols.h"
#include "symbolize/lookup.h"
#include "symbolize/resolver.h"
#include "symbolize/symbols_int.h"
#include "testutil.h"

#define READY_TIMEOUT_MS 10000
#define LONG_RUN "60"

static struct tu_proc *ready(struct tu_proc *fixture)
{
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "fixture %d did not print \"ready\" (stdout so far: %s)",
		      (int)fixture->pid, fixture->output);
	return fixture;
}

static void teardown(void)
{
	tu_cleanup();
}

static bool debuginfod_loaded(void)
{
	void *handle = dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (handle)
		dlclose(handle);
	return handle != NULL;
}

/* The start of the first executable mapping of PID whose path ends in
 * SUFFIX, or 0.  */
static uint64_t executable_text(pid_t pid, const char *suffix)
{
	char path[64], line[4096];
	uint64_t start = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *maps = fopen(path, "r");
	if (!maps)
		return 0;
	while (start == 0 && fgets(line, sizeof(line), maps)) {
		unsigned long long lo, hi;
		char perms[8];
		int name = 0;
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms,
			   &name) < 3 || name == 0 || perms[2] != 'x')
			continue;
		size_t len = strlen(line + name), n = strlen(suffix);
		if (len >= n && strcmp(line + name + len - n, suffix) == 0)
			start = lo;
	}
	fclose(maps);
	return start;
}

/* chain-stripped has a build-id and no debug file anywhere: the search
 * for one goes as far as debuginfod, which has no server to ask.  */
START_TEST(test_no_debuginfod_without_urls)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-stripped", LONG_RUN, NULL));
	struct cp_symbols *symbols = NULL;

	unsetenv("DEBUGINFOD_URLS");
	ck_assert_msg(!debuginfod_loaded(),
		      "libdebuginfod loaded before the test");
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &symbols), 0);
	uint64_t text = executable_text(fixture->pid, "/chain-stripped");
	ck_assert_msg(text != 0, "no executable mapping of chain-stripped");
	const struct cp_symbol *sym = cp_symbols_lookup(symbols, text + 16);
	ck_assert_str_eq(sym->module ? sym->module : "-", "chain-stripped");
	ck_assert_msg(!debuginfod_loaded(),
		      "libdebuginfod was loaded with DEBUGINFOD_URLS unset");
	cp_symbols_free(symbols);
}
END_TEST

static void expect_same(const struct cp_symbol *a, const struct cp_symbol *b)
{
	ck_assert_uint_eq(a->nframes, b->nframes);
	ck_assert_str_eq(a->module ? a->module : "-",
			 b->module ? b->module : "-");
	for (size_t i = 0; i < a->nframes; i++) {
		ck_assert_str_eq(a->frames[i].function, b->frames[i].function);
		ck_assert_str_eq(a->frames[i].file ? a->frames[i].file : "-",
				 b->frames[i].file ? b->frames[i].file : "-");
		ck_assert_int_eq(a->frames[i].line, b->frames[i].line);
		ck_assert_int_eq(a->frames[i].inlined, b->frames[i].inlined);
	}
}

START_TEST(test_release)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	struct cp_symbols *symbols = NULL, *fresh = NULL;
	struct cp_place gamma, libc;
	size_t read;
	uint64_t released;

	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &symbols), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &fresh), 0);
	ck_assert_int_eq(cp_symbols_locate(fresh, "chain_gamma",
					   CP_LOCATE_ENTRY, &gamma), 0);
	ck_assert_int_eq(cp_symbols_locate(fresh, "clock_gettime",
					   CP_LOCATE_ENTRY, &libc), 0);
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 0);

	const struct cp_symbol *g = cp_symbols_lookup(symbols, gamma.addr + 1);
	const struct cp_symbol *c = cp_symbols_lookup(symbols, libc.addr + 1);
	ck_assert_str_eq(g->frames[0].function, "chain_gamma");
	ck_assert_str_eq(c->frames[0].function, "clock_gettime");
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 2);
	/* Both looked up in since the start: kept.  */
	ck_assert_uint_eq(cp_symbols_release(symbols), 0);
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 2);
	/* The executable looked up in again (a new address), libc not.  */
	cp_symbols_lookup(symbols, gamma.addr + 2);
	ck_assert_uint_eq(cp_symbols_release(symbols), 1);
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 1);
	ck_assert_uint_eq(released, 1);
	ck_assert_uint_eq(cp_symbols_release(symbols), 1);
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 0);
	ck_assert_uint_eq(released, 2);

	/* The answers given stay, their strings too (ASan would see them
	 * freed), and asking again reads nothing.  */
	ck_assert_ptr_eq(cp_symbols_lookup(symbols, gamma.addr + 1), g);
	ck_assert_ptr_eq(cp_symbols_lookup(symbols, libc.addr + 1), c);
	ck_assert_str_eq(g->frames[0].function, "chain_gamma");
	ck_assert_str_eq(c->frames[0].function, "clock_gettime");
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 0);

	/* New addresses in both: read again, the same answers as a
	 * symbolizer that never let go.  */
	for (uint64_t off = 3; off < 40; off += 4) {
		expect_same(cp_symbols_lookup(symbols, gamma.addr + off),
			    cp_symbols_lookup(fresh, gamma.addr + off));
		expect_same(cp_symbols_lookup(symbols, libc.addr + off),
			    cp_symbols_lookup(fresh, libc.addr + off));
	}
	cp_symbols_read_stats(symbols, &read, &released);
	ck_assert_uint_eq(read, 2);
	cp_symbols_free(fresh);
	cp_symbols_free(symbols);
}
END_TEST

/* Does libc's debug file named in PID's symbolizer have compressed
 * sections, as libc6-dbg's do?  Looked at through the answer for a libc
 * address: a file name means libc has DWARF.  */
static bool libc_has_dwarf(const struct cp_symbol *sym)
{
	return sym->frames[sym->nframes - 1].file != NULL;
}

/* Does this process map a file whose name has NEEDLE?  */
static bool self_maps(const char *needle)
{
	char line[4096];
	bool found = false;
	FILE *maps = fopen("/proc/self/maps", "r");
	while (maps && !found && fgets(line, sizeof(line), maps))
		found = strstr(line, needle) != NULL;
	if (maps)
		fclose(maps);
	return found;
}

START_TEST(test_lazy_units)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	struct cp_symbols *lazy = NULL, *whole = NULL, *search = NULL;
	struct cp_place start_main, gettime, gamma;
	uint64_t units, images;
	size_t nwhole;

	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &lazy), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &whole), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &search), 0);
	cp_symbols_set_lazy(lazy, true);
	/* The frames of chain-O0's stacks: main's caller in libc, the clock
	 * it reads, its own functions.  */
	ck_assert_int_eq(cp_symbols_locate(search, "__libc_start_main",
					   CP_LOCATE_ENTRY, &start_main), 0);
	ck_assert_int_eq(cp_symbols_locate(search, "clock_gettime",
					   CP_LOCATE_ENTRY, &gettime), 0);
	ck_assert_int_eq(cp_symbols_locate(search, "chain_gamma",
					   CP_LOCATE_ENTRY, &gamma), 0);
	const struct cp_symbol *probe =
		cp_symbols_lookup(whole, start_main.addr + 0x10);
	if (!libc_has_dwarf(probe)) {
		fprintf(stderr, "test_lazy_units: libc has no debug information "
				"here (libc6-dbg not installed?): skipped\n");
		goto out;
	}
	for (uint64_t off = 1; off < 0x100; off += 5) {
		expect_same(cp_symbols_lookup(lazy, start_main.addr + off),
			    cp_symbols_lookup(whole, start_main.addr + off));
		expect_same(cp_symbols_lookup(lazy, gettime.addr + off),
			    cp_symbols_lookup(whole, gettime.addr + off));
		expect_same(cp_symbols_lookup(lazy, gamma.addr + off),
			    cp_symbols_lookup(whole, gamma.addr + off));
	}
	cp_symbols_lazy_stats(lazy, &units, &images, &nwhole);
	/* libc's units for these functions, one or two; each new one an
	 * image; no debug file read whole.  */
	ck_assert_msg(units >= 1 && units <= 4,
		      "%llu compile units of libc read", (unsigned long long)units);
	ck_assert_uint_ge(images, units);
	ck_assert_uint_eq(nwhole, 0);
	/* libdw reads the image (mapped by libelf), not the debug file
	 * (which the whole symbolizer maps).  */
	ck_assert(self_maps("/memfd:cprof-debuginfo"));
	cp_symbols_free(whole);
	cp_symbols_free(search);
	whole = search = NULL;
	ck_assert_msg(!self_maps("/usr/lib/debug/"),
		      "a debug file under /usr/lib/debug is mapped: read whole");
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &whole), 0);
	/* After a release the units stay in the image (no new one).  */
	ck_assert_uint_eq(cp_symbols_release(lazy), 0);
	ck_assert_uint_ge(cp_symbols_release(lazy), 1);
	expect_same(cp_symbols_lookup(lazy, start_main.addr + 0x103),
		    cp_symbols_lookup(whole, start_main.addr + 0x103));
	uint64_t units2, images2;
	cp_symbols_lazy_stats(lazy, &units2, &images2, &nwhole);
	ck_assert_uint_eq(units2, units);
	ck_assert_uint_eq(images2, images + 1);
	/* A search by name walks every unit: the file read whole.  */
	struct cp_place place;
	ck_assert_int_eq(cp_symbols_locate(lazy, "chain_beta", 0, &place), 0);
	cp_symbols_lazy_stats(lazy, &units2, &images2, &nwhole);
	ck_assert_uint_ge(nwhole, 1);
	expect_same(cp_symbols_lookup(lazy, gettime.addr + 0x102),
		    cp_symbols_lookup(whole, gettime.addr + 0x102));
out:
	cp_symbols_free(search);
	cp_symbols_free(whole);
	cp_symbols_free(lazy);
}
END_TEST

/* A batch of addresses in several units of libc handed over first
 * (cp_symbols_prefetch, as the resolver does with each batch): one
 * image holds them all, and the answers are unchanged.  */
START_TEST(test_lazy_prefetch)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	struct cp_symbols *lazy = NULL, *whole = NULL;
	static const char *const functions[] = {
		"__libc_start_main", "clock_gettime", "malloc", "printf",
		"qsort", "chain_gamma",
	};
	enum { N = sizeof(functions) / sizeof(functions[0]) };
	uint64_t addresses[N];
	uint64_t units, images;
	size_t nwhole;

	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &lazy), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &whole), 0);
	for (size_t i = 0; i < N; i++) {
		struct cp_place place;
		ck_assert_int_eq(cp_symbols_locate(whole, functions[i],
						   CP_LOCATE_ENTRY, &place), 0);
		addresses[i] = place.addr + 0x10;
	}
	if (!libc_has_dwarf(cp_symbols_lookup(whole, addresses[0]))) {
		fprintf(stderr, "test_lazy_prefetch: libc has no debug "
				"information here: skipped\n");
		goto out;
	}
	cp_symbols_set_lazy(lazy, true);
	cp_symbols_prefetch(lazy, addresses, N);
	for (size_t i = 0; i < N; i++)
		expect_same(cp_symbols_lookup(lazy, addresses[i]),
			    cp_symbols_lookup(whole, addresses[i]));
	cp_symbols_lazy_stats(lazy, &units, &images, &nwhole);
	ck_assert_msg(units >= 3, "%llu units", (unsigned long long)units);
	ck_assert_msg(images == 1, "%llu images for one batch",
		      (unsigned long long)images);
	ck_assert_uint_eq(nwhole, 0);
out:
	cp_symbols_free(whole);
	cp_symbols_free(lazy);
}
END_TEST

/* The resolver (its own thread, a symbolizer reading by unit, batches
 * handed over first): the profile's locations carry the frames a
 * symbolizer reading whole gives.  */
START_TEST(test_resolver_names)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	struct cp_symbols *symbols = NULL, *whole = NULL;
	struct cp_profile *profile = cp_profile_new();
	struct cp_resolver *resolver = NULL;
	static const char *const functions[] = {
		"__libc_start_main", "clock_gettime", "malloc", "chain_gamma",
		"chain_beta",
	};
	enum { N = sizeof(functions) / sizeof(functions[0]), PER = 8 };
	uint64_t addresses[N * PER];
	uint32_t locations[N * PER];

	ck_assert_ptr_nonnull(profile);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &symbols), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &whole), 0);
	for (size_t i = 0; i < N; i++) {
		struct cp_place place;
		ck_assert_int_eq(cp_symbols_locate(whole, functions[i],
						   CP_LOCATE_ENTRY, &place), 0);
		for (size_t j = 0; j < PER; j++)
			addresses[i * PER + j] = place.addr + 1 + 3 * j;
	}
	ck_assert_int_eq(cp_resolver_start(symbols, profile, &resolver), 0);
	/* Two batches, as two ticks would hand them over.  */
	for (size_t i = 0; i < N * PER; i++) {
		locations[i] = cp_resolver_location(resolver, addresses[i]);
		ck_assert_uint_ne(locations[i], UINT32_MAX);
		if (i == N * PER / 2)
			cp_resolver_collect(resolver);
	}
	cp_resolver_finish(resolver);
	for (size_t i = 0; i < N * PER; i++) {
		const struct cp_location *loc =
			cp_profile_location(profile, locations[i]);
		const struct cp_symbol *sym =
			cp_symbols_lookup(whole, addresses[i]);
		ck_assert_uint_eq(loc->nlines, sym->nframes);
		for (size_t k = 0; k < sym->nframes; k++) {
			ck_assert_str_eq(cp_profile_string(profile,
							   loc->lines[k].function),
					 sym->frames[k].function);
			ck_assert_int_eq(loc->lines[k].line, sym->frames[k].line);
			ck_assert_int_eq(loc->lines[k].inlined,
					 sym->frames[k].inlined);
		}
	}
	cp_symbols_free(whole);
	cp_symbols_free(symbols);
	cp_profile_free(profile);
}
END_TEST

static Suite *symrss_suite(void)
{
	Suite *suite = suite_create("symrss");
	TCase *tcase = tcase_create("symrss");
	tcase_add_checked_fixture(tcase, NULL, teardown);
	tcase_set_timeout(tcase, 60);
	tcase_add_test(tcase, test_no_debuginfod_without_urls);
	tcase_add_test(tcase, test_release);
	tcase_add_test(tcase, test_lazy_units);
	tcase_add_test(tcase, test_lazy_prefetch);
	tcase_add_test(tcase, test_resolver_names);
	suite_add_tcase(suite, tcase);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(symrss_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
