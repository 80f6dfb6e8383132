/* A separate debug file's DWARF read by compile unit.  Internal to
 * libcprof; used by the symbolizer (symbols.c).
 *
 * libdw decompresses every compressed .debug_* section of a file whole
 * when it opens it (a distribution's libc debug file: 4 MB on disk, about
 * 10 MB inflated), though a profile needs a handful of its compile units.
 * Here libdw is given instead an image of the debug file, in a memfd,
 * with its sections inflated but .debug_info holding only the compile
 * units asked for, at their own offsets (so every offset in the DWARF
 * still means what it did), each gap between them one empty unit, and
 * .debug_aranges only their address ranges (libdw reads the header of
 * every unit .debug_aranges names, and of every unit before).  Location
 * lists, which a symbolizer never reads, are left out (zeros).  A unit
 * asked for later makes a new image: the module is opened again on it.
 *
 * Only for files where this gives libdw the same answers: ELF64 little
 * endian, a zlib-compressed .debug_info of 32-bit DWARF units, a
 * .debug_aranges, no .debug_types, no supplementary file
 * (.gnu_debugaltlink, dwz), no unit that refers into another
 * (DW_FORM_ref_addr, GNU_ref_alt, ref_sig8, strp_sup, ref_sup*).  */
#ifndef CPROF_DWLAZY_H
#define CPROF_DWLAZY_H

#include <stdbool.h>
#include <stdint.h>

struct cp_dwlazy;

/* Read the section headers and address ranges of the debug file FD (not
 * taken: it is duplicated).  Returns 0 with *OUT, or -1 when the file is
 * not one this works for (the caller gives libdw the file itself).  */
int cp_dwlazy_open(int fd, struct cp_dwlazy **out);

void cp_dwlazy_free(struct cp_dwlazy *z);

/* The offset in .debug_info of the unit whose address ranges hold the
 * file address ADDR, or -1.  */
int64_t cp_dwlazy_unit(const struct cp_dwlazy *z, uint64_t addr);

/* Is the unit at OFFSET in the images made from now on?  */
bool cp_dwlazy_has(const struct cp_dwlazy *z, uint64_t offset);

/* Put the unit at OFFSET (a cp_dwlazy_unit answer) into the images made
 * from now on.  Returns 0 or -1 (out of memory).  */
int cp_dwlazy_add(struct cp_dwlazy *z, uint64_t offset);

/* A new image of the debug file with the units added so far: a
 * descriptor the caller owns, or -1 (then, and for good, the units of
 * this file cannot be read apart: a unit of 64-bit DWARF or one that
 * refers into another, a write that failed).  */
int cp_dwlazy_image(struct cp_dwlazy *z);

/* Units in the images, images made.  */
void cp_dwlazy_stats(const struct cp_dwlazy *z, uint64_t *units,
		     uint64_t *images);

#endif
