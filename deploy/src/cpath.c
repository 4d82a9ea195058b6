/* cpath.c — critical_path.jsonl: the run's critical path as segments.
 *
 * Every component with the trace on writes a segment record per message it
 * sends with a critical path (rt/path.h): the time it added to the path on
 * itself, since the message the path last crossed (`pred`). The kernel host
 * that ended last wrote one more at its end. Walking `pred` back from there
 * gives the path's segments, latest first, one pread each; they are written
 * in time order, one JSON line each, and `kernbench plot` draws them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "rt/daemon.h"
#include "rt/grow.h"
#include "rt/json.h"
#include "npu/pe.h"

#define FD_CACHE 64 /* open parts kept, by component id mod this */

struct seg_at {
	struct rt_path_seg seg;
	uint32_t comp;
};

struct walk {
	const struct rt_job *job;
	int fd[FD_CACHE];
	uint32_t fd_comp[FD_CACHE];
	struct seg_at *segs;
	size_t n, cap;
};

/* Segment `k` of component `comp` (rt_path_read_fn). */
static enum rt_err read_seg(void *ctx, uint32_t comp, uint64_t k, struct rt_path_seg *out)
{
	struct walk *w = ctx;
	unsigned slot = comp % FD_CACHE;
	char path[RT_PATH_MAX + 64];

	if (w->fd[slot] < 0 || w->fd_comp[slot] != comp) {
		if (w->fd[slot] >= 0)
			close(w->fd[slot]);
		snprintf(path, sizeof(path), "%s/%s/%u.cpath", w->job->out_dir, RT_PARTS_DIR, comp);
		w->fd[slot] = open(path, O_RDONLY | O_CLOEXEC);
		w->fd_comp[slot] = comp;
		if (w->fd[slot] < 0)
			return rt_fail(RT_EIO, "critical path: cannot open %s: %s", path, strerror(errno));
	}
	if (k > UINT64_MAX / RT_PATH_SEG_BYTES ||
	    pread(w->fd[slot], out, sizeof(*out), (off_t)(k * RT_PATH_SEG_BYTES)) !=
		    (ssize_t)sizeof(*out))
		return rt_fail(RT_EDECODE, "critical path: component %u has no segment %llu", comp,
			       (unsigned long long)k);
	return RT_EOK;
}

/* Keeps one segment (rt_path_visit_fn). */
static enum rt_err push(void *ctx, uint32_t comp, const struct rt_path_seg *seg)
{
	struct walk *w = ctx;

	if (!RT_GROW(w->segs, w->cap, w->n, 256))
		return rt_fail(RT_ENOMEM, "critical path: out of memory at %zu segments", w->n);
	w->segs[w->n++] = (struct seg_at){ *seg, comp };
	return RT_EOK;
}

static enum rt_err write_lines(const struct walk *w, const struct rt_topology *topo)
{
	char path[RT_PATH_MAX + 32];
	struct rt_buf b;
	struct rt_json j;
	enum rt_err err;

	rt_buf_init(&b);
	for (size_t i = w->n; i-- > 0;) { /* oldest first */
		const struct seg_at *s = &w->segs[i];
		const struct rt_component_desc *c = &topo->components[s->comp];

		rt_json_init(&j, &b);
		rt_json_object(&j, NULL, RT_JSON_COMPACT);
		rt_json_u64(&j, "start_ps", s->seg.start_ps);
		rt_json_u64(&j, "end_ps", s->seg.end_ps);
		rt_json_u64(&j, "rank", c->rank);
		if (c->pe != PE_RANK_LEVEL)
			rt_json_u64(&j, "pe", c->pe);
		rt_json_str(&j, "component", c->name);
		rt_json_str(&j, "class", rt_path_class_name((enum rt_path_class)s->seg.cls));
		rt_json_close(&j);
		err = rt_json_finish(&j);
		if (err)
			break;
		rt_buf_append(&b, "\n", 1);
	}
	snprintf(path, sizeof(path), "%s/critical_path.jsonl", w->job->out_dir);
	err = rt_buf_write_file(&b, path);
	rt_buf_release(&b);
	return err;
}

enum rt_err kb_cpath_write(const struct rt_job *job, const struct rt_topology *topo,
			   const struct kb_agg *agg)
{
	struct walk w = { .job = job };
	enum rt_err err;

	if (job->trace_off || !agg->has_path || !agg->path_segment)
		return RT_EOK;
	for (int i = 0; i < FD_CACHE; i++)
		w.fd[i] = -1;
	/* every segment but the start's ends at a message's delivery */
	err = rt_path_walk(read_seg, push, &w, topo->n_components, agg->path_host,
			   agg->path_segment - 1, kb_stat_get(&agg->totals, "delivered") + 2);
	if (!err && (w.segs[w.n - 1].seg.start_ps != 0 || w.segs[0].seg.end_ps != agg->path_ps))
		err = rt_fail(RT_EPROTOCOL, "critical path: its segments cover [%llu, %llu] ps, not "
			      "[0, %llu]", (unsigned long long)w.segs[w.n - 1].seg.start_ps,
			      (unsigned long long)w.segs[0].seg.end_ps,
			      (unsigned long long)agg->path_ps);
	if (!err)
		err = write_lines(&w, topo);
	for (int i = 0; i < FD_CACHE; i++)
		if (w.fd[i] >= 0)
			close(w.fd[i]);
	free(w.segs);
	return err;
}
