/* gemm_fixed.c — example PE_GEMM model plug-in: every GEMM stage takes a
 * constant GEMM_FIXED_CYCLES, whatever its shape; the data effect is the
 * built-in kernel's, so results are unchanged.
 *
 * Build: the Makefile turns engines/plugins/NAME.c into BUILD/plugins/NAME.so
 * (-fPIC -shared). Use: `kernbench run ... --set gemm.model=BUILD/plugins/
 * gemm_fixed.so`. The engine dlopen()s the file and reads the one symbol
 * below, `kb_engine_model` (ENG_PLUGIN_SYMBOL). A plug-in may call any
 * engine or runtime function (the executable is linked -rdynamic): here
 * eng_gemm_run. Write each handler with the exact eng_model_ops signature —
 * the table holds them without casts. */
#include "eng.h"

#define GEMM_FIXED_CYCLES 1000u

static enum rt_err fixed_latency(const void *state, const Kb__Stage *stage,
				 const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	*cycles = GEMM_FIXED_CYCLES;
	return RT_EOK;
}

static enum rt_err fixed_execute(void *state, const Kb__Stage *stage,
				 const struct eng_memory *mem)
{
	return eng_gemm_run(stage, mem);
}

const struct eng_model_ops kb_engine_model = {
	.abi = ENG_MODEL_ABI,
	.engine = ENG_GEMM,
	.name = "gemm_fixed",
	.state_size = 0,
	.init = NULL,
	.latency = fixed_latency,
	.execute = fixed_execute,
	.fini = NULL,
};
