/* cli.c — the `kernbench` command line: every command's options as a
 * table (opts.h), what they fill in, and the commands that need no more
 * than that (config, list, keygen, diff): see cli.h. The command table is
 * main.c's. This file: `run`'s options and the steps they share with the
 * other commands (cli_private.h); cli_tools.c: config, list, keygen, diff
 * and agent. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diff.h"
#include "hosts.h"
#include "npu/memory.h"
#include "cli.h"
#include "cli_private.h"
#include "opts.h"
#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "rt/keys.h"
#include "workloads.h"

static enum rt_err parse_arg(struct rt_job *job, const char *text)
{
	const char *eq = strchr(text, '=');
	struct rt_job_arg *a;

	if (!eq || eq == text)
		return rt_fail(RT_EINVAL, "--arg '%s': expected name=value", text);
	if (job->n_args == RT_MAX_ARGS)
		return rt_fail(RT_EINVAL, "more than %d --arg options", RT_MAX_ARGS);
	if ((size_t)(eq - text) >= sizeof(a->name) || strlen(eq + 1) >= sizeof(a->value))
		return rt_fail(RT_EINVAL, "--arg '%.60s...': a name has at most %zu bytes, a value "
			       "at most %zu", text, sizeof(a->name) - 1, sizeof(a->value) - 1);
	a = &job->args[job->n_args++];
	memcpy(a->name, text, (size_t)(eq - text));
	a->name[eq - text] = '\0';
	memcpy(a->value, eq + 1, strlen(eq + 1) + 1);
	return RT_EOK;
}

enum rt_err kb_cli_number(const char *opt, const char *text, uint64_t min, uint64_t max,
				uint64_t *out)
{
	if (rt_parse_u64(text, min, max, out) == RT_PARSE_OK)
		return RT_EOK;
	return rt_fail(RT_EINVAL, "%s '%.40s%s': expected a decimal whole number from %llu to %llu",
		       opt, text, strlen(text) > 40 ? "..." : "", (unsigned long long)min,
		       (unsigned long long)max);
}

static enum rt_err parse_u32(const char *opt, const char *text, uint32_t *out)
{
	uint64_t v = 0;
	enum rt_err err = kb_cli_number(opt, text, 1, 64, &v);

	*out = (uint32_t)v;
	return err;
}

/* Room kept after --out for the staging folder and the part files. */
#define OUT_DIR_SLACK 96

/* Copies a path option, refusing (not truncating) one that does not fit. */
static enum rt_err parse_path(const char *opt, const char *text, char *out, size_t cap)
{
	size_t len = strlen(text);

	if (!len || len >= cap)
		return rt_fail(RT_EINVAL, "%s: the path is %zu bytes; expected 1 to %zu", opt, len,
			       cap - 1);
	memcpy(out, text, len + 1);
	return RT_EOK;
}

static enum rt_err parse_mode(const char *text, enum rt_mode *out)
{
	if (!strcmp(text, "timing"))
		*out = RT_MODE_TIMING;
	else if (!strcmp(text, "data"))
		*out = RT_MODE_DATA;
	else
		return rt_fail(RT_EINVAL, "--mode '%s': expected timing or data", text);
	return RT_EOK;
}


/* --inputs names a folder that exists: a typo is one line before any
 * daemon starts, not a missing-file error from every kernel host. */
static enum rt_err parse_inputs(const char *val, struct rt_job *job)
{
	struct stat st;
	enum rt_err err = parse_path("--inputs", val, job->inputs_dir, RT_PATH_MAX - 64);

