/* launch.c — spawns the daemons, runs the coordinator, tears down.
 *
 * Teardown is the same on success, on error and on Ctrl-C: every daemon is
 * told to stop, reaped (SIGKILL after a grace period), the ipc socket
 * directory is removed and the shared-memory segments (memfds, which have no
 * name to leak) are closed. Daemon processes also die with the launcher
 * (PR_SET_PDEATHSIG), so even a SIGKILLed launcher leaves no daemon.
 *
 * The launcher is a child subreaper: a process a kernel forked is re-parented
 * to it when its daemon ends, and teardown kills and reaps every child left.
 * A daemon that ends before the coordinator released it is a failure, even
 * with status 0 (and, for inproc daemon threads, so is a call to exit()).
 * Each daemon learns its secret routing token from its environment, never
 * from argv (which `ps` shows to everyone). */
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

#include "hostkeys.h"
#include "hosts.h"
#include "launcher.h"
#include "stops.h"
#include "tasks.h"
#include "tidy.h"
#include "rt/buf.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/wire.h"

extern char **environ;

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
 * threads. */
static struct launch *running;

static void put_text(const char *text);
static void put_u64(uint64_t v);
static void *guard_stack(void);
static void unguard_stack(void *stack);

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- memory */

/* Data mode: one memfd per rank (HBM) and per PE (TCM). Children inherit
 * them; nothing is named in /dev/shm, so nothing can be left behind. */
static enum rt_err make_memory(struct launch *l)
{
	struct rt_job *job = l->job;
	const struct rt_config *cfg = &job->config;
	enum rt_err err = rt_buf_printf(&l->memfds, "%s", job->mode == RT_MODE_DATA ? "" : "-");

	for (uint32_t r = 0; !err && job->mode == RT_MODE_DATA && r < cfg->ranks; r++) {
		int fd;

		if (l->rank_here && !l->rank_here[r]) { /* another host's */
			err = rt_buf_printf(&l->memfds, "%s-1", r ? "," : "");
			for (uint32_t p = 0; !err && p < cfg->pes; p++)
				err = rt_buf_printf(&l->memfds, ",-1");
			continue;
		}
		fd = memfd_create("kb-hbm", 0);

		if (fd < 0 || ftruncate(fd, (off_t)cfg->hbm_bytes) < 0) {
			if (fd >= 0)
				close(fd);
			return rt_fail(RT_EIO, "cannot create %llu bytes of HBM for rank %u: %s",
				       (unsigned long long)cfg->hbm_bytes, r, strerror(errno));
		}
		job->hbm_fds[r] = fd;
		err = rt_buf_printf(&l->memfds, "%s%d", r ? "," : "", fd);
		for (uint32_t p = 0; !err && p < cfg->pes; p++) {
			int t = memfd_create("kb-tcm", 0);

			if (t < 0 || ftruncate(t, (off_t)(cfg->tcm_scratch_bytes +
							   cfg->tcm_staging_bytes)) < 0) {
				if (t >= 0)
					close(t);
				return rt_fail(RT_EIO, "cannot create TCM for r%u.pe%u: %s", r, p,
					       strerror(errno));
			}
			job->tcm_fds[r * 64 + p] = t;
			err = rt_buf_printf(&l->memfds, ",%d", t);
		}
	}
	return err;
}

static void close_memory(struct rt_job *job)
{
	for (size_t i = 0; i < sizeof(job->hbm_fds) / sizeof(job->hbm_fds[0]); i++)
		if (job->hbm_fds[i] >= 0) {
			close(job->hbm_fds[i]);
			job->hbm_fds[i] = -1;
		}
	for (size_t i = 0; i < sizeof(job->tcm_fds) / sizeof(job->tcm_fds[0]); i++)
		if (job->tcm_fds[i] >= 0) {
			close(job->tcm_fds[i]);
			job->tcm_fds[i] = -1;
		}
}

/* Daemons rebuild the fd table from the launcher's list. */
static enum rt_err parse_memfds(struct rt_job *job, const char *list)
{
	const struct rt_config *cfg = &job->config;
	const char *p = list;

	if (!strcmp(list, "-"))
		return RT_EOK;
	for (uint32_t r = 0; r < cfg->ranks; r++)
		for (uint32_t k = 0; k <= cfg->pes; k++) {
			char *end;
			long fd = strtol(p, &end, 10);

			if (end == p)
				return rt_fail(RT_EINVAL, "daemon: bad memory fd list '%s'", list);
			if (k == 0)
				job->hbm_fds[r] = (int)fd;
			else
				job->tcm_fds[r * 64 + k - 1] = (int)fd;
			p = *end == ',' ? end + 1 : end;
		}
	return RT_EOK;
}

/* ---------------------------------------------------------------- endpoint */

/* run.bind_host is a dotted IPv4 address (rt_config_validate): loopback
 * is 127.0.0.0/8. */
static bool is_loopback(const char *host)
{
	return !strncmp(host, "127.", 4);
}

