/* main.c — `kernbench`: the command table above every role the binary
 * plays (run, sweep, agent, daemon, ...), and `run` and `plot` themselves.
 *
 * May use every deploy module; none uses it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdbool.h>

#include "hosts.h"
#include "agent.h"
#include "cli.h"
#include "launch.h"
#include "release.h"
#include "rerun.h"
#include "spmd.h"
#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "rt/keys.h"
#include "sweep.h"
#include "workloads.h"

/* Started by mpirun or srun with no hosts file: *s says which process
 * this is (s->size 0: not such a launch, a one-host run). The options
 * that only such a launch takes are refused without one. */
static enum rt_err spmd_launch(const struct kb_spmd_opts *o, struct kb_spmd *s)
{
	enum rt_err err = kb_spmd_detect(getenv, s);

	if (err == RT_ENOTFOUND) {
		memset(s, 0, sizeof(*s));
		if (o->rendezvous || o->coordinator)
			return rt_fail(RT_EUSAGE, "--%s is for a run started by mpirun or srun (this "
				       "one was not: no OMPI_COMM_WORLD_* or SLURM step variables)",
				       o->rendezvous ? "rendezvous" : "coordinator");
		if (o->agent_timeout_s)
			return rt_fail(RT_EUSAGE, "--agent-timeout needs --hosts FILE, or a run started "
				       "by mpirun or srun");
		return RT_EOK;
	}
	return err;
}

static int kb_cli_run(int argc, char **argv)
{
	static struct rt_job job; /* large (memfd tables); one per process */
	static char *given[256];  /* argv as typed, for summary.json */
	static struct kb_hosts hosts;
	static struct kb_rerun rerun;
	struct kb_spmd_opts spmd_opts = { 0 };
	struct kb_spmd spmd = { 0 };
	bool have_hosts = false;
	enum rt_err err;
	int rc;

	if (argc >= (int)(sizeof(given) / sizeof(given[0]))) {
		fprintf(stderr, "kernbench: error: run: more than %zu arguments\n",
			sizeof(given) / sizeof(given[0]) - 1);
		return 2;
	}
	memcpy(given, argv, (size_t)argc * sizeof(*argv));
	/* --from DIR becomes the options it stands for (rerun.h) */
	err = kb_rerun_prepare(argc, argv, &rerun);
	if (!err)
		err = kb_cli_parse_run(rerun.argc, rerun.argv, &job, &hosts, &have_hosts, &spmd_opts);
	if (!err && !have_hosts)
		err = spmd_launch(&spmd_opts, &spmd);

	if (err == RT_EINTERRUPTED) {
		kb_cli_run_usage(stdout);
		kb_rerun_release(&rerun);
		return 0;
	}
	if (err) {
		rt_print_error(rt_last_error());
		kb_rerun_release(&rerun);
		return rt_exit_status(err); /* RT_EUSAGE: 2; a plug-in that crashed loading: 1 */
	}
	if (spmd.size)
		rc = kb_spmd_run(&spmd, &spmd_opts, &job, argc, given);
	else
		rc = kb_launch(&job, have_hosts ? &hosts : NULL, argc, given);
	if (spmd.size && spmd.rank) { /* an agent: the results are process 0's */
		kb_rerun_release(&rerun);
		return rc;
	}
	if (rc == 0 && kb_rerun_check(&rerun, job.result_dir)) {
		rt_print_error(rt_last_error());
		rc = 1;
	}
	kb_rerun_release(&rerun);
	return rc;
}

/* `kernbench plot OUT_DIR [...]`: pictures drawn by a matplotlib script
 * run with Debian's python3 (deploy/plot/kernbench_plot.py). */
