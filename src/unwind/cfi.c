/* Call frame programs and DWARF expressions checked against what
 * libunwind evaluates: see cfi.h.  */
#include "unwind/cfi.h"

/* ------------------------------------------------- DWARF expressions */

/* Check the DWARF expression DATA[START..END): operations libunwind
 * evaluates, with operands as long as libunwind reads them (its
 * operands[] table in Gexpr.c), and skip/bra that land forward, inside
 * the expression, so evaluation always ends.  */
static const char *check_expression(const uint8_t *data, size_t start,
				    size_t end)
{
	struct rd r = {data, start, end};
	while (r.pos < r.end) {
		uint8_t op = 0;
		uint64_t u;
		int64_t s;
		uint16_t u16;
		rd_u8(&r, &op);
		bool ok = true;
		if (op >= 0x30 && op <= 0x6f) {
			continue;  /* lit0..31, reg0..31 */
		} else if (op >= 0x70 && op <= 0x8f) {
			ok = rd_sleb(&r, &s);  /* breg0..31 */
		} else {
			switch (op) {
			case 0x06: case 0x12: case 0x13: case 0x14: case 0x16:
			case 0x17: case 0x19: case 0x1a: case 0x1b: case 0x1c:
			case 0x1d: case 0x1e: case 0x1f: case 0x20: case 0x21:
			case 0x22: case 0x24: case 0x25: case 0x26: case 0x27:
			case 0x29: case 0x2a: case 0x2b: case 0x2c: case 0x2d:
			case 0x2e: case 0x96:
				break;  /* no operand */
			case 0x03: /* addr */
			case 0x0e: case 0x0f: /* const8u, const8s */
				ok = rd_skip(&r, 8);
				break;
			case 0x08: case 0x09: /* const1u, const1s */
			case 0x15: /* pick */
			case 0x94: /* deref_size */
				ok = rd_skip(&r, 1);
				break;
			case 0x0a: case 0x0b: /* const2u, const2s */
				ok = rd_skip(&r, 2);
				break;
			case 0x0c: case 0x0d: /* const4u, const4s */
				ok = rd_skip(&r, 4);
				break;
			case 0x10: case 0x23: case 0x90: /* constu, plus_uconst,
							  * regx */
				ok = rd_uleb(&r, &u);
				break;
			case 0x11: /* consts */
				ok = rd_sleb(&r, &s);
				break;
			case 0x92: /* bregx */
				ok = rd_uleb(&r, &u) && rd_sleb(&r, &s);
				break;
			case 0x2f: /* skip */
			case 0x28: /* bra */
				if (!rd_u16(&r, &u16))
					return "expression cut short";
				/* Forward only: libunwind would follow a
				 * backward branch for ever.  */
				if ((int16_t)u16 < 0 ||
				    (size_t)(int16_t)u16 > r.end - r.pos)
					return "expression branch backwards or out";
				break;
			default:
				return "expression operation libunwind does not evaluate";
			}
		}
		if (!ok)
			return "expression cut short";
	}
	return NULL;
}

/* --------------------------------------------------- CFI programs */

static bool rd_reg(struct rd *r)
{
	uint64_t reg;
	return rd_uleb(r, &reg) && reg < NUM_REGS;
}

const char *cp_cfi_check(const uint8_t *data, size_t start, size_t end,
			 uint8_t fde_enc, uint64_t base, bool debug,
			 uint8_t *patch, uint64_t bias)
{
	struct rd r = {data, start, end};
	while (r.pos < r.end) {
		uint8_t op = 0, u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t u, loc;
		int64_t s;
		bool ok;
		size_t block;
		rd_u8(&r, &op);
		switch (op & 0xc0) {
		case 0x40: /* advance_loc */
			continue;
		case 0x80: /* offset */
			if ((op & 0x3f) >= NUM_REGS)
				return "CFI register number out of range";
			if (!rd_uleb(&r, &u))
				return "CFI instruction cut short";
			continue;
		case 0xc0: /* restore */
			if ((op & 0x3f) >= NUM_REGS)
				return "CFI register number out of range";
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
		case 0x0a: /* remember_state */
		case 0x0b: /* restore_state */
			ok = true;
			break;
		case 0x01: /* set_loc */
			if (debug) {
				size_t at = r.pos;
				ok = rd_u64(&r, &loc);
				if (ok && patch) {
					loc += bias;
					memcpy(patch + (at - start), &loc, 8);
				}
			} else {
				ok = rd_encoded(&r, fde_enc, base, 0, &loc);
			}
			break;
		case 0x02: ok = rd_u8(&r, &u8); break;   /* advance_loc1 */
		case 0x03: ok = rd_u16(&r, &u16); break; /* advance_loc2 */
		case 0x04: ok = rd_u32(&r, &u32); break; /* advance_loc4 */
		case 0x05: /* offset_extended */
		case 0x2f: /* GNU_negative_offset_extended */
		case 0x0c: /* def_cfa */
			if (!rd_reg(&r))
				return "CFI register number out of range";
			ok = rd_uleb(&r, &u);
			break;
		case 0x06: /* restore_extended */
		case 0x07: /* undefined */
		case 0x08: /* same_value */
		case 0x0d: /* def_cfa_register */
			if (!rd_reg(&r))
				return "CFI register number out of range";
			ok = true;
			break;
		case 0x09: /* register: libunwind checks the first number
			    * only, and indexes its locations with the
			    * second */
			if (!rd_reg(&r) || !rd_reg(&r))
				return "CFI register number out of range";
			ok = true;
			break;
		case 0x0e: /* def_cfa_offset */
		case 0x2e: /* GNU_args_size */
			ok = rd_uleb(&r, &u);
			break;
		case 0x11: /* offset_extended_sf */
		case 0x12: /* def_cfa_sf */
			if (!rd_reg(&r))
				return "CFI register number out of range";
			ok = rd_sleb(&r, &s);
			break;
		case 0x13: /* def_cfa_offset_sf */
			ok = rd_sleb(&r, &s);
			break;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			if (!rd_reg(&r))
				return "CFI register number out of range";
			/* fall through */
		case 0x0f: /* def_cfa_expression */
			if (!rd_uleb(&r, &u) || u > r.end - r.pos)
				return "CFI expression leaves the record";
			block = r.pos;
			r.pos += (size_t)u;
			{
				const char *why =
					check_expression(data, block, r.pos);
				if (why)
					return why;
			}
			ok = true;
			break;
		default:
			/* val_offset(_sf), which libunwind skips without
			 * its operands, and everything it refuses.  */
			return "CFI instruction libunwind does not know";
		}
		if (!ok)
			return "CFI instruction cut short";
	}
	return NULL;
}
