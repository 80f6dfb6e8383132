/* Unit tests for the SVG flame graph writer (cp_write_svg, src/formats/svg.c).
 *
 * Profiles are built with the cp_profile API (and once read from folded
 * text).  Golden outputs: fixtures/data/svg-*.svg, checked by hand; rewrite
 * them with CP_UPDATE_GOLDEN=1 after a deliberate change and read the
 * diff.  The version in the header comment is replaced by "VERSION"
 * before comparing.  XML validity is checked with python3's minidom
 * (expat for the large graph), the script's syntax with node --check
 * when node is installed, and its behaviour (zoom, reset, search, case,
 * Ctrl-F, hover) under jsdom when node finds it (NODE_PATH).  The large
 * test uses the benchmark's generator, bench/svg_gen.h.  */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "testutil.h"
#include "../bench/svg_gen.h"

#define DATA CP_SOURCE_DIR "/fixtures/data/"

/* An assertion for loops over thousands of frames: Check's own record a
 * mark point through a pipe each time they pass.  */
#define REQUIRE(cond, ...)                                                 \
	do {                                                               \
		if (!(cond))                                               \
			ck_abort_msg(__VA_ARGS__);                         \
	} while (0)

static double fabs_(double x)
{
	return x < 0 ? -x : x;
}

/* ------------------------------------------------------------ profiles */

static uint64_t next_address = 0x401000;

static uint32_t str(struct cp_profile *p, const char *s)
{
	uint32_t id = cp_profile_intern(p, s, strlen(s));
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

/* Add COUNT samples of STACK on thread TID.  STACK is root first, frames
 * joined by ';'.  A frame "name@module" sets the location's module.  A
 * frame ending in "_[i]" was inlined into the frame before it: the two
 * are one location whose lines are the inlined call (without the suffix)
 * and then its caller, as the symbolizer makes them.  Every call makes new
 * locations at new addresses, so stacks that look alike must be merged by
 * name.  */
static void add_stack(struct cp_profile *p, pid_t tid, const char *stack,
		      uint64_t count)
{
	char *copy = strdup(stack);
	char *frames[128];
	size_t n = 0;
	for (char *save = NULL, *tok = strtok_r(copy, ";", &save); tok;
	     tok = strtok_r(NULL, ";", &save)) {
		ck_assert_uint_lt(n, 128);
		frames[n++] = tok;
	}
	uint32_t locs[128];
	size_t nlocs = 0;
	/* innermost first: walk from the leaf; a location gathers inlined
	 * lines until its non-inlined line */
	struct cp_line lines[16];
	uint32_t nlines = 0;
	uint32_t module = 0;
	for (size_t i = n; i-- > 0;) {
		char *name = frames[i];
		char *at = strchr(name, '@');
		if (at) {
			*at = '\0';
			module = str(p, at + 1);
		}
		size_t len = strlen(name);
		bool inlined = len > 4 && strcmp(name + len - 4, "_[i]") == 0;
		if (inlined)
			name[len - 4] = '\0';
		ck_assert_uint_lt(nlines, 16);
		lines[nlines++] = (struct cp_line){
			.function = str(p, name),
			.inlined = inlined,
		};
		if (!inlined) {
			uint32_t id = cp_profile_add_location(
				p, next_address++, module, lines, nlines);
			ck_assert_uint_ne(id, UINT32_MAX);
			locs[nlocs++] = id;
			nlines = 0;
			module = 0;
		}
	}
	ck_assert_uint_eq(nlines, 0);
	uint32_t id = cp_profile_intern_stack(p, locs, nlocs);
	ck_assert_uint_ne(id, UINT32_MAX);
	ck_assert_int_eq(cp_profile_add(p, tid, id, count), 0);
	free(copy);
}

static struct cp_profile *new_profile(void)
{
	struct cp_profile *p = cp_profile_new();
	ck_assert_ptr_nonnull(p);
	struct cp_profile_meta *m = cp_profile_meta(p);
	/* fixed, so golden files do not change with the clock */
	m->time_nanos = UINT64_C(1700000000) * 1000000000u;
	return p;
}

/* The golden profile: user code, an inlined call, a shared library, the
 * kernel (by module and by suffix), [unknown], and a second thread whose
 * stack must merge with the first one's.  20 samples.  */
static struct cp_profile *basic_profile(void)
{
	struct cp_profile *p = new_profile();
	struct cp_profile_meta *m = cp_profile_meta(p);
	snprintf(m->command, sizeof(m->command),
		 "cprof-attach --svg -o demo.svg -- ./demo --fast");
	snprintf(m->target, sizeof(m->target), "./demo --fast");
	m->pid = 4242;
	add_stack(p, 1, "main@demo;parse_args@demo", 2);
	add_stack(p, 1, "main@demo;work@demo;compute@demo;sum_squares_[i]", 7);
	add_stack(p, 1, "main@demo;work@demo;compute@demo", 1);
	add_stack(p, 1, "main@demo;work@demo;memcpy@libc.so.6", 3);
	add_stack(p, 1, "main@demo;read@libc.so.6;entry_SYSCALL_64_[k];"
			"ksys_read@[kernel.kallsyms]", 2);
	add_stack(p, 1, "main@demo;[unknown]@libc.so.6", 1);
	add_stack(p, 2, "main@demo;work@demo;compute@demo;sum_squares_[i]", 4);
	return p;
}

/* ------------------------------------------------------------- writing */

static char *svg_of(const struct cp_profile *p, const struct cp_svg_options *o,
		    int *rc_out)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	int rc = cp_write_svg(p, o, mem);
	fclose(mem);
	if (rc_out)
		*rc_out = rc;
	else
		ck_assert_msg(rc == 0, "cp_write_svg: %s", cp_strerror(rc));
	return text;
}

static const struct cp_svg_options defaults = {.minwidth = -1};

/* ------------------------------------------------------------ reading */

struct frame {
	uint64_t s, n;
	char *title;    /* unescaped */
	char *name;     /* the title before its last " (" */
	char *text;     /* the label, unescaped */
	double x, y, width;
	unsigned rgb;
	int depth;
};

struct doc {
	struct frame *frames;
	size_t n;
	double base, step, xpad, area;
	uint64_t total;
};

static char *unescape(const char *s, size_t len)
{
	static const struct {
		const char *entity, *c;
	} map[] = {{"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"},
		   {"&quot;", "\""}, {"&apos;", "'"}};
	char *out = malloc(len + 1);
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		bool done = false;
		for (size_t k = 0; k < 5 && !done; k++) {
			size_t el = strlen(map[k].entity);
			if (i + el <= len && memcmp(s + i, map[k].entity, el) == 0) {
				out[o++] = map[k].c[0];
				i += el;
				done = true;
			}
		}
		if (!done) {
			REQUIRE(s[i] != '&', "unknown entity at %.10s", s + i);
			out[o++] = s[i++];
		}
	}
	out[o] = '\0';
	return out;
}

static double attr_num(const char *svg, const char *name)
{
	const char *at = strstr(svg, name);
	ck_assert_msg(at != NULL, "no %s", name);
	return strtod(at + strlen(name), NULL);
}

