/* Unwind tables, checked before libunwind reads a byte of them.
 *
 * The .eh_frame, .debug_frame and .eh_frame_hdr of a module come from the
 * target's files and memory: anything may be in them.  libunwind trusts
 * what it is given (it aborts on an unexpected .eh_frame_hdr encoding,
 * indexes its register arrays with the return-address column and the
 * register of DW_CFA_register as found, and loops for ever on a DWARF
 * expression that jumps backwards), so the unwinder hands it only what
 * this module has checked:
 *
 *   - every CIE and FDE lies inside the section, its length, CIE pointer,
 *     augmentation and pointer encodings are ones libunwind reads the way
 *     they were meant;
 *   - every CFI instruction and DWARF expression operation is one
 *     libunwind knows, its operands lie inside the record, its register
 *     numbers inside libunwind's arrays, and expression branches go
 *     forward only (so every evaluation ends);
 *   - the code an FDE describes lies inside the module's executable
 *     segments, and no two kept FDEs overlap.
 *
 * The result is a table sorted by address (one binary search per lookup,
 * in our memory) and an image: the bytes libunwind will read, at the
 * addresses it will read them.  For .eh_frame the image is a copy of the
 * section, at its address in the target.  .debug_frame is not mapped in
 * the target and its form is not the one libunwind's remote search reads,
 * so its records are rewritten into .eh_frame form (CIE id 0, relative
 * CIE pointers, run-time addresses) in an image at an address the caller
 * chooses outside the target's address space.
 *
 * Everything here is a pure function of byte buffers (no I/O), for unit
 * tests and fuzzing (tests/check_unwtables.c, tests/fuzz/fuzz_ehframe.c).
 * x86-64 (little-endian, 8-byte addresses, 17 DWARF registers) only.  */
#ifndef CPROF_EHFRAME_H
#define CPROF_EHFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An address range [START, END).  */
struct cp_ehframe_range {
	uint64_t start, end;
};

/* Where the records come from.  */
enum cp_ehframe_kind {
	CP_EHFRAME_EH,    /* .eh_frame: CIE id 0, CIE pointers relative to
			   * the pointer, augmentations, encoded pointers */
	CP_EHFRAME_DEBUG, /* .debug_frame: CIE id ~0, CIE pointers are
			   * section offsets, link-time addresses */
};

/* One section to index.  */
struct cp_ehframe_input {
	enum cp_ehframe_kind kind;
	const uint8_t *data;   /* the section's bytes, borrowed for the call */
	size_t size;
	uint64_t addr;         /* EH: the address of DATA[0] in the target
				* (pc-relative pointers are relative to it) */
	uint64_t bias;         /* DEBUG: added to the link-time addresses */
	uint64_t image_addr;   /* DEBUG: where the rewritten image will be
				* served (must not be a target address) */
	const struct cp_ehframe_range *code; /* where functions may lie (run */
	size_t ncode;                        /* time addresses), NCODE ranges */
};

/* One checked FDE.  */
struct cp_ehframe_fde {
	uint64_t pc_start, pc_end; /* the code it describes, [start, end) */
	uint64_t fde_addr;         /* its first byte, inside the image */
};

/* What the check found (counts of records, the first problem).  */
struct cp_ehframe_stats {
	size_t cies, fdes;     /* records that parsed as such */
	size_t kept;           /* FDEs in the table */
	size_t rejected;       /* FDEs (and CIEs) left out */
	const char *problem;   /* the first reason something was left out or
				* the scan stopped, static text; NULL if none */
	uint64_t problem_offset; /* its offset in the section */
};

struct cp_ehframe_table;

/* Check every record of IN and index the FDEs that pass.  A record that
 * fails is left out (an FDE) or leaves out the FDEs that use it (a CIE);
 * a length that leaves the section ends the scan.  Returns 0 with a new
 * table in *OUT (possibly empty), or -CP_E_NOMEM, or -CP_E_INVAL when IN
 * is not usable at all (DEBUG with its image address range wrapping).
 * The caller frees *OUT with cp_ehframe_table_free().  */
