/* agent_env.c — an agent's index from its launcher's environment. */
#include "agent_env.h"

#include <stddef.h>

#include "rt/job.h"

static enum rt_err number(char *(*get)(const char *name), const char *name, uint32_t *out)
{
	const char *text = get(name);
	uint64_t v;

	if (rt_parse_u64(text, 0, UINT32_MAX - 1, &v) != RT_PARSE_OK)
		return rt_fail(RT_EINVAL, "agent: %s='%.40s' is not a number", name, text);
	*out = (uint32_t)v;
	return RT_EOK;
}

enum rt_err kb_agent_env_index(char *(*get)(const char *name), struct kb_agent_index *out)
{
	static const char *const vars[][2] = {
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMIX_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
		{ "JOB_COMPLETION_INDEX", NULL },
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		enum rt_err err;

		if (!get(vars[i][0]))
			continue;
		out->source = vars[i][0];
		out->world_size = 0;
		err = number(get, vars[i][0], &out->index);
		if (!err && vars[i][1] && get(vars[i][1]))
			err = number(get, vars[i][1], &out->world_size);
		return err;
	}
	return rt_fail(RT_ENOTFOUND, "agent: no --index and none of OMPI_COMM_WORLD_RANK, PMIX_RANK, "
		       "SLURM_PROCID, JOB_COMPLETION_INDEX is set");
}
