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

/* ------------------------------------------------------ machine presets */

/* The number under `section:` / `  key:` in the preset file NAME (read
 * from the source tree, independently of the launcher). */
static uint64_t preset_value(const char *name, const char *section, const char *key)
{
	char path[600], sec[64], line[80];
	char *text, *at;
	uint64_t v;

	snprintf(path, sizeof(path), "%s/deploy/configs/machines/%s.yaml", getenv("KB_ROOT"),
		 name);
	text = kb_slurp(path, NULL);
	cr_assert_not_null(text, "%s", path);
	snprintf(sec, sizeof(sec), "\n%s:\n", section);
	snprintf(line, sizeof(line), "\n  %s:", key);
	at = strstr(text, sec);
	cr_assert_not_null(at, "%s has no section %s", path, section);
	at = strstr(at, line);
	cr_assert_not_null(at, "%s has no %s.%s", path, section, key);
	v = strtoull(at + strlen(line), NULL, 10);
	free(text);
	return v;
}

/* `kernbench config ... --format json` parsed; the test fails unless it
 * exits 0. */
static uint64_t config_u64(const char *path, const char *const args[])
{
	char *argv[24];
	struct kb_result r;
	int n = 0;

	argv[n++] = (char *)"kernbench";
	argv[n++] = (char *)"config";
	for (int i = 0; args[i] && n < 20; i++)
		argv[n++] = (char *)args[i];
	argv[n++] = (char *)"--format";
	argv[n++] = (char *)"json";
	argv[n] = NULL;
	kb_runv(&r, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	return kb_json_u64(r.out, path);
}

/* Issue 18 item 1: a misspelt preset is a usage error, one line, with a
 * did-you-mean and the list, for `config` and for `run`. */
Test(cli, a_misspelt_machine_preset_is_a_usage_error, .timeout = 60)
{
	char dir[256], yaml[300];
	struct kb_result r;
	FILE *f;

	kb_run(&r, "config", "--machine", "tpu_v5", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "'tpu_v5'") && strstr(r.err, "did you mean 'tpu_v5e'") &&
		  strstr(r.err, "ascend910b, tpu_v5e, trn2"), "%s", r.err);
	cr_expect(!strchr(r.err, '\n') || !strchr(strchr(r.err, '\n') + 1, '\n'),
		  "one line: %s", r.err);
	kb_tmpdir(dir, sizeof(dir), "badpreset");
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--machine", "asend910b", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "did you mean 'ascend910b'"), "%s", r.err);
	/* the YAML form too */
	snprintf(yaml, sizeof(yaml), "%s/m.yaml", dir);
	f = fopen(yaml, "w");
	cr_assert(f);
	fputs("machine: trn9\n", f);
	fclose(f);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--config", yaml, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "'trn9'") && strstr(r.err, "did you mean 'trn2'"), "%s", r.err);
}

/* defaults < preset < --config files (in order) < --set < --ranks/--pes,
 * whatever order the options come in; `machine: NAME` (scalar) and
 * `machine: {preset: NAME, ...}` name the preset in a file, --machine
 * wins over both. Each expected value is read from the preset's file. */
