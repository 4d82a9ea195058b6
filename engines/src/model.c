/* model.c — finding an engine model by name or loading it from a plug-in,
 * and binding it to its state. */
#include "eng.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct eng_model_ops *const builtins[] = {
	&eng_dma_linear_model,
	&eng_gemm_systolic_model,
	&eng_gemm_roofline_model,
	&eng_gemm_tensor_engine_model,
	&eng_math_simd_model,
};

#define N_BUILTINS (sizeof(builtins) / sizeof(builtins[0]))

const struct eng_model_ops *eng_model_builtin(size_t i)
{
	return i < N_BUILTINS ? builtins[i] : NULL;
}

bool eng_is_plugin_path(const char *s)
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
		       "%s model '%s' is not built in (dma: linear; gemm: systolic, roofline, tensor_engine; math: simd) and is not a plug-in path (needs a '/' or a .so suffix)",
		       eng_class_name(cls), name);
}

/* A plug-in path the launcher can vouch for without loading it. */
static enum rt_err plugin_file(const char *key, const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return rt_fail(RT_EINVAL, "%s=%.200s: %s", key, path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return rt_fail(RT_EINVAL, "%s=%.200s: not a regular file", key, path);
	return RT_EOK;
}

enum rt_err eng_model_check(enum eng_class cls, const char *name)
{
	const struct eng_model_ops *ops;
	char key[32];

	snprintf(key, sizeof(key), "%s.model", eng_class_name(cls));
	if (eng_is_plugin_path(name))
		return plugin_file(key, name);
	if (find_builtin(cls, name, &ops))
		return rt_fail(RT_EINVAL, "%s", rt_last_error());
	return RT_EOK;
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

/* The built-in model whose data effect a public-ABI plug-in keeps. */
static const struct eng_model_ops *default_builtin(enum eng_class cls)
{
	return cls == ENG_DMA ? &eng_dma_linear_model
	     : cls == ENG_GEMM ? &eng_gemm_systolic_model : &eng_math_simd_model;
}

static enum rt_err pub_validate(enum eng_class cls, const char *path,
				const struct kb_engine_plugin *p)
{
	/* ABI 2 plug-ins read a prefix of today's kb_stage_info, ABI 3 ones
	 * declare no parameters: both still fine */
	if (p->abi < 2 || p->abi > KB_ENGINE_PLUGIN_ABI)
		return rt_fail(RT_ECONFIG,
			       "%s model plug-in %s: plug-in ABI %u, this kernbench expects 2 to %u (rebuild it against this kernbench's kb_engine_plugin.h)",
			       eng_class_name(cls), path, p->abi, KB_ENGINE_PLUGIN_ABI);
	if ((int)p->engine != (int)cls)
		return rt_fail(RT_ECONFIG, "%s model plug-in %s models a %s engine, not %s",
			       eng_class_name(cls), path,
			       p->engine <= KB_ENGINE_MATH ? eng_class_name((enum eng_class)p->engine)
							   : "unknown",
			       eng_class_name(cls));
	if (!p->latency)
		return rt_fail(RT_ECONFIG, "%s model plug-in %s: latency is required",
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
	if (dlsym(h, KB_ENGINE_PLUGIN_SYMBOL)) { /* the public form: see eng_model_init */
		*out = default_builtin(cls);
		*dl = h;
		return RT_EOK;
	}
	ops = dlsym(h, ENG_PLUGIN_SYMBOL);
	if (!ops) {
		dlclose(h);
		return rt_fail(RT_ENOTFOUND,
			       "%s model plug-in %s exports neither '%s' (kb_engine_plugin.h) nor '%s'",
			       eng_class_name(cls), path, KB_ENGINE_PLUGIN_SYMBOL, ENG_PLUGIN_SYMBOL);
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
	if (eng_is_plugin_path(name_or_path))
		return load_plugin(cls, name_or_path, out, dl);
	return find_builtin(cls, name_or_path, out);
}

void eng_model_unload(void *dl)
{
	if (dl)
		dlclose(dl);
}

/* The engine classes a configuration names a model for, and that name. */
static const enum eng_class model_classes[] = { ENG_DMA, ENG_GEMM, ENG_MATH };

static const char *model_of(const struct rt_config *cfg, enum eng_class cls)
{
	return cls == ENG_DMA ? cfg->dma_model : cls == ENG_GEMM ? cfg->gemm_model
								  : cfg->math_model;
}

static const char *params_of(const struct rt_config *cfg, enum eng_class cls)
{
	return cls == ENG_DMA ? cfg->dma_params : cls == ENG_GEMM ? cfg->gemm_params
								   : cfg->math_params;
}

/* Splits "a=1,b=2" in place into name/value pairs ("none": no pairs). */
static enum rt_err split_params(enum eng_class cls, char *text,
				struct kb_plugin_param *out, size_t cap, size_t *n)
{
	*n = 0;
	if (!strcmp(text, "none"))
		return RT_EOK;
	for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
		char *eq = strchr(item, '=');

		if (!eq || eq == item || *n == cap)
			return rt_fail(RT_ECONFIG,
				       "%s.params: '%s' is not name=value (at most %zu, comma-separated)",
				       eng_class_name(cls), item, cap);
		*eq = '\0';
		out[(*n)++] = (struct kb_plugin_param){ item, eq + 1 };
	}
	return RT_EOK;
}

/* Binds a public-ABI plug-in: checks it, hands it its parameters. */
static enum rt_err pub_create(struct eng_model *m, enum eng_class cls, const char *path,
			      const struct rt_config *cfg)
{
	const struct kb_engine_plugin *p = dlsym(m->dl, KB_ENGINE_PLUGIN_SYMBOL);
	struct kb_plugin_param given[32], params[32];
	char text[RT_MODEL_NAME_MAX], why[256] = "";
	char store[32][ENG_PARAM_VALUE_MAX]; /* lives through create() only */
	size_t n;
	enum rt_err err = pub_validate(cls, path, p);

	snprintf(text, sizeof(text), "%s", params_of(cfg, cls));
	if (!err)
		err = split_params(cls, text, given, 32, &n);
	if (!err && p->abi >= 4 && p->n_params)
		err = eng_plugin_params_bind(cls, path, p, given, n, params, 32, &n, store);
	else if (!err)
		memcpy(params, given, n * sizeof(*given));
	if (err)
		return err;
	if (!p->create && n)
		return rt_fail(RT_ECONFIG, "%s model plug-in %s takes no parameters (%s.params=%s)",
			       eng_class_name(cls), path, eng_class_name(cls), params_of(cfg, cls));
	if (p->create && p->create(params, n, &m->pub_state, why, sizeof(why)))
		return rt_fail(RT_ECONFIG, "%s model plug-in %s: %s", eng_class_name(cls), path,
			       why[0] ? why : "its parameters were refused");
	m->pub = p;
	return RT_EOK;
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
	if (!err && dl && dlsym(dl, KB_ENGINE_PLUGIN_SYMBOL)) {
		err = pub_create(m, cls, name_or_path, cfg);
		if (err)
			eng_model_release(m);
		return err;
	}
	if (err) {
		m->ops = NULL; /* init failed: no fini */
		free(m->state);
		eng_model_unload(dl);
		memset(m, 0, sizeof(*m));
	}
	return err;
}

enum rt_err eng_plugins_check(const struct rt_config *cfg)
{
	struct eng_model m;
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < 3; i++) {
		const char *name = model_of(cfg, model_classes[i]);

		if (!eng_is_plugin_path(name))
			continue;
		err = eng_model_init(&m, model_classes[i], name, cfg);
		if (!err)
			eng_model_release(&m);
	}
	if (!err && eng_is_plugin_path(cfg->hbm_model))
		err = eng_hbm_plugin_check(cfg->hbm_model);
	return err;
}

void eng_plugins_describe(const struct rt_config *cfg, const char *prefix, struct rt_buf *b)
{
	for (size_t i = 0; i < 3; i++) {
		enum eng_class cls = model_classes[i];
		const char *name = model_of(cfg, cls);
		void *h = eng_is_plugin_path(name) ? dlopen(name, RTLD_NOW | RTLD_LOCAL) : NULL;
		const struct kb_engine_plugin *p = h ? dlsym(h, KB_ENGINE_PLUGIN_SYMBOL) : NULL;

		if (eng_is_plugin_path(name) && !p)
			rt_buf_printf(b, "%s%s.model plug-in %s: cannot be loaded here (%s)\n", prefix,
				      eng_class_name(cls), name,
				      h ? "no " KB_ENGINE_PLUGIN_SYMBOL " symbol: the internal ABI"
					: dlerror());
		else if (p && p->abi >= 4 && p->n_params) {
			rt_buf_printf(b, "%s%s.model plug-in %s takes (%s.params):\n", prefix,
				      eng_class_name(cls), name, eng_class_name(cls));
			eng_plugin_params_describe(p, prefix, b);
		} else if (p) {
			rt_buf_printf(b, "%s%s.model plug-in %s declares no parameters (ABI %u): "
				      "it checks %s.params itself\n", prefix,
				      eng_class_name(cls), name, p->abi,
				      eng_class_name(cls));
		}
		if (h)
			dlclose(h);
	}
}

void eng_model_release(struct eng_model *m)
{
	if (m->pub && m->pub->destroy)
		m->pub->destroy(m->pub_state);
	if (m->ops && m->ops->fini)
		m->ops->fini(m->state);
	free(m->state);
	eng_model_unload(m->dl);
	memset(m, 0, sizeof(*m));
}

/* What a public-ABI plug-in sees of a stage. */
static void stage_info(const Kb__Stage *s, const struct eng_stage_ctx *ctx,
		       struct kb_stage_info *info)
{
	memset(info, 0, sizeof(*info));
	info->queued = ctx->queued;
	info->lead_cycles = ctx->lead_cycles;
	info->stationary_held = ctx->stationary_held;
	info->op_kind = s->op_kind;
	info->op_name = s->op_name;
	info->bytes = eng_stage_bytes(s);
	info->elements = eng_stage_elements(s);
	if (s->engine == KB__ENGINE__ENGINE_GEMM)
		eng_gemm_dims(s, &info->m, &info->k, &info->n);
	info->command = s->command;
	info->index = s->index;
}

enum rt_err eng_model_latency(const struct eng_model *m, const Kb__Stage *stage,
			      const struct eng_stage_ctx *ctx, uint64_t *cycles)
{
	static const struct eng_stage_ctx isolated = { false, 0, false };
	struct kb_stage_info info;
	char why[256] = "";

	if (!ctx)
		ctx = &isolated;
	if (!m->pub)
		return m->ops->latency(m->state, stage, ctx, cycles);
	stage_info(stage, ctx, &info);
	if (m->pub->latency(m->pub_state, &info, cycles, why, sizeof(why)))
		return rt_fail(RT_EINVAL, "model plug-in %s: %s", m->pub->name ? m->pub->name : "?",
			       why[0] ? why : "latency failed");
	return RT_EOK;
}

enum rt_err eng_model_execute(struct eng_model *m, const Kb__Stage *stage,
			      const struct eng_memory *mem)
{
	return m->ops->execute(m->state, stage, mem);
}
