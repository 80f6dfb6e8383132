/* Opening files whose paths the target controls: see cprof/tpath.h.  */
#include "cprof/tpath.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/procfs.h"

/* ------------------------------------------------------------ credentials */

/* The value of field NAME ("Uid:") of a status text: the rest of its line,
 * or NULL.  */
static const char *status_field(const char *text, size_t len,
				const char *name, size_t *field_len)
{
	size_t name_len = strlen(name);
	const char *end = text + len;
	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *line_end = nl ? nl : end;
		if ((size_t)(line_end - line) >= name_len &&
		    memcmp(line, name, name_len) == 0) {
			*field_len = (size_t)(line_end - line) - name_len;
			return line + name_len;
		}
		line = nl ? nl + 1 : end;
	}
	return NULL;
}

/* Up to MAX unsigned decimal numbers separated by blanks from FIELD
 * (LEN bytes) into OUT (the Groups: line).  Returns how many, or -1 on
 * anything else.  */
static int parse_ids(const char *field, size_t len, uint32_t *out,
		     size_t max)
{
	size_t n = 0, i = 0;
	while (i < len) {
		if (field[i] == ' ' || field[i] == '\t') {
			i++;
			continue;
		}
		if (field[i] < '0' || field[i] > '9')
			return -1;
		uint64_t value = 0;
		while (i < len && field[i] >= '0' && field[i] <= '9') {
			value = value * 10 + (uint64_t)(field[i] - '0');
			if (value > UINT32_MAX)
				return -1;
			i++;
		}
		if (n < max)
			out[n] = (uint32_t)value;
		n++;
	}
	return n > INT_MAX ? -1 : (int)n;
}

int cp_tpath_creds_parse(const char *text, size_t len,
			 struct cp_tpath_creds *out)
{
	struct cp_task_status status;
	memset(out, 0, sizeof(*out));
	/* "Uid:\treal\teffective\tsaved\tfs", the same for Gid: procfs's
	 * parser; Groups: is ours.  */
	if (cp_task_status_parse(text, len, &status) < 0 ||
	    status.uid[0] < 0 || status.uid[1] < 0 || status.gid[0] < 0 ||
	    status.gid[1] < 0)
		return -CP_E_PARSE;
	out->uid = (uid_t)status.uid[0];
	out->euid = (uid_t)status.uid[1];
	out->gid = (gid_t)status.gid[0];
	out->egid = (gid_t)status.gid[1];
	size_t field_len;
	const char *field = status_field(text, len, "Groups:", &field_len);
	if (field) {
		uint32_t ids[64];
		int n = parse_ids(field, field_len, ids, 64);
		if (n < 0)
			return -CP_E_PARSE;
		out->ngroups = n > 64 ? 64 : (size_t)n;
		for (size_t i = 0; i < out->ngroups; i++)
			out->groups[i] = ids[i];
	}
	return 0;
}

int cp_tpath_creds_read(pid_t pid, struct cp_tpath_creds *out)
{
	char path[64], *text;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (cp_procfs_slurp(path, &text, &len) < 0)
		return -CP_E_NOPROC;
	int rc = cp_tpath_creds_parse(text, len, out);
	free(text);
	return rc;
}

bool cp_tpath_can_read(const struct cp_tpath_creds *creds,
		       const struct stat *st)
{
	if (creds->uid == 0 || creds->euid == 0)
		return true;
	/* As the kernel decides: the owner's bits for the owner, else the
	 * group's for a member, else the others'.  */
	if (st->st_uid == creds->uid || st->st_uid == creds->euid)
		return (st->st_mode & S_IRUSR) != 0;
	bool member = st->st_gid == creds->gid || st->st_gid == creds->egid;
	for (size_t i = 0; !member && i < creds->ngroups; i++)
		member = st->st_gid == creds->groups[i];
	if (member)
		return (st->st_mode & S_IRGRP) != 0;
	return (st->st_mode & S_IROTH) != 0;
}

/* ------------------------------------------------------------ opening */

static const char *kind_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFLNK:
		return "a symbolic link";
	case S_IFIFO:
		return "a FIFO";
	case S_IFCHR:
	case S_IFBLK:
		return "a device";
	case S_IFSOCK:
		return "a socket";
	case S_IFDIR:
		return "a directory";
	default:
		return "not a regular file";
	}
}

/* Does process PID see the file system as we do (same mount namespace,
 * same root)?  */
