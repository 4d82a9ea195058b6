/* preflight.c — the models a configuration names, checked before any
 * daemon starts (kb_models_preflight, workloads.h).
 *
 * A model path is checked in two steps. In the launcher: a bare name such
 * as `my.so` (dlopen would search the system's library path, not the
 * current folder: write ./my.so), a file that is not there or not a
 * regular file. Then the plug-in is loaded as the engines will load it —
 * its ABI, the class it models (a GEMM plug-in given as math.model) and
 * its parameters, through its own create — in a short-lived child process:
 * a plug-in's constructors and create are user code, and the launcher
 * never runs user code itself (a constructor that crashes, exits or loops
 * must not take the launcher with it; docs/architecture.md). A refusal is
 * a usage error (exit 2, the plug-in's line); a crash or a hang of the
 * child is a failure of the plug-in (exit 1), still before any daemon
 * (ADR 0048). */
#include "workloads.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eng.h"
#include "rt/clock.h"

/* How long a plug-in may take to load and check its parameters. */
#define PREFLIGHT_MS 10000

static const struct {
	const char *key;
	size_t offset;
} model_keys[] = {
	{ "dma.model", offsetof(struct rt_config, dma_model) },
	{ "gemm.model", offsetof(struct rt_config, gemm_model) },
	{ "math.model", offsetof(struct rt_config, math_model) },
	{ "hbm.model", offsetof(struct rt_config, hbm_model) },
};

/* The launcher's part: a path that can be opened as written. */
static enum rt_err check_path(const char *key, const char *path)
{
	struct stat st;

	if (!strchr(path, '/'))
		return rt_fail(RT_EUSAGE, "%s '%s': a plug-in path needs a '/' (dlopen would search "
			       "the system's library folders, not this one): write ./%s", key, path,
			       path);
	/* "gemm model plug-in PATH: ...", as the engines would have said */
	if (stat(path, &st))
		return rt_fail(RT_EUSAGE, "%.*s model plug-in %s: %s", (int)strcspn(key, "."), key,
			       path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return rt_fail(RT_EUSAGE, "%.*s model plug-in %s: not a regular file",
			       (int)strcspn(key, "."), key, path);
	return RT_EOK;
}

/* The child: loads every plug-in and writes its verdict to `fd`: "K"
 * (all loaded), or "R" and the refusal's line. Nothing written means it
 * never got there (a constructor exited it). */
static _Noreturn void child(const struct rt_config *cfg, int fd)
{
	int null = open("/dev/null", O_WRONLY);
	enum rt_err err;
	const char *line;

	if (null >= 0) { /* a constructor's chatter is the daemons' to show */
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
	}
	err = eng_plugins_check(cfg);
	line = err ? rt_last_error() : "";
	if (write(fd, err ? "R" : "K", 1) != 1 || write(fd, line, strlen(line)) < 0)
		_exit(3);
	_exit(0);
}

/* Reads the child's line until it closes the pipe or the time is up;
 * false on the timeout. */
static bool read_line(int fd, char *line, size_t cap)
{
	uint64_t end = rt_mono_ms() + PREFLIGHT_MS;
	size_t used = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t t = rt_mono_ms();
		ssize_t n;

		if (t >= end)
			return false;
		if (poll(&p, 1, (int)(end - t)) <= 0)
			continue;
		n = read(fd, line + used, cap - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
		if (used == cap - 1)
			break;
	}
	line[used] = '\0';
	return true;
}

static enum rt_err load_in_child(const struct rt_config *cfg, const char *what)
{
	char line[RT_ERR_LINE];
	int fds[2], status = 0;
	bool in_time;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return rt_fail(RT_EIO, "cannot check %s: pipe: %s", what, strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return rt_fail(RT_EIO, "cannot check %s: fork: %s", what, strerror(errno));
	}
	if (pid == 0) {
		close(fds[0]);
		child(cfg, fds[1]);
	}
	close(fds[1]);
	in_time = read_line(fds[0], line, sizeof(line));
	close(fds[0]);
	if (!in_time)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!in_time)
		return rt_fail(RT_EPEER, "%s did not finish loading within %d s (its constructor or "
			       "create hangs)", what, PREFLIGHT_MS / 1000);
	if (WIFSIGNALED(status))
		return rt_fail(RT_EPEER, "%s crashed while loading (signal %d, %s)", what,
			       WTERMSIG(status), strsignal(WTERMSIG(status)));
	if (line[0] == 'R')
		return rt_fail(RT_EUSAGE, "%s", line[1] ? line + 1 : "a plug-in refused the "
			       "configuration");
	if (line[0] != 'K' || !WIFEXITED(status) || WEXITSTATUS(status))
		return rt_fail(RT_EPEER, "%s exited with status %d while loading (a constructor "
			       "calls exit?)", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return RT_EOK;
}

enum rt_err kb_models_preflight(const struct rt_config *cfg)
{
	char what[600] = "";
	size_t used = 0;
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < sizeof(model_keys) / sizeof(model_keys[0]); i++) {
		const char *v = (const char *)cfg + model_keys[i].offset;

		if (!eng_is_plugin_path(v))
			continue;
		err = check_path(model_keys[i].key, v);
		if (!err && used < sizeof(what))
			used += (size_t)snprintf(what + used, sizeof(what) - used, "%s%s %s",
						 used ? ", " : "", model_keys[i].key, v);
	}
	if (err || !used)
		return err;
	return load_in_child(cfg, what);
}

void kb_models_describe(const struct rt_config *cfg, const char *prefix, struct rt_buf *b)
{
	eng_plugins_describe(cfg, prefix, b);
}
