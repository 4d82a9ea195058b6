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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "rt/buf.h"
#include "rt/daemon.h"

#define SINK_FLUSH (1u << 20)

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
	return add_run(t, &(struct kb_trace_run){ .part = part, .mem = mem, .mem_n = n });
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

/* ---------------------------------------------------------------- sink */

/* Buffered output to a plain or gzip file, written to `<path>.tmp` and
 * renamed when complete. A gzip sink compresses on a thread of its own,
 * one buffer behind the formatting (deflate costs as much as formatting:
 * side by side they take the time of one, not of both). */
struct sink {
	struct rt_buf b;
	FILE *f;
	gzFile gz;
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

static enum rt_err sink_open(struct sink *s, const char *path, bool gz)
{
	memset(s, 0, sizeof(*s));
	rt_buf_init(&s->b);
	rt_buf_init(&s->full);
	snprintf(s->tmp, sizeof(s->tmp), "%s.tmp", path);
	if (gz)
		s->gz = gzopen(s->tmp, "wb1"); /* fast: the trace is rewritten per run */
	else
		s->f = fopen(s->tmp, "wb");
	if (!s->f && !s->gz)
		return rt_fail(RT_EIO, "cannot create %s: %s", s->tmp, strerror(errno));
	if (s->gz && !pthread_mutex_init(&s->mu, NULL)) {
		if (pthread_cond_init(&s->cv, NULL))
			pthread_mutex_destroy(&s->mu);
		else if (pthread_create(&s->thread, NULL, deflate_thread, s)) {
			pthread_cond_destroy(&s->cv);
			pthread_mutex_destroy(&s->mu);
		} else {
			s->threaded = true; /* else: compressed in line */
		}
	}
	if (s->threaded && rt_buf_reserve(&s->full, SINK_FLUSH + 4096))
		return RT_ENOMEM;
	return rt_buf_reserve(&s->b, SINK_FLUSH + 4096);
}

static void sink_drain(struct sink *s)
{
	if (!s->b.len || s->err)
		return;
	if (s->threaded) {
		sink_hand_over(s);
		return;
	}
	if (s->gz ? gzwrite(s->gz, s->b.data, (unsigned)s->b.len) != (int)s->b.len
		  : fwrite(s->b.data, 1, s->b.len, s->f) != s->b.len)
		s->err = rt_fail(RT_EIO, "cannot write %s: %s", s->tmp, strerror(errno));
	rt_buf_reset(&s->b);
}

static enum rt_err sink_close(struct sink *s, const char *path)
{
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

static void put_str(struct sink *s, const char *str)
{
	if (s->b.len + 2 * strlen(str) + 8 > SINK_FLUSH)
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

static enum rt_err write_json(struct kb_trace *t, const struct rt_topology *topo,
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
		err = write_json(&t, topo, job, path, job->trace.format == RT_TRACE_JSON_GZ);
	kb_trace_release(&t);
	return err;
}
