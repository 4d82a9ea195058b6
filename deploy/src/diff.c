/* diff.c — `kernbench diff A B` (diff.h). */
#include "diff.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt/buf.h"
#include "rt/grow.h"
#include "rt/half.h"
#include "rt/infile.h"
#include "rt/json.h"
#include "rt/json_read.h"
#include "rt/npy.h"

#define SUMMARY_MAX (256u << 20)

/* A leaf of a summary: its dotted path and text ("" for null). */
struct leaf {
	char *path;
	const struct rt_jval *v;
};

struct leaves {
	struct leaf *items;
	size_t n, cap;
	bool failed;
};

/* One folder: its summary and its leaves, split into what ran (args,
 * models, config and the run's identity) and statistics (numbers). */
struct side {
	const char *dir;
	char path[4200];
	struct rt_jval root;
	struct leaves ran, stats;
};

static const char *const identity_keys[] = { "workload", "mode", "ranks", "pes", "seed",
					     "inputs" };
/* Numbers that say what ran rather than how it went: compared as "ran". */
static const char *const ran_objects[] = { "args", "models", "config" };

static void add_leaf(struct leaves *l, const char *path, const struct rt_jval *v)
{
	if (l->failed)
		return;
	if (!RT_GROW(l->items, l->cap, l->n, 256)) {
		l->failed = true;
		return;
	}
	l->items[l->n].path = strdup(path);
	l->items[l->n].v = v;
	l->failed = !l->items[l->n].path;
	l->n += !l->failed;
}

static void collect(struct leaves *l, const char *prefix, const struct rt_jval *v)
{
	char path[1024];

	if (v->type == RT_J_OBJ || v->type == RT_J_ARR) {
		for (size_t i = 0; i < v->n; i++) {
			if (v->type == RT_J_OBJ)
				snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "",
					 v->keys[i]);
			else
				snprintf(path, sizeof(path), "%s[%zu]", prefix, i);
			collect(l, path, &v->items[i]);
		}
		return;
	}
	add_leaf(l, prefix, v);
}

static bool in_list(const char *key, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(key, list[i]))
			return true;
	return false;
}

#define IN(key, list) in_list((key), (list), sizeof(list) / sizeof((list)[0]))

static int load(struct side *s)
{
	struct rt_buf text;
	struct stat st;
	enum rt_err err;

	if (!stat(s->dir, &st) && S_ISDIR(st.st_mode))
		snprintf(s->path, sizeof(s->path), "%s/summary.json", s->dir);
	else
		snprintf(s->path, sizeof(s->path), "%s", s->dir);
	rt_buf_init(&text);
	err = rt_infile_read(s->path, "summary", SUMMARY_MAX, false, &text);
	if (!err)
		err = rt_json_parse(text.data, text.len, s->path, &s->root);
	rt_buf_release(&text);
	if (!err && s->root.type != RT_J_OBJ)
		err = rt_fail(RT_EDECODE, "%s is not a JSON object", s->path);
	if (err) {
		fprintf(stderr, "kernbench: error: diff: %s\n", rt_last_error());
		return 2;
	}
	/* the summary's folder is where its tensors are */
	if (strrchr(s->path, '/'))
		*strrchr(s->path, '/') = '\0';
	else
		snprintf(s->path, sizeof(s->path), ".");
	for (size_t i = 0; i < s->root.n; i++) {
		const char *k = s->root.keys[i];

		if (!strcmp(k, "transport"))
			break; /* from here on: how the run went */
		if (IN(k, identity_keys) || IN(k, ran_objects))
			collect(&s->ran, k, &s->root.items[i]);
		else if (strcmp(k, "stat_info") && strcmp(k, "command"))
			collect(&s->stats, k, &s->root.items[i]);
	}
	if (s->ran.failed || s->stats.failed) {
		fprintf(stderr, "kernbench: error: diff: out of memory\n");
		return 2;
	}
	return 0;
}

static const struct rt_jval *find(const struct leaves *l, const char *path)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->items[i].path, path))
			return l->items[i].v;
	return NULL;
}

static const char *text_of(const struct rt_jval *v)
{
	if (!v)
		return "(absent)";
	if (v->type == RT_J_NULL)
		return "null";
	if (v->type == RT_J_BOOL)
		return v->b ? "true" : "false";
	return v->text;
}

