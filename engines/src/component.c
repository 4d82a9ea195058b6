/* component.c — the PE_DMA, PE_GEMM and PE_MATH components.
 *
 * One engine = one model + one or two channels (PE_DMA: read and write).
 * A channel runs its stages one at a time in arrival order:
 *
 *   start = max(now, channel free); end = start + latency * cycle_ps
 *
 * and sets a timer for `end` (tag = channel index). At the timer the stage's
 * data effect is applied (data mode), the op log, trace and stats are
 * written, StageDone goes back to the PE's scheduler and the next queued
 * stage starts. Stages are checked on arrival (shape and bounds, in both
 * modes), so a bad stage fails the run at once, naming itself. */
#include "eng.h"

#include <stdio.h>
#include <stdlib.h>

#include "rt/pe.h"

#define MAX_CHANNELS 2

/* Stages waiting on (and, at the head, running on) one channel. */
struct channel {
	const char *name;    /* op-log engine: "dma_read", "gemm", ... */
	Kb__Stage **ring;    /* owned deep copies, FIFO */
	size_t head, len, cap;
	bool busy;           /* ring[head] is running */
	uint64_t start_ps;   /* of the running stage */
	uint64_t end_ps;
	uint64_t free_ps;    /* when the channel last went idle */
};

struct engine {
	enum eng_class cls;
	struct eng_model model;
	uint32_t rank, pe;
	uint32_t sched;      /* component id of the PE's scheduler */
	unsigned n_channels;
	struct channel ch[MAX_CHANNELS];
};

/* ---------------------------------------------------------------- queue */

/* A deep copy of `s` the engine owns (the delivery is only lent). */
static Kb__Stage *stage_copy(const Kb__Stage *s)
{
	return (Kb__Stage *)rt_wire_copy(&s->base);
}

static enum rt_err channel_push(struct channel *ch, Kb__Stage *s)
{
	if (ch->len == ch->cap) {
		size_t cap = ch->cap ? 2 * ch->cap : 8;
		Kb__Stage **ring = malloc(cap * sizeof(*ring));

		if (!ring)
			return rt_fail(RT_ENOMEM, "engine queue: out of memory");
		for (size_t i = 0; i < ch->len; i++)
			ring[i] = ch->ring[(ch->head + i) % ch->cap];
		free(ch->ring);
		ch->ring = ring;
		ch->head = 0;
		ch->cap = cap;
	}
	ch->ring[(ch->head + ch->len) % ch->cap] = s;
	ch->len++;
	return RT_EOK;
}

static Kb__Stage *channel_front(const struct channel *ch)
{
	return ch->ring[ch->head];
}

static void channel_pop(struct channel *ch)
{
	kb__stage__free_unpacked(ch->ring[ch->head], NULL);
	ch->head = (ch->head + 1) % ch->cap;
	ch->len--;
}

static void channel_release(struct channel *ch)
{
	while (ch->len)
		channel_pop(ch);
	free(ch->ring);
	ch->ring = NULL;
	ch->cap = 0;
}

/* ---------------------------------------------------------------- engine */

/* Memory of this PE: mapped in data mode; sizes only in timing mode. */
static void engine_memory(struct rt_ctx *ctx, const struct engine *e,
			  struct eng_memory *mem)
{
	const struct rt_config *cfg = rt_cfg(ctx);

	if (rt_job(ctx)->mode == RT_MODE_DATA) {
		mem->hbm = rt_hbm(ctx, e->rank, &mem->hbm_size);
		mem->tcm = rt_tcm(ctx, e->rank, e->pe, &mem->tcm_size);
		return;
	}
	mem->hbm = NULL;
	mem->tcm = NULL;
	mem->hbm_size = cfg->hbm_bytes;
	mem->tcm_size = cfg->tcm_scratch_bytes + cfg->tcm_staging_bytes;
}

static const char *model_name(const struct rt_config *cfg, enum eng_class cls)
{
	const char *name = cls == ENG_DMA    ? cfg->dma_model
			   : cls == ENG_GEMM ? cfg->gemm_model
					     : cfg->math_model;
	const char *def = cls == ENG_DMA    ? "linear"
			  : cls == ENG_GEMM ? "systolic"
					    : "simd";

	return name[0] ? name : def;
}

