/* The SVG flame graph writer: a self-contained interactive flame graph
 * (no network, no external script), an icicle graph when inverted, and a
 * differential flame graph against a BEFORE profile.
 *
 * How it is built (the goal: 1,000,000 samples over 100,000 distinct
 * stacks, depth 10-60, in well under a second and 200 MB):
 *
 *   1. Names.  Every distinct frame text (the function name, with "_[i]"
 *      appended to inlined lines exactly as the folded writer does) gets a
 *      rank in strcmp order.  A location's lines find their rank through
 *      an array indexed by (string id, inlined), so no string is hashed or
 *      compared per sample.  In a diff both profiles share one rank space,
 *      so frames are matched by text.
 *   2. Sequences.  Each distinct stack becomes its ranks, root first (leaf
 *      first when inverted); samples of the same stack on other threads
 *      reuse the sequence.
 *   3. The tree.  Sorting the sequences puts stacks with a common prefix
 *      next to each other, in name order, so the merged tree (frames keyed
 *      by their path of names) comes out of one pass in preorder with every
 *      node's children already sorted by name: no hash table and no child
 *      lists.  A node is 16 bytes (count, name rank, depth); a diff adds
 *      the BEFORE count and both self counts in parallel arrays.
 *   4. Output.  One pass keeps the next free x (in samples) per depth and
 *      streams the frames at least MINWIDTH pixels wide with stdio.  A
 *      child is never wider than its parent, so leaving out a narrow frame
 *      leaves out its subtree too.
 *
 * The document, for scripts and browser tests (ids and classes are
 * stable):
 *
 *   #title      <text>: the title
 *   #subtitle   <text>: the colour legend of a differential graph (only
 *               there)
 *   #reset      <text> "Reset zoom"; class "off" while not zoomed
 *   #search     <text> "Search": asks for a regular expression (so do
 *               Ctrl-F and F3); an empty answer clears the search; class
 *               "on" while a search is active
 *   #case       <text> "Aa": the match-case toggle; aria-pressed "true"
 *               (case-sensitive, the default) or "false" (ignore case)
 *   #matched    <text> "Matched: X %" while a search is active (the share
 *               of all samples of the graph under a matching frame, zoomed
 *               or not, a frame inside another matching frame counted
 *               once; frames left out for MINWIDTH cannot match), empty
 *               otherwise
 *   #details    <text>: the hovered frame's title, or the search error
 *   #frames     <g> holding every frame, with data-total (the samples of
 *               the graph), data-unit, data-xpad and data-width (the frame
 *               area in px), data-base (the y of depth 0) and data-step
 *               (y per level: -16 flame graph, 16 icicle), data-fontw (px
 *               per character), data-diff ("1" for a differential graph)
 *   g.frame     one frame, in preorder (the first is the root "all").
 *               data-s: the samples left of it (its x in samples), data-n:
 *               its samples; <title>: "NAME (N UNIT, P%)", for a diff
 *               "NAME (N UNIT, P%; before B; delta +D, +R%; self delta
 *               +S)" (no self delta in an icicle graph; the name is what
 *               precedes the last " ("); <rect> x y width height fill;
 *               <text>: the name cut to fit, ".." marking a cut.
 *               The script adds data-i (the index in window.cprof.frames)
 *               and the classes "anc" (an ancestor of the zoomed frame:
 *               full width, faded), "hide" and "match".
 *   window.cprof  the script's functions: search(pattern), clearSearch(),
 *               zoom(index into frames), reset(), setIgnoreCase(bool),
 *               frames (the parsed frames: name, s, n, d, ...).
 *
 * Inverted (an icicle graph): every stack is reversed before merging, so
 * the leaf functions are merged at the top under the root, their callers
 * below them.
 *
 * Diff colours: a frame's change is in the samples it is the leaf of (its
 * self samples in a flame graph, all of its samples in an icicle graph),
 * AFTER minus BEFORE (scaled by AFTER's total / BEFORE's with NORMALIZE);
 * red grew, blue shrank, the saturation that change over the largest one
 * of the frames present in AFTER; #f5f5f5 for no change.  Frames only in
 * BEFORE have no width and are not drawn.
 *
 * Click a frame to zoom to it (its ancestors stay, full width and faded;
 * click the root, "Reset zoom" or press Escape to go back).  Escape also
 * clears the search.  */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "formats/entries.h"
#include "cprof/profile.h"

#ifndef CP_VERSION
#define CP_VERSION "unknown"
#endif

#define XPAD 10          /* px left and right of the frames */
#define FRAME_H 16       /* px per level */
#define FONT_SIZE 12
#define FONT_WIDTH 0.59  /* average glyph width, in font sizes */
#define HEAD_H 36        /* px above the frames (title, controls) */
#define SUBTITLE_H 16    /* more of it for the diff legend */
#define FOOT_H 34        /* px below the frames (details, matched) */
#define ROOT_NAME "all"
#define NO_NAME UINT32_MAX /* the name rank of the root */

/* ---------------------------------------------------------------- kinds */

/* What a frame is, for the default palette.  */
enum kind { K_USER, K_LIBRARY, K_KERNEL, K_INLINED, K_UNKNOWN };

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* "name+0x1f3" or "libfoo.so+0x1f3": an address nobody could name.  */
static bool is_offset_name(const char *s)
{
	const char *plus = strstr(s, "+0x");
	if (!plus || plus == s)
		return false;
	for (const char *c = plus + 3; *c; c++)
		if (!strchr("0123456789abcdefABCDEF", *c))
			return false;
	return plus[3] != '\0';
}

/* A shared object's basename: "libc.so.6", "ld-linux-x86-64.so.2",
 * "[vdso]".  */
static bool is_shared_object(const char *module)
{
	return strstr(module, ".so") != NULL || strcmp(module, "[vdso]") == 0 ||
	       strcmp(module, "[vsyscall]") == 0;
}

static bool is_kernel_module(const char *module)
{
	return strcmp(module, "[kernel]") == 0 ||
	       strcmp(module, "[kernel.kallsyms]") == 0 ||
	       strcmp(module, "vmlinux") == 0;
}

/* Classify frame TEXT (LEN bytes, "_[i]" already appended to inlined
 * lines) of a location in MODULE ("" when unknown).  The FlameGraph
 * suffixes win; then the name says unknown; then the module.  */
static enum kind classify(const char *text, size_t len, const char *module)
{
	if (ends_with(text, len, "_[k]") || is_kernel_module(module))
		return K_KERNEL;
	if (ends_with(text, len, "_[i]"))
		return K_INLINED;
	if (strncmp(text, "[unknown", 8) == 0 || strncmp(text, "0x", 2) == 0 ||
	    is_offset_name(text))
		return K_UNKNOWN;
	if (*module && is_shared_object(module))
		return K_LIBRARY;
	return K_USER;
}

