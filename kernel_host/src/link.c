/* link.c — the IPCQ ring links of one rank ("link", one per rank when there
 * are several ranks and several PEs per rank): one outgoing link per
 * direction, shared by every PE of the rank.
 *
 * A host's tl_send reaches this component after the host-to-scheduler
 * doorbell latency, carrying when its bytes were ready (ready_ps). Messages
 * are served in delivery order — the total event key, the same in every
 * process grouping — first come first served per direction:
 *
 *   start = max(ready, link free); link free = start + ceil(bytes / links.ipcq_bytes_per_cycle) cycles
 *
 * and forwarded to the host of the same PE index on the neighbouring rank,
 * arriving at link free + links.ipcq_cycles (the doorbell overlaps the
 * serialisation; it adds time only when it is longer). */
#include "tl_private.h"

#include "rt/pe.h"

struct link {
	uint64_t free_ps[2]; /* per direction: the link is busy until */
	uint64_t cycle_ps, bytes_per_cycle;
	uint32_t rank, ranks, pes;
	uint32_t busy_stat;  /* link_busy, by handle */
};

static const struct rt_stat_decl link_busy = RT_STAT_DECL("ipcq_link_busy_ps", "ps",
		"time the rank's ring links (both directions) spent moving bytes");

static enum rt_err link_init(struct rt_ctx *ctx, void *state)
{
	const struct rt_config *cfg = rt_cfg(ctx);
	struct link *l = state;

	l->cycle_ps = rt_config_cycle_ps(cfg);
	l->bytes_per_cycle = cfg->ipcq_bytes_per_cycle;
	l->rank = rt_self_desc(ctx)->rank;
	l->ranks = cfg->ranks;
	l->pes = cfg->pes;
	l->busy_stat = rt_stat_declare(ctx, &link_busy);
	return RT_EOK;
}

static enum rt_err link_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	struct link *l = state;
	Kb__IpcqData m;
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t start, end, now = rt_now(ctx);
	uint32_t pe, dst;

	if (d->is_timer || !d->msg || d->msg->body_case != KB__PAYLOAD__BODY_IPCQ ||
	    d->msg->ipcq->dir > 1)
		return rt_fail(RT_EPROTOCOL,
			       "expected an IPCQ message (direction 0 or 1) from component %u",
			       d->src);
	m = *d->msg->ipcq;
	pe = (d->src / PE_UNITS) % l->pes;
	start = m.ready_ps > l->free_ps[m.dir] ? m.ready_ps : l->free_ps[m.dir];
	end = start + pe_ipcq_cycles(l->bytes_per_cycle, m.nbytes) * l->cycle_ps;
	l->free_ps[m.dir] = end;
	m.link_start_ps = start;
	m.link_end_ps = end;
	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = &m;
	dst = pe_component_id(l->pes, pe_ring_neighbour(l->ranks, l->rank, (enum pe_dir)m.dir),
			      pe, PE_HOST);
	rt_stat_add_h(ctx, l->busy_stat, end - start);
	return rt_send_delayed(ctx, dst, now, end > now ? end - now : 0, 0, &msg);
}

const struct rt_component_ops tl_link_ops = {
	.name = "link",
	.state_size = sizeof(struct link),
	.init = link_init,
	.handle = link_handle,
	.fini = NULL,
};
