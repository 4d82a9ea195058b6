/* test_kernel_so.c — a kernel compiled in the test, against the public
 * header alone, runs exactly like the same source built by the Makefile. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

Test(kernel_so, kernel_compiled_in_the_test_matches_the_prebuilt_one, .timeout = 120)
{
	const char *root = getenv("KB_ROOT"), *plugins = getenv("KB_PLUGINS");
	char base[256], cmd[2048], so[600], a[700], b[700], fa[800], fb[800];
	struct kb_result r;

	cr_assert(root && plugins, "KB_ROOT and KB_PLUGINS are set by `make integration`");
	kb_tmpdir(base, sizeof(base), "kernel-so");
	snprintf(so, sizeof(so), "%s/probe.so", base);
	/* what a kernel author does: the public header, nothing else */
	snprintf(cmd, sizeof(cmd),
		 "cc -std=c17 -O2 -Wall -Wextra -Werror -fPIC -shared -I%s/kernel_host/include "
		 "-o %s %s/kernel_host/examples/dma_probe.c",
		 root, so, root);
	cr_assert_eq(system(cmd), 0, "could not compile the kernel: %s", cmd);
	snprintf(a, sizeof(a), "%s/in-test", base);
	snprintf(b, sizeof(b), "%s/prebuilt", base);
	snprintf(cmd, sizeof(cmd), "%s:dma_probe", so);
	kb_run(&r, "run", cmd, "--quiet", "--mode", "data", "--out", a, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(cmd, sizeof(cmd), "%s/dma_probe.so:dma_probe", plugins);
	kb_run(&r, "run", cmd, "--quiet", "--mode", "data", "--out", b, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(fa, sizeof(fa), "%s/op_log.jsonl", a);
	snprintf(fb, sizeof(fb), "%s/op_log.jsonl", b);
	cr_expect(kb_same_file(fa, fb), "op logs differ");
	snprintf(fa, sizeof(fa), "%s/trace.json", a);
	snprintf(fb, sizeof(fb), "%s/trace.json", b);
	cr_expect(kb_same_file(fa, fb), "traces differ");
}

Test(kernel_so, missing_symbol_in_a_shared_object_is_one_clear_line, .timeout = 60)
{
	const char *plugins = getenv("KB_PLUGINS");
	char so[600];
	struct kb_result r;

	snprintf(so, sizeof(so), "%s/dma_probe.so:no_such_kernel", plugins ? plugins : "build/plugins");
	kb_run(&r, "run", so, "--quiet", NULL);
	cr_expect_neq(r.status, 0);
	cr_expect(strstr(r.err, "no_such_kernel"), "%s", r.err);
}
