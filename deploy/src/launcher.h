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
#include "rt/keys.h"
#include "rt/topology.h"

/* The command line (cli.c, opts.h: every command's options are a table).
 * kb_cli_main runs `kernbench COMMAND ...` (argv[0] is COMMAND) and
 * returns the exit status; each command's function takes its own argv. */
int kb_cli_main(int argc, char **argv);
int kb_cli_run(int argc, char **argv);
int kb_cli_config(int argc, char **argv);
int kb_cli_list(int argc, char **argv);
int kb_cli_keygen(int argc, char **argv);
int kb_cli_plot(int argc, char **argv);
int kb_cli_diff(int argc, char **argv);
/* The `run` options as getopt_long's table (NULL-terminated, made from
 * cli.c's rows, with --help): the sweep and --from read it rather than
 * keep a copy. */
struct option;
const struct option *kb_cli_run_option_table(void);
/* Finds the installed or source-tree copy of script `name` (plot
 * scripts) beside this binary; false if there is none. */
bool kb_find_script(const char *name, char *path, size_t cap);
void kb_cli_usage(FILE *out);
void kb_cli_run_usage(FILE *out);

/* Parses `run` options into `job` (argv[0] is "run"; options and the
 * workload in any order) and --hosts FILE into *hosts (*have_hosts says
 * whether it was given; the file is read and checked against the run).
 * RT_EINTERRUPTED: --help was asked for. */
struct kb_hosts;
enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job, struct kb_hosts *hosts,
			     bool *have_hosts);

/* `kernbench agent` options. */
struct kb_agent_opts {
	char coordinator[256]; /* tcp://ADDRESS:PORT */
	uint32_t index;
	bool have_index;       /* --index given */
	struct rt_keys keys;   /* --keys (keys.on false: none) */
	unsigned hello_wait_s; /* --agent-wait S (0: the default, 60) */
};
/* Parses them: -1 to go on, else the status to exit with (0 after
 * --help; 2 after one line saying what is wrong). */
int kb_cli_parse_agent(int argc, char **argv, struct kb_agent_opts *out);

/* RT_EINVAL with one line if the job loads a shared object of the user's
 * (kernel or model plug-in) into daemon threads (--transport inproc),
 * which cannot contain it (ADR 0037). */
enum rt_err kb_check_inproc(const struct rt_job *job);
/* "kernbench RELEASE (COMMIT)". */
const char *kb_version(void);
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
/* The same for a window whose messages point into `frames`, which it
 * takes (rt_coord_step_frames). */
enum rt_err kb_local_step_frames(struct kb_local *local, const Kb__Grant *g, Kb__Sync **frames,
				 size_t n_frames, struct rt_coord_away *out);
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
/* The same from a signal handler: SIGKILL to every child, no waiting. */
void kb_kill_strays_now(void);
/* `kernbench agent ...` */
int kb_agent_main(int argc, char **argv);

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

/* Merges the daemons' output parts into op_log.jsonl, trace.json and
 * summary.json, prints the report, and removes the parts. */
enum rt_err kb_outputs_merge(const struct rt_job *job, const struct rt_topology *topo,
			     const struct kb_run_facts *facts);
/* Removes the parts folder of job->out_dir (never following a link). */
void kb_outputs_discard(const struct rt_job *job);

/* The output folder (job->result_dir) of one run. */
struct kb_outdir {
	int lock_fd;    /* flock on the folder until the run ends (-1: none) */
	bool made_dir;  /* this run created the folder */
	bool made_lock; /* ... or only its lock file */
};
#define KB_OUTDIR_INIT { .lock_fd = -1 }

/* Creates the folder, locks it against a second run and makes a fresh
 * staging folder inside, which job->out_dir then names: everything the run
 * writes goes there. The previous run's results stay until this one ends. */
enum rt_err kb_outputs_prepare(struct rt_job *job, struct kb_outdir *od);
/* Success: replaces the previous run's results (the files its manifest
 * lists, if they are still regular files of ours) with the staged ones,
 * records them in the manifest and removes the staging folder. */
enum rt_err kb_outputs_commit(struct rt_job *job, struct kb_outdir *od);
/* Failure: removes the staging folder. A run that failed (`refused`
 * false) also removes the previous run's results: a failed run leaves
 * none. One refused as a usage error (exit 2) leaves the folder as it
 * found it: previous results kept, and the lock file and the folder
 * removed again if this run created them (ADR 0038). */
void kb_outputs_abandon(struct rt_job *job, struct kb_outdir *od, bool refused);

#endif
