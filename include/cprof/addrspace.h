/* The target's address space: one view of it per target, shared by the
 * unwinder, the symbolizer and heap mode (perf's machine/maps, libdwfl's
 * Dwfl).  It holds the mappings (/proc/PID/maps), the modules they make
 * (path, range, load bias, build id, the file kept open by the rules of
 * cprof/tpath.h) and two numbers: the exec epoch, which changes when the
 * target execs (every address means something new), and the generation,
 * which changes whenever the modules do (a library loaded or unloaded, an
 * exec).  It is updated in one place: cp_addrspace_refresh when libraries
 * may have been loaded or unloaded, cp_addrspace_exec when the target
 * exec'ed; its readers notice the change by the numbers and drop what
 * they cached of modules that are gone.
 *
 * Threads: every function here may be called from any thread, at the same
 * time as the others (the sampling thread refreshes while the symbolizer
 * thread reads).  Readers take a reference to the current view
 * (cp_addrspace_view), an immutable snapshot: a refresh makes a new view
 * and swaps it in, and a view stays whole, its files open, until the last
 * reference to it is released.  Refreshes are serialized among
 * themselves; taking a view never waits for one.  */
#ifndef CPROF_ADDRSPACE_H
#define CPROF_ADDRSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cprof/procfs.h"

struct cp_addrspace;

/* One module: the mappings of one file at one base address (or the
 * vDSO).  Immutable; shared by the views that have it.  */
struct cp_addrspace_module {
	const char *path;      /* as /proc/PID/maps names it ("[vdso]") */
	uint64_t start, end;   /* the range its mappings cover */
	uint64_t base;         /* the address of file offset 0 */
	uint64_t inode;        /* of the mapped file, 0 for the vDSO */
	bool executable;       /* one of its mappings is */
	bool vdso;
	/* What follows is valid once cp_addrspace_module_open returned
	 * (it is filled in by the first call, on any thread).  The mapped
	 * file, opened by the rules of cprof/tpath.h (through
	 * /proc/PID/map_files, or by path in the target's root while it is
	 * the inode mapped); -1 when it could not be.  Borrowed: dup it to
	 * keep it.  */
	int fd;
	struct stat st;        /* of FD */
	const char *file_name; /* what the open called it, or NULL */
	/* From the ELF headers of FD, when it has them.  */
	bool elf;              /* BIAS is known */
	uint64_t bias;         /* run-time minus link-time addresses */
	const char *build_id;  /* hex, or NULL */
};

/* The address space at one moment.  Immutable while referenced.  */
struct cp_addrspace_view {
	uint64_t epoch;        /* exec epoch it belongs to */
	uint64_t generation;   /* of its modules */
	const struct cp_maps *maps;  /* every mapping, in address order */
	const struct cp_addrspace_module *const *modules; /* by address */
	size_t nmodules;
	/* Modules of this epoch that refreshes found gone (unloaded) with
	 * their files open (cp_addrspace_module_open), at most
	 * CP_ADDRSPACE_GONE_MAX, the most recent first: addresses sampled
	 * before the unload are still named by them.  */
	const struct cp_addrspace_module *const *gone;
	size_t ngone;
};

#define CP_ADDRSPACE_GONE_MAX 64

/* The address space of process PID, read now.  Returns 0, -CP_E_NOPROC
 * (PID is gone), -CP_E_NOMEM or -CP_E_SYS.  */
int cp_addrspace_new(pid_t pid, struct cp_addrspace **out);

/* Free AS.  Views still referenced stay valid until released.  NULL is
 * fine.  */
void cp_addrspace_free(struct cp_addrspace *as);

pid_t cp_addrspace_pid(const struct cp_addrspace *as);

/* Read the mappings again (libraries may have been loaded or unloaded).
 * The kernel hands /proc/PID/maps out a page at a time and lets the
 * target change its mappings in between, so it is read until two reads
 * agree (at most 4 times); a read that failed changes nothing (the target
 * gone: the last view stays, its files open); a module a read that did
 * not settle no longer shows is kept unless a module shown overlaps it
 * (a read torn by the loader must not lose the executable).  Cheap when
 * nothing changed: the view stays the same (one or two reads of the
 * maps).  Returns 0, -CP_E_NOPROC (gone), -CP_E_NOMEM or -CP_E_SYS.  */
int cp_addrspace_refresh(struct cp_addrspace *as);

/* Open MOD's file (by the rules above) if no call did yet, and read its
 * load bias and build id; thread-safe.  Returns MOD->fd (-1: it could
 * not be opened; not tried again for this module).  A module is opened
 * when first needed, not when a refresh finds it (a --dump names the
 * stacks of a few modules of hundreds): a capture opens them while the
 * target lives.  */
int cp_addrspace_module_open(const struct cp_addrspace_module *mod);

