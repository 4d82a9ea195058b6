/* test_npy.c — .npy round trips and the decoder's rejection of bad bytes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/npy.h"

/* Builds a .npy image: preamble for `major`.0, `dict` padded with blanks and
 * '\n' to a 64-byte boundary, then `data_len` bytes of `data`. Caller frees. */
static uint8_t *make_npy(unsigned major, const char *dict, const void *data,
			 size_t data_len, size_t *len_out)
{
	size_t pre = major == 1 ? 10 : 12, dlen = strlen(dict);
	size_t hlen = (pre + dlen + 1 + 63) / 64 * 64 - pre;
	uint8_t *b = calloc(1, pre + hlen + data_len + 1);

	cr_assert(b);
	memcpy(b, "\x93NUMPY", 6);
	b[6] = (uint8_t)major;
	b[7] = 0;
	for (size_t i = 0; i < pre - 8; i++)
		b[8 + i] = (uint8_t)(hlen >> (8 * i));
	memset(b + pre, ' ', hlen);
	memcpy(b + pre, dict, dlen);
	b[pre + hlen - 1] = '\n';
	if (data_len)
		memcpy(b + pre + hlen, data, data_len);
	*len_out = pre + hlen + data_len;
	return b;
}

static void temp_path(char path[64])
{
	int fd;

	snprintf(path, 64, "/tmp/kb_test_npy_XXXXXX.npy");
	fd = mkstemps(path, 4);
	cr_assert(fd >= 0);
	close(fd);
}

/* Writes, reads back, and checks type, shape and every byte. */
static void round_trip(enum rt_npy_type type, size_t elem,
		       const uint64_t *shape, uint32_t ndim)
{
	uint64_t count = 1;
	uint8_t data[2 * 3 * 4 * 8];
	struct rt_npy n;
	char path[64];

	for (uint32_t d = 0; d < ndim; d++)
		count *= shape[d];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 37 + 11);
	temp_path(path);
	cr_assert_eq(rt_npy_write(path, type, shape, ndim, data), RT_EOK, "%s",
		     rt_last_error());
	cr_assert_eq(rt_npy_read(path, &n), RT_EOK, "%s", rt_last_error());
	unlink(path);
	cr_assert_eq(n.type, type);
	cr_assert_eq(n.elem_size, elem);
	cr_assert_eq(n.ndim, ndim);
	cr_assert_eq(n.count, count);
	for (uint32_t d = 0; d < ndim; d++)
		cr_assert_eq(n.shape[d], shape[d]);
	cr_assert_eq(memcmp(n.data, data, count * elem), 0);
	cr_assert_eq((size_t)(n.data - n.owned) % 64, 0,
		     "data not 64-byte aligned in the file");
	cr_assert_eq(n.owned[6], 1, "not written as format 1.0");
	cr_assert_eq(n.data[-1], '\n');
	rt_npy_release(&n);
	cr_assert_null(n.owned);
}

Test(npy, round_trips_f2_f4_f8_i4_in_every_shape, .timeout = 10)
{
	static const uint64_t s3[] = { 3 }, s234[] = { 2, 3, 4 };
	static const struct { enum rt_npy_type t; size_t size; } types[] = {
		{ RT_NPY_F16, 2 }, { RT_NPY_F32, 4 }, { RT_NPY_F64, 8 },
		{ RT_NPY_I32, 4 },
	};

	for (size_t i = 0; i < 4; i++) {
		round_trip(types[i].t, types[i].size, NULL, 0);
		round_trip(types[i].t, types[i].size, s3, 1);
		round_trip(types[i].t, types[i].size, s234, 3);
	}
}

Test(npy, f4_values_survive_a_round_trip, .timeout = 10)
{
	static const uint64_t shape[] = { 2, 2 };
	const float want[4] = { 1.5f, -2.25f, 3.0e-8f, 65504.0f };
	float got[4];
	struct rt_npy n;
	char path[64];

	temp_path(path);
	cr_assert_eq(rt_npy_write(path, RT_NPY_F32, shape, 2, want), RT_EOK);
	cr_assert_eq(rt_npy_read(path, &n), RT_EOK, "%s", rt_last_error());
	unlink(path);
	memcpy(got, n.data, sizeof(got));
	for (int i = 0; i < 4; i++)
		cr_assert_eq((double)got[i], (double)want[i]);
	rt_npy_release(&n);
}

