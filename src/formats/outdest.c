/* Where an output path leads (cprof/output.h has the rules).
 *
 * cprof runs as root.  Writing a temporary and renaming it over the
 * destination turned /dev/null into a regular file, gave a FIFO's reader
 * nothing and replaced symbolic links; following a link planted in a
 * shared directory (fs.protected_symlinks may be off) would replace any
 * file on the machine.  So the path is walked here one component at a
 * time from a directory held open, with fstatat(AT_SYMLINK_NOFOLLOW): a
 * symbolic link, in a directory part as at the end, is read and followed
 * by this walk only when we or root own it, so nothing is followed that
 * was not checked; the caller renames in the directory that was checked
 * (renameat on the held descriptor), whatever is renamed meanwhile.  A
 * device, FIFO or socket is opened with O_NOFOLLOW and the opened
 * descriptor compared with what was looked at.  Links into /proc
 * (/dev/stdout, /proc/self/cwd) are the kernel's to follow: their text is
 * no path.  */
#include "formats/outdest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "cprof/error.h"

/* Links followed at most, as the kernel's MAXSYMLINKS.  */
enum { MAX_LINKS = 40 };

/* One resolution: the path as given (for messages) and what it costs.  */
struct walk {
	const char *path;
	int links;           /* links followed so far */
	char *error;
	size_t error_size;
};

/* Put the message FMT in W->error, set errno to ERR and return CODE.  */
static int fail(struct walk *w, int code, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct walk *w, int code, int err, const char *fmt, ...)
{
	if (w->error_size > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(w->error, w->error_size, fmt, ap);
		va_end(ap);
	}
	errno = err;
	return code;
}

