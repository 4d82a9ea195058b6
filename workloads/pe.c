/* pe.c — the PE topology every kernel runs on.
 *
 * Per PE five components (npu/pe.h gives their ids): the kernel host
 * (PE_CPU), PE_SCHEDULER and the DMA, GEMM and MATH engines. Links carry the
 * configured doorbell latencies; hosts of the same PE index on other ranks
 * are joined through each rank's link component (a ring, or a switch port:
 * links.topology), and every PE of a rank to its PE 0 (barriers).
 * Rank-level components (links, memory) come after every PE (npu/pe.h). */
#include <stdio.h>

#include "eng.h"
#include "npu/pe.h"
#include "sched.h"
#include "tl_host.h"
#include "workloads.h"

static const struct rt_component_ops *unit_ops(enum pe_unit u)
{
	switch (u) {
	case PE_HOST: return &tl_host_ops;
	case PE_SCHED: return &sched_ops;
	case PE_DMA: return &eng_dma_ops;
	case PE_GEMM: return &eng_gemm_ops;
	default: return &eng_math_ops;
	}
}

static const char *const unit_names[PE_UNITS] = { "host", "sched", "dma", "gemm", "math" };

static enum rt_err add_components(const struct rt_config *cfg, struct rt_topology *topo)
{
	for (uint32_t r = 0; r < cfg->ranks; r++)
		for (uint32_t p = 0; p < cfg->pes; p++)
			for (int u = 0; u < PE_UNITS; u++) {
				char name[RT_NAME_MAX];
				uint32_t id;
				enum rt_err err;

				snprintf(name, sizeof(name), "r%u.pe%u.%s", r, p, unit_names[u]);
				err = rt_topology_add(topo, name, unit_ops((enum pe_unit)u), r, p, &id);
				if (err)
					return err;
			}
	return RT_EOK;
}

static enum rt_err link_both(struct rt_topology *topo, uint32_t a, uint32_t b, uint64_t ps)
{
	enum rt_err err = rt_topology_link(topo, a, b, ps);

	return err ? err : rt_topology_link(topo, b, a, ps);
}

static enum rt_err link_pe(const struct rt_config *cfg, struct rt_topology *topo, uint32_t r,
			   uint32_t p)
{
	uint64_t cycle = rt_config_cycle_ps(cfg);
	uint32_t host = pe_component_id(cfg->pes, r, p, PE_HOST);
	uint32_t sched = pe_component_id(cfg->pes, r, p, PE_SCHED);
	enum rt_err err = link_both(topo, host, sched, cfg->link_host_sched_cycles * cycle);

	for (int u = PE_DMA; !err && u < PE_UNITS; u++)
		err = link_both(topo, sched, pe_component_id(cfg->pes, r, p, (enum pe_unit)u),
				cfg->link_sched_engine_cycles * cycle);
	/* barriers among the PEs of a rank go through PE 0 (tl_barrier) */
	if (!err && p > 0)
		err = link_both(topo, host, pe_component_id(cfg->pes, r, 0, PE_HOST),
				cfg->link_pe_sync_cycles * cycle);
	return err;
}

/* One memory component per rank (unless the DMA channels can time HBM
 * themselves: eng_hbm_local), after every
 * PE so PE ids keep their formula. The request travels during the DMA
 * channel's setup (DMA -> hbm latency = dma.setup_cycles) and the answer
 * during the HBM access latency (hbm -> DMA = hbm.latency_cycles), at least
 * one cycle each: the links carry exactly the time the hardware spends, and
 * their length is the lookahead when the memory runs in its own daemon. */
static enum rt_err link_rank_memory(const struct rt_config *cfg, struct rt_topology *topo)
{
	uint64_t cycle = rt_config_cycle_ps(cfg);
	uint64_t req = (cfg->dma_setup_cycles ? cfg->dma_setup_cycles : 1) * cycle;
	uint64_t ans = (cfg->hbm_latency_cycles ? cfg->hbm_latency_cycles : 1) * cycle;
	enum rt_err err = RT_EOK;

	if (eng_hbm_local(cfg))
		return RT_EOK; /* the DMA channels time their transfers themselves */
	for (uint32_t r = 0; !err && r < cfg->ranks; r++)
		for (uint32_t p = 0; !err && p < cfg->pes; p++) {
			uint32_t dma = pe_component_id(cfg->pes, r, p, PE_DMA);
			uint32_t hbm = pe_hbm_component_id(cfg->ranks, cfg->pes, r);

			err = rt_topology_link(topo, dma, hbm, req);
			if (!err)
				err = rt_topology_link(topo, hbm, dma, ans);
		}
	return err;
}

/* A ring: each rank's link component reaches the hosts of its two
 * neighbours (the last hop, links.ipcq_cycles) and, when some rank is two
 * hops away or more, the neighbours' link components (a hop forwarded). */
