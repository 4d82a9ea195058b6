/* component.c — the PE_DMA, PE_GEMM and PE_MATH components.
 *
 * One engine = one model + one or two channels (PE_DMA: read and write).
 * GEMM and MATH channels run their stages one at a time in arrival order:
 *
 *   start = max(now, channel free); end = start + latency * cycle_ps
 *
 * A DMA channel keeps up to dma.outstanding transfers in flight (the
 * descriptor setup and HBM latency of the next transfer overlap the data of
 * the current one) and retires them in order. It is dma.queues queues that
 * move one transfer in parallel: the transfer's rows are spread over its
 * lanes (eng_dma_lanes) and the model times the largest piece, the one a
 * queue moves. A transfer started at `now` with that latency `cycles` =
 * setup + wire (setup = dma.setup_cycles):
 *
 *   wire_start = max(now + setup, previous wire_end)
 *   wire_end   = wire_start + wire          (the channel's own bandwidth)
 *   end        = wire_end                                 (hbm.model ideal)
 *              = wire_end + HBM latency   (shared model that can never
 *                saturate: 2 x pes x dma.bytes_per_cycle <= hbm.bytes_per_cycle)
 *              = the rank memory's answer to HbmRequest   (otherwise, for
 *                transfers that touch HBM: engines/src/hbm)
 *
 * With dma.outstanding = 1 and hbm.model = ideal this is exactly the
 * one-at-a-time rule above. At each stage's end (a timer, tag = channel
 * index) its data effect is applied (data mode), the op log, trace and stats
 * are written, StageDone goes back to the PE's scheduler and the next queued
 * stage starts. Stages are checked on arrival (shape and bounds, in both
 * modes), so a bad stage fails the run at once, naming itself.
 *
 * Over 600 lines on purpose: the three engine components share one channel
 * machinery (admission, start, finish, the DMA's transfers in flight and
 * its HBM handshake) described above; the models have files of their
 * own. */
#include "eng.h"
#include "rt/ff.h"

#include <stdio.h>
#include <stdlib.h>

#include "rt/job.h"
#include "npu/memory.h"
#include "npu/payload.h"
#include "npu/pe.h"

#define MAX_CHANNELS 2

/* A queued stage; the first `inflight` of a channel have started. */
struct queued {
	Kb__Stage *s;      /* owned deep copy */
	uint64_t arrival_ps; /* when it reached the engine (op-log issue_ps) */
	uint64_t start_ps; /* GEMM, MATH: when it started; DMA: wire start */
	uint64_t wire_end_ps; /* DMA: the channel alone is through with it */
	uint64_t data_end_ps; /* DMA: its last byte is through, once known */
	uint64_t end_ps;   /* when it completes, once known */
	bool known;        /* end_ps is set */
	bool has_path;     /* paths below are known (rt/path.h) */
	struct rt_path arrival_path; /* critical path to arrival_ps */
	struct rt_path end_path;   /* ... and to end_ps, once known */
};

/* Stages waiting on (and, at the head, running on) one channel. */
struct channel {
	const char *name;    /* op-log engine: "dma_read", "gemm", ... */
	struct queued *ring; /* FIFO */
	size_t head, len, cap;
	size_t inflight;     /* started stages, from head */
	size_t limit;        /* most stages in flight */
	bool armed;          /* a timer is set for the head's end */
	uint64_t retired;    /* stages popped so far (HbmRequest ids) */
	uint64_t free_ps;    /* when the last started stage ends (wire end) */
	struct rt_path free_path; /* critical path to free_ps */
	bool free_has_path;
	uint64_t data_end_ps;/* DMA: end of the last recorded transfer's data */
	uint32_t stat[4];    /* its statistics (channel_stats), by handle */
};

/* The statistics of an engine, declared at init and added to by handle
 * (a stage costs array indexing, not name lookups). The op counts are
 * what energy.* prices (docs/config.md, "energy"). */
enum engine_stat {
	ST_BUSY, ST_STAGES, ST_BYTES, ST_TCM_READ, ST_TCM_WRITE,
	ST_HBM_READ, ST_HBM_WRITE,                 /* DMA */
	ST_MACS_F16, ST_MACS_BF16, ST_MACS_F32,    /* GEMM, by operand dtype */
	ST_SIMPLE_OPS, ST_EXP_OPS,                 /* MATH */
	ST_COUNT
};

