/* test_stranger_hosts.c — runs across hosts are authenticated, loopback
 * included (issue 19 item 1, ADR 0036): a process of another user
 * (`nobody`) can neither join a root coordinator's run nor lead a root
 * agent, with or without keys of its own; each refusal is one line. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "hostile.h"

static int stranger_port(int offset)
{
	return 10000 + (int)(((long)getpid() * 10 + 7000 + offset) % 22000);
}

/* Waits up to `secs` for `pid`; kills it if it is still there (-1). */
static int wait_for(pid_t pid, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static bool wait_for_file(const char *path, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		if (!access(path, F_OK))
			return true;
		usleep(50000);
	}
	return false;
}

/* A folder `nobody` may write into. */
static void nobody_dir(const char *base, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", base, name);
	cr_assert_eq(mkdir(out, 0700), 0);
	cr_assert_eq(chown(out, kbh_nobody(), kbh_nobody()), 0);
}

static void write_hosts(const char *path, int port)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f, "coordinator: tcp://127.0.0.1:%d\nhosts:\n  - ranks: [0]\n", port);
	fclose(f);
	chmod(path, 0644);
}

/* `kernbench agent` as `uid` (keys: NULL for none); its exit status and
 * one-line stderr must say it was refused, with `why` in the line. */
static void expect_refused_agent(uid_t uid, int port, const char *keys, const char *errpath,
				 const char *why)
{
	char coord[64];
	char *argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator", coord,
			 (char *)"--index", (char *)"0", keys ? (char *)"--keys" : NULL,
			 (char *)keys, NULL };
	pid_t pid;
	int rc;
	char *err;

	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", port);
	pid = uid ? kbh_spawn_as(uid, argv, errpath) : kb_spawn(argv, errpath);
	cr_assert_gt(pid, 0);
	rc = wait_for(pid, 40);
	err = kbh_stderr(errpath);
	cr_expect(rc > 0, "agent of uid %u was not refused (exit %d): %s", (unsigned)uid, rc, err);
	cr_expect(strstr(err, why), "agent of uid %u: expected '%s' in: %s", (unsigned)uid, why, err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	free(err);
}

static void keygen_as(uid_t uid, const char *keys, const char *errpath)
{
	char *argv[] = { (char *)kb_bin(), (char *)"keygen", (char *)"--out", (char *)keys, NULL };
	pid_t pid = uid ? kbh_spawn_as(uid, argv, errpath) : kb_spawn(argv, errpath);

	cr_assert_eq(wait_for(pid, 20), 0, "keygen as %u failed", (unsigned)uid);
}

/* A key file of nobody's own client keys and the run's server public key
 * (public keys are no secret): DIR-of-own/mixed.keys, mode 0600, nobody's. */
static void with_server_key(const char *own, const char *run_keys, char *out, size_t cap)
{
	char *mine = kb_slurp(own, NULL), *run = kb_slurp(run_keys, NULL), *server;
	FILE *f;

	cr_assert(mine && run);
	server = strstr(run, "server-public ");
	cr_assert(server);
	snprintf(out, cap, "%.*s/mixed.keys", (int)(strrchr(own, '/') - own), own);
	f = fopen(out, "w");
	cr_assert(f);
	fprintf(f, "%.54s\n", server); /* "server-public " and 40 characters */
	for (char *line = strtok(mine, "\n"); line; line = strtok(NULL, "\n"))
		if (!strncmp(line, "client-", 7))
			fprintf(f, "%s\n", line);
	fclose(f);
	chmod(out, 0600);
	cr_assert_eq(chown(out, kbh_nobody(), kbh_nobody()), 0);
	free(mine);
	free(run);
}