static enum rt_err link_ring(const struct rt_config *cfg, struct rt_topology *topo, uint32_t r)
{
	uint64_t alpha = cfg->link_ipcq_cycles * rt_config_cycle_ps(cfg);
	uint32_t link = pe_link_component_id(cfg->ranks, cfg->pes, r);
	enum rt_err err = RT_EOK;

	/* two ranks: both directions reach the same peer, one link each */
	for (int dir = 0; !err && dir < (cfg->ranks == 2 ? 1 : 2); dir++) {
		uint32_t peer = pe_ring_neighbour(cfg->ranks, r, (enum pe_dir)dir);

		for (uint32_t p = 0; !err && p < cfg->pes; p++)
			err = rt_topology_link(topo, link, pe_component_id(cfg->pes, peer, p, PE_HOST),
					       alpha);
		if (!err && cfg->ranks >= 4)
			err = rt_topology_link(topo, link,
					       pe_link_component_id(cfg->ranks, cfg->pes, peer), alpha);
	}
	return err;
}

/* A switch: each rank's port reaches every other rank's port
 * (links.ipcq_cycles through the switch), and its own hosts (the doorbell). */
static enum rt_err link_switch(const struct rt_config *cfg, struct rt_topology *topo, uint32_t r)
{
	uint64_t cycle = rt_config_cycle_ps(cfg);
	uint32_t link = pe_link_component_id(cfg->ranks, cfg->pes, r);
	enum rt_err err = RT_EOK;

	for (uint32_t s = 0; !err && s < cfg->ranks; s++)
		if (s != r)
			err = rt_topology_link(topo, link,
					       pe_link_component_id(cfg->ranks, cfg->pes, s),
					       cfg->link_ipcq_cycles * cycle);
	for (uint32_t p = 0; !err && p < cfg->pes; p++)
		err = rt_topology_link(topo, link, pe_component_id(cfg->pes, r, p, PE_HOST),
				       cfg->link_host_sched_cycles * cycle);
	return err;
}

/* Links of each rank's link component (present with several ranks), which
 * carries its PEs' IPCQ messages (kernel_host/src/link.c): host -> own
 * rank's link with the host doorbell latency, then the topology's. */
static enum rt_err link_rank_links(const struct rt_config *cfg, struct rt_topology *topo)
{
	uint64_t cycle = rt_config_cycle_ps(cfg);
	bool ring = rt_config_topology(cfg) == RT_TOPOLOGY_RING;
	enum rt_err err = RT_EOK;

	if (!pe_rank_links(cfg->ranks))
		return RT_EOK;
	for (uint32_t r = 0; !err && r < cfg->ranks; r++) {
		uint32_t link = pe_link_component_id(cfg->ranks, cfg->pes, r);

		for (uint32_t p = 0; !err && p < cfg->pes; p++)
			err = rt_topology_link(topo, pe_component_id(cfg->pes, r, p, PE_HOST), link,
					       cfg->link_host_sched_cycles * cycle);
		if (!err)
			err = ring ? link_ring(cfg, topo, r) : link_switch(cfg, topo, r);
	}
	return err;
}

/* The rank-level components, in the order npu/pe.h numbers them: every
 * rank's link (several ranks), then every rank's memory (when arbitrated). */
static enum rt_err add_rank_components(const struct rt_config *cfg, struct rt_topology *topo)
{
	static const char *const kinds[2] = { "link", "hbm" };
	const struct rt_component_ops *ops[2] = { &tl_link_ops, &eng_hbm_ops };
	bool present[2] = { pe_rank_links(cfg->ranks), !eng_hbm_local(cfg) };
	enum rt_err err = RT_EOK;

	for (int k = 0; k < 2; k++)
		for (uint32_t r = 0; !err && present[k] && r < cfg->ranks; r++) {
			char name[RT_NAME_MAX];
			uint32_t id;

			snprintf(name, sizeof(name), "r%u.%s", r, kinds[k]);
			err = rt_topology_add(topo, name, ops[k], r, PE_RANK_LEVEL, &id);
		}
	return err;
}

enum rt_err kb_pe_build(const struct rt_job *job, struct rt_topology *topo)
{
	const struct rt_config *cfg = &job->config;
	enum rt_err err = add_components(cfg, topo);

	/* every component before the first link (rt_topology_link) */
	if (!err)
		err = add_rank_components(cfg, topo);
	if (!err)
		err = link_rank_links(cfg, topo);
	if (!err)
		err = link_rank_memory(cfg, topo);
	for (uint32_t r = 0; !err && r < cfg->ranks; r++)
		for (uint32_t p = 0; !err && p < cfg->pes; p++)
			err = link_pe(cfg, topo, r, p);
	return err;
}
