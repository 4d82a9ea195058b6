/* test_install.c — the author kit (issue 10 item 7): after `make install`
 * (the Makefile stages one into BUILD/stage for this test), a kernel and an
 * engine plug-in build outside the tree with `pkg-config --cflags
 * kernbench` alone and run in the installed binary; the plug-in takes and
 * validates parameters of its own; a plug-in of another ABI is refused with
 * one clear line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kb_engine_plugin.h"

static const char *stage(void)
{
	const char *s = getenv("KB_STAGE");

	cr_assert(s, "KB_STAGE unset: run through `make integration`");
	return s;
}

/* Compiles `src` into `so` with the installed pkg-config flags only. */
static void build_outside(const char *src, const char *so)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "cc -std=c17 -O2 -Wall -Wextra -Werror -fPIC -shared "
		 "$(PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config --cflags kernbench) -o %s %s",
		 stage(), so, src);
	cr_assert_eq(system(cmd), 0, "could not build outside the tree: %s", cmd);
}

/* Copies a source file out of the tree, so no tree include path helps. */
static void copy_out(const char *rel, const char *dst)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cp %s/%s %s", getenv("KB_ROOT"), rel, dst);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* Runs the installed binary. */
static void run_installed(struct kb_result *r, const char *const args[])
{
	char bin[600], *test_bin = strdup(kb_bin()), *argv[32];
	int n = 0;

	snprintf(bin, sizeof(bin), "%s/bin/kernbench", stage());
	argv[n++] = (char *)"kernbench";
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	setenv("KB_BIN", bin, 1);
	kb_runv(r, argv);
	setenv("KB_BIN", test_bin, 1);
	free(test_bin);
}

Test(install, kernel_and_plugin_build_with_pkg_config_alone, .timeout = 180)
{
	char dir[256], src[400], so[400], plug_src[400], plug[400], out[400], model[500],
		kernel[500];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "install");
	snprintf(src, sizeof(src), "%s/probe.c", dir);
	snprintf(so, sizeof(so), "%s/probe.so", dir);
	snprintf(plug_src, sizeof(plug_src), "%s/cycles.c", dir);
	snprintf(plug, sizeof(plug), "%s/cycles.so", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	copy_out("kernel_host/examples/dma_probe.c", src);
	copy_out("engines/plugins/gemm_cycles.c", plug_src);
	build_outside(src, so);
	build_outside(plug_src, plug);
	snprintf(kernel, sizeof(kernel), "%s:dma_probe", so);
	run_installed(&r, (const char *const[]){ "run", kernel, "--quiet", "--out", out, NULL });
	cr_expect_eq(r.status, 0, "installed kernbench with an outside kernel: %s", r.err);
	snprintf(model, sizeof(model), "gemm.model=%s", plug);
	run_installed(&r, (const char *const[]){ "run", "gemm", "--quiet", "--out", out, "--set",
						 model, "--set", "gemm.params=cycles=900", NULL });
	cr_expect_eq(r.status, 0, "outside plug-in with its parameter: %s", r.err);
	run_installed(&r, (const char *const[]){ "run", "gemm", "--quiet", "--out", out, "--set",
						 model, "--set", "gemm.params=cycles=0", NULL });
	cr_expect_eq(r.status, 2); /* found before any daemon */
	cr_expect(strstr(r.err, "cycles='0'"), "the plug-in's own check: %s", r.err);
	run_installed(&r, (const char *const[]){ "run", "gemm", "--quiet", "--out", out, "--set",
						 model, "--set", "gemm.params=speed=2", NULL });
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "unknown parameter 'speed'"), "%s", r.err);
}

