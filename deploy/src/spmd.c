/* spmd.c — a run across hosts started as one command by mpirun or srun
 * (spmd.h, ADR 0064). */
#include "spmd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
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

#include "hostkeys.h"
#include "agent.h"
#include "launch.h"
#include "stops.h"
#include "strays.h"
#include "rt/keys.h"

#define WAIT_S_DEFAULT 60   /* how long an agent waits for process 0's files */
#define OWN_AGENT_GRACE_S 15 /* process 0's agent, after the coordinator ended */

/* ---------------------------------------------------------------- engine */

static enum rt_err number(char *(*get)(const char *name), const char *name, uint64_t min,
			  uint32_t *out)
{
	const char *text = get(name);
	uint64_t v;

	if (rt_parse_u64(text, min, UINT32_MAX - 1, &v) != RT_PARSE_OK)
		return rt_fail(RT_EINVAL, "run: %s='%.40s' is not a number%s", name, text ? text : "",
			       min ? " of at least 1" : "");
	*out = (uint32_t)v;
	return RT_EOK;
}

/* The job id as a file-name part: letters, digits, '.', '-' and '_'. */
static void set_job_id(struct kb_spmd *s, const char *a, const char *b)
{
	size_t n = 0;

	snprintf(s->job_id, sizeof(s->job_id), "%s%s%s", a ? a : "job", b ? "." : "", b ? b : "");
	for (char *p = s->job_id; *p; p++, n++)
		if (!(*p >= '0' && *p <= '9') && !(*p >= 'a' && *p <= 'z') &&
		    !(*p >= 'A' && *p <= 'Z') && *p != '.' && *p != '-' && *p != '_')
			*p = '_';
}

/* mpirun: OMPI_COMM_WORLD_*; the job is OpenMPI's job id (PMIx's
 * namespace is the same number). One node when the local size is the
 * world's. */
static enum rt_err from_ompi(char *(*get)(const char *name), struct kb_spmd *s)
{
	uint32_t local = 0;
	enum rt_err err = number(get, "OMPI_COMM_WORLD_SIZE", 1, &s->size);

	if (!err)
		err = number(get, "OMPI_COMM_WORLD_RANK", 0, &s->rank);
	if (!err && get("OMPI_COMM_WORLD_LOCAL_SIZE"))
		err = number(get, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, &local);
	s->engine = "mpirun";
	s->one_node = local == s->size;
	set_job_id(s, get("OMPI_MCA_ess_base_jobid") ? get("OMPI_MCA_ess_base_jobid")
						      : get("PMIX_NAMESPACE"), NULL);
	return err;
}

/* srun: a job step's SLURM_PROCID of SLURM_STEP_NUM_TASKS. The batch
 * shell has SLURM_PROCID too but no step task count: a run there is a
 * one-host run (or the coordinator of a hosts file). */
static enum rt_err from_slurm(char *(*get)(const char *name), struct kb_spmd *s)
{
	uint32_t nodes = 0;
	enum rt_err err = number(get, "SLURM_STEP_NUM_TASKS", 1, &s->size);

	if (!err)
		err = number(get, "SLURM_PROCID", 0, &s->rank);
	if (!err && get("SLURM_STEP_NUM_NODES"))
		err = number(get, "SLURM_STEP_NUM_NODES", 1, &nodes);
	s->engine = "srun";
	s->one_node = nodes == 1;
	if (get("SLURM_LAUNCH_NODE_IPADDR"))
		snprintf(s->launch_addr, sizeof(s->launch_addr), "%s",
			 get("SLURM_LAUNCH_NODE_IPADDR"));
	set_job_id(s, get("SLURM_JOB_ID"), get("SLURM_STEP_ID"));
	return err;
}

enum rt_err kb_spmd_detect(char *(*get)(const char *name), struct kb_spmd *s)
{
	const char *off = get("KB_SPMD");
	enum rt_err err;

	memset(s, 0, sizeof(*s));
	if (off && !strcmp(off, "0"))
		return RT_ENOTFOUND;
	/* mpirun first: inside a Slurm allocation its processes inherit the
	 * batch shell's SLURM_* */
	if (get("OMPI_COMM_WORLD_RANK"))
		err = from_ompi(get, s);
	else if (get("SLURM_PROCID") && get("SLURM_STEP_ID") && get("SLURM_STEP_NUM_TASKS"))
		err = from_slurm(get, s);
	else
		return RT_ENOTFOUND;
	if (!err && s->rank >= s->size)
		err = rt_fail(RT_EINVAL, "run: %s rank %u is not below its world size %u", s->engine,
			      s->rank, s->size);
	return err ? err : s->size > 1 ? RT_EOK : RT_ENOTFOUND;
}

