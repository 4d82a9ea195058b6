/* gemm/tensor_engine.c — the "tensor_engine" GEMM timing model: the cost
 * AWS's NKI documents for the Trainium Tensor Engine's matmul instruction
 * (nki.isa.nc_matmul, "Estimated instruction cost"), reproduced exactly:
 *
 *   one instruction = max(min(II, N_stationary), N_moving) engine cycles
 *                     (x 4 when an input is float32)
 *
 * "the average nc_matmul cost assuming many nc_matmul instructions of the
 * same shapes running back-to-back". The stationary operand is B's tile
 * (as in the weight-stationary systolic model): at most R = gemm.array_rows
 * rows (the contraction, SBUF partitions) by C = gemm.array_cols columns
 * (N_stationary, its free size); the moving operand is A's rows, at most
 * gemm.moving_max of them per instruction (N_moving). A stage of logical
 * M x K x N is ceil(K/R) x ceil(N/C) x ceil(M/moving_max) instructions:
 *
 *   engine cycles = ceil(K/R) x sum over N tiles n and M tiles m of
 *                   max(min(gemm.min_cycles, n), m) x (f32 ? gemm.f32_factor : 1)
 *
 * converted to PE cycles at gemm.clock_mhz (the engine's clock; 0: the PE
 * clock), rounded up per stage, plus gemm.setup_cycles (PE cycles) when the
 * stage found the engine idle (a queued stage's issue overlapped the
 * previous one, as the documented back-to-back average assumes). */
#include "eng.h"

struct te_state {
	uint64_t rows, cols, moving_max, min_cycles, f32_factor;
	uint64_t engine_mhz, pe_mhz;
	uint64_t setup_cycles;
};

static enum rt_err te_init(void *state, const struct rt_config *cfg)
{
	struct te_state *st = state;

	if (!cfg->gemm_array_rows || !cfg->gemm_array_cols || !cfg->gemm_moving_max)
		return rt_fail(RT_ECONFIG,
			       "gemm model 'tensor_engine': gemm.array_rows, gemm.array_cols and gemm.moving_max must be at least 1");
	st->rows = cfg->gemm_array_rows;
	st->cols = cfg->gemm_array_cols;
	st->moving_max = cfg->gemm_moving_max;
	st->min_cycles = cfg->gemm_min_cycles;
	st->f32_factor = cfg->gemm_f32_factor ? cfg->gemm_f32_factor : 1;
	st->pe_mhz = cfg->clock_mhz ? cfg->clock_mhz : 1;
	st->engine_mhz = cfg->gemm_clock_mhz ? cfg->gemm_clock_mhz : st->pe_mhz;
	st->setup_cycles = cfg->gemm_setup_cycles;
	return RT_EOK;
}

/* One instruction's engine cycles: stationary free size n, moving m. */
static uint64_t instr_cycles(const struct te_state *st, uint64_t n, uint64_t m)
{
	uint64_t floor = st->min_cycles < n ? st->min_cycles : n;

	return floor > m ? floor : m;
}

static uint64_t te_cycles(const struct te_state *st, uint64_t m, uint64_t k, uint64_t n,
			  bool f32)
{
	uint64_t full_n = n / st->cols, rest_n = n % st->cols;
	uint64_t full_m = m / st->moving_max, rest_m = m % st->moving_max;
	uint64_t per_k = 0;

	/* the N tiles of C columns and the last narrower one, each against
	 * the M tiles of moving_max rows and the last shorter one */
	per_k += eng_mul_sat(eng_mul_sat(full_n, full_m), instr_cycles(st, st->cols, st->moving_max));
	if (rest_m)
		per_k += eng_mul_sat(full_n, instr_cycles(st, st->cols, rest_m));
	if (rest_n)
		per_k += eng_mul_sat(full_m, instr_cycles(st, rest_n, st->moving_max));
	if (rest_n && rest_m)
		per_k += instr_cycles(st, rest_n, rest_m);
	return eng_mul_sat(eng_mul_sat(eng_ceil_div(k, st->rows), per_k), f32 ? st->f32_factor : 1);
}

uint64_t eng_tensor_engine_cycles(const struct rt_config *cfg, uint64_t m, uint64_t k,
				  uint64_t n, bool f32)
{
	struct te_state st;

	if (te_init(&st, cfg))
		return 0;
	return te_cycles(&st, m, k, n, f32);
}

static enum rt_err te_latency(const void *state, const Kb__Stage *stage,
			      const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	const struct te_state *st = state;
	bool f32 = stage->in[0]->dtype == KB__DTYPE__DTYPE_F32 ||
		   stage->in[1]->dtype == KB__DTYPE__DTYPE_F32;
	uint64_t m, k, n, te, pe;

	eng_gemm_dims(stage, &m, &k, &n);
	te = te_cycles(st, m, k, n, f32);
	/* PE cycles = ceil(engine cycles x PE MHz / engine MHz) */
	pe = (uint64_t)(((unsigned __int128)te * st->pe_mhz + st->engine_mhz - 1) / st->engine_mhz);
	*cycles = (ctx->queued ? 0 : st->setup_cycles) + pe;
	return RT_EOK;
}

static enum rt_err te_execute(void *state, const Kb__Stage *stage, const struct eng_memory *mem)
{
	return eng_gemm_run(stage, mem);
}

const struct eng_model_ops eng_gemm_tensor_engine_model = {
	.abi = ENG_MODEL_ABI,
	.engine = ENG_GEMM,
	.name = "tensor_engine",
	.state_size = sizeof(struct te_state),
	.init = te_init,
	.latency = te_latency,
	.execute = te_execute,
	.fini = NULL,
};
