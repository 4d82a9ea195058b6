/* cli.c — command-line parsing shared by the launcher and its daemons. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hosts.h"
#include "launcher.h"
#include "rt/config.h"
#include "workloads.h"

void kb_cli_usage(FILE *out)
{
	fputs("usage: kernbench <command> [options]\n"
	      "\n"
	      "commands:\n"
	      "  run WORKLOAD [options]   run a workload (see `kernbench run --help`)\n"
	      "  run --from DIR           rerun a result folder and check its digest\n"
	      "  sweep WORKLOAD [options] run many points (--set k=v1,v2 --arg n=lo:hi:x2 ...)\n"
	      "                           into results.csv and a plot (`kernbench sweep --help`)\n"
	      "  diff A B                 what differs between two result folders (exit 0 same,\n"
	      "                           1 different, 2 usage error)\n"
	      "  list                     list built-in workloads and kernels\n"
	      "  config [--machine NAME] [--config F]... [--set k=v]... [--format yaml|json|markdown]\n"
	      "                           print the effective configuration (loads back with\n"
	      "                           --config; a preset's sources as comments); markdown:\n"
	      "                           the reference table\n"
	      "  keygen --out FILE        write the run's CURVE keys (mode 0600, never\n"
	      "                           overwrites); pass them with `run --keys FILE`\n"
	      "  agent --coordinator tcp://ADDRESS:PORT [--index I] [--keys FILE]\n"
	      "                           run one host's ranks of a `run --hosts` (the index\n"
	      "                           from --index or OMPI_COMM_WORLD_RANK, PMIX_RANK,\n"
	      "                           SLURM_PROCID, JOB_COMPLETION_INDEX)\n"
	      "  --version                release and build commit\n"
	      "  plot OUT_DIR [options]   timeline and utilisation pictures of a run (PNG/SVG;\n"
	      "                           --window START:END, --arrows, --format svg)\n"
	      "  --help                   this text\n"
	      "\n"
	      "kernbench simulates NPU processing elements: one daemon per component\n"
	      "(kb-host, kb-sched, kb-dma, kb-gemm, kb-math) under a conservative lockstep\n"
	      "clock, deterministic to the byte. Outputs: summary.json, op_log.jsonl,\n"
	      "trace.json (open in Perfetto) and tensors as .npy in the output directory.\n",
	      out);
}

void kb_cli_run_usage(FILE *out)
{
	fputs("usage: kernbench run WORKLOAD [options]\n"
	      "\n"
	      "WORKLOAD is a built-in (`kernbench list`) or path/lib.so:NAME, a kernel\n"
	      "compiled against kernel_host/include/tl.h.\n"
	      "\n"
	      "  --out DIR                output directory (default out/WORKLOAD)\n"
	      "  --transport T            inproc | ipc | tcp (default ipc); inproc runs every\n"
	      "                           daemon as a thread of this process (with --hosts:\n"
	      "                           of its host's agent)\n"
	      "  --colocate C             none | pe | rank | host | all (default none):\n"
	      "                           components per daemon (host: one per --hosts host);\n"
	      "                           changes speed, never results\n"
	      "  --mode M                 timing | data (default timing); data also moves and\n"
	      "                           computes real bytes\n"
	      "  --ranks R, --pes P       machine size (default from config: 1 rank, 8 PEs)\n"
	      "  --seed N                 seed of every random stream (default 1)\n"
	      "  --arg name=value         workload argument (repeatable)\n"
	      "  --machine NAME           machine preset (deploy/configs/machines/NAME.yaml, or a\n"
	      "                           path to such a file); default trn2\n"
	      "  --set key=value          configuration override (repeatable; `kernbench config`)\n"
	      "  --config FILE.yaml       configuration file (repeatable, later files override\n"
	      "                           earlier ones; deploy/configs/default.yaml)\n"
	      "                           defaults < --machine preset < --config < --set < --ranks/--pes\n"
	      "  --inputs DIR             input tensors (.npy) for kernels that take them; an\n"
	      "                           existing folder, and a usage error for a kernel\n"
	      "                           that reads none\n"
	      "  --trace on|off           write trace.json (default on)\n"
	      "  --trace-windows          add lockstep window counters to trace.json (their\n"
	      "                           timing depends on --colocate, so off by default)\n"
	      "  --trace-window START:END only events in [START, END] simulated us (END may\n"
	      "                           be empty: to the end)\n"
	      "  --trace-ranks LIST       only these ranks, e.g. 0,2-3 (each must be in the run)\n"
	      "  --trace-flows on|off     message slices and arrows (default on)\n"
	      "  --trace-format F         json (trace.json), json.gz (trace.json.gz) or\n"
	      "                           perfetto (trace.pftrace, protobuf); all open in Perfetto\n"
	      "  --quiet                  no report on stdout, no progress on stderr\n"
	      "  --progress P             auto | bar | plain | off (default auto: a bar on a\n"
	      "                           terminal, else a line every few seconds once the\n"
	      "                           run is long)\n"
	      "  --from DIR               rerun exactly what result folder DIR recorded (its\n"
	      "                           summary.json; also --config DIR/summary.json without\n"
	      "                           WORKLOAD) and check the delivery digest matches\n"
	      "  --keys FILE              CURVE keys from `kernbench keygen` (tcp/ipc);\n"
	      "                           required when run.bind_host is not loopback\n"
	      "  --hosts FILE             ranks on several hosts: this process is only the\n"
	      "                           coordinator and waits for one `kernbench agent` per\n"
	      "                           host of FILE (deploy/README.md)\n"
	      "  --agent-timeout S        how long to wait for the agents (default 60)\n"
	      "\n"
	      "Options may come before or after WORKLOAD. Numbers are decimal digits only.\n"
	      "An --arg the kernel never asks for, or one whose value the kernel or the\n"
	      "workload refuses (out of range, not a number), is a usage error (exit 2; the\n"
	      "line lists the names it asks for or the range).\n"
	      "\n"
	      "Exit status: 0 success, 1 error (one line on stderr names what and where),\n"
	      "2 usage error, 130 interrupted.\n",
	      out);
}

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

static enum rt_err parse_number(const char *opt, const char *text, uint64_t min, uint64_t max,
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
	enum rt_err err = parse_number(opt, text, 1, 64, &v);

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

enum opt_id {
	OPT_OUT = 1, OPT_TRANSPORT, OPT_COLOCATE, OPT_MODE, OPT_RANKS, OPT_PES, OPT_SEED,
	OPT_ARG, OPT_SET, OPT_CONFIG, OPT_INPUTS, OPT_TRACE, OPT_TRACE_WINDOWS, OPT_QUIET,
	OPT_TRACE_WINDOW, OPT_TRACE_RANKS, OPT_TRACE_FLOWS, OPT_TRACE_FORMAT,
	OPT_KEYS, OPT_HOSTS, OPT_AGENT_TIMEOUT, OPT_MACHINE, OPT_HELP, OPT_FROM, OPT_PROGRESS,
};

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

static const struct option run_options[] = {
	{ "out", required_argument, NULL, OPT_OUT },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "colocate", required_argument, NULL, OPT_COLOCATE },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "ranks", required_argument, NULL, OPT_RANKS },
	{ "pes", required_argument, NULL, OPT_PES },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "arg", required_argument, NULL, OPT_ARG },
	{ "set", required_argument, NULL, OPT_SET },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "inputs", required_argument, NULL, OPT_INPUTS },
	{ "trace", required_argument, NULL, OPT_TRACE },
	{ "trace-windows", no_argument, NULL, OPT_TRACE_WINDOWS },
	{ "trace-window", required_argument, NULL, OPT_TRACE_WINDOW },
	{ "trace-ranks", required_argument, NULL, OPT_TRACE_RANKS },
	{ "trace-flows", required_argument, NULL, OPT_TRACE_FLOWS },
	{ "trace-format", required_argument, NULL, OPT_TRACE_FORMAT },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "keys", required_argument, NULL, OPT_KEYS },
	{ "hosts", required_argument, NULL, OPT_HOSTS },
	{ "agent-timeout", required_argument, NULL, OPT_AGENT_TIMEOUT },
	{ "machine", required_argument, NULL, OPT_MACHINE },
	{ "help", no_argument, NULL, OPT_HELP },
	/* handled before parsing (rerun.c rewrites --from into the options
	 * it stands for); listed so every reader of the table knows them */
	{ "from", required_argument, NULL, OPT_FROM },
	{ "progress", required_argument, NULL, OPT_PROGRESS },
	{ NULL, 0, NULL, 0 },
};

