/* program_yaml.c — a program YAML file (`kernbench run FILE.yaml`) into the
 * canonical text every host parses (tl_program_parse, tl_host.h):
 *
 *   program:
 *     tensors:
 *       NAME: {rows: R, cols: C, dtype: f16|bf16|f32,
 *              init: none|zeros|random, scale: 1, offset: 0,
 *              rank_div: 1, rank_mod: RANKS}   # random values per rank:
 *              # they depend on it through (rank / rank_div) % rank_mod
 *     steps:
 *       - name: NAME
 *         kernel: KERNEL          # built in, or path/lib.so:NAME
 *         args: {name: value, ...}
 *         tensors: {parameter: tensor, ...}
 *
 * Everything is checked here, before anything runs: a wrong key, type or
 * name is one line naming the file and the item. */
#include "workloads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "rt/buf.h"
#include "rt/infile.h"
#include "tl_host.h"

#define YAML_MAX_BYTES (1u << 20)

struct ctx {
	const char *path;
	yaml_document_t doc;
	struct rt_buf out;
};

static yaml_node_t *node(struct ctx *c, int i)
{
	return yaml_document_get_node(&c->doc, i);
}

static const char *scalar(struct ctx *c, int i)
{
	yaml_node_t *n = node(c, i);

	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of `key` in mapping node m, or 0. */
static int lookup(struct ctx *c, yaml_node_t *m, const char *key)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(c, p->key);

		if (k && !strcmp(k, key))
			return p->value;
	}
	return 0;
}

/* Every key of mapping m is one of `allowed` (NULL-ended). */
static enum rt_err only_keys(struct ctx *c, yaml_node_t *m, const char *const *allowed,
			     const char *where)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(c, p->key);
		bool ok = false;

		for (const char *const *a = allowed; k && *a; a++)
			ok = ok || !strcmp(k, *a);
		if (!ok)
			return rt_fail(RT_EUSAGE, "program %s: %s: unknown key '%.40s' (expected %s%s%s%s)",
				       c->path, where, k ? k : "?", allowed[0],
				       allowed[1] ? ", " : "", allowed[1] ? allowed[1] : "",
				       allowed[1] && allowed[2] ? ", ..." : "");
	}
	return RT_EOK;
}

/* A plain word: no blank or newline, 1 to 255 bytes. */
static bool word(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n && n < 256 && !strpbrk(s, " \t\r\n");
}

/* One of `names` (NULL-ended), or absent. */
static bool one_of(const char *s, const char *const *names)
{
	for (; s && *names; names++)
		if (!strcmp(s, *names))
			return true;
	return !s;
}

/* Absent, or a decimal number (an integer when `integer`). */
static bool number(const char *s, bool integer)
{
	char *end;

	if (!s)
		return true;
	if (integer)
		return strspn(s, "0123456789") == strlen(s) && strlen(s) <= 9;
	(void)strtod(s, &end);
	return *s && !*end;
}

/* The values of a tensor's keys (rows, cols, dtype, init, scale, offset,
 * rank_div, rank_mod) are what the canonical text can hold. */
static enum rt_err tensor_values(struct ctx *c, const char *where, const char *const *v)
{
	static const char *const dtypes[] = { "f16", "bf16", "f32", NULL };
	static const char *const inits[] = { "none", "zeros", "random", NULL };

	if (!word(v[0]) || !word(v[1]))
		return rt_fail(RT_EUSAGE, "program %s: %s: rows and cols are required", c->path,
			       where);
	if (!number(v[0], true) || !number(v[1], true) || !strcmp(v[0], "0") ||
	    !strcmp(v[1], "0") || v[0][0] == '0' || v[1][0] == '0')
		return rt_fail(RT_EUSAGE, "program %s: %s: rows and cols must be whole numbers from "
			       "1 to 999999999", c->path, where);
	if (!one_of(v[2], dtypes) || !one_of(v[3], inits))
		return rt_fail(RT_EUSAGE, "program %s: %s: dtype must be f16, bf16 or f32 and init "
			       "none, zeros or random", c->path, where);
	if (!number(v[4], false) || !number(v[5], false) || !number(v[6], true) ||
	    !number(v[7], true))
		return rt_fail(RT_EUSAGE, "program %s: %s: scale and offset must be numbers, "
			       "rank_div and rank_mod whole numbers", c->path, where);
	return RT_EOK;
}

static enum rt_err tensors(struct ctx *c, yaml_node_t *m)
{
	static const char *const keys[] = { "rows", "cols", "dtype", "init", "scale", "offset",
					    "rank_div", "rank_mod", NULL };

