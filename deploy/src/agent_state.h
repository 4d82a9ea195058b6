/* agent_state.h — private to the agent (agent.c, agent_link.c,
 * agent_windows.c, agent_ship.c; agent.h is its API): the state of one
 * agent, struct agent, and what its files call of each other.
 *
 * May use: cli (the options), launch (the host module: kb_local), mesh,
 * hostkeys, agent_env, the runtime. */
#ifndef KB_AGENT_STATE_H
#define KB_AGENT_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "agent_env.h"
#include "cli.h"
#include "hostkeys.h"
#include "hosts.h"
#include "launch.h"
#include "mesh.h"
#include "rt/buf.h"
#include "rt/coord.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/keys.h"

#define HELLO_WAIT_S 60 /* --agent-wait's default */
/* Output files go in small pieces, at most FILE_WINDOW of them unconfirmed
 * (credits, ADR 0050): a piece in flight on a slow link delays the
 * heartbeats behind it by its size over the link's rate (256 KiB at
 * 8 Mbit/s: 0.26 s, well under RT_COORD_SILENCE_MS), and this host never
 * queues more than 4 MiB in ZeroMQ however large its outputs are. */
#define FILE_PIECE (256u << 10)
#define FILE_WINDOW 16

/* One output file this host shipped (for its BYE, and for naming what
 * the coordinator never confirmed). */
struct shipped {
	char path[300];
	uint64_t parts, bytes; /* FilePart frames and data bytes sent */
	uint64_t end;          /* the host's part count after its last piece */
	bool whole;            /* every piece sent */
};

/* A window waiting for its messages from other hosts (messages_in). */
struct mesh_wait {
	uint64_t window, expect; /* messages sent before `window`: `expect` */
	uint64_t had;            /* arrived at the last look */
	uint64_t moved_ms;       /* when that count last grew (0: not yet looked) */
};

struct agent {
	struct kb_agent_opts opts; /* the command line */
	const char *coordinator;
	struct rt_keys keys;
	struct kb_agent_index index;
	void *zctx;
	void *sock;               /* DEALER to the coordinator */
	void *monitor;            /* its connection events (a closed connection) */
	struct rt_buf frame;
	uint32_t host;
	char token[RT_COORD_TOKEN_MAX];
	char label[RT_COORD_LABEL_MAX];
	uint8_t rank_here[KB_HOSTS_MAX_RANKS];
	struct rt_job *job;
	char staging[64];         /* this host's output folder */
	struct kb_local *local;
	struct kb_mesh *mesh;     /* messages to and from other hosts (ADR 0066) */
	uint64_t *sent_to;        /* per host: what this window sent it */
	uint32_t n_hosts;         /* in the coordinator's mesh table */
	uint64_t next_local_ps;   /* this host's earliest pending time */
	uint64_t expect_seen;     /* tree: the count it last waited for */
	Kb__Sync *tree_grant;     /* tree: the GRANT its parent forwarded */
	struct mesh_wait await;   /* what the window waits for */
	uint64_t heard_ms, beat_ms, beats;
	uint64_t watched_ms;      /* last look at this host's signals and children */
	int rcvtimeo_ms;          /* the socket's receive timeout now */
	bool stopped;             /* the coordinator stopped the run, or is gone */
	bool joined;              /* READY sent: the coordinator beats to us */
	/* the keeper: beats and watches while this thread runs the host */
	pthread_mutex_t sock_lock; /* sock and monitor: this thread's, or the
				    * keeper's while they are lent */
	pthread_t keeper;
	bool keeper_on;
	int lent;                 /* atomic: the keeper may use the socket */
	int host_open;            /* atomic: this host's daemons are up */
	int keeper_quit;          /* atomic */
	int keeper_failed;        /* atomic: keeper_error is set */
	struct rt_error keeper_error;
	bool ephemeral;           /* no --keys: the coordinator's from hostkeys.h */
	struct kb_hostkeys_id keys_id; /* ... which file they were read from */
	clockid_t main_clock;     /* this thread's CPU clock (a direct daemon's) */
	bool main_clock_ok;
	/* output files (ADR 0050): what was sent, what the coordinator took */
	struct shipped *files;
	size_t n_files, cap_files;
	uint64_t sent_parts;      /* FilePart frames sent, all files */
	uint64_t acked_parts;     /* ... of which the coordinator wrote (FileAck) */
	bool bye_acked;           /* the coordinator took our BYE: we may exit */
	bool shipping;            /* between the first FilePart and the BYE's ack */
};

#define WAIT_SLICE_MS 250 /* longest blocking receive */
#define WATCH_MS 100      /* signals and children between frames */
#define KEEPER_NAP_MS 100 /* the keeper's look at a running window */

/* agent_link.c: the connection to the coordinator (socket, Hello/Assign,
 * heartbeats, the socket lent to the keeper while a window runs). */
enum rt_err kb_agent_open_socket(struct agent *a, const char *id);
void kb_agent_close_socket(struct agent *a);
void kb_agent_watch_connection(struct agent *a, int events);
enum rt_err kb_agent_send_up(struct agent *a, Kb__Sync *msg);
enum rt_err kb_agent_recv_up(struct agent *a, int wait_ms, Kb__Sync **out);
enum rt_err kb_agent_hello(struct agent *a);
enum rt_err kb_agent_beat_up(struct agent *a);
enum rt_err kb_agent_take_busy_frame(struct agent *a, const Kb__Sync *got);
enum rt_err kb_agent_keep_up(struct agent *a);
void kb_agent_lend_socket(struct agent *a);
enum rt_err kb_agent_take_socket(struct agent *a);
enum rt_err kb_agent_keep_alive(void *arg);
enum rt_err kb_agent_wait_up(struct agent *a, Kb__Sync **out);

/* agent_windows.c: the window loop (READY, the mesh table, each GRANT run
 * over this host's daemons, messages to and from other hosts). */
enum rt_err kb_agent_send_ready(struct agent *a);
enum rt_err kb_agent_on_mesh(struct agent *a, const Kb__Mesh *table);
enum rt_err kb_agent_on_grant(struct agent *a, Kb__Sync **grant_p);
enum rt_err kb_agent_on_tree_grant(struct agent *a, Kb__Sync **grant_p);
enum rt_err kb_agent_wait_next(struct agent *a, Kb__Sync **out);

/* agent_ship.c: the end of the run (the daemons' BYEs, output files
 * shipped in credited pieces, BYE) and the staging folder's removal. */
enum rt_err kb_agent_finish(struct agent *a);
void kb_agent_remove_staging(struct agent *a, bool forget);

/* agent.c: a stop signal seen by this host (RT_EINTERRUPTED), or RT_EOK. */
enum rt_err kb_agent_stop_signal_pending(const struct agent *a);

#endif
