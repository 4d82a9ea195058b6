/* model.c — finding an engine model by name or loading it from a plug-in,
 * and binding it to its state. */
#include "eng.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static const struct eng_model_ops *const builtins[] = {
	&eng_dma_linear_model,
	&eng_gemm_systolic_model,
	&eng_gemm_roofline_model,
	&eng_math_simd_model,
};

#define N_BUILTINS (sizeof(builtins) / sizeof(builtins[0]))

static bool is_plugin_path(const char *s)
{
	size_t n = strlen(s);

	return strchr(s, '/') || (n >= 3 && strcmp(s + n - 3, ".so") == 0);
}

static enum rt_err find_builtin(enum eng_class cls, const char *name,
				const struct eng_model_ops **out)
{
	for (size_t i = 0; i < N_BUILTINS; i++) {
		if (builtins[i]->engine == cls
		    && strcmp(builtins[i]->name, name) == 0) {
			*out = builtins[i];
			return RT_EOK;
		}
	}
	return rt_fail(RT_ENOTFOUND,
		       "%s model '%s' is not built in (dma: linear; gemm: systolic, roofline; math: simd) and is not a plug-in path (needs a '/' or a .so suffix)",
		       eng_class_name(cls), name);
}

/* Checks that a plug-in's table is complete and of the right class. */
static enum rt_err plugin_validate(enum eng_class cls, const char *path,
				   const struct eng_model_ops *ops)
{
	if (ops->abi != ENG_MODEL_ABI)
		return rt_fail(RT_ECONFIG,
			       "%s model plug-in %s: ABI %u, this build expects %u",
			       eng_class_name(cls), path, ops->abi,
			       ENG_MODEL_ABI);
	if (ops->engine != cls)
		return rt_fail(RT_ECONFIG,
			       "%s model plug-in %s models a %s engine, not %s",
			       eng_class_name(cls), path,
			       eng_class_name(ops->engine), eng_class_name(cls));
	if (!ops->name || !ops->latency || !ops->execute)
		return rt_fail(RT_ECONFIG,
			       "%s model plug-in %s: name, latency and execute are required",
			       eng_class_name(cls), path);
	return RT_EOK;
}

static enum rt_err load_plugin(enum eng_class cls, const char *path,
			       const struct eng_model_ops **out, void **dl)
{
	const struct eng_model_ops *ops;
	enum rt_err err;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return rt_fail(RT_ENOTFOUND, "%s model plug-in: %s",
			       eng_class_name(cls), dlerror());
	ops = dlsym(h, ENG_PLUGIN_SYMBOL);
	if (!ops) {
		dlclose(h);
		return rt_fail(RT_ENOTFOUND,
			       "%s model plug-in %s exports no '%s' (const struct eng_model_ops)",
			       eng_class_name(cls), path, ENG_PLUGIN_SYMBOL);
	}
	err = plugin_validate(cls, path, ops);
	if (err) {
		dlclose(h);
		return err;
	}
	*out = ops;
	*dl = h;
	return RT_EOK;
}

enum rt_err eng_model_find(enum eng_class cls, const char *name_or_path,
			   const struct eng_model_ops **out, void **dl)
{
	*dl = NULL;
	if (is_plugin_path(name_or_path))
		return load_plugin(cls, name_or_path, out, dl);
	return find_builtin(cls, name_or_path, out);
}

void eng_model_unload(void *dl)
{
	if (dl)
		dlclose(dl);
}

enum rt_err eng_model_init(struct eng_model *m, enum eng_class cls,
			   const char *name_or_path,
			   const struct rt_config *cfg)
{
	const struct eng_model_ops *ops;
	void *dl;
	enum rt_err err = eng_model_find(cls, name_or_path, &ops, &dl);

	memset(m, 0, sizeof(*m));
	if (err)
		return err;
	m->state = calloc(1, ops->state_size ? ops->state_size : 1);
	if (!m->state) {
		eng_model_unload(dl);
		return rt_fail(RT_ENOMEM, "%s model '%s': no memory for state",
			       eng_class_name(cls), ops->name);
	}
	m->ops = ops;
	m->dl = dl;
	err = ops->init ? ops->init(m->state, cfg) : RT_EOK;
	if (err) {
		m->ops = NULL; /* init failed: no fini */
		free(m->state);
		eng_model_unload(dl);
		memset(m, 0, sizeof(*m));
	}
	return err;
}

void eng_model_release(struct eng_model *m)
{
	if (m->ops && m->ops->fini)
		m->ops->fini(m->state);
	free(m->state);
	eng_model_unload(m->dl);
	memset(m, 0, sizeof(*m));
}

enum rt_err eng_model_latency(const struct eng_model *m,
			      const Kb__Stage *stage, uint64_t *cycles)
{
	return m->ops->latency(m->state, stage, cycles);
}

enum rt_err eng_model_execute(struct eng_model *m, const Kb__Stage *stage,
			      const struct eng_memory *mem)
{
	return m->ops->execute(m->state, stage, mem);
}
