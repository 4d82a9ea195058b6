/* hbm/shared.c — the "shared" HBM model: the rank's bandwidth is split over
 * hbm.channels channels, addresses interleave over them in blocks of
 * hbm.interleave_bytes, and each channel serves the bytes that fall on it
 * first come first served (transfers arrive in the total event order).
 * Formula in eng.h. */
#include "eng.h"

#include <stdlib.h>

struct shared_state {
	uint64_t channels;
	uint64_t interleave;
	uint64_t bytes_per_cycle; /* rank peak */
	uint64_t cycle_ps;
	uint64_t *free_ps;        /* per channel: when it next idles */
	uint64_t *share;          /* scratch: bytes of one transfer per channel */
};

static enum rt_err shared_init(void *state, const struct rt_config *cfg)
{
	struct shared_state *st = state;

	if (!cfg->hbm_channels || !cfg->hbm_interleave_bytes || !cfg->hbm_bytes_per_cycle)
		return rt_fail(RT_ECONFIG,
			       "hbm model 'shared': hbm.channels, hbm.interleave_bytes and hbm.bytes_per_cycle must be at least 1");
	st->channels = cfg->hbm_channels;
	st->interleave = cfg->hbm_interleave_bytes;
	st->bytes_per_cycle = cfg->hbm_bytes_per_cycle;
	st->cycle_ps = rt_config_cycle_ps(cfg);
	st->free_ps = calloc(st->channels, sizeof(*st->free_ps));
	st->share = calloc(st->channels, sizeof(*st->share));
	if (!st->free_ps || !st->share)
		return rt_fail(RT_ENOMEM, "hbm model 'shared': no memory for %llu channels",
			       (unsigned long long)st->channels);
	return RT_EOK;
}

/* Bytes of [addr, addr + bytes) on each channel, into st->share. Whole
 * rounds over all channels are counted at once, so a large transfer costs
 * O(channels), not O(blocks). */
static void split(struct shared_state *st, uint64_t addr, uint64_t bytes)
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

static enum rt_err shared_access(void *state, const struct eng_hbm_access *a,
				 uint64_t *data_end_ps)
{
	struct shared_state *st = state;
	uint64_t end = a->issue_ps;

	split(st, a->addr, a->bytes);
	for (uint64_t c = 0; c < st->channels; c++) {
		uint64_t start, ps;

		if (!st->share[c])
			continue;
		start = st->free_ps[c] > a->issue_ps ? st->free_ps[c] : a->issue_ps;
		/* channel rate = B / C bytes per cycle */
		ps = eng_ceil_div(eng_mul_sat(eng_mul_sat(st->share[c], st->channels), st->cycle_ps),
				  st->bytes_per_cycle);
		st->free_ps[c] = start + ps;
		if (st->free_ps[c] > end)
			end = st->free_ps[c];
	}
	*data_end_ps = end;
	return RT_EOK;
}

static void shared_fini(void *state)
{
	struct shared_state *st = state;

	free(st->free_ps);
	free(st->share);
}

const struct eng_hbm_ops eng_hbm_shared_model = {
	.abi = ENG_HBM_ABI,
	.name = "shared",
	.state_size = sizeof(struct shared_state),
	.init = shared_init,
	.access = shared_access,
	.fini = shared_fini,
};