static enum rt_err make_endpoint(struct launch *l)
{
	switch (l->job->transport) {
	case RT_TRANSPORT_INPROC:
		snprintf(l->endpoint, sizeof(l->endpoint), "inproc://kb-coord");
		return RT_EOK;
	case RT_TRANSPORT_TCP:
		/* loopback unless the config names an interface */
		/* off loopback only CURVE keeps strangers out; refused before any
		 * bind or spawn */
		if (!is_loopback(l->job->config.bind_host) && !l->job->keys.on)
			return rt_fail(RT_EINVAL, "run.bind_host=%s is not loopback: run "
				       "`kernbench keygen --out FILE` and pass --keys FILE",
				       l->job->config.bind_host);
		snprintf(l->endpoint, sizeof(l->endpoint), "tcp://%s:*", l->job->config.bind_host);
		return RT_EOK;
	default:
		kb_sweep_dead_tmp("kb-");
		/* named for the launcher's pid, so a leak is easy to trace */
		snprintf(l->ipc_dir, sizeof(l->ipc_dir), "/tmp/kb-%d-XXXXXX", (int)getpid());
		if (!mkdtemp(l->ipc_dir))
			return rt_fail(RT_EIO, "cannot create a socket directory in /tmp: %s",
				       strerror(errno));
		snprintf(l->endpoint, sizeof(l->endpoint), "ipc://%s/coord", l->ipc_dir);
		return RT_EOK;
	}
}

