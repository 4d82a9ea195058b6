/* plugin_params.c — the parameters an ABI 4 plug-in declares
 * (kb_engine_plugin.h): what the user gave checked against them, the
 * defaults filled in, and the lines `kernbench config` prints. The checks
 * are kernbench's, so every plug-in refuses alike and names what it takes. */
#include "eng.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_name(enum kb_param_type t)
{
	return t == KB_PARAM_INT ? "int" : t == KB_PARAM_REAL ? "real" : "text";
}

/* "a, b, c": every declared name, for a refusal. */
static void declared_names(const struct kb_engine_plugin *p, char *out, size_t cap)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < p->n_params && used < cap; i++)
		used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "",
					 p->params[i].name);
}

static const struct kb_param_decl *find_decl(const struct kb_engine_plugin *p, const char *name)
{
	for (size_t i = 0; i < p->n_params; i++)
		if (!strcmp(p->params[i].name, name))
			return &p->params[i];
	return NULL;
}

/* `text` as declaration `d` types it, normalised into `out`; false if it
 * is not one or lies outside the range. */
static bool typed_value(const struct kb_param_decl *d, const char *text, char *out, size_t cap)
{
	char *end = NULL;

	if (d->type == KB_PARAM_TEXT)
		return strlen(text) < cap && !strchr(text, ',') &&
		       snprintf(out, cap, "%s", text) >= 0;
	if (d->type == KB_PARAM_INT) {
		unsigned long long v;

		if (!*text || strspn(text, "0123456789") != strlen(text) || strlen(text) > 19)
			return false;
		v = strtoull(text, NULL, 10);
		if ((double)v < d->min || (double)v > d->max)
			return false;
		snprintf(out, cap, "%llu", v);
		return true;
	}
	if (d->type == KB_PARAM_REAL) {
		double v = *text ? strtod(text, &end) : NAN;

		if (!end || *end || !isfinite(v) || v < d->min || v > d->max || strlen(text) >= cap)
			return false;
		snprintf(out, cap, "%s", text);
		return true;
	}
	return false;
}

/* What a value of `d` must be, for a refusal: "an int from 1 to 1000". */
static void expected(const struct kb_param_decl *d, char *out, size_t cap)
{
	if (d->type == KB_PARAM_TEXT)
		snprintf(out, cap, "text without ',' (at most %d bytes)", ENG_PARAM_VALUE_MAX - 1);
	else
		snprintf(out, cap, "%s from %.17g to %.17g%s%s%s",
			 d->type == KB_PARAM_INT ? "a decimal integer" : "a number", d->min,
			 d->max, d->unit && d->unit[0] ? " (" : "", d->unit ? d->unit : "",
			 d->unit && d->unit[0] ? ")" : "");
}

/* The plug-in's own declarations make sense: names, types, ranges and
 * defaults (a default that its own range refuses is the plug-in's bug). */
static enum rt_err check_decls(enum eng_class cls, const char *path,
			       const struct kb_engine_plugin *p)
{
	char value[ENG_PARAM_VALUE_MAX];

	for (size_t i = 0; i < p->n_params; i++) {
		const struct kb_param_decl *d = &p->params[i];
		bool named = d->name && d->name[0] &&
			     strspn(d->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					     "0123456789_") == strlen(d->name);

		if (!named || (int)d->type < KB_PARAM_INT || d->type > KB_PARAM_TEXT ||
		    (d->type != KB_PARAM_TEXT && !(d->min <= d->max)) ||
		    find_decl(p, d->name) != d ||
		    (d->default_value && !typed_value(d, d->default_value, value, sizeof(value))))
			return rt_fail(RT_ECONFIG,
				       "%s model plug-in %s: its parameter declaration %zu (%.40s) is "
				       "not valid (a name of letters, digits and '_', declared once; "
				       "a known type; min <= max; a default inside the range)",
				       eng_class_name(cls), path, i, named ? d->name : "?");
	}
	return RT_EOK;
}

