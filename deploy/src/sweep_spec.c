/* sweep_spec.c — sweep axes, value lists and the YAML sweep file
 * (sweep_spec.h). */
#include "sweep_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "rt/grow.h"
#include "rt/job.h"

static const struct {
	const char *key;    /* in a sweep file */
	const char *option; /* on the command line */
	const char *column; /* results.csv column ("": the key or argument name) */
} kinds[] = {
	[KB_AXIS_SET] = { "set", "--set", "" },
	[KB_AXIS_ARG] = { "arg", "--arg", "" },
	[KB_AXIS_MACHINE] = { "machine", "--machine", "machine" },
	[KB_AXIS_PES] = { "pes", "--pes", "pes" },
	[KB_AXIS_RANKS] = { "ranks", "--ranks", "ranks" },
	[KB_AXIS_SEED] = { "seed", "--seed", "seed" },
	[KB_AXIS_MODE] = { "mode", "--mode", "mode" },
};

const char *kb_axis_option(enum kb_axis_kind kind)
{
	return kinds[kind].option;
}

void kb_sweep_spec_init(struct kb_sweep_spec *s)
{
	memset(s, 0, sizeof(*s));
}

static void free_values(char **values, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(values[i]);
	free(values);
}

void kb_sweep_spec_release(struct kb_sweep_spec *s)
{
	for (size_t a = 0; a < s->n_axes; a++)
		free_values(s->axes[a].values, s->axes[a].n);
	for (size_t i = 0; i < s->n_fixed; i++)
		free(s->fixed[i]);
	memset(s, 0, sizeof(*s));
}

/* ---------------------------------------------------------------- lists */

struct values {
	char **v;
	size_t n, cap;
	const char *what;
};

static enum rt_err push(struct values *out, const char *text, size_t len)
{
	if (out->n == KB_SWEEP_MAX_VALUES)
		return rt_fail(RT_EUSAGE, "%s: more than %d values", out->what, KB_SWEEP_MAX_VALUES);
	if (!RT_GROW(out->v, out->cap, out->n, 16))
		return rt_fail(RT_ENOMEM, "%s: out of memory", out->what);
	out->v[out->n] = strndup(text, len);
	if (!out->v[out->n])
		return rt_fail(RT_ENOMEM, "%s: out of memory", out->what);
	out->n++;
	return RT_EOK;
}

static enum rt_err push_u64(struct values *out, uint64_t v)
{
	char text[24];

	return push(out, text, (size_t)snprintf(text, sizeof(text), "%llu", (unsigned long long)v));
}

/* "LO:HI:STEP" or "LO:HI:xF" (already known to hold two colons). */
static enum rt_err range(struct values *out, const char *item, bool *geometric)
{
	char lo_s[32], hi_s[32], step_s[32];
	uint64_t lo, hi, step;
	bool times;

	if (sscanf(item, "%31[^:]:%31[^:]:%31s", lo_s, hi_s, step_s) != 3 ||
	    strlen(lo_s) + strlen(hi_s) + strlen(step_s) + 2 != strlen(item))
		goto out_bad;
	times = step_s[0] == 'x';
	if (rt_parse_u64(lo_s, 0, UINT64_MAX, &lo) || rt_parse_u64(hi_s, lo, UINT64_MAX, &hi) ||
	    rt_parse_u64(step_s + times, times ? 2 : 1, UINT64_MAX, &step) || (times && !lo))
		goto out_bad;
	*geometric = *geometric || times;
	for (uint64_t v = lo;;) {
		enum rt_err err = push_u64(out, v);

		if (err)
			return err;
		if (times ? v > hi / step : hi - v < step)
			break;
		v = times ? v * step : v + step;
		if (v > hi)
			break;
	}
	return RT_EOK;
out_bad:
	return rt_fail(RT_EUSAGE, "%s: '%.60s' is not a range LO:HI:STEP or LO:HI:xF (unsigned "
		       "integers, LO <= HI, STEP >= 1, F >= 2 and LO >= 1 for xF)", out->what, item);
}

