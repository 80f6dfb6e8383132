/* Unwind tables checked for libunwind: see include/cprof/ehframe.h.
 * The records (CIEs, FDEs) and the table are here, their call frame
 * instructions are checked in cfi.c, .eh_frame_hdr and ELF section
 * headers in ehframe_hdr.c.
 *
 * What is accepted mirrors what libunwind 1.6 (src/dwarf/Gfde.c) reads,
 * byte for byte: a record accepted here is one libunwind parses the way
 * it was written, within the record.  Where libunwind would read
 * something differently than written (a CIE augmentation it does not
 * know, an augmentation size that disagrees with its contents), the
 * record is refused.  */
#include "cprof/ehframe.h"

#include <stdlib.h>
#include <string.h>

#include "unwind/cfi.h"
#include "cprof/error.h"

/* libunwind keeps the first four characters of an augmentation.  */
#define MAX_AUGMENTATION 4
/* Sections larger than this are refused: the rewritten records keep
 * 32-bit lengths.  */
#define MAX_SECTION (1u << 30)

/* ------------------------------------------------------ records */

/* One record (CIE or FDE) found by walking the section.  */
struct record {
	size_t off;     /* its first byte (the length) */
	size_t id_off;  /* its CIE id / CIE pointer field */
	size_t body;    /* the byte after that field */
	size_t end;     /* the byte after the record */
	uint64_t id;    /* CIE id or CIE pointer */
	bool is64;      /* 64-bit DWARF format */
};

struct cie {
	size_t off, end;
	size_t instr;          /* first initial instruction */
	uint8_t version;
	uint8_t fde_enc, lsda_enc;
	bool z;                /* 'z': sized augmentation */
	bool signal;           /* 'S': signal frame (libunwind then reads
				* two 16-bit words after the LSDA) */
	uint64_t code_align, ret_col;
	int64_t data_align;
	const char *problem;   /* NULL when usable */
	size_t image_off;      /* DEBUG: its place in the image, or
				* SIZE_MAX when not written yet */
};

struct cp_ehframe_table {
	struct cp_ehframe_fde *fdes;
	size_t count;
	uint8_t *image;
	size_t image_size;
	uint64_t image_addr;
	struct cp_ehframe_stats stats;
};

static void note(struct cp_ehframe_stats *st, const char *why, size_t off)
{
	if (!st->problem) {
		st->problem = why;
		st->problem_offset = off;
	}
}

