/* multihost.h — helpers for the runs-across-hosts tests (test_netns.c,
 * test_mpirun.c, test_recipes.c): network namespaces as hosts (through
 * tests/netns.sh), processes started inside them, the standard ring job,
 * and the one-host versus several-hosts output comparison. */
#ifndef KB_TEST_MULTIHOST_H
#define KB_TEST_MULTIHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MH_MAX_HOSTS 8

/* A set of namespaces kb-ID-h0 .. kb-ID-h<n-1> on one bridge; host i has
 * 10.77.0.<i+1>, its veth is "kb0". */
struct mh_net {
	char id[16];    /* owner pid + a letter, unique on this machine */
	int n;          /* namespaces made */
	bool up;        /* made and not yet torn down */
};

/* Path of tests/netns.sh ($KB_ROOT, set by `make integration`). */
const char *mh_netns_script(void);
/* Builds a set of n namespaces. False, with the one-line reason in `why`,
 * when this machine cannot (not root, no namespaces): the test skips.
 * The set is also torn down when the test process exits. */
bool mh_net_up(struct mh_net *net, int n, char *why, size_t cap);
/* Kills whatever still runs inside, deletes links and namespaces
 * (idempotent). */
void mh_net_down(struct mh_net *net);
/* "kb-ID-hI" */
void mh_ns_name(const struct mh_net *net, int host, char *out, size_t cap);
/* 10.77.0.<host + 1> */
void mh_ns_addr(int host, char *out, size_t cap);
/* Processes living in namespace `host` (their pids into `out`). */
int mh_ns_procs(const struct mh_net *net, int host, pid_t *out, int cap);

/* Starts argv (argv[0] a path) with stderr to `errpath`, inside namespace
 * `host` of `net` (`ip netns exec`) or here when net is NULL; `env` is a
 * NULL-terminated list of NAME=VALUE added to the environment (or NULL). */
pid_t mh_spawn(const struct mh_net *net, int host, char *const argv[], char *const env[],
	       const char *errpath);
/* `kernbench agent --coordinator COORD --index INDEX --keys KEYS` in
 * namespace index + 1 of `net` (on this machine's when `net` is NULL),
 * stderr to `errpath`. */
pid_t mh_spawn_agent(const struct mh_net *net, int index, const char *coordinator,
		     const char *keys, const char *errpath);
/* Waits for `pid` up to `seconds`; exit code or 128 + signal, or -1 when
 * it is still running then (it is killed and reaped). */
int mh_wait(pid_t pid, int seconds);
/* True once none of `pids` is alive (reaping our own children), polling
 * up to `seconds`. */
bool mh_all_gone(const pid_t *pids, int n, int seconds);

/* keygen into DIR/run.keys */
void mh_keygen(const char *dir, char *keys, size_t cap);
/* Writes a hosts file: the coordinator address, then `hosts` verbatim
 * ("  - ranks: [0, 1]\n..."). */
void mh_write_hosts(const char *path, const char *coordinator, const char *hosts);
/* A tcp port free on loopback now (bound and released), below the
 * ephemeral range and derived from the test's pid, so parallel test
 * processes start from different ports; a clash later fails the run
 * loudly, never silently. */
int mh_free_port(void);

/* The tests' job: ring_attention in data mode, 4 ranks x 1 PE, small
 * heads, --seed 7 (about 20 daemons). `pass` kv or q; `colocate` a
 * --colocate value; `hosts` and `keys` NULL for the one-host run. Fills
 * argv (kb_bin() first, NULL-terminated; at least 48 slots). */
void mh_ring_argv(char **argv, const char *out, const char *pass, const char *colocate,
		  const char *hosts, const char *keys);
/* The same job, long enough (timing mode, long sequences) to be killed in
 * the middle. */
void mh_long_argv(char **argv, const char *out, const char *hosts, const char *keys);

/* Socket folders, staging folders or shared memory of any of `pids` left
 * behind: /tmp and /dev/shm entries kb-<pid>-* and kb-agent-<pid>-*
 * (the runtime's memory is memfds: nothing is named, nothing should be). */
int mh_leftovers(const pid_t *pids, int n);
/* Lines of `text` that contain `needle`. */
int mh_lines_with(const char *text, const char *needle);

#endif
