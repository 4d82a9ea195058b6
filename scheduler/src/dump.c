/* dump.c — the deterministic text form of a plan, one line per stage:
 *   <index> <engine> <op_kind>/<op_name> deps=[..] in=[view; ..] out=view
 *   [acc=view first|last]
 * with view = <space>:0x<addr> <rows>x<cols>/<row_stride> <dtype>[ T].
 * Golden files (tests/golden/sched_*.txt) are written in this form. */
#include "sched.h"

static const char *dtype_name(Kb__DType d)
{
	return d == KB__DTYPE__DTYPE_F32 ? "f32"
	       : d == KB__DTYPE__DTYPE_BF16 ? "bf16" : "f16";
}

static enum rt_err dump_view(struct rt_buf *out, const struct sched_view *v)
{
	return rt_buf_printf(out, "%s:0x%llx %ux%u/%llu %s%s",
			     v->space == KB__SPACE__SPACE_TCM ? "tcm" : "hbm",
			     (unsigned long long)v->addr, v->rows, v->cols,
			     (unsigned long long)v->row_stride,
			     dtype_name(v->dtype), v->trans ? " T" : "");
}

static enum rt_err dump_stage(struct rt_buf *out, uint32_t index,
			      const struct sched_stage *st)
{
	enum rt_err err = rt_buf_printf(out, "%u %s %s/%s deps=[", index,
					sched_engine_name(st->engine),
					st->op_kind, st->op_name);

	for (uint32_t d = 0; !err && d < st->n_deps; d++)
		err = rt_buf_printf(out, d ? ",%u" : "%u", st->deps[d]);
	if (!err)
		err = rt_buf_printf(out, "] in=[");
	for (uint32_t i = 0; !err && i < st->n_in; i++) {
		if (i)
			err = rt_buf_printf(out, "; ");
		if (!err)
			err = dump_view(out, &st->in[i]);
	}
	if (!err)
		err = rt_buf_printf(out, "] out=");
	if (!err)
		err = dump_view(out, &st->out);
	if (!err && st->has_acc) {
		err = rt_buf_printf(out, " acc=");
		if (!err)
			err = dump_view(out, &st->acc);
		if (!err)
			err = rt_buf_printf(out, "%s%s", st->first ? " first" : "",
					    st->last ? " last" : "");
	}
	if (!err && st->stationary_held)
		err = rt_buf_printf(out, " held");
	return err ? err : rt_buf_printf(out, "\n");
}

enum rt_err sched_plan_dump(const struct sched_plan *plan, struct rt_buf *out)
{
	enum rt_err err = RT_EOK;

	for (uint32_t s = 0; !err && s < plan->n_stages; s++)
		err = dump_stage(out, s, &plan->stages[s]);
	return err;
}
