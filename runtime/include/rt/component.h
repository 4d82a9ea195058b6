/* component.h — the component interface.
 *
 * Every engine model, scheduler, kernel host and test fixture is a component:
 * a const ops table plus a private state block. A daemon hosts one or more
 * components and drives them from its event queue; components never see
 * sockets, windows or other daemons. They see a context (struct rt_ctx) that
 * tells the time, sends messages, sets timers, maps memory and writes output.
 *
 * Rules that keep runs deterministic:
 *   - a handler's behaviour depends only on its state and the event;
 *   - no process-global mutable state, no wall clock, no pointers as keys;
 *   - random streams are seeded from the job's seed and the component id. */
#ifndef RT_COMPONENT_H
#define RT_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/err.h"
#include "rt/path.h"

struct rt_ctx;
/* rt/job.h and rt/topology.h, by pointer only: topology.c reads the ops
 * table declared here */
struct rt_config;
struct rt_job;
struct rt_component_desc;
struct rt_topology;

/* What a handler is given: a message from another component or a timer the
 * component set for itself. `msg` is valid only during the call. */
struct rt_delivery {
	uint64_t time_ps;       /* now */
	bool is_timer;
	uint64_t tag;           /* timer tag */
	uint32_t src;           /* message source component */
	uint64_t send_ps;       /* message send time */
	const Kb__Payload *msg; /* decoded message, NULL for timers */
	/* The critical path to this delivery (rt/path.h; it sums to time_ps),
	 * or NULL: a timer (the component keeps its timers' paths), or a
	 * message whose sender tracked none (run.critical_path = 0). */
	const struct rt_path *path;
};

typedef enum rt_err (*rt_init_fn)(struct rt_ctx *ctx, void *state);
typedef enum rt_err (*rt_handle_fn)(struct rt_ctx *ctx, void *state,
				    const struct rt_delivery *d);
/* Called once when the run ends, on success and after a failure: free
 * everything. It also says whether the component finished its work: RT_EOK,
 * or RT_EUNFINISHED with rt_fail's line saying what it still waits on or
 * holds ("kernel k did not finish: blocked at k.c:12 waiting for ...").
 * After a successful run that line travels in the component's end-of-run
 * report and fails the run (the daemon prefixes the component's name);
 * after a failed run it is ignored. Statistics may still be added. */
typedef enum rt_err (*rt_fini_fn)(struct rt_ctx *ctx, void *state);
/* Fast-forward's view of the state (ADR 0059): a hash (rt_ff_mix) of
 * everything in it that decides what the component does from `t_ps` on,
 * every time as an offset from t_ps (rt_ff_rel) and every id as an offset
 * from the next one it will give, so that two states alike but k periods
 * apart hash the same. Addresses and ids that do not change any timing
 * are left out. NULL: the run is never skipped in exact mode. */
typedef uint64_t (*rt_ff_digest_fn)(const struct rt_ctx *ctx, const void *state,
				    uint64_t t_ps);
/* What a message's body must hold for this component to take it (bounds
 * of its tensors, say), checked on every delivery before `handle`, from
 * another daemon or not: one line (RT_EDECODE) saying what is wrong. The
 * runtime checks only the frame (a body is set); it knows no body. */
typedef enum rt_err (*rt_check_fn)(const Kb__Payload *msg);

struct rt_component_ops {
	const char *name;   /* kind: "dma", "gemm", "math", "sched", "host" */
	size_t state_size;  /* zeroed block handed to every call */
	rt_init_fn init;    /* may set timers; may not send */
	rt_handle_fn handle;
	rt_fini_fn fini;
	rt_ff_digest_fn ff_digest; /* may be NULL */
	rt_check_fn check;         /* may be NULL: takes any body */
};

/* ---- identity and time */
uint64_t rt_now(const struct rt_ctx *ctx);
uint32_t rt_self(const struct rt_ctx *ctx);
const struct rt_component_desc *rt_self_desc(const struct rt_ctx *ctx);
const struct rt_topology *rt_topo(const struct rt_ctx *ctx);
const struct rt_job *rt_job(const struct rt_ctx *ctx);
/* Shortcut for &rt_job(ctx)->config. */
const struct rt_config *rt_cfg(const struct rt_ctx *ctx);

/* A component whose own clock runs ahead of its event time (a kernel host:
 * its PE_CPU clock moves with every dispatch) says where it is, so error
 * lines name that time rather than the event's. Never earlier than now. */
void rt_note_clock(struct rt_ctx *ctx, uint64_t clock_ps);

/* ---- messages and timers */

