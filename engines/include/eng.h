/* eng.h — PE engines: PE_DMA, PE_GEMM and PE_MATH.
 *
 * Three layers, each usable on its own:
 *
 *   data kernels   eng_dma_run / eng_gemm_run / eng_math_run apply one Stage
 *                  (docs/stages.md) to memory, every access bounds-checked.
 *                  Pure functions of (stage, memory): unit tests call them.
 *   models         a const struct eng_model_ops per engine class decides a
 *                  stage's latency in cycles and applies its data effect.
 *                  Built-ins are chosen by name from config (gemm.model,
 *                  math.model, dma.model); a path ("x/y.so") is dlopen()ed and
 *                  must export `const struct eng_model_ops kb_engine_model`.
 *   components     eng_dma_ops / eng_gemm_ops / eng_math_ops queue the stages
 *                  the scheduler sends, time them with the model and answer
 *                  with StageDone (runtime/include/rt/component.h).
 *
 * Built-in models and their formulas (all integer cycles; ceil(a/b) rounds up;
 * ps = cycles * cycle_ps):
 *
 *   dma  "linear"    setup_cycles + ceil(bytes / dma.bytes_per_cycle) for
 *                    the bytes one queue moves (the largest piece of a
 *                    transfer spread over its queues: eng_dma_lanes)
 *   gemm "systolic"  for logical M x K x N on an R x C array, T = M:
 *                    folds = ceil(K / R) * ceil(N / C)
 *                    cycles = setup + folds * (2R + C + T - 2)
 *                    (per fold: weight load R, skew R-1, stream T, drain
 *                    C-1); with gemm.weight_double_buffer = 1 the loads
 *                    after the first hide behind the previous fold:
 *                    cycles = setup + R + folds * (R + C + T - 2)
 *   gemm "roofline"  setup + max(ceil(M*N*K / macs_per_cycle),
 *                                ceil(bytes / gemm.bytes_per_cycle))
 *   math "simd"      setup + ceil(elements / lanes) * cycles_per_elem of the
 *                    op's latency class in the instruction set (npu/isa.h):
 *                    simple (math.cycles_per_elem), transcendental
 *                    (math.exp_cycles_per_elem), reduce
 *                    (math.reduce_cycles_per_elem); softmax costs its
 *                    parts (rmax, exp_diff, rsum, div), setup included
 *
 * `bytes` and `elements` follow docs/stages.md (eng_stage_bytes /
 * eng_stage_elements). Products saturate at UINT64_MAX instead of wrapping.
 *
 * Depends on: the runtime headers (rt/) and the generated wire schema. */
#ifndef ENG_H
#define ENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/component.h"
#include "rt/config.h"
#include "rt/err.h"
#include "npu/isa.h"
#include "rt/wire.h"
#include "kb_engine_plugin.h"
#include "rt/buf.h"

/* ---------------------------------------------------------------- memory */

/* The memory one PE's engines see. In timing mode the bases are NULL and
 * only the sizes are set, so views are still bounds-checked. */
struct eng_memory {
	uint8_t *hbm;      /* HBM of the PE's rank */
	uint64_t hbm_size; /* bytes */
	uint8_t *tcm;      /* TCM of the PE (scratch then staging) */
	uint64_t tcm_size; /* bytes */
};

/* Logical dimensions of `v` (swapped when v->trans). */
void eng_view_dims(const Kb__View *v, uint32_t *rows, uint32_t *cols);

/* Checks that `v` is well formed (known dtype and space, nonzero dims,
 * rows not overlapping) and lies inside its space: RT_EINVAL / RT_EOOB with
 * a line naming the stage's op_name, command id, `which` ("in[1]", "out"),
 * space, address and size. */
enum rt_err eng_view_check(const Kb__Stage *stage, const char *which,
			   const Kb__View *v, const struct eng_memory *mem);
/* Loads the logical matrix of `v` as f32, row-major, into dst (rows*cols
 * floats). Checks `v` first; needs data-mode memory (non-NULL base). */