static const struct rt_stat_decl engine_stats[ST_COUNT] = {
	[ST_BUSY] = RT_STAT_DECL("busy_ps", "ps",
			"time the engine had a stage running (union of its stage intervals)"),
	[ST_STAGES] = RT_STAT_DECL("stages", "count", "stages the engine ran"),
	[ST_BYTES] = RT_STAT_DECL("bytes", "bytes",
			"bytes its stages moved or read (docs/stages.md)"),
	[ST_TCM_READ] = RT_STAT_DECL("tcm_read_bytes", "bytes",
			"bytes its stages read from TCM (inputs, the GEMM accumulator after the first K step)"),
	[ST_TCM_WRITE] = RT_STAT_DECL("tcm_write_bytes", "bytes",
			"bytes its stages wrote to TCM (outputs, the GEMM accumulator before the last K step)"),
	[ST_HBM_READ] = RT_STAT_DECL("hbm_read_bytes", "bytes",
			"bytes its transfers read from HBM"),
	[ST_HBM_WRITE] = RT_STAT_DECL("hbm_write_bytes", "bytes",
			"bytes its transfers wrote to HBM"),
	[ST_MACS_F16] = RT_STAT_DECL("macs_f16", "MACs",
			"multiply-accumulates with f16 operands (f32 accumulation)"),
	[ST_MACS_BF16] = RT_STAT_DECL("macs_bf16", "MACs",
			"multiply-accumulates with bf16 operands (f32 accumulation)"),
	[ST_MACS_F32] = RT_STAT_DECL("macs_f32", "MACs", "multiply-accumulates with f32 operands"),
	[ST_SIMPLE_OPS] = RT_STAT_DECL("simple_ops", "element ops",
			"element operations of simple and reduction ops (add, mul, max, copy, rsum, ...)"),
	[ST_EXP_OPS] = RT_STAT_DECL("exp_ops", "element ops",
			"element operations of transcendental ops (exp and friends)"),
};

/* Which of engine_stats a class declares: the common ones (up to
 * ST_TCM_WRITE), then its own block. */
static bool engine_has_stat(enum eng_class cls, unsigned i)
{
	if (i <= ST_TCM_WRITE)
		return true;
	if (i <= ST_HBM_WRITE)
		return cls == ENG_DMA;
	if (i <= ST_MACS_F32)
		return cls == ENG_GEMM;
	return cls == ENG_MATH;
}

/* Per channel: stages, busy time, bytes, elements. */
static const struct rt_stat_decl channel_stats[4][4] = {
	{ RT_STAT_DECL("dma_read_count", "count", "DMA read transfers (HBM to TCM)"),
	  RT_STAT_DECL("dma_read_busy_ps", "ps",
		  "time the read channel had a transfer in flight (union)"),
	  RT_STAT_DECL("dma_read_bytes", "bytes", "bytes the read channel moved"),
	  RT_STAT_DECL("dma_read_elements", "elements", "elements the read channel moved") },
	{ RT_STAT_DECL("dma_write_count", "count", "DMA write transfers (TCM to HBM)"),
	  RT_STAT_DECL("dma_write_busy_ps", "ps",
		  "time the write channel had a transfer in flight (union)"),
	  RT_STAT_DECL("dma_write_bytes", "bytes", "bytes the write channel moved"),
	  RT_STAT_DECL("dma_write_elements", "elements", "elements the write channel moved") },
	{ RT_STAT_DECL("gemm_count", "count", "GEMM stages"),
	  RT_STAT_DECL("gemm_busy_ps", "ps", "time the GEMM array had a stage running"),
	  RT_STAT_DECL("gemm_bytes", "bytes", "operand and result bytes of the GEMM stages"),
	  RT_STAT_DECL("gemm_elements", "elements", "multiply-accumulates of the GEMM stages (M x N x K)") },
	{ RT_STAT_DECL("math_count", "count", "MATH stages"),
	  RT_STAT_DECL("math_busy_ps", "ps", "time the vector engine had a stage running"),
	  RT_STAT_DECL("math_bytes", "bytes", "operand and result bytes of the MATH stages"),
	  RT_STAT_DECL("math_elements", "elements", "elements the MATH stages computed") },
};

