/* test_trace.c — traces that importers read correctly (issue 10 items 1, 2).
 *
 * Two independent checks of the same runs: a C reader of trace.json (one
 * event per line) that checks time order, numeric flow ids paired s -> f,
 * nesting per track and the filters; and the real Chrome DevTools trace
 * engine (tests/importer/check_trace.mjs under node), which must resolve
 * every flow and find no overlapping slice. The Perfetto protobuf form is
 * decoded with protobuf-c from proto/perfetto_trace.proto. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "perfetto_trace.pb-c.h"

#define MAX_TRACKS 4096
#define MAX_DEPTH 64

struct span {
	uint64_t b, e;
};

struct track {
	uint32_t pid, tid;
	struct span open[MAX_DEPTH];
	int depth;
};

struct facts {
	size_t slices, starts, ends, counters, flows_out_of_order, partial_overlaps;
	size_t unsorted, bad_ids;
	uint64_t first_ps, last_end_ps;
	uint32_t pid_mask;
	bool has_wait, has_dispatch, has_site, has_scratch, has_dma_read, has_dma_write;
	bool display_unit;
};

/* "12.000345" (µs, six decimals) or "0" as picoseconds. */
static bool us_field(const char *line, const char *key, uint64_t *ps)
{
	const char *p = strstr(line, key);
	unsigned long long whole, frac = 0;
	int used = 0;

	if (!p || sscanf(p + strlen(key), "%llu%n", &whole, &used) != 1)
		return false;
	p += strlen(key) + used;
	if (*p == '.' && (strspn(p + 1, "0123456789") != 6 || sscanf(p + 1, "%6llu", &frac) != 1))
		return false;
	*ps = whole * 1000000ull + frac;
	return true;
}

static bool u_field(const char *line, const char *key, unsigned long long *v)
{
	const char *p = strstr(line, key);

	return p && sscanf(p + strlen(key), "%llu", v) == 1;
}

static struct track *track_of(struct track *tr, size_t *n, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < *n; i++)
		if (tr[i].pid == pid && tr[i].tid == tid)
			return &tr[i];
	cr_assert_lt(*n, MAX_TRACKS);
	tr[*n] = (struct track){ .pid = pid, .tid = tid };
	return &tr[(*n)++];
}

/* Slices arrive sorted by (start, longer first): pop what ended, then the
 * new slice must end within the innermost open one. */
static void nest(struct facts *f, struct track *t, uint64_t b, uint64_t e)
{
	while (t->depth && t->open[t->depth - 1].e <= b)
		t->depth--;
	if (t->depth && e > t->open[t->depth - 1].e)
		f->partial_overlaps++;
	if (t->depth < MAX_DEPTH)
		t->open[t->depth++] = (struct span){ b, e };
}

/* Flow ids: a start must precede its end; each is used once each way. */
struct flow_ids {
	unsigned char *state; /* 1 started, 2 ended */
	size_t cap;
};

static void flow_mark(struct facts *f, struct flow_ids *ids, unsigned long long id, bool start)
{
	if (id == 0 || id > 100000000ull) {
		f->bad_ids++;
		return;
	}
	if (id >= ids->cap) {
		size_t cap = (size_t)id * 2 + 16;

		ids->state = realloc(ids->state, cap);
		cr_assert(ids->state);
		memset(ids->state + ids->cap, 0, cap - ids->cap);
		ids->cap = cap;
	}
	if (start ? ids->state[id] != 0 : ids->state[id] != 1)
		f->flows_out_of_order++;
	ids->state[id] = start ? 1 : 2;
}