static int kb_cli_plot(int argc, char **argv)
{
	char script[PATH_MAX + 64];
	char *args[64];
	int n = 0;

	if (!kb_find_script("kernbench_plot.py", script, sizeof(script))) {
		fprintf(stderr, "kernbench: error: plot: kernbench_plot.py not found beside this binary (make install, or run from the build tree)\n");
		return 1;
	}
	args[n++] = (char *)"python3";
	args[n++] = script;
	for (int i = 1; i < argc && n < 63; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	execv("/usr/bin/python3", args);
	fprintf(stderr, "kernbench: error: plot: cannot run /usr/bin/python3: %s (run `make deps`)\n",
		strerror(errno));
	return 1;
}

/* ---------------------------------------------------------------- kernbench */

struct kb_cli_command {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *help; /* its line in `kernbench --help` */
};

static int cmd_help(int argc, char **argv);
static int kb_cli_main(int argc, char **argv);

static const struct kb_cli_command commands[] = {
	{ "run", kb_cli_run, "run WORKLOAD [options]   run a workload (`kernbench run --help`);\n"
	  "                           run --from DIR: rerun a result folder, check its digest" },
	{ "sweep", kb_sweep_main,
	  "sweep WORKLOAD [options] run many points (--set k=v1,v2 --arg n=lo:hi:x2 ...)\n"
	  "                           into results.csv and a plot (`kernbench sweep --help`)" },
	{ "diff", kb_cli_diff,
	  "diff A B                 what differs between two result folders (exit 0 same,\n"
	  "                           1 different, 2 usage error)" },
	{ "list", kb_cli_list, "list                     list built-in workloads and kernels" },
	{ "config", kb_cli_config,
	  "config [options]         print the effective configuration (loads back with\n"
	  "                           --config; --machine NAME: a preset's, its sources as\n"
	  "                           comments); --format markdown: the reference table" },
	{ "keygen", kb_cli_keygen,
	  "keygen --out FILE        write a run's CURVE keys (mode 0600, never\n"
	  "                           overwrites); pass them with `run --keys FILE`" },
	{ "agent", kb_agent_main,
	  "agent --coordinator tcp://ADDRESS:PORT [--index I] [--keys FILE]\n"
	  "                           run one host's ranks of a `run --hosts`" },
	{ "plot", kb_cli_plot,
	  "plot OUT_DIR [options]   timeline and utilisation pictures of a run (PNG/SVG;\n"
	  "                           --window START:END, --arrows, --format svg)" },
	{ "help", cmd_help, "help [COMMAND]           this text, or a command's" },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void kb_cli_usage(FILE *out)
{
	fputs("usage: kernbench <command> [options]\n\ncommands:\n", out);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %s\n", commands[i].help);
	fputs("  --version                release and build commit\n"
	      "  --help                   this text; `kernbench COMMAND --help`: a command's\n"
	      "\n"
	      "kernbench simulates NPU processing elements: one daemon per component\n"
	      "(kb-host, kb-sched, kb-dma, kb-gemm, kb-math) under a conservative lockstep\n"
	      "clock, deterministic to the byte. Outputs: summary.json, op_log.jsonl,\n"
	      "trace.json (open in Perfetto) and tensors as .npy in the output directory.\n",
	      out);
}

static int cmd_help(int argc, char **argv)
{
	char *help[] = { argv[1], (char *)"--help", NULL };

	if (argc < 2) {
		kb_cli_usage(stdout);
		return 0;
	}
	if (argc > 2 || !strcmp(argv[1], "help")) {
		rt_print_error("help: usage: kernbench help [COMMAND]");
		return 2;
	}
	return kb_cli_main(2, help);
}

static int kb_cli_main(int argc, char **argv)
{
	const char *near = NULL;
	size_t best = 3;

	for (size_t i = 0; i < N_COMMANDS; i++)
		if (!strcmp(argv[0], commands[i].name))
			return commands[i].main(argc, argv);
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (rt_edit_distance(argv[0], commands[i].name) < best) {
			best = rt_edit_distance(argv[0], commands[i].name);
			near = commands[i].name;
		}
	rt_fail(RT_EINVAL, "unknown command '%.60s'%s%s%s (see `kernbench --help`)", argv[0],
		near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
	rt_print_error(rt_last_error());
	return 2;
}

/* A command's output that could not be written (> /dev/full, a closed
 * pipe) fails it: what it printed is lost. */
static int check_stdout(int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	if (!rc) {
		char line[200];

		snprintf(line, sizeof(line), "cannot write to standard output: %s",
			 strerror(errno ? errno : EIO));
		rt_print_error(line);
	}
	return rc ? rc : 1;
}

int main(int argc, char **argv)
{
	kb_check_stack(argv);
	if (argc >= 2 && !strcmp(argv[1], "__daemon"))
		return kb_daemon_main(argc, argv);
	if (argc < 2) {
		kb_cli_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		kb_cli_usage(stdout);
		return check_stdout(0);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		puts(kb_version());
		return check_stdout(0);
	}
	return check_stdout(kb_cli_main(argc - 1, argv + 1));
}