struct engine {
	enum eng_class cls;
	struct eng_model model;
	uint32_t rank, pe;
	uint32_t sched;      /* component id of the PE's scheduler */
	uint32_t hbm;        /* component id of the rank's memory (DMA) */
	bool hbm_shared;     /* DMA transfers ask the rank's memory */
	uint64_t setup_ps;   /* DMA: the setup part of a transfer */
	uint64_t hbm_lat_ps; /* DMA, timing HBM itself: the HBM latency */
	unsigned n_channels;
	struct channel ch[MAX_CHANNELS];
	uint32_t stat[ST_COUNT]; /* handles (RT_STAT_NONE: not this class's) */
};

/* ---------------------------------------------------------------- queue */

static enum rt_err channel_push(struct channel *ch, Kb__Stage *s, uint64_t now)
{
	if (ch->len == ch->cap) {
		size_t cap = ch->cap ? 2 * ch->cap : 8;
		struct queued *ring = malloc(cap * sizeof(*ring));

		if (!ring)
			return rt_fail(RT_ENOMEM, "engine queue: out of memory");
		for (size_t i = 0; i < ch->len; i++)
			ring[i] = ch->ring[(ch->head + i) % ch->cap];
		free(ch->ring);
		ch->ring = ring;
		ch->head = 0;
		ch->cap = cap;
	}
	ch->ring[(ch->head + ch->len) % ch->cap] = (struct queued){ .s = s, .arrival_ps = now };
	ch->len++;
	return RT_EOK;
}

/* The i-th queued stage from the head. */
static struct queued *channel_at(const struct channel *ch, size_t i)
{
	return &ch->ring[(ch->head + i) % ch->cap];
}

static void channel_pop(struct channel *ch)
{
	rt_msg_free(ch->ring[ch->head].s);
	ch->head = (ch->head + 1) % ch->cap;
	ch->len--;
	ch->retired++;
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
		mem->hbm = npu_hbm(ctx, e->rank, &mem->hbm_size);
		mem->tcm = npu_tcm(ctx, e->rank, e->pe, &mem->tcm_size);
		return;
	}
	mem->hbm = NULL;
	mem->tcm = NULL;
	mem->hbm_size = cfg->hbm_bytes;
	mem->tcm_size = npu_tcm_bytes(cfg);
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

static void engine_declare_stats(struct rt_ctx *ctx, struct engine *e)
{
	for (unsigned i = 0; i < ST_COUNT; i++)
		e->stat[i] = engine_has_stat(e->cls, i) ? rt_stat_declare(ctx, &engine_stats[i])
							 : RT_STAT_NONE;
	for (unsigned c = 0; c < e->n_channels; c++)
		rt_stat_declare_all(ctx, channel_stats[e->cls == ENG_DMA ? c : 1 + e->cls], 4,
				    e->ch[c].stat);
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
	engine_declare_stats(ctx, e);
	for (unsigned i = 0; i < MAX_CHANNELS; i++)
		e->ch[i].limit = cls == ENG_DMA && cfg->dma_outstanding ? cfg->dma_outstanding : 1;
	if (cls == ENG_DMA) {
		e->hbm_shared = !eng_hbm_local(cfg);
		/* same rule as the memory's answer link (workloads/pe.c): >= 1 cycle */
		if (!eng_hbm_ideal(cfg))
			e->hbm_lat_ps = (cfg->hbm_latency_cycles ? cfg->hbm_latency_cycles : 1) *
					rt_config_cycle_ps(cfg);
		e->hbm = pe_hbm_component_id(cfg->ranks, cfg->pes, self->rank);
		e->setup_ps = eng_mul_sat(cfg->dma_setup_cycles, rt_config_cycle_ps(cfg));
	}
	err = eng_model_init(&e->model, cls, model_name(cfg, cls), cfg);
	if (err)
		return err; /* the daemon names this component */
	return RT_EOK;
}

/* The HBM side of a DMA stage: the view in HBM (read: source, write:
 * destination), NULL for a TCM-to-TCM copy. */
static const Kb__View *hbm_view(const Kb__Stage *s)
{
	const Kb__View *src = s->n_in ? s->in[0] : NULL;

	if (src && src->space == KB__SPACE__SPACE_HBM)
		return src;
	if (s->out && s->out->space == KB__SPACE__SPACE_HBM)
		return s->out;
	return NULL;
}

/* How one DMA transfer is spread over its channel's queues. */
struct lanes {
	uint32_t n;          /* queues it moves on */
	uint64_t lane_bytes; /* bytes of its largest piece */
};

/* The transfer's lanes and the model's cycles for its largest piece: the
 * stage as one queue sees it (same views, the piece's rows). */
