/* sweep.c — `kernbench sweep`: its command line and the run of it
 * (sweep.h). */
#include "sweep.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_env.h"
#include "cli.h"
#include "opts.h"
#include "rt/buf.h"
#include "rt/infile.h"

static void sweep_usage(FILE *out)
{
	fputs("usage: kernbench sweep WORKLOAD [axes] [options] [run options]\n"
	      "\n"
	      "Runs WORKLOAD at every point of the axes, each as `kernbench run` in\n"
	      "OUT/points/HASH (HASH: of the point's resolved configuration, so a sweep\n"
	      "run again resumes and a repeated point runs once), and writes\n"
	      "OUT/results.csv (a row per point) and OUT/sweep.png.\n"
	      "\n"
	      "axes (LIST: v1,v2,... with ranges LO:HI:STEP and LO:HI:xF; \\, is a comma):\n"
	      "  --set KEY=LIST           a configuration key (`kernbench config`)\n"
	      "  --arg NAME=LIST          a workload argument\n"
	      "  --machine LIST           machine presets (`run --machine`)\n"
	      "  --pes LIST, --ranks LIST, --seed LIST, --mode LIST\n"
	      "  --zip                    advance the lists together (same lengths) instead\n"
	      "                           of crossing them (the default: a grid)\n"
	      "  --file SWEEP.yaml        axes and options from a file (docs/exploring.md)\n"
	      "\n"
	      "options:\n"
	      "  --out DIR                the sweep folder (default out/sweep-WORKLOAD)\n"
	      "  --jobs N                 points run at once (default: the cores here)\n"
	      "  --task I/N | --task auto this process runs points p with p % N == I: one\n"
	      "                           task of a Slurm job array or an mpirun job (auto:\n"
	      "                           SLURM_ARRAY_TASK_ID, OMPI_COMM_WORLD_RANK, PMIX_RANK,\n"
	      "                           SLURM_PROCID); the task that finds every point done\n"
	      "                           writes results.csv, and running the sweep again\n"
	      "                           gathers it\n"
	      "  --objectives A[,B]       results.csv columns to plot (default latency_ps;\n"
	      "                           two: their Pareto front, both minimised)\n"
	      "  --plot on|off            draw OUT/sweep.png (default on)\n"
	      "  --progress P             auto | bar | plain | off\n"
	      "  --quiet                  no progress and no summary line\n"
	      "\n"
	      "Any other `run` option (--config, --inputs, --trace, --colocate, ...) is\n"
	      "passed to every point. Points run with --colocate all --transport inproc\n"
	      "(ipc for a kernel object or model plug-in) --trace off unless told\n"
	      "otherwise: the results do not depend on it.\n"
	      "\n"
	      "Exit status: 0 every point succeeded, 1 a point failed (its row in\n"
	      "results.csv says why), 2 usage error, 130 interrupted.\n",
	      out);
}

enum sweep_opt {
	SW_OUT = 2000, SW_JOBS, SW_ZIP, SW_FILE, SW_TASK, SW_OBJECTIVES, SW_PLOT, SW_PROGRESS,
	SW_QUIET, SW_HELP, SW_MACHINE,
	SW_RUN = 3000, /* + index into the run option table */
};

static const struct option sweep_options[] = {
	{ "out", required_argument, NULL, SW_OUT },
	{ "jobs", required_argument, NULL, SW_JOBS },
	{ "zip", no_argument, NULL, SW_ZIP },
	{ "file", required_argument, NULL, SW_FILE },
	{ "task", required_argument, NULL, SW_TASK },
	{ "objectives", required_argument, NULL, SW_OBJECTIVES },
	{ "plot", required_argument, NULL, SW_PLOT },
	{ "progress", required_argument, NULL, SW_PROGRESS },
	{ "quiet", no_argument, NULL, SW_QUIET },
	{ "help", no_argument, NULL, SW_HELP },
	{ "machine", required_argument, NULL, SW_MACHINE },
};
#define N_SWEEP_OPTIONS (sizeof(sweep_options) / sizeof(sweep_options[0]))

