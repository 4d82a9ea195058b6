/* launch.h — the host module and the run (launch.c): spawns a host's
 * daemons (processes, or threads for --transport inproc), checks the limits
 * they need, supervises and reaps them, tears down; a one-host run with the
 * coordinator in this process, or, with a hosts file, only the
 * coordinator's deployment side (one agent per host runs the daemons).
 * A host run by an agent (kb_local_*) is the same host module; one daemon
 * run by direct calls (the "direct" daemon, rt_daemon_window) is a variant
 * of it.
 *
 * May use: cli (checks of the job), outputs, strays, hosts, hostkeys,
 * stops, tasks, tidy, the runtime; never agent or spmd, which call it. */
#ifndef KB_LAUNCH_H
#define KB_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/coord.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

/* Runs a job end to end; returns the process exit code. With `hosts` this
 * process is only the coordinator: one agent per host runs the daemons. */
struct kb_hosts;
int kb_launch(struct rt_job *job, const struct kb_hosts *hosts, int argc, char **argv);

/* The daemons of one host, spawned and supervised as a one-host run's are
 * (an agent's ranks; rank_here has one flag per rank), run one global
 * window at a time: by a local coordinator with only them present
 * (rt_coord_step), or, for one daemon run as a thread, by direct calls
 * (rt_daemon_window). Caller closes it. */
struct kb_local;
enum rt_err kb_local_open(struct rt_job *job, const uint8_t *rank_here, char **argv,
			  struct kb_local **out);
const struct rt_topology *kb_local_topology(struct kb_local *local);
/* Starts the host's windows; `tick` runs now and then during each one,
 * beside the host's own watch of its children and signals. */
enum rt_err kb_local_start(struct kb_local *local, enum rt_err (*tick)(void *arg), void *arg);
/* Earliest pending time on this host (RT_TIME_NEVER: none). */
uint64_t kb_local_next_ps(const struct kb_local *local);
/* A host of one daemon run by direct calls: its events so far (any thread
 * may ask); false for a host with a local coordinator (its own watchdog). */
bool kb_local_direct_events(const struct kb_local *local, uint64_t *events);
/* Runs one GRANT (taken: *grant_p is NULL after) as rt_coord_step does. */
enum rt_err kb_local_step(struct kb_local *local, Kb__Sync **grant_p, struct rt_coord_away *out);
/* The same for a window whose messages point into `frames`, which it
 * takes (rt_coord_step_frames). */
enum rt_err kb_local_step_frames(struct kb_local *local, const Kb__Grant *g, Kb__Sync **frames,
				 size_t n_frames, struct rt_coord_away *out);
/* The end of the run: outputs written, `bye` filled with the reports and
 * window count (valid until the close). */
enum rt_err kb_local_finish(struct kb_local *local, Kb__Bye *bye);
/* Handles this host's pending signals and ended children (never blocks). */
enum rt_err kb_local_watch(struct kb_local *local);
/* Tells the daemons to stop (failed: at once), reaps them, frees memory. */
void kb_local_close(struct kb_local **local_p, bool failed);
/* A failed host: what it made outside its folders (the ipc endpoint's
 * folder in /tmp) goes now, before it says why and waits for an answer:
 * the engine that started it may SIGKILL it a second later. */
void kb_local_forget_endpoint(struct kb_local *local);

/* Makes sure the stack limit is workable before anything runs: raises a
 * small soft limit (and restarts, as thread stacks follow the limit at
 * start-up) or exits with one line saying how much is needed. */
void kb_check_stack(char **argv);

/* Entry of a re-executed daemon process. */
int kb_daemon_main(int argc, char **argv);

#endif
