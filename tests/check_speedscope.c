/* Tests of the speedscope writer (cp_write_speedscope, and
 * cp_write_speedscope_log for samples in time order).
 *
 * Every file written here is read back by python3's json module and
 * checked against what the published schema
 * (https://www.speedscope.app/file-format-schema.json) requires: $schema,
 * shared.frames with names, sampled profiles with name, unit, startValue,
 * endValue, samples of frame indexes in range and weights of the same
 * length.  The checker prints the stacks it read as folded text, which
 * must match the folded writer's output for the same profile.  Small
 * hand-built profiles are also compared byte for byte with golden files
 * (fixtures/data/speedscope-*.json; CP_UPDATE_GOLDEN=1 rewrites them).  */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "testutil.h"

#define DATA CP_SOURCE_DIR "/fixtures/data/"

static struct cp_profile *profile;

static void setup(void)
{
	profile = cp_profile_new();
	ck_assert_ptr_nonnull(profile);
}

static void teardown(void)
{
	cp_profile_free(profile);
	profile = NULL;
	tu_cleanup();
}

/* ------------------------------------------------ building profiles */

static uint32_t str(const char *s)
{
	uint32_t id = cp_profile_intern(profile, s, strlen(s));
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

static struct cp_line line(const char *function, const char *file, int n,
			   bool inlined)
{
	return (struct cp_line){
		.function = str(function),
		.file = file ? str(file) : 0,
		.line = n,
		.inlined = inlined,
	};
}

static uint32_t location(uint64_t address, const struct cp_line *lines,
			 uint32_t nlines)
{
	uint32_t id = cp_profile_add_location(profile, address, 0, lines,
					      nlines);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

/* STACK(innermost, ..., root) */
#define STACK(...)                                                         \
	stack((const uint32_t[]){ __VA_ARGS__ },                           \
	      sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))

static uint32_t stack(const uint32_t *locs, size_t n)
{
	uint32_t id = cp_profile_intern_stack(profile, locs, n);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

static void add(pid_t tid, uint32_t stack_id, uint64_t count)
{
	ck_assert_int_eq(cp_profile_add(profile, tid, stack_id, count), 0);
}

/* A CPU profile as cprof-attach records it: an inlined call, one function
 * at two lines, a frame without debug information, three threads (one
 * without a name, one busier than the main thread) and a record with no
 * samples.  */
static void build_cpu(void)
{
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	meta->frequency = 99;
	meta->pid = 101;
	struct cp_line l_main = line("main", "/src/demo.c", 10, false);
	struct cp_line l_main2 = line("main", "/src/demo.c", 12, false);
	struct cp_line l_work[] = {
		line("inner", "/src/demo.c", 30, true),
		line("work", "/src/demo.c", 20, false),
	};
	struct cp_line l_leaf = line("leaf", "/src/demo.c", 40, false);
	struct cp_line l_memcpy = line("memcpy", NULL, 0, false);
	uint32_t main_ = location(0x401000, &l_main, 1);
	uint32_t main2 = location(0x401010, &l_main2, 1);
	uint32_t work = location(0x402000, l_work, 2);
	uint32_t leaf = location(0x403000, &l_leaf, 1);
	uint32_t memcpy_ = location(0x7f0000001234, &l_memcpy, 1);
	cp_profile_set_thread_name(profile, 101, "demo");
	cp_profile_set_thread_name(profile, 102, "worker 1");
	add(101, STACK(leaf, work, main_), 5);
	add(102, STACK(leaf, work, main_), 3);
	add(101, STACK(work, main2), 7);
	add(102, STACK(memcpy_, leaf, work, main_), 20);
	add(103, STACK(main_), 1);
	add(101, STACK(memcpy_, main_), 0);
}

/* A profile as read from folded text: no addresses, no threads.  */
static void build_folded(void)
{
	struct cp_line l_main = line("main", NULL, 0, false);
	struct cp_line l_thread = line("1234 worker-a", NULL, 0, false);
	struct cp_line l_work = line("work", NULL, 0, false);
	struct cp_line l_inner = line("inner", NULL, 0, true);
	struct cp_line l_leaf = line("std::vector<int>::push_back", NULL, 0,
				     false);
	uint32_t thread = location(0, &l_thread, 1);
	uint32_t main_ = location(0, &l_main, 1);
	uint32_t work = location(0, &l_work, 1);
	uint32_t work2 = location(0, &l_work, 1);
	uint32_t inner = location(0, &l_inner, 1);
	uint32_t leaf = location(0, &l_leaf, 1);
	add(0, STACK(leaf, work, main_, thread), 4);
	add(0, STACK(work, main_, thread), 2);
	add(0, STACK(inner, work2, main_, thread), 9);
	add(0, STACK(leaf, main_, thread), 1);
}

/* ----------------------------------------------------- reading back */

/* Write the profile as speedscope JSON named NAME into a temporary file;
 * returns its path (static buffer).  */
static const char *write_file(const char *file, const char *name)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/%s.speedscope.json", tu_temp_dir(),
		 file);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	int rc = cp_write_speedscope(profile, name, f);
	ck_assert_msg(rc == 0, "cp_write_speedscope: %s", cp_strerror(rc));
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* The checker: the requirements of the schema, then the stacks as folded
 * text (MODE "threads": each stack begins with its profile's name),
 * aggregated and sorted, each weight divided by SCALE (the third argument:
 * the nanoseconds of a sample), which must divide it; MODE "frames": each
 * frame name in hex.  */
static const char checker[] =
	"import json, sys\n"
	"URL = 'https://www.speedscope.app/file-format-schema.json'\n"
	"UNITS = {'none', 'nanoseconds', 'microseconds', 'milliseconds',\n"
	"         'seconds', 'bytes'}\n"
	"def fail(msg):\n"
	"    print('speedscope check: ' + msg)\n"
	"    sys.exit(1)\n"
	"def number(v):\n"
	"    return isinstance(v, (int, float)) and not isinstance(v, bool)\n"
	"def integer(v):\n"
	"    return isinstance(v, int) and not isinstance(v, bool)\n"
	"path, mode = sys.argv[1], sys.argv[2]\n"
	"scale = int(sys.argv[3]) if len(sys.argv) > 3 else 1\n"
	"with open(path, encoding='utf-8') as f:\n"
	"    doc = json.load(f)\n"
	"if not isinstance(doc, dict):\n"
	"    fail('not an object')\n"
	"for key in ('$schema', 'shared', 'profiles'):\n"
	"    if key not in doc:\n"
	"        fail('no ' + key)\n"
	"if doc['$schema'] != URL:\n"
	"    fail('$schema is %r' % doc['$schema'])\n"
	"for key in ('name', 'exporter'):\n"
	"    if key in doc and not isinstance(doc[key], str):\n"
	"        fail(key + ' is not a string')\n"
	"shared = doc['shared']\n"
	"if not isinstance(shared, dict) or not isinstance(shared.get('frames'), list):\n"
	"    fail('no shared.frames')\n"
	"frames = shared['frames']\n"
	"for i, fr in enumerate(frames):\n"
	"    if not isinstance(fr, dict) or not isinstance(fr.get('name'), str):\n"
	"        fail('frame %d has no name' % i)\n"
	"    if 'file' in fr and not isinstance(fr['file'], str):\n"
	"        fail('frame %d: file' % i)\n"
	"    for key in ('line', 'col'):\n"
	"        if key in fr and not number(fr[key]):\n"
	"            fail('frame %d: %s' % (i, key))\n"
	"profiles = doc['profiles']\n"
	"if not isinstance(profiles, list):\n"
	"    fail('profiles is not a list')\n"
	"if 'activeProfileIndex' in doc:\n"
	"    a = doc['activeProfileIndex']\n"
	"    if not integer(a) or (profiles and not 0 <= a < len(profiles)):\n"
	"        fail('activeProfileIndex %r' % a)\n"
	"stacks = {}\n"
	"for n, p in enumerate(profiles):\n"
	"    if not isinstance(p, dict):\n"
	"        fail('profile %d is not an object' % n)\n"
	"    if p.get('type') != 'sampled':\n"
	"        fail('profile %d: type %r' % (n, p.get('type')))\n"
	"    for key in ('name', 'unit', 'startValue', 'endValue', 'samples', 'weights'):\n"
	"        if key not in p:\n"
	"            fail('profile %d: no %s' % (n, key))\n"
	"    if not isinstance(p['name'], str) or p['unit'] not in UNITS:\n"
	"        fail('profile %d: name or unit' % n)\n"
	"    if not number(p['startValue']) or not number(p['endValue']) \\\n"
	"            or p['endValue'] < p['startValue']:\n"
	"        fail('profile %d: startValue, endValue' % n)\n"
	"    samples, weights = p['samples'], p['weights']\n"
	"    if not isinstance(samples, list) or not isinstance(weights, list) \\\n"
	"            or len(samples) != len(weights):\n"
	"        fail('profile %d: %d samples, %d weights' % (n, len(samples), len(weights)))\n"
	"    if p['endValue'] - p['startValue'] != sum(weights):\n"
	"        fail('profile %d: endValue is not the total weight' % n)\n"
	"    for s, w in zip(samples, weights):\n"
	"        if not number(w) or w <= 0:\n"
	"            fail('profile %d: weight %r' % (n, w))\n"
	"        if not isinstance(s, list):\n"
	"            fail('profile %d: a sample is not a list' % n)\n"
	"        names = [p['name']] if mode == 'threads' else []\n"
	"        for i in s:\n"
	"            if not integer(i) or not 0 <= i < len(frames):\n"
	"                fail('profile %d: frame index %r' % (n, i))\n"
	"            names.append(frames[i]['name'])\n"
	"        key = ';'.join(x.replace(';', ':').replace('\\n', ':') for x in names)\n"
	"        if w % scale:\n"
	"            fail('profile %d: weight %r is not a multiple of %d' % (n, w, scale))\n"
	"        stacks[key] = stacks.get(key, 0) + w // scale\n"
	"out = sys.stdout.buffer\n"
	"if mode == 'frames':\n"
	"    for fr in frames:\n"
	"        out.write(fr['name'].encode('utf-8').hex().encode() + b'\\n')\n"
	"else:\n"
	"    for key in sorted(stacks, key=lambda k: k.encode('utf-8')):\n"
	"        out.write(('%s %d\\n' % (key, stacks[key])).encode('utf-8'))\n";

/* Run the checker on PATH; returns what it printed (the caller frees).  */
static char *check_file_scaled(const char *path, const char *mode,
			       uint64_t scale)
{
	const char *tmp = tu_temp_dir();
	char script[4096], cmd[8192];
	snprintf(script, sizeof(script), "%s/check_speedscope.py", tmp);
	FILE *f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs(checker, f);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' %s %llu", script, path,
		 mode, (unsigned long long)scale);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, m);
	fclose(m);
	int status = pclose(f);
	ck_assert_msg(status == 0, "%s: status %d\n%.2000s", cmd, status, out);
	return out;
}

