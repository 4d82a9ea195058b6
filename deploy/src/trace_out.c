/* trace_out.c — merges binary trace parts into one trace file: the
 * records of every part in one order (here), written as JSON
 * (trace_json.c) or Perfetto protobuf (trace_pftrace.c).
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
 */
#include "trace_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/daemon.h"


/* ---------------------------------------------------------------- model */

/* A run: records [off, end) of a part's record file (in place: plain
 * records, order counted from `order0`) or of the run file (whole events,
 * sorted by the launcher); head is its current record while merging. */
struct kb_trace_run {
	uint32_t file;   /* index into kb_trace.paths */
	uint32_t part;
	uint64_t off, end;
	uint32_t order0;
	bool in_place;
	struct kb_trace_ev *mem; /* a sorted chunk kept in memory, else NULL */
	size_t mem_n, mem_at;
	struct kb_src src;
	struct kb_trace_ev head;
};

/* A message in flight: its send was numbered, its delivery is still ahead. */
struct kb_flow_slot {
	uint64_t src_plus1; /* 0: empty */
	uint64_t seq;
	uint64_t flow;
};

#define MAX_SEQ (1ull << 36) /* a sequence beyond this is a corrupt part */

int kb_trace_ev_cmp(const void *pa, const void *pb)
{
	const struct kb_trace_ev *a = pa, *b = pb;

	if (a->r.ts_ps != b->r.ts_ps)
		return a->r.ts_ps < b->r.ts_ps ? -1 : 1;
	if (a->part != b->part)
		return a->part < b->part ? -1 : 1;
	if (a->r.track != b->r.track)
		return a->r.track < b->r.track ? -1 : 1;
	/* at one instant an enclosing slice opens before what it encloses;
	 * compared only on one track, so the order stays total (comparing
	 * durations across tracks made it cyclic, and the result depended on
	 * the sorting algorithm) */
	if (a->r.kind == RT_TRACE_SLICE && b->r.kind == RT_TRACE_SLICE && a->r.val != b->r.val)
		return a->r.val > b->r.val ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static uint64_t mix(uint64_t src, uint64_t seq)
{
	uint64_t h = (src * 0x9e3779b97f4a7c15ull) ^ (seq + 0x632be59bd9b4e019ull);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 29);
}

/* Marks message (src, seq) as delivered. */
static enum rt_err mark_delivered(struct kb_trace *t, uint32_t src, uint64_t seq)
{
	uint64_t word = seq / 64, *bits = t->delivered[src];

	if (seq >= MAX_SEQ)
		return rt_fail(RT_EPROTOCOL, "corrupt trace part: message sequence %llu",
			       (unsigned long long)seq);
	if (word >= t->delivered_words[src]) {
		uint64_t cap = t->delivered_words[src] ? t->delivered_words[src] : 64;

		while (cap <= word)
			cap *= 2;
		bits = realloc(bits, cap * sizeof(*bits));
		if (!bits)
			return rt_fail(RT_ENOMEM, "no memory to pair trace messages");
		memset(bits + t->delivered_words[src], 0,
		       (cap - t->delivered_words[src]) * sizeof(*bits));
		t->delivered[src] = bits;
		t->delivered_words[src] = cap;
	}
	bits[word] |= 1ull << (seq % 64);
	return RT_EOK;
}

static bool was_delivered(const struct kb_trace *t, uint32_t src, uint64_t seq)
{
	uint64_t word = seq / 64;

	return src < t->n_components && word < t->delivered_words[src] &&
	       (t->delivered[src][word] >> (seq % 64) & 1);
}

static enum rt_err pending_grow(struct kb_trace *t)
{
	size_t cap = t->pending_cap ? 2 * t->pending_cap : 1024;
	struct kb_flow_slot *old = t->pending, *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return rt_fail(RT_ENOMEM, "no memory to pair trace messages");
	for (size_t i = 0; i < t->pending_cap; i++) {
		size_t h;

		if (!old[i].src_plus1)
			continue;
		for (h = mix(old[i].src_plus1, old[i].seq) & (cap - 1); slots[h].src_plus1;
		     h = (h + 1) & (cap - 1))
			;
		slots[h] = old[i];
	}
	free(old);
	t->pending = slots;
	t->pending_cap = cap;
	return RT_EOK;
}

