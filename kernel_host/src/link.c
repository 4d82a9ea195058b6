/* link.c — the IPCQ links of one rank ("link", one per rank when there are
 * several ranks), shared by every PE of the rank (ADR 0011, ADR 0040).
 *
 * A host's message reaches this component after the host doorbell
 * latency, carrying when its bytes were ready (ready_ps). Every link is
 * served first come first served in delivery order (the total event key,
 * the same in every process grouping). Serialising `bytes` on a link takes
 * ser = ceil(bytes / links.ipcq_bytes_per_cycle) cycles, and a hop is
 * cut-through: the head leaves as soon as the link is free, the tail
 * cannot leave before it arrived:
 *
 *   start = max(ready, link free);  end = max(start + ser, tail)
 *   link free = end;  next hop: ready' = start + α, tail' = end + α
 *
 * with α = links.ipcq_cycles, so an idle path of h hops delivers at
 * send + h·α + ser, and the receiving host gets the message when its last
 * byte is there.
 *
 * links.topology = ring: one outgoing link per direction. A message to a
 * ring neighbour (every tl_send, and tl_send_to a neighbour) goes straight
 * to that host; one to a farther rank (tl_send_to) goes the shorter way
 * (rightwards on a tie, or the way the sender asked) through the link
 * components of the ranks in between, each serialising it on its own link
 * of that direction.
 *
 * links.topology = switch: one port per rank. A message leaves through its
 * rank's egress port, crosses the switch (α) and enters through the
 * destination rank's ingress port, which then rings that host's doorbell
 * (links.host_sched_cycles): an idle path delivers at send + α + ser +
 * doorbell. Two senders to one receiver share its ingress port. */
#include "tl_private.h"

#include "rt/pe.h"

enum { LINK_EGRESS = 0, LINK_INGRESS = 1 }; /* switch ports in free_ps */

struct link {
	uint64_t free_ps[2]; /* ring: per direction; switch: egress, ingress */
	uint64_t cycle_ps, bytes_per_cycle, alpha_ps;
	uint32_t rank, ranks, pes;
	bool ring;
};

static enum rt_err link_init(struct rt_ctx *ctx, void *state)
{
	const struct rt_config *cfg = rt_cfg(ctx);
	struct link *l = state;

	l->cycle_ps = rt_config_cycle_ps(cfg);
	l->bytes_per_cycle = cfg->ipcq_bytes_per_cycle;
	l->alpha_ps = cfg->link_ipcq_cycles * l->cycle_ps;
	l->rank = rt_self_desc(ctx)->rank;
	l->ranks = cfg->ranks;
	l->pes = cfg->pes;
	l->ring = rt_config_topology(cfg) == RT_TOPOLOGY_RING;
	return RT_EOK;
}

/* One hop on the link whose busy-until time is *free. */
static void serialise(struct link *l, struct rt_ctx *ctx, uint64_t *free, uint64_t ready,
		      uint64_t tail, uint64_t bytes, uint64_t *start, uint64_t *end)
{
	uint64_t ser = pe_ipcq_cycles(l->bytes_per_cycle, bytes) * l->cycle_ps;

	*start = ready > *free ? ready : *free;
	*end = *start + ser > tail ? *start + ser : tail;
	*free = *end;
	rt_stat_add(ctx, "ipcq_link_busy_ps", *end - *start);
}

/* Hands the message to the next link component: its head arrives there
 * α after this hop started, its tail α after this hop ended. */
static enum rt_err forward(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, uint32_t rank,
			   uint64_t start, uint64_t end)
{
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t now = rt_now(ctx), leave = start > now ? start : now;

	m->ready_ps = leave + l->alpha_ps;
	m->tail_ps = (end > leave ? end : leave) + l->alpha_ps;
	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = m;
	return rt_send_delayed(ctx, pe_link_component_id(l->ranks, l->pes, rank), now, leave - now,
			       0, &msg);
}

/* Delivers the message to the host of its PE on `rank` when its last byte
 * is there (the link to the host carries the last hop's latency). */
static enum rt_err deliver(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, uint32_t rank,
			   uint64_t start, uint64_t end)
{
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t now = rt_now(ctx);

	m->link_start_ps = start;
	m->link_end_ps = end;
	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = m;
	return rt_send_delayed(ctx, pe_component_id(l->pes, rank, m->pe, PE_HOST), now,
			       end > now ? end - now : 0, 0, &msg);
}

static enum rt_err ring_hop(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, bool from_host)
{
	uint64_t start, end;
	uint32_t next;

	if (from_host && m->p2p)
		m->dir = m->route == 1	 ? PE_DIR_LEFT
			 : m->route == 2 ? PE_DIR_RIGHT
					 : (uint32_t)pe_ring_way(l->ranks, l->rank, m->dst_rank);
	serialise(l, ctx, &l->free_ps[m->dir], m->ready_ps, m->tail_ps, m->nbytes, &start, &end);
	next = pe_ring_neighbour(l->ranks, l->rank, (enum pe_dir)m->dir);
	if (next == m->dst_rank)
		return deliver(l, ctx, m, next, start, end);
	return forward(l, ctx, m, next, start, end);
}

static enum rt_err switch_hop(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, bool from_host)
{
	uint64_t start, end;

	if (from_host) {
		serialise(l, ctx, &l->free_ps[LINK_EGRESS], m->ready_ps, m->tail_ps, m->nbytes,
			  &start, &end);
		return forward(l, ctx, m, m->dst_rank, start, end);
	}
	serialise(l, ctx, &l->free_ps[LINK_INGRESS], m->ready_ps, m->tail_ps, m->nbytes, &start,
		  &end);
	return deliver(l, ctx, m, l->rank, start, end);
}

static enum rt_err link_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	struct link *l = state;
	bool from_host = d->src < l->ranks * l->pes * PE_UNITS;
	Kb__IpcqData m;

	if (d->is_timer || !d->msg || d->msg->body_case != KB__PAYLOAD__BODY_IPCQ ||
	    d->msg->ipcq->dir > 1 || d->msg->ipcq->dst_rank >= l->ranks ||
	    d->msg->ipcq->route > 2 || (from_host && d->msg->ipcq->dst_rank == l->rank))
		return rt_fail(RT_EPROTOCOL,
			       "expected an IPCQ message (direction 0 or 1, route 0 to 2, to another "
			       "of %u ranks) from component %u",
			       l->ranks, d->src);
	m = *d->msg->ipcq;
	if (from_host) { /* every byte is ready when the host sends */
		m.pe = (d->src / PE_UNITS) % l->pes;
		m.src_rank = l->rank;
		m.tail_ps = m.ready_ps;
		if (!m.p2p)
			m.dst_rank = pe_ring_neighbour(l->ranks, l->rank, (enum pe_dir)m.dir);
	} else if (m.pe >= l->pes) {
		return rt_fail(RT_EPROTOCOL, "IPCQ message for PE %u of a %u-PE rank", m.pe, l->pes);
	}
	return l->ring ? ring_hop(l, ctx, &m, from_host) : switch_hop(l, ctx, &m, from_host);
}

const struct rt_component_ops tl_link_ops = {
	.name = "link",
	.state_size = sizeof(struct link),
	.init = link_init,
	.handle = link_handle,
	.fini = NULL,
};
