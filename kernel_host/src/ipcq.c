/* ipcq.c — IPCQ ring messages between the hosts of the same PE index on
 * neighbouring ranks. A send serialises on its direction's outgoing link of
 * the rank (ceil(bytes / ipcq_bytes_per_cycle) cycles, after the previous
 * send on that link by any PE of the rank); the message arrives after that
 * serialisation plus the link latency. With one PE per rank the host keeps
 * the link's clock itself; with several, the rank's link component does
 * (src/link.c), so the PEs share it. A message I send RIGHT arrives at my
 * right neighbour from its LEFT. The n-th receive posted for a direction
 * matches the n-th message arriving from it, whichever comes first.
 *
 * Sends read TCM and receives write TCM; TCM bandwidth is not a modelled
 * resource for any engine, so the link is the only cost (docs/attention.md).
 *
 * The critical path (rt/path.h) runs through a message whose arrival
 * decided when a receive's wait ended: the receiver takes the message's
 * path, which is the sender's path to its send, then the link's queueing
 * (the link moving earlier messages), the message's own serialisation and
 * the link latency. Exposed communication is the link time on that path
 * (summary.json, docs/metrics.md); a receive wait by itself says nothing
 * about the latency, so only its total is counted (ipcq_recv_wait_ps). */
#include "tl_private.h"

#include <stdlib.h>
#include <string.h>

#include "rt/pe.h"
#include "tl_io.h"

void tl_ipcq_release(struct tl *tl)
{
	uint32_t d, i;

	for (d = 0; d < 2; d++) {
		struct tl_ipcq_dir *q = &tl->ipcq[d];

		for (i = q->head_early; i < q->n_early; i++)
			free(q->early[i].bytes);
		free(q->early);
		free(q->posted);
		memset(q, 0, sizeof(*q));
	}
}

/* Queues never grow without bound: a drained FIFO starts over, and a full
 * one moves its live entries to the front before it grows. */
static void compact(struct tl_ipcq_dir *q)
{
	if (q->head_early == q->n_early)
		q->head_early = q->n_early = 0;
	if (q->head_posted == q->n_posted)
		q->head_posted = q->n_posted = 0;
	if (q->head_early && q->n_early == q->cap_early) {
		memmove(q->early, q->early + q->head_early,
			(q->n_early - q->head_early) * sizeof(*q->early));
		q->n_early -= q->head_early;
		q->head_early = 0;
	}
	if (q->head_posted && q->n_posted == q->cap_posted) {
		/* pairs: two words per entry */
		memmove(q->posted, q->posted + 2 * q->head_posted,
			(q->n_posted - q->head_posted) * 2 * sizeof(*q->posted));
		q->n_posted -= q->head_posted;
		q->head_posted = 0;
	}
}

