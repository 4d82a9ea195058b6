/* test_runtime.c — the event queue's total order, topology placement and
 * lookahead, and the wire decoder on hostile bytes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/component.h"
#include "rt/config_doc.h"
#include "rt/event.h"
#include "rt/rand.h"
#include "rt/topology.h"
#include "rt/wire.h"

/* Many events at few distinct times: ties must break by priority, source
 * and sequence, never by insertion order. */
Test(event_queue, simultaneous_events_pop_in_total_key_order_whatever_the_insertion_order, .timeout = 10)
{
	enum { N = 2000 };
	struct rt_event *events = calloc(N, sizeof(*events));
	struct rt_key first_order[N];
	uint64_t seed = 42;

	for (int i = 0; i < N; i++) {
		events[i].key.time_ps = 1000 * (rt_splitmix64(&seed) % 5);
		events[i].key.priority = (uint32_t)(rt_splitmix64(&seed) % 3);
		events[i].key.src = (uint32_t)(rt_splitmix64(&seed) % 4);
		events[i].key.seq = (uint64_t)i;
		events[i].dst = (uint32_t)i;
	}
	for (int round = 0; round < 5; round++) {
		struct rt_queue q;
		struct rt_event ev;

		/* shuffle the insertion order */
		for (int i = N - 1; i > 0; i--) {
			int j = (int)(rt_splitmix64(&seed) % (uint64_t)(i + 1));
			struct rt_event t = events[i];

			events[i] = events[j];
			events[j] = t;
		}
		rt_queue_init(&q);
		for (int i = 0; i < N; i++)
			cr_assert_eq(rt_queue_push(&q, &events[i]), RT_EOK);
		for (int i = 0; i < N; i++) {
			cr_assert(rt_queue_pop(&q, &ev));
			if (round == 0)
				first_order[i] = ev.key;
			else
				cr_assert_eq(rt_key_cmp(&first_order[i], &ev.key), 0,
					     "round %d differs at %d", round, i);
			if (i > 0)
				cr_assert_lt(rt_key_cmp(&first_order[i - 1], &ev.key), 1);
		}
		cr_assert_not(rt_queue_pop(&q, &ev));
		rt_queue_release(&q);
	}
	free(events);
}

/* Pops leave a hole at the root that the next push fills (ADR 0062): any
 * mix of pushes and pops must still give events in key order. Checked
 * against a linear scan for the minimum. */
Test(event_queue, interleaved_pushes_and_pops_come_out_in_key_order, .timeout = 10)
{
	enum { MAX = 300 };
	struct rt_key ref[MAX];
	size_t n = 0;
	uint64_t seed = 7;
	struct rt_queue q;
	struct rt_event ev = { 0 }, out;

	rt_queue_init(&q);
	for (int step = 0; step < 20000; step++) {
		uint64_t r = rt_splitmix64(&seed);
		bool push = n == 0 || (n < MAX && r % 100 < (step < 10000 ? 55u : 45u));

		if (push) {
			ev.key = (struct rt_key){ r >> 8 & 63, (uint32_t)(r >> 16 & 1),
						  (uint32_t)(r >> 20 & 3), (uint64_t)step };
			ref[n++] = ev.key;
			cr_assert_eq(rt_queue_push(&q, &ev), RT_EOK);
		} else {
			size_t m = 0;

			for (size_t i = 1; i < n; i++)
				if (rt_key_cmp(&ref[i], &ref[m]) < 0)
					m = i;
			cr_assert_eq(rt_key_cmp(&rt_queue_peek(&q)->key, &ref[m]), 0, "step %d", step);
			cr_assert(rt_queue_pop(&q, &out));
			cr_assert_eq(rt_key_cmp(&out.key, &ref[m]), 0, "step %d", step);
			ref[m] = ref[--n];
		}
	}
	while (n--)
		cr_assert(rt_queue_pop(&q, &out));
	cr_assert_null(rt_queue_peek(&q));
	cr_assert_not(rt_queue_pop(&q, &out));
	rt_queue_release(&q);
}

Test(event_queue, key_compares_time_then_priority_then_source_then_sequence, .timeout = 10)
{
	struct rt_key a = { 10, 1, 1, 1 }, b;

	b = a, b.time_ps = 9;
	cr_expect_gt(rt_key_cmp(&a, &b), 0);
	b = a, b.priority = 0;
	cr_expect_gt(rt_key_cmp(&a, &b), 0);
	b = a, b.src = 0;
	cr_expect_gt(rt_key_cmp(&a, &b), 0);
	b = a, b.seq = 2;
	cr_expect_lt(rt_key_cmp(&a, &b), 0);
	cr_expect_eq(rt_key_cmp(&a, &a), 0);
}

