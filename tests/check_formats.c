/* The format registry (include/cprof/format.h): the table, the recorders,
 * units that survive a conversion, a dump as a profile; and end to end
 * the formats cprof-attach refused before the registry: --heap --format
 * speedscope, --format report in CPU mode, --dump --format folded.  */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/dump.h"
#include "cprof/error.h"
#include "cprof/format.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "testutil.h"

#define RUN_TIMEOUT_MS 120000
#define READY_TIMEOUT_MS 20000

/* ------------------------------------------------------------ helpers */

static uint32_t str(struct cp_profile *p, const char *s)
{
	uint32_t id = cp_profile_intern(p, s, strlen(s));
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

static uint32_t location(struct cp_profile *p, const char *name)
{
	struct cp_line line = {.function = str(p, name)};
	uint32_t id = cp_profile_add_location(p, 0, 0, &line, 1);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

/* main;work (3) and main;work;leaf (5) on thread 7 "demo"; heap types
 * when HEAP (values: objects, bytes, live objects, live bytes), the
 * count weighing live bytes.  */
static struct cp_profile *small_profile(bool heap)
{
	struct cp_profile *p = cp_profile_new();
	ck_assert_ptr_nonnull(p);
	uint32_t m = location(p, "main"), w = location(p, "work"),
		 l = location(p, "leaf");
	uint32_t s1 = cp_profile_intern_stack(p, (uint32_t[]){ w, m }, 2);
	uint32_t s2 = cp_profile_intern_stack(p, (uint32_t[]){ l, w, m }, 3);
	ck_assert_int_eq(cp_profile_set_thread_name(p, 7, "demo"), 0);
	if (heap) {
		ck_assert_int_eq(cp_profile_add_values(p, 7, s1, 1,
				 (uint64_t[]){ 3, 300, 0, 0 }), 0);
		ck_assert_int_eq(cp_profile_add_values(p, 7, s2, 1,
				 (uint64_t[]){ 5, 500, 2, 200 }), 0);
		cp_profile_set_heap_types(p, 3);
	} else {
		ck_assert_int_eq(cp_profile_add(p, 7, s1, 3), 0);
		ck_assert_int_eq(cp_profile_add(p, 7, s2, 5), 0);
	}
	return p;
}

/* What FORMAT writes of IN, NUL-ended (the caller frees it); *RC set.  */
static char *written(const char *format, const struct cp_format_input *in,
		     const struct cp_format_options *o, int *rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	const struct cp_format *fmt = cp_format_find(format);
	ck_assert_msg(fmt != NULL, "no format %s", format);
	*rc = cp_format_write(fmt, in, o, f);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

/* ------------------------------------------------------------ registry */

START_TEST(table)
{
	size_t n;
	const struct cp_format *const *all = cp_formats(&n);
	ck_assert_uint_ge(n, 9);
	for (size_t i = 0; i < n; i++) {
		const struct cp_format *f = all[i];
		ck_assert_msg(f->name && *f->name && f->description &&
			      *f->description && f->kinds, "entry %zu", i);
		ck_assert_ptr_eq(cp_format_find(f->name), f);
		/* one write function, or the three of a recorder */
		ck_assert_msg(f->write || (f->begin && f->sample && f->end),
			      "%s writes nothing", f->name);
		ck_assert_msg(!f->begin == !f->sample && !f->sample == !f->end,
			      "%s: begin, sample and end go together",
			      f->name);
		for (size_t j = i + 1; j < n; j++)
			ck_assert_str_ne(f->name, all[j]->name);
	}
	ck_assert_ptr_null(cp_format_find("nope"));
	ck_assert_ptr_null(cp_format_find(NULL));
	/* every kind has its default, and can be written as folded text */
	enum cp_format_kind kinds[] = { CP_FORMAT_SAMPLED, CP_FORMAT_HEAP,
					CP_FORMAT_DUMP };
	const char *defaults[] = { "folded", "report", "text" };
	for (size_t k = 0; k < 3; k++) {
		ck_assert_str_eq(cp_format_default(kinds[k])->name,
				 defaults[k]);
		ck_assert(cp_format_supports(cp_format_find("folded"),
					     kinds[k]));
		ck_assert(cp_format_supports(cp_format_find("speedscope"),
					     kinds[k]));
		ck_assert(cp_format_supports(cp_format_find("report"),
					     kinds[k]));
	}
	ck_assert(!cp_format_supports(cp_format_find("raw"), CP_FORMAT_HEAP));
	ck_assert(!cp_format_supports(cp_format_find("json"),
				      CP_FORMAT_SAMPLED));
	ck_assert(cp_format_find("pprof")->binary);
}
END_TEST

START_TEST(suffixes)
{
	ck_assert_str_eq(cp_format_for_path("x.svg")->name, "svg");
	ck_assert_str_eq(cp_format_for_path("dir/A.SVG")->name, "svg");
	ck_assert_str_eq(cp_format_for_path("x.folded")->name, "folded");
	ck_assert_str_eq(cp_format_for_path("x.pb.gz")->name, "pprof");
	ck_assert_str_eq(cp_format_for_path("x.speedscope.json")->name,
			 "speedscope");
	ck_assert_ptr_null(cp_format_for_path("x.json"));
	ck_assert_ptr_null(cp_format_for_path("x.gz"));
	ck_assert_ptr_null(cp_format_for_path(".svg"));
	ck_assert_ptr_null(cp_format_for_path("profile"));
	ck_assert_ptr_null(cp_format_for_path(NULL));
	ck_assert_ptr_null(cp_format_for_path("-"));
	ck_assert_str_eq(cp_format_reader_for_path("in.folded")->name,
			 "folded");
	ck_assert_ptr_eq(cp_format_reader_find("folded")->read,
			 cp_read_folded);
}
END_TEST

START_TEST(names_and_help)
{
	char buf[256];
	ck_assert_str_eq(cp_format_names(CP_FORMAT_DUMP, buf, sizeof(buf)),
			 "folded, svg, pprof, speedscope, report, text or json");
	ck_assert_str_eq(cp_format_names(CP_FORMAT_HEAP, buf, sizeof(buf)),
			 "folded, svg, pprof, speedscope or report");
	ck_assert_ptr_nonnull(strstr(cp_format_names(CP_FORMAT_SAMPLED, buf,
						     sizeof(buf)),
				     "raw, trace"));
	/* truncated, not overrun */
	char small[8];
	cp_format_names(CP_FORMAT_SAMPLED, small, sizeof(small));
	ck_assert_uint_lt(strlen(small), sizeof(small));

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_int_eq(cp_format_help(CP_FORMAT_HEAP, 4, 12, f), 0);
	fclose(f);
	ck_assert_uint_eq(tu_count_lines(text), 5);
	ck_assert(tu_text_has_line_prefix(text, "    speedscope   "));
	ck_assert_ptr_null(strstr(text, "raw"));
	free(text);
}
END_TEST

/* A format asked for data it cannot represent refuses it; so do the
 * streaming-only formats asked to write a profile at once.  */
START_TEST(refused)
{
	struct cp_profile *p = small_profile(false);
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED, .profile = p};
	int rc;
	free(written("json", &in, NULL, &rc));
	ck_assert_int_eq(rc, -CP_E_INVAL);
	free(written("raw", &in, NULL, &rc));
	ck_assert_int_eq(rc, -CP_E_INVAL);
	struct cp_format_input none = {.kind = CP_FORMAT_SAMPLED};
	free(written("folded", &none, NULL, &rc));
	ck_assert_int_eq(rc, -CP_E_INVAL);
	struct cp_format_recorder *r = (void *)1;
	struct cp_format_input heap = {.kind = CP_FORMAT_HEAP, .profile = p};
	ck_assert_int_eq(cp_format_recorder_new(cp_format_find("raw"), &heap,
						NULL, stdout, &r),
			 -CP_E_INVAL);
	ck_assert_ptr_null(r);
	cp_profile_free(p);
}
END_TEST

/* Every format that writes a profile writes the small one, in each kind
 * it supports, without error and not empty.  */
START_TEST(every_format_every_kind)
{
	size_t n;
	const struct cp_format *const *all = cp_formats(&n);
	for (int heap = 0; heap < 2; heap++) {
		struct cp_profile *p = small_profile(heap);
		struct cp_format_input in = {
			.kind = heap ? CP_FORMAT_HEAP : CP_FORMAT_SAMPLED,
			.profile = p,
		};
		for (size_t i = 0; i < n; i++) {
			if (!all[i]->write || !cp_format_supports(all[i],
								 in.kind))
				continue;
			int rc;
			char *text = written(all[i]->name, &in, NULL, &rc);
			ck_assert_msg(rc == 0, "%s (%s): %s", all[i]->name,
				      heap ? "heap" : "sampled",
				      cp_strerror(rc));
			ck_assert_msg(text && *text, "%s wrote nothing",
				      all[i]->name);
			free(text);
		}
		cp_profile_free(p);
	}
}
END_TEST

/* ------------------------------------------------------------- units */

/* Heap -> folded -> read back: the counts stay bytes, and the report,
 * the flame graph, speedscope and pprof say so.  */
START_TEST(units_survive_folded)
{
	struct cp_profile *p = small_profile(true);
	struct cp_format_input in = {.kind = CP_FORMAT_HEAP, .profile = p};
	int rc;
	char *folded = written("folded", &in, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	/* the site with nothing live is left out */
	ck_assert_str_eq(folded, "# cprof sample_type: inuse_space bytes\n"
				 "main;work;leaf 200\n");
	cp_profile_free(p);

	FILE *f = fmemopen(folded, strlen(folded), "r");
	struct cp_profile *back = NULL;
	char error[256];
	ck_assert_int_eq(cp_read_folded(f, "heap.folded", &back, error,
					sizeof(error)), 0);
	fclose(f);
	const struct cp_profile_meta *meta = cp_profile_meta_const(back);
	ck_assert_str_eq(meta->count_type.type, "inuse_space");
	ck_assert_str_eq(meta->count_type.unit, "bytes");
	ck_assert_uint_eq(cp_profile_total(back), 200);

	struct cp_format_input again = {.kind = CP_FORMAT_SAMPLED,
					.profile = back};
	char *report = written("report", &again, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(strstr(report, "200 bytes") != NULL, "%s", report);
	ck_assert_ptr_null(strstr(report, "samples"));
	free(report);
	char *svg = written("svg", &again, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(svg, "data-unit=\"bytes\""));
	free(svg);
	char *ss = written("speedscope", &again, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(ss, "\"unit\":\"bytes\""));
	free(ss);
	/* and folded again keeps its header */
	char *refolded = written("folded", &again, NULL, &rc);
	ck_assert_str_eq(refolded, folded);
	free(refolded);
	free(folded);
	cp_profile_free(back);
}
END_TEST

/* Folded text without the header is samples; CPU profiles are written
 * without it, as before.  */
START_TEST(units_default_samples)
{
	struct cp_profile *p = small_profile(false);
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED, .profile = p};
	int rc;
	char *folded = written("folded", &in, NULL, &rc);
	ck_assert_str_eq(folded, "main;work 3\nmain;work;leaf 5\n");
	FILE *f = fmemopen(folded, strlen(folded), "r");
	struct cp_profile *back = NULL;
	char error[256];
	ck_assert_int_eq(cp_read_folded(f, "cpu.folded", &back, error,
					sizeof(error)), 0);
	fclose(f);
	ck_assert(cp_profile_counts_samples(back));
	/* a header that is not ours, or malformed, is a comment */
	const char *odd = "# cprof sample_type:\n# other\nmain 1\n";
	f = fmemopen((void *)odd, strlen(odd), "r");
	struct cp_profile *odd_p = NULL;
	ck_assert_int_eq(cp_read_folded(f, "odd", &odd_p, error,
					sizeof(error)), 0);
	fclose(f);
	ck_assert(cp_profile_counts_samples(odd_p));
	ck_assert_str_eq(cp_sample_type_word(
				 &cp_profile_meta_const(odd_p)->count_type),
			 "samples");
	cp_profile_free(odd_p);
	cp_profile_free(back);
	free(folded);
	cp_profile_free(p);
}
END_TEST

START_TEST(type_words)
{
	struct cp_sample_type t;
	cp_sample_type_set(&t, "samples", "count");
	ck_assert_str_eq(cp_sample_type_word(&t), "samples");
	cp_sample_type_set(&t, "inuse_objects", "count");
	ck_assert_str_eq(cp_sample_type_word(&t), "allocations");
	cp_sample_type_set(&t, "alloc_space", "bytes");
	ck_assert_str_eq(cp_sample_type_word(&t), "bytes");
	cp_sample_type_set(&t, "threads", "count");
	ck_assert_str_eq(cp_sample_type_word(&t), "threads");
	ck_assert(cp_sample_type_is(&t, "threads", NULL));
	ck_assert(!cp_sample_type_is(&t, NULL, "bytes"));
}
END_TEST

/* --------------------------------------------------------------- dump */

/* A hand-made dump: thread 10 "main" in main;work (work inlined into
 * main), thread 11 "worker" in start;loop.  */
static const struct cp_frame f_work = {"work", "w.c", 3, true, true};
static const struct cp_frame f_main = {"main", "m.c", 9, false, true};
static const struct cp_frame f_loop = {"loop", NULL, 0, false, true};
static const struct cp_frame f_start = {"start", NULL, 0, false, true};
static struct cp_dump_frame frames10[] = {
	{0x1000, &f_work, "prog"}, {0x1000, &f_main, "prog"},
};
static struct cp_dump_frame frames11[] = {
	{0x2000, &f_loop, "libx.so"}, {0x2100, &f_start, NULL},
};
static struct cp_dump_thread threads[] = {
	{10, "main", 'R', -1, 2, frames10},
	{11, "worker", 'S', 35, 2, frames11},
};
static const struct cp_dump dump = {42, 2, threads};

START_TEST(dump_as_profile)
{
	struct cp_format_input in = {.kind = CP_FORMAT_DUMP, .dump = &dump};
	struct cp_format_options o = CP_FORMAT_OPTIONS_INIT;
	o.folded.threads = true;
	int rc;
	char *folded = written("folded", &in, &o, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(folded, "# cprof sample_type: threads count\n"
				 "10 main;main;work_[i] 1\n"
				 "11 worker;start;loop 1\n");
	free(folded);
	char *text = written("text", &in, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(text, "Thread 11 \"worker\""));
	free(text);
	char *json = written("json", &in, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(json, "\"pid\": 42"));
	free(json);
	char *report = written("report", &in, NULL, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(strstr(report, "2 threads") != NULL, "%s", report);
	free(report);
	/* a dump is not a profile for the formats that read the dump */
	struct cp_profile *p = NULL;
	ck_assert_int_eq(cp_format_dump_profile(&dump, &p), 0);
	ck_assert_uint_eq(cp_profile_total(p), 2);
	ck_assert_str_eq(cp_profile_thread_name(p, 11), "worker");
	ck_assert_int_eq(cp_profile_meta_const(p)->pid, 42);
	cp_profile_free(p);
}
END_TEST

/* ---------------------------------------------------------- recorders */

/* What a recorder of FORMAT writes of the samples fed to it, in order. */
static char *recorded(const char *format, struct cp_profile *p, int *rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED, .profile = p};
	struct cp_format_recorder *r = NULL;
	ck_assert_int_eq(cp_format_recorder_new(cp_format_find(format), &in,
						NULL, f, &r), 0);
	size_t n;
	const struct cp_sample *s = cp_profile_samples(p, &n);
	ck_assert_uint_eq(n, 2);
	if (cp_format_recorder_streams(r)) {
		/* leaf first, then the other stack twice */
		cp_format_record(r, 1500000000, 7, s[1].stack, 1);
		cp_format_record(r, 2000000000, 7, s[0].stack, 2);
		cp_format_record(r, 2500000000, 7, s[0].stack, 1);
	}
	*rc = cp_format_recorder_finish(r);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

START_TEST(recorder_raw)
{
	struct cp_profile *p = small_profile(false);
	struct cp_profile_meta *meta = cp_profile_meta(p);
	meta->pid = 7;
	meta->frequency = 99;
	snprintf(meta->target, sizeof(meta->target), "demo --x");
	int rc;
	char *text = recorded("raw", p, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(text,
		"# cprof-attach raw samples: SECONDS TID WEIGHT FRAME;FRAME;... (root first)\n"
		"# fields SECONDS TID WEIGHT STACK\n"
		"# target 7 demo --x\n# frequency 99\n# weight-unit samples\n"
		"# thread 7 demo\n"
		"1.500000 7 1 main;work;leaf\n"
		"2.000000 7 2 main;work\n"
		"2.500000 7 1 main;work\n");
	free(text);
	text = recorded("trace", p, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(text, "\"traceEvents\""));
	ck_assert_ptr_nonnull(strstr(text, "\"leaf\""));
	free(text);
	cp_profile_free(p);
}
END_TEST

/* Raw samples read back (the readers' raw entry) are the profile the
 * folded writer writes: weights added up per stack, threads named,
 * inlined frames marked again.  */
START_TEST(raw_read_back)
{
	struct cp_profile *p = small_profile(false);
	struct cp_profile_meta *meta = cp_profile_meta(p);
	meta->pid = 7;
	meta->frequency = 99;
	int rc;
	char *raw = recorded("raw", p, &rc);
	ck_assert_int_eq(rc, 0);
	const struct cp_format_reader *reader = cp_format_reader_find("raw");
	ck_assert_ptr_nonnull(reader);
	ck_assert_ptr_eq(cp_format_reader_for_path("app.raw"), reader);
	FILE *f = fmemopen(raw, strlen(raw), "r");
	struct cp_profile *back = NULL;
	char error[256] = "";
	rc = reader->read(f, "app.raw", &back, error, sizeof(error));
	fclose(f);
	ck_assert_msg(rc == 0, "%s", error);
	ck_assert_uint_eq(cp_profile_meta_const(back)->frequency, 99);
	ck_assert_int_eq(cp_profile_meta_const(back)->pid, 7);
	ck_assert(cp_profile_counts_samples(back));
	ck_assert_str_eq(cp_profile_thread_name(back, 7), "demo");
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED,
				     .profile = back};
	struct cp_format_options o = CP_FORMAT_OPTIONS_INIT;
	o.folded.threads = true;
	char *folded = written("folded", &in, &o, &rc);
	ck_assert_str_eq(folded, "7 demo;main;work 3\n7 demo;main;work;leaf 1\n");
	free(folded);
	cp_profile_free(back);
	free(raw);

	/* a malformed line is the reader's message */
	const char *bad = "# fields SECONDS TID WEIGHT STACK\n1.0 x 1 main\n";
	f = fmemopen((void *)bad, strlen(bad), "r");
	rc = reader->read(f, "bad.raw", &back, error, sizeof(error));
	fclose(f);
	ck_assert_int_eq(rc, -CP_E_PARSE);
	ck_assert_ptr_null(back);
	ck_assert_msg(strncmp(error, "bad.raw:2:", 10) == 0, "%s", error);
	cp_profile_free(p);
}
END_TEST

/* speedscope's recorder keeps time order: leaf's stack first, though
 * sorted stacks put main;work first.  */
START_TEST(recorder_speedscope)
{
	struct cp_profile *p = small_profile(false);
	cp_profile_meta(p)->frequency = 100;
	int rc;
	char *text = recorded("speedscope", p, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(strstr(text, "\"weights\":[10000000,30000000]") != NULL,
		      "%s", text);
	free(text);
	/* a format without streaming writes the profile at the end */
	text = recorded("folded", p, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(text, "main;work 3\nmain;work;leaf 5\n");
	free(text);
	cp_profile_free(p);
}
END_TEST

/* -------------------------------------------------------- end to end */

static struct tu_proc *ready(struct tu_proc *fixture)
{
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "fixture %d did not print \"ready\" (stdout so far: %s)",
		      (int)fixture->pid, fixture->output);
	return fixture;
}

static void expect_ok(struct tu_run *run, const char *what)
{
	if (!run->finished || tu_run_exit_code(run) != 0)
		tu_run_dump(run, what, 4000);
	ck_assert_msg(run->finished && tu_run_exit_code(run) == 0,
		      "%s exited with %d", what, tu_run_exit_code(run));
}

/* The sum of the numbers of every "weights":[...] array of a speedscope
 * file.  */
static uint64_t speedscope_weights(const char *text)
{
	uint64_t total = 0;
	for (const char *at = text; (at = strstr(at, "\"weights\":["));) {
		at += strlen("\"weights\":[");
		while (*at && *at != ']') {
			char *end;
			total += strtoull(at, &end, 10);
			at = *end == ',' ? end + 1 : end;
		}
	}
	return total;
}

/* --heap --format speedscope (refused before): the live bytes of
 * heap-short, in bytes, as its folded profile has them.  */
START_TEST(heap_speedscope)
{
	char program[4096];
	snprintf(program, sizeof(program), "%s/fixtures/heap-short",
		 CP_BUILD_DIR);
	struct tu_run *folded = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--heap",
					     "--format", "folded", "--",
					     program, NULL);
	expect_ok(folded, "--heap --format folded");
	ck_assert(tu_text_has_line_prefix(folded->out,
					  "# cprof sample_type: inuse_space bytes"));
	char error[256];
	struct tu_profile *fp = tu_profile_parse(folded->out, error,
						 sizeof(error));
	ck_assert_msg(fp != NULL, "%s", error);
	uint64_t live = tu_profile_total(fp);
	ck_assert_uint_gt(live, 0);
	tu_profile_free(fp);

	char path[4096];
	snprintf(path, sizeof(path), "%s/heap.speedscope.json",
		 tu_temp_dir());
	/* the suffix picks the format */
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--heap",
					  "-o", path, "--", program, NULL);
	expect_ok(run, "--heap -o heap.speedscope.json");
	char *text = tu_read_file(path);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "\"unit\":\"bytes\"") != NULL, "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "\"short_leak\""));
	ck_assert_uint_eq(speedscope_weights(text), live);
	free(text);
}
END_TEST

/* --format report in CPU mode (refused before): the top functions of
 * chain-O0, in samples.  */
START_TEST(cpu_report)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", "30",
							 NULL));
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "-d", "1",
					  "--format", "report",
					  fixture->pid_text, NULL);
	expect_ok(run, "--format report");
	ck_assert_msg(strstr(run->out, " samples, ") != NULL, "%s", run->out);
	ck_assert_msg(strstr(run->out, "by self samples") != NULL, "%s",
		      run->out);
	ck_assert_msg(strstr(run->out, "chain_gamma") != NULL, "%s",
		      run->out);
	ck_assert_msg(kill(fixture->pid, 0) == 0 &&
		      tu_traced_tasks(fixture->pid) == 0,
		      "chain-O0 is not running untraced after the report");
}
END_TEST