static enum rt_err pending_put(struct kb_trace *t, uint32_t src, uint64_t seq, uint64_t flow)
{
	size_t h, mask;
	enum rt_err err = RT_EOK;

	if (2 * (t->pending_n + 1) > t->pending_cap)
		err = pending_grow(t);
	if (err)
		return err;
	mask = t->pending_cap - 1;
	for (h = mix(src + 1ull, seq) & mask; t->pending[h].src_plus1; h = (h + 1) & mask)
		;
	t->pending[h] = (struct kb_flow_slot){ src + 1ull, seq, flow };
	t->pending_n++;
	return RT_EOK;
}

/* The flow of message (src, seq), taken out of the table (0: none). */
static uint64_t pending_take(struct kb_trace *t, uint32_t src, uint64_t seq)
{
	size_t mask = t->pending_cap - 1, h, next;
	uint64_t flow;

	if (!t->pending_n)
		return 0;
	for (h = mix(src + 1ull, seq) & mask;; h = (h + 1) & mask) {
		if (!t->pending[h].src_plus1)
			return 0;
		if (t->pending[h].src_plus1 == src + 1ull && t->pending[h].seq == seq)
			break;
	}
	flow = t->pending[h].flow;
	/* backward-shift deletion keeps every probe chain unbroken */
	for (next = (h + 1) & mask; t->pending[next].src_plus1; next = (next + 1) & mask) {
		size_t home = mix(t->pending[next].src_plus1, t->pending[next].seq) & mask;

		if (((next - home) & mask) >= ((next - h) & mask)) {
			t->pending[h] = t->pending[next];
			h = next;
		}
	}
	t->pending[h].src_plus1 = 0;
	t->pending_n--;
	return flow;
}

/* A message end gets its flow number: a send whose delivery exists is
 * numbered in send order (sends come before their deliveries: a link has
 * a latency) and waits for that delivery in the table. */
static enum rt_err number_flow(struct kb_trace *t, struct kb_trace_ev *e)
{
	e->flow = 0;
	if (e->r.kind == RT_TRACE_SEND && was_delivered(t, e->part, e->r.seq)) {
		e->flow = ++t->n_flows;
		return pending_put(t, e->part, e->r.seq, e->flow);
	}
	if (e->r.kind == RT_TRACE_RECV)
		e->flow = pending_take(t, e->r.src, e->r.seq);
	return RT_EOK;
}

static enum rt_err add_run(struct kb_trace *t, const struct kb_trace_run *r)
{
	struct kb_trace_run *grown;

	grown = kb_grow(t->runs, &t->cap_runs, t->n_runs, sizeof(*t->runs), 64);
	if (!grown)
		return rt_fail(RT_ENOMEM, "no memory to merge the trace");
	t->runs = grown;
	t->runs[t->n_runs++] = *r;
	return RT_EOK;
}

/* Remembers a counter's first record (Perfetto's counter tracks). */
static enum rt_err note_counter(struct kb_trace *t, const struct kb_trace_ev *e)
{
	struct kb_trace_ev *grown;
	size_t i = t->n_counters;

	while (i-- > 0 && t->counters[i].part == e->part)
		if (t->counters[i].r.name == e->r.name) {
			if (kb_trace_ev_cmp(e, &t->counters[i]) < 0)
				t->counters[i] = *e;
			return RT_EOK;
		}
	grown = kb_grow(t->counters, &t->cap_counters, t->n_counters, sizeof(*t->counters), 16);
	if (!grown)
		return rt_fail(RT_ENOMEM, "no memory to merge the trace");
	t->counters = grown;
	t->counters[t->n_counters++] = *e;
	return RT_EOK;
}

/* Checks a chunk's records, notes deliveries and counters, and says
 * whether the chunk is in order. */
