/* Fuzz the folded-stacks reader, cp_read_folded(), and the writers that
 * `cprof` feeds with what it read: folded, svg, pprof, speedscope.
 *
 * The input is the text of a folded file.  What must hold, beyond no
 * crash, leak or undefined behaviour:
 *   - a read either succeeds with samples or fails with a message;
 *   - folded output read back gives the same profile (the same total
 *     and, written again, the same text);
 *   - the speedscope output is JSON.  */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "fuzzutil.h"

/* A sink for the writers whose output is not checked: opened once, as
 * opening a file per input is what makes a harness slow.  */
static FILE *null_sink(void)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	FUZZ_CHECK(sink != NULL, "cannot open /dev/null");
	return sink;
}

/* PROFILE as folded text, in a new buffer (*LEN bytes).  */
static char *folded_text(const struct cp_profile *profile, size_t *len)
{
	char *text = NULL;
	FILE *mem = open_memstream(&text, len);
	FUZZ_CHECK(mem != NULL, "open_memstream failed");
	int rc = cp_write_folded(profile, NULL, mem);
	FUZZ_CHECK(rc == 0, "cp_write_folded: %s", cp_strerror(rc));
	FUZZ_CHECK(fclose(mem) == 0, "fclose of a memstream failed");
	return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char error[256];
	struct cp_profile *profile;
	FILE *in = fuzz_stream(data, size);
	int rc = cp_read_folded(in, "fuzz", &profile, error, sizeof(error));
	fclose(in);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_PARSE, "unexpected error %s",
			   cp_strerror(rc));
		FUZZ_CHECK(profile == NULL, "a profile after an error");
		FUZZ_CHECK(error[0] != '\0', "an error without a message");
		return 0;
	}
	FUZZ_CHECK(cp_profile_total(profile) > 0, "a profile without samples");

	/* Round trip through the folded writer.  */
	size_t len1, len2;
	char *text1 = folded_text(profile, &len1);
	FILE *again = fuzz_stream((const uint8_t *)text1, len1);
	struct cp_profile *reread;
	rc = cp_read_folded(again, "again", &reread, error, sizeof(error));
	fclose(again);
	/* A first frame that begins with a byte-order mark is written at the
	 * start of the output, where the reader takes it for one: the only
	 * case where the text read back is not the text written.  */
	bool bom = len1 >= 3 && memcmp(text1, "\xef\xbb\xbf", 3) == 0;
	if (!bom) {
		FUZZ_CHECK(rc == 0, "folded output not read back: %s", error);
		FUZZ_CHECK(cp_profile_total(reread) == cp_profile_total(profile),
			   "total %llu read back as %llu",
			   (unsigned long long)cp_profile_total(profile),
			   (unsigned long long)cp_profile_total(reread));
		char *text2 = folded_text(reread, &len2);
		FUZZ_CHECK(len1 == len2 && memcmp(text1, text2, len1) == 0,
			   "folded output changed when read back and written "
			   "again");
		free(text2);
	}
	cp_profile_free(reread);
	free(text1);

	/* The other writers `cprof` feeds from a folded file.  */
	/* Options from a hash of the input, so a crash reproduces from it:
	 * flame graph or icicle, all frames or the default minimum width;
	 * pprof for one input in eight, as it costs more than all the rest
	 * (zlib's deflate state is a fresh quarter megabyte per call).  */
	uint64_t hash = fuzz_hash(data, size);
	FILE *sink = null_sink();
	struct cp_svg_options svg = {
		.inverted = hash & 1,
		.minwidth = hash & 2 ? 0 : -1,
	};
	rc = cp_write_svg(profile, &svg, sink);
	FUZZ_CHECK(rc == 0, "cp_write_svg: %s", cp_strerror(rc));
	if ((hash >> 2) % 8 == 0) {
		rc = cp_write_pprof(profile, sink);
		FUZZ_CHECK(rc == 0, "cp_write_pprof: %s", cp_strerror(rc));
	}

	char *json = NULL;
	size_t json_len;
	FILE *mem = open_memstream(&json, &json_len);
	FUZZ_CHECK(mem != NULL, "open_memstream failed");
	rc = cp_write_speedscope(profile, "fuzz", mem);
	FUZZ_CHECK(rc == 0, "cp_write_speedscope: %s", cp_strerror(rc));
	fclose(mem);
	FUZZ_CHECK(fuzz_json_valid(json, json_len),
		   "speedscope output is not JSON");
	free(json);

	cp_profile_free(profile);
	return 0;
}
