/* sweep_run.c — the points of a sweep as child processes, --jobs at a
 * time, and the progress line (sweep.h).
 *
 * Each point is this binary re-executed as `kernbench run ...` into its
 * folder, stdout to /dev/null and stderr to OUT/points/HASH.log (its error
 * line becomes the point's row). One loop waits on a signalfd for
 * SIGCHLD, SIGINT and SIGTERM with a timeout that paces the progress
 * line: no thread, no busy wait. On Ctrl-C the running points are told to
 * stop (SIGTERM), reaped, and the sweep ends with what is done. */
#include "sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt/clock.h"

/* A running point. */
struct slot {
	pid_t pid;
	size_t point;
	double started;
};

struct pool {
	struct kb_sweep *s;
	struct slot *slots;
	unsigned running;
	size_t next;          /* next point to consider */
	size_t todo, done, failed;
	double start, last_line;
	bool drawn;           /* a bar is on the terminal */
	bool plain, bar;
};

static void log_path(const struct kb_sweep *s, const struct kb_point *p, char *path, size_t cap)
{
	snprintf(path, cap, "%s/points/%s.log", s->out, p->hash);
}

/* The child: signals as they were, output to the point's log, exec. */
static void child(const struct kb_sweep *s, const struct kb_point *p, const sigset_t *old)
{
	char path[1400], **argv;
	size_t n = 0;
	int fd;

	sigprocmask(SIG_SETMASK, old, NULL);
	prctl(PR_SET_PDEATHSIG, SIGTERM); /* a sweep that dies takes its points */
	/* a sweep under mpirun or srun shares the points out; each point is a
	 * run of its own, never one of an SPMD launch (spmd.h) */
	setenv("KB_SPMD", "0", 1);
	log_path(s, p, path, sizeof(path));
	/* a fresh log: what was at the name (a link planted there included)
	 * is removed, never followed or truncated */
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "kernbench: error: sweep: cannot create %s: %s\n", path,
			strerror(errno));
		_exit(126);
	}
	dup2(fd, STDERR_FILENO);
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		dup2(fd, STDOUT_FILENO);
	while (p->argv[n])
		n++;
	argv = calloc(n + 2, sizeof(*argv));
	if (argv) {
		argv[0] = (char *)"kernbench";
		memcpy(argv + 1, p->argv, (n + 1) * sizeof(*argv));
		execv(s->exe, argv);
	}
	fprintf(stderr, "kernbench: error: cannot run %s: %s\n", s->exe, strerror(errno));
	_exit(127);
}

static enum rt_err start_one(struct pool *pl, size_t point, const sigset_t *old)
{
	struct kb_point *p = &pl->s->points[point];
	struct slot *sl = NULL;
	pid_t pid;

	for (unsigned i = 0; i < pl->s->jobs && !sl; i++)
		if (!pl->slots[i].pid)
			sl = &pl->slots[i];
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return rt_fail(RT_EIO, "sweep: cannot start a point: %s", strerror(errno));
	if (pid == 0)
		child(pl->s, p, old);
	*sl = (struct slot){ pid, point, rt_mono_s() };
	pl->running++;
	return RT_EOK;
}

/* The last non-empty line of a point's log, without "kernbench: error: ". */
static void error_line(const struct kb_sweep *s, struct kb_point *p)
{
	static const char prefix[] = "kernbench: error: ";
	char path[1400], buf[4096];
	struct stat st;
	FILE *f;
	size_t n;
	char *line;
	int fd;

	log_path(s, p, path, sizeof(path));
	/* the log this sweep's child made: a regular file, not what a link
	 * or a FIFO put there would give */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	f = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) ? fdopen(fd, "r") : NULL;
	if (!f && fd >= 0)
		close(fd);
	if (!f) {
		snprintf(p->error, sizeof(p->error), "exit status %d", p->status);
		return;
	}
	fseek(f, 0, SEEK_END);
	if (ftell(f) > (long)sizeof(buf) - 1)
		fseek(f, -(long)sizeof(buf) + 1, SEEK_END);
	else
		fseek(f, 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	line = strrchr(buf, '\n') ? strrchr(buf, '\n') + 1 : buf;
	if (!strncmp(line, prefix, sizeof(prefix) - 1))
		line += sizeof(prefix) - 1;
	if (!*line)
		snprintf(p->error, sizeof(p->error), "exit status %d", p->status);
	else
		snprintf(p->error, sizeof(p->error), "%.*s", (int)sizeof(p->error) - 1, line);
	for (char *c = p->error; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' ';
}

static void finished(struct pool *pl, pid_t pid, int wstatus)
{
	for (unsigned i = 0; i < pl->s->jobs; i++) {
		struct slot *sl = &pl->slots[i];
		struct kb_point *p;

		if (sl->pid != pid)
			continue;
		p = &pl->s->points[sl->point];
		p->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
		p->wall_s = rt_mono_s() - sl->started;
		p->done = p->status == 0;
		p->failed = !p->done;
		if (p->failed)
			error_line(pl->s, p);
		pl->done++;
		pl->failed += p->failed;
		sl->pid = 0;
		pl->running--;
		return;
	}
}

static void reap(struct pool *pl)
{
	int wstatus;
	pid_t pid;

	while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0)
		finished(pl, pid, wstatus);
}