Test(npy, parses_versions_1_2_and_3_as_numpy_writes_them, .timeout = 10)
{
	const double v[3] = { 1.0, 2.0, 3.0 };
	struct rt_npy n;
	size_t len;

	for (unsigned major = 1; major <= 3; major++) {
		uint8_t *b = make_npy(major, "{'descr': '<f8', 'fortran_order':"
				      " False, 'shape': (3,), }", v, sizeof(v),
				      &len);
		cr_assert_eq(rt_npy_parse(b, len, &n), RT_EOK, "v%u: %s", major,
			     rt_last_error());
		cr_assert_eq(n.type, RT_NPY_F64);
		cr_assert_eq(n.count, 3);
		cr_assert_eq(memcmp(n.data, v, sizeof(v)), 0);
		free(b);
	}
}

Test(npy, accepts_key_order_quotes_and_scalar_shape, .timeout = 10)
{
	const uint16_t h = 0x3c00;
	struct rt_npy n;
	size_t len;
	uint8_t *b = make_npy(1, "{\"shape\": (), \"fortran_order\": False,"
			      "\"descr\": \"<f2\"}", &h, 2, &len);

	cr_assert_eq(rt_npy_parse(b, len, &n), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(n.ndim, 0);
	cr_assert_eq(n.count, 1);
	cr_assert_eq(n.type, RT_NPY_F16);
	free(b);
}

/* Expects `dict` + `data_len` zero bytes to be rejected with `needle`. */
static void expect_reject(const char *dict, size_t data_len,
			  const char *needle)
{
	static const uint8_t zeros[4096];
	struct rt_npy n;
	size_t len;
	uint8_t *b = make_npy(1, dict, zeros, data_len, &len);

	cr_assert_eq(rt_npy_parse(b, len, &n), RT_EDECODE, "accepted %s", dict);
	cr_assert(strstr(rt_last_error(), needle), "'%s' lacks '%s'",
		  rt_last_error(), needle);
	cr_assert_null(n.data);
	free(b);
}

Test(npy, rejects_unsupported_dtype_and_fortran_order, .timeout = 10)
{
	expect_reject("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
		      16, "dtype '<i8' not supported (expected <f2, <f4, <f8 or <i4)");
	expect_reject("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
		      8, "dtype '>f4' not supported");
	expect_reject("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
		      16, "fortran_order True not supported");
}

Test(npy, rejects_malformed_headers, .timeout = 10)
{
	expect_reject("{'descr': '<f4', 'shape': (2,), }", 8,
		      "lacks key 'fortran_order'");
	expect_reject("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False,"
		      " 'shape': (2,)}", 8, "appears twice");
	expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2,),"
		      " 'extra': 1}", 8, "header key 'extra' not supported");
	expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
		      8, "malformed header");
	expect_reject("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
		      8, "True or False");
	expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
		      8, "malformed header");
	expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
		      8, "only blanks after");
	expect_reject("{'descr': '<f4", 8, "printable string");
	expect_reject("[1, 2]", 8, "'{'");
	expect_reject("{'descr': '<f4', 'fortran_order': False, "
		      "'shape': (1,1,1,1,1,1,1,1,1)}", 4, "more than 8");
}

Test(npy, rejects_data_size_mismatch_and_huge_shapes, .timeout = 10)
{
	expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
		      8, "data size mismatch");
	expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
		      8, "data size mismatch");
	expect_reject("{'descr': '<f8', 'fortran_order': False, "
		      "'shape': (4294967296, 4294967296, 4294967296)}", 8,
		      "overflows");
	expect_reject("{'descr': '<f8', 'fortran_order': False, "
		      "'shape': (4611686018427387904,)}", 8, "mismatch");
	expect_reject("{'descr': '<f8', 'fortran_order': False, "
		      "'shape': (99999999999999999999,)}", 8, "below 2^64");
}

Test(npy, rejects_bad_magic_version_and_truncated_preamble, .timeout = 10)
{
	static const uint8_t garbage[] = "PK\x03\x04 this is a zip file, not npy";
	struct rt_npy n;
	size_t len;
	uint8_t *b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, "
			      "'shape': (2,)}", "\0\0\0\0\0\0\0\0", 8, &len);

	cr_assert_eq(rt_npy_parse(garbage, sizeof(garbage), &n), RT_EDECODE);
	cr_assert(strstr(rt_last_error(), "bad magic"));
	b[6] = 4;
	cr_assert_eq(rt_npy_parse(b, len, &n), RT_EDECODE);
	cr_assert(strstr(rt_last_error(), "format version 4.0 not supported"));
	b[6] = 1;
	b[8] = 0xff; /* header length beyond the buffer */
	b[9] = 0xff;
	cr_assert_eq(rt_npy_parse(b, len, &n), RT_EDECODE);
	cr_assert(strstr(rt_last_error(), "header truncated"));
	free(b);
}

