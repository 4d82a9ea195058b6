/* test_outputs_merge.c — the launcher merges output parts as a stream.
 *
 * The op log and the trace are k-way merges of sorted runs cut from the
 * daemons' parts. Cutting the parts into many small runs (KB_MERGE_CHUNK)
 * must give the same bytes as cutting them into few, and the launcher's
 * memory must not grow with the size of the trace. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A run with parts cut into chunks of `chunk` bytes (NULL: the default). */
static void run_ok(const char *dir, const char *chunk, const char *const extra[])
{
	if (chunk)
		setenv("KB_MERGE_CHUNK", chunk, 1);
	kb_run_ok(dir, extra);
	unsetenv("KB_MERGE_CHUNK");
}

static void expect_same(const char *a, const char *b, const char *name)
{
	char pa[600], pb[600];
	struct stat st;

	snprintf(pa, sizeof(pa), "%s/%s", a, name);
	snprintf(pb, sizeof(pb), "%s/%s", b, name);
	cr_assert(!stat(pa, &st) && st.st_size > 0, "%s is missing or empty", pa);
	cr_expect(kb_same_file(pa, pb), "%s differs when the parts are cut into small runs", name);
}

/* "start_ps" and "end_ps" of an op log line. */
static void times_of(const char *line, unsigned long long *start, unsigned long long *end)
{
	const char *s = strstr(line, "\"start_ps\":"), *e = strstr(line, "\"end_ps\":");

	cr_assert(s && e, "op log line without times: %.80s", line);
	*start = strtoull(s + 11, NULL, 10);
	*end = strtoull(e + 9, NULL, 10);
}

/* The op log is in (start, end) order, checked line by line. */
static size_t expect_oplog_sorted(const char *dir)
{
	char path[600];
	char *text, *line, *save = NULL;
	unsigned long long ps = 0, pe = 0, s, e;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/op_log.jsonl", dir);
	text = kb_slurp(path, NULL);
	cr_assert(text, "no %s", path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		times_of(line, &s, &e);
		cr_expect(s > ps || (s == ps && e >= pe), "op log line %zu is out of order", n + 1);
		ps = s;
		pe = e;
	}
	free(text);
	return n;
}

Test(outputs_merge, many_small_runs_give_the_same_bytes, .timeout = 300)
{
	static const char *const ring[] = { "ring_attention", "--ranks", "4", "--pes", "2",
					    "--arg", "pass=q", "--arg", "seq_kv=1024", NULL };
	static const char *const ring_pf[] = { "ring_attention", "--ranks", "4", "--pes", "2",
					       "--arg", "pass=q", "--arg", "seq_kv=1024",
					       "--trace-format", "perfetto", NULL };
	static const char *const traffic[] = { "traffic", "--arg", "components=6", "--arg",
					       "messages=3000", "--trace-format", "json.gz", NULL };
	char a[256], b[256];

	kb_tmpdir(a, sizeof(a), "merge-whole");
	kb_tmpdir(b, sizeof(b), "merge-small");
	run_ok(a, NULL, ring);
	run_ok(b, "512", ring); /* a run per few records: hundreds of runs */
	expect_same(a, b, "op_log.jsonl");
	expect_same(a, b, "trace.json");
	cr_expect_gt(expect_oplog_sorted(b), 1000, "too small an op log to test the merge");
	run_ok(a, NULL, ring_pf);
	run_ok(b, "700", ring_pf);
	expect_same(a, b, "trace.pftrace");
	run_ok(a, NULL, traffic);
	run_ok(b, "448", traffic);
	expect_same(a, b, "trace.json.gz");
}

