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
 * doorbell. Two senders to one receiver share its ingress port.
 *
 * Critical path (rt/path.h): a hop starts from the message's path at ready
 * (from a host: its doorbell taken back out, the link started without
 * waiting for it) or, when the link was still busy, from the link's own
 * path at link free — the previous message's start with that message's
 * bytes as link_queueing; then the hop's bytes (link_serialisation) and
 * the latency to the next component (link_latency; a switch port's
 * doorbell to its host as doorbell). A path sums to the time it leads to
 * (the runtime checks it). */
#include "tl_private.h"

#include "rt/job.h"
#include "npu/payload.h"
#include "npu/pe.h"

enum { LINK_EGRESS = 0, LINK_INGRESS = 1 }; /* switch ports in free_ps */

struct link {
	uint64_t free_ps[2]; /* ring: per direction; switch: egress, ingress */
	struct rt_path free_path[2]; /* ... and the path to then (see above) */
	uint64_t cycle_ps, bytes_per_cycle, alpha_ps;
	uint32_t rank, ranks, pes;
	bool ring;
	uint32_t stat[5];    /* link_stats, by handle */
};

/* Both directions, then per direction (Kb__IpcqData.dir: 0 left, 1 right;
 * a switch port's egress counts as right, its ingress as left). */
enum { LS_BUSY, LS_LEFT_BUSY, LS_RIGHT_BUSY, LS_LEFT_BYTES, LS_RIGHT_BYTES };
static const struct rt_stat_decl link_stats[5] = {
	[LS_BUSY] = RT_STAT_DECL("ipcq_link_busy_ps", "ps",
			"time the rank's links (both directions; a switch port's egress and "
			"ingress) spent moving bytes"),
	[LS_LEFT_BUSY] = RT_STAT_DECL("ipcq_link_left_busy_ps", "ps",
			"... of it on the links to the left neighbour"),
	[LS_RIGHT_BUSY] = RT_STAT_DECL("ipcq_link_right_busy_ps", "ps",
			"... of it on the links to the right neighbour"),
	[LS_LEFT_BYTES] = RT_STAT_DECL("ipcq_link_left_bytes", "bytes",
			"bytes the rank's link sent to its left neighbour (a switch port: took in)"),
	[LS_RIGHT_BYTES] = RT_STAT_DECL("ipcq_link_right_bytes", "bytes",
			"bytes the rank's link sent to its right neighbour (a switch port: sent out)"),
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
	rt_stat_declare_all(ctx, link_stats, 5, l->stat);
	return RT_EOK;
}

/* One hop on link `k` (a direction, or a switch port): `at_ready` is the
 * path to m->ready_ps (NULL: none); *at_start becomes the path to *start. */
static void serialise(struct link *l, struct rt_ctx *ctx, uint32_t k, const Kb__IpcqData *m,
		      const struct rt_path *at_ready, uint64_t *start, uint64_t *end,
		      struct rt_path *at_start)
{
	uint64_t ser = pe_ipcq_cycles(l->bytes_per_cycle, m->nbytes) * l->cycle_ps;
	/* the report's link figures: per direction; a switch port's egress
	 * counts as its rank's outgoing ("right") side, ingress as "left" */
	bool right = l->ring ? k == PE_DIR_RIGHT : k == LINK_EGRESS;

	*start = m->ready_ps > l->free_ps[k] ? m->ready_ps : l->free_ps[k];
	*end = *start + ser > m->tail_ps ? *start + ser : m->tail_ps;
	if (at_ready) {
		*at_start = *start > m->ready_ps ? l->free_path[k] : *at_ready;
		l->free_path[k] = *at_start;
		rt_path_add(&l->free_path[k], RT_PATH_LINK_QUEUEING, *end - *start);
	}
	l->free_ps[k] = *end;
	rt_stat_add_h(ctx, l->stat[LS_BUSY], *end - *start);
	rt_stat_add_h(ctx, l->stat[right ? LS_RIGHT_BUSY : LS_LEFT_BUSY], *end - *start);
	rt_stat_add_h(ctx, l->stat[right ? LS_RIGHT_BYTES : LS_LEFT_BYTES], m->nbytes);
}

/* Sends `m` to component `dst` at max(at, now) with the path to then plus
 * the latency to dst (as class `cls`); `at_then` is the path to `at`,
 * `arrived` the path to now (either NULL: no path). */
static enum rt_err send_on(struct rt_ctx *ctx, uint32_t dst, Kb__IpcqData *m, uint64_t at,
			   const struct rt_path *at_then, const struct rt_path *arrived,
			   enum rt_path_class cls)
{
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t now = rt_now(ctx);
	struct rt_path arrival;

	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = m;
	if (!at_then || !arrived)
		return rt_send_delayed(ctx, dst, now, at > now ? at - now : 0, 0, &msg);
	arrival = at >= now ? *at_then : *arrived;
	rt_path_add(&arrival, cls, rt_latency_to(ctx, dst));
	return rt_send_path(ctx, dst, now, at > now ? at - now : 0, 0, &msg, &arrival);
}

/* Hands the message to the next link component: its head arrives there
 * α after this hop started, its tail α after this hop ended. */
static enum rt_err forward(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, uint32_t rank,
			   uint64_t start, uint64_t end, const struct rt_path *at_start,
			   const struct rt_path *arrived)
{
	uint64_t now = rt_now(ctx), leave = start > now ? start : now;

	m->ready_ps = leave + l->alpha_ps;
	m->tail_ps = (end > leave ? end : leave) + l->alpha_ps;
	return send_on(ctx, pe_link_component_id(l->ranks, l->pes, rank), m, start, at_start,
		       arrived, RT_PATH_LINK_LATENCY);
}

