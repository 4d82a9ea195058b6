/* test_job_secret.c — the CURVE server secret is the coordinator's alone
 * (ADR 0070): a daemon (which runs user kernels) and an agent (on another
 * machine) never receive it. The test reads what they received — the job
 * file a daemon inherited, and every readable byte of each process's
 * memory — while the run is going, and finds the client keys where they
 * belong but never the server secret. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "../integration/multihost.h"
#include "hostile.h"

#define Z85_KEY 40
#define MAX_SCANNED (256ul << 20)

/* The 40 Z85 characters after "NAME " in a key file. */
static void key_of(const char *file_text, const char *name, char out[Z85_KEY + 1])
{
	const char *at = strstr(file_text, name);

	cr_assert(at, "no %s in the key file", name);
	at += strlen(name) + 1;
	memcpy(out, at, Z85_KEY);
	out[Z85_KEY] = '\0';
}

/* Whether `needle` is anywhere in process `pid`'s readable memory. */
static bool in_memory(pid_t pid, const char *needle)
{
	char path[64], line[512];
	size_t len = strlen(needle), cap = 1 << 20;
	char *buf = malloc(cap);
	bool found = false;
	FILE *maps;
	int mem;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "r");
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	mem = open(path, O_RDONLY);
	cr_assert(buf && maps && mem >= 0, "cannot read the memory of %d", (int)pid);
	while (!found && fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;
		char perms[8];

		/* a mapping this large is reserved address space (a sanitizer's
		 * shadow), not what a timing-mode daemon wrote */
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' ||
		    strstr(line, "[vvar") || strstr(line, "[vsyscall]") || hi - lo > MAX_SCANNED)
			continue;
		/* chunks overlap by len - 1 bytes: no key is cut in two */
		for (unsigned long at = lo; !found && at < hi; at += cap - len + 1) {
			size_t want = hi - at < cap ? hi - at : cap;
			ssize_t got = pread(mem, buf, want, (off_t)at);

			if (got <= 0)
				break;
			found = memmem(buf, (size_t)got, needle, len) != NULL;
			if ((size_t)got < want)
				break;
		}
	}
	fclose(maps);
	close(mem);
	free(buf);
	return found;
}

/* The bytes of the job file (memfd "kb-job") `pid` holds, or NULL. */
static char *job_file_of(pid_t pid, size_t *len)
{
	char dir[64], fd_path[400], target[256];
	struct dirent *e;
	DIR *d;
	char *text = NULL;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	while (d && !text && (e = readdir(d))) {
		ssize_t n;

		snprintf(fd_path, sizeof(fd_path), "%s/%s", dir, e->d_name);
		n = readlink(fd_path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (!strncmp(target, "/memfd:kb-job", 13))
			text = kb_slurp(fd_path, len);
	}
	if (d)
		closedir(d);
	return text;
}

/* Descendants of `root` whose name starts with "kb-" (daemons). */
static int daemons_under(pid_t root, pid_t *out, int cap)
{
	pid_t kids[256];
	int n = kb_children(root, kids, 256), found = 0;

	for (int i = 0; i < n && found < cap; i++) {
		char path[64], comm[64] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)kids[i]);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && !strncmp(comm, "kb-", 3))
			out[found++] = kids[i];
		if (f)
			fclose(f);
	}
	return found;
}

/* Waits (20 s at most) for `n` daemons under `root`. */
static int wait_daemons(pid_t root, int n, pid_t *out, int cap)
{
	int found = 0;

	for (int i = 0; i < 400 && (found = daemons_under(root, out, cap)) < n; i++)
		usleep(50000);
	return found;
}

/* Whether `pid` is past its exec as a daemon (`kb-KIND __daemon ...`):
 * between fork and exec a child is a copy of its parent, whose memory
 * (libzmq's socket options) does hold the secret. */
static bool is_daemon_image(pid_t pid)
{
	char path[64], *cmd;
	size_t len = 0;
	bool yes;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	cmd = kbh_read_proc(path, &len);
	yes = cmd && len > strlen(cmd) + 1 && !strcmp(cmd + strlen(cmd) + 1, "__daemon");
	free(cmd);
	return yes;
}

static void expect_no_secret_in_daemon(pid_t pid, const char *secret, const char *client_secret,
				       bool has_client_keys)
{
	size_t len = 0;
	char *job = NULL;

	/* a sanitizer build takes a while from fork to exec */
	for (int i = 0; i < 200 && !(is_daemon_image(pid) && (job = job_file_of(pid, &len))); i++)
		usleep(50000);

	cr_assert(job, "daemon %d holds no job file", (int)pid);
	cr_expect(!memmem(job, len, secret, Z85_KEY), "daemon %d's job file holds the server secret",
		  (int)pid);
	if (has_client_keys) /* the inspection would have seen a key */
		cr_expect(memmem(job, len, client_secret, Z85_KEY),
			  "daemon %d's job file lacks its client keys", (int)pid);
	cr_expect(!in_memory(pid, secret), "daemon %d has the server secret in memory", (int)pid);
	free(job);
}

