/* test_engines_models.c — engine timing models reproduce their documented
 * formulas exactly, and the model loader finds built-ins and plug-ins. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"

static struct rt_config test_config(void)
{
	struct rt_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.hbm_bytes = 1 << 20;
	cfg.tcm_scratch_bytes = 1 << 16;
	cfg.dma_setup_cycles = 10;
	cfg.dma_bytes_per_cycle = 64;
	cfg.gemm_array_rows = 32;
	cfg.gemm_array_cols = 32;
	cfg.gemm_setup_cycles = 5;
	cfg.gemm_macs_per_cycle = 256;
	cfg.gemm_bytes_per_cycle = 64;
	cfg.math_lanes = 16;
	cfg.math_setup_cycles = 4;
	cfg.math_cycles_per_elem = 1;
	cfg.math_exp_cycles_per_elem = 4;
	cfg.math_reduce_cycles_per_elem = 2;
	return cfg;
}

/* Mutable names: protobuf-c fields are `char *` and -Wwrite-strings makes
 * literals const. */
static char k_memory[] = "memory", k_dma_read[] = "dma_read",
	    k_gemm[] = "gemm", k_math[] = "math", k_axis[] = "axis",
	    k_scale[] = "scale";

static const struct eng_memory sizes = { NULL, 1 << 20, NULL, 1 << 24 };

static Kb__View view(uint32_t rows, uint32_t cols, Kb__DType dt, bool trans)
{
	Kb__View v = KB__VIEW__INIT;

	v.space = KB__SPACE__SPACE_TCM;
	v.rows = rows;
	v.cols = cols;
	v.dtype = dt;
	v.trans = trans;
	v.row_stride = (uint64_t)cols * rt_dtype_bytes(dt);
	return v;
}

/* Latency of `s` under the built-in `name` of class `cls`, after the
 * stage passed its check. */
static uint64_t latency(enum eng_class cls, const char *name,
			const struct rt_config *cfg, const Kb__Stage *s)
{
	struct eng_model m;
	uint64_t cycles = 0;

	cr_assert_eq(eng_stage_check(s, cls, &sizes), RT_EOK, "%s",
		     rt_last_error());
	cr_assert_eq(eng_model_init(&m, cls, name, cfg), RT_EOK, "%s",
		     rt_last_error());
	cr_assert_eq(eng_model_latency(&m, s, NULL, &cycles), RT_EOK);
	eng_model_release(&m);
	return cycles;
}

static uint64_t dma_latency(uint32_t rows, uint32_t cols, Kb__DType dt)
{
	struct rt_config cfg = test_config();
	Kb__View in = view(rows, cols, dt, false), out = in;
	Kb__View *ins[] = { &in };
	Kb__Stage s = KB__STAGE__INIT;

	in.space = KB__SPACE__SPACE_HBM;
	s.engine = KB__ENGINE__ENGINE_DMA_READ;
	s.op_kind = k_memory;
	s.op_name = k_dma_read;
	s.n_in = 1;
	s.in = ins;
	s.out = &out;
	return latency(ENG_DMA, "linear", &cfg, &s);
}

Test(dma_model, linear_latency_matches_hand_formula, .timeout = 10)
{
	/* 3 x 100 f16 = 600 B: 10 + ceil(600 / 64) = 10 + 10 */
	cr_assert_eq(dma_latency(3, 100, KB__DTYPE__DTYPE_F16), 20);
	/* 4 x 16 f32 = 256 B: 10 + 4 exactly */
	cr_assert_eq(dma_latency(4, 16, KB__DTYPE__DTYPE_F32), 14);
	/* 1 x 1 bf16 = 2 B: 10 + 1 */
	cr_assert_eq(dma_latency(1, 1, KB__DTYPE__DTYPE_BF16), 11);
}

/* A GEMM stage of logical M x K x N (f16 in, f32 out), B stored
 * transposed when trans_b. */
struct gemm_case {
	Kb__View a, b, out, acc;
	Kb__View *ins[2];
	Kb__Stage s;
};

