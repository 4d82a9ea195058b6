/* job.h — one run's complete specification, as the launcher parsed it.
 *
 * Daemons receive the same command line and rebuild the same job, config and
 * topology from it, so nothing but the command line has to be shipped. */
#ifndef RT_JOB_H
#define RT_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/config.h"
#include "rt/err.h"
#include "rt/topology.h"
#include "rt/trace.h"

#define RT_MAX_ARGS 64
#define RT_PATH_MAX 1024

enum rt_transport { RT_TRANSPORT_INPROC, RT_TRANSPORT_IPC, RT_TRANSPORT_TCP };
enum rt_mode { RT_MODE_TIMING, RT_MODE_DATA };

struct rt_job_arg {
	char name[64];
	char value[256];
};

struct rt_job {
	char workload[RT_PATH_MAX];   /* "traffic", "gemm", "lib.so:NAME" */
	char out_dir[RT_PATH_MAX];
	char inputs_dir[RT_PATH_MAX]; /* --inputs, "" when absent */
	enum rt_transport transport;
	enum rt_colocate colocate;
	enum rt_mode mode;
	uint64_t seed;
	uint32_t n_args;
	struct rt_job_arg args[RT_MAX_ARGS]; /* --arg name=value, in order */
	struct rt_config config;      /* defaults < --config < --set < flags */
	bool trace_windows;           /* add window counters to trace.json */
	bool trace_off;               /* --trace off: no trace.json */
	struct rt_trace_opts trace;   /* --trace-window, -ranks, -flows, -format */
	bool quiet;                   /* no report on stdout */
	int hbm_fds[64];              /* data mode: memfd per rank, -1 none */
	int tcm_fds[64 * 64];         /* data mode: memfd per (rank, pe) */
};

/* Workload argument lookup: `def` when absent; RT_EINVAL if not a number. */
enum rt_err rt_job_arg_u64(const struct rt_job *job, const char *name,
			   uint64_t def, uint64_t *out);
/* The raw value, or `def` when absent. */
const char *rt_job_arg_str(const struct rt_job *job, const char *name,
			   const char *def);

enum rt_err rt_transport_parse(const char *s, enum rt_transport *out);
const char *rt_transport_name(enum rt_transport t);
const char *rt_colocate_name(enum rt_colocate c);

#endif
