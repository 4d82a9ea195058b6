/* test_files.c — hostile files and values through the real launcher
 * (issue 13 items 1-9, issue 9 defect 4, issue 10 items 3-5): the
 * configuration reaches every daemon as the launcher read it, values never
 * wrap or clamp silently, a run's output folder holds one run's results or
 * none, links are never followed, one run per folder, and reads are
 * bounded. Every test failed before its fix. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static bool exists(const char *dir, const char *name)
{
	char path[1200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* One line on stderr (sanitizer notices already dropped). */
static void assert_one_line(const struct kb_result *r)
{
	const char *nl = strchr(r->err, '\n');

	cr_assert(r->err[0], "no error line");
	cr_assert(nl && nl[1] == '\0', "not one line: %s", r->err);
}

/* ------------------------------------------------------------ item 1 */

/* A pipe as --config: the launcher reads it once and every daemon gets
 * what it read (daemons used to re-open /dev/fd/N and see the defaults). */
Test(files_config, pipe_config_reaches_every_daemon, .timeout = 60)
{
	static const char yaml[] = "dma:\n  setup_cycles: 5000\n";
	char dir[256], file[300], fdpath[32];
	struct kb_result r;
	uint64_t from_file, from_pipe;
	int p[2];

	kb_tmpdir(dir, sizeof(dir), "cfgpipe");
	snprintf(file, sizeof(file), "%s/dma.yaml", dir);
	write_file(file, yaml);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--config", file, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	from_file = kb_summary_u64(dir, "latency_ps");
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(write(p[1], yaml, sizeof(yaml) - 1), (ssize_t)sizeof(yaml) - 1);
	close(p[1]);
	snprintf(fdpath, sizeof(fdpath), "/dev/fd/%d", p[0]);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--config", fdpath, NULL);
	close(p[0]);
	cr_assert_eq(r.status, 0, "%s", r.err);
	from_pipe = kb_summary_u64(dir, "latency_ps");
	cr_expect_eq(from_pipe, from_file, "pipe gave %llu ps, the file %llu ps",
		     (unsigned long long)from_pipe, (unsigned long long)from_file);
	/* and the YAML had an effect: the defaults give another latency */
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_neq(from_pipe, kb_summary_u64(dir, "latency_ps"),
		      "the daemons ran with the default setup_cycles");
}

/* The machine size from a pipe: every host must know there are 2 PEs. */
Test(files_config, pipe_machine_size_reaches_the_kernel_hosts, .timeout = 90)
{
	static const char yaml[] = "machine: {pes: 2}\n";
	char dir[256], ref[300], fdpath[32];
	struct kb_result r;
	int p[2];

	kb_tmpdir(dir, sizeof(dir), "cfgpes");
	snprintf(ref, sizeof(ref), "%s/ref", dir);
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", ref, "--pes", "2", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(write(p[1], yaml, sizeof(yaml) - 1), (ssize_t)sizeof(yaml) - 1);
	close(p[1]);
	snprintf(fdpath, sizeof(fdpath), "/dev/fd/%d", p[0]);
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", dir, "--config", fdpath, NULL);
	close(p[0]);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(dir, "tiles"), kb_summary_u64(ref, "tiles"));
	cr_expect_eq(kb_summary_u64(dir, "latency_ps"), kb_summary_u64(ref, "latency_ps"));
}

/* ------------------------------------------------------------ items 2, 4 */

Test(files_values, overflowing_and_clamped_values_are_usage_errors, .timeout = 60)
{
	static const char *const cases[][3] = {
		/* option, value, what the line must name */
		{ "--set", "dma.setup_cycles=18446744073709551615", "0 to 1000000000" },
		{ "--set", "links.host_sched_cycles=18446744073709552", "1 to 1000000000" },
		{ "--set", "run.watchdog_ms=18446744073709551615", "1 to 86400000" },
		{ "--seed", "99999999999999999999999", "--seed" },
		{ "--arg", "messages=8589934594", "1 to 4294967295" },
		{ "--pes", "010", "1 to 64" },
	};
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "values");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kb_run(&r, "run", "traffic", "--quiet", "--out", dir, cases[i][0], cases[i][1], NULL);
		cr_expect_eq(r.status, 2, "%s %s: exit %d (%s)", cases[i][0], cases[i][1], r.status,
			     r.err);
		cr_expect(strstr(r.err, cases[i][2]), "%s %s: %s", cases[i][0], cases[i][1], r.err);
		assert_one_line(&r);
	}
	/* cycles x ps: a legal count of slow cycles */
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--set", "machine.clock_mhz=1",
	       "--set", "dma.setup_cycles=1000000000", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "dma.setup_cycles") && strstr(r.err, "ps"), "%s", r.err);
}