const struct option *kb_cli_run_option_table(void)
{
	return run_options;
}

#define MAX_CONFIGS 16

/* Options that shape the machine are applied after --config and --set. */
struct machine_flags {
	uint32_t ranks;
	uint32_t pes;
	const char *configs[MAX_CONFIGS]; /* loaded in order, each over the last */
	uint32_t n_configs;
	const char *sets[RT_MAX_ARGS];
	uint32_t n_sets;
	const char *hosts;        /* --hosts FILE */
	uint64_t agent_timeout_s; /* --agent-timeout S */
	const char *machine;      /* --machine NAME (the last one given) */
};

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

static enum rt_err apply_option(struct rt_job *job, struct machine_flags *m, int id,
				const char *val)
{
	switch (id) {
	case OPT_OUT: return parse_path("--out", val, job->result_dir, RT_PATH_MAX - OUT_DIR_SLACK);
	case OPT_TRANSPORT: return rt_transport_parse(val, &job->transport);
	case OPT_COLOCATE: return rt_colocate_parse(val, &job->colocate);
	case OPT_MODE: return parse_mode(val, &job->mode);
	case OPT_KEYS: return rt_keys_load(val, &job->keys);
	case OPT_RANKS: return parse_u32("--ranks", val, &m->ranks);
	case OPT_PES: return parse_u32("--pes", val, &m->pes);
	case OPT_SEED: return parse_number("--seed", val, 0, UINT64_MAX, &job->seed);
	case OPT_ARG: return parse_arg(job, val);
	case OPT_SET: return add_set(m, val);
	case OPT_CONFIG: return add_config(m, val);
	case OPT_INPUTS: return parse_inputs(val, job);
	case OPT_TRACE:
		if (strcmp(val, "on") && strcmp(val, "off"))
			return rt_fail(RT_EINVAL, "--trace '%s': expected on or off", val);
		job->trace_off = !strcmp(val, "off");
		return RT_EOK;
	case OPT_TRACE_WINDOWS: job->trace_windows = true; return RT_EOK;
	case OPT_TRACE_WINDOW: return rt_trace_parse_window(val, &job->trace);
	case OPT_TRACE_RANKS: return rt_trace_parse_ranks(val, &job->trace);
	case OPT_TRACE_FORMAT: return rt_trace_parse_format(val, &job->trace);
	case OPT_TRACE_FLOWS:
		if (strcmp(val, "on") && strcmp(val, "off"))
			return rt_fail(RT_EINVAL, "--trace-flows '%s': expected on or off", val);
		job->trace.no_flows = !strcmp(val, "off");
		return RT_EOK;
	case OPT_QUIET: job->quiet = true; return RT_EOK;
	case OPT_HOSTS: m->hosts = val; return RT_EOK;
	case OPT_MACHINE: m->machine = val; return RT_EOK;
	case OPT_AGENT_TIMEOUT:
		return parse_number("--agent-timeout", val, 1, 86400, &m->agent_timeout_s);
	case OPT_PROGRESS: return rt_progress_parse(val, &job->progress);
	case OPT_FROM:
		return rt_fail(RT_EINVAL, "--from %s: give it once, without WORKLOAD", val);
	default: return rt_fail(RT_EINVAL, "unknown option (see `kernbench run --help`)");
	}
}