	if (m->type != YAML_MAPPING_NODE)
		return rt_fail(RT_EUSAGE, "program %s: tensors: expected a mapping of NAME: {rows, "
			       "cols, dtype, ...}", c->path);
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *name = scalar(c, p->key), *v[8];
		yaml_node_t *t = node(c, p->value);
		char where[96];
		enum rt_err err;

		snprintf(where, sizeof(where), "tensor '%.40s'", name ? name : "?");
		if (!word(name) || !t || t->type != YAML_MAPPING_NODE)
			return rt_fail(RT_EUSAGE, "program %s: %s: expected NAME: {rows: R, cols: C, "
				       "dtype: f16|bf16|f32}", c->path, where);
		err = only_keys(c, t, keys, where);
		if (err)
			return err;
		for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++)
			if (scalar(c, q->key) && !strcmp(scalar(c, q->key), name))
				return rt_fail(RT_EUSAGE, "program %s: %s is declared twice", c->path,
					       where);
		for (int i = 0; i < 8; i++)
			v[i] = scalar(c, lookup(c, t, keys[i]));
		err = tensor_values(c, where, v);
		if (err)
			return err;
		rt_buf_printf(&c->out, "tensor %s %s %s %s %s %s %s %s %s\n", name, v[0], v[1],
			      v[2] ? v[2] : "f16", v[3] ? v[3] : "none", v[4] ? v[4] : "1",
			      v[5] ? v[5] : "0", v[6] ? v[6] : "0", v[7] ? v[7] : "0");
	}
	return RT_EOK;
}

/* The `args` or `tensors` mapping of a step as `item NAME VALUE` lines. */
static enum rt_err pairs(struct ctx *c, int i, const char *item, const char *where)
{
	yaml_node_t *m = i ? node(c, i) : NULL;

	if (!i)
		return RT_EOK;
	if (!m || m->type != YAML_MAPPING_NODE)
		return rt_fail(RT_EUSAGE, "program %s: %s: expected a mapping", c->path, where);
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(c, p->key), *v = scalar(c, p->value);

		if (!word(k) || !word(v))
			return rt_fail(RT_EUSAGE, "program %s: %s: '%.40s' needs a one-word value",
				       c->path, where, k ? k : "?");
		rt_buf_printf(&c->out, "%s %s %s\n", item, k, v);
	}
	return RT_EOK;
}

static enum rt_err steps(struct ctx *c, yaml_node_t *s)
{
	static const char *const keys[] = { "name", "kernel", "args", "tensors", NULL };
	uint32_t k = 0;

	if (s->type != YAML_SEQUENCE_NODE)
		return rt_fail(RT_EUSAGE, "program %s: steps: expected a list of {name, kernel, "
			       "args, tensors}", c->path);
	for (yaml_node_item_t *it = s->data.sequence.items.start; it < s->data.sequence.items.top;
	     it++, k++) {
		yaml_node_t *m = node(c, *it);
		const char *name, *kernel;
		char where[96], args_w[128], tens_w[128];
		enum rt_err err;

		snprintf(where, sizeof(where), "step %u", k + 1);
		if (!m || m->type != YAML_MAPPING_NODE)
			return rt_fail(RT_EUSAGE, "program %s: %s: expected {name, kernel, args, "
				       "tensors}", c->path, where);
		err = only_keys(c, m, keys, where);
		name = scalar(c, lookup(c, m, "name"));
		kernel = scalar(c, lookup(c, m, "kernel"));
		if (!err && (!word(name) || !word(kernel)))
			err = rt_fail(RT_EUSAGE, "program %s: %s: name and kernel are required",
				      c->path, where);
		for (yaml_node_item_t *q = s->data.sequence.items.start; !err && q < it; q++) {
			yaml_node_t *e = node(c, *q);
			const char *other = e ? scalar(c, lookup(c, e, "name")) : NULL;

			if (other && !strcmp(other, name))
				err = rt_fail(RT_EUSAGE, "program %s: step '%s' is named twice (its "
					      "outputs are STEP.TENSOR.npy)", c->path, name);
		}
		if (!err && tl_kernel_check(kernel) != RT_EOK)
			err = rt_fail(RT_EUSAGE, "program %s: step '%s': %s", c->path, name,
				      rt_last_error());
		if (err)
			return err;
		rt_buf_printf(&c->out, "step %s %s\n", name, kernel);
		snprintf(args_w, sizeof(args_w), "step '%s': args", name);
		snprintf(tens_w, sizeof(tens_w), "step '%s': tensors", name);
		err = pairs(c, lookup(c, m, "args"), "arg", args_w);
		if (!err)
			err = pairs(c, lookup(c, m, "tensors"), "bind", tens_w);
		if (err)
			return err;
	}
	return RT_EOK;
}

