/* Reading DWARF unwind data with bounds, and checking call frame
 * programs, for the unwind-table checker (src/unwind/ehframe.c,
 * src/unwind/ehframe_hdr.c; cprof/ehframe.h).  Internal to libcprof.
 *
 * What is accepted mirrors what libunwind 1.6 (src/dwarf/Gparser.c,
 * Gexpr.c, dwarf_i.h) reads: an instruction, operand or pointer encoding
 * accepted here is one libunwind reads the way it was written.  */
#ifndef CPROF_CFI_H
#define CPROF_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* libunwind's DWARF_NUM_PRESERVED_REGS on x86-64: the size of the arrays
 * that register numbers index (rax..r15, rip).  */
#define NUM_REGS 17
/* A LEB128 number longer than this is not one of ours.  */
#define MAX_LEB_BYTES 10

/* Pointer encodings (DW_EH_PE_*).  */
enum {
	PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02,
	PE_UDATA4 = 0x03, PE_UDATA8 = 0x04, PE_SLEB128 = 0x09,
	PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
	PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_FUNCREL = 0x40,
	PE_INDIRECT = 0x80, PE_OMIT = 0xff,
	PE_FORMAT_MASK = 0x0f, PE_APPL_MASK = 0x70,
};

/* What an encoded pointer is for, which decides the encodings allowed.  */
enum ptr_use {
	PTR_CODE,  /* an FDE's initial location, DW_CFA_set_loc: pcrel or
		    * absolute, never indirect */
	PTR_AUX,   /* a personality routine or LSDA: never used by us, only
		    * read by libunwind (indirect: from target memory) */
	PTR_HDR,   /* .eh_frame_hdr fields: datarel is from the header */
};

/* A bounded reader: DATA[POS..END).  */
struct rd {
	const uint8_t *data;
	size_t pos, end;
};

static inline bool rd_bytes(struct rd *r, void *out, size_t n)
{
	if (n > r->end - r->pos)
		return false;
	memcpy(out, r->data + r->pos, n);
	r->pos += n;
	return true;
}

/* Little-endian host (x86-64): the bytes are the value.  */
static inline bool rd_u8(struct rd *r, uint8_t *v) { return rd_bytes(r, v, 1); }
static inline bool rd_u16(struct rd *r, uint16_t *v) { return rd_bytes(r, v, 2); }
static inline bool rd_u32(struct rd *r, uint32_t *v) { return rd_bytes(r, v, 4); }
static inline bool rd_u64(struct rd *r, uint64_t *v) { return rd_bytes(r, v, 8); }

static inline bool rd_skip(struct rd *r, uint64_t n)
{
	if (n > r->end - r->pos)
		return false;
	r->pos += (size_t)n;
	return true;
}

static inline bool rd_uleb(struct rd *r, uint64_t *v)
{
	uint64_t val = 0;
	for (unsigned i = 0; i < MAX_LEB_BYTES; i++) {
		uint8_t byte;
		if (!rd_u8(r, &byte))
			return false;
		if (i < 64 / 7 + 1)
			val |= (uint64_t)(byte & 0x7f) << (7 * i);
		if (!(byte & 0x80)) {
			*v = val;
			return true;
		}
	}
	return false;
}

static inline bool rd_sleb(struct rd *r, int64_t *v)
{
	uint64_t val = 0;
	for (unsigned i = 0; i < MAX_LEB_BYTES; i++) {
		uint8_t byte;
		if (!rd_u8(r, &byte))
			return false;
		unsigned shift = 7 * i;
		val |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			if (shift + 7 < 64 && (byte & 0x40))
				val |= ~(uint64_t)0 << (shift + 7);
			*v = (int64_t)val;
			return true;
		}
	}
	return false;
}

/* Is ENC an encoding libunwind reads as meant, for USE?  */
static inline bool encoding_ok(uint8_t enc, enum ptr_use use)
{
	switch (enc & PE_FORMAT_MASK) {
	case PE_ABSPTR: case PE_ULEB128: case PE_UDATA2: case PE_UDATA4:
	case PE_UDATA8: case PE_SLEB128: case PE_SDATA2: case PE_SDATA4:
	case PE_SDATA8:
		break;
	default:
		return false;
	}
	if ((enc & PE_INDIRECT) && use != PTR_AUX)
		return false;
	switch (enc & PE_APPL_MASK) {
	case PE_ABSPTR:
	case PE_PCREL:
		return true;
	case PE_DATAREL:
		return use != PTR_CODE;
	case PE_FUNCREL:
		return use == PTR_AUX;
	default:   /* textrel (unsupported), aligned, reserved */
		return false;
	}
}

/* Read a pointer encoded with ENC (encoding_ok) at R, whose DATA[0] is at
 * address BASE; DATAREL is the base of datarel pointers.  */
static inline bool rd_encoded(struct rd *r, uint8_t enc, uint64_t base,
		       uint64_t datarel, uint64_t *out)
{
	uint64_t field = base + r->pos, val;
	uint16_t u16;
	uint32_t u32;
	int64_t s;
	switch (enc & PE_FORMAT_MASK) {
	case PE_ABSPTR:
	case PE_UDATA8:
		if (!rd_u64(r, &val))
			return false;
		break;
	case PE_ULEB128:
		if (!rd_uleb(r, &val))
			return false;
		break;
	case PE_SLEB128:
		if (!rd_sleb(r, &s))
			return false;
		val = (uint64_t)s;
		break;
	case PE_UDATA2:
		if (!rd_u16(r, &u16))
			return false;
		val = u16;
		break;
	case PE_SDATA2:
		if (!rd_u16(r, &u16))
			return false;
		val = (uint64_t)(int64_t)(int16_t)u16;
		break;
	case PE_UDATA4:
		if (!rd_u32(r, &u32))
			return false;
		val = u32;
		break;
	case PE_SDATA4:
		if (!rd_u32(r, &u32))
			return false;
		val = (uint64_t)(int64_t)(int32_t)u32;
		break;
	case PE_SDATA8:
		if (!rd_u64(r, &val))
			return false;
		break;
	default:
		return false;
	}
	if ((enc & PE_APPL_MASK) == PE_PCREL)
		val += field;
	else if ((enc & PE_APPL_MASK) == PE_DATAREL)
		val += datarel;
	*out = val;
	return true;
}

/* Check the call frame instructions DATA[START..END) (at address BASE +
 * offset for pc-relative DW_CFA_set_loc operands, encoded with FDE_ENC):
 * each one libunwind knows, its operands inside the range, its register
 * numbers under NUM_REGS, its DWARF expressions ending (branches forward
 * only).  For .debug_frame (DEBUG), DW_CFA_set_loc operands are absolute
 * link-time addresses: when PATCH is not NULL (a copy of
 * DATA[START..END)), BIAS is added to them there.  Returns NULL or the
 * problem (static text).  */
const char *cp_cfi_check(const uint8_t *data, size_t start, size_t end,
			 uint8_t fde_enc, uint64_t base, bool debug,
			 uint8_t *patch, uint64_t bias);

#endif
