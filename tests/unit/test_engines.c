/* test_engines.c — engine data kernels against fp64 references computed
 * here: DMA copies, GEMM (f16/bf16 in, f32/f16/bf16 out, trans B, two-pass
 * accumulation), every MATH op with broadcasting and reductions, and bounds
 * checks that reject a stray address before touching memory. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "rt/half.h"

#define TCM_SIZE (1u << 16)
#define HBM_SIZE (1u << 16)

static char k_memory[] = "memory", k_dma_read[] = "dma_read",
	    k_gemm[] = "gemm", k_math[] = "math", k_axis[] = "axis",
	    k_scale[] = "scale";

/* Test memory with a bump allocator over TCM. */
struct tmem {
	struct eng_memory mem;
	uint64_t cursor;
};

static void tmem_init(struct tmem *t)
{
	t->mem.tcm = calloc(1, TCM_SIZE);
	t->mem.tcm_size = TCM_SIZE;
	t->mem.hbm = calloc(1, HBM_SIZE);
	t->mem.hbm_size = HBM_SIZE;
	t->cursor = 64;
	cr_assert(t->mem.tcm && t->mem.hbm);
}

static void tmem_release(struct tmem *t)
{
	free(t->mem.tcm);
	free(t->mem.hbm);
}

/* A fresh TCM view of stored dims rows x cols (row padding of 6 bytes so
 * strides are exercised). */
static Kb__View tview(struct tmem *t, uint32_t rows, uint32_t cols,
		      Kb__DType dt, bool trans)
{
	Kb__View v = KB__VIEW__INIT;

	v.space = KB__SPACE__SPACE_TCM;
	v.rows = rows;
	v.cols = cols;
	v.dtype = dt;
	v.trans = trans;
	v.row_stride = (uint64_t)cols * rt_dtype_bytes(dt) + 8;
	v.addr = t->cursor;
	t->cursor += v.row_stride * rows + 16;
	cr_assert(t->cursor <= TCM_SIZE);
	return v;
}

static uint8_t *base_of(struct tmem *t, const Kb__View *v)
{
	return v->space == KB__SPACE__SPACE_TCM ? t->mem.tcm : t->mem.hbm;
}

/* Stored element (logical r, c), independent of the engine's code. */
static uint8_t *elem(struct tmem *t, const Kb__View *v, uint32_t r,
		     uint32_t c)
{
	uint32_t sr = v->trans ? c : r, sc = v->trans ? r : c;

	return base_of(t, v) + v->addr + sr * v->row_stride
	       + sc * rt_dtype_bytes(v->dtype);
}

static double get(struct tmem *t, const Kb__View *v, uint32_t r, uint32_t c)
{
	uint8_t *p = elem(t, v, r, c);
	uint16_t h;
	float f;

	if (v->dtype == KB__DTYPE__DTYPE_F32) {
		memcpy(&f, p, 4);
		return f;
	}
	memcpy(&h, p, 2);
	return v->dtype == KB__DTYPE__DTYPE_F16 ? rt_f16_to_f32(h)
						: rt_bf16_to_f32(h);
}

static void put(struct tmem *t, const Kb__View *v, uint32_t r, uint32_t c,
		double x)
{
	uint8_t *p = elem(t, v, r, c);
	uint16_t h;
	float f = (float)x;

	if (v->dtype == KB__DTYPE__DTYPE_F32) {
		memcpy(p, &f, 4);
		return;
	}
	h = v->dtype == KB__DTYPE__DTYPE_F16 ? rt_f32_to_f16(f)
					     : rt_f32_to_bf16(f);
	memcpy(p, &h, 2);
}

/* Fills v's logical matrix with deterministic values in [lo, hi). */
static void fill(struct tmem *t, const Kb__View *v, uint32_t seed, double lo,
		 double hi)
{
	uint32_t rows, cols, x = seed * 2654435761u + 1;

	eng_view_dims(v, &rows, &cols);
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t c = 0; c < cols; c++) {
			x = x * 1664525u + 1013904223u;
			put(t, v, r, c, lo + (hi - lo) * (x >> 8) / 16777216.0);
		}
}

