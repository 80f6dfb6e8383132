/* Our own unwind rules (src/unwind/rules.c) and the walks that use them
 * (src/unwind/unwinder.c): the evaluation of call frame programs against
 * what libunwind 1.6 makes of them, the cache, and walks of fixtures and
 * of real programs, each unwind done both ways and compared
 * (CP_UNWIND_RULES_CHECK): the frames must be libunwind's.  */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/ehframe.h"
#include "cprof/error.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"
#include "testutil.h"
#include "unwind/rules.h"

/* ------------------------------------------------- building records */

#define SECTION_ADDR 0x400000ull
#define CODE_ADDR 0x401000ull
#define CODE_SIZE 0x100u

struct section {
	uint8_t data[512];
	size_t len;
};

static void put(struct section *s, const void *bytes, size_t n)
{
	ck_assert_uint_le(s->len + n, sizeof(s->data));
	memcpy(s->data + s->len, bytes, n);
	s->len += n;
}

static void put32(struct section *s, uint32_t v) { put(s, &v, 4); }

/* A CIE "zR" (FDE pointers pcrel sdata4; "zRS" when SIGNAL), code
 * alignment 1, data alignment -8, return address column 16, with the
 * initial instructions INSTR (padded with nops).  Returns its offset.  */
static size_t put_cie(struct section *s, const uint8_t *instr, size_t n,
		      bool signal)
{
	size_t at = s->len;
	uint8_t body[64];
	size_t len = 0;
	const uint8_t head[] = {1, 'z', 'R'};
	memcpy(body, head, sizeof(head));
	len = sizeof(head);
	if (signal)
		body[len++] = 'S';
	const uint8_t tail[] = {0, 1, 0x78, 16, 1, 0x1b};
	memcpy(body + len, tail, sizeof(tail));
	len += sizeof(tail);
	memcpy(body + len, instr, n);
	len += n;
	while ((len + 4) % 8)
		body[len++] = 0;
	put32(s, (uint32_t)(len + 4));
	put32(s, 0);
	put(s, body, len);
	return at;
}

/* An FDE of CIE (at offset CIE) for [START, START + SIZE) with the
 * instructions INSTR.  */
static void put_fde(struct section *s, size_t cie, uint64_t start,
		    uint32_t size, const uint8_t *instr, size_t n)
{
	uint8_t body[128];
	size_t len = 0;
	size_t at = s->len;
	uint32_t cie_ptr = (uint32_t)(at + 4 - cie);
	/* pc_begin is relative to its own field, at AT + 8.  */
	int32_t rel = (int32_t)(start - (SECTION_ADDR + at + 8));
	memcpy(body, &cie_ptr, 4);
	memcpy(body + 4, &rel, 4);
	memcpy(body + 8, &size, 4);
	body[12] = 0;   /* augmentation size */
	len = 13;
	if (n)
		memcpy(body + len, instr, n);
	len += n;
	while ((len + 4) % 8)
		body[len++] = 0;
	put32(s, (uint32_t)len);
	put(s, body, len);
}

/* Check S with cprof's checker (what the unwinder evaluates is always
 * checked first) and evaluate its first FDE at PC.  */
static struct cp_rule eval_at(struct section *s, uint64_t pc)
{
	struct section copy = *s;
	put32(&copy, 0);
	const struct cp_ehframe_range code = {CODE_ADDR, CODE_ADDR + CODE_SIZE};
	struct cp_ehframe_input in = {
		.kind = CP_EHFRAME_EH, .data = copy.data, .size = copy.len,
		.addr = SECTION_ADDR, .code = &code, .ncode = 1,
	};
	struct cp_ehframe_table *table;
	ck_assert_int_eq(cp_ehframe_table_build(&in, &table), 0);
	struct cp_ehframe_stats st;
	cp_ehframe_table_stats(table, &st);
	ck_assert_msg(st.problem == NULL, "records refused: %s", st.problem);
	const struct cp_ehframe_fde *fde = cp_ehframe_table_lookup(table, pc);
	ck_assert_ptr_nonnull(fde);
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	cp_ehframe_table_image(table, &data, &size, &addr);
	struct cp_rule rule;
	cp_rule_eval(data, size, addr, fde->fde_addr, fde->pc_start, pc,
		     &rule);
	ck_assert_uint_eq(rule.pc, pc);
	cp_ehframe_table_free(table);
	return rule;
}

static const uint8_t cie_default[] = {
	0x0c, 7, 8,   /* def_cfa rsp+8 */
	0x90, 1,      /* offset r16 (return address) at cfa-8 */
};

