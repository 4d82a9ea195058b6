/* ipcq.c — IPCQ messages between the hosts of the same PE index on other
 * ranks. Every send goes to the rank's link component (src/link.c), which
 * serialises it on the links it crosses and delivers it: a message I send
 * RIGHT (tl_send) arrives at my right neighbour from its LEFT; tl_send_to
 * reaches any rank, over as many links as the topology takes. The n-th
 * receive posted for a direction matches the n-th message arriving from it,
 * and the n-th tl_recv_from_async of (rank, tag) the n-th message that rank
 * sent me with that tag, whichever comes first.
 *
 * Sends read TCM and receives write TCM; TCM bandwidth is not a modelled
 * resource for any engine, so the links are the only cost (docs/attention.md).
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

#include "npu/pe.h"
#include "tl_io.h"

static void queue_release(struct tl_ipcq_dir *q)
{
	for (uint32_t i = q->head_early; i < q->n_early; i++)
		free(q->early[i].bytes);
	free(q->early);
	free(q->posted);
	memset(q, 0, sizeof(*q));
}

void tl_ipcq_release(struct tl *tl)
{
	for (uint32_t d = 0; d < 2; d++)
		queue_release(&tl->ipcq[d]);
	for (uint32_t i = 0; i < tl->n_p2p; i++)
		queue_release(&tl->p2p[i].q);
	free(tl->p2p);
	tl->p2p = NULL;
	tl->n_p2p = tl->cap_p2p = 0;
}

/* The FIFOs of (src_rank, tag), made on first use; NULL when out of
 * memory. A kernel uses a handful of keys (a collective one or two per
 * peer), so a scan from the last one found is enough. */
static struct tl_ipcq_dir *p2p_queue(struct tl *tl, uint32_t src_rank, uint32_t tag)
{
	for (uint32_t k = 0; k < tl->n_p2p; k++) {
		uint32_t i = (tl->p2p_hit + k) % tl->n_p2p;

		if (tl->p2p[i].src_rank == src_rank && tl->p2p[i].tag == tag) {
			tl->p2p_hit = i;
			return &tl->p2p[i].q;
		}
	}
	if (tl->n_p2p == tl->cap_p2p) {
		uint32_t cap = tl->cap_p2p ? 2 * tl->cap_p2p : 16;
		struct tl_ipcq_key *p = realloc(tl->p2p, cap * sizeof(*p));

		if (!p)
			return NULL;
		tl->p2p = p;
		tl->cap_p2p = cap;
	}
	memset(&tl->p2p[tl->n_p2p], 0, sizeof(tl->p2p[0]));
	tl->p2p[tl->n_p2p].src_rank = src_rank;
	tl->p2p[tl->n_p2p].tag = tag;
	tl->p2p_hit = tl->n_p2p;
	return &tl->p2p[tl->n_p2p++].q;
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

/* Sends `t` to the rank's link component: one dispatch, then the link
 * serialises it (`data` carries direction or destination). */
static void send_msg(struct tl *tl, struct tl_site at, const char *api, tl_tensor t,
		     Kb__IpcqData *data)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, api);
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t bytes = tl_rec_bytes(r);
	enum rt_err rc;

	if (!r->tcm || r->trans)
		tl_abort(tl, at, RT_EKERNEL,
			 "%s needs a TCM tensor (not a tl_ref or a transposed view)", api);
	tl_wait_cmd(tl, at, r->producer);
	tl_charge(tl, at, rt_dispatch_cycles(tl->s.cfg, RT_ISA_MOVE_LOGICAL_BYTES));
	data->ready_ps = tl->clock_ps;
	data->src_rank = tl->s.rank;
	data->pe = tl->s.pe;
	data->nbytes = bytes;
	if (tl->s.mode == TL_DATA) {
		data->data.data = tl_tcm_bytes(tl, r->addr, bytes);
		data->data.len = data->data.data ? (size_t)bytes : 0;
	}
	msg.body_case = KB__PAYLOAD__BODY_IPCQ;
	msg.ipcq = data;
	rc = tl->s.port->send(tl->s.port_ctx, TL_PORT_LINK, tl->clock_ps, 0, &msg,
			      tl->path_ok ? &tl->path : NULL);
	if (rc != RT_EOK)
		tl_abort(tl, at, rc, "%s failed: %s", api, rt_last_error());
	tl->tot.ipcq_bytes += bytes;
	tl_stat(tl, TL_ST_IPCQ_BYTES, bytes);
}

