/* test_curve.c — issue 11 item 3: CURVE keys. keygen writes a private
 * file once; a keyed run gives the unkeyed run's bytes; strangers without
 * the run's keys cannot join or stall it; off loopback keys are required. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "../integration/harness.h"
#include "hostile.h"

static void keygen(const char *dir, char *keys, size_t cap)
{
	struct kb_result r;

	snprintf(keys, cap, "%s/run.keys", dir);
	kb_run(&r, "keygen", "--out", keys, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
}

/* summary.json without the lines that name the command line or wall time
 * (merge_s: part of it) */
static char *deterministic_summary(const char *dir)
{
	char path[400];
	char *s, *out, *o;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	s = kb_slurp(path, NULL);
	cr_assert(s, "no %s", path);
	out = calloc(1, strlen(s) + 1);
	o = out;
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
		if (!strstr(line, "\"command\"") && !strstr(line, "wall") &&
		    !strstr(line, "\"merge_s\""))
			o += sprintf(o, "%s\n", line);
	free(s);
	return out;
}

static void expect_same_run(const char *a, const char *b)
{
	char pa[400], pb[400];
	char *sa = deterministic_summary(a), *sb = deterministic_summary(b);

	cr_expect_str_eq(sa, sb, "summary.json differs between %s and %s", a, b);
	snprintf(pa, sizeof(pa), "%s/op_log.jsonl", a);
	snprintf(pb, sizeof(pb), "%s/op_log.jsonl", b);
	cr_expect(kb_same_file(pa, pb), "op_log.jsonl differs between %s and %s", a, b);
	free(sa);
	free(sb);
}