static bool same_root(pid_t pid, int root_fd)
{
	char path[64];
	struct stat ours, theirs, our_root, their_root;
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	return stat("/proc/self/ns/mnt", &ours) == 0 &&
	       stat(path, &theirs) == 0 && ours.st_ino == theirs.st_ino &&
	       ours.st_dev == theirs.st_dev && stat("/", &our_root) == 0 &&
	       fstat(root_fd, &their_root) == 0 &&
	       our_root.st_ino == their_root.st_ino &&
	       our_root.st_dev == their_root.st_dev;
}

/* PATH resolved in the root of process PID as an O_PATH descriptor.  */
static int open_in_root(pid_t pid, const char *path, int oflags,
			const char **why)
{
	char root_path[64];
	snprintf(root_path, sizeof(root_path), "/proc/%d/root", (int)pid);
	int root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	/* RESOLVE_IN_ROOT: "/" and ".." stop at the target's root, so an
	 * absolute symlink in a container means the container's file, not
	 * ours; RESOLVE_NO_MAGICLINKS: no /proc/.../fd or root link inside
	 * the target's tree leads anywhere else.  */
	struct open_how how = {
		.flags = (uint64_t)oflags,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd;
	int tries = 0;
	do {
		/* EAGAIN: a rename raced with a ".." lookup; try again.  */
		fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	} while (fd < 0 && errno == EAGAIN && ++tries < 8);
	if (fd < 0 && errno == ENOSYS) {
		/* Linux before 5.6.  Resolving the path ourselves is the
		 * only safe way there; it is only needed when the target's
		 * root is not ours.  */
		if (same_root(pid, root)) {
			fd = open(path, oflags);
		} else {
			*why = "in another root, and openat2() is not available to resolve it there";
			errno = ENOSYS;
		}
	}
	int saved = errno;
	close(root);
	errno = saved;
	return fd;
}

/* Check the O_PATH descriptor OPATH by FLAGS, then reopen its file for
 * reading.  Closes OPATH.  */
static int check_and_reopen(int opath, unsigned flags,
			    const struct cp_tpath_creds *creds,
			    struct stat *st, const char **why)
{
	int rc;
	if (fstat(opath, st) != 0) {
		rc = -CP_E_SYS;
		goto out;
	}
	if (!S_ISREG(st->st_mode)) {
		*why = kind_of(st->st_mode);
		rc = -CP_E_PERM;
		goto out;
	}
	if ((flags & CP_TPATH_OWNED) && st->st_uid != 0 &&
	    (!creds || (st->st_uid != creds->uid && st->st_uid != creds->euid))) {
		*why = "owned by another user than the target's or root";
		rc = -CP_E_PERM;
		goto out;
	}
	if ((flags & CP_TPATH_READABLE) && (!creds || !cp_tpath_can_read(creds, st))) {
		*why = "a file the target itself may not read";
		rc = -CP_E_PERM;
		goto out;
	}
	/* The checked inode itself, opened for reading: /proc/self/fd/N
	 * reopens what OPATH holds, whatever the path leads to by now.
	 * O_NONBLOCK all the same: nothing here may ever wait.  */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", opath);
	rc = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (rc < 0)
		rc = -CP_E_SYS;
out:;
	int saved = errno;
	close(opath);
	errno = saved;
	return rc;
}

int cp_tpath_open(pid_t pid, const char *path, unsigned flags,
		  const struct cp_tpath_creds *creds, struct stat *st,
		  const char **why)
{
	const char *unused;
	struct stat st_mem;
	if (!why)
		why = &unused;
	if (!st)
		st = &st_mem;
	*why = NULL;
	/* O_PATH opens no device, FIFO or socket: nothing happens to the
	 * file but a lookup.  */
	int oflags = O_PATH | O_CLOEXEC |
		     ((flags & CP_TPATH_NOFOLLOW) ? O_NOFOLLOW : 0);
	int opath = (flags & CP_TPATH_IN_ROOT) ? open_in_root(pid, path, oflags, why)
					       : open(path, oflags);
	if (opath < 0)
		return *why ? -CP_E_PERM : -CP_E_SYS;
	return check_and_reopen(opath, flags, creds, st, why);
}

int cp_tpath_open_mapped(pid_t pid, uint64_t start, uint64_t end,
			 struct stat *st, const char **why)
{
	const char *unused;
	struct stat st_mem;
	if (!why)
		why = &unused;
	if (!st)
		st = &st_mem;
	*why = NULL;
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
		 (int)pid, start, end);
	/* Following this link is the point: it is the kernel's, to the
	 * mapped file.  */
	int opath = open(path, O_PATH | O_CLOEXEC);
	if (opath < 0)
		return -CP_E_SYS;
	return check_and_reopen(opath, 0, NULL, st, why);
}

bool cp_tpath_debuglink_ok(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > NAME_MAX || strcmp(name, ".") == 0 ||
	    strstr(name, ".."))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c == '/' || c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}