unsigned kb_spmd_port(const char *job_id)
{
	uint32_t h = 2166136261u;

	for (const char *p = job_id; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return 20000u + h % 10000u;
}

enum rt_err kb_spmd_layout(uint32_t size, uint32_t ranks, struct kb_hosts *h)
{
	uint64_t timeout = h->agent_timeout_s;

	if (size > ranks)
		return rt_fail(RT_EUSAGE, "run: the launcher started %u processes for %u rank%s: each "
			       "process is a host of at least one rank (--ranks %u or more, or fewer "
			       "processes)", size, ranks, ranks == 1 ? "" : "s", size);
	if (size > KB_HOSTS_MAX_RANKS)
		return rt_fail(RT_EUSAGE, "run: %u processes: at most %d hosts", size,
			       KB_HOSTS_MAX_RANKS);
	memset(h, 0, sizeof(*h));
	h->agent_timeout_s = timeout ? timeout : 60;
	h->n_hosts = size;
	h->n_ranks = ranks;
	for (uint32_t host = 0; host < size; host++)
		for (uint32_t r = (uint32_t)((uint64_t)host * ranks / size);
		     r < (uint32_t)((uint64_t)(host + 1) * ranks / size); r++)
			h->host_of_rank[r] = host;
	return RT_EOK;
}

/* ---------------------------------------------------------------- where */

/* "tcp://A.B.C.D:PORT" into its address and port. */
static bool split_addr(const char *addr, struct in_addr *ip, unsigned *port)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	uint64_t p;

	if (strncmp(addr, "tcp://", 6) || !colon || colon - (addr + 6) >= (long)sizeof(host))
		return false;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - (addr + 6)), addr + 6);
	if (inet_pton(AF_INET, host, ip) != 1 || rt_parse_u64(colon + 1, 1, 65535, &p) != RT_PARSE_OK)
		return false;
	*port = (unsigned)p;
	return true;
}

/* Whether this node may listen on ip:port now (bound and released): 0, or
 * the errno of the bind. */
static int try_bind(struct in_addr ip, unsigned *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = ip,
				  .sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(sa);
	int one = 1, e = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		e = errno;
	else if (!getsockname(fd, (struct sockaddr *)&sa, &len))
		*port = ntohs(sa.sin_port);
	close(fd);
	return e;
}

/* The first IPv4 address of this node off loopback (what `hostname -I`
 * prints first), for a rendezvous across nodes without --coordinator. */
static bool first_address(char *out, size_t cap)
{
	struct ifaddrs *all, *i;
	bool found = false;

	if (getifaddrs(&all))
		return false;
	for (i = all; i && !found; i = i->ifa_next) {
		struct sockaddr_in *sa = (struct sockaddr_in *)i->ifa_addr;

		if (!sa || sa->sin_family != AF_INET || (ntohl(sa->sin_addr.s_addr) >> 24) == 127)
			continue;
		found = inet_ntop(AF_INET, &sa->sin_addr, out, (socklen_t)cap) != NULL;
	}
	freeifaddrs(all);
	return found;
}

/* Where process 0 listens when no rendezvous says it: --coordinator, else
 * loopback on one node, else the address srun was started from (process
 * 0's node under sbatch). Every process computes the same. */
static enum rt_err planned_addr(const struct kb_spmd *s, const struct kb_spmd_opts *o,
				bool rendezvous, char *addr, size_t cap)
{
	char ip[64];

	if (o->coordinator) {
		snprintf(addr, cap, "%s", o->coordinator);
		return RT_EOK;
	}
	if (s->one_node)
		snprintf(ip, sizeof(ip), "127.0.0.1");
	else if (s->launch_addr[0])
		snprintf(ip, sizeof(ip), "%s", s->launch_addr);
	else if (!rendezvous || !first_address(ip, sizeof(ip)))
		return rt_fail(RT_EUSAGE, "run: the %u processes %s started span several nodes and "
			       "it names no address for process 0: give --coordinator "
			       "tcp://ADDRESS:PORT (an address of process 0's node) or --rendezvous "
			       "DIR (a folder every node shares)", s->size, s->engine);
	snprintf(addr, cap, "tcp://%s:%u", ip, kb_spmd_port(s->job_id));
	return RT_EOK;
}

