/* The target's address space (cprof/addrspace.h): modules derived from
 * recorded mappings and from running fixtures, a dlopen and a dlclose
 * seen by a refresh (the module gone, its file still open, a view taken
 * before unchanged), an exec that starts a new epoch, the by-name lookup
 * in link-map order that heap mode's allocator search uses (jemalloc
 * linked ahead of libc), and refreshes on one thread while another reads.
 *
 * Fixtures report "ready" on a pipe; everything started is killed and
 * reaped in the teardown (tu_cleanup).  */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture/blocked.h"
#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "cprof/symbols.h"
#include "cprof/unwinder.h"
#include "symbolize/resolver.h"
#include "testutil.h"

#define READY_TIMEOUT_MS 10000
#define PLUGIN_TIMEOUT_MS 15000
#define LONG_RUN "60"

static void teardown(void)
{
	tu_cleanup();
}

static struct tu_proc *ready(struct tu_proc *fixture)
{
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "fixture %d did not print \"ready\" (stdout so far: %s)",
		      (int)fixture->pid, fixture->output);
	return fixture;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The module of VIEW whose path ends with SUFFIX, or NULL.  */
static const struct cp_addrspace_module *
module_named(const struct cp_addrspace_module *const *mods, size_t n,
	     const char *suffix)
{
	for (size_t i = 0; i < n; i++)
		if (ends_with(mods[i]->path, suffix))
			return mods[i];
	return NULL;
}

static char *slurp_fixture_data(const char *name, size_t *len)
{
	char path[512];
	char *text;
	snprintf(path, sizeof(path), "%s/fixtures/data/%s", CP_SOURCE_DIR,
		 name);
	ck_assert_int_eq(cp_procfs_slurp(path, &text, len), 0);
	return text;
}

/* Recorded mappings (a PIE cat): one module per file, its range over all
 * the file's mappings, base at file offset 0; anonymous mappings and the
 * heap are no module.  A read that did not settle keeps a module it no
 * longer shows unless another lies in its place; one that settled drops
 * it, and the generation moves on only when the modules changed.  */
