/* stats_out.h — per-instance statistics: stats.csv and summary.json's
 * "instances" and "stat_info".
 *
 * One row per (component, statistic), components in id order (the same in
 * every process grouping), each component's runtime counts first
 * (delivered, last_ps), then its statistics in the order it declared
 * them, then its energy. The values come from the end-of-run reports
 * (ComponentReport); units and descriptions from the declarations that
 * travelled with them. */
#ifndef KB_STATS_OUT_H
#define KB_STATS_OUT_H

#include "energy.h"
#include "run_facts.h"

struct rt_json;

/* Writes OUT/stats.csv: rank,pe,component,kind,statistic,value,unit,
 * description (pe empty for a rank-level component). */
enum rt_err kb_stats_csv_write(const struct rt_job *job, const struct rt_topology *topo,
			       const struct rt_end_reports *reports,
			       const struct kb_energy *energy);
/* Writes "stat_info" (per kind: each statistic's unit, description and
 * merge) and "instances" (per component: rank, pe, kind and its values). */
void kb_stats_json(struct rt_json *j, const struct rt_topology *topo,
		   const struct rt_end_reports *reports, const struct kb_energy *energy);

#endif
