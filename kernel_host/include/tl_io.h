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

/* The run's --seed. */
uint64_t tl_seed(const struct tl *tl);

/* The run's --inputs directory into `out` ("" when absent); false if it
 * does not fit. */
bool tl_inputs_dir(const struct tl *tl, char *out, size_t cap);

/* Full path of `file` in the run's output directory; false when the run
 * has none (unit-test ports). */
bool tl_output_file(struct tl *tl, const char *file, char *path, size_t cap);

/* This PE's statistics, merged into summary.json: summed over PEs
 * (tl_stat_add) or maxed (tl_stat_max). A name is 1 to 128 bytes of
 * printable ASCII (quotes are fine), not "delivered" or "last_ps", and is
 * either summed or maxed, not both; a bad one ends the run with one line
 * naming the call site. No limit on how many. */
void tl_stat_add_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value);
void tl_stat_max_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value);
#define tl_stat_add(tl, name, value) tl_stat_add_at((tl), TL_HERE, (name), (value))
#define tl_stat_max(tl, name, value) tl_stat_max_at((tl), TL_HERE, (name), (value))

/* Modelled time of one IPCQ message of `bytes` from send to arrival on an
 * idle link: link latency + serialisation (picoseconds). */
uint64_t tl_ipcq_transfer_ps(const struct tl *tl, uint64_t bytes);

#endif
