/* stage.c — what a Stage must look like (docs/stages.md) and what it
 * counts: op names, extras, shape rules, bytes and elements. */
#include "eng.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct math_op_desc {
	const char *name;
	enum eng_math_class cls;
	unsigned arity;
};

static const struct math_op_desc math_ops[ENG_MATH_OP_COUNT] = {
	[ENG_MATH_COPY] = { "copy", ENG_MATH_SIMPLE, 1 },
	[ENG_MATH_EXP] = { "exp", ENG_MATH_TRANSCENDENTAL, 1 },
	[ENG_MATH_SCALE] = { "scale", ENG_MATH_SIMPLE, 1 },
	[ENG_MATH_ADD] = { "add", ENG_MATH_SIMPLE, 2 },
	[ENG_MATH_SUB] = { "sub", ENG_MATH_SIMPLE, 2 },
	[ENG_MATH_MUL] = { "mul", ENG_MATH_SIMPLE, 2 },
	[ENG_MATH_DIV] = { "div", ENG_MATH_SIMPLE, 2 },
	[ENG_MATH_MAX_ELEM] = { "max_elem", ENG_MATH_SIMPLE, 2 },
	[ENG_MATH_EXP_DIFF] = { "exp_diff", ENG_MATH_TRANSCENDENTAL, 2 },
	[ENG_MATH_MUL_BCAST] = { "mul_bcast", ENG_MATH_SIMPLE, 2 },
	[ENG_MATH_FMA] = { "fma", ENG_MATH_SIMPLE, 3 },
	[ENG_MATH_RMAX] = { "rmax", ENG_MATH_REDUCE, 1 },
	[ENG_MATH_RSUM] = { "rsum", ENG_MATH_REDUCE, 1 },
	[ENG_MATH_SOFTMAX] = { "softmax", ENG_MATH_TRANSCENDENTAL, 1 },
};

enum rt_err eng_math_op_parse(const char *name, enum eng_math_op *out)
{
	for (int op = 0; op < ENG_MATH_OP_COUNT; op++) {
		if (strcmp(name, math_ops[op].name) == 0) {
			*out = (enum eng_math_op)op;
			return RT_EOK;
		}
	}
	return rt_fail(RT_EINVAL,
		       "unknown MATH op '%s' (expected copy, exp, scale, add, sub, mul, div, max_elem, exp_diff, mul_bcast, fma, rmax, rsum or softmax)",
		       name);
}

enum eng_math_class eng_math_op_class(enum eng_math_op op)
{
	return (unsigned)op < ENG_MATH_OP_COUNT ? math_ops[op].cls
						: ENG_MATH_SIMPLE;
}

unsigned eng_math_op_arity(enum eng_math_op op)
{
	return (unsigned)op < ENG_MATH_OP_COUNT ? math_ops[op].arity : 0;
}

const char *eng_class_name(enum eng_class cls)
{
	switch (cls) {
	case ENG_DMA:
		return "dma";
	case ENG_GEMM:
		return "gemm";
	case ENG_MATH:
		return "math";
	}
	return "engine?";
}

static const Kb__Extra *find_extra(const Kb__Stage *stage, const char *name)
{
	for (size_t i = 0; i < stage->n_extras; i++)
		if (stage->extras[i] && strcmp(stage->extras[i]->name, name) == 0)
			return stage->extras[i];
	return NULL;
}

bool eng_extra_i(const Kb__Stage *stage, const char *name, int64_t *out)
{
	const Kb__Extra *e = find_extra(stage, name);

	if (!e || e->value_case == KB__EXTRA__VALUE__NOT_SET)
		return false;
	*out = e->value_case == KB__EXTRA__VALUE_I ? e->i : (int64_t)e->f;
	return true;
}

bool eng_extra_f(const Kb__Stage *stage, const char *name, double *out)
{
	const Kb__Extra *e = find_extra(stage, name);

	if (!e || e->value_case == KB__EXTRA__VALUE__NOT_SET)
		return false;
	*out = e->value_case == KB__EXTRA__VALUE_F ? e->f : (double)e->i;
	return true;
}

uint64_t eng_ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

