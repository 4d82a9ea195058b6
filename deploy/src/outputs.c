/* outputs.c — merges the daemons' output parts into the run's outputs.
 *
 * Every component wrote its own parts (op log lines with a sort key, trace
 * events, statistics) in its own event order. Merging by a key that does not
 * mention daemons makes the outputs identical whatever the transport or
 * colocation:
 *   op_log.jsonl  all records sorted by (start, end, component, seq)
 *   trace.json    metadata, then each component's events in id order
 *   summary.json  statistics from the components' end-of-run reports (BYE),
 *                 summed (or maxed) over components, by kind */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher.h"
#include "report.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/event.h"

#define OPLOG_KEY_LEN 66 /* "%020 %020 %010 %012 " */

static void part_path(const struct rt_job *job, const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s/%s", job->out_dir, RT_PARTS_DIR, name);
}

/* Reads a part if it exists (a component that wrote nothing has none). */
static enum rt_err read_part(const struct rt_job *job, const char *name, struct rt_buf *b)
{
	char path[RT_PATH_MAX + 64];

	part_path(job, name, path, sizeof(path));
	rt_buf_reset(b);
	if (access(path, F_OK))
		return RT_EOK;
	return rt_buf_read_file(b, path);
}

static void out_path(const struct rt_job *job, const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", job->out_dir, name);
}

/* ---------------------------------------------------------------- op log */

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static enum rt_err gather_oplog(const struct rt_job *job, const struct rt_topology *topo,
				struct rt_buf *all)
{
	struct rt_buf part;
	char name[32];
	enum rt_err err = RT_EOK;

	rt_buf_init(&part);
	for (uint32_t id = 0; !err && id < topo->n_components; id++) {
		snprintf(name, sizeof(name), "%u.oplog", id);
		err = read_part(job, name, &part);
		if (!err && part.len)
			err = rt_buf_append(all, part.data, part.len);
	}
	rt_buf_release(&part);
	return err;
}

static enum rt_err write_oplog(const struct rt_job *job, const struct rt_topology *topo)
{
	struct rt_buf all, out;
	char **lines = NULL, path[RT_PATH_MAX + 32];
	size_t n = 0;
	enum rt_err err;

	rt_buf_init(&all);
	rt_buf_init(&out);
	err = gather_oplog(job, topo, &all);
	for (size_t i = 0; !err && i < all.len; i++)
		n += all.data[i] == '\n';
	lines = calloc(n ? n : 1, sizeof(*lines));
	if (!err && !lines)
		err = rt_fail(RT_ENOMEM, "cannot sort %zu op log records", n);
	for (size_t i = 0, k = 0; !err && k < n; k++) {
		char *nl = strchr(all.data + i, '\n');

		lines[k] = all.data + i;
		*nl = '\0';
		i = (size_t)(nl - all.data) + 1;
	}
	if (!err)
		qsort(lines, n, sizeof(*lines), line_cmp);
	for (size_t k = 0; !err && k < n; k++) {
		err = strlen(lines[k]) > OPLOG_KEY_LEN
			      ? rt_buf_printf(&out, "%s\n", lines[k] + OPLOG_KEY_LEN)
			      : rt_fail(RT_EIO, "corrupt op log part line: %.60s", lines[k]);
	}
	out_path(job, "op_log.jsonl", path, sizeof(path));
	if (!err)
		err = rt_buf_write_file(&out, path);
	free(lines);
	rt_buf_release(&all);
	rt_buf_release(&out);
	return err;
}

/* ---------------------------------------------------------------- trace */

static void trace_metadata(const struct rt_topology *topo, struct rt_buf *b)
{
	uint32_t last_rank = UINT32_MAX;

	for (uint32_t id = 0; id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];

		if (c->rank != last_rank) {
			rt_buf_printf(b, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,"
				      "\"args\":{\"name\":\"rank %u\"}},\n", c->rank, c->rank);
			last_rank = c->rank;
		}
		rt_buf_printf(b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
			      "\"args\":{\"name\":", c->rank, id);
		rt_buf_json_str(b, c->name);
		rt_buf_printf(b, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,"
			      "\"tid\":%u,\"args\":{\"sort_index\":%u}},\n", c->rank, id, id);
	}
}

static enum rt_err write_trace(const struct rt_job *job, const struct rt_topology *topo)
{
	struct rt_buf out, part;
	char name[32], path[RT_PATH_MAX + 32];
	enum rt_err err = RT_EOK;

	if (job->trace_off)
		return RT_EOK;
	rt_buf_init(&out);
	rt_buf_init(&part);
	rt_buf_printf(&out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
	trace_metadata(topo, &out);
	for (uint32_t id = 0; !err && id <= topo->n_components; id++) {
		if (id < topo->n_components)
			snprintf(name, sizeof(name), "%u.trace", id);
		else
			snprintf(name, sizeof(name), "coord.trace");
		err = read_part(job, name, &part);
		if (!err && part.len)
			err = rt_buf_append(&out, part.data, part.len);
	}
	/* a closing event without a trailing comma keeps the JSON valid */
	rt_buf_printf(&out, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":0,\"tid\":0,"
		      "\"args\":{\"sort_index\":0}}\n]}\n");
	out_path(job, "trace.json", path, sizeof(path));
	if (!err)
		err = rt_buf_write_file(&out, path);
	rt_buf_release(&out);
	rt_buf_release(&part);
	return err;
}

/* ---------------------------------------------------------------- stats */

static struct kb_stat *stat_slot(struct kb_stat_set *set, const char *name, bool is_max)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->items[i].name, name))
			return &set->items[i];
	if (set->n == set->cap) {
		size_t cap = set->cap ? 2 * set->cap : 16;
		struct kb_stat *grown = realloc(set->items, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		set->items = grown;
		set->cap = cap;
	}
	set->items[set->n] = (struct kb_stat){ .name = name, .is_max = is_max };
	return &set->items[set->n++];
}

