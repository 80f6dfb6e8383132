/* The unwind tables of a target's modules, for the unwinder: found in the
 * target's memory (or, when its memory does not say where they are, in
 * its files), checked and indexed once per module (cprof/ehframe.h), and
 * served to libunwind from the checked copies.  Internal to libcprof.
 *
 * For each module (one file mapped at one base address):
 *
 *   - .eh_frame, located through the PT_GNU_EH_FRAME header the loader
 *     mapped (no file needed: deleted or replaced files and containers
 *     work alike), copied from the target's memory in one read;
 *   - when a pc is not found there, and once per module, the file (opened
 *     through /proc/PID/root, a regular file with the mapped inode, or
 *     nothing): its .eh_frame section if the memory had no header (musl's
 *     toolchain links without one), and its .debug_frame (rewritten into
 *     .eh_frame form, served at addresses no target has).
 *
 * libunwind reads nothing of a module's tables but through
 * cp_unwtables_read, so what it reads is what was checked, even if the
 * target changes its memory afterwards.  */
#ifndef CPROF_UNWTABLES_H
#define CPROF_UNWTABLES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/ehframe.h"
#include "cprof/procfs.h"

struct cp_unwtables;

/* Tables for process PID.  Returns 0 or -CP_E_NOMEM.  */
int cp_unwtables_new(pid_t pid, struct cp_unwtables **out);

/* NULL is fine.  */
void cp_unwtables_free(struct cp_unwtables *tables);

/* The target's mappings changed (exec): forget every module.  */
void cp_unwtables_reset(struct cp_unwtables *tables);

struct cp_addrspace_view;

/* Forget the modules VIEW no longer has (same path, base and inode):
 * unloaded.  cp_unwtables_dropped says so when one had tables.  */
void cp_unwtables_prune(struct cp_unwtables *tables,
			const struct cp_addrspace_view *view);

/* The checked FDE describing PC, which lies in the file mapping MAP of
 * MAPS (the target's current mappings), or NULL.  Builds the module's
 * tables on first use.  Borrowed, valid until the next call of any
 * cp_unwtables function but cp_unwtables_read.  */
const struct cp_ehframe_fde *cp_unwtables_find(struct cp_unwtables *tables,
					       const struct cp_maps *maps,
					       const struct cp_map *map,
					       uint64_t pc);

/* True, once, when the tables of a module were dropped since the last
 * call (its addresses now hold another module: a library unloaded and
 * another loaded in its place, without an exec): rules libunwind cached
 * from them may point into an image that is no longer served, and must
 * go (unw_flush_cache).  */
bool cp_unwtables_dropped(struct cp_unwtables *tables);

/* The address of an 8-byte search table entry cp_unwtables_read serves
 * for libunwind's dwarf_search_unwind_table: an entry that matches any
 * pc (start offset INT32_MIN) with FDE offset 0, so that with the
 * table's segbase set to an FDE's address the search yields that FDE.  */
#define CP_UNWTABLES_ENTRY 0x8000000000000000ull

/* A read of libunwind at ADDR (an 8-byte word, as libunwind's remote
 * readers ask for them): when ADDR lies in a checked image (or is
 * CP_UNWTABLES_ENTRY), the word goes to *WORD (bytes outside the image
 * are 0) and the result is true; false when ADDR is not ours.  */
bool cp_unwtables_read(struct cp_unwtables *tables, uint64_t addr,
		       uint64_t *word);

/* The checked image ADDR lies in (an FDE's address): *DATA (borrowed,
 * valid until the next call of any cp_unwtables function but
 * cp_unwtables_read and this one), *SIZE bytes at address *IMAGE_ADDR.
 * False when ADDR is in none.  */
bool cp_unwtables_image(struct cp_unwtables *tables, uint64_t addr,
			const uint8_t **data, size_t *size,
			uint64_t *image_addr);

#endif