static void remove_endpoint(struct launch *l)
{
	char path[128];

	if (!l->ipc_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/coord", l->ipc_dir);
	unlink(path);
	rmdir(l->ipc_dir);
	l->ipc_dir[0] = '\0';
}

/* ---------------------------------------------------------------- spawning */

struct thread_arg {
	struct launch *l;
	uint32_t index;
};

/* An inproc daemon; its end is announced like a child's (SIGCHLD), so the
 * launcher notices a thread that returned before it was released. */
static void *daemon_thread(void *arg)
{
	struct launch *l = ((struct thread_arg *)arg)->l;
	uint32_t i = ((struct thread_arg *)arg)->index;
	void *alt = guard_stack();

	free(arg);
	if (rt_daemon_run(&l->thread_opts[i]))
		snprintf(l->thread_errors[i], sizeof(l->thread_errors[i]), "%s", rt_last_error());
	unguard_stack(alt);
	__atomic_store_n(&l->thread_ended[i], true, __ATOMIC_RELEASE);
	kill(getpid(), SIGCHLD);
	return NULL;
}

/* exit() from an inproc daemon thread (a kernel, say) would end the
 * launcher with that status and no output: it becomes a failure naming the
 * daemon. _exit() skips the other handlers, which could block on the
 * threads still running. */
static void exit_guard(void)
{
	struct launch *l = running;
	const char *who = "a daemon thread";
	char name[128];

	if (!l)
		return;
	for (uint32_t i = 0; l->threads && i < l->topo.n_daemons; i++)
		if (pthread_equal(l->threads[i], pthread_self())) {
			snprintf(name, sizeof(name), "daemon %s %s (inproc thread)",
				 l->topo.daemons[i].name, l->topo.daemons[i].label);
			who = name;
		}
	kb_outputs_abandon(l->job, &l->outdir, false);
	fprintf(stderr, "kernbench: error: %s called exit() before the end of the run\n", who);
	fflush(stderr);
	_exit(1);
}

/* A daemon thread that crashes (a kernel object's constructor, say) takes
 * the launcher with it: at least one line names it first. Only
 * async-signal-safe calls; then the signal does what it would have. */
static void crash_guard(int sig)
{
	struct launch *l = running;
	bool named = false;

	put_text("kernbench: error: ");
	/* not n_threads: a thread may crash before pthread_create returns */
	for (uint32_t i = 0; l && l->threads && i < l->topo.n_daemons && !named; i++)
		if (pthread_equal(l->threads[i], pthread_self())) {
			put_text("daemon ");
			put_text(l->topo.daemons[i].name);
			put_text(" ");
			put_text(l->topo.daemons[i].label);
			put_text(" (inproc thread)");
			named = true;
		}
	if (!named)
		put_text("the launcher");
	put_text(" died: killed by signal ");
	put_u64((uint64_t)sig);
	put_text(" (");
	put_text(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
	put_text(")\n");
	/* nothing of the run is left: its staging folder goes now */
	if (l && l->outdir.lock_fd >= 0)
		kb_remove_tree_now(l->job->out_dir);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Each daemon thread gets a stack of its own for the crash guard, so that
 * a kernel overflowing its stack (the guard page below a coroutine's)
 * still gets its one line. */
#define GUARD_STACK (64u << 10)

static void *guard_stack(void)
{
	stack_t ss = { .ss_size = GUARD_STACK }, old;

	/* one already there (a sanitizer's) serves as well, and is its owner's
	 * to remove */
	if (sigaltstack(NULL, &old) || !(old.ss_flags & SS_DISABLE))
		return NULL;
	ss.ss_sp = mmap(NULL, GUARD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (ss.ss_sp == MAP_FAILED)
		return NULL;
	if (sigaltstack(&ss, NULL)) {
		munmap(ss.ss_sp, GUARD_STACK);
		return NULL;
	}
	return ss.ss_sp;
}

/* The thread's end: its alternate stack goes with it. */
static void unguard_stack(void *stack)
{
	stack_t off = { .ss_flags = SS_DISABLE };

	if (!stack)
		return;
	sigaltstack(&off, NULL);
	munmap(stack, GUARD_STACK);
}

static void guard_crashes(void)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa = { .sa_handler = crash_guard, .sa_flags = SA_RESETHAND | SA_ONSTACK };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		sigaction(fatal[i], &sa, NULL);
}

static enum rt_err spawn_threads(struct launch *l)
{
	uint32_t n = l->topo.n_daemons;
	static bool guarded;

	l->threads = calloc(n, sizeof(*l->threads));
	l->thread_opts = calloc(n, sizeof(*l->thread_opts));
	l->thread_ended = calloc(n, sizeof(*l->thread_ended));
	l->thread_errors = calloc(n, sizeof(*l->thread_errors));
	l->thread_seen = calloc(n, sizeof(*l->thread_seen));
	if (!l->threads || !l->thread_opts || !l->thread_ended || !l->thread_errors ||
	    !l->thread_seen)
		return rt_fail(RT_ENOMEM, "cannot allocate %u daemon threads", n);
	if (!guarded && atexit(exit_guard) == 0)
		guarded = true;
	running = l;
	guard_crashes();
	for (uint32_t i = 0; i < n; i++) {
		struct thread_arg *arg;

		if (!l->daemon_here[i])
			continue;
		arg = malloc(sizeof(*arg));
		l->thread_opts[i] = (struct rt_daemon_opts){ .job = l->job, .topo = &l->topo,
							     .index = i,
							     .endpoint = rt_coord_endpoint(l->coord),
							     .zmq_ctx = l->zctx,
							     .token = rt_coord_token(l->coord, i) };
		if (!arg)
			return rt_fail(RT_ENOMEM, "cannot start daemon thread %u", i);
		*arg = (struct thread_arg){ l, i };
		if (pthread_create(&l->threads[i], NULL, daemon_thread, arg)) {
			free(arg);
			return rt_fail(RT_EIO, "cannot start daemon thread %u", i);
		}
		l->n_threads = i + 1; /* threads[] below it: started or not here */
	}
	return RT_EOK;
}

/* argv: NAME __daemon INDEX ENDPOINT MEMFDS run WORKLOAD [options]; the
 * environment is ours plus RT_DAEMON_TOKEN_ENV. Both are built before any
 * fork: a forked child of a threaded process must not allocate. */
static enum rt_err prepare_exec(struct launch *l)
{
	size_t n_env = 0, k = 0;
	uint32_t n = l->topo.n_daemons;

	while (environ[n_env])
		n_env++;
	l->child_argv = calloc((size_t)l->run_argc + 7, sizeof(*l->child_argv));
	l->child_envp = calloc(n_env + 2, sizeof(*l->child_envp));
	l->token_vars = calloc(n, sizeof(*l->token_vars));
	if (!l->child_argv || !l->child_envp || !l->token_vars)
		return rt_fail(RT_ENOMEM, "cannot prepare %u daemon command lines", n);
	for (size_t i = 0; i < n_env; i++)
		if (strncmp(environ[i], RT_DAEMON_TOKEN_ENV "=", strlen(RT_DAEMON_TOKEN_ENV) + 1))
			l->child_envp[k++] = environ[i];
	l->token_slot = k;
	for (uint32_t i = 0; i < n; i++)
		snprintf(l->token_vars[i], sizeof(l->token_vars[i]), "%s=%s", RT_DAEMON_TOKEN_ENV,
			 rt_coord_token(l->coord, i));
	l->child_argv[1] = (char *)"__daemon";
	l->child_argv[3] = (char *)rt_coord_endpoint(l->coord);
	l->child_argv[4] = l->memfds.data;
	for (int a = 0; a < l->run_argc; a++)
		l->child_argv[5 + a] = l->run_argv[a];
	return RT_EOK;
}

static void exec_daemon(struct launch *l)
{
	sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
	execve("/proc/self/exe", l->child_argv, l->child_envp);
	_exit(127);
}

static enum rt_err spawn_processes(struct launch *l)
{
	pid_t self = getpid();
	char index[16];
	enum rt_err err;

	l->pids = calloc(l->topo.n_daemons, sizeof(*l->pids));
	if (!l->pids)
		return rt_fail(RT_ENOMEM, "cannot allocate the daemon table");
	err = prepare_exec(l);
	if (err)
		return err;
	fflush(NULL);
	for (uint32_t i = 0; i < l->topo.n_daemons; i++) {
		pid_t pid;

		if (!l->daemon_here[i])
			continue;
		snprintf(index, sizeof(index), "%u", i);
		l->child_argv[0] = l->topo.daemons[i].name;
		l->child_argv[2] = index;
		l->child_envp[l->token_slot] = l->token_vars[i];
		pid = fork();
		if (pid < 0)
			return rt_fail(RT_EIO, "cannot start daemon %s %s: %s", l->topo.daemons[i].name,
				       l->topo.daemons[i].label, strerror(errno));
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(1);
			exec_daemon(l);
		}
		l->pids[i] = pid;
		rt_coord_set_pid(l->coord, i, pid);
	}
	return RT_EOK;
}

/* ---------------------------------------------------------------- watching */

static int daemon_of(const struct launch *l, pid_t pid)
{
	for (uint32_t i = 0; l->pids && i < l->topo.n_daemons; i++)
		if (l->pids[i] == pid)
			return (int)i;
	return -1;
}

/* How daemon `i` ended; no pid in the line: it reads the same each run. */
static enum rt_err describe_exit(const struct launch *l, int i, int status)
{
	const struct rt_daemon_desc *d = &l->topo.daemons[i];

	if (WIFSIGNALED(status))
		return rt_fail(RT_EPEER, "daemon %s %s died: killed by signal %d (%s)", d->name,
			       d->label, WTERMSIG(status), strsignal(WTERMSIG(status)));
	if (WEXITSTATUS(status) == 0)
		return rt_fail(RT_EPEER, "daemon %s %s exited with status 0 before the end of the run",
			       d->name, d->label);
	return rt_fail(RT_EPEER, "daemon %s %s exited with status %d", d->name, d->label,
		       WEXITSTATUS(status));
}

/* The daemons that ended too early, the lowest first (several often end
 * together, in no fixed order: the line names the lowest). */
struct early_ends {
	int lowest;     /* daemon index, -1: none */
	int status;     /* its wait status (processes) */
	unsigned count;
};

/* Reaps exited children. A daemon that did not exit cleanly, or exited
 * before the coordinator released it, is an early end; anything else (a
 * process a kernel forked, re-parented to us) is killed later with its
 * group. */
static void reap_into(struct launch *l, struct early_ends *ends)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		int i = daemon_of(l, pid);
		bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;

		if (i < 0)
			continue;
		l->pids[i] = 0;
		if (clean && l->coord && rt_coord_released(l->coord, (uint32_t)i))
			continue;
		ends->count++;
		if (ends->lowest < 0 || i < ends->lowest) {
			ends->lowest = i;
			ends->status = status;
		}
	}
	for (uint32_t i = 0; i < l->n_threads; i++)
		if (__atomic_load_n(&l->thread_ended[i], __ATOMIC_ACQUIRE) &&
		    !rt_coord_released(l->coord, i) && !l->thread_seen[i]) {
			l->thread_seen[i] = true;
			ends->count++;
			if (ends->lowest < 0 || (int)i < ends->lowest) {
				ends->lowest = (int)i;
				ends->status = -1;
			}
		}
}

static enum rt_err describe_ends(const struct launch *l, const struct early_ends *ends)
{
	char line[1200];
	int i = ends->lowest;
	enum rt_err err;

	if (i < 0)
		return RT_EOK;
	if (ends->status >= 0)
		err = describe_exit(l, i, ends->status);
	else
		err = rt_fail(RT_EPEER, "daemon %s %s (inproc thread) ended before the end of the run%s%s",
			      l->topo.daemons[i].name, l->topo.daemons[i].label,
			      l->thread_errors[i][0] ? ": " : "", l->thread_errors[i]);
	if (ends->count > 1) {
		snprintf(line, sizeof(line), "%s (and %u more daemon%s ended)", rt_last_error(),
			 ends->count - 1, ends->count == 2 ? "" : "s");
		err = rt_fail(err, "%s", line);
	}
	return err;
}

/* A daemon of this host still running (process or thread). */
static bool any_alive_daemon(const struct launch *l)
{
	for (uint32_t i = 0; i < l->topo.n_daemons; i++)
		if ((l->pids && l->pids[i]) ||
		    (l->threads && i < l->n_threads && l->daemon_here[i] &&
		     !__atomic_load_n(&l->thread_ended[i], __ATOMIC_ACQUIRE)))
			return true;
	return false;
}

#define ENDS_GATHER_MS 300 /* daemons ending together: heard out this long */

static enum rt_err reap(struct launch *l)
{
	struct early_ends ends = { .lowest = -1 };

	reap_into(l, &ends);
	/* one end is often the first of several (a kernel crashing on every
	 * PE): wait a moment for the others, so the line names the lowest */
	for (int waited = 0; ends.count && waited < ENDS_GATHER_MS && any_alive_daemon(l);
	     waited += 20) {
		usleep(20000);
		reap_into(l, &ends);
	}
	return describe_ends(l, &ends);
}

static enum rt_err on_signal(void *arg)
{
	struct launch *l = arg;
	struct signalfd_siginfo si;

	while (read(l->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			enum rt_err err = reap(l);

			if (err)
				return err;
		} else {
			l->signal_seen = (int)si.ssi_signo;
			return rt_fail(RT_EINTERRUPTED, "interrupted by SIG%s%s; stopped every daemon",
				       sigabbrev_np((int)si.ssi_signo),
				       kb_stop_signal_meaning((int)si.ssi_signo));
		}
	}
	return RT_EOK;
}

static enum rt_err watch_signals(struct launch *l)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	kb_stop_signals_add(&mask);
	sigprocmask(SIG_BLOCK, &mask, &l->old_mask);
	l->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (l->sigfd < 0)
		return rt_fail(RT_EIO, "cannot watch signals: %s", strerror(errno));
	return RT_EOK;
}