static enum rt_err dma_piece_latency(struct rt_ctx *ctx, const struct engine *e,
				     const Kb__Stage *s, struct lanes *ln, uint64_t *cycles)
{
	Kb__Stage piece = *s;
	Kb__View in = *s->in[0], out = *s->out, *in_p = &in;
	uint64_t rows;

	ln->n = eng_dma_lanes(rt_cfg(ctx), in.rows, &rows);
	in.rows = (uint32_t)rows;
	out.rows = (uint32_t)rows;
	piece.in = &in_p;
	piece.out = &out;
	ln->lane_bytes = eng_stage_bytes(&piece);
	return eng_model_latency(&e->model, ln->n > 1 ? &piece : s, NULL, cycles);
}

/* Where a GEMM or MATH stage stands in its channel's stream: it waited
 * for the stage before it (that one ends at ch->free_ps), and whether the
 * scheduler says the array still holds its B tile. */
static struct eng_stage_ctx stage_ctx(const struct channel *ch, const struct queued *q,
				      uint64_t cycle_ps)
{
	struct eng_stage_ctx c = { false, 0, false };

	if (ch->retired + ch->inflight > 0 && q->arrival_ps < ch->free_ps) {
		c.queued = true;
		c.lead_cycles = (ch->free_ps - q->arrival_ps) / cycle_ps;
	}
	c.stationary_held = ch->retired + ch->inflight > 0 && q->s->stationary_held;
	return c;
}

/* Asks the rank's memory for a started transfer's completion. `ws_path`
 * is the critical path to the wire start, `now_path` to now (or NULL). */
static enum rt_err hbm_request(struct rt_ctx *ctx, const struct engine *e, unsigned idx,
			       uint64_t id, const Kb__View *v, uint64_t bytes,
			       const struct lanes *ln, uint64_t issue_ps, uint64_t wire_end_ps,
			       const struct rt_path *ws_path, const struct rt_path *now_path)
{
	Kb__HbmRequest req = KB__HBM_REQUEST__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t lat = rt_topology_latency(rt_topo(ctx), rt_self(ctx), e->hbm);
	uint64_t now = rt_now(ctx);
	struct rt_path arrival;

	req.id = id;
	req.channel = idx;
	req.addr = v->addr;
	req.bytes = bytes;
	req.lanes = ln->n;
	req.lane_bytes = ln->lane_bytes;
	req.issue_ps = issue_ps;
	req.wire_end_ps = wire_end_ps;
	msg.body_case = KB__PAYLOAD__BODY_HBM_REQUEST;
	msg.hbm_request = &req;
	/* the link's latency is the setup: it lands when the first byte may
	 * move, or a cycle after now (setup 0: the request's own trip) */
	if (!ws_path)
		return rt_send(ctx, e->hbm, issue_ps >= now + lat ? issue_ps - lat : now, 0, &msg);
	if (issue_ps >= now + lat)
		return rt_send_path(ctx, e->hbm, issue_ps - lat, 0, 0, &msg, ws_path);
	arrival = *now_path;
	rt_path_add(&arrival, RT_PATH_DOORBELL, lat);
	return rt_send_path(ctx, e->hbm, now, 0, 0, &msg, &arrival);
}

/* Sets the timer for the head's end once it is known. A head that was
 * through before the one ahead of it retired ends now, on the path of
 * that retirement (`now_path`, the path to now, or NULL). */
static enum rt_err channel_arm(struct rt_ctx *ctx, struct channel *ch, unsigned idx,
			       const struct rt_path *now_path)
{
	struct queued *q;
	uint64_t now = rt_now(ctx);

	if (!ch->inflight || ch->armed)
		return RT_EOK;
	q = channel_at(ch, 0);
	if (!q->known)
		return RT_EOK;
	ch->armed = true;
	if (q->end_ps < now) {
		q->has_path = q->has_path && now_path;
		if (now_path)
			q->end_path = *now_path;
	}
	return rt_timer(ctx, q->end_ps > now ? q->end_ps : now, idx);
}

/* The class of an engine's own time on the critical path. */
static enum rt_path_class engine_class(const struct engine *e)
{
	return e->cls == ENG_GEMM ? RT_PATH_GEMM : RT_PATH_MATH;
}

/* Starts the next queued stage of channel `idx` at now. Its critical path
 * (rt/path.h) starts from whichever came last: its own arrival, or what
 * let it start now (`now_path`: the retirement that freed a slot), then
 * the channel being free. */