Test(files_values, long_out_path_is_refused_not_truncated, .timeout = 30)
{
	char out[1400];
	struct kb_result r;

	memset(out, 'x', sizeof(out) - 1);
	memcpy(out, "/tmp/", 5);
	out[sizeof(out) - 1] = '\0';
	kb_run(&r, "run", "traffic", "--quiet", "--out", out, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "--out"), "%s", r.err);
	out[1023] = '\0'; /* what the old launcher truncated to */
	cr_expect_neq(access(out, F_OK), 0, "outputs went to a truncated path");
}

Test(files_values, kernel_arguments_are_decimal_and_in_range, .timeout = 60)
{
	static const char *const bad[] = { "m=4294967360", "m=010", "m=0x40", "m=-1", "m=0" };
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "kargs");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--arg", bad[i],
		       NULL);
		cr_expect_eq(r.status, 2, "%s ran: %s", bad[i], r.err); /* usage error */
		cr_expect(strstr(r.err, bad[i]) && strstr(r.err, "1 to 65536"), "%s: %s", bad[i],
			  r.err);
	}
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--arg", "m=128", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
}

Test(files_values, second_yaml_document_is_an_error_with_its_line, .timeout = 30)
{
	char dir[256], file[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "yaml2");
	snprintf(file, sizeof(file), "%s/two.yaml", dir);
	write_file(file, "dma: {setup_cycles: 1}\n---\ndma: {setup_cycles: 2}\n");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--config", file, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "second YAML document") && strstr(r.err, "line 2"), "%s", r.err);
	write_file(file, "dma:\n  setup_cycles: 1\n  bytes_per_cycle: [1\n");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--config", file, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "line 4") && strstr(r.err, "flow sequence"), "%s", r.err);
	assert_one_line(&r);
}

/* ------------------------------------------------------------ item 3 */

/* Largest resident set of any process this test waited for (KiB). */
static long children_maxrss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return ru.ru_maxrss;
}

/* A timing run allocates no tensor data: A alone would be 256 MiB of
 * floats (4·m·k), generated and then thrown away. Measured in a child so
 * no earlier run's peak counts. */
Test(files_alloc, timing_mode_allocates_no_tensor_data, .timeout = 120)
{
	char dir[256];
	pid_t pid;
	int status;

	kb_tmpdir(dir, sizeof(dir), "alloc");
	pid = fork();
	if (pid == 0) {
		struct kb_result r;

		kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--arg", "m=8192",
		       "--arg", "k=8192", "--arg", "n=8", NULL);
		if (r.status != 0)
			_exit(2);
		_exit(children_maxrss_kib() < 160 * 1024 ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) != 2, "the run failed");
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "a timing run's process grew past 160 MiB: it built tensors it never moves");
}

/* Sanitized builds (ASan reserves terabytes of shadow memory, so a data
 * limit cannot apply to them) fail large allocations through ASan's own
 * option instead; plain builds through RLIMIT_DATA. */
extern void __asan_init(void) __attribute__((weak));

/* A kernel whose input allocation fails ends the run with one line; it
 * used to return early and write all-zero a.npy/c.npy with exit 0. */
Test(files_alloc, failed_allocation_is_an_error_not_zeros, .timeout = 120)
{
	char dir[256];
	int p[2];
	pid_t pid;
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "nomem");
	cr_assert_eq(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		/* A is 6144 x 8192: 192 MiB of floats while generated, 96 MiB
		 * as f16 (a.npy's buffer: 128 MiB), so only the generation fails */
		struct rlimit lim = { 168u << 20, 168u << 20 };

		close(p[0]);
		if (&__asan_init)
			setenv("ASAN_OPTIONS", "allocator_may_return_null=1:max_allocation_size_mb=160",
			       1);
		else
			setrlimit(RLIMIT_DATA, &lim);
		kb_run(&r, "run", "gemm", "--pes", "1", "--mode", "data", "--quiet", "--out", dir,
		       "--arg", "m=6144", "--arg", "k=8192", "--arg", "n=8", NULL);
		if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &r, sizeof(r)), (ssize_t)sizeof(r), "the run did not report");
	close(p[0]);
	waitpid(pid, NULL, 0);
	cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "out of memory"), "%s", r.err);
	cr_expect(!exists(dir, "c.npy") && !exists(dir, "a.npy"), "zeros written as results");
}

