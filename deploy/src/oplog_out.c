/* oplog_out.c — op_log.jsonl from the components' binary op log parts.
 *
 * Components append fixed records (struct rt_oplog_bin, rt/trace.h) while
 * simulating and keep a table of the strings they name; this file merges
 * every part in (start, end, component, seq) order and formats each record
 * once, here (ADR 0055). The merge is a stream (merge.h): each part is cut
 * into sorted runs — a chunk already in order is read in place, any other
 * is sorted into a run file — and a heap merges the runs through small
 * buffers, so the launcher never holds the whole log. On the way, each
 * rank's HBM busy time (the union of its DMA records' intervals) is swept;
 * with --op-log off the DMA engines still write their records for that
 * sweep and nothing is formatted. */
#include "oplog_out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ff_out.h"
#include "merge.h"
#include "steps.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/json.h"
#include "rt/trace.h"

#define REC sizeof(struct rt_oplog_bin)
#define OUT_FLUSH (1u << 20)

static int rec_order(const struct rt_oplog_bin *a, const struct rt_oplog_bin *b)
{
	if (a->start_ps != b->start_ps)
		return a->start_ps < b->start_ps ? -1 : 1;
	if (a->end_ps != b->end_ps)
		return a->end_ps < b->end_ps ? -1 : 1;
	if (a->comp != b->comp)
		return a->comp < b->comp ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static int rec_cmp(const void *a, const void *b)
{
	return rec_order(a, b);
}

/* Each component's strings, JSON-quoted once: name `id` of component `c`
 * is text[off[c][id], off[c][id + 1]). */
struct names {
	struct rt_buf text;
	size_t **off;
	uint32_t *n;
};

/* A run: [off, end) of a part (file = component id) or of the run file
 * (file = n_parts); head is its current record while merging. */
struct run {
	uint32_t file;
	uint64_t off, end;
	struct kb_src src;
	struct rt_oplog_bin head;
	bool has_head;
};

struct oplog {
	const struct rt_job *job;
	const struct rt_topology *topo;
	char **paths;         /* part paths, then the run file's */
	uint32_t n_parts;
	struct run *runs;
	size_t cap_runs;
	uint32_t n_runs;
	struct kb_runs_file rf;
	struct rt_oplog_bin *chunk;
	size_t chunk_recs;    /* records sorted at a time */
	struct rt_oplog_bin last; /* the part's previous chunk's last record */
	struct names names;
	uint64_t *rec_bytes;  /* per part: its records' bytes (its string table follows) */
	uint32_t ranks;       /* HBM sweep, per rank: counted, current interval */
	uint64_t *busy, *from, *to;
	/* fast-forward's skips (ff_out.h): each adds its periods times the
	 * busy time of the period before it, swept alike per (skip, rank) */
	struct kb_ff_skip *skips;
	size_t n_skips;
	uint64_t maxp;        /* the longest skipped period */
	uint64_t *sbusy, *sfrom, *sto;
};

/* The union sweep of one interval into (busy, from, to); intervals come in
 * start order. */
static void sweep_into(uint64_t *busy, uint64_t *from, uint64_t *to, uint64_t start, uint64_t end)
{
	if (start > *to) { /* a gap: close the interval so far */
		*busy += *to - *from;
		*from = start;
		*to = start;
	}
	if (end > *to)
		*to = end;
}

/* A DMA record into the period after each skip it overlaps (simulated in
 * full: what was in flight at the skip is before it). */
static void skips_sweep_add(struct oplog *o, uint32_t k, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = o->n_skips;

	while (lo < hi) { /* the first window that may end after the start */
		size_t mid = lo + (hi - lo) / 2;

		if (o->skips[mid].at_ps + o->maxp <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < o->n_skips && o->skips[i].at_ps < end; i++) {
		const struct kb_ff_skip *s = &o->skips[i];
		uint64_t wlo = s->at_ps, whi = s->at_ps + s->period_ps;
		uint64_t a = start > wlo ? start : wlo, b = end < whi ? end : whi;
		size_t at = i * o->ranks + k;

		if (a < b)
			sweep_into(&o->sbusy[at], &o->sfrom[at], &o->sto[at], a, b);
	}
}

static enum rt_err add_run(struct oplog *o, uint32_t file, uint64_t off, uint64_t end)
{
	struct run *grown = kb_grow(o->runs, &o->cap_runs, o->n_runs, sizeof(*o->runs), 64);

	if (!grown)
		return rt_fail(RT_ENOMEM, "no memory to merge the op log");
	o->runs = grown;
	o->runs[o->n_runs++] = (struct run){ .file = file, .off = off, .end = end };
	return RT_EOK;
}

static bool chunk_sorted(const struct oplog *o, size_t n)
{
	for (size_t k = 1; k < n; k++)
		if (rec_order(&o->chunk[k - 1], &o->chunk[k]) > 0)
			return false;
	return true;
}

/* Checks what a record names exists: the parts are ours, but a truncated
 * or foreign file must fail with a line, not index out of bounds. */
static enum rt_err check_rec(const struct oplog *o, const struct rt_oplog_bin *r, uint32_t part,
			     const char *path)
{
	uint32_t c = r->comp;

	if ((part < o->n_parts && c != part) || c >= o->n_parts || r->engine >= o->names.n[c] ||
	    r->op_kind >= o->names.n[c] || r->op_name >= o->names.n[c])
		return rt_fail(RT_EPROTOCOL, "corrupt op log part %s: record %llu of component %u",
			       path, (unsigned long long)r->seq, c);
	return RT_EOK;
}

/* Makes records [0, n) at byte `off` of part `file` a run: in place when in
 * order (joined to the part's previous run when it continues it), else
 * sorted into the run file. */
static enum rt_err cut_chunk(struct oplog *o, uint32_t file, uint64_t off, size_t n, bool first)
{
	struct run *prev = o->n_runs ? &o->runs[o->n_runs - 1] : NULL;
	uint64_t at, len = (uint64_t)n * REC;
	enum rt_err err = RT_EOK;

	for (size_t k = 0; !err && k < n; k++)
		err = check_rec(o, &o->chunk[k], file, o->paths[file]);
	if (err || !n)
		return err;
	if (chunk_sorted(o, n)) {
		if (!first && prev && prev->file == file && prev->end == off &&
		    rec_order(&o->last, &o->chunk[0]) <= 0)
			prev->end = off + len;
		else
			err = add_run(o, file, off, off + len);
	} else {
		qsort(o->chunk, n, REC, rec_cmp);
		at = o->rf.size;
		err = kb_runs_file_write(&o->rf, o->chunk, (size_t)len);
		if (!err)
			err = add_run(o, o->n_parts, at, o->rf.size);
	}
	o->last = o->chunk[n - 1];
	return err;
}

static enum rt_err cut_part(struct oplog *o, uint32_t file)
{
	const char *path = o->paths[file];
	uint64_t off = 0, left = o->rec_bytes[file];
	FILE *f = left ? fopen(path, "rb") : NULL;
	size_t got;
	enum rt_err err = RT_EOK;

	if (!left)
		return RT_EOK; /* a component that logged nothing */
	if (!f)
		return rt_fail(RT_EIO, "cannot open %s: %s", path, strerror(errno));
	if (left % REC)
		err = rt_fail(RT_EPROTOCOL, "corrupt op log part %s: ends inside a record", path);
	for (bool first = true; !err && left; first = false) {
		size_t want = o->chunk_recs * REC < left ? o->chunk_recs * REC : (size_t)left;

		got = fread(o->chunk, 1, want, f);
		if (got != want)
			err = rt_fail(RT_EIO, "cannot read %s", path);
		if (err)
			break;
		left -= got;
		err = cut_chunk(o, file, off, got / REC, first);
		off += got;
	}
	if (!err && ferror(f))
		err = rt_fail(RT_EIO, "cannot read %s", path);
	fclose(f);
	return err;
}

/* Component `c`'s string table, each name quoted for JSON once. */
static enum rt_err load_names(struct oplog *o, uint32_t c)
{
	char path[RT_PATH_MAX + 64];
	struct rt_trace_part p;
	enum rt_err err;

	snprintf(path, sizeof(path), "%s/%s/%u.oplog", o->job->out_dir, RT_PARTS_DIR, c);
	err = rt_trace_names_read(path, &p, &o->rec_bytes[c]);
	if (!err && !(o->names.off[c] = malloc((p.n_names + 1) * sizeof(size_t))))
		err = rt_fail(RT_ENOMEM, "no memory to read %s", path);
	for (uint32_t i = 0; !err && i < p.n_names; i++) {
		o->names.off[c][i] = o->names.text.len;
		err = rt_json_escape(&o->names.text, p.names[i]);
	}
	if (!err) {
		o->names.off[c][p.n_names] = o->names.text.len;
		o->names.n[c] = p.n_names;
	}
	rt_trace_part_release(&p);
	return err;
}

/* ---------------------------------------------------------------- HBM busy */

/* One record into its rank's busy time; records arrive in start order. */
static void hbm_sweep_add(struct oplog *o, const struct rt_oplog_bin *r)
{
	const struct rt_component_desc *c = &o->topo->components[r->comp];
	uint32_t k;

	if (strcmp(c->ops->name, "dma") || c->rank >= o->ranks)
		return;
	k = c->rank;
	sweep_into(&o->busy[k], &o->from[k], &o->to[k], r->start_ps, r->end_ps);
	if (o->n_skips)
		skips_sweep_add(o, k, r->start_ps, r->end_ps);
}

/* The busiest rank's HBM busy time. */
static uint64_t hbm_sweep_most(const struct oplog *o)
{
	uint64_t most = 0;

	for (uint32_t k = 0; k < o->ranks; k++) {
		uint64_t b = o->busy[k] + (o->to[k] - o->from[k]);

		for (size_t i = 0; i < o->n_skips; i++) {
			size_t at = i * o->ranks + k;

			b += o->skips[i].periods * (o->sbusy[at] + (o->sto[at] - o->sfrom[at]));
		}

		most = b > most ? b : most;
	}
	return most;
}

/* ---------------------------------------------------------------- format */

/* `v` in decimal at `p`; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_lit(char *p, const char *s, size_t len)
{
	memcpy(p, s, len);
	return p + len;
}

#define LIT(p, s) put_lit(p, s, sizeof(s) - 1)

static char *put_name(const struct oplog *o, char *p, uint32_t c, uint16_t id)
{
	size_t from = o->names.off[c][id], to = o->names.off[c][id + 1];

	return put_lit(p, o->names.text.data + from, to - from);
}

static size_t name_len(const struct oplog *o, uint32_t c, uint16_t id)
{
	return o->names.off[c][id + 1] - o->names.off[c][id];
}

/* One op_log.jsonl line, the bytes rt_json's compact object gave: the
 * keys in the order readers know, issue_ps last. */
static enum rt_err format_rec(const struct oplog *o, const struct rt_oplog_bin *r,
			      struct rt_buf *b)
{
	const struct rt_component_desc *c = &o->topo->components[r->comp];
	size_t room = 320 + name_len(o, r->comp, r->engine) + name_len(o, r->comp, r->op_kind) +
		      name_len(o, r->comp, r->op_name);
	enum rt_err err = rt_buf_reserve(b, room);
	char *p;

	if (err)
		return err;
	p = b->data + b->len;
	p = LIT(p, "{\"start_ps\":");
	p = put_u64(p, r->start_ps);
	p = LIT(p, ",\"end_ps\":");
	p = put_u64(p, r->end_ps);
	p = LIT(p, ",\"rank\":");
	p = put_u64(p, c->rank);
	p = LIT(p, ",\"pe\":");
	p = put_u64(p, c->pe);
	p = LIT(p, ",\"engine\":");
	p = put_name(o, p, r->comp, r->engine);
	p = LIT(p, ",\"op_kind\":");
	p = put_name(o, p, r->comp, r->op_kind);
	p = LIT(p, ",\"op_name\":");
	p = put_name(o, p, r->comp, r->op_name);
	p = LIT(p, ",\"bytes\":");
	p = put_u64(p, r->bytes);
	p = LIT(p, ",\"elements\":");
	p = put_u64(p, r->elements);
	p = LIT(p, ",\"composite\":");
	p = put_u64(p, r->command);
	p = LIT(p, ",\"stage\":");
	p = put_u64(p, r->stage);
	p = LIT(p, ",\"issue_ps\":");
	p = put_u64(p, r->issue_ps);
	p = LIT(p, "}\n");
	b->len = (size_t)(p - b->data);
	return RT_EOK;
}

/* ---------------------------------------------------------------- merge */

static int run_cmp(const void *ctx, uint32_t a, uint32_t b)
{
	const struct run *runs = ctx;

	return rec_order(&runs[a].head, &runs[b].head);
}

static enum rt_err run_next(struct oplog *o, uint32_t i)
{
	struct run *r = &o->runs[i];
	const void *item;
	enum rt_err err = kb_src_fixed(&r->src, REC, &item);

	r->has_head = !err && item;
	if (r->has_head)
		memcpy(&r->head, item, REC);
	return err;
}

static enum rt_err flush_out(struct rt_buf *b, FILE *out, const char *path)
{
	if (b->len && fwrite(b->data, 1, b->len, out) != b->len)
		return rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	rt_buf_reset(b);
	return RT_EOK;
}

/* One record into the program's steps: its component's place and engine. */
static void steps_add(const struct oplog *o, struct kb_steps *steps, const struct rt_oplog_bin *r)
{
	const struct rt_component_desc *c = &o->topo->components[r->comp];
	char engine[32];
	size_t len = name_len(o, r->comp, r->engine); /* a JSON string: quoted */

	if (len < 2 || len >= sizeof(engine))
		return; /* no engine a step counts has so long a name */
	*put_name(o, engine, r->comp, r->engine) = '\0';
	engine[len - 1] = '\0';
	kb_steps_record(steps, r->start_ps, r->end_ps, c->rank, c->pe, engine + 1);
}

/* Merges the runs into `out` (NULL: only the HBM sweep and the steps). */
static enum rt_err merge_runs(struct oplog *o, FILE *out, const char *path, struct kb_steps *steps)
{
	struct kb_heap heap;
	struct rt_buf text;
	size_t cap = kb_merge_buf_size(o->n_runs);
	enum rt_err err = kb_heap_init(&heap, o->n_runs, run_cmp, o->runs);

	rt_buf_init(&text);
	for (uint32_t i = 0; !err && i < o->n_runs; i++) {
		struct run *r = &o->runs[i];

		kb_src_init(&r->src, o->paths[r->file], r->off, r->end, cap);
		err = run_next(o, i);
		if (!err && r->has_head)
			kb_heap_push(&heap, i);
	}
	while (!err && heap.n) {
		uint32_t top = heap.ids[0];

		hbm_sweep_add(o, &o->runs[top].head);
		if (steps && steps->n)
			steps_add(o, steps, &o->runs[top].head);
		if (out)
			err = format_rec(o, &o->runs[top].head, &text);
		if (!err && text.len > OUT_FLUSH)
			err = flush_out(&text, out, path);
		if (!err)
			err = run_next(o, top);
		if (!err)
			kb_heap_fix_top(&heap, !o->runs[top].has_head);
	}
	if (!err && out)
		err = flush_out(&text, out, path);
	for (uint32_t i = 0; i < o->n_runs; i++)
		kb_src_release(&o->runs[i].src);
	kb_heap_release(&heap);
	rt_buf_release(&text);
	return err;
}

/* ---------------------------------------------------------------- entry */

static void oplog_release(struct oplog *o)
{
	for (uint32_t i = 0; o->paths && i <= o->n_parts; i++)
		free(o->paths[i]);
	free(o->paths);
	free(o->runs);
	free(o->chunk);
	kb_runs_file_close(&o->rf);
	for (uint32_t c = 0; o->names.off && c < o->n_parts; c++)
		free(o->names.off[c]);
	free(o->names.off);
	free(o->names.n);
	free(o->rec_bytes);
	rt_buf_release(&o->names.text);
	free(o->busy);
	free(o->skips);
	free(o->sbusy);
}

static enum rt_err oplog_init(struct oplog *o, const struct rt_job *job,
			      const struct rt_topology *topo)
{
	char dir[RT_PATH_MAX + 16];
	uint32_t n = topo->n_components;

	memset(o, 0, sizeof(*o));
	o->job = job;
	o->topo = topo;
	o->n_parts = n;
	rt_buf_init(&o->names.text);
	o->chunk_recs = kb_merge_chunk_bytes() / REC;
	o->chunk_recs = o->chunk_recs ? o->chunk_recs : 1;
	o->ranks = job->config.ranks ? job->config.ranks : 1;
	snprintf(dir, sizeof(dir), "%s/%s", job->out_dir, RT_PARTS_DIR);
	kb_runs_file_open(&o->rf, dir, "oplog.runs");
	o->paths = calloc(n + 1, sizeof(*o->paths));
	o->chunk = malloc(o->chunk_recs * REC);
	o->names.off = calloc(n ? n : 1, sizeof(*o->names.off));
	o->names.n = calloc(n ? n : 1, sizeof(*o->names.n));
	o->rec_bytes = calloc(n ? n : 1, sizeof(*o->rec_bytes));
	o->busy = calloc(3 * (size_t)o->ranks, sizeof(uint64_t));
	if (!o->paths || !o->chunk || !o->names.off || !o->names.n || !o->rec_bytes || !o->busy)
		return rt_fail(RT_ENOMEM, "no memory to merge the op log");
	o->from = o->busy + o->ranks;
	o->to = o->from + o->ranks;
	o->n_skips = kb_ff_skips(job, &o->skips);
	if (o->n_skips) {
		o->sbusy = calloc(3 * o->n_skips * o->ranks, sizeof(uint64_t));
		if (!o->sbusy)
			return rt_fail(RT_ENOMEM, "no memory to merge the op log");
		o->sfrom = o->sbusy + o->n_skips * o->ranks;
		o->sto = o->sfrom + o->n_skips * o->ranks;
		for (size_t i = 0; i < o->n_skips; i++) {
			if (o->skips[i].period_ps > o->maxp)
				o->maxp = o->skips[i].period_ps;
			for (uint32_t k = 0; k < o->ranks; k++) /* empty intervals at the window */
				o->sfrom[i * o->ranks + k] = o->sto[i * o->ranks + k] =
					o->skips[i].at_ps;
		}
	}
	for (uint32_t id = 0; id < n; id++) {
		o->paths[id] = malloc(RT_PATH_MAX + 64);
		if (!o->paths[id])
			return rt_fail(RT_ENOMEM, "no memory to merge the op log");
		snprintf(o->paths[id], RT_PATH_MAX + 64, "%s/%u.oplog", dir, id);
	}
	o->paths[n] = strdup(o->rf.path);
	return o->paths[n] ? RT_EOK : rt_fail(RT_ENOMEM, "no memory to merge the op log");
}

enum rt_err kb_oplog_write(const struct rt_job *job, const struct rt_topology *topo,
			   uint64_t *hbm_busy_ps, struct kb_steps *steps)
{
	struct oplog o;
	char path[RT_PATH_MAX + 32];
	FILE *out = NULL;
	enum rt_err err = oplog_init(&o, job, topo);

	for (uint32_t c = 0; !err && c < topo->n_components; c++)
		err = load_names(&o, c);
	for (uint32_t c = 0; !err && c < topo->n_components; c++)
		err = cut_part(&o, c);
	if (!err)
		err = kb_runs_file_close(&o.rf);
	free(o.chunk); /* the merge needs only its buffers */
	o.chunk = NULL;
	snprintf(path, sizeof(path), "%s/op_log.jsonl", job->out_dir);
	if (!err && !job->oplog_off && !(out = fopen(path, "wb")))
		err = rt_fail(RT_EIO, "cannot create %s: %s", path, strerror(errno));
	if (!err)
		err = merge_runs(&o, out, path, steps);
	if (out && fclose(out) && !err)
		err = rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	*hbm_busy_ps = err ? 0 : hbm_sweep_most(&o);
	oplog_release(&o);
	return err;
}
