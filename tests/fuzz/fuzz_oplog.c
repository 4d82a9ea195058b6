/* fuzz_oplog.c — libFuzzer harness: the components' binary op-log parts
 * (`<id>.oplog`: records, then the component's string table, ADR 0055) as the
 * launcher merges them into op_log.jsonl (kb_oplog_write). The parts are
 * ours, but a truncated or foreign file must fail with a line, never read
 * out of bounds.
 * Layout: byte 0: bits 0-1 + 1 components, bit 2 --op-log off, bit 3 a
 * small merge chunk (records sorted into a run file, many runs), bit 4 raw
 * parts (the bytes below as the whole file, their own end taken for the
 * string table's length and magic word); then per component a 2-byte
 * little-endian length and that many record bytes, a 2-byte length and
 * that many string-table bytes (short input: empty). Without bit 4 the
 * part is records, table, the table's length and RT_TRACE_TAIL_MAGIC, as
 * a final flush writes it. Bit 5: a --fast-forward exact run, and the bytes
 * after the last component are daemon 0's fast-forward part (`.parts/ff.0`,
 * its "skip AT PERIOD PERIODS" lines swept into the HBM busy time, the rest
 * summary.json's fast_forward object).
 * Any input must give RT_EOK or a clean error; an accepted log has one
 * line per record, in start order. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ff_out.h"
#include "oplog_out.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/trace.h"

#define MAX_COMP 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct rt_component_ops dma_ops = { .name = "dma" };
static const struct rt_component_ops math_ops = { .name = "math" };

static char dir[64];
static struct rt_job *job;

/* One folder with its .parts for the whole process, removed at exit. */
static void remove_dir(void)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_oplog: could not remove %s\n", dir);
}

static void setup(void)
{
	char parts[128];

	snprintf(dir, sizeof(dir), "/tmp/kb-fuzz-oplog-XXXXXX");
	job = calloc(1, sizeof(*job));
	if (!job || !mkdtemp(dir))
		abort();
	snprintf(parts, sizeof(parts), "%s/%s", dir, RT_PARTS_DIR);
	if (mkdir(parts, 0755))
		abort();
	snprintf(job->out_dir, sizeof(job->out_dir), "%s", dir);
	job->config.ranks = 2;
	atexit(remove_dir);
}

static void path_of(char *path, size_t cap, uint32_t c, const char *ext)
{
	snprintf(path, cap, "%s/%s/%u.%s", dir, RT_PARTS_DIR, c, ext);
}

/* Takes a 2-byte length and that many bytes (fewer when the input ends). */
static const uint8_t *take(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *at;

	*len = 0;
	if (end - *p < 2) {
		*p = end;
		return *p;
	}
	*len = (size_t)((*p)[0] | (*p)[1] << 8);
	*p += 2;
	if (*len > (size_t)(end - *p))
		*len = (size_t)(end - *p);
	at = *p;
	*p += *len;
	return at;
}

/* Writes component c's part: records then table (with the tail unless
 * `raw`), or removes it when both are empty (a component that logged
 * nothing has no part). */
static void put_part(uint32_t c, const uint8_t *recs, size_t n_recs, const uint8_t *names,
		     size_t n_names, bool raw)
{
	uint64_t tail[2] = { n_names, RT_TRACE_TAIL_MAGIC };
	char path[160];
	bool ok;
	FILE *f;

	path_of(path, sizeof(path), c, "oplog");
	if (!n_recs && !n_names) {
		unlink(path);
		return;
	}
	f = fopen(path, "wb");
	ok = f && fwrite(recs, 1, n_recs, f) == n_recs && fwrite(names, 1, n_names, f) == n_names;
	if (ok && !raw)
		ok = fwrite(tail, 1, sizeof(tail), f) == sizeof(tail);
	if (!f || fclose(f) || !ok)
		abort();
}

/* Daemon 0's fast-forward part: the rest of the input (bit 5), or none. */
static void put_ff_part(const uint8_t *p, const uint8_t *end, bool on)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/ff.0", dir, RT_PARTS_DIR);
	job->ff_mode = on ? RT_FF_EXACT : RT_FF_OFF;
	if (!on) {
		unlink(path);
		return;
	}
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, (size_t)(end - p), f) != (size_t)(end - p) || fclose(f))
		abort();
}

/* summary.json's fast_forward object from that part: any bytes read. */
static void check_ff_json(void)
{
	struct rt_buf out;
	struct rt_json j;

	rt_buf_init(&out);
	rt_json_init(&j, &out);
	rt_json_object(&j, NULL, RT_JSON_LINES);
	kb_ff_json(&j, job, 1000);
	rt_json_close(&j);
	(void)rt_json_finish(&j); /* a clean error (a reason not UTF-8) is fine */
	rt_buf_release(&out);
}

/* Every line a record, in start order; as many lines as records. */
static void check_log(size_t n_recs)
{
	char path[128], line[4096];
	FILE *f;
	size_t lines = 0;
	unsigned long long prev = 0, start;

	snprintf(path, sizeof(path), "%s/op_log.jsonl", dir);
	f = fopen(path, "rb");
	if (!f)
		abort();
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "{\"start_ps\":", 12) || !strchr(line, '\n'))
			abort();
		start = strtoull(line + 12, NULL, 10);
		if (lines++ && start < prev)
			abort();
		prev = start;
	}
	fclose(f);
	if (lines != n_recs)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_component_desc comps[MAX_COMP];
	struct rt_topology topo = { 0 };
	const uint8_t *p = data + 1, *end = data + size;
	size_t n_recs = 0, len;
	uint64_t busy = 0;
	uint32_t n;
	enum rt_err err;
	char path[128];

	if (!size)
		return 0;
	if (!job)
		setup();
	n = (uint32_t)(data[0] & 3) + 1;
	job->oplog_off = data[0] & 4;
	if (data[0] & 8)
		setenv("KB_MERGE_CHUNK", "144", 1); /* two records a chunk */
	else
		unsetenv("KB_MERGE_CHUNK");
	for (uint32_t c = 0; c < n; c++) {
		const uint8_t *recs = take(&p, end, &len), *names;
		size_t n_names;

		comps[c] = (struct rt_component_desc){ .ops = c == 1 ? &math_ops : &dma_ops,
						       .rank = c % 2, .pe = c };
		n_recs += len / sizeof(struct rt_oplog_bin);
		names = take(&p, end, &n_names);
		put_part(c, recs, len, names, n_names, data[0] & 16);
	}
	topo.n_components = n;
	topo.components = comps;
	put_ff_part(p, end, data[0] & 32);
	err = kb_oplog_write(job, &topo, &busy, NULL);
	if (err != RT_EOK && err != RT_EPROTOCOL)
		abort();
	if (err == RT_EOK && !job->oplog_off && !(data[0] & 16))
		check_log(n_recs);
	if (data[0] & 32)
		check_ff_json();
	snprintf(path, sizeof(path), "%s/op_log.jsonl", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s/oplog.runs", dir, RT_PARTS_DIR);
	unlink(path);
	for (uint32_t c = 0; c < MAX_COMP; c++)
		put_part(c, NULL, 0, NULL, 0, false);
	return 0;
}
