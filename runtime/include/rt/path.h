/* path.h — critical-path attribution by piggybacking (ADR 0030).
 *
 * Every message carries the critical path to its delivery: a fixed vector
 * of picoseconds per resource class that sums to the delivery time (Yang
 * and Miller's critical path profiling of distributed programs: each event
 * inherits the path of the input that determined its time). A component
 * that starts an activity at t = max(its inputs) takes the path of the
 * input that was latest (ties: the one the component names first), adds
 * the activity's duration to the class that explains it and hands the
 * result on with what it sends. The path of the kernel host whose kernel
 * ends last is the run's critical path: summary.json's `critical_path`,
 * whose values sum to `latency_ps` exactly.
 *
 * Why a vector and not a graph: the path is known where it ends, across
 * processes and transports, with no global dependency graph and no second
 * pass; it is integer ps, so it is deterministic like everything else.
 *
 * The classes (one X-macro table: enum, names, docs; docs/metrics.md) say
 * what the time on the path was spent on. Making one class's resource
 * infinitely fast can save at most that class's time (the old path is still
 * a path of the faster run): tests/integration/test_critical_path.c. */
#ifndef RT_PATH_H
#define RT_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/err.h"

#define RT_PATH_CLASS_MAP(X)                                                              \
	X(DISPATCH, "dispatch", "PE_CPU dispatch cycles on the kernel clock")              \
	X(DOORBELL, "doorbell",                                                            \
	  "message latency between a PE's components (links.host_sched_cycles, "           \
	  "links.sched_engine_cycles)")                                                   \
	X(DMA_SETUP, "dma_setup",                                                          \
	  "DMA descriptor setup (dma.setup_cycles) not hidden under an earlier transfer")  \
	X(HBM_DATA, "hbm_data",                                                            \
	  "a DMA channel moving a transfer's bytes at its own rate (dma.bytes_per_cycle)") \
	X(HBM_QUEUEING, "hbm_queueing",                                                    \
	  "a transfer's bytes moving slower than its channel's rate because the rank's "   \
	  "HBM was shared with other channels")                                            \
	X(HBM_LATENCY, "hbm_latency", "HBM access latency (hbm.latency_cycles)")           \
	X(GEMM, "gemm", "PE_GEMM computing a stage")                                       \
	X(MATH, "math", "PE_MATH computing a stage")                                       \
	X(LINK_QUEUEING, "link_queueing",                                                  \
	  "an IPCQ message waiting while its rank's link moved earlier messages")          \
	X(LINK_SERIALISATION, "link_serialisation",                                        \
	  "an IPCQ message's own bytes on the link (links.ipcq_bytes_per_cycle)")          \
	X(LINK_LATENCY, "link_latency", "IPCQ link latency (links.ipcq_cycles)")           \
	X(SENDER_NOT_READY, "sender_not_ready",                                            \
	  "a receive waiting for a message whose path is not known (a sender that "        \
	  "tracks none); with every PE component tracking paths the wait is the "          \
	  "sender's own classes and this stays 0")

enum rt_path_class {
#define RT_PATH_ENUM(id, name, doc) RT_PATH_##id,
	RT_PATH_CLASS_MAP(RT_PATH_ENUM)
#undef RT_PATH_ENUM
	RT_PATH_CLASSES
};

/* ps per class; the sum is the time of the event the path leads to.
 * Where the path last crossed a message (for drawing it, never for its
 * sums): that message's segment record, its delivery time and the vector
 * then. The runtime sets them at delivery; components only copy paths. */
struct rt_path {
	uint64_t ps[RT_PATH_CLASSES];
	uint64_t tail;     /* (sender id + 1) << 40 | its segment; 0: the start */
	uint64_t tail_ps;
	uint64_t tail_vec[RT_PATH_CLASSES];
};

/* Segment records (a part "<id>.cpath" per component, written while the
 * trace is on): one per message sent with a path, `RT_PATH_SEG_BYTES`
 * each, in send order. Segment k of component c covers [start, end] on c:
 * from the delivery its path last crossed (pred) to its own message's
 * delivery; its class is the one that grew most. The launcher walks them
 * back from the last kernel's end (critical_path.jsonl, kernbench plot). */
struct rt_path_seg {
	uint64_t pred;  /* a tail as above */
	uint64_t start_ps;
	uint64_t end_ps;
	uint32_t cls;   /* enum rt_path_class */
	uint32_t pad;
};
#define RT_PATH_SEG_BYTES 32u
#define RT_PATH_TAIL(src, seg) (((uint64_t)(src) + 1) << 40 | (uint64_t)(seg))
#define RT_PATH_TAIL_SRC(t) ((uint32_t)((t) >> 40) - 1)
#define RT_PATH_TAIL_SEG(t) ((t) & ((1ull << 40) - 1))

/* The segment a path ending at `end_ps` adds after its tail. */
void rt_path_segment(const struct rt_path *p, uint64_t end_ps, struct rt_path_seg *out);

/* Reads segment `seg` of component `comp` into *out (RT_EOK, or an error
 * with its line: a missing part or record). */
typedef enum rt_err (*rt_path_read_fn)(void *ctx, uint32_t comp, uint64_t seg,
				       struct rt_path_seg *out);
/* Called for each segment, latest first. */
typedef enum rt_err (*rt_path_visit_fn)(void *ctx, uint32_t comp, const struct rt_path_seg *seg);

/* Walks the segment records back from segment `seg` of `comp` to the
 * run's start. Segment records come from other processes, so nothing is
 * believed: each segment must end where the one after it began, start no
 * later than it ends, name a class and a component below n_components,
 * and the walk stops with RT_EDECODE after `max_steps` (a cycle). */
enum rt_err rt_path_walk(rt_path_read_fn read, rt_path_visit_fn visit, void *ctx,
			 uint32_t n_components, uint32_t comp, uint64_t seg,
			 uint64_t max_steps);

/* "dispatch", "link_queueing", ... and the one-line doc of each. */
const char *rt_path_class_name(enum rt_path_class c);
const char *rt_path_class_doc(enum rt_path_class c);

/* Σ ps (saturating: a sum past 2^64 - 1 is UINT64_MAX, which no event
 * time reaches). */
uint64_t rt_path_total(const struct rt_path *p);

static inline void rt_path_add(struct rt_path *p, enum rt_path_class c, uint64_t ps)
{
	p->ps[c] += ps;
}

/* The path of the later of two inputs at times ta and tb (each the total
 * of its path): `a` on a tie, so a component names its preferred input
 * first. */
static inline const struct rt_path *rt_path_later(const struct rt_path *a, uint64_t ta,
						  const struct rt_path *b, uint64_t tb)
{
	return tb > ta ? b : a;
}

#endif
