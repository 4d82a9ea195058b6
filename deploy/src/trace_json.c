/* trace_json.c — the merged trace written as Chrome/Perfetto JSON
 * (trace.json, or trace.json.gz through a gzip sink): the records in the
 * order trace_out.c's merge gives them, each formatted with integer code
 * (no printf per event: this is the part of a traced run that grows with
 * the trace), names quoted once per part. May use: trace_out.h and the runtime. */
#include "trace_out.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libdeflate.h>
#include <zlib.h>

#include "rt/buf.h"
#include "rt/daemon.h"

#define SINK_FLUSH (1u << 20)

/* ---------------------------------------------------------------- sink */

/* Buffered output to a plain or gzip file, written to `<path>.tmp` and
 * renamed when complete. A gzip sink keeps the whole JSON in memory up to
 * gz_whole_max() bytes and compresses it at the end in one call of
 * libdeflate (level 1: half the CPU of zlib's level 1, and smaller; ADR
 * 0071). A longer trace is streamed through zlib instead, on a thread of
 * its own one buffer behind the formatting (side by side they take the
 * time of one, not of both), from the moment it outgrows that bound. Both
 * write one gzip member: every reader (Perfetto's stops at the first
 * member's end) sees the same JSON. */
struct sink {
	struct rt_buf b;
	FILE *f;
	gzFile gz;
	bool whole;      /* gzip: b holds every byte so far, compressed at close */
	size_t flush_at; /* b is drained (or spilled to zlib) beyond this */
	char tmp[RT_PATH_MAX + 48];
	enum rt_err err;
	/* the compressing thread and the buffer it is given */
	pthread_t thread;
	bool threaded;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rt_buf full;   /* formatted, waiting for or under compression */
	bool busy, stop;      /* full holds bytes; the sink is closing */
	bool gz_failed;
};

#define GZ_WHOLE_MAX (128u << 20)

/* The most JSON compressed in one piece: 128 MiB, or KB_TRACE_GZ_WHOLE
 * from the environment (at most 1 GiB; 0: always streamed; the tests use
 * it to take the zlib path). */
static size_t gz_whole_max(void)
{
	const char *env = getenv("KB_TRACE_GZ_WHOLE");
	char *end;
	unsigned long long v = env ? strtoull(env, &end, 10) : 0;

	if (!env || *end || end == env)
		return GZ_WHOLE_MAX;
	return v > (1ull << 30) ? (size_t)1 << 30 : (size_t)v; /* gzwrite takes an unsigned */
}

static void *deflate_thread(void *arg)
{
	struct sink *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->busy && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->busy)
			break;
		pthread_mutex_unlock(&s->mu);
		/* the formatter never touches `full` while busy */
		if (gzwrite(s->gz, s->full.data, (unsigned)s->full.len) != (int)s->full.len)
			s->gz_failed = true;
		pthread_mutex_lock(&s->mu);
		s->busy = false;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Hands the formatted bytes to the compressing thread (after it finished
 * the previous buffer) and keeps formatting into the buffer it gave back. */