/* Sends `msg` to `dst`, leaving at `send_ps` (>= now; a kernel host may run
 * ahead of its event time) and arriving send_ps + link latency. RT_EINVAL if
 * there is no link or send_ps < now. The caller keeps `msg`. */
enum rt_err rt_send(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps,
		    uint32_t priority, const Kb__Payload *msg);
/* Like rt_send, delivered `extra_ps` after the link latency (serialisation
 * of a payload over a bandwidth-limited link). */
enum rt_err rt_send_delayed(struct rt_ctx *ctx, uint32_t dst,
			    uint64_t send_ps, uint64_t extra_ps,
			    uint32_t priority, const Kb__Payload *msg);
/* Keeps `msg` — the message being delivered or one of its sub-messages —
 * beyond the handler: the caller owns what is returned and frees it with
 * rt_msg_free. A message from a component of the same daemon is handed
 * over as it is (no copy, once per delivery); otherwise, or a second time,
 * it is copied (rt_msg_dup, no protobuf round trip). NULL when out of
 * memory. */
void *rt_keep(struct rt_ctx *ctx, const ProtobufCMessage *msg);
/* Like rt_send_delayed, carrying `arrival`: the critical path to the
 * message's delivery (rt/path.h), which must sum to send_ps + the link's
 * latency + extra_ps (RT_EINVAL otherwise: the sender left time
 * unexplained). NULL, or run.critical_path = 0, sends no path. */
enum rt_err rt_send_path(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps,
			 uint64_t extra_ps, uint32_t priority, const Kb__Payload *msg,
			 const struct rt_path *arrival);
/* Latency of the link from this component to `dst` (0: no link). */
uint64_t rt_latency_to(const struct rt_ctx *ctx, uint32_t dst);
/* Whether this run tracks critical paths (run.critical_path). */
bool rt_paths_on(const struct rt_ctx *ctx);
/* Sets the critical path to this component's end, reported in its
 * end-of-run report (a kernel host: the path to its kernel's end). */
void rt_path_report(struct rt_ctx *ctx, const struct rt_path *path);
/* Sets a timer for this component at `at_ps` (>= now). */
enum rt_err rt_timer(struct rt_ctx *ctx, uint64_t at_ps, uint64_t tag);

/* ---- memory (data mode; NULL in timing mode) */

/* Shared memory `index` of the run (the job's memory_fds, numbered by the
 * layer above: npu/memory.h), `bytes` long, mapped on first use; NULL if
 * the run has none of that number here. */
uint8_t *rt_memory(struct rt_ctx *ctx, uint32_t index, uint64_t bytes);

/* ---- outputs (merged deterministically by the launcher) */

/* One executed stage. */
struct rt_oplog_rec {
	uint64_t start_ps;    /* the engine works on it (DMA: moves its bytes) */
	uint64_t end_ps;      /*   ... until here */
	uint64_t issue_ps;    /* it reached the engine */
	const char *engine;   /* "dma_read", "dma_write", "gemm", "math" */
	const char *op_kind;  /* "memory", "gemm", "math" */
	const char *op_name;  /* "dma_read", "copy", "rmax", ... */
	uint64_t bytes;
	uint64_t elements;
	uint64_t command;     /* composite / command id */
	uint32_t stage;       /* stage index */
};
enum rt_err rt_oplog(struct rt_ctx *ctx, const struct rt_oplog_rec *rec);

/* A slice on one of this component's trace tracks. Track 0 carries message
 * ends; a unit that can be busy while another is (a DMA channel, the
 * kernel's clock) gets a track of its own, 1..RT_TRACE_TRACKS-1, so slices
 * on one track never overlap. Filters (--trace-window, --trace-ranks) are
 * applied here. */
struct rt_trace_span {
	unsigned track;
	const char *track_name; /* e.g. "dma_read"; shown as "<component> <name>" */
	const char *name;
	const char *cat;
	const char *site_file;  /* kernel call site, or NULL; the file name */
	int site_line;          /* must outlive the run (a __FILE__ literal) */
	uint64_t start_ps;
	uint64_t end_ps;
	bool has_command;       /* `command` (and `stage` if has_stage) are args */
	bool has_stage;
	uint64_t command;
	uint32_t stage;
};
enum rt_err rt_trace_slice(struct rt_ctx *ctx, const struct rt_trace_span *span);
/* True if something spanning [from_ps, to_ps] would be traced (to skip
 * preparing a record nobody wants). */
bool rt_tracing(const struct rt_ctx *ctx, uint64_t from_ps, uint64_t to_ps);
/* A counter track of this component (e.g. "scratch_bytes"; the HBM model
 * can add "hbm_bytes_per_us"): `value` from `ts_ps` on. */
