/* coord.h — the coordinator: owns simulated time.
 *
 * It binds a ROUTER socket (ZMQ_ROUTER_MANDATORY, no high-water marks),
 * waits for READY from every daemon of the topology, then runs windows:
 * GRANT{k, T, T+L, inbound} to every daemon with work in the window (an
 * idle one is left out), DONE{k, next, outbound} back,
 * outbound routed to the destination daemons' next GRANT, and
 * T' = max(T + L, min(next local event, next delivery)) skips idle time.
 * It stops when no daemon has work and nothing was routed, then sends
 * SHUTDOWN and collects BYE. Any malformed frame, protocol violation, error
 * report, watchdog expiry or hook failure ends the run with one line naming
 * the daemon.
 *
 * Each daemon's routing id is its token, "INDEX.SECRET" (128 random bits,
 * rt_coord_token), which the launcher hands it outside argv; READY must
 * carry it too. Frames under any other routing id come from a process the
 * launcher did not start: they are ignored (one warning line, then a count
 * at most every 10 s), never fatal. Frames larger than rt_coord_max_frame
 * drop their connection (ZMQ_MAXMSGSIZE). The watchdog measures liveness,
 * not wall-clock (ADR 0035): it counts wall time only while this process
 * runs and no daemon it waits for makes progress, where progress is a
 * PROGRESS heartbeat with more events than the last, or CPU time the daemon
 * consumed (hooks->cpu_ns) at more than 1% of a core. A daemon computing
 * in one long event is alive; one stopped, blocked or deadlocked is not. */
#ifndef RT_COORD_H
#define RT_COORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kernbench.pb-c.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

struct rt_coord;

/* "INDEX." + 32 hex digits + NUL */
#define RT_COORD_TOKEN_MAX 48

/* Lets the launcher watch its children and signals inside the same poll. */
struct rt_coord_hooks {
	int fd;                          /* polled with the socket; -1: none */
	enum rt_err (*on_fd)(void *arg); /* fd readable; an error ends the run */
	/* called at least every 500 ms while waiting (NULL: none); an agent
	 * sends its heartbeat and listens to its coordinator here */
	enum rt_err (*tick)(void *arg);
	/* an agent's output file piece, before its BYE (NULL: refused) */
	enum rt_err (*on_file)(void *arg, uint32_t peer, const Kb__FilePart *part);
	/* CPU time participant `peer` has used so far, in ns (RT_COORD_CPU_UNKNOWN
	 * when it cannot be read; NULL: never known): the watchdog's view of a
	 * daemon that computes inside one long event (liveness, ADR 0035) */
	uint64_t (*cpu_ns)(void *arg, uint32_t peer);
	void *arg;
};
#define RT_COORD_CPU_UNKNOWN UINT64_MAX

/* Runs across hosts (ADR 0019): which participant hosts
 * each component. The run's coordinator has one participant per host (an
 * agent); an agent's coordinator has the topology's daemons, of which only
 * those of its ranks are present, and the components of other hosts are
 * RT_COORD_AWAY: their messages wait for the agent's DONE. */
#define RT_COORD_AWAY UINT32_MAX
#define RT_COORD_LABEL_MAX 96
#define RT_COORD_MESH_ENDPOINT_MAX 256 /* an agent's "tcp://ADDRESS:PORT" */
#define RT_COORD_BEAT_MS 1000    /* agents and their coordinator: heartbeat */
#define RT_COORD_SILENCE_MS 5000 /* ... and a peer silent this long is gone */

struct rt_coord_layout {
	uint32_t n_peers;
	const uint32_t *peer_of;   /* per component: participant, or RT_COORD_AWAY */
	const char *const *labels; /* per participant, for errors; NULL: daemons */
	bool agents;               /* participants are agents: Hello, heartbeats */
	bool sub;                  /* an agent's: steps to horizons (rt_coord_step) */
	uint64_t lookahead_ps;     /* window length */
	uint64_t ready_timeout_ms; /* how long READYs may take (0: run.watchdog_ms) */
	const void *job_bytes;     /* agents: the sealed job file's bytes, which */
	size_t job_len;            /* Assign carries (copied) */
};

/* The tree barrier of a run across hosts (ADR 0067): with fan-out k the
 * coordinator talks to hosts 0..k-1 and host h to hosts k(h+1) ..
 * k(h+1)+k-1; fan-out 0 is the flat barrier (the coordinator talks to
 * every host). KB_BARRIER_FANOUT in the coordinator's environment chooses
 * another (0 to 64; a bench's comparison). */
#define RT_COORD_FANOUT 8
#define RT_COORD_TREE_TOP UINT32_MAX /* the parent of the top hosts */
/* Host h's parent (RT_COORD_TREE_TOP: the coordinator). */
uint32_t rt_coord_tree_parent(uint32_t h, uint32_t fanout);
/* Its first child (the others follow, up to fanout, below n_hosts). */
uint32_t rt_coord_tree_first_child(uint32_t h, uint32_t fanout);
/* How many hosts its subtree holds, itself included. */
uint32_t rt_coord_tree_size(uint32_t h, uint32_t fanout, uint32_t n_hosts);
/* The sum of v[] over its subtree (v: n_hosts entries). */
uint64_t rt_coord_tree_sum(uint32_t h, uint32_t fanout, uint32_t n_hosts, const uint64_t *v);
#define RT_COORD_TREE_UNSEEN UINT64_MAX /* a subtree never granted yet */