void tl_send_at(struct tl *tl, struct tl_site at, enum tl_dir dir,
		tl_tensor t)
{
	Kb__IpcqData data = KB__IPCQ_DATA__INIT;

	if (dir != TL_LEFT && dir != TL_RIGHT)
		tl_abort(tl, at, RT_EKERNEL, "tl_send: direction %d", (int)dir);
	if (tl->s.ranks < 2)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_send needs at least 2 ranks on the IPCQ ring (run with --ranks 2)");
	data.dir = (uint32_t)dir;
	data.dst_rank = pe_ring_neighbour(tl->s.ranks, tl->s.rank,
					  dir == TL_LEFT ? PE_DIR_LEFT : PE_DIR_RIGHT);
	send_msg(tl, at, "tl_send", t, &data);
}

void tl_ipcq_send_to(struct tl *tl, struct tl_site at, uint32_t rank, uint32_t tag,
		     enum tl_route route, tl_tensor t)
{
	Kb__IpcqData data = KB__IPCQ_DATA__INIT;

	if (rank >= tl->s.ranks || rank == tl->s.rank)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_send_to rank %u: expected another rank of the %u (this is rank %u)",
			 rank, tl->s.ranks, tl->s.rank);
	data.p2p = true;
	data.dst_rank = rank;
	data.tag = tag;
	data.route = (uint32_t)route;
	send_msg(tl, at, "tl_send_to", t, &data);
}

