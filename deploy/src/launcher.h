/* launcher.h — the `kernbench` command: parse, launch, gather, report.
 *
 * One binary plays every role: `kernbench run ...` is the launcher and the
 * coordinator; it re-executes itself as `kb-<kind> __daemon ...` for each
 * daemon (or starts them as threads for the inproc transport). */
#ifndef KB_LAUNCHER_H
#define KB_LAUNCHER_H

#include <stdint.h>
#include <stdio.h>

#include "rt/coord.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

/* Parses `run` options (argv[0] is the workload) into `job`. */
enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job);
void kb_cli_usage(FILE *out);
void kb_cli_run_usage(FILE *out);

/* Builds and places the job's topology (workload + colocation). */
enum rt_err kb_job_topology(const struct rt_job *job, struct rt_topology *topo);

/* Runs a job end to end; returns the process exit code. */
int kb_launch(struct rt_job *job, int argc, char **argv);

/* Entry of a re-executed daemon process. */
int kb_daemon_main(int argc, char **argv);

/* What the run produced, for summary.json and the report. */
struct kb_run_facts {
	struct rt_coord_stats coord;
	struct rt_end_reports reports; /* what every component reported in BYE */
	double wall_s;
	uint32_t daemons;
	uint64_t lookahead_ps;
};

/* Merges the daemons' output parts into op_log.jsonl, trace.json and
 * summary.json, prints the report, and removes the parts. */
enum rt_err kb_outputs_merge(const struct rt_job *job, const struct rt_topology *topo,
			     const struct kb_run_facts *facts);
/* Removes the parts directory (after a failure). */
void kb_outputs_discard(const struct rt_job *job);

#endif
