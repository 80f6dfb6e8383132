/* The flame graph benchmark: folded -> SVG for a large synthetic profile
 * (bench/svg_gen.h; by default 1,000,000 samples over 100,000 distinct
 * stacks of depth 10-60).  Built and run by bench/svg.sh.
 *
 *   svg_bench gen OUT.folded [STACKS SAMPLES]
 *       write the synthetic profile as folded stacks
 *   svg_bench svg IN.folded OUT.svg [MINWIDTH]
 *       read IN with cp_read_folded, write OUT with cp_write_svg; print
 *       the time of each step, the peak RSS of this process and the size
 *       of OUT
 *
 * Exit status: 0 done, 1 a step failed, 2 usage.  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "svg_gen.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int gen(int argc, char **argv)
{
	struct svggen_params params = svggen_benchmark;
	if (argc >= 5) {
		params.stacks = strtoull(argv[3], NULL, 10);
		params.samples = strtoull(argv[4], NULL, 10);
	}
	struct cp_profile *p = svggen_profile(&params);
	if (!p) {
		fprintf(stderr, "svg_bench: cannot generate the profile\n");
		return 1;
	}
	FILE *f = fopen(argv[2], "w");
	if (!f) {
		perror(argv[2]);
		cp_profile_free(p);
		return 1;
	}
	int rc = cp_write_folded(p, NULL, f);
	if (fclose(f) != 0 && rc == 0)
		rc = -CP_E_SYS;
	cp_profile_free(p);
	if (rc < 0) {
		fprintf(stderr, "svg_bench: %s: %s\n", argv[2], cp_strerror(rc));
		return 1;
	}
	return 0;
}

static int svg(int argc, char **argv)
{
	double t0 = now();
	FILE *in = fopen(argv[2], "r");
	if (!in) {
		perror(argv[2]);
		return 1;
	}
	struct cp_profile *p = NULL;
	char error[256] = "";
	int rc = cp_read_folded(in, argv[2], &p, error, sizeof(error));
	fclose(in);
	if (rc < 0) {
		fprintf(stderr, "svg_bench: %s\n", error[0] ? error : cp_strerror(rc));
		return 1;
	}
	double t1 = now();
	FILE *out = fopen(argv[3], "w");
	if (!out) {
		perror(argv[3]);
		cp_profile_free(p);
		return 1;
	}
	struct cp_svg_options o = {
		.minwidth = argc >= 5 ? strtod(argv[4], NULL) : -1,
	};
	rc = cp_write_svg(p, &o, out);
	if (fclose(out) != 0 && rc == 0)
		rc = -CP_E_SYS;
	double t2 = now();
	size_t nsamples;
	cp_profile_samples(p, &nsamples);
	uint64_t total = cp_profile_total(p);
	cp_profile_free(p);
	if (rc < 0) {
		fprintf(stderr, "svg_bench: %s: %s\n", argv[3], cp_strerror(rc));
		return 1;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	struct stat st;
	stat(argv[3], &st);
	printf("samples %llu, distinct stacks %zu\n", (unsigned long long)total,
	       nsamples);
	printf("read folded  %.3f s\n", t1 - t0);
	printf("write svg    %.3f s\n", t2 - t1);
	printf("total        %.3f s\n", t2 - t0);
	printf("peak rss     %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
	printf("svg size     %.2f MB\n", (double)st.st_size / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "gen") == 0)
		return gen(argc, argv);
	if (argc >= 4 && strcmp(argv[1], "svg") == 0)
		return svg(argc, argv);
	fprintf(stderr, "usage: svg_bench gen OUT.folded [STACKS SAMPLES]\n"
			"       svg_bench svg IN.folded OUT.svg [MINWIDTH]\n");
	return 2;
}