static void sink_hand_over(struct sink *s)
{
	struct rt_buf swap;

	pthread_mutex_lock(&s->mu);
	while (s->busy)
		pthread_cond_wait(&s->cv, &s->mu);
	swap = s->full;
	s->full = s->b;
	s->b = swap;
	rt_buf_reset(&s->b);
	s->busy = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Stops the compressing thread once it has written everything. */
static void sink_join(struct sink *s)
{
	if (!s->threaded)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	s->threaded = false;
	if (s->gz_failed && !s->err)
		s->err = rt_fail(RT_EIO, "cannot write %s: %s", s->tmp, strerror(errno));
}

/* Opens the zlib stream and its thread (if a thread cannot start, the
 * stream is compressed in line). */
static enum rt_err sink_stream(struct sink *s)
{
	s->whole = false;
	s->flush_at = SINK_FLUSH;
	s->gz = gzopen(s->tmp, "wb1"); /* fast: the trace is rewritten per run */
	if (!s->gz)
		return rt_fail(RT_EIO, "cannot create %s: %s", s->tmp, strerror(errno));
	if (!pthread_mutex_init(&s->mu, NULL)) {
		if (pthread_cond_init(&s->cv, NULL))
			pthread_mutex_destroy(&s->mu);
		else if (pthread_create(&s->thread, NULL, deflate_thread, s)) {
			pthread_cond_destroy(&s->cv);
			pthread_mutex_destroy(&s->mu);
		} else {
			s->threaded = true;
		}
	}
	return s->threaded ? rt_buf_reserve(&s->full, SINK_FLUSH + 4096) : RT_EOK;
}

static enum rt_err sink_open(struct sink *s, const char *path, bool gz)
{
	memset(s, 0, sizeof(*s));
	rt_buf_init(&s->b);
	rt_buf_init(&s->full);
	snprintf(s->tmp, sizeof(s->tmp), "%s.tmp", path);
	s->flush_at = SINK_FLUSH;
	if (gz) {
		s->whole = gz_whole_max() > 0;
		s->flush_at = s->whole ? gz_whole_max() : SINK_FLUSH;
		/* the file exists from the start either way */
		s->f = s->whole ? fopen(s->tmp, "wb") : NULL;
		if (!s->whole) {
			enum rt_err err = sink_stream(s);

			if (err)
				return err;
		}
	} else {
		s->f = fopen(s->tmp, "wb");
	}
	if (!s->f && !s->gz)
		return rt_fail(RT_EIO, "cannot create %s: %s", s->tmp, strerror(errno));
	return rt_buf_reserve(&s->b, SINK_FLUSH + 4096);
}

/* A trace longer than the whole-buffer bound goes on through zlib, the
 * bytes so far first (into the file opened at start, now a gzip stream). */
static void sink_spill(struct sink *s)
{
	if (s->f && fclose(s->f) && !s->err)
		s->err = rt_fail(RT_EIO, "cannot close %s: %s", s->tmp, strerror(errno));
	s->f = NULL;
	if (!s->err)
		s->err = sink_stream(s);
}

static void sink_drain(struct sink *s)
{
	if (!s->b.len || s->err)
		return;
	if (s->whole) {
		sink_spill(s);
		if (s->err)
			return;
	}
	if (s->threaded) {
		sink_hand_over(s);
		return;
	}
	if (s->gz ? gzwrite(s->gz, s->b.data, (unsigned)s->b.len) != (int)s->b.len
		  : fwrite(s->b.data, 1, s->b.len, s->f) != s->b.len)
		s->err = rt_fail(RT_EIO, "cannot write %s: %s", s->tmp, strerror(errno));
	rt_buf_reset(&s->b);
}

/* The whole JSON as one gzip member, in one call: a quarter of its size is
 * room enough for JSON (about 10x smaller), else the worst case. */
static void sink_deflate_whole(struct sink *s)
{
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
	size_t room = s->b.len / 4 + 4096, got = 0;
	void *out = NULL;

	for (int pass = 0; c && !got && pass < 2; pass++) {
		if (pass)
			room = libdeflate_gzip_compress_bound(c, s->b.len);
		free(out);
		out = malloc(room);
		if (!out)
			break;
		got = libdeflate_gzip_compress(c, s->b.data, s->b.len, out, room);
	}
	if (!got)
		s->err = rt_fail(RT_ENOMEM, "no memory to compress %s", s->tmp);
	else if (fwrite(out, 1, got, s->f) != got)
		s->err = rt_fail(RT_EIO, "cannot write %s: %s", s->tmp, strerror(errno));
	free(out);
	if (c)
		libdeflate_free_compressor(c);
}

static enum rt_err sink_close(struct sink *s, const char *path)
{
	if (s->whole && !s->err)
		sink_deflate_whole(s);
	else
		sink_drain(s);
	sink_join(s);
	if (s->gz && gzclose(s->gz) != Z_OK && !s->err)
		s->err = rt_fail(RT_EIO, "cannot finish %s", s->tmp);
	if (s->f && fclose(s->f) && !s->err)
		s->err = rt_fail(RT_EIO, "cannot close %s: %s", s->tmp, strerror(errno));
	if (!s->err && rename(s->tmp, path))
		s->err = rt_fail(RT_EIO, "cannot rename %s: %s", s->tmp, strerror(errno));
	if (s->err)
		unlink(s->tmp);
	rt_buf_release(&s->b);
	rt_buf_release(&s->full);
	return s->err;
}

/* Room for one event's fixed text; the buffer was reserved at open. */
static char *sink_room(struct sink *s, size_t need)
{
	if (s->b.len + need > s->flush_at)
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

static void put_str(struct sink *s, const char *str)
{
	if (s->b.len + 2 * strlen(str) + 8 > s->flush_at)
		sink_drain(s);
	if (rt_buf_json_str(&s->b, str))
		s->err = RT_ENOMEM;
}

/* ---------------------------------------------------------------- JSON */

/* A string quoted for JSON once, with its length. */
struct qstr {
	char *s;
	uint32_t len;
};

/* Each part's strings, quoted for JSON once (per event only copied):
 * q[i] the name, m[2i] "send name", m[2i+1] "recv name", c[i] "<component>
 * name" for counters; where[k] is `,"pid":P,"tid":T,"ts":` of track k. */
struct quoted {
	struct qstr *q, *m, *c;
	uint32_t n;
	struct qstr where[RT_TRACE_TRACKS];
};

static bool quote(struct qstr *out, const char *a, const char *b)
{
	struct rt_buf tmp, both;

	rt_buf_init(&tmp);
	rt_buf_init(&both);
	out->s = NULL;
	if (!rt_buf_printf(&both, "%s%s%s", a, *a && *b ? " " : "", b) &&
	    !rt_buf_json_str(&tmp, both.data ? both.data : "")) {
		out->s = strdup(tmp.data);
		out->len = (uint32_t)tmp.len;
	}
	rt_buf_release(&tmp);
	rt_buf_release(&both);
	return out->s != NULL;
}

static void quoted_release(struct quoted *qs, uint32_t n_parts)
{
	for (uint32_t p = 0; qs && p < n_parts; p++) {
		for (uint32_t i = 0; i < qs[p].n; i++) {
			free(qs[p].q[i].s);
			free(qs[p].c[i].s);
			free(qs[p].m[2 * i].s);
			free(qs[p].m[2 * i + 1].s);
		}
		for (unsigned k = 0; k < RT_TRACE_TRACKS; k++)
			free(qs[p].where[k].s);
		free(qs[p].q);
		free(qs[p].m);
		free(qs[p].c);
	}
	free(qs);
}

/* `,"pid":P,"tid":T,"ts":` of every track of part `p`. */
static bool quote_where(struct quoted *q, uint32_t p, const struct rt_topology *topo)
{
	uint32_t pid = p < topo->n_components ? topo->components[p].rank : 0;
	char text[64];

	for (unsigned k = 0; k < RT_TRACE_TRACKS; k++) {
		int n = snprintf(text, sizeof(text), ",\"pid\":%u,\"tid\":%u,\"ts\":", pid,
				 p * RT_TRACE_TRACKS + k);

		q->where[k].s = strdup(text);
		q->where[k].len = (uint32_t)n;
		if (!q->where[k].s)
			return false;
	}
	return true;
}

static uint32_t longest(const struct qstr *q, uint32_t n, uint32_t max)
{
	for (uint32_t i = 0; i < n; i++)
		max = q[i].len > max ? q[i].len : max;
	return max;
}

/* Quotes every part's strings; *max_len is the longest quoted string. */
static struct quoted *quoted_new(const struct kb_trace *t, const struct rt_topology *topo,
				 uint32_t *max_len)
{
	struct quoted *qs = calloc(t->n_parts, sizeof(*qs));
	bool ok = qs != NULL;

	*max_len = 0;
	for (uint32_t p = 0; ok && p < t->n_parts; p++) {
		const struct rt_trace_part *part = &t->parts[p];
		const char *comp = p < topo->n_components ? topo->components[p].name : "";
		uint32_t n = part->n_names;

		qs[p].q = calloc(n + 1, sizeof(*qs[p].q));
		qs[p].c = calloc(n + 1, sizeof(*qs[p].c));
		qs[p].m = calloc(2 * n + 1, sizeof(*qs[p].m));
		ok = qs[p].q && qs[p].c && qs[p].m && quote_where(&qs[p], p, topo);
		for (uint32_t i = 0; ok && i < n; i++, qs[p].n++)
			ok = quote(&qs[p].q[i], "", part->names[i]) &
			     quote(&qs[p].c[i], comp, part->names[i]) &
			     quote(&qs[p].m[2 * i], "send", part->names[i]) &
			     quote(&qs[p].m[2 * i + 1], "recv", part->names[i]);
		if (ok) {
			*max_len = longest(qs[p].q, n, *max_len);
			*max_len = longest(qs[p].c, n, *max_len);
			*max_len = longest(qs[p].m, 2 * n, *max_len);
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
	size_t event_max; /* bytes one event can take */
};

/* Writers into room made once per event (no check per piece). */
static char *w_lit(char *w, const char *s, size_t n)
{
	memcpy(w, s, n);
	return w + n;
}
#define W(w, lit) w_lit((w), (lit), sizeof(lit) - 1)

static char *w_q(char *w, const struct qstr *q)
{
	return w_lit(w, q->s, q->len);
}

static char *w_u64(char *w, uint64_t v)
{
	char tmp[24], *p = tmp + sizeof(tmp);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return w_lit(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

/* Picoseconds as microseconds with six decimals: exact, no float. */
static char *w_us(char *w, uint64_t ps)
{
	uint64_t frac = ps % 1000000;

	w = w_u64(w, ps / 1000000);
	*w = '.';
	for (int i = 6; i >= 1; i--, frac /= 10)
		w[i] = (char)('0' + frac % 10);
	return w + 7;
}

static const struct qstr Q_EMPTY = { (char *)"\"\"", 2 };
static const struct qstr Q_MESSAGE = { (char *)"\"message\"", 9 };
static const struct qstr Q_COUNTER = { (char *)"\"counter\"", 9 };

static const struct qstr *qname(const struct json_out *o, const struct kb_trace_ev *e,
				uint16_t id)
{
	return id == RT_TRACE_NONE ? &Q_EMPTY : &o->qs[e->part].q[id];
}

static char *w_slice(const struct json_out *o, char *w, const struct kb_trace_ev *e)
{
	const struct rt_trace_rec *r = &e->r;
	bool sep = false;

	w = W(w, "{\"ph\":\"X\",\"name\":");
	w = w_q(w, qname(o, e, r->name));
	w = W(w, ",\"cat\":");
	w = w_q(w, qname(o, e, r->cat));
	w = w_q(w, &o->qs[e->part].where[r->track]);
	w = w_us(w, r->ts_ps);
	w = W(w, ",\"dur\":");
	w = w_us(w, r->val);
	if (!(r->flags & (RT_TRACE_F_COMMAND | RT_TRACE_F_STAGE)) && r->site == RT_TRACE_NONE)
		return W(w, "},\n");
	w = W(w, ",\"args\":{");
	if (r->flags & RT_TRACE_F_COMMAND) {
		w = w_u64(W(w, "\"command\":"), r->seq);
		sep = true;
	}
	if (r->flags & RT_TRACE_F_STAGE) {
		w = w_u64(sep ? W(w, ",\"stage\":") : W(w, "\"stage\":"), r->src);
		sep = true;
	}
	if (r->site != RT_TRACE_NONE)
		w = w_q(sep ? W(w, ",\"site\":") : W(w, "\"site\":"), qname(o, e, r->site));
	return W(w, "}},\n");
}

/* A message end: a zero-length slice, then (when paired) the flow event
 * bound to it by (ts, pid, tid, cat). */
static char *w_message(const struct json_out *o, char *w, const struct kb_trace_ev *e)
{
	bool send = e->r.kind == RT_TRACE_SEND;
	const struct qstr *where = &o->qs[e->part].where[e->r.track];
	char *ts;
	size_t ts_len;

	w = W(w, "{\"ph\":\"X\",\"name\":");
	w = w_q(w, e->r.name == RT_TRACE_NONE ? &Q_MESSAGE
					      : &o->qs[e->part].m[2 * e->r.name + !send]);
	w = w_q(W(w, ",\"cat\":\"msg\""), where);
	ts = w;
	w = w_us(w, e->r.ts_ps);
	ts_len = (size_t)(w - ts);
	w = W(w, ",\"dur\":0},\n");
	if (!e->flow)
		return w;
	w = send ? W(w, "{\"ph\":\"s\"") : W(w, "{\"ph\":\"f\"");
	w = w_q(W(w, ",\"name\":\"message\",\"cat\":\"msg\""), where);
	w = w_lit(w, ts, ts_len);
	w = w_u64(W(w, ",\"id\":"), e->flow);
	return send ? W(w, "},\n") : W(w, ",\"bp\":\"e\"},\n");
}

/* Counters are per process in the JSON format: named per component. */
static char *w_counter(const struct json_out *o, char *w, const struct kb_trace_ev *e)
{
	w = W(w, "{\"ph\":\"C\",\"name\":");
	w = w_q(w, e->r.name == RT_TRACE_NONE ? &Q_COUNTER : &o->qs[e->part].c[e->r.name]);
	w = w_q(W(w, ",\"cat\":\"counter\""), &o->qs[e->part].where[e->r.track]);
	w = w_us(w, e->r.ts_ps);
	w = w_u64(W(w, ",\"args\":{\"value\":"), e->r.val);
	return W(w, "}},\n");
}

static void put_event(struct json_out *o, const struct kb_trace_ev *e)
{
	char *w = sink_room(&o->s, o->event_max);

	if (!w)
		return;
	if (e->r.kind == RT_TRACE_SLICE)
		w = w_slice(o, w, e);
	else if (e->r.kind == RT_TRACE_COUNTER)
		w = w_counter(o, w, e);
	else
		w = w_message(o, w, e);
	o->s.b.len = (size_t)(w - o->s.b.data);
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

enum rt_err kb_trace_write_json(struct kb_trace *t, const struct rt_topology *topo,
				const struct rt_job *job, const char *path, bool gz)
{
	struct json_out o = { .t = t, .topo = topo };
	struct kb_trace_ev ev;
	uint32_t max_q = 0;
	enum rt_err err = sink_open(&o.s, path, gz);

	o.qs = err ? NULL : quoted_new(t, topo, &max_q);
	/* fixed text, four numbers, three quoted strings and a track's ids */
	o.event_max = 512 + 3 * (size_t)max_q;
	if (!err && !o.qs)
		err = rt_fail(RT_ENOMEM, "no memory for the trace's names");
	if (err) {
		o.s.err = err;
		sink_close(&o.s, path);
		return err;
	}
	PUT(&o.s, "{\"traceEvents\":[\n");
	put_metadata(&o.s, t, topo, job);
	while (!o.s.err && kb_trace_next(t, &ev, &err))
		put_event(&o, &ev);
	/* a last event without a trailing comma keeps the JSON valid */
	PUT(&o.s, "{\"ph\":\"M\",\"name\":\"trace_source\",\"pid\":0,\"tid\":0,"
		  "\"args\":{\"name\":\"kernbench\"}}\n]}\n");
	quoted_release(o.qs, t->n_parts);
	if (err && !o.s.err)
		o.s.err = err;
	return sink_close(&o.s, path);
}
