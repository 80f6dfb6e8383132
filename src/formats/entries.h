/* The functions of the format registry's entries (registry.c), one
 * group per format file of src/formats/.  Private to the library.  */
#ifndef CPROF_FORMATS_ENTRIES_H
#define CPROF_FORMATS_ENTRIES_H

#include "cprof/format.h"

#define CP_FORMAT_WRITE_ARGS                                                \
	const struct cp_format_input *in,                                   \
	const struct cp_format_options *options, FILE *stream
#define CP_FORMAT_BEGIN_ARGS CP_FORMAT_WRITE_ARGS, void **state

/* raw.c: every sample, timestamped, as taken; trace: Chrome trace
 * events through the timeline engine.  */
int cp_format_raw_begin(CP_FORMAT_BEGIN_ARGS);
int cp_format_raw_sample(void *state, uint64_t t_ns, pid_t tid,
			 uint32_t stack, uint64_t weight);
int cp_format_raw_end(void *state, bool write);
int cp_format_trace_begin(CP_FORMAT_BEGIN_ARGS);
/* The readers' entry: raw samples aggregated into a profile.  */
int cp_format_raw_read(FILE *stream, const char *name,
		       struct cp_profile **out, char *error,
		       size_t error_size);

/* folded.c, svg.c, pprof.c: the profile writers.  */
int cp_format_folded_write(CP_FORMAT_WRITE_ARGS);
int cp_format_svg_write(CP_FORMAT_WRITE_ARGS);
int cp_format_pprof_write(CP_FORMAT_WRITE_ARGS);

/* report.c: the top-functions report, or the heap report.  */
int cp_format_report_write(CP_FORMAT_WRITE_ARGS);

/* dump.c: a dump as text or JSON.  */
int cp_format_dump_text_write(CP_FORMAT_WRITE_ARGS);
int cp_format_dump_json_write(CP_FORMAT_WRITE_ARGS);

/* speedscope.c: aggregated, or in time order as samples arrive.  */
int cp_format_speedscope_write(CP_FORMAT_WRITE_ARGS);
int cp_format_speedscope_begin(CP_FORMAT_BEGIN_ARGS);
int cp_format_speedscope_sample(void *state, uint64_t t_ns, pid_t tid,
				uint32_t stack, uint64_t weight);
int cp_format_speedscope_end(void *state, bool write);

#endif