static void check_line(struct facts *f, struct track *tr, size_t *n_tr, struct flow_ids *ids,
		       const char *line, uint64_t *last_ts)
{
	unsigned long long pid, tid, id;
	uint64_t ts, dur;
	char ph;

	if (strncmp(line, "{\"ph\":\"", 7) || (ph = line[7]) == 'M')
		return;
	cr_assert(u_field(line, "\"pid\":", &pid) && u_field(line, "\"tid\":", &tid) &&
		  us_field(line, "\"ts\":", &ts), "event without pid/tid/ts: %.120s", line);
	if (ts < *last_ts)
		f->unsorted++;
	*last_ts = ts;
	f->pid_mask |= pid < 32 ? 1u << pid : 0;
	if (ph == 'X') {
		cr_assert(us_field(line, "\"dur\":", &dur), "slice without dur: %.120s", line);
		nest(f, track_of(tr, n_tr, (uint32_t)pid, (uint32_t)tid), ts, ts + dur);
		if (!f->slices++)
			f->first_ps = ts; /* sorted: the earliest */
		if (ts + dur > f->last_end_ps)
			f->last_end_ps = ts + dur;
		f->has_wait |= strstr(line, "\"name\":\"wait\"") != NULL;
		f->has_dispatch |= strstr(line, "\"name\":\"dispatch ") != NULL;
		f->has_site |= strstr(line, "\"site\":\"") != NULL;
	} else if (ph == 's' || ph == 'f') {
		if (!u_field(line, "\"id\":", &id))
			f->bad_ids++;
		else
			flow_mark(f, ids, id, ph == 's');
		f->starts += ph == 's';
		f->ends += ph == 'f';
	} else if (ph == 'C') {
		f->counters++;
		f->has_scratch |= strstr(line, "scratch_bytes") != NULL;
	}
}

static void check_json_text(char *text, struct facts *f)
{
	struct track *tr = calloc(MAX_TRACKS, sizeof(*tr));
	struct flow_ids ids = { 0 };
	size_t n_tr = 0;
	uint64_t last_ts = 0;

	cr_assert(tr);
	memset(f, 0, sizeof(*f));
	f->display_unit = strstr(text, "displayTimeUnit") != NULL;
	f->has_dma_read = strstr(text, ".dma dma_read\"") != NULL;
	f->has_dma_write = strstr(text, ".dma dma_write\"") != NULL;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		check_line(f, tr, &n_tr, &ids, line, &last_ts);
	for (size_t i = 1; i < ids.cap; i++)
		if (ids.state[i] == 1)
			f->flows_out_of_order++; /* started, never ended */
	free(ids.state);
	free(tr);
}

static void check_json(const char *dir, struct facts *f)
{
	char path[600];
	char *text;

	snprintf(path, sizeof(path), "%s/trace.json", dir);
	text = kb_slurp(path, NULL);
	cr_assert(text, "no %s", path);
	check_json_text(text, f);
	free(text);
}

static void expect_well_formed(const struct facts *f, const char *what)
{
	cr_expect(!f->display_unit, "%s: displayTimeUnit set", what);
	cr_expect_eq(f->unsorted, 0, "%s: %zu events out of time order", what, f->unsorted);
	cr_expect_eq(f->partial_overlaps, 0, "%s: %zu slices overlap without nesting", what,
		     f->partial_overlaps);
	cr_expect_eq(f->bad_ids, 0, "%s: %zu flow ids not small numbers", what, f->bad_ids);
	cr_expect_eq(f->flows_out_of_order, 0, "%s: %zu flows not paired start-then-end", what,
		     f->flows_out_of_order);
	cr_expect_eq(f->starts, f->ends, "%s: %zu flow starts, %zu ends", what, f->starts, f->ends);
}

/* ---------------------------------------------------------------- C reader */

Test(trace, pipelined_gemm_nests_pairs_and_sorts, .timeout = 120)
{
	char dir[256];
	struct facts f;

	kb_tmpdir(dir, sizeof(dir), "trace-gemm");
	/* the blocked form: scratch blocks and stores, waits at each scope */
	kb_run_ok(dir, (const char *const[]){ "gemm", "--arg", "m=512", "--arg", "k=512", "--arg", "n=512",
				"--arg", "blocked=1", NULL });
	check_json(dir, &f);
	expect_well_formed(&f, "gemm");
	cr_expect_gt(f.starts, 100);
	cr_expect(f.has_dma_read && f.has_dma_write, "DMA channels need a track each");
	cr_expect(f.has_wait && f.has_dispatch && f.has_site,
		  "the host track shows dispatch and wait slices with the call site");
	cr_expect(f.has_scratch, "no scratch counter track");
}