/* ---------------------------------------------------------------- teardown */

static bool any_alive(const struct launch *l)
{
	for (uint32_t i = 0; l->pids && i < l->topo.n_daemons; i++)
		if (l->pids[i])
			return true;
	return false;
}

static void reap_all(struct launch *l, int grace_ms)
{
	for (int waited = 0; any_alive(l) && waited < grace_ms; waited += 10) {
		struct early_ends ends = { .lowest = -1 };

		reap_into(l, &ends); /* the run is over: how they end no longer matters */
		if (any_alive(l))
			usleep(10000);
	}
	for (uint32_t i = 0; l->pids && i < l->topo.n_daemons; i++)
		if (l->pids[i]) {
			kill(l->pids[i], SIGKILL);
			waitpid(l->pids[i], NULL, 0);
			l->pids[i] = 0;
		}
}

/* Kills and reaps every child that is not a daemon: what kernels forked,
 * re-parented to us (we are a subreaper) when their daemon ended. */
void kb_kill_strays(void)
{
	for (int round = 0; round < 100; round++) {
		char path[64], line[4096];
		bool any = false;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
		f = fopen(path, "r");
		if (!f)
			return;
		while (fscanf(f, "%4095s", line) == 1) {
			pid_t pid = (pid_t)strtol(line, NULL, 10);

			if (pid > 0) {
				kill(pid, SIGKILL);
				any = true;
			}
		}
		fclose(f);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			any = true;
		if (!any)
			return;
		usleep(1000);
	}
}

