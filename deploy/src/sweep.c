/* sweep.c — `kernbench sweep`: the command line, the points and their
 * folders (sweep.h). */
#include "sweep.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_env.h"
#include "hosts.h"
#include "launcher.h"
#include "rt/buf.h"
#include "rt/config_doc.h"
#include "rt/infile.h"
#include "rt/json.h"

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
	      "  --task I/N | --task auto this process runs points p with p %% N == I: one\n"
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
	optind = 1;
	opterr = 0;
	while (!err && (id = getopt_long(argc, argv, "", table, &index)) != -1) {
		if (id == SW_HELP) {
			err = RT_EINTERRUPTED;
			break;
		}
		if (id == '?')
			err = rt_fail(RT_EUSAGE, "sweep: unknown or incomplete option '%s' (see "
				      "`kernbench sweep --help`)", argv[optind - 1]);
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

/* ---------------------------------------------------------------- points */

static bool fixed_has(const struct kb_sweep_spec *spec, const char *opt)
{
	for (size_t i = 0; i < spec->n_fixed; i++)
		if (spec->fixed[i] && !strcmp(spec->fixed[i], opt))
			return true;
	return false;
}

void kb_sweep_point_dir(const struct kb_sweep *s, const struct kb_point *p, char *path,
			size_t cap)
{
	snprintf(path, cap, "%s/points/%s", s->out, p->hash);
}

/* `run WORKLOAD FIXED... AXES... DEFAULTS... --out OUT/points/HASH --quiet`
 * (the folder filled in once the hash is known). */
static enum rt_err point_argv(const struct kb_sweep *s, struct kb_point *p)
{
	const struct kb_sweep_spec *spec = &s->spec;
	size_t n = 0, cap = spec->n_fixed + 2 * spec->n_axes + 16;
	char **a = calloc(cap, sizeof(*a));
	char text[1400];

	if (!a)
		return rt_fail(RT_ENOMEM, "sweep: out of memory");
	p->argv = a;
	a[n++] = strdup("run");
	a[n++] = strdup(spec->workload);
	for (size_t i = 0; i < spec->n_fixed; i++)
		a[n++] = strdup(spec->fixed[i]);
	for (size_t x = 0; x < spec->n_axes; x++) {
		const struct kb_axis *ax = &spec->axes[x];

		a[n++] = strdup(kb_axis_option(ax->kind));
		if (ax->name[0])
			snprintf(text, sizeof(text), "%s=%s", ax->name, ax->values[p->value[x]]);
		else
			snprintf(text, sizeof(text), "%s", ax->values[p->value[x]]);
		a[n++] = strdup(text);
	}
	/* the cheapest deployment: results do not depend on it */
	if (!fixed_has(spec, "--colocate")) {
		a[n++] = strdup("--colocate");
		a[n++] = strdup("all");
	}
	if (!fixed_has(spec, "--trace")) {
		a[n++] = strdup("--trace");
		a[n++] = strdup("off");
	}
	a[n++] = strdup("--quiet");
	a[n] = NULL; /* then --transport (once resolved) and --out (once hashed) */
	for (size_t i = 0; i < n; i++)
		if (!a[i])
			return rt_fail(RT_ENOMEM, "sweep: out of memory");
	return RT_EOK;
}

static size_t argv_len(char **argv)
{
	size_t n = 0;

	while (argv[n])
		n++;
	return n;
}

/* "point 3 (dma.bytes_per_cycle=32, seq_kv=1024)" into `out`. */
static void point_name(const struct kb_sweep *s, const struct kb_point *p, char *out, size_t cap)
{
	size_t used = (size_t)snprintf(out, cap, "point %zu", p->index);

	for (size_t x = 0; x < s->spec.n_axes && used < cap; x++)
		used += (size_t)snprintf(out + used, cap - used, "%s%s=%s", x ? ", " : " (",
					 s->spec.axes[x].column, s->spec.axes[x].values[p->value[x]]);
	if (s->spec.n_axes && used < cap)
		snprintf(out + used, cap - used, ")");
}

/* What decides a point's results, as text: the hash of this names its
 * folder. Deployment options (colocation, transport, progress) are left
 * out: they never change a result. */
static enum rt_err identity(const struct rt_job *job, struct rt_buf *b)
{
	const char *names[RT_MAX_ARGS];
	uint32_t n = job->n_args;
	struct rt_json j;
	enum rt_err err;

	for (uint32_t i = 0; i < n; i++)
		names[i] = job->args[i].name;
	for (uint32_t i = 1; i < n; i++) /* insertion sort: at most 64 */
		for (uint32_t k = i; k > 0 && strcmp(names[k - 1], names[k]) > 0; k--) {
			const char *t = names[k];

			names[k] = names[k - 1];
			names[k - 1] = t;
		}
	err = rt_buf_printf(b, "workload %s\nmode %d\nseed %llu\ninputs %s\ntrace %d %d %d %llu %llu "
			    "%llu %d\n", job->workload, (int)job->mode, (unsigned long long)job->seed,
			    job->inputs_dir, job->trace_off, job->trace_windows, job->trace.no_flows,
			    (unsigned long long)job->trace.from_ps, (unsigned long long)job->trace.to_ps,
			    (unsigned long long)job->trace.ranks, (int)job->trace.format);
	for (uint32_t i = 0; !err && i < n; i++) {
		const char *v = rt_job_arg_str(job, names[i], "");

		err = rt_buf_printf(b, "arg %s=%s\n", names[i], v);
	}
	if (err)
		return err;
	rt_json_init(&j, b);
	rt_config_json(&j, NULL, &job->config);
	return rt_json_finish(&j);
}

/* Whether the point runs user code: a kernel object or a model plug-in
 * (a path, by the engines' rule), which the daemon threads of --transport
 * inproc do not load (ADR 0037): those points get one daemon process. */
static bool runs_user_code(const struct rt_job *job)
{
	const char *const models[] = { job->config.dma_model, job->config.gemm_model,
				       job->config.math_model, job->config.hbm_model };

	if (strchr(job->workload, ':'))
		return true;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		size_t len = strlen(models[i]);

		if (strchr(models[i], '/') || (len > 3 && !strcmp(models[i] + len - 3, ".so")))
			return true;
	}
	return false;
}

