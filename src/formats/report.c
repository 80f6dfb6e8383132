/* --format report: the top-functions report of a profile
 * (src/analysis/report.c), or for a heap profile the heap report
 * (heap_report.c: the summary's figures and the top sites).  */
#include "cprof/heap.h"
#include "cprof/report.h"
#include "formats/entries.h"

static int format_report_write(const struct cp_format_input *in,
			       const struct cp_format_options *o, FILE *stream)
{
	if (in->kind == CP_FORMAT_HEAP && in->heap)
		return cp_heap_write_report(in->heap, in->profile,
					    o->top ? o->top : 10, stream);
	const struct cp_profile_meta *meta = cp_profile_meta_const(in->profile);
	struct cp_report_options ro = {
		.top = o->top,
		.name = o->name ? o->name
				: meta->target[0] ? meta->target : NULL,
	};
	return cp_report_write(in->profile, &ro, stream);
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_report = {
	.name = "report",
	.suffixes = { NULL },
	.description = "text: the top functions (with --heap: the heap's figures and top sites)",
	.kinds = CP_FORMAT_SAMPLED | CP_FORMAT_HEAP | CP_FORMAT_DUMP,
	.binary = false,
	.dump_as_profile = true,
	.write = format_report_write,
	.begin = NULL,
	.sample = NULL,
	.end = NULL,
};
