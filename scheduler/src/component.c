/* component.c — the PE_SCHEDULER component: messages in, core calls, and the
 * core's actions out as Stage / CommandDone messages. All policy lives in
 * core.c and plan.c; this file only translates. */
#include "sched.h"

#include "rt/ff.h"
#include "rt/job.h"
#include "npu/payload.h"
#include "npu/pe.h"

/* Component state (zeroed by the runtime, filled by init). */
struct sched_component {
	struct sched_core core;
	uint32_t rank;
	uint32_t pe;
	uint32_t stat[3]; /* sched_stats, by handle */
};

enum { ST_STAGES, ST_COMMANDS, ST_COMPOSITES };
static const struct rt_stat_decl sched_stats[] = {
	[ST_STAGES] = RT_STAT_DECL("stages", "count", "stages released to the PE's engines"),
	[ST_COMMANDS] = RT_STAT_DECL("commands", "count", "commands received from the kernel host"),
	[ST_COMPOSITES] = RT_STAT_DECL("composites", "count", "of those, composite commands"),
};

static void to_view(const struct sched_view *v, Kb__View *out)
{
	kb__view__init(out);
	out->space = v->space;
	out->addr = v->addr;
	out->rows = v->rows;
	out->cols = v->cols;
	out->row_stride = v->row_stride;
	out->dtype = v->dtype;
	out->trans = v->trans;
}

void sched_stage_msg_fill(struct sched_stage_msg *m,
			  const struct sched_stage *st, uint64_t command,
			  uint32_t index)
{
	kb__stage__init(&m->stage);
	m->stage.command = command;
	m->stage.index = index;
	m->stage.engine = st->engine;
	m->stage.op_kind = (char *)st->op_kind;
	m->stage.op_name = (char *)st->op_name;
	for (uint32_t i = 0; i < st->n_in; i++) {
		to_view(&st->in[i], &m->in[i]);
		m->in_ptrs[i] = &m->in[i];
	}
	m->stage.n_in = st->n_in;
	m->stage.in = m->in_ptrs;
	to_view(&st->out, &m->out);
	m->stage.out = &m->out;
	if (st->has_acc) {
		to_view(&st->acc, &m->acc);
		m->stage.acc = &m->acc;
	}
	m->stage.first = st->first;
	m->stage.last = st->last;
	m->stage.stationary_held = st->stationary_held;
	if (st->op) {
		m->stage.n_extras = st->op->n_extras;
		m->stage.extras = st->op->extras;
	}
}

static enum pe_unit engine_unit(Kb__Engine engine)
{
	switch (engine) {
	case KB__ENGINE__ENGINE_GEMM:
		return PE_GEMM;
	case KB__ENGINE__ENGINE_MATH:
		return PE_MATH;
	default:
		return PE_DMA; /* both DMA channels */
	}
}

/* The scheduler acts only at the time of the delivery it handles: what it
 * sends was made ready by that delivery (every earlier one released what
 * it could), so it carries that delivery's critical path plus the
 * doorbell to its destination (rt/path.h). */
static enum rt_err send_action(struct rt_ctx *ctx, struct sched_component *sc,
			       const struct sched_action *a, const struct rt_path *path)
{
	uint32_t pes = rt_cfg(ctx)->pes;
	Kb__Payload payload = KB__PAYLOAD__INIT;
	Kb__CommandDone done = KB__COMMAND_DONE__INIT;
	struct sched_stage_msg m;
	struct rt_path arrival;
	uint32_t dst;

	if (a->kind == SCHED_COMMAND_DONE) {
		done.id = a->id;
		payload.body_case = KB__PAYLOAD__BODY_COMMAND_DONE;
		payload.command_done = &done;
		dst = pe_component_id(pes, sc->rank, sc->pe, PE_HOST);
	} else {
		sched_stage_msg_fill(&m, &a->cmd->plan.stages[a->stage],
				     a->cmd->id, a->stage);
		payload.body_case = KB__PAYLOAD__BODY_STAGE;
		payload.stage = &m.stage;
		dst = pe_component_id(pes, sc->rank, sc->pe,
				      engine_unit(m.stage.engine));
		rt_stat_add_h(ctx, sc->stat[ST_STAGES], 1);
	}
	if (!path)
		return rt_send(ctx, dst, rt_now(ctx), 0, &payload);
	arrival = *path;
	rt_path_add(&arrival, RT_PATH_DOORBELL, rt_latency_to(ctx, dst));
	return rt_send_path(ctx, dst, rt_now(ctx), 0, 0, &payload, &arrival);
}

static enum rt_err flush(struct rt_ctx *ctx, struct sched_component *sc,
			 const struct rt_path *path)
{
	enum rt_err err = RT_EOK;

	for (uint32_t i = 0; !err && i < sc->core.n_actions; i++)
		err = send_action(ctx, sc, &sc->core.actions[i], path);
	sc->core.n_actions = 0;
	return err;
}

