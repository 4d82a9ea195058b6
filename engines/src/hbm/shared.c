/* hbm/shared.c — the "shared" HBM model: fluid fair share of the rank's
 * bandwidth between the DMA queues (lanes) that have bytes to move, each
 * capped at its own rate (formula in eng.h).
 *
 * Virtual time V counts bytes moved by every busy lane since the start, in
 * 1/65536 byte (integer, so no floating point decides an order). A channel
 * moves its transfers in order, each on its lanes; with n busy lanes (the
 * lanes of every channel's current transfer) V rises by min(b n, B) / n
 * bytes per cycle; a transfer ends when V reaches its finish tag F (its
 * largest piece through). Every change of n happens at an arrival (submit)
 * or a finish (retire), so between them the rate is constant. */
#include "eng.h"
#include "rt/ff.h"

#include <stdlib.h>

#define VSCALE 65536u

struct xfer {
	uint64_t token;
	uint32_t lanes;       /* queues it moves on */
	uint64_t finish_v;    /* F */
	uint64_t wire_end_ps; /* never end before the channel's own wire */
};

/* One DMA channel: its transfers in order. */
struct stream {
	struct xfer *q;
	size_t head, len, cap;
	uint64_t last_v; /* F of its last transfer */
};

struct shared_state {
	uint64_t b, B, cycle_ps;
	uint64_t v;        /* virtual time */
	uint64_t last_ps;  /* time v was accounted to */
	uint32_t busy;     /* streams with transfers */
	uint64_t units;    /* lanes of their current transfers (n) */
	uint32_t n_streams;
	struct stream *s;
};

static enum rt_err shared_init(void *state, const struct rt_config *cfg)
{
	struct shared_state *st = state;

	if (!cfg->hbm_bytes_per_cycle || !cfg->dma_bytes_per_cycle)
		return rt_fail(RT_ECONFIG,
			       "hbm model 'shared': hbm.bytes_per_cycle and dma.bytes_per_cycle must be at least 1");
	st->b = cfg->dma_bytes_per_cycle;
	st->B = cfg->hbm_bytes_per_cycle;
	st->cycle_ps = rt_config_cycle_ps(cfg);
	st->n_streams = eng_hbm_streams(cfg); /* read and write channel per PE */
	st->s = calloc(st->n_streams, sizeof(*st->s));
	if (!st->s)
		return rt_fail(RT_ENOMEM, "hbm model 'shared': out of memory");
	return RT_EOK;
}

/* Rate of V with n busy lanes: num / den V-units per ps. */
static void rate(const struct shared_state *st, unsigned __int128 *num, unsigned __int128 *den)
{
	uint64_t all = eng_mul_sat(st->b, st->units) < st->B ? st->b * st->units : st->B;

	*num = (unsigned __int128)all * VSCALE;
	*den = (unsigned __int128)st->units * st->cycle_ps;
}

/* The busy stream whose head finishes first (ties: lowest stream). */
static struct stream *first(const struct shared_state *st)
{
	struct stream *best = NULL;

	for (uint32_t i = 0; i < st->n_streams; i++) {
		struct stream *s = &st->s[i];

		if (s->len && (!best || s->q[s->head].finish_v < best->q[best->head].finish_v))
			best = s;
	}
	return best;
}

/* ps until V reaches `target` at the current rate (rounded up). */
static uint64_t time_to(const struct shared_state *st, uint64_t target)
{
	unsigned __int128 num, den, dv = target - st->v;

	rate(st, &num, &den);
	return (uint64_t)((dv * den + num - 1) / num);
}

static enum rt_err shared_retire(void *state, uint64_t now_ps, eng_hbm_done_fn done, void *arg)
{
	struct shared_state *st = state;

