/* trace_out.c — merges binary trace parts into one trace file.
 *
 * What real importers need, and how this file gives it:
 *   - events in time order: every record is sorted once here by
 *     (time, longer slice first, component, track, position in its part);
 *   - arrows that resolve: a message's two ends are paired by (sender,
 *     sequence) and the pair gets a small numeric flow id; an end whose other
 *     end was filtered out is drawn without an arrow;
 *   - slices that nest: each unit that can be busy while another is (a DMA
 *     channel, the kernel's clock) has a track (tid) of its own;
 *   - microsecond timestamps with no displayTimeUnit (older Perfetto read
 *     "ns" as a scale on the timestamps).
 * Text is formatted with integer code (no printf per event): this is the
 * part of a traced run that grows with the trace. */
#include "trace_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "rt/buf.h"
#include "rt/daemon.h"

#define SINK_FLUSH (1u << 20)

/* ---------------------------------------------------------------- model */

static int ev_cmp(const void *pa, const void *pb)
{
	const struct kb_trace_ev *a = pa, *b = pb;

	if (a->r.ts_ps != b->r.ts_ps)
		return a->r.ts_ps < b->r.ts_ps ? -1 : 1;
	/* at one instant an enclosing slice opens before what it encloses */
	if (a->r.kind == RT_TRACE_SLICE && b->r.kind == RT_TRACE_SLICE && a->r.val != b->r.val)
		return a->r.val > b->r.val ? -1 : 1;
	if (a->part != b->part)
		return a->part < b->part ? -1 : 1;
	if (a->r.track != b->r.track)
		return a->r.track < b->r.track ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static uint64_t mix(uint64_t src, uint64_t seq)
{
	uint64_t h = (src * 0x9e3779b97f4a7c15ull) ^ (seq + 0x632be59bd9b4e019ull);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 29);
}

/* Pairs each delivery with its send (open addressing over the sends) and
 * numbers the pairs in time order of their sends. */
static enum rt_err pair_flows(struct kb_trace *t)
{
	size_t n_send = 0, cap = 1;
	size_t *slot;

	for (size_t i = 0; i < t->n; i++)
		n_send += t->ev[i].r.kind == RT_TRACE_SEND;
	while (cap < 2 * n_send + 2)
		cap *= 2;
	slot = malloc(cap * sizeof(*slot));
	if (!slot)
		return rt_fail(RT_ENOMEM, "no memory to pair %zu trace messages", n_send);
	memset(slot, 0xff, cap * sizeof(*slot));
	for (size_t i = 0; i < t->n; i++) {
		const struct kb_trace_ev *e = &t->ev[i];
		size_t h;

		if (e->r.kind != RT_TRACE_SEND)
			continue;
		for (h = mix(e->part, e->r.seq) & (cap - 1); slot[h] != SIZE_MAX; h = (h + 1) & (cap - 1))
			;
		slot[h] = i;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct kb_trace_ev *e = &t->ev[i];
		size_t h;

		if (e->r.kind != RT_TRACE_RECV)
			continue;
		for (h = mix(e->r.src, e->r.seq) & (cap - 1); slot[h] != SIZE_MAX; h = (h + 1) & (cap - 1)) {
			struct kb_trace_ev *s = &t->ev[slot[h]];

			if (s->part == e->r.src && s->r.seq == e->r.seq) {
				s->flow = e->flow = 1; /* numbered below */
				break;
			}
		}
	}
	free(slot);
	for (size_t i = 0; i < t->n; i++) /* sends come before their deliveries */
		if (t->ev[i].r.kind == RT_TRACE_SEND && t->ev[i].flow)
			t->ev[i].flow = ++t->n_flows;
	return RT_EOK;
}

/* Gives each delivery its send's number (a second pass over the pairs). */
static enum rt_err number_deliveries(struct kb_trace *t)
{
	size_t cap = 1;
	size_t *slot;

	while (cap < 2 * t->n_flows + 2)
		cap *= 2;
	slot = malloc(cap * sizeof(*slot));
	if (!slot)
		return rt_fail(RT_ENOMEM, "no memory to number %llu trace flows",
			       (unsigned long long)t->n_flows);
	memset(slot, 0xff, cap * sizeof(*slot));
	for (size_t i = 0; i < t->n; i++) {
		size_t h;

		if (t->ev[i].r.kind != RT_TRACE_SEND || !t->ev[i].flow)
			continue;
		for (h = mix(t->ev[i].part, t->ev[i].r.seq) & (cap - 1); slot[h] != SIZE_MAX;
		     h = (h + 1) & (cap - 1))
			;
		slot[h] = i;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct kb_trace_ev *e = &t->ev[i];
		size_t h;

		if (e->r.kind != RT_TRACE_RECV || !e->flow)
			continue;
		for (h = mix(e->r.src, e->r.seq) & (cap - 1);; h = (h + 1) & (cap - 1)) {
			const struct kb_trace_ev *s = &t->ev[slot[h]];

			if (s->part == e->r.src && s->r.seq == e->r.seq) {
				e->flow = s->flow;
				break;
			}
		}
	}
	free(slot);
	return RT_EOK;
}