/* ------------------------------------------------------------ item 5 */

/* Makes the last element of the fp16 file dir/name a NaN (0x7e00). */
static void nan_last(const char *dir, const char *name)
{
	char path[600];
	size_t len;
	char *bytes;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	bytes = kb_slurp(path, &len);
	cr_assert_not_null(bytes);
	bytes[len - 2] = 0x00;
	bytes[len - 1] = 0x7e;
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	fwrite(bytes, 1, len, f);
	fclose(f);
	free(bytes);
}

Test(files_numbers, nonfinite_inputs_and_outputs_are_counted_and_warned, .timeout = 90)
{
	char a[256], c[256], cmd[1200];
	struct kb_result r;

	kb_tmpdir(a, sizeof(a), "nan-a");
	kb_tmpdir(c, sizeof(c), "nan-c");
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", a, "--mode", "data", "--pes", "2",
	       "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
	       "tile=32", "--arg", "seq_kv=64", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(a, "nonfinite_inputs"), 0);
	cr_expect_eq(kb_summary_u64(a, "nonfinite_outputs"), 0);
	cr_expect_null(strstr(r.err, "non-finite"), "%s", r.err);
	snprintf(cmd, sizeof(cmd), "cp %s/q.npy %s/k.npy %s/v.npy %s/", a, a, a, c);
	cr_assert_eq(system(cmd), 0);
	/* one NaN (f16 0x7e00) as the last element of k */
	nan_last(c, "k.npy");
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", a, "--mode", "data", "--pes", "2",
	       "--inputs", c, "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32",
	       "--arg", "tile=32", "--arg", "seq_kv=64", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(a, "nonfinite_inputs"), 1);
	cr_expect_gt(kb_summary_u64(a, "nonfinite_outputs"), 0);
	cr_expect(strstr(r.err, "warning") && strstr(r.err, "non-finite"), "no warning: %s", r.err);
	assert_one_line(&r);
}

/* The paged decode reads five files of its own (not through the attention
 * kernels' shared reader): a NaN in a used page of v_cache is counted too. */
Test(files_numbers, nonfinite_paged_inputs_are_counted_and_warned, .timeout = 90)
{
	char a[256], c[256], cmd[2000];
	struct kb_result r;

	kb_tmpdir(a, sizeof(a), "nan-pa");
	kb_tmpdir(c, sizeof(c), "nan-pc");
	kb_run(&r, "run", "gqa_decode_paged", "--quiet", "--out", a, "--mode", "data", "--pes",
	       "2", "--colocate", "all", "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg",
	       "head_dim=16", "--arg", "batch=2", "--arg", "lens=5,9", "--arg", "page=4", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(a, "nonfinite_inputs"), 0);
	snprintf(cmd, sizeof(cmd), "cp %s/q.npy %s/k_cache.npy %s/v_cache.npy %s/block_table.npy %s/seq_lens.npy %s/",
		 a, a, a, a, a, c);
	cr_assert_eq(system(cmd), 0);
	/* every page is used (5 + 9 keys in pages of 4: 2 + 3 of 5 pages):
	 * one NaN (f16 0x7e00) as the last element of v_cache */
	nan_last(c, "v_cache.npy");
	kb_run(&r, "run", "gqa_decode_paged", "--quiet", "--out", a, "--mode", "data", "--pes",
	       "2", "--colocate", "all", "--inputs", c, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(a, "nonfinite_inputs"), 1);
	cr_expect_gt(kb_summary_u64(a, "nonfinite_outputs"), 0);
	cr_expect(strstr(r.err, "warning") && strstr(r.err, "non-finite"), "no warning: %s", r.err);
	assert_one_line(&r);
}

/* ------------------------------------------------------------ item 6 */

/* A failed run leaves nothing that looks like a result: not the previous
 * run's files, not its own partial ones. */