static int out_of_memory(struct walk *w)
{
	return fail(w, -CP_E_NOMEM, ENOMEM, "out of memory");
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

/* The link NAME (ST) in DIR_FD may be followed: we or root made it.
 * Anyone else's link may point at a file of ours we never meant to
 * replace.  Else the message, and -CP_E_INVAL.  */
static int check_link_owner(struct walk *w, const char *name,
			    const struct stat *st)
{
	if (st->st_uid == geteuid() || st->st_uid == 0)
		return 0;
	return fail(w, -CP_E_INVAL, EPERM,
		    "will not write to %s: the symbolic link %s on its way is owned by uid %u, neither you nor root, so it is not followed; remove it or name another file",
		    w->path, name, (unsigned)st->st_uid);
}

static int too_many_links(struct walk *w)
{
	return fail(w, -CP_E_INVAL, ELOOP,
		    "will not write to %s: more than %d symbolic links on its way (a loop?); name a regular file",
		    w->path, MAX_LINKS);
}

/* Open the directory DIR (relative to AT_FD, or absolute) into *OUT, an
 * O_PATH descriptor, walking it component by component (see above).  */
static int open_dir(struct walk *w, int at_fd, const char *dir, int *out)
{
	int cur = openat(at_fd, *dir == '/' ? "/" : ".",
			 O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return fail(w, -CP_E_SYS, errno,
			    "cannot create output file %s: %s", w->path,
			    strerror(errno));
	char *copy = strdup(dir), *save = NULL;
	if (!copy) {
		close(cur);
		return out_of_memory(w);
	}
	int rc = 0;
	for (char *c = strtok_r(copy, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		int next = -1;
		struct stat st;
		if (strcmp(c, "..") == 0) {
			next = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		} else if (fstatat(cur, c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			next = -1;
		} else if (!S_ISLNK(st.st_mode)) {
			/* O_NOFOLLOW: a link put here since is ENOTDIR */
			next = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW |
						      O_CLOEXEC);
		} else if ((rc = check_link_owner(w, c, &st)) < 0) {
			break;
		} else if (on_procfs(cur)) {
			next = openat(cur, c, O_PATH | O_DIRECTORY | O_CLOEXEC);
		} else if (++w->links > MAX_LINKS) {
			rc = too_many_links(w);
			break;
		} else {
			char *text = read_link(cur, c);
			if (!text) {
				next = -1;
			} else {
				rc = open_dir(w, cur, text, &next);
				free(text);
				if (rc < 0)
					break;
			}
		}
		if (next < 0) {
			rc = fail(w, -CP_E_SYS, errno,
				  "cannot create output file %s: %s", w->path,
				  strerror(errno));
			break;
		}
		close(cur);
		cur = next;
	}
	free(copy);
	if (rc < 0) {
		close(cur);
		return rc;
	}
	*out = cur;
	return 0;
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

/* FD was opened from what ST describes: keep it in DEST, or fail.  */
static int keep_direct(struct walk *w, struct cp_outdest *dest, int fd,
		       const struct stat *st)
{
	if (fd < 0)
		return fail(w, -CP_E_SYS, errno, "cannot open output %s: %s",
			    w->path, strerror(errno));
	struct stat now;
	if (st && (fstat(fd, &now) < 0 || !same_file(st, &now))) {
		close(fd);
		return fail(w, -CP_E_SYS, EAGAIN,
			    "cannot open output %s: it changed while being opened; try again",
			    w->path);
	}
	dest->kind = CP_OUTPUT_DIRECT;
	dest->fd = fd;
	return 0;
}

/* Open the character device, FIFO or socket NAME in DIR_FD (which ST
 * describes) for writing in place.  */
static int open_direct(struct walk *w, struct cp_outdest *dest, int dir_fd,
		       const char *name, const struct stat *st)
{
	if (S_ISSOCK(st->st_mode))
		return keep_direct(w, dest, connect_socket(dir_fd, name, st),
				   NULL);
	/* As the shell's '>': no O_CREAT, and O_TRUNC means nothing to a
	 * device or FIFO.  A FIFO blocks here until a reader opens it (a
	 * signal ends the wait: EINTR).  */
	int fd = openat(dir_fd, name, O_WRONLY | O_NOFOLLOW | O_NOCTTY |
					      O_CLOEXEC);
	return keep_direct(w, dest, fd, st);
}

/* NAME in DIR_FD is a link in /proc: a process's open file (/dev/stdout
 * is /proc/self/fd/1), whose text ("pipe:[1234]") is no path.  Open what
 * the kernel says it stands for and write there, at its end when it is a
 * regular file (what the shell opened with '>' or '>>' stays right).  */
static int open_proc_link(struct walk *w, struct cp_outdest *dest,
			  int dir_fd, const char *name)
{
	struct stat st;
	if (fstatat(dir_fd, name, &st, 0) < 0)
		return fail(w, -CP_E_SYS, errno, "cannot open output %s: %s",
			    w->path, strerror(errno));
	int flags = O_WRONLY | O_NOCTTY | O_CLOEXEC;
	if (S_ISREG(st.st_mode))
		flags |= O_APPEND;
	else if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return fail(w, -CP_E_INVAL, EINVAL,
			    "will not write to %s: it stands for an open %s, which cannot be opened again; use - for standard output",
			    w->path,
			    S_ISSOCK(st.st_mode)  ? "socket"
			    : S_ISDIR(st.st_mode) ? "directory"
			    : S_ISBLK(st.st_mode) ? "block device"
						  : "file of an unknown kind");
	return keep_direct(w, dest, openat(dir_fd, name, flags), &st);
}

int cp_outdest_resolve(const char *path, struct cp_outdest *dest,
		       char *error, size_t error_size)
{
	*dest = (struct cp_outdest){.fd = -1, .dir_fd = -1};
	struct walk w = {.path = path, .error = error,
			 .error_size = error_size};
	char *dir, *name, *link_text = NULL;
	if (!*path)
		return fail(&w, -CP_E_INVAL, ENOENT,
			    "the output file name is empty; name a file");
	if (split_path(path, &dir, &name) < 0)
		return out_of_memory(&w);
	int dir_fd = -1;
	int rc = open_dir(&w, AT_FDCWD, dir ? dir : ".", &dir_fd);
	free(dir);
	while (rc == 0) {
		/* "it is" or "it is a symbolic link to TEXT,", then a kind */
		char it_is[PATH_MAX + 64] = "it is";
		if (link_text)
			snprintf(it_is, sizeof(it_is),
				 "it is a symbolic link to %s,", link_text);
		struct stat st;
		if (directory_name(name)) {
			rc = fail(&w, -CP_E_INVAL, EISDIR,
				  "will not write to %s: %s a directory; name a file in it",
				  path, it_is);
		} else if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT && !link_text)
				dest->kind = CP_OUTPUT_REPLACE; /* a new file */
			else if (errno == ENOENT)
				rc = fail(&w, -CP_E_INVAL, ENOENT,
					  "will not write to %s: it is a symbolic link to %s, which does not exist (a dangling link is not followed); create the file or name another one",
					  path, link_text);
			else
				rc = fail(&w, -CP_E_SYS, errno,
					  "cannot create output file %s: %s",
					  path, strerror(errno));
			break;
		} else if (S_ISREG(st.st_mode)) {
			dest->kind = CP_OUTPUT_REPLACE;
			dest->exists = true;
			dest->st = st;
			break;
		} else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) ||
			   S_ISSOCK(st.st_mode)) {
			rc = open_direct(&w, dest, dir_fd, name, &st);
			break;
		} else if (S_ISDIR(st.st_mode)) {
			rc = fail(&w, -CP_E_INVAL, EISDIR,
				  "will not write to %s: %s a directory; name a file in it",
				  path, it_is);
		} else if (S_ISBLK(st.st_mode)) {
			rc = fail(&w, -CP_E_INVAL, EINVAL,
				  "will not write to %s: %s a block device (a disk); name a regular file",
				  path, it_is);
		} else if (!S_ISLNK(st.st_mode)) {
			rc = fail(&w, -CP_E_INVAL, EINVAL,
				  "will not write to %s: %s neither a regular file nor a character device, FIFO or socket; name another file",
				  path, it_is);
		} else if ((rc = check_link_owner(&w, name, &st)) < 0) {
			break;
		} else if (on_procfs(dir_fd)) {
			rc = open_proc_link(&w, dest, dir_fd, name);
			break;
		} else if (++w.links > MAX_LINKS) {
			rc = too_many_links(&w);
		} else {
			/* Follow the link: its directory part as any, its
			 * last component looked at again by this loop.  */
			free(link_text);
			link_text = read_link(dir_fd, name);
			char *target_dir = NULL, *target_name = NULL;
			if (!link_text) {
				rc = fail(&w, -CP_E_SYS, errno,
					  "cannot read the symbolic link %s: %s",
					  path, strerror(errno));
			} else if (split_path(link_text, &target_dir,
					      &target_name) < 0) {
				rc = out_of_memory(&w);
			} else {
				free(name);
				name = target_name;
				int next = -1;
				if (target_dir)
					rc = open_dir(&w, dir_fd, target_dir,
						      &next);
				free(target_dir);
				if (rc == -CP_E_SYS && (errno == ENOENT ||
							errno == ENOTDIR))
					rc = fail(&w, -CP_E_INVAL, errno,
						  "will not write to %s: it is a symbolic link to %s, whose directory does not exist (a dangling link is not followed); name another file",
						  path, link_text);
				if (next >= 0) {
					close(dir_fd);
					dir_fd = next;
				}
			}
		}
	}
	if (rc == 0 && dest->kind == CP_OUTPUT_REPLACE) {
		dest->dir_fd = dir_fd;
		dest->name = name;
		dir_fd = -1;
		name = NULL;
	}
	if (dir_fd >= 0)
		close(dir_fd);
	free(name);
	free(link_text);
	return rc;
}