	if (err)
		return err;
	if (stat(val, &st) != 0)
		return rt_fail(RT_EINVAL, "--inputs %.200s: %s", val, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return rt_fail(RT_EINVAL, "--inputs %.200s: not a directory", val);
	return RT_EOK;
}



static enum rt_err add_config(struct machine_flags *m, const char *path)
{
	if (m->n_configs == MAX_CONFIGS)
		return rt_fail(RT_EINVAL, "more than %d --config options", MAX_CONFIGS);
	m->configs[m->n_configs++] = path;
	return RT_EOK;
}

static enum rt_err add_set(struct machine_flags *m, const char *kv)
{
	if (m->n_sets == RT_MAX_ARGS)
		return rt_fail(RT_EINVAL, "more than %d --set options", RT_MAX_ARGS);
	m->sets[m->n_sets++] = kv;
	return RT_EOK;
}

/* defaults < the preset < each --config in order < each --set <
 * --ranks/--pes; the preset is --machine's, else the last one a file or a
 * --set names (rt/config.h). *preset_path (may be NULL) receives the
 * preset's file, "" when none was read. */
enum rt_err kb_cli_build_config(struct rt_config *cfg, const struct machine_flags *m,
				char *preset_path, size_t cap)
{
	struct rt_config_layers *l = malloc(sizeof(*l));
	enum rt_err err = RT_EOK;

	if (!l)
		return rt_fail(RT_ENOMEM, "configuration: out of memory");
	rt_config_layers_init(l);
	for (uint32_t i = 0; !err && i < m->n_configs; i++)
		err = rt_config_layers_file(l, m->configs[i]);
	for (uint32_t i = 0; !err && i < m->n_sets; i++)
		err = rt_config_layers_set(l, m->sets[i]);
	if (!err && m->machine)
		err = rt_config_layers_machine(l, m->machine);
	if (!err)
		err = rt_config_layers_finish(l, cfg);
	if (!err && preset_path)
		snprintf(preset_path, cap, "%s", l->preset_path);
	free(l);
	if (err)
		return err;
	if (m->ranks)
		cfg->ranks = m->ranks;
	if (m->pes)
		cfg->pes = m->pes;
	return rt_config_validate(cfg);
}

static void job_defaults(struct rt_job *job)
{
	memset(job, 0, sizeof(*job));
	job->transport = RT_TRANSPORT_IPC;
	job->colocate = RT_COLOCATE_NONE;
	job->mode = RT_MODE_TIMING;
	job->seed = 1;
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++)
		job->memory_fds[i] = -1;
}

/* An unknown workload: one line with the closest known name. */
static enum rt_err check_workload(const char *name)
{
	struct kb_workload w;
	const char *near;

	if (kb_workload_find(name, &w) == RT_EOK)
		return RT_EOK;
	if (strchr(name, ':'))
		return RT_EINVAL; /* the loader said why */
	near = kb_workload_suggest(name);
	return rt_fail(RT_EINVAL, "unknown workload '%s'%s%s%s (see `kernbench list`; a kernel in "
		       "a shared object is path/lib.so:NAME)", name, near ? " (did you mean '" : "",
		       near ? near : "", near ? "'?)" : "");
}

/* --trace-ranks naming a rank the run does not have would filter the trace
 * to nothing without a word: a usage error naming the first such rank. */
static enum rt_err check_trace_ranks(const struct rt_job *job)
{
	uint32_t ranks = job->config.ranks;

	for (unsigned r = ranks; r < 64; r++)
		if (job->trace.ranks >> r & 1)
			return rt_fail(RT_EINVAL, "--trace-ranks: rank %u is outside this run, "
				       "which has %u rank%s (0-%u)", r, ranks, ranks == 1 ? "" : "s",
				       ranks - 1);
	return RT_EOK;
}

/* out/NAME: a kernel's name (after lib.so:), a program file's stem. */
static void default_out(struct rt_job *job)
{
	const char *name = strrchr(job->workload, ':') ? strrchr(job->workload, ':') + 1
						       : job->workload;
	int len = (int)strlen(name);

	if (kb_program_file(name)) {
		name = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
		len = (int)(strrchr(name, '.') - name);
	}
	snprintf(job->result_dir, sizeof(job->result_dir), "out/%.*s", len > 200 ? 200 : len, name);
}

enum rt_err kb_check_inproc(const struct rt_job *job)
{
	const char *obj = job->transport == RT_TRANSPORT_INPROC ? kb_job_shared_object(job) : NULL;

	if (!obj)
		return RT_EOK;
	return rt_fail(RT_EINVAL, "--transport inproc runs every daemon as a thread of this process, "
		       "which cannot contain what a shared object may do (crash, abort, _exit, a "
		       "constructor that never returns): %.300s needs --transport ipc (the default) or "
		       "tcp", obj);
}

enum rt_err kb_job_topology(const struct rt_job *job, struct rt_topology *topo)
{
	struct kb_workload w;
	enum rt_err err = kb_workload_find(job->workload, &w);

