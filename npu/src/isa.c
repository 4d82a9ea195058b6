/* isa.c — the stage instruction set table (npu/isa.h), its shape rules and
 * the dispatch-cost formula. */
#include "npu/isa.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

static const struct rt_isa_op isa_ops[RT_ISA_COUNT] = {
#define RT_ISA_ROW(ID, NAME, ENGINE, ARITY, LAT, SHAPE, EXTRA, N_EXTRAS, ...) \
	[RT_ISA_##ID] = { RT_ISA_##ID, NAME, RT_ISA_ENGINE_##ENGINE, ARITY,         \
			  RT_ISA_LAT_##LAT, RT_ISA_SHAPE_##SHAPE, EXTRA,       \
			  N_EXTRAS },
	RT_ISA_OPS(RT_ISA_ROW)
#undef RT_ISA_ROW
};

/* ", copy, exp, ...": every name, each after ", " (the preprocessor
 * joins them; rt_isa_names skips the leading separator). */
#define RT_ISA_NAME(ID, NAME, ...) ", " NAME
static const char isa_names[] = RT_ISA_OPS(RT_ISA_NAME);
#undef RT_ISA_NAME

const struct rt_isa_op *rt_isa_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < RT_ISA_COUNT; i++)
		if (strcmp(isa_ops[i].name, name) == 0)
			return &isa_ops[i];
	return NULL;
}

const struct rt_isa_op *rt_isa_get(enum rt_isa_id id)
{
	assert((unsigned)id < RT_ISA_COUNT);
	return &isa_ops[id];
}

const char *rt_isa_names(void)
{
	return isa_names + 2;
}

int64_t rt_isa_extra_int(const Kb__Extra *e)
{
	if (e->value_case == KB__EXTRA__VALUE_I)
		return e->i;
	/* 2^63 is exact in a double; NaN fails both comparisons */
	if (e->f >= 9223372036854775808.0)
		return INT64_MAX;
	if (!(e->f > -9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)e->f;
}

bool rt_isa_reduces_rows(int64_t axis)
{
	return axis == 0;
}

/* One broadcast dimension over n inputs: each is 1 or the result. */
static enum rt_err bcast_dim(const uint32_t *d, uint32_t n, const char *what,
			     uint32_t *out)
{
	uint32_t r = 1;

	for (uint32_t i = 0; i < n; i++)
		if (d[i] != 1)
			r = d[i];
	for (uint32_t i = 0; i < n; i++)
		if (d[i] != 1 && d[i] != r)
			return rt_fail(RT_EINVAL,
				       "input %u has %u %s, cannot broadcast with %u",
				       i, d[i], what, r);
	*out = r;
	return RT_EOK;
}

enum rt_err rt_isa_out_shape(const struct rt_isa_op *op, uint32_t n_in,
			     const uint32_t *rows, const uint32_t *cols,
			     int64_t axis, uint32_t *out_rows,
			     uint32_t *out_cols)
{
	enum rt_err err;

	if (n_in != op->arity)
		return rt_fail(RT_EINVAL, "%s takes %u inputs, got %u",
			       op->name, op->arity, n_in);
	for (uint32_t i = 0; i < n_in; i++)
		if (rows[i] == 0 || cols[i] == 0)
			return rt_fail(RT_EINVAL, "%s input %u is empty (%u x %u)",
				       op->name, i, rows[i], cols[i]);
	switch (op->shape) {
	case RT_ISA_SHAPE_BCAST:
		err = bcast_dim(rows, n_in, "rows", out_rows);
		return err ? err : bcast_dim(cols, n_in, "cols", out_cols);
	case RT_ISA_SHAPE_REDUCE:
		if (axis != -1 && axis != 0 && axis != 1)
			return rt_fail(RT_EINVAL,
				       "%s reduction axis %lld (expected -1, 0 or 1)",
				       op->name, (long long)axis);
		*out_rows = rt_isa_reduces_rows(axis) ? 1 : rows[0];
		*out_cols = rt_isa_reduces_rows(axis) ? cols[0] : 1;
		return RT_EOK;
	case RT_ISA_SHAPE_SAME:
		*out_rows = rows[0];
		*out_cols = cols[0];
		return RT_EOK;
	case RT_ISA_SHAPE_MATMUL:
		if (cols[0] != rows[1])
			return rt_fail(RT_EINVAL,
				       "%s: A is %u x %u but B is %u x %u (inner dims differ)",
				       op->name, rows[0], cols[0], rows[1],
				       cols[1]);
		*out_rows = rows[0];
		*out_cols = cols[1];
		return RT_EOK;
	case RT_ISA_SHAPE_OUT:
		return RT_EOK; /* the caller's out dims stand */
	}
	return rt_fail(RT_EINVAL, "%s: unknown shape rule", op->name);
}

uint64_t rt_isa_logical_bytes(uint64_t tensors, uint64_t extras)
{
	return RT_ISA_OP_HEADER_BYTES + RT_ISA_TENSOR_BYTES * tensors +
	       RT_ISA_EXTRA_BYTES * extras;
}

uint64_t rt_isa_op_logical_bytes(const struct rt_isa_op *op)
{
	return rt_isa_logical_bytes(op->arity + 1u, op->n_extras);
}

uint64_t rt_opspec_logical_bytes(const Kb__OpSpec *op)
{
	return rt_isa_logical_bytes(op->n_operands + (op->out ? 1u : 0u),
				    op->n_extras);
}

uint64_t rt_composite_logical_bytes(const Kb__CompositeCmd *c)
{
	uint64_t sum = RT_ISA_TENSOR_BYTES * (uint64_t)c->n_rw_handles;

	for (size_t i = 0; i < c->n_ops; i++)
		sum += c->ops[i] ? rt_opspec_logical_bytes(c->ops[i]) : 0;
	return sum;
}

uint64_t rt_command_logical_bytes(const Kb__Command *c)
{
	switch (c->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		return rt_composite_logical_bytes(c->composite);
	case KB__COMMAND__BODY_DMA:
	case KB__COMMAND__BODY_COPY:
		return RT_ISA_MOVE_LOGICAL_BYTES;
	default:
		return 0;
	}
}

uint64_t rt_dispatch_cycles(const struct rt_config *cfg,
			    uint64_t logical_bytes)
{
	uint64_t scaled = logical_bytes * cfg->dispatch_cycles_per_kib;

	return cfg->dispatch_fixed_cycles + (scaled + 1023u) / 1024u;
}
