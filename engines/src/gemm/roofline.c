/* gemm/roofline.c — the "roofline" GEMM timing model: the stage is bound
 * either by MAC throughput or by operand bandwidth, whichever is slower.
 *
 *   cycles = setup + max(ceil(M*N*K / peak), ceil(bytes / bandwidth))
 *
 * peak = gemm.macs_per_cycle, or R x C of the array (gemm.array_rows x
 * gemm.array_cols) when it is 0; bandwidth = gemm.bytes_per_cycle, or what
 * the array's edges move per cycle when it is 0: R elements of A in, C
 * elements of B (the weight port) and C results out, R e_a + C e_b + C e_out
 * bytes at the stage's dtypes. bytes = A + B + out (out when written), as
 * eng_stage_bytes counts them, without B when the array still holds it.
 * Like the systolic model, a stage that arrived while the previous one ran
 * pays no setup.
 *
 * With both derived this is a bound: never slower than the systolic model
 * on the same array (docs/stages.md): M N K / (R C) <= folds x M, and each
 * operand's bytes over its edge's rate is at most folds x (2R + C + M - 2)
 * (at most M for a stage that continues a fold), so their sum over the sum
 * of the rates is too. */
#include "eng.h"

struct roofline_state {
	uint64_t rows, cols;
	uint64_t setup_cycles;
	uint64_t macs_per_cycle;  /* 0: rows x cols */
	uint64_t bytes_per_cycle; /* 0: from the array's edges */
};

static enum rt_err roofline_init(void *state, const struct rt_config *cfg)
{
	struct roofline_state *st = state;

	if ((cfg->gemm_macs_per_cycle == 0 || cfg->gemm_bytes_per_cycle == 0) &&
	    (cfg->gemm_array_rows == 0 || cfg->gemm_array_cols == 0))
		return rt_fail(RT_ECONFIG,
			       "gemm model 'roofline': gemm.macs_per_cycle and gemm.bytes_per_cycle of 0 derive from gemm.array_rows x gemm.array_cols, which must be at least 1");
	st->rows = cfg->gemm_array_rows;
	st->cols = cfg->gemm_array_cols;
	st->setup_cycles = cfg->gemm_setup_cycles;
	st->macs_per_cycle = cfg->gemm_macs_per_cycle;
	st->bytes_per_cycle = cfg->gemm_bytes_per_cycle;
	return RT_EOK;
}

static uint64_t view_elem(const Kb__View *v)
{
	return v ? rt_dtype_bytes(v->dtype) : 0;
}

static uint64_t view_bytes(const Kb__View *v)
{
	return v ? eng_mul_sat(eng_mul_sat(v->rows, v->cols), rt_dtype_bytes(v->dtype)) : 0;
}

static enum rt_err roofline_latency(const void *state, const Kb__Stage *stage,
				    const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	const struct roofline_state *st = state;
	uint64_t peak = st->macs_per_cycle ? st->macs_per_cycle : st->rows * st->cols;
	uint64_t bw = st->bytes_per_cycle, bytes = eng_stage_bytes(stage), compute, memory;

	if (ctx->stationary_held) /* the weights are in the array already */
		bytes -= view_bytes(stage->in[1]);
	if (!bw)
		bw = st->rows * view_elem(stage->in[0]) + st->cols * view_elem(stage->in[1]) +
		     st->cols * view_elem(stage->out);
	compute = eng_ceil_div(eng_stage_elements(stage), peak);
	memory = eng_ceil_div(bytes, bw ? bw : 1);
	*cycles = (ctx->queued ? 0 : st->setup_cycles) + (compute > memory ? compute : memory);
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
