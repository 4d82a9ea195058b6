/* test_gemm_models.c — the GEMM models against independent computations
 * (issue 18 items 1, 3 and 4):
 *   - a systolic stage that follows the previous one: the rows-enter
 *     timeline of a weight-stationary array, computed here phase by phase;
 *   - a whole GEMM as the scheduler plans it (M tiles innermost), each
 *     stage queued behind the last: setup + SCALE-Sim's weight-stationary
 *     count folds x (2R + C + M - 2), for ragged shapes and arrays;
 *   - roofline with the array's own peak and edge bandwidth is never slower
 *     than systolic, whatever the shape, dtypes and context;
 *   - tensor_engine is NKI's documented nc_matmul cost, instruction by
 *     instruction, converted to the PE clock. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "sched.h"

static char k_gemm[] = "gemm";

static Kb__View view(uint32_t rows, uint32_t cols, Kb__DType dt)
{
	Kb__View v = KB__VIEW__INIT;

	v.space = KB__SPACE__SPACE_TCM;
	v.rows = rows;
	v.cols = cols;
	v.dtype = dt;
	v.row_stride = (uint64_t)cols * rt_dtype_bytes(dt);
	return v;
}

struct gstage {
	Kb__View a, b, out;
	Kb__View *ins[2];
	Kb__Stage s;
};

static void gstage_init(struct gstage *g, uint32_t m, uint32_t k, uint32_t n, Kb__DType in,
			Kb__DType out)
{
	Kb__Stage s = KB__STAGE__INIT;

	g->a = view(m, k, in);
	g->b = view(k, n, in);
	g->out = view(m, n, out);
	g->ins[0] = &g->a;
	g->ins[1] = &g->b;
	g->s = s;
	g->s.engine = KB__ENGINE__ENGINE_GEMM;
	g->s.op_kind = k_gemm;
	g->s.op_name = k_gemm;
	g->s.n_in = 2;
	g->s.in = g->ins;
	g->s.out = &g->out;
}

static struct rt_config cfg_of(uint32_t R, uint32_t C, uint64_t setup, bool db)
{
	struct rt_config c;

	rt_config_defaults(&c);
	c.gemm_array_rows = R;
	c.gemm_array_cols = C;
	c.gemm_setup_cycles = setup;
	c.gemm_weight_double_buffer = db;
	c.gemm_macs_per_cycle = 0;
	c.gemm_bytes_per_cycle = 0;
	return c;
}

static uint64_t cycles_of(const char *model, const struct rt_config *cfg, const Kb__Stage *s,
			  const struct eng_stage_ctx *ctx)
{
	const struct eng_memory mem = { NULL, 1ull << 34, NULL, 1ull << 34 };
	struct eng_model m;
	uint64_t c = 0;

	cr_assert_eq(eng_stage_check(s, ENG_GEMM, &mem), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(eng_model_init(&m, ENG_GEMM, model, cfg), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(eng_model_latency(&m, s, ctx, &c), RT_EOK);
	eng_model_release(&m);
	return c;
}

/* ---------------------------------------------------------------- systolic */

/* A one-fold stage of T rows after a stage that ends at E = 0 (its last
 * row entered at -L, L = R + C - 2), arriving `lead` cycles before E. Rows
 * enter when both the array holds the weights and the rows are there; the
 * last result leaves L after the last row entered. Returns the stage's
 * duration from E (queued) as the array's timeline gives it. */
static uint64_t follow_timeline(uint64_t R, uint64_t C, uint64_t T, uint64_t lead, bool held,
				bool db)
{
	int64_t L = (int64_t)(R + C - 2), arrive = -(int64_t)lead;
	int64_t rows_free = -L;    /* the previous stage's rows are in */
	int64_t weights_at;         /* its weights are in place */

	if (held)
		weights_at = arrive;        /* nothing to load */
	else if (db)
		weights_at = arrive + (int64_t)R; /* loads behind the previous fold */
	else
		weights_at = 0 + (int64_t)R; /* after the previous fold drained */
	int64_t start = arrive > rows_free ? arrive : rows_free;

	if (!held && !db)
		start = weights_at; /* a fold does not overlap its predecessor */
	if (weights_at > start)
		start = weights_at;
	if (!held && db && start < 0)
		start = 0; /* a new fold's rows wait for the previous drain */
	return (uint64_t)(start + (int64_t)T + L);
}