/* -------------------------------------------------------------- colours */

/* A palette: each channel is BASE + RANGE * v[WHICH], v three numbers in
 * [0, 1) from the name's hash, so a name keeps its colour everywhere.  */
struct channel {
	uint8_t base, range, which;
};

struct palette {
	const char *name;
	struct channel r, g, b;
};

static const struct palette palettes[] = {
	{"hot", {205, 50, 2}, {0, 230, 0}, {0, 55, 1}},
	{"mem", {0, 0, 0}, {190, 50, 1}, {0, 210, 0}},
	{"io", {80, 60, 0}, {80, 60, 0}, {190, 55, 1}},
	{"red", {200, 55, 0}, {0, 80, 0}, {0, 80, 0}},
	{"green", {50, 60, 0}, {200, 55, 0}, {50, 60, 0}},
	{"blue", {80, 60, 0}, {80, 60, 0}, {205, 50, 0}},
	{"yellow", {175, 55, 0}, {175, 55, 0}, {50, 20, 1}},
	{"purple", {190, 65, 0}, {80, 60, 0}, {190, 65, 0}},
	{"aqua", {50, 60, 0}, {165, 55, 0}, {165, 55, 0}},
	{"orange", {190, 65, 0}, {90, 65, 0}, {0, 0, 0}},
	{"gray", {150, 70, 0}, {150, 70, 0}, {150, 70, 0}},
	{"grey", {150, 70, 0}, {150, 70, 0}, {150, 70, 0}},
};

/* The default palette, by kind: user code red, shared libraries yellow,
 * the kernel orange, inlined frames aqua, unknown frames gray (the
 * FlameGraph conventions).  */
static const struct palette kind_palettes[] = {
	[K_USER] = {"user", {205, 50, 0}, {40, 80, 1}, {30, 50, 2}},
	[K_LIBRARY] = {"library", {185, 45, 0}, {180, 45, 0}, {40, 40, 1}},
	[K_KERNEL] = {"kernel", {225, 30, 0}, {125, 45, 0}, {0, 25, 1}},
	[K_INLINED] = {"inlined", {50, 60, 0}, {165, 55, 1}, {165, 55, 1}},
	[K_UNKNOWN] = {"unknown", {160, 50, 0}, {160, 50, 0}, {160, 50, 0}},
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}

static unsigned channel_value(const struct channel *c, const double v[3])
{
	unsigned x = c->base + (unsigned)(c->range * v[c->which]);
	return x > 255 ? 255 : x;
}

static uint32_t palette_rgb(const struct palette *pal, const char *name)
{
	uint64_t h = name_hash(name);
	double v[3] = {
		(double)(h & 0xffff) / 65536.0,
		(double)((h >> 16) & 0xffff) / 65536.0,
		(double)((h >> 32) & 0xffff) / 65536.0,
	};
	return channel_value(&pal->r, v) << 16 |
	       channel_value(&pal->g, v) << 8 | channel_value(&pal->b, v);
}

/* Differential colours: white-ish for no change; red (grew) or blue
 * (shrank) with saturation RATIO, the change relative to the largest.
 * Any change, however small, is told from no change.  */
#define DIFF_NEUTRAL 0xf5f5f5u

/* (libm is not linked: these few are done by hand.)  */
static long double abs_ld(long double x)
{
	return x < 0 ? -x : x;
}

/* PX in tenths of a pixel, rounded half away from zero.  */
static long tenths_of(double px)
{
	return px < 0 ? -(long)(-px * 10.0 + 0.5) : (long)(px * 10.0 + 0.5);
}

static uint32_t diff_rgb(long double delta, long double max_delta)
{
	if (delta == 0 || max_delta <= 0)
		return DIFF_NEUTRAL;
	double ratio = (double)(abs_ld(delta) / max_delta);
	if (ratio > 1)
		ratio = 1;
	unsigned fade = (unsigned)(245.0 * (1.0 - ratio) + 0.5);
	if (fade > 240)
		fade = 240;
	if (delta > 0)
		return 0xff0000u | fade << 8 | fade;
	return fade << 16 | fade << 8 | 0xffu;
}

/* ------------------------------------------------------------- escaping */

/* The length of the valid UTF-8 character XML allows at S (N bytes
 * left), or 0 for a byte to replace.  */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return (c >= 0x20 || c == '\t') && c != 0x7f ? 1 : 0;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp == 0xfffe || cp == 0xffff)
		return 0;
	return len;
}

/* Write N bytes of S as XML character data (attribute-safe too):
 * markup escaped, control characters and malformed UTF-8 as '?'.  */
static void put_xml(FILE *f, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0; /* start of bytes not yet written */
	size_t i = 0;
	while (i < n) {
		const char *entity = NULL;
		switch (u[i]) {
		case '<': entity = "&lt;"; break;
		case '>': entity = "&gt;"; break;
		case '&': entity = "&amp;"; break;
		case '"': entity = "&quot;"; break;
		case '\'': entity = "&apos;"; break;
		default: break;
		}
		size_t len = entity ? 0 : utf8_char(u + i, n - i);
		if (len > 0) {
			i += len;
			continue;
		}
		fwrite(s + run, 1, i - run, f);
		fputs(entity ? entity : "?", f);
		i++;
		run = i;
	}
	fwrite(s + run, 1, n - run, f);
}

static void put_xml_str(FILE *f, const char *s)
{
	put_xml(f, s, strlen(s));
}

/* Write S inside an XML comment: no "--" may appear there and the comment
 * may not end in '-', so a hyphen after a hyphen becomes U+2010 HYPHEN,
 * which reads the same.  Markup needs no escaping in a comment.  */
static void put_comment(FILE *f, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);
	bool hyphen = false;
	for (size_t i = 0; i < n;) {
		size_t len = u[i] == '\n' ? 1 : utf8_char(u + i, n - i);
		if (len == 0) {
			putc('?', f);
			i++;
			hyphen = false;
			continue;
		}
		if (u[i] == '-' && (hyphen || i + 1 == n)) {
			fputs("\xe2\x80\x90", f);
		} else {
			fwrite(s + i, 1, len, f);
			if (u[i] == '\n')
				fputs("     ", f);
		}
		hyphen = u[i] == '-';
		i += len;
	}
}

/* The number of bytes of the first MAX characters of S (N bytes).  */
static size_t utf8_prefix(const char *s, size_t n, size_t max)
{
	size_t i = 0;
	for (size_t chars = 0; i < n && chars < max; chars++) {
		i++;
		while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
			i++;
	}
	return i;
}

