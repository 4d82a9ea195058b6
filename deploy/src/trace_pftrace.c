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

static void put_event(struct pf_out *o, const struct kb_trace *t, const struct kb_trace_ev *e,
		      bool end)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Perfetto__Protos__DebugAnnotation da[2] = { PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT,
						    PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT };
	Perfetto__Protos__DebugAnnotation *dap[2] = { &da[0], &da[1] };
	char *cat = (char *)kb_trace_str(t, e, e->r.cat);
	char name[96];
	uint64_t flow = e->flow;

	p.has_timestamp = 1;
	p.timestamp = (end ? e->r.ts_ps + e->r.val : e->r.ts_ps) / 1000;
	p.track_event = &te;
	te.has_type = te.has_track_uuid = 1;
	te.track_uuid = UUID_THREAD + kb_trace_tid(e);
	te.name = (char *)kb_trace_str(t, e, e->r.name);
	if (e->r.cat != RT_TRACE_NONE) {
		te.n_categories = 1;
		te.categories = &cat;
	}
	switch (e->r.kind) {
	case RT_TRACE_SLICE:
		te.type = end ? PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END
				  : PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
		if (end)
			te.name = NULL;
		if (!end && (e->r.flags & RT_TRACE_F_COMMAND)) {
			da[0].name = (char *)"command";
			da[0].has_uint_value = 1;
			da[0].uint_value = e->r.seq;
			te.n_debug_annotations = 1;
		}
		if (!end && e->r.site != RT_TRACE_NONE) {
			da[te.n_debug_annotations].name = (char *)"site";
			da[te.n_debug_annotations].string_value =
				(char *)kb_trace_str(t, e, e->r.site);
			te.n_debug_annotations++;
		}
		te.debug_annotations = dap;
		break;
	case RT_TRACE_COUNTER:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER;
		te.track_uuid = counter_uuid(e);
		te.name = NULL;
		te.has_counter_value = 1;
		te.counter_value = (int64_t)e->r.val;
		break;
	default:
		snprintf(name, sizeof(name), "%s %s", e->r.kind == RT_TRACE_SEND ? "send" : "recv",
			 te.name);
		te.name = name;
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
		if (flow && e->r.kind == RT_TRACE_SEND) {
			te.n_flow_ids = 1;
			te.flow_ids = &flow;
		} else if (flow) {
			te.n_terminating_flow_ids = 1;
			te.terminating_flow_ids = &flow;
		}
	}
	put_packet(o, &p);
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