static enum rt_err gather(const struct rt_job *job, struct kb_trace *t)
{
	char dir[RT_PATH_MAX + 16], stem[16];
	size_t total = 0;
	enum rt_err err = RT_EOK;

	snprintf(dir, sizeof(dir), "%s/%s", job->out_dir, RT_PARTS_DIR);
	for (uint32_t p = 0; !err && p < t->n_parts; p++) {
		if (p + 1 < t->n_parts)
			snprintf(stem, sizeof(stem), "%u", p);
		else
			snprintf(stem, sizeof(stem), "coord");
		err = rt_trace_part_read(dir, stem, &t->parts[p]);
		total += t->parts[p].n;
	}
	if (err)
		return err;
	t->ev = calloc(total ? total : 1, sizeof(*t->ev));
	if (!t->ev)
		return rt_fail(RT_ENOMEM, "no memory for %zu trace records", total);
	for (uint32_t p = 0; p < t->n_parts; p++)
		for (size_t i = 0; i < t->parts[p].n; i++) {
			struct kb_trace_ev *e = &t->ev[t->n++];

			e->r = t->parts[p].recs[i];
			e->part = p;
			e->order = (uint32_t)i;
		}
	return RT_EOK;
}

enum rt_err kb_trace_load(const struct rt_job *job, const struct rt_topology *topo,
			  struct kb_trace *t)
{
	enum rt_err err;

	memset(t, 0, sizeof(*t));
	t->n_parts = topo->n_components + 1;
	t->parts = calloc(t->n_parts, sizeof(*t->parts));
	if (!t->parts)
		return rt_fail(RT_ENOMEM, "no memory to read the trace parts");
	err = gather(job, t);
	if (!err)
		qsort(t->ev, t->n, sizeof(*t->ev), ev_cmp);
	if (!err)
		err = pair_flows(t);
	if (!err)
		err = number_deliveries(t);
	for (size_t i = 0; !err && i < t->n; i++)
		if (t->ev[i].r.kind == RT_TRACE_RECV && t->ev[i].r.src >= topo->n_components)
			err = rt_fail(RT_EPROTOCOL, "corrupt trace part: sender %u of a message",
				      t->ev[i].r.src);
	return err;
}

void kb_trace_release(struct kb_trace *t)
{
	for (uint32_t p = 0; t->parts && p < t->n_parts; p++)
		rt_trace_part_release(&t->parts[p]);
	free(t->parts);
	free(t->ev);
	memset(t, 0, sizeof(*t));
}

const char *kb_trace_str(const struct kb_trace *t, const struct kb_trace_ev *e, uint16_t id)
{
	return rt_trace_part_str(&t->parts[e->part], id);
}

uint32_t kb_trace_tid(const struct kb_trace_ev *e)
{
	return e->part * RT_TRACE_TRACKS + e->r.track;
}

/* ---------------------------------------------------------------- sink */

/* Buffered output to a plain or gzip file, written to `<path>.tmp` and
 * renamed when complete. */
struct sink {
	struct rt_buf b;
	FILE *f;
	gzFile gz;
	char tmp[RT_PATH_MAX + 48];
	enum rt_err err;
};

static enum rt_err sink_open(struct sink *s, const char *path, bool gz)
{
	memset(s, 0, sizeof(*s));
	rt_buf_init(&s->b);
	snprintf(s->tmp, sizeof(s->tmp), "%s.tmp", path);
	if (gz)
		s->gz = gzopen(s->tmp, "wb1"); /* fast: the trace is rewritten per run */
	else
		s->f = fopen(s->tmp, "wb");
	if (!s->f && !s->gz)
		return rt_fail(RT_EIO, "cannot create %s: %s", s->tmp, strerror(errno));
	return rt_buf_reserve(&s->b, SINK_FLUSH + 4096);
}

static void sink_drain(struct sink *s)
{
	if (!s->b.len || s->err)
		return;
	if (s->gz ? gzwrite(s->gz, s->b.data, (unsigned)s->b.len) != (int)s->b.len
		  : fwrite(s->b.data, 1, s->b.len, s->f) != s->b.len)
		s->err = rt_fail(RT_EIO, "cannot write %s: %s", s->tmp, strerror(errno));
	rt_buf_reset(&s->b);
}

