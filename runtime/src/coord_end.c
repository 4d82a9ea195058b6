/* coord_end.c — the end of a run: BYE reports indexed by component and
 * checked for unfinished work. */
#include "rt/coord.h"

#include <stdlib.h>
#include <string.h>

#include "coord_internal.h"
#include "rt/sock.h"
#include "rt/wire.h"

void rt_end_reports_release(struct rt_end_reports *r)
{
	for (uint32_t i = 0; r->byes && i < r->n_byes; i++)
		rt_wire_free_sync(r->byes[i]);
	free(r->byes);
	free(r->by_id);
	memset(r, 0, sizeof(*r));
}

void rt_coord_take_reports(struct rt_coord *c, struct rt_end_reports *out)
{
	*out = c->reports;
	memset(&c->reports, 0, sizeof(c->reports));
}

/* Indexes the reports of daemon `i`'s BYE, which must cover exactly the
 * components it hosts. */
static enum rt_err index_reports(struct rt_coord *c, uint32_t i, const Kb__Bye *bye)
{
	const struct rt_topology *t = c->topo;
	char name[128];
	uint32_t hosted = c->peers[i].n_hosted;

	for (size_t k = 0; k < bye->n_reports; k++) {
		uint32_t id = bye->reports[k]->component;

		if (id >= t->n_components || c->peer_of[id] != i ||
		    c->reports.by_id[id])
			return rt_fail(RT_EPROTOCOL, "daemon %s reported on component %u, "
				       "which it does not host (or twice)",
				       coord_peer_name(c, i, name, sizeof(name)), id);
		c->reports.by_id[id] = bye->reports[k];
	}
	if (hosted != bye->n_reports)
		return rt_fail(RT_EPROTOCOL, "daemon %s reported on %zu components, it hosts %u",
			       coord_peer_name(c, i, name, sizeof(name)), bye->n_reports, hosted);
	return RT_EOK;
}

/* One line naming every component that left work unfinished, in component
 * order (the first few in full; the line has to fit an error message). */
static enum rt_err check_unfinished(struct rt_coord *c)
{
	struct rt_buf line;
	uint32_t shown = 0, more = 0;
	enum rt_err err = RT_EOK;

	rt_buf_init(&line);
	for (uint32_t id = 0; id < c->reports.n_components; id++) {
		/* an agent's coordinator has no report of other hosts' components */
		const char *what = c->reports.by_id[id] ? c->reports.by_id[id]->unfinished : NULL;

		if (!what || !*what)
			continue;
		if (line.len + strlen(what) > 760 && shown) {
			more++;
			continue;
		}
		rt_buf_printf(&line, "%s%s", shown++ ? "; " : "", what);
	}
	if (more)
		rt_buf_printf(&line, "; and %u more unfinished component%s", more,
			      more > 1 ? "s" : "");
	if (shown)
		err = rt_fail(RT_EUNFINISHED, "%s", line.data);
	rt_buf_release(&line);
	return err;
}

enum rt_err coord_collect_bye(struct rt_coord *c)
{
	struct rt_end_reports *r = &c->reports;

	r->byes = calloc(c->n_peers, sizeof(*r->byes));
	r->by_id = calloc(c->topo->n_components ? c->topo->n_components : 1, sizeof(*r->by_id));
	if (!r->byes || !r->by_id)
		return rt_fail(RT_ENOMEM, "coordinator: out of memory");
	r->n_components = c->topo->n_components;
	for (uint32_t got = 0; got < c->n_present;) {
		Kb__Sync *s = NULL;
		uint32_t i;
		enum rt_err err = coord_recv_from_any(c, &i, &s, WAIT_BYE, 0);

		if (err)
			return err;
		if (s->body_case != KB__SYNC__BODY_BYE && !c->peers[i].answered && c->ops->before_bye) {
			bool taken = false;

			err = c->ops->before_bye(c, i, s, &taken);
			if (err || taken) {
				rt_wire_free_sync(s);
				if (err)
					return err;
				continue;
			}
		}
		if (s->body_case != KB__SYNC__BODY_BYE || c->peers[i].answered)
			err = coord_frame_error(c, i, s, "BYE", WAIT_BYE);
		else
			err = index_reports(c, i, s->bye);
		if (!err && s->body_case == KB__SYNC__BODY_BYE && c->ops->bye)
			err = c->ops->bye(c, i, s->bye);
		r->byes[r->n_byes++] = s; /* the index points into it */
		if (err)
			return err;
		c->peers[i].answered = true;
		c->peers[i].gone = true;
		got++;
	}
	if (c->ops->all_bye) {
		enum rt_err err = c->ops->all_bye(c);

		if (err)
			return err;
	}
	return check_unfinished(c);
}