static enum rt_err stat_merge(struct kb_stat_set *set, const char *name, bool is_max, uint64_t v)
{
	struct kb_stat *s = stat_slot(set, name, is_max);

	if (!s)
		return rt_fail(RT_ENOMEM, "cannot merge statistic %s: out of memory", name);
	if (is_max)
		s->value = v > s->value ? v : s->value;
	else
		s->value += v;
	return RT_EOK;
}

/* The per-kind sum and max sets of `kind`, made on first use. */
static enum rt_err kind_sets(struct kb_agg *agg, const char *kind, struct kb_stat_set **sum,
			     struct kb_stat_set **max)
{
	size_t i = 0;

	while (i < agg->n_kinds && strcmp(agg->kinds[i].kind, kind))
		i++;
	if (i == agg->n_kinds) {
		if (agg->n_kinds == agg->cap_kinds) {
			size_t cap = agg->cap_kinds ? 2 * agg->cap_kinds : 8;
			struct kb_stat_set *k = realloc(agg->kinds, cap * sizeof(*k));

			if (k)
				agg->kinds = k;
			k = k ? realloc(agg->kinds_max, cap * sizeof(*k)) : NULL;
			if (!k)
				return rt_fail(RT_ENOMEM, "cannot merge statistics: out of memory");
			agg->kinds_max = k;
			agg->cap_kinds = cap;
		}
		agg->kinds[i] = (struct kb_stat_set){ .kind = kind };
		agg->kinds_max[i] = (struct kb_stat_set){ .kind = kind };
		agg->n_kinds++;
	}
	*sum = &agg->kinds[i];
	*max = &agg->kinds_max[i];
	return RT_EOK;
}

/* Adds one statistic of one component to the totals and to its kind. */
static enum rt_err absorb_stat(struct kb_agg *agg, struct kb_stat_set *kind,
			       struct kb_stat_set *kind_max, const char *name, bool is_max,
			       uint64_t v)
{
	enum rt_err err = stat_merge(&agg->totals, name, is_max, v);

	if (!err)
		err = stat_merge(kind, name, is_max, v);
	return err ? err : stat_merge(kind_max, name, true, v);
}

static enum rt_err absorb_report(struct kb_agg *agg, const struct rt_component_desc *c,
				 uint32_t id, const Kb__ComponentReport *r)
{
	struct kb_stat_set *kind = NULL, *kind_max = NULL;
	enum rt_err err = kind_sets(agg, c->ops->name, &kind, &kind_max);

	agg->digest = rt_hash_u64(rt_hash_u64(agg->digest, id), r->digest);
	if (!err)
		err = absorb_stat(agg, kind, kind_max, "delivered", false, r->delivered);
	if (!err)
		err = absorb_stat(agg, kind, kind_max, "last_ps", true, r->last_ps);
	for (size_t i = 0; !err && i < r->n_stats; i++)
		err = absorb_stat(agg, kind, kind_max, r->stats[i]->name, r->stats[i]->is_max,
				  r->stats[i]->value);
	return err;
}

enum rt_err kb_agg_build(struct kb_agg *agg, const struct rt_topology *topo,
			 const struct rt_end_reports *reports)
{
	enum rt_err err = RT_EOK;

	memset(agg, 0, sizeof(*agg));
	agg->digest = RT_HASH_INIT;
	for (uint32_t id = 0; !err && id < topo->n_components; id++) {
		const Kb__ComponentReport *r = id < reports->n_components ? reports->by_id[id] : NULL;

		err = r ? absorb_report(agg, &topo->components[id], id, r)
			: rt_fail(RT_EIO, "component %s sent no end-of-run report",
				  topo->components[id].name);
	}
	return err;
}

void kb_agg_release(struct kb_agg *agg)
{
	for (size_t i = 0; i < agg->n_kinds; i++) {
		free(agg->kinds[i].items);
		free(agg->kinds_max[i].items);
	}
	free(agg->kinds);
	free(agg->kinds_max);
	free(agg->totals.items);
	memset(agg, 0, sizeof(*agg));
}

uint64_t kb_stat_get(const struct kb_stat_set *set, const char *name)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->items[i].name, name))
			return set->items[i].value;
	return 0;
}

const struct kb_stat_set *kb_agg_kind(const struct kb_agg *agg, const char *kind)
{
	static const struct kb_stat_set empty;

	for (size_t i = 0; i < agg->n_kinds; i++)
		if (!strcmp(agg->kinds[i].kind, kind))
			return &agg->kinds[i];
	return &empty;
}

const struct kb_stat_set *kb_agg_kind_max(const struct kb_agg *agg, const char *kind)
{
	const struct kb_stat_set *set = kb_agg_kind(agg, kind);

	return set->n ? &agg->kinds_max[set - agg->kinds] : set;
}

/* ---------------------------------------------------------------- cleanup */

void kb_outputs_discard(const struct rt_job *job)
{
	char dir[RT_PATH_MAX + 16], path[RT_PATH_MAX + 300];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/%s", job->out_dir, RT_PARTS_DIR);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

enum rt_err kb_outputs_merge(const struct rt_job *job, const struct rt_topology *topo,
			     const struct kb_run_facts *facts)
{
	struct kb_agg agg;
	enum rt_err err = kb_agg_build(&agg, topo, &facts->reports);

	if (!err)
		err = write_oplog(job, topo);
	if (!err)
		err = write_trace(job, topo);
	if (!err)
		err = kb_report_write(job, topo, facts, &agg);
	kb_outputs_discard(job);
	kb_agg_release(&agg);
	return err;
}