/* Resolves point `p` as `kernbench run` would (a usage error here stops
 * the sweep before anything runs) and names its folder. */
static enum rt_err resolve(struct kb_sweep *s, struct kb_point *p, struct rt_job *job)
{
	static struct kb_hosts hosts;
	bool have_hosts = false;
	size_t n = argv_len(p->argv);
	char **copy = calloc(n + 2, sizeof(*copy)), name[600], dir[1200];
	struct rt_buf text;
	enum rt_err err;

	if (!copy)
		return rt_fail(RT_ENOMEM, "sweep: out of memory");
	memcpy(copy, p->argv, n * sizeof(*copy));
	err = kb_cli_parse_run((int)n, copy, job, &hosts, &have_hosts);
	free(copy);
	if (err) {
		point_name(s, p, name, sizeof(name));
		return rt_fail(RT_EUSAGE, "sweep: %s: %s", name, rt_last_error());
	}
	rt_buf_init(&text);
	err = identity(job, &text);
	if (!err)
		snprintf(p->hash, sizeof(p->hash), "%016llx",
			 (unsigned long long)rt_hash(RT_HASH_INIT, text.data, text.len));
	rt_buf_release(&text);
	kb_sweep_point_dir(s, p, dir, sizeof(dir));
	/* the cheapest deployment that runs it: daemon threads, unless it
	 * runs user code (deployment never changes a result, nor the hash) */
	if (!err && !fixed_has(&s->spec, "--transport")) {
		p->argv[n++] = strdup("--transport");
		p->argv[n++] = strdup(runs_user_code(job) ? "ipc" : "inproc");
	}
	if (!err) {
		p->argv[n++] = strdup("--out");
		p->argv[n++] = strdup(dir);
	}
	for (size_t i = 0; !err && i < n; i++)
		if (!p->argv[i])
			err = rt_fail(RT_ENOMEM, "sweep: out of memory");
	return err;
}

static bool file_exists(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode);
}

static enum rt_err make_points(struct kb_sweep *s)
{
	static struct rt_job job; /* large; one at a time */
	enum rt_err err = kb_sweep_count(&s->spec, &s->n_points);
	char path[1400];

	if (!err && !(s->points = calloc(s->n_points, sizeof(*s->points))))
		err = rt_fail(RT_ENOMEM, "sweep: out of memory for %zu points", s->n_points);
	for (size_t i = 0; !err && i < s->n_points; i++) {
		struct kb_point *p = &s->points[i];

		p->index = i;
		p->first = i;
		p->value = calloc(s->spec.n_axes + 1, sizeof(*p->value));
		if (!p->value)
			return rt_fail(RT_ENOMEM, "sweep: out of memory");
		kb_sweep_point(&s->spec, i, p->value);
		err = point_argv(s, p);
		if (!err)
			err = resolve(s, p, &job);
		for (size_t k = 0; !err && k < i; k++)
			if (!strcmp(s->points[k].hash, p->hash)) {
				p->first = k;
				break;
			}
		/* the first point of a hash runs it, in the task of its index */
		p->mine = p->first == i && i % s->tasks == s->task;
		snprintf(path, sizeof(path), "%s/points/%s/summary.json", s->out, p->hash);
		p->done = !err && file_exists(path);
	}
	return err;
}

static enum rt_err make_dirs(const struct kb_sweep *s)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s/points", s->out);
	for (char *c = path + 1; *c; c++)
		if (*c == '/') {
			*c = '\0';
			mkdir(path, 0755); /* the last mkdir reports */
			*c = '/';
		}
	if (mkdir(path, 0755) && errno != EEXIST)
		return rt_fail(RT_EIO, "sweep: cannot create %s: %s", path, strerror(errno));
	return RT_EOK;
}

static void release(struct kb_sweep *s)
{
	for (size_t i = 0; s->points && i < s->n_points; i++) {
		for (char **a = s->points[i].argv; a && *a; a++)
			free(*a);
		free(s->points[i].argv);
		free(s->points[i].value);
	}
	free(s->points);
	kb_sweep_spec_release(&s->spec);
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
	err = parse(&s, argc, argv);
	if (err == RT_EINTERRUPTED) {
		sweep_usage(stdout);
		release(&s);
		return 0;
	}
	if (!err)
		err = make_points(&s);
	if (!err)
		err = make_dirs(&s);
	n = err ? -1 : readlink("/proc/self/exe", s.exe, sizeof(s.exe) - 1);
	if (!err && n <= 0)
		err = rt_fail(RT_EIO, "sweep: cannot find this program (/proc/self/exe): %s",
			      strerror(errno));
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		release(&s);
		return err == RT_EUSAGE || err == RT_EINVAL || err == RT_ECONFIG ||
		       err == RT_ENOTFOUND ? 2 : 1;
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
	release(&s);
	if (err == RT_EINTERRUPTED)
		return 130;
	return err || any_failed ? 1 : 0;
}
