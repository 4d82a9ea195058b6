/* gemm_cycles.c — example PE_GEMM timing plug-in written against the public
 * kb_engine_plugin.h alone: every GEMM stage takes `cycles` cycles (its own
 * parameter, default 1000, 1 to 1e9), whatever its shape. The data effect
 * stays the built-in model's. It declares its parameter (ABI 4), so
 * kernbench checks it and `kernbench config` lists it.
 *
 *   kernbench run gemm --set gemm.model=BUILD/plugins/gemm_cycles.so \
 *       --set gemm.params=cycles=900
 * or in a YAML config:   gemm: { model: .../gemm_cycles.so, params: "cycles=900" } */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_engine_plugin.h"

struct gemm_cycles {
	uint64_t cycles;
};

/* Declared, so kernbench checks `cycles` (name, integer, range) before any
 * daemon starts and fills in the default: create() only reads it. */
static const struct kb_param_decl params[] = {
	{ .name = "cycles", .type = KB_PARAM_INT, .unit = "cycles", .min = 1, .max = 1e9,
	  .default_value = "1000", .description = "cycles every GEMM stage occupies the engine" },
};

static int create(const struct kb_plugin_param *given, size_t n, void **state, char *err,
		  size_t cap)
{
	struct gemm_cycles *g = malloc(sizeof(*g));

	if (!g) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	g->cycles = kb_param_int(given, n, "cycles");
	*state = g;
	return 0;
}

static int latency(const void *state, const struct kb_stage_info *stage, uint64_t *cycles,
		   char *err, size_t cap)
{
	(void)stage;
	(void)err;
	(void)cap;
	*cycles = ((const struct gemm_cycles *)state)->cycles;
	return 0;
}

static void destroy(void *state)
{
	free(state);
}

const struct kb_engine_plugin kb_engine_plugin = {
	.abi = KB_ENGINE_PLUGIN_ABI,
	.engine = KB_ENGINE_GEMM,
	.name = "gemm_cycles",
	.create = create,
	.latency = latency,
	.destroy = destroy,
	.params = params,
	.n_params = sizeof(params) / sizeof(params[0]),
};