Test(stranger_hosts, nobody_cannot_join_a_root_run, .timeout = 240)
{
	char dir[256], nob[300], one[300], two[300], hosts[300], keyfile[128], nkeys[400];
	char e_coord[300], e_agent[300], e_s1[300], e_s2[300], e_s3[300], e_kg[300];
	char port_text[64], mixed[500];
	char *coord_argv[] = { (char *)kb_bin(), (char *)"run", (char *)"gemm", (char *)"--pes",
			       (char *)"2", (char *)"--quiet", (char *)"--out", two,
			       (char *)"--hosts", hosts, NULL };
	char *agent_argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator",
			       port_text, (char *)"--index", (char *)"0", NULL };
	static const char *const ref[] = { "gemm", "--pes", "2", NULL };
	int port = stranger_port(1), rc, ra;
	pid_t coord, agent;

	if (geteuid() != 0)
		cr_skip_test("needs root to run a process as nobody");
	kb_tmpdir(dir, sizeof(dir), "stranger-join");
	chmod(dir, 0755);
	nobody_dir(dir, "nobody", nob, sizeof(nob));
	snprintf(one, sizeof(one), "%s/one", dir);
	snprintf(two, sizeof(two), "%s/two", dir);
	snprintf(hosts, sizeof(hosts), "%s/hosts.yaml", dir);
	snprintf(e_coord, sizeof(e_coord), "%s/coord.err", dir);
	snprintf(e_agent, sizeof(e_agent), "%s/agent.err", dir);
	snprintf(e_s1, sizeof(e_s1), "%s/stranger1.err", dir);
	snprintf(e_s2, sizeof(e_s2), "%s/stranger2.err", dir);
	snprintf(e_s3, sizeof(e_s3), "%s/stranger3.err", dir);
	snprintf(e_kg, sizeof(e_kg), "%s/keygen.err", dir);
	snprintf(nkeys, sizeof(nkeys), "%s/own.keys", nob);
	snprintf(keyfile, sizeof(keyfile), "/tmp/kernbench-0/coordinator-%d.keys", port);
	snprintf(port_text, sizeof(port_text), "tcp://127.0.0.1:%d", port);
	write_hosts(hosts, port);
	kb_run_ok(one, ref);

	coord = kb_spawn(coord_argv, e_coord);
	cr_assert(wait_for_file(keyfile, 20), "the coordinator left no keys in %s", keyfile);
	/* nobody without keys: there are none of its user for this coordinator */
	expect_refused_agent(kbh_nobody(), port, NULL, e_s1, "left no keys for this user");
	/* nobody with keys of its own: they name another coordinator */
	keygen_as(kbh_nobody(), nkeys, e_kg);
	expect_refused_agent(kbh_nobody(), port, nkeys, e_s2, "refused this agent's key");
	/* nobody knowing the coordinator's public key, with its own client
	 * key: the coordinator's ZAP handler refuses that key */
	with_server_key(nkeys, keyfile, mixed, sizeof(mixed));
	expect_refused_agent(kbh_nobody(), port, mixed, e_s3,
			     "refused this agent's key: check --keys");
	/* the run's own agent joins, and the run is the one-host run */
	agent = kb_spawn(agent_argv, e_agent);
	rc = wait_for(coord, 120);
	ra = wait_for(agent, 20);
	cr_assert(rc == 0 && ra == 0, "coordinator %d, agent %d\n%s\n%s", rc, ra,
		  kbh_stderr(e_coord), kbh_stderr(e_agent));
	kb_expect_same_run(one, two, false);
	cr_expect_neq(access(keyfile, F_OK), 0, "the coordinator left its key file %s", keyfile);
}

Test(stranger_hosts, nobody_cannot_lead_a_root_agent, .timeout = 240)
{
	char dir[256], nob[300], out[400], hosts[300], marker[300], so[400], workload[500];
	char nkeyfile[128], rkeys[300], e_coord[300], e1[300], e2[300], e_kg[300], src[700];
	char *coord_argv[] = { (char *)kb_bin(), (char *)"run", workload, (char *)"--pes",
			       (char *)"1", (char *)"--quiet", (char *)"--out", out, (char *)"--hosts",
			       hosts, (char *)"--agent-timeout", (char *)"60", NULL };
	int port = stranger_port(2);
	pid_t coord;

	if (geteuid() != 0)
		cr_skip_test("needs root to run a process as nobody");
	kb_tmpdir(dir, sizeof(dir), "stranger-lead");
	chmod(dir, 0777);
	nobody_dir(dir, "nobody", nob, sizeof(nob));
	snprintf(out, sizeof(out), "%s/out", nob);
	snprintf(hosts, sizeof(hosts), "%s/hosts.yaml", dir);
	snprintf(marker, sizeof(marker), "%s/constructor-ran", dir);
	snprintf(e_coord, sizeof(e_coord), "%s/coord.err", dir);
	snprintf(e1, sizeof(e1), "%s/agent1.err", dir);
	snprintf(e2, sizeof(e2), "%s/agent2.err", dir);
	snprintf(e_kg, sizeof(e_kg), "%s/keygen.err", dir);
	snprintf(rkeys, sizeof(rkeys), "%s/root.keys", dir);
	snprintf(nkeyfile, sizeof(nkeyfile), "/tmp/kernbench-%u/coordinator-%d.keys",
		 (unsigned)kbh_nobody(), port);
	write_hosts(hosts, port);
	/* the stranger's kernel: whoever loads it leaves a mark */
	snprintf(src, sizeof(src),
		 "#define _POSIX_C_SOURCE 200809L\n#include <fcntl.h>\n#include <unistd.h>\n"
		 "#include \"tl.h\"\n"
		 "__attribute__((constructor)) static void mark(void)\n"
		 "{ int fd = open(\"%s\", O_WRONLY | O_CREAT, 0666); if (fd >= 0) close(fd); }\n"
		 "int k(struct tl *tl, const struct tl_args *args);\n"
		 "int k(struct tl *tl, const struct tl_args *args) { (void)tl; (void)args; return 0; }\n",
		 marker);
	kb_build_kernel(dir, "stranger", src, so, sizeof(so));
	chmod(so, 0755);
	snprintf(workload, sizeof(workload), "%s:k", so);

	coord = kbh_spawn_as(kbh_nobody(), coord_argv, e_coord);
	cr_assert_gt(coord, 0);
	cr_assert(wait_for_file(nkeyfile, 20), "nobody's coordinator did not start: %s",
		  kbh_stderr(e_coord));
	/* a root agent without keys finds none of its own user for this port */
	expect_refused_agent(0, port, NULL, e1, "left no keys for this user");
	/* with keys of root's own: nobody's coordinator does not hold them */
	keygen_as(0, rkeys, e_kg);
	expect_refused_agent(0, port, rkeys, e2, "refused this agent's key");
	cr_expect_neq(access(marker, F_OK), 0,
		      "a root agent loaded the kernel object of nobody's coordinator");
	kill(coord, SIGTERM);
	wait_for(coord, 20);
	usleep(300000);
	cr_expect_eq(kb_leftover_daemons(), 0);
	cr_expect_neq(access(nkeyfile, F_OK), 0, "nobody's coordinator left %s", nkeyfile);
}