Test(gemm_systolic, a_stage_that_follows_costs_what_the_array_timeline_gives, .timeout = 10)
{
	static const uint32_t arr[][2] = { { 128, 128 }, { 32, 48 }, { 16, 16 } };
	static const uint64_t T[] = { 1, 8, 100, 128, 300 };
	static const uint64_t lead[] = { 0, 1, 7, 46, 94, 254, 1000 };

	for (size_t a = 0; a < 3; a++)
		for (size_t t = 0; t < 5; t++)
			for (size_t l = 0; l < 7; l++)
				for (int held = 0; held <= 1; held++)
					for (int db = 0; db <= 1; db++) {
						struct rt_config c = cfg_of(arr[a][0], arr[a][1], 16, db);
						struct eng_stage_ctx ctx = { true, lead[l], held };
						struct gstage g;
						uint64_t want = follow_timeline(arr[a][0], arr[a][1],
										T[t], lead[l], held, db);

						gstage_init(&g, (uint32_t)T[t], arr[a][0], arr[a][1],
							    KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32);
						cr_expect_eq(cycles_of("systolic", &c, &g.s, &ctx), want,
							     "%ux%u T=%llu lead=%llu held=%d db=%d",
							     arr[a][0], arr[a][1],
							     (unsigned long long)T[t],
							     (unsigned long long)lead[l], held, db);
					}
}

/* Idle (not queued) the stage pays its setup and, holding its weights,
 * only skew + stream + drain; a multi-fold stage never holds them all. */
Test(gemm_systolic, an_idle_stage_pays_setup_and_a_held_one_no_load, .timeout = 10)
{
	struct rt_config c = cfg_of(128, 128, 16, false);
	struct eng_stage_ctx idle = { false, 0, false }, held = { false, 0, true };
	struct gstage g;

	gstage_init(&g, 8, 128, 128, KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32);
	cr_expect_eq(cycles_of("systolic", &c, &g.s, &idle), 16 + 2 * 128 + 128 + 8 - 2);
	cr_expect_eq(cycles_of("systolic", &c, &g.s, &held), 16 + 127 + 8 + 127);
	gstage_init(&g, 8, 256, 128, KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32);
	cr_expect_eq(cycles_of("systolic", &c, &g.s, &held), 16 + 2 * (2 * 128 + 128 + 8 - 2));
}

/* ---------------------------------------------------------------- whole GEMM */

/* One composite gemm(A[m x k] tl_ref, B[k x n] tl_ref -> C tl_ref f32),
 * as the kernel host sends it. */
struct cmd {
	Kb__TensorRef t[3];
	uint32_t shape[3][2];
	Kb__Operand o[2];
	Kb__Operand *op_ptrs[2];
	Kb__OpSpec op;
	Kb__OpSpec *ops[1];
	Kb__CompositeCmd comp;
	Kb__Command cmd;
};

static void cmd_init(struct cmd *c, uint32_t m, uint32_t k, uint32_t n)
{
	static char a[] = "a", b[] = "b";
	const uint32_t dims[3][2] = { { m, k }, { k, n }, { m, n } };

	for (int i = 0; i < 3; i++) {
		kb__tensor_ref__init(&c->t[i]);
		c->shape[i][0] = dims[i][0];
		c->shape[i][1] = dims[i][1];
		c->t[i].shape = c->shape[i];
		c->t[i].n_shape = 2;
		c->t[i].space = KB__SPACE__SPACE_HBM;
		c->t[i].addr = (uint64_t)i << 30;
		c->t[i].dtype = i == 2 ? KB__DTYPE__DTYPE_F32 : KB__DTYPE__DTYPE_F16;
	}
	for (int i = 0; i < 2; i++) {
		kb__operand__init(&c->o[i]);
		c->o[i].name = i ? b : a;
		c->o[i].tensor = &c->t[i];
		c->op_ptrs[i] = &c->o[i];
	}
	kb__op_spec__init(&c->op);
	c->op.kind = k_gemm;
	c->op.scope = KB__SCOPE__SCOPE_KERNEL;
	c->op.operands = c->op_ptrs;
	c->op.n_operands = 2;
	c->op.out = &c->t[2];
	c->ops[0] = &c->op;
	kb__composite_cmd__init(&c->comp);
	c->comp.id = 1;
	c->comp.ops = c->ops;
	c->comp.n_ops = 1;
	kb__command__init(&c->cmd);
	c->cmd.body_case = KB__COMMAND__BODY_COMPOSITE;
	c->cmd.composite = &c->comp;
}

