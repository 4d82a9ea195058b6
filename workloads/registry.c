/* registry.c — workload lookup: built-ins first, then kernels. */
#include <string.h>

#include "eng.h"
#include "rt/config.h"
#include "tl_host.h"
#include "workloads.h"

static const struct kb_workload builtins[] = {
	{ "traffic", "synthetic lockstep fixture: --arg components=K --arg messages=M "
		     "[--arg tokens=T] [--ranks R]", kb_traffic_build },
};

enum rt_err kb_workload_find(const char *name, struct kb_workload *out)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (!strcmp(builtins[i].name, name)) {
			*out = builtins[i];
			return RT_EOK;
		}
	if (kb_program_file(name)) { /* a program's steps run on the PEs */
		out->name = name;
		out->summary = "program";
		out->build = kb_pe_build;
		return RT_EOK;
	}
	/* checked, not loaded: user code runs only inside daemons */
	if (tl_kernel_check(name) == RT_EOK) {
		out->name = name;
		out->summary = "kernel";
		out->build = kb_pe_build;
		return RT_EOK;
	}
	if (strchr(name, ':'))
		return RT_ENOTFOUND; /* tl_kernel_find said why */
	return rt_fail(RT_ENOTFOUND, "unknown workload '%s' (see `kernbench list`; a kernel in a "
		       "shared object is named path/lib.so:NAME)", name);
}

const char *kb_workload_suggest(const char *name)
{
	size_t n, best = 3; /* at most two edits away */
	const struct tl_kernel_info *k = tl_kernel_builtins(&n);
	const char *near = NULL;

	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (rt_edit_distance(name, builtins[i].name) < best) {
			best = rt_edit_distance(name, builtins[i].name);
			near = builtins[i].name;
		}
	for (size_t i = 0; i < n; i++)
		if (rt_edit_distance(name, k[i].name) < best) {
			best = rt_edit_distance(name, k[i].name);
			near = k[i].name;
		}
	return near;
}

void kb_workload_list(FILE *out)
{
	size_t n;
	const struct tl_kernel_info *k = tl_kernel_builtins(&n);

	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		fprintf(out, "  %-22s %s\n", builtins[i].name, builtins[i].summary);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %-22s %s\n", k[i].name, k[i].help);
}

const char *kb_job_shared_object(const struct rt_job *job)
{
	const struct rt_config *cfg = &job->config;
	const char *models[] = { cfg->dma_model, cfg->gemm_model, cfg->math_model, cfg->hbm_model };

	if (strchr(job->workload, ':'))
		return job->workload;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (eng_is_plugin_path(models[i]))
			return models[i];
	return NULL;
}

/* One engine class's settings, and whether the run has such an engine. */
static enum rt_err check_engine(const char *cls, bool present, const char *model,
				const char *def_model, const char *params,
				enum rt_err (*check)(const char *name, void *arg), void *arg,
				const char *workload)
{
	bool plugin = eng_is_plugin_path(model);

	if (!present && strcmp(model, def_model))
		return rt_fail(RT_EUSAGE, "%s.model=%.200s: workload %.200s has no %s engine, so the "
			       "setting would do nothing", cls, model, workload, cls);
	if (params && !present && strcmp(params, "none"))
		return rt_fail(RT_EUSAGE, "%s.params=%.200s: workload %.200s has no %s engine, so "
			       "the setting would do nothing", cls, params, workload, cls);
	if (!present)
		return RT_EOK;
	if (params && !plugin && strcmp(params, "none"))
		return rt_fail(RT_EUSAGE, "%s.params=%.200s: only a plug-in model reads parameters, "
			       "and %s.model=%s is built in (its settings are %s.* keys: `kernbench "
			       "config`)", cls, params, cls, model, cls);
	return check(model, arg);
}

static enum rt_err check_engine_model(const char *name, void *arg)
{
	return eng_model_check(*(const enum eng_class *)arg, name);
}

static enum rt_err check_hbm_model(const char *name, void *arg)
{
	(void)arg;
	return eng_hbm_check(name);
}

enum rt_err kb_job_check_models(const struct rt_job *job, const struct rt_topology *topo)
{
	static const enum eng_class classes[] = { ENG_DMA, ENG_GEMM, ENG_MATH };
	const struct rt_config *cfg = &job->config;
	struct rt_config def;
	const char *models[] = { cfg->dma_model, cfg->gemm_model, cfg->math_model };
	const char *defaults[3], *params[] = { cfg->dma_params, cfg->gemm_params, cfg->math_params };
	bool present[3] = { false, false, false };
	enum rt_err err = RT_EOK;

	rt_config_defaults(&def);
	defaults[0] = def.dma_model;
	defaults[1] = def.gemm_model;
	defaults[2] = def.math_model;
	for (uint32_t id = 0; id < topo->n_components; id++)
		for (int k = 0; k < 3; k++)
			present[k] |= !strcmp(topo->components[id].ops->name, eng_class_name(classes[k]));
	for (int k = 0; !err && k < 3; k++)
		err = check_engine(eng_class_name(classes[k]), present[k], models[k], defaults[k],
				   params[k], check_engine_model, (void *)&classes[k],
				   job->workload);
	/* the rank memory serves the DMA engines */
	if (!err)
		err = check_engine("hbm", present[0], cfg->hbm_model, def.hbm_model, NULL,
				   check_hbm_model, NULL, job->workload);
	return err;
}
