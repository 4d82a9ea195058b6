/* agent.c — `kernbench agent`: one host's part of a run across hosts.
 *
 * The agent says Hello to the coordinator (on a throw-away routing id),
 * gets its host index, its token and the resolved job (Assign), spawns and
 * supervises its ranks' daemons exactly as a one-host launcher does
 * (kb_local_*), and reconnects under its token as one participant hosting
 * every component of its ranks. Each GRANT [T, T + Lg) from the coordinator
 * is run as local windows over its daemons up to T + Lg (rt_coord_step);
 * DONE carries what goes to other hosts. At SHUTDOWN it collects its
 * daemons' BYEs, ships its output files (FilePart, credited by the
 * coordinator's FileAck), says BYE with all their reports and the list of
 * files, and exits 0 only once the coordinator confirmed it (ADR 0050).
 * Both sides send a heartbeat every second; an agent that
 * hears nothing from its coordinator for RT_COORD_SILENCE_MS stops its
 * daemons (ADR 0019). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "agent_env.h"
#include "hostkeys.h"
#include "hosts.h"
#include "launcher.h"
#include "mesh.h"
#include "stops.h"
#include "tidy.h"
#include "rt/buf.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/wire.h"

#define HELLO_WAIT_S 60 /* --agent-wait's default */
/* Output files go in small pieces, at most FILE_WINDOW of them unconfirmed
 * (credits, ADR 0050): a piece in flight on a slow link delays the
 * heartbeats behind it by its size over the link's rate (256 KiB at
 * 8 Mbit/s: 0.26 s, well under RT_COORD_SILENCE_MS), and this host never
 * queues more than 4 MiB in ZeroMQ however large its outputs are. */
#define FILE_PIECE (256u << 10)
#define FILE_WINDOW 16

/* One output file this host shipped (for its BYE, and for naming what
 * the coordinator never confirmed). */
struct shipped {
	char path[300];
	uint64_t parts, bytes; /* FilePart frames and data bytes sent */
	uint64_t end;          /* the host's part count after its last piece */
	bool whole;            /* every piece sent */
};

/* A window waiting for its messages from other hosts (messages_in). */
struct mesh_wait {
	uint64_t window, expect; /* messages sent before `window`: `expect` */
	uint64_t had;            /* arrived at the last look */
	uint64_t moved_ms;       /* when that count last grew (0: not yet looked) */
};

struct agent {
	struct kb_agent_opts opts; /* the command line */
	const char *coordinator;
	struct rt_keys keys;
	struct kb_agent_index index;
	void *zctx;
	void *sock;               /* DEALER to the coordinator */
	void *monitor;            /* its connection events (a closed connection) */
	struct rt_buf frame;
	uint32_t host;
	char token[RT_COORD_TOKEN_MAX];
	char label[RT_COORD_LABEL_MAX];
	uint8_t rank_here[KB_HOSTS_MAX_RANKS];
	struct rt_job *job;
	char staging[64];         /* this host's output folder */
	struct kb_local *local;
	struct kb_mesh *mesh;     /* messages to and from other hosts (ADR 0066) */
	uint64_t *sent_to;        /* per host: what this window sent it */
	uint32_t n_hosts;         /* in the coordinator's mesh table */
	uint64_t next_local_ps;   /* this host's earliest pending time */
	uint64_t expect_seen;     /* tree: the count it last waited for */
	Kb__Sync *tree_grant;     /* tree: the GRANT its parent forwarded */
	struct mesh_wait await;   /* what the window waits for */
	uint64_t heard_ms, beat_ms, beats;
	uint64_t watched_ms;      /* last look at this host's signals and children */
	int rcvtimeo_ms;          /* the socket's receive timeout now */
	bool stopped;             /* the coordinator stopped the run, or is gone */
	bool joined;              /* READY sent: the coordinator beats to us */
	/* the keeper: beats and watches while this thread runs the host */
	pthread_mutex_t sock_lock; /* sock and monitor: this thread's, or the
				    * keeper's while they are lent */
	pthread_t keeper;
	bool keeper_on;
	int lent;                 /* atomic: the keeper may use the socket */
	int host_open;            /* atomic: this host's daemons are up */
	int keeper_quit;          /* atomic */
	int keeper_failed;        /* atomic: keeper_err / keeper_line are set */
	enum rt_err keeper_err;
	char keeper_line[1200];
	bool ephemeral;           /* no --keys: the coordinator's from hostkeys.h */
	struct kb_hostkeys_id keys_id; /* ... which file they were read from */
	clockid_t main_clock;     /* this thread's CPU clock (a direct daemon's) */
	bool main_clock_ok;
	/* output files (ADR 0050): what was sent, what the coordinator took */
	struct shipped *files;
	size_t n_files, cap_files;
	uint64_t sent_parts;      /* FilePart frames sent, all files */
	uint64_t acked_parts;     /* ... of which the coordinator wrote (FileAck) */
	bool bye_acked;           /* the coordinator took our BYE: we may exit */
	bool shipping;            /* between the first FilePart and the BYE's ack */
};

/* What the keeper last saw of a direct daemon (direct_watchdog). */
struct direct_watch {
	uint64_t events;   /* its event count */
	uint64_t moved_ms; /* when it last moved (0: not watching) */
	uint64_t looked_ms;
	uint64_t cpu_ns;   /* the agent thread's CPU time then */
};

#define WAIT_SLICE_MS 250 /* longest blocking receive */
#define WATCH_MS 100      /* signals and children between frames */
#define KEEPER_NAP_MS 100 /* the keeper's look at a running window */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- socket */

static enum rt_err open_socket(struct agent *a, const char *id)
{
	int zero = 0, linger = 2000, ivl = RT_COORD_BEAT_MS, timeout = 2 * RT_COORD_SILENCE_MS;
	int64_t max_frame = 1ll << 40;

