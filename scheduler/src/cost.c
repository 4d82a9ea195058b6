/* cost.c — logical bytes of a command and its PE_CPU dispatch cost
 * (ADR-0064 rev. 2). The rule is stated once, in sched.h. */
#include "sched.h"

uint64_t sched_op_logical_bytes(const Kb__OpSpec *op)
{
	uint64_t tensors = op->n_operands + (op->out ? 1u : 0u);

	return SCHED_OP_HEADER_BYTES + SCHED_TENSOR_BYTES * tensors +
	       SCHED_EXTRA_BYTES * (uint64_t)op->n_extras;
}

uint64_t sched_composite_logical_bytes(const Kb__CompositeCmd *c)
{
	uint64_t sum = SCHED_TENSOR_BYTES * (uint64_t)c->n_rw_handles;

	for (size_t i = 0; i < c->n_ops; i++)
		sum += sched_op_logical_bytes(c->ops[i]);
	return sum;
}

uint64_t sched_command_logical_bytes(const Kb__Command *c)
{
	switch (c->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		return sched_composite_logical_bytes(c->composite);
	case KB__COMMAND__BODY_DMA:
	case KB__COMMAND__BODY_COPY:
		return SCHED_OP_HEADER_BYTES + 2u * SCHED_TENSOR_BYTES;
	default:
		return 0;
	}
}

uint64_t sched_dispatch_cycles(const struct rt_config *cfg,
			       uint64_t logical_bytes)
{
	uint64_t scaled = logical_bytes * cfg->dispatch_cycles_per_kib;

	return cfg->dispatch_fixed_cycles + (scaled + 1023u) / 1024u;
}