START_TEST(test_recorded_maps)
{
	struct cp_addrspace *as = NULL;
	size_t len;
	char *text = slurp_fixture_data("maps-pie.txt", &len);

	/* Any live process will do: the mappings are the recorded ones.  */
	ck_assert_int_eq(cp_addrspace_new(getpid(), &as), 0);
	uint64_t gen0 = cp_addrspace_generation(as);
	ck_assert_int_eq(cp_addrspace_apply_maps(as, text, len, true), 0);
	uint64_t gen1 = cp_addrspace_generation(as);
	ck_assert_uint_gt(gen1, gen0);

	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	const struct cp_addrspace_module *cat =
		cp_addrspace_view_module(v, 0x561ef5653100);
	ck_assert_ptr_nonnull(cat);
	ck_assert_str_eq(cat->path, "/usr/bin/cat");
	ck_assert_uint_eq(cat->start, 0x561ef5651000);
	ck_assert_uint_eq(cat->end, 0x561ef565d000);
	ck_assert_uint_eq(cat->base, 0x561ef5651000);
	ck_assert_uint_eq(cat->inode, 247134);
	ck_assert(cat->executable);
	const struct cp_addrspace_module *libc =
		cp_addrspace_view_module(v, 0x7f0688d50000);
	ck_assert_ptr_nonnull(libc);
	ck_assert_str_eq(libc->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	ck_assert_uint_eq(libc->start, 0x7f0688d29000);
	ck_assert_uint_eq(libc->end, 0x7f0688efe000);
	ck_assert_ptr_null(cp_addrspace_view_module(v, 0x561f1dd03100));
	ck_assert_ptr_null(cp_addrspace_view_module(v, 0x7f0688ca6100));
	cp_addrspace_view_release(v);

	/* The same text again: nothing changed.  */
	ck_assert_int_eq(cp_addrspace_apply_maps(as, text, len, false), 0);
	ck_assert_uint_eq(cp_addrspace_generation(as), gen1);

	/* Without libc's lines, torn: libc is kept.  */
	char *torn = malloc(len + 1);
	size_t tlen = 0;
	for (const char *line = text; line < text + len;) {
		const char *nl = memchr(line, '\n', (size_t)(text + len - line));
		size_t n = nl ? (size_t)(nl - line) + 1 : (size_t)(text + len - line);
		if (!memmem(line, n, "libc.so.6", 9)) {
			memcpy(torn + tlen, line, n);
			tlen += n;
		}
		line += n;
	}
	ck_assert_int_eq(cp_addrspace_apply_maps(as, torn, tlen, false), 0);
	v = cp_addrspace_view(as);
	ck_assert_ptr_nonnull(cp_addrspace_view_module(v, 0x7f0688d50000));
	cp_addrspace_view_release(v);

	/* Torn, and another module where libc was: libc goes.  */
	char *taken = malloc(tlen + 200);
	int n = snprintf(taken, 200,
			 "7f0688d40000-7f0688d60000 r-xp 00000000 fe:00 99 "
			 "/usr/lib/libother.so\n");
	memcpy(taken + n, torn, tlen);
	ck_assert_int_eq(cp_addrspace_apply_maps(as, taken, tlen + (size_t)n,
						 false), 0);
	v = cp_addrspace_view(as);
	const struct cp_addrspace_module *other =
		cp_addrspace_view_module(v, 0x7f0688d50000);
	ck_assert_ptr_nonnull(other);
	ck_assert_str_eq(other->path, "/usr/lib/libother.so");
	cp_addrspace_view_release(v);

	/* Settled, without libc: gone.  */
	ck_assert_int_eq(cp_addrspace_apply_maps(as, text, len, true), 0);
	ck_assert_int_eq(cp_addrspace_apply_maps(as, torn, tlen, true), 0);
	v = cp_addrspace_view(as);
	ck_assert_ptr_null(cp_addrspace_view_module(v, 0x7f0688d50000));
	ck_assert_uint_gt(v->generation, gen1);
	cp_addrspace_view_release(v);

	ck_assert_int_eq(cp_addrspace_apply_maps(as, "garbage\n", 8, true),
			 -CP_E_PARSE);
	free(taken);
	free(torn);
	free(text);
	cp_addrspace_free(as);
}
END_TEST

/* A running fixture: its executable is a module whose file is open (the
 * very file: same inode), its load bias that of a PIE (the base), its
 * build id the one the file carries.  */
START_TEST(test_live_modules)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_addrspace *as = NULL;
	ck_assert_int_eq(cp_addrspace_new(fixture->pid, &as), 0);
	ck_assert_int_eq(cp_addrspace_pid(as), fixture->pid);
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	const struct cp_addrspace_module *exe =
		module_named(v->modules, v->nmodules, "/plugin-host");
	ck_assert_ptr_nonnull(exe);
	ck_assert_int_ge(cp_addrspace_module_open(exe), 0);
	ck_assert_int_eq(cp_addrspace_module_open(exe), exe->fd);
	struct stat st;
	ck_assert_int_eq(fstat(exe->fd, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_ino, exe->inode);
	ck_assert(exe->elf);
	ck_assert_uint_eq(exe->bias, exe->base);
	ck_assert_ptr_nonnull(exe->build_id);
	ck_assert_uint_eq(strlen(exe->build_id), 40);
	/* The build id as readelf -n prints it.  */
	char cmd[600], out[128] = "";
	snprintf(cmd, sizeof(cmd),
		 "readelf -n '%s/fixtures/plugin-host' | awk '/Build ID/ {print $3}'",
		 CP_BUILD_DIR);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
	pclose(p);
	out[strcspn(out, "\n")] = '\0';
	ck_assert_str_eq(exe->build_id, out);
	const struct cp_addrspace_module *libc =
		module_named(v->modules, v->nmodules, "/libc.so.6");
	ck_assert_ptr_nonnull(libc);
	ck_assert_int_ge(cp_addrspace_module_open(libc), 0);
	ck_assert(libc->executable);
	/* The vDSO is a module without a file.  */
	bool vdso = false;
	for (size_t i = 0; i < v->nmodules; i++)
		if (v->modules[i]->vdso) {
			vdso = true;
			ck_assert_int_eq(cp_addrspace_module_open(v->modules[i]),
					 -1);
		}
	ck_assert(vdso);
	/* Modules are sorted and do not overlap.  */
	for (size_t i = 1; i < v->nmodules; i++)
		ck_assert_uint_le(v->modules[i - 1]->end, v->modules[i]->start);
	cp_addrspace_view_release(v);
	cp_addrspace_free(as);
}
END_TEST

/* plugin-host dlopen()s libplugin.so and dlclose()s it: a capture after
 * the one sees it come (a new generation, its file opened), a refresh
 * after the other sees it go (into the gone modules, its file still
 * open), and a view taken in between stays as it was.  */
START_TEST(test_dlopen_dlclose)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_addrspace *as = NULL;
	ck_assert_int_eq(cp_addrspace_new(fixture->pid, &as), 0);
	const struct cp_addrspace_view *before = cp_addrspace_view(as);
	ck_assert_ptr_null(module_named(before->modules, before->nmodules,
					"/libplugin.so"));
	uint64_t epoch = cp_addrspace_epoch(as);

	ck_assert_int_eq(kill(fixture->pid, SIGUSR1), 0);
	ck_assert_msg(tu_proc_wait_line(fixture, "loaded", PLUGIN_TIMEOUT_MS),
		      "plugin-host did not load the plugin (stdout: %s)",
		      fixture->output);
	/* A refresh (the unwinder's, for a pc it did not know) sees the
	 * plugin but opens nothing: a capture is still due for it.  */
	ck_assert_int_eq(cp_addrspace_refresh(as), 0);
	const struct cp_addrspace_view *seen = cp_addrspace_view(as);
	const struct cp_addrspace_module *unopened =
		module_named(seen->modules, seen->nmodules, "/libplugin.so");
	ck_assert_ptr_nonnull(unopened);
	ck_assert(!cp_addrspace_captured(as, unopened->start));
	cp_addrspace_view_release(seen);
	ck_assert_int_eq(cp_addrspace_capture(as), 0);
	const struct cp_addrspace_view *loaded = cp_addrspace_view(as);
	ck_assert_uint_gt(loaded->generation, before->generation);
	ck_assert_uint_eq(loaded->epoch, epoch);
	const struct cp_addrspace_module *plugin =
		module_named(loaded->modules, loaded->nmodules, "/libplugin.so");
	ck_assert_ptr_nonnull(plugin);
	/* Opened by the capture: a second open is the same descriptor.  */
	ck_assert_int_ge(plugin->fd, 0);
	ck_assert_int_eq(cp_addrspace_module_open(plugin), plugin->fd);
	ck_assert(plugin->executable);
	ck_assert_ptr_nonnull(plugin->build_id);
	ck_assert(cp_addrspace_has(as, plugin->start));
	ck_assert(cp_addrspace_captured(as, plugin->start));
	/* Memory no file backs needs no capture: the heap, say.  */
	for (size_t i = 0; i < loaded->maps->count; i++)
		if (strcmp(loaded->maps->maps[i].path, "[heap]") == 0)
			ck_assert(cp_addrspace_captured(
				as, loaded->maps->maps[i].start));
	/* Shared with the view before: the modules that did not change.  */
	const struct cp_addrspace_module *exe_before =
		module_named(before->modules, before->nmodules, "/plugin-host");
	ck_assert_ptr_eq(module_named(loaded->modules, loaded->nmodules,
				      "/plugin-host"),
			 exe_before);
	cp_addrspace_view_release(before);

	ck_assert_msg(tu_proc_wait_line(fixture, "unloaded",
					PLUGIN_TIMEOUT_MS),
		      "plugin-host did not unload the plugin (stdout: %s)",
		      fixture->output);
	ck_assert_int_eq(cp_addrspace_refresh(as), 0);
	const struct cp_addrspace_view *unloaded = cp_addrspace_view(as);
	ck_assert_uint_gt(unloaded->generation, loaded->generation);
	ck_assert_ptr_null(module_named(unloaded->modules, unloaded->nmodules,
					"/libplugin.so"));
	const struct cp_addrspace_module *gone =
		module_named(unloaded->gone, unloaded->ngone, "/libplugin.so");
	ck_assert_ptr_eq(gone, plugin);
	ck_assert(!cp_addrspace_has(as, plugin->start));
	/* The view taken while it was loaded is unchanged, its file open.  */
	struct stat st;
	ck_assert_ptr_eq(module_named(loaded->modules, loaded->nmodules,
				      "/libplugin.so"),
			 plugin);
	ck_assert_int_eq(fstat(plugin->fd, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_ino, plugin->inode);
	cp_addrspace_view_release(loaded);
	/* Released: the gone list holds it still.  */
	ck_assert_int_eq(fstat(gone->fd, &st), 0);
	cp_addrspace_view_release(unloaded);
	cp_addrspace_free(as);
}
END_TEST

/* execloop replaces itself: cp_addrspace_exec starts a new epoch (and
 * generation) with the mappings read again and nothing of the old image
 * kept, not even as gone; a view of the old epoch stays whole.  */
START_TEST(test_exec_epoch)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_addrspace *as = NULL;
	ck_assert_int_eq(cp_addrspace_new(fixture->pid, &as), 0);
	/* Something gone in the old epoch.  */
	ck_assert_int_eq(kill(fixture->pid, SIGUSR1), 0);
	ck_assert(tu_proc_wait_line(fixture, "loaded", PLUGIN_TIMEOUT_MS));
	ck_assert_int_eq(cp_addrspace_capture(as), 0);
	ck_assert(tu_proc_wait_line(fixture, "unloaded", PLUGIN_TIMEOUT_MS));
	ck_assert_int_eq(cp_addrspace_refresh(as), 0);
	const struct cp_addrspace_view *old = cp_addrspace_view(as);
	ck_assert_uint_gt(old->ngone, 0);
	uint64_t epoch = cp_addrspace_epoch(as);
	uint64_t generation = cp_addrspace_generation(as);

	ck_assert_int_eq(cp_addrspace_exec(as), 0);
	ck_assert_uint_eq(cp_addrspace_epoch(as), epoch + 1);
	ck_assert_uint_gt(cp_addrspace_generation(as), generation);
	const struct cp_addrspace_view *now = cp_addrspace_view(as);
	ck_assert_uint_eq(now->epoch, epoch + 1);
	ck_assert_uint_eq(now->ngone, 0);
	const struct cp_addrspace_module *exe =
		module_named(now->modules, now->nmodules, "/plugin-host");
	ck_assert_ptr_nonnull(exe);
	/* Made anew: nothing is shared across an exec.  */
	ck_assert_ptr_ne(exe, module_named(old->modules, old->nmodules,
					   "/plugin-host"));
	ck_assert_uint_gt(old->ngone, 0);
	cp_addrspace_view_release(old);
	cp_addrspace_view_release(now);
	cp_addrspace_free(as);

	/* A real exec: execloop replaces itself after 800 ms; once its
	 * executable is mapped elsewhere (a new image, placed anew), the
	 * exec told to the address space reads the new image, and the
	 * view of the old epoch still has the old one.  */
	struct tu_proc *loop = tu_fixture_start("execloop", "2", "800", NULL);
	ck_assert_ptr_nonnull(loop);
	struct cp_addrspace *las = NULL;
	ck_assert_int_eq(cp_addrspace_new(loop->pid, &las), 0);
	/* Until the test's child has become execloop.  */
	const struct cp_addrspace_view *lold = cp_addrspace_view(las);
	const struct cp_addrspace_module *img = NULL;
	for (int i = 0; i < 1000; i++) {
		img = module_named(lold->modules, lold->nmodules, "/execloop");
		if (img)
			break;
		usleep(2000);
		cp_addrspace_view_release(lold);
		ck_assert_int_eq(cp_addrspace_refresh(las), 0);
		lold = cp_addrspace_view(las);
	}
	ck_assert_ptr_nonnull(img);
	bool moved = false;
	for (int i = 0; i < 1000 && !moved; i++) {
		struct cp_maps *maps;
		if (cp_maps_read(loop->pid, &maps) < 0)
			break;
		const struct cp_map *m = cp_maps_find(maps, img->start);
		moved = !m || !ends_with(m->path, "/execloop");
		cp_maps_free(maps);
		if (!moved)
			usleep(10000);
	}
	ck_assert_msg(moved, "execloop did not exec");
	ck_assert_int_eq(cp_addrspace_exec(las), 0);
	ck_assert_uint_eq(cp_addrspace_epoch(las), 1);
	const struct cp_addrspace_view *lnew = cp_addrspace_view(las);
	const struct cp_addrspace_module *img2 =
		module_named(lnew->modules, lnew->nmodules, "/execloop");
	ck_assert_ptr_nonnull(img2);
	ck_assert_uint_ne(img2->start, img->start);
	ck_assert_ptr_eq(module_named(lold->modules, lold->nmodules,
				      "/execloop"), img);
	cp_addrspace_view_release(lold);
	cp_addrspace_view_release(lnew);
	cp_addrspace_free(las);
}
END_TEST

