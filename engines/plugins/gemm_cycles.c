/* gemm_cycles.c — example PE_GEMM timing plug-in written against the public
 * kb_engine_plugin.h alone: every GEMM stage takes `cycles` cycles (its own
 * parameter, default 1000, 1 to 1e9), whatever its shape. The data effect
 * stays the built-in model's.
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

static int parse_cycles(const char *text, uint64_t *out)
{
	uint64_t v = 0;

	if (!*text)
		return -1;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9' || v > 100000000u)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < 1 || v > 1000000000u)
		return -1;
	*out = v;
	return 0;
}

static int create(const struct kb_plugin_param *params, size_t n, void **state, char *err,
		  size_t cap)
{
	struct gemm_cycles *g = malloc(sizeof(*g));

	if (!g) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	g->cycles = 1000;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(params[i].name, "cycles")) {
			snprintf(err, cap, "unknown parameter '%s' (accepted: cycles)", params[i].name);
			free(g);
			return -1;
		}
		if (parse_cycles(params[i].value, &g->cycles)) {
			snprintf(err, cap, "cycles='%s': expected a decimal integer from 1 to 1000000000",
				 params[i].value);
			free(g);
			return -1;
		}
	}
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
};