void tl_send_to_at(struct tl *tl, struct tl_site at, uint32_t rank, uint32_t tag,
		   tl_tensor t)
{
	tl_ipcq_send_to(tl, at, rank, tag, TL_ROUTE_SHORTEST, t);
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

/* Posts receive `f` (command `id`) on `q`, or completes it at once with
 * the oldest message that came before it. */
static void post_recv(struct tl *tl, struct tl_site at, struct tl_ipcq_dir *q, uint64_t id,
		      tl_future f)
{
	if (q->head_early < q->n_early) {
		struct tl_ipcq_msg m = q->early[q->head_early++];
		enum rt_err rc = deliver(tl, id, f.t, &m, m.bytes);

		free(m.bytes);
		compact(q);
		if (rc != RT_EOK)
			tl_abort(tl, at, rc, "%s", rt_last_error());
		return;
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
}

/* A receive command writing tensor `t` (TCM). */
static tl_future recv_cmd_into(struct tl *tl, struct tl_site at, tl_tensor t, uint64_t *id)
{
	struct tl_rec *r = &tl->slots[t.slot];

	*id = tl_cmd_new(tl, at, TL_CMD_RECV);
	tl_cmd_touch_tcm(tl, *id, r->addr, tl_rec_bytes(r));
	r->producer = *id;
	r->pinned = true;
	/* receives remember their tensor through the command's TCM range */
	return (tl_future){ t };
}

/* A receive command writing a fresh scratch tensor. */
static tl_future recv_cmd(struct tl *tl, struct tl_site at, uint32_t rows, uint32_t cols,
			  enum tl_dtype dtype, uint64_t *id)
{
	return recv_cmd_into(tl, at, tl_scratch_tensor(tl, at, rows, cols, dtype), id);
}

tl_future tl_recv_async_at(struct tl *tl, struct tl_site at, enum tl_dir dir,
			   uint32_t rows, uint32_t cols, enum tl_dtype dtype)
{
	uint64_t id;
	tl_future f;

	if (dir != TL_LEFT && dir != TL_RIGHT)
		tl_abort(tl, at, RT_EKERNEL, "tl_recv_async: direction %d",
			 (int)dir);
	f = recv_cmd(tl, at, rows, cols, dtype, &id);
	tl->cmds[id].dir = (uint32_t)dir; /* named if the run ends before it arrives */
	post_recv(tl, at, &tl->ipcq[dir], id, f);
	return f;
}

/* The p2p FIFOs of (rank, tag) for a receive at `at`. */
static struct tl_ipcq_dir *recv_queue(struct tl *tl, struct tl_site at, uint32_t rank,
				      uint32_t tag)
{
	struct tl_ipcq_dir *q;

	if (rank >= tl->s.ranks || rank == tl->s.rank)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_recv_from_async rank %u: expected another rank of the %u (this is rank %u)",
			 rank, tl->s.ranks, tl->s.rank);
	q = p2p_queue(tl, rank, tag);
	if (!q)
		tl_abort(tl, at, RT_ENOMEM, "out of memory (IPCQ)");
	return q;
}

tl_future tl_ipcq_recv_into(struct tl *tl, struct tl_site at, uint32_t rank, uint32_t tag,
			    tl_tensor dst)
{
	struct tl_rec *r = tl_rec_get(tl, at, dst, "receive buffer");
	struct tl_ipcq_dir *q = recv_queue(tl, at, rank, tag);
	uint64_t id;
	tl_future f;

	if (!r->tcm || r->trans)
		tl_abort(tl, at, RT_EKERNEL, "a receive buffer must be a TCM tensor, not a view");
	/* the bytes land over what earlier commands may still read or write */
	tl_wait_tcm_range(tl, at, r->addr, r->addr + tl_rec_bytes(r));
	f = recv_cmd_into(tl, at, dst, &id);
	tl->cmds[id].p2p = true;
	tl->cmds[id].src_rank = rank;
	tl->cmds[id].tag = tag;
	post_recv(tl, at, q, id, f);
	return f;
}

tl_future tl_recv_from_async_at(struct tl *tl, struct tl_site at, uint32_t rank,
				uint32_t tag, uint32_t rows, uint32_t cols,
				enum tl_dtype dtype)
{
	struct tl_ipcq_dir *q = recv_queue(tl, at, rank, tag);
	uint64_t id;
	tl_future f;

	f = recv_cmd(tl, at, rows, cols, dtype, &id);
	tl->cmds[id].p2p = true;
	tl->cmds[id].src_rank = rank;
	tl->cmds[id].tag = tag;
	post_recv(tl, at, q, id, f);
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
	struct tl_ipcq_dir *q;
	struct tl_ipcq_msg got = { .arrive_ps = now_ps, .nbytes = m->nbytes,
				   .has_path = path != NULL };
	uint64_t id, key;
	tl_tensor t;
	enum rt_err rc;

	if (m->dir > 1 || (m->data.len && m->data.len != m->nbytes) ||
	    (m->p2p && (m->src_rank >= tl->s.ranks || m->src_rank == tl->s.rank)))
		return rt_fail(RT_EDECODE,
			       "IPCQ message to r%u.pe%u: bad direction %u, source rank %u or %zu data bytes for %llu",
			       tl->s.rank, tl->s.pe, m->dir, m->src_rank, m->data.len,
			       (unsigned long long)m->nbytes);
	tl->now_ps = now_ps;
	if (m->p2p) {
		q = p2p_queue(tl, m->src_rank, m->tag);
		if (!q)
			return rt_fail(RT_ENOMEM, "out of memory (IPCQ)");
	} else { /* sent RIGHT by my left neighbour: it comes from my LEFT */
		q = &tl->ipcq[m->dir == TL_RIGHT ? TL_LEFT : TL_RIGHT];
	}
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