static size_t utf8_length(const char *s, size_t n)
{
	size_t chars = 0;
	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)s[i] & 0xc0) != 0x80;
	return chars;
}

/* ------------------------------------------------------------- numbers */

/* V with thousands separators ("1,234,567"), and one decimal when FRAC
 * and V is not whole.  */
static const char *fmt_count(char *buf, size_t size, long double v, bool frac)
{
	char digits[64];
	bool negative = v < 0;
	if (negative)
		v = -v;
	long double whole = (long double)(uint64_t)v;
	if (frac && v - whole >= 0.05L && v - whole < 0.95L)
		snprintf(digits, sizeof(digits), "%.1Lf", v);
	else
		snprintf(digits, sizeof(digits), "%.0Lf", v);
	char *dot = strchr(digits, '.');
	size_t int_len = dot ? (size_t)(dot - digits) : strlen(digits);
	size_t o = 0;
	if (negative && o + 1 < size)
		buf[o++] = '-';
	for (size_t i = 0; i < int_len && o + 2 < size; i++) {
		if (i > 0 && (int_len - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	for (const char *c = dot; c && *c && o + 1 < size; c++)
		buf[o++] = *c;
	buf[o] = '\0';
	return buf;
}

/* TENTHS of a pixel as a decimal ("12.3"), without printf's
 * floating-point path.  */
static void put_tenths(FILE *f, long tenths)
{
	if (tenths < 0) {
		putc('-', f);
		tenths = -tenths;
	}
	fprintf(f, "%ld.%ld", tenths / 10, tenths % 10);
}

static void put_px(FILE *f, double px)
{
	put_tenths(f, tenths_of(px));
}

/* ---------------------------------------------------------------- names */

/* One distinct (function, inlined) key of one profile, before ranking.  */
struct name_entry {
	const char *text;  /* borrowed from the profile, or in OWNED */
	uint32_t len;
	uint8_t kind;
	uint8_t which;     /* 0: the profile written, 1: BEFORE */
	size_t key;        /* function string id * 2 + inlined */
};

struct graph {
	/* names, by rank (strcmp order) */
	const char **names;
	uint32_t *name_lens;
	uint8_t *kinds;
	uint32_t nnames;
	char **owned;      /* "_[i]" texts we made */
	size_t nowned, owned_cap;

	/* per profile: rank of each key, stack sequences cache */
	uint32_t *key_rank[2];
	size_t nkeys[2];

	uint32_t *pool;    /* name ranks of all sequences */
	size_t pool_len, pool_cap;

	struct seq *seqs;
	size_t nseqs, seqs_cap;
	uint32_t max_len;

	/* the tree, in preorder */
	struct node *nodes;
	uint64_t *before, *self_after, *self_before; /* diff only */
	size_t nnodes, nodes_cap;
	bool diff;
	uint32_t max_depth;
};

/* One distinct stack of one profile, as name ranks.  */
struct seq {
	uint64_t count;
	size_t offset;     /* into pool */
	uint32_t len;
	uint32_t which;    /* 0: the profile written, 1: BEFORE */
};

struct node {
	uint64_t count;    /* samples of the profile written, inclusive */
	uint32_t name;     /* rank, NO_NAME for the root */
	uint32_t depth;    /* 0 for the root */
};

static bool grow(void *array, size_t size, size_t need, size_t *cap)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 256;
	while (n < need)
		n *= 2;
	void *grown = realloc(*(void **)array, n * size);
	if (!grown)
		return false;
	*(void **)array = grown;
	*cap = n;
	return true;
}

static int compare_entries(const void *a, const void *b)
{
	const struct name_entry *x = a, *y = b;
	return strcmp(x->text, y->text);
}

/* Collect the distinct frame keys of profile P as WHICH into *ENTRIES.  */
static int collect_names(struct graph *g, const struct cp_profile *p,
			 int which, struct name_entry **entries, size_t *n,
			 size_t *cap)
{
	uint32_t nlocs = cp_profile_location_count(p);
	uint32_t max_fn = 0;
	for (uint32_t id = 0; id < nlocs; id++) {
		const struct cp_location *loc = cp_profile_location(p, id);
		for (uint32_t j = 0; loc && j < loc->nlines; j++)
			if (loc->lines[j].function > max_fn)
				max_fn = loc->lines[j].function;
	}
	g->nkeys[which] = 2 * ((size_t)max_fn + 1);
	/* entry index + 1 for now; the rank once names are sorted */
	g->key_rank[which] = calloc(g->nkeys[which], sizeof(uint32_t));
	if (!g->key_rank[which])
		return -CP_E_NOMEM;
	uint32_t *slot_of = g->key_rank[which];
	for (uint32_t id = 0; id < nlocs; id++) {
		const struct cp_location *loc = cp_profile_location(p, id);
		if (!loc)
			continue;
		const char *module = cp_profile_string(p, loc->module);
		for (uint32_t j = 0; j < loc->nlines; j++) {
			const struct cp_line *line = &loc->lines[j];
			size_t key = (size_t)line->function * 2 + line->inlined;
			if (slot_of[key])
				continue;
			const char *fn = cp_profile_string(p, line->function);
			size_t len = strlen(fn);
			const char *text = fn;
			if (line->inlined) {
				char *copy = malloc(len + 5);
				if (!copy || !grow(&g->owned, sizeof(char *),
						   g->nowned + 1, &g->owned_cap)) {
					free(copy);
					return -CP_E_NOMEM;
				}
				memcpy(copy, fn, len);
				memcpy(copy + len, "_[i]", 5);
				len += 4;
				text = copy;
				g->owned[g->nowned++] = copy;
			}
			if (len > UINT32_MAX)
				len = UINT32_MAX;
			if (!grow(entries, sizeof(**entries), *n + 1, cap))
				return -CP_E_NOMEM;
			(*entries)[*n] = (struct name_entry){
				.text = text,
				.len = (uint32_t)len,
				.kind = (uint8_t)classify(text, len, module),
				.which = (uint8_t)which,
				.key = key,
			};
			slot_of[key] = (uint32_t)++*n;
		}
	}
	return 0;
}

/* Sort the entries of both profiles by text; equal texts share a rank.  */
static int rank_names(struct graph *g, struct name_entry *entries, size_t n)
{
	if (n > 0)
		qsort(entries, n, sizeof(*entries), compare_entries);
	g->names = malloc((n ? n : 1) * sizeof(*g->names));
	g->name_lens = malloc((n ? n : 1) * sizeof(*g->name_lens));
	g->kinds = malloc(n ? n : 1);
	if (!g->names || !g->name_lens || !g->kinds)
		return -CP_E_NOMEM;
	uint32_t rank = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || strcmp(entries[i].text, entries[i - 1].text) != 0) {
			rank = g->nnames++;
			g->names[rank] = entries[i].text;
			g->name_lens[rank] = entries[i].len;
			g->kinds[rank] = entries[i].kind;
		}
		g->key_rank[entries[i].which][entries[i].key] = rank;
	}
	return 0;
}