	rt_topology_init(topo);
	if (!err)
		err = w.build(job, topo);
	if (!err)
		err = rt_topology_place(topo, job->colocate, job->host_of_rank);
	if (!err)
		err = kb_job_check_models(job, topo);
	/* the machine and workload the command line asked for: a value it
	 * cannot have (a model no engine uses, a link of zero latency) is the
	 * command line's mistake, out of memory is not */
	return kb_opts_usage(err);
}

/* ---------------------------------------------------------------- tables */


static enum rt_err on_off(const char *opt, const char *val, bool *off)
{
	if (strcmp(val, "on") && strcmp(val, "off"))
		return rt_fail(RT_EINVAL, "%s '%.60s': expected on or off", opt, val);
	*off = !strcmp(val, "off");
	return RT_EOK;
}

static enum rt_err opt_out(struct kb_cli *c, const char *v)
{
	return parse_path("--out", v, c->job->result_dir, RT_PATH_MAX - OUT_DIR_SLACK);
}

static enum rt_err opt_transport(struct kb_cli *c, const char *v)
{
	return rt_transport_parse(v, &c->job->transport);
}

static enum rt_err opt_colocate(struct kb_cli *c, const char *v)
{
	return rt_colocate_parse(v, &c->job->colocate);
}

static enum rt_err opt_mode(struct kb_cli *c, const char *v)
{
	return parse_mode(v, &c->job->mode);
}

enum rt_err kb_cli_opt_ranks(struct kb_cli *c, const char *v)
{
	return parse_u32("--ranks", v, &c->m.ranks);
}

enum rt_err kb_cli_opt_pes(struct kb_cli *c, const char *v)
{
	return parse_u32("--pes", v, &c->m.pes);
}

static enum rt_err opt_seed(struct kb_cli *c, const char *v)
{
	return kb_cli_number("--seed", v, 0, UINT64_MAX, &c->job->seed);
}

static enum rt_err opt_arg(struct kb_cli *c, const char *v)
{
	return parse_arg(c->job, v);
}

enum rt_err kb_cli_opt_set(struct kb_cli *c, const char *v)
{
	return add_set(&c->m, v);
}

enum rt_err kb_cli_opt_config(struct kb_cli *c, const char *v)
{
	return add_config(&c->m, v);
}

static enum rt_err opt_inputs(struct kb_cli *c, const char *v)
{
	return parse_inputs(v, c->job);
}

static enum rt_err opt_trace(struct kb_cli *c, const char *v)
{
	return on_off("--trace", v, &c->job->trace_off);
}

static enum rt_err opt_trace_windows(struct kb_cli *c, const char *v)
{
	(void)v;
	c->job->trace_windows = true;
	return RT_EOK;
}

static enum rt_err opt_trace_window(struct kb_cli *c, const char *v)
{
	return rt_trace_parse_window(v, &c->job->trace);
}

static enum rt_err opt_trace_ranks(struct kb_cli *c, const char *v)
{
	return rt_trace_parse_ranks(v, &c->job->trace);
}

static enum rt_err opt_trace_flows(struct kb_cli *c, const char *v)
{
	return on_off("--trace-flows", v, &c->job->trace.no_flows);
}

static enum rt_err opt_op_log(struct kb_cli *c, const char *v)
{
	return on_off("--op-log", v, &c->job->oplog_off);
}

static enum rt_err opt_fast_forward(struct kb_cli *c, const char *v)
{
	if (rt_ff_mode_parse(v, &c->job->ff_mode))
		return RT_EOK;
	return rt_fail(RT_EINVAL, "--fast-forward '%.60s': expected off, exact or auto", v);
}

static enum rt_err opt_trace_format(struct kb_cli *c, const char *v)
{
	return rt_trace_parse_format(v, &c->job->trace);
}

static enum rt_err opt_progress(struct kb_cli *c, const char *v)
{
	return rt_progress_parse(v, &c->job->progress);
}

/* rerun.c rewrites a first --from DIR into the options it stands for
 * before this parser runs: one that is left was given twice or beside a
 * WORKLOAD. */
static enum rt_err opt_from(struct kb_cli *c, const char *v)
{
	(void)c;
	return rt_fail(RT_EINVAL, "--from %.200s: give it once, without WORKLOAD", v);
}