Test(trace, every_message_is_one_flow, .timeout = 120)
{
	char dir[256], path[600];
	char *s;
	struct facts f;

	kb_tmpdir(dir, sizeof(dir), "trace-traffic");
	kb_run_ok(dir, (const char *const[]){ "traffic", "--arg", "components=4", "--arg", "messages=300",
				NULL });
	check_json(dir, &f);
	expect_well_formed(&f, "traffic");
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	s = kb_slurp(path, NULL);
	cr_assert(s);
	cr_expect_eq(f.starts, kb_json_u64(s, "messages"));
	free(s);
}

Test(trace, window_ranks_and_flows_filter, .timeout = 120)
{
	char all[256], win[256], ranks[256], noflow[256];
	struct facts fa, fw, fr, fn;

	kb_tmpdir(all, sizeof(all), "trace-all");
	kb_tmpdir(win, sizeof(win), "trace-win");
	kb_tmpdir(ranks, sizeof(ranks), "trace-ranks");
	kb_tmpdir(noflow, sizeof(noflow), "trace-noflow");
#define RING "ring_attention", "--ranks", "2", "--arg", "seq_q=128", "--arg", "seq_kv=256"
	kb_run_ok(all, (const char *const[]){ RING, NULL });
	kb_run_ok(win, (const char *const[]){ RING, "--trace-window", "2:3.5", NULL });
	kb_run_ok(ranks, (const char *const[]){ RING, "--trace-ranks", "1", NULL });
	kb_run_ok(noflow, (const char *const[]){ RING, "--trace-flows", "off", NULL });
	check_json(all, &fa);
	check_json(win, &fw);
	check_json(ranks, &fr);
	check_json(noflow, &fn);
	expect_well_formed(&fa, "all");
	expect_well_formed(&fw, "window");
	expect_well_formed(&fr, "ranks");
	expect_well_formed(&fn, "no flows");
	cr_expect_eq(fa.pid_mask, 3u);
	cr_expect_eq(fr.pid_mask, 2u, "--trace-ranks 1 kept pids %x", fr.pid_mask);
	cr_expect_gt(fw.slices, 0);
	cr_expect_lt(fw.slices, fa.slices / 2);
	cr_expect_leq(fw.first_ps, 3500000u);
	cr_expect_geq(fw.last_end_ps, 2000000u);
	cr_expect_gt(fn.slices, 0);
	cr_expect_eq(fn.starts, 0, "--trace-flows off still wrote arrows");
}

/* The bytes of `path` inflated as ONE gzip member (Perfetto's reader stops
 * at the first member's end): NULL if it is not exactly one. */
static char *gunzip_one_member(const char *path, size_t *out_len)
{
	size_t len, cap = 1 << 20;
	unsigned char *gz = (unsigned char *)kb_slurp(path, &len);
	char *out = malloc(cap);
	z_stream z = { 0 };
	int rc = Z_OK;

	cr_assert(gz && out && inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, "cannot read %s", path);
	z.next_in = gz;
	z.avail_in = (uInt)len;
	while (rc == Z_OK) {
		if (z.total_out == cap)
			cr_assert((out = realloc(out, cap *= 2)));
		z.next_out = (Bytef *)out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		rc = inflate(&z, Z_NO_FLUSH);
	}
	*out_len = z.total_out;
	inflateEnd(&z);
	if (rc != Z_STREAM_END || z.avail_in) {
		free(out);
		out = NULL;
	}
	free(gz);
	return out;
}

/* trace.json.gz is trace.json, one gzip member, whichever way it was
 * compressed: whole at the end (libdeflate, the default), streamed through
 * zlib from the start (KB_TRACE_GZ_WHOLE=0) or from the moment the trace
 * outgrew the whole-buffer bound (KB_TRACE_GZ_WHOLE=3000). */
