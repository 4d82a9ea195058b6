/* test_oplog_out.c — op_log.jsonl from binary parts (deploy/src/oplog_out.c)
 * is what the text records of before gave: every line equal to the record
 * written through rt_json (the formatter components used while simulating
 * until ADR 0055), in (start, end, component, seq) order, whatever the
 * chunking; corrupt parts fail with a line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oplog_out.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/json.h"
#include "rt/rand.h"
#include "rt/trace.h"

#define N_COMP 3
#define N_RECS 4000

static const struct rt_component_ops dma_ops = { .name = "dma" };
static const struct rt_component_ops math_ops = { .name = "math" };

/* Names that need every kind of escape, and plain ones. */
static const char *const names[] = { "dma_read", "memory", "q\"uote", "back\\slash",
				     "tab\there", "bad\xff utf8", "caf\xc3\xa9", "" };

struct fixture {
	char dir[64];
	struct rt_job *job;
	struct rt_topology topo;
	struct rt_component_desc comps[N_COMP];
	struct rt_oplog_bin recs[N_COMP][N_RECS];
	uint32_t n[N_COMP];
};

/* The line the old writer (rt_oplog formatting with rt_json) gave. */
static void old_line(const struct fixture *f, const struct rt_oplog_bin *r, struct rt_buf *b)
{
	const struct rt_component_desc *c = &f->comps[r->comp];
	struct rt_json j;

	rt_json_init(&j, b);
	rt_json_object(&j, NULL, RT_JSON_COMPACT);
	rt_json_u64(&j, "start_ps", r->start_ps);
	rt_json_u64(&j, "end_ps", r->end_ps);
	rt_json_u64(&j, "rank", c->rank);
	rt_json_u64(&j, "pe", c->pe);
	rt_json_str(&j, "engine", names[r->engine]);
	rt_json_str(&j, "op_kind", names[r->op_kind]);
	rt_json_str(&j, "op_name", names[r->op_name]);
	rt_json_u64(&j, "bytes", r->bytes);
	rt_json_u64(&j, "elements", r->elements);
	rt_json_u64(&j, "composite", r->command);
	rt_json_u64(&j, "stage", r->stage);
	rt_json_u64(&j, "issue_ps", r->issue_ps);
	rt_json_close(&j);
	cr_assert_eq(rt_json_finish(&j), RT_EOK);
	rt_buf_append(b, "\n", 1);
}