/* |got - ref| within the output dtype's tolerance. */
static void assert_close(double got, double ref, Kb__DType out, uint32_t r,
			 uint32_t c)
{
	double rel = out == KB__DTYPE__DTYPE_F32   ? 1e-5
		     : out == KB__DTYPE__DTYPE_F16 ? 0x1p-10
						   : 0x1p-7;
	double abs = out == KB__DTYPE__DTYPE_F32   ? 1e-5
		     : out == KB__DTYPE__DTYPE_F16 ? 1e-3
						   : 1e-2;

	cr_assert(fabs(got - ref) <= rel * fabs(ref) + abs,
		  "(%u, %u): got %.9g, reference %.9g", r, c, got, ref);
}

/* ---------------------------------------------------------------- GEMM */

static void gemm_stage(Kb__Stage *s, Kb__View **ins, Kb__View *a,
		       Kb__View *b, Kb__View *out)
{
	Kb__Stage init = KB__STAGE__INIT;

	*s = init;
	ins[0] = a;
	ins[1] = b;
	s->engine = KB__ENGINE__ENGINE_GEMM;
	s->op_kind = k_gemm;
	s->op_name = k_gemm;
	s->command = 7;
	s->n_in = 2;
	s->in = ins;
	s->out = out;
}

/* out = A·B for logical M x K x N, checked against fp64. */
static void check_gemm(Kb__DType in_dt, Kb__DType out_dt, bool trans_a,
		       bool trans_b)
{
	enum { M = 9, K = 40, N = 11 };
	struct tmem t;
	Kb__View a, b, out, *ins[2];
	Kb__Stage s;

	tmem_init(&t);
	a = trans_a ? tview(&t, K, M, in_dt, true) : tview(&t, M, K, in_dt, false);
	b = trans_b ? tview(&t, N, K, in_dt, true) : tview(&t, K, N, in_dt, false);
	out = tview(&t, M, N, out_dt, false);
	fill(&t, &a, 1, -1, 1);
	fill(&t, &b, 2, -1, 1);
	gemm_stage(&s, ins, &a, &b, &out);
	cr_assert_eq(eng_gemm_run(&s, &t.mem), RT_EOK, "%s", rt_last_error());
	for (uint32_t i = 0; i < M; i++)
		for (uint32_t j = 0; j < N; j++) {
			double ref = 0;

			for (uint32_t p = 0; p < K; p++)
				ref += get(&t, &a, i, p) * get(&t, &b, p, j);
			assert_close(get(&t, &out, i, j), ref, out_dt, i, j);
		}
	tmem_release(&t);
}

Test(gemm_data, f16_in_f32_out_matches_fp64, .timeout = 10)
{
	check_gemm(KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32, false, false);
}

Test(gemm_data, f16_in_f16_out_matches_fp64, .timeout = 10)
{
	check_gemm(KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F16, false, false);
}

Test(gemm_data, bf16_in_f32_out_matches_fp64, .timeout = 10)
{
	check_gemm(KB__DTYPE__DTYPE_BF16, KB__DTYPE__DTYPE_F32, false, false);
}

Test(gemm_data, bf16_in_bf16_and_f16_out_match_fp64, .timeout = 10)
{
	check_gemm(KB__DTYPE__DTYPE_BF16, KB__DTYPE__DTYPE_BF16, false, false);
	check_gemm(KB__DTYPE__DTYPE_BF16, KB__DTYPE__DTYPE_F16, false, false);
}

Test(gemm_data, transposed_operands_match_fp64, .timeout = 10)
{
	check_gemm(KB__DTYPE__DTYPE_F16, KB__DTYPE__DTYPE_F32, false, true);
	check_gemm(KB__DTYPE__DTYPE_BF16, KB__DTYPE__DTYPE_F16, true, true);
}

/* Logical sub-view rows [r0, r0+rows) x cols [c0, c0+cols) of a stored,
 * untransposed view. */
