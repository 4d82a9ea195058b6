/* mesh.h — an agent's messages to and from other hosts (ADR 0066).
 *
 * In a run across hosts the messages of a global window go agent to agent:
 * each agent binds one PULL socket (its mesh endpoint, on the address it
 * reaches its coordinator from) and connects one PUSH socket to each host
 * its components have a link to. Both are CURVE: each agent draws its own
 * key pair, which its READY names (public half) and the coordinator hands
 * every agent in a Mesh table; an agent's ZAP handler admits only the keys
 * of that table and names each connection's host by its key, so a frame's
 * sender is known and no one without a host's secret key can send as it.
 * The coordinator carries only the barrier: how many messages each host
 * sent every other host (DONE.sent_to), summed into the count a host must
 * have received before it runs its next window (GRANT.expect). */
#ifndef KB_MESH_H
#define KB_MESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/err.h"
#include "rt/topology.h"

struct kb_mesh;

/* Binds this host's mesh socket in `zctx` on the address this machine
 * reaches `coordinator` ("tcp://HOST:PORT") from (KB_MESH_ADDRESS in the
 * environment overrides it), with a fresh key pair and a ZAP handler.
 * `topo` and `host_of_rank` stay the caller's and must outlive the mesh. */
enum rt_err kb_mesh_open(void *zctx, const char *coordinator, const struct rt_topology *topo,
			 const uint8_t *host_of_rank, struct kb_mesh **out);
/* "tcp://IP:PORT" and the Z85 public key, for READY. */
const char *kb_mesh_endpoint(const struct kb_mesh *m);
const char *kb_mesh_key(const struct kb_mesh *m);
/* The coordinator's table of every host's endpoint and key: this host is
 * `host`; connects to every host its components have a link to. */
enum rt_err kb_mesh_join(struct kb_mesh *m, uint32_t host, const Kb__Mesh *table);
/* Sends the messages of `window` to their hosts (one Data frame per host)
 * and counts them: sent_to[h] (n_hosts entries, zeroed here) and the
 * earliest delivery time (RT_TIME_NEVER: none sent). */
enum rt_err kb_mesh_send(struct kb_mesh *m, uint64_t window, Kb__Envelope *const *envelopes,
			 size_t n, uint64_t *sent_to, uint64_t *first_deliver);
/* The socket to poll for arriving frames. */
void *kb_mesh_socket(struct kb_mesh *m);
/* Takes every frame already arrived (never blocks); a frame that breaks
 * the protocol is an error naming its host. */
enum rt_err kb_mesh_drain(struct kb_mesh *m);
/* Messages sent to this host in windows before `window` that arrived. */
uint64_t kb_mesh_arrived_before(const struct kb_mesh *m, uint64_t window);
/* Hands over the frames of windows before `window` (caller frees each
 * frame) and an array of pointers to their envelopes (the mesh's, valid
 * until the next call). */
enum rt_err kb_mesh_take(struct kb_mesh *m, uint64_t window, Kb__Sync ***frames,
			 size_t *n_frames, Kb__Envelope ***inbound, size_t *n_inbound);
/* The barrier's tree (ADR 0067; fan-out 0: flat). This host's parent
 * (RT_COORD_TREE_TOP: the coordinator) sends it each GRANT, which it
 * forwards to its children; their DONEs and its own, combined, go up. */
uint32_t kb_mesh_fanout(const struct kb_mesh *m);
uint32_t kb_mesh_parent(const struct kb_mesh *m);
/* The GRANT the parent host sent, if it arrived (caller frees), or NULL. */
Kb__Sync *kb_mesh_take_grant(struct kb_mesh *m);
/* Sends `grant` on to every child. */
enum rt_err kb_mesh_forward(struct kb_mesh *m, Kb__Sync *grant);
/* Whether every child's DONE of the window arrived. */
bool kb_mesh_children_done(const struct kb_mesh *m);
/* Folds them into `acc` (acc->window: the window; acc->sent_to: n_hosts
 * entries) — minima of the next times, sums of the counts — and frees
 * them. */
enum rt_err kb_mesh_combine(struct kb_mesh *m, Kb__Done *acc);
/* Sends the combined DONE to the parent host. */
enum rt_err kb_mesh_send_up(struct kb_mesh *m, Kb__Sync *done);
/* Frees every held frame, closes the sockets, stops the ZAP handler. */
void kb_mesh_close(struct kb_mesh **mp);

#endif