void kb_kill_strays_now(void)
{
	char path[64] = "/proc/self/task/", buf[4096];
	size_t used = strlen(path);
	pid_t self = getpid(), pid = 0;
	ssize_t n;
	int fd;

	/* "/proc/self/task/PID/children" without snprintf */
	for (pid_t p = self, div = 1; p / div >= 10; div *= 10)
		;
	{
		char digits[16];
		int k = 0;

		for (pid_t p = self; p; p /= 10)
			digits[k++] = (char)('0' + p % 10);
		while (k)
			path[used++] = digits[--k];
		memcpy(path + used, "/children", 10);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = pid * 10 + (buf[i] - '0');
			} else {
				if (pid > 0)
					kill(pid, SIGKILL);
				pid = 0;
			}
		}
	if (pid > 0)
		kill(pid, SIGKILL);
	close(fd);
}

static bool join_threads(struct launch *l, int grace_ms)
{
	struct timespec until;
	bool all = true;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += grace_ms / 1000;
	for (uint32_t i = 0; i < l->n_threads; i++)
		if (l->daemon_here[i] && pthread_timedjoin_np(l->threads[i], NULL, &until))
			all = false;
	return all;
}

static void teardown(struct launch *l, bool failed)
{
	bool threads_done = true;

	if (failed && l->coord)
		rt_coord_abort(l->coord);
	reap_all(l, failed ? GRACE_MS / 3 : GRACE_MS);
	kb_kill_strays();
	if (l->n_threads)
		threads_done = join_threads(l, GRACE_MS);
	running = NULL;
	rt_daemon_close(&l->direct);
	rt_end_reports_release(&l->reports);
	free(l->bye_reports);
	rt_coord_destroy(&l->coord);
	if (l->keys_published)
		kb_hostkeys_withdraw(l->hosts->coordinator);
	l->keys_published = false;
	/* a hung daemon thread still holds a socket; the process exit frees it */
	if (l->zctx && threads_done)
		zmq_ctx_term(l->zctx);
	remove_endpoint(l);
	close_memory(l->job);
	if (l->sigfd >= 0)
		close(l->sigfd);
	if (l->job_fd >= 0) {
		close(l->job_fd);
		unsetenv(RT_JOB_FD_ENV);
	}
	sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
	free(l->pids);
	free(l->threads);
	free(l->thread_opts);
	free(l->thread_ended);
	free(l->thread_errors);
	free(l->thread_seen);
	free(l->child_argv);
	free(l->child_envp);
	free(l->token_vars);
	free(l->daemon_here);
	free(l->peer_of);
	free(l->labels);
	free(l->label_ptrs);
	rt_buf_release(&l->memfds);
	rt_topology_release(&l->topo);
}

/* ---------------------------------------------------------------- limits */

/* Raises a soft limit toward `want` (never above the hard one); true when
 * the soft limit then allows at least `need`. */
