/* sweep_points.c — a sweep's points: each one's `run` command line,
 * resolved by the run parser, named by the hash of what decides its
 * results, and its folder (sweep.h, ADR 0045). */
#include "sweep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hosts.h"
#include "cli.h"
#include "rt/buf.h"
#include "rt/config_doc.h"
#include "rt/json.h"

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
	err = kb_cli_parse_run((int)n, copy, job, &hosts, &have_hosts, NULL);
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

enum rt_err kb_sweep_make_points(struct kb_sweep *s)
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

enum rt_err kb_sweep_make_dirs(const struct kb_sweep *s)
{
	char path[1200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/points", s->out);
	for (char *c = path + 1; *c; c++)
		if (*c == '/') {
			*c = '\0';
			mkdir(path, 0755); /* the last mkdir reports */
			*c = '/';
		}
	if (mkdir(path, 0755) && errno != EEXIST)
		return rt_fail(RT_EIO, "sweep: cannot create %s: %s", path, strerror(errno));
	/* the points' folders and logs go in it: a link there (or a folder
	 * of another user) would put them, and their tidying, elsewhere */
	if (lstat(path, &st))
		return rt_fail(RT_EIO, "sweep: %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return rt_fail(RT_EUSAGE, "sweep: %.300s is %s, not a folder of this user; remove it "
			       "or give another --out", path,
			       S_ISLNK(st.st_mode)   ? "a link"
			       : S_ISDIR(st.st_mode) ? "another user's folder"
						     : "not a folder");
	return RT_EOK;
}

void kb_sweep_release(struct kb_sweep *s)
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