enum rt_err eng_view_load(const Kb__Stage *stage, const char *which,
			  const Kb__View *v, const struct eng_memory *mem,
			  float *dst);
/* Stores f32 `src` (logical rows*cols, row-major) into `v`, rounding to its
 * dtype (nearest even). Checks `v` first. */
enum rt_err eng_view_store(const Kb__Stage *stage, const char *which,
			   const Kb__View *v, const struct eng_memory *mem,
			   const float *src);

/* Copies the logical matrix of `in` into `out` (same logical dims):
 * bit-exact when the dtypes match, else converted through f32. The DMA data
 * kernel. Checks both views; `out` may overlap `in`. */
enum rt_err eng_view_copy(const Kb__Stage *stage, const Kb__View *in,
			  const Kb__View *out, const struct eng_memory *mem);

/* ---------------------------------------------------------------- stages */

/* The three engine classes. */
enum eng_class { ENG_DMA = 0, ENG_GEMM = 1, ENG_MATH = 2 };

/* "dma", "gemm", "math" */
const char *eng_class_name(enum eng_class cls);

/* The MATH op a stage's op_name names, from the instruction set
 * (npu/isa.h: arity, latency class, shape rule); RT_EINVAL naming it when
 * unknown or not a MATH op. */
enum rt_err eng_math_op_find(const char *name, const struct rt_isa_op **out);

/* Named extras of a stage. False when absent; an integer extra also reads
 * as a float and vice versa. */
bool eng_extra_i(const Kb__Stage *stage, const char *name, int64_t *out);
bool eng_extra_f(const Kb__Stage *stage, const char *name, double *out);

/* Checks everything about `stage` that does not need data: it belongs to
 * engine class `cls`, has the views its op needs with matching shapes
 * (GEMM inner dims, MATH broadcasting, reduction axis) and every view lies
 * inside `mem` (sizes only). RT_EINVAL / RT_EOOB with a one-line detail. */
enum rt_err eng_stage_check(const Kb__Stage *stage, enum eng_class cls,
			    const struct eng_memory *mem);
/* Bytes and elements of a checked stage, per docs/stages.md. GEMM bytes
 * count `out` only when it is written (no acc, or last). */
uint64_t eng_stage_bytes(const Kb__Stage *stage);
uint64_t eng_stage_elements(const Kb__Stage *stage);
/* Logical GEMM dims of a checked GEMM stage. */
void eng_gemm_dims(const Kb__Stage *stage, uint64_t *m, uint64_t *k,
		   uint64_t *n);

/* ceil(a / b) for b > 0, and a saturating product. */
uint64_t eng_ceil_div(uint64_t a, uint64_t b);
uint64_t eng_mul_sat(uint64_t a, uint64_t b);

/* ---------------------------------------------------------------- DMA queues */

/* A DMA channel is dma.queues queues (engines) that move one transfer in
 * parallel: the transfer's stored rows are cut into consecutive pieces of
 * at least dma.rows_per_queue rows, one per queue, as even as the rows
 * allow. Returns the number of queues (lanes) a transfer of `rows` rows
 * uses, at least 1, and the rows of its largest piece in *piece_rows (the
 * piece whose bytes decide when the transfer is through). */
uint32_t eng_dma_lanes(const struct rt_config *cfg, uint64_t rows, uint64_t *piece_rows);

/* ---------------------------------------------------------------- kernels */

/* Data effect of one stage (checks it first; memory bases must be set).
 * Results are computed into a temporary and then stored, so an output may
 * alias an input. */
enum rt_err eng_dma_run(const Kb__Stage *stage, const struct eng_memory *mem);
enum rt_err eng_gemm_run(const Kb__Stage *stage, const struct eng_memory *mem);
enum rt_err eng_math_run(const Kb__Stage *stage, const struct eng_memory *mem);

/* ---------------------------------------------------------------- models */

#define ENG_MODEL_ABI 2u /* 2: latency takes the stage's context */

/* Where a stage stands in its engine's stream, for models whose cost
 * depends on what ran just before it: an array that still holds its
 * weights, a pipeline that has not drained, an issue that overlapped. */