static bool raise_limit(int resource, rlim_t need, rlim_t want, struct rlimit *out)
{
	struct rlimit rl;

	if (getrlimit(resource, &rl))
		return true; /* cannot tell: let the run try */
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		struct rlimit raised = rl;

		raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want
											: rl.rlim_max;
		if (setrlimit(resource, &raised) == 0)
			rl = raised;
	}
	*out = rl;
	return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need;
}

/* Descriptors: the launcher holds every memfd and one connection per
 * daemon (two for inproc threads), plus what ZeroMQ and stdio keep. */
static uint64_t descriptors_needed(const struct launch *l)
{
	const struct rt_config *cfg = &l->job->config;
	uint64_t memfds = l->job->mode == RT_MODE_DATA ? (uint64_t)cfg->ranks * (cfg->pes + 1) : 0;

	return memfds + 2ull * l->topo.n_daemons + 64;
}

/* Address space of the largest process in data mode: the HBM and TCM a
 * daemon may map (every rank's under --colocate all; every daemon's, each
 * mapping its own, when they are inproc threads of one process) plus what a
 * process holds anyway (ZeroMQ threads, arenas, kernel stacks). */
static uint64_t address_space_needed(const struct launch *l)
{
	const struct rt_config *cfg = &l->job->config;
	bool many_ranks = l->job->colocate == RT_COLOCATE_ALL || l->job->colocate == RT_COLOCATE_HOST;
	uint64_t ranks = many_ranks ? cfg->ranks : 1;
	uint64_t tcm = cfg->tcm_scratch_bytes + cfg->tcm_staging_bytes;
	uint64_t pes = many_ranks || l->job->colocate == RT_COLOCATE_RANK ? cfg->pes : 1;

	uint64_t threads = l->job->transport == RT_TRANSPORT_INPROC ? l->topo.n_daemons : 1;

	return threads * (ranks * cfg->hbm_bytes + ranks * pes * tcm) + (256ull << 20);
}

static uint32_t daemons_here(const struct launch *l)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < l->topo.n_daemons; i++)
		n += l->daemon_here[i];
	return n;
}

/* Processes and threads a run starts: a daemon process is three tasks
 * (its thread and ZeroMQ's I/O and reaper threads), a daemon thread one,
 * plus this process's own ZeroMQ and writer threads. */
static uint64_t tasks_needed(const struct launch *l)
{
	uint64_t daemons = daemons_here(l);

	return (l->job->transport == RT_TRANSPORT_INPROC ? daemons : 3 * daemons) + 8;
}

/* Limits that would otherwise fail deep inside ZeroMQ (an abort) or as a
 * failed mapping: checked before anything is spawned, one line each. */
static enum rt_err check_limits(const struct launch *l)
{
	uint64_t fds = descriptors_needed(l);
	struct rlimit rl;
	enum rt_err err;

	if (!raise_limit(RLIMIT_NOFILE, fds, fds, &rl))
		return rt_fail(RT_ECONFIG, "this run needs about %llu open file descriptors and the "
			       "limit is %llu (raise it: ulimit -n %llu)", (unsigned long long)fds,
			       (unsigned long long)rl.rlim_cur, (unsigned long long)fds);
	err = kb_check_tasks(tasks_needed(l), daemons_here(l));
	if (err)
		return err;
	if (l->job->mode == RT_MODE_DATA) {
		uint64_t as = address_space_needed(l);

		if (!raise_limit(RLIMIT_AS, as, RLIM_INFINITY, &rl))
			return rt_fail(RT_ECONFIG, "data mode maps the simulated HBM and TCM: a daemon "
				       "of this run needs about %llu KiB of address space and the limit "
				       "is %llu KiB (raise it: ulimit -v %llu, or lower memory.hbm_bytes)",
				       (unsigned long long)(as >> 10),
				       (unsigned long long)(rl.rlim_cur >> 10),
				       (unsigned long long)(as >> 10));
	}
	return RT_EOK;
}

#define STACK_NEEDED (1024u << 10)
#define STACK_WANTED (8u << 20)

/* Writes text and a number without printf, whose frames alone can exceed
 * a tiny stack. */
static void put_text(const char *text)
{
	if (write(STDERR_FILENO, text, strlen(text)) < 0)
		return;
}

static void put_u64(uint64_t v)
{
	char digits[24];
	size_t k = sizeof(digits) - 1;

	digits[k] = '\0';
	do
		digits[--k] = (char)('0' + v % 10);
	while ((v /= 10) && k);
	put_text(digits + k);
}

void kb_check_stack(char **argv)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_STACK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= STACK_NEEDED)
		return;
	if (!raise_limit(RLIMIT_STACK, STACK_NEEDED, STACK_WANTED, &rl)) {
		put_text("kernbench: error: the stack limit is ");
		put_u64(rl.rlim_cur >> 10);
		put_text(" KiB and kernbench needs at least ");
		put_u64(STACK_NEEDED >> 10);
		put_text(" KiB (raise it: ulimit -s ");
		put_u64(STACK_NEEDED >> 10);
		put_text(")\n");
		_exit(2);
	}
	/* thread stacks are sized from the limit at start-up: start again */
	execv("/proc/self/exe", argv);
	put_text("kernbench: error: cannot restart with a larger stack\n");
	_exit(2);
}

