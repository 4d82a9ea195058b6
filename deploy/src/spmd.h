/* spmd.h — one `kernbench run` command started N times by a parallel
 * launcher (OpenMPI's mpirun, Slurm's srun): a run across hosts with no
 * hosts file (ADR 0064).
 *
 *     mpirun -n 3 kernbench run ring_attention --ranks 6 ...
 *     srun -N 3 --ntasks-per-node=1 kernbench run ring_attention --ranks 6 ...
 *
 * The engine's process 0 is the coordinator and also hosts ranks (its
 * own agent, a child process); process i > 0 is the agent of host i.
 * Host i has ranks [i*R/N, (i+1)*R/N): contiguous blocks, so N <= R.
 * Where the coordinator listens comes from the engine's environment (no
 * MPI library): loopback and a port derived from the job id when every
 * process is on one node; --coordinator tcp://ADDR:PORT or the engine's
 * launch-node address across nodes; or a rendezvous folder on shared
 * storage (--rendezvous DIR) where process 0 writes its address. Keys:
 * --keys FILE on every process, or drawn by process 0 and left (client
 * side only) in a private folder on one node or in the rendezvous folder. */
#ifndef KB_SPMD_H
#define KB_SPMD_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "hosts.h"
#include "rt/err.h"
#include "rt/job.h"

/* struct kb_spmd_opts, the run options that shape an SPMD launch: cli.h */

/* What the engine says about this process. */
struct kb_spmd {
	uint32_t rank, size;
	const char *engine;      /* "mpirun" or "srun" */
	char job_id[96];         /* the engine's job (file names, the port) */
	bool one_node;           /* every process on this node */
	char launch_addr[64];    /* SLURM_LAUNCH_NODE_IPADDR, or "" */
};

/* Reads the engine's variables (`get`: getenv or a test's stand-in).
 * RT_ENOTFOUND when this is no SPMD launch: no engine, a world of one, a
 * Slurm batch shell (no step), or KB_SPMD=0 (what a sweep's points get);
 * RT_EINVAL naming the variable when one is not a number. */
enum rt_err kb_spmd_detect(char *(*get)(const char *name), struct kb_spmd *s);
/* The port process 0 listens on without a rendezvous: 20000 + FNV-1a of
 * the job id modulo 10000 (below the ephemeral range). */
unsigned kb_spmd_port(const char *job_id);
/* Fills *h with `size` hosts of contiguous rank blocks of `ranks`. */
enum rt_err kb_spmd_layout(uint32_t size, uint32_t ranks, struct kb_hosts *h);
/* Runs this process's part: the coordinator (and its host's agent) for
 * rank 0, an agent otherwise. Returns the exit status. */
int kb_spmd_run(const struct kb_spmd *s, const struct kb_spmd_opts *o, struct rt_job *job,
		int argc, char **argv);

#endif