/* "1m20s" / "45s" into `out`. */
static const char *duration(double s, char *out, size_t cap)
{
	long t = s < 0 ? 0 : (long)(s + 0.5);

	if (t >= 60)
		snprintf(out, cap, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(out, cap, "%lds", t);
	return out;
}

/* The progress line: points done / total, failures, running, elapsed and
 * the ETA from the mean wall time of the points run so far. */
static void show(struct pool *pl, bool final)
{
	double t = rt_mono_s(), elapsed = t - pl->start;
	char el[32], eta[32], line[256];
	int width = 24, filled;

	if (!pl->bar && !pl->plain)
		return;
	if (!pl->bar && !final && t - pl->last_line < RT_PROGRESS_EVERY_S &&
	    pl->last_line > pl->start)
		return;
	if (!pl->bar && pl->s->progress == RT_PROGRESS_AUTO && elapsed < RT_PROGRESS_QUIET_S)
		return; /* a short sweep in a log: the summary line says it all */
	if (pl->bar && !final && t - pl->last_line < 0.2)
		return;
	pl->last_line = t;
	if (pl->done)
		duration(elapsed / (double)pl->done * (double)(pl->todo - pl->done), eta,
			 sizeof(eta));
	else
		snprintf(eta, sizeof(eta), "?");
	snprintf(line, sizeof(line), "%zu/%zu points done, %zu failed, %u running, %s elapsed, ETA %s",
		 pl->done, pl->todo, pl->failed, pl->running, duration(elapsed, el, sizeof(el)), eta);
	if (pl->plain) {
		fprintf(stderr, "kernbench sweep: %s\n", line);
		return;
	}
	filled = pl->todo ? (int)((double)width * (double)pl->done / (double)pl->todo) : width;
	fprintf(stderr, "\rkernbench sweep: [%.*s%*s] %s\033[K%s", filled,
		"########################", width - filled, "", line, final ? "\n" : "");
	pl->drawn = !final;
}

static enum rt_err wait_any(struct pool *pl, int sfd, bool *interrupted)
{
	struct pollfd pfd = { .fd = sfd, .events = POLLIN };
	struct signalfd_siginfo si;

	if (poll(&pfd, 1, 200) < 0 && errno != EINTR)
		return rt_fail(RT_EIO, "sweep: poll: %s", strerror(errno));
	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM)
			*interrupted = true;
	reap(pl);
	return RT_EOK;
}

/* Ctrl-C: the running points are told to stop and reaped. */
static void stop_all(struct pool *pl)
{
	for (unsigned i = 0; i < pl->s->jobs; i++)
		if (pl->slots[i].pid)
			kill(pl->slots[i].pid, SIGTERM);
	while (pl->running) {
		int wstatus;
		pid_t pid = waitpid(-1, &wstatus, 0);

		if (pid < 0)
			break;
		finished(pl, pid, wstatus);
	}
}

static bool wanted(const struct kb_point *p)
{
	return p->mine && !p->done;
}

enum rt_err kb_sweep_run(struct kb_sweep *s)
{
	struct pool pl = { .s = s, .start = rt_mono_s() };
	sigset_t set, old;
	bool interrupted = false, tty = isatty(STDERR_FILENO);
	enum rt_err err = RT_EOK;
	int sfd;

	for (size_t i = 0; i < s->n_points; i++)
		pl.todo += wanted(&s->points[i]);
	if (!pl.todo)
		return RT_EOK;
	pl.bar = !s->quiet && (s->progress == RT_PROGRESS_BAR ||
			       (s->progress == RT_PROGRESS_AUTO && tty));
	pl.plain = !s->quiet && !pl.bar && s->progress != RT_PROGRESS_OFF;
	pl.slots = calloc(s->jobs, sizeof(*pl.slots));
	if (!pl.slots)
		return rt_fail(RT_ENOMEM, "sweep: out of memory");
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0)
		err = rt_fail(RT_EIO, "sweep: signalfd: %s", strerror(errno));
	while (!err && !interrupted && (pl.running || pl.next < s->n_points)) {
		while (!err && pl.running < s->jobs && pl.next < s->n_points) {
			size_t i = pl.next++;

			if (wanted(&s->points[i]))
				err = start_one(&pl, i, &old);
		}
		show(&pl, false);
		if (!err && pl.running)
			err = wait_any(&pl, sfd, &interrupted);
	}
	if (interrupted || err)
		stop_all(&pl);
	show(&pl, true);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(pl.slots);
	if (!err && interrupted)
		err = rt_fail(RT_EINTERRUPTED, "sweep: interrupted");
	return err;
}
