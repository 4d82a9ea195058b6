/* agent_link.c — the agent's connection to its coordinator (agent_state.h):
 * the DEALER socket and its monitor, Hello until an Assign (the job, the
 * host index and token), the heartbeat both ways, and the socket lent to
 * the keeper thread while a window runs.
 *
 * May use: agent_state.h, hostkeys, the runtime. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "agent_state.h"
#include "hostkeys.h"
#include "hosts.h"
#include "launch.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/sock.h"
#include "rt/wire.h"

/* ---------------------------------------------------------------- socket */

enum rt_err kb_agent_open_socket(struct agent *a, const char *id)
{
	const struct rt_sock_opts so = { .who = "agent", .routing_id = id, .linger_ms = 2000,
					 .max_frame = 1ll << 40, .heartbeat_ms = RT_COORD_BEAT_MS,
					 .heartbeat_timeout_ms = 2 * RT_COORD_SILENCE_MS };

	a->rcvtimeo_ms = -1; /* a new socket blocks until it is told otherwise */
	if (rt_sock_open(a->zctx, ZMQ_DEALER, &so, &a->sock))
		return RT_ETRANSPORT;
	/* always CURVE: an agent talks only to a coordinator holding its keys */
	if (rt_keys_client(&a->keys, a->sock))
		return RT_ETRANSPORT;
	if (zmq_connect(a->sock, a->coordinator) < 0)
		return rt_fail(RT_EUSAGE, "agent: cannot connect to %s: %s", a->coordinator,
			       zmq_strerror(errno));
	return RT_EOK;
}

void kb_agent_close_socket(struct agent *a)
{
	if (a->monitor)
		zmq_close(a->monitor);
	if (a->sock)
		zmq_close(a->sock);
	a->sock = a->monitor = NULL;
}

/* Watches the socket's connection for `events` (ZMQ_EVENT_*): a
 * coordinator that dies closes it, noticed at once instead of after
 * RT_COORD_SILENCE_MS; a CURVE handshake that fails says the keys are
 * wrong, where the coordinator would otherwise just never answer. */
void kb_agent_watch_connection(struct agent *a, int events)
{
	static unsigned serial;
	char ep[64];

	snprintf(ep, sizeof(ep), "inproc://kb-agent-monitor-%d-%u", (int)getpid(), serial++);
	if (zmq_socket_monitor(a->sock, ep, events) < 0)
		return;
	a->monitor = zmq_socket(a->zctx, ZMQ_PAIR);
	if (a->monitor && zmq_connect(a->monitor, ep) < 0) {
		zmq_close(a->monitor);
		a->monitor = NULL;
	}
}

/* The ZMQ_EVENT_* bits the monitor reported since the last look. */
static int connection_events(struct agent *a)
{
	int seen = 0;
	zmq_msg_t msg;

	for (int more = 1; a->monitor && more;) {
		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, a->monitor, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			break;
		}
		if (zmq_msg_size(&msg) >= 2) {
			uint16_t event;

			memcpy(&event, zmq_msg_data(&msg), sizeof(event));
			seen |= event;
		}
		(void)zmq_msg_recv(&msg, a->monitor, 0); /* the address frame: not needed */
		zmq_msg_close(&msg);
	}
	return seen;
}

/* True once the connection to the coordinator was closed. */
static bool connection_closed(struct agent *a)
{
	return connection_events(a) & ZMQ_EVENT_DISCONNECTED;
}

enum rt_err kb_agent_send_up(struct agent *a, Kb__Sync *msg)
{
	enum rt_err err = rt_wire_encode_sync(msg, &a->frame);

	if (!err && zmq_send(a->sock, a->frame.data, a->frame.len, 0) < 0)
		err = rt_fail(RT_ETRANSPORT, "%s: cannot reach the coordinator: %s", a->label,
			      zmq_strerror(errno));
	return err;
}

/* One frame from the coordinator within `wait_ms` (0: none queued is fine:
 * *out stays NULL). A blocking receive, not a poll: the fewest system calls
 * on the path of every window. */
enum rt_err kb_agent_recv_up(struct agent *a, int wait_ms, Kb__Sync **out)
{
	zmq_msg_t msg;
	enum rt_err err;

	*out = NULL;
	if (wait_ms && wait_ms != a->rcvtimeo_ms) {
		if (RT_SOCK_SET_INT(a->sock, a->label, ZMQ_RCVTIMEO, wait_ms))
			return RT_ETRANSPORT;
		a->rcvtimeo_ms = wait_ms;
	}
	zmq_msg_init(&msg);
	if (zmq_msg_recv(&msg, a->sock, wait_ms ? 0 : ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&msg);
		return RT_EOK;
	}
	err = rt_wire_decode_sync(zmq_msg_data(&msg), zmq_msg_size(&msg), out);
	zmq_msg_close(&msg);
	if (err)
		return rt_fail(err, "%s: bad frame from the coordinator: %s", a->label, rt_last_error());
	a->heard_ms = rt_mono_ms();
	return RT_EOK;
}