/* Turn the samples of P (WHICH) into sequences of ranks.  */
static int collect_stacks(struct graph *g, const struct cp_profile *p,
			  int which, bool inverted)
{
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(p, &nsamples);
	uint32_t max_stack = 0;
	for (size_t i = 0; i < nsamples; i++)
		if (samples[i].stack > max_stack)
			max_stack = samples[i].stack;
	/* sequence index + 1 of each stack id already turned */
	size_t *seen = calloc((size_t)max_stack + 1, sizeof(*seen));
	if (!seen)
		return -CP_E_NOMEM;
	const uint32_t *ranks = g->key_rank[which];
	int rc = -CP_E_NOMEM;
	for (size_t i = 0; i < nsamples; i++) {
		const struct cp_sample *sample = &samples[i];
		if (sample->count == 0)
			continue;
		if (!grow(&g->seqs, sizeof(*g->seqs), g->nseqs + 1,
			  &g->seqs_cap))
			goto out;
		struct seq *seq = &g->seqs[g->nseqs];
		seq->count = sample->count;
		seq->which = (uint32_t)which;
		if (seen[sample->stack]) {
			const struct seq *first = &g->seqs[seen[sample->stack] - 1];
			seq->offset = first->offset;
			seq->len = first->len;
			g->nseqs++;
			continue;
		}
		size_t n;
		const uint32_t *locs = cp_profile_stack(p, sample->stack, &n);
		size_t frames = 0;
		for (size_t k = 0; k < n; k++) {
			const struct cp_location *loc =
				cp_profile_location(p, locs[k]);
			frames += loc ? loc->nlines : 0;
		}
		if (frames >= UINT32_MAX - 1 ||
		    !grow(&g->pool, sizeof(*g->pool), g->pool_len + frames,
			  &g->pool_cap))
			goto out;
		seq = &g->seqs[g->nseqs];
		seq->offset = g->pool_len;
		seq->len = (uint32_t)frames;
		uint32_t *out = g->pool + g->pool_len;
		size_t o = 0;
		/* locations and their lines are innermost first */
		for (size_t k = 0; k < n; k++) {
			const struct cp_location *loc =
				cp_profile_location(p, locs[k]);
			for (uint32_t j = 0; loc && j < loc->nlines; j++) {
				const struct cp_line *line = &loc->lines[j];
				out[o++] = ranks[(size_t)line->function * 2 +
						 line->inlined];
			}
		}
		if (!inverted) {
			for (size_t a = 0, b = frames; a + 1 < b; a++, b--) {
				uint32_t t = out[a];
				out[a] = out[b - 1];
				out[b - 1] = t;
			}
		}
		g->pool_len += frames;
		if (seq->len > g->max_len)
			g->max_len = seq->len;
		seen[sample->stack] = ++g->nseqs;
	}
	rc = 0;
out:
	free(seen);
	return rc;
}

static int compare_seqs(const void *a, const void *b, void *pool)
{
	const struct seq *x = a, *y = b;
	const uint32_t *p = pool;
	const uint32_t *s = p + x->offset, *t = p + y->offset;
	uint32_t n = x->len < y->len ? x->len : y->len;
	for (uint32_t i = 0; i < n; i++)
		if (s[i] != t[i])
			return s[i] < t[i] ? -1 : 1;
	return (x->len > y->len) - (x->len < y->len);
}

static bool add_node(struct graph *g, uint32_t name, uint32_t depth)
{
	if (g->nnodes == g->nodes_cap) {
		size_t cap = g->nodes_cap;
		if (!grow(&g->nodes, sizeof(*g->nodes), g->nnodes + 1, &cap))
			return false;
		if (g->diff) {
			size_t c1 = g->nodes_cap, c2 = g->nodes_cap,
			       c3 = g->nodes_cap;
			if (!grow(&g->before, sizeof(uint64_t), cap, &c1) ||
			    !grow(&g->self_after, sizeof(uint64_t), cap, &c2) ||
			    !grow(&g->self_before, sizeof(uint64_t), cap, &c3))
				return false;
		}
		g->nodes_cap = cap;
	}
	size_t id = g->nnodes++;
	g->nodes[id] = (struct node){.count = 0, .name = name, .depth = depth};
	if (g->diff)
		g->before[id] = g->self_after[id] = g->self_before[id] = 0;
	return true;
}

/* Merge the sorted sequences into the preorder tree.  */
static int build_tree(struct graph *g)
{
	if (g->nseqs > 1)
		qsort_r(g->seqs, g->nseqs, sizeof(*g->seqs), compare_seqs,
			g->pool);
	/* the node of each depth along the last sequence; [0] the root */
	size_t *path = malloc(((size_t)g->max_len + 1) * sizeof(*path));
	if (!path || !add_node(g, NO_NAME, 0)) {
		free(path);
		return -CP_E_NOMEM;
	}
	path[0] = 0;
	const uint32_t *prev = NULL;
	uint32_t prev_len = 0;
	for (size_t i = 0; i < g->nseqs; i++) {
		const struct seq *seq = &g->seqs[i];
		const uint32_t *names = g->pool + seq->offset;
		uint32_t common = 0;
		uint32_t limit = seq->len < prev_len ? seq->len : prev_len;
		if (prev == names)
			common = limit;
		else
			while (common < limit && prev[common] == names[common])
				common++;
		for (uint32_t d = common; d < seq->len; d++) {
			if (!add_node(g, names[d], d + 1)) {
				free(path);
				return -CP_E_NOMEM;
			}
			path[d + 1] = g->nnodes - 1;
		}
		if (seq->len > g->max_depth)
			g->max_depth = seq->len;
		prev = names;
		prev_len = seq->len;
		if (seq->which == 0) {
			for (uint32_t d = 0; d <= seq->len; d++)
				g->nodes[path[d]].count += seq->count;
			if (g->diff)
				g->self_after[path[seq->len]] += seq->count;
		} else {
			for (uint32_t d = 0; d <= seq->len; d++)
				g->before[path[d]] += seq->count;
			g->self_before[path[seq->len]] += seq->count;
		}
	}
	free(path);
	return 0;
}

static void graph_free(struct graph *g)
{
	for (size_t i = 0; i < g->nowned; i++)
		free(g->owned[i]);
	free(g->owned);
	free(g->names);
	free(g->name_lens);
	free(g->kinds);
	free(g->key_rank[0]);
	free(g->key_rank[1]);
	free(g->pool);
	free(g->seqs);
	free(g->nodes);
	free(g->before);
	free(g->self_after);
	free(g->self_before);
}

