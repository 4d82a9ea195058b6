/* hostile.h — helpers for the hostile-input suite (tests/hostile/): runs
 * of the real binary under resource limits or in their own process group,
 * and a way to reach a running launcher's coordinator endpoint. */
#ifndef KB_HOSTILE_H
#define KB_HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

/* Starts `kernbench ARGV...` (argv[0] is ignored) with stderr to
 * `errpath`; resource >= 0 sets that limit (soft and hard) to `value`
 * first; own_group puts it in a new process group (its pid). */
pid_t kbh_spawn(char *const argv[], const char *errpath, int resource, rlim_t value,
		bool own_group);
/* Starts `kernbench ARGV...` as user `uid` (group `uid`, no supplementary
 * groups) with stderr to `errpath`; -1 if this process may not change
 * user (not root). */
pid_t kbh_spawn_as(uid_t uid, char *const argv[], const char *errpath);
/* The uid of `nobody` (65534 when unknown). */
uid_t kbh_nobody(void);
/* The ipc endpoint of a running launcher ("ipc:///tmp/kb-PID-XXXXXX/coord"). */
bool kbh_ipc_endpoint(pid_t launcher, char *endpoint, size_t cap);
/* The tcp port a running launcher listens on (0 if none found). */
int kbh_tcp_port(pid_t launcher);
/* Waits until `pid` has at least `n` children (up to ~5 s). */
int kbh_wait_children(pid_t pid, int n);
/* Reads a whole stderr file (without sanitizer notices); "" if missing. */
char *kbh_stderr(const char *path);
/* Reads a /proc file (their size reads as 0); NULL if missing. */
char *kbh_read_proc(const char *path, size_t *len);

#endif