/* ---------------------------------------------------------------- run */

/* Daemons get the resolved job through an inherited sealed memfd named in
 * the environment: they never re-read --config or re-parse argv. */
static enum rt_err share_job(struct launch *l)
{
	char fd[16];
	enum rt_err err = rt_job_share(l->job, &l->topo, &l->job_fd);

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
static uint64_t daemon_cpu_ns(void *arg, uint32_t i)
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

static enum rt_err launch_tick(void *arg)
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
static enum rt_err start_host(struct launch *l)
{
	struct rt_coord_layout agent = { .n_peers = l->topo.n_daemons, .sub = true,
					 .lookahead_ps = l->topo.lookahead_ps };
	enum rt_err err = place_daemons(l);

	agent.peer_of = l->peer_of;
	if (!err && kb_check_inproc(l->job)) /* an agent's job came from afar */
		err = RT_EUSAGE;
	if (!err)
		err = check_limits(l);
	if (!err)
		err = make_memory(l);
	if (!err && runs_direct(l))
		return open_direct(l);
	if (!err && l->job->transport != RT_TRANSPORT_INPROC)
		err = share_job(l);
	if (!err)
		err = make_endpoint(l);
	if (!err) {
		l->zctx = zmq_ctx_new();
		/* inproc daemons are sockets of this context: lift the 1023 default */
		if (l->zctx && l->topo.n_daemons + 64 > 1023)
			zmq_ctx_set(l->zctx, ZMQ_MAX_SOCKETS, (int)l->topo.n_daemons + 64);
		err = rt_coord_new_layout(l->job, &l->topo, l->zctx, l->endpoint,
					  l->rank_here ? &agent : NULL, &l->coord);
	}
	if (!err)
		err = l->job->transport == RT_TRANSPORT_INPROC ? spawn_threads(l) : spawn_processes(l);
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

/* The job file's bytes, for the agents' Assign: each host's daemons adopt
 * what one host's would, without the run's keys (the server secret is the
 * coordinator's; an agent has its own client keys). */
static enum rt_err job_bytes(struct launch *l, struct rt_buf *out)
{
	struct rt_keys keys = l->job->keys;
	enum rt_err err;
	off_t size;

	memset(&l->job->keys, 0, sizeof(l->job->keys));
	err = share_job(l);
	l->job->keys = keys;
	memset(&keys, 0, sizeof(keys));
	size = err ? 0 : lseek(l->job_fd, 0, SEEK_END);

	if (!err)
		err = rt_buf_reserve(out, (size_t)(size > 0 ? size : 0));
	if (!err && (size <= 0 || pread(l->job_fd, out->data, (size_t)size, 0) != size))
		err = rt_fail(RT_EIO, "cannot read back the job for the agents: %s", strerror(errno));
	if (!err)
		out->len = (size_t)size;
	return err;
}

/* The output folder, and the stop guard told where the staging folder is
 * (the stop signals are blocked here: watch_signals). */
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
	struct rt_coord_hooks hooks = { .fd = l->sigfd, .on_fd = on_signal, .on_file = on_file,
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
	struct rt_coord_hooks hooks = { .fd = l->sigfd, .on_fd = on_signal, .cpu_ns = daemon_cpu_ns,
					.arg = l };
	enum rt_err err;

	if (l->hosts)
		return run_hosts(l, facts);
	err = prepare_outputs(l);
	if (!err)
		err = start_host(l);
	if (!err)
		err = rt_coord_run(l->coord, &hooks, &facts->coord);
	if (!err)
		rt_coord_take_reports(l->coord, &facts->reports);
	return err;
}

/* A failed run: every daemon stopped, the output folder put back (as it
 * was for a usage error, else without results), one line; the status. */
static int fail_run(struct launch *l, enum rt_err err, bool usage, bool torn_down)
{
	char line[1200];

	snprintf(line, sizeof(line), "%s", rt_last_error()[0] ? rt_last_error() : rt_err_msg(err));
	if (!torn_down)
		teardown(l, true);
	kb_outputs_abandon(l->job, &l->outdir, usage);
	kb_guard_staging(NULL);
	rt_print_error(line);
	if (l->signal_seen)
		return l->signal_seen == SIGINT ? 130 : 128 + l->signal_seen;
	return usage ? 2 : 1;
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
	struct kb_run_facts facts = { .argc = argc, .argv = argv, .started_s = wall_now() };
	enum rt_err err;
	/* a workload refusing its arguments is a usage error, like the CLI's */
	bool usage;

	kb_guard_stops();
	err = kb_job_topology(job, &l.topo);
	usage = err == RT_EINVAL || err == RT_ENOTFOUND;
	rt_buf_init(&l.memfds);
	/* what kernels fork outlives its daemon as our child, to be killed */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (!err)
		err = watch_signals(&l);
	if (!err)
		err = run(&l, &facts);
	facts.daemons = l.topo.n_daemons;
	if (!l.hosts)
		facts.lookahead_ps = l.topo.lookahead_ps;
	/* RT_EUSAGE: a daemon refused an --arg value, as the CLI would */
	if (err)
		return fail_run(&l, err, usage || err == RT_EUSAGE, false);
	teardown(&l, false);
	err = finish_outputs(&l, &facts);
	rt_end_reports_release(&facts.reports);
	if (err) /* RT_EINVAL: an --arg or --inputs nothing read, a usage error */
		return fail_run(&l, err, err == RT_EINVAL, true);
	return 0;
}

/* ---------------------------------------------------------------- agent */

enum rt_err kb_local_open(struct rt_job *job, const uint8_t *rank_here, char **argv,
			  struct kb_local **out)
{
	struct launch *l = calloc(1, sizeof(*l));
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
		err = watch_signals(l);
	if (!err)
		err = start_host(l);
	if (err) {
		char line[1200];

		snprintf(line, sizeof(line), "%s", rt_last_error());
		teardown(l, true);
		free(l);
		return rt_fail(err, "%s", line);
	}
	*out = (struct kb_local *)l;
	return RT_EOK;
}

const struct rt_topology *kb_local_topology(struct kb_local *local)
{
	return &((struct launch *)local)->topo;
}

enum rt_err kb_local_start(struct kb_local *local, enum rt_err (*tick)(void *arg), void *arg)
{
	struct launch *l = (struct launch *)local;

