/* job.h — one run's complete specification, as the launcher parsed it.
 *
 * The launcher reads every input that shapes the run (command line, --config
 * files, --set) exactly once and hands the resolved job to each daemon as a
 * sealed memory file (rt_job_share / rt_job_adopt): a daemon never re-reads
 * a path, so a pipe given as --config or a file edited mid-start cannot make
 * two processes disagree about the machine. What travels is the wire's
 * JobSpec (proto/kernbench.proto, ADR 0075), packed for one role, never
 * this struct's bytes. */
#ifndef RT_JOB_H
#define RT_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/buf.h"
#include "rt/config.h"
#include "rt/err.h"
#include "rt/ff_mode.h"
#include "rt/keys.h"
#include "rt/topology.h"
#include "rt/trace.h"

#define RT_MAX_ARGS 64
/* RT_PATH_MAX: rt/config.h */
#define RT_PROGRAM_MAX 65536 /* a program file's canonical text */

enum rt_transport { RT_TRANSPORT_INPROC, RT_TRANSPORT_IPC, RT_TRANSPORT_TCP };
enum rt_mode { RT_MODE_TIMING, RT_MODE_DATA };
/* How a run shows its progress on stderr (--progress): a bar redrawn on
 * a terminal, one line every few seconds (logs, CI), or none. AUTO is
 * BAR on a terminal and PLAIN elsewhere once the run has been going a
 * while (RT_PROGRESS_QUIET_S). */
enum rt_progress { RT_PROGRESS_AUTO, RT_PROGRESS_BAR, RT_PROGRESS_PLAIN, RT_PROGRESS_OFF };
#define RT_PROGRESS_QUIET_S 30
#define RT_PROGRESS_EVERY_S 5

struct rt_job_arg {
	char name[64];
	char value[256];
};

/* How many shared memories a run may have (rt_memory). */
#define RT_MAX_MEMORIES (64 + 64 * 64)

/* Directory for component output parts inside the output directory. */
#define RT_PARTS_DIR ".parts"

struct rt_job {
	char workload[RT_PATH_MAX];   /* "traffic", "gemm", "lib.so:NAME" */
	char out_dir[RT_PATH_MAX];     /* where this run writes: the staging
					* folder inside result_dir once the
					* launcher has prepared it */
	char result_dir[RT_PATH_MAX];  /* --out as given: where results land */
	char inputs_dir[RT_PATH_MAX]; /* --inputs, "" when absent */
	enum rt_transport transport;
	enum rt_colocate colocate;
	enum rt_mode mode;
	uint64_t seed;
	uint32_t n_args;
	struct rt_job_arg args[RT_MAX_ARGS]; /* --arg name=value, in order */
	char program[RT_PROGRAM_MAX];  /* a program file's canonical text
					* (tl_program_parse), "" otherwise */
	struct rt_config config;      /* defaults < --config < --set < flags */
	bool trace_windows;           /* add window counters to trace.json */
	bool trace_off;               /* --trace off: no trace.json */
	bool oplog_off;               /* --op-log off: no op_log.jsonl */
	enum rt_ff_mode ff_mode;      /* --fast-forward (ADR 0059) */
	struct rt_trace_opts trace;   /* --trace-window, -ranks, -flows, -format */
	bool quiet;                   /* no report on stdout */
	enum rt_progress progress;    /* --progress */
	struct rt_keys keys;          /* --keys: CURVE on the coordinator socket */
	uint8_t host_of_rank[RT_MAX_RANKS]; /* --hosts: each rank's host (all 0
					     * without); --colocate host */
	int memory_fds[RT_MAX_MEMORIES]; /* data mode: the run's shared memories
					  * (memfds, -1 none), numbered by the
					  * layer above (npu/memory.h) */
	uint64_t max_frame;           /* the largest frame a daemon may send
				       * (the launcher's bound); 0: 64 MiB */
};

/* rt_parse_u64, the one parser of numbers from users: rt/config.h */

/* Workload argument lookup: `def` when absent; RT_EUSAGE with one line
 * naming the argument and [min, max] if it is not a number in range. */
enum rt_err rt_job_arg_u64(const struct rt_job *job, const char *name,
			   uint64_t def, uint64_t min, uint64_t max,
			   uint64_t *out);
/* The raw value, or `def` when absent. */
const char *rt_job_arg_str(const struct rt_job *job, const char *name,
			   const char *def);

/* Who a shared job is for, and so what it carries (ADR 0070): a daemon
 * gets the CURVE client keys and this host's memory descriptors; an agent
 * (the Assign of a run across hosts) no keys (it has its own client keys)
 * and no descriptor (they mean nothing on another host). Neither ever
 * gets the server secret: it is the coordinator's alone. */
enum rt_job_role { RT_JOB_FOR_DAEMON, RT_JOB_FOR_AGENT };
/* Appends `job` as `role` sees it to `out`, a packed JobSpec: a daemon's
 * has the client keys and this host's descriptors, an agent's neither; no
 * encoding has the server secret (the schema has no field for it). */
enum rt_err rt_job_encode(const struct rt_job *job, enum rt_job_role role,
			  struct rt_buf *out);
/* Reads a packed JobSpec (an agent's Assign) into `job`: RT_ESCHEMA for
 * another version, RT_EDECODE with one line for anything the launcher
 * could not have written, then rt_job_check. Descriptors it does not
 * carry are -1, keys it does not carry empty. */
enum rt_err rt_job_decode(const uint8_t *bytes, size_t len, struct rt_job *job);
/* Launcher: writes `job` as `role` sees it, and the placed topology `topo`
 * if not NULL (rt_topology_write), into a sealed memory file
 * (close-on-exec off, so spawned daemons inherit it); *fd_out is its
 * descriptor. The file: a 24-byte frame (magic "kbjobv02", the JobSpec's
 * length, rt_hash of its bytes), the JobSpec, zeros to a multiple of 64
 * bytes, the topology. */
enum rt_err rt_job_share(const struct rt_job *job, enum rt_job_role role,
			 const struct rt_topology *topo, int *fd_out);
/* The coordinator is set up (its socket holds the key): forget the
 * server secret (explicit_bzero). */
void rt_job_forget_secret(struct rt_job *job);
/* Daemon: reads the job the launcher shared through `fd` into `job`;
 * RT_EDECODE if it is not one (wrong magic, length or checksum), else
 * what rt_job_decode says. */
enum rt_err rt_job_adopt(int fd, struct rt_job *job);
/* A decoded job is one the launcher could have made: every string ends
 * inside its field, every enum is in range, the configuration validates.
 * RT_EDECODE with one line if not. */
enum rt_err rt_job_check(const struct rt_job *job);
/* Daemon: maps the topology the launcher shared in the same file
 * (rt_topology_map); RT_ENOTFOUND if it shared none: build it. */
enum rt_err rt_job_topology(int fd, struct rt_topology *topo);
/* Environment variable naming the shared job's descriptor. */
#define RT_JOB_FD_ENV "KB_JOB_FD"

enum rt_err rt_transport_parse(const char *s, enum rt_transport *out);
/* Parses "auto|bar|plain|off" (RT_EUSAGE naming --progress otherwise). */
enum rt_err rt_progress_parse(const char *s, enum rt_progress *out);
const char *rt_transport_name(enum rt_transport t);

#endif
