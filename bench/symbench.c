/* symbench PID [N]: the symbolizer's cost per distinct address (first
 * lookup) and per cached lookup, on the modules of a running process.
 *
 * Addresses: N function entry points (+ a small offset, so they sit inside
 * the function) from the symbol tables of every module of PID, in a fixed
 * pseudo-random order.  Prints "first_us AVG" and "cached_ns AVG".  */
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cprof/symbols.h"

struct addrs {
	uint64_t *v;
	size_t n, cap;
};

static int collect(Dwfl_Module *mod, void **userdata, const char *name,
		   Dwarf_Addr start, void *arg)
{
	struct addrs *a = arg;
	int nsyms = dwfl_module_getsymtab(mod);
	for (int i = 0; i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		if (!dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL,
					     NULL) ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size < 8)
			continue;
		if (a->n == a->cap) {
			a->cap = a->cap ? 2 * a->cap : 4096;
			a->v = realloc(a->v, a->cap * sizeof(*a->v));
			if (!a->v)
				return DWARF_CB_ABORT;
		}
		a->v[a->n++] = addr + 4;
	}
	return DWARF_CB_OK;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: symbench PID [N]\n");
		return 2;
	}
	pid_t pid = atoi(argv[1]);
	size_t want = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
	char *path = NULL;
	Dwfl_Callbacks cb = {.find_elf = dwfl_linux_proc_find_elf,
			     .find_debuginfo = dwfl_standard_find_debuginfo,
			     .debuginfo_path = &path};
	Dwfl *dwfl = dwfl_begin(&cb);
	dwfl_report_begin(dwfl);
	if (dwfl_linux_proc_report(dwfl, pid) != 0)
		return 1;
	dwfl_report_end(dwfl, NULL, NULL);
	struct addrs a = {0};
	dwfl_getmodules(dwfl, collect, &a, 0);
	dwfl_end(dwfl);
	/* A fixed shuffle: lookups jump between modules and CUs the way
	 * samples do.  */
	srand(42);
	for (size_t i = a.n; i > 1; i--) {
		size_t j = (size_t)rand() % i;
		uint64_t t = a.v[i - 1];
		a.v[i - 1] = a.v[j];
		a.v[j] = t;
	}
	if (a.n > want)
		a.n = want;
	struct cp_symbols *s;
	double t0 = now();
	if (cp_symbols_new(pid, NULL, &s) < 0)
		return 1;
	double t1 = now();
	size_t named = 0;
	for (size_t i = 0; i < a.n; i++)
		named += cp_symbols_lookup(s, a.v[i])->frames[0].named;
	double t2 = now();
	const int passes = 20;
	for (int p = 0; p < passes; p++)
		for (size_t i = 0; i < a.n; i++)
			cp_symbols_lookup(s, a.v[i]);
	double t3 = now();
	printf("addresses %zu named %zu\n", a.n, named);
	printf("setup_ms %.2f\n", (t1 - t0) * 1e3);
	printf("first_us %.2f\n", (t2 - t1) * 1e6 / (double)a.n);
	printf("cached_ns %.1f\n", (t3 - t2) * 1e9 / (double)a.n / passes);
	cp_symbols_free(s);
	free(a.v);
	return 0;
}