/* Parse the frames of SVG (the writer's own regular layout).  */
static struct doc parse(const char *svg)
{
	struct doc d = {0};
	const char *box = strstr(svg, "<g id=\"frames\"");
	REQUIRE((box) != NULL, "box is NULL");
	d.base = attr_num(box, "data-base=\"");
	d.step = attr_num(box, "data-step=\"");
	d.xpad = attr_num(box, "data-xpad=\"");
	d.area = attr_num(box, "data-width=\"");
	d.total = (uint64_t)attr_num(box, "data-total=\"");
	size_t cap = 0;
	static const char prefix[] = "<g class=\"frame\"";
	/* line by line by hand: the sanitizers' strchr and strstr measure
	 * the whole rest of the document on each call */
	for (const char *p = box, *eol; *p; p = *eol ? eol + 1 : eol) {
		for (eol = p; *eol && *eol != '\n'; eol++)
			;
		if ((size_t)(eol - p) < sizeof(prefix) - 1 ||
		    memcmp(p, prefix, sizeof(prefix) - 1) != 0)
			continue;
		if (d.n == cap) {
			cap = cap ? 2 * cap : 64;
			d.frames = realloc(d.frames, cap * sizeof(*d.frames));
		}
		struct frame *f = &d.frames[d.n++];
		memset(f, 0, sizeof(*f));
		/* one frame a line; sscanf on a copy, as glibc's takes the
		 * length of the whole string each call */
		char *line = strndup(p, (size_t)(eol - p));
		int used = 0;
		REQUIRE(sscanf(line, "<g class=\"frame\" data-s=\"%" SCNu64
				     "\" data-n=\"%" SCNu64 "\"><title>%n",
			       &f->s, &f->n, &used) == 2,
			"frame %zu: cannot read '%.80s'", d.n, line);
		REQUIRE((used) > (0), "used > 0");
		const char *t = line + used;
		const char *end = strstr(t, "</title>");
		REQUIRE((end) != NULL, "end is NULL");
		f->title = unescape(t, (size_t)(end - t));
		char *cut = NULL;
		for (char *c = strstr(f->title, " ("); c; c = strstr(c + 1, " ("))
			cut = c;
		REQUIRE((cut) != NULL, "cut is NULL");
		f->name = strndup(f->title, (size_t)(cut - f->title));
		used = 0;
		REQUIRE(sscanf(end, "</title><rect x=\"%lf\" y=\"%lf\" "
				    "width=\"%lf\" height=\"15\" "
				    "fill=\"#%x\"/><text x=\"%*f\" "
				    "y=\"%*f\">%n",
			       &f->x, &f->y, &f->width, &f->rgb, &used) == 4,
			"frame %zu: cannot read '%.120s'", d.n, end);
		REQUIRE((used) > (0), "used > 0");
		t = end + used;
		end = strstr(t, "</text></g>");
		REQUIRE((end) != NULL, "end is NULL");
		f->text = unescape(t, (size_t)(end - t));
		free(line);
		double depth = (f->y - d.base) / d.step;
		f->depth = (int)(depth + 0.5);
		REQUIRE(depth - f->depth < 1e-9 && f->depth - depth < 1e-9,
			"y %g is not on a level", f->y);
	}
	return d;
}

static void doc_free(struct doc *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->frames[i].title);
		free(d->frames[i].name);
		free(d->frames[i].text);
	}
	free(d->frames);
	memset(d, 0, sizeof(*d));
}

/* The frame at the end of PATH ("main;work;compute", root "all" left
 * out; "" for the root), or NULL.  */
static const struct frame *find(const struct doc *d, const char *path)
{
	const struct frame *at = &d->frames[0];
	char *copy = strdup(path);
	for (char *save = NULL, *tok = strtok_r(copy, ";", &save); tok;
	     tok = strtok_r(NULL, ";", &save)) {
		const struct frame *next = NULL;
		for (size_t i = 0; i < d->n && !next; i++) {
			const struct frame *f = &d->frames[i];
			if (f->depth == at->depth + 1 && f->s >= at->s &&
			    f->s + f->n <= at->s + at->n &&
			    strcmp(f->name, tok) == 0)
				next = f;
		}
		at = next;
		if (!at)
			break;
	}
	free(copy);
	return at;
}

static const struct frame *must_find(const struct doc *d, const char *path)
{
	const struct frame *f = find(d, path);
	ck_assert_msg(f != NULL, "no frame %s", path);
	return f;
}

/* The structure every graph must have: the root first, children inside
 * their parent, siblings in name order and not overlapping, a parent's
 * children adding up to at most its count, pixels matching counts.  */
static void check_tree(const struct doc *d, bool complete)
{
	REQUIRE((d->n) >= (1), "d->n >= 1");
	const struct frame *root = &d->frames[0];
	ck_assert_str_eq(root->name, "all");
	REQUIRE((root->depth) == (0), "root->depth == 0");
	REQUIRE((root->s) == (0), "root->s == 0");
	REQUIRE((root->n) == (d->total), "root->n == d->total");
	double scale = d->area / (double)d->total;
	/* one pass (the large graph has tens of thousands of frames): the
	 * open frame of each depth, the last child seen of each, and the sum
	 * of each frame's children */
	size_t *open = calloc(d->n + 1, sizeof(*open));
	size_t *last_child = calloc(d->n + 1, sizeof(*last_child));
	uint64_t *children = calloc(d->n, sizeof(*children));
	for (size_t i = 0; i < d->n; i++) {
		const struct frame *f = &d->frames[i];
		REQUIRE((f->n) > (0), "f->n > 0");
		/* pixels from samples, edges rounded to 0.1 px */
		REQUIRE(fabs_(f->x - (d->xpad + (double)f->s * scale)) <= 0.051,
			"%s: x %g for %" PRIu64 " samples", f->name, f->x, f->s);
		REQUIRE(fabs_(f->width - (double)f->n * scale) <= 0.11,
			"%s: width %g for %" PRIu64 " samples", f->name,
			f->width, f->n);
		REQUIRE(f->depth >= 0 && (size_t)f->depth <= d->n, "depth %d",
			f->depth);
		open[f->depth] = i;
		last_child[f->depth] = SIZE_MAX;
		if (i == 0)
			continue;
		REQUIRE((f->depth) >= (1), "f->depth >= 1");
		/* preorder: the parent is the open frame one level up */
		size_t p = open[f->depth - 1];
		const struct frame *parent = &d->frames[p];
		REQUIRE(parent->depth == f->depth - 1, "%s: no parent", f->name);
		REQUIRE((f->s) >= (parent->s), "f->s >= parent->s");
		REQUIRE(f->s + f->n <= parent->s + parent->n,
			"%s: outside its parent", f->name);
		children[p] += f->n;
		REQUIRE(children[p] <= parent->n, "%s: children exceed it",
			parent->name);
		/* the previous sibling: left of it, and before it by name */
		size_t prev = last_child[f->depth - 1];
		if (prev != SIZE_MAX) {
			const struct frame *sib = &d->frames[prev];
			REQUIRE(sib->s + sib->n <= f->s, "%s overlaps %s",
				sib->name, f->name);
			REQUIRE(strcmp(sib->name, f->name) < 0,
				"siblings out of order: '%s' before '%s'",
				sib->name, f->name);
			if (complete)
				REQUIRE(sib->s + sib->n == f->s, "gap before %s",
					f->name);
		} else if (complete) {
			REQUIRE(f->s == parent->s, "gap before %s", f->name);
		}
		last_child[f->depth - 1] = i;
	}
	free(open);
	free(last_child);
	free(children);
}

