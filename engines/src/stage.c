/* stage.c — what a Stage must look like (docs/stages.md) and what it
 * counts: op names, extras, shape rules (all from the instruction set,
 * npu/isa.h), bytes and elements. */
#include "eng.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum rt_err eng_math_op_find(const char *name, const struct rt_isa_op **out)
{
	const struct rt_isa_op *op = rt_isa_find(name);

	if (!op || op->engine != RT_ISA_ENGINE_MATH)
		return rt_fail(RT_EINVAL,
			       "unknown MATH op '%s' (expected one of the MATH ops of %s)",
			       name, rt_isa_names());
	*out = op;
	return RT_EOK;
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
	*out = rt_isa_extra_int(e);
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

/* Output dims of a stage's inputs under `op`'s shape rule (npu/isa.h). */
static enum rt_err out_dims(const Kb__Stage *s, const struct rt_isa_op *op,
			    uint32_t *rows, uint32_t *cols)
{
	uint32_t r[RT_ISA_MAX_ARITY] = { 0 }, c[RT_ISA_MAX_ARITY] = { 0 };
	int64_t axis = -1;

	for (size_t i = 0; i < s->n_in && i < RT_ISA_MAX_ARITY; i++)
		eng_view_dims(s->in[i], &r[i], &c[i]);
	eng_extra_i(s, "axis", &axis);
	*rows = *cols = 0;
	if (s->out) /* stands for an op without inputs */
		eng_view_dims(s->out, rows, cols);
	if (rt_isa_out_shape(op, (uint32_t)s->n_in, r, c, axis, rows, cols))
		return stage_fail(s, RT_EINVAL, "%s", rt_last_error());
	return RT_EOK;
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
	uint32_t m, n;
	enum rt_err err;

	if (s->engine != KB__ENGINE__ENGINE_GEMM)
		return stage_fail(s, RT_EINVAL,
				  "sent to PE_GEMM but addressed to engine %d",
				  (int)s->engine);
	err = views_check(s, 2, mem);
	if (err)
		return err;
	err = out_dims(s, rt_isa_get(RT_ISA_GEMM), &m, &n);
	if (err)
		return err;
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

static enum rt_err math_check(const Kb__Stage *s, const struct eng_memory *mem)
{
	const struct rt_isa_op *op;
	uint32_t rows, cols;
	double value;
	enum rt_err err;

	if (s->engine != KB__ENGINE__ENGINE_MATH)
		return stage_fail(s, RT_EINVAL,
				  "sent to PE_MATH but addressed to engine %d",
				  (int)s->engine);
	if (eng_math_op_find(s->op_name, &op))
		return stage_fail(s, RT_EINVAL, "%s", rt_last_error());
	if (op->extra && !eng_extra_f(s, op->extra, &value))
		return stage_fail(s, RT_EINVAL, "%s needs extra '%s'", op->name,
				  op->extra);
	err = views_check(s, op->arity, mem);
	if (!err)
		err = eng_view_check(s, "out", s->out, mem);
	if (!err)
		err = out_dims(s, op, &rows, &cols);
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
	const struct rt_isa_op *op;
	uint64_t m, k, n;

	switch (stage->engine) {
	case KB__ENGINE__ENGINE_DMA_READ:
	case KB__ENGINE__ENGINE_DMA_WRITE:
		return stage->n_in ? view_elems(stage->in[0]) : 0;
	case KB__ENGINE__ENGINE_GEMM:
		eng_gemm_dims(stage, &m, &k, &n);
		return eng_mul_sat(eng_mul_sat(m, n), k);
	default:
		op = rt_isa_find(stage->op_name);
		if (op && op->shape == RT_ISA_SHAPE_REDUCE)
			return stage->n_in ? view_elems(stage->in[0]) : 0;
		return view_elems(stage->out);
	}
}