Test(files_outputs, failed_run_leaves_no_results, .timeout = 60)
{
	static const char *const results[] = { "summary.json", "op_log.jsonl", "trace.json",
					       "a.npy", "b.npy", "c.npy" };
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "failed");
	kb_run(&r, "run", "gemm", "--pes", "1", "--mode", "data", "--quiet", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
		cr_assert(exists(dir, results[i]), "%s missing after a good run", results[i]);
	/* a usage error, even one the kernel finds, leaves DIR as it was */
	kb_run(&r, "run", "gemm", "--pes", "1", "--mode", "data", "--quiet", "--out", dir, "--arg",
	       "m=0", NULL);
	cr_assert_eq(r.status, 2, "%s", r.err); /* the kernel refused it: a usage error */
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
		cr_expect(exists(dir, results[i]), "a usage error removed %s", results[i]);
	/* fails after the daemons started (a daemon dies) */
	setenv("KB_FAULT", "crash@r0.pe0.dma:2", 1);
	kb_run(&r, "run", "gemm", "--pes", "1", "--mode", "data", "--quiet", "--out", dir, NULL);
	unsetenv("KB_FAULT");
	cr_assert_eq(r.status, 1, "%s", r.err);
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
		cr_expect(!exists(dir, results[i]), "%s left after a failed run", results[i]);
	cr_expect(!exists(dir, ".kernbench-staging"), "staging folder left behind");
	cr_expect(!exists(dir, ".parts"), "parts left behind");
}

/* Issue 10 item 5: a run never leaves another run's files beside its own. */
Test(files_outputs, timing_run_after_data_run_leaves_only_its_own_files, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "mixed");
	kb_run(&r, "run", "gemm", "--pes", "1", "--mode", "data", "--quiet", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", "gemm", "--pes", "1", "--trace", "off", "--quiet", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(exists(dir, "summary.json"));
	cr_expect(!exists(dir, "trace.json"), "the data run's trace.json is still there");
	cr_expect(!exists(dir, "c.npy"), "the data run's c.npy is still there");
}

/* A file the user put in the folder is not kernbench's to delete. */
Test(files_outputs, files_kernbench_did_not_write_are_kept, .timeout = 60)
{
	char dir[256], mine[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "keep");
	snprintf(mine, sizeof(mine), "%s/notes.txt", dir);
	write_file(mine, "mine\n");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	setenv("KB_FAULT", "crash@r0.pe0.dma:2", 1);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, NULL);
	unsetenv("KB_FAULT");
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_expect(!exists(dir, "summary.json"), "the failed run left the previous summary");
	cr_expect(exists(dir, "notes.txt"), "a file kernbench did not write was deleted");
}

/* kernbench's own bookkeeping names, planted as FIFOs, must not hang a run. */
Test(files_outputs, planted_fifos_do_not_block_the_folder_setup, .timeout = 60)
{
	char dir[256], path[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "fifos");
	snprintf(path, sizeof(path), "%s/.kernbench-results", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(path, sizeof(path), "%s/.kernbench.lock", dir);
	unlink(path);
	cr_assert_eq(mkfifo(path, 0600), 0);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "not a regular file"), "%s", r.err);
}

/* ------------------------------------------------------------ item 7 */