static enum rt_err scan_chunk(struct kb_trace *t, const struct kb_trace_ev *ev, size_t n,
			      const char *path, bool *sorted)
{
	const struct rt_trace_part *p = &t->parts[ev[0].part];
	enum rt_err err = RT_EOK;

	*sorted = true;
	for (size_t i = 0; !err && i < n; i++) {
		const struct rt_trace_rec *r = &ev[i].r;

		if (!rt_trace_rec_ok(p, r))
			return rt_fail(RT_EPROTOCOL, "corrupt trace part %s: record %u", path,
				       ev[i].order);
		if (r->kind == RT_TRACE_RECV && r->src >= t->n_components)
			return rt_fail(RT_EPROTOCOL, "corrupt trace part: sender %u of a message",
				       r->src);
		if (r->kind == RT_TRACE_RECV)
			err = mark_delivered(t, r->src, r->seq);
		else if (r->kind == RT_TRACE_COUNTER)
			err = note_counter(t, &ev[i]);
		if (i && kb_trace_ev_cmp(&ev[i - 1], &ev[i]) > 0)
			*sorted = false;
	}
	return err;
}

/* A component writes its records almost in time order (a slice when it
 * ends, a send ahead of now): insertion sort moves each a few places. If
 * the moves grow beyond a few per record, qsort finishes the job. */
static void sort_nearly_sorted(struct kb_trace_ev *ev, size_t n)
{
	size_t moves = 0, budget = 16 * n;

	for (size_t i = 1; i < n; i++) {
		struct kb_trace_ev x = ev[i];
		size_t j = i;

		while (j > 0 && kb_trace_ev_cmp(&ev[j - 1], &x) > 0 && moves < budget) {
			ev[j] = ev[j - 1];
			j--;
			moves++;
		}
		ev[j] = x;
		if (moves >= budget) {
			qsort(ev, n, sizeof(*ev), kb_trace_ev_cmp);
			return;
		}
	}
}

/* Keeps the sorted chunk *ev (n records) as a run in memory; *ev gets a
 * fresh buffer of `cap` records for the next chunk. */
static enum rt_err keep_in_memory(struct kb_trace *t, uint32_t part, struct kb_trace_ev **ev,
				  size_t n, size_t cap)
{
	struct kb_trace_ev *mem = realloc(*ev, n * sizeof(*mem)), *next;
	enum rt_err err;

	if (!mem)
		return rt_fail(RT_ENOMEM, "no memory to merge the trace");
	*ev = NULL;
	next = malloc(cap * sizeof(*next));
	if (!next) {
		free(mem);
		return rt_fail(RT_ENOMEM, "no memory to merge the trace");
	}
	*ev = next;
	t->mem_left -= n * sizeof(*mem);
	err = add_run(t, &(struct kb_trace_run){ .part = part, .mem = mem, .mem_n = n });
	if (err)
		free(mem); /* not a run: nobody else frees it */
	return err;
}

/* Cuts part `part` into runs, `cap` records at a time: while the memory
 * budget lasts a chunk stays in memory (sorted); then a chunk in order
 * stays in the part file (joined to the run before it when that continues
 * it), another is sorted and appended to the run file. */
static enum rt_err cut_part(struct kb_trace *t, uint32_t part, struct kb_trace_ev **evp,
			    struct rt_trace_rec *recs, size_t cap, struct kb_runs_file *rf)
{
	struct kb_trace_ev *ev = *evp;
	const char *path = t->paths[part];
	FILE *f = t->part_recs[part] ? fopen(path, "rb") : NULL;
	struct kb_trace_ev last;
	uint32_t order = 0;
	enum rt_err err = RT_EOK;
	size_t got;

