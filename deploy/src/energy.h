/* energy.h — a run's energy: its op counts priced by the energy.* config.
 *
 * Every PE engine counts what it did (engines/src/component.c: MACs by
 * dtype, MATH element ops, TCM and HBM bytes), the kernel host counts the
 * bytes it sent over the IPCQ ring, and each engine instance burns its
 * static power over the simulated time. The energy of a component is
 *
 *   sum over its counters c of count(c) x energy.<c>   (fJ, exact integers)
 *   + energy.<kind>_static_uw x sim_time_ps / 1000     (uW x ps = 1e-3 fJ)
 *
 * and the run's is the sum over components. Nothing here is floating
 * point except the per-token figure. */
#ifndef KB_ENERGY_H
#define KB_ENERGY_H

#include <stdint.h>

#include "run_facts.h"

/* What the energy goes into (summary.json energy.by_action). */
enum kb_energy_action {
	KB_EN_MAC, KB_EN_MATH, KB_EN_TCM_READ, KB_EN_TCM_WRITE, KB_EN_HBM, KB_EN_LINK,
	KB_EN_STATIC, KB_EN_COUNT
};
extern const char *const kb_energy_action_names[KB_EN_COUNT];

#define KB_ENERGY_MAX_KINDS 16

struct kb_energy {
	uint64_t total_fj;
	uint64_t by_action[KB_EN_COUNT];
	const char *kinds[KB_ENERGY_MAX_KINDS]; /* component kinds, first-seen order */
	uint64_t by_kind[KB_ENERGY_MAX_KINDS];
	unsigned n_kinds;
	uint64_t *per_component; /* fJ by component id (owned) */
	uint32_t n_components;
	uint64_t tokens;         /* the kernels' "tokens" statistic, summed */
	uint64_t sim_ps;         /* the time static power is charged over */
};

/* Prices every component's report (by_id[i] of `reports`) with `cfg`;
 * `sim_ps` is the run's simulated time. Release with kb_energy_release. */
enum rt_err kb_energy_compute(const struct rt_config *cfg, const struct rt_topology *topo,
			      const struct rt_end_reports *reports, uint64_t sim_ps,
			      struct kb_energy *out);
void kb_energy_release(struct kb_energy *e);

struct rt_json;
/* Writes summary.json's "energy" object. */
void kb_energy_json(struct rt_json *j, const struct kb_energy *e);

#endif
