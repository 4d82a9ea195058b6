/* launch.c — a run (launch.h, kb_launch): the job shared with the daemons,
 * the host's daemons placed, checked against the limits, spawned and
 * started (kb_host_start, also an agent's host, local.c), the coordinator
 * run in this process, the outputs merged and committed; with a hosts file
 * only the coordinator's deployment side (Hello/Assign to one agent per
 * host, their file pieces into the staging folder; this process spawns
 * nothing).
 *
 * The host module's other files: host_spawn.c (memory, endpoint, spawning,
 * the daemon's entry) and host_watch.c (signals, reaping, teardown,
 * limits), sharing struct launch through host.h. Teardown is the same on
 * success, on error and on Ctrl-C: every daemon is told to stop, reaped
 * (SIGKILL after a grace period), the ipc socket directory is removed and
 * the shared-memory segments (memfds, which have no name to leak) are
 * closed. Daemon processes also die with the launcher (PR_SET_PDEATHSIG),
 * so even a SIGKILLed launcher leaves no daemon. The launcher is a child
 * subreaper: a process a kernel forked is re-parented to it when its
 * daemon ends, and teardown kills and reaps every child left (strays.h).
 * A daemon that ends before the coordinator released it is a failure, even
 * with status 0 (and, for inproc daemon threads, so is a call to exit()).
 * Each daemon learns its secret routing token from its environment, never
 * from argv (which `ps` shows to everyone).
 *
 * May use: host.h, cli, outputs, hosts, hostkeys, stops, the runtime. */
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
#include "hostkeys.h"
#include "hosts.h"
#include "outputs.h"
#include "stops.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/faults.h"
#include "rt/wire.h"

/* ---------------------------------------------------------------- run */

/* Daemons get the resolved job through an inherited sealed memfd named in
 * the environment: they never re-read --config or re-parse argv. */
static enum rt_err share_job(struct launch *l, enum rt_job_role role)
{
	char fd[16];
	enum rt_err err = rt_job_share(l->job, role, &l->topo, &l->job_fd);

	snprintf(fd, sizeof(fd), "%d", l->job_fd);
	if (!err && setenv(RT_JOB_FD_ENV, fd, 1))
		err = rt_fail(RT_EIO, "cannot pass the job to the daemons: %s", strerror(errno));
	return err;
}

/* Which daemons this process spawns: all, or an agent's (every daemon of
 * its ranks; the hosts check keeps each daemon on one host). */
static enum rt_err place_daemons(struct launch *l)
{
	const struct rt_topology *t = &l->topo;

	l->daemon_here = calloc(t->n_daemons ? t->n_daemons : 1, sizeof(*l->daemon_here));
	l->peer_of = calloc(t->n_components ? t->n_components : 1, sizeof(*l->peer_of));
	if (!l->daemon_here || !l->peer_of)
		return rt_fail(RT_ENOMEM, "cannot allocate the daemon table");
	for (uint32_t id = 0; id < t->n_components; id++) {
		const struct rt_component_desc *c = &t->components[id];
		bool here = !l->rank_here || (c->rank < l->job->config.ranks && l->rank_here[c->rank]);

		l->peer_of[id] = here ? c->daemon : RT_COORD_AWAY;
		if (here)
			l->daemon_here[c->daemon] = true;
	}
	return RT_EOK;
}

/* CPU time daemon `i` used so far (rt_coord_hooks.cpu_ns, ADR 0035): its
 * process's clock, or its thread's when it is an inproc daemon thread. */
