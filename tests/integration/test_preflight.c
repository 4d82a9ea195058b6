/* test_preflight.c — issue 22 item 7: mistakes with model plug-ins and
 * kernel objects are found before any daemon starts: a bare `my.so`
 * (write ./my.so), a missing file, a plug-in of another class, a
 * parameter its create refuses: exit 2, one line; a plug-in whose loading
 * crashes, exits or hangs: exit 1, one line. No daemon runs: the launcher
 * has no child left and the output folder gets no result. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* A public-ABI GEMM plug-in (kb_engine_plugin.h) with `extra` C code. */
static void build_plugin(const char *dir, const char *name, const char *extra, char *so,
			 size_t cap)
{
	const char *root = getenv("KB_ROOT");
	char src[600], cmd[2400];
	FILE *f;

	cr_assert(root, "KB_ROOT is set by `make integration`");
	snprintf(src, sizeof(src), "%s/%s.c", dir, name);
	snprintf(so, cap, "%s/%s.so", dir, name);
	f = fopen(src, "w");
	cr_assert_not_null(f);
	fprintf(f, "#include <stdlib.h>\n#include <unistd.h>\n#include \"kb_engine_plugin.h\"\n"
		   "static int lat(const void *s, const struct kb_stage_info *st, uint64_t *c,\n"
		   "               char *e, size_t n) { (void)s; (void)st; (void)e; (void)n;\n"
		   "               *c = 5; return 0; }\n"
		   "const struct kb_engine_plugin kb_engine_plugin = {\n"
		   "	.abi = KB_ENGINE_PLUGIN_ABI, .engine = KB_ENGINE_GEMM,\n"
		   "	.name = \"probe\", .latency = lat };\n%s\n", extra);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -std=c17 -O1 -fPIC -shared -I%s/engines/include -o %s %s",
		 root, so, src);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* Runs gemm with `set` (and `set2`) in `cwd`; the result. */
static void run_in(struct kb_result *r, const char *cwd, const char *out, const char *set,
		   const char *set2)
{
	char here[1024];

	cr_assert_not_null(getcwd(here, sizeof(here)));
	cr_assert_eq(chdir(cwd), 0);
	kb_run(r, "run", "gemm", "--quiet", "--out", out, "--set", set, set2 ? "--set" : NULL,
	       set2, NULL);
	cr_assert_eq(chdir(here), 0);
}

static void expect_early(const struct kb_result *r, int status, const char *phrase,
			 const char *out)
{
	char path[600];

	cr_expect_eq(r->status, status, "exit %d: %s", r->status, r->err);
	cr_expect(strstr(r->err, phrase), "no '%s' in: %s", phrase, r->err);
	cr_expect_eq(kb_count_lines(r->err), 1, "%s", r->err);
	snprintf(path, sizeof(path), "%s/summary.json", out);
	cr_expect(access(path, F_OK) != 0, "a result in %s", out);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

Test(preflight, usage_mistakes_exit_2_before_any_daemon, .timeout = 120)
{
	char dir[256], out[300], ok[300], so[600], set[700];
	struct kb_result r;

	kb_adopt_orphans();
	kb_tmpdir(dir, sizeof(dir), "preflight");
	snprintf(ok, sizeof(ok), "%s/ok", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	build_plugin(dir, "good", "", so, sizeof(so));
	/* a bare name: dlopen would not look in this folder */
	run_in(&r, dir, out, "gemm.model=good.so", NULL);
	expect_early(&r, 2, "write ./good.so", out);
	/* written with its folder it runs */
	run_in(&r, dir, ok, "gemm.model=./good.so", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(set, sizeof(set), "math.model=%s", so);
	run_in(&r, dir, out, set, NULL);
	expect_early(&r, 2, "models a gemm engine, not math", out);
	snprintf(set, sizeof(set), "gemm.model=%s/missing.so", dir);
	run_in(&r, dir, out, set, NULL);
	expect_early(&r, 2, "No such file or directory", out);
	/* a plug-in without create takes no parameters */
	snprintf(set, sizeof(set), "gemm.model=%s", so);
	run_in(&r, dir, out, set, "gemm.params=cycles=3");
	expect_early(&r, 2, "takes no parameters", out);
	/* the plug-in's own create refuses a value */
	snprintf(set, sizeof(set), "gemm.model=%s/gemm_cycles.so", getenv("KB_PLUGINS"));
	run_in(&r, dir, out, set, "gemm.params=cycles=0");
	expect_early(&r, 2, "cycles='0'", out);
	/* a kernel object's bare name */
	cr_assert_eq(chdir(getenv("KB_PLUGINS")), 0);
	kb_run(&r, "run", "tl_example.so:tl_example", "--quiet", "--out", out, NULL);
	expect_early(&r, 2, "write ./tl_example.so:tl_example", out);
}

/* User code that misbehaves while loading is the plug-in's failure (exit
 * 1), found in a child process the launcher outlives. */
Test(preflight, plugin_that_crashes_exits_or_hangs_loading, .timeout = 120)
{
	static const struct {
		const char *name, *code, *phrase;
	} bad[] = {
		{ "crash", "__attribute__((constructor)) static void c(void) { abort(); }",
		  "crashed while loading" },
		{ "quit", "__attribute__((constructor)) static void c(void) { _exit(0); }",
		  "exited with status 0 while loading" },
		{ "hang", "__attribute__((constructor)) static void c(void) { for (;;) pause(); }",
		  "did not finish loading" },
	};
	char dir[256], out[300], so[600], set[700];
	struct kb_result r;

	kb_adopt_orphans();
	kb_tmpdir(dir, sizeof(dir), "preflight-bad");
	snprintf(out, sizeof(out), "%s/out", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		build_plugin(dir, bad[i].name, bad[i].code, so, sizeof(so));
		snprintf(set, sizeof(set), "gemm.model=%s", so);
		run_in(&r, dir, out, set, NULL);
		expect_early(&r, 1, bad[i].phrase, out);
	}
}
