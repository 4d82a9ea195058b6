/* npy.c — NumPy .npy reading (format 1.0/2.0/3.0) and writing (1.0).
 *
 * The reader is a decoder of outside bytes: every read is bounds-checked
 * against the buffer, every size product is overflow-checked, and anything
 * unexpected is RT_EDECODE with one line naming the file and the problem.
 * The header is a Python dict literal; we accept exactly the subset NumPy
 * writes: string keys 'descr', 'fortran_order', 'shape', a quoted dtype,
 * True/False, and a tuple of non-negative integers. */
#include "rt/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/infile.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c stores elements in host order and assumes a little-endian host"
#endif

static const char npy_magic[6] = { '\x93', 'N', 'U', 'M', 'P', 'Y' };

static const struct npy_dtype {
	const char *descr;
	enum rt_npy_type type;
	size_t size;
} npy_dtypes[] = {
	{ "<f2", RT_NPY_F16, 2 },
	{ "<f4", RT_NPY_F32, 4 },
	{ "<f8", RT_NPY_F64, 8 },
	{ "<i4", RT_NPY_I32, 4 },
};
#define NPY_DTYPE_COUNT (sizeof(npy_dtypes) / sizeof(npy_dtypes[0]))

/* ------------------------------------------------------------ header parser */

/* A position in the header text; `base` is the start of the file so error
 * offsets match what a hex dump shows. */
struct cursor {
	const char *p, *end;
	const uint8_t *base;
	const char *origin;
};