/* --dump --format folded (refused before): one stack per thread, each
 * beginning with its thread with --threads.  */
START_TEST(dump_folded)
{
	struct tu_proc *fixture = ready(tu_fixture_start("threads", NULL));
	pid_t tids[16];
	int ntids = tu_tasks(fixture->pid, tids, 16);
	ck_assert_int_gt(ntids, 1);
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "--no-debuginfod",
					  "--dump", "--format", "folded",
					  "--threads", fixture->pid_text,
					  NULL);
	expect_ok(run, "--dump --format folded");
	ck_assert(tu_text_has_line_prefix(run->out,
					  "# cprof sample_type: threads count"));
	char error[256];
	struct tu_profile *fp = tu_profile_parse(run->out, error,
						 sizeof(error));
	ck_assert_msg(fp != NULL, "%s:\n%s", error, run->out);
	ck_assert_uint_eq(fp->count, (size_t)ntids);
	ck_assert_uint_eq(tu_profile_total(fp), (uint64_t)ntids);
	for (int i = 0; i < ntids; i++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "%d ", (int)tids[i]);
		bool found = false;
		for (size_t j = 0; j < fp->count && !found; j++)
			found = strncmp(fp->stacks[j].frames[0], prefix,
					strlen(prefix)) == 0 &&
				tu_profile_count_frame(fp, "main") > 0;
		ck_assert_msg(found, "no stack of thread %d:\n%s",
			      (int)tids[i], run->out);
	}
	tu_profile_free(fp);
	ck_assert_msg(kill(fixture->pid, 0) == 0 &&
		      tu_traced_tasks(fixture->pid) == 0,
		      "threads is not running untraced after the dump");
}
END_TEST

