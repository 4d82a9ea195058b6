/* coord_internal.h — what the coordinator's files share (runtime/src
 * only): its state and the functions one file lends another. The
 * coordinator (rt/coord.h) is one state machine over one ROUTER socket,
 * in five files by concern:
 *
 *   coord.c          set-up, layout, teardown, sending
 *   coord_recv.c     receiving: frames, strangers, liveness and the
 *                    watchdog, failures heard out, the READY handshake
 *   coord_windows.c  the window loop (grant, route, collect, progress)
 *                    and the run API (rt_coord_run, _start, _step, _finish)
 *   coord_end.c      the end of the run: BYE reports, unfinished work
 *   coord_agents.c   runs across hosts: Hello/Assign, heartbeats, the
 *                    agents' mesh, shipped files, the barrier tree */
#ifndef RT_COORD_INTERNAL_H
#define RT_COORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "kernbench.pb-c.h"
#include "rt/buf.h"
#include "rt/coord.h"
#include "rt/trace.h"

/* What arrived of one output file of an agent (FilePart frames). */
struct file_tally {
	char *path;
	uint64_t parts; /* frames, the size-only first one included */
	uint64_t bytes; /* data bytes */
};

struct peer {
	bool present;           /* hosted here: an agent's coordinator leaves
				 * the daemons of other hosts out */
	bool gone;              /* said BYE: its connection may close */
	uint32_t n_hosted;      /* components it hosts */
	uint64_t heard_ms;      /* agents: when it last sent anything */
	uint64_t lost_ms;       /* agents: when a send to it first failed */
	bool ready;
	bool answered;          /* DONE / BYE received this round */
	bool released;          /* SHUTDOWN sent: it may exit now */
	bool assigned;          /* agents: an agent was given this host */
	char token[RT_COORD_TOKEN_MAX]; /* its routing id: "INDEX.SECRET" */
	uint64_t events;        /* last PROGRESS count */
	uint64_t cpu_ns;        /* CPU time at the last liveness sample */
	pid_t pid;
	uint64_t next_local_ps;
	Kb__Envelope **inbound; /* for its next GRANT (borrowed from rounds) */
	size_t n_in;
	size_t cap_in;
	/* agents: the files it shipped, as they arrived (checked at its BYE) */
	struct file_tally *files;
	size_t n_files, cap_files;
	uint64_t parts_taken, bytes_taken; /* over all its files (FileAck) */
	/* agents (ADR 0066): where its neighbours reach it, and what they sent */
	char mesh_endpoint[RT_COORD_MESH_ENDPOINT_MAX];
	char mesh_key[41];      /* its CURVE public key, Z85 */
	uint64_t expect;        /* messages other hosts sent it so far */
	bool fresh;             /* ... some of them in the last round */
	uint64_t granted_sum;   /* tree, a top host: its subtree's expect when
				 * last granted (RT_COORD_TREE_UNSEEN: never) */
};

struct rt_coord {
	const struct rt_job *job;
	const struct rt_topology *topo;
	void *zctx;
	bool own_zctx;
	void *sock;
	struct rt_zap *zap; /* --keys: the handler admitting the run's client key */
	char endpoint[256];
	struct peer *peers;
	uint32_t n_peers;
	Kb__Sync **round;       /* DONE frames of this round: own the envelopes */
	size_t n_round;
	struct rt_buf frame;
	struct rt_trace_writer counters; /* window counter trace records */
	uint64_t last_progress_ms;
	uint64_t progress_start_ms; /* when the run's windows began (--progress) */
	uint64_t progress_ps;       /* latest simulated time a daemon reported */
	bool progress_printed;      /* a plain progress line went out */
	uint64_t recvs;         /* waits for a frame (signals: every 64th) */
	uint64_t cpu_sampled_ms; /* last liveness sample (hooks->cpu_ns) */
	int rcvtimeo_ms;        /* the socket's receive timeout now */
	uint64_t strangers;     /* frames ignored from peers it did not spawn */
	uint64_t strangers_shown;
	uint64_t stranger_note_ms;
	const struct rt_coord_hooks *hooks;
	struct rt_end_reports reports; /* BYE reports, once collected */
	/* layout: who hosts each component (rt_coord_layout) */
	uint32_t *peer_of;      /* per component: participant or RT_COORD_AWAY */
	char (*labels)[RT_COORD_LABEL_MAX]; /* per participant, or NULL: daemons */
	uint32_t n_present;
	const struct coord_peers *ops; /* who the participants are */
	bool sub;               /* an agent's: steps to horizons, no counters */
	uint64_t lookahead_ps;
	size_t cap_round;
	uint64_t k;             /* next window number */
	uint64_t next_ps;       /* earliest pending time after the last window */
	uint64_t horizon;       /* sub: end of the current global window */
	Kb__Envelope **away;    /* sub: owned copies for other hosts */
	size_t n_away, cap_away;
	struct rt_coord_stats st;
	struct rt_buf job_bytes;/* agents: the shared job, as Assign carries it */
	uint64_t beat_ms;       /* agents: last heartbeat sent */
	uint32_t fanout;        /* agents: the barrier's tree (0: flat) */
	uint64_t ready_timeout_ms; /* wait this long for READYs (0: watchdog) */
};

