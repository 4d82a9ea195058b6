/* test_guards.c — the small checks issue 19 put in front of outside input:
 * the YAML depth bound, the escaping of error lines, the output file name
 * rule and the job check. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/component.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/yamlcheck.h"

static enum rt_err depth_of(const char *text)
{
	return rt_yaml_check_depth(text, strlen(text), RT_YAML_MAX_DEPTH, "t");
}

static char *repeat(const char *piece, int n, const char *tail)
{
	size_t len = strlen(piece) * (size_t)n + strlen(tail) + 1;
	char *s = malloc(len), *p = s;

	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s", piece);
	strcpy(p, tail);
	return s;
}

Test(guards, yaml_depth_counts_flow_block_and_entries_not_quotes, .timeout = 10)
{
	char *flow_ok = repeat("[", 63, ""), *flow_bad = repeat("[", 65, "");
	char *entries = repeat("- ", 70, "x\n"), *quoted = repeat("'[[[[[[[[[['", 20, "\n");
	char block[8192] = "";

	cr_expect_eq(depth_of(flow_ok), RT_EOK);
	cr_expect_eq(depth_of(flow_bad), RT_ECONFIG);
	cr_expect(strstr(rt_last_error(), "line 1") && strstr(rt_last_error(), "64"), "%s",
		  rt_last_error());
	cr_expect_eq(depth_of(entries), RT_ECONFIG);
	cr_expect_eq(depth_of(quoted), RT_EOK, "brackets inside quotes count: %s", rt_last_error());
	cr_expect_eq(depth_of("a: 1 # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"),
		     RT_EOK);
	for (int i = 0; i < 70; i++)
		sprintf(block + strlen(block), "%*sk%d:\n", i, "", i);
	cr_expect_eq(depth_of(block), RT_ECONFIG);
	cr_expect(strstr(rt_last_error(), "line 65"), "%s", rt_last_error());
	/* a real config's shape */
	cr_expect_eq(depth_of("dma:\n  setup_cycles: 32\ngemm:\n  params: {cycles: 900}\n"), RT_EOK);
	free(flow_ok);
	free(flow_bad);
	free(entries);
	free(quoted);
}

Test(guards, error_lines_escape_control_bytes_and_broken_utf8, .timeout = 10)
{
	char out[256];

	rt_fail(RT_EINVAL, "a\nb\x1b[31m\x7f caf\xc3\xa9 \xc2\x9b \xff end");
	cr_expect_str_eq(rt_last_error(), "a\\x0ab\\x1b[31m\\x7f caf\xc3\xa9 \\xc2\\x9b \\xff end");
	rt_escape_line("\t\xe2\x82\xac\xe2\x82", out, sizeof(out));
	cr_expect_str_eq(out, "\\x09\xe2\x82\xac\\xe2\\x82");
	/* escaping twice changes nothing more */
	rt_escape_line("\\x0a", out, sizeof(out));
	cr_expect_str_eq(out, "\\x0a");
}

Test(guards, output_names_are_plain_files_of_the_folder, .timeout = 10)
{
	static const char *const bad[] = { "", ".", "..", "../x", "a/b", "/etc/passwd", ".hidden",
					   ".kernbench-results", "a\nb", "x\x7f", "summary.json",
					   "op_log.jsonl", "trace.json", "trace.json.gz",
					   "trace.pftrace", "stats.csv", "critical_path.jsonl" };
	static const char *const good[] = { "o.npy", "a b.npy", "caf\xc3\xa9.npy", "x..y",
					    "summary.json.npy" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_not_null(rt_output_name_check(bad[i]), "'%s' was accepted", bad[i]);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect_null(rt_output_name_check(good[i]), "'%s' was refused: %s", good[i],
			       rt_output_name_check(good[i]));
	cr_expect(strstr(rt_output_name_check("a\nb"), "\\x0a"), "%s", rt_output_name_check("a\nb"));
}

Test(guards, a_decoded_job_is_checked, .timeout = 10)
{
	static struct rt_job job;

	memset(&job, 0, sizeof(job));
	rt_config_defaults(&job.config);
	strcpy(job.workload, "gemm");
	cr_expect_eq(rt_job_check(&job), RT_EOK, "%s", rt_last_error());
	memset(job.workload, 'A', sizeof(job.workload));
	cr_expect_eq(rt_job_check(&job), RT_EDECODE);
	strcpy(job.workload, "gemm");
	job.transport = (enum rt_transport)9;
	cr_expect_eq(rt_job_check(&job), RT_EDECODE);
	job.transport = RT_TRANSPORT_IPC;
	job.n_args = RT_MAX_ARGS + 1;
	cr_expect_eq(rt_job_check(&job), RT_EDECODE);
	job.n_args = 0;
	job.progress = (enum rt_progress)9;
	cr_expect_eq(rt_job_check(&job), RT_EDECODE);
	job.progress = RT_PROGRESS_AUTO;
	memset(job.config.bind_host, 'x', sizeof(job.config.bind_host));
	cr_expect_eq(rt_job_check(&job), RT_EDECODE);
}