Test(hostile_curve, keygen_writes_a_private_file_and_never_overwrites, .timeout = 30)
{
	char dir[256], keys[300];
	struct kb_result r;
	struct stat st;
	char *before, *after;

	kb_tmpdir(dir, sizeof(dir), "keygen");
	keygen(dir, keys, sizeof(keys));
	cr_assert_eq(stat(keys, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
	before = kb_slurp(keys, NULL);
	cr_assert(before && strstr(before, "server-secret ") && strstr(before, "client-public "));
	kb_run(&r, "keygen", "--out", keys, NULL);
	cr_expect_neq(r.status, 0);
	cr_expect(strstr(r.err, "overwrite"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	after = kb_slurp(keys, NULL);
	cr_expect_str_eq(before, after, "keygen changed an existing key file");
	free(before);
	free(after);
}

Test(hostile_curve, keyed_tcp_run_gives_identical_bytes, .timeout = 120)
{
	char dir[256], keys[300], plain[300], keyed[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "curve");
	keygen(dir, keys, sizeof(keys));
	snprintf(plain, sizeof(plain), "%s/plain", dir);
	snprintf(keyed, sizeof(keyed), "%s/keyed", dir);
	kb_run(&r, "run", "traffic", "--quiet", "--out", plain, "--transport", "tcp", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", "traffic", "--quiet", "--out", keyed, "--transport", "tcp", "--keys", keys,
	       NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	expect_same_run(plain, keyed);
}

/* A DEALER that sends garbage and a fake READY: without CURVE, or (given
 * the run's key file) knowing the server's public key but with a client
 * key pair of its own, which only the ZAP handler can refuse. */
static void intrude(int port, const char *keys)
{
	char endpoint[64], pub[41], sec[41], spub[41] = "";
	void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
	int linger = 0;

	snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%d", port);
	if (keys) {
		char *text = kb_slurp(keys, NULL), *at = text ? strstr(text, "server-public ") : NULL;

		cr_assert(at, "no server-public in %s", keys);
		memcpy(spub, at + strlen("server-public "), 40);
		free(text);
		cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
		zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, spub, 41);
		zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, 41);
		zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 41);
	}
	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	cr_assert_eq(zmq_connect(sock, endpoint), 0);
	zmq_send(sock, "\xff\x00garbage", 9, ZMQ_DONTWAIT);
	zmq_send(sock, "READY", 5, ZMQ_DONTWAIT);
	usleep(200000);
	zmq_close(sock);
	zmq_ctx_term(ctx);
}

Test(hostile_curve, strangers_without_the_keys_cannot_join_or_stall_a_keyed_run,
     .timeout = 180)
{
	char dir[256], keys[300], plain[300], keyed[300], errpath[400];
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", keyed, (char *)"--transport", (char *)"tcp",
			 (char *)"--keys", keys, (char *)"--arg", (char *)"messages=200000", NULL };
	struct kb_result r;
	pid_t pid;
	int port;
	char *err;

	kb_tmpdir(dir, sizeof(dir), "curve-stranger");
	keygen(dir, keys, sizeof(keys));
	snprintf(plain, sizeof(plain), "%s/plain", dir);
	snprintf(keyed, sizeof(keyed), "%s/keyed", dir);
	snprintf(errpath, sizeof(errpath), "%s/launcher.stderr", dir);
	kb_run(&r, "run", "traffic", "--quiet", "--out", plain, "--transport", "tcp", "--arg",
	       "messages=200000", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_adopt_orphans();
	pid = kbh_spawn(argv, errpath, -1, 0, false);
	cr_assert_geq(kbh_wait_children(pid, 4), 4, "the run did not start its daemons");
	port = kbh_tcp_port(pid);
	cr_assert_gt(port, 0);
	intrude(port, NULL);
	intrude(port, keys);
	cr_assert_eq(kb_wait(pid), 0, "%s", kbh_stderr(errpath));
	expect_same_run(plain, keyed);
	err = kbh_stderr(errpath);
	cr_expect(strstr(err, "refused a connection") && kb_count_lines(err) == 1,
		  "the wrong-key stranger's refusal is not logged exactly once: '%s'", err);
	free(err);
	cr_expect_eq(kb_leftover_daemons(), 0, "kb- processes left behind");
}

Test(hostile_curve, non_loopback_bind_without_keys_is_refused_before_spawning, .timeout = 60)
{
	char dir[256], out[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "bind");
	snprintf(out, sizeof(out), "%s/out", dir);
	kb_run(&r, "run", "traffic", "--quiet", "--out", out, "--transport", "tcp", "--set",
	       "run.bind_host=0.0.0.0", "--arg", "messages=100", NULL);
	cr_expect_neq(r.status, 0);
	cr_expect(strstr(r.err, "keygen") && strstr(r.err, "--keys") && strstr(r.err, "0.0.0.0"),
		  "'%s'", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

Test(hostile_curve, ipc_socket_directory_is_private, .timeout = 90)
{
	char dir[256], errpath[400], endpoint[256];
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", dir, (char *)"--transport", (char *)"ipc", (char *)"--arg",
			 (char *)"messages=400000000", NULL };
	struct stat st;
	char *slash;
	pid_t pid;

	kb_tmpdir(dir, sizeof(dir), "ipcdir");
	snprintf(errpath, sizeof(errpath), "%s.stderr", dir);
	kb_adopt_orphans();
	pid = kbh_spawn(argv, errpath, -1, 0, false);
	cr_assert_geq(kbh_wait_children(pid, 4), 4, "the run did not start its daemons");
	cr_assert(kbh_ipc_endpoint(pid, endpoint, sizeof(endpoint)));
	slash = strrchr(endpoint, '/');
	cr_assert(slash);
	*slash = 0;
	cr_assert_eq(stat(endpoint + strlen("ipc://"), &st), 0, "%s", endpoint);
	cr_expect_eq(st.st_mode & 0777, 0700, "socket directory %s has mode %o", endpoint,
		     st.st_mode & 0777);
	kill(pid, SIGINT);
	cr_expect_eq(kb_wait(pid), 130);
	unlink(errpath);
}