/* Saved register I of RULE: how, and the slot.  */
#define SAVED(rule, i, h, s) do {                                      \
		ck_assert_uint_eq(cp_rule_how(&(rule), (i)), (h));     \
		if ((h) == CP_SAVED_CFA)                               \
			ck_assert_int_eq((rule).slot[(i)], (s));       \
	} while (0)

/* ------------------------------------------------------- evaluation */

/* push rbp; mov rbp,rsp; ... leave; ret with remember/restore_state
 * around the epilogue, as GCC writes it: each row at each pc.  */
START_TEST(test_eval_frame_pointer_function)
{
	struct section s = {0};
	size_t cie = put_cie(&s, cie_default, sizeof(cie_default), false);
	const uint8_t fde[] = {
		0x41,        /* +1: after push rbp */
		0x0e, 16,    /* def_cfa_offset 16 */
		0x86, 2,     /* offset rbp at cfa-16 */
		0x43,        /* +3: after mov rbp,rsp */
		0x0d, 6,     /* def_cfa_register rbp */
		0x83, 3,     /* offset rbx at cfa-24 */
		0x4a,        /* +10 */
		0x0a,        /* remember_state */
		0x0c, 7, 8,  /* def_cfa rsp+8 (after leave) */
		0xc6,        /* restore rbp */
		0x41,        /* +1: after ret */
		0x0b,        /* restore_state */
		0x2e, 16,    /* GNU_args_size 16: ignored, as libunwind does */
	};
	put_fde(&s, cie, CODE_ADDR, 0x40, fde, sizeof(fde));

	struct cp_rule r = eval_at(&s, CODE_ADDR);
	ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
	ck_assert_uint_eq(r.cfa_reg, 7);
	ck_assert_int_eq(r.cfa_off, 8);
	SAVED(r, CP_RULE_RA, CP_SAVED_CFA, -1);
	SAVED(r, 1, CP_SAVED_SAME, 0);
	SAVED(r, 0, CP_SAVED_SAME, 0);

	r = eval_at(&s, CODE_ADDR + 1);
	ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
	ck_assert_uint_eq(r.cfa_reg, 7);
	ck_assert_int_eq(r.cfa_off, 16);
	SAVED(r, 1, CP_SAVED_CFA, -2);

	/* The row of +4 holds up to +13.  */
	for (uint64_t pc = CODE_ADDR + 4; pc < CODE_ADDR + 14; pc++) {
		r = eval_at(&s, pc);
		ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
		ck_assert_uint_eq(r.cfa_reg, 6);
		ck_assert_int_eq(r.cfa_off, 16);
		SAVED(r, 0, CP_SAVED_CFA, -3);
		SAVED(r, 1, CP_SAVED_CFA, -2);
		SAVED(r, CP_RULE_RA, CP_SAVED_CFA, -1);
	}

	r = eval_at(&s, CODE_ADDR + 14);
	ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
	ck_assert_uint_eq(r.cfa_reg, 7);
	ck_assert_int_eq(r.cfa_off, 8);
	SAVED(r, 1, CP_SAVED_SAME, 0);   /* restored to the CIE's rule */
	SAVED(r, 0, CP_SAVED_CFA, -3);

	/* After restore_state: the remembered row again.  */
	r = eval_at(&s, CODE_ADDR + 15);
	ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
	ck_assert_uint_eq(r.cfa_reg, 6);
	ck_assert_int_eq(r.cfa_off, 16);
	SAVED(r, 1, CP_SAVED_CFA, -2);
	r = eval_at(&s, CODE_ADDR + 0x3f);
	ck_assert_uint_eq(r.cfa_reg, 6);
}
END_TEST

/* The end of the chain (_start, clone): the return address undefined, or
 * rbp (x86-64's unw_step ends there too).  */
START_TEST(test_eval_undefined)
{
	struct section s = {0};
	size_t cie = put_cie(&s, cie_default, sizeof(cie_default), false);
	const uint8_t fde[] = {
		0x07, 16,    /* undefined r16 */
		0x41,
		0x07, 6,     /* undefined rbp */
	};
	put_fde(&s, cie, CODE_ADDR, 0x10, fde, sizeof(fde));
	struct cp_rule r = eval_at(&s, CODE_ADDR);
	ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
	SAVED(r, CP_RULE_RA, CP_SAVED_UNDEF, 0);
	SAVED(r, 1, CP_SAVED_SAME, 0);
	r = eval_at(&s, CODE_ADDR + 1);
	SAVED(r, 1, CP_SAVED_UNDEF, 0);

	/* A DW_CFA_restore among a CIE's own instructions: libunwind's
	 * initial state is then all zeros, "undefined".  */
	struct section t = {0};
	const uint8_t restoring[] = {0x0c, 7, 8, 0x90, 1, 0x83, 3, 0xc3};
	cie = put_cie(&t, restoring, sizeof(restoring), false);
	put_fde(&t, cie, CODE_ADDR, 0x10, NULL, 0);
	r = eval_at(&t, CODE_ADDR);
	ck_assert_uint_eq(r.kind, CP_RULE_SIMPLE);
	SAVED(r, 0, CP_SAVED_UNDEF, 0);
}
END_TEST

