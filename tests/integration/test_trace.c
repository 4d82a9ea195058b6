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
	kb_run_ok(dir, (const char *const[]){ "gemm", "--arg", "m=512", "--arg", "k=512", "--arg", "n=512",
				NULL });
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

Test(trace, gzip_is_the_json_compressed, .timeout = 120)
{
	char a[256], b[256], path[600];
	char *json, buf[1 << 16];
	gzFile gz;
	size_t len, got = 0;
	int n;

	kb_tmpdir(a, sizeof(a), "trace-json");
	kb_tmpdir(b, sizeof(b), "trace-gz");
	kb_run_ok(a, (const char *const[]){ "gemm", NULL });
	kb_run_ok(b, (const char *const[]){ "gemm", "--trace-format", "json.gz", NULL });
	snprintf(path, sizeof(path), "%s/trace.json", a);
	json = kb_slurp(path, &len);
	cr_assert(json);
	snprintf(path, sizeof(path), "%s/trace.json.gz", b);
	gz = gzopen(path, "rb");
	cr_assert(gz, "no %s", path);
	while ((n = gzread(gz, buf, sizeof(buf))) > 0) {
		cr_assert(got + (size_t)n <= len && !memcmp(json + got, buf, (size_t)n),
			  "gzip content differs from trace.json at byte %zu", got);
		got += (size_t)n;
	}
	gzclose(gz);
	cr_expect_eq(got, len);
	snprintf(path, sizeof(path), "%s/trace.json", b);
	cr_expect(access(path, F_OK) != 0, "json.gz also wrote a trace.json");
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
	uint64_t max_flow;
};

static void pf_event(struct pf_facts *f, const Perfetto__Protos__TrackEvent *te,
		     unsigned char *flow_state, size_t cap)
{
	switch (te->type) {
	case PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN: f->begins++; break;
	case PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END: f->ends++; break;
	case PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER: f->counters++; break;
	default: break;
	}
	for (size_t i = 0; i < te->n_flow_ids; i++) {
		cr_assert_lt(te->flow_ids[i], cap);
		cr_expect_eq(flow_state[te->flow_ids[i]], 0, "flow %llu started twice",
			     (unsigned long long)te->flow_ids[i]);
		flow_state[te->flow_ids[i]] = 1;
		f->flows_started++;
	}
	for (size_t i = 0; i < te->n_terminating_flow_ids; i++) {
		cr_assert_lt(te->terminating_flow_ids[i], cap);
		cr_expect_eq(flow_state[te->terminating_flow_ids[i]], 1,
			     "flow %llu ends before it starts",
			     (unsigned long long)te->terminating_flow_ids[i]);
		flow_state[te->terminating_flow_ids[i]] = 2;
		f->flows_ended++;
	}
}

/* Walks `Trace.packet` fields (tag 0x0a, varint length, TracePacket). */
static void pf_check(const uint8_t *p, size_t len, struct pf_facts *f)
{
	unsigned char *flows = calloc(1 << 20, 1);
	uint64_t last_ts = 0;
	size_t at = 0;

	cr_assert(flows);
	memset(f, 0, sizeof(*f));
	while (at < len) {
		uint64_t n = 0;
		int shift = 0;
		Perfetto__Protos__TracePacket *pk;

		cr_assert_eq(p[at++], 0x0a, "not a Trace.packet field at byte %zu", at - 1);
		do {
			cr_assert_lt(at, len);
			n |= (uint64_t)(p[at] & 0x7f) << shift;
			shift += 7;
		} while (p[at++] & 0x80);
		cr_assert_leq(at + n, len);
		pk = perfetto__protos__trace_packet__unpack(NULL, n, p + at);
		cr_assert(pk, "undecodable TracePacket at byte %zu", at);
		cr_expect(pk->has_trusted_packet_sequence_id);
		f->tracks += pk->track_descriptor != NULL;
		if (pk->track_event) {
			f->unsorted += pk->timestamp < last_ts;
			last_ts = pk->timestamp;
			cr_expect(pk->track_event->has_track_uuid);
			pf_event(f, pk->track_event, flows, 1 << 20);
		}
		perfetto__protos__trace_packet__free_unpacked(pk, NULL);
		at += n;
	}
	free(flows);
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
	cr_expect_eq(pf.unsorted, 0);
	cr_expect_eq(pf.begins, pf.ends);
	cr_expect_eq(pf.begins, jf.slices - 2 * jf.starts, "every stage/kernel slice, once");
	cr_expect_eq(pf.flows_started, jf.starts);
	cr_expect_eq(pf.flows_ended, jf.ends);
	cr_expect_eq(pf.counters, jf.counters);
	cr_expect_gt(pf.tracks, 4);
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

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		kb_tmpdir(dir, sizeof(dir), "trace-importer");
		kb_run_ok(dir, runs[i]);
		snprintf(path, sizeof(path), "%s/trace.json%s", dir, i == 2 ? ".gz" : "");
		importer_check(path);
	}
}