static void gemm_case_init(struct gemm_case *g, uint32_t m, uint32_t k,
			   uint32_t n, bool trans_b)
{
	Kb__Stage s = KB__STAGE__INIT;

	g->a = view(m, k, KB__DTYPE__DTYPE_F16, false);
	g->b = trans_b ? view(n, k, KB__DTYPE__DTYPE_F16, true)
		       : view(k, n, KB__DTYPE__DTYPE_F16, false);
	g->out = view(m, n, KB__DTYPE__DTYPE_F32, false);
	g->acc = view(m, n, KB__DTYPE__DTYPE_F32, false);
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

Test(gemm_model, systolic_latency_matches_hand_formula, .timeout = 10)
{
	struct rt_config cfg = test_config();
	struct gemm_case g;

	/* folds = ceil(70/32) * ceil(33/32) = 3 * 2; each 2*32 + 32 + 10 - 2 */
	gemm_case_init(&g, 10, 70, 33, false);
	cr_assert_eq(latency(ENG_GEMM, "systolic", &cfg, &g.s), 5 + 6 * 104);
	/* one fold: 5 + (64 + 32 + 64 - 2); B transposed, same logical dims */
	gemm_case_init(&g, 64, 32, 32, true);
	cr_assert_eq(latency(ENG_GEMM, "systolic", &cfg, &g.s), 163);
	/* a 16 x 8 array: ceil(32/16) * ceil(40/8) = 10 folds of 32 + 8 + 1 */
	cfg.gemm_array_rows = 16;
	cfg.gemm_array_cols = 8;
	gemm_case_init(&g, 3, 32, 40, false);
	cr_assert_eq(latency(ENG_GEMM, "systolic", &cfg, &g.s), 5 + 10 * 41);
}

/* The fold timeline phase by phase (independent of the model's closed
 * form): each fold loads its weights (R cycles), skews (R - 1), streams
 * the T rows and drains (C - 1). Double-buffered, the next fold's load
 * runs during the current fold's skew/stream/drain and the next fold
 * starts when both are done. */
static uint64_t fold_timeline(uint64_t setup, uint64_t R, uint64_t C,
			      uint64_t T, uint64_t K, uint64_t N, bool db)
{
	uint64_t folds = ((K + R - 1) / R) * ((N + C - 1) / C);
	uint64_t t = setup, loaded = setup + R; /* first weights in place */

	for (uint64_t f = 0; f < folds; f++) {
		uint64_t start = db ? (t > loaded ? t : loaded) : t + R;
		uint64_t end = start + (R - 1) + T + (C - 1);

		if (db)
			loaded = start + R; /* next fold's weights, behind this one */
		t = end;
	}
	return t;
}

Test(gemm_model, systolic_stage_cycles_equal_the_fold_formula, .timeout = 10)
{
	static const uint32_t T[] = { 1, 8, 128, 300 };
	/* K and N multiples of the array and not, on 128x128 and 32x48 */
	static const uint32_t KN[][2] = { { 128, 128 }, { 200, 130 },
					  { 77, 300 }, { 1, 1 } };
	static const uint32_t arr[][2] = { { 128, 128 }, { 32, 48 } };

	for (int db = 0; db <= 1; db++)
		for (size_t a = 0; a < 2; a++)
			for (size_t t = 0; t < 4; t++)
				for (size_t x = 0; x < 4; x++) {
					struct rt_config cfg = test_config();
					struct gemm_case g;
					uint64_t want;

					cfg.gemm_array_rows = arr[a][0];
					cfg.gemm_array_cols = arr[a][1];
					cfg.gemm_setup_cycles = 16;
					cfg.gemm_weight_double_buffer = (uint32_t)db;
					gemm_case_init(&g, T[t], KN[x][0], KN[x][1], false);
					want = fold_timeline(16, arr[a][0], arr[a][1], T[t],
							     KN[x][0], KN[x][1], db);
					cr_assert_eq(latency(ENG_GEMM, "systolic", &cfg, &g.s),
						     want, "T=%u K=%u N=%u on %ux%u db=%d",
						     T[t], KN[x][0], KN[x][1], arr[a][0],
						     arr[a][1], db);
				}
	/* the figures: 128^3 is 510 + 16, decode T = 8 is 390 + 16 */
	{
		struct rt_config cfg = test_config();
		struct gemm_case g;

		cfg.gemm_array_rows = cfg.gemm_array_cols = 128;
		cfg.gemm_setup_cycles = 16;
		gemm_case_init(&g, 128, 128, 128, false);
		cr_assert_eq(latency(ENG_GEMM, "systolic", &cfg, &g.s), 16 + 510);
		gemm_case_init(&g, 8, 128, 128, false);
		cr_assert_eq(latency(ENG_GEMM, "systolic", &cfg, &g.s), 16 + 390);
	}
}

Test(gemm_model, roofline_latency_matches_hand_formula, .timeout = 10)
{
	struct rt_config cfg = test_config();
	struct gemm_case g;

	/* 16x32x16: MACs 8192 / 256 = 32; bytes 1024 + 1024 + 1024 (f32
	 * out) = 3072 / 64 = 48 -> memory bound: 3 + 48 */
	cfg.gemm_setup_cycles = 3;
	gemm_case_init(&g, 16, 32, 16, false);
	cr_assert_eq(latency(ENG_GEMM, "roofline", &cfg, &g.s), 51);
	/* compute bound at 16 MACs/cycle: ceil(8192 / 16) = 512 */
	cfg.gemm_macs_per_cycle = 16;
	cr_assert_eq(latency(ENG_GEMM, "roofline", &cfg, &g.s), 515);
	/* ceil rounding: 7x9x5 = 315 MACs / 16 -> 20; bytes 126 + 90 + 140 =
	 * 356 / 64 -> 6 */
	gemm_case_init(&g, 7, 9, 5, false);
	cr_assert_eq(latency(ENG_GEMM, "roofline", &cfg, &g.s), 23);
	/* accumulating, not last: out is not written and not counted:
	 * bytes 2048 / 64 = 32, MACs 8192 / 256 = 32 */
	cfg.gemm_macs_per_cycle = 256;
	gemm_case_init(&g, 16, 32, 16, false);
	g.s.acc = &g.acc;
	g.s.first = true;
	cr_assert_eq(eng_stage_bytes(&g.s), 2048);
	cr_assert_eq(latency(ENG_GEMM, "roofline", &cfg, &g.s), 35);
}

static uint64_t math_latency(const char *op, uint32_t rows, uint32_t cols,
			     int64_t axis)
{
	struct rt_config cfg = test_config();
	Kb__View a = view(rows, cols, KB__DTYPE__DTYPE_F16, false);
	Kb__View b = a, out = a;
	Kb__View *ins[] = { &a, &b };
	Kb__Extra e = KB__EXTRA__INIT;
	Kb__Extra *extras[] = { &e };
	Kb__Stage s = KB__STAGE__INIT;
	const struct rt_isa_op *kind;
	char name[32];

	cr_assert_eq(eng_math_op_find(op, &kind), RT_EOK);
	s.engine = KB__ENGINE__ENGINE_MATH;
	s.op_kind = k_math;
	snprintf(name, sizeof(name), "%s", op);
	s.op_name = name;
	s.n_in = kind->arity;
	s.in = ins;
	s.out = &out;
	e.name = axis >= 0 ? k_axis : k_scale;
	e.value_case = KB__EXTRA__VALUE_I;
	e.i = axis >= 0 ? axis : 2;
	s.n_extras = 1;
	s.extras = extras;
	if (kind->shape == RT_ISA_SHAPE_REDUCE)
		out = axis == 0 ? view(1, cols, KB__DTYPE__DTYPE_F32, false)
				: view(rows, 1, KB__DTYPE__DTYPE_F32, false);
	return latency(ENG_MATH, "simd", &cfg, &s);
}

Test(math_model, simd_latency_matches_hand_formula, .timeout = 10)
{
	/* 3 x 20 = 60 elements -> ceil(60 / 16) = 4 cycle groups; setup 4 */
	cr_assert_eq(math_latency("add", 3, 20, -1), 4 + 4 * 1);
	cr_assert_eq(math_latency("scale", 3, 20, -1), 4 + 4 * 1);
	cr_assert_eq(math_latency("exp", 3, 20, -1), 4 + 4 * 4);
	cr_assert_eq(math_latency("exp_diff", 3, 20, -1), 4 + 4 * 4);
	/* fused softmax = its parts: rmax + exp_diff + rsum + div, each a
	 * stage of its own with setup */
	cr_assert_eq(math_latency("softmax", 3, 20, -1),
		     math_latency("rmax", 3, 20, 1) +
		     math_latency("exp_diff", 3, 20, -1) +
		     math_latency("rsum", 3, 20, 1) +
		     math_latency("div", 3, 20, -1));
	cr_assert_eq(math_latency("softmax", 3, 20, -1),
		     (4 + 4 * 2) + (4 + 4 * 4) + (4 + 4 * 2) + (4 + 4 * 1));
	/* reductions count input elements, whichever axis */
	cr_assert_eq(math_latency("rsum", 3, 20, 1), 4 + 4 * 2);
	cr_assert_eq(math_latency("rmax", 3, 20, 0), 4 + 4 * 2);
	/* exact multiple: 2 x 16 = 32 -> 2 */
	cr_assert_eq(math_latency("copy", 2, 16, -1), 4 + 2);
}

Test(engine_model, unknown_name_is_a_clear_error, .timeout = 10)
{
	const struct eng_model_ops *ops;
	void *dl;

	cr_assert_eq(eng_model_find(ENG_GEMM, "tpu", &ops, &dl), RT_ENOTFOUND);
	cr_assert(strstr(rt_last_error(), "gemm model 'tpu'"), "%s",
		  rt_last_error());
	/* a built-in of another class is not found either */
	cr_assert_eq(eng_model_find(ENG_MATH, "systolic", &ops, &dl),
		     RT_ENOTFOUND);
	cr_assert_eq(eng_model_find(ENG_GEMM, "/nonexistent/x.so", &ops, &dl),
		     RT_ENOTFOUND);
	cr_assert(strstr(rt_last_error(), "/nonexistent/x.so"), "%s",
		  rt_last_error());
	cr_assert_eq(eng_model_find(ENG_GEMM, "roofline", &ops, &dl), RT_EOK);
	cr_assert_eq(ops, &eng_gemm_roofline_model);
	cr_assert_null(dl);
}

Test(engine_model, zero_rates_are_rejected_at_init, .timeout = 10)
{
	struct rt_config cfg = test_config();
	struct eng_model m;

	cfg.math_lanes = 0;
	cfg.gemm_array_rows = 0;
	cfg.dma_bytes_per_cycle = 0;
	cr_assert_eq(eng_model_init(&m, ENG_MATH, "simd", &cfg), RT_ECONFIG);
	cr_assert_null(m.ops);
	cr_assert_eq(eng_model_init(&m, ENG_GEMM, "systolic", &cfg),
		     RT_ECONFIG);
	cr_assert_eq(eng_model_init(&m, ENG_DMA, "linear", &cfg), RT_ECONFIG);
	cr_assert(strstr(rt_last_error(), "dma.bytes_per_cycle"));
}

static void plugin_path(char *path, size_t cap)
{
	const char *dir = getenv("KB_PLUGINS");

	snprintf(path, cap, "%s/gemm_fixed.so", dir ? dir : "build/plugins");
}

/* Runs stage `s` (16x32x16 f16 -> f32 in `tcm`) with model `m`. */
static void run_gemm(struct eng_model *m, Kb__Stage *s, uint8_t *tcm)
{
	struct eng_memory mem = { NULL, 0, tcm, 1 << 16 };

	for (int i = 0; i < 1 << 12; i++)
		tcm[i] = (uint8_t)(i * 37 % 61 == 0 ? 0x3c : i % 7);
	cr_assert_eq(eng_model_execute(m, s, &mem), RT_EOK, "%s",
		     rt_last_error());
}

Test(engine_plugin, gemm_fixed_changes_gemm_latency_only, .timeout = 10)
{
	struct rt_config cfg = test_config();
	struct eng_model fixed, sys;
	const struct eng_model_ops *ops;
	struct gemm_case g;
	uint8_t *mem_a = calloc(1, 1 << 16), *mem_b = calloc(1, 1 << 16);
	uint64_t c_fixed, c_sys;
	char path[1024];
	void *dl;

	plugin_path(path, sizeof(path));
	cr_assert_eq(eng_model_init(&fixed, ENG_GEMM, path, &cfg), RT_EOK,
		     "%s (build the plug-ins, set KB_PLUGINS)", rt_last_error());
	cr_assert_str_eq(fixed.ops->name, "gemm_fixed");
	cr_assert_eq(eng_model_init(&sys, ENG_GEMM, "systolic", &cfg), RT_EOK);
	gemm_case_init(&g, 16, 32, 16, false);
	g.a.addr = 0;
	g.b.addr = 1024;
	g.out.addr = 2048;
	cr_assert_eq(eng_model_latency(&fixed, &g.s, NULL, &c_fixed), RT_EOK);
	cr_assert_eq(eng_model_latency(&sys, &g.s, NULL, &c_sys), RT_EOK);
	cr_assert_eq(c_fixed, 1000);
	cr_assert_eq(c_sys, 5 + 1 * (2 * 32 + 32 + 16 - 2)); /* one fold */
	/* same data effect, byte for byte */
	run_gemm(&fixed, &g.s, mem_a);
	run_gemm(&sys, &g.s, mem_b);
	cr_assert_eq(memcmp(mem_a, mem_b, 1 << 16), 0);
	/* constant whatever the shape */
	gemm_case_init(&g, 3, 5, 7, false);
	cr_assert_eq(eng_model_latency(&fixed, &g.s, NULL, &c_fixed), RT_EOK);
	cr_assert_eq(c_fixed, 1000);
	/* it is a GEMM model: other engines refuse it */
	cr_assert_eq(eng_model_find(ENG_MATH, path, &ops, &dl), RT_ECONFIG);
	cr_assert(strstr(rt_last_error(), "models a gemm engine"), "%s",
		  rt_last_error());
	eng_model_release(&fixed);
	eng_model_release(&sys);
	cr_assert_null(fixed.ops);
	free(mem_a);
	free(mem_b);
}

/* ---------------------------------------------------------------- DMA queues */

/* A transfer's rows go to min(queues, ceil(rows / rows_per_queue)) queues
 * in pieces as even as the rows allow: the largest has ceil(rows / lanes). */
Test(dma_queues, rows_are_spread_over_the_queues_as_evenly_as_they_allow, .timeout = 10)
{
	static const struct { uint32_t queues, per; uint64_t rows, lanes, piece; } c[] = {
		{ 1, 1, 128, 1, 128 },  { 16, 8, 128, 16, 8 }, { 16, 8, 8, 1, 8 },
		{ 16, 8, 9, 2, 5 },     { 16, 8, 1024, 16, 64 }, { 16, 8, 1, 1, 1 },
		{ 3, 8, 40, 3, 14 },    { 64, 1, 100, 64, 2 },  { 5, 3, 14, 5, 3 },
	};
	struct rt_config cfg = test_config();

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t piece = 0;

		cfg.dma_queues = c[i].queues;
		cfg.dma_rows_per_queue = c[i].per;
		cr_expect_eq(eng_dma_lanes(&cfg, c[i].rows, &piece), c[i].lanes,
			     "%llu rows, %u queues of >= %u", (unsigned long long)c[i].rows,
			     c[i].queues, c[i].per);
		cr_expect_eq(piece, c[i].piece, "%llu rows: largest piece",
			     (unsigned long long)c[i].rows);
	}
}

