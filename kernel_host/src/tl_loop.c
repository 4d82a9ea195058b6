/* tl_loop.c — TL_FOR loops the runtime may fast-forward (tl.h, ADR 0059).
 * The host keeps each running loop's place and hands it to the port; the
 * daemon decides when to skip and sets `skip`, which the next iteration
 * boundary applies. The daemon grows the component statistics it holds;
 * what the host keeps itself until the kernel's end (commands issued, each
 * call site's dispatch and wait time, the scratch cursor and its peak)
 * grows here, by the skip's periods times their growth over the last
 * period, read from the counters kept at each tick. */
#include <stdlib.h>
#include <string.h>

#include "tl_private.h"

#define HIST_TICKS (RT_FF_PER_MAX + 2)

/* Counters at a tick: commands, cursor, then each site's dispatch cycles
 * and wait time by the site's order. */
static uint32_t hist_stride(const struct tl *tl)
{
	return 2 + 2 * tl->n_sites;
}

static void hist_read(const struct tl *tl, uint64_t *v)
{
	v[0] = tl->tot.commands;
	v[1] = tl->cursor;
	for (uint32_t i = 0; i < tl->cap_sites; i++) {
		const struct tl_site_acc *s = &tl->sites[i];

		if (s->file) {
			v[2 + 2 * s->order] = s->dispatch_cycles;
			v[3 + 2 * s->order] = s->wait_ps;
		}
	}
}

static void hist_release(struct tl_loop_hist *h)
{
	free(h->ring);
	memset(h, 0, sizeof(*h));
}

/* Keeps the counters of this tick; a new call site starts the history
 * again (ready counts the ticks kept). */
static void hist_tick(struct tl *tl, struct tl_loop_hist *h, struct rt_ff_loop *l)
{
	uint32_t stride = hist_stride(tl);

	if (stride != h->stride) {
		hist_release(h);
		h->ring = malloc((size_t)HIST_TICKS * stride * sizeof(*h->ring));
		if (!h->ring) {
			l->ready = 0;
			return;
		}
		h->stride = stride;
	}
	h->head = (h->head + 1) % HIST_TICKS;
	hist_read(tl, h->ring + (size_t)h->head * stride);
	if (h->n < HIST_TICKS)
		h->n++;
	l->ready = h->n;
}

/* Adds `k` times the growth over the last `per` ticks. */
static void hist_grow(struct tl *tl, const struct tl_loop_hist *h, uint64_t per, uint64_t k)
{
	const uint64_t *now, *then;

	if (!h->ring || per >= h->n)
		return; /* the daemon skips only what `ready` allows */
	now = h->ring + (size_t)h->head * h->stride;
	then = h->ring + (size_t)((h->head + HIST_TICKS - per) % HIST_TICKS) * h->stride;
	tl->tot.commands += k * (now[0] - then[0]);
	if (now[1] > then[1]) { /* the fresh buffers the skipped tiles took */
		tl->cursor += k * (now[1] - then[1]);
		if (tl->cursor > tl->peak)
			tl->peak = tl->cursor;
	}
	for (uint32_t i = 0; i < tl->cap_sites; i++) {
		struct tl_site_acc *s = &tl->sites[i];

		if (s->file) {
			s->dispatch_cycles += k * (now[2 + 2 * s->order] - then[2 + 2 * s->order]);
			s->wait_ps += k * (now[3 + 2 * s->order] - then[3 + 2 * s->order]);
		}
	}
}

uint32_t tl_loop_begin_at(struct tl *tl, struct tl_site at, uint32_t first, uint32_t end,
			  uint64_t key)
{
	struct rt_ff_loop *l;

	if (tl->n_loops == TL_LOOP_DEPTH)
		tl_abort(tl, at, RT_EKERNEL, "TL_FOR nested more than %d deep", TL_LOOP_DEPTH);
	l = &tl->loops[tl->n_loops++];
	*l = (struct rt_ff_loop){ .index = first, .end = end, .key = key, .slot = UINT32_MAX };
	if (first < end && tl->s.port->loop_enter)
		tl->s.port->loop_enter(tl->s.port_ctx, l);
	return first;
}

/* The innermost loop is the one whose condition is asked: an inner loop
 * has ended before its outer one asks again. */
bool tl_loop_more(struct tl *tl, uint32_t i)
{
	struct rt_ff_loop *l = &tl->loops[tl->n_loops - 1];

	if (i < l->end)
		return true;
	if (tl->s.port->loop_leave)
		tl->s.port->loop_leave(tl->s.port_ctx, l);
	hist_release(&tl->loop_hist[tl->n_loops - 1]);
	tl->n_loops--;
	return false;
}

uint32_t tl_loop_next(struct tl *tl, uint32_t i)
{
	struct rt_ff_loop *l = &tl->loops[tl->n_loops - 1];
	struct tl_loop_hist *h = &tl->loop_hist[tl->n_loops - 1];
	uint64_t next;

	if (l->slot != UINT32_MAX) /* watched by the daemon */
		hist_tick(tl, h, l);
	if (tl->s.port->loop_tick)
		tl->s.port->loop_tick(tl->s.port_ctx, l, tl->path_ok ? &tl->path : NULL);
	else
		l->ticks++;
	if (l->skip && l->per)
		hist_grow(tl, h, l->per, l->skip / l->per);
	next = (uint64_t)i + 1 + l->skip; /* the skip never passes the end */
	l->skipped += l->skip;
	l->skip = 0;
	l->index = next;
	return (uint32_t)next;
}