/* Process 0: the planned address, checked free here; with a rendezvous a
 * taken port gives way to one the system picks (the folder says which). */
static enum rt_err listen_addr(const struct kb_spmd *s, const struct kb_spmd_opts *o, char *addr,
			       size_t cap)
{
	struct in_addr ip;
	unsigned port = 0;
	int e;
	enum rt_err err = planned_addr(s, o, o->rendezvous != NULL, addr, cap);

	if (err)
		return err;
	if (!split_addr(addr, &ip, &port))
		return rt_fail(RT_EUSAGE, "run: coordinator %s: expected tcp://IPV4:PORT", addr);
	e = try_bind(ip, &port);
	if (e == EADDRINUSE && o->rendezvous && !o->coordinator) {
		port = 0;
		e = try_bind(ip, &port);
	}
	if (e == EADDRINUSE && o->coordinator)
		return rt_fail(RT_EIO, "run: --coordinator %s: the port is taken on this node", addr);
	if (e == EADDRINUSE)
		return rt_fail(RT_EIO, "run: %s is taken on this node (its port comes from %s's job "
			       "id %s): give --coordinator tcp://ADDRESS:PORT or --rendezvous DIR", addr,
			       s->engine, s->job_id);
	if (e)
		return rt_fail(RT_EIO, "run: process 0 of %s cannot listen on %s: %s%s", s->engine, addr,
			       strerror(e), e == EADDRNOTAVAIL ? " (not an address of this node: "
			       "process 0 runs elsewhere; give --coordinator or --rendezvous)" : "");
	snprintf(addr + 6, cap - 6, "%s:%u", inet_ntoa(ip), port);
	return RT_EOK;
}

/* ---------------------------------------------------------------- files */

/* DIR/kernbench-JOB.SUFFIX */
static void rendezvous_path(const struct kb_spmd *s, const char *dir, const char *suffix,
			    char *path, size_t cap)
{
	snprintf(path, cap, "%s/kernbench-%s.%s", dir, s->job_id, suffix);
}

/* A rendezvous folder is trusted as far as its writers are: it must be a
 * real folder of this user that no one else can write to. */
static enum rt_err check_rendezvous(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st))
		return rt_fail(RT_ECONFIG, "--rendezvous %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return rt_fail(RT_ECONFIG, "--rendezvous %s: must be a folder of this user that no one "
			       "else can write to (owner %u, mode %03o)", dir, (unsigned)st.st_uid,
			       (unsigned)(st.st_mode & 0777));
	return RT_EOK;
}

/* Writes `text` to `path` in one step (a reader sees all of it or none). */
static enum rt_err write_whole(const char *path, const char *text)
{
	char tmp[RT_PATH_MAX + 256];
	size_t n = strlen(text);
	int fd, e = 0;

	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		e = errno;
	else if (write(fd, text, n) != (ssize_t)n || fsync(fd))
		e = errno ? errno : EIO;
	if (fd >= 0 && close(fd) && !e)
		e = errno;
	if (!e && rename(tmp, path))
		e = errno;
	if (e) {
		unlink(tmp);
		return rt_fail(RT_EIO, "run: cannot write %s: %s", path, strerror(e));
	}
	return RT_EOK;
}

