/* merge.c — bounded-memory merging of sorted runs (see merge.h). */
#include "merge.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SRC_MIN_BUF 4096u
#define SRC_MAX_BUF (256u << 10)

size_t kb_merge_chunk_bytes(void)
{
	const char *env = getenv("KB_MERGE_CHUNK");
	char *end;
	unsigned long long v = env ? strtoull(env, &end, 10) : 0;

	if (!env || *end || v < 64)
		return 8u << 20;
	return v > (1ull << 30) ? 1u << 30 : (size_t)v;
}

size_t kb_merge_buf_size(size_t n_runs)
{
	size_t each = KB_MERGE_BUDGET / (n_runs ? n_runs : 1);

	return each < SRC_MIN_BUF ? SRC_MIN_BUF : each > SRC_MAX_BUF ? SRC_MAX_BUF : each;
}

void kb_src_init(struct kb_src *s, const char *path, uint64_t off, uint64_t end, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->path = path;
	s->off = off;
	s->end = end;
	s->cap = cap;
}

void kb_src_release(struct kb_src *s)
{
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/* Moves what is left to the front and reads more of the run behind it. */
static enum rt_err refill(struct kb_src *s)
{
	size_t want;
	ssize_t got;
	int fd;

	if (!s->buf && !(s->buf = malloc(s->cap)))
		return rt_fail(RT_ENOMEM, "no memory to merge %s", s->path);
	memmove(s->buf, s->buf + s->pos, s->len - s->pos);
	s->len -= s->pos;
	s->pos = 0;
	want = s->cap - s->len;
	if (want > s->end - s->off)
		want = (size_t)(s->end - s->off);
	if (!want)
		return RT_EOK;
	fd = open(s->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rt_fail(RT_EIO, "cannot open %s: %s", s->path, strerror(errno));
	got = pread(fd, s->buf + s->len, want, (off_t)s->off);
	close(fd);
	if (got <= 0)
		return rt_fail(RT_EIO, "cannot read %s: %s", s->path,
			       got ? strerror(errno) : "file shorter than expected");
	s->len += (size_t)got;
	s->off += (uint64_t)got;
	return RT_EOK;
}

enum rt_err kb_src_fixed(struct kb_src *s, size_t size, const void **item)
{
	enum rt_err err;

	*item = NULL;
	if (s->len - s->pos < size) {
		err = refill(s);
		if (err)
			return err;
		if (s->len == s->pos)
			return RT_EOK;
		if (s->len - s->pos < size)
			return rt_fail(RT_EPROTOCOL, "corrupt part %s: ends inside a record", s->path);
	}
	*item = s->buf + s->pos;
	s->pos += size;
	return RT_EOK;
}

enum rt_err kb_src_line(struct kb_src *s, const char **line, size_t *len)
{
	char *nl = NULL;
	enum rt_err err;

	*line = NULL;
	while (s->len == s->pos || !(nl = memchr(s->buf + s->pos, '\n', s->len - s->pos))) {
		size_t had = s->len - s->pos;

		if (s->off == s->end) {
			if (had)
				return rt_fail(RT_EPROTOCOL, "corrupt part %s: last line has no end",
					       s->path);
			return RT_EOK;
		}
		if (had == s->cap) { /* a line longer than the buffer */
			char *grown = realloc(s->buf, 2 * s->cap);

			if (!grown)
				return rt_fail(RT_ENOMEM, "no memory to merge %s", s->path);
			s->buf = grown;
			s->cap *= 2;
		}
		err = refill(s);
		if (err)
			return err;
	}
	*line = s->buf + s->pos;
	*len = (size_t)(nl - *line);
	s->pos += *len + 1;
	return RT_EOK;
}

void *kb_grow(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
	size_t want = *cap ? 2 * *cap : first;
	void *grown;

	if (n < *cap)
		return items;
	grown = realloc(items, want * size);
	if (grown)
		*cap = want;
	return grown;
}

/* ---------------------------------------------------------------- heap */

enum rt_err kb_heap_init(struct kb_heap *h, uint32_t cap, kb_heap_cmp_fn *cmp, const void *ctx)
{
	memset(h, 0, sizeof(*h));
	h->ids = malloc((cap ? cap : 1) * sizeof(*h->ids));
	h->cmp = cmp;
	h->ctx = ctx;
	return h->ids ? RT_EOK : rt_fail(RT_ENOMEM, "no memory to merge %u runs", cap);
}

void kb_heap_release(struct kb_heap *h)
{
	free(h->ids);
	memset(h, 0, sizeof(*h));
}

void kb_heap_push(struct kb_heap *h, uint32_t id)
{
	uint32_t i = h->n++;

	while (i && h->cmp(h->ctx, id, h->ids[(i - 1) / 2]) < 0) {
		h->ids[i] = h->ids[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->ids[i] = id;
}

void kb_heap_fix_top(struct kb_heap *h, bool gone)
{
	uint32_t id, i = 0;

	if (gone && !--h->n)
		return;
	id = gone ? h->ids[h->n] : h->ids[0];
	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->cmp(h->ctx, h->ids[c + 1], h->ids[c]) < 0)
			c++;
		if (h->cmp(h->ctx, h->ids[c], id) >= 0)
			break;
		h->ids[i] = h->ids[c];
		i = c;
	}
	h->ids[i] = id;
}

/* ---------------------------------------------------------------- runs */

enum rt_err kb_runs_file_open(struct kb_runs_file *rf, const char *dir, const char *name)
{
	memset(rf, 0, sizeof(*rf));
	snprintf(rf->path, sizeof(rf->path), "%s/%s", dir, name);
	return RT_EOK;
}

enum rt_err kb_runs_file_write(struct kb_runs_file *rf, const void *bytes, size_t len)
{
	if (!rf->f) {
		rf->f = fopen(rf->path, "wb");
		if (!rf->f)
			return rt_fail(RT_EIO, "cannot create %s: %s", rf->path, strerror(errno));
		setvbuf(rf->f, NULL, _IOFBF, 1 << 20);
	}
	if (len && fwrite(bytes, 1, len, rf->f) != len)
		return rt_fail(RT_EIO, "cannot write %s: %s", rf->path, strerror(errno));
	rf->size += len;
	return RT_EOK;
}

enum rt_err kb_runs_file_close(struct kb_runs_file *rf)
{
	bool ok = !rf->f || !fclose(rf->f);

	rf->f = NULL;
	return ok ? RT_EOK : rt_fail(RT_EIO, "cannot write %s: %s", rf->path, strerror(errno));
}
