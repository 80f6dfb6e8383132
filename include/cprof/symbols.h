/* The symbolizer: an address in the target -> function, source position,
 * module.  libdwfl (elfutils) finds the modules from /proc/PID/maps, the ELF
 * files, separate debug information and symbol tables.  Each distinct
 * address is looked up once and cached.  */
#ifndef CPROF_SYMBOLS_H
#define CPROF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cp_symbols;

struct cp_symbols_options {
	/* Searched first for separate debug files, in both layouts: the
	 * .gnu_debuglink name (DIR/<module dir>/NAME and DIR/NAME) and
	 * DIR/.build-id/xx/rest.debug.  May be NULL.  */
	const char *const *debuginfo_dirs;
	size_t n_debuginfo_dirs;
	bool no_demangle;   /* keep C++/Rust names as the symbol table has them */
	/* Names from the symbol tables only: no DWARF, so no inlined frames
	 * and no source positions, but nothing to read beyond .symtab.  */
	bool no_dwarf;
	int verbose;        /* > 0: report lookup statistics */
	/* Called with one line of text for each problem met along the way
	 * (a corrupt debug file, a build-id mismatch); may be NULL.  */
	void (*warn)(void *arg, const char *message);
	void *warn_arg;
};

/* One source-level frame at an address.  Strings are borrowed, valid until
 * cp_symbols_free().  */
struct cp_frame {
	const char *function;   /* name, or "module+0xOFFSET", or "[unknown]" */
	const char *file;       /* source file or NULL */
	int line;               /* 0 when unknown */
	bool inlined;           /* an inlined call inside the next frame */
	bool named;             /* FUNCTION is a real symbol name */
};

/* What one address resolves to: one frame, or several when calls were
 * inlined there (innermost first).  */
struct cp_symbol {
	uint64_t address;
	const char *module;     /* basename of the module, or NULL */
	const char *module_path;/* full path of the module, or NULL */
	uint64_t module_offset; /* ADDRESS minus the module's load bias */
	uint64_t module_start, module_end; /* the module's mapped range */
	const char *build_id;   /* hex, or NULL */
	size_t nframes;         /* >= 1 */
	const struct cp_frame *frames;
};

struct cp_addrspace;

/* A symbolizer for the target whose address space is SPACE (borrowed: it
 * must outlive the symbolizer), its modules as SPACE has them now.  Every
 * module file is the one SPACE keeps open, or failing that opened by the
 * same rules (cprof/tpath.h).  Returns 0 or a -CP_E_* code.  */
int cp_symbols_new_in(struct cp_addrspace *space,
		      const struct cp_symbols_options *options,
		      struct cp_symbols **out);

/* The same with an address space of its own for process PID, read now
 * (freed with the symbolizer).  Returns 0 or a -CP_E_* code.  */
int cp_symbols_new(pid_t pid, const struct cp_symbols_options *options,
		   struct cp_symbols **out);

/* The address space SYMBOLS reads (borrowed).  */
struct cp_addrspace *cp_symbols_addrspace(const struct cp_symbols *symbols);

void cp_symbols_free(struct cp_symbols *symbols);

/* Resolve ADDRESS (already adjusted: pc for the innermost frame, return
 * address - 1 for the others).  Never NULL; borrowed, valid until
 * cp_symbols_free().  An address in no known module re-reads the target's
 * mappings at most once per cp_symbols_new_epoch() call.  An unknown
 * answer (cp_symbols_unknown) is looked up again when asked again in a
 * later epoch or after the modules changed, never cached for good.  */
const struct cp_symbol *cp_symbols_lookup(struct cp_symbols *symbols,
					  uint64_t address);

/* Start a new epoch (one sampling tick): allows one more re-read of the
 * mappings when an unknown address shows up.  */
void cp_symbols_new_epoch(struct cp_symbols *symbols);

/* The target's mappings changed (exec): every address is looked up anew,
 * the mappings re-read now (cp_addrspace_refresh).  */
void cp_symbols_refresh(struct cp_symbols *symbols);

/* Record the target's mappings now and keep its modules' files open (by
 * the rules of cprof/tpath.h), for names looked up later, even after the
 * target has exited: cp_addrspace_capture, which is all this does; a
 * later re-read falls back on its view when the target is gone, and the
 * modules it finds unloaded stay open as gone ones.  Meant for the tracer thread while the target is alive
 * (stopped or not), with lookups going on in another thread: this is the
 * one function safe to call concurrently with the others.  Cheap when the
 * target's mappings did not change (one or two reads of /proc/PID/maps).
 * Returns 0, -CP_E_NOPROC when the target is gone, -CP_E_NOMEM or
 * -CP_E_SYS.  */
int cp_symbols_capture(struct cp_symbols *symbols);

/* Was ADDRESS taken care of by a capture (cp_addrspace_captured)?  When
 * it was not, a new capture is due (a library loaded since: another
 * refresh, the unwinder's, may have seen it, but not opened its file).
 * Thread-safe likewise.  */
bool cp_symbols_capture_has(struct cp_symbols *symbols, uint64_t address);

/* A number that changes whenever the set of known modules changed (a
 * re-read found a library loaded or unloaded, or a module whose file could
 * not be opened is tried again): an address that was unknown may be known
 * since.  */
uint64_t cp_symbols_generation(const struct cp_symbols *symbols);

/* Does SYM name nothing (no module, no name from a perf map)?  Such an
 * answer is never final: looking the address up again later, after a
 * re-read of the mappings, may name it.  */
bool cp_symbols_unknown(const struct cp_symbol *sym);

/* Let go of what was read for the modules not looked up in since the
 * last call (or since they were read, on the first): libdwfl's handles
 * on their files and debug files, their DWARF with the sections it
 * decompressed (a distribution's libc debug file inflates to about
 * 10 MB), their symbol tables.  The modules looked up in since are kept,
 * until the next call.  The answers already given stay (cached, and
 * valid until cp_symbols_free as before); a later lookup of a new address
 * in a module let go reads its files again, by the same rules, to the
 * same answer.  Meant to be called every so often by the thread doing
 * the lookups.  Returns the number of modules let go.  */
size_t cp_symbols_release(struct cp_symbols *symbols);

/* *READ: the modules whose files are read now (looked up in since the
 * last cp_symbols_release); *RELEASED: the modules let go so far.  */
void cp_symbols_read_stats(const struct cp_symbols *symbols, size_t *read,
			   uint64_t *released);

/* Counters: distinct addresses resolved, cached hits, mapping re-reads.  */
void cp_symbols_stats(const struct cp_symbols *symbols, uint64_t *lookups,
		      uint64_t *hits, uint64_t *rereads);

#endif
