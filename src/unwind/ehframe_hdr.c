/* .eh_frame_hdr and ELF section headers, checked: see
 * include/cprof/ehframe.h.  */
#include "cprof/ehframe.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/cfi.h"
#include "cprof/error.h"

/* ---------------------------------------------------- .eh_frame_hdr */

int cp_ehframe_hdr_parse(const uint8_t *data, size_t size, uint64_t addr,
			 const struct cp_ehframe_range *loads, size_t nloads,
			 struct cp_ehframe_hdr *out)
{
	struct rd r = {data, 0, size};
	uint8_t version, ptr_enc, count_enc, table_enc;
	memset(out, 0, sizeof(*out));
	if (!rd_u8(&r, &version) || !rd_u8(&r, &ptr_enc) ||
	    !rd_u8(&r, &count_enc) || !rd_u8(&r, &table_enc)) {
		out->problem = ".eh_frame_hdr cut short";
		return -CP_E_PARSE;
	}
	if (version != 1) {
		out->problem = ".eh_frame_hdr version is not 1";
		return -CP_E_PARSE;
	}
	/* Datarel in the header is relative to the header's start.  */
	if (ptr_enc == PE_OMIT || !encoding_ok(ptr_enc, PTR_HDR)) {
		out->problem = ".eh_frame_hdr pointer encoding not supported";
		return -CP_E_PARSE;
	}
	if (!rd_encoded(&r, ptr_enc, addr, addr, &out->eh_frame)) {
		out->problem = ".eh_frame_hdr cut short";
		return -CP_E_PARSE;
	}
	size_t i;
	for (i = 0; i < nloads; i++)
		if (out->eh_frame >= loads[i].start &&
		    out->eh_frame < loads[i].end)
			break;
	if (i == nloads) {
		out->problem = ".eh_frame_hdr points outside the module";
		return -CP_E_PARSE;
	}
	out->eh_frame_end = loads[i].end;
	/* The search table.  Only its absence is normal; anything else
	 * that is wrong is reported, and .eh_frame is still usable.  */
	out->table_ok = true;
	if (count_enc == PE_OMIT || table_enc == PE_OMIT)
		return 0;
	uint64_t count;
	if (!encoding_ok(count_enc, PTR_HDR) ||
	    (count_enc & PE_APPL_MASK) != PE_ABSPTR) {
		out->problem = ".eh_frame_hdr count encoding not supported";
		out->table_ok = false;
		return 0;
	}
	if (!rd_encoded(&r, count_enc, addr, addr, &count)) {
		out->problem = ".eh_frame_hdr cut short";
		out->table_ok = false;
		return 0;
	}
	/* The one table encoding linkers write, and the only one
	 * libunwind's binary search reads (it aborts on any other).  */
	if (table_enc != (PE_DATAREL | PE_SDATA4)) {
		out->problem = ".eh_frame_hdr table encoding not supported";
		out->table_ok = false;
		return 0;
	}
	if (count > (r.end - r.pos) / 8) {
		out->problem = ".eh_frame_hdr FDE count larger than the section";
		out->table_ok = false;
		return 0;
	}
	out->fde_count = count;
	int64_t prev = INT64_MIN;
	for (uint64_t k = 0; k < count; k++) {
		uint32_t loc = 0, fde = 0;
		rd_u32(&r, &loc);
		rd_u32(&r, &fde);
		int64_t start = (int32_t)loc;
		uint64_t fde_addr = addr + (uint64_t)(int64_t)(int32_t)fde;
		if (start < prev) {
			out->problem = ".eh_frame_hdr table not sorted";
			out->table_ok = false;
			return 0;
		}
		prev = start;
		if (fde_addr < out->eh_frame || fde_addr >= out->eh_frame_end) {
			out->problem = ".eh_frame_hdr FDE pointer outside .eh_frame";
			out->table_ok = false;
			return 0;
		}
	}
	return 0;
}

/* ------------------------------------------------- ELF section lookup */

/* A bound for what we read of a file's section names.  */
#define MAX_SHSTRTAB (16u << 20)

int cp_ehframe_elf_section(cp_ehframe_read_fn *read, void *ctx,
			   uint64_t file_size, const char *name,
			   struct cp_ehframe_section *out)
{
	Elf64_Ehdr eh;
	int rc;
	if (file_size < sizeof(eh))
		return -CP_E_PARSE;
	if ((rc = read(ctx, 0, &eh, sizeof(eh))) < 0)
		return rc;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
	    eh.e_shstrndx >= eh.e_shnum)
		return -CP_E_PARSE;
	uint64_t sh_bytes = (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr);
	if (eh.e_shoff > file_size || sh_bytes > file_size - eh.e_shoff)
		return -CP_E_PARSE;
	Elf64_Shdr *sh = malloc(sh_bytes);
	if (!sh)
		return -CP_E_NOMEM;
	char *names = NULL;
	if ((rc = read(ctx, eh.e_shoff, sh, sh_bytes)) < 0)
		goto done;
	rc = -CP_E_PARSE;
	const Elf64_Shdr *strs = &sh[eh.e_shstrndx];
	if (strs->sh_type != SHT_STRTAB || strs->sh_size == 0 ||
	    strs->sh_size > MAX_SHSTRTAB || strs->sh_offset > file_size ||
	    strs->sh_size > file_size - strs->sh_offset)
		goto done;
	names = malloc(strs->sh_size + 1);
	if (!names) {
		rc = -CP_E_NOMEM;
		goto done;
	}
	int rrc = read(ctx, strs->sh_offset, names, strs->sh_size);
	if (rrc < 0) {
		rc = rrc;
		goto done;
	}
	names[strs->sh_size] = 0;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		if (sh[i].sh_name >= strs->sh_size ||
		    strcmp(names + sh[i].sh_name, name) != 0)
			continue;
		if (sh[i].sh_type == SHT_NOBITS ||
		    sh[i].sh_offset > file_size ||
		    sh[i].sh_size > file_size - sh[i].sh_offset)
			break;
		out->addr = sh[i].sh_addr;
		out->offset = sh[i].sh_offset;
		out->size = sh[i].sh_size;
		out->alloc = (sh[i].sh_flags & SHF_ALLOC) != 0;
		rc = 0;
		break;
	}
done:
	free(names);
	free(sh);
	return rc;
}
