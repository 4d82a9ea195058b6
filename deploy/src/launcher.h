/* launcher.h — the `kernbench` command: parse, launch, gather, report.
 *
 * One binary plays every role: `kernbench run ...` is the launcher and the
 * coordinator; it re-executes itself as `kb-<kind> __daemon ...` for each
 * daemon (or starts them as threads for the inproc transport). */
#ifndef KB_LAUNCHER_H
#define KB_LAUNCHER_H

struct kb_steps;

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rt/coord.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

/* Parses `run` options into `job` (argv[0] is "run"; options and the
 * workload in any order). RT_EINTERRUPTED: --help was asked for. */
struct kb_hosts;
/* ... and --hosts FILE into *hosts (*have_hosts says whether it was given;
 * the file is read and checked against the run). */
enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job, struct kb_hosts *hosts,
			     bool *have_hosts);
/* Parses `config` options into the effective configuration; *format gets
 * 0 (yaml), 1 (json) or 2 (markdown reference). */
/* `kernbench config`'s options into *cfg; *preset_path receives the file
 * of the preset it starts from ("" when none was read). */
enum rt_err kb_cli_parse_config(int argc, char **argv, struct rt_config *cfg, int *format,
				char *preset_path, size_t cap);
/* The `run` options (getopt_long's table, NULL-terminated): the sweep and
 * --from read it rather than keep a copy. */
struct option;
const struct option *kb_cli_run_option_table(void);
/* Finds the installed or source-tree copy of script `name` (plot
 * scripts) beside this binary; false if there is none. */
bool kb_find_script(const char *name, char *path, size_t cap);
/* "kernbench RELEASE (COMMIT)". */
const char *kb_version(void);
void kb_cli_usage(FILE *out);
void kb_cli_run_usage(FILE *out);

/* Builds and places the job's topology (workload + colocation). */
enum rt_err kb_job_topology(const struct rt_job *job, struct rt_topology *topo);

/* Runs a job end to end; returns the process exit code. With `hosts` this
 * process is only the coordinator: one agent per host runs the daemons. */
int kb_launch(struct rt_job *job, const struct kb_hosts *hosts, int argc, char **argv);

/* The daemons of one host, spawned and supervised as a one-host run's are
 * (an agent's ranks; rank_here has one flag per rank), run one global
 * window at a time: by a local coordinator with only them present
 * (rt_coord_step), or, for one daemon run as a thread, by direct calls
 * (rt_daemon_window). Caller closes it. */
struct kb_local;
enum rt_err kb_local_open(struct rt_job *job, const uint8_t *rank_here, char **argv,
			  struct kb_local **out);
const struct rt_topology *kb_local_topology(struct kb_local *local);
/* Starts the host's windows; `tick` runs now and then during each one,
 * beside the host's own watch of its children and signals. */
enum rt_err kb_local_start(struct kb_local *local, enum rt_err (*tick)(void *arg), void *arg);
/* Earliest pending time on this host (RT_TIME_NEVER: none). */
uint64_t kb_local_next_ps(const struct kb_local *local);
/* A host of one daemon run by direct calls: its events so far (any thread
 * may ask); false for a host with a local coordinator (its own watchdog). */
bool kb_local_direct_events(const struct kb_local *local, uint64_t *events);
/* Runs one GRANT (taken: *grant_p is NULL after) as rt_coord_step does. */
enum rt_err kb_local_step(struct kb_local *local, Kb__Sync **grant_p, struct rt_coord_away *out);
/* The end of the run: outputs written, `bye` filled with the reports and
 * window count (valid until the close). */
enum rt_err kb_local_finish(struct kb_local *local, Kb__Bye *bye);
/* Handles this host's pending signals and ended children (never blocks). */
enum rt_err kb_local_watch(struct kb_local *local);
/* Tells the daemons to stop (failed: at once), reaps them, frees memory. */
void kb_local_close(struct kb_local **local_p, bool failed);
/* Kills and reaps every child of this process's main thread (what kernels
 * forked and left), at once. */
void kb_kill_strays(void);
/* `kernbench agent ...` */
int kb_agent_main(int argc, char **argv);

/* Makes sure the stack limit is workable before anything runs: raises a
 * small soft limit (and restarts, as thread stacks follow the limit at
 * start-up) or exits with one line saying how much is needed. */
void kb_check_stack(char **argv);

/* Calls `sweep` for each real directory of ours in /tmp named
 * PREFIX<pid>-XXXXXX whose process is gone (SIGKILLed before it could clean
 * up): the next launcher or agent on the host removes what it left. */
void kb_sweep_dead_tmp(const char *prefix, void (*sweep)(int at, const char *name, void *arg),
		       void *arg);

/* Entry of a re-executed daemon process. */
int kb_daemon_main(int argc, char **argv);

/* What the run produced, for summary.json and the report. */
struct kb_run_facts {
	struct rt_coord_stats coord;
	struct rt_end_reports reports; /* what every component reported in BYE */
	double wall_s;
	uint32_t daemons;
	uint64_t global_windows; /* windows across hosts (0: a one-host run) */
	uint64_t lookahead_ps;
	int argc;            /* the command line after `kernbench` */
	char **argv;
	const char *args;    /* kernel arguments asked for, one
			      * "name\tgiven|default\tvalue" line each, sorted */
	const struct kb_steps *steps; /* a program's steps (steps.h), or NULL */
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
