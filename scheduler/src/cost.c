/* cost.c — logical bytes of a wire command (ADR-0064 rev. 2), by the rule
 * stated once in rt/isa.h. */
#include "sched.h"

uint64_t sched_op_logical_bytes(const Kb__OpSpec *op)
{
	return rt_isa_logical_bytes(op->n_operands + (op->out ? 1u : 0u),
				    op->n_extras);
}

uint64_t sched_composite_logical_bytes(const Kb__CompositeCmd *c)
{
	uint64_t sum = RT_ISA_TENSOR_BYTES * (uint64_t)c->n_rw_handles;

	for (size_t i = 0; i < c->n_ops; i++)
		sum += c->ops[i] ? sched_op_logical_bytes(c->ops[i]) : 0;
	return sum;
}

uint64_t sched_command_logical_bytes(const Kb__Command *c)
{
	switch (c->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		return sched_composite_logical_bytes(c->composite);
	case KB__COMMAND__BODY_DMA:
	case KB__COMMAND__BODY_COPY:
		return RT_ISA_MOVE_LOGICAL_BYTES;
	default:
		return 0;
	}
}
