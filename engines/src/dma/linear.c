/* dma/linear.c — the PE_DMA data kernel and the "linear" timing model:
 * cycles = setup_cycles + ceil(bytes / bytes_per_cycle). */
#include "eng.h"

enum rt_err eng_dma_run(const Kb__Stage *stage, const struct eng_memory *mem)
{
	enum rt_err err = eng_stage_check(stage, ENG_DMA, mem);

	return err ? err : eng_view_copy(stage, stage->in[0], stage->out, mem);
}

struct linear_state {
	uint64_t setup_cycles;
	uint64_t bytes_per_cycle;
};

static enum rt_err linear_init(void *state, const struct rt_config *cfg)
{
	struct linear_state *st = state;

	if (cfg->dma_bytes_per_cycle == 0)
		return rt_fail(RT_ECONFIG,
			       "dma model 'linear': dma.bytes_per_cycle must be at least 1");
	st->setup_cycles = cfg->dma_setup_cycles;
	st->bytes_per_cycle = cfg->dma_bytes_per_cycle;
	return RT_EOK;
}

static enum rt_err linear_latency(const void *state, const Kb__Stage *stage,
				  const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	const struct linear_state *st = state;

	*cycles = st->setup_cycles
		  + eng_ceil_div(eng_stage_bytes(stage), st->bytes_per_cycle);
	return RT_EOK;
}

static enum rt_err linear_execute(void *state, const Kb__Stage *stage,
				  const struct eng_memory *mem)
{
	return eng_dma_run(stage, mem);
}

const struct eng_model_ops eng_dma_linear_model = {
	.abi = ENG_MODEL_ABI,
	.engine = ENG_DMA,
	.name = "linear",
	.state_size = sizeof(struct linear_state),
	.init = linear_init,
	.latency = linear_latency,
	.execute = linear_execute,
	.fini = NULL,
};