/* One item of a list (escapes already undone). */
static enum rt_err item(struct values *out, const char *text, bool *geometric)
{
	const char *c1 = strchr(text, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

	if (!text[0])
		return rt_fail(RT_EUSAGE, "%s: an empty value in the list", out->what);
	/* a value such as a path may hold one colon; two make a range if
	 * the first part is a number */
	if (c2 && text[0] >= '0' && text[0] <= '9')
		return range(out, text, geometric);
	return push(out, text, strlen(text));
}

enum rt_err kb_sweep_values(const char *list, const char *what, char ***values, size_t *n,
			    bool *geometric)
{
	struct values out = { .what = what };
	size_t len = strlen(list), k = 0;
	char *buf = malloc(len + 1);
	enum rt_err err = buf ? RT_EOK : rt_fail(RT_ENOMEM, "%s: out of memory", what);
	bool geo = false;

	for (size_t i = 0; !err && i <= len; i++) {
		if (list[i] == '\\' && list[i + 1] == ',') {
			buf[k++] = ',';
			i++;
			continue;
		}
		if (list[i] != ',' && list[i]) {
			buf[k++] = list[i];
			continue;
		}
		buf[k] = '\0';
		err = item(&out, buf, &geo);
		k = 0;
	}
	free(buf);
	if (err) {
		free_values(out.v, out.n);
		return err;
	}
	*values = out.v;
	*n = out.n;
	if (geometric)
		*geometric = geo;
	return RT_EOK;
}

/* ---------------------------------------------------------------- axes */

static bool all_numeric(char *const *values, size_t n)
{
	uint64_t v;

	for (size_t i = 0; i < n; i++)
		if (rt_parse_u64(values[i], 0, UINT64_MAX, &v) != RT_PARSE_OK)
			return false;
	return true;
}

enum rt_err kb_sweep_add_fixed(struct kb_sweep_spec *s, const char *opt, const char *value)
{
	if (s->n_fixed + 2 > KB_SWEEP_MAX_FIXED)
		return rt_fail(RT_EUSAGE, "sweep: more than %d run options", KB_SWEEP_MAX_FIXED / 2);
	s->fixed[s->n_fixed] = strdup(opt);
	s->fixed[s->n_fixed + 1] = value ? strdup(value) : NULL;
	if (!s->fixed[s->n_fixed] || (value && !s->fixed[s->n_fixed + 1]))
		return rt_fail(RT_ENOMEM, "sweep: out of memory");
	s->n_fixed += value ? 2 : 1;
	return RT_EOK;
}

/* A single value: the option as it would be typed, for every point. */
static enum rt_err add_single(struct kb_sweep_spec *s, enum kb_axis_kind kind, const char *name,
			      const char *value)
{
	char text[1200];

	if (kind != KB_AXIS_SET && kind != KB_AXIS_ARG)
		return kb_sweep_add_fixed(s, kinds[kind].option, value);
	snprintf(text, sizeof(text), "%s=%s", name, value);
	return kb_sweep_add_fixed(s, kinds[kind].option, text);
}

enum rt_err kb_sweep_add_axis(struct kb_sweep_spec *s, enum kb_axis_kind kind, const char *text)
{
	const char *list = text, *eq = strchr(text, '=');
	char what[200], name[128] = "";
	struct kb_axis *a;
	enum rt_err err;
	char **values;
	size_t n;
	bool geo;

	if (kind == KB_AXIS_SET || kind == KB_AXIS_ARG) {
		if (!eq || eq == text || (size_t)(eq - text) >= sizeof(name))
			return rt_fail(RT_EUSAGE, "sweep: %s '%.60s': expected %s=v1,v2,...",
				       kinds[kind].option, text,
				       kind == KB_AXIS_SET ? "key" : "name");
		memcpy(name, text, (size_t)(eq - text));
		name[eq - text] = '\0';
		list = eq + 1;
	}
	snprintf(what, sizeof(what), "sweep: %s %s%s", kinds[kind].option, name, name[0] ? "=..." : "");
	err = kb_sweep_values(list, what, &values, &n, &geo);
	if (err)
		return err;
	if (n == 1) {
		err = add_single(s, kind, name, values[0]);
		free_values(values, n);
		return err;
	}
	for (size_t i = 0; i < s->n_axes; i++)
		if (s->axes[i].kind == kind && !strcmp(s->axes[i].name, name)) {
			free_values(values, n);
			return rt_fail(RT_EUSAGE, "sweep: %s %s is swept twice", kinds[kind].option,
				       name);
		}
	if (s->n_axes == KB_SWEEP_MAX_AXES) {
		free_values(values, n);
		return rt_fail(RT_EUSAGE, "sweep: more than %d swept options", KB_SWEEP_MAX_AXES);
	}
	a = &s->axes[s->n_axes++];
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->column, sizeof(a->column), "%s", name[0] ? name : kinds[kind].column);
	a->values = values;
	a->n = n;
	a->numeric = all_numeric(values, n);
	a->geometric = geo;
	return RT_EOK;
}

