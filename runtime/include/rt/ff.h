/* ff.h — fast-forward of repeated loops (ADR 0059).
 *
 * A component whose work repeats (a kernel host running a kernel's tile
 * loop, tl.h's TL_FOR) registers each such loop while it runs and ticks it
 * once per iteration. In timing mode, in a daemon that hosts every
 * component of the run, the daemon watches the ticks: once the run has
 * been periodic for long enough (mode exact: the same events at the same
 * relative times, period after period; mode auto: the same progress of
 * every loop in windows of nearly the same length) it skips whole periods.
 * Nothing is shifted: the state at the skip point stands for the state k
 * periods later, so each loop's counter jumps by k times its progress per
 * period (the component applies `skip` at its next tick), statistics and
 * delivery counts grow by k times their growth per period, and every time
 * reported from then on (rt_ff_offset_ps) is later by k periods. */
#ifndef RT_FF_H
#define RT_FF_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/ff_mode.h"

struct rt_ctx;


/* Most iterations of one loop in a period that may be skipped. */
#define RT_FF_PER_MAX 64

/* A loop as the daemon sees it; owned by the component, registered between
 * rt_ff_loop_enter and rt_ff_loop_leave. */
struct rt_ff_loop {
	uint64_t index;  /* the iteration running (the component keeps it) */
	uint64_t end;    /* one past the last iteration */
	uint64_t ticks;  /* iterations finished (rt_ff_loop_tick) */
	uint64_t skip;   /* iterations to jump at the next tick (set by the
			  * daemon, cleared by the component) */
	uint64_t skipped; /* iterations jumped so far (the component's) */
	uint64_t per;    /* the pending skip's iterations per period (daemon) */
	uint32_t ready;  /* ticks over which the component can extrapolate
			  * its own counters (it sets this; the daemon skips
			  * only periods of fewer iterations) */
	uint64_t serial; /* which loop instance (set by rt_ff_loop_enter) */
	uint64_t key;    /* what its iterations do (the component's word):
			  * auto mode skips only loops of one key */
	uint32_t owner;  /* component id (set by rt_ff_loop_enter) */
	uint32_t slot;   /* its place in the daemon's table */
};

/* Registers `loop` (index and end set) for the daemon to watch; a no-op
 * where fast-forward is off. */
void rt_ff_loop_enter(struct rt_ctx *ctx, struct rt_ff_loop *loop);
/* One iteration finished (counted in loop->ticks). */
void rt_ff_loop_tick(struct rt_ctx *ctx, struct rt_ff_loop *loop);
void rt_ff_loop_leave(struct rt_ctx *ctx, struct rt_ff_loop *loop);
/* The critical path to the component's clock at this tick (rt/path.h):
 * the skipped time's split by class follows its growth. May be NULL. */
struct rt_path;
void rt_ff_loop_path(struct rt_ctx *ctx, const struct rt_ff_loop *loop,
		     const struct rt_path *path);
/* Simulated time skipped so far: add it to every time the component
 * reports (its end, its kernel's end). 0 with fast-forward off. */
uint64_t rt_ff_offset_ps(const struct rt_ctx *ctx);

/* Digest helpers (rt_component_ops.ff_digest): folds `v` into `h`; a time
 * as an offset from t (0 when already past: only max(now, it) matters). */
static inline uint64_t rt_ff_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 31);
}

static inline uint64_t rt_ff_rel(uint64_t time_ps, uint64_t t_ps)
{
	return time_ps > t_ps ? time_ps - t_ps : 0;
}


#endif
