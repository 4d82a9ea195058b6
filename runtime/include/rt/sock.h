/* sock.h — the one set-up of kernbench's ZeroMQ sockets (the coordinator's
 * ROUTER, a daemon's and an agent's DEALER): every option set and its
 * result checked, a failure one line naming the socket and the option. */
#ifndef RT_SOCK_H
#define RT_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

struct rt_sock_opts {
	const char *who;           /* names the socket in failures ("coordinator") */
	const char *routing_id;    /* ZMQ_ROUTING_ID, NULL for none */
	int linger_ms;             /* ZMQ_LINGER */
	int64_t max_frame;         /* ZMQ_MAXMSGSIZE, 0 for no limit */
	int rcvtimeo_ms;           /* ZMQ_RCVTIMEO, 0 for blocking (the default) */
	int heartbeat_ms;          /* ZMQ_HEARTBEAT_IVL, 0 for none ... */
	int heartbeat_timeout_ms;  /* ... and its TIMEOUT and TTL */
	bool router_mandatory;     /* ZMQ_ROUTER_MANDATORY: a send to a gone peer fails */
};

/* A socket of `type` in `zctx`, with no high-water marks (a window's
 * messages are never dropped or held back: ADR 0001) and `o`'s options;
 * RT_ETRANSPORT with one line (the socket closed) if any fails. */
enum rt_err rt_sock_open(void *zctx, int type, const struct rt_sock_opts *o, void **out);

/* One option, checked: RT_ETRANSPORT "WHO: cannot set NAME: REASON". */
enum rt_err rt_sock_set(void *sock, const char *who, int option, const char *name,
			const void *value, size_t len);
/* An int option, named by its macro. */
#define RT_SOCK_SET_INT(sock, who, option, value) \
	rt_sock_set((sock), (who), (option), #option, &(int){ (value) }, sizeof(int))

#endif
