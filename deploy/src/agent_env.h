/* agent_env.h — which host an agent is, from the environment of the
 * launcher that started it (mpirun, srun, a Kubernetes Indexed Job). */
#ifndef KB_AGENT_ENV_H
#define KB_AGENT_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/err.h"

struct kb_agent_index {
	uint32_t index;      /* the launcher's rank of this process */
	uint32_t world_size; /* its world size, 0 when it does not say */
	const char *source;  /* the variable the index came from */
};

/* Looks, in order, at OMPI_COMM_WORLD_RANK (size OMPI_COMM_WORLD_SIZE),
 * PMIX_RANK (size OMPI_COMM_WORLD_SIZE), SLURM_PROCID (size SLURM_NTASKS)
 * and JOB_COMPLETION_INDEX (no size). `get` is getenv or a test's stand-in.
 * RT_ENOTFOUND when none is set; RT_EINVAL, naming the variable, when one
 * is not a number. The raw rank is sent to the coordinator, which maps it
 * (a world of hosts + 1 means the coordinator is rank 0). */
enum rt_err kb_agent_env_index(char *(*get)(const char *name), struct kb_agent_index *out);

#endif