	a->sock = zmq_socket(a->zctx, ZMQ_DEALER);
	a->rcvtimeo_ms = -1; /* a new socket blocks until it is told otherwise */
	if (!a->sock)
		return rt_fail(RT_ETRANSPORT, "agent: cannot create a socket: %s", zmq_strerror(errno));
	zmq_setsockopt(a->sock, ZMQ_ROUTING_ID, id, strlen(id));
	zmq_setsockopt(a->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(a->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(a->sock, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(a->sock, ZMQ_MAXMSGSIZE, &max_frame, sizeof(max_frame));
	zmq_setsockopt(a->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof(ivl));
	zmq_setsockopt(a->sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof(timeout));
	zmq_setsockopt(a->sock, ZMQ_HEARTBEAT_TTL, &timeout, sizeof(timeout));
	/* always CURVE: an agent talks only to a coordinator holding its keys */
	if (rt_keys_client(&a->keys, a->sock))
		return RT_ETRANSPORT;
	if (zmq_connect(a->sock, a->coordinator) < 0)
		return rt_fail(RT_EUSAGE, "agent: cannot connect to %s: %s", a->coordinator,
			       zmq_strerror(errno));
	return RT_EOK;
}

static void close_socket(struct agent *a)
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
static void watch_connection(struct agent *a, int events)
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
		zmq_msg_recv(&msg, a->monitor, 0); /* the address frame */
		zmq_msg_close(&msg);
	}
	return seen;
}

/* True once the connection to the coordinator was closed. */
static bool connection_closed(struct agent *a)
{
	return connection_events(a) & ZMQ_EVENT_DISCONNECTED;
}

static enum rt_err send_up(struct agent *a, Kb__Sync *msg)
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
static enum rt_err recv_up(struct agent *a, int wait_ms, Kb__Sync **out)
{
	zmq_msg_t msg;
	enum rt_err err;

	*out = NULL;
	if (wait_ms && wait_ms != a->rcvtimeo_ms) {
		zmq_setsockopt(a->sock, ZMQ_RCVTIMEO, &wait_ms, sizeof(wait_ms));
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
	a->heard_ms = now_ms();
	return RT_EOK;
}

/* ---------------------------------------------------------------- hello */

static enum rt_err adopt_job(struct agent *a, const ProtobufCBinaryData *bytes)
{
	int fd = memfd_create("kb-job", MFD_CLOEXEC);
	enum rt_err err = RT_EOK;

	if (fd < 0 || write(fd, bytes->data, bytes->len) != (ssize_t)bytes->len)
		err = rt_fail(RT_EIO, "agent: cannot keep the job: %s", strerror(errno));
	if (!err)
		err = rt_job_adopt(fd, a->job);
	if (fd >= 0)
		close(fd);
	if (err)
		return rt_fail(err, "agent: the coordinator's job does not fit this build: %s",
			       rt_last_error());
	/* the strings came over the network: they end inside their arrays */
	a->job->workload[sizeof(a->job->workload) - 1] = '\0';
	a->job->inputs_dir[sizeof(a->job->inputs_dir) - 1] = '\0';
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
	err = open_socket(a, id);
	if (!err)
		watch_connection(a, HANDSHAKE_FAILED);
	h.index = a->index.index;
	h.world_size = a->index.world_size;
	h.pid = getpid();
	h.hostname = host;
	sync.body_case = KB__SYNC__BODY_HELLO;
	sync.hello = &h;
	if (!err)
		err = send_up(a, &sync);
	while (!err && !got && now_ms() < until && !(err = check_handshake(a)))
		err = recv_up(a, 200, &got);
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
	close_socket(a);
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
	uint64_t start = now_ms();

	for (;;) {
		uint64_t now = now_ms(), left = until > now ? until - now : 0;
		enum rt_err err = kb_hostkeys_find(a->coordinator, left < 500 ? left : 500, &a->keys,
						   &a->keys_id);

		if (err != RT_ENOTFOUND || now_ms() >= until)
			return err ? rt_fail(err, "agent %u: %s", a->index.index, rt_last_error())
				   : RT_EOK;
		if (now_ms() - start >= KEYS_GRACE_MS && coordinator_listening(a))
			return rt_fail(RT_EUSAGE, "agent %u: the coordinator at %s left no keys for this "
				       "user (uid %u): it runs as another user or with --keys, so give "
				       "this agent --keys FILE too", a->index.index, a->coordinator,
				       (unsigned)geteuid());
	}
}

/* Hello until answered; with ephemeral keys, read again when the
 * coordinator rewrote them. The Assign comes only from a coordinator that
 * holds the server key we hold: nobody else can lead this agent. */
static enum rt_err hello(struct agent *a)
{
	uint64_t until = now_ms() + 1000ull * hello_wait_s(a);
	enum rt_err err = a->ephemeral ? find_keys(a, until) : RT_EOK;

	while (!err && (err = hello_once(a, until)) == RT_EAGAIN)
		err = find_keys(a, until);
	return err;
}

/* ---------------------------------------------------------------- heartbeat */

/* Heartbeat up, and whether the coordinator is still there (its connection
 * open, something from it within RT_COORD_SILENCE_MS). Reads no frame. */
static enum rt_err beat_up(struct agent *a)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Progress progress = KB__PROGRESS__INIT;
	uint64_t now = now_ms();
	enum rt_err err = RT_EOK;

	if (now - a->beat_ms >= RT_COORD_BEAT_MS) {
		a->beat_ms = now;
		progress.events = ++a->beats;
		sync.body_case = KB__SYNC__BODY_PROGRESS;
		sync.progress = &progress;
		err = send_up(a, &sync);
	}
	if (!err && a->joined && connection_closed(a)) {
		a->stopped = true; /* no one to tell */
		err = rt_fail(RT_EPEER, "%s: the coordinator at %s is gone (it closed the "
			      "connection); stopped this host's daemons", a->label, a->coordinator);
	}
	if (!err && a->joined && now_ms() - a->heard_ms > RT_COORD_SILENCE_MS) {
		a->stopped = true; /* no one to tell */
		err = rt_fail(RT_EPEER, "%s: the coordinator at %s is gone (nothing for %d s); "
			      "stopped this host's daemons", a->label, a->coordinator,
			      RT_COORD_SILENCE_MS / 1000);
	}
	return err;
}

static enum rt_err stop_signal_pending(const struct agent *a);

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
static enum rt_err take_busy_frame(struct agent *a, const Kb__Sync *got)
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
static enum rt_err keep_up(struct agent *a)
{
	Kb__Sync *got = NULL;
	enum rt_err err;

