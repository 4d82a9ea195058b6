/* report.h — aggregated statistics, summary.json and the stdout report. */
#ifndef KB_REPORT_H
#define KB_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "launcher.h"

#define KB_MAX_STATS 64
#define KB_MAX_KINDS 16

struct kb_stat {
	char name[64];
	uint64_t value;
	bool is_max;
};

struct kb_stat_set {
	char kind[32]; /* component kind ("dma", "host", ...); "" for totals */
	struct kb_stat items[KB_MAX_STATS];
	size_t n;
};

struct kb_agg {
	struct kb_stat_set totals;            /* over every component */
	struct kb_stat_set kinds[KB_MAX_KINDS];     /* summed per kind */
	struct kb_stat_set kinds_max[KB_MAX_KINDS]; /* busiest component per kind */
	size_t n_kinds;
	uint64_t digest;                      /* delivery digest */
};

uint64_t kb_stat_get(const struct kb_stat_set *set, const char *name);
const struct kb_stat_set *kb_agg_kind(const struct kb_agg *agg, const char *kind);
/* Per kind, each statistic's largest value over single components. */
const struct kb_stat_set *kb_agg_kind_max(const struct kb_agg *agg, const char *kind);

/* Writes summary.json and prints the report (unless --quiet). */
enum rt_err kb_report_write(const struct rt_job *job, const struct rt_topology *topo,
			    const struct kb_run_facts *facts, const struct kb_agg *agg);

#endif