Test(cli, machine_presets_layer_under_files_sets_and_flags, .timeout = 60)
{
	char dir[256], scalar[300], mapping[300], plain[300];
	FILE *f;
	uint64_t tpu_hbm = preset_value("tpu_v5e", "hbm", "bytes_per_cycle"),
		 asc_hbm = preset_value("ascend910b", "hbm", "bytes_per_cycle"),
		 tpu_q = preset_value("tpu_v5e", "dma", "queues"),
		 trn_hbm = preset_value("trn2", "hbm", "bytes_per_cycle");

	cr_assert(tpu_hbm != asc_hbm && asc_hbm != trn_hbm && tpu_hbm != trn_hbm);
	kb_tmpdir(dir, sizeof(dir), "layers");
	snprintf(scalar, sizeof(scalar), "%s/scalar.yaml", dir);
	snprintf(mapping, sizeof(mapping), "%s/mapping.yaml", dir);
	snprintf(plain, sizeof(plain), "%s/plain.yaml", dir);
	f = fopen(scalar, "w");
	fputs("machine: ascend910b\n", f);
	fclose(f);
	f = fopen(mapping, "w");
	fputs("machine:\n  preset: tpu_v5e\n  pes: 3\ndma:\n  queues: 5\n", f);
	fclose(f);
	f = fopen(plain, "w");
	fputs("dma:\n  queues: 7\n", f);
	fclose(f);

	/* the default machine is trn2 */
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ NULL }), trn_hbm);
	/* the preset's own numbers */
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ "--machine",
		     "tpu_v5e", NULL }), tpu_hbm);
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--machine", "tpu_v5e",
		     NULL }), tpu_q);
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ "--config", scalar,
		     NULL }), asc_hbm);
	/* a file's keys over its own preset, --set over the file, --pes over --set */
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ "--config",
		     mapping, NULL }), tpu_hbm);
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--config", mapping, NULL }),
		     5);
	cr_expect_eq(config_u64("machine.pes", (const char *const[]){ "--config", mapping, NULL }),
		     3);
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--set", "dma.queues=9",
		     "--config", mapping, NULL }), 9);
	cr_expect_eq(config_u64("machine.pes", (const char *const[]){ "--pes", "2", "--set",
		     "machine.pes=6", "--config", mapping, NULL }), 2);
	/* files in order; a preset named anywhere sits under every file */
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--config", plain,
		     "--config", mapping, NULL }), 5);
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--config", mapping,
		     "--config", plain, NULL }), 7);
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--config", plain,
		     "--machine", "tpu_v5e", NULL }), 7);
	/* --machine over a file's preset; the file's own keys still apply */
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ "--machine",
		     "ascend910b", "--config", mapping, NULL }), asc_hbm);
	cr_expect_eq(config_u64("dma.queues", (const char *const[]){ "--machine", "ascend910b",
		     "--config", mapping, NULL }), 5);
	/* --set machine.preset=NAME names one as a file would */
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ "--set",
		     "machine.preset=tpu_v5e", NULL }), tpu_hbm);
}

/* `config --machine NAME` prints the preset with its sources, a form that
 * loads back to the same machine; `run` records the preset in
 * summary.json and runs on its numbers. */
Test(cli, config_prints_a_preset_with_its_sources_and_run_records_it, .timeout = 90)
{
	char dir[256], back[300], json[300], val[64], cmd[1024];
	struct kb_result r;
	char *summary;

	kb_tmpdir(dir, sizeof(dir), "presetrun");
	kb_run(&r, "config", "--machine", "ascend910b", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "# machine preset ascend910b (") &&
		  strstr(r.out, "ascend910b.yaml"), "%.300s", r.out);
	cr_expect(strstr(r.out, "Sources"), "the preset's sources: %.600s", r.out);
	/* the whole text (longer than a captured stdout) into a file */
	snprintf(back, sizeof(back), "%s/back.yaml", dir);
	snprintf(cmd, sizeof(cmd), "%s config --machine ascend910b > %s", kb_bin(), back);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	cr_expect_eq(config_u64("hbm.bytes_per_cycle", (const char *const[]){ "--config", back,
		     NULL }), preset_value("ascend910b", "hbm", "bytes_per_cycle"));
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--machine", "tpu_v5e", "--arg",
	       "m=64", "--arg", "k=64", "--arg", "n=64", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(json, sizeof(json), "%s/summary.json", dir);
	summary = kb_slurp(json, NULL);
	cr_assert_not_null(summary);
	cr_assert(kb_json_field(summary, "config.machine.preset", val, sizeof(val)), "%.300s",
		  summary);
	cr_expect_str_eq(val, "\"tpu_v5e\"");
	cr_expect_eq(kb_json_u64(summary, "config.hbm.bytes_per_cycle"),
		     preset_value("tpu_v5e", "hbm", "bytes_per_cycle"));
	cr_expect_eq(kb_json_u64(summary, "pes"), preset_value("tpu_v5e", "machine", "pes"));
	free(summary);
}
