/* test_build.c — what the release binary leaves out (issue 9, layering):
 * the KB_FAULT fault-injection hook and the test_* kernels exist only in
 * kernbench-test, the binary the suites run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *release_bin(void)
{
	const char *bin = getenv("KB_RELEASE_BIN");

	cr_assert(bin, "KB_RELEASE_BIN unset: run through `make integration`");
	return bin;
}

/* The harness runs $KB_BIN: point it at the release binary for one run. */
static void run_release(struct kb_result *r, const char *dir, const char *workload)
{
	char *test_bin = strdup(kb_bin());

	cr_assert(test_bin);
	setenv("KB_BIN", release_bin(), 1);
	kb_run(r, "run", workload, "--quiet", "--out", dir, "--arg", "components=3", NULL);
	setenv("KB_BIN", test_bin, 1);
	free(test_bin);
}

Test(release_build, ignores_the_fault_hook, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "release-fault");
	setenv("KB_FAULT", "crash@t001", 1);
	run_release(&r, dir, "traffic");
	unsetenv("KB_FAULT");
	cr_expect_eq(r.status, 0, "release binary obeyed KB_FAULT: %s", r.err);
	/* the test binary does crash there: the hook is real */
	setenv("KB_FAULT", "crash@t001", 1);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--arg", "components=3", NULL);
	unsetenv("KB_FAULT");
	cr_expect_neq(r.status, 0, "kernbench-test ignored KB_FAULT");
}

/* nor the allocation-failure and fault-point hooks (rt/faults.h) */
Test(release_build, ignores_allocation_faults_and_fault_points, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "release-alloc");
	setenv("KB_FAULT_ALLOC", "1", 1);
	run_release(&r, dir, "traffic");
	unsetenv("KB_FAULT_ALLOC");
	cr_expect_eq(r.status, 0, "release binary obeyed KB_FAULT_ALLOC: %s", r.err);
	setenv("KB_FAULT", "einval@merge", 1);
	run_release(&r, dir, "traffic");
	unsetenv("KB_FAULT");
	cr_expect_eq(r.status, 0, "release binary obeyed KB_FAULT=einval@merge: %s", r.err);
}

Test(release_build, has_no_test_kernels, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "release-kernels");
	run_release(&r, dir, "test_ops");
	cr_expect_neq(r.status, 0, "release binary ran test_ops");
	kb_run(&r, "run", "test_flash", "--quiet", "--out", dir, "--arg", "tiles=2", NULL);
	cr_expect_eq(r.status, 0, "kernbench-test lacks test_flash: %s", r.err);
}

Test(release_build, make_without_dependencies_says_make_deps, .timeout = 60)
{
	const char *root = getenv("KB_ROOT");
	char cmd[1200], out[2048] = "";
	FILE *p;
	size_t n;

	cr_assert(root, "KB_ROOT unset: run through `make integration`");
	/* a library pkg-config cannot find stands for a fresh machine */
	snprintf(cmd, sizeof(cmd),
		 "make -C %s --no-print-directory -n PKGS=kb-no-such-library all 2>&1", root);
	p = popen(cmd, "r");
	cr_assert(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	cr_expect_neq(pclose(p), 0, "make went ahead: %s", out);
	cr_expect(strstr(out, "make deps"), "no hint to run make deps: %s", out);
	cr_expect(strstr(out, "missing build dependencies"), "%s", out);
}
