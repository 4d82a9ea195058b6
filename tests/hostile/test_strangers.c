/* test_strangers.c — processes the launcher did not start, on its
 * coordinator endpoint (ipc and loopback tcp): never fatal, never mistaken
 * for a daemon, never printed raw, never able to make it allocate at will. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "../integration/harness.h"
#include "hostile.h"

struct victim {
	char dir[256];
	char errpath[300];
	pid_t pid;
};

/* A run long enough to be intruded upon; ended on purpose by end_victim. */
static void start_victim(struct victim *v, const char *transport)
{
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", v->dir, (char *)"--transport", (char *)transport,
			 (char *)"--arg", (char *)"components=4", (char *)"--arg",
			 (char *)"messages=400000000", NULL };

	kb_tmpdir(v->dir, sizeof(v->dir), "victim");
	snprintf(v->errpath, sizeof(v->errpath), "%s/launcher.stderr", v->dir);
	kb_adopt_orphans();
	v->pid = kbh_spawn(argv, v->errpath, -1, 0, false);
	cr_assert_geq(kbh_wait_children(v->pid, 4), 4, "the run did not start its daemons");
	usleep(300000);
}

/* The run must still be going after the intrusion; Ctrl-C ends it (130).
 * Returns its stderr (caller frees). */
static char *end_victim(struct victim *v)
{
	char *err;

	usleep(1000000);
	err = kbh_stderr(v->errpath);
	cr_expect_eq(waitpid(v->pid, NULL, WNOHANG), 0, "a stranger ended the run: %s", err);
	free(err);
	kill(v->pid, SIGINT);
	cr_expect_eq(kb_wait(v->pid), 130);
	err = kbh_stderr(v->errpath);
	usleep(200000);
	cr_expect_eq(kb_leftover_daemons(), 0, "kb- processes left behind");
	cr_expect_eq(kb_leftover_socket_dirs(v->pid), 0, "socket directory left behind");
	return err;
}

static void send_as(const char *endpoint, const char *identity, size_t id_len, const void *body,
		    size_t len, int times)
{
	void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
	int linger = 2000;

	if (identity)
		zmq_setsockopt(sock, ZMQ_ROUTING_ID, identity, id_len);
	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	cr_assert_eq(zmq_connect(sock, endpoint), 0);
	for (int i = 0; i < times; i++)
		zmq_send(sock, body, len, 0);
	zmq_close(sock);
	zmq_ctx_term(ctx);
}

/* ---------------------------------------------------------------- item 14 */

Test(hostile_strangers, frames_from_a_stranger_are_ignored_and_reported_once_escaped,
     .timeout = 90)
{
	static const char ident[] = "evil\x1b[31m\nline";
	static const char body[] = "\x0a\xff garbage\n\x1b[2J";
	char endpoint[300];
	struct victim v;
	char *err;

	start_victim(&v, "ipc");
	cr_assert(kbh_ipc_endpoint(v.pid, endpoint, sizeof(endpoint)));
	send_as(endpoint, ident, sizeof(ident) - 1, body, sizeof(body) - 1, 200);
	err = end_victim(&v);
	cr_expect(strstr(err, "ignored a frame from a process the launcher did not start"), "%s",
		  err);
	cr_expect(strstr(err, "evil\\x1b[31m\\x0aline"), "identity not shown escaped: %s", err);
	cr_expect_null(strchr(err, '\x1b'), "a raw escape byte reached the terminal: %s", err);
	cr_expect_eq(kb_count_lines(err), 2, "the warning once, then the interrupt line: %s", err);
	free(err);
}

Test(hostile_strangers, http_get_to_the_tcp_port_does_not_end_the_run, .timeout = 90)
{
	/* a browser's request: long enough that the ZMTP/1.0 fallback reads
	 * whole frames out of it */
	static const char get[] =
		"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n"
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
		"Chrome/120.0.0.0 Safari/537.36\r\nAccept: text/html,application/xhtml+xml,"
		"application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8\r\n"
		"Accept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.9,de;q=0.8\r\n"
		"Cookie: session=0123456789abcdef0123456789abcdef; theme=dark; lang=en\r\n"
		"Cache-Control: max-age=0\r\nUpgrade-Insecure-Requests: 1\r\n\r\n";
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct victim v;
	char *err;
	int fd, port;

	start_victim(&v, "tcp");
	port = kbh_tcp_port(v.pid);
	cr_assert_gt(port, 0, "no listening tcp port for launcher %d", (int)v.pid);
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 3; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
		cr_assert_eq(write(fd, get, sizeof(get) - 1), (ssize_t)sizeof(get) - 1);
		usleep(200000);
		close(fd);
	}
	err = end_victim(&v);
	cr_expect(strstr(err, "interrupted"), "%s", err);
	free(err);
}

/* ---------------------------------------------------------------- item 15 */

/* The old identities were d<index>; "d00" parsed as daemon 0. Frames under
 * them (a READY, a DONE-looking frame) come from strangers now. */