/* Run options that are axes when given a list. */
static const struct {
	const char *name;
	enum kb_axis_kind kind;
} axis_options[] = {
	{ "set", KB_AXIS_SET }, { "arg", KB_AXIS_ARG }, { "pes", KB_AXIS_PES },
	{ "ranks", KB_AXIS_RANKS }, { "seed", KB_AXIS_SEED }, { "mode", KB_AXIS_MODE },
};
/* Run options a sweep cannot pass to its points. */
static const char *const refused[] = { "from", "hosts", "agent-timeout" };

/* The sweep's options, then every run option it does not take itself. */
static struct option *option_table(void)
{
	const struct option *run = kb_cli_run_option_table();
	size_t n_run = 0, n = 0;
	struct option *t;

	while (run[n_run].name)
		n_run++;
	t = calloc(N_SWEEP_OPTIONS + n_run + 1, sizeof(*t));
	if (!t)
		return NULL;
	memcpy(t, sweep_options, sizeof(sweep_options));
	n = N_SWEEP_OPTIONS;
	for (size_t i = 0; i < n_run; i++) {
		bool own = false;

		for (size_t k = 0; k < N_SWEEP_OPTIONS && !own; k++)
			own = !strcmp(sweep_options[k].name, run[i].name);
		if (own)
			continue;
		t[n] = run[i];
		t[n].flag = NULL;
		t[n++].val = SW_RUN + (int)i;
	}
	return t;
}

static enum rt_err parse_task(struct kb_sweep *s, const char *text)
{
	struct kb_agent_index ix;
	unsigned long long i, n;
	char extra;
	enum rt_err err;

	if (strcmp(text, "auto")) {
		if (sscanf(text, "%llu/%llu%c", &i, &n, &extra) != 2 || !n || i >= n || n > UINT32_MAX)
			return rt_fail(RT_EUSAGE, "sweep --task '%.40s': expected I/N with 0 <= I < N, "
				       "or auto", text);
		s->task = (uint32_t)i;
		s->tasks = (uint32_t)n;
		s->task_source = "--task";
		return RT_EOK;
	}
	/* a Slurm job array: each task one index of MIN..MAX (step STEP) */
	if (getenv("SLURM_ARRAY_TASK_ID")) {
		const char *id = getenv("SLURM_ARRAY_TASK_ID"), *min = getenv("SLURM_ARRAY_TASK_MIN");
		const char *count = getenv("SLURM_ARRAY_TASK_COUNT");
		const char *step = getenv("SLURM_ARRAY_TASK_STEP");
		uint64_t vid, vmin = 0, vcount, vstep = 1;

		if (rt_parse_u64(id, 0, UINT32_MAX, &vid) ||
		    (min && rt_parse_u64(min, 0, vid, &vmin)) ||
		    (step && rt_parse_u64(step, 1, UINT32_MAX, &vstep)) || !count ||
		    rt_parse_u64(count, 1, UINT32_MAX, &vcount) || (vid - vmin) / vstep >= vcount)
			return rt_fail(RT_EUSAGE, "sweep --task auto: SLURM_ARRAY_TASK_ID=%.20s, _MIN=%.20s, "
				       "_STEP=%.20s, _COUNT=%.20s do not give an index below the count",
				       id, min ? min : "(unset)", step ? step : "(unset)",
				       count ? count : "(unset)");
		s->task = (uint32_t)((vid - vmin) / vstep);
		s->tasks = (uint32_t)vcount;
		s->task_source = "SLURM_ARRAY_TASK_ID";
		return RT_EOK;
	}
	err = kb_agent_env_index(getenv, &ix);
	if (err == RT_ENOTFOUND)
		return rt_fail(RT_EUSAGE, "sweep --task auto: none of SLURM_ARRAY_TASK_ID, "
			       "OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID is set (give --task I/N)");
	if (err)
		return rt_fail(RT_EUSAGE, "sweep --task auto: %s", rt_last_error());
	if (!ix.world_size)
		return rt_fail(RT_EUSAGE, "sweep --task auto: %s says the index but no task count "
			       "(give --task I/N)", ix.source);
	s->task = ix.index;
	s->tasks = ix.world_size;
	s->task_source = ix.source;
	return RT_EOK;
}

static enum rt_err parse_objectives(struct kb_sweep *s, const char *text)
{
	char **v;
	size_t n;
	enum rt_err err = kb_sweep_values(text, "sweep --objectives", &v, &n, NULL);