Test(event_queue, payloads_survive_heap_moves, .timeout = 10)
{
	struct rt_queue q;
	struct rt_event ev = { 0 }, out;
	char big[200];

	rt_queue_init(&q);
	for (int i = 0; i < 50; i++) {
		memset(big, 'a' + i % 26, sizeof(big));
		ev.key.time_ps = (uint64_t)(50 - i);
		cr_assert_eq(rt_event_set_bytes(&ev, big, i % 2 ? sizeof(big) : 10), RT_EOK);
		cr_assert_eq(rt_queue_push(&q, &ev), RT_EOK);
	}
	for (int i = 49; i >= 0; i--) {
		cr_assert(rt_queue_pop(&q, &out));
		cr_assert_eq(out.len, i % 2 ? sizeof(big) : 10u);
		cr_assert_eq(rt_event_bytes(&out)[0], 'a' + i % 26);
		rt_event_release(&out);
	}
	rt_queue_release(&q);
}

static const struct rt_component_ops dummy_ops = { .name = "dummy" };

static void three_pe_components(struct rt_topology *t)
{
	uint32_t id;

	rt_topology_init(t);
	for (uint32_t pe = 0; pe < 2; pe++)
		for (int k = 0; k < 2; k++) {
			char name[16];

			snprintf(name, sizeof(name), "p%u.%d", pe, k);
			cr_assert_eq(rt_topology_add(t, name, &dummy_ops, 0, pe, &id), RT_EOK);
		}
	/* within a PE: 5 ps; across PEs: 100 ps */
	cr_assert_eq(rt_topology_link(t, 0, 1, 5), RT_EOK);
	cr_assert_eq(rt_topology_link(t, 2, 3, 5), RT_EOK);
	cr_assert_eq(rt_topology_link(t, 1, 2, 100), RT_EOK);
}

Test(topology, lookahead_is_the_smallest_latency_crossing_daemons, .timeout = 10)
{
	struct rt_topology t;

	three_pe_components(&t);
	cr_assert_eq(rt_topology_place(&t, RT_COLOCATE_NONE, NULL), RT_EOK);
	cr_expect_eq(t.n_daemons, 4);
	cr_expect_eq(t.lookahead_ps, 5);
	cr_assert_eq(rt_topology_place(&t, RT_COLOCATE_PE, NULL), RT_EOK);
	cr_expect_eq(t.n_daemons, 2);
	cr_expect_eq(t.lookahead_ps, 100);
	cr_expect_str_eq(t.daemons[1].label, "r0.pe1");
	cr_assert_eq(rt_topology_place(&t, RT_COLOCATE_ALL, NULL), RT_EOK);
	cr_expect_eq(t.n_daemons, 1);
	cr_expect_eq(t.lookahead_ps, RT_TIME_NEVER, "one daemon needs no windows");
	rt_topology_release(&t);
}

/* --colocate host: one daemon per host of the hosts file, whatever the
 * ranks' order; without hosts the run is one host */
Test(topology, colocate_host_groups_ranks_by_their_host, .timeout = 10)
{
	static const uint8_t host_of_rank[RT_MAX_RANKS] = { 1, 0, 1, 2 };
	struct rt_topology t;
	uint32_t id;

	rt_topology_init(&t);
	for (uint32_t r = 0; r < 4; r++)
		for (uint32_t pe = 0; pe < 2; pe++) {
			char name[16];

			snprintf(name, sizeof(name), "r%u.p%u", r, pe);
			cr_assert_eq(rt_topology_add(&t, name, &dummy_ops, r, pe, &id), RT_EOK);
		}
	cr_assert_eq(rt_topology_link(&t, 0, 2, 7), RT_EOK);  /* rank 0 -> 1: hosts 1 -> 0 */
	cr_assert_eq(rt_topology_link(&t, 0, 4, 3), RT_EOK);  /* rank 0 -> 2: same host */
	cr_assert_eq(rt_topology_place(&t, RT_COLOCATE_HOST, host_of_rank), RT_EOK);
	cr_expect_eq(t.n_daemons, 3);
	cr_expect_str_eq(t.daemons[0].label, "h1");
	cr_expect_str_eq(t.daemons[1].label, "h0");
	cr_expect_str_eq(t.daemons[2].label, "h2");
	cr_expect_eq(t.components[0].daemon, t.components[5].daemon, "ranks 0 and 2: host 1");
	cr_expect_neq(t.components[0].daemon, t.components[2].daemon);
	cr_expect_eq(t.lookahead_ps, 7, "only the link between hosts crosses daemons");
	cr_assert_eq(rt_topology_place(&t, RT_COLOCATE_HOST, NULL), RT_EOK);
	cr_expect_eq(t.n_daemons, 1);
	rt_topology_release(&t);
}