/* --------------------------------------------------------------- script */

/* The page's behaviour; see the top of this file for what it relies on.
 * Plain ES5 and DOM level 2, so it runs in any browser that shows SVG.  */
static const char script[] =
"(function () {\n"
"\"use strict\";\n"
"var doc = document;\n"
"function el(id) { return doc.getElementById(id); }\n"
"var box = el(\"frames\"), details = el(\"details\"), matched = el(\"matched\");\n"
"var resetEl = el(\"reset\"), searchEl = el(\"search\"), caseEl = el(\"case\");\n"
"function num(name) { return parseFloat(box.getAttribute(\"data-\" + name)); }\n"
"var xpad = num(\"xpad\"), width = num(\"width\"), base = num(\"base\");\n"
"var step = num(\"step\"), total = num(\"total\"), fontw = num(\"fontw\");\n"
"var frames = [], zoomed = null, pattern = null, ignoreCase = false;\n"
"\n"
"function first(g, tag) { return g.getElementsByTagName(tag)[0]; }\n"
"function isFrame(node) {\n"
"  return node && node.nodeType === 1 && node.nodeName === \"g\" &&\n"
"    (\" \" + node.getAttribute(\"class\") + \" \").indexOf(\" frame \") >= 0;\n"
"}\n"
"function init() {\n"
"  var gs = box.getElementsByTagName(\"g\");\n"
"  for (var i = 0; i < gs.length; i++) {\n"
"    var g = gs[i];\n"
"    if (!isFrame(g)) continue;\n"
"    var rect = first(g, \"rect\"), title = first(g, \"title\");\n"
"    var tip = title ? title.textContent : \"\";\n"
"    var cut = tip.lastIndexOf(\" (\");\n"
"    var f = {\n"
"      g: g, rect: rect, text: first(g, \"text\"), title: tip,\n"
"      name: cut >= 0 ? tip.substring(0, cut) : tip,\n"
"      s: parseFloat(g.getAttribute(\"data-s\")),\n"
"      n: parseFloat(g.getAttribute(\"data-n\")),\n"
"      x: parseFloat(rect.getAttribute(\"x\")),\n"
"      w: parseFloat(rect.getAttribute(\"width\")),\n"
"      d: Math.round((parseFloat(rect.getAttribute(\"y\")) - base) / step),\n"
"      anc: false, hide: false, match: false\n"
"    };\n"
"    g.setAttribute(\"data-i\", String(frames.length));\n"
"    frames.push(f);\n"
"  }\n"
"}\n"
"function restyle(f) {\n"
"  var c = \"frame\";\n"
"  if (f.anc) c += \" anc\";\n"
"  if (f.hide) c += \" hide\";\n"
"  if (f.match) c += \" match\";\n"
"  f.g.setAttribute(\"class\", c);\n"
"}\n"
"/* The name cut to what fits in W pixels, as the writer cuts it.  */\n"
"function fit(name, w) {\n"
"  var max = Math.floor((w - 6) / fontw);\n"
"  if (max < 3) return \"\";\n"
"  if (name.length <= max) return name;\n"
"  return name.substring(0, max - 2) + \"..\";\n"
"}\n"
"function place(f, x, w) {\n"
"  f.rect.setAttribute(\"x\", x.toFixed(1));\n"
"  f.rect.setAttribute(\"width\", w.toFixed(1));\n"
"  if (f.text) {\n"
"    f.text.setAttribute(\"x\", (x + 3).toFixed(1));\n"
"    f.text.textContent = fit(f.name, w);\n"
"  }\n"
"}\n"
"function setClass(node, c) { if (node) node.setAttribute(\"class\", c); }\n"
"/* Zoom to frame F: its subtree fills the width, its ancestors stay (full\n"
" * width, faded), everything else is hidden.  Positions come from the\n"
" * sample counts, so deep zooms stay exact.  */\n"
"function zoom(f) {\n"
"  if (typeof f === \"number\") f = frames[f];\n"
"  if (!f) return;\n"
"  if (f.d === 0) { reset(); return; }\n"
"  zoomed = f;\n"
"  var scale = width / f.n, end = f.s + f.n;\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var o = frames[i];\n"
"    o.anc = o.d < f.d && o.s <= f.s && o.s + o.n >= end;\n"
"    o.hide = !o.anc && !(o.d >= f.d && o.s >= f.s && o.s + o.n <= end);\n"
"    if (o.anc) place(o, xpad, width);\n"
"    else if (!o.hide) place(o, xpad + (o.s - f.s) * scale, o.n * scale);\n"
"    restyle(o);\n"
"  }\n"
"  setClass(resetEl, \"control\");\n"
"}\n"
"function reset() {\n"
"  zoomed = null;\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var o = frames[i];\n"
"    o.anc = o.hide = false;\n"
"    place(o, o.x, o.w);\n"
"    restyle(o);\n"
"  }\n"
"  setClass(resetEl, \"control off\");\n"
"}\n"
"/* Highlight the frames whose name matches PATTERN (a regular expression;\n"
" * empty or null clears) and show the share of samples under them.  */\n"
"function search(source) {\n"
"  if (source === null || source === undefined || source === \"\") {\n"
"    clearSearch();\n"
"    return true;\n"
"  }\n"
"  var re;\n"
"  try {\n"
"    re = new RegExp(String(source), ignoreCase ? \"i\" : \"\");\n"
"  } catch (e) {\n"
"    details.textContent = \"Search: \" + e.message;\n"
"    return false;\n"
"  }\n"
"  pattern = String(source);\n"
"  var spans = [];\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var f = frames[i];\n"
"    f.match = f.d > 0 && re.test(f.name);\n"
"    if (f.match) spans.push(f);\n"
"    restyle(f);\n"
"  }\n"
"  /* Frames nest or are disjoint: merging the spans in order of x counts\n"
"   * a matching frame inside another one once.  */\n"
"  spans.sort(function (a, b) { return a.s - b.s || b.n - a.n; });\n"
"  var sum = 0, end = -1;\n"
"  for (var j = 0; j < spans.length; j++) {\n"
"    var s = spans[j];\n"
"    if (s.s >= end) { sum += s.n; end = s.s + s.n; }\n"
"    else if (s.s + s.n > end) { sum += s.s + s.n - end; end = s.s + s.n; }\n"
"  }\n"
"  var pct = total > 0 ? 100 * sum / total : 0;\n"
"  matched.textContent = \"Matched: \" + pct.toFixed(2) + \" %\";\n"
"  setClass(searchEl, \"control on\");\n"
"  return true;\n"
"}\n"
"function clearSearch() {\n"
"  pattern = null;\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    if (frames[i].match) { frames[i].match = false; restyle(frames[i]); }\n"
"  }\n"
"  matched.textContent = \"\";\n"
"  setClass(searchEl, \"control\");\n"
"}\n"
"function askSearch() {\n"
"  var answer = window.prompt(\"Search for a regular expression\" +\n"
"    (ignoreCase ? \" (ignoring case)\" : \"\") + \":\", pattern || \"\");\n"
"  if (answer !== null) search(answer);\n"
"}\n"
"function setIgnoreCase(on) {\n"
"  ignoreCase = !!on;\n"
"  caseEl.setAttribute(\"aria-pressed\", ignoreCase ? \"false\" : \"true\");\n"
"  setClass(caseEl, ignoreCase ? \"control off\" : \"control\");\n"
"  if (pattern !== null) search(pattern);\n"
"}\n"
"function frameOf(node) {\n"
"  while (node && node !== box) {\n"
"    if (isFrame(node)) return frames[+node.getAttribute(\"data-i\")];\n"
"    node = node.parentNode;\n"
"  }\n"
"  return null;\n"
"}\n"
"\n"
"init();\n"
"box.addEventListener(\"click\", function (e) {\n"
"  var f = frameOf(e.target);\n"
"  if (f) zoom(f);\n"
"}, false);\n"
"box.addEventListener(\"mouseover\", function (e) {\n"
"  var f = frameOf(e.target);\n"
"  if (f) details.textContent = f.title;\n"
"}, false);\n"
"box.addEventListener(\"mouseout\", function (e) {\n"
"  if (frameOf(e.target)) details.textContent = \" \";\n"
"}, false);\n"
"resetEl.addEventListener(\"click\", reset, false);\n"
"searchEl.addEventListener(\"click\", askSearch, false);\n"
"caseEl.addEventListener(\"click\", function () {\n"
"  setIgnoreCase(!ignoreCase);\n"
"}, false);\n"
"doc.addEventListener(\"keydown\", function (e) {\n"
"  var key = e.key || \"\";\n"
"  if (((e.ctrlKey || e.metaKey) && (key === \"f\" || key === \"F\" ||\n"
"      e.keyCode === 70)) || key === \"F3\" || e.keyCode === 114) {\n"
"    e.preventDefault();\n"
"    askSearch();\n"
"  } else if (key === \"Escape\" || key === \"Esc\" || e.keyCode === 27) {\n"
"    reset();\n"
"    clearSearch();\n"
"  }\n"
"}, false);\n"
"window.cprof = {\n"
"  frames: frames, zoom: zoom, reset: reset, search: search,\n"
"  clearSearch: clearSearch, setIgnoreCase: setIgnoreCase,\n"
"  zoomed: function () { return zoomed; }\n"
"};\n"
"})();\n";