static bool same(const struct rt_jval *a, const struct rt_jval *b)
{
	return a && b && a->type == b->type && !strcmp(text_of(a), text_of(b));
}

/* ---------------------------------------------------------------- output */

struct report {
	bool json;
	bool all;
	struct rt_json j;
	struct rt_buf out;
	size_t n_ran, n_stats, n_tensors, compared;
};

/* Keys of `a` then those only in `b`, each compared once. */
static void each_key(const struct leaves *a, const struct leaves *b,
		     void (*fn)(struct report *r, const char *path, const struct rt_jval *x,
				const struct rt_jval *y),
		     struct report *r)
{
	for (size_t i = 0; i < a->n; i++)
		fn(r, a->items[i].path, a->items[i].v, find(b, a->items[i].path));
	for (size_t i = 0; i < b->n; i++)
		if (!find(a, b->items[i].path))
			fn(r, b->items[i].path, NULL, b->items[i].v);
}

static void ran_diff(struct report *r, const char *path, const struct rt_jval *a,
		     const struct rt_jval *b)
{
	if (same(a, b))
		return;
	r->n_ran++;
	if (r->json) {
		rt_json_object(&r->j, NULL, RT_JSON_INLINE);
		rt_json_str(&r->j, "key", path);
		rt_json_str(&r->j, "a", text_of(a));
		rt_json_str(&r->j, "b", text_of(b));
		rt_json_close(&r->j);
	} else {
		rt_buf_printf(&r->out, "    %-40s %s -> %s\n", path, text_of(a), text_of(b));
	}
}

static void stat_diff(struct report *r, const char *path, const struct rt_jval *a,
		      const struct rt_jval *b)
{
	double x = 0, y = 0, rel;
	uint64_t ix, iy;
	bool num = rt_jval_num(a, &x) && rt_jval_num(b, &y);
	bool ints = rt_jval_u64(a, &ix) && rt_jval_u64(b, &iy);
	bool differs = !same(a, b);
	char delta[48];

	r->compared++;
	if (!differs && !r->all)
		return;
	if (!num && (a || b) && !differs)
		return;
	r->n_stats += differs;
	rel = num && x != 0 ? (y - x) / fabs(x) : (num && y == 0 ? 0 : INFINITY);
	if (ints) /* counts stay exact */
		snprintf(delta, sizeof(delta), "%s%llu", iy >= ix ? "+" : "-",
			 (unsigned long long)(iy >= ix ? iy - ix : ix - iy));
	else
		snprintf(delta, sizeof(delta), "%+.6g", y - x);
	if (r->json) {
		rt_json_object(&r->j, NULL, RT_JSON_INLINE);
		rt_json_str(&r->j, "statistic", path);
		rt_json_str(&r->j, "a", text_of(a));
		rt_json_str(&r->j, "b", text_of(b));
		if (num) {
			rt_json_fixed(&r->j, "delta", y - x, ints ? 0 : 6);
			if (isfinite(rel))
				rt_json_fixed(&r->j, "relative", rel, 6);
			else
				rt_json_null(&r->j, "relative");
		}
		rt_json_close(&r->j);
		return;
	}
	if (!num) {
		rt_buf_printf(&r->out, "    %-48s %s -> %s\n", path, text_of(a), text_of(b));
		return;
	}
	rt_buf_printf(&r->out, "    %-48s %s -> %s  (%s", path, text_of(a), text_of(b), delta);
	if (isfinite(rel))
		rt_buf_printf(&r->out, ", %+.3f%%)\n", 100.0 * rel);
	else
		rt_buf_printf(&r->out, ")\n");
}

/* ---------------------------------------------------------------- tensors */

static double element(const struct rt_npy *n, uint64_t i)
{
	const uint8_t *p = n->data + i * n->elem_size;
	uint16_t h;
	float f;
	double d;
	int32_t k;

	switch (n->type) {
	case RT_NPY_F16: memcpy(&h, p, 2); return rt_f16_to_f32(h);
	case RT_NPY_F32: memcpy(&f, p, 4); return f;
	case RT_NPY_F64: memcpy(&d, p, 8); return d;
	default: memcpy(&k, p, 4); return k;
	}
}

