/* --format raw: every sample as "SECONDS TID WEIGHT FRAME;FRAME;..." in
 * time order, written as it is taken (docs/cprof-attach.1); --format
 * trace: the same samples fed to the timeline engine, which writes Chrome
 * trace events.  The recorders of the two formats (registry.c).  */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/rawread.h"
#include "cprof/timeline.h"
#include "formats/entries.h"

struct raw_recorder {
	FILE *stream;
	const struct cp_profile *profile;
	struct cp_folded_options folded;
	char *text;
	size_t text_cap;
	pid_t *named;          /* threads whose "# thread" line is out */
	size_t nnamed;
	/* trace: samples go through the timeline engine instead */
	struct cp_timeline *timeline;
	const char **frames;
	size_t frames_cap;
};

static void raw_free(struct raw_recorder *r)
{
	if (!r)
		return;
	cp_timeline_free(r->timeline);
	free(r->text);
	free(r->named);
	free(r->frames);
	free(r);
}

static int raw_new(const struct cp_format_input *in,
		   const struct cp_format_options *o, FILE *stream,
		   struct raw_recorder **out)
{
	struct raw_recorder *r = calloc(1, sizeof(*r));
	if (!r)
		return -CP_E_NOMEM;
	r->stream = stream;
	r->profile = in->profile;
	/* A raw line has no thread frame: the TID is a field.  */
	r->folded = o->folded;
	r->folded.threads = false;
	*out = r;
	return 0;
}

static int format_raw_begin(const struct cp_format_input *in,
			    const struct cp_format_options *o, FILE *stream,
			    void **state)
{
	struct raw_recorder *r;
	int rc = raw_new(in, o, stream, &r);
	if (rc < 0)
		return rc;
	/* "# fields" tells readers the lines have a WEIGHT (files from
	 * before weights have none); "# weight-unit" what it counts: ticks
	 * of 1/frequency s, the profile's unit.  */
	const struct cp_profile_meta *meta = cp_profile_meta_const(in->profile);
	if (fprintf(stream,
		    "# cprof-attach raw samples: SECONDS TID WEIGHT FRAME;FRAME;... (root first)\n"
		    "# fields SECONDS TID WEIGHT STACK\n"
		    "# target %d %s\n# frequency %u\n# weight-unit %s\n",
		    (int)meta->pid, meta->target, meta->frequency,
		    cp_sample_type_word(&meta->count_type)) < 0) {
		raw_free(r);
		return -CP_E_SYS;
	}
	*state = r;
	return 0;
}

static int format_trace_begin(const struct cp_format_input *in,
			      const struct cp_format_options *o, FILE *stream,
			      void **state)
{
	struct raw_recorder *r;
	int rc = raw_new(in, o, stream, &r);
	if (rc < 0)
		return rc;
	const struct cp_profile_meta *meta = cp_profile_meta_const(in->profile);
	struct cp_timeline_options to = {
		.format = CP_TIMELINE_TRACE,
		.min_samples = (unsigned)o->min_samples,
		.pid = meta->pid,
		.process_name = meta->target,
		/* a unit of weight is a tick */
		.period = meta->frequency ? 1.0 / meta->frequency : 0,
	};
	rc = cp_timeline_new(&to, stream, &r->timeline);
	if (rc < 0) {
		raw_free(r);
		return rc;
	}
	*state = r;
	return 0;
}

/* Feed one rendered stack (frames joined by ';', split in place) to the
 * timeline.  */
static int timeline_sample(struct raw_recorder *r, uint64_t t_ns, pid_t tid,
			   uint64_t weight)
{
	size_t n = 0;
	for (char *p = r->text; *r->text;) {
		if (n == r->frames_cap) {
			size_t cap = r->frames_cap ? 2 * r->frames_cap : 64;
			const char **grown =
				realloc(r->frames, cap * sizeof(*grown));
			if (!grown)
				return -CP_E_NOMEM;
			r->frames = grown;
			r->frames_cap = cap;
		}
		r->frames[n++] = p;
		char *semi = strchr(p, ';');
		if (!semi)
			break;
		*semi = '\0';
		p = semi + 1;
	}
	return cp_timeline_sample_weighted(r->timeline, NULL,
					   (double)t_ns / 1e9, tid, weight,
					   r->frames, n);
}