static enum rt_err engine_init(struct rt_ctx *ctx, struct engine *e,
			       enum eng_class cls)
{
	const struct rt_component_desc *self = rt_self_desc(ctx);
	const struct rt_config *cfg = rt_cfg(ctx);
	enum rt_err err;

	e->cls = cls;
	e->rank = self->rank;
	e->pe = self->pe;
	e->sched = pe_component_id(cfg->pes, self->rank, self->pe, PE_SCHED);
	e->n_channels = cls == ENG_DMA ? 2 : 1;
	e->ch[0].name = cls == ENG_DMA ? "dma_read" : eng_class_name(cls);
	e->ch[1].name = "dma_write";
	err = eng_model_init(&e->model, cls, model_name(cfg, cls), cfg);
	if (err)
		return err; /* the daemon names this component */
	return RT_EOK;
}

/* Starts the channel's head stage: its end time becomes a timer. */
static enum rt_err channel_start(struct rt_ctx *ctx, struct engine *e,
				 unsigned idx)
{
	struct channel *ch = &e->ch[idx];
	uint64_t now = rt_now(ctx), cycles;
	enum rt_err err = eng_model_latency(&e->model, channel_front(ch),
					    &cycles);

	if (err)
		return err; /* the daemon names this component */
	ch->start_ps = now > ch->free_ps ? now : ch->free_ps;
	ch->end_ps = ch->start_ps
		     + eng_mul_sat(cycles, rt_config_cycle_ps(rt_cfg(ctx)));
	ch->busy = true;
	return rt_timer(ctx, ch->end_ps, idx);
}

static unsigned channel_of(const Kb__Stage *s)
{
	return s->engine == KB__ENGINE__ENGINE_DMA_WRITE ? 1 : 0;
}

/* A Stage arrived: check it, queue a copy, start it if the channel idles. */
static enum rt_err engine_accept(struct rt_ctx *ctx, struct engine *e,
				 const Kb__Stage *s)
{
	struct eng_memory mem;
	struct channel *ch;
	Kb__Stage *copy;
	enum rt_err err;

	engine_memory(ctx, e, &mem);
	err = eng_stage_check(s, e->cls, &mem);
	if (err)
		return err; /* the daemon names this component */
	copy = stage_copy(s);
	if (!copy)
		return rt_fail(RT_ENOMEM, "no memory to queue a stage");
	ch = &e->ch[channel_of(s)];
	err = channel_push(ch, copy);
	if (err) {
		kb__stage__free_unpacked(copy, NULL);
		return err;
	}
	return ch->busy ? RT_EOK : channel_start(ctx, e, channel_of(s));
}

/* Op log, trace slice and stats of a finished stage. */
static enum rt_err record(struct rt_ctx *ctx, const struct channel *ch, unsigned channel,
			  const Kb__Stage *s)
{
	struct rt_oplog_rec rec = {
		.start_ps = ch->start_ps,
		.end_ps = ch->end_ps,
		.engine = ch->name,
		.op_kind = s->op_kind,
		.op_name = s->op_name,
		.bytes = eng_stage_bytes(s),
		.elements = eng_stage_elements(s),
		.command = s->command,
		.stage = s->index,
	};
	struct rt_trace_span span = {
		.track = 1 + channel, /* channels run concurrently: a track each */
		.track_name = ch->name,
		.name = s->op_name,
		.cat = s->op_kind,
		.start_ps = ch->start_ps,
		.end_ps = ch->end_ps,
		.has_command = true,
		.has_stage = true,
		.command = s->command,
		.stage = s->index,
	};
	char stat[48];
	enum rt_err err = rt_oplog(ctx, &rec);

	if (!err)
		err = rt_trace_slice(ctx, &span);
	rt_stat_add(ctx, "busy_ps", ch->end_ps - ch->start_ps);
	rt_stat_add(ctx, "stages", 1);
	rt_stat_add(ctx, "bytes", rec.bytes);
	snprintf(stat, sizeof(stat), "%s_count", ch->name);
	rt_stat_add(ctx, stat, 1);
	snprintf(stat, sizeof(stat), "%s_busy_ps", ch->name);
	rt_stat_add(ctx, stat, ch->end_ps - ch->start_ps);
	snprintf(stat, sizeof(stat), "%s_bytes", ch->name);
	rt_stat_add(ctx, stat, rec.bytes);
	return err;
}