Test(trace, gzip_is_the_json_compressed, .timeout = 120)
{
	static const char *const whole[] = { NULL, "0", "3000" };
	char a[256], b[256], path[600];
	char *json, *unzipped;
	size_t len, got;

	kb_tmpdir(a, sizeof(a), "trace-json");
	kb_run_ok(a, (const char *const[]){ "gemm", NULL });
	snprintf(path, sizeof(path), "%s/trace.json", a);
	json = kb_slurp(path, &len);
	cr_assert(json);
	cr_assert_gt(len, 3 * 3000, "the trace is too short to outgrow the bound");
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		kb_tmpdir(b, sizeof(b), "trace-gz");
		if (whole[i])
			setenv("KB_TRACE_GZ_WHOLE", whole[i], 1);
		kb_run_ok(b, (const char *const[]){ "gemm", "--trace-format", "json.gz", NULL });
		unsetenv("KB_TRACE_GZ_WHOLE");
		snprintf(path, sizeof(path), "%s/trace.json.gz", b);
		unzipped = gunzip_one_member(path, &got);
		cr_assert(unzipped, "%s (KB_TRACE_GZ_WHOLE=%s) is not one gzip member", path,
			  whole[i] ? whole[i] : "unset");
		cr_expect(got == len && !memcmp(json, unzipped, len),
			  "gzip content (KB_TRACE_GZ_WHOLE=%s) differs from trace.json",
			  whole[i] ? whole[i] : "unset");
		free(unzipped);
		snprintf(path, sizeof(path), "%s/trace.json", b);
		cr_expect(access(path, F_OK) != 0, "json.gz also wrote a trace.json");
	}
	free(json);
}

Test(trace, bad_trace_options_are_one_line, .timeout = 60)
{
	const char *bad[][2] = {
		{ "--trace-window", "5" },      { "--trace-window", "5:2" },
		{ "--trace-window", "x:9" },    { "--trace-ranks", "1-" },
		{ "--trace-ranks", "64" },      { "--trace-flows", "maybe" },
		{ "--trace-format", "svg" },
	};
	struct kb_result r;
	char dir[256];

	kb_tmpdir(dir, sizeof(dir), "trace-bad");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kb_run(&r, "run", "gemm", "--out", dir, bad[i][0], bad[i][1], NULL);
		cr_expect_neq(r.status, 0, "%s %s accepted", bad[i][0], bad[i][1]);
		cr_expect(strstr(r.err, bad[i][0]), "%s %s: %s", bad[i][0], bad[i][1], r.err);
		cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "more than one line: %s",
			     r.err);
	}
}

/* ---------------------------------------------------------------- Perfetto */

struct pf_facts {
	size_t begins, ends, flows_started, flows_ended, counters, tracks, unsorted;
	/* what Perfetto's importer needs; each counts offending events */
	size_t undefined_track;   /* event or parent on a track not described before */
	size_t wrong_track_kind;  /* counter value on a slice track or the reverse */
	size_t unbalanced;        /* END with nothing open on its track, or open at the end */
	size_t end_before_begin;  /* END earlier than the BEGIN it closes */
	size_t flow_problems;     /* started twice, ended unstarted, never ended */
	char first_problem[160];
};

/* A described track: its uuid, whether it counts, and its open slices. */
struct pf_track {
	uint64_t uuid;
	bool counter;
	uint64_t *open; /* begin timestamps of the open slices, innermost last */
	size_t n_open, cap_open;
};

struct pf_state {
	struct pf_track *tracks;
	size_t n_tracks, cap_tracks;
	unsigned char *flows; /* 0 unseen, 1 started, 2 ended */
	size_t cap_flows;
	uint64_t last_ts;
};

static void pf_problem(struct pf_facts *f, size_t *counter, const char *what, uint64_t v)
{
	if (!f->first_problem[0])
		snprintf(f->first_problem, sizeof(f->first_problem), "%s %llu", what,
			 (unsigned long long)v);
	(*counter)++;
}