static Kb__View sub(const Kb__View *v, uint32_t r0, uint32_t c0,
		    uint32_t rows, uint32_t cols)
{
	Kb__View s = *v;

	s.addr = v->addr + r0 * v->row_stride + c0 * rt_dtype_bytes(v->dtype);
	s.rows = rows;
	s.cols = cols;
	return s;
}

Test(gemm_data, two_k_passes_accumulate_in_f32, .timeout = 10)
{
	enum { M = 8, K = 64, N = 12, KH = K / 2 };
	struct tmem t;
	Kb__View a, b, out, acc, a0, a1, b0, b1, *ins[2];
	Kb__Stage s;

	tmem_init(&t);
	a = tview(&t, M, K, KB__DTYPE__DTYPE_F16, false);
	b = tview(&t, K, N, KB__DTYPE__DTYPE_F16, false);
	out = tview(&t, M, N, KB__DTYPE__DTYPE_F16, false);
	acc = tview(&t, M, N, KB__DTYPE__DTYPE_F32, false);
	fill(&t, &a, 3, -2, 2);
	fill(&t, &b, 4, -1, 1);
	fill(&t, &acc, 5, 100, 200); /* garbage `first` must ignore */
	fill(&t, &out, 6, 7, 8);     /* sentinel until `last` */
	a0 = sub(&a, 0, 0, M, KH);
	a1 = sub(&a, 0, KH, M, KH);
	b0 = sub(&b, 0, 0, KH, N);
	b1 = sub(&b, KH, 0, KH, N);
	gemm_stage(&s, ins, &a0, &b0, &out);
	s.acc = &acc;
	s.first = true;
	cr_assert_eq(eng_gemm_run(&s, &t.mem), RT_EOK, "%s", rt_last_error());
	for (uint32_t i = 0; i < M; i++)
		for (uint32_t j = 0; j < N; j++)
			cr_assert(get(&t, &out, i, j) >= 7
				  && get(&t, &out, i, j) < 8,
				  "out written before the last pass");
	gemm_stage(&s, ins, &a1, &b1, &out);
	s.acc = &acc;
	s.last = true;
	cr_assert_eq(eng_gemm_run(&s, &t.mem), RT_EOK, "%s", rt_last_error());
	for (uint32_t i = 0; i < M; i++)
		for (uint32_t j = 0; j < N; j++) {
			double ref = 0;

			for (uint32_t p = 0; p < K; p++)
				ref += get(&t, &a, i, p) * get(&t, &b, p, j);
			assert_close(get(&t, &acc, i, j), ref,
				     KB__DTYPE__DTYPE_F32, i, j);
			assert_close(get(&t, &out, i, j), ref,
				     KB__DTYPE__DTYPE_F16, i, j);
		}
	tmem_release(&t);
}

Test(gemm_data, mismatched_inner_dims_are_rejected, .timeout = 10)
{
	struct tmem t;
	Kb__View a, b, out, *ins[2];
	Kb__Stage s;

	tmem_init(&t);
	a = tview(&t, 4, 8, KB__DTYPE__DTYPE_F16, false);
	b = tview(&t, 9, 4, KB__DTYPE__DTYPE_F16, false);
	out = tview(&t, 4, 4, KB__DTYPE__DTYPE_F32, false);
	gemm_stage(&s, ins, &a, &b, &out);
	cr_assert_eq(eng_gemm_run(&s, &t.mem), RT_EINVAL);
	cr_assert(strstr(rt_last_error(), "inner dims"), "%s", rt_last_error());
	tmem_release(&t);
}

/* ---------------------------------------------------------------- MATH */

/* One MATH case: inputs of the given logical dims (f16), out of out dims. */
struct math_case {
	struct tmem t;
	Kb__View in[3], out, *ins[3];
	Kb__Extra extra;
	Kb__Extra *extras[1];
	Kb__Stage s;
	char name[32];
};

