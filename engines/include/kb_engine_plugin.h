/* kb_engine_plugin.h — the engine-model plug-in interface, self-contained.
 *
 * An engine model plug-in is a shared object that exports one symbol,
 * `kb_engine_plugin` (a `const struct kb_engine_plugin`). kernbench loads it
 * when an engine's model is a path (`--set gemm.model=/path/lib.so`), hands
 * it its own parameters (`--set gemm.params=cycles=900,...`, or under
 * `gemm:` in a YAML config `params: {cycles: 900}`, a block mapping, or
 * `params: "cycles=900"`; all three arrive alike), and asks it how many
 * cycles each stage occupies the engine. The data effect of a stage (data
 * mode) stays the built-in model's, so results never depend on a timing
 * plug-in.
 *
 * Build outside the tree with only this header:
 *     cc -std=c17 -fPIC -shared $(pkg-config --cflags kernbench) -o my.so my.c
 * Nothing here exposes kernbench's wire format or its generated types; the
 * ABI version below is checked when the plug-in is loaded. */
#ifndef KB_ENGINE_PLUGIN_H
#define KB_ENGINE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define KB_ENGINE_PLUGIN_ABI 3u /* 3: queued, lead_cycles, stationary_held; 2 still loads */
#define KB_ENGINE_PLUGIN_SYMBOL "kb_engine_plugin"

enum kb_engine_class { KB_ENGINE_DMA = 0, KB_ENGINE_GEMM = 1, KB_ENGINE_MATH = 2 };

/* One `name=value` parameter from the configuration, as text. */
struct kb_plugin_param {
	const char *name;
	const char *value;
};

/* What a model may know about a stage (see docs/stages.md). */
struct kb_stage_info {
	const char *op_kind;   /* "memory", "gemm", "math" */
	const char *op_name;   /* "dma_read", "dma_write", "gemm", "exp", ... */
	uint64_t bytes;        /* bytes the stage moves or reads (DMA: the piece one
	                        * of the channel's queues moves, dma.queues) */
	uint64_t elements;     /* elements it produces */
	uint64_t m, k, n;      /* GEMM stages: C[m x n] += A[m x k] B[k x n]; else 0 */
	uint64_t command;      /* the command (composite) it belongs to */
	uint32_t index;        /* its index in that command's plan */
	/* ABI 3: where it stands in the engine's stream (docs/stages.md) */
	uint32_t queued;          /* 1: it arrived while the previous stage ran */
	uint64_t lead_cycles;     /* queued: cycles from its arrival to that end */
	uint32_t stationary_held; /* GEMM, 1: the array still holds its B tile */
};

struct kb_engine_plugin {
	uint32_t abi;                     /* KB_ENGINE_PLUGIN_ABI */
	enum kb_engine_class engine;      /* the class it models */
	const char *name;                 /* for messages */
	/* Checks and keeps its parameters; on a bad one returns non-zero with
	 * one line in `err` naming it. May be NULL (then no parameter is
	 * accepted). *state is passed to latency and destroy. */
	int (*create)(const struct kb_plugin_param *params, size_t n_params, void **state,
		      char *err, size_t err_cap);
	/* Cycles the stage occupies the engine; non-zero + `err` on failure. */
	int (*latency)(const void *state, const struct kb_stage_info *stage, uint64_t *cycles,
		       char *err, size_t err_cap);
	void (*destroy)(void *state);     /* may be NULL */
};

#endif
