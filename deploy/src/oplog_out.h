/* oplog_out.h — op_log.jsonl, merged and formatted from the components'
 * binary op log parts (ADR 0055). */
#ifndef KB_OPLOG_OUT_H
#define KB_OPLOG_OUT_H

#include <stdint.h>

#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

struct kb_steps;

/* Writes <out_dir>/op_log.jsonl (none with --op-log off) from every
 * component's part, in (start, end, component, seq) order, and sets
 * *hbm_busy_ps to the busiest rank's HBM busy time (the union of its DMA
 * records' intervals), which needs the DMA records either way; each
 * record also goes to the program's steps (per-step busy times, steps.h). */
enum rt_err kb_oplog_write(const struct rt_job *job, const struct rt_topology *topo,
			   uint64_t *hbm_busy_ps, struct kb_steps *steps);

#endif
