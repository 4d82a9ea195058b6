/* buf.c — growable buffer, JSON text helpers, file I/O and FNV hashing. */
#include "rt/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rt_buf_init(struct rt_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void rt_buf_release(struct rt_buf *b)
{
	free(b->data);
	rt_buf_init(b);
}

void rt_buf_reset(struct rt_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

enum rt_err rt_buf_reserve(struct rt_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	size_t cap = b->cap ? b->cap : 256;
	char *data;

	if (need <= b->cap)
		return RT_EOK;
	while (cap < need)
		cap *= 2;
	data = realloc(b->data, cap);
	if (!data)
		return rt_fail(RT_ENOMEM, "out of memory growing a buffer to %zu bytes", cap);
	b->data = data;
	b->cap = cap;
	return RT_EOK;
}

enum rt_err rt_buf_append(struct rt_buf *b, const void *bytes, size_t len)
{
	enum rt_err err = rt_buf_reserve(b, len);

	if (err)
		return err;
	memcpy(b->data + b->len, bytes, len);
	b->len += len;
	b->data[b->len] = '\0';
	return RT_EOK;
}

enum rt_err rt_buf_printf(struct rt_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;
	enum rt_err err;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return rt_fail(RT_EINVAL, "bad format string '%s'", fmt);
	err = rt_buf_reserve(b, (size_t)n);
	if (err)
		return err;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return RT_EOK;
}

enum rt_err rt_buf_read_file(struct rt_buf *b, const char *path)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;
	enum rt_err err = RT_EOK;

	if (!f)
		return rt_fail(RT_EIO, "cannot open %s: %s", path, strerror(errno));
	while (!err && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		err = rt_buf_append(b, chunk, n);
	if (!err && ferror(f))
		err = rt_fail(RT_EIO, "cannot read %s: %s", path, strerror(errno));
	fclose(f);
	if (!err && !b->data)
		err = rt_buf_reserve(b, 0);
	if (!err)
		b->data[b->len] = '\0';
	return err;
}

enum rt_err rt_buf_write_file(const struct rt_buf *b, const char *path)
{
	char tmp[4096];
	FILE *f;
	int ok, fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* never through a link planted at the temporary name; the rename then
	 * replaces whatever `path` was (a link included) without following it */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return rt_fail(RT_EIO, "cannot create %s: %s", tmp, strerror(errno));
	}
	ok = fwrite(b->data ? b->data : "", 1, b->len, f) == b->len;
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	}
	return RT_EOK;
}

/* Word-at-a-time mix (little-endian loads, so digests agree across hosts):
 * each 8-byte word is folded in with a multiply and rotate. Not
 * cryptographic; a digest only has to tell different runs apart. */
static uint64_t mix_word(uint64_t h, uint64_t w)
{
	h ^= w * 0x9e3779b97f4a7c15ULL;
	h = (h << 31) | (h >> 33);
	return h * 0x100000001b3ULL;
}

static uint64_t load_le64(const unsigned char *p, size_t n)
{
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	return w;
}

uint64_t rt_hash(uint64_t h, const void *bytes, size_t len)
{
	const unsigned char *p = bytes;
	size_t i = 0;

	for (; i + 8 <= len; i += 8)
		h = mix_word(h, load_le64(p + i, 8));
	if (i < len)
		h = mix_word(h, load_le64(p + i, len - i) ^ ((uint64_t)(len - i) << 56));
	return mix_word(h, len);
}

uint64_t rt_hash_u64(uint64_t h, uint64_t v)
{
	return mix_word(h, v);
}
