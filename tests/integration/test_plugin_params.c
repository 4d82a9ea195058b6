/* test_plugin_params.c — plug-in parameters as a YAML mapping
 * (`gemm.params: {cycles: 900}`, flow or block style) reach the plug-in
 * exactly as `--set gemm.params=cycles=900` does, and the plug-in's own
 * validation speaks for bad values. Uses the gemm_cycles test plug-in. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* Writes DIR/NAME.yaml selecting the plug-in with `params` (YAML text of
 * the params value, block lines already indented) and returns its path. */
static void params_yaml(const char *dir, const char *name, const char *params, char *path,
			size_t cap)
{
	char text[1200];

	snprintf(path, cap, "%s/%s.yaml", dir, name);
	snprintf(text, sizeof(text), "gemm:\n  model: %s/gemm_cycles.so\n  params:%s\n",
		 getenv("KB_PLUGINS"), params);
	write_file(path, text);
}

static void same_op_log(const char *a, const char *b, const char *what)
{
	char pa[600], pb[600];

	snprintf(pa, sizeof(pa), "%s/op_log.jsonl", a);
	snprintf(pb, sizeof(pb), "%s/op_log.jsonl", b);
	cr_expect(kb_same_file(pa, pb), "%s: op log differs from the --set run", what);
}

Test(plugin_params, yaml_mapping_equals_set_string, .timeout = 120)
{
	char dir[256], set_out[400], flow_out[400], block_out[400], other_out[400], model[600];
	char flow[600], block[600], other[600];
	struct kb_result r;

	cr_assert(getenv("KB_PLUGINS"), "KB_PLUGINS unset: run through `make integration`");
	kb_tmpdir(dir, sizeof(dir), "plugin-params");
	snprintf(set_out, sizeof(set_out), "%s/set", dir);
	snprintf(flow_out, sizeof(flow_out), "%s/flow", dir);
	snprintf(block_out, sizeof(block_out), "%s/block", dir);
	snprintf(other_out, sizeof(other_out), "%s/other", dir);
	snprintf(model, sizeof(model), "gemm.model=%s/gemm_cycles.so", getenv("KB_PLUGINS"));
	kb_run(&r, "run", "gemm", "--quiet", "--out", set_out, "--set", model, "--set",
	       "gemm.params=cycles=900", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	params_yaml(dir, "flow", " {cycles: 900}", flow, sizeof(flow));
	kb_run(&r, "run", "gemm", "--quiet", "--out", flow_out, "--config", flow, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	same_op_log(set_out, flow_out, "params: {cycles: 900}");
	params_yaml(dir, "block", "\n    cycles: 900", block, sizeof(block));
	kb_run(&r, "run", "gemm", "--quiet", "--out", block_out, "--config", block, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	same_op_log(set_out, block_out, "block-style params");
	/* and the value does reach the plug-in: another one changes the run */
	params_yaml(dir, "other", " {cycles: 1800}", other, sizeof(other));
	kb_run(&r, "run", "gemm", "--quiet", "--out", other_out, "--config", other, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_gt(kb_summary_u64(other_out, "latency_ps"), kb_summary_u64(set_out, "latency_ps"));
}

Test(plugin_params, plugin_refuses_bad_yaml_values_in_one_line, .timeout = 60)
{
	char dir[256], out[400], path[600];
	struct kb_result r;

	cr_assert(getenv("KB_PLUGINS"), "KB_PLUGINS unset: run through `make integration`");
	kb_tmpdir(dir, sizeof(dir), "plugin-params-bad");
	snprintf(out, sizeof(out), "%s/out", dir);
	/* the plug-in validates its values */
	params_yaml(dir, "zero", "\n    cycles: 0", path, sizeof(path));
	kb_run(&r, "run", "gemm", "--quiet", "--out", out, "--config", path, NULL);
	cr_expect_eq(r.status, 2, "found before any daemon, a usage error");
	cr_expect(strstr(r.err, "cycles='0'") && kb_count_lines(r.err) == 1, "%s", r.err);
	params_yaml(dir, "unknown", " {speed: 2}", path, sizeof(path));
	kb_run(&r, "run", "gemm", "--quiet", "--out", out, "--config", path, NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "unknown parameter 'speed'") && kb_count_lines(r.err) == 1, "%s",
		  r.err);
	/* a shape the name=value form cannot carry is a config error */
	params_yaml(dir, "nested", "\n    cycles: [900]", path, sizeof(path));
	kb_run(&r, "run", "gemm", "--quiet", "--out", out, "--config", path, NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "key 'gemm.params' (line 4)") && kb_count_lines(r.err) == 1, "%s",
		  r.err);
}

/* gemm_cycles declares its parameter (ABI 4): kernbench checks it with a
 * did-you-mean before any daemon starts, and `kernbench config` lists it
 * as comments its YAML loads back with. */
Test(plugin_params, declared_parameters_are_checked_and_listed, .timeout = 60)
{
	char dir[256], out[400], model[400], yaml[500], cmd[2000];
	struct kb_result r;
	char *text;

	cr_assert(getenv("KB_PLUGINS"), "KB_PLUGINS unset: run through `make integration`");
	kb_tmpdir(dir, sizeof(dir), "plugin-params-declared");
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(model, sizeof(model), "gemm.model=%s/gemm_cycles.so", getenv("KB_PLUGINS"));
	kb_run(&r, "run", "gemm", "--quiet", "--out", out, "--set", model, "--set",
	       "gemm.params=cycels=900", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "unknown parameter 'cycels'") &&
			  strstr(r.err, "did you mean 'cycles'? it takes: cycles") &&
			  kb_count_lines(r.err) == 1,
		  "%s", r.err);
	cr_expect_neq(access(out, F_OK), 0, "a refused run made its output folder");
	kb_run(&r, "run", "gemm", "--quiet", "--out", out, "--set", model, "--set",
	       "gemm.params=cycles=9e2", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "expected a decimal integer from 1 to 1000000000 (cycles)"), "%s",
		  r.err);
	/* the listing is at the end of a long text: written to a file whole */
	snprintf(yaml, sizeof(yaml), "%s/c.yaml", dir);
	snprintf(cmd, sizeof(cmd), "'%s' config --set '%s' > '%s'", kb_bin(), model, yaml);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	text = kb_slurp(yaml, NULL);
	cr_assert_not_null(text);
	cr_expect(strstr(text, "\n# cycles  int, cycles, 1..1000000000, default 1000: "), "%s",
		  text);
	free(text);
	kb_run(&r, "config", "--config", yaml, NULL);
	cr_expect_eq(r.status, 0, "the listed YAML does not load back: %s", r.err);
}
