/* agent.c — `kernbench agent`: one host's part of a run across hosts.
 *
 * The agent says Hello to the coordinator (on a throw-away routing id),
 * gets its host index, its token and the resolved job (Assign), spawns and
 * supervises its ranks' daemons exactly as a one-host launcher does
 * (kb_local_*), and reconnects under its token as one participant hosting
 * every component of its ranks. Each GRANT [T, T + Lg) from the coordinator
 * is run as local windows over its daemons up to T + Lg (rt_coord_step);
 * DONE carries what goes to other hosts. At SHUTDOWN it collects its
 * daemons' BYEs, ships its output files (FilePart, credited by the
 * coordinator's FileAck), says BYE with all their reports and the list of
 * files, and exits 0 only once the coordinator confirmed it (ADR 0050).
 * Both sides send a heartbeat every second; an agent that
 * hears nothing from its coordinator for RT_COORD_SILENCE_MS stops its
 * daemons (ADR 0019).
 *
 * This file is the agent's start and its keeper thread; agent_link.c its
 * connection, agent_windows.c its window loop, agent_ship.c its results
 * (agent_state.h). May use: agent_state.h, cli, launch, strays, stops,
 * tidy, agent_env, hosts, the runtime. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "agent_env.h"
#include "agent_state.h"
#include "cli.h"
#include "hosts.h"
#include "launch.h"
#include "mesh.h"
#include "stops.h"
#include "strays.h"
#include "tidy.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/sock.h"
#include "rt/wire.h"

/* What the keeper last saw of a direct daemon (direct_watchdog). */
struct direct_watch {
	uint64_t events;   /* its event count */
	uint64_t moved_ms; /* when it last moved (0: not watching) */
	uint64_t looked_ms;
	uint64_t cpu_ns;   /* the agent thread's CPU time then */
};

/* GRANT -> local windows -> DONE, until SHUTDOWN. */
static enum rt_err participate(struct agent *a)
{
	enum rt_err err = kb_local_start(a->local, kb_agent_keep_alive, a);

	if (!err)
		err = kb_mesh_open(a->zctx, a->coordinator, kb_local_topology(a->local),
				   a->job->host_of_rank, &a->mesh);
	if (!err)
		err = kb_agent_send_ready(a);
	a->heard_ms = rt_mono_ms();
	a->joined = !err;
	a->next_local_ps = kb_local_next_ps(a->local);
	while (!err) {
		Kb__Sync *s = NULL;

		err = kb_agent_wait_next(a, &s);
		if (err)
			break;
		if (s->body_case == KB__SYNC__BODY_GRANT && a->mesh && kb_mesh_fanout(a->mesh)) {
			err = kb_agent_on_tree_grant(a, &s);
		} else if (s->body_case == KB__SYNC__BODY_GRANT) {
			err = kb_agent_on_grant(a, &s);
		} else if (s->body_case == KB__SYNC__BODY_MESH) {
			a->n_hosts = (uint32_t)s->mesh->n_peers;
			err = kb_agent_on_mesh(a, s->mesh);
		} else if (s->body_case == KB__SYNC__BODY_SHUTDOWN) {
			bool abort_run = s->shutdown->abort;

			rt_wire_free_sync(s);
			a->stopped = abort_run;
			return abort_run ? rt_fail(RT_EINTERRUPTED, "%s: the coordinator stopped the run",
						   a->label)
					 : kb_agent_finish(a);
		} else {
			err = rt_fail(RT_EPROTOCOL, "%s: unexpected frame %d from the coordinator",
				      a->label, s->body_case);
		}
		rt_wire_free_sync(s);
	}
	return err;
}

/* What went wrong here, to the coordinator (which prints it) and to our
 * own stderr. */
