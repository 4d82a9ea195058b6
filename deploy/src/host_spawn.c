/* host_spawn.c — the host module's start (host.h): the shared memory and
 * the job's memfd, the ipc endpoint, daemons spawned as processes
 * (re-executed `kb-<kind> __daemon ...`) or as threads with their exit()
 * and crash guards, and the daemon's own side of that: kb_daemon_main.
 *
 * May use: host.h, cli (the daemon builds its topology), the runtime. */
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
#include "tidy.h"
#include "npu/memory.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/faults.h"
#include "rt/wire.h"

/* The run in progress, for the exit() and crash guards of inproc daemon
 * threads. */
struct launch *kb_host_running;

static void *guard_stack(void);
static void unguard_stack(void *stack);

/* ---------------------------------------------------------------- memory */

/* Data mode: one memfd per rank (HBM) and per PE (TCM). Children inherit
 * them; nothing is named in /dev/shm, so nothing can be left behind. */
enum rt_err kb_host_make_memory(struct launch *l)
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
		job->memory_fds[npu_hbm_memory(r)] = fd;
		err = rt_buf_printf(&l->memfds, "%s%d", r ? "," : "", fd);
		for (uint32_t p = 0; !err && p < cfg->pes; p++) {
			int t = memfd_create("kb-tcm", 0);

			if (t < 0 || ftruncate(t, (off_t)npu_tcm_bytes(cfg)) < 0) {
				if (t >= 0)
					close(t);
				return rt_fail(RT_EIO, "cannot create TCM for r%u.pe%u: %s", r, p,
					       strerror(errno));
			}
			job->memory_fds[npu_tcm_memory(r, p)] = t;
			err = rt_buf_printf(&l->memfds, ",%d", t);
		}
	}
	return err;
}

void kb_host_close_memory(struct rt_job *job)
{
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++)
		if (job->memory_fds[i] >= 0) {
			close(job->memory_fds[i]);
			job->memory_fds[i] = -1;
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
				job->memory_fds[npu_hbm_memory(r)] = (int)fd;
			else
				job->memory_fds[npu_tcm_memory(r, k - 1)] = (int)fd;
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

enum rt_err kb_host_make_endpoint(struct launch *l)
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

void kb_host_remove_endpoint(struct launch *l, bool forget)
{
	char path[128];

	if (!l->ipc_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/coord", l->ipc_dir);
	unlink(path);
	rmdir(l->ipc_dir);
	if (forget)
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
	struct launch *l = kb_host_running;
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
	struct launch *l = kb_host_running;
	bool named = false;

	kb_host_put_text("kernbench: error: ");
	/* not n_threads: a thread may crash before pthread_create returns */
	for (uint32_t i = 0; l && l->threads && i < l->topo.n_daemons && !named; i++)
		if (pthread_equal(l->threads[i], pthread_self())) {
			kb_host_put_text("daemon ");
			kb_host_put_text(l->topo.daemons[i].name);
			kb_host_put_text(" ");
			kb_host_put_text(l->topo.daemons[i].label);
			kb_host_put_text(" (inproc thread)");
			named = true;
		}
	if (!named)
		kb_host_put_text("the launcher");
	kb_host_put_text(" died: killed by signal ");
	kb_host_put_u64((uint64_t)sig);
	kb_host_put_text(" (");
	kb_host_put_text(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
	kb_host_put_text(")\n");
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

enum rt_err kb_host_spawn_threads(struct launch *l)
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
	kb_host_running = l;
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

enum rt_err kb_host_spawn_processes(struct launch *l)
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
	bool ran = false; /* its components (kernels among them) started */

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
		ran = opts.index < topo.n_daemons;
		err = ran
			      ? rt_daemon_run(&opts)
			      : rt_fail(RT_EINVAL, "daemon index %u out of range", opts.index);
		rt_topology_release(&topo);
	}
	/* errors reach the coordinator as ERROR frames; the launcher prints them */
	free(job);
	if (err && ran) /* whatever stopped it, kernels may be mid-way */
		abandon_kernels();
	return err ? 1 : 0;
}
