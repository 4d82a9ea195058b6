/* gemm/roofline.c — the "roofline" GEMM timing model: the stage is bound
 * either by MAC throughput or by operand bandwidth, whichever is slower.
 *
 *   cycles = setup_cycles + max(ceil(M*N*K / macs_per_cycle),
 *                               ceil(bytes / gemm.bytes_per_cycle))
 *
 * bytes = A + B + out (when written), as eng_stage_bytes counts them. */
#include "eng.h"

struct roofline_state {
	uint64_t setup_cycles;
	uint64_t macs_per_cycle;
	uint64_t bytes_per_cycle;
};

static enum rt_err roofline_init(void *state, const struct rt_config *cfg)
{
	struct roofline_state *st = state;

	if (cfg->gemm_macs_per_cycle == 0 || cfg->gemm_bytes_per_cycle == 0)
		return rt_fail(RT_ECONFIG,
			       "gemm model 'roofline': gemm.macs_per_cycle and gemm.bytes_per_cycle must be at least 1");
	st->setup_cycles = cfg->gemm_setup_cycles;
	st->macs_per_cycle = cfg->gemm_macs_per_cycle;
	st->bytes_per_cycle = cfg->gemm_bytes_per_cycle;
	return RT_EOK;
}

static enum rt_err roofline_latency(const void *state, const Kb__Stage *stage,
				    uint64_t *cycles)
{
	const struct roofline_state *st = state;
	uint64_t compute = eng_ceil_div(eng_stage_elements(stage),
					st->macs_per_cycle);
	uint64_t memory = eng_ceil_div(eng_stage_bytes(stage),
				       st->bytes_per_cycle);

	*cycles = st->setup_cycles + (compute > memory ? compute : memory);
	return RT_EOK;
}

static enum rt_err roofline_execute(void *state, const Kb__Stage *stage,
				    const struct eng_memory *mem)
{
	return eng_gemm_run(stage, mem);
}

const struct eng_model_ops eng_gemm_roofline_model = {
	.abi = ENG_MODEL_ABI,
	.engine = ENG_GEMM,
	.name = "roofline",
	.state_size = sizeof(struct roofline_state),
	.init = roofline_init,
	.latency = roofline_latency,
	.execute = roofline_execute,
	.fini = NULL,
};
