/* test_cli.c — the launcher follows command-line conventions (issue 10
 * item 4): a value the run cannot use is a usage error (exit 2) with one
 * line naming it, whichever part of the program checks it. Every test
 * failed before its fix. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* F10: a --trace-ranks rank the run does not have filtered the trace to
 * nothing with exit 0 and no word. */
Test(cli, trace_ranks_outside_the_run_is_a_usage_error, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "traceranks");
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--trace-ranks", "9", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "rank 9") && strstr(r.err, "1 rank"), "%s", r.err);
	cr_expect(!strchr(r.err, '\n') || !strchr(strchr(r.err, '\n') + 1, '\n'),
		  "one line: %s", r.err);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--ranks", "2", "--trace-ranks",
	       "0-1", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
}

/* F9: a bad --arg value exited 1 when the kernel checked it (gemm) and 2
 * when the launcher did (traffic); both are usage errors, in every
 * transport (the kernel's check travels back from a daemon). */
Test(cli, bad_arg_value_is_a_usage_error_wherever_it_is_checked, .timeout = 90)
{
	static const char *const transports[] = { "ipc", "inproc" };
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "badvalue");
	for (size_t i = 0; i < 2; i++) {
		kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--transport",
		       transports[i], "--arg", "m=-1", NULL);
		cr_expect_eq(r.status, 2, "%s: %s", transports[i], r.err);
		cr_expect(strstr(r.err, "m=-1") && strstr(r.err, "1 to 65536"), "%s", r.err);
	}
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--arg", "messages=8589934594",
	       NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "messages=8589934594"), "%s", r.err);
}

/* F4: an --inputs no kernel reads was silently ignored (exit 0), and a
 * missing --inputs folder was too. */
Test(cli, inputs_no_kernel_reads_or_missing_is_a_usage_error, .timeout = 90)
{
	char dir[256], in[256], missing[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "inputs-out");
	kb_tmpdir(in, sizeof(in), "inputs-in");
	snprintf(missing, sizeof(missing), "%s/nonexist", in);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--inputs", missing,
	       NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, missing) && strchr(r.err, '\n') == strrchr(r.err, '\n'), "%s",
		  r.err);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--inputs", in, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "--inputs") && strstr(r.err, "gemm"), "%s", r.err);
	/* a kernel that asks for its inputs folder still runs: one data-mode
	 * run's q/k/v tensors are the next one's inputs */
	kb_run(&r, "run", "gqa_decode_opt2", "--pes", "1", "--quiet", "--out", in, "--mode",
	       "data", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", "gqa_decode_opt2", "--pes", "1", "--quiet", "--out", dir, "--inputs",
	       in, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
}

/* F2: a misspelt kernel in a user's object exited 1 from a daemon ("has no
 * symbol") with no suggestion; built-in names got exit 2 and "did you
 * mean". The launcher reads the object's ELF symbols without loading it. */
Test(cli, misspelt_kernel_in_an_object_suggests_the_near_name, .timeout = 60)
{
	const char *plugins = getenv("KB_PLUGINS");
	char so[600], dir[256], text[300];
	struct kb_result r;

	cr_assert(plugins, "KB_PLUGINS is set by `make integration`");
	kb_tmpdir(dir, sizeof(dir), "misspelt");
	snprintf(so, sizeof(so), "%s/tl_example.so:sotfmax", plugins);
	kb_run(&r, "run", so, "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "kernel 'sotfmax' not found in") &&
		  strstr(r.err, "did you mean 'softmax'?"), "%s", r.err);
	cr_expect(!strstr(r.err, "r0."), "a daemon was started: %s", r.err);
	/* a file that is not an ELF object: one line, exit 2 */
	snprintf(text, sizeof(text), "%s/notelf.so", dir);
	FILE *f = fopen(text, "w");
	cr_assert(f);
	fputs("just text\n", f);
	fclose(f);
	snprintf(so, sizeof(so), "%s:softmax", text);
	kb_run(&r, "run", so, "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "not an ELF file") && strchr(r.err, '\n') == strrchr(r.err, '\n'),
		  "%s", r.err);
}