/* ---------------------------------------------------------------- hello */

static enum rt_err adopt_job(struct agent *a, const ProtobufCBinaryData *bytes)
{
	enum rt_err err = rt_job_decode(bytes->data, bytes->len, a->job);

	if (err)
		return rt_fail(err, "agent: the coordinator's job does not fit this build: %s",
			       rt_last_error());
	if (a->job->config.ranks > KB_HOSTS_MAX_RANKS || a->job->config.pes > 64)
		return rt_fail(RT_EDECODE, "agent: the job has %u ranks of %u PEs (at most 64 x 64)",
			       a->job->config.ranks, a->job->config.pes);
	return RT_EOK;
}

static enum rt_err take_assign(struct agent *a, const Kb__Assign *as)
{
	struct kb_hosts layout = { .n_ranks = KB_HOSTS_MAX_RANKS };
	enum rt_err err;

	if (as->token.len == 0 || as->token.len >= sizeof(a->token))
		return rt_fail(RT_EDECODE, "agent: Assign without a usable token");
	memcpy(a->token, as->token.data, as->token.len);
	a->token[as->token.len] = '\0';
	a->host = as->host;
	err = adopt_job(a, &as->job);
	for (uint32_t r = 0; r < KB_HOSTS_MAX_RANKS; r++)
		layout.host_of_rank[r] = UINT32_MAX;
	for (size_t k = 0; !err && k < as->n_ranks; k++) {
		if (as->ranks[k] >= a->job->config.ranks)
			return rt_fail(RT_EDECODE, "agent: assigned rank %u of %u", as->ranks[k],
				       a->job->config.ranks);
		a->rank_here[as->ranks[k]] = 1;
		layout.host_of_rank[as->ranks[k]] = a->host;
	}
	kb_hosts_label(&layout, a->host, a->label, sizeof(a->label));
	return err;
}