/* What one global window sent to other hosts. */
struct rt_coord_away {
	Kb__Envelope **envelopes; /* owned by the coordinator until the next step */
	size_t n;
	uint64_t next_ps;         /* earliest pending local time (RT_TIME_NEVER) */
};

struct rt_coord_stats {
	uint64_t windows;       /* GRANT rounds */
	uint64_t grants;        /* GRANTs sent (idle daemons are left out) */
	uint64_t routed;        /* messages that crossed daemons */
	uint64_t last_window_ps;/* start of the last window */
	double windows_wall_s;  /* wall time from the first GRANT to the last DONE */
	double windows_cpu_s;   /* this process's CPU time over the same (not
				 * an agent's: its steps do not measure it) */
};

/* What the components reported in BYE at the end of a successful run. */
struct rt_end_reports {
	Kb__Sync **byes;                   /* owned BYE frames, by daemon */
	uint32_t n_byes;
	const Kb__ComponentReport **by_id; /* into byes, by component id */
	uint32_t n_components;
};

/* Frees the frames and the index; leaves `r` empty. */
void rt_end_reports_release(struct rt_end_reports *r);

/* Binds `endpoint` ("ipc://...", "tcp://127.0.0.1:*", "inproc://...").
 * Caller owns *out. */
enum rt_err rt_coord_new(const struct rt_job *job, const struct rt_topology *topo,
			 void *zmq_ctx, const char *endpoint, struct rt_coord **out);
/* The same with a layout (NULL: one participant per daemon). */
enum rt_err rt_coord_new_layout(const struct rt_job *job, const struct rt_topology *topo,
				void *zmq_ctx, const char *endpoint,
				const struct rt_coord_layout *layout, struct rt_coord **out);
/* The bound endpoint (with the real port for tcp). */
const char *rt_coord_endpoint(const struct rt_coord *c);
/* Tells the coordinator a daemon's pid (for error messages). */
void rt_coord_set_pid(struct rt_coord *c, uint32_t daemon, pid_t pid);
/* The routing id daemon `daemon` must use (its secret token). */
const char *rt_coord_token(const struct rt_coord *c, uint32_t daemon);
/* True once the daemon was told to stop: exiting earlier is a failure. */
bool rt_coord_released(const struct rt_coord *c, uint32_t daemon);
/* The largest frame a daemon may legally send for this job: the bound
 * the launcher set (job->max_frame), 64 MiB without one. */
int64_t rt_coord_max_frame(const struct rt_job *job);
/* Runs the whole job. A run in which any component reported unfinished
 * work (a kernel blocked in a wait, a scheduler or engine still holding
 * commands) fails with RT_EUNFINISHED and one line naming each of them. */
enum rt_err rt_coord_run(struct rt_coord *c, const struct rt_coord_hooks *hooks,
			 struct rt_coord_stats *stats);
/* rt_coord_run in three parts, for an agent (a sub-coordinator):
 * start waits for every present participant's READY; step runs local
 * windows inside the GRANT it takes (*grant_p, an agent's global window)
 * and says what goes to other hosts; finish shuts down and collects BYE. */
enum rt_err rt_coord_start(struct rt_coord *c, const struct rt_coord_hooks *hooks);
enum rt_err rt_coord_step(struct rt_coord *c, Kb__Sync **grant_p, struct rt_coord_away *out);
/* The same for a window whose messages are `g->inbound`, pointing into
 * `frames` (an agent's GRANT and the Data frames its neighbours sent,
 * ADR 0066), which it takes: they live until the next step. */
enum rt_err rt_coord_step_frames(struct rt_coord *c, const Kb__Grant *g, Kb__Sync **frames,
				 size_t n_frames, struct rt_coord_away *out);
enum rt_err rt_coord_finish(struct rt_coord *c);
/* Earliest pending time: a local event or a routed delivery. */
uint64_t rt_coord_next_ps(const struct rt_coord *c);
const struct rt_coord_stats *rt_coord_stats(const struct rt_coord *c);
/* Moves the end-of-run reports of a successful run into *out (caller
 * releases it with rt_end_reports_release). */
void rt_coord_take_reports(struct rt_coord *c, struct rt_end_reports *out);
/* Agents: the hosts whose connection has dropped (a heartbeat to each
 * ready one is refused at once), named into buf ("host 2 (rank 2), ...");
 * their count. What a coordinator stopped by a signal says it had lost:
 * a launcher that kills every process when one dies (mpirun, srun
 * --kill-on-bad-exit) stops it before its own watch would have. */
size_t rt_coord_lost_hosts(struct rt_coord *c, char *buf, size_t cap);
/* Tells every daemon to stop at once (after a failure). */
void rt_coord_abort(struct rt_coord *c);
void rt_coord_destroy(struct rt_coord **c);

#endif