static enum rt_err sink_close(struct sink *s, const char *path)
{
	sink_drain(s);
	if (s->gz && gzclose(s->gz) != Z_OK && !s->err)
		s->err = rt_fail(RT_EIO, "cannot finish %s", s->tmp);
	if (s->f && fclose(s->f) && !s->err)
		s->err = rt_fail(RT_EIO, "cannot close %s: %s", s->tmp, strerror(errno));
	if (!s->err && rename(s->tmp, path))
		s->err = rt_fail(RT_EIO, "cannot rename %s: %s", s->tmp, strerror(errno));
	if (s->err)
		unlink(s->tmp);
	rt_buf_release(&s->b);
	return s->err;
}

/* Room for one event's fixed text; the buffer was reserved at open. */
static char *sink_room(struct sink *s, size_t need)
{
	if (s->b.len + need > SINK_FLUSH)
		sink_drain(s);
	if (s->b.cap < s->b.len + need + 1 && rt_buf_reserve(&s->b, need) != RT_EOK) {
		s->err = RT_ENOMEM;
		return NULL;
	}
	return s->b.data + s->b.len;
}

static void put_lit(struct sink *s, const char *lit, size_t n)
{
	char *at = sink_room(s, n);

	if (at) {
		memcpy(at, lit, n);
		s->b.len += n;
	}
}
#define PUT(s, lit) put_lit((s), (lit), sizeof(lit) - 1)

static void put_u64(struct sink *s, uint64_t v)
{
	char tmp[24], *at = sink_room(s, 24);
	int n = 0;

	if (!at)
		return;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*at++ = tmp[--n], s->b.len++;
}

/* Picoseconds as microseconds with six decimals: exact, no float. */
static void put_us(struct sink *s, uint64_t ps)
{
	char *at;
	uint64_t frac = ps % 1000000;

	put_u64(s, ps / 1000000);
	at = sink_room(s, 8);
	if (!at)
		return;
	at[0] = '.';
	for (int i = 6; i >= 1; i--, frac /= 10)
		at[i] = (char)('0' + frac % 10);
	s->b.len += 7;
}

static void put_str(struct sink *s, const char *str)
{
	if (s->b.len + 2 * strlen(str) + 8 > SINK_FLUSH)
		sink_drain(s);
	if (rt_buf_json_str(&s->b, str))
		s->err = RT_ENOMEM;
}

/* ---------------------------------------------------------------- JSON */

/* Each part's strings, quoted for JSON once (per event only copied):
 * q[i] the name, m[2i] "send name", m[2i+1] "recv name", c[i] "<component>
 * name" for counters. */
struct quoted {
	char **q, **m, **c;
	uint32_t n;
};

static char *quote(const char *a, const char *b)
{
	struct rt_buf tmp, both;
	char *out = NULL;

	rt_buf_init(&tmp);
	rt_buf_init(&both);
	if (!rt_buf_printf(&both, "%s%s%s", a, *a && *b ? " " : "", b) &&
	    !rt_buf_json_str(&tmp, both.data ? both.data : ""))
		out = strdup(tmp.data);
	rt_buf_release(&tmp);
	rt_buf_release(&both);
	return out;
}

static void quoted_release(struct quoted *qs, uint32_t n_parts)
{
	for (uint32_t p = 0; qs && p < n_parts; p++) {
		for (uint32_t i = 0; i < qs[p].n; i++) {
			free(qs[p].q[i]);
			free(qs[p].c[i]);
			free(qs[p].m[2 * i]);
			free(qs[p].m[2 * i + 1]);
		}
		free(qs[p].q);
		free(qs[p].m);
		free(qs[p].c);
	}
	free(qs);
}

static struct quoted *quoted_new(const struct kb_trace *t, const struct rt_topology *topo)
{
	struct quoted *qs = calloc(t->n_parts, sizeof(*qs));
	bool ok = qs != NULL;