static int format_raw_sample(void *state, uint64_t t_ns, pid_t tid,
			     uint32_t stack, uint64_t weight)
{
	struct raw_recorder *r = state;
	bool named = false;
	for (size_t i = 0; i < r->nnamed && !named; i++)
		named = r->named[i] == tid;
	if (!named) {
		pid_t *grown = realloc(r->named, (r->nnamed + 1) * sizeof(*grown));
		if (grown) {
			r->named = grown;
			r->named[r->nnamed++] = tid;
		}
		const char *name = cp_profile_thread_name(r->profile, tid);
		if (r->timeline)
			cp_timeline_thread_name(r->timeline, tid,
						name ? name : "");
		else
			fprintf(r->stream, "# thread %d %s\n", (int)tid,
				name ? name : "");
	}
	ssize_t len = cp_render_stack(r->profile, stack, &r->folded, &r->text,
				      &r->text_cap);
	if (len < 0)
		return (int)len;
	if (r->timeline)
		return timeline_sample(r, t_ns, tid, weight);
	if (fprintf(r->stream, "%" PRIu64 ".%06" PRIu64 " %d %" PRIu64 " %s\n",
		    t_ns / 1000000000u, t_ns / 1000u % 1000000u, (int)tid,
		    weight, r->text) < 0)
		return -CP_E_SYS;
	return 0;
}

static int format_raw_end(void *state, bool write)
{
	struct raw_recorder *r = state;
	int rc = 0;
	if (r->timeline && write) {
		/* Close the frames still open and end the document.  */
		rc = cp_timeline_finish(r->timeline);
		r->timeline = NULL;
	}
	raw_free(r);
	return rc;
}

/* ------------------------------------------------------------- reader */

/* Raw samples read back into a profile (the readers' table): the weights
 * of equal (thread, stack) pairs add up, as folded output counts them.  */
struct raw_into {
	struct cp_profile *profile;
	uint32_t *location_of;    /* by string id of the frame: 1 + location */
	size_t location_cap;
	uint32_t *locs;
	size_t locs_cap;
};

/* The location of frame NAME (LEN bytes), one per name.  */
static uint32_t frame_location(struct raw_into *r, const char *name,
			       size_t len)
{
	uint32_t fn = cp_profile_intern(r->profile, name, len);
	if (fn == UINT32_MAX)
		return UINT32_MAX;
	if (fn >= r->location_cap) {
		size_t cap = r->location_cap ? r->location_cap : 256;
		while (cap <= fn)
			cap *= 2;
		uint32_t *grown = realloc(r->location_of, cap * sizeof(*grown));
		if (!grown)
			return UINT32_MAX;
		memset(grown + r->location_cap, 0,
		       (cap - r->location_cap) * sizeof(*grown));
		r->location_of = grown;
		r->location_cap = cap;
	}
	if (!r->location_of[fn]) {
		/* FlameGraph's "_[i]" marks an inlined frame.  */
		bool inlined = len > 4 && memcmp(name + len - 4, "_[i]", 4) == 0;
		struct cp_line line = {.inlined = inlined};
		line.function = inlined ? cp_profile_intern(r->profile, name,
							    len - 4)
					: fn;
		if (line.function == UINT32_MAX)
			return UINT32_MAX;
		uint32_t loc = cp_profile_add_location(r->profile, 0, 0, &line,
						       1);
		if (loc == UINT32_MAX)
			return UINT32_MAX;
		r->location_of[fn] = loc + 1;
	}
	return r->location_of[fn] - 1;
}

