/* sock.c — ZeroMQ socket set-up with every option checked. */
#include "rt/sock.h"

#include <errno.h>
#include <string.h>
#include <zmq.h>

enum rt_err rt_sock_set(void *sock, const char *who, int option, const char *name,
			const void *value, size_t len)
{
	if (zmq_setsockopt(sock, option, value, len) == 0)
		return RT_EOK;
	return rt_fail(RT_ETRANSPORT, "%s: cannot set %s on its socket: %s", who, name,
		       zmq_strerror(zmq_errno()));
}

static enum rt_err set_options(void *sock, const struct rt_sock_opts *o)
{
	const char *who = o->who;
	enum rt_err err = RT_EOK;

	if (o->routing_id)
		err = rt_sock_set(sock, who, ZMQ_ROUTING_ID, "ZMQ_ROUTING_ID", o->routing_id,
				  strlen(o->routing_id));
	if (!err && o->max_frame) /* a larger claimed frame drops the connection unread */
		err = rt_sock_set(sock, who, ZMQ_MAXMSGSIZE, "ZMQ_MAXMSGSIZE", &o->max_frame,
				  sizeof(o->max_frame));
	if (!err && o->router_mandatory)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_ROUTER_MANDATORY, 1);
	if (!err)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_SNDHWM, 0);
	if (!err)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_RCVHWM, 0);
	if (!err)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_LINGER, o->linger_ms);
	if (!err && o->rcvtimeo_ms)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_RCVTIMEO, o->rcvtimeo_ms);
	if (!err && o->heartbeat_ms)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_HEARTBEAT_IVL, o->heartbeat_ms);
	if (!err && o->heartbeat_ms)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_HEARTBEAT_TIMEOUT, o->heartbeat_timeout_ms);
	if (!err && o->heartbeat_ms)
		err = RT_SOCK_SET_INT(sock, who, ZMQ_HEARTBEAT_TTL, o->heartbeat_timeout_ms);
	return err;
}

enum rt_err rt_sock_open(void *zctx, int type, const struct rt_sock_opts *o, void **out)
{
	void *sock = zctx ? zmq_socket(zctx, type) : NULL;
	enum rt_err err;

	*out = NULL;
	if (!sock)
		return rt_fail(RT_ETRANSPORT, "%s: cannot create a socket: %s", o->who,
			       zctx ? zmq_strerror(zmq_errno()) : "no ZeroMQ context");
	err = set_options(sock, o);
	if (err) {
		zmq_close(sock);
		return err;
	}
	*out = sock;
	return RT_EOK;
}