static enum rt_err send_done(struct rt_ctx *ctx, const struct engine *e,
			     const struct channel *ch, const Kb__Stage *s)
{
	Kb__StageDone done = KB__STAGE_DONE__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;

	done.command = s->command;
	done.index = s->index;
	msg.body_case = KB__PAYLOAD__BODY_STAGE_DONE;
	msg.stage_done = &done;
	return rt_send(ctx, e->sched, rt_now(ctx), 0, &msg);
}

/* The channel's running stage reached its end time. */
static enum rt_err channel_finish(struct rt_ctx *ctx, struct engine *e,
				  uint64_t tag)
{
	struct channel *ch;
	const Kb__Stage *s;
	struct eng_memory mem;
	enum rt_err err = RT_EOK;

	if (tag >= e->n_channels || !e->ch[tag].busy)
		return rt_fail(RT_EINVAL, "timer %llu matches no running stage",
			       (unsigned long long)tag);
	ch = &e->ch[tag];
	s = channel_front(ch);
	if (rt_job(ctx)->mode == RT_MODE_DATA) {
		engine_memory(ctx, e, &mem);
		err = eng_model_execute(&e->model, s, &mem);
		if (err)
			return err; /* the daemon names this component */
	}
	err = record(ctx, ch, (unsigned)tag, s);
	if (!err)
		err = send_done(ctx, e, ch, s);
	if (err)
		return err;
	channel_pop(ch);
	ch->busy = false;
	ch->free_ps = ch->end_ps;
	return ch->len ? channel_start(ctx, e, (unsigned)tag) : RT_EOK;
}

static enum rt_err engine_handle(struct rt_ctx *ctx, void *state,
				 const struct rt_delivery *d)
{
	struct engine *e = state;

	if (d->is_timer)
		return channel_finish(ctx, e, d->tag);
	if (!d->msg || d->msg->body_case != KB__PAYLOAD__BODY_STAGE)
		return rt_fail(RT_EPROTOCOL,
			       "expected a Stage message from component %u, got payload body %d",
			       d->src,
			       d->msg ? (int)d->msg->body_case : -1);
	return engine_accept(ctx, e, d->msg->stage);
}

/* An engine still holding stages when the run ends left work undone. */
static enum rt_err engine_fini(struct rt_ctx *ctx, void *state)
{
	struct engine *e = state;
	enum rt_err undone = RT_EOK;

	for (unsigned i = 0; i < MAX_CHANNELS; i++) {
		struct channel *ch = &e->ch[i];

		if (ch->len && !undone)
			undone = rt_fail(RT_EUNFINISHED,
					 "engine %s did not finish: it holds %zu stage(s); the "
					 "first is stage %u of command %llu (%s)",
					 ch->name, ch->len, channel_front(ch)->index,
					 (unsigned long long)channel_front(ch)->command,
					 channel_front(ch)->op_name);
		channel_release(ch);
	}
	eng_model_release(&e->model);
	return undone;
}

static enum rt_err dma_init(struct rt_ctx *ctx, void *state)
{
	return engine_init(ctx, state, ENG_DMA);
}

static enum rt_err gemm_init(struct rt_ctx *ctx, void *state)
{
	return engine_init(ctx, state, ENG_GEMM);
}

static enum rt_err math_init(struct rt_ctx *ctx, void *state)
{
	return engine_init(ctx, state, ENG_MATH);
}

const struct rt_component_ops eng_dma_ops = {
	.name = "dma",
	.state_size = sizeof(struct engine),
	.init = dma_init,
	.handle = engine_handle,
	.fini = engine_fini,
};

const struct rt_component_ops eng_gemm_ops = {
	.name = "gemm",
	.state_size = sizeof(struct engine),
	.init = gemm_init,
	.handle = engine_handle,
	.fini = engine_fini,
};

const struct rt_component_ops eng_math_ops = {
	.name = "math",
	.state_size = sizeof(struct engine),
	.init = math_init,
	.handle = engine_handle,
	.fini = engine_fini,
};