static struct pf_track *pf_find(struct pf_state *st, uint64_t uuid)
{
	for (size_t i = st->n_tracks; i-- > 0;)
		if (st->tracks[i].uuid == uuid)
			return &st->tracks[i];
	return NULL;
}

static void pf_describe(struct pf_facts *f, struct pf_state *st,
			const Perfetto__Protos__TrackDescriptor *td)
{
	if (td->has_parent_uuid && !pf_find(st, td->parent_uuid))
		pf_problem(f, &f->undefined_track, "parent track", td->parent_uuid);
	if (st->n_tracks == st->cap_tracks) {
		st->cap_tracks = st->cap_tracks ? 2 * st->cap_tracks : 64;
		st->tracks = realloc(st->tracks, st->cap_tracks * sizeof(*st->tracks));
		cr_assert(st->tracks);
	}
	st->tracks[st->n_tracks++] = (struct pf_track){ .uuid = td->uuid,
							.counter = td->counter != NULL };
	f->tracks++;
}

static void pf_flows(struct pf_facts *f, struct pf_state *st, const uint64_t *ids, size_t n,
		     bool start)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char want = start ? 0 : 1;

		cr_assert_lt(ids[i], st->cap_flows, "flow id %llu beyond the test's table",
			     (unsigned long long)ids[i]);
		if (st->flows[ids[i]] != want)
			pf_problem(f, &f->flow_problems, start ? "flow started twice" :
				   "flow ended without an origin", ids[i]);
		st->flows[ids[i]] = start ? 1 : 2;
		if (start)
			f->flows_started++;
		else
			f->flows_ended++;
	}
}

static void pf_slice(struct pf_facts *f, struct pf_track *t, uint64_t ts, bool begin)
{
	if (begin) {
		if (t->n_open == t->cap_open) {
			t->cap_open = t->cap_open ? 2 * t->cap_open : 8;
			t->open = realloc(t->open, t->cap_open * sizeof(*t->open));
			cr_assert(t->open);
		}
		t->open[t->n_open++] = ts;
		f->begins++;
		return;
	}
	f->ends++;
	if (!t->n_open) {
		pf_problem(f, &f->unbalanced, "END with no open slice on track", t->uuid);
		return;
	}
	if (ts < t->open[--t->n_open])
		pf_problem(f, &f->end_before_begin, "END before its BEGIN on track", t->uuid);
}

static void pf_event(struct pf_facts *f, struct pf_state *st, uint64_t ts,
		     const Perfetto__Protos__TrackEvent *te)
{
	struct pf_track *t = te->has_track_uuid ? pf_find(st, te->track_uuid) : NULL;
	bool counter = te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER;

	if (!t) {
		pf_problem(f, &f->undefined_track, "event on undescribed track", te->track_uuid);
		return;
	}
	if (t->counter != counter)
		pf_problem(f, &f->wrong_track_kind, "event of the wrong kind on track", t->uuid);
	if (counter)
		f->counters++;
	if (te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN ||
	    te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END)
		pf_slice(f, t, ts, te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN);
	pf_flows(f, st, te->flow_ids, te->n_flow_ids, true);
	pf_flows(f, st, te->terminating_flow_ids, te->n_terminating_flow_ids, false);
}

/* Reads one `Trace.packet` field at p[*at] (tag 0x0a, varint length):
 * false unless well formed; its body is p[*at - *n, *at). */
static bool pf_next(const uint8_t *p, size_t len, size_t *at, size_t *n)
{
	uint64_t v = 0;
	int shift = 0;

	if (p[(*at)++] != 0x0a)
		return false;
	do {
		if (*at >= len || shift > 63)
			return false;
		v |= (uint64_t)(p[*at] & 0x7f) << shift;
		shift += 7;
	} while (p[(*at)++] & 0x80);
	if (v > len - *at)
		return false;
	*n = (size_t)v;
	*at += *n;
	return true;
}