/* An exec told once to the address space reaches its readers without
 * another call: the resolver gives an address seen before a new location
 * (it means something else now), the --wall table forgets the stacks it
 * would have repeated, and the unwinder and the symbolizer made on it
 * read the new epoch's view.  */
START_TEST(test_exec_reaches_readers)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_addrspace *as = NULL;
	struct cp_unwinder *unwinder = NULL;
	struct cp_symbols *symbols = NULL;
	struct cp_symbols_options options = {.no_dwarf = true};
	ck_assert_int_eq(cp_addrspace_new(fixture->pid, &as), 0);
	ck_assert_int_eq(cp_unwinder_new_in(as, &unwinder), 0);
	ck_assert_int_eq(cp_symbols_new_in(as, &options, &symbols), 0);
	ck_assert_ptr_eq(cp_unwinder_addrspace(unwinder), as);
	ck_assert_ptr_eq(cp_symbols_addrspace(symbols), as);
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	const struct cp_addrspace_module *exe =
		module_named(v->modules, v->nmodules, "/plugin-host");
	ck_assert_ptr_nonnull(exe);
	uint64_t pc = exe->start + 0x1000;
	cp_addrspace_view_release(v);

	struct cp_profile *profile = cp_profile_new();
	struct cp_resolver *res = NULL;
	ck_assert_ptr_nonnull(profile);
	ck_assert_int_eq(cp_resolver_start(symbols, profile, &res), 0);
	uint32_t before = cp_resolver_location(res, pc);
	ck_assert_uint_ne(before, UINT32_MAX);
	ck_assert_uint_eq(cp_resolver_location(res, pc), before);

	struct cp_blocked *blocked = cp_blocked_new(as);
	ck_assert_ptr_nonnull(blocked);
	cp_blocked_begin_tick(blocked, 1);
	struct cp_blocked_thread *th = cp_blocked_thread(blocked, fixture->pid);
	ck_assert_ptr_nonnull(th);
	cp_blocked_stopped(th, 7, 0x1000, pc);
	cp_blocked_begin_tick(blocked, 2);
	th = cp_blocked_find(blocked, fixture->pid);
	ck_assert_ptr_nonnull(th);
	ck_assert_uint_eq(th->stack, 7);

	ck_assert_int_eq(cp_addrspace_exec(as), 0);
	uint32_t after = cp_resolver_location(res, pc);
	ck_assert_uint_ne(after, UINT32_MAX);
	ck_assert_uint_ne(after, before);
	ck_assert_uint_eq(cp_resolver_location(res, pc), after);
	cp_blocked_begin_tick(blocked, 3);
	th = cp_blocked_find(blocked, fixture->pid);
	ck_assert_ptr_nonnull(th);
	ck_assert_uint_eq(th->stack, UINT32_MAX);

	cp_resolver_finish(res);
	/* The symbolizer re-read the modules for the new epoch (the
	 * resolver's refresh job): the executable is named.  */
	const struct cp_symbol *sym = cp_symbols_lookup(symbols, pc);
	ck_assert_ptr_nonnull(sym->module);
	ck_assert_str_eq(sym->module, "plugin-host");
	cp_blocked_free(blocked);
	cp_profile_free(profile);
	cp_symbols_free(symbols);
	cp_unwinder_free(unwinder);
	cp_addrspace_free(as);
}
END_TEST

