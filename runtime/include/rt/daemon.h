/* daemon.h — a daemon: hosts components and runs the participant side of
 * the conservative lockstep protocol (docs/architecture.md §lockstep).
 *
 * It connects a DEALER socket to the coordinator, announces itself with
 * READY, then for every GRANT runs each local event with t < window end,
 * buffering messages for other daemons, and answers DONE with them. On
 * SHUTDOWN it finalises its components, flushes their output parts and says
 * BYE. A handler error is reported to the coordinator as ERROR. */
#ifndef RT_DAEMON_H
#define RT_DAEMON_H

#include <stdint.h>

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

/* Environment variable a daemon process finds its token in (then unsets). */
#define RT_DAEMON_TOKEN_ENV "KB_DAEMON_TOKEN"

/* Directory for component output parts inside the output directory. */
#define RT_PARTS_DIR ".parts"

#endif