static int key_cmp(const void *pa, const void *pb)
{
	const struct rt_oplog_bin *a = pa, *b = pb;

	if (a->start_ps != b->start_ps)
		return a->start_ps < b->start_ps ? -1 : 1;
	if (a->end_ps != b->end_ps)
		return a->end_ps < b->end_ps ? -1 : 1;
	if (a->comp != b->comp)
		return a->comp < b->comp ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Parts of N_COMP components (component 1 writes nothing), records
 * mostly in start order with some out of it, and ties of start and end
 * across components. Each component's table interns the names in its own
 * order, so ids differ between components. */
static void make_parts(struct fixture *f, uint64_t seed)
{
	char parts[128], stem[16];
	uint64_t rng = seed;

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/kb-oplog-unit-XXXXXX");
	cr_assert(mkdtemp(f->dir));
	snprintf(parts, sizeof(parts), "%s/%s", f->dir, RT_PARTS_DIR);
	cr_assert_eq(mkdir(parts, 0755), 0);
	f->job = calloc(1, sizeof(*f->job));
	snprintf(f->job->out_dir, sizeof(f->job->out_dir), "%s", f->dir);
	f->job->config.ranks = 2;
	for (uint32_t c = 0; c < N_COMP; c++)
		f->comps[c] = (struct rt_component_desc){ .ops = c == 2 ? &math_ops : &dma_ops,
							  .rank = c % 2, .pe = 3 * c };
	f->topo.n_components = N_COMP;
	f->topo.components = f->comps;
	for (uint32_t c = 0; c < N_COMP; c++) {
		struct rt_trace_writer w;
		uint16_t id_of[sizeof(names) / sizeof(names[0])];
		uint64_t t = 1000;

		if (c == 1)
			continue;
		rt_trace_writer_init(&w);
		for (size_t k = sizeof(names) / sizeof(names[0]); k-- > 0;)
			id_of[k] = rt_trace_intern(&w, names[(k + c) % (sizeof(names) / sizeof(names[0]))]);
		for (uint32_t i = 0; i < N_RECS; i++) {
			struct rt_oplog_bin *r = &f->recs[c][f->n[c]++];
			size_t e = rt_splitmix64(&rng) % 8, k = rt_splitmix64(&rng) % 8,
			       o = rt_splitmix64(&rng) % 8;

			t += rt_splitmix64(&rng) % 3 * 500; /* ties */
			*r = (struct rt_oplog_bin){
				.start_ps = rt_splitmix64(&rng) % 10 ? t : t - 4000, /* out of order */
				.end_ps = t + rt_splitmix64(&rng) % 2 * 1000,
				.issue_ps = t - 7, .seq = i, .bytes = rt_splitmix64(&rng),
				.elements = i * 3ull, .command = UINT64_MAX - i, .comp = c, .stage = i % 5,
			};
			/* the table's id of names[e] is the k with (k + c) % 8 == e */
			r->engine = id_of[(e + 8 - c % 8) % 8];
			r->op_kind = id_of[(k + 8 - c % 8) % 8];
			r->op_name = id_of[(o + 8 - c % 8) % 8];
			cr_assert_eq(rt_buf_append(&w.recs, r, sizeof(*r)), RT_EOK);
			r->engine = (uint16_t)e; /* the test's own view: names[] index */
			r->op_kind = (uint16_t)k;
			r->op_name = (uint16_t)o;
		}
		snprintf(stem, sizeof(stem), "%u", c);
		cr_assert_eq(rt_trace_flush_as(&w, parts, stem, "oplog", true), RT_EOK);
		rt_trace_writer_release(&w);
	}
}

static char *expected_log(const struct fixture *f, uint64_t *hbm_busy)
{
	struct rt_oplog_bin *all = malloc(sizeof(f->recs));
	struct rt_buf b;
	size_t n = 0;
	uint64_t busy[2] = { 0 }, from[2] = { 0 }, to[2] = { 0 };

	for (uint32_t c = 0; c < N_COMP; c++)
		for (uint32_t i = 0; i < f->n[c]; i++)
			all[n++] = f->recs[c][i];
	qsort(all, n, sizeof(*all), key_cmp);
	rt_buf_init(&b);
	for (size_t i = 0; i < n; i++) {
		old_line(f, &all[i], &b);
		if (all[i].comp != 2) { /* a DMA engine: the union of its rank's intervals */
			uint32_t k = f->comps[all[i].comp].rank;

			if (all[i].start_ps > to[k]) {
				busy[k] += to[k] - from[k];
				from[k] = to[k] = all[i].start_ps;
			}
			to[k] = all[i].end_ps > to[k] ? all[i].end_ps : to[k];
		}
	}
	busy[0] += to[0] - from[0];
	busy[1] += to[1] - from[1];
	*hbm_busy = busy[0] > busy[1] ? busy[0] : busy[1];
	rt_buf_append(&b, "", 1);
	free(all);
	return b.data;
}

static char *slurp(const char *path)
{
	struct rt_buf b;

	rt_buf_init(&b);
	cr_assert_eq(rt_buf_read_file(&b, path), RT_EOK, "%s", path);
	rt_buf_append(&b, "", 1);
	return b.data;
}

static void cleanup(struct fixture *f)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	cr_expect_eq(system(cmd), 0);
	free(f->job);
}

