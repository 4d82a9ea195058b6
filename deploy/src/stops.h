/* stops.h — the signals that stop a run, handled alike: SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE and SIGXFSZ each end a
 * launcher or an agent with one line naming the signal, every daemon
 * stopped and nothing of the run left (its staging folder, its key file),
 * exit 128 + the signal (130 for SIGINT).
 *
 * While a coordinator waits, the signals are blocked and read from the
 * host's signalfd (launch.c), so the run stops between frames, tears its
 * daemons down and says so. Outside that wait (preparing the output
 * folder, merging outputs, shipping files) the guard below does it at
 * once from the signal handler, with async-signal-safe calls only. */
#ifndef KB_STOPS_H
#define KB_STOPS_H

#include <signal.h>
#include <stddef.h>

extern const int kb_stop_signals[];
extern const size_t kb_n_stop_signals;

/* Adds every stop signal to `set`. */
void kb_stop_signals_add(sigset_t *set);
/* The first stop signal pending for this thread or process, 0 if none. */
int kb_stop_signal_pending(void);
/* Installs the guard for every stop signal (once per process). */
void kb_guard_stops(void);
/* What the guard removes if a stop signal comes outside a coordinator's
 * wait: the run's staging folder (copied; NULL: none, or no longer). Set
 * it only while the stop signals are blocked. */
void kb_guard_staging(const char *path);
/* A file the guard removes too (slot 0 or 1; NULL: none): what an SPMD
 * launch's process 0 left for the others (spmd.c). */
void kb_guard_file(unsigned slot, const char *path);
/* Removes those files now (async-signal-safe): the first thing a run
 * that ends does, since an engine may kill it a second later. */
void kb_guard_files_now(void);
/* " (a file reached the file size limit: ulimit -f)" and the like: what a
 * signal means beyond its name, or "". */
const char *kb_stop_signal_meaning(int sig);
/* Blocks the stop signals around a step that must not be cut short (the
 * commit of the results), then lets a pending one act. */
void kb_stops_hold(sigset_t *saved);
void kb_stops_release(const sigset_t *saved);

#endif