/* Finished transfers of the shared model, in order. */
struct done_log {
	uint64_t token[4], end_ps[4];
	unsigned n;
};

static void log_done(void *arg, uint64_t token, uint64_t end_ps)
{
	struct done_log *l = arg;

	if (l->n < 4) {
		l->token[l->n] = token;
		l->end_ps[l->n] = end_ps;
	}
	l->n++;
}

/* The shared model shares the HBM per lane: transfer A on 4 lanes (100
 * bytes each) and B on 1 lane (50 bytes), b = 10, B = 25 B/cycle, 1 ns
 * cycles. Five busy lanes get 5 B/cycle each: B is through at 10 cycles;
 * then A's four lanes get min(10, 25 / 4) = 6.25 and A's last 50 bytes per
 * lane take 8 cycles more: 18 cycles. */
Test(dma_queues, shared_hbm_gives_each_busy_lane_its_fair_share, .timeout = 10)
{
	struct rt_config cfg = test_config();
	const struct eng_hbm_ops *ops = &eng_hbm_shared_model;
	struct eng_hbm_access a = { .token = 1, .stream = 0, .bytes = 400, .lanes = 4,
				    .lane_bytes = 100 };
	struct eng_hbm_access b = { .token = 2, .stream = 3, .bytes = 50, .lanes = 1,
				    .lane_bytes = 50 };
	struct done_log log = { .n = 0 };
	void *state;

	cfg.pes = 2;
	cfg.clock_mhz = 1000;
	cfg.dma_bytes_per_cycle = 10;
	cfg.hbm_bytes_per_cycle = 25;
	state = calloc(1, ops->state_size);
	cr_assert_eq(ops->init(state, &cfg), RT_EOK);
	cr_assert_eq(ops->retire(state, 0, log_done, &log), RT_EOK);
	cr_assert_eq(ops->submit(state, 0, &a), RT_EOK);
	cr_assert_eq(ops->submit(state, 0, &b), RT_EOK);
	cr_expect_eq(ops->next_done(state), 10000);
	cr_assert_eq(ops->retire(state, 10000, log_done, &log), RT_EOK);
	cr_expect_eq(ops->next_done(state), 18000);
	cr_assert_eq(ops->retire(state, 18000, log_done, &log), RT_EOK);
	cr_assert_eq(log.n, 2);
	cr_expect_eq(log.token[0], 2);
	cr_expect_eq(log.end_ps[0], 10000);
	cr_expect_eq(log.token[1], 1);
	cr_expect_eq(log.end_ps[1], 18000);
	cr_expect_eq(ops->next_done(state), UINT64_MAX);
	ops->fini(state);
	free(state);
}