/* Everything a simple rule cannot say is "complex", for libunwind.  */
START_TEST(test_eval_complex)
{
	static const struct {
		const char *what;
		uint8_t instr[16];
		size_t n;
	} cases[] = {
		{"expression", {0x10, 3, 2, 0x77, 0}, 5},
		{"val_expression", {0x16, 6, 2, 0x77, 0}, 5},
		{"def_cfa_expression", {0x0f, 2, 0x77, 0}, 4},
		{"register", {0x09, 6, 3}, 3},
		{"restore_state underflow", {0x0b}, 1},
		{"caller-saved register saved", {0x80, 1}, 2},
		{"cfa from rip", {0x0d, 16}, 2},
		{"cfa offset beyond 32 bits", {0x0e, 0x80, 0x80, 0x80, 0x80, 0x10}, 6},
		{"offset beyond a slot's range", {0x05, 3, 0x80, 0x02}, 4},
		{"return address kept in place", {0x08, 16}, 2},
		{"remember_state deeper than we follow",
		 {0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a}, 9},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct section s = {0};
		size_t cie = put_cie(&s, cie_default, sizeof(cie_default),
				     false);
		put_fde(&s, cie, CODE_ADDR, 0x10, cases[i].instr, cases[i].n);
		struct cp_rule r = eval_at(&s, CODE_ADDR + 1);
		ck_assert_msg(r.kind == CP_RULE_COMPLEX, "%s: kind %u",
			      cases[i].what, r.kind);
	}
	/* A signal frame's CIE ("S").  */
	struct section s = {0};
	size_t cie = put_cie(&s, cie_default, sizeof(cie_default), true);
	put_fde(&s, cie, CODE_ADDR, 0x10, NULL, 0);
	ck_assert_uint_eq(eval_at(&s, CODE_ADDR).kind, CP_RULE_COMPLEX);
	/* No CFA defined at all.  */
	struct section t = {0};
	const uint8_t ra_only[] = {0x90, 1};
	cie = put_cie(&t, ra_only, sizeof(ra_only), false);
	put_fde(&t, cie, CODE_ADDR, 0x10, NULL, 0);
	ck_assert_uint_eq(eval_at(&t, CODE_ADDR).kind, CP_RULE_COMPLEX);
	/* An address that is no FDE of the image.  */
	struct cp_rule r;
	cp_rule_eval(t.data, t.len, SECTION_ADDR, SECTION_ADDR + t.len,
		     CODE_ADDR, CODE_ADDR, &r);
	ck_assert_uint_eq(r.kind, CP_RULE_COMPLEX);
	cp_rule_eval(t.data, t.len, SECTION_ADDR, SECTION_ADDR - 8,
		     CODE_ADDR, CODE_ADDR, &r);
	ck_assert_uint_eq(r.kind, CP_RULE_COMPLEX);
}
END_TEST

/* Random bytes as an image, every offset as an FDE: never a read outside
 * (ASan), always an end.  */
START_TEST(test_eval_garbage)
{
	uint32_t seed = 15;
	uint8_t data[256];
	for (int round = 0; round < 2000; round++) {
		for (size_t i = 0; i < sizeof(data); i++)
			data[i] = (uint8_t)tu_random(&seed);
		size_t size = 1 + tu_random(&seed) % sizeof(data);
		uint8_t *copy = malloc(size);
		memcpy(copy, data, size);
		for (size_t off = 0; off < size; off += 1 + off % 7) {
			struct cp_rule r;
			cp_rule_eval(copy, size, SECTION_ADDR,
				     SECTION_ADDR + off, tu_random(&seed),
				     tu_random(&seed), &r);
			ck_assert_uint_ne(r.kind, CP_RULE_EMPTY);
		}
		free(copy);
	}
}
END_TEST

/* ------------------------------------------------------------ cache */