static const char style[] =
"text { font-family: Verdana, \"DejaVu Sans\", sans-serif; font-size: 12px; fill: #000; }\n"
"#title { font-size: 17px; }\n"
"#subtitle { font-size: 12px; fill: #555; }\n"
".control { cursor: pointer; }\n"
".control.off { opacity: 0.35; }\n"
".control.on { font-weight: bold; }\n"
"#frames text { pointer-events: none; }\n"
"g.frame { cursor: pointer; }\n"
"g.frame:hover rect { stroke: #000; stroke-width: 0.5; }\n"
"g.frame.anc { opacity: 0.5; }\n"
"g.frame.hide { display: none; }\n"
"g.frame.match rect { fill: rgb(230,0,230); }\n";

/* --------------------------------------------------------------- output */

struct writer {
	FILE *f;
	const struct graph *g;
	const char *unit;
	uint64_t total;
	double scale;           /* px per sample */
	double minwidth;
	uint32_t rows;          /* levels drawn */
	double base, step;      /* y of depth 0, y per level */
	const struct palette *palette; /* NULL: by kind */
	bool inverted;
	/* diff */
	long double before_total;
	long double ta, tb;     /* BEFORE counts are scaled by TA / TB */
	long double max_delta;
};

static bool shown(const struct writer *w, uint64_t count)
{
	return count > 0 && (double)count * w->scale >= w->minwidth;
}

static const char *node_name(const struct graph *g, const struct node *n,
			     size_t *len)
{
	if (n->name == NO_NAME) {
		*len = strlen(ROOT_NAME);
		return ROOT_NAME;
	}
	*len = g->name_lens[n->name];
	return g->names[n->name];
}

/* The change that colours node I of a diff, times TB (exact when the
 * counts are below 2^32): the samples in which the frame is the leaf,
 * AFTER minus the (scaled) BEFORE.  In a flame graph those are its self
 * samples, so what grew stands out rather than all its callers; in an
 * icicle graph (stacks reversed) they are all of its samples: the leaf
 * functions on top, then by which callers.  The root is no function.  */
static long double delta_tb(const struct writer *w, size_t i)
{
	const struct graph *g = w->g;
	if (i == 0 && w->inverted)
		return 0;
	if (w->inverted)
		return (long double)g->nodes[i].count * w->tb -
		       (long double)g->before[i] * w->ta;
	return (long double)g->self_after[i] * w->tb -
	       (long double)g->self_before[i] * w->ta;
}

static void put_pct(FILE *f, uint64_t count, uint64_t total)
{
	fprintf(f, "%.2f%%", total ? 100.0 * (double)count / (double)total : 0.0);
}

static void write_title(const struct writer *w, size_t i, const char *name,
			size_t len)
{
	const struct graph *g = w->g;
	const struct node *n = &g->nodes[i];
	char buf[64];
	FILE *f = w->f;
	fputs("<title>", f);
	put_xml(f, name, len);
	fprintf(f, " (%s ", fmt_count(buf, sizeof(buf), n->count, false));
	/* "1 sample", "1 byte" */
	size_t unit_len = strlen(w->unit);
	if (n->count == 1 && unit_len > 1 && w->unit[unit_len - 1] == 's')
		unit_len--;
	put_xml(f, w->unit, unit_len);
	fputs(", ", f);
	put_pct(f, n->count, w->total);
	if (g->diff) {
		bool frac = w->ta != w->tb;
		long double before = g->before[i] * w->ta / w->tb;
		long double delta = (long double)n->count - before;
		fprintf(f, "; before %s",
			fmt_count(buf, sizeof(buf), before, frac));
		fprintf(f, "; delta %s%s", delta > 0 ? "+" : "",
			fmt_count(buf, sizeof(buf), delta, frac));
		if (g->before[i] > 0)
			fprintf(f, ", %+.2Lf%%", 100 * delta / before);
		else
			fputs(", new", f);
		if (!w->inverted) {
			long double self = delta_tb(w, i) / w->tb;
			fprintf(f, "; self delta %s%s", self > 0 ? "+" : "",
				fmt_count(buf, sizeof(buf), self, frac));
		}
	}
	fputs(")</title>", f);
}

