/* Output files: a temporary beside the destination, renamed when done.  */
#include "cprof/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cprof/error.h"

struct cp_output {
	char *path;      /* destination; NULL for standard output */
	char *tmp_path;  /* the temporary being written */
	FILE *stream;
};

int cp_output_open(const char *path, struct cp_output **out)
{
	struct cp_output *o = calloc(1, sizeof(*o));
	if (!o)
		return -CP_E_NOMEM;
	if (!path || strcmp(path, "-") == 0) {
		o->stream = stdout;
		*out = o;
		return 0;
	}
	o->path = strdup(path);
	if (!o->path || asprintf(&o->tmp_path, "%s.tmp.XXXXXX", path) < 0) {
		o->tmp_path = NULL;
		goto fail;
	}
	int fd = mkostemp(o->tmp_path, O_CLOEXEC);
	if (fd < 0)
		goto fail;
	/* mkostemp creates 0600; a profile is an ordinary file.  */
	mode_t mask = umask(0);
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	o->stream = fdopen(fd, "w");
	if (!o->stream) {
		int saved = errno;
		close(fd);
		unlink(o->tmp_path);
		errno = saved;
		goto fail;
	}
	*out = o;
	return 0;
fail: {
	int saved = errno;
	free(o->path);
	free(o->tmp_path);
	free(o);
	errno = saved;
	return -CP_E_SYS;
}
}

const char *cp_output_format_for_path(const char *path)
{
	static const struct {
		const char *suffix, *format;
	} known[] = {
		{".svg", "svg"},
		{".folded", "folded"},
		{".pb.gz", "pprof"},
		{".speedscope.json", "speedscope"},
	};
	size_t len = path ? strlen(path) : 0;
	for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++) {
		size_t n = strlen(known[i].suffix);
		if (len > n && strcasecmp(path + len - n, known[i].suffix) == 0)
			return known[i].format;
	}
	return NULL;
}

FILE *cp_output_stream(struct cp_output *out)
{
	return out->stream;
}

const char *cp_output_path(const struct cp_output *out)
{
	return out->path ? out->path : "-";
}

static void free_output(struct cp_output *o)
{
	free(o->path);
	free(o->tmp_path);
	free(o);
}

int cp_output_commit(struct cp_output *o)
{
	int rc = 0;
	if (!o->path) {
		if (fflush(o->stream) != 0)
			rc = -CP_E_SYS;
		free_output(o);
		return rc;
	}
	if (fflush(o->stream) != 0 || fsync(fileno(o->stream)) != 0)
		rc = -CP_E_SYS;
	int saved = errno;
	if (fclose(o->stream) != 0 && rc == 0) {
		rc = -CP_E_SYS;
		saved = errno;
	}
	if (rc == 0 && rename(o->tmp_path, o->path) != 0) {
		rc = -CP_E_SYS;
		saved = errno;
	}
	if (rc < 0)
		unlink(o->tmp_path);
	free_output(o);
	errno = saved;
	return rc;
}

void cp_output_abort(struct cp_output *o)
{
	if (!o)
		return;
	if (o->path) {
		fclose(o->stream);
		unlink(o->tmp_path);
	}
	free_output(o);
}