/* Parse the CIE record REC of IN into C.  */
static void parse_cie(const struct cp_ehframe_input *in,
		      const struct record *rec, struct cie *c)
{
	bool debug = in->kind == CP_EHFRAME_DEBUG;
	struct rd r = {in->data, rec->body, rec->end};
	memset(c, 0, sizeof(*c));
	c->off = rec->off;
	c->end = rec->end;
	c->image_off = SIZE_MAX;
	c->fde_enc = PE_UDATA8;   /* libunwind's default: address-sized */
	c->lsda_enc = PE_OMIT;
	c->problem = "CIE cut short";
	if (!rd_u8(&r, &c->version))
		return;
	if (c->version != 1 && c->version != 3 &&
	    !(debug && c->version == 4)) {
		c->problem = "CIE version libunwind does not read";
		return;
	}
	char aug[MAX_AUGMENTATION + 1];
	size_t aug_len = 0;
	for (;;) {
		uint8_t ch;
		if (!rd_u8(&r, &ch))
			return;
		if (ch == 0)
			break;
		if (aug_len == MAX_AUGMENTATION) {
			c->problem = "CIE augmentation too long";
			return;
		}
		aug[aug_len++] = (char)ch;
	}
	aug[aug_len] = 0;
	if (aug_len > 0 && (debug || aug[0] != 'z')) {
		c->problem = "CIE augmentation libunwind does not read";
		return;
	}
	if (c->version == 4) {
		uint8_t address_size, segment_size;
		if (!rd_u8(&r, &address_size) || !rd_u8(&r, &segment_size))
			return;
		if (address_size != 8 || segment_size != 0) {
			c->problem = "CIE address or segment size not 8/0";
			return;
		}
	}
	if (!rd_uleb(&r, &c->code_align) || !rd_sleb(&r, &c->data_align))
		return;
	if (c->version == 1) {
		uint8_t col;
		if (!rd_u8(&r, &col))
			return;
		c->ret_col = col;
	} else if (!rd_uleb(&r, &c->ret_col)) {
		return;
	}
	/* libunwind indexes its register locations with it.  */
	if (c->ret_col >= NUM_REGS) {
		c->problem = "CIE return address column out of range";
		return;
	}
	if (aug_len > 0) {
		uint64_t aug_size;
		c->z = true;
		if (!rd_uleb(&r, &aug_size) || aug_size > r.end - r.pos)
			return;
		size_t aug_end = r.pos + (size_t)aug_size;
		struct rd a = {in->data, r.pos, aug_end};
		for (size_t i = 1; i < aug_len; i++) {
			uint8_t enc;
			uint64_t handler;
			switch (aug[i]) {
			case 'L':
				if (!rd_u8(&a, &c->lsda_enc))
					return;
				if (c->lsda_enc != PE_OMIT &&
				    !encoding_ok(c->lsda_enc, PTR_AUX))
					goto bad_encoding;
				break;
			case 'R':
				if (!rd_u8(&a, &c->fde_enc))
					return;
				if (!encoding_ok(c->fde_enc, PTR_CODE))
					goto bad_encoding;
				break;
			case 'P':
				if (!rd_u8(&a, &enc))
					return;
				if (enc == PE_OMIT)
					break;
				if (!encoding_ok(enc, PTR_AUX))
					goto bad_encoding;
				if (!rd_encoded(&a, enc, in->addr, 0, &handler))
					return;
				break;
			case 'S':
				c->signal = true;
				break;
			default:
				c->problem = "CIE augmentation libunwind does not read";
				return;
			}
		}
		/* libunwind starts the instructions where its reading of
		 * the augmentation ended: it must be where the size says.  */
		if (a.pos != aug_end) {
			c->problem = "CIE augmentation size wrong";
			return;
		}
		r.pos = aug_end;
	}
	c->instr = r.pos;
	c->problem = cp_cfi_check(in->data, c->instr, c->end, c->fde_enc,
				  in->addr, debug, NULL, 0);
	return;
bad_encoding:
	c->problem = "CIE pointer encoding libunwind does not read";
}

/* Walk the records of IN from its start: their places into *RECS (N of
 * them).  A zero length ends the walk (the .eh_frame terminator), and so
 * does a length that leaves the section.  Returns false when out of
 * memory.  */
static bool walk_records(const struct cp_ehframe_input *in,
			 struct record **recs, size_t *n, size_t *extent,
			 struct cp_ehframe_stats *st)
{
	size_t cap = 0, pos = 0;
	*recs = NULL;
	*n = 0;
	bool debug = in->kind == CP_EHFRAME_DEBUG;
	while (in->size - pos >= 4) {
		struct rd r = {in->data, pos, in->size};
		struct record rec = {.off = pos};
		uint32_t len32 = 0;
		uint64_t len;
		rd_u32(&r, &len32);
		if (len32 == 0) {
			pos = r.pos;  /* the terminator */
			break;
		}
		if (len32 == 0xffffffff) {
			rec.is64 = true;
			if (!rd_u64(&r, &len)) {
				note(st, "record length cut short", pos);
				break;
			}
		} else if (len32 >= 0xfffffff0) {
			note(st, "record length reserved", pos);
			break;
		} else {
			len = len32;
		}
		if (len > r.end - r.pos) {
			note(st, "record length leaves the section", pos);
			break;
		}
		rec.end = r.pos + (size_t)len;
		rec.id_off = r.pos;
		r.end = rec.end;
		if (rec.is64) {
			if (!rd_u64(&r, &rec.id)) {
				note(st, "record cut short", pos);
				pos = rec.end;
				continue;
			}
		} else {
			uint32_t id32;
			if (!rd_u32(&r, &id32)) {
				note(st, "record cut short", pos);
				pos = rec.end;
				continue;
			}
			/* An all-ones 32-bit id is the .debug_frame CIE
			 * id; keep it all ones in 64 bits.  */
			rec.id = (debug && id32 == 0xffffffff) ? ~(uint64_t)0
							       : id32;
		}
		rec.body = r.pos;
		if (*n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct record *grown =
				realloc(*recs, ncap * sizeof(**recs));
			if (!grown)
				return false;
			*recs = grown;
			cap = ncap;
		}
		(*recs)[(*n)++] = rec;
		pos = rec.end;
	}
	*extent = pos;
	return true;
}