static void write_frame(const struct writer *w, size_t i, uint64_t start)
{
	const struct graph *g = w->g;
	const struct node *n = &g->nodes[i];
	FILE *f = w->f;
	size_t len;
	const char *name = node_name(g, n, &len);
	/* round the edges, not the width, so neighbours abut */
	long x1 = tenths_of(XPAD + (double)start * w->scale);
	long x2 = tenths_of(XPAD + (double)(start + n->count) * w->scale);
	double y = w->base + w->step * n->depth;
	uint32_t rgb;
	if (g->diff)
		rgb = diff_rgb(delta_tb(w, i), w->max_delta);
	else if (w->palette)
		rgb = palette_rgb(w->palette, name);
	else
		rgb = palette_rgb(&kind_palettes[n->name == NO_NAME
							 ? K_USER
							 : g->kinds[n->name]],
				  name);
	fprintf(f, "<g class=\"frame\" data-s=\"%" PRIu64 "\" data-n=\"%" PRIu64
		   "\">",
		start, n->count);
	write_title(w, i, name, len);
	fputs("<rect x=\"", f);
	put_tenths(f, x1);
	fprintf(f, "\" y=\"%.0f\" width=\"", y);
	put_tenths(f, x2 - x1);
	fprintf(f, "\" height=\"%d\" fill=\"#%06" PRIx32 "\"/><text x=\"",
		FRAME_H - 1, rgb);
	put_tenths(f, x1 + 30);
	fprintf(f, "\" y=\"%.0f\">", y + 11);
	/* the name cut to the width, as the script's fit() does */
	double avail = ((double)(x2 - x1) / 10 - 6) / (FONT_SIZE * FONT_WIDTH);
	size_t max = avail > 0 ? (size_t)avail : 0;
	if (max >= 3) {
		if (utf8_length(name, len) <= max) {
			put_xml(f, name, len);
		} else {
			put_xml(f, name, utf8_prefix(name, len, max - 2));
			fputs("..", f);
		}
	}
	fputs("</text></g>\n", f);
}

static void write_header_comment(const struct writer *w,
				 const struct cp_profile *p,
				 const struct cp_svg_options *o,
				 size_t nshown, size_t nleft_out)
{
	FILE *f = w->f;
	const struct cp_profile_meta *meta = cp_profile_meta_const(p);
	char buf[64];
	fprintf(f, "<!-- %s written by cprof %s\n",
		w->g->diff ? "Differential flame graph"
		: o->inverted ? "Icicle graph" : "Flame graph",
		CP_VERSION);
	if (meta->command[0]) {
		fputs("     command: ", f);
		put_comment(f, meta->command);
		putc('\n', f);
	}
	if (meta->target[0]) {
		fputs("     target: ", f);
		put_comment(f, meta->target);
		if (meta->pid > 0)
			fprintf(f, " (pid %d)", (int)meta->pid);
		putc('\n', f);
	} else if (meta->pid > 0) {
		fprintf(f, "     target: pid %d\n", (int)meta->pid);
	}
	fputs("     ", f);
	put_comment(f, w->unit);
	fprintf(f, ": %s", fmt_count(buf, sizeof(buf), w->total, false));
	if (o->before) {
		fputs(" (before: ", f);
		fputs(fmt_count(buf, sizeof(buf), w->before_total, false), f);
		fputs(o->normalize ? ", normalized)" : ")", f);
	}
	putc('\n', f);
	/* The profile's own date; else SOURCE_DATE_EPOCH (reproducible
	 * output), else now.  */
	time_t when;
	const char *epoch = getenv("SOURCE_DATE_EPOCH");
	if (meta->time_nanos)
		when = (time_t)(meta->time_nanos / 1000000000u);
	else if (epoch && *epoch)
		when = (time_t)strtoll(epoch, NULL, 10);
	else
		when = time(NULL);
	struct tm tm;
	char date[64];
	if (gmtime_r(&when, &tm) &&
	    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", &tm))
		fprintf(f, "     date: %s\n", date);
	fprintf(f, "     frames: %zu drawn, %zu narrower than ", nshown,
		nleft_out);
	put_px(f, w->minwidth);
	fputs(" px left out\n", f);
	if (o->comment && *o->comment) {
		fputs("     ", f);
		put_comment(f, o->comment);
		putc('\n', f);
	}
	fputs("-->\n", f);
}

static const struct palette *find_palette(const char *name, bool *ok)
{
	*ok = true;
	if (!name || !*name || strcmp(name, "default") == 0)
		return NULL;
	for (size_t i = 0; i < sizeof(palettes) / sizeof(palettes[0]); i++)
		if (strcmp(palettes[i].name, name) == 0)
			return &palettes[i];
	*ok = false;
	return NULL;
}

static int write_document(struct writer *w, const struct cp_profile *p,
			  const struct cp_svg_options *o, unsigned width)
{
	const struct graph *g = w->g;
	FILE *f = w->f;
	/* Levels drawn: the deepest frame wide enough, so a huge profile's
	 * narrow deep stacks do not stretch the picture.  */
	size_t nshown = 0, nleft = 0;
	uint32_t max_depth = 0;
	for (size_t i = 1; i < g->nnodes; i++) {
		if (shown(w, g->nodes[i].count)) {
			nshown++;
			if (g->nodes[i].depth > max_depth)
				max_depth = g->nodes[i].depth;
		} else if (g->nodes[i].count > 0) {
			nleft++;
		}
	}
	nshown += w->total > 0; /* the root */
	w->rows = max_depth + 1;
	double head = HEAD_H + (g->diff ? SUBTITLE_H : 0);
	double height = head + (double)w->rows * FRAME_H + FOOT_H;
	if (o->inverted) {
		w->base = head;
		w->step = FRAME_H;
	} else {
		w->base = head + (double)(w->rows - 1) * FRAME_H;
		w->step = -FRAME_H;
	}
	const char *title = o->title ? o->title
			    : g->diff && o->inverted ? "Differential Icicle Graph"
			    : g->diff ? "Differential Flame Graph"
			    : o->inverted ? "Icicle Graph"
			    : "Flame Graph";

	fputs("<?xml version=\"1.0\" standalone=\"no\"?>\n", f);
	write_header_comment(w, p, o, nshown, nleft);
	fprintf(f,
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%u\" height=\"%.0f\" viewBox=\"0 0 %u %.0f\">\n",
		width, height, width, height);
	fprintf(f, "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n",
		style);
	fputs("<defs><linearGradient id=\"background\" x1=\"0\" y1=\"0\" "
	      "x2=\"0\" y2=\"1\"><stop stop-color=\"#eeeeee\" offset=\"5%\"/>"
	      "<stop stop-color=\"#eeeeb0\" offset=\"95%\"/></linearGradient>"
	      "</defs>\n",
	      f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%.0f\" "
		   "fill=\"url(#background)\"/>\n",
		width, height);
	fprintf(f, "<text id=\"title\" x=\"%.1f\" y=\"24\" "
		   "text-anchor=\"middle\">",
		width / 2.0);
	put_xml_str(f, title);
	fputs("</text>\n", f);
	if (g->diff) {
		fprintf(f, "<text id=\"subtitle\" x=\"%.1f\" y=\"40\" "
			   "text-anchor=\"middle\">widths: after; red: grew, "
			   "blue: shrank (%s",
			width / 2.0, o->inverted ? "" : "self ");
		put_xml_str(f, w->unit);
		fprintf(f, ", after minus before%s)</text>\n",
			o->normalize ? " normalized to after's total" : "");
	}
	fprintf(f, "<text id=\"reset\" class=\"control off\" x=\"%d\" "
		   "y=\"24\">Reset zoom</text>\n",
		XPAD);
	fprintf(f, "<text id=\"search\" class=\"control\" x=\"%d\" y=\"24\" "
		   "text-anchor=\"end\">Search</text>\n",
		(int)width - XPAD - 34);
	fprintf(f, "<text id=\"case\" class=\"control\" aria-pressed=\"true\" "
		   "x=\"%d\" y=\"24\" text-anchor=\"end\"><title>Match case "
		   "(click to toggle)</title>Aa</text>\n",
		(int)width - XPAD);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%.0f\"> </text>\n", XPAD,
		height - 14);
	fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%.0f\" "
		   "text-anchor=\"end\"></text>\n",
		(int)width - XPAD, height - 14);

	fprintf(f, "<g id=\"frames\" data-total=\"%" PRIu64 "\" data-unit=\"",
		w->total);
	put_xml_str(f, w->unit);
	fprintf(f, "\" data-xpad=\"%d\" data-width=\"%u\" data-base=\"%.0f\" "
		   "data-step=\"%.0f\" data-fontw=\"%.2f\" data-diff=\"%d\">\n",
		XPAD, width - 2 * XPAD, w->base, w->step,
		FONT_SIZE * FONT_WIDTH, g->diff ? 1 : 0);
	if (w->total > 0) {
		/* the next free x, in samples, of each depth */
		uint64_t *next = calloc((size_t)g->max_depth + 2, sizeof(*next));
		if (!next)
			return -CP_E_NOMEM;
		for (size_t i = 0; i < g->nnodes; i++) {
			const struct node *n = &g->nodes[i];
			uint64_t start = next[n->depth];
			next[n->depth] += n->count;
			next[n->depth + 1] = start;
			if (i == 0 || shown(w, n->count))
				write_frame(w, i, start);
		}
		free(next);
	} else {
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">"
			   "No samples</text>\n",
			width / 2.0, w->base + 11);
	}
	fputs("</g>\n", f);
	fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n",
		script);
	fputs("</svg>\n", f);
	return 0;
}