static void math_case_init(struct math_case *m, const char *op,
			   const uint32_t (*dims)[2], unsigned n_in,
			   uint32_t out_rows, uint32_t out_cols,
			   Kb__DType out_dt)
{
	Kb__Stage init = KB__STAGE__INIT;
	Kb__Extra einit = KB__EXTRA__INIT;

	tmem_init(&m->t);
	for (unsigned i = 0; i < n_in; i++) {
		m->in[i] = tview(&m->t, dims[i][0], dims[i][1],
				 KB__DTYPE__DTYPE_F16, false);
		fill(&m->t, &m->in[i], 10 + i, i == 1 ? 0.5 : -2, 2);
		m->ins[i] = &m->in[i];
	}
	m->out = tview(&m->t, out_rows, out_cols, out_dt, false);
	m->s = init;
	m->extra = einit;
	snprintf(m->name, sizeof(m->name), "%s", op);
	m->s.engine = KB__ENGINE__ENGINE_MATH;
	m->s.op_kind = k_math;
	m->s.op_name = m->name;
	m->s.command = 42;
	m->s.index = 3;
	m->s.n_in = n_in;
	m->s.in = m->ins;
	m->s.out = &m->out;
	m->extras[0] = &m->extra;
}

static void set_extra(struct math_case *m, char *name, bool is_int, double v)
{
	m->extra.name = name;
	m->extra.value_case = is_int ? KB__EXTRA__VALUE_I : KB__EXTRA__VALUE_F;
	if (is_int)
		m->extra.i = (int64_t)v;
	else
		m->extra.f = v;
	m->s.n_extras = 1;
	m->s.extras = m->extras;
}

/* Broadcast read of input i at output position (r, c). */
static double in_at(struct math_case *m, unsigned i, uint32_t r, uint32_t c)
{
	const Kb__View *v = &m->in[i];

	return get(&m->t, v, v->rows == 1 ? 0 : r, v->cols == 1 ? 0 : c);
}

static double ref_elementwise(struct math_case *m, uint32_t r, uint32_t c)
{
	const char *op = m->name;
	double a = in_at(m, 0, r, c);
	double b = m->s.n_in > 1 ? in_at(m, 1, r, c) : 0;

	if (!strcmp(op, "copy"))
		return a;
	if (!strcmp(op, "exp"))
		return exp(a);
	if (!strcmp(op, "scale"))
		return a * m->extra.f;
	if (!strcmp(op, "add"))
		return a + b;
	if (!strcmp(op, "sub"))
		return a - b;
	if (!strcmp(op, "mul") || !strcmp(op, "mul_bcast"))
		return a * b;
	if (!strcmp(op, "div"))
		return a / b;
	if (!strcmp(op, "max_elem"))
		return a > b ? a : b;
	if (!strcmp(op, "exp_diff"))
		return exp(a - b);
	if (!strcmp(op, "fma"))
		return a * b + in_at(m, 2, r, c);
	cr_assert_fail("no reference for %s", op);
	return 0;
}

static void run_and_check_elementwise(struct math_case *m)
{
	cr_assert_eq(eng_math_run(&m->s, &m->t.mem), RT_EOK, "%s",
		     rt_last_error());
	for (uint32_t r = 0; r < m->out.rows; r++)
		for (uint32_t c = 0; c < m->out.cols; c++)
			assert_close(get(&m->t, &m->out, r, c),
				     ref_elementwise(m, r, c), m->out.dtype,
				     r, c);
	tmem_release(&m->t);
}

static void check_unary(const char *op, Kb__DType out_dt)
{
	static const uint32_t dims[1][2] = { { 4, 8 } };
	struct math_case m;

	math_case_init(&m, op, dims, 1, 4, 8, out_dt);
	if (!strcmp(op, "scale"))
		set_extra(&m, k_scale, false, -0.125);
	run_and_check_elementwise(&m);
}

Test(math_data, unary_ops_match_fp64, .timeout = 10)
{
	check_unary("copy", KB__DTYPE__DTYPE_F32);
	check_unary("copy", KB__DTYPE__DTYPE_F16);
	check_unary("exp", KB__DTYPE__DTYPE_F32);
	check_unary("exp", KB__DTYPE__DTYPE_BF16);
	check_unary("scale", KB__DTYPE__DTYPE_F16);
}