static uint64_t root_children_sum(const struct doc *d)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < d->n; i++)
		if (d->frames[i].depth == 1)
			sum += d->frames[i].n;
	return sum;
}

static double root_children_px(const struct doc *d)
{
	double sum = 0;
	for (size_t i = 0; i < d->n; i++)
		if (d->frames[i].depth == 1)
			sum += d->frames[i].width;
	return sum;
}

/* ------------------------------------------------------ outside tools */

/* Write TEXT to a temporary file; its path (valid until tu_cleanup).  */
static const char *temp_file(const char *text, const char *name)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", tu_temp_dir(), name);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* Run python3 with SCRIPT on the document SVG; its standard output, or
 * NULL when it failed (a parse error).  */
static char *python_on(const char *svg, const char *script)
{
	const char *path = temp_file(svg, "graph.svg");
	char cmd[PATH_MAX + 2048];
	snprintf(cmd, sizeof(cmd), "python3 -c '%s' '%s'", script, path);
	FILE *pipe = popen(cmd, "r");
	ck_assert_ptr_nonnull(pipe);
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), pipe)) > 0)
		fwrite(buf, 1, got, mem);
	fclose(mem);
	int status = pclose(pipe);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

#define MINIDOM "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])"

static void assert_valid_xml(const char *svg)
{
	char *out = python_on(svg, MINIDOM);
	ck_assert_msg(out != NULL, "not well-formed XML (python3 minidom)");
	free(out);
}

/* node --check on the script of SVG (skipped without node).  */
static void assert_script_parses(const char *svg)
{
	if (system("node --version >/dev/null 2>&1") != 0)
		return;
	const char *start = strstr(svg, "<script type=\"text/ecmascript\"><![CDATA[");
	ck_assert_ptr_nonnull(start);
	start = strstr(start, "CDATA[") + 6;
	const char *end = strstr(start, "]]></script>");
	ck_assert_ptr_nonnull(end);
	char *js = strndup(start, (size_t)(end - start));
	const char *path = temp_file(js, "script.js");
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "node --check '%s'", path);
	ck_assert_msg(system(cmd) == 0, "node --check rejects the script");
	free(js);
}

static char *read_file(const char *path)
{
	return tu_read_file(path);
}

/* Compare SVG with the golden file NAME, the version made neutral.  */
static void assert_golden(const char *svg, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), DATA "%s", name);
	char from[64];
	snprintf(from, sizeof(from), "written by cprof %s\n", CP_VERSION);
	const char *at = strstr(svg, from);
	ck_assert_ptr_nonnull(at);
	char *got = NULL;
	if (asprintf(&got, "%.*swritten by cprof VERSION\n%s", (int)(at - svg),
		     svg, at + strlen(from)) < 0)
		ck_abort_msg("out of memory");
	const char *update = getenv("CP_UPDATE_GOLDEN");
	if (update && strcmp(update, "1") == 0) {
		FILE *f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs(got, f);
		fclose(f);
	}
	char *want = read_file(path);
	ck_assert_msg(want != NULL, "cannot read %s (CP_UPDATE_GOLDEN=1 "
				    "writes it)", path);
	if (strcmp(want, got) != 0) {
		size_t i = 0;
		while (want[i] && want[i] == got[i])
			i++;
		size_t from_i = i > 80 ? i - 80 : 0;
		ck_abort_msg("%s differs at byte %zu:\n--- want\n%.200s\n--- got\n%.200s",
			     name, i, want + from_i, got + from_i);
	}
	free(want);
	free(got);
}

static void teardown(void)
{
	tu_cleanup();
}

/* ----------------------------------------------------------- goldens */