	l->tick = tick;
	l->tick_arg = arg;
	l->hooks = (struct rt_coord_hooks){ .fd = l->sigfd, .on_fd = on_signal, .tick = launch_tick,
					    .cpu_ns = daemon_cpu_ns, .arg = l };
	return l->direct ? RT_EOK : rt_coord_start(l->coord, &l->hooks);
}

uint64_t kb_local_next_ps(const struct kb_local *local)
{
	const struct launch *l = (const struct launch *)local;

	return l->direct ? rt_daemon_next_ps(l->direct) : rt_coord_next_ps(l->coord);
}

bool kb_local_direct_events(const struct kb_local *local, uint64_t *events)
{
	const struct launch *l = (const struct launch *)local;

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
	struct launch *l = (struct launch *)local;
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
	struct launch *l = (struct launch *)local;
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
	return on_signal(local);
}

void kb_local_close(struct kb_local **local_p, bool failed)
{
	struct launch *l = (struct launch *)*local_p;

	if (!l)
		return;
	teardown(l, failed);
	free(l);
	*local_p = NULL;
}

/* ---------------------------------------------------------------- daemon */

/* An aborted run (or a lost coordinator) leaves kernels stopped mid-way on
 * their coroutines: what they allocated is reclaimed with the process, not
 * freed piecemeal, so the exit skips atexit handlers (a leak checker would
 * report every block a stopped kernel still held). */
static void abandon_kernels(void)
{
	fflush(NULL);
	_exit(1);
}

int kb_daemon_main(int argc, char **argv)
{
	struct rt_job *job = calloc(1, sizeof(*job));
	struct rt_topology topo;
	struct rt_daemon_opts opts = { 0 };
	const char *env = getenv(RT_DAEMON_TOKEN_ENV);
	const char *job_fd = getenv(RT_JOB_FD_ENV);
	char token[RT_COORD_TOKEN_MAX];
	enum rt_err err;

	/* argv: NAME __daemon INDEX ENDPOINT MEMFDS run ...; the job itself
	 * comes resolved from the launcher (RT_JOB_FD_ENV), never from argv */
	if (!job || argc < 6 || !job_fd)
		return 2;
	/* the token is ours alone: nothing a kernel starts inherits it */
	snprintf(token, sizeof(token), "%s", env ? env : "");
	unsetenv(RT_DAEMON_TOKEN_ENV);
	prctl(PR_SET_NAME, argv[0]);
	signal(SIGINT, SIG_IGN); /* the launcher owns Ctrl-C and tells us */
	/* a write past ulimit -f, or to a closed pipe, fails with a line naming
	 * the file (EFBIG, EPIPE) instead of killing the daemon */
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	err = rt_job_adopt((int)strtol(job_fd, NULL, 10), job);
	if (!err)
		err = parse_memfds(job, argv[4]);
	if (!err) /* the launcher's topology, mapped; else built here */
		err = rt_job_topology((int)strtol(job_fd, NULL, 10), &topo);
	if (err == RT_ENOTFOUND)
		err = kb_job_topology(job, &topo);
	if (!err) {
		opts.job = job;
		opts.topo = &topo;
		opts.index = (uint32_t)strtoul(argv[2], NULL, 10);
		opts.endpoint = argv[3];
		opts.token = token;
		err = opts.index < topo.n_daemons
			      ? rt_daemon_run(&opts)
			      : rt_fail(RT_EINVAL, "daemon index %u out of range", opts.index);
		rt_topology_release(&topo);
	}
	/* errors reach the coordinator as ERROR frames; the launcher prints them */
	free(job);
	if (err == RT_EINTERRUPTED || err == RT_ETRANSPORT)
		abandon_kernels();
	return err ? 1 : 0;
}
