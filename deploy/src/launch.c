/* launch.c — spawns the daemons, runs the coordinator, tears down.
 *
 * Teardown is the same on success, on error and on Ctrl-C: every daemon is
 * told to stop, reaped (SIGKILL after a grace period), the ipc socket
 * directory is removed and the shared-memory segments (memfds, which have no
 * name to leak) are closed. Daemon processes also die with the launcher
 * (PR_SET_PDEATHSIG), so even a SIGKILLed launcher leaves no daemon. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "launcher.h"
#include "rt/daemon.h"

#define GRACE_MS 3000

struct launch {
	struct rt_job *job;
	struct rt_topology topo;
	struct rt_coord *coord;
	void *zctx;
	int sigfd;
	sigset_t old_mask;
	pid_t *pids;              /* per daemon; 0 once reaped or for threads */
	pthread_t *threads;       /* inproc daemons */
	struct rt_daemon_opts *thread_opts;
	uint32_t n_threads;
	char ipc_dir[64];
	char endpoint[512];
	char memfds[4096];        /* "-" or fd list handed to daemons */
	int run_argc;
	char **run_argv;          /* `run WORKLOAD ...` as given, forwarded */
	int signal_seen;
};

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
	size_t used = 0;

	snprintf(l->memfds, sizeof(l->memfds), "-");
	if (job->mode != RT_MODE_DATA)
		return RT_EOK;
	for (uint32_t r = 0; r < cfg->ranks; r++) {
		int fd = memfd_create("kb-hbm", 0);

		if (fd < 0 || ftruncate(fd, (off_t)cfg->hbm_bytes) < 0)
			return rt_fail(RT_EIO, "cannot create %llu bytes of HBM for rank %u: %s",
				       (unsigned long long)cfg->hbm_bytes, r, strerror(errno));
		job->hbm_fds[r] = fd;
		used += (size_t)snprintf(l->memfds + used, sizeof(l->memfds) - used, "%s%d",
					 used ? "," : "", fd);
		for (uint32_t p = 0; p < cfg->pes; p++) {
			int t = memfd_create("kb-tcm", 0);

			if (t < 0 || ftruncate(t, (off_t)(cfg->tcm_scratch_bytes +
							   cfg->tcm_staging_bytes)) < 0)
				return rt_fail(RT_EIO, "cannot create TCM for r%u.pe%u: %s", r, p,
					       strerror(errno));
			job->tcm_fds[r * 64 + p] = t;
			used += (size_t)snprintf(l->memfds + used, sizeof(l->memfds) - used, ",%d", t);
		}
	}
	return RT_EOK;
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

/* A launcher that was SIGKILLed could not remove its socket directory; the
 * next one removes every /tmp/kb-<pid>-* whose launcher is gone. */