	if (!t->part_recs[part])
		return RT_EOK;
	if (!f)
		return rt_fail(RT_EIO, "cannot open %s: %s", path, strerror(errno));
	/* the part's string table follows its records: read only those */
	while (!err && order < t->part_recs[part] &&
	       (got = fread(recs, sizeof(*recs),
			    cap < t->part_recs[part] - order ? cap : t->part_recs[part] - order,
			    f)) > 0) {
		struct kb_trace_run *prev = t->n_runs ? &t->runs[t->n_runs - 1] : NULL;
		uint64_t off = (uint64_t)order * sizeof(*recs);
		bool sorted;

		for (size_t i = 0; i < got; i++)
			ev[i] = (struct kb_trace_ev){ .r = recs[i], .part = part, .order = order + (uint32_t)i };
		err = scan_chunk(t, ev, got, path, &sorted);
		if (err)
			break;
		if (!sorted)
			sort_nearly_sorted(ev, got);
		last = ev[got - 1];
		if (got * sizeof(*ev) <= t->mem_left) {
			err = keep_in_memory(t, part, evp, got, cap);
			ev = *evp;
		} else if (sorted && order && prev && prev->in_place && prev->part == part &&
			   kb_trace_ev_cmp(&t->last_cut, &ev[0]) < 0) {
			prev->end = off + got * sizeof(*recs);
		} else if (sorted) {
			err = add_run(t, &(struct kb_trace_run){ .file = part, .part = part, .off = off,
								 .end = off + got * sizeof(*recs),
								 .order0 = order, .in_place = true });
		} else {
			uint64_t at = rf->size;

			err = kb_runs_file_write(rf, ev, got * sizeof(*ev));
			if (!err)
				err = add_run(t, &(struct kb_trace_run){ .file = t->n_parts, .part = part,
									 .off = at, .end = rf->size });
		}
		t->last_cut = last;
		order += (uint32_t)got;
	}
	if (!err && ferror(f))
		err = rt_fail(RT_EIO, "cannot read %s", path);
	fclose(f);
	return err;
}

/* The run's next record into its head; false at its end. */
static bool run_next(struct kb_trace_run *r, enum rt_err *err)
{
	const void *item;

	*err = RT_EOK;
	if (r->mem) {
		if (r->mem_at == r->mem_n) {
			free(r->mem); /* done: give its memory back */
			r->mem = NULL;
			return false;
		}
		r->head = r->mem[r->mem_at++];
		return true;
	}
	if (r->mem_n)
		return false; /* a memory run already finished */
	*err = kb_src_fixed(&r->src, r->in_place ? sizeof(struct rt_trace_rec)
						 : sizeof(struct kb_trace_ev), &item);
	if (*err || !item)
		return false;
	if (r->in_place) {
		memcpy(&r->head.r, item, sizeof(r->head.r));
		r->head.part = r->part;
		r->head.order = r->order0++;
	} else {
		memcpy(&r->head, item, sizeof(r->head));
	}
	return true;
}

static int run_cmp(const void *ctx, uint32_t a, uint32_t b)
{
	const struct kb_trace_run *runs = ctx;

	return kb_trace_ev_cmp(&runs[a].head, &runs[b].head);
}

static enum rt_err start_merge(struct kb_trace *t)
{
	size_t cap = kb_merge_buf_size(t->n_runs);
	enum rt_err err = kb_heap_init(&t->heap, t->n_runs, run_cmp, t->runs);

	for (uint32_t i = 0; !err && i < t->n_runs; i++) {
		struct kb_trace_run *r = &t->runs[i];

		/* a run's offsets were counted in its own item size */
		kb_src_init(&r->src, t->paths[r->file], r->off, r->end,
			    cap - cap % (r->in_place ? sizeof(struct rt_trace_rec)
						     : sizeof(struct kb_trace_ev)));
		if (run_next(r, &err))
			kb_heap_push(&t->heap, i);
	}
	return err;
}

bool kb_trace_next(struct kb_trace *t, struct kb_trace_ev *e, enum rt_err *err)
{
	struct kb_trace_run *r;
	bool more;

	*err = RT_EOK;
	if (!t->heap.n)
		return false;
	r = &t->runs[t->heap.ids[0]];
	*e = r->head;
	more = run_next(r, err);
	if (*err)
		return false;
	kb_heap_fix_top(&t->heap, !more);
	*err = number_flow(t, e);
	return !*err;
}

static enum rt_err open_parts(const struct rt_job *job, struct kb_trace *t)
{
	char dir[RT_PATH_MAX + 16], stem[16];
	enum rt_err err = RT_EOK;