enum rt_err kb_sweep_count(const struct kb_sweep_spec *s, size_t *points)
{
	size_t total = 1;

	for (size_t a = 0; a < s->n_axes; a++) {
		if (s->zip && s->axes[a].n != s->axes[0].n)
			return rt_fail(RT_EUSAGE, "sweep --zip: %s has %zu values and %s %zu; zipped "
				       "lists must have the same length", s->axes[0].column,
				       s->axes[0].n, s->axes[a].column, s->axes[a].n);
		if (!s->zip && total > KB_SWEEP_MAX_POINTS / s->axes[a].n)
			return rt_fail(RT_EUSAGE, "sweep: more than %d points", KB_SWEEP_MAX_POINTS);
		total = s->zip ? s->axes[a].n : total * s->axes[a].n;
	}
	*points = total;
	return RT_EOK;
}

void kb_sweep_point(const struct kb_sweep_spec *s, size_t p, size_t *index)
{
	for (size_t a = s->n_axes; a-- > 0;) {
		index[a] = s->zip ? p : p % s->axes[a].n;
		if (!s->zip)
			p /= s->axes[a].n;
	}
}

/* ---------------------------------------------------------------- file */

/* The sweep file as a small tree of scalars, sequences and mappings
 * (libyaml events), so each key is read with its line. */
struct node {
	yaml_node_t *y;
	yaml_document_t *doc;
};

struct file {
	yaml_document_t doc;
	const char *origin;
};

static const char *scalar(const struct file *f, yaml_node_t *n)
{
	(void)f;
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static enum rt_err file_fail(const struct file *f, yaml_node_t *n, const char *key,
			     const char *what)
{
	return rt_fail(RT_EUSAGE, "sweep file %s: %s%s%s (line %zu)", f->origin, key ? key : "",
		       key ? ": " : "", what, n ? n->start_mark.line + 1 : 0);
}

/* A list value: a scalar LIST or a sequence of scalars, joined with
 * commas (a comma inside a sequence item is escaped). */
static enum rt_err list_text(const struct file *f, yaml_node_t *n, const char *key, char *out,
			     size_t cap)
{
	size_t used = 0;

	if (scalar(f, n)) {
		if (strlen(scalar(f, n)) >= cap)
			return file_fail(f, n, key, "the value is too long");
		snprintf(out, cap, "%s", scalar(f, n));
		return RT_EOK;
	}
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return file_fail(f, n, key, "expected a value, a list LIST or a sequence [v1, v2]");
	out[0] = '\0';
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		const char *v = scalar(f, yaml_document_get_node((yaml_document_t *)&f->doc, *i));

		if (!v)
			return file_fail(f, n, key, "a sequence item is not a single value");
		for (const char *c = v; *c; c++) {
			if (used + 3 >= cap)
				return file_fail(f, n, key, "the list is too long");
			if (*c == ',')
				out[used++] = '\\';
			out[used++] = *c;
		}
		if (i + 1 < n->data.sequence.items.top)
			out[used++] = ',';
		out[used] = '\0';
	}
	if (!used)
		return file_fail(f, n, key, "an empty sequence");
	return RT_EOK;
}

static yaml_node_t *node(const struct file *f, int id)
{
	return yaml_document_get_node((yaml_document_t *)&f->doc, id);
}

/* set: / arg: a mapping of KEY: LIST. */
static enum rt_err keyed_axes(struct kb_sweep_spec *s, const struct file *f, yaml_node_t *m,
			      enum kb_axis_kind kind)
{
	static char list[65536], text[65536 + 160];

	if (m->type != YAML_MAPPING_NODE)
		return file_fail(f, m, kinds[kind].key, "expected a mapping {key: values}");
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(f, node(f, p->key));
		enum rt_err err;

		if (!k || !k[0] || strchr(k, '='))
			return file_fail(f, node(f, p->key), kinds[kind].key, "a key must be a plain name");
		err = list_text(f, node(f, p->value), k, list, sizeof(list));
		if (err)
			return err;
		snprintf(text, sizeof(text), "%s=%s", k, list);
		err = kb_sweep_add_axis(s, kind, text);
		if (err)
			return rt_fail(err, "sweep file %s (line %zu): %s", f->origin,
				       node(f, p->value)->start_mark.line + 1, rt_last_error());
	}
	return RT_EOK;
}