static void report_error(struct agent *a, enum rt_err code)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Error error = KB__ERROR__INIT;
	char line[1400];
	const char *what = rt_last_error()[0] ? rt_last_error() : rt_err_msg(code);

	if (!strncmp(what, a->label, strlen(a->label)))
		snprintf(line, sizeof(line), "%s", what);
	else
		snprintf(line, sizeof(line), "%s: %s", a->label, what);
	rt_print_error(line);
	if (!a->sock || a->stopped)
		return;
	error.daemon = a->host;
	error.component = a->label;
	error.message = line;
	error.usage = code == RT_EUSAGE;
	sync.body_case = KB__SYNC__BODY_ERROR;
	sync.error = &error;
	/* stay connected until the coordinator answers (its SHUTDOWN), as a
	 * daemon does: it reads the reason before it sees this host go. Not
	 * long after a stop signal: the engine that sent it to every process
	 * (mpirun, scancel) kills what is left a second later (mpirun) */
	if (kb_agent_send_up(a, &sync) == RT_EOK) {
		zmq_pollitem_t item = { .socket = a->sock, .events = ZMQ_POLLIN };
		uint64_t until = rt_mono_ms() + (code == RT_EINTERRUPTED ? 200 : 2000);
		Kb__Sync *got = NULL;

		while (rt_mono_ms() < until && zmq_poll(&item, 1, 200) >= 0) {
			if (kb_agent_recv_up(a, 0, &got) || (got && got->body_case != KB__SYNC__BODY_PROGRESS))
				break;
			rt_wire_free_sync(got);
			got = NULL;
		}
		rt_wire_free_sync(got);
	}
}

/* ---------------------------------------------------------------- keeper */

/* A stop signal waiting for this process (stops.h: blocked everywhere,
 * read from the host's signalfd between windows). */
enum rt_err kb_agent_stop_signal_pending(const struct agent *a)
{
	int sig = kb_stop_signal_pending();

	if (!sig)
		return RT_EOK;
	return rt_fail(RT_EINTERRUPTED, "%s: interrupted by SIG%s%s; stopped every daemon", a->label,
		       sigabbrev_np(sig), kb_stop_signal_meaning(sig));
}

