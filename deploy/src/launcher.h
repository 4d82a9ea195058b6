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

/* Parses `run` options into `job` (argv[0] is "run"; options and the
 * workload in any order). RT_EINTERRUPTED: --help was asked for. */
enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job);
/* Parses `config` options into the effective configuration; *format gets
 * 0 (yaml), 1 (json) or 2 (markdown reference). */
enum rt_err kb_cli_parse_config(int argc, char **argv, struct rt_config *cfg, int *format);
/* "kernbench RELEASE (COMMIT)". */
const char *kb_version(void);
void kb_cli_usage(FILE *out);
void kb_cli_run_usage(FILE *out);

/* Builds and places the job's topology (workload + colocation). */
enum rt_err kb_job_topology(const struct rt_job *job, struct rt_topology *topo);

/* Runs a job end to end; returns the process exit code. */
int kb_launch(struct rt_job *job, int argc, char **argv);

/* Makes sure the stack limit is workable before anything runs: raises a
 * small soft limit (and restarts, as thread stacks follow the limit at
 * start-up) or exits with one line saying how much is needed. */
void kb_check_stack(char **argv);

/* Entry of a re-executed daemon process. */
int kb_daemon_main(int argc, char **argv);

/* What the run produced, for summary.json and the report. */
struct kb_run_facts {
	struct rt_coord_stats coord;
	struct rt_end_reports reports; /* what every component reported in BYE */
	double wall_s;
	uint32_t daemons;
	uint64_t lookahead_ps;
	int argc;            /* the command line after `kernbench` */
	char **argv;
	const char *args;    /* kernel arguments asked for, one
			      * "name\tgiven|default\tvalue" line each, sorted */
};

/* Merges the daemons' output parts into op_log.jsonl, trace.json and
 * summary.json, prints the report, and removes the parts. */
enum rt_err kb_outputs_merge(const struct rt_job *job, const struct rt_topology *topo,
			     const struct kb_run_facts *facts);
/* Removes the parts folder of job->out_dir (never following a link). */
void kb_outputs_discard(const struct rt_job *job);

/* The output folder (job->result_dir): creates it, locks it against a
 * second run (*lock_fd holds the lock until the process exits), removes
 * the previous run's results (the files its manifest lists, if they are
 * still regular files of ours) and makes a fresh staging folder inside,
 * which job->out_dir then names: everything the run writes goes there. */
enum rt_err kb_outputs_prepare(struct rt_job *job, int *lock_fd);
/* Success: moves the staged results into job->result_dir, records them in
 * its manifest and removes the staging folder. */
enum rt_err kb_outputs_commit(struct rt_job *job);
/* Failure: removes the staging folder and everything in it. */
void kb_outputs_abandon(struct rt_job *job);

#endif