/* Decodes every packet with the schema (protobuf-c code generated from
 * proto/perfetto_trace.proto, whose field numbers are Perfetto's) and
 * checks what Perfetto's importer relies on: tracks described before use,
 * counters only on counter tracks, BEGIN/END balanced per track with END
 * after its BEGIN, every flow started once and terminated once, and
 * timestamps never going back on the one packet sequence. */
static void pf_check(const uint8_t *p, size_t len, struct pf_facts *f)
{
	struct pf_state st = { .cap_flows = 1 << 20 };
	size_t at = 0, n;

	st.flows = calloc(st.cap_flows, 1);
	cr_assert(st.flows);
	memset(f, 0, sizeof(*f));
	while (at < len) {
		Perfetto__Protos__TracePacket *pk;

		cr_assert(pf_next(p, len, &at, &n), "not a Trace.packet field before byte %zu", at);
		pk = perfetto__protos__trace_packet__unpack(NULL, n, p + at - n);
		cr_assert(pk, "undecodable TracePacket at byte %zu", at - n);
		cr_expect(pk->has_trusted_packet_sequence_id);
		if (pk->track_descriptor)
			pf_describe(f, &st, pk->track_descriptor);
		if (pk->track_event) {
			f->unsorted += pk->timestamp < st.last_ts;
			st.last_ts = pk->timestamp;
			pf_event(f, &st, pk->timestamp, pk->track_event);
		}
		perfetto__protos__trace_packet__free_unpacked(pk, NULL);
	}
	for (size_t i = 0; i < st.n_tracks; i++) {
		if (st.tracks[i].n_open)
			pf_problem(f, &f->unbalanced, "slice never ended on track", st.tracks[i].uuid);
		free(st.tracks[i].open);
	}
	for (size_t i = 0; i < st.cap_flows; i++)
		if (st.flows[i] == 1)
			pf_problem(f, &f->flow_problems, "flow never terminated", i);
	free(st.tracks);
	free(st.flows);
}

static void pf_expect_valid(const struct pf_facts *f, const char *what)
{
	cr_expect_eq(f->unsorted, 0, "%s: timestamps go back", what);
	cr_expect_eq(f->undefined_track + f->wrong_track_kind + f->unbalanced +
			     f->end_before_begin + f->flow_problems,
		     0, "%s: %zu undescribed, %zu wrong kind, %zu unbalanced, %zu inverted, "
			"%zu flow problems; first: %s",
		     what, f->undefined_track, f->wrong_track_kind, f->unbalanced,
		     f->end_before_begin, f->flow_problems, f->first_problem);
}

Test(trace, perfetto_protobuf_has_tracks_slices_and_flows, .timeout = 120)
{
	char a[256], b[256], path[600];
	struct pf_facts pf;
	struct facts jf;
	uint8_t *bytes;
	size_t len;

	kb_tmpdir(a, sizeof(a), "trace-pf-json");
	kb_tmpdir(b, sizeof(b), "trace-pf");
	kb_run_ok(a, (const char *const[]){ "gemm", "--arg", "m=256", NULL });
	kb_run_ok(b, (const char *const[]){ "gemm", "--arg", "m=256", "--trace-format", "perfetto", NULL });
	check_json(a, &jf);
	snprintf(path, sizeof(path), "%s/trace.pftrace", b);
	bytes = (uint8_t *)kb_slurp(path, &len);
	cr_assert(bytes, "no %s", path);
	pf_check(bytes, len, &pf);
	free(bytes);
	pf_expect_valid(&pf, "gemm");
	cr_expect_eq(pf.begins, pf.ends);
	cr_expect_eq(pf.begins, jf.slices - 2 * jf.starts, "every stage/kernel slice, once");
	cr_expect_eq(pf.flows_started, jf.starts);
	cr_expect_eq(pf.flows_ended, jf.ends);
	cr_expect_eq(pf.counters, jf.counters);
	cr_expect_gt(pf.tracks, 4);
}

