/* cli.h — the `kernbench` command line (cli.c): every command's options as
 * a table (opts.h) and what they fill in, and the commands that need no
 * more than that (config, list, keygen, diff). The command table itself
 * (`kernbench COMMAND`) is main.c's, above every role it starts.
 *
 * May use: hosts, diff, opts, workloads, the runtime; never a role of the
 * launcher (launch, agent, spmd, sweep), which all read their options
 * from here. */
#ifndef KB_CLI_H
#define KB_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rt/err.h"
#include "rt/job.h"
#include "rt/keys.h"
#include "rt/topology.h"

/* The commands of cli.c; each takes its own argv (argv[0] is COMMAND) and
 * returns the exit status. */
int kb_cli_config(int argc, char **argv);
int kb_cli_list(int argc, char **argv);
int kb_cli_keygen(int argc, char **argv);
int kb_cli_diff(int argc, char **argv);
/* The `run` options as getopt_long's table (NULL-terminated, made from
 * cli.c's rows, with --help): the sweep and --from read it rather than
 * keep a copy. */
struct option;
const struct option *kb_cli_run_option_table(void);
void kb_cli_run_usage(FILE *out);

/* The run options that shape an SPMD launch (spmd.h). */
struct kb_spmd_opts {
	const char *rendezvous;  /* --rendezvous DIR, or NULL */
	const char *coordinator; /* --coordinator tcp://ADDR:PORT, or NULL */
	const char *keys_path;   /* --keys FILE as given, or NULL */
	uint64_t agent_timeout_s; /* --agent-timeout (0: the default) */
};

/* Parses `run` options into `job` (argv[0] is "run"; options and the
 * workload in any order) and --hosts FILE into *hosts (*have_hosts says
 * whether it was given; the file is read and checked against the run).
 * RT_EINTERRUPTED: --help was asked for. `spmd` gets the options of a
 * launch by mpirun or srun without --hosts; NULL refuses them. */
struct kb_hosts;
enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job, struct kb_hosts *hosts,
			     bool *have_hosts, struct kb_spmd_opts *spmd);

/* `kernbench agent` options (agent.h runs the agent). */
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
/* Builds and places the job's topology (workload + colocation); what the
 * command line got wrong is RT_EUSAGE (kb_opts_usage). */
enum rt_err kb_job_topology(const struct rt_job *job, struct rt_topology *topo);

#endif