/* Binary op with in1 of dims (r1, c1) broadcast against 4 x 8. */
static void check_binary(const char *op, uint32_t r1, uint32_t c1,
			 Kb__DType out_dt)
{
	uint32_t dims[2][2] = { { 4, 8 }, { r1, c1 } };
	struct math_case m;

	math_case_init(&m, op, (const uint32_t (*)[2])dims, 2, 4, 8, out_dt);
	run_and_check_elementwise(&m);
}

Test(math_data, binary_ops_match_fp64_with_broadcasting, .timeout = 10)
{
	static const char *const ops[] = { "add", "sub", "mul", "div",
					   "max_elem", "exp_diff",
					   "mul_bcast" };

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		check_binary(ops[i], 4, 8, KB__DTYPE__DTYPE_F32);
		check_binary(ops[i], 4, 1, KB__DTYPE__DTYPE_F32); /* G x 1 */
		check_binary(ops[i], 1, 8, KB__DTYPE__DTYPE_F16);
		check_binary(ops[i], 1, 1, KB__DTYPE__DTYPE_F16);
	}
}

Test(math_data, fma_matches_fp64_with_broadcasting, .timeout = 10)
{
	static const uint32_t dims[3][2] = { { 4, 8 }, { 4, 1 }, { 1, 8 } };
	struct math_case m;

	math_case_init(&m, "fma", dims, 3, 4, 8, KB__DTYPE__DTYPE_F32);
	run_and_check_elementwise(&m);
}

/* rmax / rsum of a 5 x 7 input along `axis`. */
static void check_reduce(const char *op, int axis)
{
	static const uint32_t dims[1][2] = { { 5, 7 } };
	uint32_t n_out = axis == 0 ? 7 : 5, n_red = axis == 0 ? 5 : 7;
	struct math_case m;

	math_case_init(&m, op, dims, 1, axis == 0 ? 1 : 5, axis == 0 ? 7 : 1,
		       KB__DTYPE__DTYPE_F32);
	set_extra(&m, k_axis, true, axis);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EOK, "%s",
		     rt_last_error());
	for (uint32_t o = 0; o < n_out; o++) {
		double ref = !strcmp(op, "rmax") ? -INFINITY : 0;

		for (uint32_t i = 0; i < n_red; i++) {
			double x = axis == 0 ? in_at(&m, 0, i, o)
					     : in_at(&m, 0, o, i);

			ref = !strcmp(op, "rmax") ? fmax(ref, x) : ref + x;
		}
		assert_close(axis == 0 ? get(&m.t, &m.out, 0, o)
				       : get(&m.t, &m.out, o, 0),
			     ref, KB__DTYPE__DTYPE_F32, o, (uint32_t)axis);
	}
	cr_assert_eq(eng_stage_elements(&m.s), 35);
	tmem_release(&m.t);
}

Test(math_data, reductions_along_both_axes_match_fp64, .timeout = 10)
{
	check_reduce("rmax", -1);
	check_reduce("rmax", 1);
	check_reduce("rmax", 0);
	check_reduce("rsum", -1);
	check_reduce("rsum", 0);
}

Test(math_data, softmax_matches_fp64, .timeout = 10)
{
	static const uint32_t dims[1][2] = { { 3, 16 } };
	struct math_case m;

	math_case_init(&m, "softmax", dims, 1, 3, 16, KB__DTYPE__DTYPE_F32);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EOK, "%s",
		     rt_last_error());
	for (uint32_t r = 0; r < 3; r++) {
		double sum = 0;

		for (uint32_t c = 0; c < 16; c++)
			sum += exp(in_at(&m, 0, r, c));
		for (uint32_t c = 0; c < 16; c++)
			assert_close(get(&m.t, &m.out, r, c),
				     exp(in_at(&m, 0, r, c)) / sum,
				     KB__DTYPE__DTYPE_F32, r, c);
	}
	tmem_release(&m.t);
}

