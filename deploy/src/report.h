/* report.h — aggregated statistics, summary.json and the stdout report. */
#ifndef KB_REPORT_H
#define KB_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "run_facts.h"
#include "rt/path.h"

struct kb_stat {
	const char *name; /* borrowed from the end-of-run reports */
	uint64_t value;
	bool is_max;
};

/* A growable set of statistics (no limit on how many). */
struct kb_stat_set {
	const char *kind; /* component kind ("dma", "host", ...); NULL for totals */
	struct kb_stat *items;
	size_t n, cap;
};

struct kb_agg {
	struct kb_stat_set totals;     /* over every component */
	struct kb_stat_set *kinds;     /* summed per kind */
	struct kb_stat_set *kinds_max; /* busiest component per kind */
	size_t n_kinds, cap_kinds;
	uint64_t digest;               /* delivery digest */
	/* The critical path (rt/path.h) of the kernel host that ended last
	 * (lowest id on a tie), and its length; none when no host sent one. */
	bool has_path;
	struct rt_path path;
	uint64_t path_ps;
	uint32_t path_host;            /* its component id */
	uint64_t path_segment;         /* 1 + its last segment record (0: none) */
	/* From the op log: the busiest rank's time with at least one DMA
	 * transfer moving bytes through its HBM (union of the records). */
	uint64_t hbm_busy_ps;
};

/* Folds the end-of-run reports into `agg` (which borrows their names). */
enum rt_err kb_agg_build(struct kb_agg *agg, const struct rt_topology *topo,
			 const struct rt_end_reports *reports);
void kb_agg_release(struct kb_agg *agg);
uint64_t kb_stat_get(const struct kb_stat_set *set, const char *name);
const struct kb_stat_set *kb_agg_kind(const struct kb_agg *agg, const char *kind);
/* Per kind, each statistic's largest value over single components. */
const struct kb_stat_set *kb_agg_kind_max(const struct kb_agg *agg, const char *kind);

/* With the trace on, critical_path.jsonl: the critical path's segments in
 * time order, walked back from the last kernel's end through the
 * components' segment records (deploy/src/cpath.c). */
enum rt_err kb_cpath_write(const struct rt_job *job, const struct rt_topology *topo,
			   const struct kb_agg *agg);

struct kb_energy;
/* Writes summary.json and prints the report (unless --quiet). */
enum rt_err kb_report_write(const struct rt_job *job, const struct rt_topology *topo,
			    const struct kb_run_facts *facts, const struct kb_agg *agg,
			    const struct kb_energy *energy);

#endif