Test(files_links, links_in_the_output_folder_are_never_followed, .timeout = 60)
{
	char dir[256], victim[256], vfile[300], link[300], vpart[300];
	struct kb_result r;
	char *text;

	kb_tmpdir(dir, sizeof(dir), "links");
	kb_tmpdir(victim, sizeof(victim), "victim");
	snprintf(vfile, sizeof(vfile), "%s/precious", victim);
	write_file(vfile, "precious\n");
	snprintf(vpart, sizeof(vpart), "%s/1.trace", victim);
	write_file(vpart, "part-named file\n");
	snprintf(link, sizeof(link), "%s/c.npy", dir);
	cr_assert_eq(symlink(vfile, link), 0);
	snprintf(link, sizeof(link), "%s/summary.json.tmp", dir);
	cr_assert_eq(symlink(vfile, link), 0);
	snprintf(link, sizeof(link), "%s/.parts", dir);
	cr_assert_eq(symlink(victim, link), 0);
	kb_run(&r, "run", "gemm", "--pes", "1", "--mode", "data", "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	text = kb_slurp(vfile, NULL);
	cr_expect(text && !strcmp(text, "precious\n"), "a link was written through");
	free(text);
	cr_expect(access(vpart, F_OK) == 0, "files behind a .parts link were deleted");
	/* a manifest naming a link removes the link's name at most */
	snprintf(link, sizeof(link), "%s/.kernbench-results", dir);
	write_file(link, "evil\n../victim/precious\n");
	snprintf(link, sizeof(link), "%s/evil", dir);
	cr_assert_eq(symlink(vfile, link), 0);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(access(vfile, F_OK) == 0, "a file named by a forged manifest was deleted");
}

/* The stale-socket sweep removes a dead launcher's socket directory, but
 * never what a link of that name points at. Runs in a private /tmp when it
 * can (root), so other launchers on the machine cannot sweep first. */
static int sweep_through_link(void)
{
	char victim[] = "/tmp/kbtest-sweepvictim-XXXXXX", vfile[64], link[64], dir[] =
		"/tmp/kbtest-sweep-XXXXXX";
	struct kb_result r;
	pid_t dead = fork();
	int kept;

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	if (!mkdtemp(victim) || !mkdtemp(dir))
		return 3;
	snprintf(vfile, sizeof(vfile), "%s/coord", victim);
	write_file(vfile, "not a socket\n");
	snprintf(link, sizeof(link), "/tmp/kb-%d-AbCdEf", (int)dead);
	if (symlink(victim, link))
		return 3;
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	kept = access(vfile, F_OK) == 0;
	unlink(link);
	unlink(vfile);
	rmdir(victim);
	return r.status != 0 ? 2 : kept ? 0 : 1;
}

Test(files_links, socket_sweep_never_follows_a_link, .timeout = 60)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		size_t len = 0;
		char *bin = kb_slurp(kb_bin(), &len);

		/* a private, empty /tmp also hides a checkout that lives under
		 * /tmp: carry the binary into the new /tmp and run it from there */
		if (bin && !unshare(CLONE_NEWNS) &&
		    !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) &&
		    !mount("tmpfs", "/tmp", "tmpfs", 0, NULL)) {
			const char *copy = "/tmp/kbtest-kernbench";
			int fd = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);

			if (fd < 0 || write(fd, bin, len) != (ssize_t)len || close(fd))
				_exit(3);
			setenv("KB_BIN", copy, 1);
		}
		free(bin);
		_exit(sweep_through_link());
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "the check crashed");
	cr_expect_neq(WEXITSTATUS(status), 2, "the run failed");
	cr_expect_neq(WEXITSTATUS(status), 3, "cannot set up the link");
	cr_expect_eq(WEXITSTATUS(status), 0, "the sweep deleted a file through a link");
}

/* ------------------------------------------------------------ item 8 */

Test(files_lock, second_run_into_a_busy_folder_says_so, .timeout = 120)
{
	char dir[256], errpath[300];
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", dir, (char *)"--arg", (char *)"messages=4000000",
			 (char *)"--arg", (char *)"components=16", NULL };
	struct kb_result r;
	pid_t first;
	int status;

	kb_tmpdir(dir, sizeof(dir), "lock");
	snprintf(errpath, sizeof(errpath), "%s.err", dir);
	first = kb_spawn(argv, errpath);
	/* the staging folder exists only while a run holds the lock */
	for (int i = 0; i < 2000 && !exists(dir, ".kernbench-staging"); i++)
		usleep(5000);
	cr_assert(exists(dir, ".kernbench-staging"), "the first run never started");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	kill(first, SIGTERM);
	status = kb_wait(first);
	unlink(errpath);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "in use by another kernbench run"), "%s", r.err);
	assert_one_line(&r);
	cr_expect_neq(status, 127);
	cr_expect(!exists(dir, "summary.json"), "an interrupted run left results");
}

/* ------------------------------------------------------------ item 9 */

Test(files_reads, devices_and_writerless_fifos_are_refused, .timeout = 30)
{
	char dir[256], fifo[300], in[300], link[400], cmd[1400], a[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "reads");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--config", "/dev/zero", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "/dev/zero") && strstr(r.err, "character device"), "%s", r.err);
	snprintf(fifo, sizeof(fifo), "%s/cfg.fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--config", fifo, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "cfg.fifo"), "%s", r.err);
	/* inputs: k.npy a link to /dev/zero */
	snprintf(a, sizeof(a), "%s/gen", dir);
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", a, "--mode", "data", "--pes", "2",
	       "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
	       "tile=32", "--arg", "seq_kv=64", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(cmd, sizeof(cmd), "mkdir %s && cp %s/q.npy %s/v.npy %s/", in, a, a, in);
	cr_assert_eq(system(cmd), 0);
	snprintf(link, sizeof(link), "%s/k.npy", in);
	cr_assert_eq(symlink("/dev/zero", link), 0);
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", a, "--pes", "2", "--inputs", in,
	       "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
	       "tile=32", "--arg", "seq_kv=64", NULL);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "k.npy") && strstr(r.err, "character device"), "%s", r.err);
}

