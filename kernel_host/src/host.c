/* host.c — the kernel host component ("host", one per PE): a thin adapter
 * from runtime deliveries to the tl runtime. A timer at t = 0 starts the
 * kernel; CommandDone and IPCQ messages resume it. */
#include "tl_private.h"

#include <stdio.h>
#include <string.h>

#include "rt/job.h"
#include "npu/memory.h"
#include "npu/payload.h"
#include "npu/pe.h"

struct host_state {
	struct rt_ctx *ctx; /* of the current call */
	struct tl *tl;
	struct tl_kernel_ref kernel;
	struct tl_arg args[RT_MAX_ARGS];
	uint32_t sched, link, pe0; /* component ids: scheduler, rank link, PE 0's host */
};

/* The critical path of what the host sends: the kernel's path to the send,
 * then the doorbell to the scheduler, the rank's link component or another
 * PE's host (every IPCQ hop is the link component's, src/link.c). */
static enum rt_err port_send(void *p, uint32_t dst, uint64_t send_ps, uint64_t extra_ps,
			     const Kb__Payload *msg, const struct rt_path *at_send)
{
	struct host_state *h = p;
	uint32_t id = dst == TL_PORT_SCHED ? h->sched
		    : dst == TL_PORT_LINK  ? h->link
					   : h->pe0 + (dst - TL_PORT_PE0) * PE_UNITS;
	struct rt_path arrival;

	if (!at_send)
		return rt_send_delayed(h->ctx, id, send_ps, extra_ps, 0, msg);
	arrival = *at_send;
	rt_path_add(&arrival, RT_PATH_LINK_SERIALISATION, extra_ps);
	rt_path_add(&arrival, RT_PATH_DOORBELL, rt_latency_to(h->ctx, id));
	return rt_send_path(h->ctx, id, send_ps, extra_ps, 0, msg, &arrival);
}

static void port_path_report(void *p, const struct rt_path *path)
{
	rt_path_report(((struct host_state *)p)->ctx, path);
}

static void port_stat_add(void *p, const char *name, uint64_t v)
{
	rt_stat_add(((struct host_state *)p)->ctx, name, v);
}

static void port_stat_max(void *p, const char *name, uint64_t v)
{
	rt_stat_max(((struct host_state *)p)->ctx, name, v);
}

static uint32_t port_stat_declare(void *p, const struct rt_stat_decl *decl)
{
	return rt_stat_declare(((struct host_state *)p)->ctx, decl);
}

static void port_stat_add_h(void *p, uint32_t h, uint64_t v)
{
	rt_stat_add_h(((struct host_state *)p)->ctx, h, v);
}

static void port_stat_max_h(void *p, uint32_t h, uint64_t v)
{
	rt_stat_max_h(((struct host_state *)p)->ctx, h, v);
}

static enum rt_err port_output_path(void *p, const char *file, char *path,
				    size_t cap)
{
	return rt_output_path(((struct host_state *)p)->ctx, file, path, cap);
}

/* The kernel's clock gets a track of its own: its dispatch and wait
 * slices are serial, while messages land on track 0 at any time. */
static void port_trace_slice(void *p, const char *name, const char *file, int line,
			     uint64_t start_ps, uint64_t end_ps)
{
	struct rt_trace_span span = {
		.track = 1, .track_name = "kernel", .name = name, .cat = "kernel",
		.site_file = file, .site_line = line, .start_ps = start_ps, .end_ps = end_ps,
	};

	rt_trace_slice(((struct host_state *)p)->ctx, &span); /* an I/O error resurfaces at the final flush */
}

static void port_trace_counter(void *p, const char *name, uint64_t ts_ps, uint64_t value)
{
	rt_trace_counter(((struct host_state *)p)->ctx, name, ts_ps, value);
}

/* Program steps get a track of their own beside the kernel's clock. */
static void port_trace_step(void *p, const char *name, uint64_t start_ps, uint64_t end_ps)
{
	struct rt_trace_span span = {
		.track = 2, .track_name = "steps", .name = name, .cat = "step",
		.start_ps = start_ps, .end_ps = end_ps,
	};

	rt_trace_slice(((struct host_state *)p)->ctx, &span);
}

static void port_loop_enter(void *p, struct rt_ff_loop *loop)
{
	rt_ff_loop_enter(((struct host_state *)p)->ctx, loop);
}

