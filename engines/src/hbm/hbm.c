/* hbm/hbm.c — the rank's memory component ("hbm", one per rank) and the
 * lookup of its model (built-in name or plug-in .so).
 *
 * A DMA channel sends HbmRequest when it starts a transfer; it arrives after
 * the channel's setup (the link's latency, workloads/pe.c), when the first
 * byte may move. The component runs the model in delivery order — the total
 * event key, the same in every process grouping — and answers at once with
 * HbmDone, sent when the last byte is through and delivered after the link's
 * latency, which is the HBM access latency (pipelined: it holds no channel):
 *   done = max(model data end, the DMA channel's own wire end)
 *          + max(1, hbm.latency_cycles) cycles. */
#include "eng.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

struct hbm {
	const struct eng_hbm_ops *ops;
	void *state;         /* ops->state_size bytes (owned) */
	void *dl;            /* plug-in handle or NULL (owned) */
};

bool eng_hbm_ideal(const struct rt_config *cfg)
{
	return strcmp(cfg->hbm_model, "ideal") == 0;
}

static enum rt_err hbm_load_plugin(const char *path, struct hbm *h)
{
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	const struct eng_hbm_ops *ops;

	if (!dl)
		return rt_fail(RT_ENOTFOUND, "hbm model plug-in: %s", dlerror());
	ops = dlsym(dl, ENG_HBM_PLUGIN_SYMBOL);
	if (!ops || ops->abi != ENG_HBM_ABI || !ops->name || !ops->access) {
		dlclose(dl);
		return rt_fail(RT_ECONFIG,
			       "hbm model plug-in %s: needs '%s' (const struct eng_hbm_ops, ABI %u, with name and access)",
			       path, ENG_HBM_PLUGIN_SYMBOL, ENG_HBM_ABI);
	}
	h->ops = ops;
	h->dl = dl;
	return RT_EOK;
}

static enum rt_err hbm_find(const char *name, struct hbm *h)
{
	size_t n = strlen(name);

	if (strchr(name, '/') || (n >= 3 && strcmp(name + n - 3, ".so") == 0))
		return hbm_load_plugin(name, h);
	if (strcmp(name, eng_hbm_shared_model.name) == 0) {
		h->ops = &eng_hbm_shared_model;
		return RT_EOK;
	}
	return rt_fail(RT_ENOTFOUND,
		       "hbm.model '%s' is not built in (shared, ideal) and is not a plug-in path (needs a '/' or a .so suffix)",
		       name);
}

static enum rt_err hbm_init(struct rt_ctx *ctx, void *state)
{
	const struct rt_config *cfg = rt_cfg(ctx);
	struct hbm *h = state;
	enum rt_err err = hbm_find(cfg->hbm_model, h);

	if (err)
		return err; /* the daemon names this component */
	h->state = calloc(1, h->ops->state_size ? h->ops->state_size : 1);
	if (!h->state)
		return rt_fail(RT_ENOMEM, "hbm model '%s': no memory for state", h->ops->name);
	return h->ops->init ? h->ops->init(h->state, cfg) : RT_EOK;
}

/* Answers when the last byte is through (>= now); the link adds the HBM
 * latency. */
static enum rt_err hbm_answer(struct rt_ctx *ctx, uint32_t dst, const Kb__HbmRequest *r,
			      uint64_t through_ps)
{
	Kb__HbmDone done = KB__HBM_DONE__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;

	done.id = r->id;
	done.channel = r->channel;
	done.done_ps = through_ps + rt_topology_latency(rt_topo(ctx), rt_self(ctx), dst);
	msg.body_case = KB__PAYLOAD__BODY_HBM_DONE;
	msg.hbm_done = &done;
	rt_stat_max(ctx, "hbm_last_ps", done.done_ps);
	return rt_send(ctx, dst, through_ps, 0, &msg);
}

static enum rt_err hbm_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	struct hbm *h = state;
	const Kb__HbmRequest *r;
	struct eng_hbm_access a;
	uint64_t data_end;
	enum rt_err err;

	if (d->is_timer || !d->msg || d->msg->body_case != KB__PAYLOAD__BODY_HBM_REQUEST)
		return rt_fail(RT_EPROTOCOL,
			       "expected an HbmRequest from component %u, got payload body %d",
			       d->src, d->msg ? (int)d->msg->body_case : -1);
	r = d->msg->hbm_request;
	a.addr = r->addr;
	a.bytes = r->bytes;
	a.issue_ps = r->issue_ps > d->time_ps ? r->issue_ps : d->time_ps;
	err = h->ops->access(h->state, &a, &data_end);
	if (err)
		return err;
	rt_stat_add(ctx, "hbm_bytes", r->bytes);
	rt_stat_add(ctx, "hbm_transfers", 1);
	return hbm_answer(ctx, d->src, r,
			  data_end > r->wire_end_ps ? data_end : r->wire_end_ps);
}

static void hbm_fini(struct rt_ctx *ctx, void *state)
{
	struct hbm *h = state;

	(void)ctx;
	if (h->ops && h->ops->fini && h->state)
		h->ops->fini(h->state);
	free(h->state);
	if (h->dl)
		dlclose(h->dl);
	memset(h, 0, sizeof(*h));
}

const struct rt_component_ops eng_hbm_ops = {
	.name = "hbm",
	.state_size = sizeof(struct hbm),
	.init = hbm_init,
	.handle = hbm_handle,
	.fini = hbm_fini,
};