/* The plan's GEMM stages timed back to back on `model`: the first on an
 * idle engine, every later one queued far enough ahead. */
static uint64_t whole_gemm(const char *model, const struct rt_config *cfg, uint32_t m,
			   uint32_t k, uint32_t n, uint32_t *stages)
{
	struct sched_plan plan;
	struct cmd c;
	uint64_t total = 0;
	bool first = true;

	cmd_init(&c, m, k, n);
	sched_plan_init(&plan);
	cr_assert_eq(sched_plan_build(&c.cmd, cfg, cfg->tcm_scratch_bytes, &plan), RT_EOK, "%s",
		     rt_last_error());
	*stages = 0;
	for (uint32_t s = 0; s < plan.n_stages; s++) {
		struct sched_stage_msg msg;
		struct eng_stage_ctx ctx = { !first, 1u << 20, false };

		if (plan.stages[s].engine != KB__ENGINE__ENGINE_GEMM)
			continue;
		sched_stage_msg_fill(&msg, &plan.stages[s], 1, s);
		ctx.stationary_held = !first && msg.stage.stationary_held;
		total += cycles_of(model, cfg, &msg.stage, &ctx);
		first = false;
		(*stages)++;
	}
	sched_plan_release(&plan);
	return total;
}

/* SCALE-Sim's weight-stationary count for M x K x N on R x C
 * (scalesim/compute/systolic_compute_ws.py): every fold (ceil(K/R) x
 * ceil(N/C) of them) loads its R x C weights, then streams all M rows,
 * 2R + C + M - 2 cycles each. */
static uint64_t scalesim_ws(uint64_t M, uint64_t K, uint64_t N, uint64_t R, uint64_t C)
{
	return ((K + R - 1) / R) * ((N + C - 1) / C) * (2 * R + C + M - 2);
}

Test(gemm_whole, back_to_back_stages_cost_setup_plus_scalesim, .timeout = 60)
{
	static const uint32_t shapes[][3] = {
		{ 200, 300, 77 },  { 1000, 128, 128 }, { 33, 129, 257 }, { 1, 1, 1 },
		{ 129, 1, 1 },     { 1, 1000, 1 },     { 300, 7, 600 },  { 777, 333, 129 },
		{ 512, 512, 512 }, { 1000, 1000, 1000 }, { 17, 4096, 3 }, { 4096, 64, 64 },
		{ 130, 130, 130 }, { 8, 128, 128 },    { 2000, 255, 257 },
	};
	static const uint32_t arr[][2] = { { 128, 128 }, { 64, 32 }, { 32, 128 } };

	for (size_t a = 0; a < 3; a++)
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
			struct rt_config c = cfg_of(arr[a][0], arr[a][1], 16, false);
			const uint32_t *s = shapes[i];
			uint32_t stages;
			uint64_t got, want;

			c.tcm_staging_bytes = 64u << 20; /* every accumulator at once */
			c.gemm_tile_m = c.gemm_tile_k = c.gemm_tile_n = 128;
			got = whole_gemm("systolic", &c, s[0], s[1], s[2], &stages);
			want = 16 + scalesim_ws(s[0], s[1], s[2], arr[a][0], arr[a][1]);
			/* the scheduler cuts B's tiles to one fold of the array */
			cr_expect_eq(got, want, "%ux%ux%u on %ux%u (%u stages): %llu, SCALE-Sim + "
				     "setup %llu", s[0], s[1], s[2], arr[a][0], arr[a][1], stages,
				     (unsigned long long)got, (unsigned long long)want);
		}
}