	if (!a->sock)
		return RT_EOK; /* still starting this host's daemons */
	err = beat_up(a);
	while (!err && !(err = recv_up(a, 0, &got)) && got) {
		err = take_busy_frame(a, got);
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
	return rt_fail(a->keeper_err, "%s", a->keeper_line);
}

/* The socket goes to the keeper while this thread runs the host (starts its
 * daemons, runs a window) and comes back; what the keeper found meanwhile
 * is then the caller's error. */
static void lend_socket(struct agent *a)
{
	__atomic_store_n(&a->lent, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&a->sock_lock);
}

static enum rt_err take_socket(struct agent *a)
{
	pthread_mutex_lock(&a->sock_lock);
	__atomic_store_n(&a->lent, 0, __ATOMIC_RELAXED);
	return keeper_verdict(a);
}

/* The hook the local coordinator's wait calls now and then, and file
 * shipping: inside a window the keeper beats and listens, so only what it
 * found counts; otherwise keep_up. */
static enum rt_err keep_alive(void *arg)
{
	struct agent *a = arg;

	if (__atomic_load_n(&a->lent, __ATOMIC_RELAXED))
		return keeper_verdict(a);
	return keep_up(a);
}

/* The coordinator's next frame that is not a heartbeat, heartbeating
 * meanwhile and watching this host's signals and children: whenever the
 * wait is idle and at least every WATCH_MS between frames. */
static enum rt_err wait_up(struct agent *a, Kb__Sync **out)
{
	for (;;) {
		enum rt_err err = recv_up(a, WAIT_SLICE_MS, out);
		uint64_t now = now_ms();

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
			err = beat_up(a);
		if (err)
			return err;
	}
}

/* ---------------------------------------------------------------- protocol */

static enum rt_err send_ready(struct agent *a)
{
	const struct rt_topology *t = kb_local_topology(a->local);
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Ready ready = KB__READY__INIT;
	uint32_t *ids = calloc(t->n_components ? t->n_components : 1, sizeof(*ids));
	enum rt_err err;

	if (!ids)
		return rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	for (uint32_t id = 0; id < t->n_components; id++)
		if (t->components[id].rank < a->job->config.ranks &&
		    a->rank_here[t->components[id].rank])
			ids[ready.n_components++] = id;
	ready.daemon = a->host;
	ready.components = ids;
	ready.next_local_ps = kb_local_next_ps(a->local);
	ready.pid = getpid();
	ready.token.data = (uint8_t *)a->token;
	ready.token.len = strlen(a->token);
	ready.mesh_endpoint = (char *)kb_mesh_endpoint(a->mesh);
	ready.mesh_key = (char *)kb_mesh_key(a->mesh);
	sync.body_case = KB__SYNC__BODY_READY;
	sync.ready = &ready;
	err = send_up(a, &sync);
	free(ids);
	return err;
}

/* The coordinator's table of every host's mesh endpoint and key. */
static enum rt_err on_mesh(struct agent *a, const Kb__Mesh *table)
{
	enum rt_err err = kb_mesh_join(a->mesh, a->host, table);

	free(a->sent_to);
	a->sent_to = err ? NULL : calloc(table->n_peers ? table->n_peers : 1, sizeof(*a->sent_to));
	if (!err && !a->sent_to)
		err = rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	return err ? rt_fail(err, "%s: %s", a->label, rt_last_error()) : RT_EOK;
}

static enum rt_err wait_hosts(struct agent *a, enum rt_err (*ready)(struct agent *a, bool *done),
			      Kb__Sync **from_coord);

/* wait_hosts' test while a window waits for its messages: every message
 * other hosts sent this host before a->await.window has arrived (their
 * count, summed by the coordinator, is a->await.expect). More is a
 * protocol error; no new one for run.watchdog_ms while some are missing
 * ends the run here. */
static enum rt_err messages_in(struct agent *a, bool *done)
{
	struct mesh_wait *w = &a->await;
	uint64_t arrived = kb_mesh_arrived_before(a->mesh, w->window), now = now_ms();