	snprintf(dir, sizeof(dir), "%s/%s", job->out_dir, RT_PARTS_DIR);
	t->parts = calloc(t->n_parts, sizeof(*t->parts));
	t->part_recs = calloc(t->n_parts, sizeof(*t->part_recs));
	t->paths = calloc(t->n_parts + 1, sizeof(*t->paths));
	t->delivered = calloc(t->n_components + 1, sizeof(*t->delivered));
	t->delivered_words = calloc(t->n_components + 1, sizeof(*t->delivered_words));
	if (!t->parts || !t->part_recs || !t->paths || !t->delivered || !t->delivered_words)
		return rt_fail(RT_ENOMEM, "no memory to read the trace parts");
	for (uint32_t p = 0; !err && p <= t->n_parts; p++) {
		uint64_t bytes = 0;

		if (p + 1 < t->n_parts)
			snprintf(stem, sizeof(stem), "%u", p);
		else
			snprintf(stem, sizeof(stem), p < t->n_parts ? "coord" : "trace.runs");
		t->paths[p] = malloc(RT_PATH_MAX + 48);
		if (!t->paths[p])
			return rt_fail(RT_ENOMEM, "no memory to read the trace parts");
		snprintf(t->paths[p], RT_PATH_MAX + 48, "%s/%s%s", dir, stem,
			 p < t->n_parts ? ".trace" : "");
		if (p == t->n_parts)
			break;
		err = rt_trace_part_read_names(dir, stem, &t->parts[p], &bytes);
		t->part_recs[p] = bytes / sizeof(struct rt_trace_rec);
		t->n += t->part_recs[p];
		if (!err && t->part_recs[p] > UINT32_MAX)
			err = rt_fail(RT_EINVAL, "trace part %s has more than 2^32 records", stem);
	}
	return err;
}

enum rt_err kb_trace_open(const struct rt_job *job, const struct rt_topology *topo,
			  size_t chunk, struct kb_trace *t)
{
	struct kb_runs_file rf;
	struct kb_trace_ev *ev = NULL;
	struct rt_trace_rec *recs = NULL;
	enum rt_err err;

	memset(t, 0, sizeof(*t));
	t->n_components = topo->n_components;
	t->n_parts = topo->n_components + 1;
	if (!chunk)
		chunk = kb_merge_chunk_bytes() / sizeof(*ev);
	err = open_parts(job, t);
	kb_runs_file_open(&rf, "", "");
	if (!err)
		snprintf(rf.path, sizeof(rf.path), "%s", t->paths[t->n_parts]);
	if (!err) {
		ev = malloc((chunk ? chunk : 1) * sizeof(*ev));
		recs = malloc((chunk ? chunk : 1) * sizeof(*recs));
		if (!ev || !recs)
			err = rt_fail(RT_ENOMEM, "no memory to sort %zu trace records", chunk);
	}
	t->mem_left = KB_MERGE_IN_MEMORY * chunk * sizeof(*ev);
	for (uint32_t p = 0; !err && p < t->n_parts; p++)
		err = cut_part(t, p, &ev, recs, chunk ? chunk : 1, &rf);
	free(ev);
	free(recs);
	if (!err)
		err = kb_runs_file_close(&rf);
	else
		kb_runs_file_close(&rf);
	if (!err && t->n_counters)
		qsort(t->counters, t->n_counters, sizeof(*t->counters), kb_trace_ev_cmp);
	return err ? err : start_merge(t);
}

void kb_trace_release(struct kb_trace *t)
{
	for (uint32_t p = 0; t->parts && p < t->n_parts; p++)
		rt_trace_part_release(&t->parts[p]);
	for (uint32_t p = 0; t->paths && p <= t->n_parts; p++)
		free(t->paths[p]);
	for (uint32_t i = 0; i < t->n_runs; i++) {
		kb_src_release(&t->runs[i].src);
		free(t->runs[i].mem);
	}
	for (uint32_t c = 0; t->delivered && c <= t->n_components; c++)
		free(t->delivered[c]);
	kb_heap_release(&t->heap);
	free(t->parts);
	free(t->part_recs);
	free(t->paths);
	free(t->runs);
	free(t->delivered);
	free(t->delivered_words);
	free(t->pending);
	free(t->counters);
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
	err = kb_trace_open(job, topo, 0, &t);
	if (!err && job->trace.format == RT_TRACE_PERFETTO)
		err = kb_trace_write_perfetto(&t, topo, path);
	else if (!err)
		err = kb_trace_write_json(&t, topo, job, path, job->trace.format == RT_TRACE_JSON_GZ);
	kb_trace_release(&t);
	return err;
}
