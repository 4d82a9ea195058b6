/* hbm/interleaved.c — the "interleaved" HBM model: the rank's bandwidth is
 * split over hbm.channels channels, addresses interleave over them in blocks
 * of hbm.interleave_bytes, and each channel serves the bytes that fall on it
 * first come first served (transfers arrive in the total event order). A
 * transfer's end is known when it arrives; it waits in `pending` until the
 * component's clock reaches it. Formula in eng.h. */
#include "eng.h"
#include "rt/ff.h"

#include <stdlib.h>

#include "rt/grow.h"

/* A transfer whose end is known, waiting to be retired. */
struct pending {
	uint64_t token;
	uint64_t end_ps;
	uint64_t seq; /* arrival order: ties retire in it */
};

struct ilv_state {
	uint64_t channels;
	uint64_t interleave;
	uint64_t bytes_per_cycle; /* rank peak */
	uint64_t cycle_ps;
	uint64_t *free_ps;        /* per channel: when it next idles */
	uint64_t *share;          /* scratch: bytes of one transfer per channel */
	struct pending *pend;     /* unordered */
	size_t n_pend, cap_pend;
	uint64_t seq;
};

static enum rt_err ilv_init(void *state, const struct rt_config *cfg)
{
	struct ilv_state *st = state;

	if (!cfg->hbm_channels || !cfg->hbm_interleave_bytes || !cfg->hbm_bytes_per_cycle)
		return rt_fail(RT_ECONFIG,
			       "hbm model 'interleaved': hbm.channels, hbm.interleave_bytes and hbm.bytes_per_cycle must be at least 1");
	st->channels = cfg->hbm_channels;
	st->interleave = cfg->hbm_interleave_bytes;
	st->bytes_per_cycle = cfg->hbm_bytes_per_cycle;
	st->cycle_ps = rt_config_cycle_ps(cfg);
	st->free_ps = calloc(st->channels, sizeof(*st->free_ps));
	st->share = calloc(st->channels, sizeof(*st->share));
	if (!st->free_ps || !st->share)
		return rt_fail(RT_ENOMEM, "hbm model 'interleaved': no memory for %llu channels",
			       (unsigned long long)st->channels);
	return RT_EOK;
}

/* Bytes of [addr, addr + bytes) on each channel, into st->share. Whole
 * rounds over all channels are counted at once, so a large transfer costs
 * O(channels), not O(blocks). */
static void split(struct ilv_state *st, uint64_t addr, uint64_t bytes)
{
	uint64_t ib = st->interleave, c_n = st->channels;
	uint64_t first = addr / ib, end = addr + bytes;

	for (uint64_t c = 0; c < c_n; c++)
		st->share[c] = 0;
	/* partial first block, then whole blocks, then a partial last one */
	for (uint64_t b = first; b * ib < end;) {
		uint64_t lo = b * ib > addr ? b * ib : addr;
		uint64_t whole = (end - lo) / ib;

		if (lo == b * ib && whole >= c_n) {
			uint64_t rounds = whole / c_n;

			for (uint64_t c = 0; c < c_n; c++)
				st->share[c] += rounds * ib;
			b += rounds * c_n;
			continue;
		}
		uint64_t hi = (b + 1) * ib < end ? (b + 1) * ib : end;

		st->share[b % c_n] += hi - lo;
		b++;
	}
}

static enum rt_err ilv_submit(void *state, uint64_t now_ps, const struct eng_hbm_access *a)
{
	struct ilv_state *st = state;
	uint64_t end = a->wire_end_ps > now_ps ? a->wire_end_ps : now_ps;

	split(st, a->addr, a->bytes);
	for (uint64_t c = 0; c < st->channels; c++) {
		uint64_t start, ps;

		if (!st->share[c])
			continue;
		start = st->free_ps[c] > now_ps ? st->free_ps[c] : now_ps;
		/* channel rate = B / C bytes per cycle */
		ps = eng_ceil_div(eng_mul_sat(eng_mul_sat(st->share[c], st->channels), st->cycle_ps),
				  st->bytes_per_cycle);
		st->free_ps[c] = start + ps;
		if (st->free_ps[c] > end)
			end = st->free_ps[c];
	}
	if (!RT_GROW(st->pend, st->cap_pend, st->n_pend, 16))
		return rt_fail(RT_ENOMEM, "hbm model 'interleaved': out of memory");
	st->pend[st->n_pend++] = (struct pending){ a->token, end, st->seq++ };
	return RT_EOK;
}

/* Index of the pending transfer that ends first (ties: first arrived). */
static size_t ilv_first(const struct ilv_state *st)
{
	size_t best = 0;

	for (size_t i = 1; i < st->n_pend; i++)
		if (st->pend[i].end_ps < st->pend[best].end_ps ||
		    (st->pend[i].end_ps == st->pend[best].end_ps &&
		     st->pend[i].seq < st->pend[best].seq))
			best = i;
	return best;
}

static enum rt_err ilv_retire(void *state, uint64_t now_ps, eng_hbm_done_fn done, void *arg)
{
	struct ilv_state *st = state;

	while (st->n_pend) {
		size_t i = ilv_first(st);
		struct pending p = st->pend[i];

		if (p.end_ps > now_ps)
			break;
		st->pend[i] = st->pend[--st->n_pend];
		done(arg, p.token, p.end_ps);
	}
	return RT_EOK;
}

static uint64_t ilv_next_done(const void *state)
{
	const struct ilv_state *st = state;

	return st->n_pend ? st->pend[ilv_first(st)].end_ps : UINT64_MAX;
}

static void ilv_fini(void *state)
{
	struct ilv_state *st = state;

	free(st->free_ps);
	free(st->share);
	free(st->pend);
}

/* Each channel's free time and the pending ends, relative to t (pending
 * is unordered: an order-free sum). */
static uint64_t ilv_digest(const void *state, uint64_t t)
{
	const struct ilv_state *st = state;
	uint64_t h = st->n_pend, sum = 0;

	for (uint64_t c = 0; st->free_ps && c < st->channels; c++)
		h = rt_ff_mix(h, rt_ff_rel(st->free_ps[c], t));
	for (size_t i = 0; i < st->n_pend; i++)
		sum += rt_ff_mix(0x5bd1e995, rt_ff_rel(st->pend[i].end_ps, t));
	return rt_ff_mix(h, sum);
}

const struct eng_hbm_ops eng_hbm_interleaved_model = {
	.abi = ENG_HBM_ABI,
	.name = "interleaved",
	.state_size = sizeof(struct ilv_state),
	.init = ilv_init,
	.retire = ilv_retire,
	.submit = ilv_submit,
	.next_done = ilv_next_done,
	.fini = ilv_fini,
	.digest = ilv_digest,
};