uint64_t eng_mul_sat(uint64_t a, uint64_t b)
{
	uint64_t p;

	return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

/* rt_fail with the stage's "op_name (command, stage)" prefix. */
__attribute__((format(printf, 3, 4)))
static enum rt_err stage_fail(const Kb__Stage *s, enum rt_err code,
			      const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return rt_fail(code, "stage '%s' (command %llu, stage %u): %s",
		       s->op_name, (unsigned long long)s->command, s->index,
		       detail);
}

static enum rt_err dims_equal(const Kb__Stage *s, const char *which,
			      const Kb__View *v, uint32_t rows, uint32_t cols)
{
	uint32_t r, c;

	eng_view_dims(v, &r, &c);
	if (r == rows && c == cols)
		return RT_EOK;
	return stage_fail(s, RT_EINVAL, "%s is %u x %u, expected %u x %u",
			  which, r, c, rows, cols);
}

/* Checks every input view and out. */
static enum rt_err views_check(const Kb__Stage *s, size_t n_in,
			       const struct eng_memory *mem)
{
	char which[32];
	enum rt_err err;

	if (s->n_in != n_in)
		return stage_fail(s, RT_EINVAL, "has %zu inputs, expected %zu",
				  s->n_in, n_in);
	for (size_t i = 0; i < n_in; i++) {
		snprintf(which, sizeof(which), "in[%zu]", i);
		err = eng_view_check(s, which, s->in[i], mem);
		if (err)
			return err;
	}
	return RT_EOK;
}

static enum rt_err dma_check(const Kb__Stage *s, const struct eng_memory *mem)
{
	uint32_t rows, cols;
	enum rt_err err;

	if (s->engine != KB__ENGINE__ENGINE_DMA_READ
	    && s->engine != KB__ENGINE__ENGINE_DMA_WRITE)
		return stage_fail(s, RT_EINVAL,
				  "sent to PE_DMA but addressed to engine %d",
				  (int)s->engine);
	err = views_check(s, 1, mem);
	if (!err)
		err = eng_view_check(s, "out", s->out, mem);
	if (err)
		return err;
	eng_view_dims(s->in[0], &rows, &cols);
	return dims_equal(s, "out", s->out, rows, cols);
}

void eng_gemm_dims(const Kb__Stage *stage, uint64_t *m, uint64_t *k,
		   uint64_t *n)
{
	uint32_t ar = 0, ac = 0, br = 0, bc = 0;

	if (stage->n_in >= 2 && stage->in[0] && stage->in[1]) {
		eng_view_dims(stage->in[0], &ar, &ac);
		eng_view_dims(stage->in[1], &br, &bc);
	}
	*m = ar;
	*k = ac;
	*n = bc;
}

/* Whether a GEMM stage writes `out`. */
static bool gemm_writes_out(const Kb__Stage *s)
{
	return !s->acc || s->last;
}

static enum rt_err gemm_check(const Kb__Stage *s, const struct eng_memory *mem)
{
	uint32_t m, k, k2, n;
	enum rt_err err;

	if (s->engine != KB__ENGINE__ENGINE_GEMM)
		return stage_fail(s, RT_EINVAL,
				  "sent to PE_GEMM but addressed to engine %d",
				  (int)s->engine);
	err = views_check(s, 2, mem);
	if (err)
		return err;
	eng_view_dims(s->in[0], &m, &k);
	eng_view_dims(s->in[1], &k2, &n);
	if (k != k2)
		return stage_fail(s, RT_EINVAL,
				  "A is %u x %u but B is %u x %u (inner dims differ)",
				  m, k, k2, n);
	if (s->acc) {
		err = eng_view_check(s, "acc", s->acc, mem);
		if (err || (err = dims_equal(s, "acc", s->acc, m, n)))
			return err;
		if (s->acc->dtype != KB__DTYPE__DTYPE_F32)
			return stage_fail(s, RT_EINVAL,
					  "acc must be f32, got dtype %d",
					  (int)s->acc->dtype);
	}
	if (!gemm_writes_out(s))
		return RT_EOK;
	err = eng_view_check(s, "out", s->out, mem);
	return err ? err : dims_equal(s, "out", s->out, m, n);
}

/* Broadcast of one dimension across the inputs: each is 1 or the result. */
static enum rt_err bcast_dim(const Kb__Stage *s, const uint32_t *d,
			     size_t n, const char *what, uint32_t *out)
{
	uint32_t r = 1;

	for (size_t i = 0; i < n; i++)
		if (d[i] != 1)
			r = d[i];
	for (size_t i = 0; i < n; i++)
		if (d[i] != 1 && d[i] != r)
			return stage_fail(s, RT_EINVAL,
					  "in[%zu] has %u %s, cannot broadcast with %u",
					  i, d[i], what, r);
	*out = r;
	return RT_EOK;
}

/* Output dims of a checked MATH stage's inputs under op `op`. */
static enum rt_err math_out_dims(const Kb__Stage *s, enum eng_math_op op,
				 uint32_t *rows, uint32_t *cols)
{
	uint32_t r[3], c[3];
	int64_t axis = -1;
	enum rt_err err;

	for (size_t i = 0; i < s->n_in; i++)
		eng_view_dims(s->in[i], &r[i], &c[i]);
	if (eng_math_op_class(op) != ENG_MATH_REDUCE) {
		err = bcast_dim(s, r, s->n_in, "rows", rows);
		return err ? err : bcast_dim(s, c, s->n_in, "cols", cols);
	}
	eng_extra_i(s, "axis", &axis);
	if (axis != -1 && axis != 0 && axis != 1)
		return stage_fail(s, RT_EINVAL,
				  "reduction axis %lld (expected -1, 0 or 1)",
				  (long long)axis);
	*rows = axis == 0 ? 1 : r[0];
	*cols = axis == 0 ? c[0] : 1;
	return RT_EOK;
}

static enum rt_err math_check(const Kb__Stage *s, const struct eng_memory *mem)
{
	enum eng_math_op op;
	uint32_t rows, cols;
	double scale;
	enum rt_err err;

	if (s->engine != KB__ENGINE__ENGINE_MATH)
		return stage_fail(s, RT_EINVAL,
				  "sent to PE_MATH but addressed to engine %d",
				  (int)s->engine);
	if (eng_math_op_parse(s->op_name, &op))
		return stage_fail(s, RT_EINVAL, "%s", rt_last_error());
	if (op == ENG_MATH_SCALE && !eng_extra_f(s, "scale", &scale))
		return stage_fail(s, RT_EINVAL, "scale needs extra 'scale'");
	err = views_check(s, eng_math_op_arity(op), mem);
	if (!err)
		err = eng_view_check(s, "out", s->out, mem);
	if (!err)
		err = math_out_dims(s, op, &rows, &cols);
	return err ? err : dims_equal(s, "out", s->out, rows, cols);
}

enum rt_err eng_stage_check(const Kb__Stage *stage, enum eng_class cls,
			    const struct eng_memory *mem)
{
	switch (cls) {
	case ENG_DMA:
		return dma_check(stage, mem);
	case ENG_GEMM:
		return gemm_check(stage, mem);
	case ENG_MATH:
		return math_check(stage, mem);
	}
	return rt_fail(RT_EINVAL, "unknown engine class %d", (int)cls);
}

static uint64_t view_elems(const Kb__View *v)
{
	return v ? (uint64_t)v->rows * v->cols : 0;
}

static uint64_t view_bytes(const Kb__View *v)
{
	return v ? view_elems(v) * rt_dtype_bytes(v->dtype) : 0;
}

uint64_t eng_stage_bytes(const Kb__Stage *stage)
{
	uint64_t bytes = 0;

	switch (stage->engine) {
	case KB__ENGINE__ENGINE_DMA_READ:
	case KB__ENGINE__ENGINE_DMA_WRITE:
		return stage->n_in ? view_bytes(stage->in[0]) : 0;
	case KB__ENGINE__ENGINE_GEMM:
		bytes = gemm_writes_out(stage) ? view_bytes(stage->out) : 0;
		break;
	default:
		bytes = view_bytes(stage->out);
		break;
	}
	for (size_t i = 0; i < stage->n_in; i++)
		bytes += view_bytes(stage->in[i]);
	return bytes;
}

uint64_t eng_stage_elements(const Kb__Stage *stage)
{
	enum eng_math_op op;
	uint64_t m, k, n;

	switch (stage->engine) {
	case KB__ENGINE__ENGINE_DMA_READ:
	case KB__ENGINE__ENGINE_DMA_WRITE:
		return stage->n_in ? view_elems(stage->in[0]) : 0;
	case KB__ENGINE__ENGINE_GEMM:
		eng_gemm_dims(stage, &m, &k, &n);
		return eng_mul_sat(eng_mul_sat(m, n), k);
	default:
		if (eng_math_op_parse(stage->op_name, &op) == RT_EOK
		    && eng_math_op_class(op) == ENG_MATH_REDUCE)
			return stage->n_in ? view_elems(stage->in[0]) : 0;
		return view_elems(stage->out);
	}
}
