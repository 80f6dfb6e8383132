/* Output destinations: what an output path may do to the machine (the
 * rules are in cprof/output.h).
 *
 * cprof runs as root.  Writing a temporary and renaming it over the
 * destination turned /dev/null into a regular file, gave a FIFO's reader
 * nothing and replaced symbolic links.  So the destination is looked at
 * first, without following anything (fstatat with AT_SYMLINK_NOFOLLOW),
 * one path component at a time from a directory held open: a link is
 * read and its target looked at the same way, so nothing is followed that
 * was not checked, and the rename happens in the directory that was
 * checked (renameat on the held descriptor), whatever is renamed
 * meanwhile.  A device, FIFO or socket is opened with O_NOFOLLOW and the
 * opened descriptor compared with what was looked at.  */
#include "cprof/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cprof/error.h"

/* Links followed at most, as the kernel's MAXSYMLINKS.  */
enum { MAX_LINKS = 40 };

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

/* Put the message FMT in ERROR, set errno to ERR and return CODE.  */
static int fail(char *error, size_t size, int code, int err, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));
static int fail(char *error, size_t size, int code, int err, const char *fmt,
		...)
{
	if (size > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(error, size, fmt, ap);
		va_end(ap);
	}
	errno = err;
	return code;
}

/* Split PATH at its last '/' into a new *DIR (NULL when there is no '/')
 * and a new *NAME (empty when PATH ends in '/').  */
static int split_path(const char *path, char **dir, char **name)
{
	const char *slash = strrchr(path, '/');
	*dir = NULL;
	*name = strdup(slash ? slash + 1 : path);
	if (slash)
		*dir = slash == path ? strdup("/")
				     : strndup(path, (size_t)(slash - path));
	if (!*name || (slash && !*dir)) {
		free(*dir);
		free(*name);
		return -CP_E_NOMEM;
	}
	return 0;
}