int cp_ehframe_table_build(const struct cp_ehframe_input *in,
			   struct cp_ehframe_table **out);

void cp_ehframe_table_free(struct cp_ehframe_table *table);

/* The FDE whose code contains PC, or NULL.  Borrowed, valid until
 * cp_ehframe_table_free().  */
const struct cp_ehframe_fde *
cp_ehframe_table_lookup(const struct cp_ehframe_table *table, uint64_t pc);

/* Number of FDEs in TABLE, and FDE I of them (sorted by pc_start).  */
size_t cp_ehframe_table_count(const struct cp_ehframe_table *table);
const struct cp_ehframe_fde *
cp_ehframe_table_fde(const struct cp_ehframe_table *table, size_t i);

/* The bytes every kept FDE and its CIE lie in: *DATA (borrowed, valid
 * until cp_ehframe_table_free()), *SIZE bytes, at address *ADDR.  */
void cp_ehframe_table_image(const struct cp_ehframe_table *table,
			    const uint8_t **data, size_t *size,
			    uint64_t *addr);

void cp_ehframe_table_stats(const struct cp_ehframe_table *table,
			    struct cp_ehframe_stats *stats);

/* The parsed header of an .eh_frame_hdr section.  */
struct cp_ehframe_hdr {
	uint64_t eh_frame;     /* the address of .eh_frame */
	uint64_t eh_frame_end; /* the end of the load range it lies in */
	uint64_t fde_count;    /* entries of the search table (0: none) */
	bool table_ok;         /* the search table checked out (below) */
	const char *problem;   /* why the header or the table was refused,
				* static text; NULL if not */
};

/* Parse the .eh_frame_hdr DATA (SIZE bytes, at address ADDR in the
 * target).  The header must be version 1 with encodings libunwind reads,
 * and the .eh_frame it points to must start inside one of the NLOADS
 * ranges LOADS (the module's loaded segments).  The binary search table,
 * when there is one, is checked as well: it fits in SIZE, its initial
 * locations are sorted, and each FDE pointer lies in .eh_frame's load
 * range; the result is in OUT->table_ok (the table itself is not needed:
 * cp_ehframe_table_build indexes .eh_frame anew).  Returns 0 when
 * OUT->eh_frame can be used, -CP_E_PARSE (with OUT->problem) when not.  */
int cp_ehframe_hdr_parse(const uint8_t *data, size_t size, uint64_t addr,
			 const struct cp_ehframe_range *loads, size_t nloads,
			 struct cp_ehframe_hdr *out);

/* A section of an ELF file, from its section headers.  */
struct cp_ehframe_section {
	uint64_t addr;    /* sh_addr (link-time address; 0 if not loaded) */
	uint64_t offset;  /* sh_offset in the file */
	uint64_t size;    /* sh_size */
	bool alloc;       /* SHF_ALLOC: mapped by the loader */
};

/* Reads LEN bytes at OFFSET of a file into BUF; 0 or a negative code.  */
typedef int cp_ehframe_read_fn(void *ctx, uint64_t offset, void *buf,
			       size_t len);

/* Find the section NAME (".eh_frame", ".debug_frame") of the 64-bit
 * little-endian ELF file of FILE_SIZE bytes that READ (with CTX) reads,
 * checking every header and name against the file's size.  Returns 0
 * (*OUT filled, the section's bytes inside the file), -CP_E_PARSE when
 * the file is not such an ELF file or has no such section with bytes in
 * it, -CP_E_NOMEM, or what READ returned.  */
int cp_ehframe_elf_section(cp_ehframe_read_fn *read, void *ctx,
			   uint64_t file_size, const char *name,
			   struct cp_ehframe_section *out);

#endif