static enum rt_err opt_quiet(struct kb_cli *c, const char *v)
{
	(void)v;
	c->job->quiet = true;
	return RT_EOK;
}

static enum rt_err opt_keys(struct kb_cli *c, const char *v)
{
	c->m.keys_path = v;
	return rt_keys_load(v, &c->job->keys);
}

static enum rt_err opt_rendezvous(struct kb_cli *c, const char *v)
{
	c->m.rendezvous = v;
	return v[0] ? RT_EOK : rt_fail(RT_EINVAL, "--rendezvous: expected a folder");
}

/* What SPMD process 0 binds and the others connect to: an IPv4 address
 * (ZeroMQ binds addresses, not names) and a port. */
static enum rt_err opt_spmd_coordinator(struct kb_cli *c, const char *v)
{
	const char *colon = strrchr(v, ':');
	struct in_addr ip;
	char host[64];
	uint64_t port;

	if (strncmp(v, "tcp://", 6) || !colon || colon - (v + 6) >= (long)sizeof(host) ||
	    rt_parse_u64(colon + 1, 1, 65535, &port) != RT_PARSE_OK)
		return rt_fail(RT_EINVAL, "--coordinator '%.200s': expected tcp://IPV4:PORT", v);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - (v + 6)), v + 6);
	if (inet_pton(AF_INET, host, &ip) != 1)
		return rt_fail(RT_EINVAL, "--coordinator '%.200s': ADDRESS is what process 0 binds: an "
			       "IPv4 address of its node, not a name or IPv6", v);
	c->m.coordinator = v;
	return RT_EOK;
}

enum rt_err kb_cli_opt_machine(struct kb_cli *c, const char *v)
{
	c->m.machine = v;
	return RT_EOK;
}

static enum rt_err opt_hosts(struct kb_cli *c, const char *v)
{
	c->m.hosts = v;
	return RT_EOK;
}

static enum rt_err opt_agent_timeout(struct kb_cli *c, const char *v)
{
	return kb_cli_number("--agent-timeout", v, 1, 86400, &c->m.agent_timeout_s);
}

