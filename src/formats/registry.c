/* The format registry (include/cprof/format.h): the table of output
 * formats, the table of input formats, and the recorders that feed a
 * format the samples as they are taken.  A new format is a file of
 * src/formats/ and one line below.  */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cprof/error.h"
#include "formats/entries.h"


/* The output formats, in the order --help lists them.  A format is a
 * file of src/formats/ defining `const struct cp_format cp_format_NAME`
 * (its name, suffixes, the kinds it represents, its functions) and one
 * X(NAME) here.  */
#define CP_FORMAT_TABLE                                                    \
	X(folded) X(raw) X(trace) X(svg) X(pprof) X(speedscope) X(report) \
	X(text) X(json)

#define X(name) extern const struct cp_format cp_format_##name;
CP_FORMAT_TABLE
#undef X

static const struct cp_format *const formats[] = {
#define X(name) &cp_format_##name,
	CP_FORMAT_TABLE
#undef X
};

#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

static const struct cp_format_reader readers[] = {
	{ "folded", { ".folded", NULL },
	  "folded stacks (FlameGraph's format; cprof's sample_type header)",
	  cp_read_folded },
	{ "raw", { ".raw", NULL },
	  "cprof-attach's raw samples, their weights added up per stack",
	  cp_format_raw_read },
};

#define NREADERS (sizeof(readers) / sizeof(readers[0]))

const struct cp_format *const *cp_formats(size_t *n)
{
	*n = NFORMATS;
	return formats;
}