Test(npy, every_truncation_of_a_valid_file_is_rejected, .timeout = 10)
{
	const float v[3] = { 1, 2, 3 };
	struct rt_npy n;
	size_t len;
	uint8_t *b = make_npy(2, "{'descr': '<f4', 'fortran_order': False, "
			      "'shape': (3,), }", v, sizeof(v), &len);

	cr_assert_eq(rt_npy_parse(b, len, &n), RT_EOK);
	for (size_t cut = 0; cut < len; cut++) {
		/* a fresh copy so sanitizers catch any read past `cut` */
		uint8_t *t = malloc(cut ? cut : 1);
		memcpy(t, b, cut);
		cr_assert_eq(rt_npy_parse(t, cut, &n), RT_EDECODE,
			     "accepted %zu of %zu bytes", cut, len);
		free(t);
	}
	free(b);
}

Test(npy, read_error_names_the_file, .timeout = 10)
{
	const int64_t v[2] = { 1, 2 };
	struct rt_npy n;
	char path[64];
	size_t len;
	uint8_t *b = make_npy(1, "{'descr': '<i8', 'fortran_order': False, "
			      "'shape': (2,)}", v, sizeof(v), &len);
	FILE *f;

	temp_path(path);
	f = fopen(path, "wb");
	cr_assert(f);
	fwrite(b, 1, len, f);
	fclose(f);
	free(b);
	cr_assert_eq(rt_npy_read(path, &n), RT_EDECODE);
	unlink(path);
	cr_assert(strstr(rt_last_error(), path), "%s", rt_last_error());
	cr_assert(strstr(rt_last_error(), "dtype '<i8' not supported"));
	cr_assert_null(n.owned);
	cr_assert_eq(rt_npy_read("/nonexistent/q.npy", &n), RT_EIO);
	cr_assert(strstr(rt_last_error(), "npy /nonexistent/q.npy:"));
}

/* Issue 13 item 9: a device or FIFO is refused, never read until memory
 * runs out or forever. */
Test(npy, devices_and_fifos_are_refused, .timeout = 10)
{
	char fifo[64] = "/tmp/kb_test_npy_fifo_XXXXXX"; /* + "/k.npy" */
	struct rt_npy n;

	cr_assert_eq(rt_npy_read("/dev/zero", &n), RT_EIO);
	cr_assert(strstr(rt_last_error(), "character device"), "%s", rt_last_error());
	cr_assert(mkdtemp(fifo));
	strcat(fifo, "/k.npy");
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(rt_npy_read(fifo, &n), RT_EIO);
	cr_assert(strstr(rt_last_error(), "pipe"), "%s", rt_last_error());
	unlink(fifo);
	*strrchr(fifo, '/') = '\0';
	rmdir(fifo);
}

/* The header is checked against the size before the data is read, and the
 * caller's cap holds. */
Test(npy, size_cap_and_header_checked_before_reading, .timeout = 10)
{
	static const float v[4] = { 1, 2, 3, 4 };
	uint64_t shape[1] = { 4 };
	char path[64];
	struct rt_npy n;

	temp_path(path);
	cr_assert_eq(rt_npy_write(path, RT_NPY_F32, shape, 1, v), RT_EOK);
	cr_assert_eq(rt_npy_read_max(path, 16, &n), RT_EOK, "%s", rt_last_error());
	rt_npy_release(&n);
	cr_assert_eq(rt_npy_read_max(path, 15, &n), RT_EIO);
	cr_assert(strstr(rt_last_error(), "16 data bytes"), "%s", rt_last_error());
	unlink(path);
}

Test(npy, counts_nonfinite_elements_of_every_type, .timeout = 10)
{
	const uint16_t h[4] = { 0x3c00, 0x7e00, 0x7c00, 0xfc00 }; /* 1, NaN, +inf, -inf */
	float f[3] = { 1.0f, 0.0f, 0.0f };
	double d[2] = { 2.0, 0.0 };
	uint32_t nan32 = 0x7fc00000u;
	uint64_t inf64 = 0x7ff0000000000000ull;

	memcpy(&f[1], &nan32, 4);
	memcpy(&d[1], &inf64, 8);
	cr_assert_eq(rt_npy_nonfinite(RT_NPY_F16, h, 4), 3);
	cr_assert_eq(rt_npy_nonfinite(RT_NPY_F32, f, 3), 1);
	cr_assert_eq(rt_npy_nonfinite(RT_NPY_F64, d, 2), 1);
}
