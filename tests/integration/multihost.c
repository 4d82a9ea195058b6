/* multihost.c — see multihost.h. */
#include "multihost.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

const char *mh_netns_script(void)
{
	static char path[1024];
	const char *root = getenv("KB_ROOT");

	snprintf(path, sizeof(path), "%s/tests/netns.sh", root ? root : ".");
	return path;
}

/* Runs tests/netns.sh with `args`; its stderr (one line on failure) into
 * `why`. Exit status of the script. */
static int netns_script(const char *args, char *why, size_t cap)
{
	char cmd[1400];
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "sh '%s' %s 2>&1", mh_netns_script(), args);
	p = popen(cmd, "r");
	if (!p) {
		snprintf(why, cap, "cannot run %s: %s", mh_netns_script(), strerror(errno));
		return -1;
	}
	if (!fgets(why, (int)cap, p))
		why[0] = '\0';
	why[strcspn(why, "\n")] = '\0';
	while (fgetc(p) != EOF)
		;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Sets made by this process, torn down at exit whatever happened. */
static struct mh_net *live_nets[8];

static void down_all(void)
{
	for (int i = 0; i < 8; i++)
		if (live_nets[i])
			mh_net_down(live_nets[i]);
}

bool mh_net_up(struct mh_net *net, int n, char *why, size_t cap)
{
	static int made;
	static bool hooked;
	char args[64];

	memset(net, 0, sizeof(*net));
	if (geteuid() != 0) {
		snprintf(why, cap, "network namespaces need root (CI runs the suite as root)");
		return false;
	}
	if (netns_script("probe", why, cap) != 0)
		return false;
	cr_assert_lt(made, 26, "more than 26 namespace sets in one test process");
	snprintf(net->id, sizeof(net->id), "%d%c", (int)getpid(), 'a' + made++);
	net->n = n;
	if (!hooked) {
		atexit(down_all);
		hooked = true;
	}
	for (int i = 0; i < 8; i++)
		if (!live_nets[i]) {
			live_nets[i] = net;
			break;
		}
	snprintf(args, sizeof(args), "up %s %d", net->id, n);
	net->up = true;
	cr_assert_eq(netns_script(args, why, cap), 0, "tests/netns.sh %s: %s", args, why);
	return true;
}

void mh_net_down(struct mh_net *net)
{
	char args[64], why[512];

	if (!net->up)
		return;
	snprintf(args, sizeof(args), "down %s", net->id);
	netns_script(args, why, sizeof(why));
	net->up = false;
	for (int i = 0; i < 8; i++)
		if (live_nets[i] == net)
			live_nets[i] = NULL;
}

void mh_ns_name(const struct mh_net *net, int host, char *out, size_t cap)
{
	snprintf(out, cap, "kb-%s-h%d", net->id, host);
}

void mh_ns_addr(int host, char *out, size_t cap)
{
	snprintf(out, cap, "10.77.0.%d", host + 1);
}

/* The inode of a network namespace: /run/netns/NAME is a bind mount of
 * the namespace file, /proc/PID/ns/net of its process's. */
static bool ns_inode(const char *path, ino_t *ino)
{
	struct stat st;

	if (stat(path, &st))
		return false;
	*ino = st.st_ino;
	return true;
}

static bool is_zombie(const char *pid)
{
	char path[300], line[512], *p;
	FILE *f;
	bool z = false;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')))
		z = p[2] == 'Z' || p[2] == 'X';
	fclose(f);
	return z;
}