static char *check_file(const char *path, const char *mode)
{
	return check_file_scaled(path, mode, 1);
}

/* The nanoseconds one sample of PROFILE stands for in speedscope files
 * (the period rounded as pprof's writer does); 1 for other units.  */
static uint64_t sample_scale(void)
{
	const struct cp_profile_meta *meta = cp_profile_meta_const(profile);
	if (!cp_profile_counts_samples(profile) || meta->frequency == 0)
		return 1;
	return (1000000000ULL + meta->frequency / 2) / meta->frequency;
}

struct folded_line {
	char *stack;
	uint64_t count;
};

static int compare_lines(const void *a, const void *b)
{
	return strcmp(((const struct folded_line *)a)->stack,
		      ((const struct folded_line *)b)->stack);
}

/* The folded output of the profile with the "_[i]" of inlined frames
 * taken off (speedscope has no such mark) and lines merged again.  */
static char *folded_plain(bool threads)
{
	struct cp_folded_options o = { .threads = threads };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_int_eq(cp_write_folded(profile, &o, f), 0);
	fclose(f);
	size_t n = tu_count_lines(text), used = 0;
	struct folded_line *lines = calloc(n + 1, sizeof(*lines));
	ck_assert_ptr_nonnull(lines);
	for (char *at = text, *eol; *at; at = eol + 1) {
		eol = strchr(at, '\n');
		ck_assert_ptr_nonnull(eol);
		*eol = '\0';
		if (at[0] == '#') /* the sample type of counts in bytes */
			continue;
		char *space = strrchr(at, ' ');
		ck_assert_ptr_nonnull(space);
		*space = '\0';
		char *stack = malloc(strlen(at) + 1), *out = stack;
		ck_assert_ptr_nonnull(stack);
		for (const char *in = at; *in;) {
			/* A thread without a name is "TID " in folded
			 * output, "TID" in speedscope.  */
			if (threads && in[0] == ' ' && in[1] == ';' &&
			    !memchr(at, ';', (size_t)(in - at))) {
				in++;
				continue;
			}
			if (strncmp(in, "_[i]", 4) == 0 &&
			    (in[4] == ';' || in[4] == '\0')) {
				in += 4;
				continue;
			}
			*out++ = *in++;
		}
		*out = '\0';
		lines[used].stack = stack;
		lines[used++].count = strtoull(space + 1, NULL, 10);
	}
	qsort(lines, used, sizeof(*lines), compare_lines);
	char *result = NULL;
	f = open_memstream(&result, &len);
	for (size_t i = 0; i < used; i++) {
		uint64_t count = lines[i].count;
		while (i + 1 < used &&
		       strcmp(lines[i].stack, lines[i + 1].stack) == 0) {
			free(lines[i].stack);
			count += lines[++i].count;
		}
		fprintf(f, "%s %llu\n", lines[i].stack,
			(unsigned long long)count);
		free(lines[i].stack);
	}
	fclose(f);
	free(lines);
	free(text);
	return result;
}