/* Names of the .npy files of `dir`, sorted; caller frees. */
static size_t npy_names(const char *dir, char ***out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL, **grown;
	size_t n = 0;

	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len < 5 || strcmp(e->d_name + len - 4, ".npy"))
			continue;
		grown = realloc(names, (n + 1) * sizeof(*names));
		if (!grown)
			break;
		names = grown;
		if ((names[n] = strdup(e->d_name)))
			n++;
	}
	if (d)
		closedir(d);
	for (size_t i = 1; i < n; i++) /* insertion sort: a handful of files */
		for (size_t k = i; k > 0 && strcmp(names[k - 1], names[k]) > 0; k--) {
			char *t = names[k];

			names[k] = names[k - 1];
			names[k - 1] = t;
		}
	*out = names;
	return n;
}

/* One tensor: "same", "only in A", or its largest errors. */
static void tensor_diff(struct report *r, const struct side *a, const struct side *b,
			const char *name, bool in_a, bool in_b)
{
	char pa[4400], pb[4400], why[256] = "";
	struct rt_npy x = { 0 }, y = { 0 };
	double max_abs = 0, max_rel = 0;
	uint64_t over = 0;
	bool equal = false, shapes = false;

	snprintf(pa, sizeof(pa), "%s/%s", a->path, name);
	snprintf(pb, sizeof(pb), "%s/%s", b->path, name);
	if (!in_a || !in_b)
		snprintf(why, sizeof(why), "only in %s", in_a ? "A" : "B");
	else if (rt_npy_read(pa, &x) || rt_npy_read(pb, &y))
		snprintf(why, sizeof(why), "unreadable: %.200s", rt_last_error());
	else if (x.type != y.type || x.ndim != y.ndim || memcmp(x.shape, y.shape, sizeof(x.shape)))
		snprintf(why, sizeof(why), "shape or element type differs");
	else
		shapes = true;
	if (shapes) {
		equal = !memcmp(x.data, y.data, x.count * x.elem_size);
		for (uint64_t i = 0; !equal && i < x.count; i++) {
			double u = element(&x, i), v = element(&y, i), d = fabs(u - v);
			double rel = d / (fabs(u) > 1e-30 ? fabs(u) : 1e-30);

			if (isnan(u) != isnan(v))
				d = rel = INFINITY;
			if (d > max_abs)
				max_abs = d;
			if (rel > max_rel)
				max_rel = rel;
			over += d > 0 || isnan(u) != isnan(v);
		}
	}
	rt_npy_release(&x);
	rt_npy_release(&y);
	if (equal && !r->all)
		return;
	r->n_tensors += !equal;
	if (r->json) {
		rt_json_object(&r->j, NULL, RT_JSON_INLINE);
		rt_json_str(&r->j, "tensor", name);
		rt_json_bool(&r->j, "equal", equal);
		if (why[0])
			rt_json_str(&r->j, "why", why);
		if (shapes && !equal) {
			rt_json_fixed(&r->j, "max_abs_error", max_abs, 9);
			rt_json_fixed(&r->j, "max_rel_error", max_rel, 9);
			rt_json_u64(&r->j, "elements_differ", over);
		}
		rt_json_close(&r->j);
	} else if (equal) {
		rt_buf_printf(&r->out, "    %-24s the same\n", name);
	} else if (why[0]) {
		rt_buf_printf(&r->out, "    %-24s %s\n", name, why);
	} else {
		rt_buf_printf(&r->out, "    %-24s %llu elements differ: max abs error %.6g, max rel "
			      "error %.6g\n", name, (unsigned long long)over, max_abs, max_rel);
	}
}

static void tensors(struct report *r, const struct side *a, const struct side *b)
{
	char **na, **nb;
	size_t ca = npy_names(a->path, &na), cb = npy_names(b->path, &nb);

	for (size_t i = 0; i < ca; i++) {
		bool in_b = false;

		for (size_t k = 0; k < cb && !in_b; k++)
			in_b = !strcmp(na[i], nb[k]);
		tensor_diff(r, a, b, na[i], true, in_b);
	}
	for (size_t k = 0; k < cb; k++) {
		bool in_a = false;

		for (size_t i = 0; i < ca && !in_a; i++)
			in_a = !strcmp(na[i], nb[k]);
		if (!in_a)
			tensor_diff(r, a, b, nb[k], false, true);
	}
	for (size_t i = 0; i < ca; i++)
		free(na[i]);
	for (size_t k = 0; k < cb; k++)
		free(nb[k]);
	free(na);
	free(nb);
}