uint64_t kb_host_daemon_cpu_ns(void *arg, uint32_t i)
{
	struct launch *l = arg;
	struct timespec ts;
	clockid_t clk;

	if (i >= l->topo.n_daemons || !l->daemon_here || !l->daemon_here[i])
		return RT_COORD_CPU_UNKNOWN;
	if (l->pids && l->pids[i]) {
		if (clock_getcpuclockid(l->pids[i], &clk))
			return RT_COORD_CPU_UNKNOWN;
	} else if (l->threads && i < l->n_threads &&
		   !__atomic_load_n(&l->thread_ended[i], __ATOMIC_ACQUIRE)) {
		if (pthread_getcpuclockid(l->threads[i], &clk))
			return RT_COORD_CPU_UNKNOWN;
	} else {
		return RT_COORD_CPU_UNKNOWN;
	}
	if (clock_gettime(clk, &ts))
		return RT_COORD_CPU_UNKNOWN;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum rt_err kb_host_tick(void *arg)
{
	struct launch *l = arg;

	return l->tick ? l->tick(l->tick_arg) : RT_EOK;
}

/* An agent whose host holds one daemon, run as a thread, runs it in its
 * own thread instead, by direct calls: a cross-host window then costs no
 * local round (two thread wake-ups, which dominate it). */
static bool runs_direct(const struct launch *l)
{
	uint32_t here = 0;

	for (uint32_t i = 0; i < l->topo.n_daemons; i++)
		here += l->daemon_here[i];
	return l->rank_here && l->job->transport == RT_TRANSPORT_INPROC && here == 1;
}

static enum rt_err open_direct(struct launch *l)
{
	struct rt_daemon_opts opts = { .job = l->job, .topo = &l->topo };

	while (!l->daemon_here[opts.index])
		opts.index++;
	return rt_daemon_open(&opts, &l->direct);
}

/* Memory, the job file, the endpoint, the coordinator (an agent's: only
 * its daemons present, steps to global horizons) and the daemons. */
enum rt_err kb_host_start(struct launch *l)
{
	struct rt_coord_layout agent = { .n_peers = l->topo.n_daemons, .sub = true,
					 .lookahead_ps = l->topo.lookahead_ps };
	enum rt_err err = place_daemons(l);

	agent.peer_of = l->peer_of;
	if (!err && kb_check_inproc(l->job)) /* an agent's job came from afar */
		err = RT_EUSAGE;
	if (!err)
		err = kb_host_check_limits(l);
	if (!err)
		err = kb_host_make_memory(l);
	if (!err && runs_direct(l))
		return open_direct(l);
	if (!err && l->job->transport != RT_TRANSPORT_INPROC)
		err = share_job(l, RT_JOB_FOR_DAEMON);
	if (!err)
		err = kb_host_make_endpoint(l);
	if (!err) {
		l->zctx = zmq_ctx_new();
		/* inproc daemons are sockets of this context: lift the 1023 default */
		if (l->zctx && l->topo.n_daemons + 64 > 1023 &&
		    zmq_ctx_set(l->zctx, ZMQ_MAX_SOCKETS, (int)l->topo.n_daemons + 64) < 0)
			err = rt_fail(RT_ETRANSPORT, "cannot allow %u ZeroMQ sockets: %s",
				      l->topo.n_daemons + 64, zmq_strerror(zmq_errno()));
		if (!err)
			err = rt_coord_new_layout(l->job, &l->topo, l->zctx, l->endpoint,
					  l->rank_here ? &agent : NULL, &l->coord);
		rt_job_forget_secret(l->job); /* the socket holds it now */
	}
	if (!err)
		err = l->job->transport == RT_TRANSPORT_INPROC ? kb_host_spawn_threads(l)
								   : kb_host_spawn_processes(l);
	return err;
}

static enum rt_err on_file(void *arg, uint32_t host, const Kb__FilePart *part)
{
	struct launch *l = arg;
	char label[RT_COORD_LABEL_MAX];
	enum rt_err err;

	/* a test's stand-in for a coordinator slow to take its hosts' files
	 * (a loaded machine, a slow disk): each piece waits this long */
	if (l->drain_delay_ms)
		usleep(l->drain_delay_ms * 1000u);
	err = kb_hosts_write_part(l->job->out_dir, part);

	if (err)
		return rt_fail(err, "%s: %s", kb_hosts_label(l->hosts, host, label, sizeof(label)),
			       rt_last_error());
	return RT_EOK;
}

/* The coordinator of a run across hosts: one participant per host (its
 * agent), windows as long as the shortest link between hosts. */
static enum rt_err place_hosts(struct launch *l, struct rt_coord_layout *lay)
{
	const struct rt_topology *t = &l->topo;
	uint32_t n = l->hosts->n_hosts;

	l->peer_of = calloc(t->n_components ? t->n_components : 1, sizeof(*l->peer_of));
	l->labels = calloc(n, sizeof(*l->labels));
	l->label_ptrs = calloc(n, sizeof(*l->label_ptrs));
	if (!l->peer_of || !l->labels || !l->label_ptrs)
		return rt_fail(RT_ENOMEM, "cannot allocate the host table");
	for (uint32_t id = 0; id < t->n_components; id++) {
		uint32_t rank = t->components[id].rank;

		l->peer_of[id] = rank < l->hosts->n_ranks ? l->hosts->host_of_rank[rank] : 0;
	}
	for (uint32_t h = 0; h < n; h++)
		l->label_ptrs[h] = kb_hosts_label(l->hosts, h, l->labels[h], sizeof(l->labels[h]));
	*lay = (struct rt_coord_layout){ .n_peers = n, .peer_of = l->peer_of,
					 .labels = l->label_ptrs, .agents = true,
					 .lookahead_ps = RT_TIME_NEVER,
					 .ready_timeout_ms = l->hosts->agent_timeout_s * 1000 };
	for (size_t k = 0; k < t->n_links; k++)
		if (l->peer_of[t->links[k].src] != l->peer_of[t->links[k].dst] &&
		    t->links[k].latency_ps < lay->lookahead_ps)
			lay->lookahead_ps = t->links[k].latency_ps;
	return RT_EOK;
}

/* The job for the agents' Assign, a packed JobSpec: each host's daemons
 * adopt what one host's would, without the run's keys (the server secret
 * is the coordinator's; an agent has its own client keys) or this host's
 * descriptors (RT_JOB_FOR_AGENT). */
static enum rt_err job_bytes(struct launch *l, struct rt_buf *out)
{
	return rt_job_encode(l->job, RT_JOB_FOR_AGENT, out);
}

/* The output folder, and the stop guard told where the staging folder is
 * (the stop signals are blocked here: kb_host_watch_signals). */
static enum rt_err prepare_outputs(struct launch *l)
{
	enum rt_err err = kb_outputs_prepare(l->job, &l->outdir);

	if (!err)
		kb_guard_staging(l->job->out_dir);
	return err;
}

/* With KB_REPORT_WINDOWS_CPU=1 in the environment, one stderr line gives
 * the coordinator's global windows and the CPU it used running them (a
 * bench's figure: bench/mesh_bench.c; not in summary.json, whose bytes
 * must not depend on the run). */
static void report_windows_cpu(const struct rt_coord_stats *st)
{
	const char *env = getenv("KB_REPORT_WINDOWS_CPU");

	if (env && !strcmp(env, "1"))
		fprintf(stderr, "kernbench: coordinator: %llu windows, %.6f s CPU\n",
			(unsigned long long)st->windows, st->windows_cpu_s);
}

static enum rt_err run_hosts(struct launch *l, struct kb_run_facts *facts)
{
	struct rt_coord_hooks hooks = { .fd = l->sigfd, .on_fd = kb_host_on_signal, .on_file = on_file,
					.arg = l };
	struct rt_coord_layout lay;
	struct rt_buf job;
	enum rt_err err = prepare_outputs(l);

	rt_buf_init(&job);
	if (getenv("KB_DRAIN_DELAY_MS"))
		l->drain_delay_ms = (unsigned)strtoul(getenv("KB_DRAIN_DELAY_MS"), NULL, 10) % 2000;
	/* always CURVE (ADR 0036): without --keys, ephemeral keys whose client
	 * side only agents of this user on this machine can read */
	if (!err && !l->job->keys.on) {
		err = rt_keys_generate(&l->job->keys);
		if (!err)
			err = kb_hostkeys_publish(&l->job->keys, l->hosts->coordinator);
		l->keys_published = !err;
	}
	if (!err)
		err = place_hosts(l, &lay);
	if (!err)
		err = job_bytes(l, &job);
	if (!err) {
		lay.job_bytes = job.data;
		lay.job_len = job.len;
		l->zctx = zmq_ctx_new();
		err = rt_coord_new_layout(l->job, &l->topo, l->zctx, l->hosts->coordinator, &lay,
					  &l->coord);
		rt_job_forget_secret(l->job); /* the socket holds it now */
	}
	rt_buf_release(&job);
	if (!err)
		err = rt_coord_run(l->coord, &hooks, &facts->coord);
	if (err)
		return err;
	report_windows_cpu(&facts->coord);
	rt_coord_take_reports(l->coord, &facts->reports);
	/* windows: the most any host ran inside; global_windows: across hosts */
	facts->global_windows = facts->coord.windows;
	facts->coord.windows = 0;
	for (uint32_t i = 0; i < facts->reports.n_byes; i++)
		if (facts->reports.byes[i]->bye->windows > facts->coord.windows)
			facts->coord.windows = facts->reports.byes[i]->bye->windows;
	facts->lookahead_ps = lay.lookahead_ps;
	return RT_EOK;
}

static enum rt_err run(struct launch *l, struct kb_run_facts *facts)
{
	struct rt_coord_hooks hooks = { .fd = l->sigfd, .on_fd = kb_host_on_signal,
					.cpu_ns = kb_host_daemon_cpu_ns, .arg = l };
	enum rt_err err;

	if (l->hosts)
		return run_hosts(l, facts);
	err = prepare_outputs(l);
	if (!err)
		err = kb_host_start(l);
	if (!err)
		err = rt_coord_run(l->coord, &hooks, &facts->coord);
	if (!err)
		rt_coord_take_reports(l->coord, &facts->reports);
	return err;
}

/* A failed run: every daemon stopped, the output folder put back (as it
 * was for a usage error, else without results), one line (the error
 * kept before the teardown, which may fail too); the status. */
static int fail_run(struct launch *l, enum rt_err err, bool torn_down)
{
	struct rt_error kept;

	rt_err_keep(&kept, err);
	/* stopped by a signal, the line comes first: an engine that sent it
	 * (mpirun, scancel) may SIGKILL this process before teardown ends */
	if (l->signal_seen)
		rt_print_error(kept.line);
	if (!torn_down)
		kb_host_teardown(l, true);
	kb_outputs_abandon(l->job, &l->outdir, err == RT_EUSAGE);
	kb_guard_staging(NULL);
	if (!l->signal_seen)
		rt_print_error(kept.line);
	if (l->signal_seen)
		return l->signal_seen == SIGINT ? 130 : 128 + l->signal_seen;
	return rt_exit_status(err);
}

/* The outputs merged and moved into place (the stop guard removes the
 * staging folder if a stop signal cuts the merge short; the commit itself
 * is not cut). */
static enum rt_err finish_outputs(struct launch *l, struct kb_run_facts *facts)
{
	sigset_t held;
	enum rt_err err;

	rt_topology_init(&l->topo);
	err = kb_job_topology(l->job, &l->topo);
	if (!err) /* test build: KB_FAULT=einval@merge, a merge refusing a value */
		err = rt_fault_point("merge");
	if (!err)
		err = kb_outputs_merge(l->job, &l->topo, facts);
	kb_stops_hold(&held);
	if (!err)
		err = kb_outputs_commit(l->job, &l->outdir);
	if (!err)
		kb_guard_staging(NULL);
	kb_stops_release(&held);
	rt_topology_release(&l->topo);
	return err;
}

int kb_launch(struct rt_job *job, const struct kb_hosts *hosts, int argc, char **argv)
{
	struct launch l = { .job = job, .sigfd = -1, .job_fd = -1, .outdir = KB_OUTDIR_INIT,
			    .run_argc = argc, .run_argv = argv, .hosts = hosts };
	struct kb_run_facts facts = { .argc = argc, .argv = argv, .started_s = rt_mono_s() };
	enum rt_err err;

	kb_guard_stops();
	/* a workload refusing its arguments: RT_EUSAGE, like the CLI's checks */
	err = kb_job_topology(job, &l.topo);
	rt_buf_init(&l.memfds);
	/* what kernels fork outlives its daemon as our child, to be killed */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (!err)
		err = kb_host_watch_signals(&l);
	if (!err)
		err = run(&l, &facts);
	facts.daemons = l.topo.n_daemons;
	if (!l.hosts)
		facts.lookahead_ps = l.topo.lookahead_ps;
	/* RT_EUSAGE: a daemon refused an --arg value, as the CLI would */
	if (err)
		return fail_run(&l, err, false);
	kb_host_teardown(&l, false);
	err = finish_outputs(&l, &facts);
	rt_end_reports_release(&facts.reports);
	if (err) /* RT_EUSAGE: an --arg or --inputs nothing read */
		return fail_run(&l, err, true);
	return 0;
}
