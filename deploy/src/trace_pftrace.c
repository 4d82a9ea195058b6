/* trace_pftrace.c — the trace in Perfetto's native protobuf form
 * (trace.pftrace): a TrackDescriptor per rank (process), per component
 * track (thread) and per counter, then TrackEvents in time order. A slice
 * is a begin and an end event; a message end is an instant carrying a flow
 * id (the send starts the flow, the delivery terminates it). Perfetto
 * counts time in nanoseconds: picosecond times are truncated to ns, which
 * keeps order and nesting. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_trace.pb-c.h"
#include "trace_out.h"

#define SEQ_ID 1
#define UUID_THREAD 0x100000000ull
#define UUID_COUNTER 0x200000000ull

/* A slice whose end is still ahead, with its place in the merged order. */
struct pf_end {
	uint64_t ts_ps; /* when it ends */
	uint64_t key;   /* position of its begin in the merged order */
	struct kb_trace_ev e;
};

/* Open slices, the next to end on top: at one instant the slice that
 * began last ends first, so slices close in nesting order. */
struct pf_ends {
	struct pf_end *items;
	size_t n, cap;
};

struct pf_out {
	FILE *f;
	uint8_t *buf;
	size_t cap;
	bool failed;
};

static bool end_before(const struct pf_end *a, const struct pf_end *b)
{
	return a->ts_ps != b->ts_ps ? a->ts_ps < b->ts_ps : a->key > b->key;
}

static bool ends_push(struct pf_ends *h, const struct pf_end *x)
{
	struct pf_end *grown;
	size_t i;

	grown = kb_grow(h->items, &h->cap, h->n, sizeof(*h->items), 256);
	if (!grown)
		return false;
	h->items = grown;
	for (i = h->n++; i && end_before(x, &h->items[(i - 1) / 2]); i = (i - 1) / 2)
		h->items[i] = h->items[(i - 1) / 2];
	h->items[i] = *x;
	return true;
}

static void ends_pop(struct pf_ends *h)
{
	struct pf_end last = h->items[--h->n];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < h->n) {
		if (c + 1 < h->n && end_before(&h->items[c + 1], &h->items[c]))
			c++;
		if (!end_before(&h->items[c], &last))
			break;
		h->items[i] = h->items[c];
		i = c;
	}
	if (h->n)
		h->items[i] = last;
}

static void put_varint(struct pf_out *o, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	if (fwrite(b, 1, n, o->f) != n)
		o->failed = true;
}

/* Appends one `Trace.packet` (field 1, length-delimited). */
static void put_packet(struct pf_out *o, Perfetto__Protos__TracePacket *p)
{
	size_t len;

	p->has_trusted_packet_sequence_id = 1;
	p->trusted_packet_sequence_id = SEQ_ID;
	len = perfetto__protos__trace_packet__get_packed_size(p);
	if (len > o->cap) {
		uint8_t *grown = realloc(o->buf, len * 2);

		if (!grown) {
			o->failed = true;
			return;
		}
		o->buf = grown;
		o->cap = len * 2;
	}
	perfetto__protos__trace_packet__pack(p, o->buf);
	put_varint(o, 1 << 3 | 2);
	put_varint(o, len);
	if (fwrite(o->buf, 1, len, o->f) != len)
		o->failed = true;
}

static void put_track(struct pf_out *o, Perfetto__Protos__TrackDescriptor *td)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	p.track_descriptor = td;
	put_packet(o, &p);
}

static void put_process(struct pf_out *o, uint32_t rank)
{
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	char name[32];

	snprintf(name, sizeof(name), "rank %u", rank);
	td.has_uuid = 1;
	td.uuid = rank + 1;
	pd.has_pid = 1;
	pd.pid = (int32_t)rank + 1; /* pid 0 is the idle process to Perfetto */
	pd.process_name = name;
	td.process = &pd;
	put_track(o, &td);
}

static void put_thread(struct pf_out *o, uint32_t rank, uint32_t tid, const char *name)
{
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;

	td.has_uuid = 1;
	td.uuid = UUID_THREAD + tid;
	th.has_pid = th.has_tid = 1;
	th.pid = (int32_t)rank + 1;
	th.tid = (int32_t)tid + 1;
	th.thread_name = (char *)name;
	td.thread = &th;
	put_track(o, &td);
}

static uint64_t counter_uuid(const struct kb_trace_ev *e)
{
	return UUID_COUNTER + ((uint64_t)e->part << 16) + e->r.name;
}

/* Descriptors of every track an event uses, each once, before any event. */
static void put_tracks(struct pf_out *o, const struct kb_trace *t, const struct rt_topology *topo)
{
	Perfetto__Protos__TracePacket first = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	uint32_t last_rank = UINT32_MAX;
	char name[RT_NAME_MAX + 64];

	first.has_sequence_flags = 1;
	first.sequence_flags = 1; /* SEQ_INCREMENTAL_STATE_CLEARED */
	put_packet(o, &first);
	for (uint32_t id = 0; id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];
		const struct rt_trace_part *p = &t->parts[id];

		if (!t->part_recs[id])
			continue;
		if (c->rank != last_rank)
			put_process(o, c->rank);
		last_rank = c->rank;
		put_thread(o, c->rank, id * RT_TRACE_TRACKS, c->name);
		for (unsigned k = 1; k < RT_TRACE_TRACKS; k++)
			if (p->track_name[k] != RT_TRACE_NONE) {
				snprintf(name, sizeof(name), "%s %s", c->name,
					 rt_trace_part_str(p, p->track_name[k]));
				put_thread(o, c->rank, id * RT_TRACE_TRACKS + k, name);
			}
	}
}