	*done = arrived == w->expect;
	if (arrived > w->expect)
		return rt_fail(RT_EPROTOCOL, "%s: %llu messages from other hosts arrived before "
			       "window %llu, they sent %llu", a->label, (unsigned long long)arrived,
			       (unsigned long long)w->window, (unsigned long long)w->expect);
	if (arrived != w->had || !w->moved_ms) {
		w->had = arrived;
		w->moved_ms = now;
	} else if (!*done && now - w->moved_ms >= a->job->config.watchdog_ms) {
		return rt_fail(RT_ETIMEOUT, "%s: window %llu waits for %llu messages from other "
			       "hosts, %llu arrived, none for %llu ms (watchdog)", a->label,
			       (unsigned long long)w->window, (unsigned long long)w->expect,
			       (unsigned long long)arrived, (unsigned long long)(now - w->moved_ms));
	}
	return RT_EOK;
}

/* Waits until the messages of windows before `window` arrived: a host
 * that died meanwhile is named by the coordinator, whose SHUTDOWN ends
 * the wait. */
static enum rt_err wait_mesh(struct agent *a, uint64_t window, uint64_t expect)
{
	a->await = (struct mesh_wait){ .window = window, .expect = expect };
	return wait_hosts(a, messages_in, NULL);
}

/* Runs the GRANT's window (taken) over this host's daemons with what other
 * hosts sent it before, then sends what goes to other hosts to them
 * directly; `done` gets the window, its next times and the counts. */
static enum rt_err run_granted(struct agent *a, Kb__Sync **grant_p, uint64_t expect,
			       Kb__Done *done)
{
	Kb__Grant g = *(*grant_p)->grant;
	Kb__Sync **data = NULL, **frames = NULL;
	Kb__Envelope **inbound = NULL;
	size_t n_data = 0, n_inbound = 0;
	struct rt_coord_away away;
	enum rt_err err, verdict;

	if (!a->sent_to || g.n_inbound) {
		rt_wire_free_sync(*grant_p);
		*grant_p = NULL;
		return rt_fail(RT_EPROTOCOL, "%s: a GRANT before the mesh table, or with messages "
			       "(they come from other hosts directly)", a->label);
	}
	err = wait_mesh(a, g.window, expect);
	if (!err)
		err = kb_mesh_take(a->mesh, g.window, &data, &n_data, &inbound, &n_inbound);
	if (!err && !(frames = malloc((n_data + 1) * sizeof(*frames))))
		err = rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	if (err) {
		for (size_t k = 0; k < n_data; k++)
			rt_wire_free_sync(data[k]);
		free(data);
		return err;
	}
	frames[0] = *grant_p;
	*grant_p = NULL;
	memcpy(frames + 1, data, n_data * sizeof(*data));
	free(data);
	g.inbound = inbound;
	g.n_inbound = n_inbound;
	lend_socket(a);
	err = kb_local_step_frames(a->local, &g, frames, n_data + 1, &away);
	verdict = take_socket(a);
	free(frames);
	if (!err)
		err = verdict;
	if (!err)
		err = kb_mesh_send(a->mesh, g.window, away.envelopes, away.n, a->sent_to,
				   &done->next_sent_ps);
	done->window = g.window;
	done->next_local_ps = away.next_ps;
	done->n_sent_to = a->n_hosts;
	done->sent_to = a->sent_to;
	a->next_local_ps = away.next_ps;
	return err;
}

/* The flat barrier: the window, then DONE (counts and times only) to the
 * coordinator. */
static enum rt_err on_grant(struct agent *a, Kb__Sync **grant_p)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Done done = KB__DONE__INIT;
	enum rt_err err = run_granted(a, grant_p, (*grant_p)->grant->expect, &done);

	if (err)
		return err;
	sync.body_case = KB__SYNC__BODY_DONE;
	sync.done = &done;
	return send_up(a, &sync);
}

/* Waits for what the mesh brings (`ready` says when it is enough),
 * beating and listening to the coordinator meanwhile; a frame from the
 * coordinator that is not a heartbeat (SHUTDOWN) returns in *from_coord
 * when the caller takes one, else it ends the wait as keep_up does. */
static enum rt_err wait_hosts(struct agent *a, enum rt_err (*ready)(struct agent *a, bool *done),
			      Kb__Sync **from_coord)
{
	for (;;) {
		zmq_pollitem_t items[2] = { { kb_mesh_socket(a->mesh), 0, ZMQ_POLLIN, 0 },
					    { a->sock, 0, ZMQ_POLLIN, 0 } };
		enum rt_err err = kb_mesh_drain(a->mesh);
		bool done = false;

		if (err)
			return rt_fail(err, "%s: %s", a->label, rt_last_error());
		err = ready(a, &done);
		if (err || done)
			return err;
		if (zmq_poll(items, 2, WATCH_MS) < 0 && errno != EINTR)
			return rt_fail(RT_ETRANSPORT, "%s: cannot wait for other hosts: %s", a->label,
				       zmq_strerror(errno));
		if (from_coord) {
			err = recv_up(a, 0, from_coord);
			if (!err && *from_coord && (*from_coord)->body_case != KB__SYNC__BODY_PROGRESS)
				return RT_EOK;
			rt_wire_free_sync(*from_coord);
			*from_coord = NULL;
			if (!err)
				err = beat_up(a);
		} else {
			err = keep_up(a);
		}
		if (!err && now_ms() - a->watched_ms >= WATCH_MS) {
			a->watched_ms = now_ms();
			err = kb_local_watch(a->local);
		}
		if (err)
			return err;
	}
}

static enum rt_err children_done(struct agent *a, bool *done)
{
	*done = kb_mesh_children_done(a->mesh);
	return RT_EOK;
}

static enum rt_err grant_came(struct agent *a, bool *done)
{
	*done = (a->tree_grant = kb_mesh_take_grant(a->mesh)) != NULL;
	return RT_EOK;
}

/* The tree barrier (ADR 0067): the GRANT goes on to this host's children
 * first, so they run beside it; this host runs the window only if it has
 * an event before its end or messages were sent to it (as the flat
 * coordinator grants only those); then its children's DONEs and its own,
 * combined, go to its parent (a host, or the coordinator). */
static enum rt_err on_tree_grant(struct agent *a, Kb__Sync **grant_p)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Done done = KB__DONE__INIT;
	const Kb__Grant *g = (*grant_p)->grant;
	uint64_t expect = a->host < g->n_expect_all ? g->expect_all[a->host] : 0;
	bool run = a->next_local_ps < g->end_ps || expect != a->expect_seen;
	enum rt_err err = g->n_expect_all == a->n_hosts
				  ? kb_mesh_forward(a->mesh, *grant_p)
				  : rt_fail(RT_EPROTOCOL, "%s: a GRANT for %zu hosts, the run has %u",
					    a->label, g->n_expect_all, a->n_hosts);