/* ---------------------------------------------------------------- main */

static void side_release(struct side *s)
{
	for (size_t i = 0; i < s->ran.n; i++)
		free(s->ran.items[i].path);
	for (size_t i = 0; i < s->stats.n; i++)
		free(s->stats.items[i].path);
	free(s->ran.items);
	free(s->stats.items);
	rt_jval_release(&s->root);
}

/* Runs the comparison into r->out (text) or r->j (json). */
static void compare(struct report *r, struct side *a, struct side *b)
{
	const char *da = rt_jval_str(rt_jval_get(&a->root, "delivery_digest"));
	const char *db = rt_jval_str(rt_jval_get(&b->root, "delivery_digest"));
	bool digest_same = da && db && !strcmp(da, db);
	size_t mark;

	if (r->json) {
		rt_json_object(&r->j, NULL, RT_JSON_LINES);
		rt_json_str(&r->j, "a", a->dir);
		rt_json_str(&r->j, "b", b->dir);
		rt_json_bool(&r->j, "digest_same", digest_same);
		rt_json_array(&r->j, "config", RT_JSON_LINES);
	} else {
		rt_buf_printf(&r->out, "kernbench diff %s %s\n  what ran:\n", a->dir, b->dir);
	}
	mark = r->out.len;
	each_key(&a->ran, &b->ran, ran_diff, r);
	if (r->json) {
		rt_json_close(&r->j);
		rt_json_array(&r->j, "statistics", RT_JSON_LINES);
	} else {
		if (r->out.len == mark)
			rt_buf_printf(&r->out, "    the same\n");
		rt_buf_printf(&r->out, "  delivery digest: %s (%s, %s)\n  statistics:\n",
			      digest_same ? "the same" : "differs", da ? da : "none", db ? db : "none");
		mark = r->out.len;
	}
	each_key(&a->stats, &b->stats, stat_diff, r);
	if (r->json) {
		rt_json_close(&r->j);
		rt_json_array(&r->j, "tensors", RT_JSON_LINES);
	} else {
		if (r->out.len == mark)
			rt_buf_printf(&r->out, "    the same (%zu compared)\n", r->compared);
		else
			rt_buf_printf(&r->out, "    %zu of %zu differ\n", r->n_stats, r->compared);
		rt_buf_printf(&r->out, "  tensors:\n");
		mark = r->out.len;
	}
	tensors(r, a, b);
	if (r->json) {
		rt_json_close(&r->j);
		rt_json_bool(&r->j, "same", !r->n_ran && !r->n_stats && !r->n_tensors && digest_same);
		rt_json_close(&r->j);
		rt_buf_append(&r->out, "\n", 1);
	} else {
		if (r->out.len == mark)
			rt_buf_printf(&r->out, "    the same\n");
		rt_buf_printf(&r->out, "  result: %s\n", !r->n_ran && !r->n_stats && !r->n_tensors &&
							      digest_same ? "the same" : "they differ");
	}
	r->n_stats += !digest_same;
}

int kb_diff(const char *dir_a, const char *dir_b, bool json, bool all)
{
	struct report r = { .json = json, .all = all };
	struct side a = { 0 }, b = { 0 };
	int rc;

	a.dir = dir_a;
	b.dir = dir_b;
	rc = load(&a);
	if (!rc)
		rc = load(&b);
	if (rc) {
		side_release(&a);
		side_release(&b);
		return rc;
	}
	rt_buf_init(&r.out);
	rt_json_init(&r.j, &r.out);
	compare(&r, &a, &b);
	if (r.json && rt_json_finish(&r.j)) {
		fprintf(stderr, "kernbench: error: diff: %s\n", rt_last_error());
		rc = 2;
	} else {
		fputs(r.out.data ? r.out.data : "", stdout);
		rc = r.n_ran || r.n_stats || r.n_tensors ? 1 : 0;
	}
	rt_buf_release(&r.out);
	side_release(&a);
	side_release(&b);
	return rc;
}