struct eng_stage_ctx {
	bool queued;          /* it arrived before the previous stage of its
			       * channel ended (it waited; the engine was busy) */
	uint64_t lead_cycles; /* queued: whole cycles from its arrival to that end */
	bool stationary_held; /* GEMM: the engine still holds this stage's B tile
			       * (Stage.stationary_held, set by the scheduler) */
};

/* A swappable timing-and-data model of one engine class. Stages handed to
 * latency/execute have passed eng_stage_check. */
struct eng_model_ops {
	uint32_t abi;          /* ENG_MODEL_ABI */
	enum eng_class engine; /* the class it models */
	const char *name;      /* "systolic", "gemm_fixed", ... */
	size_t state_size;     /* zeroed block for init/latency/execute/fini */
	/* Reads what it needs from cfg (may be NULL: no state to set up). */
	enum rt_err (*init)(void *state, const struct rt_config *cfg);
	/* Cycles the stage occupies the engine's channel, given where it
	 * stands (never NULL). */
	enum rt_err (*latency)(const void *state, const Kb__Stage *stage,
			       const struct eng_stage_ctx *ctx, uint64_t *cycles);
	/* Data effect at completion (data mode only). */
	enum rt_err (*execute)(void *state, const Kb__Stage *stage,
			       const struct eng_memory *mem);
	void (*fini)(void *state); /* may be NULL */
};

/* The symbol a plug-in exports. */
#define ENG_PLUGIN_SYMBOL "kb_engine_model"

extern const struct eng_model_ops eng_dma_linear_model;
extern const struct eng_model_ops eng_gemm_systolic_model;
extern const struct eng_model_ops eng_gemm_roofline_model;
extern const struct eng_model_ops eng_gemm_tensor_engine_model;

/* The tensor_engine model's engine cycles for the instructions of one
 * logical M x K x N stage (f32: an input is float32), before the clock
 * conversion; 0 for a configuration the model refuses. */
uint64_t eng_tensor_engine_cycles(const struct rt_config *cfg, uint64_t m, uint64_t k,
				  uint64_t n, bool f32);
extern const struct eng_model_ops eng_math_simd_model;

/* Finds the model of class `cls` called `name_or_path`: a built-in name, or
 * (containing '/' or ending in ".so") a plug-in to dlopen. *dl receives the
 * plug-in's handle (NULL for built-ins); pass it to eng_model_unload when
 * done. RT_ENOTFOUND / RT_ECONFIG with a line naming class and model. */
enum rt_err eng_model_find(enum eng_class cls, const char *name_or_path,
			   const struct eng_model_ops **out, void **dl);
void eng_model_unload(void *dl);

/* A model bound to its state: what an engine holds. A plug-in written
 * against the public kb_engine_plugin.h gives the latency (`pub`); the
 * class's built-in model (`ops`) still gives the data effect. */
struct eng_model {
	const struct eng_model_ops *ops;
	void *state; /* ops->state_size bytes (owned) */
	void *dl;    /* plug-in handle, NULL for built-ins (owned) */
	const struct kb_engine_plugin *pub; /* public-ABI plug-in or NULL */
	void *pub_state;                    /* what its create returned */
};

/* ABI 4 plug-ins (kb_engine_plugin.h): the `n_given` pairs of <class>.params
 * checked against `p`'s declarations (a known name, with a did-you-mean;
 * its type and range; given once) and completed with the defaults: *out
 * gets every declared parameter in declaration order (at most `cap`), its
 * value normalised into `store`. RT_EUSAGE with one line naming the
 * parameter and the plug-in; RT_ECONFIG if the declarations themselves are
 * wrong (a bad name, range or default). */
#define ENG_PARAM_VALUE_MAX 64
enum rt_err eng_plugin_params_bind(enum eng_class cls, const char *path,
				   const struct kb_engine_plugin *p,
				   const struct kb_plugin_param *given, size_t n_given,
				   struct kb_plugin_param *out, size_t cap, size_t *n_out,
				   char (*store)[ENG_PARAM_VALUE_MAX]);