/* A refresh that also opens the files of every executable module (the
 * only ones a lookup reads), while the target lives: names are looked up
 * later, on another thread, maybe after the target exited and its
 * /proc/PID/map_files went with it.  Returns as cp_addrspace_refresh.  */
int cp_addrspace_capture(struct cp_addrspace *as);

/* Was ADDRESS taken care of by a capture: in a module of the current
 * view whose file was opened (by a capture or a lookup), or in another
 * mapping of it (JIT code has no file to keep)?  When not, a capture is
 * due (a library loaded since, which an unload may take away before its
 * names are looked up).  */
bool cp_addrspace_captured(struct cp_addrspace *as, uint64_t address);

/* Take TEXT (LEN bytes in the format of /proc/PID/maps) as the mappings,
 * as if a refresh had read them (STABLE: two reads agreed), by the same
 * rules: for recorded inputs and tests.  Returns 0, -CP_E_PARSE or
 * -CP_E_NOMEM.  */
int cp_addrspace_apply_maps(struct cp_addrspace *as, const char *text,
			    size_t len, bool stable);

/* The target exec'ed: a new epoch, no module of the old image is kept
 * (not even as gone), the mappings read again.  Returns as
 * cp_addrspace_refresh; the epoch changes whatever the read did.  */
int cp_addrspace_exec(struct cp_addrspace *as);

/* The current exec epoch and module generation (cheap: no lock).  */
uint64_t cp_addrspace_epoch(const struct cp_addrspace *as);
uint64_t cp_addrspace_generation(const struct cp_addrspace *as);

/* A reference to the current view: release it with
 * cp_addrspace_view_release.  Never NULL.  */
const struct cp_addrspace_view *cp_addrspace_view(struct cp_addrspace *as);

/* Drop a reference taken by cp_addrspace_view.  NULL is fine.  */
void cp_addrspace_view_release(const struct cp_addrspace_view *view);

/* The module of VIEW containing ADDRESS, or NULL.  Borrowed from VIEW.  */
const struct cp_addrspace_module *
cp_addrspace_view_module(const struct cp_addrspace_view *view,
			 uint64_t address);

/* Is ADDRESS mapped in the current view?  (Whether a capture took care
 * of it: cp_addrspace_captured.)  */
bool cp_addrspace_has(struct cp_addrspace *as, uint64_t address);

/* What cp_addrspace_find_symbols looks for.  */
enum {
	CP_ADDRSPACE_SYM_DATA = 1,   /* objects count, not only functions */
};

/* Where a symbol was found.  */
struct cp_addrspace_symbol {
	uint64_t value;        /* its run-time address; 0: not found */
	const struct cp_addrspace_module *module; /* borrowed from the view;
						   * NULL when not in it */
	bool executable;       /* found in the executable */
	/* For messages only: "executable", or the file name of the name
	 * the link map gives (the target's to write; never opened).  */
	char name[128];
};

/* Look up the symbols NAMES[0..N) over the modules in link-map order
 * (the order the dynamic linker resolves symbols in): for each name not
 * found yet (SYMS[i].value 0), the first module that defines and exports
 * it (a hidden symbol version does not count) fills SYMS[i].  The link
 * map is read from the target's struct r_debug at R_DEBUG, or when 0 at
 * the one the executable's DT_DEBUG names; *R_DEBUG_OUT (may be NULL)
 * gets the one used (0: none).  Without a link map (a static executable,
 * or the dynamic linker has not run) the executable alone, its .symtab
 * with local symbols too (a static executable has one allocator; glibc's
 * malloc is local in a static-pie).  The names the link map gives are the
 * target's and are never opened: a module is the one mapped where its
 * dynamic section (l_ld) lies, read through the file the address space
 * keeps; the executable through /proc/PID/exe when it has none.  *VIEW
 * is the caller's reference to the view searched; when a link-map entry
 * lies in no module of it, the address space is refreshed once and *VIEW
 * replaced by a reference to the new view (the old one released).
 * Returns how many names were found, or a -CP_E_* code (-CP_E_NOALLOC:
 * no module to search).  */
int cp_addrspace_find_symbols(struct cp_addrspace *as,
			      const struct cp_addrspace_view **view,
			      uint64_t r_debug, const char *const *names,
			      size_t n, unsigned flags,
			      struct cp_addrspace_symbol *syms,
			      uint64_t *r_debug_out);

/* The symbols NAMES[0..N) that module MOD defines and exports (.dynsym),
 * for those VALUES[i] still 0: their run-time addresses.  FLAGS as
 * above.  Returns how many were found.  */
size_t cp_addrspace_module_symbols(const struct cp_addrspace_module *mod,
				   const char *const *names, size_t n,
				   unsigned flags, uint64_t *values);

#endif