/* With accumulators for fewer M tiles than M has, the GEMM runs in chunks
 * of M tiles, each streaming through every fold: chunks x folds x (2R +
 * C - 2) + folds x M, still SCALE-Sim's count of the chunks. */
Test(gemm_whole, chunks_of_m_each_stream_through_every_fold, .timeout = 30)
{
	struct rt_config c = cfg_of(128, 128, 16, false);
	uint32_t stages;
	/* a staging region of 384 KiB: 2 A + 2 B + 2 out slots (4 x 32 KiB +
	 * 2 x 64 KiB) leave room for two 64 KiB accumulators: 4 chunks of 2 of
	 * the 8 M tiles, each through the 4 folds */
	uint64_t got, want = 16 + 4 * 4 * (2 * 128 + 128 - 2) + 4 * 1000;

	c.tcm_staging_bytes = 768u << 10;
	c.gemm_buffers = 2;
	got = whole_gemm("systolic", &c, 1000, 256, 256, &stages);
	cr_expect_eq(got, want, "1000x256x256 in chunks of one M tile: %llu, want %llu",
		     (unsigned long long)got, (unsigned long long)want);
}

/* ---------------------------------------------------------------- roofline */

Test(gemm_roofline, never_slower_than_systolic_on_the_same_array, .timeout = 60)
{
	static const uint32_t mkn[][3] = {
		{ 1, 1, 1 },    { 8, 128, 128 }, { 128, 128, 128 }, { 1000, 128, 128 },
		{ 200, 300, 77 }, { 33, 129, 257 }, { 7, 9, 5 }, { 512, 1, 512 },
		{ 1, 4096, 1 }, { 300, 700, 30 },
	};
	static const uint32_t arr[][2] = { { 128, 128 }, { 16, 64 }, { 256, 8 } };
	static const Kb__DType dt[][2] = {
		{ KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32 },
		{ KB__DTYPE__DTYPE_F32, KB__DTYPE__DTYPE_F32 },
		{ KB__DTYPE__DTYPE_BF16, KB__DTYPE__DTYPE_F16 },
	};
	static const uint64_t lead[] = { 0, 5, 100, 100000 };

	for (size_t a = 0; a < 3; a++)
		for (size_t i = 0; i < sizeof(mkn) / sizeof(mkn[0]); i++)
			for (size_t d = 0; d < 3; d++)
				for (int db = 0; db <= 1; db++)
					for (int q = 0; q < 5; q++)
						for (int h = 0; h <= 1; h++) {
							struct rt_config c = cfg_of(arr[a][0], arr[a][1],
										    16, db);
							struct eng_stage_ctx ctx = { q > 0,
										     q ? lead[q - 1] : 0,
										     h };
							struct gstage g;
							uint64_t sys, roof;

							gstage_init(&g, mkn[i][0], mkn[i][1], mkn[i][2],
								    dt[d][0], dt[d][1]);
							sys = cycles_of("systolic", &c, &g.s, &ctx);
							roof = cycles_of("roofline", &c, &g.s, &ctx);
							cr_expect_leq(roof, sys,
								      "%ux%ux%u on %ux%u dt %zu db %d ctx "
								      "(%d, %llu, %d): roofline %llu > "
								      "systolic %llu", mkn[i][0], mkn[i][1],
								      mkn[i][2], arr[a][0], arr[a][1], d, db,
								      ctx.queued,
								      (unsigned long long)ctx.lead_cycles,
								      h, (unsigned long long)roof,
								      (unsigned long long)sys);
						}
}

/* The example: 1000 x 128 x 128 on 128^2 was 3144 cycles under a
 * 256 B/cycle roofline and 1398 under systolic; derived from the array it
 * is compute bound: 16 + 1000 x 128 x 128 / 16384 = 1016. */