/* defaults < the preset < each --config in order < each --set <
 * --ranks/--pes; the preset is --machine's, else the last one a file or a
 * --set names (rt/config.h). *preset_path (may be NULL) receives the
 * preset's file, "" when none was read. */
static enum rt_err build_config(struct rt_config *cfg, const struct machine_flags *m,
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
	for (size_t i = 0; i < sizeof(job->hbm_fds) / sizeof(job->hbm_fds[0]); i++)
		job->hbm_fds[i] = -1;
	for (size_t i = 0; i < sizeof(job->tcm_fds) / sizeof(job->tcm_fds[0]); i++)
		job->tcm_fds[i] = -1;
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

enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job, struct kb_hosts *hosts,
			     bool *have_hosts)
{
	struct machine_flags m = { 0 };
	enum rt_err err = RT_EOK;
	int id;

	/* argv[0] is the command ("run"); options and the one WORKLOAD may
	 * come in any order (GNU getopt permutes them) */
	job_defaults(job);
	optind = 1;
	opterr = 0;
	while (!err && (id = getopt_long(argc, argv, "", run_options, NULL)) != -1) {
		if (id == OPT_HELP)
			return RT_EINTERRUPTED;
		if (id == '?')
			return rt_fail(RT_EINVAL, "run: unknown or incomplete option '%s' (see "
				       "`kernbench run --help`)", argv[optind - 1]);
		err = apply_option(job, &m, id, optarg);
	}
	if (err)
		return err;
	if (optind >= argc)
		return rt_fail(RT_EINVAL, "run: missing WORKLOAD (see `kernbench list`)");
	if (optind + 1 < argc)
		return rt_fail(RT_EINVAL, "run: unexpected argument '%s' after WORKLOAD '%s'",
			       argv[optind + 1], argv[optind]);
	err = parse_path("WORKLOAD", argv[optind], job->workload, sizeof(job->workload));
	if (!err && !job->result_dir[0])
		default_out(job);
	if (!err)
		memcpy(job->out_dir, job->result_dir, sizeof(job->out_dir));
	if (!err)
		err = check_workload(job->workload);
	if (!err && kb_program_file(job->workload)) /* parsed once, here */
		err = kb_program_load(job->workload, job->program, sizeof(job->program));
	if (!err)
		err = build_config(&job->config, &m, NULL, 0);
	if (!err)
		err = kb_models_preflight(&job->config);
	if (!err)
		err = check_trace_ranks(job);
	*have_hosts = m.hosts != NULL;
	if (!err && m.hosts) {
		hosts->agent_timeout_s = m.agent_timeout_s;
		err = kb_hosts_load(m.hosts, hosts);
		if (!err)
			err = kb_hosts_check(hosts, job);
		for (uint32_t r = 0; !err && r < hosts->n_ranks; r++)
			job->host_of_rank[r] = (uint8_t)hosts->host_of_rank[r];
	} else if (!err && m.agent_timeout_s) {
		err = rt_fail(RT_EINVAL, "--agent-timeout needs --hosts FILE");
	}
	return err;
}