	if (!err && n > 2)
		err = rt_fail(RT_EUSAGE, "sweep --objectives: at most two columns, got %zu", n);
	for (size_t i = 0; i < n; i++) {
		if (!err && strlen(v[i]) >= sizeof(s->spec.objectives[0]))
			err = rt_fail(RT_EUSAGE, "sweep --objectives: '%.40s...' is too long", v[i]);
		if (!err)
			snprintf(s->spec.objectives[i], sizeof(s->spec.objectives[i]), "%s", v[i]);
		free(v[i]);
	}
	free(v);
	if (!err)
		s->spec.n_objectives = (unsigned)n;
	return err;
}

static enum rt_err load_file(struct kb_sweep *s, const char *path)
{
	struct rt_buf text;
	enum rt_err err;

	rt_buf_init(&text);
	err = rt_infile_read(path, "sweep file", 1u << 20, true, &text);
	if (err)
		err = rt_fail(RT_EUSAGE, "%s", rt_last_error());
	else
		err = kb_sweep_file_parse(&s->spec, text.data ? text.data : "", text.len, path);
	rt_buf_release(&text);
	return err;
}

/* A run option for every point, or an axis. */
static enum rt_err run_option(struct kb_sweep *s, const struct option *o, const char *val)
{
	char name[80];

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (!strcmp(o->name, refused[i]))
			return rt_fail(RT_EUSAGE, "sweep: --%s cannot be given to a sweep's points",
				       o->name);
	for (size_t i = 0; i < sizeof(axis_options) / sizeof(axis_options[0]); i++)
		if (!strcmp(o->name, axis_options[i].name))
			return kb_sweep_add_axis(&s->spec, axis_options[i].kind, val);
	snprintf(name, sizeof(name), "--%s", o->name);
	return kb_sweep_add_fixed(&s->spec, name, o->has_arg ? val : NULL);
}

static enum rt_err apply(struct kb_sweep *s, const struct option *table, int id, int index,
			 const char *val, const char **file)
{
	uint64_t v;

	switch (id) {
	case SW_OUT:
		if (strlen(val) + 64 >= sizeof(s->out) || !val[0])
			return rt_fail(RT_EUSAGE, "sweep --out: the path is empty or too long");
		snprintf(s->out, sizeof(s->out), "%s", val);
		return RT_EOK;
	case SW_JOBS:
		if (rt_parse_u64(val, 1, 1024, &v))
			return rt_fail(RT_EUSAGE, "sweep --jobs '%.40s': expected 1 to 1024", val);
		s->jobs = (unsigned)v;
		return RT_EOK;
	case SW_ZIP: s->spec.zip = true; return RT_EOK;
	case SW_FILE: *file = val; return RT_EOK;
	case SW_TASK: return parse_task(s, val);
	case SW_OBJECTIVES: return parse_objectives(s, val);
	case SW_PLOT:
		if (strcmp(val, "on") && strcmp(val, "off"))
			return rt_fail(RT_EUSAGE, "sweep --plot '%.40s': expected on or off", val);
		s->plot = !strcmp(val, "on");
		return RT_EOK;
	case SW_PROGRESS:
		return rt_progress_parse(val, &s->progress) ? rt_fail(RT_EUSAGE, "sweep %s",
								      rt_last_error())
							    : RT_EOK;
	case SW_QUIET: s->quiet = true; return RT_EOK;
	case SW_MACHINE: return kb_sweep_add_axis(&s->spec, KB_AXIS_MACHINE, val);
	default:
		return run_option(s, &table[index], val);
	}
}

static unsigned cores(void)
{
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	return 1;
}

/* RT_EINTERRUPTED: --help. */
static enum rt_err parse(struct kb_sweep *s, int argc, char **argv)
{
	struct option *table = option_table();
	const char *file = NULL;
	enum rt_err err = table ? RT_EOK : rt_fail(RT_ENOMEM, "sweep: out of memory");
	int id, index;

