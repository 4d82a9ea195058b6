/* gemm/systolic.c — the "systolic" GEMM timing model, a tiled weight-
 * stationary array of array_rows x array_cols PEs. For logical M x K x N:
 *
 *   passes = ceil(K / array_rows) * ceil(N / array_cols)
 *   cycles = setup_cycles + passes * (array_rows + M)
 *
 * Each pass first loads one K x N weight tile of B (array_rows cycles, which
 * overlap nothing), then streams the M rows of A through the array (M
 * cycles). Fill/drain skew and partial tiles are not discounted. */
#include "eng.h"

struct systolic_state {
	uint64_t rows;
	uint64_t cols;
	uint64_t setup_cycles;
};

static enum rt_err systolic_init(void *state, const struct rt_config *cfg)
{
	struct systolic_state *st = state;

	if (cfg->gemm_array_rows == 0 || cfg->gemm_array_cols == 0)
		return rt_fail(RT_ECONFIG,
			       "gemm model 'systolic': gemm.array_rows and gemm.array_cols must be at least 1 (got %u x %u)",
			       cfg->gemm_array_rows, cfg->gemm_array_cols);
	st->rows = cfg->gemm_array_rows;
	st->cols = cfg->gemm_array_cols;
	st->setup_cycles = cfg->gemm_setup_cycles;
	return RT_EOK;
}

static enum rt_err systolic_latency(const void *state, const Kb__Stage *stage,
				    uint64_t *cycles)
{
	const struct systolic_state *st = state;
	uint64_t m, k, n, passes;

	eng_gemm_dims(stage, &m, &k, &n);
	passes = eng_mul_sat(eng_ceil_div(k, st->rows),
			     eng_ceil_div(n, st->cols));
	*cycles = st->setup_cycles + eng_mul_sat(passes, st->rows + m);
	return RT_EOK;
}

static enum rt_err systolic_execute(void *state, const Kb__Stage *stage,
				    const struct eng_memory *mem)
{
	return eng_gemm_run(stage, mem);
}

const struct eng_model_ops eng_gemm_systolic_model = {
	.abi = ENG_MODEL_ABI,
	.engine = ENG_GEMM,
	.name = "systolic",
	.state_size = sizeof(struct systolic_state),
	.init = systolic_init,
	.latency = systolic_latency,
	.execute = systolic_execute,
	.fini = NULL,
};