/* NKI's DMA guide ("Introduction to Direct Memory Access (DMA) with NKI",
 * Example 1) documents one DMA engine moving 32 KiB in 1416 ns, 1205 ns of
 * them at its 27.2 GB/s: 211 ns fixed. The default machine (trn2) takes
 * that fixed part as dma.setup_cycles + hbm.latency_cycles at 1 GHz and
 * 27 B/cycle per queue, so its linear model reproduces the documented
 * transfer within 1 % (27 against 27.2 B/ns); a transfer of 8 rows or
 * fewer is one engine's ("eight SBUF partitions per engine"), and one of
 * 128 rows is spread over the 16 engines, each moving 8 of them. */
static uint64_t default_dma_latency(uint32_t rows, uint32_t cols)
{
	struct rt_config cfg;
	Kb__View in = view(rows, cols, KB__DTYPE__DTYPE_F16, false), out = in;
	Kb__View *ins[] = { &in };
	Kb__Stage s = KB__STAGE__INIT;

	rt_config_defaults(&cfg);
	in.space = KB__SPACE__SPACE_HBM;
	s.engine = KB__ENGINE__ENGINE_DMA_READ;
	s.op_kind = k_memory;
	s.op_name = k_dma_read;
	s.n_in = 1;
	s.in = ins;
	s.out = &out;
	return latency(ENG_DMA, "linear", &cfg, &s);
}

