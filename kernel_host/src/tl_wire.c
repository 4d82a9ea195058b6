/* tl_wire.c — internal command forms to the wire schema, and the logical
 * size of a command that the dispatch cost is charged on (dispatch-cost design). */
#include "tl_private.h"

#include <stdlib.h>
#include <string.h>

/* The same rule (npu/isa.h) on the internal form, for the cap check
 * before lowering to the wire. */
uint64_t tl_lowered_logical_bytes(const struct tl_lowered *low)
{
	uint64_t n = RT_ISA_TENSOR_BYTES * low->n_rw;
	uint32_t i;

	for (i = 0; i < low->n_ops; i++) {
		const struct tl_op *op = &low->ops[i];

		n += rt_isa_logical_bytes(op->n_operands + (op->has_out ? 1u : 0u),
					  op->n_extras);
	}
	return n;
}

void tl_wire_tref(struct tl_wire_tref *w, const struct tl_tref *t)
{
	Kb__TensorRef init = KB__TENSOR_REF__INIT;

	w->ref = init;
	w->shape[0] = t->rows;
	w->shape[1] = t->cols;
	w->ref.space = t->tcm ? KB__SPACE__SPACE_TCM : KB__SPACE__SPACE_HBM;
	w->ref.addr = t->addr;
	w->ref.n_shape = 2;
	w->ref.shape = w->shape;
	w->ref.dtype = (Kb__DType)t->dtype;
	w->ref.pinned = t->pinned;
	w->ref.trans = t->trans;
	w->ref.row_stride = t->row_stride;
}

/* Everything one lowered composite needs on the wire, by value. */
struct wire_op {
	Kb__OpSpec spec;
	Kb__Operand operand[TL_OP_MAX_OPERANDS];
	Kb__Operand *operand_p[TL_OP_MAX_OPERANDS];
	struct tl_wire_tref operand_ref[TL_OP_MAX_OPERANDS];
	Kb__Extra extra[TL_OP_MAX_EXTRAS];
	Kb__Extra *extra_p[TL_OP_MAX_EXTRAS];
	struct tl_wire_tref out;
};

struct wire_composite {
	Kb__CompositeCmd cmd;
	struct wire_op ops[TL_CMD_MAX_OPS];
	Kb__OpSpec *ops_p[TL_CMD_MAX_OPS];
	struct tl_wire_tref rw[TL_CMD_MAX_RW];
	Kb__TensorRef *rw_p[TL_CMD_MAX_RW];
};

static void wire_op(struct wire_op *w, const struct tl_op *op)
{
	Kb__OpSpec spec = KB__OP_SPEC__INIT;
	Kb__Operand operand = KB__OPERAND__INIT;
	Kb__Extra extra = KB__EXTRA__INIT;
	uint32_t i;

	w->spec = spec;
	w->spec.kind = (char *)op->kind;
	w->spec.scope = (Kb__Scope)op->scope;
	for (i = 0; i < op->n_operands; i++) {
		w->operand[i] = operand;
		w->operand[i].name = (char *)op->operand_name[i];
		tl_wire_tref(&w->operand_ref[i], &op->operand[i]);
		w->operand[i].tensor = &w->operand_ref[i].ref;
		w->operand_p[i] = &w->operand[i];
	}
	w->spec.n_operands = op->n_operands;
	w->spec.operands = w->operand_p;
	for (i = 0; i < op->n_extras; i++) {
		w->extra[i] = extra;
		w->extra[i].name = (char *)op->extra[i].name;
		if (op->extra[i].is_f) {
			w->extra[i].value_case = KB__EXTRA__VALUE_F;
			w->extra[i].f = op->extra[i].f;
		} else {
			w->extra[i].value_case = KB__EXTRA__VALUE_I;
			w->extra[i].i = op->extra[i].i;
		}
		w->extra_p[i] = &w->extra[i];
	}
	w->spec.n_extras = op->n_extras;
	w->spec.extras = w->extra_p;
	if (op->has_out) {
		tl_wire_tref(&w->out, &op->out);
		w->spec.out = &w->out.ref;
	}
}

void tl_emit_composite(struct tl *tl, struct tl_site at, uint64_t id,
		       const struct tl_lowered *low)
{
	static const Kb__CompositeCmd init = KB__COMPOSITE_CMD__INIT;
	Kb__Command cmd = KB__COMMAND__INIT;
	struct wire_composite *w;
	uint32_t i;

	/* ~20 KiB: kept in the runtime (reused), off the kernel's stack */
	if (!tl->wire_buf)
		tl->wire_buf = calloc(1, sizeof(*w));
	if (!tl->wire_buf)
		tl_abort(tl, at, RT_ENOMEM, "out of memory (composite)");
	w = tl->wire_buf;
	w->cmd = init;
	w->cmd.id = id;
	for (i = 0; i < low->n_ops; i++) {
		wire_op(&w->ops[i], &low->ops[i]);
		w->ops_p[i] = &w->ops[i].spec;
	}
	w->cmd.n_ops = low->n_ops;
	w->cmd.ops = w->ops_p;
	for (i = 0; i < low->n_rw; i++) {
		tl_wire_tref(&w->rw[i], &low->rw[i]);
		w->rw_p[i] = &w->rw[i].ref;
	}
	w->cmd.n_rw_handles = low->n_rw;
	w->cmd.rw_handles = w->rw_p;
	cmd.body_case = KB__COMMAND__BODY_COMPOSITE;
	cmd.composite = &w->cmd;
	tl_emit(tl, at, &cmd);
}