static enum rt_err channel_start_one(struct rt_ctx *ctx, struct engine *e, unsigned idx,
				     const struct rt_path *now_path)
{
	struct channel *ch = &e->ch[idx];
	struct queued *q = channel_at(ch, ch->inflight);
	uint64_t now = rt_now(ctx), cycle = rt_config_cycle_ps(rt_cfg(ctx)), cycles, total, setup;
	const struct rt_path *at_now = q->has_path ? &q->arrival_path : NULL;
	struct rt_path ws = { 0 };
	struct lanes ln = { 1, 0 };
	struct eng_stage_ctx sc = stage_ctx(ch, q, cycle);
	const Kb__View *v;
	enum rt_err err = e->cls == ENG_DMA ? dma_piece_latency(ctx, e, q->s, &ln, &cycles)
					    : eng_model_latency(&e->model, q->s, &sc, &cycles);

	if (err)
		return err; /* the daemon names this component */
	if (q->arrival_ps < now) /* a retirement at now let it start */
		at_now = q->has_path ? now_path : NULL;
	q->has_path = at_now != NULL;
	ch->inflight++;
	total = eng_mul_sat(cycles, cycle);
	if (e->cls != ENG_DMA) {
		q->start_ps = now > ch->free_ps ? now : ch->free_ps;
		q->end_ps = q->start_ps + total;
		q->known = true;
		if (at_now) {
			q->end_path = *rt_path_later(at_now, now, &ch->free_path, ch->free_ps);
			rt_path_add(&q->end_path, engine_class(e), total);
		}
		ch->free_ps = q->end_ps;
		ch->free_path = q->end_path;
		return RT_EOK;
	}
	/* DMA: setup overlaps the previous transfer's data, the wire does not */
	setup = e->setup_ps < total ? e->setup_ps : total;
	q->start_ps = now + setup > ch->free_ps ? now + setup : ch->free_ps;
	if (at_now) {
		ws = *at_now;
		rt_path_add(&ws, RT_PATH_DMA_SETUP, setup);
		ws = *rt_path_later(&ws, now + setup, &ch->free_path, ch->free_ps);
	}
	ch->free_ps = q->start_ps + (total - setup);
	q->wire_end_ps = ch->free_ps;
	ch->free_path = ws;
	rt_path_add(&ch->free_path, RT_PATH_HBM_DATA, total - setup);
	v = hbm_view(q->s);
	if (!e->hbm_shared || !v) {
		/* never saturated: the shared model gives this channel its full rate */
		q->end_ps = ch->free_ps + (v ? e->hbm_lat_ps : 0);
		q->data_end_ps = ch->free_ps;
		q->known = true;
		q->end_path = ch->free_path;
		rt_path_add(&q->end_path, RT_PATH_HBM_LATENCY, v ? e->hbm_lat_ps : 0);
		return RT_EOK;
	}
	return hbm_request(ctx, e, idx, ch->retired + ch->inflight - 1, v, eng_stage_bytes(q->s),
			   &ln, q->start_ps, ch->free_ps, at_now ? &ws : NULL, at_now);
}

/* Starts queued stages up to the channel's limit, then arms its timer. */
static enum rt_err channel_fill(struct rt_ctx *ctx, struct engine *e, unsigned idx,
				const struct rt_path *now_path)
{
	struct channel *ch = &e->ch[idx];
	enum rt_err err = RT_EOK;

	while (!err && ch->inflight < ch->limit && ch->inflight < ch->len)
		err = channel_start_one(ctx, e, idx, now_path);
	return err ? err : channel_arm(ctx, ch, idx, now_path);
}

static unsigned channel_of(const Kb__Stage *s)
{
	return s->engine == KB__ENGINE__ENGINE_DMA_WRITE ? 1 : 0;
}

/* A Stage arrived: check it, queue a copy, start it if the channel has
 * room. */
static enum rt_err engine_accept(struct rt_ctx *ctx, struct engine *e,
				 const Kb__Stage *s, const struct rt_path *path)
{
	struct channel *ch = &e->ch[channel_of(s)];
	struct queued *q;
	struct eng_memory mem;
	Kb__Stage *copy;
	enum rt_err err;

	engine_memory(ctx, e, &mem);
	err = eng_stage_check(s, e->cls, &mem);
	if (err)
		return err; /* the daemon names this component */
	copy = rt_keep(ctx, &s->base); /* the delivery's own, when it is in-process */
	if (!copy)
		return rt_fail(RT_ENOMEM, "no memory to queue a stage");
	err = channel_push(ch, copy, rt_now(ctx));
	if (err) {
		rt_msg_free(copy);
		return err;
	}
	q = channel_at(ch, ch->len - 1);
	q->has_path = path != NULL;
	if (path)
		q->arrival_path = *path;
	return channel_fill(ctx, e, channel_of(s), path);
}

