/* math/simd.c — the "simd" PE_MATH timing model: `lanes` elements per
 * cycle, each op class at its own cycles-per-element figure.
 *
 *   cycles = setup_cycles + ceil(elements / lanes) * cycles_per_elem(class)
 *
 * class (npu/isa.h): simple ops -> math.cycles_per_elem, exp / exp_diff ->
 * math.exp_cycles_per_elem, rmax / rsum -> math.reduce_cycles_per_elem.
 * elements = out elements (reductions: input elements).
 *
 * The fused softmax costs what its parts cost (RT_ISA_SOFTMAX_PARTS: rmax,
 * exp_diff, rsum, div over the same elements, each with its setup):
 *   cycles = 4 * setup + ceil(elements / lanes)
 *            * (2 * reduce + exp + simple cycles_per_elem) */
#include "eng.h"

struct simd_state {
	uint64_t lanes;
	uint64_t setup_cycles;
	uint64_t per_elem[RT_ISA_LAT_COUNT]; /* by enum rt_isa_lat */
};

static enum rt_err simd_init(void *state, const struct rt_config *cfg)
{
	struct simd_state *st = state;

	if (cfg->math_lanes == 0)
		return rt_fail(RT_ECONFIG,
			       "math model 'simd': math.lanes must be at least 1");
	st->lanes = cfg->math_lanes;
	st->setup_cycles = cfg->math_setup_cycles;
	st->per_elem[RT_ISA_LAT_SIMPLE] = cfg->math_cycles_per_elem;
	st->per_elem[RT_ISA_LAT_TRANSCENDENTAL] = cfg->math_exp_cycles_per_elem;
	st->per_elem[RT_ISA_LAT_REDUCE] = cfg->math_reduce_cycles_per_elem;
	return RT_EOK;
}

/* setup + steps * per_elem, saturating. */
static uint64_t pass_cycles(const struct simd_state *st, uint64_t steps,
			    enum rt_isa_lat lat)
{
	uint64_t work = eng_mul_sat(steps, st->per_elem[lat]);

	return work > UINT64_MAX - st->setup_cycles ? UINT64_MAX
						    : st->setup_cycles + work;
}

static enum rt_err simd_latency(const void *state, const Kb__Stage *stage,
				const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	static const enum rt_isa_id parts[] = RT_ISA_SOFTMAX_PARTS;
	const struct simd_state *st = state;
	const struct rt_isa_op *op;
	uint64_t steps, part;
	enum rt_err err = eng_math_op_find(stage->op_name, &op);

	if (err)
		return err;
	steps = eng_ceil_div(eng_stage_elements(stage), st->lanes);
	if (op->lat != RT_ISA_LAT_SOFTMAX) {
		*cycles = pass_cycles(st, steps, op->lat);
		return RT_EOK;
	}
	*cycles = 0;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		part = pass_cycles(st, steps, rt_isa_get(parts[i])->lat);
		*cycles = part > UINT64_MAX - *cycles ? UINT64_MAX
						      : *cycles + part;
	}
	return RT_EOK;
}

static enum rt_err simd_execute(void *state, const Kb__Stage *stage,
				const struct eng_memory *mem)
{
	return eng_math_run(stage, mem);
}

const struct eng_model_ops eng_math_simd_model = {
	.abi = ENG_MODEL_ABI,
	.engine = ENG_MATH,
	.name = "simd",
	.state_size = sizeof(struct simd_state),
	.init = simd_init,
	.latency = simd_latency,
	.execute = simd_execute,
	.fini = NULL,
};