static void port_loop_tick(void *p, struct rt_ff_loop *loop, const struct rt_path *path)
{
	struct rt_ctx *ctx = ((struct host_state *)p)->ctx;

	rt_ff_loop_path(ctx, loop, path);
	rt_ff_loop_tick(ctx, loop);
}

static void port_loop_leave(void *p, struct rt_ff_loop *loop)
{
	rt_ff_loop_leave(((struct host_state *)p)->ctx, loop);
}

static uint64_t port_ff_offset(void *p)
{
	return rt_ff_offset_ps(((struct host_state *)p)->ctx);
}

static const struct tl_port_ops host_port = {
	.send = port_send,
	.stat_add = port_stat_add,
	.stat_max = port_stat_max,
	.stat_declare = port_stat_declare,
	.stat_add_h = port_stat_add_h,
	.stat_max_h = port_stat_max_h,
	.output_path = port_output_path,
	.trace_slice = port_trace_slice,
	.trace_counter = port_trace_counter,
	.trace_step = port_trace_step,
	.path_report = port_path_report,
	.loop_enter = port_loop_enter,
	.loop_tick = port_loop_tick,
	.loop_leave = port_loop_leave,
	.ff_offset = port_ff_offset,
};

static void fill_setup(struct rt_ctx *ctx, struct host_state *h,
		       struct tl_setup *s)
{
	const struct rt_job *job = rt_job(ctx);
	const struct rt_component_desc *me = rt_self_desc(ctx);
	const struct rt_config *cfg = rt_cfg(ctx);
	uint32_t i;

	for (i = 0; i < job->n_args && i < RT_MAX_ARGS; i++) {
		h->args[i].name = job->args[i].name;
		h->args[i].value = job->args[i].value;
	}
	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->kernel_name = h->kernel.name;
	s->kernel = h->kernel.fn;
	s->args = h->args;
	s->n_args = i;
	s->rank = me->rank;
	s->pe = me->pe;
	s->ranks = cfg->ranks;
	s->pes = cfg->pes;
	s->mode = job->mode == RT_MODE_DATA ? TL_DATA : TL_TIMING;
	s->seed = job->seed;
	s->inputs_dir = job->inputs_dir;
	if (s->mode == TL_DATA) {
		s->hbm = npu_hbm(ctx, me->rank, &s->hbm_size);
		s->tcm = npu_tcm(ctx, me->rank, me->pe, &s->tcm_size);
	}
	s->port = &host_port;
	s->port_ctx = h;
	h->sched = pe_component_id(cfg->pes, me->rank, me->pe, PE_SCHED);
	/* every IPCQ message goes through the rank's link component (src/link.c) */
	h->link = pe_link_component_id(cfg->ranks, cfg->pes, me->rank);
	h->pe0 = pe_component_id(cfg->pes, me->rank, 0, PE_HOST);
}

static enum rt_err host_init(struct rt_ctx *ctx, void *state)
{
	struct host_state *h = state;
	struct tl_setup s;
	enum rt_err rc;

	h->ctx = ctx;
	if (rt_job(ctx)->program[0]) { /* a program file: its driver runs it */
		snprintf(h->kernel.name, sizeof(h->kernel.name), "program");
		h->kernel.fn = tl_program_text_kernel;
	} else {
		rc = tl_kernel_find(rt_job(ctx)->workload, &h->kernel);
		if (rc != RT_EOK)
			return rc;
	}
	fill_setup(ctx, h, &s);
	s.program_text = rt_job(ctx)->program[0] ? rt_job(ctx)->program : NULL;
	rc = tl_new(&s, &h->tl);
	if (rc != RT_EOK)
		return rc;
	return rt_timer(ctx, 0, 0);
}

static enum rt_err host_deliver(struct host_state *h, const struct rt_delivery *d)
{
	if (d->is_timer)
		return tl_start(h->tl, d->time_ps);
	switch (d->msg->body_case) {
	case KB__PAYLOAD__BODY_COMMAND_DONE:
		return tl_on_command_done(h->tl, d->msg->command_done->id,
					  d->time_ps, d->path);
	case KB__PAYLOAD__BODY_IPCQ:
		return tl_on_ipcq(h->tl, d->msg->ipcq, d->time_ps, d->path);
	case KB__PAYLOAD__BODY_PE_SYNC:
		return tl_on_pe_sync(h->tl, d->msg->pe_sync, d->time_ps, d->path);
	default:
		return rt_fail(RT_EPROTOCOL,
			       "unexpected message (body %d) from component %u",
			       (int)d->msg->body_case, d->src);
	}
}

