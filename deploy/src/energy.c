/* energy.c — op counts priced by the energy.* configuration (energy.h). */
#include "energy.h"

#include <stdlib.h>
#include <string.h>

#include "rt/component.h"
#include "rt/json.h"

const char *const kb_energy_action_names[KB_EN_COUNT] = {
	[KB_EN_MAC] = "mac",
	[KB_EN_MATH] = "math",
	[KB_EN_TCM_READ] = "tcm_read",
	[KB_EN_TCM_WRITE] = "tcm_write",
	[KB_EN_HBM] = "hbm",
	[KB_EN_LINK] = "link",
	[KB_EN_STATIC] = "static",
};

/* A counter a component reports and what one of it costs. */
struct priced {
	const char *kind;  /* the component kind that reports it */
	const char *stat;
	size_t cost;       /* offset of its fJ figure in struct rt_config */
	enum kb_energy_action action;
};

#define COST(m) offsetof(struct rt_config, m)
static const struct priced priced[] = {
	{ "gemm", "macs_f16", COST(energy_mac_f16_fj), KB_EN_MAC },
	{ "gemm", "macs_bf16", COST(energy_mac_bf16_fj), KB_EN_MAC },
	{ "gemm", "macs_f32", COST(energy_mac_f32_fj), KB_EN_MAC },
	{ "math", "simple_ops", COST(energy_math_op_fj), KB_EN_MATH },
	{ "math", "exp_ops", COST(energy_math_exp_fj), KB_EN_MATH },
	{ NULL, "tcm_read_bytes", COST(energy_tcm_read_fj), KB_EN_TCM_READ },
	{ NULL, "tcm_write_bytes", COST(energy_tcm_write_fj), KB_EN_TCM_WRITE },
	{ "dma", "hbm_read_bytes", COST(energy_hbm_fj), KB_EN_HBM },
	{ "dma", "hbm_write_bytes", COST(energy_hbm_fj), KB_EN_HBM },
	{ "host", "ipcq_bytes", COST(energy_link_fj), KB_EN_LINK },
};

/* Static power by component kind (kinds not listed burn none). */
static const struct {
	const char *kind;
	size_t uw;
} statics[] = {
	{ "gemm", COST(energy_gemm_static_uw) },
	{ "math", COST(energy_math_static_uw) },
	{ "dma", COST(energy_dma_static_uw) },
	{ "host", COST(energy_cpu_static_uw) },
};

static uint64_t cfg_u64(const struct rt_config *cfg, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)cfg + off, sizeof(v));
	return v;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Static energy in fJ: uW x ps / 1000, rounded down, saturating. */
static uint64_t static_fj(uint64_t uw, uint64_t ps)
{
	unsigned __int128 fj = (unsigned __int128)uw * ps / 1000;

	return fj > UINT64_MAX ? UINT64_MAX : (uint64_t)fj;
}

static unsigned kind_slot(struct kb_energy *e, const char *kind)
{
	unsigned i = 0;

	while (i < e->n_kinds && strcmp(e->kinds[i], kind))
		i++;
	if (i == e->n_kinds && e->n_kinds < KB_ENERGY_MAX_KINDS)
		e->kinds[e->n_kinds++] = kind;
	return i < KB_ENERGY_MAX_KINDS ? i : KB_ENERGY_MAX_KINDS - 1;
}

/* One component: its priced counters plus its static power. */
static uint64_t component_fj(const struct rt_config *cfg, const char *kind,
			     const Kb__ComponentReport *r, uint64_t sim_ps, struct kb_energy *e)
{
	uint64_t fj = 0, part;

	for (size_t s = 0; s < r->n_stats; s++) {
		const Kb__Stat *st = r->stats[s];

		if (!strcmp(st->name, "tokens") && !strcmp(kind, "host"))
			e->tokens = add_sat(e->tokens, st->value);
		for (size_t p = 0; p < sizeof(priced) / sizeof(priced[0]); p++) {
			if (strcmp(priced[p].stat, st->name) ||
			    (priced[p].kind && strcmp(priced[p].kind, kind)))
				continue;
			part = mul_sat(st->value, cfg_u64(cfg, priced[p].cost));
			e->by_action[priced[p].action] = add_sat(e->by_action[priced[p].action], part);
			fj = add_sat(fj, part);
		}
	}
	for (size_t k = 0; k < sizeof(statics) / sizeof(statics[0]); k++) {
		if (strcmp(statics[k].kind, kind))
			continue;
		part = static_fj(cfg_u64(cfg, statics[k].uw), sim_ps);
		e->by_action[KB_EN_STATIC] = add_sat(e->by_action[KB_EN_STATIC], part);
		fj = add_sat(fj, part);
	}
	return fj;
}

enum rt_err kb_energy_compute(const struct rt_config *cfg, const struct rt_topology *topo,
			      const struct rt_end_reports *reports, uint64_t sim_ps,
			      struct kb_energy *e)
{
	memset(e, 0, sizeof(*e));
	e->sim_ps = sim_ps;
	e->n_components = topo->n_components;
	e->per_component = calloc(topo->n_components ? topo->n_components : 1,
				  sizeof(*e->per_component));
	if (!e->per_component)
		return rt_fail(RT_ENOMEM, "energy: out of memory");
	for (uint32_t id = 0; id < topo->n_components; id++) {
		const char *kind = topo->components[id].ops->name;
		const Kb__ComponentReport *r = id < reports->n_components ? reports->by_id[id] : NULL;
		unsigned k = kind_slot(e, kind);

		if (!r)
			continue;
		e->per_component[id] = component_fj(cfg, kind, r, sim_ps, e);
		e->by_kind[k] = add_sat(e->by_kind[k], e->per_component[id]);
		e->total_fj = add_sat(e->total_fj, e->per_component[id]);
	}
	return RT_EOK;
}

void kb_energy_release(struct kb_energy *e)
{
	free(e->per_component);
	memset(e, 0, sizeof(*e));
}

void kb_energy_json(struct rt_json *j, const struct kb_energy *e)
{
	rt_json_object(j, "energy", RT_JSON_LINES);
	rt_json_u64(j, "total_fj", e->total_fj);
	rt_json_object(j, "by_action", RT_JSON_INLINE);
	for (unsigned i = 0; i < KB_EN_COUNT; i++)
		rt_json_u64(j, kb_energy_action_names[i], e->by_action[i]);
	rt_json_close(j);
	rt_json_object(j, "by_kind", RT_JSON_INLINE);
	for (unsigned i = 0; i < e->n_kinds; i++)
		rt_json_u64(j, e->kinds[i], e->by_kind[i]);
	rt_json_close(j);
	rt_json_u64(j, "tokens", e->tokens);
	/* a workload without tokens has no per-token figure */
	if (e->tokens)
		rt_json_fixed(j, "per_token_fj", (double)e->total_fj / (double)e->tokens, 1);
	else
		rt_json_null(j, "per_token_fj");
	rt_json_close(j);
}