/* The launcher's peak RSS in KB, from the line KB_REPORT_RSS=1 asks for. */
static uint64_t peak_rss_kb(const char *dir, const char *chunk, const char *const extra[])
{
	char *argv[40];
	struct kb_result r;
	const char *line;
	int n = 0;

	argv[n++] = (char *)"kernbench";
	argv[n++] = (char *)"run";
	for (int i = 0; extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n++] = (char *)"--quiet";
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)dir;
	argv[n] = NULL;
	setenv("KB_REPORT_RSS", "1", 1);
	if (chunk)
		setenv("KB_MERGE_CHUNK", chunk, 1);
	kb_runv(&r, argv);
	unsetenv("KB_MERGE_CHUNK");
	unsetenv("KB_REPORT_RSS");
	cr_assert_eq(r.status, 0, "kernbench %s: %s", extra[0], r.err);
	line = strstr(r.err, "launcher peak RSS ");
	cr_assert(line, "no peak RSS line: %s", r.err);
	return strtoull(line + 18, NULL, 10);
}

/* A trace much larger than what the launcher may grow by while merging:
 * before the merge streamed, the launcher held ~0.6 x the trace. The
 * untraced run gives the launcher's own baseline (sanitizers included). */
Test(outputs_merge, launcher_memory_does_not_grow_with_the_trace, .timeout = 400)
{
	static const char *const off[] = { "traffic", "--arg", "components=4", "--arg",
					   "messages=300000", "--trace", "off", NULL };
	static const char *const on[] = { "traffic", "--arg", "components=4", "--arg",
					  "messages=300000", NULL };
	char dir[256], path[600];
	uint64_t base_kb, traced_kb;
	struct stat st;

	kb_tmpdir(dir, sizeof(dir), "merge-rss");
	base_kb = peak_rss_kb(dir, NULL, off);
	traced_kb = peak_rss_kb(dir, "1048576", on);
	snprintf(path, sizeof(path), "%s/trace.json", dir);
	cr_assert(!stat(path, &st));
	cr_assert_gt(st.st_size, 90 << 20, "trace of %lld bytes: too small to test the bound",
		     (long long)st.st_size);
	cr_expect_lt(traced_kb, base_kb + (40 << 10),
		     "the launcher grew by %llu KB merging a %lld MB trace (bound 40 MB)",
		     (unsigned long long)(traced_kb - base_kb), (long long)(st.st_size >> 20));
}

/* --op-log off writes no op_log.jsonl and changes no other output: the
 * summary (HBM busy time comes from the DMA records, still written) and
 * the trace are the bytes of a run with it on. */
Test(outputs_merge, op_log_off_changes_no_other_output, .timeout = 300)
{
	static const char *const on[] = { "ring_attention", "--ranks", "4", "--pes", "2",
					  "--arg", "pass=q", "--arg", "seq_kv=1024", NULL };
	static const char *const off[] = { "ring_attention", "--ranks", "4", "--pes", "2",
					   "--arg", "pass=q", "--arg", "seq_kv=1024",
					   "--op-log", "off", NULL };
	char a[256], b[256], path[600];
	char *sa, *sb, *cut_a, *cut_b;
	struct kb_result r;

	kb_tmpdir(a, sizeof(a), "oplog-on");
	kb_tmpdir(b, sizeof(b), "oplog-off");
	kb_run_ok(a, on);
	kb_run_ok(b, off);
	expect_same(a, b, "trace.json");
	snprintf(path, sizeof(path), "%s/op_log.jsonl", b);
	cr_expect(access(path, F_OK) != 0, "--op-log off wrote %s", path);
	snprintf(path, sizeof(path), "%s/summary.json", a);
	sa = kb_slurp(path, NULL);
	snprintf(path, sizeof(path), "%s/summary.json", b);
	sb = kb_slurp(path, NULL);
	cr_assert(sa && sb);
	cr_expect(strstr(sa, "\"busy_util\""), "no busy_util (HBM busy time) to compare");
	cut_a = strstr(sa, "\"transport\"");
	cut_b = strstr(sb, "\"transport\"");
	cr_assert(cut_a && cut_b);
	*cut_a = *cut_b = '\0';
	cr_expect_str_eq(sa, sb, "summary.json differs above \"transport\" with --op-log off");
	free(sa);
	free(sb);
	kb_run(&r, "run", "gemm", "--op-log", "maybe", "--out", b, NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "--op-log 'maybe': expected on or off"), "%s", r.err);
}
