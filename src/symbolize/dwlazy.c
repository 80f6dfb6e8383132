/* A separate debug file's DWARF read by compile unit (dwlazy.h).  */
#include "symbolize/dwlazy.h"

#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK (64 * 1024)
/* Past this many sections the file is not one we know.  */
#define MAX_SECTIONS 4096
/* Sizes a debug file (the target's to choose) may claim: its inflated
 * .debug_aranges, held in memory, and the image, a sparse file.  */
#define MAX_ARANGES_BYTES (64u << 20)
#define MAX_IMAGE_BYTES (4ull << 30)

struct section {
	Elf64_Shdr shdr;             /* as in the file */
	char name[32];               /* "" when longer */
	bool compressed;             /* SHF_COMPRESSED, zlib */
	uint64_t size;               /* in the image (inflated) */
	uint64_t align;
	uint64_t out_off;            /* in the image */
};

struct arange {
	uint64_t start, end;         /* file addresses */
	uint64_t unit;               /* .debug_info offset */
};

struct cp_dwlazy {
	int fd;                      /* the debug file (ours) */
	Elf64_Ehdr ehdr;
	unsigned char *phdrs;        /* e_phnum * e_phentsize bytes */
	struct section *sections;
	size_t nsections;
	size_t info, aranges;        /* indexes of .debug_info, _aranges */
	unsigned char *aranges_data; /* .debug_aranges, inflated */
	uint64_t aranges_size;
	struct arange *ranges;       /* sorted by start */
	size_t nranges;
	uint64_t *units;             /* the units asked for, sorted */
	uint64_t *unit_ends;         /* their ends, 0 until known */
	size_t nunits, units_cap;
	bool broken;                 /* cp_dwlazy_image fails for good */
	uint64_t images;
};

static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

