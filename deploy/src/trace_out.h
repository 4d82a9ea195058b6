/* trace_out.h — the launcher's trace writer: reads every component's binary
 * trace part, sorts all records by time, pairs message ends into numbered
 * flows and writes trace.json, trace.json.gz or trace.pftrace. */
#ifndef KB_TRACE_OUT_H
#define KB_TRACE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "rt/job.h"
#include "rt/topology.h"
#include "rt/trace.h"

/* One record with where it came from. */
struct kb_trace_ev {
	struct rt_trace_rec r;
	uint32_t part;  /* component id; n_components for the coordinator */
	uint32_t order; /* position in its part: a stable tie-break */
	uint64_t flow;  /* message ends: flow number (1, 2, ...), 0 if unpaired */
};

/* Every record of a run, sorted by time: on one track, an enclosing slice
 * comes before the slices it encloses. */
struct kb_trace {
	struct rt_trace_part *parts; /* n_components + 1 */
	uint32_t n_parts;
	struct kb_trace_ev *ev;
	size_t n;
	uint64_t n_flows;
};

enum rt_err kb_trace_load(const struct rt_job *job, const struct rt_topology *topo,
			  struct kb_trace *t);
void kb_trace_release(struct kb_trace *t);
const char *kb_trace_str(const struct kb_trace *t, const struct kb_trace_ev *e, uint16_t id);
/* Track id of an event within its rank: component * RT_TRACE_TRACKS + track. */
uint32_t kb_trace_tid(const struct kb_trace_ev *e);

/* Writes the run's trace file in the format the job asks for. */
enum rt_err kb_trace_write(const struct rt_job *job, const struct rt_topology *topo);
/* The file name it writes ("trace.json", "trace.json.gz", "trace.pftrace"). */
const char *kb_trace_file_name(const struct rt_job *job);

/* trace_pftrace.c: the Perfetto protobuf form. */
enum rt_err kb_trace_write_perfetto(const struct kb_trace *t, const struct rt_topology *topo,
				    const char *path);

#endif