enum rt_err rt_trace_counter(struct rt_ctx *ctx, const char *name, uint64_t ts_ps,
			     uint64_t value);

/* ---- statistics
 *
 * A statistic is declared where it is defined (SST's ELI style): its name,
 * unit, one-line description and how it merges over components (summed or
 * maxed). Declaring returns a handle, and adding by handle is an array
 * index, not a lookup by name: a component declares its statistics at init
 * and adds to them per stage or per message. Every declared statistic is
 * reported (zero or not) with its unit and description in the component's
 * end-of-run report, which the launcher lists per component (stats.csv,
 * summary.json "instances") and merges per kind and in total. */
enum rt_stat_merge { RT_STAT_SUM, RT_STAT_MAX };

struct rt_stat_decl {
	const char *name;        /* rt_stat_name_check */
	const char *unit;        /* "ps", "bytes", "cycles", "count", ...: at most
				  * RT_STAT_UNIT_MAX printable bytes ("" none) */
	const char *description; /* one line, at most RT_STAT_DESC_MAX
				  * printable bytes */
	enum rt_stat_merge merge;
	bool per_instance;       /* listed per component only, not merged into
				  * summary.json's totals and by_kind (for
				  * many fine-grained ones: per call site) */
};
/* Table entries: a summed or a maxed statistic. */
#define RT_STAT_DECL(n, u, d) { .name = (n), .unit = (u), .description = (d) }
#define RT_STAT_DECL_MAX(n, u, d) \
	{ .name = (n), .unit = (u), .description = (d), .merge = RT_STAT_MAX }
#define RT_STAT_UNIT_MAX 32
#define RT_STAT_DESC_MAX 240
/* A handle that adds nothing (a declaration that failed). */
#define RT_STAT_NONE UINT32_MAX

/* Declares a statistic of this component; returns its handle. The same
 * name declared again gives the same handle (the first unit and
 * description stay). A bad name, unit or description, a name declared
 * once summed and once maxed, or running out of memory fails the run after
 * the current handler, naming the component, and returns RT_STAT_NONE.
 * The strings are copied. May be called from init on. */
uint32_t rt_stat_declare(struct rt_ctx *ctx, const struct rt_stat_decl *decl);
/* Declares decls[0..n) into handles[0..n). */
void rt_stat_declare_all(struct rt_ctx *ctx, const struct rt_stat_decl *decls, size_t n,
			 uint32_t *handles);
/* Adds `value` to (sum) or raises to at least `value` (max) the statistic
 * `handle` of this component; RT_STAT_NONE is ignored. */
void rt_stat_add_h(struct rt_ctx *ctx, uint32_t handle, uint64_t value);
void rt_stat_max_h(struct rt_ctx *ctx, uint32_t handle, uint64_t value);

/* By name, for statistics made on the fly (a kernel's tl_stat_add): the
 * statistic `name`, declared on first use with no unit or description if
 * it was not declared, summed (rt_stat_add) or maxed (rt_stat_max). A
 * lookup per call: prefer handles on a hot path. */
void rt_stat_add(struct rt_ctx *ctx, const char *name, uint64_t value);
void rt_stat_max(struct rt_ctx *ctx, const char *name, uint64_t value);

/* Longest statistic name, in bytes. */
#define RT_STAT_NAME_MAX 128
/* NULL if `name` is a valid statistic name: 1 to RT_STAT_NAME_MAX bytes of
 * printable ASCII (space to '~'; quotes are escaped on output), and not
 * "delivered" or "last_ps" (the runtime's own). Otherwise a phrase naming
 * it and what is wrong ("statistic name \"a\x0ab\" has a non-printable
 * byte 0x0a ..."), valid until the next call on this thread. */
const char *rt_stat_name_check(const char *name);

/* NULL if `name` may name a file a kernel writes into the output folder
 * (a tensor's .npy, tl_output_file): a plain file name of 1 to 255 bytes
 * with no '/', no control byte, not starting with '.' (".", "..", the
 * folder's own .kernbench-* and .parts) and not one of the run's own
 * results (summary.json, op_log.jsonl, trace.json, ...). Otherwise a
 * phrase naming it (escaped) and why, valid until the next call on this
 * thread. */
const char *rt_output_name_check(const char *name);

/* Writes a file into the run's output directory (e.g. an .npy). */
enum rt_err rt_output_path(struct rt_ctx *ctx, const char *file, char *path,
			   size_t cap);

#endif