/* One line per declared parameter, each starting with `prefix`:
 * "name  type, unit, min..max, default D: description". */
void eng_plugin_params_describe(const struct kb_engine_plugin *p, const char *prefix,
				struct rt_buf *b);
/* For every engine whose model is a public plug-in: what it declares
 * (eng_plugin_params_describe), each line starting with `prefix`. */
void eng_plugins_describe(const struct rt_config *cfg, const char *prefix, struct rt_buf *b);

/* True when a model name is a path to a plug-in (has a '/' or ends in
 * ".so"), not a built-in's name: the engines and the rank memory agree. */
bool eng_is_plugin_path(const char *name);
/* RT_EOK if `name` names a model of `cls` (or, for eng_hbm_check, a rank
 * memory model) this build can use: a built-in's name, or a plug-in path
 * to a regular file (not loaded here: the launcher checks before any
 * daemon starts). Else RT_EINVAL with one line naming the key and what it
 * may be. */
enum rt_err eng_model_check(enum eng_class cls, const char *name);
enum rt_err eng_hbm_check(const char *name);

/* Built-in model i (0, 1, ...), NULL past the last: the one list every
 * user of the built-ins walks (the fuzz harness times a stage with each). */
const struct eng_model_ops *eng_model_builtin(size_t i);

/* Finds, allocates and initialises the model. On failure *m is empty. */
enum rt_err eng_model_init(struct eng_model *m, enum eng_class cls,
			   const char *name_or_path,
			   const struct rt_config *cfg);
/* Finalises and frees; safe on an empty or released model. */
void eng_model_release(struct eng_model *m);
/* Loads, checks and releases every plug-in `cfg` names (dma.model,
 * gemm.model, math.model, hbm.model), exactly as the engines and the
 * rank memory will: its ABI, the class it models and its parameters
 * (through its create). The first refusal's line is rt_fail'd. Runs user
 * code (constructors, create): the launcher calls it in a short-lived
 * child process (workloads/preflight.c), never in itself. */
enum rt_err eng_plugins_check(const struct rt_config *cfg);
/* Shorthands through m->ops (ctx NULL: an isolated stage, nothing held). */
enum rt_err eng_model_latency(const struct eng_model *m, const Kb__Stage *stage,
			      const struct eng_stage_ctx *ctx, uint64_t *cycles);
enum rt_err eng_model_execute(struct eng_model *m, const Kb__Stage *stage,
			      const struct eng_memory *mem);

/* ---------------------------------------------------------------- HBM */

/* The memory system of one rank (engines/src/hbm, docs/adr): the rank's DMA
 * channels share its HBM bandwidth. A DMA channel that starts a transfer
 * sends HbmRequest to the rank's "hbm" component; it arrives after the
 * channel's setup, when the first byte may move. The component hands it to
 * its model in the total event order (so arbitration does not depend on
 * process grouping), sets a timer for the model's next completion, and
 * answers each completed transfer with HbmDone, delivered hbm.latency_cycles
 * later (the HBM access latency pipelines: it holds no bandwidth).
 *
 * Built-in models (integer ps throughout; B = hbm.bytes_per_cycle,
 * b = dma.bytes_per_cycle, C = hbm.channels, cycle = cycle_ps):
 *
 *   "shared" (default) fluid fair share over queues: a transfer moves on
 *       its lanes (the DMA queues it is spread over, eng_dma_lanes); the
 *       lanes with bytes to move (n of them, over every channel's current
 *       transfer) each get min(b, B / n) bytes per cycle; a channel moves
 *       its transfers in order. Virtual time V (bytes per lane) rises at
 *       that rate; a transfer whose largest piece is N bytes finishes when
 *       V reaches F = max(V at arrival, F of the channel's previous
 *       transfer) + N. When the rank's queues together cannot exceed B
 *       (2 x pes x dma.queues x b <= B) every lane always gets b: the DMA
 *       then computes the same end, wire end + latency, itself and no
 *       component exists (eng_hbm_local).
 *   "interleaved" bytes [addr, addr + N) fall on channel
 *       (byte / hbm.interleave_bytes) % C; each channel serves the bytes on
 *       it first come first served at B / C per cycle:
 *       start_c = max(issue, free_c); free_c = start_c + ceil(n_c * C * cycle / B);
 *       the transfer ends at max(max_c free_c, its wire end).
 *   "ideal" no component: every channel streams at b, no HBM latency. */