/* heap-leak-jemalloc has libjemalloc.so.2 ahead of libc in its link map:
 * malloc and free are jemalloc's, as the dynamic linker binds them;
 * heap-leak's are libc's.  A module's own symbols are still its own.  */
START_TEST(test_symbols_link_order)
{
	static const char *const names[] = {"malloc", "free",
					    "no_such_function_here"};
	int in_j, in_c;
	struct tu_proc *jem = tu_fixture_start_stdin(&in_j, "heap-leak-jemalloc",
						     NULL);
	struct tu_proc *plain = tu_fixture_start_stdin(&in_c, "heap-leak",
						       NULL);
	ready(jem);
	ready(plain);

	struct cp_addrspace *as = NULL;
	ck_assert_int_eq(cp_addrspace_new(jem->pid, &as), 0);
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	struct cp_addrspace_symbol syms[3];
	memset(syms, 0, sizeof(syms));
	uint64_t r_debug = 0;
	int found = cp_addrspace_find_symbols(as, &v, 0, names, 3, 0, syms,
					      &r_debug);
	ck_assert_int_eq(found, 2);
	ck_assert_uint_ne(r_debug, 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_ptr_nonnull(syms[i].module);
		ck_assert_msg(strstr(syms[i].module->path, "libjemalloc"),
			      "%s found in %s", names[i],
			      syms[i].module->path);
		ck_assert(!syms[i].executable);
		ck_assert_str_eq(syms[i].name, "libjemalloc.so.2");
		ck_assert_uint_ge(syms[i].value, syms[i].module->start);
		ck_assert_uint_lt(syms[i].value, syms[i].module->end);
	}
	ck_assert_uint_eq(syms[2].value, 0);
	/* libc defines malloc too: its own lookup finds it there.  */
	const struct cp_addrspace_module *libc =
		module_named(v->modules, v->nmodules, "/libc.so.6");
	ck_assert_ptr_nonnull(libc);
	uint64_t libc_malloc = 0;
	ck_assert_uint_eq(cp_addrspace_module_symbols(libc, names, 1, 0,
						      &libc_malloc), 1);
	ck_assert_uint_ge(libc_malloc, libc->start);
	ck_assert_uint_lt(libc_malloc, libc->end);
	ck_assert_uint_ne(libc_malloc, syms[0].value);
	/* Objects only with CP_ADDRSPACE_SYM_DATA.  */
	static const char *const data[] = {"environ"};
	uint64_t environ_at = 0;
	ck_assert_uint_eq(cp_addrspace_module_symbols(libc, data, 1, 0,
						      &environ_at), 0);
	ck_assert_uint_eq(cp_addrspace_module_symbols(
				  libc, data, 1, CP_ADDRSPACE_SYM_DATA,
				  &environ_at), 1);
	cp_addrspace_view_release(v);
	cp_addrspace_free(as);

	ck_assert_int_eq(cp_addrspace_new(plain->pid, &as), 0);
	v = cp_addrspace_view(as);
	memset(syms, 0, sizeof(syms));
	found = cp_addrspace_find_symbols(as, &v, 0, names, 2, 0, syms, NULL);
	ck_assert_int_eq(found, 2);
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(ends_with(syms[i].module->path, "/libc.so.6"),
			      "%s found in %s", names[i],
			      syms[i].module->path);
		ck_assert_str_eq(syms[i].name, "libc.so.6");
	}
	cp_addrspace_view_release(v);
	cp_addrspace_free(as);
	close(in_j);
	close(in_c);
}
END_TEST