/* The CLI's error lists the registry's names for the mode.  */
START_TEST(unknown_format)
{
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "--heap",
					  "--format", "raw", "--", "true",
					  NULL);
	ck_assert_int_eq(tu_run_exit_code(run), 2);
	ck_assert_msg(strstr(run->err, "folded, svg, pprof, speedscope or "
				       "report") != NULL, "%s", run->err);
	run = tu_cprof_run(RUN_TIMEOUT_MS, "--help", NULL);
	ck_assert_int_eq(tu_run_exit_code(run), 0);
	size_t n;
	const struct cp_format *const *all = cp_formats(&n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(strstr(run->out, all[i]->description) != NULL,
			      "--help does not describe %s", all[i]->name);
}
END_TEST

static void teardown(void)
{
	tu_cleanup();
}

static Suite *formats_suite(void)
{
	Suite *s = suite_create("formats");
	TCase *tc = tcase_create("registry");
	tcase_add_test(tc, table);
	tcase_add_test(tc, suffixes);
	tcase_add_test(tc, names_and_help);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, every_format_every_kind);
	tcase_add_test(tc, units_survive_folded);
	tcase_add_test(tc, units_default_samples);
	tcase_add_test(tc, type_words);
	tcase_add_test(tc, dump_as_profile);
	tcase_add_test(tc, recorder_raw);
	tcase_add_test(tc, recorder_speedscope);
	tcase_add_test(tc, raw_read_back);
	suite_add_tcase(s, tc);

	tc = tcase_create("cprof-attach");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, heap_speedscope);
	tcase_add_test(tc, cpu_report);
	tcase_add_test(tc, dump_folded);
	tcase_add_test(tc, unknown_format);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	SRunner *sr = srunner_create(formats_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