Test(dma_model, the_default_machine_reproduces_nki_dma_example_1, .timeout = 10)
{
	struct rt_config cfg;
	const double documented_ns = 1416.0, fixed_ns = 1416.0 - 32768.0 / 27.2;
	uint64_t one, spread, piece = 0;
	double total;

	rt_config_defaults(&cfg);
	cr_assert_eq(cfg.clock_mhz, 1000); /* cycles are ns */
	cr_expect_eq((double)(cfg.dma_setup_cycles + cfg.hbm_latency_cycles), round(fixed_ns),
		     "fixed cost %llu + %llu ns, documented %.1f",
		     (unsigned long long)cfg.dma_setup_cycles,
		     (unsigned long long)cfg.hbm_latency_cycles, fixed_ns);
	/* 32 KiB in 8 rows of 4 KiB: one engine */
	cr_assert_eq(eng_dma_lanes(&cfg, 8, &piece), 1);
	one = default_dma_latency(8, 2048);
	cr_expect_eq(one, cfg.dma_setup_cycles + (32768 + 26) / 27);
	total = (double)(one + cfg.hbm_latency_cycles);
	cr_expect(fabs(total - documented_ns) <= 0.01 * documented_ns,
		  "one engine: %.0f ns for 32 KiB, documented %.0f", total, documented_ns);
	/* the same 32 KiB in 128 rows: 16 engines of 8 rows (2 KiB) each; the
	 * channel times the piece one queue moves (engines/src/component.c) */
	cr_assert_eq(eng_dma_lanes(&cfg, 128, &piece), 16);
	cr_assert_eq(piece, 8);
	spread = default_dma_latency((uint32_t)piece, 128);
	cr_expect_eq(spread, cfg.dma_setup_cycles + (2048 + 26) / 27);
	cr_expect_lt(spread, one / 4, "16 engines move it over 4x faster");
}