Test(install, plugin_parameters_set_the_latency, .timeout = 120)
{
	const char *plugins = getenv("KB_PLUGINS");
	char a[256], b[256], model[600], pa[400], pb[400];
	struct kb_result r;
	char *la, *lb, *ga, *gb;
	unsigned long long s0, e0, s1, e1;

	cr_assert(plugins);
	kb_tmpdir(a, sizeof(a), "params-900");
	kb_tmpdir(b, sizeof(b), "params-1800");
	snprintf(model, sizeof(model), "gemm.model=%s/gemm_cycles.so", plugins);
	kb_run(&r, "run", "gemm", "--quiet", "--out", a, "--set", model, "--set",
	       "gemm.params=cycles=900", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", "gemm", "--quiet", "--out", b, "--set", model, "--set",
	       "gemm.params=cycles=1800", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(pa, sizeof(pa), "%s/op_log.jsonl", a);
	snprintf(pb, sizeof(pb), "%s/op_log.jsonl", b);
	la = kb_slurp(pa, NULL);
	lb = kb_slurp(pb, NULL);
	cr_assert(la && lb);
	ga = strstr(la, "\"engine\":\"gemm\"");
	gb = strstr(lb, "\"engine\":\"gemm\"");
	cr_assert(ga && gb, "no GEMM stage in the op log");
	while (ga > la && ga[-1] != '\n')
		ga--;
	while (gb > lb && gb[-1] != '\n')
		gb--;
	cr_assert(sscanf(ga, "{\"start_ps\":%llu,\"end_ps\":%llu", &s0, &e0) == 2);
	cr_assert(sscanf(gb, "{\"start_ps\":%llu,\"end_ps\":%llu", &s1, &e1) == 2);
	cr_expect_eq(2 * (e0 - s0), e1 - s1, "cycles=1800 should take twice cycles=900");
	free(la);
	free(lb);
}

Test(install, plugin_of_another_abi_is_one_clear_line, .timeout = 120)
{
	char dir[256], src[400], so[400], model[500];
	struct kb_result r;
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "abi");
	snprintf(src, sizeof(src), "%s/old.c", dir);
	snprintf(so, sizeof(so), "%s/old.so", dir);
	f = fopen(src, "w");
	cr_assert(f);
	fputs("#include \"kb_engine_plugin.h\"\n"
	      "static int lat(const void *s, const struct kb_stage_info *st, uint64_t *c,\n"
	      "               char *e, size_t n) { (void)s; (void)st; (void)e; (void)n;\n"
	      "               *c = 1; return 0; }\n"
	      "const struct kb_engine_plugin kb_engine_plugin = {\n"
	      "	.abi = KB_ENGINE_PLUGIN_ABI + 1, .engine = KB_ENGINE_GEMM,\n"
	      "	.name = \"future\", .latency = lat };\n", f);
	fclose(f);
	build_outside(src, so);
	snprintf(model, sizeof(model), "gemm.model=%s", so);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--set", model, NULL);
	cr_expect_eq(r.status, 2); /* found before any daemon */
	{
		char want[96];

		snprintf(want, sizeof(want), "plug-in ABI %u, this kernbench expects 2 to %u",
			 KB_ENGINE_PLUGIN_ABI + 1, KB_ENGINE_PLUGIN_ABI);
		cr_expect(strstr(r.err, want), "%s", r.err);
	}
	cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "more than one line: %s", r.err);
}

/* Issue 18 item 1: the installed binary finds the chip presets `make
 * install` copied to share/kernbench/machines, wherever the install tree
 * is (here: a copy of the stage away from the source tree, so the build
 * tree's deploy/configs/machines cannot answer instead). */
Test(install, an_installed_binary_finds_the_machine_presets, .timeout = 60)
{
	char dir[256], cmd[1200], bin[400], want[600];
	struct kb_result r;
	char *test_bin = strdup(kb_bin());

	kb_tmpdir(dir, sizeof(dir), "presets");
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/inst && cp -r %s/bin %s/share %s/inst/", dir,
		 stage(), stage(), dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(bin, sizeof(bin), "%s/inst/bin/kernbench", dir);
	setenv("KB_BIN", bin, 1);
	kb_run(&r, "config", "--machine", "tpu_v5e", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "%s/inst/bin/../share/kernbench/machines/tpu_v5e.yaml", dir);
	cr_expect(strstr(r.out, want), "the preset read from the install tree: %.400s", r.out);
	cr_expect(strstr(r.out, "preset: \"tpu_v5e\""), "%.400s", r.out);
	/* every preset the source tree has is installed */
	kb_run(&r, "config", "--machine", "no_such_chip", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "ascend910b, tpu_v5e, trn2"), "%s", r.err);
	setenv("KB_BIN", test_bin, 1);
	free(test_bin);
}
