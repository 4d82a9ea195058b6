/* ff_out.h — summary.json's fast_forward and the report's line (ADR 0059),
 * from the part each daemon writes (.parts/ff.N, runtime/src/ff.c). */
#ifndef KB_FF_OUT_H
#define KB_FF_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "rt/job.h"
#include "rt/json.h"

/* One skip as the daemon reported it: at `at_ps` on the reported clock,
 * `periods` periods of `period_ps` were not simulated. */
struct kb_ff_skip {
	uint64_t at_ps, period_ps, periods;
};
/* The skips of the run in time order (caller frees *out); 0 for none. */
size_t kb_ff_skips(const struct rt_job *job, struct kb_ff_skip **out);

/* Adds "fast_forward" to the summary (nothing with --fast-forward off). */
void kb_ff_json(struct rt_json *j, const struct rt_job *job, uint64_t latency_ps);
/* Prints the report's fast-forward line (nothing with it off). */
void kb_ff_print(const struct rt_job *job, uint64_t latency_ps);

#endif