static enum rt_err convert(struct ctx *c)
{
	yaml_node_t *root = yaml_document_get_root_node(&c->doc), *prog;
	static const char *const top[] = { "program", NULL };
	static const char *const keys[] = { "tensors", "steps", NULL };
	enum rt_err err;
	int t, s;

	if (!root || root->type != YAML_MAPPING_NODE || !lookup(c, root, "program") ||
	    !(prog = node(c, lookup(c, root, "program"))) || prog->type != YAML_MAPPING_NODE)
		return rt_fail(RT_EUSAGE, "program %s: expected a top-level 'program:' mapping with "
			       "tensors and steps", c->path);
	err = only_keys(c, root, top, "top level");
	if (!err)
		err = only_keys(c, prog, keys, "program");
	if (err)
		return err;
	t = lookup(c, prog, "tensors");
	s = lookup(c, prog, "steps");
	if (!s)
		return rt_fail(RT_EUSAGE, "program %s: no steps", c->path);
	if (t)
		err = tensors(c, node(c, t));
	return err ? err : steps(c, node(c, s));
}

bool kb_program_file(const char *workload)
{
	size_t n = strlen(workload);

	return (n > 5 && !strcmp(workload + n - 5, ".yaml")) ||
	       (n > 4 && !strcmp(workload + n - 4, ".yml"));
}

/* Everything a converted program must satisfy: the hosts' parser and
 * bindings agree with what was written. */
static enum rt_err check_text(struct ctx *c)
{
	struct tl_program_text check;
	enum rt_err err = tl_program_parse(c->out.data ? c->out.data : "", &check);

	if (err)
		return strncmp(rt_last_error(), "program ", 8)
			       ? rt_fail(RT_EUSAGE, "program %s: %s", c->path, rt_last_error())
			       : err;
	for (uint32_t k = 0; !err && k < check.prog.n_steps; k++)
		for (uint32_t b = 0; !err && b < TL_PROG_MAX_BINDS && check.prog.steps[k].binds[b][0];
		     b++) {
			bool found = false;

			for (uint32_t i = 0; i < check.prog.n_tensors; i++)
				found = found || !strcmp(check.prog.tensors[i].name,
							 check.prog.steps[k].binds[b][1]);
			if (!found)
				err = rt_fail(RT_EUSAGE,
					      "program %s: step '%s': tensor '%s' (for '%s') is not "
					      "declared under tensors", c->path, check.prog.steps[k].name,
					      check.prog.steps[k].binds[b][1],
					      check.prog.steps[k].binds[b][0]);
		}
	tl_program_text_release(&check);
	return err;
}

enum rt_err kb_program_load_text(const char *name, const char *text, size_t len, char *out,
				 size_t cap)
{
	struct ctx c = { .path = name };
	yaml_parser_t parser;
	enum rt_err err;

	rt_buf_init(&c.out);
	if (!yaml_parser_initialize(&parser))
		return rt_fail(RT_ENOMEM, "program %s: out of memory", name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
	if (!yaml_parser_load(&parser, &c.doc)) {
		err = rt_fail(RT_EUSAGE, "program %s: YAML error: %s at line %zu", name,
			      parser.problem ? parser.problem : "malformed",
			      parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		return err;
	}
	err = convert(&c);
	if (!err && c.out.len + 1 > cap)
		err = rt_fail(RT_EUSAGE, "program %s: %zu bytes of program, at most %zu", name,
			      c.out.len, cap - 1);
	if (!err)
		err = check_text(&c);
	if (!err)
		memcpy(out, c.out.data, c.out.len + 1);
	yaml_document_delete(&c.doc);
	yaml_parser_delete(&parser);
	rt_buf_release(&c.out);
	return err;
}

enum rt_err kb_program_load(const char *path, char *out, size_t cap)
{
	struct rt_buf file;
	enum rt_err err;

	rt_buf_init(&file);
	err = rt_infile_read(path, "program", YAML_MAX_BYTES, false, &file);
	if (err)
		return rt_fail(RT_EUSAGE, "%s", rt_last_error());
	err = kb_program_load_text(path, file.data, file.len, out, cap);
	rt_buf_release(&file);
	return err;
}