	done.window = g->window;
	done.next_local_ps = a->next_local_ps;
	done.next_sent_ps = RT_TIME_NEVER;
	done.n_sent_to = a->n_hosts;
	done.sent_to = a->sent_to;
	done.hosts = 1;
	done.ran = run;
	memset(a->sent_to, 0, a->n_hosts * sizeof(*a->sent_to));
	if (!err && run) {
		a->expect_seen = expect;
		err = run_granted(a, grant_p, expect, &done);
	}
	rt_wire_free_sync(*grant_p);
	*grant_p = NULL;
	if (!err)
		err = wait_hosts(a, children_done, NULL);
	if (!err)
		err = kb_mesh_combine(a->mesh, &done);
	if (err)
		return err;
	sync.body_case = KB__SYNC__BODY_DONE;
	sync.done = &done;
	if (kb_mesh_parent(a->mesh) == RT_COORD_TREE_TOP)
		return send_up(a, &sync);
	return kb_mesh_send_up(a->mesh, &sync);
}

/* The next frame that moves this host on: the coordinator's (its GRANT,
 * or SHUTDOWN for every host), or, below the top of the tree, the GRANT
 * its parent forwards. */
static enum rt_err wait_next(struct agent *a, Kb__Sync **out)
{
	enum rt_err err;

	if (!a->mesh || !kb_mesh_fanout(a->mesh) || kb_mesh_parent(a->mesh) == RT_COORD_TREE_TOP)
		return wait_up(a, out);
	*out = NULL;
	err = wait_hosts(a, grant_came, out);
	if (!err && !*out) {
		*out = a->tree_grant;
		a->tree_grant = NULL;
	}
	return err;
}

/* ---------------------------------------------------------------- files */

/* Waits until the coordinator confirmed all but `slack` of the pieces
 * sent (and our BYE too, with `bye`). Bounded by the coordinator's
 * liveness, not by a clock: its heartbeats come from the loop that takes
 * the pieces, so while they come (RT_COORD_SILENCE_MS) and its connection
 * stays open, it is alive and reading; a stop signal here ends the wait. */
static enum rt_err wait_acks(struct agent *a, uint64_t slack, bool bye)
{
	while (a->sent_parts - a->acked_parts > slack || (bye && !a->bye_acked)) {
		Kb__Sync *got = NULL;
		enum rt_err err = recv_up(a, WAIT_SLICE_MS, &got);

		bool heard = got != NULL;

		if (!err && got)
			err = take_busy_frame(a, got);
		rt_wire_free_sync(got);
		/* a frame came: the coordinator is there. Its last frames (the
		 * BYE's ack) may be read after its connection closed, so only
		 * a wait that brought nothing looks at the connection */
		if (!err && !heard)
			err = beat_up(a);
		if (!err)
			err = stop_signal_pending(a);
		if (err)
			return err;
	}
	return RT_EOK;
}

/* One FilePart frame, once the window has room for it. */
static enum rt_err send_piece(struct agent *a, struct shipped *f, Kb__Sync *sync)
{
	enum rt_err err = wait_acks(a, FILE_WINDOW - 1, false);

	if (!err)
		err = send_up(a, sync);
	if (err)
		return err;
	a->sent_parts++;
	f->parts++;
	f->bytes += sync->file_part->data.len;
	f->end = a->sent_parts;
	return RT_EOK;
}

/* A new entry in the list of shipped files (NULL: out of memory). */
static struct shipped *note_shipped(struct agent *a, const char *path)
{
	struct shipped *f;

	if (a->n_files == a->cap_files) {
		size_t cap = a->cap_files ? 2 * a->cap_files : 32;
		struct shipped *grown = realloc(a->files, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		a->files = grown;
		a->cap_files = cap;
	}
	f = &a->files[a->n_files++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	return f;
}

/* Sends the data of one file (holes skipped: the coordinator ORs pieces
 * into a file of the same size), in credited pieces. */
static enum rt_err ship_file(struct agent *a, int dirfd, const char *name, const char *path)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__FilePart part = KB__FILE_PART__INIT;
	struct stat st;
	struct shipped *f;
	uint8_t *buf = NULL;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	off_t at = 0;
	enum rt_err err = RT_EOK;

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return RT_EOK; /* not a regular file of ours: nothing to send */
	}
	buf = malloc(FILE_PIECE);
	f = note_shipped(a, path);
	if (!buf || !f)
		err = rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	part.path = (char *)path;
	part.size = (uint64_t)st.st_size;
	sync.body_case = KB__SYNC__BODY_FILE_PART;
	sync.file_part = &part;
	/* one piece, maybe empty, says the file's size */
	part.offset = 0;
	part.data.len = 0;
	if (!err)
		err = send_piece(a, f, &sync);
	while (!err && at < st.st_size) {
		off_t data = lseek(fd, at, SEEK_DATA), hole;
		ssize_t n;

		if (data < 0)
			break; /* only a hole is left */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			hole = st.st_size;
		n = pread(fd, buf, (size_t)(hole - data < FILE_PIECE ? hole - data : FILE_PIECE), data);
		if (n <= 0) {
			err = rt_fail(RT_EIO, "%s: cannot read %s: %s", a->label, path, strerror(errno));
			break;
		}
		part.offset = (uint64_t)data;
		part.data.data = buf;
		part.data.len = (size_t)n;
		err = send_piece(a, f, &sync);
		at = data + n;
		if (!err)
			err = keep_alive(a);
	}
	if (!err)
		f->whole = true;
	free(buf);
	close(fd);
	return err;
}

/* Every output file of this host (top level and .parts), then removes it. */
static enum rt_err ship_dir(struct agent *a, const char *sub)
{
	char dir[RT_PATH_MAX + 32], path[300];
	int fd;
	DIR *d;
	struct dirent *e;
	enum rt_err err = RT_EOK;

	snprintf(dir, sizeof(dir), "%s%s%s", a->staging, sub[0] ? "/" : "", sub);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return RT_EOK;
	}
	while (!err && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s%s%s", sub, sub[0] ? "/" : "", e->d_name);
		if (!rt_wire_check_part_path(path))
			err = ship_file(a, dirfd(d), e->d_name, path);
		kb_remove_owned(dirfd(d), e->d_name, false);
	}
	closedir(d);
	return err;
}

/* This host's output folder and all in it, by the launcher's rules
 * (tidy.h: never through a link, only what is ours). */