void tl_send_at(struct tl *tl, struct tl_site at, enum tl_dir dir,
		tl_tensor t)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "tl_send tensor");
	Kb__IpcqData data = KB__IPCQ_DATA__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;
	struct tl_ipcq_dir *q;
	uint64_t bytes = tl_rec_bytes(r), ser, start;
	struct rt_path at_send;
	enum rt_err rc;

	if (dir != TL_LEFT && dir != TL_RIGHT)
		tl_abort(tl, at, RT_EKERNEL, "tl_send: direction %d", (int)dir);
	if (tl->s.ranks < 2)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_send needs at least 2 ranks on the IPCQ ring (run with --ranks 2)");
	if (!r->tcm || r->trans)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_send needs a TCM tensor (not a tl_ref or a transposed view)");
	tl_wait_cmd(tl, at, r->producer);
	q = &tl->ipcq[dir];
	tl_charge(tl, at, rt_dispatch_cycles(tl->s.cfg, RT_ISA_MOVE_LOGICAL_BYTES));
	data.ready_ps = tl->clock_ps;
	at_send = tl->path;
	if (pe_shared_links(tl->s.ranks, tl->s.pes)) {
		start = tl->clock_ps; /* the rank's link component serialises */
		ser = 0;
	} else {
		ser = pe_ipcq_cycles(tl->s.cfg->ipcq_bytes_per_cycle, bytes) * tl->cycle_ps;
		start = tl->clock_ps;
		if (q->link_free_ps > tl->clock_ps) {
			/* the link, busy with earlier messages, decides the start */
			start = q->link_free_ps;
			at_send = q->link_free_path;
		}
		q->link_free_ps = start + ser;
		q->link_free_path = at_send;
		rt_path_add(&q->link_free_path, RT_PATH_LINK_QUEUEING, ser);
		data.link_start_ps = start;
		data.link_end_ps = start + ser;
		tl_stat(tl, TL_ST_IPCQ_LINK_BUSY, ser);
		tl_stat(tl, dir == TL_LEFT ? TL_ST_IPCQ_LINK_LEFT_BUSY : TL_ST_IPCQ_LINK_RIGHT_BUSY, ser);
		tl_stat(tl, dir == TL_LEFT ? TL_ST_IPCQ_LINK_LEFT_BYTES : TL_ST_IPCQ_LINK_RIGHT_BYTES,
			bytes);
	}
	data.dir = (uint32_t)dir;
	data.nbytes = bytes;
	if (tl->s.mode == TL_DATA) {
		data.data.data = tl_tcm_bytes(tl, r->addr, bytes);
		data.data.len = data.data.data ? (size_t)bytes : 0;
	}
	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = &data;
	rc = tl->s.port->send(tl->s.port_ctx,
			      dir == TL_LEFT ? TL_PORT_LEFT : TL_PORT_RIGHT,
			      start, ser, &msg, tl->path_ok ? &at_send : NULL);
	if (rc != RT_EOK)
		tl_abort(tl, at, rc, "tl_send failed: %s", rt_last_error());
	tl->tot.ipcq_bytes += bytes;
	tl_stat(tl, TL_ST_IPCQ_BYTES, bytes);
}

/* Completes receive `id` with message `m` (bytes into its buffer). */
static enum rt_err deliver(struct tl *tl, uint64_t id, tl_tensor t,
			   const struct tl_ipcq_msg *m, const uint8_t *bytes)
{
	uint64_t nbytes = m->nbytes;
	struct tl_rec *r = &tl->slots[t.slot];
	uint8_t *dst;

	if (r->gen != t.gen || nbytes != tl_rec_bytes(r))
		return rt_fail(RT_EKERNEL,
			       "kernel %s: IPCQ message of %llu bytes does not match its receive (%llu bytes)",
			       tl->s.kernel_name, (unsigned long long)nbytes,
			       (unsigned long long)tl_rec_bytes(r));
	dst = tl_tcm_bytes(tl, r->addr, nbytes);
	if (bytes && dst)
		memcpy(dst, bytes, (size_t)nbytes);
	tl_cmd_set_path(tl, id, m->has_path ? &m->path : NULL);
	tl_cmd_complete(tl, id, m->arrive_ps);
	return RT_EOK;
}

void tl_ipcq_waited(struct tl *tl, uint64_t id, uint64_t from_ps)
{
	uint64_t arrive = tl->cmds[id].done_ps;

	if (arrive > from_ps) /* it was not there yet: the kernel waited */
		tl_stat(tl, TL_ST_IPCQ_RECV_WAIT, arrive - from_ps);
}

