/* math/kernel.c — the PE_MATH data kernel. Inputs are loaded as f32
 * matrices, the result is computed in f32 into a temporary (so out may alias
 * an input) and rounded to out's dtype on store. Elementwise ops broadcast
 * NumPy-style in 2-D (a dimension of 1 repeats); max and rmax propagate NaN
 * like numpy.maximum. */
#include "eng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A logical matrix loaded as f32. */
struct mat {
	uint32_t rows;
	uint32_t cols;
	float *v;
};

/* Element (r, c) of x, broadcasting a dimension of 1. */
static float at(const struct mat *x, uint32_t r, uint32_t c)
{
	return x->v[(size_t)(x->rows == 1 ? 0 : r) * x->cols
		    + (x->cols == 1 ? 0 : c)];
}

static float max_nan(float a, float b)
{
	return (a > b || isnan(a)) ? a : b;
}

/* One output element of elementwise op `op` from inputs a, b, c and its
 * float extra x: the arithmetic column of the instruction set (npu/isa.h). */
static float elementwise(enum rt_isa_id op, float a, float b, float c,
			 float x)
{
	switch (op) {
#define RT_ISA_ARITH(ID, NAME, ENGINE, ARITY, LAT, SHAPE, EXTRA, N_EXTRAS,  \
		     ARITH)                                                   \
	case RT_ISA_##ID:                                                     \
		return (float)(ARITH);
	RT_ISA_OPS(RT_ISA_ARITH)
#undef RT_ISA_ARITH
	default:
		return NAN;
	}
}

static void run_elementwise(const Kb__Stage *s, enum rt_isa_id op,
			    const struct mat *in, struct mat *out)
{
	const struct rt_isa_op *isa = rt_isa_get(op);
	double x = 0.0;

	/* the op's float extra (scale's factor, fill's value), if it has one */
	if (isa->extra)
		eng_extra_f(s, isa->extra, &x);
	for (uint32_t r = 0; r < out->rows; r++)
		for (uint32_t c = 0; c < out->cols; c++)
			out->v[(size_t)r * out->cols + c] = elementwise(
				op, s->n_in > 0 ? at(&in[0], r, c) : 0.0f,
				s->n_in > 1 ? at(&in[1], r, c) : 0.0f,
				s->n_in > 2 ? at(&in[2], r, c) : 0.0f,
				(float)x);
}

/* rmax / rsum along `axis` (rt_isa_reduces_rows): over rows gives
 * 1 x cols, over columns rows x 1. The direction comes from the axis, never
 * from the shape: a 1 x N input reduced along axis 0 is N outputs. */
static void run_reduce(enum rt_isa_id op, int64_t axis, const struct mat *in,
		       struct mat *out)
{
	bool over_rows = rt_isa_reduces_rows(axis);
	uint32_t n_out = over_rows ? in->cols : in->rows;
	uint32_t n_red = over_rows ? in->rows : in->cols;

	for (uint32_t o = 0; o < n_out; o++) {
		float acc = over_rows ? at(in, 0, o) : at(in, o, 0);

		for (uint32_t i = 1; i < n_red; i++) {
			float x = over_rows ? at(in, i, o) : at(in, o, i);

			acc = op == RT_ISA_RMAX ? max_nan(acc, x) : acc + x;
		}
		out->v[o] = acc;
	}
}

/* Row softmax, max-subtracted for range. */
static void run_softmax(const struct mat *in, struct mat *out)
{
	for (uint32_t r = 0; r < in->rows; r++) {
		const float *x = in->v + (size_t)r * in->cols;
		float *y = out->v + (size_t)r * in->cols;
		float m = x[0], sum = 0.0f;

		for (uint32_t c = 1; c < in->cols; c++)
			m = max_nan(m, x[c]);
		for (uint32_t c = 0; c < in->cols; c++) {
			y[c] = expf(x[c] - m);
			sum += y[c];
		}
		for (uint32_t c = 0; c < in->cols; c++)
			y[c] /= sum;
	}
}

static enum rt_err mat_alloc(const Kb__Stage *s, const Kb__View *v,
			     struct mat *m)
{
	eng_view_dims(v, &m->rows, &m->cols);
	m->v = malloc((size_t)m->rows * m->cols * sizeof(float));
	if (m->v)
		return RT_EOK;
	return rt_fail(RT_ENOMEM,
		       "stage '%s' (command %llu, stage %u): no memory for a %u x %u operand",
		       s->op_name, (unsigned long long)s->command, s->index,
		       m->rows, m->cols);
}

static enum rt_err load_inputs(const Kb__Stage *s,
			       const struct eng_memory *mem, struct mat *in)
{
	char which[32];
	enum rt_err err;

	for (size_t i = 0; i < s->n_in; i++) {
		snprintf(which, sizeof(which), "in[%zu]", i);
		err = mat_alloc(s, s->in[i], &in[i]);
		if (!err)
			err = eng_view_load(s, which, s->in[i], mem, in[i].v);
		if (err)
			return err;
	}
	return RT_EOK;
}

static void compute(const Kb__Stage *s, const struct rt_isa_op *op,
		    const struct mat *in, struct mat *out)
{
	int64_t axis = -1;

	eng_extra_i(s, "axis", &axis);
	if (op->shape == RT_ISA_SHAPE_REDUCE)
		run_reduce(op->id, axis, &in[0], out);
	else if (op->id == RT_ISA_SOFTMAX)
		run_softmax(&in[0], out);
	else
		run_elementwise(s, op->id, in, out);
}

enum rt_err eng_math_run(const Kb__Stage *stage, const struct eng_memory *mem)
{
	struct mat in[RT_ISA_MAX_ARITY] = { { 0 } }, out = { 0 };
	const struct rt_isa_op *op;
	enum rt_err err = eng_stage_check(stage, ENG_MATH, mem);

	if (err)
		return err;
	err = eng_math_op_find(stage->op_name, &op);
	if (err)
		return err;
	err = load_inputs(stage, mem, in);
	if (!err)
		err = mat_alloc(stage, stage->out, &out);
	if (!err) {
		compute(stage, op, in, &out);
		err = eng_view_store(stage, "out", stage->out, mem, out.v);
	}
	free(out.v);
	for (int i = 0; i < RT_ISA_MAX_ARITY; i++)
		free(in[i].v);
	return err;
}
