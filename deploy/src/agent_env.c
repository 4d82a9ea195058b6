/* agent_env.c — an agent's index from its launcher's environment.
 *
 * Each launcher names its process's rank in one variable and the world
 * size in another; some set several (srun --mpi=pmix sets PMIX_RANK and
 * SLURM_PROCID, mpirun inside a Slurm allocation inherits the batch step's
 * SLURM_PROCID=0 beside its own OMPI_COMM_WORLD_RANK). The most specific
 * launcher's rank wins, and its size is taken from the first size variable
 * that is set among those that go with that launcher. */
#include "agent_env.h"

#include <stddef.h>

#include "rt/job.h"

/* A rank variable and, in order, the variables that may carry its size. */
struct launcher_vars {
	const char *rank;
	const char *sizes[3];
};

static const struct launcher_vars launchers[] = {
	{ "OMPI_COMM_WORLD_RANK", { "OMPI_COMM_WORLD_SIZE", NULL } },
	/* PMIx under mpirun (OMPI_*) or srun --mpi=pmix (SLURM_NTASKS) */
	{ "PMIX_RANK", { "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", NULL } },
	/* SLURM_NPROCS: the name older Slurm releases use */
	{ "SLURM_PROCID", { "SLURM_NTASKS", "SLURM_NPROCS", NULL } },
	{ "JOB_COMPLETION_INDEX", { NULL } },
};

static enum rt_err number(char *(*get)(const char *name), const char *name, uint64_t min,
			  uint32_t *out)
{
	const char *text = get(name);
	uint64_t v;

	if (rt_parse_u64(text, min, UINT32_MAX - 1, &v) != RT_PARSE_OK)
		return rt_fail(RT_EINVAL, "agent: %s='%.40s' is not a number%s", name, text,
			       min ? " of at least 1" : "");
	*out = (uint32_t)v;
	return RT_EOK;
}

/* The world size of launcher `l`, 0 when none of its size variables is
 * set; the rank must lie below it. */
static enum rt_err world_size(char *(*get)(const char *name), const struct launcher_vars *l,
			      struct kb_agent_index *out)
{
	for (size_t s = 0; s < sizeof(l->sizes) / sizeof(l->sizes[0]) && l->sizes[s]; s++) {
		enum rt_err err;

		if (!get(l->sizes[s]))
			continue;
		err = number(get, l->sizes[s], 1, &out->world_size);
		if (!err && out->index >= out->world_size)
			err = rt_fail(RT_EINVAL, "agent: %s=%u is not below %s=%u", l->rank, out->index,
				      l->sizes[s], out->world_size);
		return err;
	}
	return RT_EOK;
}

enum rt_err kb_agent_env_index(char *(*get)(const char *name), struct kb_agent_index *out)
{
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const struct launcher_vars *l = &launchers[i];
		enum rt_err err;

		if (!get(l->rank))
			continue;
		out->source = l->rank;
		out->world_size = 0;
		err = number(get, l->rank, 0, &out->index);
		return err ? err : world_size(get, l, out);
	}
	return rt_fail(RT_ENOTFOUND, "agent: no --index and none of OMPI_COMM_WORLD_RANK, PMIX_RANK, "
		       "SLURM_PROCID, JOB_COMPLETION_INDEX is set");
}
