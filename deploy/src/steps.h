/* steps.h — the steps of a program (tl_program_run) in summary.json and
 * the report: what each host recorded per step (its interval, dispatch
 * cycles, commands, IPCQ bytes: the steps.RANK.PE parts) plus each
 * engine's busy time inside those intervals, taken from the op log as it
 * is merged. */
#ifndef KB_STEPS_H
#define KB_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"
#include "rt/job.h"
#include "rt/json.h"
#include "rt/topology.h"

#define KB_STEP_ENGINES 4 /* dma_read, dma_write, gemm, math */

struct kb_step {
	char name[64];
	char kernel[256];
	uint64_t start_ps, end_ps;   /* first start, last end over the PEs */
	uint64_t dispatch_cycles, commands, ipcq_bytes; /* summed over PEs */
	uint64_t busy_ps[KB_STEP_ENGINES];    /* summed over PEs */
	uint64_t busiest_ps[KB_STEP_ENGINES]; /* the busiest PE's */
};

struct kb_steps {
	uint32_t n;               /* steps (0: the run was no program) */
	struct kb_step *steps;
	uint32_t n_pes;           /* ranks x pes */
	uint32_t pes_per_rank;
	uint32_t n_cap;           /* steps room per PE in pe_start, pe_end */
	uint64_t *pe_start, *pe_end; /* [pe][step]: each PE's intervals */
	uint64_t *busy;           /* [step][pe][engine] */
	uint64_t *chan_end;       /* [pe][engine]: busy time counted up to */
};

/* Reads every host's steps part; out->n = 0 when there is none. */
enum rt_err kb_steps_read(const struct rt_job *job, const struct rt_topology *topo,
			  struct kb_steps *out);
/* One merged op-log record (its interval, its component's place and
 * engine), in start order. */
void kb_steps_record(struct kb_steps *s, uint64_t start, uint64_t end, uint32_t rank,
		     uint32_t pe, const char *engine);
/* Folds the per-PE busy times into the steps (after the op log). */
void kb_steps_finish(struct kb_steps *s);
/* "steps": [...] into summary.json. */
void kb_steps_json(const struct kb_steps *s, struct rt_json *j);
/* The per-step table of the report. */
void kb_steps_print(const struct kb_steps *s);
void kb_steps_release(struct kb_steps *s);

#endif