/* The file at PATH is a valid speedscope file whose stacks are those of
 * the folded output.  */
static void check_against_folded(const char *path, bool threads)
{
	char *got = check_file_scaled(path, threads ? "threads" : "stacks",
				      sample_scale());
	char *want = folded_plain(threads);
	if (strcmp(got, want) != 0)
		fprintf(stderr, "--- folded\n%.4000s--- speedscope\n%.4000s",
			want, got);
	ck_assert_msg(strcmp(got, want) == 0,
		      "speedscope stacks differ from folded (see the log)");
	free(got);
	free(want);
}

static void golden(const char *path, const char *name)
{
	char golden_path[4096];
	snprintf(golden_path, sizeof(golden_path), DATA "%s", name);
	char *text = tu_read_file(path);
	ck_assert_ptr_nonnull(text);
	/* The golden files hold "cprof@VERSION", so a release does not
	 * change them.  */
	const char *version = "\"exporter\":\"cprof@" CP_VERSION "\"";
	char *at = strstr(text, version);
	ck_assert_ptr_nonnull(at);
	size_t skip = strlen(version);
	char *copy = NULL;
	ck_assert_int_ge(asprintf(&copy, "%.*s%s%s", (int)(at - text), text,
				  "\"exporter\":\"cprof@VERSION\"", at + skip),
			 0);
	free(text);
	text = copy;
	if (getenv("CP_UPDATE_GOLDEN")) {
		FILE *f = fopen(golden_path, "w");
		ck_assert_ptr_nonnull(f);
		fputs(text, f);
		ck_assert_int_eq(fclose(f), 0);
	}
	char *want = tu_read_file(golden_path);
	ck_assert_msg(want != NULL, "cannot read %s", golden_path);
	if (strcmp(want, text) != 0)
		fprintf(stderr, "--- %s\n%s--- got\n%s", golden_path, want,
			text);
	ck_assert_msg(strcmp(want, text) == 0, "%s differs (see the log)",
		      name);
	free(want);
	free(text);
}