/* Delivers the message to the host of its PE on `rank` when its last byte
 * is there (the link to the host carries the last hop's latency). */
static enum rt_err deliver(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, uint32_t rank,
			   uint64_t start, uint64_t end, const struct rt_path *at_start,
			   const struct rt_path *arrived)
{
	struct rt_path at_end;

	m->link_start_ps = start;
	m->link_end_ps = end;
	if (at_start) {
		at_end = *at_start;
		rt_path_add(&at_end, RT_PATH_LINK_SERIALISATION, end - start);
	}
	return send_on(ctx, pe_component_id(l->pes, rank, m->pe, PE_HOST), m, end,
		       at_start ? &at_end : NULL, arrived,
		       l->ring ? RT_PATH_LINK_LATENCY : RT_PATH_DOORBELL);
}

/* The path at ready (NULL: none): from a host, the path at arrival minus
 * the doorbell the link did not wait for; a forwarded hop arrives at its
 * ready time. */
static const struct rt_path *path_at_ready(const struct rt_delivery *d, const Kb__IpcqData *m,
					   uint64_t now, struct rt_path *buf)
{
	if (!d->path || d->path->ps[RT_PATH_DOORBELL] < now - m->ready_ps)
		return NULL;
	*buf = *d->path;
	buf->ps[RT_PATH_DOORBELL] -= now - m->ready_ps;
	return buf;
}

static enum rt_err ring_hop(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, bool from_host,
			    const struct rt_path *at_ready, const struct rt_path *arrived)
{
	struct rt_path at_start;
	uint64_t start, end;
	uint32_t next;

	if (from_host && m->p2p)
		m->dir = m->route == 1	 ? PE_DIR_LEFT
			 : m->route == 2 ? PE_DIR_RIGHT
					 : (uint32_t)pe_ring_way(l->ranks, l->rank, m->dst_rank);
	serialise(l, ctx, m->dir, m, at_ready, &start, &end, &at_start);
	next = pe_ring_neighbour(l->ranks, l->rank, (enum pe_dir)m->dir);
	if (next == m->dst_rank)
		return deliver(l, ctx, m, next, start, end, at_ready ? &at_start : NULL, arrived);
	return forward(l, ctx, m, next, start, end, at_ready ? &at_start : NULL, arrived);
}

static enum rt_err switch_hop(struct link *l, struct rt_ctx *ctx, Kb__IpcqData *m, bool from_host,
			      const struct rt_path *at_ready, const struct rt_path *arrived)
{
	struct rt_path at_start;
	uint64_t start, end;

	if (from_host) {
		serialise(l, ctx, LINK_EGRESS, m, at_ready, &start, &end, &at_start);
		return forward(l, ctx, m, m->dst_rank, start, end, at_ready ? &at_start : NULL,
			       arrived);
	}
	serialise(l, ctx, LINK_INGRESS, m, at_ready, &start, &end, &at_start);
	return deliver(l, ctx, m, l->rank, start, end, at_ready ? &at_start : NULL, arrived);
}

static enum rt_err link_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	struct link *l = state;
	bool from_host = d->src < l->ranks * l->pes * PE_UNITS;
	uint64_t now = rt_now(ctx);
	const struct rt_path *at_ready;
	struct rt_path buf;
	Kb__IpcqData m;

	if (d->is_timer || !d->msg || d->msg->body_case != KB__PAYLOAD__BODY_IPCQ ||
	    d->msg->ipcq->dir > 1 || d->msg->ipcq->dst_rank >= l->ranks ||
	    d->msg->ipcq->route > 2 || (from_host && d->msg->ipcq->dst_rank == l->rank))
		return rt_fail(RT_EPROTOCOL,
			       "expected an IPCQ message (direction 0 or 1, route 0 to 2, to another "
			       "of %u ranks) from component %u",
			       l->ranks, d->src);
	m = *d->msg->ipcq;
	if (m.ready_ps > now)
		return rt_fail(RT_EPROTOCOL, "IPCQ message from component %u is ready at %llu ps, "
			       "after it arrived (%llu ps)", d->src,
			       (unsigned long long)m.ready_ps, (unsigned long long)now);
	if (from_host) { /* every byte is ready when the host sends */
		m.pe = (d->src / PE_UNITS) % l->pes;
		m.src_rank = l->rank;
		m.tail_ps = m.ready_ps;
		if (!m.p2p)
			m.dst_rank = pe_ring_neighbour(l->ranks, l->rank, (enum pe_dir)m.dir);
	} else if (m.pe >= l->pes) {
		return rt_fail(RT_EPROTOCOL, "IPCQ message for PE %u of a %u-PE rank", m.pe, l->pes);
	}
	at_ready = path_at_ready(d, &m, now, &buf);
	return l->ring ? ring_hop(l, ctx, &m, from_host, at_ready, d->path)
		       : switch_hop(l, ctx, &m, from_host, at_ready, d->path);
}

/* Fast-forward (ADR 0059): when each direction is free again. */
static uint64_t link_digest(const struct rt_ctx *ctx, const void *state, uint64_t t)
{
	const struct link *l = state;

	(void)ctx;
	return rt_ff_mix(rt_ff_rel(l->free_ps[0], t), rt_ff_rel(l->free_ps[1], t));
}

const struct rt_component_ops tl_link_ops = {
	.name = "link",
	.state_size = sizeof(struct link),
	.init = link_init,
	.handle = link_handle,
	.fini = NULL,
	.ff_digest = link_digest,
	.check = npu_check_payload,
};