#define RECV_SLICE_MS 250 /* longest blocking receive */

/* What the coordinator is waiting for, named only if the watchdog fires. */
enum wait_for { WAIT_READY, WAIT_DONE, WAIT_BYE };

/* What the window core asks of its participants where they differ (ADR
 * 0076): this host's daemons (coord_daemons, coord.c) or one agent per
 * host of a run across hosts, granted flat or down a tree
 * (coord_agents_flat, coord_agents_tree, coord_agents.c). The core calls
 * these; it has no role flag of its own. A NULL operation does nothing. */
struct coord_peers {
	/* on other hosts: CURVE whatever the transport, heartbeats on the
	 * socket, a present participant even with no component, Assign
	 * carries the job, a frame sized for every rank */
	bool remote;
	unsigned named_waiting;  /* participants a watchdog line names */
	/* a frame from a routing id that is no participant's: true if taken */
	bool (*stranger)(struct rt_coord *c, const zmq_msg_t *id, const zmq_msg_t *body);
	/* between frames: heartbeats out, silence in */
	enum rt_err (*keep_alive)(struct rt_coord *c);
	/* what a READY carries beyond the components */
	enum rt_err (*ready)(struct rt_coord *c, uint32_t i, const Kb__Ready *r);
	/* every participant is ready, before the first GRANT */
	enum rt_err (*all_ready)(struct rt_coord *c);
	/* window k: GRANT whoever has work (*granted: how many answer) */
	enum rt_err (*grant)(struct rt_coord *c, uint64_t k, uint64_t start, uint64_t end,
			     uint32_t *granted);
	/* one DONE of the window ending at `end`: where its messages go */
	enum rt_err (*done)(struct rt_coord *c, uint32_t from, const Kb__Done *done, uint64_t end,
			    uint64_t *min_deliver, uint64_t *routed);
	/* a frame other than BYE while the BYEs come in: true if taken */
	enum rt_err (*before_bye)(struct rt_coord *c, uint32_t i, const Kb__Sync *s, bool *taken);
	/* participant i said BYE (reports indexed) */
	enum rt_err (*bye)(struct rt_coord *c, uint32_t i, const Kb__Bye *bye);
	/* every BYE is in */
	enum rt_err (*all_bye)(struct rt_coord *c);
};

extern const struct coord_peers coord_daemons, coord_agents_flat, coord_agents_tree;

/* coord.c */
const char *coord_peer_name(const struct rt_coord *c, uint32_t i, char *buf, size_t cap);
void coord_free_round(struct rt_coord *c);
enum rt_err coord_keep_in_round(struct rt_coord *c, Kb__Sync *s);
void coord_free_away(struct rt_coord *c);
enum rt_err coord_send_to(struct rt_coord *c, uint32_t peer, Kb__Sync *msg);
enum rt_err coord_send_grant(struct rt_coord *c, uint32_t i, uint64_t window, uint64_t start,
			      uint64_t end);
enum rt_err coord_broadcast_shutdown(struct rt_coord *c, bool abort_run);

/* coord_end.c */
enum rt_err coord_collect_bye(struct rt_coord *c);

/* coord_recv.c */
enum rt_err coord_explain_failure(struct rt_coord *c, enum rt_err err);
enum rt_err coord_recv_from_any(struct rt_coord *c, uint32_t *peer, Kb__Sync **out,
				 enum wait_for what, uint64_t window);
enum rt_err coord_frame_error(struct rt_coord *c, uint32_t i, Kb__Sync *s, const char *expected,
			       enum wait_for what);
enum rt_err coord_handshake(struct rt_coord *c);

/* coord_windows.c */
enum rt_err coord_explain_unreachable(struct rt_coord *c, enum rt_err err);
void coord_show_progress(struct rt_coord *c, uint64_t k, uint64_t t, bool final);
/* GRANT every participant with work in [start, end) (the daemons, or the
 * agents of a flat barrier) */
enum rt_err coord_grant_flat(struct rt_coord *c, uint64_t k, uint64_t start, uint64_t end,
			     uint32_t *granted);

#endif