	for (uint32_t p = 0; ok && p < t->n_parts; p++) {
		const struct rt_trace_part *part = &t->parts[p];
		const char *comp = p < topo->n_components ? topo->components[p].name : "";
		uint32_t n = part->n_names;

		qs[p].q = calloc(n + 1, sizeof(char *));
		qs[p].c = calloc(n + 1, sizeof(char *));
		qs[p].m = calloc(2 * n + 1, sizeof(char *));
		ok = qs[p].q && qs[p].c && qs[p].m;
		for (uint32_t i = 0; ok && i < n; i++, qs[p].n++) {
			qs[p].q[i] = quote("", part->names[i]);
			qs[p].c[i] = quote(comp, part->names[i]);
			qs[p].m[2 * i] = quote("send", part->names[i]);
			qs[p].m[2 * i + 1] = quote("recv", part->names[i]);
			ok = qs[p].q[i] && qs[p].c[i] && qs[p].m[2 * i] && qs[p].m[2 * i + 1];
		}
	}
	if (!ok) {
		quoted_release(qs, t->n_parts);
		return NULL;
	}
	return qs;
}

struct json_out {
	struct sink s;
	const struct kb_trace *t;
	const struct rt_topology *topo;
	struct quoted *qs;
};

static const char *qname(const struct json_out *o, const struct kb_trace_ev *e, uint16_t id)
{
	return id == RT_TRACE_NONE ? "\"\"" : o->qs[e->part].q[id];
}

static void put_q(struct sink *s, const char *quoted)
{
	put_lit(s, quoted, strlen(quoted));
}

static void put_head(struct sink *s, const char *ph, const char *qname_, const char *qcat,
		     uint32_t pid, uint32_t tid, uint64_t ts_ps)
{
	PUT(s, "{\"ph\":\"");
	put_lit(s, ph, 1);
	PUT(s, "\",\"name\":");
	put_q(s, qname_);
	PUT(s, ",\"cat\":");
	put_q(s, qcat);
	PUT(s, ",\"pid\":");
	put_u64(s, pid);
	PUT(s, ",\"tid\":");
	put_u64(s, tid);
	PUT(s, ",\"ts\":");
	put_us(s, ts_ps);
}

static void put_slice(struct json_out *o, const struct kb_trace_ev *e, uint32_t pid)
{
	struct sink *s = &o->s;
	const struct rt_trace_rec *r = &e->r;
	const char *sep = "";

	put_head(s, "X", qname(o, e, r->name), qname(o, e, r->cat), pid, kb_trace_tid(e),
		 r->ts_ps);
	PUT(s, ",\"dur\":");
	put_us(s, r->val);
	if (!(r->flags & (RT_TRACE_F_COMMAND | RT_TRACE_F_STAGE)) && r->site == RT_TRACE_NONE) {
		PUT(s, "},\n");
		return;
	}
	PUT(s, ",\"args\":{");
	if (r->flags & RT_TRACE_F_COMMAND) {
		PUT(s, "\"command\":");
		put_u64(s, r->seq);
		sep = ",";
	}
	if (r->flags & RT_TRACE_F_STAGE) {
		put_lit(s, sep, strlen(sep));
		PUT(s, "\"stage\":");
		put_u64(s, r->src);
		sep = ",";
	}
	if (r->site != RT_TRACE_NONE) {
		put_lit(s, sep, strlen(sep));
		PUT(s, "\"site\":");
		put_q(s, qname(o, e, r->site));
	}
	PUT(s, "}},\n");
}

/* A message end: a zero-length slice, then (when paired) the flow event
 * bound to it by (ts, pid, tid, cat). */
static void put_message(struct json_out *o, const struct kb_trace_ev *e, uint32_t pid)
{
	struct sink *s = &o->s;
	bool send = e->r.kind == RT_TRACE_SEND;
	const char *name = e->r.name == RT_TRACE_NONE ? "\"message\""
			 : o->qs[e->part].m[2 * e->r.name + !send];

	put_head(s, "X", name, "\"msg\"", pid, kb_trace_tid(e), e->r.ts_ps);
	PUT(s, ",\"dur\":0},\n");
	if (!e->flow)
		return;
	put_head(s, send ? "s" : "f", "\"message\"", "\"msg\"", pid, kb_trace_tid(e), e->r.ts_ps);
	PUT(s, ",\"id\":");
	put_u64(s, e->flow);
	if (send)
		PUT(s, "},\n");
	else
		PUT(s, ",\"bp\":\"e\"},\n");
}

/* Counters are per process in the JSON format: named per component. */
static void put_counter(struct json_out *o, const struct kb_trace_ev *e, uint32_t pid)
{
	struct sink *s = &o->s;
	const char *name = e->r.name == RT_TRACE_NONE ? "\"counter\"" : o->qs[e->part].c[e->r.name];

	put_head(s, "C", name, "\"counter\"", pid, kb_trace_tid(e), e->r.ts_ps);
	PUT(s, ",\"args\":{\"value\":");
	put_u64(s, e->r.val);
	PUT(s, "}},\n");
}

