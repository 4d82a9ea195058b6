/* cli.c — command-line parsing shared by the launcher and its daemons. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "rt/config.h"
#include "workloads.h"

void kb_cli_usage(FILE *out)
{
	fputs("usage: kernbench <command> [options]\n"
	      "\n"
	      "commands:\n"
	      "  run WORKLOAD [options]   run a workload (see `kernbench run --help`)\n"
	      "  list                     list built-in workloads and kernels\n"
	      "  config                   print every configuration key, default and unit\n"
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
	      "                           daemon as a thread of this process\n"
	      "  --colocate C             none | pe | rank | all (default none): components per\n"
	      "                           daemon; changes speed, never results\n"
	      "  --mode M                 timing | data (default timing); data also moves and\n"
	      "                           computes real bytes\n"
	      "  --ranks R, --pes P       machine size (default from config: 1 rank, 8 PEs)\n"
	      "  --seed N                 seed of every random stream (default 1)\n"
	      "  --arg name=value         workload argument (repeatable)\n"
	      "  --set key=value          configuration override (repeatable; `kernbench config`)\n"
	      "  --config FILE.yaml       configuration file (deploy/configs/default.yaml)\n"
	      "  --inputs DIR             input tensors (.npy) for kernels that take them\n"
	      "  --trace on|off           write trace.json (default on)\n"
	      "  --trace-windows          add lockstep window counters to trace.json (their\n"
	      "                           timing depends on --colocate, so off by default)\n"
	      "  --trace-window START:END only events in [START, END] simulated us (END may\n"
	      "                           be empty: to the end)\n"
	      "  --trace-ranks LIST       only these ranks, e.g. 0,2-3\n"
	      "  --trace-flows on|off     message slices and arrows (default on)\n"
	      "  --trace-format F         json (trace.json), json.gz (trace.json.gz) or\n"
	      "                           perfetto (trace.pftrace, protobuf); all open in Perfetto\n"
	      "  --quiet                  no report on stdout, no progress on stderr\n"
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
	a = &job->args[job->n_args++];
	snprintf(a->name, sizeof(a->name), "%.*s", (int)(eq - text), text);
	snprintf(a->value, sizeof(a->value), "%s", eq + 1);
	return RT_EOK;
}

static enum rt_err parse_u32(const char *opt, const char *text, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(text, &end, 10);

	if (end == text || *end || text[0] == '-' || v == 0 || v > 64)
		return rt_fail(RT_EINVAL, "%s '%s': expected a number from 1 to 64", opt, text);
	*out = (uint32_t)v;
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
	OPT_HELP,
};

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
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

/* Options that shape the machine are applied after --config and --set. */
struct machine_flags {
	uint32_t ranks;
	uint32_t pes;
	const char *config;
	const char *sets[RT_MAX_ARGS];
	uint32_t n_sets;
};

static enum rt_err apply_option(struct rt_job *job, struct machine_flags *m, int id,
				const char *val)
{
	char *end;

	switch (id) {
	case OPT_OUT: snprintf(job->out_dir, sizeof(job->out_dir), "%s", val); return RT_EOK;
	case OPT_TRANSPORT: return rt_transport_parse(val, &job->transport);
	case OPT_COLOCATE: return rt_colocate_parse(val, &job->colocate);
	case OPT_MODE: return parse_mode(val, &job->mode);
	case OPT_RANKS: return parse_u32("--ranks", val, &m->ranks);
	case OPT_PES: return parse_u32("--pes", val, &m->pes);
	case OPT_SEED:
		job->seed = strtoull(val, &end, 0);
		if (end == val || *end || val[0] == '-')
			return rt_fail(RT_EINVAL, "--seed '%s': expected an unsigned integer", val);
		return RT_EOK;
	case OPT_ARG: return parse_arg(job, val);
	case OPT_SET:
		if (m->n_sets == RT_MAX_ARGS)
			return rt_fail(RT_EINVAL, "more than %d --set options", RT_MAX_ARGS);
		m->sets[m->n_sets++] = val;
		return RT_EOK;
	case OPT_CONFIG: m->config = val; return RT_EOK;
	case OPT_INPUTS: snprintf(job->inputs_dir, sizeof(job->inputs_dir), "%s", val); return RT_EOK;
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
	default: return rt_fail(RT_EINVAL, "unknown option (see `kernbench run --help`)");
	}
}

static enum rt_err build_config(struct rt_job *job, const struct machine_flags *m)
{
	enum rt_err err = RT_EOK;

	rt_config_defaults(&job->config);
	if (m->config)
		err = rt_config_load_file(&job->config, m->config);
	for (uint32_t i = 0; !err && i < m->n_sets; i++)
		err = rt_config_set(&job->config, m->sets[i]);
	if (m->ranks)
		job->config.ranks = m->ranks;
	if (m->pes)
		job->config.pes = m->pes;
	return err ? err : rt_config_validate(&job->config);
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

enum rt_err kb_cli_parse_run(int argc, char **argv, struct rt_job *job)
{
	struct machine_flags m = { 0 };
	enum rt_err err = RT_EOK;
	int id;

	job_defaults(job);
	if (argc < 1 || argv[0][0] == '-') {
		if (argc >= 1 && !strcmp(argv[0], "--help"))
			return RT_EINTERRUPTED; /* caller prints help */
		return rt_fail(RT_EINVAL, "run: missing WORKLOAD (see `kernbench list`)");
	}
	snprintf(job->workload, sizeof(job->workload), "%s", argv[0]);
	optind = 1;
	opterr = 0;
	while (!err && (id = getopt_long(argc, argv, "+", run_options, NULL)) != -1) {
		if (id == OPT_HELP)
			return RT_EINTERRUPTED;
		if (id == '?')
			return rt_fail(RT_EINVAL, "run: unknown or incomplete option '%s' (see "
				       "`kernbench run --help`)", argv[optind - 1]);
		err = apply_option(job, &m, id, optarg);
	}
	if (!err && optind < argc)
		err = rt_fail(RT_EINVAL, "run: unexpected argument '%s'", argv[optind]);
	if (!err && !job->out_dir[0])
		snprintf(job->out_dir, sizeof(job->out_dir), "out/%.200s",
			 strrchr(job->workload, ':') ? strrchr(job->workload, ':') + 1 : job->workload);
	return err ? err : build_config(job, &m);
}

enum rt_err kb_job_topology(const struct rt_job *job, struct rt_topology *topo)
{
	struct kb_workload w;
	enum rt_err err = kb_workload_find(job->workload, &w);

	rt_topology_init(topo);
	if (!err)
		err = w.build(job, topo);
	if (!err)
		err = rt_topology_place(topo, job->colocate);
	return err;
}
