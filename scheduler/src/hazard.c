/* hazard.c — read/write sets of commands and their overlap (flat-composite design D6.3).
 *
 * A command reads its operands (and DMA/copy sources) and writes its outs
 * (and destinations); rw_handles are both read and written. Two commands
 * conflict when a write of either overlaps a read or write of the other. */
#include "sched.h"

#include <stdlib.h>
#include <string.h>

void sched_hazard_init(struct sched_hazard_set *set)
{
	memset(set, 0, sizeof(*set));
}

void sched_hazard_release(struct sched_hazard_set *set)
{
	free(set->reads);
	free(set->writes);
	sched_hazard_init(set);
}

static enum rt_err push_range(struct sched_range **arr, uint32_t *n,
			      uint32_t *cap, const struct sched_range *r)
{
	if (*n == *cap) {
		uint32_t c = *cap ? *cap * 2 : 8;
		struct sched_range *a = realloc(*arr, c * sizeof(*a));

		if (!a)
			return rt_fail(RT_ENOMEM, "hazard set: no memory for %u ranges",
				       c);
		*arr = a;
		*cap = c;
	}
	(*arr)[(*n)++] = *r;
	return RT_EOK;
}

/* The bytes `t` spans (row-major, rows row_stride apart). Empty for a
 * NULL tensor. */
static struct sched_range tensor_range(const Kb__TensorRef *t, uint32_t rank,
				       uint32_t pe)
{
	struct sched_range r = {.rank = rank};
	uint64_t bytes;

	if (!t)
		return r;
	bytes = rt_dtype_bytes(t->dtype);
	for (size_t d = 0; d < t->n_shape; d++)
		bytes *= t->shape[d]; /* dims are u32 and <= 4 once planned */
	if (t->row_stride && t->n_shape) { /* a window: first row to last row's end */
		uint64_t rows = bytes / rt_dtype_bytes(t->dtype) / t->shape[t->n_shape - 1];

		bytes = (rows - 1) * t->row_stride +
			(uint64_t)t->shape[t->n_shape - 1] * rt_dtype_bytes(t->dtype);
	}
	r.space = t->space;
	r.pe = t->space == KB__SPACE__SPACE_TCM ? pe : 0;
	r.lo = t->addr;
	r.hi = t->addr + bytes < t->addr ? UINT64_MAX : t->addr + bytes;
	return r;
}

static enum rt_err add_read(struct sched_hazard_set *s, const Kb__TensorRef *t,
			    uint32_t rank, uint32_t pe)
{
	struct sched_range r = tensor_range(t, rank, pe);

	return r.hi > r.lo ? push_range(&s->reads, &s->n_reads, &s->cap_reads, &r)
			   : RT_EOK;
}

static enum rt_err add_write(struct sched_hazard_set *s,
			     const Kb__TensorRef *t, uint32_t rank, uint32_t pe)
{
	struct sched_range r = tensor_range(t, rank, pe);

	return r.hi > r.lo ? push_range(&s->writes, &s->n_writes, &s->cap_writes,
					&r)
			   : RT_EOK;
}

static enum rt_err collect_composite(struct sched_hazard_set *s,
				     const Kb__CompositeCmd *c, uint32_t rank,
				     uint32_t pe)
{
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < c->n_ops; i++) {
		const Kb__OpSpec *op = c->ops[i];

		for (size_t j = 0; !err && op && j < op->n_operands; j++)
			if (op->operands[j])
				err = add_read(s, op->operands[j]->tensor, rank,
					       pe);
		if (!err && op)
			err = add_write(s, op->out, rank, pe);
	}
	for (size_t i = 0; !err && i < c->n_rw_handles; i++) {
		err = add_read(s, c->rw_handles[i], rank, pe);
		if (!err)
			err = add_write(s, c->rw_handles[i], rank, pe);
	}
	return err;
}

enum rt_err sched_hazard_collect(struct sched_hazard_set *set,
				 const Kb__Command *cmd, uint32_t rank,
				 uint32_t pe)
{
	enum rt_err err;

	set->n_reads = set->n_writes = 0;
	switch (cmd->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		return collect_composite(set, cmd->composite, rank, pe);
	case KB__COMMAND__BODY_DMA:
		err = add_read(set, cmd->dma->src, rank, pe);
		return err ? err : add_write(set, cmd->dma->dst, rank, pe);
	case KB__COMMAND__BODY_COPY:
		err = add_read(set, cmd->copy->src, rank, pe);
		return err ? err : add_write(set, cmd->copy->dst, rank, pe);
	default:
		return RT_EOK;
	}
}

static bool overlap(const struct sched_range *a, const struct sched_range *b)
{
	return a->space == b->space && a->rank == b->rank && a->pe == b->pe &&
	       a->lo < b->hi && b->lo < a->hi;
}

static bool any_overlap(const struct sched_range *a, uint32_t na,
			const struct sched_range *b, uint32_t nb)
{
	for (uint32_t i = 0; i < na; i++)
		for (uint32_t j = 0; j < nb; j++)
			if (overlap(&a[i], &b[j]))
				return true;
	return false;
}

bool sched_hazard_conflicts(const struct sched_hazard_set *later,
			    const struct sched_hazard_set *earlier)
{
	return any_overlap(later->reads, later->n_reads, earlier->writes,
			   earlier->n_writes) || /* RAW */
	       any_overlap(later->writes, later->n_writes, earlier->reads,
			   earlier->n_reads) ||  /* WAR */
	       any_overlap(later->writes, later->n_writes, earlier->writes,
			   earlier->n_writes);   /* WAW */
}
