/* payload.c — see npu/payload.h. Moved from runtime/src/wire.c (issue 21,
 * item 1): the bounds of tensors and views are the machine's, not the
 * simulator core's. */
#include "npu/payload.h"

#define MAX_DIM (1u << 24)

static enum rt_err check_tensor(const Kb__TensorRef *t, const char *what)
{
	uint64_t count = 1;

	if (!t)
		return RT_EOK;
	if (t->n_shape > 8)
		return rt_fail(RT_EDECODE, "%s tensor has %zu dimensions (at most 8)", what, t->n_shape);
	for (size_t i = 0; i < t->n_shape; i++) {
		if (t->shape[i] == 0 || t->shape[i] > MAX_DIM)
			return rt_fail(RT_EDECODE, "%s tensor dimension %zu is %u (expected 1..%u)",
				       what, i, t->shape[i], MAX_DIM);
		count *= t->shape[i];
		if (count > (1ull << 40))
			return rt_fail(RT_EDECODE, "%s tensor has more than 2^40 elements", what);
	}
	if ((unsigned)t->dtype > KB__DTYPE__DTYPE_F32)
		return rt_fail(RT_EDECODE, "%s tensor has unknown dtype %d", what, t->dtype);
	return RT_EOK;
}

static enum rt_err check_view(const Kb__View *v, const char *what)
{
	if (!v)
		return RT_EOK;
	if (v->rows > MAX_DIM || v->cols > MAX_DIM)
		return rt_fail(RT_EDECODE, "%s view is %ux%u (at most %u per side)", what,
			       v->rows, v->cols, MAX_DIM);
	if ((unsigned)v->dtype > KB__DTYPE__DTYPE_F32)
		return rt_fail(RT_EDECODE, "%s view has unknown dtype %d", what, v->dtype);
	return RT_EOK;
}

static enum rt_err check_composite(const Kb__CompositeCmd *c)
{
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < c->n_ops; i++) {
		const Kb__OpSpec *op = c->ops[i];

		for (size_t j = 0; !err && j < op->n_operands; j++)
			err = check_tensor(op->operands[j]->tensor, "operand");
		if (!err)
			err = check_tensor(op->out, "out");
	}
	for (size_t i = 0; !err && i < c->n_rw_handles; i++)
		err = check_tensor(c->rw_handles[i], "rw_handle");
	return err;
}

static enum rt_err check_command(const Kb__Command *c)
{
	enum rt_err err;

	switch (c->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		return check_composite(c->composite);
	case KB__COMMAND__BODY_DMA:
		err = check_tensor(c->dma->src, "dma src");
		return err ? err : check_tensor(c->dma->dst, "dma dst");
	case KB__COMMAND__BODY_COPY:
		err = check_tensor(c->copy->src, "copy src");
		return err ? err : check_tensor(c->copy->dst, "copy dst");
	default:
		return rt_fail(RT_EDECODE, "command has no body");
	}
}

static enum rt_err check_stage(const Kb__Stage *s)
{
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < s->n_in; i++)
		err = check_view(s->in[i], "stage input");
	if (!err)
		err = check_view(s->out, "stage output");
	if (!err)
		err = check_view(s->acc, "stage accumulator");
	return err;
}

enum rt_err npu_check_payload(const Kb__Payload *p)
{
	switch (p->body_case) {
	case KB__PAYLOAD__BODY_COMMAND:
		return check_command(p->command);
	case KB__PAYLOAD__BODY_STAGE:
		return check_stage(p->stage);
	default:
		return RT_EOK;
	}
}
