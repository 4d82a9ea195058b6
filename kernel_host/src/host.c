/* host.c — the kernel host component ("host", one per PE): a thin adapter
 * from runtime deliveries to the tl runtime. A timer at t = 0 starts the
 * kernel; CommandDone and IPCQ messages resume it. */
#include "tl_private.h"

#include <string.h>

#include "rt/pe.h"

struct host_state {
	struct rt_ctx *ctx; /* of the current call */
	struct tl *tl;
	struct tl_kernel_ref kernel;
	struct tl_arg args[RT_MAX_ARGS];
	uint32_t sched, left, right; /* component ids */
};

static enum rt_err port_send(void *p, enum tl_port_dst dst, uint64_t send_ps,
			     uint64_t extra_ps, const Kb__Payload *msg)
{
	struct host_state *h = p;
	uint32_t id = dst == TL_PORT_SCHED ? h->sched
		    : dst == TL_PORT_LEFT  ? h->left
					   : h->right;

	return rt_send_delayed(h->ctx, id, send_ps, extra_ps, 0, msg);
}

static void port_stat_add(void *p, const char *name, uint64_t v)
{
	rt_stat_add(((struct host_state *)p)->ctx, name, v);
}

static void port_stat_max(void *p, const char *name, uint64_t v)
{
	rt_stat_max(((struct host_state *)p)->ctx, name, v);
}

static enum rt_err port_output_path(void *p, const char *file, char *path,
				    size_t cap)
{
	return rt_output_path(((struct host_state *)p)->ctx, file, path, cap);
}

static const struct tl_port_ops host_port = {
	.send = port_send,
	.stat_add = port_stat_add,
	.stat_max = port_stat_max,
	.output_path = port_output_path,
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
		s->hbm = rt_hbm(ctx, me->rank, &s->hbm_size);
		s->tcm = rt_tcm(ctx, me->rank, me->pe, &s->tcm_size);
	}
	s->port = &host_port;
	s->port_ctx = h;
	h->sched = pe_component_id(cfg->pes, me->rank, me->pe, PE_SCHED);
	h->left = pe_component_id(cfg->pes,
				  pe_ring_neighbour(cfg->ranks, me->rank, PE_DIR_LEFT),
				  me->pe, PE_HOST);
	h->right = pe_component_id(cfg->pes,
				   pe_ring_neighbour(cfg->ranks, me->rank, PE_DIR_RIGHT),
				   me->pe, PE_HOST);
	/* several PEs share the rank's ring links: both directions go through
	 * the rank's link component (src/link.c) */
	if (pe_shared_links(cfg->ranks, cfg->pes))
		h->left = h->right = pe_link_component_id(cfg->ranks, cfg->pes, me->rank);
}

static enum rt_err host_init(struct rt_ctx *ctx, void *state)
{
	struct host_state *h = state;
	struct tl_setup s;
	enum rt_err rc;

	h->ctx = ctx;
	rc = tl_kernel_find(rt_job(ctx)->workload, &h->kernel);
	if (rc != RT_EOK)
		return rc;
	fill_setup(ctx, h, &s);
	rc = tl_new(&s, &h->tl);
	if (rc != RT_EOK)
		return rc;
	return rt_timer(ctx, 0, 0);
}

static enum rt_err host_handle(struct rt_ctx *ctx, void *state,
			       const struct rt_delivery *d)
{
	struct host_state *h = state;

	h->ctx = ctx;
	if (d->is_timer)
		return tl_start(h->tl, d->time_ps);
	switch (d->msg->body_case) {
	case KB__PAYLOAD__BODY_COMMAND_DONE:
		return tl_on_command_done(h->tl, d->msg->command_done->id,
					  d->time_ps);
	case KB__PAYLOAD__BODY_IPCQ:
		return tl_on_ipcq(h->tl, d->msg->ipcq, d->time_ps);
	default:
		return rt_fail(RT_EPROTOCOL,
			       "unexpected message (body %d) from component %u",
			       (int)d->msg->body_case, d->src);
	}
}

static void host_fini(struct rt_ctx *ctx, void *state)
{
	struct host_state *h = state;

	h->ctx = ctx;
	tl_destroy(&h->tl);
	tl_kernel_ref_release(&h->kernel);
}

const struct rt_component_ops tl_host_ops = {
	.name = "host",
	.state_size = sizeof(struct host_state),
	.init = host_init,
	.handle = host_handle,
	.fini = host_fini,
};