uint32_t tl_loop_skipped(const struct tl *tl)
{
	return tl->n_loops ? (uint32_t)tl->loops[tl->n_loops - 1].skipped : 0;
}

void tl_loops_release(struct tl *tl)
{
	for (uint32_t i = 0; i < TL_LOOP_DEPTH; i++)
		hist_release(&tl->loop_hist[i]);
	tl->n_loops = 0;
}

/* Whether a loop the daemon watches is running (its iterations are what a
 * skip jumps over). */
static bool in_watched_loop(const struct tl *tl)
{
	for (uint32_t i = 0; i < tl->n_loops; i++)
		if (tl->loops[i].slot != UINT32_MAX)
			return true;
	return false;
}

void tl_loop_note_cmd(struct tl *tl)
{
	if (!in_watched_loop(tl))
		tl->cmds_unwatched++;
}

/* What a kernel outside every watched loop adds to its digest. A skip
 * jumps only watched loops: a kernel issuing commands elsewhere (a plain
 * for loop, a ring step's diagonal tiles) would redo the skipped periods
 * afterwards, so its count of such commands never repeats. Exact mode
 * (t a time) also refuses one waiting there: the wait it would have
 * spent in the skipped periods is missing from its statistics. Auto mode
 * (t = UINT64_MAX: structure only) lets it wait. A kernel that has ended
 * is left as it is. */
static uint64_t unwatched_digest(const struct tl *tl, uint64_t h, uint64_t t)
{
	if (tl->state == TL_DONE || tl->state == TL_FAILED || in_watched_loop(tl))
		return h;
	h = rt_ff_mix(h, tl->cmds_unwatched);
	return t == UINT64_MAX ? h : rt_ff_mix(h, t);
}

static uint64_t pending_sum(const struct tl *tl)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < tl->n_pending; i++)
		sum += rt_ff_mix(0x70656e64, tl->n_cmds - tl->pending[i]);
	return sum;
}

/* A FIFO of early messages in order, each by its size and arrival: a
 * receive takes the next whatever it asks for, so a skip that moves the
 * receiver's place but not the FIFO's is right only where the FIFO's
 * messages are alike (ring pass=kv's inboxes hold a step's worth ahead:
 * their last tile's narrower message would be taken by another tile). */
static uint64_t early_digest(uint64_t h, const struct tl_ipcq_dir *q, uint64_t t)
{
	for (uint32_t i = q->head_early; i < q->n_early; i++) {
		const struct tl_ipcq_msg *m = &q->early[i];

		h = rt_ff_mix(h, rt_ff_mix(m->nbytes, rt_ff_rel(m->arrive_ps, t)));
	}
	return h;
}

/* Live entries are [head, n): their counts, not where they sit. */
static uint64_t dir_digest(uint64_t h, const struct tl_ipcq_dir *q, uint64_t t)
{
	h = rt_ff_mix(h, ((uint64_t)(q->n_early - q->head_early) << 32) |
			 (q->n_posted - q->head_posted));
	h = early_digest(h, q, t);
	return rt_ff_mix(h, rt_ff_rel(q->link_free_ps, t));
}

/* Fast-forward (ADR 0059): where the kernel is and what it waits for, its
 * commands in flight by how long ago they were issued (ids relative to
 * the next), its IPCQ queues and barrier, relative to t. Addresses and the
 * scratch cursor are left out (they place, never time, a command). */
uint64_t tl_ff_digest(const struct tl *tl, uint64_t t)
{
	uint64_t h = ((uint64_t)tl->state << 40) ^ ((uint64_t)tl->n_loops << 32) ^ tl->n_saves;

	h = rt_ff_mix(h, rt_ff_rel(tl->clock_ps, t));
	h = rt_ff_mix(h, tl->waiting_for ? tl->n_cmds - tl->waiting_for : 0);
	h = rt_ff_mix(h, (uint64_t)(uint32_t)tl->wait_site.line);
	h = rt_ff_mix(h, tl->n_pending);
	h = rt_ff_mix(h, pending_sum(tl)); /* a set: its order is the removals' */
	for (unsigned d = 0; d < 2; d++)
		h = dir_digest(h, &tl->ipcq[d], t);
	for (uint32_t i = 0; i < tl->n_p2p; i++)
		h = dir_digest(rt_ff_mix(h, ((uint64_t)tl->p2p[i].src_rank << 32) | tl->p2p[i].tag),
			       &tl->p2p[i].q, t);
	h = rt_ff_mix(h, ((uint64_t)tl->bar_arrived << 1) | tl->bar_waiting);
	h = rt_ff_mix(h, tl->bar_cmd ? tl->n_cmds - tl->bar_cmd : 0);
	return unwatched_digest(tl, h, t);
}