Test(hostile_strangers, guessable_identities_are_strangers, .timeout = 90)
{
	static const char *const guesses[] = { "d0", "d00", "d1", "0", "1", "0.", "1.0" };
	static const char body[] = "\x08\x01\x12\x02\x08\x00"; /* schema 1, READY daemon 0 */
	char endpoint[300];
	struct victim v;
	char *err;

	start_victim(&v, "ipc");
	cr_assert(kbh_ipc_endpoint(v.pid, endpoint, sizeof(endpoint)));
	for (size_t i = 0; i < sizeof(guesses) / sizeof(guesses[0]); i++)
		send_as(endpoint, guesses[i], strlen(guesses[i]), body, sizeof(body) - 1, 5);
	err = end_victim(&v);
	cr_expect(strstr(err, "ignored a frame"), "%s", err);
	cr_expect_null(strstr(err, "kb-traffic"), "a healthy daemon was blamed: %s", err);
	free(err);
}

/* Each daemon's token is in its environment (readable by its owner only),
 * not on its command line, and carries 128 random bits. */
Test(hostile_strangers, daemon_tokens_are_secret_and_random, .timeout = 90)
{
	struct victim v;
	pid_t kids[16];
	char tokens[4][128] = { { 0 } };
	int n;
	char *err;

	start_victim(&v, "ipc");
	n = kb_children(v.pid, kids, 16);
	cr_assert_eq(n, 4);
	for (int i = 0; i < n; i++) {
		char path[64];
		size_t len = 0;
		char *env, *cmd;

		snprintf(path, sizeof(path), "/proc/%d/environ", (int)kids[i]);
		env = kbh_read_proc(path, &len);
		cr_assert(env);
		for (size_t k = 0; k < len; k += strlen(env + k) + 1)
			if (!strncmp(env + k, "KB_DAEMON_TOKEN=", 16))
				snprintf(tokens[i], sizeof(tokens[i]), "%s", env + k + 16);
		free(env);
		cr_expect_geq(strlen(tokens[i]), 34, "daemon %d has no token", (int)kids[i]);
		cr_expect_geq(strspn(strchr(tokens[i], '.') ? strchr(tokens[i], '.') + 1 : "",
				     "0123456789abcdef"),
			      32, "token '%s' lacks 128 random bits", tokens[i]);
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)kids[i]);
		cmd = kbh_read_proc(path, &len);
		cr_assert(cmd);
		for (size_t k = 0; k < len; k += strlen(cmd + k) + 1)
			cr_expect_null(strstr(cmd + k, strchr(tokens[i], '.') ? strchr(tokens[i], '.')
									     : "?"),
				       "the token is on the command line");
		free(cmd);
		for (int j = 0; j < i; j++)
			cr_expect_str_neq(tokens[i], tokens[j], "two daemons share a token");
	}
	err = end_victim(&v);
	free(err);
}

/* ---------------------------------------------------------------- item 16 */

/* Speaks ZMTP 3.0 by hand to claim a 1 GiB frame: the coordinator must drop
 * the connection (ZMQ_MAXMSGSIZE) instead of waiting to allocate it. */
Test(hostile_strangers, frame_claiming_a_gibibyte_drops_the_connection, .timeout = 90)
{
	unsigned char greeting[64] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L' };
	static const unsigned char ready[] = "\x04\x1c\x05READY\x0bSocket-Type\x00\x00\x00\x06"
					     "DEALER";
	unsigned char frame[9 + 16] = { 0x02, 0, 0, 0, 0, 0x40, 0, 0, 0 }; /* 2^30 bytes */
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char endpoint[300], buf[256];
	struct victim v;
	bool closed = false;
	char *err;
	int fd;

	start_victim(&v, "ipc");
	cr_assert(kbh_ipc_endpoint(v.pid, endpoint, sizeof(endpoint)));
	cr_assert_lt(strlen(endpoint + strlen("ipc://")), sizeof(addr.sun_path));
	memcpy(addr.sun_path, endpoint + strlen("ipc://"), strlen(endpoint + strlen("ipc://")) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0, "%s", addr.sun_path);
	cr_assert_eq(write(fd, greeting, sizeof(greeting)), (ssize_t)sizeof(greeting));
	cr_assert_eq(write(fd, ready, sizeof(ready) - 1), (ssize_t)sizeof(ready) - 1);
	cr_assert_eq(write(fd, frame, sizeof(frame)), (ssize_t)sizeof(frame));
	for (int i = 0; i < 50 && !closed; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t got;

		if (poll(&p, 1, 100) <= 0)
			continue;
		got = read(fd, buf, sizeof(buf));
		closed = got <= 0;
	}
	close(fd);
	cr_expect(closed, "the coordinator kept a connection that claimed a 1 GiB frame");
	err = end_victim(&v);
	free(err);
}

/* ---------------------------------------------------------------- item 17 */

/* binding beyond loopback: see test_curve.c (refused without --keys) */