const struct cp_format *cp_format_find(const char *name)
{
	for (size_t i = 0; name && i < NFORMATS; i++)
		if (strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}

/* The length of the longest of SUFFIXES that PATH ends with (any case),
 * 0 when none does.  */
static size_t suffix_match(const char *path, const char *const *suffixes)
{
	size_t len = strlen(path), best = 0;
	for (size_t i = 0; suffixes[i]; i++) {
		size_t n = strlen(suffixes[i]);
		/* a suffix alone is not a name with that suffix */
		if (n < len && n > best &&
		    strcasecmp(path + len - n, suffixes[i]) == 0)
			best = n;
	}
	return best;
}

const struct cp_format *cp_format_for_path(const char *path)
{
	const struct cp_format *found = NULL;
	size_t best = 0;
	for (size_t i = 0; path && i < NFORMATS; i++) {
		size_t n = suffix_match(path, formats[i]->suffixes);
		if (n > best) {
			best = n;
			found = formats[i];
		}
	}
	return found;
}

bool cp_format_supports(const struct cp_format *format,
			enum cp_format_kind kind)
{
	return format && (format->kinds & (unsigned)kind) != 0;
}

const struct cp_format *cp_format_default(enum cp_format_kind kind)
{
	switch (kind) {
	case CP_FORMAT_HEAP:
		return cp_format_find("report");
	case CP_FORMAT_DUMP:
		return cp_format_find("text");
	default:
		return cp_format_find("folded");
	}
}

const char *cp_format_names(enum cp_format_kind kind, char *buf, size_t size)
{
	size_t n = 0, used = 0, total = 0;
	for (size_t i = 0; i < NFORMATS; i++)
		total += cp_format_supports(formats[i], kind);
	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < NFORMATS && used < size; i++) {
		if (!cp_format_supports(formats[i], kind))
			continue;
		n++;
		const char *sep = n == 1 ? "" : n == total ? " or " : ", ";
		int w = snprintf(buf + used, size - used, "%s%s", sep,
				 formats[i]->name);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return buf;
}

int cp_format_help(enum cp_format_kind kind, int indent, int width,
		   FILE *stream)
{
	for (size_t i = 0; i < NFORMATS; i++) {
		const struct cp_format *f = formats[i];
		if (!cp_format_supports(f, kind))
			continue;
		if (fprintf(stream, "%*s%-*s %s\n", indent, "", width, f->name,
			    f->description) < 0)
			return -CP_E_SYS;
	}
	return 0;
}

int cp_format_write(const struct cp_format *format,
		    const struct cp_format_input *in,
		    const struct cp_format_options *options, FILE *stream)
{
	static const struct cp_format_options defaults =
		CP_FORMAT_OPTIONS_INIT;
	const struct cp_format_options *o = options ? options : &defaults;
	if (!cp_format_supports(format, in->kind) || !format->write)
		return -CP_E_INVAL;
	if (in->kind != CP_FORMAT_DUMP || in->profile ||
	    !format->dump_as_profile) {
		/* The data the format reads must be there.  */
		if (format->dump_as_profile ? !in->profile : !in->dump)
			return -CP_E_INVAL;
		return format->write(in, o, stream);
	}
	/* A dump written as a profile: one sample a thread.  */
	struct cp_format_input as_profile = *in;
	int rc = cp_format_dump_profile(in->dump, &as_profile.profile);
	if (rc < 0)
		return rc;
	rc = format->write(&as_profile, o, stream);
	cp_profile_free(as_profile.profile);
	return rc;
}

/* ------------------------------------------------------------ recorders */

struct cp_format_recorder {
	const struct cp_format *format;
	struct cp_format_input in;
	struct cp_format_options options;
	FILE *stream;
	void *state;       /* the format's, while it streams */
	int error;         /* the first failure of a sample */
	int error_errno;
};

int cp_format_recorder_new(const struct cp_format *format,
			   const struct cp_format_input *in,
			   const struct cp_format_options *options,
			   FILE *stream, struct cp_format_recorder **out)
{
	static const struct cp_format_options defaults =
		CP_FORMAT_OPTIONS_INIT;
	*out = NULL;
	if (!cp_format_supports(format, in->kind) ||
	    (!format->write && !format->begin) ||
	    (format->begin && !in->profile))
		return -CP_E_INVAL;
	struct cp_format_recorder *r = calloc(1, sizeof(*r));
	if (!r)
		return -CP_E_NOMEM;
	r->format = format;
	r->in = *in;
	r->options = options ? *options : defaults;
	r->stream = stream;
	if (format->begin) {
		int rc = format->begin(&r->in, &r->options, stream, &r->state);
		if (rc < 0) {
			free(r);
			return rc;
		}
	}
	*out = r;
	return 0;
}

bool cp_format_recorder_streams(const struct cp_format_recorder *r)
{
	return r->state != NULL;
}

void cp_format_record(void *arg, uint64_t t_ns, pid_t tid, uint32_t stack,
		      uint64_t weight)
{
	struct cp_format_recorder *r = arg;
	if (!r->state || r->error)
		return;
	errno = 0;
	int rc = r->format->sample(r->state, t_ns, tid, stack, weight);
	if (rc < 0) {
		r->error = rc;
		r->error_errno = rc == -CP_E_NOMEM ? ENOMEM
				 : errno ? errno : EIO;
	}
}

int cp_format_recorder_finish(struct cp_format_recorder *r)
{
	int rc = r->error;
	int saved = r->error_errno;
	if (r->state) {
		int end_rc = r->format->end(r->state, rc == 0);
		r->state = NULL;
		if (rc == 0)
			rc = end_rc;
	} else {
		rc = cp_format_write(r->format, &r->in, &r->options,
				     r->stream);
	}
	free(r);
	if (saved)
		errno = saved;
	return rc;
}

void cp_format_recorder_free(struct cp_format_recorder *r)
{
	if (!r)
		return;
	if (r->state)
		r->format->end(r->state, false);
	free(r);
}

/* --------------------------------------------------------------- readers */

const struct cp_format_reader *cp_format_readers(size_t *n)
{
	*n = NREADERS;
	return readers;
}

const struct cp_format_reader *cp_format_reader_find(const char *name)
{
	for (size_t i = 0; name && i < NREADERS; i++)
		if (strcmp(readers[i].name, name) == 0)
			return &readers[i];
	return NULL;
}

const struct cp_format_reader *cp_format_reader_for_path(const char *path)
{
	for (size_t i = 0; path && i < NREADERS; i++)
		if (suffix_match(path, readers[i].suffixes))
			return &readers[i];
	return NULL;
}