/* `kernbench run`: one row per option (opts.h). */
static const struct kb_opt run_opts[] = {
	{ "out", "DIR", "output directory (default out/WORKLOAD)", opt_out },
	{ "transport", "T", "inproc | ipc | tcp (default ipc); inproc runs every\n"
			    "daemon as a thread of this process (with --hosts: of its\n"
			    "host's agent), built-in kernels and models only", opt_transport },
	{ "colocate", "C", "none | pe | rank | host | all (default none):\n"
			   "components per daemon (host: one per --hosts host);\n"
			   "changes speed, never results", opt_colocate },
	{ "mode", "M", "timing | data (default timing); data also moves and\n"
		       "computes real bytes", opt_mode },
	{ "ranks", "R", "machine size: ranks (default from config: 1)", kb_cli_opt_ranks },
	{ "pes", "P", "machine size: PEs per rank (default from config: 8)", kb_cli_opt_pes },
	{ "seed", "N", "seed of every random stream (default 1)", opt_seed },
	{ "arg", "name=value", "workload argument (repeatable)", opt_arg },
	{ "machine", "NAME", "machine preset (deploy/configs/machines/NAME.yaml, or a\n"
			     "path to such a file); default trn2", kb_cli_opt_machine },
	{ "set", "key=value", "configuration override (repeatable; `kernbench config`)", kb_cli_opt_set },
	{ "config", "FILE.yaml", "configuration file (repeatable, later files override\n"
				 "earlier ones; deploy/configs/default.yaml)\n"
				 "defaults < --machine preset < --config < --set < --ranks/--pes",
	  kb_cli_opt_config },
	{ "inputs", "DIR", "input tensors (.npy) for kernels that take them; an\n"
			   "existing folder, and a usage error for a kernel\n"
			   "that reads none", opt_inputs },
	{ "trace", "on|off", "write trace.json (default on)", opt_trace },
	{ "trace-windows", NULL, "add lockstep window counters to trace.json (their\n"
				 "timing depends on --colocate, so off by default)",
	  opt_trace_windows },
	{ "trace-window", "START:END", "only events in [START, END] simulated us (END may\n"
				       "be empty: to the end)", opt_trace_window },
	{ "trace-ranks", "LIST", "only these ranks, e.g. 0,2-3 (each must be in the run)",
	  opt_trace_ranks },
	{ "trace-flows", "on|off", "message slices and arrows (default on)", opt_trace_flows },
	{ "trace-format", "F", "json (trace.json), json.gz (trace.json.gz) or\n"
			       "perfetto (trace.pftrace, protobuf); all open in Perfetto",
	  opt_trace_format },
	{ "op-log", "on|off", "write op_log.jsonl, a line per executed stage\n"
			      "(default on); off changes no other output", opt_op_log },
	{ "fast-forward", "F", "off | exact | auto (default off): skip whole periods\n"
			       "of marked loops (TL_FOR) once the run repeats; exact\n"
			       "only where every event repeats, auto also where loops\n"
			       "progress steadily (with an error bound); timing mode,\n"
			       "--colocate all and --trace off only (ADR 0059)",
	  opt_fast_forward },
	{ "quiet", NULL, "no report on stdout, no progress on stderr", opt_quiet },
	{ "progress", "P", "auto | bar | plain | off (default auto: a bar on a\n"
			   "terminal, else a line every few seconds once the\n"
			   "run is long)", opt_progress },
	{ "from", "DIR", "rerun exactly what result folder DIR recorded (its\n"
			 "summary.json; also --config DIR/summary.json without\n"
			 "WORKLOAD) and check the delivery digest matches", opt_from },
	{ "keys", "FILE", "CURVE keys from `kernbench keygen` (tcp/ipc); required\n"
			  "when run.bind_host is not loopback, or the hosts of\n"
			  "--hosts are other machines", opt_keys },
	{ "hosts", "FILE", "ranks on several hosts: this process is only the\n"
			   "coordinator and waits for one `kernbench agent` per\n"
			   "host of FILE (deploy/README.md)", opt_hosts },
	{ "agent-timeout", "S", "how long to wait for the agents (default 60)",
	  opt_agent_timeout },
	{ "rendezvous", "DIR", "started by mpirun or srun without --hosts: a folder\n"
			       "every node shares, where process 0 leaves its address\n"
			       "(and keys, without --keys) for the others", opt_rendezvous },
	{ "coordinator", "tcp://IPV4:PORT", "started by mpirun or srun without --hosts: where\n"
					    "process 0 listens (default: loopback on one node,\n"
					    "else srun's launch node; docs/multihost.md)",
	  opt_spmd_coordinator },
};

#define N_RUN_OPTS (sizeof(run_opts) / sizeof(run_opts[0]))

/* getopt_long's view of the same rows (and --help), for the sweep and
 * --from, which scan run options with getopt: made from run_opts, so it
 * never drifts from what `run` takes. */
const struct option *kb_cli_run_option_table(void)
{
	static struct option table[N_RUN_OPTS + 2];

	if (!table[0].name) {
		for (size_t i = 0; i < N_RUN_OPTS; i++)
			table[i] = (struct option){ run_opts[i].name,
						    run_opts[i].metavar ? required_argument
									: no_argument,
						    NULL, (int)i + 1 };
		table[N_RUN_OPTS] = (struct option){ "help", no_argument, NULL, 'h' };
	}
	return table;
}

static const struct kb_command run_command = {
	.name = "run",
	.usage = "run WORKLOAD [options]",
	.about = "WORKLOAD is a built-in (`kernbench list`) or path/lib.so:NAME, a kernel\n"
		 "compiled against kernel_host/include/tl.h.\n",
	.epilogue = "Options may come before or after WORKLOAD; a unique prefix of an option\n"
		    "is that option. Numbers are decimal digits only. An --arg the kernel never\n"
		    "asks for, or one whose value the kernel or the workload refuses (out of\n"
		    "range, not a number), is a usage error (exit 2; the line lists the names\n"
		    "it asks for or the range). A usage error leaves DIR as it was.\n"
		    "\n"
		    "Exit status: 0 success, 1 error (one line on stderr names what and where),\n"
		    "2 usage error, 128+N stopped by signal N (130: Ctrl-C).\n",
	.opts = run_opts,
	.n_opts = N_RUN_OPTS,
	.min_args = 1,
	.max_args = 1,
};

/* ---------------------------------------------------------------- commands */