/* ------------------------------------------------------------- tests */

START_TEST(cpu_profile)
{
	build_cpu();
	const char *path = write_file("cpu", "demo (pid 101)");
	golden(path, "speedscope-cpu.json");
	check_against_folded(path, true);
	char *text = tu_read_file(path);
	/* One profile per thread, "TID name", and the busiest (102: 23
	 * samples) shown first.  */
	ck_assert_ptr_nonnull(strstr(text, "\"name\":\"101 demo\""));
	ck_assert_ptr_nonnull(strstr(text, "\"name\":\"102 worker 1\""));
	ck_assert_ptr_nonnull(strstr(text, "\"name\":\"103\""));
	ck_assert_ptr_nonnull(strstr(text, "\"activeProfileIndex\":1,"));
	/* 23 samples at 99 Hz, in nanoseconds (the period rounded as
	 * pprof does: 10101010 ns).  */
	ck_assert_ptr_nonnull(strstr(text, "\"endValue\":232323230,"));
	ck_assert_ptr_null(strstr(text, "\"unit\":\"none\""));
	/* main at two lines: two frames.  */
	ck_assert_ptr_nonnull(strstr(text, "{\"name\":\"main\",\"file\":"
					   "\"/src/demo.c\",\"line\":12}"));
	ck_assert_ptr_nonnull(strstr(text, "{\"name\":\"memcpy\"}"));
	free(text);
}
END_TEST