/* One host, --keys: every daemon is a CURVE client with the client keys. */
Test(job_secret, daemons_get_the_client_keys_never_the_server_secret, .timeout = 120)
{
	char dir[256], keys[300], out[300], secret[Z85_KEY + 1], client[Z85_KEY + 1];
	char *argv[48], *text;
	pid_t launcher, daemons[64];
	int n;

	kb_tmpdir(dir, sizeof(dir), "secret_daemons");
	mh_keygen(dir, keys, sizeof(keys));
	text = kb_slurp(keys, NULL);
	key_of(text, "server-secret", secret);
	key_of(text, "client-secret", client);
	free(text);
	snprintf(out, sizeof(out), "%s/out", dir);
	mh_long_argv(argv, out, NULL, keys);
	kb_adopt_orphans();
	launcher = kb_spawn(argv, NULL);
	n = wait_daemons(launcher, 4, daemons, 64);
	cr_assert(n >= 4, "only %d daemons started", n);
	for (int i = 0; i < n; i++)
		expect_no_secret_in_daemon(daemons[i], secret, client, true);
	kill(launcher, SIGTERM);
	cr_expect_eq(kb_wait(launcher), 128 + SIGTERM);
	cr_expect_eq(kb_leftover_daemons(), 0, "daemons left behind");
}

/* Across hosts: the agents hold a client-side key file, the Assign they
 * receive carries no keys, and neither they nor their daemons ever see the
 * server secret. */
Test(job_secret, agents_and_their_daemons_never_get_the_server_secret, .timeout = 120)
{
	char dir[256], keys[300], client_keys[300], hosts[300], out[300], coord[64];
	char secret[Z85_KEY + 1], *argv[48], *text, *cut;
	char e0[320], e1[320], ec[320];
	pid_t pids[3], daemons[64];
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "secret_agents");
	mh_keygen(dir, keys, sizeof(keys));
	text = kb_slurp(keys, NULL);
	key_of(text, "server-secret", secret);
	/* the agents' file: the same keys without the server-secret line */
	snprintf(client_keys, sizeof(client_keys), "%s/client.keys", dir);
	cut = strstr(text, "server-secret");
	f = fopen(client_keys, "w");
	cr_assert(f && cut);
	fwrite(text, 1, (size_t)(cut - text), f);
	fputs(strchr(cut, '\n') + 1, f);
	fclose(f);
	chmod(client_keys, 0600);
	free(text);
	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", mh_free_port());
	snprintf(hosts, sizeof(hosts), "%s/hosts.yaml", dir);
	mh_write_hosts(hosts, coord, "  - ranks: [0, 1]\n  - ranks: [2, 3]\n");
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(e0, sizeof(e0), "%s/a0.err", dir);
	snprintf(e1, sizeof(e1), "%s/a1.err", dir);
	snprintf(ec, sizeof(ec), "%s/c.err", dir);
	mh_long_argv(argv, out, hosts, keys);
	kb_adopt_orphans();
	pids[0] = kb_spawn(argv, ec);
	for (int i = 0; i < 2; i++) {
		char idx[8];
		char *agent[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator", coord,
				  (char *)"--index", idx, (char *)"--keys", client_keys, NULL };

		snprintf(idx, sizeof(idx), "%d", i);
		pids[1 + i] = kb_spawn(agent, i ? e1 : e0);
	}
	for (int i = 0; i < 2; i++) {
		pid_t agent = pids[1 + i];
		int n = wait_daemons(agent, 2, daemons, 64);

		cr_assert(n >= 2, "agent %d started %d daemons\ncoordinator: %s\nagent: %s", i, n,
			  kbh_stderr(ec), kbh_stderr(i ? e1 : e0));
		cr_expect(!in_memory(agent, secret), "agent %d has the server secret in memory", i);
		for (int k = 0; k < n; k++)
			expect_no_secret_in_daemon(daemons[k], secret, NULL, false);
	}
	kill(pids[0], SIGTERM);
	kb_wait(pids[0]);
	cr_expect(mh_all_gone(pids + 1, 2, 20), "agents still running after the coordinator left");
	cr_expect_eq(mh_leftovers(pids, 3), 0, "left behind");
}
