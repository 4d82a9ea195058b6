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
 * serialisation; it adds time only when it is longer).
 *
 * Critical path (rt/path.h): a message's path starts from the sender's path
 * at ready (its doorbell taken back out: the link started without waiting
 * for it) or, when the link was still busy, from the link's own path at
 * link free — the previous message's start with that message's bytes as
 * link_queueing; then its own bytes (link_serialisation) and the latency
 * (link_latency). */
#include "tl_private.h"

#include "rt/pe.h"

struct link {
	uint64_t free_ps[2]; /* per direction: the link is busy until */
	struct rt_path free_path[2]; /* ... and the path to then (see above) */
	uint64_t cycle_ps, bytes_per_cycle;
	uint32_t rank, ranks, pes;
	uint32_t stat[5];    /* link_stats, by handle */
};

/* Both directions, then per direction (Kb__IpcqData.dir: 0 left, 1 right). */
enum { LS_BUSY, LS_LEFT_BUSY, LS_RIGHT_BUSY, LS_LEFT_BYTES, LS_RIGHT_BYTES };
static const struct rt_stat_decl link_stats[5] = {
	[LS_BUSY] = RT_STAT_DECL("ipcq_link_busy_ps", "ps",
			"time the rank's ring links (both directions) spent moving bytes"),
	[LS_LEFT_BUSY] = RT_STAT_DECL("ipcq_link_left_busy_ps", "ps",
			"... of it on the links to the left neighbour"),
	[LS_RIGHT_BUSY] = RT_STAT_DECL("ipcq_link_right_busy_ps", "ps",
			"... of it on the links to the right neighbour"),
	[LS_LEFT_BYTES] = RT_STAT_DECL("ipcq_link_left_bytes", "bytes",
			"bytes the rank sent to its left neighbour"),
	[LS_RIGHT_BYTES] = RT_STAT_DECL("ipcq_link_right_bytes", "bytes",
			"bytes the rank sent to its right neighbour"),
};

static enum rt_err link_init(struct rt_ctx *ctx, void *state)
{
	const struct rt_config *cfg = rt_cfg(ctx);
	struct link *l = state;

	l->cycle_ps = rt_config_cycle_ps(cfg);
	l->bytes_per_cycle = cfg->ipcq_bytes_per_cycle;
	l->rank = rt_self_desc(ctx)->rank;
	l->ranks = cfg->ranks;
	l->pes = cfg->pes;
	rt_stat_declare_all(ctx, link_stats, 5, l->stat);
	return RT_EOK;
}

/* Sends message `m` on from the link [start, end) with its critical path. */
static enum rt_err link_forward(struct rt_ctx *ctx, struct link *l, const struct rt_path *arrived,
				const Kb__IpcqData *m, uint32_t dst, const Kb__Payload *msg,
				uint64_t start, uint64_t end)
{
	uint64_t now = rt_now(ctx);
	struct rt_path at_start = *arrived, arrival;

	at_start.ps[RT_PATH_DOORBELL] -= now - m->ready_ps; /* the path at ready */
	if (start > m->ready_ps) /* the link was busy: its path decides */
		at_start = l->free_path[m->dir];
	l->free_ps[m->dir] = end;
	l->free_path[m->dir] = at_start;
	rt_path_add(&l->free_path[m->dir], RT_PATH_LINK_QUEUEING, end - start);
	arrival = at_start;
	rt_path_add(&arrival, RT_PATH_LINK_SERIALISATION, end - start);
	if (end < now) /* the doorbell was longer than the serialisation */
		arrival = *arrived;
	rt_path_add(&arrival, RT_PATH_LINK_LATENCY, rt_latency_to(ctx, dst));
	return rt_send_path(ctx, dst, now, end > now ? end - now : 0, 0, msg, &arrival);
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
	if (m.ready_ps > now)
		return rt_fail(RT_EPROTOCOL, "IPCQ message from component %u is ready at %llu ps, "
			       "after it arrived (%llu ps)", d->src,
			       (unsigned long long)m.ready_ps, (unsigned long long)now);
	pe = (d->src / PE_UNITS) % l->pes;
	start = m.ready_ps > l->free_ps[m.dir] ? m.ready_ps : l->free_ps[m.dir];
	end = start + pe_ipcq_cycles(l->bytes_per_cycle, m.nbytes) * l->cycle_ps;
	m.link_start_ps = start;
	m.link_end_ps = end;
	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = &m;
	dst = pe_component_id(l->pes, pe_ring_neighbour(l->ranks, l->rank, (enum pe_dir)m.dir),
			      pe, PE_HOST);
	rt_stat_add_h(ctx, l->stat[LS_BUSY], end - start);
	rt_stat_add_h(ctx, l->stat[m.dir == 0 ? LS_LEFT_BUSY : LS_RIGHT_BUSY], end - start);
	rt_stat_add_h(ctx, l->stat[m.dir == 0 ? LS_LEFT_BYTES : LS_RIGHT_BYTES], m.nbytes);
	if (!d->path || d->path->ps[RT_PATH_DOORBELL] < now - m.ready_ps) {
		l->free_ps[m.dir] = end;
		return rt_send_delayed(ctx, dst, now, end > now ? end - now : 0, 0, &msg);
	}
	return link_forward(ctx, l, d->path, &m, dst, &msg, start, end);
}

const struct rt_component_ops tl_link_ops = {
	.name = "link",
	.state_size = sizeof(struct link),
	.init = link_init,
	.handle = link_handle,
	.fini = NULL,
};
