/* host_watch.c — the host module's watch and end (host.h): signals and
 * ended children while the daemons run (an early end is a failure, named
 * in one line), the teardown (the same on success, on error and on Ctrl-C:
 * every daemon told to stop, reaped, SIGKILL after a grace period, the
 * endpoint and memory removed, strays killed), and the limits a spawn
 * needs (descriptors, stack, address space, processes), checked before.
 *
 * May use: host.h, strays, stops, tasks, tidy, hostkeys, outputs, the
 * runtime. */
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

#include "host.h"
#include "hosts.h"
#include "hostkeys.h"
#include "stops.h"
#include "strays.h"
#include "tasks.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/faults.h"
#include "rt/wire.h"

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
	if (ends->count > 1) /* rt_fail formats aside: it may quote the last line */
		err = rt_fail(err, "%s (and %u more daemon%s ended)", rt_last_error(),
			      ends->count - 1, ends->count == 2 ? "" : "s");
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

enum rt_err kb_host_on_signal(void *arg)
{
	struct launch *l = arg;
	struct signalfd_siginfo si;

	while (read(l->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			enum rt_err err = reap(l);

			if (err)
				return err;
		} else {
			char lost[600];
			size_t n = l->hosts ? rt_coord_lost_hosts(l->coord, lost, sizeof(lost)) : 0;

			l->signal_seen = (int)si.ssi_signo;
			return rt_fail(RT_EINTERRUPTED, "interrupted by SIG%s%s; stopped every daemon%s%s%s",
				       sigabbrev_np((int)si.ssi_signo),
				       kb_stop_signal_meaning((int)si.ssi_signo),
				       n ? "; it had lost " : "", n ? lost : "",
				       n ? (n > 1 ? " (their agents' connections dropped)"
						  : " (its agent's connection dropped)") : "");
		}
	}
	return RT_EOK;
}

enum rt_err kb_host_watch_signals(struct launch *l)
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

void kb_host_teardown(struct launch *l, bool failed)
{
	bool threads_done = true;

	/* what the run left for others outside its folders goes first: after
	 * a failure an engine may SIGKILL this process a second later */
	kb_guard_files_now();
	if (failed)
		kb_host_remove_endpoint(l, false);
	if (l->keys_published)
		kb_hostkeys_withdraw(l->hosts->coordinator);
	l->keys_published = false;
	if (failed && l->coord)
		rt_coord_abort(l->coord);
	reap_all(l, failed ? GRACE_MS / 3 : GRACE_MS);
	kb_kill_strays();
	if (l->n_threads)
		threads_done = join_threads(l, GRACE_MS);
	kb_host_running = NULL;
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
	kb_host_remove_endpoint(l, true);
	kb_host_close_memory(l->job);
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
enum rt_err kb_host_check_limits(const struct launch *l)
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
void kb_host_put_text(const char *text)
{
	if (write(STDERR_FILENO, text, strlen(text)) < 0)
		return;
}

void kb_host_put_u64(uint64_t v)
{
	char digits[24];
	size_t k = sizeof(digits) - 1;

	digits[k] = '\0';
	do
		digits[--k] = (char)('0' + v % 10);
	while ((v /= 10) && k);
	kb_host_put_text(digits + k);
}

void kb_check_stack(char **argv)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_STACK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= STACK_NEEDED)
		return;
	if (!raise_limit(RLIMIT_STACK, STACK_NEEDED, STACK_WANTED, &rl)) {
		kb_host_put_text("kernbench: error: the stack limit is ");
		kb_host_put_u64(rl.rlim_cur >> 10);
		kb_host_put_text(" KiB and kernbench needs at least ");
		kb_host_put_u64(STACK_NEEDED >> 10);
		kb_host_put_text(" KiB (raise it: ulimit -s ");
		kb_host_put_u64(STACK_NEEDED >> 10);
		kb_host_put_text(")\n");
		_exit(2);
	}
	/* thread stacks are sized from the limit at start-up: start again */
	execv("/proc/self/exe", argv);
	kb_host_put_text("kernbench: error: cannot restart with a larger stack\n");
	_exit(2);
}