	s->plot = true;
	s->tasks = 1;
	s->jobs = cores();
	/* -h/--help anywhere before `--` is help, as for every command (opts.h) */
	if (!err && kb_opts_wants_help(argc, argv)) {
		free(table);
		return RT_EINTERRUPTED;
	}
	optind = 1;
	opterr = 0;
	while (!err && (id = getopt_long(argc, argv, "", table, &index)) != -1) {
		if (id == SW_HELP) {
			err = RT_EINTERRUPTED;
			break;
		}
		if (id == '?') /* ambiguous, unknown or a value missing: opts.c's lines */
			err = kb_opts_getopt_refused("sweep", table, argv[optind - 1]);
		else
			err = apply(s, table, id, index, optarg, &file);
	}
	free(table);
	if (!err && file)
		err = load_file(s, file);
	if (!err && optind < argc && s->spec.workload[0] && strcmp(s->spec.workload, argv[optind]))
		err = rt_fail(RT_EUSAGE, "sweep: WORKLOAD %s, but the sweep file names %s",
			      argv[optind], s->spec.workload);
	if (!err && optind < argc)
		snprintf(s->spec.workload, sizeof(s->spec.workload), "%s", argv[optind]);
	if (!err && optind + 1 < argc)
		err = rt_fail(RT_EUSAGE, "sweep: unexpected argument '%s' after WORKLOAD",
			      argv[optind + 1]);
	if (!err && !s->spec.workload[0])
		err = rt_fail(RT_EUSAGE, "sweep: missing WORKLOAD (see `kernbench list`)");
	if (!err && !s->out[0]) {
		const char *w = strrchr(s->spec.workload, ':') ? strrchr(s->spec.workload, ':') + 1
							       : s->spec.workload;

		snprintf(s->out, sizeof(s->out), "out/sweep-%.200s", w);
	}
	return err;
}

static void summary_line(const struct kb_sweep *s, bool complete)
{
	size_t ran = 0, reused = 0, failed = 0, others = 0;

	for (size_t i = 0; i < s->n_points; i++) {
		const struct kb_point *p = &s->points[i];

		if (p->first != i)
			continue;
		failed += p->failed;
		ran += p->mine && p->wall_s > 0 && !p->failed;
		reused += p->done && !(p->mine && p->wall_s > 0);
		others += !p->mine && !p->done;
	}
	fprintf(stderr, "kernbench sweep: %zu points: %zu run, %zu already done, %zu failed%s",
		s->n_points, ran, reused, failed, others ? "" : "\n");
	if (others)
		fprintf(stderr, ", %zu for other tasks\n", others);
	if (complete)
		fprintf(stderr, "  results %s/results.csv%s\n", s->out,
			s->plotted ? ", plot sweep.png" : "");
	else
		fprintf(stderr, "  results.csv is written when every point is done (run the same "
			"sweep again to gather them)\n");
}

int kb_sweep_main(int argc, char **argv)
{
	static struct kb_sweep s;
	bool complete = false, any_failed = false;
	ssize_t n;
	enum rt_err err;

	memset(&s, 0, sizeof(s));
	kb_sweep_spec_init(&s.spec);
	err = kb_opts_usage(parse(&s, argc, argv)); /* what the command line named */
	if (err == RT_EINTERRUPTED) {
		sweep_usage(stdout);
		kb_sweep_release(&s);
		return 0;
	}
	if (!err)
		err = kb_sweep_make_points(&s);
	if (!err)
		err = kb_sweep_make_dirs(&s);
	n = err ? -1 : readlink("/proc/self/exe", s.exe, sizeof(s.exe) - 1);
	if (!err && n <= 0)
		err = rt_fail(RT_EIO, "sweep: cannot find this program (/proc/self/exe): %s",
			      strerror(errno));
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		kb_sweep_release(&s);
		return rt_exit_status(err);
	}
	s.exe[n] = '\0';
	for (size_t i = 0; i < s.n_points && !s.plotter; i++)
		if (s.points[i].mine && !s.points[i].done)
			kb_sweep_plot_early(&s); /* points will run: the plot imports meanwhile */
	err = kb_sweep_run(&s);
	if (!err || err == RT_EINTERRUPTED) {
		enum rt_err rerr = kb_sweep_results(&s, &complete);

		if (!err)
			err = rerr;
	}
	for (size_t i = 0; i < s.n_points; i++)
		any_failed = any_failed || s.points[s.points[i].first].failed;
	if (err && err != RT_EINTERRUPTED)
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
	if (!s.quiet)
		summary_line(&s, complete);
	kb_sweep_release(&s);
	if (err == RT_EINTERRUPTED)
		return 130;
	return err || any_failed ? 1 : 0;
}