START_TEST(folded_profile)
{
	build_folded();
	const char *path = write_file("folded", "folded.txt");
	golden(path, "speedscope-folded.json");
	check_against_folded(path, false);
	char *text = tu_read_file(path);
	/* No threads: one profile named after the file.  */
	ck_assert_ptr_nonnull(strstr(
		text, "{\"type\":\"sampled\",\"name\":\"folded.txt\",\"unit\":"
		      "\"none\",\"startValue\":0,\"endValue\":16,"));
	free(text);
}
END_TEST

START_TEST(bytes_unit)
{
	cp_profile_set_count_type(profile, "space", "bytes");
	struct cp_line l = line("alloc", NULL, 0, false);
	add(1, STACK(location(0x10, &l, 1)), 4096);
	const char *path = write_file("bytes", NULL);
	check_against_folded(path, true);
	char *text = tu_read_file(path);
	ck_assert_ptr_nonnull(strstr(text, "\"unit\":\"bytes\""));
	ck_assert_ptr_null(strstr(text, "\"name\":\"bytes"));
	free(text);
}
END_TEST

/* Names that need escaping in JSON come back as they were.  */
START_TEST(escaping)
{
	static const char *const names[] = {
		"main",
		"a \"quoted\" name",
		"back\\slash",
		"tab\there",
		"new\nline",
		"ctl\x01\x1f",
		"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5",
		"ns::Map<std::string, int>::operator[](std::string const&)",
		"semi;colon",
	};
	enum { N = sizeof(names) / sizeof(names[0]) };
	uint32_t locs[N];
	for (size_t i = 0; i < N; i++) {
		struct cp_line l = line(names[i], "dir/\"odd\" file.c",
					(int)i + 1, false);
		locs[N - 1 - i] = location(0x1000 + i, &l, 1);
	}
	add(1, stack(locs, N), 3);
	cp_profile_set_thread_name(profile, 1, "th\"read");
	const char *path = write_file("escaping", "a \"name\"\n");
	char *hex = check_file(path, "frames");
	char *want = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&want, &len);
	for (size_t i = 0; i < N; i++) {
		for (const unsigned char *c = (const unsigned char *)names[i];
		     *c; c++)
			fprintf(f, "%02x", *c);
		fputc('\n', f);
	}
	fclose(f);
	ck_assert_str_eq(hex, want);
	free(hex);
	free(want);
	check_against_folded(path, true);
}
END_TEST

START_TEST(empty_profile)
{
	const char *path = write_file("empty", "empty");
	char *out = check_file(path, "stacks");
	ck_assert_str_eq(out, "");
	free(out);
	char *text = tu_read_file(path);
	ck_assert_ptr_nonnull(strstr(text, "\"profiles\":[\n]"));
	free(text);
}
END_TEST

