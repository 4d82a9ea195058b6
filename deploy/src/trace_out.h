/* trace_out.h — the launcher's trace writer: reads every component's binary
 * trace part, merges all records in time order, pairs message ends into numbered
 * flows and writes trace.json, trace.json.gz or trace.pftrace. */
#ifndef KB_TRACE_OUT_H
#define KB_TRACE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "rt/job.h"
#include "rt/topology.h"
#include "rt/trace.h"

#include "merge.h"

/* One record with where it came from. */
struct kb_trace_ev {
	struct rt_trace_rec r;
	uint32_t part;  /* component id; n_components for the coordinator */
	uint32_t order; /* position in its part: a stable tie-break */
	uint64_t flow;  /* message ends: flow number (1, 2, ...), 0 if unpaired */
};

struct kb_trace_run;
struct kb_flow_slot;

/* A pass over every record of a run in time order: on one track, an
 * enclosing slice comes before the slices it encloses. The records are
 * streamed (a k-way merge of sorted runs cut from the parts), so memory
 * does not grow with the trace; message ends get their flow numbers as
 * they pass (a send is numbered when its delivery is known to exist, and
 * waits in a table of messages in flight until its delivery comes by). */
struct kb_trace {
	struct rt_trace_part *parts; /* n_components + 1: string tables only */
	uint64_t *part_recs;         /* records per part */
	uint32_t n_parts;
	uint32_t n_components;
	size_t n;                    /* records in all parts */
	uint64_t n_flows;            /* flows numbered so far */
	/* the runs and their merge */
	char **paths;                /* part record files, then the run file */
	struct kb_trace_run *runs;
	size_t cap_runs;
	uint32_t n_runs;
	struct kb_heap heap;
	size_t mem_left;             /* bytes sorted chunks may still keep in memory */
	struct kb_trace_ev last_cut; /* the last record of the chunk cut before */
	/* pairing: delivered[src] has bit seq set if (src, seq) was delivered */
	uint64_t **delivered;
	uint64_t *delivered_words;
	struct kb_flow_slot *pending;
	size_t pending_cap, pending_n;
	/* each counter's first record, in time order (Perfetto declares its
	 * tracks before any event) */
	struct kb_trace_ev *counters;
	size_t n_counters, cap_counters;
};

/* Reads the parts' string tables, cuts the parts into sorted runs and
 * checks every record. `chunk` records are sorted at a time (0: the
 * default). */
enum rt_err kb_trace_open(const struct rt_job *job, const struct rt_topology *topo,
			  size_t chunk, struct kb_trace *t);
/* The next record in time order; false at the end or on error (`*err`). */
bool kb_trace_next(struct kb_trace *t, struct kb_trace_ev *e, enum rt_err *err);
void kb_trace_release(struct kb_trace *t);
const char *kb_trace_str(const struct kb_trace *t, const struct kb_trace_ev *e, uint16_t id);
/* Track id of an event within its rank: component * RT_TRACE_TRACKS + track. */
uint32_t kb_trace_tid(const struct kb_trace_ev *e);
/* The sort order of records (time, longer slice first, part, track, order). */
int kb_trace_ev_cmp(const void *a, const void *b);
/* Writes the run's trace file in the format the job asks for. */
enum rt_err kb_trace_write(const struct rt_job *job, const struct rt_topology *topo);
/* The file name it writes ("trace.json", "trace.json.gz", "trace.pftrace"). */
const char *kb_trace_file_name(const struct rt_job *job);

/* trace_json.c: the JSON form, gzip-compressed when `gz`. */
enum rt_err kb_trace_write_json(struct kb_trace *t, const struct rt_topology *topo,
				const struct rt_job *job, const char *path, bool gz);
/* trace_pftrace.c: the Perfetto protobuf form. */
enum rt_err kb_trace_write_perfetto(struct kb_trace *t, const struct rt_topology *topo,
				    const char *path);

#endif