START_TEST(golden_basic)
{
	struct cp_profile *p = basic_profile();
	char *svg = svg_of(p, NULL, NULL);
	assert_golden(svg, "svg-basic.svg");
	assert_valid_xml(svg);
	assert_script_parses(svg);

	struct doc d = parse(svg);
	check_tree(&d, true);
	ck_assert_uint_eq(d.total, 20);
	ck_assert_uint_eq(root_children_sum(&d), 20);
	ck_assert_uint_eq(must_find(&d, "main")->n, 20);
	ck_assert_uint_eq(must_find(&d, "main;parse_args")->n, 2);
	ck_assert_uint_eq(must_find(&d, "main;work")->n, 15);
	/* both threads, other addresses: one frame */
	ck_assert_uint_eq(must_find(&d, "main;work;compute")->n, 12);
	ck_assert_uint_eq(must_find(&d, "main;work;compute;sum_squares_[i]")->n, 11);
	ck_assert_uint_eq(must_find(&d, "main;work;memcpy")->n, 3);
	ck_assert_uint_eq(must_find(&d, "main;read;entry_SYSCALL_64_[k];ksys_read")->n, 2);
	ck_assert_uint_eq(must_find(&d, "main;[unknown]")->n, 1);
	ck_assert_uint_eq(d.n, 11);
	/* alphabetical, not by count: [unknown] < parse_args < read < work */
	ck_assert_str_eq(d.frames[2].name, "[unknown]");
	ck_assert_str_eq(d.frames[3].name, "parse_args");
	ck_assert_str_eq(d.frames[4].name, "read");
	/* the flame grows upwards */
	ck_assert_double_gt(d.frames[0].y, d.frames[1].y);
	ck_assert_str_eq(must_find(&d, "main;parse_args")->title,
			 "parse_args (2 samples, 10.00%)");
	ck_assert_str_eq(must_find(&d, "main;[unknown]")->title,
			 "[unknown] (1 sample, 5.00%)");

	/* the header comment */
	ck_assert_ptr_nonnull(strstr(svg, "target: ./demo -\xe2\x80\x90" "fast (pid 4242)\n"));
	ck_assert_ptr_nonnull(strstr(svg, "command: cprof-attach -\xe2\x80\x90svg"));
	ck_assert_ptr_nonnull(strstr(svg, "samples: 20\n"));
	ck_assert_ptr_nonnull(strstr(svg, "date: 2023-11-14 22:13:20 UTC\n"));
	/* the controls */
	ck_assert_ptr_nonnull(strstr(svg, "id=\"reset\""));
	ck_assert_ptr_nonnull(strstr(svg, ">Reset zoom</text>"));
	ck_assert_ptr_nonnull(strstr(svg, "id=\"search\""));
	ck_assert_ptr_nonnull(strstr(svg, "id=\"matched\""));
	ck_assert_ptr_nonnull(strstr(svg, "id=\"case\""));
	ck_assert_ptr_nonnull(strstr(svg, "id=\"details\""));
	ck_assert_ptr_nonnull(strstr(svg, ">Flame Graph</text>"));
	/* self-contained */
	ck_assert_ptr_null(strstr(svg, "http://www.w3.org/1999/xlink"));
	ck_assert_ptr_null(strstr(svg, "<script src"));
	ck_assert_ptr_null(strstr(svg, "href"));
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(golden_inverted)
{
	struct cp_profile *p = basic_profile();
	struct cp_svg_options o = defaults;
	o.inverted = true;
	char *svg = svg_of(p, &o, NULL);
	assert_golden(svg, "svg-inverted.svg");
	assert_valid_xml(svg);
	struct doc d = parse(svg);
	check_tree(&d, true);
	/* leaves merged at the top: the root, then the leaf functions */
	ck_assert_double_lt(d.frames[0].y, d.frames[1].y);
	ck_assert_uint_eq(must_find(&d, "sum_squares_[i]")->n, 11);
	ck_assert_uint_eq(must_find(&d, "sum_squares_[i];compute;work;main")->n, 11);
	ck_assert_uint_eq(must_find(&d, "compute;work;main")->n, 1);
	ck_assert_uint_eq(must_find(&d, "ksys_read;entry_SYSCALL_64_[k];read;main")->n, 2);
	ck_assert_uint_eq(root_children_sum(&d), 20);
	ck_assert_ptr_nonnull(strstr(svg, ">Icicle Graph</text>"));
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

/* Before and after with known deltas.  Self samples change in exactly:
 * main;a;x (+10), main;c (-3), main;d (+3, new).  main;b;x has the same
 * leaf name as main;a;x but is unchanged: frames match by their path.  */
static void diff_profiles(struct cp_profile **before, struct cp_profile **after)
{
	*before = new_profile();
	add_stack(*before, 1, "main;a;x", 10);
	add_stack(*before, 1, "main;a;y", 5);
	add_stack(*before, 1, "main;b;x", 10);
	add_stack(*before, 1, "main;c", 4);
	add_stack(*before, 2, "main;gone", 2); /* only before: not drawn */
	*after = new_profile();
	add_stack(*after, 3, "main;a;x", 20);
	add_stack(*after, 3, "main;a;y", 5);
	add_stack(*after, 3, "main;b;x", 6);
	add_stack(*after, 4, "main;b;x", 4);
	add_stack(*after, 3, "main;c", 1);
	add_stack(*after, 3, "main;d", 3);
}

#define NEUTRAL 0xf5f5f5u

static bool is_red(unsigned rgb)
{
	return (rgb >> 16) == 0xff && ((rgb >> 8) & 0xff) == (rgb & 0xff) &&
	       (rgb & 0xff) <= 240;
}

static bool is_blue(unsigned rgb)
{
	return (rgb & 0xff) == 0xff && ((rgb >> 8) & 0xff) == (rgb >> 16) &&
	       (rgb >> 16) <= 240;
}

START_TEST(golden_diff)
{
	struct cp_profile *before, *after;
	diff_profiles(&before, &after);
	struct cp_svg_options o = defaults;
	o.before = before;
	char *svg = svg_of(after, &o, NULL);
	assert_golden(svg, "svg-diff.svg");
	assert_valid_xml(svg);
	struct doc d = parse(svg);
	check_tree(&d, true);
	/* widths from AFTER */
	ck_assert_uint_eq(d.total, 39);
	ck_assert_uint_eq(root_children_sum(&d), 39);
	ck_assert_ptr_null(find(&d, "main;gone"));
	/* exactly the changed frames are coloured, by how much */
	ck_assert_uint_eq(must_find(&d, "main;a;x")->rgb, 0xff0000); /* largest */
	ck_assert_uint_eq(must_find(&d, "main;d")->rgb, 0xffacac);   /* 3/10 */
	ck_assert_uint_eq(must_find(&d, "main;c")->rgb, 0xacacff);   /* -3/10 */
	const char *same[] = {"", "main", "main;a", "main;a;y", "main;b",
			      "main;b;x"};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		ck_assert_msg(must_find(&d, same[i])->rgb == NEUTRAL,
			      "%s coloured #%06x", same[i],
			      must_find(&d, same[i])->rgb);
	size_t coloured = 0;
	for (size_t i = 0; i < d.n; i++)
		coloured += d.frames[i].rgb != NEUTRAL;
	ck_assert_uint_eq(coloured, 3);
	/* tooltips: both counts and the delta */
	ck_assert_str_eq(must_find(&d, "main;a;x")->title,
			 "x (20 samples, 51.28%; before 10; delta +10, "
			 "+100.00%; self delta +10)");
	ck_assert_str_eq(must_find(&d, "main;c")->title,
			 "c (1 sample, 2.56%; before 4; delta -3, -75.00%; "
			 "self delta -3)");
	ck_assert_str_eq(must_find(&d, "main;d")->title,
			 "d (3 samples, 7.69%; before 0; delta +3, new; "
			 "self delta +3)");
	ck_assert_str_eq(must_find(&d, "main")->title,
			 "main (39 samples, 100.00%; before 31; delta +8, "
			 "+25.81%; self delta 0)");
	ck_assert_ptr_nonnull(strstr(svg, ">Differential Flame Graph</text>"));
	ck_assert_ptr_nonnull(strstr(svg, "id=\"subtitle\""));
	doc_free(&d);
	free(svg);
	cp_profile_free(before);
	cp_profile_free(after);
}
END_TEST

/* ------------------------------------------------------------- diffs */

START_TEST(diff_normalize)
{
	/* BEFORE is AFTER twice over: the same shape.  */
	struct cp_profile *before = new_profile(), *after = new_profile();
	const char *stacks[] = {"main;a;x", "main;a", "main;b;y;z", "main;c"};
	for (size_t i = 0; i < 4; i++) {
		add_stack(after, 1, stacks[i], 3 + i);
		add_stack(before, 1, stacks[i], 2 * (3 + i));
	}
	struct cp_svg_options o = defaults;
	o.before = before;
	o.normalize = true;
	char *svg = svg_of(after, &o, NULL);
	assert_valid_xml(svg);
	struct doc d = parse(svg);
	for (size_t i = 0; i < d.n; i++)
		ck_assert_msg(d.frames[i].rgb == NEUTRAL, "%s coloured",
			      d.frames[i].name);
	ck_assert_str_eq(must_find(&d, "main;a;x")->title,
			 "x (3 samples, 16.67%; before 3; delta 0, +0.00%; "
			 "self delta 0)");
	doc_free(&d);
	free(svg);

	/* not normalized: everything with self samples shrank */
	o.normalize = false;
	svg = svg_of(after, &o, NULL);
	d = parse(svg);
	for (size_t i = 0; i < d.n; i++) {
		bool leafy = strcmp(d.frames[i].name, "x") == 0 ||
			     strcmp(d.frames[i].name, "a") == 0 ||
			     strcmp(d.frames[i].name, "z") == 0 ||
			     strcmp(d.frames[i].name, "c") == 0;
		if (leafy)
			ck_assert_msg(is_blue(d.frames[i].rgb), "%s #%06x",
				      d.frames[i].name, d.frames[i].rgb);
		else
			ck_assert_uint_eq(d.frames[i].rgb, NEUTRAL);
	}
	doc_free(&d);
	free(svg);

	/* fractional scaling: 7 after, 3 before */
	struct cp_profile *b3 = new_profile(), *a7 = new_profile();
	add_stack(b3, 1, "main;f", 1);
	add_stack(b3, 1, "main;g", 2);
	add_stack(a7, 1, "main;f", 3);
	add_stack(a7, 1, "main;g", 4);
	o.before = b3;
	o.normalize = true;
	svg = svg_of(a7, &o, NULL);
	assert_valid_xml(svg);
	d = parse(svg);
	/* f: 3 vs 7/3 = 2.33 grew; g: 4 vs 4.67 shrank */
	ck_assert(is_red(must_find(&d, "main;f")->rgb));
	ck_assert(is_blue(must_find(&d, "main;g")->rgb));
	ck_assert_uint_eq(must_find(&d, "main")->rgb, NEUTRAL);
	ck_assert_str_eq(must_find(&d, "main;f")->title,
			 "f (3 samples, 42.86%; before 2.3; delta +0.7, "
			 "+28.57%; self delta +0.7)");
	doc_free(&d);
	free(svg);
	cp_profile_free(b3);
	cp_profile_free(a7);
	cp_profile_free(before);
	cp_profile_free(after);
}
END_TEST

START_TEST(diff_inverted)
{
	struct cp_profile *before, *after;
	diff_profiles(&before, &after);
	struct cp_svg_options o = defaults;
	o.before = before;
	o.inverted = true;
	char *svg = svg_of(after, &o, NULL);
	assert_valid_xml(svg);
	struct doc d = parse(svg);
	check_tree(&d, true);
	/* Colours follow the samples each frame is the leaf of: x merges
	 * both paths (30 after, 20 before), its growth all through a.  */
	const struct frame *x = must_find(&d, "x");
	ck_assert_uint_eq(x->n, 30);
	ck_assert_uint_eq(x->rgb, 0xff0000);
	ck_assert_uint_eq(must_find(&d, "x;a")->rgb, 0xff0000);
	ck_assert_uint_eq(must_find(&d, "x;a;main")->rgb, 0xff0000);
	ck_assert_uint_eq(must_find(&d, "x;b")->rgb, NEUTRAL);
	ck_assert_uint_eq(must_find(&d, "x;b;main")->rgb, NEUTRAL);
	ck_assert_uint_eq(must_find(&d, "y;a;main")->rgb, NEUTRAL);
	ck_assert_uint_eq(must_find(&d, "c")->rgb, 0xacacff);
	ck_assert_uint_eq(must_find(&d, "c;main")->rgb, 0xacacff);
	ck_assert_uint_eq(must_find(&d, "d;main")->rgb, 0xffacac);
	ck_assert_uint_eq(d.frames[0].rgb, NEUTRAL); /* the root is no leaf */
	ck_assert_str_eq(x->title, "x (30 samples, 76.92%; before 20; "
				   "delta +10, +50.00%)");
	ck_assert_ptr_nonnull(strstr(svg, ">Differential Icicle Graph</text>"));
	doc_free(&d);
	free(svg);
	cp_profile_free(before);
	cp_profile_free(after);
}
END_TEST

/* ---------------------------------------------------------- options */

START_TEST(minwidth_prunes)
{
	struct cp_profile *p = new_profile();
	add_stack(p, 1, "main;hot;hotter", 1000000);
	char name[64];
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "main;cold;rare_%03d;deeper", i);
		add_stack(p, 1, name, 1 + i % 3);
	}
	/* minwidth 0: everything with a sample */
	struct cp_svg_options o = defaults;
	o.minwidth = 0;
	char *all = svg_of(p, &o, NULL);
	struct doc d = parse(all);
	check_tree(&d, true);
	ck_assert_uint_eq(d.n, 1 + 1 + 2 + 1 + 500 * 2);
	ck_assert_uint_eq(root_children_sum(&d), d.total);
	ck_assert_double_eq_tol(root_children_px(&d), d.area, 0.05);
	doc_free(&d);

	/* default 0.1 px: the 1-3 sample frames (0.001-0.004 px) go, and with
	 * them their subtrees; cold (1000 samples, 1.2 px) stays */
	char *pruned = svg_of(p, NULL, NULL);
	assert_valid_xml(pruned);
	d = parse(pruned);
	check_tree(&d, false);
	ck_assert_uint_eq(d.n, 5);
	ck_assert_ptr_nonnull(find(&d, "main;cold"));
	ck_assert_ptr_null(find(&d, "main;cold;rare_000"));
	ck_assert_uint_lt(strlen(pruned), strlen(all) / 10);
	ck_assert_ptr_nonnull(strstr(pruned, "frames: 5 drawn, 1000 narrower than 0.1 px left out"));
	/* the levels drawn: only as deep as the frames drawn */
	int max_depth = 0;
	for (size_t i = 0; i < d.n; i++)
		if (d.frames[i].depth > max_depth)
			max_depth = d.frames[i].depth;
	ck_assert_int_eq(max_depth, 3);
	ck_assert_double_eq(d.base, 36 + 3 * 16);
	doc_free(&d);

	/* a wide minwidth: nothing under 2 px */
	o.minwidth = 2;
	char *wide = svg_of(p, &o, NULL);
	d = parse(wide);
	for (size_t i = 0; i < d.n; i++)
		ck_assert_double_ge(d.frames[i].width, 2 - 0.05);
	ck_assert_ptr_null(find(&d, "main;cold"));
	ck_assert_ptr_nonnull(find(&d, "main;hot;hotter"));
	doc_free(&d);
	free(wide);
	free(pruned);
	free(all);
	cp_profile_free(p);
}
END_TEST