static bool write_at(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

/* Inflate section SEC, passing each piece of its contents to SINK with
 * its offset in the section, until SINK returns false.  False when the
 * data is corrupt or cannot be read.  */
typedef bool sink_fn(void *arg, uint64_t pos, const unsigned char *data,
		     size_t len);

static bool inflate_section(const struct cp_dwlazy *z,
			    const struct section *sec, sink_fn *sink,
			    void *arg)
{
	unsigned char *in = malloc(CHUNK), *out = malloc(CHUNK);
	z_stream zs = {0};
	bool ok = in && out && inflateInit(&zs) == Z_OK;
	if (!ok) {
		free(in);
		free(out);
		return false;
	}
	uint64_t in_pos = sizeof(Elf64_Chdr), pos = 0;
	int rc = Z_OK;
	while (ok && rc != Z_STREAM_END) {
		if (zs.avail_in == 0) {
			uint64_t left = sec->shdr.sh_size - in_pos;
			size_t n = left < CHUNK ? (size_t)left : CHUNK;
			if (n == 0 ||
			    !read_at(z->fd, in, n, sec->shdr.sh_offset + in_pos)) {
				ok = false;
				break;
			}
			in_pos += n;
			zs.next_in = in;
			zs.avail_in = (uInt)n;
		}
		zs.next_out = out;
		zs.avail_out = CHUNK;
		rc = inflate(&zs, Z_NO_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END) {
			ok = false;
			break;
		}
		size_t got = CHUNK - zs.avail_out;
		if (pos + got > sec->size) {
			ok = false;
			break;
		}
		if (got > 0 && !sink(arg, pos, out, got))
			break;
		pos += got;
	}
	inflateEnd(&zs);
	free(in);
	free(out);
	return ok;
}

/* ------------------------------------------------------------ opening */

static bool buffer_sink(void *arg, uint64_t pos, const unsigned char *data,
			size_t len)
{
	memcpy((unsigned char *)arg + pos, data, len);
	return true;
}

static int compare_ranges(const void *a, const void *b)
{
	const struct arange *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static uint64_t get(const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* The address ranges of .debug_aranges (Z->aranges_data).  */
static bool parse_aranges(struct cp_dwlazy *z)
{
	const unsigned char *d = z->aranges_data;
	uint64_t size = z->aranges_size, off = 0;
	size_t cap = 0;
	while (off + 12 <= size) {
		uint64_t len = get(d + off, 4);
		if (len >= 0xfffffff0u || off + 4 + len > size)
			return false;
		uint64_t end = off + 4 + len;
		unsigned version = (unsigned)get(d + off + 4, 2);
		uint64_t unit = get(d + off + 6, 4);
		unsigned asize = d[off + 10], ssize = d[off + 11];
		if (version != 2 || asize != 8 || ssize != 0)
			return false;
		/* Tuples start at a multiple of twice the address size.  */
		uint64_t p = off + 12;
		p = off + ((p - off + 15) / 16) * 16;
		for (; p + 16 <= end; p += 16) {
			uint64_t start = get(d + p, 8), length = get(d + p + 8, 8);
			if (start == 0 && length == 0)
				break;
			if (z->nranges == cap) {
				cap = cap ? cap * 2 : 256;
				struct arange *grown = realloc(
					z->ranges, cap * sizeof(*grown));
				if (!grown)
					return false;
				z->ranges = grown;
			}
			z->ranges[z->nranges++] = (struct arange){
				start, start + length, unit};
		}
		off = end;
	}
	if (z->nranges > 1)
		qsort(z->ranges, z->nranges, sizeof(*z->ranges),
		      compare_ranges);
	return true;
}

int cp_dwlazy_open(int fd, struct cp_dwlazy **out)
{
	struct cp_dwlazy *z = calloc(1, sizeof(*z));
	if (!z)
		return -1;
	z->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	z->info = z->aranges = SIZE_MAX;
	Elf64_Ehdr *e = &z->ehdr;
	if (z->fd < 0 || !read_at(z->fd, e, sizeof(*e), 0) ||
	    memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 ||
	    e->e_ident[EI_CLASS] != ELFCLASS64 ||
	    e->e_ident[EI_DATA] != ELFDATA2LSB ||
	    e->e_shentsize != sizeof(Elf64_Shdr) || e->e_shnum == 0 ||
	    e->e_shnum > MAX_SECTIONS || e->e_shstrndx >= e->e_shnum ||
	    (e->e_phnum > 0 && e->e_phentsize != sizeof(Elf64_Phdr)))
		goto fail;
	z->phdrs = malloc((size_t)e->e_phnum * sizeof(Elf64_Phdr) + 1);
	z->nsections = e->e_shnum;
	z->sections = calloc(z->nsections, sizeof(*z->sections));
	if (!z->phdrs || !z->sections ||
	    !read_at(z->fd, z->phdrs, (size_t)e->e_phnum * sizeof(Elf64_Phdr),
		     e->e_phoff))
		goto fail;
	for (size_t i = 0; i < z->nsections; i++)
		if (!read_at(z->fd, &z->sections[i].shdr, sizeof(Elf64_Shdr),
			     e->e_shoff + i * sizeof(Elf64_Shdr)))
			goto fail;
	const Elf64_Shdr *strs = &z->sections[e->e_shstrndx].shdr;
	for (size_t i = 0; i < z->nsections; i++) {
		struct section *s = &z->sections[i];
		s->size = s->shdr.sh_size;
		s->align = s->shdr.sh_addralign;
		if (s->shdr.sh_name < strs->sh_size &&
		    !read_at(z->fd, s->name, sizeof(s->name) - 1,
			     strs->sh_offset + s->shdr.sh_name))
			memset(s->name, 0, sizeof(s->name));
		if (strnlen(s->name, sizeof(s->name)) == sizeof(s->name) - 1)
			s->name[0] = '\0';
		if (strncmp(s->name, ".zdebug", 7) == 0 ||
		    strcmp(s->name, ".debug_types") == 0 ||
		    strcmp(s->name, ".gnu_debugaltlink") == 0 ||
		    strcmp(s->name, ".debug_sup") == 0)
			goto fail;
		if (s->shdr.sh_type != SHT_NOBITS &&
		    (s->shdr.sh_flags & SHF_COMPRESSED)) {
			Elf64_Chdr ch;
			if (s->shdr.sh_size < sizeof(ch) ||
			    !read_at(z->fd, &ch, sizeof(ch), s->shdr.sh_offset) ||
			    ch.ch_type != ELFCOMPRESS_ZLIB)
				goto fail;
			s->compressed = true;
			s->size = ch.ch_size;
			s->align = ch.ch_addralign;
			if (s->size > MAX_IMAGE_BYTES)
				goto fail;
		}
		if (s->align > 65536 ||
		    (s->shdr.sh_type != SHT_NOBITS && s->size > MAX_IMAGE_BYTES))
			goto fail;
		if (strcmp(s->name, ".debug_info") == 0)
			z->info = i;
		if (strcmp(s->name, ".debug_aranges") == 0)
			z->aranges = i;
	}
	/* Worth it, and what it knows how to read: units apart only when
	 * .debug_info is compressed.  */
	if (z->info == SIZE_MAX || z->aranges == SIZE_MAX ||
	    !z->sections[z->info].compressed)
		goto fail;
	struct section *ar = &z->sections[z->aranges];
	if (ar->size > MAX_ARANGES_BYTES)
		goto fail;
	z->aranges_size = ar->size;
	z->aranges_data = malloc(ar->size + 1);
	if (!z->aranges_data)
		goto fail;
	if (ar->compressed ? !inflate_section(z, ar, buffer_sink,
					      z->aranges_data)
			   : !read_at(z->fd, z->aranges_data, ar->size,
				      ar->shdr.sh_offset))
		goto fail;
	if (!parse_aranges(z))
		goto fail;
	*out = z;
	return 0;
fail:
	cp_dwlazy_free(z);
	return -1;
}

void cp_dwlazy_free(struct cp_dwlazy *z)
{
	if (!z)
		return;
	if (z->fd >= 0)
		close(z->fd);
	free(z->phdrs);
	free(z->sections);
	free(z->aranges_data);
	free(z->ranges);
	free(z->units);
	free(z->unit_ends);
	free(z);
}

int64_t cp_dwlazy_unit(const struct cp_dwlazy *z, uint64_t addr)
{
	/* The last range starting at or before ADDR; ranges of different
	 * units do not overlap in a sane file, but look back a little.  */
	size_t lo = 0, hi = z->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->ranges[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0 && lo - i <= 64;)
		if (addr < z->ranges[i].end)
			return (int64_t)z->ranges[i].unit;
	return -1;
}

static size_t unit_index(const struct cp_dwlazy *z, uint64_t offset)
{
	size_t lo = 0, hi = z->nunits;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->units[mid] < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool cp_dwlazy_has(const struct cp_dwlazy *z, uint64_t offset)
{
	size_t i = unit_index(z, offset);
	return i < z->nunits && z->units[i] == offset;
}

int cp_dwlazy_add(struct cp_dwlazy *z, uint64_t offset)
{
	if (cp_dwlazy_has(z, offset))
		return 0;
	if (z->nunits == z->units_cap) {
		size_t cap = z->units_cap ? z->units_cap * 2 : 16;
		uint64_t *u = realloc(z->units, cap * sizeof(*u));
		if (u)
			z->units = u;
		uint64_t *e = realloc(z->unit_ends, cap * sizeof(*e));
		if (e)
			z->unit_ends = e;
		if (!u || !e)
			return -1;
		z->units_cap = cap;
	}
	size_t i = unit_index(z, offset);
	memmove(z->units + i + 1, z->units + i,
		(z->nunits - i) * sizeof(*z->units));
	memmove(z->unit_ends + i + 1, z->unit_ends + i,
		(z->nunits - i) * sizeof(*z->unit_ends));
	z->units[i] = offset;
	z->unit_ends[i] = 0;
	z->nunits++;
	return 0;
}

void cp_dwlazy_stats(const struct cp_dwlazy *z, uint64_t *units,
		     uint64_t *images)
{
	*units = z->nunits;
	*images = z->images;
}

/* -------------------------------------------------------------- images */

/* Writing an inflated section into the image at BASE, whole or (for
 * .debug_info) only the units asked for.  */
struct writer {
	struct cp_dwlazy *z;
	int out;
	uint64_t base;
	bool units_only;
	size_t next;                 /* units_only: the unit being copied */
	unsigned char header[4];     /* its unit_length, as it comes */
	bool failed;
};

static bool write_sink(void *arg, uint64_t pos, const unsigned char *data,
		       size_t len)
{
	struct writer *w = arg;
	if (!w->units_only) {
		if (!write_at(w->out, data, len, w->base + pos))
			w->failed = true;
		return !w->failed;
	}
	struct cp_dwlazy *z = w->z;
	uint64_t end = pos + len;
	while (w->next < z->nunits) {
		uint64_t start = z->units[w->next];
		if (start >= end)
			return true;            /* next piece */
		/* The unit's length: its first 4 bytes, maybe split.  */
		for (uint64_t p = start; p < start + 4; p++)
			if (p >= pos && p < end)
				w->header[p - start] = data[p - pos];
		if (start + 4 > end)
			return true;
		uint64_t length = get(w->header, 4);
		if (length >= 0xfffffff0u) {
			w->failed = true;       /* 64-bit DWARF */
			return false;
		}
		uint64_t unit_end = start + 4 + length;
		z->unit_ends[w->next] = unit_end;
		uint64_t from = start > pos ? start : pos;
		uint64_t to = unit_end < end ? unit_end : end;
		if (from < to &&
		    !write_at(w->out, data + (from - pos), to - from,
			      w->base + from)) {
			w->failed = true;
			return false;
		}
		if (unit_end > end)
			return true;            /* the rest in the next piece */
		w->next++;
	}
	return false;                           /* every unit copied */
}

static uint64_t uleb(const unsigned char *p, const unsigned char *end,
		     const unsigned char **next)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (p < end) {
		unsigned char b = *p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	*next = p;
	return v;
}

/* Does the abbreviation table at OFFSET of .debug_abbrev (as written in
 * the image OUT) let a unit refer only into itself and the shared
 * sections?  */
static bool abbrevs_local(const struct cp_dwlazy *z, int out,
			  const struct section *abbrev, uint64_t offset,
			  uint64_t *length)
{
	if (offset >= abbrev->size)
		return false;
	uint64_t left = abbrev->size - offset;
	size_t n = left < 4 * CHUNK ? (size_t)left : 4 * CHUNK;
	unsigned char *buf = malloc(n);
	if (!buf || !read_at(out, buf, n, abbrev->out_off + offset)) {
		free(buf);
		return false;
	}
	(void)z;
	const unsigned char *p = buf, *end = buf + n;
	bool ok = false;
	for (;;) {
		if (p >= end)
			break;          /* longer than we read: say no */
		uint64_t code = uleb(p, end, &p);
		if (code == 0) {
			ok = true;
			*length = (uint64_t)(p - buf);
			break;
		}
		uint64_t tag = uleb(p, end, &p);
		if (tag == DW_TAG_imported_unit || p >= end)
			break;
		p++;                    /* children */
		bool bad = false;
		for (;;) {
			uint64_t attr = uleb(p, end, &p);
			uint64_t form = uleb(p, end, &p);
			if (p >= end) {
				bad = true;
				break;
			}
			if (attr == 0 && form == 0)
				break;
			if (form == DW_FORM_implicit_const)
				uleb(p, end, &p);       /* an SLEB: same bytes */
			if (form == DW_FORM_ref_addr ||
			    form == DW_FORM_ref_sig8 ||
			    form == DW_FORM_ref_sup4 ||
			    form == DW_FORM_ref_sup8 ||
			    form == DW_FORM_strp_sup ||
			    form == DW_FORM_GNU_ref_alt ||
			    form == DW_FORM_GNU_strp_alt ||
			    form == DW_FORM_indirect)
				bad = true;
		}
		if (bad)
			break;
	}
	free(buf);
	return ok;
}

/* The size of an attribute value of FORM at P (before END) in a unit of
 * ADDRESS_SIZE and 32-bit offsets, or -1 when unknown here.  */
static int64_t form_size(uint64_t form, const unsigned char *p,
			 const unsigned char *end, unsigned address_size)
{
	const unsigned char *next;
	uint64_t n;
	switch (form) {
	case DW_FORM_flag_present: case DW_FORM_implicit_const:
		return 0;
	case DW_FORM_data1: case DW_FORM_ref1: case DW_FORM_flag:
	case DW_FORM_strx1: case DW_FORM_addrx1:
		return 1;
	case DW_FORM_data2: case DW_FORM_ref2: case DW_FORM_strx2:
	case DW_FORM_addrx2:
		return 2;
	case DW_FORM_strx3: case DW_FORM_addrx3:
		return 3;
	case DW_FORM_data4: case DW_FORM_ref4: case DW_FORM_strp:
	case DW_FORM_line_strp: case DW_FORM_sec_offset: case DW_FORM_strx4:
	case DW_FORM_addrx4:
		return 4;
	case DW_FORM_data8: case DW_FORM_ref8:
		return 8;
	case DW_FORM_data16:
		return 16;
	case DW_FORM_addr:
		return address_size;
	case DW_FORM_udata: case DW_FORM_sdata: case DW_FORM_ref_udata:
	case DW_FORM_strx: case DW_FORM_addrx: case DW_FORM_loclistx:
	case DW_FORM_rnglistx: case DW_FORM_GNU_addr_index:
	case DW_FORM_GNU_str_index:
		uleb(p, end, &next);
		return next - p;
	case DW_FORM_string:
		next = memchr(p, 0, (size_t)(end - p));
		return next ? next - p + 1 : -1;
	case DW_FORM_block1:
		return p < end ? 1 + (int64_t)p[0] : -1;
	case DW_FORM_block2:
		return end - p >= 2 ? 2 + (int64_t)get(p, 2) : -1;
	case DW_FORM_block4:
		return end - p >= 4 ? 4 + (int64_t)get(p, 4) : -1;
	case DW_FORM_block: case DW_FORM_exprloc:
		n = uleb(p, end, &next);
		return (next - p) + (int64_t)n;
	default:
		return -1;
	}
}

/* The DW_AT_stmt_list of the unit at OFFSET of .debug_info (as written
 * in the image OUT), whose abbreviations are at ABBREV_OFF, or -1 when
 * it has none or it cannot be read here.  */
static int64_t unit_stmt_list(int out, const struct section *info,
			      const struct section *abbrev, uint64_t offset,
			      unsigned version, uint64_t abbrev_off,
			      uint64_t abbrev_len)
{
	unsigned char die[4096], *table = malloc(abbrev_len + 1);
	uint64_t header = version >= 5 ? 12 : 11;
	unsigned address_size = 8;
	int64_t result = -1;
	if (!table || !read_at(out, table, abbrev_len,
			       abbrev->out_off + abbrev_off) ||
	    !read_at(out, die, sizeof(die), info->out_off + offset)) {
		free(table);
		return -1;
	}
	address_size = version >= 5 ? die[7] : die[10];
	const unsigned char *p = die + header, *end = die + sizeof(die);
	uint64_t code = uleb(p, end, &p);
	/* Its abbreviation...  */
	const unsigned char *a = table, *aend = table + abbrev_len;
	while (code != 0 && a < aend) {
		uint64_t c = uleb(a, aend, &a);
		if (c == 0)
			break;
		uleb(a, aend, &a);              /* tag */
		a++;                            /* children */
		if (c == code)
			break;
		for (;;) {
			uint64_t attr = uleb(a, aend, &a);
			uint64_t form = uleb(a, aend, &a);
			if (a >= aend || (attr == 0 && form == 0))
				break;
			if (form == DW_FORM_implicit_const)
				uleb(a, aend, &a);
		}
	}
	/* ...then the unit DIE's values, to DW_AT_stmt_list.  */
	while (code != 0 && a < aend && p < end) {
		uint64_t attr = uleb(a, aend, &a);
		uint64_t form = uleb(a, aend, &a);
		if (attr == 0 && form == 0)
			break;
		if (form == DW_FORM_implicit_const)
			uleb(a, aend, &a);
		if (attr == DW_AT_stmt_list) {
			if ((form == DW_FORM_sec_offset || form == DW_FORM_data4) &&
			    end - p >= 4)
				result = (int64_t)get(p, 4);
			break;
		}
		int64_t size = form_size(form, p, end, address_size);
		if (size < 0 || size > end - p)
			break;
		p += size;
	}
	free(table);
	return result;
}

struct keep {
	uint64_t start, end;
};

static int compare_keeps(const void *a, const void *b)
{
	const struct keep *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Of section SEC as written whole in the image OUT, keep only KEEPS:
 * the whole pages between them are given back (holes read as zeros).  */
static void keep_only(int out, const struct section *sec, struct keep *keeps,
		      size_t n)
{
	const uint64_t page = 4096;
	if (n > 1) /* KEEPS may be NULL when N is 0 (qsort's is nonnull) */
		qsort(keeps, n, sizeof(*keeps), compare_keeps);
	uint64_t from = 0;
	for (size_t i = 0; i <= n; i++) {
		uint64_t to = i < n ? keeps[i].start : sec->size;
		uint64_t lo = (sec->out_off + from + page - 1) / page * page;
		uint64_t hi = (sec->out_off + to) / page * page;
		if (to > from && hi > lo)
			fallocate(out, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (off_t)lo, (off_t)(hi - lo));
		if (i < n && keeps[i].end > from)
			from = keeps[i].end;
	}
}

/* An empty unit filling .debug_info from START to END (>= 12 bytes: a
 * gap is at least one unit): a DWARF 5 compile unit header and zeros,
 * which libdw reads as a unit without DIEs.  */
static bool write_filler(int out, uint64_t base, uint64_t start,
			 uint64_t end)
{
	unsigned char h[12] = {0};
	uint64_t length = end - start - 4;
	for (int i = 0; i < 4; i++)
		h[i] = (unsigned char)(length >> (8 * i));
	h[4] = 5;                       /* version */
	h[6] = DW_UT_compile;
	h[7] = 8;                       /* address size */
	return end - start >= sizeof(h) && length < 0xfffffff0u &&
	       write_at(out, h, sizeof(h), base + start);
}

/* The .debug_aranges of the image: the sets of the units asked for.  */
static bool write_aranges(const struct cp_dwlazy *z, int out,
			  const struct section *sec, uint64_t *size)
{
	const unsigned char *d = z->aranges_data;
	uint64_t off = 0, at = 0;
	while (off + 12 <= z->aranges_size) {
		uint64_t end = off + 4 + get(d + off, 4);
		if (cp_dwlazy_has(z, get(d + off + 6, 4))) {
			if (!write_at(out, d + off, end - off,
				      sec->out_off + at))
				return false;
			at += end - off;
		}
		off = end;
	}
	*size = at;
	return true;
}

int cp_dwlazy_image(struct cp_dwlazy *z)
{
	if (z->broken)
		return -1;
	int out = memfd_create("cprof-debuginfo", MFD_CLOEXEC);
	if (out < 0)
		return -1;
	/* Layout: the ELF header, the program headers, the sections in
	 * their order (inflated sizes), the section headers.  */
	uint64_t at = sizeof(Elf64_Ehdr) +
		      (uint64_t)z->ehdr.e_phnum * sizeof(Elf64_Phdr);
	for (size_t i = 1; i < z->nsections; i++) {
		struct section *s = &z->sections[i];
		uint64_t align = s->align > 8 ? s->align : 8;
		at = (at + align - 1) / align * align;
		s->out_off = at;
		if (s->shdr.sh_type != SHT_NOBITS)
			at += s->size;
	}
	at = (at + 7) / 8 * 8;
	if (at > MAX_IMAGE_BYTES) {
		close(out);
		z->broken = true;
		return -1;
	}
	uint64_t shoff = at;
	at += z->nsections * sizeof(Elf64_Shdr);
	bool ok = ftruncate(out, (off_t)at) == 0;
	const struct section *abbrev = NULL, *line = NULL;
	/* Everything but .debug_info first (its units' abbreviations are
	 * checked in .debug_abbrev as written).  */
	for (size_t i = 1; ok && i < z->nsections; i++) {
		struct section *s = &z->sections[i];
		if (s->shdr.sh_type == SHT_NOBITS || i == z->info ||
		    i == z->aranges || s->size == 0)
			continue;
		if (strcmp(s->name, ".debug_abbrev") == 0)
			abbrev = s;
		if (strcmp(s->name, ".debug_line") == 0)
			line = s;
		/* Location lists: never read by a symbolizer.  */
		if (strcmp(s->name, ".debug_loclists") == 0 ||
		    strcmp(s->name, ".debug_loc") == 0)
			continue;
		if (s->compressed) {
			struct writer w = {.z = z, .out = out,
					   .base = s->out_off};
			ok = inflate_section(z, s, write_sink, &w) && !w.failed;
		} else {
			/* Copied as it is, a piece at a time.  */
			unsigned char *buf = malloc(CHUNK);
			ok = buf != NULL;
			for (uint64_t p = 0; ok && p < s->size; p += CHUNK) {
				size_t n = s->size - p < CHUNK
						   ? (size_t)(s->size - p)
						   : CHUNK;
				ok = read_at(z->fd, buf, n,
					     s->shdr.sh_offset + p) &&
				     write_at(out, buf, n, s->out_off + p);
			}
			free(buf);
		}
	}
	/* .debug_info: the units asked for, and empty units between.  */
	struct section *info = &z->sections[z->info];
	if (ok && z->nunits > 0) {
		struct writer w = {.z = z, .out = out, .base = info->out_off,
				   .units_only = true};
		inflate_section(z, info, write_sink, &w);
		ok = !w.failed && w.next == z->nunits;
		uint64_t prev = 0;
		for (size_t i = 0; ok && i < z->nunits; i++) {
			if (z->units[i] < prev || z->unit_ends[i] > info->size) {
				ok = false;
				break;
			}
			if (z->units[i] > prev)
				ok = write_filler(out, info->out_off, prev,
						  z->units[i]);
			prev = z->unit_ends[i];
		}
		/* Each unit's header: version 2 to 5, and abbreviations
		 * that keep it to itself.  Of .debug_abbrev and .debug_line
		 * only the units' tables are kept (when each is found).  */
		struct keep *abbrevs = calloc(z->nunits + 1, sizeof(*abbrevs));
		struct keep *lines = calloc(z->nunits + 1, sizeof(*lines));
		bool lines_known = lines && line;
		for (size_t i = 0; ok && i < z->nunits; i++) {
			unsigned char h[12];
			ok = read_at(out, h, sizeof(h),
				     info->out_off + z->units[i]);
			unsigned version = ok ? (unsigned)get(h + 4, 2) : 0;
			uint64_t abbrev_off = version >= 5 ? get(h + 8, 4)
							   : get(h + 6, 4);
			uint64_t abbrev_len = 0;
			ok = ok && version >= 2 && version <= 5 &&
			     (version < 5 || h[6] == DW_UT_compile) && abbrev &&
			     abbrevs_local(z, out, abbrev, abbrev_off,
					   &abbrev_len);
			if (ok && abbrevs)
				abbrevs[i] = (struct keep){
					abbrev_off, abbrev_off + abbrev_len};
			int64_t stmt = !ok || !lines_known ? -1
				: unit_stmt_list(out, info, abbrev, z->units[i],
						 version, abbrev_off, abbrev_len);
			unsigned char len[4];
			if (stmt >= 0 && (uint64_t)stmt + 4 <= line->size &&
			    read_at(out, len, 4, line->out_off + (uint64_t)stmt) &&
			    get(len, 4) < 0xfffffff0u)
				lines[i] = (struct keep){
					(uint64_t)stmt,
					(uint64_t)stmt + 4 + get(len, 4)};
			else
				lines_known = false;
		}
		if (ok && abbrevs)
			keep_only(out, abbrev, abbrevs, z->nunits);
		if (ok && lines_known)
			keep_only(out, line, lines, z->nunits);
		free(abbrevs);
		free(lines);
	}
	if (ok && z->nunits == 0) {
		/* No unit yet: no abbreviations or line tables either.  */
		if (abbrev)
			keep_only(out, abbrev, NULL, 0);
		if (line)
			keep_only(out, line, NULL, 0);
	}
	uint64_t aranges_size = 0;
	if (ok)
		ok = write_aranges(z, out, &z->sections[z->aranges],
				   &aranges_size);
	/* The headers.  */
	Elf64_Ehdr e = z->ehdr;
	e.e_phoff = e.e_phnum ? sizeof(Elf64_Ehdr) : 0;
	e.e_shoff = shoff;
	if (ok)
		ok = write_at(out, &e, sizeof(e), 0) &&
		     write_at(out, z->phdrs,
			      (size_t)e.e_phnum * sizeof(Elf64_Phdr),
			      sizeof(Elf64_Ehdr));
	for (size_t i = 0; ok && i < z->nsections; i++) {
		const struct section *s = &z->sections[i];
		Elf64_Shdr sh = s->shdr;
		if (i > 0) {
			sh.sh_offset = s->out_off;
			sh.sh_size = i == z->aranges ? aranges_size : s->size;
			sh.sh_addralign = s->align;
			sh.sh_flags &= ~(uint64_t)SHF_COMPRESSED;
		}
		ok = write_at(out, &sh, sizeof(sh), shoff + i * sizeof(sh));
	}
	if (!ok) {
		close(out);
		z->broken = true;
		return -1;
	}
	z->images++;
	return out;
}