/* A cut trace (a window that splits messages and slices, one rank of two)
 * is still valid for Perfetto: arrows whose other end was cut are gone, not
 * dangling. */
Test(trace, perfetto_cut_trace_stays_valid, .timeout = 120)
{
	static const char *const cuts[][4] = { { "--trace-window", "2:3.5", NULL },
					       { "--trace-ranks", "1", NULL },
					       { "--trace-window", "1:", "--trace-ranks", "0" } };
	char dir[256], path[600];
	struct pf_facts f;
	uint8_t *bytes;
	size_t len;

	kb_tmpdir(dir, sizeof(dir), "trace-pf-cut");
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		const char *argv[] = { "ring_attention", "--ranks", "2", "--pes", "2", "--arg",
				       "seq_q=128", "--arg", "seq_kv=256", "--trace-format",
				       "perfetto", cuts[c][0], cuts[c][1], cuts[c][2], cuts[c][3],
				       NULL };

		kb_run_ok(dir, argv);
		snprintf(path, sizeof(path), "%s/trace.pftrace", dir);
		bytes = (uint8_t *)kb_slurp(path, &len);
		cr_assert(bytes, "no %s", path);
		pf_check(bytes, len, &f);
		free(bytes);
		pf_expect_valid(&f, cuts[c][0]);
		cr_expect_gt(f.begins, 0, "%s %s left no slices", cuts[c][0], cuts[c][1]);
		cr_expect_gt(f.flows_started, 0, "%s %s left no arrows", cuts[c][0], cuts[c][1]);
	}
}

/* Where packets of a file start and end, for the mutations below. */
static size_t pf_packets(const uint8_t *p, size_t len, size_t *start, size_t cap)
{
	size_t at = 0, n, k = 0;

	while (at < len && k < cap) {
		start[k++] = at;
		cr_assert(pf_next(p, len, &at, &n));
	}
	start[k] = at;
	return k;
}

/* The packets of `p` in the order `pick` gives (a packet index per slot). */
static size_t pf_rebuild(const uint8_t *p, const size_t *start, const size_t *pick, size_t n,
			 uint8_t *out)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		memcpy(out + len, p + start[pick[i]], start[pick[i] + 1] - start[pick[i]]);
		len += start[pick[i] + 1] - start[pick[i]];
	}
	return len;
}

/* The checker finds what breaks Perfetto's import: a file that misses a
 * track descriptor, a slice end, a flow end, or has two events swapped
 * is refused, each for its own reason. */