#define ENG_HBM_ABI 3u /* 3: lanes and lane_bytes (DMA queues) */

struct eng_hbm_access {
	uint64_t token;       /* the component's name for this transfer */
	uint32_t stream;      /* the DMA channel (rank-wide); in order per stream */
	uint64_t addr;        /* first HBM byte */
	uint64_t bytes;
	uint32_t lanes;       /* DMA queues moving it in parallel (>= 1) */
	uint64_t lane_bytes;  /* bytes of its largest piece (one lane's share) */
	uint64_t issue_ps;    /* the first byte may move (= arrival) */
	uint64_t wire_end_ps; /* the DMA channel alone would finish here */
};

/* Called by a model for each finished transfer, in a deterministic order. */
typedef void (*eng_hbm_done_fn)(void *arg, uint64_t token, uint64_t end_ps);

struct eng_hbm_ops {
	uint32_t abi;      /* ENG_HBM_ABI */
	const char *name;  /* "shared", ... */
	size_t state_size; /* zeroed block for the calls below */
	enum rt_err (*init)(void *state, const struct rt_config *cfg);
	/* Retires every transfer whose last byte is through at or before
	 * now_ps (done() for each), then accounts time up to now_ps. */
	enum rt_err (*retire)(void *state, uint64_t now_ps, eng_hbm_done_fn done, void *arg);
	/* A transfer arrives at now_ps (after retire(now_ps)). */
	enum rt_err (*submit)(void *state, uint64_t now_ps, const struct eng_hbm_access *a);
	/* When the next transfer would finish, UINT64_MAX if none is pending;
	 * a later submit may move it. */
	uint64_t (*next_done)(const void *state);
	void (*fini)(void *state); /* may be NULL */
	/* Fast-forward (rt_component_ops.ff_digest, ADR 0059): the state
	 * relative to t_ps. Read from built-in models only (a plug-in built
	 * against an older header has no such field); NULL: never skipped. */
	uint64_t (*digest)(const void *state, uint64_t t_ps);
};

/* The symbol an HBM plug-in exports. */
#define ENG_HBM_PLUGIN_SYMBOL "kb_hbm_model"

extern const struct eng_hbm_ops eng_hbm_shared_model;
extern const struct eng_hbm_ops eng_hbm_interleaved_model;

/* Streams a rank's memory sees: a read and a write channel per PE
 * (stream 2 x pe + channel). */
static inline uint32_t eng_hbm_streams(const struct rt_config *cfg)
{
	return 2 * cfg->pes;
}

/* True when DMA channels time their transfers themselves (no "hbm"
 * component): hbm.model is ideal, or shared and never saturated. */
bool eng_hbm_local(const struct rt_config *cfg);
/* True when hbm.model is "ideal" (no HBM latency either). */
bool eng_hbm_ideal(const struct rt_config *cfg);

/* Loads and checks the rank memory model `name` (a built-in or a plug-in
 * path) and unloads it: what eng_plugins_check does for hbm.model. Runs
 * the plug-in's code: only in the preflight child (eng_hbm_check above
 * checks without loading). */
enum rt_err eng_hbm_plugin_check(const char *name);

/* The rank's memory component ("hbm", one per rank). */
extern const struct rt_component_ops eng_hbm_ops;

/* ---------------------------------------------------------------- components */

/* Engine components ("dma", "gemm", "math"): the model comes from config
 * (dma.model, gemm.model, math.model); stages arrive from the PE's
 * scheduler and StageDone goes back to it. */
extern const struct rt_component_ops eng_dma_ops;
extern const struct rt_component_ops eng_gemm_ops;
extern const struct rt_component_ops eng_math_ops;

#endif
