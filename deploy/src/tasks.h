/* tasks.h — how many more processes and threads this user and this
 * process's pids cgroup may start, checked before a run spawns its
 * daemons (as the descriptor, address-space and stack limits are): past
 * the limit, fork and ZeroMQ's thread creation fail deep inside a run
 * (libzmq asserts, "Resource temporarily unavailable"). */
#ifndef KB_TASKS_H
#define KB_TASKS_H

#include <stdint.h>

#include "rt/err.h"

/* RT_ECONFIG with one line naming the limit (ulimit -u, or the pids
 * cgroup and its pids.max) if fewer than `needed` more tasks may start.
 * `daemons` is said in the line. */
enum rt_err kb_check_tasks(uint64_t needed, uint32_t daemons);

#endif
