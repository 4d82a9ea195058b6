/* test_agent_env.c — an agent's index from the launcher's environment
 * (deploy/src/agent_env.c), with a stand-in for getenv. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agent_env.h"

/* The environment the next lookup sees: NAME=VALUE strings, NULL-ended. */
static const char *const *fake_env;

static char *fake_get(const char *name)
{
	size_t len = strlen(name);

	for (int i = 0; fake_env && fake_env[i]; i++)
		if (!strncmp(fake_env[i], name, len) && fake_env[i][len] == '=')
			return (char *)fake_env[i] + len + 1;
	return NULL;
}

static enum rt_err lookup(const char *const *env, struct kb_agent_index *out)
{
	fake_env = env;
	memset(out, 0xff, sizeof(*out));
	return kb_agent_env_index(fake_get, out);
}

Test(agent_env, each_launcher_variable_gives_rank_and_size, .timeout = 5)
{
	static const char *const mpi[] = { "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", NULL };
	static const char *const slurm[] = { "SLURM_PROCID=1", "SLURM_NTASKS=4", NULL };
	static const char *const k8s[] = { "JOB_COMPLETION_INDEX=7", NULL };
	struct kb_agent_index ix;

	cr_assert_eq(lookup(mpi, &ix), RT_EOK);
	cr_expect_eq(ix.index, 2);
	cr_expect_eq(ix.world_size, 3);
	cr_expect_str_eq(ix.source, "OMPI_COMM_WORLD_RANK");
	cr_assert_eq(lookup(slurm, &ix), RT_EOK);
	cr_expect_eq(ix.index, 1);
	cr_expect_eq(ix.world_size, 4);
	cr_assert_eq(lookup(k8s, &ix), RT_EOK);
	cr_expect_eq(ix.index, 7);
	cr_expect_eq(ix.world_size, 0, "an Indexed Job names no size");
}

/* srun --mpi=pmix sets PMIX_RANK and SLURM_NTASKS, no OMPI_*: without the
 * size an MPMD step (coordinator as task 0) would be mapped one host off. */
Test(agent_env, pmix_rank_under_srun_takes_the_size_from_slurm, .timeout = 5)
{
	static const char *const env[] = { "PMIX_RANK=3", "SLURM_NTASKS=4", NULL };
	static const char *const old_slurm[] = { "SLURM_PROCID=1", "SLURM_NPROCS=2", NULL };
	struct kb_agent_index ix;

	cr_assert_eq(lookup(env, &ix), RT_EOK);
	cr_expect_str_eq(ix.source, "PMIX_RANK");
	cr_expect_eq(ix.index, 3);
	cr_expect_eq(ix.world_size, 4);
	cr_assert_eq(lookup(old_slurm, &ix), RT_EOK);
	cr_expect_eq(ix.world_size, 2, "older Slurm names the size SLURM_NPROCS");
}

/* mpirun inside a Slurm allocation: the batch step's SLURM_PROCID=0 is
 * inherited by every process; mpirun's own rank must win. */
Test(agent_env, mpirun_inside_slurm_uses_the_mpi_rank, .timeout = 5)
{
	static const char *const env[] = { "SLURM_PROCID=0", "SLURM_NTASKS=1",
					   "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", NULL };
	struct kb_agent_index ix;

	cr_assert_eq(lookup(env, &ix), RT_EOK);
	cr_expect_eq(ix.index, 2);
	cr_expect_eq(ix.world_size, 3);
}

Test(agent_env, bad_values_are_refused_naming_the_variable, .timeout = 5)
{
	static const char *const bad[][3] = {
		{ "OMPI_COMM_WORLD_RANK=x", NULL, "OMPI_COMM_WORLD_RANK" },
		{ "JOB_COMPLETION_INDEX=", NULL, "JOB_COMPLETION_INDEX" },
		{ "SLURM_PROCID=-1", NULL, "SLURM_PROCID" },
		{ "SLURM_PROCID=0", "SLURM_NTASKS=0", "SLURM_NTASKS" },
		{ "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=3", "not below" },
		{ "PMIX_RANK=1", "SLURM_NTASKS=abc", "SLURM_NTASKS" },
	};
	struct kb_agent_index ix;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *env[] = { bad[i][0], bad[i][1], NULL };

		cr_expect_eq(lookup(env, &ix), RT_EINVAL, "%s %s accepted", bad[i][0],
			     bad[i][1] ? bad[i][1] : "");
		cr_expect(strstr(rt_last_error(), bad[i][2]), "%s: %s", bad[i][0], rt_last_error());
		cr_expect(!strchr(rt_last_error(), '\n'), "one line: %s", rt_last_error());
	}
}

Test(agent_env, none_set_is_not_found, .timeout = 5)
{
	static const char *const env[] = { "PATH=/bin", "SLURM_NTASKS=2", NULL };
	struct kb_agent_index ix;

	cr_expect_eq(lookup(env, &ix), RT_ENOTFOUND);
	cr_expect(strstr(rt_last_error(), "--index"), "%s", rt_last_error());
}