static const struct option config_options[] = {
	{ "machine", required_argument, NULL, OPT_MACHINE },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "set", required_argument, NULL, OPT_SET },
	{ "ranks", required_argument, NULL, OPT_RANKS },
	{ "pes", required_argument, NULL, OPT_PES },
	{ "format", required_argument, NULL, 'f' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

enum rt_err kb_cli_parse_config(int argc, char **argv, struct rt_config *cfg, int *format,
				char *preset_path, size_t cap)
{
	struct machine_flags m = { 0 };
	enum rt_err err = RT_EOK;
	int id;

	*format = 0;
	optind = 1;
	opterr = 0;
	while (!err && (id = getopt_long(argc, argv, "", config_options, NULL)) != -1) {
		if (id == OPT_HELP)
			return RT_EINTERRUPTED;
		if (id == '?')
			return rt_fail(RT_EINVAL, "config: unknown or incomplete option '%s' (see "
				       "`kernbench config --help`)", argv[optind - 1]);
		if (id == OPT_MACHINE)
			m.machine = optarg;
		else if (id == OPT_CONFIG)
			err = add_config(&m, optarg);
		else if (id == OPT_SET)
			err = add_set(&m, optarg);
		else if (id == OPT_RANKS)
			err = parse_u32("--ranks", optarg, &m.ranks);
		else if (id == OPT_PES)
			err = parse_u32("--pes", optarg, &m.pes);
		else if (!strcmp(optarg, "yaml") || !strcmp(optarg, "json") ||
			 !strcmp(optarg, "markdown"))
			*format = optarg[0] == 'y' ? 0 : optarg[0] == 'j' ? 1 : 2;
		else
			err = rt_fail(RT_EINVAL, "--format '%s': expected yaml, json or markdown",
				      optarg);
	}
	if (!err && optind < argc)
		err = rt_fail(RT_EINVAL, "config: unexpected argument '%s'", argv[optind]);
	return err ? err : build_config(cfg, &m, preset_path, cap);
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
	return err;
}
