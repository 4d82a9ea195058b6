/* gemm/systolic.c — the "systolic" GEMM timing model: a weight-stationary
 * array of R = array_rows x C = array_cols PEs streaming the T = M rows of
 * A through each fold (SCALE-Sim's count). For logical M x K x N:
 *
 *   folds = ceil(K / R) * ceil(N / C)
 *   fold  = R (load the fold's weights) + (R - 1) (skew) + T (stream)
 *           + (C - 1) (drain) = 2R + C + T - 2
 *   cycles = setup + folds * (2R + C + T - 2)
 *
 * With gemm.weight_double_buffer = 1 the next fold's weights load behind
 * the current fold's skew, stream and drain (R + C + T - 2 >= R cycles,
 * so the load is always hidden) and only the first load shows:
 *
 *   cycles = setup + R + folds * (R + C + T - 2)
 *
 * Partial folds (K or N not a multiple of the array) cost a whole fold:
 * the skew and drain run through the whole array either way.
 *
 * Back to back (docs/stages.md, "A whole GEMM"): the formula above is a
 * stage on an idle array. A stage that arrived while the previous one ran
 * (ctx->queued) pays no setup (its issue overlapped), and one whose B tile
 * the array still holds (ctx->stationary_held: one fold, the previous
 * stage's) loads no weights, and its rows follow the previous rows into the
 * array: its skew and drain overlap the previous stage's drain by as much
 * as it arrived ahead (ctx->lead_cycles, at most R + C - 2); with
 * double-buffered weights a queued stage's first load hides behind the
 * previous stage the same way (at most R). A stage that
 * continues a fold back to back therefore costs T, and a whole GEMM whose
 * stages run back to back fold by fold costs SCALE-Sim's
 * folds x (2R + C + M - 2) plus one setup. */
#include "eng.h"

struct systolic_state {
	uint64_t rows;
	uint64_t cols;
	uint64_t setup_cycles;
	bool double_buffer;
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
	st->double_buffer = cfg->gemm_weight_double_buffer != 0;
	return RT_EOK;
}

static enum rt_err systolic_latency(const void *state, const Kb__Stage *stage,
				    const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	const struct systolic_state *st = state;
	uint64_t m, k, n, folds, fill = st->rows + st->cols - 2, loads, overlap = 0, total;
	bool held;

	eng_gemm_dims(stage, &m, &k, &n);
	folds = eng_mul_sat(eng_ceil_div(k, st->rows), eng_ceil_div(n, st->cols));
	/* only a one-fold stage can find all its weights in the array */
	held = ctx->stationary_held && folds == 1;
	if (st->double_buffer)
		loads = held ? 0 : 1; /* later loads hide behind the previous fold */
	else
		loads = held ? folds - 1 : folds;
	if (held && ctx->queued) /* the rows follow the previous rows in */
		overlap = ctx->lead_cycles < fill ? ctx->lead_cycles : fill;
	else if (st->double_buffer && ctx->queued && loads) /* loads behind it */
		overlap = ctx->lead_cycles < st->rows ? ctx->lead_cycles : st->rows;
	/* skew + stream + drain of each fold, the weight loads on top */
	total = eng_mul_sat(folds, fill + m);
	total = total > UINT64_MAX - loads * st->rows ? UINT64_MAX : total + loads * st->rows;
	total -= overlap;
	if (!ctx->queued)
		total = total > UINT64_MAX - st->setup_cycles ? UINT64_MAX : total + st->setup_cycles;
	*cycles = total;
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
