/* local.c — a host run by an agent (launch.h, kb_local_*): the host
 * module's daemons of the agent's ranks, run one global window at a time
 * by a local coordinator, or, for one daemon run as a thread, by direct
 * calls (the "direct" daemon, rt_daemon_window).
 *
 * May use: host.h, cli, outputs, the runtime; the agent calls it. */
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cli.h"
#include "host.h"
#include "outputs.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/faults.h"
#include "rt/wire.h"

/* A host run by an agent: the host module's run of one host (struct
 * launch) behind a type of its own. */
struct kb_local {
	struct launch host;
};

enum rt_err kb_local_open(struct rt_job *job, const uint8_t *rank_here, char **argv,
			  struct kb_local **out)
{
	struct kb_local *local = calloc(1, sizeof(*local));
	struct launch *l = local ? &local->host : NULL;
	enum rt_err err;

	*out = NULL;
	if (!l)
		return rt_fail(RT_ENOMEM, "cannot allocate the host's daemons");
	*l = (struct launch){ .job = job, .sigfd = -1, .job_fd = -1, .outdir = KB_OUTDIR_INIT,
			      .run_argc = 1, .run_argv = argv, .rank_here = rank_here };
	rt_buf_init(&l->memfds);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	err = kb_job_topology(job, &l->topo);
	if (!err)
		err = kb_host_watch_signals(l);
	if (!err)
		err = kb_host_start(l);
	if (err) {
		struct rt_error kept;

		rt_err_keep(&kept, err);
		kb_host_teardown(l, true);
		free(local);
		return rt_err_restore(&kept);
	}
	*out = local;
	return RT_EOK;
}

const struct rt_topology *kb_local_topology(struct kb_local *local)
{
	return &local->host.topo;
}

enum rt_err kb_local_start(struct kb_local *local, enum rt_err (*tick)(void *arg), void *arg)
{
	struct launch *l = &local->host;

	l->tick = tick;
	l->tick_arg = arg;
	l->hooks = (struct rt_coord_hooks){ .fd = l->sigfd, .on_fd = kb_host_on_signal,
					    .tick = kb_host_tick, .cpu_ns = kb_host_daemon_cpu_ns,
					    .arg = l };
	return l->direct ? RT_EOK : rt_coord_start(l->coord, &l->hooks);
}

uint64_t kb_local_next_ps(const struct kb_local *local)
{
	const struct launch *l = &local->host;

	return l->direct ? rt_daemon_next_ps(l->direct) : rt_coord_next_ps(l->coord);
}

bool kb_local_direct_events(const struct kb_local *local, uint64_t *events)
{
	const struct launch *l = &local->host;

	if (l->direct)
		*events = rt_daemon_events(l->direct);
	return l->direct != NULL;
}

enum rt_err kb_local_step(struct kb_local *local, Kb__Sync **grant_p, struct rt_coord_away *out)
{
	Kb__Sync *s = *grant_p;

	*grant_p = NULL;
	return kb_local_step_frames(local, s->grant, &s, 1, out);
}

enum rt_err kb_local_step_frames(struct kb_local *local, const Kb__Grant *g, Kb__Sync **frames,
				 size_t n_frames, struct rt_coord_away *out)
{
	struct launch *l = &local->host;
	enum rt_err err;

	if (!l->direct)
		return rt_coord_step_frames(l->coord, g, frames, n_frames, out);
	/* the daemon copies the window's messages: the frames go now */
	err = rt_daemon_window(l->direct, g, &out->envelopes, &out->n);
	for (size_t k = 0; k < n_frames; k++)
		rt_wire_free_sync(frames[k]);
	out->next_ps = rt_daemon_next_ps(l->direct);
	l->direct_windows++;
	return err;
}

enum rt_err kb_local_finish(struct kb_local *local, Kb__Bye *bye)
{
	struct launch *l = &local->host;
	enum rt_err err;

	if (l->direct) {
		err = rt_daemon_finish(l->direct, bye);
		bye->windows = l->direct_windows;
		return err;
	}
	err = rt_coord_finish(l->coord);
	if (err)
		return err;
	rt_coord_take_reports(l->coord, &l->reports);
	l->bye_reports = calloc(l->reports.n_components + 1, sizeof(*l->bye_reports));
	if (!l->bye_reports)
		return rt_fail(RT_ENOMEM, "cannot gather this host's reports");
	for (uint32_t id = 0; id < l->reports.n_components; id++)
		if (l->reports.by_id[id])
			l->bye_reports[bye->n_reports++] = (Kb__ComponentReport *)l->reports.by_id[id];
	bye->reports = l->bye_reports;
	bye->windows = rt_coord_stats(l->coord)->windows;
	return RT_EOK;
}

enum rt_err kb_local_watch(struct kb_local *local)
{
	return kb_host_on_signal(&local->host);
}

void kb_local_forget_endpoint(struct kb_local *local)
{
	if (local)
		kb_host_remove_endpoint(&local->host, false);
}

void kb_local_close(struct kb_local **local_p, bool failed)
{
	struct kb_local *local = *local_p;

	if (!local)
		return;
	kb_host_teardown(&local->host, failed);
	free(local);
	*local_p = NULL;
}
