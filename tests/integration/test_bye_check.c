/* test_bye_check.c — issue 20 item 1 (ADR 0050): an agent's BYE lists the
 * files it shipped and the coordinator compares the list with what
 * arrived. An agent made to lie (the test hook KB_TEST_BYE: one byte more
 * claimed, or a file left out) must fail the run with one line naming the
 * host and the file, and the agent must exit 1 naming what the
 * coordinator never confirmed; nothing is left and no result is
 * committed. Loopback, two agents as processes, ephemeral keys. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

static void lying_agent(const char *how, const char *coordinator_says)
{
	char base[256], out[300], file[300], coord[64], idx[2][8], err[3][300], env[64];
	char *run[48];
	char *lie[] = { env, NULL };
	pid_t pid[3];
	int rc[3];

	kb_tmpdir(base, sizeof(base), how);
	snprintf(out, sizeof(out), "%s/out", base);
	snprintf(file, sizeof(file), "%s/hosts.yaml", base);
	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", mh_free_port());
	snprintf(env, sizeof(env), "KB_TEST_BYE=%s", how);
	mh_write_hosts(file, coord, "  - ranks: [0, 1]\n  - ranks: [2, 3]\n");
	mh_ring_argv(run, out, "kv", "none", file, NULL);
	for (int i = 0; i < 3; i++)
		snprintf(err[i], sizeof(err[i]), "%s/%d.err", base, i);
	pid[0] = mh_spawn(NULL, 0, run, NULL, err[0]);
	for (int i = 0; i < 2; i++) {
		char *agent[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator", coord,
				  (char *)"--index", idx[i], NULL };

		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		pid[i + 1] = mh_spawn(NULL, 0, agent, i == 1 ? lie : NULL, err[i + 1]);
	}
	for (int i = 0; i < 3; i++)
		rc[i] = mh_wait(pid[i], 90);
	cr_expect_eq(rc[0], 1, "the coordinator exited %d: %s", rc[0], kb_slurp_stderr(err[0]));
	cr_expect_geq(mh_lines_with(kb_slurp_stderr(err[0]), coordinator_says), 1,
		      "the coordinator's line: %s", kb_slurp_stderr(err[0]));
	cr_expect_eq(rc[2], 1, "the lying agent exited %d: %s", rc[2], kb_slurp_stderr(err[2]));
	cr_expect_geq(mh_lines_with(kb_slurp_stderr(err[2]), "did not confirm"), 1,
		      "the lying agent's line: %s", kb_slurp_stderr(err[2]));
	cr_expect_geq(mh_lines_with(kb_slurp_stderr(err[2]), "this host's BYE"), 1,
		      "the lying agent's line: %s", kb_slurp_stderr(err[2]));
	cr_expect_neq(rc[1], -1, "the honest agent did not end: %s", kb_slurp_stderr(err[1]));
	{
		char summary[400];

		snprintf(summary, sizeof(summary), "%s/summary.json", out);
		cr_expect_neq(access(summary, F_OK), 0, "a failed run committed its results");
	}
	cr_expect_eq(mh_leftovers(pid, 3), 0, "socket or staging folders left");
}

/* Host 1's BYE claims one byte more of its first file than it sent. */
Test(bye_check, a_bye_claiming_more_bytes_fails_naming_the_file, .timeout = 120)
{
	lying_agent("bytes", "host 1 (ranks 2, 3): output file");
}

/* Host 1's BYE leaves a file it sent out of its list. */
Test(bye_check, a_bye_leaving_a_file_out_fails_naming_it, .timeout = 120)
{
	lying_agent("drop", "but its agent's BYE does not list it");
}
