/* Output destinations: a temporary renamed into place, or a device, FIFO
 * or socket written in place (the rules are in cprof/output.h; where a
 * path leads is outdest.c's to find).  */
#include "cprof/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cprof/error.h"
#include "formats/outdest.h"

/* ".NAME" TMP_TAG "PID.RANDOM": what marks our temporaries.  */
#define TMP_TAG ".cprof-tmp."
/* Room the temporary's name needs beyond NAME: ".", the tag, a PID, ".",
 * 8 hex digits.  A longer NAME is cut in the temporary's name.  */
enum { TMP_EXTRA = 1 + sizeof(TMP_TAG) - 1 + 10 + 1 + 8 };

struct cp_output {
	char *path;              /* destination as given; NULL: stdout */
	enum cp_output_kind kind;
	FILE *stream;
	/* CP_OUTPUT_REPLACE only.  */
	int dir_fd;              /* O_PATH: the directory renamed in; -1 */
	char *name;              /* the destination's name in DIR_FD */
	char *tmp_name;          /* the temporary's name in DIR_FD */
	bool replacing;          /* a regular file was there at open */
	mode_t old_mode;         /* its permission bits, kept */
	uid_t old_uid;           /* its owner, given back by root */
	gid_t old_gid;
};

/* Put "cannot create output file PATH: strerror(ERR)" in ERROR, set
 * errno to ERR and return -CP_E_SYS.  */
static int create_failed(const struct cp_output *o, int err, char *error,
			 size_t size)
{
	if (size > 0)
		snprintf(error, size, "cannot create output file %s: %s",
			 o->path, strerror(err));
	errno = err;
	return -CP_E_SYS;
}

/* ".NAME.cprof-tmp." for O->name, cut so that a whole temporary's name
 * fits in NAME_MAX; a new string.  */
static char *tmp_prefix(const struct cp_output *o)
{
	size_t len = strlen(o->name);
	if (len > NAME_MAX - TMP_EXTRA)
		len = NAME_MAX - TMP_EXTRA;
	char *prefix;
	if (asprintf(&prefix, ".%.*s" TMP_TAG, (int)len, o->name) < 0)
		return NULL;
	return prefix;
}

/* Remove the temporaries for O->name that writers which died left: the
 * PID in the name is not alive, and the file is a regular file of ours
 * with no other name.  Best effort: nothing here fails the output.  */
static void remove_stale(const struct cp_output *o, const char *prefix)
{
	int fd = openat(o->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	size_t plen = strlen(prefix);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, plen) != 0)
			continue;
		/* PID.XXXXXXXX: decimal, a dot, 8 hex digits, nothing more */
		const char *p = e->d_name + plen;
		char *end;
		errno = 0;
		long pid = strtol(p, &end, 10);
		if (errno || end == p || *p < '1' || *p > '9' || *end != '.' ||
		    pid <= 0 || pid > INT32_MAX ||
		    strlen(end + 1) != 8 ||
		    strspn(end + 1, "0123456789abcdef") != 8)
			continue;
		/* Alive, or a process we may not signal (EPERM): not ours
		 * to clean.  A PID taken again since is taken as alive.  */
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		struct stat st;
		if (fstatat(o->dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) <
			    0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    st.st_nlink != 1)
			continue;
		unlinkat(o->dir_fd, e->d_name, 0);
	}
	closedir(d);
}

/* 8 random hex digits into BUF (9 bytes).  */
static void random_hex(char buf[9])
{
	uint32_t r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() * 2654435761u;
	}
	snprintf(buf, 9, "%08x", (unsigned)r);
}

/* Clean up after dead writers and create O's temporary.  */
static int create_temp(struct cp_output *o, char *error, size_t size)
{
	char *prefix = tmp_prefix(o);
	if (!prefix)
		return -CP_E_NOMEM;
	remove_stale(o, prefix);
	int fd = -1;
	for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
		char hex[9];
		random_hex(hex);
		free(o->tmp_name);
		if (asprintf(&o->tmp_name, "%s%d.%s", prefix, (int)getpid(),
			     hex) < 0) {
			o->tmp_name = NULL;
			free(prefix);
			return -CP_E_NOMEM;
		}
		/* A new file's mode is 0666 less the umask (or the
		 * directory's default ACL), as for any new file; a replaced
		 * file's bits are kept: set below, from 0600.  */
		fd = openat(o->dir_fd, o->tmp_name,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    o->replacing ? 0600 : 0666);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	free(prefix);
	if (fd < 0)
		return create_failed(o, errno, error, size);
	if ((o->replacing && fchmod(fd, o->old_mode) != 0) ||
	    !(o->stream = fdopen(fd, "w"))) {
		int saved = errno;
		close(fd);
		unlinkat(o->dir_fd, o->tmp_name, 0);
		return create_failed(o, saved, error, size);
	}
	return 0;
}

static void free_output(struct cp_output *o)
{
	if (o->dir_fd >= 0)
		close(o->dir_fd);
	free(o->path);
	free(o->name);
	free(o->tmp_name);
	free(o);
}

