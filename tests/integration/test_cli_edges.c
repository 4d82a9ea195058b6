/* test_cli_edges.c — issue 19 items 7, 8 and 9: every command's help and
 * option errors follow one convention (opts.h), kernel objects carry and
 * are checked for their tl.h ABI, the line of a run where several
 * components fail is the same run after run, and the findings of the
 * hostile audit (32-bit wraps in the examples, kernel-checked string
 * arguments, the zigzag overflow). Each test failed before its fix. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const char *const commands[] = { "run", "config", "list", "keygen", "agent", "sweep",
					"diff" };

Test(cli_edges, help_anywhere_prints_the_commands_help_and_exits_0, .timeout = 60)
{
	struct kb_result r;

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		char want[64];

		snprintf(want, sizeof(want), "usage: kernbench %s", commands[i]);
		kb_run(&r, commands[i], "-h", NULL);
		cr_expect_eq(r.status, 0, "%s -h: %d %s", commands[i], r.status, r.err);
		cr_expect(strstr(r.out, want), "%s -h printed: %s", commands[i], r.out);
		/* after other arguments, even bad ones */
		kb_run(&r, commands[i], "--no-such-option", "x", "--help", NULL);
		cr_expect_eq(r.status, 0, "%s ... --help: %d %s", commands[i], r.status, r.err);
		cr_expect(strstr(r.out, want), "%s ... --help printed: %s", commands[i], r.out);
	}
	kb_run(&r, "run", "gemm", "--out", "/nonexistent/x", "-h", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "--trace-format"), "run's help lists its options: %s", r.out);
	kb_run(&r, "help", "run", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "usage: kernbench run"), "%s", r.out);
}

Test(cli_edges, unknown_options_to_any_command_are_usage_errors, .timeout = 60)
{
	struct kb_result r;

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		kb_run(&r, commands[i], "--foo", NULL);
		cr_expect_eq(r.status, 2, "%s --foo: exit %d: %s", commands[i], r.status, r.err);
		cr_expect(strstr(r.err, "unknown option '--foo'"), "%s: %s", commands[i], r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
		kb_run(&r, commands[i], "-z", NULL);
		cr_expect_eq(r.status, 2, "%s -z: exit %d: %s", commands[i], r.status, r.err);
	}
	kb_run(&r, "list", "extra", NULL);
	cr_expect_eq(r.status, 2, "list extra: %s", r.err);
	kb_run(&r, "run", "gemm", "--quiet=yes", NULL);
	cr_expect_eq(r.status, 2, "a flag given a value: %s", r.err);
	kb_run(&r, "run", "gemm", "--out", NULL);
	cr_expect_eq(r.status, 2, "an option without its value: %s", r.err);
	cr_expect(strstr(r.err, "--out needs a value"), "%s", r.err);
	kb_run(&r, "rnu", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "did you mean 'run'"), "%s", r.err);
}

