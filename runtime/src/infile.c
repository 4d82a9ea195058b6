/* infile.c — see infile.h. */
#include "rt/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISFIFO(m))
		return "a pipe";
	return "not a regular file";
}

/* Opens without blocking (a FIFO with no writer would block in open). */
static int open_checked(const char *path, const char *what, bool allow_pipe, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		rt_fail(RT_EIO, "%s %s: cannot open: %s", what, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, st)) {
		rt_fail(RT_EIO, "%s %s: cannot stat: %s", what, path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode) && !(allow_pipe && S_ISFIFO(st->st_mode))) {
		rt_fail(RT_EIO, "%s %s: is %s; expected a regular file%s", what, path,
			kind_of(st->st_mode), allow_pipe ? " or a pipe" : "");
		close(fd);
		return -1;
	}
	/* back to blocking reads: a pipe with a writer waits for its data, one
	 * without a writer reads as empty */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int rt_infile_open(const char *path, const char *what, size_t cap, size_t *size)
{
	struct stat st;
	int fd = open_checked(path, what, false, &st);

	if (fd < 0)
		return -1;
	if ((uint64_t)st.st_size > cap) {
		rt_fail(RT_EIO, "%s %s: is %lld bytes, more than the %zu bytes it may have", what,
			path, (long long)st.st_size, cap);
		close(fd);
		return -1;
	}
	*size = (size_t)st.st_size;
	return fd;
}

enum rt_err rt_infile_read(const char *path, const char *what, size_t cap, bool allow_pipe,
			   struct rt_buf *out)
{
	struct stat st;
	int fd = open_checked(path, what, allow_pipe, &st);
	enum rt_err err = RT_EOK;
	ssize_t n = 1;

	if (fd < 0)
		return RT_EIO;
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > cap)
		err = rt_fail(RT_EIO, "%s %s: is %lld bytes, more than the %zu bytes it may have",
			      what, path, (long long)st.st_size, cap);
	while (!err && n > 0) {
		err = rt_buf_reserve(out, 65536);
		if (err)
			break;
		n = read(fd, out->data + out->len, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = rt_fail(RT_EIO, "%s %s: cannot read: %s", what, path, strerror(errno));
		else
			out->len += (size_t)n;
		if (!err && out->len > cap)
			err = rt_fail(RT_EIO, "%s %s: more than the %zu bytes it may have", what, path,
				      cap);
	}
	close(fd);
	if (!err && !out->len && S_ISFIFO(st.st_mode))
		err = rt_fail(RT_EIO, "%s %s: the pipe gave no data (nothing writes to it)", what,
			      path);
	if (!err)
		err = rt_buf_reserve(out, 0);
	if (!err)
		out->data[out->len] = '\0';
	return err;
}
