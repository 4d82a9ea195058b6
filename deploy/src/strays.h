/* strays.h — the children nobody else reaps (strays.c): what kernels
 * forked and left, re-parented to this process (a child subreaper) when
 * their daemon ended, and the one child spared for its parent to reap.
 * Part of the host module (launch.h); async-signal-safe where it says so.
 * Uses nothing of the launcher. */
#ifndef KB_STRAYS_H
#define KB_STRAYS_H

#include <sys/types.h>

/* Kills and reaps every child of this process's main thread (what kernels
 * forked and left), at once. */
void kb_kill_strays(void);
/* The same from a signal handler: SIGKILL to every child, no waiting. */
void kb_kill_strays_now(void);
/* A child kb_kill_strays leaves alone and kb_kill_strays_now sends SIGTERM
 * (it removes its own folders), for its parent to reap (SPMD process 0's
 * own agent, spmd.h). */
void kb_spare_child(pid_t pid);

#endif
