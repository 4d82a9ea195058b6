/* outputs.h — a run's outputs (outputs.c): the output folder (lock,
 * staging folder, results manifest, commit on success) and the merge of
 * the daemons' parts into op_log.jsonl, trace.json and summary.json, with
 * the report.
 *
 * May use: merge, oplog_out, trace_out, stats_out, energy, steps, cpath,
 * report, tidy, the runtime; never the launcher's roles (launch, agent),
 * which call it. */
#ifndef KB_OUTPUTS_H
#define KB_OUTPUTS_H

#include <stdbool.h>

#include "run_facts.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

/* Merges the daemons' output parts into op_log.jsonl, trace.json and
 * summary.json, prints the report, and removes the parts. */
enum rt_err kb_outputs_merge(const struct rt_job *job, const struct rt_topology *topo,
			     const struct kb_run_facts *facts);
/* Removes the parts folder of job->out_dir (never following a link). */
void kb_outputs_discard(const struct rt_job *job);

/* The output folder (job->result_dir) of one run. */
struct kb_outdir {
	int lock_fd;    /* flock on the folder until the run ends (-1: none) */
	bool made_dir;  /* this run created the folder */
	bool made_lock; /* ... or only its lock file */
};
#define KB_OUTDIR_INIT { .lock_fd = -1 }

/* Creates the folder, locks it against a second run and makes a fresh
 * staging folder inside, which job->out_dir then names: everything the run
 * writes goes there. The previous run's results stay until this one ends. */
enum rt_err kb_outputs_prepare(struct rt_job *job, struct kb_outdir *od);
/* Success: replaces the previous run's results (the files its manifest
 * lists, if they are still regular files of ours) with the staged ones,
 * records them in the manifest and removes the staging folder. */
enum rt_err kb_outputs_commit(struct rt_job *job, struct kb_outdir *od);
/* Failure: removes the staging folder. A run that failed (`refused`
 * false) also removes the previous run's results: a failed run leaves
 * none. One refused as a usage error (exit 2) leaves the folder as it
 * found it: previous results kept, and the lock file and the folder
 * removed again if this run created them (ADR 0038). */
void kb_outputs_abandon(struct rt_job *job, struct kb_outdir *od, bool refused);

#endif