/* CPU time of the agent's own thread, which runs a direct daemon. */
static uint64_t agent_cpu_ns(const struct agent *a)
{
	struct timespec ts;

	if (!a->main_clock_ok || clock_gettime(a->main_clock, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The watchdog of a daemon run in this thread, which has no local
 * coordinator to watch it: no event and no CPU used (at least 1% of a
 * core since the last look: computing in one long event is alive, ADR
 * 0035) for run.watchdog_ms ends the run, as a local coordinator's
 * watchdog would. */
static enum rt_err direct_watchdog(struct agent *a, uint64_t count, struct direct_watch *w)
{
	uint64_t now = rt_mono_ms(), cpu = agent_cpu_ns(a);
	bool computing = w->looked_ms && cpu > w->cpu_ns &&
			 cpu - w->cpu_ns >= (now - w->looked_ms) * 10000;

	w->looked_ms = now;
	w->cpu_ns = cpu;
	if (count != w->events || computing || !w->moved_ms) {
		w->events = count;
		w->moved_ms = now;
	} else if (now - w->moved_ms >= a->job->config.watchdog_ms) {
		return rt_fail(RT_ETIMEOUT, "%s: its daemon ran no event and used no CPU for %llu ms "
			       "(watchdog; set run.watchdog_ms to change)", a->label,
			       (unsigned long long)(now - w->moved_ms));
	}
	return RT_EOK;
}

/* Ends this host now, from the keeper: the daemon computing in this
 * thread cannot be stopped otherwise, and what it computes is lost. */
static void abandon_host(struct agent *a, enum rt_err err)
{
	report_error(a, err);
	kb_kill_strays();
	kb_agent_remove_staging(a, true);
	fflush(NULL);
	_exit(1);
}

/* While this thread runs the host (starts thousands of daemons, or runs a
 * window, where a daemon in this thread may compute for seconds in one
 * data-mode event and beats only between events) the keeper thread sends
 * the heartbeat, reads the coordinator's frames, looks for a stop signal
 * and is a direct daemon's watchdog. What it finds goes to this thread
 * (keeper_verdict), except during a direct daemon's window: then it ends
 * the host itself, at once. */
static void *keeper_main(void *arg)
{
	struct agent *a = arg;
	const struct timespec nap = { 0, KEEPER_NAP_MS * 1000000L };
	struct direct_watch watch = { 0 };
	uint64_t count;

	while (!__atomic_load_n(&a->keeper_quit, __ATOMIC_RELAXED)) {
		bool direct;
		enum rt_err err;

		nanosleep(&nap, NULL);
		if (!__atomic_load_n(&a->lent, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&a->keeper_failed, __ATOMIC_RELAXED)) {
			watch.moved_ms = 0; /* between windows the coordinator's watchdog counts */
			continue;
		}
		if (pthread_mutex_trylock(&a->sock_lock))
			continue;
		/* holding the lock, the socket is lent: the agent's thread takes
		 * it back (lent = 0) only under the lock */
		direct = __atomic_load_n(&a->host_open, __ATOMIC_RELAXED) &&
			 kb_local_direct_events(a->local, &count);
		err = kb_agent_keep_up(a);
		if (!err)
			err = kb_agent_stop_signal_pending(a);
		if (!err && direct)
			err = direct_watchdog(a, count, &watch);
		if (err) /* kept first: abandoning the host may fail too */
			rt_err_keep(&a->keeper_error, err);
		if (err && direct)
			abandon_host(a, err);
		if (err)
			__atomic_store_n(&a->keeper_failed, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&a->sock_lock);
	}
	return NULL;
}

/* The keeper takes no signal (it starts with all blocked): SIGCHLD and the
 * stop signals wait for the host's signalfd, which only reads blocked ones. */
static void start_keeper(struct agent *a)
{
	sigset_t all, old;

	a->main_clock_ok = pthread_getcpuclockid(pthread_self(), &a->main_clock) == 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	a->keeper_on = pthread_create(&a->keeper, NULL, keeper_main, a) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void stop_keeper(struct agent *a)
{
	if (!a->keeper_on)
		return;
	__atomic_store_n(&a->keeper_quit, 1, __ATOMIC_RELAXED);
	pthread_join(a->keeper, NULL);
	a->keeper_on = false;
}

/* ---------------------------------------------------------------- main */

/* This host's daemons, started while the keeper beats for this host:
 * starting thousands takes seconds, and an assigned host that says nothing
 * for RT_COORD_SILENCE_MS is taken for dead. */
static enum rt_err open_host(struct agent *a, char **argv)
{
	enum rt_err err, verdict;

	kb_agent_lend_socket(a);
	err = kb_local_open(a->job, a->rank_here, argv, &a->local);
	verdict = kb_agent_take_socket(a);
	if (!err && !verdict)
		__atomic_store_n(&a->host_open, 1, __ATOMIC_RELAXED);
	return err ? err : verdict;
}

static int usage(const char *why)
{
	rt_fail(RT_EUSAGE, "agent: %s (see `kernbench agent --help`)", why);
	rt_print_error(rt_last_error());
	return rt_exit_status(RT_EUSAGE);
}

/* The command line (cli.c), then what it leaves out: the index from the
 * environment, and whether the keys are the coordinator's (hostkeys.h). */
static int parse_args(struct agent *a, int argc, char **argv)
{
	int rc = kb_cli_parse_agent(argc, argv, &a->opts);

	if (rc >= 0)
		return rc ? rc : -1; /* -1: --help */
	a->coordinator = a->opts.coordinator;
	a->keys = a->opts.keys;
	explicit_bzero(&a->opts.keys, sizeof(a->opts.keys));
	if (a->opts.have_index)
		a->index = (struct kb_agent_index){ a->opts.index, 0, "--index" };
	if (!kb_hosts_loopback(a->coordinator) && !a->keys.on)
		return usage("a coordinator off loopback needs --keys FILE (CURVE)");
	if (!a->keys.on && rt_keys_check_curve())
		return usage(rt_last_error());
	a->ephemeral = !a->keys.on; /* the coordinator's, left on this machine */
	if (!a->opts.have_index && kb_agent_env_index(getenv, &a->index))
		return usage(rt_last_error());
	return 0;
}

/* The host's own output folder: /tmp/kb-agent-PID-XXXXXX (removed at the
 * end, and by the next agent if this one was killed). */
static enum rt_err make_staging(struct agent *a)
{
	char parts[RT_PATH_MAX + 32];

	snprintf(a->staging, sizeof(a->staging), "/tmp/kb-agent-%d-XXXXXX", (int)getpid());
	if (!mkdtemp(a->staging)) {
		a->staging[0] = '\0';
		return rt_fail(RT_EIO, "%s: cannot create a folder in /tmp: %s", a->label,
			       strerror(errno));
	}
	snprintf(parts, sizeof(parts), "%s/%s", a->staging, RT_PARTS_DIR);
	if (mkdir(parts, 0700))
		return rt_fail(RT_EIO, "%s: cannot create %s: %s", a->label, parts, strerror(errno));
	snprintf(a->job->out_dir, sizeof(a->job->out_dir), "%s", a->staging);
	kb_guard_staging(a->staging);
	return RT_EOK;
}

/* The job as this host runs it: local daemons as the run asks (threads,
 * ipc or loopback tcp), no CURVE inside the host, parts into its own
 * folder. */
static enum rt_err localise_job(struct agent *a)
{
	struct rt_job *job = a->job;

	snprintf(job->config.bind_host, sizeof(job->config.bind_host), "127.0.0.1");
	explicit_bzero(&job->keys, sizeof(job->keys));
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++)
		job->memory_fds[i] = -1;
	job->quiet = true;
	return make_staging(a);
}

/* ZeroMQ's threads must not take the signals the agent reads from its
 * signalfd (a SIGCHLD they took would be lost): they start with them
 * blocked. */
static void *start_zmq(void)
{
	sigset_t block, old;
	void *zctx, *sock;

	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	kb_stop_signals_add(&block);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	zctx = zmq_ctx_new();
	sock = zctx ? zmq_socket(zctx, ZMQ_DEALER) : NULL; /* starts its threads */
	if (sock)
		zmq_close(sock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return zctx;
}

int kb_agent_main(int argc, char **argv)
{
	static char *daemon_argv[] = { (char *)"agent", NULL };
	struct agent a = { 0 };
	enum rt_err err;
	bool ran = false; /* this host's daemons started */
	int rc = parse_args(&a, argc, argv);

	if (rc)
		return rc < 0 ? 0 : rc; /* -1: --help */
	kb_guard_stops();
	kb_sweep_dead_tmp("kb-agent-"); /* what killed agents left */
	snprintf(a.label, sizeof(a.label), "agent %u", a.index.index);
	rt_buf_init(&a.frame);
	pthread_mutex_init(&a.sock_lock, NULL);
	pthread_mutex_lock(&a.sock_lock); /* the socket is this thread's but when lent */
	a.job = calloc(1, sizeof(*a.job));
	a.zctx = start_zmq();
	err = a.job && a.zctx ? RT_EOK : rt_fail(RT_ENOMEM, "agent: out of memory");
	if (!err)
		err = kb_agent_hello(&a);
	/* under the token from now on: a failure starting this host's daemons
	 * reaches the coordinator as ERROR */
	if (!err)
		err = kb_agent_open_socket(&a, a.token);
	if (!err) {
		kb_agent_watch_connection(&a, ZMQ_EVENT_DISCONNECTED);
		start_keeper(&a);
	}
	if (!err)
		err = localise_job(&a);
	if (!err)
		err = open_host(&a, daemon_argv);
	ran = !err;
	if (!err)
		err = participate(&a);
	if (err) {
		kb_agent_remove_staging(&a, false);
		kb_local_forget_endpoint(a.local);
		report_error(&a, err);
	}
	stop_keeper(&a);
	pthread_mutex_unlock(&a.sock_lock);
	kb_local_close(&a.local, err != RT_EOK);
	kb_agent_remove_staging(&a, true);
	kb_agent_close_socket(&a);
	kb_mesh_close(&a.mesh);
	free(a.sent_to);
	if (a.zctx)
		zmq_ctx_term(a.zctx);
	rt_buf_release(&a.frame);
	free(a.job);
	free(a.files);
	explicit_bzero(&a.keys, sizeof(a.keys));
	/* a failed run may have stopped this host's in-process kernels mid-way
	 * on their coroutines: what they hold goes with the process, as a
	 * daemon's does (host_spawn.c's abandon_kernels), not through atexit */
	if (err && ran) {
		fflush(NULL);
		_exit(1);
	}
	return err == RT_EOK ? 0 : err == RT_EUSAGE ? 2 : 1;
}