static void expect_same_as_old(const char *chunk)
{
	static struct fixture f;
	char path[128];
	uint64_t busy = 0, want_busy;
	char *want, *got;

	if (chunk)
		setenv("KB_MERGE_CHUNK", chunk, 1);
	make_parts(&f, 7);
	want = expected_log(&f, &want_busy);
	cr_assert_eq(kb_oplog_write(f.job, &f.topo, &busy, NULL), RT_EOK, "%s", rt_last_error());
	snprintf(path, sizeof(path), "%s/op_log.jsonl", f.dir);
	got = slurp(path);
	cr_expect_str_eq(got, want, "op_log.jsonl differs from the rt_json records");
	cr_expect_eq(busy, want_busy);
	cr_expect_gt(busy, 0);
	free(want);
	free(got);
	/* --op-log off: no file, the same HBM busy time */
	f.job->oplog_off = true;
	remove(path);
	busy = 0;
	cr_assert_eq(kb_oplog_write(f.job, &f.topo, &busy, NULL), RT_EOK, "%s", rt_last_error());
	cr_expect_eq(busy, want_busy);
	cr_expect(access(path, F_OK) != 0, "--op-log off wrote %s", path);
	cleanup(&f);
	unsetenv("KB_MERGE_CHUNK");
}

Test(oplog_out, lines_equal_the_rt_json_records_in_key_order, .timeout = 30)
{
	expect_same_as_old(NULL);
}

Test(oplog_out, small_chunks_through_the_run_file_give_the_same_bytes, .timeout = 30)
{
	expect_same_as_old("7200"); /* 100 records a chunk: many runs, most sorted */
}

/* Puts `len` bytes after the part's records, before its string table
 * (which a final flush writes last, with its length and a magic word). */
static void insert_before_names(const char *path, const void *bytes, size_t len)
{
	char *old = slurp(path);
	struct stat st;
	uint64_t tail[2];
	size_t size, recs;
	FILE *p;

	cr_assert_eq(stat(path, &st), 0);
	size = (size_t)st.st_size;
	memcpy(tail, old + size - sizeof(tail), sizeof(tail));
	cr_assert_eq(tail[1], RT_TRACE_TAIL_MAGIC);
	recs = size - sizeof(tail) - tail[0];
	p = fopen(path, "wb");
	cr_assert(p);
	cr_assert_eq(fwrite(old, 1, recs, p), recs);
	cr_assert_eq(fwrite(bytes, 1, len, p), len);
	cr_assert_eq(fwrite(old + recs, 1, size - recs, p), size - recs);
	cr_assert_eq(fclose(p), 0);
	free(old);
}

Test(oplog_out, a_record_naming_a_missing_string_is_a_corrupt_part, .timeout = 30)
{
	static struct fixture f;
	char path[128];
	struct rt_oplog_bin bad = { .comp = 0, .engine = 999 };
	FILE *p;
	uint64_t busy;

	make_parts(&f, 3);
	snprintf(path, sizeof(path), "%s/%s/0.oplog", f.dir, RT_PARTS_DIR);
	insert_before_names(path, &bad, sizeof(bad));
	cr_expect_eq(kb_oplog_write(f.job, &f.topo, &busy, NULL), RT_EPROTOCOL);
	cr_expect(strstr(rt_last_error(), "corrupt op log part"), "%s", rt_last_error());
	insert_before_names(path, "xyz", 3); /* a torn record */
	cr_expect_neq(kb_oplog_write(f.job, &f.topo, &busy, NULL), RT_EOK);
	p = fopen(path, "ab");
	cr_assert(p);
	fwrite("xyz", 3, 1, p); /* no string table at the end */
	fclose(p);
	cr_expect_eq(kb_oplog_write(f.job, &f.topo, &busy, NULL), RT_EPROTOCOL);
	cr_expect(strstr(rt_last_error(), "no string table"), "%s", rt_last_error());
	cleanup(&f);
}