tl_future tl_recv_async_at(struct tl *tl, struct tl_site at, enum tl_dir dir,
			   uint32_t rows, uint32_t cols, enum tl_dtype dtype)
{
	struct tl_ipcq_dir *q;
	struct tl_rec *r;
	uint64_t id;
	tl_future f;

	if (dir != TL_LEFT && dir != TL_RIGHT)
		tl_abort(tl, at, RT_EKERNEL, "tl_recv_async: direction %d",
			 (int)dir);
	f.t = tl_scratch_tensor(tl, at, rows, cols, dtype);
	r = &tl->slots[f.t.slot];
	id = tl_cmd_new(tl, at, TL_CMD_RECV);
	tl->cmds[id].dir = (uint32_t)dir; /* named if the run ends before it arrives */
	tl_cmd_touch_tcm(tl, id, r->addr, tl_rec_bytes(r));
	r->producer = id;
	r->pinned = true;
	/* receives remember their tensor through the command's TCM range */
	q = &tl->ipcq[dir];
	if (q->head_early < q->n_early) {
		struct tl_ipcq_msg m = q->early[q->head_early++];
		enum rt_err rc = deliver(tl, id, f.t, &m, m.bytes);

		free(m.bytes);
		compact(q);
		if (rc != RT_EOK)
			tl_abort(tl, at, rc, "%s", rt_last_error());
		return f;
	}
	compact(q);
	if (q->n_posted + 1 > q->cap_posted) {
		uint32_t cap = q->cap_posted ? q->cap_posted * 2 : 8;
		void *p = realloc(q->posted, cap * 2 * sizeof(*q->posted));

		if (!p)
			tl_abort(tl, at, RT_ENOMEM, "out of memory (IPCQ)");
		q->posted = p;
		q->cap_posted = cap;
	}
	/* pairs: command id, slot | gen << 32 */
	q->posted[2 * q->n_posted] = id;
	q->posted[2 * q->n_posted + 1] =
		(uint64_t)f.t.slot | ((uint64_t)f.t.gen << 32);
	q->n_posted++;
	return f;
}

static enum rt_err keep_early(struct tl *tl, struct tl_ipcq_dir *q,
			      const Kb__IpcqData *m, uint64_t now_ps,
			      const struct rt_path *path)
{
	struct tl_ipcq_msg *e;

	compact(q);
	if (q->n_early + 1 > q->cap_early) {
		uint32_t cap = q->cap_early ? q->cap_early * 2 : 8;
		void *p = realloc(q->early, cap * sizeof(*q->early));

		if (!p)
			return rt_fail(RT_ENOMEM, "out of memory (IPCQ)");
		q->early = p;
		q->cap_early = cap;
	}
	e = &q->early[q->n_early++];
	e->arrive_ps = now_ps;
	e->nbytes = m->nbytes;
	e->bytes = NULL;
	e->has_path = path != NULL;
	if (path)
		e->path = *path;
	if (m->data.len) {
		e->bytes = malloc(m->data.len);
		if (!e->bytes)
			return rt_fail(RT_ENOMEM, "out of memory (IPCQ)");
		memcpy(e->bytes, m->data.data, m->data.len);
	}
	(void)tl;
	return RT_EOK;
}

enum rt_err tl_on_ipcq(struct tl *tl, const Kb__IpcqData *m, uint64_t now_ps,
		       const struct rt_path *path)
{
	/* sent RIGHT by my left neighbour: it comes from my LEFT */
	uint32_t from = m->dir == TL_RIGHT ? TL_LEFT : TL_RIGHT;
	struct tl_ipcq_dir *q = &tl->ipcq[from];
	struct tl_ipcq_msg got = { .arrive_ps = now_ps, .nbytes = m->nbytes,
				   .has_path = path != NULL };
	uint64_t id, key;
	tl_tensor t;
	enum rt_err rc;

	if (m->dir > 1 || (m->data.len && m->data.len != m->nbytes))
		return rt_fail(RT_EDECODE,
			       "IPCQ message to r%u.pe%u: bad direction %u or %zu data bytes for %llu",
			       tl->s.rank, tl->s.pe, m->dir, m->data.len,
			       (unsigned long long)m->nbytes);
	tl->now_ps = now_ps;
	if (path)
		got.path = *path;
	if (q->head_posted == q->n_posted)
		return keep_early(tl, q, m, now_ps, path);
	id = q->posted[2 * q->head_posted];
	key = q->posted[2 * q->head_posted + 1];
	q->head_posted++;
	compact(q);
	t.slot = (uint32_t)key;
	t.gen = (uint32_t)(key >> 32);
	t.scope = 0;
	rc = deliver(tl, id, t, &got, m->data.len ? m->data.data : NULL);
	if (rc != RT_EOK)
		return rc;
	return tl_resume_for(tl, id);
}