Test(cli_edges, ambiguous_abbreviations_list_the_candidates, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_run(&r, "run", "gemm", "--trace-f", "on", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "ambiguous") && strstr(r.err, "--trace-flows") &&
		  strstr(r.err, "--trace-format"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	/* a unique prefix is the option */
	kb_tmpdir(dir, sizeof(dir), "prefix");
	kb_run(&r, "run", "gemm", "--qui", "--ou", dir, "--pes=1", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(r.out[0], '\0', "--qui was not --quiet: %s", r.out);
	cr_expect_gt(kb_summary_u64(dir, "latency_ps"), 0);
}

Test(cli_edges, kernel_not_found_lists_what_the_object_exports, .timeout = 60)
{
	char dir[256], so[400], workload[500];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "exports");
	kb_build_kernel(dir, "two",
			"#include \"tl.h\"\n"
			"int alpha(struct tl *tl, const struct tl_args *a);\n"
			"int bravo(struct tl *tl, const struct tl_args *a);\n"
			"int alpha(struct tl *tl, const struct tl_args *a) { (void)tl; (void)a; return 0; }\n"
			"int bravo(struct tl *tl, const struct tl_args *a) { (void)tl; (void)a; return 0; }\n",
			so, sizeof(so));
	snprintf(workload, sizeof(workload), "%s:charlie", so);
	kb_run(&r, "run", workload, "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "charlie") && strstr(r.err, "alpha") && strstr(r.err, "bravo"),
		  "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}

/* An object carries its tl.h ABI (TL_ABI_VERSION as tl_abi_version): one
 * built without it, or against another, is refused before the run, without
 * loading it (its constructor would leave a mark). */
Test(cli_edges, kernel_objects_are_checked_for_their_tl_abi, .timeout = 60)
{
	char dir[256], so[400], workload[500], src[1200], mark[300];
	struct kb_result r;
	static const char *const abis[] = { NULL, "999" };

	kb_tmpdir(dir, sizeof(dir), "abi");
	snprintf(mark, sizeof(mark), "%s/loaded", dir);
	for (size_t i = 0; i < 2; i++) {
		snprintf(src, sizeof(src),
			 "#define _POSIX_C_SOURCE 200809L\n#include <fcntl.h>\n#include <unistd.h>\n"
			 "struct tl; struct tl_args;\n%s%s%s"
			 "__attribute__((constructor)) static void m(void)\n"
			 "{ int fd = open(\"%s\", O_WRONLY | O_CREAT, 0644); if (fd >= 0) close(fd); }\n"
			 "int k(struct tl *tl, const struct tl_args *a);\n"
			 "int k(struct tl *tl, const struct tl_args *a) { (void)tl; (void)a; return 0; }\n",
			 abis[i] ? "__attribute__((visibility(\"default\"))) const unsigned "
				   "tl_abi_version = " : "",
			 abis[i] ? abis[i] : "", abis[i] ? ";\n" : "", mark);
		kb_build_kernel(dir, i ? "other" : "none", src, so, sizeof(so));
		snprintf(workload, sizeof(workload), "%s:k", so);
		kb_run(&r, "run", workload, "--quiet", "--out", dir, NULL);
		cr_expect_eq(r.status, 2, "%s", r.err);
		cr_expect(strstr(r.err, "ABI") && strstr(r.err, "rebuild"), "%s", r.err);
		if (abis[i])
			cr_expect(strstr(r.err, "ABI 999"), "%s", r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
		cr_expect_neq(access(mark, F_OK), 0, "the object was loaded");
	}
}

/* Every PE's kernel refuses the same argument: the line names the lowest
 * PE and how many failed, the same bytes in every run and transport. */
Test(cli_edges, the_line_of_many_failures_is_the_same_every_run, .timeout = 240)
{
	char dir[256], first[4096];
	struct kb_result r;
	static const char *const transports[] = { "ipc", "tcp", "inproc" };

	kb_tmpdir(dir, sizeof(dir), "same-line");
	kb_run(&r, "run", "ring_attention", "--ranks", "2", "--arg", "layout=diagonal", "--out",
	       dir, NULL);
	cr_assert_eq(r.status, 2, "%s", r.err);
	snprintf(first, sizeof(first), "%s", r.err);
	cr_expect(strstr(first, "r0.pe0.host") && strstr(first, "15 more"), "%s", first);
	for (int k = 0; k < 6; k++) {
		kb_run(&r, "run", "ring_attention", "--ranks", "2", "--arg", "layout=diagonal",
		       "--out", dir, "--transport", transports[k % 3], NULL);
		cr_expect_str_eq(r.err, first, "run %d (%s) said otherwise", k, transports[k % 3]);
	}
}

/* Kernels' string and list arguments are usage errors too (exit 2), and
 * a usage error leaves the output folder as it was. */
Test(cli_edges, kernel_checked_strings_are_usage_errors_that_leave_dir_alone, .timeout = 120)
{
	char dir[256], keep[400];
	struct kb_result r;
	static const char *const bad[][4] = {
		{ "ring_attention", "2", "pass=sideways", "pass" },
		{ "ring_attention", "2", "layout=diagonal", "layout" },
		{ "gqa_decode_paged", "1", "lens=12,x", "lens" },
		{ "gqa_decode_paged", "1", "lens=12,", "lens" },
	};

	kb_tmpdir(dir, sizeof(dir), "strings");
	kb_run(&r, "run", "gemm", "--quiet", "--pes", "1", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(keep, sizeof(keep), "%s/summary.json", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kb_run(&r, "run", bad[i][0], "--quiet", "--ranks", bad[i][1], "--out", dir, "--arg",
		       bad[i][2], NULL);
		cr_expect_eq(r.status, 2, "%s: exit %d: %s", bad[i][2], r.status, r.err);
		cr_expect(strstr(r.err, bad[i][3]), "%s", r.err);
		cr_expect_eq(access(keep, F_OK), 0, "%s removed the previous results", bad[i][2]);
	}
	/* a kernel-found range error, an --arg nothing reads: the same */
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--arg", "m=0", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--arg", "nosuch=1", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect_eq(access(keep, F_OK), 0, "a usage error removed the previous results");
	/* into a folder that did not exist: none is left */
	snprintf(keep, sizeof(keep), "%s/fresh", dir);
	kb_run(&r, "run", "gemm", "--quiet", "--out", keep, "--arg", "m=0", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect_neq(access(keep, F_OK), 0, "a usage error left %s", keep);
}

/* The examples read their sizes with tl_arg_u32: a 64-bit value is a
 * usage error, not a silent wrap to 32 bits. */
Test(cli_edges, example_kernels_range_check_their_arguments, .timeout = 60)
{
	const char *plugins = getenv("KB_PLUGINS");
	char dir[256], so[400];
	struct kb_result r;
	static const char *const cases[][2] = {
		{ "dma_probe.so:dma_probe", "rows=4294967360" },
		{ "hbm_probe.so:hbm_probe", "loads=100000" },
		{ "ipcq_probe.so:ipcq_probe", "cols=4294967424" },
		{ "gemm_pingpong.so:gemm_pingpong", "m=4294967360" },
	};

	cr_assert(plugins, "KB_PLUGINS unset");
	kb_tmpdir(dir, sizeof(dir), "examples");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(so, sizeof(so), "%s/%s", plugins, cases[i][0]);
		kb_run(&r, "run", so, "--quiet", "--ranks", "2", "--out", dir, "--arg", cases[i][1],
		       NULL);
		cr_expect_eq(r.status, 2, "%s %s: exit %d: %s", cases[i][0], cases[i][1], r.status,
			     r.err);
		cr_expect(strstr(r.err, "expected a decimal whole number"), "%s", r.err);
	}
}

/* Zigzag query blocks at lengths whose chunks are not a tile multiple
 * (seq_kv 384 and 448 on 2 ranks of 8 PEs overflowed the TCM), and two
 * more shapes with two PEs per rank, each PE holding what it holds by
 * default (one KV head, a group of 8 query heads). */
Test(cli_edges, zigzag_ring_fits_the_tcm_at_ragged_lengths, .timeout = 300)
{
	char dir[256], seq[32], ranks[8], pes[8], hkv[32], hq[32];
	struct kb_result r;
	static const unsigned cases[][3] = { { 2, 8, 384 }, { 2, 8, 448 }, { 2, 2, 704 },
					     { 3, 2, 320 } };

	kb_tmpdir(dir, sizeof(dir), "zigzag");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(ranks, sizeof(ranks), "%u", cases[i][0]);
		snprintf(pes, sizeof(pes), "%u", cases[i][1]);
		snprintf(seq, sizeof(seq), "seq_kv=%u", cases[i][2]);
		snprintf(hkv, sizeof(hkv), "heads_kv=%u", cases[i][1]);
		snprintf(hq, sizeof(hq), "heads_q=%u", 8 * cases[i][1]);
		kb_run(&r, "run", "ring_attention", "--quiet", "--ranks", ranks, "--pes", pes, "--out",
		       dir, "--arg", "layout=zigzag", "--arg", seq, "--arg", hkv, "--arg", hq, NULL);
		cr_expect_eq(r.status, 0, "R=%s P=%s %s: %s", ranks, pes, seq, r.err);
	}
}

/* A model setting that would do nothing, or name nothing this build has,
 * is a usage error before any daemon starts (summary.models reported
 * unused names, and *.params given to a built-in model were ignored). */
Test(cli_edges, unused_or_unknown_models_and_params_are_refused, .timeout = 60)
{
	char dir[256], plugin[600];
	struct kb_result r;
	const char *plugins = getenv("KB_PLUGINS");
	static const char *const bad[][3] = {
		{ "traffic", "gemm.model=roofline", "no gemm engine" },
		{ "traffic", "dma.params=a=1", "no dma engine" },
		{ "traffic", "hbm.model=ideal", "no hbm engine" },
		{ "gemm", "gemm.params=cycles=9", "only a plug-in model" },
		{ "gemm", "math.model=nosuch", "not built in" },
		{ "gemm", "hbm.model=nosuch", "not built in" },
		{ "gemm", "dma.model=/nonexistent/m.so", "No such file" },
	};

	cr_assert(plugins, "KB_PLUGINS unset");
	kb_tmpdir(dir, sizeof(dir), "models");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kb_run(&r, "run", bad[i][0], "--quiet", "--out", dir, "--set", bad[i][1], NULL);
		cr_expect_eq(r.status, 2, "%s %s: exit %d: %s", bad[i][0], bad[i][1], r.status, r.err);
		cr_expect(strstr(r.err, bad[i][2]), "%s %s: %s", bad[i][0], bad[i][1], r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	}
	/* what is used runs: a built-in by name, a plug-in with its parameters */
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--set", "gemm.model=roofline", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(plugin, sizeof(plugin), "gemm.model=%s/gemm_fixed.so", plugins);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--set", plugin, "--set",
	       "gemm.params=cycles=900", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
}

/* run.bind_host and the hosts file's coordinator are what gets bound: a
 * host name or IPv6 used to pass as loopback and fail at the bind. */
Test(cli_edges, names_and_ipv6_for_what_is_bound_are_refused_at_parse_time, .timeout = 60)
{
	char dir[256], hosts[300];
	struct kb_result r;
	static const char *const hosts_bad[] = { "tcp://localhost:5555", "tcp://[::1]:5555",
						  "tcp://::1:5555" };
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "bindhost");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--transport", "tcp", "--set",
	       "run.bind_host=localhost", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "127.0.0.1"), "%s", r.err);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--transport", "tcp", "--set",
	       "run.bind_host=::1", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "IPv6"), "%s", r.err);
	kb_run(&r, "config", "--set", "run.bind_host=no.such.host", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	snprintf(hosts, sizeof(hosts), "%s/h.yaml", dir);
	for (size_t i = 0; i < sizeof(hosts_bad) / sizeof(hosts_bad[0]); i++) {
		f = fopen(hosts, "w");
		cr_assert(f);
		fprintf(f, "coordinator: %s\nhosts:\n  - ranks: [0]\n", hosts_bad[i]);
		fclose(f);
		kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--hosts", hosts, NULL);
		cr_expect_eq(r.status, 2, "%s: %s", hosts_bad[i], r.err);
		cr_expect(strstr(r.err, "IPv4"), "%s: %s", hosts_bad[i], r.err);
	}
	kb_run(&r, "agent", "--coordinator", "tcp://[::1]:5555", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "IPv6"), "%s", r.err);
}