static bool is_cie(const struct cp_ehframe_input *in,
		   const struct record *rec)
{
	if (in->kind == CP_EHFRAME_DEBUG)
		return rec->id == ~(uint64_t)0;
	return rec->id == 0;
}

/* The CIE at offset OFF, by binary search in CIES (sorted by offset).  */
static struct cie *find_cie(struct cie *cies, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cies[mid].off == off)
			return &cies[mid];
		if (cies[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool in_code(const struct cp_ehframe_input *in, uint64_t start,
		    uint64_t end)
{
	for (size_t i = 0; i < in->ncode; i++)
		if (start >= in->code[i].start && end <= in->code[i].end)
			return true;
	return false;
}

/* A checked FDE, before it goes into the table.  */
struct fde_info {
	uint64_t pc_start, pc_end;
	size_t instr;           /* first instruction */
	struct cie *cie;
	const struct record *rec;
};

/* Check the FDE REC of IN.  Returns NULL (and fills F) or the problem.  */
static const char *check_fde(const struct cp_ehframe_input *in,
			     const struct record *rec, struct cie *cies,
			     size_t ncies, struct fde_info *f)
{
	bool debug = in->kind == CP_EHFRAME_DEBUG;
	uint64_t cie_off;
	if (debug) {
		cie_off = rec->id;
	} else {
		/* libunwind: the CIE is at the pointer's address minus
		 * the pointer, read as a signed number.  */
		int64_t delta = rec->is64 ? (int64_t)rec->id
					  : (int64_t)(int32_t)rec->id;
		cie_off = (uint64_t)rec->id_off - (uint64_t)delta;
	}
	struct cie *c = find_cie(cies, ncies, cie_off);
	if (!c)
		return "FDE's CIE pointer does not point at a CIE";
	if (c->problem)
		return c->problem;
	struct rd r = {in->data, rec->body, rec->end};
	uint64_t start, range;
	if (debug) {
		if (!rd_u64(&r, &start) || !rd_u64(&r, &range))
			return "FDE cut short";
		start += in->bias;
	} else {
		if (!rd_encoded(&r, c->fde_enc, in->addr, 0, &start) ||
		    !rd_encoded(&r, c->fde_enc & PE_FORMAT_MASK, in->addr, 0,
				&range))
			return "FDE cut short";
	}
	if (range == 0)
		return "FDE describes no code";
	if (start + range < start)
		return "FDE range wraps";
	if (!in_code(in, start, start + range))
		return "FDE describes code outside the module's code";
	size_t instr;
	if (c->z) {
		uint64_t aug_size, lsda;
		if (!rd_uleb(&r, &aug_size) || aug_size > r.end - r.pos)
			return "FDE augmentation leaves the record";
		size_t aug_end = r.pos + (size_t)aug_size;
		if (c->lsda_enc != PE_OMIT) {
			struct rd a = {in->data, r.pos, aug_end};
			if (!rd_encoded(&a, c->lsda_enc, in->addr, 0, &lsda))
				return "FDE augmentation leaves the record";
		}
		/* libunwind reads two 16-bit words after the LSDA of a
		 * signal frame's FDE (then ignores them).  */
		if (c->signal) {
			struct rd a = {in->data, r.pos, r.end};
			if (c->lsda_enc != PE_OMIT)
				rd_encoded(&a, c->lsda_enc, in->addr, 0, &lsda);
			if (!rd_skip(&a, 4))
				return "FDE cut short";
		}
		instr = aug_end;
	} else {
		instr = r.pos;
	}
	const char *why = cp_cfi_check(in->data, instr, rec->end,
				       c->fde_enc, in->addr, debug, NULL, 0);
	if (why)
		return why;
	f->pc_start = start;
	f->pc_end = start + range;
	f->instr = instr;
	f->cie = c;
	f->rec = rec;
	return NULL;
}

/* ------------------------------------------- .debug_frame rewriting */

/* Room for the rewritten records: each record grows by at most its
 * header change (CIE: id, augmentation; FDE: pointer, addresses) — a
 * generous bound is the section size plus 32 bytes per record.  */

static size_t put_uleb(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		uint8_t byte = v & 0x7f;
		v >>= 7;
		p[n++] = byte | (v ? 0x80 : 0);
	} while (v);
	return n;
}

static size_t put_sleb(uint8_t *p, int64_t v)
{
	size_t n = 0;
	for (;;) {
		uint8_t byte = (uint64_t)v & 0x7f;
		v >>= 7;  /* arithmetic on GCC and Clang */
		bool done = (v == 0 && !(byte & 0x40)) ||
			    (v == -1 && (byte & 0x40));
		p[n++] = byte | (done ? 0 : 0x80);
		if (done)
			return n;
	}
}

/* Write CIE C of IN in .eh_frame form at IMAGE + *POS: version 1 or 3,
 * no augmentation (libunwind's default FDE encoding is then an absolute
 * 8-byte address).  */
static void put_cie(const struct cp_ehframe_input *in, struct cie *c,
		    uint8_t *image, size_t *pos)
{
	uint8_t *p = image + *pos;
	size_t n = 4;          /* the length, below */
	memset(p + n, 0, 4);   /* CIE id 0 */
	n += 4;
	p[n++] = c->version == 1 ? 1 : 3;
	p[n++] = 0;            /* "" */
	n += put_uleb(p + n, c->code_align);
	n += put_sleb(p + n, c->data_align);
	if (c->version == 1)
		p[n++] = (uint8_t)c->ret_col;
	else
		n += put_uleb(p + n, c->ret_col);
	size_t ilen = c->end - c->instr;
	memcpy(p + n, in->data + c->instr, ilen);
	cp_cfi_check(in->data, c->instr, c->end, c->fde_enc, 0, true, p + n,
		     in->bias);
	n += ilen;
	uint32_t len = (uint32_t)(n - 4);
	memcpy(p, &len, 4);
	c->image_off = *pos;
	*pos += n;
}

/* Write the FDE F (record REC) of IN in .eh_frame form at IMAGE + *POS,
 * its CIE first if that is not written yet.  */
static size_t put_fde(const struct cp_ehframe_input *in,
		      const struct record *rec, const struct fde_info *f,
		      uint8_t *image, size_t *pos)
{
	if (f->cie->image_off == SIZE_MAX)
		put_cie(in, f->cie, image, pos);
	size_t at = *pos;
	uint8_t *p = image + at;
	size_t n = 4;
	uint32_t cie_ptr = (uint32_t)(at + 4 - f->cie->image_off);
	memcpy(p + n, &cie_ptr, 4);
	n += 4;
	uint64_t range = f->pc_end - f->pc_start;
	memcpy(p + n, &f->pc_start, 8);
	memcpy(p + n + 8, &range, 8);
	n += 16;
	size_t ilen = rec->end - f->instr;
	memcpy(p + n, in->data + f->instr, ilen);
	cp_cfi_check(in->data, f->instr, rec->end, f->cie->fde_enc, 0, true,
		     p + n, in->bias);
	n += ilen;
	uint32_t len = (uint32_t)(n - 4);
	memcpy(p, &len, 4);
	*pos += n;
	return at;
}

/* -------------------------------------------------------- the table */

static int by_pc(const void *a, const void *b)
{
	const struct fde_info *x = a, *y = b;
	if (x->pc_start != y->pc_start)
		return x->pc_start < y->pc_start ? -1 : 1;
	/* Equal starts: the record first in the section first, so the
	 * choice between them does not depend on qsort.  */
	return x->rec->off < y->rec->off ? -1 : x->rec->off > y->rec->off;
}

int cp_ehframe_table_build(const struct cp_ehframe_input *in,
			   struct cp_ehframe_table **out)
{
	bool debug = in->kind == CP_EHFRAME_DEBUG;
	if (in->size > MAX_SECTION)
		return -CP_E_INVAL;
	struct cp_ehframe_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -CP_E_NOMEM;
	struct cp_ehframe_stats *st = &t->stats;
	struct record *recs = NULL;
	struct cie *cies = NULL;
	struct fde_info *infos = NULL;
	size_t nrecs = 0, extent = 0, ncies = 0, nfdes = 0;
	int rc = -CP_E_NOMEM;
	if (!walk_records(in, &recs, &nrecs, &extent, st))
		goto fail;
	/* Room for the image: as it is (EH), or rewritten (DEBUG: each
	 * record's header grows by less than 32 bytes).  */
	size_t image_cap = extent;
	if (debug) {
		if (nrecs > (SIZE_MAX - extent) / 32)
			goto fail;
		image_cap = extent + 32 * nrecs;
		if (in->image_addr + image_cap < in->image_addr) {
			rc = -CP_E_INVAL;
			goto fail;
		}
	}
	cies = calloc(nrecs ? nrecs : 1, sizeof(*cies));
	infos = calloc(nrecs ? nrecs : 1, sizeof(*infos));
	t->fdes = calloc(nrecs ? nrecs : 1, sizeof(*t->fdes));
	t->image = malloc(image_cap ? image_cap : 1);
	if (!cies || !infos || !t->fdes || !t->image)
		goto fail;
	/* The CIEs first: in .debug_frame an FDE may name a later one.  */
	for (size_t i = 0; i < nrecs; i++) {
		if (!is_cie(in, &recs[i]))
			continue;
		parse_cie(in, &recs[i], &cies[ncies]);
		st->cies++;
		if (cies[ncies].problem) {
			note(st, cies[ncies].problem, recs[i].off);
			st->rejected++;
		}
		ncies++;
	}
	size_t image_size = debug ? 0 : extent;
	if (!debug) {
		memcpy(t->image, in->data, extent);
		t->image_addr = in->addr;
	} else {
		t->image_addr = in->image_addr;
	}
	for (size_t i = 0; i < nrecs; i++) {
		if (is_cie(in, &recs[i]))
			continue;
		st->fdes++;
		const char *why = check_fde(in, &recs[i], cies, ncies,
					    &infos[nfdes]);
		if (why) {
			note(st, why, recs[i].off);
			st->rejected++;
			continue;
		}
		nfdes++;
	}
	/* Sorted, and no two overlapping: of two that overlap the first
	 * is kept (libunwind's own search would find only one too).  Only
	 * the kept ones go into a rewritten image.  */
	qsort(infos, nfdes, sizeof(*infos), by_pc);
	size_t kept = 0;
	for (size_t i = 0; i < nfdes; i++) {
		const struct fde_info *f = &infos[i];
		if (kept > 0 && f->pc_start < t->fdes[kept - 1].pc_end) {
			note(st, "FDE overlaps another", f->rec->off);
			st->rejected++;
			continue;
		}
		size_t at = debug ? put_fde(in, f->rec, f, t->image,
					    &image_size)
				  : f->rec->off;
		t->fdes[kept].pc_start = f->pc_start;
		t->fdes[kept].pc_end = f->pc_end;
		t->fdes[kept].fde_addr = t->image_addr + at;
		kept++;
	}
	t->image_size = image_size;
	t->count = kept;
	st->kept = kept;
	free(recs);
	free(cies);
	free(infos);
	*out = t;
	return 0;
fail:
	free(recs);
	free(cies);
	free(infos);
	cp_ehframe_table_free(t);
	return rc;
}

void cp_ehframe_table_free(struct cp_ehframe_table *table)
{
	if (!table)
		return;
	free(table->fdes);
	free(table->image);
	free(table);
}

const struct cp_ehframe_fde *
cp_ehframe_table_lookup(const struct cp_ehframe_table *table, uint64_t pc)
{
	size_t lo = 0, hi = table->count;
	/* The last FDE starting at or before PC.  */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (table->fdes[mid].pc_start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= table->fdes[lo - 1].pc_end)
		return NULL;
	return &table->fdes[lo - 1];
}

size_t cp_ehframe_table_count(const struct cp_ehframe_table *table)
{
	return table->count;
}

const struct cp_ehframe_fde *
cp_ehframe_table_fde(const struct cp_ehframe_table *table, size_t i)
{
	return i < table->count ? &table->fdes[i] : NULL;
}

void cp_ehframe_table_image(const struct cp_ehframe_table *table,
			    const uint8_t **data, size_t *size,
			    uint64_t *addr)
{
	*data = table->image;
	*size = table->image_size;
	*addr = table->image_addr;
}

void cp_ehframe_table_stats(const struct cp_ehframe_table *table,
			    struct cp_ehframe_stats *stats)
{
	*stats = table->stats;
}
