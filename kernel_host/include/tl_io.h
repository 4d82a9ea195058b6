/* tl_io.h — host-side helpers beyond tl.h, for kernels that read input
 * files, write output files piecewise, report their own statistics and fail
 * with a clear line. Like tl.h's host-data calls they cost no simulated
 * time; they are how a kernel talks to the run, not part of the modelled
 * program. */
#ifndef TL_IO_H
#define TL_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tl.h"

/* Ends the run with one line naming the kernel, the call site and `fmt`
 * (RT_EINVAL: bad arguments or inputs). Never returns. */
_Noreturn void tl_fail_at(struct tl *tl, struct tl_site at, const char *fmt,
			  ...) __attribute__((format(printf, 3, 4)));
#define tl_fail(tl, ...) tl_fail_at((tl), TL_HERE, __VA_ARGS__)
/* The same for an --arg value the kernel checks itself (a name, a list) and
 * refuses: a usage error, exit 2, as for a number tl_arg_u32 refuses. */
_Noreturn void tl_arg_fail_at(struct tl *tl, struct tl_site at, const char *fmt,
			      ...) __attribute__((format(printf, 3, 4)));
#define tl_arg_fail(tl, ...) tl_arg_fail_at((tl), TL_HERE, __VA_ARGS__)

/* The run's --seed. */
uint64_t tl_seed(const struct tl *tl);

/* The run's --inputs directory into `out` ("" when absent); false if it
 * does not fit. */
bool tl_inputs_dir(struct tl *tl, char *out, size_t cap);

/* Full path of `file` in the run's output directory; false when the run
 * has none (unit-test ports). `file` is a plain file name (no '/', not
 * starting with '.', no control byte, not one of the run's own results
 * such as summary.json): anything else ends the run with one line naming
 * it. tl_save_npy's file names follow the same rule. */
bool tl_output_file(struct tl *tl, const char *file, char *path, size_t cap);

/* This PE's statistics: listed per component in stats.csv and
 * summary.json ("instances"), and merged into summary.json's totals,
 * summed over PEs (tl_stat_add) or maxed (tl_stat_max). A name is 1 to 128
 * bytes of printable ASCII (quotes are fine), not "delivered" or "last_ps",
 * and is either summed or maxed, not both; a bad one ends the run with one
 * line naming the call site. No limit on how many.
 *
 * Give a unit and a one-line description, which go with the value into
 * stats.csv and summary.json (the first ones given for a name stay):
 *
 *     tl_stat_add(tl, "tiles", n, "count", "KV tiles folded into the output");
 *
 * The three-argument form tl_stat_add(tl, name, value) still works and
 * leaves both empty. A unit is at most 32 printable bytes, a description
 * at most 240. */
void tl_stat_add_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value);
void tl_stat_max_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value);
void tl_stat_add_desc_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value,
			 const char *unit, const char *description);
void tl_stat_max_desc_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value,
			 const char *unit, const char *description);
/* tl_stat_add(tl, name, value [, unit, description]): the form is picked
 * by the number of arguments (two extra or none). */
#define TL_STAT_PICK_(a, b, c, form, ...) form
#define tl_stat_add(tl, name, ...)                                                 \
	TL_STAT_PICK_(__VA_ARGS__, TL_STAT_DESC_, TL_STAT_BAD_ARGS_, TL_STAT_PLAIN_, \
		      _)(add, (tl), (name), __VA_ARGS__)
#define tl_stat_max(tl, name, ...)                                                 \
	TL_STAT_PICK_(__VA_ARGS__, TL_STAT_DESC_, TL_STAT_BAD_ARGS_, TL_STAT_PLAIN_, \
		      _)(max, (tl), (name), __VA_ARGS__)
#define TL_STAT_PLAIN_(op, tl, name, value) tl_stat_##op##_at(tl, TL_HERE, name, (value))
#define TL_STAT_DESC_(op, tl, name, value, unit, desc) \
	tl_stat_##op##_desc_at(tl, TL_HERE, name, (value), (unit), (desc))

/* Modelled time of one IPCQ message of `bytes` from send to arrival on an
 * idle link: link latency + serialisation (picoseconds). */
uint64_t tl_ipcq_transfer_ps(const struct tl *tl, uint64_t bytes);

/* ------------------------------------------------------------ .npy files
 * Kernels read their inputs and write their outputs through these (and see
 * no runtime header). Element types: */
enum tl_npy_type { TL_NPY_F16, TL_NPY_F32, TL_NPY_F64, TL_NPY_I32 };
#define TL_NPY_MAX_DIMS 8

/* An .npy array read whole: `count` little-endian elements of `type` in C
 * order at `data`. */
struct tl_npy {
	enum tl_npy_type type;
	uint32_t ndim;
	uint64_t shape[TL_NPY_MAX_DIMS];
	uint64_t count;
	const void *data;
	void *owned; /* the file's bytes, freed by tl_npy_release */
};

/* Reads `path`; a missing or malformed file ends the run with one line
 * naming the file and what is wrong. Caller releases with tl_npy_release. */
void tl_npy_read_at(struct tl *tl, struct tl_site at, const char *path,
		    struct tl_npy *out);
#define tl_npy_read(tl, path, out) tl_npy_read_at((tl), TL_HERE, (path), (out))
/* Like tl_npy_read, refusing a file with more than `max_data_bytes` of
 * data (what the kernel's shapes allow) before reading it. */
void tl_npy_read_max_at(struct tl *tl, struct tl_site at, const char *path,
			uint64_t max_data_bytes, struct tl_npy *out);
#define tl_npy_read_max(tl, path, max_data_bytes, out) \
	tl_npy_read_max_at((tl), TL_HERE, (path), (max_data_bytes), (out))
/* Elements of `data` (`count` of `type`) that are NaN or infinite: what a
 * kernel reports as the nonfinite_inputs / nonfinite_outputs statistics. */
uint64_t tl_nonfinite(enum tl_npy_type type, const void *data, uint64_t count);
void tl_npy_release(struct tl_npy *n);
/* Element i widened to double (any type). */
double tl_npy_get(const struct tl_npy *n, uint64_t i);
/* Writes `data` as `file` in the run's output directory (false when the
 * run has none); a write error ends the run. */
bool tl_npy_write_at(struct tl *tl, struct tl_site at, const char *file,
		     enum tl_npy_type type, const uint64_t *shape,
		     uint32_t ndim, const void *data);
#define tl_npy_write(tl, file, type, shape, ndim, data) \
	tl_npy_write_at((tl), TL_HERE, (file), (type), (shape), (ndim), (data))
/* Writes elements [first, first + count) (C order) of a `shape` array as
 * `file`: programs (and hosts) that each hold a part of one array fill
 * their parts of one file; each writes the same header and size. */
bool tl_npy_write_part_at(struct tl *tl, struct tl_site at, const char *file,
			  enum tl_npy_type type, const uint64_t *shape, uint32_t ndim,
			  uint64_t first, uint64_t count, const void *data);
#define tl_npy_write_part(tl, file, type, shape, ndim, first, count, data) \
	tl_npy_write_part_at((tl), TL_HERE, (file), (type), (shape), (ndim), (first), (count), \
			     (data))
/* The name of a type as NumPy spells it ("float16", "int32", ...). */
const char *tl_npy_type_name(enum tl_npy_type type);

/* fp16 bits <-> float (round to nearest even), for kernels that build or
 * check fp16 tensors on the host. */
float tl_f16_to_f32(uint16_t h);
uint16_t tl_f32_to_f16(float f);

#endif