static int into_sample(void *arg, const struct cp_raw_sample *sample)
{
	struct raw_into *r = arg;
	const char *const *frames;
	const size_t *lens;
	size_t n;
	int rc = cp_raw_frames(sample, 0, 0, &frames, &lens, &n);
	if (rc < 0)
		return rc;
	if (n > r->locs_cap) {
		uint32_t *grown = realloc(r->locs, n * sizeof(*grown));
		if (!grown)
			return -CP_E_NOMEM;
		r->locs = grown;
		r->locs_cap = n;
	}
	/* innermost first in the profile */
	for (size_t i = 0; i < n; i++) {
		r->locs[n - 1 - i] = frame_location(r, frames[i], lens[i]);
		if (r->locs[n - 1 - i] == UINT32_MAX)
			return -CP_E_NOMEM;
	}
	uint32_t stack = cp_profile_intern_stack(r->profile, r->locs, n);
	if (stack == UINT32_MAX)
		return -CP_E_NOMEM;
	return cp_profile_add(r->profile, sample->tid, stack, sample->weight);
}

static int into_thread(void *arg, pid_t tid, const char *name)
{
	struct raw_into *r = arg;
	return cp_profile_set_thread_name(r->profile, tid, name);
}

static int into_target(void *arg, pid_t pid, const char *name)
{
	struct cp_profile_meta *meta = cp_profile_meta(((struct raw_into *)arg)
							       ->profile);
	meta->pid = pid;
	snprintf(meta->target, sizeof(meta->target), "%s", name ? name : "");
	return 0;
}

static int into_frequency(void *arg, double hz)
{
	struct cp_profile_meta *meta = cp_profile_meta(((struct raw_into *)arg)
							       ->profile);
	/* a whole frequency: the samples are ticks of it */
	meta->frequency = hz >= 1 && hz <= 1e6 && hz == (double)(uint32_t)hz
				  ? (uint32_t)hz : 0;
	return 0;
}

static int into_weight_unit(void *arg, enum cp_raw_weight_unit unit)
{
	struct raw_into *r = arg;
	if (unit == CP_RAW_WEIGHT_NANOSECONDS)
		cp_profile_set_count_type(r->profile, "cpu", "nanoseconds");
	else if (unit == CP_RAW_WEIGHT_UNKNOWN)
		cp_profile_set_count_type(r->profile, "unknown", "count");
	return 0;
}

int cp_format_raw_read(FILE *stream, const char *name,
		       struct cp_profile **out, char *error,
		       size_t error_size)
{
	static const struct cp_raw_callbacks callbacks = {
		.sample = into_sample,
		.thread = into_thread,
		.target = into_target,
		.frequency = into_frequency,
		.weight_unit = into_weight_unit,
	};
	*out = NULL;
	struct raw_into r = {.profile = cp_profile_new()};
	if (!r.profile) {
		if (error && error_size)
			snprintf(error, error_size, "%s: out of memory", name);
		return -CP_E_NOMEM;
	}
	int rc = cp_raw_read(stream, name, &callbacks, &r, error, error_size);
	free(r.location_of);
	free(r.locs);
	if (rc < 0) {
		cp_profile_free(r.profile);
		return rc;
	}
	/* counts of unknown frequency are plain samples */
	if (!cp_profile_counts_samples(r.profile))
		cp_profile_meta(r.profile)->frequency = 0;
	*out = r.profile;
	return 0;
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_raw = {
	.name = "raw",
	.suffixes = { NULL },
	.description = "every sample, timestamped, as taken (for cprof timeline)",
	.kinds = CP_FORMAT_SAMPLED,
	.binary = false,
	.dump_as_profile = false,
	.write = NULL,
	.begin = format_raw_begin,
	.sample = format_raw_sample,
	.end = format_raw_end,
};

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_trace = {
	.name = "trace",
	.suffixes = { NULL },
	.description = "Chrome trace events of function start/end (Perfetto, chrome://tracing)",
	.kinds = CP_FORMAT_SAMPLED,
	.binary = false,
	.dump_as_profile = false,
	.write = NULL,
	.begin = format_trace_begin,
	.sample = format_raw_sample,
	.end = format_raw_end,
};
