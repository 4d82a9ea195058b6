/* npy.h — NumPy .npy (format 1.0/2.0/3.0) reading and writing.
 *
 * Supported element types: '<f2' (fp16), '<f4', '<f8', '<i4' (int32, e.g. a
 * paged KV cache's block table), C order only. bf16
 * tensors are written as '<f4' after widening (NumPy has no bf16). The parser
 * is a decoder of outside bytes: malformed input returns RT_EDECODE with a
 * line saying what is wrong, never asserts (fuzzed: tests/fuzz/fuzz_npy.c). */
#ifndef RT_NPY_H
#define RT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

#define RT_NPY_MAX_DIMS 8

enum rt_npy_type { RT_NPY_F16, RT_NPY_F32, RT_NPY_F64, RT_NPY_I32 };

struct rt_npy {
	enum rt_npy_type type;
	uint32_t ndim;
	uint64_t shape[RT_NPY_MAX_DIMS];
	uint64_t count;       /* elements */
	size_t elem_size;
	const uint8_t *data;  /* little-endian elements */
	uint8_t *owned;       /* set by rt_npy_read: the whole file */
};

/* Parses `len` bytes; out->data points into `bytes`. */
enum rt_err rt_npy_parse(const uint8_t *bytes, size_t len,
			 struct rt_npy *out);
/* Reads and parses a file; the caller releases with rt_npy_release. Only
 * a regular file (a link to /dev/zero or a FIFO is refused), whose header
 * is checked against its size before the data is read, with at most
 * `max_data_bytes` of data (what the caller's shapes or configuration
 * allow). rt_npy_read: no cap beyond the file's own size. */
enum rt_err rt_npy_read_max(const char *path, size_t max_data_bytes,
			    struct rt_npy *out);
enum rt_err rt_npy_read(const char *path, struct rt_npy *out);
/* Elements of `data` (count of `type`) that are NaN or infinite. */
uint64_t rt_npy_nonfinite(enum rt_npy_type type, const void *data,
			  uint64_t count);
void rt_npy_release(struct rt_npy *n);
/* Writes `data` (count = product of shape) as a C-order array. */
enum rt_err rt_npy_write(const char *path, enum rt_npy_type type,
			 const uint64_t *shape, uint32_t ndim,
			 const void *data);
/* Writes elements [first, first + count) (C order) of a `shape` array into
 * `path`, creating it at its full size: several writers (programs, hosts)
 * each fill their part of one file; every one writes the same header. */
enum rt_err rt_npy_write_part(const char *path, enum rt_npy_type type, const uint64_t *shape,
			      uint32_t ndim, uint64_t first, uint64_t count, const void *data);

#endif