/* ------------------------------------------------------------ issue 10 */

Test(files_cli, version_names_release_and_commit, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "--version", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(!strncmp(r.out, "kernbench ", 10) && strchr(r.out, '('), "%s", r.out);
}

Test(files_cli, options_before_the_workload_and_unknown_names_are_usage_errors, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "order");
	kb_run(&r, "run", "--quiet", "--out", dir, "--pes", "1", "gemm", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(dir, "pes"), 1);
	kb_run(&r, "run", "gemmm", "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "did you mean 'gemm'"), "%s", r.err);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--arg", "mm=3", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "'mm'") && strstr(r.err, "k, m, n"), "%s", r.err);
}

/* `kernbench config` prints what --config loads back, in both formats. */
Test(files_cli, config_prints_what_config_loads_back, .timeout = 30)
{
	char dir[256], yaml[300], json[300];
	struct kb_result r, again;

	kb_tmpdir(dir, sizeof(dir), "cfgout");
	kb_run(&r, "config", "--set", "dma.setup_cycles=77", "--set", "gemm.model=roofline",
	       "--pes", "3", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "setup_cycles: 77") && strstr(r.out, "0 to 1000000000"), "%s",
		  r.out);
	snprintf(yaml, sizeof(yaml), "%s/c.yaml", dir);
	write_file(yaml, r.out);
	kb_run(&r, "config", "--config", yaml, "--format", "json", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(json, sizeof(json), "%s/c.json", dir);
	write_file(json, r.out);
	kb_run(&again, "config", "--config", json, "--format", "json", NULL);
	cr_assert_eq(again.status, 0, "%s", again.err);
	cr_expect_str_eq(again.out, r.out);
	cr_expect(strstr(r.out, "\"pes\": 3") && strstr(r.out, "\"model\": \"roofline\""), "%s",
		  r.out);
	kb_run(&r, "config", "--config", "/nonexistent.yaml", NULL);
	cr_expect_eq(r.status, 2);
}

/* A relative plugin path in YAML is relative to the YAML file. */
Test(files_cli, relative_plugin_path_resolves_against_the_yaml_file, .timeout = 60)
{
	const char *plugins = getenv("KB_PLUGINS");
	char dir[256], yaml[300], so[300], out[300];
	struct kb_result r;

	cr_assert_not_null(plugins);
	kb_tmpdir(dir, sizeof(dir), "relso");
	snprintf(so, sizeof(so), "%s/gemm_fixed.so", plugins);
	snprintf(yaml, sizeof(yaml), "%s/plug.so", dir);
	cr_assert_eq(symlink(so, yaml), 0);
	snprintf(yaml, sizeof(yaml), "%s/cfg.yaml", dir);
	write_file(yaml, "gemm: {model: ./plug.so}\n");
	snprintf(out, sizeof(out), "%s/out", dir);
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", out, "--config", yaml, NULL);
	cr_expect_eq(r.status, 0, "run from %s: %s", getenv("PWD"), r.err);
}

/* summary.json says what ran: version, command, resolved arguments and
 * configuration, model names. */
Test(files_cli, summary_records_provenance, .timeout = 60)
{
	char dir[256], path[300];
	struct kb_result r;
	char *s;

	kb_tmpdir(dir, sizeof(dir), "prov");
	kb_run(&r, "run", "gemm", "--pes", "1", "--quiet", "--out", dir, "--arg", "m=128", "--set",
	       "dma.setup_cycles=70", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	s = kb_slurp(path, NULL);
	cr_assert_not_null(s);
	cr_expect(strstr(s, "\"version\": \"kernbench "), "no version");
	cr_expect(strstr(s, "\"command\": [\"kernbench\", \"run\", \"gemm\""), "no command");
	cr_expect(strstr(s, "\"m\": \"128\"") && strstr(s, "\"n\": \"64\""), "args: %s", s);
	cr_expect(strstr(s, "\"setup_cycles\": 70"), "no resolved config");
	/* the default machine's (trn2) models */
	cr_expect(strstr(s, "\"models\": {\"dma\": \"linear\", \"gemm\": \"tensor_engine\""),
		  "no models");
	cr_expect(strstr(s, "\"preset\": \"trn2\""), "no machine preset");
	free(s);
}