static enum rt_err sched_init(struct rt_ctx *ctx, void *state)
{
	struct sched_component *sc = state;
	const struct rt_component_desc *me = rt_self_desc(ctx);

	sc->rank = me->rank;
	sc->pe = me->pe;
	rt_stat_declare_all(ctx, sched_stats, 3, sc->stat);
	sched_core_init(&sc->core, rt_cfg(ctx), me->rank, me->pe);
	return RT_EOK;
}

static enum rt_err sched_handle(struct rt_ctx *ctx, void *state,
				const struct rt_delivery *d)
{
	struct sched_component *sc = state;
	const Kb__Payload *msg = d->msg;
	enum rt_err err;

	if (d->is_timer || !msg)
		return RT_EOK; /* the scheduler sets no timers */
	switch (msg->body_case) {
	case KB__PAYLOAD__BODY_COMMAND:
		rt_stat_add_h(ctx, sc->stat[ST_COMMANDS], 1);
		if (msg->command->body_case == KB__COMMAND__BODY_COMPOSITE)
			rt_stat_add_h(ctx, sc->stat[ST_COMPOSITES], 1);
		err = sched_core_submit(&sc->core, msg->command, d->send_ps);
		break;
	case KB__PAYLOAD__BODY_STAGE_DONE:
		err = sched_core_stage_done(&sc->core, msg->stage_done->command,
					    msg->stage_done->index);
		break;
	default:
		return rt_fail(RT_EPROTOCOL,
			       "scheduler r%u.pe%u: unexpected message (body %d) "
			       "from component %u", sc->rank, sc->pe,
			       (int)msg->body_case, d->src);
	}
	return err ? err : flush(ctx, sc, d->path);
}

/* A scheduler still holding commands when the run ends left work undone
 * (a stage whose StageDone never came, or a command never admitted). */
static enum rt_err sched_fini(struct rt_ctx *ctx, void *state)
{
	struct sched_component *sc = state;
	enum rt_err undone = RT_EOK;

	if (sc->core.n_cmds) {
		const struct sched_cmd *c = sc->core.cmds[0];

		undone = rt_fail(RT_EUNFINISHED,
				 "scheduler did not finish: it holds %u command(s); the oldest, "
				 "command %llu, is %s with %u of %u stages done",
				 sc->core.n_cmds, (unsigned long long)c->id,
				 c->running ? "running" : "queued", c->n_done, c->plan.n_stages);
	}
	sched_core_release(&sc->core);
	return undone;
}

/* A staging region as the first one in use or free (0) or the other (1):
 * the two are alike, so alternating between them is one state. */
static uint64_t region_rel(int region, int base)
{
	return region < 0 ? 2 : region == base ? 0 : 1;
}

/* Fast-forward (ADR 0059): the commands held, in order, by how far each
 * got (no ids, no addresses: its hazards show in running and barrier), and
 * the free staging regions. The scheduler keeps no time of its own. */
static uint64_t sched_digest(const struct rt_ctx *ctx, const void *state, uint64_t t)
{
	const struct sched_core *core = &((const struct sched_component *)state)->core;
	uint64_t h = ((uint64_t)core->n_cmds << 8) | core->n_free_regions;

	int base = core->n_free_regions ? core->free_regions[0] : -1;

	(void)ctx;
	for (uint32_t i = 0; i < core->n_cmds && base < 0; i++)
		base = core->cmds[i]->region;
	for (uint32_t i = 0; i < core->n_free_regions; i++)
		h = rt_ff_mix(h, region_rel(core->free_regions[i], base));
	for (uint32_t i = 0; i < core->n_cmds; i++) {
		const struct sched_cmd *c = core->cmds[i];

		h = rt_ff_mix(h, ((uint64_t)c->running << 1) | c->barrier);
		h = rt_ff_mix(h, (region_rel(c->region, base) << 32) | c->n_done);
		h = rt_ff_mix(h, ((uint64_t)c->plan.n_stages << 32) ^ c->plan.staging_bytes);
		h = rt_ff_mix(h, rt_ff_rel(c->issued_ps, t));
		for (uint32_t e = 0; e < SCHED_ENGINES; e++)
			h = rt_ff_mix(h, c->next[e]);
		for (uint32_t s = 0; c->pending && s < c->plan.n_stages; s++)
			h = rt_ff_mix(h, ((uint64_t)c->pending[s] << 1) | c->done[s]);
	}
	return h;
}

const struct rt_component_ops sched_ops = {
	.name = "sched",
	.state_size = sizeof(struct sched_component),
	.init = sched_init,
	.handle = sched_handle,
	.fini = sched_fini,
	.ff_digest = sched_digest,
	.check = npu_check_payload,
};
