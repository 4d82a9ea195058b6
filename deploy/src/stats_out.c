/* stats_out.c — stats.csv and summary.json's per-instance statistics
 * (stats_out.h). */
#include "stats_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/grow.h"
#include "rt/json.h"

/* What a row says about its statistic. */
struct row_stat {
	const char *name, *unit, *description;
	bool is_max, per_instance;
};

/* The runtime's own counts of every component and the energy row: the
 * runtime and energy.c define them, so their units live here. */
static const struct row_stat delivered_row = { "delivered", "messages",
					       "messages delivered to the component", false, false };
static const struct row_stat last_row = { "last_ps", "ps", "time of the component's last event",
					  true, false };
static const struct row_stat energy_row = {
	"energy_fj", "fJ",
	"energy of the component: its op counts priced by energy.*, plus its static power over "
	"the simulated time", false, false
};

/* Calls `row` for every statistic of component `id`, in report order. */
typedef void (*row_fn)(void *arg, const struct row_stat *st, uint64_t value);

static void each_row(const Kb__ComponentReport *r, const struct kb_energy *e, uint32_t id,
		     row_fn row, void *arg)
{
	row(arg, &delivered_row, r->delivered);
	row(arg, &last_row, r->last_ps);
	for (size_t i = 0; i < r->n_stats; i++) {
		const Kb__Stat *s = r->stats[i];
		struct row_stat rs = { s->name, s->unit, s->description, s->is_max,
				       s->per_instance };

		row(arg, &rs, s->value);
	}
	if (e && id < e->n_components)
		row(arg, &energy_row, e->per_component[id]);
}

/* ---------------------------------------------------------------- csv */

struct csv_row {
	struct rt_buf *b;
	const struct rt_component_desc *c;
	enum rt_err err;
};

static void csv_row(void *arg, const struct row_stat *st, uint64_t value)
{
	struct csv_row *w = arg;
	char pe[16] = "";

	if (w->c->pe != UINT32_MAX)
		snprintf(pe, sizeof(pe), "%u", w->c->pe);
	if (!w->err)
		w->err = kb_csv_u64(w->b, w->c->rank, true);
	if (!w->err)
		w->err = kb_csv_field(w->b, pe, false);
	if (!w->err)
		w->err = kb_csv_field(w->b, w->c->name, false);
	if (!w->err)
		w->err = kb_csv_field(w->b, w->c->ops->name, false);
	if (!w->err)
		w->err = kb_csv_field(w->b, st->name, false);
	if (!w->err)
		w->err = kb_csv_u64(w->b, value, false);
	if (!w->err)
		w->err = kb_csv_field(w->b, st->unit, false);
	if (!w->err)
		w->err = kb_csv_field(w->b, st->description, false);
	if (!w->err)
		w->err = rt_buf_append(w->b, "\n", 1);
}

enum rt_err kb_stats_csv_write(const struct rt_job *job, const struct rt_topology *topo,
			       const struct rt_end_reports *reports,
			       const struct kb_energy *energy)
{
	struct rt_buf b;
	struct csv_row w = { .b = &b };
	char path[RT_PATH_MAX + 32];

	rt_buf_init(&b);
	w.err = rt_buf_printf(&b, "rank,pe,component,kind,statistic,value,unit,description\n");
	for (uint32_t id = 0; !w.err && id < topo->n_components; id++) {
		if (id >= reports->n_components || !reports->by_id[id])
			continue;
		w.c = &topo->components[id];
		each_row(reports->by_id[id], energy, id, csv_row, &w);
	}
	snprintf(path, sizeof(path), "%s/stats.csv", job->out_dir);
	if (!w.err)
		w.err = rt_buf_write_file(&b, path);
	rt_buf_release(&b);
	return w.err;
}

/* ---------------------------------------------------------------- json */

/* One statistic's declaration as a kind first showed it. */
struct info {
	const char *kind;
	struct row_stat st; /* borrows the report's strings */
};

struct infos {
	struct info *items;
	size_t n, cap;
	const char *kind;
	bool failed;
};

static void info_row(void *arg, const struct row_stat *st, uint64_t value)
{
	struct infos *in = arg;

	(void)value;
	for (size_t i = 0; i < in->n; i++)
		if (!strcmp(in->items[i].kind, in->kind) && !strcmp(in->items[i].st.name, st->name))
			return;
	if (!RT_GROW(in->items, in->cap, in->n, 64)) {
		in->failed = true;
		return;
	}
	in->items[in->n++] = (struct info){ in->kind, *st };
}

/* "stat_info": kinds in first-seen order, each kind's statistics in the
 * order its components first reported them. */
static void stat_info(struct rt_json *j, const struct rt_topology *topo,
		      const struct rt_end_reports *reports, const struct kb_energy *e)
{
	struct infos in = { 0 };

	for (uint32_t id = 0; id < topo->n_components; id++) {
		if (id >= reports->n_components || !reports->by_id[id])
			continue;
		in.kind = topo->components[id].ops->name;
		each_row(reports->by_id[id], e, id, info_row, &in);
	}
	if (in.failed)
		j->err = rt_fail(RT_ENOMEM, "cannot list the statistics: out of memory");
	rt_json_object(j, "stat_info", RT_JSON_LINES);
	for (size_t i = 0; i < in.n; i++) {
		const char *kind = in.items[i].kind;
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = !strcmp(in.items[k].kind, kind);
		if (seen)
			continue;
		rt_json_object(j, kind, RT_JSON_LINES);
		for (size_t k = i; k < in.n; k++) {
			const struct row_stat *st = &in.items[k].st;

			if (strcmp(in.items[k].kind, kind))
				continue;
			rt_json_object(j, st->name, RT_JSON_INLINE);
			rt_json_str(j, "unit", st->unit);
			rt_json_str(j, "description", st->description);
			rt_json_str(j, "merge", st->is_max ? "max" : "sum");
			if (st->per_instance)
				rt_json_bool(j, "per_instance", true);
			rt_json_close(j);
		}
		rt_json_close(j);
	}
	rt_json_close(j);
	free(in.items);
}

static void json_row(void *arg, const struct row_stat *st, uint64_t value)
{
	rt_json_u64(arg, st->name, value);
}

void kb_stats_json(struct rt_json *j, const struct rt_topology *topo,
		   const struct rt_end_reports *reports, const struct kb_energy *energy)
{
	stat_info(j, topo, reports, energy);
	rt_json_object(j, "instances", RT_JSON_LINES);
	for (uint32_t id = 0; id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];

		if (id >= reports->n_components || !reports->by_id[id])
			continue;
		rt_json_object(j, c->name, RT_JSON_INLINE);
		rt_json_u64(j, "rank", c->rank);
		if (c->pe == UINT32_MAX)
			rt_json_null(j, "pe");
		else
			rt_json_u64(j, "pe", c->pe);
		rt_json_str(j, "kind", c->ops->name);
		rt_json_object(j, "stats", RT_JSON_INLINE);
		each_row(reports->by_id[id], energy, id, json_row, j);
		rt_json_close(j);
		rt_json_close(j);
	}
	rt_json_close(j);
}