Test(gemm_roofline, bandwidth_derives_from_the_array, .timeout = 10)
{
	struct rt_config c = cfg_of(128, 128, 16, false);
	struct eng_stage_ctx idle = { false, 0, false };
	struct gstage g;

	gstage_init(&g, 1000, 128, 128, KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32);
	cr_expect_eq(cycles_of("roofline", &c, &g.s, &idle), 16 + 1000);
	/* set explicitly, the figures are the configuration's */
	c.gemm_bytes_per_cycle = 256;
	c.gemm_macs_per_cycle = 16384;
	cr_expect_eq(cycles_of("roofline", &c, &g.s, &idle),
		     16 + (1000 * 128 * 2 + 128 * 128 * 2 + 1000 * 128 * 4 + 255) / 256);
}

/* ---------------------------------------------------------------- tensor_engine */

/* NKI's nc_matmul cost, instruction by instruction: the stationary tile is
 * B's (at most 128 partitions x 128 columns), the moving one A's rows (at
 * most 512): max(min(64, N_stationary), N_moving) engine cycles, 4x for an
 * f32 input; then engine cycles at 2.4 GHz into PE cycles at 1 GHz. */
static uint64_t nki_cycles(uint64_t M, uint64_t K, uint64_t N, bool f32)
{
	uint64_t te = 0;

	for (uint64_t k0 = 0; k0 < K; k0 += 128)
		for (uint64_t n0 = 0; n0 < N; n0 += 128)
			for (uint64_t m0 = 0; m0 < M; m0 += 512) {
				uint64_t ns = N - n0 < 128 ? N - n0 : 128;
				uint64_t nm = M - m0 < 512 ? M - m0 : 512;
				uint64_t floor = ns < 64 ? ns : 64;

				te += (floor > nm ? floor : nm) * (f32 ? 4 : 1);
			}
	return (te * 1000 + 2399) / 2400;
}

Test(gemm_tensor_engine, reproduces_the_nki_nc_matmul_cost, .timeout = 30)
{
	static const uint32_t mkn[][3] = {
		{ 8, 128, 128 }, { 128, 128, 128 }, { 512, 128, 128 }, { 513, 128, 128 },
		{ 1000, 128, 128 }, { 8, 128, 32 }, { 1, 1, 1 }, { 200, 300, 77 },
		{ 33, 129, 257 }, { 2048, 512, 1000 }, { 64, 64, 63 }, { 3, 1000, 65 },
	};
	struct rt_config c;
	struct eng_stage_ctx idle = { false, 0, false }, queued = { true, 10, false };

	rt_config_defaults(&c);
	c.gemm_array_rows = 128;
	c.gemm_array_cols = 128;
	c.gemm_moving_max = 512;
	c.gemm_min_cycles = 64;
	c.gemm_f32_factor = 4;
	c.gemm_clock_mhz = 2400;
	c.clock_mhz = 1000;
	c.gemm_setup_cycles = 7;
	for (size_t i = 0; i < sizeof(mkn) / sizeof(mkn[0]); i++)
		for (int f32 = 0; f32 <= 1; f32++) {
			struct gstage g;
			uint64_t want = nki_cycles(mkn[i][0], mkn[i][1], mkn[i][2], f32);

			gstage_init(&g, mkn[i][0], mkn[i][1], mkn[i][2],
				    f32 ? KB__DTYPE__DTYPE_F32 : KB__DTYPE__DTYPE_BF16,
				    KB__DTYPE__DTYPE_F32);
			cr_expect_eq(cycles_of("tensor_engine", &c, &g.s, &queued), want,
				     "%ux%ux%u f32=%d", mkn[i][0], mkn[i][1], mkn[i][2], f32);
			cr_expect_eq(cycles_of("tensor_engine", &c, &g.s, &idle), 7 + want);
		}
	/* the documented figures: a full 128 x 128 stationary with 512 moving
	 * columns is 512 engine cycles; 8 moving rows cost the 64-cycle floor */
	cr_expect_eq(eng_tensor_engine_cycles(&c, 512, 128, 128, false), 512);
	cr_expect_eq(eng_tensor_engine_cycles(&c, 8, 128, 128, false), 64);
	cr_expect_eq(eng_tensor_engine_cycles(&c, 8, 128, 32, false), 32);
	cr_expect_eq(eng_tensor_engine_cycles(&c, 8, 128, 128, true), 256);
}