static void remove_staging(struct agent *a)
{
	int tmp;

	if (!a->staging[0])
		return;
	tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tmp >= 0) {
		kb_remove_owned(tmp, a->staging + strlen("/tmp/"), true);
		close(tmp);
	}
	a->staging[0] = '\0';
	kb_guard_staging(NULL);
}

/* `err` (the coordinator gone, a signal, ...) with what the coordinator
 * never confirmed: those results of this host are lost (ADR 0050). */
static enum rt_err name_unconfirmed(struct agent *a, enum rt_err err, bool all_sent)
{
	struct rt_buf line;
	size_t shown = 0, more = 0;

	rt_buf_init(&line);
	rt_buf_printf(&line, "%s; the coordinator did not confirm ", rt_last_error());
	for (size_t k = 0; k < a->n_files; k++) {
		const struct shipped *f = &a->files[k];

		if (f->whole && f->end <= a->acked_parts)
			continue;
		if (shown == 8) {
			more++;
			continue;
		}
		rt_buf_printf(&line, "%s%s", shown++ ? ", " : "", f->path);
	}
	if (more)
		rt_buf_printf(&line, " and %zu more file%s", more, more > 1 ? "s" : "");
	if (!all_sent)
		rt_buf_printf(&line, "%sthe files not yet sent", shown ? ", " : "");
	rt_buf_printf(&line, "%sthis host's BYE: its results are lost",
		      shown || !all_sent ? " nor " : "");
	err = rt_fail(err, "%s", line.data ? line.data : "out of memory");
	rt_buf_release(&line);
	return err;
}

/* The BYE's list of every file shipped (caller frees bye->files[0] and
 * bye->files). */
static enum rt_err list_shipped(struct agent *a, Kb__Bye *bye)
{
	Kb__FileSent *sent = calloc(a->n_files ? a->n_files : 1, sizeof(*sent));

	bye->files = calloc(a->n_files ? a->n_files : 1, sizeof(*bye->files));
	if (!sent || !bye->files) {
		free(sent);
		free(bye->files);
		bye->files = NULL;
		return rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	}
	for (size_t k = 0; k < a->n_files; k++) {
		kb__file_sent__init(&sent[k]);
		sent[k].path = a->files[k].path;
		sent[k].parts = a->files[k].parts;
		sent[k].bytes = a->files[k].bytes;
		bye->files[k] = &sent[k];
	}
	bye->n_files = a->n_files;
	return RT_EOK;
}

/* Outputs written and shipped, then BYE with this host's reports and the
 * list of its files; ends when the coordinator confirmed it all. */
static enum rt_err finish(struct agent *a)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Bye bye = KB__BYE__INIT;
	enum rt_err err, verdict;
	bool all_sent = false;

	/* finishing writes every output part, which takes seconds on a loaded
	 * machine: the keeper beats meanwhile, or the coordinator takes this
	 * host for dead (liveness, not wall-clock: ADR 0035) */
	lend_socket(a);
	err = kb_local_finish(a->local, &bye);
	verdict = take_socket(a);
	if (!err)
		err = verdict;
	if (err)
		return err;
	a->shipping = true;
	err = ship_dir(a, "");
	if (!err)
		err = ship_dir(a, RT_PARTS_DIR);
	all_sent = !err;
	if (!err)
		err = list_shipped(a, &bye);
	bye.daemon = a->host;
	sync.body_case = KB__SYNC__BODY_BYE;
	sync.bye = &bye;
	if (!err)
		err = send_up(a, &sync);
	if (bye.files) {
		free(bye.files[0]);
		free(bye.files);
	}
	bye.files = NULL;
	bye.n_files = 0;
	if (!err)
		err = wait_acks(a, 0, true);
	a->shipping = false;
	return err ? name_unconfirmed(a, err, all_sent) : RT_EOK;
}

/* GRANT -> local windows -> DONE, until SHUTDOWN. */
static enum rt_err participate(struct agent *a)
{
	enum rt_err err = kb_local_start(a->local, keep_alive, a);

	if (!err)
		err = kb_mesh_open(a->zctx, a->coordinator, kb_local_topology(a->local),
				   a->job->host_of_rank, &a->mesh);
	if (!err)
		err = send_ready(a);
	a->heard_ms = now_ms();
	a->joined = !err;
	a->next_local_ps = kb_local_next_ps(a->local);
	while (!err) {
		Kb__Sync *s = NULL;

		err = wait_next(a, &s);
		if (err)
			break;
		if (s->body_case == KB__SYNC__BODY_GRANT && a->mesh && kb_mesh_fanout(a->mesh)) {
			err = on_tree_grant(a, &s);
		} else if (s->body_case == KB__SYNC__BODY_GRANT) {
			err = on_grant(a, &s);
		} else if (s->body_case == KB__SYNC__BODY_MESH) {
			a->n_hosts = (uint32_t)s->mesh->n_peers;
			err = on_mesh(a, s->mesh);
		} else if (s->body_case == KB__SYNC__BODY_SHUTDOWN) {
			bool abort_run = s->shutdown->abort;

			rt_wire_free_sync(s);
			a->stopped = abort_run;
			return abort_run ? rt_fail(RT_EINTERRUPTED, "%s: the coordinator stopped the run",
						   a->label)
					 : finish(a);
		} else {
			err = rt_fail(RT_EPROTOCOL, "%s: unexpected frame %d from the coordinator",
				      a->label, s->body_case);
		}
		rt_wire_free_sync(s);
	}
	return err;
}

/* What went wrong here, to the coordinator (which prints it) and to our
 * own stderr. */