int mh_ns_procs(const struct mh_net *net, int host, pid_t *out, int cap)
{
	char name[64], path[300];
	ino_t want, ino;
	DIR *d;
	struct dirent *e;
	int n = 0;

	mh_ns_name(net, host, name, sizeof(name));
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	if (!ns_inode(path, &want))
		return 0;
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/net", e->d_name);
		if (ns_inode(path, &ino) && ino == want && !is_zombie(e->d_name) && n < cap)
			out[n++] = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

pid_t mh_spawn(const struct mh_net *net, int host, char *const argv[], char *const env[],
	       const char *errpath)
{
	pid_t pid = fork();

	if (pid == 0) {
		char ns[64], *full[80];
		int n = 0, fd, null;

		/* a test that times out takes what it started down with it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(errpath ? errpath : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(fd, 2);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		if (net) {
			mh_ns_name(net, host, ns, sizeof(ns));
			full[n++] = (char *)"ip";
			full[n++] = (char *)"netns";
			full[n++] = (char *)"exec";
			full[n++] = ns;
		}
		for (int i = 0; argv[i] && n < 79; i++)
			full[n++] = argv[i];
		full[n] = NULL;
		execvp(full[0], full);
		_exit(127);
	}
	return pid;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int mh_wait(pid_t pid, int seconds)
{
	long until = now_ms() + seconds * 1000L;
	int status;

	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);

		if (got == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (got < 0)
			return -1;
		if (now_ms() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(20000);
	}
}

bool mh_all_gone(const pid_t *pids, int n, int seconds)
{
	long until = now_ms() + seconds * 1000L;

	for (;;) {
		int alive = 0;
		char pid[16];

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		for (int i = 0; i < n; i++) {
			snprintf(pid, sizeof(pid), "%d", (int)pids[i]);
			alive += !is_zombie(pid);
		}
		if (!alive)
			return true;
		if (now_ms() > until)
			return false;
		usleep(50000);
	}
}

void mh_keygen(const char *dir, char *keys, size_t cap)
{
	struct kb_result r;

	snprintf(keys, cap, "%s/run.keys", dir);
	kb_run(&r, "keygen", "--out", keys, NULL);
	cr_assert_eq(r.status, 0, "keygen: %s", r.err);
}

void mh_write_hosts(const char *path, const char *coordinator, const char *hosts)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "cannot write %s", path);
	fprintf(f, "coordinator: %s   # where agents connect\nhosts:\n%s", coordinator, hosts);
	fclose(f);
}

/* True if nothing holds tcp `port` on loopback now. */
static bool port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	bool free_now;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	free_now = s >= 0 && !bind(s, (struct sockaddr *)&a, sizeof(a));
	if (s >= 0)
		close(s);
	return free_now;
}

int mh_free_port(void)
{
	static int calls;
	int low = 32768;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	/* below the ephemeral range: an agent connecting before the
	 * coordinator binds takes an ephemeral source port, and one equal to
	 * the target port would connect to itself and hold it */
	if (f) {
		if (fscanf(f, "%d", &low) != 1)
			low = 32768;
		fclose(f);
	}
	cr_assert_gt(low, 12000, "the ephemeral port range starts at %d: no room below it", low);
	for (int i = 0; i < 200; i++) {
		int span = low - 11000;
		int port = 10000 + (int)(((unsigned)getpid() * 131u + (unsigned)calls++ * 17u) %
					 (unsigned)span);

		if (port_free(port))
			return port;
	}
	cr_assert_fail("no free tcp port on loopback below %d", low);
	return 0;
}

static void add_common(char **argv, int *n, const char *out, const char *hosts, const char *keys)
{
	argv[(*n)++] = (char *)"--quiet";
	argv[(*n)++] = (char *)"--out";
	argv[(*n)++] = (char *)out;
	if (hosts) {
		argv[(*n)++] = (char *)"--hosts";
		argv[(*n)++] = (char *)hosts;
	}
	if (keys) {
		argv[(*n)++] = (char *)"--keys";
		argv[(*n)++] = (char *)keys;
	}
	argv[*n] = NULL;
}

void mh_ring_argv(char **argv, const char *out, const char *pass, const char *colocate,
		  const char *hosts, const char *keys)
{
	static char passarg[16];
	static const char *const fixed[] = {
		"run", "ring_attention", "--mode", "data", "--ranks", "4", "--pes", "1", "--seed",
		"7", "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
		"tile=16", "--arg", "seq_kv=40", "--colocate",
	};
	int n = 0;

	snprintf(passarg, sizeof(passarg), "pass=%s", pass);
	argv[n++] = (char *)kb_bin();
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = (char *)fixed[i];
	argv[n++] = (char *)colocate;
	argv[n++] = (char *)"--arg";
	argv[n++] = passarg;
	add_common(argv, &n, out, hosts, keys);
}

void mh_long_argv(char **argv, const char *out, const char *hosts, const char *keys)
{
	/* about 100 000 windows: tens of seconds, killed after a few */
	static const char *const fixed[] = {
		"run", "ring_attention", "--ranks", "4", "--pes", "1", "--arg", "heads_q=4",
		"--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg", "tile=16", "--arg",
		"seq_kv=160", "--trace", "off",
	};
	int n = 0;

	argv[n++] = (char *)kb_bin();
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = (char *)fixed[i];
	add_common(argv, &n, out, hosts, keys);
}

/* Entries of `dir` named kb-<pid>-* or kb-agent-<pid>-* for any of pids. */
static int leftovers_in(const char *dir, const pid_t *pids, int n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int left = 0;

	while (d && (e = readdir(d))) {
		for (int i = 0; i < n; i++) {
			char a[48], b[48];

			snprintf(a, sizeof(a), "kb-%d-", (int)pids[i]);
			snprintf(b, sizeof(b), "kb-agent-%d-", (int)pids[i]);
			if (!strncmp(e->d_name, a, strlen(a)) || !strncmp(e->d_name, b, strlen(b))) {
				cr_log_warn("left behind: %s/%s", dir, e->d_name);
				left++;
			}
		}
	}
	if (d)
		closedir(d);
	return left;
}

int mh_leftovers(const pid_t *pids, int n)
{
	return leftovers_in("/tmp", pids, n) + leftovers_in("/dev/shm", pids, n);
}

int mh_lines_with(const char *text, const char *needle)
{
	int n = 0;

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		n += memmem(line, len, needle, strlen(needle)) != NULL;
		line = end ? end + 1 : NULL;
	}
	return n;
}

pid_t mh_spawn_agent(const struct mh_net *net, int index, const char *coordinator,
		     const char *keys, const char *errpath)
{
	char idx[16];
	char *argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator",
			 (char *)coordinator, (char *)"--index", idx, (char *)"--keys", (char *)keys,
			 NULL };

	snprintf(idx, sizeof(idx), "%d", index);
	return mh_spawn(net, index + 1, argv, NULL, errpath);
}