static void nap_ms(long ms)
{
	const struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Waits up to `wait_s` for `path` to be a regular file of this user. */
static enum rt_err await_file(const char *path, uint64_t wait_s, const char *what)
{
	struct stat st;

	for (uint64_t waited = 0; waited < wait_s * 10; waited++) {
		if (!lstat(path, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid())
			return RT_EOK;
		nap_ms(100);
	}
	return rt_fail(RT_ETIMEOUT, "agent: no %s at %s within %llu s: process 0 did not start, "
		       "or does not share this folder", what, path, (unsigned long long)wait_s);
}

/* An agent's coordinator, read from the rendezvous folder. */
static enum rt_err read_addr(const char *path, uint64_t wait_s, char *addr, size_t cap)
{
	struct in_addr ip;
	unsigned port;
	ssize_t n = -1;
	enum rt_err err = await_file(path, wait_s, "coordinator address");
	int fd = err ? -1 : open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (err)
		return err;
	if (fd >= 0) {
		n = read(fd, addr, cap - 1);
		close(fd);
	}
	addr[n > 0 ? n : 0] = '\0';
	addr[strcspn(addr, "\n")] = '\0';
	if (!split_addr(addr, &ip, &port))
		return rt_fail(RT_ECONFIG, "agent: %s: expected tcp://IPV4:PORT, not '%.60s'", path,
			       addr);
	return RT_EOK;
}

/* ---------------------------------------------------------------- roles */

/* Where the client side of process 0's keys is left (no --keys): the
 * rendezvous folder, or this user's private folder on one node. */
static enum rt_err keys_path(const struct kb_spmd *s, const struct kb_spmd_opts *o, char *path,
			     size_t cap)
{
	if (o->keys_path) {
		snprintf(path, cap, "%s", o->keys_path);
		return RT_EOK;
	}
	if (o->rendezvous) {
		rendezvous_path(s, o->rendezvous, "keys", path, cap);
		return RT_EOK;
	}
	if (!s->one_node)
		return rt_fail(RT_EUSAGE, "run: the %u processes %s started span several nodes: give "
			       "every one --keys FILE (`kernbench keygen`, the same path on every "
			       "node) or --rendezvous DIR (a shared folder: process 0 leaves its keys "
			       "there)", s->size, s->engine);
	/* one node: the coordinator's ephemeral keys, left for this user's
	 * agents on this machine as for any run across hosts (hostkeys.h) */
	path[0] = '\0';
	return RT_EOK;
}

struct spmd_files {
	char addr[256];
	char keys[RT_PATH_MAX + 128];
	char addr_file[RT_PATH_MAX + 128]; /* rendezvous: where addr is left */
	bool made_keys;                    /* keys drawn here: remove at the end */
};

static void withdraw(const struct spmd_files *f)
{
	kb_guard_file(0, NULL);
	kb_guard_file(1, NULL);
	if (f->addr_file[0])
		unlink(f->addr_file);
	if (f->made_keys)
		unlink(f->keys);
}

/* Process 0's host's agent: a child that dies with its parent. */
static pid_t start_own_agent(const struct spmd_files *f, uint64_t wait_s)
{
	char wait[24];
	char *argv[] = { (char *)"kernbench", (char *)"agent", (char *)"--coordinator",
			 (char *)f->addr, (char *)"--index", (char *)"0", (char *)"--agent-wait", wait,
			 (char *)"--keys", (char *)f->keys, NULL };
	pid_t parent = getpid();
	pid_t pid;

	snprintf(wait, sizeof(wait), "%llu", (unsigned long long)wait_s);
	if (!f->keys[0])
		argv[8] = NULL; /* the coordinator's ephemeral keys */
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

/* Whether `pid` ended within `ms` (reaped here, or already by the
 * coordinator's own reaping of its children). */
static bool ended_within(pid_t pid, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		pid_t got = waitpid(pid, NULL, WNOHANG);

		if (got == pid || (got < 0 && errno == ECHILD))
			return true;
		nap_ms(50);
	}
	return false;
}

/* The coordinator is done: its own host's agent ends soon after (it
 * confirmed its BYE, or was told to stop). After a failure it is asked
 * (SIGTERM: it removes its folders) and, as a last resort, killed. */
static void wait_own_agent(pid_t pid, bool failed)
{
	/* after a failure the engine may kill the whole job within a second
	 * (mpirun: SIGKILL 1 s after SIGTERM): it is told at once */
	if (!failed && ended_within(pid, OWN_AGENT_GRACE_S * 1000))
		return;
	kill(pid, SIGTERM);
	if (ended_within(pid, OWN_AGENT_GRACE_S * 1000))
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static enum rt_err prepare_coordinator(const struct kb_spmd *s, const struct kb_spmd_opts *o,
				       struct rt_job *job, struct spmd_files *f)
{
	char text[300];
	enum rt_err err = listen_addr(s, o, f->addr, sizeof(f->addr));

	if (!err)
		err = keys_path(s, o, f->keys, sizeof(f->keys));
	if (!err && !job->keys.on && f->keys[0]) {
		err = rt_keys_generate(&job->keys);
		if (!err)
			err = kb_hostkeys_publish_at(&job->keys, f->keys);
		f->made_keys = !err;
		kb_guard_file(0, f->made_keys ? f->keys : NULL);
	}
	if (!err && o->rendezvous) {
		rendezvous_path(s, o->rendezvous, "coordinator", f->addr_file, sizeof(f->addr_file));
		snprintf(text, sizeof(text), "%s\n", f->addr);
		err = write_whole(f->addr_file, text);
		if (err)
			f->addr_file[0] = '\0';
		kb_guard_file(1, err ? NULL : f->addr_file);
	}
	return err;
}

static int run_coordinator(const struct kb_spmd *s, const struct kb_spmd_opts *o,
			   struct rt_job *job, int argc, char **argv)
{
	static struct kb_hosts hosts;
	struct spmd_files f = { 0 };
	pid_t agent = -1;
	enum rt_err err;
	int rc;

	hosts.agent_timeout_s = o->agent_timeout_s;
	kb_guard_stops(); /* a stop signal from now on removes the files below */
	err = kb_spmd_layout(s->size, job->config.ranks, &hosts);
	if (!err)
		err = prepare_coordinator(s, o, job, &f);
	if (!err) {
		snprintf(hosts.coordinator, sizeof(hosts.coordinator), "%s", f.addr);
		err = kb_hosts_check(&hosts, job);
	}
	for (uint32_t r = 0; !err && r < hosts.n_ranks; r++)
		job->host_of_rank[r] = (uint8_t)hosts.host_of_rank[r];
	if (!err && (agent = start_own_agent(&f, hosts.agent_timeout_s)) < 0)
		err = rt_fail(RT_EIO, "run: cannot start process 0's agent: %s", strerror(errno));
	if (err) {
		withdraw(&f);
		rt_print_error(rt_last_error());
		return rt_exit_status(err);
	}
	/* the coordinator asks this agent to end with the run (SIGTERM),
	 * never kills it outright: it removes its own folders */
	kb_spare_child(agent);
	rc = kb_launch(job, &hosts, argc, argv);
	wait_own_agent(agent, rc != 0);
	withdraw(&f);
	return rc;
}

static int run_agent(const struct kb_spmd *s, const struct kb_spmd_opts *o,
		     const struct rt_job *job)
{
	static struct kb_hosts hosts; /* only checked: process 0 places the ranks */
	uint64_t wait_s = o->agent_timeout_s ? o->agent_timeout_s : WAIT_S_DEFAULT;
	struct spmd_files f = { 0 };
	char index[16], wait[24], where[RT_PATH_MAX + 128];
	char *argv[] = { (char *)"agent", (char *)"--coordinator", f.addr, (char *)"--index", index,
			 (char *)"--agent-wait", wait, (char *)"--keys", f.keys, NULL };
	enum rt_err err;

	snprintf(index, sizeof(index), "%u", s->rank);
	snprintf(wait, sizeof(wait), "%llu", (unsigned long long)wait_s);
	/* what process 0 refuses, every process refuses alike */
	err = kb_spmd_layout(s->size, job->config.ranks, &hosts);
	if (!err && o->rendezvous) {
		rendezvous_path(s, o->rendezvous, "coordinator", where, sizeof(where));
		err = read_addr(where, wait_s, f.addr, sizeof(f.addr));
	} else if (!err) {
		err = planned_addr(s, o, false, f.addr, sizeof(f.addr));
	}
	if (!err)
		err = keys_path(s, o, f.keys, sizeof(f.keys));
	if (!err && !o->keys_path && f.keys[0])
		err = await_file(f.keys, wait_s, "keys");
	if (err) {
		rt_print_error(rt_last_error());
		return rt_exit_status(err);
	}
	return kb_agent_main(f.keys[0] ? 9 : 7, argv);
}

int kb_spmd_run(const struct kb_spmd *s, const struct kb_spmd_opts *o, struct rt_job *job,
		int argc, char **argv)
{
	enum rt_err err = o->rendezvous ? check_rendezvous(o->rendezvous) : RT_EOK;

	if (err) {
		rt_print_error(rt_last_error());
		return 2;
	}
	return s->rank == 0 ? run_coordinator(s, o, job, argc, argv) : run_agent(s, o, job);
}