START_TEST(write_error)
{
	build_cpu();
	FILE *f = fopen("/dev/full", "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cp_write_speedscope(profile, "x", f), -CP_E_SYS);
	fclose(f);
}
END_TEST

/* The size of the folded -> speedscope benchmark: 1,000,000 samples over
 * 100,000 distinct stacks of 1,000 functions.  */
START_TEST(large_profile)
{
	enum { NFUNCS = 1000, NSTACKS = 100000, PER_STACK = 10 };
	uint32_t locs[NFUNCS], frames[32];
	char name[32];
	for (uint32_t i = 0; i < NFUNCS; i++) {
		snprintf(name, sizeof(name), "fn_%u", i);
		struct cp_line l = line(name, NULL, 0, false);
		locs[i] = location(0, &l, 1);
	}
	uint64_t seed = 42;
	for (uint32_t i = 0; i < NSTACKS; i++) {
		size_t depth = 6 + i % 16;
		frames[0] = locs[i % NFUNCS];
		frames[1] = locs[(i / NFUNCS) % NFUNCS];
		for (size_t j = 2; j + 1 < depth; j++) {
			seed = seed * 6364136223846793005ULL +
			       1442695040888963407ULL;
			frames[j] = locs[(seed >> 33) % NFUNCS];
		}
		frames[depth - 1] = locs[0];
		add(0, stack(frames, depth), PER_STACK);
	}
	uint64_t start = tu_now_ns();
	const char *path = write_file("large", "large");
	double seconds = (double)(tu_now_ns() - start) / 1e9;
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	fprintf(stderr,
		"speedscope: 100000 stacks written in %.3f s, %lld bytes\n",
		seconds, (long long)st.st_size);
	check_against_folded(path, false);
}
END_TEST

/* The samples in time order (cprof-attach's log): each thread's profile
 * keeps the order they came in, a repeat of a thread's stack is merged
 * into its previous sample, threads interleave freely, weights are in
 * nanoseconds and every stack is the profile's.  */
START_TEST(time_order_log)
{
	build_cpu();
	struct cp_line l_a = line("phase_a", "/src/demo.c", 50, false);
	struct cp_line l_b = line("phase_b", "/src/demo.c", 60, false);
	struct cp_line l_main = line("main", "/src/demo.c", 10, false);
	uint32_t main_ = location(0x401000, &l_main, 1);
	uint32_t a = STACK(location(0x405000, &l_a, 1), main_);
	uint32_t b = STACK(location(0x406000, &l_b, 1), main_);
	struct cp_speedscope_log *log;
	ck_assert_int_eq(cp_speedscope_log_new(&log), 0);
	static const struct { pid_t tid; char phase; uint64_t weight; } seq[] = {
		{101, 'a', 1}, {102, 'b', 1}, {101, 'a', 2}, {101, 'b', 1},
		{102, 'b', 3}, {101, 'a', 1}, {102, 'a', 1}, {101, 'a', 0},
	};
	for (size_t i = 0; i < sizeof(seq) / sizeof(*seq); i++) {
		uint32_t st = seq[i].phase == 'a' ? a : b;
		ck_assert_int_eq(cp_speedscope_log_add(log, seq[i].tid, st,
						       seq[i].weight), 0);
		if (seq[i].weight)
			add(seq[i].tid, st, seq[i].weight);
	}
	static char path[4096];
	snprintf(path, sizeof(path), "%s/log.speedscope.json", tu_temp_dir());
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cp_write_speedscope_log(profile, "demo", log, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	cp_speedscope_log_free(log);
	cp_speedscope_log_free(NULL);
	/* Valid by the schema's rules.  */
	free(check_file_scaled(path, "threads", 10101010));
	char *text = tu_read_file(path);
	ck_assert_ptr_nonnull(text);
	/* Thread 101: a (3 ticks, merged), b, a; thread 102: b (4), a.
	 * Frames: main 0... are the profile's; find the indexes of a, b
	 * through the names' order in shared.frames.  */
	const char *fa = strstr(text, "{\"name\":\"phase_a\"");
	const char *fb = strstr(text, "{\"name\":\"phase_b\"");
	ck_assert_ptr_nonnull(fa);
	ck_assert_ptr_nonnull(fb);
	ck_assert_ptr_nonnull(strstr(
		text, "{\"type\":\"sampled\",\"name\":\"101 demo\",\"unit\":"
		      "\"nanoseconds\",\"startValue\":0,\"endValue\":50505050,"));
	ck_assert_ptr_nonnull(strstr(
		text, "\"weights\":[30303030,10101010,10101010]}"));
	ck_assert_ptr_nonnull(strstr(
		text, "{\"type\":\"sampled\",\"name\":\"102 worker 1\",\"unit\":"
		      "\"nanoseconds\",\"startValue\":0,\"endValue\":50505050,"));
	ck_assert_ptr_nonnull(strstr(
		text, "\"weights\":[40404040,10101010]}"));
	/* In time order: the samples of 101 are a, b, a (not sorted).  */
	char *p101 = strstr(text, "\"101 demo\"");
	char *p102 = strstr(text, "\"102 worker 1\"");
	ck_assert_ptr_nonnull(p101);
	ck_assert_ptr_nonnull(p102);
	ck_assert(p101 < p102);
	golden(path, "speedscope-log.json");
	free(text);
}
END_TEST

/* A real program whose one thread does one thing, then another, then the
 * first again (python3: zlib, then sha256, then zlib), profiled by
 * cprof-attach -o x.speedscope.json: the thread's profile shows the three
 * phases in that order (an aggregated profile can only show two runs),
 * weights in nanoseconds adding up to the samples of the summary.  */
static const char phases_py[] =
	"import hashlib, sys, time, zlib\n"
	"data = bytes(range(256)) * 4096\n"
	"for phase in sys.argv[1]:\n"
	"    end = time.monotonic() + float(sys.argv[2])\n"
	"    while time.monotonic() < end:\n"
	"        if phase == 'z':\n"
	"            zlib.compress(data, 6)\n"
	"        else:\n"
	"            hashlib.sha256(data).digest()\n";

static const char phases_check[] =
	"import json, sys\n"
	"doc = json.load(open(sys.argv[1]))\n"
	"period, samples = int(sys.argv[2]), int(sys.argv[3])\n"
	"frames = [f['name'] for f in doc['shared']['frames']]\n"
	"total = 0\n"
	"best = None\n"
	"for p in doc['profiles']:\n"
	"    assert p['type'] == 'sampled', p['type']\n"
	"    assert p['unit'] == 'nanoseconds', p['unit']\n"
	"    assert len(p['samples']) == len(p['weights'])\n"
	"    assert p['endValue'] - p['startValue'] == sum(p['weights'])\n"
	"    assert all(w > 0 and w % period == 0 for w in p['weights'])\n"
	"    total += sum(p['weights'])\n"
	"    if best is None or sum(p['weights']) > sum(best['weights']):\n"
	"        best = p\n"
	"assert total == samples * period, (total, samples * period)\n"
	"runs = ''\n"
	"for s in best['samples']:\n"
	"    names = [frames[i] for i in s]\n"
	"    z = any('deflate' in n or 'zlib' in n for n in names)\n"
	"    h = any('sha256' in n.lower() for n in names)\n"
	"    c = 'z' if z and not h else 'h' if h and not z else ''\n"
	"    if c and not runs.endswith(c):\n"
	"        runs += c\n"
	"print(runs)\n";

START_TEST(time_order_python)
{
	const char *dir = tu_temp_dir();
	char script[4096], check[4096], out[4096];
	snprintf(script, sizeof(script), "%s/phases.py", dir);
	snprintf(check, sizeof(check), "%s/phases_check.py", dir);
	snprintf(out, sizeof(out), "%s/python.speedscope.json", dir);
	FILE *f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs(phases_py, f);
	ck_assert_int_eq(fclose(f), 0);
	f = fopen(check, "w");
	ck_assert_ptr_nonnull(f);
	fputs(phases_check, f);
	ck_assert_int_eq(fclose(f), 0);
	struct tu_run *run = tu_cprof_run(120000, "-F", "199", "-o", out, "--",
					  "python3", script, "zhz", "0.7",
					  NULL);
	if (tu_run_exit_code(run) != 0)
		tu_run_dump(run, "cprof-attach", 4000);
	ck_assert_int_eq(tu_run_exit_code(run), 0);
	const char *summary = strstr(run->err, "cprof-attach: ");
	ck_assert_ptr_nonnull(summary);
	unsigned long long samples = strtoull(summary + 14, NULL, 10);
	ck_assert_uint_gt(samples, 0);
	char cmd[16384];
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' %llu %llu 2>&1", check,
		 out, (1000000000ULL + 199 / 2) / 199, samples);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char line[4096] = "";
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	char rest[4096];
	while (fgets(rest, sizeof(rest), p))
		fputs(rest, stderr);
	int status = pclose(p);
	ck_assert_msg(status == 0, "the check of %s failed: %s", out, line);
	ck_assert_msg(strcmp(line, "zhz\n") == 0,
		      "phases in the thread's samples: %s(expected zhz: zlib, "
		      "sha256, zlib in time order)", line);
}
END_TEST

/* The recorded folded files of fixtures/data, read with cp_read_folded
 * and written again: what `cprof convert` does.  */
static const char *const folded_files[] = {
	"basic", "inline", "lines", "no-inline", "threads",
};

START_TEST(folded_input)
{
	char path_in[4096];
	snprintf(path_in, sizeof(path_in), DATA "%s.folded",
		 folded_files[_i]);
	FILE *in = fopen(path_in, "r");
	ck_assert_msg(in != NULL, "%s: %s", path_in, strerror(errno));
	char error[256];
	cp_profile_free(profile);
	profile = NULL;
	int rc = cp_read_folded(in, path_in, &profile, error, sizeof(error));
	fclose(in);
	ck_assert_msg(rc == 0, "%s", error);
	const char *path = write_file(folded_files[_i], folded_files[_i]);
	check_against_folded(path, false);
}
END_TEST

/* cprof convert of a folded file: no time order (one profile, stacks
 * sorted), and a unit: with -F 99 the counts are samples of 10101010 ns,
 * in nanoseconds; without, counts (speedscope's "none").  */
START_TEST(convert_units)
{
	const char *dir = tu_temp_dir();
	char with[4096], without[4096], cmd[16384];
	snprintf(with, sizeof(with), "%s/f99.speedscope.json", dir);
	snprintf(without, sizeof(without), "%s/f.speedscope.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "'%s/cprof' convert '" DATA "basic.folded' -F 99 -o '%s' && "
		 "'%s/cprof' convert '" DATA "basic.folded' -o '%s'",
		 CP_BUILD_DIR, with, CP_BUILD_DIR, without);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	char *a = check_file_scaled(with, "stacks", 10101010);
	char *b = check_file(without, "stacks");
	ck_assert_msg(strcmp(a, b) == 0,
		      "the same stacks and counts with and without -F:\n%s\n%s",
		      a, b);
	free(a);
	free(b);
	char *text = tu_read_file(with);
	ck_assert_ptr_nonnull(strstr(text, "\"unit\":\"nanoseconds\""));
	free(text);
	text = tu_read_file(without);
	ck_assert_ptr_nonnull(strstr(text, "\"unit\":\"none\""));
	free(text);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("speedscope");
	TCase *tc = tcase_create("writer");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, cpu_profile);
	tcase_add_test(tc, folded_profile);
	tcase_add_test(tc, bytes_unit);
	tcase_add_test(tc, escaping);
	tcase_add_test(tc, empty_profile);
	tcase_add_test(tc, write_error);
	tcase_add_loop_test(tc, folded_input, 0,
			    sizeof(folded_files) / sizeof(folded_files[0]));
	tcase_add_test(tc, time_order_log);
	tcase_add_test(tc, convert_units);
	suite_add_tcase(s, tc);
	TCase *e2e = tcase_create("e2e");
	tcase_add_checked_fixture(e2e, setup, teardown);
	tcase_set_timeout(e2e, 150);
	tcase_add_test(e2e, time_order_python);
	suite_add_tcase(s, e2e);
	TCase *large = tcase_create("large");
	tcase_add_checked_fixture(large, setup, teardown);
	tcase_set_timeout(large, 120);
	tcase_add_test(large, large_profile);
	suite_add_tcase(s, large);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
