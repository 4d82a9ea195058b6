/* hostkeys.h — the keys of a run across hosts when no --keys was given
 * (ADR 0036).
 *
 * A run across hosts is always CURVE-authenticated, loopback included: a
 * coordinator without --keys draws ephemeral keys and leaves the client
 * side of them (server public key, client key pair; never the server
 * secret) for the agents of its own user on its own machine, in
 *
 *     /tmp/kernbench-UID/coordinator-PORT.keys   (folder 0700, file 0600)
 *
 * An agent without --keys whose coordinator is on loopback reads that file
 * (waiting for it: under mpirun the agents may start first). Another user
 * cannot read it, and an agent reads only its own user's folder, so a
 * stranger can neither join a run nor lead an agent. Hosts on other
 * machines need --keys (a key file copied to every host, or handed out by
 * the launcher that starts the agents). */
#ifndef KB_HOSTKEYS_H
#define KB_HOSTKEYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "rt/err.h"
#include "rt/keys.h"

/* Where the keys of a coordinator at `addr` ("tcp://HOST:PORT") are left. */
enum rt_err kb_hostkeys_path(const char *addr, char *path, size_t cap);
/* Writes the client side of `k` there (replacing a dead run's file); the
 * folder must be this user's and private. */
enum rt_err kb_hostkeys_publish(const struct rt_keys *k, const char *addr);
/* The same at `path` (mode 0600, replacing what is there in one step). */
enum rt_err kb_hostkeys_publish_at(const struct rt_keys *k, const char *path);
/* Removes the file kb_hostkeys_publish wrote for `addr`. */
void kb_hostkeys_withdraw(const char *addr);
/* Reads the keys of the coordinator at `addr` into *k, waiting up to
 * `wait_ms` for the file to appear (RT_ENOTFOUND with one line if it does
 * not). *id says which file it was (device, inode, change time), so a
 * caller can tell a rewritten one. */
struct kb_hostkeys_id {
	dev_t dev;
	ino_t ino;
	struct timespec ctime;
};
enum rt_err kb_hostkeys_find(const char *addr, uint64_t wait_ms, struct rt_keys *k,
			     struct kb_hostkeys_id *id);
/* True if the file for `addr` is no longer the one `id` names. */
bool kb_hostkeys_changed(const char *addr, const struct kb_hostkeys_id *id);

#endif
