/* keys.h — the run's ZeroMQ CURVE keys: one server keypair (the
 * coordinator's ROUTER) and one client keypair (every daemon's DEALER),
 * Z85 text in a small file `kernbench keygen` writes. */
#ifndef RT_KEYS_H
#define RT_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

#define RT_KEY_Z85 41 /* 40 Z85 characters + NUL */

struct rt_keys {
	bool on; /* false: no CURVE (loopback and local transports) */
	char server_public[RT_KEY_Z85];
	char server_secret[RT_KEY_Z85];
	char client_public[RT_KEY_Z85];
	char client_secret[RT_KEY_Z85];
};

/* RT_ETRANSPORT with one line if this ZeroMQ was built without CURVE. */
enum rt_err rt_keys_check_curve(void);
/* Fresh keypairs from zmq_curve_keypair. */
enum rt_err rt_keys_generate(struct rt_keys *k);
/* Creates `path` (mode 0600, O_EXCL|O_NOFOLLOW: never overwrites); a
 * server secret left empty is left out. */
enum rt_err rt_keys_write(const struct rt_keys *k, const char *path);
/* The keys a client needs (the server secret cleared): what an agent's
 * file holds, since the server secret is the coordinator's alone. */
void rt_keys_client_side(const struct rt_keys *k, struct rt_keys *out);
/* Parses key-file text ("name Z85" lines); RT_ECONFIG naming the line.
 * server-secret may be missing (a client-side file): rt_keys_serve then
 * refuses the keys. */
enum rt_err rt_keys_parse(const char *text, size_t len, const char *where, struct rt_keys *k);
/* Reads and parses `path`; refuses files others can read. */
enum rt_err rt_keys_load(const char *path, struct rt_keys *k);

/* Server side: makes `sock` (not yet bound) a CURVE server with the
 * run's secret key, and starts a ZAP handler on inproc://zeromq.zap.01 in
 * `zctx` that admits only the key file's client public key. */
struct rt_zap;
enum rt_err rt_keys_serve(const struct rt_keys *k, void *zctx, void *sock, struct rt_zap **out);
/* A ZAP handler of one's own: on inproc://zeromq.zap.01 in `zctx`, a
 * thread (signals blocked) answering RFC 27 requests; a CURVE client is
 * admitted when `admit(arg, its public key, user)` says so, with `user`
 * (NUL-terminated, may stay empty) as the connection's User-Id. `admit`
 * runs on the handler's thread. */
#define RT_ZAP_USER 16
typedef bool (*rt_zap_admit_fn)(void *arg, const uint8_t key[32], char user[RT_ZAP_USER]);
enum rt_err rt_zap_start(void *zctx, rt_zap_admit_fn admit, void *arg, struct rt_zap **out);
/* Stops a ZAP handler (before the context is terminated). */
void rt_zap_destroy(struct rt_zap **zp);
/* Client side: makes `sock` (not yet connected) a CURVE client. */
enum rt_err rt_keys_client(const struct rt_keys *k, void *sock);

#endif