Test(topology, zero_latency_link_is_rejected_with_its_names, .timeout = 10)
{
	struct rt_topology t;

	three_pe_components(&t);
	cr_expect_eq(rt_topology_link(&t, 3, 0, 0), RT_ECONFIG);
	cr_expect(strstr(rt_last_error(), "p1.1 -> p0.0"), "%s", rt_last_error());
	rt_topology_release(&t);
}

Test(wire, garbage_and_truncated_frames_are_errors_not_crashes, .timeout = 10)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Grant grant = KB__GRANT__INIT;
	struct rt_buf b;
	Kb__Sync *out = NULL;
	uint8_t garbage[64];
	uint64_t seed = 7;

	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)rt_splitmix64(&seed);
	cr_expect_neq(rt_wire_decode_sync(garbage, sizeof(garbage), &out), RT_EOK);
	cr_expect_null(out);
	grant.window = 3;
	grant.start_ps = 10;
	grant.end_ps = 20;
	sync.body_case = KB__SYNC__BODY_GRANT;
	sync.grant = &grant;
	rt_buf_init(&b);
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_assert_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EOK);
	cr_expect_eq(out->grant->window, 3);
	rt_wire_free_sync(out);
	for (size_t cut = 1; cut < b.len; cut++) {
		enum rt_err err = rt_wire_decode_sync((uint8_t *)b.data, cut, &out);

		if (err == RT_EOK) /* a cut at a field boundary may still decode */
			rt_wire_free_sync(out);
	}
	rt_buf_release(&b);
}

Test(wire, other_schema_version_and_empty_window_are_rejected, .timeout = 10)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Grant grant = KB__GRANT__INIT;
	struct rt_buf b;
	Kb__Sync *out = NULL;

	grant.start_ps = grant.end_ps = 10;
	sync.body_case = KB__SYNC__BODY_GRANT;
	sync.grant = &grant;
	rt_buf_init(&b);
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_expect_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "empty"), "%s", rt_last_error());
	b.data[1] = 9; /* schema_version varint */
	cr_expect_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_ESCHEMA);
	cr_expect(strstr(rt_last_error(), "schema version 9"), "%s", rt_last_error());
	rt_buf_release(&b);
}

/* An agent's BYE lists the files it shipped (ADR 0050): each a name the
 * coordinator may look up in its output folder, like a FilePart's. */
Test(wire, bye_file_lists_name_only_output_files, .timeout = 10)
{
	Kb__Sync sync = KB__SYNC__INIT, *out = NULL;
	Kb__Bye bye = KB__BYE__INIT;
	Kb__FileSent good = KB__FILE_SENT__INIT, bad = KB__FILE_SENT__INIT;
	Kb__FileSent *files[2] = { &good, &bad };
	Kb__FileAck ack = KB__FILE_ACK__INIT;
	struct rt_buf b;

	good.path = (char *)".parts/r0.oplog";
	good.parts = 3;
	bad.path = (char *)"../escape";
	bye.files = files;
	bye.n_files = 1;
	sync.body_case = KB__SYNC__BODY_BYE;
	sync.bye = &bye;
	rt_buf_init(&b);
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_assert_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EOK);
	cr_expect_eq(out->bye->n_files, 1);
	cr_expect_eq(out->bye->files[0]->parts, 3);
	rt_wire_free_sync(out);
	bye.n_files = 2;
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_expect_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "shipped file 1"), "%s", rt_last_error());
	ack.parts = 7;
	ack.bye = true;
	sync.body_case = KB__SYNC__BODY_FILE_ACK;
	sync.file_ack = &ack;
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_assert_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EOK);
	cr_expect(out->file_ack->bye && out->file_ack->parts == 7);
	rt_wire_free_sync(out);
	rt_buf_release(&b);
}

/* docs/config.md carries the rendered field table: it must not drift. */
Test(config_doc, docs_config_md_matches_the_field_table, .timeout = 10)
{
	const char *root = getenv("KB_ROOT");
	char path[1024];
	struct rt_buf doc, md;
	char *line, *save = NULL;

	snprintf(path, sizeof(path), "%s/docs/config.md", root ? root : ".");
	rt_buf_init(&doc);
	rt_buf_init(&md);
	cr_assert_eq(rt_config_doc(&doc), RT_EOK);
	cr_assert_eq(rt_buf_read_file(&md, path), RT_EOK, "%s", rt_last_error());
	for (line = strtok_r(doc.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (line[0] == '|')
			cr_expect(strstr(md.data, line), "docs/config.md lacks: %s (regenerate it with "
				  "`kernbench config`)", line);
	rt_buf_release(&doc);
	rt_buf_release(&md);
}
