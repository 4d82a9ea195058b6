/* test_pipelining.c — the ping-pong store of docs/kernels.md: same result
 * as the built-in gemm's blocked form (`--arg blocked=1`, each block's
 * store waited for at its scope's end), and faster by the documented
 * margin. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

Test(pipelining, ping_pong_store_is_faster_and_equal, .timeout = 120)
{
	const char *plugins = getenv("KB_PLUGINS");
	char plain[256], pp[256], so[600], fa[400], fb[400];
	struct kb_result r;
	uint64_t t_plain, t_pp;

	cr_assert(plugins, "KB_PLUGINS unset: run through `make integration`");
	kb_tmpdir(plain, sizeof(plain), "gemm-plain");
	kb_tmpdir(pp, sizeof(pp), "gemm-pingpong");
#define SHAPE "--arg", "m=1024", "--arg", "k=128", "--arg", "n=512"
	kb_run(&r, "run", "gemm", SHAPE, "--arg", "blocked=1", "--mode", "data", "--quiet", "--out",
	       plain, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(so, sizeof(so), "%s/gemm_pingpong.so:gemm_pingpong", plugins);
	kb_run(&r, "run", so, SHAPE, "--mode", "data", "--quiet", "--out", pp, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(fa, sizeof(fa), "%s/c.npy", plain);
	snprintf(fb, sizeof(fb), "%s/c.npy", pp);
	cr_expect(kb_same_file(fa, fb), "ping-pong changed the result");
	t_plain = kb_summary_u64(plain, "latency_ps");
	t_pp = kb_summary_u64(pp, "latency_ps");
	cr_expect_gt(t_plain * 10, t_pp * 14, "gain %llu / %llu ps is below 1.4x",
		     (unsigned long long)t_plain, (unsigned long long)t_pp);
}