/* Refreshes on one thread while another takes views and reads them, as
 * the sampling thread and the symbolizer thread do (the sanitizer build
 * checks the memory).  */
struct refresher {
	struct cp_addrspace *as;
	int rounds, failures;
};

static void *refresh_thread(void *arg)
{
	struct refresher *r = arg;
	for (int i = 0; i < r->rounds; i++) {
		/* An exec now and then: every module made anew.  */
		int rc = i % 50 == 49 ? cp_addrspace_exec(r->as)
			 : i % 2	   ? cp_addrspace_capture(r->as)
					   : cp_addrspace_refresh(r->as);
		if (rc != 0)
			r->failures++;
	}
	return NULL;
}

START_TEST(test_concurrent_views)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_addrspace *as = NULL;
	ck_assert_int_eq(cp_addrspace_new(fixture->pid, &as), 0);
	struct refresher r = {.as = as, .rounds = 300};
	pthread_t thread;
	ck_assert_int_eq(kill(fixture->pid, SIGUSR1), 0);
	ck_assert_int_eq(pthread_create(&thread, NULL, refresh_thread, &r), 0);
	for (int i = 0; i < 3000; i++) {
		const struct cp_addrspace_view *v = cp_addrspace_view(as);
		const struct cp_addrspace_module *exe =
			module_named(v->modules, v->nmodules, "/plugin-host");
		ck_assert_ptr_nonnull(exe);
		ck_assert_ptr_eq(cp_addrspace_view_module(v, exe->start), exe);
		struct stat st;
		ck_assert_int_ge(cp_addrspace_module_open(exe), 0);
		ck_assert_int_eq(fstat(exe->fd, &st), 0);
		cp_addrspace_view_release(v);
	}
	pthread_join(thread, NULL);
	ck_assert_int_eq(r.failures, 0);
	ck_assert_uint_eq(cp_addrspace_epoch(as), 300 / 50);
	cp_addrspace_free(as);
}
END_TEST

static Suite *addrspace_suite(void)
{
	Suite *suite = suite_create("addrspace");
	TCase *tc = tcase_create("maps");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_recorded_maps);
	tcase_add_test(tc, test_live_modules);
	suite_add_tcase(suite, tc);

	tc = tcase_create("changes");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_dlopen_dlclose);
	tcase_add_test(tc, test_exec_epoch);
	tcase_add_test(tc, test_exec_reaches_readers);
	tcase_add_test(tc, test_concurrent_views);
	suite_add_tcase(suite, tc);

	tc = tcase_create("symbols");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_symbols_link_order);
	suite_add_tcase(suite, tc);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(addrspace_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