int cp_output_open(const char *path, struct cp_output **out, char *error,
		   size_t error_size)
{
	if (error_size > 0)
		error[0] = '\0';
	struct cp_output *o = calloc(1, sizeof(*o));
	if (!o || (path && !(o->path = strdup(path)))) {
		free(o);
		if (error_size > 0)
			snprintf(error, error_size, "out of memory");
		errno = ENOMEM;
		return -CP_E_NOMEM;
	}
	o->dir_fd = -1;
	if (!path || strcmp(path, "-") == 0) {
		o->kind = CP_OUTPUT_STDOUT;
		o->stream = stdout;
		*out = o;
		return 0;
	}
	struct cp_outdest dest;
	int rc = cp_outdest_resolve(path, &dest, error, error_size);
	if (rc == 0 && dest.kind == CP_OUTPUT_DIRECT) {
		o->kind = CP_OUTPUT_DIRECT;
		o->stream = fdopen(dest.fd, "w");
		if (!o->stream) {
			close(dest.fd);
			rc = create_failed(o, errno, error, error_size);
		}
	} else if (rc == 0) {
		o->kind = CP_OUTPUT_REPLACE;
		o->dir_fd = dest.dir_fd;
		o->name = dest.name;
		o->replacing = dest.exists;
		o->old_mode = dest.st.st_mode & 0777;
		o->old_uid = dest.st.st_uid;
		o->old_gid = dest.st.st_gid;
		rc = create_temp(o, error, error_size);
	}
	if (rc < 0) {
		int saved = errno;
		if (rc == -CP_E_NOMEM && error_size > 0)
			snprintf(error, error_size, "out of memory");
		free_output(o);
		errno = saved;
		return rc;
	}
	*out = o;
	return 0;
}

FILE *cp_output_stream(struct cp_output *out)
{
	return out->stream;
}

const char *cp_output_path(const struct cp_output *out)
{
	return out->path ? out->path : "-";
}

enum cp_output_kind cp_output_kind(const struct cp_output *out)
{
	return out->kind;
}

/* Flush, sync and close the temporary, give it the replaced file's owner,
 * and rename it into place.  Returns 0 or -CP_E_SYS with errno.  */
static int commit_replace(struct cp_output *o)
{
	int rc = 0, saved = 0;
	int fd = fileno(o->stream);
	if (fflush(o->stream) != 0 || fsync(fd) != 0) {
		rc = -CP_E_SYS;
		saved = errno;
	}
	/* Root replacing another user's file leaves it theirs (as
	 * editors do); anyone else cannot, and the file becomes theirs.  */
	if (rc == 0 && o->replacing && geteuid() == 0 &&
	    fchown(fd, o->old_uid, o->old_gid) != 0) {
		/* Not ours to give (a file system without owners): the
		 * new file stays root's.  */
	}
	if (fclose(o->stream) != 0 && rc == 0) {
		rc = -CP_E_SYS;
		saved = errno;
	}
	o->stream = NULL;
	/* Whatever came to the name since open: a regular file is
	 * replaced as planned; anything else (a link, a device, a FIFO) is
	 * never replaced.  */
	struct stat st;
	if (rc == 0 &&
	    fstatat(o->dir_fd, o->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISREG(st.st_mode)) {
		rc = -CP_E_SYS;
		saved = EEXIST;
	}
	if (rc == 0 && renameat(o->dir_fd, o->tmp_name, o->dir_fd, o->name) != 0) {
		rc = -CP_E_SYS;
		saved = errno;
	}
	if (rc < 0)
		unlinkat(o->dir_fd, o->tmp_name, 0);
	errno = saved;
	return rc;
}

int cp_output_commit(struct cp_output *o)
{
	int rc = 0, saved = 0;
	switch (o->kind) {
	case CP_OUTPUT_STDOUT:
		if (fflush(o->stream) != 0 || ferror(o->stream)) {
			rc = -CP_E_SYS;
			saved = errno ? errno : EIO;
		}
		break;
	case CP_OUTPUT_DIRECT:
		/* Nothing to sync on a device, FIFO or socket (fsync says
		 * EINVAL): what close reports is the last word.  */
		if (fflush(o->stream) != 0 || ferror(o->stream)) {
			rc = -CP_E_SYS;
			saved = errno ? errno : EIO;
		}
		if (fclose(o->stream) != 0 && rc == 0) {
			rc = -CP_E_SYS;
			saved = errno;
		}
		o->stream = NULL;
		break;
	case CP_OUTPUT_REPLACE:
		rc = commit_replace(o);
		saved = errno;
		break;
	}
	free_output(o);
	errno = saved;
	return rc;
}

void cp_output_abort(struct cp_output *o)
{
	if (!o)
		return;
	if (o->kind == CP_OUTPUT_DIRECT && o->stream)
		__fpurge(o->stream); /* stop here: the rest is not sent */
	if (o->kind != CP_OUTPUT_STDOUT && o->stream)
		fclose(o->stream);
	if (o->kind == CP_OUTPUT_REPLACE)
		unlinkat(o->dir_fd, o->tmp_name, 0);
	free_output(o);
}
