/* job.c — the number parser every user value goes through, workload
 * argument lookup, option names, and handing the resolved job to daemons. */
#include "rt/job.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/buf.h"

const char *rt_job_arg_str(const struct rt_job *job, const char *name, const char *def)
{
	/* the last --arg of a name wins, as on most command lines */
	for (uint32_t i = job->n_args; i-- > 0;)
		if (!strcmp(job->args[i].name, name))
			return job->args[i].value;
	return def;
}

enum rt_err rt_job_arg_u64(const struct rt_job *job, const char *name, uint64_t def,
			   uint64_t min, uint64_t max, uint64_t *out)
{
	const char *v = rt_job_arg_str(job, name, NULL);

	*out = def;
	if (!v || rt_parse_u64(v, min, max, out) == RT_PARSE_OK)
		return RT_EOK;
	return rt_fail(RT_EUSAGE, "--arg %s=%.40s%s: expected a decimal whole number from %llu to %llu",
		       name, v, strlen(v) > 40 ? "..." : "", (unsigned long long)min,
		       (unsigned long long)max);
}

enum rt_err rt_transport_parse(const char *s, enum rt_transport *out)
{
	static const char *const names[] = { "inproc", "ipc", "tcp" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum rt_transport)i;
			return RT_EOK;
		}
	return rt_fail(RT_EUSAGE, "--transport '%s': expected inproc, ipc or tcp", s);
}

enum rt_err rt_progress_parse(const char *s, enum rt_progress *out)
{
	static const char *const names[] = { "auto", "bar", "plain", "off" };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum rt_progress)i;
			return RT_EOK;
		}
	return rt_fail(RT_EUSAGE, "--progress '%.40s': expected auto, bar, plain or off", s);
}

const char *rt_transport_name(enum rt_transport t)
{
	static const char *const names[] = { "inproc", "ipc", "tcp" };

	return (unsigned)t < 3 ? names[t] : "?";
}

/* ---------------------------------------------------------------- sharing */

/* What travels to a daemon: the job bytes framed so a stray descriptor
 * number or a different binary is caught instead of believed. The daemon
 * is the same executable (/proc/self/exe), so the struct layout matches. */
struct job_frame {
	uint64_t magic;
	uint64_t size;     /* sizeof(struct rt_job) */
	uint64_t checksum; /* rt_hash of the job bytes */
};

#define JOB_MAGIC 0x6b626a6f62763031ULL /* "kbjobv01" */

/* The job as `role` may see it (rt/job.h): never the server secret. */
static void job_for(const struct rt_job *job, enum rt_job_role role, struct rt_job *out)
{
	*out = *job;
	rt_keys_client_side(&job->keys, &out->keys);
	if (role == RT_JOB_FOR_DAEMON)
		return;
	explicit_bzero(&out->keys, sizeof(out->keys));
	for (size_t i = 0; i < sizeof(out->hbm_fds) / sizeof(out->hbm_fds[0]); i++)
		out->hbm_fds[i] = -1;
	for (size_t i = 0; i < sizeof(out->tcm_fds) / sizeof(out->tcm_fds[0]); i++)
		out->tcm_fds[i] = -1;
}

static enum rt_err write_job(int fd, const struct rt_job *job, const struct rt_topology *topo)
{
	struct job_frame fr = { JOB_MAGIC, sizeof(*job), rt_hash(RT_HASH_INIT, job, sizeof(*job)) };

	if (write(fd, &fr, sizeof(fr)) != (ssize_t)sizeof(fr) ||
	    write(fd, job, sizeof(*job)) != (ssize_t)sizeof(*job) ||
	    (topo && rt_topology_write(topo, fd)) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL))
		return rt_fail(RT_EIO, "cannot write the job file for the daemons: %s",
			       strerror(errno));
	return RT_EOK;
}

enum rt_err rt_job_share(const struct rt_job *job, enum rt_job_role role,
			 const struct rt_topology *topo, int *fd_out)
{
	struct rt_job *seen = malloc(sizeof(*seen)); /* large: not on the stack */
	int fd = seen ? memfd_create("kb-job", MFD_ALLOW_SEALING) : -1;
	enum rt_err err;

	if (!seen)
		return rt_fail(RT_ENOMEM, "cannot allocate the job file for the daemons");
	if (fd < 0) {
		free(seen);
		return rt_fail(RT_EIO, "cannot create the job file for the daemons: %s",
			       strerror(errno));
	}
	job_for(job, role, seen);
	err = write_job(fd, seen, topo);
	explicit_bzero(&seen->keys, sizeof(seen->keys));
	free(seen);
	if (err) {
		close(fd);
		return err;
	}
	*fd_out = fd;
	return RT_EOK;
}

