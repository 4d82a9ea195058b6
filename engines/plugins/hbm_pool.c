/* hbm_pool.c — example HBM model plug-in: the rank's HBM is one pool that
 * serves whole transfers first come first served at hbm.bytes_per_cycle:
 *
 *   start = max(arrival, pool free); pool free = start + ceil(bytes * cycle / B)
 *   end   = max(pool free, the DMA channel's wire end)
 *
 * Use: `kernbench run ... --set hbm.model=BUILD/plugins/hbm_pool.so`. The
 * memory component dlopen()s the file and reads `kb_hbm_model`
 * (ENG_HBM_PLUGIN_SYMBOL, a const struct eng_hbm_ops). */
#include "eng.h"

#include <stdlib.h>

/* Transfers whose end is known, in arrival order (ends rise with it). */
struct pool {
	uint64_t B, cycle_ps, free_ps;
	uint64_t *token, *end;
	size_t head, len, cap;
};

static enum rt_err pool_init(void *state, const struct rt_config *cfg)
{
	struct pool *p = state;

	p->B = cfg->hbm_bytes_per_cycle ? cfg->hbm_bytes_per_cycle : 1;
	p->cycle_ps = rt_config_cycle_ps(cfg);
	return RT_EOK;
}

static enum rt_err pool_retire(void *state, uint64_t now_ps, eng_hbm_done_fn done, void *arg)
{
	struct pool *p = state;

	while (p->head < p->len && p->end[p->head] <= now_ps) {
		done(arg, p->token[p->head], p->end[p->head]);
		p->head++;
	}
	if (p->head == p->len)
		p->head = p->len = 0;
	return RT_EOK;
}

static enum rt_err pool_submit(void *state, uint64_t now_ps, const struct eng_hbm_access *a)
{
	struct pool *p = state;
	uint64_t start = p->free_ps > now_ps ? p->free_ps : now_ps;

	if (p->len == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		uint64_t *t = realloc(p->token, cap * sizeof(*t));

		if (t)
			p->token = t;
		uint64_t *e = t ? realloc(p->end, cap * sizeof(*e)) : NULL;

		if (!t || !e)
			return rt_fail(RT_ENOMEM, "hbm model 'pool': out of memory");
		p->end = e;
		p->cap = cap;
	}
	p->free_ps = start + eng_ceil_div(eng_mul_sat(a->bytes, p->cycle_ps), p->B);
	p->token[p->len] = a->token;
	/* ends must rise in arrival order for the FIFO above */
	p->end[p->len] = p->free_ps > a->wire_end_ps ? p->free_ps : a->wire_end_ps;
	if (p->len && p->end[p->len] < p->end[p->len - 1])
		p->end[p->len] = p->end[p->len - 1];
	p->len++;
	return RT_EOK;
}

static uint64_t pool_next_done(const void *state)
{
	const struct pool *p = state;

	return p->head < p->len ? p->end[p->head] : UINT64_MAX;
}

static void pool_fini(void *state)
{
	struct pool *p = state;

	free(p->token);
	free(p->end);
}

const struct eng_hbm_ops kb_hbm_model = {
	.abi = ENG_HBM_ABI,
	.name = "pool",
	.state_size = sizeof(struct pool),
	.init = pool_init,
	.retire = pool_retire,
	.submit = pool_submit,
	.next_done = pool_next_done,
	.fini = pool_fini,
};
