/* --format raw: every sample as "SECONDS TID WEIGHT FRAME;FRAME;..." in
 * time order, written as it is taken (docs/cprof-attach.1); --format
 * trace: the same samples fed to the timeline engine, which writes Chrome
 * trace events.  The recorders of the two formats (registry.c).  */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
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

int cp_format_raw_begin(const struct cp_format_input *in,
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

int cp_format_trace_begin(const struct cp_format_input *in,
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

int cp_format_raw_sample(void *state, uint64_t t_ns, pid_t tid,
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

int cp_format_raw_end(void *state, bool write)
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