static void sweep_stale_endpoints(void)
{
	DIR *d = opendir("/tmp");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[300];
		int pid = 0, used = 0;

		if (sscanf(e->d_name, "kb-%d-%n", &pid, &used) != 1 || !used || pid <= 0 ||
		    strlen(e->d_name + used) != 6 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "/tmp/%s/coord", e->d_name);
		unlink(path);
		snprintf(path, sizeof(path), "/tmp/%s", e->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
}

static enum rt_err make_endpoint(struct launch *l)
{
	switch (l->job->transport) {
	case RT_TRANSPORT_INPROC:
		snprintf(l->endpoint, sizeof(l->endpoint), "inproc://kb-coord");
		return RT_EOK;
	case RT_TRANSPORT_TCP:
		/* loopback unless the config names an interface */
		snprintf(l->endpoint, sizeof(l->endpoint), "tcp://%s:*", l->job->config.bind_host);
		return RT_EOK;
	default:
		sweep_stale_endpoints();
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

static void *daemon_thread(void *arg)
{
	rt_daemon_run(arg);
	return NULL;
}

static enum rt_err spawn_threads(struct launch *l)
{
	uint32_t n = l->topo.n_daemons;

	l->threads = calloc(n, sizeof(*l->threads));
	l->thread_opts = calloc(n, sizeof(*l->thread_opts));
	if (!l->threads || !l->thread_opts)
		return rt_fail(RT_ENOMEM, "cannot allocate %u daemon threads", n);
	for (uint32_t i = 0; i < n; i++) {
		l->thread_opts[i] = (struct rt_daemon_opts){ .job = l->job, .topo = &l->topo,
							     .index = i,
							     .endpoint = rt_coord_endpoint(l->coord),
							     .zmq_ctx = l->zctx };
		if (pthread_create(&l->threads[i], NULL, daemon_thread, &l->thread_opts[i]))
			return rt_fail(RT_EIO, "cannot start daemon thread %u", i);
		l->n_threads++;
	}
	return RT_EOK;
}

static void exec_daemon(struct launch *l, uint32_t i)
{
	char index[16];
	char **argv = calloc((size_t)l->run_argc + 7, sizeof(*argv));

	if (!argv)
		_exit(127);
	snprintf(index, sizeof(index), "%u", i);
	argv[0] = l->topo.daemons[i].name;
	argv[1] = (char *)"__daemon";
	argv[2] = index;
	argv[3] = (char *)rt_coord_endpoint(l->coord);
	argv[4] = l->memfds;
	for (int k = 0; k < l->run_argc; k++)
		argv[5 + k] = l->run_argv[k];
	sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
	execv("/proc/self/exe", argv);
	_exit(127);
}

static enum rt_err spawn_processes(struct launch *l)
{
	pid_t self = getpid();

	l->pids = calloc(l->topo.n_daemons, sizeof(*l->pids));
	if (!l->pids)
		return rt_fail(RT_ENOMEM, "cannot allocate the daemon table");
	fflush(NULL);
	for (uint32_t i = 0; i < l->topo.n_daemons; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return rt_fail(RT_EIO, "cannot start daemon %s %s: %s", l->topo.daemons[i].name,
				       l->topo.daemons[i].label, strerror(errno));
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(1);
			exec_daemon(l, i);
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

static enum rt_err describe_exit(const struct launch *l, int i, pid_t pid, int status)
{
	const struct rt_daemon_desc *d = &l->topo.daemons[i];

	if (WIFSIGNALED(status))
		return rt_fail(RT_EPEER, "daemon %s %s (pid %d) died: killed by signal %d (%s)",
			       d->name, d->label, (int)pid, WTERMSIG(status),
			       strsignal(WTERMSIG(status)));
	return rt_fail(RT_EPEER, "daemon %s %s (pid %d) exited with status %d", d->name, d->label,
		       (int)pid, WEXITSTATUS(status));
}

/* Reaps exited daemons; a daemon that did not exit cleanly ends the run. */
static enum rt_err reap(struct launch *l)
{
	enum rt_err err = RT_EOK;
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		int i = daemon_of(l, pid);

		if (i < 0)
			continue;
		l->pids[i] = 0;
		if (!err && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
			err = describe_exit(l, i, pid, status);
	}
	return err;
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
			return rt_fail(RT_EINTERRUPTED, "interrupted by SIG%s; stopped every daemon",
				       sigabbrev_np((int)si.ssi_signo));
		}
	}
	return RT_EOK;
}

static enum rt_err watch_signals(struct launch *l)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
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
		reap(l);
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

static bool join_threads(struct launch *l, int grace_ms)
{
	struct timespec until;
	bool all = true;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += grace_ms / 1000;
	for (uint32_t i = 0; i < l->n_threads; i++)
		if (pthread_timedjoin_np(l->threads[i], NULL, &until))
			all = false;
	return all;
}

static void teardown(struct launch *l, bool failed)
{
	bool threads_done = true;

	if (failed && l->coord)
		rt_coord_abort(l->coord);
	reap_all(l, failed ? GRACE_MS / 3 : GRACE_MS);
	if (l->n_threads)
		threads_done = join_threads(l, GRACE_MS);
	rt_coord_destroy(&l->coord);
	/* a hung daemon thread still holds a socket; the process exit frees it */
	if (l->zctx && threads_done)
		zmq_ctx_term(l->zctx);
	remove_endpoint(l);
	close_memory(l->job);
	if (l->sigfd >= 0)
		close(l->sigfd);
	sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
	free(l->pids);
	free(l->threads);
	free(l->thread_opts);
	rt_topology_release(&l->topo);
}

/* ---------------------------------------------------------------- run */

/* Creates OUT/.parts (and every missing parent), after removing parts a
 * previous run left behind. */
static enum rt_err make_dirs(const struct rt_job *job)
{
	char parts[RT_PATH_MAX + 16];

	snprintf(parts, sizeof(parts), "%s/%s", job->out_dir, RT_PARTS_DIR);
	kb_outputs_discard(job);
	for (char *p = parts + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(parts, 0755); /* an existing parent is fine; the last mkdir reports */
			*p = '/';
		}
	if (mkdir(parts, 0755) && errno != EEXIST)
		return rt_fail(RT_EIO, "cannot create output directory %s: %s", job->out_dir,
			       strerror(errno));
	return RT_EOK;
}

static enum rt_err run(struct launch *l, struct kb_run_facts *facts)
{
	struct rt_coord_hooks hooks = { .fd = l->sigfd, .on_fd = on_signal, .arg = l };
	enum rt_err err = make_dirs(l->job);

	if (!err)
		err = make_memory(l);
	if (!err)
		err = make_endpoint(l);
	if (!err) {
		l->zctx = zmq_ctx_new();
		err = rt_coord_new(l->job, &l->topo, l->zctx, l->endpoint, &l->coord);
	}
	if (!err)
		err = l->job->transport == RT_TRANSPORT_INPROC ? spawn_threads(l) : spawn_processes(l);
	if (!err)
		err = rt_coord_run(l->coord, &hooks, &facts->coord);
	if (!err)
		rt_coord_take_reports(l->coord, &facts->reports);
	return err;
}

int kb_launch(struct rt_job *job, int argc, char **argv)
{
	struct launch l = { .job = job, .sigfd = -1, .run_argc = argc, .run_argv = argv };
	struct kb_run_facts facts = { 0 };
	double start = wall_now();
	enum rt_err err = kb_job_topology(job, &l.topo);

	if (!err)
		err = watch_signals(&l);
	if (!err)
		err = run(&l, &facts);
	facts.daemons = l.topo.n_daemons;
	facts.lookahead_ps = l.topo.lookahead_ps;
	if (err) {
		char line[1200];

		snprintf(line, sizeof(line), "%s", rt_last_error());
		teardown(&l, true);
		kb_outputs_discard(job);
		fprintf(stderr, "kernbench: error: %s\n", line[0] ? line : rt_err_msg(err));
		return l.signal_seen == SIGINT ? 130 : l.signal_seen ? 128 + l.signal_seen : 1;
	}
	teardown(&l, false);
	facts.wall_s = wall_now() - start;
	rt_topology_init(&l.topo);
	err = kb_job_topology(job, &l.topo);
	if (!err)
		err = kb_outputs_merge(job, &l.topo, &facts);
	rt_topology_release(&l.topo);
	rt_end_reports_release(&facts.reports);
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- daemon */

int kb_daemon_main(int argc, char **argv)
{
	struct rt_job *job = calloc(1, sizeof(*job));
	struct rt_topology topo;
	struct rt_daemon_opts opts = { 0 };
	enum rt_err err;

	/* argv: NAME __daemon INDEX ENDPOINT MEMFDS run WORKLOAD [options] */
	if (!job || argc < 7 || strcmp(argv[5], "run"))
		return 2;
	prctl(PR_SET_NAME, argv[0]);
	signal(SIGINT, SIG_IGN); /* the launcher owns Ctrl-C and tells us */
	err = kb_cli_parse_run(argc - 6, argv + 6, job);
	if (!err)
		err = parse_memfds(job, argv[4]);
	if (!err)
		err = kb_job_topology(job, &topo);
	if (!err) {
		opts.job = job;
		opts.topo = &topo;
		opts.index = (uint32_t)strtoul(argv[2], NULL, 10);
		opts.endpoint = argv[3];
		err = opts.index < topo.n_daemons
			      ? rt_daemon_run(&opts)
			      : rt_fail(RT_EINVAL, "daemon index %u out of range", opts.index);
		rt_topology_release(&topo);
	}
	/* errors reach the coordinator as ERROR frames; the launcher prints them */
	free(job);
	return err ? 1 : 0;
}