START_TEST(escaping)
{
	struct cp_profile *p = new_profile();
	struct cp_profile_meta *m = cp_profile_meta(p);
	snprintf(m->command, sizeof(m->command), "cprof --title '<b>&--x' -->");
	snprintf(m->target, sizeof(m->target), "./a.out -");
	add_stack(p, 1, "main;operator<<(std::ostream&, Foo const&)", 5);
	add_stack(p, 1, "main;std::vector<int>::push_back", 4);
	add_stack(p, 1, "main;say \"hi\";it's", 3);
	add_stack(p, 1, "main;tricky]]>cdata", 2);
	add_stack(p, 1, "main;ctl\x01" "char\x7f", 2);
	add_stack(p, 1, "main;bad\xff\xfeutf8", 2);
	add_stack(p, 1, "main;caf\xc3\xa9::na\xc3\xafve", 2);
	struct cp_svg_options o = defaults;
	o.title = "A <title> & \"more\"";
	o.comment = "made with -- dashes --> and <tags>\nsecond line -";
	char *svg = svg_of(p, &o, NULL);
	assert_valid_xml(svg);
	ck_assert_ptr_null(strstr(svg, "operator<<"));
	ck_assert_ptr_nonnull(strstr(svg, "operator&lt;&lt;(std::ostream&amp;, Foo const&amp;)"));
	ck_assert_ptr_nonnull(strstr(svg, ">A &lt;title&gt; &amp; &quot;more&quot;</text>"));
	/* what a parser reads back */
	char *titles = python_on(svg,
		"import xml.dom.minidom,sys\n"
		"d = xml.dom.minidom.parse(sys.argv[1])\n"
		"for g in d.getElementsByTagName(\"g\"):\n"
		"  if g.getAttribute(\"class\") == \"frame\":\n"
		"    t = g.getElementsByTagName(\"title\")[0].firstChild.data\n"
		"    sys.stdout.buffer.write((t[:t.rindex(\" (\")] + \"\\n\").encode())\n"
		"for t in d.getElementsByTagName(\"text\"):\n"
		"  if t.getAttribute(\"id\") == \"title\":\n"
		"    sys.stdout.buffer.write((t.firstChild.data + \"\\n\").encode())\n");
	ck_assert_ptr_nonnull(titles);
	ck_assert_str_eq(titles,
			 "all\n"
			 "main\n"
			 "bad??utf8\n"
			 "caf\xc3\xa9::na\xc3\xafve\n"
			 "ctl?char?\n"
			 "operator<<(std::ostream&, Foo const&)\n"
			 "say \"hi\"\n"
			 "it's\n"
			 "std::vector<int>::push_back\n"
			 "tricky]]>cdata\n"
			 "A <title> & \"more\"\n");
	/* the comment stays one comment */
	char *comment = python_on(svg,
		"import xml.dom.minidom,sys\n"
		"d = xml.dom.minidom.parse(sys.argv[1])\n"
		"print(sum(1 for n in d.childNodes if n.nodeType == n.COMMENT_NODE))\n");
	ck_assert_ptr_nonnull(comment);
	ck_assert_str_eq(comment, "1\n");
	struct doc d = parse(svg);
	check_tree(&d, true);
	/* labels are cut on character boundaries */
	const struct frame *cafe = must_find(&d, "main;caf\xc3\xa9::na\xc3\xafve");
	ck_assert(strlen(cafe->text) == 0 ||
		  strncmp(cafe->text, "caf\xc3\xa9", 5) == 0);
	doc_free(&d);
	free(comment);
	free(titles);
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(labels_fit)
{
	struct cp_profile *p = new_profile();
	add_stack(p, 1, "main;a_rather_long_function_name_that_will_not_fit_in_a_narrow_frame", 1);
	add_stack(p, 1, "main;z", 99);
	char *svg = svg_of(p, NULL, NULL);
	struct doc d = parse(svg);
	/* 11.8 px: (11.8 - 6) / 7.08 < 3 characters: no label */
	const struct frame *f = must_find(&d, "main;a_rather_long_function_name_that_will_not_fit_in_a_narrow_frame");
	ck_assert_str_eq(f->text, "");
	doc_free(&d);
	free(svg);

	struct cp_svg_options o = defaults;
	o.width = 2020; /* 20 px a sample */
	svg = svg_of(p, &o, NULL);
	d = parse(svg);
	f = must_find(&d, "main;a_rather_long_function_name_that_will_not_fit_in_a_narrow_frame");
	ck_assert_double_eq_tol(f->width, 20, 0.01);
	ck_assert_str_eq(f->text, ""); /* (20 - 6) / 7.08 < 3 characters */
	doc_free(&d);
	free(svg);
	o.width = 10020; /* 100 px a sample: 13 characters */
	svg = svg_of(p, &o, NULL);
	d = parse(svg);
	f = must_find(&d, "main;a_rather_long_function_name_that_will_not_fit_in_a_narrow_frame");
	ck_assert_str_eq(f->text, "a_rather_lo..");
	ck_assert_str_eq(must_find(&d, "main;z")->text, "z");
	ck_assert_ptr_nonnull(strstr(svg, "width=\"10020\""));
	ck_assert_double_eq(d.area, 10000);
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(width_title_unit)
{
	struct cp_profile *p = basic_profile();
	cp_profile_set_count_type(p, "space", "bytes");
	struct cp_svg_options o = defaults;
	o.width = 800;
	o.title = "Heap";
	char *svg = svg_of(p, &o, NULL);
	assert_valid_xml(svg);
	ck_assert_ptr_nonnull(strstr(svg, "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"800\""));
	ck_assert_ptr_nonnull(strstr(svg, ">Heap</text>"));
	ck_assert_ptr_nonnull(strstr(svg, "data-unit=\"bytes\""));
	ck_assert_ptr_nonnull(strstr(svg, "bytes: 20\n"));
	struct doc d = parse(svg);
	check_tree(&d, true);
	ck_assert_double_eq(d.frames[0].width, 780);
	ck_assert_str_eq(must_find(&d, "main;work")->title, "work (15 bytes, 75.00%)");
	ck_assert_str_eq(must_find(&d, "main;[unknown]")->title, "[unknown] (1 byte, 5.00%)");
	doc_free(&d);
	free(svg);
	/* the option wins over the profile's unit */
	o.unit = "allocations";
	svg = svg_of(p, &o, NULL);
	d = parse(svg);
	ck_assert_str_eq(must_find(&d, "main;work")->title, "work (15 allocations, 75.00%)");
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(thousands)
{
	struct cp_profile *p = new_profile();
	add_stack(p, 1, "main;big", 1234567);
	add_stack(p, 1, "main;small", 1000);
	char *svg = svg_of(p, NULL, NULL);
	struct doc d = parse(svg);
	ck_assert_str_eq(must_find(&d, "main;big")->title, "big (1,234,567 samples, 99.92%)");
	ck_assert_str_eq(must_find(&d, "main;small")->title, "small (1,000 samples, 0.08%)");
	ck_assert_str_eq(d.frames[0].title, "all (1,235,567 samples, 100.00%)");
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

/* Colour channels of the default palette per kind.  */
static void assert_kind(const struct doc *d, const char *path, const char *kind)
{
	unsigned rgb = must_find(d, path)->rgb;
	unsigned r = rgb >> 16, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
	bool ok;
	if (strcmp(kind, "user") == 0) /* red */
		ok = r >= 205 && g >= 40 && g < 120 && b < 80;
	else if (strcmp(kind, "library") == 0) /* yellow */
		ok = r >= 185 && g >= 180 && b < 80;
	else if (strcmp(kind, "kernel") == 0) /* orange */
		ok = r >= 225 && g >= 125 && g < 170 && b < 25;
	else if (strcmp(kind, "inlined") == 0) /* aqua */
		ok = r < 110 && g >= 165 && b >= 165;
	else /* unknown: gray */
		ok = r == g && g == b && r >= 160 && r < 210;
	ck_assert_msg(ok, "%s: #%06x is not a %s colour", path, rgb, kind);
}

START_TEST(default_palette_kinds)
{
	struct cp_profile *p = basic_profile();
	add_stack(p, 1, "main;libfoo.so.1+0x1f30", 1);
	add_stack(p, 1, "main;helper@libstdc++.so.6", 1);
	add_stack(p, 1, "main;from_vdso@[vdso]", 1);
	char *svg = svg_of(p, NULL, NULL);
	struct doc d = parse(svg);
	assert_kind(&d, "main", "user");
	assert_kind(&d, "main;work;compute", "user");
	assert_kind(&d, "main;work;compute;sum_squares_[i]", "inlined");
	assert_kind(&d, "main;work;memcpy", "library");
	assert_kind(&d, "main;helper", "library");
	assert_kind(&d, "main;from_vdso", "library");
	assert_kind(&d, "main;read;entry_SYSCALL_64_[k]", "kernel");
	assert_kind(&d, "main;read;entry_SYSCALL_64_[k];ksys_read", "kernel");
	assert_kind(&d, "main;[unknown]", "unknown");
	assert_kind(&d, "main;libfoo.so.1+0x1f30", "unknown");
	/* a name keeps its colour */
	struct cp_profile *q = new_profile();
	add_stack(q, 1, "other;compute@demo", 1);
	char *svg2 = svg_of(q, NULL, NULL);
	struct doc d2 = parse(svg2);
	ck_assert_uint_eq(must_find(&d2, "other;compute")->rgb,
			  must_find(&d, "main;work;compute")->rgb);
	doc_free(&d2);
	free(svg2);
	cp_profile_free(q);
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(palettes)
{
	struct cp_profile *p = basic_profile();
	const char *names[] = {"default", "hot", "mem", "io", "red", "green",
			       "blue", "yellow", "purple", "aqua", "orange",
			       "gray"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct cp_svg_options o = defaults;
		o.colors = names[i];
		char *svg = svg_of(p, &o, NULL);
		struct doc d = parse(svg);
		for (size_t j = 0; j < d.n; j++) {
			unsigned rgb = d.frames[j].rgb;
			unsigned r = rgb >> 16, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
			if (strcmp(names[i], "hot") == 0)
				ck_assert(r >= 205 && g < 230 && b < 55);
			if (strcmp(names[i], "blue") == 0)
				ck_assert(b >= 205 && r < 140 && g < 140);
			if (strcmp(names[i], "mem") == 0)
				ck_assert(r == 0 && g >= 190);
		}
		doc_free(&d);
		free(svg);
	}
	/* an unknown palette: an error and not a byte written */
	struct cp_svg_options o = defaults;
	o.colors = "rainbow";
	int rc;
	char *svg = svg_of(p, &o, &rc);
	ck_assert_int_eq(rc, -CP_E_INVAL);
	ck_assert_str_eq(svg, "");
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(empty_profile)
{
	struct cp_profile *p = new_profile();
	char *svg = svg_of(p, NULL, NULL);
	assert_valid_xml(svg);
	ck_assert_ptr_nonnull(strstr(svg, ">No samples</text>"));
	ck_assert_ptr_null(strstr(svg, "class=\"frame\""));
	free(svg);
	/* a sample with an empty stack: just the root */
	/* (a non-empty stack first: the profile's stack store starts empty) */
	add_stack(p, 1, "unused", 1);
	struct cp_profile *q = new_profile();
	uint32_t loc = cp_profile_add_location(q, 0, 0, NULL, 0);
	ck_assert_uint_ne(loc, UINT32_MAX);
	ck_assert_uint_ne(cp_profile_intern_stack(q, &loc, 1), UINT32_MAX);
	cp_profile_free(p);
	p = q;
	uint32_t none[1] = {0};
	uint32_t id = cp_profile_intern_stack(p, none, 0);
	ck_assert_int_eq(cp_profile_add(p, 1, id, 3), 0);
	svg = svg_of(p, NULL, NULL);
	assert_valid_xml(svg);
	struct doc d = parse(svg);
	ck_assert_uint_eq(d.n, 1);
	ck_assert_uint_eq(d.frames[0].n, 3);
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

START_TEST(write_error)
{
	struct cp_profile *p = basic_profile();
	FILE *full = fopen("/dev/full", "w");
	if (!full) /* no /dev/full here */
		return;
	ck_assert_int_eq(cp_write_svg(p, NULL, full), -CP_E_SYS);
	fclose(full);
	cp_profile_free(p);
}
END_TEST

/* The folded reader and the API give the same graph.  */
START_TEST(from_folded)
{
	FILE *in = fopen(DATA "svg-basic.folded", "r");
	ck_assert_ptr_nonnull(in);
	struct cp_profile *folded = NULL;
	char error[256] = "";
	int rc = cp_read_folded(in, "svg-basic.folded", &folded, error, sizeof(error));
	fclose(in);
	ck_assert_msg(rc == 0, "%s", error);
	cp_profile_meta(folded)->time_nanos = UINT64_C(1700000000) * 1000000000u;
	char *a = svg_of(folded, NULL, NULL);
	struct cp_profile *api = basic_profile();
	char *b = svg_of(api, NULL, NULL);
	struct doc da = parse(a), db = parse(b);
	ck_assert_uint_eq(da.n, db.n);
	for (size_t i = 0; i < da.n; i++) {
		ck_assert_str_eq(da.frames[i].title, db.frames[i].title);
		ck_assert_uint_eq(da.frames[i].s, db.frames[i].s);
		ck_assert_uint_eq(da.frames[i].n, db.frames[i].n);
		ck_assert_double_eq(da.frames[i].y, db.frames[i].y);
	}
	/* no modules in folded text: the suffixes still tell kernel, inlined
	 * and unknown frames */
	assert_kind(&da, "main;read;entry_SYSCALL_64_[k]", "kernel");
	assert_kind(&da, "main;work;compute;sum_squares_[i]", "inlined");
	assert_kind(&da, "main;[unknown]", "unknown");
	doc_free(&da);
	doc_free(&db);
	free(a);
	free(b);
	cp_profile_free(api);
	cp_profile_free(folded);
}
END_TEST

/* ----------------------------------------------------------- script */

/* The script's behaviour in a DOM: jsdom under node, when both are there
 * (NODE_PATH=/path/to/node_modules for a jsdom installed elsewhere);
 * skipped otherwise.  jsdom does not run an SVG document's own <script>,
 * so the harness evaluates it after loading.  */
static const char behaviour_js[] =
"const { JSDOM } = require('jsdom');\n"
"const fs = require('fs');\n"
"const text = fs.readFileSync(process.argv[2], 'utf8');\n"
"const dom = new JSDOM(text, { contentType: 'image/svg+xml', runScripts: 'outside-only' });\n"
"const w = dom.window, doc = w.document;\n"
"w.eval(text.split('<![CDATA[').pop().split(']]></script>')[0]);\n"
"function eq(got, want, what) {\n"
"  if (got !== want) { console.error(what + ': got ' + JSON.stringify(got) + ', want ' + JSON.stringify(want)); process.exit(1); }\n"
"}\n"
"const cp = w.cprof, fr = cp.frames;\n"
"const byName = n => fr.find(f => f.name === n);\n"
"const cls = f => f.g.getAttribute('class');\n"
"const click = el => el.dispatchEvent(new w.MouseEvent('click', { bubbles: true }));\n"
"const id = i => doc.getElementById(i);\n"
"eq(fr.length, 11, 'frames');\n"
"eq(fr.map(f => f.d).join(''), '01222342343', 'depths');\n"
"/* zoom: click compute's rectangle */\n"
"click(byName('compute').rect);\n"
"eq(byName('compute').rect.getAttribute('x'), '10.0', 'zoomed x');\n"
"eq(byName('compute').rect.getAttribute('width'), '1180.0', 'zoomed width');\n"
"eq(byName('sum_squares_[i]').rect.getAttribute('width'), '1081.7', 'child width');\n"
"eq(byName('sum_squares_[i]').text.textContent, 'sum_squares_[i]', 'child label');\n"
"for (const n of ['all', 'main', 'work']) eq(cls(byName(n)), 'frame anc', n + ' kept');\n"
"for (const n of ['memcpy', 'read', 'parse_args', '[unknown]']) eq(cls(byName(n)), 'frame hide', n + ' hidden');\n"
"eq(byName('work').rect.getAttribute('width'), '1180.0', 'ancestor width');\n"
"eq(id('reset').getAttribute('class'), 'control', 'reset shown');\n"
"click(id('reset'));\n"
"eq(id('reset').getAttribute('class'), 'control off', 'reset dimmed');\n"
"eq(byName('memcpy').rect.getAttribute('x'), '1013.0', 'memcpy back');\n"
"eq(cls(byName('memcpy')), 'frame', 'memcpy shown');\n"
"eq(byName('compute').rect.getAttribute('width'), '708.0', 'compute back');\n"
"/* search through the control; nested matches count once */\n"
"w.prompt = () => '^(work|compute|sum)';\n"
"click(id('search'));\n"
"eq(id('matched').textContent, 'Matched: 75.00 %', 'matched');\n"
"eq(fr.filter(f => f.match).map(f => f.name).join(','), 'work,compute,sum_squares_[i]', 'matches');\n"
"eq(cls(byName('work')), 'frame match', 'highlighted');\n"
"cp.search('MAIN');\n"
"eq(id('matched').textContent, 'Matched: 0.00 %', 'case-sensitive');\n"
"click(id('case'));\n"
"eq(id('case').getAttribute('aria-pressed'), 'false', 'case toggle');\n"
"eq(id('matched').textContent, 'Matched: 100.00 %', 'ignoring case');\n"
"cp.setIgnoreCase(false);\n"
"cp.search('read|memcpy|\\\\[unknown');\n"
"eq(id('matched').textContent, 'Matched: 30.00 %', 'alternatives');\n"
"eq(cp.search('['), false, 'bad pattern');\n"
"eq(id('details').textContent.indexOf('Search: '), 0, 'error shown');\n"
"/* hover */\n"
"byName('compute').rect.dispatchEvent(new w.MouseEvent('mouseover', { bubbles: true }));\n"
"eq(id('details').textContent, 'compute (12 samples, 60.00%)', 'details');\n"
"/* Ctrl-F asks; an empty answer clears */\n"
"let asked = 0;\n"
"w.prompt = () => { asked++; return ''; };\n"
"doc.dispatchEvent(new w.KeyboardEvent('keydown', { key: 'f', ctrlKey: true, bubbles: true }));\n"
"eq(asked, 1, 'ctrl-f');\n"
"eq(id('matched').textContent, '', 'cleared');\n"
"eq(fr.filter(f => f.match).length, 0, 'no highlight');\n"
"/* zoom by API, then Escape */\n"
"cp.zoom(fr.indexOf(byName('read')));\n"
"eq(cls(byName('ksys_read')), 'frame', 'descendant shown');\n"
"eq(byName('ksys_read').rect.getAttribute('width'), '1180.0', 'descendant width');\n"
"doc.dispatchEvent(new w.KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));\n"
"eq(cls(byName('memcpy')), 'frame', 'escape resets');\n"
"console.log('ok');\n";

START_TEST(script_behaviour)
{
	if (system("node -e 'require(\"jsdom\")' >/dev/null 2>&1") != 0) {
		fprintf(stderr, "script_behaviour: skipped (no node with jsdom; "
				"set NODE_PATH)\n");
		return;
	}
	struct cp_profile *p = basic_profile();
	char *svg = svg_of(p, NULL, NULL);
	char svg_path[PATH_MAX];
	snprintf(svg_path, sizeof(svg_path), "%s", temp_file(svg, "graph.svg"));
	const char *js = temp_file(behaviour_js, "behaviour.js");
	char cmd[2 * PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "node '%s' '%s'", js, svg_path);
	ck_assert_msg(system(cmd) == 0, "the script misbehaves (see above)");
	free(svg);
	cp_profile_free(p);
}
END_TEST

/* ------------------------------------------------------------- large */

/* The benchmark's profile (bench/svg_gen.h): 1,000,000 samples over
 * 100,000 distinct stacks.  Checks the size goal and the structure; the
 * time and memory are measured by bench/svg.sh.  */
START_TEST(large_profile)
{
	struct cp_profile *p = svggen_profile(&svggen_benchmark);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(cp_profile_total(p), 1000000);
	uint64_t t0 = tu_now_ns();
	char *svg = svg_of(p, NULL, NULL);
	double seconds = (double)(tu_now_ns() - t0) / 1e9;
	size_t size = strlen(svg);
	fprintf(stderr, "large_profile: %.3f s, %.2f MB of SVG\n", seconds,
		(double)size / 1e6);
	ck_assert_uint_le(size, 10u * 1000 * 1000);
	char *out = python_on(svg, "import sys,xml.parsers.expat as e; "
				   "e.ParserCreate().ParseFile(open(sys.argv[1], \"rb\"))");
	ck_assert_msg(out != NULL, "not well-formed XML (expat)");
	free(out);
	struct doc d = parse(svg);
	check_tree(&d, false);
	ck_assert_uint_eq(d.total, 1000000);
	/* what is left out is narrower than 0.1 px: the drawn root children
	 * miss less than 0.1 px for each one left out */
	ck_assert_uint_le(root_children_sum(&d), d.total);
	doc_free(&d);
	free(svg);

	cp_profile_free(p);

	/* minwidth 0 draws every frame: the root's children add up (on a
	 * smaller profile of the same shape: the large one has millions of
	 * frames) */
	struct svggen_params small = svggen_benchmark;
	small.stacks = 3000;
	small.samples = 50000;
	p = svggen_profile(&small);
	ck_assert_ptr_nonnull(p);
	struct cp_svg_options o = defaults;
	o.minwidth = 0;
	svg = svg_of(p, &o, NULL);
	d = parse(svg);
	check_tree(&d, true);
	ck_assert_uint_eq(root_children_sum(&d), 50000);
	ck_assert_double_eq_tol(root_children_px(&d), d.area, 0.05 * 4);
	doc_free(&d);
	free(svg);
	cp_profile_free(p);
}
END_TEST

static Suite *svg_suite(void)
{
	Suite *s = suite_create("svg");
	TCase *tc = tcase_create("golden");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, golden_basic);
	tcase_add_test(tc, golden_inverted);
	tcase_add_test(tc, golden_diff);
	suite_add_tcase(s, tc);

	tc = tcase_create("graph");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, diff_normalize);
	tcase_add_test(tc, diff_inverted);
	tcase_add_test(tc, minwidth_prunes);
	tcase_add_test(tc, escaping);
	tcase_add_test(tc, labels_fit);
	tcase_add_test(tc, width_title_unit);
	tcase_add_test(tc, thousands);
	tcase_add_test(tc, default_palette_kinds);
	tcase_add_test(tc, palettes);
	tcase_add_test(tc, empty_profile);
	tcase_add_test(tc, write_error);
	tcase_add_test(tc, from_folded);
	tcase_add_test(tc, script_behaviour);
	suite_add_tcase(s, tc);

	tc = tcase_create("large");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, large_profile);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(svg_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