static void report_error(struct agent *a, enum rt_err code)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Error error = KB__ERROR__INIT;
	char line[1400];
	const char *what = rt_last_error()[0] ? rt_last_error() : rt_err_msg(code);

	if (!strncmp(what, a->label, strlen(a->label)))
		snprintf(line, sizeof(line), "%s", what);
	else
		snprintf(line, sizeof(line), "%s: %s", a->label, what);
	rt_print_error(line);
	if (!a->sock || a->stopped)
		return;
	error.daemon = a->host;
	error.component = a->label;
	error.message = line;
	error.usage = code == RT_EUSAGE;
	sync.body_case = KB__SYNC__BODY_ERROR;
	sync.error = &error;
	/* stay connected until the coordinator answers (its SHUTDOWN), as a
	 * daemon does: it reads the reason before it sees this host go */
	if (send_up(a, &sync) == RT_EOK) {
		zmq_pollitem_t item = { .socket = a->sock, .events = ZMQ_POLLIN };
		uint64_t until = now_ms() + 2000;
		Kb__Sync *got = NULL;

		while (now_ms() < until && zmq_poll(&item, 1, 200) >= 0) {
			if (recv_up(a, 0, &got) || (got && got->body_case != KB__SYNC__BODY_PROGRESS))
				break;
			rt_wire_free_sync(got);
			got = NULL;
		}
		rt_wire_free_sync(got);
	}
}

/* ---------------------------------------------------------------- keeper */

/* A stop signal waiting for this process (stops.h: blocked everywhere,
 * read from the host's signalfd between windows). */
static enum rt_err stop_signal_pending(const struct agent *a)
{
	int sig = kb_stop_signal_pending();

	if (!sig)
		return RT_EOK;
	return rt_fail(RT_EINTERRUPTED, "%s: interrupted by SIG%s%s; stopped every daemon", a->label,
		       sigabbrev_np(sig), kb_stop_signal_meaning(sig));
}

