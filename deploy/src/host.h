/* host.h — private to the host module (host_spawn.c, host_watch.c,
 * launch.c, local.c; launch.h is its API): the state of one host's run,
 * struct launch, and what its files call of each other. One struct serves
 * the one-host run, the coordinator of a run across hosts (which spawns
 * nothing: hosts set) and an agent's host (rank_here set; one daemon run
 * by direct calls: direct set).
 *
 * May use: outputs (the output folder), the runtime. */
#ifndef KB_HOST_H
#define KB_HOST_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "outputs.h"
#include "rt/buf.h"
#include "rt/coord.h"
#include "rt/daemon.h"
#include "rt/job.h"
#include "rt/topology.h"

struct kb_hosts;

#define GRACE_MS 3000

struct launch {
	struct rt_job *job;
	unsigned drain_delay_ms; /* KB_DRAIN_DELAY_MS: a test's slow coordinator */
	struct rt_topology topo;
	struct rt_coord *coord;
	void *zctx;
	int sigfd;
	sigset_t old_mask;
	pid_t *pids;              /* per daemon; 0 once reaped or for threads */
	pthread_t *threads;       /* inproc daemons */
	struct rt_daemon_opts *thread_opts;
	bool *thread_ended;       /* set by each thread as it returns */
	char (*thread_errors)[256]; /* why a thread returned early, if it said */
	bool *thread_seen;        /* its early end was counted */
	uint32_t n_threads;
	char ipc_dir[64];
	char endpoint[512];
	struct rt_buf memfds;     /* "-" or fd list handed to daemons */
	int job_fd;               /* the resolved job, shared with the daemons */
	struct kb_outdir outdir;  /* the output folder, locked for the run */
	int run_argc;
	char **run_argv;          /* `run WORKLOAD ...` as given, forwarded */
	char **child_argv;        /* built before forking: no malloc after fork */
	char **child_envp;        /* environ + the daemon's token */
	size_t token_slot;        /* index of the token in child_envp */
	char (*token_vars)[RT_COORD_TOKEN_MAX + 32];
	int signal_seen;
	/* runs across hosts */
	const uint8_t *rank_here;  /* an agent: its ranks (NULL: every rank) */
	bool *daemon_here;         /* per daemon: spawned by this process */
	uint32_t *peer_of;         /* per component: the coordinator's participant */
	const struct kb_hosts *hosts; /* the coordinator of a run across hosts */
	char (*labels)[RT_COORD_LABEL_MAX]; /* per host */
	const char **label_ptrs;
	enum rt_err (*tick)(void *arg); /* an agent's heartbeat (hooks.tick) */
	void *tick_arg;
	struct rt_daemon *direct;  /* an agent's one daemon, run by direct calls */
	uint64_t direct_windows;
	struct rt_coord_hooks hooks;   /* an agent's local coordinator keeps them */
	struct rt_end_reports reports; /* an agent's, for its BYE */
	Kb__ComponentReport **bye_reports;
	bool keys_published;       /* ephemeral keys left for local agents (hostkeys.h) */
};

/* The run in progress, for the exit() and crash guards of inproc daemon
 * threads (host_spawn.c). */
extern struct launch *kb_host_running;

/* host_spawn.c: the job's memfd and shared memory, the ipc endpoint, the
 * daemons as threads or processes. */
enum rt_err kb_host_make_memory(struct launch *l);
void kb_host_close_memory(struct rt_job *job);
enum rt_err kb_host_make_endpoint(struct launch *l);
/* The ipc folder and its socket file removed; `forget` once the socket is
 * closed (before, a failed run removes them early and again at the end: a
 * connected socket outlives its path). */
void kb_host_remove_endpoint(struct launch *l, bool forget);
enum rt_err kb_host_spawn_threads(struct launch *l);
enum rt_err kb_host_spawn_processes(struct launch *l);

/* host_watch.c: signals and ended children (on_signal is an rt_coord_hooks
 * on_fd, its argument the struct launch), the teardown, the limits, and
 * output that is safe in a signal handler or before malloc works. */
enum rt_err kb_host_on_signal(void *arg);
enum rt_err kb_host_watch_signals(struct launch *l);
void kb_host_teardown(struct launch *l, bool failed);
enum rt_err kb_host_check_limits(const struct launch *l);
void kb_host_put_text(const char *text);
void kb_host_put_u64(uint64_t v);

/* launch.c: the host's daemons spawned and ready, and the hooks a local
 * coordinator runs them with (tick and CPU time). */
enum rt_err kb_host_start(struct launch *l);
enum rt_err kb_host_tick(void *arg);
uint64_t kb_host_daemon_cpu_ns(void *arg, uint32_t i);

#endif