int cp_write_svg(const struct cp_profile *profile,
		 const struct cp_svg_options *options, FILE *stream)
{
	static const struct cp_svg_options defaults = {.minwidth = -1};
	const struct cp_svg_options *o = options ? options : &defaults;
	bool palette_ok;
	const struct palette *palette = find_palette(o->colors, &palette_ok);
	if (!palette_ok)
		return -CP_E_INVAL;
	unsigned width = o->width ? o->width : 1200;
	if (width < 2 * XPAD + 10)
		width = 2 * XPAD + 10;

	struct graph g = {.diff = o->before != NULL};
	struct name_entry *entries = NULL;
	size_t nentries = 0, entries_cap = 0;
	int rc = collect_names(&g, profile, 0, &entries, &nentries,
			       &entries_cap);
	if (rc == 0 && o->before)
		rc = collect_names(&g, o->before, 1, &entries, &nentries,
				   &entries_cap);
	if (rc == 0)
		rc = rank_names(&g, entries, nentries);
	free(entries);
	if (rc == 0)
		rc = collect_stacks(&g, profile, 0, o->inverted);
	if (rc == 0 && o->before)
		rc = collect_stacks(&g, o->before, 1, o->inverted);
	if (rc == 0)
		rc = build_tree(&g);
	if (rc != 0)
		goto out;
	/* the sequences are merged into the tree: give their memory back
	 * before writing */
	free(g.pool);
	g.pool = NULL;
	free(g.seqs);
	g.seqs = NULL;

	const struct cp_profile_meta *meta = cp_profile_meta_const(profile);
	struct writer w = {
		.f = stream,
		.g = &g,
		.unit = o->unit && *o->unit ? o->unit
			: cp_sample_type_word(&meta->count_type),
		.total = g.nodes[0].count,
		.minwidth = o->minwidth < 0 ? 0.1 : o->minwidth,
		.palette = palette,
		.inverted = o->inverted,
		.ta = 1,
		.tb = 1,
	};
	w.scale = w.total ? (double)(width - 2 * XPAD) / (double)w.total : 0;
	if (g.diff) {
		w.before_total = g.before[0];
		if (o->normalize && g.before[0] > 0 && w.total > 0) {
			w.ta = w.total;
			w.tb = g.before[0];
		}
		for (size_t i = 0; i < g.nnodes; i++) {
			if (g.nodes[i].count == 0)
				continue;
			long double d = abs_ld(delta_tb(&w, i));
			if (d > w.max_delta)
				w.max_delta = d;
		}
	}
	rc = write_document(&w, profile, o, width);
	if (rc == 0 && (fflush(stream) != 0 || ferror(stream)))
		rc = -CP_E_SYS;
out:
	graph_free(&g);
	return rc;
}

static int format_svg_write(const struct cp_format_input *in,
			    const struct cp_format_options *o, FILE *stream)
{
	return cp_write_svg(in->profile, &o->svg, stream);
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_svg = {
	.name = "svg",
	.suffixes = { ".svg", NULL },
	.description = "an interactive flame graph",
	.kinds = CP_FORMAT_SAMPLED | CP_FORMAT_HEAP | CP_FORMAT_DUMP,
	.binary = false,
	.dump_as_profile = true,
	.write = format_svg_write,
	.begin = NULL,
	.sample = NULL,
	.end = NULL,
};