static void put_meta(struct sink *s, const char *what, uint32_t pid, uint32_t tid,
		     const char *key, const char *name, uint64_t index)
{
	PUT(s, "{\"ph\":\"M\",\"name\":\"");
	put_lit(s, what, strlen(what));
	PUT(s, "\",\"pid\":");
	put_u64(s, pid);
	PUT(s, ",\"tid\":");
	put_u64(s, tid);
	PUT(s, ",\"args\":{\"");
	put_lit(s, key, strlen(key));
	PUT(s, "\":");
	if (name)
		put_str(s, name);
	else
		put_u64(s, index);
	PUT(s, "}},\n");
}

/* Process per traced rank, a track per (component, track) with records. */
static void put_metadata(struct sink *s, const struct kb_trace *t, const struct rt_topology *topo,
			 const struct rt_job *job)
{
	uint32_t last_rank = UINT32_MAX;
	char name[RT_NAME_MAX + 64];

	for (uint32_t id = 0; id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];
		const struct rt_trace_part *p = &t->parts[id];

		if (!rt_trace_wanted(&job->trace, c->rank, 0, UINT64_MAX))
			continue;
		if (c->rank != last_rank) {
			snprintf(name, sizeof(name), "rank %u", c->rank);
			put_meta(s, "process_name", c->rank, 0, "name", name, 0);
			put_meta(s, "process_sort_index", c->rank, 0, "sort_index", NULL, c->rank);
			last_rank = c->rank;
		}
		for (unsigned k = 0; k < RT_TRACE_TRACKS; k++) {
			uint32_t tid = id * RT_TRACE_TRACKS + k;

			if (k && p->track_name[k] == RT_TRACE_NONE)
				continue;
			if (k)
				snprintf(name, sizeof(name), "%s %s", c->name,
					 rt_trace_part_str(p, p->track_name[k]));
			else
				snprintf(name, sizeof(name), "%s", c->name);
			put_meta(s, "thread_name", c->rank, tid, "name", name, 0);
			put_meta(s, "thread_sort_index", c->rank, tid, "sort_index", NULL, tid);
		}
	}
}

static enum rt_err write_json(const struct kb_trace *t, const struct rt_topology *topo,
			      const struct rt_job *job, const char *path, bool gz)
{
	struct json_out o = { .t = t, .topo = topo };
	enum rt_err err = sink_open(&o.s, path, gz);

	o.qs = err ? NULL : quoted_new(t, topo);
	if (!err && !o.qs)
		err = rt_fail(RT_ENOMEM, "no memory for the trace's names");
	if (err) {
		o.s.err = err;
		sink_close(&o.s, path);
		return err;
	}
	PUT(&o.s, "{\"traceEvents\":[\n");
	put_metadata(&o.s, t, topo, job);
	for (size_t i = 0; i < t->n && !o.s.err; i++) {
		const struct kb_trace_ev *e = &t->ev[i];
		uint32_t pid = e->part < topo->n_components ? topo->components[e->part].rank : 0;

		if (e->r.kind == RT_TRACE_SLICE)
			put_slice(&o, e, pid);
		else if (e->r.kind == RT_TRACE_COUNTER)
			put_counter(&o, e, pid);
		else
			put_message(&o, e, pid);
	}
	/* a last event without a trailing comma keeps the JSON valid */
	PUT(&o.s, "{\"ph\":\"M\",\"name\":\"trace_source\",\"pid\":0,\"tid\":0,"
		  "\"args\":{\"name\":\"kernbench\"}}\n]}\n");
	quoted_release(o.qs, t->n_parts);
	return sink_close(&o.s, path);
}

/* ---------------------------------------------------------------- entry */

const char *kb_trace_file_name(const struct rt_job *job)
{
	switch (job->trace.format) {
	case RT_TRACE_JSON_GZ: return "trace.json.gz";
	case RT_TRACE_PERFETTO: return "trace.pftrace";
	default: return "trace.json";
	}
}

enum rt_err kb_trace_write(const struct rt_job *job, const struct rt_topology *topo)
{
	struct kb_trace t;
	char path[RT_PATH_MAX + 32];
	enum rt_err err;

	if (job->trace_off)
		return RT_EOK;
	snprintf(path, sizeof(path), "%s/%s", job->out_dir, kb_trace_file_name(job));
	err = kb_trace_load(job, topo, &t);
	if (!err && job->trace.format == RT_TRACE_PERFETTO)
		err = kb_trace_write_perfetto(&t, topo, path);
	else if (!err)
		err = write_json(&t, topo, job, path, job->trace.format == RT_TRACE_JSON_GZ);
	kb_trace_release(&t);
	return err;
}