static void skip_space(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
				 *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

/* Skips blanks, then consumes `ch` if it is next. */
static bool eat(struct cursor *c, char ch)
{
	skip_space(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

static bool peek(struct cursor *c, char ch)
{
	skip_space(c);
	return c->p < c->end && *c->p == ch;
}

static enum rt_err malformed(const struct cursor *c, const char *expected)
{
	return rt_fail(RT_EDECODE, "npy %s: malformed header at byte %zu: "
		       "expected %s", c->origin,
		       (size_t)((const uint8_t *)c->p - c->base), expected);
}

/* A quoted ('...' or "...") printable string of fewer than `cap` bytes. */
static enum rt_err parse_string(struct cursor *c, char *out, size_t cap)
{
	char quote;
	size_t n = 0;

	skip_space(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return malformed(c, "a quoted string");
	quote = *c->p++;
	while (c->p < c->end && *c->p != quote) {
		if (*c->p < 0x20 || *c->p > 0x7e || n + 1 >= cap)
			return malformed(c, "a short printable string");
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return malformed(c, "a closing quote");
	c->p++;
	out[n] = '\0';
	return RT_EOK;
}

static enum rt_err parse_bool(struct cursor *c, bool *out)
{
	skip_space(c);
	if (c->end - c->p >= 4 && !memcmp(c->p, "True", 4)) {
		c->p += 4;
		*out = true;
	} else if (c->end - c->p >= 5 && !memcmp(c->p, "False", 5)) {
		c->p += 5;
		*out = false;
	} else {
		return malformed(c, "True or False");
	}
	return RT_EOK;
}

/* Decimal digits, overflow-checked. */
static enum rt_err parse_dim(struct cursor *c, uint64_t *out)
{
	uint64_t v = 0;
	const char *start;

	skip_space(c);
	start = c->p;
	for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++) {
		uint64_t d = (uint64_t)(*c->p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return malformed(c, "a dimension below 2^64");
		v = v * 10 + d;
	}
	if (c->p == start)
		return malformed(c, "a dimension (digits)");
	*out = v;
	return RT_EOK;
}

/* "()", "(n,)" or "(a, b, ...)" with an optional trailing comma. */
static enum rt_err parse_shape(struct cursor *c, struct rt_npy *out)
{
	enum rt_err err;

	if (!eat(c, '('))
		return malformed(c, "'(' opening the shape");
	out->ndim = 0;
	while (!peek(c, ')')) {
		if (out->ndim == RT_NPY_MAX_DIMS)
			return rt_fail(RT_EDECODE, "npy %s: shape has more "
				       "than %d dimensions", c->origin,
				       RT_NPY_MAX_DIMS);
		err = parse_dim(c, &out->shape[out->ndim]);
		if (err)
			return err;
		out->ndim++;
		if (!eat(c, ',') && !peek(c, ')'))
			return malformed(c, "',' or ')' in the shape");
	}
	c->p++;
	return RT_EOK;
}

/* What the header dict said. */
struct npy_header {
	char descr[16];
	bool fortran_order;
	bool seen_descr, seen_order, seen_shape;
};

/* Parses one "key: value" entry of the header dict. */
static enum rt_err parse_entry(struct cursor *c, struct npy_header *h,
			       struct rt_npy *out)
{
	char key[32];
	bool *seen;
	enum rt_err err = parse_string(c, key, sizeof(key));

	if (err)
		return err;
	if (!eat(c, ':'))
		return malformed(c, "':' after a key");
	if (!strcmp(key, "descr"))
		seen = &h->seen_descr;
	else if (!strcmp(key, "fortran_order"))
		seen = &h->seen_order;
	else if (!strcmp(key, "shape"))
		seen = &h->seen_shape;
	else
		return rt_fail(RT_EDECODE, "npy %s: header key '%s' not "
			       "supported (expected descr, fortran_order, "
			       "shape)", c->origin, key);
	if (*seen)
		return rt_fail(RT_EDECODE, "npy %s: header key '%s' appears "
			       "twice", c->origin, key);
	*seen = true;
	if (seen == &h->seen_descr)
		return parse_string(c, h->descr, sizeof(h->descr));
	if (seen == &h->seen_order)
		return parse_bool(c, &h->fortran_order);
	return parse_shape(c, out);
}

/* The whole dict, then nothing but blanks up to the end of the header. */
static enum rt_err parse_dict(struct cursor *c, struct npy_header *h,
			      struct rt_npy *out)
{
	enum rt_err err;

	if (!eat(c, '{'))
		return malformed(c, "'{' opening the header dict");
	while (!peek(c, '}')) {
		err = parse_entry(c, h, out);
		if (err)
			return err;
		if (!eat(c, ',') && !peek(c, '}'))
			return malformed(c, "',' or '}' in the header dict");
	}
	c->p++;
	skip_space(c);
	if (c->p != c->end)
		return malformed(c, "only blanks after the header dict");
	if (!h->seen_descr || !h->seen_order || !h->seen_shape)
		return rt_fail(RT_EDECODE, "npy %s: header lacks key '%s'",
			       c->origin, !h->seen_descr ? "descr" :
			       !h->seen_order ? "fortran_order" : "shape");
	return RT_EOK;
}

/* ------------------------------------------------------------ reading */

static uint32_t load_le(const uint8_t *p, size_t n)
{
	uint32_t v = 0;

	while (n-- > 0)
		v = v << 8 | p[n];
	return v;
}

/* Checks magic and version; finds the header text [*start, *start+*hlen). */
static enum rt_err parse_preamble(const uint8_t *bytes, size_t len,
				  const char *origin, size_t *start,
				  size_t *hlen)
{
	if (len < 10 || memcmp(bytes, npy_magic, sizeof(npy_magic)))
		return rt_fail(RT_EDECODE, "npy %s: not a .npy file (%s)",
			       origin, len < 10 ? "shorter than the preamble"
						: "bad magic");
	if (bytes[6] < 1 || bytes[6] > 3 || bytes[7] != 0)
		return rt_fail(RT_EDECODE, "npy %s: format version %u.%u not "
			       "supported (expected 1.0, 2.0 or 3.0)", origin,
			       bytes[6], bytes[7]);
	*start = bytes[6] == 1 ? 10 : 12;
	if (len < *start)
		return rt_fail(RT_EDECODE, "npy %s: truncated preamble",
			       origin);
	*hlen = load_le(bytes + 8, *start - 8);
	if (*hlen > len - *start)
		return rt_fail(RT_EDECODE, "npy %s: header truncated: it "
			       "declares %zu bytes, %zu present", origin,
			       *hlen, len - *start);
	return RT_EOK;
}

/* Element type, count and size checks once the header is parsed. */
static enum rt_err check_payload(const struct npy_header *h, size_t avail,
				 const char *origin, struct rt_npy *out)
{
	uint64_t count = 1;
	size_t i;

	for (i = 0; i < NPY_DTYPE_COUNT; i++)
		if (!strcmp(h->descr, npy_dtypes[i].descr))
			break;
	if (i == NPY_DTYPE_COUNT)
		return rt_fail(RT_EDECODE, "npy %s: dtype '%s' not supported "
			       "(expected <f2, <f4, <f8 or <i4)", origin, h->descr);
	if (h->fortran_order)
		return rt_fail(RT_EDECODE, "npy %s: fortran_order True not "
			       "supported (write C-order arrays)", origin);
	out->type = npy_dtypes[i].type;
	out->elem_size = npy_dtypes[i].size;
	for (uint32_t d = 0; d < out->ndim; d++) {
		if (out->shape[d] && count > UINT64_MAX / out->shape[d])
			return rt_fail(RT_EDECODE, "npy %s: shape overflows "
				       "64 bits of elements", origin);
		count *= out->shape[d];
	}
	if (count > avail / out->elem_size || count * out->elem_size != avail)
		return rt_fail(RT_EDECODE, "npy %s: data size mismatch: shape "
			       "has %llu elements of %zu bytes, %zu data bytes "
			       "present", origin, (unsigned long long)count,
			       out->elem_size, avail);
	out->count = count;
	return RT_EOK;
}

/* rt_npy_parse with a name for error lines. */
static enum rt_err npy_parse(const uint8_t *bytes, size_t len,
			     const char *origin, struct rt_npy *out)
{
	struct npy_header h = { 0 };
	struct rt_npy n = { 0 };
	struct cursor c;
	size_t start = 0, hlen = 0;
	enum rt_err err;

	memset(out, 0, sizeof(*out));
	err = parse_preamble(bytes, len, origin, &start, &hlen);
	if (err)
		return err;
	c = (struct cursor){ (const char *)bytes + start,
			     (const char *)bytes + start + hlen, bytes,
			     origin };
	err = parse_dict(&c, &h, &n);
	if (!err)
		err = check_payload(&h, len - start - hlen, origin, &n);
	if (err)
		return err;
	n.data = bytes + start + hlen;
	*out = n;
	return RT_EOK;
}

enum rt_err rt_npy_parse(const uint8_t *bytes, size_t len, struct rt_npy *out)
{
	return npy_parse(bytes, len, "buffer", out);
}

/* Largest header we accept (NumPy writes well under 1 KiB). */
#define NPY_HEAD_MAX 65536

/* Checks the header against the file size before the data is read, so a
 * file whose header and size disagree costs no allocation of its size. */
static enum rt_err check_head(int fd, size_t size, size_t max_data_bytes, const char *path)
{
	uint8_t *head;
	size_t n = size < NPY_HEAD_MAX ? size : NPY_HEAD_MAX, start = 0, hlen = 0;
	struct npy_header h = { 0 };
	struct rt_npy probe = { 0 };
	struct cursor c;
	enum rt_err err;

	head = malloc(n ? n : 1);
	if (!head)
		return rt_fail(RT_ENOMEM, "npy %s: out of memory reading the header", path);
	if (pread(fd, head, n, 0) != (ssize_t)n)
		err = rt_fail(RT_EIO, "npy %s: cannot read the header: %s", path, strerror(errno));
	else
		err = parse_preamble(head, n, path, &start, &hlen);
	if (!err) {
		c = (struct cursor){ (const char *)head + start, (const char *)head + start + hlen,
				     head, path };
		err = parse_dict(&c, &h, &probe);
	}
	if (!err)
		err = check_payload(&h, size - start - hlen, path, &probe);
	if (!err && size - start - hlen > max_data_bytes)
		err = rt_fail(RT_EIO, "npy %s: %zu data bytes, more than the %zu expected", path,
			      size - start - hlen, max_data_bytes);
	free(head);
	return err;
}

enum rt_err rt_npy_read_max(const char *path, size_t max_data_bytes, struct rt_npy *out)
{
	size_t size = 0, cap = max_data_bytes < SIZE_MAX - NPY_HEAD_MAX
				       ? max_data_bytes + NPY_HEAD_MAX : SIZE_MAX;
	int fd = rt_infile_open(path, "npy", cap, &size);
	uint8_t *bytes = NULL;
	enum rt_err err;

	memset(out, 0, sizeof(*out));
	if (fd < 0)
		return RT_EIO;
	err = check_head(fd, size, max_data_bytes, path);
	if (!err && !(bytes = malloc(size ? size : 1)))
		err = rt_fail(RT_ENOMEM, "npy %s: out of memory for %zu bytes", path, size);
	if (!err && pread(fd, bytes, size, 0) != (ssize_t)size)
		err = rt_fail(RT_EIO, "npy %s: cannot read the file: %s", path, strerror(errno));
	close(fd);
	if (!err)
		err = npy_parse(bytes, size, path, out);
	if (err) {
		free(bytes);
		return err;
	}
	out->owned = bytes; /* the struct now owns the file */
	return RT_EOK;
}

enum rt_err rt_npy_read(const char *path, struct rt_npy *out)
{
	return rt_npy_read_max(path, SIZE_MAX, out);
}

uint64_t rt_npy_nonfinite(enum rt_npy_type type, const void *data, uint64_t count)
{
	const uint8_t *p = data;
	uint64_t bad = 0;

	for (uint64_t i = 0; i < count; i++) {
		uint16_t h;
		uint32_t f;
		uint64_t d;

		/* an all-ones exponent is infinity or NaN in every IEEE format */
		if (type == RT_NPY_F16) {
			memcpy(&h, p + 2 * i, 2);
			bad += (h & 0x7c00u) == 0x7c00u;
		} else if (type == RT_NPY_F32) {
			memcpy(&f, p + 4 * i, 4);
			bad += (f & 0x7f800000u) == 0x7f800000u;
		} else {
			memcpy(&d, p + 8 * i, 8);
			bad += (d & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
		}
	}
	return bad;
}

void rt_npy_release(struct rt_npy *n)
{
	free(n->owned);
	memset(n, 0, sizeof(*n));
}

/* ------------------------------------------------------------ writing */

/* The v1.0 preamble and header dict, padded with blanks so the data starts
 * at a multiple of 64 bytes (what NumPy itself does). */
static enum rt_err write_header(struct rt_buf *b, const char *descr,
				const uint64_t *shape, uint32_t ndim)
{
	char dict[512];
	size_t n, total;
	uint8_t len_le[2];
	enum rt_err err;

	n = (size_t)snprintf(dict, sizeof(dict), "{'descr': '%s', "
			     "'fortran_order': False, 'shape': (", descr);
	for (uint32_t d = 0; d < ndim; d++)
		n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s%llu",
				      d ? ", " : "",
				      (unsigned long long)shape[d]);
	n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s), }",
			      ndim == 1 ? "," : "");
	total = (10 + n + 1 + 63) / 64 * 64; /* + '\n', rounded up */
	memset(dict + n, ' ', total - 10 - n - 1);
	dict[total - 10 - 1] = '\n';
	len_le[0] = (uint8_t)((total - 10) & 0xff);
	len_le[1] = (uint8_t)((total - 10) >> 8);
	err = rt_buf_append(b, npy_magic, sizeof(npy_magic));
	if (!err)
		err = rt_buf_append(b, "\x01\x00", 2);
	if (!err)
		err = rt_buf_append(b, len_le, 2);
	if (!err)
		err = rt_buf_append(b, dict, total - 10);
	return err;
}

enum rt_err rt_npy_write(const char *path, enum rt_npy_type type,
			 const uint64_t *shape, uint32_t ndim,
			 const void *data)
{
	const struct npy_dtype *dt = NULL;
	uint64_t count = 1;
	struct rt_buf b;
	enum rt_err err;

	for (size_t i = 0; i < NPY_DTYPE_COUNT; i++)
		if (npy_dtypes[i].type == type)
			dt = &npy_dtypes[i];
	if (!dt || ndim > RT_NPY_MAX_DIMS)
		return rt_fail(RT_EINVAL, "npy %s: cannot write type %d with "
			       "%u dimensions (at most %d)", path, (int)type,
			       ndim, RT_NPY_MAX_DIMS);
	for (uint32_t d = 0; d < ndim; d++) {
		if (shape[d] && count > SIZE_MAX / dt->size / shape[d])
			return rt_fail(RT_EINVAL, "npy %s: shape too large to "
				       "write", path);
		count *= shape[d];
	}
	rt_buf_init(&b);
	err = write_header(&b, dt->descr, shape, ndim);
	if (!err && count) /* an empty array may come with data == NULL */
		err = rt_buf_append(&b, data, (size_t)count * dt->size);
	if (!err)
		err = rt_buf_write_file(&b, path);
	rt_buf_release(&b);
	return err;
}

enum rt_err rt_npy_write_part(const char *path, enum rt_npy_type type, const uint64_t *shape,
			      uint32_t ndim, uint64_t first, uint64_t count, const void *data)
{
	const struct npy_dtype *dt = NULL;
	uint64_t total = 1;
	struct rt_buf b;
	enum rt_err err;
	int fd;

	for (size_t i = 0; i < NPY_DTYPE_COUNT; i++)
		if (npy_dtypes[i].type == type)
			dt = &npy_dtypes[i];
	if (!dt || ndim > RT_NPY_MAX_DIMS)
		return rt_fail(RT_EINVAL, "npy %s: cannot write type %d with %u dimensions (at most %d)",
			       path, (int)type, ndim, RT_NPY_MAX_DIMS);
	for (uint32_t d = 0; d < ndim; d++) {
		if (shape[d] && total > SIZE_MAX / dt->size / shape[d])
			return rt_fail(RT_EINVAL, "npy %s: shape too large to write", path);
		total *= shape[d];
	}
	if (first > total || count > total - first)
		return rt_fail(RT_EINVAL, "npy %s: elements [%llu, %llu) outside its %llu", path,
			       (unsigned long long)first, (unsigned long long)(first + count),
			       (unsigned long long)total);
	rt_buf_init(&b);
	err = write_header(&b, dt->descr, shape, ndim);
	if (err) {
		rt_buf_release(&b);
		return err;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || pwrite(fd, b.data, b.len, 0) != (ssize_t)b.len ||
	    ftruncate(fd, (off_t)(b.len + total * dt->size)) ||
	    (count && pwrite(fd, data, (size_t)(count * dt->size),
			     (off_t)(b.len + first * dt->size)) != (ssize_t)(count * dt->size)))
		err = rt_fail(RT_EIO, "npy %s: cannot write: %s", path, strerror(errno));
	if (fd >= 0 && close(fd) && !err)
		err = rt_fail(RT_EIO, "npy %s: cannot close: %s", path, strerror(errno));
	rt_buf_release(&b);
	return err;
}