Test(trace, perfetto_checker_catches_broken_files, .timeout = 120)
{
	char dir[256], path[600];
	size_t len, n, *start, *pick, first_event = 0, last_end = 0, last_flow_end = 0, kept;
	uint8_t *bytes, *out;
	struct pf_facts f;

	kb_tmpdir(dir, sizeof(dir), "trace-pf-bad");
	kb_run_ok(dir, (const char *const[]){ "gemm", "--arg", "m=128", "--trace-format", "perfetto",
				NULL });
	snprintf(path, sizeof(path), "%s/trace.pftrace", dir);
	bytes = (uint8_t *)kb_slurp(path, &len);
	cr_assert(bytes);
	start = calloc(len + 1, sizeof(*start));
	pick = calloc(len + 1, sizeof(*pick));
	out = malloc(len);
	cr_assert(start && pick && out);
	n = pf_packets(bytes, len, start, len);
	for (size_t i = 0; i < n; i++) {
		Perfetto__Protos__TracePacket *pk = perfetto__protos__trace_packet__unpack(
			NULL, start[i + 1] - start[i] - 2, bytes + start[i] + 2);

		if (!pk) /* a packet longer than 127 bytes has a longer header */
			continue;
		if (pk->track_event && !first_event)
			first_event = i;
		if (pk->track_event &&
		    pk->track_event->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END)
			last_end = i;
		if (pk->track_event && pk->track_event->n_terminating_flow_ids)
			last_flow_end = i;
		perfetto__protos__trace_packet__free_unpacked(pk, NULL);
	}
	cr_assert(first_event > 1 && last_end && last_flow_end, "file without what is mutated");
	pf_check(bytes, len, &f);
	pf_expect_valid(&f, "as written");

	/* the last track descriptor left out */
	for (size_t i = 0, k = 0; i < n; i++)
		if (i != first_event - 1)
			pick[k++] = i;
	pf_check(out, pf_rebuild(bytes, start, pick, n - 1, out), &f);
	cr_expect_gt(f.undefined_track, 0, "a missing track descriptor went unnoticed");
	/* a slice end left out */
	for (size_t i = 0, k = 0; i < n; i++)
		if (i != last_end)
			pick[k++] = i;
	pf_check(out, pf_rebuild(bytes, start, pick, n - 1, out), &f);
	cr_expect_gt(f.unbalanced, 0, "a missing slice end went unnoticed");
	/* a flow's terminating end left out */
	for (size_t i = 0, k = 0; i < n; i++)
		if (i != last_flow_end)
			pick[k++] = i;
	pf_check(out, pf_rebuild(bytes, start, pick, n - 1, out), &f);
	cr_expect_gt(f.flow_problems, 0, "an unterminated flow went unnoticed");
	/* the last packet moved to the first event's place */
	kept = 0;
	for (size_t i = 0; i < n - 1; i++) {
		if (i == first_event)
			pick[kept++] = n - 1;
		pick[kept++] = i;
	}
	pf_check(out, pf_rebuild(bytes, start, pick, n, out), &f);
	cr_expect_gt(f.unsorted + f.unbalanced + f.end_before_begin, 0,
		     "an event out of time order went unnoticed");
	free(start);
	free(pick);
	free(out);
	free(bytes);
}

/* ---------------------------------------------------------------- importer */

static void importer_check(const char *trace)
{
	const char *engine = getenv("KB_TRACE_ENGINE"), *root = getenv("KB_ROOT");
	char cmd[2048], out[512] = "";
	FILE *p;
	int rc;

	cr_assert(engine && root, "KB_TRACE_ENGINE/KB_ROOT unset: run through `make integration`");
	snprintf(cmd, sizeof(cmd), "node %s/tests/importer/check_trace.mjs %s %s 2>&1", root,
		 engine, trace);
	p = popen(cmd, "r");
	cr_assert(p);
	while (fgets(out + strlen(out), (int)(sizeof(out) - strlen(out)), p) &&
	       strlen(out) < sizeof(out) - 1)
		;
	rc = pclose(p);
	cr_expect_eq(rc, 0, "%s: %s", trace, out);
	cr_expect(!strncmp(out, "ok flows=", 9) && strtoul(out + 9, NULL, 10) > 0,
		  "%s: %s", trace, out);
}

/* Whether a `node` is on PATH: the one case the importer check skips. */
static bool have_node(void)
{
	return system("command -v node >/dev/null 2>&1") == 0;
}

Test(trace_importer, chrome_trace_engine_resolves_every_flow, .timeout = 300)
{
	char dir[256], path[600];
	const char *const runs[][12] = {
		{ "gemm", "--arg", "m=512", "--arg", "k=512", "--arg", "n=512", NULL },
		{ "traffic", "--arg", "components=4", "--arg", "messages=400", NULL },
		{ "ring_attention", "--ranks", "2", "--arg", "seq_q=128", "--arg", "seq_kv=256",
		  "--trace-format", "json.gz", NULL },
		{ "gqa_decode_opt3", "--arg", "seq_kv=2048", NULL },
	};

	if (!have_node())
		cr_skip_test("no node on PATH: the Chrome trace-engine check is skipped (make test "
			     "installs Debian's nodejs)");
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		kb_tmpdir(dir, sizeof(dir), "trace-importer");
		kb_run_ok(dir, runs[i]);
		snprintf(path, sizeof(path), "%s/trace.json%s", dir, i == 2 ? ".gz" : "");
		importer_check(path);
	}
}