/* A failed parse's error: the command line's (RT_EUSAGE), or out of
 * memory (the one failure of an option's take no command line causes). */
static enum rt_err parsed_error(enum kb_parsed parsed)
{
	return parsed == KB_PARSED_ERROR ? RT_EUSAGE : RT_ENOMEM;
}

/* KB_PARSED_HELP: prints the help; errors: one line. The status to exit
 * with, or -1 to go on. */
int kb_cli_parse_or_exit(const struct kb_command *cmd, int argc, char **argv, struct kb_cli *cli,
			 const char **args, unsigned *n_args)
{
	enum kb_parsed parsed = kb_opts_parse(cmd, argc, argv, cli, args, n_args);

	switch (parsed) {
	case KB_PARSED_HELP:
		kb_opts_help(cmd, stdout);
		return 0;
	case KB_PARSED_ERROR:
	case KB_PARSED_FAILED:
		rt_print_error(rt_last_error());
		return rt_exit_status(parsed_error(parsed));
	default:
		return -1;
	}
}

/* The options of a launch by mpirun or srun (spmd.h); without `spmd`
 * (a sweep's point) they are refused as options that need --hosts. */
static enum rt_err spmd_options(const struct machine_flags *m, struct kb_spmd_opts *spmd)
{
	if (m->hosts && (m->rendezvous || m->coordinator))
		return rt_fail(RT_EINVAL, "--%s is for a run started by mpirun or srun without "
			       "--hosts (the hosts file names the coordinator)",
			       m->rendezvous ? "rendezvous" : "coordinator");
	if (!spmd && (m->rendezvous || m->coordinator || (!m->hosts && m->agent_timeout_s)))
		return rt_fail(RT_EINVAL, "--%s needs --hosts FILE",
			       m->rendezvous ? "rendezvous" : m->coordinator ? "coordinator"
									  : "agent-timeout");
	if (spmd)
		*spmd = (struct kb_spmd_opts){ .rendezvous = m->rendezvous,
					       .coordinator = m->coordinator,
					       .keys_path = m->keys_path,
					       .agent_timeout_s = m->agent_timeout_s };
	return RT_EOK;
}

enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job, struct kb_hosts *hosts,
			     bool *have_hosts, struct kb_spmd_opts *spmd)
{
	struct kb_cli cli = { .job = job };
	const char *workload = NULL;
	unsigned n = 0;
	enum rt_err err = RT_EOK;
	enum kb_parsed parsed;

	job_defaults(job);
	*have_hosts = false;
	parsed = kb_opts_parse(&run_command, argc, argv, &cli, &workload, &n);
	if (parsed == KB_PARSED_HELP)
		return RT_EINTERRUPTED;
	if (parsed != KB_PARSED_OK)
		return parsed_error(parsed);
	err = parse_path("WORKLOAD", workload, job->workload, sizeof(job->workload));
	if (!err && !job->result_dir[0])
		default_out(job);
	if (!err)
		memcpy(job->out_dir, job->result_dir, sizeof(job->out_dir));
	if (!err)
		err = check_workload(job->workload);
	if (!err && kb_program_file(job->workload)) /* parsed once, here */
		err = kb_program_load(job->workload, job->program, sizeof(job->program));
	if (!err)
		err = kb_cli_build_config(&job->config, &cli.m, NULL, 0);
	if (!err)
		job->max_frame = npu_max_frame(job);
	if (!err)
		err = check_trace_ranks(job);
	if (!err)
		err = kb_check_inproc(job);
	/* model plug-ins loaded in a short-lived child: RT_EPEER if one crashes */
	if (!err)
		err = kb_models_preflight(&job->config);
	*have_hosts = cli.m.hosts != NULL;
	if (!err)
		err = spmd_options(&cli.m, spmd);
	if (!err && cli.m.hosts) {
		hosts->agent_timeout_s = cli.m.agent_timeout_s;
		err = kb_hosts_load(cli.m.hosts, hosts);
		if (!err)
			err = kb_hosts_check(hosts, job);
		for (uint32_t r = 0; !err && r < hosts->n_ranks; r++)
			job->host_of_rank[r] = (uint8_t)hosts->host_of_rank[r];
	}
	return kb_opts_usage(err);
}

void kb_cli_run_usage(FILE *out)
{
	kb_opts_help(&run_command, out);
}