static enum rt_err string_list(const struct file *f, yaml_node_t *n, const char *key,
			       char out[][128], unsigned max, unsigned *count)
{
	*count = 0;
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return file_fail(f, n, key, "expected a sequence [a, b]");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		const char *v = scalar(f, node(f, *i));

		if (!v || strlen(v) >= 128 || *count == max)
			return file_fail(f, n, key, max == 2 ? "at most two names of up to 127 bytes"
							    : "items must be short single values");
		snprintf(out[(*count)++], 128, "%s", v);
	}
	return RT_EOK;
}

static enum rt_err options(struct kb_sweep_spec *s, const struct file *f, yaml_node_t *n)
{
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return file_fail(f, n, "options", "expected a sequence of run options [--mode, data]");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		const char *v = scalar(f, node(f, *i));
		enum rt_err err;

		if (!v)
			return file_fail(f, n, "options", "an item is not a single value");
		err = kb_sweep_add_fixed(s, v, NULL);
		if (err)
			return err;
	}
	return RT_EOK;
}

static enum rt_err top_key(struct kb_sweep_spec *s, const struct file *f, const char *k,
			   yaml_node_t *v)
{
	static char list[65536];
	unsigned n;

	for (unsigned kind = 0; kind < sizeof(kinds) / sizeof(kinds[0]); kind++) {
		enum rt_err err;

		if (strcmp(k, kinds[kind].key))
			continue;
		if (kind == KB_AXIS_SET || kind == KB_AXIS_ARG)
			return keyed_axes(s, f, v, (enum kb_axis_kind)kind);
		err = list_text(f, v, k, list, sizeof(list));
		if (!err && (err = kb_sweep_add_axis(s, (enum kb_axis_kind)kind, list)))
			err = rt_fail(err, "sweep file %s (line %zu): %s", f->origin,
				      v->start_mark.line + 1, rt_last_error());
		return err;
	}
	if (!strcmp(k, "workload")) {
		if (!scalar(f, v) || strlen(scalar(f, v)) >= sizeof(s->workload))
			return file_fail(f, v, k, "expected a workload name");
		snprintf(s->workload, sizeof(s->workload), "%s", scalar(f, v));
		return RT_EOK;
	}
	if (!strcmp(k, "zip")) {
		if (!scalar(f, v) || (strcmp(scalar(f, v), "true") && strcmp(scalar(f, v), "false")))
			return file_fail(f, v, k, "expected true or false");
		s->zip = !strcmp(scalar(f, v), "true");
		return RT_EOK;
	}
	if (!strcmp(k, "options"))
		return options(s, f, v);
	if (!strcmp(k, "objectives")) {
		enum rt_err err = string_list(f, v, k, s->objectives, 2, &n);

		s->n_objectives = n;
		return err;
	}
	return file_fail(f, v, k, "unknown key (expected workload, set, arg, machine, pes, ranks, "
			 "seed, mode, zip, options, objectives)");
}

enum rt_err kb_sweep_file_parse(struct kb_sweep_spec *s, const char *text, size_t len,
				const char *origin)
{
	struct file f = { .origin = origin };
	yaml_parser_t p;
	yaml_node_t *root;
	enum rt_err err = RT_EOK;

	if (!yaml_parser_initialize(&p))
		return rt_fail(RT_ENOMEM, "sweep file %s: cannot start the YAML parser", origin);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &f.doc)) {
		err = rt_fail(RT_EUSAGE, "sweep file %s: YAML error: %s at line %zu", origin,
			      p.problem ? p.problem : "syntax error", p.problem_mark.line + 1);
		yaml_parser_delete(&p);
		return err;
	}
	yaml_parser_delete(&p);
	root = yaml_document_get_root_node(&f.doc);
	if (!root || root->type != YAML_MAPPING_NODE)
		err = rt_fail(RT_EUSAGE, "sweep file %s: expected a mapping (workload:, set:, arg:, "
			      "...)", origin);
	for (yaml_node_pair_t *pr = root && !err ? root->data.mapping.pairs.start : NULL;
	     pr && pr < root->data.mapping.pairs.top && !err; pr++) {
		const char *k = scalar(&f, node(&f, pr->key));

		err = k ? top_key(s, &f, k, node(&f, pr->value))
			: file_fail(&f, node(&f, pr->key), NULL, "a key is not a single value");
	}
	yaml_document_delete(&f.doc);
	return err;
}