/* One given pair checked against its declaration. */
static enum rt_err check_given(enum eng_class cls, const char *path,
			       const struct kb_engine_plugin *p, const struct kb_plugin_param *g,
			       const struct kb_plugin_param *given, size_t k, char *value,
			       size_t cap)
{
	const struct kb_param_decl *d = find_decl(p, g->name);
	char names[512], want[160];

	if (!d) {
		const char *near = rt_nearest_name(g->name, p->params, p->n_params, sizeof(*p->params),
						   offsetof(struct kb_param_decl, name));

		declared_names(p, names, sizeof(names));
		return rt_fail(RT_EUSAGE,
			       "%s.params: unknown parameter '%s' of plug-in %s (%s%s%sit takes: %s)",
			       eng_class_name(cls), g->name, path, near ? "did you mean '" : "",
			       near ? near : "", near ? "'? " : "", names);
	}
	for (size_t j = 0; j < k; j++)
		if (!strcmp(given[j].name, g->name))
			return rt_fail(RT_EUSAGE, "%s.params: parameter '%s' given twice",
				       eng_class_name(cls), g->name);
	if (!typed_value(d, g->value, value, cap)) {
		expected(d, want, sizeof(want));
		return rt_fail(RT_EUSAGE, "%s.params: %s='%.64s' for plug-in %s: expected %s",
			       eng_class_name(cls), g->name, g->value, path, want);
	}
	return RT_EOK;
}

enum rt_err eng_plugin_params_bind(enum eng_class cls, const char *path,
				   const struct kb_engine_plugin *p,
				   const struct kb_plugin_param *given, size_t n_given,
				   struct kb_plugin_param *out, size_t cap, size_t *n_out,
				   char (*store)[ENG_PARAM_VALUE_MAX])
{
	enum rt_err err = p->n_params > cap
		? rt_fail(RT_ECONFIG, "%s model plug-in %s declares %zu parameters, at most %zu",
			  eng_class_name(cls), path, p->n_params, cap)
		: check_decls(cls, path, p);

	*n_out = 0;
	for (size_t k = 0; !err && k < n_given; k++) {
		const struct kb_param_decl *d = find_decl(p, given[k].name);

		err = check_given(cls, path, p, &given[k], given, k, store[d ? d - p->params : 0],
				  ENG_PARAM_VALUE_MAX);
		if (!err)
			out[d - p->params].value = store[d - p->params];
	}
	for (size_t i = 0; !err && i < p->n_params; i++) {
		const struct kb_param_decl *d = &p->params[i];
		bool was_given = false;

		for (size_t k = 0; k < n_given; k++)
			was_given |= !strcmp(given[k].name, d->name);
		if (!was_given && !d->default_value)
			return rt_fail(RT_EUSAGE, "%s.params: plug-in %s needs '%s' (%s)",
				       eng_class_name(cls), path, d->name,
				       d->description ? d->description : type_name(d->type));
		if (!was_given) {
			typed_value(d, d->default_value, store[i], ENG_PARAM_VALUE_MAX);
			out[i].value = store[i];
		}
		out[i].name = d->name;
	}
	if (!err)
		*n_out = p->n_params;
	return err;
}

void eng_plugin_params_describe(const struct kb_engine_plugin *p, const char *prefix,
				struct rt_buf *b)
{
	for (size_t i = 0; p->abi >= 4 && i < p->n_params; i++) {
		const struct kb_param_decl *d = &p->params[i];

		rt_buf_printf(b, "%s%s  %s", prefix, d->name, type_name(d->type));
		if (d->unit && d->unit[0])
			rt_buf_printf(b, ", %s", d->unit);
		if (d->type != KB_PARAM_TEXT)
			rt_buf_printf(b, ", %.17g..%.17g", d->min, d->max);
		rt_buf_printf(b, ", %s%s: %s\n", d->default_value ? "default " : "required",
			      d->default_value ? d->default_value : "",
			      d->description ? d->description : "");
	}
}