static void put_counter_track(struct pf_out *o, const struct kb_trace *t,
			      const struct rt_topology *topo, const struct kb_trace_ev *e)
{
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__CounterDescriptor cd = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;
	char name[RT_NAME_MAX + 64];
	bool coord = e->part >= topo->n_components;

	snprintf(name, sizeof(name), "%s%s%s", coord ? "" : topo->components[e->part].name,
		 coord ? "" : " ", kb_trace_str(t, e, e->r.name));
	td.has_uuid = 1;
	td.uuid = counter_uuid(e);
	td.has_parent_uuid = !coord; /* the coordinator's counters are global */
	td.parent_uuid = coord ? 0 : topo->components[e->part].rank + 1;
	td.name = name;
	td.counter = &cd;
	put_track(o, &td);
}

/* Events are the bulk of the file, so they are encoded by hand (the same
 * bytes protobuf-c writes: fields in number order, proto2, unpacked) into
 * one buffer and written with one call; descriptors go through protobuf-c. */
static uint8_t *pb_varint(uint8_t *w, uint64_t v)
{
	while (v >= 0x80) {
		*w++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*w++ = (uint8_t)v;
	return w;
}

static uint8_t *pb_key(uint8_t *w, unsigned field, unsigned wire_type)
{
	return pb_varint(w, (uint64_t)field << 3 | wire_type);
}

static uint8_t *pb_u64(uint8_t *w, unsigned field, uint64_t v)
{
	return pb_varint(pb_key(w, field, 0), v);
}

static uint8_t *pb_str(uint8_t *w, unsigned field, const char *s, size_t n)
{
	w = pb_varint(pb_key(w, field, 2), n);
	memcpy(w, s, n);
	return w + n;
}

static uint8_t *pb_fixed64(uint8_t *w, unsigned field, uint64_t v)
{
	w = pb_key(w, field, 1);
	for (int i = 0; i < 8; i++)
		*w++ = (uint8_t)(v >> (8 * i));
	return w;
}

/* DebugAnnotation {uint_value = 3 | string_value = 6, name = 10} as field 4
 * of a TrackEvent. */
static uint8_t *pb_annotation(uint8_t *w, const char *name, const char *str, uint64_t v)
{
	uint8_t body[16 + 2 * RT_PATH_MAX], *b = body;
	size_t n = strlen(str ? str : "");

	if (n > RT_PATH_MAX)
		n = RT_PATH_MAX; /* a call site: "file:line" of a kernel */
	b = str ? pb_str(b, 6, str, n) : pb_u64(b, 3, v);
	b = pb_str(b, 10, name, strlen(name));
	return pb_str(w, 4, (const char *)body, (size_t)(b - body));
}

/* "send NAME" / "recv NAME" as a message end is called (at most 95 bytes,
 * what snprintf into 96 gave); copied, not printed: one per message end. */
static size_t message_name(char *out, const struct kb_trace *t, const struct kb_trace_ev *e)
{
	const char *name = kb_trace_str(t, e, e->r.name);
	size_t n = strnlen(name, 90);

	memcpy(out, e->r.kind == RT_TRACE_SEND ? "send " : "recv ", 5);
	memcpy(out + 5, name, n);
	out[5 + n] = '\0';
	return 5 + n;
}

/* The TrackEvent of a record (or of a slice's end) at w. */
static uint8_t *pb_track_event(uint8_t *w, const struct kb_trace *t, const struct kb_trace_ev *e,
			       bool end)
{
	const char *name = kb_trace_str(t, e, e->r.name), *cat = kb_trace_str(t, e, e->r.cat);
	bool slice = e->r.kind == RT_TRACE_SLICE, counter = e->r.kind == RT_TRACE_COUNTER;
	char msg[96];
	size_t name_len = strlen(name);
	unsigned type = slice ? (end ? PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END
				     : PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN)
			: counter ? PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER
				  : PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;

	if (slice && !end && (e->r.flags & RT_TRACE_F_COMMAND))
		w = pb_annotation(w, "command", NULL, e->r.seq);
	if (slice && !end && e->r.site != RT_TRACE_NONE)
		w = pb_annotation(w, "site", kb_trace_str(t, e, e->r.site), 0);
	w = pb_u64(w, 9, type);
	w = pb_u64(w, 11, counter ? counter_uuid(e) : UUID_THREAD + kb_trace_tid(e));
	if (e->r.cat != RT_TRACE_NONE)
		w = pb_str(w, 22, cat, strlen(cat));
	if (!slice && !counter) {
		name_len = message_name(msg, t, e);
		name = msg;
	}
	if (!(slice && end) && !counter)
		w = pb_str(w, 23, name, name_len);
	if (counter)
		w = pb_u64(w, 30, e->r.val); /* int64: the same varint for values < 2^63 */
	if (e->flow && e->r.kind == RT_TRACE_SEND)
		w = pb_fixed64(w, 47, e->flow);
	else if (e->flow && e->r.kind == RT_TRACE_RECV)
		w = pb_fixed64(w, 48, e->flow);
	return w;
}

/* Room for one event: fixed fields plus its strings. */
static bool event_room(struct pf_out *o, const struct kb_trace *t, const struct kb_trace_ev *e)
{
	size_t need = 256 + 2 * RT_PATH_MAX + strlen(kb_trace_str(t, e, e->r.name)) +
		      strlen(kb_trace_str(t, e, e->r.cat));
	uint8_t *grown;

	if (need <= o->cap)
		return true;
	grown = realloc(o->buf, 2 * need);
	if (!grown)
		return false;
	o->buf = grown;
	o->cap = 2 * need;
	return true;
}

#define PF_HEAD 40 /* room before the TrackEvent for the packet's own fields */

static void put_event(struct pf_out *o, const struct kb_trace *t, const struct kb_trace_ev *e,
		      bool end)
{
	uint8_t head[PF_HEAD], *h = head, *body, *body_end;
	uint64_t ts = (end ? e->r.ts_ps + e->r.val : e->r.ts_ps) / 1000;
	size_t te_len, packet_len, head_len;

	if (!event_room(o, t, e)) {
		o->failed = true;
		return;
	}
	body = o->buf + PF_HEAD;
	body_end = pb_track_event(body, t, e, end);
	te_len = (size_t)(body_end - body);
	/* TracePacket {timestamp = 8, trusted_packet_sequence_id = 10,
	 * track_event = 11}, framed as Trace.packet (field 1) */
	h = pb_u64(h, 8, ts);
	h = pb_u64(h, 10, SEQ_ID);
	h = pb_varint(pb_key(h, 11, 2), te_len);
	packet_len = (size_t)(h - head) + te_len;
	head_len = (size_t)(pb_varint(pb_key(o->buf, 1, 2), packet_len) - o->buf);
	memmove(o->buf + PF_HEAD - (size_t)(h - head), head, (size_t)(h - head));
	memmove(o->buf + PF_HEAD - (size_t)(h - head) - head_len, o->buf, head_len);
	body = o->buf + PF_HEAD - (size_t)(h - head) - head_len;
	if (fwrite(body, 1, (size_t)(body_end - body), o->f) != (size_t)(body_end - body))
		o->failed = true;
}

/* Counter tracks in the order their first records come. */
static void put_counter_tracks(struct pf_out *o, const struct kb_trace *t,
			       const struct rt_topology *topo)
{
	for (size_t i = 0; i < t->n_counters; i++)
		put_counter_track(o, t, topo, &t->counters[i]);
}

/* Every record as it comes out of the merge; a slice's end is held until
 * the first record at or after it (ends come before begins at one instant;
 * a zero-length slice ends right after it begins). */
static enum rt_err put_events(struct pf_out *o, struct kb_trace *t)
{
	struct pf_ends ends = { 0 };
	struct kb_trace_ev e;
	uint64_t key = 0;
	enum rt_err err = RT_EOK;

	while (!o->failed && kb_trace_next(t, &e, &err)) {
		while (ends.n && ends.items[0].ts_ps <= e.r.ts_ps) {
			put_event(o, t, &ends.items[0].e, true);
			ends_pop(&ends);
		}
		put_event(o, t, &e, false);
		if (e.r.kind == RT_TRACE_SLICE && !e.r.val)
			put_event(o, t, &e, true);
		else if (e.r.kind == RT_TRACE_SLICE &&
			 !ends_push(&ends, &(struct pf_end){ e.r.ts_ps + e.r.val, key, e }))
			err = rt_fail(RT_ENOMEM, "no memory for the trace's open slices");
		key++;
		if (err)
			break;
	}
	for (; !err && ends.n && !o->failed; ends_pop(&ends))
		put_event(o, t, &ends.items[0].e, true);
	free(ends.items);
	return err;
}

enum rt_err kb_trace_write_perfetto(struct kb_trace *t, const struct rt_topology *topo,
				    const char *path)
{
	struct pf_out o = { 0 };
	char tmp[RT_PATH_MAX + 48];
	enum rt_err err;
	bool ok;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	o.f = fopen(tmp, "wb");
	if (!o.f)
		return rt_fail(RT_EIO, "cannot create %s: %s", tmp, strerror(errno));
	setvbuf(o.f, NULL, _IOFBF, 1 << 20); /* many small writes per packet */
	put_tracks(&o, t, topo);
	put_counter_tracks(&o, t, topo);
	err = put_events(&o, t);
	ok = !fclose(o.f) && !o.failed;
	free(o.buf);
	if (err || !ok || rename(tmp, path)) {
		unlink(tmp);
		return err ? err : rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	}
	return RT_EOK;
}