START_TEST(test_cache)
{
	struct cp_rules *rules = cp_rules_new();
	ck_assert_ptr_nonnull(rules);
	ck_assert_ptr_null(cp_rules_find(rules, 0x1234));
	struct cp_rule r = {.pc = 0x1234, .kind = CP_RULE_SIMPLE, .cfa_off = 8};
	ck_assert_ptr_nonnull(cp_rules_put(rules, &r));
	const struct cp_rule *got = cp_rules_find(rules, 0x1234);
	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(got->cfa_off, 8);
	r.cfa_off = 16;
	cp_rules_put(rules, &r);
	ck_assert_int_eq(cp_rules_find(rules, 0x1234)->cfa_off, 16);
	ck_assert_uint_eq(cp_rules_count(rules), 1);
	ck_assert_ptr_null(cp_rules_find(rules, 0x1235));

	/* Bounded: many more pcs than slots; a rule found is always the
	 * one put for that pc, and the last one put is found.  */
	for (uint64_t i = 0; i < 100000; i++) {
		struct cp_rule x = {.pc = 0x400000 + 3 * i,
				    .kind = CP_RULE_SIMPLE,
				    .cfa_off = (int32_t)i};
		cp_rules_put(rules, &x);
		got = cp_rules_find(rules, x.pc);
		ck_assert_ptr_nonnull(got);
		ck_assert_int_eq(got->cfa_off, (int32_t)i);
		if (i % 97 == 0) {
			uint64_t j = i / 2;
			got = cp_rules_find(rules, 0x400000 + 3 * j);
			if (got)
				ck_assert_int_eq(got->cfa_off, (int32_t)j);
		}
	}
	ck_assert_uint_le(cp_rules_count(rules), 4096);
	cp_rules_flush(rules);
	ck_assert_uint_eq(cp_rules_count(rules), 0);
	ck_assert_ptr_null(cp_rules_find(rules, 0x400000 + 3 * 99999));
	cp_rules_free(rules);
	cp_rules_free(NULL);
}
END_TEST

/* ------------------------------------------- walks, both ways compared */

/* Start ARGV (a path, or a name searched in PATH) with stdin from
 * STDIN_PATH and stdout and stderr on /dev/null; it dies with us.  */
static pid_t spawn(const char *const argv[], const char *stdin_path)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int in = open(stdin_path, O_RDONLY);
		int out = open("/dev/null", O_WRONLY);
		if (in < 0 || out < 0)
			_exit(127);
		dup2(in, 0);
		dup2(out, 1);
		dup2(out, 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Sample PID for SECONDS at 499 Hz (WALL: sleeping threads too, read
 * without a stop: partial unwinds) with every unwind done both ways.  */
static struct cp_unwinder_rules_stats sample_checked(pid_t pid, bool wall,
						     double seconds)
{
	struct cp_target *target;
	struct cp_unwinder *unwinder;
	struct cp_symbols *symbols;
	struct cp_symbols_options symbols_options = {.no_dwarf = true};
	int rc = cp_target_attach(pid, NULL, 0, CP_TARGET_FOLLOW_CLONES,
				  &target, NULL);
	ck_assert_msg(rc == 0, "attach %d: %s", (int)pid, cp_strerror(rc));
	ck_assert_int_eq(cp_unwinder_new(pid, &unwinder), 0);
	cp_unwinder_rules_mode(unwinder, CP_UNWIND_RULES_CHECK);
	ck_assert_int_eq(cp_symbols_new(pid, &symbols_options, &symbols), 0);
	struct cp_profile *profile = cp_profile_new();
	ck_assert_ptr_nonnull(profile);
	struct cp_sampler_options options = {
		.frequency = 499,
		.duration = seconds,
		.wall = wall,
		.max_depth = 512,
		.unwind_mode = CP_UNWIND_SNAPSHOT,
	};
	struct cp_sampler_stats stats;
	rc = cp_sampler_run(target, unwinder, symbols, profile, &options,
			    &stats);
	ck_assert_msg(rc == 0, "cp_sampler_run: %s", cp_strerror(rc));
	cp_target_detach(target);
	struct cp_unwinder_rules_stats rs;
	cp_unwinder_rules_stats(unwinder, &rs);
	cp_unwinder_free(unwinder);
	cp_symbols_free(symbols);
	cp_profile_free(profile);
	return rs;
}

static void check_program(const char *what, const char *const argv[],
			  const char *stdin_path)
{
	pid_t pid = spawn(argv, stdin_path);
	/* Let it get going (an exec of an interpreter, a shim's exec).  */
	usleep(400 * 1000);
	int status;
	ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0,
		      "%s ended early (status %#x)", what, (unsigned)status);
	for (int wall = 0; wall < 2; wall++) {
		struct cp_unwinder_rules_stats rs =
			sample_checked(pid, wall, 1.0);
		fprintf(stderr,
			"%s%s: %" PRIu64 " unwinds compared (%" PRIu64
			" not: the mappings changed), %" PRIu64
			" different; frames stepped by our rules %" PRIu64
			", by libunwind %" PRIu64 "; rules evaluated %" PRIu64
			"\n",
			what, wall ? " --wall" : "", rs.checked, rs.unchecked,
			rs.mismatches,
			rs.fast_steps, rs.lib_steps, rs.evaluated);
		ck_assert_msg(rs.checked > 0, "%s: nothing unwound", what);
		ck_assert_msg(rs.mismatches == 0,
			      "%s: %" PRIu64 " of %" PRIu64
			      " unwinds differ from libunwind's",
			      what, rs.mismatches, rs.checked);
		ck_assert_msg(rs.fast_steps > 0, "%s: no frame stepped by our "
			      "rules", what);
	}
	stop_child(pid);
}