/* The rank's memory answered an HbmRequest: the transfer's end is known. */
static enum rt_err engine_hbm_done(struct rt_ctx *ctx, struct engine *e,
				   const Kb__HbmDone *d, const struct rt_path *path)
{
	struct queued *q;
	struct channel *ch;
	uint64_t off;

	if (e->cls != ENG_DMA || d->channel >= e->n_channels)
		return rt_fail(RT_EPROTOCOL, "HbmDone for channel %u of a %s engine",
			       d->channel, eng_class_name(e->cls));
	ch = &e->ch[d->channel];
	off = d->id - ch->retired;
	if (d->id < ch->retired || off >= ch->inflight || channel_at(ch, off)->known)
		return rt_fail(RT_EPROTOCOL, "HbmDone %llu matches no transfer in flight on %s",
			       (unsigned long long)d->id, ch->name);
	q = channel_at(ch, off);
	q->end_ps = d->done_ps;
	/* the answer lands after the HBM latency (the link's, workloads/pe.c) */
	q->data_end_ps = d->done_ps - (d->done_ps > e->hbm_lat_ps ? e->hbm_lat_ps : d->done_ps);
	q->known = true;
	q->has_path = q->has_path && path;
	if (path)
		q->end_path = *path;
	return channel_arm(ctx, ch, d->channel, path);
}

static uint64_t view_bytes(const Kb__View *v)
{
	return v ? (uint64_t)v->rows * v->cols * rt_dtype_bytes(v->dtype) : 0;
}

/* Adds the view's bytes to the TCM or HBM counter of its space. */
static void count_view(struct rt_ctx *ctx, const struct engine *e, const Kb__View *v,
		       bool write)
{
	if (!v)
		return;
	if (v->space == KB__SPACE__SPACE_TCM)
		rt_stat_add_h(ctx, e->stat[write ? ST_TCM_WRITE : ST_TCM_READ], view_bytes(v));
	else
		rt_stat_add_h(ctx, e->stat[write ? ST_HBM_WRITE : ST_HBM_READ], view_bytes(v));
}

/* The operations a stage did, for energy.*: memory bytes by space and
 * direction (a GEMM reads its f32 accumulator after the first K step and
 * writes it before the last), MACs by dtype, MATH element operations by
 * latency class (softmax: rmax, exp_diff, rsum, div). */
static void count_ops(struct rt_ctx *ctx, const struct engine *e, const Kb__Stage *s,
		      uint64_t elements)
{
	static const unsigned macs[] = { [KB__DTYPE__DTYPE_F16] = ST_MACS_F16,
					 [KB__DTYPE__DTYPE_BF16] = ST_MACS_BF16,
					 [KB__DTYPE__DTYPE_F32] = ST_MACS_F32 };
	const struct rt_isa_op *op;

	for (size_t i = 0; i < s->n_in; i++)
		count_view(ctx, e, s->in[i], false);
	if (e->cls == ENG_GEMM) {
		if (s->acc && !s->first)
			count_view(ctx, e, s->acc, false);
		if (s->acc && !s->last)
			count_view(ctx, e, s->acc, true);
		if (!s->acc || s->last)
			count_view(ctx, e, s->out, true);
		if (s->n_in && s->in[0] && (unsigned)s->in[0]->dtype <= KB__DTYPE__DTYPE_F32)
			rt_stat_add_h(ctx, e->stat[macs[s->in[0]->dtype]], elements);
		return;
	}
	count_view(ctx, e, s->out, true);
	if (e->cls != ENG_MATH || !(op = rt_isa_find(s->op_name)))
		return;
	if (op->lat == RT_ISA_LAT_TRANSCENDENTAL) {
		rt_stat_add_h(ctx, e->stat[ST_EXP_OPS], elements);
	} else if (op->lat == RT_ISA_LAT_SOFTMAX) {
		rt_stat_add_h(ctx, e->stat[ST_EXP_OPS], elements);
		rt_stat_add_h(ctx, e->stat[ST_SIMPLE_OPS], eng_mul_sat(3, elements));
	} else {
		rt_stat_add_h(ctx, e->stat[ST_SIMPLE_OPS], elements);
	}
}

