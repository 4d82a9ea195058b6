/* run_facts.h — what a run produced, handed from the host module or the
 * coordinator's deployment side (launch.h) to the outputs (outputs.h,
 * report.h, stats_out.h, energy.h). A type only: no functions, so both
 * sides can name it without seeing each other. */
#ifndef KB_RUN_FACTS_H
#define KB_RUN_FACTS_H

#include <stdint.h>

#include "rt/coord.h"

struct kb_steps;

/* What the run produced, for summary.json and the report. */
struct kb_run_facts {
	struct rt_coord_stats coord;
	struct rt_end_reports reports; /* what every component reported in BYE */
	double started_s; /* CLOCK_MONOTONIC when the launcher began the run */
	double wall_s;    /* the whole run, output merge included (set by the merge) */
	double merge_s;   /* of which merging the parts into the outputs */
	uint32_t daemons;
	uint64_t global_windows; /* windows across hosts (0: a one-host run) */
	uint64_t lookahead_ps;
	int argc;            /* the command line after `kernbench` */
	char **argv;
	const char *args;    /* kernel arguments asked for, one
			      * "name\tgiven|default\tvalue" line each, sorted */
	const struct kb_steps *steps; /* a program's steps (steps.h), or NULL */
};

#endif