	while (st->busy) {
		struct stream *f = first(st);
		uint64_t target = f->q[f->head].finish_v, dt = time_to(st, target);

		if (st->last_ps + dt > now_ps) {
			unsigned __int128 num, den;

			rate(st, &num, &den);
			st->v += (uint64_t)((unsigned __int128)(now_ps - st->last_ps) * num / den);
			break;
		}
		st->last_ps += dt;
		st->v = target;
		for (uint32_t i = 0; i < st->n_streams; i++) {
			struct stream *s = &st->s[i];

			while (s->len && s->q[s->head].finish_v <= st->v) {
				struct xfer x = s->q[s->head];

				s->head = (s->head + 1) % s->cap;
				st->units -= x.lanes;
				if (--s->len == 0)
					st->busy--;
				else
					st->units += s->q[s->head].lanes;
				done(arg, x.token,
				     x.wire_end_ps > st->last_ps ? x.wire_end_ps : st->last_ps);
			}
		}
	}
	st->last_ps = now_ps;
	return RT_EOK;
}

static enum rt_err stream_push(struct stream *s, struct xfer x)
{
	if (s->len == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct xfer *q = malloc(cap * sizeof(*q));

		if (!q)
			return rt_fail(RT_ENOMEM, "hbm model 'shared': out of memory");
		for (size_t i = 0; i < s->len; i++)
			q[i] = s->q[(s->head + i) % s->cap];
		free(s->q);
		s->q = q;
		s->head = 0;
		s->cap = cap;
	}
	s->q[(s->head + s->len++) % s->cap] = x;
	return RT_EOK;
}

static enum rt_err shared_submit(void *state, uint64_t now_ps, const struct eng_hbm_access *a)
{
	struct shared_state *st = state;
	struct stream *s;
	struct xfer x;
	enum rt_err err;

	if (a->stream >= st->n_streams)
		return rt_fail(RT_EINVAL, "hbm model 'shared': stream %u of %u", a->stream,
			       st->n_streams);
	s = &st->s[a->stream];
	x.token = a->token;
	x.lanes = a->lanes ? a->lanes : 1;
	x.wire_end_ps = a->wire_end_ps;
	x.finish_v = (s->last_v > st->v ? s->last_v : st->v) +
		     eng_mul_sat(a->lane_bytes ? a->lane_bytes : a->bytes, VSCALE);
	err = stream_push(s, x);
	if (err)
		return err;
	s->last_v = x.finish_v;
	if (s->len == 1) {
		st->busy++;
		st->units += x.lanes;
	}
	(void)now_ps; /* retire(now_ps) accounted V up to now */
	return RT_EOK;
}

static uint64_t shared_next_done(const void *state)
{
	const struct shared_state *st = state;
	struct stream *f = st->busy ? first(st) : NULL;

	return f ? st->last_ps + time_to(st, f->q[f->head].finish_v) : UINT64_MAX;
}

static void shared_fini(void *state)
{
	struct shared_state *st = state;

	for (uint32_t i = 0; st->s && i < st->n_streams; i++)
		free(st->s[i].q);
	free(st->s);
}

/* Each stream's transfers by lanes, finish relative to the virtual time
 * and wire end relative to t; how long since the virtual time moved. */
static uint64_t shared_digest(const void *state, uint64_t t)
{
	const struct shared_state *st = state;
	uint64_t h = ((uint64_t)st->busy << 32) ^ st->units;
	bool times = t != UINT64_MAX; /* UINT64_MAX: the structure only */

	h = rt_ff_mix(h, times && t > st->last_ps ? t - st->last_ps : 0);
	for (uint32_t i = 0; st->s && i < st->n_streams; i++) {
		const struct stream *s = &st->s[i];

		h = rt_ff_mix(h, ((uint64_t)s->len << 1) ^ (times ? rt_ff_rel(s->last_v, st->v) : 0));
		for (size_t k = 0; k < s->len; k++) {
			const struct xfer *x = &s->q[(s->head + k) % s->cap];

			h = rt_ff_mix(h, ((uint64_t)x->lanes << 48) ^
					 (times ? rt_ff_rel(x->finish_v, st->v) : 0));
			h = rt_ff_mix(h, rt_ff_rel(x->wire_end_ps, t));
		}
	}
	return h;
}

const struct eng_hbm_ops eng_hbm_shared_model = {
	.abi = ENG_HBM_ABI,
	.name = "shared",
	.state_size = sizeof(struct shared_state),
	.init = shared_init,
	.retire = shared_retire,
	.submit = shared_submit,
	.next_done = shared_next_done,
	.digest = shared_digest,
	.fini = shared_fini,
};