/* Op log, trace slice and stats of a finished stage. Its interval is
 * when the engine worked on it: GEMM and MATH [start, end]; a DMA channel
 * the time it moved the transfer's bytes — from its wire start (or the end
 * of the previous transfer's bytes, which the shared HBM may finish later)
 * to its last byte (its end without the HBM latency), so no two records of
 * a channel overlap and busy time is their sum. issue_ps is when the stage
 * reached the engine (docs/metrics.md). */
static enum rt_err record(struct rt_ctx *ctx, struct engine *e, struct channel *ch,
			  unsigned channel, const struct queued *q)
{
	const Kb__Stage *s = q->s;
	uint64_t from = q->start_ps, to = q->end_ps;
	struct rt_oplog_rec rec;
	struct rt_trace_span span;
	enum rt_err err;

	if (e->cls == ENG_DMA) {
		uint64_t last = q->data_end_ps > q->wire_end_ps ? q->data_end_ps : q->wire_end_ps;

		from = from > ch->data_end_ps ? from : ch->data_end_ps;
		to = last > from ? last : from;
		ch->data_end_ps = to;
	}
	rec = (struct rt_oplog_rec){
		.start_ps = from,
		.end_ps = to,
		.issue_ps = q->arrival_ps,
		.engine = ch->name,
		.op_kind = s->op_kind,
		.op_name = s->op_name,
		.bytes = eng_stage_bytes(s),
		.elements = eng_stage_elements(s),
		.command = s->command,
		.stage = s->index,
	};
	span = (struct rt_trace_span){
		.track = 1 + channel, /* channels run concurrently: a track each */
		.track_name = ch->name,
		.name = s->op_name,
		.cat = s->op_kind,
		.start_ps = from,
		.end_ps = to,
		.has_command = true,
		.has_stage = true,
		.command = s->command,
		.stage = s->index,
	};
	err = rt_oplog(ctx, &rec);
	if (!err)
		err = rt_trace_slice(ctx, &span);
	rt_stat_add_h(ctx, e->stat[ST_BUSY], to - from);
	rt_stat_add_h(ctx, e->stat[ST_STAGES], 1);
	rt_stat_add_h(ctx, e->stat[ST_BYTES], rec.bytes);
	rt_stat_add_h(ctx, ch->stat[0], 1);
	rt_stat_add_h(ctx, ch->stat[1], to - from);
	rt_stat_add_h(ctx, ch->stat[2], rec.bytes);
	rt_stat_add_h(ctx, ch->stat[3], rec.elements);
	count_ops(ctx, e, s, rec.elements);
	return err;
}

static enum rt_err send_done(struct rt_ctx *ctx, const struct engine *e,
			     const struct queued *q)
{
	Kb__StageDone done = KB__STAGE_DONE__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;
	struct rt_path arrival = q->end_path;

	done.command = q->s->command;
	done.index = q->s->index;
	msg.body_case = KB__PAYLOAD__BODY_STAGE_DONE;
	msg.stage_done = &done;
	if (!q->has_path)
		return rt_send(ctx, e->sched, rt_now(ctx), 0, &msg);
	rt_path_add(&arrival, RT_PATH_DOORBELL, rt_latency_to(ctx, e->sched));
	return rt_send_path(ctx, e->sched, rt_now(ctx), 0, 0, &msg, &arrival);
}

/* The channel's head stage reached its end time (stages retire in order,
 * so a transfer never ends before the one started ahead of it). */
static enum rt_err channel_finish(struct rt_ctx *ctx, struct engine *e,
				  uint64_t tag)
{
	struct channel *ch;
	struct queued *q;
	struct eng_memory mem;
	struct rt_path end_path;
	bool has_path;
	enum rt_err err = RT_EOK;

	if (tag >= e->n_channels || !e->ch[tag].armed)
		return rt_fail(RT_EINVAL, "timer %llu matches no running stage",
			       (unsigned long long)tag);
	ch = &e->ch[tag];
	ch->armed = false;
	q = channel_at(ch, 0);
	q->end_ps = rt_now(ctx);
	if (rt_job(ctx)->mode == RT_MODE_DATA) {
		engine_memory(ctx, e, &mem);
		err = eng_model_execute(&e->model, q->s, &mem);
		if (err)
			return err; /* the daemon names this component */
	}
	err = record(ctx, e, ch, (unsigned)tag, q);
	if (!err)
		err = send_done(ctx, e, q);
	if (err)
		return err;
	end_path = q->end_path;
	has_path = q->has_path;
	channel_pop(ch);
	ch->inflight--;
	return channel_fill(ctx, e, (unsigned)tag, has_path ? &end_path : NULL);
}