#define HANDSHAKE_FAILED                                                            \
	(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |    \
	 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* Whether the CURVE handshake of the Hello connection failed: the
 * coordinator refused our client key (ZAP), or it holds another server key
 * than ours (it cannot read our handshake). A coordinator that left its
 * ephemeral keys here (hostkeys.h) and has rewritten them since we read
 * them (a dead run's file, replaced): read them again (RT_EAGAIN). */
static enum rt_err check_handshake(struct agent *a)
{
	int seen = connection_events(a);

	if (!(seen & HANDSHAKE_FAILED))
		return RT_EOK;
	if (a->ephemeral && kb_hostkeys_changed(a->coordinator, &a->keys_id))
		return RT_EAGAIN;
	if (seen & ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
		return rt_fail(RT_EPEER, "agent %u: the coordinator at %s refused this agent's key: "
			       "check --keys", a->index.index, a->coordinator);
	return rt_fail(RT_EPEER, "agent %u: the coordinator at %s refused this agent's key (it "
		       "holds another server key than this agent's): check --keys",
		       a->index.index, a->coordinator);
}

/* How long Hello waits for the coordinator: --agent-wait, or 60 s (a
 * coordinator pod may be Pending longer while its image is pulled). */
static unsigned hello_wait_s(const struct agent *a)
{
	return a->opts.hello_wait_s ? a->opts.hello_wait_s : HELLO_WAIT_S;
}

/* Hello on a throw-away routing id; the answer is Assign or a refusal. */
static enum rt_err hello_once(struct agent *a, uint64_t until)
{
	Kb__Sync sync = KB__SYNC__INIT, *got = NULL;
	Kb__Hello h = KB__HELLO__INIT;
	char id[64], host[64] = "";
	uint8_t rnd[8] = { 0 };
	enum rt_err err;

	if (getrandom(rnd, sizeof(rnd), 0) < 0)
		memset(rnd, 0, sizeof(rnd));
	snprintf(id, sizeof(id), "hello-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	gethostname(host, sizeof(host) - 1);
	err = kb_agent_open_socket(a, id);
	if (!err)
		kb_agent_watch_connection(a, HANDSHAKE_FAILED);
	h.index = a->index.index;
	h.world_size = a->index.world_size;
	h.pid = getpid();
	h.hostname = host;
	sync.body_case = KB__SYNC__BODY_HELLO;
	sync.hello = &h;
	if (!err)
		err = kb_agent_send_up(a, &sync);
	while (!err && !got && rt_mono_ms() < until && !(err = check_handshake(a)))
		err = kb_agent_recv_up(a, 200, &got);
	if (!err && !got)
		err = rt_fail(RT_ETIMEOUT, "agent %u: no answer from the coordinator at %s within %u s "
			      "(--agent-wait)", a->index.index, a->coordinator, hello_wait_s(a));
	if (!err && got->body_case == KB__SYNC__BODY_ERROR)
		err = rt_fail(RT_EUSAGE, "agent %u: the coordinator refused it: %s", a->index.index,
			      got->error->message);
	else if (!err && got->body_case != KB__SYNC__BODY_ASSIGN)
		err = rt_fail(RT_EPROTOCOL, "agent %u: the coordinator answered Hello with frame %d",
			      a->index.index, got->body_case);
	else if (!err)
		err = take_assign(a, got->assign);
	rt_wire_free_sync(got);
	kb_agent_close_socket(a);
	return err;
}

/* Whether something accepts connections at the coordinator's address. */
static bool coordinator_listening(const struct agent *a)
{
	char host[256], *colon;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	bool up = false;

	snprintf(host, sizeof(host), "%s", a->coordinator + strlen("tcp://"));
	colon = strrchr(host, ':');
	if (!colon)
		return false;
	*colon = '\0';
	if (host[0] == '[' && strlen(host) > 2) { /* [::1] */
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (getaddrinfo(host, colon + 1, &hints, &res))
		return false;
	for (struct addrinfo *r = res; r && !up; r = r->ai_next) {
		int fd = socket(r->ai_family, r->ai_socktype | SOCK_CLOEXEC, r->ai_protocol);

		up = fd >= 0 && connect(fd, r->ai_addr, r->ai_addrlen) == 0;
		if (fd >= 0)
			close(fd);
	}
	freeaddrinfo(res);
	return up;
}

#define KEYS_GRACE_MS 3000 /* a coordinator up this long has left its keys */

/* The keys of an agent without --keys: the ones its coordinator on this
 * machine left for its user (hostkeys.h), waited for until `until` (under
 * mpirun an agent may start before its coordinator). A coordinator that is
 * up and left none for this user runs as another user or with --keys:
 * said at once, not after the whole wait. */
static enum rt_err find_keys(struct agent *a, uint64_t until)
{
	uint64_t start = rt_mono_ms();

	for (;;) {
		uint64_t now = rt_mono_ms(), left = until > now ? until - now : 0;
		enum rt_err err = kb_hostkeys_find(a->coordinator, left < 500 ? left : 500, &a->keys,
						   &a->keys_id);

		if (err != RT_ENOTFOUND || rt_mono_ms() >= until)
			return err ? rt_fail(err, "agent %u: %s", a->index.index, rt_last_error())
				   : RT_EOK;
		if (rt_mono_ms() - start >= KEYS_GRACE_MS && coordinator_listening(a))
			return rt_fail(RT_EUSAGE, "agent %u: the coordinator at %s left no keys for this "
				       "user (uid %u): it runs as another user or with --keys, so give "
				       "this agent --keys FILE too", a->index.index, a->coordinator,
				       (unsigned)geteuid());
	}
}

/* Hello until answered; with ephemeral keys, read again when the
 * coordinator rewrote them. The Assign comes only from a coordinator that
 * holds the server key we hold: nobody else can lead this agent. */
enum rt_err kb_agent_hello(struct agent *a)
{
	uint64_t until = rt_mono_ms() + 1000ull * hello_wait_s(a);
	enum rt_err err = a->ephemeral ? find_keys(a, until) : RT_EOK;

	while (!err && (err = hello_once(a, until)) == RT_EAGAIN)
		err = find_keys(a, until);
	return err;
}

/* ---------------------------------------------------------------- heartbeat */

/* Heartbeat up, and whether the coordinator is still there (its connection
 * open, something from it within RT_COORD_SILENCE_MS). Reads no frame. */
enum rt_err kb_agent_beat_up(struct agent *a)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Progress progress = KB__PROGRESS__INIT;
	uint64_t now = rt_mono_ms();
	enum rt_err err = RT_EOK;

	if (now - a->beat_ms >= RT_COORD_BEAT_MS) {
		a->beat_ms = now;
		progress.events = ++a->beats;
		sync.body_case = KB__SYNC__BODY_PROGRESS;
		sync.progress = &progress;
		err = kb_agent_send_up(a, &sync);
	}
	if (!err && a->joined && connection_closed(a)) {
		a->stopped = true; /* no one to tell */
		err = rt_fail(RT_EPEER, "%s: the coordinator at %s is gone (it closed the "
			      "connection); stopped this host's daemons", a->label, a->coordinator);
	}
	if (!err && a->joined && rt_mono_ms() - a->heard_ms > RT_COORD_SILENCE_MS) {
		a->stopped = true; /* no one to tell */
		err = rt_fail(RT_EPEER, "%s: the coordinator at %s is gone (nothing for %d s); "
			      "stopped this host's daemons", a->label, a->coordinator,
			      RT_COORD_SILENCE_MS / 1000);
	}
	return err;
}


/* The coordinator's FileAck: credits for more pieces, or our BYE taken. */
static enum rt_err take_ack(struct agent *a, const Kb__FileAck *ack)
{
	if (!a->shipping || ack->parts > a->sent_parts || ack->parts < a->acked_parts)
		return rt_fail(RT_EPROTOCOL, "%s: the coordinator confirmed %llu file pieces, this "
			       "host sent %llu", a->label, (unsigned long long)ack->parts,
			       (unsigned long long)a->sent_parts);
	a->acked_parts = ack->parts;
	a->bye_acked |= ack->bye;
	return RT_EOK;
}

/* A frame that came while this host is busy (a window, its outputs):
 * a heartbeat, SHUTDOWN (the run stops) or, shipping, a FileAck. */
enum rt_err kb_agent_take_busy_frame(struct agent *a, const Kb__Sync *got)
{
	if (got->body_case == KB__SYNC__BODY_SHUTDOWN) {
		a->stopped = true;
		return rt_fail(RT_EINTERRUPTED, "%s: the coordinator stopped the run", a->label);
	}
	if (got->body_case == KB__SYNC__BODY_FILE_ACK)
		return take_ack(a, got->file_ack);
	if (got->body_case != KB__SYNC__BODY_PROGRESS)
		return rt_fail(RT_EPROTOCOL, "%s: unexpected frame %d from the coordinator while "
			       "a window runs", a->label, got->body_case);
	return RT_EOK;
}

/* While this host runs a window or ships its files: the heartbeat, and
 * the coordinator's frames, of which only a heartbeat or SHUTDOWN can come
 * now (the next GRANT waits for our DONE). The caller holds the socket. */
enum rt_err kb_agent_keep_up(struct agent *a)
{
	Kb__Sync *got = NULL;
	enum rt_err err;

	if (!a->sock)
		return RT_EOK; /* still starting this host's daemons */
	err = kb_agent_beat_up(a);
	while (!err && !(err = kb_agent_recv_up(a, 0, &got)) && got) {
		err = kb_agent_take_busy_frame(a, got);
		rt_wire_free_sync(got);
	}
	return err;
}

/* What the keeper found while it held the socket (the run must stop), as
 * this thread's error; RT_EOK if nothing. */
static enum rt_err keeper_verdict(struct agent *a)
{
	if (!__atomic_load_n(&a->keeper_failed, __ATOMIC_ACQUIRE))
		return RT_EOK;
	return rt_err_restore(&a->keeper_error);
}

/* The socket goes to the keeper while this thread runs the host (starts its
 * daemons, runs a window) and comes back; what the keeper found meanwhile
 * is then the caller's error. */
void kb_agent_lend_socket(struct agent *a)
{
	__atomic_store_n(&a->lent, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&a->sock_lock);
}

enum rt_err kb_agent_take_socket(struct agent *a)
{
	pthread_mutex_lock(&a->sock_lock);
	__atomic_store_n(&a->lent, 0, __ATOMIC_RELAXED);
	return keeper_verdict(a);
}

/* The hook the local coordinator's wait calls now and then, and file
 * shipping: inside a window the keeper beats and listens, so only what it
 * found counts; otherwise keep_up. */
enum rt_err kb_agent_keep_alive(void *arg)
{
	struct agent *a = arg;

	if (__atomic_load_n(&a->lent, __ATOMIC_RELAXED))
		return keeper_verdict(a);
	return kb_agent_keep_up(a);
}

/* The coordinator's next frame that is not a heartbeat, heartbeating
 * meanwhile and watching this host's signals and children: whenever the
 * wait is idle and at least every WATCH_MS between frames. */
enum rt_err kb_agent_wait_up(struct agent *a, Kb__Sync **out)
{
	for (;;) {
		enum rt_err err = kb_agent_recv_up(a, WAIT_SLICE_MS, out);
		uint64_t now = rt_mono_ms();

		if (!err && (!*out || now - a->watched_ms >= WATCH_MS)) {
			a->watched_ms = now;
			err = kb_local_watch(a->local);
		}
		if (!err && *out && (*out)->body_case != KB__SYNC__BODY_PROGRESS)
			return RT_EOK;
		rt_wire_free_sync(*out); /* a heartbeat, or a frame we fail with */
		*out = NULL;
		/* beats only: a frame read here would be lost to the loop above */
		if (!err)
			err = kb_agent_beat_up(a);
		if (err)
			return err;
	}
}