void rt_job_forget_secret(struct rt_job *job)
{
	explicit_bzero(job->keys.server_secret, sizeof(job->keys.server_secret));
}

/* Whether `len` bytes at `p` hold a NUL. */
static bool terminated(const char *p, size_t len)
{
	return memchr(p, '\0', len) != NULL;
}

/* A bool read from bytes is 0 or 1, or reading it is undefined. */
static bool is_bool(const void *p)
{
	unsigned char c;

	memcpy(&c, p, 1);
	return c <= 1;
}

enum rt_err rt_job_check(const struct rt_job *job)
{
	const void *bools[] = { &job->trace_windows, &job->trace_off, &job->quiet,
				&job->trace.no_flows, &job->keys.on };
	const struct rt_keys *k = &job->keys;

	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
		if (!is_bool(bools[i]))
			return rt_fail(RT_EDECODE, "job: a flag is neither true nor false");
	if (!terminated(job->workload, sizeof(job->workload)) ||
	    !terminated(job->out_dir, sizeof(job->out_dir)) ||
	    !terminated(job->result_dir, sizeof(job->result_dir)) ||
	    !terminated(job->inputs_dir, sizeof(job->inputs_dir)) ||
	    !terminated(k->server_public, sizeof(k->server_public)) ||
	    !terminated(k->server_secret, sizeof(k->server_secret)) ||
	    !terminated(k->client_public, sizeof(k->client_public)) ||
	    !terminated(k->client_secret, sizeof(k->client_secret)))
		return rt_fail(RT_EDECODE, "job: a path or a key does not end inside its field");
	if ((unsigned)job->transport > RT_TRANSPORT_TCP || (unsigned)job->colocate > RT_COLOCATE_ALL ||
	    (unsigned)job->mode > RT_MODE_DATA || (unsigned)job->trace.format > RT_TRACE_PERFETTO ||
	    (unsigned)job->ff_mode > RT_FF_AUTO)
		return rt_fail(RT_EDECODE, "job: transport, colocation, mode, trace format or fast-forward mode out of range");
	if (job->n_args > RT_MAX_ARGS)
		return rt_fail(RT_EDECODE, "job: %u arguments (at most %d)", job->n_args, RT_MAX_ARGS);
	for (uint32_t i = 0; i < job->n_args; i++)
		if (!terminated(job->args[i].name, sizeof(job->args[i].name)) ||
		    !terminated(job->args[i].value, sizeof(job->args[i].value)))
			return rt_fail(RT_EDECODE, "job: argument %u does not end inside its field", i);
	for (size_t r = 0; r < sizeof(job->host_of_rank); r++)
		if (job->host_of_rank[r] >= RT_MAX_RANKS)
			return rt_fail(RT_EDECODE, "job: rank %zu is on host %u (at most %d hosts)", r,
				       job->host_of_rank[r], RT_MAX_RANKS);
	if (rt_config_validate(&job->config))
		return rt_fail(RT_EDECODE, "job: %s", rt_last_error());
	return RT_EOK;
}

enum rt_err rt_job_adopt(int fd, struct rt_job *job)
{
	struct job_frame fr;
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)(sizeof(fr) + sizeof(*job)) ||
	    pread(fd, &fr, sizeof(fr), 0) != (ssize_t)sizeof(fr) ||
	    pread(fd, job, sizeof(*job), (off_t)sizeof(fr)) != (ssize_t)sizeof(*job))
		return rt_fail(RT_EDECODE, "daemon: descriptor %d is not the launcher's job file", fd);
	if (fr.magic != JOB_MAGIC || fr.size != sizeof(*job) ||
	    fr.checksum != rt_hash(RT_HASH_INIT, job, sizeof(*job)))
		return rt_fail(RT_EDECODE, "daemon: the job file is corrupt or from another build");
	/* whole and summed, and still outside bytes to an agent: checked */
	return rt_job_check(job);
}

enum rt_err rt_job_topology(int fd, struct rt_topology *topo)
{
	struct stat st;

	/* a job file without a topology after the job: the launcher did not
	 * share one */
	if (fstat(fd, &st) || st.st_size <= (off_t)(sizeof(struct job_frame) + sizeof(struct rt_job)))
		return RT_ENOTFOUND;
	return rt_topology_map(fd, sizeof(struct job_frame) + sizeof(struct rt_job), topo);
}