static const struct {
	const char *name;
	const char *args[4];
} fixtures[] = {
	{"recurse", {"60", "200"}},
	{"chain-O0", {"60"}},
	{"chain-O2", {"60"}},
	{"cxx", {"60"}},
	{"threads", {"60"}},
	{"sigframe", {"60"}},
	{"nocfi-bare", {"60"}},
	{"nocfi-bare-fp", {"60"}},
	{"nocfi-musl", {"60", "1000"}},
	{"nocfi-musl-static", {"60"}},
	{"jit", {"60"}},
	{"unwtables", {"60", "20"}},
	{"unwtables-df", {"60", "20"}},
	{"unwtables-musl", {"60", "20"}},
	{"sleepers", {"60"}},
	{"blockers-O2", {"60"}},
};

START_TEST(test_fixture_walks)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/fixtures/%s", CP_BUILD_DIR,
		 fixtures[_i].name);
	const char *argv[6] = {path};
	for (size_t i = 0; i < 4 && fixtures[_i].args[i]; i++)
		argv[i + 1] = fixtures[_i].args[i];
	check_program(fixtures[_i].name, argv, "/dev/null");
}
END_TEST

static const struct {
	const char *name;
	const char *argv[8];
	const char *stdin_path;
} programs[] = {
	{"python3", {"python3", "-c",
		     "import json\n"
		     "def f(n): return f(n - 1) if n else json.dumps([1] * 50)\n"
		     "while True: f(40)\n"}, "/dev/null"},
	{"bash", {"bash", "-c", "i=0; while :; do i=$((i + 1)); done"},
	 "/dev/null"},
	{"xz", {"xz", "-9", "-T1", "-c"}, "/dev/urandom"},
	{"gzip", {"gzip", "-9", "-c"}, "/dev/urandom"},
	{"sqlite3", {"sqlite3", ":memory:",
		     "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
		     "FROM c LIMIT 2000000000) SELECT sum(x) FROM c;"},
	 "/dev/null"},
	{"node", {"node", "-e",
		  "function f(n) { return n ? f(n - 1) : JSON.stringify([n]); }\n"
		  "for (;;) f(50);"}, "/dev/null"},
	{"perl", {"perl", "-e", "sub f { my $n = shift; $n ? f($n - 1) : 0 } "
				"while (1) { f(30) }"}, "/dev/null"},
};

START_TEST(test_program_walks)
{
	/* Only the programs installed here.  */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1",
		 programs[_i].argv[0]);
	if (system(cmd) != 0) {
		fprintf(stderr, "%s: not installed, skipped\n",
			programs[_i].name);
		return;
	}
	check_program(programs[_i].name, programs[_i].argv,
		      programs[_i].stdin_path);
}
END_TEST

static Suite *rules_suite(void)
{
	Suite *s = suite_create("rules");
	TCase *tc = tcase_create("eval");
	tcase_add_test(tc, test_eval_frame_pointer_function);
	tcase_add_test(tc, test_eval_undefined);
	tcase_add_test(tc, test_eval_complex);
	tcase_add_test(tc, test_eval_garbage);
	tcase_add_test(tc, test_cache);
	suite_add_tcase(s, tc);
	tc = tcase_create("walks");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, NULL, tu_cleanup);
	tcase_add_loop_test(tc, test_fixture_walks, 0,
			    sizeof(fixtures) / sizeof(fixtures[0]));
	tcase_add_loop_test(tc, test_program_walks, 0,
			    sizeof(programs) / sizeof(programs[0]));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *runner = srunner_create(rules_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