/* CPU time of the agent's own thread, which runs a direct daemon. */
static uint64_t agent_cpu_ns(const struct agent *a)
{
	struct timespec ts;

	if (!a->main_clock_ok || clock_gettime(a->main_clock, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The watchdog of a daemon run in this thread, which has no local
 * coordinator to watch it: no event and no CPU used (at least 1% of a
 * core since the last look: computing in one long event is alive, ADR
 * 0035) for run.watchdog_ms ends the run, as a local coordinator's
 * watchdog would. */
static enum rt_err direct_watchdog(struct agent *a, uint64_t count, struct direct_watch *w)
{
	uint64_t now = now_ms(), cpu = agent_cpu_ns(a);
	bool computing = w->looked_ms && cpu > w->cpu_ns &&
			 cpu - w->cpu_ns >= (now - w->looked_ms) * 10000;

	w->looked_ms = now;
	w->cpu_ns = cpu;
	if (count != w->events || computing || !w->moved_ms) {
		w->events = count;
		w->moved_ms = now;
	} else if (now - w->moved_ms >= a->job->config.watchdog_ms) {
		return rt_fail(RT_ETIMEOUT, "%s: its daemon ran no event and used no CPU for %llu ms "
			       "(watchdog; set run.watchdog_ms to change)", a->label,
			       (unsigned long long)(now - w->moved_ms));
	}
	return RT_EOK;
}

/* Ends this host now, from the keeper: the daemon computing in this
 * thread cannot be stopped otherwise, and what it computes is lost. */
static void abandon_host(struct agent *a, enum rt_err err)
{
	report_error(a, err);
	kb_kill_strays();
	remove_staging(a);
	fflush(NULL);
	_exit(1);
}

/* While this thread runs the host (starts thousands of daemons, or runs a
 * window, where a daemon in this thread may compute for seconds in one
 * data-mode event and beats only between events) the keeper thread sends
 * the heartbeat, reads the coordinator's frames, looks for a stop signal
 * and is a direct daemon's watchdog. What it finds goes to this thread
 * (keeper_verdict), except during a direct daemon's window: then it ends
 * the host itself, at once. */
static void *keeper_main(void *arg)
{
	struct agent *a = arg;
	const struct timespec nap = { 0, KEEPER_NAP_MS * 1000000L };
	struct direct_watch watch = { 0 };
	uint64_t count;

	while (!__atomic_load_n(&a->keeper_quit, __ATOMIC_RELAXED)) {
		bool direct;
		enum rt_err err;

		nanosleep(&nap, NULL);
		if (!__atomic_load_n(&a->lent, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&a->keeper_failed, __ATOMIC_RELAXED)) {
			watch.moved_ms = 0; /* between windows the coordinator's watchdog counts */
			continue;
		}
		if (pthread_mutex_trylock(&a->sock_lock))
			continue;
		/* holding the lock, the socket is lent: the agent's thread takes
		 * it back (lent = 0) only under the lock */
		direct = __atomic_load_n(&a->host_open, __ATOMIC_RELAXED) &&
			 kb_local_direct_events(a->local, &count);
		err = keep_up(a);
		if (!err)
			err = stop_signal_pending(a);
		if (!err && direct)
			err = direct_watchdog(a, count, &watch);
		if (err && direct)
			abandon_host(a, err);
		if (err) {
			snprintf(a->keeper_line, sizeof(a->keeper_line), "%s", rt_last_error());
			a->keeper_err = err;
			__atomic_store_n(&a->keeper_failed, 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&a->sock_lock);
	}
	return NULL;
}

/* The keeper takes no signal (it starts with all blocked): SIGCHLD and the
 * stop signals wait for the host's signalfd, which only reads blocked ones. */
static void start_keeper(struct agent *a)
{
	sigset_t all, old;

	a->main_clock_ok = pthread_getcpuclockid(pthread_self(), &a->main_clock) == 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	a->keeper_on = pthread_create(&a->keeper, NULL, keeper_main, a) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void stop_keeper(struct agent *a)
{
	if (!a->keeper_on)
		return;
	__atomic_store_n(&a->keeper_quit, 1, __ATOMIC_RELAXED);
	pthread_join(a->keeper, NULL);
	a->keeper_on = false;
}

/* ---------------------------------------------------------------- main */

/* This host's daemons, started while the keeper beats for this host:
 * starting thousands takes seconds, and an assigned host that says nothing
 * for RT_COORD_SILENCE_MS is taken for dead. */
static enum rt_err open_host(struct agent *a, char **argv)
{
	enum rt_err err, verdict;

	lend_socket(a);
	err = kb_local_open(a->job, a->rank_here, argv, &a->local);
	verdict = take_socket(a);
	if (!err && !verdict)
		__atomic_store_n(&a->host_open, 1, __ATOMIC_RELAXED);
	return err ? err : verdict;
}

static int usage(const char *why)
{
	char line[1200];

	snprintf(line, sizeof(line), "agent: %s (see `kernbench agent --help`)", why);
	rt_print_error(line);
	return 2;
}

/* The command line (cli.c), then what it leaves out: the index from the
 * environment, and whether the keys are the coordinator's (hostkeys.h). */
static int parse_args(struct agent *a, int argc, char **argv)
{
	int rc = kb_cli_parse_agent(argc, argv, &a->opts);

	if (rc >= 0)
		return rc ? rc : -1; /* -1: --help */
	a->coordinator = a->opts.coordinator;
	a->keys = a->opts.keys;
	memset(&a->opts.keys, 0, sizeof(a->opts.keys));
	if (a->opts.have_index)
		a->index = (struct kb_agent_index){ a->opts.index, 0, "--index" };
	if (!kb_hosts_loopback(a->coordinator) && !a->keys.on)
		return usage("a coordinator off loopback needs --keys FILE (CURVE)");
	if (!a->keys.on && rt_keys_check_curve())
		return usage(rt_last_error());
	a->ephemeral = !a->keys.on; /* the coordinator's, left on this machine */
	if (!a->opts.have_index && kb_agent_env_index(getenv, &a->index))
		return usage(rt_last_error());
	return 0;
}

/* The host's own output folder: /tmp/kb-agent-PID-XXXXXX (removed at the
 * end, and by the next agent if this one was killed). */
static enum rt_err make_staging(struct agent *a)
{
	char parts[RT_PATH_MAX + 32];

	snprintf(a->staging, sizeof(a->staging), "/tmp/kb-agent-%d-XXXXXX", (int)getpid());
	if (!mkdtemp(a->staging)) {
		a->staging[0] = '\0';
		return rt_fail(RT_EIO, "%s: cannot create a folder in /tmp: %s", a->label,
			       strerror(errno));
	}
	snprintf(parts, sizeof(parts), "%s/%s", a->staging, RT_PARTS_DIR);
	if (mkdir(parts, 0700))
		return rt_fail(RT_EIO, "%s: cannot create %s: %s", a->label, parts, strerror(errno));
	snprintf(a->job->out_dir, sizeof(a->job->out_dir), "%s", a->staging);
	kb_guard_staging(a->staging);
	return RT_EOK;
}

/* The job as this host runs it: local daemons as the run asks (threads,
 * ipc or loopback tcp), no CURVE inside the host, parts into its own
 * folder. */
static enum rt_err localise_job(struct agent *a)
{
	struct rt_job *job = a->job;

	snprintf(job->config.bind_host, sizeof(job->config.bind_host), "127.0.0.1");
	memset(&job->keys, 0, sizeof(job->keys));
	for (size_t i = 0; i < sizeof(job->hbm_fds) / sizeof(job->hbm_fds[0]); i++)
		job->hbm_fds[i] = -1;
	for (size_t i = 0; i < sizeof(job->tcm_fds) / sizeof(job->tcm_fds[0]); i++)
		job->tcm_fds[i] = -1;
	job->quiet = true;
	return make_staging(a);
}

/* ZeroMQ's threads must not take the signals the agent reads from its
 * signalfd (a SIGCHLD they took would be lost): they start with them
 * blocked. */
static void *start_zmq(void)
{
	sigset_t block, old;
	void *zctx, *sock;

	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	kb_stop_signals_add(&block);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	zctx = zmq_ctx_new();
	sock = zctx ? zmq_socket(zctx, ZMQ_DEALER) : NULL; /* starts its threads */
	if (sock)
		zmq_close(sock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return zctx;
}

int kb_agent_main(int argc, char **argv)
{
	static char *daemon_argv[] = { (char *)"agent", NULL };
	struct agent a = { 0 };
	enum rt_err err;
	int rc = parse_args(&a, argc, argv);

	if (rc)
		return rc < 0 ? 0 : rc; /* -1: --help */
	kb_guard_stops();
	kb_sweep_dead_tmp("kb-agent-"); /* what killed agents left */
	snprintf(a.label, sizeof(a.label), "agent %u", a.index.index);
	rt_buf_init(&a.frame);
	pthread_mutex_init(&a.sock_lock, NULL);
	pthread_mutex_lock(&a.sock_lock); /* the socket is this thread's but when lent */
	a.job = calloc(1, sizeof(*a.job));
	a.zctx = start_zmq();
	err = a.job && a.zctx ? RT_EOK : rt_fail(RT_ENOMEM, "agent: out of memory");
	if (!err)
		err = hello(&a);
	/* under the token from now on: a failure starting this host's daemons
	 * reaches the coordinator as ERROR */
	if (!err)
		err = open_socket(&a, a.token);
	if (!err) {
		watch_connection(&a, ZMQ_EVENT_DISCONNECTED);
		start_keeper(&a);
	}
	if (!err)
		err = localise_job(&a);
	if (!err)
		err = open_host(&a, daemon_argv);
	if (!err)
		err = participate(&a);
	if (err)
		report_error(&a, err);
	stop_keeper(&a);
	pthread_mutex_unlock(&a.sock_lock);
	kb_local_close(&a.local, err != RT_EOK);
	remove_staging(&a);
	close_socket(&a);
	kb_mesh_close(&a.mesh);
	free(a.sent_to);
	if (a.zctx)
		zmq_ctx_term(a.zctx);
	rt_buf_release(&a.frame);
	free(a.job);
	free(a.files);
	memset(&a.keys, 0, sizeof(a.keys));
	return err == RT_EOK ? 0 : err == RT_EUSAGE ? 2 : 1;
}
