/* daemon.h — a daemon: hosts components and runs the participant side of
 * the conservative lockstep protocol (docs/architecture.md §lockstep).
 *
 * It connects a DEALER socket to the coordinator, announces itself with
 * READY, then for every GRANT runs each local event with t < window end,
 * buffering messages for other daemons, and answers DONE with them. On
 * SHUTDOWN it finalises its components, flushes their output parts and says
 * BYE. A handler error is reported to the coordinator as ERROR.
 *
 * A daemon can also be driven by direct calls, one per window, with no
 * socket (rt_daemon_open below): an agent whose host holds one daemon runs
 * it in its own thread, so a cross-host window costs no local round. */
#ifndef RT_DAEMON_H
#define RT_DAEMON_H

#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

struct rt_daemon_opts {
	const struct rt_job *job;
	const struct rt_topology *topo;
	uint32_t index;       /* which daemon of the topology this is */
	const char *endpoint; /* coordinator endpoint */
	void *zmq_ctx;        /* shared context (inproc) or NULL: own one */
	const char *token;    /* rt_coord_token(): never on a command line */
};

/* Runs until SHUTDOWN; RT_EOK after a clean shutdown. */
enum rt_err rt_daemon_run(const struct rt_daemon_opts *opts);

/* Direct calls. Opens daemon `opts->index` (no socket: endpoint, zmq_ctx
 * and token are not used) and runs its components' init. It sends no
 * heartbeat: the caller keeps its own peers informed during a window. */
struct rt_daemon;
enum rt_err rt_daemon_open(const struct rt_daemon_opts *opts, struct rt_daemon **out);
/* Time of its earliest pending event, RT_TIME_NEVER if none. */
uint64_t rt_daemon_next_ps(const struct rt_daemon *d);
/* Events it ran so far; any thread may ask (a watchdog's view). */
uint64_t rt_daemon_events(const struct rt_daemon *d);
/* One window: takes the GRANT's messages, runs every event before its end
 * and returns the messages for other daemons (owned by the daemon until the
 * next call), as DONE carries them. */
enum rt_err rt_daemon_window(struct rt_daemon *d, const Kb__Grant *g, Kb__Envelope ***out,
			     size_t *n_out);
/* The end of the run: finalises the components, writes their output parts
 * and fills `bye` with their reports (valid until the daemon closes). */
enum rt_err rt_daemon_finish(struct rt_daemon *d, Kb__Bye *bye);
/* Releases everything (finalising the components if finish did not). */
void rt_daemon_close(struct rt_daemon **d);

/* Environment variable a daemon process finds its token in (then unsets). */
#define RT_DAEMON_TOKEN_ENV "KB_DAEMON_TOKEN"

#endif
