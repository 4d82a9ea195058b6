/* stops.c — see stops.h. */
#include "stops.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "strays.h"
#include "rt/job.h"
#include "tidy.h"

const int kb_stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE,
				SIGXFSZ };
const size_t kb_n_stop_signals = sizeof(kb_stop_signals) / sizeof(kb_stop_signals[0]);

static char guard_path[RT_PATH_MAX + 64];
static volatile sig_atomic_t guard_on;
/* files the run made outside its folders (an SPMD launch's key and
 * address files): removed with it */
#define GUARD_FILES 2
static char guard_files[GUARD_FILES][RT_PATH_MAX + 256];
static volatile sig_atomic_t guard_files_on[GUARD_FILES];

void kb_stop_signals_add(sigset_t *set)
{
	for (size_t i = 0; i < kb_n_stop_signals; i++)
		sigaddset(set, kb_stop_signals[i]);
}

int kb_stop_signal_pending(void)
{
	sigset_t pending;

	if (sigpending(&pending))
		return 0;
	for (size_t i = 0; i < kb_n_stop_signals; i++)
		if (sigismember(&pending, kb_stop_signals[i]))
			return kb_stop_signals[i];
	return 0;
}

static void say(const char *text)
{
	if (write(STDERR_FILENO, text, strlen(text)) < 0)
		return;
}

const char *kb_stop_signal_meaning(int sig)
{
	switch (sig) {
	case SIGXFSZ: return " (a file reached the file size limit: ulimit -f)";
	case SIGPIPE: return " (a pipe it wrote to was closed)";
	default: return "";
	}
}

static void stop_guard(int sig)
{
	const char *abbrev = sigabbrev_np(sig);

	say("kernbench: error: interrupted by SIG");
	say(abbrev ? abbrev : "?");
	say(kb_stop_signal_meaning(sig));
	say("; stopped every daemon\n");
	if (guard_on)
		kb_remove_tree_now(guard_path);
	kb_guard_files_now();
	kb_kill_strays_now();
	_exit(sig == SIGINT ? 130 : 128 + sig);
}

void kb_guard_stops(void)
{
	static bool installed;
	struct sigaction sa = { .sa_handler = stop_guard };

	if (installed)
		return;
	installed = true;
	sigemptyset(&sa.sa_mask);
	kb_stop_signals_add(&sa.sa_mask); /* one at a time */
	for (size_t i = 0; i < kb_n_stop_signals; i++)
		sigaction(kb_stop_signals[i], &sa, NULL);
}

void kb_guard_staging(const char *path)
{
	guard_on = 0;
	if (path && strlen(path) < sizeof(guard_path)) {
		memcpy(guard_path, path, strlen(path) + 1);
		guard_on = 1;
	}
}

void kb_guard_files_now(void)
{
	for (size_t i = 0; i < GUARD_FILES; i++)
		if (guard_files_on[i]) {
			guard_files_on[i] = 0;
			unlink(guard_files[i]);
		}
}

void kb_guard_file(unsigned slot, const char *path)
{
	if (slot >= GUARD_FILES)
		return;
	guard_files_on[slot] = 0;
	if (path && strlen(path) < sizeof(guard_files[slot])) {
		memcpy(guard_files[slot], path, strlen(path) + 1);
		guard_files_on[slot] = 1;
	}
}

void kb_stops_hold(sigset_t *saved)
{
	sigset_t set;

	sigemptyset(&set);
	kb_stop_signals_add(&set);
	sigprocmask(SIG_BLOCK, &set, saved);
}

void kb_stops_release(const sigset_t *saved)
{
	sigprocmask(SIG_SETMASK, saved, NULL);
}