/* A last component that names a directory whatever is there.  */
static bool directory_name(const char *name)
{
	return !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

static bool on_procfs(int fd)
{
	struct statfs sfs;
	return fstatfs(fd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       (a->st_mode & S_IFMT) == (b->st_mode & S_IFMT);
}

/* Connect to the socket NAME in DIR_FD, which ST describes.  Returns the
 * connected descriptor or -1 (errno set).  */
static int connect_socket(int dir_fd, const char *name, const struct stat *st)
{
	/* There is no connectat(): connect through /proc/self/fd/N of an
	 * O_PATH descriptor checked to be the socket looked at, so no link
	 * put there meanwhile is followed (and sun_path stays short).  */
	int path_fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (path_fd < 0)
		return -1;
	struct stat now;
	if (fstat(path_fd, &now) < 0 || !same_file(st, &now)) {
		close(path_fd);
		errno = EAGAIN;
		return -1;
	}
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d",
		 path_fd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc = fd < 0 ? -1
			: connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	int saved = errno;
	close(path_fd);
	if (rc < 0 && fd >= 0)
		close(fd);
	errno = saved;
	return rc < 0 ? -1 : fd;
}

/* Open the character device, FIFO or socket NAME in DIR_FD (which ST
 * describes) for writing in place.  */
static int open_direct(struct cp_output *o, int dir_fd, const char *name,
		       const struct stat *st, char *error, size_t size)
{
	int fd;
	if (S_ISSOCK(st->st_mode)) {
		fd = connect_socket(dir_fd, name, st);
	} else {
		/* As the shell's '>': no O_CREAT, and O_TRUNC means nothing
		 * to a device or FIFO.  A FIFO blocks here until a reader
		 * opens it (a signal ends the wait: EINTR).  */
		fd = openat(dir_fd, name,
			    O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	}
	if (fd < 0)
		return fail(error, size, -CP_E_SYS, errno,
			    "cannot open output %s: %s", o->path,
			    strerror(errno));
	struct stat now;
	if (!S_ISSOCK(st->st_mode) &&
	    (fstat(fd, &now) < 0 || !same_file(st, &now))) {
		close(fd);
		return fail(error, size, -CP_E_SYS, EAGAIN,
			    "cannot open output %s: it changed while being opened; try again",
			    o->path);
	}
	o->stream = fdopen(fd, "w");
	if (!o->stream) {
		int saved = errno;
		close(fd);
		return fail(error, size, -CP_E_SYS, saved,
			    "cannot open output %s: %s", o->path,
			    strerror(saved));
	}
	o->kind = CP_OUTPUT_DIRECT;
	return 0;
}

/* NAME in DIR_FD is a link under /proc: a process's open file
 * (/dev/stdout is /proc/self/fd/1), whose text ("pipe:[1234]") is no
 * path.  Open what the kernel says it stands for and write there, at its
 * end when it is a regular file (what the shell opened with '>' or '>>'
 * stays valid).  */
static int open_proc_link(struct cp_output *o, int dir_fd, const char *name,
			  char *error, size_t size)
{
	struct stat st;
	if (fstatat(dir_fd, name, &st, 0) < 0)
		return fail(error, size, -CP_E_SYS, errno,
			    "cannot open output %s: %s", o->path,
			    strerror(errno));
	int flags = O_WRONLY | O_NOCTTY | O_CLOEXEC;
	if (S_ISREG(st.st_mode))
		flags |= O_APPEND;
	else if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return fail(error, size, -CP_E_INVAL, EINVAL,
			    "will not write to %s: it stands for an open %s, which cprof cannot reopen; use - for standard output",
			    o->path,
			    S_ISSOCK(st.st_mode)  ? "socket"
			    : S_ISDIR(st.st_mode) ? "directory"
			    : S_ISBLK(st.st_mode) ? "block device"
						  : "file of an unknown kind");
	int fd = openat(dir_fd, name, flags);
	if (fd < 0)
		return fail(error, size, -CP_E_SYS, errno,
			    "cannot open output %s: %s", o->path,
			    strerror(errno));
	struct stat now;
	if (fstat(fd, &now) < 0 || !same_file(&st, &now)) {
		close(fd);
		return fail(error, size, -CP_E_SYS, EAGAIN,
			    "cannot open output %s: it changed while being opened; try again",
			    o->path);
	}
	o->stream = fdopen(fd, "w");
	if (!o->stream) {
		int saved = errno;
		close(fd);
		return fail(error, size, -CP_E_SYS, saved,
			    "cannot open output %s: %s", o->path,
			    strerror(saved));
	}
	o->kind = CP_OUTPUT_DIRECT;
	return 0;
}

/* The text of the link NAME in DIR_FD, a new string; NULL with errno.  */
static char *read_link(int dir_fd, const char *name)
{
	char *text = malloc(PATH_MAX);
	if (!text)
		return NULL;
	ssize_t n = readlinkat(dir_fd, name, text, PATH_MAX);
	if (n < 0 || n >= PATH_MAX) {
		if (n >= PATH_MAX)
			errno = ENAMETOOLONG;
		free(text);
		return NULL;
	}
	text[n] = '\0';
	return text;
}

/* Look at O->path one component at a time and decide how it is written:
 * a direct destination is opened; a replaced one gets O->dir_fd, O->name
 * and, for an existing file, O->replacing and its owner.  */
static int resolve(struct cp_output *o, char *error, size_t size)
{
	const char *path = o->path;
	char *dir, *name, *link_text = NULL;
	int rc = split_path(path, &dir, &name);
	if (rc < 0)
		return rc;
	int dir_fd = open(dir ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0) {
		rc = fail(error, size, -CP_E_SYS, errno,
			  "cannot create output file %s: %s", path,
			  strerror(errno));
		goto out;
	}
	for (int links = 0;;) {
		/* "it is" or "it is a symbolic link to TEXT,", then a kind */
		char it_is[PATH_MAX + 64] = "it is";
		if (link_text)
			snprintf(it_is, sizeof(it_is),
				 "it is a symbolic link to %s,", link_text);
		if (directory_name(name)) {
			rc = fail(error, size, -CP_E_INVAL, EISDIR,
				  "will not write to %s: %s a directory; name a file in it",
				  path, it_is);
			goto out;
		}
		struct stat st;
		if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT && links == 0) {
				o->kind = CP_OUTPUT_REPLACE;
				break;
			}
			if (errno == ENOENT)
				rc = fail(error, size, -CP_E_INVAL, ENOENT,
					  "will not write to %s: it is a symbolic link to %s, which does not exist (a dangling link is not followed); create the file or name another one",
					  path, link_text);
			else
				rc = fail(error, size, -CP_E_SYS, errno,
					  "cannot create output file %s: %s",
					  path, strerror(errno));
			goto out;
		}
		switch (st.st_mode & S_IFMT) {
		case S_IFREG:
			o->kind = CP_OUTPUT_REPLACE;
			o->replacing = true;
			o->old_mode = st.st_mode & 0777;
			o->old_uid = st.st_uid;
			o->old_gid = st.st_gid;
			goto found;
		case S_IFCHR:
		case S_IFIFO:
		case S_IFSOCK:
			rc = open_direct(o, dir_fd, name, &st, error, size);
			goto out;
		case S_IFDIR:
			rc = fail(error, size, -CP_E_INVAL, EISDIR,
				  "will not write to %s: %s a directory; name a file in it",
				  path, it_is);
			goto out;
		case S_IFBLK:
			rc = fail(error, size, -CP_E_INVAL, EINVAL,
				  "will not write to %s: %s a block device (a disk); name a regular file",
				  path, it_is);
			goto out;
		case S_IFLNK:
			break;
		default:
			rc = fail(error, size, -CP_E_INVAL, EINVAL,
				  "will not write to %s: %s neither a regular file nor a character device, FIFO or socket; name another file",
				  path, it_is);
			goto out;
		}
		/* A link: followed only when we or root made it.  Anyone
		 * else's link may point at a file of ours we never meant to
		 * replace (fs.protected_symlinks covers only sticky
		 * world-writable directories, and may be off).  */
		if (st.st_uid != geteuid() && st.st_uid != 0) {
			rc = fail(error, size, -CP_E_INVAL, EPERM,
				  "will not write to %s: it is a symbolic link owned by uid %u, neither you nor root, so it is not followed; remove it or name another file",
				  path, (unsigned)st.st_uid);
			goto out;
		}
		if (on_procfs(dir_fd)) {
			rc = open_proc_link(o, dir_fd, name, error, size);
			goto out;
		}
		if (++links > MAX_LINKS) {
			rc = fail(error, size, -CP_E_INVAL, ELOOP,
				  "will not write to %s: more than %d symbolic links (a loop?); name a regular file",
				  path, MAX_LINKS);
			goto out;
		}
		free(link_text);
		link_text = read_link(dir_fd, name);
		if (!link_text) {
			rc = fail(error, size, -CP_E_SYS, errno,
				  "cannot read the symbolic link %s: %s", path,
				  strerror(errno));
			goto out;
		}
		char *target_dir, *target_name;
		rc = split_path(link_text, &target_dir, &target_name);
		if (rc < 0)
			goto out;
		free(name);
		name = target_name;
		if (target_dir) {
			/* An absolute target ignores DIR_FD.  The directories
			 * on the way are the kernel's to follow.  */
			int next = openat(dir_fd, target_dir,
					  O_PATH | O_DIRECTORY | O_CLOEXEC);
			int err = errno;
			free(target_dir);
			if (next < 0) {
				if (err == ENOENT || err == ENOTDIR ||
				    err == ELOOP)
					rc = fail(error, size, -CP_E_INVAL, err,
						  "will not write to %s: it is a symbolic link to %s, whose directory cannot be reached (%s); name another file",
						  path, link_text, strerror(err));
				else
					rc = fail(error, size, -CP_E_SYS, err,
						  "cannot create output file %s: %s",
						  path, strerror(err));
				goto out;
			}
			close(dir_fd);
			dir_fd = next;
		}
	}
found:
	rc = 0;
out:
	if (rc == 0 && o->kind == CP_OUTPUT_REPLACE) {
		o->dir_fd = dir_fd;
		o->name = name;
		dir_fd = -1;
		name = NULL;
	}
	if (dir_fd >= 0)
		close(dir_fd);
	free(dir);
	free(name);
	free(link_text);
	return rc;
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
		return fail(error, size, -CP_E_SYS, errno,
			    "cannot create output file %s: %s", o->path,
			    strerror(errno));
	if (o->replacing && fchmod(fd, o->old_mode) != 0) {
		int saved = errno;
		close(fd);
		unlinkat(o->dir_fd, o->tmp_name, 0);
		return fail(error, size, -CP_E_SYS, saved,
			    "cannot create output file %s: %s", o->path,
			    strerror(saved));
	}
	o->stream = fdopen(fd, "w");
	if (!o->stream) {
		int saved = errno;
		close(fd);
		unlinkat(o->dir_fd, o->tmp_name, 0);
		return fail(error, size, -CP_E_SYS, saved,
			    "cannot create output file %s: %s", o->path,
			    strerror(saved));
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
	if (!o)
		return fail(error, error_size, -CP_E_NOMEM, ENOMEM,
			    "out of memory");
	o->dir_fd = -1;
	if (!path || strcmp(path, "-") == 0) {
		o->kind = CP_OUTPUT_STDOUT;
		o->stream = stdout;
		*out = o;
		return 0;
	}
	o->path = strdup(path);
	int rc = o->path ? resolve(o, error, error_size) : -CP_E_NOMEM;
	if (rc == 0 && o->kind == CP_OUTPUT_REPLACE)
		rc = create_temp(o, error, error_size);
	if (rc < 0) {
		int saved = errno;
		if (rc == -CP_E_NOMEM) {
			saved = ENOMEM;
			fail(error, error_size, rc, saved, "out of memory");
		}
		free_output(o);
		errno = saved;
		return rc;
	}
	*out = o;
	return 0;
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