Test(math_data, in_place_scale_reads_before_writing, .timeout = 10)
{
	static const uint32_t dims[1][2] = { { 2, 4 } };
	struct math_case m;
	double before[2][4];

	math_case_init(&m, "scale", dims, 1, 2, 4, KB__DTYPE__DTYPE_F16);
	m.out = m.in[0];
	set_extra(&m, k_scale, false, 2.0);
	for (uint32_t r = 0; r < 2; r++)
		for (uint32_t c = 0; c < 4; c++)
			before[r][c] = get(&m.t, &m.in[0], r, c);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EOK);
	for (uint32_t r = 0; r < 2; r++)
		for (uint32_t c = 0; c < 4; c++)
			cr_assert_eq(get(&m.t, &m.out, r, c), 2 * before[r][c]);
	tmem_release(&m.t);
}

Test(math_data, bad_shapes_and_names_are_rejected, .timeout = 10)
{
	static const uint32_t dims[2][2] = { { 4, 8 }, { 3, 8 } };
	struct math_case m;

	math_case_init(&m, "add", dims, 2, 4, 8, KB__DTYPE__DTYPE_F32);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EINVAL);
	cr_assert(strstr(rt_last_error(), "cannot broadcast"), "%s",
		  rt_last_error());
	snprintf(m.name, sizeof(m.name), "tanh");
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EINVAL);
	cr_assert(strstr(rt_last_error(), "unknown MATH op 'tanh'"), "%s",
		  rt_last_error());
	snprintf(m.name, sizeof(m.name), "rsum");
	m.s.n_in = 1;
	m.out.cols = 1;
	set_extra(&m, k_axis, true, 2);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EINVAL);
	cr_assert(strstr(rt_last_error(), "axis 2"), "%s", rt_last_error());
	tmem_release(&m.t);
}

/* ---------------------------------------------------------------- bounds */

Test(bounds, oob_input_is_rejected_naming_op_and_address, .timeout = 10)
{
	static const uint32_t dims[1][2] = { { 4, 8 } };
	struct math_case m;
	uint8_t *snapshot = malloc(TCM_SIZE);

	math_case_init(&m, "exp", dims, 1, 4, 8, KB__DTYPE__DTYPE_F16);
	m.in[0].addr = TCM_SIZE - 64; /* 4 rows of 24 bytes: past the end */
	memcpy(snapshot, m.t.mem.tcm, TCM_SIZE);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EOOB);
	cr_assert(strstr(rt_last_error(), "'exp'"), "%s", rt_last_error());
	cr_assert(strstr(rt_last_error(), "command 42"), "%s", rt_last_error());
	cr_assert(strstr(rt_last_error(), "TCM address 0xffc0"), "%s",
		  rt_last_error());
	cr_assert(strstr(rt_last_error(), "65536"), "%s", rt_last_error());
	cr_assert_eq(memcmp(snapshot, m.t.mem.tcm, TCM_SIZE), 0);
	free(snapshot);
	tmem_release(&m.t);
}

Test(bounds, oob_output_is_rejected_before_any_write, .timeout = 10)
{
	static const uint32_t dims[1][2] = { { 4, 8 } };
	struct math_case m;
	uint8_t *snapshot = malloc(TCM_SIZE);

	math_case_init(&m, "copy", dims, 1, 4, 8, KB__DTYPE__DTYPE_F32);
	m.out.row_stride = 1u << 15; /* last row lands past the end */
	memcpy(snapshot, m.t.mem.tcm, TCM_SIZE);
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EOOB);
	cr_assert(strstr(rt_last_error(), "out view"), "%s", rt_last_error());
	cr_assert_eq(memcmp(snapshot, m.t.mem.tcm, TCM_SIZE), 0);
	/* an address that would wrap 64-bit arithmetic is caught too */
	m.out.row_stride = 40;
	m.out.addr = UINT64_MAX - 8;
	cr_assert_eq(eng_math_run(&m.s, &m.t.mem), RT_EOOB);
	cr_assert(strstr(rt_last_error(), "0xfffffffffffffff7"), "%s",
		  rt_last_error());
	cr_assert_eq(memcmp(snapshot, m.t.mem.tcm, TCM_SIZE), 0);
	free(snapshot);
	tmem_release(&m.t);
}