static enum rt_err host_handle(struct rt_ctx *ctx, void *state,
			       const struct rt_delivery *d)
{
	struct host_state *h = state;
	enum rt_err rc;

	h->ctx = ctx;
	rc = host_deliver(h, d);
	/* an error happened at the kernel's clock, not at the event's time */
	rt_note_clock(ctx, tl_now_ps(h->tl));
	return rc;
}

/* "k.c:12", or what stands for a call site the kernel did not make. */
static const char *site_text(struct tl_site at, char *buf, size_t cap)
{
	if (at.line <= 0)
		return "its return (waiting for its commands to drain)";
	snprintf(buf, cap, "%s:%d", at.file ? at.file : "?", at.line);
	return buf;
}

/* What command `id` is, for the unfinished-kernel line. */
static void describe_cmd(const struct tl *tl, uint64_t id, char *buf, size_t cap)
{
	static const char *const kinds[] = {
		[TL_CMD_COMPOSITE] = "composite",
		[TL_CMD_DMA] = "DMA",
		[TL_CMD_COPY] = "copy",
	};
	const struct tl_cmd *c = &tl->cmds[id];
	char site[300];
	uint32_t from;

	site_text(c->at, site, sizeof(site));
	if (c->kind == TL_CMD_BARRIER) {
		snprintf(buf, cap, "the barrier of rank %u's %u PEs entered at %s (barrier %llu), "
			 "which another PE never reached", tl->s.rank, tl->s.pes, site,
			 (unsigned long long)tl->bar_epoch + 1);
		return;
	}
	if (c->kind == TL_CMD_RECV && c->p2p) {
		snprintf(buf, cap, "the IPCQ receive posted at %s from rank %u with tag %u, "
			 "and no message came", site, c->src_rank, c->tag);
		return;
	}
	if (c->kind != TL_CMD_RECV) {
		snprintf(buf, cap, "%s command %llu issued at %s, which the scheduler never completed",
			 kinds[c->kind], (unsigned long long)id, site);
		return;
	}
	from = pe_ring_neighbour(tl->s.ranks, tl->s.rank,
				 c->dir == TL_LEFT ? PE_DIR_LEFT : PE_DIR_RIGHT);
	snprintf(buf, cap, "the IPCQ receive posted at %s from the %s neighbour (rank %u%s), "
		 "and no message came", site, c->dir == TL_LEFT ? "left" : "right", from,
		 from == tl->s.rank ? ": itself" : "");
}

/* RT_EOK if the kernel ran to its end (or failed: that was reported);
 * otherwise RT_EUNFINISHED and where it is blocked and on what. */
static enum rt_err kernel_unfinished(const struct tl *tl)
{
	char where[300], what[700];

	if (tl->state == TL_DONE || tl->state == TL_FAILED)
		return RT_EOK;
	if (tl->state == TL_IDLE)
		return rt_fail(RT_EUNFINISHED, "kernel %s never started", tl->s.kernel_name);
	describe_cmd(tl, tl->waiting_for, what, sizeof(what));
	return rt_fail(RT_EUNFINISHED,
		       "kernel %s did not finish: blocked at %s (kernel clock %llu ps) waiting for %s",
		       tl->s.kernel_name, site_text(tl->wait_site, where, sizeof(where)),
		       (unsigned long long)tl->clock_ps, what);
}

static enum rt_err host_fini(struct rt_ctx *ctx, void *state)
{
	struct host_state *h = state;
	enum rt_err undone = h->tl ? kernel_unfinished(h->tl) : RT_EOK;

	h->ctx = ctx;
	tl_destroy(&h->tl);
	tl_kernel_ref_release(&h->kernel);
	return undone;
}

static uint64_t host_digest(const struct rt_ctx *ctx, const void *state, uint64_t t)
{
	const struct host_state *h = state;

	(void)ctx;
	return h->tl ? tl_ff_digest(h->tl, t) : 0;
}

const struct rt_component_ops tl_host_ops = {
	.name = "host",
	.state_size = sizeof(struct host_state),
	.init = host_init,
	.handle = host_handle,
	.fini = host_fini,
	.ff_digest = host_digest,
	.check = npu_check_payload,
};