static enum rt_err engine_handle(struct rt_ctx *ctx, void *state,
				 const struct rt_delivery *d)
{
	struct engine *e = state;

	if (d->is_timer)
		return channel_finish(ctx, e, d->tag);
	if (d->msg && d->msg->body_case == KB__PAYLOAD__BODY_HBM_DONE)
		return engine_hbm_done(ctx, e, d->msg->hbm_done, d->path);
	if (!d->msg || d->msg->body_case != KB__PAYLOAD__BODY_STAGE)
		return rt_fail(RT_EPROTOCOL,
			       "expected a Stage message from component %u, got payload body %d",
			       d->src,
			       d->msg ? (int)d->msg->body_case : -1);
	return engine_accept(ctx, e, d->msg->stage, d->path);
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
					 ch->name, ch->len, channel_at(ch, 0)->s->index,
					 (unsigned long long)channel_at(ch, 0)->s->command,
					 channel_at(ch, 0)->s->op_name);
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

/* A stage's timing inputs: where and what, by size (its addresses and ids
 * never change a model's latency; eng_model latency is pure). */
static uint64_t stage_digest(uint64_t h, const Kb__Stage *s)
{
	h = rt_ff_mix(h, eng_stage_bytes(s));
	h = rt_ff_mix(h, ((uint64_t)s->engine << 8) | ((uint64_t)s->first << 1) | s->last);
	h = rt_ff_mix(h, s->stationary_held);
	for (const char *c = s->op_name; c && *c; c++)
		h = rt_ff_mix(h, (unsigned char)*c);
	for (size_t i = 0; i < s->n_in; i++)
		if (s->in[i])
			h = rt_ff_mix(h, ((uint64_t)s->in[i]->rows << 32) ^ s->in[i]->cols);
	return h;
}

/* Fast-forward (ADR 0059): each channel's queue and times relative to t. */
static uint64_t engine_digest(const struct rt_ctx *ctx, const void *state, uint64_t t)
{
	const struct engine *e = state;
	uint64_t h = e->n_channels;

	(void)ctx;
	for (unsigned c = 0; c < e->n_channels; c++) {
		const struct channel *ch = &e->ch[c];

		h = rt_ff_mix(h, ((uint64_t)ch->len << 32) | ((uint64_t)ch->inflight << 1) | ch->armed);
		h = rt_ff_mix(h, rt_ff_rel(ch->free_ps, t));
		h = rt_ff_mix(h, rt_ff_rel(ch->data_end_ps, t));
		for (size_t i = 0; i < ch->len; i++) {
			const struct queued *q = channel_at(ch, i);

			h = rt_ff_mix(h, rt_ff_rel(q->arrival_ps, t));
			h = rt_ff_mix(h, rt_ff_rel(q->start_ps, t));
			h = rt_ff_mix(h, rt_ff_rel(q->wire_end_ps, t));
			h = rt_ff_mix(h, rt_ff_rel(q->data_end_ps, t));
			h = rt_ff_mix(h, q->known ? 1 + rt_ff_rel(q->end_ps, t) : 0);
			h = stage_digest(h, q->s);
		}
	}
	return h;
}

const struct rt_component_ops eng_dma_ops = {
	.name = "dma",
	.state_size = sizeof(struct engine),
	.init = dma_init,
	.handle = engine_handle,
	.fini = engine_fini,
	.ff_digest = engine_digest,
	.check = npu_check_payload,
};

const struct rt_component_ops eng_gemm_ops = {
	.name = "gemm",
	.state_size = sizeof(struct engine),
	.init = gemm_init,
	.handle = engine_handle,
	.fini = engine_fini,
	.ff_digest = engine_digest,
	.check = npu_check_payload,
};

const struct rt_component_ops eng_math_ops = {
	.name = "math",
	.state_size = sizeof(struct engine),
	.init = math_init,
	.handle = engine_handle,
	.fini = engine_fini,
	.ff_digest = engine_digest,
	.check = npu_check_payload,
};