Test(bounds, timing_mode_sizes_still_bound_views, .timeout = 10)
{
	static const uint32_t dims[1][2] = { { 4, 8 } };
	struct eng_memory sizes = { NULL, HBM_SIZE, NULL, 128 };
	struct math_case m;

	math_case_init(&m, "copy", dims, 1, 4, 8, KB__DTYPE__DTYPE_F32);
	cr_assert_eq(eng_stage_check(&m.s, ENG_MATH, &sizes), RT_EOOB);
	sizes.tcm_size = TCM_SIZE;
	cr_assert_eq(eng_stage_check(&m.s, ENG_MATH, &sizes), RT_EOK);
	/* a MATH stage is not a GEMM stage */
	cr_assert_eq(eng_stage_check(&m.s, ENG_GEMM, &sizes), RT_EINVAL);
	tmem_release(&m.t);
}

/* ---------------------------------------------------------------- DMA */

static void dma_stage(Kb__Stage *s, Kb__View **ins, Kb__View *in,
		      Kb__View *out)
{
	Kb__Stage init = KB__STAGE__INIT;

	*s = init;
	ins[0] = in;
	s->engine = KB__ENGINE__ENGINE_DMA_READ;
	s->op_kind = k_memory;
	s->op_name = k_dma_read;
	s->n_in = 1;
	s->in = ins;
	s->out = out;
}

Test(dma_data, read_copies_hbm_to_tcm_bit_exact, .timeout = 10)
{
	struct tmem t;
	Kb__View in = KB__VIEW__INIT, out, *ins[1];
	Kb__Stage s;

	tmem_init(&t);
	in.space = KB__SPACE__SPACE_HBM;
	in.addr = 1000;
	in.rows = 6;
	in.cols = 10;
	in.row_stride = 64;
	in.dtype = KB__DTYPE__DTYPE_BF16;
	out = tview(&t, 6, 10, KB__DTYPE__DTYPE_BF16, false);
	for (uint32_t i = 0; i < HBM_SIZE; i++)
		t.mem.hbm[i] = (uint8_t)(i * 131 + 7);
	dma_stage(&s, ins, &in, &out);
	cr_assert_eq(eng_dma_run(&s, &t.mem), RT_EOK, "%s", rt_last_error());
	for (uint32_t r = 0; r < 6; r++)
		cr_assert_eq(memcmp(elem(&t, &out, r, 0), elem(&t, &in, r, 0),
				    20), 0, "row %u", r);
	cr_assert_eq(eng_stage_bytes(&s), 120);
	cr_assert_eq(eng_stage_elements(&s), 60);
	tmem_release(&t);
}

Test(dma_data, transposed_converting_copy_matches, .timeout = 10)
{
	struct tmem t;
	Kb__View in, out, *ins[1];
	Kb__Stage s;

	tmem_init(&t);
	in = tview(&t, 5, 3, KB__DTYPE__DTYPE_F32, true); /* logical 3 x 5 */
	out = tview(&t, 3, 5, KB__DTYPE__DTYPE_F16, false);
	fill(&t, &in, 9, -4, 4);
	dma_stage(&s, ins, &in, &out);
	s.engine = KB__ENGINE__ENGINE_DMA_WRITE;
	cr_assert_eq(eng_dma_run(&s, &t.mem), RT_EOK, "%s", rt_last_error());
	for (uint32_t r = 0; r < 3; r++)
		for (uint32_t c = 0; c < 5; c++)
			assert_close(get(&t, &out, r, c), get(&t, &in, r, c),
				     KB__DTYPE__DTYPE_F16, r, c);
	/* a DMA stage addressed to GEMM is refused */
	s.engine = KB__ENGINE__ENGINE_GEMM;
	cr_assert_eq(eng_dma_run(&s, &t.mem), RT_EINVAL);
	cr_assert(strstr(rt_last_error(), "PE_DMA"), "%s", rt_last_error());
	tmem_release(&t);
}
